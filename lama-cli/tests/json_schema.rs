//! `lama map --json` has one schema for every layout: a layout led by `g` fills the GPU fields
//! of the same objects, and adds no field and drops none.

use assert_cmd::Command;
use serde_json::Value;
use std::collections::BTreeSet;

fn map_json(args: &[&str]) -> Value {
    let topology = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../tests/topologies/io/coral-lassen.xml"
    );
    let out = Command::cargo_bin("lama")
        .unwrap()
        .args(["map", "--topology", topology, "--json"])
        .args(args)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    serde_json::from_slice(&out.stdout).unwrap()
}

fn keys(v: &Value) -> BTreeSet<String> {
    v.as_object()
        .map(|o| o.keys().cloned().collect())
        .unwrap_or_default()
}

#[test]
fn gpu_layouts_fill_the_same_schema() {
    let cpu = map_json(&["-n4", "--map", "csbnh", "--env"]);
    let gpu = map_json(&["-n4", "--map", "gcsbnh", "--env"]);
    let top = [
        "devices",
        "nodes",
        "notes",
        "processes",
        "request",
        "tasks_per_node",
    ];
    assert_eq!(keys(&cpu), top.iter().map(|k| k.to_string()).collect());
    assert_eq!(keys(&cpu), keys(&gpu));
    assert_eq!(keys(&cpu["nodes"][0]), keys(&gpu["nodes"][0]));
    assert_eq!(keys(&cpu["devices"][0]), keys(&gpu["devices"][0]));
    assert_eq!(cpu["tasks_per_node"], gpu["tasks_per_node"]);
    // The GPU fields are added to a process and to the request, nothing else differs.
    let (c, g) = (keys(&cpu["processes"][0]), keys(&gpu["processes"][0]));
    assert!(c.is_subset(&g), "{c:?} {g:?}");
    let added: BTreeSet<String> = g.difference(&c).cloned().collect();
    assert_eq!(
        added,
        ["gpu_bus_ids", "gpus", "nic"].map(String::from).into()
    );
    let (c, g) = (keys(&cpu["request"]), keys(&gpu["request"]));
    assert_eq!(
        g.difference(&c).cloned().collect::<BTreeSet<_>>(),
        ["gpu".to_string()].into()
    );
    // The LAMA_* variables are in both.
    for v in [&cpu, &gpu] {
        assert!(v["processes"][0]["env"]["LAMA_CPUS"].is_string(), "{v}");
    }
}

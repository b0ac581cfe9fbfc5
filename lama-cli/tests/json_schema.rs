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

/// `--json` carries the binding the tasks get, as the text's header names it: on g4dn (two
/// packages of 24 cores, 4 GPUs near each) four tasks of gcsbnh go two to a package, each its
/// share of the package: 12 cores, by hand (the request's 1c is only the default asked for).
#[test]
fn the_json_names_the_binding_the_tasks_get() {
    let topology = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../tests/topologies/io/g4dnmetal.xml"
    );
    let run = |json: bool| {
        let mut cmd = Command::cargo_bin("lama").unwrap();
        cmd.args(["map", "--topology", topology, "-n4", "--map", "gcsbnh"]);
        if json {
            cmd.arg("--json");
        }
        let out = cmd.output().unwrap();
        assert!(out.status.success(), "{out:?}");
        String::from_utf8(out.stdout).unwrap()
    };
    let v: Value = serde_json::from_str(&run(true)).unwrap();
    assert_eq!(v["request"]["bind"], "12c", "{v}");
    assert!(v["processes"][0].get("bind").is_none(), "{v}");
    assert!(
        run(false).starts_with("layout gcsbnh binding 12c "),
        "{}",
        run(false)
    );
    // Three tasks on Lassen (two packages of 20 cores, two GPUs near each): two share package
    // 0 (10 cores each), one has package 1 (20): each process names its own.
    let v = map_json(&["-n3", "--map", "gcsbnh"]);
    let binds: Vec<&str> = (0..3)
        .map(|r| v["processes"][r]["bind"].as_str().unwrap_or("none"))
        .collect();
    assert_eq!(binds, ["10c", "10c", "20c"], "{v}");
}

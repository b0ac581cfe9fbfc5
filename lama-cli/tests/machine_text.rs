//! `lama map` reads the machine text of the plugin's topology cache (`lama_topology.machine`,
//! what steps read) and previews exactly what it previews from the XML it was made from.

use assert_cmd::Command;

fn map(topology: &str, args: &[&str]) -> String {
    let out = Command::cargo_bin("lama")
        .unwrap()
        .args(["map", "--topology", topology, "--json"])
        .args(args)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    v["processes"].to_string()
}

#[test]
fn a_machine_text_previews_as_its_xml() {
    let xml = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../tests/topologies/io/coral-lassen.xml"
    );
    assert!(std::path::Path::new(xml).is_file(), "{xml} is missing");
    let m = lama_hwloc::load(&lama_hwloc::Source::Xml(xml.into())).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let text = dir.path().join("lama_topology.machine");
    std::fs::write(&text, m.to_text()).unwrap();
    let text = text.to_str().unwrap();
    for args in [
        &["-n8", "--map", "scbnh"][..],
        &["-n4", "--map", "gcsbnh", "--env"][..],
    ] {
        let (a, b) = (map(xml, args), map(text, args));
        assert!(a.len() > 20, "{a}");
        assert_eq!(a, b, "{args:?}");
    }
    // A damaged text is refused with its line.
    std::fs::write(text, "lama-machine 1\npus\t0 x\n").unwrap();
    let out = Command::cargo_bin("lama")
        .unwrap()
        .args(["map", "--topology", text, "-n1", "--map", "scbnh"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("line 2: 'x' is not a CPU"), "{err}");
}

//! Open MPI's LAMA documented a default MPPR of `1:c` it never applied and called tokens
//! required that were not (SPEC §2.9). Our help text must say what the code does.

use assert_cmd::Command;
use lama_engine::{Bind, Layout, Mppr, Request};

fn help() -> String {
    let out = Command::cargo_bin("lama")
        .unwrap()
        .args(["map", "--help"])
        .output()
        .unwrap();
    assert!(out.status.success());
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn help_text_matches_behaviour() {
    let text = help();
    // No MPPR by default, and the engine's default request has none.
    assert!(text.contains("Default: no limit"), "{text}");
    assert!(Request::new(Layout::parse("scbnh").unwrap(), 1)
        .mppr
        .is_empty());
    // The default binding is 1c, in the help and in the engine.
    assert!(text.contains("[default: 1c, or with"), "{text}");
    assert_eq!(Bind::default(), Bind::parse("1c").unwrap());
    // Every alias the help names is accepted.
    for alias in [
        "hwthread", "core", "l1cache", "l2cache", "l3cache", "numa", "socket", "node",
    ] {
        assert!(text.contains(alias), "{alias} missing from help");
        Layout::parse(alias).unwrap();
        Bind::parse(alias).unwrap();
    }
    assert!(Mppr::parse("1:c").is_ok());
}

#[test]
fn n_and_h_are_optional_as_documented() {
    // The layout help of the plugin and the README say n and h are appended when missing.
    assert_eq!(Layout::parse("sc").unwrap().to_string(), "scnh");
    let out = Command::cargo_bin("lama")
        .unwrap()
        .args([
            "map",
            "--topology",
            "pack:1 core:2 pu:1",
            "--np",
            "2",
            "--map",
            "c",
            "--json",
        ])
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.starts_with(
            "{\"processes\":[{\"rank\":0,\"node\":0,\"pu\":0,\"cpus\":[0]},{\"rank\":1,\"node\":0,\"pu\":1,\"cpus\":[1]}],"
        ),
        "{text}"
    );
    // The layout as placed: c with n and h appended.
    assert!(text.contains("\"layout\":\"cnh\""), "{text}");
}

#[test]
fn shells_complete_the_aliases_of_map_and_bind_not_files() {
    for shell in ["bash", "zsh", "fish"] {
        let out = Command::cargo_bin("lama")
            .unwrap()
            .args(["completions", shell])
            .output()
            .unwrap();
        assert!(out.status.success());
        let script = String::from_utf8(out.stdout).unwrap();
        // Every map alias, and the binding's "none", offered as a completion word.
        for (alias, _) in lama_engine::MAP_ALIASES {
            assert!(script.contains(alias), "{shell}: {alias}");
        }
        assert!(
            script.contains("l2cache l3cache numa socket node none")
                || script.contains(r"none\t")
                || script.contains("\"none\""),
            "{shell}: bind's none"
        );
        // The hidden manpage subcommand is not offered.
        assert!(!script.contains("manpage"), "{shell}");
    }
    // Any layout is still accepted (the aliases are suggestions, not the only values).
    Command::cargo_bin("lama")
        .unwrap()
        .args([
            "map",
            "--topology",
            "pack:1 core:2 pu:1",
            "-n",
            "1",
            "--map",
            "cs",
        ])
        .assert()
        .success();
}

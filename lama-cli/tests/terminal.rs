//! `lama map` on a real terminal of 80 and 132 columns (util-linux `script` gives the command a
//! pseudo-terminal, `stty cols` its width), as a person would run it: on a 16-PU node, a
//! 128-PU node and a GPU node, no line is wider than the terminal and a picture is always
//! shown (the compact one where the full one does not fit).

use std::path::{Path, PathBuf};
use std::process::Command;

fn topology(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/topologies")
        .join(name)
}

/// What `lama map ARGS` prints on a terminal of `cols` columns, without colour escapes.
fn on_terminal(cols: usize, args: &[&str]) -> String {
    let mut all = vec!["map"];
    all.extend_from_slice(args);
    lama_on_terminal(cols, &all)
}

/// What `lama ARGS` prints on a terminal of `cols` columns, without colour escapes.
fn lama_on_terminal(cols: usize, args: &[&str]) -> String {
    let lama = env!("CARGO_BIN_EXE_lama");
    let quoted: Vec<String> = args.iter().map(|a| format!("'{a}'")).collect();
    let inner = format!("stty cols {cols} rows 60; '{lama}' {}", quoted.join(" "));
    let out = Command::new("script")
        .args(["-qec", &inner, "/dev/null"])
        .env("NO_COLOR", "1")
        .output()
        .expect("util-linux's script runs the command on a pseudo-terminal");
    assert!(out.status.success(), "{inner}: {out:?}");
    let text = String::from_utf8_lossy(&out.stdout).replace('\r', "");
    strip_escapes(&text)
}

fn strip_escapes(text: &str) -> String {
    let mut out = String::new();
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            for d in chars.by_ref() {
                if d.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

#[test]
fn every_line_fits_the_terminal_and_a_picture_is_shown() {
    let zen3 = topology("AMD-19h-Zen3-2xEpyc-7763.xml");
    let lassen = topology("io/coral-lassen.xml");
    let ninety_six = topology("96em64t-4no4pa3ca2co.xml");
    let cases: [(&str, Vec<&str>); 6] = [
        (
            "16 PUs",
            vec![
                "--topology",
                "pack:2 core:4 pu:2",
                "-n",
                "6",
                "--map",
                "scbnh",
            ],
        ),
        (
            "128 PUs",
            vec![
                "--topology",
                zen3.to_str().unwrap(),
                "-n",
                "16",
                "--map",
                "L3csbnh",
            ],
        ),
        (
            "GPU node",
            vec![
                "--topology",
                lassen.to_str().unwrap(),
                "-n",
                "4",
                "--map",
                "gcsbnh",
            ],
        ),
        (
            "GPU node, CPU layout",
            vec![
                "--topology",
                lassen.to_str().unwrap(),
                "-n",
                "4",
                "--map",
                "csbnh",
            ],
        ),
        (
            "Slurm's own",
            vec!["--topology", zen3.to_str().unwrap(), "-n", "8", "--slurm"],
        ),
        (
            "Slurm's own beside a layout",
            vec![
                "--topology",
                ninety_six.to_str().unwrap(),
                "--compare",
                "--",
                "srun",
                "-n4",
                "--cpu-bind=ldoms",
                "--lama-map=Nscbnh",
                "./a",
            ],
        ),
    ];
    for cols in [80, 132] {
        for (what, args) in &cases {
            let text = on_terminal(cols, args);
            assert!(
                text.lines().count() > 5,
                "{what} at {cols}: too little output:\n{text}"
            );
            for line in text.lines() {
                assert!(
                    line.chars().count() <= cols,
                    "{what} at {cols} columns: a line of {} characters:\n{line}\n{text}",
                    line.chars().count()
                );
            }
            if what.starts_with("Slurm's own beside") {
                // The comparison names where each task runs in words, not pictures.
                assert!(text.contains("s0-3  N0"), "{what} at {cols}:\n{text}");
                continue;
            }
            if *what == "Slurm's own" {
                // Each task's sockets, NUMA nodes and cores, with a picture where it fits.
                assert!(
                    text.contains("s0-1  N0    c0-127"),
                    "{what} at {cols}:\n{text}"
                );
                continue;
            }
            // A picture column with a cell in every row: the full one ([...]) or the compact
            // one (package[P][...]).
            assert!(
                text.contains("picture") && (text.contains("][") || text.contains("package[")),
                "{what} at {cols}: no picture:\n{text}"
            );
        }
    }
}

#[test]
fn lama_topology_folds_its_picture_to_the_terminal() {
    for name in ["256ppc-8n8s4t.xml", "AMD-19h-Zen3-2xEpyc-7763.xml"] {
        let t = topology(name);
        let text = lama_on_terminal(80, &["topology", t.to_str().unwrap()]);
        assert!(text.contains("picture:\n  ["), "{name}:\n{text}");
        for line in text.lines() {
            assert!(line.chars().count() <= 80, "{name}: {line}");
        }
    }
}

#[test]
fn lama_plan_fits_the_terminal() {
    let golden = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden");
    let file = |n: &str| golden.join(n).to_str().unwrap().to_string();
    let (matrix, network) = (file("ring6.mat"), file("net3.conf"));
    let text = lama_on_terminal(
        80,
        &[
            "plan",
            "--matrix",
            &matrix,
            "--np",
            "6",
            "--topology",
            "pack:2 core:2 pu:1",
            "--node-names",
            "node[1-3]",
            "--network",
            &network,
            "--explain",
        ],
    );
    assert!(text.contains("no plan needed"), "{text}");
    for line in text.lines() {
        assert!(line.chars().count() <= 80, "lama plan: {line}\n{text}");
    }
}

#[test]
fn help_is_wrapped_to_the_terminal() {
    for args in [
        &["-h"][..],
        &["--help"],
        &["map", "-h"],
        &["map", "--help"],
        &["plan", "-h"],
        &["exec", "-h"],
        &["verify", "-h"],
        &["topology", "-h"],
    ] {
        let text = lama_on_terminal(80, args);
        assert!(
            text.lines().count() > 5,
            "{args:?}: too little output:\n{text}"
        );
        // -h fits one screen; --help has all of it.
        if args.last() == Some(&"-h") {
            assert!(
                text.lines().count() <= 55,
                "lama {args:?}: {} lines, more than a screen:\n{text}",
                text.lines().count()
            );
        }
        for line in text.lines() {
            assert!(
                line.chars().count() <= 80,
                "lama {args:?} at 80 columns: a line of {} characters:\n{line}",
                line.chars().count()
            );
        }
    }
}

/// The texts written for the terminal (the layout language, the examples, the exit statuses)
/// come out at 80 columns as at 200: each line fits, so clap has nothing to wrap and no line
/// breaks mid-phrase or loses its indent.
#[test]
fn texts_written_for_80_columns_are_not_wrapped_again() {
    for (args, from) in [
        (&["--help"][..], "Examples:"),
        (&["map", "--help"], "The layout (--map) is"),
    ] {
        let tail = |cols| {
            let text = lama_on_terminal(cols, args);
            let at = text
                .find(from)
                .unwrap_or_else(|| panic!("lama {args:?}: no {from:?} in\n{text}"));
            text[at..].to_string()
        };
        let (narrow, wide) = (tail(80), tail(200));
        assert!(narrow.lines().count() > 10, "lama {args:?}:\n{narrow}");
        assert_eq!(narrow, wide, "lama {args:?}: wrapped again at 80 columns");
    }
}

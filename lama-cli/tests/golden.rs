//! Golden files: each `golden/NAME.args` holds the arguments of one `lama` run (one per line;
//! `$TOPO` stands for the repository's tests/topologies, `$GOLDEN` for this folder's input files), and `golden/NAME.out` what it printed
//! and its exit status. `UPDATE_GOLDEN=1 cargo test -p lama-cli --test golden` rewrites the
//! `.out` files; review the diff before committing.

use assert_cmd::Command;
use std::path::{Path, PathBuf};

fn golden_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden")
}

fn topologies() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/topologies")
}

fn run_case(args_file: &Path) -> String {
    let text = std::fs::read_to_string(args_file).unwrap();
    let topo = topologies();
    let args: Vec<String> = text
        .lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
        .map(|l| {
            l.replace("$TOPO", &topo.to_string_lossy())
                .replace("$GOLDEN", &golden_dir().to_string_lossy())
        })
        .collect();
    assert!(
        !text.contains("$TOPO") || topo.is_dir(),
        "{}: the test topologies are not at {}",
        args_file.display(),
        topo.display()
    );
    // (No COLUMNS: a terminal's width would wrap the prose; the goldens are a pipe's output.)
    let out = Command::cargo_bin("lama")
        .unwrap()
        .args(&args)
        .env_remove("COLUMNS")
        .output()
        .unwrap();
    let clean = |b: &[u8]| {
        String::from_utf8_lossy(b)
            .replace(&*topo.to_string_lossy(), "$TOPO")
            .replace(&*golden_dir().to_string_lossy(), "$GOLDEN")
    };
    format!(
        "$ lama {}\nexit: {}\n--- stdout\n{}--- stderr\n{}",
        text.lines()
            .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
            .map(|l| if l.contains(' ') {
                format!("'{l}'")
            } else {
                l.to_string()
            })
            .collect::<Vec<_>>()
            .join(" "),
        out.status.code().unwrap_or(-1),
        clean(&out.stdout),
        clean(&out.stderr)
    )
}

#[test]
fn golden_files() {
    let update = std::env::var_os("UPDATE_GOLDEN").is_some();
    let mut cases: Vec<PathBuf> = std::fs::read_dir(golden_dir())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "args"))
        .collect();
    cases.sort();
    assert!(
        cases.len() >= 20,
        "golden cases missing from {}",
        golden_dir().display()
    );
    let mut failures = Vec::new();
    for case in &cases {
        let actual = run_case(case);
        let expected_path = case.with_extension("out");
        if update {
            std::fs::write(&expected_path, &actual).unwrap();
            continue;
        }
        let expected = std::fs::read_to_string(&expected_path).unwrap_or_default();
        if expected != actual {
            failures.push(format!(
                "{}\n--- expected\n{expected}\n--- actual\n{actual}",
                case.display()
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "{} golden case(s) differ (UPDATE_GOLDEN=1 to rewrite):\n{}",
        failures.len(),
        failures.join("\n")
    );
}

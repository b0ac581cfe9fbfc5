//! The engine is the placement algorithm and its language only (ARCHITECTURE.md): no Slurm,
//! no file formats, no manual pages, no I/O, no FFI. This test reads the engine's sources and
//! fails when one of them names something from outside, so that the invariant cannot rot.
//! (hwloc may be named: the model follows its vocabulary and logical order, without linking it,
//! which the dependency check below keeps true.)

use std::path::Path;

/// Words (matched case-insensitively) that belong to other crates, with where they belong.
const FORBIDDEN: [(&str, &str); 16] = [
    ("slurm", "Slurm's semantics live in lama-slurm"),
    ("srun", "Slurm's commands live in lama-slurm and spank-lama"),
    (
        "sbatch",
        "Slurm's commands live in lama-slurm and spank-lama",
    ),
    (
        "salloc",
        "Slurm's commands live in lama-slurm and spank-lama",
    ),
    ("spank", "the plugin is spank-lama"),
    ("roff", "manual pages are lama-man's"),
    ("lama-plan ", "plan files are lama-planfile's"),
    ("std::fs", "the engine does no I/O"),
    ("std::env", "the engine reads no environment"),
    ("std::process", "the engine runs nothing"),
    ("std::net", "the engine does no I/O"),
    ("std::io::read", "the engine does no I/O"),
    ("std::thread", "the engine starts no thread"),
    ("extern \"c\"", "the engine has no FFI"),
    ("#[link", "the engine has no FFI"),
    ("unsafe ", "the engine has no unsafe code"),
];

fn sources(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("the engine's sources") {
        let path = entry.expect("a directory entry").path();
        if path.is_dir() {
            sources(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

#[test]
fn the_engine_names_nothing_from_outside() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    sources(&src, &mut files);
    assert!(
        files.len() >= 8,
        "only {} source files under {}",
        files.len(),
        src.display()
    );
    let mut found = Vec::new();
    for file in &files {
        let text = std::fs::read_to_string(file)
            .expect("a source file")
            .to_lowercase();
        for (n, line) in text.lines().enumerate() {
            for (word, home) in FORBIDDEN {
                if line.contains(word) {
                    found.push(format!("{}:{}: '{word}' ({home})", file.display(), n + 1));
                }
            }
        }
    }
    assert!(
        found.is_empty(),
        "the engine names what is not its own:\n{}",
        found.join("\n")
    );
}

#[test]
fn the_engine_depends_on_nothing_from_outside() {
    let manifest =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("Cargo.toml"))
            .expect("the engine's manifest");
    let deps = manifest
        .split("[dependencies]")
        .nth(1)
        .and_then(|rest| rest.split("\n[").next())
        .expect("a [dependencies] table");
    let names: Vec<&str> = deps
        .lines()
        .filter_map(|l| l.split(['.', '=', ' ']).next())
        .filter(|n| !n.is_empty() && !n.starts_with('#'))
        .collect();
    assert_eq!(names, ["thiserror", "serde"], "the engine's dependencies");
}

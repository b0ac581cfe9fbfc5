//! The admin's documents say what the code does: what a site default that cannot be placed
//! leaves the step with (`on_default_failure=warn`, and an `optional` plugin's failures), and
//! what `%n` stands for in `topology=`. Each check reads the code's own words and the
//! documents' sentences about the same thing.

use std::path::Path;

fn read(path: &str) -> String {
    let top = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    std::fs::read_to_string(top.join(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// The lines of `text` from the first that contains `start`, `count` of them, joined as one
/// sentence (comment marks and Rust's line continuations taken off).
fn passage(text: &str, start: &str, count: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    let at = lines
        .iter()
        .position(|l| l.contains(start))
        .unwrap_or_else(|| panic!("no line with {start:?}"));
    lines[at..(at + count).min(lines.len())]
        .iter()
        .map(|l| {
            l.trim()
                .trim_start_matches('#')
                .trim_end_matches('\\')
                .trim()
        })
        .collect::<Vec<_>>()
        .join(" ")
}

#[test]
fn a_site_default_that_cannot_be_placed_leaves_slurms_binding_everywhere() {
    // The code: the warning the plugin prints, and what it leaves the tasks with.
    let plugin = read("spank-lama/src/plugin.rs");
    assert!(
        plugin.contains("tasks run with Slurm's binding"),
        "plugin.rs no longer says what on_default_failure=warn leaves"
    );
    // The documents, each on the same two cases (the site default with warn, an optional
    // plugin's failure): Slurm's binding, never "unbound".
    let example = read("plugstack.conf.example");
    let admin = read("docs/admin.md");
    let manual = read("spank-lama/src/manual.rs");
    for (what, text) in [
        (
            "plugstack.conf.example on_default_failure",
            passage(&example, "on_default_failure=warn", 3),
        ),
        (
            "plugstack.conf.example optional",
            passage(&example, "\"optional\" plugin, so with", 2),
        ),
        (
            "docs/admin.md on_default_failure",
            passage(&admin, "**`on_default_failure=`:**", 3),
        ),
        (
            "docs/admin.md required",
            passage(&admin, "`required`, not `optional`", 2),
        ),
        (
            "docs/admin.md pilot",
            passage(&admin, "The price: a bad `--lama-*` value", 1),
        ),
        (
            "spank-lama(8) required",
            passage(&manual, "The plugin line should say required", 3),
        ),
        (
            "spank-lama(8) site default",
            passage(&manual, "a site default that cannot be placed", 2),
        ),
    ] {
        assert!(text.contains("Slurm's binding"), "{what}: {text}");
        assert!(!text.contains("unbound"), "{what} says unbound: {text}");
    }
}

#[test]
fn percent_n_is_the_node_name_slurmd_has() {
    // The code expands %n with the node's name as slurmd has it (SLURMD_NODENAME).
    let config = read("spank-lama/src/config.rs");
    assert!(
        config.contains("`%n` standing for the node name"),
        "config.rs"
    );
    let example = read("plugstack.conf.example");
    let line = passage(
        &example,
        "topology=                     hwloc XML of the node",
        1,
    );
    assert!(line.contains("%n = the node's NodeName"), "{line}");
    let readme = read("README.md");
    assert!(readme.contains("`%n` is the node's `NodeName`, as slurmd has it"));
}

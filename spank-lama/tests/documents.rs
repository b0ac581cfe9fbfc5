//! The admin's documents say what the code does: what a site default that cannot be placed
//! leaves the step with (`on_default_failure=warn`, and an `optional` plugin's failures), and
//! what `%n` stands for in `topology=`, and the order in which steps read the topology
//! sources. Each check reads the code's own words and the
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

#[test]
fn the_topology_sources_are_listed_in_the_order_steps_read_them() {
    // The code's order: the admin's file, then the caches in the order of its list, then live
    // discovery.
    let code = read("spank-lama/src/topo_source.rs");
    let at = |what: &str| {
        code.find(&format!("\"{what}\","))
            .unwrap_or_else(|| panic!("topo_source.rs no longer names {what}"))
    };
    let machine = at("LAMA's cached machine");
    let slurm = at("Slurm's cached topology");
    let xml = at("LAMA's cached topology");
    assert!(
        machine < slurm && slurm < xml,
        "the caches' order changed: update the documents"
    );
    // The example's numbered list says the same, five sources.
    let example = read("plugstack.conf.example");
    let list = passage(&example, "first usable source wins", 4);
    let order = [
        "1. topology=",
        "2. topology_cache='s machine text",
        "3. slurm_xml=",
        "4. topology_cache='s XML",
        "5. live hwloc discovery",
    ];
    let mut last = 0;
    for item in order {
        let found = list[last..].find(item).unwrap_or_else(|| {
            panic!("plugstack.conf.example: '{item}' missing or out of order:\n{list}")
        });
        last += found;
    }
    // spank-lama(8) too.
    let man = read("spank-lama/src/manual.rs");
    let man = passage(&man, "topology sources", 6);
    for item in [
        "(2) the machine text",
        "(3) Slurm's cached XML",
        "(4) LAMA's cached XML",
        "(5) live",
    ] {
        assert!(
            man.contains(item),
            "spank-lama(8): '{item}' missing:\n{man}"
        );
    }
}

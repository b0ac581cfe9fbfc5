//! ARCHITECTURE.md's invariants for the plugin and the workspace that reading the sources can
//! check: where FFI and panics may live, what the plugin writes, how large a module may grow.

use std::path::{Path, PathBuf};

fn top() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the workspace")
        .to_path_buf()
}

/// The plugin's sources, with their text: not the modules `lib.rs` compiles for tests only
/// (`#[cfg(test)] mod NAME;`), which are no part of the plugin.
fn plugin_sources() -> Vec<(PathBuf, String)> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let lib = std::fs::read_to_string(src.join("lib.rs")).expect("lib.rs");
    let test_only = |p: &Path| {
        let stem = p.file_stem().and_then(|s| s.to_str()).unwrap_or_default();
        lib.contains(&format!("#[cfg(test)]\nmod {stem};"))
    };
    let mut out: Vec<(PathBuf, String)> = std::fs::read_dir(&src)
        .expect("spank-lama/src")
        .map(|e| e.expect("an entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "rs") && !test_only(p))
        .map(|p| {
            let text = std::fs::read_to_string(&p).expect("a source file");
            (p, text)
        })
        .collect();
    out.sort();
    assert!(out.len() >= 15, "only {} plugin sources", out.len());
    out
}

/// The text before the file's `#[cfg(test)]` module.
fn non_test(text: &str) -> &str {
    text.split("\n#[cfg(test)]").next().unwrap_or(text)
}

/// The `[dependencies]` table of a crate's manifest, as crate names.
fn dependencies(krate: &str) -> Vec<String> {
    let manifest = std::fs::read_to_string(top().join(krate).join("Cargo.toml"))
        .unwrap_or_else(|e| panic!("{krate}/Cargo.toml: {e}"));
    let Some(table) = manifest.split("\n[dependencies]\n").nth(1) else {
        return Vec::new();
    };
    table
        .split("\n[")
        .next()
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.split(['.', '=', ' ']).next())
        .filter(|n| !n.is_empty() && !n.starts_with('#'))
        .map(str::to_string)
        .collect()
}

#[test]
fn every_exported_callback_is_behind_the_panic_guard() {
    // `extern "C"` and `#[no_mangle]` appear only in lib.rs, whose `hook!` runs each callback
    // inside the SPANK binding's `catch_unwind`; slurm_conf.rs alone declares C functions it
    // calls (an `extern "C" {` block, nothing exported).
    for (path, text) in plugin_sources() {
        if path.ends_with("lib.rs") {
            assert!(
                text.contains("spank_callback_with_globals::<Lama, _>"),
                "lib.rs lost its guard"
            );
            continue;
        }
        let mut text = text.clone();
        if path.ends_with("slurm_conf.rs") {
            assert_eq!(text.matches("extern \"C\"").count(), 1, "slurm_conf.rs");
            text = text.replace("extern \"C\" {", "");
        }
        for word in ["extern \"C\"", "no_mangle", "SPANK_PLUGIN!"] {
            assert!(!text.contains(word), "{} has {word}", path.display());
        }
    }
    let manifest =
        std::fs::read_to_string(top().join("Cargo.toml")).expect("the workspace manifest");
    assert!(
        !manifest.contains("panic = \"abort\""),
        "panic = \"abort\" in Cargo.toml"
    );
}

#[test]
fn the_plugin_starts_no_thread_and_writes_one_file() {
    for (path, text) in plugin_sources() {
        let code = non_test(&text);
        assert!(
            !code.contains("std::thread"),
            "{} starts a thread",
            path.display()
        );
        let writes = [
            "fs::write",
            "File::create",
            ".write(true)",
            ".append(true)",
            ".create(true)",
        ]
        .iter()
        .any(|w| code.contains(w));
        assert!(
            !writes || path.ends_with("topo_cache.rs"),
            "{} writes a file (only topo_cache.rs writes, the topology cache)",
            path.display()
        );
    }
}

/// Slurm's configuration files are found from slurmstepd's own `SLURM_CONF` (its process
/// environment, `slurm_conf.rs`), never from the job's: the name is read in no other module.
#[test]
fn the_jobs_slurm_conf_is_never_read() {
    for (path, text) in plugin_sources() {
        let reads = non_test(&text).contains("\"SLURM_CONF\"");
        assert!(
            !reads || path.ends_with("slurm_conf.rs"),
            "{} reads SLURM_CONF (only slurm_conf.rs does, from slurmstepd's own environment)",
            path.display()
        );
    }
}

#[test]
fn no_module_is_over_about_four_hundred_lines_of_code() {
    for (path, text) in plugin_sources() {
        let lines = non_test(&text)
            .lines()
            .filter(|l| {
                let t = l.trim();
                !t.is_empty() && !t.starts_with("//")
            })
            .count();
        assert!(lines <= 420, "{} has {lines} lines of code", path.display());
    }
}

#[test]
fn ffi_lives_where_the_architecture_says() {
    // hwloc only through lama-hwloc, Scotch only through lama-plan, and the plugin links
    // neither Scotch nor the planner.
    for krate in [
        "lama-engine",
        "lama-slurm",
        "lama-planfile",
        "lama-man",
        "lama-plan",
        "lama-cli",
        "spank-lama",
    ] {
        let deps = dependencies(krate);
        assert!(
            !deps.iter().any(|d| d == "hwlocality"),
            "{krate} depends on hwlocality"
        );
    }
    assert!(dependencies("lama-hwloc").iter().any(|d| d == "hwlocality"));
    for krate in [
        "lama-engine",
        "lama-slurm",
        "lama-planfile",
        "spank-lama",
        "lama-cli",
    ] {
        let deps = dependencies(krate);
        assert!(
            !deps.iter().any(|d| d.starts_with("scotch")),
            "{krate} depends on Scotch"
        );
    }
    assert!(!dependencies("spank-lama").iter().any(|d| d == "lama-plan"));
}

/// The modules a source names (`crate::NAME`, `crate::{NAME, ...}`, and `super::NAME` in a
/// module of the crate root), among `modules`; `crate::Item` and `super::Item` of the root count
/// as the root (`root`).
fn modules_named(text: &str, modules: &[String], root: &str) -> Vec<String> {
    let mut out = Vec::new();
    for prefix in ["crate::", "super::"] {
        for (at, _) in text.match_indices(prefix) {
            let rest = &text[at + prefix.len()..];
            let names: Vec<&str> = match rest.strip_prefix('{') {
                Some(group) => group
                    .split('}')
                    .next()
                    .unwrap_or_default()
                    .split(',')
                    .map(|n| n.trim().split("::").next().unwrap_or_default())
                    .collect(),
                None => vec![rest
                    .split(|c: char| !(c.is_alphanumeric() || c == '_'))
                    .next()
                    .unwrap_or_default()],
            };
            for name in names.into_iter().filter(|n| !n.is_empty()) {
                let module = if modules.iter().any(|m| m == name) {
                    name
                } else {
                    root
                };
                if !out.iter().any(|m| m == module) {
                    out.push(module.to_string());
                }
            }
        }
    }
    out
}

#[test]
fn no_crate_has_an_import_circle_among_its_modules() {
    for krate in [
        "lama-engine",
        "lama-hwloc",
        "lama-slurm",
        "lama-planfile",
        "lama-man",
        "lama-plan",
        "lama-cli",
        "spank-lama",
    ] {
        let src = top().join(krate).join("src");
        let mut files: Vec<PathBuf> = std::fs::read_dir(&src)
            .unwrap_or_else(|e| panic!("{}: {e}", src.display()))
            .map(|e| e.expect("an entry").path())
            .filter(|p| p.extension().is_some_and(|e| e == "rs"))
            .collect();
        files.sort();
        let stem = |p: &PathBuf| p.file_stem().unwrap().to_string_lossy().into_owned();
        let modules: Vec<String> = files.iter().map(stem).collect();
        let root = if modules.iter().any(|m| m == "lib") {
            "lib"
        } else {
            "main"
        };
        // Each module's edges: the crate root declares every module, so the circles that count
        // are among the modules (the root's own items used by a module are allowed).
        let edges: Vec<(String, Vec<String>)> = files
            .iter()
            .filter(|p| stem(p) != root)
            .map(|p| {
                let text = std::fs::read_to_string(p).expect("a source file");
                // Code only: a doc comment's link to another module is no import.
                let code: Vec<&str> = non_test(&text)
                    .lines()
                    .filter(|l| !l.trim_start().starts_with("//"))
                    .collect();
                let named = modules_named(&code.join("\n"), &modules, root);
                (
                    stem(p),
                    named
                        .into_iter()
                        .filter(|m| m != root && *m != stem(p))
                        .collect(),
                )
            })
            .collect();
        // Depth-first search from every module; a module met again on the path is a circle.
        fn visit(
            m: &str,
            edges: &[(String, Vec<String>)],
            path: &mut Vec<String>,
            done: &mut Vec<String>,
        ) {
            if done.iter().any(|d| d == m) {
                return;
            }
            if let Some(at) = path.iter().position(|p| p == m) {
                panic!("import circle: {} -> {m}", path[at..].join(" -> "));
            }
            path.push(m.to_string());
            let next = edges
                .iter()
                .find(|(n, _)| n == m)
                .map(|(_, e)| e.clone())
                .unwrap_or_default();
            for n in &next {
                visit(n, edges, path, done);
            }
            path.pop();
            done.push(m.to_string());
        }
        let mut done = Vec::new();
        for (m, _) in &edges {
            visit(m, &edges, &mut Vec::new(), &mut done);
        }
        assert!(
            edges.len() + 1 >= modules.len(),
            "{krate}: modules {modules:?}"
        );
    }
}

//! `lama plan --out` writes plans of any size srun accepts: over 120 KiB (which no longer
//! travel in the environment) with a note that every node reads the file itself.

use assert_cmd::Command;

fn ring(np: usize) -> String {
    (0..np)
        .map(|i| format!("{i} {} 10\n", (i + 1) % np))
        .collect()
}

fn plan(dir: &std::path::Path, np: usize) -> std::process::Output {
    let matrix = dir.join("ring.mat");
    std::fs::write(&matrix, ring(np)).unwrap();
    Command::cargo_bin("lama")
        .unwrap()
        .args(["plan", "--matrix"])
        .arg(&matrix)
        .args(["--np", &np.to_string()])
        .args([
            "--topology",
            "pack:2 core:64 pu:1",
            "--node-names",
            "node[001-032]",
        ])
        .arg("--out")
        .arg(dir.join("p"))
        .output()
        .unwrap()
}

#[test]
fn a_plan_over_the_environment_is_written_with_a_note() {
    let dir = tempfile::tempdir().unwrap();
    let out = plan(dir.path(), 4000);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let text = std::fs::read_to_string(dir.path().join("p.lama")).unwrap();
    assert!(
        text.len() > lama_planfile::MAX_INLINE_PLAN_BYTES,
        "{}",
        text.len()
    );
    assert_eq!(
        lama_planfile::PlanFile::parse(&text).unwrap().ranks.len(),
        4000
    );
    assert_eq!(
        std::fs::read_to_string(dir.path().join("p.hosts"))
            .unwrap()
            .lines()
            .count(),
        4000
    );
    assert!(
        stderr.contains(&format!(
            "note: the plan is {} KiB, over the 120 KiB that travel in the job's environment: \
             each node will read {}.lama itself",
            text.len() / 1024,
            dir.path().join("p").display()
        )),
        "{stderr}"
    );

    // A plan that fits travels in the environment: no note.
    let out = plan(dir.path(), 3000);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let text = std::fs::read_to_string(dir.path().join("p.lama")).unwrap();
    assert!(text.len() <= lama_planfile::MAX_INLINE_PLAN_BYTES);
    assert!(!stderr.contains("note:"), "{stderr}");
}

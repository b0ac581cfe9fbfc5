//! `lama plan --out` never writes a plan that srun would refuse: a plan carried by
//! `--lama-plan` is at most `MAX_PLAN_BYTES` of text (one environment variable).

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
            "--nodes",
            "node[001-032]",
        ])
        .arg("--out")
        .arg(dir.join("p"))
        .output()
        .unwrap()
}

#[test]
fn a_plan_srun_would_refuse_is_not_written() {
    let dir = tempfile::tempdir().unwrap();
    let out = plan(dir.path(), 4000);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    // The size depends on the CPU numbers the plan writes (their digits): read it, and check
    // it is above the limit and the ranks that fit are about limit / bytes-per-rank.
    let number_after = |key: &str| -> u64 {
        let at = stderr
            .find(key)
            .unwrap_or_else(|| panic!("no '{key}' in {stderr}"))
            + key.len();
        stderr[at..]
            .split(|c: char| !c.is_ascii_digit())
            .next()
            .and_then(|d| d.parse().ok())
            .unwrap_or_else(|| panic!("no number after '{key}' in {stderr}"))
    };
    assert!(
        stderr.contains("the plan for 4000 ranks is ")
            && stderr.contains(" bytes, but --lama-plan accepts at most 122880"),
        "{stderr}"
    );
    let bytes = number_after("the plan for 4000 ranks is ");
    assert!(bytes > 122_880, "{stderr}");
    let fit = number_after("about ");
    let expected = 122_880 * 4000 / bytes;
    assert!(
        fit.abs_diff(expected) <= 5,
        "{fit} ranks fit, expected about {expected}: {stderr}"
    );
    assert!(!dir.path().join("p.lama").exists());
    assert!(!dir.path().join("p.hosts").exists());

    // A plan that fits is written, and reads back.
    let out = plan(dir.path(), 3000);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = std::fs::read_to_string(dir.path().join("p.lama")).unwrap();
    assert!(text.len() <= lama_planfile::MAX_PLAN_BYTES);
    assert_eq!(
        lama_planfile::PlanFile::parse(&text).unwrap().ranks.len(),
        3000
    );
}

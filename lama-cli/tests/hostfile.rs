//! `lama map --hostfile` writes one node name per rank: what `srun -m arbitrary` reads from
//! `SLURM_HOSTFILE` to put every rank where LAMA does.

use assert_cmd::Command;

#[test]
fn hostfile_lists_each_ranks_node() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("hosts");
    let out = Command::cargo_bin("lama")
        .unwrap()
        .args([
            "map",
            "--topology",
            "pack:1 core:3 pu:1",
            "--topology",
            "pack:1 core:1 pu:1",
        ])
        .args([
            "--np",
            "6",
            "--map",
            "ncbh",
            "--oversubscribe",
            "-m",
            "arbitrary",
            "--node-names",
            "n[1-2]",
        ])
        .arg("--hostfile")
        .arg(&file)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    // Ranks go n1 n2 n1 n1 (first pass: node 1 has one core), then n1 n2 (second pass).
    assert_eq!(
        std::fs::read_to_string(&file).unwrap(),
        "n1\nn2\nn1\nn1\nn1\nn2\n"
    );
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("no srun -m gives it"), "{text}");
    assert!(
        text.contains("srun -m arbitrary -n6 on nodes n1,n2"),
        "{text}"
    );
    // Without names there is nothing to write.
    let out = Command::cargo_bin("lama")
        .unwrap()
        .args([
            "map",
            "--topology",
            "pack:1 core:1 pu:1",
            "--np",
            "1",
            "--map",
            "c",
        ])
        .arg("--hostfile")
        .arg(&file)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
}

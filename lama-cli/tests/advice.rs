//! Every `lama map ...` command a message suggests is run, and must place as the message says
//! (checked by hand against the machine): advice that does not do what it says is a bug.

use assert_cmd::Command;

/// Two nodes of 2 sockets x 2 cores: PUs 0-1 socket 0, 2-3 socket 1.
const TOPOLOGY: &str = "pack:2 core:2 pu:1";

fn lama(args: &[&str]) -> std::process::Output {
    Command::cargo_bin("lama")
        .unwrap()
        .args(args)
        .env_remove("COLUMNS")
        .output()
        .unwrap()
}

/// The `lama map ...` commands in `message` (each inside parentheses, ended by ')' or ';').
fn suggested(message: &str) -> Vec<Vec<String>> {
    message
        .match_indices("lama map ")
        .map(|(at, _)| {
            let rest = &message[at + "lama map ".len()..];
            let end = rest.find([')', ';']).unwrap_or(rest.len());
            rest[..end].split_whitespace().map(str::to_string).collect()
        })
        .collect()
}

/// `lama map` on two nodes of [`TOPOLOGY`], 4 ranks, with `extra`.
fn on_two_nodes<'a>(extra: impl IntoIterator<Item = &'a str>) -> std::process::Output {
    let mut args = vec!["map", "--topology", TOPOLOGY, "-N", "2", "-n", "4"];
    args.extend(extra);
    lama(&args)
}

/// `lama map` with `extra` on two nodes of [`TOPOLOGY`], 4 ranks: each rank's (node, PU).
fn placed(extra: &[String]) -> Vec<(u64, u64)> {
    let out = on_two_nodes(
        ["--json"]
            .into_iter()
            .chain(extra.iter().map(String::as_str)),
    );
    assert!(out.status.success(), "lama map {extra:?}: {out:?}");
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let mut ranks: Vec<(u64, u64, u64)> = json["processes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            let n = |k: &str| p[k].as_u64().unwrap();
            (n("rank"), n("node"), n("pu"))
        })
        .collect();
    ranks.sort();
    ranks.into_iter().map(|(_, node, pu)| (node, pu)).collect()
}

/// The refusal of layout `layout`, and the one command it suggests.
fn advice_for(layout: &str) -> Vec<String> {
    let out = on_two_nodes(["--map", layout]);
    assert_eq!(out.status.code(), Some(2), "{layout}: {out:?}");
    let message = String::from_utf8_lossy(&out.stderr).to_string();
    let mut commands = suggested(&message);
    assert_eq!(commands.len(), 1, "{layout}: {message}");
    commands.remove(0)
}

#[test]
fn slurm_distributions_suggest_srun_s_nodes_and_a_layout_that_places_as_said() {
    // By hand, -m cyclic over the nodes and each node's sockets in turn: ranks 0 and 2 on
    // node 0 (sockets 0 then 1: PUs 0, 2), 1 and 3 on node 1 (PUs 0, 2).
    let cyclic_cyclic = advice_for("cyclic:cyclic");
    assert_eq!(placed(&cyclic_cyclic), [(0, 0), (1, 0), (0, 2), (1, 2)]);
    // -m cyclic, each node's cores in order: PUs 0 then 1 on each node.
    let cyclic_block = advice_for("cyclic:block");
    assert_eq!(placed(&cyclic_block), [(0, 0), (1, 0), (0, 1), (1, 1)]);
    // -m block (srun's default), cores in order: node 0 takes ranks 0 and 1 on PUs 0 and 1.
    let block_block = advice_for("block:block");
    assert_eq!(placed(&block_block), [(0, 0), (0, 1), (1, 0), (1, 1)]);
    // -m block, sockets in turn: PUs 0 and 2 of node 0, then of node 1.
    let block_cyclic = advice_for("block:cyclic");
    assert_eq!(placed(&block_cyclic), [(0, 0), (0, 2), (1, 0), (1, 2)]);
}

#[test]
fn open_mpi_spellings_suggest_what_open_mpi_does() {
    // ppr:2:package on one node of 2 packages: ranks 0 and 1 on package 0's cores, 2 and 3
    // on package 1's (Open MPI fills a package's N before the next).
    let out = lama(&[
        "map",
        "--topology",
        TOPOLOGY,
        "-n",
        "4",
        "--map",
        "ppr:2:package",
    ]);
    let message = String::from_utf8_lossy(&out.stderr).to_string();
    let commands = suggested(&message);
    assert_eq!(commands.len(), 1, "{message}");
    let mut args = vec!["map", "--topology", TOPOLOGY, "-n", "4", "--json"];
    args.extend(commands[0].iter().map(String::as_str));
    let out = lama(&args);
    assert!(out.status.success(), "{out:?}");
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let pus: Vec<u64> = json["processes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["pu"].as_u64().unwrap())
        .collect();
    assert_eq!(pus, [0, 1, 2, 3]);
}

#[test]
fn oversubscription_advice_that_names_more_nodes_fits_there() {
    // 8 ranks on one node of 4 cores: the advice names -N 2, which places all 8 (4 a node).
    let out = lama(&["map", "--topology", TOPOLOGY, "-n", "8", "--map", "csbnh"]);
    let message = String::from_utf8_lossy(&out.stderr).to_string();
    let n = message
        .split("or over more nodes: -N ")
        .nth(1)
        .and_then(|r| r.split_whitespace().next())
        .unwrap_or_else(|| panic!("no -N advice: {message}"));
    assert_eq!(n, "2");
    let out = lama(&[
        "map",
        "--topology",
        TOPOLOGY,
        "-N",
        n,
        "-n",
        "8",
        "--map",
        "csbnh",
    ]);
    assert!(out.status.success(), "{out:?}");
}

#[test]
fn the_help_s_translations_run_and_place_as_their_originals() {
    let out = lama(&["map", "--help"]);
    let help = String::from_utf8_lossy(&out.stdout).to_string();
    let table: Vec<(String, Vec<String>)> = help
        .lines()
        .skip_while(|l| !l.starts_with("Coming from Slurm or Open MPI"))
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .map(|l| {
            // The original, then two spaces or more, then lama map's options.
            let (original, ours) = l.trim_start().split_once("  ").expect("a translation");
            (
                original.trim().to_string(),
                ours.split_whitespace().map(str::to_string).collect(),
            )
        })
        .collect();
    assert!(table.len() >= 7, "{help}");
    for (original, ours) in &table {
        let p = placed(ours);
        assert_eq!(p.len(), 4, "{original}: {ours:?}");
        // By hand for the rows whose order tells them apart (two nodes of 2 x 2 cores).
        let expected: Option<[(u64, u64); 4]> = match original.as_str() {
            o if o.starts_with("srun -m cyclic:cyclic") => Some([(0, 0), (1, 0), (0, 2), (1, 2)]),
            o if o.starts_with("srun -m block:block") => Some([(0, 0), (0, 1), (1, 0), (1, 1)]),
            // ppr:2:package: srun deals 2 ranks to each node (-m block), and each node fills
            // its package 0's two cores first, as Open MPI does on a node (PUs 0, 1).
            o if o.contains("ppr:2:package") => Some([(0, 0), (0, 1), (1, 0), (1, 1)]),
            _ => None,
        };
        if let Some(e) = expected {
            assert_eq!(p, e, "{original} as {ours:?}");
        }
    }
}

#[test]
fn this_machine_standing_for_the_nodes_is_said_outside_a_job_step() {
    let run = |node: Option<&str>, topology: Option<&str>| {
        let mut cmd = Command::cargo_bin("lama").unwrap();
        cmd.args(["map", "-n", "1", "--map", "scbnh"]);
        if let Some(t) = topology {
            cmd.args(["--topology", t]);
        }
        match node {
            Some(n) => cmd.env("SLURMD_NODENAME", n),
            None => cmd.env_remove("SLURMD_NODENAME"),
        };
        let out = cmd.output().unwrap();
        assert!(out.status.success(), "{out:?}");
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let said = "(--topology host, the default) stands for every node previewed";
    assert!(run(None, None).contains(said));
    assert!(run(None, Some("host")).contains(said));
    // In a job step on a compute node, the host is one of the nodes; a topology given is
    // the nodes'.
    assert!(!run(Some("node1"), None).contains(said));
    assert!(!run(None, Some(TOPOLOGY)).contains(said));
}

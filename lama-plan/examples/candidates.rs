//! Each mapping candidate's cost and time on 2-D and 3-D stencils from 2,112 to 100,160 ranks,
//! on nodes of 2 packages x 2 NUMA nodes x 6 cores under leaf switches of 22 nodes (the seed
//! paper's shape), default distances: how fast the stencil path is beside the general
//! candidates (Scotch's tree mapping, the bisection, the multisection), and what it costs.
//!
//!   cargo run --release -p lama-plan --example candidates

use lama_engine::Machine;
use lama_plan::cost::{Distances, System};
use lama_plan::matrix::{patterns, CommMatrix};
use lama_plan::network::Network;
use lama_plan::{guard_layouts, plan, Unit};
use std::time::Instant;

fn main() {
    let m = Machine::synthetic("pack:2 numa:2 core:6 pu:1").expect("a synthetic node");
    let cases: Vec<(String, CommMatrix)> = vec![
        ("2D 48x44".into(), patterns::stencil_2d(48, 44)),
        ("3D 16x12x11".into(), patterns::stencil_3d(16, 12, 11)),
        ("2D 120x84".into(), patterns::stencil_2d(120, 84)),
        ("3D 24x21x20".into(), patterns::stencil_3d(24, 21, 20)),
        ("2D 320x313".into(), patterns::stencil_2d(320, 313)),
        (
            "3D 47x46x46 (99,452)".into(),
            patterns::stencil_3d(47, 46, 46),
        ),
    ];
    println!(
        "| stencil | nodes | candidate | cost | refined | time (s) | winner | whole plan (s) |"
    );
    println!("|---|---:|---|---:|---:|---:|---|---:|");
    for (name, matrix) in cases {
        let nodes = (matrix.ranks() as usize).div_ceil(24);
        let switches = nodes.div_ceil(22);
        let (mut names, _) = Network::fat_tree(switches, 22);
        names.truncate(nodes);
        let mut text = String::new();
        for s in 0..switches {
            let last = ((s + 1) * 22).min(nodes);
            text += &format!("SwitchName=leaf{s} Nodes=n[{}-{last}]\n", s * 22 + 1);
        }
        if switches > 1 {
            text += &format!("SwitchName=top Switches=leaf[0-{}]\n", switches - 1);
        }
        let net = Network::parse(&text).expect("a network");
        let machines = vec![&m; nodes];
        let system = System::new(machines, &names, &net, Distances::default()).expect("a system");
        let paths: Vec<Vec<usize>> = names.iter().map(|x| net.path(x).expect("a path")).collect();
        let t0 = Instant::now();
        let p = plan(&matrix, &system, &paths, Unit::Core, &guard_layouts()).expect("a plan");
        let whole = t0.elapsed().as_secs_f64();
        for c in p.candidates.iter().take(4) {
            let cost = match &c.cost {
                Ok(v) => format!("{v}"),
                Err(_) => "not run".into(),
            };
            println!(
                "| {name} | {nodes} | {} | {cost} | {} | {:.3} | {} + {} exchanges, {} swaps | {whole:.2} |",
                c.name,
                c.refined.map_or("-".to_string(), |r| r.to_string()),
                c.seconds,
                p.winner,
                p.exchanges,
                p.swaps
            );
        }
    }
}

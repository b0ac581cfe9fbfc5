//! Plans against Slurm's default and the best LAMA layout, on the seed paper's machine shape
//! (4 leaf switches x 22 nodes of 2 x 12-core packages with 2 NUMA nodes each: 2,112 cores)
//! and on 4 such nodes (96 cores), for stencils, a ring, all-to-all and a clustered random
//! matrix. Prints one row per case with the time `lama_plan::plan` took.
//!
//!   cargo run --release -p lama-plan --example compare

use lama_engine::Machine;
use lama_plan::cost::{Distances, System};
use lama_plan::matrix::{patterns, CommMatrix};
use lama_plan::network::Network;
use lama_plan::{guard_layouts, plan, Unit};
use std::time::Instant;

/// A machine: its label, leaf switches, nodes per switch, and the matrices tried on it.
type Shape = (&'static str, usize, usize, [(&'static str, CommMatrix); 5]);

fn main() {
    let node = Machine::synthetic("pack:2 numa:2 core:6 pu:1").expect("a synthetic node");
    let shapes: [Shape; 2] = [
        (
            "4 nodes, 96 cores",
            1,
            4,
            [
                ("2D stencil 12x8", patterns::stencil_2d(12, 8)),
                ("3D stencil 6x4x4", patterns::stencil_3d(6, 4, 4)),
                ("ring", patterns::ring(96)),
                ("all-to-all", patterns::all_to_all(96)),
                ("clustered 8", patterns::clustered(96, 8, 42)),
            ],
        ),
        (
            "4x22 nodes, 2112 cores",
            4,
            22,
            [
                ("2D stencil 48x44", patterns::stencil_2d(48, 44)),
                ("3D stencil 16x12x11", patterns::stencil_3d(16, 12, 11)),
                ("ring", patterns::ring(2112)),
                ("all-to-all", patterns::all_to_all(2112)),
                ("clustered 8", patterns::clustered(2112, 8, 42)),
            ],
        ),
    ];
    println!(
        "| machine | matrix | plan | Slurm default (csbnh) | plan vs default | best layout | plan vs best | winner | time |"
    );
    println!("|---|---|---|---|---|---|---|---|---|");
    for (label, switches, per_switch, cases) in shapes {
        let (names, network) = Network::fat_tree(switches, per_switch);
        let machines = vec![&node; names.len()];
        let system = System::new(machines, &names, &network, Distances::default())
            .expect("every node on a switch");
        let paths: Vec<Vec<usize>> = names
            .iter()
            .map(|n| network.path(n).expect("on a switch"))
            .collect();
        for (name, matrix) in cases {
            let t0 = Instant::now();
            let p = plan(&matrix, &system, &paths, Unit::Core, &guard_layouts()).expect("a plan");
            let took = t0.elapsed();
            let block = p.cost_of("csbnh").unwrap_or(f64::NAN);
            let (best_name, best) = p.best_layout().unwrap_or(("-", f64::NAN));
            let pct = |a: f64, b: f64| format!("{:+.1}%", (a - b) / b * 100.0);
            println!(
                "| {label} | {name} | {:.0} | {block:.0} | {} | {best_name} {best:.0} | {} | {} | {:.0} ms |",
                p.cost,
                pct(p.cost, block),
                pct(p.cost, best),
                p.winner,
                took.as_secs_f64() * 1000.0
            );
        }
    }
}

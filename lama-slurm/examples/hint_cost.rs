//! Time and memory of the `--lama-verbose` distribution hint that node 0's slurmstepd computes,
//! for steps of 2 to 65,536 nodes of 2 x 64 cores with 2 threads each (256 PUs), layout scbnh
//! (which spreads like -m plane=128 while Slurm's default is block, so the hint is given).
//!
//!   cargo run --release -p lama-slurm --example hint_cost [NODES]
//!
//! With NODES, one hint for that many nodes (for /usr/bin/time's peak memory).

use lama_engine::{Layout, Machine, Request};
use std::time::Instant;

fn main() {
    let node = Machine::synthetic("pack:2 core:64 pu:2").expect("a synthetic node");
    let request = Request::new(Layout::parse("scbnh").expect("a layout"), 0);
    if let Some(nodes) = std::env::args().nth(1).and_then(|n| n.parse().ok()) {
        lama_slurm::distribution::hint(&node, &request, "node1", nodes, None, None);
        return;
    }
    println!("| nodes | hint time (ms), 5 runs |");
    println!("|---:|---|");
    for nodes in [2u32, 64, 1024, 16_384, 65_536] {
        let times: Vec<f64> = (0..5)
            .map(|_| {
                let t0 = Instant::now();
                let hint =
                    lama_slurm::distribution::hint(&node, &request, "node1", nodes, None, None);
                assert!(
                    hint.is_some_and(|h| h.contains("like `-m plane=128`")),
                    "no hint"
                );
                t0.elapsed().as_secs_f64() * 1000.0
            })
            .collect();
        let times: Vec<String> = times.iter().map(|t| format!("{t:.2}")).collect();
        println!("| {nodes} | {} |", times.join(" "));
    }
}

//! The time `lama_plan::plan` takes: a 2D stencil on 4 nodes (96 cores, one switch) and on the
//! seed paper's 4 x 22 nodes (2,112 cores, two switch levels).
//!
//!   cargo bench -p lama-plan --bench plan

use criterion::{criterion_group, criterion_main, Criterion};
use lama_engine::Machine;
use lama_plan::cost::{Distances, System};
use lama_plan::matrix::patterns;
use lama_plan::network::Network;
use lama_plan::{guard_layouts, plan, Unit};
use std::hint::black_box;

fn bench(c: &mut Criterion) {
    let node = Machine::synthetic("pack:2 numa:2 core:6 pu:1").expect("a synthetic node");
    for (label, switches, per_switch, x, y) in [("96", 1, 4, 12, 8), ("2112", 4, 22, 48, 44)] {
        let (names, network) = Network::fat_tree(switches, per_switch);
        let system = System::new(
            vec![&node; names.len()],
            &names,
            &network,
            Distances::default(),
        )
        .expect("every node on a switch");
        let paths: Vec<Vec<usize>> = names
            .iter()
            .map(|n| network.path(n).expect("on a switch"))
            .collect();
        let matrix = patterns::stencil_2d(x, y);
        let layouts = guard_layouts();
        let mut g = c.benchmark_group("plan");
        g.sample_size(10);
        g.bench_function(format!("stencil2d/{label}"), |b| {
            b.iter(|| {
                plan(black_box(&matrix), &system, &paths, Unit::Core, &layouts).expect("a plan")
            })
        });
        g.finish();
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);

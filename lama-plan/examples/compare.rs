//! Plans against Slurm's default, the best LAMA layout, the recursive bisection and Scotch, on
//! the seed paper's machine shape (4 leaf switches x 22 nodes of 2 x 12-core packages with 2
//! NUMA nodes each: 2,112 cores) and on 4 such nodes (96 cores), for 2-D and 3-D stencils of
//! several aspect ratios, a ring, all-to-all, a clustered and a random sparse matrix, under
//! the default distances and under a second set. Prints one row per case with the time
//! `lama_plan::plan` took.
//!
//!   cargo run --release -p lama-plan --example compare

use lama_engine::{CpuList, Level, Machine};
use lama_plan::cost::{Distances, System};
use lama_plan::matrix::{patterns, CommMatrix};
use lama_plan::network::Network;
use lama_plan::{guard_layouts, plan, Unit};
use std::time::Instant;

/// 2-D and 3-D grid shapes.
type Shapes = (&'static [(u32, u32)], &'static [(u32, u32, u32)]);

fn cases(n: u32) -> Vec<(String, CommMatrix)> {
    let mut out: Vec<(String, CommMatrix)> = Vec::new();
    let (two, three): Shapes = if n == 96 {
        (&[(12, 8), (24, 4), (48, 2)], &[(6, 4, 4), (12, 4, 2)])
    } else {
        (
            &[(48, 44), (132, 16), (264, 8)],
            &[(16, 12, 11), (33, 8, 8)],
        )
    };
    for &(x, y) in two {
        out.push((format!("2D stencil {x}x{y}"), patterns::stencil_2d(x, y)));
    }
    for &(x, y, z) in three {
        out.push((
            format!("3D stencil {x}x{y}x{z}"),
            patterns::stencil_3d(x, y, z),
        ));
    }
    out.push(("ring".to_string(), patterns::ring(n)));
    out.push(("clustered 8".to_string(), patterns::clustered(n, 8, 42)));
    out.push((
        "random, 4 partners".to_string(),
        patterns::random_sparse(n, 4, 7),
    ));
    out.push(("all-to-all".to_string(), patterns::all_to_all(n)));
    out
}

/// The cases of a partial or uneven allocation of `slots` cores: clustered traffic on every
/// core and on three quarters of them, and the squarest 2-D and 3-D stencils that fit (some
/// cores stay free).
fn uneven_cases(slots: u32) -> Vec<(String, CommMatrix)> {
    let x = (slots as f64).sqrt() as u32;
    let y = slots / x;
    let c = (slots as f64).cbrt() as u32;
    let z = slots / (c * c);
    let three_quarters = slots * 3 / 4 / 8 * 8;
    vec![
        ("clustered 8".to_string(), patterns::clustered(slots, 8, 42)),
        (
            format!("clustered 8, {three_quarters} ranks"),
            patterns::clustered(three_quarters, 8, 42),
        ),
        (format!("2D stencil {x}x{y}"), patterns::stencil_2d(x, y)),
        (
            format!("3D stencil {c}x{c}x{z}"),
            patterns::stencil_3d(c, c, z),
        ),
    ]
}

fn main() {
    let node = Machine::synthetic("pack:2 numa:2 core:6 pu:1").expect("a synthetic node");
    // A partial allocation: node i has 12 + (7 i mod 13) of its 24 cores free (12 to 24).
    let partial: Vec<Machine> = (0..88u32)
        .map(|i| {
            let free = 12 + (7 * i) % 13;
            node.restrict(&CpuList::from_cpus(0..free))
        })
        .collect();
    // Heterogeneous nodes: every other node has one package of 16 cores with two threads each.
    let other = Machine::synthetic("pack:1 numa:1 core:16 pu:2").expect("a synthetic node");
    let second = Distances::parse("l2=1,l3=2,numa=3,package=4,node=6,switch=20,farther=24")
        .expect("distances");
    println!(
        "| distances | machine | matrix | plan | Slurm default (csbnh) | plan vs default | best layout | plan vs best | bisection | plan vs bisection | multisection | plan vs multisection | Scotch | stencil path | winner | time |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|");
    for (dname, distances) in [("default", Distances::default()), ("second", second)] {
        let machines: [(&str, usize, usize, Vec<&Machine>); 4] = [
            ("4 nodes, 96 cores", 1, 4, vec![&node; 4]),
            ("4x22 nodes, 2112 cores", 4, 22, vec![&node; 88]),
            (
                "4x22 nodes, 12-24 of 24 cores free",
                4,
                22,
                partial.iter().collect(),
            ),
            (
                "4x22 nodes, 24 and 16 cores",
                4,
                22,
                (0..88)
                    .map(|i| if i % 2 == 0 { &node } else { &other })
                    .collect(),
            ),
        ];
        for (label, switches, per_switch, machines) in machines {
            let (names, network) = Network::fat_tree(switches, per_switch);
            let slots: u32 = machines
                .iter()
                .map(|m| {
                    m.objects(Level::Core)
                        .iter()
                        .filter(|c| c.pus.clone().any(|p| m.pus()[p as usize].available))
                        .count() as u32
                })
                .sum();
            let system =
                System::new(machines, &names, &network, distances).expect("every node on a switch");
            let paths: Vec<Vec<usize>> = names
                .iter()
                .map(|n| network.path(n).expect("on a switch"))
                .collect();
            let uneven = label.contains("free") || label.contains(" and ");
            let matrices = if uneven {
                uneven_cases(slots)
            } else {
                cases(slots)
            };
            for (name, matrix) in matrices {
                let t0 = Instant::now();
                let p =
                    plan(&matrix, &system, &paths, Unit::Core, &guard_layouts()).expect("a plan");
                let took = t0.elapsed();
                let block = p.cost_of("csbnh").unwrap_or(f64::NAN);
                let (best_name, best) = p.best_layout().unwrap_or(("-", f64::NAN));
                let bisection = p.cost_of("bisection").unwrap_or(f64::NAN);
                let multisection = p.cost_of("multisection");
                let scotch = p
                    .cost_of("scotch")
                    .map_or("not run".to_string(), |c| format!("{c:.0}"));
                let stencil = p
                    .candidates
                    .iter()
                    .find(|c| c.name.starts_with("stencil"))
                    .and_then(|c| c.cost.as_ref().ok())
                    .map_or("-".to_string(), |c| format!("{c:.0}"));
                let pct = |a: f64, b: f64| {
                    let v = (a - b) / b * 100.0;
                    format!("{:+.1}%", if v.abs() < 0.05 { 0.0 } else { v })
                };
                println!(
                    "| {dname} | {label} | {name} | {:.0} | {block:.0} | {} | {best_name} {best:.0} | {} | {bisection:.0} | {} | {} | {} | {scotch} | {stencil} | {}{} | {:.0} ms |",
                    p.cost,
                    pct(p.cost, block),
                    pct(p.cost, best),
                    pct(p.cost, bisection),
                    multisection.map_or("not run".to_string(), |c| format!("{c:.0}")),
                    multisection.map_or("-".to_string(), |c| pct(p.cost, c)),
                    p.winner,
                    match (p.exchanges, p.swaps) {
                        (0, 0) => String::new(),
                        (e, s) => format!(" + {e} exchanges, {s} swaps"),
                    },
                    took.as_secs_f64() * 1000.0
                );
            }
        }
    }
}

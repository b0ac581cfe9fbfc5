//! One step's work on a node, repeated, for instruction counts that do not depend on the
//! machine's load (BENCHMARKS.md, "Per step"):
//!   cargo build --release -p spank-lama --example step_cost
//!   valgrind --tool=callgrind target/release/examples/step_cost TOPOLOGY.xml 20
//! Loads the XML, restricts it to half the node, places one task per core there with
//! `scbnh`/`1c`, as `user_init` does.

use lama_engine::CpuList;
use lama_hwloc::{load, Source};
use spank_lama::config::SiteConfig;
use spank_lama::placement::{self, StepCpus};
use spank_lama::request::{self, UserOptions};

fn main() {
    let mut args = std::env::args().skip(1);
    let (Some(path), Some(times)) = (args.next(), args.next().and_then(|n| n.parse::<u32>().ok()))
    else {
        eprintln!("usage: step_cost TOPOLOGY.xml TIMES");
        std::process::exit(2);
    };
    let user = UserOptions {
        map: Some("scbnh".into()),
        bind: Some("1c".into()),
        ..UserOptions::default()
    };
    let req = match request::resolve(&user, &SiteConfig::default()) {
        Ok(Some(r)) => r,
        other => {
            eprintln!("step_cost: {other:?}");
            std::process::exit(1);
        }
    };
    let mut placed = 0;
    for _ in 0..times {
        let machine = match load(&Source::Xml(path.clone().into())) {
            Ok(m) => m,
            Err(e) => {
                eprintln!("step_cost: {e}");
                std::process::exit(1);
            }
        };
        let half = machine
            .pus()
            .iter()
            .map(|p| p.os)
            .take(machine.pus().len() / 2);
        let m = machine.restrict(&CpuList::from_cpus(half));
        let cores = m
            .objects(lama_engine::Level::Core)
            .iter()
            .filter(|c| c.pus.clone().any(|q| m.pus()[q as usize].available))
            .count();
        let globals: Vec<u32> = (0..cores as u32).collect();
        match placement::place_local(&m, &req, &globals, false, StepCpus::default()) {
            Ok(local) => placed += local.tasks.len(),
            Err(e) => {
                eprintln!("step_cost: {e}");
                std::process::exit(1);
            }
        }
    }
    println!("{placed} tasks placed in {times} steps");
}

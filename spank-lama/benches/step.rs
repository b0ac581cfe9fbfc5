//! What the plugin costs per step and per task (criterion).
//! `cargo bench -p spank-lama --bench step`
//!
//! - per step, what `user_init` does on a node: load the topology (hwloc XML, as from Slurm's
//!   cache or an admin file), restrict it to a cpuset, place the node's tasks; beside the bare
//!   hwloc XML load of the same file, and live discovery of this host;
//! - per task, what `task_init` does: `sched_setaffinity`, the `LAMA_*` values, the verbose line.

use criterion::{criterion_group, criterion_main, Criterion};
use hwlocality::topology::builder::{BuildFlags, TopologyBuilder};
use lama_engine::{CpuList, Machine};
use lama_hwloc::{load, load_whole_with, Io, Source};
use spank_lama::bind::{get_affinity, set_affinity};
use spank_lama::config::SiteConfig;
use spank_lama::placement::{self, StepCpus};
use spank_lama::request::{self, StepRequest, UserOptions};
use spank_lama::task_env;
use std::hint::black_box;
use std::path::{Path, PathBuf};

fn shared(name: &str) -> Option<PathBuf> {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/topologies")
        .join(name);
    assert!(p.is_file(), "{name}: {} is missing", p.display());
    Some(p)
}

fn plan_for(layout: &str, bind: &str) -> StepRequest {
    let user = UserOptions {
        map: Some(layout.into()),
        bind: Some(bind.into()),
        ..UserOptions::default()
    };
    request::resolve(&user, &SiteConfig::default())
        .unwrap()
        .unwrap()
}

/// The step's work: XML → Machine, restrict to half the node, place one task per core there.
fn step(path: &Path, plan: &StepRequest) -> usize {
    let machine = load(&Source::Xml(path.to_path_buf())).unwrap();
    let half: Vec<u32> = machine
        .pus()
        .iter()
        .map(|p| p.os)
        .take(machine.pus().len() / 2)
        .collect();
    let m = machine.restrict(&CpuList::from_cpus(half));
    let cores = m
        .objects(lama_engine::Level::Core)
        .iter()
        .filter(|c| c.pus.clone().any(|q| m.pus()[q as usize].available))
        .count();
    let globals: Vec<u32> = (0..cores as u32).collect();
    placement::place_local(&m, plan, &globals, false, StepCpus::default())
        .unwrap()
        .tasks
        .len()
}

fn per_step(c: &mut Criterion) {
    let mut g = c.benchmark_group("per-step");
    g.sample_size(30);
    let plan = plan_for("scbnh", "1c");
    for name in [
        "Intel-KnightsLanding-XeonPhi-7210.xml",
        "Intel-Skylake-2xXeon6140.xml",
        "AMD-19h-Zen3-2xEpyc-7763.xml",
    ] {
        let Some(path) = shared(name) else { continue };
        let short = name
            .split('-')
            .nth(if name.starts_with("AMD") { 2 } else { 1 })
            .unwrap_or(name);
        g.bench_function(format!("{short}/bare-hwloc-xml-load"), |b| {
            b.iter(|| {
                TopologyBuilder::new()
                    .with_flags(BuildFlags::INCLUDE_DISALLOWED)
                    .unwrap()
                    .from_xml_file(black_box(&path))
                    .unwrap()
                    .build()
                    .unwrap()
            })
        });
        g.bench_function(format!("{short}/load-restrict-place"), |b| {
            b.iter(|| step(black_box(&path), &plan))
        });
        // Placement alone on the real machine: one process per PU, binding 1c.
        let machine = load(&Source::Xml(path.clone())).unwrap();
        let globals: Vec<u32> = (0..machine.pus().len() as u32).collect();
        g.bench_function(format!("{short}/place-only-every-pu"), |b| {
            b.iter(|| {
                placement::place_local(
                    black_box(&machine),
                    &plan,
                    &globals,
                    false,
                    StepCpus::default(),
                )
                .unwrap()
                .tasks
                .len()
            })
        });
    }
    // This host: live discovery against loading its own exported XML.
    let dir = std::env::temp_dir().join(format!("lama-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let xml = dir.join("host.xml");
    std::fs::write(&xml, lama_hwloc::export_xml(&Source::Live).unwrap()).unwrap();
    // What a step placed by GPU discovers (I/O objects kept) against a CPU step (none kept:
    // no PCI scan, no vendor library), both with every PU available as the plugin loads them.
    g.bench_function("host/live-discovery", |b| {
        b.iter(|| load_whole_with(&Source::Live, Io::Keep).unwrap())
    });
    g.bench_function("host/live-discovery-without-io", |b| {
        b.iter(|| load_whole_with(&Source::Live, Io::Skip).unwrap())
    });
    g.bench_function("host/xml-load", |b| {
        b.iter(|| load(&Source::Xml(xml.clone())).unwrap())
    });
    g.bench_function("host/xml-load-without-io", |b| {
        b.iter(|| load_whole_with(&Source::Xml(xml.clone()), Io::Skip).unwrap())
    });
    g.finish();
    let _ = std::fs::remove_dir_all(&dir);
}

fn per_task(c: &mut Criterion) {
    let mut g = c.benchmark_group("per-task");
    let m = Machine::synthetic("pack:2 core:8 pu:2").unwrap();
    let plan = plan_for("scbnh", "1c");
    let tasks = placement::place_local(&m, &plan, &[0, 1], false, StepCpus::default())
        .unwrap()
        .tasks;
    let own = get_affinity().unwrap();
    let first = CpuList::from_cpus([own.cpus()[0]]);
    g.bench_function("sched_setaffinity", |b| {
        b.iter(|| set_affinity(black_box(&first)).unwrap())
    });
    set_affinity(&own).unwrap();
    g.bench_function("environment-and-verbose-line", |b| {
        b.iter(|| {
            let env = task_env::task_environment(&plan, black_box(&tasks[1]));
            let line = task_env::verbose_line(&plan, "node1", 1, 4242, &tasks[1]);
            env.len() + line.len()
        })
    });
    g.finish();
}

criterion_group!(benches, per_step, per_task);
criterion_main!(benches);

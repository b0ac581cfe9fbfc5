//! Time and peak memory of one cluster preview, for BENCHMARKS.md:
//! `cargo run --release -p lama-engine --example scale -- NODES LAYOUT [MPPR]`
//! (128-PU nodes, one process per PU, binding 1h).

use lama_engine::{place, Bind, Layout, Machine, Mppr, Request};
use std::time::Instant;

fn peak_rss_kib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let usage = "usage: scale NODES LAYOUT [MPPR]";
    let nodes: usize = args.get(1).and_then(|s| s.parse().ok()).expect(usage);
    let layout = Layout::parse(args.get(2).expect(usage)).unwrap_or_else(|d| panic!("{d}"));
    let m = Machine::synthetic("pack:2 core:32 pu:2").unwrap();
    let refs: Vec<&Machine> = vec![&m; nodes];
    let np = (nodes * m.pus().len()) as u32;
    let mut req = Request::new(layout, np);
    req.bind = Bind::parse("1h").unwrap();
    if let Some(mppr) = args.get(3) {
        req.mppr = Mppr::parse(mppr).unwrap_or_else(|d| panic!("{d}"));
    }
    let before = peak_rss_kib().unwrap_or(0);
    let start = Instant::now();
    let p = place(&refs, &req).unwrap_or_else(|e| panic!("{e}"));
    let elapsed = start.elapsed();
    let after = peak_rss_kib().unwrap_or(0);
    let per_proc_ns = elapsed.as_nanos() as f64 / p.len() as f64;
    let bytes_per_proc = (after.saturating_sub(before) * 1024) as f64 / p.len() as f64;
    println!(
        "nodes {nodes} processes {} layout {} mppr {}: {:.1} ms, {per_proc_ns:.1} ns/process, peak RSS +{} KiB ({bytes_per_proc:.1} bytes/process)",
        p.len(),
        req.layout,
        req.mppr,
        elapsed.as_secs_f64() * 1e3,
        after.saturating_sub(before),
    );
}

//! Placement cost (criterion). `cargo bench -p lama-engine --bench placement`.
//!
//! - one node: a KNL-shaped node (1 package, 32 L2 tiles × 2 cores × 4 threads = 256 PUs; the
//!   real XML is measured by `lama-cli`'s `step` bench) and a synthetic 1024-PU node;
//! - cluster preview: 128-PU nodes (`pack:2 core:32 pu:2`) at 512, 2048 and 8192 nodes, one
//!   process per PU (up to 1,048,576 processes), layouts `scbnh` and `nsch`, and `scbnh` with
//!   an MPPR limit.

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use lama_engine::{place, Bind, Layout, Machine, Mppr, Request};
use std::hint::black_box;

fn request(layout: &str, bind: &str, mppr: Option<&str>, np: u32) -> Request {
    let mut r = Request::new(Layout::parse(layout).unwrap(), np);
    r.bind = Bind::parse(bind).unwrap();
    if let Some(m) = mppr {
        r.mppr = Mppr::parse(m).unwrap();
    }
    r
}

fn one_node(c: &mut Criterion) {
    let mut g = c.benchmark_group("one-node");
    for (name, topo) in [
        ("knl-256", "pack:1 l2:32 core:2 pu:4"),
        ("synthetic-1024", "pack:4 numa:2 l3:2 core:16 pu:2"),
    ] {
        let m = Machine::synthetic(topo).unwrap();
        let np = m.pus().len() as u32;
        for layout in ["scbnh", "L2cbsnh", "hcsbn"] {
            let req = request(layout, "1c", None, np);
            g.throughput(Throughput::Elements(u64::from(np)));
            g.bench_function(BenchmarkId::new(name, layout), |b| {
                b.iter(|| place(black_box(&[&m]), black_box(&req)).unwrap().len())
            });
        }
    }
    g.finish();
}

fn cluster(c: &mut Criterion) {
    let mut g = c.benchmark_group("cluster");
    g.sample_size(10);
    let m = Machine::synthetic("pack:2 core:32 pu:2").unwrap();
    for nodes in [512usize, 2048, 8192] {
        let refs: Vec<&Machine> = vec![&m; nodes];
        let np = (nodes * 128) as u32;
        for (label, layout, mppr) in [
            ("scbnh", "scbnh", None),
            ("nsch", "nsch", None),
            ("scbnh-mppr", "scbnh", Some("2:c,64:s")),
        ] {
            let req = request(layout, "1h", mppr, np);
            g.throughput(Throughput::Elements(u64::from(np)));
            g.bench_function(BenchmarkId::new(label, nodes), |b| {
                b.iter(|| place(black_box(&refs), black_box(&req)).unwrap().len())
            });
        }
    }
    g.finish();
}

criterion_group!(benches, one_node, cluster);
criterion_main!(benches);

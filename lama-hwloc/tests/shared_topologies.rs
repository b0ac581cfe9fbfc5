//! Every real machine in `tests/topologies/` loads with the facts hwloc knows about it, and
//! maps with several layouts. A missing file fails the test: the machines are in the repository.

use lama_engine::{place, Bind, Layout, Level, Machine, Mppr, Request};
use lama_hwloc::{load, Source};
use std::path::{Path, PathBuf};

fn folder() -> Option<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/topologies");
    assert!(
        dir.is_dir(),
        "the test topologies are not at {}",
        dir.display()
    );
    Some(dir)
}

fn machine(name: &str) -> Option<Machine> {
    Some(load(&Source::Xml(folder()?.join(name))).unwrap())
}

fn count(m: &Machine, level: Level) -> usize {
    m.objects(level).len()
}

#[test]
fn skylake() {
    let Some(m) = machine("Intel-Skylake-2xXeon6140.xml") else {
        return;
    };
    assert_eq!(
        (
            count(&m, Level::Socket),
            count(&m, Level::Core),
            m.pus().len()
        ),
        (2, 36, 72)
    );
    // OS indexes are not in logical order: the second hardware thread of core 0 is P#36.
    assert_eq!(m.pus()[1].os, 36);
}

#[test]
fn knights_landing() {
    let Some(m) = machine("Intel-KnightsLanding-XeonPhi-7210.xml") else {
        return;
    };
    assert_eq!(
        (m.pus().len(), count(&m, Level::Core), count(&m, Level::L2)),
        (256, 64, 32)
    );
}

#[test]
fn zen3_has_l3_below_the_package() {
    let Some(m) = machine("AMD-19h-Zen3-2xEpyc-7763.xml") else {
        return;
    };
    assert_eq!((count(&m, Level::Socket), count(&m, Level::L3)), (2, 16));
    let p = place(&[&m], &Request::new(Layout::parse("L3scbnh").unwrap(), 1)).unwrap();
    assert_eq!(p.containment(0), [Level::Socket, Level::L3, Level::Core]);
}

/// The XML was captured inside a cgroup that allowed CPUs 0-5: that was the writer's
/// restriction, not the machine's, so every PU of the file is available (a step's own CPUs
/// restrict it later).
#[test]
fn a_files_allowed_set_is_not_a_restriction() {
    let Some(m) = machine("32amd64-4s2n4c-cgroup2.disallowed.xml") else {
        return;
    };
    assert_eq!(m.pus().len(), 32);
    assert_eq!(m.available().len(), 32, "available: {}", m.available());
}

/// Exporting a restricted topology (what slurmd confined to its specialised CPUs, or `lama
/// export` inside a job, would write) writes the whole machine, every PU allowed.
#[test]
fn export_drops_the_writers_allowed_set() {
    let Some(dir) = folder() else { return };
    let source = Source::Xml(dir.join("32amd64-4s2n4c-cgroup2.disallowed.xml"));
    let (before, _) = lama_hwloc::load_hwloc(&source).unwrap();
    assert_ne!(
        before.allowed_cpuset(),
        before.cpuset(),
        "the fixture is restricted"
    );
    let xml = lama_hwloc::export_xml(&source).unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("exported.xml");
    std::fs::write(&file, xml).unwrap();
    let (after, _) = lama_hwloc::load_hwloc(&Source::Xml(file)).unwrap();
    assert_eq!(after.allowed_cpuset(), after.cpuset());
    assert_eq!(after.cpuset(), before.cpuset());
}

#[test]
fn offline_pus_are_absent() {
    let Some(m) = machine("16em64t-4s2c2t-offlines.xml") else {
        return;
    };
    assert!(m.pus().len() < 16, "{} PUs", m.pus().len());
}

#[test]
fn hybrid_cores_have_two_or_one_threads() {
    let Some(m) = machine("20em64t-hybrid-1p6c2t+2ca4co1t.xml") else {
        return;
    };
    let sizes: Vec<usize> = m.objects(Level::Core).iter().map(|c| c.pus.len()).collect();
    assert!(sizes.contains(&2) && sizes.contains(&1), "{sizes:?}");
}

#[test]
fn dies_and_numa_above_packages() {
    let Some(m) = machine("Intel-CPUID.1F-Qemu-2p3d3c2t.xml") else {
        return;
    };
    assert_eq!(count(&m, Level::Die), 6);
    let Some(m) = machine("96em64t-4no4pa3ca2co.xml") else {
        return;
    };
    let p = place(&[&m], &Request::new(Layout::parse("Nscbnh").unwrap(), 1)).unwrap();
    assert_eq!(p.containment(0)[..2], [Level::Numa, Level::Socket]);
}

#[test]
fn every_topology_maps_with_several_layouts() {
    let Some(dir) = folder() else { return };
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "xml"))
        .collect();
    files.sort();
    assert!(files.len() >= 10);
    for file in files {
        let m = load(&Source::Xml(file.clone())).unwrap();
        let available = m.available().len() as u32;
        for (layout, bind, mppr) in [
            ("scbnh", "1c", None),
            ("csbnh", "1h", None),
            ("hcsbn", "none", None),
            ("Ncsbnh", "1N", None),
            ("L3L2csbnh", "1L2", None),
            ("nsch", "1c", Some("1:c")),
        ] {
            let mut req = Request::new(Layout::parse(layout).unwrap(), available);
            req.bind = Bind::parse(bind).unwrap();
            req.oversubscribe = true;
            if let Some(mp) = mppr {
                req.mppr = Mppr::parse(mp).unwrap();
            }
            let p =
                place(&[&m], &req).unwrap_or_else(|e| panic!("{}: {layout}: {e}", file.display()));
            assert_eq!(p.len() as u32, available, "{}: {layout}", file.display());
            if bind == "1h" {
                // One process per available PU, each on its own PU, in one pass.
                assert_eq!(p.passes(), 1, "{}: {layout}", file.display());
            }
        }
    }
}

/// Memory binding follows the CPU binding on machines with several NUMA nodes: a process bound
/// to a core gets that core's NUMA node, one bound to a NUMA domain gets exactly that node, and
/// `Nscbnh` spreads the first processes over every node.
#[test]
fn numa_nodes_of_bindings_on_multi_numa_machines() {
    for (name, numa) in [("96em64t-4no4pa3ca2co.xml", 4), ("256ppc-8n8s4t.xml", 8)] {
        let Some(m) = machine(name) else {
            return;
        };
        assert_eq!(count(&m, Level::Numa), numa, "{name}");
        for bind in ["1c", "1N"] {
            let mut req = Request::new(Layout::parse("Nscbnh").unwrap(), numa as u32);
            req.bind = Bind::parse(bind).unwrap();
            let p = place(&[&m], &req).unwrap();
            let mut seen = Vec::new();
            for r in 0..p.len() {
                let info = p.info(r);
                let mems = lama_engine::numa_nodes(&m, &info.bound_logical);
                assert_eq!(mems.len(), 1, "{name} {bind} rank {r}: {mems}");
                // The node is the one that holds the mapped PU.
                let holder = m
                    .objects(Level::Numa)
                    .iter()
                    .find(|o| o.pus.contains(&info.pu_logical))
                    .and_then(|o| o.os)
                    .unwrap();
                assert_eq!(mems.cpus(), [holder], "{name} {bind} rank {r}");
                seen.push(holder);
            }
            seen.sort_unstable();
            seen.dedup();
            assert_eq!(seen.len(), numa, "{name} {bind}: every NUMA node used once");
        }
        // A whole-node binding touches every NUMA node.
        let mut req = Request::new(Layout::parse("Nscbnh").unwrap(), 1);
        req.bind = Bind::parse("1n").unwrap();
        let p = place(&[&m], &req).unwrap();
        let all = lama_engine::numa_nodes(&m, &p.info(0).bound_logical);
        assert_eq!(all.len(), numa, "{name}");
    }
}

/// Every real machine, and every GPU and NIC node of `io/`, reads back from LAMA's machine text
/// (`Machine::to_text`, what a step reads from LAMA's topology cache) as exactly the machine
/// hwloc loaded: PUs, every level's objects, devices, offline CPUs and CPU kinds.
#[test]
fn every_machine_reads_back_from_its_text() {
    let Some(dir) = folder() else { return };
    let mut seen = 0;
    for sub in [dir.clone(), dir.join("io")] {
        let Ok(entries) = std::fs::read_dir(&sub) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.extension().is_none_or(|e| e != "xml") {
                continue;
            }
            let Ok(m) = load(&Source::Xml(path.clone())) else {
                continue;
            };
            let back = Machine::from_text(m.name(), &m.to_text())
                .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            assert_eq!(back, m, "{}", path.display());
            seen += 1;
        }
    }
    assert!(seen >= 10, "only {seen} machines were read");
}

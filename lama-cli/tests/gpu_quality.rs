//! GPU placement quality against LLNL mpibind (docs/devices.md, "Against mpibind").
//!
//! For each real GPU node of tests/topologies/io and tasks fewer than, equal to and more than
//! its GPUs, `lama map --json` (the default binding, and where there are fewer tasks than GPUs
//! also `K` GPUs per task with `-c` CPUs each, as mpibind gives) is judged beside mpibind's own placement of the same task count
//! (recorded in `quality/mpibind.txt`: mpibind is not built here). Every judgement is made from
//! the XML itself (packages, NUMA nodes, each PCI device's locality), read here with an XML
//! parser, not with the engine or hwloc under test:
//!
//! - **socket** / **NUMA**: tasks whose CPUs all lie in the packages (NUMA nodes) holding its
//!   GPUs' CPUs;
//! - **all GPUs**: tasks of two or more GPUs whose CPUs reach the CPUs near each of them;
//! - **NIC**: tasks given a fabric card on the package of their first GPU, of the tasks whose
//!   GPU's package has one;
//! - **spread**: no GPU's (or GPU package's) domain idle while another holds two tasks;
//! - **balance**: the packages holding GPUs, and the NUMA nodes near GPUs, hold as many tasks
//!   each as the others, one more at most (3 + 1 on two packages is spread but not balanced);
//! - **disjoint**: no two tasks share a CPU.
//!
//! The test fails when LAMA does worse than mpibind on any of these in any case, and when the
//! table (`quality/table.md`, copied into docs/devices.md) changes (`UPDATE_GOLDEN=1`
//! rewrites it).

use assert_cmd::Command;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

type Cpus = BTreeSet<u32>;

fn topologies() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/topologies/io")
}

/// What the XML says, read without hwloc.
struct Xml {
    packages: Vec<Cpus>,
    numas: Vec<Cpus>,
    /// PCI bus id → the CPUs of the nearest object above it that has CPUs.
    locality: BTreeMap<String, Cpus>,
    /// OS device name (`mlx5_0`, `hsi0`, `rdmap197s0`) → its PCI bus id.
    osdev: BTreeMap<String, String>,
    /// Bus ids of the GPUs: PCI 3D, display or accelerator controllers of NVIDIA, AMD or
    /// Intel, or VGA controllers of NVIDIA or AMD (docs/devices.md).
    gpus: BTreeSet<String>,
}

/// An hwloc bitmap (`0x0000ffff,0xffffffff`: 32-bit words, the most significant first; an
/// empty word between commas is a zero word).
fn bitmap(text: &str) -> Cpus {
    let mut cpus = Cpus::new();
    for (w, word) in text.split(',').rev().enumerate() {
        let hex = word.trim_start_matches("0x");
        let bits = if hex.is_empty() {
            0
        } else {
            u32::from_str_radix(hex, 16).expect("hex word")
        };
        for b in 0..32 {
            if bits & (1 << b) != 0 {
                cpus.insert(w as u32 * 32 + b);
            }
        }
    }
    cpus
}

fn read_xml(path: &Path) -> Xml {
    let text = std::fs::read_to_string(path).unwrap();
    let options = roxmltree::ParsingOptions {
        allow_dtd: true,
        ..Default::default()
    };
    let doc = roxmltree::Document::parse_with_options(&text, options).unwrap();
    let mut xml = Xml {
        packages: Vec::new(),
        numas: Vec::new(),
        locality: BTreeMap::new(),
        osdev: BTreeMap::new(),
        gpus: BTreeSet::new(),
    };
    for node in doc.descendants().filter(|n| n.has_tag_name("object")) {
        let cpuset = node.attribute("cpuset").map(bitmap);
        match node.attribute("type") {
            Some("Package") => xml.packages.push(cpuset.expect("a package's cpuset")),
            Some("NUMANode") => xml.numas.push(cpuset.expect("a NUMA node's cpuset")),
            Some("PCIDev") => {
                let near = node
                    .ancestors()
                    .find_map(|a| a.attribute("cpuset"))
                    .map(bitmap)
                    .expect("a PCI device below an object with CPUs");
                let bus = node.attribute("pci_busid").expect("pci_busid").to_string();
                for os in node
                    .children()
                    .filter(|c| c.attribute("type") == Some("OSDev"))
                {
                    if let Some(name) = os.attribute("name") {
                        xml.osdev.insert(name.to_string(), bus.clone());
                    }
                }
                // pci_type="0302 [10de:1eb8] ...": class, then [vendor:device].
                let pci = node.attribute("pci_type").unwrap_or("");
                let class = pci.get(0..4).unwrap_or("");
                let vendor = pci.get(6..10).unwrap_or("");
                let gpu = match class {
                    "0302" | "0380" | "1200" => matches!(vendor, "10de" | "1002" | "8086"),
                    "0300" => matches!(vendor, "10de" | "1002"),
                    _ => false,
                };
                if gpu {
                    xml.gpus.insert(bus.clone());
                }
                xml.locality.insert(bus, near);
            }
            _ => {}
        }
    }
    xml
}

/// A CPU list as `lama` and mpibind print it (`0-3,8`).
fn cpu_list(text: &str) -> Cpus {
    let mut cpus = Cpus::new();
    for part in text.split(',').filter(|p| !p.is_empty()) {
        let (a, b) = part.split_once('-').unwrap_or((part, part));
        cpus.extend(a.parse::<u32>().unwrap()..=b.parse::<u32>().unwrap());
    }
    cpus
}

struct Task {
    cpus: Cpus,
    gpus: Vec<String>,
    nic: Option<String>,
}

/// `per_task`: `K` GPUs per task (LAMA chooses them) and `-c C`.
fn lama(xml: &Path, np: usize, per_task: Option<(usize, usize)>) -> Vec<Task> {
    let mut cmd = Command::cargo_bin("lama").unwrap();
    cmd.args(["map", "--topology"]).arg(xml).args([
        "--np",
        &np.to_string(),
        "--map",
        "gcsbnh",
        "--json",
    ]);
    if let Some((k, c)) = per_task {
        cmd.args(["--gpus-per-task", &k.to_string(), "--gpu-bind", "none"]);
        cmd.args(["--cpus-per-task", &c.to_string()]);
    }
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    json["processes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| Task {
            cpus: p["cpus"]
                .as_array()
                .unwrap()
                .iter()
                .map(|c| c.as_u64().unwrap() as u32)
                .collect(),
            gpus: p["gpu_bus_ids"]
                .as_array()
                .unwrap()
                .iter()
                .map(|g| g.as_str().unwrap().to_string())
                .collect(),
            nic: p["nic"].as_str().map(str::to_string),
        })
        .collect()
}

fn mpibind(machine: &str, np: usize) -> Vec<Task> {
    let text = include_str!("quality/mpibind.txt");
    let tasks: Vec<Task> = text
        .lines()
        .filter(|l| !l.starts_with('#'))
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .filter(|f| f[0] == machine && f[1] == np.to_string())
        .map(|f| Task {
            cpus: cpu_list(f[3]),
            gpus: if f[4] == "-" {
                Vec::new()
            } else {
                f[4].split(',').map(str::to_string).collect()
            },
            nic: None,
        })
        .collect();
    assert_eq!(tasks.len(), np, "mpibind's {machine} with {np} tasks");
    tasks
}

/// One placement judged. Counts are "passed/judged".
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Score {
    socket: (usize, usize),
    numa: (usize, usize),
    all_gpus: (usize, usize),
    nic: (usize, usize),
    spread: bool,
    balance: bool,
    disjoint: bool,
    widest: usize,
}

fn within(cpus: &Cpus, domains: &[Cpus], near: &Cpus) -> bool {
    let mine: Cpus = domains
        .iter()
        .filter(|d| !d.is_disjoint(near))
        .flatten()
        .copied()
        .collect();
    cpus.is_subset(&mine)
}

fn is_fabric(name: &str) -> bool {
    ["mlx", "hsi", "cxi", "rdmap", "efa", "hfi", "ib"]
        .iter()
        .any(|p| name.starts_with(p))
}

fn judge(xml: &Xml, tasks: &[Task]) -> Score {
    let near_of = |bus: &str| xml.locality[bus].clone();
    let mut s = Score {
        socket: (0, 0),
        numa: (0, 0),
        all_gpus: (0, 0),
        nic: (0, 0),
        spread: true,
        balance: true,
        disjoint: true,
        widest: 0,
    };
    let package_of = |cpus: &Cpus| xml.packages.iter().position(|p| !p.is_disjoint(cpus));
    let fabric: Vec<(&String, &String)> = xml
        .osdev
        .iter()
        .filter(|(name, _)| is_fabric(name))
        .collect();
    for t in tasks.iter().filter(|t| !t.gpus.is_empty()) {
        let near: Cpus = t.gpus.iter().flat_map(|g| near_of(g)).collect();
        s.socket.1 += 1;
        s.socket.0 += usize::from(within(&t.cpus, &xml.packages, &near));
        s.numa.1 += 1;
        s.numa.0 += usize::from(within(&t.cpus, &xml.numas, &near));
        if t.gpus.len() > 1 {
            s.all_gpus.1 += 1;
            s.all_gpus.0 += usize::from(t.gpus.iter().all(|g| !near_of(g).is_disjoint(&t.cpus)));
        }
        let gpu_package = package_of(&near_of(&t.gpus[0]));
        let here = fabric
            .iter()
            .any(|(_, bus)| package_of(&near_of(bus)) == gpu_package);
        if here {
            s.nic.1 += 1;
            let ok = t.nic.as_ref().is_some_and(|n| {
                is_fabric(n)
                    && xml.osdev.get(n).map(|b| package_of(&near_of(b))) == Some(gpu_package)
            });
            s.nic.0 += usize::from(ok);
        }
        s.widest = s.widest.max(t.cpus.len());
    }
    // Spread, by GPU domain (the CPUs near a GPU) and by package holding GPUs.
    let domains: BTreeSet<Cpus> = xml
        .locality
        .iter()
        .filter(|(bus, _)| xml.gpus.contains(*bus))
        .map(|(_, c)| c.clone())
        .collect();
    let idle_and_crowded =
        |counts: Vec<usize>| counts.contains(&0) && counts.iter().any(|&c| c >= 2);
    let per_domain: Vec<usize> = domains
        .iter()
        .map(|d| {
            tasks
                .iter()
                .filter(|t| t.gpus.iter().any(|g| near_of(g) == *d))
                .count()
        })
        .collect();
    let gpu_packages: BTreeSet<usize> = domains.iter().filter_map(package_of).collect();
    let per_package: Vec<usize> = gpu_packages
        .iter()
        .map(|&p| {
            tasks
                .iter()
                .filter(|t| !t.cpus.is_disjoint(&xml.packages[p]))
                .count()
        })
        .collect();
    let even = |counts: &[usize]| {
        counts.iter().max().unwrap_or(&0) - counts.iter().min().unwrap_or(&0) <= 1
    };
    // The NUMA nodes near a GPU, each with the tasks whose first GPU is near it.
    let gpu_numa: BTreeSet<usize> = domains
        .iter()
        .filter_map(|d| xml.numas.iter().position(|n| !n.is_disjoint(d)))
        .collect();
    let per_numa: Vec<usize> = gpu_numa
        .iter()
        .map(|&n| {
            tasks
                .iter()
                .filter(|t| {
                    t.gpus
                        .first()
                        .is_some_and(|g| !near_of(g).is_disjoint(&xml.numas[n]))
                })
                .count()
        })
        .collect();
    s.balance = even(&per_package) && even(&per_numa);
    s.spread = !idle_and_crowded(per_domain) && !idle_and_crowded(per_package);
    for (i, a) in tasks.iter().enumerate() {
        for b in &tasks[i + 1..] {
            s.disjoint &= a.cpus.is_disjoint(&b.cpus);
        }
    }
    s
}

fn ratio((a, b): (usize, usize)) -> String {
    if b == 0 {
        "–".to_string()
    } else {
        format!("{a}/{b}")
    }
}

fn yes(b: bool) -> &'static str {
    if b {
        "yes"
    } else {
        "no"
    }
}

fn at_least(lama: (usize, usize), other: (usize, usize)) -> bool {
    // Compared as fractions; a criterion that judges no task of one side is not compared.
    lama.1 == 0 || other.1 == 0 || lama.0 * other.1 >= other.0 * lama.1
}

#[test]
fn gpu_placement_is_never_worse_than_mpibind() {
    let dir = topologies();
    if !dir.is_dir() {
        panic!("the test topologies are not at {}", dir.display());
    }
    // Node, GPUs, task counts, and for the fewest tasks the CPUs each task of K GPUs asks
    // for (`srun -c`): its share of the CPUs near its GPUs, by hand from the XML (Lassen: a
    // package of 80 PUs per 2 GPUs; Corona: 2 NUMA nodes of 12 PUs; Tioga: 2 L3 caches of 16;
    // g4dn: 4 GPUs and 48 PUs per package, 2 tasks; Pascal: both GPUs near package 0, 36 PUs).
    let cases: [(&str, usize, [usize; 3], usize); 5] = [
        ("coral-lassen", 4, [2, 4, 6], 80),
        ("epyc-corona", 4, [2, 4, 6], 24),
        ("eas-tioga", 8, [4, 8, 12], 32),
        ("g4dnmetal", 8, [4, 8, 12], 24),
        ("cts1-pascal", 2, [1, 2, 3], 36),
    ];
    let mut table = String::from(
        "| node | tasks | LAMA | socket | NUMA | all GPUs | NIC | spread | balance | disjoint | CPUs (widest) |\n\
         |---|---|---|---|---|---|---|---|---|---|---|\n",
    );
    let mut worse = Vec::new();
    for (machine, gpus, counts, c) in cases {
        let path = dir.join(format!("{machine}.xml"));
        let xml = read_xml(&path);
        for np in counts {
            let theirs = judge(&xml, &mpibind(machine, np));
            let mut ours = vec![(String::from("gcsbnh"), judge(&xml, &lama(&path, np, None)))];
            if np < gpus {
                let k = gpus / np;
                ours.push((
                    format!("gcsbnh, {k} GPUs and {c} CPUs per task"),
                    judge(&xml, &lama(&path, np, Some((k, c)))),
                ));
            }
            for (how, s) in ours
                .iter()
                .map(|(h, s)| (h.as_str(), s))
                .chain([("mpibind", &theirs)])
            {
                table.push_str(&format!(
                    "| {machine} | {np} | {how} | {} | {} | {} | {} | {} | {} | {} | {} |\n",
                    ratio(s.socket),
                    ratio(s.numa),
                    ratio(s.all_gpus),
                    ratio(s.nic),
                    yes(s.spread),
                    yes(s.balance),
                    yes(s.disjoint),
                    s.widest
                ));
            }
            for (how, s) in &ours {
                let multi = how.contains("per task") || s.all_gpus.1 > 0;
                let fine = at_least(s.socket, theirs.socket)
                    && at_least(s.numa, theirs.numa)
                    && (!multi || at_least(s.all_gpus, theirs.all_gpus))
                    && at_least(s.nic, theirs.nic)
                    && (s.spread || !theirs.spread)
                    && (s.balance || !theirs.balance)
                    && (s.disjoint || !theirs.disjoint);
                if !fine {
                    worse.push(format!("{machine} -n{np} {how}: {s:?} against {theirs:?}"));
                }
            }
        }
    }
    let golden = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/quality/table.md");
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::write(&golden, &table).unwrap();
    }
    println!("{table}");
    assert!(
        worse.is_empty(),
        "LAMA below mpibind:\n{}",
        worse.join("\n")
    );
    assert_eq!(
        std::fs::read_to_string(&golden).unwrap_or_default(),
        table,
        "the quality table changed (UPDATE_GOLDEN=1 rewrites {})",
        golden.display()
    );
}

/// More CPUs per task (`-c`) than the CPUs near a task's GPUs, with the default binding: the
/// task runs on the smallest object holding its GPUs' CPUs that gives every task its CPUs, as
/// mpibind gives such a task its socket. Corona, 2 tasks of 2 GPUs and `-c 48` (a package is 24
/// cores of 2 threads): the CPUs near a task's two GPUs are two NUMA nodes (24 CPUs), and each
/// task's CPUs are exactly the XML's package holding them, the packages mpibind gives its 2
/// tasks, none shared. Judged from the XML, not by the engine under test.
#[test]
fn a_task_wider_than_the_cpus_near_its_gpus_gets_their_package() {
    let path = topologies().join("epyc-corona.xml");
    if !path.is_file() {
        panic!("the test topologies are not at {}", topologies().display());
    }
    let xml = read_xml(&path);
    let ours = lama(&path, 2, Some((2, 48)));
    for t in &ours {
        let near: Cpus = t
            .gpus
            .iter()
            .flat_map(|g| xml.locality[g].clone())
            .collect();
        assert_eq!(near.len(), 24, "the CPUs near {:?}", t.gpus);
        let holding: Vec<&Cpus> = xml.packages.iter().filter(|p| near.is_subset(p)).collect();
        assert_eq!(holding, [&t.cpus], "task of {:?}", t.gpus);
    }
    let theirs = mpibind("epyc-corona", 2);
    assert_eq!(
        ours.iter().map(|t| &t.cpus).collect::<Vec<_>>(),
        theirs.iter().map(|t| &t.cpus).collect::<Vec<_>>()
    );
    let s = judge(&xml, &ours);
    assert_eq!(
        (s.socket, s.all_gpus, s.disjoint, s.widest),
        ((2, 2), (2, 2), true, 48)
    );
}

//! A node of 4,096 hardware threads and 128 NUMA nodes through the plugin's own path, past
//! CPU 1,023 and NUMA node 63: the topology exported to a cache file and read back as a step
//! reads it, the step's cgroup v2 cpuset and its allocated cores, the decision between them,
//! the placement, each task's variables and memory nodes, and the kernel's acceptance of a
//! mask that wide. The synthetic node is `pack:16 numa:8 core:16 pu:2`: by hand, core `c` holds
//! CPUs `2c` and `2c+1`, NUMA node `n` holds cores `16n .. 16n+15` (CPUs `32n .. 32n+31`), and
//! package `p` holds NUMA nodes `8p .. 8p+7` (CPUs `256p .. 256p+255`).

use lama_engine::{CpuList, Machine};
use spank_lama::config::SiteConfig;
use spank_lama::placement::place_local;
use spank_lama::request::{resolve, UserOptions};
use spank_lama::step_cpus::{cores_to_cpus, decide, StepCpus};
use spank_lama::task_env::task_environment;

const NODE: &str = "pack:16 numa:8 core:16 pu:2";

/// The node, written to a cache file by the same export slurmd runs, and loaded back.
fn node(dir: &std::path::Path) -> Machine {
    let path = dir.join("lama_topology.xml");
    let source = lama_hwloc::Source::Synthetic(NODE.into());
    spank_lama::topo_cache::export(&path, || lama_hwloc::export_xml(&source)).unwrap();
    lama_hwloc::load(&lama_hwloc::Source::Xml(path)).unwrap()
}

fn write(root: &std::path::Path, path: &str, text: &str) {
    let p = root.join(path.trim_start_matches('/'));
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, text).unwrap();
}

#[test]
fn a_step_on_the_upper_half_of_a_4096_cpu_node() {
    let dir = tempfile::tempdir().unwrap();
    let m = node(dir.path());
    assert_eq!(m.pus().len(), 4096);
    assert_eq!(m.objects(lama_engine::Level::Numa).len(), 128);
    // The step's cgroup v2 cpuset (a 26.05-style path by job id) holds CPUs 2048-4095, with
    // the list as Slurm writes it; Slurm allocated it the abstract cores 1000-2047 (socket-major,
    // CPUs 2000-4095). By hand the step's CPUs are 2048-4095.
    let root = dir.path().join("root");
    write(
        &root,
        "/proc/self/cgroup",
        "0::/system.slice/slurmstepd.scope/job_42/step_3/slurm\n",
    );
    write(
        &root,
        "/proc/self/mountinfo",
        "29 23 0:26 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:4 - cgroup2 cgroup2 rw,nsdelegate\n",
    );
    write(
        &root,
        "/sys/fs/cgroup/system.slice/slurmstepd.scope/job_42/step_3/user/cpuset.cpus",
        "2048-4095\n",
    );
    let job = spank_lama::cgroup::Job {
        id: 42,
        sluid: None,
    };
    let cgroup = spank_lama::cgroup::locate_in(&root, job, 3).unwrap();
    let set = cgroup.cpus_in(&root).unwrap();
    assert_eq!(set.to_string(), "2048-4095");
    let cores = CpuList::parse("1000-2047").unwrap();
    let allocated = cores_to_cpus(&m, &cores).unwrap();
    assert_eq!(allocated.to_string(), "2000-4095");
    let step = decide(Ok((set, cgroup)), Ok(allocated)).unwrap();
    assert_eq!(step.cpus.to_string(), "2048-4095");

    // 64 tasks, one core each, by socket then core, memory bound to their NUMA nodes.
    let user = UserOptions {
        map: Some("scbnh".into()),
        bind: Some("1c".into()),
        membind: Some("local".into()),
        ..UserOptions::default()
    };
    let request = resolve(&user, &SiteConfig::default()).unwrap().unwrap();
    let here = m.restrict(&step.cpus);
    let globals: Vec<u32> = (0..64).collect();
    let placed = place_local(&here, &request, &globals, false, StepCpus::default()).unwrap();
    assert_eq!(placed.tasks.len(), 64);
    // By hand: the step has packages 8-15; rank r goes to package 8 + r % 8, its core
    // r / 8 there (cores of package p start at CPU 256p): CPUs 256(8 + r%8) + 2(r/8) and the
    // next one, on NUMA node 8(8 + r%8) + (r/8)/16.
    for (r, t) in placed.tasks.iter().enumerate() {
        let r = r as u32;
        let first = 256 * (8 + r % 8) + 2 * (r / 8);
        assert_eq!(t.cpus, CpuList::from_cpus([first, first + 1]), "rank {r}");
        let numa = 8 * (8 + r % 8) + (r / 8) / 16;
        assert_eq!(t.mems, CpuList::from_cpus([numa]), "rank {r}");
        let env = task_environment(&request, t);
        let var = |k: &str| env.iter().find(|(n, _)| *n == k).map(|(_, v)| v.clone());
        assert_eq!(var("LAMA_CPUS"), Some(format!("{first}-{}", first + 1)));
        assert_eq!(var("LAMA_MEMS"), Some(numa.to_string()));
    }
    let last = placed.tasks.last().unwrap();
    assert_eq!(last.cpus.to_string(), "3854-3855");
    assert_eq!(last.mems.to_string(), "120");
}

/// The kernel takes a mask as wide as CPU 4,095 (it ignores CPUs it does not have): the
/// plugin's `sched_setaffinity` call on such a node, run here with this machine's CPU 0 in it.
#[test]
fn the_kernel_takes_a_4096_cpu_mask() {
    let before = spank_lama::bind::get_affinity().unwrap();
    let wide = CpuList::parse("0,1024,2048,4095").unwrap();
    std::thread::spawn(move || {
        spank_lama::bind::set_affinity(&wide).unwrap();
        assert_eq!(spank_lama::bind::get_affinity().unwrap().to_string(), "0");
    })
    .join()
    .unwrap();
    assert_eq!(spank_lama::bind::get_affinity().unwrap(), before);
}

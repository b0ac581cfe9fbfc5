//! The placement by GPU (`by_gpu.rs`) and its language (`gpu.rs`), on small machines built by
//! hand and on real nodes' topologies.

use crate::by_gpu::*;
use crate::gpu::*;
use crate::hybrid::CpuUnit;
use crate::spec::{Bind, Layout, Mppr, Order};
use crate::{CpuList, Device, DeviceKind, Level, Machine};
use crate::{DeviceSpec, MachineBuilder};

fn dev(kind: DeviceKind, bus: &str, name: &str, pus_os: &[u32], near: &str) -> DeviceSpec {
    DeviceSpec {
        kind,
        vendor: "NVIDIA".into(),
        bus_id: bus.into(),
        uuid: None,
        names: vec![name.into()],
        pus_os: pus_os.to_vec(),
        near: near.into(),
        bridge: None,
    }
}

/// Two packages of two cores (PUs 0-1, 2-3); `gpus` and `nics` as (bus, name, PUs).
fn node(gpus: &[(&str, &[u32])], nics: &[(&str, &[u32])]) -> Machine {
    let mut b = MachineBuilder::new("gpu-node");
    for q in 0..4 {
        b.pu(q, true);
    }
    b.object(Level::Socket, Some(0), &[0, 1]);
    b.object(Level::Socket, Some(1), &[2, 3]);
    for q in 0..4 {
        b.object(Level::Core, Some(q), &[q]);
    }
    for (i, (bus, pus)) in gpus.iter().enumerate() {
        b.device(dev(
            DeviceKind::Gpu,
            bus,
            &format!("cuda{i}"),
            pus,
            "Package",
        ));
    }
    for (name, pus) in nics {
        b.device(dev(DeviceKind::Nic, "0000:99:00.0", name, pus, "Package"));
    }
    b.build().unwrap()
}

fn lassen() -> Machine {
    node(
        &[
            ("0000:04:00.0", &[0, 1]),
            ("0000:05:00.0", &[0, 1]),
            ("0035:03:00.0", &[2, 3]),
            ("0035:04:00.0", &[2, 3]),
        ],
        &[
            ("eth0", &[0, 1, 2, 3]),
            ("mlx5_0", &[0, 1]),
            ("mlx5_1", &[2, 3]),
        ],
    )
}

fn req(layout: &str, bind: Option<&str>) -> GpuRequest {
    GpuRequest {
        fixed: false,
        layout: parse_gpu_layout(layout).unwrap().unwrap(),
        bind: bind.map(|b| Bind::parse(b).unwrap()),
        mppr: Mppr::none(),
        per_gpu: None,
        gpus_per_task: 1,
        order: Order::Natural,
        oversubscribe: false,
        bind_asked: bind.is_some(),
        cpus_per_task: 1,
        cpu_unit: CpuUnit::Thread,
    }
}

fn all_gpus(m: &Machine) -> Vec<&Device> {
    m.devices()
        .iter()
        .filter(|d| d.kind == DeviceKind::Gpu)
        .collect()
}

fn summary(m: &Machine, p: &GpuPlacement) -> Vec<(Vec<usize>, String, Option<String>)> {
    p.tasks
        .iter()
        .map(|t| {
            (
                t.gpus.clone(),
                t.cpus.to_string(),
                t.nic.map(|n| m.devices()[n].names[0].clone()),
            )
        })
        .collect()
}

#[test]
fn one_gpu_per_task_on_the_cores_near_it_with_its_nic() {
    // By hand: GPUs 0,1 are near package 0 (CPUs 0-1), 2,3 near package 1 (CPUs 2-3);
    // the fabric cards mlx5_0 and mlx5_1 are near package 0 and 1; eth0 is not fabric.
    let m = lassen();
    let p = place_by_gpu(&m, &all_gpus(&m), 4, &req("gcsbnh", Some("1c")), "").unwrap();
    let nic = |s: &str| Some(s.to_string());
    assert_eq!(
        summary(&m, &p),
        vec![
            (vec![0], "0".to_string(), nic("mlx5_0")),
            (vec![1], "1".to_string(), nic("mlx5_0")),
            (vec![2], "2".to_string(), nic("mlx5_1")),
            (vec![3], "3".to_string(), nic("mlx5_1")),
        ]
    );
    assert!(p.notes.is_empty(), "{:?}", p.notes);
    // Fewer tasks than GPUs: two tasks use one GPU of each package (GPUs 0 and 2), not
    // GPUs 0 and 1, both near package 0, which would leave package 1 idle.
    let two = place_by_gpu(&m, &all_gpus(&m), 2, &req("gcsbnh", Some("1c")), "").unwrap();
    assert_eq!(
        summary(&m, &two),
        vec![
            (vec![0], "0".to_string(), nic("mlx5_0")),
            (vec![2], "2".to_string(), nic("mlx5_1")),
        ]
    );
    assert_eq!(
        two.notes,
        ["2 task(s) for 4 GPU group(s): gpu1,gpu3 used by no task"]
    );
    // Three: package 0 gets a second task only once package 1 has one.
    let three = place_by_gpu(&m, &all_gpus(&m), 3, &req("gcsbnh", Some("1c")), "").unwrap();
    let gpus: Vec<Vec<usize>> = three.tasks.iter().map(|t| t.gpus.clone()).collect();
    assert_eq!(gpus, [vec![0], vec![1], vec![2]]);
}

#[test]
fn a_task_of_several_gpus_runs_near_all_of_them() {
    // By hand: four GPUs near the four cores of a 2-package node (GPU i near core i), two
    // GPUs per task. Task 0 holds GPUs 0 and 1 and runs on cores 0-1 (near either), not on
    // core 0 alone; task 1 on cores 2-3.
    let m = node(
        &[
            ("0000:01:00.0", &[0]),
            ("0000:02:00.0", &[1]),
            ("0000:03:00.0", &[2]),
            ("0000:04:00.0", &[3]),
        ],
        &[],
    );
    let mut two = req("gpu", None);
    two.gpus_per_task = 2;
    let p = place_by_gpu(&m, &all_gpus(&m), 2, &two, "").unwrap();
    assert_eq!(summary(&m, &p)[0], (vec![0, 1], "0-1".to_string(), None));
    assert_eq!(summary(&m, &p)[1], (vec![2, 3], "2-3".to_string(), None));
    // GPUs 0 and 2, then 1 and 3 (fixed by the launcher): cores 0 and 2, then 1 and 3.
    two.fixed = true;
    let gpus = all_gpus(&m);
    let p = place_by_gpu(&m, &[gpus[0], gpus[2], gpus[1], gpus[3]], 2, &two, "").unwrap();
    assert_eq!(p.tasks[0].cpus.to_string(), "0,2");
    assert_eq!(p.tasks[1].cpus.to_string(), "1,3");
}

#[test]
fn gpus_follow_the_cpus_not_their_numbers() {
    // GPU 0 is near package 1 and GPU 1 near package 0 (as on Tioga): task 0 gets GPU 1.
    let m = node(&[("0000:01:00.0", &[2, 3]), ("0000:02:00.0", &[0, 1])], &[]);
    let p = place_by_gpu(&m, &all_gpus(&m), 2, &req("g", Some("1c")), "").unwrap();
    assert_eq!(summary(&m, &p)[0], (vec![1], "0".to_string(), None));
    assert_eq!(summary(&m, &p)[1], (vec![0], "2".to_string(), None));
}

#[test]
fn bind_to_the_gpu_cpus_and_several_gpus_per_task() {
    let m = lassen();
    let p = place_by_gpu(&m, &all_gpus(&m), 4, &req("gpu", None), "").unwrap();
    assert_eq!(p.tasks[0].cpus.to_string(), "0-1");
    assert_eq!(
        p.tasks[1].cpus.to_string(),
        "0-1",
        "GPU 1 is near package 0 too"
    );
    let mut two = req("gpu", None);
    two.gpus_per_task = 2;
    let p = place_by_gpu(&m, &all_gpus(&m), 2, &two, "").unwrap();
    assert_eq!(summary(&m, &p)[0].0, vec![0, 1]);
    assert_eq!(summary(&m, &p)[1].0, vec![2, 3]);
    assert_eq!(p.tasks[1].cpus.to_string(), "2-3");
    // The step's GPUs in another order (gpu0, gpu2, gpu3, gpu1): pairs are still made of
    // GPUs near the same CPUs (positions 0 and 3 are gpu0 and gpu1, near package 0).
    let gpus = all_gpus(&m);
    let p = place_by_gpu(&m, &[gpus[0], gpus[2], gpus[3], gpus[1]], 2, &two, "").unwrap();
    assert_eq!(
        summary(&m, &p)[0].0,
        vec![0, 3],
        "gpu0 and gpu1, both near package 0"
    );
    assert_eq!(summary(&m, &p)[1].0, vec![1, 2]);
    two.gpus_per_task = 5;
    let e = place_by_gpu(&m, &all_gpus(&m), 1, &two, "").unwrap_err();
    assert_eq!(
        e.to_string(),
        "each task asks for 5 GPUs, and only 4 are here (gpu0,gpu1,gpu2,gpu3)"
    );
}

#[test]
fn tasks_per_gpu_are_capped_and_shared_round_robin() {
    let m = lassen();
    let mut r = req("gcsbnh", Some("1c"));
    r.oversubscribe = true;
    let p = place_by_gpu(&m, &all_gpus(&m), 8, &r, "").unwrap();
    let gpus: Vec<usize> = p.tasks.iter().map(|t| t.gpus[0]).collect();
    assert_eq!(gpus, vec![0, 1, 2, 3, 0, 1, 2, 3]);
    r.per_gpu = Some(1);
    let e = place_by_gpu(&m, &all_gpus(&m), 5, &r, "").unwrap_err();
    assert!(e
        .to_string()
        .starts_with("5 tasks with at most 1 per GPU need 5 GPU(s)"));
}

#[test]
fn wider_bindings_missing_gpus_and_overlaps_are_refused() {
    let m = lassen();
    let e = place_by_gpu(&m, &all_gpus(&m), 2, &req("g", Some("1n")), "").unwrap_err();
    assert!(e
        .to_string()
        .starts_with("binding 1n is wider than the CPUs near gpu0,gpu1"));
    assert!(place_by_gpu(&m, &all_gpus(&m), 2, &req("g", Some("1s")), "").is_ok());
    let e = place_by_gpu(&m, &[], 2, &req("g", None), "the step has no GPU").unwrap_err();
    assert_eq!(
        e.to_string(),
        "a 'g' layout places tasks by GPU, and the step has no GPU"
    );
    let m = node(&[("0000:01:00.0", &[0]), ("0000:02:00.0", &[0, 1])], &[]);
    let e = place_by_gpu(&m, &all_gpus(&m), 2, &req("g", None), "").unwrap_err();
    assert!(matches!(e, GpuError::Overlap { .. }), "{e}");
}

#[test]
fn gpus_sharing_the_whole_node_and_partial_steps_are_said() {
    let m = node(
        &[
            ("0000:01:00.0", &[0, 1, 2, 3]),
            ("0000:02:00.0", &[0, 1, 2, 3]),
        ],
        &[],
    );
    let p = place_by_gpu(&m, &all_gpus(&m), 2, &req("gcsbnh", Some("1c")), "").unwrap();
    assert!(p.notes[0].starts_with("all 2 GPUs are near the same CPUs (0-3)"));
    assert_eq!(p.tasks[1].cpus.to_string(), "1");
    // A step with package 1's CPUs only, and GPU 0 (near package 0): its task uses the
    // step's CPUs, never package 0's.
    let m = lassen().restrict(&CpuList::parse("2-3").unwrap());
    let gpus = all_gpus(&m);
    let p = place_by_gpu(&m, &gpus[..1], 1, &req("g", None), "").unwrap();
    assert_eq!(p.tasks[0].cpus.to_string(), "2-3");
    assert!(p.notes[0].starts_with("none of the CPUs near gpu0 (0-1) can be used here"));
}

#[test]
fn dual_rail_nodes_share_out_their_cards() {
    let m = node(
        &[("0000:01:00.0", &[0, 1]), ("0000:02:00.0", &[0, 1])],
        &[("mlx5_0", &[0, 1]), ("mlx5_1", &[0, 1])],
    );
    let p = place_by_gpu(&m, &all_gpus(&m), 2, &req("g", Some("1c")), "").unwrap();
    let nics: Vec<_> = summary(&m, &p).into_iter().map(|s| s.2.unwrap()).collect();
    assert_eq!(nics, vec!["mlx5_0", "mlx5_1"]);
}

#[test]
fn the_language() {
    assert_eq!(
        parse_gpu_layout("gcsbnh").unwrap().unwrap().to_string(),
        "csbnh"
    );
    assert_eq!(
        parse_gpu_layout("gpu").unwrap().unwrap().to_string(),
        "csbnh"
    );
    assert!(parse_gpu_layout("csbnh").is_none());
    let d = parse_gpu_layout("gcx").unwrap().unwrap_err();
    assert_eq!((d.input.as_str(), d.span), ("gcx", Some((2, 1))));
    let d = Layout::parse("cgs").unwrap_err();
    assert!(d.reason.contains("may only lead a layout"), "{}", d.reason);
    assert!(is_gpu_bind("1g") && !is_gpu_bind("2g"));
    assert_eq!(
        split_gpu_mppr("2:g,1:c").unwrap(),
        (Some(2), Some("1:c".to_string()))
    );
    assert_eq!(split_gpu_mppr("1:g").unwrap(), (Some(1), None));
    assert_eq!(split_gpu_mppr("0:g,1:c").unwrap_err().span, Some((0, 1)));
    // Refused by its length, with a short message (it used to echo the whole input).
    let long = "1:g,".repeat(25_000);
    let e = split_gpu_mppr(&long).unwrap_err().to_string();
    assert!(e.contains("too long (100000 characters"), "{e}");
    assert!(e.len() < 1000, "{} bytes", e.len());
}

/// One package of two cores of two threads (PUs 0-1, 2-3), one GPU near all of it.
fn smt_node() -> Machine {
    smt_node_with_gpu_near(&[0, 1, 2, 3], "Package")
}

/// One package of two cores of two threads (PUs 0-1, 2-3), one GPU near `pus` (`near`).
fn smt_node_with_gpu_near(pus: &[u32], near: &str) -> Machine {
    let mut b = MachineBuilder::new("smt");
    for q in 0..4 {
        b.pu(q, true);
    }
    b.object(Level::Socket, Some(0), &[0, 1, 2, 3]);
    b.object(Level::Core, Some(0), &[0, 1]);
    b.object(Level::Core, Some(1), &[2, 3]);
    b.device(dev(DeviceKind::Gpu, "0000:01:00.0", "cuda0", pus, near));
    b.build().unwrap()
}

#[test]
fn the_default_binding_keeps_the_cpu_paths_rules() {
    let m = smt_node();
    let gpus = all_gpus(&m);
    let cpus = |p: &GpuPlacement| {
        p.tasks
            .iter()
            .map(|t| t.cpus.to_string())
            .collect::<Vec<_>>()
    };
    // Three tasks on two cores: 1c would share a core; by hand each task gets the one
    // thread it is mapped to (csbnh: PU 0 of core 0, PU 2 of core 1, then PU 1), and the
    // group says it fell back.
    let mut r = req("gcsbnh", Some("1c"));
    r.bind_asked = false;
    let p = place_by_gpu(&m, &gpus, 3, &r, "none").unwrap();
    assert_eq!(cpus(&p), ["0", "2", "1"]);
    assert_eq!(p.groups[0].used.to_string(), "1h");
    assert_eq!(p.groups[0].widened.to_string(), "1c");
    // The same binding asked for is applied as asked; two ranks on a core of two threads
    // is what 1c means, so nothing is said.
    r.bind_asked = true;
    let p = place_by_gpu_ranked(&m, &gpus, 3, &r, "none", &|t| t + 10).unwrap();
    assert_eq!(cpus(&p), ["0-1", "2-3", "0-1"]);
    assert_eq!(p.groups[0].shared, None);
    // -c 2 with the default: each task gets a whole core (2 threads).
    r.bind_asked = false;
    r.cpus_per_task = 2;
    let p = place_by_gpu(&m, &gpus, 2, &r, "none").unwrap();
    assert_eq!(cpus(&p), ["0-1", "2-3"]);
    assert_eq!(p.groups[0].used.to_string(), "1c");
    // -c 3: whole cores do not fit two tasks; exactly 3 threads each would need 6.
    r.cpus_per_task = 3;
    assert!(place_by_gpu(&m, &gpus, 2, &r, "none").is_err());
    r.oversubscribe = true;
    assert!(place_by_gpu(&m, &gpus, 2, &r, "none").is_ok());
}

#[test]
fn fixed_gpus_keep_the_callers_order_and_only_cpus_are_placed() {
    // By hand: GPU 2 is near package 1 (CPUs 2-3), GPU 0 near package 0 (CPUs 0-1). Fixed
    // in the order [2, 0], task 0 keeps GPU 2 and runs on CPU 2, task 1 keeps GPU 0 on CPU
    // 0, where LAMA's own choice would give task 0 GPU 0.
    let m = lassen();
    let all = all_gpus(&m);
    let given = [all[2], all[0]];
    let mut r = req("gcsbnh", Some("1c"));
    r.fixed = true;
    let p = place_by_gpu(&m, &given, 2, &r, "none").unwrap();
    assert_eq!(
        summary(&m, &p),
        [
            (vec![0], "2".to_string(), Some("mlx5_1".to_string())),
            (vec![1], "0".to_string(), Some("mlx5_0".to_string()))
        ]
    );
    r.fixed = false;
    let own = place_by_gpu(&m, &given, 2, &r, "none").unwrap();
    assert_eq!(own.tasks[0].gpus, [1]);
    // Three tasks for two bound GPUs: refused, naming what is needed.
    r.fixed = true;
    let e = place_by_gpu(&m, &given, 3, &r, "none")
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("3 task(s) need 3 GPU(s) and the step has 2 here"),
        "{e}"
    );
}

#[test]
fn slots_per_gpu_joined_for_any_gpus_a_task_is_given() {
    // Lassen by hand: GPUs 0,1 near package 0 (CPUs 0-1), 2,3 near package 1 (CPUs 2-3).
    // One slot per GPU, 1c each: GPU 0 on CPU 0, GPU 1 on CPU 1, GPU 2 on 2, GPU 3 on 3.
    let m = lassen();
    let all = all_gpus(&m);
    let mut r = req("gcsbnh", Some("1c"));
    r.gpus_per_task = 2;
    let slots = place_gpu_slots(&m, &all, &r, "none").unwrap();
    let cpus: Vec<String> = slots.tasks.iter().map(|t| t.cpus.to_string()).collect();
    assert_eq!(cpus, ["0", "1", "2", "3"]);
    // Any two GPUs a resource manager gives one task: their slots joined, the first's NIC.
    let t = join_slots(&slots.tasks, &[0, 2]).unwrap();
    assert_eq!(
        (t.cpus.to_string(), t.gpus.clone()),
        ("0,2".to_string(), vec![0, 2])
    );
    assert_eq!(t.nic, slots.tasks[0].nic);
    assert_eq!(t.bound_logical.len(), 2);
    // Two slots of 1c: the task's binding is 2c.
    assert_eq!(t.bind, Some(Bind::parse("2c").unwrap()));
    assert_eq!(
        join_slots(&slots.tasks, &[3, 1]).unwrap().cpus.to_string(),
        "1,3"
    );
    assert!(join_slots(&slots.tasks, &[]).is_none());
    assert!(join_slots(&slots.tasks, &[4]).is_none());
    // -c 2 over two GPUs: one CPU per slot (2 / 2), by default each slot its GPU's share:
    // a task given GPUs 0 and 1 gets package 0's two CPUs, -c 2 as asked.
    let mut c = req("gcsbnh", Some("1c"));
    c.gpus_per_task = 2;
    c.cpus_per_task = 2;
    c.bind_asked = false;
    let slots = place_gpu_slots(&m, &all, &c, "none").unwrap();
    assert_eq!(cpus_of(&slots), ["0", "1", "2", "3"]);
    assert_eq!(
        join_slots(&slots.tasks, &[0, 1]).unwrap().cpus.to_string(),
        "0-1"
    );
    // -c 3 rounds up to 2 per slot: 4 CPUs for a package's two GPUs, which has 2. A resource
    // manager runs one such task (-n1 -c3 on 4 CPUs): the slots share CPUs rather than refuse
    // it.
    c.cpus_per_task = 3;
    // By hand: each slot is its GPU's package, shared by the package's two GPUs; a task given
    // GPUs 0 and 1 runs on package 0.
    let slots = place_gpu_slots(&m, &all, &c, "none").unwrap();
    assert_eq!(cpus_of(&slots), ["0-1", "0-1", "2-3", "2-3"]);
    let t = join_slots(&slots.tasks, &[0, 1]).unwrap();
    assert_eq!(t.cpus.to_string(), "0-1");
    // Two slots on the same CPUs join into no wider a binding than one.
    assert_eq!(t.bind, slots.tasks[0].bind);
}

#[test]
fn spare_gpus_and_gpus_that_outnumber_their_cpus_share_slots() {
    // The docker GPU node by hand: one CPU per package, two GPUs near each. Two tasks of two
    // GPUs each (which a resource manager runs): GPUs 0 and 1 share CPU 0's slot, 2 and 3
    // CPU 1's; a task given 0 and 1 runs on CPU 0, one given 2 and 3 on CPU 1.
    let m = numa_node(2, 1, 1, &[&[0], &[0], &[1], &[1]]);
    let all = all_gpus(&m);
    // The plugin's request: the default binding (1c), not asked.
    let mut r = req("gscbnh", Some("1c"));
    r.gpus_per_task = 2;
    r.bind_asked = false;
    let slots = place_gpu_slots(&m, &all, &r, "none").unwrap();
    assert_eq!(cpus_of(&slots), ["0", "0", "1", "1"]);
    assert_eq!(
        join_slots(&slots.tasks, &[0, 1]).unwrap().cpus.to_string(),
        "0"
    );
    assert_eq!(
        join_slots(&slots.tasks, &[2, 3]).unwrap().cpus.to_string(),
        "1"
    );
    // Where the CPUs suffice, slots stay apart (Lassen above: one CPU each).
}

/// `packages` packages of `numas` NUMA nodes of `cores` cores of one thread each, numbered
/// in order (package 0 holds PUs 0..numas*cores), and one GPU near each PU list of `gpus`.
fn numa_node(packages: u32, numas: u32, cores: u32, gpus: &[&[u32]]) -> Machine {
    let mut b = MachineBuilder::new("numa-node");
    let per_numa = cores;
    let per_package = numas * per_numa;
    for q in 0..packages * per_package {
        b.pu(q, true);
        b.object(Level::Core, Some(q), &[q]);
    }
    for p in 0..packages {
        let pus: Vec<u32> = (p * per_package..(p + 1) * per_package).collect();
        b.object(Level::Socket, Some(p), &pus);
    }
    for n in 0..packages * numas {
        let pus: Vec<u32> = (n * per_numa..(n + 1) * per_numa).collect();
        b.object(Level::Numa, Some(n), &pus);
    }
    for (i, pus) in gpus.iter().enumerate() {
        b.device(dev(
            DeviceKind::Gpu,
            &format!("0000:{:02x}:00.0", i + 1),
            &format!("cuda{i}"),
            pus,
            "NUMANode",
        ));
    }
    b.build().unwrap()
}

/// The default binding (`1c`, not asked) with `-c`.
fn with_c(cpus_per_task: u32) -> GpuRequest {
    let mut r = req("gcsbnh", Some("1c"));
    r.bind_asked = false;
    r.cpus_per_task = cpus_per_task;
    r
}

fn cpus_of(p: &GpuPlacement) -> Vec<String> {
    p.tasks.iter().map(|t| t.cpus.to_string()).collect()
}

#[test]
fn a_wide_c_widens_to_the_smallest_object_holding_the_gpus() {
    // By hand: 2 packages (PUs 0-3, 4-7) of 2 NUMA nodes of 2 cores (0-1, 2-3, 4-5, 6-7),
    // GPU 0 near NUMA node 0 (0-1), GPU 1 near NUMA node 2 (4-5).
    let m = numa_node(2, 2, 2, &[&[0, 1], &[4, 5]]);
    let gpus = all_gpus(&m);
    // -c 2 fits the CPUs near each GPU: nothing widens, nothing is said.
    let p = place_by_gpu(&m, &gpus, 2, &with_c(2), "").unwrap();
    assert_eq!(cpus_of(&p), ["0-1", "4-5"]);
    assert!(p.notes.is_empty(), "{:?}", p.notes);
    // -c 3 is more than a NUMA node's 2: each task gets 3 cores (3c) of the package
    // holding its GPU's NUMA node, from its first core (0-2 in 0-3, 4-6 in 4-7).
    let p = place_by_gpu(&m, &gpus, 2, &with_c(3), "").unwrap();
    assert_eq!(cpus_of(&p), ["0-2", "4-6"]);
    assert_eq!(p.groups.len(), 2);
    assert_eq!(p.groups[0].used.to_string(), "3c");
    assert_eq!(
        p.notes,
        [
            "-c 3 is more than the 2 CPUs near gpu0: its task runs on the CPUs of Package \
             L#0 holding them (0-3), none shared",
            "-c 3 is more than the 2 CPUs near gpu1: its task runs on the CPUs of Package \
             L#1 holding them (4-7), none shared",
        ]
    );
    // -c 4: the whole package each.
    let p = place_by_gpu(&m, &gpus, 2, &with_c(4), "").unwrap();
    assert_eq!(cpus_of(&p), ["0-3", "4-7"]);
    // One task of -c 5: more than a package, so the whole node (its first 5 cores).
    let p = place_by_gpu(&m, &gpus, 1, &with_c(5), "").unwrap();
    assert_eq!(cpus_of(&p), ["0-4"]);
    assert!(
        p.notes[1]
            .ends_with("its task runs on the CPUs of Machine L#0 holding them (0-7), none shared"),
        "{:?}",
        p.notes
    );
    // Two tasks of -c 5 need 10 CPUs, and the node has 8: refused as before, naming the
    // CPUs near the GPU.
    let e = place_by_gpu(&m, &gpus, 2, &with_c(5), "").unwrap_err();
    assert!(
        matches!(&e, GpuError::Place { cpus, .. } if cpus.to_string() == "0-1"),
        "{e}"
    );
    // Allowed to oversubscribe: when the node cannot give every task its CPUs either, the
    // tasks stay on the CPUs near their GPU as before (5 tasks of -c 2 on GPU 0 alone:
    // 10 CPUs of 8), sharing them in passes; when the node can (3 tasks: 6 CPUs, more
    // than package 0's 4), they are widened rather than oversubscribed: csbnh takes the
    // cores in order, 2 at a time (0-1, 2-3, then package 1's 4-5).
    let mut over = with_c(2);
    over.oversubscribe = true;
    let p = place_by_gpu(&m, &gpus[..1], 5, &over, "").unwrap();
    assert!(p.tasks.iter().all(|t| t.cpus.to_string() == "0-1"), "{p:?}");
    assert!(!p.notes.iter().any(|n| n.contains("holding them")));
    let p = place_by_gpu(&m, &gpus[..1], 3, &over, "").unwrap();
    assert_eq!(cpus_of(&p), ["0-1", "2-3", "4-5"]);
    assert!(
        p.notes[0].contains("Machine L#0 holding them (0-7)"),
        "{:?}",
        p.notes
    );
}

#[test]
fn groups_whose_widened_cpus_meet_are_placed_together() {
    // By hand: GPUs 0 and 1 near NUMA nodes 0 (0-1) and 1 (2-3) of package 0 (0-3), GPU 2
    // near NUMA node 2 (4-5) of package 1 (4-7). With -c 2 each task fits its NUMA node.
    let m = numa_node(2, 2, 2, &[&[0, 1], &[2, 3], &[4, 5]]);
    let gpus = all_gpus(&m);
    let p = place_by_gpu(&m, &gpus, 3, &with_c(2), "").unwrap();
    assert_eq!(cpus_of(&p), ["0-1", "2-3", "4-5"]);
    // Four tasks, round-robin: tasks 0 and 3 on GPU 0, 1 on GPU 1, 2 on GPU 2. GPU 0's two
    // tasks need 4 CPUs, its NUMA node has 2: widened to package 0 (0-3), which holds GPU
    // 1's CPUs, so the three tasks of GPUs 0 and 1 go there together, 6 CPUs of 4; widened
    // again to the node (0-7), which holds GPU 2's: all four, 8 CPUs of 8. Each GPU's tasks
    // in turn, in the order of their CPUs (tasks 0, 3, 1, 2), take 2 cores each in order:
    // 0-1, 2-3, 4-5, 6-7.
    let p = place_by_gpu(&m, &gpus, 4, &with_c(2), "").unwrap();
    assert_eq!(cpus_of(&p), ["0-1", "4-5", "6-7", "2-3"]);
    assert_eq!(p.groups.len(), 1);
    assert_eq!(p.groups[0].gpus, "gpu0,gpu1,gpu2");
    assert_eq!(
        p.notes,
        [
            "2 tasks of -c 2 need 4 CPUs, more than the 2 near gpu0: the 4 tasks of \
             gpu0,gpu1,gpu2 run together on the CPUs of Machine L#0 holding them (0-7), none \
             shared"
        ]
    );
    // Three tasks of -c 3: GPU 0's widened to package 0 meets GPU 1's (6 CPUs of 4), the
    // node then meets GPU 2's (9 CPUs of 8): refused.
    assert!(place_by_gpu(&m, &gpus, 3, &with_c(3), "").is_err());
    // GPUs 0 and 1 only, one task of -c 3 each: widened to package 0 they meet, 6 CPUs of
    // 4 do not fit, so both go to the node: 3 cores each, kept inside a package (0-2 and
    // 4-6).
    let m = numa_node(2, 2, 2, &[&[0, 1], &[2, 3]]);
    let p = place_by_gpu(&m, &all_gpus(&m), 2, &with_c(3), "").unwrap();
    assert_eq!(cpus_of(&p), ["0-2", "4-6"]);
    assert!(p.notes[0].starts_with(
        "-c 3 is more than the 2 CPUs near gpu0; -c 3 is more than the 2 CPUs near gpu1: \
         the 2 tasks of gpu0,gpu1 run together on the CPUs of Machine L#0"
    ));
}

#[test]
fn an_asked_binding_restricted_cpus_and_cores_keep_their_rules() {
    let m = numa_node(2, 2, 2, &[&[0, 1], &[4, 5]]);
    let gpus = all_gpus(&m);
    // A binding that was asked for is not widened: 3c on 2 CPUs cannot be placed.
    let mut asked = req("gcsbnh", Some("3c"));
    asked.cpus_per_task = 3;
    let e = place_by_gpu(&m, &gpus, 2, &asked, "").unwrap_err();
    assert!(matches!(e, GpuError::Place { .. }), "{e}");
    // 1c asked with -c 3: one core each, near the GPUs.
    let mut asked = req("gcsbnh", Some("1c"));
    asked.cpus_per_task = 3;
    let p = place_by_gpu(&m, &gpus, 2, &asked, "").unwrap();
    assert_eq!(cpus_of(&p), ["0", "4"]);
    // Under 1g the tasks stay on the CPUs near their GPUs whatever -c says.
    let mut all = req("gcsbnh", None);
    all.cpus_per_task = 3;
    let p = place_by_gpu(&m, &gpus, 2, &all, "").unwrap();
    assert_eq!(cpus_of(&p), ["0-1", "4-5"]);
    // A step with CPUs 0-2 and 4-7: package 0 gives only its usable CPUs (0-2), enough
    // for -c 3.
    let step = m.restrict(&CpuList::parse("0-2,4-7").unwrap());
    let p = place_by_gpu(&step, &all_gpus(&step), 2, &with_c(3), "").unwrap();
    assert_eq!(cpus_of(&p), ["0-2", "4-6"]);
    assert!(
        p.notes[0].contains("Package L#0 holding them (0-2)"),
        "{:?}",
        p.notes
    );
    // CPUs counted as cores: the note says cores. By hand: one package (PUs 0-3) of two
    // cores of two threads, one GPU near core 0 (PUs 0-1) whose one task asks for 2 cores.
    let m = smt_node_with_gpu_near(&[0, 1], "Core");
    let mut cores = with_c(2);
    cores.cpu_unit = CpuUnit::Core;
    let p = place_by_gpu(&m, &all_gpus(&m), 1, &cores, "").unwrap();
    assert_eq!(cpus_of(&p), ["0-3"]);
    assert_eq!(
        p.notes,
        [
            "-c 2 is more than the 1 cores near gpu0: its task runs on the CPUs of Package L#0 \
          holding them (0-3), none shared"
        ]
    );
}

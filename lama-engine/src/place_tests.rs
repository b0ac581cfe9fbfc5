//! Placement semantics: the paper's examples, the defects of Open MPI's LAMA we do not copy
//! (SPEC §2.9), and property tests of the engine's invariants.

use crate::hybrid::{binding_for_cpus, exact_binding, CpuUnit};
use crate::level::{Level, ALL_LEVELS};
use crate::spec::{Bind, Layout, Mppr, Order};
use crate::topology::{Machine, MachineBuilder};
use crate::{place, place_cpus_per_task, CpuList, PlaceError, Placement, Request};
use proptest::prelude::*;

fn synth(s: &str) -> Machine {
    Machine::synthetic(s).unwrap()
}

fn request(layout: &str, bind: &str, np: u32) -> Request {
    let mut r = Request::new(Layout::parse(layout).unwrap(), np);
    r.bind = Bind::parse(bind).unwrap();
    r
}

fn cpus_of(p: &Placement<'_>) -> Vec<String> {
    cpus(p)
}

/// `(node, mapped PU logical index)` per rank.
fn mapped(p: &Placement<'_>) -> Vec<(u32, u32)> {
    p.processes().iter().map(|x| (x.node, x.pu)).collect()
}

/// Bindings as OS CPU lists per rank.
fn cpus(p: &Placement<'_>) -> Vec<String> {
    (0..p.len()).map(|r| p.info(r).cpus.to_string()).collect()
}

/// The socket (package logical index) of each rank's mapped PU.
fn sockets(p: &Placement<'_>) -> Vec<usize> {
    p.processes()
        .iter()
        .map(|x| {
            p.nodes()[x.node as usize]
                .objects(Level::Socket)
                .iter()
                .position(|o| o.pus.contains(&x.pu))
                .unwrap()
        })
        .collect()
}

#[test]
fn paper_example_two_nodes_scbnh() {
    let m = synth("pack:2 core:4 pu:2");
    let p = place(&[&m, &m], &request("scbnh", "none", 24)).unwrap();
    // Node 0's first hardware threads, alternating sockets: s0c0, s1c0, s0c1, s1c1, ...
    let first: Vec<(u32, u32)> = [0, 8, 2, 10, 4, 12, 6, 14]
        .iter()
        .map(|&pu| (0, pu))
        .collect();
    let m = mapped(&p);
    assert_eq!(m[0..8], first[..]);
    // 8-15: the same on node 1.
    let node1: Vec<(u32, u32)> = first.iter().map(|&(_, pu)| (1, pu)).collect();
    assert_eq!(m[8..16], node1[..]);
    // 16-23: node 0's second hardware threads.
    let second: Vec<(u32, u32)> = first.iter().map(|&(_, pu)| (0, pu + 1)).collect();
    assert_eq!(m[16..24], second[..]);
    assert!(cpus(&p).iter().all(String::is_empty));
    assert_eq!(p.node_stride(), 8);
}

#[test]
fn changeset_example_natural_and_sequential() {
    let m = synth("pack:2 core:4 pu:1");
    let mut req = request("scbnh", "1c", 8);
    let p = place(&[&m], &req).unwrap();
    assert_eq!(sockets(&p), [0, 1, 0, 1, 0, 1, 0, 1]);
    req.order = Order::Sequential;
    let p = place(&[&m], &req).unwrap();
    assert_eq!(sockets(&p), [0, 0, 0, 0, 1, 1, 1, 1]);
    assert_eq!(cpus(&p), ["0", "1", "2", "3", "4", "5", "6", "7"]);
}

#[test]
fn defect_cache_depth_is_respected() {
    // Open MPI matched `L2` to the first cache it found (L1). Here each L2 holds two cores, each
    // with its own L1: round-robin over L2 visits cores 0, 2, 1, 3.
    let m = synth("pack:1 l2:2 l1:2 core:1 pu:1");
    let p = place(&[&m], &request("L2csbnh", "1c", 4)).unwrap();
    assert_eq!(cpus(&p), ["0", "2", "1", "3"]);
    let p = place(&[&m], &request("L1csbnh", "1c", 4)).unwrap();
    assert_eq!(cpus(&p), ["0", "1", "2", "3"]);
    // Binding to an L2 takes both cores under it.
    let p = place(&[&m], &request("L2csbnh", "1L2", 2)).unwrap();
    assert_eq!(cpus(&p), ["0-1", "2-3"]);
}

#[test]
fn defect_containment_comes_from_the_machine() {
    // NUMA inside the package (Open MPI assumed NUMA above sockets and mapped nothing).
    let inside = synth("pack:2 numa:2 core:2 pu:1");
    let p = place(&[&inside], &request("Ncsbnh", "1c", 8)).unwrap();
    assert_eq!(cpus(&p), ["0", "2", "1", "3", "4", "6", "5", "7"]);
    // NUMA above the packages.
    let above = synth("numa:2 pack:2 core:2 pu:1");
    let p = place(&[&above], &request("Nscbnh", "1c", 8)).unwrap();
    assert_eq!(cpus(&p), ["0", "4", "2", "6", "1", "5", "3", "7"]);
    assert_eq!(p.containment(0), [Level::Numa, Level::Socket, Level::Core]);
    // One NUMA node per package: the NUMA domain counts as the coarser one.
    let same = synth("pack:2 numa:1 core:2 pu:1");
    let p = place(&[&same], &request("Ncsbnh", "1c", 4)).unwrap();
    assert_eq!(p.containment(0), [Level::Numa, Level::Socket, Level::Core]);
    assert_eq!(cpus(&p), ["0", "2", "1", "3"]);
}

#[test]
fn defect_absent_level_does_not_disable_a_node() {
    // Node 1 has no L3: the level has width 1 there and the node is used.
    let with = synth("pack:1 l3:2 core:2 pu:1");
    let without = synth("pack:1 core:4 pu:1");
    let p = place(&[&with, &without], &request("L3cnh", "1c", 8)).unwrap();
    assert_eq!(p.ranks_on(1).len(), 4);
    assert_eq!(
        mapped(&p),
        [
            (0, 0),
            (0, 2),
            (0, 1),
            (0, 3),
            (1, 0),
            (1, 1),
            (1, 2),
            (1, 3)
        ]
    );
}

#[test]
fn defect_widths_come_from_every_branch() {
    // Socket 0 has one core, socket 1 three: the core width is 3, not the left-most branch's 1.
    let mut b = MachineBuilder::new("asymmetric");
    for os in 0..4 {
        b.pu(os, true);
    }
    b.object(Level::Socket, Some(0), &[0]);
    b.object(Level::Socket, Some(1), &[1, 2, 3]);
    for c in 0..4 {
        b.object(Level::Core, Some(c), &[c]);
    }
    let m = b.build().unwrap();
    let p = place(&[&m], &request("scbnh", "1c", 4)).unwrap();
    assert_eq!(cpus(&p), ["0", "1", "2", "3"]);
    assert!(p.widths().contains(&(Level::Core, 3)));
    // A fifth process does not fit: the missing positions of socket 0 are skipped.
    let e = place(&[&m], &request("scbnh", "1c", 5)).unwrap_err();
    assert!(matches!(e, PlaceError::Oversubscribed { placed: 4, .. }));
}

#[test]
fn defect_sequential_follows_the_hardware_not_just_nodes() {
    let m = synth("pack:2 core:2 pu:1");
    let mut req = request("nscbh", "1c", 8);
    let p = place(&[&m, &m], &req).unwrap();
    assert_eq!(
        mapped(&p),
        [
            (0, 0),
            (1, 0),
            (0, 2),
            (1, 2),
            (0, 1),
            (1, 1),
            (0, 3),
            (1, 3)
        ]
    );
    req.order = Order::Sequential;
    let p = place(&[&m, &m], &req).unwrap();
    assert_eq!(
        mapped(&p),
        [
            (0, 0),
            (0, 1),
            (0, 2),
            (0, 3),
            (1, 0),
            (1, 1),
            (1, 2),
            (1, 3)
        ]
    );
    assert_eq!(p.node_stride(), 1);
}

#[test]
fn defect_mppr_counts_each_process_once_per_object() {
    // Each process binds two cores of one socket; a limit of 2 per socket allows two such
    // processes per socket (Open MPI counted the socket once per bound core).
    let m = synth("pack:2 core:4 pu:1");
    let mut req = request("csbnh", "2c", 4);
    req.mppr = Mppr::parse("2:s").unwrap();
    let p = place(&[&m], &req).unwrap();
    assert_eq!(cpus(&p), ["0-1", "2-3", "4-5", "6-7"]);
}

#[test]
fn defect_default_mppr_is_none() {
    // No hidden `1:c`: with hardware-thread bindings both threads of a core are used in the
    // first pass.
    let m = synth("pack:1 core:2 pu:2");
    let req = request("csbnh", "1h", 4);
    assert!(req.mppr.is_empty());
    let p = place(&[&m], &req).unwrap();
    assert_eq!(p.passes(), 1);
    assert_eq!(cpus(&p), ["0", "2", "1", "3"]);
    // An explicit core binding on both threads of each core: asked for, so the two processes
    // of a core share it, and the placement says so.
    let p = place(&[&m], &request("csbnh", "1c", 4)).unwrap();
    assert_eq!(cpus(&p), ["0-1", "2-3", "0-1", "2-3"]);
    assert_eq!(p.overlaps().len(), 2);
}

#[test]
fn mppr_limits_hold_in_the_first_pass_only() {
    let m = synth("pack:1 core:2 pu:2");
    let mut req = request("hcsbn", "1h", 4);
    req.mppr = Mppr::parse("1:c").unwrap();
    let e = place(&[&m], &req).unwrap_err();
    assert_eq!(
        e.to_string(),
        "placed 2 of 4 processes: oversubscribed; layout hcsbn with binding 1h and MPPR 1:c \
         offers 2 positions on 1 node(s); the MPPR limits 1:c allow only 2 of the 4 positions \
         the layout offers without them: loosen them, or ask for fewer processes"
    );
    // Without MPPR the general advice, without MPPR in it.
    let six = request("hcsbn", "1h", 6);
    assert!(place(&[&m], &six).unwrap_err().to_string().ends_with(
        "; allow oversubscription, ask for fewer processes, or use a smaller binding width"
    ));
    req.oversubscribe = true;
    let p = place(&[&m], &req).unwrap();
    assert_eq!(p.passes(), 2);
    // The second pass ignores the limit but still takes the free hardware threads (1 and 3)
    // before sharing one that is bound already.
    assert_eq!(cpus(&p), ["0", "2", "1", "3"]);
}

#[test]
fn mppr_second_pass_fills_free_cores_before_sharing() {
    // One process per socket in the first pass; the oversubscribed pass ignores the limit but
    // must not put rank 2 on core 0 (rank 0's) while cores 1-3 are idle.
    let m = synth("pack:2 core:4 pu:1");
    let mut req = request("csbnh", "1c", 4);
    req.mppr = Mppr::parse("1:s").unwrap();
    req.oversubscribe = true;
    let p = place(&[&m], &req).unwrap();
    assert_eq!(cpus(&p), ["0", "4", "1", "2"]);
    assert_eq!(p.passes(), 2);
    // Only when every core is bound do processes share one.
    req.np = 9;
    let p = place(&[&m], &req).unwrap();
    assert_eq!(cpus(&p), ["0", "4", "1", "2", "3", "5", "6", "7", "0"]);
}

#[test]
fn binding_width_steps_the_loop_and_skips_what_does_not_fit() {
    let m = synth("pack:2 core:3 pu:1");
    // c is in the layout: the loop steps by 2 cores; core 2 of socket 1 has no next core.
    let p = place(&[&m], &request("cnsbh", "2c", 3)).unwrap();
    assert_eq!(cpus(&p), ["0-1", "2-3", "3-4"]);
    let e = place(&[&m], &request("cnsbh", "2c", 4)).unwrap_err();
    assert!(matches!(e, PlaceError::Oversubscribed { placed: 3, .. }));
    // Binding to a level absent from the layout: map by core, bind to socket.
    let p = place(&[&m], &request("csbnh", "1s", 4)).unwrap();
    assert_eq!(cpus(&p), ["0-2", "0-2", "0-2", "3-5"]);
    // Binding to a level the machine lacks skips every position.
    let e = place(&[&m], &request("csbnh", "1L3", 1)).unwrap_err();
    assert_eq!(
        e.to_string(),
        "placed 0 of 1 processes: no usable resources: no available PU has 1 L3 cache(s) of its \
         node from its own onward (binding 1L3)"
    );
}

#[test]
fn restriction_renumbers_what_remains() {
    // A job given cores 2-3 of socket 0 sees them as socket 0's cores 0-1.
    let m = synth("pack:2 core:4 pu:1").restrict(&CpuList::from_cpus([2, 3, 4]));
    let p = place(&[&m], &request("scbnh", "1c", 3)).unwrap();
    assert_eq!(cpus(&p), ["2", "4", "3"]);
    assert!(p.widths().contains(&(Level::Core, 2)));
    let empty = synth("pack:1 core:2 pu:1").restrict(&CpuList::new());
    let e = place(&[&empty], &request("scbnh", "1c", 1)).unwrap_err();
    assert!(e.to_string().contains("no node has an available PU"));
}

#[test]
fn runs_of_children_without_a_level_count_as_one_position() {
    // Cores 0-1 share an L3; cores 2-3 have none (E-cores outside the only L3).
    let mut b = MachineBuilder::new("hybrid");
    for os in 0..4 {
        b.pu(os, true);
    }
    b.object(Level::Socket, Some(0), &[0, 1, 2, 3]);
    b.object(Level::L3, Some(0), &[0, 1]);
    for c in 0..4 {
        b.object(Level::Core, Some(c), &[c]);
    }
    let m = b.build().unwrap();
    let p = place(&[&m], &request("L3csbnh", "1c", 4)).unwrap();
    assert_eq!(cpus(&p), ["0", "2", "1", "3"]);
    // The run is never bound to: binding to L3 skips cores 2 and 3.
    let p = place(&[&m], &request("L3csbnh", "1L3", 2)).unwrap();
    assert_eq!(cpus(&p), ["0-1", "0-1"]);
    assert!(place(&[&m], &request("L3csbnh", "1L3", 3)).is_err());
}

#[test]
fn scrambled_os_indexes_are_reported_as_os_indexes() {
    let m = crate::topology::scrambled_machine();
    let p = place(&[&m], &request("cbnh", "1h", 2)).unwrap();
    let info = p.info(1);
    assert_eq!((info.pu_logical, info.pu_os), (2, 1));
    assert_eq!(info.cpus.to_string(), "1");
}

#[test]
fn zero_processes_is_an_empty_placement() {
    let m = synth("pack:1 core:1 pu:1");
    assert!(place(&[&m], &request("scbnh", "1c", 0)).unwrap().is_empty());
    assert_eq!(
        place(&[], &request("scbnh", "1c", 1)).unwrap_err(),
        PlaceError::NoNodes
    );
}

#[test]
fn whole_node_binding() {
    let m = synth("pack:2 core:2 pu:1");
    let p = place(&[&m, &m], &request("nscbh", "1n", 2)).unwrap();
    assert_eq!(cpus(&p), ["0-3", "0-3"]);
    assert_eq!(mapped(&p), [(0, 0), (1, 0)]);
}

// Property tests of the invariants.

fn machine() -> impl Strategy<Value = Machine> {
    (
        1u32..3,
        1u32..3,
        proptest::bool::ANY,
        1u32..4,
        1u32..3,
        proptest::bool::ANY,
    )
        .prop_map(|(pack, numa, numa_above, core, pu, l2)| {
            let mut s = String::new();
            if numa_above {
                s += &format!("numa:{numa} pack:{pack} ");
            } else {
                s += &format!("pack:{pack} numa:{numa} ");
            }
            if l2 && core % 2 == 0 {
                s += &format!("l2:{} core:2 ", core / 2);
            } else {
                s += &format!("core:{core} ");
            }
            s += &format!("pu:{pu}");
            Machine::synthetic(&s).unwrap()
        })
}

fn restricted_machine() -> impl Strategy<Value = Machine> {
    (
        machine(),
        proptest::collection::vec(proptest::bool::ANY, 64),
    )
        .prop_map(|(m, keep)| {
            let allowed = CpuList::from_cpus(
                m.pus()
                    .iter()
                    .enumerate()
                    .filter(|(i, _)| keep[*i % 64] || *i == 0)
                    .map(|(_, p)| p.os),
            );
            m.restrict(&allowed)
        })
}

fn layout() -> impl Strategy<Value = Layout> {
    proptest::sample::subsequence(ALL_LEVELS.to_vec(), 1..=ALL_LEVELS.len())
        .prop_shuffle()
        .prop_map(Layout::from_levels)
}

fn bind() -> impl Strategy<Value = Bind> {
    prop_oneof![
        Just(Bind::None),
        (1u32..3, proptest::sample::select(ALL_LEVELS.to_vec())).prop_map(|(count, level)| {
            Bind::Width {
                count: if level == Level::Node { 1 } else { count },
                level,
            }
        })
    ]
}

fn mppr() -> impl Strategy<Value = Mppr> {
    proptest::collection::vec(
        (1u32..3, proptest::sample::select(ALL_LEVELS.to_vec())),
        0..3,
    )
    .prop_map(Mppr::from_limits)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    #[test]
    fn placement_invariants(
        a in restricted_machine(),
        b in restricted_machine(),
        layout in layout(),
        bind in bind(),
        mppr in mppr(),
        sequential in proptest::bool::ANY,
        oversubscribe in proptest::bool::ANY,
        np in 0u32..40,
        bind_within in proptest::bool::ANY,
    ) {
        let req = Request {
            layout,
            bind,
            mppr: mppr.clone(),
            order: if sequential { Order::Sequential } else { Order::Natural },
            oversubscribe,
            np,
            bind_within,
        };
        let nodes = [&a, &b];
        let result = place(&nodes, &req);
        // Deterministic.
        let again = place(&nodes, &req);
        prop_assert_eq!(result.is_ok(), again.is_ok());
        let Ok(p) = result else { return Ok(()) };
        let again = again.unwrap();
        prop_assert_eq!(p.processes(), again.processes());
        prop_assert_eq!(p.len(), np as usize);

        for r in 0..p.len() {
            let info = p.info(r);
            let m = nodes[info.node as usize];
            // Every process is on an available PU of its node.
            prop_assert!(m.pus()[info.pu_logical as usize].available);
            // Its binding contains the mapped PU and only available PUs.
            if bind != Bind::None {
                prop_assert!(info.bound_logical.contains(&info.pu_logical));
                prop_assert!(info.bound_logical.iter().all(|&q| m.pus()[q as usize].available));
            } else {
                prop_assert!(info.cpus.is_empty());
            }
        }
        if p.passes() == 1 {
            // Within one pass no two processes share a mapped PU.
            let mut seen: Vec<(u32, u32)> = p.processes().iter().map(|x| (x.node, x.pu)).collect();
            seen.sort_unstable();
            let before = seen.len();
            seen.dedup();
            prop_assert_eq!(before, seen.len());
            // MPPR limits hold.
            for &(max, level) in mppr.limits() {
                for (n, m) in nodes.iter().enumerate() {
                    let objects: Vec<std::ops::Range<u32>> = match level {
                        Level::Node | Level::Board => std::iter::once(0..m.pus().len() as u32).collect(),
                        Level::Hwthread => (0..m.pus().len() as u32).map(|q| q..q + 1).collect(),
                        _ => m.objects(level).iter().map(|o| o.pus.clone()).collect(),
                    };
                    for obj in objects {
                        let users = (0..p.len())
                            .filter(|&r| p.processes()[r].node == n as u32)
                            .filter(|&r| {
                                let info = p.info(r);
                                let res = if bind == Bind::None {
                                    vec![info.pu_logical]
                                } else {
                                    info.bound_logical
                                };
                                res.iter().any(|q| obj.contains(q))
                            })
                            .count();
                        prop_assert!(users as u32 <= max, "{} processes on one {}", users, level);
                    }
                }
            }
        }
        if sequential {
            let keys: Vec<(u32, u32)> = p.processes().iter().map(|x| (x.node, x.pu)).collect();
            prop_assert!(keys.windows(2).all(|w| w[0] <= w[1]));
        }
    }
}

#[test]
fn bindings_for_cpus_per_task_stay_inside_where_possible() {
    // Three cores per socket, two cores per process: a binding from the third core would
    // cross into the other socket, so that position is skipped while the step still fits.
    let m = Machine::synthetic("pack:2 core:3 pu:1").unwrap();
    let mut req = request("scbnh", "2c", 2);
    req.bind_within = true;
    let p = place(&[&m], &req).unwrap();
    let cpus: Vec<String> = (0..2).map(|r| p.info(r).cpus.to_string()).collect();
    assert_eq!(cpus, ["0-1", "3-4"]);
    // Without the preference the third core of socket 0 is a position whose binding crosses.
    req.bind_within = false;
    req.np = 3;
    let crossing = place(&[&m], &req).unwrap();
    assert_eq!(crossing.info(2).cpus.to_string(), "2-3");
    // Three processes do not fit inside the sockets, and crossing would make ranks 1 and 2
    // share core 3: the -c default binding never shares, so `place` refuses ...
    req.bind_within = true;
    let e = place(&[&m], &req).unwrap_err();
    assert!(
        matches!(e, PlaceError::Oversubscribed { placed: 2, .. }),
        "{e}"
    );
    // ... and the -c placement binds each task to exactly its two CPUs instead.
    let p = place_cpus_per_task(&[&m], &req, exact_binding(&m, 2, CpuUnit::Thread)).unwrap();
    assert_eq!(cpus_of(&p), ["0-1", "2-3", "4-5"]);
    // A binding wider than any enclosing object crosses as before.
    let mut req = request("scbnh", "4c", 1);
    req.bind_within = true;
    assert_eq!(place(&[&m], &req).unwrap().info(0).cpus.to_string(), "0-3");
}

#[test]
fn hardware_thread_bindings_stay_in_their_core() {
    // Three threads per core, two per process: the binding never straddles two cores.
    let m = Machine::synthetic("core:2 pu:3").unwrap();
    let mut req = request("hcbn", "2h", 2);
    req.bind_within = true;
    assert_eq!(cpus(&place(&[&m], &req).unwrap()), ["0-1", "3-4"]);
    req.bind_within = false;
    assert_eq!(cpus(&place(&[&m], &req).unwrap()), ["0-1", "2-3"]);
}

// Tasks never share CPUs unless the user asked for it (the review finding on `-c`).

/// A request as the plugin makes it for `-c cpus` without a binding: the widened default
/// binding, kept inside enclosing objects where possible.
fn cpus_per_task_request(m: &Machine, layout: &str, np: u32, cpus: u32, unit: CpuUnit) -> Request {
    let mut r = Request::new(Layout::parse(layout).unwrap(), np);
    r.bind = binding_for_cpus(m, cpus, unit);
    r.bind_within = true;
    r
}

/// Whether two processes on the same node have a bound PU in common.
fn shared_pus(p: &Placement<'_>) -> Vec<(usize, usize, u32)> {
    let mut out = Vec::new();
    for a in 0..p.len() {
        for b in a + 1..p.len() {
            let (x, y) = (p.info(a), p.info(b));
            if x.node != y.node {
                continue;
            }
            if let Some(&q) = x.bound_logical.iter().find(|q| y.bound_logical.contains(q)) {
                out.push((a, b, q));
            }
        }
    }
    out
}

#[test]
fn cpus_per_task_of_whole_cores_never_share_cpus() {
    // `lama map --topology "pack:2 core:6 pu:2" -n 3 -c 8 --map scbnh`: 24 hardware threads hold three
    // tasks of 8. The widened binding 4c fits twice (cores 0-3, cores 6-9); a third task must
    // not be bound to cores 0-3 again while cores 4-5 and 10-11 stay idle.
    let m = synth("pack:2 core:6 pu:2");
    let req = cpus_per_task_request(&m, "scbnh", 3, 8, CpuUnit::Thread);
    assert_eq!(req.bind.to_string(), "4c");
    let p = place_cpus_per_task(&[&m], &req, exact_binding(&m, 8, CpuUnit::Thread)).unwrap();
    assert_eq!(cpus(&p), ["0-7", "8-15", "16-23"]);
    assert_eq!(p.passes(), 1);
    assert_eq!(p.request().bind.to_string(), "8h");
}

#[test]
fn cpus_per_task_not_a_multiple_of_the_threads_per_core() {
    // 4 processes of 3 CPUs, csbnh, on 12 CPUs of 2 threads per core: 2c per task does not
    // fit four times; each task gets exactly its 3 threads, consecutive, none shared.
    let m = synth("pack:1 core:6 pu:2");
    let req = cpus_per_task_request(&m, "csbnh", 4, 3, CpuUnit::Thread);
    assert_eq!(req.bind.to_string(), "2c");
    let p = place_cpus_per_task(&[&m], &req, exact_binding(&m, 3, CpuUnit::Thread)).unwrap();
    assert_eq!(cpus(&p), ["0-2", "3-5", "6-8", "9-11"]);
    // Each task is mapped to the first position of the layout inside its CPUs.
    assert_eq!(
        p.processes().iter().map(|x| x.pu).collect::<Vec<_>>(),
        [0, 4, 6, 10]
    );
    // Three tasks fit the widened binding: it is kept.
    let req = cpus_per_task_request(&m, "csbnh", 3, 3, CpuUnit::Thread);
    let p = place_cpus_per_task(&[&m], &req, exact_binding(&m, 3, CpuUnit::Thread)).unwrap();
    assert_eq!(cpus(&p), ["0-3", "4-7", "8-11"]);
    // Five do not fit at all: refused, not shared.
    let req = cpus_per_task_request(&m, "csbnh", 5, 3, CpuUnit::Thread);
    let e = place_cpus_per_task(&[&m], &req, exact_binding(&m, 3, CpuUnit::Thread)).unwrap_err();
    assert!(matches!(e, PlaceError::Oversubscribed { .. }), "{e}");
}

#[test]
fn the_widened_binding_alone_never_shares() {
    // `place` with the -c default binding (bind_within): no fallback, but no sharing either.
    let m = synth("pack:1 core:6 pu:2");
    let req = cpus_per_task_request(&m, "csbnh", 4, 3, CpuUnit::Thread);
    let e = place(&[&m], &req).unwrap_err();
    assert!(
        matches!(e, PlaceError::Oversubscribed { placed: 3, .. }),
        "{e}"
    );
}

#[test]
fn more_core_bindings_than_cores_give_each_rank_a_thread_of_the_core() {
    // 40 ranks with an explicit 1c on 36 cores of 2 threads: ranks 36-39 map to the second
    // threads of cores 0-3 and share those cores with ranks 0-3; the warning names them.
    let m = synth("pack:2 core:18 pu:2");
    let p = place(&[&m], &request("csbnh", "1c", 40)).unwrap();
    assert_eq!(p.passes(), 1);
    assert_eq!(cpus(&p)[36..], ["0-1", "2-3", "4-5", "6-7"]);
    assert_eq!(
        p.processes()[36..].iter().map(|x| x.pu).collect::<Vec<_>>(),
        [1, 3, 5, 7]
    );
    // Two ranks on a core of two threads each have a thread: what 1c means, no warning (the
    // summary still counts the shared CPUs).
    assert_eq!(p.overlaps()[0].ranks, [0, 36]);
    assert_eq!(p.overlap_warning(|r| r), None);
    // The default binding never does: one hardware thread each for the last ranks instead.
    let mut req = request("csbnh", "1c", 40);
    req.bind_within = true;
    let p = place(&[&m], &req);
    assert!(p.map_or(true, |p| p.overlaps().is_empty()));
}

#[test]
fn explicit_bindings_may_overlap_and_say_so() {
    // `2c` over three cores per socket: rank 2's binding takes core 3, which rank 1 has too.
    let m = synth("pack:2 core:3 pu:1");
    let p = place(&[&m], &request("cnsbh", "2c", 3)).unwrap();
    assert_eq!(cpus(&p), ["0-1", "2-3", "3-4"]);
    let o = p.overlaps();
    assert_eq!(o.len(), 1);
    assert_eq!((o[0].node, o[0].ranks.clone()), (0, vec![1, 2]));
    assert_eq!(o[0].cpus.to_string(), "3");
    assert_eq!(
        p.overlap_warning(|r| r + 10).unwrap(),
        "warning: binding 2c makes tasks share CPUs: ranks 11 and 12 share CPU 3. The binding \
         was asked for, so the tasks run as placed; for CPUs of their own ask for a narrower \
         binding or fewer tasks, or leave out the binding (the default never shares)"
    );
    // Map by core, bind to the socket: three processes share each socket's three cores.
    let p = place(&[&m], &request("csbnh", "1s", 6)).unwrap();
    assert_eq!(cpus(&p), ["0-2", "0-2", "0-2", "3-5", "3-5", "3-5"]);
    let o = p.overlaps();
    assert_eq!(o.len(), 2);
    assert_eq!(
        (o[0].ranks.clone(), o[0].cpus.to_string()),
        (vec![0, 1, 2], "0-2".into())
    );
    assert_eq!(
        (o[1].ranks.clone(), o[1].cpus.to_string()),
        (vec![3, 4, 5], "3-5".into())
    );
    // Three ranks on a socket of three threads: a thread each, what 1s means. With -c 2 they
    // need six threads of the socket's three: that surprises, and is said (by hand: ranks
    // 0-2 on CPUs 0-2, ranks 3-5 on CPUs 3-5).
    assert_eq!(p.overlap_warning(|r| r), None);
    assert_eq!(p.overlap_warning_needing(|r| r, 1), None);
    assert_eq!(
        p.overlap_warning_needing(|r| r, 2).unwrap(),
        "warning: binding 1s makes tasks share CPUs: ranks 0, 1 and 2 share CPUs 0-2 (3 tasks \
         of 2 CPUs each); ranks 3, 4 and 5 share CPUs 3-5 (3 tasks of 2 CPUs each). The \
         binding was asked for, so the tasks run as placed; for CPUs of their own ask for a \
         narrower binding or fewer tasks, or leave out the binding (the default never shares)"
    );
    // A seventh would make four processes on a socket of three cores: an overload.
    let e = place(&[&m], &request("csbnh", "1s", 7)).unwrap_err();
    assert!(
        matches!(e, PlaceError::Oversubscribed { placed: 6, .. }),
        "{e}"
    );
    // Disjoint bindings report nothing.
    assert!(place(&[&m], &request("csbnh", "1c", 6))
        .unwrap()
        .overlaps()
        .is_empty());
}

fn unit() -> impl Strategy<Value = CpuUnit> {
    prop_oneof![Just(CpuUnit::Thread), Just(CpuUnit::Core)]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    /// With the default binding for `-c` (widened, or the exact fallback), tasks never share a
    /// CPU unless the job is oversubscribed.
    #[test]
    fn cpus_per_task_bindings_never_overlap(
        a in restricted_machine(),
        two_nodes in proptest::bool::ANY,
        layout in layout(),
        mppr in mppr(),
        cpus_per_task in 1u32..7,
        unit in unit(),
        oversubscribe in proptest::bool::ANY,
        np in 0u32..30,
    ) {
        let nodes: Vec<&Machine> = if two_nodes { vec![&a, &a] } else { vec![&a] };
        let mut req = Request::new(layout, np);
        req.bind = binding_for_cpus(&a, cpus_per_task, unit);
        req.bind_within = true;
        req.mppr = mppr;
        req.oversubscribe = oversubscribe;
        let exact = exact_binding(&a, cpus_per_task, unit);
        for result in [place(&nodes, &req), place_cpus_per_task(&nodes, &req, exact)] {
            let Ok(p) = result else { continue };
            prop_assert_eq!(p.len(), np as usize);
            if p.passes() <= 1 {
                prop_assert_eq!(shared_pus(&p), vec![]);
                prop_assert!(p.overlaps().is_empty());
            } else {
                prop_assert!(oversubscribe);
            }
        }
    }

    /// A binding the user asked for may overlap others, but never silently: every CPU that
    /// two processes' bindings share is in the overlap report.
    #[test]
    fn explicit_overlaps_are_all_reported(
        a in restricted_machine(),
        layout in layout(),
        bind in bind(),
        np in 0u32..40,
    ) {
        let mut req = Request::new(layout, np);
        req.bind = bind;
        let Ok(p) = place(&[&a], &req) else { return Ok(()) };
        let mut seen: std::collections::HashMap<u32, u32> = Default::default();
        for r in 0..p.len() {
            for &c in p.info(r).cpus.cpus() {
                *seen.entry(c).or_default() += 1;
            }
        }
        let reported: std::collections::HashSet<u32> = p
            .overlaps()
            .iter()
            .flat_map(|o| o.cpus.cpus().to_vec())
            .collect();
        for (cpu, users) in seen {
            prop_assert_eq!(users > 1, reported.contains(&cpu), "CPU {}", cpu);
        }
    }
}

#[test]
fn joined_placements_keep_each_nodes_binding_under_its_global_rank() {
    // Two nodes of 2 sockets x 2 cores; node 0 holds ranks 0 and 2, node 1 ranks 1 and 3
    // (ranks dealt to nodes in turn). Each node places its ranks in ascending order by scbnh: the first on
    // socket 0 core 0 (CPU 0), the second on socket 1 core 0 (CPU 2).
    let m = synth("pack:2 core:2 pu:1");
    let r = request("scbnh", "1c", 2);
    let parts = vec![place(&[&m], &r).unwrap(), place(&[&m], &r).unwrap()];
    let joined = Placement::join(parts, &[vec![0, 2], vec![1, 3]]).unwrap();
    assert_eq!(joined.len(), 4);
    assert_eq!(joined.request().np, 4);
    assert_eq!(mapped(&joined), [(0, 0), (1, 0), (0, 2), (1, 2)]);
    assert_eq!(cpus(&joined), ["0", "0", "2", "2"]);
    assert_eq!(joined.tasks_per_node(), [2, 2]);
    assert_eq!(joined.ranks_by_node(), [vec![0, 2], vec![1, 3]]);
    // A node without tasks.
    let empty = place(&[&m], &request("scbnh", "1c", 0)).unwrap();
    let parts = vec![place(&[&m], &r).unwrap(), empty];
    assert_eq!(
        Placement::join(parts, &[vec![0, 1], vec![]])
            .unwrap()
            .tasks_per_node(),
        [2, 0]
    );
    // Ranks named twice or missing: no placement.
    let two = || vec![place(&[&m], &r).unwrap(), place(&[&m], &r).unwrap()];
    assert!(Placement::join(two(), &[vec![0, 1], vec![1, 2]]).is_none());
    assert!(Placement::join(two(), &[vec![0, 1], vec![2, 5]]).is_none());
    // Nodes bound differently (the default's fallback taken on one node only): each node keeps
    // its own binding, a core on node 0 and a socket (CPUs 0-1, 2-3) on node 1.
    let wide = place(&[&m], &request("scbnh", "1s", 2)).unwrap();
    let parts = vec![place(&[&m], &r).unwrap(), wide];
    let joined = Placement::join(parts, &[vec![0, 1], vec![2, 3]]).unwrap();
    assert_eq!(cpus(&joined), ["0", "2", "0-1", "2-3"]);
    assert_eq!(joined.node_binding(0).to_string(), "1c");
    assert_eq!(joined.node_binding(1).to_string(), "1s");
    // One part for two nodes alike: placed once, ranks dealt in turn as before.
    let shared = Placement::join_shared(
        vec![place(&[&m], &r).unwrap()],
        &[0, 0],
        &[vec![0, 2], vec![1, 3]],
    )
    .unwrap();
    assert_eq!(mapped(&shared), [(0, 0), (1, 0), (0, 2), (1, 2)]);
    assert_eq!(cpus(&shared), ["0", "0", "2", "2"]);
    assert!(Placement::join_shared(
        vec![place(&[&m], &r).unwrap()],
        &[0, 1],
        &[vec![0, 2], vec![1, 3]]
    )
    .is_none());
}

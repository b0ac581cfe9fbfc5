//! Placement: LAMA's nested loops over the maximal tree (SPEC §2.2–2.7, with the fixes of §2.9).
//!
//! The work has three steps.
//! 1. For each distinct machine, a *view*: the layout's levels sorted by how they contain each
//!    other on that machine, and for every available PU its coordinate (one index per layout
//!    level, counted within the enclosing coarser layout level). Levels not in the layout are
//!    pruned; a level the machine lacks, or lacks under some parent, counts as one position.
//! 2. The widths of the maximal tree: per level, the largest index + 1 over all machines.
//!    Each view then gets a dense table from position to PU (holes where a machine has no such
//!    position).
//! 3. The passes: an odometer over the layout, leftmost level fastest, the binding level
//!    stepping by the binding width. A position is used if it exists on its node, its binding
//!    fits, and (first pass only) no MPPR limit would be exceeded.
//!
//! Cost: building a view is O(PUs × levels) per distinct machine; a pass is O(positions), with
//! O(binding width) work per placed process. Memory per process is one [`Process`] (12 bytes).
//!
//! # Sharing CPUs
//!
//! Positions finer than the binding (the second hardware thread of a core under `1c`, the
//! cores of a socket under `1s`) lead to bindings that other processes hold too. As in Open
//! MPI, where a binding shared by more processes than it has CPUs is an *overload*, allowed
//! only with `overload-allowed`, two processes share CPUs only as far as the user asked:
//! - **The default binding** (`Request::bind_within`: the built-in `1c`, or the binding widened
//!   to cover N CPUs per process): no CPU is in two bindings within a pass. A position whose
//!   binding meets one already placed is skipped. When that leaves too few positions,
//!   [`place_cpus_per_task`] binds each process to exactly the N CPUs it was given (3 CPUs on
//!   cores of two threads: `3h`, consecutive, disjoint) instead of refusing CPUs that were
//!   allocated; when even that does not fit, the job is oversubscribed.
//! - **A binding the user asked for** (an explicit width): asking for it is asking for what it
//!   implies, as a resource manager's own core binding does. It may overlap others (`1s` while mapping
//!   by core, `2c` over an odd number of cores, `1c` for two processes mapped to the two
//!   threads of a core), and [`Placement::overlap_warning`] names who shares which CPUs, so that
//!   it never passes silently. Each mapped PU still takes one process per pass.
//! - **Without binding**, the mapped PU is the resource.
//!
//! Oversubscribed passes (only with `Request::oversubscribe`) ignore MPPR limits but still
//! fill what is free before sharing: each sweep allows one more process per binding (then per
//! mapped PU) than the previous one only when it found nothing, so MPPR's second pass takes the
//! cores the limits left idle before doubling up on a bound one.

use crate::cpulist::CpuList;
use crate::level::Level;
use crate::spec::{Bind, Layout, Mppr, Order};
use crate::topology::Machine;
use std::collections::HashMap;
use std::fmt;

const NONE: u32 = u32::MAX;

/// Largest number of positions one node may have in the maximal tree.
pub const MAX_POSITIONS_PER_NODE: u64 = 1 << 24;

/// A placement request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    /// The mapping layout.
    pub layout: Layout,
    /// What each process is bound to.
    pub bind: Bind,
    /// Maximum processes per resource, first pass only.
    pub mppr: Mppr,
    /// How ranks are numbered.
    pub order: Order,
    /// Whether further passes may run when one pass is not enough.
    pub oversubscribe: bool,
    /// How many processes to place.
    pub np: u32,
    /// The binding is the default (the built-in `1c`, or the one widened for N CPUs per process), not
    /// one the user asked for. Such bindings never share a CPU within a pass (see the module's
    /// section on sharing). They are also kept inside the smallest object (core, cache, NUMA
    /// node, die, package) of their mapped PU that can hold the whole binding, skipping
    /// positions whose binding would cross it; when that leaves too few positions for `np`
    /// processes in one pass, they are placed as without it (bindings may cross, as SPEC §2.4
    /// describes). Used for N CPUs per process, with [`place_cpus_per_task`].
    pub bind_within: bool,
}

impl Request {
    /// A request with the defaults: binding `1c`, no MPPR, natural order, no oversubscription.
    pub fn new(layout: Layout, np: u32) -> Self {
        Request {
            layout,
            bind: Bind::default(),
            mppr: Mppr::none(),
            order: Order::Natural,
            oversubscribe: false,
            np,
            bind_within: false,
        }
    }
}

/// Why a request cannot be placed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PlaceError {
    /// No node was given.
    #[error("no node to place on")]
    NoNodes,
    /// One pass did not place every process and oversubscription is not allowed.
    #[error(
        "placed {placed} of {requested} processes: oversubscribed; layout {layout} with binding \
         {bind}{mppr} offers {placed} positions on {nodes} node(s){why}; {advice}",
        advice = oversubscribed_advice(*placed, mppr, *without_mppr),
        mppr = if mppr.is_empty() { String::new() } else { format!(" and MPPR {mppr}") },
        why = match *shared {
            0 => String::new(),
            n => format!(
                " (its other {n} position(s) would share CPUs with a process already placed, \
                 which the default binding never does)"
            ),
        }
    )]
    Oversubscribed {
        /// Processes placed in the first pass.
        placed: u32,
        /// Processes asked for.
        requested: u32,
        /// The layout used.
        layout: Layout,
        /// The binding used.
        bind: Bind,
        /// The MPPR limits used.
        mppr: Mppr,
        /// How many nodes.
        nodes: usize,
        /// Positions of the pass left out because their default binding would share CPUs with
        /// a process already placed (see [`place`]).
        shared: u32,
        /// With MPPR limits: the positions the same pass offers without them.
        without_mppr: Option<u32>,
    },
    /// A whole pass placed nothing.
    #[error("placed 0 of {requested} processes: no usable resources: {why}")]
    NoUsableResources {
        /// Processes asked for.
        requested: u32,
        /// What is missing.
        why: String,
    },
    /// The maximal tree is too large to enumerate.
    #[error(
        "layout {layout} gives {positions} positions per node, more than {MAX_POSITIONS_PER_NODE}; \
         leave out levels the placement does not need"
    )]
    TooLarge {
        /// The layout used.
        layout: Layout,
        /// Positions per node.
        positions: u64,
    },
}

/// The available objects of one level on one machine.
#[derive(Debug, Clone)]
struct LevelObjs {
    /// Logical PU range of each object, in logical order.
    ranges: Vec<(u32, u32)>,
    /// For each PU (logical index), the object holding it, or `NONE` (unavailable PU, or no
    /// object of this level above it).
    of_pu: Vec<u32>,
}

impl LevelObjs {
    fn new(m: &Machine, level: Level) -> LevelObjs {
        let pus = m.pus();
        let n = pus.len();
        let mut of_pu = vec![NONE; n];
        let mut ranges = Vec::new();
        match level {
            Level::Node | Level::Board => {
                if pus.iter().any(|p| p.available) {
                    ranges.push((0, n as u32));
                    for (i, p) in pus.iter().enumerate() {
                        if p.available {
                            of_pu[i] = 0;
                        }
                    }
                }
            }
            Level::Hwthread => {
                for (i, p) in pus.iter().enumerate() {
                    if p.available {
                        of_pu[i] = ranges.len() as u32;
                        ranges.push((i as u32, i as u32 + 1));
                    }
                }
            }
            _ => {
                // Each PU belongs to the smallest object of the level that covers it (NUMA nodes
                // attached at one place share their PUs and count once).
                let objs = m.objects(level);
                let mut owner = vec![NONE; n];
                for (k, o) in objs.iter().enumerate() {
                    for p in o.pus.clone() {
                        let p = p as usize;
                        let cur = owner[p];
                        if cur == NONE || objs[cur as usize].pus.len() > o.pus.len() {
                            owner[p] = k as u32;
                        }
                    }
                }
                let mut dense: HashMap<(u32, u32), u32> = HashMap::new();
                for (i, p) in pus.iter().enumerate() {
                    if !p.available || owner[i] == NONE {
                        continue;
                    }
                    let r = &objs[owner[i] as usize].pus;
                    let key = (r.start, r.end);
                    let next = ranges.len() as u32;
                    let id = *dense.entry(key).or_insert(next);
                    if id == next {
                        ranges.push(key);
                    }
                    of_pu[i] = id;
                }
            }
        }
        LevelObjs { ranges, of_pu }
    }

    /// Whether, wherever an object of `self` meets an object of `other`, it contains it.
    fn contains_all_it_meets(&self, other: &LevelObjs) -> bool {
        let mut a = 0;
        for &(bs, be) in &other.ranges {
            while a < self.ranges.len() && self.ranges[a].1 <= bs {
                a += 1;
            }
            let mut k = a;
            while k < self.ranges.len() && self.ranges[k].0 < be {
                let (as_, ae) = self.ranges[k];
                if !(as_ <= bs && be <= ae) {
                    return false;
                }
                k += 1;
            }
        }
        true
    }
}

/// Sorts the layout's object levels from coarsest to finest as they nest on this machine.
fn containment_order(objs: &HashMap<Level, LevelObjs>, levels: &[Level]) -> Vec<Level> {
    let strictly_coarser = |a: Level, b: Level| -> bool {
        let (oa, ob) = (&objs[&a], &objs[&b]);
        let ab = oa.contains_all_it_meets(ob);
        let ba = ob.contains_all_it_meets(oa);
        match (ab, ba) {
            (true, false) => true,
            (false, true) => false,
            // Same PUs everywhere (or no meeting at all): NUMA counts as the coarser one, as in
            // hwloc 1.x and Open MPI; otherwise hwloc's usual nesting order.
            _ => {
                if a == Level::Numa || b == Level::Numa {
                    a == Level::Numa
                } else {
                    a < b
                }
            }
        }
    };
    let mut rest: Vec<Level> = levels.to_vec();
    rest.sort();
    let mut out = Vec::with_capacity(rest.len());
    while !rest.is_empty() {
        let pick = (0..rest.len())
            .find(|&i| {
                rest.iter()
                    .enumerate()
                    .all(|(j, &r)| j == i || !strictly_coarser(r, rest[i]))
            })
            .unwrap_or(0);
        out.push(rest.remove(pick));
    }
    out
}

/// What the engine derives from one machine for one request.
#[derive(Debug)]
struct NodeView {
    /// Containment order of the layout's object levels, coarsest first.
    containment: Vec<Level>,
    /// Available PUs (logical indexes).
    pus: Vec<u32>,
    /// Coordinates: for each available PU, one index per layout level except `n` (layout order).
    coords: Vec<u32>,
    /// Position offset → PU logical index + 1 (0: no such position on this machine).
    table: Vec<u32>,
    /// The binding level's objects.
    bind: Option<LevelObjs>,
    /// For each PU, the first binding object if the binding fits from there, else `NONE`.
    /// With blocks (the exact `-c` fallback), the first object of the PU's block.
    bind_start: Vec<u32>,
    /// One entry per MPPR limit.
    limits: Vec<LimitView>,
    /// The binding this node's processes got (a joined placement's nodes may differ).
    width: Bind,
}

#[derive(Debug)]
struct LimitView {
    objs: LevelObjs,
    /// For each binding object, the range of limit objects it meets.
    per_bind: Vec<(u32, u32)>,
}

impl NodeView {
    fn new(
        m: &Machine,
        req: &Request,
        layout_levels: &[Level],
        within: bool,
        blocks: bool,
    ) -> NodeView {
        let object_levels: Vec<Level> = layout_levels
            .iter()
            .copied()
            .filter(|l| l.is_object_level())
            .collect();
        let mut objs: HashMap<Level, LevelObjs> = HashMap::new();
        for &l in &object_levels {
            objs.insert(l, LevelObjs::new(m, l));
        }
        let containment = containment_order(&objs, &object_levels);
        let pus: Vec<u32> = (0..m.pus().len() as u32)
            .filter(|&p| m.pus()[p as usize].available)
            .collect();
        let coords = coordinates(&objs, &containment, layout_levels, &pus);
        let (bind, bind_start) = match req.bind {
            Bind::None => (None, Vec::new()),
            Bind::Width { count, level } => {
                let b = LevelObjs::new(m, level);
                let starts = binding_starts(m, &b, count, within, blocks);
                (Some(b), starts)
            }
        };
        let limits = limit_views(m, req, bind.as_ref());
        NodeView {
            containment,
            pus,
            coords,
            table: Vec::new(),
            bind,
            bind_start,
            limits,
            width: req.bind,
        }
    }
}

/// What a PU has at one level of the walk: the one position of the board, its object, a run of
/// PUs without the level (one position for the run), or itself (the hardware thread).
#[derive(Hash, PartialEq, Eq, Clone, Copy)]
enum Own {
    Fixed,
    Obj(u32),
    Gap(u32),
    Pu(u32),
}

/// Each available PU's coordinates, one per layout level (`layout_levels` order, the node
/// level's left 0): walking coarsest to finest (board, the object levels in `containment`
/// order, hardware thread), a PU's index at a level is its object's rank among the objects
/// met under the same coarser indexes; runs of PUs lacking the level share one position.
fn coordinates(
    objs: &HashMap<Level, LevelObjs>,
    containment: &[Level],
    layout_levels: &[Level],
    pus: &[u32],
) -> Vec<u32> {
    let mut walk: Vec<Level> = Vec::new();
    if layout_levels.contains(&Level::Board) {
        walk.push(Level::Board);
    }
    walk.extend(containment);
    walk.push(Level::Hwthread);
    let slot: Vec<usize> = walk
        .iter()
        .map(|l| layout_levels.iter().position(|x| x == l).unwrap_or(0))
        .collect();
    let k = layout_levels.len();
    let mut coords = vec![0u32; pus.len() * k];
    let mut assigned: HashMap<(usize, Vec<u32>, Own), u32> = HashMap::new();
    let mut next: HashMap<(usize, Vec<u32>), u32> = HashMap::new();
    // Per level: the previous PU's parent prefix and gap run, to group runs of PUs lacking
    // the level into one position.
    let mut last_gap: Vec<Option<(Vec<u32>, u32)>> = vec![None; walk.len()];
    let mut gap_runs = 0u32;
    for (row, &p) in pus.iter().enumerate() {
        let mut prefix: Vec<u32> = Vec::with_capacity(walk.len());
        for (w, &level) in walk.iter().enumerate() {
            let own = match level {
                Level::Board => Own::Fixed,
                Level::Hwthread => Own::Pu(p),
                _ => {
                    let o = objs[&level].of_pu[p as usize];
                    if o != NONE {
                        last_gap[w] = None;
                        Own::Obj(o)
                    } else {
                        let run = match &last_gap[w] {
                            Some((pre, run)) if *pre == prefix => *run,
                            _ => {
                                gap_runs += 1;
                                last_gap[w] = Some((prefix.clone(), gap_runs));
                                gap_runs
                            }
                        };
                        Own::Gap(run)
                    }
                }
            };
            let index = match assigned.get(&(w, prefix.clone(), own)) {
                Some(&i) => i,
                None => {
                    let counter = next.entry((w, prefix.clone())).or_insert(0);
                    let i = *counter;
                    *counter += 1;
                    assigned.insert((w, prefix.clone(), own), i);
                    i
                }
            };
            coords[row * k + slot[w]] = index;
            prefix.push(index);
        }
    }
    coords
}

/// For each PU, the first of `count` binding objects (`b`) its binding takes: its own object
/// where `count` of them fit from there (inside their enclosing object, `within`), else
/// `NONE`; with `blocks` (the exact `-c` fallback), the first object of its object's block.
fn binding_starts(m: &Machine, b: &LevelObjs, count: u32, within: bool, blocks: bool) -> Vec<u32> {
    let total = b.ranges.len() as u64;
    let inside = if within && count > 1 {
        starts_inside(m, b, count)
    } else {
        Vec::new()
    };
    let fits_from = |o: u32| {
        u64::from(o) + u64::from(count) <= total && inside.get(o as usize).copied().unwrap_or(true)
    };
    if !blocks {
        return b
            .of_pu
            .iter()
            .map(|&o| if o != NONE && fits_from(o) { o } else { NONE })
            .collect();
    }
    // Consecutive runs of `count` objects, each a block; an object where no block fits
    // (inside its enclosing object, with `within`) is left over.
    let mut block_of = vec![NONE; b.ranges.len()];
    let mut o = 0u32;
    while (o as usize) < block_of.len() {
        if fits_from(o) {
            for slot in &mut block_of[o as usize..(o + count) as usize] {
                *slot = o;
            }
            o += count;
        } else {
            o += 1;
        }
    }
    b.of_pu
        .iter()
        .map(|&o| {
            if o == NONE {
                NONE
            } else {
                block_of[o as usize]
            }
        })
        .collect()
}

/// One view per MPPR limit: its level's objects and, with a binding, the range of them each
/// binding object meets.
fn limit_views(m: &Machine, req: &Request, bind: Option<&LevelObjs>) -> Vec<LimitView> {
    req.mppr
        .limits()
        .iter()
        .map(|&(_, level)| {
            let objs = LevelObjs::new(m, level);
            let per_bind = match bind {
                None => Vec::new(),
                Some(b) => b
                    .ranges
                    .iter()
                    .map(|&(s, e)| {
                        let mut lo = NONE;
                        let mut hi = 0;
                        for p in s..e {
                            let t = objs.of_pu[p as usize];
                            if t != NONE {
                                lo = lo.min(t);
                                hi = hi.max(t + 1);
                            }
                        }
                        if lo == NONE {
                            (0, 0)
                        } else {
                            (lo, hi)
                        }
                    })
                    .collect(),
            };
            LimitView { objs, per_bind }
        })
        .collect()
}

/// For each binding object: whether `count` consecutive binding objects from it stay inside
/// the smallest enclosing object (core, L1, L2, L3, NUMA node, die, package) that holds at
/// least `count` of them. Where no enclosing object is large enough, crossing is allowed.
fn starts_inside(m: &Machine, b: &LevelObjs, count: u32) -> Vec<bool> {
    let nb = b.ranges.len();
    // Per binding object: (size in PUs, last binding object inside) of the best enclosing
    // object found so far.
    let mut best: Vec<Option<(u32, usize)>> = vec![None; nb];
    let levels = [
        Level::Core,
        Level::L1,
        Level::L2,
        Level::L3,
        Level::Numa,
        Level::Die,
        Level::Socket,
    ];
    for level in levels {
        if m.objects(level).is_empty() {
            continue;
        }
        let enc = LevelObjs::new(m, level);
        // The binding objects inside one enclosing object are consecutive: walk them in runs.
        let owner = |i: usize| -> u32 {
            let (s, e) = b.ranges[i];
            let o = enc.of_pu[s as usize];
            if o != NONE && enc.ranges[o as usize].0 <= s && e <= enc.ranges[o as usize].1 {
                o
            } else {
                NONE
            }
        };
        let mut i = 0;
        while i < nb {
            let o = owner(i);
            let mut j = i;
            while j + 1 < nb && o != NONE && owner(j + 1) == o {
                j += 1;
            }
            if o != NONE && (j - i + 1) as u64 >= u64::from(count) {
                let (s, e) = enc.ranges[o as usize];
                let size = e - s;
                for slot in &mut best[i..=j] {
                    if slot.is_none_or(|(sz, _)| size < sz) {
                        *slot = Some((size, j));
                    }
                }
            }
            i = j + 1;
        }
    }
    (0..nb)
        .map(|i| match best[i] {
            Some((_, last)) => i + count as usize - 1 <= last,
            None => true,
        })
        .collect()
}

/// One placed process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Process {
    /// Node index (into the nodes given to [`place`]).
    pub node: u32,
    /// Logical index of the mapped PU on its node.
    pub pu: u32,
    /// First binding object (index among the node's available objects of the binding level).
    bind_start: u32,
}

/// The result of [`place`]: processes in rank order, and what is needed to describe them.
#[derive(Debug)]
pub struct Placement<'m> {
    nodes: Vec<&'m Machine>,
    node_view: Vec<u32>,
    views: Vec<NodeView>,
    request: Request,
    widths: Vec<(Level, u32)>,
    processes: Vec<Process>,
    passes: u32,
    /// Whether the binding was placed over blocks (the exact `-c` fallback).
    blocks: bool,
}

/// Places `req.np` processes on `nodes` (SPEC §2.2–2.7).
///
/// Several entries of `nodes` may be the same machine (by reference): it is analysed once.
///
/// Within a pass, bindings share CPUs only as the binding asks (see the module's section on
/// sharing): with `req.bind_within` (the default binding) never; otherwise
/// no binding is shared by more processes than it has cores.
pub fn place<'m>(nodes: &[&'m Machine], req: &Request) -> Result<Placement<'m>, PlaceError> {
    place_mode(nodes, req, false)
}

/// Places processes of N CPUs each with the default binding (`req.bind` from
/// [`crate::hybrid::binding_for_cpus`], usually widened to whole cores), where tasks never
/// share a CPU unless the job is oversubscribed.
///
/// The widened binding is tried first (as [`place`] with `bind_within`). When it cannot hold
/// every task in one pass without two tasks sharing a CPU (3 CPUs on cores of 2 threads: 2
/// cores for each of 4 tasks on 6 cores), each task is bound to exactly `exact`, the CPUs
/// each process was given ([`crate::hybrid::exact_binding`], e.g. `3h`): the node's available objects
/// of that level are cut into consecutive blocks of that many (kept inside packages, caches or
/// NUMA nodes where that still fits, as `bind_within` does), and the layout's positions are
/// visited as usual, each block going to the first position that falls in it (the task's
/// mapped PU). The result's [`Placement::request`] carries the binding used. When neither fits
/// in one pass, the widened binding's result stands: an oversubscribed placement when that is
/// allowed, else its error.
pub fn place_cpus_per_task<'m>(
    nodes: &[&'m Machine],
    req: &Request,
    exact: Bind,
) -> Result<Placement<'m>, PlaceError> {
    let mut req = req.clone();
    req.bind_within = true;
    let widened = place_mode(nodes, &req, false);
    if widened.as_ref().is_ok_and(|p| p.passes <= 1) || exact == Bind::None {
        return widened;
    }
    req.bind = exact;
    match place_mode(nodes, &req, true) {
        Ok(p) if p.passes <= 1 || widened.is_err() => Ok(p),
        _ => widened,
    }
}

/// What to do about an oversubscribed request: the MPPR limits named where they are what
/// stops it.
fn oversubscribed_advice(placed: u32, mppr: &Mppr, without_mppr: Option<u32>) -> String {
    if let Some(w) = without_mppr.filter(|&w| w > placed) {
        return format!(
            "the MPPR limits {mppr} allow only {placed} of the {w} positions the layout offers \
             without them: loosen them, or ask for fewer processes"
        );
    }
    let looser = if mppr.is_empty() {
        ""
    } else {
        " or looser MPPR limits"
    };
    format!(
        "allow oversubscription, ask for fewer processes, or use a smaller binding width{looser}"
    )
}

fn place_mode<'m>(
    nodes: &[&'m Machine],
    req: &Request,
    blocks: bool,
) -> Result<Placement<'m>, PlaceError> {
    let mut result = place_mode_as_asked(nodes, req, blocks);
    // Whether the MPPR limits are what stops the request: the same without them.
    if let Err(PlaceError::Oversubscribed {
        mppr, without_mppr, ..
    }) = &mut result
    {
        if !mppr.is_empty() && without_mppr.is_none() {
            let free = Request {
                mppr: Mppr::none(),
                ..req.clone()
            };
            *without_mppr = Some(match place_mode_as_asked(nodes, &free, blocks) {
                Ok(p) => p.processes.len() as u32,
                Err(PlaceError::Oversubscribed { placed, .. }) => placed,
                Err(_) => 0,
            });
        }
    }
    result
}

fn place_mode_as_asked<'m>(
    nodes: &[&'m Machine],
    req: &Request,
    blocks: bool,
) -> Result<Placement<'m>, PlaceError> {
    if !req.bind_within {
        return place_with(nodes, req, false, blocks);
    }
    let inside = place_with(nodes, req, true, blocks);
    if inside.as_ref().is_ok_and(|p| p.passes <= 1) {
        return inside;
    }
    // Too few positions with every binding inside: let bindings cross when that fits in one
    // pass (or when keeping them inside cannot place at all).
    let crossing = place_with(nodes, req, false, blocks);
    if crossing.as_ref().is_ok_and(|p| p.passes <= 1) || inside.is_err() {
        crossing
    } else {
        inside
    }
}

fn place_with<'m>(
    nodes: &[&'m Machine],
    req: &Request,
    within: bool,
    blocks: bool,
) -> Result<Placement<'m>, PlaceError> {
    if nodes.is_empty() {
        return Err(PlaceError::NoNodes);
    }
    let layout_levels: Vec<Level> = req.layout.levels().to_vec();
    let (mut views, node_view) = node_views(nodes, req, &layout_levels, within, blocks);
    let grid = Grid::of(&views, req, nodes.len(), blocks)?;
    grid.fill(&mut views);
    let mut sweeps = Sweeps::new(nodes, req, &views, &node_view, blocks);
    let np = req.np as usize;
    let mut processes: Vec<Process> = Vec::with_capacity(np);
    let mut passes = 0u32;
    let mut first_pass = true;
    while processes.len() < np {
        let before = processes.len();
        let blocked = sweeps.sweep(&views, &node_view, &grid, first_pass, np, &mut processes);
        let placed = processes.len() - before;
        let no_resources = || PlaceError::NoUsableResources {
            requested: req.np,
            why: no_resource_reason(nodes, req),
        };
        if first_pass {
            first_pass = false;
            if placed == 0 {
                return Err(no_resources());
            }
            passes = 1;
            if processes.len() < np && !req.oversubscribe {
                return Err(PlaceError::Oversubscribed {
                    placed: processes.len() as u32,
                    requested: req.np,
                    layout: req.layout.clone(),
                    bind: req.bind,
                    mppr: req.mppr.clone(),
                    nodes: nodes.len(),
                    shared: sweeps.shared_skips,
                    without_mppr: None,
                });
            }
        } else if placed > 0 {
            passes += 1;
        } else if !(blocked && sweeps.allow_more_sharing(req.np)) {
            return Err(no_resources());
        }
    }
    if req.order == Order::Sequential {
        processes.sort_by_key(|p| (p.node, p.pu));
    }
    Ok(Placement {
        nodes: nodes.to_vec(),
        node_view,
        views,
        request: req.clone(),
        widths: layout_levels.into_iter().zip(grid.widths).collect(),
        processes,
        passes,
        blocks,
    })
}

/// One view per distinct machine of `nodes` (by address), and each node's view.
fn node_views(
    nodes: &[&Machine],
    req: &Request,
    layout_levels: &[Level],
    within: bool,
    blocks: bool,
) -> (Vec<NodeView>, Vec<u32>) {
    let mut views: Vec<NodeView> = Vec::new();
    let mut seen: Vec<*const Machine> = Vec::new();
    let mut node_view = Vec::with_capacity(nodes.len());
    for &m in nodes {
        let ptr = m as *const Machine;
        let v = match seen.iter().position(|&s| s == ptr) {
            Some(v) => v,
            None => {
                seen.push(ptr);
                views.push(NodeView::new(m, req, layout_levels, within, blocks));
                views.len() - 1
            }
        };
        node_view.push(v as u32);
    }
    (views, node_view)
}

/// The maximal tree of the layout over all the nodes: each level's width (the node level's the
/// node count), each level's stride in a view's position table (the node level has none), how
/// far a sweep steps at each level, and the positions of one node.
struct Grid {
    widths: Vec<u32>,
    stride: Vec<u64>,
    /// The binding level steps by the width, except over blocks (every position of a block
    /// leads to it; the first one visited takes it).
    step: Vec<u32>,
    size: u64,
    /// The node level's place in the layout.
    npos: usize,
}

impl Grid {
    /// Refused when one node's positions would be more than [`MAX_POSITIONS_PER_NODE`].
    fn of(
        views: &[NodeView],
        req: &Request,
        nodes: usize,
        blocks: bool,
    ) -> Result<Grid, PlaceError> {
        let k = req.layout.levels().len();
        let npos = req.layout.node_position();
        let mut widths = vec![1u32; k];
        widths[npos] = nodes as u32;
        for v in views {
            for row in v.coords.chunks(k) {
                for (i, &c) in row.iter().enumerate() {
                    if i != npos {
                        widths[i] = widths[i].max(c + 1);
                    }
                }
            }
        }
        let mut stride = vec![0u64; k];
        let mut size: u64 = 1;
        for i in 0..k {
            if i != npos {
                stride[i] = size;
                size = size.saturating_mul(u64::from(widths[i]));
            }
        }
        if size > MAX_POSITIONS_PER_NODE {
            return Err(PlaceError::TooLarge {
                layout: req.layout.clone(),
                positions: size,
            });
        }
        let step = req
            .layout
            .levels()
            .iter()
            .map(|&l| match req.bind {
                Bind::Width { count, level } if l == level && l != Level::Node && !blocks => count,
                _ => 1,
            })
            .collect();
        Ok(Grid {
            widths,
            stride,
            step,
            size,
            npos,
        })
    }

    /// Each view's position table: position offset -> PU + 1.
    fn fill(&self, views: &mut [NodeView]) {
        let k = self.widths.len();
        for v in views {
            v.table = vec![0; self.size as usize];
            for (row, &p) in v.coords.chunks(k).zip(&v.pus) {
                let off: u64 = row
                    .iter()
                    .zip(&self.stride)
                    .map(|(&c, &s)| u64::from(c) * s)
                    .sum();
                v.table[off as usize] = p + 1;
            }
        }
    }
}

/// The state of the passes over the positions: how far the binding level steps, the MPPR
/// counters, and what each PU is used and bound by.
struct Sweeps {
    bind_count: u32,
    bound: bool,
    /// MPPR counters: per limit, its maximum, each node's first counter, and a counter per
    /// object of the limit's level on each node.
    limit_max: Vec<u32>,
    count_base: Vec<Vec<usize>>,
    counts: Vec<Vec<u32>>,
    /// The objects of each limit that the position being tried meets.
    span: Vec<(u32, u32)>,
    sharing: Sharing,
    /// Each node's first PU in `uses` and `load`.
    pu_base: Vec<usize>,
    /// Processes mapped to each PU (per node, by logical index).
    uses: Vec<u32>,
    /// Processes bound to each PU (bindings that must not share: the default binding).
    load: Vec<u32>,
    /// A sweep takes a position whose binding is shared by fewer than `share_max` times its
    /// allowance and whose mapped PU is used by fewer than `pu_max` processes. The first pass
    /// is (1, 1); oversubscribed sweeps start at (1, 1) again (filling what MPPR left free) and
    /// raise one then the other when a sweep finds nothing.
    share_max: u32,
    pu_max: u32,
    /// Positions of the first pass skipped because their binding was taken.
    shared_skips: u32,
}

impl Sweeps {
    fn new(
        nodes: &[&Machine],
        req: &Request,
        views: &[NodeView],
        node_view: &[u32],
        blocks: bool,
    ) -> Sweeps {
        let (bind_count, bind_level) = match req.bind {
            Bind::None => (0, None),
            Bind::Width { count, level } => (count, Some(level)),
        };
        let limit_max: Vec<u32> = req.mppr.limits().iter().map(|&(n, _)| n).collect();
        let mut count_base: Vec<Vec<usize>> = Vec::with_capacity(limit_max.len());
        let mut counts: Vec<Vec<u32>> = Vec::with_capacity(limit_max.len());
        for j in 0..limit_max.len() {
            let mut base = Vec::with_capacity(nodes.len());
            let mut total = 0usize;
            for &v in node_view {
                base.push(total);
                total += views[v as usize].limits[j].objs.ranges.len();
            }
            count_base.push(base);
            counts.push(vec![0; total]);
        }
        let sharing = if bind_level.is_some() && (req.bind_within || blocks) {
            Sharing::Never
        } else {
            Sharing::MappedPu
        };
        let mut pu_base = Vec::with_capacity(nodes.len());
        let mut total_pus = 0usize;
        for &m in nodes {
            pu_base.push(total_pus);
            total_pus += m.pus().len();
        }
        let load_len = if sharing == Sharing::Never {
            total_pus
        } else {
            0
        };
        Sweeps {
            bind_count,
            bound: bind_level.is_some(),
            span: vec![(0, 0); limit_max.len()],
            limit_max,
            count_base,
            counts,
            sharing,
            pu_base,
            uses: vec![0u32; total_pus],
            load: vec![0u32; load_len],
            share_max: 1,
            pu_max: 1,
            shared_skips: 0,
        }
    }

    /// After a sweep that placed nothing and found positions taken: allows one more sharer of
    /// a binding, then of a mapped PU; `false` when sharing may grow no more.
    fn allow_more_sharing(&mut self, np: u32) -> bool {
        if self.share_max > np {
            return false;
        }
        if self.share_max == self.pu_max {
            self.share_max += 1;
        } else {
            self.pu_max += 1;
        }
        true
    }

    /// One sweep over every position, leftmost level fastest, placing a process on each
    /// position that fits until `np` are placed; whether a usable position did not fit.
    fn sweep(
        &mut self,
        views: &[NodeView],
        node_view: &[u32],
        grid: &Grid,
        first_pass: bool,
        np: usize,
        processes: &mut Vec<Process>,
    ) -> bool {
        let k = grid.widths.len();
        let mut blocked = false;
        let mut idx = vec![0u32; k];
        let mut off: u64 = 0;
        loop {
            let node = idx[grid.npos];
            let view = &views[node_view[node as usize] as usize];
            let cell = view.table[off as usize];
            if cell != 0 {
                let pu = cell - 1;
                match self.try_position(view, node, pu, first_pass) {
                    Tried::Taken(bind_start) => {
                        processes.push(Process {
                            node,
                            pu,
                            bind_start,
                        });
                        if processes.len() == np {
                            return blocked;
                        }
                    }
                    Tried::Blocked => blocked = true,
                    Tried::Unusable => {}
                }
            }
            // Advance the odometer: leftmost level fastest.
            let mut i = 0;
            loop {
                if i == k {
                    return blocked;
                }
                idx[i] += grid.step[i];
                off += u64::from(grid.step[i]) * grid.stride[i];
                if idx[i] < grid.widths[i] {
                    break;
                }
                off -= u64::from(idx[i]) * grid.stride[i];
                idx[i] = 0;
                i += 1;
            }
        }
    }

    /// Tries the position of `pu` on `node` (`view`): taken (its uses, bindings and MPPR
    /// counters counted), blocked (usable, but taken as much as this sweep allows), or
    /// unusable (its binding does not fit from it).
    fn try_position(&mut self, view: &NodeView, node: u32, pu: u32, first_pass: bool) -> Tried {
        let bind_start = if self.bound {
            view.bind_start[pu as usize]
        } else {
            NONE
        };
        if self.bound && bind_start == NONE {
            return Tried::Unusable;
        }
        let pbase = self.pu_base[node as usize];
        let free = self.uses[pbase + pu as usize] < self.pu_max
            && match (self.sharing, &view.bind) {
                (Sharing::Never, Some(b)) => (bind_start..bind_start + self.bind_count).all(|o| {
                    let (s, e) = b.ranges[o as usize];
                    (s..e).all(|q| self.load[pbase + q as usize] < self.share_max)
                }),
                _ => true,
            };
        if !free {
            if first_pass {
                self.shared_skips += 1;
            }
            return Tried::Blocked;
        }
        if first_pass && !self.limit_max.is_empty() && !self.mppr_takes(view, node, pu, bind_start)
        {
            return Tried::Unusable;
        }
        self.uses[pbase + pu as usize] += 1;
        if let (Sharing::Never, Some(b)) = (self.sharing, &view.bind) {
            for o in bind_start..bind_start + self.bind_count {
                let (s, e) = b.ranges[o as usize];
                for q in s..e {
                    self.load[pbase + q as usize] += 1;
                }
            }
        }
        Tried::Taken(bind_start)
    }

    /// Whether every MPPR limit leaves room for a process at `pu` (its binding's objects of
    /// each limit's level, or its PU's without a binding); if so, counts it.
    fn mppr_takes(&mut self, view: &NodeView, node: u32, pu: u32, bind_start: u32) -> bool {
        let Sweeps {
            span,
            counts,
            count_base,
            limit_max,
            bound,
            bind_count,
            ..
        } = self;
        for (j, lim) in view.limits.iter().enumerate() {
            span[j] = if *bound {
                let (mut lo, mut hi) = (NONE, 0);
                for b in bind_start..bind_start + *bind_count {
                    let (l, h) = lim.per_bind[b as usize];
                    if l < h {
                        lo = lo.min(l);
                        hi = hi.max(h);
                    }
                }
                if lo == NONE {
                    (0, 0)
                } else {
                    (lo, hi)
                }
            } else {
                let t = lim.objs.of_pu[pu as usize];
                if t == NONE {
                    (0, 0)
                } else {
                    (t, t + 1)
                }
            };
            let base = count_base[j][node as usize];
            let (lo, hi) = span[j];
            if (lo..hi).any(|t| counts[j][base + t as usize] >= limit_max[j]) {
                return false;
            }
        }
        for j in 0..limit_max.len() {
            let base = count_base[j][node as usize];
            let (lo, hi) = span[j];
            for t in lo..hi {
                counts[j][base + t as usize] += 1;
            }
        }
        true
    }
}

/// What trying a position gave.
enum Tried {
    /// A process was placed there, with this first binding object.
    Taken(u32),
    /// Usable, but taken as much as this sweep allows.
    Blocked,
    /// Its binding does not fit from there, or an MPPR limit is reached.
    Unusable,
}

/// How a pass decides whether a position's binding may be shared with earlier processes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Sharing {
    /// No binding, or a binding the user asked for: the mapped PU is the resource.
    MappedPu,
    /// The default binding: no bound PU is shared.
    Never,
}

fn no_resource_reason(nodes: &[&Machine], req: &Request) -> String {
    if nodes.iter().all(|m| m.available().is_empty()) {
        return "no node has an available PU (is the cpuset empty?)".to_string();
    }
    match req.bind {
        Bind::Width { count, level } => format!(
            "no available PU has {count} {}(s) of its node from its own onward (binding {})",
            level.name(),
            req.bind
        ),
        Bind::None => "no position of the layout exists on these nodes".to_string(),
    }
}

/// Processes whose bindings share CPUs (see [`Placement::overlaps`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Overlap {
    /// The node.
    pub node: u32,
    /// The ranks that share them, ascending.
    pub ranks: Vec<u32>,
    /// The shared CPUs (OS indexes).
    pub cpus: CpuList,
    /// Whether the ranks have the same binding (one socket for several ranks), rather than
    /// different bindings that meet.
    pub same_binding: bool,
}

/// A placed process, described for people and scripts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcessInfo {
    /// The rank.
    pub rank: u32,
    /// The node index.
    pub node: u32,
    /// Logical index of the mapped PU.
    pub pu_logical: u32,
    /// OS index of the mapped PU.
    pub pu_os: u32,
    /// Logical indexes of the bound PUs (empty without binding).
    pub bound_logical: Vec<u32>,
    /// OS indexes of the bound PUs, sorted (empty without binding).
    pub cpus: CpuList,
}

impl<'m> Placement<'m> {
    /// Number of processes placed.
    pub fn len(&self) -> usize {
        self.processes.len()
    }

    /// Whether nothing was placed (a request for 0 processes).
    pub fn is_empty(&self) -> bool {
        self.processes.is_empty()
    }

    /// The processes in rank order.
    pub fn processes(&self) -> &[Process] {
        &self.processes
    }

    /// The request this placement answers.
    pub fn request(&self) -> &Request {
        &self.request
    }

    /// The machines, one per node.
    pub fn nodes(&self) -> &[&'m Machine] {
        &self.nodes
    }

    /// How many passes were needed (more than one means oversubscribed).
    pub fn passes(&self) -> u32 {
        self.passes
    }

    /// Width of each layout level in the maximal tree, in layout order.
    pub fn widths(&self) -> &[(Level, u32)] {
        &self.widths
    }

    /// The layout's object levels on `node`, coarsest first, as they nest there.
    pub fn containment(&self, node: usize) -> &[Level] {
        &self.views[self.node_view[node] as usize].containment
    }

    /// Logical indexes of the PUs bound to the process with this rank (empty without binding).
    pub fn bound_pus(&self, rank: usize) -> Vec<u32> {
        let p = self.processes[rank];
        self.binding_pus(p.node, p.bind_start)
    }

    /// Logical indexes of the available PUs of the binding that starts at binding object
    /// `start` on `node` (empty without binding).
    fn binding_pus(&self, node: u32, start: u32) -> Vec<u32> {
        let view = &self.views[self.node_view[node as usize] as usize];
        let (Some(b), Bind::Width { count, .. }) = (&view.bind, view.width) else {
            return Vec::new();
        };
        let m = self.nodes[node as usize];
        let mut out = Vec::new();
        for o in start..start.saturating_add(count) {
            let Some(&(s, e)) = b.ranges.get(o as usize) else {
                break;
            };
            out.extend((s..e).filter(|&q| m.pus()[q as usize].available));
        }
        out
    }

    /// The CPUs that several processes' bindings share, node by node: each group of processes
    /// with the same binding, then each run of PUs that different bindings share. Sorted by
    /// node, then first rank. Empty without binding or when every binding is disjoint.
    ///
    /// A binding the user asked for may overlap another (`1s` while mapping by core, `2c` over
    /// an odd number of cores); this is what the warning names. Cost: O(bound PUs of the
    /// distinct bindings) plus O(processes).
    pub fn overlaps(&self) -> Vec<Overlap> {
        if self.request.bind == Bind::None {
            return Vec::new();
        }
        // Distinct bindings, in order of their first process.
        let mut index: HashMap<(u32, u32), usize> = HashMap::new();
        let mut groups: Vec<((u32, u32), Vec<u32>)> = Vec::new();
        for (r, p) in self.processes.iter().enumerate() {
            let key = (p.node, p.bind_start);
            let g = *index.entry(key).or_insert_with(|| {
                groups.push((key, Vec::new()));
                groups.len() - 1
            });
            groups[g].1.push(r as u32);
        }
        let os = |node: u32, pus: &[u32]| {
            let m = self.nodes[node as usize];
            CpuList::from_cpus(pus.iter().map(|&q| m.pus()[q as usize].os))
        };
        let mut out = Vec::new();
        // Processes with the same binding.
        for ((node, start), ranks) in &groups {
            if ranks.len() > 1 {
                out.push(Overlap {
                    node: *node,
                    ranks: ranks.clone(),
                    cpus: os(*node, &self.binding_pus(*node, *start)),
                    same_binding: true,
                });
            }
        }
        // Different bindings that meet: per node, the bindings on each PU.
        let mut by_node: Vec<Vec<usize>> = vec![Vec::new(); self.nodes.len()];
        for (g, ((node, _), _)) in groups.iter().enumerate() {
            by_node[*node as usize].push(g);
        }
        for (node, gs) in by_node.iter().enumerate() {
            if gs.len() < 2 {
                continue;
            }
            let mut on_pu: Vec<Vec<usize>> = vec![Vec::new(); self.nodes[node].pus().len()];
            for &g in gs {
                let (_, start) = groups[g].0;
                for q in self.binding_pus(node as u32, start) {
                    on_pu[q as usize].push(g);
                }
            }
            let mut q = 0;
            while q < on_pu.len() {
                if on_pu[q].len() < 2 {
                    q += 1;
                    continue;
                }
                let mut end = q + 1;
                while end < on_pu.len() && on_pu[end] == on_pu[q] {
                    end += 1;
                }
                let mut ranks: Vec<u32> = on_pu[q]
                    .iter()
                    .flat_map(|&g| groups[g].1.iter().copied())
                    .collect();
                ranks.sort_unstable();
                let pus: Vec<u32> = (q as u32..end as u32).collect();
                out.push(Overlap {
                    node: node as u32,
                    ranks,
                    cpus: os(node as u32, &pus),
                    same_binding: false,
                });
                q = end;
            }
        }
        out.sort_by(|a, b| (a.node, &a.ranks).cmp(&(b.node, &b.ranks)));
        out
    }

    /// Everything about the process with this rank.
    pub fn info(&self, rank: usize) -> ProcessInfo {
        let p = self.processes[rank];
        let m = self.nodes[p.node as usize];
        let bound_logical = self.bound_pus(rank);
        let cpus = CpuList::from_cpus(bound_logical.iter().map(|&q| m.pus()[q as usize].os));
        ProcessInfo {
            rank: rank as u32,
            node: p.node,
            pu_logical: p.pu,
            pu_os: m.pus()[p.pu as usize].os,
            bound_logical,
            cpus,
        }
    }

    /// The warning for bindings that share CPUs ([`Placement::overlaps`]) in a placement of
    /// one pass, naming up to three groups; `None` when none do or the placement is
    /// oversubscribed (sharing was asked for). Only sharing that surprises is named: different
    /// bindings that meet (`2c` over an odd number of cores), or more ranks on one binding
    /// than it has hardware threads. Ranks that share a binding with a thread each (`1s` for
    /// the ranks of a socket, `1c` for the two threads of a core) are what the binding means.
    /// `rank` turns a rank of this placement into the number shown (the plugin shows global
    /// ranks).
    pub fn overlap_warning(&self, rank: impl Fn(u32) -> u32) -> Option<String> {
        self.overlap_warning_needing(rank, 1)
    }

    /// [`Self::overlap_warning`] for tasks that each need `need` hardware threads (`-c`): ranks
    /// that share a binding surprise when together they need more threads than it has (two
    /// tasks of `-c 64` on one 64-thread socket under `1s`), and the warning says so.
    pub fn overlap_warning_needing(&self, rank: impl Fn(u32) -> u32, need: u32) -> Option<String> {
        if self.passes > 1 {
            return None;
        }
        let need = need.max(1) as usize;
        let mut overlaps = self.overlaps();
        overlaps.retain(|o| !o.same_binding || o.ranks.len() * need > o.cpus.len());
        if overlaps.is_empty() {
            return None;
        }
        let several_nodes = self.nodes.len() > 1;
        let mut groups: Vec<String> = overlaps
            .iter()
            .take(3)
            .map(|o| {
                let ranks: Vec<String> = o.ranks.iter().map(|&r| rank(r).to_string()).collect();
                let ranks = match ranks.split_last() {
                    Some((last, rest)) if !rest.is_empty() => {
                        format!("{} and {last}", rest.join(", "))
                    }
                    _ => ranks.join(""),
                };
                let cpus = if o.cpus.len() == 1 { "CPU" } else { "CPUs" };
                let node = if several_nodes {
                    format!(" on node {}", o.node)
                } else {
                    String::new()
                };
                let needs = if o.same_binding && need > 1 {
                    format!(" ({} tasks of {need} CPUs each)", o.ranks.len())
                } else {
                    String::new()
                };
                format!("ranks {ranks} share {cpus} {}{node}{needs}", o.cpus)
            })
            .collect();
        if overlaps.len() > 3 {
            groups.push(format!("{} more", overlaps.len() - 3));
        }
        Some(format!(
            "warning: binding {bind} makes tasks share CPUs: {}. The binding was asked for, so \
             the tasks run as placed; for CPUs of their own ask for a narrower binding or fewer \
             tasks, or leave out the binding (the default never shares)",
            groups.join("; "),
            bind = self.request.bind,
        ))
    }

    /// The binding of `node`'s processes: the request's, except where a joined placement's
    /// node took another ([`Self::join`]).
    pub fn node_binding(&self, node: u32) -> Bind {
        self.views[self.node_view[node as usize] as usize].width
    }

    /// Ranks placed on `node`, ascending.
    pub fn ranks_on(&self, node: u32) -> Vec<usize> {
        (0..self.processes.len())
            .filter(|&r| self.processes[r].node == node)
            .collect()
    }

    /// One placement of several nodes made of one placement per node (each of one node, in
    /// node order), `ranks[n][k]` being the global rank of node `n`'s `k`-th process: what a
    /// launcher does that deals ranks to nodes first and then places each node's ranks there.
    /// The request is the first part's with `np` the total; the widths are those of the first
    /// node that holds a process. The parts' bindings may differ (the default binding's
    /// fallback taken on some nodes only, as the plugin decides node by node):
    /// [`Self::node_binding`] tells each node's. `None` when a part is not of one node, or
    /// `ranks` does not name each of the ranks 0..total exactly once with as many ranks per
    /// node as its part has processes.
    pub fn join(parts: Vec<Placement<'m>>, ranks: &[Vec<u32>]) -> Option<Placement<'m>> {
        let of_node: Vec<usize> = (0..parts.len()).collect();
        Self::join_shared(parts, &of_node, ranks)
    }

    /// [`Self::join`] where several nodes reuse one part: node `n` is placed as
    /// `parts[of_node[n]]` (nodes alike with as many ranks each are placed once, and their
    /// analysis is kept once). `None` also when `of_node` names a part that does not exist.
    pub fn join_shared(
        parts: Vec<Placement<'m>>,
        of_node: &[usize],
        ranks: &[Vec<u32>],
    ) -> Option<Placement<'m>> {
        let first = parts.get(*of_node.first()?)?;
        let mut request = first.request.clone();
        let first_widths = first.widths.clone();
        let total: usize = ranks.iter().map(Vec::len).sum();
        if of_node.len() != ranks.len() {
            return None;
        }
        let mut slots: Vec<Option<Process>> = vec![None; total];
        let mut nodes = Vec::with_capacity(of_node.len());
        let mut node_view = Vec::with_capacity(of_node.len());
        let (mut widths, mut passes, mut blocks) = (None, 0, false);
        for (n, (&k, ranks)) in of_node.iter().zip(ranks).enumerate() {
            let part = parts.get(k)?;
            if part.nodes.len() != 1 || part.processes.len() != ranks.len() {
                return None;
            }
            for (p, &r) in part.processes.iter().zip(ranks) {
                let slot = slots.get_mut(r as usize)?;
                if slot.is_some() {
                    return None;
                }
                *slot = Some(Process {
                    node: n as u32,
                    ..*p
                });
            }
            if widths.is_none() && !part.processes.is_empty() {
                widths = Some(part.widths.clone());
            }
            passes = passes.max(part.passes);
            blocks |= part.blocks;
            nodes.push(part.nodes[0]);
            // Part k's one view becomes view k.
            node_view.push(k as u32);
        }
        let mut views = Vec::with_capacity(parts.len());
        for part in parts {
            let view = *part.node_view.first()? as usize;
            views.push(part.views.into_iter().nth(view)?);
        }
        request.np = total as u32;
        Some(Placement {
            nodes,
            node_view,
            views,
            request,
            widths: widths.unwrap_or(first_widths),
            processes: slots.into_iter().collect::<Option<Vec<_>>>()?,
            passes,
            blocks,
        })
    }

    /// The ranks placed on each node, ascending, in node order: [`Self::ranks_on`] for every
    /// node in one pass over the processes.
    pub fn ranks_by_node(&self) -> Vec<Vec<usize>> {
        let mut out = vec![Vec::new(); self.nodes.len()];
        for (r, p) in self.processes.iter().enumerate() {
            out[p.node as usize].push(r);
        }
        out
    }

    /// How many processes each node got, in node order.
    pub fn tasks_per_node(&self) -> Vec<u32> {
        let mut counts = vec![0u32; self.nodes.len()];
        for p in &self.processes {
            counts[p.node as usize] += 1;
        }
        counts
    }

    /// How many consecutive positions the layout takes on one node before it moves to the
    /// next node (exact when every node has every position): 1 when `n` is innermost, else the
    /// product of the widths of the levels inside `n`, a binding level counted by bindings.
    pub fn node_stride(&self) -> u64 {
        let npos = self.request.layout.node_position();
        let (count, level) = match self.request.bind {
            Bind::Width { count, level } => (count, Some(level)),
            Bind::None => (1, None),
        };
        self.widths[..npos]
            .iter()
            .map(|&(l, w)| {
                if Some(l) == level && !self.blocks {
                    u64::from(w.div_ceil(count))
                } else {
                    u64::from(w)
                }
            })
            .product()
    }
}

impl fmt::Display for Request {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "layout {} binding {} mppr {} order {} np {}{}",
            self.layout,
            self.bind,
            self.mppr,
            self.order,
            self.np,
            if self.oversubscribe {
                " oversubscribe"
            } else {
                ""
            }
        )
    }
}

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
    /// Keep each binding inside the smallest object (core, cache, NUMA node, die, package) of
    /// its mapped PU that can hold the whole binding, skipping positions whose binding would
    /// cross it; when that leaves too few positions for `np` processes in one pass, place as
    /// without it (bindings may cross, as SPEC §2.4 describes). Used for Slurm's `-c`.
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
         {bind}{mppr} offers {placed} positions on {nodes} node(s); allow oversubscription \
         (srun --overcommit, lama map --oversubscribe), ask for fewer processes, or use a \
         smaller binding width or looser MPPR limits",
        mppr = if mppr.is_empty() { String::new() } else { format!(" and MPPR {mppr}") }
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
    bind_start: Vec<u32>,
    /// One entry per MPPR limit.
    limits: Vec<LimitView>,
}

#[derive(Debug)]
struct LimitView {
    objs: LevelObjs,
    /// For each binding object, the range of limit objects it meets.
    per_bind: Vec<(u32, u32)>,
}

impl NodeView {
    fn new(m: &Machine, req: &Request, layout_levels: &[Level], within: bool) -> NodeView {
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

        // Coarsest to finest: board (always one), object levels, hardware thread.
        let mut walk: Vec<Level> = Vec::new();
        if layout_levels.contains(&Level::Board) {
            walk.push(Level::Board);
        }
        walk.extend(&containment);
        walk.push(Level::Hwthread);
        let slot: Vec<usize> = walk
            .iter()
            .map(|l| layout_levels.iter().position(|x| x == l).unwrap_or(0))
            .collect();

        #[derive(Hash, PartialEq, Eq, Clone, Copy)]
        enum Own {
            Fixed,
            Obj(u32),
            Gap(u32),
            Pu(u32),
        }
        let k = layout_levels.len();
        let pus: Vec<u32> = (0..m.pus().len() as u32)
            .filter(|&p| m.pus()[p as usize].available)
            .collect();
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

        let (bind, bind_start) = match req.bind {
            Bind::None => (None, Vec::new()),
            Bind::Width { count, level } => {
                let b = LevelObjs::new(m, level);
                let total = b.ranges.len() as u64;
                let inside = if within && count > 1 {
                    starts_inside(m, &b, count)
                } else {
                    Vec::new()
                };
                let starts = b
                    .of_pu
                    .iter()
                    .map(|&o| {
                        if o != NONE
                            && u64::from(o) + u64::from(count) <= total
                            && inside.get(o as usize).copied().unwrap_or(true)
                        {
                            o
                        } else {
                            NONE
                        }
                    })
                    .collect();
                (Some(b), starts)
            }
        };
        let limits = req
            .mppr
            .limits()
            .iter()
            .map(|&(_, level)| {
                let objs = LevelObjs::new(m, level);
                let per_bind = match &bind {
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
            .collect();
        NodeView {
            containment,
            pus,
            coords,
            table: Vec::new(),
            bind,
            bind_start,
            limits,
        }
    }
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
}

/// Places `req.np` processes on `nodes` (SPEC §2.2–2.7).
///
/// Several entries of `nodes` may be the same machine (by reference): it is analysed once.
pub fn place<'m>(nodes: &[&'m Machine], req: &Request) -> Result<Placement<'m>, PlaceError> {
    if !req.bind_within {
        return place_with(nodes, req, false);
    }
    let inside = place_with(nodes, req, true);
    if inside.as_ref().is_ok_and(|p| p.passes <= 1) {
        return inside;
    }
    // Too few positions with every binding inside: let bindings cross when that fits in one
    // pass (or when keeping them inside cannot place at all).
    let crossing = place_with(nodes, req, false);
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
) -> Result<Placement<'m>, PlaceError> {
    if nodes.is_empty() {
        return Err(PlaceError::NoNodes);
    }
    let layout_levels: Vec<Level> = req.layout.levels().to_vec();
    let npos = req.layout.node_position();

    // 1. One view per distinct machine.
    let mut views: Vec<NodeView> = Vec::new();
    let mut seen: Vec<*const Machine> = Vec::new();
    let mut node_view = Vec::with_capacity(nodes.len());
    for &m in nodes {
        let ptr = m as *const Machine;
        let v = match seen.iter().position(|&s| s == ptr) {
            Some(v) => v,
            None => {
                seen.push(ptr);
                views.push(NodeView::new(m, req, &layout_levels, within));
                views.len() - 1
            }
        };
        node_view.push(v as u32);
    }

    // 2. Widths of the maximal tree, then each view's position table.
    let k = layout_levels.len();
    let mut widths = vec![1u32; k];
    widths[npos] = nodes.len() as u32;
    for v in &views {
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
    for v in &mut views {
        v.table = vec![0; size as usize];
        for (row, &p) in v.coords.chunks(k).zip(&v.pus) {
            let off: u64 = row
                .iter()
                .zip(&stride)
                .map(|(&c, &s)| u64::from(c) * s)
                .sum();
            v.table[off as usize] = p + 1;
        }
    }

    // 3. Passes.
    let (bind_count, bind_level) = match req.bind {
        Bind::None => (0, None),
        Bind::Width { count, level } => (count, Some(level)),
    };
    let step: Vec<u32> = layout_levels
        .iter()
        .map(|&l| {
            if Some(l) == bind_level && l != Level::Node {
                bind_count
            } else {
                1
            }
        })
        .collect();
    let limit_max: Vec<u32> = req.mppr.limits().iter().map(|&(n, _)| n).collect();
    // MPPR counters: per limit, per node, per object of the limit's level.
    let mut count_base: Vec<Vec<usize>> = Vec::with_capacity(limit_max.len());
    let mut counts: Vec<Vec<u32>> = Vec::with_capacity(limit_max.len());
    for j in 0..limit_max.len() {
        let mut base = Vec::with_capacity(nodes.len());
        let mut total = 0usize;
        for &v in &node_view {
            base.push(total);
            total += views[v as usize].limits[j].objs.ranges.len();
        }
        count_base.push(base);
        counts.push(vec![0; total]);
    }

    let np = req.np as usize;
    let mut processes: Vec<Process> = Vec::with_capacity(np);
    let mut passes = 0u32;
    let mut idx = vec![0u32; k];
    let mut span: Vec<(u32, u32)> = vec![(0, 0); limit_max.len()];
    while processes.len() < np {
        let first_pass = passes == 0;
        passes += 1;
        let before = processes.len();
        idx.iter_mut().for_each(|i| *i = 0);
        let mut off: u64 = 0;
        'positions: loop {
            let node = idx[npos];
            let view = &views[node_view[node as usize] as usize];
            let cell = view.table[off as usize];
            if cell != 0 {
                let pu = cell - 1;
                let bind_start = if bind_level.is_some() {
                    view.bind_start[pu as usize]
                } else {
                    NONE
                };
                let usable = bind_level.is_none() || bind_start != NONE;
                let mut fits = usable;
                if usable && first_pass && !limit_max.is_empty() {
                    for (j, lim) in view.limits.iter().enumerate() {
                        span[j] = if bind_level.is_some() {
                            let (mut lo, mut hi) = (NONE, 0);
                            for b in bind_start..bind_start + bind_count {
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
                            fits = false;
                            break;
                        }
                    }
                    if fits {
                        for j in 0..limit_max.len() {
                            let base = count_base[j][node as usize];
                            let (lo, hi) = span[j];
                            for t in lo..hi {
                                counts[j][base + t as usize] += 1;
                            }
                        }
                    }
                }
                if fits {
                    processes.push(Process {
                        node,
                        pu,
                        bind_start,
                    });
                    if processes.len() == np {
                        break 'positions;
                    }
                }
            }
            // Advance the odometer: leftmost level fastest.
            let mut i = 0;
            loop {
                if i == k {
                    break 'positions;
                }
                idx[i] += step[i];
                off += u64::from(step[i]) * stride[i];
                if idx[i] < widths[i] {
                    break;
                }
                off -= u64::from(idx[i]) * stride[i];
                idx[i] = 0;
                i += 1;
            }
        }
        let placed = processes.len() - before;
        if placed == 0 {
            return Err(PlaceError::NoUsableResources {
                requested: req.np,
                why: no_resource_reason(nodes, req),
            });
        }
        if first_pass && processes.len() < np && !req.oversubscribe {
            return Err(PlaceError::Oversubscribed {
                placed: processes.len() as u32,
                requested: req.np,
                layout: req.layout.clone(),
                bind: req.bind,
                mppr: req.mppr.clone(),
                nodes: nodes.len(),
            });
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
        widths: layout_levels.into_iter().zip(widths).collect(),
        processes,
        passes,
    })
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
        let view = &self.views[self.node_view[p.node as usize] as usize];
        let (Some(b), Bind::Width { count, .. }) = (&view.bind, self.request.bind) else {
            return Vec::new();
        };
        let m = self.nodes[p.node as usize];
        let mut out = Vec::new();
        for o in p.bind_start..p.bind_start + count {
            let (s, e) = b.ranges[o as usize];
            out.extend((s..e).filter(|&q| m.pus()[q as usize].available));
        }
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

    /// Ranks placed on `node`, ascending.
    pub fn ranks_on(&self, node: u32) -> Vec<usize> {
        (0..self.processes.len())
            .filter(|&r| self.processes[r].node == node)
            .collect()
    }

    /// How many processes each node got, in node order.
    pub fn tasks_per_node(&self) -> Vec<u32> {
        let mut counts = vec![0u32; self.nodes.len()];
        for p in &self.processes {
            counts[p.node as usize] += 1;
        }
        counts
    }

    /// The Slurm `-m/--distribution` that puts every rank on the node this placement puts it
    /// on, given the same number of tasks per node ([`Placement::tasks_per_node`]): `cyclic`,
    /// `block` or `plane=P`, whichever matches first. `None` when no distribution does: then
    /// only `-m arbitrary` with a `SLURM_HOSTFILE` (one node name per rank) reproduces it.
    pub fn slurm_distribution_exact(&self) -> Option<String> {
        let counts = self.tasks_per_node();
        let max = counts.iter().copied().max().unwrap_or(0);
        let matches = |plane: u32| -> bool {
            let mut left = counts.clone();
            let mut rank = 0usize;
            while rank < self.processes.len() {
                for (n, l) in left.iter_mut().enumerate() {
                    let k = plane.min(*l);
                    for _ in 0..k {
                        if self.processes[rank].node as usize != n {
                            return false;
                        }
                        rank += 1;
                    }
                    *l -= k;
                }
            }
            true
        };
        if self.nodes.len() <= 1 || matches(1) {
            return Some("cyclic".to_string());
        }
        if matches(max) {
            return Some("block".to_string());
        }
        (2..max).find(|&p| matches(p)).map(|p| format!("plane={p}"))
    }

    /// The Slurm `-m/--distribution` that gives nodes the same ranks as this layout does across
    /// nodes (exact when every node has every position): `cyclic` when `n` is innermost,
    /// otherwise `plane=P` with P the positions per node before the layout moves to the next
    /// node.
    pub fn slurm_distribution(&self) -> String {
        let npos = self.request.layout.node_position();
        let (count, level) = match self.request.bind {
            Bind::Width { count, level } => (count, Some(level)),
            Bind::None => (1, None),
        };
        let per_node: u64 = self.widths[..npos]
            .iter()
            .map(|&(l, w)| {
                if Some(l) == level {
                    u64::from(w.div_ceil(count))
                } else {
                    u64::from(w)
                }
            })
            .product();
        if per_node <= 1 {
            "cyclic".to_string()
        } else {
            format!("plane={per_node}")
        }
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

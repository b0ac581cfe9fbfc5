//! Communication-aware placement (`lama plan`): an application's communication matrix, the
//! network (Slurm's `topology.conf`) and every node's topology, mapped with the Scotch graph
//! mapper, then guarded: the mapping is compared under one cost model ([`cost`]) with the LAMA
//! layouts a user would try, and the cheapest wins. So a plan is never worse on the model than
//! the best of those layouts.
//!
//! How the machine becomes a Scotch target: every binding slot (an available core, or
//! hardware thread with `--bind hwthread`) is a leaf of one tree: the switches from the root,
//! the node within its leaf switch, then the node's levels (package, NUMA node, L3, L2, core,
//! hardware thread, in the first node's nesting order), each level as wide as its widest
//! instance (`tleaf`); the leaves that exist form a sub-architecture, which is how partial
//! allocations and heterogeneous nodes are expressed. Link costs are the cost model's
//! distances. Scotch may put two ranks on one leaf; those are moved to the free slot that adds
//! the least cost.

mod bisect;
pub mod cost;
#[cfg(feature = "scotch")]
mod kway;
#[cfg(feature = "scotch")]
mod multisect;
pub use lama_slurm::hostlist;
pub mod matrix;
pub mod network;
mod refine;
mod regroup;
#[cfg(feature = "scotch")]
mod rng;
#[cfg(feature = "scotch")]
mod scotch;
pub mod stencil;
pub mod traffic;
#[cfg(feature = "scotch")]
mod vcycle;
#[cfg(feature = "scotch")]
mod with_scotch;

use cost::{Spot, System, LEVELS};
use lama_engine::{place, Bind, Layout, Level, Machine, Mppr, Order, Request};
use matrix::CommMatrix;
use std::collections::HashMap;
use stencil::Grid;

/// Most communicating pairs handed to Scotch (about 1 M arcs).
pub const MAX_SCOTCH_PAIRS: usize = 1 << 19;

/// Most slots Scotch's tree mapping is run on: its cost grows much faster than the ranks
/// (1.5 s for 20,016 slots, 42 s for 100,160 on this project's 2-core machine, where the
/// multisection, built on Scotch's partitioner, takes a few seconds and costs less).
pub const MAX_SCOTCH_TREE_SLOTS: usize = 1 << 15;

/// The candidates that are not LAMA layouts (and the stencil path, `stencil XxY`).
const NOT_LAYOUTS: [&str; 4] = ["scotch", "bisection", "multisection", "multilevel"];

/// The layouts every plan is compared with: Slurm's block default (`csbnh`) first.
pub const GUARD_LAYOUTS: [&str; 5] = ["csbnh", "scbnh", "nscbh", "Nscbnh", "L3csbnh"];

/// What each rank is bound to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    /// The available hardware threads of one core (binding `1c`).
    Core,
    /// One hardware thread (binding `1h`).
    Hwthread,
}

impl Unit {
    /// The LAMA binding of the same width.
    pub fn bind(self) -> Bind {
        Bind::Width {
            count: 1,
            level: match self {
                Unit::Core => Level::Core,
                Unit::Hwthread => Level::Hwthread,
            },
        }
    }
}

/// Where one rank goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RankPlace {
    /// Node index.
    pub node: u32,
    /// Logical index of the mapped PU.
    pub pu: u32,
    /// Logical indexes of the bound PUs.
    pub bound: Vec<u32>,
}

/// One candidate and its cost under the model.
#[derive(Debug, Clone, PartialEq)]
pub struct Candidate {
    /// `scotch`, `bisection`, `multisection`, `stencil XxY` or a layout.
    pub name: String,
    /// Its cost; `None` when it could not place the ranks (and why).
    pub cost: Result<f64, String>,
    /// How long it took, in seconds.
    pub seconds: f64,
    /// Its cost after the refinement, for the [`REFINED`] cheapest candidates.
    pub refined: Option<f64>,
}

/// A plan: the winner's placement, refined, and every candidate's cost.
#[derive(Debug, Clone)]
pub struct Plan {
    /// One entry per rank.
    pub ranks: Vec<RankPlace>,
    /// The candidate that won: of the [`REFINED`] cheapest, the cheapest once refined.
    pub winner: String,
    /// The plan's cost: the winner's after the refinement.
    pub cost: f64,
    /// How many exchanges of groups of ranks refined the winner first: two whole nodes' ranks
    /// across leaf switches, re-splits of two nodes of one switch, a rank's close partners
    /// with another group's places, two packages' or NUMA nodes' ranks.
    pub exchanges: usize,
    /// How many cost-lowering swaps (or moves to a free slot) refined the winner then.
    pub swaps: usize,
    /// Every candidate: Scotch, the bisection, then the layouts (the guard layouts first).
    pub candidates: Vec<Candidate>,
}

impl Plan {
    /// The cost of a candidate by name.
    pub fn cost_of(&self, name: &str) -> Option<f64> {
        self.candidates
            .iter()
            .find(|c| c.name == name)
            .and_then(|c| c.cost.as_ref().ok().copied())
    }

    /// The cheapest layout's name and cost.
    pub fn best_layout(&self) -> Option<(&str, f64)> {
        self.candidates
            .iter()
            .filter(|c| !NOT_LAYOUTS.contains(&c.name.as_str()) && !c.name.starts_with("stencil"))
            .filter_map(|c| c.cost.as_ref().ok().map(|&v| (c.name.as_str(), v)))
            .min_by(|a, b| a.1.total_cmp(&b.1))
    }
}

/// A binding slot: a node, its mapped PU and the PUs bound (logical indexes).
#[derive(Debug, Clone)]
struct Slot {
    node: u32,
    pu: u32,
    bound: Vec<u32>,
}

fn slots(machines: &[&Machine], unit: Unit) -> Vec<Slot> {
    let mut out = Vec::new();
    for (n, m) in machines.iter().enumerate() {
        let avail = |p: u32| m.pus()[p as usize].available;
        match unit {
            Unit::Hwthread => {
                for p in (0..m.pus().len() as u32).filter(|&p| avail(p)) {
                    out.push(Slot {
                        node: n as u32,
                        pu: p,
                        bound: vec![p],
                    });
                }
            }
            Unit::Core => {
                let mut covered = vec![false; m.pus().len()];
                let mut found: Vec<Slot> = Vec::new();
                for core in m.objects(Level::Core) {
                    let bound: Vec<u32> = core.pus.clone().filter(|&p| avail(p)).collect();
                    core.pus.clone().for_each(|p| covered[p as usize] = true);
                    if let Some(&first) = bound.first() {
                        found.push(Slot {
                            node: n as u32,
                            pu: first,
                            bound,
                        });
                    }
                }
                for p in (0..m.pus().len() as u32).filter(|&p| avail(p) && !covered[p as usize]) {
                    found.push(Slot {
                        node: n as u32,
                        pu: p,
                        bound: vec![p],
                    });
                }
                found.sort_by_key(|s| s.pu);
                out.extend(found);
            }
        }
    }
    out
}

/// The node-internal levels of the Scotch tree, coarsest first, in `m`'s nesting (fewest
/// objects first).
fn inner_levels(m: &Machine) -> Vec<Level> {
    let mut levels: Vec<Level> = LEVELS
        .iter()
        .copied()
        .filter(|&l| !m.objects(l).is_empty())
        .collect();
    levels.sort_by_key(|&l| {
        let rank = LEVELS.iter().position(|&x| x == l).unwrap_or(0);
        (m.objects(l).len(), std::cmp::Reverse(rank))
    });
    levels
}

/// The smallest object of `level` holding PU `p`, if any.
fn owner(m: &Machine, level: Level, p: u32) -> Option<usize> {
    m.objects(level)
        .iter()
        .enumerate()
        .filter(|(_, o)| o.pus.contains(&p))
        .min_by_key(|(_, o)| o.pus.end - o.pus.start)
        .map(|(i, _)| i)
}

/// The machine tree of a list of slots: one coordinate per tree level for each slot (network
/// levels from the root, the node within its leaf switch, the node's levels, the hardware
/// thread) and the model's cost of a link between children at each depth.
struct Tree {
    coords: Vec<Vec<u32>>,
    // (Read by the candidates Scotch makes.)
    #[cfg_attr(not(feature = "scotch"), allow(dead_code))]
    links: Vec<f64>,
}

fn tree(system: &System<'_>, network_depth: &[Vec<usize>], slots: &[Slot], unit: Unit) -> Tree {
    let machines = system.machines();
    let levels = inner_levels(machines[0]);
    let d = system.distances();
    // The costs by the first machine's nesting, as the cost model prices them.
    let geometry = system.geometry(0);
    let cost_of = |l: Level| geometry.level_cost(l).unwrap_or(d.node);
    let net_depth = network_depth.iter().map(Vec::len).max().unwrap_or(1);
    // Coordinates: network levels (root first, padded at the top), node within the leaf
    // switch, the node's levels, the hardware thread.
    let mut coords: Vec<Vec<u32>> = Vec::with_capacity(slots.len());
    // Tree vertices by their parent vertex and what they are (`own`): each vertex's id and its
    // index among its parent's children; vertex 0 is the root.
    let mut vertex: HashMap<(u32, (u8, usize)), (u32, u32)> = HashMap::new();
    let mut children: Vec<u32> = vec![0];
    let mut index = |parent: &mut u32, own: (u8, usize)| -> u32 {
        let (id, i) = *vertex.entry((*parent, own)).or_insert_with(|| {
            let i = children[*parent as usize];
            children[*parent as usize] += 1;
            children.push(0);
            ((children.len() - 1) as u32, i)
        });
        *parent = id;
        i
    };
    // Node-internal levels of the same coordinate vector are padded to the first machine's.
    let cache: Vec<Vec<Vec<Option<usize>>>> = machines
        .iter()
        .map(|m| {
            levels
                .iter()
                .map(|&l| (0..m.pus().len() as u32).map(|p| owner(m, l, p)).collect())
                .collect()
        })
        .collect();
    for s in slots {
        let mut c: Vec<u32> = Vec::new();
        let mut parent = 0u32;
        let path = &network_depth[s.node as usize];
        let pad = net_depth - path.len();
        for depth in 0..net_depth {
            let own = if depth < pad {
                (0, 0)
            } else {
                (1, path[path.len() - 1 - (depth - pad)])
            };
            c.push(index(&mut parent, own));
        }
        c.push(index(&mut parent, (2, s.node as usize)));
        for owners in &cache[s.node as usize] {
            let own = match owners[s.pu as usize] {
                Some(o) => (3, o),
                None => (4, s.pu as usize),
            };
            c.push(index(&mut parent, own));
        }
        if unit == Unit::Hwthread {
            c.push(index(&mut parent, (5, s.pu as usize)));
        }
        coords.push(c);
    }
    let depth = coords.first().map_or(0, Vec::len);
    // The link cost between children at each depth is the cost of their common parent.
    let mut links: Vec<f64> = Vec::with_capacity(depth);
    for _ in 0..net_depth {
        links.push(d.farther);
    }
    links.push(d.switch);
    links.push(d.node);
    for (k, _) in levels.iter().enumerate().skip(1) {
        links.push(cost_of(levels[k - 1]));
    }
    if unit == Unit::Hwthread {
        links.push(levels.last().map_or(d.node, |&l| cost_of(l)));
    }
    links.truncate(depth);
    Tree { coords, links }
}

/// Plans `matrix.ranks()` ranks on the system (nodes in the same order as `paths`, each the
/// node's switches from its leaf switch up). The candidates are Scotch's mapping, the
/// recursive bisection, `layouts` (the guard layouts a user would try) and every other layout
/// of the levels the first node has ([`all_layouts`]); the cheapest under the model wins and
/// is then refined by cost-lowering swaps.
pub fn plan(
    matrix: &CommMatrix,
    system: &System<'_>,
    paths: &[Vec<usize>],
    unit: Unit,
    layouts: &[Layout],
) -> Result<Plan, String> {
    plan_on(matrix, system, paths, unit, layouts, None)
}

/// [`plan`], with the stencil path on `grid` (the ranks' Cartesian grid, as `--grid` gives
/// it) or, without one, on the grid the matrix is recognised as ([`Grid::recognise`]).
pub fn plan_on(
    matrix: &CommMatrix,
    system: &System<'_>,
    paths: &[Vec<usize>],
    unit: Unit,
    layouts: &[Layout],
    grid: Option<&Grid>,
) -> Result<Plan, String> {
    let grid = grid.cloned().or_else(|| Grid::recognise(matrix));
    let np = matrix.ranks() as usize;
    let machines = system.machines();
    let slots = slots(machines, unit);
    enough_slots(np, slots.len(), unit)?;
    let tree = tree(system, paths, &slots, unit);
    let near = matrix.neighbours();
    let spots: Vec<Spot> = slots.iter().map(|s| (s.node, s.pu)).collect();
    let cost_of = |assign: &[usize]| -> f64 {
        let placed: Vec<Spot> = assign.iter().map(|&s| spots[s]).collect();
        system.cost(matrix, &placed)
    };
    // The cheaper of two answers (either may have failed).
    let cheaper = |a: Result<Vec<usize>, String>, b: Result<Vec<usize>, String>| match (a, b) {
        (Ok(a), Ok(b)) => Ok(if cost_of(&b) < cost_of(&a) { b } else { a }),
        (Ok(a), Err(_)) | (Err(_), Ok(a)) => Ok(a),
        (Err(e), Err(_)) => Err(e),
    };
    let mut candidates = Vec::new();
    // The cheapest answers so far, cheapest first, at most REFINED.
    let mut kept: Vec<(f64, usize, Vec<usize>)> = Vec::new();
    let mut consider = |name: String, result: Result<Vec<usize>, String>, seconds: f64| {
        let cost = result.map(|assign| {
            let c = cost_of(&assign);
            let at = kept.partition_point(|k| k.0 <= c);
            if at < REFINED {
                kept.insert(at, (c, candidates.len(), assign));
                kept.truncate(REFINED);
            }
            c
        });
        candidates.push(Candidate {
            name,
            cost,
            seconds,
            refined: None,
        });
    };
    let input = Input {
        matrix,
        system,
        tree: &tree,
        slots: &slots,
        near: &near,
        grid: grid.as_ref(),
    };
    for (name, result, seconds) in mapped(&input, &cheaper) {
        consider(name, result, seconds);
    }
    for (name, result, seconds) in layout_candidates(machines, &spots, unit, np, layouts) {
        consider(name, result, seconds);
    }
    let Refined {
        index,
        assign,
        cost,
        exchanges,
        swaps,
    } = refine_cheapest(kept, &mut candidates, &near, system, &spots, &cost_of)?;
    let winner = candidates[index].name.clone();
    let ranks = assign
        .iter()
        .map(|&s| RankPlace {
            node: slots[s].node,
            pu: slots[s].pu,
            bound: slots[s].bound.clone(),
        })
        .collect();
    Ok(Plan {
        ranks,
        winner,
        cost,
        exchanges,
        swaps,
        candidates,
    })
}

/// Refines the cheapest answers (`kept`: cost, candidate index, placement; cheapest first)
/// within [`refined_margin`] of the cheapest, notes each one's cost after it in `candidates`,
/// and returns the cheapest after refinement; an error when no candidate placed the ranks.
fn refine_cheapest(
    kept: Vec<(f64, usize, Vec<usize>)>,
    candidates: &mut [Candidate],
    near: &bisect::Adjacency,
    system: &System<'_>,
    spots: &[Spot],
    cost_of: &dyn Fn(&[usize]) -> f64,
) -> Result<Refined, String> {
    let Some(cheapest) = kept.first().map(|k| k.0) else {
        let why: Vec<String> = candidates
            .iter()
            .filter_map(|c| c.cost.as_ref().err().map(|e| format!("{}: {e}", c.name)))
            .collect();
        return Err(format!(
            "no candidate could place the ranks ({})",
            why.join("; ")
        ));
    };
    let mut best: Option<Refined> = None;
    for (before, index, assign) in kept {
        if before > cheapest * (1.0 + refined_margin(assign.len())) {
            continue;
        }
        let r = refined(index, assign, before, near, system, spots, cost_of);
        candidates[index].refined = Some(r.cost);
        if best.as_ref().is_none_or(|b| r.cost < b.cost) {
            best = Some(r);
        }
    }
    best.ok_or_else(|| "no candidate could place the ranks".to_string())
}

/// How many of the cheapest candidates are refined: the cheapest after refinement wins (a
/// candidate a little dearer may refine to less).
pub const REFINED: usize = 3;
/// Only candidates at most this much dearer than the cheapest are refined, on plans of more
/// than [`SMALL_PLAN`] ranks (there, one 2.8 times dearer took seconds to refine at 100,000
/// ranks and still lost).
pub const REFINED_MARGIN: f64 = 0.02;
/// On plans of at most [`SMALL_PLAN`] ranks, where refining a candidate takes a fraction of a
/// second, candidates this much dearer than the cheapest are refined too: on a partial
/// allocation with clustered traffic in groups of 8 (1,184 ranks, BENCHMARKS.md) the
/// multisection, 25 % dearer than the multilevel candidate before refinement, ends 5 % cheaper
/// after it.
pub const REFINED_MARGIN_SMALL: f64 = 0.5;
/// The most ranks for which [`REFINED_MARGIN_SMALL`] holds.
pub const SMALL_PLAN: usize = 20_000;

/// How much dearer than the cheapest a candidate may be and still be refined, on a plan of
/// `np` ranks.
pub fn refined_margin(np: usize) -> f64 {
    match np <= SMALL_PLAN {
        true => REFINED_MARGIN_SMALL,
        false => REFINED_MARGIN,
    }
}

/// A candidate's placement after the refinement.
struct Refined {
    index: usize,
    assign: Vec<usize>,
    cost: f64,
    exchanges: usize,
    swaps: usize,
}

/// Refines candidate `index`'s placement (`before`: its cost): exchanges of groups of ranks
/// (whole nodes, node pairs, partner groups, objects: `regroup`), then swaps of ranks
/// (`refine`).
fn refined(
    index: usize,
    mut assign: Vec<usize>,
    before: f64,
    near: &bisect::Adjacency,
    system: &System<'_>,
    spots: &[Spot],
    cost_of: &dyn Fn(&[usize]) -> f64,
) -> Refined {
    let budget = || regroup::Budget::new(near);
    let exchanges = regroup::node_swaps(near, system, spots, &mut assign)
        + regroup::pair_refine(
            near,
            system,
            spots,
            &mut assign,
            &mut budget().times(regroup::PAIR_BUDGETS),
        )
        + regroup::group_swaps(near, system, spots, &mut assign, &mut budget())
        + regroup::object_swaps(near, system, spots, &mut assign, &mut budget());
    let swaps = refine::swaps(near, system, spots, &mut assign);
    Refined {
        index,
        cost: cost_of(&assign).min(before),
        assign,
        exchanges,
        swaps,
    }
}

/// That `np` ranks fit on `slots` binding slots of `unit`, or what to do.
fn enough_slots(np: usize, slots: usize, unit: Unit) -> Result<(), String> {
    if np == 0 {
        return Err("no rank to place".to_string());
    }
    if np > slots {
        let (what, or) = match unit {
            Unit::Core => ("cores", ", or --bind hwthread"),
            Unit::Hwthread => ("hardware threads", ""),
        };
        return Err(format!(
            "{np} ranks but only {slots} {what} available on these nodes: ask for fewer ranks, \
             more nodes{or}"
        ));
    }
    Ok(())
}

/// What the mapping candidates are computed from.
struct Input<'a> {
    matrix: &'a CommMatrix,
    system: &'a System<'a>,
    tree: &'a Tree,
    slots: &'a [Slot],
    near: &'a Vec<Vec<(u32, f64)>>,
    grid: Option<&'a Grid>,
}

/// Each rank's slot, or why there is none.
type Assignment = Result<Vec<usize>, String>;

/// A mapper run on some slots (their tree coordinates and the slots).
type Mapper<'a> = &'a dyn Fn(&[Vec<u32>], &[Slot]) -> Assignment;

/// A candidate's name, its assignment and the seconds it took.
type Mapped = (String, Assignment, f64);

/// The candidates that map the matrix: Scotch's mapping, the recursive bisection, the
/// multisection, and on a grid the stencil path. Each but the stencil path balances load over
/// every slot it is given, spreading a small job over every node, so each is also run on the
/// first `np` slots (node by node, in logical order: as compact as the allocation allows), and
/// the cheaper (by `cheaper`) counts.
fn mapped(
    input: &Input<'_>,
    cheaper: &dyn Fn(Assignment, Assignment) -> Assignment,
) -> Vec<Mapped> {
    let Input {
        matrix,
        system,
        tree,
        slots,
        near,
        grid,
    } = *input;
    let np = matrix.ranks() as usize;
    let both = |f: Mapper<'_>| {
        let t0 = std::time::Instant::now();
        let all = f(&tree.coords, slots);
        let result = match np < slots.len() && all.is_ok() {
            true => cheaper(all, f(&tree.coords[..np], &slots[..np])),
            false => all,
        };
        (result, t0.elapsed().as_secs_f64())
    };
    let mut out: Vec<Mapped> = Vec::new();
    #[cfg(not(feature = "scotch"))]
    let _ = system;
    #[cfg(feature = "scotch")]
    let rank_graph = scotch::graph(matrix);
    #[cfg(feature = "scotch")]
    {
        let (r, t) = both(&|_, s| with_scotch::mapping(matrix, &rank_graph, near, system, tree, s));
        out.push(("scotch".to_string(), r, t));
    }
    // The stencil path is the bisection with geometric first cuts: on a grid of more slots
    // than Scotch's tree mapping takes, where time counts, the plain bisection is left out.
    let (r, t) = match grid {
        Some(g) if slots.len() > MAX_SCOTCH_TREE_SLOTS => (
            Err(format!(
                "not run: {} slots, more than {MAX_SCOTCH_TREE_SLOTS}, on the grid {g}: the \
                 stencil path is this bisection started from geometric cuts (cheaper on every \
                 benchmark stencil of that size, BENCHMARKS.md)",
                slots.len()
            )),
            0.0,
        ),
        _ => both(&|c, _| Ok(bisect::map(matrix, near, c))),
    };
    out.push(("bisection".to_string(), r, t));
    #[cfg(feature = "scotch")]
    out.extend(with_scotch::multisections(
        matrix,
        &rank_graph,
        near,
        tree,
        &both,
    ));
    if let Some(grid) = grid {
        let t0 = std::time::Instant::now();
        let r = Ok(stencil::map(grid, near, &tree.coords));
        out.push((format!("stencil {grid}"), r, t0.elapsed().as_secs_f64()));
    }
    out
}

/// The LAMA layouts as candidates: `layouts` (always listed), then every other layout of the
/// levels the first node has ([`all_layouts`]) that places the ranks differently from every
/// layout before it.
fn layout_candidates(
    machines: &[&Machine],
    spots: &[Spot],
    unit: Unit,
    np: usize,
    layouts: &[Layout],
) -> Vec<Mapped> {
    let slot_at: HashMap<Spot, usize> = spots.iter().enumerate().map(|(i, &s)| (s, i)).collect();
    let mut seen: Vec<String> = Vec::new();
    let mut placements: std::collections::HashSet<Vec<usize>> = std::collections::HashSet::new();
    let mut out = Vec::new();
    let guards = layouts.len();
    for (k, layout) in layouts
        .iter()
        .cloned()
        .chain(all_layouts(machines[0], unit))
        .enumerate()
    {
        let name = layout.to_string();
        if seen.contains(&name) {
            continue;
        }
        seen.push(name.clone());
        let t0 = std::time::Instant::now();
        let req = Request {
            layout,
            bind: unit.bind(),
            mppr: Mppr::none(),
            order: Order::Natural,
            oversubscribe: false,
            np: np as u32,
            bind_within: false,
        };
        let result = place(machines, &req)
            .map_err(|e| e.to_string())
            .and_then(|p| {
                (0..p.len())
                    .map(|r| {
                        let info = p.info(r);
                        slot_at
                            .get(&(info.node, info.pu_logical))
                            .copied()
                            .ok_or_else(|| "a rank off the binding slots".to_string())
                    })
                    .collect::<Result<Vec<usize>, String>>()
            });
        if let Ok(assign) = &result {
            if !placements.insert(assign.clone()) && k >= guards {
                continue;
            }
        }
        out.push((name, result, t0.elapsed().as_secs_f64()));
    }
    out
}

/// The levels a layout of `m` can usefully name, besides the node: those `m` has, each with
/// objects of its own (a level whose objects are the same CPU sets as a level already taken,
/// or one object over the whole node, changes nothing), the hardware thread only when ranks
/// are bound to hardware threads (a core binding keeps it innermost). At most six: L2, then
/// the die, then L3 are dropped first beyond that (5,040 orders would be too many to try).
fn layout_levels(m: &Machine, unit: Unit) -> Vec<Level> {
    let mut levels: Vec<Level> = Vec::new();
    let mut sets: Vec<Vec<std::ops::Range<u32>>> = Vec::new();
    let mut candidates = vec![
        Level::Numa,
        Level::Socket,
        Level::Die,
        Level::L3,
        Level::L2,
        Level::Core,
    ];
    if unit == Unit::Hwthread {
        candidates.push(Level::Hwthread);
    }
    let whole = 0..m.pus().len() as u32;
    for level in candidates {
        let set: Vec<std::ops::Range<u32>> =
            m.objects(level).iter().map(|o| o.pus.clone()).collect();
        if set.is_empty() || (set.len() == 1 && set[0] == whole) || sets.contains(&set) {
            continue;
        }
        sets.push(set);
        levels.push(level);
    }
    for drop in [Level::L2, Level::Die, Level::L3] {
        if levels.len() > 6 {
            levels.retain(|&l| l != drop);
        }
    }
    levels.push(Level::Node);
    levels
}

/// Every layout of the levels [`layout_levels`] finds on `m`, in every order (the hardware
/// thread last when binding cores).
pub fn all_layouts(m: &Machine, unit: Unit) -> Vec<Layout> {
    let mut levels = layout_levels(m, unit);
    let mut out = Vec::new();
    permutations(&mut levels, 0, &mut |order| {
        out.push(Layout::from_levels(order.iter().copied()));
    });
    out
}

/// Calls `f` with every order of `items[k..]` (after `items[..k]`).
fn permutations(items: &mut [Level], k: usize, f: &mut dyn FnMut(&[Level])) {
    if k + 1 >= items.len() {
        f(items);
        return;
    }
    for i in k..items.len() {
        items.swap(k, i);
        permutations(items, k + 1, f);
        items.swap(k, i);
    }
}

/// The guard layouts, parsed.
pub fn guard_layouts() -> Vec<Layout> {
    GUARD_LAYOUTS
        .iter()
        .filter_map(|l| Layout::parse(l).ok())
        .collect()
}

// (The plans' tests compare with the candidates Scotch makes: the build without it is tested by
// tests/no-scotch.sh.)
#[cfg(all(test, feature = "scotch"))]
mod tests;

//! The one place that calls Scotch (through `scotch-sys`): a communication graph mapped onto a
//! tree-leaf target architecture restricted to the leaves that exist (a sub-architecture), or
//! partitioned into parts of given sizes (a weighted complete graph).

use crate::matrix::CommMatrix;
use scotch_sys as s;
use std::mem::MaybeUninit;

/// Scotch's integer.
type Num = s::SCOTCH_Num;

/// A tree-leaf target: `sizes[k]` children per node at depth `k` (root first), `links[k]` the
/// cost of a link between children at that depth; `leaves` the leaf numbers (mixed-radix over
/// `sizes`) that exist, sorted.
#[derive(Debug, Clone)]
pub struct Target {
    /// Arity per level.
    pub sizes: Vec<u32>,
    /// Link cost per level.
    pub links: Vec<u32>,
    /// The leaves that exist.
    pub leaves: Vec<u32>,
}

/// A graph in compressed adjacency form: `xadj[v]..xadj[v+1]` index `adj` and `weights`.
#[derive(Debug, Clone)]
pub struct Graph {
    /// Offsets, one more than there are vertices.
    pub xadj: Vec<u32>,
    /// Neighbours.
    pub adj: Vec<u32>,
    /// Edge weights (at least 1).
    pub weights: Vec<u32>,
}

fn num(v: u32, what: &str) -> Result<Num, String> {
    Num::try_from(v).map_err(|_| format!("{what} {v} is too large for Scotch"))
}

fn nums(v: &[u32], what: &str) -> Result<Vec<Num>, String> {
    v.iter().map(|&x| num(x, what)).collect()
}

/// Owns one initialised Scotch object and frees it when dropped.
struct Owned<T> {
    value: Box<MaybeUninit<T>>,
    exit: unsafe extern "C" fn(*mut T),
}

impl<T> Owned<T> {
    fn new(
        init: unsafe extern "C" fn(*mut T) -> i32,
        exit: unsafe extern "C" fn(*mut T),
        what: &str,
    ) -> Result<Self, String> {
        let mut value = Box::new(MaybeUninit::<T>::uninit());
        // SAFETY: `init` is one of Scotch's `*Init` functions, which initialise the opaque
        // structure behind the pointer; the box keeps it at one address until `exit`.
        if unsafe { init(value.as_mut_ptr()) } != 0 {
            return Err(format!("Scotch could not initialise its {what}"));
        }
        Ok(Owned { value, exit })
    }

    fn ptr(&mut self) -> *mut T {
        self.value.as_mut_ptr()
    }
}

impl<T> Drop for Owned<T> {
    fn drop(&mut self) {
        // SAFETY: the value was initialised by the matching `*Init` in `new`.
        unsafe { (self.exit)(self.value.as_mut_ptr()) }
    }
}

/// Maps the graph's vertices onto the target's existing leaves; returns, per vertex, the index
/// into `target.leaves` Scotch chose. Several vertices may share a leaf (Scotch balances load
/// within a tolerance); the caller resolves that.
pub fn map(graph: &Graph, target: &Target) -> Result<Vec<usize>, String> {
    if target.sizes.len() != target.links.len() || target.sizes.is_empty() {
        return Err("the tree needs one link cost per level".to_string());
    }
    let sizes = nums(&target.sizes, "a tree arity")?;
    let links = nums(&target.links, "a link cost")?;
    let leaves = nums(&target.leaves, "a leaf number")?;
    let nleaves = num(target.leaves.len() as u32, "the leaf count")?;
    let mut arch = Owned::new(s::SCOTCH_archInit, s::SCOTCH_archExit, "architecture")?;
    let mut sub = Owned::new(s::SCOTCH_archInit, s::SCOTCH_archExit, "sub-architecture")?;
    // SAFETY: `arch` and `sub` are live, initialised Scotch architectures; `sizes` and `links`
    // have one entry per level and `leaves` `nleaves` entries, all outliving the calls.
    unsafe {
        if s::SCOTCH_archTleaf(
            arch.ptr(),
            sizes.len() as Num,
            sizes.as_ptr(),
            links.as_ptr(),
        ) != 0
        {
            return Err("Scotch refused the tree-leaf architecture".to_string());
        }
        if s::SCOTCH_archSub(sub.ptr(), arch.ptr(), nleaves, leaves.as_ptr()) != 0 {
            return Err("Scotch refused the sub-architecture of the available leaves".to_string());
        }
    }
    let mut strat = strategy(target.leaves.len(), s::SCOTCH_STRATQUALITY, 0.0)?;
    mapped(graph, &mut sub, target.leaves.len(), &mut strat, 1)
}

/// How Scotch partitions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Method {
    /// Scotch's own quality strategy (`SCOTCH_stratGraphMapBuild`): a graph of more than
    /// 10,000 vertices is coarsened once, then the parts come from recursive bisection (the
    /// best of three multilevel bisections each time), refined by k-way passes on the way up.
    Scotch,
    /// Multilevel k-way: the graph is coarsened down to 20 vertices per part before the
    /// recursive bisection (six tries each), so that k-way Fiduccia–Mattheyses passes refine
    /// the parts at every level on the way up. On irregular graphs of thousands of vertices
    /// (random traffic) it cuts less than [`Method::Scotch`]; on others more, so the
    /// multilevel multisection alternates the two as starts.
    KWay,
}

/// Partitions graphs into parts of given sizes; keeps one strategy per part count, tolerance
/// and method, as a multisection asks for thousands of small partitions with the same few.
#[derive(Default)]
pub struct Partitioner {
    strategies: std::collections::HashMap<(usize, u32, Method), Owned<s::SCOTCH_Strat>>,
}

impl std::fmt::Debug for Partitioner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Partitioner({} strategies)", self.strategies.len())
    }
}

impl Partitioner {
    /// Partitions the graph into `sizes.len()` parts whose vertex counts are about
    /// proportional to `sizes` (Scotch maps onto a complete graph with those weights: every
    /// pair of parts costs the same, so the cut is what is minimised); returns, per vertex, its
    /// part. The sizes are met within `percent` % (Scotch's balance tolerance); the caller
    /// enforces what must be exact. `seed` seeds Scotch's generator (another seed, another
    /// start).
    pub fn partition(
        &mut self,
        graph: &Graph,
        sizes: &[u32],
        percent: u32,
        seed: i64,
        method: Method,
    ) -> Result<Vec<usize>, String> {
        if sizes.is_empty() || sizes.contains(&0) {
            return Err("every part needs a size".to_string());
        }
        let weights = nums(sizes, "a part size")?;
        let mut arch = Owned::new(s::SCOTCH_archInit, s::SCOTCH_archExit, "architecture")?;
        // SAFETY: `arch` is a live, initialised architecture; `weights` has one entry per part.
        if unsafe { s::SCOTCH_archCmpltw(arch.ptr(), weights.len() as Num, weights.as_ptr()) } != 0
        {
            return Err("Scotch refused the weighted complete graph".to_string());
        }
        let balance = f64::from(percent) / 100.0;
        let strat = match self.strategies.entry((sizes.len(), percent, method)) {
            std::collections::hash_map::Entry::Occupied(e) => e.into_mut(),
            std::collections::hash_map::Entry::Vacant(e) => e.insert(match method {
                Method::Scotch => strategy(
                    sizes.len(),
                    s::SCOTCH_STRATBALANCE | s::SCOTCH_STRATQUALITY,
                    balance,
                )?,
                Method::KWay => kway_strategy(sizes.len(), balance)?,
            }),
        };
        mapped(graph, &mut arch, sizes.len(), strat, seed)
    }
}

/// A mapping strategy for `parts` terminal domains with `flags` and balance tolerance
/// `balance`.
fn strategy(parts: usize, flags: u32, balance: f64) -> Result<Owned<s::SCOTCH_Strat>, String> {
    let nparts = num(parts as u32, "the part count")?;
    let mut strat = Owned::new(s::SCOTCH_stratInit, s::SCOTCH_stratExit, "strategy")?;
    // SAFETY: `strat` is a live, initialised strategy.
    if unsafe { s::SCOTCH_stratGraphMapBuild(strat.ptr(), flags as Num, nparts, balance) } != 0 {
        return Err("Scotch could not build a mapping strategy".to_string());
    }
    Ok(strat)
}

/// The text of [`Method::KWay`]'s strategy in Scotch's strategy language: a multilevel
/// mapping (`m`) whose coarsest graph has 20 vertices per part, mapped by recursive
/// bipartitioning (`r`), each bipartition the best of six multilevel ones (`m` with a greedy
/// graph-growing start `h` and FM passes `f`), and on the way up banded diffusion (`d`) and
/// k-way FM passes; then the load made exact (`x`) and a last FM pass. `bal` is the balance
/// tolerance.
fn kway_text(parts: usize, bal: f64) -> String {
    let fm = |moves: u32| format!("f{{bal={bal},move={moves}}}");
    let bipart = format!(
        "m{{vert=120,low=h{{pass=10}}{fm},asc=b{{bnd={fm},org={fm}}}}}",
        fm = fm(120)
    );
    let tries = vec![bipart; 6].join("|");
    let recursive = format!("r{{job=t,map=t,poli=S,bal={bal},sep={tries}f{{bal={bal}}}}}");
    format!(
        "m{{vert={vert},low={recursive},asc=b{{bnd=d{{pass=40}}{fm},org={fm}}}}}x{{bal={bal}}}{fm}",
        vert = (parts * 20).max(120),
        fm = fm(200)
    )
}

/// [`Method::KWay`]'s strategy for `parts` parts and balance tolerance `balance`.
fn kway_strategy(parts: usize, balance: f64) -> Result<Owned<s::SCOTCH_Strat>, String> {
    let text = std::ffi::CString::new(kway_text(parts, balance))
        .map_err(|_| "the k-way strategy's text holds a NUL".to_string())?;
    let mut strat = Owned::new(s::SCOTCH_stratInit, s::SCOTCH_stratExit, "strategy")?;
    // SAFETY: `strat` is a live, initialised strategy; `text` is a NUL-terminated string that
    // outlives the call (Scotch parses it into the strategy and keeps no pointer to it).
    if unsafe { s::SCOTCH_stratGraphMap(strat.ptr(), text.as_ptr()) } != 0 {
        return Err("Scotch refused the k-way mapping strategy".to_string());
    }
    Ok(strat)
}

/// Maps `graph` onto `arch` (of `parts` terminal domains) with `strat`, in a deterministic
/// context of one thread with the given fixed seed: the same input and seed give the same
/// answer on every machine.
fn mapped(
    graph: &Graph,
    arch: &mut Owned<s::SCOTCH_Arch>,
    parts: usize,
    strat: &mut Owned<s::SCOTCH_Strat>,
    seed: i64,
) -> Result<Vec<usize>, String> {
    let nvert = graph.xadj.len().saturating_sub(1);
    if nvert == 0 || parts == 0 {
        return Err("nothing to map".to_string());
    }
    let xadj = nums(&graph.xadj, "an edge offset")?;
    let adj = nums(&graph.adj, "a vertex number")?;
    let weights = nums(&graph.weights, "an edge weight")?;
    let nvert_num = num(nvert as u32, "the vertex count")?;
    let nedge = num(graph.adj.len() as u32, "the edge count")?;
    let mut g = Owned::new(s::SCOTCH_graphInit, s::SCOTCH_graphExit, "graph")?;
    // A context of its own, deterministic and with a fixed seed, in which the graph is mapped:
    // the same input gives the same plan (Scotch's threads would not).
    let mut context = Owned::new(s::SCOTCH_contextInit, s::SCOTCH_contextExit, "context")?;
    // Declared after `context`, so it is freed first.
    let mut bound = Owned::new(s::SCOTCH_graphInit, s::SCOTCH_graphExit, "context graph")?;
    let mut out: Vec<Num> = vec![0; nvert];
    // SAFETY: every pointer is to a live, initialised Scotch object or to a vector that
    // outlives the calls; lengths are passed with each array and match it (the graph arrays
    // are a valid compressed adjacency of `nvert` vertices and `nedge` arcs, `out` has one
    // entry per vertex).
    unsafe {
        if s::SCOTCH_graphBuild(
            g.ptr(),
            0,
            nvert_num,
            xadj.as_ptr(),
            std::ptr::null(),
            std::ptr::null(),
            std::ptr::null(),
            nedge,
            adj.as_ptr(),
            weights.as_ptr(),
        ) != 0
        {
            return Err("Scotch refused the communication graph".to_string());
        }
        if s::SCOTCH_graphCheck(g.ptr()) != 0 {
            return Err("Scotch found the communication graph inconsistent".to_string());
        }
        if s::SCOTCH_contextOptionSetNum(context.ptr(), s::SCOTCH_OPTIONNUMDETERMINISTIC as i32, 1)
            != 0
            || s::SCOTCH_contextOptionSetNum(
                context.ptr(),
                s::SCOTCH_OPTIONNUMRANDOMFIXEDSEED as i32,
                1,
            ) != 0
            // One thread: Scotch's threaded bipartitioning crashed (a segmentation fault in
            // bgraphBipartDfLoop) on a 2,112-vertex 3-D stencil with some link costs, and a
            // plan must not take its caller down. One thread is also what makes a plan the
            // same on every machine, whatever its core count.
            || s::SCOTCH_contextThreadSpawn(context.ptr(), 1, std::ptr::null()) != 0
            || s::SCOTCH_contextRandomClone(context.ptr()) != 0
            || s::SCOTCH_contextBindGraph(context.ptr(), g.ptr(), bound.ptr()) != 0
        {
            return Err("Scotch could not set up a deterministic context".to_string());
        }
        // A private random generator with the seed given: 1, or another of the
        // multisection's starts, the same for every plan.
        s::SCOTCH_contextRandomSeed(context.ptr(), seed as _);
        if s::SCOTCH_graphMap(bound.ptr(), arch.ptr(), strat.ptr(), out.as_mut_ptr()) != 0 {
            return Err("Scotch could not map the graph".to_string());
        }
    }
    out.iter()
        .map(|&p| {
            usize::try_from(p)
                .ok()
                .filter(|&p| p < parts)
                .ok_or_else(|| format!("Scotch returned terminal {p}, outside the {parts} parts"))
        })
        .collect()
}

/// The communication graph with integer weights: the largest volume becomes 1000, or less
/// when the sum of all arc weights would not fit Scotch's 32-bit integers.
pub(crate) fn graph(matrix: &CommMatrix) -> Graph {
    let n = matrix.ranks() as usize;
    let max = matrix.pairs().iter().map(|p| p.2).fold(0.0f64, f64::max);
    let arcs = 2 * matrix.pairs().len().max(1) as u64;
    let top = (1000u64).min((i32::MAX as u64 / 4) / arcs).max(1) as f64;
    let mut lists: Vec<Vec<(u32, u32)>> = vec![Vec::new(); n];
    for &(i, j, v) in matrix.pairs() {
        let w = ((v / max * top).round() as u32).max(1);
        lists[i as usize].push((j, w));
        lists[j as usize].push((i, w));
    }
    let mut xadj = Vec::with_capacity(n + 1);
    let mut adj = Vec::new();
    let mut weights = Vec::new();
    xadj.push(0);
    for l in lists {
        for (j, w) in l {
            adj.push(j);
            weights.push(w);
        }
        xadj.push(adj.len() as u32);
    }
    Graph { xadj, adj, weights }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A ring of `n` vertices, unit weights.
    fn ring(n: u32) -> Graph {
        let mut xadj = vec![0];
        let mut adj = Vec::new();
        for v in 0..n {
            adj.push((v + n - 1) % n);
            adj.push((v + 1) % n);
            xadj.push(adj.len() as u32);
        }
        let weights = vec![1; adj.len()];
        Graph { xadj, adj, weights }
    }

    #[test]
    fn both_methods_cut_a_ring_into_arcs() {
        // A ring of 400 in 8 parts of 50: the least cut is 8 edges (8 arcs, found by hand);
        // each method must come near it and keep the sizes within its 1 % tolerance.
        let g = ring(400);
        let mut p = Partitioner::default();
        for method in [Method::Scotch, Method::KWay] {
            let part = p.partition(&g, &[50; 8], 1, 1, method).unwrap();
            let mut count = [0usize; 8];
            part.iter().for_each(|&q| count[q] += 1);
            assert!(
                count.iter().all(|&c| (49..=51).contains(&c)),
                "{method:?}: {count:?}"
            );
            let cut = (0..400).filter(|&v| part[v] != part[(v + 1) % 400]).count();
            assert!((8..=12).contains(&cut), "{method:?}: cut {cut}");
        }
    }

    #[test]
    fn the_kway_strategy_reads_as_scotch_strategy_text() {
        let text = kway_text(20, 0.01);
        assert!(text.starts_with("m{vert=400,low=r{"), "{text}");
        assert_eq!(text.matches("h{pass=10}").count(), 6);
        assert!(kway_strategy(20, 0.01).is_ok());
        assert!(kway_strategy(2, 0.25).is_ok());
    }
}

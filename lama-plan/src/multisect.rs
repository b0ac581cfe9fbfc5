//! Global multisection over the machine tree: at every tree vertex the ranks are split at once
//! into as many parts as the vertex has children, each part sized to its child's free slots,
//! by Scotch's multilevel k-way partitioner (a mapping onto a complete graph weighted by the
//! children's sizes); each part then descends into its child and is split again, down to the
//! slots. Between the children of one vertex every pair costs the same under the model, so
//! at each level the cut volume is exactly what the model charges for that level.
//!
//! Unlike the recursive bisection, which halves the children of a vertex and so charges one
//! cut twice on vertices of three or more children (a switch of 22 nodes, a node of 2
//! packages of 2 NUMA nodes), the multisection sees every child of a level together. Part
//! sizes are made exact after Scotch (which balances within a tolerance) by moving the ranks
//! that lose the least connection.

use crate::rng::{seeded, shuffle};
use crate::scotch;
use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// How each split is made and refined.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Variant {
    /// Starts from Scotch's own strategy (and shuffled ones), pairs of parts refined by flat
    /// Fiduccia–Mattheyses passes, rank by rank.
    Flat,
    /// Starts from Scotch's own strategy and its multilevel k-way one (and shuffled ones),
    /// pairs of parts refined by V-cycles (`vcycle.rs`), in which groups of close partners
    /// move as one on the coarse levels.
    Multilevel,
}

/// Whether the multilevel variant differs from the flat one on this graph: where it is small
/// enough for several starts and the pairwise refinement (on larger graphs each split has one
/// start, Scotch's own, and no pairwise refinement, in both).
pub(crate) fn multilevel_differs(graph: &scotch::Graph) -> bool {
    seeds(graph) > 1
}

/// How many starts each split of a graph this large tries.
fn seeds(graph: &scotch::Graph) -> i64 {
    (SEED_WORK / graph.adj.len().max(1)).clamp(1, MAX_SEEDS) as i64
}

/// Maps ranks `0..graph's vertex count` to slots (whose tree coordinates are `coords`; `links`
/// is the model's cost of a unit of volume between children at each depth; `near` each rank's
/// partners and real volumes, the graph's before rounding), splitting as `variant` says:
/// returns the slot index of each rank. There must be at least as many slots as ranks.
pub(crate) fn map(
    graph: &scotch::Graph,
    near: &[Vec<(u32, f64)>],
    coords: &[Vec<u32>],
    links: &[f64],
    variant: Variant,
) -> Result<Vec<usize>, String> {
    let np = graph.xadj.len().saturating_sub(1);
    if np > coords.len() {
        return Err("more ranks than slots".to_string());
    }
    let look_ahead = np <= LOOK_AHEAD_RANKS && graph.adj.len() <= LOOK_AHEAD_ARCS;
    let mut work = Work::new(graph, near, coords, links, variant, look_ahead);
    work.place((0..np as u32).collect(), (0..coords.len()).collect(), 0)?;
    Ok(work.out)
}

struct Work<'a> {
    graph: &'a scotch::Graph,
    partitioner: scotch::Partitioner,
    /// Scratch: the local index of a rank in the current split, `u32::MAX` elsewhere.
    local: Vec<u32>,
    out: Vec<usize>,
    coords: &'a [Vec<u32>],
    /// The model's cost of a unit of volume between children at each depth.
    links: &'a [f64],
    /// Each rank's partners and real volumes.
    near: &'a [Vec<(u32, f64)>],
    /// How many starts each split tries (by the whole graph's size).
    seeds: i64,
    /// How splits are made and refined.
    variant: Variant,
    /// Whether a split chooses among its candidates by the cost of the placement below each
    /// ([`Work::look_ahead`]); off on large graphs, and inside a look-ahead.
    look_ahead: bool,
}

impl<'a> Work<'a> {
    fn new(
        graph: &'a scotch::Graph,
        near: &'a [Vec<(u32, f64)>],
        coords: &'a [Vec<u32>],
        links: &'a [f64],
        variant: Variant,
        look_ahead: bool,
    ) -> Self {
        let np = graph.xadj.len().saturating_sub(1);
        Work {
            graph,
            partitioner: scotch::Partitioner::default(),
            local: vec![u32::MAX; np],
            out: vec![usize::MAX; np],
            coords,
            links,
            near,
            seeds: seeds(graph),
            variant,
            look_ahead,
        }
    }

    /// Places `ranks` on `slots`, which share their coordinates above `depth`.
    fn place(&mut self, ranks: Vec<u32>, slots: Vec<usize>, depth: usize) -> Result<(), String> {
        if crate::bisect::at_leaf(self.coords, &ranks, &slots, depth, &mut self.out) {
            return Ok(());
        }
        let mut children = crate::bisect::children(self.coords, slots, depth);
        if children.len() == 1 {
            let only = children.pop().unwrap_or_default();
            return self.place(ranks, only, depth + 1);
        }
        let caps: Vec<usize> = children.iter().map(Vec::len).collect();
        let sub = self.induced(&ranks);
        let mut candidates = self.split(&sub, &caps)?;
        if self.look_ahead && candidates.len() > 1 {
            return self.look_ahead(&ranks, &children, depth, candidates);
        }
        let part = candidates.swap_remove(0);
        self.descend(&ranks, &part, children, depth)
    }

    /// Places each part of `part` (the part of each of `ranks`) in its child.
    fn descend(
        &mut self,
        ranks: &[u32],
        part: &[usize],
        children: Vec<Vec<usize>>,
        depth: usize,
    ) -> Result<(), String> {
        let mut groups: Vec<Vec<u32>> = vec![Vec::new(); children.len()];
        for (i, &r) in ranks.iter().enumerate() {
            groups[part[i]].push(r);
        }
        for (group, slots) in groups.into_iter().zip(children) {
            self.place(group, slots, depth + 1)?;
        }
        Ok(())
    }

    /// Chooses among a split's candidates by what each costs once the levels below are placed
    /// too (the split's cut alone cannot tell apart splits of equal cut whose parts place
    /// differently inside the children): each is placed down to the slots, without looking
    /// ahead again, the one whose ranks cost least among themselves is kept (the first on a
    /// tie: the split's own choice), and its placement is then made again looking ahead at the
    /// levels below, which costs no more than the placement it was chosen by (each split's own
    /// choice is among its candidates).
    fn look_ahead(
        &mut self,
        ranks: &[u32],
        children: &[Vec<usize>],
        depth: usize,
        candidates: Vec<Vec<usize>>,
    ) -> Result<(), String> {
        self.look_ahead = false;
        let mut best: Option<(f64, usize)> = None;
        let mut tried = Ok(());
        for (k, part) in candidates.iter().enumerate() {
            tried = self.descend(ranks, part, children.to_vec(), depth);
            if tried.is_err() {
                break;
            }
            let cost = self.cost_among(ranks);
            if best.is_none_or(|(b, _)| cost < b - 1e-9 * b.abs().max(1.0)) {
                best = Some((cost, k));
            }
        }
        self.look_ahead = true;
        tried?;
        let chosen = best.map_or(0, |(_, k)| k);
        self.descend(ranks, &candidates[chosen], children.to_vec(), depth)
    }

    /// What `ranks` (placed in `self.out`) cost among themselves, by their real volumes (the
    /// graph's weights are rounded to integers, which can hide what tells two placements
    /// apart): each pair's volume at the cost of the depth where their slots' coordinates
    /// part.
    fn cost_among(&mut self, ranks: &[u32]) -> f64 {
        for (i, &r) in ranks.iter().enumerate() {
            self.local[r as usize] = i as u32;
        }
        let mut total = 0.0;
        for &r in ranks {
            let a = &self.coords[self.out[r as usize]];
            for &(j, volume) in &self.near[r as usize] {
                if j <= r || self.local[j as usize] == u32::MAX {
                    continue;
                }
                let b = &self.coords[self.out[j as usize]];
                if let Some(d) = a.iter().zip(b).position(|(x, y)| x != y) {
                    total += volume * self.links.get(d).copied().unwrap_or(0.0);
                }
            }
        }
        for &r in ranks {
            self.local[r as usize] = u32::MAX;
        }
        total
    }

    /// Splits the ranks of `sub` into one part per child of capacity `caps`, cutting little
    /// volume: returns candidate splits (each rank's part), first the split's own choice
    /// (the least cut of its starts), then, where the split looks ahead, the other starts and
    /// as many more as [`LOOK_AHEAD_SEEDS`] on splits of half the graph or more, those that
    /// cut at most [`LOOK_AHEAD_MARGIN`] more than the least, distinct.
    fn split(&mut self, sub: &scotch::Graph, caps: &[usize]) -> Result<Vec<Vec<usize>>, String> {
        let n = sub.xadj.len().saturating_sub(1);
        if n > caps.iter().sum() {
            return Err("more ranks than slots".to_string());
        }
        // On small graphs, several starts, each refined; the least cut is the split's choice.
        // Only splits of an eighth of the graph or more (the dearest cuts, near the top).
        let seeds = match sub.adj.len() * 8 >= self.graph.adj.len() {
            true => self.seeds,
            false => 1,
        };
        let mut starts: Vec<(f64, Vec<usize>)> = Vec::new();
        for seed in 1..=seeds {
            let part = self.start(sub, caps, seed)?;
            starts.push((cut(sub, &part), part));
            if sub.adj.is_empty() {
                break;
            }
        }
        // The least cut, the first start on a tie.
        let first = (0..starts.len()).fold(0, |b, i| match starts[i].0 < starts[b].0 {
            true => i,
            false => b,
        });
        let (least, mut part) = starts.remove(first);
        if self.variant == Variant::Multilevel && caps.len() > 2 && !sub.adj.is_empty() {
            let before = part.clone();
            self.k_way(sub, &mut part, caps);
            if part != before {
                starts.insert(0, (least, before));
            }
        }
        let mut candidates = vec![part];
        if !self.look_ahead || seeds < 2 || sub.adj.is_empty() {
            return Ok(candidates);
        }
        // Splits that look ahead can tell apart starts of equal cut: the dearest try more.
        if sub.adj.len() * 2 >= self.graph.adj.len() {
            for seed in seeds + 1..=LOOK_AHEAD_SEEDS {
                let part = self.start(sub, caps, seed)?;
                starts.push((cut(sub, &part), part));
            }
        }
        starts.sort_by(|a, b| a.0.total_cmp(&b.0));
        let floor = starts.first().map_or(least, |s| s.0.min(least));
        for (c, p) in starts {
            if candidates.len() == LOOK_AHEAD_CANDIDATES {
                break;
            }
            if c <= floor * (1.0 + LOOK_AHEAD_MARGIN) && !candidates.contains(&p) {
                candidates.push(p);
            }
        }
        Ok(candidates)
    }

    /// One start of a split of `sub` into parts of capacity `caps`, refined: by seed, Scotch's
    /// partitioner (its own strategy and, in the multilevel variant, alternately its
    /// multilevel k-way one, cheaper on irregular graphs, dearer on others) from that seed of
    /// its generator, or between them a shuffled split. Where the ranks are fewer than the
    /// slots, a part may take more than its share, up to its capacity (so a group of heavy
    /// talkers is not cut to fill each child in proportion); where they fill the slots, every
    /// part is its capacity.
    fn start(
        &mut self,
        sub: &scotch::Graph,
        caps: &[usize],
        seed: i64,
    ) -> Result<Vec<usize>, String> {
        let n = sub.xadj.len().saturating_sub(1);
        let total: usize = caps.iter().sum();
        // Scotch's tolerance: a part may exceed its share by this ratio, which the slack
        // allows (capacity / share - 1), between 1 % and 25 % in steps of 1 %.
        let slack = (total as f64 / n as f64 - 1.0).clamp(0.01, 0.25);
        let percent = (slack * 100.0).floor() as u32;
        let weights: Vec<u32> = caps.iter().map(|&c| c as u32).collect();
        let mut part = if sub.adj.is_empty() {
            // Nothing to cut: any split within the capacities is as good.
            Vec::new()
        } else if seed % 2 == 0 {
            shuffled(&crate::stencil::shares(n, caps), seed as u64)
        } else {
            let method = match (seed % 4, self.variant) {
                (3, Variant::Multilevel) => scotch::Method::KWay,
                _ => scotch::Method::Scotch,
            };
            self.partitioner
                .partition(sub, &weights, percent, seed, method)?
        };
        if part.len() != n {
            part = in_order(&crate::stencil::shares(n, caps));
        }
        within_capacity(sub, &mut part, caps);
        if self.seeds > 1 {
            pairwise(sub, &mut part, caps.len(), self.variant);
        }
        Ok(part)
    }

    /// The multilevel variant's last step on a split into three parts or more: the k-way
    /// V-cycle (`kway.rs`) on the least cut of the starts, the sizes made exact again, and the
    /// pairwise refinement after it (where the graph is small enough for it); kept where it
    /// cuts less than the split it started from (making the sizes exact may cost more than the
    /// V-cycle took off).
    fn k_way(&mut self, sub: &scotch::Graph, part: &mut Vec<usize>, caps: &[usize]) {
        let mut sizes = vec![0usize; caps.len()];
        for &p in part.iter() {
            sizes[p] += 1;
        }
        let mut tried = part.clone();
        let room = crate::kway::Room {
            sizes: &sizes,
            caps,
        };
        crate::kway::refine(&local_graph(sub), &mut tried, &room, KWAY_SEED);
        within_capacity(sub, &mut tried, caps);
        if self.seeds > 1 {
            pairwise(sub, &mut tried, caps.len(), self.variant);
        }
        if cut(sub, &tried) < cut(sub, part) {
            *part = tried;
        }
    }

    /// The subgraph of `ranks` (local indexes in the order given).
    fn induced(&mut self, ranks: &[u32]) -> scotch::Graph {
        for (i, &r) in ranks.iter().enumerate() {
            self.local[r as usize] = i as u32;
        }
        let g = self.graph;
        let mut xadj = Vec::with_capacity(ranks.len() + 1);
        let mut adj = Vec::new();
        let mut weights = Vec::new();
        xadj.push(0);
        for &r in ranks {
            let (a, b) = (g.xadj[r as usize] as usize, g.xadj[r as usize + 1] as usize);
            for k in a..b {
                let l = self.local[g.adj[k] as usize];
                if l != u32::MAX {
                    adj.push(l);
                    weights.push(g.weights[k]);
                }
            }
            xadj.push(adj.len() as u32);
        }
        for &r in ranks {
            self.local[r as usize] = u32::MAX;
        }
        scotch::Graph { xadj, adj, weights }
    }
}

/// Moves vertices out of parts over their capacity (`sizes`) into parts with room until no part
/// is over: from each part over its capacity, the vertices that lose the least connection by
/// moving (connection to the best part with room minus connection to their own) move first.
/// Where the capacities sum to the vertex count, every part ends with exactly its capacity.
fn within_capacity(g: &scotch::Graph, part: &mut [usize], sizes: &[usize]) {
    let k = sizes.len();
    let mut count = vec![0usize; k];
    for &p in part.iter() {
        count[p] += 1;
    }
    // Each vertex's connection to every part, and the best move to a part with room.
    let connection = |part: &[usize], v: usize| -> Vec<i64> {
        let mut conn = vec![0i64; k];
        for e in g.xadj[v] as usize..g.xadj[v + 1] as usize {
            conn[part[g.adj[e] as usize]] += i64::from(g.weights[e]);
        }
        conn
    };
    let best_move = |conn: &[i64], count: &[usize], from: usize| -> Option<(i64, usize)> {
        (0..k)
            .filter(|&p| count[p] < sizes[p])
            .map(|p| (conn[p] - conn[from], p))
            .max_by_key(|&(gain, p)| (gain, Reverse(p)))
    };
    for from in 0..k {
        if count[from] <= sizes[from] {
            continue;
        }
        // A heap of moves by gain; an entry whose gain changed since it was pushed (a
        // neighbour moved, a part filled) is pushed again with its new gain.
        let mut heap: BinaryHeap<(i64, Reverse<usize>)> = (0..part.len())
            .filter(|&v| part[v] == from)
            .filter_map(|v| {
                best_move(&connection(part, v), &count, from).map(|(g, _)| (g, Reverse(v)))
            })
            .collect();
        while count[from] > sizes[from] {
            let Some((gain, Reverse(v))) = heap.pop() else {
                break;
            };
            if part[v] != from {
                continue;
            }
            let Some((now, to)) = best_move(&connection(part, v), &count, from) else {
                break;
            };
            if now != gain {
                heap.push((now, Reverse(v)));
                continue;
            }
            part[v] = to;
            count[from] -= 1;
            count[to] += 1;
            for e in g.xadj[v] as usize..g.xadj[v + 1] as usize {
                let u = g.adj[e] as usize;
                if part[u] == from {
                    if let Some((g, _)) = best_move(&connection(part, u), &count, from) {
                        heap.push((g, Reverse(u)));
                    }
                }
            }
        }
    }
}

/// Each split is made from as many starts as this many arcs allow over the whole graph (its
/// arcs x starts), at most [`MAX_SEEDS`]: small graphs get several, large ones one.
const SEED_WORK: usize = 1 << 18;
/// Most starts tried for one split.
const MAX_SEEDS: usize = 6;
/// Splits look ahead ([`Work::look_ahead`]) on graphs of at most this many ranks and arcs,
/// where placing a split's candidates down to the slots costs a few milliseconds each.
const LOOK_AHEAD_RANKS: usize = 256;
const LOOK_AHEAD_ARCS: usize = 1 << 13;
/// Starts tried by a split that looks ahead (where the graph is small enough for several).
const LOOK_AHEAD_SEEDS: i64 = 48;
/// A split looks ahead among the starts that cut at most this fraction more than the least.
const LOOK_AHEAD_MARGIN: f64 = 0.0;
/// Most candidates a split places to look ahead (its own choice among them).
const LOOK_AHEAD_CANDIDATES: usize = 8;

/// A split of the given part sizes in order: the first part's vertices first.
fn in_order(sizes: &[usize]) -> Vec<usize> {
    sizes
        .iter()
        .enumerate()
        .flat_map(|(p, &k)| std::iter::repeat_n(p, k))
        .collect()
}

/// A split of the given part sizes in a pseudo-random order (a fixed generator per `seed`).
fn shuffled(sizes: &[usize], seed: u64) -> Vec<usize> {
    let mut part = in_order(sizes);
    shuffle(&mut part, &mut seeded(seed));
    part
}

/// The volume a split cuts (each edge once).
fn cut(g: &scotch::Graph, part: &[usize]) -> f64 {
    let mut total = 0.0;
    for v in 0..part.len() {
        for e in g.xadj[v] as usize..g.xadj[v + 1] as usize {
            if part[g.adj[e] as usize] != part[v] {
                total += f64::from(g.weights[e]);
            }
        }
    }
    total / 2.0
}

/// The seed of the k-way V-cycle's matchings and search order.
const KWAY_SEED: u64 = 1 << 20;

/// `g` as a list of each vertex's neighbours and volumes.
fn local_graph(g: &scotch::Graph) -> crate::vcycle::Local {
    (0..g.xadj.len().saturating_sub(1))
        .map(|v| {
            (g.xadj[v] as usize..g.xadj[v + 1] as usize)
                .map(|e| (g.adj[e] as usize, f64::from(g.weights[e])))
                .collect()
        })
        .collect()
}

/// Most rounds of the pairwise refinement.
const PAIRWISE_ROUNDS: usize = 2;
/// Parts each part is refined against: its most connected ones.
const PARTNERS: usize = 3;

/// Refines a split into `k` parts by Fiduccia–Mattheyses passes between each part and its
/// [`PARTNERS`] most connected others (the bisection's refinement on the graph of the two
/// parts' vertices, each part keeping its count): a k-way refinement made of 2-way ones, which lowers the cut Scotch's
/// partitioner leaves on irregular graphs. Rounds stop when one lowers nothing.
fn pairwise(g: &scotch::Graph, part: &mut [usize], k: usize, variant: Variant) {
    if k < 2 {
        return;
    }
    let mut local = vec![usize::MAX; part.len()];
    for _ in 0..PAIRWISE_ROUNDS {
        let mut lowered = false;
        let mut between = vec![0.0f64; k * k];
        let mut bucket: Vec<Vec<usize>> = vec![Vec::new(); k];
        for (v, &p) in part.iter().enumerate() {
            bucket[p].push(v);
            for e in g.xadj[v] as usize..g.xadj[v + 1] as usize {
                between[p * k + part[g.adj[e] as usize]] += f64::from(g.weights[e]);
            }
        }
        for (p, q) in heaviest_pairs(&between, k) {
            let mut members = std::mem::take(&mut bucket[p]);
            members.append(&mut bucket[q]);
            if refine_pair(g, &members, part, (p, q), &mut local, variant) {
                lowered = true;
            }
            for v in members {
                bucket[part[v]].push(v);
            }
        }
        if !lowered {
            break;
        }
    }
}

/// Each part's [`PARTNERS`] most connected other parts, as pairs (p < q), once each.
fn heaviest_pairs(between: &[f64], k: usize) -> Vec<(usize, usize)> {
    let mut pairs = Vec::new();
    for p in 0..k {
        let mut others: Vec<usize> = (0..k)
            .filter(|&q| q != p && between[p * k + q] > 0.0)
            .collect();
        others.sort_by(|&a, &b| {
            between[p * k + b]
                .total_cmp(&between[p * k + a])
                .then(a.cmp(&b))
        });
        pairs.extend(
            others
                .into_iter()
                .take(PARTNERS)
                .map(|q| (p.min(q), p.max(q))),
        );
    }
    pairs.sort_unstable();
    pairs.dedup();
    pairs
}

/// One Fiduccia–Mattheyses refinement between parts `p` and `q` of `members` (their vertices;
/// `local` is scratch, `usize::MAX` outside a call); returns whether it lowered their cut.
fn refine_pair(
    g: &scotch::Graph,
    members: &[usize],
    part: &mut [usize],
    (p, q): (usize, usize),
    local: &mut [usize],
    variant: Variant,
) -> bool {
    for (i, &v) in members.iter().enumerate() {
        local[v] = i;
    }
    let graph: Vec<Vec<(usize, f64)>> = members
        .iter()
        .map(|&v| {
            (g.xadj[v] as usize..g.xadj[v + 1] as usize)
                .filter(|&e| local[g.adj[e] as usize] != usize::MAX)
                .map(|e| (local[g.adj[e] as usize], f64::from(g.weights[e])))
                .collect()
        })
        .collect();
    for &v in members {
        local[v] = usize::MAX;
    }
    let mut side: Vec<bool> = members.iter().map(|&v| part[v] == p).collect();
    let want = side.iter().filter(|&&x| x).count();
    let before = crate::bisect::cut_of(&graph, &side);
    // Each refinement returns the cut it leaves.
    let after = match variant {
        Variant::Flat => crate::bisect::refine(&graph, &mut side, want),
        Variant::Multilevel => crate::vcycle::refine(&graph, &mut side, want, (p * 31 + q) as u64),
    };
    if after >= before - 1e-9 * before.max(1.0) {
        return false;
    }
    for (&v, &on_p) in members.iter().zip(&side) {
        part[v] = if on_p { p } else { q };
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A path graph of `n` vertices, unit weights.
    fn path(n: u32) -> scotch::Graph {
        let mut xadj = vec![0];
        let mut adj = Vec::new();
        for v in 0..n {
            if v > 0 {
                adj.push(v - 1);
            }
            if v + 1 < n {
                adj.push(v + 1);
            }
            xadj.push(adj.len() as u32);
        }
        let weights = vec![1; adj.len()];
        scotch::Graph { xadj, adj, weights }
    }

    #[test]
    fn pairwise_refinement_undoes_an_interleaved_split() {
        // A path of 12 split into 3 parts by rank mod 3 cuts all 11 edges; each part keeps its
        // 4 vertices, and the least cut, 3 runs of 4, is 2.
        let g = path(12);
        let mut part: Vec<usize> = (0..12).map(|v| v % 3).collect();
        assert_eq!(cut(&g, &part), 11.0);
        pairwise(&g, &mut part, 3, Variant::Flat);
        assert!((0..3).all(|p| part.iter().filter(|&&x| x == p).count() == 4));
        // Three runs of 4, the least cut (found by hand: 12 vertices, 3 parts of 4).
        assert_eq!(cut(&g, &part), 2.0, "{part:?}");
        let starts = |p: usize| {
            (0..12)
                .filter(|&v| part[v] == p && (v == 0 || part[v - 1] != p))
                .count()
        };
        assert!((0..3).all(|p| starts(p) == 1), "{part:?}");
    }

    #[test]
    fn shuffled_splits_keep_the_sizes_and_differ_by_seed() {
        let a = shuffled(&[5, 3, 4], 2);
        assert_eq!(a.len(), 12);
        assert!([(0, 5), (1, 3), (2, 4)].iter().all(|&(p, k)| a
            .iter()
            .filter(|&&x| x == p)
            .count()
            == k));
        assert_eq!(a, shuffled(&[5, 3, 4], 2));
        assert_ne!(a, shuffled(&[5, 3, 4], 4));
    }

    #[test]
    fn sizes_are_made_exact_with_the_cheapest_moves() {
        // A path of 6 split 5 + 1 must become 3 + 3: vertex 3 (the boundary) moves first.
        let g = path(6);
        let mut part = vec![0, 0, 0, 0, 0, 1];
        within_capacity(&g, &mut part, &[3, 3]);
        assert_eq!(part, vec![0, 0, 0, 1, 1, 1]);
    }

    /// The rank graph of `n` ranks with these entries (repeats added up), as the plan makes
    /// it, and each rank's partners with their real volumes.
    fn graph_of(n: u32, entries: &[(u32, u32, u32)]) -> (scotch::Graph, Vec<Vec<(u32, f64)>>) {
        let matrix = crate::matrix::CommMatrix::from_entries(
            n,
            entries.iter().map(|&(a, b, w)| (a, b, f64::from(w))),
        );
        (scotch::graph(&matrix), matrix.neighbours())
    }

    #[test]
    fn looking_ahead_keeps_the_split_that_places_cheaper_below() {
        // Four pairs a = (0,1), b = (2,3), c = (4,5), d = (6,7), 10 within each pair, 1 between
        // neighbours of the ring a-b-c-d-a; 2 nodes of 2 packages of 2 cores (links 40, 20, 10).
        let (g, near) = graph_of(
            8,
            &[
                (0, 1, 10),
                (2, 3, 10),
                (4, 5, 10),
                (6, 7, 10),
                (1, 2, 1),
                (3, 4, 1),
                (5, 6, 1),
                (7, 0, 1),
            ],
        );
        let coords: Vec<Vec<u32>> = (0..8).map(|s| vec![s / 4, (s / 2) % 2, s % 2]).collect();
        let links = [40.0, 20.0, 10.0];
        let children = crate::bisect::children(&coords, (0..8).collect(), 0);
        // By hand. The split's choice (first) {a, c | b, d} cuts 4 between nodes: 4 x 40, each
        // pair on a package (4 x 10 x 10), nothing between packages: 560. {a, b | c, d} cuts 2:
        // 2 x 40 + the light pair inside each node across its packages (2 x 20) + 400 = 520.
        let first = vec![0, 0, 1, 1, 0, 0, 1, 1];
        let other = vec![0, 0, 0, 0, 1, 1, 1, 1];
        let ranks: Vec<u32> = (0..8).collect();
        let mut work = Work::new(&g, &near, &coords, &links, Variant::Flat, true);
        work.look_ahead(&ranks, &children, 0, vec![first.clone()])
            .unwrap();
        assert_eq!(work.cost_among(&ranks), 560.0, "{:?}", work.out);
        let mut work = Work::new(&g, &near, &coords, &links, Variant::Flat, true);
        work.look_ahead(&ranks, &children, 0, vec![first, other])
            .unwrap();
        assert_eq!(work.cost_among(&ranks), 520.0, "{:?}", work.out);
        let node = |r: usize| work.out[r] / 4;
        assert!(
            node(0) == node(2) && node(4) == node(6) && node(0) != node(4),
            "{:?}",
            work.out
        );
    }

    proptest::proptest! {
        // 64 cases: each places a graph four times, 48 starts at the top (14 s in a debug
        // build with proptest's 256).
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(64))]
        /// Looking ahead never places dearer than the splits' own choices: each split's choice
        /// is its first candidate, and the placements below are made the same way.
        #[test]
        fn looking_ahead_never_costs_more(
            edges in proptest::collection::vec((0u32..24, 0u32..24, 1u32..40), 10..70),
            ranks in 12usize..=24,
        ) {
            let (g, near) = graph_of(ranks as u32, &edges);
            // 2 nodes x 2 packages x 2 NUMA nodes x 3 cores: 24 slots.
            let coords: Vec<Vec<u32>> = (0..24).map(|s| vec![s / 12, (s / 6) % 2, (s / 3) % 2, s % 3]).collect();
            let links = [40.0, 20.0, 10.0, 1.0];
            for variant in [Variant::Flat, Variant::Multilevel] {
                let mut cost = [0.0; 2];
                for (k, look) in [false, true].into_iter().enumerate() {
                    let mut work = Work::new(&g, &near, &coords, &links, variant, look);
                    work.place((0..ranks as u32).collect(), (0..24).collect(), 0).unwrap();
                    cost[k] = work.cost_among(&(0..ranks as u32).collect::<Vec<_>>());
                }
                proptest::prop_assert!(cost[1] <= cost[0] + 1e-9, "{variant:?}: {cost:?}");
            }
        }
    }

    #[test]
    fn three_children_take_three_contiguous_pieces() {
        // A path of 12 ranks on a vertex of 3 children of 4 slots, each of 2 slots: every child
        // gets one run of 4 ranks (a cut of 2, the least), each slot one rank.
        let coords: Vec<Vec<u32>> = (0..12).map(|s| vec![s / 4, (s % 4) / 2, s % 2]).collect();
        let g = path(12);
        let near: Vec<Vec<(u32, f64)>> = (0..12usize)
            .map(|v| {
                (g.xadj[v]..g.xadj[v + 1])
                    .map(|e| (g.adj[e as usize], 1.0))
                    .collect()
            })
            .collect();
        let out = map(&g, &near, &coords, &[4.0, 2.0, 1.0], Variant::Multilevel).unwrap();
        let mut seen = out.clone();
        seen.sort_unstable();
        assert_eq!(seen, (0..12).collect::<Vec<_>>());
        let child = |r: usize| out[r] / 4;
        let cuts = (0..11).filter(|&r| child(r) != child(r + 1)).count();
        assert_eq!(cuts, 2, "{out:?}");
    }
}

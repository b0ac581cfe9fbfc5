//! Multilevel k-way refinement of a split into parts of given sizes: the graph is coarsened
//! by heavy-edge matching that only joins two vertices of one part (so every coarse level
//! holds the same split with the same cut), and from the coarsest level to the finest,
//! localized k-way Fiduccia–Mattheyses searches move vertices to the parts they are most
//! connected to, within a small tolerance on the parts' sizes. The multisection makes the sizes
//! exact afterwards (`multisect::within_capacity`).
//!
//! The pairwise refinement (`multisect::pairwise`) only moves ranks between a part and its
//! few most connected others. On random traffic split into many parts (a rank's partners
//! spread over twenty leaf switches) the cut is spread over every pair of parts, and most of
//! what a rank could gain is towards a part that is not among those few; a k-way move takes it
//! there. The searches are localized (started from one boundary vertex at a time, each with
//! its own hill to climb and its own best prefix, as in KaHIP's multi-try FM): a move that
//! loses a little is often what lets the next ones gain, and a global pass, whose moves all
//! share one prefix, gives up on such chains far sooner (on random traffic at 10,080 ranks in
//! 20 parts, a global pass took 0.7 % off the cut, the localized searches 2.4 %).

use crate::bisect::Gain;
use crate::vcycle::{coarsened, lifted, Local};
use std::collections::BinaryHeap;

/// Most passes at each level; passes stop earlier when one gains nothing.
const MAX_PASSES: usize = 6;
/// A search stops after this many moves without a new least cut (the hill it may climb).
const STALL: usize = 8;
/// A part may hold this share of its size more or less while vertices move one at a time.
const TOLERANCE: f64 = 0.01;
/// Coarsening stops at this many vertices per part.
const COARSEST_PER_PART: usize = 16;
/// A coarse vertex is never more than this share of the smallest part's size.
const CLUSTER_SHARE: usize = 12;
/// Largest table of each vertex's connection to each part (vertices x parts) built; a larger
/// split is left as it is.
pub(crate) const MAX_TABLE: usize = 1 << 22;

/// Refines `part` (each vertex's part among `sizes.len()`, part `p` holding about `sizes[p]`
/// vertices) over a V-cycle whose matchings and searches follow an order drawn from `seed`.
/// Returns the cut it took off (nothing where the table would exceed [`MAX_TABLE`]). Each
/// level keeps the parts within its bounds ([`bounds`]): on the coarse levels, where a vertex
/// stands for several, a part may end a few vertices off its size, which the caller mends.
pub(crate) fn refine(graph: &Local, part: &mut [usize], room: &Room<'_>, seed: u64) -> f64 {
    let sizes = room.sizes;
    let k = sizes.len();
    if graph.len().saturating_mul(k) > MAX_TABLE {
        return 0.0;
    }
    let smallest = sizes.iter().copied().filter(|&s| s > 0).min().unwrap_or(1);
    let cap = (smallest / CLUSTER_SHARE).max(1) as u32;
    let levels = coarsened(graph, part, cap, k * COARSEST_PER_PART, seed);
    let mut labels: Vec<usize> = part.to_vec();
    for level in &levels {
        labels = lifted(level, &labels);
    }
    let mut rng = crate::rng::seeded(seed);
    let mut gained = 0.0;
    for level in levels.iter().rev() {
        gained += passes(&level.graph, &level.weight, &mut labels, room, &mut rng);
        labels = level.up.iter().map(|&c| labels[c]).collect();
    }
    part.copy_from_slice(&labels);
    gained + passes(graph, &vec![1; graph.len()], part, room, &mut rng)
}

/// The parts' sizes and capacities: where the sizes fill the capacities, each part keeps its
/// size (within the tolerance); where they do not, a part may take anything up to its capacity
/// (a group of heavy talkers gathers on a child with room, as in the multisection's splits).
pub(crate) struct Room<'a> {
    pub(crate) sizes: &'a [usize],
    pub(crate) caps: &'a [usize],
}

/// The bounds on each part's weight while vertices move ([`Room`]): the tolerance is at least
/// one vertex of the heaviest weight at this level, so that some can move.
fn bounds(room: &Room<'_>, heaviest: u32) -> Vec<(u64, u64)> {
    let full = room.sizes.iter().sum::<usize>() >= room.caps.iter().sum::<usize>();
    room.sizes
        .iter()
        .zip(room.caps)
        .map(|(&s, &c)| {
            let slack = ((s as f64 * TOLERANCE).ceil() as u64).max(u64::from(heaviest));
            let least = if full {
                (s as u64).saturating_sub(slack)
            } else {
                0
            };
            (least, (c as u64).max(s as u64 + slack))
        })
        .collect()
}

/// Localized k-way passes ([`Pass::searches`]) on a graph of weighted vertices, until one gains
/// nothing or [`MAX_PASSES`]; `rng` orders the starts. Returns the cut taken off.
fn passes(
    graph: &Local,
    weight: &[u32],
    part: &mut [usize],
    room: &Room<'_>,
    rng: &mut u64,
) -> f64 {
    let k = room.sizes.len();
    let limits = bounds(room, weight.iter().copied().max().unwrap_or(1));
    let mut pass = Pass {
        graph,
        weight,
        limits: &limits,
        load: vec![0; k],
        conn: vec![0.0; k * part.len()],
        k,
    };
    for (v, &p) in part.iter().enumerate() {
        pass.load[p] += u64::from(weight[v]);
        for &(u, x) in &graph[v] {
            pass.conn[u * k + p] += x;
        }
    }
    let mut gained = 0.0;
    for _ in 0..MAX_PASSES {
        let g = pass.searches(part, rng);
        gained += g;
        if g <= 1e-9 {
            break;
        }
    }
    gained
}

/// One graph's k-way passes: the graph, the parts' bounds and loads, and each vertex's
/// connection to each part.
struct Pass<'a> {
    graph: &'a Local,
    weight: &'a [u32],
    limits: &'a [(u64, u64)],
    load: Vec<u64>,
    /// Vertex `v`'s connection to part `p` at `v * k + p` (volumes are whole numbers, so the
    /// sums kept as vertices move are exact).
    conn: Vec<f64>,
    k: usize,
}

impl Pass<'_> {
    /// The best move of `v`: its gain (connection to the target minus connection to its own
    /// part) and the target, the lowest part on ties, among the parts it is connected to that
    /// have room for it; none where its part would fall below its least.
    fn best_move(&self, v: usize, part: &[usize]) -> Option<(f64, usize)> {
        let p = part[v];
        let w = u64::from(self.weight[v]);
        if self.load[p] < self.limits[p].0 + w {
            return None;
        }
        let row = &self.conn[v * self.k..(v + 1) * self.k];
        let own = row[p];
        let mut best: Option<(f64, usize)> = None;
        let mut consider = |q: usize| {
            let c = row[q];
            if q == p || c <= 0.0 || self.load[q] + w > self.limits[q].1 {
                return;
            }
            if best.is_none_or(|(g, b)| c - own > g || (c - own == g && q < b)) {
                best = Some((c - own, q));
            }
        };
        // The parts of its neighbours, or every part where they are fewer.
        if self.graph[v].len() < self.k {
            for &(u, _) in &self.graph[v] {
                consider(part[u]);
            }
        } else {
            (0..self.k).for_each(&mut consider);
        }
        best
    }

    /// One pass of localized searches: from each boundary vertex in a random order, a search
    /// ([`Pass::search`]) that keeps its best prefix of moves. Returns the cut taken off.
    fn searches(&mut self, part: &mut [usize], rng: &mut u64) -> f64 {
        let n = part.len();
        let mut starts: Vec<usize> = (0..n)
            .filter(|&v| self.graph[v].iter().any(|&(u, _)| part[u] != part[v]))
            .collect();
        crate::rng::shuffle(&mut starts, rng);
        let mut locked = vec![false; n];
        let mut moves: Vec<(usize, usize)> = Vec::new();
        let mut total = 0.0;
        for s in starts {
            if !locked[s] {
                total += self.search(s, &mut locked, &mut moves, part);
            }
        }
        total
    }

    /// A search from `s`: moves the best of the vertices it has reached (`s`, then the
    /// neighbours of those it moved), each at most once a pass (`locked`), until [`STALL`]
    /// moves bring no new least cut; undoes the moves after the least cut (unlocking them) and
    /// returns the cut it took off. `moves` is scratch.
    fn search(
        &mut self,
        s: usize,
        locked: &mut [bool],
        moves: &mut Vec<(usize, usize)>,
        part: &mut [usize],
    ) -> f64 {
        moves.clear();
        let mut heap = BinaryHeap::new();
        if let Some((g, _)) = self.best_move(s, part) {
            heap.push(Gain(g, s));
        }
        let (mut running, mut best, mut best_at) = (0.0f64, 0.0f64, 0usize);
        while let Some(Gain(was, v)) = heap.pop() {
            if locked[v] {
                continue;
            }
            let Some((gain, q)) = self.best_move(v, part) else {
                continue;
            };
            // The gain it was pushed with is stale (a neighbour or a part's load changed).
            if gain != was {
                heap.push(Gain(gain, v));
                continue;
            }
            locked[v] = true;
            moves.push((v, part[v]));
            self.shift(v, q, part);
            running += gain;
            if running > best + 1e-9 * best.abs().max(1.0) {
                (best, best_at) = (running, moves.len());
            } else if moves.len() - best_at > STALL {
                break;
            }
            for &(u, _) in &self.graph[v] {
                if !locked[u] {
                    if let Some((g, _)) = self.best_move(u, part) {
                        heap.push(Gain(g, u));
                    }
                }
            }
        }
        for &(v, p) in moves[best_at..].iter().rev() {
            self.shift(v, p, part);
            locked[v] = false;
        }
        best
    }

    /// Moves `v` to part `q`, keeping the loads and its neighbours' connections.
    fn shift(&mut self, v: usize, q: usize, part: &mut [usize]) {
        let w = u64::from(self.weight[v]);
        let p = part[v];
        self.load[p] -= w;
        self.load[q] += w;
        part[v] = q;
        for &(u, x) in &self.graph[v] {
            self.conn[u * self.k + p] -= x;
            self.conn[u * self.k + q] += x;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bisect::cut_of as cut;

    /// Parts of these sizes that fill their capacities.
    fn full(sizes: &[usize]) -> Room<'_> {
        Room { sizes, caps: sizes }
    }

    /// A ring of `n` vertices, unit volumes.
    fn ring(n: usize) -> Local {
        (0..n)
            .map(|v| vec![((v + 1) % n, 1.0), ((v + n - 1) % n, 1.0)])
            .collect()
    }

    #[test]
    fn misplaced_vertices_of_a_ring_go_home() {
        // A ring of 120 in 4 arcs of 30 cuts 4 edges; vertex 10 (inside arc 0) traded with
        // vertex 70 (inside arc 2) cuts 4 more. Each moving home gains 2 (both its neighbours
        // are there), within the tolerance of one vertex: the cut is 4 again and the sizes 30.
        let g = ring(120);
        let mut part: Vec<usize> = (0..120).map(|v| v / 30).collect();
        part.swap(10, 70);
        assert_eq!(cut(&g, &part), 8.0);
        let gained = refine(&g, &mut part, &full(&[30; 4]), 3);
        assert_eq!(gained, 4.0);
        assert_eq!(part, (0..120).map(|v| v / 30).collect::<Vec<_>>());
    }

    #[test]
    fn random_graphs_keep_their_sizes_and_never_cut_more() {
        // 600 vertices, each with 4 random partners of volume 1 to 100, dealt at random to 6
        // parts of 100: the V-cycle takes the cut down by what it says, and here every part
        // ends within one vertex of 100.
        let mut rng = crate::rng::seeded(11);
        let mut next = |m: u64| {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng % m
        };
        let mut g: Local = vec![Vec::new(); 600];
        for v in 0..600 {
            for _ in 0..4 {
                let u = next(600) as usize;
                let x = (next(100) + 1) as f64;
                if u != v {
                    g[v].push((u, x));
                    g[u].push((v, x));
                }
            }
        }
        let mut part: Vec<usize> = (0..600).map(|v| v % 6).collect();
        crate::rng::shuffle(&mut part, &mut 5);
        let before = cut(&g, &part);
        let gained = refine(&g, &mut part, &full(&[100; 6]), 7);
        let after = cut(&g, &part);
        assert!(gained > 0.1 * before, "{before} -> {after}");
        assert!(
            (before - gained - after).abs() < 1e-6,
            "{before} - {gained} != {after}"
        );
        for p in 0..6 {
            let size = part.iter().filter(|&&x| x == p).count();
            assert!((99..=101).contains(&size), "part {p}: {size}");
        }
    }

    #[test]
    fn a_vertex_moves_to_the_part_it_is_tied_to_not_the_busiest_pair() {
        // Three triangles (parts 0, 1, 2) with vertex 0 of part 0 tied by volume 5 to part 2's
        // triangle and by 1 to its own: moving it to part 2 gains 10 - 1 = 9 (by hand), within
        // the tolerance of parts of 3 (one vertex).
        let mut g: Local = vec![Vec::new(); 9];
        let mut edge = |a: usize, b: usize, x: f64| {
            g[a].push((b, x));
            g[b].push((a, x));
        };
        for t in 0..3 {
            edge(3 * t, 3 * t + 1, if t == 0 { 0.5 } else { 3.0 });
            edge(3 * t + 1, 3 * t + 2, 3.0);
            edge(3 * t, 3 * t + 2, if t == 0 { 0.5 } else { 3.0 });
        }
        edge(0, 6, 5.0);
        edge(0, 7, 5.0);
        let mut part = vec![0, 0, 0, 1, 1, 1, 2, 2, 2];
        let gained = passes(&g, &[1; 9], &mut part, &full(&[3, 3, 3]), &mut 1);
        assert_eq!(part[0], 2);
        assert_eq!(gained, 9.0);
        assert_eq!(cut(&g, &part), 1.0);
    }
}

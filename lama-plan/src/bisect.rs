//! Recursive bisection over the machine tree: the communication graph is cut in two with a
//! Fiduccia–Mattheyses (Kernighan–Lin style) refinement, each half is given one half of the
//! machine, and both halves recurse until every rank has a slot.
//!
//! The machine tree is the slots' coordinates (network levels, node, the node's levels, the
//! hardware thread; see `coordinates` in the crate root). At a tree vertex with several
//! children, the children are split into two runs of about equal capacity; the ranks are split
//! into two sets sized for them (exactly the capacities when the slots are as many as the
//! ranks, in proportion otherwise), cutting as little volume as possible; each side recurses
//! with its run of children, and a run of one child descends into it. Two initial cuts are
//! tried at every split (rank order, and a breadth-first region grown from a peripheral
//! rank), each refined, and the smaller cut kept. Square tiles of a stencil come out of this
//! by themselves: a strip is never the smaller cut once its length passes its width.

use crate::matrix::CommMatrix;
use std::cmp::Ordering;
use std::collections::{BinaryHeap, VecDeque};

/// Most refinement passes per split; a pass that gains nothing stops earlier.
const MAX_PASSES: usize = 8;

/// Each rank's neighbours with volumes.
pub(crate) type Adjacency = Vec<Vec<(u32, f64)>>;

/// Maps every rank of the matrix to one of the slots (whose tree coordinates are `coords`):
/// returns the slot index of each rank. There must be at least as many slots as ranks.
pub(crate) fn map(matrix: &CommMatrix, near: &Adjacency, coords: &[Vec<u32>]) -> Vec<usize> {
    let np = matrix.ranks() as usize;
    let mut out = vec![usize::MAX; np];
    let mut work = Work {
        near,
        local: vec![u32::MAX; np],
        out: &mut out,
        coords,
    };
    let slots: Vec<usize> = (0..coords.len()).collect();
    let ranks: Vec<u32> = (0..np as u32).collect();
    work.place(ranks, slots, 0);
    out
}

struct Work<'a> {
    near: &'a Adjacency,
    /// Scratch: the local index of a rank in the current split, `u32::MAX` elsewhere.
    local: Vec<u32>,
    out: &'a mut Vec<usize>,
    coords: &'a [Vec<u32>],
}

impl Work<'_> {
    /// Places `ranks` on `slots`, which share their coordinates above `depth`.
    fn place(&mut self, ranks: Vec<u32>, slots: Vec<usize>, depth: usize) {
        if crate::bisect::at_leaf(self.coords, &ranks, &slots, depth, &mut self.out[..]) {
            return;
        }
        let groups = children(self.coords, slots, depth);
        self.split(ranks, groups, depth);
    }

    /// Distributes `ranks` over a run of sibling subtrees (`groups`, at `depth`).
    fn split(&mut self, ranks: Vec<u32>, mut groups: Vec<Vec<usize>>, depth: usize) {
        if groups.len() == 1 {
            let only = groups.pop().unwrap_or_default();
            return self.place(ranks, only, depth + 1);
        }
        let caps: Vec<usize> = groups.iter().map(Vec::len).collect();
        let total: usize = caps.iter().sum();
        // The cut between the two runs: capacities as equal as possible.
        let mut best = (usize::MAX, 1);
        let mut left = 0;
        for (h, &c) in caps.iter().enumerate().take(caps.len() - 1) {
            left += c;
            let diff = left.abs_diff(total - left);
            if diff < best.0 {
                best = (diff, h + 1);
            }
        }
        let h = best.1;
        let cap_a: usize = caps[..h].iter().sum();
        let cap_b = total - cap_a;
        let n = ranks.len();
        // Ranks for each side: in proportion to capacity, within both capacities.
        let want = ((n as f64 * cap_a as f64 / total as f64).round() as usize)
            .clamp(n.saturating_sub(cap_b), cap_a.min(n));
        let (a, b) = self.bisect(&ranks, want);
        let right = groups.split_off(h);
        self.split_or_skip(a, groups, depth);
        self.split_or_skip(b, right, depth);
    }

    fn split_or_skip(&mut self, ranks: Vec<u32>, groups: Vec<Vec<usize>>, depth: usize) {
        if !ranks.is_empty() {
            self.split(ranks, groups, depth);
        }
    }

    /// Splits `ranks` into a side of `want` ranks and the rest, cutting little volume.
    fn bisect(&mut self, ranks: &[u32], want: usize) -> (Vec<u32>, Vec<u32>) {
        let n = ranks.len();
        if want == 0 || want == n {
            return if want == 0 {
                (Vec::new(), ranks.to_vec())
            } else {
                (ranks.to_vec(), Vec::new())
            };
        }
        let graph = induced(self.near, ranks, &mut self.local);
        let mut best: Option<(f64, Vec<bool>)> = None;
        for mut side in [in_order(n, want), grown(&graph, want)] {
            let cut = refine(&graph, &mut side, want);
            if best.as_ref().is_none_or(|(c, _)| cut < *c) {
                best = Some((cut, side));
            }
        }
        let side = best.map(|(_, s)| s).unwrap_or_else(|| in_order(n, want));
        sides(ranks, &side)
    }
}

/// The graph among `ranks` (local indexes in the order given) from their neighbours `near`;
/// `local` is scratch of one entry per rank, `u32::MAX` outside a call.
pub(crate) fn induced(
    near: &[Vec<(u32, f64)>],
    ranks: &[u32],
    local: &mut [u32],
) -> Vec<Vec<(usize, f64)>> {
    for (i, &r) in ranks.iter().enumerate() {
        local[r as usize] = i as u32;
    }
    let graph = ranks
        .iter()
        .map(|&r| {
            near[r as usize]
                .iter()
                .filter_map(|&(j, v)| {
                    let l = local[j as usize];
                    (l != u32::MAX).then_some((l as usize, v))
                })
                .collect()
        })
        .collect();
    for &r in ranks {
        local[r as usize] = u32::MAX;
    }
    graph
}

/// `ranks` on side A (`side[i]`) and the rest, each in order.
pub(crate) fn sides(ranks: &[u32], side: &[bool]) -> (Vec<u32>, Vec<u32>) {
    let (mut a, mut b) = (Vec::new(), Vec::new());
    for (&r, &on_a) in ranks.iter().zip(side) {
        if on_a {
            a.push(r);
        } else {
            b.push(r);
        }
    }
    (a, b)
}

/// Whether `ranks` need no more splitting (none left, one slot, or the bottom of the tree at
/// `depth`); where they do not, each is placed on its slot in order (in `out`). Shared by the
/// tree walks (the bisection, the multisection, the stencil path).
pub(crate) fn at_leaf(
    coords: &[Vec<u32>],
    ranks: &[u32],
    slots: &[usize],
    depth: usize,
    out: &mut [usize],
) -> bool {
    if ranks.is_empty() {
        return true;
    }
    if slots.len() == 1 || depth >= coords[slots[0]].len() {
        for (&r, &s) in ranks.iter().zip(slots) {
            out[r as usize] = s;
        }
        return true;
    }
    false
}

/// The children at `depth` of the tree vertex that holds `slots` (slots whose coordinates
/// agree above `depth`), in coordinate order, each with its slots in order.
pub(crate) fn children(
    coords: &[Vec<u32>],
    mut slots: Vec<usize>,
    depth: usize,
) -> Vec<Vec<usize>> {
    slots.sort_by_key(|&s| (coords[s][depth], s));
    let mut out: Vec<(u32, Vec<usize>)> = Vec::new();
    for s in slots {
        let c = coords[s][depth];
        match out.last_mut() {
            Some((k, v)) if *k == c => v.push(s),
            _ => out.push((c, vec![s])),
        }
    }
    out.into_iter().map(|(_, v)| v).collect()
}

/// The first `want` vertices (in rank order) on side A.
fn in_order(n: usize, want: usize) -> Vec<bool> {
    (0..n).map(|i| i < want).collect()
}

/// A breadth-first region of `want` vertices grown from a peripheral vertex (the last one
/// reached from vertex 0); further components are entered at their lowest vertex.
fn grown(graph: &[Vec<(usize, f64)>], want: usize) -> Vec<bool> {
    let n = graph.len();
    let far = bfs_order(graph, 0).last().copied().unwrap_or(0);
    let mut side = vec![false; n];
    for v in bfs_order(graph, far).into_iter().take(want) {
        side[v] = true;
    }
    side
}

/// Every vertex, breadth first from `start`, then from each unreached vertex in order.
fn bfs_order(graph: &[Vec<(usize, f64)>], start: usize) -> Vec<usize> {
    let n = graph.len();
    let mut seen = vec![false; n];
    let mut order = Vec::with_capacity(n);
    let mut queue = VecDeque::new();
    for root in std::iter::once(start).chain(0..n) {
        if seen[root] {
            continue;
        }
        seen[root] = true;
        queue.push_back(root);
        while let Some(v) = queue.pop_front() {
            order.push(v);
            for &(w, _) in &graph[v] {
                if !seen[w] {
                    seen[w] = true;
                    queue.push_back(w);
                }
            }
        }
    }
    order
}

/// A gain in the heap (largest first, then the lowest vertex, for determinism).
#[derive(PartialEq)]
pub(crate) struct Gain(pub(crate) f64, pub(crate) usize);

impl Eq for Gain {}

impl PartialOrd for Gain {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Gain {
    fn cmp(&self, other: &Self) -> Ordering {
        self.0.total_cmp(&other.0).then(other.1.cmp(&self.1))
    }
}

/// The volume cut by `side` (a side or a part of each vertex).
pub(crate) fn cut_of<T: PartialEq>(graph: &[Vec<(usize, f64)>], side: &[T]) -> f64 {
    let mut cut = 0.0;
    for (v, edges) in graph.iter().enumerate() {
        for &(w, x) in edges {
            if v < w && side[v] != side[w] {
                cut += x;
            }
        }
    }
    cut
}

/// Fiduccia–Mattheyses passes that keep side A at exactly `want` vertices between moves of
/// one vertex each way: every vertex moves at most once per pass, the best balanced prefix of
/// the moves is kept. Returns the final cut.
pub(crate) fn refine(graph: &[Vec<(usize, f64)>], side: &mut [bool], want: usize) -> f64 {
    refine_weighted(graph, &vec![1; graph.len()], side, want)
}

/// [`refine`] on vertices of the given weights (a coarsened graph's, each the count of ranks
/// it stands for): side A's weight is `want` in every prefix of moves kept, so the split it
/// gives back has exactly the sizes it was given (a pass that never comes back to `want` keeps
/// none of its moves).
pub(crate) fn refine_weighted(
    graph: &[Vec<(usize, f64)>],
    weight: &[u32],
    side: &mut [bool],
    want: usize,
) -> f64 {
    let n = graph.len();
    let mut gain = vec![0.0f64; n];
    for _ in 0..MAX_PASSES {
        for (v, edges) in graph.iter().enumerate() {
            gain[v] = edges
                .iter()
                .map(|&(w, x)| if side[w] != side[v] { x } else { -x })
                .sum();
        }
        let mut heaps = [BinaryHeap::new(), BinaryHeap::new()];
        for v in 0..n {
            heaps[side[v] as usize].push(Gain(gain[v], v));
        }
        let mut locked = vec![false; n];
        let mut size_a: usize = (0..n)
            .filter(|&v| side[v])
            .map(|v| weight[v] as usize)
            .sum();
        let mut moves: Vec<usize> = Vec::new();
        let (mut running, mut best, mut best_at) = (0.0f64, 0.0f64, 0usize);
        let mut since_best = 0usize;
        loop {
            // Move from A when it is full or larger, from B when smaller; when balanced, from
            // the side with the better top gain.
            let top = |h: &mut BinaryHeap<Gain>, gain: &[f64], locked: &[bool]| -> Option<f64> {
                while let Some(Gain(g, v)) = h.peek() {
                    if locked[*v] || *g != gain[*v] {
                        h.pop();
                    } else {
                        return Some(*g);
                    }
                }
                None
            };
            let ga = top(&mut heaps[1], &gain, &locked);
            let gb = top(&mut heaps[0], &gain, &locked);
            let from_a = match size_a.cmp(&want) {
                Ordering::Greater => true,
                Ordering::Less => false,
                Ordering::Equal => match (ga, gb) {
                    (Some(a), Some(b)) => a >= b,
                    (Some(_), None) => true,
                    _ => false,
                },
            };
            let Some(Gain(g, v)) = heaps[from_a as usize].pop() else {
                break;
            };
            locked[v] = true;
            side[v] = !side[v];
            if from_a {
                size_a -= weight[v] as usize;
            } else {
                size_a += weight[v] as usize;
            }
            running += g;
            moves.push(v);
            for &(w, x) in &graph[v] {
                if !locked[w] {
                    // v changed side: an edge to w that was cut is now inside, or the reverse.
                    gain[w] += if side[w] == side[v] {
                        -2.0 * x
                    } else {
                        2.0 * x
                    };
                    heaps[side[w] as usize].push(Gain(gain[w], w));
                }
            }
            if size_a == want && running > best + 1e-12 {
                best = running;
                best_at = moves.len();
                since_best = 0;
            } else {
                since_best += 1;
                // Long runs without a better balanced state rarely end in one.
                if since_best > 64 + n / 8 {
                    break;
                }
            }
        }
        for &v in &moves[best_at..] {
            side[v] = !side[v];
        }
        if best <= 1e-12 {
            break;
        }
    }
    cut_of(graph, side)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::matrix::patterns;

    fn adjacency(m: &CommMatrix) -> Adjacency {
        let mut n = vec![Vec::new(); m.ranks() as usize];
        for &(i, j, v) in m.pairs() {
            n[i as usize].push((j, v));
            n[j as usize].push((i, v));
        }
        n
    }

    #[test]
    fn a_grid_is_cut_across_its_short_side() {
        // An 8 x 4 grid (rank = y * 8 + x) into two halves of 16: the straight cut between
        // x = 3 and x = 4 crosses 4 edges; cutting by rank order (y < 2) would cross 8.
        let m = patterns::stencil_2d(8, 4);
        let g: Vec<Vec<(usize, f64)>> = adjacency(&m)
            .into_iter()
            .map(|e| e.into_iter().map(|(j, v)| (j as usize, v)).collect())
            .collect();
        let mut side = in_order(32, 16);
        assert_eq!(cut_of(&g, &side), 8.0);
        let cut = refine(&g, &mut side, 16);
        assert_eq!(cut, 4.0);
        assert_eq!(side.iter().filter(|&&s| s).count(), 16);
        let mut grown_side = grown(&g, 16);
        assert_eq!(refine(&g, &mut grown_side, 16), 4.0);
    }

    #[test]
    fn every_rank_gets_its_own_slot_and_tiles_come_out_square() {
        // 16 slots as 4 nodes x 4 cores (coordinates [node, core]); a 4 x 4 grid. Block order
        // puts one row per node (cut 12 edges between nodes); square 2 x 2 tiles cut 8.
        let coords: Vec<Vec<u32>> = (0..16).map(|s| vec![s / 4, s % 4]).collect();
        let m = patterns::stencil_2d(4, 4);
        let slots = map(&m, &adjacency(&m), &coords);
        let mut seen = slots.clone();
        seen.sort_unstable();
        seen.dedup();
        assert_eq!(seen.len(), 16);
        let between_nodes = m
            .pairs()
            .iter()
            .filter(|&&(i, j, _)| slots[i as usize] / 4 != slots[j as usize] / 4)
            .count();
        assert_eq!(between_nodes, 8);
    }

    #[test]
    fn fewer_ranks_than_slots_spread_in_proportion() {
        // 6 ranks on 2 nodes of 4 slots: 3 per node.
        let coords: Vec<Vec<u32>> = (0..8).map(|s| vec![s / 4, s % 4]).collect();
        let m = patterns::ring(6);
        let slots = map(&m, &adjacency(&m), &coords);
        assert_eq!(slots.iter().filter(|&&s| s < 4).count(), 3);
        assert!(slots.iter().all(|&s| s < 8));
    }
}

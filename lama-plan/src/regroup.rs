//! Refinement of a candidate's placement by moving groups of ranks together, each move made
//! only where the model's cost falls: the ranks of two whole nodes in different leaf switches
//! (`node_swaps`), a re-split of two nodes of one switch (`pair_refine`), a rank's close
//! partners with another group's places (`group_swaps`), two packages' or NUMA nodes' ranks
//! (`object_swaps`). The swaps of two ranks (`refine`) come after.
//!
//! The rank-by-rank swaps cannot leave a placement where a group of heavy talkers is cut at a
//! switch in whole nodes: moving one rank of such a node to its partners' switch costs more
//! than it saves. Moving the node's ranks together can save: with clustered traffic of
//! 240-rank groups on leaf switches of 504 cores, a multisection that cuts three groups at the
//! switches (some into a large piece and several single nodes) becomes one that cuts two, each
//! into single nodes, by a few such exchanges.
//!
//! Only nodes of one shape exchange whole (equal geometry and the same free PUs), so that each
//! rank takes the slot of the other node at the same position and every distance inside the
//! two nodes is what it was; between nodes the model charges by leaf switch alone
//! ([`System::distance`]), so exchanging two nodes changes only their traffic with other
//! nodes, computed from each node's volume to each leaf switch. The other moves price every
//! edge of the ranks that move (`exchange_change`).

use crate::bisect::Adjacency;
use crate::cost::{Spot, System};

/// Most passes over the nodes.
const MAX_PASSES: usize = 16;
/// Largest table of each node's volume to each leaf switch (nodes x switches) built; a bigger
/// system is left as it is.
const MAX_TABLE: usize = 1 << 24;

/// Improves `assign` (the slot of each rank; `spots[s]` is slot `s`'s place, slots listed node
/// by node) by exchanging the ranks of whole nodes; returns how many exchanges it made.
pub(crate) fn node_swaps(
    near: &Adjacency,
    system: &System<'_>,
    spots: &[Spot],
    assign: &mut [usize],
) -> usize {
    let d = system.distances();
    if d.farther <= d.switch {
        return 0;
    }
    let Some(mut state) = State::new(near, system, spots, assign) else {
        return 0;
    };
    until_settled(|made| {
        for a in 0..state.nodes.len() {
            if let Some(b) = state.best_partner(a) {
                state.exchange(a, b, assign);
                *made += 1;
            }
        }
        true
    })
}

/// Runs `pass` (which adds the moves it makes to the count it is given, and returns false when
/// its budget is spent) until a pass makes none, at most [`MAX_PASSES`] times; returns the
/// count.
fn until_settled(mut pass: impl FnMut(&mut usize) -> bool) -> usize {
    let mut made = 0;
    for _ in 0..MAX_PASSES {
        let before = made;
        if !pass(&mut made) || made == before {
            break;
        }
    }
    made
}

/// Improves `assign` by exchanging, slot for slot, the ranks of two objects of one level
/// (packages, NUMA nodes, caches) with as many slots in one node, where that lowers the cost
/// (computed exactly, over every edge of the ranks that move); returns how many exchanges it
/// made. This moves groups that a rank-by-rank swap cannot: a group split over two NUMA nodes
/// trades places with another as a whole.
pub(crate) fn object_swaps(
    near: &Adjacency,
    system: &System<'_>,
    spots: &[Spot],
    assign: &mut [usize],
    budget: &mut Budget,
) -> usize {
    let pairs = object_pairs(system, spots);
    let mut occupant = occupants(spots.len(), assign);
    let mut moving = vec![usize::MAX; assign.len()];
    until_settled(|made| {
        for (a, b) in &pairs {
            if !budget.spend(2 * a.len()) {
                return false;
            }
            let change = exchange_change(near, system, spots, assign, &occupant, &mut moving, a, b);
            if change < 0.0 {
                trade(a, b, &mut occupant, assign);
                *made += 1;
            }
        }
        true
    })
}

/// What each kind of exchange may spend on one candidate, in edges looked at (about 0.01 s);
/// each stops when its budget is spent.
const BUDGET: u64 = 1_000_000;

/// Budgets the pair refinement gets: on a partial allocation with clustered traffic it is what
/// gathers each group on the nodes it fills, pair after pair (against KaHIP's multisection on
/// 1,408 ranks in groups of 176, BENCHMARKS.md: +0.8 % with 4, -0.04 % with 16).
pub(crate) const PAIR_BUDGETS: u64 = 16;

/// The edges the exchanges of one candidate may still look at.
pub(crate) struct Budget {
    left: u64,
    /// Edges per rank, on average: the price of looking at one rank's edges.
    per_rank: u64,
}

impl Budget {
    /// The budget of one candidate on the graph `near`.
    pub(crate) fn new(near: &Adjacency) -> Budget {
        let arcs: usize = near.iter().map(Vec::len).sum();
        Budget {
            left: BUDGET,
            per_rank: (arcs / near.len().max(1)) as u64 + 1,
        }
    }

    /// This budget `k` times over.
    pub(crate) fn times(self, k: u64) -> Budget {
        Budget {
            left: self.left * k,
            ..self
        }
    }

    /// Spends the price of looking at `ranks` ranks' edges; false once nothing is left.
    fn spend(&mut self, ranks: usize) -> bool {
        self.spend_edges(ranks as u64 * self.per_rank)
    }

    /// Spends the price of looking at `edges` edges; false once nothing is left.
    fn spend_edges(&mut self, edges: u64) -> bool {
        self.left = self.left.saturating_sub(edges);
        self.left > 0
    }
}

/// Objects of one level exchange across nodes where the system has at most this many of them
/// (within each node otherwise).
const ACROSS_NODES: usize = 64;

/// Improves `assign` by moving a rank's close partners on its node together: the ranks at
/// those positions trade places with the ranks at the same positions of another node of the
/// same shape, where that lowers the cost (exactly). A rank's close partners are those whose
/// volume with it is at least half its heaviest. With groups of heavy talkers that share nodes,
/// this trades whole groups between nodes, which neither a swap of two ranks nor an exchange
/// of whole nodes or objects does. Returns how many exchanges it made.
pub(crate) fn group_swaps(
    near: &Adjacency,
    system: &System<'_>,
    spots: &[Spot],
    assign: &mut [usize],
    budget: &mut Budget,
) -> usize {
    let by_node = node_slots(spots);
    let shape = shapes(system, spots, &by_node);
    let position = positions(&by_node, spots.len());
    let mut occupant = occupants(spots.len(), assign);
    let mut moving = vec![usize::MAX; assign.len()];
    until_settled(|made| {
        for r in 0..assign.len() as u32 {
            let a = spots[assign[r as usize]].0 as usize;
            let at = partner_places(near, spots, assign, &position, r);
            // A whole node is the node exchanges' work; a group is tried once a pass, from
            // the rank at its first place.
            if at.len() == by_node[a].len() || at[0] != position[assign[r as usize]] {
                continue;
            }
            let from: Vec<usize> = at.iter().map(|&k| by_node[a][k]).collect();
            let mut nodes = targets(near, spots, assign, &occupant, &from, |b| {
                shape[b] == shape[a]
            });
            if !nodes.contains(&a) {
                nodes.push(a);
            }
            'nodes: for b in nodes {
                // The same places on another node b, and each group of partners on b as large.
                if !budget.spend(by_node[b].len()) {
                    return false;
                }
                let mut tries: Vec<Vec<usize>> = vec![];
                if b != a {
                    tries.push(at.iter().map(|&k| by_node[b][k]).collect());
                }
                for there in
                    groups_as_large(near, spots, assign, &occupant, &position, &by_node[b], &at)
                {
                    tries.push(there.iter().map(|&k| by_node[b][k]).collect());
                }
                for to in tries {
                    if !budget.spend(2 * from.len()) {
                        return false;
                    }
                    let change = exchange_change(
                        near,
                        system,
                        spots,
                        assign,
                        &occupant,
                        &mut moving,
                        &from,
                        &to,
                    );
                    if change < 0.0 {
                        trade(&from, &to, &mut occupant, assign);
                        *made += 1;
                        break 'nodes;
                    }
                }
            }
        }
        true
    })
}

/// Improves `assign` by Fiduccia–Mattheyses passes between two nodes of one leaf switch that
/// exchange traffic, the most connected pairs first: their ranks are split again between them
/// (the bisection's refinement, on the graph of the two nodes' ranks), each node keeping its
/// count, or the first filled, or the second (where the ranks are fewer than the slots, a group
/// gathers on the nodes it fills); ranks that change node take the slots of those that went
/// the other way, or free ones. Between nodes of one leaf switch, where a rank is on either
/// node changes nothing of its traffic with other nodes, so the cut between the two is what the
/// move changes at the node level; each result is kept only where the exact cost is lower.
/// This reaches the k-way cuts that the bisection's splits, each refined alone, miss on
/// irregular traffic. Returns how many pairs of nodes changed.
pub(crate) fn pair_refine(
    near: &Adjacency,
    system: &System<'_>,
    spots: &[Spot],
    assign: &mut [usize],
    budget: &mut Budget,
) -> usize {
    let by_node = node_slots(spots);
    let leaf = system.leaf_switches();
    let mut occupant = occupants(spots.len(), assign);
    let mut moving = vec![usize::MAX; assign.len()];
    let mut local = vec![u32::MAX; assign.len()];
    until_settled(|made| {
        // The pairs of one leaf switch that exchange traffic, the most first (where the
        // budget ends, the pairs that matter most have been refined).
        let between = blocks_between(near, spots, assign, by_node.len());
        let mut pairs: Vec<(f64, usize, usize)> = Vec::new();
        for (a, row) in between.iter().enumerate() {
            let same = |b: usize| b > a && leaf[b] == leaf[a];
            pairs.extend(row.iter().filter(|e| same(e.0)).map(|&(b, v)| (v, a, b)));
        }
        pairs.sort_by(|x, y| y.0.total_cmp(&x.0).then((x.1, x.2).cmp(&(y.1, y.2))));
        for (_, a, b) in pairs {
            let pair = Pair {
                a: &by_node[a],
                b: &by_node[b],
                occupant: &occupant,
                near,
                system,
                spots,
            };
            let re = pair.best_split(assign, &mut moving, &mut local, budget);
            if budget.left == 0 {
                return false;
            }
            if let Some((from, to)) = re {
                trade(&from, &to, &mut occupant, assign);
                *made += 1;
            }
        }
        true
    })
}

/// Two nodes' slots, for [`pair_refine`].
struct Pair<'a> {
    a: &'a [usize],
    b: &'a [usize],
    occupant: &'a [Option<u32>],
    near: &'a Adjacency,
    system: &'a System<'a>,
    spots: &'a [Spot],
}

impl Pair<'_> {
    /// The cheapest new split of the two nodes' ranks, as the slots that trade places (`from[i]`
    /// with `to[i]`, a free slot where the counts change), if one lowers the cost: the
    /// Fiduccia–Mattheyses refinement with node a keeping its count, or filled, or leaving
    /// node b filled (so that a group of partners can gather on the fuller node where the
    /// ranks are fewer than the slots).
    fn best_split(
        &self,
        assign: &[usize],
        moving: &mut [usize],
        local: &mut [u32],
        budget: &mut Budget,
    ) -> Option<(Vec<usize>, Vec<usize>)> {
        let held = |slots: &[usize]| -> Vec<u32> {
            slots.iter().filter_map(|&s| self.occupant[s]).collect()
        };
        let (on_a, on_b) = (held(self.a), held(self.b));
        let ranks: Vec<u32> = on_a.iter().chain(&on_b).copied().collect();
        // The graph (every edge of the ranks looked at), then three refinements of up to
        // eight passes, and the exact price of each result (the moving ranks' edges).
        let (near, system, spots) = (self.near, self.system, self.spots);
        let graph = crate::bisect::induced(near, &ranks, local);
        let inside: usize = graph.iter().map(Vec::len).sum();
        if !budget.spend(2 * ranks.len()) || !budget.spend_edges(24 * inside as u64) {
            return None;
        }
        let start: Vec<bool> = (0..ranks.len()).map(|i| i < on_a.len()).collect();
        let total = ranks.len();
        let mut wants = vec![
            on_a.len(),
            self.a.len().min(total),
            total - self.b.len().min(total),
        ];
        wants.sort_unstable();
        wants.dedup();
        let mut best: Option<(f64, Vec<usize>, Vec<usize>)> = None;
        for want in wants {
            let mut side = start.clone();
            crate::bisect::refine(&graph, &mut side, want);
            if side.iter().filter(|&&x| x).count() != want {
                continue;
            }
            let (from, to) = self.moves(&ranks, &start, &side, assign);
            if from.is_empty() {
                continue;
            }
            let change = exchange_change(
                near,
                system,
                spots,
                assign,
                self.occupant,
                moving,
                &from,
                &to,
            );
            if change < 0.0 && best.as_ref().is_none_or(|b| change < b.0) {
                best = Some((change, from, to));
            }
        }
        best.map(|(_, from, to)| (from, to))
    }

    /// The slots that trade places for the ranks to go from `start` (on node a where true) to
    /// `side`: a rank leaving a with one leaving b, then the rest with free slots.
    fn moves(
        &self,
        ranks: &[u32],
        start: &[bool],
        side: &[bool],
        assign: &[usize],
    ) -> (Vec<usize>, Vec<usize>) {
        let leaving = |from_a: bool| -> Vec<usize> {
            (0..ranks.len())
                .filter(|&i| start[i] == from_a && side[i] != from_a)
                .map(|i| assign[ranks[i] as usize])
                .collect()
        };
        let free = |slots: &[usize]| -> Vec<usize> {
            slots
                .iter()
                .copied()
                .filter(|&s| self.occupant[s].is_none())
                .collect()
        };
        let (to_b, to_a) = (leaving(true), leaving(false));
        let both = to_b.len().min(to_a.len());
        let mut from: Vec<usize> = to_b[..both].to_vec();
        let mut to: Vec<usize> = to_a[..both].to_vec();
        for (&s, f) in to_b[both..].iter().zip(free(self.b)) {
            from.push(s);
            to.push(f);
        }
        for (&s, f) in to_a[both..].iter().zip(free(self.a)) {
            from.push(s);
            to.push(f);
        }
        (from, to)
    }
}

/// The places of each group of close partners on the node of `slots` with as many places as
/// `at` (other than `at`), each group once.
fn groups_as_large(
    near: &Adjacency,
    spots: &[Spot],
    assign: &[usize],
    occupant: &[Option<u32>],
    position: &[usize],
    slots: &[usize],
    at: &[usize],
) -> Vec<Vec<usize>> {
    let mut out = Vec::new();
    for &s in slots {
        let Some(q) = occupant[s] else { continue };
        let there = partner_places(near, spots, assign, position, q);
        // Each group from its first place only.
        if there.len() == at.len() && there[0] == position[s] && there != at {
            out.push(there);
        }
    }
    out
}

/// The places (positions on its node) of rank `r` and of its close partners on that node: those
/// whose volume with it is at least half its heaviest; sorted.
fn partner_places(
    near: &Adjacency,
    spots: &[Spot],
    assign: &[usize],
    position: &[usize],
    r: u32,
) -> Vec<usize> {
    let node = |z: u32| spots[assign[z as usize]].0;
    let heaviest = near[r as usize].iter().map(|e| e.1).fold(0.0, f64::max);
    let mut at: Vec<usize> = near[r as usize]
        .iter()
        .filter(|&&(z, v)| v >= heaviest / 2.0 && node(z) == node(r))
        .map(|&(z, _)| position[assign[z as usize]])
        .chain([position[assign[r as usize]]])
        .collect();
    at.sort_unstable();
    at
}

/// The nodes (that `fits` takes) where the other partners of the ranks on `slots` are.
fn targets(
    near: &Adjacency,
    spots: &[Spot],
    assign: &[usize],
    occupant: &[Option<u32>],
    slots: &[usize],
    fits: impl Fn(usize) -> bool,
) -> Vec<usize> {
    let mut out: Vec<usize> = slots
        .iter()
        .filter_map(|&s| occupant[s])
        .flat_map(|q| near[q as usize].iter())
        .map(|&(z, _)| spots[assign[z as usize]].0 as usize)
        .filter(|&b| fits(b))
        .collect();
    out.sort_unstable();
    out.dedup();
    out
}

/// The rank on each slot.
fn occupants(slots: usize, assign: &[usize]) -> Vec<Option<u32>> {
    let mut occupant = vec![None; slots];
    for (r, &s) in assign.iter().enumerate() {
        occupant[s] = Some(r as u32);
    }
    occupant
}

/// The ranks of slots `a` and `b` trade places, position for position.
fn trade(a: &[usize], b: &[usize], occupant: &mut [Option<u32>], assign: &mut [usize]) {
    for (&x, &y) in a.iter().zip(b) {
        occupant.swap(x, y);
        for s in [x, y] {
            if let Some(r) = occupant[s] {
                assign[r as usize] = s;
            }
        }
    }
}

/// The position of each of `count` slots in its node's list.
fn positions(by_node: &[Vec<usize>], count: usize) -> Vec<usize> {
    let mut position = vec![0; count];
    for slots in by_node {
        for (k, &s) in slots.iter().enumerate() {
            position[s] = k;
        }
    }
    position
}

/// Each node's slots, in slot order.
fn node_slots(spots: &[Spot]) -> Vec<Vec<usize>> {
    let mut by_node: Vec<Vec<usize>> = Vec::new();
    for (s, &(n, _)) in spots.iter().enumerate() {
        let n = n as usize;
        if by_node.len() <= n {
            by_node.resize(n + 1, Vec::new());
        }
        by_node[n].push(s);
    }
    by_node
}

/// Pairs of objects of one level in one node with as many slots: each object's slots, in
/// slot order.
fn object_pairs(system: &System<'_>, spots: &[Spot]) -> Vec<(Vec<usize>, Vec<usize>)> {
    let by_node = node_slots(spots);
    // Each level's objects, over all nodes: (node, slots).
    let mut levels: Vec<Vec<(usize, Vec<usize>)>> = vec![Vec::new(); crate::cost::LEVELS.len()];
    for (n, slots) in by_node.iter().enumerate() {
        let g = system.geometry(n);
        for (k, level) in levels.iter_mut().enumerate() {
            let mut objects: Vec<(u32, Vec<usize>)> = Vec::new();
            for &s in slots {
                let Some(o) = g.object(spots[s].1, k) else {
                    continue;
                };
                match objects.iter_mut().find(|(id, _)| *id == o) {
                    Some((_, list)) => list.push(s),
                    None => objects.push((o, vec![s])),
                }
            }
            if objects.len() > 1 {
                level.extend(objects.into_iter().map(|(_, list)| (n, list)));
            }
        }
    }
    let mut pairs = Vec::new();
    for objects in &levels {
        // Objects of one node are listed together: pairs across nodes only on small systems.
        let mut start = 0;
        while start < objects.len() {
            let node = objects[start].0;
            let end = match objects.len() <= ACROSS_NODES {
                true => objects.len(),
                false => start + objects[start..].iter().take_while(|o| o.0 == node).count(),
            };
            for (i, (_, a)) in objects[start..end].iter().enumerate() {
                for (_, b) in &objects[start + i + 1..end] {
                    // One slot each: a swap of two ranks, which `refine` tries.
                    if a.len() == b.len() && a.len() > 1 {
                        pairs.push((a.clone(), b.clone()));
                    }
                }
            }
            start = end;
        }
    }
    pairs
}

/// How much the cost changes when the ranks of slots `a` and `b` trade places, position for
/// position: every edge of a moving rank priced before and after.
#[allow(clippy::too_many_arguments)]
fn exchange_change(
    near: &Adjacency,
    system: &System<'_>,
    spots: &[Spot],
    assign: &[usize],
    occupant: &[Option<u32>],
    moving: &mut [usize],
    a: &[usize],
    b: &[usize],
) -> f64 {
    let mut to = Vec::with_capacity(2 * a.len());
    for (&x, &y) in a.iter().zip(b) {
        to.extend(occupant[x].map(|r| (r, y)));
        to.extend(occupant[y].map(|r| (r, x)));
    }
    for &(r, slot) in &to {
        moving[r as usize] = slot;
    }
    // Where a rank is after the exchange.
    let new_slot = |z: u32| match moving[z as usize] {
        usize::MAX => assign[z as usize],
        slot => slot,
    };
    let mut change = 0.0;
    let mut scale: f64 = 0.0;
    for &(r, now) in &to {
        for &(z, v) in &near[r as usize] {
            // An edge between two moving ranks is counted from its lower end only.
            if moving[z as usize] != usize::MAX && z < r {
                continue;
            }
            let old = v * system.distance(spots[assign[r as usize]], spots[assign[z as usize]]);
            change += v * system.distance(spots[now], spots[new_slot(z)]) - old;
            scale = scale.max(old);
        }
    }
    for &(r, _) in &to {
        moving[r as usize] = usize::MAX;
    }
    if change < -1e-9 * scale.max(1.0) {
        change
    } else {
        0.0
    }
}

/// A node's slots and where it sits.
struct Node {
    slots: Vec<usize>,
    leaf: usize,
    /// Nodes of one shape have one number.
    shape: usize,
}

struct State {
    nodes: Vec<Node>,
    /// The nodes under each leaf switch.
    under: Vec<Vec<usize>>,
    /// The block of ranks on each node (a block is the ranks a node held at the start).
    block_at: Vec<usize>,
    members: Vec<Vec<u32>>,
    /// Volume between blocks, each block's row sorted by block.
    between: Vec<Vec<(usize, f64)>>,
    /// Each block's volume to each leaf switch's ranks (outside itself), `block * leaves + leaf`.
    to_leaf: Vec<f64>,
    leaves: usize,
    /// Position of each slot in its node's list.
    position: Vec<usize>,
    /// Scratch: the volume of the block being moved with each block.
    row: Vec<f64>,
}

impl State {
    fn new(
        near: &Adjacency,
        system: &System<'_>,
        spots: &[Spot],
        assign: &[usize],
    ) -> Option<State> {
        let leaf_of = system.leaf_switches();
        let count = spots.iter().map(|s| s.0 as usize + 1).max()?;
        let leaves = leaf_of.iter().max()? + 1;
        if leaves < 2 || count.checked_mul(leaves)? > MAX_TABLE || count > leaf_of.len() {
            return None;
        }
        let mut by_node = node_slots(spots);
        by_node.resize(count, Vec::new());
        let shape = shapes(system, spots, &by_node);
        let position = positions(&by_node, spots.len());
        let nodes: Vec<Node> = by_node
            .into_iter()
            .enumerate()
            .map(|(n, slots)| Node {
                slots,
                leaf: leaf_of[n],
                shape: shape[n],
            })
            .collect();
        let mut under = vec![Vec::new(); leaves];
        for (n, node) in nodes.iter().enumerate() {
            under[node.leaf].push(n);
        }
        let mut members = vec![Vec::new(); count];
        for (r, &s) in assign.iter().enumerate() {
            members[spots[s].0 as usize].push(r as u32);
        }
        let between = blocks_between(near, spots, assign, count);
        let mut to_leaf = vec![0.0; count * leaves];
        for (x, row) in between.iter().enumerate() {
            for &(y, v) in row {
                to_leaf[x * leaves + nodes[y].leaf] += v;
            }
        }
        Some(State {
            nodes,
            under,
            block_at: (0..count).collect(),
            members,
            between,
            to_leaf,
            leaves,
            position,
            row: vec![0.0; count],
        })
    }

    /// The node of another leaf switch whose exchange with node `a` saves the most, if any
    /// saves.
    fn best_partner(&mut self, a: usize) -> Option<usize> {
        let x = self.block_at[a];
        let l = self.leaves;
        let from = self.nodes[a].leaf;
        let stay = self.to_leaf[x * l + from];
        for &(y, v) in &self.between[x] {
            self.row[y] = v;
        }
        let mut best: Option<(f64, usize)> = None;
        for to in 0..l {
            // Only where the block has more partners than at home can an exchange save.
            if to == from || self.to_leaf[x * l + to] <= stay {
                continue;
            }
            for &b in &self.under[to] {
                if self.nodes[b].shape != self.nodes[a].shape {
                    continue;
                }
                let y = self.block_at[b];
                let w = self.row[y];
                // Volume that moves from the farther distance to the switch's, less the volume
                // that moves the other way.
                let gain = self.to_leaf[x * l + to] + self.to_leaf[y * l + from]
                    - stay
                    - self.to_leaf[y * l + to]
                    - 2.0 * w;
                let scale = stay.max(self.to_leaf[x * l + to]).max(1.0);
                if gain > 1e-9 * scale && best.is_none_or(|(g, _)| gain > g) {
                    best = Some((gain, b));
                }
            }
        }
        for &(y, _) in &self.between[x] {
            self.row[y] = 0.0;
        }
        best.map(|(_, b)| b)
    }

    /// Exchanges the ranks of nodes `a` and `b`, slot for slot.
    fn exchange(&mut self, a: usize, b: usize, assign: &mut [usize]) {
        let (x, y) = (self.block_at[a], self.block_at[b]);
        let (la, lb) = (self.nodes[a].leaf, self.nodes[b].leaf);
        let l = self.leaves;
        for (block, from, to) in [(x, la, lb), (y, lb, la)] {
            for &(z, v) in &self.between[block] {
                self.to_leaf[z * l + from] -= v;
                self.to_leaf[z * l + to] += v;
            }
        }
        for (block, to) in [(x, b), (y, a)] {
            for &r in &self.members[block] {
                let k = self.position[assign[r as usize]];
                assign[r as usize] = self.nodes[to].slots[k];
            }
        }
        self.block_at.swap(a, b);
    }
}

/// Numbers the nodes' shapes: nodes with equal geometry and the same PUs as slots share one.
fn shapes(system: &System<'_>, spots: &[Spot], by_node: &[Vec<usize>]) -> Vec<usize> {
    let pus: Vec<Vec<u32>> = by_node
        .iter()
        .map(|slots| slots.iter().map(|&s| spots[s].1).collect())
        .collect();
    let mut seen: Vec<usize> = Vec::new();
    let mut shape = Vec::with_capacity(by_node.len());
    for n in 0..by_node.len() {
        let same = |m: usize| system.geometry(m) == system.geometry(n) && pus[m] == pus[n];
        shape.push(match seen.iter().position(|&m| same(m)) {
            Some(k) => k,
            None => {
                seen.push(n);
                seen.len() - 1
            }
        });
    }
    shape
}

/// The volume between the ranks of each pair of nodes (each node's row sorted by node).
fn blocks_between(
    near: &Adjacency,
    spots: &[Spot],
    assign: &[usize],
    count: usize,
) -> Vec<Vec<(usize, f64)>> {
    let node = |r: u32| spots[assign[r as usize]].0 as usize;
    let mut rows: Vec<Vec<(usize, f64)>> = vec![Vec::new(); count];
    for (r, edges) in near.iter().enumerate() {
        let x = node(r as u32);
        for &(j, v) in edges {
            let y = node(j);
            if y != x {
                rows[x].push((y, v));
            }
        }
    }
    for row in &mut rows {
        row.sort_by_key(|e| e.0);
        row.dedup_by(|later, kept| {
            let same = later.0 == kept.0;
            if same {
                kept.1 += later.1;
            }
            same
        });
    }
    rows
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cost::Distances;
    use crate::matrix::CommMatrix;
    use crate::network::Network;
    use lama_engine::Machine;
    use proptest::prelude::*;

    /// Each rank's partners, both ways, as the plan builds them.
    fn near(matrix: &CommMatrix) -> Adjacency {
        let mut near = vec![Vec::new(); matrix.ranks() as usize];
        for &(i, j, v) in matrix.pairs() {
            near[i as usize].push((j, v));
            near[j as usize].push((i, v));
        }
        near
    }

    /// Pairs of every two ranks of each group, volume 1.
    fn cliques(ranks: u32, groups: &[&[u32]]) -> CommMatrix {
        let mut pairs = Vec::new();
        for g in groups {
            for (k, &a) in g.iter().enumerate() {
                pairs.extend(g[k + 1..].iter().map(|&b| (a, b, 1.0)));
            }
        }
        CommMatrix::from_entries(ranks, pairs)
    }

    /// Two slots on each node, node by node.
    fn spots(nodes: u32) -> Vec<Spot> {
        (0..nodes).flat_map(|n| [(n, 0), (n, 1)]).collect()
    }

    #[test]
    fn two_groups_cut_at_the_switches_come_together() {
        // Leaf 0 holds n1 and n2, leaf 1 n3 and n4; two cores a node. Group A (ranks 0-3)
        // sits on n1 and n3, group B (4-7) on n2 and n4: each group has 4 of its 6 pairs
        // across the switches. One exchange across the leaves (n1 and n4, the first that saves
        // most) puts each group under one leaf switch:
        // those 8 pairs cost the switch's 256 instead of farther's 512, 2,048 less; the pairs
        // inside a node stay where they were.
        let m = Machine::synthetic("pack:1 core:2 pu:1").unwrap();
        let (names, net) = Network::fat_tree(2, 2);
        let system = System::new(vec![&m; 4], &names, &net, Distances::default()).unwrap();
        let matrix = cliques(8, &[&[0, 1, 2, 3], &[4, 5, 6, 7]]);
        let spots = spots(4);
        let mut assign = vec![0, 1, 4, 5, 2, 3, 6, 7];
        let cost = |a: &[usize]| {
            let s: Vec<Spot> = a.iter().map(|&x| spots[x]).collect();
            system.cost(&matrix, &s)
        };
        let before = cost(&assign);
        assert_eq!(node_swaps(&near(&matrix), &system, &spots, &mut assign), 1);
        assert_eq!(before - cost(&assign), 2048.0);
        let node = |r: usize| spots[assign[r]].0;
        let leaf = |r: usize| system.leaf_switches()[node(r) as usize];
        assert!((0..4).all(|r| leaf(r) == leaf(0)) && (4..8).all(|r| leaf(r) == leaf(4)));
        assert_ne!(leaf(0), leaf(4));
        // Partners that shared a node still do, each rank on the PU it had.
        assert!(node(0) == node(1) && node(2) == node(3) && node(0) != node(2));
        assert!((0..8).all(|r| spots[assign[r]].1 == r as u32 % 2));
    }

    #[test]
    fn nodes_of_another_shape_never_exchange() {
        // The same placement, but n3 and n4 have their cores in two packages: no node of
        // leaf 1 has n1's or n2's shape, so nothing moves.
        let one = Machine::synthetic("pack:1 core:2 pu:1").unwrap();
        let two = Machine::synthetic("pack:2 core:1 pu:1").unwrap();
        let (names, net) = Network::fat_tree(2, 2);
        let system = System::new(
            vec![&one, &one, &two, &two],
            &names,
            &net,
            Distances::default(),
        )
        .unwrap();
        let matrix = cliques(8, &[&[0, 1, 2, 3], &[4, 5, 6, 7]]);
        let mut assign = vec![0, 1, 4, 5, 2, 3, 6, 7];
        assert_eq!(
            node_swaps(&near(&matrix), &system, &spots(4), &mut assign),
            0
        );
        assert_eq!(assign, [0, 1, 4, 5, 2, 3, 6, 7]);
    }

    /// The cost of a placement under `system`.
    fn priced(system: &System<'_>, matrix: &CommMatrix, spots: &[Spot], assign: &[usize]) -> f64 {
        let placed: Vec<Spot> = assign.iter().map(|&x| spots[x]).collect();
        system.cost(matrix, &placed)
    }

    #[test]
    fn two_numa_nodes_trade_places_where_no_swap_of_two_ranks_helps() {
        // One node of 2 packages x 2 NUMA nodes x 2 cores: PUs 0-1 package 0 NUMA 0, 2-3
        // package 0 NUMA 1, 4-5 package 1 NUMA 0, 6-7 package 1 NUMA 1. Pairs 0-1, 2-3, 4-5 and
        // 6-7 talk heavily (10) and sit in one NUMA node each; 0-1 talk lightly (1) with 4-5,
        // and 2-3 with 6-7, across the packages. Exchanging NUMA node 1 of package 0 (2-3)
        // with NUMA node 0 of package 1 (4-5) puts both light groups of 4 pairs inside a package.
        let m = Machine::synthetic("pack:2 numa:2 core:2 pu:1").unwrap();
        let names = vec!["a".to_string()];
        let net = Network::single_switch(&names);
        let system = System::new(vec![&m], &names, &net, Distances::default()).unwrap();
        let mut pairs = vec![(0, 1, 10.0), (2, 3, 10.0), (4, 5, 10.0), (6, 7, 10.0)];
        for (a, b) in [
            (0, 4),
            (0, 5),
            (1, 4),
            (1, 5),
            (2, 6),
            (2, 7),
            (3, 6),
            (3, 7),
        ] {
            pairs.push((a, b, 1.0));
        }
        let matrix = CommMatrix::from_entries(8, pairs);
        let spots: Vec<Spot> = (0..8).map(|p| (0, p)).collect();
        let start: Vec<usize> = (0..8).collect();
        // No swap of two ranks lowers the cost: each breaks a heavy pair.
        let mut swapped = start.clone();
        assert_eq!(
            crate::refine::swaps(&near(&matrix), &system, &spots, &mut swapped),
            0
        );
        let mut assign = start.clone();
        let made = object_swaps(
            &near(&matrix),
            &system,
            &spots,
            &mut assign,
            &mut Budget::new(&near(&matrix)),
        );
        assert!(made >= 1);
        // By hand: 8 light pairs go from the node's distance to the package's.
        let (node, package) = (
            system.distance((0, 0), (0, 4)),
            system.distance((0, 0), (0, 2)),
        );
        assert!(node > package);
        let saved =
            priced(&system, &matrix, &spots, &start) - priced(&system, &matrix, &spots, &assign);
        assert_eq!(saved, 8.0 * (node - package));
        let package_of = |r: usize| assign[r] / 4;
        assert!(package_of(0) == package_of(4) && package_of(2) == package_of(6));
    }

    /// Two nodes of 4 cores on one switch: pairs 0-1, 2-3, 4-5, 6-7 talk heavily (10); 0-1 with
    /// 4-5 and 2-3 with 6-7 lightly (1). Ranks 0-3 start on the first node, 4-7 on the second:
    /// the 8 light pairs cross the nodes.
    fn two_groups_per_node() -> (Machine, Vec<String>, Network, CommMatrix, Vec<Spot>) {
        let m = Machine::synthetic("pack:1 core:4 pu:1").unwrap();
        let (names, net) = Network::fat_tree(1, 2);
        let mut pairs = vec![(0, 1, 10.0), (2, 3, 10.0), (4, 5, 10.0), (6, 7, 10.0)];
        for (a, b) in [
            (0, 4),
            (0, 5),
            (1, 4),
            (1, 5),
            (2, 6),
            (2, 7),
            (3, 6),
            (3, 7),
        ] {
            pairs.push((a, b, 1.0));
        }
        let spots = (0..2).flat_map(|n| (0..4).map(move |p| (n, p))).collect();
        (m, names, net, CommMatrix::from_entries(8, pairs), spots)
    }

    #[test]
    fn a_pair_of_partners_moves_to_the_node_of_its_other_partners() {
        let (m, names, net, matrix, spots) = two_groups_per_node();
        let system = System::new(vec![&m; 2], &names, &net, Distances::default()).unwrap();
        let start: Vec<usize> = (0..8).collect();
        let mut swapped = start.clone();
        assert_eq!(
            crate::refine::swaps(&near(&matrix), &system, &spots, &mut swapped),
            0
        );
        for exchange in [group_swaps, pair_refine] {
            let mut assign = start.clone();
            let made = exchange(
                &near(&matrix),
                &system,
                &spots,
                &mut assign,
                &mut Budget::new(&near(&matrix)),
            );
            assert!(made >= 1);
            // By hand: the 8 light pairs no longer cross the nodes (the switch's distance), and
            // every pair shares a node as before, so the cost falls by 8 switch distances less
            // 8 of the node's (their distance inside a node).
            let node = |r: usize| spots[assign[r]].0;
            assert!(
                node(0) == node(4) && node(2) == node(6) && node(0) != node(2),
                "{assign:?}"
            );
            let saved = priced(&system, &matrix, &spots, &start)
                - priced(&system, &matrix, &spots, &assign);
            let (switch, inside) = (
                system.distance((0, 0), (1, 0)),
                system.distance((0, 0), (0, 1)),
            );
            assert_eq!(saved, 8.0 * (switch - inside));
        }
    }

    proptest! {
        #[test]
        fn exchanges_never_raise_the_cost_and_keep_one_rank_a_slot(
            pairs in proptest::collection::vec((0u32..12, 0u32..12, 1u32..100), 0..60),
            order in Just((0..16usize).collect::<Vec<_>>()).prop_shuffle(),
        ) {
            // 8 nodes of 2 slots under 4 leaf switches, 12 ranks (4 slots free).
            let m = Machine::synthetic("pack:1 core:2 pu:1").unwrap();
            let (names, net) = Network::fat_tree(4, 2);
            let system = System::new(vec![&m; 8], &names, &net, Distances::default()).unwrap();
            let entries = pairs.iter().filter(|p| p.0 != p.1).map(|&(i, j, v)| (i, j, f64::from(v)));
            let matrix = CommMatrix::from_entries(12, entries);
            let spots = spots(8);
            let mut assign: Vec<usize> = order[..12].to_vec();
            let cost = |a: &[usize]| {
                let s: Vec<Spot> = a.iter().map(|&x| spots[x]).collect();
                system.cost(&matrix, &s)
            };
            let near = near(&matrix);
            let mut before = cost(&assign);
            node_swaps(&near, &system, &spots, &mut assign);
            prop_assert!(cost(&assign) <= before);
            for exchange in [pair_refine, group_swaps, object_swaps] {
                before = cost(&assign);
                exchange(&near, &system, &spots, &mut assign, &mut Budget::new(&near));
                prop_assert!(cost(&assign) <= before + 1e-9 * before);
            }
            let mut seen = assign.clone();
            seen.sort_unstable();
            seen.dedup();
            prop_assert_eq!(seen.len(), 12);
        }
    }
}

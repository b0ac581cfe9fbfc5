//! Local refinement of the winning placement: pairwise swaps (and moves to free slots) that
//! lower the model's cost, tried near each rank's partners, until a pass finds none or the work
//! budget is spent. It never raises the cost: a swap is made only when it lowers it.

use crate::bisect::Adjacency;
use crate::cost::{Spot, System};

/// Slots looked at on each side of a partner's slot (in slot order: node by node, in logical
/// PU order, so these are the partner's neighbours on the machine).
const WINDOW: usize = 6;
/// Partners of a rank considered, heaviest first.
const PARTNERS: usize = 8;
/// Most distance evaluations spent (about 0.1 s); the passes stop when it is used up.
const BUDGET: u64 = 6_000_000;
/// Most passes over the ranks.
const MAX_PASSES: usize = 8;

/// Improves `assign` (the slot of each rank; `spots[s]` is slot `s`'s place) in place and
/// returns how many swaps or moves it made.
pub(crate) fn swaps(
    near: &Adjacency,
    system: &System<'_>,
    spots: &[Spot],
    assign: &mut [usize],
) -> usize {
    let mut occupant: Vec<Option<u32>> = vec![None; spots.len()];
    for (r, &s) in assign.iter().enumerate() {
        occupant[s] = Some(r as u32);
    }
    // Heaviest partners first, for each rank.
    let partners: Vec<Vec<u32>> = near
        .iter()
        .map(|edges| {
            let mut e: Vec<(u32, f64)> = edges.clone();
            e.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
            e.into_iter().take(PARTNERS).map(|(j, _)| j).collect()
        })
        .collect();
    let mut spent = 0u64;
    let mut made = 0;
    // What rank r's edges cost with r at slot `at`, leaving out the edge to `skip`.
    let edges_at = |r: u32, at: usize, skip: Option<u32>, assign: &[usize], spent: &mut u64| {
        let here = spots[at];
        let mut c = 0.0;
        for &(j, v) in &near[r as usize] {
            if Some(j) != skip {
                c += v * system.distance(here, spots[assign[j as usize]]);
            }
        }
        *spent += near[r as usize].len() as u64;
        c
    };
    // A pass that tries every slot for every rank, where all passes fit in the budget.
    let pairs: usize = near.iter().map(Vec::len).sum();
    let per_pass = spots.len() as u64 * (4 * pairs as u64 + spots.len() as u64);
    let everywhere = per_pass * MAX_PASSES as u64 <= BUDGET;
    for _ in 0..MAX_PASSES {
        let mut improved = false;
        for r in 0..assign.len() as u32 {
            let tried: Vec<usize> = match everywhere {
                true => (0..spots.len()).collect(),
                false => near_partners(&partners[r as usize], spots, assign),
            };
            for b in tried {
                if spent > BUDGET {
                    return made;
                }
                let a = assign[r as usize];
                if b == a {
                    continue;
                }
                let q = occupant[b];
                let mut before = edges_at(r, a, q, assign, &mut spent);
                let mut after = edges_at(r, b, q, assign, &mut spent);
                if let Some(q) = q {
                    before += edges_at(q, b, Some(r), assign, &mut spent);
                    after += edges_at(q, a, Some(r), assign, &mut spent);
                }
                if after < before - 1e-9 * before.max(1.0) {
                    assign[r as usize] = b;
                    occupant[b] = Some(r);
                    occupant[a] = q;
                    if let Some(q) = q {
                        assign[q as usize] = a;
                    }
                    made += 1;
                    improved = true;
                }
            }
        }
        if !improved {
            break;
        }
    }
    made
}

/// The slots near each of `partners`' slots (within [`WINDOW`]) on that partner's node.
fn near_partners(partners: &[u32], spots: &[Spot], assign: &[usize]) -> Vec<usize> {
    let mut out = Vec::new();
    for &p in partners {
        let ps = assign[p as usize];
        let window = ps.saturating_sub(WINDOW)..(ps + WINDOW + 1).min(spots.len());
        out.extend(window.filter(|&b| spots[b].0 == spots[ps].0));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cost::Distances;
    use crate::matrix::CommMatrix;
    use crate::network::Network;
    use lama_engine::Machine;

    #[test]
    fn a_swap_brings_partners_together_and_never_raises_the_cost() {
        // One node, 2 packages x 2 cores (PUs 0-1 package 0, 2-3 package 1). Ranks 0-1 and 2-3
        // talk; placed on PUs 0,2,1,3 both pairs cross the packages and cost the node's 32 each;
        // a swap puts each pair in one package, which costs the package's 16 each.
        let m = Machine::synthetic("pack:2 core:2 pu:1").unwrap();
        let names = vec!["a".to_string()];
        let net = Network::single_switch(&names);
        let system = System::new(vec![&m], &names, &net, Distances::default()).unwrap();
        let matrix = CommMatrix::from_entries(4, [(0, 1, 1.0), (2, 3, 1.0)]);
        let mut near = vec![Vec::new(); 4];
        for &(i, j, v) in matrix.pairs() {
            near[i as usize].push((j, v));
            near[j as usize].push((i, v));
        }
        let spots: Vec<Spot> = (0..4).map(|p| (0, p)).collect();
        let mut assign = vec![0, 2, 1, 3];
        let cost = |a: &[usize]| {
            let s: Vec<Spot> = a.iter().map(|&x| spots[x]).collect();
            system.cost(&matrix, &s)
        };
        // Across packages, in one node: the node cost (32) per pair.
        assert_eq!(cost(&assign), 64.0);
        let made = swaps(&near, &system, &spots, &mut assign);
        assert!(made >= 1);
        // Each pair in one package: the package cost (16) per pair.
        assert_eq!(cost(&assign), 32.0);
        let mut seen = assign.clone();
        seen.sort_unstable();
        assert_eq!(seen, [0, 1, 2, 3]);
    }
}

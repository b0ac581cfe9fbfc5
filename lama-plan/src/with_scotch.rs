//! The plan's candidates that Scotch makes (the feature `scotch`, default): Scotch's own
//! mapping of the rank graph onto the machine's tree, and the multisection built on Scotch's
//! partitioner, flat and multilevel.

use crate::{
    bisect, multisect, scotch, Assignment, CommMatrix, Mapped, Mapper, Slot, Spot, System, Tree,
    MAX_SCOTCH_PAIRS, MAX_SCOTCH_TREE_SLOTS,
};

/// The multisection candidates, each run by `both` (on every slot, and on the first `np`):
/// the flat one, and where it differs the multilevel one.
pub(crate) fn multisections(
    matrix: &CommMatrix,
    rank_graph: &scotch::Graph,
    near: &bisect::Adjacency,
    tree: &Tree,
    both: &dyn Fn(Mapper<'_>) -> (Assignment, f64),
) -> Vec<Mapped> {
    let multisection = |c: &[Vec<u32>], variant| {
        not_too_dense(matrix)
            .and_then(|()| multisect::map(rank_graph, near, c, &tree.links, variant))
    };
    let mut out = Vec::new();
    let (r, t) = both(&|c, _| multisection(c, multisect::Variant::Flat));
    out.push(("multisection".to_string(), r, t));
    // Where it differs, the multilevel variant too: each variant's splits keep their least
    // cuts, and which variant ends cheaper depends on the machine and the traffic.
    if multisect::multilevel_differs(rank_graph) {
        let (r, t) = both(&|c, _| multisection(c, multisect::Variant::Multilevel));
        out.push(("multilevel".to_string(), r, t));
    }
    out
}

/// The Scotch target of the tree's first `count` slots: a tree-leaf architecture whose link
/// costs are the model's (scaled to integers), restricted to those leaves.
fn target(tree: &Tree, count: usize) -> scotch::Target {
    let coords = &tree.coords[..count];
    let depth = coords.first().map_or(0, Vec::len);
    let mut sizes = vec![1u32; depth];
    for c in coords {
        for (k, &x) in c.iter().enumerate() {
            sizes[k] = sizes[k].max(x + 1);
        }
    }
    let max = tree.links.iter().copied().fold(1.0f64, f64::max);
    let links = tree
        .links
        .iter()
        .map(|&v| ((v / max * 10_000.0).round() as u32).max(1))
        .collect();
    let leaves = coords
        .iter()
        .map(|c| {
            c.iter()
                .zip(&sizes)
                .fold(0u64, |acc, (&x, &s)| acc * u64::from(s) + u64::from(x))
        })
        .map(|v| u32::try_from(v).unwrap_or(u32::MAX))
        .collect();
    scotch::Target {
        sizes,
        links,
        leaves,
    }
}

/// `Err` when the matrix is too dense to hand to Scotch.
fn not_too_dense(matrix: &CommMatrix) -> Result<(), String> {
    if matrix.pairs().len() > MAX_SCOTCH_PAIRS {
        return Err(format!(
            "not run: {} communicating pairs, more than {MAX_SCOTCH_PAIRS} (on so dense a \
             matrix every mapping costs about the same and Scotch takes seconds)",
            matrix.pairs().len()
        ));
    }
    Ok(())
}

/// Scotch's mapping as one slot per rank: ranks that share a slot are moved, heaviest
/// talkers first kept, to the free slot that adds the least cost with the ranks already placed.
pub(crate) fn mapping(
    matrix: &CommMatrix,
    rank_graph: &scotch::Graph,
    near: &bisect::Adjacency,
    system: &System<'_>,
    tree: &Tree,
    slots: &[Slot],
) -> Result<Vec<usize>, String> {
    let np = matrix.ranks() as usize;
    if matrix.pairs().is_empty() {
        return Err("the matrix has no communication to map".to_string());
    }
    not_too_dense(matrix)?;
    if slots.len() > MAX_SCOTCH_TREE_SLOTS {
        return Err(format!(
            "not run: {} slots, more than {MAX_SCOTCH_TREE_SLOTS} (Scotch's tree mapping grows \
             much faster than the slots, 42 s for 100,160; the multisection uses Scotch's \
             partitioner level by level instead)",
            slots.len()
        ));
    }
    let target = target(tree, slots.len());
    if target.sizes.iter().map(|&s| u64::from(s)).product::<u64>() >= i32::MAX as u64 {
        return Err("the machine is too large for one Scotch tree".to_string());
    }
    let chosen = scotch::map(rank_graph, &target)?;
    let mut slot_of: Vec<Option<usize>> = vec![None; np];
    let mut used = vec![false; slots.len()];
    let mut displaced = Vec::new();
    for (r, &s) in chosen.iter().enumerate() {
        if used[s] {
            displaced.push(r);
        } else {
            used[s] = true;
            slot_of[r] = Some(s);
        }
    }
    for r in displaced {
        let mut best: Option<(f64, usize)> = None;
        for (s, slot) in slots.iter().enumerate().filter(|(s, _)| !used[*s]) {
            let here: Spot = (slot.node, slot.pu);
            let add: f64 = near[r]
                .iter()
                .filter_map(|&(j, v)| {
                    slot_of[j as usize]
                        .map(|t| v * system.distance(here, (slots[t].node, slots[t].pu)))
                })
                .sum();
            if best.is_none_or(|(c, _)| add < c) {
                best = Some((add, s));
            }
        }
        let (_, s) = best.ok_or("more ranks than slots")?;
        used[s] = true;
        slot_of[r] = Some(s);
    }
    slot_of
        .into_iter()
        .map(|s| s.ok_or_else(|| "a rank was left without a slot".to_string()))
        .collect()
}

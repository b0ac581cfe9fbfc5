//! Slurm's `-m/--distribution`: which one gives the nodes the ranks a LAMA placement gives
//! them, for `lama map` and the plugin's hint.

use lama_engine::Placement;

/// The `-m/--distribution` that puts every rank on the node this placement puts it on, given
/// the same number of tasks per node ([`Placement::tasks_per_node`]): `cyclic`, `block` or
/// `plane=P`, whichever matches first. `None` when no distribution does: then only
/// `-m arbitrary` with a `SLURM_HOSTFILE` (one node name per rank) reproduces it.
pub fn exact(p: &Placement<'_>) -> Option<String> {
    let counts = p.tasks_per_node();
    let ranks = p.processes();
    let max = counts.iter().copied().max().unwrap_or(0);
    let matches = |plane: u32| -> bool {
        let mut left = counts.clone();
        let mut rank = 0usize;
        while rank < ranks.len() {
            for (n, l) in left.iter_mut().enumerate() {
                let k = plane.min(*l);
                for _ in 0..k {
                    if ranks[rank].node as usize != n {
                        return false;
                    }
                    rank += 1;
                }
                *l -= k;
            }
        }
        true
    };
    if p.nodes().len() <= 1 || matches(1) {
        return Some("cyclic".to_string());
    }
    if matches(max) {
        return Some("block".to_string());
    }
    (2..max).find(|&k| matches(k)).map(|k| format!("plane={k}"))
}

/// The `-m/--distribution` that gives nodes the same ranks as this layout does across nodes
/// (exact when every node has every position): `cyclic` when `n` is innermost, otherwise
/// `plane=P` with P the positions per node before the layout moves to the next node
/// ([`Placement::node_stride`]).
pub fn like(p: &Placement<'_>) -> String {
    match p.node_stride() {
        0 | 1 => "cyclic".to_string(),
        per_node => format!("plane={per_node}"),
    }
}

/// `lama map`'s line on how Slurm would assign the ranks to nodes (several nodes only).
pub fn node_assignment(p: &Placement<'_>) -> Option<String> {
    if p.nodes().len() <= 1 {
        return None;
    }
    let counts: Vec<String> = p.tasks_per_node().iter().map(u32::to_string).collect();
    Some(match exact(p) {
        Some(d) => format!(
            "node assignment: the same as Slurm's -m {d} with tasks per node {}",
            counts.join(",")
        ),
        None => format!(
            "node assignment: no Slurm -m gives it (tasks per node {}); use -m arbitrary with a \
             SLURM_HOSTFILE (lama map --hostfile FILE --node-names LIST)",
            counts.join(",")
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use lama_engine::{place, Bind, Layout, Machine, Request};

    fn synth(s: &str) -> Machine {
        Machine::synthetic(s).unwrap()
    }

    fn request(layout: &str, bind: &str, np: u32) -> Request {
        let mut r = Request::new(Layout::parse(layout).unwrap(), np);
        r.bind = Bind::parse(bind).unwrap();
        r
    }

    #[test]
    fn exact_slurm_distributions() {
        let m = synth("pack:2 core:2 pu:1");
        let dist = |layout: &str, np: u32, nodes: usize| {
            let nodes = vec![&m; nodes];
            let mut req = request(layout, "1c", np);
            req.oversubscribe = true;
            exact(&place(&nodes, &req).unwrap())
        };
        // Node innermost: round-robin over nodes.
        assert_eq!(dist("nscbh", 6, 3).as_deref(), Some("cyclic"));
        // Node outermost: every node filled before the next.
        assert_eq!(dist("scbnh", 12, 3).as_deref(), Some("block"));
        // Node after sockets: two ranks per node, then the next node.
        assert_eq!(dist("snch", 8, 2).as_deref(), Some("plane=2"));
        assert_eq!(dist("scbnh", 3, 1).as_deref(), Some("cyclic"));
        // Heterogeneous nodes where no distribution matches: 3 positions on node 0, 1 on node 1,
        // then node 0 again in the second pass of an oversubscribed run.
        let a = synth("pack:1 core:3 pu:1");
        let b = synth("pack:1 core:1 pu:1");
        let mut req = request("cnh", "1c", 4);
        req.oversubscribe = true;
        let p = place(&[&a, &b], &req).unwrap();
        let nodes: Vec<u32> = p.processes().iter().map(|x| x.node).collect();
        assert_eq!(nodes, [0, 0, 0, 1]);
        assert_eq!(exact(&p).as_deref(), Some("block"));
        let mut req = request("ncbh", "1c", 5);
        req.oversubscribe = true;
        let p = place(&[&a, &b], &req).unwrap();
        let nodes: Vec<u32> = p.processes().iter().map(|x| x.node).collect();
        assert_eq!(nodes, [0, 1, 0, 0, 0]);
        assert_eq!(exact(&p).as_deref(), Some("cyclic"));
        let mut req = request("ncbh", "1c", 6);
        req.oversubscribe = true;
        let p = place(&[&a, &b], &req).unwrap();
        let nodes: Vec<u32> = p.processes().iter().map(|x| x.node).collect();
        // Second pass: node 0 again, then node 1: [0,1,0,0,0,1] is no plane of counts 4,2.
        assert_eq!(nodes, [0, 1, 0, 0, 0, 1]);
        assert_eq!(exact(&p), None);
    }

    #[test]
    fn layouts_spread_like_a_plane() {
        let m = synth("pack:2 core:4 pu:1");
        let nodes = vec![&m; 3];
        let p = place(&nodes, &request("scbnh", "1c", 3)).unwrap();
        assert_eq!(like(&p), "plane=8");
        let p = place(&nodes, &request("nscbh", "1c", 3)).unwrap();
        assert_eq!(like(&p), "cyclic");
    }
}

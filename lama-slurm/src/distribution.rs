//! Slurm's `-m/--distribution`: which one gives the nodes the ranks a LAMA placement gives
//! them, for `lama map` and the plugin's hint.

use lama_engine::{place, Machine, Placement, Request};

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

/// How srun -N NODES -n TASKS spreads the tasks over nodes that can each hold them: as evenly
/// as possible, the first nodes one more (Slurm's task counts for a homogeneous allocation).
pub fn even_split(nodes: usize, tasks: u32) -> Vec<u32> {
    let n = nodes.max(1) as u32;
    (0..n)
        .map(|k| tasks / n + u32::from(k < tasks % n))
        .collect()
}

/// How srun deals a step's ranks to its nodes (`-m/--distribution`, the part before `:`):
/// what `lama map --distribution` previews and what the plugin finds when a step starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Distribution {
    /// Consecutive ranks on a node (`-m block`, Slurm's default).
    Block,
    /// One rank per node in turn (`-m cyclic`).
    Cyclic,
    /// `P` consecutive ranks per node in turn (`-m plane=P`).
    Plane(u32),
}

impl Distribution {
    /// Reads srun's spelling: `block`, `cyclic`, `plane=P`; what follows a `:` or `,` (how
    /// Slurm spreads a node's tasks over its sockets and cores) is the layout's business here
    /// and is returned apart so that the caller can say so.
    pub fn parse(text: &str) -> Result<(Distribution, Option<&str>), String> {
        let (node, rest) = match text.find([':', ',']) {
            Some(i) => (&text[..i], Some(&text[i + 1..])),
            None => (text, None),
        };
        let d = match node {
            "block" => Distribution::Block,
            "cyclic" => Distribution::Cyclic,
            _ => match node.strip_prefix("plane=").map(str::parse::<u32>) {
                Some(Ok(p)) if p > 0 => Distribution::Plane(p),
                _ => {
                    return Err(format!(
                        "distribution '{text}': srun's node distributions are block, cyclic and \
                         plane=P (P at least 1); arbitrary takes a SLURM_HOSTFILE, which \
                         lama map -m arbitrary --hostfile writes"
                    ))
                }
            },
        };
        Ok((d, rest.filter(|r| !r.is_empty())))
    }

    /// How many tasks each node gets from srun when node `i` can run `cpus[i]` tasks (its
    /// allocated CPUs divided by `--cpus-per-task`, at least 1, capped by `--ntasks-per-node`),
    /// as Slurm lays a step out (`_task_layout_block`, `_task_layout_cyclic` and
    /// `_task_layout_plane` in `src/common/slurm_step_layout.c`, 24.11 and 26.05 alike):
    /// block and cyclic deal one task per node with room in turn, then, once every node is
    /// full, keep dealing to every node; plane gives each node one task, then up to `P` per
    /// node with room in turn, then oversubscribes the same way. (Block with
    /// `CR_Pack_Nodes` or `-m ...,Pack` fills each node first; not modelled.)
    pub fn slurm_counts(self, cpus: &[u32], tasks: u32) -> Vec<u32> {
        let nodes = cpus.len();
        let mut counts = vec![0u32; nodes];
        if nodes == 0 {
            return counts;
        }
        let cpus: Vec<u32> = cpus.iter().map(|&c| c.max(1)).collect();
        let mut placed = 0u32;
        match self {
            Distribution::Block => {
                let mut over = false;
                let mut j = 0u32;
                while placed < tasks {
                    let mut room = false;
                    for (i, c) in counts.iter_mut().enumerate() {
                        if placed == tasks {
                            break;
                        }
                        if j < cpus[i] || over {
                            *c += 1;
                            placed += 1;
                            room |= j + 1 < cpus[i];
                        }
                    }
                    over |= !room;
                    j += 1;
                }
            }
            Distribution::Cyclic => {
                let total: u64 = cpus.iter().map(|&c| u64::from(c)).sum();
                let mut over = total < u64::from(tasks);
                let extra = if over {
                    (u64::from(tasks) - total).div_ceil(nodes as u64)
                } else {
                    0
                };
                let mut j = 0u64;
                while placed < tasks {
                    let before = placed;
                    let mut room = false;
                    for (i, c) in counts.iter_mut().enumerate() {
                        if placed == tasks {
                            break;
                        }
                        let cap = u64::from(cpus[i]);
                        if j < cap || (over && j < cap + extra) {
                            *c += 1;
                            placed += 1;
                            room |= j + 1 < cap;
                        }
                    }
                    if placed == before && over {
                        // Cannot happen (every node takes a task while any is left); never spin.
                        break;
                    }
                    over |= !room;
                    j += 1;
                }
            }
            Distribution::Plane(p) => {
                let mut over = false;
                let mut first = true;
                while placed < tasks {
                    let mut room = false;
                    if first {
                        for c in counts.iter_mut() {
                            if placed == tasks {
                                break;
                            }
                            *c += 1;
                            placed += 1;
                        }
                    }
                    for (i, c) in counts.iter_mut().enumerate() {
                        if placed == tasks {
                            break;
                        }
                        for _ in u32::from(first)..p {
                            if placed == tasks {
                                break;
                            }
                            // Slurm tests `cpus - tasks` for non-zero: a node past its CPUs
                            // takes more too.
                            if *c != cpus[i] || over {
                                *c += 1;
                                placed += 1;
                                room |= *c < cpus[i];
                            }
                        }
                    }
                    over |= !room;
                    first = false;
                }
            }
        }
        counts
    }

    /// The global ranks of each node, ascending, when the nodes hold `counts` tasks: block
    /// gives each node the next `counts[n]` ranks; cyclic one rank to each node with room in
    /// turn; plane=P up to P ranks to each node with room in turn.
    pub fn ranks(self, counts: &[u32]) -> Vec<Vec<u32>> {
        let mut out: Vec<Vec<u32>> = counts
            .iter()
            .map(|&c| Vec::with_capacity(c as usize))
            .collect();
        let total: u32 = counts.iter().sum();
        let step = match self {
            Distribution::Block => u32::MAX,
            Distribution::Cyclic => 1,
            Distribution::Plane(p) => p,
        };
        let mut rank = 0u32;
        while rank < total {
            for (n, ranks) in out.iter_mut().enumerate() {
                let room = counts[n] - ranks.len() as u32;
                let k = step.min(room).min(total - rank);
                ranks.extend(rank..rank + k);
                rank += k;
            }
        }
        out
    }
}

impl std::fmt::Display for Distribution {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Distribution::Block => write!(f, "block"),
            Distribution::Cyclic => write!(f, "cyclic"),
            Distribution::Plane(p) => write!(f, "plane={p}"),
        }
    }
}

/// Slurm's compressed task counts per node, as `SLURM_TASKS_PER_NODE` writes them
/// (`2(x3),1` is 2,2,2,1).
pub fn parse_counts(text: &str) -> Result<Vec<u32>, String> {
    let bad = || {
        format!(
            "tasks per node '{text}': write one count per node, as SLURM_TASKS_PER_NODE does \
             (4,4,2 or 4(x2),2)"
        )
    };
    let mut out = Vec::new();
    for item in text.split(',') {
        let item = item.trim();
        let (count, times) = match item.split_once("(x") {
            Some((c, t)) => (c, t.strip_suffix(')').ok_or_else(bad)?),
            None => (item, "1"),
        };
        let count: u32 = count.parse().map_err(|_| bad())?;
        let times: usize = times.parse().map_err(|_| bad())?;
        if times == 0 || times > 1 << 20 {
            return Err(bad());
        }
        out.extend(std::iter::repeat_n(count, times));
    }
    Ok(out)
}

/// Task counts per node as the preview writes them: `2,2,1`, or for more than 8 nodes in runs
/// (`2 x3, 1`).
pub fn count_list(counts: &[u32]) -> String {
    let text: Vec<String> = counts.iter().map(u32::to_string).collect();
    if counts.len() > 8 {
        lama_engine::render::runs(&text)
    } else {
        text.join(",")
    }
}

/// `lama map`'s line on how Slurm would assign the ranks to nodes (several nodes only), naming
/// a command that gives it: `srun -N -n -m D` when srun's own task counts are the placement's,
/// else `-m arbitrary` with a `SLURM_HOSTFILE`.
pub fn node_assignment(p: &Placement<'_>) -> Option<String> {
    let nodes = p.nodes().len();
    if nodes <= 1 {
        return None;
    }
    let counts = p.tasks_per_node();
    let list = count_list;
    let np: u32 = counts.iter().sum();
    let srun = even_split(nodes, np);
    let hostfile = "run it with -m arbitrary and a SLURM_HOSTFILE (lama map -m arbitrary \
                    --hostfile FILE --node-names LIST writes one)";
    // srun's even split holds for nodes alike; on nodes of different sizes srun decides the
    // counts from each node's CPUs.
    let alike = p.nodes().iter().all(|m| {
        m.pus().len() == p.nodes()[0].pus().len()
            && m.available().len() == p.nodes()[0].available().len()
    });
    Some(match exact(p) {
        Some(d) if !alike => format!(
            "node assignment: -m {d} order with tasks per node {} (on nodes of different sizes \
             srun chooses the counts from each node's CPUs: if it gives these, srun -N{nodes} \
             -n{np} -m {d} places them like this; otherwise {hostfile})",
            list(&counts)
        ),
        Some(d) if counts == srun => format!(
            "node assignment: what srun -N{nodes} -n{np} -m {d} does (tasks per node {})",
            list(&counts)
        ),
        Some(d) => format!(
            "node assignment: tasks per node {} in -m {d} order, but srun -N{nodes} -n{np} \
             gives each node {} tasks ({}); {hostfile}, or preview what srun does with lama map \
             -m {d} instead of -m arbitrary",
            list(&counts),
            if srun.iter().all(|&c| c == srun[0]) {
                srun[0].to_string()
            } else {
                "about the same number of".to_string()
            },
            list(&srun)
        ),
        None => format!(
            "node assignment: no srun -m gives it (tasks per node {}); {hostfile}",
            list(&counts)
        ),
    })
}

/// The distinct CPU counts in Slurm's compressed per-node list (`SLURM_JOB_CPUS_PER_NODE`,
/// e.g. `2(x3),4`), in order of appearance; `None` when it cannot be read.
pub fn distinct_cpus_per_node(list: &str) -> Option<Vec<u32>> {
    let (mut out, mut seen) = (Vec::new(), std::collections::HashSet::new());
    for item in list.split(',') {
        let count = item.split('(').next()?.trim().parse::<u32>().ok()?;
        if seen.insert(count) {
            out.push(count);
        }
    }
    Some(out)
}

/// How `layout` deals ranks to nodes shaped like `machine`, as srun's `-m` says it (`block`,
/// `cyclic`, `plane=N`, or a description where no `-m` does); `None` when it cannot be placed.
/// The node stride depends only on the levels the layout names before `n`, inside one node:
/// two nodes show it as well as thousands, so the cost does not grow with the job.
pub fn node_spread(machine: &Machine, layout: &lama_engine::Request) -> Option<String> {
    let nodes = vec![machine; 2];
    let req = Request {
        np: 0,
        oversubscribe: false,
        bind_within: false,
        ..layout.clone()
    };
    Some(like(&place(&nodes, &req).ok()?))
}

/// The step's one distribution hint for `layout` (its layout, binding, MPPR and order; its
/// process count and oversubscription are not used) (for `--lama-verbose`, printed by the step's first node
/// only): which Slurm `-m` gives nodes the ranks the full LAMA iteration would. Only this
/// node's shape is known here, so the hint says that it assumes every node of the step is
/// shaped like this one; when Slurm's CPU counts per node (`cpus_per_node`, the job's
/// `SLURM_JOB_CPUS_PER_NODE`) show that they are not, it says so and points at `lama map`
/// instead of guessing. `None` when there is one node or the distribution in use
/// (`SLURM_DISTRIBUTION`) already is the one this node's shape asks for.
pub fn hint(
    machine: &Machine,
    layout: &lama_engine::Request,
    node: &str,
    nnodes: u32,
    in_use: Option<&str>,
    cpus_per_node: Option<&str>,
) -> Option<String> {
    if nnodes <= 1 {
        return None;
    }
    let exact = "`lama map` with each node's topology prints the exact -m (or a \
                 SLURM_HOSTFILE for -m arbitrary)";
    if let Some(counts) = cpus_per_node.and_then(distinct_cpus_per_node) {
        if counts.len() > 1 {
            let counts: Vec<String> = counts.iter().map(u32::to_string).collect();
            return Some(format!(
                "the step's nodes differ (CPUs per node: {}), so no -m is guessed for layout \
                 {}; {exact}",
                counts.join(", "),
                layout.layout
            ));
        }
    }
    let want = node_spread(machine, layout)?;
    let current = in_use.map(|d| d.split([':', ',']).next().unwrap_or(d));
    if current == Some(want.as_str()) || (want.starts_with("plane") && current == Some("plane")) {
        return None;
    }
    Some(format!(
        "layout {} spreads ranks over nodes like `-m {want}`, assuming the step's {nnodes} nodes \
         are shaped like {node}; this step uses {}. If they are not, {exact}",
        layout.layout,
        match in_use {
            Some(d) => format!("-m {}", crate::hostlist::shown(d)),
            None => "Slurm's default distribution".to_string(),
        }
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use lama_engine::{Bind, Layout};

    fn synth(s: &str) -> Machine {
        Machine::synthetic(s).unwrap()
    }

    fn request(layout: &str, bind: &str, np: u32) -> Request {
        let mut r = Request::new(Layout::parse(layout).unwrap(), np);
        r.bind = Bind::parse(bind).unwrap();
        r
    }

    #[test]
    fn srun_deals_ranks_to_nodes() {
        // Worked by hand: -N3 -n7.
        assert_eq!(Distribution::Block.slurm_counts(&[4, 4, 4], 7), [3, 2, 2]);
        assert_eq!(
            Distribution::Block.ranks(&[3, 2, 2]),
            [vec![0, 1, 2], vec![3, 4], vec![5, 6]]
        );
        assert_eq!(
            Distribution::Cyclic.ranks(&[3, 2, 2]),
            [vec![0, 3, 6], vec![1, 4], vec![2, 5]]
        );
        // plane=2 over 3 nodes, 7 tasks: 0,1 | 2,3 | 4,5 | then 6 on node 0.
        let plane = Distribution::Plane(2);
        assert_eq!(plane.slurm_counts(&[4, 4, 4], 7), [3, 2, 2]);
        assert_eq!(
            plane.ranks(&[3, 2, 2]),
            [vec![0, 1, 6], vec![2, 3], vec![4, 5]]
        );
        // plane=4, -N2 -n6: the first node takes 4, not 3.
        assert_eq!(Distribution::Plane(4).slurm_counts(&[8, 8], 6), [4, 2]);
        // Counts given (SLURM_TASKS_PER_NODE) with a node left empty.
        assert_eq!(
            Distribution::Cyclic.ranks(&[2, 0, 1]),
            [vec![0, 2], vec![], vec![1]]
        );
    }

    #[test]
    fn srun_counts_follow_each_nodes_cpus() {
        // Worked by hand from slurm_step_layout.c.
        let block = Distribution::Block;
        // Nodes alike: as even as possible, the first nodes one more, also past their CPUs.
        assert_eq!(block.slurm_counts(&[4, 4, 4], 7), [3, 2, 2]);
        assert_eq!(block.slurm_counts(&[2, 2], 7), [4, 3]);
        // A node of 4 CPUs and one of 2: dealt one by one while both have room, then to the
        // bigger one alone.
        assert_eq!(block.slurm_counts(&[4, 2], 5), [3, 2]);
        assert_eq!(block.slurm_counts(&[4, 2], 6), [4, 2]);
        // Every node full: dealt to all in turn again.
        assert_eq!(block.slurm_counts(&[4, 2], 8), [5, 3]);
        // The example in _task_layout_cyclic's comment: CPUs 4,2,4,2 and 16 tasks.
        assert_eq!(
            Distribution::Cyclic.slurm_counts(&[4, 2, 4, 2], 16),
            [5, 3, 5, 3]
        );
        assert_eq!(Distribution::Cyclic.slurm_counts(&[4, 2], 5), [3, 2]);
        // The example in _task_layout_plane's comment: plane=2, 6 tasks, CPUs 4,1,1.
        assert_eq!(
            Distribution::Plane(2).slurm_counts(&[4, 1, 1], 6),
            [4, 1, 1]
        );
        // plane=4 on two nodes of 2 CPUs: each node's room ends the first round at 2 tasks,
        // then the first node takes the next 4 (oversubscribed).
        assert_eq!(Distribution::Plane(4).slurm_counts(&[2, 2], 8), [6, 2]);
        // Enough CPUs: plane=P as if the nodes were unlimited.
        assert_eq!(Distribution::Plane(4).slurm_counts(&[8, 8], 6), [4, 2]);
        assert_eq!(
            Distribution::Plane(2).slurm_counts(&[8, 8, 8], 7),
            [3, 2, 2]
        );
        // No CPU counted: one task per node at least.
        assert_eq!(block.slurm_counts(&[0, 0], 3), [2, 1]);
        assert!(block.slurm_counts(&[], 3).is_empty());
    }

    #[test]
    fn distributions_and_counts_are_read_as_slurm_writes_them() {
        assert_eq!(
            Distribution::parse("block:cyclic").unwrap(),
            (Distribution::Block, Some("cyclic"))
        );
        assert_eq!(
            Distribution::parse("plane=3").unwrap(),
            (Distribution::Plane(3), None)
        );
        assert_eq!(Distribution::Plane(3).to_string(), "plane=3");
        for bad in ["plane=0", "arbitrary", "Block", ""] {
            assert!(Distribution::parse(bad).is_err(), "{bad}");
        }
        assert_eq!(parse_counts("2(x3),1").unwrap(), [2, 2, 2, 1]);
        assert_eq!(parse_counts("4").unwrap(), [4]);
        for bad in ["2(x", "x", "2(x0)", "-1", "2,,3"] {
            assert!(parse_counts(bad).is_err(), "{bad}");
        }
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
    fn the_node_assignment_names_a_command_that_gives_it() {
        assert_eq!(even_split(3, 6), [2, 2, 2]);
        assert_eq!(even_split(3, 5), [2, 2, 1]);
        let m = synth("pack:2 core:2 pu:1");
        let line = |layout: &str, np: u32| {
            node_assignment(&place(&[&m, &m, &m], &request(layout, "1c", np)).unwrap()).unwrap()
        };
        // 6 ranks with the node outermost fill node 0 (4) then node 1 (2): srun -N3 -n6 would
        // give 2 per node, so only -m arbitrary reproduces it.
        let uneven = line("scbnh", 6);
        assert!(uneven.contains("tasks per node 4,2,0"), "{uneven}");
        assert!(
            uneven.contains("srun -N3 -n6 gives each node 2 tasks"),
            "{uneven}"
        );
        assert!(uneven.contains("-m arbitrary"), "{uneven}");
        assert_eq!(
            line("nscbh", 6),
            "node assignment: what srun -N3 -n6 -m cyclic does (tasks per node 2,2,2)"
        );
        assert_eq!(
            line("scbnh", 12),
            "node assignment: what srun -N3 -n12 -m block does (tasks per node 4,4,4)"
        );
        assert_eq!(
            node_assignment(&place(&[&m], &request("scbnh", "1c", 2)).unwrap()),
            None
        );
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

    #[test]
    fn distribution_hints() {
        let m = Machine::synthetic("pack:2 core:4 pu:1").unwrap();
        let layout = request("scbnh", "1c", 0);
        assert_eq!(
            hint(&m, &layout, "node1", 3, None, Some("8(x3)")).unwrap(),
            "layout scbnh spreads ranks over nodes like `-m plane=8`, assuming the step's 3 \
             nodes are shaped like node1; this step uses Slurm's default distribution. If they \
             are not, `lama map` with each node's topology prints the exact -m (or a \
             SLURM_HOSTFILE for -m arbitrary)"
        );
        assert_eq!(hint(&m, &layout, "node1", 3, Some("plane"), None), None);
        assert_eq!(hint(&m, &layout, "node1", 1, None, None), None);
        // Nodes Slurm counts differently are not guessed at.
        let differ = hint(&m, &layout, "node1", 2, None, Some("8,16")).unwrap();
        assert!(
            differ.starts_with("the step's nodes differ (CPUs per node: 8, 16)"),
            "{differ}"
        );
        assert_eq!(distinct_cpus_per_node("2(x3),4,2"), Some(vec![2, 4]));
        assert_eq!(distinct_cpus_per_node("x"), None);
        let layout = request("nsc", "1c", 0);
        assert_eq!(
            hint(&m, &layout, "node1", 2, Some("cyclic:block"), None),
            None
        );
        // A step of 100,000 nodes gets the advice of a step of 3 (counted by hand: csbnh
        // fills a node's 8 cores before the next node, snch puts one rank on each socket
        // before the next node, nscbh one rank per node in turn), placed on two nodes whatever
        // the step's size.
        for (layout, want) in [
            ("csbnh", "plane=8"),
            ("snch", "plane=2"),
            ("nscbh", "cyclic"),
        ] {
            let r = request(layout, "1c", 0);
            for nodes in [3, 100_000] {
                let h = hint(&m, &r, "node1", nodes, Some("arbitrary"), None).unwrap();
                let like = format!("like `-m {want}`");
                assert!(h.contains(&like), "{layout} on {nodes} nodes: {h}");
                assert!(h.contains(&format!("the step's {nodes} nodes")), "{h}");
            }
        }
    }
}

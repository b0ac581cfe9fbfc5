//! How srun deals a preview's ranks to its nodes (`--distribution`, `--tasks-per-node`,
//! `--ntasks-per-node`) and `--ranks`.

use crate::map_args::MapArgs;
use crate::nodes::Nodes;
use crate::Failure;
use lama_engine::{CpuUnit, Placement};
use lama_slurm::distribution::{count_list, parse_counts, Distribution};

/// How srun deals the ranks to the nodes (`--distribution`, `--tasks-per-node`).
pub(crate) struct RankSplit {
    distribution: Distribution,
    /// What followed `:` in --distribution (Slurm's spread inside a node).
    inside: Option<String>,
    /// Whether the counts are srun's from each node's CPUs (not --tasks-per-node).
    from_cpus: bool,
    /// The global ranks of each node, ascending.
    pub(crate) ranks: Vec<Vec<u32>>,
}

impl RankSplit {
    /// The preview's lines on how the ranks reached the nodes.
    pub(crate) fn notes(&self, p: &Placement<'_>) -> Vec<String> {
        let counts: Vec<u32> = self.ranks.iter().map(|r| r.len() as u32).collect();
        let mut notes = vec![format!(
            "node assignment: srun -N{} -n{} -m {} (tasks per node {}{}); each node places its \
             own ranks in ascending order by layout {}, as the plugin does",
            self.ranks.len(),
            p.len(),
            self.distribution,
            count_list(&counts),
            if self.from_cpus {
                " for a job holding its nodes whole (--exclusive); --tasks-per-node takes a \
                 shared job's SLURM_TASKS_PER_NODE"
            } else {
                ""
            },
            p.request().layout
        )];
        if let Some(inside) = &self.inside {
            notes.push(format!(
                "-m {}:{inside}: where the tasks go inside a node is the layout's choice here; \
                 the plugin replaces Slurm's :{inside}",
                self.distribution
            ));
        }
        notes
    }
}

/// Whether `--distribution` asks for LAMA's own order across nodes (`arbitrary`).
pub(crate) fn lama_order(args: &MapArgs) -> bool {
    args.distribution
        .as_deref()
        .is_some_and(|d| d.split([':', ',']).next() == Some("arbitrary"))
}

/// How srun deals the ranks to these nodes (`--distribution`, srun's default block, with
/// srun's counts or `--tasks-per-node`): `None` with `-m arbitrary` (the layout spreads the
/// ranks over the nodes itself) and on one node without any of these options.
pub(crate) fn rank_split(
    args: &MapArgs,
    all_nodes: &Nodes,
    unit: CpuUnit,
) -> Result<Option<RankSplit>, Failure> {
    let nodes = all_nodes.machine_of();
    let counted = args.tasks_per_node.is_some() || args.ntasks_per_node.is_some();
    if lama_order(args) {
        if counted {
            return Err(Failure::Usage(
                "--tasks-per-node and --ntasks-per-node say how srun deals ranks to nodes, and \
                 -m arbitrary leaves that to the layout: give one or the other"
                    .into(),
            ));
        }
        return Ok(None);
    }
    if args.hostfile.is_some() {
        return Err(Failure::Usage(format!(
            "--hostfile writes LAMA's own order across nodes for srun -m arbitrary: add -d \
             arbitrary (srun's -m {} needs no hostfile)",
            args.distribution.as_deref().unwrap_or("block")
        )));
    }
    if nodes.len() <= 1 && args.distribution.is_none() && !counted {
        return Ok(None);
    }
    let (distribution, inside) =
        Distribution::parse(args.distribution.as_deref().unwrap_or("block"))
            .map_err(|e| Failure::Usage(format!("--{e}")))?;
    let (counts, from_cpus) = match &args.tasks_per_node {
        Some(list) => {
            let counts = parse_counts(list).map_err(|e| Failure::Usage(format!("--{e}")))?;
            let total: u64 = counts.iter().map(|&c| u64::from(c)).sum();
            if counts.len() != nodes.len() || total != u64::from(args.np) {
                return Err(Failure::Usage(format!(
                    "--tasks-per-node {list}: {} count(s) adding up to {total}, but there are {} \
                     node(s) and {} task(s)",
                    counts.len(),
                    nodes.len(),
                    args.np
                )));
            }
            (counts, false)
        }
        None => {
            // What each node can run: its available CPUs (as Slurm counts them) per task,
            // capped by --ntasks-per-node, as slurm_step_layout.c computes it; counted once
            // per distinct machine.
            let per_machine = all_nodes.cpus(unit);
            let cpus: Vec<u32> = nodes
                .iter()
                .map(|&k| {
                    let c = (per_machine[k] / args.cpus_per_task.max(1)).max(1);
                    // Slurm passes --ntasks-per-node in the plane size, so plane=P keeps the
                    // node's CPUs.
                    match (args.ntasks_per_node, distribution) {
                        (Some(n), Distribution::Block | Distribution::Cyclic) => c.min(n),
                        _ => c,
                    }
                })
                .collect();
            if let Some(n) = args.ntasks_per_node {
                let most = u64::from(n) * nodes.len() as u64;
                if u64::from(args.np) > most {
                    return Err(Failure::Usage(format!(
                        "--ntasks-per-node {n} on {} node(s) holds at most {most} task(s), not \
                         {}: give fewer tasks, more nodes or a larger --ntasks-per-node",
                        nodes.len(),
                        args.np
                    )));
                }
            }
            (distribution.slurm_counts(&cpus, args.np), true)
        }
    };
    Ok(Some(RankSplit {
        distribution,
        inside: inside.map(str::to_string),
        from_cpus,
        ranks: distribution.ranks(&counts),
    }))
}

/// `--ranks FIRST[-LAST]` read against the `np` ranks placed.
pub(crate) fn rank_range(text: &str, np: usize) -> Result<(u32, u32), Failure> {
    let bad = |why: &str| {
        Failure::Usage(format!(
            "--ranks {text}: {why}; give one rank (7) or a range (100-199) of ranks 0-{}",
            np.saturating_sub(1)
        ))
    };
    let number = |t: &str| {
        t.trim()
            .parse::<u32>()
            .map_err(|_| bad("not a rank number"))
    };
    let (first, last) = match text.split_once('-') {
        Some((a, b)) => (number(a)?, number(b)?),
        None => (number(text)?, number(text)?),
    };
    if first > last {
        return Err(bad("the first rank is after the last"));
    }
    if first as usize >= np {
        return Err(bad(&format!("there are {np} ranks")));
    }
    Ok((first, last))
}

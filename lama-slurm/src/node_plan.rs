//! A plan written by `lama plan`, applied on one node: this node's ranks, checked against the
//! tasks the launcher started here and the CPUs they may use, become [`TaskPlacement`]s. Shared
//! by the plugin (`--lama-plan`) and `lama exec --plan`.

use crate::node::TaskPlacement;
use crate::task_env::{omp_place_list, omp_places};
use lama_engine::{numa_nodes, render, CpuList, Machine, Membind};
use lama_planfile::NodePlan;
use std::fmt;

/// What the launcher started on this node: the node's name, the global ranks to place (by
/// local id: all of a Slurm step's local tasks, or `lama exec`'s own rank), how many ranks run
/// here, the whole count where it is known, the CPUs they may use here, and who started them
/// with what would start them as the plan says (for the errors).
#[derive(Debug, Clone, Copy)]
pub struct StepHere<'a> {
    /// The node's short host name.
    pub node: &'a str,
    /// The global ranks placed, e.g. `globals[i]` the global rank of local task `i`.
    pub globals: &'a [u32],
    /// How many ranks the launcher started on this node.
    pub local_count: usize,
    /// How many ranks it started in all, where it says.
    pub total: Option<u32>,
    /// The CPUs the ranks may use on this node.
    pub cpus: &'a CpuList,
    /// Who started them, as errors say it (`Slurm`, `mpirun`, ...).
    pub launcher: &'a str,
    /// How to start the ranks where the plan puts them, as errors say it.
    pub relaunch: &'a str,
}

/// What srun needs to start a plan's ranks where it puts them.
pub const SRUN_RELAUNCH: &str = "launch with SLURM_HOSTFILE set to the plan's .hosts file and \
                                 -m arbitrary";

/// This node's tasks from the plan as this node read it ([`PlanFile::parse_for_node`]: only
/// its own lines expanded, and the nodes of the ranks `step` names where the plan puts them
/// elsewhere), for the ranks `step` names. Every mismatch is an error that
/// says what does not fit, found before any task is bound.
///
/// [`PlanFile::parse_for_node`]: lama_planfile::PlanFile::parse_for_node
pub fn planned_tasks(
    machine: &Machine,
    plan: &NodePlan,
    step: &StepHere<'_>,
    verbose: bool,
    omp: bool,
) -> Result<Vec<TaskPlacement>, String> {
    let StepHere {
        node,
        globals,
        local_count,
        total,
        cpus: step_cpus,
        launcher,
        relaunch,
    } = *step;
    if let Some(total) = total.filter(|&t| t != plan.total) {
        return Err(format!(
            "the plan is for {} ranks but the step has {total} tasks: launch with -n{}",
            plan.total, plan.total
        ));
    }
    let here = plan.here.len();
    let mut tasks = Vec::with_capacity(globals.len());
    for &g in globals {
        let Some(r) = plan.rank(g) else {
            return Err(match plan.node_of(g) {
                Some(other) => {
                    format!("rank {g} is planned on {other} but {launcher} started it on {node}: {relaunch}")
                }
                None => format!("rank {g} is not in the plan"),
            });
        };
        let outside = CpuList::from_cpus(
            r.cpus
                .cpus()
                .iter()
                .copied()
                .filter(|&c| !step_cpus.contains(c)),
        );
        if !outside.is_empty() {
            return Err(format!(
                "rank {g} is planned on CPUs {} but this step has only {step_cpus} on {node} \
                 (CPUs {outside} are outside it): plan with --restrict {node}={step_cpus}",
                r.cpus
            ));
        }
        let pu_logical = machine
            .logical_of(r.pu)
            .ok_or_else(|| format!("rank {g}: PU {} is not in {node}'s topology", r.pu))?;
        let bound: Vec<u32> = r
            .cpus
            .cpus()
            .iter()
            .filter_map(|&c| machine.logical_of(c))
            .collect();
        let places = match omp {
            true => omp_places(machine, &bound, false),
            false => Vec::new(),
        };
        tasks.push(TaskPlacement {
            global: g,
            pu_os: r.pu,
            pu_logical,
            cpus: r.cpus.clone(),
            picture: if verbose {
                render::compact_picture(machine, &bound)
            } else {
                String::new()
            },
            omp_places: if omp {
                omp_place_list(&places)
            } else {
                String::new()
            },
            omp_place_count: places.len(),
            mems: numa_nodes(machine, &bound),
            devices: Vec::new(),
            bind: None,
        });
    }
    if here != local_count {
        return Err(format!(
            "the plan puts {here} rank(s) on {node} but {launcher} started {local_count} here: \
             {relaunch}"
        ));
    }
    Ok(tasks)
}

/// The variables of a task placed by a plan: `LAMA_PLAN=1`, `LAMA_CPUS`, `LAMA_PU`,
/// `LAMA_PU_LOGICAL`, and `LAMA_MEMS`/`LAMA_MEMBIND` when memory is bound.
pub fn planned_environment(
    task: &TaskPlacement,
    mems: Option<(Membind, &CpuList)>,
) -> Vec<(&'static str, String)> {
    let omp = (!task.omp_places.is_empty()).then(|| {
        [
            ("OMP_PLACES", task.omp_places.clone()),
            ("OMP_PROC_BIND", "close".to_string()),
        ]
    });
    let mut env = vec![
        ("LAMA_PLAN", "1".to_string()),
        ("LAMA_CPUS", task.cpus.to_string()),
        ("LAMA_PU", task.pu_os.to_string()),
        ("LAMA_PU_LOGICAL", task.pu_logical.to_string()),
    ];
    if let Some((policy, m)) = mems {
        env.push(("LAMA_MEMS", m.to_string()));
        env.push(("LAMA_MEMBIND", policy.to_string()));
    }
    env.extend(omp.into_iter().flatten());
    env
}

/// The `--lama-verbose` line of a rank placed by a plan, on node `node` as local task `local`
/// of process `pid`, as [`crate::node_env::verbose_line`] writes a layout's: its CPUs, the
/// memory it is bound to (`mems`), and where its CPUs are in a few words (the compact
/// picture, `package[0][core:0-1]`).
pub fn verbose_line(
    node: &str,
    local: impl fmt::Display,
    pid: u32,
    task: &TaskPlacement,
    mems: Option<(Membind, &CpuList)>,
) -> String {
    format!(
        "lama plan - {node}, task {:>2} {:>2} [{pid}]: cpus {} {}{}",
        task.global,
        local,
        task.cpus,
        task.picture,
        mems.map(|(policy, m)| format!(", mems {m} {policy}"))
            .unwrap_or_default(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use lama_planfile::{NodeQuery, PlanFile};

    /// A plan of 100,000 ranks on 4,167 nodes of 24 cores (3.4 MB): one
    /// node's 24 ranks come out of it, each on the CPU the plan gives it.
    #[test]
    fn a_hundred_thousand_rank_plan_reaches_its_nodes() {
        let np: u32 = 100_000;
        let node = |r: u32| format!("node{:04}", r / 24 + 1);
        // Ranks dealt cyclically over each node's cores, written by hand: rank r is on core
        // (r * 5) % 24 of its node, a permutation of 0..24 within each node.
        let mut text = format!("lama-plan 1\nranks {np}\n");
        for r in 0..np {
            let cpu = (r % 24) * 5 % 24;
            text += &format!("rank {r} {} pu {cpu} cpus {cpu}\n", node(r));
        }
        assert!(text.len() > 3_000_000, "{}", text.len());
        let read = text;
        let m = Machine::synthetic("pack:2 core:12 pu:1").unwrap();
        // The last, partly filled node and one in the middle.
        for (name, first, count) in [("node4167", 99_984u32, 16u32), ("node2000", 47_976, 24)] {
            let globals: Vec<u32> = (first..first + count).collect();
            let q = NodeQuery {
                node: name,
                cpu_bound: 24,
                total: Some(np),
                most_here: globals.len(),
                wanted: &globals,
            };
            let file = PlanFile::parse_for_node(&read, &q).unwrap();
            let cpus = CpuList::parse("0-23").unwrap();
            let here = StepHere {
                node: name,
                globals: &globals,
                local_count: globals.len(),
                total: Some(np),
                cpus: &cpus,
                launcher: "Slurm",
                relaunch: SRUN_RELAUNCH,
            };
            let tasks = planned_tasks(&m, &file, &here, false, false).unwrap();
            assert_eq!(tasks.len(), count as usize);
            for (t, g) in tasks.iter().zip(first..) {
                assert_eq!(t.global, g);
                assert_eq!(t.cpus.to_string(), ((g % 24) * 5 % 24).to_string());
            }
        }
    }

    #[test]
    fn plans_apply_only_where_they_fit() {
        let m = Machine::synthetic("pack:2 core:2 pu:1").unwrap();
        let text =
            "lama-plan 1\nranks 3\nrank 0 n1 pu 2 cpus 2\nrank 1 n2 pu 0 cpus 0\nrank 2 n1 pu 1 cpus 0-1\n";
        let q = |node, cpu_bound| NodeQuery {
            node,
            cpu_bound,
            total: None,
            most_here: 8,
            wanted: &[0, 1, 2],
        };
        let file = PlanFile::parse_for_node(text, &q("n1", 4)).unwrap();
        let all = CpuList::parse("0-3").unwrap();
        fn here<'a>(
            node: &'a str,
            globals: &'a [u32],
            total: u32,
            cpus: &'a CpuList,
        ) -> StepHere<'a> {
            StepHere {
                node,
                globals,
                local_count: globals.len(),
                total: Some(total),
                cpus,
                launcher: "Slurm",
                relaunch: SRUN_RELAUNCH,
            }
        }
        let tasks = planned_tasks(&m, &file, &here("n1", &[0, 2], 3, &all), true, true).unwrap();
        assert_eq!(tasks[0].cpus.to_string(), "2");
        assert_eq!(tasks[1].cpus.to_string(), "0-1");
        assert_eq!(tasks[1].picture, "package[0][core:0-1]");
        assert_eq!(tasks[1].omp_places, "{0},{1}");
        // The verbose line, by hand: global rank 2, local task 1, CPUs 0-1, PU 1.
        assert_eq!(
            verbose_line("n1", 1, 42, &tasks[1], None),
            "lama plan - n1, task  2  1 [42]: cpus 0-1 package[0][core:0-1]"
        );
        let env = planned_environment(&tasks[1], None);
        assert!(env.contains(&("OMP_PLACES", "{0},{1}".to_string())));
        assert!(env.contains(&("LAMA_CPUS", "0-1".to_string())));
        for (node, globals, total, cpus, why) in [
            (
                "n1",
                vec![0, 2],
                4,
                "0-3",
                "the plan is for 3 ranks but the step has 4 tasks",
            ),
            (
                "n1",
                vec![0, 1],
                3,
                "0-3",
                "rank 1 is planned on n2 but Slurm started it on n1",
            ),
            (
                "n1",
                vec![0],
                3,
                "0-3",
                "the plan puts 2 rank(s) on n1 but Slurm started 1 here",
            ),
            (
                "n1",
                vec![0, 2],
                3,
                "1-3",
                "rank 2 is planned on CPUs 0-1 but this step has only 1-3",
            ),
        ] {
            let cpus = CpuList::parse(cpus).unwrap();
            let e = planned_tasks(&m, &file, &here(node, &globals, total, &cpus), false, false)
                .unwrap_err();
            assert!(e.starts_with(why), "{e}");
        }
        let far = PlanFile::parse_for_node(
            "lama-plan 1\nranks 1\nrank 0 n1 pu 9 cpus 9\n",
            &q("n1", 10),
        )
        .unwrap();
        let wide = CpuList::parse("0-9").unwrap();
        let e = planned_tasks(&m, &far, &here("n1", &[0], 1, &wide), false, false).unwrap_err();
        assert!(e.contains("PU 9 is not in n1's topology"), "{e}");
    }
}

//! Which node this is in a step, as Slurm numbers it, and which ranks a plan's tasks have in a
//! heterogeneous step, where slurmstepd counts within one component.

use lama_slurm::hostlist::shown;
use slurm_spank::SpankHandle;

/// A variable of the step's environment, if it is there and not absurdly long.
fn env(spank: &SpankHandle, name: &str) -> Option<String> {
    crate::bounded::env_value(spank.getenv(name).ok().flatten())
}

/// Whether the step is heterogeneous (`srun A : B`), as srun decides it: `SLURM_HET_SIZE` in the
/// environment (srun asks `getenv("SLURM_HET_SIZE")`, `srun_job.c`; salloc and slurmctld set it
/// beside the old `SLURM_PACK_SIZE`). `SLURM_PACK_SIZE` alone, which only a user sets, does not
/// make a step heterogeneous.
pub fn is_het(env: impl Fn(&str) -> Option<String>) -> bool {
    env("SLURM_HET_SIZE").is_some()
}

/// The ranks of a plan's tasks on this node in a heterogeneous step. There slurmstepd knows
/// only its component: `S_JOB_LOCAL_TO_GLOBAL_ID` and `S_JOB_TOTAL_TASK_COUNT` count within it,
/// and the rank a task gets, `SLURM_PROCID`, adds the tasks of the components before it
/// (`het_job_task_offset`, set in the task's environment just before `task_init`). So the
/// node's tasks take the plan's ranks on this node in ascending order, as Slurm numbers a
/// node's tasks, when there are as many; each task's `SLURM_PROCID` is checked against its
/// rank before it is bound ([`crate::step::Step::Planned`]'s `check_procid`).
pub fn het_plan_ranks(planned: Vec<u32>, local_tasks: u32, node: &str) -> Result<Vec<u32>, String> {
    if planned.len() != local_tasks as usize {
        return Err(format!(
            "the plan puts {} rank(s) on {node} but Slurm started {local_tasks} task(s) of this \
             heterogeneous step here: in such a step each component's tasks follow the tasks of \
             the components before it, and the plan must put on each node the ranks Slurm gives it",
            planned.len()
        ));
    }
    Ok(planned)
}

/// A heterogeneous step's task count: `SLURM_STEP_NUM_TASKS` (`step_num_tasks`), which srun
/// sets to every component's.
pub fn het_total(step_num_tasks: Option<&str>) -> Result<u32, String> {
    step_num_tasks
        .and_then(|n| n.trim().parse().ok())
        .ok_or_else(|| {
            "SLURM_STEP_NUM_TASKS, the heterogeneous step's task count, is not in its environment"
                .to_string()
        })
}

/// This node's name as Slurm knows it (its `NodeName`, which need not be the kernel's host
/// name): slurmstepd's own `SLURMD_NODENAME`, which slurmstepd sets from slurmd's
/// configuration before any SPANK callback ([`crate::slurm_conf::node_name`]; never the job's
/// variable of that name). Only where slurmstepd has none: its place in the step's node list
/// (`S_JOB_NODEID` in `SLURM_STEP_NODELIST`), or in a heterogeneous step in its component's
/// ([`component_node`]).
pub fn slurm_node_name(spank: &SpankHandle) -> Result<String, String> {
    if let Some(own) = crate::slurm_conf::node_name(crate::slurm_conf::Daemon::Slurmstepd, "") {
        return Ok(own);
    }
    let id = spank
        .job_nodeid()
        .map_err(|e| format!("S_JOB_NODEID: {e}"))?;
    let here = Here {
        id,
        job: spank.job_id().map_err(|e| format!("S_JOB_ID: {e}"))?,
        nodes: spank
            .job_nnodes()
            .map_err(|e| format!("S_JOB_NNODES: {e}"))?,
    };
    node_name_of(|name| env(spank, name), &here, host_name)
}

/// The kernel's host name, short (up to the first dot).
fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().split('.').next().unwrap_or_default().to_string())
        .unwrap_or_default()
}

/// What `slurmstepd` says of this node in a step: `S_JOB_NODEID`, `S_JOB_ID`, `S_JOB_NNODES`
/// (all of this node's component in a heterogeneous step).
pub(crate) struct Here {
    pub(crate) id: u32,
    pub(crate) job: u32,
    pub(crate) nodes: u32,
}

/// [`slurm_node_name`] from the step's environment (`env`). In a heterogeneous step Slurm sets
/// `SLURM_STEP_NODELIST` to every component's nodes (`env_array_for_step`, `het_job_node_list`)
/// while `S_JOB_NODEID` counts within this node's component, so the component's own list is
/// read instead ([`component_node`]); `host` gives the host name, asked only there.
pub(crate) fn node_name_of(
    env: impl Fn(&str) -> Option<String>,
    here: &Here,
    host: impl FnOnce() -> String,
) -> Result<String, String> {
    let list =
        env("SLURM_STEP_NODELIST").ok_or("SLURM_STEP_NODELIST is not in the step's environment")?;
    if !is_het(&env) {
        return nth_node(&list, here.id);
    }
    component_node(&env, here, &list, host)
}

/// This node's name in a heterogeneous step: its component is the one whose
/// `SLURM_JOB_ID_HET_GROUP_<i>` is `S_JOB_ID`, and `S_JOB_NODEID` indexes that component's
/// `SLURM_JOB_NODELIST_HET_GROUP_<i>` when the step runs on all of them (`S_JOB_NNODES` of
/// them, as when srun makes the heterogeneous job). Otherwise the step runs on some of the
/// component's nodes, which its environment does not list: the host name is taken where it is
/// one of them, else the name is unknown and said so.
fn component_node(
    env: &impl Fn(&str) -> Option<String>,
    here: &Here,
    all: &str,
    host: impl FnOnce() -> String,
) -> Result<String, String> {
    let size: u32 = env("SLURM_HET_SIZE")
        .and_then(|s| s.trim().parse().ok())
        .ok_or("SLURM_HET_SIZE is not a number")?;
    // Slurm writes each component's variables under both names (env.c
    // `env_array_overwrite_het_fmt`), and an srun that makes the heterogeneous job itself only
    // the old one (srun_job.c `_build_key`: `SLURM_JOB_ID_PACK_GROUP_<i>`).
    let group = |what: &str, i: u32| {
        env(&format!("{what}_HET_GROUP_{i}")).or_else(|| env(&format!("{what}_PACK_GROUP_{i}")))
    };
    // (Slurm limits a heterogeneous job to MAX_HET_JOB_COMPONENTS, 128, components.)
    let component = (0..size.min(128))
        .find(|&i| group("SLURM_JOB_ID", i).is_some_and(|j| j.trim() == here.job.to_string()))
        .ok_or_else(|| {
            format!(
                "in this heterogeneous step no SLURM_JOB_ID_HET_GROUP_<i> is job {}, so this \
                 node's component is unknown",
                here.job
            )
        })?;
    let list = group("SLURM_JOB_NODELIST", component).ok_or_else(|| {
        format!("SLURM_JOB_NODELIST_HET_GROUP_{component} is not in the step's environment")
    })?;
    // Counted and searched, never expanded: the list is the user's to forge.
    let count = lama_slurm::hostlist::count(&list)?;
    if count == u64::from(here.nodes) {
        return nth_node(&list, here.id);
    }
    let host = host();
    if lama_slurm::hostlist::contains(&list, &host)? {
        return Ok(host);
    }
    Err(format!(
        "this heterogeneous step runs on {} of its component {component}'s {count} node(s) \
         ({}), and neither its node list ({} holds every component's) nor this host's name \
         ({host}) tells which one this is",
        here.nodes,
        shown(&list),
        shown(all),
    ))
}

/// The `id`th name of a Slurm hostlist, found without expanding it.
fn nth_node(list: &str, id: u32) -> Result<String, String> {
    if let Some(name) = lama_slurm::hostlist::nth(list, u64::from(id))? {
        return Ok(name);
    }
    Err(format!(
        "S_JOB_NODEID {id} is beyond the step's {} node(s) ({})",
        lama_slurm::hostlist::count(list)?,
        shown(list)
    ))
}

#[cfg(test)]
mod tests {
    use super::{het_plan_ranks, het_total, is_het, nth_node};

    /// The environment of the heterogeneous step `srun -w node2 -n1 : -w node1,node3 -N2 -n2`
    /// as Slurm 24.11 set it on the cluster (component 0 is job 1 on node2, component 1 job 2
    /// on node1 and node3).
    fn het(var: &str) -> Option<String> {
        Some(
            match var {
                "SLURM_STEP_NODELIST" => "node[1-3]",
                "SLURM_HET_SIZE" => "2",
                "SLURM_JOB_ID_PACK_GROUP_0" | "SLURM_JOB_ID_HET_GROUP_0" => "1",
                "SLURM_JOB_ID_PACK_GROUP_1" => "2",
                "SLURM_JOB_NODELIST_HET_GROUP_0" => "node2",
                "SLURM_JOB_NODELIST_PACK_GROUP_1" => "node[1,3]",
                _ => return None,
            }
            .to_string(),
        )
    }

    #[test]
    fn a_heterogeneous_steps_node_is_found_in_its_component() {
        use super::{node_name_of, Here};
        let here = |job, id, nodes| Here { id, job, nodes };
        let name = |h: &'static str| move || h.to_string();
        // By hand: node 0 of component 0 is node2 (S_JOB_NODEID 0 would be node1 in
        // SLURM_STEP_NODELIST); node 1 of component 1 is node3 (there, node2).
        assert_eq!(
            node_name_of(het, &here(1, 0, 1), name("x")).unwrap(),
            "node2"
        );
        assert_eq!(
            node_name_of(het, &here(2, 1, 2), name("x")).unwrap(),
            "node3"
        );
        assert_eq!(
            node_name_of(het, &here(2, 0, 2), name("x")).unwrap(),
            "node1"
        );
        // A step on one of component 1's two nodes: the host name, where it is one of them.
        assert_eq!(
            node_name_of(het, &here(2, 0, 1), name("node3")).unwrap(),
            "node3"
        );
        let e = node_name_of(het, &here(2, 0, 1), name("login")).unwrap_err();
        assert!(
            e.contains("runs on 1 of its component 1's 2 node(s) (node[1,3])"),
            "{e}"
        );
        let e = node_name_of(het, &here(7, 0, 1), name("x")).unwrap_err();
        assert!(e.contains("no SLURM_JOB_ID_HET_GROUP_<i> is job 7"), "{e}");
        // Not heterogeneous: the step's list, by S_JOB_NODEID.
        let plain = |v: &str| (v == "SLURM_STEP_NODELIST").then(|| "node[1-3]".to_string());
        assert_eq!(
            node_name_of(plain, &here(1, 0, 3), name("x")).unwrap(),
            "node1"
        );
    }

    #[test]
    fn the_node_is_found_by_its_place_in_the_step() {
        assert_eq!(nth_node("c[01-03],gpu7", 1).unwrap(), "c02");
        assert_eq!(nth_node("c[01-03],gpu7", 3).unwrap(), "gpu7");
        let e = nth_node("c[01-03]", 3).unwrap_err();
        assert_eq!(
            e,
            "S_JOB_NODEID 3 is beyond the step's 3 node(s) (c[01-03])"
        );
        assert!(nth_node("c[01-", 0).is_err());
    }

    /// A step over 100,000 scattered nodes: its node list (about 700 KB) is within the
    /// environment bound and each node finds its name.
    #[test]
    fn a_node_list_of_a_hundred_thousand_scattered_nodes() {
        let ids: Vec<String> = (0..100_000).map(|i| format!("{:06}", 2 * i + 1)).collect();
        let list = format!("nid[{}]", ids.join(","));
        assert!(list.len() > 600_000);
        let kept = crate::bounded::env_value(Some(list)).expect("within the bound");
        assert_eq!(nth_node(&kept, 0).unwrap(), "nid000001");
        assert_eq!(nth_node(&kept, 99_999).unwrap(), "nid199999");
        let e = nth_node(&kept, 100_000).unwrap_err();
        assert_eq!(
            e,
            format!(
                "S_JOB_NODEID 100000 is beyond the step's 100000 node(s) ({}... ({} bytes))",
                &kept[..200],
                kept.len()
            )
        );
    }

    /// A user who exports the variables of a heterogeneous job before a plain srun:
    /// `SLURM_PACK_SIZE` alone does not make a step heterogeneous (srun asks `SLURM_HET_SIZE`),
    /// and a forged list of a billion names behind a 100 KB prefix (about 100 TB expanded) is
    /// counted and searched, not expanded; the error names its size, not its text.
    #[test]
    fn a_forged_heterogeneous_environment_costs_nothing() {
        use super::{node_name_of, Here};
        let pack = |v: &str| {
            Some(
                match v {
                    "SLURM_STEP_NODELIST" => "node1",
                    "SLURM_PACK_SIZE" => "2",
                    "SLURM_JOB_ID_PACK_GROUP_1" => "5",
                    "SLURM_JOB_NODELIST_PACK_GROUP_1" => "x[0-99]",
                    _ => return None,
                }
                .to_string(),
            )
        };
        assert!(!is_het(pack));
        let here = Here {
            id: 0,
            job: 5,
            nodes: 1,
        };
        assert_eq!(node_name_of(pack, &here, || "h".into()).unwrap(), "node1");
        let huge = format!("{}[0-999999999]", "p".repeat(100_000));
        let forged = |v: &str| match v {
            "SLURM_STEP_NODELIST" => Some("node1".to_string()),
            "SLURM_HET_SIZE" => Some("2".to_string()),
            "SLURM_JOB_ID_HET_GROUP_1" => Some("5".to_string()),
            "SLURM_JOB_NODELIST_HET_GROUP_1" => Some(huge.clone()),
            _ => None,
        };
        let e = node_name_of(forged, &here, || "node1".into()).unwrap_err();
        assert!(e.len() < 500, "{}", e.len());
        assert!(
            e.contains(&format!(
                "runs on 1 of its component 1's 1000000000 node(s) ({}... (100013 bytes))",
                "p".repeat(200)
            )),
            "{e}"
        );
    }

    #[test]
    fn a_heterogeneous_plan_takes_the_nodes_ranks_in_order_and_the_steps_count() {
        // Component 1 of `srun -w node2 -n2 : -w node1,node3 -n4` on node3: the plan has
        // ranks 4 and 5 there, Slurm's local ids 0 and 1; the step has 6 tasks.
        let ranks = het_plan_ranks(vec![4, 5], 2, "node3").unwrap();
        assert_eq!((ranks, het_total(Some("6"))), (vec![4, 5], Ok(6)));
        let e = het_plan_ranks(vec![4, 5, 6], 2, "node3").unwrap_err();
        assert!(
            e.starts_with("the plan puts 3 rank(s) on node3 but Slurm started 2 task(s)"),
            "{e}"
        );
        let e = het_total(None).unwrap_err();
        assert!(e.contains("SLURM_STEP_NUM_TASKS"), "{e}");
        assert!(is_het(het));
        assert!(!is_het(|_| None));
    }
}

//! In each task, just before it executes (`task_init`): its CPU affinity, its memory policy,
//! its `LAMA_*` and OpenMP variables and the `--lama-verbose` line, from this node's
//! [`Step`]. An error is the message for the user's terminal.

use crate::placement::TaskPlacement;
use crate::plan_file::{self, PLAN_FILE_VARIABLE, PLAN_VARIABLE};
use crate::step::Step;
use crate::{bind, inherited, task_env};
use lama_engine::Membind;
use slurm_spank::{spank_log_user, SpankHandle};

/// Removes the plugin's own variables (the plan's text or file, srun's note on its options) from the
/// task's environment. Never fatal: this runs in every task of every step.
pub fn remove_private_variables(spank: &mut SpankHandle) {
    for variable in [
        PLAN_VARIABLE,
        PLAN_FILE_VARIABLE,
        inherited::OWN_OPTIONS_VARIABLE,
    ] {
        if spank.getenv(variable).ok().flatten().is_some() {
            if let Err(e) = spank.unsetenv(variable) {
                tracing::warn!("lama: cannot remove {variable} from the task: {e}");
            }
        }
    }
}

/// The calling task's local id and placement.
fn this_task<'a>(
    spank: &SpankHandle,
    tasks: &'a [TaskPlacement],
) -> Result<(i32, &'a TaskPlacement), String> {
    let local = spank.task_id().map_err(|e| e.to_string())?;
    usize::try_from(local)
        .ok()
        .and_then(|l| tasks.get(l))
        .map(|task| (local, task))
        .ok_or_else(|| format!("lama: no placement for local task {local}"))
}

/// Binds the calling task and sets its variables as `step` says.
pub fn apply(spank: &mut SpankHandle, node: &str, step: &Step) -> Result<(), String> {
    match step {
        Step::Untouched => Ok(()),
        Step::Layout {
            request,
            cpus,
            tasks,
        } => {
            let (local, task) = this_task(spank, tasks)?;
            let fail = |e: String| format!("lama: {node}: task {}: {e}", task.global);
            let gpu_unit;
            let task = if task.slurm_gpus.is_empty() {
                task
            } else {
                let given =
                    crate::bounded::env_value(spank.getenv("SLURM_STEP_GPUS").ok().flatten());
                gpu_unit =
                    unit_of_slurms_gpus(tasks, task.global, given.as_deref()).map_err(fail)?;
                &gpu_unit
            };
            let bound = request.binding() != lama_engine::Bind::None;
            if bound {
                bind::set_affinity(&task.cpus).map_err(fail)?;
            }
            // The NUMA nodes the memory policy really names (fewer where the kernel lacks
            // MPOL_PREFERRED_MANY): what LAMA_MEMS reports.
            let used_mems = match task_env::memory_binding(request, task) {
                Some((policy, mems)) => Some(bind::set_membind(policy, &mems).map_err(fail)?),
                None => None,
            };
            for (name, value) in task_env::task_environment(request, task) {
                let value = match &used_mems {
                    Some(used) if name == "LAMA_MEMS" => used.to_string(),
                    _ => value,
                };
                setenv(spank, name, value)?;
            }
            // GPU visibility replaces Slurm's; a NIC variable the user set is left alone.
            for (name, value) in &task.devices {
                let user_choice = matches!(*name, "UCX_NET_DEVICES" | "NCCL_IB_HCA");
                if !(user_choice && has(spank, name)) {
                    setenv(spank, name, value.clone())?;
                }
            }
            // The user's own OMP_NUM_THREADS wins.
            if request.omp && bound && !has(spank, "OMP_NUM_THREADS") {
                let threads = task_env::omp_threads(*cpus, task);
                setenv(spank, "OMP_NUM_THREADS", threads.to_string())?;
            }
            if request.verbose {
                spank_log_user!(
                    "{}",
                    task_env::verbose_line(request, node, local as u32, std::process::id(), task)
                );
            }
            Ok(())
        }
        Step::Planned {
            membind,
            verbose,
            tasks,
            check_procid,
        } => {
            let (local, task) = this_task(spank, tasks)?;
            let fail = |e: String| format!("lama: {node}: task {}: {e}", task.global);
            if *check_procid {
                let procid = crate::bounded::env_value(spank.getenv("SLURM_PROCID").ok().flatten());
                procid_is(procid.as_deref(), task.global).map_err(fail)?;
            }
            bind::set_affinity(&task.cpus).map_err(fail)?;
            let mems = match *membind != Membind::None && !task.mems.is_empty() {
                true => Some(bind::set_membind(*membind, &task.mems).map_err(fail)?),
                false => None,
            };
            for (name, value) in
                plan_file::planned_environment(task, mems.as_ref().map(|m| (*membind, m)))
            {
                setenv(spank, name, value)?;
            }
            if task.omp_place_count > 0 && !has(spank, "OMP_NUM_THREADS") {
                setenv(spank, "OMP_NUM_THREADS", task.omp_place_count.to_string())?;
            }
            if *verbose {
                spank_log_user!(
                    "lama-plan - {node}, task {:>2} {:>2} [{}]: mask {} set (cpus {}){}, mapped PU L#{} P#{} {}",
                    task.global,
                    local,
                    std::process::id(),
                    task_env::hex_mask(&task.cpus),
                    task.cpus,
                    mems.map(|m| format!(", mems {m} {membind}")).unwrap_or_default(),
                    task.pu_logical,
                    task.pu_os,
                    task.picture
                );
            }
            Ok(())
        }
    }
}

/// That the task Slurm started is the rank the plan placed it as: its `SLURM_PROCID` (`procid`)
/// is `rank`. In a heterogeneous step a node's tasks were given the plan's ranks there in
/// order ([`crate::step_node::het_plan_ranks`]); Slurm's own rank is known only now.
fn procid_is(procid: Option<&str>, rank: u32) -> Result<(), String> {
    match procid.map(|p| p.trim().parse::<u32>()) {
        Some(Ok(p)) if p == rank => Ok(()),
        Some(Ok(p)) => Err(format!(
            "Slurm started rank {p} here where the plan has rank {rank}: in a heterogeneous \
             step the ranks follow the components in order; make the plan put on each node \
             the ranks Slurm gives it"
        )),
        _ => Err(format!(
            "SLURM_PROCID is {} in this task's environment, so it cannot be checked to be the \
             plan's rank {rank}",
            procid.map_or("not set".to_string(), |p| format!(
                "'{}'",
                lama_slurm::hostlist::shown(p)
            ))
        )),
    }
}

/// Under Slurm's per-task GPU binding: the placement made beside the GPUs Slurm gave this
/// task (`given`: the task's own `SLURM_STEP_GPUS`, which slurmstepd rewrites for each task
/// before `task_init`), carrying the task's rank `global`. Slurm chooses a task's GPUs by the
/// CPU mask task/affinity computed for it, so they need not be the ones its rank was placed
/// beside in `user_init`; GPUs that match no placement of this node fail the task rather than
/// bind it away from them.
fn unit_of_slurms_gpus(
    tasks: &[TaskPlacement],
    global: u32,
    given: Option<&str>,
) -> Result<TaskPlacement, String> {
    let way_out = "--gpu-bind=none lets LAMA choose each task's GPUs, or use a layout without 'g'";
    let given = given.filter(|g| !g.trim().is_empty()).ok_or_else(|| {
        format!(
            "Slurm binds GPUs to each task, and this task's environment names none \
             (SLURM_STEP_GPUS is not set): its GPUs are unknown, so it is not bound beside \
             guessed ones; {way_out}"
        )
    })?;
    let mut mine = lama_slurm::gpu::parse_indexes(given)?;
    mine.sort_unstable();
    match tasks.iter().find(|t| t.slurm_gpus == mine) {
        Some(unit) => Ok(TaskPlacement {
            global,
            ..unit.clone()
        }),
        None => Err(format!(
            "Slurm gave this task GPU(s) {given} (SLURM_STEP_GPUS), which are not one of the GPU \
             sets this node's tasks were placed beside ({}); rather than bind it away from its \
             GPUs the task is not started; {way_out}",
            tasks
                .iter()
                .map(|t| {
                    t.slurm_gpus
                        .iter()
                        .map(u32::to_string)
                        .collect::<Vec<_>>()
                        .join(",")
                })
                .collect::<Vec<_>>()
                .join(" ")
        )),
    }
}

fn has(spank: &SpankHandle, name: &str) -> bool {
    spank.getenv(name).ok().flatten().is_some()
}

fn setenv(spank: &mut SpankHandle, name: &str, value: String) -> Result<(), String> {
    spank
        .setenv(name, value, true)
        .map_err(|e| format!("lama: cannot set {name} in the task: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use lama_engine::CpuList;

    fn unit(global: u32, cpus: &str, gpus: &[u32]) -> TaskPlacement {
        TaskPlacement {
            global,
            pu_os: 0,
            pu_logical: 0,
            cpus: CpuList::parse(cpus).unwrap(),
            picture: String::new(),
            omp_places: String::new(),
            omp_place_count: 0,
            mems: CpuList::new(),
            devices: vec![("LAMA_GPUS", gpus[0].to_string())],
            bind: None,
            slurm_gpus: gpus.to_vec(),
        }
    }

    #[test]
    fn a_task_takes_the_placement_of_the_gpus_slurm_gave_it() {
        // Rank 0 was placed beside GPU 0 (CPU 0), rank 1 beside GPU 2 (CPU 1). Slurm gave
        // rank 0 GPU 2 (its task/affinity mask was CPU 1): it runs on CPU 1 with LAMA_GPUS=2.
        let tasks = [unit(0, "0", &[0]), unit(1, "1", &[2])];
        let t = unit_of_slurms_gpus(&tasks, 0, Some("2")).unwrap();
        assert_eq!((t.global, t.cpus.to_string()), (0, "1".to_string()));
        assert_eq!(t.devices, vec![("LAMA_GPUS", "2".to_string())]);
        let t = unit_of_slurms_gpus(&tasks, 1, Some("0")).unwrap();
        assert_eq!((t.global, t.cpus.to_string()), (1, "0".to_string()));
        // Two GPUs per task, in any order.
        let tasks = [unit(0, "0-1", &[0, 1]), unit(1, "2-3", &[2, 3])];
        let t = unit_of_slurms_gpus(&tasks, 0, Some("3,2")).unwrap();
        assert_eq!(t.cpus.to_string(), "2-3");
    }

    #[test]
    fn gpus_that_match_no_placement_fail_the_task() {
        let tasks = [unit(0, "0-1", &[0, 1]), unit(1, "2-3", &[2, 3])];
        let e = unit_of_slurms_gpus(&tasks, 0, Some("1,2")).unwrap_err();
        assert!(
            e.starts_with("Slurm gave this task GPU(s) 1,2 (SLURM_STEP_GPUS), which are not one")
                && e.contains("(0,1 2,3)")
                && e.contains("--gpu-bind=none"),
            "{e}"
        );
        let e = unit_of_slurms_gpus(&tasks, 0, None).unwrap_err();
        assert!(e.contains("SLURM_STEP_GPUS is not set"), "{e}");
        let e = unit_of_slurms_gpus(&tasks, 0, Some("x")).unwrap_err();
        assert!(e.contains("is not a GPU index"), "{e}");
    }

    #[test]
    fn a_planned_task_is_the_rank_slurm_started() {
        assert!(procid_is(Some("4"), 4).is_ok());
        let e = procid_is(Some("2"), 4).unwrap_err();
        assert!(
            e.starts_with("Slurm started rank 2 here where the plan has rank 4"),
            "{e}"
        );
        let e = procid_is(None, 4).unwrap_err();
        assert!(e.starts_with("SLURM_PROCID is not set"), "{e}");
        let e = procid_is(Some("x"), 4).unwrap_err();
        assert!(e.starts_with("SLURM_PROCID is 'x'"), "{e}");
    }
}

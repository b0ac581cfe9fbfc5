//! In each task, just before it executes (`task_init`): its CPU affinity, its memory policy,
//! its `LAMA_*` and OpenMP variables and the `--lama-verbose` line, from this node's
//! [`Step`]. An error is the message for the user's terminal.

use crate::gpus::SlurmPerTask;
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
            per_task,
        } => {
            let placed;
            let (local, task) = match per_task {
                Some(p) => {
                    let local = spank.task_id().map_err(|e| e.to_string())?;
                    match task_of_slurms_gpus(spank, node, p, local) {
                        Ok(t) => placed = t,
                        Err(why) => {
                            // Fail closed: nothing is bound, and the task runs as Slurm alone
                            // would run it.
                            tracing::warn!("{why}");
                            spank_log_user!("{why}");
                            return Ok(());
                        }
                    }
                    (local, &placed)
                }
                None => this_task(spank, tasks)?,
            };
            let fail = |e: String| format!("lama: {node}: task {}: {e}", task.global);
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
                let mems = mems.as_ref().map(|m| (*membind, m));
                let line = lama_slurm::node_plan::verbose_line(
                    node,
                    local,
                    std::process::id(),
                    task,
                    mems,
                );
                spank_log_user!("{line}");
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

/// Under Slurm's per-task GPU binding: the calling task's placement beside the GPUs Slurm gave
/// it ([`SlurmPerTask::own_gpus`]: the step GPUs whose device files it may open, or where it
/// may open all of them, the ones its own `SLURM_STEP_GPUS` names). A task whose GPUs cannot
/// be told is not bound by LAMA (fail closed, as a step whose CPUs cannot be known): it keeps
/// Slurm's own binding, by whose CPU mask Slurm chose its GPUs, and the message says why.
fn task_of_slurms_gpus(
    spank: &SpankHandle,
    node: &str,
    per_task: &SlurmPerTask,
    local: i32,
) -> Result<TaskPlacement, String> {
    let rank = usize::try_from(local)
        .ok()
        .and_then(|l| per_task.globals.get(l))
        .map_or_else(|| format!("local task {local}"), |g| g.to_string());
    let fail = |e: String| {
        format!(
            "lama: {node}: task {rank}: warning: {e}; LAMA binds nothing for this task, which \
             keeps Slurm's own binding (by whose CPU mask Slurm chose its GPUs); --gpu-bind=none \
             lets LAMA choose each task's GPUs"
        )
    };
    let given = crate::bounded::env_value(spank.getenv("SLURM_STEP_GPUS").ok().flatten());
    let own = per_task
        .own_gpus(given.as_deref(), lama_hwloc::device_access)
        .map_err(fail)?;
    per_task.task(local as usize, &own).map_err(fail)
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

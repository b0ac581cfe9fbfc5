//! In each task, just before it executes (`task_init`): its CPU affinity, its memory policy,
//! its `LAMA_*` and OpenMP variables and the `--lama-verbose` line, from this node's
//! [`Step`]. An error is the message for the user's terminal.

use crate::placement::TaskPlacement;
use crate::plan_file::{self, PLAN_VARIABLE};
use crate::step::Step;
use crate::{bind, inherited, task_env};
use lama_engine::Membind;
use slurm_spank::{spank_log_user, SpankHandle};

/// Removes the plugin's own variables (the plan's text, srun's note on its options) from the
/// task's environment. Never fatal: this runs in every task of every step.
pub fn remove_private_variables(spank: &mut SpankHandle) {
    for variable in [PLAN_VARIABLE, inherited::OWN_OPTIONS_VARIABLE] {
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
        } => {
            let (local, task) = this_task(spank, tasks)?;
            let fail = |e: String| format!("lama: {node}: task {}: {e}", task.global);
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

fn has(spank: &SpankHandle, name: &str) -> bool {
    spank.getenv(name).ok().flatten().is_some()
}

fn setenv(spank: &mut SpankHandle, name: &str, value: String) -> Result<(), String> {
    spank
        .setenv(name, value, true)
        .map_err(|e| format!("lama: cannot set {name} in the task: {e}"))
}

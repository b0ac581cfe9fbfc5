//! What each task of a node gets besides its CPUs, as the plugin sets it in `task_init` and
//! `lama exec` before it executes the program: its memory policy, its `LAMA_*` and OpenMP
//! variables ([`crate::task_env`]), and the `--lama-verbose` line. Pure.

use crate::node::{StepCpus, StepRequest, TaskPlacement};
use crate::task_env::{Labels, TaskEnv};
use lama_engine::{Bind, CpuList, Membind};

/// The CPU set as a hexadecimal mask, as Slurm's `cpu-bind` lines print it.
pub fn hex_mask(cpus: &CpuList) -> String {
    let Some(&max) = cpus.cpus().last() else {
        return "0x0".to_string();
    };
    let mut words = vec![0u32; max as usize / 32 + 1];
    for &c in cpus.cpus() {
        words[c as usize / 32] |= 1 << (c % 32);
    }
    let mut s = String::from("0x");
    for (i, w) in words.iter().rev().enumerate() {
        if i == 0 {
            s += &format!("{w:X}");
        } else {
            s += &format!("{w:08X}");
        }
    }
    s
}

/// The `--lama-verbose` line for one task, in the style of Slurm's
/// `cpu-bind=MASK - node, task 0 0 [pid]: mask 0x3 set`, with the CPUs and where they are in a
/// few words (the compact picture, `package[0][core:0-1]`) at its end.
pub fn verbose_line(
    plan: &StepRequest,
    node: &str,
    local: u32,
    pid: u32,
    task: &TaskPlacement,
) -> String {
    let bind = plan.binding();
    let action = if bind == Bind::None {
        "not bound, mapped to".to_string()
    } else {
        format!("mask {} set (cpus {})", hex_mask(&task.cpus), task.cpus)
    };
    let memory = match (plan.membind, bind) {
        (Membind::None, _) => String::new(),
        (m, Bind::None) => format!(", memory not bound ({m} needs a CPU binding)"),
        (m, _) if task.mems.is_empty() => {
            format!(", memory not bound ({m}: the topology names no NUMA node)")
        }
        (m, _) => format!(", mems {} {m}", task.mems),
    };
    let devices: String = ["LAMA_GPUS", "LAMA_NICS"]
        .iter()
        .filter_map(|name| {
            let (_, v) = task.devices.iter().find(|(k, _)| k == name)?;
            let what = if *name == "LAMA_GPUS" { "gpus" } else { "nic" };
            Some(format!(", {what} {v}"))
        })
        .collect();
    format!(
        "lama-bind={} layout={} - {node}, task {:>2} {:>2} [{pid}]: {action} {}{memory}{devices}",
        binding_text(plan, task),
        plan.layout_text(),
        task.global,
        local,
        task.picture
    )
}

/// The binding a task was placed with, as the user writes it: its own
/// ([`TaskPlacement::bind`]), else the step's.
fn binding_text(plan: &StepRequest, task: &TaskPlacement) -> String {
    crate::task_env::bind_label(task.bind, || plan.binding_text())
}

/// Whether a task's memory policy is to be set, and to which NUMA nodes (OS indexes).
pub fn memory_binding(plan: &StepRequest, task: &TaskPlacement) -> Option<(Membind, CpuList)> {
    (plan.membind != Membind::None && plan.binding() != Bind::None && !task.mems.is_empty())
        .then(|| (plan.membind, task.mems.clone()))
}

/// The variables set in each task's environment ([`crate::task_env::variables`]):
/// `LAMA_*` (`LAMA_MEMS` and `LAMA_MEMBIND` when memory is bound), and with `--lama-omp` and a
/// binding, `OMP_PLACES` and `OMP_PROC_BIND=close` (the plugin also sets `OMP_NUM_THREADS` when
/// the job does not set it).
pub fn task_environment(plan: &StepRequest, task: &TaskPlacement) -> Vec<(&'static str, String)> {
    let labels = Labels::new(
        plan.layout_text(),
        binding_text(plan, task),
        &plan.mppr,
        plan.order,
    );
    let mems = memory_binding(plan, task);
    crate::task_env::variables(&TaskEnv {
        labels: &labels,
        cpus: &task.cpus,
        pu: (task.pu_os, task.pu_logical),
        mems: mems.as_ref().map(|(policy, m)| (*policy, m)),
        omp_places: (plan.omp && plan.binding() != Bind::None).then_some(task.omp_places.as_str()),
    })
}

/// `OMP_NUM_THREADS` for a task with `--lama-omp` (when the job does not set it): `-c` when
/// given, else one thread per place.
pub fn omp_threads(cpus: StepCpus, task: &TaskPlacement) -> usize {
    crate::task_env::omp_threads(cpus.per_task, task.omp_place_count)
}

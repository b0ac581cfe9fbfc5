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
/// `cpu-bind=MASK - node, task 0 0 [pid]: mask 0x3 set`: the layout and binding, the task, its
/// CPUs as a list (Slurm's hexadecimal mask is 66 characters on a node of 256 CPUs) and where
/// they are in a few words (the compact picture, `package[0][core:0-1]`):
/// `lama scbnh:1c - node1, task  1  1 [4242]: cpus 4-5 package[1][core:2]`. Within 80
/// columns for a core binding on nodes of up to 256 CPUs, node names of up to 8 characters,
/// tasks to 99 and pids to 6 digits; memory and devices add words at the end.
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
        format!("cpus {}", task.cpus)
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
        "lama {}:{} - {node}, task {:>2} {:>2} [{pid}]: {action} {}{memory}{devices}",
        plan.layout_text(),
        binding_text(plan, task),
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::node::{place_local, Origin};
    use lama_engine::{Layout, Machine, Mppr, Order};

    fn request(layout: &str, bind: &str, membind: Membind) -> StepRequest {
        StepRequest {
            layout: Layout::parse(layout).unwrap(),
            bind: Some(Bind::parse(bind).unwrap()),
            membind,
            mppr: Mppr::default(),
            order: Order::default(),
            origin: Origin::User,
            verbose: true,
            omp: false,
            gpu: None,
        }
    }

    /// The line on a node of 2 packages x 64 cores x 2 threads (256 CPUs, as the Zen 3 node),
    /// written by hand: scbnh deals task 12 to package 0's seventh core (logical core 6), whose
    /// threads are OS CPUs 12-13 (the synthetic machine numbers PUs in order). Within 80
    /// columns with an 8-character node name and a 6-digit pid; Slurm's mask would be 66.
    #[test]
    fn the_verbose_line_fits_80_columns_on_a_256_cpu_node() {
        let m = Machine::synthetic("pack:2 core:64 pu:2").unwrap();
        let plan = request("scbnh", "1c", Membind::None);
        let globals: Vec<u32> = (0..16).collect();
        let tasks = place_local(&m, &plan, &globals, false, StepCpus::default())
            .unwrap()
            .tasks;
        let line = verbose_line(&plan, "node0123", 12, 999_999, &tasks[12]);
        assert_eq!(
            line,
            "lama scbnh:1c - node0123, task 12 12 [999999]: cpus 12-13 package[0][core:6]"
        );
        assert!(line.len() <= 80, "{} columns: {line}", line.len());
        // The last core of the node (task 99 there): the widest picture and CPU list a core
        // binding has.
        let all: Vec<u32> = (0..128).collect();
        let csbnh = request("csbnh", "1c", Membind::None);
        let mut last = place_local(&m, &csbnh, &all, false, StepCpus::default())
            .unwrap()
            .tasks
            .swap_remove(127);
        last.global = 99;
        let line = verbose_line(&csbnh, "node0123", 99, 999_999, &last);
        assert_eq!(
            line,
            "lama csbnh:1c - node0123, task 99 99 [999999]: cpus 254-255 package[1][core:127]"
        );
        assert!(line.len() <= 80, "{} columns: {line}", line.len());
    }

    /// Memory and no binding, by hand.
    #[test]
    fn the_verbose_line_names_memory_and_an_unbound_task() {
        let m = Machine::synthetic("pack:2 numa:1 core:2 pu:2").unwrap();
        let plan = request("scbnh", "1c", Membind::Local);
        let tasks = place_local(&m, &plan, &[0, 1], false, StepCpus::default())
            .unwrap()
            .tasks;
        assert_eq!(
            verbose_line(&plan, "n1", 1, 7, &tasks[1]),
            "lama scbnh:1c - n1, task  1  1 [7]: cpus 4-5 package[1][core:2], mems 1 local"
        );
        let plan = request("scbnh", "none", Membind::Local);
        let tasks = place_local(&m, &plan, &[0, 1], false, StepCpus::default())
            .unwrap()
            .tasks;
        assert_eq!(
            verbose_line(&plan, "n1", 1, 7, &tasks[1]),
            "lama scbnh:none - n1, task  1  1 [7]: not bound, mapped to package[1][hwt:4], \
             memory not bound (local needs a CPU binding)"
        );
    }
}

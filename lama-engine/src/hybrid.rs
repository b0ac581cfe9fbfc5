//! Hybrid MPI+OpenMP jobs: Slurm's CPUs per task (`-c N`) as a binding, and the NUMA nodes a
//! binding touches (for memory binding).
//!
//! Slurm counts a node's CPUs either as hardware threads or as cores: when `CPUs=` in
//! `slurm.conf` equals sockets × cores × threads, a CPU is a hardware thread; when it equals
//! sockets × cores on a node with several threads per core, a CPU is a whole core. `-c N` asks
//! for N of those per task, so the binding that honours it depends on the unit.

use crate::cpulist::CpuList;
use crate::level::Level;
use crate::spec::Bind;
use crate::topology::Machine;

/// What Slurm counts as one CPU on a node.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CpuUnit {
    /// A hardware thread (`CPUs=` counts threads; the usual case).
    Thread,
    /// A whole core (`CPUs=` counts cores on a node with several threads per core).
    Core,
}

impl CpuUnit {
    /// Decides the unit from what Slurm gave the job on a node: `slurm_cpus` CPUs (Slurm's
    /// count) covering `job_pus` hardware threads, on a machine with `threads_per_core` threads
    /// per core. Slurm counts cores when every allocated CPU brought a whole core's threads.
    pub fn detect(slurm_cpus: u32, job_pus: u32, threads_per_core: u32) -> CpuUnit {
        if threads_per_core > 1
            && slurm_cpus > 0
            && u64::from(job_pus) >= u64::from(slurm_cpus) * u64::from(threads_per_core)
        {
            CpuUnit::Core
        } else {
            CpuUnit::Thread
        }
    }

    /// `thread` or `core`.
    pub fn name(self) -> &'static str {
        match self {
            CpuUnit::Thread => "thread",
            CpuUnit::Core => "core",
        }
    }
}

/// The largest number of hardware threads in one core of the machine (1 when it has no cores).
pub fn threads_per_core(m: &Machine) -> u32 {
    m.objects(Level::Core)
        .iter()
        .map(|c| c.pus.end - c.pus.start)
        .max()
        .unwrap_or(1)
        .max(1)
}

/// The narrowest binding that covers at least `cpus` CPUs of `unit` from a process's mapped
/// hardware thread: `Nc` when a CPU is a core or the machine has one thread per core; with
/// threads, `Nh` when they fit in one core, else whole cores (`⌈N/T⌉c`).
pub fn binding_for_cpus(m: &Machine, cpus: u32, unit: CpuUnit) -> Bind {
    let n = cpus.max(1);
    let t = threads_per_core(m);
    if m.objects(Level::Core).is_empty() {
        return Bind::Width {
            count: n,
            level: Level::Hwthread,
        };
    }
    if unit == CpuUnit::Thread && t > 1 && n < t {
        return Bind::Width {
            count: n,
            level: Level::Hwthread,
        };
    }
    let count = match unit {
        CpuUnit::Core => n,
        CpuUnit::Thread => n.div_ceil(t),
    };
    Bind::Width {
        count,
        level: Level::Core,
    }
}

/// The binding of exactly `cpus` CPUs of `unit`, without widening: `Nh` for hardware threads
/// (and on a machine without cores), `Nc` for cores. [`crate::place::place_cpus_per_task`]
/// falls back to it when the widened [`binding_for_cpus`] does not fit the step without two
/// tasks sharing a CPU.
pub fn exact_binding(m: &Machine, cpus: u32, unit: CpuUnit) -> Bind {
    let count = cpus.max(1);
    let level = if unit == CpuUnit::Core && !m.objects(Level::Core).is_empty() {
        Level::Core
    } else {
        Level::Hwthread
    };
    Bind::Width { count, level }
}

/// The note for a placement with the default binding ([`crate::place::place_cpus_per_task`])
/// that fell back from the widened binding to the exact one; `None` when the widened binding
/// was kept.
pub fn exact_fallback_note(
    widened: Bind,
    used: Bind,
    tasks: usize,
    cpus: u32,
    unit: CpuUnit,
) -> Option<String> {
    (used != widened).then(|| {
        format!(
            "note: the default binding {widened} cannot give {tasks} task(s) CPUs of their own \
             here; each task is bound to exactly the {cpus} CPU(s) Slurm counts for it ({unit}s, \
             -c {cpus}) instead: binding {used}, consecutive CPUs, none shared",
            unit = unit.name(),
        )
    })
}

/// How many CPUs of `unit` a binding covers: its hardware threads, or the cores it touches.
pub fn cpus_covered(m: &Machine, bound_logical: &[u32], unit: CpuUnit) -> u32 {
    match unit {
        CpuUnit::Thread => bound_logical.len() as u32,
        CpuUnit::Core => {
            let cores = m.objects(Level::Core);
            let mut touched: Vec<usize> = bound_logical
                .iter()
                .map(|&p| {
                    cores
                        .iter()
                        .position(|c| c.pus.contains(&p))
                        .unwrap_or(usize::MAX - p as usize)
                })
                .collect();
            touched.sort_unstable();
            touched.dedup();
            touched.len() as u32
        }
    }
}

/// The warning for a binding that was asked for but gives some process only `narrowest` CPUs
/// of `unit` while Slurm's `-c` gave each `cpus`; `None` when it is wide enough.
pub fn narrower_warning(
    m: &Machine,
    bind: Bind,
    narrowest: u32,
    cpus: u32,
    unit: CpuUnit,
) -> Option<String> {
    (bind != Bind::None && narrowest < cpus).then(|| {
        format!(
            "warning: binding {bind} gives a task {narrowest} CPU(s) ({unit}s, as Slurm counts \
             them here) but -c/--cpus-per-task asks for {cpus}; the tasks run bound as asked. \
             Leave out the binding (--lama-bind, the site's bind=) to get one of {cpus} CPUs, or \
             ask for a wider one such as {wider}",
            unit = unit.name(),
            wider = binding_for_cpus(m, cpus, unit),
        )
    })
}

/// The OS indexes of the NUMA nodes whose PUs meet the binding (logical PU indexes). Empty
/// when the machine describes no NUMA node with an OS index.
pub fn numa_nodes(m: &Machine, bound_logical: &[u32]) -> CpuList {
    CpuList::from_cpus(
        m.objects(Level::Numa)
            .iter()
            .filter(|o| bound_logical.iter().any(|p| o.pus.contains(p)))
            .filter_map(|o| o.os),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(desc: &str) -> Machine {
        Machine::synthetic(desc).unwrap()
    }

    #[test]
    fn the_unit_follows_what_slurm_allocated() {
        // node2 of the test cluster: CPUs=2, one core of two threads; -c2 gets both threads.
        assert_eq!(CpuUnit::detect(2, 2, 2), CpuUnit::Thread);
        // CR_CPU, one thread of a core.
        assert_eq!(CpuUnit::detect(1, 1, 2), CpuUnit::Thread);
        // CPUs= counts cores: one CPU brings the core's two threads.
        assert_eq!(CpuUnit::detect(1, 2, 2), CpuUnit::Core);
        assert_eq!(CpuUnit::detect(4, 8, 2), CpuUnit::Core);
        // One thread per core: both units are the same.
        assert_eq!(CpuUnit::detect(2, 2, 1), CpuUnit::Thread);
        assert_eq!(CpuUnit::detect(0, 4, 2), CpuUnit::Thread);
    }

    #[test]
    fn bindings_for_cpus_per_task() {
        let smt = m("pack:2 core:4 pu:2");
        let b = |mach: &Machine, n, u| binding_for_cpus(mach, n, u).to_string();
        assert_eq!(b(&smt, 1, CpuUnit::Thread), "1h");
        assert_eq!(b(&smt, 2, CpuUnit::Thread), "1c");
        assert_eq!(b(&smt, 3, CpuUnit::Thread), "2c");
        assert_eq!(b(&smt, 4, CpuUnit::Thread), "2c");
        assert_eq!(b(&smt, 2, CpuUnit::Core), "2c");
        let knl = m("core:4 pu:4");
        assert_eq!(b(&knl, 2, CpuUnit::Thread), "2h");
        assert_eq!(b(&knl, 6, CpuUnit::Thread), "2c");
        let flat = m("pack:2 core:2 pu:1");
        assert_eq!(b(&flat, 2, CpuUnit::Thread), "2c");
        assert_eq!(b(&flat, 2, CpuUnit::Core), "2c");
        assert_eq!(b(&flat, 0, CpuUnit::Thread), "1c");
    }

    #[test]
    fn covered_cpus_count_threads_or_cores() {
        let smt = m("pack:1 core:2 pu:2");
        assert_eq!(cpus_covered(&smt, &[0, 1, 2], CpuUnit::Thread), 3);
        assert_eq!(cpus_covered(&smt, &[0, 1, 2], CpuUnit::Core), 2);
        assert_eq!(cpus_covered(&smt, &[], CpuUnit::Core), 0);
    }

    #[test]
    fn numa_nodes_of_a_binding() {
        let two = m("pack:2 numa:1 core:2 pu:1");
        assert_eq!(numa_nodes(&two, &[0]).to_string(), "0");
        assert_eq!(numa_nodes(&two, &[1, 2]).to_string(), "0-1");
        assert_eq!(numa_nodes(&two, &[3]).to_string(), "1");
        assert_eq!(numa_nodes(&two, &[]).to_string(), "");
    }
}

//! Hybrid MPI+OpenMP jobs: N CPUs per process as a binding, and the NUMA nodes a binding
//! touches (for memory binding).
//!
//! A "CPU" is counted either as a hardware thread or as a whole core ([`CpuUnit`]); the
//! binding that gives a process N of them depends on which. (Which one a resource manager
//! means is its own business, decided outside the engine.)

use crate::cpulist::CpuList;
use crate::level::Level;
use crate::spec::Bind;
use crate::topology::Machine;

/// What one CPU counts as.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CpuUnit {
    /// A hardware thread (the usual case).
    Thread,
    /// A whole core, with all its hardware threads.
    Core,
}

impl CpuUnit {
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

/// The hardware threads `cpus` CPUs of `unit` are on `m` (a core's threads each, where CPUs
/// are counted as cores).
pub fn threads_needed(m: &Machine, cpus: u32, unit: CpuUnit) -> u32 {
    match unit {
        CpuUnit::Thread => cpus,
        CpuUnit::Core => cpus.saturating_mul(threads_per_core(m)),
    }
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
/// processes sharing a CPU.
pub fn exact_binding(m: &Machine, cpus: u32, unit: CpuUnit) -> Bind {
    let count = cpus.max(1);
    let level = if unit == CpuUnit::Core && !m.objects(Level::Core).is_empty() {
        Level::Core
    } else {
        Level::Hwthread
    };
    Bind::Width { count, level }
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

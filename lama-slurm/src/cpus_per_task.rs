//! Slurm's `-c`/`--cpus-per-task`: what Slurm counts as a CPU, and what the user is told
//! when a binding and `-c` disagree.

use lama_engine::{Bind, CpuUnit, Machine};

/// What Slurm counts as one CPU on a node, from what it gave: `slurm_cpus` CPUs (Slurm's
/// count) covering `pus` hardware threads, on a machine with `threads_per_core` threads per
/// core. Slurm counts cores when every CPU brought a whole core's threads: when `CPUs=` in
/// `slurm.conf` equals sockets × cores on a node with several threads per core; threads when it
/// equals sockets × cores × threads (the usual case).
pub fn detect_unit(slurm_cpus: u32, pus: u32, threads_per_core: u32) -> CpuUnit {
    if threads_per_core > 1
        && slurm_cpus > 0
        && u64::from(pus) >= u64::from(slurm_cpus) * u64::from(threads_per_core)
    {
        CpuUnit::Core
    } else {
        CpuUnit::Thread
    }
}

/// What Slurm counts as a CPU on this node, from what the step asked for here (`tasks` tasks
/// of `per_task` CPUs, in Slurm's unit) against the hardware threads it got (`step_pus`):
/// cores when every CPU asked for brought a whole core's threads. (The job's CPUs would not
/// do: a step may be smaller than its job, and `S_JOB_NCPUS` in slurmstepd is the step's.)
/// The plugin and `lama exec` both count `-c` by it.
pub fn step_unit(machine: &Machine, tasks: u32, per_task: u32, step_pus: u32) -> CpuUnit {
    let asked = u64::from(tasks) * u64::from(per_task);
    detect_unit(
        u32::try_from(asked).unwrap_or(u32::MAX),
        step_pus,
        lama_engine::threads_per_core(machine),
    )
}

/// The note for a placement with the default binding ([`lama_engine::place_cpus_per_task`])
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
            wider = lama_engine::binding_for_cpus(m, cpus, unit),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_unit_comes_from_the_step_not_the_job() {
        // The QEMU node (2 threads per core, CPUs=16): `salloc -N1 --exclusive srun -n2 -c4`
        // gets 8 threads (0-3,8-11) for 2 x 4 CPUs: Slurm counts threads. Against the job's 16
        // CPUs the old detection said cores, and bound each task to 4 cores.
        let m = Machine::synthetic("pack:2 core:4 pu:2").unwrap();
        assert_eq!(step_unit(&m, 2, 4, 8), CpuUnit::Thread);
        // -n4 -c3 on 12 threads: threads.
        assert_eq!(step_unit(&m, 4, 3, 12), CpuUnit::Thread);
        // CR_Core rounding -c3 up to two whole cores (4 threads): still threads.
        assert_eq!(step_unit(&m, 1, 3, 4), CpuUnit::Thread);
        // A node whose CPUs= counts cores: -n2 -c4 gets 8 cores, 16 threads.
        assert_eq!(step_unit(&m, 2, 4, 16), CpuUnit::Core);
        // No SMT: always threads.
        let flat = Machine::synthetic("pack:1 core:4 pu:1").unwrap();
        assert_eq!(step_unit(&flat, 1, 2, 4), CpuUnit::Thread);
    }

    #[test]
    fn the_unit_follows_what_slurm_allocated() {
        // node2 of the test cluster: CPUs=2, one core of two threads; -c2 gets both threads.
        assert_eq!(detect_unit(2, 2, 2), CpuUnit::Thread);
        // CR_CPU, one thread of a core.
        assert_eq!(detect_unit(1, 1, 2), CpuUnit::Thread);
        // CPUs= counts cores: one CPU brings the core's two threads.
        assert_eq!(detect_unit(1, 2, 2), CpuUnit::Core);
        assert_eq!(detect_unit(4, 8, 2), CpuUnit::Core);
        // One thread per core: both units are the same.
        assert_eq!(detect_unit(2, 2, 1), CpuUnit::Thread);
        assert_eq!(detect_unit(0, 4, 2), CpuUnit::Thread);
    }

    #[test]
    fn a_narrower_binding_is_named_with_a_wider_one() {
        let m = Machine::synthetic("pack:1 core:4 pu:1").unwrap();
        let w = narrower_warning(&m, Bind::parse("1c").unwrap(), 1, 2, CpuUnit::Thread).unwrap();
        assert!(w.ends_with("such as 2c"), "{w}");
        assert_eq!(
            narrower_warning(&m, Bind::None, 1, 2, CpuUnit::Thread),
            None
        );
        assert_eq!(
            exact_fallback_note(
                Bind::parse("2c").unwrap(),
                Bind::parse("2c").unwrap(),
                4,
                3,
                CpuUnit::Thread
            ),
            None
        );
    }
}

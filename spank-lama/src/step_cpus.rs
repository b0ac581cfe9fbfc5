//! The CPUs a step may use on this node, and what Slurm counts as one of them (SPEC §3.4).
//!
//! Two witnesses, both Slurm's own: the step's cgroup cpuset as Slurm configured it
//! ([`crate::cgroup`]), and the cores Slurm allocated to the step (`S_STEP_ALLOC_CORES`,
//! abstract core numbers, with all their hardware threads). With both, the step's CPUs are
//! their intersection; with one, that one; with neither, the step's CPUs are unknown and the
//! plugin binds nothing (fail closed). The process's own affinity is never used: on cgroup v2
//! slurmstepd runs with the job's CPUs, and without task/cgroup with the whole node's.

use crate::cgroup::{self, StepCgroup};
use crate::config::SiteConfig;
use lama_engine::{CpuList, Machine};
use slurm_spank::SpankHandle;

pub use lama_slurm::node::StepCpus;

/// The CPUs this step may use on this node ([`decide`]): its cgroup cpuset as Slurm configured
/// it and the cores Slurm allocated to it (`S_STEP_ALLOC_CORES`); `Err` when neither can be
/// read, and the step is then not bound.
pub fn here(
    spank: &SpankHandle,
    machine: &Machine,
    job: u32,
    step: u32,
) -> Result<CpuList, String> {
    let allocated = spank
        .step_alloc_cores()
        .map_err(|e| format!("S_STEP_ALLOC_CORES: {e}"))
        .and_then(|list| {
            let abstract_cores =
                CpuList::parse(list).map_err(|e| format!("S_STEP_ALLOC_CORES '{list}': {e}"))?;
            cores_to_cpus(machine, &abstract_cores)
        });
    // Slurm 26.05 names the job's cgroup v2 directory by its SLUID (unless
    // CgroupJobIdPaths=yes), which the step's environment carries.
    let sluid = crate::bounded::env_value(spank.getenv("SLURM_JOB_SLUID").ok().flatten());
    let this_job = cgroup::Job {
        id: job,
        sluid: sluid.as_deref(),
    };
    let set = decide(cgroup::step_cpus(this_job, step), allocated)?;
    tracing::info!(
        job,
        step,
        "lama: step CPUs {} from {}",
        set.cpus,
        set.source
    );
    Ok(set.cpus)
}

/// `-c` of the step (`S_STEP_CPUS_PER_TASK`), and what Slurm counts as a CPU here: the site's
/// `cpu_unit`, else [`lama_slurm::cpus_per_task::step_unit`] from the step's `ntasks` tasks here and its `step_pus`
/// hardware threads.
pub fn per_task(
    spank: &SpankHandle,
    site: &SiteConfig,
    machine: &Machine,
    ntasks: u32,
    step_pus: u32,
) -> StepCpus {
    let per_task = spank
        .step_cpus_per_task()
        .ok()
        .and_then(|c| u32::try_from(c).ok())
        .filter(|&c| c >= 1)
        .unwrap_or(1);
    let unit = site.cpu_unit.unwrap_or_else(|| {
        let unit = lama_slurm::cpus_per_task::step_unit(machine, ntasks, per_task, step_pus);
        tracing::debug!(
            ntasks,
            per_task,
            step_pus,
            "lama: Slurm counts {}s as CPUs here",
            unit.name()
        );
        unit
    });
    StepCpus { per_task, unit }
}

/// The step's CPUs on this node and where they came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StepCpuSet {
    /// OS indexes of the CPUs.
    pub cpus: CpuList,
    /// Where they came from, for slurmd's log: `cgroup v2 FILE (0-3) and allocated cores (0-3)`.
    pub source: String,
}

/// Decides the step's CPUs from its cgroup and its allocated cores (each a value or the
/// reason it is unavailable). `Err` says why the step's CPUs cannot be known.
pub fn decide(
    cgroup: Result<(CpuList, StepCgroup), String>,
    allocated: Result<CpuList, String>,
) -> Result<StepCpuSet, String> {
    match (cgroup, allocated) {
        (Ok((set, cg)), Ok(cores)) => {
            let cpus = set.intersection(&cores);
            if cpus.is_empty() {
                return Err(format!(
                    "the step's cgroup v{} cpuset {} ({set}) and its allocated cores' CPUs \
                     ({cores}) do not overlap",
                    cg.version,
                    cg.file.display()
                ));
            }
            Ok(StepCpuSet {
                cpus,
                source: format!(
                    "cgroup v{} {} ({set}) and allocated cores ({cores})",
                    cg.version,
                    cg.file.display()
                ),
            })
        }
        (Ok((set, cg)), Err(why)) => Ok(StepCpuSet {
            source: format!(
                "cgroup v{} {} ({set}); no allocated cores: {why}",
                cg.version,
                cg.file.display()
            ),
            cpus: set,
        }),
        (Err(why), Ok(cores)) => Ok(StepCpuSet {
            source: format!("allocated cores ({cores}); no step cpuset: {why}"),
            cpus: cores,
        }),
        (Err(cgroup), Err(cores)) => Err(format!(
            "the step's CPUs on this node are unknown: no step cpuset ({cgroup}) and no \
             allocated cores ({cores})"
        )),
    }
}

/// The OS CPUs of Slurm's abstract cores (numbered socket-major, which is the order of the
/// node's cores in hwloc's logical order): every hardware thread of each core.
pub fn cores_to_cpus(machine: &Machine, cores: &CpuList) -> Result<CpuList, String> {
    let all = machine.objects(lama_engine::Level::Core);
    let mut cpus = Vec::new();
    for &c in cores.cpus() {
        let core = all.get(c as usize).ok_or_else(|| {
            format!(
                "core {c} is not on this node ({} cores in its topology)",
                all.len()
            )
        })?;
        cpus.extend(core.pus.clone().map(|p| machine.pus()[p as usize].os));
    }
    if cpus.is_empty() {
        return Err("no allocated core".to_string());
    }
    Ok(CpuList::from_cpus(cpus))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    fn cg(version: u8) -> StepCgroup {
        StepCgroup {
            version,
            file: PathBuf::from("/sys/fs/cgroup/job_1/step_0/user/cpuset.cpus"),
        }
    }

    fn l(s: &str) -> CpuList {
        CpuList::parse(s).unwrap()
    }

    #[test]
    fn both_witnesses_intersect() {
        let got = decide(Ok((l("0-7"), cg(2))), Ok(l("4-11"))).unwrap();
        assert_eq!(got.cpus.to_string(), "4-7");
        assert!(got.source.starts_with("cgroup v2 "), "{}", got.source);
        let e = decide(Ok((l("0-3"), cg(1))), Ok(l("8-9"))).unwrap_err();
        assert!(e.contains("do not overlap"), "{e}");
    }

    #[test]
    fn one_witness_is_enough_and_none_is_unknown() {
        assert_eq!(
            decide(Ok((l("2-3"), cg(1))), Err("no item".into()))
                .unwrap()
                .cpus
                .to_string(),
            "2-3"
        );
        // ConstrainCores=no: the cgroup is not trusted, the allocated cores are.
        assert_eq!(
            decide(Err("empty".into()), Ok(l("0-1,8-9")))
                .unwrap()
                .cpus
                .to_string(),
            "0-1,8-9"
        );
        let e = decide(Err("no cgroup".into()), Err("no item".into())).unwrap_err();
        assert_eq!(
            e,
            "the step's CPUs on this node are unknown: no step cpuset (no cgroup) and no \
             allocated cores (no item)"
        );
    }

    #[test]
    fn abstract_cores_become_their_threads() {
        let m = Machine::synthetic("pack:2 core:2 pu:2").unwrap();
        assert_eq!(cores_to_cpus(&m, &l("1,3")).unwrap().to_string(), "2-3,6-7");
        assert!(cores_to_cpus(&m, &l("4"))
            .unwrap_err()
            .contains("core 4 is not on this node"));
        assert!(cores_to_cpus(&m, &CpuList::new()).is_err());
    }
}

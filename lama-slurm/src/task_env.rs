//! The variables the plugin sets in each task besides its GPUs' (`LAMA_*`, OpenMP), for the
//! plugin's `task_init` and `lama map --env`. Pure: the caller decides what the job already
//! set (the job's own `OMP_NUM_THREADS` wins).

use lama_engine::{CpuList, CpuUnit, Machine, Membind};

/// The request as the user writes it, the same for every task of a step.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Labels {
    /// The layout as the user wrote it (`LAMA_LAYOUT`).
    pub layout: String,
    /// The binding in force as the user writes it (`LAMA_BIND`).
    pub bind: String,
    /// The MPPR limits (`LAMA_MPPR`).
    pub mppr: String,
    /// The rank ordering (`LAMA_ORDER`).
    pub order: String,
}

impl Labels {
    /// The labels of a request's layout, binding, MPPR limits and ordering.
    pub fn new(
        layout: impl std::fmt::Display,
        bind: impl std::fmt::Display,
        mppr: impl std::fmt::Display,
        order: impl std::fmt::Display,
    ) -> Labels {
        Labels {
            layout: layout.to_string(),
            bind: bind.to_string(),
            mppr: mppr.to_string(),
            order: order.to_string(),
        }
    }
}

/// The binding a task was placed with, as the user writes it (`LAMA_BIND`, and the
/// `lama-bind=` of `--lama-verbose`): its own where its group of GPUs used one (the default
/// widened for `-c`, or its exact fallback), else the step's, `step` (`1g` for the CPUs near
/// each task's GPU).
pub fn bind_label(own: Option<lama_engine::Bind>, step: impl FnOnce() -> String) -> String {
    own.map_or_else(step, |b| b.to_string())
}

/// What one task's variables are made of.
#[derive(Debug, Clone, Copy)]
pub struct TaskEnv<'a> {
    /// `LAMA_LAYOUT`, `LAMA_BIND`, `LAMA_MPPR`, `LAMA_ORDER`.
    pub labels: &'a Labels,
    /// The CPUs the task is bound to, OS indexes (`LAMA_CPUS`; empty without binding).
    pub cpus: &'a CpuList,
    /// The mapped PU, OS and logical index (`LAMA_PU`, `LAMA_PU_LOGICAL`).
    pub pu: (u32, u32),
    /// The memory policy and its NUMA nodes, when memory is bound (`LAMA_MEMBIND`,
    /// `LAMA_MEMS`).
    pub mems: Option<(Membind, &'a CpuList)>,
    /// With `--lama-omp` and a binding: the OpenMP places ([`omp_place_list`]), for
    /// `OMP_PLACES` and `OMP_PROC_BIND=close`.
    pub omp_places: Option<&'a str>,
}

/// The task's `LAMA_*` variables, then its OpenMP ones (`OMP_NUM_THREADS` apart: see
/// [`omp_threads`]).
pub fn variables(t: &TaskEnv<'_>) -> Vec<(&'static str, String)> {
    let mut env = vec![
        ("LAMA_LAYOUT", t.labels.layout.clone()),
        ("LAMA_BIND", t.labels.bind.clone()),
        ("LAMA_MPPR", t.labels.mppr.clone()),
        ("LAMA_ORDER", t.labels.order.clone()),
        ("LAMA_CPUS", t.cpus.to_string()),
        ("LAMA_PU", t.pu.0.to_string()),
        ("LAMA_PU_LOGICAL", t.pu.1.to_string()),
    ];
    if let Some((policy, mems)) = t.mems {
        env.push(("LAMA_MEMS", mems.to_string()));
        env.push(("LAMA_MEMBIND", policy.to_string()));
    }
    if let Some(places) = t.omp_places {
        env.push(("OMP_PLACES", places.to_string()));
        env.push(("OMP_PROC_BIND", "close".to_string()));
    }
    env
}

/// `OMP_NUM_THREADS` for a task with `--lama-omp` (set when the job does not set it): `-c`
/// when it is more than 1, else one thread per OpenMP place.
pub fn omp_threads(cpus_per_task: u32, place_count: usize) -> usize {
    if cpus_per_task > 1 {
        cpus_per_task as usize
    } else {
        place_count
    }
}

/// What a task was asked for besides its CPUs, for [`placed_variables`].
#[derive(Debug, Clone, Copy)]
pub struct Asked<'a> {
    /// The request as the user writes it.
    pub labels: &'a Labels,
    /// Whether the task is bound at all.
    pub bound: bool,
    /// The memory binding asked for.
    pub membind: Membind,
    /// With `--lama-omp`: the CPUs per task (`-c`) and what Slurm counts as one.
    pub omp: Option<(u32, CpuUnit)>,
}

/// A placed task's variables, as the plugin sets them and `lama map --env` shows them:
/// [`variables`] from its binding (`bound_logical` on `machine`, OS CPUs `cpus`, mapped PU `pu`
/// as OS and logical index), then `OMP_NUM_THREADS` with `--lama-omp` (which the plugin sets
/// only when the job does not).
pub fn placed_variables(
    machine: &Machine,
    asked: &Asked<'_>,
    cpus: &CpuList,
    pu: (u32, u32),
    bound_logical: &[u32],
) -> Vec<(&'static str, String)> {
    let mems = lama_engine::numa_nodes(machine, bound_logical);
    let places = match asked.omp {
        Some((per_task, unit)) if asked.bound => Some(omp_places(
            machine,
            bound_logical,
            one_place_per_cpu(per_task, unit),
        )),
        _ => None,
    };
    let place_list = places.as_deref().map(omp_place_list);
    let mut env = variables(&TaskEnv {
        labels: asked.labels,
        cpus,
        pu,
        mems: (asked.membind != Membind::None && asked.bound && !mems.is_empty())
            .then_some((asked.membind, &mems)),
        omp_places: place_list.as_deref(),
    });
    if let (Some((per_task, _)), Some(places)) = (asked.omp, &places) {
        env.push((
            "OMP_NUM_THREADS",
            omp_threads(per_task, places.len()).to_string(),
        ));
    }
    env
}

/// Whether OpenMP gets one place per hardware thread rather than per core: when `-c` gives a
/// task several CPUs and Slurm counts threads as CPUs.
pub fn one_place_per_cpu(cpus_per_task: u32, unit: CpuUnit) -> bool {
    cpus_per_task > 1 && unit == CpuUnit::Thread
}

/// OpenMP places as `OMP_PLACES` writes them: `{0,36},{1,37}`.
pub fn omp_place_list(places: &[CpuList]) -> String {
    places
        .iter()
        .map(|p| {
            let cpus: Vec<String> = p.cpus().iter().map(u32::to_string).collect();
            format!("{{{}}}", cpus.join(","))
        })
        .collect::<Vec<_>>()
        .join(",")
}

/// The bound PUs (logical indexes) as OpenMP places in logical order: one per core (its bound
/// hardware threads), or with `per_thread` one per hardware thread (when `-c` counts threads).
/// A PU outside every core is a place of its own.
pub fn omp_places(machine: &Machine, bound: &[u32], per_thread: bool) -> Vec<CpuList> {
    let cores = machine.objects(lama_engine::Level::Core);
    let mut places: Vec<(Option<usize>, Vec<u32>)> = Vec::new();
    for &pu in bound {
        let core = cores.iter().position(|c| c.pus.contains(&pu));
        let os = machine.pus()[pu as usize].os;
        match places.last_mut() {
            Some((c, list)) if !per_thread && core.is_some() && *c == core => list.push(os),
            _ => places.push((core, vec![os])),
        }
    }
    places
        .into_iter()
        .map(|(_, l)| CpuList::from_cpus(l))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn places_are_cores_or_threads_in_logical_order() {
        // 2 cores of 2 threads, OS indexes 0,2 on core 0 and 1,3 on core 1 (checked by hand:
        // the synthetic description numbers PUs in order, so core 0 holds 0,1 and core 1 2,3).
        let m = Machine::synthetic("pack:1 core:2 pu:2").unwrap();
        let per_core = omp_places(&m, &[0, 1, 2, 3], false);
        assert_eq!(omp_place_list(&per_core), "{0,1},{2,3}");
        assert_eq!(omp_place_list(&omp_places(&m, &[1, 2], true)), "{1},{2}");
        assert_eq!(omp_threads(1, per_core.len()), 2);
        assert_eq!(omp_threads(3, per_core.len()), 3);
    }

    #[test]
    fn variables_follow_the_binding_and_memory() {
        let cpus = CpuList::from_cpus([4, 5]);
        let mems = CpuList::from_cpus([1]);
        let labels = Labels::new("scbnh", "1c", "none", "n");
        let mut t = TaskEnv {
            labels: &labels,
            cpus: &cpus,
            pu: (4, 2),
            mems: None,
            omp_places: None,
        };
        let env = variables(&t);
        assert!(env.contains(&("LAMA_CPUS", "4-5".to_string())));
        assert!(env.contains(&("LAMA_PU_LOGICAL", "2".to_string())));
        assert!(!env
            .iter()
            .any(|(k, _)| k.starts_with("OMP_") || *k == "LAMA_MEMS"));
        t.mems = Some((Membind::Local, &mems));
        t.omp_places = Some("{4,5}");
        let env = variables(&t);
        assert!(env.contains(&("LAMA_MEMS", "1".to_string())));
        assert!(env.contains(&("OMP_PLACES", "{4,5}".to_string())));
        assert!(env.contains(&("OMP_PROC_BIND", "close".to_string())));
    }
}

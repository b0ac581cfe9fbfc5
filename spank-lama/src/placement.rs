//! Where this node's tasks go (SPEC §3.2): a request, this node's machine restricted to the
//! step's CPUs and the tasks' global ranks become one [`TaskPlacement`] per local task.

use crate::request::StepRequest;
pub use crate::step_cpus::StepCpus;
use lama_engine::{
    binding_for_cpus, cpus_covered, numa_nodes, place, render, Bind, CpuList, Machine, PlaceError,
    Request,
};
pub(crate) use lama_slurm::task_env::{omp_place_list, omp_places};

/// The binding for this node: the one asked for, else (with `-c N`, N > 1) the narrowest that
/// covers N CPUs, kept inside the enclosing object where possible, else the layout's default
/// ([`Bind::default_for`]: `1c`, or `1h` for a layout led by `h`). The flag says whether the
/// binding is the default (not asked for): such bindings stay inside their
/// enclosing object where possible and never make two tasks share a CPU; when they cannot,
/// [`place_local`] binds each task to exactly the `-c` CPUs Slurm counted
/// (`lama_engine::place_cpus_per_task`).
pub fn effective_bind(machine: &Machine, plan: &StepRequest, cpus: StepCpus) -> (Bind, bool) {
    match plan.bind {
        Some(b) => (b, false),
        None if cpus.per_task > 1 => (binding_for_cpus(machine, cpus.per_task, cpus.unit), true),
        None => (Bind::default_for(&plan.layout), true),
    }
}

/// This node's placement for the step.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LocalPlacement {
    /// The binding used (see [`effective_bind`]).
    pub bind: Bind,
    /// One entry per local task, indexed by local task id.
    pub tasks: Vec<TaskPlacement>,
    /// When a binding that was asked for covers fewer CPUs than `-c` gave each task: the warning
    /// for the user (the same on every node: said once per step).
    pub narrower: Option<String>,
    /// What this node's placement tells the user about this node: the fallback from the
    /// widened default binding to exact CPUs, and bindings that were asked for and share CPUs
    /// (named by global rank). Said by each node where it happens.
    pub here: Vec<String>,
}

/// Where one local task goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskPlacement {
    /// The task's global rank.
    pub global: u32,
    /// OS index of the mapped PU.
    pub pu_os: u32,
    /// Logical index of the mapped PU.
    pub pu_logical: u32,
    /// The CPUs to bind to (OS indexes); empty for `--lama-bind=none`.
    pub cpus: CpuList,
    /// The node picture (`[BB/..][..]`), with `--lama-verbose` (else empty).
    pub picture: String,
    /// The binding as OpenMP places, one per core: `{0,36},{1,37}`, with `--lama-omp` (else
    /// empty; empty too without binding).
    pub omp_places: String,
    /// How many places `omp_places` holds.
    pub omp_place_count: usize,
    /// OS indexes of the NUMA nodes the binding touches (empty without binding).
    pub mems: CpuList,
    /// The variables a step placed by GPU adds (else empty): the task's GPU and NIC
    /// variables.
    pub devices: Vec<(&'static str, String)>,
    /// The binding this task was placed with where it is its own: in a step placed by GPU, the
    /// one its group of GPUs used (the default widened for `-c`, or its exact fallback).
    /// `None`: the step's ([`StepRequest::binding_text`](crate::request::StepRequest::binding_text)).
    /// `LAMA_BIND` and the `--lama-verbose` line name it.
    pub bind: Option<lama_engine::Bind>,
    /// Under Slurm's per-task GPU binding, the GPUs (Slurm's indexes, ascending) this
    /// placement was made beside. Slurm chooses each task's GPUs itself (the free GPUs closest
    /// to the CPU mask task/affinity computed for it), so a task takes, in `task_init`, the
    /// placement whose GPUs Slurm gave it (crate::task). Empty otherwise.
    pub slurm_gpus: Vec<u32>,
}

/// Places this node's tasks: `globals[i]` is the global rank of local task `i`. Tasks are
/// placed in ascending global rank on the layout's positions of this node (the layout without
/// `n`); the result is indexed by local task id.
pub fn place_local(
    machine: &Machine,
    plan: &StepRequest,
    globals: &[u32],
    overcommit: bool,
    cpus: StepCpus,
) -> Result<LocalPlacement, PlaceError> {
    let (widened, bind_within) = effective_bind(machine, plan, cpus);
    let req = Request {
        layout: plan.layout.clone(),
        bind: widened,
        mppr: plan.mppr.clone(),
        order: plan.order,
        oversubscribe: overcommit,
        np: globals.len() as u32,
        bind_within,
    };
    // The default binding never makes tasks share CPUs: when the widened one cannot, each
    // task gets exactly its -c CPUs. A binding that was asked for may overlap (warned below).
    let per_task = cpus.per_task.max(1);
    let placement = if bind_within {
        let exact = lama_engine::exact_binding(machine, per_task, cpus.unit);
        lama_engine::place_cpus_per_task(&[machine], &req, exact)?
    } else {
        place(&[machine], &req)?
    };
    let bind = placement.request().bind;
    let mut by_rank: Vec<usize> = (0..globals.len()).collect();
    by_rank.sort_by_key(|&i| globals[i]);
    let mut out: Vec<Option<TaskPlacement>> = vec![None; globals.len()];
    let mut narrowest: Option<u32> = None;
    for (k, &local) in by_rank.iter().enumerate() {
        let info = placement.info(k);
        if bind != Bind::None && cpus.per_task > 1 {
            let covered = cpus_covered(machine, &info.bound_logical, cpus.unit);
            narrowest = Some(narrowest.map_or(covered, |n| n.min(covered)));
        }
        // The picture and the OpenMP places are only built when they will be used.
        let picture = match (plan.verbose, bind) {
            (false, _) => String::new(),
            (true, Bind::None) => render::picture_with(machine, &[info.pu_logical], 'm'),
            (true, _) => render::picture(machine, &info.bound_logical),
        };
        let places = if plan.omp {
            let per_cpu = lama_slurm::task_env::one_place_per_cpu(cpus.per_task, cpus.unit);
            omp_places(machine, &info.bound_logical, per_cpu)
        } else {
            Vec::new()
        };
        out[local] = Some(TaskPlacement {
            global: globals[local],
            pu_os: info.pu_os,
            pu_logical: info.pu_logical,
            mems: numa_nodes(machine, &info.bound_logical),
            cpus: info.cpus,
            picture,
            omp_places: omp_place_list(&places),
            omp_place_count: places.len(),
            devices: Vec::new(),
            bind: None,
            slurm_gpus: Vec::new(),
        });
    }
    let narrower = match narrowest {
        Some(n) if plan.bind.is_some() => {
            lama_slurm::cpus_per_task::narrower_warning(machine, bind, n, cpus.per_task, cpus.unit)
        }
        _ => None,
    };
    let fallback = if bind_within {
        lama_slurm::cpus_per_task::exact_fallback_note(
            widened,
            bind,
            globals.len(),
            per_task,
            cpus.unit,
        )
    } else {
        None
    };
    let need = lama_engine::threads_needed(machine, per_task, cpus.unit);
    let overlap = placement.overlap_warning_needing(
        |k| {
            by_rank
                .get(k as usize)
                .and_then(|&local| globals.get(local))
                .copied()
                .unwrap_or(k)
        },
        need,
    );
    Ok(LocalPlacement {
        bind,
        tasks: out.into_iter().flatten().collect(),
        narrower,
        here: [fallback, overlap].into_iter().flatten().collect(),
    })
}

/// The first available hardware thread of every core (and every available PU outside a
/// core), as OS indexes: what `--threads-per-core=1` leaves to a step.
pub fn one_thread_per_core(machine: &Machine) -> CpuList {
    let pus = machine.pus();
    let mut keep = vec![false; pus.len()];
    let mut covered = vec![false; pus.len()];
    for core in machine.objects(lama_engine::Level::Core) {
        if let Some(first) = core.pus.clone().find(|&p| pus[p as usize].available) {
            keep[first as usize] = true;
        }
        core.pus.clone().for_each(|p| covered[p as usize] = true);
    }
    CpuList::from_cpus(
        pus.iter()
            .enumerate()
            .filter(|(i, p)| p.available && (keep[*i] || !covered[*i]))
            .map(|(_, p)| p.os),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::SiteConfig;
    use crate::request::{resolve, tests::user, UserOptions};
    use crate::task_env::omp_threads;
    use lama_engine::{CpuUnit, Layout};

    #[test]
    fn local_tasks_follow_global_rank() {
        let m = Machine::synthetic("pack:2 core:2 pu:1").unwrap();
        let plan = resolve(&user(Some("scbnh"), None), &SiteConfig::default())
            .unwrap()
            .unwrap();
        // Local task 0 is global rank 7, local task 1 is rank 3: rank 3 comes first.
        let tasks = place_local(&m, &plan, &[7, 3], false, StepCpus::default())
            .unwrap()
            .tasks;
        assert_eq!(tasks[1].cpus.to_string(), "0");
        assert_eq!(tasks[0].cpus.to_string(), "2");
        assert_eq!(tasks[0].picture, "");
        let verbose = StepRequest {
            verbose: true,
            ..plan.clone()
        };
        let tasks = place_local(&m, &verbose, &[7, 3], false, StepCpus::default())
            .unwrap()
            .tasks;
        assert_eq!(tasks[0].picture, "[./.][B/.]");
        let e = place_local(&m, &plan, &[0, 1, 2, 3, 4], false, StepCpus::default()).unwrap_err();
        assert!(e
            .to_string()
            .starts_with("placed 4 of 5 processes: oversubscribed"));
        assert_eq!(
            place_local(&m, &plan, &[0, 1, 2, 3, 4], true, StepCpus::default())
                .unwrap()
                .tasks
                .len(),
            5
        );
    }

    fn cpt(per_task: u32, unit: CpuUnit) -> StepCpus {
        StepCpus { per_task, unit }
    }

    #[test]
    fn cpus_per_task_widen_the_default_binding() {
        let omp = UserOptions {
            map: Some("scbnh".into()),
            omp: true,
            ..UserOptions::default()
        };
        let plan = resolve(&omp, &SiteConfig::default()).unwrap().unwrap();
        // One thread per core (node1, node3 of the test cluster): -c2 binds two cores.
        let flat = Machine::synthetic("pack:1 core:2 pu:1").unwrap();
        let local = place_local(&flat, &plan, &[0], false, cpt(2, CpuUnit::Thread)).unwrap();
        assert_eq!(local.bind.to_string(), "2c");
        assert_eq!(local.tasks[0].cpus.to_string(), "0-1");
        assert_eq!(local.tasks[0].omp_places, "{0},{1}");
        assert_eq!(omp_threads(cpt(2, CpuUnit::Thread), &local.tasks[0]), 2);
        assert_eq!(local.narrower, None);
        // Two threads per core, Slurm counting threads (node2): -c2 is the core, two places.
        let smt = Machine::synthetic("pack:2 core:2 pu:2").unwrap();
        let local = place_local(&smt, &plan, &[0, 1], false, cpt(2, CpuUnit::Thread)).unwrap();
        assert_eq!(local.bind.to_string(), "1c");
        assert_eq!(local.tasks[1].cpus.to_string(), "4-5");
        assert_eq!(local.tasks[1].omp_places, "{4},{5}");
        // Slurm counting cores: -c2 is two cores, places per core.
        let local = place_local(&smt, &plan, &[0, 1], false, cpt(2, CpuUnit::Core)).unwrap();
        assert_eq!(local.bind.to_string(), "2c");
        assert_eq!(local.tasks[0].cpus.to_string(), "0-3");
        assert_eq!(local.tasks[1].cpus.to_string(), "4-7");
        assert_eq!(local.tasks[1].omp_places, "{4,5},{6,7}");
        // Without -c nothing changes.
        let local = place_local(&smt, &plan, &[0], false, StepCpus::default()).unwrap();
        assert_eq!(local.bind.to_string(), "1c");
        assert_eq!(local.tasks[0].omp_places, "{0,1}");
    }

    #[test]
    fn the_default_binding_never_makes_tasks_share_cpus() {
        let plan = resolve(&user(Some("csbnh"), None), &SiteConfig::default())
            .unwrap()
            .unwrap();
        // srun -n4 -c3 on 12 CPUs of 2 threads per core: 2c four times does not fit; each
        // task gets exactly its 3 threads.
        let m = Machine::synthetic("pack:1 core:6 pu:2").unwrap();
        let local = place_local(&m, &plan, &[0, 1, 2, 3], false, cpt(3, CpuUnit::Thread)).unwrap();
        assert_eq!(local.bind.to_string(), "3h");
        let cpus: Vec<String> = local.tasks.iter().map(|t| t.cpus.to_string()).collect();
        assert_eq!(cpus, ["0-2", "3-5", "6-8", "9-11"]);
        assert_eq!(local.narrower, None);
        assert_eq!(local.here.len(), 1, "{:?}", local.here);
        let note = local.here.join("; ");
        assert!(
            note.starts_with("note: the default binding 2c cannot give 4 task(s)"),
            "{note}"
        );
        // Without -c: two tasks on one core of two threads get a thread each, not the core
        // twice.
        let node2 = Machine::synthetic("pack:1 core:1 pu:2").unwrap();
        let local = place_local(&node2, &plan, &[4, 5], false, StepCpus::default()).unwrap();
        assert_eq!(local.bind.to_string(), "1h");
        let cpus: Vec<String> = local.tasks.iter().map(|t| t.cpus.to_string()).collect();
        assert_eq!(cpus, ["0", "1"]);
        // A binding that was asked for: the two tasks share the core, as asked, a thread
        // each, which is what 1c means: nothing to warn about.
        let asked = resolve(&user(Some("csbnh"), Some("1c")), &SiteConfig::default())
            .unwrap()
            .unwrap();
        let local = place_local(&node2, &asked, &[4, 5], false, StepCpus::default()).unwrap();
        let cpus: Vec<String> = local.tasks.iter().map(|t| t.cpus.to_string()).collect();
        assert_eq!(cpus, ["0-1", "0-1"]);
        assert!(
            !local.here.iter().any(|l| l.contains("share CPUs")),
            "{:?}",
            local.here
        );
        // An asked-for binding wider than the mapping shares CPUs with a warning naming the
        // global ranks.
        let wide = resolve(&user(Some("cnsbh"), Some("2c")), &SiteConfig::default())
            .unwrap()
            .unwrap();
        let odd = Machine::synthetic("pack:2 core:3 pu:1").unwrap();
        let local = place_local(&odd, &wide, &[12, 10, 11], false, StepCpus::default()).unwrap();
        let warning = local.here.join("; ");
        assert!(
            warning.starts_with(
                "warning: binding 2c makes tasks share CPUs: ranks 11 and 12 share CPU 3."
            ),
            "{warning}"
        );
    }

    #[test]
    fn a_binding_narrower_than_cpus_per_task_runs_with_a_warning() {
        let m = Machine::synthetic("pack:1 core:4 pu:1").unwrap();
        let plan = resolve(&user(Some("scbnh"), Some("1c")), &SiteConfig::default())
            .unwrap()
            .unwrap();
        let local = place_local(&m, &plan, &[0, 1], false, cpt(2, CpuUnit::Thread)).unwrap();
        assert_eq!(local.tasks[0].cpus.to_string(), "0");
        let warning = local.narrower.unwrap();
        assert!(
            warning.starts_with(
                "warning: binding 1c gives a task 1 CPU(s) (threads, as Slurm counts them \
                 here) but -c/--cpus-per-task asks for 2"
            ),
            "{warning}"
        );
        assert!(warning.ends_with("such as 2c"), "{warning}");
        // The same from the site's default binding.
        let site = SiteConfig {
            map: Some(Layout::parse("scbnh").unwrap()),
            bind: Some(Bind::parse("1c").unwrap()),
            ..SiteConfig::default()
        };
        let plan = resolve(&UserOptions::default(), &site).unwrap().unwrap();
        let local = place_local(&m, &plan, &[0], false, cpt(3, CpuUnit::Thread)).unwrap();
        assert!(local.narrower.is_some());
        // Wide enough, or no binding at all: no warning.
        let plan = resolve(&user(Some("scbnh"), Some("2c")), &SiteConfig::default())
            .unwrap()
            .unwrap();
        let local = place_local(&m, &plan, &[0], false, cpt(2, CpuUnit::Thread)).unwrap();
        assert_eq!(local.narrower, None);
        let plan = resolve(&user(Some("scbnh"), Some("none")), &SiteConfig::default())
            .unwrap()
            .unwrap();
        let local = place_local(&m, &plan, &[0], false, cpt(2, CpuUnit::Thread)).unwrap();
        assert_eq!(local.narrower, None);
    }

    #[test]
    fn one_thread_of_each_core() {
        let m = Machine::synthetic("pack:1 core:3 pu:2")
            .unwrap()
            .restrict(&CpuList::parse("1-5").unwrap());
        assert_eq!(one_thread_per_core(&m).to_string(), "1-2,4");
    }
}

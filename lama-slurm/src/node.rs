//! The rules that place one node's tasks, shared by the plugin (each node of a step), `lama
//! map` and `lama exec` (each rank started by any launcher): a request, the node's machine
//! restricted to the CPUs the tasks may use and the tasks' global ranks become one
//! [`TaskPlacement`] per local task (SPEC §3.2). Pure.

use crate::task_env::{omp_place_list, omp_places};
use lama_engine::{
    binding_for_cpus, cpus_covered, numa_nodes, place, render, Bind, CpuList, CpuUnit, Layout,
    Machine, Membind, Mppr, Order, PlaceError, Request,
};

/// Who asked for LAMA in this step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    /// The user, with `--lama-*` options: failures fail the step.
    User,
    /// The site default: failures follow `on_default_failure`.
    Site,
}

/// A step's LAMA request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StepRequest {
    /// The layout.
    pub layout: Layout,
    /// The binding asked for (by the user or the site); `None`: the default, `1c`, widened to
    /// cover `-c` CPUs per task (see [`effective_bind`]).
    pub bind: Option<Bind>,
    /// The memory binding.
    pub membind: Membind,
    /// MPPR limits.
    pub mppr: Mppr,
    /// Rank ordering on the node.
    pub order: Order,
    /// Who asked.
    pub origin: Origin,
    /// Print one line per task.
    pub verbose: bool,
    /// Set the OpenMP variables that match each task's binding.
    pub omp: bool,
    /// Placement by GPU (a layout led by `g`; `layout` is the rest).
    pub gpu: Option<GpuOptions>,
}

/// What a layout led by `g` adds (docs/devices.md).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct GpuOptions {
    /// `k:g` in `--lama-mppr`: at most k tasks per GPU.
    pub per_gpu: Option<u32>,
    /// `--lama-bind=1g`: each task bound to all the step's CPUs near its GPU.
    pub bind_gpu: bool,
    /// `--lama-gpu-isolate`: each task sees only its own GPUs.
    pub isolate: bool,
}

impl StepRequest {
    /// The binding in force: the one asked for, else the built-in default for the layout
    /// (`1c`; `1h` for a layout led by `h`). In slurmstepd the plugin replaces `bind` by
    /// [`effective_bind`]'s answer once the node is known.
    pub fn binding(&self) -> Bind {
        self.bind.unwrap_or_else(|| Bind::default_for(&self.layout))
    }

    /// The layout as the user wrote it (`g` in front for placement by GPU).
    pub fn layout_text(&self) -> String {
        match self.gpu {
            Some(_) => format!("g{}", self.layout),
            None => self.layout.to_string(),
        }
    }

    /// The binding in force as the user writes it (`1g` for the CPUs near each task's GPU).
    pub fn binding_text(&self) -> String {
        match self.gpu {
            Some(g) if g.bind_gpu => "1g".to_string(),
            _ => self.binding().to_string(),
        }
    }
}

/// What Slurm gave each task of the step: `-c` CPUs, counted in `unit`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StepCpus {
    /// CPUs per task (`-c`, `S_STEP_CPUS_PER_TASK`; 1 without `-c`).
    pub per_task: u32,
    /// What Slurm counts as a CPU on this node.
    pub unit: CpuUnit,
}

impl Default for StepCpus {
    fn default() -> Self {
        StepCpus {
            per_task: 1,
            unit: CpuUnit::Thread,
        }
    }
}

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
            (true, Bind::None) => render::compact_picture(machine, &[info.pu_logical]),
            (true, _) => render::compact_picture(machine, &info.bound_logical),
        };
        let places = if plan.omp {
            let per_cpu = crate::task_env::one_place_per_cpu(cpus.per_task, cpus.unit);
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
        });
    }
    let narrower = match narrowest {
        Some(n) if plan.bind.is_some() => {
            crate::cpus_per_task::narrower_warning(machine, bind, n, cpus.per_task, cpus.unit)
        }
        _ => None,
    };
    let fallback = if bind_within {
        crate::cpus_per_task::exact_fallback_note(widened, bind, globals.len(), per_task, cpus.unit)
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

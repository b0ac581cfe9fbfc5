//! slurmstepd, once per step before its tasks fork (`user_init`): what LAMA does with the
//! step, and this node's placement. The result, a [`Step`], is inherited by every task.

use crate::config::SiteConfig;
use crate::error::StepError;
use crate::placement::{self, TaskPlacement};
use crate::plan_file::{self, PlanRef, PLAN_FILE_VARIABLE, PLAN_VARIABLE};
use crate::request::{StepRequest, UserOptions};
use crate::step_cpus::{self, StepCpus};
use crate::step_node::{het_plan_ranks, het_total, is_het, slurm_node_name};
use crate::{gpus, inherited, topology};
use lama_engine::{Bind, CpuList, Membind};
use lama_planfile::{NodePlan, NodeQuery, PlanFile};
use slurm_spank::{spank_log_user, SpankHandle};

/// What LAMA does in this step on this node.
#[derive(Debug, Clone, Default)]
pub enum Step {
    /// Nothing: no LAMA request, a step LAMA never places, or its CPUs could not be known.
    #[default]
    Untouched,
    /// Placed by a layout.
    Layout {
        /// The request, with the binding this node uses.
        request: StepRequest,
        /// `-c` and what Slurm counts as a CPU here.
        cpus: StepCpus,
        /// One per local task, by local task id (none under Slurm's per-task GPU binding).
        tasks: Vec<TaskPlacement>,
        /// Under Slurm's per-task GPU binding: where each task, once it knows its GPUs, takes
        /// its placement.
        per_task: Option<Box<gpus::SlurmPerTask>>,
    },
    /// Placed by a `lama plan` plan.
    Planned {
        /// The memory binding.
        membind: Membind,
        /// Print the per-task line.
        verbose: bool,
        /// One per local task, by local task id.
        tasks: Vec<TaskPlacement>,
        /// In a heterogeneous step: each task's `SLURM_PROCID` must be the rank its
        /// placement is for (see [`het_plan_ranks`](crate::step_node::het_plan_ranks)).
        check_procid: bool,
    },
}

/// Step ids of the steps LAMA never places: the batch script, the extern step and salloc's
/// interactive step (`slurm.h`: `SLURM_BATCH_SCRIPT`, `SLURM_EXTERN_CONT`,
/// `SLURM_INTERACTIVE_STEP`, `SLURM_PENDING_STEP`).
const SPECIAL_STEPS: [u32; 4] = [0xffff_fffb, 0xffff_fffc, 0xffff_fffa, 0xffff_fffd];

/// A variable of the step's environment, if it is there and not absurdly long.
fn env(spank: &SpankHandle, name: &str) -> Option<String> {
    crate::bounded::env_value(spank.getenv(name).ok().flatten())
}

/// Whether LAMA leaves this step alone whatever it asks for: the batch, extern and interactive
/// steps, and an `srun --cpu-bind=none` without `--lama-*` options of its own (a launcher's
/// daemons, see [`inherited`]).
pub fn leave_alone(spank: &SpankHandle, node: &str) -> Result<bool, slurm_spank::SpankError> {
    if SPECIAL_STEPS.contains(&spank.job_stepid()?) {
        return Ok(true);
    }
    if env(spank, inherited::OWN_OPTIONS_VARIABLE).as_deref() == Some("0")
        && env(spank, "SLURM_CPU_BIND_TYPE")
            .is_some_and(|t| lama_slurm::cpu_bind::cpu_bind_none(&t))
    {
        tracing::info!(
            node,
            "lama: srun --cpu-bind=none without --lama-* options of its own (a launcher's \
             daemons): LAMA leaves the step alone"
        );
        return Ok(true);
    }
    Ok(false)
}

/// The global ranks of this node's tasks, by local task id.
fn global_ranks(spank: &SpankHandle) -> Result<Vec<u32>, String> {
    let ntasks = spank.job_local_task_count().map_err(|e| e.to_string())?;
    (0..ntasks)
        .map(|local| spank.local_to_global_id(local).map_err(|e| e.to_string()))
        .collect()
}

/// This node's placement of a step by a layout, or why not. Where Slurm binds GPUs to each
/// task itself (`per_task:K`, which `--gpus-per-task` implies), it chooses each task's GPUs by
/// the CPU mask task/affinity computed for it, not by LAMA's: a layout without `g` then places
/// each task by that layout within the CPUs beside the GPUs Slurm gives it, as the same layout
/// led by `g` does, rather than move it away from them. Where that cannot be done (a topology
/// without the GPUs), the tasks are placed by the layout alone, and the user is told.
pub fn by_layout(
    spank: &SpankHandle,
    site: &SiteConfig,
    node: &str,
    request: &StepRequest,
) -> Result<Step, StepError> {
    let binding = lama_slurm::gpu::SlurmGpuBind::read(
        env(spank, "SLURM_TRES_BIND").as_deref(),
        env(spank, "SLURM_GPU_BIND").as_deref(),
    );
    let has_gpus = env(spank, "SLURM_STEP_GPUS").is_some_and(|g| !g.trim().is_empty());
    let per_task = binding.own_gpus_per_task().filter(|_| has_gpus);
    let Some(k) = per_task.filter(|_| request.gpu.is_none()) else {
        if let Some(warning) = cpu_layout_beside_slurms_gpus(request, &binding, has_gpus) {
            // It concerns the step: the user reads it once, from the step's first node.
            tracing::warn!(node, "lama: {warning}");
            if spank.job_nodeid().unwrap_or(0) == 0 {
                spank_log_user!("lama: {node}: {warning}");
            }
        }
        return place_by_layout(spank, site, node, request);
    };
    let beside = StepRequest {
        gpu: Some(crate::request::GpuOptions::default()),
        ..request.clone()
    };
    let layout = &request.layout;
    match place_by_layout(spank, site, node, &beside) {
        Ok(step) => {
            if request.verbose {
                spank_log_user!(
                    "lama: {node}: Slurm binds {k} GPU(s) to each task ({binding}) and chooses \
                     them by task/affinity's CPU mask: each task is placed by {layout} within \
                     the CPUs beside the GPUs Slurm gives it (as --lama-map=g{layout})"
                );
            }
            Ok(step)
        }
        Err(StepError::Failed(why)) => {
            let warning = format!(
                "warning: Slurm binds {k} GPU(s) to each task ({binding}) by task/affinity's \
                 CPU mask, and the tasks cannot be placed beside them ({why}): they are placed by \
                 {layout} alone and may run away from their GPUs; --gpu-bind=none leaves every \
                 GPU of the step to every task"
            );
            tracing::warn!(node, "lama: {warning}");
            spank_log_user!("lama: {node}: {warning}");
            place_by_layout(spank, site, node, request)
        }
        Err(e) => Err(e),
    }
}

/// The warning for a layout without `g` where Slurm binds GPUs to each task by a rule LAMA
/// cannot follow task by task (`closest`, `single:N` with N > 1 from `--ntasks-per-gpu=N`,
/// `map_gpu`, `mask_gpu`): Slurm chooses each task's GPUs by task/affinity's CPU mask, and the
/// layout may move a task away from them. `None` for a `g` layout, without Slurm's binding or
/// without GPUs (`has_gpus`: the step has GPUs on this node).
pub(crate) fn cpu_layout_beside_slurms_gpus(
    request: &StepRequest,
    binding: &lama_slurm::gpu::SlurmGpuBind,
    has_gpus: bool,
) -> Option<String> {
    use lama_slurm::gpu::SlurmGpuBind;
    let followed = binding.own_gpus_per_task().is_some();
    let silent = request.gpu.is_some() || *binding == SlurmGpuBind::None || followed;
    (has_gpus && !silent).then(|| {
        format!(
            "warning: Slurm binds GPUs to each task ({binding}) by task/affinity's CPU mask, \
             and the layout {} places the tasks without regard to them: a task may run away \
             from the GPUs Slurm gives it; --gpus-per-task=K (each task beside its own), \
             --gpu-bind=none with a layout led by 'g', or no --gpu-bind keeps them together",
            request.layout
        )
    })
}

/// [`by_layout`] as `request` says.
fn place_by_layout(
    spank: &SpankHandle,
    site: &SiteConfig,
    node: &str,
    request: &StepRequest,
) -> Result<Step, StepError> {
    let needs =
        crate::topo_source::needed_levels(&request.layout, request.binding(), &request.mppr);
    let (resolved, micros) = topology::for_step(site, node, &needs, request.gpu.is_some())?;
    let job = spank.job_id().map_err(|e| e.to_string())?;
    let step = spank.job_stepid().map_err(|e| e.to_string())?;
    let cpus =
        step_cpus::here(spank, &resolved.machine, job, step).map_err(StepError::CpusUnknown)?;
    let mut machine = resolved.machine.restrict(&cpus);
    // --threads-per-core=1 (also implied by --hint=nomultithread): one thread per core, even
    // where the cpuset holds more.
    if env(spank, "SLURM_THREADS_PER_CORE").as_deref() == Some("1") {
        machine = machine.restrict(&placement::one_thread_per_core(&machine));
    }
    if machine.available().is_empty() {
        return Err(StepError::Failed(format!(
            "the step's CPUs ({cpus}) are not in this node's topology ({})",
            resolved.machine.name()
        )));
    }
    let globals = global_ranks(spank)?;
    let per_task = step_cpus::per_task(
        spank,
        site,
        &resolved.machine,
        globals.len() as u32,
        cpus.len() as u32,
    );
    let overcommit =
        env(spank, "SLURM_OVERCOMMIT").is_some_and(|v| v == "1" || v.eq_ignore_ascii_case("yes"));
    if request.gpu.is_some() {
        return by_gpu(
            spank, node, &machine, request, &globals, overcommit, per_task, &resolved,
        );
    }
    let local =
        placement::place_local(&machine, request, &globals, overcommit, per_task).map_err(|e| {
            match e {
                lama_engine::PlaceError::Oversubscribed { .. } => {
                    format!("{e} (to oversubscribe: srun --overcommit)")
                }
                other => other.to_string(),
            }
        })?;
    let request = StepRequest {
        bind: Some(local.bind),
        ..request.clone()
    };
    tracing::info!(
        node, job, step, source = %resolved.source, topology_us = micros, cpus = %cpus,
        cpus_per_task = per_task.per_task, cpu_unit = per_task.unit.name(),
        "lama: placed {} task(s) with layout {} binding {} membind {}",
        globals.len(), request.layout, local.bind, request.membind
    );
    // What concerns this node is said by this node; what concerns the step, by its first.
    for note in &local.here {
        tracing::warn!(node, "lama: {note}");
        spank_log_user!("lama: {node}: {note}");
    }
    step_messages(spank, node, &machine, &request, local.narrower.as_deref());
    Ok(Step::Layout {
        request,
        cpus: per_task,
        tasks: local.tasks,
        per_task: None,
    })
}

/// This node's placement of a step by GPU (a layout led by `g`), or why not.
#[allow(clippy::too_many_arguments)]
fn by_gpu(
    spank: &SpankHandle,
    node: &str,
    machine: &lama_engine::Machine,
    request: &StepRequest,
    globals: &[u32],
    overcommit: bool,
    cpus: StepCpus,
    resolved: &crate::topo_source::Resolved,
) -> Result<Step, StepError> {
    let vendor = gpus::machine_gpus(machine)
        .first()
        .map_or(String::new(), |d| d.vendor.clone());
    // slurmstepd's own configuration, not the job's SLURM_CONF; gres.conf read once.
    let slurm_conf = crate::slurm_conf::config_file();
    let fs = crate::gpu_cards::RealFiles;
    // This node's name and its gres.conf, read when first needed.
    let gres = std::cell::OnceCell::new();
    let gres = || {
        gres.get_or_init(|| {
            let node = slurm_node_name(spank)?;
            let files = crate::gpu_cards::gres_files(slurm_conf.as_deref(), &node, &fs)?;
            Ok::<_, String>((node, files))
        })
        .clone()
    };
    let mut step_gpus = gpus::read(|name| env(spank, name), &vendor)?;
    if !step_gpus.uuids {
        // Which card each of Slurm's GPUs is, where gres.conf's files number them.
        let (node_name, files) = gres()?;
        step_gpus.cards = files.cards(&node_name, &step_gpus.slurm, &fs)?;
    }
    let bus_order = gpus::in_bus_order(machine, &mut step_gpus, |vendor, bus| {
        crate::gpu_cards::card_uuid(&fs, vendor, bus)
    });
    let mut placed = gpus::place_here(machine, request, &step_gpus, globals, overcommit, cpus)?;
    placed.notes.extend(bus_order);
    if let Some(per_task) = placed.per_task.as_mut() {
        // Each task will learn its GPUs from the device files it may open; where they cannot
        // be found, no task can, and each keeps Slurm's binding (never killed).
        per_task.files = Some(gres().and_then(|(node_name, files)| {
            files.files(&node_name, &step_gpus.slurm, &per_task.buses, &fs)
        }));
        // The node's other cards: whether a task may open them tells whether the step's
        // devices are confined (bounded by the node's GPUs).
        let others: Vec<&str> = gpus::machine_gpus(machine)
            .iter()
            .map(|d| d.bus_id.as_str())
            .filter(|b| !per_task.buses.iter().any(|s| s.eq_ignore_ascii_case(b)))
            .collect();
        per_task.others = crate::gpu_cards::cards_files(&fs, &others);
    }
    tracing::info!(
        node, source = %resolved.source, cpus = %machine.available(),
        "lama: placed {} task(s) by GPU (SLURM_STEP_GPUS {}) with layout g{}",
        globals.len(), step_gpus.slurm.iter().map(u32::to_string).collect::<Vec<_>>().join(","),
        request.layout
    );
    for note in &placed.notes {
        tracing::warn!(node, "lama: {note}");
        spank_log_user!("lama: {node}: {note}");
    }
    step_messages(spank, node, machine, request, None);
    Ok(Step::Layout {
        request: request.clone(),
        cpus,
        tasks: placed.tasks,
        per_task: placed.per_task,
    })
}

/// What concerns the whole step, said once, by its first node: a binding narrower than `-c`,
/// `--cpu-bind` replaced by LAMA's binding, and with `--lama-verbose` the distribution hint.
fn step_messages(
    spank: &SpankHandle,
    node: &str,
    machine: &lama_engine::Machine,
    request: &StepRequest,
    narrower: Option<&str>,
) {
    let first_node = spank.job_nodeid().unwrap_or(0) == 0;
    if let Some(warning) = narrower {
        tracing::warn!(node, "lama: {warning}");
        if first_node {
            spank_log_user!("lama: {node}: {warning}");
        }
    }
    if !first_node {
        return;
    }
    if request.binding() != Bind::None {
        let asked = env(spank, "SLURM_CPU_BIND_TYPE");
        if let Some(kind) = asked
            .as_deref()
            .and_then(lama_slurm::cpu_bind::explicit_cpu_bind)
        {
            spank_log_user!(
                "lama: {node}: warning: --cpu-bind={kind} and LAMA both bind the tasks; LAMA's \
                 binding ({}) replaces Slurm's. Give --cpu-bind=none, or --lama-bind=none to \
                 keep Slurm's",
                request.binding()
            );
        }
    }
    if request.verbose && request.gpu.is_none() {
        let layout = lama_engine::Request {
            bind: request.binding(),
            mppr: request.mppr.clone(),
            order: request.order,
            ..lama_engine::Request::new(request.layout.clone(), 0)
        };
        if let Some(hint) = lama_slurm::distribution::hint(
            machine,
            &layout,
            node,
            spank.job_nnodes().unwrap_or(1),
            env(spank, "SLURM_DISTRIBUTION").as_deref(),
            env(spank, "SLURM_JOB_CPUS_PER_NODE").as_deref(),
        ) {
            spank_log_user!("lama: {hint}");
        }
    }
}

/// This node's view of the plan that travelled with the step: its text from the environment
/// (at most [`lama_planfile::MAX_INLINE_PLAN_BYTES`]), or the file the environment names,
/// read as the job's user, in pieces, checked to be the text srun read. Every bound is the
/// step's (`query`), checked before the plan is read: what this costs root grows with the
/// step, never with the plan's text (ARCHITECTURE.md, "Root pays only for the step").
fn plan_here(spank: &SpankHandle, query: &NodeQuery<'_>) -> Result<NodePlan, StepError> {
    // The plan has its own bound (srun refuses a longer one), not the 4 KiB of Slurm's
    // variables: a plan of 128 ranks is already longer than that.
    if let Some(text) = spank
        .getenv(PLAN_VARIABLE)
        .ok()
        .flatten()
        .filter(|t| t.len() <= lama_planfile::MAX_INLINE_PLAN_BYTES)
    {
        return PlanFile::parse_for_node(&text, query).map_err(|e| format!("the plan: {e}").into());
    }
    let Some(value) = spank.getenv(PLAN_FILE_VARIABLE).ok().flatten() else {
        return Err(
            "the plan did not reach this node: it travels in the job's environment \
                    (srun --export=NONE drops it)"
                .into(),
        );
    };
    let plan = PlanRef::decode(&value)
        .ok_or_else(|| format!("{PLAN_FILE_VARIABLE} is not what srun wrote: run srun again"))?;
    // user_init runs with the job's user as its effective uid (slurmstepd drops privileges
    // before it): the user's file is never read with root's rights.
    let uid = spank.job_uid().map_err(|e| e.to_string())?;
    // SAFETY: geteuid has no preconditions and cannot fail.
    let euid = unsafe { libc::geteuid() };
    if euid != uid {
        return Err(format!(
            "the plan {} would be read as uid {euid}, not as the job's user ({uid}): nothing \
             is read with other rights than the user's",
            plan.path
        )
        .into());
    }
    tracing::debug!(path = %plan.path, euid, "lama: reading the plan from its file");
    Ok(plan.read_for_node(query)?)
}

/// The step's ranks on this node and in all, from Slurm: the global ranks of the local tasks
/// (`None` in a heterogeneous step, where they come from the plan: [`het_plan_ranks`]), the
/// local task count and the step's task count.
fn step_ranks(spank: &SpankHandle) -> Result<(Option<Vec<u32>>, u32, u32), StepError> {
    let local = spank.job_local_task_count().map_err(|e| e.to_string())?;
    if is_het(|name| env(spank, name)) {
        let total = het_total(env(spank, "SLURM_STEP_NUM_TASKS").as_deref())?;
        return Ok((None, local, total));
    }
    let total = spank.job_total_task_count().map_err(|e| e.to_string())?;
    Ok((Some(global_ranks(spank)?), local, total))
}

/// This node's tasks from the `lama plan` plan that travelled with the step, or why not.
pub fn by_plan(
    spank: &SpankHandle,
    site: &SiteConfig,
    node: &str,
    user: &UserOptions,
) -> Result<Step, StepError> {
    let (globals, local, total) = step_ranks(spank)?;
    let membind = match &user.membind {
        Some(m) => Membind::parse(m).map_err(|d| d.headline())?,
        None => site.membind,
    };
    let (resolved, micros) = topology::for_step(site, node, &[], false)?;
    let job = spank.job_id().map_err(|e| e.to_string())?;
    let step = spank.job_stepid().map_err(|e| e.to_string())?;
    let cpus: CpuList =
        step_cpus::here(spank, &resolved.machine, job, step).map_err(StepError::CpusUnknown)?;
    let verbose = user.verbose || site.verbose;
    // Plans name Slurm's nodes, which need not be the kernel's host names. Only this node's
    // lines are expanded, each CPU bounded by the node's before it is (the text is the user's).
    let slurm_node = slurm_node_name(spank)?;
    let cpu_bound = resolved
        .machine
        .pus()
        .iter()
        .map(|p| p.os + 1)
        .max()
        .unwrap_or(0);
    let query = NodeQuery {
        node: &slurm_node,
        cpu_bound,
        total: Some(total),
        most_here: local as usize,
        wanted: globals.as_deref().unwrap_or(&[]),
    };
    let file = plan_here(spank, &query)?;
    let het = globals.is_none();
    let globals = match globals {
        Some(g) => g,
        None => het_plan_ranks(
            file.here.iter().map(|(r, _)| *r).collect(),
            local,
            &slurm_node,
        )?,
    };
    let here = plan_file::StepHere {
        node: &slurm_node,
        globals: &globals,
        local_count: globals.len(),
        total: Some(total),
        cpus: &cpus,
        launcher: "Slurm",
        relaunch: lama_slurm::node_plan::SRUN_RELAUNCH,
    };
    let tasks = plan_file::planned_tasks(&resolved.machine, &file, &here, verbose, user.omp)?;
    tracing::info!(node, job, step, source = %resolved.source, topology_us = micros,
        cpus = %cpus, "lama: applied a plan to {} task(s)", globals.len());
    Ok(Step::Planned {
        membind,
        verbose,
        tasks,
        check_procid: het,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::request::{resolve, tests::user};
    use lama_slurm::gpu::SlurmGpuBind;

    #[test]
    fn a_cpu_layout_where_slurm_binds_gpus_by_a_rule_lama_cannot_follow_is_told() {
        let site = SiteConfig::default();
        let csbnh = resolve(&user(Some("csbnh"), None), &site).unwrap().unwrap();
        let gcsbnh = resolve(&user(Some("gcsbnh"), None), &site)
            .unwrap()
            .unwrap();
        let read = |tres: &str| SlurmGpuBind::read(Some(tres), None);
        // --gpu-bind=closest, --ntasks-per-gpu=2 (single:2), map_gpu: the warning names the
        // binding and the ways out.
        for tres in [
            "gres/gpu:closest",
            "gres/gpu:single:2",
            "gres/gpu:map_gpu:1,0",
        ] {
            let w = cpu_layout_beside_slurms_gpus(&csbnh, &read(tres), true)
                .unwrap_or_else(|| panic!("{tres}: no warning"));
            assert!(
                w.contains("may run away from the GPUs Slurm gives it")
                    && w.contains("--gpus-per-task=K"),
                "{w}"
            );
        }
        // Silent: a g layout, per_task and single:1 (each task placed beside its own), no
        // binding, no GPUs.
        assert_eq!(
            cpu_layout_beside_slurms_gpus(&gcsbnh, &read("gres/gpu:closest"), true),
            None
        );
        for tres in ["gres/gpu:per_task:1", "gres/gpu:single:1", "gres/gpu:none"] {
            assert_eq!(
                cpu_layout_beside_slurms_gpus(&csbnh, &read(tres), true),
                None,
                "{tres}"
            );
        }
        assert_eq!(
            cpu_layout_beside_slurms_gpus(&csbnh, &read("gres/gpu:closest"), false),
            None
        );
    }
}

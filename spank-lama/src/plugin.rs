//! The SPANK callbacks: options in srun/sbatch/salloc, placement in slurmstepd.
//!
//! | callback | context | what the plugin does |
//! |---|---|---|
//! | `init` | all | reads the site configuration (refuses to load on error); registers the `--lama-*` options in local, remote and allocator contexts |
//! | `init_post_opt` | local, allocator | checks the option values (syntax and combination): a bad value stops srun/sbatch/salloc before anything is launched |
//! | `user_init` | remote | once per step, before tasks fork: skips batch, extern and interactive steps and steps without LAMA; loads the node topology, reads the step cpuset, restricts, places this node's tasks |
//! | `task_init` | remote, in each task | binds the task (CPUs, and memory with `--lama-membind`), sets `LAMA_*`, prints the verbose line |
//!
//! Everything runs inside the SPANK binding's panic guard; the code itself returns errors
//! instead of panicking, starts no thread and writes no file.

use crate::bind;
use crate::config::{OnFailure, SiteConfig};
use crate::plan::{self, Origin, Plan, StepCpus, TaskPlacement, UserOptions};
use crate::{cgroup, inherited, step_cpus, topo_source};
use lama_engine::PlanFile;
use slurm_spank::{spank_log_user, Context, Plugin, SpankHandle, SpankOption};
use std::error::Error;

/// Step ids of the steps LAMA never places: the batch script, the extern step and salloc's
/// interactive step (`slurm.h`: `SLURM_BATCH_SCRIPT`, `SLURM_EXTERN_CONT`,
/// `SLURM_INTERACTIVE_STEP`, `SLURM_PENDING_STEP`).
const SPECIAL_STEPS: [u32; 4] = [0xffff_fffb, 0xffff_fffc, 0xffff_fffa, 0xffff_fffd];

use crate::options::*;

/// The plugin's state: the site configuration from `init`, and in slurmstepd the step's plan
/// and this node's placement, computed in `user_init` and inherited by every forked task.
#[derive(Debug, Default)]
pub struct Lama {
    site: SiteConfig,
    plan: Option<Plan>,
    tasks: Vec<TaskPlacement>,
    /// Set when this step applies a plan file: the memory binding and verbosity it runs with.
    planned: Option<(lama_engine::Membind, bool)>,
    cpus: StepCpus,
    node: String,
    /// Set when a callback returns an error it has already shown (see [`Shown`]).
    shown: std::cell::Cell<bool>,
    /// In srun: the `--lama-*` options it inherited from its batch script or allocation.
    inherited: Vec<(&'static str, String)>,
}

fn user_options(spank: &SpankHandle) -> UserOptions {
    let value = |name: &str| spank.get_option_value_lossy(name).map(|v| v.into_owned());
    UserOptions {
        map: value(OPT_MAP),
        bind: value(OPT_BIND),
        mppr: value(OPT_MPPR),
        order: value(OPT_ORDER),
        membind: value(OPT_MEMBIND),
        plan: value(OPT_PLAN),
        verbose: spank.is_option_set(OPT_VERBOSE),
        omp: spank.is_option_set(OPT_OMP),
    }
}

/// The node's short host name (`%n`, messages). Not taken from the job's environment, which
/// the user controls.
fn short_host_name() -> String {
    crate::bounded::read_file(
        std::path::Path::new("/proc/sys/kernel/hostname"),
        crate::bounded::MAX_SMALL_FILE,
    )
    .ok()
    .and_then(|h| h.trim().split('.').next().map(str::to_string))
    .unwrap_or_else(|| "node".to_string())
}

/// Why a step's tasks were not placed on this node.
#[derive(Debug)]
enum NotPlaced {
    /// The step's CPUs here cannot be known: nothing is bound (fail closed), the step runs.
    CpusUnknown(String),
    /// Anything else: the step fails (or, for the site's default, runs as `on_default_failure`
    /// says).
    Failed(String),
}

impl From<String> for NotPlaced {
    fn from(why: String) -> Self {
        NotPlaced::Failed(why)
    }
}

impl std::fmt::Display for NotPlaced {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            NotPlaced::CpusUnknown(why) | NotPlaced::Failed(why) => f.write_str(why),
        }
    }
}

/// An error already shown where it belongs (the user's terminal, Slurm's log): returned to
/// make Slurm fail the command or step, and not reported a second time by `report_error`.
#[derive(Debug)]
struct Shown(String);

impl std::fmt::Display for Shown {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl Error for Shown {}

impl Lama {
    /// Says once, from this node, that LAMA binds nothing in this step and why: the step's
    /// CPUs here are unknown, and binding by a guess could bind onto another job's CPUs.
    fn not_bound(&self, why: &str) {
        tracing::warn!(node = %self.node, "lama: tasks not bound: {why}");
        spank_log_user!(
            "lama: {}: warning: LAMA binds no task on this node: {why}; tasks run with Slurm's \
             binding",
            self.node
        );
    }

    /// Wraps an error that was already shown, so that `report_error` does not repeat it.
    fn shown(&self, e: impl std::fmt::Display) -> Box<dyn Error> {
        self.shown.set(true);
        Box::new(Shown(e.to_string()))
    }
}

impl Lama {
    /// This node's topology from the first usable source, with the time it took in
    /// microseconds; each source skipped is logged with its reason.
    fn node_topology(&self) -> Result<(topo_source::Resolved, u128), String> {
        let start = std::time::Instant::now();
        let online = lama_hwloc::online_cpus().map_err(|e| e.to_string())?;
        let resolved = topo_source::node_topology_live(&self.site, &self.node, &online)
            .map_err(|e| format!("cannot get this node's topology: {e}"))?;
        for skipped in &resolved.skipped {
            tracing::info!(node = %self.node, "lama: topology source skipped: {skipped}");
        }
        Ok((resolved, start.elapsed().as_micros()))
    }

    /// slurmd is starting: cache the node's topology for the steps (`topology_cache=`). A
    /// failure is logged and slurmd starts anyway; steps then use the next source.
    fn cache_topology(&self) {
        let Some(path) = &self.site.topology_cache else {
            tracing::info!(node = %self.node, "lama: topology_cache=none: no topology cached");
            return;
        };
        match crate::topo_cache::export(path, || lama_hwloc::export_xml(&lama_hwloc::Source::Live))
        {
            Ok(done) => tracing::info!(
                node = %self.node,
                "lama: topology cached in {} ({} bytes, {} ms)",
                path.display(),
                done.bytes,
                done.millis
            ),
            Err(e) => tracing::warn!(
                node = %self.node,
                "lama: topology not cached ({e}); steps use the next topology source"
            ),
        }
    }

    /// Computes this node's placement for the step, or explains why not. Returns the plan
    /// with the binding this node uses.
    fn place_step(&mut self, spank: &SpankHandle, plan: &Plan) -> Result<Plan, NotPlaced> {
        let (resolved, micros) = self.node_topology()?;
        let job = spank.job_id().map_err(|e| e.to_string())?;
        let step = spank.job_stepid().map_err(|e| e.to_string())?;
        let cpus =
            step_cpus_here(spank, &resolved.machine, job, step).map_err(NotPlaced::CpusUnknown)?;
        let mut machine = resolved.machine.restrict(&cpus);
        // --threads-per-core=1 (also implied by --hint=nomultithread): one thread per core,
        // even where the cpuset holds more.
        if spank
            .getenv("SLURM_THREADS_PER_CORE")
            .ok()
            .flatten()
            .as_deref()
            == Some("1")
        {
            machine = machine.restrict(&plan::one_thread_per_core(&machine));
        }
        if machine.available().is_empty() {
            return Err(NotPlaced::Failed(format!(
                "the step's CPUs ({cpus}) are not in this node's topology ({})",
                resolved.machine.name()
            )));
        }
        let ntasks = spank.job_local_task_count().map_err(|e| e.to_string())?;
        self.cpus = self.step_cpus(spank, &resolved.machine, ntasks, cpus.len() as u32);
        let mut globals = Vec::with_capacity(ntasks as usize);
        for local in 0..ntasks {
            globals.push(spank.local_to_global_id(local).map_err(|e| e.to_string())?);
        }
        let overcommit = spank
            .getenv("SLURM_OVERCOMMIT")
            .ok()
            .flatten()
            .is_some_and(|v| v == "1" || v.eq_ignore_ascii_case("yes"));
        let local = plan::place_local(&machine, plan, &globals, overcommit, self.cpus)
            .map_err(|e| match e {
                lama_engine::PlaceError::Oversubscribed { .. } => {
                    format!("{e} (to oversubscribe: srun --overcommit)")
                }
                other => other.to_string(),
            })?;
        self.tasks = local.tasks;
        let plan = Plan {
            bind: Some(local.bind),
            ..plan.clone()
        };
        tracing::info!(
            node = %self.node, job, step, source = %resolved.source, topology_us = micros,
            cpus = %cpus, cpus_per_task = self.cpus.per_task, cpu_unit = self.cpus.unit.name(),
            "lama: placed {} task(s) with layout {} binding {} membind {}",
            ntasks, plan.layout, local.bind, plan.membind
        );
        // What concerns the whole step is said once, by the step's first node.
        let first_node = spank.job_nodeid().unwrap_or(0) == 0;
        if let Some(warning) = &local.narrower {
            tracing::warn!(node = %self.node, job, step, "lama: {warning}");
            if first_node {
                spank_log_user!("lama: {}: {warning}", self.node);
            }
        }
        if first_node && plan.binding() != lama_engine::Bind::None {
            let asked =
                crate::bounded::env_value(spank.getenv("SLURM_CPU_BIND_TYPE").ok().flatten());
            if let Some(kind) = asked.as_deref().and_then(plan::explicit_cpu_bind) {
                spank_log_user!(
                    "lama: {}: warning: --cpu-bind={kind} and LAMA both bind the tasks; LAMA's \
                     binding ({}) replaces Slurm's. Give --cpu-bind=none, or --lama-bind=none to \
                     keep Slurm's",
                    self.node,
                    plan.binding()
                );
            }
        }
        if plan.verbose && first_node {
            let nnodes = spank.job_nnodes().unwrap_or(1);
            let in_use =
                crate::bounded::env_value(spank.getenv("SLURM_DISTRIBUTION").ok().flatten());
            let per_node =
                crate::bounded::env_value(spank.getenv("SLURM_JOB_CPUS_PER_NODE").ok().flatten());
            if let Some(hint) = plan::distribution_hint(
                &machine,
                &plan,
                &self.node,
                nnodes,
                in_use.as_deref(),
                per_node.as_deref(),
            ) {
                spank_log_user!("lama: {hint}");
            }
        }
        Ok(plan)
    }

    /// `-c` of the step, and what Slurm counts as a CPU here: the site's `cpu_unit`, else
    /// detected from what the step asked for on this node against the hardware threads it got
    /// ([`step_cpus::cpu_unit`]).
    fn step_cpus(
        &self,
        spank: &SpankHandle,
        machine: &lama_engine::Machine,
        ntasks: u32,
        step_pus: u32,
    ) -> StepCpus {
        let per_task = spank
            .step_cpus_per_task()
            .ok()
            .and_then(|c| u32::try_from(c).ok())
            .filter(|&c| c >= 1)
            .unwrap_or(1);
        let unit = self.site.cpu_unit.unwrap_or_else(|| {
            let unit = step_cpus::cpu_unit(machine, ntasks, per_task, step_pus);
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
}

/// The CPUs this step may use on this node ([`step_cpus::decide`]): its cgroup cpuset as Slurm
/// configured it and the cores Slurm allocated to it (`S_STEP_ALLOC_CORES`); `Err` when neither
/// can be read, and the step is then not bound.
fn step_cpus_here(
    spank: &SpankHandle,
    machine: &lama_engine::Machine,
    job: u32,
    step: u32,
) -> Result<lama_engine::CpuList, String> {
    let allocated = spank
        .step_alloc_cores()
        .map_err(|e| format!("S_STEP_ALLOC_CORES: {e}"))
        .and_then(|list| {
            let abstract_cores = lama_engine::CpuList::parse(list)
                .map_err(|e| format!("S_STEP_ALLOC_CORES '{list}': {e}"))?;
            step_cpus::cores_to_cpus(machine, &abstract_cores)
        });
    let set = step_cpus::decide(cgroup::step_cpus(job, step), allocated)?;
    tracing::info!(
        job,
        step,
        "lama: step CPUs {} from {}",
        set.cpus,
        set.source
    );
    Ok(set.cpus)
}

/// This node's name as Slurm knows it (its `NodeName`, which need not be the kernel's host
/// name): its place in the step's node list (`S_JOB_NODEID` in `SLURM_STEP_NODELIST`).
fn slurm_node_name(spank: &SpankHandle) -> Result<String, String> {
    let list = crate::bounded::env_value(spank.getenv("SLURM_STEP_NODELIST").ok().flatten())
        .ok_or("SLURM_STEP_NODELIST is not in the step's environment")?;
    let id = spank
        .job_nodeid()
        .map_err(|e| format!("S_JOB_NODEID: {e}"))?;
    nth_node(&list, id)
}

/// The `id`th name of a Slurm hostlist.
fn nth_node(list: &str, id: u32) -> Result<String, String> {
    let names = lama_slurm::hostlist::expand(list)?;
    names.get(id as usize).cloned().ok_or_else(|| {
        format!(
            "S_JOB_NODEID {id} is beyond the step's {} node(s) ({list})",
            names.len()
        )
    })
}

/// The plan's text, read as the user in srun/sbatch/salloc: the file, or (for an srun inside
/// a batch script or allocation whose file is not readable here) the text that sbatch/salloc
/// already put in the environment.
fn read_plan_locally(path: &str) -> Result<(String, PlanFile), String> {
    let from_file = crate::bounded::read_file(
        std::path::Path::new(path),
        lama_engine::planfile::MAX_PLAN_BYTES as u64,
    )
    .map_err(|e| e.to_string());
    let text = match from_file {
        Ok(t) => t,
        Err(why) => match std::env::var(plan::PLAN_VARIABLE) {
            Ok(t) => t,
            Err(_) => return Err(format!("lama: --lama-plan: cannot read {path}: {why}")),
        },
    };
    let file = PlanFile::parse(&text).map_err(|e| format!("lama: --lama-plan: {path}: {e}"))?;
    Ok((text, file))
}

impl Lama {
    /// This node's tasks from the plan that travelled with the step.
    fn place_from_plan(
        &mut self,
        spank: &SpankHandle,
        user: &UserOptions,
    ) -> Result<(), NotPlaced> {
        let text = spank.getenv(plan::PLAN_VARIABLE).ok().flatten().ok_or(
            "the plan did not reach this node: it travels in the job's environment \
                    (srun --export=NONE drops it)"
                .to_string(),
        )?;
        let file = PlanFile::parse(&text).map_err(|e| format!("the plan is malformed: {e}"))?;
        let membind = match &user.membind {
            Some(m) => lama_engine::Membind::parse(m).map_err(|d| d.headline())?,
            None => self.site.membind,
        };
        let (resolved, micros) = self.node_topology()?;
        let job = spank.job_id().map_err(|e| e.to_string())?;
        let step = spank.job_stepid().map_err(|e| e.to_string())?;
        let cpus =
            step_cpus_here(spank, &resolved.machine, job, step).map_err(NotPlaced::CpusUnknown)?;
        let ntasks = spank.job_local_task_count().map_err(|e| e.to_string())?;
        let total = spank.job_total_task_count().map_err(|e| e.to_string())?;
        let mut globals = Vec::with_capacity(ntasks as usize);
        for local in 0..ntasks {
            globals.push(spank.local_to_global_id(local).map_err(|e| e.to_string())?);
        }
        let verbose = user.verbose || self.site.verbose;
        // Plans name Slurm's nodes, which need not be the kernel's host names.
        let node = slurm_node_name(spank)?;
        let here = plan::StepHere {
            node: &node,
            globals: &globals,
            total,
            cpus: &cpus,
        };
        self.tasks = plan::planned_tasks(&resolved.machine, &file, &here, verbose, user.omp)?;
        self.planned = Some((membind, verbose));
        tracing::info!(node = %self.node, job, step, source = %resolved.source,
            topology_us = micros, cpus = %cpus, "lama: applied a plan to {} task(s)", ntasks);
        Ok(())
    }
}

// SAFETY (for `unsafe impl`): the plugin starts no thread, so the task callbacks that run in
// children forked by slurmstepd cannot deadlock on state held by another thread.
unsafe impl Plugin for Lama {
    fn setup(&mut self, _spank: &mut SpankHandle) -> Result<(), Box<dyn Error>> {
        crate::logging::install();
        Ok(())
    }

    fn report_error(&self, _spank: &mut SpankHandle, error: &dyn Error) {
        // `error` is not 'static, so it cannot be downcast: the callbacks flag what they showed.
        if !self.shown.replace(false) {
            tracing::error!("lama: {error}");
        }
    }

    fn init(&mut self, spank: &mut SpankHandle) -> Result<(), Box<dyn Error>> {
        let context = spank.context()?;
        let args = spank.plugin_argv()?;
        let site = SiteConfig::from_args(&args, |path| {
            crate::bounded::read_file(std::path::Path::new(path), crate::bounded::MAX_SMALL_FILE)
        });
        if context == Context::Slurmd {
            // An error returned here stops slurmd (and, after a restart, takes the node down
            // with its jobs): log it and go on. Steps read the same line and refuse.
            self.node = short_host_name();
            match site {
                Ok(site) => {
                    self.site = site;
                    self.cache_topology();
                }
                Err(e) => slurm_spank::spank_log_error!(
                    "{e}; slurmd goes on without a topology cache, and steps on this node fail \
                     with this message until the plugstack.conf line is fixed"
                ),
            }
            return Ok(());
        }
        self.site = site.map_err(|e| {
            slurm_spank::spank_log_error!("{e}");
            self.shown(e)
        })?;
        if context == Context::Local {
            // Before srun parses its options: what it inherits (see `inherited`).
            let env: Vec<(String, String)> = std::env::vars().collect();
            self.inherited =
                inherited::inherited_options(env.iter().map(|(k, v)| (k.as_str(), v.as_str())));
        }
        if matches!(
            context,
            Context::Local | Context::Remote | Context::Allocator
        ) {
            for (name, arg, usage) in OPTIONS {
                let mut opt = SpankOption::new(name).usage(usage);
                if let Some(arg) = arg {
                    opt = opt.takes_value(arg);
                }
                spank.register_option(opt)?;
            }
        }
        Ok(())
    }

    fn init_post_opt(&mut self, spank: &mut SpankHandle) -> Result<(), Box<dyn Error>> {
        let context = spank.context()?;
        if matches!(context, Context::Local | Context::Allocator) {
            // Check before anything is launched; the same diagnostic as `lama map`.
            let user = user_options(spank);
            if context == Context::Local {
                let own = inherited::has_own_options(&user, &self.inherited);
                std::env::set_var(inherited::OWN_OPTIONS_VARIABLE, if own { "1" } else { "0" });
            }
            if let Err(e) = plan::resolve(&user, &self.site) {
                slurm_spank::spank_log_error!("{e}");
                return Err(self.shown(e));
            }
            if let Some(path) = &user.plan {
                // Read as the user, here; the text travels with the job's environment.
                match read_plan_locally(path) {
                    Ok((text, _)) => std::env::set_var(plan::PLAN_VARIABLE, text),
                    Err(e) => {
                        slurm_spank::spank_log_error!("{e}");
                        return Err(self.shown(e));
                    }
                }
            }
        }
        Ok(())
    }

    fn local_user_init(&mut self, spank: &mut SpankHandle) -> Result<(), Box<dyn Error>> {
        // srun, once the step's size is known and before it is launched: a plan for another
        // number of ranks is refused here.
        let user = user_options(spank);
        let Some(path) = &user.plan else {
            return Ok(());
        };
        let file = std::env::var(plan::PLAN_VARIABLE)
            .ok()
            .and_then(|t| PlanFile::parse(&t).ok());
        if let (Some(file), Ok(total)) = (file, spank.job_total_task_count()) {
            if file.ranks.len() != total as usize {
                let e = format!(
                    "lama: --lama-plan: {path} is for {} ranks but this step has {total} tasks; \
                     launch with -n{}",
                    file.ranks.len(),
                    file.ranks.len()
                );
                slurm_spank::spank_log_error!("{e}");
                return Err(self.shown(e));
            }
        }
        Ok(())
    }

    fn user_init(&mut self, spank: &mut SpankHandle) -> Result<(), Box<dyn Error>> {
        if spank.context()? != Context::Remote {
            return Ok(());
        }
        if SPECIAL_STEPS.contains(&spank.job_stepid()?) {
            return Ok(());
        }
        self.node = short_host_name();
        let env = |name: &str| crate::bounded::env_value(spank.getenv(name).ok().flatten());
        if env(inherited::OWN_OPTIONS_VARIABLE).as_deref() == Some("0")
            && env("SLURM_CPU_BIND_TYPE").is_some_and(|t| inherited::cpu_bind_none(&t))
        {
            tracing::info!(node = %self.node, "lama: srun --cpu-bind=none without --lama-* \
                options of its own (a launcher's daemons): LAMA leaves the step alone");
            return Ok(());
        }
        let user = user_options(spank);
        if user.plan.is_some() {
            return match self.place_from_plan(spank, &user) {
                Ok(()) => Ok(()),
                Err(NotPlaced::CpusUnknown(why)) => {
                    self.tasks.clear();
                    self.planned = None;
                    self.not_bound(&why);
                    Ok(())
                }
                Err(NotPlaced::Failed(why)) => {
                    self.tasks.clear();
                    let msg = format!("lama: {}: --lama-plan: {why}", self.node);
                    spank_log_user!("{msg}");
                    Err(self.shown(msg))
                }
            };
        }
        let plan = match plan::resolve(&user, &self.site) {
            Ok(Some(plan)) => plan,
            Ok(None) => return Ok(()),
            Err(e) => {
                spank_log_user!("{e}");
                return Err(self.shown(e));
            }
        };
        match self.place_step(spank, &plan) {
            Ok(placed) => {
                self.plan = Some(placed);
                Ok(())
            }
            Err(NotPlaced::CpusUnknown(why)) => {
                self.tasks.clear();
                self.not_bound(&why);
                Ok(())
            }
            Err(NotPlaced::Failed(why)) => {
                self.tasks.clear();
                let fail =
                    plan.origin == Origin::User || self.site.on_default_failure == OnFailure::Fail;
                if fail {
                    let msg = format!("lama: {}: {why}", self.node);
                    spank_log_user!("{msg}");
                    Err(self.shown(msg))
                } else {
                    spank_log_user!(
                        "lama: {}: warning: the site's default placement was not applied: {why}; \
                         tasks run with Slurm's binding",
                        self.node
                    );
                    Ok(())
                }
            }
        }
    }

    fn task_init(&mut self, spank: &mut SpankHandle) -> Result<(), Box<dyn Error>> {
        // The plan's text is for the plugin, not the application. (Never fatal: this runs in
        // every task of every step.)
        for variable in [plan::PLAN_VARIABLE, inherited::OWN_OPTIONS_VARIABLE] {
            if spank.getenv(variable).ok().flatten().is_some() {
                if let Err(e) = spank.unsetenv(variable) {
                    tracing::warn!("lama: cannot remove {variable} from the task: {e}");
                }
            }
        }
        if let Some((membind, verbose)) = self.planned {
            return self.task_init_planned(spank, membind, verbose);
        }
        let Some(plan) = &self.plan else {
            return Ok(());
        };
        let local = spank.task_id()?;
        let task = usize::try_from(local)
            .ok()
            .and_then(|l| self.tasks.get(l))
            .ok_or_else(|| format!("lama: no placement for local task {local}"))?;
        if plan.binding() != lama_engine::Bind::None {
            bind::set_affinity(&task.cpus).map_err(|e| {
                let msg = format!("lama: {}: task {}: {e}", self.node, task.global);
                spank_log_user!("{msg}");
                self.shown(msg)
            })?;
        }
        // The NUMA nodes the memory policy really names (fewer where the kernel lacks
        // MPOL_PREFERRED_MANY): what LAMA_MEMS reports.
        let mut used_mems = None;
        if let Some((policy, mems)) = plan::memory_binding(plan, task) {
            used_mems = Some(bind::set_membind(policy, &mems).map_err(|e| {
                let msg = format!("lama: {}: task {}: {e}", self.node, task.global);
                spank_log_user!("{msg}");
                self.shown(msg)
            })?);
        }
        for (name, value) in plan::task_environment(plan, task) {
            let value = match &used_mems {
                Some(used) if name == "LAMA_MEMS" => used.to_string(),
                _ => value,
            };
            spank.setenv(name, value, true)?;
        }
        if plan.omp && plan.binding() != lama_engine::Bind::None {
            // The user's own OMP_NUM_THREADS wins.
            if spank.getenv("OMP_NUM_THREADS")?.is_none() {
                let threads = plan::omp_threads(self.cpus, task);
                spank.setenv("OMP_NUM_THREADS", threads.to_string(), true)?;
            }
        }
        if plan.verbose {
            spank_log_user!(
                "{}",
                plan::verbose_line(plan, &self.node, local as u32, std::process::id(), task)
            );
        }
        Ok(())
    }
}

impl Lama {
    /// `task_init` for a step that applies a plan file.
    fn task_init_planned(
        &self,
        spank: &mut SpankHandle,
        membind: lama_engine::Membind,
        verbose: bool,
    ) -> Result<(), Box<dyn Error>> {
        let local = spank.task_id()?;
        let task = usize::try_from(local)
            .ok()
            .and_then(|l| self.tasks.get(l))
            .ok_or_else(|| format!("lama: no planned placement for local task {local}"))?;
        let fail = |e: String| {
            let msg = format!("lama: {}: task {}: {e}", self.node, task.global);
            spank_log_user!("{msg}");
            self.shown(msg)
        };
        bind::set_affinity(&task.cpus).map_err(fail)?;
        let mems = match membind != lama_engine::Membind::None && !task.mems.is_empty() {
            true => Some(bind::set_membind(membind, &task.mems).map_err(fail)?),
            false => None,
        };
        for (name, value) in plan::planned_environment(task, mems.as_ref().map(|m| (membind, m))) {
            spank.setenv(name, value, true)?;
        }
        if task.omp_place_count > 0 && spank.getenv("OMP_NUM_THREADS")?.is_none() {
            spank.setenv("OMP_NUM_THREADS", task.omp_place_count.to_string(), true)?;
        }
        if verbose {
            spank_log_user!(
                "lama-plan - {}, task {:>2} {:>2} [{}]: mask {} set (cpus {}){}, mapped PU L#{} P#{} {}",
                self.node,
                task.global,
                local,
                std::process::id(),
                plan::hex_mask(&task.cpus),
                task.cpus,
                mems.map(|m| format!(", mems {m} {membind}")).unwrap_or_default(),
                task.pu_logical,
                task.pu_os,
                task.picture
            );
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::nth_node;

    #[test]
    fn the_node_is_found_by_its_place_in_the_step() {
        assert_eq!(nth_node("c[01-03],gpu7", 1).unwrap(), "c02");
        assert_eq!(nth_node("c[01-03],gpu7", 3).unwrap(), "gpu7");
        let e = nth_node("c[01-03]", 3).unwrap_err();
        assert_eq!(
            e,
            "S_JOB_NODEID 3 is beyond the step's 3 node(s) (c[01-03])"
        );
        assert!(nth_node("c[01-", 0).is_err());
    }
}

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
use crate::{cgroup, topo_source};
use slurm_spank::{spank_log_user, Context, Plugin, SpankHandle, SpankOption};
use std::error::Error;

/// Step ids of the steps LAMA never places: the batch script, the extern step and salloc's
/// interactive step (`slurm.h`: `SLURM_BATCH_SCRIPT`, `SLURM_EXTERN_CONT`,
/// `SLURM_INTERACTIVE_STEP`, `SLURM_PENDING_STEP`).
const SPECIAL_STEPS: [u32; 4] = [0xffff_fffb, 0xffff_fffc, 0xffff_fffa, 0xffff_fffd];

const OPT_MAP: &str = "lama-map";
const OPT_BIND: &str = "lama-bind";
const OPT_MPPR: &str = "lama-mppr";
const OPT_ORDER: &str = "lama-order";
const OPT_VERBOSE: &str = "lama-verbose";
const OPT_OMP: &str = "lama-omp";
const OPT_MEMBIND: &str = "lama-membind";

/// The options and their usage text (shown by `srun --help`).
const OPTIONS: [(&str, Option<&str>, &str); 7] = [
    (
        OPT_MAP,
        Some("layout"),
        "LAMA mapping layout, leftmost level varies fastest: tokens n b s D N L3 L2 L1 c h \
         (e.g. scbnh), or hwthread core l1cache l2cache l3cache numa socket node, or none",
    ),
    (
        OPT_BIND,
        Some("width"),
        "LAMA binding: <count><level> (1c, 2c, 1L2, 1s, 1N ...), an alias, or none [default 1c]",
    ),
    (
        OPT_MPPR,
        Some("limits"),
        "LAMA max processes per resource, e.g. 1:c,4:s [default: none]",
    ),
    (
        OPT_ORDER,
        Some("n|s"),
        "LAMA rank order on a node: n natural, s sequential (follow the hardware) [default n]",
    ),
    (
        OPT_MEMBIND,
        Some("local|preferred|none"),
        "LAMA memory binding: allocate on the NUMA nodes of each task's CPU binding, only \
         (local) or preferably (preferred) [default none]",
    ),
    (
        OPT_VERBOSE,
        None,
        "print each task's LAMA placement and binding",
    ),
    (
        OPT_OMP,
        None,
        "set OMP_PLACES (one place per bound core), OMP_PROC_BIND=close and, unless set, \
         OMP_NUM_THREADS (-c if given) to match each task's LAMA binding",
    ),
];

/// The plugin's state: the site configuration from `init`, and in slurmstepd the step's plan
/// and this node's placement, computed in `user_init` and inherited by every forked task.
#[derive(Debug, Default)]
pub struct Lama {
    site: SiteConfig,
    plan: Option<Plan>,
    tasks: Vec<TaskPlacement>,
    cpus: StepCpus,
    node: String,
    /// Set when a callback returns an error it has already shown (see [`Shown`]).
    shown: std::cell::Cell<bool>,
}

fn user_options(spank: &SpankHandle) -> UserOptions {
    let value = |name: &str| spank.get_option_value_lossy(name).map(|v| v.into_owned());
    UserOptions {
        map: value(OPT_MAP),
        bind: value(OPT_BIND),
        mppr: value(OPT_MPPR),
        order: value(OPT_ORDER),
        membind: value(OPT_MEMBIND),
        verbose: spank.is_option_set(OPT_VERBOSE),
        omp: spank.is_option_set(OPT_OMP),
    }
}

/// The node's short host name (`%n`, messages). Not taken from the job's environment, which
/// the user controls.
fn short_host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .and_then(|h| h.trim().split('.').next().map(str::to_string))
        .unwrap_or_else(|| "node".to_string())
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
    /// Wraps an error that was already shown, so that `report_error` does not repeat it.
    fn shown(&self, e: impl std::fmt::Display) -> Box<dyn Error> {
        self.shown.set(true);
        Box::new(Shown(e.to_string()))
    }
}

impl Lama {
    /// Computes this node's placement for the step, or explains why not. Returns the plan
    /// with the binding this node uses.
    fn place_step(&mut self, spank: &SpankHandle, plan: &Plan) -> Result<Plan, String> {
        let online = lama_hwloc::online_cpus().map_err(|e| e.to_string())?;
        let resolved = topo_source::node_topology_live(&self.site, &self.node, &online)
            .map_err(|e| format!("cannot get this node's topology: {e}"))?;
        for skipped in &resolved.skipped {
            tracing::info!(node = %self.node, "lama: topology source skipped: {skipped}");
        }
        let job = spank.job_id().map_err(|e| e.to_string())?;
        let step = spank.job_stepid().map_err(|e| e.to_string())?;
        let cpus = match cgroup::step_cpus(job, step) {
            Ok(c) => c,
            Err(why) => {
                tracing::info!(job, step, "lama: step cpuset from the cgroup unavailable ({why}); using the process affinity");
                bind::get_affinity()?
            }
        };
        let machine = resolved.machine.restrict(&cpus);
        if machine.available().is_empty() {
            return Err(format!(
                "the step's CPUs ({cpus}) are not in this node's topology ({})",
                resolved.machine.name()
            ));
        }
        self.cpus = self.step_cpus(spank, &resolved.machine, job, step);
        let ntasks = spank.job_local_task_count().map_err(|e| e.to_string())?;
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
            .map_err(|e| format!("{e}"))?;
        self.tasks = local.tasks;
        let plan = Plan {
            bind: Some(local.bind),
            ..plan.clone()
        };
        tracing::info!(
            node = %self.node, job, step, source = %resolved.source, cpus = %cpus,
            cpus_per_task = self.cpus.per_task, cpu_unit = self.cpus.unit.name(),
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
        if plan.verbose && first_node {
            let nnodes = spank.job_nnodes().unwrap_or(1);
            let in_use = spank.getenv("SLURM_DISTRIBUTION").ok().flatten();
            let per_node = spank.getenv("SLURM_JOB_CPUS_PER_NODE").ok().flatten();
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
    /// detected from the job's CPUs on this node (Slurm's count against the job cpuset's
    /// hardware threads); threads when that cannot be read.
    fn step_cpus(
        &self,
        spank: &SpankHandle,
        machine: &lama_engine::Machine,
        job: u32,
        step: u32,
    ) -> StepCpus {
        let per_task = spank
            .step_cpus_per_task()
            .ok()
            .and_then(|c| u32::try_from(c).ok())
            .filter(|&c| c >= 1)
            .unwrap_or(1);
        let unit = match self.site.cpu_unit {
            Some(u) => u,
            None => {
                let t = lama_engine::threads_per_core(machine);
                let ncpus = spank.job_ncpus().map(u32::from).unwrap_or(0);
                match cgroup::job_cpus(job, step) {
                    Ok(job_pus) => {
                        let unit = lama_engine::CpuUnit::detect(ncpus, job_pus.len() as u32, t);
                        tracing::debug!(job, step, ncpus, job_pus = %job_pus, threads_per_core = t,
                            "lama: Slurm counts {}s as CPUs here", unit.name());
                        unit
                    }
                    Err(why) if t > 1 && per_task > 1 => {
                        tracing::info!(job, step, "lama: the job's cpuset is unreadable ({why}); -c counts hardware threads (set cpu_unit= to change)");
                        lama_engine::CpuUnit::Thread
                    }
                    Err(_) => lama_engine::CpuUnit::Thread,
                }
            }
        };
        StepCpus { per_task, unit }
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
        self.site =
            SiteConfig::from_args(&args, |path| std::fs::read_to_string(path)).map_err(|e| {
                slurm_spank::spank_log_error!("{e}");
                self.shown(e)
            })?;
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
        if matches!(spank.context()?, Context::Local | Context::Allocator) {
            // Check before anything is launched; the same diagnostic as `lama map`.
            if let Err(e) = plan::resolve(&user_options(spank), &self.site) {
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
        let plan = match plan::resolve(&user_options(spank), &self.site) {
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
            Err(why) => {
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
        if let Some((policy, mems)) = plan::memory_binding(plan, task) {
            bind::set_membind(policy, &mems).map_err(|e| {
                let msg = format!("lama: {}: task {}: {e}", self.node, task.global);
                spank_log_user!("{msg}");
                self.shown(msg)
            })?;
        }
        for (name, value) in plan::task_environment(plan, task) {
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

//! slurmstepd, once per step before its tasks fork (`user_init`): what LAMA does with the
//! step, and this node's placement. The result, a [`Step`], is inherited by every task.

use crate::config::SiteConfig;
use crate::error::StepError;
use crate::placement::{self, TaskPlacement};
use crate::plan_file::{self, PlanRef, PLAN_FILE_VARIABLE, PLAN_VARIABLE};
use crate::request::{StepRequest, UserOptions};
use crate::step_cpus::{self, StepCpus};
use crate::{gpus, inherited, topology};
use lama_engine::{Bind, CpuList, Membind};
use lama_planfile::PlanFile;
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
        /// One per local task, by local task id.
        tasks: Vec<TaskPlacement>,
    },
    /// Placed by a `lama plan` plan.
    Planned {
        /// The memory binding.
        membind: Membind,
        /// Print the per-task line.
        verbose: bool,
        /// One per local task, by local task id.
        tasks: Vec<TaskPlacement>,
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

/// This node's placement of a step by a layout, or why not.
pub fn by_layout(
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
    let mut step_gpus = gpus::read(
        |name| env(spank, name),
        &vendor,
        |path| crate::bounded::read_file(path, crate::bounded::MAX_SMALL_FILE),
    )?;
    if !step_gpus.uuids {
        // Which card each of Slurm's GPUs is, where gres.conf's files number them.
        step_gpus.cards = crate::gpu_cards::step_cards(
            |name| env(spank, name),
            &slurm_node_name(spank)?,
            &step_gpus.slurm,
            &crate::gpu_cards::RealFiles,
        )?;
    }
    let (tasks, notes) = gpus::place_here(machine, request, &step_gpus, globals, overcommit, cpus)?;
    tracing::info!(
        node, source = %resolved.source, cpus = %machine.available(),
        "lama: placed {} task(s) by GPU (SLURM_STEP_GPUS {}) with layout g{}",
        globals.len(), step_gpus.slurm.iter().map(u32::to_string).collect::<Vec<_>>().join(","),
        request.layout
    );
    for note in &notes {
        tracing::warn!(node, "lama: {note}");
        spank_log_user!("lama: {node}: {note}");
    }
    step_messages(spank, node, machine, request, None);
    Ok(Step::Layout {
        request: request.clone(),
        cpus,
        tasks,
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

/// The text of the plan that travelled with the step: in the environment, or (over
/// [`lama_planfile::MAX_INLINE_PLAN_BYTES`]) read from the file the environment names, as the
/// job's user, and checked to be the text srun read.
fn plan_text(spank: &SpankHandle) -> Result<String, StepError> {
    // The plan has its own bound (srun refuses a longer one), not the 4 KiB of Slurm's
    // variables: a plan of 128 ranks is already longer than that.
    if let Some(text) = spank
        .getenv(PLAN_VARIABLE)
        .ok()
        .flatten()
        .filter(|t| t.len() <= lama_planfile::MAX_INLINE_PLAN_BYTES)
    {
        return Ok(text);
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
    Ok(plan.read()?)
}

/// This node's tasks from the `lama plan` plan that travelled with the step, or why not.
pub fn by_plan(
    spank: &SpankHandle,
    site: &SiteConfig,
    node: &str,
    user: &UserOptions,
) -> Result<Step, StepError> {
    let text = plan_text(spank)?;
    let membind = match &user.membind {
        Some(m) => Membind::parse(m).map_err(|d| d.headline())?,
        None => site.membind,
    };
    let (resolved, micros) = topology::for_step(site, node, &[], false)?;
    let job = spank.job_id().map_err(|e| e.to_string())?;
    let step = spank.job_stepid().map_err(|e| e.to_string())?;
    let cpus: CpuList =
        step_cpus::here(spank, &resolved.machine, job, step).map_err(StepError::CpusUnknown)?;
    let globals = global_ranks(spank)?;
    let total = spank.job_total_task_count().map_err(|e| e.to_string())?;
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
    let file = PlanFile::parse_for_node(&text, &slurm_node, cpu_bound)
        .map_err(|e| format!("the plan is malformed: {e}"))?;
    let here = plan_file::StepHere {
        node: &slurm_node,
        globals: &globals,
        total,
        cpus: &cpus,
    };
    let tasks = plan_file::planned_tasks(&resolved.machine, &file, &here, verbose, user.omp)?;
    tracing::info!(node, job, step, source = %resolved.source, topology_us = micros,
        cpus = %cpus, "lama: applied a plan to {} task(s)", globals.len());
    Ok(Step::Planned {
        membind,
        verbose,
        tasks,
    })
}

/// This node's name as Slurm knows it (its `NodeName`, which need not be the kernel's host
/// name): its place in the step's node list (`S_JOB_NODEID` in `SLURM_STEP_NODELIST`), or in a
/// heterogeneous step in its component's ([`component_node`]).
fn slurm_node_name(spank: &SpankHandle) -> Result<String, String> {
    let id = spank
        .job_nodeid()
        .map_err(|e| format!("S_JOB_NODEID: {e}"))?;
    let here = Here {
        id,
        job: spank.job_id().map_err(|e| format!("S_JOB_ID: {e}"))?,
        nodes: spank
            .job_nnodes()
            .map_err(|e| format!("S_JOB_NNODES: {e}"))?,
    };
    node_name_of(|name| env(spank, name), &here, host_name)
}

/// The kernel's host name, short (up to the first dot).
fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().split('.').next().unwrap_or_default().to_string())
        .unwrap_or_default()
}

/// What `slurmstepd` says of this node in a step: `S_JOB_NODEID`, `S_JOB_ID`, `S_JOB_NNODES`
/// (all of this node's component in a heterogeneous step).
struct Here {
    id: u32,
    job: u32,
    nodes: u32,
}

/// [`slurm_node_name`] from the step's environment (`env`). In a heterogeneous step Slurm sets
/// `SLURM_STEP_NODELIST` to every component's nodes (`env_array_for_step`, `het_job_node_list`)
/// while `S_JOB_NODEID` counts within this node's component, so the component's own list is
/// read instead ([`component_node`]); `host` gives the host name, asked only there.
fn node_name_of(
    env: impl Fn(&str) -> Option<String>,
    here: &Here,
    host: impl FnOnce() -> String,
) -> Result<String, String> {
    let list =
        env("SLURM_STEP_NODELIST").ok_or("SLURM_STEP_NODELIST is not in the step's environment")?;
    if env("SLURM_HET_SIZE")
        .or_else(|| env("SLURM_PACK_SIZE"))
        .is_none()
    {
        return nth_node(&list, here.id);
    }
    component_node(&env, here, &list, host)
}

/// This node's name in a heterogeneous step: its component is the one whose
/// `SLURM_JOB_ID_HET_GROUP_<i>` is `S_JOB_ID`, and `S_JOB_NODEID` indexes that component's
/// `SLURM_JOB_NODELIST_HET_GROUP_<i>` when the step runs on all of them (`S_JOB_NNODES` of
/// them, as when srun makes the heterogeneous job). Otherwise the step runs on some of the
/// component's nodes, which its environment does not list: the host name is taken where it is
/// one of them, else the name is unknown and said so.
fn component_node(
    env: &impl Fn(&str) -> Option<String>,
    here: &Here,
    all: &str,
    host: impl FnOnce() -> String,
) -> Result<String, String> {
    let size: u32 = env("SLURM_HET_SIZE")
        .or_else(|| env("SLURM_PACK_SIZE"))
        .and_then(|s| s.trim().parse().ok())
        .ok_or("SLURM_HET_SIZE is not a number")?;
    let group = |what: &str, i: u32| {
        env(&format!("{what}_HET_GROUP_{i}")).or_else(|| env(&format!("{what}_PACK_GROUP_{i}")))
    };
    let component = (0..size.min(1024))
        .find(|&i| group("SLURM_JOB_ID", i).is_some_and(|j| j.trim() == here.job.to_string()))
        .ok_or_else(|| {
            format!(
                "in this heterogeneous step no SLURM_JOB_ID_HET_GROUP_<i> is job {}, so this \
                 node's component is unknown",
                here.job
            )
        })?;
    let list = group("SLURM_JOB_NODELIST", component).ok_or_else(|| {
        format!("SLURM_JOB_NODELIST_HET_GROUP_{component} is not in the step's environment")
    })?;
    let names = lama_slurm::hostlist::expand(&list)?;
    if names.len() == here.nodes as usize {
        return nth_node(&list, here.id);
    }
    let host = host();
    if names.contains(&host) {
        return Ok(host);
    }
    Err(format!(
        "this heterogeneous step runs on {} of its component {component}'s {} node(s) \
         ({list}), and neither its node list ({all} holds every component's) nor this host's \
         name ({}) tells which one this is",
        here.nodes,
        names.len(),
        host
    ))
}

/// The `id`th name of a Slurm hostlist.
fn nth_node(list: &str, id: u32) -> Result<String, String> {
    let names = lama_slurm::hostlist::expand(list)?;
    names.get(id as usize).cloned().ok_or_else(|| {
        // A job's node list can be hundreds of KB: named only when short.
        let shown = if list.len() <= 200 {
            format!(" ({list})")
        } else {
            String::new()
        };
        format!(
            "S_JOB_NODEID {id} is beyond the step's {} node(s){shown}",
            names.len()
        )
    })
}

#[cfg(test)]
mod tests {
    use super::nth_node;

    /// The environment of the heterogeneous step `srun -w node2 -n1 : -w node1,node3 -N2 -n2`
    /// as Slurm 24.11 set it on the cluster (component 0 is job 1 on node2, component 1 job 2
    /// on node1 and node3).
    fn het(var: &str) -> Option<String> {
        Some(
            match var {
                "SLURM_STEP_NODELIST" => "node[1-3]",
                "SLURM_HET_SIZE" => "2",
                "SLURM_JOB_ID_PACK_GROUP_0" | "SLURM_JOB_ID_HET_GROUP_0" => "1",
                "SLURM_JOB_ID_PACK_GROUP_1" => "2",
                "SLURM_JOB_NODELIST_HET_GROUP_0" => "node2",
                "SLURM_JOB_NODELIST_PACK_GROUP_1" => "node[1,3]",
                _ => return None,
            }
            .to_string(),
        )
    }

    #[test]
    fn a_heterogeneous_steps_node_is_found_in_its_component() {
        use super::{node_name_of, Here};
        let here = |job, id, nodes| Here { id, job, nodes };
        let name = |h: &'static str| move || h.to_string();
        // By hand: node 0 of component 0 is node2 (S_JOB_NODEID 0 would be node1 in
        // SLURM_STEP_NODELIST); node 1 of component 1 is node3 (there, node2).
        assert_eq!(
            node_name_of(het, &here(1, 0, 1), name("x")).unwrap(),
            "node2"
        );
        assert_eq!(
            node_name_of(het, &here(2, 1, 2), name("x")).unwrap(),
            "node3"
        );
        assert_eq!(
            node_name_of(het, &here(2, 0, 2), name("x")).unwrap(),
            "node1"
        );
        // A step on one of component 1's two nodes: the host name, where it is one of them.
        assert_eq!(
            node_name_of(het, &here(2, 0, 1), name("node3")).unwrap(),
            "node3"
        );
        let e = node_name_of(het, &here(2, 0, 1), name("login")).unwrap_err();
        assert!(
            e.contains("runs on 1 of its component 1's 2 node(s) (node[1,3])"),
            "{e}"
        );
        let e = node_name_of(het, &here(7, 0, 1), name("x")).unwrap_err();
        assert!(e.contains("no SLURM_JOB_ID_HET_GROUP_<i> is job 7"), "{e}");
        // Not heterogeneous: the step's list, by S_JOB_NODEID.
        let plain = |v: &str| (v == "SLURM_STEP_NODELIST").then(|| "node[1-3]".to_string());
        assert_eq!(
            node_name_of(plain, &here(1, 0, 3), name("x")).unwrap(),
            "node1"
        );
    }

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

    /// A step over 100,000 scattered nodes: its node list (about 700 KB) is within the
    /// environment bound and each node finds its name.
    #[test]
    fn a_node_list_of_a_hundred_thousand_scattered_nodes() {
        let ids: Vec<String> = (0..100_000).map(|i| format!("{:06}", 2 * i + 1)).collect();
        let list = format!("nid[{}]", ids.join(","));
        assert!(list.len() > 600_000);
        let kept = crate::bounded::env_value(Some(list)).expect("within the bound");
        assert_eq!(nth_node(&kept, 0).unwrap(), "nid000001");
        assert_eq!(nth_node(&kept, 99_999).unwrap(), "nid199999");
        let e = nth_node(&kept, 100_000).unwrap_err();
        assert_eq!(e, "S_JOB_NODEID 100000 is beyond the step's 100000 node(s)");
    }
}

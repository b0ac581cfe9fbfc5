//! What a step asks for, and where this node's tasks go (SPEC §3.1–3.2).
//!
//! Pure functions, so the decisions are testable without Slurm: user options and site defaults
//! become a [`Plan`]; a plan, this node's (restricted) machine and its tasks' global ranks
//! become one [`TaskPlacement`] per local task.

use crate::config::SiteConfig;
use lama_engine::{
    binding_for_cpus, cpus_covered, numa_nodes, place, render, Bind, CpuList, CpuUnit, Diagnostic,
    Layout, Machine, Membind, Mppr, Order, PlaceError, Request,
};
use std::fmt;

/// The environment variable that carries a plan's text from srun/sbatch/salloc (which read the
/// file as the user) to the step's nodes; removed from every task's environment.
pub const PLAN_VARIABLE: &str = "LAMA_PLAN_TEXT";

/// The `--lama-*` option values a user gave, as strings.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct UserOptions {
    /// `--lama-map`.
    pub map: Option<String>,
    /// `--lama-bind`.
    pub bind: Option<String>,
    /// `--lama-mppr`.
    pub mppr: Option<String>,
    /// `--lama-order`.
    pub order: Option<String>,
    /// `--lama-membind`.
    pub membind: Option<String>,
    /// `--lama-plan` (the file's path; its text travels in [`PLAN_VARIABLE`]).
    pub plan: Option<String>,
    /// `--lama-verbose`.
    pub verbose: bool,
    /// `--lama-omp`.
    pub omp: bool,
}

impl UserOptions {
    /// Whether any option that changes placement was given.
    pub fn any(&self) -> bool {
        self.map.is_some()
            || self.bind.is_some()
            || self.mppr.is_some()
            || self.order.is_some()
            || self.membind.is_some()
    }
}

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
pub struct Plan {
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
}

/// Why the options cannot make a plan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PlanError {
    /// A value has bad syntax.
    Syntax {
        /// The option, e.g. `--lama-map`.
        option: &'static str,
        /// The diagnostic.
        diagnostic: Box<Diagnostic>,
    },
    /// Something else about the combination.
    Usage(String),
}

impl fmt::Display for PlanError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PlanError::Syntax { option, diagnostic } => {
                write!(f, "lama: {option}: {diagnostic}")
            }
            PlanError::Usage(msg) => write!(f, "lama: {msg}"),
        }
    }
}

impl std::error::Error for PlanError {}

impl Plan {
    /// The binding in force: the one asked for, else the built-in `1c`. In slurmstepd the
    /// plugin replaces `bind` by [`effective_bind`]'s answer once the node is known.
    pub fn binding(&self) -> Bind {
        self.bind.unwrap_or_default()
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
/// covers N CPUs, kept inside the enclosing object where possible, else `1c`. The flag says
/// whether the binding is the default (not asked for): such bindings stay inside their
/// enclosing object where possible and never make two tasks share a CPU; when they cannot,
/// [`place_local`] binds each task to exactly the `-c` CPUs Slurm counted
/// (`lama_engine::place_cpus_per_task`).
pub fn effective_bind(machine: &Machine, plan: &Plan, cpus: StepCpus) -> (Bind, bool) {
    match plan.bind {
        Some(b) => (b, false),
        None if cpus.per_task > 1 => (binding_for_cpus(machine, cpus.per_task, cpus.unit), true),
        None => (Bind::default(), true),
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
    /// for the user.
    pub narrower: Option<String>,
}

fn syntax(option: &'static str) -> impl Fn(Diagnostic) -> PlanError {
    move |diagnostic| PlanError::Syntax {
        option,
        diagnostic: Box::new(diagnostic),
    }
}

/// Decides what a step asks for. `Ok(None)`: LAMA does nothing in this step (no option and no
/// site default, or `--lama-map=none`).
///
/// Precedence: the user's option, else the site default, else the built-in default (`1c`
/// binding, no MPPR, natural order). Options other than `--lama-map` need a layout from the user
/// or the site.
pub fn resolve(user: &UserOptions, site: &SiteConfig) -> Result<Option<Plan>, PlanError> {
    if (user.any() || user.plan.is_some()) && !site.user_options {
        return Err(PlanError::Usage(
            "this cluster does not allow --lama-* options (site setting user_options=no); \
             remove them to use the site's placement"
                .to_string(),
        ));
    }
    if user.plan.is_some() {
        let with: Vec<&str> = [
            (user.map.is_some(), "--lama-map"),
            (user.bind.is_some(), "--lama-bind"),
            (user.mppr.is_some(), "--lama-mppr"),
            (user.order.is_some(), "--lama-order"),
        ]
        .iter()
        .filter(|(given, _)| *given)
        .map(|&(_, name)| name)
        .collect();
        if !with.is_empty() {
            return Err(PlanError::Usage(format!(
                "--lama-plan cannot be combined with {}: the plan already says where each rank \
                 runs and what it is bound to; give one or the other",
                with.join(", ")
            )));
        }
        if let Some(m) = &user.membind {
            Membind::parse(m).map_err(syntax("--lama-membind"))?;
        }
        // The plan is applied on its own (see `planned_tasks`).
        return Ok(None);
    }
    let bind = match &user.bind {
        Some(b) => Some(Bind::parse(b).map_err(syntax("--lama-bind"))?),
        None => None,
    };
    let mppr = match user.mppr.as_deref() {
        Some("none") => Some(Mppr::none()),
        Some(m) => Some(Mppr::parse(m).map_err(syntax("--lama-mppr"))?),
        None => None,
    };
    let membind = match &user.membind {
        Some(m) => Some(Membind::parse(m).map_err(syntax("--lama-membind"))?),
        None => None,
    };
    let order = match &user.order {
        Some(o) => Some(Order::parse(o).map_err(syntax("--lama-order"))?),
        None => None,
    };
    let (layout, origin) =
        match user.map.as_deref() {
            Some("none") => return Ok(None),
            Some(m) => (
                Layout::parse(m).map_err(syntax("--lama-map"))?,
                Origin::User,
            ),
            None => match &site.map {
                Some(l) => (
                    l.clone(),
                    if user.any() {
                        Origin::User
                    } else {
                        Origin::Site
                    },
                ),
                None if user.any() => return Err(PlanError::Usage(
                    "--lama-bind, --lama-mppr, --lama-order and --lama-membind need a layout: add \
                     --lama-map=LAYOUT (for example --lama-map=scbnh)"
                        .to_string(),
                )),
                None => return Ok(None),
            },
        };
    Ok(Some(Plan {
        layout,
        bind: bind.or(site.bind),
        membind: membind.unwrap_or(site.membind),
        mppr: mppr.unwrap_or_else(|| site.mppr.clone()),
        order: order.unwrap_or(site.order),
        origin,
        verbose: user.verbose || site.verbose,
        omp: user.omp,
    }))
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
}

/// Places this node's tasks: `globals[i]` is the global rank of local task `i`. Tasks are
/// placed in ascending global rank on the layout's positions of this node (the layout without
/// `n`); the result is indexed by local task id.
pub fn place_local(
    machine: &Machine,
    plan: &Plan,
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
            let per_cpu = cpus.per_task > 1 && cpus.unit == CpuUnit::Thread;
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
        });
    }
    let narrower = match narrowest {
        Some(n) if plan.bind.is_some() => {
            lama_slurm::cpus_per_task::narrower_warning(machine, bind, n, cpus.per_task, cpus.unit)
        }
        _ => None,
    };
    // What the user sees once per step: the narrower binding, the fallback to exact CPUs, and
    // bindings that were asked for and share CPUs (named by global rank).
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
    let overlap = placement.overlap_warning(|k| {
        by_rank
            .get(k as usize)
            .and_then(|&local| globals.get(local))
            .copied()
            .unwrap_or(k)
    });
    let notes: Vec<String> = [narrower, fallback, overlap]
        .into_iter()
        .flatten()
        .collect();
    let narrower = (!notes.is_empty()).then(|| notes.join("; "));
    Ok(LocalPlacement {
        bind,
        tasks: out.into_iter().flatten().collect(),
        narrower,
    })
}

/// What a step is on this node: the node's name, the global ranks of its local tasks (by local
/// id), the step's task count, and the CPUs the step may use here.
#[derive(Debug, Clone, Copy)]
pub struct StepHere<'a> {
    /// The node's short host name.
    pub node: &'a str,
    /// `globals[i]` is the global rank of local task `i`.
    pub globals: &'a [u32],
    /// The step's task count.
    pub total: u32,
    /// The step's CPUs on this node.
    pub cpus: &'a CpuList,
}

/// This node's tasks from a plan file: `globals[i]` is the global rank of local task `i`,
/// `total` the step's task count, `step_cpus` the CPUs the step has here. Every mismatch is
/// an error that says what does not fit, found before any task is bound.
pub fn planned_tasks(
    machine: &Machine,
    file: &lama_engine::PlanFile,
    step: &StepHere<'_>,
    verbose: bool,
    omp: bool,
) -> Result<Vec<TaskPlacement>, String> {
    let StepHere {
        node,
        globals,
        total,
        cpus: step_cpus,
    } = *step;
    if file.ranks.len() != total as usize {
        return Err(format!(
            "the plan is for {} ranks but the step has {total} tasks: launch with -n{}",
            file.ranks.len(),
            file.ranks.len()
        ));
    }
    let here = file.ranks.iter().filter(|r| r.node == node).count();
    let mut tasks = Vec::with_capacity(globals.len());
    for &g in globals {
        let r = file
            .ranks
            .get(g as usize)
            .ok_or_else(|| format!("rank {g} is not in the plan"))?;
        if r.node != node {
            return Err(format!(
                "rank {g} is planned on {} but Slurm started it on {node}: launch with \
                 SLURM_HOSTFILE set to the plan's .hosts file and -m arbitrary",
                r.node
            ));
        }
        let outside = CpuList::from_cpus(
            r.cpus
                .cpus()
                .iter()
                .copied()
                .filter(|&c| !step_cpus.contains(c)),
        );
        if !outside.is_empty() {
            return Err(format!(
                "rank {g} is planned on CPUs {} but this step has only {step_cpus} on {node} \
                 (CPUs {outside} are outside it): plan with --restrict {node}={step_cpus}",
                r.cpus
            ));
        }
        let pu_logical = machine
            .logical_of(r.pu)
            .ok_or_else(|| format!("rank {g}: PU {} is not in {node}'s topology", r.pu))?;
        let bound: Vec<u32> = r
            .cpus
            .cpus()
            .iter()
            .filter_map(|&c| machine.logical_of(c))
            .collect();
        tasks.push(TaskPlacement {
            global: g,
            pu_os: r.pu,
            pu_logical,
            cpus: r.cpus.clone(),
            picture: if verbose {
                render::picture(machine, &bound)
            } else {
                String::new()
            },
            omp_places: if omp {
                omp_place_list(&omp_places(machine, &bound, false))
            } else {
                String::new()
            },
            omp_place_count: if omp {
                omp_places(machine, &bound, false).len()
            } else {
                0
            },
            mems: numa_nodes(machine, &bound),
        });
    }
    if here != globals.len() {
        return Err(format!(
            "the plan puts {here} rank(s) on {node} but Slurm started {} here: launch with \
             SLURM_HOSTFILE set to the plan's .hosts file and -m arbitrary",
            globals.len()
        ));
    }
    Ok(tasks)
}

/// The binding a user asked Slurm for with `--cpu-bind`, from `SLURM_CPU_BIND_TYPE` as srun
/// passes it to the step (`cores,`, `map_cpu:`, `verbose,sockets,` ...): `None` for no type,
/// `none` and the modifiers alone.
pub fn explicit_cpu_bind(kind: &str) -> Option<String> {
    let types: Vec<&str> = kind
        .split(',')
        .map(|t| t.trim_end_matches(':'))
        .filter(|t| !t.is_empty() && !matches!(*t, "none" | "no" | "verbose" | "v" | "quiet" | "q"))
        .collect();
    (!types.is_empty()).then(|| types.join(","))
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

/// OpenMP places as `OMP_PLACES` writes them: `{0,36},{1,37}`.
fn omp_place_list(places: &[CpuList]) -> String {
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
fn omp_places(machine: &Machine, bound: &[u32], per_thread: bool) -> Vec<CpuList> {
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

/// The distinct CPU counts in Slurm's compressed per-node list (`SLURM_JOB_CPUS_PER_NODE`,
/// e.g. `2(x3),4`), in order of appearance; `None` when it cannot be read.
pub fn distinct_cpus_per_node(list: &str) -> Option<Vec<u32>> {
    let mut out: Vec<u32> = Vec::new();
    for item in list.split(',') {
        let count = item.split('(').next()?.trim().parse::<u32>().ok()?;
        if !out.contains(&count) {
            out.push(count);
        }
    }
    Some(out)
}

/// The step's one distribution hint (for `--lama-verbose`, printed by the step's first node
/// only): which Slurm `-m` gives nodes the ranks the full LAMA iteration would. Only this
/// node's shape is known here, so the hint says that it assumes every node of the step is
/// shaped like this one; when Slurm's CPU counts per node (`cpus_per_node`, the job's
/// `SLURM_JOB_CPUS_PER_NODE`) show that they are not, it says so and points at `lama map`
/// instead of guessing. `None` when there is one node or the distribution in use
/// (`SLURM_DISTRIBUTION`) already is the one this node's shape asks for.
pub fn distribution_hint(
    machine: &Machine,
    plan: &Plan,
    node: &str,
    nnodes: u32,
    in_use: Option<&str>,
    cpus_per_node: Option<&str>,
) -> Option<String> {
    if nnodes <= 1 {
        return None;
    }
    let exact = "`lama map` with each node's topology prints the exact -m (or a \
                 SLURM_HOSTFILE for -m arbitrary)";
    if let Some(counts) = cpus_per_node.and_then(distinct_cpus_per_node) {
        if counts.len() > 1 {
            let counts: Vec<String> = counts.iter().map(u32::to_string).collect();
            return Some(format!(
                "the step's nodes differ (CPUs per node: {}), so no -m is guessed for layout \
                 {}; {exact}",
                counts.join(", "),
                plan.layout
            ));
        }
    }
    let nodes = vec![machine; nnodes.min(1 << 16) as usize];
    let req = Request {
        layout: plan.layout.clone(),
        bind: plan.binding(),
        mppr: plan.mppr.clone(),
        order: plan.order,
        oversubscribe: false,
        np: 0,
        bind_within: false,
    };
    let want = lama_slurm::distribution::like(&place(&nodes, &req).ok()?);
    let current = in_use.map(|d| d.split([':', ',']).next().unwrap_or(d));
    if current == Some(want.as_str()) || (want.starts_with("plane") && current == Some("plane")) {
        return None;
    }
    Some(format!(
        "layout {} spreads ranks over nodes like `-m {want}`, assuming the step's {nnodes} nodes \
         are shaped like {node}; this step uses {}. If they are not, {exact}",
        plan.layout,
        match in_use {
            Some(d) => format!("-m {d}"),
            None => "Slurm's default distribution".to_string(),
        }
    ))
}

/// The CPU set as a hexadecimal mask, as Slurm's `cpu-bind` lines print it.
pub fn hex_mask(cpus: &CpuList) -> String {
    let Some(&max) = cpus.cpus().last() else {
        return "0x0".to_string();
    };
    let mut words = vec![0u32; max as usize / 32 + 1];
    for &c in cpus.cpus() {
        words[c as usize / 32] |= 1 << (c % 32);
    }
    let mut s = String::from("0x");
    for (i, w) in words.iter().rev().enumerate() {
        if i == 0 {
            s += &format!("{w:X}");
        } else {
            s += &format!("{w:08X}");
        }
    }
    s
}

/// The `--lama-verbose` line for one task, in the style of Slurm's
/// `cpu-bind=MASK - node, task 0 0 [pid]: mask 0x3 set`.
pub fn verbose_line(plan: &Plan, node: &str, local: u32, pid: u32, task: &TaskPlacement) -> String {
    let bind = plan.binding();
    let action = if bind == Bind::None {
        "not bound".to_string()
    } else {
        format!("mask {} set (cpus {})", hex_mask(&task.cpus), task.cpus)
    };
    let memory = match (plan.membind, bind) {
        (Membind::None, _) => String::new(),
        (m, Bind::None) => format!(", memory not bound ({m} needs a CPU binding)"),
        (m, _) if task.mems.is_empty() => {
            format!(", memory not bound ({m}: the topology names no NUMA node)")
        }
        (m, _) => format!(", mems {} {m}", task.mems),
    };
    format!(
        "lama-bind={bind} layout={} - {node}, task {:>2} {:>2} [{pid}]: {action}{memory}, mapped \
         PU L#{} P#{} {}",
        plan.layout, task.global, local, task.pu_logical, task.pu_os, task.picture
    )
}

/// Whether a task's memory policy is to be set, and to which NUMA nodes (OS indexes).
pub fn memory_binding(plan: &Plan, task: &TaskPlacement) -> Option<(Membind, CpuList)> {
    (plan.membind != Membind::None && plan.binding() != Bind::None && !task.mems.is_empty())
        .then(|| (plan.membind, task.mems.clone()))
}

/// The variables set in each task's environment: `LAMA_*` (`LAMA_MEMS` and `LAMA_MEMBIND` when
/// memory is bound), and with `--lama-omp` and a binding, `OMP_PLACES` and
/// `OMP_PROC_BIND=close` (the plugin also sets `OMP_NUM_THREADS` when the job does not set it).
pub fn task_environment(plan: &Plan, task: &TaskPlacement) -> Vec<(&'static str, String)> {
    let bind = plan.binding();
    let mut env = vec![
        ("LAMA_LAYOUT", plan.layout.to_string()),
        ("LAMA_BIND", bind.to_string()),
        ("LAMA_MPPR", plan.mppr.to_string()),
        ("LAMA_ORDER", plan.order.to_string()),
        ("LAMA_CPUS", task.cpus.to_string()),
        ("LAMA_PU", task.pu_os.to_string()),
        ("LAMA_PU_LOGICAL", task.pu_logical.to_string()),
    ];
    if let Some((policy, mems)) = memory_binding(plan, task) {
        env.push(("LAMA_MEMS", mems.to_string()));
        env.push(("LAMA_MEMBIND", policy.to_string()));
    }
    if plan.omp && bind != Bind::None {
        env.push(("OMP_PLACES", task.omp_places.clone()));
        env.push(("OMP_PROC_BIND", "close".to_string()));
    }
    env
}

/// The variables of a task placed by a plan: `LAMA_PLAN=1`, `LAMA_CPUS`, `LAMA_PU`,
/// `LAMA_PU_LOGICAL`, and `LAMA_MEMS`/`LAMA_MEMBIND` when memory is bound.
pub fn planned_environment(
    task: &TaskPlacement,
    mems: Option<(Membind, &CpuList)>,
) -> Vec<(&'static str, String)> {
    let omp = (!task.omp_places.is_empty()).then(|| {
        [
            ("OMP_PLACES", task.omp_places.clone()),
            ("OMP_PROC_BIND", "close".to_string()),
        ]
    });
    let mut env = vec![
        ("LAMA_PLAN", "1".to_string()),
        ("LAMA_CPUS", task.cpus.to_string()),
        ("LAMA_PU", task.pu_os.to_string()),
        ("LAMA_PU_LOGICAL", task.pu_logical.to_string()),
    ];
    if let Some((policy, m)) = mems {
        env.push(("LAMA_MEMS", m.to_string()));
        env.push(("LAMA_MEMBIND", policy.to_string()));
    }
    env.extend(omp.into_iter().flatten());
    env
}

/// `OMP_NUM_THREADS` for a task with `--lama-omp` (when the job does not set it): `-c` when
/// given, else one thread per place.
pub fn omp_threads(cpus: StepCpus, task: &TaskPlacement) -> usize {
    if cpus.per_task > 1 {
        cpus.per_task as usize
    } else {
        task.omp_place_count
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn user(map: Option<&str>, bind: Option<&str>) -> UserOptions {
        UserOptions {
            map: map.map(String::from),
            bind: bind.map(String::from),
            ..UserOptions::default()
        }
    }

    #[test]
    fn nothing_asked_nothing_done() {
        assert_eq!(
            resolve(&UserOptions::default(), &SiteConfig::default()),
            Ok(None)
        );
        let verbose_only = UserOptions {
            verbose: true,
            ..UserOptions::default()
        };
        assert_eq!(resolve(&verbose_only, &SiteConfig::default()), Ok(None));
    }

    #[test]
    fn user_options_over_site_defaults_over_built_ins() {
        let site = SiteConfig::default();
        let plan = resolve(&user(Some("scbnh"), None), &site).unwrap().unwrap();
        assert_eq!(plan.bind, None);
        assert_eq!(plan.binding().to_string(), "1c");
        assert_eq!(plan.origin, Origin::User);
        let site = SiteConfig {
            map: Some(Layout::parse("csbnh").unwrap()),
            bind: Some(Bind::parse("1s").unwrap()),
            ..SiteConfig::default()
        };
        let plan = resolve(&UserOptions::default(), &site).unwrap().unwrap();
        assert_eq!(
            (plan.layout.to_string(), plan.binding().to_string()),
            ("csbnh".into(), "1s".into())
        );
        assert_eq!(plan.origin, Origin::Site);
        let plan = resolve(&user(None, Some("1h")), &site).unwrap().unwrap();
        assert_eq!(
            (plan.layout.to_string(), plan.binding().to_string()),
            ("csbnh".into(), "1h".into())
        );
        assert_eq!(plan.origin, Origin::User);
        assert_eq!(resolve(&user(Some("none"), None), &site), Ok(None));
    }

    #[test]
    fn errors_say_what_to_do() {
        let e = resolve(&user(Some("xyz"), None), &SiteConfig::default()).unwrap_err();
        assert!(e
            .to_string()
            .starts_with("lama: --lama-map: invalid mapping layout 'xyz': unknown token 'x'"));
        let e = resolve(&user(None, Some("1s")), &SiteConfig::default()).unwrap_err();
        assert!(e.to_string().contains("add --lama-map=LAYOUT"));
        let strict = SiteConfig {
            user_options: false,
            ..SiteConfig::default()
        };
        let e = resolve(&user(Some("scbnh"), None), &strict).unwrap_err();
        assert!(e.to_string().contains("user_options=no"));
    }

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
        let verbose = Plan {
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

    #[test]
    fn verbose_line_and_environment() {
        let m = Machine::synthetic("pack:2 core:2 pu:2").unwrap();
        let mut plan = resolve(&user(Some("scbnh"), Some("1c")), &SiteConfig::default())
            .unwrap()
            .unwrap();
        plan.verbose = true;
        let tasks = place_local(&m, &plan, &[0, 1], false, StepCpus::default())
            .unwrap()
            .tasks;
        assert_eq!(
            verbose_line(&plan, "node1", 1, 4242, &tasks[1]),
            "lama-bind=1c layout=scbnh - node1, task  1  1 [4242]: mask 0x30 set (cpus 4-5), \
             mapped PU L#4 P#4 [../..][BB/..]"
        );
        let env = task_environment(&plan, &tasks[1]);
        assert!(env.contains(&("LAMA_CPUS", "4-5".to_string())));
        assert!(env.contains(&("LAMA_LAYOUT", "scbnh".to_string())));
        assert!(!env.iter().any(|(k, _)| k.starts_with("OMP_")));
    }

    #[test]
    fn openmp_places_follow_the_binding() {
        // Scrambled OS indexes: core 0 holds P#0 and P#2, core 1 holds P#1 and P#3.
        let mut b = lama_engine::MachineBuilder::new("scrambled");
        for os in [0, 2, 1, 3] {
            b.pu(os, true);
        }
        b.object(lama_engine::Level::Core, Some(0), &[0, 2]);
        b.object(lama_engine::Level::Core, Some(1), &[1, 3]);
        let m = b.build().unwrap();
        let user = UserOptions {
            map: Some("cnh".into()),
            bind: Some("1n".into()),
            omp: true,
            ..UserOptions::default()
        };
        let plan = resolve(&user, &SiteConfig::default()).unwrap().unwrap();
        let tasks = place_local(&m, &plan, &[0], false, StepCpus::default())
            .unwrap()
            .tasks;
        assert_eq!(
            (tasks[0].omp_places.as_str(), tasks[0].omp_place_count),
            ("{0,2},{1,3}", 2)
        );
        let env = task_environment(&plan, &tasks[0]);
        assert!(env.contains(&("OMP_PLACES", "{0,2},{1,3}".to_string())));
        assert!(env.contains(&("OMP_PROC_BIND", "close".to_string())));
        // No binding, no OpenMP places.
        let plan = Plan {
            bind: Some(Bind::None),
            ..plan
        };
        let tasks = place_local(&m, &plan, &[0], false, StepCpus::default())
            .unwrap()
            .tasks;
        assert!(!task_environment(&plan, &tasks[0])
            .iter()
            .any(|(k, _)| k.starts_with("OMP_")));
    }

    #[test]
    fn distribution_hints() {
        let m = Machine::synthetic("pack:2 core:4 pu:1").unwrap();
        let plan = resolve(&user(Some("scbnh"), None), &SiteConfig::default())
            .unwrap()
            .unwrap();
        assert_eq!(
            distribution_hint(&m, &plan, "node1", 3, None, Some("8(x3)")).unwrap(),
            "layout scbnh spreads ranks over nodes like `-m plane=8`, assuming the step's 3 \
             nodes are shaped like node1; this step uses Slurm's default distribution. If they \
             are not, `lama map` with each node's topology prints the exact -m (or a \
             SLURM_HOSTFILE for -m arbitrary)"
        );
        assert_eq!(
            distribution_hint(&m, &plan, "node1", 3, Some("plane"), None),
            None
        );
        assert_eq!(distribution_hint(&m, &plan, "node1", 1, None, None), None);
        // Nodes Slurm counts differently are not guessed at.
        let differ = distribution_hint(&m, &plan, "node1", 2, None, Some("8,16")).unwrap();
        assert!(
            differ.starts_with("the step's nodes differ (CPUs per node: 8, 16)"),
            "{differ}"
        );
        assert_eq!(distinct_cpus_per_node("2(x3),4,2"), Some(vec![2, 4]));
        assert_eq!(distinct_cpus_per_node("x"), None);
        let plan = resolve(&user(Some("nsc"), None), &SiteConfig::default())
            .unwrap()
            .unwrap();
        assert_eq!(
            distribution_hint(&m, &plan, "node1", 2, Some("cyclic:block"), None),
            None
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
        let note = local.narrower.unwrap();
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
        // A binding that was asked for: two tasks on one core is an overload, refused unless
        // --overcommit.
        let asked = resolve(&user(Some("csbnh"), Some("1c")), &SiteConfig::default())
            .unwrap()
            .unwrap();
        let e = place_local(&node2, &asked, &[4, 5], false, StepCpus::default()).unwrap_err();
        assert!(
            e.to_string()
                .starts_with("placed 1 of 2 processes: oversubscribed"),
            "{e}"
        );
        let local = place_local(&node2, &asked, &[4, 5], true, StepCpus::default()).unwrap();
        let cpus: Vec<String> = local.tasks.iter().map(|t| t.cpus.to_string()).collect();
        assert_eq!(cpus, ["0-1", "0-1"]);
        // An asked-for binding wider than the mapping shares CPUs with a warning naming the
        // global ranks.
        let wide = resolve(&user(Some("cnsbh"), Some("2c")), &SiteConfig::default())
            .unwrap()
            .unwrap();
        let odd = Machine::synthetic("pack:2 core:3 pu:1").unwrap();
        let local = place_local(&odd, &wide, &[12, 10, 11], false, StepCpus::default()).unwrap();
        let warning = local.narrower.unwrap();
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
    fn memory_follows_the_cpu_binding() {
        let m = Machine::synthetic("pack:2 numa:1 core:2 pu:1").unwrap();
        let mut u = user(Some("scbnh"), Some("1c"));
        u.membind = Some("local".into());
        let mut plan = resolve(&u, &SiteConfig::default()).unwrap().unwrap();
        plan.verbose = true;
        let tasks = place_local(&m, &plan, &[0, 1], false, StepCpus::default())
            .unwrap()
            .tasks;
        assert_eq!(tasks[1].mems.to_string(), "1");
        assert_eq!(
            memory_binding(&plan, &tasks[1]),
            Some((Membind::Local, CpuList::from_cpus([1])))
        );
        let env = task_environment(&plan, &tasks[1]);
        assert!(env.contains(&("LAMA_MEMS", "1".to_string())));
        assert!(env.contains(&("LAMA_MEMBIND", "local".to_string())));
        assert!(verbose_line(&plan, "n", 1, 1, &tasks[1]).contains("(cpus 2), mems 1 local,"));
        // A whole-node binding touches both NUMA nodes.
        plan.bind = Some(Bind::parse("1n").unwrap());
        plan.membind = Membind::Preferred;
        let tasks = place_local(&m, &plan, &[0], false, StepCpus::default())
            .unwrap()
            .tasks;
        assert_eq!(
            memory_binding(&plan, &tasks[0]).unwrap().1.to_string(),
            "0-1"
        );
        // No CPU binding: memory is left alone, and the verbose line says why.
        plan.bind = Some(Bind::None);
        let tasks = place_local(&m, &plan, &[0], false, StepCpus::default())
            .unwrap()
            .tasks;
        assert_eq!(memory_binding(&plan, &tasks[0]), None);
        assert!(!task_environment(&plan, &tasks[0])
            .iter()
            .any(|(k, _)| *k == "LAMA_MEMS"));
        assert!(verbose_line(&plan, "n", 0, 1, &tasks[0])
            .contains("memory not bound (preferred needs a CPU binding)"));
        // Bad values are refused like the other options.
        let mut bad = user(Some("scbnh"), None);
        bad.membind = Some("strict".into());
        let e = resolve(&bad, &SiteConfig::default()).unwrap_err();
        assert!(e
            .to_string()
            .starts_with("lama: --lama-membind: invalid memory binding 'strict'"));
    }

    #[test]
    fn plans_apply_only_where_they_fit() {
        let m = Machine::synthetic("pack:2 core:2 pu:1").unwrap();
        let file = lama_engine::PlanFile::parse(
            "lama-plan 1\nranks 3\nrank 0 n1 pu 2 cpus 2\nrank 1 n2 pu 0 cpus 0\nrank 2 n1 pu 1 cpus 0-1\n",
        )
        .unwrap();
        let all = CpuList::parse("0-3").unwrap();
        fn here<'a>(
            node: &'a str,
            globals: &'a [u32],
            total: u32,
            cpus: &'a CpuList,
        ) -> StepHere<'a> {
            StepHere {
                node,
                globals,
                total,
                cpus,
            }
        }
        let tasks = planned_tasks(&m, &file, &here("n1", &[0, 2], 3, &all), true, true).unwrap();
        assert_eq!(tasks[0].cpus.to_string(), "2");
        assert_eq!(tasks[1].cpus.to_string(), "0-1");
        assert_eq!(tasks[1].picture, "[B/B][./.]");
        assert_eq!(tasks[1].omp_places, "{0},{1}");
        let env = planned_environment(&tasks[1], None);
        assert!(env.contains(&("OMP_PLACES", "{0},{1}".to_string())));
        assert!(env.contains(&("LAMA_CPUS", "0-1".to_string())));
        for (node, globals, total, cpus, why) in [
            (
                "n1",
                vec![0, 2],
                4,
                "0-3",
                "the plan is for 3 ranks but the step has 4 tasks",
            ),
            (
                "n1",
                vec![0, 1],
                3,
                "0-3",
                "rank 1 is planned on n2 but Slurm started it on n1",
            ),
            (
                "n1",
                vec![0],
                3,
                "0-3",
                "the plan puts 2 rank(s) on n1 but Slurm started 1 here",
            ),
            (
                "n1",
                vec![0, 2],
                3,
                "1-3",
                "rank 2 is planned on CPUs 0-1 but this step has only 1-3",
            ),
        ] {
            let cpus = CpuList::parse(cpus).unwrap();
            let e = planned_tasks(&m, &file, &here(node, &globals, total, &cpus), false, false)
                .unwrap_err();
            assert!(e.starts_with(why), "{e}");
        }
        let far =
            lama_engine::PlanFile::parse("lama-plan 1\nranks 1\nrank 0 n1 pu 9 cpus 9\n").unwrap();
        let wide = CpuList::parse("0-9").unwrap();
        let e = planned_tasks(&m, &far, &here("n1", &[0], 1, &wide), false, false).unwrap_err();
        assert!(e.contains("PU 9 is not in n1's topology"), "{e}");
    }

    #[test]
    fn a_plan_stands_alone() {
        let mut u = user(Some("scbnh"), None);
        u.plan = Some("plan.lama".into());
        let e = resolve(&u, &SiteConfig::default()).unwrap_err();
        assert!(
            e.to_string()
                .contains("--lama-plan cannot be combined with --lama-map"),
            "{e}"
        );
        let alone = UserOptions {
            plan: Some("plan.lama".into()),
            ..UserOptions::default()
        };
        assert_eq!(resolve(&alone, &SiteConfig::default()), Ok(None));
    }

    #[test]
    fn one_thread_of_each_core() {
        let m = Machine::synthetic("pack:1 core:3 pu:2")
            .unwrap()
            .restrict(&CpuList::parse("1-5").unwrap());
        assert_eq!(one_thread_per_core(&m).to_string(), "1-2,4");
    }

    #[test]
    fn cpu_bind_requests() {
        assert_eq!(explicit_cpu_bind("cores,"), Some("cores".to_string()));
        assert_eq!(
            explicit_cpu_bind("verbose,map_cpu:"),
            Some("map_cpu".to_string())
        );
        assert_eq!(explicit_cpu_bind("none,"), None);
        assert_eq!(explicit_cpu_bind("quiet,"), None);
        assert_eq!(explicit_cpu_bind(""), None);
    }

    #[test]
    fn hex_masks() {
        assert_eq!(hex_mask(&CpuList::new()), "0x0");
        assert_eq!(hex_mask(&CpuList::from_cpus([0, 1])), "0x3");
        assert_eq!(hex_mask(&CpuList::from_cpus([0, 33])), "0x200000001");
    }
}

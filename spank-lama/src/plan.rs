//! What a step asks for, and where this node's tasks go (SPEC §3.1–3.2).
//!
//! Pure functions, so the decisions are testable without Slurm: user options and site defaults
//! become a [`Plan`]; a plan, this node's (restricted) machine and its tasks' global ranks
//! become one [`TaskPlacement`] per local task.

use crate::config::SiteConfig;
use lama_engine::{
    place, render, Bind, CpuList, Diagnostic, Layout, Machine, Mppr, Order, PlaceError, Request,
};
use std::fmt;

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
    /// `--lama-verbose`.
    pub verbose: bool,
    /// `--lama-omp`.
    pub omp: bool,
}

impl UserOptions {
    /// Whether any option that changes placement was given.
    pub fn any(&self) -> bool {
        self.map.is_some() || self.bind.is_some() || self.mppr.is_some() || self.order.is_some()
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
    /// The binding.
    pub bind: Bind,
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
    if user.any() && !site.user_options {
        return Err(PlanError::Usage(
            "this cluster does not allow --lama-* options (site setting user_options=no); \
             remove them to use the site's placement"
                .to_string(),
        ));
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
    let order = match &user.order {
        Some(o) => Some(Order::parse(o).map_err(syntax("--lama-order"))?),
        None => None,
    };
    let (layout, origin) = match user.map.as_deref() {
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
            None if user.any() => {
                return Err(PlanError::Usage(
                    "--lama-bind, --lama-mppr and --lama-order need a layout: add \
                     --lama-map=LAYOUT (for example --lama-map=scbnh)"
                        .to_string(),
                ))
            }
            None => return Ok(None),
        },
    };
    Ok(Some(Plan {
        layout,
        bind: bind.unwrap_or(site.bind),
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
}

/// Places this node's tasks: `globals[i]` is the global rank of local task `i`. Tasks are
/// placed in ascending global rank on the layout's positions of this node (the layout without
/// `n`); the result is indexed by local task id.
pub fn place_local(
    machine: &Machine,
    plan: &Plan,
    globals: &[u32],
    overcommit: bool,
) -> Result<Vec<TaskPlacement>, PlaceError> {
    let req = Request {
        layout: plan.layout.clone(),
        bind: plan.bind,
        mppr: plan.mppr.clone(),
        order: plan.order,
        oversubscribe: overcommit,
        bind_within: false,
        np: globals.len() as u32,
    };
    let placement = place(&[machine], &req)?;
    let mut by_rank: Vec<usize> = (0..globals.len()).collect();
    by_rank.sort_by_key(|&i| globals[i]);
    let mut out: Vec<Option<TaskPlacement>> = vec![None; globals.len()];
    for (k, &local) in by_rank.iter().enumerate() {
        let info = placement.info(k);
        // The picture and the OpenMP places are only built when they will be used.
        let picture = match (plan.verbose, plan.bind) {
            (false, _) => String::new(),
            (true, Bind::None) => render::picture_with(machine, &[info.pu_logical], 'm'),
            (true, _) => render::picture(machine, &info.bound_logical),
        };
        let places = if plan.omp {
            omp_places(machine, &info.bound_logical)
        } else {
            Vec::new()
        };
        out[local] = Some(TaskPlacement {
            global: globals[local],
            pu_os: info.pu_os,
            pu_logical: info.pu_logical,
            cpus: info.cpus,
            picture,
            omp_places: places
                .iter()
                .map(|p| {
                    format!(
                        "{{{}}}",
                        p.cpus()
                            .iter()
                            .map(u32::to_string)
                            .collect::<Vec<_>>()
                            .join(",")
                    )
                })
                .collect::<Vec<_>>()
                .join(","),
            omp_place_count: places.len(),
        });
    }
    Ok(out.into_iter().flatten().collect())
}

/// The bound PUs (logical indexes) grouped by core, as OS CPU lists in logical order: OpenMP
/// places. A PU outside every core is a place of its own.
fn omp_places(machine: &Machine, bound: &[u32]) -> Vec<CpuList> {
    let cores = machine.objects(lama_engine::Level::Core);
    let mut places: Vec<(Option<usize>, Vec<u32>)> = Vec::new();
    for &pu in bound {
        let core = cores.iter().position(|c| c.pus.contains(&pu));
        let os = machine.pus()[pu as usize].os;
        match places.last_mut() {
            Some((c, list)) if core.is_some() && *c == core => list.push(os),
            _ => places.push((core, vec![os])),
        }
    }
    places
        .into_iter()
        .map(|(_, l)| CpuList::from_cpus(l))
        .collect()
}

/// Which Slurm `-m` distribution gives nodes the ranks the full LAMA iteration would (for
/// `--lama-verbose`), assuming `nnodes` nodes like this one. `None` when there is one node or
/// the distribution in use (`SLURM_DISTRIBUTION`) already is that one.
pub fn distribution_hint(
    machine: &Machine,
    plan: &Plan,
    nnodes: u32,
    in_use: Option<&str>,
) -> Option<String> {
    if nnodes <= 1 {
        return None;
    }
    let nodes = vec![machine; nnodes.min(1 << 16) as usize];
    let req = Request {
        layout: plan.layout.clone(),
        bind: plan.bind,
        mppr: plan.mppr.clone(),
        order: plan.order,
        oversubscribe: false,
        np: 0,
        bind_within: false,
    };
    let want = place(&nodes, &req).ok()?.slurm_distribution();
    let current = in_use.map(|d| d.split([':', ',']).next().unwrap_or(d));
    if current == Some(want.as_str()) || (want.starts_with("plane") && current == Some("plane")) {
        return None;
    }
    Some(format!(
        "layout {} spreads ranks over nodes like `-m {want}`; this step uses {}",
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
    let action = if plan.bind == Bind::None {
        "not bound".to_string()
    } else {
        format!("mask {} set (cpus {})", hex_mask(&task.cpus), task.cpus)
    };
    format!(
        "lama-bind={} layout={} - {node}, task {:>2} {:>2} [{pid}]: {action}, mapped PU L#{} P#{} {}",
        plan.bind, plan.layout, task.global, local, task.pu_logical, task.pu_os, task.picture
    )
}

/// The variables set in each task's environment: `LAMA_*`, and with `--lama-omp` and a
/// binding, `OMP_PLACES` (one place per bound core) and `OMP_PROC_BIND=close` (the plugin also
/// sets `OMP_NUM_THREADS` to the number of places when the job does not set it).
pub fn task_environment(plan: &Plan, task: &TaskPlacement) -> Vec<(&'static str, String)> {
    let mut env = vec![
        ("LAMA_LAYOUT", plan.layout.to_string()),
        ("LAMA_BIND", plan.bind.to_string()),
        ("LAMA_MPPR", plan.mppr.to_string()),
        ("LAMA_ORDER", plan.order.to_string()),
        ("LAMA_CPUS", task.cpus.to_string()),
        ("LAMA_PU", task.pu_os.to_string()),
        ("LAMA_PU_LOGICAL", task.pu_logical.to_string()),
    ];
    if plan.omp && plan.bind != Bind::None {
        env.push(("OMP_PLACES", task.omp_places.clone()));
        env.push(("OMP_PROC_BIND", "close".to_string()));
    }
    env
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
        assert_eq!(plan.bind.to_string(), "1c");
        assert_eq!(plan.origin, Origin::User);
        let site = SiteConfig {
            map: Some(Layout::parse("csbnh").unwrap()),
            bind: Bind::parse("1s").unwrap(),
            ..SiteConfig::default()
        };
        let plan = resolve(&UserOptions::default(), &site).unwrap().unwrap();
        assert_eq!(
            (plan.layout.to_string(), plan.bind.to_string()),
            ("csbnh".into(), "1s".into())
        );
        assert_eq!(plan.origin, Origin::Site);
        let plan = resolve(&user(None, Some("1h")), &site).unwrap().unwrap();
        assert_eq!(
            (plan.layout.to_string(), plan.bind.to_string()),
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
        let tasks = place_local(&m, &plan, &[7, 3], false).unwrap();
        assert_eq!(tasks[1].cpus.to_string(), "0");
        assert_eq!(tasks[0].cpus.to_string(), "2");
        assert_eq!(tasks[0].picture, "");
        let verbose = Plan {
            verbose: true,
            ..plan.clone()
        };
        let tasks = place_local(&m, &verbose, &[7, 3], false).unwrap();
        assert_eq!(tasks[0].picture, "[./.][B/.]");
        let e = place_local(&m, &plan, &[0, 1, 2, 3, 4], false).unwrap_err();
        assert!(e
            .to_string()
            .starts_with("placed 4 of 5 processes: oversubscribed"));
        assert_eq!(
            place_local(&m, &plan, &[0, 1, 2, 3, 4], true)
                .unwrap()
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
        let tasks = place_local(&m, &plan, &[0, 1], false).unwrap();
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
        let tasks = place_local(&m, &plan, &[0], false).unwrap();
        assert_eq!(
            (tasks[0].omp_places.as_str(), tasks[0].omp_place_count),
            ("{0,2},{1,3}", 2)
        );
        let env = task_environment(&plan, &tasks[0]);
        assert!(env.contains(&("OMP_PLACES", "{0,2},{1,3}".to_string())));
        assert!(env.contains(&("OMP_PROC_BIND", "close".to_string())));
        // No binding, no OpenMP places.
        let plan = Plan {
            bind: Bind::None,
            ..plan
        };
        let tasks = place_local(&m, &plan, &[0], false).unwrap();
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
            distribution_hint(&m, &plan, 3, None).unwrap(),
            "layout scbnh spreads ranks over nodes like `-m plane=8`; this step uses Slurm's \
             default distribution"
        );
        assert_eq!(distribution_hint(&m, &plan, 3, Some("plane")), None);
        assert_eq!(distribution_hint(&m, &plan, 1, None), None);
        let plan = resolve(&user(Some("nsc"), None), &SiteConfig::default())
            .unwrap()
            .unwrap();
        assert_eq!(distribution_hint(&m, &plan, 2, Some("cyclic:block")), None);
    }

    #[test]
    fn hex_masks() {
        assert_eq!(hex_mask(&CpuList::new()), "0x0");
        assert_eq!(hex_mask(&CpuList::from_cpus([0, 1])), "0x3");
        assert_eq!(hex_mask(&CpuList::from_cpus([0, 33])), "0x200000001");
    }
}

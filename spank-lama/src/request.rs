//! What a step asks for (SPEC §3.1): the `--lama-*` options a user gave and the site's
//! defaults become one [`StepRequest`], or nothing when LAMA has nothing to do.

use crate::config::SiteConfig;
use lama_engine::{Bind, Diagnostic, Layout, Membind, Mppr, Order};
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
    /// `--lama-membind`.
    pub membind: Option<String>,
    /// `--lama-plan` (the file's path; its text travels in [`PLAN_VARIABLE`]).
    pub plan: Option<String>,
    /// `--lama-verbose`.
    pub verbose: bool,
    /// `--lama-omp`.
    pub omp: bool,
    /// `--lama-gpu-isolate`.
    pub gpu_isolate: bool,
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

pub use lama_slurm::node::{GpuOptions, Origin, StepRequest};

/// Why the options cannot make a plan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RequestError {
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

impl fmt::Display for RequestError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RequestError::Syntax { option, diagnostic } => {
                write!(f, "lama: {option}: {diagnostic}")
            }
            RequestError::Usage(msg) => write!(f, "lama: {msg}"),
        }
    }
}

impl std::error::Error for RequestError {}

/// A syntax error of `option`; a familiar Slurm or Open MPI spelling is refused with its LAMA
/// equivalent.
fn syntax(option: &'static str) -> impl Fn(Diagnostic) -> RequestError {
    move |diagnostic| RequestError::Syntax {
        option,
        diagnostic: Box::new(lama_slurm::familiar::explain(diagnostic)),
    }
}

/// Decides what a step asks for. `Ok(None)`: LAMA does nothing in this step (no option and no
/// site default, or `--lama-map=none`).
///
/// Precedence: the user's option, else the site default, else the built-in default (`1c`
/// binding, no MPPR, natural order). Options other than `--lama-map` need a layout from the user
/// or the site.
pub fn resolve(user: &UserOptions, site: &SiteConfig) -> Result<Option<StepRequest>, RequestError> {
    if (user.any() || user.plan.is_some()) && !site.user_options {
        return Err(RequestError::Usage(
            "this cluster does not allow --lama-* options (site setting user_options=no); \
             remove them to use the site's placement"
                .to_string(),
        ));
    }
    if user.plan.is_some() {
        // The plan is applied on its own (see `planned_tasks`).
        return plan_alone(user).map(|()| None);
    }
    let gpu = GpuParts::of(user)?;
    let bind = match &user.bind {
        Some(_) if gpu.bind_gpu => None,
        Some(b) => Some(Bind::parse(b).map_err(syntax("--lama-bind"))?),
        None => None,
    };
    let mppr = match (user.mppr.as_deref(), &gpu.cpu_mppr) {
        (Some("none"), _) => Some(Mppr::none()),
        (Some(_), Some(m)) => Some(Mppr::parse(m).map_err(syntax("--lama-mppr"))?),
        (Some(_), None) => Some(Mppr::none()),
        (None, _) => None,
    };
    let membind = match &user.membind {
        Some(m) => Some(Membind::parse(m).map_err(syntax("--lama-membind"))?),
        None => None,
    };
    let order = match &user.order {
        Some(o) => Some(Order::parse(o).map_err(syntax("--lama-order"))?),
        None => None,
    };
    let Some((layout, origin)) = layout_of(user, site, gpu.layout.clone())? else {
        return Ok(None);
    };
    Ok(Some(StepRequest {
        layout,
        // 1g is the user's binding: the site's default width does not replace it.
        bind: if gpu.bind_gpu {
            None
        } else {
            bind.or(site.bind)
        },
        membind: membind.unwrap_or(site.membind),
        mppr: mppr.unwrap_or_else(|| site.mppr.clone()),
        order: order.unwrap_or(site.order),
        origin,
        verbose: user.verbose || site.verbose,
        omp: user.omp,
        gpu: gpu.layout.map(|_| GpuOptions {
            per_gpu: gpu.per_gpu,
            bind_gpu: gpu.bind_gpu,
            isolate: user.gpu_isolate,
        }),
    }))
}

/// `--lama-plan` stands alone: refused beside a layout, binding, MPPR or order (the plan says
/// them all); `--lama-membind` is checked.
fn plan_alone(user: &UserOptions) -> Result<(), RequestError> {
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
        return Err(RequestError::Usage(format!(
            "--lama-plan cannot be combined with {}: the plan already says where each rank runs \
             and what it is bound to; give one or the other",
            with.join(", ")
        )));
    }
    if let Some(m) = &user.membind {
        Membind::parse(m).map_err(syntax("--lama-membind"))?;
    }
    Ok(())
}

/// The GPU parts of the user's options: a layout led by 'g', `--lama-bind=1g`, `k:g` in the
/// MPPR (and the MPPR's CPU limits without it). The GPU-only ones are refused without a
/// layout led by 'g'.
struct GpuParts {
    layout: Option<Layout>,
    bind_gpu: bool,
    per_gpu: Option<u32>,
    cpu_mppr: Option<String>,
}

impl GpuParts {
    fn of(user: &UserOptions) -> Result<GpuParts, RequestError> {
        let layout = user
            .map
            .as_deref()
            .and_then(lama_engine::parse_gpu_layout)
            .transpose()
            .map_err(syntax("--lama-map"))?;
        let bind_gpu = user.bind.as_deref().is_some_and(lama_engine::is_gpu_bind);
        let (per_gpu, cpu_mppr) = match user.mppr.as_deref() {
            Some(m) if m != "none" => {
                lama_engine::split_gpu_mppr(m).map_err(syntax("--lama-mppr"))?
            }
            _ => (None, None),
        };
        if layout.is_none() {
            let gpu_only = [
                (bind_gpu, "--lama-bind=1g"),
                (per_gpu.is_some(), "k:g in --lama-mppr"),
                (user.gpu_isolate, "--lama-gpu-isolate"),
            ];
            if let Some((_, what)) = gpu_only.iter().find(|(given, _)| *given) {
                return Err(RequestError::Usage(format!(
                    "{what} needs a layout that places tasks by GPU: lead --lama-map with 'g' \
                     (for example --lama-map=gcsbnh)"
                )));
            }
        }
        Ok(GpuParts {
            layout,
            bind_gpu,
            per_gpu,
            cpu_mppr,
        })
    }
}

/// The step's layout and whose it is: the user's (`by_gpu` when it is led by 'g'), else the
/// site's default; `None` for `--lama-map=none` or no layout at all. Other `--lama-*` options
/// without a layout are refused.
fn layout_of(
    user: &UserOptions,
    site: &SiteConfig,
    by_gpu: Option<Layout>,
) -> Result<Option<(Layout, Origin)>, RequestError> {
    match (user.map.as_deref(), by_gpu) {
        (Some("none"), _) => Ok(None),
        (Some(_), Some(l)) => Ok(Some((l, Origin::User))),
        (Some(m), None) => Ok(Some((
            Layout::parse(m).map_err(syntax("--lama-map"))?,
            Origin::User,
        ))),
        (None, _) => match &site.map {
            Some(l) if user.any() => Ok(Some((l.clone(), Origin::User))),
            Some(l) => Ok(Some((l.clone(), Origin::Site))),
            None if user.any() => Err(RequestError::Usage(
                "--lama-bind, --lama-mppr, --lama-order and --lama-membind need a layout: add \
                 --lama-map=LAYOUT (for example --lama-map=scbnh)"
                    .to_string(),
            )),
            None => Ok(None),
        },
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub(crate) fn user(map: Option<&str>, bind: Option<&str>) -> UserOptions {
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
    fn placement_by_gpu() {
        let mut u = user(Some("gcsbnh"), Some("1g"));
        u.mppr = Some("2:g,1:c".into());
        u.gpu_isolate = true;
        let site = SiteConfig {
            bind: Some(Bind::parse("1s").unwrap()),
            ..SiteConfig::default()
        };
        let r = resolve(&u, &site).unwrap().unwrap();
        assert_eq!(
            (r.layout_text(), r.binding_text()),
            ("gcsbnh".into(), "1g".into())
        );
        assert_eq!(r.mppr.to_string(), "1:c");
        assert_eq!(
            r.gpu,
            Some(GpuOptions {
                per_gpu: Some(2),
                bind_gpu: true,
                isolate: true
            })
        );
        for (map, bind, mppr, isolate) in [
            ("scbnh", Some("1g"), None, false),
            ("scbnh", None, Some("1:g"), false),
            ("scbnh", None, None, true),
        ] {
            let mut u = user(Some(map), bind);
            u.mppr = mppr.map(String::from);
            u.gpu_isolate = isolate;
            let e = resolve(&u, &SiteConfig::default()).unwrap_err().to_string();
            assert!(e.contains("lead --lama-map with 'g'"), "{e}");
        }
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
}

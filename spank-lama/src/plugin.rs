//! The SPANK callbacks, in the order Slurm calls them. Each one is a few lines that hand the
//! work to the module named for it:
//!
//! | callback | context | work | module |
//! |---|---|---|---|
//! | `init` | slurmd | the site configuration (an error is logged, slurmd goes on); the topology cache | [`crate::config`], [`crate::topology`] |
//! | `init` | srun, sbatch, salloc, slurmstepd | the site configuration (an error refuses the command or step); in srun, the inherited options; the `--lama-*` options | [`crate::config`], [`crate::inherited`], [`crate::options`] |
//! | `init_post_opt` | srun, sbatch, salloc | the options checked before anything is launched; the plan read as the user | [`crate::submit`] |
//! | `local_user_init` | srun | a plan for another number of ranks refused | [`crate::submit`] |
//! | `user_init` | slurmstepd, once per step | the request, the node's topology and the step's CPUs, this node's placement | [`crate::request`], [`crate::step`] |
//! | `task_init` | each task | its binding and variables | [`crate::task`] |
//!
//! Every callback runs inside the SPANK binding's panic guard (`lib.rs`); the code returns
//! errors instead of panicking, starts no thread and writes no file but the topology cache.

use crate::config::{OnFailure, SiteConfig};
use crate::error::{AlreadyShown, StepError};
use crate::request::Origin;
use crate::slurm_conf::Daemon;
use crate::step::Step;
use crate::topology::short_host_name;
use crate::{inherited, options, request, step, submit, task, topology};
use slurm_spank::{spank_log_error, spank_log_user, Context, Plugin, SpankHandle};
use std::error::Error;

/// The plugin's state: the site configuration from `init`; in srun the options it inherited;
/// in slurmstepd this node's [`Step`], decided in `user_init` and inherited by every task.
#[derive(Debug, Default)]
pub struct Lama {
    site: SiteConfig,
    node: String,
    inherited: Vec<(&'static str, String)>,
    step: Step,
    /// In slurmstepd: why this node's plugstack.conf line is invalid, if it is. `init` does
    /// not fail there (see [`Lama::init`]); `user_init` fails every step that LAMA would
    /// place with this text.
    broken_site: Option<String>,
}

/// Shows `message` to the user (srun/sbatch/salloc's terminal, or the step's) and fails.
fn refuse(message: impl std::fmt::Display, context_is_step: bool) -> Box<dyn Error> {
    if context_is_step {
        spank_log_user!("{message}");
    } else {
        spank_log_error!("{message}");
    }
    Box::new(AlreadyShown)
}

/// The plugin's plugstack.conf line, read. An argument that is not UTF-8 is a configuration
/// error like any other.
fn site_configuration(spank: &SpankHandle) -> Result<SiteConfig, crate::config::ConfigError> {
    match spank.plugin_argv() {
        Ok(args) => SiteConfig::from_args(&args, |path| {
            crate::bounded::read_file(std::path::Path::new(path), crate::bounded::MAX_SMALL_FILE)
        }),
        Err(e) => Err(crate::config::ConfigError {
            origin: "plugstack.conf".to_string(),
            message: format!(
                "an argument of the plugin's line is not text ({e}); write it in UTF-8"
            ),
        }),
    }
}

impl Lama {
    /// This node's name (its `NodeName`, else its host name) and Slurm's spool directory, as
    /// the daemon the plugin runs in has them.
    fn locate(&mut self, daemon: Daemon) {
        let host = short_host_name();
        self.node = crate::slurm_conf::node_name(daemon, &host).unwrap_or_else(|| host.clone());
        self.site.spool_dir = crate::slurm_conf::slurmd_spool_dir(&self.node, &host);
    }

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

    /// What a step does when it could not be placed: unknown CPUs bind nothing; other
    /// failures fail the step, except for the site's default under `on_default_failure=warn`.
    fn not_placed(
        &mut self,
        error: StepError,
        origin: Origin,
        what: &str,
    ) -> Result<(), Box<dyn Error>> {
        self.step = Step::Untouched;
        match error {
            StepError::CpusUnknown(why) => {
                self.not_bound(&why);
                Ok(())
            }
            StepError::Failed(why)
                if origin == Origin::Site && self.site.on_default_failure == OnFailure::Warn =>
            {
                spank_log_user!(
                    "lama: {}: warning: the site's default placement was not applied: {why}; \
                     tasks run with Slurm's binding",
                    self.node
                );
                Ok(())
            }
            StepError::Failed(why) => {
                Err(refuse(format!("lama: {}: {what}{why}", self.node), true))
            }
        }
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
        // What the callbacks showed already has no text ([`AlreadyShown`]); the rest (the
        // SPANK binding's own errors) goes to Slurm's log.
        let text = error.to_string();
        if !text.is_empty() {
            tracing::error!("lama: {text}");
        }
    }

    fn init(&mut self, spank: &mut SpankHandle) -> Result<(), Box<dyn Error>> {
        let context = spank.context()?;
        let site = site_configuration(spank);
        if context == Context::Slurmd {
            // An error returned here stops slurmd (and, after a restart, takes the node down
            // with its jobs): log it and go on. Steps read the same line and refuse.
            match site {
                Ok(site) => {
                    self.site = site;
                    self.locate(Daemon::Slurmd);
                    topology::cache(&self.site, &self.node);
                }
                Err(e) => spank_log_error!(
                    "{e}; slurmd goes on without a topology cache, and steps on this node fail \
                     with this message until the plugstack.conf line is fixed"
                ),
            }
            return Ok(());
        }
        self.site = match site {
            Ok(site) => site,
            // In slurmstepd a failed `init` is not the step's failure but the node's: Slurm
            // 24.11 reports it as SLURM_PLUGIN_NAME_INVALID, which a batch job's completion
            // carries to slurmctld, and slurmctld drains the node ("batch job complete
            // failure", 24.11 mgr.c `batch_finish`, proc_req.c); 24.11 has no
            // `slurm_spank_init_failure_mode`. So the error is logged here, batch and extern
            // steps go on untouched, and `user_init` fails each other step with the message.
            Err(e) if context == Context::Remote => {
                spank_log_error!("{e}");
                self.broken_site = Some(e.to_string().trim_start_matches("lama: ").to_string());
                SiteConfig::default()
            }
            Err(e) => return Err(refuse(e, false)),
        };
        if context == Context::Local {
            // Before srun parses its options: what it inherits.
            // Read as bytes: one variable that is not UTF-8 (any program may set one) must not
            // refuse the step; a LAMA option among them is judged with its bytes shown.
            let env = inherited::text_environment(std::env::vars_os());
            self.inherited =
                inherited::inherited_options(env.iter().map(|(k, v)| (k.as_str(), v.as_str())));
        }
        if matches!(
            context,
            Context::Local | Context::Remote | Context::Allocator
        ) {
            options::register(spank)?;
        }
        Ok(())
    }

    fn init_post_opt(&mut self, spank: &mut SpankHandle) -> Result<(), Box<dyn Error>> {
        let context = spank.context()?;
        if matches!(context, Context::Local | Context::Allocator) {
            submit::check_options(
                spank,
                &self.site,
                context == Context::Local,
                &self.inherited,
            )
            .map_err(|e| refuse(e, false))?;
        }
        Ok(())
    }

    fn local_user_init(&mut self, spank: &mut SpankHandle) -> Result<(), Box<dyn Error>> {
        submit::check_plan_size(spank).map_err(|e| refuse(e, false))
    }

    fn user_init(&mut self, spank: &mut SpankHandle) -> Result<(), Box<dyn Error>> {
        if spank.context()? != Context::Remote {
            return Ok(());
        }
        self.locate(Daemon::Slurmstepd);
        if step::leave_alone(spank, &self.node)? {
            return Ok(());
        }
        if let Some(why) = &self.broken_site {
            let message = format!(
                "lama: {}: {why}; every step on this node fails until the admin fixes this \
                 node's plugstack.conf line (batch scripts still run)",
                self.node
            );
            return Err(refuse(message, true));
        }
        let user = options::user_options(spank);
        if user.plan.is_some() {
            return match step::by_plan(spank, &self.site, &self.node, &user) {
                Ok(placed) => {
                    self.step = placed;
                    Ok(())
                }
                Err(e) => self.not_placed(e, Origin::User, "--lama-plan: "),
            };
        }
        let request = match request::resolve(&user, &self.site) {
            Ok(Some(request)) => request,
            Ok(None) => return Ok(()),
            Err(e) => return Err(refuse(e, true)),
        };
        match step::by_layout(spank, &self.site, &self.node, &request) {
            Ok(placed) => {
                self.step = placed;
                Ok(())
            }
            Err(e) => self.not_placed(e, request.origin, ""),
        }
    }

    fn task_init(&mut self, spank: &mut SpankHandle) -> Result<(), Box<dyn Error>> {
        task::remove_private_variables(spank);
        task::apply(spank, &self.node, &self.step).map_err(|e| refuse(e, true))
    }
}

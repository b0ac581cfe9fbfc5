//! spank-lama: the Locality-Aware Mapping Algorithm for Slurm, as a SPANK plugin.
//!
//! `srun --lama-map=scbnh --lama-bind=1s ./app` places and binds every task of the step on
//! each node: see `ARCHITECTURE.md` for the callbacks and what each does, and
//! `plugstack.conf.example` for the site settings. The modules other than [`plugin`] are pure
//! or touch only the files they name, so they are tested without Slurm.
#![deny(missing_docs)]

pub mod bind;
pub mod bounded;
pub mod cgroup;
pub mod config;
pub mod error;
pub mod gpu_cards;
pub mod gpu_task;
pub mod gpus;
#[cfg(test)]
mod hostile_tests;
pub mod inherited;
pub mod logging;
pub mod manual;
pub mod options;
pub mod placement;
pub mod plan_file;
pub mod plugin;
pub mod request;
pub mod slurm_conf;
pub mod step;
pub mod step_cpus;
pub mod step_node;
pub mod submit;
pub mod task;
pub mod task_env;
pub mod topo_cache;
pub mod topo_source;
pub mod topology;

/// The symbols Slurm looks up: `plugin_name`, `plugin_type`, `plugin_version` and the
/// `slurm_spank_*` callbacks.
///
/// The plugin's name is `lama`: option variables are `_SLURM_SPANK_OPTION_lama_lama_map` and
/// so on. `SLURM_VERSION_NUMBER` comes from the Slurm headers the plugin is built against;
/// Slurm loads only plugins built for its own major.minor version.
#[allow(missing_docs, non_upper_case_globals, unsafe_op_in_unsafe_fn)]
mod exports {
    use super::plugin::Lama;
    use slurm_spank::SLURM_VERSION_NUMBER;

    #[no_mangle]
    pub static plugin_name: [u8; 5] = *b"lama\0";
    #[no_mangle]
    pub static plugin_type: [u8; 6] = *b"spank\0";
    #[no_mangle]
    pub static plugin_version: std::os::raw::c_uint = SLURM_VERSION_NUMBER;

    /// One exported callback, as the binding's `SPANK_PLUGIN!` writes it (the whole call runs
    /// inside its panic guard), for the callbacks the plugin uses only: Slurm runs a SPANK
    /// prolog and epilog slurmstepd for every job on every node as soon as one plugin exports
    /// `slurm_spank_job_prolog` or `slurm_spank_job_epilog`, and calls every exported task
    /// callback in every task.
    macro_rules! hook {
        ($symbol:ident, $method:ident) => {
            #[no_mangle]
            pub extern "C" fn $symbol(
                spank: slurm_spank::spank_sys::spank_t,
                ac: std::os::raw::c_int,
                argv: *const *const std::os::raw::c_char,
            ) -> std::os::raw::c_int {
                slurm_spank::spank_callback_with_globals::<Lama, _>(|plugin, options, setup| {
                    let mut spank = slurm_spank::init_spank_handle(spank, ac, argv, options);
                    if setup {
                        plugin.setup(&mut spank).inspect_err(|e| {
                            plugin.report_error(&mut spank, e.as_ref());
                        })?;
                    }
                    let context = spank
                        .context()
                        .map(|c| format!("{c:?}"))
                        .unwrap_or_else(|_| "Error".to_string());
                    let span = slurm_spank::make_cb_span(
                        "lama",
                        stringify!($symbol),
                        &context,
                        spank.task_global_id().ok(),
                    );
                    let _guard = span.enter();
                    plugin.$method(&mut spank).inspect_err(|e| {
                        plugin.report_error(&mut spank, e.as_ref());
                    })
                })
            }
        };
    }

    hook!(slurm_spank_init, init);
    hook!(slurm_spank_init_post_opt, init_post_opt);
    hook!(slurm_spank_local_user_init, local_user_init);
    hook!(slurm_spank_user_init, user_init);
    hook!(slurm_spank_task_init, task_init);

    /// Slurm ≥ 26.05: how a failed `slurm_spank_init` counts. Its spank(7) names draining
    /// the node (`ESPANK_NODE_FAILURE`) as the default; the plugin asks for a job failure
    /// instead. Its `init` does not fail in slurmstepd on a broken site configuration (it is
    /// logged, and `user_init` fails each step but batch and extern steps with the message:
    /// on Slurm 24.11, which has no such setting and ignores the symbol, a failed `init` in a
    /// batch job's slurmstepd drains the node); this covers what else could fail there
    /// (registering the options). The e2e tests
    /// `t_node_configuration_error_fails_the_job_not_the_node` and
    /// `t_broken_plugstack_batch_job_drains_nothing` check both releases. The value is
    /// `ESPANK_JOB_FAILURE` of 26.05's `slurm_errno.h` (3012); the 24.11 headers, which the
    /// default build uses, do not define it.
    #[no_mangle]
    pub static slurm_spank_init_failure_mode: std::os::raw::c_int = 3012;

    /// The Slurm version this plugin was built for, as text in the file
    /// ([`lama_slurm::built_for`]).
    #[used]
    #[no_mangle]
    pub static spank_lama_built_for: [u8; lama_slurm::built_for::LEN] =
        lama_slurm::built_for::encode(SLURM_VERSION_NUMBER);
}

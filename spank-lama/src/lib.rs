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
pub mod logging;
pub mod plan;
pub mod plugin;
pub mod topo_source;

/// The symbols Slurm looks up: `plugin_name`, `plugin_type`, `plugin_version` and the
/// `slurm_spank_*` callbacks.
///
/// The plugin's name is `lama`: option variables are `_SLURM_SPANK_OPTION_lama_lama_map` and
/// so on. `SLURM_VERSION_NUMBER` comes from the Slurm headers the plugin is built against;
/// Slurm loads only plugins built for its own major.minor version.
#[allow(missing_docs, non_upper_case_globals, unsafe_op_in_unsafe_fn)]
mod exports {
    use super::plugin::Lama;
    use slurm_spank::{Plugin, SLURM_VERSION_NUMBER, SPANK_PLUGIN};

    SPANK_PLUGIN!(b"lama", SLURM_VERSION_NUMBER, Lama);
}

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
pub mod manual;
pub mod options;
pub mod plan;
pub mod plugin;
pub mod topo_cache;
pub mod topo_source;

/// What precedes the Slurm version in [`built_for`]'s marker.
pub const BUILT_FOR_PREFIX: &str = "spank-lama built for Slurm ";

/// The marker text `spank-lama built for Slurm MAJOR.MINOR.MICRO` (Slurm's form: 24.11.5,
/// 26.05.5) for a `SLURM_VERSION_NUMBER`,
/// NUL-padded. The plugin carries it for the version it was built against, so that
/// `scripts/install-plugin.sh` and `lama --version` can read it from the file with `grep -a`,
/// without loading the plugin or reading ELF symbols.
pub const fn built_for(version: u32) -> [u8; 48] {
    let mut out = [0u8; 48];
    let prefix = BUILT_FOR_PREFIX.as_bytes();
    let mut i = 0;
    while i < prefix.len() {
        out[i] = prefix[i];
        i += 1;
    }
    let parts = [version >> 16, (version >> 8) & 0xff, version & 0xff];
    let mut p = 0;
    while p < 3 {
        if p > 0 {
            out[i] = b'.';
            i += 1;
        }
        let n = parts[p];
        if n >= 100 {
            out[i] = b'0' + (n / 100) as u8;
            i += 1;
        }
        // The minor version has two digits, as Slurm writes it: 26.05.
        if n >= 10 || p == 1 {
            out[i] = b'0' + (n / 10 % 10) as u8;
            i += 1;
        }
        out[i] = b'0' + (n % 10) as u8;
        i += 1;
        p += 1;
    }
    out
}

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

    /// Slurm ≥ 26.05: how a failed `slurm_spank_init` counts. Its spank(7) names draining
    /// the node (`ESPANK_NODE_FAILURE`) as the default; the plugin asks for a job failure
    /// instead. Its init fails only on a broken site configuration, which srun, reading the
    /// same plugstack.conf, normally refuses before launch; a node whose own configuration
    /// differs fails the step with the message and stays in service, as with Slurm 24.11,
    /// which has no such setting and ignores the symbol (the e2e test
    /// `t_node_configuration_error_fails_the_job_not_the_node` checks both). The value is
    /// `ESPANK_JOB_FAILURE` of 26.05's `slurm_errno.h` (3012); the 24.11 headers, which the
    /// default build uses, do not define it.
    #[no_mangle]
    pub static slurm_spank_init_failure_mode: std::os::raw::c_int = 3012;

    /// The Slurm version this plugin was built for, as text in the file (see [`built_for`]).
    #[used]
    #[no_mangle]
    pub static spank_lama_built_for: [u8; 48] = super::built_for(SLURM_VERSION_NUMBER);
}

#[cfg(test)]
mod tests {
    #[test]
    fn built_for_marker() {
        let text = |v| {
            let m = super::built_for(v);
            String::from_utf8(m.iter().copied().take_while(|&b| b != 0).collect()).unwrap()
        };
        assert_eq!(text(0x180b05), "spank-lama built for Slurm 24.11.5");
        assert_eq!(text(0x1a0500), "spank-lama built for Slurm 26.05.0");
        assert_eq!(text(0xffffff), "spank-lama built for Slurm 255.255.255");
    }
}

//! The configuration of the Slurm the plugin runs in (`csrc/slurm_conf.c`): its
//! `SlurmdSpoolDir`, where Slurm caches the node's topology and LAMA caches its own. Read from
//! the daemon, never assumed from a distribution's layout.

use std::ffi::CStr;
use std::os::raw::c_char;
use std::path::PathBuf;

extern "C" {
    fn lama_slurmd_spooldir() -> *const c_char;
}

fn text(ptr: *const c_char) -> Option<String> {
    if ptr.is_null() {
        return None;
    }
    // SAFETY: a non-null pointer from Slurm's configuration is a NUL-terminated string that
    // lives as long as the configuration, which outlives every SPANK callback.
    let s = unsafe { CStr::from_ptr(ptr) }
        .to_string_lossy()
        .into_owned();
    (!s.is_empty()).then_some(s)
}

/// The running slurmd's or slurmstepd's `SlurmdSpoolDir`, with `%n` (node name) and `%h`
/// (host name) replaced by `node` as slurmd does for a node named after its host (a node with
/// several slurmd daemons names its cache with `topology_cache=`).
pub fn slurmd_spool_dir(node: &str) -> Result<PathBuf, String> {
    // SAFETY: reads a pointer field of Slurm's configuration (or returns NULL without it).
    let raw = text(unsafe { lama_slurmd_spooldir() }).ok_or_else(|| {
        "this Slurm process has no SlurmdSpoolDir in its configuration".to_string()
    })?;
    expand(&raw, node)
}

/// slurmstepd's own slurm.conf, beside which gres.conf and cgroup.conf are: the `SLURM_CONF` of
/// this process's environment, which slurmd sets for itself before it forks slurmstepd (with
/// `-f`, and in configless mode the cache it fetched the files into), and which Slurm's own
/// `get_extra_conf_path` reads; `None` where it is not set. Never the job's `SLURM_CONF` (the
/// user's to set: srun's value, `(null)` where srun fetched its configuration into memory),
/// which [`slurm_spank::SpankHandle::getenv`] would give.
pub fn config_file() -> Option<PathBuf> {
    std::env::var_os("SLURM_CONF")
        .filter(|v| !v.is_empty() && v.len() <= 4096)
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
}

fn expand(raw: &str, node: &str) -> Result<PathBuf, String> {
    if !raw.starts_with('/') {
        return Err(format!("SlurmdSpoolDir {raw} is not an absolute path"));
    }
    if (raw.contains("%n") || raw.contains("%h")) && !crate::config::usable_in_path(node) {
        return Err(format!(
            "SlurmdSpoolDir {raw} names the node, and '{node}' cannot be used in a path"
        ));
    }
    Ok(PathBuf::from(raw.replace("%n", node).replace("%h", node)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spool_dir_is_expanded_as_slurmd_does() {
        assert_eq!(
            expand("/var/spool/slurmd", "n1"),
            Ok(PathBuf::from("/var/spool/slurmd"))
        );
        assert_eq!(
            expand("/var/spool/slurmd.%n", "n1"),
            Ok(PathBuf::from("/var/spool/slurmd.n1"))
        );
        assert_eq!(
            expand("/local/%h/slurmd", "n1"),
            Ok(PathBuf::from("/local/n1/slurmd"))
        );
        assert!(expand("spool", "n1")
            .unwrap_err()
            .contains("not an absolute"));
        assert!(expand("/s/%n", "../x").is_err());
    }

    #[test]
    fn outside_slurm_nothing_is_read() {
        // A test binary has no `slurm_conf`: the weak symbol is NULL, nothing is guessed.
        assert!(slurmd_spool_dir("n1")
            .unwrap_err()
            .contains("no SlurmdSpoolDir"));
    }
}

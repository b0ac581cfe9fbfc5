//! The configuration of the Slurm the plugin runs in (`csrc/slurm_conf.c`): its
//! `SlurmdSpoolDir`, where Slurm caches the node's topology and LAMA caches its own. Read from
//! the daemon, never assumed from a distribution's layout.

use std::ffi::CStr;
use std::os::raw::c_char;
use std::path::PathBuf;

extern "C" {
    fn lama_slurmd_spooldir() -> *const c_char;
    fn lama_slurmd_node_name(short_host: *const c_char) -> *const c_char;
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

/// Which Slurm daemon the plugin runs in, for [`node_name`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Daemon {
    /// slurmd, starting (SPANK's slurmd context).
    Slurmd,
    /// slurmstepd (SPANK's remote context).
    Slurmstepd,
}

/// This node's `NodeName` as the Slurm daemon the plugin runs in knows it, which need not be
/// the host name (`NodeName=n3 NodeHostname=node3`), or `None` where it cannot tell.
/// - slurmstepd: `SLURMD_NODENAME` in its own process environment, which slurmstepd sets from
///   the configuration slurmd sends it before any SPANK callback (`slurmstepd.c`,
///   `_init_from_slurmd`, 24.11 and 26.05). Not the job's variable of the same name, which
///   the user's environment carries until slurmstepd overwrites it in each task.
/// - slurmd: its `-N` argument, else what slurmd itself looks up without one (the node whose
///   `NodeHostname` is this host, else an alias of it: `csrc/slurm_conf.c`).
pub fn node_name(daemon: Daemon, short_host: &str) -> Option<String> {
    let name = match daemon {
        Daemon::Slurmstepd => std::env::var("SLURMD_NODENAME").ok(),
        Daemon::Slurmd => {
            let argv = crate::bounded::read_file(
                std::path::Path::new("/proc/self/cmdline"),
                crate::bounded::MAX_SMALL_FILE,
            )
            .unwrap_or_default();
            dash_n(&argv).or_else(|| {
                let host = std::ffi::CString::new(short_host).ok()?;
                // SAFETY: Slurm's lookup reads its configuration and returns a string it
                // allocated, or NULL; `host` outlives the call.
                text(unsafe { lama_slurmd_node_name(host.as_ptr()) })
            })
        }
    };
    name.filter(|n| !n.is_empty() && n.len() <= 255)
}

/// slurmd's `-N NAME` (or `-NNAME`) in its NUL-separated command line.
fn dash_n(cmdline: &str) -> Option<String> {
    let mut args = cmdline.split('\0');
    while let Some(arg) = args.next() {
        if arg == "-N" {
            return args.next().map(str::to_string);
        }
        if let Some(name) = arg.strip_prefix("-N").filter(|n| !n.is_empty()) {
            return Some(name.to_string());
        }
    }
    None
}

/// The running slurmd's or slurmstepd's `SlurmdSpoolDir`, with `%n` replaced by the node's
/// `NodeName` and `%h` by its host name, as slurmd does (a node with several slurmd daemons
/// names its cache with `topology_cache=`).
pub fn slurmd_spool_dir(node: &str, host: &str) -> Result<PathBuf, String> {
    // SAFETY: reads a pointer field of Slurm's configuration (or returns NULL without it).
    let raw = text(unsafe { lama_slurmd_spooldir() }).ok_or_else(|| {
        "this Slurm process has no SlurmdSpoolDir in its configuration".to_string()
    })?;
    expand(&raw, node, host)
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

fn expand(raw: &str, node: &str, host: &str) -> Result<PathBuf, String> {
    if !raw.starts_with('/') {
        return Err(format!("SlurmdSpoolDir {raw} is not an absolute path"));
    }
    for (code, name) in [("%n", node), ("%h", host)] {
        if raw.contains(code) && !crate::config::usable_in_path(name) {
            return Err(format!(
                "SlurmdSpoolDir {raw} names the node, and '{name}' cannot be used in a path"
            ));
        }
    }
    Ok(PathBuf::from(raw.replace("%n", node).replace("%h", host)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spool_dir_is_expanded_as_slurmd_does() {
        assert_eq!(
            expand("/var/spool/slurmd", "n1", "host1"),
            Ok(PathBuf::from("/var/spool/slurmd"))
        );
        assert_eq!(
            expand("/var/spool/slurmd.%n", "n1", "host1"),
            Ok(PathBuf::from("/var/spool/slurmd.n1"))
        );
        assert_eq!(
            expand("/local/%h/slurmd.%n", "n1", "host1"),
            Ok(PathBuf::from("/local/host1/slurmd.n1"))
        );
        assert!(expand("spool", "n1", "n1")
            .unwrap_err()
            .contains("not an absolute"));
        assert!(expand("/s/%n", "../x", "h").is_err());
        assert!(expand("/s/%h", "n1", "..").is_err());
        assert!(expand("/s/%n", "n1", "..").is_ok());
    }

    #[test]
    fn slurmd_dash_n() {
        assert_eq!(dash_n("/usr/sbin/slurmd\0-D\0-N\0n3\0"), Some("n3".into()));
        assert_eq!(dash_n("slurmd\0-Nn3\0"), Some("n3".into()));
        assert_eq!(dash_n("slurmd\0-D\0-s\0"), None);
        assert_eq!(dash_n("slurmd\0-N"), None);
    }

    #[test]
    fn outside_slurm_nothing_is_read() {
        // A test binary has no `slurm_conf`: the weak symbol is NULL, nothing is guessed.
        assert!(slurmd_spool_dir("n1", "n1")
            .unwrap_err()
            .contains("no SlurmdSpoolDir"));
        assert_eq!(node_name(Daemon::Slurmd, "n1"), None);
    }
}

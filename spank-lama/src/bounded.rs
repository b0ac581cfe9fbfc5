//! Length bounds on everything the plugin reads from outside: files (site configuration, cgroup
//! and `/proc` files, plan files) and environment variables. Anything longer is refused (files)
//! or ignored (variables) instead of being read whole.

use std::path::Path;

/// Largest site configuration, cgroup, `/proc` or host-name file read.
pub const MAX_SMALL_FILE: u64 = 1 << 20;
/// Longest environment variable value the plugin looks at: Slurm's lists grow with the job
/// (`SLURM_STEP_NODELIST` of 100,000 scattered nodes such as `nid[00001,00003,...]` is
/// about 700 KB; at 4 KiB, a step over a few hundred scattered nodes lost its node list and
/// failed); the plan's text has its own bounds, `lama_planfile::MAX_INLINE_PLAN_BYTES` in the
/// environment and `lama_planfile::MAX_PLAN_BYTES` in a file.
pub const MAX_ENV_VALUE: usize = 1 << 20;

/// Reads a text file of at most `max` bytes; a longer one is an error that says so.
pub fn read_file(path: &Path, max: u64) -> std::io::Result<String> {
    lama_hwloc::read_bounded(path, max)
}

/// An environment value, or `None` when it is longer than [`MAX_ENV_VALUE`].
pub fn env_value(value: Option<String>) -> Option<String> {
    value.filter(|v| v.len() <= MAX_ENV_VALUE)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_files_and_values_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("f");
        std::fs::write(&p, "x".repeat(100)).unwrap();
        assert_eq!(read_file(&p, 100).unwrap().len(), 100);
        assert!(read_file(&p, 99)
            .unwrap_err()
            .to_string()
            .contains("longer than 99 bytes"));
        assert!(read_file(&dir.path().join("missing"), 10).is_err());
        assert_eq!(env_value(Some("a".into())), Some("a".into()));
        assert_eq!(env_value(Some("a".repeat(MAX_ENV_VALUE + 1))), None);
    }
}

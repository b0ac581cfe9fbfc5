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

/// Reads a text file of at most `max` bytes; a longer one is an error that says so, and so is
/// anything but a regular file (a FIFO or a device in place of a plan or a configuration file
/// would hold the step, or feed it without end). Opened without blocking (a FIFO's open would
/// wait for a writer) and judged on the open descriptor, so nothing can be swapped in between.
pub fn read_file(path: &Path, max: u64) -> std::io::Result<String> {
    lama_hwloc::read_bounded_from(open_regular(path)?, max)
}

/// Opens a regular file for reading, as [`read_file`] does (without blocking, judged on the
/// open descriptor): anything else is an error.
pub fn open_regular(path: &Path) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)?;
    if !file.metadata()?.file_type().is_file() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "not a regular file",
        ));
    }
    Ok(file)
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
        // A FIFO with no writer: refused at once, not waited on.
        let fifo = dir.path().join("fifo");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let t = std::time::Instant::now();
        let e = read_file(&fifo, 10).unwrap_err();
        assert!(e.to_string().contains("not a regular file"), "{e}");
        assert!(t.elapsed() < std::time::Duration::from_secs(5));
        // A device that never ends, and a directory.
        for other in [Path::new("/dev/zero"), dir.path()] {
            let e = read_file(other, 10).unwrap_err();
            assert!(
                e.to_string().contains("not a regular file"),
                "{other:?}: {e}"
            );
        }
        assert_eq!(env_value(Some("a".into())), Some("a".into()));
        assert_eq!(env_value(Some("a".repeat(MAX_ENV_VALUE + 1))), None);
    }
}

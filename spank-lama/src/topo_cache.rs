//! LAMA's own topology cache (`topology_cache=`, SPEC §3.3).
//!
//! Slurm 18.08–24.11 writes the node's whole topology to `SlurmdSpoolDir/hwloc_topo_whole.xml`
//! when slurmd starts; from 25.05 on it no longer does, and every step would pay for a live
//! hwloc discovery. So when slurmd starts (the SPANK `slurmd` context, as root) the plugin
//! exports the node's topology once, and steps read it with the same staleness check as
//! Slurm's file ([`crate::topo_source`]).
//!
//! The file is written atomically: a temporary file in the same directory (one a crashed
//! writer of the same PID left is replaced), synced, then renamed over the old one, and the
//! directory synced, so a step never reads half a file and a crash keeps the old or the new. Mode 0644: steps read it as
//! root, and users may preview with it (`lama map --topology`). A failure is returned for the
//! caller to log; slurmd starts anyway and steps fall back to the next source.
//!
//! Steps read a cache only if no user can write it but root and the owner of its directory
//! ([`trusted`]): the file owned by root and not writable by group or others, its directory not
//! writable by group or others. The directory may belong to the account Slurm runs its spool
//! directory as (`/var/lib/slurm/slurmd` is `slurm`'s on Debian), which Slurm itself trusts for
//! its own `hwloc_topo_whole.xml` there; slurmd does not write a cache into a directory that
//! fails the rule. The XML has every PU allowed whatever slurmd's own CPUs are
//! (with core specialisation, slurmd may be confined to the specialised ones).

use std::fs::{self, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::Path;

/// Writes `contents` to `path` atomically with mode 0644.
pub fn write_atomically(path: &Path, contents: &[u8]) -> io::Result<()> {
    let name = path
        .file_name()
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "not a file name"))?;
    let tmp = path.with_file_name(format!(
        ".{}.{}.tmp",
        name.to_string_lossy(),
        std::process::id()
    ));
    // A temporary file of the same name is left by a crashed writer whose PID this process
    // now has: it is this writer's to replace (the directory is writable by its owner alone).
    let _ = fs::remove_file(&tmp);
    let written = (|| {
        let mut file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o644)
            .open(&tmp)?;
        // The mode is also set explicitly: the process umask may have narrowed it.
        file.set_permissions(fs::Permissions::from_mode(0o644))?;
        file.write_all(contents)?;
        file.sync_all()?;
        fs::rename(&tmp, path)?;
        // The rename is durable once the directory is synced.
        let dir = match path.parent() {
            Some(d) if !d.as_os_str().is_empty() => d,
            _ => Path::new("."),
        };
        fs::File::open(dir)?.sync_all()
    })();
    if written.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    written
}

/// A topology cache's text, if it may be read as the node's topology: the file (after
/// symbolic links) is owned by root and writable by root alone, and its directory is writable
/// by its owner alone. The file's owner and mode are those of the descriptor the text is read
/// from (`fstat`), so the file cannot be swapped between the check and the read. `Err` says
/// which rule fails and why.
pub fn read_trusted(path: &Path) -> Result<String, String> {
    let real = fs::canonicalize(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut dirs = vec![real.parent().map(Path::to_path_buf)];
    // A link's own directory counts too: whoever can write it can point the link elsewhere.
    if real.as_path() != path {
        dirs.push(
            path.parent()
                .map(|d| fs::canonicalize(d).unwrap_or_else(|_| d.to_path_buf())),
        );
    }
    for dir in dirs.into_iter().flatten() {
        let meta = fs::metadata(&dir).map_err(|e| format!("directory {}: {e}", dir.display()))?;
        owned_by_root_alone(&meta, &dir, "directory ", false)?;
    }
    let file = fs::File::open(&real).map_err(|e| format!("{}: {e}", real.display()))?;
    let meta = file
        .metadata()
        .map_err(|e| format!("{}: {e}", real.display()))?;
    owned_by_root_alone(&meta, &real, "", true)?;
    lama_hwloc::read_bounded_from(file, lama_hwloc::MAX_XML_BYTES)
        .map_err(|e| format!("{}: {e}", real.display()))
}

/// Who must own a cache and its directory: root, which writes the cache when slurmd starts. (In
/// this crate's unit tests, whoever runs them, so that they also run unprivileged.)
fn trusted_owner() -> u32 {
    if cfg!(test) {
        // SAFETY: geteuid has no preconditions and cannot fail.
        unsafe { libc::geteuid() }
    } else {
        0
    }
}

/// `Ok` if `meta` (of `path`) is writable by its owner alone and, with `root`, owned by root;
/// `what` names it in the error.
fn owned_by_root_alone(
    meta: &fs::Metadata,
    path: &Path,
    what: &str,
    root: bool,
) -> Result<(), String> {
    use std::os::unix::fs::MetadataExt;
    let rule = "a topology cache must be owned by root and writable by root alone, in a \
                directory writable by its owner alone (topology_cache= can name a file in such \
                a directory)";
    if root && meta.uid() != trusted_owner() {
        return Err(format!(
            "{what}{} is owned by uid {}: {rule}",
            path.display(),
            meta.uid()
        ));
    }
    let mode = meta.mode() & 0o7777;
    if mode & 0o022 != 0 {
        return Err(format!(
            "{what}{} is writable by group or others (mode {mode:04o}): {rule}",
            path.display()
        ));
    }
    Ok(())
}

/// What [`export`] did, for slurmd's log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Exported {
    /// Bytes written.
    pub bytes: usize,
    /// Time taken by discovery and export, in milliseconds.
    pub millis: u128,
}

/// Where the machine text of the cache at `xml` is written ([`export`]): beside it, `.machine`
/// for `.xml` (`lama_topology.machine`), else `.machine` added to its name.
pub fn machine_path(xml: &Path) -> std::path::PathBuf {
    match xml.extension() {
        Some(e) if e == "xml" => xml.with_extension("machine"),
        _ => {
            let mut name = xml.as_os_str().to_os_string();
            name.push(".machine");
            name.into()
        }
    }
}

/// Exports this node's topology (`xml` performs the discovery and export; a parameter so
/// tests need no particular host) to `path`, and the same machine as text to
/// [`machine_path`]: steps read that text without hwloc, whose start in each new process
/// (loading its plugins) costs milliseconds, more than reading and placing a small node. When
/// the text cannot be written, an older one is removed so that no step reads it.
pub fn export(
    path: &Path,
    xml: impl FnOnce() -> Result<String, lama_hwloc::LoadError>,
) -> Result<Exported, String> {
    let start = std::time::Instant::now();
    if let Some(dir) = path.parent().filter(|d| d.is_dir()) {
        fs::metadata(dir)
            .map_err(|e| format!("directory {}: {e}", dir.display()))
            .and_then(|meta| owned_by_root_alone(&meta, dir, "directory ", false))
            .map_err(|e| format!("not written, steps would not trust it: {e}"))?;
    }
    // A failed discovery removes the cache a previous start wrote: it may describe the node
    // before a change (a BIOS NUMA setting, a replaced board) that made discovery fail, and
    // steps would trust it.
    let text = xml().map_err(|e| {
        let removed = [path.to_path_buf(), machine_path(path)]
            .map(|p| fs::remove_file(p).is_ok())
            .contains(&true);
        let and = if removed {
            "; the old cache was removed"
        } else {
            ""
        };
        format!("cannot discover this node's topology: {e}{and}")
    })?;
    // The XML first, then its machine text: a text is never left beside an XML it was not
    // made from (an older one is removed when either write fails).
    let machine = machine_path(path);
    let written = write_atomically(path, text.as_bytes())
        .map_err(|e| format!("cannot write {}: {e}", path.display()))
        .and_then(|()| {
            lama_hwloc::load_xml_text(&text, &machine, lama_hwloc::Io::Keep)
                .map_err(|e| e.to_string())
        })
        .and_then(|m| {
            write_atomically(&machine, m.to_text().as_bytes())
                .map_err(|e| format!("cannot write {}: {e}", machine.display()))
        });
    if written.is_err() {
        let _ = fs::remove_file(&machine);
    }
    written?;
    Ok(Exported {
        bytes: text.len(),
        millis: start.elapsed().as_millis(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use lama_hwloc::Source;

    #[test]
    fn written_atomically_with_mode_0644_and_readable_as_a_topology() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("lama_topology.xml");
        std::fs::write(&path, "old").unwrap();
        let old_umask = unsafe { libc::umask(0o077) };
        let done = export(&path, || {
            lama_hwloc::export_xml(&Source::Synthetic("pack:2 core:2 pu:2".into()))
        });
        unsafe { libc::umask(old_umask) };
        let done = done.unwrap();
        let meta = std::fs::metadata(&path).unwrap();
        assert_eq!(meta.permissions().mode() & 0o777, 0o644);
        assert_eq!(meta.len() as usize, done.bytes);
        let machine = lama_hwloc::load(&Source::Xml(path.clone())).unwrap();
        assert_eq!(machine.pus().len(), 8);
        // Its machine text beside it, the same machine, also mode 0644.
        let text_path = dir.path().join("lama_topology.machine");
        let meta = std::fs::metadata(&text_path).unwrap();
        assert_eq!(meta.permissions().mode() & 0o777, 0o644);
        let text = std::fs::read_to_string(&text_path).unwrap();
        let back = lama_engine::Machine::from_text("lama_topology.machine", &text).unwrap();
        assert_eq!(back.to_text(), machine.to_text());
        // No temporary file is left behind.
        let mut names: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        names.sort();
        assert_eq!(names, ["lama_topology.machine", "lama_topology.xml"]);
    }

    #[test]
    fn failures_leave_no_old_cache_and_say_why() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("lama_topology.xml");
        let machine = dir.path().join("lama_topology.machine");
        std::fs::write(&path, "old").unwrap();
        std::fs::write(&machine, "old").unwrap();
        // A failed discovery: the old cache (XML and machine text) describes the node as it
        // was, and is removed so that no step trusts it.
        let failed = || Err(lama_hwloc::LoadError::InvalidSynthetic("x".into()));
        let e = export(&path, failed).unwrap_err();
        assert!(
            e.starts_with("cannot discover this node's topology: ")
                && e.ends_with("; the old cache was removed"),
            "{e}"
        );
        assert!(!path.exists() && !machine.exists());
        let e = export(&path, failed).unwrap_err();
        assert!(!e.contains("removed"), "{e}");
        // An XML written that hwloc cannot read back: no machine text is left beside it, not
        // even an older one.
        let text = dir.path().join("lama_topology.machine");
        std::fs::write(&text, "lama-machine 1\npus\t0\n").unwrap();
        let e = export(&path, || Ok("<topology/>".into())).unwrap_err();
        assert!(!e.is_empty());
        assert!(!text.exists());
        // A directory that does not exist (a SlurmdSpoolDir elsewhere).
        let missing = dir.path().join("no/such/dir/lama_topology.xml");
        let e = export(&missing, || Ok("<topology/>".into())).unwrap_err();
        assert!(
            e.contains("cannot write") && e.contains("No such file or directory"),
            "{e}"
        );
    }

    #[test]
    fn a_temporary_file_left_by_a_crash_under_this_pid_is_replaced() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("lama_topology.xml");
        let stale = dir
            .path()
            .join(format!(".lama_topology.xml.{}.tmp", std::process::id()));
        std::fs::write(&stale, "half a file").unwrap();
        write_atomically(&path, b"<topology/>").unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "<topology/>");
        assert!(!stale.exists());
    }

    #[test]
    fn a_cache_is_trusted_only_if_root_alone_can_write_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("lama_topology.xml");
        let mode = |p: &Path, m: u32| {
            std::fs::set_permissions(p, std::fs::Permissions::from_mode(m)).unwrap()
        };
        std::fs::write(&path, "x").unwrap();
        mode(&path, 0o644);
        mode(dir.path(), 0o755);
        assert_eq!(read_trusted(&path).unwrap(), "x");
        mode(&path, 0o664);
        let e = read_trusted(&path).unwrap_err();
        assert!(
            e.contains("is writable by group or others (mode 0664)"),
            "{e}"
        );
        assert!(
            e.contains("owned by root and writable by root alone"),
            "{e}"
        );
        mode(&path, 0o644);
        mode(dir.path(), 0o1777);
        let e = read_trusted(&path).unwrap_err();
        assert!(e.contains("directory") && e.contains("(mode 1777)"), "{e}");
        // slurmd does not write a cache into a directory others can write: steps would refuse it.
        let e = export(&path, || Ok("<topology/>".into())).unwrap_err();
        assert!(e.contains("(mode 1777)"), "{e}");
        mode(dir.path(), 0o755);
        // A symbolic link is judged by the file it names and both directories.
        let other = tempfile::tempdir().unwrap();
        mode(other.path(), 0o777);
        let target = other.path().join("t.xml");
        std::fs::write(&target, "x").unwrap();
        mode(&target, 0o644);
        let link = dir.path().join("link.xml");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        let e = read_trusted(&link).unwrap_err();
        assert!(e.contains("(mode 0777)"), "{e}");
        // A directory owned by the account Slurm runs its spool as (slurm on Debian), writable by
        // it alone, holds a trusted cache; the file itself must be root's.
        if std::os::unix::fs::chown(dir.path(), Some(65534), None).is_ok() {
            mode(dir.path(), 0o755);
            read_trusted(&path).unwrap();
        }
        if std::os::unix::fs::chown(&path, Some(65534), None).is_ok() {
            let e = read_trusted(&path).unwrap_err();
            assert!(e.contains("is owned by uid 65534"), "{e}");
        }
        let e = read_trusted(&dir.path().join("absent.xml")).unwrap_err();
        assert!(e.contains("No such file"), "{e}");
    }
}

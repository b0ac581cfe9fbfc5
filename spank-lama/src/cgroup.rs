//! The step's allowed CPUs from its cgroup cpuset (SPEC §3.4).
//!
//! Found from `/proc/self/cgroup` and `/proc/self/mountinfo`, never from a hard-coded root:
//! - cgroup v1: slurmstepd sits in the step cpuset after task/cgroup's `pre_setuid`
//!   (`.../slurm[_<node>]/uid_U/job_J/step_S`); the set is `cpuset.cpus` there;
//! - cgroup v2: slurmstepd sits in `.../job_J/step_S/slurm` while the tasks' constraint is on
//!   `.../job_J/step_S/user`; the set is `user/cpuset.cpus`.
//!
//! Only the *configured* set is trusted: Slurm's cgroup/v2 enables the cpuset controller down
//! the tree whether or not it constrains cores, so `user/cpuset.cpus.effective` exists and holds
//! the whole node with `ConstrainCores=no`, while `user/cpuset.cpus` is then empty. The path
//! must name this job and step; anything missing, empty or unexpected is an error with the
//! reason, and the caller uses the step's allocated cores alone (see `crate::step_cpus`).

use lama_engine::CpuList;
use std::path::{Path, PathBuf};

/// Which cgroup hierarchy holds the cpuset.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Hierarchy {
    /// cgroup v1 cpuset controller: the process's path in it.
    V1(String),
    /// cgroup v2 (unified): the process's path.
    V2(String),
}

/// Reads `/proc/self/cgroup`: the cpuset controller's path (v1) if there is one, else the
/// unified path (v2).
pub fn parse_proc_cgroup(text: &str) -> Option<Hierarchy> {
    let mut unified = None;
    for line in text.lines() {
        let mut parts = line.splitn(3, ':');
        let (Some(_id), Some(controllers), Some(path)) = (parts.next(), parts.next(), parts.next())
        else {
            continue;
        };
        if controllers.split(',').any(|c| c == "cpuset") {
            return Some(Hierarchy::V1(path.to_string()));
        }
        if controllers.is_empty() {
            unified = Some(Hierarchy::V2(path.to_string()));
        }
    }
    unified
}

/// A cgroup mount from `/proc/self/mountinfo`: the hierarchy path at its root, and where it
/// is mounted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mount {
    /// Path inside the hierarchy that the mount shows at its mount point.
    pub root: String,
    /// The mount point.
    pub point: PathBuf,
}

/// Finds the cpuset v1 mount (`v2 == false`) or the cgroup2 mount (`v2 == true`).
pub fn parse_mountinfo(text: &str, v2: bool) -> Option<Mount> {
    for line in text.lines() {
        // id parent major:minor root mount-point options [optional...] - fstype source super
        let Some((left, right)) = line.split_once(" - ") else {
            continue;
        };
        let fields: Vec<&str> = left.split(' ').collect();
        let rfields: Vec<&str> = right.split(' ').collect();
        if fields.len() < 5 || rfields.is_empty() {
            continue;
        }
        let fstype = rfields[0];
        let matches = if v2 {
            fstype == "cgroup2"
        } else {
            fstype == "cgroup"
                && rfields
                    .get(2)
                    .is_some_and(|opts| opts.split(',').any(|o| o == "cpuset"))
        };
        if matches {
            return Some(Mount {
                root: unescape(fields[3]),
                point: PathBuf::from(unescape(fields[4])),
            });
        }
    }
    None
}

/// mountinfo escapes blanks and backslashes as octal (`\040`).
fn unescape(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'\\'
            && i + 3 < bytes.len()
            && bytes[i + 1..i + 4]
                .iter()
                .all(|b| (b'0'..=b'7').contains(b))
        {
            let v = (bytes[i + 1] - b'0') * 64 + (bytes[i + 2] - b'0') * 8 + (bytes[i + 3] - b'0');
            out.push(v);
            i += 4;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Which job a cgroup directory must be: `job_<id>`, or on Slurm 26.05 (unless
/// `CgroupJobIdPaths=yes`) the job's SLUID (`SLURM_JOB_SLUID`, e.g. `s6M1M856ZF7500`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Job<'a> {
    /// The job id.
    pub id: u32,
    /// The job's SLUID, when Slurm gives one.
    pub sluid: Option<&'a str>,
}

impl Job<'_> {
    /// Whether a path component is this job's directory.
    fn is_dir(&self, component: &str) -> bool {
        component.strip_prefix("job_") == Some(self.id.to_string().as_str())
            || self.sluid.is_some_and(|s| !s.is_empty() && component == s)
    }

    fn describe(&self) -> String {
        match self.sluid {
            Some(s) if !s.is_empty() => {
                format!("job_{} or {}", self.id, lama_slurm::hostlist::shown(s))
            }
            _ => format!("job_{}", self.id),
        }
    }
}

/// Where a step's cpuset lives, found from one read of `/proc/self/cgroup` and
/// `/proc/self/mountinfo`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StepCgroup {
    /// 1 or 2.
    pub version: u8,
    /// The file whose *configured* CPUs confine the step's tasks: v1
    /// `.../job_J/step_S/cpuset.cpus`, v2 `.../job_J/step_S/user/cpuset.cpus` (not
    /// `.effective`: that file holds the whole node when Slurm does not constrain cores).
    pub file: PathBuf,
}

/// Finds the step's cpuset file, given `/proc/self/cgroup` and `/proc/self/mountinfo` (either
/// may be missing: defaults are the usual mount points).
pub fn locate(
    proc_cgroup: &str,
    mountinfo: Option<&str>,
    job: Job<'_>,
    step: u32,
) -> Result<StepCgroup, String> {
    let hierarchy = parse_proc_cgroup(proc_cgroup)
        .ok_or("no cpuset controller and no cgroup v2 line in /proc/self/cgroup")?;
    let (v2, path) = match &hierarchy {
        Hierarchy::V1(p) => (false, p.as_str()),
        Hierarchy::V2(p) => (true, p.as_str()),
    };
    let mount = mountinfo
        .and_then(|m| parse_mountinfo(m, v2))
        .unwrap_or_else(|| Mount {
            root: "/".to_string(),
            point: PathBuf::from(if v2 {
                "/sys/fs/cgroup"
            } else {
                "/sys/fs/cgroup/cpuset"
            }),
        });
    // Keep the path up to this step's directory; it must name this job and step.
    let job_dir = job.describe();
    let step_dir = format!("step_{step}");
    let components: Vec<&str> = path.split('/').filter(|c| !c.is_empty()).collect();
    let job_at = components
        .iter()
        .position(|c| job.is_dir(c))
        .ok_or_else(|| format!("cgroup path {path} does not name {job_dir}"))?;
    let step_at = components[job_at..]
        .iter()
        .position(|c| *c == step_dir || c.starts_with(&format!("{step_dir}+")))
        .map(|i| i + job_at)
        .ok_or_else(|| format!("cgroup path {path} does not name {step_dir} under {job_dir}"))?;
    let step_path = format!("/{}", components[..=step_at].join("/"));
    let root = mount.root.trim_end_matches('/');
    let relative = step_path
        .strip_prefix(root)
        .filter(|r| r.is_empty() || r.starts_with('/'))
        .ok_or_else(|| {
            format!(
                "cgroup path {step_path} is outside the mount's root {}",
                mount.root
            )
        })?;
    let dir = mount.point.join(relative.trim_start_matches('/'));
    Ok(if v2 {
        StepCgroup {
            version: 2,
            file: dir.join("user").join("cpuset.cpus"),
        }
    } else {
        StepCgroup {
            version: 1,
            file: dir.join("cpuset.cpus"),
        }
    })
}

impl StepCgroup {
    /// The step's CPUs as Slurm configured them, read under `root` (`/` on a node). An empty
    /// file means Slurm does not confine the step's cores (`ConstrainCores=no`, or no
    /// task/cgroup): an error, so that the caller does not take the whole node for the step's.
    pub fn cpus_in(&self, root: &Path) -> Result<CpuList, String> {
        let under_root = root.join(self.file.strip_prefix("/").unwrap_or(&self.file));
        let text = crate::bounded::read_file(&under_root, crate::bounded::MAX_SMALL_FILE)
            .map_err(|e| format!("{}: {e}", self.file.display()))?;
        let cpus = CpuList::parse(&text).map_err(|e| format!("{}: {e}", self.file.display()))?;
        if cpus.is_empty() {
            return Err(format!(
                "{} is empty: Slurm does not confine this step's cores (ConstrainCores=no or no \
                 task/cgroup)",
                self.file.display()
            ));
        }
        Ok(cpus)
    }
}

/// Finds the step's cgroup under `root` (`/` on a real node; a temporary directory in tests):
/// one read of `/proc/self/cgroup` and `/proc/self/mountinfo`.
pub fn locate_in(root: &Path, job: Job<'_>, step: u32) -> Result<StepCgroup, String> {
    let read = |p: &str| {
        crate::bounded::read_file(
            &root.join(p.trim_start_matches('/')),
            crate::bounded::MAX_SMALL_FILE,
        )
    };
    let proc_cgroup = read("/proc/self/cgroup").map_err(|e| format!("/proc/self/cgroup: {e}"))?;
    let mountinfo = read("/proc/self/mountinfo").ok();
    locate(&proc_cgroup, mountinfo.as_deref(), job, step)
}

/// The step's CPUs on this node from its cgroup, with the cgroup they came from.
pub fn step_cpus(job: Job<'_>, step: u32) -> Result<(CpuList, StepCgroup), String> {
    let cgroup = locate_in(Path::new("/"), job, step)?;
    Ok((cgroup.cpus_in(Path::new("/"))?, cgroup))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_version_follows_the_hierarchy() {
        assert_eq!(
            locate(V1_CGROUP, Some(V1_MOUNTINFO), id(42), 0)
                .unwrap()
                .version,
            1
        );
        assert_eq!(
            locate(V2_CGROUP, Some(V2_MOUNTINFO), id(42), 3)
                .unwrap()
                .version,
            2
        );
    }

    fn id(id: u32) -> Job<'static> {
        Job { id, sluid: None }
    }

    fn file(cg: &str, mi: Option<&str>, job: Job<'_>, step: u32) -> Result<PathBuf, String> {
        locate(cg, mi, job, step).map(|c| c.file)
    }

    const V1_CGROUP: &str = "12:pids:/slurm/uid_1000/job_42/step_0\n\
        5:cpuset:/slurm/uid_1000/job_42/step_0\n\
        1:name=systemd:/system.slice/slurmd.service\n";
    const V1_MOUNTINFO: &str =
        "30 25 0:26 / /sys/fs/cgroup/cpuset rw,nosuid shared:11 - cgroup cgroup rw,cpuset\n\
        31 25 0:27 / /sys/fs/cgroup/memory rw,nosuid shared:12 - cgroup cgroup rw,memory\n";
    const V2_CGROUP: &str = "0::/system.slice/slurmstepd.scope/job_42/step_3/slurm\n";
    const V2_MOUNTINFO: &str = "29 23 0:26 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:4 - cgroup2 cgroup2 rw,nsdelegate\n";

    #[test]
    fn v1_step_file() {
        assert_eq!(
            file(V1_CGROUP, Some(V1_MOUNTINFO), id(42), 0).unwrap(),
            PathBuf::from("/sys/fs/cgroup/cpuset/slurm/uid_1000/job_42/step_0/cpuset.cpus")
        );
        // Multiple-slurmd roots and a mount whose root is not the hierarchy's root.
        let cg = "5:cpuset:/docker/abc/slurm_node1/uid_0/job_7/step_2\n";
        let mi = "30 25 0:26 /docker/abc /sys/fs/cgroup/cpuset rw - cgroup cgroup rw,cpuset\n";
        assert_eq!(
            file(cg, Some(mi), id(7), 2).unwrap(),
            PathBuf::from("/sys/fs/cgroup/cpuset/slurm_node1/uid_0/job_7/step_2/cpuset.cpus")
        );
    }

    #[test]
    fn v2_step_file() {
        assert_eq!(
            file(V2_CGROUP, Some(V2_MOUNTINFO), id(42), 3).unwrap(),
            PathBuf::from(
                "/sys/fs/cgroup/system.slice/slurmstepd.scope/job_42/step_3/user/cpuset.cpus"
            )
        );
        // Without mountinfo, the usual mount point.
        assert_eq!(
            file(V2_CGROUP, None, id(42), 3).unwrap(),
            PathBuf::from(
                "/sys/fs/cgroup/system.slice/slurmstepd.scope/job_42/step_3/user/cpuset.cpus"
            )
        );
    }

    #[test]
    fn slurm_26_05_names_the_job_by_its_sluid() {
        // Seen on the 26.05 guest (CgroupJobIdPaths=no, the default).
        let cg = "0::/system.slice/vmnode_slurmstepd.scope/s6M1M856ZF7500/step_0/slurm\n";
        let sluid = Job {
            id: 16,
            sluid: Some("s6M1M856ZF7500"),
        };
        assert_eq!(
            file(cg, Some(V2_MOUNTINFO), sluid, 0).unwrap(),
            PathBuf::from(
                "/sys/fs/cgroup/system.slice/vmnode_slurmstepd.scope/s6M1M856ZF7500/step_0/user/cpuset.cpus"
            )
        );
        // Without the SLUID, or with another job's, the path is not this job's.
        let e = file(cg, Some(V2_MOUNTINFO), id(16), 0).unwrap_err();
        assert!(e.ends_with("does not name job_16"), "{e}");
        let other = Job {
            id: 16,
            sluid: Some("s6M1M856ZHPV00"),
        };
        let e = file(cg, Some(V2_MOUNTINFO), other, 0).unwrap_err();
        assert!(e.ends_with("does not name job_16 or s6M1M856ZHPV00"), "{e}");
    }

    #[test]
    fn wrong_or_missing_paths_are_explained() {
        let e = file(V1_CGROUP, Some(V1_MOUNTINFO), id(43), 0).unwrap_err();
        assert_eq!(
            e,
            "cgroup path /slurm/uid_1000/job_42/step_0 does not name job_43"
        );
        let e = file(V1_CGROUP, Some(V1_MOUNTINFO), id(42), 1).unwrap_err();
        assert!(e.contains("does not name step_1"), "{e}");
        assert!(file("garbage\n", None, id(1), 0).is_err());
        let cg = "5:cpuset:/elsewhere/job_7/step_2\n";
        let mi = "30 25 0:26 /docker/abc /sys/fs/cgroup/cpuset rw - cgroup cgroup rw,cpuset\n";
        assert!(file(cg, Some(mi), id(7), 2)
            .unwrap_err()
            .contains("outside the mount"));
    }

    #[test]
    fn mountinfo_escapes() {
        let mi = "30 25 0:26 / /sys/fs/cgroup/my\\040cpuset rw - cgroup cgroup rw,cpuset\n";
        assert_eq!(
            parse_mountinfo(mi, false).unwrap().point,
            PathBuf::from("/sys/fs/cgroup/my cpuset")
        );
    }

    fn tree(files: &[(&str, &str)]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        for (path, text) in files {
            let p = dir.path().join(path.trim_start_matches('/'));
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, text).unwrap();
        }
        dir
    }

    fn step_cpus_in(root: &Path, job: Job<'_>, step: u32) -> Result<CpuList, String> {
        locate_in(root, job, step)?.cpus_in(root)
    }

    #[test]
    fn reads_the_cpus_from_a_tree() {
        let t = tree(&[
            ("/proc/self/cgroup", V1_CGROUP),
            ("/proc/self/mountinfo", V1_MOUNTINFO),
            (
                "/sys/fs/cgroup/cpuset/slurm/uid_1000/job_42/step_0/cpuset.cpus",
                "1,3-4\n",
            ),
        ]);
        assert_eq!(
            step_cpus_in(t.path(), id(42), 0).unwrap().to_string(),
            "1,3-4"
        );
        let t = tree(&[
            ("/proc/self/cgroup", V2_CGROUP),
            ("/proc/self/mountinfo", V2_MOUNTINFO),
            (
                "/sys/fs/cgroup/system.slice/slurmstepd.scope/job_42/step_3/user/cpuset.cpus",
                "0-1\n",
            ),
        ]);
        assert_eq!(
            step_cpus_in(t.path(), id(42), 3).unwrap().to_string(),
            "0-1"
        );
        assert!(step_cpus_in(t.path(), id(43), 3).is_err());
    }

    #[test]
    fn an_unconstrained_v2_step_is_not_trusted() {
        // cgroup v2 with ConstrainCores=no (seen on the QEMU node): the controller is enabled,
        // the effective set is the whole node, the configured set is empty.
        let dir = "/sys/fs/cgroup/system.slice/slurmstepd.scope/job_42/step_3/user";
        let t = tree(&[
            ("/proc/self/cgroup", V2_CGROUP),
            ("/proc/self/mountinfo", V2_MOUNTINFO),
            (&format!("{dir}/cpuset.cpus.effective"), "0-15\n"),
            (&format!("{dir}/cpuset.cpus"), "\n"),
        ]);
        let e = step_cpus_in(t.path(), id(42), 3).unwrap_err();
        assert!(
            e.ends_with("user/cpuset.cpus is empty: Slurm does not confine this step's cores (ConstrainCores=no or no task/cgroup)"),
            "{e}"
        );
    }

    #[test]
    fn empty_missing_or_corrupt_files_are_errors() {
        let file = "/sys/fs/cgroup/cpuset/slurm/uid_1000/job_42/step_0/cpuset.cpus";
        for (content, why) in [
            (Some("\n"), "is empty"),
            (Some("0-x"), "invalid CPU list"),
            (None, "No such file"),
        ] {
            let mut files = vec![
                ("/proc/self/cgroup", V1_CGROUP),
                ("/proc/self/mountinfo", V1_MOUNTINFO),
            ];
            if let Some(c) = content {
                files.push((file, c));
            }
            let t = tree(&files);
            let e = step_cpus_in(t.path(), id(42), 0).unwrap_err();
            assert!(e.contains(why), "{e}");
        }
        let t = tree(&[]);
        assert!(step_cpus_in(t.path(), id(1), 0)
            .unwrap_err()
            .contains("/proc/self/cgroup"));
    }
}

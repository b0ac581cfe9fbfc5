//! Applying a plan written by `lama plan` (`--lama-plan`): its text travels from srun, sbatch
//! or salloc (which read the file as the user) to the step's nodes, where this node's ranks are
//! checked against the step and become [`TaskPlacement`]s.

/// The environment variable that carries a plan's text from srun/sbatch/salloc (which read the
/// file as the user) to the step's nodes, for plans of at most
/// [`lama_planfile::MAX_INLINE_PLAN_BYTES`]; removed from every task's environment.
pub const PLAN_VARIABLE: &str = "LAMA_PLAN_TEXT";

/// The environment variable that names a larger plan instead ([`PlanRef`]): each node reads
/// the file itself, as the job's user; removed from every task's environment.
pub const PLAN_FILE_VARIABLE: &str = "LAMA_PLAN_FILE";

/// Longest [`PLAN_FILE_VARIABLE`] value read (a path of up to 4,096 bytes and two numbers).
const MAX_PLAN_REF: usize = 4096 + 64;

/// A plan too large for the environment, as srun read it: its rank count, its
/// [`lama_planfile::digest`] and the file's absolute path. Written `RANKS DIGEST PATH`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlanRef {
    /// The plan's rank count.
    pub ranks: u32,
    /// The text's length and hash, as srun read it.
    pub digest: String,
    /// The file's absolute path (without symbolic links when srun resolved it).
    pub path: String,
}

impl PlanRef {
    /// The variable's value.
    pub fn encode(&self) -> String {
        format!("{} {} {}", self.ranks, self.digest, self.path)
    }

    /// A value written by [`PlanRef::encode`], or `None`.
    pub fn decode(value: &str) -> Option<PlanRef> {
        if value.len() > MAX_PLAN_REF {
            return None;
        }
        let mut parts = value.splitn(3, ' ');
        let ranks = parts.next()?.parse().ok()?;
        let digest = parts.next()?.to_string();
        let path = parts.next()?.to_string();
        path.starts_with('/').then_some(PlanRef {
            ranks,
            digest,
            path,
        })
    }

    /// The plan's text, read from its file by the calling process, if it is still the text
    /// srun read; else what differs and what to do.
    pub fn read(&self) -> Result<String, String> {
        let text = crate::bounded::read_file(
            std::path::Path::new(&self.path),
            lama_planfile::MAX_PLAN_BYTES as u64,
        )
        .map_err(|e| {
            format!(
                "cannot read the plan {} on this node as the job's user ({e}): a plan over {} \
                 KiB is read from its file by every node, so keep it on a file system all the \
                 job's nodes mount",
                self.path,
                lama_planfile::MAX_INLINE_PLAN_BYTES / 1024
            )
        })?;
        let now = lama_planfile::digest(text.as_bytes());
        if now != self.digest {
            return Err(format!(
                "the plan {} changed after srun read it (length:hash {} then, {now} now): keep \
                 the file unchanged while the job's steps run, or run srun again",
                self.path, self.digest
            ));
        }
        Ok(text)
    }
}

pub use lama_slurm::node_plan::{planned_environment, planned_tasks, StepHere};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plan_reference_reads_back_only_the_text_srun_read() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("my plan.lama");
        let text = "lama-plan 1\nranks 1\nrank 0 n1 pu 0 cpus 0\n";
        std::fs::write(&path, text).unwrap();
        let r = PlanRef {
            ranks: 1,
            digest: lama_planfile::digest(text.as_bytes()),
            path: path.to_str().unwrap().to_string(),
        };
        // A path with a space survives the variable.
        assert_eq!(PlanRef::decode(&r.encode()), Some(r.clone()));
        assert_eq!(r.read().unwrap(), text);
        for bad in ["", "1", "1 2:ab", "x 2:ab /p", "1 2:ab relative/path"] {
            assert_eq!(PlanRef::decode(bad), None, "{bad:?}");
        }
        assert_eq!(
            PlanRef::decode(&format!("1 2:ab /{}", "p".repeat(5000))),
            None
        );
        // The same length, one byte changed.
        std::fs::write(&path, text.replace("cpus 0", "cpus 1")).unwrap();
        let e = r.read().unwrap_err();
        assert!(e.contains("changed after srun read it"), "{e}");
        std::fs::remove_file(&path).unwrap();
        let e = r.read().unwrap_err();
        assert!(
            e.contains("cannot read the plan") && e.contains("all the job's nodes mount"),
            "{e}"
        );
    }
}

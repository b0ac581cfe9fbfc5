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

use lama_planfile::{NodePlan, NodeQuery};
use std::path::Path;

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

    /// The query's node's view of the plan, read from its file by the calling process in one
    /// pass and checked to be the text srun read; else what is wrong and what to do. What it
    /// costs is bounded by the step before the file is opened: a plan for another rank count
    /// than the step's (`query.total`) is refused unread, and so is a file larger than
    /// [`lama_planfile::max_plan_bytes`] of that count; what is kept grows with the node's
    /// tasks ([`lama_planfile::read_for_node`]).
    pub fn read_for_node(&self, query: &NodeQuery<'_>) -> Result<NodePlan, String> {
        let ranks = query.total.unwrap_or(self.ranks);
        if self.ranks != ranks {
            return Err(format!(
                "the plan {} is for {} ranks but the step has {ranks} tasks: launch with -n{}",
                self.path, self.ranks, self.ranks
            ));
        }
        let max = lama_planfile::max_plan_bytes(ranks);
        let file = crate::bounded::open_regular(Path::new(&self.path)).map_err(|e| {
            format!(
                "cannot read the plan {} on this node as the job's user ({e}): a plan over {} \
                 KiB is read from its file by every node, so keep it on a file system all the \
                 job's nodes mount",
                self.path,
                lama_planfile::MAX_INLINE_PLAN_BYTES / 1024
            )
        })?;
        let len = file.metadata().map(|m| m.len()).unwrap_or(u64::MAX);
        if len > max as u64 {
            return Err(format!(
                "the plan {} is {len} bytes, more than a plan of {ranks} ranks may be ({max}): \
                 write it with lama plan",
                self.path
            ));
        }
        let changed = |now: &str| {
            format!(
                "the plan {} changed after srun read it (length:hash {} then, {now} now): keep \
                 the file unchanged while the job's steps run, or run srun again",
                self.path, self.digest
            )
        };
        if !self.digest.starts_with(&format!("{len}:")) {
            return Err(changed(&format!("{len}:...")));
        }
        let (plan, now) = lama_planfile::read_for_node(std::io::BufReader::new(file), query, max)
            .map_err(|e| format!("the plan {}: {e}", self.path))?;
        if now != self.digest {
            return Err(changed(&now));
        }
        Ok(plan)
    }
}

/// What srun checks of a plan file it can read before a step of `total` tasks starts: what
/// each node will check (no node's ranks are expanded).
pub fn check_whole(plan: &PlanRef, total: u32) -> Result<(), String> {
    let query = NodeQuery {
        node: "",
        cpu_bound: 0,
        total: Some(total),
        most_here: 0,
        wanted: &[],
    };
    plan.read_for_node(&query).map(drop)
}

pub use lama_slurm::node_plan::{planned_environment, planned_tasks, StepHere};

#[cfg(test)]
mod tests {
    use super::*;

    /// n1's view, the step of `total` ranks running `most` here.
    fn n1(total: u32, most: usize) -> NodeQuery<'static> {
        NodeQuery {
            node: "n1",
            cpu_bound: 4,
            total: Some(total),
            most_here: most,
            wanted: &[0],
        }
    }

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
        let plan = r.read_for_node(&n1(1, 1)).unwrap();
        assert_eq!(plan.here.len(), 1);
        check_whole(&r, 1).unwrap();
        for bad in ["", "1", "1 2:ab", "x 2:ab /p", "1 2:ab relative/path"] {
            assert_eq!(PlanRef::decode(bad), None, "{bad:?}");
        }
        assert_eq!(
            PlanRef::decode(&format!("1 2:ab /{}", "p".repeat(5000))),
            None
        );
        // The same length, one byte changed (still a plan: a text that is not is refused
        // for what is wrong with it).
        std::fs::write(&path, text.replace("n1", "n2")).unwrap();
        let e = r.read_for_node(&n1(1, 1)).unwrap_err();
        assert!(e.contains("changed after srun read it"), "{e}");
        // Another length: refused before it is read.
        std::fs::write(&path, format!("{text}\n")).unwrap();
        let e = r.read_for_node(&n1(1, 1)).unwrap_err();
        assert!(e.contains("changed after srun read it"), "{e}");
        std::fs::remove_file(&path).unwrap();
        let e = r.read_for_node(&n1(1, 1)).unwrap_err();
        assert!(
            e.contains("cannot read the plan") && e.contains("all the job's nodes mount"),
            "{e}"
        );
    }

    #[test]
    fn a_plan_file_costs_what_the_step_is_not_what_the_file_is() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("plan");
        // 2,000 ranks on 2,000 nodes, for a step of 2 tasks whatever the reference says.
        let mut text = String::from("lama-plan 1\nranks 2000\n");
        for r in 0..2000 {
            text += &format!("rank {r} node{r} pu 0 cpus 0\n");
        }
        std::fs::write(&path, &text).unwrap();
        let honest = PlanRef {
            ranks: 2000,
            digest: lama_planfile::digest(text.as_bytes()),
            path: path.to_str().unwrap().to_string(),
        };
        // The reference's count is not the step's: refused unread (the file is gone).
        std::fs::remove_file(&path).unwrap();
        let e = honest.read_for_node(&n1(2, 2)).unwrap_err();
        assert!(
            e.contains("is for 2000 ranks but the step has 2 tasks"),
            "{e}"
        );
        assert!(check_whole(&honest, 2).unwrap_err().contains("-n2000"));
        // A forged count that matches the step: the file is too large for 2 ranks.
        let big = format!(
            "{text}{}",
            "#\n".repeat(lama_planfile::max_plan_bytes(2) / 2)
        );
        std::fs::write(&path, &big).unwrap();
        let forged = PlanRef {
            ranks: 2,
            digest: lama_planfile::digest(big.as_bytes()),
            ..honest.clone()
        };
        let e = forged.read_for_node(&n1(2, 2)).unwrap_err();
        assert!(e.contains("more than a plan of 2 ranks may be"), "{e}");
        // Small enough, but it says 2,000 ranks at its count line.
        std::fs::write(&path, &text[..2048]).unwrap();
        let short = PlanRef {
            ranks: 2,
            digest: lama_planfile::digest(&text.as_bytes()[..2048]),
            ..honest
        };
        let e = short.read_for_node(&n1(2, 2)).unwrap_err();
        assert!(
            e.contains("line 2: the plan is for 2000 ranks but the step has 2"),
            "{e}"
        );
    }
}

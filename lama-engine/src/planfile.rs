//! Plan files: where each rank of a step runs and what it is bound to, written by `lama plan`
//! and applied by the plugin's `--lama-plan=FILE`.
//!
//! ```text
//! # comments and blank lines are ignored
//! lama-plan 1
//! ranks 2
//! rank 0 node1 pu 0 cpus 0
//! rank 1 node2 pu 4 cpus 4-5
//! ```
//!
//! The first statement names the format and its version; `ranks N` follows, then exactly N
//! `rank` lines in rank order: the node's short host name, the OS index of the PU the rank is
//! mapped to, and the OS CPUs it is bound to (which contain the PU). Everything is checked; an
//! error names the line and what was expected.

use crate::cpulist::CpuList;
use std::fmt;

/// Largest plan file accepted (it travels in the step's environment).
pub const MAX_PLAN_BYTES: usize = 120 * 1024;
/// Most ranks a plan may hold.
pub const MAX_PLAN_RANKS: u32 = 1 << 16;
/// Longest node name.
const MAX_NODE_NAME: usize = 64;

/// One rank of a plan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlannedRank {
    /// The node's short host name.
    pub node: String,
    /// OS index of the mapped PU.
    pub pu: u32,
    /// OS CPUs to bind to.
    pub cpus: CpuList,
}

/// A parsed plan: one entry per rank, in rank order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlanFile {
    /// The ranks.
    pub ranks: Vec<PlannedRank>,
}

/// A plan file that cannot be used: the line (1-based; 0 for the whole file) and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {message}")]
pub struct PlanFileError {
    /// The line.
    pub line: usize,
    /// What is wrong and what was expected.
    pub message: String,
}

fn err(line: usize, message: impl Into<String>) -> PlanFileError {
    PlanFileError {
        line,
        message: message.into(),
    }
}

/// Whether a node name is safe to carry and compare (`[A-Za-z0-9._-]`, not starting with `.`
/// or `-`, at most 64 characters).
pub fn valid_node_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_NODE_NAME
        && !name.starts_with(['.', '-'])
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

impl PlanFile {
    /// Parses a plan.
    pub fn parse(text: &str) -> Result<PlanFile, PlanFileError> {
        if text.len() > MAX_PLAN_BYTES {
            return Err(err(
                0,
                format!(
                    "the plan is {} bytes; at most {MAX_PLAN_BYTES} are accepted",
                    text.len()
                ),
            ));
        }
        let mut lines = text
            .lines()
            .enumerate()
            .map(|(i, l)| (i + 1, l.trim()))
            .filter(|(_, l)| !l.is_empty() && !l.starts_with('#'));
        let (n, header) = lines
            .next()
            .ok_or_else(|| err(0, "the plan is empty; expected 'lama-plan 1'"))?;
        if header != "lama-plan 1" {
            return Err(err(
                n,
                format!("expected 'lama-plan 1' (a plan written by `lama plan`), found '{header}'"),
            ));
        }
        let (n, count) = lines
            .next()
            .ok_or_else(|| err(n, "expected 'ranks N' after the header"))?;
        let total: u32 = count
            .strip_prefix("ranks ")
            .and_then(|c| c.trim().parse().ok())
            .filter(|&c| (1..=MAX_PLAN_RANKS).contains(&c))
            .ok_or_else(|| {
                err(
                    n,
                    format!(
                        "expected 'ranks N' with N from 1 to {MAX_PLAN_RANKS}, found '{count}'"
                    ),
                )
            })?;
        let mut ranks = Vec::with_capacity(total as usize);
        for (n, line) in lines {
            let expected = ranks.len();
            if expected == total as usize {
                return Err(err(
                    n,
                    format!("more rank lines than 'ranks {total}' announced"),
                ));
            }
            let fields: Vec<&str> = line.split_whitespace().collect();
            let [kw, rank, node, pu_kw, pu, cpus_kw, cpus] = fields[..] else {
                return Err(err(
                    n,
                    format!("expected 'rank {expected} NODE pu P cpus LIST', found '{line}'"),
                ));
            };
            if kw != "rank" || pu_kw != "pu" || cpus_kw != "cpus" {
                return Err(err(
                    n,
                    format!("expected 'rank {expected} NODE pu P cpus LIST', found '{line}'"),
                ));
            }
            if rank.parse::<usize>().ok() != Some(expected) {
                return Err(err(
                    n,
                    format!("expected rank {expected} (ranks in order from 0), found '{rank}'"),
                ));
            }
            if !valid_node_name(node) {
                return Err(err(
                    n,
                    format!("'{node}' is not a node name (letters, digits, '.', '_', '-')"),
                ));
            }
            let pu: u32 = pu
                .parse()
                .map_err(|_| err(n, format!("'{pu}' is not a PU number")))?;
            let cpus = CpuList::parse(cpus).map_err(|e| err(n, e.to_string()))?;
            if !cpus.contains(pu) {
                return Err(err(
                    n,
                    format!("the binding {cpus} does not contain the mapped PU {pu}"),
                ));
            }
            ranks.push(PlannedRank {
                node: node.to_string(),
                pu,
                cpus,
            });
        }
        if ranks.len() != total as usize {
            return Err(err(
                text.lines().count(),
                format!(
                    "'ranks {total}' announced but {} rank line(s) follow",
                    ranks.len()
                ),
            ));
        }
        Ok(PlanFile { ranks })
    }

    /// The node names of the ranks, one per line: a `SLURM_HOSTFILE` for `srun -m arbitrary`.
    pub fn hostfile(&self) -> String {
        let mut s = String::new();
        for r in &self.ranks {
            s += &r.node;
            s.push('\n');
        }
        s
    }
}

impl fmt::Display for PlanFile {
    /// The plan in the file format, with a comment line first.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "# rank node, mapped PU and bound CPUs (OS indexes)")?;
        writeln!(f, "lama-plan 1")?;
        writeln!(f, "ranks {}", self.ranks.len())?;
        for (i, r) in self.ranks.iter().enumerate() {
            writeln!(f, "rank {i} {} pu {} cpus {}", r.node, r.pu, r.cpus)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const GOOD: &str = "# two ranks\nlama-plan 1\nranks 2\n\nrank 0 node1 pu 0 cpus 0\nrank 1 node2 pu 4 cpus 4-5\n";

    #[test]
    fn round_trip() {
        let p = PlanFile::parse(GOOD).unwrap();
        assert_eq!(p.ranks.len(), 2);
        assert_eq!(p.ranks[1].cpus.to_string(), "4-5");
        assert_eq!(PlanFile::parse(&p.to_string()).unwrap(), p);
        assert_eq!(p.hostfile(), "node1\nnode2\n");
    }

    #[test]
    fn errors_name_the_line() {
        for (text, line, why) in [
            ("", 0, "the plan is empty"),
            ("lama-plan 2\n", 1, "expected 'lama-plan 1'"),
            ("lama-plan 1\nranks x\n", 2, "expected 'ranks N'"),
            (
                "lama-plan 1\nranks 1\nrank 1 n pu 0 cpus 0\n",
                3,
                "expected rank 0",
            ),
            (
                "lama-plan 1\nranks 1\nrank 0 n/x pu 0 cpus 0\n",
                3,
                "not a node name",
            ),
            (
                "lama-plan 1\nranks 1\nrank 0 n pu 2 cpus 0-1\n",
                3,
                "does not contain",
            ),
            (
                "lama-plan 1\nranks 1\nrank 0 n pu 0 cpus 0-x\n",
                3,
                "invalid CPU list",
            ),
            (
                "lama-plan 1\nranks 1\nrank 0 n pu 0\n",
                3,
                "expected 'rank 0 NODE",
            ),
            (
                "lama-plan 1\nranks 2\nrank 0 n pu 0 cpus 0\n",
                3,
                "announced but 1",
            ),
            (
                "lama-plan 1\nranks 1\nrank 0 n pu 0 cpus 0\nrank 1 n pu 0 cpus 0\n",
                4,
                "more rank lines",
            ),
        ] {
            let e = PlanFile::parse(text).unwrap_err();
            assert_eq!(e.line, line, "{text:?}: {e}");
            assert!(e.message.contains(why), "{text:?}: {e}");
        }
        let big = "#".repeat(MAX_PLAN_BYTES + 1);
        assert!(PlanFile::parse(&big).unwrap_err().message.contains("bytes"));
    }

    proptest! {
        #[test]
        fn parser_never_panics(text in ".{0,300}") {
            let _ = PlanFile::parse(&text);
        }

        #[test]
        fn mutated_plans_never_panic(cut in 0usize..90, byte in any::<u8>()) {
            let mut bytes = GOOD.as_bytes().to_vec();
            let at = cut.min(bytes.len() - 1);
            bytes[at] = byte;
            let _ = PlanFile::parse(&String::from_utf8_lossy(&bytes));
        }
    }
}

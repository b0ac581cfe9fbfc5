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
//!
//! A plan of at most [`MAX_INLINE_PLAN_BYTES`] travels to the step's nodes in one environment
//! variable (`LAMA_PLAN_TEXT`; Linux limits one variable to 128 KiB); a larger one, up to
//! [`MAX_PLAN_BYTES`] (about two million ranks), is read from its file by each node, as the
//! job's user, and must be the file srun read ([`digest`]). CPU lists are checked as ranges before anything is expanded: a rank
//! binds at most [`MAX_RANK_CPUS`] CPUs, a plan [`MAX_PLAN_CPUS`] in all. A node applying a
//! plan reads it with [`PlanFile::parse_for_node`], which expands only its own ranks and refuses
//! a CPU beyond the node's before expanding it.

#![deny(missing_docs)]

use lama_engine::cpulist::CpuList;
use std::fmt;

/// Largest plan file accepted.
pub const MAX_PLAN_BYTES: usize = 64 << 20;
/// Largest plan whose text travels in the step's environment; a larger one is read from its
/// file on each node.
pub const MAX_INLINE_PLAN_BYTES: usize = 120 * 1024;
/// Most ranks a plan may hold.
pub const MAX_PLAN_RANKS: u32 = 1 << 21;
/// Most CPUs one rank may be bound to (Linux runs on at most 8,192 CPUs per node today).
pub const MAX_RANK_CPUS: u64 = 1 << 14;
/// Most CPUs all the ranks of a plan may be bound to together (64 MiB expanded).
pub const MAX_PLAN_CPUS: u64 = 1 << 24;
/// The comment line a written plan starts with.
const HEADER_COMMENT: &str = "# rank node, mapped PU and bound CPUs (OS indexes)";
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

/// A plan as one node reads it ([`PlanFile::parse_for_node`]): the rank count, the node of
/// every rank, and only this node's ranks with their CPUs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodePlan {
    /// Ranks in the whole plan (`ranks N`).
    pub total: u32,
    /// This node's ranks, ascending: the global rank and where it runs.
    pub here: Vec<(u32, PlannedRank)>,
    /// The distinct node names, in order of first appearance.
    names: Vec<String>,
    /// For each rank, its node's index in `names`.
    node_of: Vec<u32>,
}

impl NodePlan {
    /// Where global rank `rank` runs, if it is one of this node's.
    pub fn rank(&self, rank: u32) -> Option<&PlannedRank> {
        self.here
            .binary_search_by_key(&rank, |(r, _)| *r)
            .ok()
            .map(|i| &self.here[i].1)
    }

    /// The node global rank `rank` is planned on (any node's rank).
    pub fn node_of(&self, rank: u32) -> Option<&str> {
        let i = *self.node_of.get(rank as usize)?;
        self.names.get(i as usize).map(String::as_str)
    }
}

/// Which ranks' CPUs a parse expands: every rank's, or one node's with its CPU bound.
#[derive(Clone, Copy)]
enum Select<'a> {
    All,
    Node { name: &'a str, cpu_bound: u32 },
}

/// What a parse gives: every rank (`Select::All`) or one node's view.
struct Parsed {
    total: u32,
    expanded: Vec<(u32, PlannedRank)>,
    names: Vec<String>,
    node_of: Vec<u32>,
}

impl PlanFile {
    /// Parses a plan, every rank's CPUs expanded. CPU lists are checked before they are
    /// expanded: at most [`MAX_RANK_CPUS`] CPUs per rank and [`MAX_PLAN_CPUS`] in all.
    pub fn parse(text: &str) -> Result<PlanFile, PlanFileError> {
        let parsed = parse(text, Select::All)?;
        Ok(PlanFile {
            ranks: parsed.expanded.into_iter().map(|(_, r)| r).collect(),
        })
    }

    /// Parses a plan as node `node` (the node's name as the plan writes it) reads it: the
    /// header and every line are checked as by [`PlanFile::parse`], but only `node`'s ranks
    /// have their CPUs expanded, and a CPU of `node`'s numbered `cpu_bound` or above (the
    /// node's largest CPU number + 1, from its topology) is refused before anything is
    /// expanded. Memory is bounded by the text's length and `cpu_bound`.
    pub fn parse_for_node(
        text: &str,
        node: &str,
        cpu_bound: u32,
    ) -> Result<NodePlan, PlanFileError> {
        let parsed = parse(
            text,
            Select::Node {
                name: node,
                cpu_bound,
            },
        )?;
        Ok(NodePlan {
            total: parsed.total,
            here: parsed.expanded,
            names: parsed.names,
            node_of: parsed.node_of,
        })
    }

    /// How many of the first ranks fit in a plan of at most `bound` bytes written as this one
    /// is ([`fmt::Display`]): all of them when the whole plan fits.
    pub fn ranks_that_fit(&self, bound: usize) -> usize {
        let header = |ranks: usize| format!("{HEADER_COMMENT}\nlama-plan 1\nranks {ranks}\n").len();
        let mut lines = 0;
        for (i, r) in self.ranks.iter().enumerate() {
            lines += format!("rank {i} {} pu {} cpus {}\n", r.node, r.pu, r.cpus).len();
            if header(i + 1) + lines > bound {
                return i;
            }
        }
        self.ranks.len()
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

/// What a node checks a plan file against before it applies it: the text's length and its
/// 64-bit FNV-1a hash, written `LEN:HASH` (hexadecimal). Not a defence against the user (who
/// owns the file and the job) but against a file changed or replaced between srun reading it
/// and a node reading it.
pub fn digest(text: &[u8]) -> String {
    use std::hash::Hasher;
    let mut h = fnv::FnvHasher::default();
    h.write(text);
    format!("{}:{:016x}", text.len(), h.finish())
}

/// The plan's statements, checked; the CPUs of the ranks `select` names expanded.
fn parse(text: &str, select: Select<'_>) -> Result<Parsed, PlanFileError> {
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
                format!("expected 'ranks N' with N from 1 to {MAX_PLAN_RANKS}, found '{count}'"),
            )
        })?;
    let mut parsed = Parsed {
        total,
        expanded: Vec::new(),
        names: Vec::new(),
        node_of: Vec::new(),
    };
    let mut all_cpus: u64 = 0;
    for (n, line) in lines {
        let expected = parsed.node_of.len();
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
        // Checked as ranges: nothing is expanded before it is known to be small enough.
        let list = CpuList::ranges(cpus).map_err(|e| err(n, e.to_string()))?;
        // This node's CPUs first: a CPU it does not have is the clearer reason.
        let expand = match select {
            Select::All => true,
            Select::Node { name, cpu_bound } if name == node => {
                let last = list.iter().map(|&(_, b)| b).max().unwrap_or(0);
                if last >= cpu_bound {
                    let has = match cpu_bound {
                        0 => "no CPUs".to_string(),
                        b => format!("CPUs 0 to {} only", b - 1),
                    };
                    return Err(err(
                        n,
                        format!(
                            "rank {expected} is bound to CPU {last} but {node} has {has} \
                             (CPUs {cpus})"
                        ),
                    ));
                }
                true
            }
            Select::Node { .. } => false,
        };
        let count: u64 = list.iter().map(|&(a, b)| u64::from(b - a) + 1).sum();
        if count > MAX_RANK_CPUS {
            return Err(err(
                n,
                format!(
                    "rank {expected} is bound to {count} CPUs; at most {MAX_RANK_CPUS} are \
                     accepted"
                ),
            ));
        }
        all_cpus += count;
        if all_cpus > MAX_PLAN_CPUS {
            return Err(err(
                n,
                format!(
                    "the ranks up to {expected} are bound to {all_cpus} CPUs in all; at most \
                     {MAX_PLAN_CPUS} are accepted"
                ),
            ));
        }
        if !list.iter().any(|&(a, b)| (a..=b).contains(&pu)) {
            return Err(err(
                n,
                format!("the binding {cpus} does not contain the mapped PU {pu}"),
            ));
        }
        if expand {
            parsed.expanded.push((
                expected as u32,
                PlannedRank {
                    node: node.to_string(),
                    pu,
                    cpus: CpuList::from_cpus(list.iter().flat_map(|&(a, b)| a..=b)),
                },
            ));
        }
        if let Select::Node { .. } = select {
            let index = match parsed.names.iter().rposition(|m| m == node) {
                Some(i) => i,
                None => {
                    parsed.names.push(node.to_string());
                    parsed.names.len() - 1
                }
            };
            parsed.node_of.push(index as u32);
        } else {
            // Every rank is expanded: `node_of` only counts the lines.
            parsed.node_of.push(0);
        }
    }
    if parsed.node_of.len() != total as usize {
        return Err(err(
            text.lines().count(),
            format!(
                "'ranks {total}' announced but {} rank line(s) follow",
                parsed.node_of.len()
            ),
        ));
    }
    Ok(parsed)
}

impl fmt::Display for PlanFile {
    /// The plan in the file format, with a comment line first.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "{HEADER_COMMENT}")?;
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

    /// `rank R n1 pu 0 cpus 0-1048575` lines, as many as fit in 120 KiB: expanded,
    /// each line would be 4 MiB, the whole text gigabytes.
    fn huge_ranges() -> String {
        let mut lines = Vec::new();
        let mut len = 40;
        while len < MAX_INLINE_PLAN_BYTES - 64 {
            let line = format!("rank {} n1 pu 0 cpus 0-1048575\n", lines.len());
            len += line.len();
            lines.push(line);
        }
        let text = format!("lama-plan 1\nranks {}\n{}", lines.len(), lines.concat());
        assert!(text.len() <= MAX_INLINE_PLAN_BYTES && lines.len() > 3000);
        text
    }

    #[test]
    fn huge_ranges_are_refused_before_they_are_expanded() {
        let text = huge_ranges();
        let e = PlanFile::parse(&text).unwrap_err();
        assert_eq!(e.line, 3, "{e}");
        assert!(
            e.message
                .contains("rank 0 is bound to 1048576 CPUs; at most 16384 are accepted"),
            "{e}"
        );
        // Many ranges on one line, each within the limit, add up.
        let line = vec!["0-16383"; 100].join(",");
        let e = PlanFile::parse(&format!(
            "lama-plan 1\nranks 1\nrank 0 n pu 0 cpus {line}\n"
        ))
        .unwrap_err();
        assert!(e.message.contains("1638400 CPUs"), "{e}");
        // So do many ranks, each within the limit.
        let lines: String = (0..1100)
            .map(|r| format!("rank {r} n pu 0 cpus 0-16383\n"))
            .collect();
        let e = PlanFile::parse(&format!("lama-plan 1\nranks 1100\n{lines}")).unwrap_err();
        assert!(e.message.contains("in all"), "{e}");
        // CPU numbers beyond the CPU list limit are refused as before.
        let e =
            PlanFile::parse("lama-plan 1\nranks 1\nrank 0 n pu 0 cpus 0-99999999\n").unwrap_err();
        assert!(e.message.contains("larger than"), "{e}");
    }

    #[test]
    fn one_node_expands_its_own_lines_only() {
        let p = PlanFile::parse_for_node(GOOD, "node2", 8).unwrap();
        assert_eq!(p.total, 2);
        assert_eq!(
            p.here,
            [(
                1,
                PlannedRank {
                    node: "node2".into(),
                    pu: 4,
                    cpus: CpuList::from_cpus([4, 5]),
                }
            )]
        );
        assert_eq!(p.rank(1).map(|r| r.pu), Some(4));
        assert_eq!(p.rank(0), None);
        assert_eq!(p.node_of(0), Some("node1"));
        assert_eq!(p.node_of(1), Some("node2"));
        assert_eq!(p.node_of(2), None);
        // A node without ranks in the plan.
        let p = PlanFile::parse_for_node(GOOD, "node3", 8).unwrap();
        assert!(p.here.is_empty() && p.total == 2);
        // A CPU beyond this node's is refused; other nodes' CPUs are theirs to check.
        let e = PlanFile::parse_for_node(GOOD, "node2", 5).unwrap_err();
        assert_eq!(e.line, 6, "{e}");
        assert!(
            e.message
                .contains("rank 1 is bound to CPU 5 but node2 has CPUs 0 to 4 only (CPUs 4-5)"),
            "{e}"
        );
        PlanFile::parse_for_node(GOOD, "node1", 1).unwrap();
        // The header and the rank count are still checked.
        for (text, why) in [
            ("lama-plan 2\n", "expected 'lama-plan 1'"),
            (
                "lama-plan 1\nranks 3\nrank 0 n pu 0 cpus 0\n",
                "announced but 1",
            ),
            (
                "lama-plan 1\nranks 1\nrank 0 m pu 0 cpus 0-x\n",
                "invalid CPU list",
            ),
            (
                "lama-plan 1\nranks 1\nrank 0 m pu 7 cpus 0-3\n",
                "does not contain",
            ),
        ] {
            let e = PlanFile::parse_for_node(text, "n", 4).unwrap_err();
            assert!(e.message.contains(why), "{text:?}: {e}");
        }
    }

    #[test]
    fn one_node_refuses_huge_ranges_without_expanding_them() {
        let text = huge_ranges().replace(" n1 ", " n2 ");
        let e = PlanFile::parse_for_node(&text, "n2", 64).unwrap_err();
        assert_eq!(e.line, 3, "{e}");
        assert!(
            e.message
                .contains("bound to CPU 1048575 but n2 has CPUs 0 to 63"),
            "{e}"
        );
        // Another node's huge lines are refused by the same limits as the whole file's.
        let e = PlanFile::parse_for_node(&text, "n1", 64).unwrap_err();
        assert!(e.message.contains("at most 16384 are accepted"), "{e}");
    }

    #[test]
    fn ranks_that_fit_count_the_written_text() {
        let rank = |i: u32| PlannedRank {
            node: format!("node{:03}", i / 128),
            pu: i % 128,
            cpus: CpuList::from_cpus([i % 128]),
        };
        let small = PlanFile {
            ranks: (0..10).map(rank).collect(),
        };
        assert_eq!(small.ranks_that_fit(MAX_INLINE_PLAN_BYTES), 10);
        let big = PlanFile {
            ranks: (0..6000).map(rank).collect(),
        };
        let k = big.ranks_that_fit(MAX_INLINE_PLAN_BYTES);
        assert!(k < 6000);
        assert_eq!(big.ranks_that_fit(MAX_PLAN_BYTES), 6000);
        let fits = PlanFile {
            ranks: big.ranks[..k].to_vec(),
        };
        assert!(fits.to_string().len() <= MAX_INLINE_PLAN_BYTES);
        let over = PlanFile {
            ranks: big.ranks[..k + 1].to_vec(),
        };
        assert!(over.to_string().len() > MAX_INLINE_PLAN_BYTES);
    }

    proptest! {
        #[test]
        fn parser_never_panics(text in ".{0,300}") {
            let _ = PlanFile::parse(&text);
            let _ = PlanFile::parse_for_node(&text, "node1", 8);
        }

        #[test]
        fn mutated_plans_never_panic(cut in 0usize..90, byte in any::<u8>()) {
            let mut bytes = GOOD.as_bytes().to_vec();
            let at = cut.min(bytes.len() - 1);
            bytes[at] = byte;
            let text = String::from_utf8_lossy(&bytes);
            let _ = PlanFile::parse(&text);
            for bound in [0, 1, 6, 1 << 20] {
                if let Ok(p) = PlanFile::parse_for_node(&text, "node2", bound) {
                    prop_assert!(p.here.iter().all(|(_, r)| r.cpus.cpus().iter().all(|&c| c < bound)));
                }
            }
        }
    }
}

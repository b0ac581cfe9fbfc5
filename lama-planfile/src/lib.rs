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
//! plan reads it with [`PlanFile::parse_for_node`] (or [`read_for_node`], from a file in
//! pieces), in one pass: it expands only its own ranks, refuses a CPU beyond the node's before
//! expanding it, a rank count other than the step's at once and a rank beyond the node's task
//! count at once, and keeps nothing whose size the plan's writer chooses. A node checks a plan
//! file's size against [`max_plan_bytes`] of its step's count before reading it.

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

/// A plan as one node reads it ([`PlanFile::parse_for_node`]): the rank count, this node's
/// ranks with their CPUs, and where the ranks it asked about ([`NodeQuery::wanted`]) run when
/// that is another node. What it keeps grows with the node's ranks, never with the plan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodePlan {
    /// Ranks in the whole plan (`ranks N`).
    pub total: u32,
    /// This node's ranks, ascending: the global rank and where it runs.
    pub here: Vec<(u32, PlannedRank)>,
    /// The asked-about ranks the plan puts on other nodes, ascending, with their node.
    elsewhere: Vec<(u32, String)>,
}

impl NodePlan {
    /// Where global rank `rank` runs, if it is one of this node's.
    pub fn rank(&self, rank: u32) -> Option<&PlannedRank> {
        self.here
            .binary_search_by_key(&rank, |(r, _)| *r)
            .ok()
            .map(|i| &self.here[i].1)
    }

    /// The node global rank `rank` is planned on: known for this node's ranks and for the
    /// ranks the node asked about ([`NodeQuery::wanted`]).
    pub fn node_of(&self, rank: u32) -> Option<&str> {
        if let Some(r) = self.rank(rank) {
            return Some(&r.node);
        }
        self.elsewhere
            .binary_search_by_key(&rank, |(r, _)| *r)
            .ok()
            .map(|i| self.elsewhere[i].1.as_str())
    }
}

/// What one node asks of a plan ([`PlanFile::parse_for_node`]): every bound is the step's,
/// known before the plan is read, so that reading a plan costs what the step is, not what
/// the plan's writer made it.
#[derive(Debug, Clone, Copy)]
pub struct NodeQuery<'a> {
    /// The node's name as the plan writes it.
    pub node: &'a str,
    /// The node's largest CPU number + 1 (from its topology): a CPU of this node's at or
    /// above it is refused before anything is expanded.
    pub cpu_bound: u32,
    /// The step's rank count where it is known: a plan for another count is refused at its
    /// `ranks` line, before any rank line is read.
    pub total: Option<u32>,
    /// The most ranks the step runs on this node: a plan that puts more here is refused at
    /// the first rank over.
    pub most_here: usize,
    /// The global ranks started on this node (any order): for each that the plan puts on
    /// another node, that node is kept (for the error that says so).
    pub wanted: &'a [u32],
}

/// Longest line of a plan (a rank bound to 16,384 CPUs none of which are neighbours is
/// about 100 KB); a longer one is refused before it is parsed.
pub const MAX_LINE_BYTES: usize = 128 << 10;

/// The room a plan has per rank on average ([`max_plan_bytes`]): 100 times what `lama plan`
/// writes for a rank on a node of a few hundred CPUs.
pub const MAX_BYTES_PER_RANK: usize = 4 << 10;

/// The largest plan accepted for a step of `ranks` ranks: one longest line, then
/// [`MAX_BYTES_PER_RANK`] a rank, and never more than [`MAX_PLAN_BYTES`]. A node checks a
/// plan file's size against its step's count before reading it, so that a small step never
/// reads a large file.
pub fn max_plan_bytes(ranks: u32) -> usize {
    (MAX_LINE_BYTES + ranks as usize * MAX_BYTES_PER_RANK).min(MAX_PLAN_BYTES)
}

/// What a parse gives: every rank (no query) or one node's view.
struct Parsed {
    total: u32,
    expanded: Vec<(u32, PlannedRank)>,
    elsewhere: Vec<(u32, String)>,
}

impl PlanFile {
    /// Parses a plan, every rank's CPUs expanded. CPU lists are checked before they are
    /// expanded: at most [`MAX_RANK_CPUS`] CPUs per rank and [`MAX_PLAN_CPUS`] in all.
    pub fn parse(text: &str) -> Result<PlanFile, PlanFileError> {
        let parsed = parse(text, None)?;
        Ok(PlanFile {
            ranks: parsed.expanded.into_iter().map(|(_, r)| r).collect(),
        })
    }

    /// Parses a plan as one node reads it: the header and every line are checked as by
    /// [`PlanFile::parse`], in one pass and in time linear in the text, but only the
    /// query's node's ranks have their CPUs expanded, a CPU of that node's numbered
    /// `cpu_bound` or above is refused before anything is expanded, a rank count other than
    /// the step's is refused at once, and so is a rank beyond the node's `most_here`.
    /// Memory is bounded by the query, not by the text.
    pub fn parse_for_node(text: &str, query: &NodeQuery<'_>) -> Result<NodePlan, PlanFileError> {
        let parsed = parse(text, Some(query))?;
        Ok(NodePlan {
            total: parsed.total,
            here: parsed.expanded,
            elsewhere: parsed.elsewhere,
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
    let mut d = Digest::default();
    d.write(text);
    d.finish()
}

/// [`digest`] taken piece by piece, for a text read in pieces.
#[derive(Default)]
pub struct Digest {
    len: usize,
    hash: fnv::FnvHasher,
}

impl fmt::Debug for Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Digest({})", self.finish())
    }
}

impl Digest {
    /// The next piece of the text.
    pub fn write(&mut self, piece: &[u8]) {
        use std::hash::Hasher;
        self.len += piece.len();
        self.hash.write(piece);
    }

    /// The digest of the pieces so far, as [`digest`] writes it.
    pub fn finish(&self) -> String {
        use std::hash::Hasher;
        format!("{}:{:016x}", self.len, self.hash.finish())
    }
}

/// Reads a plan in pieces from `reader` as one node reads it ([`PlanFile::parse_for_node`]),
/// never holding the text whole: a line at a time (at most [`MAX_LINE_BYTES`]), at most
/// `max_bytes` in all. Returns the node's plan and the whole text's [`digest`], for the
/// caller to compare with the one it was given.
pub fn read_for_node(
    mut reader: impl std::io::BufRead,
    query: &NodeQuery<'_>,
    max_bytes: usize,
) -> Result<(NodePlan, String), PlanFileError> {
    use std::io::{BufRead, Read};
    let mut parser = Parser::new(Some(query));
    let mut digest = Digest::default();
    let mut line = Vec::new();
    for n in 1.. {
        line.clear();
        // A line over the bound is read no further: the parser refuses it by its length.
        let got = (&mut reader)
            .take(MAX_LINE_BYTES as u64 + 2)
            .read_until(b'\n', &mut line)
            .map_err(|e| err(n, format!("cannot read the plan: {e}")))?;
        if got == 0 {
            break;
        }
        digest.write(&line);
        if digest.len > max_bytes {
            return Err(err(
                n,
                format!("the plan is longer than {max_bytes} bytes, the most accepted here"),
            ));
        }
        let text = line.strip_suffix(b"\n").unwrap_or(&line);
        let text = text.strip_suffix(b"\r").unwrap_or(text);
        let text = std::str::from_utf8(text).map_err(|_| err(n, "the line is not UTF-8 text"))?;
        parser.line(n, text)?;
    }
    let parsed = parser.finish()?;
    let plan = NodePlan {
        total: parsed.total,
        here: parsed.expanded,
        elsewhere: parsed.elsewhere,
    };
    Ok((plan, digest.finish()))
}

/// User text quoted in a message: at most 60 characters of it.
fn shown(text: &str) -> String {
    match text.char_indices().nth(57) {
        Some((at, _)) if text.len() > 60 => format!("{}...", &text[..at]),
        _ => text.to_string(),
    }
}

/// The plan's statements, checked; the CPUs of every rank (no query) or of the query's
/// node's ranks expanded.
fn parse(text: &str, query: Option<&NodeQuery<'_>>) -> Result<Parsed, PlanFileError> {
    if text.len() > MAX_PLAN_BYTES {
        return Err(err(
            0,
            format!(
                "the plan is {} bytes; at most {MAX_PLAN_BYTES} are accepted",
                text.len()
            ),
        ));
    }
    let mut parser = Parser::new(query);
    for (i, line) in text.lines().enumerate() {
        parser.line(i + 1, line)?;
    }
    parser.finish()
}

/// Where a [`Parser`] is in the plan.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Stage {
    Header,
    Count,
    Ranks,
}

/// A plan read a line at a time, in one pass, for a text in memory ([`PlanFile::parse`]) or
/// read in pieces ([`PlanReader`]).
struct Parser<'q> {
    query: Option<&'q NodeQuery<'q>>,
    /// The query's wanted ranks, ascending, and how many of them are behind the current rank.
    wanted: Vec<u32>,
    wanted_at: usize,
    stage: Stage,
    total: u32,
    /// The next rank line's rank.
    next: u32,
    all_cpus: u64,
    last_line: usize,
    expanded: Vec<(u32, PlannedRank)>,
    elsewhere: Vec<(u32, String)>,
}

/// The fields of one rank line, checked.
struct RankLine<'t> {
    node: &'t str,
    pu: u32,
    cpus: &'t str,
    list: Vec<(u32, u32)>,
}

impl<'q> Parser<'q> {
    fn new(query: Option<&'q NodeQuery<'q>>) -> Self {
        let mut wanted = query.map(|q| q.wanted.to_vec()).unwrap_or_default();
        wanted.sort_unstable();
        wanted.dedup();
        Parser {
            query,
            wanted,
            wanted_at: 0,
            stage: Stage::Header,
            total: 0,
            next: 0,
            all_cpus: 0,
            last_line: 0,
            expanded: Vec::new(),
            elsewhere: Vec::new(),
        }
    }

    /// Line `n` (from 1) of the text, without its line break.
    fn line(&mut self, n: usize, raw: &str) -> Result<(), PlanFileError> {
        self.last_line = n;
        if raw.len() > MAX_LINE_BYTES {
            return Err(err(
                n,
                format!(
                    "the line is {} bytes; a plan's lines are at most {MAX_LINE_BYTES}",
                    raw.len()
                ),
            ));
        }
        let line = raw.trim();
        if line.is_empty() || line.starts_with('#') {
            return Ok(());
        }
        match self.stage {
            Stage::Header if line == "lama-plan 1" => self.stage = Stage::Count,
            Stage::Header => {
                return Err(err(
                    n,
                    format!(
                        "expected 'lama-plan 1' (a plan written by `lama plan`), found '{}'",
                        shown(line)
                    ),
                ))
            }
            Stage::Count => {
                self.total = self.count(n, line)?;
                self.stage = Stage::Ranks;
            }
            Stage::Ranks => self.rank(n, line)?,
        }
        Ok(())
    }

    /// The `ranks N` line: N, which must be the step's count where the query knows it.
    fn count(&self, n: usize, line: &str) -> Result<u32, PlanFileError> {
        let total: u32 = line
            .strip_prefix("ranks ")
            .and_then(|c| c.trim().parse().ok())
            .filter(|&c| (1..=MAX_PLAN_RANKS).contains(&c))
            .ok_or_else(|| {
                err(
                    n,
                    format!(
                        "expected 'ranks N' with N from 1 to {MAX_PLAN_RANKS}, found '{}'",
                        shown(line)
                    ),
                )
            })?;
        match self.query.and_then(|q| q.total) {
            Some(step) if step != total => Err(err(
                n,
                format!(
                    "the plan is for {total} ranks but the step has {step} tasks: launch with \
                     -n{total}"
                ),
            )),
            _ => Ok(total),
        }
    }

    /// A `rank` line: checked, expanded where it is the query's node's, its node kept where
    /// the query asked about it.
    fn rank(&mut self, n: usize, line: &str) -> Result<(), PlanFileError> {
        let expected = self.next;
        if expected == self.total {
            return Err(err(
                n,
                format!("more rank lines than 'ranks {}' announced", self.total),
            ));
        }
        let r = rank_line(n, line, expected)?;
        let mine = match self.query {
            None => true,
            Some(q) if q.node == r.node => {
                self.check_here(n, expected, &r, q)?;
                true
            }
            Some(_) => false,
        };
        self.count_cpus(n, expected, &r)?;
        if mine {
            self.expanded.push((
                expected,
                PlannedRank {
                    node: r.node.to_string(),
                    pu: r.pu,
                    cpus: CpuList::from_cpus(r.list.iter().flat_map(|&(a, b)| a..=b)),
                },
            ));
        } else {
            while self
                .wanted
                .get(self.wanted_at)
                .is_some_and(|&w| w < expected)
            {
                self.wanted_at += 1;
            }
            if self.wanted.get(self.wanted_at) == Some(&expected) {
                self.elsewhere.push((expected, r.node.to_string()));
            }
        }
        self.next += 1;
        Ok(())
    }

    /// A rank of the query's node: one more than the node runs, or a CPU it does not have, is
    /// refused before anything is expanded.
    fn check_here(
        &self,
        n: usize,
        expected: u32,
        r: &RankLine<'_>,
        q: &NodeQuery<'_>,
    ) -> Result<(), PlanFileError> {
        if self.expanded.len() == q.most_here {
            return Err(err(
                n,
                format!(
                    "the plan puts more than {} rank(s) on {}, where the step runs {} (rank \
                     {expected} is one more)",
                    q.most_here, r.node, q.most_here
                ),
            ));
        }
        let last = r.list.iter().map(|&(_, b)| b).max().unwrap_or(0);
        if last >= q.cpu_bound {
            let has = match q.cpu_bound {
                0 => "no CPUs".to_string(),
                b => format!("CPUs 0 to {} only", b - 1),
            };
            return Err(err(
                n,
                format!(
                    "rank {expected} is bound to CPU {last} but {} has {has} (CPUs {})",
                    r.node,
                    shown(r.cpus)
                ),
            ));
        }
        Ok(())
    }

    /// The rank's CPU count against the bounds per rank and per plan.
    fn count_cpus(
        &mut self,
        n: usize,
        expected: u32,
        r: &RankLine<'_>,
    ) -> Result<(), PlanFileError> {
        let count: u64 = r.list.iter().map(|&(a, b)| u64::from(b - a) + 1).sum();
        if count > MAX_RANK_CPUS {
            return Err(err(
                n,
                format!(
                    "rank {expected} is bound to {count} CPUs; at most {MAX_RANK_CPUS} are \
                     accepted"
                ),
            ));
        }
        self.all_cpus += count;
        if self.all_cpus > MAX_PLAN_CPUS {
            return Err(err(
                n,
                format!(
                    "the ranks up to {expected} are bound to {} CPUs in all; at most \
                     {MAX_PLAN_CPUS} are accepted",
                    self.all_cpus
                ),
            ));
        }
        Ok(())
    }

    /// The end of the text: every announced rank must have come.
    fn finish(self) -> Result<Parsed, PlanFileError> {
        match self.stage {
            Stage::Header => return Err(err(0, "the plan is empty; expected 'lama-plan 1'")),
            Stage::Count => return Err(err(self.last_line, "expected 'ranks N' after the header")),
            Stage::Ranks if self.next != self.total => {
                return Err(err(
                    self.last_line,
                    format!(
                        "'ranks {}' announced but {} rank line(s) follow",
                        self.total, self.next
                    ),
                ))
            }
            Stage::Ranks => {}
        }
        Ok(Parsed {
            total: self.total,
            expanded: self.expanded,
            elsewhere: self.elsewhere,
        })
    }
}

/// The fields of `rank R NODE pu P cpus LIST`, each checked, the list as ranges (nothing is
/// expanded yet).
fn rank_line(n: usize, line: &str, expected: u32) -> Result<RankLine<'_>, PlanFileError> {
    let shape = || {
        err(
            n,
            format!(
                "expected 'rank {expected} NODE pu P cpus LIST', found '{}'",
                shown(line)
            ),
        )
    };
    let mut f = line.split_whitespace();
    let (Some(kw), Some(rank), Some(node), Some(pu_kw), Some(pu), Some(cpus_kw), Some(cpus), None) = (
        f.next(),
        f.next(),
        f.next(),
        f.next(),
        f.next(),
        f.next(),
        f.next(),
        f.next(),
    ) else {
        return Err(shape());
    };
    if kw != "rank" || pu_kw != "pu" || cpus_kw != "cpus" {
        return Err(shape());
    }
    if rank.parse::<u32>().ok() != Some(expected) {
        return Err(err(
            n,
            format!(
                "expected rank {expected} (ranks in order from 0), found '{}'",
                shown(rank)
            ),
        ));
    }
    if !valid_node_name(node) {
        return Err(err(
            n,
            format!(
                "'{}' is not a node name (letters, digits, '.', '_', '-')",
                shown(node)
            ),
        ));
    }
    let pu: u32 = pu
        .parse()
        .map_err(|_| err(n, format!("'{}' is not a PU number", shown(pu))))?;
    // Checked as ranges: nothing is expanded before it is known to be small enough.
    let list = CpuList::ranges(cpus).map_err(|e| {
        err(
            n,
            format!(
                "invalid CPU list '{}': {} (expected a list like 0-3,8,10-11)",
                shown(cpus),
                shown(&e.reason)
            ),
        )
    })?;
    if !list.iter().any(|&(a, b)| (a..=b).contains(&pu)) {
        return Err(err(
            n,
            format!(
                "the binding {} does not contain the mapped PU {pu}",
                shown(cpus)
            ),
        ));
    }
    Ok(RankLine {
        node,
        pu,
        cpus,
        list,
    })
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

    /// Node `node`'s view with CPUs below `cpu_bound`, no step count, any number of ranks.
    fn for_node(text: &str, node: &str, cpu_bound: u32) -> Result<NodePlan, PlanFileError> {
        let q = NodeQuery {
            node,
            cpu_bound,
            total: None,
            most_here: usize::MAX,
            wanted: &[0, 1, 2],
        };
        PlanFile::parse_for_node(text, &q)
    }

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
        let p = for_node(GOOD, "node2", 8).unwrap();
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
        let p = for_node(GOOD, "node3", 8).unwrap();
        assert!(p.here.is_empty() && p.total == 2);
        // A CPU beyond this node's is refused; other nodes' CPUs are theirs to check.
        let e = for_node(GOOD, "node2", 5).unwrap_err();
        assert_eq!(e.line, 6, "{e}");
        assert!(
            e.message
                .contains("rank 1 is bound to CPU 5 but node2 has CPUs 0 to 4 only (CPUs 4-5)"),
            "{e}"
        );
        for_node(GOOD, "node1", 1).unwrap();
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
            let e = for_node(text, "n", 4).unwrap_err();
            assert!(e.message.contains(why), "{text:?}: {e}");
        }
    }

    #[test]
    fn one_node_refuses_huge_ranges_without_expanding_them() {
        let text = huge_ranges().replace(" n1 ", " n2 ");
        let e = for_node(&text, "n2", 64).unwrap_err();
        assert_eq!(e.line, 3, "{e}");
        assert!(
            e.message
                .contains("bound to CPU 1048575 but n2 has CPUs 0 to 63"),
            "{e}"
        );
        // Another node's huge lines are refused by the same limits as the whole file's.
        let e = for_node(&text, "n1", 64).unwrap_err();
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

    /// A plan of `ranks` ranks, rank r on node `name(r)`, each on CPU 0.
    fn plan_of(ranks: u32, name: impl Fn(u32) -> String) -> String {
        let mut text = format!("lama-plan 1\nranks {ranks}\n");
        for r in 0..ranks {
            text += &format!("rank {r} {} pu 0 cpus 0\n", name(r));
        }
        text
    }

    #[test]
    fn a_node_refuses_another_step_count_before_any_rank_line() {
        // The rank lines are never looked at: the count is wrong at line 3.
        let text = "# x\nlama-plan 1\nranks 2000000\nnot a rank line\n";
        let q = NodeQuery {
            node: "n1",
            cpu_bound: 4,
            total: Some(2),
            most_here: 2,
            wanted: &[0, 1],
        };
        let e = PlanFile::parse_for_node(text, &q).unwrap_err();
        assert_eq!(e.line, 3, "{e}");
        assert!(
            e.message
                .contains("the plan is for 2000000 ranks but the step has 2 tasks"),
            "{e}"
        );
        // Without the step's count, the same text fails at its rank line.
        assert_eq!(for_node(text, "n1", 4).unwrap_err().line, 4);
    }

    #[test]
    fn a_node_refuses_more_ranks_than_it_runs_at_the_first_one_over() {
        let text = plan_of(1000, |_| "n1".into());
        let q = NodeQuery {
            node: "n1",
            cpu_bound: 4,
            total: Some(1000),
            most_here: 2,
            wanted: &[0, 1],
        };
        let e = PlanFile::parse_for_node(&text, &q).unwrap_err();
        // Rank 2 is the third on n1, on line 5 (two header lines first).
        assert_eq!(e.line, 5, "{e}");
        assert!(
            e.message
                .contains("the plan puts more than 2 rank(s) on n1, where the step runs 2 (rank 2"),
            "{e}"
        );
    }

    #[test]
    fn a_node_keeps_only_its_ranks_and_the_nodes_of_the_ranks_it_asked_about() {
        // Every rank on a node of its own: the node keeps its one rank and the two others
        // it asked about, whatever the plan's length.
        let text = plan_of(5000, |r| format!("n{r}"));
        let q = NodeQuery {
            node: "n10",
            cpu_bound: 4,
            total: Some(5000),
            most_here: 3,
            wanted: &[11, 10, 4999],
        };
        let p = PlanFile::parse_for_node(&text, &q).unwrap();
        assert_eq!(p.here.len(), 1);
        assert_eq!(p.elsewhere, [(11, "n11".into()), (4999, "n4999".into())]);
        assert_eq!(p.node_of(10), Some("n10"));
        assert_eq!(p.node_of(4999), Some("n4999"));
        assert_eq!(p.node_of(12), None, "not asked about: not kept");
    }

    /// Quadratic before (each line's node looked up among every name seen): 40,000 distinct
    /// names took 9.5 s in a release build, and 200,000 would take minutes. Linear now.
    #[test]
    fn distinct_node_names_are_read_in_linear_time() {
        let ranks = 200_000;
        let text = plan_of(ranks, |r| format!("node{r}"));
        let q = NodeQuery {
            node: "node7",
            cpu_bound: 4,
            total: Some(ranks),
            most_here: 1,
            wanted: &[7],
        };
        let t = std::time::Instant::now();
        let p = PlanFile::parse_for_node(&text, &q).unwrap();
        assert_eq!((p.total, p.here.len()), (ranks, 1));
        let (again, d) = read_for_node(text.as_bytes(), &q, MAX_PLAN_BYTES).unwrap();
        assert_eq!((again, d), (p, digest(text.as_bytes())));
        // Both passes, in a debug build on a loaded machine, well under what quadratic takes.
        assert!(t.elapsed().as_secs() < 20, "{:?}", t.elapsed());
    }

    #[test]
    fn reading_in_pieces_is_parsing_the_whole() {
        for text in [
            GOOD,
            "lama-plan 1\r\nranks 1\r\nrank 0 node2 pu 1 cpus 0-1\r\n",
        ] {
            let q = NodeQuery {
                node: "node2",
                cpu_bound: 8,
                total: None,
                most_here: 4,
                wanted: &[0],
            };
            let whole = PlanFile::parse_for_node(text, &q).unwrap();
            let (read, d) = read_for_node(text.as_bytes(), &q, text.len()).unwrap();
            assert_eq!(read, whole);
            assert_eq!(d, digest(text.as_bytes()));
            // One byte over what the step allows.
            let e = read_for_node(text.as_bytes(), &q, text.len() - 1).unwrap_err();
            assert!(e.message.contains("longer than"), "{e}");
        }
        let q = NodeQuery {
            node: "n",
            cpu_bound: 8,
            total: None,
            most_here: 4,
            wanted: &[],
        };
        // A line longer than any plan's is not read whole, and the message quotes little.
        let long = format!(
            "lama-plan 1\nranks 1\nrank 0 n pu 0 cpus {}\n",
            "0,".repeat(1 << 20)
        );
        let e = read_for_node(long.as_bytes(), &q, MAX_PLAN_BYTES).unwrap_err();
        assert_eq!(e.line, 3, "{e}");
        assert!(e.message.contains("a plan's lines are at most"), "{e}");
        let e = read_for_node(
            &b"lama-plan 1\nranks 1\nrank 0 n pu 0 cpus \xff\n"[..],
            &q,
            100,
        )
        .unwrap_err();
        assert!(e.message.contains("not UTF-8"), "{e}");
    }

    #[test]
    fn messages_quote_at_most_a_little_of_the_line() {
        let bad = format!(
            "lama-plan 1\nranks 1\nrank 0 n pu 0 cpus 0,{}x\n",
            "1,".repeat(30_000)
        );
        let e = PlanFile::parse(&bad).unwrap_err();
        assert!(e.message.contains("invalid CPU list"), "{e}");
        assert!(e.to_string().len() < 300, "{} bytes", e.to_string().len());
        let bad = format!(
            "lama-plan 1\nranks 1\nrank 0 {} pu 0 cpus 0\n",
            "n".repeat(50_000)
        );
        assert!(PlanFile::parse(&bad).unwrap_err().to_string().len() < 300);
    }

    #[test]
    fn a_step_bounds_its_plan_size() {
        assert_eq!(max_plan_bytes(2), MAX_LINE_BYTES + 2 * MAX_BYTES_PER_RANK);
        assert_eq!(max_plan_bytes(MAX_PLAN_RANKS), MAX_PLAN_BYTES);
        // What `lama plan` writes for the largest plan fits its step's bound.
        let rank = |i: u32| PlannedRank {
            node: format!("node{:05}", i / 128),
            pu: i % 128,
            cpus: CpuList::from_cpus([i % 128, i % 128 + 128]),
        };
        let plan = PlanFile {
            ranks: (0..20_000).map(rank).collect(),
        };
        assert!(plan.to_string().len() <= max_plan_bytes(20_000));
    }

    proptest! {
        #[test]
        fn parser_never_panics(text in ".{0,300}") {
            let _ = PlanFile::parse(&text);
            let _ = for_node(&text, "node1", 8);
        }

        #[test]
        fn mutated_plans_never_panic(cut in 0usize..90, byte in any::<u8>()) {
            let mut bytes = GOOD.as_bytes().to_vec();
            let at = cut.min(bytes.len() - 1);
            bytes[at] = byte;
            let text = String::from_utf8_lossy(&bytes);
            let _ = PlanFile::parse(&text);
            for bound in [0, 1, 6, 1 << 20] {
                if let Ok(p) = for_node(&text, "node2", bound) {
                    prop_assert!(p.here.iter().all(|(_, r)| r.cpus.cpus().iter().all(|&c| c < bound)));
                }
            }
        }
    }
}

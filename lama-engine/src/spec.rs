//! What a user asks for, parsed into typed values: layouts (SPEC §2.1–2.2), binding widths
//! (§2.4), MPPR limits (§2.5), rank ordering (§2.7) and the aliases of §2.8.
//!
//! Parsing checks syntax only; whether a request fits a machine is the placement's business.

use crate::diag::{check_length, Diagnostic, Subject};
use crate::level::Level;
use std::fmt;

/// A mapping layout: levels from innermost (fastest-varying) to outermost.
///
/// Always complete: it contains `n` and `h` (appended, in that order, when the user omitted them).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Layout {
    levels: Vec<Level>,
}

/// The aliases of `--lama-map`, with the layout each stands for. Each places as Open MPI's
/// `--map-by` of the same name: round-robin over the node's objects of that kind in logical
/// order (a cache alias goes over every socket's caches before a second core of any cache:
/// `L3scbnh`, not `L3csbnh`, which would fill one socket's caches twice first).
pub const MAP_ALIASES: [(&str, &str); 8] = [
    ("hwthread", "hcsbn"),
    ("core", "csbnh"),
    ("l1cache", "L1scbnh"),
    ("l2cache", "L2scbnh"),
    ("l3cache", "L3scbnh"),
    ("numa", "Nscbnh"),
    ("socket", "scbnh"),
    ("node", "nscbh"),
];

/// The aliases of `--lama-bind`, with the width each stands for.
pub const BIND_ALIASES: [(&str, &str); 9] = [
    ("hwthread", "1h"),
    ("core", "1c"),
    ("l1cache", "1L1"),
    ("l2cache", "1L2"),
    ("l3cache", "1L3"),
    ("numa", "1N"),
    ("socket", "1s"),
    ("node", "1n"),
    ("none", "none"),
];

fn alias(table: &[(&'static str, &'static str)], name: &str) -> Option<&'static str> {
    table.iter().find(|(a, _)| *a == name).map(|(_, e)| *e)
}

/// Character offset of byte offset `byte` in `s` (inputs are usually ASCII, but carets must
/// line up for any input).
fn col(s: &str, byte: usize) -> usize {
    s[..byte].chars().count()
}

/// Reads a sequence of level tokens, reporting unknown characters with their position.
fn lex_levels(
    subject: Subject,
    input: &str,
    text: &str,
    base: usize,
) -> Result<Vec<(Level, usize, usize)>, Diagnostic> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < text.len() {
        let rest = &text[i..];
        match Level::lex(rest) {
            Some((level, len)) => {
                out.push((level, base + i, len));
                i += len;
            }
            None => {
                let c = rest.chars().next().unwrap_or(' ');
                let reason = if c == 'L' {
                    let depth: String = rest.chars().skip(1).take(1).collect();
                    if depth.is_empty() {
                        "'L' must be followed by a cache depth: L1, L2 or L3".to_string()
                    } else {
                        format!("unknown cache level 'L{depth}' (LAMA knows L1, L2 and L3)")
                    }
                } else if c.is_whitespace() {
                    "blanks are not allowed".to_string()
                } else if c.is_ascii_alphabetic() {
                    let hint = match c {
                        'S' => " (sockets are 's'; 'N' is NUMA)",
                        'H' => " (hardware threads are 'h')",
                        'C' => " (cores are 'c')",
                        'B' => " (boards are 'b')",
                        'd' => " (dies are 'D')",
                        'l' => " (caches are 'L1', 'L2', 'L3')",
                        'g' => " ('g', the GPU, may only lead a layout: gcsbnh)",
                        _ => "",
                    };
                    format!("unknown token '{c}'{hint}; tokens are case-sensitive")
                } else {
                    format!("unexpected character '{c}'")
                };
                let at = col(input, base + i);
                let len = if c == 'L' {
                    2.min(rest.chars().count())
                } else {
                    1
                };
                return Err(Diagnostic::new(subject, input, Some((at, len)), reason));
            }
        }
    }
    Ok(out)
}

/// Reads exactly one level token: `text` starts at byte `at` of `input`. `after` says what the
/// token follows ("the count", "':'") and `what` what names one level ("a binding").
fn single_level(
    subject: Subject,
    input: &str,
    text: &str,
    at: usize,
    after: &str,
    what: &str,
) -> Result<Level, Diagnostic> {
    if text.is_empty() {
        return Err(Diagnostic::new(
            subject,
            input,
            Some((col(input, at), 1)),
            format!("a level token must follow {after}"),
        ));
    }
    let tokens = lex_levels(subject, input, text, at)?;
    if let Some(&(_, extra, len)) = tokens.get(1) {
        return Err(Diagnostic::new(
            subject,
            input,
            Some((col(input, extra), len)),
            format!("{what} names exactly one level"),
        ));
    }
    Ok(tokens[0].0)
}

impl Layout {
    /// Parses a layout string (`scbnh`) or a map alias (`socket`).
    pub fn parse(input: &str) -> Result<Layout, Diagnostic> {
        check_length(Subject::Layout, input)?;
        if let Some(expansion) = alias(&MAP_ALIASES, input) {
            return Layout::parse(expansion);
        }
        if input.is_empty() {
            return Err(Diagnostic::new(
                Subject::Layout,
                input,
                None,
                "the layout is empty",
            ));
        }
        if input == "none" {
            return Err(Diagnostic::new(
                Subject::Layout,
                input,
                None,
                "'none' turns LAMA off; it is not a layout here",
            ));
        }
        let tokens = lex_levels(Subject::Layout, input, input, 0)?;
        let mut levels = Vec::with_capacity(tokens.len() + 2);
        for (i, &(level, at, len)) in tokens.iter().enumerate() {
            if let Some(&(_, first, _)) = tokens[..i].iter().find(|t| t.0 == level) {
                return Err(Diagnostic::new(
                    Subject::Layout,
                    input,
                    Some((col(input, at), len)),
                    format!(
                        "'{level}' appears twice (first at position {}); each level may be named once",
                        col(input, first) + 1
                    ),
                ));
            }
            levels.push(level);
        }
        Ok(Layout::from_levels(levels))
    }

    /// A layout from levels (innermost first), completed with `n` then `h` when missing.
    /// Repeated levels keep their first occurrence.
    pub fn from_levels(levels: impl IntoIterator<Item = Level>) -> Layout {
        let mut out: Vec<Level> = Vec::new();
        for l in levels {
            if !out.contains(&l) {
                out.push(l);
            }
        }
        for l in [Level::Node, Level::Hwthread] {
            if !out.contains(&l) {
                out.push(l);
            }
        }
        Layout { levels: out }
    }

    /// The levels, innermost (fastest-varying) first.
    pub fn levels(&self) -> &[Level] {
        &self.levels
    }

    /// Whether the layout names `level`.
    pub fn contains(&self, level: Level) -> bool {
        self.levels.contains(&level)
    }

    /// Position of the node level (0 = innermost).
    pub fn node_position(&self) -> usize {
        self.levels
            .iter()
            .position(|l| *l == Level::Node)
            .unwrap_or(self.levels.len())
    }
}

impl fmt::Display for Layout {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.levels.iter().try_for_each(|l| f.write_str(l.token()))
    }
}

/// What each process is bound to (SPEC §2.4).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Bind {
    /// No binding.
    None,
    /// `count` consecutive objects of `level`, starting at the one holding the mapped PU.
    Width {
        /// How many objects (1 or more).
        count: u32,
        /// Which level.
        level: Level,
    },
}

impl Default for Bind {
    /// `1c`, the default when only a layout is given (see [`Bind::default_for`]).
    fn default() -> Self {
        Bind::Width {
            count: 1,
            level: Level::Core,
        }
    }
}

impl Bind {
    /// The binding when only `layout` is given: `1h` for a layout whose innermost level is the
    /// hardware thread (the alias `hwthread`, `hcsbn`: consecutive ranks on one core's threads,
    /// each bound to its own, as Open MPI's `--map-by hwthread` binds to the thread), else `1c`.
    pub fn default_for(layout: &Layout) -> Bind {
        match layout.levels().first() {
            Some(Level::Hwthread) => Bind::Width {
                count: 1,
                level: Level::Hwthread,
            },
            _ => Bind::default(),
        }
    }

    /// Parses a binding width (`1c`, `2L2`, `c` = `1c`), an alias (`socket`) or `none`.
    pub fn parse(input: &str) -> Result<Bind, Diagnostic> {
        check_length(Subject::Binding, input)?;
        if input == "none" {
            return Ok(Bind::None);
        }
        if let Some(expansion) = alias(&BIND_ALIASES, input) {
            return Bind::parse(expansion);
        }
        let err = |span, reason: String| Diagnostic::new(Subject::Binding, input, span, reason);
        if input.is_empty() {
            return Err(err(None, "the binding width is empty".to_string()));
        }
        let digits = input.bytes().take_while(u8::is_ascii_digit).count();
        let count = if digits == 0 {
            1
        } else {
            input[..digits]
                .parse::<u32>()
                .ok()
                .filter(|c| *c <= 1_000_000)
                .ok_or_else(|| err(Some((0, digits)), "the count is too large".to_string()))?
        };
        if count == 0 {
            return Err(err(
                Some((0, digits)),
                "a width of 0 binds to nothing; use 'none' for no binding".to_string(),
            ));
        }
        let level = single_level(
            Subject::Binding,
            input,
            &input[digits..],
            digits,
            "the count",
            "a binding",
        )?;
        if level == Level::Node && count > 1 {
            return Err(err(
                Some((0, digits)),
                "a process cannot be bound to more than one node".to_string(),
            ));
        }
        Ok(Bind::Width { count, level })
    }
}

impl fmt::Display for Bind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Bind::None => f.write_str("none"),
            Bind::Width { count, level } => write!(f, "{count}{level}"),
        }
    }
}

/// Maximum processes per resource (SPEC §2.5): limits per level, in the order given.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct Mppr {
    limits: Vec<(u32, Level)>,
}

impl Mppr {
    /// No limits (the default; Open MPI's documented `1:c` default was never applied, and we do
    /// not apply one either).
    pub fn none() -> Self {
        Mppr::default()
    }

    /// Limits from `(count, level)` pairs; a repeated level keeps its first limit.
    pub fn from_limits(limits: impl IntoIterator<Item = (u32, Level)>) -> Self {
        let mut out: Vec<(u32, Level)> = Vec::new();
        for (n, l) in limits {
            if !out.iter().any(|(_, x)| *x == l) {
                out.push((n.max(1), l));
            }
        }
        Mppr { limits: out }
    }

    /// Parses `N:token[,N:token...]`.
    pub fn parse(input: &str) -> Result<Mppr, Diagnostic> {
        check_length(Subject::Mppr, input)?;
        let err = |span, reason: String| Diagnostic::new(Subject::Mppr, input, span, reason);
        if input.is_empty() {
            return Err(err(None, "the limit list is empty".to_string()));
        }
        let mut limits: Vec<(u32, Level)> = Vec::new();
        let mut offset = 0;
        for item in input.split(',') {
            let at = col(input, offset);
            if item.is_empty() {
                return Err(err(Some((at, 1)), "empty limit between commas".to_string()));
            }
            let Some((count, token)) = item.split_once(':') else {
                return Err(err(
                    Some((at, item.chars().count())),
                    format!("'{item}' should be <count>:<token>, like 2:c"),
                ));
            };
            let count_ok = !count.is_empty() && count.bytes().all(|b| b.is_ascii_digit());
            let n = count
                .parse::<u32>()
                .ok()
                .filter(|_| count_ok)
                .ok_or_else(|| {
                    err(
                        Some((at, count.chars().count().max(1))),
                        format!("'{count}' is not a process count"),
                    )
                })?;
            if n == 0 {
                return Err(err(
                    Some((at, count.len())),
                    "a limit of 0 allows no process at all".to_string(),
                ));
            }
            let token_at = offset + count.len() + 1;
            let level = single_level(Subject::Mppr, input, token, token_at, "':'", "each limit")?;
            if limits.iter().any(|(_, l)| *l == level) {
                return Err(err(
                    Some((col(input, token_at), token.len())),
                    format!("'{level}' is limited twice"),
                ));
            }
            limits.push((n, level));
            offset += item.len() + 1;
        }
        Ok(Mppr { limits })
    }

    /// The limits, as `(max processes, level)`.
    pub fn limits(&self) -> &[(u32, Level)] {
        &self.limits
    }

    /// Whether there is no limit.
    pub fn is_empty(&self) -> bool {
        self.limits.is_empty()
    }
}

impl fmt::Display for Mppr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.limits.is_empty() {
            return f.write_str("none");
        }
        for (i, (n, l)) in self.limits.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{n}:{l}")?;
        }
        Ok(())
    }
}

/// The memory policy of each process: none, or the NUMA nodes its CPU binding touches.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum Membind {
    /// `none`: the kernel's default policy (first touch on the local node).
    #[default]
    None,
    /// `local`: allocate only on the NUMA nodes of the binding (`MPOL_BIND`).
    Local,
    /// `preferred`: prefer those nodes, fall back to others when they are full
    /// (`MPOL_PREFERRED_MANY`, or `MPOL_PREFERRED` with the first node on older kernels).
    Preferred,
}

impl Membind {
    /// Parses `local`, `preferred` or `none`.
    pub fn parse(input: &str) -> Result<Membind, Diagnostic> {
        check_length(Subject::Membind, input)?;
        match input {
            "none" => Ok(Membind::None),
            "local" => Ok(Membind::Local),
            "preferred" => Ok(Membind::Preferred),
            _ => Err(Diagnostic::new(
                Subject::Membind,
                input,
                (!input.is_empty()).then(|| (0, input.chars().count())),
                if input.is_empty() {
                    "the memory binding is empty".to_string()
                } else {
                    format!("unknown memory binding '{input}'")
                },
            )),
        }
    }
}

impl fmt::Display for Membind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Membind::None => "none",
            Membind::Local => "local",
            Membind::Preferred => "preferred",
        })
    }
}

/// How ranks are given to placed processes (SPEC §2.7).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum Order {
    /// `n`: the k-th process placed gets rank k.
    #[default]
    Natural,
    /// `s`: ranks follow the hardware: node, then the mapped PU's logical index.
    Sequential,
}

impl Order {
    /// Parses `n` or `s`.
    pub fn parse(input: &str) -> Result<Order, Diagnostic> {
        check_length(Subject::Order, input)?;
        match input {
            "n" => Ok(Order::Natural),
            "s" => Ok(Order::Sequential),
            _ => Err(Diagnostic::new(
                Subject::Order,
                input,
                (!input.is_empty()).then(|| (0, input.chars().count())),
                if input.is_empty() {
                    "the ordering is empty".to_string()
                } else {
                    format!("unknown ordering '{input}'")
                },
            )),
        }
    }
}

impl fmt::Display for Order {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Order::Natural => "n",
            Order::Sequential => "s",
        })
    }
}

/// All nine tokens of the paper's set, for tests and documentation.
pub const PAPER_LEVELS: [Level; 9] = [
    Level::Node,
    Level::Board,
    Level::Socket,
    Level::Numa,
    Level::L3,
    Level::L2,
    Level::L1,
    Level::Core,
    Level::Hwthread,
];

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn n_then_h_are_appended() {
        assert_eq!(Layout::parse("sc").unwrap().to_string(), "scnh");
        assert_eq!(Layout::parse("hcs").unwrap().to_string(), "hcsn");
        assert_eq!(Layout::parse("nsc").unwrap().to_string(), "nsch");
        assert_eq!(Layout::parse("L3L2c").unwrap().to_string(), "L3L2cnh");
    }

    #[test]
    fn aliases_expand_to_documented_layouts() {
        for (name, expansion) in MAP_ALIASES {
            assert_eq!(
                Layout::parse(name).unwrap(),
                Layout::parse(expansion).unwrap(),
                "{name}"
            );
        }
        for (name, expansion) in BIND_ALIASES {
            assert_eq!(Bind::parse(name).unwrap(), Bind::parse(expansion).unwrap());
        }
    }

    #[test]
    fn every_permutation_of_the_paper_set_is_valid() {
        // 9! layouts; checking all of them keeps the claim honest.
        fn permute(rest: &mut Vec<Level>, done: &mut Vec<Level>, count: &mut u32) {
            if rest.is_empty() {
                let s: String = done.iter().map(|l| l.token()).collect();
                let layout = Layout::parse(&s).expect(&s);
                assert_eq!(layout.levels(), &done[..]);
                *count += 1;
                return;
            }
            for i in 0..rest.len() {
                let l = rest.remove(i);
                done.push(l);
                permute(rest, done, count);
                done.pop();
                rest.insert(i, l);
            }
        }
        let mut count = 0;
        permute(&mut PAPER_LEVELS.to_vec(), &mut Vec::new(), &mut count);
        assert_eq!(count, 362_880);
    }

    #[test]
    fn layout_errors_point_at_the_fault() {
        let d = Layout::parse("scbnx").unwrap_err();
        assert_eq!(d.span, Some((4, 1)));
        assert_eq!(d.reason, "unknown token 'x'; tokens are case-sensitive");
        let d = Layout::parse("scsh").unwrap_err();
        assert_eq!(d.span, Some((2, 1)));
        assert!(d.reason.contains("'s' appears twice (first at position 1)"));
        let d = Layout::parse("sL4c").unwrap_err();
        assert_eq!(d.span, Some((1, 2)));
        assert!(d.reason.contains("unknown cache level 'L4'"));
        assert!(Layout::parse("").unwrap_err().reason.contains("empty"));
        assert!(Layout::parse("s c").unwrap_err().reason.contains("blanks"));
        assert!(Layout::parse("Sc")
            .unwrap_err()
            .reason
            .contains("sockets are 's'"));
        assert_eq!(Layout::parse("sL").unwrap_err().span, Some((1, 1)));
        assert!(Layout::parse("none").is_err());
    }

    #[test]
    fn binding_widths() {
        let w = |count, level| Bind::Width { count, level };
        assert_eq!(Bind::parse("1c").unwrap(), w(1, Level::Core));
        assert_eq!(Bind::parse("c").unwrap(), w(1, Level::Core));
        assert_eq!(Bind::parse("12L2").unwrap(), w(12, Level::L2));
        assert_eq!(Bind::parse("1n").unwrap(), w(1, Level::Node));
        assert_eq!(Bind::parse("none").unwrap(), Bind::None);
        assert_eq!(Bind::default(), w(1, Level::Core));
        for (bad, span, reason) in [
            ("0c", Some((0, 1)), "width of 0"),
            ("2n", Some((0, 1)), "more than one node"),
            ("3q", Some((1, 1)), "unknown token 'q'"),
            ("3", Some((1, 1)), "must follow the count"),
            ("1cs", Some((2, 1)), "exactly one level"),
            ("", None, "empty"),
            ("99999999999c", Some((0, 11)), "too large"),
        ] {
            let d = Bind::parse(bad).unwrap_err();
            assert_eq!(d.span, span, "{bad}");
            assert!(d.reason.contains(reason), "{bad}: {}", d.reason);
        }
    }

    #[test]
    fn mppr_lists() {
        let m = Mppr::parse("1:c,4:s").unwrap();
        assert_eq!(m.limits(), &[(1, Level::Core), (4, Level::Socket)]);
        assert_eq!(m.to_string(), "1:c,4:s");
        for (bad, span, reason) in [
            ("a:b", Some((0, 1)), "'a' is not a process count"),
            ("1:c,", Some((4, 1)), "empty limit"),
            ("2", Some((0, 1)), "should be <count>:<token>"),
            ("0:c", Some((0, 1)), "limit of 0"),
            ("1:", Some((2, 1)), "must follow ':'"),
            ("1:c,2:x", Some((6, 1)), "unknown token 'x'"),
            ("1:c,2:c", Some((6, 1)), "limited twice"),
            ("1:cs", Some((3, 1)), "exactly one level"),
            ("-1:c", Some((0, 2)), "not a process count"),
        ] {
            let d = Mppr::parse(bad).unwrap_err();
            assert_eq!(d.span, span, "{bad}");
            assert!(d.reason.contains(reason), "{bad}: {}", d.reason);
        }
    }

    #[test]
    fn orders() {
        assert_eq!(Order::parse("n").unwrap(), Order::Natural);
        assert_eq!(Order::parse("s").unwrap(), Order::Sequential);
        assert_eq!(Order::parse("x").unwrap_err().span, Some((0, 1)));
        assert_eq!(Order::parse("").unwrap_err().span, None);
    }

    #[test]
    fn memory_bindings() {
        for m in [Membind::None, Membind::Local, Membind::Preferred] {
            assert_eq!(Membind::parse(&m.to_string()).unwrap(), m);
        }
        let e = Membind::parse("strict").unwrap_err();
        assert_eq!(
            e.to_string().lines().next().unwrap(),
            "invalid memory binding 'strict': unknown memory binding 'strict'"
        );
        assert_eq!(Membind::parse("").unwrap_err().span, None);
        assert!(Membind::parse(&"l".repeat(300)).is_err());
    }

    fn level() -> impl Strategy<Value = Level> {
        proptest::sample::select(crate::level::ALL_LEVELS.to_vec())
    }

    proptest! {
        #[test]
        fn layout_round_trips(levels in proptest::collection::vec(level(), 0..10)) {
            let layout = Layout::from_levels(levels);
            prop_assert_eq!(Layout::parse(&layout.to_string()).unwrap(), layout);
        }

        #[test]
        fn bind_round_trips(count in 1u32..64, level in level()) {
            let count = if level == Level::Node { 1 } else { count };
            let bind = Bind::Width { count, level };
            prop_assert_eq!(Bind::parse(&bind.to_string()).unwrap(), bind);
        }

        #[test]
        fn mppr_round_trips(limits in proptest::collection::vec((1u32..100, level()), 1..6)) {
            let mppr = Mppr::from_limits(limits);
            prop_assert_eq!(Mppr::parse(&mppr.to_string()).unwrap(), mppr);
        }

        #[test]
        fn parsers_never_panic(s in "\\PC{0,20}") {
            let _ = Layout::parse(&s);
            let _ = Bind::parse(&s);
            let _ = Mppr::parse(&s);
            let _ = Order::parse(&s);
        }
    }
}

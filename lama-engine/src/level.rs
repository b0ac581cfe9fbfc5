//! The levels of the LAMA model and their layout tokens (SPEC §2.1).

use std::fmt;

/// One level of the machine hierarchy that a layout can name.
///
/// The declaration order is the default nesting order, coarsest first, used only to break ties
/// when two levels cover exactly the same processing units (see [`crate::topology`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
pub enum Level {
    /// `n`: a whole node (hwloc's Machine, the root).
    Node,
    /// `b`: a board. hwloc 2 has no such object: always width 1.
    Board,
    /// `N`: a NUMA domain (hwloc NUMANode, grouped by the PUs it is local to).
    Numa,
    /// `s`: a processor socket (hwloc Package).
    Socket,
    /// `D`: a die (hwloc Die), an extension to the paper's set.
    Die,
    /// `L3`: a level-3 data or unified cache.
    L3,
    /// `L2`: a level-2 data or unified cache.
    L2,
    /// `L1`: a level-1 data or unified cache.
    L1,
    /// `c`: a core.
    Core,
    /// `h`: a hardware thread (hwloc PU).
    Hwthread,
}

/// Every level, in declaration order.
pub const ALL_LEVELS: [Level; 10] = [
    Level::Node,
    Level::Board,
    Level::Numa,
    Level::Socket,
    Level::Die,
    Level::L3,
    Level::L2,
    Level::L1,
    Level::Core,
    Level::Hwthread,
];

impl Level {
    /// The layout token of this level (`n b N s D L3 L2 L1 c h`).
    pub const fn token(self) -> &'static str {
        match self {
            Level::Node => "n",
            Level::Board => "b",
            Level::Numa => "N",
            Level::Socket => "s",
            Level::Die => "D",
            Level::L3 => "L3",
            Level::L2 => "L2",
            Level::L1 => "L1",
            Level::Core => "c",
            Level::Hwthread => "h",
        }
    }

    /// A word for people ("socket", "NUMA domain", ...).
    pub const fn name(self) -> &'static str {
        match self {
            Level::Node => "node",
            Level::Board => "board",
            Level::Numa => "NUMA domain",
            Level::Socket => "socket",
            Level::Die => "die",
            Level::L3 => "L3 cache",
            Level::L2 => "L2 cache",
            Level::L1 => "L1 cache",
            Level::Core => "core",
            Level::Hwthread => "hardware thread",
        }
    }

    /// Dense index of the level, `0..ALL_LEVELS.len()`.
    pub const fn index(self) -> usize {
        self as usize
    }

    /// Reads one token at the start of `s`; returns the level and the token's length in bytes.
    pub(crate) fn lex(s: &str) -> Option<(Level, usize)> {
        let mut chars = s.chars();
        let level = match chars.next()? {
            'n' => Level::Node,
            'b' => Level::Board,
            'N' => Level::Numa,
            's' => Level::Socket,
            'D' => Level::Die,
            'c' => Level::Core,
            'h' => Level::Hwthread,
            'L' => {
                return match chars.next() {
                    Some('1') => Some((Level::L1, 2)),
                    Some('2') => Some((Level::L2, 2)),
                    Some('3') => Some((Level::L3, 2)),
                    _ => None,
                }
            }
            _ => return None,
        };
        Some((level, 1))
    }

    /// Levels that are objects of a machine (everything but node, board and hardware thread).
    pub const fn is_object_level(self) -> bool {
        !matches!(self, Level::Node | Level::Board | Level::Hwthread)
    }
}

impl fmt::Display for Level {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.token())
    }
}

/// The tokens users may write, for diagnostics.
pub const TOKENS_HELP: &str = "n b s D N L3 L2 L1 c h";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_token_lexes_back_to_its_level() {
        for level in ALL_LEVELS {
            let token = level.token();
            assert_eq!(Level::lex(token), Some((level, token.len())), "{token}");
        }
    }

    #[test]
    fn cache_tokens_need_a_valid_depth() {
        assert_eq!(Level::lex("L4"), None);
        assert_eq!(Level::lex("L"), None);
        assert_eq!(Level::lex("l2"), None);
    }

    #[test]
    fn index_matches_position_in_all_levels() {
        for (i, level) in ALL_LEVELS.iter().enumerate() {
            assert_eq!(level.index(), i);
        }
    }
}

//! Diagnostics: errors as data, rendered the same way by the preview command and the plugin
//! (SPEC §2.10).
//!
//! A [`Diagnostic`] names what was given, where the fault is (a caret under the input), why it is
//! wrong, what is allowed and an example that works:
//!
//! ```text
//! invalid mapping layout 'scbnx': unknown token 'x'
//!   scbnx
//!       ^
//!   allowed: the tokens n b s D N L3 L2 L1 c h, each at most once; leftmost varies fastest
//!   example: scbnh (round-robin over sockets, then cores, then nodes)
//! ```

use std::fmt;

/// Longest option value accepted anywhere (plugin options, site configuration, the preview).
pub const MAX_INPUT_LEN: usize = 256;

/// What kind of value a diagnostic is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Subject {
    /// A mapping layout (`--lama-map`).
    Layout,
    /// A binding width (`--lama-bind`).
    Binding,
    /// MPPR limits (`--lama-mppr`).
    Mppr,
    /// The rank ordering (`--lama-order`).
    Order,
    /// The memory binding (`--lama-membind`).
    Membind,
}

impl Subject {
    fn noun(self) -> &'static str {
        match self {
            Subject::Layout => "mapping layout",
            Subject::Binding => "binding width",
            Subject::Mppr => "MPPR limit list",
            Subject::Order => "rank ordering",
            Subject::Membind => "memory binding",
        }
    }
}

/// A syntax error in a user-supplied value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Diagnostic {
    /// What kind of value it is.
    pub subject: Subject,
    /// The value given, made printable (control characters replaced).
    pub input: String,
    /// Where the fault is: character offset and length in `input`; `None` for the whole value.
    pub span: Option<(usize, usize)>,
    /// Why it is wrong.
    pub reason: String,
    /// What is allowed.
    pub allowed: &'static str,
    /// A value that works, with what it means.
    pub example: &'static str,
}

impl Diagnostic {
    pub(crate) fn new(
        subject: Subject,
        input: &str,
        span: Option<(usize, usize)>,
        reason: impl Into<String>,
    ) -> Self {
        let (allowed, example) = match subject {
            Subject::Layout => (
                "the tokens n b s D N L3 L2 L1 c h, each at most once, leftmost varies fastest \
                 (n and h are appended when missing); or one of hwthread core l1cache l2cache \
                 l3cache numa socket node",
                "scbnh (round-robin over sockets, then cores, then nodes, then hardware threads)",
            ),
            Subject::Binding => (
                "<count><token> with a count of 1 or more and a token of n b s D N L3 L2 L1 c h; \
                 or one of hwthread core l1cache l2cache l3cache numa socket node none",
                "1c (each process bound to the core of its mapped hardware thread)",
            ),
            Subject::Mppr => (
                "<count>:<token>[,<count>:<token>...] with a count of 1 or more, each token \
                 (n b s D N L3 L2 L1 c h) at most once",
                "1:c,4:s (at most one process per core and four per socket)",
            ),
            Subject::Order => (
                "n (natural: ranks in placement order) or s (sequential: ranks follow the hardware)",
                "s",
            ),
            Subject::Membind => (
                "local (allocate only on the NUMA nodes of the CPU binding), preferred (prefer \
                 them, fall back elsewhere when full) or none (the kernel's default policy)",
                "local",
            ),
        };
        Diagnostic {
            subject,
            input: printable(input),
            span,
            reason: reason.into(),
            allowed,
            example,
        }
    }

    /// The first line alone, for logs that want one line.
    pub fn headline(&self) -> String {
        format!(
            "invalid {} '{}': {}",
            self.subject.noun(),
            self.input,
            self.reason
        )
    }
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "{}", self.headline())?;
        if let Some((start, len)) = self.span {
            writeln!(f, "  {}", self.input)?;
            writeln!(f, "  {}{}", " ".repeat(start), "^".repeat(len.max(1)))?;
        }
        writeln!(f, "  allowed: {}", self.allowed)?;
        write!(f, "  example: {}", self.example)
    }
}

impl std::error::Error for Diagnostic {}

/// Replaces characters that could confuse a terminal; keeps one character per input character
/// so carets still line up.
fn printable(input: &str) -> String {
    input
        .chars()
        .map(|c| if c.is_control() { '?' } else { c })
        .collect()
}

/// Rejects values longer than [`MAX_INPUT_LEN`] before anything else looks at them.
pub(crate) fn check_length(subject: Subject, input: &str) -> Result<(), Diagnostic> {
    let n = input.chars().count();
    if n > MAX_INPUT_LEN {
        let shown: String = input.chars().take(40).collect();
        return Err(Diagnostic::new(
            subject,
            &format!("{shown}..."),
            None,
            format!("too long ({n} characters; at most {MAX_INPUT_LEN})"),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn caret_points_at_the_fault() {
        let d = Diagnostic::new(Subject::Order, "x", Some((0, 1)), "unknown ordering 'x'");
        let text = d.to_string();
        assert!(text.starts_with("invalid rank ordering 'x': unknown ordering 'x'\n  x\n  ^\n"));
        assert!(text.ends_with("  example: s"));
    }

    #[test]
    fn control_characters_are_not_echoed() {
        let d = Diagnostic::new(Subject::Layout, "s\x1b[2Jc", Some((1, 1)), "bad");
        assert_eq!(d.input, "s?[2Jc");
    }

    #[test]
    fn overlong_input_is_refused() {
        let long = "s".repeat(MAX_INPUT_LEN + 1);
        let d = check_length(Subject::Layout, &long).unwrap_err();
        assert!(d.reason.contains("too long (257 characters"));
        assert!(check_length(Subject::Layout, &long[1..]).is_ok());
    }
}

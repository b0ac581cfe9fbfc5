//! `--color=auto|always|never`: colours for the human-readable output (the placement picture,
//! node headings, the `lama:` of error messages). `auto` colours a terminal unless `NO_COLOR` is
//! set to a non-empty value (no-color.org) or `TERM=dumb`; `always` and `never` override both.

use std::io::IsTerminal;
use std::sync::atomic::{AtomicBool, Ordering};

/// When to colour.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum When {
    /// On a terminal, unless NO_COLOR is set or TERM=dumb.
    #[default]
    Auto,
    /// Always (also through pipes; NO_COLOR is ignored).
    Always,
    /// Never.
    Never,
}

/// Whether to colour a stream: `terminal` is whether it is one, `no_color` and `term` the
/// values of `NO_COLOR` and `TERM`.
pub fn decide(when: When, terminal: bool, no_color: Option<&str>, term: Option<&str>) -> bool {
    match when {
        When::Always => true,
        When::Never => false,
        When::Auto => terminal && no_color.is_none_or(str::is_empty) && term != Some("dumb"),
    }
}

static STDOUT: AtomicBool = AtomicBool::new(false);
static STDERR: AtomicBool = AtomicBool::new(false);

/// Decides once, for standard output and standard error, from the process's environment.
pub fn set(when: When) {
    let no_color = std::env::var("NO_COLOR").ok();
    let term = std::env::var("TERM").ok();
    let on = |terminal| decide(when, terminal, no_color.as_deref(), term.as_deref());
    STDOUT.store(on(std::io::stdout().is_terminal()), Ordering::Relaxed);
    STDERR.store(on(std::io::stderr().is_terminal()), Ordering::Relaxed);
}

/// Whether standard output is coloured.
pub fn stdout() -> bool {
    STDOUT.load(Ordering::Relaxed)
}

/// The `lama:` that starts an error message, in bold red when standard error is coloured.
pub fn error_prefix() -> &'static str {
    if STDERR.load(Ordering::Relaxed) {
        "\x1b[1;31mlama:\x1b[0m"
    } else {
        "lama:"
    }
}

const BOUND: &str = "\x1b[1;32m";
const MAPPED: &str = "\x1b[1;33m";
const DIM: &str = "\x1b[2m";
const BOLD: &str = "\x1b[1m";
const RESET: &str = "\x1b[0m";

/// A placement or topology text with colours: node headings in bold; in the pictures
/// (`[BB/..][m./--]`), bound PUs in green, mapped-only in yellow, unavailable ones dimmed.
pub fn paint(text: &str) -> String {
    let mut out = String::with_capacity(text.len() * 2);
    for line in text.split_inclusive('\n') {
        if line.starts_with("node ") {
            let body = line.trim_end_matches('\n');
            out += &format!("{BOLD}{body}{RESET}");
            out.push_str(&line[body.len()..]);
            continue;
        }
        // Pictures are the bracketed groups at the end of a row.
        let start = match line.find("  [") {
            Some(i) if line.trim_end().ends_with(']') => i + 2,
            _ => {
                out.push_str(line);
                continue;
            }
        };
        out.push_str(&line[..start]);
        for c in line[start..].chars() {
            match c {
                'B' => out += &format!("{BOUND}B{RESET}"),
                'm' => out += &format!("{MAPPED}m{RESET}"),
                '-' => out += &format!("{DIM}-{RESET}"),
                c => out.push(c),
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn auto_honours_terminal_no_color_and_term() {
        assert!(decide(When::Auto, true, None, Some("xterm")));
        assert!(!decide(When::Auto, false, None, None));
        assert!(!decide(When::Auto, true, Some("1"), None));
        assert!(
            decide(When::Auto, true, Some(""), None),
            "an empty NO_COLOR is unset"
        );
        assert!(!decide(When::Auto, true, None, Some("dumb")));
        assert!(decide(When::Always, false, Some("1"), Some("dumb")));
        assert!(!decide(When::Never, true, None, None));
    }

    #[test]
    fn paints_pictures_and_headings_only() {
        let text =
            "layout scbnh\nnode 0: pack:2\n     0  L#0 P#0    L#0-1  P#0-1  [BB/m.][--/..]\n";
        let painted = paint(text);
        assert!(painted.starts_with("layout scbnh\n\x1b[1mnode 0: pack:2\x1b[0m\n"));
        assert!(painted
            .contains("L#0-1  P#0-1  [\x1b[1;32mB\x1b[0m\x1b[1;32mB\x1b[0m/\x1b[1;33mm\x1b[0m.]"));
        assert!(painted.contains("[\x1b[2m-\x1b[0m\x1b[2m-\x1b[0m/..]"));
        // Without the escapes it is the same text.
        let plain = painted
            .replace(BOUND, "")
            .replace(MAPPED, "")
            .replace(DIM, "")
            .replace(BOLD, "")
            .replace(RESET, "");
        assert_eq!(plain, text);
    }
}

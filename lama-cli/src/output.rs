//! How `lama` writes: plain or coloured text fitted to the terminal, and which picture the
//! tables show.

use crate::{color, Failure};
use lama_engine::{render, Machine};
use std::io::Write;

/// When the tables show their picture column (`--picture`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum PictureWhen {
    Auto,
    Always,
    Compact,
    Never,
}

/// The columns of the terminal standard output is, if it is one.
pub(crate) fn terminal_columns() -> Option<usize> {
    use std::io::IsTerminal;
    if !std::io::stdout().is_terminal() {
        return None;
    }
    // SAFETY: TIOCGWINSZ writes one winsize into the struct given, which lives across the call.
    let mut size: libc::winsize = unsafe { std::mem::zeroed() };
    let ok = unsafe { libc::ioctl(libc::STDOUT_FILENO, libc::TIOCGWINSZ, &mut size) } == 0;
    if ok && size.ws_col > 0 {
        return Some(usize::from(size.ws_col));
    }
    std::env::var("COLUMNS").ok()?.trim().parse().ok()
}

/// The characters of a table row besides its picture: the five other columns at their usual
/// widths.
pub(crate) const ROW_BESIDES_PICTURE: usize = 72;

/// The picture a table would show for `machines`: full where a row of `besides` characters
/// plus the widest machine's picture fits the terminal (or there is none), as `--picture` says.
pub(crate) fn picture_for<'a>(
    when: PictureWhen,
    machines: impl IntoIterator<Item = &'a Machine>,
    besides: usize,
) -> render::PictureMode {
    show_picture(when, terminal_columns(), || {
        let widest = machines
            .into_iter()
            .map(|m| render::picture(m, &[]).chars().count())
            .max()
            .unwrap_or(0);
        besides + widest
    })
}

/// Which picture the tables show. `auto`: the full picture where a row with it fits the
/// terminal (`columns`; a row is `row()` characters, asked only then) or there is no terminal,
/// else the compact one, which names the package and cores in a few words whatever the node's
/// size; a picture is always shown.
pub(crate) fn show_picture(
    when: PictureWhen,
    columns: Option<usize>,
    row: impl FnOnce() -> usize,
) -> render::PictureMode {
    use render::PictureMode::{Compact, Full, None as NoPicture};
    match (when, columns) {
        (PictureWhen::Always, _) | (PictureWhen::Auto, None) => Full,
        (PictureWhen::Compact, _) => Compact,
        (PictureWhen::Never, _) => NoPicture,
        (PictureWhen::Auto, Some(c)) if row() <= c => Full,
        (PictureWhen::Auto, Some(_)) => Compact,
    }
}

/// Prints human-readable output, coloured when standard output is.
pub(crate) fn print_human(text: &str) -> Result<(), Failure> {
    let text = fit(text, terminal_columns());
    if color::stdout() {
        print(&color::paint(&text))
    } else {
        print(&text)
    }
}

/// `text` for a terminal of `columns`: each prose line longer than that wrapped at its words
/// (continuations indented); indented lines (table rows, lists) are left as they are, so that
/// a table the user asked to be wide (--picture always) keeps its rows.
fn fit(text: &str, columns: Option<usize>) -> String {
    let Some(w) = columns else {
        return text.to_string();
    };
    let mut out = String::with_capacity(text.len());
    for line in text.split_inclusive('\n') {
        let (body, end) = match line.strip_suffix('\n') {
            Some(b) => (b, "\n"),
            None => (line, ""),
        };
        if body.starts_with(' ') || body.chars().count() <= w {
            out.push_str(line);
        } else {
            out.push_str(&render::wrap(body, w));
            out.push_str(end);
        }
    }
    out
}

/// `lama topology`'s text for a terminal of `columns`: its picture line, when wider, folded
/// to one package a row, a package wider than a row split after a core's `/` (rows indented).
pub(crate) fn fold_pictures(text: &str, columns: Option<usize>) -> String {
    let Some(w) = columns else {
        return text.to_string();
    };
    let mut out = String::with_capacity(text.len());
    for line in text.lines() {
        match line.strip_prefix("picture: ") {
            Some(picture) if line.chars().count() > w => {
                out.push_str("picture:\n");
                for row in picture_rows(picture, w.saturating_sub(2).max(8)) {
                    out.push_str("  ");
                    out.push_str(&row);
                    out.push('\n');
                }
            }
            _ => {
                out.push_str(line);
                out.push('\n');
            }
        }
    }
    out
}

/// The rows of a picture (`[../..][../..]`) no wider than `w`: each package (`[...]`) starts
/// a row, and one wider than `w` goes on after a core's `/`.
fn picture_rows(picture: &str, w: usize) -> Vec<String> {
    let mut rows = Vec::new();
    for package in picture.split_inclusive(']') {
        let mut row = String::new();
        for piece in package.split_inclusive('/') {
            if !row.is_empty() && row.chars().count() + piece.chars().count() > w {
                rows.push(std::mem::take(&mut row));
            }
            row.push_str(piece);
        }
        if !row.is_empty() {
            rows.push(row);
        }
    }
    rows
}

pub(crate) fn print(text: &str) -> Result<(), Failure> {
    let mut out = std::io::stdout().lock();
    // A closed pipe (`lama ... | head`) is not an error worth reporting.
    let _ = out.write_all(text.as_bytes());
    let _ = out.flush();
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_full_picture_gives_way_to_the_compact_one_where_it_would_not_fit() {
        use render::PictureMode::{Compact as C, Full, None as NoPicture};
        use PictureWhen::*;
        // Into a pipe or a file (no terminal), auto keeps the full picture.
        let row = |n: usize| move || n;
        assert_eq!(show_picture(Auto, None, row(400)), Full);
        assert_eq!(show_picture(Auto, Some(400), row(400)), Full);
        assert_eq!(show_picture(Auto, Some(100), row(330)), C);
        assert_eq!(show_picture(Always, Some(100), row(330)), Full);
        assert_eq!(show_picture(Compact, None, row(10)), C);
        assert_eq!(show_picture(Never, None, row(10)), NoPicture);
    }

    #[test]
    fn a_wide_picture_is_folded_by_package_and_core() {
        let text = "levels\npicture: [BB/../../..][../../../..]\n";
        assert_eq!(fold_pictures(text, None), text);
        assert_eq!(fold_pictures(text, Some(80)), text);
        assert_eq!(
            fold_pictures(text, Some(16)),
            "levels\npicture:\n  [BB/../../..]\n  [../../../..]\n"
        );
        assert_eq!(
            fold_pictures(text, Some(10)),
            "levels\npicture:\n  [BB/../\n  ../..]\n  [../../\n  ../..]\n"
        );
    }

    #[test]
    fn prose_is_wrapped_to_the_terminal_and_tables_are_not() {
        let prose = "summary: ".to_string() + &"word ".repeat(30);
        let text = format!("{prose}\n  rank  picture  {}\nshort\n", "x".repeat(90));
        let fitted = fit(&text, Some(40));
        for line in fitted.lines().filter(|l| !l.starts_with("  rank")) {
            assert!(line.chars().count() <= 40, "{line}");
        }
        assert!(fitted.contains(&format!("  rank  picture  {}\n", "x".repeat(90))));
        assert!(fitted.ends_with("short\n"));
        assert_eq!(fit(&text, None), text);
    }
}

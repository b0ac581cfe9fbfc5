//! Slurm hostlist expressions (`node[1-3,7],login[01-02]`) expanded to node names, for
//! `--node-names`.

/// Most names one expression may expand to.
const MAX_NAMES: usize = 1 << 20;

/// One run of names in a hostlist: `prefix{i:0width$}suffix` for `i` in `lo..=hi`, or one plain
/// name (`lo == hi` and no number: `width` 0 and `plain`).
#[derive(Clone, Copy)]
struct Run<'a> {
    prefix: &'a str,
    suffix: &'a str,
    lo: u64,
    hi: u64,
    width: usize,
    plain: bool,
}

impl Run<'_> {
    /// (Saturating: `n[0-18446744073709551615]` holds one name more than a u64 counts.)
    fn len(&self) -> u64 {
        (self.hi - self.lo).saturating_add(1)
    }
    fn name(&self, k: u64) -> String {
        if self.plain {
            return self.prefix.to_string();
        }
        let (prefix, suffix, width) = (self.prefix, self.suffix, self.width);
        format!("{prefix}{:0width$}{suffix}", self.lo + k)
    }
    /// Whether `name` is one of this run's names.
    fn holds(&self, name: &str) -> bool {
        if self.plain {
            return name == self.prefix;
        }
        let Some(mid) = name
            .strip_prefix(self.prefix)
            .and_then(|r| r.strip_suffix(self.suffix))
        else {
            return false;
        };
        let Ok(i) = mid.parse::<u64>() else {
            return false;
        };
        mid.bytes().all(|b| b.is_ascii_digit())
            && (self.lo..=self.hi).contains(&i)
            && format!("{i:0w$}", w = self.width) == mid
    }
}

/// The runs of a hostlist expression, in order; `f` sees each run and says whether to go on,
/// and the whole expression is checked all the same (a list is valid or not, whatever is
/// asked of it). Nothing is expanded: memory stays that of `expr`.
fn each_run<'a>(
    expr: &'a str,
    mut f: impl FnMut(Run<'a>) -> std::ops::ControlFlow<()>,
) -> Result<(), String> {
    let bad = |why: &str| format!("invalid node list '{}': {why}", shown(expr));
    let mut done = false;
    for item in split_top(expr) {
        if item.is_empty() {
            return Err(bad("an empty name"));
        }
        let Some(open) = item.find('[') else {
            if item.contains(']') {
                return Err(bad("']' without '['"));
            }
            let run = Run {
                prefix: item,
                suffix: "",
                lo: 0,
                hi: 0,
                width: 0,
                plain: true,
            };
            done = done || f(run).is_break();
            continue;
        };
        let close = item[open..]
            .find(']')
            .map(|c| c + open)
            .ok_or_else(|| bad("'[' without ']'"))?;
        let (prefix, ranges, suffix) = (&item[..open], &item[open + 1..close], &item[close + 1..]);
        if suffix.contains('[') || suffix.contains(']') {
            return Err(bad("more than one bracket range in one name"));
        }
        for range in ranges.split(',') {
            let (lo, hi) = range.split_once('-').unwrap_or((range, range));
            let parse = |s: &str| {
                if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
                    Err(bad(&format!(
                        "'{}' is not a number or a range a-b",
                        shown(range)
                    )))
                } else {
                    s.parse::<u64>().map_err(|_| bad("a number is too large"))
                }
            };
            let (a, b) = (parse(lo)?, parse(hi)?);
            if a > b {
                return Err(bad(&format!("the range '{}' runs backwards", shown(range))));
            }
            let run = Run {
                prefix,
                suffix,
                lo: a,
                hi: b,
                width: lo.len(),
                plain: false,
            };
            done = done || f(run).is_break();
        }
    }
    Ok(())
}

/// An expression as a message shows it: whole when short, else its start and its length (a
/// job's node list can be hundreds of KB, and a user's far longer).
pub fn shown(expr: &str) -> String {
    const MAX: usize = 200;
    if expr.len() <= MAX {
        return expr.to_string();
    }
    let mut end = MAX;
    while !expr.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}... ({} bytes)", &expr[..end], expr.len())
}

/// Expands a hostlist expression: comma-separated items, each a name with at most one bracket
/// range list (`prefix[a-b,c]suffix`); zero-padded bounds keep their width. At most
/// [`MAX_NAMES`] names; where only one name or the count is wanted, [`nth`], [`count`] and
/// [`contains`] answer without expanding.
pub fn expand(expr: &str) -> Result<Vec<String>, String> {
    let mut names = Vec::new();
    let mut too_many = false;
    each_run(expr, |run| {
        if (names.len() as u64).saturating_add(run.len()) > MAX_NAMES as u64 {
            too_many = true;
            return std::ops::ControlFlow::Break(());
        }
        names.extend((0..run.len()).map(|k| run.name(k)));
        std::ops::ControlFlow::Continue(())
    })?;
    if too_many {
        return Err(format!(
            "invalid node list '{}': more than {MAX_NAMES} names",
            shown(expr)
        ));
    }
    Ok(names)
}

/// How many names an expression holds (the whole expression is checked). One range of 2^64
/// names counts as `u64::MAX`; names past what a `u64` counts in all are an error (the count
/// would otherwise disagree with [`nth`]).
pub fn count(expr: &str) -> Result<u64, String> {
    let mut n = Some(0u64);
    each_run(expr, |run| {
        n = n.and_then(|n| n.checked_add(run.len()));
        match n {
            Some(_) => std::ops::ControlFlow::Continue(()),
            None => std::ops::ControlFlow::Break(()),
        }
    })?;
    n.ok_or_else(|| {
        format!(
            "invalid node list '{}': more names than a 64-bit count holds",
            shown(expr)
        )
    })
}

/// The `index`th name (from 0), or `None` past the end, without expanding the expression.
pub fn nth(expr: &str, index: u64) -> Result<Option<String>, String> {
    let (mut left, mut found) = (index, None);
    each_run(expr, |run| {
        if left < run.len() {
            found = Some(run.name(left));
            return std::ops::ControlFlow::Break(());
        }
        left -= run.len();
        std::ops::ControlFlow::Continue(())
    })?;
    Ok(found)
}

/// Whether `name` is one of the expression's names, without expanding it.
pub fn contains(expr: &str, name: &str) -> Result<bool, String> {
    let mut found = false;
    each_run(expr, |run| {
        found = run.holds(name);
        if found {
            std::ops::ControlFlow::Break(())
        } else {
            std::ops::ControlFlow::Continue(())
        }
    })?;
    Ok(found)
}

/// Splits at commas outside brackets.
fn split_top(expr: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let (mut depth, mut start) = (0i32, 0);
    for (i, c) in expr.char_indices() {
        match c {
            '[' => depth += 1,
            ']' => depth -= 1,
            ',' if depth == 0 => {
                out.push(&expr[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(&expr[start..]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expands_slurm_hostlists() {
        assert_eq!(expand("node[1-3]").unwrap(), ["node1", "node2", "node3"]);
        assert_eq!(
            expand("n[01-02,10],login").unwrap(),
            ["n01", "n02", "n10", "login"]
        );
        assert_eq!(expand("a[1-2]-ib").unwrap(), ["a1-ib", "a2-ib"]);
        assert_eq!(expand("single").unwrap(), ["single"]);
    }

    #[test]
    fn one_name_and_the_count_without_expanding() {
        let list = "n[01-03,10],login,x[7-8]-ib";
        let all = expand(list).unwrap();
        assert_eq!(count(list).unwrap(), all.len() as u64);
        for (i, name) in all.iter().enumerate() {
            assert_eq!(nth(list, i as u64).unwrap().as_deref(), Some(name.as_str()));
            assert!(contains(list, name).unwrap(), "{name}");
        }
        assert_eq!(nth(list, all.len() as u64).unwrap(), None);
        for other in ["n1", "n04", "n003", "login2", "x9-ib", "x7", "n+1", ""] {
            assert!(!contains(list, other).unwrap(), "{other}");
        }
        // A list of a billion names with a 100 KB prefix: its last name, at once.
        let huge = format!("{}[0-999999999]", "p".repeat(100_000));
        assert_eq!(count(&huge).unwrap(), 1_000_000_000);
        let last = nth(&huge, 999_999_999).unwrap().unwrap();
        assert!(last.ends_with("999999999") && last.len() == 100_009);
        assert!(contains(&huge, &last).unwrap());
        // The widest range a u64 holds: counted (saturating), its last name found.
        let widest = "n[0-18446744073709551615]";
        assert_eq!(count(widest).unwrap(), u64::MAX);
        assert_eq!(
            nth(widest, u64::MAX - 1).unwrap().as_deref(),
            Some("n18446744073709551614")
        );
        assert!(contains(widest, "n18446744073709551615").unwrap());
        assert!(expand(widest).unwrap_err().contains("more than"));
        // Two ranges whose names sum past a u64 (found by the fuzzer: the count saturated and
        // nth then found a name at the "count"): an error.
        let two = "n[1-13001535856651592590],m[1-13001535856651592590]";
        assert!(count(two)
            .unwrap_err()
            .contains("more names than a 64-bit count holds"));
        // ...and an error that quotes it stays short.
        let bad = format!("{huge},");
        let e = nth(&bad, 0).unwrap_err();
        let size = format!("({} bytes)", bad.len());
        assert!(
            e.len() < 400 && e.contains(&size) && e.contains("an empty name"),
            "{e}"
        );
    }

    #[test]
    fn bad_lists_say_what_is_wrong() {
        for (expr, why) in [
            ("node[1-3", "'[' without ']'"),
            ("node[3-1]", "runs backwards"),
            ("node[a-b]", "is not a number"),
            ("a,,b", "an empty name"),
            ("node1]", "']' without '['"),
            ("n[1-2]x[1-2]", "more than one bracket range"),
            ("n[0-99999999]", "more than"),
        ] {
            let e = expand(expr).unwrap_err();
            assert!(e.contains(why), "{expr}: {e}");
        }
    }
}

//! Slurm hostlist expressions (`node[1-3,7],login[01-02]`) expanded to node names, for
//! `--node-names`.

/// Most names one expression may expand to.
const MAX_NAMES: usize = 1 << 20;

/// Expands a hostlist expression: comma-separated items, each a name with at most one bracket
/// range list (`prefix[a-b,c]suffix`); zero-padded bounds keep their width.
pub fn expand(expr: &str) -> Result<Vec<String>, String> {
    let mut names = Vec::new();
    let bad = |why: &str| format!("invalid node list '{expr}': {why}");
    for item in split_top(expr) {
        if item.is_empty() {
            return Err(bad("an empty name"));
        }
        let Some(open) = item.find('[') else {
            if item.contains(']') {
                return Err(bad("']' without '['"));
            }
            names.push(item.to_string());
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
            let width = lo.len();
            let parse = |s: &str| {
                if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
                    Err(bad(&format!("'{range}' is not a number or a range a-b")))
                } else {
                    s.parse::<u64>().map_err(|_| bad("a number is too large"))
                }
            };
            let (a, b) = (parse(lo)?, parse(hi)?);
            if a > b {
                return Err(bad(&format!("the range '{range}' runs backwards")));
            }
            for i in a..=b {
                if names.len() >= MAX_NAMES {
                    return Err(bad(&format!("more than {MAX_NAMES} names")));
                }
                names.push(format!("{prefix}{i:0width$}{suffix}"));
            }
        }
    }
    Ok(names)
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

//! Communication matrices: how much each pair of ranks exchanges.
//!
//! Two text formats, `#` starting a comment:
//! - dense: one row per line, whitespace-separated volumes, a square matrix (the format of
//!   TreeMatch and of hwloc's netloc tools);
//! - sparse: one `i j volume` triple per line, ranks counted from 0.
//!
//! Volumes are finite and not negative. The matrix is made symmetric (M + Mᵀ): what i sends to
//! j and what j sends to i both load the pair. The diagonal (a rank talking to itself) is
//! ignored.

use std::collections::HashMap;

/// Most ranks a matrix may describe.
pub const MAX_RANKS: u32 = 1 << 20;

/// Largest total volume a matrix may hold: volume × the largest distance must stay finite.
pub const MAX_TOTAL_VOLUME: f64 = 1e300;

/// Most characters of an input token quoted in a message.
const WINDOW: usize = 32;

/// A token as a message quotes it: `'token'` when short, else its first characters and its
/// length, `'1111…' (4000 characters)` (a long token is never printed whole).
pub fn window(token: &str) -> String {
    let n = token.chars().count();
    if n <= WINDOW {
        format!("'{token}'")
    } else {
        let head: String = token.chars().take(WINDOW).collect();
        format!("'{head}…' ({n} characters)")
    }
}

/// Which format a matrix file is in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// Dense when the first row has as many values as there are rows, else sparse.
    Auto,
    /// A square matrix, one row per line.
    Dense,
    /// `i j volume` triples.
    Sparse,
}

/// A symmetric communication matrix: the volume of every pair of ranks that talk.
#[derive(Debug, Clone, PartialEq)]
pub struct CommMatrix {
    n: u32,
    /// `(i, j, volume)` with `i < j`, volume > 0, sorted, each pair once.
    pairs: Vec<(u32, u32, f64)>,
}

/// A matrix that cannot be used: the line (1-based; 0 for the whole input) and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {message}")]
pub struct MatrixError {
    /// The line.
    pub line: usize,
    /// What is wrong and what was expected.
    pub message: String,
}

fn err(line: usize, message: impl Into<String>) -> MatrixError {
    MatrixError {
        line,
        message: message.into(),
    }
}

fn volume(line: usize, token: &str) -> Result<f64, MatrixError> {
    let v: f64 = token.parse().map_err(|_| {
        err(
            line,
            format!("'{token}' is not a number; volumes are numbers such as 12 or 1.5e3"),
        )
    })?;
    if !v.is_finite() {
        return Err(err(line, format!("'{token}' is not a finite volume")));
    }
    if v < 0.0 {
        return Err(err(
            line,
            format!("'{token}' is negative; volumes are 0 or more"),
        ));
    }
    Ok(v)
}

impl CommMatrix {
    /// A matrix from `(i, j, volume)` entries (any order, repeats added up, made symmetric).
    pub fn from_entries(n: u32, entries: impl IntoIterator<Item = (u32, u32, f64)>) -> Self {
        let mut sum: HashMap<(u32, u32), f64> = HashMap::new();
        for (i, j, v) in entries {
            if i == j || v <= 0.0 || i >= n || j >= n {
                continue;
            }
            *sum.entry((i.min(j), i.max(j))).or_insert(0.0) += v;
        }
        let mut pairs: Vec<(u32, u32, f64)> =
            sum.into_iter().map(|((i, j), v)| (i, j, v)).collect();
        pairs.sort_by_key(|a| (a.0, a.1));
        CommMatrix { n, pairs }
    }

    /// Parses a matrix. `np`, when given, is the number of ranks the matrix must describe.
    pub fn parse(text: &str, format: Format, np: Option<u32>) -> Result<CommMatrix, MatrixError> {
        let rows: Vec<(usize, Vec<&str>)> = text
            .lines()
            .enumerate()
            .map(|(i, l)| {
                (
                    i + 1,
                    l.split('#')
                        .next()
                        .unwrap_or("")
                        .split_whitespace()
                        .collect(),
                )
            })
            .filter(|(_, t): &(usize, Vec<&str>)| !t.is_empty())
            .collect();
        let Some((_, first)) = rows.first() else {
            return Err(err(
                0,
                "the matrix is empty: expected a square matrix or 'i j volume' lines",
            ));
        };
        let format = match format {
            Format::Auto if first.len() == rows.len() => Format::Dense,
            Format::Auto if first.len() == 3 => Format::Sparse,
            Format::Auto => Format::Dense,
            f => f,
        };
        let matrix = match format {
            Format::Sparse => Self::sparse(&rows, np)?,
            _ => Self::dense(&rows)?,
        };
        if let Some(np) = np {
            if matrix.n != np {
                return Err(err(
                    0,
                    format!(
                        "the matrix describes {} ranks but --np is {np}; give one row and column \
                         per rank",
                        matrix.n
                    ),
                ));
            }
        }
        Ok(matrix)
    }

    fn dense(rows: &[(usize, Vec<&str>)]) -> Result<CommMatrix, MatrixError> {
        let n = rows.len();
        if n as u64 > u64::from(MAX_RANKS) {
            return Err(err(0, format!("{n} rows: at most {MAX_RANKS} ranks")));
        }
        let mut entries = Vec::new();
        for (i, (line, tokens)) in rows.iter().enumerate() {
            if tokens.len() != n {
                return Err(err(
                    *line,
                    format!(
                        "row {i} has {} values; a dense matrix is square: {n} rows of {n} values",
                        tokens.len()
                    ),
                ));
            }
            for (j, t) in tokens.iter().enumerate() {
                let v = volume(*line, t)?;
                if v > 0.0 {
                    entries.push((i as u32, j as u32, v));
                }
            }
        }
        Ok(CommMatrix::from_entries(n as u32, entries))
    }

    fn sparse(rows: &[(usize, Vec<&str>)], np: Option<u32>) -> Result<CommMatrix, MatrixError> {
        let mut entries = Vec::with_capacity(rows.len());
        let mut max = 0u32;
        for (line, tokens) in rows {
            let [i, j, v] = tokens[..] else {
                return Err(err(
                    *line,
                    format!("expected 'i j volume', found {} value(s)", tokens.len()),
                ));
            };
            let rank = |t: &str| -> Result<u32, MatrixError> {
                let r: u32 = t.parse().map_err(|_| {
                    err(
                        *line,
                        format!("'{t}' is not a rank (a whole number from 0)"),
                    )
                })?;
                if r >= MAX_RANKS || np.is_some_and(|np| r >= np) {
                    return Err(err(
                        *line,
                        format!(
                            "rank {r} is out of range: ranks go from 0 to {}",
                            np.unwrap_or(MAX_RANKS) - 1
                        ),
                    ));
                }
                Ok(r)
            };
            let (i, j, v) = (rank(i)?, rank(j)?, volume(*line, v)?);
            max = max.max(i).max(j);
            entries.push((i, j, v));
        }
        Ok(CommMatrix::from_entries(np.unwrap_or(max + 1), entries))
    }

    /// Refuses a total volume that is not finite or above [`MAX_TOTAL_VOLUME`].
    pub fn checked_total(total: f64) -> Result<(), String> {
        if total.is_finite() && total <= MAX_TOTAL_VOLUME {
            Ok(())
        } else {
            Err(format!(
                "the volumes add up to {total:e}, more than the {MAX_TOTAL_VOLUME:e} this model \
                 accepts: scale them down (only their ratios matter)"
            ))
        }
    }

    /// How many ranks.
    pub fn ranks(&self) -> u32 {
        self.n
    }

    /// The pairs that talk: `(i, j, volume)` with `i < j`.
    pub fn pairs(&self) -> &[(u32, u32, f64)] {
        &self.pairs
    }

    /// Total volume.
    pub fn total(&self) -> f64 {
        self.pairs.iter().map(|p| p.2).sum()
    }
}

/// Matrices of common communication patterns, for tests, benchmarks and examples.
pub mod patterns {
    use super::CommMatrix;

    /// Each rank talks to the next, the last to the first.
    pub fn ring(n: u32) -> CommMatrix {
        CommMatrix::from_entries(n, (0..n).map(|i| (i, (i + 1) % n, 1.0)))
    }

    /// A `x` × `y` grid, each rank talking to its four neighbours (no wrap-around).
    pub fn stencil_2d(x: u32, y: u32) -> CommMatrix {
        let id = |i: u32, j: u32| j * x + i;
        let mut e = Vec::new();
        for j in 0..y {
            for i in 0..x {
                if i + 1 < x {
                    e.push((id(i, j), id(i + 1, j), 1.0));
                }
                if j + 1 < y {
                    e.push((id(i, j), id(i, j + 1), 1.0));
                }
            }
        }
        CommMatrix::from_entries(x * y, e)
    }

    /// A `x` × `y` × `z` grid, six neighbours.
    pub fn stencil_3d(x: u32, y: u32, z: u32) -> CommMatrix {
        let id = |i: u32, j: u32, k: u32| (k * y + j) * x + i;
        let mut e = Vec::new();
        for k in 0..z {
            for j in 0..y {
                for i in 0..x {
                    if i + 1 < x {
                        e.push((id(i, j, k), id(i + 1, j, k), 1.0));
                    }
                    if j + 1 < y {
                        e.push((id(i, j, k), id(i, j + 1, k), 1.0));
                    }
                    if k + 1 < z {
                        e.push((id(i, j, k), id(i, j, k + 1), 1.0));
                    }
                }
            }
        }
        CommMatrix::from_entries(x * y * z, e)
    }

    /// Every rank talks to every other, equally.
    pub fn all_to_all(n: u32) -> CommMatrix {
        CommMatrix::from_entries(n, (0..n).flat_map(|i| (i + 1..n).map(move |j| (i, j, 1.0))))
    }

    /// Groups of `group` ranks, scattered over the rank numbers by a fixed permutation, that
    /// talk a lot inside the group (volume 10) and a little to random others (volume 1).
    pub fn clustered(n: u32, group: u32, seed: u64) -> CommMatrix {
        let mut state = seed | 1;
        let mut next = move || {
            // xorshift64*: deterministic, good enough to scatter ranks.
            state ^= state >> 12;
            state ^= state << 25;
            state ^= state >> 27;
            state.wrapping_mul(0x2545_f491_4f6c_dd1d)
        };
        let mut perm: Vec<u32> = (0..n).collect();
        for i in (1..n as usize).rev() {
            perm.swap(i, (next() % (i as u64 + 1)) as usize);
        }
        let group = group.max(1);
        let mut e = Vec::new();
        for g in perm.chunks(group as usize) {
            for a in 0..g.len() {
                for b in a + 1..g.len() {
                    e.push((g[a], g[b], 10.0));
                }
            }
        }
        for i in 0..n {
            e.push((i, (next() % u64::from(n)) as u32, 1.0));
        }
        CommMatrix::from_entries(n, e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn dense_is_symmetrised() {
        let m =
            CommMatrix::parse("# 3 ranks\n0 5 0\n1 0 0\n0 0 7\n", Format::Auto, Some(3)).unwrap();
        assert_eq!(m.pairs(), [(0, 1, 6.0)]);
        assert_eq!(m.ranks(), 3);
    }

    #[test]
    fn sparse_triples_add_up() {
        let text = "0 1 2\n1 0 3 # back\n2 3 1.5\n3 3 9\n";
        let m = CommMatrix::parse(text, Format::Auto, Some(4)).unwrap();
        assert_eq!(m.pairs(), [(0, 1, 5.0), (2, 3, 1.5)]);
        // Without --np the largest rank decides.
        assert_eq!(
            CommMatrix::parse(text, Format::Sparse, None)
                .unwrap()
                .ranks(),
            4
        );
    }

    #[test]
    fn bad_input_is_refused_with_its_line() {
        for (text, format, np, line, why) in [
            ("", Format::Auto, None, 0, "empty"),
            (
                "0 1\n1 0 2\n",
                Format::Dense,
                None,
                2,
                "a dense matrix is square",
            ),
            ("0 -1\n1 0\n", Format::Auto, None, 1, "negative"),
            ("0 NaN\n1 0\n", Format::Auto, None, 1, "not a finite volume"),
            ("0 x\n1 0\n", Format::Auto, None, 1, "not a number"),
            (
                "0 1\n1 0\n",
                Format::Auto,
                Some(3),
                0,
                "describes 2 ranks but --np is 3",
            ),
            (
                "0 1 1\n0 5 1\n",
                Format::Sparse,
                Some(4),
                2,
                "rank 5 is out of range",
            ),
            (
                "0 1 1\n0 1\n",
                Format::Sparse,
                None,
                2,
                "expected 'i j volume'",
            ),
            ("0 -1 1\n", Format::Sparse, None, 1, "not a rank"),
        ] {
            let e = CommMatrix::parse(text, format, np).unwrap_err();
            assert_eq!(e.line, line, "{text:?}: {e}");
            assert!(e.message.contains(why), "{text:?}: {e}");
        }
    }

    #[test]
    fn patterns_have_the_expected_edges() {
        assert_eq!(patterns::ring(4).pairs().len(), 4);
        assert_eq!(patterns::stencil_2d(3, 2).pairs().len(), 7);
        assert_eq!(patterns::stencil_3d(2, 2, 2).pairs().len(), 12);
        assert_eq!(patterns::all_to_all(5).pairs().len(), 10);
        let c = patterns::clustered(16, 4, 7);
        assert!(c.pairs().iter().filter(|p| p.2 >= 10.0).count() >= 4 * 6);
    }

    proptest! {
        #[test]
        fn parser_never_panics(text in "[0-9 .e#x\\-\\n]{0,200}") {
            let _ = CommMatrix::parse(&text, Format::Auto, None);
            let _ = CommMatrix::parse(&text, Format::Sparse, Some(5));
        }
    }
}

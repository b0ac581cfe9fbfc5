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

/// A line without its comment.
fn content(line: &str) -> &str {
    line.split('#').next().unwrap_or("")
}

fn volume(line: usize, token: &str) -> Result<f64, MatrixError> {
    let v: f64 = token.parse().map_err(|_| {
        err(
            line,
            format!(
                "{} is not a number; volumes are numbers such as 12 or 1.5e3",
                window(token)
            ),
        )
    })?;
    if !v.is_finite() || v > MAX_TOTAL_VOLUME {
        return Err(err(
            line,
            format!(
                "{} is not a finite volume of at most {MAX_TOTAL_VOLUME:e}",
                window(token)
            ),
        ));
    }
    if v < 0.0 {
        return Err(err(
            line,
            format!("{} is negative; volumes are 0 or more", window(token)),
        ));
    }
    Ok(v)
}

impl CommMatrix {
    /// A matrix from `(i, j, volume)` entries (any order, repeats added up, made symmetric).
    pub fn from_entries(n: u32, entries: impl IntoIterator<Item = (u32, u32, f64)>) -> Self {
        let mut pairs: Vec<(u32, u32, f64)> = entries
            .into_iter()
            .filter(|&(i, j, v)| i != j && v > 0.0 && i < n && j < n)
            .map(|(i, j, v)| (i.min(j), i.max(j), v))
            .collect();
        CommMatrix::merge(n, &mut pairs)
    }

    /// Sorts `(i, j, v)` with `i < j` and adds up repeats, in place (no second copy).
    fn merge(n: u32, pairs: &mut Vec<(u32, u32, f64)>) -> Self {
        pairs.sort_unstable_by_key(|a| (a.0, a.1));
        let mut w = 0;
        for r in 0..pairs.len() {
            if w > 0 && pairs[w - 1].0 == pairs[r].0 && pairs[w - 1].1 == pairs[r].1 {
                pairs[w - 1].2 += pairs[r].2;
            } else {
                pairs[w] = pairs[r];
                w += 1;
            }
        }
        pairs.truncate(w);
        pairs.shrink_to_fit();
        CommMatrix {
            n,
            pairs: std::mem::take(pairs),
        }
    }

    /// Parses a matrix. `np`, when given, is the number of ranks the matrix must describe.
    ///
    /// The text is read line by line without collecting its tokens: what is kept is one entry
    /// per non-zero pair. With [`Format::Auto`] the format is decided from the first row and
    /// the row count, and never guessed: dense is possible when the first row has as many
    /// values as there are rows (and `np` when given), sparse when it has three values whose
    /// first two are whole numbers; when both are possible the caller must say which.
    pub fn parse(text: &str, format: Format, np: Option<u32>) -> Result<CommMatrix, MatrixError> {
        let mut rows = 0usize;
        let mut first: Option<(usize, Vec<&str>)> = None;
        for (i, tokens) in Self::rows(text) {
            if first.is_none() {
                first = Some((i, tokens.take(4).collect()));
                // (at most 4 tokens kept: enough to tell 3 from more)
            }
            rows += 1;
        }
        let Some((first_line, head)) = first else {
            return Err(err(
                0,
                "the matrix is empty: expected a square matrix or 'i j volume' lines",
            ));
        };
        let first_len = text
            .lines()
            .nth(first_line - 1)
            .map_or(0, |l| content(l).split_whitespace().count());
        let format = match format {
            Format::Auto => {
                let square = first_len == rows;
                let dense = square && np.is_none_or(|np| np as usize == rows);
                let triples = first_len == 3
                    && head[..2].iter().all(|t| t.parse::<u32>().is_ok())
                    && Self::all_triples(text, None);
                let sparse = triples && Self::all_triples(text, np);
                match (dense, sparse) {
                    // Triples naming a rank past --np: read as sparse, which names that rank
                    // and its line.
                    (false, false) if triples => Format::Sparse,
                    (false, false) if square => {
                        return Err(err(
                            0,
                            format!(
                                "the matrix describes {rows} ranks but --np is {}; give one row \
                                 and column per rank",
                                np.unwrap_or(0)
                            ),
                        ))
                    }
                    (true, true) => {
                        return Err(err(
                            0,
                            format!(
                                "{rows} rows of 3 values read both as a dense {rows} x {rows} \
                                 matrix and as 'i j volume' triples: say which with --format \
                                 dense or --format sparse"
                            ),
                        ))
                    }
                    (true, false) => Format::Dense,
                    (false, true) => Format::Sparse,
                    (false, false) => {
                        return Err(err(
                            first_line,
                            format!(
                                "neither format fits: the first row has {first_len} value(s), \
                                 but a dense matrix has as many values per row as rows ({rows}{}), \
                                 and a sparse one 'i j volume' (3 values, the first two whole \
                                 numbers); fix the file or give --format",
                                np.map_or(String::new(), |np| format!(", and --np {np}"))
                            ),
                        ))
                    }
                }
            }
            f => f,
        };
        let matrix = match format {
            Format::Sparse => Self::sparse(text, np)?,
            _ => Self::dense(text, rows)?,
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
        Self::checked_total(matrix.total()).map_err(|m| err(0, m))?;
        Ok(matrix)
    }

    /// Whether every row is `i j volume` with whole-number ranks (below `np` when given).
    fn all_triples(text: &str, np: Option<u32>) -> bool {
        Self::rows(text).all(|(_, mut t)| {
            let rank = |t: Option<&str>| {
                t.and_then(|t| t.parse::<u32>().ok())
                    .is_some_and(|r| np.is_none_or(|np| r < np))
            };
            rank(t.next()) && rank(t.next()) && t.next().is_some() && t.next().is_none()
        })
    }

    /// The non-empty rows of `text`: their 1-based line numbers and tokens (comments removed).
    fn rows(text: &str) -> impl Iterator<Item = (usize, std::str::SplitWhitespace<'_>)> {
        text.lines()
            .enumerate()
            .map(|(i, l)| (i + 1, content(l)))
            .filter(|(_, c)| !c.trim().is_empty())
            .map(|(i, c)| (i, c.split_whitespace()))
    }

    fn dense(text: &str, n: usize) -> Result<CommMatrix, MatrixError> {
        if n as u64 > u64::from(MAX_RANKS) {
            return Err(err(0, format!("{n} rows: at most {MAX_RANKS} ranks")));
        }
        let mut pairs: Vec<(u32, u32, f64)> = Vec::new();
        for (i, (line, tokens)) in Self::rows(text).enumerate() {
            let mut count = 0usize;
            for (j, t) in tokens.enumerate() {
                count += 1;
                if count > n {
                    continue;
                }
                let v = volume(line, t)?;
                if v > 0.0 && i != j {
                    pairs.push(((i.min(j)) as u32, (i.max(j)) as u32, v));
                }
            }
            if count != n {
                return Err(err(
                    line,
                    format!(
                        "row {i} has {count} values; a dense matrix is square: {n} rows of {n} \
                         values"
                    ),
                ));
            }
        }
        Ok(CommMatrix::merge(n as u32, &mut pairs))
    }

    fn sparse(text: &str, np: Option<u32>) -> Result<CommMatrix, MatrixError> {
        let mut pairs = Vec::new();
        let mut max = 0u32;
        for (line, tokens) in Self::rows(text) {
            let t: Vec<&str> = tokens.take(4).collect();
            let [i, j, v] = t[..] else {
                return Err(err(
                    line,
                    format!(
                        "expected 'i j volume', found {} value(s)",
                        if t.len() > 3 {
                            "more than 3".to_string()
                        } else {
                            t.len().to_string()
                        }
                    ),
                ));
            };
            let rank = |t: &str| -> Result<u32, MatrixError> {
                let r: u32 = t.parse().map_err(|_| {
                    err(
                        line,
                        format!("{} is not a rank (a whole number from 0)", window(t)),
                    )
                })?;
                if r >= MAX_RANKS || np.is_some_and(|np| r >= np) {
                    return Err(err(
                        line,
                        format!(
                            "rank {r} is out of range: ranks go from 0 to {}",
                            np.unwrap_or(MAX_RANKS) - 1
                        ),
                    ));
                }
                Ok(r)
            };
            let (i, j, v) = (rank(i)?, rank(j)?, volume(line, v)?);
            max = max.max(i).max(j);
            if i != j && v > 0.0 {
                pairs.push((i.min(j), i.max(j), v));
            }
        }
        Ok(CommMatrix::merge(np.unwrap_or(max + 1), &mut pairs))
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

    /// A reproducible stream of pseudo-random numbers (xorshift64*: deterministic, good
    /// enough to scatter ranks).
    fn numbers(seed: u64) -> impl FnMut() -> u64 {
        let mut state = seed | 1;
        move || {
            state ^= state >> 12;
            state ^= state << 25;
            state ^= state >> 27;
            state.wrapping_mul(0x2545_f491_4f6c_dd1d)
        }
    }

    /// Each rank talks to `degree` ranks drawn at random (volumes 1 to 8), reproducibly.
    pub fn random_sparse(n: u32, degree: u32, seed: u64) -> CommMatrix {
        let mut next = numbers(seed);
        let mut e = Vec::new();
        for i in 0..n {
            for _ in 0..degree {
                let j = (next() % u64::from(n)) as u32;
                e.push((i, j, (1 + next() % 8) as f64));
            }
        }
        CommMatrix::from_entries(n, e)
    }

    /// Groups of `group` ranks, scattered over the rank numbers by a fixed permutation, that
    /// talk a lot inside the group (volume 10) and a little to random others (volume 1).
    pub fn clustered(n: u32, group: u32, seed: u64) -> CommMatrix {
        let mut next = numbers(seed);
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

impl CommMatrix {
    /// Each rank's neighbours with volumes, for moving ranks.
    pub(crate) fn neighbours(&self) -> Vec<Vec<(u32, f64)>> {
        let mut n = vec![Vec::new(); self.ranks() as usize];
        for &(i, j, v) in self.pairs() {
            n[i as usize].push((j, v));
            n[j as usize].push((i, v));
        }
        n
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
    fn the_format_is_never_guessed() {
        // A 3 x 3 ring read as dense or as three triples (0-1 volume 0, 1-0 volume 1, ...):
        // both fit, so the caller must say.
        let ring = "0 1 1\n1 0 1\n1 1 0\n";
        let e = CommMatrix::parse(ring, Format::Auto, Some(3)).unwrap_err();
        assert!(
            e.message.contains("--format dense or --format sparse"),
            "{e}"
        );
        assert_eq!(
            CommMatrix::parse(ring, Format::Dense, Some(3))
                .unwrap()
                .pairs(),
            [(0, 1, 2.0), (0, 2, 2.0), (1, 2, 2.0)]
        );
        assert_eq!(
            CommMatrix::parse(ring, Format::Sparse, Some(3))
                .unwrap()
                .pairs(),
            [(0, 1, 2.0)]
        );
        // Four triples are not a square: sparse, without asking.
        let triples = "0 1 5\n1 2 5\n2 3 5\n3 0 5\n";
        assert_eq!(
            CommMatrix::parse(triples, Format::Auto, Some(4))
                .unwrap()
                .pairs()
                .len(),
            4
        );
        // Neither: a row of 4 values over 2 rows.
        let e = CommMatrix::parse("0 1 2 3\n0 1 2 3\n", Format::Auto, Some(4)).unwrap_err();
        assert!(e.message.contains("neither format fits"), "{e}");
    }

    #[test]
    fn long_tokens_are_quoted_in_a_short_window_and_totals_are_bounded() {
        let long = "7".repeat(4000) + "x";
        let e =
            CommMatrix::parse(&format!("0 1 {long}\n1 2 1\n"), Format::Sparse, None).unwrap_err();
        assert!(e.message.contains("(4001 characters)"), "{e}");
        assert!(e.message.len() < 200, "{e}");
        let e = CommMatrix::parse("0 1 1e300\n1 2 1e300\n", Format::Sparse, None).unwrap_err();
        assert!(e.message.contains("more than the 1e300"), "{e}");
        let e = CommMatrix::parse("0 1 1e301\n", Format::Sparse, None).unwrap_err();
        assert!(e.message.contains("at most 1e300"), "{e}");
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

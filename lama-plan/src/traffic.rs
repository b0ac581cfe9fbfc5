//! Traffic recorded by Open MPI's monitoring component, as a communication matrix.
//!
//! Open MPI's `pml_monitoring` counts, in every process, the bytes and messages it sends to each
//! peer. Run with
//!
//! ```text
//! OMPI_MCA_pml_monitoring_enable=2
//! OMPI_MCA_pml_monitoring_enable_output=3
//! OMPI_MCA_pml_monitoring_filename=/shared/dir/prof
//! ```
//!
//! in the environment (srun passes it to every rank under direct launch, `srun --mpi=pmix`),
//! each process writes `/shared/dir/prof.<rank>.prof` when it calls `MPI_Finalize`. Its
//! point-to-point section holds one line per peer it sent to:
//!
//! ```text
//! # POINT TO POINT
//! E  0  1  524288 bytes  8 msgs sent  4,0,0,3,1,0,...
//! I  0  1  20 bytes  8 msgs sent
//! ```
//!
//! (the kind, the sender's and the receiver's rank in `MPI_COMM_WORLD`, the bytes, the
//! messages, for `E` a histogram of message sizes; separated by tabs, shown here as spaces). With `enable=2` the
//! application's own point-to-point messages are the `E` lines and the messages Open MPI's
//! collectives send underneath are `I` lines; with `enable=1` both are counted together as `E`.
//! Only `E` lines are read: collective traffic follows the library's algorithms, which
//! themselves depend on where the ranks are (hierarchical collectives split by node), so it
//! does not describe the program, and the same program placed differently records different
//! collective traffic (seen with the halo exchange of `tests/mpi`: with `enable=2` both runs
//! record the same `E` lines, with `enable=1` they differ by the collectives' few hundred
//! bytes). The other sections (`# OSC`, `# COLLECTIVES` with `C`, `D`, `O2A`, `A2O`, `A2A`
//! lines) and lines of other kinds are skipped; a malformed `E` line is an error with its file
//! and line. A rank's messages to itself are ignored.

use crate::matrix::{CommMatrix, MAX_RANKS};

/// A recording that cannot be used: the file, the line (1-based; 0 for the whole file) and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{file}:{line}: {message}")]
pub struct TrafficError {
    /// The file.
    pub file: String,
    /// The line.
    pub line: usize,
    /// What is wrong.
    pub message: String,
}

/// How the files are named: `PREFIX.<rank>.prof`.
pub const SUFFIX: &str = ".prof";

/// The parameters that make Open MPI write the files, for messages.
pub const HOW: &str = "run the program once with OMPI_MCA_pml_monitoring_enable=2 \
    OMPI_MCA_pml_monitoring_enable_output=3 OMPI_MCA_pml_monitoring_filename=DIR/prof in its \
    environment: each rank writes DIR/prof.<rank>.prof when it calls MPI_Finalize";

/// The bytes of every `E` line of the files (`(name, text)`), summed per pair of ranks, as a
/// matrix of `np` ranks.
pub fn read_monitoring(files: &[(String, String)], np: u32) -> Result<CommMatrix, TrafficError> {
    let mut entries: Vec<(u32, u32, f64)> = Vec::new();
    for (name, text) in files {
        let err = |line: usize, message: String| TrafficError {
            file: name.clone(),
            line,
            message,
        };
        for (i, raw) in text.lines().enumerate() {
            let line = i + 1;
            let mut tokens = raw.split_whitespace();
            if tokens.next() != Some("E") {
                continue;
            }
            let fields: Vec<&str> = tokens.take(4).collect();
            let [src, dst, bytes, unit] = fields[..] else {
                return Err(err(
                    line,
                    "an E line is 'E <from> <to> <N> bytes ...'".to_string(),
                ));
            };
            if unit != "bytes" {
                return Err(err(
                    line,
                    format!(
                        "expected '<N> bytes' after the two ranks, found {}",
                        crate::matrix::window(unit)
                    ),
                ));
            }
            let rank = |t: &str| -> Result<u32, TrafficError> {
                let r: u32 = t.parse().map_err(|_| {
                    err(line, format!("{} is not a rank", crate::matrix::window(t)))
                })?;
                if r >= np || r >= MAX_RANKS {
                    return Err(err(
                        line,
                        format!(
                            "rank {r} is out of range: the recording is for --np {np} ranks \
                             (0 to {})",
                            np.saturating_sub(1)
                        ),
                    ));
                }
                Ok(r)
            };
            let (from, to) = (rank(src)?, rank(dst)?);
            let v: u64 = bytes.parse().map_err(|_| {
                err(
                    line,
                    format!("{} is not a byte count", crate::matrix::window(bytes)),
                )
            })?;
            entries.push((from, to, v as f64));
        }
    }
    if entries.is_empty() {
        return Err(TrafficError {
            file: files
                .first()
                .map_or_else(|| "(no file)".to_string(), |f| f.0.clone()),
            line: 0,
            message: format!(
                "no point-to-point traffic (no 'E' line) in {} file(s); {HOW}",
                files.len()
            ),
        });
    }
    let total: f64 = entries.iter().map(|e| e.2).sum();
    CommMatrix::checked_total(total).map_err(|message| TrafficError {
        file: files.first().map_or_else(String::new, |f| f.0.clone()),
        line: 0,
        message,
    })?;
    Ok(CommMatrix::from_entries(np, entries))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two files as Open MPI 5.0.7 wrote them for a 3 x 2 halo exchange (first lines of each;
    /// the I line and the collective section kept to show they are skipped, and a message to
    /// itself).
    const RANK0: &str = "# POINT TO POINT\n\
        E\t0\t0\t524288 bytes\t8 msgs sent\t0,0,0,0\n\
        E\t0\t1\t49488 bytes\t51 msgs sent\t6,0,0,30,3,4,2,0\n\
        E\t0\t2\t24804 bytes\t43 msgs sent\t3,0,0,27,6,4,0,0\n\
        I\t0\t1\t20 bytes\t8 msgs sent\n\
        # OSC\n# COLLECTIVES\n\
        C\t0\t1\t8324 bytes\t34 msgs sent\n\
        D\tMPI_COMM_WORLD\tprocs: 0,1,2,3,4,5\n\
        O2A\t0\t0 bytes\t0 msgs sent\n";
    const RANK1: &str = "# POINT TO POINT\n\
        E\t1\t0\t57620 bytes\t56 msgs sent\t6,0,0,33,6,4,0,0\n\
        E\t1\t3\t24880 bytes\t44 msgs sent\t0,0,0,30,3,8,0,0\n";

    fn files(texts: &[&str]) -> Vec<(String, String)> {
        texts
            .iter()
            .enumerate()
            .map(|(i, t)| (format!("prof.{i}.prof"), t.to_string()))
            .collect()
    }

    #[test]
    fn e_lines_are_summed_per_pair_and_the_rest_skipped() {
        let m = read_monitoring(&files(&[RANK0, RANK1]), 6).unwrap();
        // 0-1 both ways (49488 + 57620); 0-2; 1-3. The I (20) and C (8324) lines are not
        // counted, nor 0 to itself.
        assert_eq!(
            m.pairs(),
            [(0, 1, 107108.0), (0, 2, 24804.0), (1, 3, 24880.0)]
        );
        assert_eq!(m.ranks(), 6);
    }

    #[test]
    fn bad_recordings_are_refused_with_file_and_line() {
        for (text, np, line, why) in [
            ("E\t0\t9\t10 bytes\n", 6, 1, "rank 9 is out of range"),
            ("# x\nE\t0\t1\t10 msgs\n", 6, 2, "expected '<N> bytes'"),
            ("E\t0\tx\t10 bytes\n", 6, 1, "'x' is not a rank"),
            ("E\t0\t1\n", 6, 1, "an E line is"),
            ("E\t0\t1\t-3 bytes\n", 6, 1, "not a byte count"),
            (
                "# POINT TO POINT\nC\t0\t1\t5 bytes\n",
                6,
                0,
                "no point-to-point",
            ),
        ] {
            let e = read_monitoring(&files(&[text]), np).unwrap_err();
            assert_eq!(
                (e.file.as_str(), e.line),
                ("prof.0.prof", line),
                "{text:?}: {e}"
            );
            assert!(e.message.contains(why), "{text:?}: {e}");
        }
        let e = read_monitoring(&[], 4).unwrap_err();
        assert!(
            e.message.contains("OMPI_MCA_pml_monitoring_enable=2"),
            "{e}"
        );
    }
}

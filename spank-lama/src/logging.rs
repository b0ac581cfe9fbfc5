//! The plugin's `tracing` subscriber: events go to the Slurm daemon's log (slurmd.log for
//! slurmstepd, stderr for srun) through `slurm_info`/`slurm_error`, at `info` and above. What
//! the user must see is written with `spank_log_user!` instead.

use slurm_spank::{spank_log, LogLevel};
use tracing_subscriber::fmt::MakeWriter;

/// Writes each formatted event as one Slurm log line.
#[derive(Debug, Clone, Copy)]
struct SlurmLog {
    error: bool,
}

impl std::io::Write for SlurmLog {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let text = String::from_utf8_lossy(buf);
        let line = text.trim_end();
        if !line.is_empty() {
            spank_log(
                if self.error {
                    LogLevel::Error
                } else {
                    LogLevel::Info
                },
                line,
            );
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[derive(Debug, Clone, Copy)]
struct SlurmLogMaker;

impl<'a> MakeWriter<'a> for SlurmLogMaker {
    type Writer = SlurmLog;

    fn make_writer(&'a self) -> SlurmLog {
        SlurmLog { error: false }
    }

    fn make_writer_for(&'a self, meta: &tracing::Metadata<'_>) -> SlurmLog {
        SlurmLog {
            error: *meta.level() == tracing::Level::ERROR,
        }
    }
}

/// Installs the subscriber once per process; a second call (or another subscriber already
/// installed by the host) is left alone.
pub fn install() {
    let _ = tracing_subscriber::fmt()
        .with_writer(SlurmLogMaker)
        .with_ansi(false)
        .without_time()
        .with_target(false)
        .with_level(false)
        .with_max_level(tracing::Level::INFO)
        .try_init();
}

//! What goes wrong in a callback, as data.

use std::fmt;

/// Why a step's tasks were not placed on this node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StepError {
    /// The step's CPUs here cannot be known: nothing is bound (fail closed) and the step runs
    /// with Slurm's binding.
    CpusUnknown(String),
    /// Anything else: the step fails (or, for the site's default placement, runs as
    /// `on_default_failure` says).
    Failed(String),
}

impl From<String> for StepError {
    fn from(why: String) -> Self {
        StepError::Failed(why)
    }
}

impl From<&str> for StepError {
    fn from(why: &str) -> Self {
        StepError::Failed(why.to_string())
    }
}

impl fmt::Display for StepError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StepError::CpusUnknown(why) | StepError::Failed(why) => f.write_str(why),
        }
    }
}

impl std::error::Error for StepError {}

/// A failure the callback has already shown where it belongs (the user's terminal, Slurm's
/// log): returned so that Slurm fails the command or step. It has no text, so that the SPANK
/// binding's error report (which logs an error's text) does not repeat it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AlreadyShown;

impl fmt::Display for AlreadyShown {
    fn fmt(&self, _: &mut fmt::Formatter<'_>) -> fmt::Result {
        Ok(())
    }
}

impl std::error::Error for AlreadyShown {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_shown_failure_has_no_text_to_repeat() {
        assert_eq!(AlreadyShown.to_string(), "");
        assert_eq!(StepError::from("why").to_string(), "why");
    }
}

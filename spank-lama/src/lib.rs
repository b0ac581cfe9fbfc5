//! spank-lama: LAMA process placement for Slurm (SPANK plugin).
#![deny(missing_docs)]

pub mod bind;
pub mod config;
pub mod plan;

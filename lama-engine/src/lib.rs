//! The Locality-Aware Mapping Algorithm (LAMA) engine.
#![deny(missing_docs)]

pub mod cpulist;
pub mod level;
pub mod topology;

pub use cpulist::{CpuList, CpuListError};
pub use level::Level;
pub use topology::{Machine, MachineBuilder, Object, Pu, TopologyError};

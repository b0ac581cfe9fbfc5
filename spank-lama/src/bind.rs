//! Kernel CPU affinity and memory policy of the calling task ([`lama_hwloc::bind`], shared
//! with `lama exec`).

pub use lama_hwloc::bind::{get_affinity, set_affinity, set_membind};

//! Slurm's own notations, read and written the way Slurm does, for the plugin and `lama`:
//! hostlist expressions (`node[1-3,7]`). Pure: no Slurm library, no I/O.
#![deny(missing_docs)]

pub mod hostlist;

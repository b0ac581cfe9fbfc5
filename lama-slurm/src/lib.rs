//! Slurm's own notations, read and written the way Slurm does, for the plugin and `lama`:
//! hostlist expressions (`node[1-3,7]`) and the text that says which Slurm release a plugin
//! was built for. Pure: no Slurm library, no I/O.
#![deny(missing_docs)]

pub mod built_for;
pub mod cpu_bind;
pub mod cpus_per_task;
pub mod distribution;
pub mod familiar;
pub mod gpu;
pub mod gres_conf;
pub mod hostlist;
pub mod launcher;
pub mod node;
pub mod node_env;
pub mod node_plan;
pub mod own;
pub mod task_env;

//! The Locality-Aware Mapping Algorithm (LAMA) engine.
//!
//! LAMA (Hursey, Squyres, Dontje, Cluster 2011) places processes by a *layout*: a string of
//! level tokens read as nested loops, the leftmost varying fastest. `scbnh` visits socket 0 and
//! socket 1 of a node alternately, then the next core, then the next board and node, and
//! finally the second hardware thread of every core.
//!
//! The main types:
//! - [`Layout`], [`Bind`], [`Mppr`], [`Order`]: what the user asks for, parsed from strings
//!   with a [`Diagnostic`] on error;
//! - [`Machine`]: one node's topology (PUs in logical order, with OS indexes and availability,
//!   and the objects above them), built by [`MachineBuilder`];
//! - [`place`]: the placement of a [`Request`] on one or more machines, giving a [`Placement`];
//! - [`render`]: tables and `[BB/..][..]` pictures for people.
//!
//! ```
//! use lama_engine::{place, Bind, Layout, Machine, Request};
//!
//! let node = Machine::synthetic("pack:2 core:4 pu:2").unwrap();
//! let mut req = Request::new(Layout::parse("scbnh").unwrap(), 4);
//! req.bind = Bind::parse("1c").unwrap();
//! let placement = place(&[&node], &req).unwrap();
//! // Ranks alternate sockets: 0 on socket 0, 1 on socket 1, 2 on socket 0 ...
//! let cpus: Vec<String> = (0..4).map(|r| placement.info(r).cpus.to_string()).collect();
//! assert_eq!(cpus, ["0-1", "8-9", "2-3", "10-11"]);
//! ```
//!
//! The engine is pure: no FFI, no I/O, no threads. Topologies come from the hwloc adapter
//! (`lama-hwloc`) or from [`Machine::synthetic`].
#![deny(missing_docs)]

pub mod by_gpu;
pub mod cpulist;
pub mod device;
pub mod diag;
pub mod gpu;
pub mod hybrid;
pub mod level;
pub mod machine_text;
pub mod place;
pub mod render;
pub mod spec;
pub mod topology;

#[cfg(test)]
mod gpu_tests;
#[cfg(test)]
mod place_tests;

pub use by_gpu::{
    join_slots, place_bound, place_bound_in_order, place_by_gpu, place_by_gpu_ranked,
    place_gpu_slots,
};
pub use cpulist::{CpuList, CpuListError};
pub use device::{vendor_name, Device, DeviceKind, DeviceSpec};
pub use diag::{Diagnostic, Subject, MAX_INPUT_LEN};
pub use gpu::{
    gpu_name, is_fabric, is_fabric_name, is_gpu_bind, nic_name, parse_gpu_layout, split_gpu_mppr,
    GpuError, GpuPlacement, GpuRequest, GpuTask, GroupBinding,
};
pub use hybrid::{
    binding_for_cpus, cpus_covered, exact_binding, numa_nodes, threads_needed, threads_per_core,
    CpuUnit,
};
pub use level::Level;
pub use place::{
    place, place_cpus_per_task, Overlap, PlaceError, Placement, Process, ProcessInfo, Request,
};
pub use spec::{Bind, Layout, Membind, Mppr, Order, BIND_ALIASES, MAP_ALIASES};
pub use topology::{CpuKind, Machine, MachineBuilder, Object, Pu, TopologyError};

/// The engine's version (the workspace's), for `lama --version`.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

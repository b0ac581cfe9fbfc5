//! Placement by GPU (the `g` level, docs/devices.md): tasks go round-robin over the GPUs a
//! node offers, and each task's CPUs are chosen among the CPUs near its GPU.
//!
//! The language, in LAMA's spirit:
//!
//! - **`g` leads a layout** (`gcsbnh`; alias `gpu`): `g` varies fastest, so consecutive tasks
//!   get consecutive GPUs, then the rest of the layout (`csbnh`) places the tasks of each GPU
//!   on the CPUs near it. GPUs are visited in the order of the CPUs near them (then PCI bus
//!   order), so ranks follow the CPUs even where GPU numbers do not.
//! - **`1g` binds** a task to all the CPUs near its GPU (alias `gpu`), shared with the other
//!   tasks of GPUs near them (never an oversubscription); any other width binds as usual but
//!   must fit inside those CPUs.
//! - **`k:g` in the MPPR list** allows at most `k` tasks per GPU; without it tasks share GPUs
//!   round-robin when there are more tasks than GPUs.
//! - **GPUs per task** (`k`, the resource manager's `--gpus-per-task`): each task gets `k`
//!   GPUs that follow one another in that order, near the same CPUs where the GPUs allow; the
//!   CPUs near any of them are its CPUs (near the first where that would overlap another
//!   task's).
//! - **Fewer tasks than GPUs**: the tasks are spread over the node, each next one on the GPU
//!   farthest from those already used, so no socket's GPUs sit idle while another socket holds
//!   two tasks.
//! - **More CPUs per task (`-c`) than the CPUs near a task's GPUs can give**, with the default
//!   binding: the group's CPUs are widened step by step to the smallest object holding them (a
//!   NUMA node, then a package, ... the node) whose CPUs give each of its tasks that many CPUs
//!   of its own, as LLNL mpibind gives such a task its socket. Groups whose widened CPUs meet
//!   are placed together, each group's tasks in turn, so no two tasks share a CPU; a note says
//!   where and why. When not even the node's CPUs can, the CPUs near the GPUs are kept (refused,
//!   or shared when oversubscribing is allowed). A binding that was asked for is never widened.
//!
//! "Near" is a device's locality ([`Device::pus`]) clipped to the CPUs the caller may use.
//! Tasks of GPUs with the same CPUs near them are placed together, so two tasks of two GPUs
//! near one socket do not share a core. Localities that overlap without being equal (one GPU
//! near a NUMA node, another near the package holding it) are refused: no rule places both
//! without one task's CPUs spilling into the other's.
//!
//! Each task is also given the network card nearest its first GPU: among the fabric NICs (or,
//! when the node has none, all NICs), the one that shares the smallest object with the GPU
//! (then the one with the smallest locality); several equally close cards are shared out in
//! turn (dual-rail nodes).

use crate::diag::{Diagnostic, Subject};
use crate::hybrid::CpuUnit;
use crate::place::PlaceError;
use crate::spec::{Bind, Layout, Mppr, Order};
use crate::{CpuList, Device, DeviceKind, Level, Machine};
use std::fmt;

/// A request to place by GPU.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GpuRequest {
    /// The layout after `g`, which places each GPU's tasks on the CPUs near it.
    pub layout: Layout,
    /// `None` for `1g` (all the CPUs near the task's GPUs), else the binding width.
    pub bind: Option<Bind>,
    /// The CPU limits of the MPPR list (without `k:g`).
    pub mppr: Mppr,
    /// `k:g`: at most this many tasks per GPU.
    pub per_gpu: Option<u32>,
    /// GPUs given to each task (1 or more).
    pub gpus_per_task: u32,
    /// How ranks are numbered within each group of GPUs.
    pub order: Order,
    /// Whether tasks may share CPUs when a group's CPUs are too few.
    pub oversubscribe: bool,
    /// The tasks' GPUs are fixed by the caller (a launcher that binds GPUs to tasks itself):
    /// task `t` gets `gpus[t*k .. t*k+k]`, in the order given, and only the CPUs are placed.
    pub fixed: bool,
    /// Whether `bind` was asked for. As on the CPU path, the default binding is widened to
    /// cover `cpus_per_task` CPUs and never makes two tasks share a CPU: where the widened
    /// binding cannot, each task of the group gets exactly its CPUs
    /// ([`crate::place_cpus_per_task`]); where neither fits, the group's CPUs are widened to the
    /// smallest object holding them that gives every task its CPUs (the module's documentation).
    /// A binding that was asked for is applied as asked, and tasks that then share CPUs are named
    /// in a note.
    pub bind_asked: bool,
    /// CPUs given to each task (1 when the resource manager gave no count).
    pub cpus_per_task: u32,
    /// What one of those CPUs counts as.
    pub cpu_unit: CpuUnit,
}

/// The layout of a `g` request: `Some` when `input` is `gpu` or starts with `g`.
pub fn parse_gpu_layout(input: &str) -> Option<Result<Layout, Diagnostic>> {
    let rest = if input == "gpu" {
        "csbnh"
    } else {
        input.strip_prefix('g')?
    };
    if rest.is_empty() {
        return Some(Ok(Layout::from_levels([Level::Core, Level::Socket])));
    }
    Some(Layout::parse(rest).map_err(|mut d| {
        // The carets point into the whole input, 'g' included.
        d.input = input.to_string();
        if let Some((at, len)) = d.span {
            d.span = Some((at + usize::from(input != "gpu"), len));
        }
        d
    }))
}

/// Whether a binding is `1g` (or `g`, `gpu`): all the CPUs near the task's GPUs.
pub fn is_gpu_bind(input: &str) -> bool {
    matches!(input, "1g" | "g" | "gpu")
}

/// Takes `k:g` out of an MPPR list: the per-GPU limit and the rest (`None` when nothing is
/// left). A limit on `g` that is not a positive count is an error with a caret.
pub fn split_gpu_mppr(input: &str) -> Result<(Option<u32>, Option<String>), Diagnostic> {
    // Refused by its length before it is split (its message would echo it whole: a
    // megabyte's worth from a user's option, in a privileged process).
    crate::diag::check_length(Subject::Mppr, input)?;
    let mut cap = None;
    let mut rest: Vec<&str> = Vec::new();
    let mut offset = 0;
    for item in input.split(',') {
        if let Some(count) = item.strip_suffix(":g") {
            let n = count
                .parse::<u32>()
                .ok()
                .filter(|n| *n > 0 && count.bytes().all(|b| b.is_ascii_digit()));
            let Some(n) = n else {
                return Err(Diagnostic::new(
                    Subject::Mppr,
                    input,
                    Some((offset, count.len().max(1))),
                    format!("'{count}' is not a task count of 1 or more"),
                ));
            };
            if cap.replace(n).is_some() {
                return Err(Diagnostic::new(
                    Subject::Mppr,
                    input,
                    Some((offset, item.len())),
                    "'g' is limited twice",
                ));
            }
        } else {
            rest.push(item);
        }
        offset += item.len() + 1;
    }
    Ok((cap, (!rest.is_empty()).then(|| rest.join(","))))
}

/// Why tasks cannot be placed by GPU.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum GpuError {
    /// No GPU to place on.
    #[error("a 'g' layout places tasks by GPU, and {0}")]
    NoGpu(String),
    /// More GPUs per task than there are.
    #[error("each task asks for {per_task} GPUs, and only {have} are here ({gpus})")]
    TooFewGpus {
        /// GPUs per task.
        per_task: u32,
        /// GPUs here.
        have: usize,
        /// Their names.
        gpus: String,
    },
    /// The tasks' GPUs are fixed ([`GpuRequest::fixed`]) and there are too few for the tasks.
    #[error(
        "the GPUs are bound to the tasks {per_task} at a time, in order: {tasks} task(s) need \
         {need} GPU(s) and the step has {have} here ({gpus}); ask for fewer tasks or more GPUs"
    )]
    TooManyBound {
        /// Tasks.
        tasks: u32,
        /// GPUs per task.
        per_task: u32,
        /// GPUs needed.
        need: u32,
        /// GPUs here.
        have: usize,
        /// Their names.
        gpus: String,
    },
    /// More tasks than `k:g` allows.
    #[error(
        "{tasks} tasks with at most {per_gpu} per GPU need {need} GPU(s) of {per_task} GPU(s) \
         each, and {have} are here ({gpus}); ask for fewer tasks, more GPUs, or a looser k:g"
    )]
    TooManyTasks {
        /// Tasks.
        tasks: u32,
        /// The limit.
        per_gpu: u32,
        /// GPUs per task.
        per_task: u32,
        /// Groups needed.
        need: u32,
        /// Groups here.
        have: u32,
        /// Their names.
        gpus: String,
    },
    /// Two GPUs' CPUs overlap without being the same.
    #[error(
        "the CPUs near {a} ({a_cpus}) and near {b} ({b_cpus}) overlap without being the same, \
         so tasks of one would run on the CPUs of the other; place without 'g' on this node"
    )]
    Overlap {
        /// One GPU.
        a: String,
        /// Its CPUs.
        a_cpus: CpuList,
        /// The other.
        b: String,
        /// Its CPUs.
        b_cpus: CpuList,
    },
    /// The binding is wider than the CPUs near a GPU.
    #[error(
        "binding {bind} is wider than the CPUs near {gpu} ({cpus}, {near}); bind to 1g (all of \
         them) or to a narrower width"
    )]
    Wider {
        /// The binding.
        bind: Bind,
        /// The GPU.
        gpu: String,
        /// The CPUs near it.
        cpus: CpuList,
        /// What they are.
        near: String,
    },
    /// The CPU placement of one GPU's tasks failed.
    #[error("placing the {tasks} task(s) of {gpus} on the CPUs near them ({cpus}): {error}")]
    Place {
        /// Tasks.
        tasks: u32,
        /// The GPU(s).
        gpus: String,
        /// The CPUs.
        cpus: CpuList,
        /// The engine's error.
        error: Box<PlaceError>,
    },
}

/// One task placed by GPU.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GpuTask {
    /// The task's GPUs, as positions in the list given to [`place_by_gpu`].
    pub gpus: Vec<usize>,
    /// Its network card: an index into [`Machine::devices`], if the node has one.
    pub nic: Option<usize>,
    /// Logical index of its mapped PU.
    pub pu_logical: u32,
    /// Logical indexes of its bound PUs (empty without binding).
    pub bound_logical: Vec<u32>,
    /// OS indexes of its bound PUs (empty without binding).
    pub cpus: CpuList,
    /// The binding its group used (the default widened for `-c`, or its exact fallback);
    /// `None` under `1g`.
    pub bind: Option<Bind>,
}

/// The tasks of one node placed by GPU, in task order, and what the caller should say.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GpuPlacement {
    /// One per task.
    pub tasks: Vec<GpuTask>,
    /// Notes for the user (GPUs left unused, GPUs whose CPUs the caller may not use, every
    /// GPU near the same CPUs).
    pub notes: Vec<String>,
    /// How each group of GPUs near the same CPUs bound its tasks (not under `1g`).
    pub groups: Vec<GroupBinding>,
}

/// How the tasks of one group of GPUs (those near the same CPUs) were bound.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupBinding {
    /// The group's GPUs (`gpu0,gpu1`).
    pub gpus: String,
    /// Its tasks.
    pub tasks: u32,
    /// The binding tried first: the one asked for, else the default widened for
    /// [`GpuRequest::cpus_per_task`].
    pub widened: Bind,
    /// The binding used: `widened`, or the exact one when the default had to fall back.
    pub used: Bind,
    /// Logical PUs covered by the narrowest task's binding.
    pub narrowest: Vec<u32>,
    /// When a binding that was asked for makes tasks share CPUs: the warning, naming them.
    pub shared: Option<String>,
}

/// `gpu3 (0000:63:00.0)`.
pub fn gpu_name(d: &Device) -> String {
    format!("gpu{} ({})", d.index, d.bus_id)
}

pub(crate) fn names(gpus: &[&Device], which: impl IntoIterator<Item = usize>) -> String {
    which
        .into_iter()
        .map(|i| format!("gpu{}", gpus[i].index))
        .collect::<Vec<_>>()
        .join(",")
}

/// Logical PUs of `m` that are available and in `range`.
pub(crate) fn usable(m: &Machine, range: &std::ops::Range<u32>) -> Vec<u32> {
    range
        .clone()
        .filter(|&q| m.pus().get(q as usize).is_some_and(|p| p.available))
        .collect()
}

pub(crate) fn os_list(m: &Machine, logical: &[u32]) -> CpuList {
    CpuList::from_cpus(logical.iter().map(|&q| m.pus()[q as usize].os))
}

/// Whether a NIC is a fabric card (InfiniBand, Omni-Path, Slingshot, EFA, RoCE) by its vendor
/// or OS names, as opposed to a plain Ethernet port.
pub fn is_fabric(d: &Device) -> bool {
    d.kind == DeviceKind::Nic
        && (matches!(d.vendor.as_str(), "Mellanox" | "HPE")
            || d.names.iter().any(|n| is_fabric_name(n)))
}

/// OS names of fabric cards: the verbs device first (`mlx5_0`, which UCX and NCCL name), then
/// network interfaces of fabrics (`hsi0`, `ib0`: IP over InfiniBand, Slingshot).
const VERBS: [&str; 8] = [
    "mlx", "hfi", "qib", "cxi", "efa", "rdmap", "bnxt_re", "irdma",
];
const FABRIC_NETDEVS: [&str; 2] = ["hsi", "ib"];

/// Whether an OS device name is a fabric card's (`mlx5_0`, `hfi1_0`, `cxi0`, `hsi0`, `ib0`,
/// `rdmap197s0`, ...).
pub fn is_fabric_name(name: &str) -> bool {
    VERBS
        .iter()
        .chain(&FABRIC_NETDEVS)
        .any(|p| name.starts_with(p))
}

/// The name to give a NIC to a task: its verbs device (`mlx5_0`) if it has one, else its
/// fabric interface (`hsi0`), else its first OS name.
pub fn nic_name(d: &Device) -> &str {
    let by = |prefixes: &[&str]| {
        d.names
            .iter()
            .find(|n| prefixes.iter().any(|p| n.starts_with(p)))
    };
    by(&VERBS)
        .or_else(|| by(&FABRIC_NETDEVS))
        .or(d.names.first())
        .map_or("", String::as_str)
}

impl GpuRequest {
    /// The layout as the user writes it (`gcsbnh`).
    pub fn layout_text(&self) -> String {
        format!("g{}", self.layout)
    }

    /// The binding as the user writes it (`1g` for all the CPUs near each task's GPUs).
    pub fn bind_text(&self) -> String {
        self.bind.map_or("1g".to_string(), |b| b.to_string())
    }
}

impl fmt::Display for GpuRequest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "layout {} binding {}",
            self.layout_text(),
            self.bind_text()
        )?;
        if let Some(k) = self.per_gpu {
            write!(f, " at most {k} per GPU")?;
        }
        if self.gpus_per_task > 1 {
            write!(f, " {} GPUs per task", self.gpus_per_task)?;
        }
        if self.fixed {
            write!(f, ", GPUs bound to the tasks by the launcher")?;
        }
        Ok(())
    }
}

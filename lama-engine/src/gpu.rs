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
use crate::hybrid::{binding_for_cpus, cpus_covered, exact_binding, CpuUnit};
use crate::place::{place, place_cpus_per_task, PlaceError, Placement, Request};
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

fn names(gpus: &[&Device], which: impl IntoIterator<Item = usize>) -> String {
    which
        .into_iter()
        .map(|i| format!("gpu{}", gpus[i].index))
        .collect::<Vec<_>>()
        .join(",")
}

/// Logical PUs of `m` that are available and in `range`.
fn usable(m: &Machine, range: &std::ops::Range<u32>) -> Vec<u32> {
    range
        .clone()
        .filter(|&q| m.pus().get(q as usize).is_some_and(|p| p.available))
        .collect()
}

fn os_list(m: &Machine, logical: &[u32]) -> CpuList {
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

/// Where a resource manager binds GPUs to tasks itself and each task learns its GPUs only when
/// it starts (chosen, say, by each task's CPU mask): one slot per GPU of
/// `gpus`, in that order, each placed as a task of that one GPU would be (`req`'s layout and
/// binding; `req.cpus_per_task` shared out over the task's `req.gpus_per_task` GPUs, rounded
/// up), so that a task given any `K` of the GPUs runs on their slots joined ([`join_slots`]).
/// Distinct GPUs have disjoint slots, so tasks given distinct GPUs never share CPUs, whichever
/// GPUs each gets.
pub fn place_gpu_slots(
    machine: &Machine,
    gpus: &[&Device],
    req: &GpuRequest,
    no_gpu: &str,
) -> Result<GpuPlacement, GpuError> {
    let k = req.gpus_per_task.max(1);
    let slot = GpuRequest {
        gpus_per_task: 1,
        fixed: true,
        per_gpu: None,
        cpus_per_task: req.cpus_per_task.max(1).div_ceil(k),
        ..req.clone()
    };
    place_by_gpu_ranked(machine, gpus, gpus.len() as u32, &slot, no_gpu, &|t| t)
}

/// The placement of a task given the GPUs at `own` (positions in the list given to
/// [`place_gpu_slots`], whose result `slots` is): their slots joined, the first one's mapped
/// PU, NIC and binding. `None` when `own` is empty or names a GPU without a slot.
pub fn join_slots(slots: &[GpuTask], own: &[usize]) -> Option<GpuTask> {
    let first = slots.get(*own.first()?)?;
    let mut bound: Vec<u32> = Vec::new();
    for &g in own {
        bound.extend_from_slice(&slots.get(g)?.bound_logical);
    }
    bound.sort_unstable();
    bound.dedup();
    let cpus = CpuList::from_cpus(own.iter().flat_map(|&g| slots[g].cpus.cpus().to_vec()));
    // Slots of one width of one level join into that many times the width (2 slots of 12c:
    // 24c); else the first slot's binding names the task's.
    let widths: Option<Vec<(u32, Level)>> = own
        .iter()
        .map(|&g| match slots[g].bind {
            Some(Bind::Width { count, level }) => Some((count, level)),
            _ => None,
        })
        .collect();
    let bind = match widths.as_deref() {
        Some([(_, level), rest @ ..]) if rest.iter().all(|(_, l)| l == level) => {
            Some(Bind::Width {
                count: widths.iter().flatten().map(|(c, _)| c).sum(),
                level: *level,
            })
        }
        _ => first.bind,
    };
    Some(GpuTask {
        gpus: own.to_vec(),
        nic: first.nic,
        pu_logical: first.pu_logical,
        bound_logical: bound,
        cpus,
        bind,
    })
}

/// What a resource manager that binds `req.gpus_per_task` GPUs to each task gives when task
/// `i` is given the GPUs at positions `i*K .. i*K+K` (a binder that follows each task's CPU
/// mask, where task `i`'s is near those): [`place_gpu_slots`], joined task by
/// task. A preview's view; a plugin joins the slots of the GPUs each task really gets.
pub fn place_bound_in_order(
    machine: &Machine,
    gpus: &[&Device],
    np: u32,
    req: &GpuRequest,
    no_gpu: &str,
) -> Result<GpuPlacement, GpuError> {
    let k = req.gpus_per_task.max(1) as usize;
    if (np as usize).saturating_mul(k) > gpus.len() {
        return Err(too_many_bound(gpus, np, k));
    }
    let slots = place_gpu_slots(machine, gpus, req, no_gpu)?;
    let tasks = (0..np as usize)
        .filter_map(|i| join_slots(&slots.tasks, &(i * k..i * k + k).collect::<Vec<_>>()))
        .collect();
    Ok(GpuPlacement { tasks, ..slots })
}

/// `np` tasks bound `k` GPUs each by the caller, more than `gpus` has.
fn too_many_bound(gpus: &[&Device], np: u32, k: usize) -> GpuError {
    GpuError::TooManyBound {
        tasks: np,
        per_task: k as u32,
        need: np.saturating_mul(k as u32),
        have: gpus.len(),
        gpus: names(gpus, 0..gpus.len()),
    }
}

/// Places `np` tasks of one node by GPU. `machine` is the node restricted to the CPUs the
/// tasks may use; `gpus` are the GPUs they may use, in the resource manager's order (task
/// variables name them by their position in it); `no_gpu` says why there are none, for the
/// error.
pub fn place_by_gpu(
    machine: &Machine,
    gpus: &[&Device],
    np: u32,
    req: &GpuRequest,
    no_gpu: &str,
) -> Result<GpuPlacement, GpuError> {
    place_by_gpu_ranked(machine, gpus, np, req, no_gpu, &|t| t)
}

/// [`place_by_gpu`], with `rank` turning a task (0-based, in placement order) into the number
/// the notes show (the plugin shows global ranks).
pub fn place_by_gpu_ranked(
    machine: &Machine,
    gpus: &[&Device],
    np: u32,
    req: &GpuRequest,
    no_gpu: &str,
    rank: &dyn Fn(u32) -> u32,
) -> Result<GpuPlacement, GpuError> {
    if gpus.is_empty() {
        return Err(GpuError::NoGpu(no_gpu.to_string()));
    }
    let all = names(gpus, 0..gpus.len());
    let k = req.gpus_per_task.max(1) as usize;
    if k > gpus.len() {
        return Err(GpuError::TooFewGpus {
            per_task: k as u32,
            have: gpus.len(),
            gpus: all,
        });
    }
    let available: Vec<u32> = (0..machine.pus().len() as u32)
        .filter(|&q| machine.pus()[q as usize].available)
        .collect();
    let mut notes = Vec::new();
    // GPUs in the order of the CPUs near them, then by bus.
    let near: Vec<Vec<u32>> = gpus.iter().map(|d| usable(machine, &d.pus)).collect();
    let mut order: Vec<usize> = (0..gpus.len()).collect();
    order.sort_by_key(|&i| (near[i].first().copied().unwrap_or(u32::MAX), gpus[i].index));
    // Units of k GPUs: within the GPUs near the same CPUs first, then of those left over, in
    // that order; units in the order of their first GPU.
    let mut units: Vec<Vec<usize>> = Vec::new();
    let mut spare: Vec<usize> = Vec::new();
    if req.fixed {
        // The caller's GPUs for each task, in its order.
        spare = (0..gpus.len()).collect();
    } else {
        for run in order.chunk_by(|&a, &b| near[a] == near[b]) {
            let mut chunks = run.chunks_exact(k);
            units.extend(chunks.by_ref().map(<[usize]>::to_vec));
            spare.extend_from_slice(chunks.remainder());
        }
    }
    let mut chunks = spare.chunks_exact(k);
    units.extend(chunks.by_ref().map(<[usize]>::to_vec));
    let left = chunks.remainder();
    if !left.is_empty() {
        notes.push(format!(
            "{} GPU(s) used by no task ({}): {} GPUs are not a multiple of {k} per task",
            left.len(),
            names(gpus, left.iter().copied()),
            gpus.len()
        ));
    }
    let rank_of = |g: usize| order.iter().position(|&o| o == g).unwrap_or(usize::MAX);
    if !req.fixed {
        units.sort_by_key(|u| rank_of(u[0]));
        if (np as usize) < units.len() {
            units = spread(machine, gpus, units, np as usize);
        } else if np as usize % units.len().max(1) != 0 {
            // Tasks go round-robin over the units: the first np % u of them get one task more,
            // and those are spread as a smaller request would be (6 tasks on 2 packages of 2
            // GPUs: 3 + 3, not 4 + 2).
            let extra = np as usize % units.len();
            units = spread(machine, gpus, units, extra);
        }
    }
    let u = units.len() as u32;
    if req.fixed && np > u {
        return Err(too_many_bound(gpus, np, k));
    }
    if let Some(cap) = req.per_gpu {
        if np > cap.saturating_mul(u) {
            return Err(GpuError::TooManyTasks {
                tasks: np,
                per_gpu: cap,
                per_task: k as u32,
                need: np.div_ceil(cap),
                have: u,
                gpus: all,
            });
        }
    }
    if np < u {
        notes.push(format!(
            "{np} task(s) for {u} GPU group(s): {} used by no task",
            names(gpus, units[np as usize..].iter().flatten().copied())
        ));
    }
    // The CPUs of each unit: those near any of its GPUs, unless that makes two units' CPUs
    // overlap without being the same; then those near its first GPU. A unit none of whose
    // CPUs can be used gets all the usable CPUs.
    let covering: Vec<Vec<u32>> = units
        .iter()
        .map(|unit| {
            let mut cpus: Vec<u32> = unit.iter().flat_map(|&g| near[g].iter().copied()).collect();
            cpus.sort_unstable();
            cpus.dedup();
            cpus
        })
        .collect();
    // Whether each unit's GPUs are near different CPUs.
    let spans: Vec<bool> = units
        .iter()
        .map(|unit| unit.iter().any(|&g| near[g] != near[unit[0]]))
        .collect();
    let nested = covering.iter().enumerate().any(|(a, ca)| {
        covering[a + 1..]
            .iter()
            .any(|cb| ca != cb && ca.iter().any(|q| cb.binary_search(q).is_ok()))
    });
    if req.fixed {
        for (i, unit) in units.iter().enumerate().take(np as usize) {
            if spans[i] {
                let runs_on = if nested {
                    format!("those near {}", gpu_name(gpus[unit[0]]))
                } else {
                    format!(
                        "the CPUs near any of them ({})",
                        os_list(machine, &covering[i])
                    )
                };
                notes.push(format!(
                    "the GPUs given to one task ({}) are near different CPUs; the task runs on \
                     {runs_on}",
                    names(gpus, unit.iter().copied()),
                ));
            }
        }
    } else if nested && spans.contains(&true) {
        notes.push(
            "the GPUs of some tasks are near different CPUs, and the CPUs near all of them \
             would overlap another task's: each task runs on the CPUs near its first GPU"
                .to_string(),
        );
    }
    let mut unit_cpus: Vec<Vec<u32>> = Vec::new();
    for (i, unit) in units.iter().enumerate() {
        let mut cpus = if nested {
            near[unit[0]].clone()
        } else {
            covering[i].clone()
        };
        if cpus.is_empty() {
            let theirs = CpuList::from_cpus(
                gpus[unit[0]]
                    .pus
                    .clone()
                    .map(|q| machine.pus()[q as usize].os),
            );
            notes.push(format!(
                "none of the CPUs near {} ({theirs}) can be used here: its tasks use all the \
                 usable CPUs ({})",
                names(gpus, unit.iter().copied()),
                os_list(machine, &available)
            ));
            cpus = available.clone();
        }
        unit_cpus.push(cpus);
    }
    // Groups of units with the same CPUs, in order of first use.
    let mut groups: Vec<(Vec<u32>, Vec<usize>)> = Vec::new();
    for (i, cpus) in unit_cpus.iter().enumerate() {
        match groups.iter_mut().find(|(c, _)| c == cpus) {
            Some((_, members)) => members.push(i),
            None => groups.push((cpus.clone(), vec![i])),
        }
    }
    for (a, (ca, ma)) in groups.iter().enumerate() {
        for (cb, mb) in &groups[a + 1..] {
            if ca.iter().any(|q| cb.binary_search(q).is_ok()) {
                return Err(GpuError::Overlap {
                    a: names(gpus, units[ma[0]].iter().copied()),
                    a_cpus: os_list(machine, ca),
                    b: names(gpus, units[mb[0]].iter().copied()),
                    b_cpus: os_list(machine, cb),
                });
            }
        }
    }
    if groups.len() == 1 && units.len() > 1 && groups[0].0 == available {
        notes.push(format!(
            "all {} GPUs are near the same CPUs ({}): 'g' chooses each task's GPU, and the \
             rest of the layout ({}) places the tasks on those CPUs",
            gpus.len(),
            os_list(machine, &available),
            req.layout
        ));
    }
    // The fabric NICs (else all NICs) and the NIC of each unit.
    let nics: Vec<usize> = {
        let all: Vec<usize> = (0..machine.devices().len())
            .filter(|&i| machine.devices()[i].kind == DeviceKind::Nic)
            .collect();
        let fabric: Vec<usize> = all
            .iter()
            .copied()
            .filter(|&i| is_fabric(&machine.devices()[i]))
            .collect();
        if fabric.is_empty() {
            all
        } else {
            fabric
        }
    };
    let mut unit_nic: Vec<Option<usize>> = vec![None; units.len()];
    let mut turn: Vec<(Vec<usize>, usize)> = Vec::new();
    for (i, unit) in units.iter().enumerate() {
        // The closest cards: those with the smallest object holding both them and the GPU,
        // then the smallest locality; equally close cards are shared out in turn.
        let gpu = &gpus[unit[0]].pus;
        let distance = |n: usize| {
            let nic = &machine.devices()[n].pus;
            (common_size(machine, gpu, nic), nic.len())
        };
        let Some(best) = nics.iter().map(|&n| distance(n)).min() else {
            break;
        };
        let closest: Vec<usize> = nics
            .iter()
            .copied()
            .filter(|&n| distance(n) == best)
            .collect();
        let t = match turn.iter_mut().find(|(c, _)| *c == closest) {
            Some((_, t)) => t,
            None => {
                turn.push((closest.clone(), 0));
                &mut turn.last_mut().expect("just pushed").1
            }
        };
        unit_nic[i] = Some(closest[*t % closest.len()]);
        *t += 1;
    }
    // Task t goes to unit t mod U; each group's tasks are placed on the group's CPUs (or, for
    // -c, on those of an object holding them: below).
    let unit_of = |t: u32| (t % u) as usize;
    let group_tasks: Vec<Vec<u32>> = groups
        .iter()
        .map(|(_, members)| (0..np).filter(|&t| members.contains(&unit_of(t))).collect())
        .collect();
    let group_gpus = |g: usize| {
        names(
            gpus,
            groups[g].1.iter().flat_map(|&m| units[m].iter().copied()),
        )
    };
    if let Some(Bind::Width { level, .. }) = req.bind {
        for (g, (cpus, _)) in groups.iter().enumerate() {
            if group_tasks[g].is_empty() {
                continue;
            }
            check_width(machine, level, cpus).map_err(|near| GpuError::Wider {
                bind: req.bind.unwrap_or(Bind::None),
                gpu: group_gpus(g),
                cpus: os_list(machine, cpus),
                near,
            })?;
        }
    }
    let per_task = req.cpus_per_task.max(1);
    // Where the tasks go: each group's CPUs, unless the default binding for -c cannot give
    // its tasks CPUs of their own there; then the smallest object holding them that can.
    let mut spots: Vec<Spot> = groups
        .iter()
        .enumerate()
        .filter(|(g, _)| !group_tasks[*g].is_empty())
        .map(|(g, (cpus, _))| Spot {
            cpus: cpus.clone(),
            groups: vec![g],
            object: None,
        })
        .collect();
    if req.bind.is_some() && !req.bind_asked && per_task > 1 {
        let tasks_of = |s: &Spot| s.groups.iter().map(|&g| group_tasks[g].len() as u32).sum();
        let fits = |cpus: &[u32], n: u32| {
            let sub = machine.restrict(&os_list(machine, cpus));
            place_group(&sub, req, n)
                .1
                .is_ok_and(|p| p.passes() <= 1 && p.overlaps().is_empty())
        };
        if let Some(wider) = widen(machine, spots.clone(), &tasks_of, &fits) {
            spots = wider;
            for spot in spots.iter_mut().filter(|s| s.object.is_some()) {
                spot.groups
                    .sort_by_key(|&g| groups[g].0.first().copied().unwrap_or(u32::MAX));
                let what = match req.cpu_unit {
                    CpuUnit::Thread => "CPUs",
                    CpuUnit::Core => "cores",
                };
                // Each group whose own CPUs cannot give its tasks CPUs of their own (a group
                // that could is here because another's widened CPUs hold it).
                let why: Vec<String> = spot
                    .groups
                    .iter()
                    .filter(|&&g| !fits(&groups[g].0, group_tasks[g].len() as u32))
                    .map(|&g| {
                        let n = group_tasks[g].len() as u64;
                        let need = n * u64::from(per_task);
                        let have = cpus_covered(machine, &groups[g].0, req.cpu_unit);
                        let near = group_gpus(g);
                        match (need > u64::from(have), n) {
                            (true, 1) => {
                                format!("-c {per_task} is more than the {have} {what} near {near}")
                            }
                            (true, _) => format!(
                                "{n} tasks of -c {per_task} need {need} {what}, more than the \
                                 {have} near {near}"
                            ),
                            (false, _) => format!(
                                "{n} task(s) of -c {per_task} cannot each have {per_task} {what} \
                                 of their own among the {have} near {near}"
                            ),
                        }
                    })
                    .collect();
                let n = tasks_of(spot);
                let who = if spot.groups.len() > 1 {
                    // The GPUs of these tasks (a group's GPUs without a task left out).
                    let used = spot.groups.iter().flat_map(|&g| {
                        groups[g]
                            .1
                            .iter()
                            .filter(|&&m| (m as u32) < np)
                            .flat_map(|&m| units[m].iter().copied())
                    });
                    format!("the {n} tasks of {} run together", names(gpus, used))
                } else if n == 1 {
                    "its task runs".to_string()
                } else {
                    format!("its {n} tasks run")
                };
                notes.push(format!(
                    "{}: {who} on the CPUs of {} holding them ({}), none shared",
                    why.join("; "),
                    spot.object.as_deref().unwrap_or("the node"),
                    os_list(machine, &spot.cpus)
                ));
            }
        }
    }
    let mut groups_bound = Vec::new();
    let mut tasks: Vec<Option<GpuTask>> = vec![None; np as usize];
    for spot in &spots {
        let cpus = &spot.cpus;
        // The tasks of each group in turn (groups in the order of their CPUs), so that the
        // layout puts each group's tasks next to one another.
        let mine: Vec<u32> = spot
            .groups
            .iter()
            .flat_map(|&g| group_tasks[g].iter().copied())
            .collect();
        let cpus_os = os_list(machine, cpus);
        let sub = machine.restrict(&cpus_os);
        let gpu_names = names(
            gpus,
            spot.groups
                .iter()
                .flat_map(|&g| groups[g].1.iter().flat_map(|&m| units[m].iter().copied())),
        );
        let (widened, placed) = place_group(&sub, req, mine.len() as u32);
        let placed = placed.map_err(|error| GpuError::Place {
            tasks: mine.len() as u32,
            gpus: gpu_names.clone(),
            cpus: cpus_os.clone(),
            error: Box::new(error),
        })?;
        if req.bind.is_some() {
            let narrowest = (0..mine.len())
                .map(|j| placed.info(j).bound_logical)
                .min_by_key(Vec::len)
                .unwrap_or_default();
            groups_bound.push(GroupBinding {
                gpus: gpu_names.clone(),
                tasks: mine.len() as u32,
                widened,
                used: placed.request().bind,
                narrowest,
                shared: if req.bind_asked {
                    placed.overlap_warning_needing(
                        |j| rank(mine[j as usize]),
                        crate::hybrid::threads_needed(&sub, req.cpus_per_task, req.cpu_unit),
                    )
                } else {
                    None
                },
            });
        }
        for (j, &t) in mine.iter().enumerate() {
            let info = placed.info(j);
            let (bound_logical, cpus_bound) = match req.bind {
                None => (cpus.clone(), cpus_os.clone()),
                Some(_) => (info.bound_logical, info.cpus),
            };
            let unit = unit_of(t);
            tasks[t as usize] = Some(GpuTask {
                gpus: units[unit].clone(),
                nic: unit_nic[unit],
                pu_logical: info.pu_logical,
                bound_logical,
                cpus: cpus_bound,
                bind: req.bind.map(|_| placed.request().bind),
            });
        }
    }
    Ok(GpuPlacement {
        tasks: tasks
            .into_iter()
            .map(|t| t.expect("every task is in one group"))
            .collect(),
        notes,
        groups: groups_bound,
    })
}

/// Places `np` tasks of one group of GPUs on `sub` (the node restricted to the CPUs given to
/// the group) by the CPU path's rule: the default binding widened for `-c`, with
/// [`place_cpus_per_task`]'s exact fallback, so it never shares; an asked binding by [`place`].
/// Also returns the binding tried first.
fn place_group<'m>(
    sub: &'m Machine,
    req: &GpuRequest,
    np: u32,
) -> (Bind, Result<Placement<'m>, PlaceError>) {
    // Without -c and without an asked binding, each task's share of the group's CPUs (the
    // step's CPUs near its GPUs, threads): a GPU task's host threads feed the GPU, and one core
    // starves them; mpibind gives the same share. With -c, the CPU path's rule.
    let share = req.bind.is_some() && !req.bind_asked && req.cpus_per_task <= 1;
    let (per_task, unit) = if share {
        let pus = sub.available().len() as u32;
        ((pus / np.max(1)).max(1), CpuUnit::Thread)
    } else {
        (req.cpus_per_task.max(1), req.cpu_unit)
    };
    // The CPU path's rule: the default binding covers the task's CPUs and never shares.
    let widened = match req.bind {
        Some(_) if !req.bind_asked && per_task > 1 => binding_for_cpus(sub, per_task, unit),
        Some(b) => b,
        None => Bind::None,
    };
    let engine_req = Request {
        layout: req.layout.clone(),
        bind: widened,
        mppr: req.mppr.clone(),
        order: req.order,
        // Under 1g the tasks of GPUs near the same CPUs share them by design: only their
        // mapped PU comes from the layout, and it may repeat.
        oversubscribe: req.oversubscribe || req.bind.is_none(),
        np,
        bind_within: false,
    };
    let placed = if req.bind.is_some() && !req.bind_asked {
        let exact = exact_binding(sub, per_task, unit);
        place_cpus_per_task(&[sub], &engine_req, exact)
    } else {
        place(&[sub], &engine_req)
    };
    (widened, placed)
}

/// Where the tasks of one or more groups of GPUs are placed.
#[derive(Debug, Clone)]
struct Spot {
    /// Logical PUs, available, ascending: a group's CPUs, or those of an object holding them.
    cpus: Vec<u32>,
    /// The groups placed here (indexes among the groups of GPUs).
    groups: Vec<usize>,
    /// The object whose CPUs these are, when they were widened (`Package L#0`).
    object: Option<String>,
}

/// Widens the spots whose tasks do not fit (`fits(cpus, tasks)`, `tasks(spot)`) step by step
/// to the smallest object holding their CPUs that has more of them (a NUMA node, a package,
/// ... the node), until they fit. A spot widened over CPUs of another is merged with it: their
/// tasks are placed together, so no two tasks share a CPU. `None` when a spot does not fit even
/// on all the node's usable CPUs.
fn widen(
    m: &Machine,
    mut spots: Vec<Spot>,
    tasks: &dyn Fn(&Spot) -> u32,
    fits: &dyn Fn(&[u32], u32) -> bool,
) -> Option<Vec<Spot>> {
    let meets = |a: &[u32], b: &[u32]| a.iter().any(|q| b.binary_search(q).is_ok());
    let mut known = vec![false; spots.len()];
    while let Some(mut i) = known.iter().position(|k| !k) {
        if fits(&spots[i].cpus, tasks(&spots[i])) {
            known[i] = true;
            continue;
        }
        let (name, cpus) = holders(m, &spots[i].cpus)
            .into_iter()
            .find(|(_, c)| c.len() > spots[i].cpus.len())?;
        spots[i].cpus = cpus;
        spots[i].object = Some(name);
        while let Some(j) =
            (0..spots.len()).find(|&j| j != i && meets(&spots[j].cpus, &spots[i].cpus))
        {
            let other = spots.remove(j);
            known.remove(j);
            if j < i {
                i -= 1;
            }
            let s = &mut spots[i];
            s.groups.extend(other.groups);
            if !other.cpus.iter().all(|q| s.cpus.binary_search(q).is_ok()) {
                let mut union = s.cpus.clone();
                union.extend(other.cpus);
                union.sort_unstable();
                union.dedup();
                let (name, cpus) = holders(m, &union)
                    .into_iter()
                    .next()
                    .expect("the node holds every usable CPU");
                s.cpus = cpus;
                s.object = Some(name);
            }
        }
        known[i] = false;
    }
    Some(spots)
}

/// The objects of `m` holding all of `cpus` (logical PUs, available, ascending), each as its
/// name and its available PUs, smallest first, the node's last; objects with the same PUs once,
/// named by the first kind of package, NUMA node, die, caches, core. An object's number is its
/// place among the objects of its kind that have CPUs (hwloc's logical index, as devices name
/// the object they are near).
fn holders(m: &Machine, cpus: &[u32]) -> Vec<(String, Vec<u32>)> {
    let (Some(&lo), Some(&hi)) = (cpus.first(), cpus.last()) else {
        return Vec::new();
    };
    let kinds = [
        (Level::Socket, "Package"),
        (Level::Numa, "NUMANode"),
        (Level::Die, "Die"),
        (Level::L3, "L3Cache"),
        (Level::L2, "L2Cache"),
        (Level::L1, "L1Cache"),
        (Level::Core, "Core"),
    ];
    let mut out: Vec<(String, Vec<u32>)> = Vec::new();
    for (level, kind) in kinds {
        for (i, o) in m.objects(level).iter().enumerate() {
            if o.pus.start <= lo && hi < o.pus.end {
                out.push((format!("{kind} L#{i}"), usable(m, &o.pus)));
            }
        }
    }
    out.push((
        "Machine L#0".to_string(),
        usable(m, &(0..m.pus().len() as u32)),
    ));
    // Stable: of objects with the same PUs, the first named is kept.
    out.sort_by_key(|(_, c)| c.len());
    out.dedup_by(|later, kept| later.1 == kept.1);
    out
}

/// The logical PUs of the smallest object of `m` (the whole machine at most) that holds every
/// range of logical PUs given.
fn holding<'a>(
    m: &Machine,
    ranges: impl IntoIterator<Item = &'a std::ops::Range<u32>>,
) -> std::ops::Range<u32> {
    let ranges: Vec<&std::ops::Range<u32>> = ranges.into_iter().collect();
    let holds =
        |o: &std::ops::Range<u32>, r: &std::ops::Range<u32>| o.start <= r.start && r.end <= o.end;
    crate::level::ALL_LEVELS
        .iter()
        .flat_map(|&l| m.objects(l))
        .filter(|o| ranges.iter().all(|r| holds(&o.pus, r)))
        .map(|o| o.pus.clone())
        .min_by_key(|r| (r.len(), r.start))
        .unwrap_or(0..m.pus().len() as u32)
}

/// With fewer tasks (`np`) than units, which units the tasks use: one at a time, the unit
/// farthest from those already chosen (whose nearest chosen unit shares the largest object
/// with it); among equals, the one with the fewest chosen units at that distance (the least
/// crowded domain), then the one sharing a PCIe host bridge with the fewest chosen units
/// (where the topology records them: GPUs under one host bridge share its link to the
/// processor), then the first in order. So two tasks on a node of two sockets with two
/// GPUs each use one GPU of each socket, not both of the first (LLNL mpibind spreads the same
/// way), a task is never added to a domain while another has none, and the domains fill
/// evenly: 4 tasks on 2 sockets of 4 GPUs each take 2 + 2, 6 take 3 + 3. The chosen units come
/// first, in their order; the rest follow, unused.
fn spread(m: &Machine, gpus: &[&Device], units: Vec<Vec<usize>>, np: usize) -> Vec<Vec<usize>> {
    let ranges: Vec<std::ops::Range<u32>> = units
        .iter()
        .map(|unit| holding(m, unit.iter().map(|&g| &gpus[g].pus)))
        .collect();
    let mut chosen: Vec<usize> = Vec::with_capacity(np);
    while chosen.len() < np {
        let next = (0..units.len())
            .filter(|i| !chosen.contains(i))
            .max_by_key(|&i| {
                let sizes: Vec<usize> = chosen
                    .iter()
                    .map(|&c| common_size(m, &ranges[i], &ranges[c]))
                    .collect();
                let nearest = sizes.iter().copied().min().unwrap_or(usize::MAX);
                let crowd = sizes.iter().filter(|&&s| s == nearest).count();
                // Among equals, a PCIe host bridge no chosen unit uses yet.
                let bridged = chosen
                    .iter()
                    .filter(|&&c| shares_bridge(gpus, &units[i], &units[c]))
                    .count();
                (
                    nearest,
                    std::cmp::Reverse(crowd),
                    std::cmp::Reverse(bridged),
                    std::cmp::Reverse(i),
                )
            })
            .expect("fewer tasks than units");
        chosen.push(next);
    }
    chosen.sort_unstable();
    let rest: Vec<usize> = (0..units.len()).filter(|i| !chosen.contains(i)).collect();
    let mut units: Vec<Option<Vec<usize>>> = units.into_iter().map(Some).collect();
    chosen
        .into_iter()
        .chain(rest)
        .map(|i| units[i].take().expect("each unit once"))
        .collect()
}

/// Whether two units have GPUs under one PCIe host bridge (where the topology records them).
fn shares_bridge(gpus: &[&Device], a: &[usize], b: &[usize]) -> bool {
    a.iter().any(|&x| {
        b.iter()
            .any(|&y| gpus[x].bridge.is_some() && gpus[x].bridge == gpus[y].bridge)
    })
}

/// The number of PUs of the smallest object of `m` (the whole machine at most) that holds both
/// ranges of logical PUs.
fn common_size(m: &Machine, a: &std::ops::Range<u32>, b: &std::ops::Range<u32>) -> usize {
    holding(m, [a, b]).len()
}

/// Checks that every object of `level` with CPUs among `cpus` lies inside them (else a binding
/// of that level would be clipped): the error names what the CPUs are.
fn check_width(whole: &Machine, level: Level, cpus: &[u32]) -> Result<(), String> {
    if matches!(level, Level::Node | Level::Board) {
        let all: Vec<u32> = (0..whole.pus().len() as u32)
            .filter(|&q| whole.pus()[q as usize].available)
            .collect();
        return if all == cpus {
            Ok(())
        } else {
            Err(format!("not the whole node ({})", os_list(whole, &all)))
        };
    }
    for o in whole.objects(level) {
        let inside: Vec<u32> = usable(whole, &o.pus);
        let touches = inside.iter().any(|q| cpus.binary_search(q).is_ok());
        let within = inside.iter().all(|q| cpus.binary_search(q).is_ok());
        if touches && !within {
            return Err(format!(
                "part of a {} ({})",
                level.name(),
                os_list(whole, &inside)
            ));
        }
    }
    Ok(())
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{DeviceSpec, MachineBuilder};

    fn dev(kind: DeviceKind, bus: &str, name: &str, pus_os: &[u32], near: &str) -> DeviceSpec {
        DeviceSpec {
            kind,
            vendor: "NVIDIA".into(),
            bus_id: bus.into(),
            uuid: None,
            names: vec![name.into()],
            pus_os: pus_os.to_vec(),
            near: near.into(),
            bridge: None,
        }
    }

    /// Two packages of two cores (PUs 0-1, 2-3); `gpus` and `nics` as (bus, name, PUs).
    fn node(gpus: &[(&str, &[u32])], nics: &[(&str, &[u32])]) -> Machine {
        let mut b = MachineBuilder::new("gpu-node");
        for q in 0..4 {
            b.pu(q, true);
        }
        b.object(Level::Socket, Some(0), &[0, 1]);
        b.object(Level::Socket, Some(1), &[2, 3]);
        for q in 0..4 {
            b.object(Level::Core, Some(q), &[q]);
        }
        for (i, (bus, pus)) in gpus.iter().enumerate() {
            b.device(dev(
                DeviceKind::Gpu,
                bus,
                &format!("cuda{i}"),
                pus,
                "Package",
            ));
        }
        for (name, pus) in nics {
            b.device(dev(DeviceKind::Nic, "0000:99:00.0", name, pus, "Package"));
        }
        b.build().unwrap()
    }

    fn lassen() -> Machine {
        node(
            &[
                ("0000:04:00.0", &[0, 1]),
                ("0000:05:00.0", &[0, 1]),
                ("0035:03:00.0", &[2, 3]),
                ("0035:04:00.0", &[2, 3]),
            ],
            &[
                ("eth0", &[0, 1, 2, 3]),
                ("mlx5_0", &[0, 1]),
                ("mlx5_1", &[2, 3]),
            ],
        )
    }

    fn req(layout: &str, bind: Option<&str>) -> GpuRequest {
        GpuRequest {
            fixed: false,
            layout: parse_gpu_layout(layout).unwrap().unwrap(),
            bind: bind.map(|b| Bind::parse(b).unwrap()),
            mppr: Mppr::none(),
            per_gpu: None,
            gpus_per_task: 1,
            order: Order::Natural,
            oversubscribe: false,
            bind_asked: bind.is_some(),
            cpus_per_task: 1,
            cpu_unit: CpuUnit::Thread,
        }
    }

    fn all_gpus(m: &Machine) -> Vec<&Device> {
        m.devices()
            .iter()
            .filter(|d| d.kind == DeviceKind::Gpu)
            .collect()
    }

    fn summary(m: &Machine, p: &GpuPlacement) -> Vec<(Vec<usize>, String, Option<String>)> {
        p.tasks
            .iter()
            .map(|t| {
                (
                    t.gpus.clone(),
                    t.cpus.to_string(),
                    t.nic.map(|n| m.devices()[n].names[0].clone()),
                )
            })
            .collect()
    }

    #[test]
    fn one_gpu_per_task_on_the_cores_near_it_with_its_nic() {
        // By hand: GPUs 0,1 are near package 0 (CPUs 0-1), 2,3 near package 1 (CPUs 2-3);
        // the fabric cards mlx5_0 and mlx5_1 are near package 0 and 1; eth0 is not fabric.
        let m = lassen();
        let p = place_by_gpu(&m, &all_gpus(&m), 4, &req("gcsbnh", Some("1c")), "").unwrap();
        let nic = |s: &str| Some(s.to_string());
        assert_eq!(
            summary(&m, &p),
            vec![
                (vec![0], "0".to_string(), nic("mlx5_0")),
                (vec![1], "1".to_string(), nic("mlx5_0")),
                (vec![2], "2".to_string(), nic("mlx5_1")),
                (vec![3], "3".to_string(), nic("mlx5_1")),
            ]
        );
        assert!(p.notes.is_empty(), "{:?}", p.notes);
        // Fewer tasks than GPUs: two tasks use one GPU of each package (GPUs 0 and 2), not
        // GPUs 0 and 1, both near package 0, which would leave package 1 idle.
        let two = place_by_gpu(&m, &all_gpus(&m), 2, &req("gcsbnh", Some("1c")), "").unwrap();
        assert_eq!(
            summary(&m, &two),
            vec![
                (vec![0], "0".to_string(), nic("mlx5_0")),
                (vec![2], "2".to_string(), nic("mlx5_1")),
            ]
        );
        assert_eq!(
            two.notes,
            ["2 task(s) for 4 GPU group(s): gpu1,gpu3 used by no task"]
        );
        // Three: package 0 gets a second task only once package 1 has one.
        let three = place_by_gpu(&m, &all_gpus(&m), 3, &req("gcsbnh", Some("1c")), "").unwrap();
        let gpus: Vec<Vec<usize>> = three.tasks.iter().map(|t| t.gpus.clone()).collect();
        assert_eq!(gpus, [vec![0], vec![1], vec![2]]);
    }

    #[test]
    fn a_task_of_several_gpus_runs_near_all_of_them() {
        // By hand: four GPUs near the four cores of a 2-package node (GPU i near core i), two
        // GPUs per task. Task 0 holds GPUs 0 and 1 and runs on cores 0-1 (near either), not on
        // core 0 alone; task 1 on cores 2-3.
        let m = node(
            &[
                ("0000:01:00.0", &[0]),
                ("0000:02:00.0", &[1]),
                ("0000:03:00.0", &[2]),
                ("0000:04:00.0", &[3]),
            ],
            &[],
        );
        let mut two = req("gpu", None);
        two.gpus_per_task = 2;
        let p = place_by_gpu(&m, &all_gpus(&m), 2, &two, "").unwrap();
        assert_eq!(summary(&m, &p)[0], (vec![0, 1], "0-1".to_string(), None));
        assert_eq!(summary(&m, &p)[1], (vec![2, 3], "2-3".to_string(), None));
        // GPUs 0 and 2, then 1 and 3 (fixed by the launcher): cores 0 and 2, then 1 and 3.
        two.fixed = true;
        let gpus = all_gpus(&m);
        let p = place_by_gpu(&m, &[gpus[0], gpus[2], gpus[1], gpus[3]], 2, &two, "").unwrap();
        assert_eq!(p.tasks[0].cpus.to_string(), "0,2");
        assert_eq!(p.tasks[1].cpus.to_string(), "1,3");
    }

    #[test]
    fn gpus_follow_the_cpus_not_their_numbers() {
        // GPU 0 is near package 1 and GPU 1 near package 0 (as on Tioga): task 0 gets GPU 1.
        let m = node(&[("0000:01:00.0", &[2, 3]), ("0000:02:00.0", &[0, 1])], &[]);
        let p = place_by_gpu(&m, &all_gpus(&m), 2, &req("g", Some("1c")), "").unwrap();
        assert_eq!(summary(&m, &p)[0], (vec![1], "0".to_string(), None));
        assert_eq!(summary(&m, &p)[1], (vec![0], "2".to_string(), None));
    }

    #[test]
    fn bind_to_the_gpu_cpus_and_several_gpus_per_task() {
        let m = lassen();
        let p = place_by_gpu(&m, &all_gpus(&m), 4, &req("gpu", None), "").unwrap();
        assert_eq!(p.tasks[0].cpus.to_string(), "0-1");
        assert_eq!(
            p.tasks[1].cpus.to_string(),
            "0-1",
            "GPU 1 is near package 0 too"
        );
        let mut two = req("gpu", None);
        two.gpus_per_task = 2;
        let p = place_by_gpu(&m, &all_gpus(&m), 2, &two, "").unwrap();
        assert_eq!(summary(&m, &p)[0].0, vec![0, 1]);
        assert_eq!(summary(&m, &p)[1].0, vec![2, 3]);
        assert_eq!(p.tasks[1].cpus.to_string(), "2-3");
        // The step's GPUs in another order (gpu0, gpu2, gpu3, gpu1): pairs are still made of
        // GPUs near the same CPUs (positions 0 and 3 are gpu0 and gpu1, near package 0).
        let gpus = all_gpus(&m);
        let p = place_by_gpu(&m, &[gpus[0], gpus[2], gpus[3], gpus[1]], 2, &two, "").unwrap();
        assert_eq!(
            summary(&m, &p)[0].0,
            vec![0, 3],
            "gpu0 and gpu1, both near package 0"
        );
        assert_eq!(summary(&m, &p)[1].0, vec![1, 2]);
        two.gpus_per_task = 5;
        let e = place_by_gpu(&m, &all_gpus(&m), 1, &two, "").unwrap_err();
        assert_eq!(
            e.to_string(),
            "each task asks for 5 GPUs, and only 4 are here (gpu0,gpu1,gpu2,gpu3)"
        );
    }

    #[test]
    fn tasks_per_gpu_are_capped_and_shared_round_robin() {
        let m = lassen();
        let mut r = req("gcsbnh", Some("1c"));
        r.oversubscribe = true;
        let p = place_by_gpu(&m, &all_gpus(&m), 8, &r, "").unwrap();
        let gpus: Vec<usize> = p.tasks.iter().map(|t| t.gpus[0]).collect();
        assert_eq!(gpus, vec![0, 1, 2, 3, 0, 1, 2, 3]);
        r.per_gpu = Some(1);
        let e = place_by_gpu(&m, &all_gpus(&m), 5, &r, "").unwrap_err();
        assert!(e
            .to_string()
            .starts_with("5 tasks with at most 1 per GPU need 5 GPU(s)"));
    }

    #[test]
    fn wider_bindings_missing_gpus_and_overlaps_are_refused() {
        let m = lassen();
        let e = place_by_gpu(&m, &all_gpus(&m), 2, &req("g", Some("1n")), "").unwrap_err();
        assert!(e
            .to_string()
            .starts_with("binding 1n is wider than the CPUs near gpu0,gpu1"));
        assert!(place_by_gpu(&m, &all_gpus(&m), 2, &req("g", Some("1s")), "").is_ok());
        let e = place_by_gpu(&m, &[], 2, &req("g", None), "the step has no GPU").unwrap_err();
        assert_eq!(
            e.to_string(),
            "a 'g' layout places tasks by GPU, and the step has no GPU"
        );
        let m = node(&[("0000:01:00.0", &[0]), ("0000:02:00.0", &[0, 1])], &[]);
        let e = place_by_gpu(&m, &all_gpus(&m), 2, &req("g", None), "").unwrap_err();
        assert!(matches!(e, GpuError::Overlap { .. }), "{e}");
    }

    #[test]
    fn gpus_sharing_the_whole_node_and_partial_steps_are_said() {
        let m = node(
            &[
                ("0000:01:00.0", &[0, 1, 2, 3]),
                ("0000:02:00.0", &[0, 1, 2, 3]),
            ],
            &[],
        );
        let p = place_by_gpu(&m, &all_gpus(&m), 2, &req("gcsbnh", Some("1c")), "").unwrap();
        assert!(p.notes[0].starts_with("all 2 GPUs are near the same CPUs (0-3)"));
        assert_eq!(p.tasks[1].cpus.to_string(), "1");
        // A step with package 1's CPUs only, and GPU 0 (near package 0): its task uses the
        // step's CPUs, never package 0's.
        let m = lassen().restrict(&CpuList::parse("2-3").unwrap());
        let gpus = all_gpus(&m);
        let p = place_by_gpu(&m, &gpus[..1], 1, &req("g", None), "").unwrap();
        assert_eq!(p.tasks[0].cpus.to_string(), "2-3");
        assert!(p.notes[0].starts_with("none of the CPUs near gpu0 (0-1) can be used here"));
    }

    #[test]
    fn dual_rail_nodes_share_out_their_cards() {
        let m = node(
            &[("0000:01:00.0", &[0, 1]), ("0000:02:00.0", &[0, 1])],
            &[("mlx5_0", &[0, 1]), ("mlx5_1", &[0, 1])],
        );
        let p = place_by_gpu(&m, &all_gpus(&m), 2, &req("g", Some("1c")), "").unwrap();
        let nics: Vec<_> = summary(&m, &p).into_iter().map(|s| s.2.unwrap()).collect();
        assert_eq!(nics, vec!["mlx5_0", "mlx5_1"]);
    }

    #[test]
    fn the_language() {
        assert_eq!(
            parse_gpu_layout("gcsbnh").unwrap().unwrap().to_string(),
            "csbnh"
        );
        assert_eq!(
            parse_gpu_layout("gpu").unwrap().unwrap().to_string(),
            "csbnh"
        );
        assert!(parse_gpu_layout("csbnh").is_none());
        let d = parse_gpu_layout("gcx").unwrap().unwrap_err();
        assert_eq!((d.input.as_str(), d.span), ("gcx", Some((2, 1))));
        let d = Layout::parse("cgs").unwrap_err();
        assert!(d.reason.contains("may only lead a layout"), "{}", d.reason);
        assert!(is_gpu_bind("1g") && !is_gpu_bind("2g"));
        assert_eq!(
            split_gpu_mppr("2:g,1:c").unwrap(),
            (Some(2), Some("1:c".to_string()))
        );
        assert_eq!(split_gpu_mppr("1:g").unwrap(), (Some(1), None));
        assert_eq!(split_gpu_mppr("0:g,1:c").unwrap_err().span, Some((0, 1)));
    }

    /// One package of two cores of two threads (PUs 0-1, 2-3), one GPU near all of it.
    fn smt_node() -> Machine {
        smt_node_with_gpu_near(&[0, 1, 2, 3], "Package")
    }

    /// One package of two cores of two threads (PUs 0-1, 2-3), one GPU near `pus` (`near`).
    fn smt_node_with_gpu_near(pus: &[u32], near: &str) -> Machine {
        let mut b = MachineBuilder::new("smt");
        for q in 0..4 {
            b.pu(q, true);
        }
        b.object(Level::Socket, Some(0), &[0, 1, 2, 3]);
        b.object(Level::Core, Some(0), &[0, 1]);
        b.object(Level::Core, Some(1), &[2, 3]);
        b.device(dev(DeviceKind::Gpu, "0000:01:00.0", "cuda0", pus, near));
        b.build().unwrap()
    }

    #[test]
    fn the_default_binding_keeps_the_cpu_paths_rules() {
        let m = smt_node();
        let gpus = all_gpus(&m);
        let cpus = |p: &GpuPlacement| {
            p.tasks
                .iter()
                .map(|t| t.cpus.to_string())
                .collect::<Vec<_>>()
        };
        // Three tasks on two cores: 1c would share a core; by hand each task gets the one
        // thread it is mapped to (csbnh: PU 0 of core 0, PU 2 of core 1, then PU 1), and the
        // group says it fell back.
        let mut r = req("gcsbnh", Some("1c"));
        r.bind_asked = false;
        let p = place_by_gpu(&m, &gpus, 3, &r, "none").unwrap();
        assert_eq!(cpus(&p), ["0", "2", "1"]);
        assert_eq!(p.groups[0].used.to_string(), "1h");
        assert_eq!(p.groups[0].widened.to_string(), "1c");
        // The same binding asked for is applied as asked; two ranks on a core of two threads
        // is what 1c means, so nothing is said.
        r.bind_asked = true;
        let p = place_by_gpu_ranked(&m, &gpus, 3, &r, "none", &|t| t + 10).unwrap();
        assert_eq!(cpus(&p), ["0-1", "2-3", "0-1"]);
        assert_eq!(p.groups[0].shared, None);
        // -c 2 with the default: each task gets a whole core (2 threads).
        r.bind_asked = false;
        r.cpus_per_task = 2;
        let p = place_by_gpu(&m, &gpus, 2, &r, "none").unwrap();
        assert_eq!(cpus(&p), ["0-1", "2-3"]);
        assert_eq!(p.groups[0].used.to_string(), "1c");
        // -c 3: whole cores do not fit two tasks; exactly 3 threads each would need 6.
        r.cpus_per_task = 3;
        assert!(place_by_gpu(&m, &gpus, 2, &r, "none").is_err());
        r.oversubscribe = true;
        assert!(place_by_gpu(&m, &gpus, 2, &r, "none").is_ok());
    }

    #[test]
    fn fixed_gpus_keep_the_callers_order_and_only_cpus_are_placed() {
        // By hand: GPU 2 is near package 1 (CPUs 2-3), GPU 0 near package 0 (CPUs 0-1). Fixed
        // in the order [2, 0], task 0 keeps GPU 2 and runs on CPU 2, task 1 keeps GPU 0 on CPU
        // 0, where LAMA's own choice would give task 0 GPU 0.
        let m = lassen();
        let all = all_gpus(&m);
        let given = [all[2], all[0]];
        let mut r = req("gcsbnh", Some("1c"));
        r.fixed = true;
        let p = place_by_gpu(&m, &given, 2, &r, "none").unwrap();
        assert_eq!(
            summary(&m, &p),
            [
                (vec![0], "2".to_string(), Some("mlx5_1".to_string())),
                (vec![1], "0".to_string(), Some("mlx5_0".to_string()))
            ]
        );
        r.fixed = false;
        let own = place_by_gpu(&m, &given, 2, &r, "none").unwrap();
        assert_eq!(own.tasks[0].gpus, [1]);
        // Three tasks for two bound GPUs: refused, naming what is needed.
        r.fixed = true;
        let e = place_by_gpu(&m, &given, 3, &r, "none")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("3 task(s) need 3 GPU(s) and the step has 2 here"),
            "{e}"
        );
    }

    #[test]
    fn slots_per_gpu_joined_for_any_gpus_a_task_is_given() {
        // Lassen by hand: GPUs 0,1 near package 0 (CPUs 0-1), 2,3 near package 1 (CPUs 2-3).
        // One slot per GPU, 1c each: GPU 0 on CPU 0, GPU 1 on CPU 1, GPU 2 on 2, GPU 3 on 3.
        let m = lassen();
        let all = all_gpus(&m);
        let mut r = req("gcsbnh", Some("1c"));
        r.gpus_per_task = 2;
        let slots = place_gpu_slots(&m, &all, &r, "none").unwrap();
        let cpus: Vec<String> = slots.tasks.iter().map(|t| t.cpus.to_string()).collect();
        assert_eq!(cpus, ["0", "1", "2", "3"]);
        // Any two GPUs a resource manager gives one task: their slots joined, the first's NIC.
        let t = join_slots(&slots.tasks, &[0, 2]).unwrap();
        assert_eq!(
            (t.cpus.to_string(), t.gpus.clone()),
            ("0,2".to_string(), vec![0, 2])
        );
        assert_eq!(t.nic, slots.tasks[0].nic);
        assert_eq!(t.bound_logical.len(), 2);
        // Two slots of 1c: the task's binding is 2c.
        assert_eq!(t.bind, Some(Bind::parse("2c").unwrap()));
        assert_eq!(
            join_slots(&slots.tasks, &[3, 1]).unwrap().cpus.to_string(),
            "1,3"
        );
        assert!(join_slots(&slots.tasks, &[]).is_none());
        assert!(join_slots(&slots.tasks, &[4]).is_none());
        // -c 2 over two GPUs: one CPU per slot (2 / 2), by default each slot its GPU's share:
        // a task given GPUs 0 and 1 gets package 0's two CPUs, -c 2 as asked.
        let mut c = req("gcsbnh", Some("1c"));
        c.gpus_per_task = 2;
        c.cpus_per_task = 2;
        c.bind_asked = false;
        let slots = place_gpu_slots(&m, &all, &c, "none").unwrap();
        assert_eq!(cpus_of(&slots), ["0", "1", "2", "3"]);
        assert_eq!(
            join_slots(&slots.tasks, &[0, 1]).unwrap().cpus.to_string(),
            "0-1"
        );
        // -c 3 rounds up to 2 per slot: 4 CPUs for a package's two GPUs, which has 2.
        c.cpus_per_task = 3;
        let r = place_gpu_slots(&m, &all, &c, "none");
        assert!(matches!(r, Err(GpuError::Place { .. })), "{r:?}");
    }

    /// `packages` packages of `numas` NUMA nodes of `cores` cores of one thread each, numbered
    /// in order (package 0 holds PUs 0..numas*cores), and one GPU near each PU list of `gpus`.
    fn numa_node(packages: u32, numas: u32, cores: u32, gpus: &[&[u32]]) -> Machine {
        let mut b = MachineBuilder::new("numa-node");
        let per_numa = cores;
        let per_package = numas * per_numa;
        for q in 0..packages * per_package {
            b.pu(q, true);
            b.object(Level::Core, Some(q), &[q]);
        }
        for p in 0..packages {
            let pus: Vec<u32> = (p * per_package..(p + 1) * per_package).collect();
            b.object(Level::Socket, Some(p), &pus);
        }
        for n in 0..packages * numas {
            let pus: Vec<u32> = (n * per_numa..(n + 1) * per_numa).collect();
            b.object(Level::Numa, Some(n), &pus);
        }
        for (i, pus) in gpus.iter().enumerate() {
            b.device(dev(
                DeviceKind::Gpu,
                &format!("0000:{:02x}:00.0", i + 1),
                &format!("cuda{i}"),
                pus,
                "NUMANode",
            ));
        }
        b.build().unwrap()
    }

    /// The default binding (`1c`, not asked) with `-c`.
    fn with_c(cpus_per_task: u32) -> GpuRequest {
        let mut r = req("gcsbnh", Some("1c"));
        r.bind_asked = false;
        r.cpus_per_task = cpus_per_task;
        r
    }

    fn cpus_of(p: &GpuPlacement) -> Vec<String> {
        p.tasks.iter().map(|t| t.cpus.to_string()).collect()
    }

    #[test]
    fn a_wide_c_widens_to_the_smallest_object_holding_the_gpus() {
        // By hand: 2 packages (PUs 0-3, 4-7) of 2 NUMA nodes of 2 cores (0-1, 2-3, 4-5, 6-7),
        // GPU 0 near NUMA node 0 (0-1), GPU 1 near NUMA node 2 (4-5).
        let m = numa_node(2, 2, 2, &[&[0, 1], &[4, 5]]);
        let gpus = all_gpus(&m);
        // -c 2 fits the CPUs near each GPU: nothing widens, nothing is said.
        let p = place_by_gpu(&m, &gpus, 2, &with_c(2), "").unwrap();
        assert_eq!(cpus_of(&p), ["0-1", "4-5"]);
        assert!(p.notes.is_empty(), "{:?}", p.notes);
        // -c 3 is more than a NUMA node's 2: each task gets 3 cores (3c) of the package
        // holding its GPU's NUMA node, from its first core (0-2 in 0-3, 4-6 in 4-7).
        let p = place_by_gpu(&m, &gpus, 2, &with_c(3), "").unwrap();
        assert_eq!(cpus_of(&p), ["0-2", "4-6"]);
        assert_eq!(p.groups.len(), 2);
        assert_eq!(p.groups[0].used.to_string(), "3c");
        assert_eq!(
            p.notes,
            [
                "-c 3 is more than the 2 CPUs near gpu0: its task runs on the CPUs of Package \
                 L#0 holding them (0-3), none shared",
                "-c 3 is more than the 2 CPUs near gpu1: its task runs on the CPUs of Package \
                 L#1 holding them (4-7), none shared",
            ]
        );
        // -c 4: the whole package each.
        let p = place_by_gpu(&m, &gpus, 2, &with_c(4), "").unwrap();
        assert_eq!(cpus_of(&p), ["0-3", "4-7"]);
        // One task of -c 5: more than a package, so the whole node (its first 5 cores).
        let p = place_by_gpu(&m, &gpus, 1, &with_c(5), "").unwrap();
        assert_eq!(cpus_of(&p), ["0-4"]);
        assert!(
            p.notes[1].ends_with(
                "its task runs on the CPUs of Machine L#0 holding them (0-7), none shared"
            ),
            "{:?}",
            p.notes
        );
        // Two tasks of -c 5 need 10 CPUs, and the node has 8: refused as before, naming the
        // CPUs near the GPU.
        let e = place_by_gpu(&m, &gpus, 2, &with_c(5), "").unwrap_err();
        assert!(
            matches!(&e, GpuError::Place { cpus, .. } if cpus.to_string() == "0-1"),
            "{e}"
        );
        // Allowed to oversubscribe: when the node cannot give every task its CPUs either, the
        // tasks stay on the CPUs near their GPU as before (5 tasks of -c 2 on GPU 0 alone:
        // 10 CPUs of 8), sharing them in passes; when the node can (3 tasks: 6 CPUs, more
        // than package 0's 4), they are widened rather than oversubscribed: csbnh takes the
        // cores in order, 2 at a time (0-1, 2-3, then package 1's 4-5).
        let mut over = with_c(2);
        over.oversubscribe = true;
        let p = place_by_gpu(&m, &gpus[..1], 5, &over, "").unwrap();
        assert!(p.tasks.iter().all(|t| t.cpus.to_string() == "0-1"), "{p:?}");
        assert!(!p.notes.iter().any(|n| n.contains("holding them")));
        let p = place_by_gpu(&m, &gpus[..1], 3, &over, "").unwrap();
        assert_eq!(cpus_of(&p), ["0-1", "2-3", "4-5"]);
        assert!(
            p.notes[0].contains("Machine L#0 holding them (0-7)"),
            "{:?}",
            p.notes
        );
    }

    #[test]
    fn groups_whose_widened_cpus_meet_are_placed_together() {
        // By hand: GPUs 0 and 1 near NUMA nodes 0 (0-1) and 1 (2-3) of package 0 (0-3), GPU 2
        // near NUMA node 2 (4-5) of package 1 (4-7). With -c 2 each task fits its NUMA node.
        let m = numa_node(2, 2, 2, &[&[0, 1], &[2, 3], &[4, 5]]);
        let gpus = all_gpus(&m);
        let p = place_by_gpu(&m, &gpus, 3, &with_c(2), "").unwrap();
        assert_eq!(cpus_of(&p), ["0-1", "2-3", "4-5"]);
        // Four tasks, round-robin: tasks 0 and 3 on GPU 0, 1 on GPU 1, 2 on GPU 2. GPU 0's two
        // tasks need 4 CPUs, its NUMA node has 2: widened to package 0 (0-3), which holds GPU
        // 1's CPUs, so the three tasks of GPUs 0 and 1 go there together, 6 CPUs of 4; widened
        // again to the node (0-7), which holds GPU 2's: all four, 8 CPUs of 8. Each GPU's tasks
        // in turn, in the order of their CPUs (tasks 0, 3, 1, 2), take 2 cores each in order:
        // 0-1, 2-3, 4-5, 6-7.
        let p = place_by_gpu(&m, &gpus, 4, &with_c(2), "").unwrap();
        assert_eq!(cpus_of(&p), ["0-1", "4-5", "6-7", "2-3"]);
        assert_eq!(p.groups.len(), 1);
        assert_eq!(p.groups[0].gpus, "gpu0,gpu1,gpu2");
        assert_eq!(
            p.notes,
            [
                "2 tasks of -c 2 need 4 CPUs, more than the 2 near gpu0: the 4 tasks of \
                 gpu0,gpu1,gpu2 run together on the CPUs of Machine L#0 holding them (0-7), none \
                 shared"
            ]
        );
        // Three tasks of -c 3: GPU 0's widened to package 0 meets GPU 1's (6 CPUs of 4), the
        // node then meets GPU 2's (9 CPUs of 8): refused.
        assert!(place_by_gpu(&m, &gpus, 3, &with_c(3), "").is_err());
        // GPUs 0 and 1 only, one task of -c 3 each: widened to package 0 they meet, 6 CPUs of
        // 4 do not fit, so both go to the node: 3 cores each, kept inside a package (0-2 and
        // 4-6).
        let m = numa_node(2, 2, 2, &[&[0, 1], &[2, 3]]);
        let p = place_by_gpu(&m, &all_gpus(&m), 2, &with_c(3), "").unwrap();
        assert_eq!(cpus_of(&p), ["0-2", "4-6"]);
        assert!(p.notes[0].starts_with(
            "-c 3 is more than the 2 CPUs near gpu0; -c 3 is more than the 2 CPUs near gpu1: \
             the 2 tasks of gpu0,gpu1 run together on the CPUs of Machine L#0"
        ));
    }

    #[test]
    fn an_asked_binding_restricted_cpus_and_cores_keep_their_rules() {
        let m = numa_node(2, 2, 2, &[&[0, 1], &[4, 5]]);
        let gpus = all_gpus(&m);
        // A binding that was asked for is not widened: 3c on 2 CPUs cannot be placed.
        let mut asked = req("gcsbnh", Some("3c"));
        asked.cpus_per_task = 3;
        let e = place_by_gpu(&m, &gpus, 2, &asked, "").unwrap_err();
        assert!(matches!(e, GpuError::Place { .. }), "{e}");
        // 1c asked with -c 3: one core each, near the GPUs.
        let mut asked = req("gcsbnh", Some("1c"));
        asked.cpus_per_task = 3;
        let p = place_by_gpu(&m, &gpus, 2, &asked, "").unwrap();
        assert_eq!(cpus_of(&p), ["0", "4"]);
        // Under 1g the tasks stay on the CPUs near their GPUs whatever -c says.
        let mut all = req("gcsbnh", None);
        all.cpus_per_task = 3;
        let p = place_by_gpu(&m, &gpus, 2, &all, "").unwrap();
        assert_eq!(cpus_of(&p), ["0-1", "4-5"]);
        // A step with CPUs 0-2 and 4-7: package 0 gives only its usable CPUs (0-2), enough
        // for -c 3.
        let step = m.restrict(&CpuList::parse("0-2,4-7").unwrap());
        let p = place_by_gpu(&step, &all_gpus(&step), 2, &with_c(3), "").unwrap();
        assert_eq!(cpus_of(&p), ["0-2", "4-6"]);
        assert!(
            p.notes[0].contains("Package L#0 holding them (0-2)"),
            "{:?}",
            p.notes
        );
        // CPUs counted as cores: the note says cores. By hand: one package (PUs 0-3) of two
        // cores of two threads, one GPU near core 0 (PUs 0-1) whose one task asks for 2 cores.
        let m = smt_node_with_gpu_near(&[0, 1], "Core");
        let mut cores = with_c(2);
        cores.cpu_unit = CpuUnit::Core;
        let p = place_by_gpu(&m, &all_gpus(&m), 1, &cores, "").unwrap();
        assert_eq!(cpus_of(&p), ["0-3"]);
        assert_eq!(
            p.notes,
            ["-c 2 is more than the 1 cores near gpu0: its task runs on the CPUs of Package L#0 \
              holding them (0-3), none shared"]
        );
    }
}

//! GPUs the way Slurm and the GPU runtimes name them, for the plugin and `lama map`: the
//! request of a `g` layout from the option strings, Slurm's GPU indexes of a step, and the
//! variables each task gets (docs/devices.md has the table).
//!
//! Slurm numbers a node's GPUs 0, 1, ... in the order of its GPU records
//! ([`crate::gres_conf`]); `SLURM_STEP_GPUS` holds those indexes (a NIC's, the number in its
//! file name: `gres_common.c`). With detection (`AutoDetect=`) that is PCI bus order, the order
//! in which the topology numbers its GPUs, and Slurm's GPU `k` is the topology's `gpu<k>`
//! ([`step_gpus`]); without, it is gres.conf's order of device files, and the plugin finds each
//! file's card by bus id. Where Slurm writes UUIDs instead (`Flags=env_uuid`), each names its
//! card and the order does not matter ([`step_gpus_by_uuid`]).

use crate::hostlist::shown;

use lama_engine::{
    is_gpu_bind, parse_gpu_layout, split_gpu_mppr, Bind, CpuUnit, Device, Diagnostic, GpuPlacement,
    GpuRequest, Mppr, Order,
};

/// The request of a `g` layout (`None` for any other layout), for tasks of `cpus_per_task`
/// CPUs of `unit` each (`-c`: the default binding covers them, as on the CPU path). `1g` and
/// `k:g` without a `g` layout are refused: they mean nothing without GPUs to place by.
#[allow(clippy::too_many_arguments)]
pub fn request(
    map: &str,
    bind: Option<&str>,
    mppr: Option<&str>,
    order: Order,
    gpus_per_task: u32,
    oversubscribe: bool,
    cpus_per_task: u32,
    unit: CpuUnit,
) -> Result<Option<GpuRequest>, String> {
    let show = |d: Diagnostic| crate::familiar::explain(d).to_string();
    let (per_gpu, cpu_mppr) = match mppr {
        Some(m) => split_gpu_mppr(m).map_err(show)?,
        None => (None, None),
    };
    let Some(layout) = parse_gpu_layout(map) else {
        if bind.is_some_and(is_gpu_bind) {
            return Err(format!(
                "binding '{}' binds to the CPUs near each task's GPU, and layout '{map}' does not \
                 place by GPU: lead it with 'g' (g{map})",
                bind.unwrap_or_default()
            ));
        }
        if per_gpu.is_some() {
            return Err(format!(
                "the MPPR limit k:g counts tasks per GPU, and layout '{map}' does not place by \
                 GPU: lead it with 'g' (g{map})"
            ));
        }
        return Ok(None);
    };
    let layout = layout.map_err(show)?;
    let bind_asked = bind.is_some();
    let bind = match bind {
        None => Some(Bind::default_for(&layout)),
        Some(b) if is_gpu_bind(b) => None,
        Some(b) => Some(Bind::parse(b).map_err(show)?),
    };
    let mppr = match cpu_mppr {
        Some(m) => Mppr::parse(&m).map_err(show)?,
        None => Mppr::none(),
    };
    Ok(Some(GpuRequest {
        fixed: false,
        bind_asked,
        cpus_per_task: cpus_per_task.max(1),
        cpu_unit: unit,
        layout,
        bind,
        mppr,
        per_gpu,
        gpus_per_task: gpus_per_task.max(1),
        order,
        oversubscribe,
    }))
}

/// What Slurm writes where gres.conf gives the GPUs no device file (`gres_common.c`).
const NO_DEV_FILES: &str = "NoDevFiles";

/// Slurm's GPU indexes (`SLURM_STEP_GPUS`, `0,2,5`), each once, in the order given.
pub fn parse_indexes(text: &str) -> Result<Vec<u32>, String> {
    if text.trim() == NO_DEV_FILES {
        return Err(no_dev_files("SLURM_STEP_GPUS"));
    }
    // (A set beside the list: the value is the user's, and a list of a million indexes must
    // not cost a million squared.)
    let (mut out, mut seen) = (Vec::new(), std::collections::HashSet::new());
    for item in text.split(',') {
        let n: u32 = item.trim().parse().map_err(|_| {
            format!(
                "'{}' in the GPU list '{}' is not a GPU index (0, 1, ...)",
                shown(item),
                shown(text)
            )
        })?;
        if !seen.insert(n) {
            return Err(format!(
                "GPU {n} appears twice in the GPU list '{}'",
                shown(text)
            ));
        }
        out.push(n);
    }
    Ok(out)
}

fn no_dev_files(var: &str) -> String {
    format!(
        "Slurm names no device for the step's GPUs ({var}={NO_DEV_FILES}: gres.conf gives them \
         no File=), so which GPUs the step holds is unknown: the admin names each GPU's device \
         in gres.conf (File= or AutoDetect); until then use a layout without 'g'"
    )
}

/// What the tokens of Slurm's value of a vendor variable (`CUDA_VISIBLE_DEVICES`, ...) name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VendorTokens {
    /// GPU numbers: Slurm's indexes, or numbers from 0 under `ConstrainDevices=yes`.
    Numbers,
    /// GPU UUIDs (`GPU-…`: gres.conf `Flags=env_uuid`, Slurm 26.05), each naming its card.
    Uuids,
}

/// What `tokens`, Slurm's value of `var`, name; an error with the reason for what LAMA cannot
/// place by: MIG instances (Slurm numbers instances, not cards, and an instance's `MIG-…` UUID
/// names no card the topology knows), `NoDevFiles`, or anything else.
pub fn vendor_tokens(var: &str, tokens: &[String]) -> Result<VendorTokens, String> {
    // (The tokens are shown bounded: the value is the user's where Slurm set none.)
    let all = shown(&tokens.join(","));
    if tokens.iter().any(|t| t.starts_with("MIG-")) {
        return Err(format!(
            "the step's GPUs are MIG instances ({var}={all}): Slurm numbers the instances, not \
             the cards, and an instance's UUID names no card of the node's topology, so LAMA \
             cannot tell which card each instance is on; use a layout without 'g' (the CPU \
             path, e.g. --lama-map=scbnh)"
        ));
    }
    if tokens.iter().any(|t| t == NO_DEV_FILES) {
        return Err(no_dev_files(var));
    }
    if tokens.iter().all(|t| t.parse::<u32>().is_ok()) {
        return Ok(VendorTokens::Numbers);
    }
    if tokens.iter().all(|t| t.starts_with("GPU-") && t.len() > 4) {
        return Ok(VendorTokens::Uuids);
    }
    let odd = tokens
        .iter()
        .find(|t| t.parse::<u32>().is_err() && !t.starts_with("GPU-"))
        .map_or(all.clone(), |t| shown(t));
    Err(format!(
        "{var}={all}: '{odd}' is neither a GPU number nor a GPU UUID (GPU-…), so LAMA cannot tell \
         which GPUs the step holds; use a layout without 'g'"
    ))
}

/// The topology's GPUs for Slurm's UUIDs (`uuids`, one per GPU of the step, in its order), or
/// the first UUID the topology lacks. hwloc knows a GPU's UUID from its vendor component
/// (NVML's `NVIDIAUUID`, ROCm SMI's `AMDUUID`); `None` when the topology knows no GPU's UUID
/// (a node whose hwloc has only its PCI component), where only Slurm's indexes are left.
pub fn step_gpus_by_uuid<'m>(
    gpus: &[&'m Device],
    uuids: &[String],
) -> Option<Result<Vec<&'m Device>, String>> {
    if gpus.iter().all(|d| d.uuid.is_none()) {
        return None;
    }
    Some(
        uuids
            .iter()
            .map(|u| {
                gpus.iter()
                    .copied()
                    .find(|d| d.uuid.as_deref().is_some_and(|v| v.eq_ignore_ascii_case(u)))
                    .ok_or_else(|| {
                        format!(
                            "Slurm gave the step GPU {u}, which is not in this node's topology \
                             (its GPUs' UUIDs: {}); Slurm's GPU records and the topology disagree",
                            gpus.iter()
                                .filter_map(|d| d.uuid.as_deref())
                                .collect::<Vec<_>>()
                                .join(", ")
                        )
                    })
            })
            .collect(),
    )
}

/// The topology's GPUs for Slurm's indexes, or which index the topology lacks.
pub fn step_gpus<'m>(gpus: &[&'m Device], indexes: &[u32]) -> Result<Vec<&'m Device>, String> {
    indexes
        .iter()
        .map(|&k| {
            gpus.iter().copied().find(|d| d.index == k).ok_or_else(|| {
                format!(
                    "Slurm's GPU {k} is not in this node's topology, which has {} GPU(s){}; \
                     Slurm's GPU records and the topology disagree",
                    gpus.len(),
                    if gpus.is_empty() {
                        " (no I/O objects: a topology file without PCI devices)"
                    } else {
                        ""
                    }
                )
            })
        })
        .collect()
}

/// The variable that lists visible GPUs for a vendor's runtime.
pub fn visible_variable(vendor: &str) -> &'static str {
    match vendor {
        "AMD" => "ROCR_VISIBLE_DEVICES",
        "Intel" => "ZE_AFFINITY_MASK",
        _ => "CUDA_VISIBLE_DEVICES",
    }
}

/// How Slurm binds a step's GPUs to its tasks, from `SLURM_TRES_BIND` (`gres/gpu:per_task:1`,
/// Slurm 24.11 and later) or `SLURM_GPU_BIND`; `--gpus-per-task` without `--gpu-bind` implies
/// `per_task`. Under `ConstrainDevices=yes` a bound task can open only its GPUs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SlurmGpuBind {
    /// No binding (`--gpu-bind=none`, or none asked for): every task may use every GPU of the
    /// step.
    None,
    /// `per_task:K`: each task gets `K` of the step's GPUs, chosen by Slurm when the task
    /// starts: the free ones closest to the task's CPU mask from task/affinity (`gres.c`,
    /// `_get_gres_per_task`), in index order only without a mask. Read in each task.
    PerTask(u32),
    /// `single:N` (what `--ntasks-per-gpu=N` implies, `src/srun/launch.c`): each task gets one
    /// GPU, at most `N` tasks each, chosen by Slurm when the task starts by the task's CPU
    /// mask (`_get_single_usable_gres`, `_assign_gres_to_task`).
    Single(u32),
    /// Any other binding (`closest`, `map_gpu:...`, `mask_gpu:...`), as written.
    Other(String),
}

impl SlurmGpuBind {
    /// Reads `SLURM_TRES_BIND` (`tres`) or else `SLURM_GPU_BIND` (`gpu`): Slurm's `verbose,`
    /// prefix is dropped.
    pub fn read(tres: Option<&str>, gpu: Option<&str>) -> SlurmGpuBind {
        let from_tres = tres.and_then(|t| {
            t.split(['+', ';'])
                .find_map(|part| part.trim().strip_prefix("gres/gpu:"))
        });
        let Some(kind) = from_tres.or(gpu.map(str::trim)).filter(|k| !k.is_empty()) else {
            return SlurmGpuBind::None;
        };
        let kind = kind.strip_prefix("verbose,").unwrap_or(kind);
        if kind == "none" || kind == "verbose" {
            return SlurmGpuBind::None;
        }
        let count = |prefix: &str| {
            kind.strip_prefix(prefix)
                .and_then(|k| k.parse::<u32>().ok())
                .filter(|&k| k > 0)
        };
        match (count("per_task:"), count("single:")) {
            (Some(k), _) => SlurmGpuBind::PerTask(k),
            (_, Some(n)) => SlurmGpuBind::Single(n),
            _ => SlurmGpuBind::Other(kind.to_string()),
        }
    }

    /// Where Slurm gives every task its own GPUs, as many each, chosen as the task starts:
    /// that many (`per_task:K`, and `single:1`, one task per GPU). `None` for no binding, and
    /// for bindings where tasks share GPUs (`single:N` with `N` above 1, `closest`) or that
    /// name them (`map_gpu`, `mask_gpu`).
    pub fn own_gpus_per_task(&self) -> Option<u32> {
        match self {
            SlurmGpuBind::PerTask(k) => Some(*k),
            SlurmGpuBind::Single(1) => Some(1),
            _ => None,
        }
    }
}

impl std::fmt::Display for SlurmGpuBind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SlurmGpuBind::None => f.write_str("none"),
            SlurmGpuBind::PerTask(k) => write!(f, "per_task:{k}"),
            SlurmGpuBind::Single(n) => write!(f, "single:{n}"),
            SlurmGpuBind::Other(kind) => f.write_str(&crate::hostlist::shown(kind)),
        }
    }
}

/// The GPUs per task of a step, from `SLURM_GPUS_PER_TASK` (`[type:]K`) or else
/// `SLURM_TRES_PER_TASK` (`gres/gpu=K` or `gres/gpu:type=K`, among other TRES; Slurm 24.11
/// sets only this one); `None` when neither names GPUs, an error when the count is not one.
pub fn gpus_per_task(gpus: Option<&str>, tres: Option<&str>) -> Result<Option<u32>, String> {
    let count = |text: &str, what: &str| {
        text.trim()
            .parse::<u32>()
            .ok()
            .filter(|&n| n > 0)
            .ok_or_else(|| format!("{what} '{}' is not a GPU count", shown(text)))
    };
    if let Some(g) = gpus.filter(|g| !g.trim().is_empty()) {
        return count(g.rsplit(':').next().unwrap_or(g), "SLURM_GPUS_PER_TASK").map(Some);
    }
    let Some(tres) = tres else {
        return Ok(None);
    };
    for part in tres.split(',') {
        let Some((name, value)) = part.trim().split_once('=') else {
            continue;
        };
        if name == "gres/gpu" || name.starts_with("gres/gpu:") {
            return count(value, "SLURM_TRES_PER_TASK").map(Some);
        }
    }
    Ok(None)
}

/// Which GPUs Slurm gives each task under its per-task binding (`per_task:K`, the binding of
/// `--gpus-per-task`), for previews: the plugin reads each task's GPUs where Slurm set them.
/// Slurm chooses as each task starts (`_get_gres_per_task` in `src/interfaces/gres.c`, 24.11
/// and 26.05): tasks in local id order; each takes, of the GPUs not yet taken, first those
/// near its CPU mask (`near[g]`: GPU `g`'s CPUs, its gres.conf `Cores=`; `masks[t]`: task
/// `t`'s CPUs from task/affinity), in index order, then any, in index order, `k` in all.
/// GPUs are positions in the step's list in index order; a task left short takes fewer.
pub fn per_task_choice(near: &[Vec<u32>], masks: &[Vec<u32>], k: usize) -> Vec<Vec<usize>> {
    let mut free = vec![true; near.len()];
    let mut out = Vec::with_capacity(masks.len());
    for mask in masks {
        let mut mine = Vec::with_capacity(k);
        for closest_only in [true, false] {
            for (g, cpus) in near.iter().enumerate() {
                let close = cpus.iter().any(|c| mask.contains(c));
                if mine.len() < k && free[g] && (close || !closest_only) {
                    free[g] = false;
                    mine.push(g);
                }
            }
        }
        mine.sort_unstable();
        out.push(mine);
    }
    out
}

/// Whether `name` is a PCI bus id, `dddd:bb:dd.f` in hexadecimal.
pub fn is_bus_id(name: &str) -> bool {
    let hex = |s: &str, n: usize| s.len() == n && s.bytes().all(|b| b.is_ascii_hexdigit());
    let parts: Vec<&str> = name.split([':', '.']).collect();
    matches!(parts.as_slice(), [d, b, s, f] if hex(d, 4) && hex(b, 2) && hex(s, 2) && hex(f, 1))
}

/// NVIDIA's driver file of the card at `bus`: `/proc/driver/nvidia/gpus/<bus>/information`.
pub fn nvidia_information(bus: &str) -> std::path::PathBuf {
    std::path::Path::new("/proc/driver/nvidia/gpus")
        .join(bus.to_ascii_lowercase())
        .join("information")
}

/// The device files of the card at `bus`, found by detection as its driver names them:
/// `/dev/nvidia<Device Minor>` where NVIDIA's driver file is there, else the card's DRM render
/// nodes (`/dev/dri/renderD*`, from `/sys/bus/pci/devices/<bus>/drm`), sorted. `read` and
/// `list` read the node's files, as the caller sees them (root in slurmstepd, or a task).
pub fn card_device_files(
    bus: &str,
    read: impl Fn(&std::path::Path) -> std::io::Result<String>,
    list: impl Fn(&std::path::Path) -> std::io::Result<Vec<String>>,
) -> Result<Vec<String>, String> {
    let bus = bus.to_ascii_lowercase();
    let info = nvidia_information(&bus);
    if let Ok(text) = read(&info) {
        let minor = information_value(&text, "Device Minor").and_then(|v| v.parse::<u32>().ok());
        let minor = minor.ok_or_else(|| format!("{} has no Device Minor", info.display()))?;
        return Ok(vec![format!("/dev/nvidia{minor}")]);
    }
    let drm = std::path::PathBuf::from(format!("/sys/bus/pci/devices/{bus}/drm"));
    let mut render: Vec<String> = list(&drm)
        .map_err(|e| {
            format!(
                "the card at {bus} is not NVIDIA's and {}: {e}",
                drm.display()
            )
        })?
        .into_iter()
        .filter(|n| n.starts_with("renderD"))
        .map(|n| format!("/dev/dri/{n}"))
        .collect();
    render.sort();
    if render.is_empty() {
        return Err(format!(
            "the card at {bus} has no render node in {}",
            drm.display()
        ));
    }
    Ok(render)
}

/// The value of `key` in the `Key: value` lines of NVIDIA's driver file of a card
/// (`/proc/driver/nvidia/gpus/<bus>/information`: `Device Minor`, `GPU UUID`).
pub fn information_value<'t>(text: &'t str, key: &str) -> Option<&'t str> {
    text.lines().find_map(|l| {
        l.split_once(':')
            .filter(|(k, _)| k.trim() == key)
            .map(|(_, v)| v.trim())
    })
}

/// Slurm's value of the vendor variable for a step (`var`: `CUDA_VISIBLE_DEVICES`,
/// `ROCR_VISIBLE_DEVICES`, `ZE_AFFINITY_MASK`; `tokens`, one per step GPU) rewritten so that
/// the vendor's runtime opens the cards Slurm meant, where Slurm numbers the node's GPUs by
/// gres.conf's files in another order than the PCI bus (the card of Slurm's GPU `slurm[j]` is
/// at `step_buses[j]`; `node_buses`: the node's GPUs in bus order; `uuids`: each step card's
/// UUID, where the driver says them and the variable takes them, read only when Slurm's
/// numbers are wrong). The runtime reads a number `k` as the `k`-th card by bus among those it
/// may open (CUDA told `CUDA_DEVICE_ORDER=PCI_BUS_ID`, Level Zero told
/// `ZE_ENABLE_PCI_ID_DEVICE_ORDER=1`, ROCr in the order the kernel found the cards): every
/// node card without ConstrainDevices (Slurm's numbers are its indexes), the step's own with
/// it (Slurm numbers them from 0). `Ok(None)`: Slurm's numbers already name the right cards;
/// else the cards' UUIDs, or where the numbering is certain (numbers from 0 that are not
/// Slurm's indexes) their ranks by bus among the step's; `Err`: which cards the runtime would
/// open cannot be told.
pub fn tokens_in_bus_order(
    var: &str,
    tokens: &[String],
    slurm: &[u32],
    step_buses: &[String],
    node_buses: &[String],
    uuids: impl FnOnce() -> Option<Vec<String>>,
) -> Result<Option<Vec<String>>, String> {
    let bus = |b: &String| b.to_ascii_lowercase();
    let indexes: Vec<String> = slurm.iter().map(u32::to_string).collect();
    let from_zero = tokens != indexes.as_slice();
    let local_ok = step_buses.windows(2).all(|w| bus(&w[0]) < bus(&w[1]));
    let global_ok = slurm
        .iter()
        .zip(step_buses)
        .all(|(&k, b)| node_buses.get(k as usize).map(bus) == Some(bus(b)));
    if local_ok && (from_zero || global_ok) {
        return Ok(None);
    }
    if let Some(u) = uuids().filter(|u| u.len() == slurm.len()) {
        return Ok(Some(u));
    }
    if from_zero {
        let mut sorted: Vec<String> = step_buses.iter().map(bus).collect();
        sorted.sort();
        let rank = |b: &String| sorted.iter().position(|s| *s == bus(b)).unwrap_or(0);
        return Ok(Some(
            step_buses.iter().map(|b| rank(b).to_string()).collect(),
        ));
    }
    Err(format!(
        "gres.conf numbers this node's GPUs in another order than the PCI bus, and whether the \
         GPU runtime sees every card of the node or only the step's cannot be told (the driver \
         gives no UUID): {var} keeps Slurm's numbers ({}), which the runtime may read as other \
         cards; list gres.conf's GPUs in bus order",
        tokens.join(",")
    ))
}

/// A task's GPU variables. `tokens` is Slurm's value of the vendor variable for the whole
/// step, one token per step GPU (local numbers under `ConstrainDevices`, else Slurm's
/// indexes), `own` the task's GPUs as positions in it, `slurm` Slurm's indexes of the step's
/// GPUs, `buses` the PCI bus id of each step GPU's card as LAMA found it (empty where
/// unknown): `LAMA_GPU_BUS_IDS` names the task's cards, for `lama verify` to check that the
/// task may open them and that its runtime opens its own first. By default every GPU of the
/// step stays visible, the task's own first (CUDA IPC and NCCL's peer detection keep working);
/// `strict` leaves only its own.
pub fn task_variables(
    vendor: &str,
    tokens: Option<&[String]>,
    slurm: &[u32],
    buses: &[String],
    own: &[usize],
    strict: bool,
) -> Vec<(&'static str, String)> {
    let order: Vec<usize> = own
        .iter()
        .copied()
        .chain((0..slurm.len()).filter(|i| !strict && !own.contains(i)))
        .collect();
    let mut out = vec![(
        "LAMA_GPUS",
        own.iter()
            .map(|&i| slurm[i].to_string())
            .collect::<Vec<_>>()
            .join(","),
    )];
    if buses.len() == slurm.len() {
        let own_buses: Vec<&str> = own.iter().map(|&i| buses[i].as_str()).collect();
        out.push(("LAMA_GPU_BUS_IDS", own_buses.join(",")));
    }
    let Some(tokens) = tokens.filter(|t| t.len() == slurm.len()) else {
        return out;
    };
    // Slurm's tokens of the step's GPUs at these positions, in this order.
    let listed = |positions: &[usize]| {
        positions
            .iter()
            .map(|&i| tokens[i].as_str())
            .collect::<Vec<_>>()
            .join(",")
    };
    match vendor {
        // ROCr filters and orders the devices (ROCR_VISIBLE_DEVICES); HIP then applies
        // HIP_VISIBLE_DEVICES (else CUDA_VISIBLE_DEVICES) and OpenCL GPU_DEVICE_ORDINAL to the
        // devices ROCr left, by position. Slurm may have set those to its own list, which
        // would filter ROCr's list a second time: they are set to every position in order.
        "AMD" => {
            let positions = (0..order.len())
                .map(|p| p.to_string())
                .collect::<Vec<_>>()
                .join(",");
            out.push(("ROCR_VISIBLE_DEVICES", listed(&order)));
            out.push(("HIP_VISIBLE_DEVICES", positions.clone()));
            out.push(("GPU_DEVICE_ORDINAL", positions));
        }
        // Level Zero's ZE_AFFINITY_MASK is a set: devices keep the driver's order whatever the
        // list's. It is written in the step's order; the task's own GPU is named by LAMA_GPUS.
        // Told to order devices by PCI bus, Level Zero numbers them as Slurm does where
        // gres.conf lists them by bus (else the step's numbers are rewritten as bus ranks,
        // `tokens_in_bus_order`).
        "Intel" => {
            let mut set = order.clone();
            set.sort_unstable();
            out.push(("ZE_AFFINITY_MASK", listed(&set)));
            out.push(("ZE_ENABLE_PCI_ID_DEVICE_ORDER", "1".to_string()));
        }
        // CUDA enumerates CUDA_VISIBLE_DEVICES in the listed order (and ignores
        // GPU_DEVICE_ORDINAL, which is OpenCL's and left as Slurm set it).
        _ => {
            out.push(("CUDA_VISIBLE_DEVICES", listed(&order)));
            out.push(("CUDA_DEVICE_ORDER", "PCI_BUS_ID".to_string()));
        }
    }
    out
}

/// What the user is told of each group of GPUs' CPU binding, placed for `req`, as on the CPU
/// path: the default binding's fallback to exact CPUs, and a binding that was asked for that
/// shares CPUs or covers fewer than the CPUs each task was given (`-c`). Each note names the
/// group's GPUs.
pub fn group_notes(
    machine: &lama_engine::Machine,
    placed: &GpuPlacement,
    req: &GpuRequest,
) -> Vec<String> {
    let (asked, cpus, unit) = (req.bind_asked, req.cpus_per_task, req.cpu_unit);
    let mut notes = Vec::new();
    for group in &placed.groups {
        let fallback = crate::cpus_per_task::exact_fallback_note(
            group.widened,
            group.used,
            group.tasks as usize,
            cpus.max(1),
            unit,
        );
        let narrower = (asked && cpus > 1)
            .then(|| {
                let covered = lama_engine::cpus_covered(machine, &group.narrowest, unit);
                crate::cpus_per_task::narrower_warning(machine, group.used, covered, cpus, unit)
            })
            .flatten();
        for text in [fallback, group.shared.clone(), narrower]
            .into_iter()
            .flatten()
        {
            // The group goes after the kind of message: "warning: gpu0,gpu1: ...".
            notes.push(match text.split_once(": ") {
                Some((kind @ ("note" | "warning"), rest)) if kind != "note" => {
                    format!("{kind}: {}: {rest}", group.gpus)
                }
                Some(("note", rest)) => format!("{}: {rest}", group.gpus),
                _ => format!("{}: {text}", group.gpus),
            });
        }
    }
    notes
}

/// A task's network variables for its NIC: `LAMA_NICS` always; for an InfiniBand or RoCE
/// card (`mlx*`), UCX's and NCCL's device selection.
pub fn nic_variables(nic: &Device) -> Vec<(&'static str, String)> {
    let name = lama_engine::nic_name(nic);
    if name.is_empty() {
        return Vec::new();
    }
    let mut out = vec![("LAMA_NICS", name.to_string())];
    if name.starts_with("mlx") {
        out.push(("UCX_NET_DEVICES", format!("{name}:1")));
        out.push(("NCCL_IB_HCA", name.to_string()));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A request without -c.
    fn request(
        map: &str,
        bind: Option<&str>,
        mppr: Option<&str>,
        order: Order,
        gpus_per_task: u32,
        oversubscribe: bool,
    ) -> Result<Option<GpuRequest>, String> {
        super::request(
            map,
            bind,
            mppr,
            order,
            gpus_per_task,
            oversubscribe,
            1,
            CpuUnit::Thread,
        )
    }

    #[test]
    fn slurms_gpu_binding_and_gpus_per_task_are_read_as_24_11_writes_them() {
        // Seen on Slurm 24.11: srun --gpus-per-task=1 exports SLURM_TRES_PER_TASK=gres/gpu=1
        // and SLURM_TRES_BIND=gres/gpu:per_task:1, and no SLURM_GPUS_PER_TASK.
        assert_eq!(
            SlurmGpuBind::read(Some("gres/gpu:per_task:1"), None),
            SlurmGpuBind::PerTask(1)
        );
        assert_eq!(
            SlurmGpuBind::read(Some("gres/gpu:none"), None),
            SlurmGpuBind::None
        );
        assert_eq!(
            SlurmGpuBind::read(Some("gres/gpu:verbose,closest"), None),
            SlurmGpuBind::Other("closest".into())
        );
        // --ntasks-per-gpu=N (srun's launch.c writes single:N).
        assert_eq!(
            SlurmGpuBind::read(Some("gres/gpu:single:1"), None),
            SlurmGpuBind::Single(1)
        );
        assert_eq!(SlurmGpuBind::Single(1).own_gpus_per_task(), Some(1));
        assert_eq!(SlurmGpuBind::Single(2).own_gpus_per_task(), None);
        assert_eq!(SlurmGpuBind::PerTask(2).own_gpus_per_task(), Some(2));
        assert_eq!(
            SlurmGpuBind::read(Some("gres/gpu:single:x"), None),
            SlurmGpuBind::Other("single:x".into())
        );
        assert_eq!(
            SlurmGpuBind::read(None, Some("map_gpu:1,0")),
            SlurmGpuBind::Other("map_gpu:1,0".into())
        );
        assert_eq!(SlurmGpuBind::read(None, None), SlurmGpuBind::None);
        assert_eq!(gpus_per_task(None, Some("gres/gpu=2")), Ok(Some(2)));
        assert_eq!(
            gpus_per_task(None, Some("cpu=4,gres/gpu:a100=1")),
            Ok(Some(1))
        );
        assert_eq!(
            gpus_per_task(Some("a100:3"), Some("gres/gpu=1")),
            Ok(Some(3))
        );
        assert_eq!(gpus_per_task(None, Some("cpu=4")), Ok(None));
        assert!(gpus_per_task(None, Some("gres/gpu=x")).is_err());
        assert!(gpus_per_task(Some("0"), None).is_err());
    }

    #[test]
    fn requests() {
        let r = request(
            "gcsbnh",
            Some("1g"),
            Some("2:g,1:c"),
            Order::Natural,
            1,
            false,
        )
        .unwrap()
        .unwrap();
        assert_eq!(
            (r.bind, r.per_gpu, r.mppr.to_string()),
            (None, Some(2), "1:c".into())
        );
        assert_eq!(
            request("scbnh", None, None, Order::Natural, 1, false),
            Ok(None)
        );
        let e = request("scbnh", Some("1g"), None, Order::Natural, 1, false).unwrap_err();
        assert!(e.contains("lead it with 'g' (gscbnh)"), "{e}");
        let e = request("csbnh", None, Some("1:g"), Order::Natural, 1, false).unwrap_err();
        assert!(e.contains("counts tasks per GPU"), "{e}");
        assert!(request("gx", None, None, Order::Natural, 1, false).is_err());
    }

    #[test]
    fn cuda_reads_slurms_numbers_as_the_cards_slurm_meant() {
        let v = |s: &[&str]| s.iter().map(|t| t.to_string()).collect::<Vec<_>>();
        // The docker GPU node by hand: cards A<B<C<D by bus; gres.conf lists C and D first, so
        // Slurm's GPUs 0,1,2,3 are C,D,A,B.
        let node = v(&[
            "0000:04:00.0",
            "0000:05:00.0",
            "0000:84:00.0",
            "0000:85:00.0",
        ]);
        let (a, b, c, d) = (&node[0], &node[1], &node[2], &node[3]);
        let all = [c.clone(), d.clone(), a.clone(), b.clone()];
        // Without ConstrainDevices CUDA would read Slurm's 0 as A: the UUIDs say C.
        let uuids = v(&["GPU-c", "GPU-d", "GPU-a", "GPU-b"]);
        assert_eq!(
            tokens_in_bus_order(
                "CUDA_VISIBLE_DEVICES",
                &v(&["0", "1", "2", "3"]),
                &[0, 1, 2, 3],
                &all,
                &node,
                || Some(uuids.clone())
            ),
            Ok(Some(uuids.clone()))
        );
        // Unknown UUIDs, numbers that may be either: told, not guessed, naming the variable
        // (Level Zero's mask too: its cards have no UUIDs to read).
        for var in ["CUDA_VISIBLE_DEVICES", "ZE_AFFINITY_MASK"] {
            let e = tokens_in_bus_order(
                var,
                &v(&["0", "1", "2", "3"]),
                &[0, 1, 2, 3],
                &all,
                &node,
                || None,
            )
            .unwrap_err();
            assert!(
                e.contains("list gres.conf's GPUs in bus order")
                    && e.contains(&format!("{var} keeps Slurm's numbers (0,1,2,3)")),
                "{e}"
            );
        }
        // Under ConstrainDevices a step of Slurm's GPUs 1 and 2 (D and A) is numbered 0,1; CUDA
        // sees A and D, A first: D is CUDA's 1, A its 0.
        assert_eq!(
            tokens_in_bus_order(
                "CUDA_VISIBLE_DEVICES",
                &v(&["0", "1"]),
                &[1, 2],
                &[d.clone(), a.clone()],
                &node,
                || None
            ),
            Ok(Some(v(&["1", "0"])))
        );
        // Slurm's GPUs 2 and 3 (A, B) numbered from 0: already in bus order, nothing to change.
        assert_eq!(
            tokens_in_bus_order(
                "CUDA_VISIBLE_DEVICES",
                &v(&["0", "1"]),
                &[2, 3],
                &[a.clone(), b.clone()],
                &node,
                || None
            ),
            Ok(None)
        );
        // gres.conf in bus order: Slurm's numbers are CUDA's, either way.
        assert_eq!(
            tokens_in_bus_order(
                "CUDA_VISIBLE_DEVICES",
                &v(&["0", "2"]),
                &[0, 2],
                &[a.clone(), c.clone()],
                &node,
                || None
            ),
            Ok(None)
        );
    }

    #[test]
    fn slurms_per_task_choice_follows_each_tasks_mask() {
        // By hand: GPUs 0 and 2 near CPUs 0-1, 1 and 3 near CPUs 2-3.
        let near = [vec![0, 1], vec![2, 3], vec![0, 1], vec![2, 3]];
        // Masks by cyclic distribution: task 0 on CPU 0, task 1 on CPU 2, task 2 on CPU 1.
        let masks = [vec![0], vec![2], vec![1], vec![3]];
        assert_eq!(
            per_task_choice(&near, &masks, 1),
            [vec![0], vec![1], vec![2], vec![3]]
        );
        // Block: tasks 0 and 1 on package 0 take GPUs 0 and 2, not index order's 0 and 1.
        let masks = [vec![0], vec![1], vec![2], vec![3]];
        assert_eq!(
            per_task_choice(&near, &masks, 1),
            [vec![0], vec![2], vec![1], vec![3]]
        );
        // Two each, one task's mask on both packages: its near ones first (all four near).
        let masks = [vec![1, 2], vec![3]];
        // Task 1 (CPU 3) then takes GPU 3, near it, and GPU 2, the one left.
        assert_eq!(per_task_choice(&near, &masks, 2), [vec![0, 1], vec![2, 3]]);
        // More tasks than GPUs near them: the rest take any free one, in index order.
        let masks = [vec![0], vec![0], vec![0]];
        assert_eq!(
            per_task_choice(&near, &masks, 1),
            [vec![0], vec![2], vec![1]]
        );
    }

    #[test]
    fn bus_ids_and_driver_lines() {
        assert!(is_bus_id("0000:04:00.0"));
        assert!(is_bus_id("0000:C1:00.7"));
        assert!(!is_bus_id("kfd"));
        assert!(!is_bus_id("0000:04:00"));
        assert!(!is_bus_id("../../0000:04:00.0"));
        let text = "Model: \t\t A100\nDevice Minor: \t 3\nGPU UUID: \t GPU-5a11\n";
        assert_eq!(information_value(text, "Device Minor"), Some("3"));
        assert_eq!(information_value(text, "GPU UUID"), Some("GPU-5a11"));
        assert_eq!(information_value(text, "Bus Location"), None);
    }

    #[test]
    fn indexes() {
        assert_eq!(parse_indexes("0,2,5"), Ok(vec![0, 2, 5]));
        assert!(parse_indexes("0,0").unwrap_err().contains("twice"));
        // A user's list of 200,000 indexes (1.3 MB, past the plugin's bound on a variable):
        // linear, not quadratic (40 billion comparisons before).
        let many: Vec<String> = (0..200_000).map(|i| i.to_string()).collect();
        let t = std::time::Instant::now();
        assert_eq!(parse_indexes(&many.join(",")).unwrap().len(), 200_000);
        // (Quadratic took minutes in a debug build; 30 s leaves room for a loaded machine:
        // 5 s failed once at nice 19 beside a whole test run.)
        assert!(t.elapsed() < std::time::Duration::from_secs(30));
        assert!(parse_indexes("a").unwrap_err().contains("not a GPU index"));
        // gres.conf without File=: Slurm writes NoDevFiles (gres_common.c).
        let e = parse_indexes("NoDevFiles").unwrap_err();
        assert!(
            e.contains("gres.conf gives them no File=") && e.contains("without 'g'"),
            "{e}"
        );
    }

    fn strings(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn vendor_tokens_numbers_uuids_and_what_cannot_be_placed() {
        let var = "CUDA_VISIBLE_DEVICES";
        assert_eq!(
            vendor_tokens(var, &strings(&["0", "2"])),
            Ok(VendorTokens::Numbers)
        );
        // gres.conf Flags=env_uuid (Slurm 26.05): the UUID form of NVIDIA's documentation.
        let uuids = strings(&[
            "GPU-8932f937-d72c-4106-c12f-20bd9faed9f6",
            "GPU-00000000-0000-4000-8000-000000000001",
        ]);
        assert_eq!(vendor_tokens(var, &uuids), Ok(VendorTokens::Uuids));
        // MIG instances, in the new and the old UUID forms: refused with the reason.
        for mig in [
            "MIG-c6d4f1ef-42e4-5de3-91c7-45d71c87eb3f",
            "MIG-GPU-8932f937-d72c-4106-c12f-20bd9faed9f6/1/0",
        ] {
            let e = vendor_tokens(var, &strings(&[mig])).unwrap_err();
            assert!(e.contains("MIG instances") && e.contains(mig), "{e}");
        }
        let e = vendor_tokens(var, &strings(&["NoDevFiles"])).unwrap_err();
        assert!(e.contains("CUDA_VISIBLE_DEVICES=NoDevFiles"), "{e}");
        let e = vendor_tokens(var, &strings(&["0", "x1"])).unwrap_err();
        assert!(e.contains("'x1' is neither"), "{e}");
        // Numbers and UUIDs mixed: neither form.
        assert!(vendor_tokens(var, &strings(&["0", &uuids[0]])).is_err());
    }

    #[test]
    fn gpus_found_by_uuid_whatever_slurms_order() {
        let gpu = |index: u32, uuid: Option<&str>| Device {
            kind: lama_engine::DeviceKind::Gpu,
            index,
            vendor: "NVIDIA".into(),
            bus_id: format!("0000:0{index}:00.0"),
            uuid: uuid.map(String::from),
            names: vec![],
            pus: 0..1,
            near: "Machine L#0".into(),
            bridge: None,
        };
        let a = gpu(0, Some("GPU-aaaa"));
        let b = gpu(1, Some("GPU-BBBB"));
        let all = [&a, &b];
        // Slurm's order is its own; each UUID finds its card (case-insensitively).
        let found = step_gpus_by_uuid(&all, &strings(&["GPU-bbbb", "GPU-aaaa"]))
            .unwrap()
            .unwrap();
        assert_eq!(found.iter().map(|d| d.index).collect::<Vec<_>>(), [1, 0]);
        let e = step_gpus_by_uuid(&all, &strings(&["GPU-cccc"]))
            .unwrap()
            .unwrap_err();
        assert!(
            e.contains("GPU-cccc") && e.contains("GPU-aaaa, GPU-BBBB"),
            "{e}"
        );
        // A topology that knows no UUID (hwloc with only its PCI component): indexes only.
        let (c, d) = (gpu(0, None), gpu(1, None));
        assert!(step_gpus_by_uuid(&[&c, &d], &strings(&["GPU-aaaa"])).is_none());
    }

    #[test]
    fn variables_put_the_task_gpu_first_or_alone() {
        let tokens: Vec<String> = ["0", "1", "2"].map(String::from).to_vec();
        let shared = task_variables("NVIDIA", Some(&tokens), &[4, 5, 7], &[], &[1], false);
        assert_eq!(
            shared,
            vec![
                ("LAMA_GPUS", "5".to_string()),
                ("CUDA_VISIBLE_DEVICES", "1,0,2".to_string()),
                ("CUDA_DEVICE_ORDER", "PCI_BUS_ID".to_string()),
            ]
        );
        // AMD: ROCr orders, HIP and OpenCL see ROCr's list as it is (positions 0..n), so the
        // task's GPU is HIP device 0, not ROCr's list filtered a second time.
        let amd = task_variables("AMD", Some(&tokens), &[4, 5, 7], &[], &[2], false);
        assert_eq!(
            amd[1..],
            [
                ("ROCR_VISIBLE_DEVICES", "2,0,1".to_string()),
                ("HIP_VISIBLE_DEVICES", "0,1,2".to_string()),
                ("GPU_DEVICE_ORDINAL", "0,1,2".to_string()),
            ]
        );
        // Isolated: one device, position 0 (with Slurm's list "2" applied again, none).
        let strict = task_variables("AMD", Some(&tokens), &[4, 5, 7], &[], &[2], true);
        assert_eq!(strict[1], ("ROCR_VISIBLE_DEVICES", "2".to_string()));
        assert_eq!(strict[2], ("HIP_VISIBLE_DEVICES", "0".to_string()));
        assert_eq!(strict.len(), 4, "no CUDA_DEVICE_ORDER for AMD");
        // Intel: a set, in the step's order; the own GPU is LAMA_GPUS.
        let intel = task_variables("Intel", Some(&tokens), &[4, 5, 7], &[], &[2], false);
        assert_eq!(
            intel,
            vec![
                ("LAMA_GPUS", "7".to_string()),
                ("ZE_AFFINITY_MASK", "0,1,2".to_string()),
                ("ZE_ENABLE_PCI_ID_DEVICE_ORDER", "1".to_string())
            ]
        );
        // Without Slurm's own list (or a list of another length) only LAMA_GPUS is set.
        assert_eq!(
            task_variables("NVIDIA", None, &[4], &[], &[0], false).len(),
            1
        );
        // The task's cards by bus id, for lama verify: GPU 7 is the step's third.
        let buses = ["0000:04:00.0", "0000:05:00.0", "0000:84:00.0"].map(String::from);
        let named = task_variables("NVIDIA", None, &[4, 5, 7], &buses, &[2, 0], false);
        assert_eq!(
            named,
            [
                ("LAMA_GPUS", "7,4".to_string()),
                ("LAMA_GPU_BUS_IDS", "0000:84:00.0,0000:04:00.0".to_string())
            ]
        );
        assert_eq!(visible_variable("Intel"), "ZE_AFFINITY_MASK");
    }
}

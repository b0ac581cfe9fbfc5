//! A step placed by GPU (a layout led by `g`, docs/devices.md): the GPUs Slurm gave the step on
//! this node, mapped to the topology's PCI devices, and each task's GPUs, NIC, CPUs and
//! variables.
//!
//! Slurm writes the step's GPUs into the step's environment before `user_init`
//! (`SLURM_STEP_GPUS`: Slurm's indexes; the vendor variable, e.g. `CUDA_VISIBLE_DEVICES`: what
//! the runtime will see, renumbered from 0 under `ConstrainDevices=yes`). Both are read here;
//! a step without them, or whose GPUs the topology lacks, is not placed (fail closed).

pub use crate::gpu_task::SlurmPerTask;
use crate::gpu_task::{shown_list, TaskBuilder};
use crate::placement::{StepCpus, TaskPlacement};
use crate::request::StepRequest;
use lama_engine::{place_by_gpu_ranked, Device, DeviceKind, GpuError, GpuRequest, Machine};
use lama_slurm::gpu::{
    gpus_per_task, group_notes, parse_indexes, step_gpus, step_gpus_by_uuid, vendor_tokens,
    visible_variable, SlurmGpuBind, VendorTokens,
};

/// The GPUs of a step on this node, as Slurm gave them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StepGpus {
    /// Slurm's indexes (`SLURM_STEP_GPUS`), in Slurm's order.
    pub slurm: Vec<u32>,
    /// Slurm's value of the vendor variable, one token per GPU, if Slurm set it.
    pub tokens: Option<Vec<String>>,
    /// `--gpus-per-task` (1 when not given).
    pub per_task: u32,
    /// How Slurm binds the GPUs to the tasks (`--gpu-bind`; `per_task` is implied by
    /// `--gpus-per-task`).
    pub binding: SlurmGpuBind,
    /// Whether the vendor variable names the GPUs by UUID (gres.conf `Flags=env_uuid`), which
    /// then finds each of them in the topology.
    pub uuids: bool,
    /// The PCI bus id of each GPU of `slurm`, where Slurm numbers the node's GPUs by
    /// gres.conf's files ([`crate::gpu_cards::step_cards`]); `None` where it numbers them in
    /// PCI bus order (detection), Slurm's GPU `k` being the topology's `k`-th.
    pub cards: Option<Vec<String>>,
}

/// Reads the step's GPUs from its environment (`env`); `vendor` names the variable read.
pub fn read(env: impl Fn(&str) -> Option<String>, vendor: &str) -> Result<StepGpus, String> {
    let list = env("SLURM_STEP_GPUS")
        .filter(|l| !l.trim().is_empty())
        .ok_or(
            "the step has no GPU on this node (SLURM_STEP_GPUS is not set): ask for GPUs with \
         srun --gpus-per-task=K, --gpus=N or --gres=gpu:N",
        )?;
    let slurm = parse_indexes(&list)?;
    let var = visible_variable(vendor);
    let tokens = env(var).map(|v| {
        v.split(',')
            .map(|t| t.trim().to_string())
            .collect::<Vec<_>>()
    });
    let uuids = match &tokens {
        Some(t) => vendor_tokens(var, t)? == VendorTokens::Uuids,
        None => false,
    };
    let per_task = gpus_per_task(
        env("SLURM_GPUS_PER_TASK").as_deref(),
        env("SLURM_TRES_PER_TASK").as_deref(),
    )?;
    let binding = SlurmGpuBind::read(
        env("SLURM_TRES_BIND").as_deref(),
        env("SLURM_GPU_BIND").as_deref(),
    );
    Ok(StepGpus {
        slurm,
        tokens,
        per_task: per_task.unwrap_or(1),
        binding,
        uuids,
        cards: None,
    })
}

/// Where gres.conf numbers the node's GPUs out of PCI bus order (`gpus.cards` known), Slurm's
/// vendor variable rewritten so that the vendor's runtime opens the card each task is placed
/// beside ([`lama_slurm::gpu::tokens_in_bus_order`]): the cards' UUIDs (`uuid`: the driver's,
/// by vendor and bus id; NVIDIA's and AMD's, which their variables take) or their ranks by bus.
/// `Some(warning)` where that cannot be told.
pub fn in_bus_order(
    machine: &Machine,
    gpus: &mut StepGpus,
    uuid: impl Fn(&str, &str) -> Option<String>,
) -> Option<String> {
    let (Some(tokens), Some(cards)) = (&gpus.tokens, &gpus.cards) else {
        return None;
    };
    let node = machine_gpus(machine);
    // Under Slurm's own binding each task keeps Slurm's value, and no order is set.
    let lama_chooses = gpus.binding == SlurmGpuBind::None;
    let vendor = node.first().map_or("", |d| d.vendor.as_str());
    if gpus.uuids || !lama_chooses || !matches!(vendor, "NVIDIA" | "AMD" | "Intel") {
        return None;
    }
    let node_buses: Vec<String> = node.iter().map(|d| d.bus_id.clone()).collect();
    let uuids = || cards.iter().map(|b| uuid(vendor, b)).collect();
    let var = lama_slurm::gpu::visible_variable(vendor);
    match lama_slurm::gpu::tokens_in_bus_order(var, tokens, &gpus.slurm, cards, &node_buses, uuids)
    {
        Ok(Some(t)) => {
            gpus.tokens = Some(t);
            None
        }
        Ok(None) => None,
        Err(warning) => Some(format!("warning: {warning}")),
    }
}

/// The GPUs of `machine` (PCI bus order).
pub fn machine_gpus(machine: &Machine) -> Vec<&Device> {
    machine
        .devices()
        .iter()
        .filter(|d| d.kind == DeviceKind::Gpu)
        .collect()
}

/// The topology's GPU of each of Slurm's GPUs (`slurm`), found by its card's PCI bus id
/// (`cards`, in the same order).
fn step_gpus_by_card<'m>(
    all: &[&'m Device],
    slurm: &[u32],
    cards: &[String],
) -> Result<Vec<&'m Device>, String> {
    slurm
        .iter()
        .zip(cards)
        .map(|(k, bus)| {
            all.iter()
                .copied()
                .find(|d| d.bus_id.eq_ignore_ascii_case(bus))
                .ok_or_else(|| {
                    format!(
                        "Slurm's GPU {k} is the card at {bus} (by its device file in gres.conf), \
                         which is not among this node's topology's {} GPU(s) ({}): the topology \
                         is not this node's, or lacks I/O objects",
                        all.len(),
                        all.iter()
                            .map(|d| d.bus_id.as_str())
                            .collect::<Vec<_>>()
                            .join(", ")
                    )
                })
        })
        .collect()
}

/// This node's tasks placed by GPU, and the notes for the user.
#[derive(Debug, Clone)]
pub struct PlacedHere {
    /// One per local task, by local task id; empty under Slurm's per-task binding, where
    /// each task takes its placement when it starts ([`SlurmPerTask`]).
    pub tasks: Vec<TaskPlacement>,
    /// Under Slurm's per-task binding (`per_task:K`): the slots each task takes its
    /// placement from.
    pub per_task: Option<Box<SlurmPerTask>>,
    /// What the user is told.
    pub notes: Vec<String>,
}

/// Under Slurm's `per_task:K`: that this node's tasks can each have `k` GPUs of the step's,
/// else why not. Which they are each task learns as it starts (see [`SlurmPerTask`]).
fn enough_gpus_per_task(
    gpus: &StepGpus,
    binding: &SlurmGpuBind,
    k: u32,
    tasks: usize,
) -> Result<(), String> {
    let wanted = tasks * k as usize;
    if wanted > gpus.slurm.len() {
        return Err(format!(
            "Slurm binds {k} GPU(s) to each task ({binding}), and this node's {tasks} task(s) \
             need {wanted} GPU(s) where the step has {} here; ask for more GPUs or fewer tasks",
            gpus.slurm.len()
        ));
    }
    Ok(())
}

/// Why a layout led by 'g' is refused under a Slurm binding where tasks share GPUs, or that
/// names them.
fn shared_binding(binding: &SlurmGpuBind) -> String {
    if matches!(binding, SlurmGpuBind::Other(kind) if kind.starts_with("closest")) {
        return "drop --gpu-bind=closest: a layout led by 'g' already gives each task the GPUs \
                closest to its CPUs (as --gpu-bind=none to let LAMA choose each task's GPUs)"
            .to_string();
    }
    let why = match binding {
        SlurmGpuBind::Single(n) => format!(
            "gives each task one GPU shared by up to {n} tasks (--ntasks-per-gpu={n} implies \
             --gpu-bind=single:{n}), and which of a GPU's tasks each is can be read in no task"
        ),
        other => format!("binds each task to the GPUs --gpu-bind={other} names"),
    };
    format!(
        "Slurm {why}, so a layout led by 'g' cannot place each task beside its GPUs without \
         guessing: give --gpus-per-task=K (or --ntasks-per-gpu=1: each task its own GPUs, \
         whose CPUs each task takes as it starts), --gpu-bind=none to let LAMA choose each \
         task's GPUs, or a layout without 'g'"
    )
}

/// This node's tasks placed by GPU (see [`PlacedHere`]). `machine` is restricted to the
/// step's CPUs; `globals[i]` is local task `i`'s global rank.
pub fn place_here(
    machine: &Machine,
    request: &StepRequest,
    gpus: &StepGpus,
    globals: &[u32],
    overcommit: bool,
    cpus: StepCpus,
) -> Result<PlacedHere, String> {
    let Some(options) = request.gpu else {
        return Err("the request does not place by GPU".to_string());
    };
    let step = step_devices(machine, gpus)?;
    let per_task = match (&gpus.binding, gpus.binding.own_gpus_per_task()) {
        (SlurmGpuBind::None, _) => None,
        (b, Some(k)) => {
            enough_gpus_per_task(gpus, b, k, globals.len())?;
            Some(k)
        }
        (b, None) => return Err(shared_binding(b)),
    };
    let req = GpuRequest {
        layout: request.layout.clone(),
        bind: (!options.bind_gpu).then(|| request.binding()),
        mppr: request.mppr.clone(),
        per_gpu: options.per_gpu,
        gpus_per_task: per_task.unwrap_or(gpus.per_task),
        order: request.order,
        oversubscribe: overcommit,
        fixed: per_task.is_some(),
        bind_asked: request.bind.is_some(),
        cpus_per_task: cpus.per_task.max(1),
        cpu_unit: cpus.unit,
    };
    let vendor = step.first().map_or("", |d| d.vendor.as_str());
    let builder = TaskBuilder {
        machine: machine.clone(),
        verbose: request.verbose,
        omp: request.omp,
        cpus,
        vendor: vendor.to_string(),
        // Bound by Slurm, a task sees only its own GPUs, and Slurm's value of the vendor
        // variable for it already names them: it is left alone.
        tokens: gpus.tokens.clone().filter(|_| per_task.is_none()),
        slurm: gpus.slurm.clone(),
        buses: step.iter().map(|d| d.bus_id.clone()).collect(),
        isolate: options.isolate,
    };
    let here = Here {
        machine,
        step: &step,
        req: &req,
        gpus,
        globals,
        overcommit,
    };
    match per_task {
        Some(k) => here.slurm_binds(builder, k, request.verbose),
        None => here.lama_chooses(&builder),
    }
}

/// The step's GPUs on this node, as Slurm gave them: by UUID where Slurm's variable names
/// them so, else by the device files Slurm lets the step open (`cards`), else by Slurm's
/// indexes in PCI bus order.
fn step_devices<'m>(machine: &'m Machine, gpus: &StepGpus) -> Result<Vec<&'m Device>, String> {
    let all = machine_gpus(machine);
    let by_uuid = match &gpus.tokens {
        Some(t) if gpus.uuids && t.len() == gpus.slurm.len() => step_gpus_by_uuid(&all, t),
        _ => None,
    };
    match (by_uuid, &gpus.cards) {
        (Some(found), _) => found,
        (None, Some(cards)) => step_gpus_by_card(&all, &gpus.slurm, cards),
        (None, None) => step_gpus(&all, &gpus.slurm),
    }
}

/// One node's placement by GPU: the machine, the step's GPUs there, the request, Slurm's view
/// of the GPUs, the local tasks' global ranks, and whether the step may oversubscribe.
struct Here<'a> {
    machine: &'a Machine,
    step: &'a [&'a Device],
    req: &'a GpuRequest,
    gpus: &'a StepGpus,
    globals: &'a [u32],
    overcommit: bool,
}

impl Here<'_> {
    /// A placement error as the user reads it.
    fn fail(&self, e: GpuError) -> String {
        match e {
            GpuError::Place { .. } if !self.overcommit => {
                format!("{e} (to oversubscribe: srun --overcommit)")
            }
            e => e.to_string(),
        }
    }

    /// Slurm binds `k` GPUs to each task: one slot per GPU, which each task joins for the
    /// GPUs Slurm gives it as it starts ([`SlurmPerTask`]).
    fn slurm_binds(
        &self,
        builder: TaskBuilder,
        k: u32,
        verbose: bool,
    ) -> Result<PlacedHere, String> {
        let placed = lama_engine::place_gpu_slots(self.machine, self.step, self.req, NO_GPU_HERE)
            .map_err(|e| self.fail(e))?;
        let mut notes = placed.notes.clone();
        notes.extend(group_notes(self.machine, &placed, self.req));
        if verbose {
            notes.push(format!(
                "Slurm binds {k} GPU(s) to each task ({}) and chooses them by the task's CPU \
                 mask as it starts: each task keeps Slurm's and runs on the CPUs placed beside \
                 them; --gpu-bind=none lets LAMA choose each task's GPUs",
                self.gpus.binding
            ));
        }
        let per_task = SlurmPerTask {
            builder,
            slots: placed.tasks,
            per_task: k,
            globals: self.globals.to_vec(),
            buses: self.step.iter().map(|d| d.bus_id.clone()).collect(),
            files: None,
            others: Vec::new(),
        };
        Ok(PlacedHere {
            tasks: Vec::new(),
            per_task: Some(Box::new(per_task)),
            notes,
        })
    }

    /// LAMA chooses each task's GPUs: the tasks placed in ascending global rank, each
    /// task's placement built now.
    fn lama_chooses(&self, builder: &TaskBuilder) -> Result<PlacedHere, String> {
        let globals = self.globals;
        let mut by_rank: Vec<usize> = (0..globals.len()).collect();
        by_rank.sort_by_key(|&i| globals[i]);
        let rank = |t: u32| by_rank.get(t as usize).map_or(t, |&local| globals[local]);
        let placed = place_by_gpu_ranked(
            self.machine,
            self.step,
            globals.len() as u32,
            self.req,
            NO_GPU_HERE,
            &rank,
        )
        .map_err(|e| self.fail(e))?;
        let mut notes = placed.notes.clone();
        // The CPU path's notes, group by group.
        notes.extend(group_notes(self.machine, &placed, self.req));
        let gpus = self.gpus;
        if gpus
            .tokens
            .as_deref()
            .is_none_or(|t| t.len() != gpus.slurm.len())
        {
            notes.push(format!(
                "{} does not list one GPU for each of SLURM_STEP_GPUS ({}): it is left as Slurm \
                 set it, and each task's GPUs are only in LAMA_GPUS",
                visible_variable(&builder.vendor),
                shown_list(&gpus.slurm)
            ));
        }
        let mut out: Vec<Option<TaskPlacement>> = vec![None; globals.len()];
        for (k, &local) in by_rank.iter().enumerate() {
            out[local] = Some(builder.build(&placed.tasks[k], globals[local]));
        }
        Ok(PlacedHere {
            tasks: out.into_iter().flatten().collect(),
            per_task: None,
            notes,
        })
    }
}

/// Why a node without the step's GPUs cannot be placed by GPU.
const NO_GPU_HERE: &str = "the step has no GPU here";

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::SiteConfig;

    /// slurmstepd's own slurm.conf in these tests.
    use crate::request::{resolve, UserOptions};
    use lama_engine::{CpuList, DeviceSpec, Level, MachineBuilder};

    /// Two packages of two cores; GPUs 0,1 near package 0 and 2,3 near package 1; one
    /// InfiniBand card per package.
    fn node() -> Machine {
        let mut b = MachineBuilder::new("gpu-node");
        for q in 0..4 {
            b.pu(q, true);
        }
        b.object(Level::Socket, Some(0), &[0, 1]);
        b.object(Level::Socket, Some(1), &[2, 3]);
        for q in 0..4 {
            b.object(Level::Core, Some(q), &[q]);
        }
        let dev = |kind, bus: &str, name: &str, pus: &[u32]| DeviceSpec {
            kind,
            vendor: if kind == DeviceKind::Gpu {
                "NVIDIA"
            } else {
                "Mellanox"
            }
            .into(),
            bus_id: bus.into(),
            uuid: (kind == DeviceKind::Gpu).then(|| format!("GPU-{bus}")),
            names: vec![name.into()],
            pus_os: pus.to_vec(),
            near: "Package".into(),
            bridge: None,
        };
        b.device(dev(DeviceKind::Gpu, "0000:01:00.0", "cuda0", &[0, 1]));
        b.device(dev(DeviceKind::Gpu, "0000:02:00.0", "cuda1", &[0, 1]));
        b.device(dev(DeviceKind::Gpu, "0000:81:00.0", "cuda2", &[2, 3]));
        b.device(dev(DeviceKind::Gpu, "0000:82:00.0", "cuda3", &[2, 3]));
        b.device(dev(DeviceKind::Nic, "0000:03:00.0", "mlx5_0", &[0, 1]));
        b.device(dev(DeviceKind::Nic, "0000:83:00.0", "mlx5_1", &[2, 3]));
        b.build().unwrap()
    }

    #[test]
    fn a_per_task_step_is_placed_however_the_site_spells_its_configuration() {
        // Under per_task the step's GPUs get slots whatever cgroup.conf says (no file is
        // read: ConstrainDevices=yes, True, 1 or behind an Include are all the same here);
        // each task learns its GPUs from what it may open (the next tests). More tasks than
        // GPUs: refused, saying so.
        for cvd in ["0,1", "0,2"] {
            let gpus = read(
                env_of(&[
                    ("SLURM_STEP_GPUS", "0,2"),
                    ("CUDA_VISIBLE_DEVICES", cvd),
                    ("SLURM_TRES_BIND", "gres/gpu:per_task:1"),
                ]),
                "NVIDIA",
            )
            .unwrap();
            let placed = place_here(
                &node(),
                &request("gcsbnh", None, false),
                &gpus,
                &[0, 1],
                false,
                StepCpus::default(),
            )
            .unwrap();
            assert_eq!(placed.per_task.unwrap().slots.len(), 2);
            let e = place_here(
                &node(),
                &request("gcsbnh", None, false),
                &gpus,
                &[0, 1, 2],
                false,
                StepCpus::default(),
            )
            .unwrap_err();
            assert!(e.contains("need 3 GPU(s) where the step has 2 here"), "{e}");
        }
    }

    fn pair(p: PlacedHere) -> (Vec<TaskPlacement>, Vec<String>) {
        (p.tasks, p.notes)
    }

    fn env_of(vars: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let vars: Vec<(String, String)> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |name| vars.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone())
    }

    fn request(map: &str, bind: Option<&str>, isolate: bool) -> StepRequest {
        let user = UserOptions {
            map: Some(map.into()),
            bind: bind.map(String::from),
            gpu_isolate: isolate,
            ..UserOptions::default()
        };
        resolve(&user, &SiteConfig::default()).unwrap().unwrap()
    }

    /// Ranks 0 and 1 of `layout` on [`node`], by default binding.
    fn two_tasks(
        layout: &str,
        gpus: &StepGpus,
    ) -> Result<(Vec<TaskPlacement>, Vec<String>), String> {
        place_here(
            &node(),
            &request(layout, None, false),
            gpus,
            &[0, 1],
            false,
            StepCpus::default(),
        )
        .map(pair)
    }

    /// [`two_tasks`] with the binding `bind` asked.
    fn two_tasks_bound(
        layout: &str,
        bind: &str,
        gpus: &StepGpus,
    ) -> Result<(Vec<TaskPlacement>, Vec<String>), String> {
        place_here(
            &node(),
            &request(layout, Some(bind), false),
            gpus,
            &[0, 1],
            false,
            StepCpus::default(),
        )
        .map(pair)
    }

    /// The task's `LAMA_BIND`, as `task_init` sets it.
    fn lama_bind(req: &StepRequest, t: &TaskPlacement) -> String {
        crate::task_env::task_environment(req, t)
            .into_iter()
            .find(|(k, _)| *k == "LAMA_BIND")
            .map(|(_, v)| v)
            .expect("LAMA_BIND is always set")
    }

    fn var<'a>(t: &'a TaskPlacement, name: &str) -> Option<&'a str> {
        t.devices
            .iter()
            .find(|(k, _)| *k == name)
            .map(|(_, v)| v.as_str())
    }

    #[test]
    fn a_partial_step_with_constrained_devices() {
        // Slurm gave GPUs 1 and 2 (one per package) and, under ConstrainDevices, numbers them
        // 0 and 1 for CUDA. The step has CPUs 1-3. By hand: task 0 gets GPU 1 (near package
        // 0, whose only step CPU is 1), task 1 GPU 2 (package 1: its share, by default the
        // step's CPUs near its GPU, is both, 2-3).
        let m = node().restrict(&CpuList::parse("1-3").unwrap());
        let gpus = read(
            env_of(&[("SLURM_STEP_GPUS", "1,2"), ("CUDA_VISIBLE_DEVICES", "0,1")]),
            "NVIDIA",
        )
        .unwrap();
        let (tasks, notes) = place_here(
            &m,
            &request("gcsbnh", None, false),
            &gpus,
            &[7, 8],
            false,
            StepCpus::default(),
        )
        .map(pair)
        .unwrap();
        assert!(notes.is_empty(), "{notes:?}");
        assert_eq!(tasks[0].cpus.to_string(), "1");
        assert_eq!(tasks[1].cpus.to_string(), "2-3");
        assert_eq!(var(&tasks[0], "LAMA_GPUS"), Some("1"));
        assert_eq!(var(&tasks[0], "CUDA_VISIBLE_DEVICES"), Some("0,1"));
        assert_eq!(var(&tasks[1], "LAMA_GPUS"), Some("2"));
        assert_eq!(var(&tasks[1], "CUDA_VISIBLE_DEVICES"), Some("1,0"));
        assert_eq!(var(&tasks[1], "UCX_NET_DEVICES"), Some("mlx5_1:1"));
        assert_eq!(var(&tasks[0], "NCCL_IB_HCA"), Some("mlx5_0"));
    }

    #[test]
    fn uuids_name_the_cards_whatever_slurms_order() {
        // gres.conf Flags=env_uuid (Slurm 26.05): CUDA_VISIBLE_DEVICES names each GPU by UUID.
        // A site whose File= order is not bus order: Slurm's GPU 0 is the card at 81:00.0
        // (package 1, CPUs 2-3), its GPU 2 the card at 01:00.0 (package 0). LAMA deals the
        // ranks to the cards in the order of their CPUs: rank 0 to 01:00.0, which by UUID is
        // Slurm's GPU 2 (by index it would be taken for Slurm's GPU 0, whose UUID would then be
        // put first, the far card).
        let vars = [
            ("SLURM_STEP_GPUS", "0,2"),
            ("CUDA_VISIBLE_DEVICES", "GPU-0000:81:00.0,GPU-0000:01:00.0"),
        ];
        let gpus = read(env_of(&vars), "NVIDIA").unwrap();
        assert!(gpus.uuids);
        let (tasks, _) = two_tasks("gcsbnh", &gpus).unwrap();
        // (Its share of the CPUs near its card, by default: package 0's, 0-1.)
        assert_eq!(tasks[0].cpus.to_string(), "0-1");
        assert_eq!(var(&tasks[0], "LAMA_GPUS"), Some("2"));
        assert_eq!(
            var(&tasks[0], "CUDA_VISIBLE_DEVICES"),
            Some("GPU-0000:01:00.0,GPU-0000:81:00.0")
        );
        assert_eq!(tasks[1].cpus.to_string(), "2-3");
        assert_eq!(var(&tasks[1], "LAMA_GPUS"), Some("0"));
        assert_eq!(
            var(&tasks[1], "CUDA_VISIBLE_DEVICES"),
            Some("GPU-0000:81:00.0,GPU-0000:01:00.0")
        );
        // A UUID the topology lacks is refused, naming it.
        let gone = [vars[0], ("CUDA_VISIBLE_DEVICES", "GPU-x,GPU-0000:01:00.0")];
        let gpus = read(env_of(&gone), "NVIDIA").unwrap();
        let e = two_tasks("gcsbnh", &gpus).unwrap_err();
        assert!(e.contains("GPU-x"), "{e}");
        // MIG instances are refused when the step is read, with the reason.
        let mig = [
            ("SLURM_STEP_GPUS", "0"),
            (
                "CUDA_VISIBLE_DEVICES",
                "MIG-c6d4f1ef-42e4-5de3-91c7-45d71c87eb3f",
            ),
        ];
        let e = read(env_of(&mig), "NVIDIA").unwrap_err();
        assert!(e.contains("MIG instances"), "{e}");
    }

    #[test]
    fn cards_from_gres_conf_files_whatever_slurms_order() {
        // gres.conf lists the cards of package 1 first (read by gpu_cards): Slurm's GPU 0 is
        // the card at 81:00.0 (CPUs 2-3), its GPU 2 the card at 01:00.0 (CPUs 0-1). By index
        // the task holding Slurm's GPU 0 would be put on CPU 0, beside the far card.
        let vars = [("SLURM_STEP_GPUS", "0,2"), ("CUDA_VISIBLE_DEVICES", "0,2")];
        let mut gpus = read(env_of(&vars), "NVIDIA").unwrap();
        gpus.cards = Some(vec!["0000:81:00.0".into(), "0000:01:00.0".into()]);
        let (tasks, _) = two_tasks("gcsbnh", &gpus).unwrap();
        // (Its share of the CPUs near its card, by default: package 0's, 0-1.)
        assert_eq!(tasks[0].cpus.to_string(), "0-1");
        assert_eq!(var(&tasks[0], "LAMA_GPUS"), Some("2"));
        assert_eq!(var(&tasks[0], "CUDA_VISIBLE_DEVICES"), Some("2,0"));
        assert_eq!(tasks[1].cpus.to_string(), "2-3");
        assert_eq!(var(&tasks[1], "LAMA_GPUS"), Some("0"));
        // Without the cards, index order: Slurm's GPU 0 taken for the card at 01:00.0.
        gpus.cards = None;
        let (tasks, _) = two_tasks("gcsbnh", &gpus).unwrap();
        assert_eq!(var(&tasks[0], "LAMA_GPUS"), Some("0"));
        // A card the topology lacks is refused, naming it and the topology's cards.
        gpus.cards = Some(vec!["0000:81:00.0".into(), "0000:c1:00.0".into()]);
        let e = two_tasks("gcsbnh", &gpus).unwrap_err();
        assert!(
            e.contains("Slurm's GPU 2 is the card at 0000:c1:00.0")
                && e.contains("0000:01:00.0, 0000:02:00.0, 0000:81:00.0, 0000:82:00.0"),
            "{e}"
        );
    }

    #[test]
    fn isolation_and_binding_to_the_gpu_cpus() {
        let m = node();
        let gpus = read(
            env_of(&[
                ("SLURM_STEP_GPUS", "0,1,2,3"),
                ("CUDA_VISIBLE_DEVICES", "0,1,2,3"),
            ]),
            "NVIDIA",
        )
        .unwrap();
        // Local task 0 is global rank 5 and local task 1 rank 4: rank 4 comes first. Two tasks
        // on four GPUs use one GPU of each package (0 and 2), each seeing only its own.
        let (tasks, _) = place_here(
            &m,
            &request("gcsbnh", Some("1g"), true),
            &gpus,
            &[5, 4],
            false,
            StepCpus::default(),
        )
        .map(pair)
        .unwrap();
        assert_eq!(var(&tasks[1], "CUDA_VISIBLE_DEVICES"), Some("0"));
        assert_eq!(var(&tasks[0], "CUDA_VISIBLE_DEVICES"), Some("2"));
        assert_eq!(tasks[1].cpus.to_string(), "0-1");
        assert_eq!(tasks[0].cpus.to_string(), "2-3");
        // Under 1g the step's own LAMA_BIND (1g) stays.
        assert_eq!(tasks[0].bind, None);
        assert_eq!(
            lama_bind(&request("gcsbnh", Some("1g"), false), &tasks[0]),
            "1g"
        );
    }

    #[test]
    fn lama_bind_names_the_binding_widened_for_cpus_per_task() {
        let gpus = read(
            env_of(&[("SLURM_STEP_GPUS", "0,2"), ("CUDA_VISIBLE_DEVICES", "0,2")]),
            "NVIDIA",
        )
        .unwrap();
        // -c 2: by hand, each task's GPU is near a package of two one-thread cores, so the
        // default 1c widens to 2c (the whole package), and LAMA_BIND says 2c, not 1c.
        let cpus = StepCpus {
            per_task: 2,
            ..StepCpus::default()
        };
        let (tasks, _) = place_here(
            &node(),
            &request("gcsbnh", None, false),
            &gpus,
            &[0, 1],
            false,
            cpus,
        )
        .map(pair)
        .unwrap();
        assert_eq!(tasks[0].cpus.to_string(), "0-1");
        assert_eq!(tasks[1].cpus.to_string(), "2-3");
        let req = request("gcsbnh", None, false);
        assert_eq!(lama_bind(&req, &tasks[0]), "2c");
        assert_eq!(lama_bind(&req, &tasks[1]), "2c");
        assert!(crate::task_env::verbose_line(&req, "n", 0, 1, &tasks[0])
            .starts_with("lama gcsbnh:2c "));
        // Without -c, by default each task's share of the CPUs near its GPU: one task per
        // package of 2 cores, 2c as with -c 2. An asked --lama-bind=1c is kept.
        let (tasks, _) = two_tasks("gcsbnh", &gpus).unwrap();
        assert_eq!(lama_bind(&req, &tasks[0]), "2c");
        let (tasks, _) = two_tasks_bound("gcsbnh", "1c", &gpus).unwrap();
        assert_eq!(
            lama_bind(&request("gcsbnh", Some("1c"), false), &tasks[0]),
            "1c"
        );
        assert_eq!(tasks[0].cpus.to_string(), "0");
    }

    /// The per-task slots of a step placed on `m` for local tasks of ranks `globals`.
    fn per_task_here(m: &Machine, vars: &[(&str, &str)], globals: &[u32]) -> SlurmPerTask {
        let gpus = read(env_of(vars), "NVIDIA").unwrap();
        let placed = place_here(
            m,
            &request("gcsbnh", None, false),
            &gpus,
            globals,
            false,
            StepCpus::default(),
        )
        .unwrap();
        assert!(placed.tasks.is_empty());
        *placed.per_task.expect("Slurm binds per task")
    }

    #[test]
    fn slurms_per_task_binding_is_kept_and_other_bindings_refused() {
        // Slurm 24.11's --gpus-per-task=1 on GPUs 0 and 2: per_task:1, each task gets one,
        // chosen by Slurm when it starts. Each step GPU gets a slot in user_init; each task
        // takes the slot of the GPU Slurm gave it in task_init (crate::task). By hand: GPU 2
        // is near package 1 (CPUs 2-3), GPU 0 near package 0 (0-1); by default each slot is
        // its GPU's share, the package.
        let vars = [
            ("SLURM_STEP_GPUS", "0,2"),
            ("CUDA_VISIBLE_DEVICES", "0,2"),
            ("SLURM_TRES_PER_TASK", "gres/gpu=1"),
            ("SLURM_TRES_BIND", "gres/gpu:per_task:1"),
        ];
        // Local task 0 is rank 1, local task 1 rank 0.
        let p = per_task_here(&node(), &vars, &[1, 0]);
        assert_eq!(p.buses, ["0000:01:00.0", "0000:81:00.0"]);
        // Slurm gave local task 0 (rank 1) GPU 2: it runs on package 1.
        let t = p.task(0, &[2]).unwrap();
        assert_eq!((t.global, t.cpus.to_string()), (1, "2-3".to_string()));
        assert_eq!(var(&t, "LAMA_GPUS"), Some("2"));
        // Slurm's per-task value of CUDA_VISIBLE_DEVICES is left alone.
        assert_eq!(var(&t, "CUDA_VISIBLE_DEVICES"), None);
        assert_eq!(var(&t, "UCX_NET_DEVICES"), Some("mlx5_1:1"));
        let t = p.task(1, &[0]).unwrap();
        assert_eq!((t.global, t.cpus.to_string()), (0, "0-1".to_string()));
        assert_eq!(var(&t, "UCX_NET_DEVICES"), Some("mlx5_0:1"));
        // A GPU the step lacks, or two where Slurm binds one: the task is not started.
        let e = p.task(0, &[1]).unwrap_err();
        assert!(
            e.contains("GPU 1, which is not among the step's GPUs on this node (0,2)"),
            "{e}"
        );
        let e = p.task(0, &[0, 2]).unwrap_err();
        assert!(
            e.contains("gave this task 2 GPU(s) (0,2) where it binds 1 per task"),
            "{e}"
        );
        // --gpu-bind=none: LAMA chooses, as without binding (rank 0 first: GPU 0).
        let mut none = vars;
        none[3] = ("SLURM_TRES_BIND", "gres/gpu:none");
        let gpus = read(env_of(&none), "NVIDIA").unwrap();
        let (tasks, _) = two_tasks("gcsbnh", &gpus).unwrap();
        assert_eq!(var(&tasks[0], "LAMA_GPUS"), Some("0"));
        assert_eq!(var(&tasks[0], "CUDA_VISIBLE_DEVICES"), Some("0,2"));
        // No per-task slots: each task's placement is made in user_init.
        assert_eq!(tasks.len(), 2);
        // Another Slurm binding: refused, naming the way out.
        let mut closest = vars;
        closest[3] = ("SLURM_TRES_BIND", "gres/gpu:closest");
        let gpus = read(env_of(&closest), "NVIDIA").unwrap();
        let e = two_tasks("g", &gpus).unwrap_err();
        assert!(
            e.contains("--gpu-bind=closest") && e.contains("--gpu-bind=none"),
            "{e}"
        );
        // per_task:1 with more tasks than GPUs.
        let gpus = read(env_of(&vars), "NVIDIA").unwrap();
        let e = place_here(
            &node(),
            &request("g", None, false),
            &gpus,
            &[0, 1, 2],
            true,
            StepCpus::default(),
        )
        .unwrap_err();
        assert!(
            e.contains("this node's 3 task(s) need 3 GPU(s) where the step has 2 here"),
            "{e}"
        );
    }

    #[test]
    fn one_task_per_gpu_takes_its_gpus_slot_and_shared_gpus_are_refused() {
        // --ntasks-per-gpu=1: srun writes single:1; Slurm gives each task its own GPU, chosen
        // as it starts, like per_task:1. By hand: GPU 2 near package 1 (CPUs 2-3).
        let single = [
            ("SLURM_STEP_GPUS", "0,2"),
            ("SLURM_TRES_BIND", "gres/gpu:single:1"),
        ];
        let p = per_task_here(&node(), &single, &[0, 1]);
        assert_eq!(p.task(0, &[2]).unwrap().cpus.to_string(), "2-3");
        // --ntasks-per-gpu=2: tasks share a GPU and none can tell which of its tasks it is.
        let shared = [
            ("SLURM_STEP_GPUS", "0,2"),
            ("SLURM_TRES_BIND", "gres/gpu:single:2"),
        ];
        let gpus = read(env_of(&shared), "NVIDIA").unwrap();
        let e = two_tasks("gcsbnh", &gpus).unwrap_err();
        assert!(
            e.contains("one GPU shared by up to 2 tasks (--ntasks-per-gpu=2")
                && e.contains("--ntasks-per-gpu=1"),
            "{e}"
        );
    }

    /// Per-task slots on all four GPUs of `node()` for two tasks, each GPU's file
    /// `/dev/nvidiaN`.
    fn four_gpu_slots() -> SlurmPerTask {
        let vars = [
            ("SLURM_STEP_GPUS", "0,1,2,3"),
            ("CUDA_VISIBLE_DEVICES", "0,1,2,3"),
            ("SLURM_TRES_BIND", "gres/gpu:per_task:1"),
        ];
        let mut p = per_task_here(&node(), &vars, &[0, 1]);
        p.files = Some(Ok((0..4)
            .map(|g| vec![format!("/dev/nvidia{g}")])
            .collect()));
        p
    }

    fn only(open: &'static [&'static str]) -> impl Fn(&std::path::Path) -> std::io::Result<bool> {
        move |f: &std::path::Path| Ok(f.to_str().is_some_and(|f| open.contains(&f)))
    }

    #[test]
    fn a_task_confined_to_its_gpus_knows_them_by_the_files_it_may_open() {
        // Under ConstrainDevices (yes, True, 1, up: Slurm's reading, not the plugin's) each
        // task's SLURM_STEP_GPUS is the step's first GPUs (0), whichever it holds; the devices
        // cgroup lets it open only its own: GPU 3, whatever the variable says.
        let p = four_gpu_slots();
        for given in ["0", "3", "1"] {
            assert_eq!(
                p.own_gpus(Some(given), only(&["/dev/nvidia3"])).unwrap(),
                [3]
            );
        }
        // By hand: GPUs 2 and 3 are near package 1 (CPUs 2-3), one slot each.
        let t = p.task(0, &[3]).unwrap();
        assert_eq!(t.cpus.to_string(), "3");
        let e = p
            .own_gpus(Some("0"), |_| {
                Err(std::io::Error::from_raw_os_error(libc::EACCES))
            })
            .unwrap_err();
        assert!(
            e.contains("whether this task may open /dev/nvidia0 (Slurm's GPU 0) cannot be told"),
            "{e}"
        );
        let e = p.own_gpus(Some("0"), only(&[])).unwrap_err();
        assert!(
            e.contains("may open none of the step's GPUs (0,1,2,3)"),
            "{e}"
        );
        let e = p.own_gpus(None, only(&["/dev/nvidia3"])).unwrap_err();
        assert!(e.contains("SLURM_STEP_GPUS is not set"), "{e}");
        // Device files that could not be found: no task can tell its GPUs.
        let mut unknown = p.clone();
        unknown.files = Some(Err("no device file of Slurm's GPU 0 names its card".into()));
        let e = unknown
            .own_gpus(Some("0"), only(&["/dev/nvidia3"]))
            .unwrap_err();
        assert!(e.contains("the step's GPU device files are unknown"), "{e}");
    }

    #[test]
    fn a_task_that_may_open_every_step_gpu_takes_the_ones_slurm_names() {
        // --gres-flags=allow-task-sharing or ConstrainDevices=no: every step GPU is open to
        // every task, and the task's SLURM_STEP_GPUS names the one Slurm binds.
        let all: &[&str] = &[
            "/dev/nvidia0",
            "/dev/nvidia1",
            "/dev/nvidia2",
            "/dev/nvidia3",
        ];
        let p = four_gpu_slots();
        assert_eq!(p.own_gpus(Some("2"), only(all)).unwrap(), [2]);
        // A step of GPUs 1 and 2: under allow-task-sharing Slurm numbers them by their places
        // (0 and 1); without it by the node's indexes (1 and 2).
        let vars = [
            ("SLURM_STEP_GPUS", "1,2"),
            ("CUDA_VISIBLE_DEVICES", "1,2"),
            ("SLURM_TRES_BIND", "gres/gpu:per_task:1"),
        ];
        let mut p = per_task_here(&node(), &vars, &[0, 1]);
        p.files = Some(Ok(vec![
            vec!["/dev/nvidia1".into()],
            vec!["/dev/nvidia2".into()],
        ]));
        let both: &[&str] = &["/dev/nvidia1", "/dev/nvidia2"];
        // 0 can only be a place (GPU 1), 2 only an index (GPU 2).
        assert_eq!(p.own_gpus(Some("0"), only(both)).unwrap(), [1]);
        assert_eq!(p.own_gpus(Some("2"), only(both)).unwrap(), [2]);
        // 1 is GPU 1 by index and GPU 2 by place: not told, saying why.
        let e = p.own_gpus(Some("1"), only(both)).unwrap_err();
        assert!(
            e.contains("may be the node's GPU(s) 1 or the step's 2 by their places"),
            "{e}"
        );
        let e = p.own_gpus(Some("7"), only(both)).unwrap_err();
        assert!(
            e.contains("not among the step's GPUs on this node (1,2)"),
            "{e}"
        );
        // Confined to one of them: that one, whatever the number.
        assert_eq!(p.own_gpus(Some("1"), only(&["/dev/nvidia2"])).unwrap(), [2]);
        // The node's other GPUs (0 and 3): a task that may open them all (ConstrainDevices=no)
        // leaves 1 ambiguous; one that may not (the step's devices confined: only
        // allow-task-sharing opens every step GPU to each task) numbers by place: GPU 2.
        p.others = vec![vec!["/dev/nvidia0".into()], vec!["/dev/nvidia3".into()]];
        assert!(p.own_gpus(Some("1"), only(all)).is_err());
        assert_eq!(p.own_gpus(Some("1"), only(both)).unwrap(), [2]);
        assert_eq!(p.own_gpus(Some("0"), only(both)).unwrap(), [1]);
    }

    /// Slurm's choice ([`lama_slurm::gpu::per_task_choice`], checked by hand there), as
    /// Slurm's indexes.
    fn slurms_choice(cores: &[Vec<u32>], masks: &[Vec<u32>], k: usize) -> Vec<Vec<u32>> {
        lama_slurm::gpu::per_task_choice(cores, masks, k)
            .into_iter()
            .map(|own| own.into_iter().map(|g| g as u32).collect())
            .collect()
    }

    /// Checks that every task, given the GPUs Slurm would give it, gets CPUs near them and
    /// that no two tasks share a CPU.
    fn slots_serve(m: &Machine, p: &SlurmPerTask, choice: &[Vec<u32>]) -> Vec<String> {
        let mut seen: Vec<u32> = Vec::new();
        let mut out = Vec::new();
        for (local, own) in choice.iter().enumerate() {
            let t = p.task(local, own).unwrap();
            for &g in own {
                let near = &m.devices()[g as usize].pus;
                let pus: Vec<u32> = near.clone().map(|q| m.pus()[q as usize].os).collect();
                assert!(
                    t.cpus.cpus().iter().any(|c| pus.contains(c)),
                    "{own:?}: {}",
                    t.cpus
                );
            }
            assert!(
                t.cpus.cpus().iter().all(|c| !seen.contains(c)),
                "shared CPU: {}",
                t.cpus
            );
            seen.extend(t.cpus.cpus());
            out.push(t.cpus.to_string());
        }
        out
    }

    #[test]
    fn the_slots_serve_whatever_gpus_slurm_gives_each_task() {
        // The examples, by hand and by the transcription. 4 GPUs: 0 and 2 near package
        // 0 (CPUs 0-1), 1 and 3 near package 1 (2-3) (gres.conf Cores= the same).
        let mut b = lama_engine::MachineBuilder::new("interleaved");
        for q in 0..4 {
            b.pu(q, true);
            b.object(Level::Core, Some(q), &[q]);
        }
        b.object(Level::Socket, Some(0), &[0, 1]);
        b.object(Level::Socket, Some(1), &[2, 3]);
        for (g, pus) in [[0, 1], [2, 3], [0, 1], [2, 3]].iter().enumerate() {
            b.device(DeviceSpec {
                kind: DeviceKind::Gpu,
                vendor: "NVIDIA".into(),
                bus_id: format!("0000:{:02x}:00.0", g + 1),
                uuid: None,
                names: vec![format!("cuda{g}")],
                pus_os: pus.to_vec(),
                near: "Package".into(),
                bridge: None,
            });
        }
        let m = b.build().unwrap();
        let cores = vec![vec![0, 1], vec![2, 3], vec![0, 1], vec![2, 3]];
        // per_task:2, task 0's mask on package 0, task 1's on package 1 (block): Slurm gives
        // task 0 GPUs 0 and 2, task 1 GPUs 1 and 3; index order (0,1 | 2,3) would refuse.
        let choice = slurms_choice(&cores, &[vec![0], vec![2]], 2);
        assert_eq!(choice, [vec![0, 2], vec![1, 3]]);
        let two = [
            ("SLURM_STEP_GPUS", "0,1,2,3"),
            ("SLURM_TRES_PER_TASK", "gres/gpu=2"),
            ("SLURM_TRES_BIND", "gres/gpu:per_task:2"),
        ];
        let p = per_task_here(&m, &two, &[0, 1]);
        assert_eq!(slots_serve(&m, &p, &choice), ["0-1", "2-3"]);
        // --gres=gpu:4 --gpu-bind=per_task:1 -n2, both tasks on package 0 (CPUs 0 and 1):
        // Slurm gives task 1 GPU 2, the next near package 0, not GPU 1. Spare GPUs have slots
        // too, so task 1 runs beside GPU 2.
        let choice = slurms_choice(&cores, &[vec![0], vec![1]], 1);
        assert_eq!(choice, [vec![0], vec![2]]);
        let one = [
            ("SLURM_STEP_GPUS", "0,1,2,3"),
            ("SLURM_TRES_BIND", "gres/gpu:per_task:1"),
        ];
        let p = per_task_here(&m, &one, &[0, 1]);
        assert_eq!(slots_serve(&m, &p, &choice), ["0", "1"]);
        // Per-NUMA Cores=: 2 packages of 2 NUMA nodes of 2 cores, a GPU per NUMA node
        // (gres.conf Cores= the NUMA node's). per_task:2 with one task per package mask: Slurm
        // gives task 0 GPU 0 (its NUMA node) then GPU 1 (next free), task 1 GPUs 2 and 3.
        let mut b = lama_engine::MachineBuilder::new("per-numa");
        for q in 0..8 {
            b.pu(q, true);
            b.object(Level::Core, Some(q), &[q]);
        }
        for s in 0..2 {
            b.object(
                Level::Socket,
                Some(s),
                &[4 * s, 4 * s + 1, 4 * s + 2, 4 * s + 3],
            );
        }
        for n in 0..4 {
            b.object(Level::Numa, Some(n), &[2 * n, 2 * n + 1]);
            b.device(DeviceSpec {
                kind: DeviceKind::Gpu,
                vendor: "NVIDIA".into(),
                bus_id: format!("0000:{:02x}:00.0", n + 1),
                uuid: None,
                names: vec![format!("cuda{n}")],
                pus_os: vec![2 * n, 2 * n + 1],
                near: "NUMANode".into(),
                bridge: None,
            });
        }
        let m = b.build().unwrap();
        let cores: Vec<Vec<u32>> = (0..4).map(|n| vec![2 * n, 2 * n + 1]).collect();
        let p = per_task_here(&m, &two, &[0, 1]);
        for masks in [
            vec![vec![0], vec![4]],
            vec![vec![2], vec![0]],
            vec![vec![6], vec![7]],
        ] {
            let choice = slurms_choice(&cores, &masks, 2);
            slots_serve(&m, &p, &choice);
        }
        // With a spare GPU (3 GPUs, per_task:1, 2 tasks on NUMA node 2's CPUs): Slurm gives
        // GPU 2 then GPU 0.
        let spare = [
            ("SLURM_STEP_GPUS", "0,1,2"),
            ("SLURM_TRES_BIND", "gres/gpu:per_task:1"),
        ];
        let p = per_task_here(&m, &spare, &[0, 1]);
        let choice = slurms_choice(&cores[..3], &[vec![4], vec![5]], 1);
        assert_eq!(choice, [vec![2], vec![0]]);
        assert_eq!(slots_serve(&m, &p, &choice), ["4-5", "0-1"]);
    }

    #[test]
    fn steps_without_gpus_or_with_gpus_the_topology_lacks_are_refused() {
        let e = read(env_of(&[]), "NVIDIA").unwrap_err();
        assert!(e.contains("SLURM_STEP_GPUS is not set"), "{e}");
        let gpus = read(env_of(&[("SLURM_STEP_GPUS", "4")]), "NVIDIA").unwrap();
        let e = place_here(
            &node(),
            &request("g", None, false),
            &gpus,
            &[0],
            false,
            StepCpus::default(),
        )
        .unwrap_err();
        assert!(
            e.starts_with("Slurm's GPU 4 is not in this node's topology"),
            "{e}"
        );
        let per = read(
            env_of(&[("SLURM_STEP_GPUS", "0"), ("SLURM_GPUS_PER_TASK", "tesla:2")]),
            "NVIDIA",
        )
        .unwrap();
        assert_eq!(per.per_task, 2);
        let e = place_here(
            &node(),
            &request("g", None, false),
            &per,
            &[0],
            false,
            StepCpus::default(),
        )
        .unwrap_err();
        assert!(e.starts_with("each task asks for 2 GPUs"), "{e}");
    }
}

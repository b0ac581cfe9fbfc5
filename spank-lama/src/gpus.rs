//! A step placed by GPU (a layout led by `g`, docs/devices.md): the GPUs Slurm gave the step on
//! this node, mapped to the topology's PCI devices, and each task's GPUs, NIC, CPUs and
//! variables.
//!
//! Slurm writes the step's GPUs into the step's environment before `user_init`
//! (`SLURM_STEP_GPUS`: Slurm's indexes; the vendor variable, e.g. `CUDA_VISIBLE_DEVICES`: what
//! the runtime will see, renumbered from 0 under `ConstrainDevices=yes`). Both are read here;
//! a step without them, or whose GPUs the topology lacks, is not placed (fail closed).

use crate::placement::{omp_place_list, omp_places, StepCpus, TaskPlacement};
use crate::request::StepRequest;
use lama_engine::{
    numa_nodes, place_by_gpu_ranked, render, Device, DeviceKind, GpuError, GpuRequest, Machine,
};
use lama_slurm::gpu::{
    gpus_per_task, group_notes, nic_variables, numbers_gpus_locally, parse_indexes, step_gpus,
    step_gpus_by_uuid, task_variables, vendor_tokens, visible_variable, SlurmGpuBind, VendorTokens,
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
    /// Under `per_task` only: whether Slurm numbers each task's GPUs from 0 in its own
    /// environment ([`lama_slurm::gpu::numbers_gpus_locally`]), so that a task cannot tell
    /// which GPU it holds; `Err` when that could not be found out.
    pub numbered_locally: Option<Result<bool, String>>,
    /// Whether the vendor variable names the GPUs by UUID (gres.conf `Flags=env_uuid`), which
    /// then finds each of them in the topology.
    pub uuids: bool,
    /// The PCI bus id of each GPU of `slurm`, where Slurm numbers the node's GPUs by
    /// gres.conf's files ([`crate::gpu_cards::step_cards`]); `None` where it numbers them in
    /// PCI bus order (detection), Slurm's GPU `k` being the topology's `k`-th.
    pub cards: Option<Vec<String>>,
}

/// Reads the step's GPUs from its environment (`env`); `vendor` names the variable read.
/// Under Slurm's `per_task` binding, also whether Slurm numbers each task's GPUs from 0:
/// certain when the step's vendor variable differs from its `SLURM_STEP_GPUS`, else from
/// slurm.conf and cgroup.conf (`slurm_conf`, slurmstepd's own: [`crate::slurm_conf::config_file`],
/// never the job's `SLURM_CONF`; and the cgroup.conf beside it, read by `file`).
pub fn read(
    env: impl Fn(&str) -> Option<String>,
    vendor: &str,
    slurm_conf: Option<&std::path::Path>,
    file: impl Fn(&std::path::Path) -> std::io::Result<String>,
) -> Result<StepGpus, String> {
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
    // UUIDs are the same however Slurm numbers the GPUs: only numbers can tell.
    let numbers = tokens.as_deref().filter(|_| !uuids);
    let numbered_locally = matches!(binding, SlurmGpuBind::PerTask(_))
        .then(|| numbered_locally(&slurm, numbers, slurm_conf, file));
    Ok(StepGpus {
        slurm,
        tokens,
        per_task: per_task.unwrap_or(1),
        binding,
        numbered_locally,
        uuids,
        cards: None,
    })
}

/// Whether Slurm numbers the GPUs from 0 in each step and task (see [`StepGpus`]).
fn numbered_locally(
    slurm: &[u32],
    tokens: Option<&[String]>,
    slurm_conf: Option<&std::path::Path>,
    file: impl Fn(&std::path::Path) -> std::io::Result<String>,
) -> Result<bool, String> {
    let global: Vec<String> = slurm.iter().map(u32::to_string).collect();
    if tokens.is_some_and(|t| t != global.as_slice()) {
        return Ok(true);
    }
    let path = slurm_conf.ok_or(
        "slurmstepd has no SLURM_CONF of its own (slurmd sets it), so slurm.conf cannot be read",
    )?;
    let conf = file(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let cgroup = path.with_file_name("cgroup.conf");
    let cgroup_conf = match file(&cgroup) {
        Ok(text) => Some(text),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return Err(format!("cannot read {}: {e}", cgroup.display())),
    };
    Ok(numbers_gpus_locally(&conf, cgroup_conf.as_deref()))
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

/// This node's tasks placed by GPU, by local task id, and the notes for the user. `machine`
/// is restricted to the step's CPUs; `globals[i]` is local task `i`'s global rank.
pub fn place_here(
    machine: &Machine,
    request: &StepRequest,
    gpus: &StepGpus,
    globals: &[u32],
    overcommit: bool,
    cpus: StepCpus,
) -> Result<(Vec<TaskPlacement>, Vec<String>), String> {
    let Some(options) = request.gpu else {
        return Err("the request does not place by GPU".to_string());
    };
    let all = machine_gpus(machine);
    let by_uuid = match &gpus.tokens {
        Some(t) if gpus.uuids && t.len() == gpus.slurm.len() => step_gpus_by_uuid(&all, t),
        _ => None,
    };
    let step = match (by_uuid, &gpus.cards) {
        (Some(found), _) => found?,
        (None, Some(cards)) => step_gpus_by_card(&all, &gpus.slurm, cards)?,
        (None, None) => step_gpus(&all, &gpus.slurm)?,
    };
    let mut by_rank: Vec<usize> = (0..globals.len()).collect();
    by_rank.sort_by_key(|&i| globals[i]);
    // `position[j]`: where the j-th GPU given to the engine is in SLURM_STEP_GPUS.
    let (position, per_task, fixed): (Vec<usize>, u32, bool) = match &gpus.binding {
        SlurmGpuBind::None => ((0..step.len()).collect(), gpus.per_task, false),
        // Slurm's own assignment, which ConstrainDevices=yes enforces per task: each task gets
        // K GPUs of the step, chosen by Slurm when the task starts (the free GPUs closest to
        // the CPU mask task/affinity computed for it, `_get_gres_per_task` in gres.c), so not
        // known here. LAMA places one unit per task beside the step's GPUs taken K at a time
        // in index order, and each task takes, in `task_init`, the unit of the GPUs Slurm gave
        // it ([`TaskPlacement::slurm_gpus`]).
        SlurmGpuBind::PerTask(k) => {
            let way_out = "give --gpu-bind=none to let LAMA choose each task's GPUs (each task \
                           can then open all the step's GPUs), or use a layout without 'g'";
            // Always read under per_task (see `read`).
            let numbered_locally = gpus
                .numbered_locally
                .clone()
                .unwrap_or_else(|| Err("it was not read".to_string()));
            match numbered_locally {
                Ok(false) => {}
                Ok(true) => {
                    return Err(format!(
                        "Slurm binds {k} GPU(s) to each task itself (per_task:{k}, which \
                         --gpus-per-task implies), choosing them by the task's CPUs, and with \
                         ConstrainDevices=yes it numbers each task's GPUs from 0 \
                         (SLURM_STEP_GPUS, CUDA_VISIBLE_DEVICES), so no task can tell which GPU \
                         it holds and LAMA cannot place it beside it: {way_out}"
                    ))
                }
                Err(why) => {
                    return Err(format!(
                        "Slurm binds {k} GPU(s) to each task itself (per_task:{k}), and whether \
                         it names each task's GPUs by their node index could not be found out \
                         ({why}): {way_out}"
                    ));
                }
            }
            let k = *k as usize;
            let mut in_order: Vec<usize> = (0..step.len()).collect();
            in_order.sort_by_key(|&i| gpus.slurm[i]);
            let wanted = globals.len() * k;
            if wanted > step.len() {
                return Err(format!(
                    "Slurm binds {k} GPU(s) to each task (per_task:{k}), and this node's {} \
                     task(s) need {wanted} GPU(s) where the step has {} here; ask for more GPUs \
                     or fewer tasks",
                    globals.len(),
                    step.len()
                ));
            }
            in_order.truncate(wanted);
            (in_order, k as u32, true)
        }
        SlurmGpuBind::Other(kind) => {
            return Err(format!(
                "Slurm binds each task to GPUs itself (--gpu-bind={}), and under \
                 ConstrainDevices=yes a task can open only those, so a layout led by 'g' cannot \
                 choose them: give --gpu-bind=none to let LAMA choose each task's GPUs, \
                 --gpu-bind=per_task:K to keep Slurm's with each task on the CPUs near them, or \
                 a layout without 'g'",
                lama_slurm::hostlist::shown(kind)
            ))
        }
    };
    let devices: Vec<&Device> = position.iter().map(|&i| step[i]).collect();
    let req = GpuRequest {
        layout: request.layout.clone(),
        bind: (!options.bind_gpu).then(|| request.binding()),
        mppr: request.mppr.clone(),
        per_gpu: options.per_gpu,
        gpus_per_task: per_task,
        order: request.order,
        oversubscribe: overcommit,
        fixed,
        bind_asked: request.bind.is_some(),
        cpus_per_task: cpus.per_task.max(1),
        cpu_unit: cpus.unit,
    };
    let rank = |t: u32| by_rank.get(t as usize).map_or(t, |&local| globals[local]);
    let placed = place_by_gpu_ranked(
        machine,
        &devices,
        globals.len() as u32,
        &req,
        "the step has no GPU here",
        &rank,
    )
    .map_err(|e| match e {
        GpuError::Place { .. } if !overcommit => {
            format!("{e} (to oversubscribe: srun --overcommit)")
        }
        e => e.to_string(),
    })?;
    let vendor = devices.first().map_or("", |d| d.vendor.as_str());
    // Bound by Slurm, a task sees only its own GPUs, and Slurm's value of the vendor variable
    // for it already names them: it is left alone.
    let tokens = gpus.tokens.as_deref().filter(|_| !fixed);
    let mut notes = placed.notes.clone();
    // The CPU path's notes, group by group.
    notes.extend(group_notes(machine, &placed, &req));
    if fixed && request.verbose {
        notes.push(format!(
            "Slurm binds {per_task} GPU(s) to each task (per_task:{per_task}, which \
             --gpus-per-task implies) and chooses them by the task's CPUs: each task keeps \
             Slurm's and runs on the CPUs near them; --gpu-bind=none lets LAMA choose each \
             task's GPUs"
        ));
    }
    if !fixed && (tokens.is_some_and(|t| t.len() != gpus.slurm.len()) || tokens.is_none()) {
        notes.push(format!(
            "{} does not list one GPU for each of SLURM_STEP_GPUS ({}): it is left as Slurm set \
             it, and each task's GPUs are only in LAMA_GPUS",
            visible_variable(vendor),
            gpus.slurm
                .iter()
                .map(u32::to_string)
                .collect::<Vec<_>>()
                .join(",")
        ));
    }
    let mut out: Vec<Option<TaskPlacement>> = vec![None; globals.len()];
    for (k, &local) in by_rank.iter().enumerate() {
        let t = &placed.tasks[k];
        let own: Vec<usize> = t.gpus.iter().map(|&j| position[j]).collect();
        let mut env = task_variables(vendor, tokens, &gpus.slurm, &own, options.isolate);
        if let Some(n) = t.nic {
            env.extend(nic_variables(&machine.devices()[n]));
        }
        let places = if request.omp {
            let per_cpu = lama_slurm::task_env::one_place_per_cpu(cpus.per_task, cpus.unit);
            omp_places(machine, &t.bound_logical, per_cpu)
        } else {
            Vec::new()
        };
        out[local] = Some(TaskPlacement {
            global: globals[local],
            pu_os: machine.pus()[t.pu_logical as usize].os,
            pu_logical: t.pu_logical,
            cpus: t.cpus.clone(),
            picture: if request.verbose {
                render::picture(machine, &t.bound_logical)
            } else {
                String::new()
            },
            omp_places: omp_place_list(&places),
            omp_place_count: places.len(),
            mems: numa_nodes(machine, &t.bound_logical),
            devices: env,
            bind: t.bind,
            slurm_gpus: if fixed {
                let mut mine: Vec<u32> = own.iter().map(|&i| gpus.slurm[i]).collect();
                mine.sort_unstable();
                mine
            } else {
                Vec::new()
            },
        });
    }
    Ok((out.into_iter().flatten().collect(), notes))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::SiteConfig;

    /// slurmstepd's own slurm.conf in these tests.
    fn conf() -> Option<&'static std::path::Path> {
        Some(std::path::Path::new("/etc/slurm/slurm.conf"))
    }
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
        };
        b.device(dev(DeviceKind::Gpu, "0000:01:00.0", "cuda0", &[0, 1]));
        b.device(dev(DeviceKind::Gpu, "0000:02:00.0", "cuda1", &[0, 1]));
        b.device(dev(DeviceKind::Gpu, "0000:81:00.0", "cuda2", &[2, 3]));
        b.device(dev(DeviceKind::Gpu, "0000:82:00.0", "cuda3", &[2, 3]));
        b.device(dev(DeviceKind::Nic, "0000:03:00.0", "mlx5_0", &[0, 1]));
        b.device(dev(DeviceKind::Nic, "0000:83:00.0", "mlx5_1", &[2, 3]));
        b.build().unwrap()
    }

    fn no_files(path: &std::path::Path) -> std::io::Result<String> {
        Err(std::io::Error::new(
            std::io::ErrorKind::NotFound,
            path.display().to_string(),
        ))
    }

    /// slurm.conf with task/cgroup, and cgroup.conf without ConstrainDevices.
    fn cgroup_tasks(path: &std::path::Path) -> std::io::Result<String> {
        match path.to_str() {
            Some("/etc/slurm/slurm.conf") => Ok("TaskPlugin=task/cgroup,task/affinity\n".into()),
            Some("/etc/slurm/cgroup.conf") => Ok("ConstrainCores=yes\n".into()),
            _ => no_files(path),
        }
    }

    /// The same with ConstrainDevices=yes.
    fn constrained(path: &std::path::Path) -> std::io::Result<String> {
        match path.to_str() {
            Some("/etc/slurm/cgroup.conf") => Ok("ConstrainDevices=yes\n".into()),
            _ => cgroup_tasks(path),
        }
    }

    #[test]
    fn per_task_gpus_numbered_from_0_in_each_task_are_refused() {
        // Under ConstrainDevices=yes Slurm numbers each task's GPUs from 0 (seen on 24.11 and
        // 26.05: a task holding GPU 2 has SLURM_STEP_GPUS=0): no task can tell its GPU.
        let vars = |cvd: &'static str| {
            [
                ("SLURM_STEP_GPUS", "0,2"),
                ("CUDA_VISIBLE_DEVICES", cvd),
                ("SLURM_TRES_BIND", "gres/gpu:per_task:1"),
            ]
        };
        let place = |gpus: &StepGpus| {
            place_here(
                &node(),
                &request("gcsbnh", None, false),
                gpus,
                &[0, 1],
                false,
                StepCpus::default(),
            )
        };
        // Seen in the step's own numbers (0,1 for GPUs 0 and 2), whatever the files say.
        let gpus = read(env_of(&vars("0,1")), "NVIDIA", conf(), no_files).unwrap();
        assert_eq!(gpus.numbered_locally, Some(Ok(true)));
        let e = place(&gpus).unwrap_err();
        assert!(
            e.contains("numbers each task's GPUs from 0") && e.contains("--gpu-bind=none"),
            "{e}"
        );
        // GPUs 0 and 1 look the same both ways: cgroup.conf decides.
        let same = [
            ("SLURM_STEP_GPUS", "0,1"),
            ("CUDA_VISIBLE_DEVICES", "0,1"),
            ("SLURM_TRES_BIND", "gres/gpu:per_task:1"),
        ];
        let gpus = read(env_of(&same), "NVIDIA", conf(), constrained).unwrap();
        assert_eq!(gpus.numbered_locally, Some(Ok(true)));
        let gpus = read(env_of(&same), "NVIDIA", conf(), cgroup_tasks).unwrap();
        assert_eq!(gpus.numbered_locally, Some(Ok(false)));
        assert!(place(&gpus).is_ok());
        // Unknown: refused, saying why.
        let gpus = read(env_of(&same), "NVIDIA", None, constrained).unwrap();
        let e = place(&gpus).unwrap_err();
        assert!(e.contains("slurmstepd has no SLURM_CONF of its own"), "{e}");
        let gpus = read(env_of(&same), "NVIDIA", conf(), no_files).unwrap();
        let e = place(&gpus).unwrap_err();
        assert!(e.contains("cannot read /etc/slurm/slurm.conf"), "{e}");
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
            conf(),
            no_files,
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
        let gpus = read(env_of(&vars), "NVIDIA", conf(), no_files).unwrap();
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
        // Under per_task, UUIDs differ from SLURM_STEP_GPUS without being numbers from 0:
        // the configuration decides, not the tokens.
        let per_task = [vars[0], vars[1], ("SLURM_TRES_BIND", "gres/gpu:per_task:1")];
        let gpus = read(env_of(&per_task), "NVIDIA", conf(), cgroup_tasks).unwrap();
        assert_eq!(gpus.numbered_locally, Some(Ok(false)));
        // A UUID the topology lacks is refused, naming it.
        let gone = [vars[0], ("CUDA_VISIBLE_DEVICES", "GPU-x,GPU-0000:01:00.0")];
        let gpus = read(env_of(&gone), "NVIDIA", conf(), no_files).unwrap();
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
        let e = read(env_of(&mig), "NVIDIA", conf(), no_files).unwrap_err();
        assert!(e.contains("MIG instances"), "{e}");
    }

    #[test]
    fn cards_from_gres_conf_files_whatever_slurms_order() {
        // gres.conf lists the cards of package 1 first (read by gpu_cards): Slurm's GPU 0 is
        // the card at 81:00.0 (CPUs 2-3), its GPU 2 the card at 01:00.0 (CPUs 0-1). By index
        // the task holding Slurm's GPU 0 would be put on CPU 0, beside the far card.
        let vars = [("SLURM_STEP_GPUS", "0,2"), ("CUDA_VISIBLE_DEVICES", "0,2")];
        let mut gpus = read(env_of(&vars), "NVIDIA", conf(), no_files).unwrap();
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
            conf(),
            no_files,
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
            conf(),
            no_files,
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
        .unwrap();
        assert_eq!(tasks[0].cpus.to_string(), "0-1");
        assert_eq!(tasks[1].cpus.to_string(), "2-3");
        let req = request("gcsbnh", None, false);
        assert_eq!(lama_bind(&req, &tasks[0]), "2c");
        assert_eq!(lama_bind(&req, &tasks[1]), "2c");
        assert!(
            crate::task_env::verbose_line(&req, "n", 0, 1, &tasks[0]).starts_with("lama-bind=2c ")
        );
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

    #[test]
    fn slurms_per_task_binding_is_kept_and_other_bindings_refused() {
        // Slurm 24.11's --gpus-per-task=1 on GPUs 0 and 2: per_task:1, each task gets one,
        // chosen by Slurm when it starts. In user_init one unit is placed per task beside the
        // GPUs in index order, in rank order: rank 0 beside GPU 0, rank 1 beside GPU 2; each
        // task takes the unit of its own GPU in task_init (crate::task). Local task 1 is rank
        // 0, so rank order and local order differ. By hand: GPU 2 is near package 1 (CPUs
        // 2-3), GPU 0 near package 0.
        let vars = [
            ("SLURM_STEP_GPUS", "0,2"),
            ("CUDA_VISIBLE_DEVICES", "0,2"),
            ("SLURM_TRES_PER_TASK", "gres/gpu=1"),
            ("SLURM_TRES_BIND", "gres/gpu:per_task:1"),
        ];
        let gpus = read(env_of(&vars), "NVIDIA", conf(), cgroup_tasks).unwrap();
        assert_eq!(gpus.binding, SlurmGpuBind::PerTask(1));
        // Local task 0 is rank 1, local task 1 rank 0.
        let place = |gpus: &StepGpus| {
            place_here(
                &node(),
                &request("gcsbnh", None, false),
                gpus,
                &[1, 0],
                false,
                StepCpus::default(),
            )
            .unwrap()
            .0
        };
        let tasks = place(&gpus);
        // Each placement records the GPUs it was made beside: the lookup key of task_init.
        assert_eq!(tasks[1].slurm_gpus, vec![0]);
        assert_eq!(tasks[0].slurm_gpus, vec![2]);
        assert_eq!(var(&tasks[1], "LAMA_GPUS"), Some("0"));
        // (Each its share of the CPUs near its GPU, by default: its package's two.)
        assert_eq!(tasks[1].cpus.to_string(), "0-1");
        assert_eq!(var(&tasks[0], "LAMA_GPUS"), Some("2"));
        assert_eq!(tasks[0].cpus.to_string(), "2-3");
        // Slurm's per-task value of CUDA_VISIBLE_DEVICES is left alone.
        assert_eq!(var(&tasks[0], "CUDA_VISIBLE_DEVICES"), None);
        assert_eq!(var(&tasks[0], "UCX_NET_DEVICES"), Some("mlx5_1:1"));
        assert_eq!(var(&tasks[1], "UCX_NET_DEVICES"), Some("mlx5_0:1"));
        // --gpu-bind=none: LAMA chooses, as without binding (rank 0 first: GPU 0).
        let mut none = vars;
        none[3] = ("SLURM_TRES_BIND", "gres/gpu:none");
        let tasks = place(&read(env_of(&none), "NVIDIA", conf(), cgroup_tasks).unwrap());
        assert_eq!(var(&tasks[1], "LAMA_GPUS"), Some("0"));
        assert_eq!(var(&tasks[1], "CUDA_VISIBLE_DEVICES"), Some("0,2"));
        // Another Slurm binding: refused, naming the way out.
        let mut closest = vars;
        closest[3] = ("SLURM_TRES_BIND", "gres/gpu:closest");
        let gpus = read(env_of(&closest), "NVIDIA", conf(), cgroup_tasks).unwrap();
        let e = two_tasks("g", &gpus).unwrap_err();
        assert!(
            e.contains("--gpu-bind=closest") && e.contains("--gpu-bind=none"),
            "{e}"
        );
        // per_task:1 with more tasks than GPUs.
        let gpus = read(env_of(&vars), "NVIDIA", conf(), cgroup_tasks).unwrap();
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
        // Without Slurm's binding no placement is tied to Slurm's GPUs.
        let tasks = place(&read(env_of(&none), "NVIDIA", conf(), cgroup_tasks).unwrap());
        assert!(tasks.iter().all(|t| t.slurm_gpus.is_empty()));
    }

    #[test]
    fn steps_without_gpus_or_with_gpus_the_topology_lacks_are_refused() {
        let e = read(env_of(&[]), "NVIDIA", conf(), no_files).unwrap_err();
        assert!(e.contains("SLURM_STEP_GPUS is not set"), "{e}");
        let gpus = read(
            env_of(&[("SLURM_STEP_GPUS", "4")]),
            "NVIDIA",
            conf(),
            no_files,
        )
        .unwrap();
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
            conf(),
            no_files,
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

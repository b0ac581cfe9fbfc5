//! A task placed by GPU: the engine's placement turned into the task's CPUs, pictures and
//! variables ([`TaskBuilder`]), and under Slurm's per-task GPU binding, each task's GPUs read
//! as it starts and the slots it runs on ([`SlurmPerTask`]).

use crate::placement::{omp_place_list, omp_places, StepCpus, TaskPlacement};
use lama_engine::{numa_nodes, render, GpuTask, Machine};
use lama_slurm::gpu::{nic_variables, task_variables};

/// What turns the engine's placement of a GPU task into the task's placement and variables.
#[derive(Debug, Clone)]
pub(crate) struct TaskBuilder {
    pub(crate) machine: Machine,
    pub(crate) verbose: bool,
    pub(crate) omp: bool,
    pub(crate) cpus: StepCpus,
    pub(crate) vendor: String,
    /// Slurm's value of the vendor variable for the step, rewritten for each task; `None`
    /// under Slurm's own per-task binding, whose per-task value is left alone.
    pub(crate) tokens: Option<Vec<String>>,
    /// `SLURM_STEP_GPUS`, in the order given to the engine.
    pub(crate) slurm: Vec<u32>,
    /// The PCI bus id of each of those GPUs' cards, in the same order.
    pub(crate) buses: Vec<String>,
    pub(crate) isolate: bool,
}

impl TaskBuilder {
    pub(crate) fn build(&self, t: &GpuTask, global: u32) -> TaskPlacement {
        let machine = &self.machine;
        let mut env = task_variables(
            &self.vendor,
            self.tokens.as_deref(),
            &self.slurm,
            &self.buses,
            &t.gpus,
            self.isolate,
        );
        if let Some(n) = t.nic {
            env.extend(nic_variables(&machine.devices()[n]));
        }
        let places = if self.omp {
            let per_cpu =
                lama_slurm::task_env::one_place_per_cpu(self.cpus.per_task, self.cpus.unit);
            omp_places(machine, &t.bound_logical, per_cpu)
        } else {
            Vec::new()
        };
        TaskPlacement {
            global,
            pu_os: machine.pus()[t.pu_logical as usize].os,
            pu_logical: t.pu_logical,
            cpus: t.cpus.clone(),
            picture: if self.verbose {
                render::picture(machine, &t.bound_logical)
            } else {
                String::new()
            },
            omp_places: omp_place_list(&places),
            omp_place_count: places.len(),
            mems: numa_nodes(machine, &t.bound_logical),
            devices: env,
            bind: t.bind,
        }
    }
}

/// Under Slurm's per-task GPU binding (`per_task:K`), which GPUs a task gets is known only in
/// the task: Slurm chooses them as it starts, the free GPUs whose gres.conf `Cores=` meet the
/// CPU mask task/affinity computed for it, then any free ones, in index order
/// (`_get_gres_per_task` in `src/interfaces/gres.c`). So every GPU of the step gets a slot
/// ([`lama_engine::place_gpu_slots`]), and each task runs on the slots of the GPUs it was
/// given, read where Slurm set them ([`SlurmPerTask::own_gpus`]): whatever Slurm's choice,
/// tasks of distinct GPUs get disjoint CPUs near their GPUs wherever those suffice.
#[derive(Debug, Clone)]
pub struct SlurmPerTask {
    pub(crate) builder: TaskBuilder,
    /// Slot `j`: the placement beside the step's GPU `j` (its place in `SLURM_STEP_GPUS`).
    pub(crate) slots: Vec<GpuTask>,
    /// `K`.
    pub per_task: u32,
    /// Local task `i`'s global rank.
    pub globals: Vec<u32>,
    /// The PCI bus id of each step GPU's card, by its place in `SLURM_STEP_GPUS`.
    pub buses: Vec<String>,
    /// Each step GPU's device files (those that name its card), set by the caller: what a
    /// task may open tells its GPUs ([`SlurmPerTask::own_gpus`]); `Err`: why they are not
    /// known.
    pub files: Option<Result<Vec<Vec<String>>, String>>,
    /// The device files of the node's GPUs outside the step, set by the caller: a task that
    /// may not open one of them is confined to the step's GPUs by Slurm's devices cgroup.
    pub others: Vec<Vec<String>>,
}

impl SlurmPerTask {
    /// The task's GPUs (Slurm's indexes), from the step GPUs whose device files it may open
    /// (`access`: [`lama_hwloc::device_access`]), never from how a site spells its
    /// configuration. Slurm's devices cgroup is the kernel's answer, set before the task was
    /// let run (`task_p_pre_launch_priv`):
    /// - a strict subset of the step's GPUs: those are the task's (under `ConstrainDevices`
    ///   Slurm numbers them from 0 in the task's own variables, so the variables cannot say);
    /// - all of them (no per-task confinement: `--gres-flags=allow-task-sharing`,
    ///   `ConstrainDevices=no`): the ones Slurm names for the task in its own
    ///   `SLURM_STEP_GPUS` (`given`), the node's indexes or, under allow-task-sharing, their
    ///   places among the step's GPUs (Slurm consolidates the step's bitmap there,
    ///   `_get_usable_gres` in `src/interfaces/gres.c`); where both readings are possible and
    ///   name other GPUs, the task's GPUs cannot be told;
    /// - none: they cannot be told.
    ///
    /// Without `files` (tests that judge no access) `given` is taken as the node's indexes.
    pub fn own_gpus(
        &self,
        given: Option<&str>,
        access: impl Fn(&std::path::Path) -> std::io::Result<bool>,
    ) -> Result<Vec<u32>, String> {
        let given = given.filter(|g| !g.trim().is_empty()).ok_or(
            "Slurm binds GPUs to each task, and this task's environment names none \
             (SLURM_STEP_GPUS is not set): its GPUs are unknown",
        )?;
        let named = lama_slurm::gpu::parse_indexes(given)?;
        let step = &self.builder.slurm;
        let files = match self.files.as_ref() {
            None => return Ok(named),
            Some(Err(why)) => {
                return Err(format!("the step's GPU device files are unknown: {why}"))
            }
            Some(Ok(files)) => files,
        };
        let mine = self.openable(files, &access)?;
        if mine.is_empty() {
            return Err(format!(
                "this task may open none of the step's GPUs ({})",
                shown_list(step)
            ));
        }
        if mine.len() < step.len() {
            return Ok(mine);
        }
        // Every step GPU is open to the task: Slurm's numbers for it say which it binds.
        let as_index = named
            .iter()
            .all(|g| step.contains(g))
            .then(|| named.clone());
        let as_place = named
            .iter()
            .map(|&p| step.get(p as usize).copied())
            .collect::<Option<Vec<u32>>>();
        match (as_index, as_place) {
            // Confined to the step's GPUs, Slurm numbers a task's GPUs by their places among
            // them: from 0 where it binds them per task (ConstrainDevices), or in the step's
            // consolidated bitmap (--gres-flags=allow-task-sharing).
            (Some(_), Some(b)) if self.confined_to_step(&access) => Ok(b),
            (Some(a), Some(b)) if a != b => Err(format!(
                "this task may open every GPU of the step ({}), and Slurm names GPU(s) {} for \
                 it, which may be the node's GPU(s) {} or the step's {} by their places \
                 (--gres-flags=allow-task-sharing numbers them so)",
                shown_list(step),
                lama_slurm::hostlist::shown(given),
                shown_list(&a),
                shown_list(&b)
            )),
            (Some(own), _) | (None, Some(own)) => Ok(own),
            (None, None) => Err(format!(
                "Slurm names GPU(s) {} for this task, which are not among the step's GPUs on \
                 this node ({})",
                lama_slurm::hostlist::shown(given),
                shown_list(step)
            )),
        }
    }

    /// Whether the devices controller denies the task some GPU of the node outside the step
    /// (Slurm confines the step's devices): `EPERM` from access(2), not a file's mode
    /// ([`lama_hwloc::device_access`]). A file whose access cannot be judged says nothing.
    fn confined_to_step(&self, access: impl Fn(&std::path::Path) -> std::io::Result<bool>) -> bool {
        self.others
            .iter()
            .flatten()
            .any(|f| matches!(access(std::path::Path::new(f)), Ok(false)))
    }

    /// The step's GPUs (Slurm's indexes) whose device files the task may open.
    fn openable(
        &self,
        files: &[Vec<String>],
        access: impl Fn(&std::path::Path) -> std::io::Result<bool>,
    ) -> Result<Vec<u32>, String> {
        let mut mine = Vec::new();
        for (j, gpu_files) in files.iter().enumerate() {
            let mut judged = Vec::new();
            for f in gpu_files {
                let ok = access(std::path::Path::new(f)).map_err(|e| {
                    format!(
                        "whether this task may open {f} (Slurm's GPU {}) cannot be told: {e}",
                        self.builder.slurm[j]
                    )
                })?;
                judged.push(ok);
            }
            match (judged.iter().all(|&o| o), judged.iter().any(|&o| o)) {
                (true, true) => mine.push(self.builder.slurm[j]),
                (false, false) => {}
                _ => {
                    return Err(format!(
                        "this task may open some of Slurm's GPU {}'s files ({}) and not others",
                        self.builder.slurm[j],
                        gpu_files.join(",")
                    ))
                }
            }
        }
        Ok(mine)
    }

    /// Local task `local`'s placement, beside `own` (Slurm's indexes of its GPUs).
    pub fn task(&self, local: usize, own: &[u32]) -> Result<TaskPlacement, String> {
        let global = *self
            .globals
            .get(local)
            .ok_or_else(|| format!("no placement for local task {local}"))?;
        let mut positions = Vec::new();
        for g in own {
            let j = self
                .builder
                .slurm
                .iter()
                .position(|s| s == g)
                .ok_or_else(|| {
                    format!(
                        "Slurm gave this task GPU {g}, which is not among the step's GPUs on this \
                     node ({})",
                        shown_list(&self.builder.slurm)
                    )
                })?;
            positions.push(j);
        }
        positions.sort_unstable();
        positions.dedup();
        if positions.len() != self.per_task as usize {
            return Err(format!(
                "Slurm gave this task {} GPU(s) ({}) where it binds {} per task",
                positions.len(),
                shown_list(own),
                self.per_task
            ));
        }
        let joined = lama_engine::join_slots(&self.slots, &positions)
            .ok_or_else(|| format!("no slot for GPUs {}", shown_list(own)))?;
        Ok(self.builder.build(&joined, global))
    }
}

pub(crate) fn shown_list(v: &[u32]) -> String {
    v.iter().map(u32::to_string).collect::<Vec<_>>().join(",")
}

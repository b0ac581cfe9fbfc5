//! Placing a node's tasks by GPU (the rules of [`crate::gpu`]'s language): units of a task's
//! GPUs, the CPUs near each unit, the groups of units near the same CPUs, each unit's NIC, the
//! CPUs widened for `-c`, and each group's tasks placed by the rest of the layout; and, where a
//! resource manager binds the GPUs itself, one slot per GPU joined for whichever GPUs a task is
//! given.

use crate::gpu::{
    gpu_name, is_fabric, names, os_list, usable, GpuError, GpuPlacement, GpuRequest, GpuTask,
    GroupBinding,
};
use crate::hybrid::{binding_for_cpus, cpus_covered, exact_binding, CpuUnit};
use crate::place::{place, place_cpus_per_task, PlaceError, Placement, Request};
use crate::spec::Bind;
use crate::{CpuList, Device, DeviceKind, Level, Machine};

/// Where a resource manager binds GPUs to tasks itself and each task learns its GPUs only when
/// it starts (chosen, say, by each task's CPU mask): one slot per GPU of
/// `gpus`, in that order, each placed as a task of that one GPU would be (`req`'s layout and
/// binding; `req.cpus_per_task` shared out over the task's `req.gpus_per_task` GPUs, rounded
/// up), so that a task given any `K` of the GPUs runs on their slots joined ([`join_slots`]).
/// Distinct GPUs have disjoint slots while the CPUs near them suffice, so tasks given distinct
/// GPUs share no CPU; where GPUs outnumber the CPUs near them, their slots share CPUs (a step
/// the resource manager runs is never refused for its spare GPUs).
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
        // Slots are not tasks: a spare GPU, or GPUs that outnumber the CPUs near them, share
        // CPUs rather than refuse a job the resource manager runs. Tasks of distinct GPUs
        // still get distinct CPUs wherever there are enough.
        oversubscribe: true,
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
    // Slots that share CPUs (GPUs that outnumber the CPUs near them) join into no wider.
    let disjoint = bound.len()
        == own
            .iter()
            .map(|&g| slots[g].bound_logical.len())
            .sum::<usize>();
    let bind = match widths.as_deref() {
        Some([(_, level), rest @ ..]) if disjoint && rest.iter().all(|(_, l)| l == level) => {
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

/// `np` tasks bound `req.gpus_per_task` GPUs each by the caller, task `i` given GPUs `i*K ..
/// i*K+K` of `gpus` ([`place_bound`] with that choice).
pub fn place_bound_in_order(
    machine: &Machine,
    gpus: &[&Device],
    np: u32,
    req: &GpuRequest,
    no_gpu: &str,
) -> Result<GpuPlacement, GpuError> {
    let k = req.gpus_per_task.max(1) as usize;
    let choice: Vec<Vec<usize>> = (0..np as usize)
        .map(|i| (i * k..i * k + k).collect())
        .collect();
    place_bound(machine, gpus, &choice, req, no_gpu)
}

/// Tasks whose GPUs the caller chose (`choice[i]`: task `i`'s, as positions in `gpus`, each
/// `req.gpus_per_task` long), each on the slots of its GPUs joined ([`place_gpu_slots`],
/// [`join_slots`]).
pub fn place_bound(
    machine: &Machine,
    gpus: &[&Device],
    choice: &[Vec<usize>],
    req: &GpuRequest,
    no_gpu: &str,
) -> Result<GpuPlacement, GpuError> {
    let k = req.gpus_per_task.max(1) as usize;
    let np = choice.len() as u32;
    let fits = |own: &Vec<usize>| own.len() == k && own.iter().all(|&g| g < gpus.len());
    if (np as usize).saturating_mul(k) > gpus.len() || !choice.iter().all(fits) {
        return Err(too_many_bound(gpus, np, k));
    }
    let slots = place_gpu_slots(machine, gpus, req, no_gpu)?;
    let tasks = choice
        .iter()
        .filter_map(|own| join_slots(&slots.tasks, own))
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
    let k = req.gpus_per_task.max(1) as usize;
    if k > gpus.len() {
        return Err(GpuError::TooFewGpus {
            per_task: k as u32,
            have: gpus.len(),
            gpus: names(gpus, 0..gpus.len()),
        });
    }
    let node = Node {
        machine,
        gpus,
        req,
        np,
        near: gpus.iter().map(|d| usable(machine, &d.pus)).collect(),
        available: (0..machine.pus().len() as u32)
            .filter(|&q| machine.pus()[q as usize].available)
            .collect(),
    };
    let mut notes = Vec::new();
    let units = node.units(k, &mut notes)?;
    let unit_cpus = node.unit_cpus(&units, &mut notes);
    let groups = node.groups(&units, &unit_cpus, &mut notes)?;
    // Task t goes to unit t mod U; each group's tasks are placed on the group's CPUs (or, for
    // -c, on those of an object holding them: `spots`).
    let u = units.len() as u32;
    let group_tasks = groups
        .iter()
        .map(|(_, members)| {
            (0..np)
                .filter(|&t| members.contains(&((t % u) as usize)))
                .collect()
        })
        .collect();
    let grouped = Grouped {
        unit_nic: node.unit_nics(&units),
        units,
        groups,
        group_tasks,
    };
    node.check_widths(&grouped)?;
    let spots = node.spots(&grouped, &mut notes);
    let mut tasks: Vec<Option<GpuTask>> = vec![None; np as usize];
    let mut groups_bound = Vec::new();
    for spot in &spots {
        groups_bound.extend(node.place_spot(&grouped, spot, rank, &mut tasks)?);
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

/// One node's placement by GPU: the machine (restricted to the CPUs the tasks may use), the
/// GPUs the tasks may use, the request, the number of tasks, each GPU's usable CPUs and the
/// node's available ones (logical).
struct Node<'a> {
    machine: &'a Machine,
    gpus: &'a [&'a Device],
    req: &'a GpuRequest,
    np: u32,
    near: Vec<Vec<u32>>,
    available: Vec<u32>,
}

/// A group of units near the same CPUs: its CPUs (logical) and its units.
type Group = (Vec<u32>, Vec<usize>);

/// The units of GPUs (a task's `k` GPUs), the groups of units near the same CPUs, each
/// group's tasks and each unit's NIC.
struct Grouped {
    units: Vec<Vec<usize>>,
    groups: Vec<Group>,
    group_tasks: Vec<Vec<u32>>,
    unit_nic: Vec<Option<usize>>,
}

impl Grouped {
    /// The GPUs of `groups`.
    fn gpus_of(&self, gpus: &[&Device], groups: &[usize]) -> String {
        names(
            gpus,
            groups
                .iter()
                .flat_map(|&g| self.groups[g].1.iter())
                .flat_map(|&m| self.units[m].iter().copied()),
        )
    }
}

impl Node<'_> {
    /// The units of `k` GPUs: within the GPUs near the same CPUs first (GPUs in the order of
    /// the CPUs near them, then by bus), then of those left over; in the order of their first
    /// GPU, spread over the node when the tasks are fewer (or do not divide evenly). The
    /// caller's own units when it binds the GPUs (`fixed`). Refused when the tasks are more
    /// than the units allow.
    fn units(&self, k: usize, notes: &mut Vec<String>) -> Result<Vec<Vec<usize>>, GpuError> {
        let (gpus, req, np, near) = (self.gpus, self.req, self.np, &self.near);
        let mut order: Vec<usize> = (0..gpus.len()).collect();
        order.sort_by_key(|&i| (near[i].first().copied().unwrap_or(u32::MAX), gpus[i].index));
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
        if !req.fixed {
            let rank_of = |g: usize| order.iter().position(|&o| o == g).unwrap_or(usize::MAX);
            units.sort_by_key(|u| rank_of(u[0]));
            if (np as usize) < units.len() {
                units = spread(self.machine, gpus, units, np as usize);
            } else if np as usize % units.len().max(1) != 0 {
                // Tasks go round-robin over the units: the first np % u of them get one task
                // more, and those are spread as a smaller request would be (6 tasks on 2
                // packages of 2 GPUs: 3 + 3, not 4 + 2).
                let extra = np as usize % units.len();
                units = spread(self.machine, gpus, units, extra);
            }
        }
        self.check_counts(&units, k, notes)?;
        Ok(units)
    }

    /// Refuses more tasks than the units allow (each its own with `fixed`, `k:g` each with a
    /// cap); says which GPUs no task uses.
    fn check_counts(
        &self,
        units: &[Vec<usize>],
        k: usize,
        notes: &mut Vec<String>,
    ) -> Result<(), GpuError> {
        let (gpus, np) = (self.gpus, self.np);
        let u = units.len() as u32;
        if self.req.fixed && np > u {
            return Err(too_many_bound(gpus, np, k));
        }
        if let Some(cap) = self.req.per_gpu {
            if np > cap.saturating_mul(u) {
                return Err(GpuError::TooManyTasks {
                    tasks: np,
                    per_gpu: cap,
                    per_task: k as u32,
                    need: np.div_ceil(cap),
                    have: u,
                    gpus: names(gpus, 0..gpus.len()),
                });
            }
        }
        if np < u {
            notes.push(format!(
                "{np} task(s) for {u} GPU group(s): {} used by no task",
                names(gpus, units[np as usize..].iter().flatten().copied())
            ));
        }
        Ok(())
    }

    /// The CPUs of each unit: those near any of its GPUs, unless that makes two units' CPUs
    /// overlap without being the same; then those near its first GPU. A unit none of whose
    /// CPUs can be used gets all the usable CPUs.
    fn unit_cpus(&self, units: &[Vec<usize>], notes: &mut Vec<String>) -> Vec<Vec<u32>> {
        let (machine, gpus, near) = (self.machine, self.gpus, &self.near);
        let covering: Vec<Vec<u32>> = units
            .iter()
            .map(|unit| {
                let mut cpus: Vec<u32> =
                    unit.iter().flat_map(|&g| near[g].iter().copied()).collect();
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
        if self.req.fixed {
            for (i, unit) in units.iter().enumerate().take(self.np as usize) {
                if !spans[i] {
                    continue;
                }
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
        } else if nested && spans.contains(&true) {
            notes.push(
                "the GPUs of some tasks are near different CPUs, and the CPUs near all of them \
                 would overlap another task's: each task runs on the CPUs near its first GPU"
                    .to_string(),
            );
        }
        units
            .iter()
            .enumerate()
            .map(|(i, unit)| {
                let cpus = if nested {
                    near[unit[0]].clone()
                } else {
                    covering[i].clone()
                };
                if !cpus.is_empty() {
                    return cpus;
                }
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
                    os_list(machine, &self.available)
                ));
                self.available.clone()
            })
            .collect()
    }

    /// Groups of units with the same CPUs, in order of first use; refused when two groups'
    /// CPUs overlap without being the same.
    fn groups(
        &self,
        units: &[Vec<usize>],
        unit_cpus: &[Vec<u32>],
        notes: &mut Vec<String>,
    ) -> Result<Vec<Group>, GpuError> {
        let (machine, gpus) = (self.machine, self.gpus);
        let mut groups: Vec<Group> = Vec::new();
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
        if groups.len() == 1 && units.len() > 1 && groups[0].0 == self.available {
            notes.push(format!(
                "all {} GPUs are near the same CPUs ({}): 'g' chooses each task's GPU, and the \
                 rest of the layout ({}) places the tasks on those CPUs",
                gpus.len(),
                os_list(machine, &self.available),
                self.req.layout
            ));
        }
        Ok(groups)
    }

    /// Each unit's NIC: among the fabric NICs (else all NICs), the closest to its first GPU
    /// (the smallest object holding both, then the smallest locality); equally close cards
    /// are shared out in turn.
    fn unit_nics(&self, units: &[Vec<usize>]) -> Vec<Option<usize>> {
        let machine = self.machine;
        let devices = machine.devices();
        let all: Vec<usize> = (0..devices.len())
            .filter(|&i| devices[i].kind == DeviceKind::Nic)
            .collect();
        let fabric: Vec<usize> = all
            .iter()
            .copied()
            .filter(|&i| is_fabric(&devices[i]))
            .collect();
        let nics = if fabric.is_empty() { all } else { fabric };
        let mut unit_nic: Vec<Option<usize>> = vec![None; units.len()];
        let mut turn: Vec<(Vec<usize>, usize)> = Vec::new();
        for (i, unit) in units.iter().enumerate() {
            let gpu = &self.gpus[unit[0]].pus;
            let distance = |n: usize| {
                let nic = &devices[n].pus;
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
        unit_nic
    }

    /// Refuses an asked width wider than a group's CPUs (of the groups with tasks).
    fn check_widths(&self, grouped: &Grouped) -> Result<(), GpuError> {
        let Some(Bind::Width { level, .. }) = self.req.bind else {
            return Ok(());
        };
        for (g, (cpus, _)) in grouped.groups.iter().enumerate() {
            if grouped.group_tasks[g].is_empty() {
                continue;
            }
            check_width(self.machine, level, cpus).map_err(|near| GpuError::Wider {
                bind: self.req.bind.unwrap_or(Bind::None),
                gpu: grouped.gpus_of(self.gpus, &[g]),
                cpus: os_list(self.machine, cpus),
                near,
            })?;
        }
        Ok(())
    }

    /// Whether `n` tasks get CPUs of their own, in one pass, on `cpus` (logical).
    fn fits(&self, cpus: &[u32], n: u32) -> bool {
        let sub = self.machine.restrict(&os_list(self.machine, cpus));
        place_group(&sub, self.req, n)
            .1
            .is_ok_and(|p| p.passes() <= 1 && p.overlaps().is_empty())
    }

    /// Where the tasks go: each group's CPUs, unless the default binding for -c cannot give
    /// its tasks CPUs of their own there; then the smallest object holding them that can,
    /// with a note saying why.
    fn spots(&self, grouped: &Grouped, notes: &mut Vec<String>) -> Vec<Spot> {
        let spots: Vec<Spot> = grouped
            .groups
            .iter()
            .enumerate()
            .filter(|(g, _)| !grouped.group_tasks[*g].is_empty())
            .map(|(g, (cpus, _))| Spot {
                cpus: cpus.clone(),
                groups: vec![g],
                object: None,
            })
            .collect();
        let req = self.req;
        if req.bind.is_none() || req.bind_asked || req.cpus_per_task.max(1) <= 1 {
            return spots;
        }
        let tasks_of = |s: &Spot| {
            s.groups
                .iter()
                .map(|&g| grouped.group_tasks[g].len() as u32)
                .sum()
        };
        let fits = |cpus: &[u32], n: u32| self.fits(cpus, n);
        let Some(mut wider) = widen(self.machine, spots.clone(), &tasks_of, &fits) else {
            return spots;
        };
        for spot in wider.iter_mut().filter(|s| s.object.is_some()) {
            spot.groups
                .sort_by_key(|&g| grouped.groups[g].0.first().copied().unwrap_or(u32::MAX));
            notes.push(self.widened_note(grouped, spot, tasks_of(spot)));
        }
        wider
    }

    /// Why a spot's tasks run on the CPUs of an object holding their GPUs' (`n` tasks).
    fn widened_note(&self, grouped: &Grouped, spot: &Spot, n: u32) -> String {
        let (machine, req) = (self.machine, self.req);
        let per_task = req.cpus_per_task.max(1);
        let what = match req.cpu_unit {
            CpuUnit::Thread => "CPUs",
            CpuUnit::Core => "cores",
        };
        // Each group whose own CPUs cannot give its tasks CPUs of their own (a group that
        // could is here because another's widened CPUs hold it).
        let why: Vec<String> = spot
            .groups
            .iter()
            .filter(|&&g| !self.fits(&grouped.groups[g].0, grouped.group_tasks[g].len() as u32))
            .map(|&g| {
                let n = grouped.group_tasks[g].len() as u64;
                let need = n * u64::from(per_task);
                let have = cpus_covered(machine, &grouped.groups[g].0, req.cpu_unit);
                let near = grouped.gpus_of(self.gpus, &[g]);
                match (need > u64::from(have), n) {
                    (true, 1) => {
                        format!("-c {per_task} is more than the {have} {what} near {near}")
                    }
                    (true, _) => format!(
                        "{n} tasks of -c {per_task} need {need} {what}, more than the {have} \
                         near {near}"
                    ),
                    (false, _) => format!(
                        "{n} task(s) of -c {per_task} cannot each have {per_task} {what} of \
                         their own among the {have} near {near}"
                    ),
                }
            })
            .collect();
        let who = if spot.groups.len() > 1 {
            // The GPUs of these tasks (a group's GPUs without a task left out).
            let used = spot.groups.iter().flat_map(|&g| {
                grouped.groups[g]
                    .1
                    .iter()
                    .filter(|&&m| (m as u32) < self.np)
                    .flat_map(|&m| grouped.units[m].iter().copied())
            });
            format!("the {n} tasks of {} run together", names(self.gpus, used))
        } else if n == 1 {
            "its task runs".to_string()
        } else {
            format!("its {n} tasks run")
        };
        format!(
            "{}: {who} on the CPUs of {} holding them ({}), none shared",
            why.join("; "),
            spot.object.as_deref().unwrap_or("the node"),
            os_list(machine, &spot.cpus)
        )
    }

    /// Places the tasks of `spot`'s groups, each group's in turn (groups in the order of their
    /// CPUs, so that the layout puts each group's tasks next to one another), into `tasks`;
    /// how they were bound, where the request binds.
    fn place_spot(
        &self,
        grouped: &Grouped,
        spot: &Spot,
        rank: &dyn Fn(u32) -> u32,
        tasks: &mut [Option<GpuTask>],
    ) -> Result<Option<GroupBinding>, GpuError> {
        let (machine, req) = (self.machine, self.req);
        let cpus = &spot.cpus;
        let mine: Vec<u32> = spot
            .groups
            .iter()
            .flat_map(|&g| grouped.group_tasks[g].iter().copied())
            .collect();
        let cpus_os = os_list(machine, cpus);
        let sub = machine.restrict(&cpus_os);
        let gpu_names = grouped.gpus_of(self.gpus, &spot.groups);
        let (widened, placed) = place_group(&sub, req, mine.len() as u32);
        let placed = placed.map_err(|error| GpuError::Place {
            tasks: mine.len() as u32,
            gpus: gpu_names.clone(),
            cpus: cpus_os.clone(),
            error: Box::new(error),
        })?;
        let u = grouped.units.len() as u32;
        for (j, &t) in mine.iter().enumerate() {
            let info = placed.info(j);
            let (bound_logical, cpus_bound) = match req.bind {
                None => (cpus.clone(), cpus_os.clone()),
                Some(_) => (info.bound_logical, info.cpus),
            };
            let unit = (t % u) as usize;
            tasks[t as usize] = Some(GpuTask {
                gpus: grouped.units[unit].clone(),
                nic: grouped.unit_nic[unit],
                pu_logical: info.pu_logical,
                bound_logical,
                cpus: cpus_bound,
                bind: req.bind.map(|_| placed.request().bind),
            });
        }
        if req.bind.is_none() {
            return Ok(None);
        }
        let narrowest = (0..mine.len())
            .map(|j| placed.info(j).bound_logical)
            .min_by_key(Vec::len)
            .unwrap_or_default();
        Ok(Some(GroupBinding {
            gpus: gpu_names,
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
        }))
    }
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

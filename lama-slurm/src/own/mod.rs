//! What Slurm itself gives each task of a node without LAMA: the step's CPUs (slurmctld's
//! step manager) and each task's binding (task/affinity), for `lama map --slurm` and
//! `--compare`. A model of Slurm's own code, kept step for step where it decides (see each
//! module), for a job that holds its nodes' CPUs (or the CPUs `--restrict` gives it), with
//! task/cgroup confining the step to its cores (`ConstrainCores=yes`).

mod geometry;
mod lllp;
mod step_cores;

pub use geometry::Geometry;

use geometry::Wholes;
use lama_engine::{Level, Machine};
use lllp::{Lay, Unit};
use step_cores::CoreAsk;

/// How a node's tasks go round its sockets: the second part of srun's `-m`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SocketDist {
    /// `-m *:block`.
    Block,
    /// `-m *:cyclic`, and Slurm's default.
    Cyclic,
    /// `-m *:fcyclic`.
    Fcyclic,
}

impl SocketDist {
    /// The second part of `-m` (after the node part and `:`), or `None` for Slurm's default;
    /// a third part (cores) changes no binding (task/affinity reads the first two) and is
    /// accepted.
    pub fn parse(text: Option<&str>) -> Result<Option<SocketDist>, String> {
        let Some(text) = text else { return Ok(None) };
        let second = text.split(':').next().unwrap_or_default();
        match second {
            "" | "*" => Ok(None),
            "block" => Ok(Some(SocketDist::Block)),
            "cyclic" => Ok(Some(SocketDist::Cyclic)),
            "fcyclic" => Ok(Some(SocketDist::Fcyclic)),
            other => Err(format!(
                "-m ...:{other}: srun's socket distributions are block, cyclic and fcyclic"
            )),
        }
    }
}

/// Slurm's `--cpu-bind` kinds that this model knows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CpuBind {
    /// `none`: no binding of its own (the step's CPUs).
    None,
    /// `threads`.
    Threads,
    /// `cores`.
    Cores,
    /// `sockets`.
    Sockets,
    /// `ldoms`: NUMA nodes.
    Ldoms,
    /// `map_cpu:LIST`: task i on CPU `LIST[i % len]` (OS indexes).
    MapCpu(Vec<u32>),
    /// `mask_cpu:LIST`: task i on the CPUs of mask `LIST[i % len]` (OS indexes).
    MaskCpu(Vec<Vec<u32>>),
}

impl CpuBind {
    /// Reads `--cpu-bind=[verbose,]KIND` as srun does; `None` when it names only modifiers
    /// (`verbose`, `quiet`).
    pub fn parse(text: &str) -> Result<Option<CpuBind>, String> {
        let kinds: Vec<&str> = text
            .split(',')
            .filter(|k| !crate::cpu_bind::is_modifier(k))
            .collect();
        let kind = match kinds.as_slice() {
            [] => return Ok(None),
            [k] => *k,
            _ if text.contains("map_cpu:") || text.contains("mask_cpu:") => {
                let at = text
                    .find("map_cpu:")
                    .or(text.find("mask_cpu:"))
                    .unwrap_or(0);
                &text[at..]
            }
            _ => return Err(format!("--cpu-bind={text}: one kind at a time")),
        };
        let list = |rest: &str| -> Result<Vec<u32>, String> {
            rest.split(',')
                .map(parse_cpu_number)
                .collect::<Option<Vec<u32>>>()
                .filter(|l| !l.is_empty())
                .ok_or_else(|| format!("--cpu-bind={text}: a list of CPU numbers"))
        };
        Ok(Some(match kind {
            "none" | "no" => CpuBind::None,
            "threads" => CpuBind::Threads,
            "cores" => CpuBind::Cores,
            "sockets" => CpuBind::Sockets,
            "ldoms" => CpuBind::Ldoms,
            _ if kind.starts_with("map_cpu:") => CpuBind::MapCpu(list(&kind[8..])?),
            _ if kind.starts_with("mask_cpu:") => CpuBind::MaskCpu(
                kind[9..]
                    .split(',')
                    .map(mask_bits)
                    .collect::<Option<Vec<_>>>()
                    .ok_or_else(|| format!("--cpu-bind={text}: a list of hexadecimal masks"))?,
            ),
            other => {
                return Err(format!(
                    "--cpu-bind={other}: not modelled here (none, threads, cores, sockets, \
                     ldoms, map_cpu:LIST and mask_cpu:LIST are)"
                ))
            }
        }))
    }

    /// The binding unit of a kind that lays tasks out.
    fn unit(&self) -> Option<Unit> {
        match self {
            CpuBind::Threads | CpuBind::Ldoms => Some(Unit::Threads),
            CpuBind::Cores => Some(Unit::Cores),
            CpuBind::Sockets => Some(Unit::Sockets),
            _ => None,
        }
    }

    /// The name Slurm's `--cpu-bind=verbose` line uses.
    pub fn name(&self) -> &'static str {
        match self {
            CpuBind::None => "none",
            CpuBind::Threads => "threads",
            CpuBind::Cores => "cores",
            CpuBind::Sockets => "sockets",
            CpuBind::Ldoms => "ldoms",
            CpuBind::MapCpu(_) => "map_cpu",
            CpuBind::MaskCpu(_) => "mask_cpu",
        }
    }
}

/// A CPU number of `map_cpu`, decimal or `0x` hexadecimal.
fn parse_cpu_number(text: &str) -> Option<u32> {
    match text.strip_prefix("0x") {
        Some(hex) => u32::from_str_radix(hex, 16).ok(),
        None => text.parse().ok(),
    }
}

/// The CPUs of a hexadecimal mask (`0x3`, `f0`); at most 4,096 CPUs.
fn mask_bits(text: &str) -> Option<Vec<u32>> {
    let hex = text.strip_prefix("0x").unwrap_or(text);
    if hex.is_empty() || hex.len() > 1024 {
        return None;
    }
    let mut cpus = Vec::new();
    for (k, ch) in hex.chars().rev().enumerate() {
        let v = ch.to_digit(16)?;
        cpus.extend(
            (0..4)
                .filter(|b| v & (1 << b) != 0)
                .map(|b| k as u32 * 4 + b),
        );
    }
    Some(cpus)
}

/// What a node's step asks, in Slurm's terms, once srun has read its options.
#[derive(Debug, Clone, Default)]
pub struct Ask {
    /// Tasks on this node.
    pub tasks: u32,
    /// `-c`, when given (it makes the step exact: only the cores its tasks need).
    pub cpus_per_task: Option<u32>,
    /// `--exact` (or srun's `--exclusive`), which `-c` implies.
    pub exact: bool,
    /// The step's `--cpu-bind`, given or implied (`--hint`, `--ntasks-per-core`,
    /// `--ntasks-per-socket`).
    pub cpu_bind: Option<CpuBind>,
    /// The site's default for steps without one (`CpuBind=` of the node or partition, else
    /// `TaskPluginParam`'s).
    pub site_default: Option<CpuBind>,
    /// `TaskPluginParam=autobind=...`: the binding where Slurm's automatic one finds none.
    pub autobind: Option<CpuBind>,
    /// `--threads-per-core` (`--hint=nomultithread` gives 1).
    pub threads_per_core: Option<u32>,
    /// `--ntasks-per-core`.
    pub ntasks_per_core: Option<u32>,
    /// `--ntasks-per-socket`.
    pub ntasks_per_socket: Option<u32>,
    /// The second part of `-m` (`None`: Slurm's default).
    pub dist: Option<SocketDist>,
    /// `-m plane=P` (task/affinity then lays out in blocks).
    pub plane: bool,
    /// `--overcommit`.
    pub overcommit: bool,
    /// The node's `CPUs=` counts cores, not threads (one thread per core).
    pub cpus_count_cores: bool,
}

/// The srun options that choose a step's binding, as written.
#[derive(Debug, Clone, Copy, Default)]
pub struct SrunBinding<'a> {
    /// `--cpu-bind`.
    pub cpu_bind: Option<&'a str>,
    /// `--hint`.
    pub hint: Option<&'a str>,
    /// `--threads-per-core` (or `-B`'s third part).
    pub threads_per_core: Option<u32>,
    /// `--ntasks-per-core`.
    pub ntasks_per_core: Option<u32>,
    /// `--ntasks-per-socket`.
    pub ntasks_per_socket: Option<u32>,
}

/// The binding srun asks for, the threads per core, and the notes that say how srun read them.
pub type SrunRead = (Option<CpuBind>, Option<u32>, Vec<String>);

/// The binding srun asks for, as srun reads its options (`src/srun/opt.c` `_opt_verify`,
/// `validate_hint_option`, `verify_hint`, `_validate_threads_per_core_option`): `--hint` unless
/// `--cpu-bind`, `--threads-per-core` or `--ntasks-per-core` is given (srun then ignores it);
/// `--threads-per-core` implies `threads`; `--ntasks-per-core` `cores` (1) or `threads`, and
/// `--ntasks-per-socket` `sockets`, where nothing else names a unit. Returns the binding, the
/// threads per core and the notes to show.
pub fn srun_binding(o: SrunBinding<'_>) -> Result<SrunRead, String> {
    let mut kind = o.cpu_bind.map(CpuBind::parse).transpose()?.flatten();
    let mut tpc = o.threads_per_core;
    let mut notes = Vec::new();
    if let Some(hint) = o.hint {
        if kind.is_some() || tpc.is_some() || o.ntasks_per_core.is_some() {
            notes.push(format!(
                "--hint={hint}: srun ignores it beside --cpu-bind, --threads-per-core or \
                 --ntasks-per-core (it says so with -v)"
            ));
        } else {
            let (k, t) = match hint {
                "nomultithread" => (CpuBind::Threads, Some(1)),
                "multithread" => (CpuBind::Threads, None),
                "compute_bound" => (CpuBind::Cores, Some(1)),
                "memory_bound" => {
                    return Err(
                        "--hint=memory_bound: it asks the allocation for one core a \
                                socket, which lama map does not model; give the CPUs with \
                                --restrict and --cpu-bind=cores"
                            .into(),
                    )
                }
                other => {
                    return Err(format!(
                        "--hint={other}: srun's hints are nomultithread, multithread, \
                         compute_bound and memory_bound"
                    ))
                }
            };
            notes.push(format!(
                "--hint={hint}: srun reads it as --cpu-bind={}{}",
                k.name(),
                t.map_or(String::new(), |t| format!(" with --threads-per-core={t}"))
            ));
            kind = Some(k);
            tpc = t;
        }
    } else if tpc.is_some() && kind.is_none() {
        notes.push("--threads-per-core: srun adds --cpu-bind=threads".into());
        kind = Some(CpuBind::Threads);
    }
    if kind.is_none() {
        kind = match (o.ntasks_per_core, o.ntasks_per_socket) {
            (Some(1), _) => Some(CpuBind::Cores),
            (Some(_), _) => Some(CpuBind::Threads),
            (None, Some(_)) => Some(CpuBind::Sockets),
            (None, None) => None,
        };
        if let Some(k) = &kind {
            notes.push(format!(
                "--ntasks-per-{}: srun adds --cpu-bind={}",
                if o.ntasks_per_core.is_some() {
                    "core"
                } else {
                    "socket"
                },
                k.name()
            ));
        }
    }
    Ok((kind, tpc, notes))
}

/// Slurm's own placement of a node's tasks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Own {
    /// The step's CPUs on the node (logical PU indexes): its cgroup.
    pub step: Vec<u32>,
    /// Each task's CPUs (logical PU indexes), in the node's task order.
    pub tasks: Vec<Vec<u32>>,
    /// How Slurm chose the binding, as its own log says it.
    pub how: String,
}

/// What Slurm gives each task of `ask` on `m` (its available PUs being the job's CPUs there),
/// or Slurm's refusal.
pub fn place(m: &Machine, ask: &Ask) -> Result<Own, String> {
    let (g, avail) = step(m, ask)?;
    let step: Vec<u32> = (0..g.pus()).filter(|&i| avail[i as usize]).collect();
    let (masks, how) = bind(m, g, &avail, ask)?;
    let tasks = masks
        .into_iter()
        .map(|mask| mask.into_iter().filter(|pu| avail[*pu as usize]).collect())
        .collect();
    Ok(Own { step, tasks, how })
}

/// The step's CPUs on `m` (logical PU indexes): every CPU of the job's cores there, or, for
/// an exact step, those of the cores the step manager picks. What the plugin finds as the
/// step's cgroup.
pub fn step_cpus(m: &Machine, ask: &Ask) -> Result<Vec<u32>, String> {
    let (g, avail) = step(m, ask)?;
    Ok((0..g.pus()).filter(|&i| avail[i as usize]).collect())
}

/// The node's shape and its PUs the step has (abstract order).
fn step(m: &Machine, ask: &Ask) -> Result<(Geometry, Vec<bool>), String> {
    let g = Geometry::of(m)?;
    let job: Vec<bool> = (0..g.all_cores() as usize)
        .map(|c| {
            let t = g.threads as usize;
            m.pus()[c * t..c * t + t].iter().any(|p| p.available)
        })
        .collect();
    if !job.contains(&true) {
        return Err("the job has no CPU on this node".into());
    }
    let one_thread = ask.cpus_count_cores || ask.threads_per_core == Some(1);
    let cores = step_cores::step_cores(
        g,
        &job,
        CoreAsk {
            tasks: ask.tasks,
            exact: ask.exact || ask.cpus_per_task.is_some(),
            cpus_per_task: ask.cpus_per_task.unwrap_or(1),
            cpus_per_core: if one_thread {
                1
            } else {
                ask.threads_per_core.unwrap_or(g.threads).min(g.threads)
            },
            dist: ask.dist.unwrap_or(SocketDist::Cyclic),
            overcommit: ask.overcommit,
        },
    )?;
    let avail = (0..g.pus())
        .map(|i| cores[(i / g.threads) as usize])
        .collect();
    Ok((g, avail))
}

/// Each task's PUs before the cgroup confines them, and how the binding was chosen.
fn bind(
    m: &Machine,
    g: Geometry,
    avail: &[bool],
    ask: &Ask,
) -> Result<(Vec<Vec<u32>>, String), String> {
    let step = || -> Vec<u32> { (0..g.pus()).filter(|&i| avail[i as usize]).collect() };
    let every = |how: String| Ok((vec![step(); ask.tasks as usize], how));
    let wholes = Wholes::of(g, avail);
    let (kind, how) = match (&ask.cpu_bind, &ask.site_default) {
        (Some(k), _) => (k.clone(), format!("--cpu-bind={}", k.name())),
        (None, Some(k)) => (k.clone(), format!("the site's default, {}", k.name())),
        (None, None) => match auto(g, &wholes, ask) {
            Some((k, how)) => (k, how),
            None => {
                return every(
                    "auto binding off: each task may use all the step's CPUs (no -c, -n or \
                     --cpu-bind fills whole sockets, cores or threads)"
                        .into(),
                )
            }
        },
    };
    let unit = match &kind {
        CpuBind::None if wholes.node => return every(format!("{how}: no binding")),
        CpuBind::None => return every(format!("{how}: the step's CPUs")),
        CpuBind::MapCpu(list) => {
            return by_list(m, avail, ask, &how, |i| vec![list[i % list.len()]])
        }
        CpuBind::MaskCpu(list) => {
            return by_list(m, avail, ask, &how, |i| list[i % list.len()].clone())
        }
        k => k.unit().unwrap_or(Unit::Threads),
    };
    let cpt = ask.cpus_per_task.unwrap_or(1);
    let lay = Lay {
        tasks: ask.tasks,
        cpus_per_task: cpt,
        threads_per_core: ask
            .threads_per_core
            .unwrap_or(u32::from(ask.cpus_count_cores)),
        ntasks_per_core: ask.ntasks_per_core.unwrap_or(0),
        ntasks_per_socket: ask.ntasks_per_socket.unwrap_or(0),
        to_cores: unit == Unit::Cores,
        fcyclic: ask.dist == Some(SocketDist::Fcyclic),
    };
    let block = ask.plane || ask.dist == Some(SocketDist::Block);
    let laid = if block {
        lllp::block(g, avail, &lay)
    } else {
        lllp::cyclic(g, avail, &lay)
    };
    let mut masks = match laid {
        Ok(masks) => masks,
        Err(_) if ask.overcommit => return every(format!("{how}: overcommitted, the step's CPUs")),
        Err(e) => {
            return Err(format!(
                "Slurm fails the step (\"failed to distribute tasks\"): {e}"
            ))
        }
    };
    lllp::expand(g, avail, &mut masks, unit);
    let mut tasks: Vec<Vec<u32>> = masks
        .iter()
        .map(|mask| (0..g.pus()).filter(|&i| mask[i as usize]).collect())
        .collect();
    if kind == CpuBind::Ldoms {
        tasks = tasks.into_iter().map(|t| numa_nodes_of(m, &t)).collect();
    }
    let dist = if block {
        "block"
    } else if lay.fcyclic {
        "fcyclic"
    } else {
        "cyclic"
    };
    Ok((tasks, format!("{how}, {dist} over the sockets")))
}

/// Slurm's automatic binding: sockets, cores or threads when the tasks' CPUs fill exactly that
/// many of them, else `TaskPluginParam`'s autobind, else none.
fn auto(g: Geometry, w: &Wholes, ask: &Ask) -> Option<(CpuBind, String)> {
    let _ = g;
    let want = ask.tasks * ask.cpus_per_task.unwrap_or(1);
    let implicit = |k: CpuBind, what: &str| {
        Some((
            k,
            format!("implicit auto binding: {want} CPU(s) asked = {what}"),
        ))
    };
    if want == w.sockets && w.part_sockets == 0 {
        return implicit(CpuBind::Sockets, &format!("{} whole socket(s)", w.sockets));
    }
    if want == w.cores && w.part_cores == 0 {
        return implicit(CpuBind::Cores, &format!("{} whole core(s)", w.cores));
    }
    if want == w.threads {
        return implicit(CpuBind::Threads, &format!("{} thread(s)", w.threads));
    }
    ask.autobind.clone().map(|k| {
        let how = format!("TaskPluginParam's autobind={}", k.name());
        (k, how)
    })
}

/// Each task's CPUs from a `map_cpu` or `mask_cpu` list (OS indexes), checked against the
/// step's CPUs as task/affinity checks them.
fn by_list(
    m: &Machine,
    avail: &[bool],
    ask: &Ask,
    how: &str,
    of_task: impl Fn(usize) -> Vec<u32>,
) -> Result<(Vec<Vec<u32>>, String), String> {
    let mut tasks = Vec::with_capacity(ask.tasks as usize);
    for i in 0..ask.tasks as usize {
        let os = of_task(i);
        let logical: Vec<Option<u32>> = os.iter().map(|&c| m.logical_of(c)).collect();
        let inside = |l: &Option<u32>| l.is_some_and(|l| avail[l as usize]);
        if !logical.iter().all(inside) {
            let step: Vec<String> = (0..avail.len())
                .filter(|&i| avail[i])
                .map(|i| m.pus()[i].os.to_string())
                .collect();
            return Err(format!(
                "{how}: CPU {} is outside the step's CPUs ({}): Slurm fails the step (\"CPU \
                 binding outside of job step allocation\")",
                os.iter()
                    .zip(&logical)
                    .find(|(_, l)| !inside(l))
                    .map_or(0, |(c, _)| *c),
                step.join(",")
            ));
        }
        tasks.push(logical.into_iter().flatten().collect());
    }
    Ok((tasks, format!("{how}, by local task id")))
}

/// The PUs of every NUMA node that holds one of `pus` (the whole node when it has none).
fn numa_nodes_of(m: &Machine, pus: &[u32]) -> Vec<u32> {
    let numa = m.objects(Level::Numa);
    if numa.is_empty() {
        return (0..m.pus().len() as u32).collect();
    }
    let mut out: Vec<u32> = numa
        .iter()
        .filter(|n| pus.iter().any(|p| n.pus.contains(p)))
        .flat_map(|n| n.pus.clone())
        .collect();
    out.sort_unstable();
    out.dedup();
    out
}

#[cfg(test)]
mod tests;

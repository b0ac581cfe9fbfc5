//! `lama exec [options] -- PROGRAM ARGS...`: started once per rank by any launcher (srun with
//! or without the plugin, mpirun, mpiexec, flux run, jsrun, or none), it finds which rank it
//! is ([`lama_slurm::launcher`]), takes the node's topology and the CPUs its cgroup allows,
//! places the node's ranks with the plugin's own rules ([`lama_slurm::node`]), binds itself
//! and its memory, sets the task's variables and executes the program. Every rank of a node
//! computes the same placement from the same inputs, so no rank talks to another.

use crate::asked::Asked;
use crate::Failure;
use lama_engine::{Bind, CpuList, Membind};
use lama_planfile::NodePlan;
use lama_slurm::launcher::Rank;
use lama_slurm::node::{place_local, GpuOptions, Origin, StepCpus, StepRequest};
use lama_slurm::node_env::{memory_binding, omp_threads, task_environment, verbose_line};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};

/// `lama exec`'s options.
#[derive(Debug, clap::Args)]
pub(crate) struct ExecArgs {
    /// The layout, as --lama-map (default scbnh, the plugin's).
    #[arg(long, visible_alias = "lama-map", default_value = "scbnh")]
    map: String,
    /// The binding, as --lama-bind (default: 1c, widened to cover -c CPUs).
    #[arg(long, visible_alias = "lama-bind")]
    bind: Option<String>,
    /// MPPR limits, as --lama-mppr.
    #[arg(long, visible_alias = "lama-mppr")]
    mppr: Option<String>,
    /// Rank ordering on the node, as --lama-order (n or s).
    #[arg(long, visible_alias = "lama-order", default_value = "n")]
    order: String,
    /// Memory binding, as --lama-membind (none, local, preferred).
    #[arg(long, visible_alias = "lama-membind", default_value = "none")]
    membind: String,
    /// Set OMP_PLACES, OMP_PROC_BIND and OMP_NUM_THREADS to match the binding, as --lama-omp.
    #[arg(long, visible_alias = "lama-omp")]
    omp: bool,
    /// CPUs per rank, as srun's -c (default: SLURM_CPUS_PER_TASK under srun, else 1).
    #[arg(long, short = 'c', value_parser = clap::value_parser!(u32).range(1..=65536))]
    cpus_per_task: Option<u32>,
    /// Place each rank where the plan FILE written by `lama plan` puts it (instead of a
    /// layout; launch the ranks on the nodes of its .hosts file).
    #[arg(long, value_name = "FILE", conflicts_with_all = ["map", "bind", "mppr", "order", "cpus_per_task", "oversubscribe"])]
    plan: Option<PathBuf>,
    /// Let ranks share CPUs when the node's CPUs are too few.
    #[arg(long)]
    oversubscribe: bool,
    /// Print where this rank goes (as --lama-verbose), on standard error.
    #[arg(long, short = 'v', visible_alias = "lama-verbose")]
    verbose: bool,
    /// The program and its arguments.
    #[arg(last = true, required = true, value_name = "PROGRAM ARGS")]
    program: Vec<std::ffi::OsString>,
}

/// What the MPI libraries that pin ranks in MPI_Init need so as not to undo LAMA's binding,
/// set unless the job set them: Intel MPI (`I_MPI_PIN=0`: the Intel MPI Developer Reference,
/// "Process Pinning") and MVAPICH2 (`MV2_ENABLE_AFFINITY=0`: the MVAPICH2 user guide). Open
/// MPI and MPICH bind in the launcher, before `lama exec` runs, and not in MPI_Init.
const MPI_PINNING_OFF: [(&str, &str); 2] = [("I_MPI_PIN", "0"), ("MV2_ENABLE_AFFINITY", "0")];

/// How the CPUs are said to come from this process's own mask.
const NO_CGROUP: &str = "no cgroup cpuset found";

/// The longest cgroup file read.
const MAX_CGROUP_FILE: u64 = 64 * 1024;

fn read_small(path: &Path) -> std::io::Result<String> {
    use std::io::Read;
    let mut text = String::new();
    std::fs::File::open(path)?
        .take(MAX_CGROUP_FILE)
        .read_to_string(&mut text)?;
    Ok(text)
}

/// The cpuset file of this process's cgroup, from `/proc/self/cgroup` (`cgroup`): on cgroup
/// v2 (`0::/path`) the nearest `cpuset.cpus.effective` from its directory up (a leaf without
/// the cpuset controller inherits its parent's), on v1 the `cpuset` hierarchy's
/// `cpuset.effective_cpus`, else `cpuset.cpus`. `None` when there is none.
fn cpuset_file(cgroup: &str, root: &Path, exists: &dyn Fn(&Path) -> bool) -> Option<PathBuf> {
    for line in cgroup.lines() {
        let mut f = line.splitn(3, ':');
        let (_, controllers, path) = (f.next()?, f.next()?, f.next()?);
        let rel = path.trim_start_matches('/');
        if controllers.is_empty() {
            let mut dir = root.join(rel);
            loop {
                let file = dir.join("cpuset.cpus.effective");
                if exists(&file) {
                    return Some(file);
                }
                if dir == root || !dir.pop() {
                    break;
                }
            }
        } else if controllers.split(',').any(|c| c == "cpuset") {
            let dir = root.join("cpuset").join(rel);
            let effective = dir.join("cpuset.effective_cpus");
            return Some(if exists(&effective) {
                effective
            } else {
                dir.join("cpuset.cpus")
            });
        }
    }
    None
}

/// The CPUs the job may use here: the cgroup's cpuset (not this process's own mask, which a
/// launcher may have narrowed), else this process's mask; with what the user is told and
/// whether a cgroup cpuset was read.
fn job_cpus() -> Result<(CpuList, Vec<String>, bool), String> {
    let own = lama_hwloc::bind::get_affinity()?;
    let cgroup = read_small(Path::new("/proc/self/cgroup")).unwrap_or_default();
    let file = cpuset_file(&cgroup, Path::new("/sys/fs/cgroup"), &|p| p.exists());
    let from_cgroup = file.as_ref().and_then(|f| {
        let text = read_small(f).ok()?;
        CpuList::parse(text.trim())
            .ok()
            .filter(|c| !c.is_empty())
            .map(|c| (c, f.clone()))
    });
    let found = from_cgroup.is_some();
    // Under Slurm, for a job that does not hold the whole node (SLURM_CPUS_ON_NODE, Slurm's
    // count of the job's CPUs here, below the node's), a cgroup that holds the whole node
    // confines nothing (ConstrainCores=no, or task/affinity alone): other jobs may hold those
    // CPUs.
    let online = lama_hwloc::online_cpus().map_err(|e| e.to_string())?;
    let on_node = std::env::var("SLURM_CPUS_ON_NODE")
        .ok()
        .and_then(|n| n.trim().parse::<usize>().ok());
    let node = on_node
        .filter(|&n| n < online.len() && std::env::var_os("SLURM_JOB_ID").is_some())
        .map(|_| online);
    let (cpus, notes) = choose_cpus(own, from_cgroup, node.as_ref())?;
    Ok((cpus, notes, found))
}

/// The CPUs to place among: the cgroup's (`from_cgroup`, with its file) where there is one,
/// saying so when this process's own mask (`own`) is narrower; else its own mask. Under Slurm,
/// for a job with part of the node (`slurm_node`: the node's online CPUs), a cgroup holding
/// them all confines nothing, so the
/// CPUs are this process's own mask, which Slurm's task/affinity gave it, where that is
/// narrower; where neither is narrower than the node, Slurm's CPUs cannot be known and nothing
/// is bound (`Err`).
fn choose_cpus(
    own: CpuList,
    from_cgroup: Option<(CpuList, PathBuf)>,
    slurm_node: Option<&CpuList>,
) -> Result<(CpuList, Vec<String>), String> {
    let whole = |c: &CpuList| slurm_node.is_some_and(|all| c.intersection(all) == *all);
    if let Some((cpus, file)) = from_cgroup.as_ref().filter(|(c, _)| whole(c)) {
        if whole(&own) {
            return Err(format!(
                "cannot tell which CPUs Slurm gave this step: its cgroup's cpuset ({}) and this \
                 process's mask are the whole node ({cpus}), so binding could land on other \
                 jobs' CPUs; ask Slurm to bind the task (srun --cpu-bind=cores) or to confine it \
                 (ConstrainCores=yes in cgroup.conf), or use the plugin's --lama-map",
                file.display()
            ));
        }
        let note = format!(
            "the cgroup's cpuset ({}) is the whole node, which Slurm does not confine here: LAMA \
             places this process among the CPUs Slurm bound it to, {own}",
            file.display()
        );
        return Ok((own, vec![note]));
    }
    Ok(match from_cgroup {
        Some((cpus, file)) => {
            let narrowed = own != cpus && own.intersection(&cpus) == own;
            let notes = narrowed
                .then(|| {
                    format!(
                        "the launcher bound this process to CPUs {own}; LAMA places it among \
                         its cgroup's CPUs {cpus} ({})",
                        file.display()
                    )
                })
                .into_iter()
                .collect();
            (cpus, notes)
        }
        None => {
            let note = format!("{NO_CGROUP}: LAMA places this process among its own CPUs {own}");
            (own, vec![note])
        }
    })
}

/// The request, as the plugin resolves the same `--lama-*` options.
fn request(args: &ExecArgs) -> Result<StepRequest, Failure> {
    if lama_engine::parse_gpu_layout(&args.map).is_some() {
        return Err(Failure::Usage(format!(
            "lama exec places by CPU: layout '{}' places by GPU, which needs the GPUs a \
             launcher gave each rank; use srun with the plugin (--lama-map={}), or a layout \
             without 'g'",
            args.map, args.map
        )));
    }
    let asked = Asked::parse(
        &args.map,
        args.bind.as_deref(),
        args.mppr.as_deref(),
        &args.order,
        &args.membind,
    )?;
    Ok(StepRequest {
        layout: asked.layout,
        bind: asked.bind,
        membind: asked.membind,
        mppr: asked.mppr,
        order: asked.order,
        origin: Origin::User,
        verbose: args.verbose,
        omp: args.omp,
        gpu: None::<GpuOptions>,
    })
}

/// Under Flux, the count of this node's tasks, which the job shell sets in no variable:
/// `flux job taskmap --nodeid=RANK JOBID`, then `--ntasks=NODEID` (flux-job(1)).
fn flux_local_count(rank: &str, job: &str) -> Result<String, String> {
    let ask = |arg: String| -> Result<String, String> {
        let out = crate::static_build::command("flux")
            .args(["job", "taskmap", &arg, job])
            .output()
            .map_err(|e| format!("flux job taskmap {arg} {job}: {e}"))?;
        let text = String::from_utf8_lossy(&out.stdout).trim().to_string();
        match out.status.success() && text.parse::<u32>().is_ok() {
            true => Ok(text),
            false => Err(format!(
                "flux job taskmap {arg} {job} answered '{}' ({})",
                lama_slurm::hostlist::shown(&text),
                String::from_utf8_lossy(&out.stderr).trim()
            )),
        }
    };
    let node = ask(format!("--nodeid={rank}"))?;
    ask(format!("--ntasks={node}"))
}

/// What this rank becomes: the CPUs it binds itself to (none for `--bind none`), the memory
/// binding, its variables, what its node's first rank says, and its `--verbose` line.
#[derive(Debug)]
struct Prepared {
    bind: Option<CpuList>,
    membind: Option<(Membind, CpuList)>,
    vars: Vec<(String, String)>,
    notes: Vec<String>,
    verbose: Option<String>,
}

/// Which rank this process is, from its launcher's variables (under Flux, with this node's
/// task count asked of `flux job taskmap`); with the environment as it was read.
fn who_am_i() -> Result<(Rank, impl Fn(&str) -> Option<String>), Failure> {
    let flux = match (
        std::env::var("FLUX_TASK_RANK"),
        std::env::var("FLUX_JOB_ID"),
    ) {
        (Ok(rank), Ok(job)) if std::env::var(lama_slurm::launcher::FLUX_LOCAL_COUNT).is_err() => {
            Some(flux_local_count(&rank, &job).map_err(|e| Failure::Place(format!("exec: {e}")))?)
        }
        _ => None,
    };
    let env = move |name: &str| match (name, &flux) {
        (lama_slurm::launcher::FLUX_LOCAL_COUNT, Some(count)) => Some(count.clone()),
        _ => std::env::var(name).ok(),
    };
    let me = lama_slurm::launcher::find(&env).map_err(|e| Failure::Usage(format!("exec: {e}")))?;
    Ok((me, env))
}

pub(crate) fn run(args: ExecArgs) -> Result<(), Failure> {
    let (me, env) = who_am_i()?;
    let (cpus, notes, from_cgroup) =
        job_cpus().map_err(|e| Failure::Place(format!("exec: {e}")))?;
    let whole = lama_hwloc::load_whole_with(&lama_hwloc::Source::Live, lama_hwloc::Io::Skip)
        .map_err(|e| Failure::Place(format!("exec: this node's topology: {e}")))?;
    let machine = whole.restrict(&cpus);
    let fail = |e: String| Failure::Place(format!("exec: rank {}: {e}", me.rank));
    // Without a cgroup the CPUs are this process's own, which the launcher may have bound.
    let own_mask = |f: Failure| match f {
        Failure::Place(m) if !from_cgroup => Failure::Place(format!(
            "{m} ({NO_CGROUP}, so LAMA placed among this process's own CPUs {cpus}, which the \
             launcher may have narrowed: turn its binding off, e.g. mpirun --bind-to none (Open \
             MPI), mpiexec -bind-to none (MPICH), I_MPI_PIN=0 (Intel MPI))"
        )),
        f => f,
    };
    let mut ready = match &args.plan {
        Some(file) => by_plan(&args, file, &me, &machine, &cpus, &env).map_err(fail),
        None => by_layout(&args, &me, &machine, cpus.len(), &env),
    }
    .map_err(own_mask)?;
    if let Some(cpus) = &ready.bind {
        lama_hwloc::bind::set_affinity(cpus).map_err(fail)?;
    }
    if let Some((policy, mems)) = &ready.membind {
        let used = lama_hwloc::bind::set_membind(*policy, mems).map_err(fail)?;
        for (name, value) in &mut ready.vars {
            if name == "LAMA_MEMS" {
                *value = used.to_string();
            }
        }
    }
    for (name, value) in MPI_PINNING_OFF {
        if env(name).is_none() {
            ready.vars.push((name.into(), value.into()));
        }
    }
    // What concerns the node (the CPUs, the fallback from the default binding, shared CPUs,
    // the spread over nodes), said once per node, by its first rank.
    if me.local == 0 {
        for note in notes.iter().chain(&ready.notes) {
            eprintln!("lama exec: {note}");
        }
    }
    if let Some(line) = &ready.verbose {
        eprintln!(
            "{line} ({})",
            me.launcher.unwrap_or("no launcher: one process")
        );
    }
    let (program, rest) = args.program.split_first().expect("clap requires a program");
    let err = crate::static_build::command(program)
        .args(rest)
        .envs(ready.vars)
        .exec();
    Err(Failure::Place(format!(
        "exec: cannot run {}: {err}",
        program.to_string_lossy()
    )))
}

fn host_name() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
    host.trim().to_string()
}

/// This rank placed by the layout, as the plugin places a node's tasks: among `step_pus` CPUs
/// (`machine`), `-c` counted as the plugin counts it: in threads, or in cores where every CPU
/// asked for brought a whole core's threads ([`lama_slurm::cpus_per_task::step_unit`], from
/// this node's ranks).
fn by_layout(
    args: &ExecArgs,
    me: &Rank,
    machine: &lama_engine::Machine,
    step_pus: usize,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Prepared, Failure> {
    let req = request(args)?;
    let per_task = args
        .cpus_per_task
        .or_else(|| {
            me.node_ranks
                .as_ref()
                .and(env("SLURM_CPUS_PER_TASK"))
                .and_then(|c| c.trim().parse().ok())
        })
        .unwrap_or(1);
    let step_cpus = StepCpus {
        per_task,
        unit: lama_slurm::cpus_per_task::step_unit(
            machine,
            me.local_size.max(1),
            per_task,
            u32::try_from(step_pus).unwrap_or(u32::MAX),
        ),
    };
    let fail = |e: String| Failure::Place(format!("exec: rank {}: {e}", me.rank));
    let local = place_local(machine, &req, &me.globals(), args.oversubscribe, step_cpus)
        .map_err(|e| fail(e.to_string()))?;
    let req = StepRequest {
        bind: Some(local.bind),
        ..req
    };
    let task = local
        .tasks
        .get(me.local as usize)
        .ok_or_else(|| fail(format!("no placement for local rank {}", me.local)))?;
    let task = lama_slurm::node::TaskPlacement {
        global: me.rank,
        ..task.clone()
    };
    let membind = memory_binding(&req, &task);
    let mut vars: Vec<(String, String)> = task_environment(&req, &task)
        .into_iter()
        .map(|(n, v)| (n.to_string(), v))
        .collect();
    if req.omp && local.bind != Bind::None && env("OMP_NUM_THREADS").is_none() {
        let threads = omp_threads(step_cpus, &task).to_string();
        vars.push(("OMP_NUM_THREADS".into(), threads));
    }
    let mut notes: Vec<String> = local.here.iter().chain(&local.narrower).cloned().collect();
    notes.extend(spread_note(args, me, machine, &req));
    Ok(Prepared {
        bind: (local.bind != Bind::None).then(|| task.cpus.clone()),
        membind,
        vars,
        notes,
        verbose: args
            .verbose
            .then(|| verbose_line(&req, &host_name(), me.local, std::process::id(), &task)),
    })
}

/// With `--verbose`, on rank 0 of a job of several nodes: how the layout deals ranks to nodes
/// and the launcher's option that does the same (the launcher decides which ranks each node
/// gets; `lama exec` places each node's own).
fn spread_note(
    args: &ExecArgs,
    me: &Rank,
    machine: &lama_engine::Machine,
    req: &StepRequest,
) -> Option<String> {
    if !args.verbose || me.rank != 0 || me.size.is_none_or(|n| n <= me.local_size) {
        return None;
    }
    let layout = lama_engine::Request {
        bind: req.binding(),
        mppr: req.mppr.clone(),
        order: req.order,
        ..lama_engine::Request::new(req.layout.clone(), 0)
    };
    let want = lama_slurm::distribution::node_spread(machine, &layout)?;
    let per_node = me.local_size;
    // A plane as wide as this node's ranks deals them as a block does.
    let want = match want == format!("plane={per_node}") {
        true => "block".to_string(),
        false => want,
    };
    let launcher = me.launcher?;
    let how = match lama_slurm::launcher::spread_option(launcher, &want, per_node) {
        Some(option) => format!("{launcher} does that with {option}"),
        None => format!(
            "{launcher} has no option for it: write the ranks' nodes with lama map --emit \
             (rankfile, machinefile, taskmap or srun)"
        ),
    };
    Some(format!(
        "layout {} deals ranks to nodes like srun -m {want} (nodes shaped like this one); {how}",
        args.map
    ))
}

/// This rank placed by the plan in `file` (as the plugin applies `--lama-plan`).
fn by_plan(
    args: &ExecArgs,
    file: &Path,
    me: &Rank,
    machine: &lama_engine::Machine,
    cpus: &CpuList,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Prepared, String> {
    let slurm = me.launcher == Some(lama_slurm::launcher::SLURM.name);
    // Plans name Slurm's nodes under srun; an MPI launcher's ranks inherit the
    // SLURMD_NODENAME of the job around it, so there the host name is the node's.
    let node = match env("SLURMD_NODENAME") {
        Some(n) if slurm => n,
        _ => host_name()
            .split('.')
            .next()
            .unwrap_or_default()
            .to_string(),
    };
    let cpu_bound = machine.pus().iter().map(|p| p.os + 1).max().unwrap_or(0);
    let query = lama_planfile::NodeQuery {
        node: &node,
        cpu_bound,
        total: me.size,
        most_here: me.local_size as usize,
        wanted: &[me.rank],
    };
    let plan = read_plan(file, &query)?;
    let here = lama_slurm::node_plan::StepHere {
        node: &node,
        globals: &[me.rank],
        local_count: me.local_size as usize,
        total: me.size,
        cpus,
        launcher: me.launcher.unwrap_or("no launcher"),
        relaunch: lama_slurm::launcher::plan_relaunch(me.launcher),
    };
    let membind = Membind::parse(&args.membind).map_err(|d| d.headline())?;
    let tasks =
        lama_slurm::node_plan::planned_tasks(machine, &plan, &here, args.verbose, args.omp)?;
    let task = tasks.into_iter().next().ok_or("the plan placed no rank")?;
    let mems = (membind != Membind::None && !task.mems.is_empty()).then(|| task.mems.clone());
    let mut vars: Vec<(String, String)> =
        lama_slurm::node_plan::planned_environment(&task, mems.as_ref().map(|m| (membind, m)))
            .into_iter()
            .map(|(n, v)| (n.to_string(), v))
            .collect();
    if task.omp_place_count > 0 && env("OMP_NUM_THREADS").is_none() {
        vars.push(("OMP_NUM_THREADS".into(), task.omp_place_count.to_string()));
    }
    Ok(Prepared {
        bind: Some(task.cpus.clone()),
        verbose: args.verbose.then(|| {
            let planned = mems.as_ref().map(|m| (membind, m));
            lama_slurm::node_plan::verbose_line(&node, me.local, std::process::id(), &task, planned)
        }),
        membind: mems.map(|m| (membind, m)),
        vars,
        notes: Vec::new(),
    })
}

/// This node's view of the plan in `file`, read in pieces as this rank's user, in one pass
/// and at most [`lama_planfile::max_plan_bytes`] of the launcher's rank count.
fn read_plan(file: &Path, query: &lama_planfile::NodeQuery<'_>) -> Result<NodePlan, String> {
    let max = lama_planfile::max_plan_bytes(query.total.unwrap_or(lama_planfile::MAX_PLAN_RANKS));
    let f = std::fs::File::open(file)
        .map_err(|e| format!("cannot read the plan {}: {e}", file.display()))?;
    let (plan, _) = lama_planfile::read_for_node(std::io::BufReader::new(f), query, max)
        .map_err(|e| format!("the plan {}: {e}", file.display()))?;
    Ok(plan)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cgroups_cpuset_file() {
        let root = Path::new("/sys/fs/cgroup");
        // cgroup v2: Slurm's task directory has no cpuset of its own; its step's has.
        let v2 = "0::/system.slice/slurmstepd.scope/job_3/step_0/user/task_1\n";
        let has = |p: &Path| p.ends_with("step_0/user/cpuset.cpus.effective");
        assert_eq!(
            cpuset_file(v2, root, &has).unwrap(),
            root.join("system.slice/slurmstepd.scope/job_3/step_0/user/cpuset.cpus.effective")
        );
        // None anywhere up to the root: none.
        assert_eq!(cpuset_file(v2, root, &|_| false), None);
        // cgroup v1: the cpuset hierarchy's effective CPUs, else its cpus.
        let v1 = "12:memory:/slurm/uid_0/job_3\n5:cpuset:/slurm/uid_0/job_3/step_0\n";
        assert_eq!(
            cpuset_file(v1, root, &|_| true).unwrap(),
            root.join("cpuset/slurm/uid_0/job_3/step_0/cpuset.effective_cpus")
        );
        assert_eq!(
            cpuset_file(v1, root, &|_| false).unwrap(),
            root.join("cpuset/slurm/uid_0/job_3/step_0/cpuset.cpus")
        );
        assert_eq!(cpuset_file("", root, &|_| true), None);
    }

    #[test]
    fn a_mask_narrower_than_the_cgroup_is_said_and_not_used() {
        let cpus = |s: &str| CpuList::parse(s).unwrap();
        let file = || PathBuf::from("/sys/fs/cgroup/x/cpuset.cpus.effective");
        // mpirun bound the rank to core 1; its cgroup allows 0-3: LAMA places among 0-3.
        let (c, notes) = choose_cpus(cpus("1"), Some((cpus("0-3"), file())), None).unwrap();
        assert_eq!(c.to_string(), "0-3");
        assert_eq!(
            notes,
            [
                "the launcher bound this process to CPUs 1; LAMA places it among its cgroup's \
              CPUs 0-3 (/sys/fs/cgroup/x/cpuset.cpus.effective)"
            ]
        );
        // Not narrowed: nothing said.
        let (c, notes) = choose_cpus(cpus("0-3"), Some((cpus("0-3"), file())), None).unwrap();
        assert_eq!((c.to_string(), notes.len()), ("0-3".to_string(), 0));
        // No cgroup cpuset: its own mask, said.
        let (c, notes) = choose_cpus(cpus("2"), None, None).unwrap();
        assert_eq!(c.to_string(), "2");
        assert!(notes[0].starts_with("no cgroup cpuset found"), "{notes:?}");
    }

    #[test]
    fn under_slurm_a_cgroup_of_the_whole_node_is_not_the_steps_cpus() {
        let cpus = |s: &str| CpuList::parse(s).unwrap();
        let file =
            || PathBuf::from("/sys/fs/cgroup/system.slice/slurmstepd.scope/cpuset.cpus.effective");
        let node = cpus("0-7");
        // ConstrainCores=no: the cgroup is the node; task/affinity bound the task to 2-3,
        // another job holds 0-1: LAMA places among 2-3, and says why.
        let (c, notes) =
            choose_cpus(cpus("2-3"), Some((cpus("0-7"), file())), Some(&node)).unwrap();
        assert_eq!(c.to_string(), "2-3");
        assert!(
            notes[0].contains("is the whole node") && notes[0].ends_with("bound it to, 2-3"),
            "{notes:?}"
        );
        // Nothing narrower than the node: refused, not bound across other jobs' CPUs.
        let e = choose_cpus(cpus("0-7"), Some((cpus("0-7"), file())), Some(&node)).unwrap_err();
        assert!(
            e.starts_with("cannot tell which CPUs Slurm gave this step"),
            "{e}"
        );
        // A confining cgroup under Slurm: as before.
        let (c, _) = choose_cpus(cpus("2"), Some((cpus("2-5"), file())), Some(&node)).unwrap();
        assert_eq!(c.to_string(), "2-5");
        // Outside Slurm the whole machine is the user's.
        let (c, _) = choose_cpus(cpus("0-7"), Some((cpus("0-7"), file())), None).unwrap();
        assert_eq!(c.to_string(), "0-7");
    }

    #[test]
    fn a_g_layout_is_refused() {
        use clap::Parser;
        #[derive(Parser)]
        struct T {
            #[command(flatten)]
            a: ExecArgs,
        }
        let t = T::parse_from(["t", "--map", "gcsbnh", "--", "true"]);
        let Err(Failure::Usage(e)) = request(&t.a) else {
            panic!("a g layout was accepted");
        };
        assert!(e.contains("places by GPU"), "{e}");
        let t = T::parse_from(["t", "--map", "block", "--", "true"]);
        assert!(matches!(request(&t.a), Err(Failure::Usage(_))));
        let t = T::parse_from(["t", "--map", "scbnh", "--bind", "2c", "--", "true"]);
        assert_eq!(request(&t.a).ok().unwrap().bind.unwrap().to_string(), "2c");
    }

    fn args_of(argv: &[&str]) -> ExecArgs {
        use clap::Parser;
        #[derive(Parser)]
        struct T {
            #[command(flatten)]
            a: ExecArgs,
        }
        T::parse_from(argv).a
    }

    #[test]
    fn a_plan_places_this_rank_where_it_says() {
        let host = host_name().split('.').next().unwrap().to_string();
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("p.lama");
        let text = format!(
            "lama-plan 1\nranks 3\nrank 0 {host} pu 3 cpus 3\nrank 1 {host} pu 0 cpus 0-1\n\
             rank 2 elsewhere pu 0 cpus 0\n"
        );
        std::fs::write(&file, text).unwrap();
        let m = lama_engine::Machine::synthetic("pack:2 core:2 pu:1").unwrap();
        let all = CpuList::parse("0-3").unwrap();
        let args = args_of(&["t", "--plan", file.to_str().unwrap(), "--", "true"]);
        let ompi = lama_slurm::launcher::OPEN_MPI.name;
        let rank = |rank, local, size| Rank {
            launcher: Some(ompi),
            rank,
            local,
            local_size: 2,
            node_ranks: None,
            size,
        };
        let no_env = |_: &str| None;
        // Rank 1, local 1 of 2 here: CPUs 0-1, as planned (by hand from the text).
        let p = by_plan(&args, &file, &rank(1, 1, Some(3)), &m, &all, &no_env).unwrap();
        assert_eq!(p.bind.unwrap().to_string(), "0-1");
        assert!(
            p.vars.contains(&("LAMA_PLAN".into(), "1".into())),
            "{:?}",
            p.vars
        );
        // Rank 2 is planned elsewhere: what mpirun needs to start it there.
        let e = by_plan(&args, &file, &rank(2, 1, Some(3)), &m, &all, &no_env).unwrap_err();
        assert!(
            e.starts_with("rank 2 is planned on elsewhere but Open MPI")
                && e.ends_with("--hostfile PLAN.hosts --map-by seq (one rank per line, in order)"),
            "{e}"
        );
        // Four ranks in all, or CPUs outside this rank's cgroup: refused.
        let e = by_plan(&args, &file, &rank(1, 1, Some(4)), &m, &all, &no_env).unwrap_err();
        assert!(
            e.ends_with(
                "line 2: the plan is for 3 ranks but the step has 4 tasks: launch with -n3"
            ),
            "{e}"
        );
        let two = CpuList::parse("1-3").unwrap();
        let e = by_plan(&args, &file, &rank(1, 1, None), &m, &two, &no_env).unwrap_err();
        assert!(
            e.contains("planned on CPUs 0-1 but this step has only 1-3"),
            "{e}"
        );
        // A plan and a layout are one or the other.
        use clap::Parser;
        #[derive(Parser, Debug)]
        struct T {
            #[command(flatten)]
            a: ExecArgs,
        }
        assert!(T::try_parse_from(["t", "--plan", "p", "--map", "scbnh", "--", "x"]).is_err());
    }

    #[test]
    fn c_counts_as_the_plugin_counts() {
        // Two ranks of -c2 here, on one package of 4 cores of 2 threads (CPUs 0-7; core k has
        // CPUs 2k and 2k+1). Given 8 threads for 2 x 2 CPUs, each CPU Slurm counted brought a
        // whole core: rank 0 gets two cores, CPUs 0-3. Given 4 threads, Slurm counted threads:
        // rank 0 gets two threads, one core, CPUs 0-1 (by hand; the plugin's rule,
        // lama_slurm::cpus_per_task::step_unit).
        let whole = lama_engine::Machine::synthetic("pack:1 core:4 pu:2").unwrap();
        let args = args_of(&["t", "--map", "scbnh", "-c", "2", "--", "true"]);
        let me = Rank {
            launcher: Some(lama_slurm::launcher::OPEN_MPI.name),
            rank: 0,
            local: 0,
            local_size: 2,
            node_ranks: None,
            size: Some(2),
        };
        let no_env = |_: &str| None;
        let p = by_layout(&args, &me, &whole, 8, &no_env).unwrap();
        assert_eq!(p.bind.unwrap().to_string(), "0-3");
        let four = whole.restrict(&CpuList::parse("0-3").unwrap());
        let p = by_layout(&args, &me, &four, 4, &no_env).unwrap();
        assert_eq!(p.bind.unwrap().to_string(), "0-1");
    }

    #[test]
    fn the_spread_over_nodes_is_advised_once() {
        let m = lama_engine::Machine::synthetic("pack:2 core:2 pu:1").unwrap();
        let args = args_of(&["t", "--map", "nscbh", "-v", "--", "true"]);
        let req = request(&args).unwrap();
        let hydra = lama_slurm::launcher::HYDRA.name;
        let me = |rank, size| Rank {
            launcher: Some(hydra),
            rank,
            local: 0,
            local_size: 4,
            node_ranks: None,
            size,
        };
        // nscbh deals one rank per node in turn: hydra's -ppn 1.
        let note = spread_note(&args, &me(0, Some(8)), &m, &req).unwrap();
        assert!(note.ends_with("does that with -ppn 1"), "{note}");
        // Not rank 0, one node, or no whole count: nothing.
        assert_eq!(spread_note(&args, &me(4, Some(8)), &m, &req), None);
        assert_eq!(spread_note(&args, &me(0, Some(4)), &m, &req), None);
        assert_eq!(spread_note(&args, &me(0, None), &m, &req), None);
        // scbnh fills a node first: a block, -ppn 4 with 4 ranks per node.
        let args = args_of(&["t", "--map", "scbnh", "-v", "--", "true"]);
        let req = request(&args).unwrap();
        let note = spread_note(&args, &me(0, Some(8)), &m, &req).unwrap();
        assert!(
            note.contains("like srun -m block") && note.ends_with("-ppn 4"),
            "{note}"
        );
    }
}

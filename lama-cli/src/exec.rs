//! `lama exec [options] -- PROGRAM ARGS...`: started once per rank by any launcher (srun with
//! or without the plugin, mpirun, mpiexec, flux run, jsrun, or none), it finds which rank it
//! is ([`lama_slurm::launcher`]), takes the node's topology and the CPUs its cgroup allows,
//! places the node's ranks with the plugin's own rules ([`lama_slurm::node`]), binds itself
//! and its memory, sets the task's variables and executes the program. Every rank of a node
//! computes the same placement from the same inputs, so no rank talks to another.

use crate::Failure;
use lama_engine::{Bind, CpuList, CpuUnit, Layout, Membind, Mppr, Order};
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
/// launcher may have narrowed), else this process's mask; with what the user is told.
fn job_cpus() -> Result<(CpuList, Vec<String>), String> {
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
    let (cpus, notes) = choose_cpus(own, from_cgroup);
    Ok((cpus, notes))
}

/// The CPUs to place among: the cgroup's (`from_cgroup`, with its file) where there is one,
/// saying so when this process's own mask (`own`) is narrower; else its own mask.
fn choose_cpus(own: CpuList, from_cgroup: Option<(CpuList, PathBuf)>) -> (CpuList, Vec<String>) {
    match from_cgroup {
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
            let note = format!(
                "no cgroup cpuset found: LAMA places this process among its own CPUs {own}"
            );
            (own, vec![note])
        }
    }
}

/// The request, as the plugin resolves the same `--lama-*` options.
fn request(args: &ExecArgs) -> Result<StepRequest, Failure> {
    let syntax =
        |d: lama_engine::Diagnostic| Failure::Usage(lama_slurm::familiar::explain(d).to_string());
    if lama_engine::parse_gpu_layout(&args.map).is_some() {
        return Err(Failure::Usage(format!(
            "lama exec places by CPU: layout '{}' places by GPU, which needs the GPUs a \
             launcher gave each rank; use srun with the plugin (--lama-map={}), or a layout \
             without 'g'",
            args.map, args.map
        )));
    }
    Ok(StepRequest {
        layout: Layout::parse(&args.map).map_err(syntax)?,
        bind: args
            .bind
            .as_deref()
            .map(Bind::parse)
            .transpose()
            .map_err(syntax)?,
        membind: Membind::parse(&args.membind).map_err(syntax)?,
        mppr: match &args.mppr {
            Some(m) => Mppr::parse(m).map_err(syntax)?,
            None => Mppr::none(),
        },
        order: Order::parse(&args.order).map_err(syntax)?,
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
        let out = std::process::Command::new("flux")
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

pub(crate) fn run(args: ExecArgs) -> Result<(), Failure> {
    let req = request(&args)?;
    let flux = match (
        std::env::var("FLUX_TASK_RANK"),
        std::env::var("FLUX_JOB_ID"),
    ) {
        (Ok(rank), Ok(job)) if std::env::var(lama_slurm::launcher::FLUX_LOCAL_COUNT).is_err() => {
            Some(flux_local_count(&rank, &job).map_err(|e| Failure::Place(format!("exec: {e}")))?)
        }
        _ => None,
    };
    let env = |name: &str| match (name, &flux) {
        (lama_slurm::launcher::FLUX_LOCAL_COUNT, Some(count)) => Some(count.clone()),
        _ => std::env::var(name).ok(),
    };
    let me = lama_slurm::launcher::find(env).map_err(|e| Failure::Usage(format!("exec: {e}")))?;
    let (cpus, notes) = job_cpus().map_err(|e| Failure::Place(format!("exec: {e}")))?;
    let whole = lama_hwloc::load_whole_with(&lama_hwloc::Source::Live, lama_hwloc::Io::Skip)
        .map_err(|e| Failure::Place(format!("exec: this node's topology: {e}")))?;
    let machine = whole.restrict(&cpus);
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
        unit: CpuUnit::Thread,
    };
    let local = place_local(&machine, &req, &me.globals(), args.oversubscribe, step_cpus)
        .map_err(|e| Failure::Place(format!("exec: rank {}: {e}", me.rank)))?;
    let req = StepRequest {
        bind: Some(local.bind),
        ..req
    };
    let task = local
        .tasks
        .get(me.local as usize)
        .ok_or_else(|| Failure::Place(format!("exec: no placement for local rank {}", me.local)))?;
    let task = lama_slurm::node::TaskPlacement {
        global: me.rank,
        ..task.clone()
    };
    if local.bind != Bind::None {
        lama_hwloc::bind::set_affinity(&task.cpus)
            .map_err(|e| Failure::Place(format!("exec: rank {}: {e}", me.rank)))?;
    }
    let mut vars: Vec<(String, String)> = Vec::new();
    let used_mems = match memory_binding(&req, &task) {
        Some((policy, mems)) => Some(
            lama_hwloc::bind::set_membind(policy, &mems)
                .map_err(|e| Failure::Place(format!("exec: rank {}: {e}", me.rank)))?,
        ),
        None => None,
    };
    for (name, value) in task_environment(&req, &task) {
        let value = match &used_mems {
            Some(used) if name == "LAMA_MEMS" => used.to_string(),
            _ => value,
        };
        vars.push((name.to_string(), value));
    }
    if req.omp && local.bind != Bind::None && env("OMP_NUM_THREADS").is_none() {
        vars.push((
            "OMP_NUM_THREADS".into(),
            omp_threads(step_cpus, &task).to_string(),
        ));
    }
    for (name, value) in MPI_PINNING_OFF {
        if env(name).is_none() {
            vars.push((name.into(), value.into()));
        }
    }
    // What concerns the node (the CPUs, the fallback from the default binding, shared CPUs),
    // said once per node, by its first rank.
    if me.local == 0 {
        for note in notes.iter().chain(&local.here).chain(&local.narrower) {
            eprintln!("lama exec: {note}");
        }
    }
    if args.verbose {
        let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
        eprintln!(
            "{} ({})",
            verbose_line(&req, host.trim(), me.local, std::process::id(), &task),
            me.launcher.unwrap_or("no launcher: one process")
        );
    }
    let (program, rest) = args.program.split_first().expect("clap requires a program");
    let err = std::process::Command::new(program)
        .args(rest)
        .envs(vars)
        .exec();
    Err(Failure::Place(format!(
        "exec: cannot run {}: {err}",
        program.to_string_lossy()
    )))
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
        let (c, notes) = choose_cpus(cpus("1"), Some((cpus("0-3"), file())));
        assert_eq!(c.to_string(), "0-3");
        assert_eq!(
            notes,
            [
                "the launcher bound this process to CPUs 1; LAMA places it among its cgroup's \
              CPUs 0-3 (/sys/fs/cgroup/x/cpuset.cpus.effective)"
            ]
        );
        // Not narrowed: nothing said.
        let (c, notes) = choose_cpus(cpus("0-3"), Some((cpus("0-3"), file())));
        assert_eq!((c.to_string(), notes.len()), ("0-3".to_string(), 0));
        // No cgroup cpuset: its own mask, said.
        let (c, notes) = choose_cpus(cpus("2"), None);
        assert_eq!(c.to_string(), "2");
        assert!(notes[0].starts_with("no cgroup cpuset found"), "{notes:?}");
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
}

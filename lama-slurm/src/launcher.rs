//! Which rank a process is, as the launcher that started it wrote it into its environment:
//! what `lama exec` reads to place itself among its node's ranks. Pure: the caller passes the
//! environment. Each launcher's variables are those its own sources and documentation name
//! (cited at each entry); values are bounded and checked, and launchers that disagree are
//! refused, never reconciled.

/// A launcher and the variables it sets in each rank's environment. A launcher is taken to
/// have started this process when its local-rank variable, the one no other launcher sets, is
/// there; where several variables can hold a value, the first set is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Launcher {
    /// Its name, as messages say it.
    pub name: &'static str,
    /// The rank among all ranks.
    pub rank: &'static [&'static str],
    /// The rank among this node's ranks.
    pub local: &'static str,
    /// How many ranks run on this node.
    pub local_size: &'static [&'static str],
    /// How many ranks run in all (read only for advice; empty where no source names one).
    pub size: &'static [&'static str],
}

/// The launchers `lama exec` knows, MPI launchers before Slurm's srun: an MPI launcher's ranks
/// also inherit the `SLURM_*` variables of the job or step that started the launcher (a batch
/// script is task 0 of its own step, so `SLURM_PROCID=0` and `SLURM_GTIDS=0` are set there;
/// hydra's proxies are started by srun), which describe the launcher's process, not the rank.
pub const LAUNCHERS: [Launcher; 6] = [OPEN_MPI, HYDRA, MVAPICH, PALS, JSRUN, FLUX];

/// Open MPI 5: OpenPMIx's src/mca/pmdl/ompi/pmdl_ompi.c (`setup_fork`) sets OMPI_COMM_WORLD_*
/// for the ompi personality mpirun uses (Open MPI 4.1: orte/mca/schizo/ompi/schizo_ompi.c);
/// documented in Open MPI's "Environment variables" (docs/tuning-apps/environment-var.rst),
/// with OMPI_COMM_WORLD_SIZE.
pub const OPEN_MPI: Launcher = Launcher {
    name: "Open MPI (mpirun/prterun)",
    rank: &["OMPI_COMM_WORLD_RANK"],
    local: "OMPI_COMM_WORLD_LOCAL_RANK",
    local_size: &["OMPI_COMM_WORLD_LOCAL_SIZE"],
    size: &["OMPI_COMM_WORLD_SIZE"],
};

/// MPICH's hydra (mpiexec, mpiexec.hydra), and Intel MPI's, derived from it:
/// src/pm/hydra/proxy/pmip_cb.c (`launch_procs`) sets MPI_LOCALRANKID and MPI_LOCALNRANKS,
/// and PMI_RANK (PMI_ID with -pmi-port) with PMI_SIZE, which MPICH's simple PMI client reads.
pub const HYDRA: Launcher = Launcher {
    name: "hydra (MPICH, Intel MPI mpiexec)",
    rank: &["PMI_RANK", "PMI_ID"],
    local: "MPI_LOCALRANKID",
    local_size: &["MPI_LOCALNRANKS"],
    size: &["PMI_SIZE"],
};

/// MVAPICH2: mpirun_rsh's src/pm/mpirun/mpispawn.c (`setup_local_environment`) and its
/// hydra's src/pm/hydra/pm/pmiserv/pmip_cb.c set MV2_COMM_WORLD_* (with _SIZE).
pub const MVAPICH: Launcher = Launcher {
    name: "MVAPICH (mpirun_rsh, hydra)",
    rank: &["MV2_COMM_WORLD_RANK"],
    local: "MV2_COMM_WORLD_LOCAL_RANK",
    local_size: &["MV2_COMM_WORLD_LOCAL_SIZE"],
    size: &["MV2_COMM_WORLD_SIZE"],
};

/// HPE Cray PALS: PALS_RANKID and PALS_LOCAL_RANKID (named by flux-coral2's cray_pals.c and
/// by Slurm's emulation, src/plugins/mpi/cray_shasta/mpi_cray_shasta.c, which also sets
/// PMI_LOCAL_SIZE); the local count from PALS_LOCAL_SIZE (a name flux-coral2 lists; no HPE
/// page found says its meaning) or PMI_LOCAL_SIZE, and refused when neither is set.
pub const PALS: Launcher = Launcher {
    name: "HPE Cray PALS",
    rank: &["PALS_RANKID"],
    local: "PALS_LOCAL_RANKID",
    local_size: &["PALS_LOCAL_SIZE", "PMI_LOCAL_SIZE"],
    size: &[], // (no source found that names PALS's whole count)
};

/// IBM LSF jsrun: JSM_NAMESPACE_RANK and JSM_NAMESPACE_LOCAL_RANK, set by jsrun (as the
/// tools that run under it read them); JSM_NAMESPACE_LOCAL_SIZE, read the same way, is not
/// in IBM's jsrun page: refused when unset. JSM_NAMESPACE_SIZE for the whole.
pub const JSRUN: Launcher = Launcher {
    name: "LSF jsrun",
    rank: &["JSM_NAMESPACE_RANK"],
    local: "JSM_NAMESPACE_LOCAL_RANK",
    local_size: &["JSM_NAMESPACE_LOCAL_SIZE"],
    size: &["JSM_NAMESPACE_SIZE"],
};

/// Flux: the job shell sets FLUX_TASK_RANK and FLUX_TASK_LOCAL_ID (flux-core
/// src/shell/task.c, flux-environment(7)) and no count of this node's tasks: `lama exec`
/// asks `flux job taskmap` (flux-job(1)) and passes the answer as FLUX_LOCAL_COUNT;
/// FLUX_JOB_SIZE is the job's task count (flux-environment(7)).
pub const FLUX: Launcher = Launcher {
    name: "Flux (flux run)",
    rank: &["FLUX_TASK_RANK"],
    local: "FLUX_TASK_LOCAL_ID",
    local_size: &[FLUX_LOCAL_COUNT],
    size: &["FLUX_JOB_SIZE"],
};

/// The name under which `lama exec` passes the count of this node's Flux tasks, which it asks
/// `flux job taskmap` for (Flux sets no variable with it).
pub const FLUX_LOCAL_COUNT: &str = "FLUX_LOCAL_COUNT";

/// Slurm's srun: `SLURM_PROCID`, `SLURM_LOCALID` and `SLURM_GTIDS` (this node's global task
/// ids, comma-separated in local id order, built by `exec_task` in
/// src/slurmd/slurmstepd/task.c), set for each task by `setup_env` in src/common/env.c, 24.11
/// and 26.05; srun(1) documents them.
pub const SLURM: Launcher = Launcher {
    name: "Slurm (srun)",
    rank: &["SLURM_PROCID"],
    local: "SLURM_LOCALID",
    local_size: &["SLURM_GTIDS"],
    size: &["SLURM_STEP_NUM_TASKS", "SLURM_NTASKS"],
};

/// The longest value read from a launcher's variable: a rank list of a node of a few
/// thousand ranks.
pub const MAX_VALUE: usize = 64 * 1024;

/// Which rank this process is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rank {
    /// The launcher read, or `None`: no launcher, a single process.
    pub launcher: Option<&'static str>,
    /// Its rank among all.
    pub rank: u32,
    /// Its rank among this node's ranks.
    pub local: u32,
    /// How many ranks run on this node.
    pub local_size: u32,
    /// The global ranks of this node's ranks, by local rank, where the launcher says
    /// (srun's `SLURM_GTIDS`); else `None`, local ranks being in ascending global rank.
    pub node_ranks: Option<Vec<u32>>,
    /// How many ranks run in all, where the launcher says (for advice only).
    pub size: Option<u32>,
}

impl Rank {
    /// The global ranks of this node's ranks by local rank, for placement: the launcher's, or
    /// `0..local_size` (only their order matters).
    pub fn globals(&self) -> Vec<u32> {
        self.node_ranks
            .clone()
            .unwrap_or_else(|| (0..self.local_size).collect())
    }
}

fn number(name: &str, value: &str) -> Result<u32, String> {
    value.trim().parse::<u32>().map_err(|_| {
        format!(
            "{name} is '{}', not a number",
            crate::hostlist::shown(value)
        )
    })
}

/// The first of `names` set (and not absurdly long), with its name.
fn first_of(
    names: &[&'static str],
    env: &dyn Fn(&str) -> Option<String>,
) -> Option<(&'static str, String)> {
    names
        .iter()
        .find_map(|&n| env(n).filter(|v| v.len() <= MAX_VALUE).map(|v| (n, v)))
}

/// The rank a launcher's variables describe, `None` when its local-rank variable is not set.
fn read_one(l: &Launcher, env: &dyn Fn(&str) -> Option<String>) -> Option<Result<Rank, String>> {
    let (_, local) = first_of(&[l.local], env)?;
    Some((|| {
        let missing = |names: &[&str]| {
            format!(
                "{} is set ({}) but {} is not: {} sets both",
                l.local,
                crate::hostlist::shown(&local),
                names.join(" or "),
                l.name
            )
        };
        let local = number(l.local, &local)?;
        let (rank_name, rank) = first_of(l.rank, env).ok_or_else(|| missing(l.rank))?;
        let rank = number(rank_name, &rank)?;
        let (size_name, size) = first_of(l.local_size, env).ok_or_else(|| missing(l.local_size))?;
        let (local_size, node_ranks) = if l.name == SLURM.name {
            let ranks = size
                .split(',')
                .map(|g| number(size_name, g))
                .collect::<Result<Vec<u32>, String>>()?;
            if ranks.get(local as usize) != Some(&rank) {
                return Err(format!(
                    "{rank_name} is {rank} but {size_name} ({}) has {} at local rank {local}",
                    crate::hostlist::shown(&size),
                    ranks
                        .get(local as usize)
                        .map_or("nothing".to_string(), u32::to_string)
                ));
            }
            (ranks.len() as u32, Some(ranks))
        } else {
            (number(size_name, &size)?, None)
        };
        if local >= local_size {
            return Err(format!(
                "{} says local rank {local} of {local_size} on this node ({} {local}, \
                 {size_name} {local_size}): a local rank must be below the count",
                l.name, l.local
            ));
        }
        Ok(Rank {
            launcher: Some(l.name),
            rank,
            local,
            local_size,
            node_ranks,
            size: first_of(l.size, env).and_then(|(_, v)| v.trim().parse().ok()),
        })
    })())
}

/// The option of launcher `name` (a [`Launcher::name`]) that deals ranks to nodes as srun's
/// `-m want` does (`block`, `cyclic`, `plane=N`; `per_node` ranks per node), where it has one:
/// Open MPI's `--map-by slot|node` (mpirun(1)), hydra's `-ppn` (consecutive groups of that
/// many ranks per host, round the hosts: MPICH's mpiexec.hydra and Intel MPI's), Flux's
/// `--taskmap=block|cyclic|cyclic:N` (flux-run(1)) and srun's `-m`.
pub fn spread_option(name: &str, want: &str, per_node: u32) -> Option<String> {
    let plane = want.strip_prefix("plane=");
    let hydra = || match (want, plane) {
        ("block", _) => Some(format!("-ppn {per_node}")),
        ("cyclic", _) => Some("-ppn 1".to_string()),
        (_, Some(n)) => Some(format!("-ppn {n}")),
        _ => None,
    };
    match name {
        n if n == OPEN_MPI.name => match want {
            "block" => Some("--map-by slot".into()),
            "cyclic" => Some("--map-by node".into()),
            _ => None,
        },
        n if n == HYDRA.name || n == MVAPICH.name => hydra(),
        n if n == FLUX.name => match (want, plane) {
            ("block" | "cyclic", _) => Some(format!("--taskmap={want}")),
            (_, Some(n)) => Some(format!("--taskmap=cyclic:{n}")),
            _ => None,
        },
        n if n == SLURM.name => Some(format!("-m {want}")),
        _ => None,
    }
}

/// What starts the ranks of launcher `name` (a [`Launcher::name`], `None` for no launcher) on
/// the nodes a `lama plan` plan's `.hosts` file lists, one line per rank in rank order: Open
/// MPI's sequential mapper (mpirun(1) `--map-by seq`), hydra's machine file (`-f`), Flux's
/// `--taskmap=hostfile:` (flux-run(1)), srun's `SLURM_HOSTFILE` with `-m arbitrary`.
pub fn plan_relaunch(name: Option<&str>) -> &'static str {
    match name {
        Some(n) if n == OPEN_MPI.name => {
            "run mpirun --hostfile PLAN.hosts --map-by seq (one rank per line, in order)"
        }
        Some(n) if n == HYDRA.name || n == MVAPICH.name => {
            "run mpiexec -f PLAN.hosts (one rank per line, in order)"
        }
        Some(n) if n == FLUX.name => "run flux run --taskmap=hostfile:PLAN.hosts",
        Some(n) if n == SLURM.name => crate::node_plan::SRUN_RELAUNCH,
        _ => "start each rank on the node the plan's .hosts file names on its line",
    }
}

/// Which rank this process is, from the environment `env`: the MPI launchers' variables
/// first ([`LAUNCHERS`]), then Slurm's ([`SLURM`]), else a single process (rank 0 of 1). Two
/// launchers that both describe this process must agree on its rank, local rank and local
/// count; otherwise, and for values that are not numbers or not consistent, the error says
/// which variables were seen and what would work.
pub fn find(env: impl Fn(&str) -> Option<String>) -> Result<Rank, String> {
    let mut found: Vec<Rank> = Vec::new();
    for l in &LAUNCHERS {
        if let Some(r) = read_one(l, &env) {
            found.push(r?);
        }
    }
    if found.is_empty() {
        return match read_one(&SLURM, &env) {
            Some(r) => r,
            None => Ok(Rank {
                launcher: None,
                rank: 0,
                local: 0,
                local_size: 1,
                node_ranks: None,
                size: Some(1),
            }),
        };
    }
    let first = &found[0];
    let key = |r: &Rank| (r.rank, r.local, r.local_size);
    if let Some(other) = found.iter().find(|r| key(r) != key(first)) {
        return Err(format!(
            "two launchers describe this process differently: {} says rank {} (local {} of \
             {}), {} says rank {} (local {} of {}); start lama exec from one launcher, or unset \
             the other's variables",
            first.launcher.unwrap_or("?"),
            first.rank,
            first.local,
            first.local_size,
            other.launcher.unwrap_or("?"),
            other.rank,
            other.local,
            other.local_size
        ));
    }
    Ok(found.swap_remove(0))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env_of(vars: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let vars: Vec<(String, String)> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |name| vars.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone())
    }

    #[test]
    fn options_that_spread_ranks_over_nodes() {
        let ompi = OPEN_MPI.name;
        let hydra = HYDRA.name;
        assert_eq!(spread_option(ompi, "cyclic", 4).unwrap(), "--map-by node");
        assert_eq!(spread_option(ompi, "block", 4).unwrap(), "--map-by slot");
        assert_eq!(spread_option(ompi, "plane=2", 4), None);
        assert_eq!(spread_option(hydra, "block", 4).unwrap(), "-ppn 4");
        assert_eq!(spread_option(hydra, "cyclic", 4).unwrap(), "-ppn 1");
        assert_eq!(spread_option(hydra, "plane=2", 4).unwrap(), "-ppn 2");
        assert_eq!(
            spread_option(FLUX.name, "plane=3", 6).unwrap(),
            "--taskmap=cyclic:3"
        );
        assert_eq!(spread_option(SLURM.name, "cyclic", 4).unwrap(), "-m cyclic");
        assert_eq!(spread_option(JSRUN.name, "cyclic", 4), None);
    }

    #[test]
    fn each_launchers_variables() {
        let ompi = find(env_of(&[
            ("OMPI_COMM_WORLD_RANK", "5"),
            ("OMPI_COMM_WORLD_LOCAL_RANK", "1"),
            ("OMPI_COMM_WORLD_LOCAL_SIZE", "4"),
            ("OMPI_COMM_WORLD_SIZE", "8"),
        ]))
        .unwrap();
        assert_eq!((ompi.rank, ompi.local, ompi.local_size), (5, 1, 4));
        assert_eq!(ompi.size, Some(8));
        assert_eq!(ompi.launcher, Some("Open MPI (mpirun/prterun)"));
        assert_eq!(ompi.globals(), [0, 1, 2, 3]);
        let hydra = find(env_of(&[
            ("PMI_RANK", "3"),
            ("MPI_LOCALRANKID", "3"),
            ("MPI_LOCALNRANKS", "8"),
        ]))
        .unwrap();
        assert_eq!((hydra.rank, hydra.local, hydra.local_size), (3, 3, 8));
        // No PMI_SIZE: the whole count is unknown (advice only).
        assert_eq!(hydra.size, None);
        for (rank, local, size) in [
            (
                "MV2_COMM_WORLD_RANK",
                "MV2_COMM_WORLD_LOCAL_RANK",
                "MV2_COMM_WORLD_LOCAL_SIZE",
            ),
            ("PALS_RANKID", "PALS_LOCAL_RANKID", "PALS_LOCAL_SIZE"),
            ("PALS_RANKID", "PALS_LOCAL_RANKID", "PMI_LOCAL_SIZE"),
            (
                "JSM_NAMESPACE_RANK",
                "JSM_NAMESPACE_LOCAL_RANK",
                "JSM_NAMESPACE_LOCAL_SIZE",
            ),
            ("FLUX_TASK_RANK", "FLUX_TASK_LOCAL_ID", FLUX_LOCAL_COUNT),
            ("PMI_ID", "MPI_LOCALRANKID", "MPI_LOCALNRANKS"),
        ] {
            let r = find(env_of(&[(rank, "9"), (local, "0"), (size, "2")])).unwrap();
            assert_eq!((r.rank, r.local, r.local_size), (9, 0, 2), "{rank}");
        }
        // srun: this node's global ranks, in local id order (ranks 1 and 3 of a cyclic step).
        let slurm = find(env_of(&[
            ("SLURM_PROCID", "3"),
            ("SLURM_LOCALID", "1"),
            ("SLURM_GTIDS", "1,3"),
        ]))
        .unwrap();
        assert_eq!((slurm.rank, slurm.local, slurm.local_size), (3, 1, 2));
        assert_eq!(slurm.globals(), [1, 3]);
        // No launcher: one process.
        let alone = find(env_of(&[])).unwrap();
        assert_eq!((alone.launcher, alone.rank, alone.local_size), (None, 0, 1));
    }

    #[test]
    fn mpi_launchers_before_the_slurm_job_around_them() {
        // mpirun in a batch script: its ranks inherit the batch step's SLURM_PROCID=0.
        let r = find(env_of(&[
            ("SLURM_PROCID", "0"),
            ("SLURM_LOCALID", "0"),
            ("SLURM_GTIDS", "0"),
            ("OMPI_COMM_WORLD_RANK", "2"),
            ("OMPI_COMM_WORLD_LOCAL_RANK", "2"),
            ("OMPI_COMM_WORLD_LOCAL_SIZE", "4"),
        ]))
        .unwrap();
        assert_eq!((r.rank, r.local), (2, 2));
        // Two MPI launchers that agree are one answer; that disagree, refused.
        let both = [
            ("OMPI_COMM_WORLD_RANK", "2"),
            ("OMPI_COMM_WORLD_LOCAL_RANK", "0"),
            ("OMPI_COMM_WORLD_LOCAL_SIZE", "2"),
            ("PMI_RANK", "2"),
            ("MPI_LOCALRANKID", "0"),
            ("MPI_LOCALNRANKS", "2"),
        ];
        assert_eq!(find(env_of(&both)).unwrap().rank, 2);
        let mut differ = both;
        differ[3] = ("PMI_RANK", "7");
        let e = find(env_of(&differ)).unwrap_err();
        assert!(
            e.starts_with("two launchers describe this process differently: Open MPI")
                && e.contains("hydra")
                && e.contains("says rank 7"),
            "{e}"
        );
    }

    #[test]
    fn bad_values_are_refused_with_the_variables() {
        // PMI_RANK alone is not hydra (srun --mpi=pmi2 and Flux set it too): Slurm's task.
        let r = find(env_of(&[
            ("PMI_RANK", "1"),
            ("SLURM_PROCID", "1"),
            ("SLURM_LOCALID", "0"),
            ("SLURM_GTIDS", "1"),
        ]))
        .unwrap();
        assert_eq!(r.launcher, Some("Slurm (srun)"));
        let e = find(env_of(&[("MPI_LOCALRANKID", "1")])).unwrap_err();
        assert!(
            e.contains("MPI_LOCALRANKID is set (1) but PMI_RANK or PMI_ID is not"),
            "{e}"
        );
        let e = find(env_of(&[
            ("PMI_RANK", "x"),
            ("MPI_LOCALRANKID", "0"),
            ("MPI_LOCALNRANKS", "1"),
        ]))
        .unwrap_err();
        assert!(e.contains("PMI_RANK is 'x', not a number"), "{e}");
        let e = find(env_of(&[
            ("OMPI_COMM_WORLD_RANK", "4"),
            ("OMPI_COMM_WORLD_LOCAL_RANK", "4"),
            ("OMPI_COMM_WORLD_LOCAL_SIZE", "4"),
        ]))
        .unwrap_err();
        assert!(
            e.contains("local rank 4 of 4") && e.contains("below the count"),
            "{e}"
        );
        let e = find(env_of(&[
            ("SLURM_PROCID", "2"),
            ("SLURM_LOCALID", "0"),
            ("SLURM_GTIDS", "0,1"),
        ]))
        .unwrap_err();
        assert!(
            e.contains("SLURM_PROCID is 2 but SLURM_GTIDS (0,1) has 0"),
            "{e}"
        );
        // An absurdly long value is not read: as if unset.
        let long = "1".repeat(MAX_VALUE + 1);
        let r = find(env_of(&[("MPI_LOCALRANKID", &long)])).unwrap();
        assert_eq!(r.launcher, None);
        // PALS without a local count: refused, naming both names.
        let e = find(env_of(&[("PALS_RANKID", "0"), ("PALS_LOCAL_RANKID", "0")])).unwrap_err();
        assert!(
            e.contains("PALS_LOCAL_SIZE or PMI_LOCAL_SIZE is not"),
            "{e}"
        );
    }
}

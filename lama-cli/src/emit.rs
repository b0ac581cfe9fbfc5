//! `lama map --emit FORMAT`: the placement written in a launcher's own format, for users who
//! prefer the launcher's binder to `lama exec` (README, "Without the plugin").
//!
//! - `rankfile`: Open MPI's and PRRTE's rankfile (`mpirun --map-by rankfile:file=FILE`; PRRTE's
//!   docs/placement/rankfiles.rst): `rank N=HOST slot=LIST`, LIST the *logical* core indexes
//!   of the rank's binding; a binding of part of a core is written as logical hardware threads,
//!   which Open MPI reads as such with `--use-hwthread-cpus` (said on standard error).
//! - `machinefile`: a hydra machine file (MPICH's and Intel MPI's `mpiexec -f FILE`): `HOST:N`
//!   for each run of N consecutive ranks on one node.
//! - `srun`: srun's `--cpu-bind=mask_cpu:M0,M1,...` by local task id (the kernel's CPU
//!   numbers, as Slurm applies them), where every node's list is the same (srun has one list
//!   for all nodes); with the `-m` that gives the nodes their ranks.
//! - `taskmap`: which node each rank runs on as a Flux taskmap (RFC 34: `{"version":1,"map":
//!   [[NODEID,NNODES,PPN,REPEAT],...]}`, node ids in the allocation's order), for
//!   `flux run --taskmap=manual:MAP`; Flux then binds by its own options.

use crate::Failure;
use lama_engine::{Level, Machine, Placement};

/// The formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Emit {
    /// Open MPI / PRRTE rankfile.
    Rankfile,
    /// hydra machine file (MPICH, Intel MPI).
    Machinefile,
    /// srun --cpu-bind=mask_cpu and -m.
    Srun,
    /// Flux taskmap (RFC 34), for flux run --taskmap=manual:MAP.
    Taskmap,
}

/// A node's name in the file: its --node-names name, else a relative one (`+n0`).
fn host(names: Option<&[String]>, node: u32) -> String {
    names.map_or_else(|| format!("+n{node}"), |n| n[node as usize].clone())
}

/// The logical core indexes of `bound` (logical PUs) when they are whole cores of `m` (every
/// available PU of each core); `None` when some core is bound in part.
fn whole_cores(m: &Machine, bound: &[u32]) -> Option<Vec<usize>> {
    let mut cores = Vec::new();
    for (i, core) in m.objects(Level::Core).iter().enumerate() {
        let available: Vec<u32> = core
            .pus
            .clone()
            .filter(|&q| m.pus()[q as usize].available)
            .collect();
        let inside = available.iter().filter(|q| bound.contains(q)).count();
        match inside {
            0 => {}
            n if n == available.len() => cores.push(i),
            _ => return None,
        }
    }
    Some(cores)
}

fn list(v: impl IntoIterator<Item = usize>) -> String {
    v.into_iter()
        .map(|x| x.to_string())
        .collect::<Vec<_>>()
        .join(",")
}

fn rankfile(p: &Placement, names: Option<&[String]>) -> Result<String, Failure> {
    let infos: Vec<_> = (0..p.len()).map(|r| p.info(r)).collect();
    if infos.iter().any(|i| i.bound_logical.is_empty()) {
        return Err(Failure::Usage(
            "--emit rankfile needs a binding: a rankfile binds every rank (--bind none has none)"
                .into(),
        ));
    }
    // Logical cores where every rank's binding is whole cores; else every rank's logical
    // hardware threads (Open MPI then reads the whole file as threads).
    let cores: Option<Vec<Vec<usize>>> = infos
        .iter()
        .map(|i| whole_cores(p.nodes()[i.node as usize], &i.bound_logical))
        .collect();
    let mut out = String::new();
    for (r, info) in infos.iter().enumerate() {
        let slot = match &cores {
            Some(c) => list(c[r].iter().copied()),
            None => list(info.bound_logical.iter().map(|&q| q as usize)),
        };
        out += &format!("rank {r}={} slot={slot}\n", host(names, info.node));
    }
    if cores.is_none() {
        eprintln!(
            "lama: the rankfile names hardware threads (a binding of part of a core): run \
             mpirun --use-hwthread-cpus --map-by rankfile:file=FILE"
        );
    }
    Ok(out)
}

fn machinefile(p: &Placement, names: Option<&[String]>) -> String {
    let mut out = String::new();
    let mut run: Option<(u32, usize)> = None;
    for proc in p.processes() {
        run = match run {
            Some((node, n)) if node == proc.node => Some((node, n + 1)),
            Some((node, n)) => {
                out += &format!("{}:{n}\n", host(names, node));
                Some((proc.node, 1))
            }
            None => Some((proc.node, 1)),
        };
    }
    if let Some((node, n)) = run {
        out += &format!("{}:{n}\n", host(names, node));
    }
    out
}

fn srun(p: &Placement) -> Result<String, Failure> {
    let distribution = lama_slurm::distribution::exact(p).ok_or_else(|| {
        Failure::Place(
            "no srun -m gives the nodes these ranks: write them with --hostfile FILE and run \
             srun -m arbitrary with SLURM_HOSTFILE=FILE"
                .into(),
        )
    })?;
    // Each node's masks by local rank (ranks in ascending order on each node).
    let mut per_node: Vec<Vec<String>> = vec![Vec::new(); p.nodes().len()];
    for r in 0..p.len() {
        let info = p.info(r);
        if info.cpus.is_empty() {
            return Err(Failure::Usage(
                "--emit srun needs a binding (--bind none leaves Slurm's)".into(),
            ));
        }
        per_node[info.node as usize].push(lama_slurm::node_env::hex_mask(&info.cpus));
    }
    let used: Vec<&Vec<String>> = per_node.iter().filter(|m| !m.is_empty()).collect();
    if let Some(other) = used.iter().find(|m| *m != &used[0]) {
        return Err(Failure::Place(format!(
            "srun's --cpu-bind=mask_cpu has one list for every node, and this placement's \
             differ between nodes ({} and {}): use the plugin (--lama-map) or lama exec",
            used[0].join(","),
            other.join(",")
        )));
    }
    Ok(format!(
        "-m {distribution} --cpu-bind=mask_cpu:{}\n",
        used.first().map_or(String::new(), |m| m.join(","))
    ))
}

/// Which node each rank runs on as an RFC 34 taskmap: each run of consecutive ranks on one
/// node is a block `[node, 1, count, 1]`; runs of the same count on consecutive nodes join
/// into one block over those nodes, and equal consecutive blocks into one repeated.
fn taskmap(p: &Placement) -> String {
    let mut runs: Vec<[u32; 4]> = Vec::new();
    for proc in p.processes() {
        match runs.last_mut() {
            Some(run) if run[0] == proc.node && run[1] == 1 => run[2] += 1,
            _ => runs.push([proc.node, 1, 1, 1]),
        }
    }
    let mut nodes: Vec<[u32; 4]> = Vec::new();
    for run in runs {
        match nodes.last_mut() {
            Some(b) if b[2] == run[2] && b[0] + b[1] == run[0] => b[1] += 1,
            _ => nodes.push(run),
        }
    }
    let mut blocks: Vec<[u32; 4]> = Vec::new();
    for b in nodes {
        match blocks.last_mut() {
            Some(last) if last[..3] == b[..3] => last[3] += 1,
            _ => blocks.push(b),
        }
    }
    let map: Vec<String> = blocks
        .iter()
        .map(|b| format!("[{},{},{},{}]", b[0], b[1], b[2], b[3]))
        .collect();
    format!("{{\"version\":1,\"map\":[{}]}}\n", map.join(","))
}

/// The placement `p` in `format`.
pub(crate) fn emit(
    format: Emit,
    p: &Placement,
    names: Option<&[String]>,
) -> Result<String, Failure> {
    match format {
        Emit::Rankfile => rankfile(p, names),
        Emit::Machinefile => Ok(machinefile(p, names)),
        Emit::Srun => srun(p),
        Emit::Taskmap => Ok(taskmap(p)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use lama_engine::{place, Bind, Layout, Mppr, Order, Request};

    fn placed<'m>(nodes: &[&'m Machine], layout: &str, bind: &str, np: u32) -> Placement<'m> {
        let req = Request {
            layout: Layout::parse(layout).unwrap(),
            bind: Bind::parse(bind).unwrap(),
            mppr: Mppr::none(),
            order: Order::Natural,
            oversubscribe: false,
            np,
            bind_within: false,
        };
        place(nodes, &req).unwrap()
    }

    #[test]
    fn the_formats_by_hand() {
        // Two nodes of 2 packages x 2 cores x 2 threads (cores 0-3, threads 2c and 2c+1 in
        // logical order). scbnh 1c, 6 ranks: by hand, packages alternate on each node, nodes
        // fill in turn (layout n last): node 0 gets ranks 0-3 on cores 0, 2, 1, 3; node 1
        // ranks 4-5 on cores 0, 2.
        let m = Machine::synthetic("pack:2 core:2 pu:2").unwrap();
        let p = placed(&[&m, &m], "scbnh", "1c", 6);
        let names = vec!["a".to_string(), "b".to_string()];
        assert_eq!(
            emit(Emit::Rankfile, &p, Some(&names)).unwrap(),
            "rank 0=a slot=0\nrank 1=a slot=2\nrank 2=a slot=1\nrank 3=a slot=3\n\
             rank 4=b slot=0\nrank 5=b slot=2\n"
        );
        assert_eq!(
            emit(Emit::Machinefile, &p, Some(&names)).unwrap(),
            "a:4\nb:2\n"
        );
        // Relative hosts without names; a thread binding as logical threads.
        let p = placed(&[&m], "hcsbn", "1h", 2);
        assert_eq!(
            emit(Emit::Rankfile, &p, None).unwrap(),
            "rank 0=+n0 slot=0\nrank 1=+n0 slot=1\n"
        );
        // srun: one list for every node, the kernel's CPU numbers; by hand, sncbh puts
        // ranks 0-1 on node 0's packages (core 0: CPUs 0-1, core 2: CPUs 4-5), 2-3 on node 1's.
        let p = placed(&[&m, &m], "sncbh", "1c", 4);
        assert_eq!(
            emit(Emit::Srun, &p, None).unwrap(),
            "-m block --cpu-bind=mask_cpu:0x3,0x30\n"
        );
        // Flux taskmaps, by hand: the block of 4 then 2 ranks; sncbh's 2 per node; a cyclic
        // deal over 2 nodes (nscbh: rank 0 on node 0, 1 on node 1, ...) as one block repeated.
        let p = placed(&[&m, &m], "scbnh", "1c", 6);
        assert_eq!(
            emit(Emit::Taskmap, &p, None).unwrap(),
            "{\"version\":1,\"map\":[[0,1,4,1],[1,1,2,1]]}\n"
        );
        let p = placed(&[&m, &m], "sncbh", "1c", 4);
        assert_eq!(
            emit(Emit::Taskmap, &p, None).unwrap(),
            "{\"version\":1,\"map\":[[0,2,2,1]]}\n"
        );
        let p = placed(&[&m, &m], "nscbh", "1c", 6);
        assert_eq!(
            emit(Emit::Taskmap, &p, None).unwrap(),
            "{\"version\":1,\"map\":[[0,2,1,3]]}\n"
        );
        // Node 0 with four ranks, node 1 with two: no one list.
        let p = placed(&[&m, &m], "scbnh", "1c", 6);
        let e = emit(Emit::Srun, &p, None);
        assert!(matches!(e, Err(Failure::Place(_))), "{e:?}");
    }
}

//! The nodes of a preview: each `--topology` loaded, `--restrict`ed and named.

use crate::map_args::MapArgs;
use crate::Failure;
use lama_engine::{cpus_covered, CpuList, CpuUnit, Machine};
use lama_hwloc::Source;
use lama_plan::hostlist;

/// A topology: an hwloc XML file, a synthetic description, `host`, or the machine text of the
/// plugin's topology cache (`lama_topology.machine`, what steps read).
pub(crate) fn load(spec: &str) -> Result<Machine, Failure> {
    let path = std::path::Path::new(spec);
    if spec.ends_with(".machine") && path.is_file() {
        let text = lama_hwloc::read_bounded(path, lama_hwloc::MAX_XML_BYTES)
            .map_err(|e| Failure::Usage(format!("{spec}: {e}")))?;
        return lama_hwloc::load_machine_text(&text, path).map_err(Failure::Usage);
    }
    lama_hwloc::load(&Source::from_spec(spec)).map_err(|e| Failure::Usage(e.to_string()))
}

/// `m` restricted to `cpus`: a CPU the machine does not have is refused (never dropped), and so
/// is a list that leaves none of its CPUs available; both name the machine's CPUs.
pub(crate) fn restricted(m: Machine, cpus: &CpuList, option: &str) -> Result<Machine, Failure> {
    let all = CpuList::from_cpus(m.pus().iter().map(|p| p.os));
    if let Some(&bad) = cpus.cpus().iter().find(|&&c| m.logical_of(c).is_none()) {
        return Err(Failure::Usage(format!(
            "{option} {cpus}: {} has no CPU {bad}; its CPUs are {all}",
            m.name()
        )));
    }
    let r = m.restrict(cpus);
    if r.available().is_empty() {
        return Err(Failure::Usage(format!(
            "{option} {cpus}: none of these CPUs of {} is available; its available CPUs are {}",
            m.name(),
            m.available()
        )));
    }
    Ok(r)
}

pub(crate) fn cpulist(text: &str) -> Result<CpuList, Failure> {
    CpuList::parse(text).map_err(|e| Failure::Usage(e.to_string()))
}

/// `--restrict` as given: a CPU list for every node, and lists for single nodes
/// (`NODE=CPULIST`), as a job's cpuset differs from node to node.
pub(crate) struct Restrictions {
    all: Option<CpuList>,
    per_node: Vec<(String, CpuList)>,
}

impl Restrictions {
    pub(crate) fn parse(given: &[String]) -> Result<Restrictions, Failure> {
        let mut all = None;
        let mut per_node = Vec::new();
        for r in given {
            match r.split_once('=') {
                Some((node, list)) => per_node.push((node.to_string(), cpulist(list)?)),
                None => all = Some(cpulist(r)?),
            }
        }
        Ok(Restrictions { all, per_node })
    }

    /// Refuses a NODE that names none of the `count` nodes: a name from `names`, or an index
    /// below `count`.
    pub(crate) fn check(&self, names: Option<&[String]>, count: usize) -> Result<(), Failure> {
        for (node, list) in &self.per_node {
            let named = names.is_some_and(|n| n.iter().any(|n| n == node));
            let indexed = node.parse::<usize>().is_ok_and(|k| k < count);
            if !named && !indexed {
                let way = if names.is_some() {
                    format!("a name from --node-names or an index 0-{}", count - 1)
                } else {
                    format!("an index 0-{} (or give --node-names)", count - 1)
                };
                return Err(Failure::Usage(format!(
                    "--restrict {node}={list}: {node} is not one of the {count} node(s); name \
                     the node by {way}"
                )));
            }
        }
        Ok(())
    }

    /// Node `index`'s own restriction (the last one given for its name or index).
    pub(crate) fn own(&self, index: usize, name: Option<&str>) -> Option<&CpuList> {
        self.per_node
            .iter()
            .rev()
            .find(|(n, _)| Some(n.as_str()) == name || n.parse::<usize>().is_ok_and(|k| k == index))
            .map(|(_, r)| r)
    }

    /// The restriction for every node.
    pub(crate) fn all(&self) -> Option<&CpuList> {
        self.all.as_ref()
    }
}

/// The nodes of a preview: their distinct machines (each --topology, restricted), which
/// machine each node is, and their names (--node-names).
#[derive(Clone)]
pub(crate) struct Nodes {
    machines: Vec<Machine>,
    of_node: Vec<usize>,
    pub(crate) names: Option<Vec<String>>,
}

impl Nodes {
    /// One machine per node, in node order.
    pub(crate) fn list(&self) -> Vec<&Machine> {
        self.of_node.iter().map(|&k| &self.machines[k]).collect()
    }

    /// The distinct machines (a node's own restriction makes it one of them).
    pub(crate) fn machines(&self) -> &[Machine] {
        &self.machines
    }

    /// Which of [`Self::machines`] each node is, in node order.
    pub(crate) fn machine_of(&self) -> &[usize] {
        &self.of_node
    }
}

impl Nodes {
    /// The same nodes with node `n` limited to `cpus[n]` (OS indexes) where given; nodes of one
    /// machine and one list keep sharing one machine.
    pub(crate) fn narrowed(&self, cpus: &[Option<CpuList>]) -> Nodes {
        let mut machines: Vec<Machine> = Vec::new();
        let mut seen: Vec<(usize, Option<&CpuList>)> = Vec::new();
        let mut of_node = Vec::with_capacity(self.of_node.len());
        for (n, &k) in self.of_node.iter().enumerate() {
            let key = (k, cpus.get(n).and_then(Option::as_ref));
            let at = match seen.iter().position(|s| *s == key) {
                Some(at) => at,
                None => {
                    let m = &self.machines[k];
                    machines.push(key.1.map_or_else(|| m.clone(), |c| m.restrict(c)));
                    seen.push(key);
                    seen.len() - 1
                }
            };
            of_node.push(at);
        }
        Nodes {
            machines,
            of_node,
            names: self.names.clone(),
        }
    }

    /// The available CPUs of each distinct machine (as [`Self::machines`]), as Slurm counts
    /// them (`unit`: threads or cores).
    pub(crate) fn cpus(&self, unit: CpuUnit) -> Vec<u32> {
        self.machines
            .iter()
            .map(|m| {
                let logical: Vec<u32> = (0..m.pus().len() as u32)
                    .filter(|&p| m.pus()[p as usize].available)
                    .collect();
                cpus_covered(m, &logical, unit)
            })
            .collect()
    }
}

/// The nodes of `lama map`: each --topology (or one for --nodes identical nodes), their names,
/// and each node's --restrict.
pub(crate) fn nodes_of(args: &MapArgs) -> Result<Nodes, Failure> {
    let restrict = Restrictions::parse(&args.restrict)?;
    // No --topology: this machine, as `lama map` run on the node would see it.
    let host = ["host".to_string()];
    let topologies = if args.topologies.is_empty() {
        &host[..]
    } else {
        &args.topologies[..]
    };
    let mut machines = Vec::with_capacity(topologies.len());
    for t in topologies {
        machines.push(load(t)?);
    }
    if topologies.iter().any(|t| t == "host") {
        note_host_stands_in();
    }
    let count = match (args.nodes, machines.len()) {
        (None, k) => k,
        (Some(0), _) => return Err(Failure::Usage("--nodes must be at least 1".into())),
        (Some(n), 1) => n as usize,
        (Some(n), k) if n as usize == k => k,
        (Some(n), k) => {
            return Err(Failure::Usage(format!(
                "--nodes {n} with {k} --topology options: give one --topology for {n} identical \
                 nodes, or one --topology per node without --nodes"
            )))
        }
    };
    let names = match &args.node_names {
        Some(list) => {
            let names = hostlist::expand(list).map_err(Failure::Usage)?;
            if names.len() != count {
                return Err(Failure::Usage(format!(
                    "--node-names names {} node(s) but there are {} (one name per node, in \
                     --topology order)",
                    names.len(),
                    count
                )));
            }
            Some(names)
        }
        None => None,
    };
    restrict.check(names.as_deref(), count)?;
    if let Some(k) = args.node.filter(|&k| k as usize >= count) {
        return Err(Failure::Usage(format!(
            "--node {k}: the placement has {count} node(s), 0 to {}",
            count - 1
        )));
    }
    // The restriction for every node applies to each --topology once; a node with its own
    // gets a machine of its own.
    let mut machines = machines
        .into_iter()
        .map(|m| match restrict.all() {
            Some(r) => restricted(m, r, "--restrict"),
            None => Ok(m),
        })
        .collect::<Result<Vec<_>, _>>()?;
    let mut of_node: Vec<usize> = (0..count).map(|n| n.min(machines.len() - 1)).collect();
    for (n, k) in of_node.iter_mut().enumerate() {
        let name = names.as_ref().map(|v| v[n].as_str());
        if let Some(r) = restrict.own(n, name) {
            let label = match name {
                Some(name) => format!("--restrict (node {n}, {name})"),
                None => format!("--restrict (node {n})"),
            };
            machines.push(restricted(machines[*k].clone(), r, &label)?);
            *k = machines.len() - 1;
        }
    }
    Ok(Nodes {
        machines,
        of_node,
        names,
    })
}

/// What Slurm counts as one CPU on the previewed nodes (--cpu-unit).
pub(crate) fn cpu_unit(args: &MapArgs) -> CpuUnit {
    if args.cpu_unit == "core" {
        CpuUnit::Core
    } else {
        CpuUnit::Thread
    }
}

/// Says, outside a job step on a compute node (no `SLURMD_NODENAME`), that this machine stands
/// for the previewed nodes: a login node's topology is seldom a compute node's.
fn note_host_stands_in() {
    if std::env::var_os("SLURMD_NODENAME").is_some() {
        return;
    }
    let name = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .unwrap_or_else(|_| "this machine".to_string());
    eprintln!(
        "lama: note: {name} (--topology host, the default) stands for every node previewed; \
         from a login node, give a compute node's XML: --topology NODE.xml (lama export on \
         the node)"
    );
}

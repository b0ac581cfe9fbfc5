//! `lama map --slurm` and `--compare`: what Slurm itself gives each task of a line without
//! LAMA (the step's cores as the step manager picks them, each task's binding as
//! task/affinity lays it out; `lama_slurm::own`), alone or beside the LAMA layout's, with how
//! many tasks share a core, a cache or a NUMA node either way.

use crate::map_args::MapArgs;
use crate::nodes::{nodes_of, Nodes};
use crate::output::{self, picture_for, print, print_human, ROW_BESIDES_PICTURE};
use crate::ranks::{lama_order, rank_split};
use crate::Failure;
use lama_engine::{render, CpuList, CpuUnit, Level, Machine, Placement};
use lama_slurm::distribution::Distribution;
use lama_slurm::own::{self, Ask, CpuBind, Own, SocketDist, SrunBinding};

/// Slurm's placement of one node's tasks.
pub(crate) struct NodeOwn {
    /// The node's index.
    node: usize,
    /// Its tasks' global ranks, ascending (the node's task order).
    ranks: Vec<u32>,
    /// What Slurm gives them.
    own: Own,
}

/// Slurm's own placement on every node of the preview, and the notes on how it was read.
pub(crate) fn slurm_side(
    args: &MapArgs,
    nodes: &Nodes,
    unit: CpuUnit,
) -> Result<(Vec<NodeOwn>, Vec<String>), Failure> {
    if lama_order(args) {
        return Err(Failure::Usage(
            "-m arbitrary places by a hostfile, which Slurm's own placement has not: give \
             block, cyclic or plane=P"
                .into(),
        ));
    }
    let usage = |e: String| Failure::Usage(e);
    let (base, ask, notes) = ask_of(args, unit).map_err(usage)?;
    let split = rank_split(args, nodes, unit)?;
    let ranks = match &split {
        Some(s) => s.ranks.clone(),
        None => vec![(0..args.np).collect()],
    };
    let list = nodes.list();
    let mut out = Vec::with_capacity(ranks.len());
    for (node, ranks) in ranks.into_iter().enumerate() {
        if ranks.is_empty() {
            continue;
        }
        let ask = Ask {
            tasks: ranks.len() as u32,
            ..ask.clone()
        };
        let own = own::place(list[node], &ask)
            .map_err(|e| Failure::Place(format!("node {node} ({}): {e}", list[node].name())))?;
        out.push(NodeOwn { node, ranks, own });
    }
    let mut notes = notes;
    notes.insert(0, base);
    let gpu_options = [
        args.gpus_per_task.is_some(),
        args.gpu_bind.is_some(),
        args.gpus.is_some(),
    ];
    if gpu_options.contains(&true) || args.ntasks_per_gpu.is_some() {
        notes.push(
            "GPU options: left out (they choose each task's GPUs, not the CPUs task/affinity \
             binds it to)"
                .into(),
        );
    }
    Ok((out, notes))
}

/// The step's ask from lama map's options (the tasks of each node filled in later), a line
/// saying what srun is asked, and notes.
pub(crate) fn ask_of(args: &MapArgs, unit: CpuUnit) -> Result<(String, Ask, Vec<String>), String> {
    let (_, inside) = Distribution::parse(args.distribution.as_deref().unwrap_or("block"))?;
    let plane = args
        .distribution
        .as_deref()
        .is_some_and(|d| d.starts_with("plane"));
    let (cpu_bind, threads_per_core, notes) = own::srun_binding(SrunBinding {
        cpu_bind: args.cpu_bind.as_deref(),
        hint: args.hint.as_deref(),
        threads_per_core: args.threads_per_core,
        ntasks_per_core: args.ntasks_per_core,
        ntasks_per_socket: args.ntasks_per_socket,
    })?;
    let site_default = match args.default_cpu_bind.as_deref() {
        Some(text) => CpuBind::parse(text)?,
        None => None,
    };
    let autobind = match args.autobind.as_deref() {
        Some(k @ ("threads" | "cores" | "sockets")) => CpuBind::parse(k)?,
        Some(other) => {
            return Err(format!(
                "--autobind {other}: TaskPluginParam's autobind is threads, cores or sockets"
            ))
        }
        None => None,
    };
    let ask = Ask {
        tasks: 0,
        cpus_per_task: args.c_given.then_some(args.cpus_per_task),
        exact: args.exact,
        cpu_bind,
        site_default,
        autobind,
        threads_per_core,
        ntasks_per_core: args.ntasks_per_core,
        ntasks_per_socket: args.ntasks_per_socket,
        dist: SocketDist::parse(inside)?,
        plane,
        overcommit: args.oversubscribe,
        cpus_count_cores: unit == CpuUnit::Core,
    };
    let base = format!(
        "Slurm's own placement (no LAMA): srun -n {} -m {}{}{}{}, as task/affinity binds a job \
         that holds its nodes' CPUs{} (ConstrainCores=yes)",
        args.np,
        args.distribution.as_deref().unwrap_or("block"),
        if args.exact { " --exact" } else { "" },
        if args.c_given {
            format!(" -c {}", args.cpus_per_task)
        } else {
            String::new()
        },
        args.cpu_bind
            .as_deref()
            .map_or(String::new(), |b| format!(" --cpu-bind={b}")),
        if args.restrict.is_empty() {
            ""
        } else {
            " given by --restrict"
        },
    );
    Ok((base, ask, notes))
}

/// The CPUs of each node's step where `-c` (or `--exact`) makes it exact, as the step
/// manager picks them, for the plugin's preview: the plugin places within the step's cgroup.
/// `None` when the step has every CPU of the job; else each node's CPUs (OS indexes) and a
/// note, which says where a node is outside the model (its job's CPUs are kept there).
pub(crate) fn exact_steps(
    args: &MapArgs,
    nodes: &Nodes,
    ranks: &[Vec<u32>],
    unit: CpuUnit,
) -> Option<(Vec<Option<CpuList>>, String)> {
    if !(args.c_given || args.exact) {
        return None;
    }
    let list = nodes.list();
    let mut cpus = vec![None; list.len()];
    let mut said = Vec::new();
    let dist = ask_of(args, unit).ok().and_then(|(_, a, _)| a.dist);
    for (node, ranks) in ranks.iter().enumerate() {
        let m = list[node];
        let ask = Ask {
            tasks: ranks.len() as u32,
            cpus_per_task: Some(args.cpus_per_task),
            exact: true,
            threads_per_core: None,
            cpus_count_cores: unit == CpuUnit::Core,
            dist,
            overcommit: args.oversubscribe,
            ..Ask::default()
        };
        if ranks.is_empty() {
            continue;
        }
        match own::step_cpus(m, &ask) {
            Ok(step) if step.len() < m.available().len() => {
                said.push(format!("node {node} CPUs {}", os_list(m, &step)));
                cpus[node] = Some(os_cpus(m, &step));
            }
            Ok(_) => {}
            Err(e) => said.push(format!("node {node}: {e}; placed on the job's CPUs")),
        }
    }
    if said.is_empty() {
        return None;
    }
    Some((
        cpus,
        format!(
            "{} makes the step exact: Slurm gives it only the cores its tasks need, and the \
             plugin places within them ({}; give other CPUs with --restrict)",
            if args.c_given { "-c" } else { "--exact" },
            said.join(", ")
        ),
    ))
}

/// `lama map --slurm`: Slurm's own placement alone.
pub(crate) fn show(args: &MapArgs, unit: CpuUnit) -> Result<(), Failure> {
    let nodes = nodes_of(args)?;
    let (side, notes) = slurm_side(args, &nodes, unit)?;
    let names = nodes.names.as_deref();
    if args.json {
        return print(&json(&nodes, &side, names, &notes));
    }
    let list = nodes.list();
    let mode = picture_for(args.picture, nodes.machines(), ROW_BESIDES_PICTURE - 20);
    let mut out: String = notes.iter().map(|n| format!("{n}\n")).collect();
    out.push_str(&format!(
        "{}\n",
        sharing_line(
            "summary: tasks sharing",
            &counts(&list, &bindings_of(&side))
        )
    ));
    let mut table = tables(&side, &list, names, mode);
    // A compact picture naming many packages may still be wider than the terminal: then the
    // socket, NUMA and core columns say where, without a picture.
    let too_wide = |t: &str| {
        output::terminal_columns().is_some_and(|w| {
            t.lines()
                .any(|l| l.starts_with(' ') && l.chars().count() > w)
        })
    };
    if args.picture != output::PictureWhen::Always && too_wide(&table) {
        table = tables(&side, &list, names, render::PictureMode::None);
    }
    out.push_str(&table);
    print_human(&out)
}

/// Each node's table of Slurm's own placement, with `mode`'s picture.
fn tables(
    side: &[NodeOwn],
    list: &[&Machine],
    names: Option<&[String]>,
    mode: render::PictureMode,
) -> String {
    let mut out = String::new();
    for n in side {
        let m = list[n.node];
        out.push_str(&format!(
            "\nnode {}: {} ({} PUs; the step's CPUs: {}); Slurm's binding: {}\n",
            n.node,
            name_of(names, n.node, m),
            m.pus().len(),
            os_list(m, &n.own.step),
            n.own.how
        ));
        let picture = if mode == render::PictureMode::None {
            ""
        } else {
            "picture"
        };
        out.push_str(&format!(
            "  rank  bound (OS)     socket NUMA core    {picture}\n"
        ));
        for (rank, cpus) in n.ranks.iter().zip(&n.own.tasks) {
            let row = format!(
                "  {rank:>4}  {:<13}  {:<19} {}",
                os_list(m, cpus),
                where_of(m, cpus),
                render::picture_cell(mode, m, cpus)
            );
            out.push_str(row.trim_end());
            out.push('\n');
        }
    }
    out
}

/// `lama map --compare`: Slurm's own placement and the LAMA layout's, rank by rank, and the
/// tasks that share a core, a cache or a NUMA node either way.
pub(crate) fn compare(
    args: &MapArgs,
    nodes: &Nodes,
    lama: &Placement<'_>,
    unit: CpuUnit,
) -> Result<(), Failure> {
    let (side, notes) = slurm_side(args, nodes, unit)?;
    let names = nodes.names.as_deref();
    let list = nodes.list();
    let r = lama.request();
    let mut out: String = notes.iter().map(|n| format!("{n}\n")).collect();
    out.push_str(&format!(
        "LAMA: layout {}  binding {}  (--lama-map={} on the same line)\n",
        r.layout, r.bind, r.layout
    ));
    let slurm = counts(&list, &bindings_of(&side));
    let lama_bindings = lama_bindings(lama);
    let theirs = counts(&list, &lama_bindings);
    out.push_str("\ntasks sharing          Slurm   LAMA\n");
    for ((what, s), (_, l)) in slurm.iter().zip(&theirs) {
        out.push_str(&format!("  {what:<20} {s:>5}  {l:>5}\n"));
    }
    for n in &side {
        let m = list[n.node];
        out.push_str(&format!(
            "\nnode {}: {}\n  rank  Slurm (OS)    socket NUMA core    LAMA (OS)     socket NUMA core\n",
            n.node,
            name_of(names, n.node, m)
        ));
        for (rank, cpus) in n.ranks.iter().zip(&n.own.tasks) {
            let theirs = &lama_bindings[*rank as usize].1;
            out.push_str(&format!(
                "  {rank:>4}  {:<13} {:<19} {:<13} {}\n",
                os_list(m, cpus),
                where_of(m, cpus),
                os_list(m, theirs),
                where_of(m, theirs)
            ));
        }
    }
    print_human(&out)
}

/// Every task's (node, logical PUs), in rank order, from Slurm's side.
fn bindings_of(side: &[NodeOwn]) -> Vec<(usize, Vec<u32>)> {
    let mut all: Vec<(u32, usize, Vec<u32>)> = side
        .iter()
        .flat_map(|n| {
            n.ranks
                .iter()
                .zip(&n.own.tasks)
                .map(move |(r, t)| (*r, n.node, t.clone()))
        })
        .collect();
    all.sort_by_key(|(r, _, _)| *r);
    all.into_iter().map(|(_, n, t)| (n, t)).collect()
}

/// Every rank's (node, logical PUs) of a LAMA placement; an unbound rank has its node's
/// available PUs.
fn lama_bindings(p: &Placement<'_>) -> Vec<(usize, Vec<u32>)> {
    (0..p.len())
        .map(|rank| {
            let node = p.processes()[rank].node as usize;
            let bound = p.bound_pus(rank);
            let m = p.nodes()[node];
            let pus = if bound.is_empty() {
                (0..m.pus().len() as u32)
                    .filter(|&i| m.pus()[i as usize].available)
                    .collect()
            } else {
                bound
            };
            (node, pus)
        })
        .collect()
}

/// The levels whose sharing is counted, with their names.
const SHARED: [(Level, &str); 4] = [
    (Level::Core, "a core"),
    (Level::L3, "an L3 cache"),
    (Level::Numa, "a NUMA node"),
    (Level::Socket, "a socket"),
];

/// For each level of [`SHARED`]: how many tasks may run on an object of that level that
/// another task of the same node may run on too.
fn counts(nodes: &[&Machine], tasks: &[(usize, Vec<u32>)]) -> Vec<(&'static str, usize)> {
    SHARED
        .iter()
        .map(|&(level, what)| {
            let objects = |node: usize, pus: &[u32]| -> Vec<usize> {
                let objs = nodes[node].objects(level);
                let mut o: Vec<usize> = pus
                    .iter()
                    .filter_map(|pu| objs.iter().position(|x| x.pus.contains(pu)))
                    .collect();
                o.sort_unstable();
                o.dedup();
                o
            };
            let touched: Vec<(usize, Vec<usize>)> =
                tasks.iter().map(|(n, p)| (*n, objects(*n, p))).collect();
            let shared = touched
                .iter()
                .enumerate()
                .filter(|(i, (n, objs))| {
                    touched.iter().enumerate().any(|(j, (m, other))| {
                        j != *i && m == n && objs.iter().any(|o| other.contains(o))
                    })
                })
                .count();
            (what, shared)
        })
        .collect()
}

/// One line of the sharing counts.
fn sharing_line(head: &str, counts: &[(&str, usize)]) -> String {
    let parts: Vec<String> = counts.iter().map(|(w, n)| format!("{w} {n}")).collect();
    format!("{head}: {}", parts.join(", "))
}

/// The OS indexes of logical PUs `pus` of `m`.
fn os_cpus(m: &Machine, pus: &[u32]) -> CpuList {
    CpuList::from_cpus(pus.iter().map(|&p| m.pus()[p as usize].os))
}

/// The OS indexes of logical PUs, as a CPU list's text.
fn os_list(m: &Machine, pus: &[u32]) -> String {
    os_cpus(m, pus).to_string()
}

/// The sockets, NUMA nodes and cores a binding spans (`s0 N0-1 c0-3`).
fn where_of(m: &Machine, pus: &[u32]) -> String {
    let span = |level: Level, tag: &str| {
        let idx: Vec<u32> = m
            .objects(level)
            .iter()
            .enumerate()
            .filter(|(_, o)| pus.iter().any(|p| o.pus.contains(p)))
            .map(|(i, _)| i as u32)
            .collect();
        if idx.is_empty() {
            String::new()
        } else {
            format!("{tag}{}", CpuList::from_cpus(idx))
        }
    };
    format!(
        "{:<5} {:<5} {}",
        span(Level::Socket, "s"),
        span(Level::Numa, "N"),
        span(Level::Core, "c")
    )
}

fn name_of(names: Option<&[String]>, node: usize, m: &Machine) -> String {
    names
        .and_then(|n| n.get(node))
        .map_or_else(|| m.name().to_string(), |n| format!("{n} ({})", m.name()))
}

/// `--slurm --json`: `{"processes":[{"rank","node","cpus"}],"nodes":[{"node","name",
/// "step_cpus","binding"}],"notes":[...]}`, CPUs as OS indexes.
fn json(nodes: &Nodes, side: &[NodeOwn], names: Option<&[String]>, notes: &[String]) -> String {
    let list = nodes.list();
    let os = |m: &Machine, pus: &[u32]| os_cpus(m, pus).cpus().to_vec();
    let mut processes: Vec<serde_json::Value> =
        side.iter()
            .flat_map(|n| {
                let m = list[n.node];
                n.ranks.iter().zip(&n.own.tasks).map(
                    move |(r, t)| serde_json::json!({"rank": r, "node": n.node, "cpus": os(m, t)}),
                )
            })
            .collect();
    processes.sort_by_key(|p| p["rank"].as_u64());
    // Every node, at its index; those with tasks with the step's CPUs and how Slurm binds.
    let node_list: Vec<serde_json::Value> = list
        .iter()
        .enumerate()
        .map(|(i, m)| {
            let name = names
                .and_then(|x| x.get(i))
                .map_or(m.name(), |s| s.as_str());
            match side.iter().find(|n| n.node == i) {
                Some(n) => serde_json::json!({
                    "node": i,
                    "name": name,
                    "step_cpus": os(m, &n.own.step),
                    "binding": n.own.how,
                }),
                None => serde_json::json!({"node": i, "name": name}),
            }
        })
        .collect();
    let v = serde_json::json!({"slurm": true, "processes": processes, "nodes": node_list, "notes": notes});
    format!("{v}\n")
}

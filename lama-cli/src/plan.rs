//! `lama plan`: communication-aware placement with Scotch, guarded by LAMA layouts, written as a
//! plan for `srun --lama-plan` and a `SLURM_HOSTFILE` for `srun -m arbitrary`.

use crate::json::JsonProcess;
use crate::nodes::{load, restricted, Restrictions};
use crate::output::{picture_for, print, print_human};
use crate::Failure;
use clap::Args;
use lama_engine::{render, CpuList, Machine};
use lama_plan::cost::{Distances, System};
use lama_plan::hostlist;
use lama_plan::matrix::{CommMatrix, Format};
use lama_plan::network::Network;
use lama_plan::traffic;
use lama_plan::Unit;
use lama_planfile::{PlanFile, PlannedRank};
use lama_planfile::{MAX_INLINE_PLAN_BYTES, MAX_PLAN_BYTES};
use std::collections::HashMap;
use std::path::PathBuf;

/// Largest matrix or topology.conf file read.
const MAX_INPUT_BYTES: u64 = 256 << 20;

#[derive(Args, Debug)]
#[command(
    after_help = "Example:\n  lama plan --matrix comm.mat --np 96 --topology /etc/slurm/topology/%n.xml \\\n            \
                        --node-names node[1-4] --network /etc/slurm/topology.conf --out plan\n  \
                        SLURM_HOSTFILE=plan.hosts srun -m arbitrary -n96 --lama-plan=plan.lama ./app"
)]
pub(crate) struct PlanArgs {
    /// The communication matrix: a dense square matrix (one row per line) or `i j volume`
    /// lines (a plain `src dst bytes` dump is this format), `#` comments; made symmetric
    /// (M + Mᵀ). With --format ompi: the directory of the `*.prof` files Open MPI's monitoring
    /// wrote (OMPI_MCA_pml_monitoring_enable=2, OMPI_MCA_pml_monitoring_enable_output=3,
    /// OMPI_MCA_pml_monitoring_filename=DIR/prof), or one such file.
    #[arg(long, value_name = "FILE|DIR")]
    matrix: PathBuf,
    /// The matrix's format; ompi reads Open MPI's monitoring files (their point-to-point `E`
    /// lines).
    #[arg(long, value_name = "auto|dense|sparse|ompi", default_value = "auto",
          value_parser = ["auto", "dense", "sparse", "ompi"], hide_short_help = true)]
    format: String,
    /// Number of ranks (the matrix must describe exactly that many).
    #[arg(long, short = 'n', value_name = "NP")]
    np: u32,
    /// The nodes' topologies: an hwloc XML file, a synthetic description or `host` (this
    /// machine); `%n` is replaced by each node's name. One for all nodes, or one per node in
    /// --node-names order, as lama map's. [default: host]
    #[arg(long = "topology", value_name = "T")]
    topologies: Vec<String>,
    /// The nodes' names, as a Slurm hostlist (node[1-4], or "$SLURM_JOB_NODELIST" in a job),
    /// as lama map's --node-names. [default: this host's name, for one node]
    #[arg(long = "node-names", value_name = "HOSTLIST")]
    node_names: Option<String>,
    /// How many nodes, as lama map's and srun's -N (checked against --node-names).
    #[arg(long, short = 'N', value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    nodes: Option<u32>,
    /// The CPUs the job has (OS indexes): CPULIST for every node, or NODE=CPULIST per node
    /// (repeat it), as a partial allocation's cpusets.
    #[arg(long, value_name = "[NODE=]CPULIST", hide_short_help = true)]
    restrict: Vec<String>,
    /// The ranks form this Cartesian grid (sizes as MPI_Dims_create gives them, e.g. 48x44 or
    /// 16x12x11; ranks numbered as MPI_Cart_create numbers them, the last size fastest): the
    /// stencil path cuts the grid into boxes along the machine. Without it, a matrix whose
    /// pairs are all grid neighbours is recognised as a grid.
    #[arg(long, value_name = "D0xD1[xD2]", hide_short_help = true)]
    grid: Option<String>,
    /// Slurm's topology.conf (topology/tree); without it every node hangs off one switch.
    #[arg(long, value_name = "FILE")]
    network: Option<PathBuf>,
    /// What each rank is bound to: its core or its hardware thread.
    #[arg(long, value_name = "core|hwthread", default_value = "core",
          value_parser = ["core", "hwthread"])]
    bind: String,
    /// Costs of the levels, overriding the defaults: e.g. switch=1000,farther=4000 (levels core
    /// l2 l3 numa package node switch farther).
    #[arg(long, value_name = "LEVEL=COST,...", hide_short_help = true)]
    distances: Option<String>,
    /// Print the cost model and every candidate's cost.
    #[arg(long, hide_short_help = true)]
    explain: bool,
    /// The summary (and with --explain the candidates) without the table of ranks, for plans
    /// of many ranks.
    #[arg(long, conflicts_with = "json")]
    summary: bool,
    /// Write PREFIX.lama (for --lama-plan) and PREFIX.hosts (for SLURM_HOSTFILE).
    #[arg(long, value_name = "PREFIX")]
    out: Option<PathBuf>,
    /// Machine-readable output: {"processes":[...],"cost":{...}}.
    #[arg(long)]
    json: bool,
    /// The table's picture column, as lama map's: auto (full, or compact on a terminal too
    /// narrow for it), always, compact or never.
    #[arg(long, value_enum, value_name = "WHEN", default_value_t = crate::output::PictureWhen::Auto, hide_short_help = true)]
    picture: crate::output::PictureWhen,
}

/// The plan's nodes: --node-names, else this host alone; -N must agree.
fn node_names(args: &PlanArgs) -> Result<Vec<String>, Failure> {
    let names = match &args.node_names {
        Some(list) => hostlist::expand(list).map_err(Failure::Usage)?,
        None if args.nodes.unwrap_or(1) == 1 => {
            let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
            vec![host
                .trim()
                .split('.')
                .next()
                .unwrap_or("localhost")
                .to_string()]
        }
        None => {
            return Err(Failure::Usage(format!(
                "-N {}: a plan names its nodes: give --node-names (node[1-{}], or \
                 \"$SLURM_JOB_NODELIST\" in a job)",
                args.nodes.unwrap_or(1),
                args.nodes.unwrap_or(1)
            )))
        }
    };
    match args.nodes {
        Some(n) if n as usize != names.len() => Err(Failure::Usage(format!(
            "-N {n} but --node-names names {} node(s): give one or make them agree",
            names.len()
        ))),
        _ => Ok(names),
    }
}

fn read(path: &PathBuf, what: &str) -> Result<String, Failure> {
    let meta = std::fs::metadata(path)
        .map_err(|e| Failure::Usage(format!("{what} {}: {e}", path.display())))?;
    if meta.len() > MAX_INPUT_BYTES {
        return Err(Failure::Usage(format!(
            "{what} {} is {} bytes; at most {MAX_INPUT_BYTES} are read",
            path.display(),
            meta.len()
        )));
    }
    std::fs::read_to_string(path)
        .map_err(|e| Failure::Usage(format!("{what} {}: {e}", path.display())))
}

/// Open MPI's monitoring files: every `*.prof` file of a directory, or one file.
fn monitoring(path: &PathBuf, np: u32) -> Result<CommMatrix, Failure> {
    let mut paths: Vec<PathBuf> = Vec::new();
    if path.is_dir() {
        let entries = std::fs::read_dir(path)
            .map_err(|e| Failure::Usage(format!("matrix {}: {e}", path.display())))?;
        for entry in entries.flatten() {
            let p = entry.path();
            if p.is_file() && p.to_string_lossy().ends_with(traffic::SUFFIX) {
                paths.push(p);
            }
        }
        paths.sort();
        if paths.is_empty() {
            return Err(Failure::Usage(format!(
                "{} holds no *{} file; {}",
                path.display(),
                traffic::SUFFIX,
                traffic::HOW
            )));
        }
    } else {
        paths.push(path.clone());
    }
    let mut files = Vec::with_capacity(paths.len());
    for p in &paths {
        files.push((p.display().to_string(), read(p, "monitoring file")?));
    }
    traffic::read_monitoring(&files, np).map_err(|e| Failure::Usage(e.to_string()))
}

pub(crate) fn run(args: PlanArgs) -> Result<(), Failure> {
    let names = checked_names(&args)?;
    let matrix = read_matrix(&args)?;
    let network = match &args.network {
        Some(p) => Network::parse(&read(p, "network")?)
            .map_err(|e| Failure::Usage(format!("{}:{}: {}", p.display(), e.line, e.message)))?,
        None => Network::single_switch(&names),
    };
    let distances = match &args.distances {
        Some(d) => Distances::parse(d).map_err(|e| Failure::Usage(format!("--distances: {e}")))?,
        None => Distances::default(),
    };
    let machines = node_machines(&args, &names)?;
    let refs: Vec<&Machine> = machines.iter().collect();
    let paths: Vec<Vec<usize>> = names
        .iter()
        .map(|n| {
            network.path(n).ok_or_else(|| {
                Failure::Usage(format!("node {n} is under no switch of the network file"))
            })
        })
        .collect::<Result<_, _>>()?;
    let system = System::new(refs.clone(), &names, &network, distances).map_err(Failure::Usage)?;
    let unit = if args.bind == "hwthread" {
        Unit::Hwthread
    } else {
        Unit::Core
    };
    let grid = args
        .grid
        .as_deref()
        .map(|g| lama_plan::stencil::Grid::parse(g, matrix.ranks()))
        .transpose()
        .map_err(Failure::Usage)?;
    let layouts = lama_plan::guard_layouts();
    let plan = lama_plan::plan_on(&matrix, &system, &paths, unit, &layouts, grid.as_ref())
        .map_err(Failure::Place)?;
    let file = plan_file(&plan, &names, &refs);
    if let Some(prefix) = &args.out {
        write_plan(&file, prefix)?;
    }
    if args.json {
        return print(&json(&plan, &file));
    }
    let mut out = summary(&plan, unit);
    if args.explain {
        out += &explain(&plan, distances);
    }
    if !args.summary {
        let picture = picture_for(args.picture, refs.iter().copied(), 40);
        out += &table(&plan, &names, &refs, picture);
    }
    if let Some(prefix) = &args.out {
        out += &format!(
            "\nwrote {p}.lama and {p}.hosts; run:\n  SLURM_HOSTFILE={p}.hosts srun -m arbitrary -n{} --lama-plan={p}.lama ./app\n",
            plan.ranks.len(),
            p = prefix.display()
        );
    }
    print_human(&out)
}

/// The nodes' names (--node-names, else -N's), each a node name, each once.
fn checked_names(args: &PlanArgs) -> Result<Vec<String>, Failure> {
    // A bare number names no node: it is -N's.
    if let Some(n) = args
        .node_names
        .as_ref()
        .filter(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
    {
        return Err(Failure::Usage(format!(
            "--node-names {n}: the nodes' names, not their count (a hostlist such as \
             node[1-{n}], or \"$SLURM_JOB_NODELIST\" in a job); the count is -N {n}"
        )));
    }
    let names = node_names(args)?;
    if let Some(bad) = names.iter().find(|n| !lama_planfile::valid_node_name(n)) {
        return Err(Failure::Usage(format!(
            "{} is not a node name (letters, digits, '.', '_', '-')",
            lama_plan::matrix::window(bad)
        )));
    }
    let mut seen = std::collections::HashSet::new();
    if let Some(dup) = names.iter().find(|n| !seen.insert(n.as_str())) {
        return Err(Failure::Usage(format!(
            "--node-names names {dup} twice: each node once (two entries would give two ranks the \
             same CPU)"
        )));
    }
    Ok(names)
}

/// The communication matrix: Open MPI's monitoring files, or a dense or sparse text matrix.
fn read_matrix(args: &PlanArgs) -> Result<CommMatrix, Failure> {
    let format = match args.format.as_str() {
        "dense" => Format::Dense,
        "sparse" => Format::Sparse,
        _ => Format::Auto,
    };
    let matrix = if args.format == "ompi" {
        monitoring(&args.matrix, args.np)?
    } else {
        let text = read(&args.matrix, "matrix")?;
        CommMatrix::parse(&text, format, Some(args.np)).map_err(|e| {
            Failure::Usage(format!(
                "{}:{}: {}",
                args.matrix.display(),
                e.line,
                e.message
            ))
        })?
    };
    Ok(matrix)
}

/// Each node's machine: its --topology (one for all, `%n` the node's name, or one per node),
/// loaded once per distinct topology, with --restrict's CPUs for all and for the node.
fn node_machines(args: &PlanArgs, names: &[String]) -> Result<Vec<Machine>, Failure> {
    // Per-node restrictions: CPULIST for all, NODE=CPULIST for one.
    let restrict = Restrictions::parse(&args.restrict)?;
    restrict.check(Some(names), names.len())?;
    let host = ["host".to_string()];
    let topologies = if args.topologies.is_empty() {
        &host[..]
    } else {
        &args.topologies[..]
    };
    let specs: Vec<String> = match topologies.len() {
        1 => names
            .iter()
            .map(|n| topologies[0].replace("%n", n))
            .collect(),
        k if k == names.len() => topologies.to_vec(),
        k => {
            return Err(Failure::Usage(format!(
                "{k} --topology options for {} nodes: give one (with %n for the node name) or \
                 one per node",
                names.len()
            )))
        }
    };
    let mut machines: Vec<Machine> = Vec::with_capacity(names.len());
    // Nodes of one topology are loaded once (4,174 nodes of one synthetic description took
    // seconds of hwloc set-up and plugin loading, once per node).
    let mut loaded: HashMap<&str, Machine> = HashMap::new();
    for (index, (name, spec)) in names.iter().zip(&specs).enumerate() {
        let mut m = match loaded.get(spec.as_str()) {
            Some(m) => m.clone(),
            None => {
                let m = load(spec)?;
                loaded.insert(spec, m.clone());
                m
            }
        };
        let restrictions = restrict
            .all()
            .into_iter()
            .chain(restrict.own(index, Some(name)));
        for r in restrictions {
            // A CPU the node does not have is a mistake, not a CPU to drop.
            m = restricted(m, r, &format!("--restrict (node {name})"))?;
        }
        machines.push(m);
    }
    Ok(machines)
}

/// The plan as the plan file writes it: each rank's node name, PU and CPUs by OS index.
fn plan_file(plan: &lama_plan::Plan, names: &[String], refs: &[&Machine]) -> PlanFile {
    PlanFile {
        ranks: plan
            .ranks
            .iter()
            .map(|r| {
                let m = refs[r.node as usize];
                PlannedRank {
                    node: names[r.node as usize].clone(),
                    pu: m.pus()[r.pu as usize].os,
                    cpus: CpuList::from_cpus(r.bound.iter().map(|&p| m.pus()[p as usize].os)),
                }
            })
            .collect(),
    }
}

/// --out PREFIX: PREFIX.lama and PREFIX.hosts, refused (nothing written) when the plan is
/// larger than --lama-plan accepts.
fn write_plan(file: &PlanFile, prefix: &std::path::Path) -> Result<(), Failure> {
    let text = file.to_string();
    if text.len() > MAX_PLAN_BYTES {
        return Err(Failure::Place(format!(
            "the plan for {} ranks is {} bytes, but --lama-plan accepts at most \
             {MAX_PLAN_BYTES}: about {} ranks fit; plan fewer ranks per step, or place this \
             job with a layout (srun --lama-map=...). Nothing was written",
            file.ranks.len(),
            text.len(),
            file.ranks_that_fit(MAX_PLAN_BYTES)
        )));
    }
    if text.len() > MAX_INLINE_PLAN_BYTES {
        eprintln!(
            "lama plan: note: the plan is {} KiB, over the {} KiB that travel in the job's \
             environment: each node will read {}.lama itself, as you, so keep it on a file \
             system all the job's nodes mount, unchanged while the job runs",
            text.len() / 1024,
            MAX_INLINE_PLAN_BYTES / 1024,
            prefix.display()
        );
    }
    let with = |ext: &str| {
        let mut p = prefix.to_path_buf().into_os_string();
        p.push(ext);
        PathBuf::from(p)
    };
    for (path, text) in [(with(".lama"), text), (with(".hosts"), file.hostfile())] {
        std::fs::write(&path, text)
            .map_err(|e| Failure::Place(format!("cannot write {}: {e}", path.display())))?;
    }
    Ok(())
}

/// A change in percent, never "-0.0%".
fn percent(cost: f64, of: f64) -> String {
    if of > 0.0 {
        let p = (cost - of) / of * 100.0;
        format!("{:+.1}%", if p.abs() < 0.05 { 0.0 } else { p })
    } else {
        "±0%".to_string()
    }
}

/// A cost as printed: never "-0".
/// A cost as the text shows it: whole costs with their digits grouped by thousands
/// (1,808,084,590), others as they are.
fn cost(v: f64) -> String {
    if v == 0.0 {
        return "0".to_string();
    }
    if v.fract() != 0.0 || v.abs() >= 1e15 {
        return v.to_string();
    }
    let digits = format!("{}", v.abs() as u64);
    let mut out = String::with_capacity(digits.len() + digits.len() / 3 + 1);
    if v < 0.0 {
        out.push('-');
    }
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

fn summary(plan: &lama_plan::Plan, unit: Unit) -> String {
    let count = |n: usize, what: &str| match n {
        0 => None,
        1 => Some(format!("1 {what}")),
        n => Some(format!("{n} {what}s")),
    };
    let steps: Vec<String> = [count(plan.exchanges, "exchange"), count(plan.swaps, "swap")]
        .into_iter()
        .flatten()
        .collect();
    let swaps = match steps.is_empty() {
        true => String::new(),
        false => format!(" (refined by {})", steps.join(" and ")),
    };
    let mut s = format!(
        "plan: {} ranks, binding {}; {}{swaps} wins with cost {}",
        plan.ranks.len(),
        unit.bind(),
        plan.winner,
        cost(plan.cost)
    );
    if let Some(block) = plan.cost_of("csbnh") {
        // The default is a candidate, so the plan never costs more; within 0.05 % it is a tie.
        s += &match block - plan.cost < block.abs() * 0.0005 {
            true => format!(
                "; Slurm's default (-m block, cores in order = csbnh) {} is as good: no plan \
                 needed",
                cost(block)
            ),
            false => format!(
                "; Slurm's default (-m block, cores in order = csbnh) {} ({} for the plan)",
                cost(block),
                percent(plan.cost, block)
            ),
        };
    }
    if let Some((name, best)) = plan.best_layout() {
        s += &format!(
            "; best layout {name} {} ({})",
            cost(best),
            percent(plan.cost, best)
        );
    }
    s.push('\n');
    s
}

fn explain(plan: &lama_plan::Plan, d: Distances) -> String {
    let mut s = format!(
        "\ncost model: the sum over pairs of ranks of volume x distance; the distance of two PUs \
         is the cost of the closest level holding both (the same PU costs 0; where a NUMA \
         node holds several packages, the smaller object costs the smaller distance):\n  {d}\n\
         candidates (Scotch's mapping, the recursive bisection, the multisection with \
         Scotch's partitioner and, on graphs small enough for several starts, its multilevel \
         variant, on a Cartesian grid (--grid, or recognised from the matrix) the \
         stencil path, and the LAMA layouts: the five usual ones, then every other order of \
         the node's levels that places differently); the {} cheapest within {}% of the \
         cheapest refined (-> their cost after it), the cheapest after it the winner:\n",
        lama_plan::REFINED,
        lama_plan::refined_margin(plan.ranks.len()) * 100.0
    );
    let width = plan
        .candidates
        .iter()
        .map(|c| c.name.len())
        .max()
        .unwrap_or(0);
    // A candidate's final cost: after the refinement where it was refined.
    let last = |c: &lama_plan::Candidate| c.cost.as_ref().ok().map(|&v| c.refined.unwrap_or(v));
    // The cheapest other candidate, for the winner's margin.
    let runner_up = plan
        .candidates
        .iter()
        .filter(|c| c.name != plan.winner)
        .filter_map(|c| last(c).map(|v| (c.name.as_str(), v)))
        .min_by(|a, b| a.1.total_cmp(&b.1));
    for c in &plan.candidates {
        s += &match &c.cost {
            Ok(v) => format!(
                "  {:<width$} {}{}{}\n",
                c.name,
                cost(*v),
                c.refined
                    .map(|r| format!(" -> {}", cost(r)))
                    .unwrap_or_default(),
                match runner_up {
                    _ if c.name != plan.winner => String::new(),
                    Some((name, next)) => format!(
                        "  <- the winner ({} against {name})",
                        percent(plan.cost, next)
                    ),
                    None => "  <- the winner".to_string(),
                }
            ),
            Err(e) => format!("  {:<width$} not placed: {e}\n", c.name),
        };
    }
    s += &format!(
        "then {} exchange(s) of groups of ranks and {} swap(s) of ranks lowered the\n\
         cost: the plan costs {}\n",
        plan.exchanges,
        plan.swaps,
        cost(plan.cost)
    );
    s
}

/// What the plan's table columns mean (its picture line is lama map's).
const PLAN_COLUMNS: &str = "columns: mapped PU is the hardware thread the plan chose for the \
    rank, by hwloc's logical index L# and the OS's CPU number P#; bound (OS) is where the rank \
    may run (as in Cpus_allowed_list)";

fn table(
    plan: &lama_plan::Plan,
    names: &[String],
    machines: &[&Machine],
    picture: render::PictureMode,
) -> String {
    let mut s = String::new();
    for (n, m) in machines.iter().enumerate() {
        s += &format!(
            "\nnode {n}: {} ({} PUs, {} available)\n",
            names[n],
            m.pus().len(),
            m.available().len()
        );
        let rows: Vec<[String; 4]> = plan
            .ranks
            .iter()
            .enumerate()
            .filter(|(_, p)| p.node as usize == n)
            .map(|(r, place)| {
                let os = CpuList::from_cpus(place.bound.iter().map(|&p| m.pus()[p as usize].os));
                [
                    r.to_string(),
                    format!("L#{} P#{}", place.pu, m.pus()[place.pu as usize].os),
                    format!("P#{os}"),
                    render::picture_cell(picture, m, &place.bound),
                ]
            })
            .collect();
        s += &render::table(["rank", "mapped PU", "bound (OS)", picture.header()], &rows);
    }
    s += "\n";
    for line in render::picture_legend(picture)
        .into_iter()
        .chain([PLAN_COLUMNS])
    {
        s += &format!("{line}\n");
    }
    s
}

#[derive(serde::Serialize)]
struct JsonCost {
    winner: String,
    exchanges: usize,
    swaps: usize,
    plan: f64,
    candidates: std::collections::BTreeMap<String, Option<f64>>,
}

#[derive(serde::Serialize)]
struct JsonPlan {
    processes: Vec<JsonProcess>,
    cost: JsonCost,
}

fn json(plan: &lama_plan::Plan, file: &PlanFile) -> String {
    let processes = plan
        .ranks
        .iter()
        .zip(&file.ranks)
        .enumerate()
        .map(|(r, (p, f))| JsonProcess {
            env: None,
            rank: r as u32,
            node: p.node,
            pu: f.pu,
            cpus: f.cpus.cpus().to_vec(),
            mems: None,
            gpus: None,
            gpu_bus_ids: None,
            nic: None,
            bind: None,
        })
        .collect();
    let cost = JsonCost {
        winner: plan.winner.clone(),
        exchanges: plan.exchanges,
        swaps: plan.swaps,
        plan: plan.cost,
        candidates: plan
            .candidates
            .iter()
            .map(|c| (c.name.clone(), c.cost.as_ref().ok().copied()))
            .collect(),
    };
    let mut s = serde_json::to_string(&JsonPlan { processes, cost })
        .unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}"));
    s.push('\n');
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn whole_costs_have_their_digits_grouped() {
        assert_eq!(cost(1808084590.0), "1,808,084,590");
        assert_eq!(cost(671820.0), "671,820");
        assert_eq!(cost(999.0), "999");
        assert_eq!(cost(-1200.0), "-1,200");
        assert_eq!(cost(0.0), "0");
        assert_eq!(cost(12.5), "12.5");
    }
}

//! `lama`: preview LAMA placements on any topology, before a job is submitted.
//!
//! A thin shell over `lama-engine` (placement, rendering) and `lama-hwloc` (topologies).
//! Exit status: 0 success; 1 the request cannot be placed; 2 usage or syntax error.

use clap::{Args, Parser, Subcommand};
use lama_engine::{
    place, render, Bind, CpuList, Layout, Machine, Mppr, Order, PlaceError, Placement, Request,
    MAP_ALIASES,
};
use lama_hwloc::Source;
use std::io::Write;
use std::process::ExitCode;

#[derive(Parser, Debug)]
#[command(
    name = "lama",
    version,
    about = "Preview Locality-Aware Mapping Algorithm (LAMA) placements",
    long_about = "Preview where `srun --lama-map=... --lama-bind=...` would place and bind each \
                  process, on any topology: an hwloc XML file, an hwloc synthetic description \
                  such as \"pack:2 core:6 pu:2\", or `host` for this machine.",
    after_help = "Examples:\n  lama map --topology \"pack:2 core:4 pu:2\" --nodes 2 --np 24 --map scbnh --bind none\n  \
                  lama map --topology node.xml --np 8 --map socket --bind 1c --json\n  \
                  lama topology host\n  lama export /etc/slurm/topology/$(hostname -s).xml"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Place processes and show where each one goes.
    Map(MapArgs),
    /// Show a topology as the engine sees it: levels in containment order, widths, available PUs.
    Topology {
        /// An hwloc XML file, an hwloc synthetic description, or `host`.
        topology: String,
        /// Limit the available PUs to these OS indexes (as a job cpuset would), e.g. 0-3,8.
        #[arg(long, value_name = "CPULIST")]
        restrict: Option<String>,
    },
    /// Write this host's topology as hwloc XML (to FILE, or standard output), for a site's
    /// `topology=` setting.
    Export {
        /// Where to write; standard output when absent.
        file: Option<std::path::PathBuf>,
    },
}

#[derive(Args, Debug)]
struct MapArgs {
    /// A node's topology: an hwloc XML file, an hwloc synthetic description, or `host`.
    /// Repeat for one node each, in order.
    #[arg(long = "topology", short = 't', value_name = "T", required = true)]
    topologies: Vec<String>,
    /// With one --topology: that many identical nodes.
    #[arg(long, short = 'N', value_name = "N")]
    nodes: Option<u32>,
    /// Number of processes.
    #[arg(long, short = 'n', value_name = "NP")]
    np: u32,
    /// Mapping layout (e.g. scbnh) or alias (hwthread core l1cache l2cache l3cache numa socket node).
    #[arg(long, short = 'm', value_name = "LAYOUT")]
    map: String,
    /// Binding width (e.g. 1c, 2L2, 1s) or alias, or none.
    #[arg(long, short = 'b', value_name = "WIDTH", default_value = "1c")]
    bind: String,
    /// Maximum processes per resource, e.g. 1:c,4:s (first pass only). Default: no limit.
    #[arg(long, value_name = "LIMITS")]
    mppr: Option<String>,
    /// Rank ordering: n (natural) or s (sequential).
    #[arg(long, value_name = "n|s", default_value = "n")]
    order: String,
    /// Allow more processes than positions (further passes ignore MPPR limits).
    #[arg(long)]
    oversubscribe: bool,
    /// Limit the available PUs of every node to these OS indexes, e.g. 2-3 (as a job cpuset
    /// would).
    #[arg(long, value_name = "CPULIST")]
    restrict: Option<String>,
    /// Machine-readable output: {"processes":[{"rank":0,"node":0,"pu":5,"cpus":[4,5]},...]}.
    #[arg(long)]
    json: bool,
}

/// A failure with its exit status.
enum Failure {
    /// Bad usage or syntax: exit 2.
    Usage(String),
    /// The request cannot be placed: exit 1.
    Place(String),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(Failure::Usage(msg)) => {
            eprintln!("lama: {msg}");
            ExitCode::from(2)
        }
        Err(Failure::Place(msg)) => {
            eprintln!("lama: {msg}");
            ExitCode::from(1)
        }
    }
}

fn run(cli: Cli) -> Result<(), Failure> {
    match cli.command {
        Command::Map(args) => map(args),
        Command::Topology { topology, restrict } => {
            let machine = load(&topology)?;
            let machine = match restrict {
                Some(r) => machine.restrict(&cpulist(&r)?),
                None => machine,
            };
            print(&render::topology_text(&machine))
        }
        Command::Export { file } => {
            let xml =
                lama_hwloc::export_xml(&Source::Live).map_err(|e| Failure::Place(e.to_string()))?;
            match file {
                Some(path) => std::fs::write(&path, xml)
                    .map_err(|e| Failure::Place(format!("cannot write {}: {e}", path.display()))),
                None => print(&xml),
            }
        }
    }
}

fn print(text: &str) -> Result<(), Failure> {
    let mut out = std::io::stdout().lock();
    // A closed pipe (`lama ... | head`) is not an error worth reporting.
    let _ = out.write_all(text.as_bytes());
    let _ = out.flush();
    Ok(())
}

fn load(spec: &str) -> Result<Machine, Failure> {
    lama_hwloc::load(&Source::from_spec(spec)).map_err(|e| Failure::Usage(e.to_string()))
}

fn cpulist(text: &str) -> Result<CpuList, Failure> {
    CpuList::parse(text).map_err(|e| Failure::Usage(e.to_string()))
}

fn map(args: MapArgs) -> Result<(), Failure> {
    let syntax = |d: lama_engine::Diagnostic| Failure::Usage(d.to_string());
    let layout = Layout::parse(&args.map).map_err(syntax)?;
    let bind = Bind::parse(&args.bind).map_err(syntax)?;
    let mppr = match &args.mppr {
        Some(m) => Mppr::parse(m).map_err(syntax)?,
        None => Mppr::none(),
    };
    let order = Order::parse(&args.order).map_err(syntax)?;
    let restrict = args.restrict.as_deref().map(cpulist).transpose()?;

    let mut machines = Vec::with_capacity(args.topologies.len());
    for t in &args.topologies {
        let m = load(t)?;
        machines.push(match &restrict {
            Some(r) => m.restrict(r),
            None => m,
        });
    }
    let nodes: Vec<&Machine> = match (args.nodes, machines.len()) {
        (None, _) => machines.iter().collect(),
        (Some(0), _) => return Err(Failure::Usage("--nodes must be at least 1".into())),
        (Some(n), 1) => std::iter::repeat_n(&machines[0], n as usize).collect(),
        (Some(n), k) if n as usize == k => machines.iter().collect(),
        (Some(n), k) => {
            return Err(Failure::Usage(format!(
                "--nodes {n} with {k} --topology options: give one --topology for {n} identical \
                 nodes, or one --topology per node without --nodes"
            )))
        }
    };
    let req = Request {
        layout,
        bind,
        mppr,
        order,
        oversubscribe: args.oversubscribe,
        np: args.np,
        bind_within: false,
    };
    let placement = place(&nodes, &req).map_err(|e| match e {
        PlaceError::TooLarge { .. } => Failure::Usage(e.to_string()),
        other => Failure::Place(other.to_string()),
    })?;
    if args.json {
        print(&json(&placement))
    } else {
        let mut text = String::new();
        if let Some((alias, expansion)) = MAP_ALIASES.iter().find(|(a, _)| *a == args.map) {
            text += &format!("map alias '{alias}' = layout {expansion}\n");
        }
        text += &render::placement_text(&placement);
        print(&text)
    }
}

#[derive(serde::Serialize)]
struct JsonProcess {
    rank: u32,
    node: u32,
    pu: u32,
    cpus: Vec<u32>,
}

#[derive(serde::Serialize)]
struct JsonPlacement {
    processes: Vec<JsonProcess>,
}

fn json(p: &Placement<'_>) -> String {
    let processes = (0..p.len())
        .map(|r| {
            let info = p.info(r);
            JsonProcess {
                rank: info.rank,
                node: info.node,
                pu: info.pu_os,
                cpus: info.cpus.cpus().to_vec(),
            }
        })
        .collect();
    let mut s = serde_json::to_string(&JsonPlacement { processes })
        .unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}"));
    s.push('\n');
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn command_line_definition_is_consistent() {
        Cli::command().debug_assert();
    }
}

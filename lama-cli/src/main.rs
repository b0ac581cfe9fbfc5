//! `lama`: preview LAMA placements on any topology, before a job is submitted.
//!
//! A thin shell over `lama-engine` (placement, rendering) and `lama-hwloc` (topologies).
//! Exit status: 0 success; 1 the request cannot be placed; 2 usage or syntax error.

use clap::{Args, CommandFactory, FromArgMatches, Parser, Subcommand};
use lama_engine::{
    cpus_covered, exact_binding, numa_nodes, place, place_cpus_per_task, render, Bind, CpuList,
    CpuUnit, Layout, Machine, Membind, Mppr, Order, PlaceError, Placement, Request, BIND_ALIASES,
    MAP_ALIASES,
};
use lama_hwloc::Source;
use lama_slurm::distribution::{count_list, parse_counts, Distribution};
use lama_slurm::task_env;
use std::io::Write;
use std::process::ExitCode;

mod color;
mod emit;
mod exec;
mod gpu;
mod manual;
mod plan;
mod srun_line;
mod verify;
use lama_plan::hostlist;

#[derive(Parser, Debug)]
#[command(
    name = "lama",
    version,
    about = "Preview Locality-Aware Mapping Algorithm (LAMA) placements",
    long_about = "Preview where `srun --lama-map=... --lama-bind=...` would place and bind each \
                  process, on any topology: an hwloc XML file, an hwloc synthetic description \
                  such as \"pack:2 core:6 pu:2\", or `host` for this machine."
)]
struct Cli {
    /// When to colour the output: auto (a terminal, unless NO_COLOR is set), always or never.
    #[arg(long, global = true, value_enum, value_name = "WHEN", default_value_t = color::When::Auto)]
    color: color::When,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Place processes and show where each one goes.
    #[command(after_long_help = manual::LANGUAGE)]
    Map(Box<MapArgs>),
    /// Communication-aware placement: map a communication matrix onto the nodes and their
    /// network with Scotch, guarded by LAMA layouts; write a plan for `srun --lama-plan`.
    Plan(Box<plan::PlanArgs>),
    /// Run as a task of a placed step (`srun --lama-map=... lama verify`): compare what the
    /// task really has (every thread's CPUs, its memory policy and pages, the GPUs it may open,
    /// its variables) with what LAMA placed for it; with a program after `--`, watch the
    /// program's threads while it runs.
    Verify(Box<verify::VerifyArgs>),
    /// Run a program as one rank placed by LAMA, under any launcher (`mpirun -np 8 lama exec
    /// --map scbnh -- ./app`, `mpiexec`, `srun` with or without the plugin, `flux run`,
    /// `jsrun`): it finds its rank from the launcher's variables, places its node's ranks with
    /// the plugin's rules among the CPUs its cgroup allows, binds itself and executes the
    /// program.
    Exec(Box<exec::ExecArgs>),
    /// Show a topology as the engine sees it: levels in containment order, widths, available PUs.
    Topology {
        /// An hwloc XML file, an hwloc synthetic description, or `host`.
        topology: String,
        /// Limit the available PUs to these OS indexes (as a job cpuset would), e.g. 0-3,8.
        #[arg(long, value_name = "CPULIST")]
        restrict: Option<String>,
    },
    /// Write this host's topology as hwloc XML (to FILE, or standard output), for a site's
    /// `topology=` setting; every CPU is written as allowed, whatever the caller's cgroup.
    Export {
        /// Where to write; standard output when absent.
        file: Option<std::path::PathBuf>,
    },
    /// Print a shell completion script for lama (bash, zsh, fish, elvish, powershell).
    Completions {
        /// The shell.
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Print the lama(1) manual page (roff).
    #[command(hide = true)]
    Manpage,
}

/// Where `lama --version` looks for the installed plugin: `LAMA_PLUGIN`, else in each
/// directory of the running Slurm's `PluginDir` (`scontrol show config`), else in the plugin
/// directory of this build ([`lama_slurm::built_for::INSTALL_DIR`]). The first file that
/// exists is read; `Err` lists where it looked.
fn installed_plugin() -> Result<String, String> {
    if let Ok(path) = std::env::var("LAMA_PLUGIN") {
        return Ok(path);
    }
    let slurm = std::process::Command::new("scontrol")
        .args(["show", "config"])
        .stderr(std::process::Stdio::null())
        .output()
        .ok()
        .filter(|out| out.status.success())
        .and_then(|out| plugin_dir(&String::from_utf8_lossy(&out.stdout)));
    let mut dirs: Vec<String> = slurm
        .iter()
        .flat_map(|d| d.split(':'))
        .filter(|d| !d.is_empty())
        .map(str::to_string)
        .collect();
    dirs.extend(lama_slurm::built_for::INSTALL_DIR.map(str::to_string));
    let candidates: Vec<String> = dirs.iter().map(|d| format!("{d}/spank_lama.so")).collect();
    candidates
        .iter()
        .find(|p| std::path::Path::new(p).is_file())
        .cloned()
        .ok_or_else(|| {
            let looked = if candidates.is_empty() {
                "nowhere: no Slurm answered scontrol show config, and this build names no plugin \
                 directory"
                    .to_string()
            } else {
                candidates.join(", ")
            };
            format!("plugin: not found (looked in {looked}); set LAMA_PLUGIN to its path")
        })
}

/// `PluginDir` from `scontrol show config` output (`PluginDir = /usr/lib64/slurm`).
fn plugin_dir(config: &str) -> Option<String> {
    config.lines().find_map(|line| {
        let (key, value) = line.split_once('=')?;
        (key.trim() == "PluginDir").then(|| value.trim().to_string())
    })
}

/// What `lama --version` says about the plugin at `path`: the Slurm release it was built for,
/// read from the text the plugin carries ([`lama_slurm::built_for`]).
fn plugin_version(path: &str) -> String {
    match std::fs::read(path) {
        Ok(bytes) => match lama_slurm::built_for::find(&bytes) {
            Some(release) => format!("plugin: {path}, built for Slurm {release}"),
            None => format!("plugin: {path} is not a spank-lama plugin"),
        },
        Err(e) => format!("plugin: none at {path} ({e}; set LAMA_PLUGIN to its path)"),
    }
}

/// The version text: the command's and engine's versions and, when `with_plugin`, the Slurm
/// release of the installed plugin (read from its file: only for `--version`).
fn version_text(with_plugin: bool) -> String {
    let mut text = format!(
        "{} (lama-engine {})",
        env!("CARGO_PKG_VERSION"),
        lama_engine::VERSION
    );
    if with_plugin {
        let line = match installed_plugin() {
            Ok(plugin) => plugin_version(&plugin),
            Err(why) => why,
        };
        text += &format!("\n{line}");
    }
    text
}

/// What `lama --help` adds after the options: examples, exit statuses, the JSON contract
/// (the same text as lama(1)).
fn after_help() -> String {
    let mut text = String::from("Examples:\n");
    for line in manual::EXAMPLES.lines() {
        text += &format!("  {line}\n");
    }
    text += "\nExit status:\n";
    for (code, meaning) in manual::EXIT_STATUS {
        text += &format!("  {code}  {meaning}\n");
    }
    text += &format!("\nJSON output: {}", manual::JSON_CONTRACT);
    text
}

/// The command line as `lama` parses it (also the source of lama(1) and the completions).
/// `with_plugin`: the version text names the installed plugin's Slurm, which reads the plugin
/// file; only `lama --version` needs it.
fn command(with_plugin: bool) -> clap::Command {
    let version: &'static str = Box::leak(version_text(with_plugin).into_boxed_str());
    Cli::command().version(version).after_help(after_help())
}

#[derive(Args, Debug)]
struct MapArgs {
    /// A node's topology: an hwloc XML file, an hwloc synthetic description, or `host`
    /// (this machine). Repeat for one node each, in order. [default: host]
    #[arg(long = "topology", value_name = "T")]
    topologies: Vec<String>,
    /// With one --topology: that many identical nodes.
    #[arg(long, short = 'N', value_name = "N")]
    nodes: Option<u32>,
    /// Number of processes (1 or more), as srun's -n/--ntasks.
    #[arg(long, short = 'n', visible_alias = "ntasks", value_name = "NP",
          value_parser = clap::value_parser!(u32).range(1..))]
    np: u32,
    /// Mapping layout (e.g. scbnh) or alias (hwthread core l1cache l2cache l3cache numa socket node).
    #[arg(long, visible_alias = "lama-map", value_name = "LAYOUT", hide_possible_values = true,
          value_parser = Suggest(MAP_ALIASES.iter().map(|(a, _)| *a).collect()))]
    map: String,
    /// Binding width (e.g. 1c, 2L2, 1s) or alias, or none. [default: 1c, or with
    /// --cpus-per-task N the narrowest binding of N CPUs, as the plugin does; with a layout
    /// led by 'g' and no -c, each task's share of the CPUs near its GPUs]
    #[arg(long, visible_alias = "lama-bind", value_name = "WIDTH", hide_possible_values = true,
          value_parser = Suggest(BIND_ALIASES.iter().map(|(a, _)| *a).collect()))]
    bind: Option<String>,
    /// CPUs per process, as Slurm's -c/--cpus-per-task: without --bind, each process is bound
    /// to at least N CPUs, kept inside the smallest enclosing object where possible.
    #[arg(long, short = 'c', value_name = "N", default_value_t = 1,
          value_parser = clap::value_parser!(u32).range(1..=65536))]
    cpus_per_task: u32,
    /// What Slurm counts as one CPU on these nodes: thread (CPUs= counts hardware threads) or
    /// core (CPUs= counts cores).
    #[arg(long, value_name = "thread|core", default_value = "thread",
          value_parser = ["thread", "core"])]
    cpu_unit: String,
    /// Memory binding: local or preferred (the NUMA nodes of each binding), or none. Shown per
    /// process, and as "mems" in --json.
    #[arg(
        long,
        visible_alias = "lama-membind",
        value_name = "local|preferred|none",
        default_value = "none"
    )]
    membind: String,
    /// With -m arbitrary: write the SLURM_HOSTFILE (one node name per rank) that makes
    /// `srun -m arbitrary` put every rank on the node this placement puts it on. Needs
    /// --node-names.
    #[arg(long, value_name = "FILE", requires = "node_names")]
    hostfile: Option<std::path::PathBuf>,
    /// The nodes' names, in --topology order, as a Slurm hostlist (node[1-3]).
    #[arg(long, value_name = "HOSTLIST")]
    node_names: Option<String>,
    /// Maximum processes per resource, e.g. 1:c,4:s (first pass only). Default: no limit.
    #[arg(long, visible_alias = "lama-mppr", value_name = "LIMITS", value_hint = clap::ValueHint::Other)]
    mppr: Option<String>,
    /// Rank ordering: n (natural) or s (sequential).
    #[arg(
        long,
        visible_alias = "lama-order",
        value_name = "n|s",
        default_value = "n"
    )]
    order: String,
    /// Also print each level's width (the positions the layout's round-robin counts).
    #[arg(long)]
    explain: bool,
    /// Print the request and the summary only, no table (for large previews).
    #[arg(long, conflicts_with = "json")]
    summary: bool,
    /// Print only this node's table (0 is the first node).
    #[arg(long, value_name = "INDEX", conflicts_with = "json")]
    node: Option<u32>,
    /// How srun deals the ranks to the nodes, as srun's -m: block (srun's default), cyclic or
    /// plane=P; each node then places its own ranks by the layout, as the plugin does. Or
    /// arbitrary: LAMA's own order across nodes (the layout spreads the ranks over the nodes),
    /// which only `srun -m arbitrary` with the SLURM_HOSTFILE --hostfile writes reproduces.
    /// [default: block]
    #[arg(long, short = 'm', value_name = "block|cyclic|plane=P|arbitrary")]
    distribution: Option<String>,
    /// The tasks of each node as the job's SLURM_TASKS_PER_NODE shows them (4,4,2 or
    /// 4(x2),2). Default: srun's counts for a job that holds its nodes whole (--exclusive).
    #[arg(long, value_name = "LIST", conflicts_with = "ntasks_per_node")]
    tasks_per_node: Option<String>,
    /// As srun's --ntasks-per-node: at most N tasks on each node.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    ntasks_per_node: Option<u32>,
    /// Also print each task's environment as the plugin sets it (LAMA_*, and with --omp the
    /// OpenMP variables); in --json, an "env" object per process.
    #[arg(long, conflicts_with = "summary")]
    env: bool,
    /// The tables' picture column: auto (the full picture, or on a terminal too narrow for it
    /// the compact one: package[0][core:0-1] as Open MPI 5 writes it), always (the full one),
    /// compact or never.
    #[arg(long, value_enum, value_name = "WHEN", default_value_t = PictureWhen::Auto)]
    picture: PictureWhen,
    /// As --lama-omp: OMP_PLACES (one place per bound core, or per thread with -c counting
    /// threads), OMP_PROC_BIND=close and OMP_NUM_THREADS, shown with --env.
    #[arg(long, visible_alias = "lama-omp", requires = "env")]
    omp: bool,
    /// Print only these ranks' rows: one rank (7) or a range (100-199); nodes without any of
    /// them are left out.
    #[arg(long, value_name = "FIRST[-LAST]", conflicts_with_all = ["json", "summary"])]
    ranks: Option<String>,
    /// Allow more processes than positions (further passes ignore MPPR limits); srun's
    /// spelling --overcommit is accepted too.
    #[arg(long, visible_alias = "overcommit")]
    oversubscribe: bool,
    /// Limit the available PUs to these OS indexes, as a job's cpuset does: CPULIST (e.g. 2-3)
    /// for every node, NODE=CPULIST for one node (its index from 0, or its --node-names name).
    /// Repeat for several nodes.
    #[arg(long, value_name = "[NODE=]CPULIST")]
    restrict: Vec<String>,
    /// Machine-readable output: {"processes":[{"rank":0,"node":0,"pu":5,"cpus":[4,5]},...]}.
    #[arg(long)]
    json: bool,
    /// With a layout led by 'g': GPUs per task, as srun's --gpus-per-task, which makes Slurm
    /// bind them to the tasks in order (per_task:K): each task keeps Slurm's GPUs and LAMA
    /// places its CPUs near them. Without it each task gets one GPU, chosen by LAMA.
    #[arg(long, value_name = "K",
          value_parser = clap::value_parser!(u32).range(1..=1024))]
    gpus_per_task: Option<u32>,
    /// With a layout led by 'g': Slurm's GPU binding, as srun's --gpu-bind: none (LAMA
    /// chooses each task's GPUs, also with --gpus-per-task), per_task:K or single:1
    /// (--ntasks-per-gpu=1).
    #[arg(long, value_name = "none|per_task:K|single:1")]
    gpu_bind: Option<String>,
    /// With a layout led by 'g': tasks per GPU, as srun's --ntasks-per-gpu, which makes Slurm
    /// give each task one GPU (single:N) unless --gpu-bind says otherwise: with 1 each task
    /// keeps its own GPU and LAMA places its CPUs near it; with more, tasks share GPUs and the
    /// plugin refuses a layout led by 'g'.
    #[arg(long, value_name = "N",
          value_parser = clap::value_parser!(u32).range(1..=1024))]
    ntasks_per_gpu: Option<u32>,
    /// With a layout led by 'g': the GPUs of each node the step has, as Slurm numbers them
    /// (SLURM_STEP_GPUS, e.g. 0,2). Default: all of the node's GPUs.
    #[arg(long, value_name = "LIST")]
    gpus: Option<String>,
    /// With a layout led by 'g': each task sees only its own GPUs (--lama-gpu-isolate).
    #[arg(long, visible_alias = "lama-gpu-isolate")]
    gpu_isolate: bool,
    /// The site's cgroup.conf says ConstrainDevices=yes: each task's variables number its
    /// visible GPUs from 0, as Slurm then does (default: by Slurm's indexes, ConstrainDevices=no).
    #[arg(long)]
    constrain_devices: bool,
    /// Write the placement in a launcher's own format instead of the table: rankfile (Open
    /// MPI, PRRTE: mpirun --map-by rankfile:file=FILE), machinefile (hydra: mpiexec -f FILE)
    /// or srun (its -m and --cpu-bind=mask_cpu, where every node's list is the same).
    #[arg(long, value_enum, value_name = "FORMAT")]
    emit: Option<emit::Emit>,
    /// The srun line to preview, after `--` (`-- srun -N2 -n8 -c2 --lama-map=scbnh ./app`):
    /// its -N, -n, -c, -m, --ntasks-per-node, --gpus-per-task, --gpu-bind, -w, -O and
    /// --lama-* options are read as lama map's; those that place nothing (-p, -t, -J, --mem,
    /// -o, ...) are left out with a note; the program is not read.
    #[arg(last = true, value_name = "srun LINE")]
    srun: Vec<String>,
}

/// A value that may be anything (a layout, a width) and whose aliases shells complete: the
/// parser accepts every string (the engine judges it) and offers `self.0` as completions.
#[derive(Clone)]
struct Suggest(Vec<&'static str>);

impl clap::builder::TypedValueParser for Suggest {
    type Value = String;

    fn parse_ref(
        &self,
        _cmd: &clap::Command,
        _arg: Option<&clap::Arg>,
        value: &std::ffi::OsStr,
    ) -> Result<String, clap::Error> {
        Ok(value.to_string_lossy().into_owned())
    }

    fn possible_values(
        &self,
    ) -> Option<Box<dyn Iterator<Item = clap::builder::PossibleValue> + '_>> {
        Some(Box::new(
            self.0.iter().map(|v| clap::builder::PossibleValue::new(*v)),
        ))
    }
}

/// When the tables show their picture column (`--picture`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum PictureWhen {
    Auto,
    Always,
    Compact,
    Never,
}

/// The columns of the terminal standard output is, if it is one.
pub(crate) fn terminal_columns() -> Option<usize> {
    use std::io::IsTerminal;
    if !std::io::stdout().is_terminal() {
        return None;
    }
    // SAFETY: TIOCGWINSZ writes one winsize into the struct given, which lives across the call.
    let mut size: libc::winsize = unsafe { std::mem::zeroed() };
    let ok = unsafe { libc::ioctl(libc::STDOUT_FILENO, libc::TIOCGWINSZ, &mut size) } == 0;
    if ok && size.ws_col > 0 {
        return Some(usize::from(size.ws_col));
    }
    std::env::var("COLUMNS").ok()?.trim().parse().ok()
}

/// The characters of a table row besides its picture: the five other columns at their usual
/// widths.
const ROW_BESIDES_PICTURE: usize = 72;

/// The picture a table would show for `machines`: full where a row of `besides` characters
/// plus the widest machine's picture fits the terminal (or there is none), as `--picture` says.
pub(crate) fn picture_for<'a>(
    when: PictureWhen,
    machines: impl IntoIterator<Item = &'a Machine>,
    besides: usize,
) -> render::PictureMode {
    show_picture(when, terminal_columns(), || {
        let widest = machines
            .into_iter()
            .map(|m| render::picture(m, &[]).chars().count())
            .max()
            .unwrap_or(0);
        besides + widest
    })
}

/// Which picture the tables show. `auto`: the full picture where a row with it fits the
/// terminal (`columns`; a row is `row()` characters, asked only then) or there is no terminal,
/// else the compact one, which names the package and cores in a few words whatever the node's
/// size; a picture is always shown.
pub(crate) fn show_picture(
    when: PictureWhen,
    columns: Option<usize>,
    row: impl FnOnce() -> usize,
) -> render::PictureMode {
    use render::PictureMode::{Compact, Full, None as NoPicture};
    match (when, columns) {
        (PictureWhen::Always, _) | (PictureWhen::Auto, None) => Full,
        (PictureWhen::Compact, _) => Compact,
        (PictureWhen::Never, _) => NoPicture,
        (PictureWhen::Auto, Some(c)) if row() <= c => Full,
        (PictureWhen::Auto, Some(_)) => Compact,
    }
}

/// A failure with its exit status.
#[derive(Debug)]
pub(crate) enum Failure {
    /// Bad usage or syntax: exit 2.
    Usage(String),
    /// The request cannot be placed: exit 1.
    Place(String),
    /// Already reported (`lama verify`): exit with this status.
    Status(u8),
}

fn main() -> ExitCode {
    let asks_version = std::env::args_os()
        .skip(1)
        .any(|a| a == "--version" || a == "-V");
    // `lama map ... -- srun LINE`: the line's options as lama map's own.
    let (args, notes) = match srun_line::expand(std::env::args_os().collect()) {
        Ok(expanded) => expanded,
        Err(e) => {
            eprintln!("{} {e}", color::error_prefix());
            return ExitCode::from(2);
        }
    };
    let cli = match Cli::from_arg_matches(&command(asks_version).get_matches_from(args)) {
        Ok(cli) => cli,
        Err(e) => e.exit(),
    };
    color::set(cli.color);
    for note in notes {
        eprintln!("lama: srun line: {note}");
    }
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(Failure::Usage(msg)) => {
            eprintln!("{} {msg}", color::error_prefix());
            ExitCode::from(2)
        }
        Err(Failure::Place(msg)) => {
            eprintln!("{} {msg}", color::error_prefix());
            ExitCode::from(1)
        }
        Err(Failure::Status(code)) => ExitCode::from(code),
    }
}

fn run(cli: Cli) -> Result<(), Failure> {
    match cli.command {
        Command::Map(args) => map(*args),
        Command::Plan(args) => plan::run(*args),
        Command::Verify(args) => verify::run(*args),
        Command::Exec(args) => exec::run(*args),
        Command::Topology { topology, restrict } => {
            let machine = load(&topology)?;
            let machine = match restrict {
                Some(r) => restricted(machine, &cpulist(&r)?, "--restrict")?,
                None => machine,
            };
            print_human(&render::topology_text(&machine))
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
        Command::Completions { shell } => {
            let mut out = Vec::new();
            // Hidden subcommands (manpage, for packaging) are not offered.
            let full = command(false);
            let mut shown = clap::Command::new("lama")
                .about(full.get_about().cloned().unwrap_or_default())
                .args(full.get_arguments().cloned());
            for sub in full.get_subcommands().filter(|s| !s.is_hide_set()) {
                shown = shown.subcommand(sub.clone());
            }
            clap_complete::generate(shell, &mut shown, "lama", &mut out);
            print(&String::from_utf8_lossy(&out))
        }
        Command::Manpage => print(&manual::man_page(
            &command(false),
            env!("CARGO_PKG_VERSION"),
        )),
    }
}

/// Prints human-readable output, coloured when standard output is.
pub(crate) fn print_human(text: &str) -> Result<(), Failure> {
    let text = fit(text, terminal_columns());
    if color::stdout() {
        print(&color::paint(&text))
    } else {
        print(&text)
    }
}

/// `text` for a terminal of `columns`: each prose line longer than that wrapped at its words
/// (continuations indented); indented lines (table rows, lists) are left as they are, so that
/// a table the user asked to be wide (--picture always) keeps its rows.
fn fit(text: &str, columns: Option<usize>) -> String {
    let Some(w) = columns else {
        return text.to_string();
    };
    let mut out = String::with_capacity(text.len());
    for line in text.split_inclusive('\n') {
        let (body, end) = match line.strip_suffix('\n') {
            Some(b) => (b, "\n"),
            None => (line, ""),
        };
        if body.starts_with(' ') || body.chars().count() <= w {
            out.push_str(line);
        } else {
            out.push_str(&render::wrap(body, w));
            out.push_str(end);
        }
    }
    out
}

pub(crate) fn print(text: &str) -> Result<(), Failure> {
    let mut out = std::io::stdout().lock();
    // A closed pipe (`lama ... | head`) is not an error worth reporting.
    let _ = out.write_all(text.as_bytes());
    let _ = out.flush();
    Ok(())
}

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

fn map(args: MapArgs) -> Result<(), Failure> {
    if let Some(first) = args.srun.first() {
        return Err(Failure::Usage(format!(
            "after --, lama map takes an srun line (-- srun -N2 -n8 --lama-map=scbnh ./app), \
             not '{first}'"
        )));
    }
    let unit = cpu_unit(&args);
    let order = Order::parse(&args.order).map_err(|d| Failure::Usage(d.to_string()))?;
    let gpu_request = |map: &str| {
        lama_slurm::gpu::request(
            map,
            args.bind.as_deref(),
            args.mppr.as_deref(),
            order,
            args.gpus_per_task.unwrap_or(1),
            args.oversubscribe,
            args.cpus_per_task,
            unit,
        )
    };
    if let Some(by_gpu) = gpu_request(&args.map).map_err(Failure::Usage)? {
        return gpu::map(&args, &by_gpu, false);
    }
    // Slurm's per-task GPUs with a layout without 'g': the plugin places each task by the
    // layout within the CPUs beside the GPUs Slurm gives it, as the layout led by 'g' does.
    let slurm_binds = gpu::slurm_binding(&args).own_gpus_per_task().is_some();
    if slurm_binds && Layout::parse(&args.map).is_ok() {
        if let Ok(Some(beside)) = gpu_request(&format!("g{}", args.map)) {
            return gpu::map(&args, &beside, true);
        }
    }
    // GPU options mean nothing without a layout that places by GPU: refused, not ignored (the
    // plugin refuses --lama-gpu-isolate without 'g' the same way).
    let gpu_only = [
        (args.gpu_isolate, "--gpu-isolate"),
        (args.gpus.is_some(), "--gpus"),
        (args.gpus_per_task.is_some(), "--gpus-per-task"),
        (args.gpu_bind.is_some(), "--gpu-bind"),
        (args.ntasks_per_gpu.is_some(), "--ntasks-per-gpu"),
        (args.constrain_devices, "--constrain-devices"),
    ];
    if let Some((_, option)) = gpu_only.iter().find(|(given, _)| *given) {
        return Err(Failure::Usage(format!(
            "{option} previews placement by GPU, and layout '{}' does not place by GPU: lead it \
             with 'g' (g{}), or leave out {option} (a layout without 'g' still lists each node's \
             GPUs and NICs)",
            args.map, args.map
        )));
    }
    // A familiar Slurm or Open MPI spelling is refused with its LAMA equivalent.
    let syntax =
        |d: lama_engine::Diagnostic| Failure::Usage(lama_slurm::familiar::explain(d).to_string());
    let layout = Layout::parse(&args.map).map_err(syntax)?;
    let bind = args
        .bind
        .as_deref()
        .map(Bind::parse)
        .transpose()
        .map_err(syntax)?;
    let mppr = match &args.mppr {
        Some(m) => Mppr::parse(m).map_err(syntax)?,
        None => Mppr::none(),
    };
    let order = Order::parse(&args.order).map_err(syntax)?;
    let membind = Membind::parse(&args.membind).map_err(syntax)?;
    let all_nodes = nodes_of(&args)?;
    let (machines, names) = (all_nodes.machines(), all_nodes.names.clone());
    let nodes = all_nodes.list();
    // The plugin's rule (lama_slurm::node::effective_bind), node by node: the binding asked
    // for, else the default widened for -c N, which never makes tasks share CPUs.
    let rules = lama_slurm::node::StepRequest {
        layout: layout.clone(),
        bind,
        membind,
        mppr: mppr.clone(),
        order,
        origin: lama_slurm::node::Origin::User,
        verbose: false,
        omp: args.omp,
        gpu: None,
    };
    let step_cpus = lama_slurm::node::StepCpus {
        per_task: args.cpus_per_task.max(1),
        unit,
    };
    let per_node: Vec<(Bind, bool)> = machines
        .iter()
        .map(|m| lama_slurm::node::effective_bind(m, &rules, step_cpus))
        .collect();
    if per_node.iter().any(|b| *b != per_node[0]) {
        let list: Vec<String> = per_node.iter().map(|(b, _)| b.to_string()).collect();
        return Err(Failure::Usage(format!(
            "--cpus-per-task {} needs a different binding on these nodes ({}): the plugin \
             chooses one per node; preview the nodes one at a time or give --bind",
            args.cpus_per_task,
            list.join(", ")
        )));
    }
    let (bind, bind_within) = per_node[0];
    let req = Request {
        layout,
        bind,
        mppr,
        order,
        oversubscribe: args.oversubscribe,
        np: args.np,
        bind_within,
    };
    // As the plugin does: the -c default binding never makes tasks share CPUs; when the widened
    // binding cannot do that, each task gets exactly its -c CPUs.
    let exact: Vec<Bind> = machines
        .iter()
        .map(|m| exact_binding(m, args.cpus_per_task.max(1), unit))
        .collect();
    let exact = if exact.iter().all(|b| *b == exact[0]) {
        exact[0]
    } else {
        Bind::None
    };
    fn place_on<'m>(
        nodes: &[&'m Machine],
        req: &Request,
        np: u32,
        exact: Bind,
    ) -> Result<Placement<'m>, PlaceError> {
        let req = Request { np, ..req.clone() };
        if req.bind_within {
            place_cpus_per_task(nodes, &req, exact)
        } else {
            place(nodes, &req)
        }
    }
    let one_node = all_nodes.machine_of().len() == 1;
    let failure = |e: PlaceError| match e {
        PlaceError::TooLarge { .. } => Failure::Usage(e.to_string()),
        // One node of the preview holds fewer ranks than asked: more nodes would (-N).
        PlaceError::Oversubscribed {
            placed,
            requested,
            nodes: 1,
            ..
        } if one_node && placed > 0 => Failure::Place(format!(
            "{e}; or over more nodes: -N {} (to oversubscribe: lama map --oversubscribe)",
            requested.div_ceil(placed)
        )),
        PlaceError::Oversubscribed { .. } => {
            Failure::Place(format!("{e} (to oversubscribe: lama map --oversubscribe)"))
        }
        other => Failure::Place(other.to_string()),
    };
    let split = rank_split(&args, &all_nodes, unit)?;
    let placement = match &split {
        None => place_on(&nodes, &req, args.np, exact).map_err(failure)?,
        // As srun and the plugin do: ranks dealt to nodes first, each node's placed there.
        Some(split) => {
            // Nodes of one machine with as many ranks are placed once.
            let mut parts = Vec::new();
            let mut done: std::collections::HashMap<(usize, usize), usize> =
                std::collections::HashMap::new();
            let mut of_node = Vec::with_capacity(nodes.len());
            for (n, (&m, ranks)) in nodes.iter().zip(&split.ranks).enumerate() {
                let key = (all_nodes.machine_of()[n], ranks.len());
                if let Some(&k) = done.get(&key) {
                    of_node.push(k);
                    continue;
                }
                let part = place_on(&[m], &req, ranks.len() as u32, exact).map_err(failure);
                parts.push(part.map_err(|f| match f {
                    Failure::Usage(e) => Failure::Usage(format!("node {n}: {e}")),
                    Failure::Place(e) => Failure::Place(format!("node {n}: {e}")),
                    status @ Failure::Status(_) => status,
                })?);
                done.insert(key, parts.len() - 1);
                of_node.push(parts.len() - 1);
            }
            Placement::join_shared(parts, &of_node, &split.ranks).ok_or_else(|| {
                Failure::Place("the nodes' placements do not fit together (a bug)".into())
            })?
        }
    };
    // The default binding falls back node by node, as the plugin decides on each node.
    let counts = placement.tasks_per_node();
    let used: Vec<Bind> = (0..nodes.len() as u32)
        .map(|n| placement.node_binding(n))
        .collect();
    let fallback = if !bind_within {
        None
    } else if used.iter().all(|b| *b == used[0]) {
        lama_slurm::cpus_per_task::exact_fallback_note(
            bind,
            used[0],
            placement.len(),
            args.cpus_per_task.max(1),
            unit,
        )
    } else {
        let lines: Vec<String> = (0..nodes.len())
            .filter_map(|n| {
                let note = lama_slurm::cpus_per_task::exact_fallback_note(
                    bind,
                    used[n],
                    counts[n] as usize,
                    args.cpus_per_task.max(1),
                    unit,
                )?;
                let name = names
                    .as_ref()
                    .map(|v| format!(" ({})", v[n]))
                    .unwrap_or_default();
                Some(format!("node {n}{name}: {note}"))
            })
            .collect();
        Some(lines.join("\n"))
    };
    // Warnings go to stderr, and into --json's notes.
    let mut warnings = Vec::new();
    let need = lama_engine::threads_needed(nodes[0], args.cpus_per_task.max(1), unit);
    if let Some(w) = placement.overlap_warning_needing(|r| r, need) {
        eprintln!("lama: {w}");
        warnings.push(w);
    }
    if args.bind.is_some() && args.cpus_per_task > 1 && bind != Bind::None {
        let narrowest = (0..placement.len())
            .map(|r| {
                let info = placement.info(r);
                cpus_covered(nodes[info.node as usize], &info.bound_logical, unit)
            })
            .min();
        if let Some(n) = narrowest {
            if let Some(w) = lama_slurm::cpus_per_task::narrower_warning(
                nodes[0],
                bind,
                n,
                args.cpus_per_task,
                unit,
            ) {
                eprintln!("lama: {w}");
                warnings.push(w);
            }
        }
    }
    if let (Some(path), Some(names)) = (&args.hostfile, &names) {
        let mut text = String::with_capacity(placement.len() * 8);
        for p in placement.processes() {
            text += &names[p.node as usize];
            text.push('\n');
        }
        std::fs::write(path, text)
            .map_err(|e| Failure::Place(format!("cannot write {}: {e}", path.display())))?;
    }
    let env = args.env.then_some(EnvPreview {
        membind,
        omp: args.omp.then_some((args.cpus_per_task, unit)),
    });
    if let Some(format) = args.emit {
        return print(&emit::emit(format, &placement, names.as_deref())?);
    }
    if args.json {
        if let Some(note) = &fallback {
            eprintln!("lama: {note}");
        }
        let notes = warnings
            .into_iter()
            .chain(fallback.iter().flat_map(|n| n.lines().map(String::from)))
            .collect();
        print(&json(&placement, membind, names.as_deref(), env, notes))
    } else {
        let mut text = String::new();
        if let Some((alias, expansion)) = MAP_ALIASES.iter().find(|(a, _)| *a == args.map) {
            text += &format!("map alias '{alias}' = layout {expansion}\n");
        }
        if let Some(note) = &fallback {
            text += &format!("{note}\n");
        } else if bind_within && args.cpus_per_task > 1 {
            text += &format!(
                "binding {bind}: at least {} CPU(s) ({}s) per process for --cpus-per-task\n",
                args.cpus_per_task,
                unit.name()
            );
        }
        let notes: Vec<String> = match &split {
            Some(split) => split.notes(&placement),
            None => lama_slurm::distribution::node_assignment(&placement)
                .into_iter()
                .collect(),
        };
        let ranks = args
            .ranks
            .as_deref()
            .map(|r| rank_range(r, placement.len()))
            .transpose()?;
        // The widest picture of the nodes' distinct machines, only when a terminal may be
        // too narrow for it.
        let picture = if args.summary {
            render::PictureMode::Full
        } else {
            picture_for(args.picture, machines.iter(), ROW_BESIDES_PICTURE)
        };
        // Written as it is made: a preview of a million ranks never waits for all its text.
        print_human(&text)?;
        text.clear();
        render::write_placement_text(
            &placement,
            &notes,
            render::TextOptions {
                explain: args.explain,
                names: names.as_deref(),
                summary_only: args.summary,
                node: args.node,
                ranks,
                picture,
            },
            &mut |chunk| {
                let _ = print_human(chunk);
            },
        );
        if !args.summary {
            text += &render::placement_devices_text(&placement, args.node);
        }
        if membind != Membind::None {
            let mems_of = |r: usize| {
                let info = placement.info(r);
                let mems = numa_nodes(nodes[info.node as usize], &info.bound_logical);
                if bind == Bind::None {
                    "not bound (no CPU binding)".to_string()
                } else if mems.is_empty() {
                    "not bound (the topology names no NUMA node)".to_string()
                } else {
                    mems.to_string()
                }
            };
            if args.summary {
                // A summary: how many ranks get each set of NUMA nodes.
                let mut count: std::collections::BTreeMap<String, usize> = Default::default();
                for r in 0..placement.len() {
                    *count.entry(mems_of(r)).or_default() += 1;
                }
                let sets: Vec<String> = count.iter().map(|(m, n)| format!("{m}: {n}")).collect();
                text += &format!(
                    "memory binding {membind}: ranks per set of NUMA nodes (OS indexes) {}\n",
                    sets.join(", ")
                );
            } else {
                text += &format!("\nmemory binding {membind} (NUMA nodes, OS indexes):\n");
                let (first, last) = ranks.unwrap_or((0, u32::MAX));
                for r in (first as usize)..placement.len().min(last as usize + 1) {
                    let node = placement.info(r).node;
                    if args.node.is_some_and(|k| k != node) {
                        continue;
                    }
                    text += &format!("  rank {r:>4} node {node}: {}\n", mems_of(r));
                }
            }
        }
        if let Some(env) = env {
            text += &env.text(&placement, ranks, args.node);
        }
        if let (Some(path), Some(names)) = (&args.hostfile, &names) {
            text += &format!(
                "\nwrote {}: run SLURM_HOSTFILE={} srun -m arbitrary -n{} on nodes {}\n",
                path.display(),
                path.display(),
                placement.len(),
                names.join(",")
            );
        }
        print_human(&text)
    }
}

/// How srun deals the ranks to the nodes (`--distribution`, `--tasks-per-node`).
pub(crate) struct RankSplit {
    distribution: Distribution,
    /// What followed `:` in --distribution (Slurm's spread inside a node).
    inside: Option<String>,
    /// Whether the counts are srun's from each node's CPUs (not --tasks-per-node).
    from_cpus: bool,
    /// The global ranks of each node, ascending.
    pub(crate) ranks: Vec<Vec<u32>>,
}

impl RankSplit {
    /// The preview's lines on how the ranks reached the nodes.
    fn notes(&self, p: &Placement<'_>) -> Vec<String> {
        let counts: Vec<u32> = self.ranks.iter().map(|r| r.len() as u32).collect();
        let mut notes = vec![format!(
            "node assignment: srun -N{} -n{} -m {} (tasks per node {}{}); each node places its \
             own ranks in ascending order by layout {}, as the plugin does",
            self.ranks.len(),
            p.len(),
            self.distribution,
            count_list(&counts),
            if self.from_cpus {
                " for a job holding its nodes whole (--exclusive); --tasks-per-node takes a \
                 shared job's SLURM_TASKS_PER_NODE"
            } else {
                ""
            },
            p.request().layout
        )];
        if let Some(inside) = &self.inside {
            notes.push(format!(
                "-m {}:{inside}: where the tasks go inside a node is the layout's choice here; \
                 the plugin replaces Slurm's :{inside}",
                self.distribution
            ));
        }
        notes
    }
}

/// Whether `--distribution` asks for LAMA's own order across nodes (`arbitrary`).
pub(crate) fn lama_order(args: &MapArgs) -> bool {
    args.distribution
        .as_deref()
        .is_some_and(|d| d.split([':', ',']).next() == Some("arbitrary"))
}

/// How srun deals the ranks to these nodes (`--distribution`, srun's default block, with
/// srun's counts or `--tasks-per-node`): `None` with `-m arbitrary` (the layout spreads the
/// ranks over the nodes itself) and on one node without any of these options.
pub(crate) fn rank_split(
    args: &MapArgs,
    all_nodes: &Nodes,
    unit: CpuUnit,
) -> Result<Option<RankSplit>, Failure> {
    let nodes = all_nodes.machine_of();
    let counted = args.tasks_per_node.is_some() || args.ntasks_per_node.is_some();
    if lama_order(args) {
        if counted {
            return Err(Failure::Usage(
                "--tasks-per-node and --ntasks-per-node say how srun deals ranks to nodes, and \
                 -m arbitrary leaves that to the layout: give one or the other"
                    .into(),
            ));
        }
        return Ok(None);
    }
    if args.hostfile.is_some() {
        return Err(Failure::Usage(format!(
            "--hostfile writes LAMA's own order across nodes for srun -m arbitrary: add -d \
             arbitrary (srun's -m {} needs no hostfile)",
            args.distribution.as_deref().unwrap_or("block")
        )));
    }
    if nodes.len() <= 1 && args.distribution.is_none() && !counted {
        return Ok(None);
    }
    let (distribution, inside) =
        Distribution::parse(args.distribution.as_deref().unwrap_or("block"))
            .map_err(|e| Failure::Usage(format!("--{e}")))?;
    let (counts, from_cpus) = match &args.tasks_per_node {
        Some(list) => {
            let counts = parse_counts(list).map_err(|e| Failure::Usage(format!("--{e}")))?;
            let total: u64 = counts.iter().map(|&c| u64::from(c)).sum();
            if counts.len() != nodes.len() || total != u64::from(args.np) {
                return Err(Failure::Usage(format!(
                    "--tasks-per-node {list}: {} count(s) adding up to {total}, but there are {} \
                     node(s) and {} task(s)",
                    counts.len(),
                    nodes.len(),
                    args.np
                )));
            }
            (counts, false)
        }
        None => {
            // What each node can run: its available CPUs (as Slurm counts them) per task,
            // capped by --ntasks-per-node, as slurm_step_layout.c computes it; counted once
            // per distinct machine.
            let per_machine: Vec<u32> = all_nodes
                .machines()
                .iter()
                .map(|m| {
                    let logical: Vec<u32> = (0..m.pus().len() as u32)
                        .filter(|&p| m.pus()[p as usize].available)
                        .collect();
                    cpus_covered(m, &logical, unit)
                })
                .collect();
            let cpus: Vec<u32> = nodes
                .iter()
                .map(|&k| {
                    let c = (per_machine[k] / args.cpus_per_task.max(1)).max(1);
                    // Slurm passes --ntasks-per-node in the plane size, so plane=P keeps the
                    // node's CPUs.
                    match (args.ntasks_per_node, distribution) {
                        (Some(n), Distribution::Block | Distribution::Cyclic) => c.min(n),
                        _ => c,
                    }
                })
                .collect();
            if let Some(n) = args.ntasks_per_node {
                let most = u64::from(n) * nodes.len() as u64;
                if u64::from(args.np) > most {
                    return Err(Failure::Usage(format!(
                        "--ntasks-per-node {n} on {} node(s) holds at most {most} task(s), not \
                         {}: give fewer tasks, more nodes or a larger --ntasks-per-node",
                        nodes.len(),
                        args.np
                    )));
                }
            }
            (distribution.slurm_counts(&cpus, args.np), true)
        }
    };
    Ok(Some(RankSplit {
        distribution,
        inside: inside.map(str::to_string),
        from_cpus,
        ranks: distribution.ranks(&counts),
    }))
}

/// `--ranks FIRST[-LAST]` read against the `np` ranks placed.
pub(crate) fn rank_range(text: &str, np: usize) -> Result<(u32, u32), Failure> {
    let bad = |why: &str| {
        Failure::Usage(format!(
            "--ranks {text}: {why}; give one rank (7) or a range (100-199) of ranks 0-{}",
            np.saturating_sub(1)
        ))
    };
    let number = |t: &str| {
        t.trim()
            .parse::<u32>()
            .map_err(|_| bad("not a rank number"))
    };
    let (first, last) = match text.split_once('-') {
        Some((a, b)) => (number(a)?, number(b)?),
        None => (number(text)?, number(text)?),
    };
    if first > last {
        return Err(bad("the first rank is after the last"));
    }
    if first as usize >= np {
        return Err(bad(&format!("there are {np} ranks")));
    }
    Ok((first, last))
}

#[derive(serde::Serialize)]
pub(crate) struct JsonProcess {
    pub(crate) rank: u32,
    pub(crate) node: u32,
    pub(crate) pu: u32,
    pub(crate) cpus: Vec<u32>,
    /// NUMA nodes of the binding, with --membind only.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) mems: Option<Vec<u32>>,
    /// The variables the plugin sets in the task, with --env only (and in a layout led by
    /// 'g', always: the GPU and NIC variables).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) env: Option<std::collections::BTreeMap<&'static str, String>>,
    /// In a layout led by 'g': the task's GPUs as Slurm numbers them, their PCI bus ids and
    /// the task's NIC.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) gpus: Option<Vec<u32>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) gpu_bus_ids: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) nic: Option<String>,
}

/// `lama map --json`, one schema for every layout (a layout led by 'g' fills its GPU fields).
#[derive(serde::Serialize)]
pub(crate) struct JsonPlacement {
    pub(crate) processes: Vec<JsonProcess>,
    /// The request as placed (the binding is the one used, after -c widening).
    pub(crate) request: JsonRequest,
    /// Each node: its index, its name (--node-names, else the topology's), its PUs.
    pub(crate) nodes: Vec<JsonNode>,
    /// The nodes' GPUs and NICs, when their topologies have any.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) devices: Vec<JsonDevice>,
    /// How many tasks each node gets.
    pub(crate) tasks_per_node: Vec<u32>,
    /// What the placement says besides the ranks (the default binding's fallback, GPU notes),
    /// as printed after the table.
    pub(crate) notes: Vec<String>,
}

#[derive(serde::Serialize)]
pub(crate) struct JsonRequest {
    pub(crate) layout: String,
    pub(crate) bind: String,
    pub(crate) mppr: String,
    pub(crate) order: String,
    pub(crate) np: u32,
    pub(crate) membind: String,
    /// In a layout led by 'g': how the GPUs are given to the tasks.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) gpu: Option<JsonGpuRequest>,
}

/// The GPU part of a request (a layout led by 'g').
#[derive(serde::Serialize)]
pub(crate) struct JsonGpuRequest {
    pub(crate) gpus_per_task: u32,
    /// `k:g`: at most this many tasks per GPU.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) per_gpu: Option<u32>,
    /// Slurm binds the GPUs to the tasks (per_task); else LAMA chooses them.
    pub(crate) slurm_binds: bool,
    /// Each task sees only its own GPUs.
    pub(crate) isolate: bool,
}

#[derive(serde::Serialize)]
pub(crate) struct JsonNode {
    index: u32,
    name: String,
    topology: String,
    pus: usize,
    available: Vec<u32>,
}

impl JsonNode {
    /// Node `n` (`m`), named from `names` when given.
    pub(crate) fn of(n: usize, m: &Machine, names: Option<&[String]>) -> JsonNode {
        JsonNode {
            index: n as u32,
            name: names
                .and_then(|v| v.get(n).cloned())
                .unwrap_or_else(|| m.name().to_string()),
            topology: m.name().to_string(),
            pus: m.pus().len(),
            available: m.available().cpus().to_vec(),
        }
    }
}

/// A device of a node, with the ranks bound inside its locality.
#[derive(serde::Serialize)]
pub(crate) struct JsonDevice {
    node: u32,
    kind: &'static str,
    index: u32,
    vendor: String,
    bus_id: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    uuid: Option<String>,
    names: Vec<String>,
    near: String,
    cpus: Vec<u32>,
    ranks: Vec<u32>,
}

impl JsonDevice {
    /// Device `d` of node `n` (`m`), with the ranks bound inside its locality.
    pub(crate) fn of(n: usize, m: &Machine, d: &lama_engine::Device, ranks: Vec<u32>) -> Self {
        JsonDevice {
            node: n as u32,
            kind: d.kind.name(),
            index: d.index,
            vendor: d.vendor.clone(),
            bus_id: d.bus_id.clone(),
            uuid: d.uuid.clone(),
            names: d.names.clone(),
            near: d.near.clone(),
            cpus: render::device_cpus(m, d).cpus().to_vec(),
            ranks,
        }
    }
}

/// What `--env` shows: how the plugin would set each task's variables.
#[derive(Debug, Clone, Copy)]
struct EnvPreview {
    membind: Membind,
    /// With --omp: the CPUs per task and what Slurm counts as a CPU.
    omp: Option<(u32, CpuUnit)>,
}

impl EnvPreview {
    /// Rank `r`'s variables, as the plugin sets them in task_init (`OMP_NUM_THREADS` last, set
    /// by the plugin only when the job does not set it).
    fn of(&self, p: &Placement<'_>, r: usize) -> Vec<(&'static str, String)> {
        let info = p.info(r);
        let m = p.nodes()[info.node as usize];
        let req = p.request();
        let bound = req.bind != Bind::None;
        let labels = task_env::Labels::new(&req.layout, req.bind, &req.mppr, req.order);
        task_env::placed_variables(
            m,
            &task_env::Asked {
                labels: &labels,
                bound,
                membind: self.membind,
                omp: self.omp,
            },
            &info.cpus,
            (info.pu_os, info.pu_logical),
            &info.bound_logical,
        )
    }

    /// The `--env` section of the text: the variables every task shares once, then each
    /// rank's own (those of `ranks` only, on node `only` only).
    fn text(&self, p: &Placement<'_>, ranks: Option<(u32, u32)>, only: Option<u32>) -> String {
        let shared = [
            "LAMA_LAYOUT",
            "LAMA_BIND",
            "LAMA_MPPR",
            "LAMA_ORDER",
            "OMP_PROC_BIND",
        ];
        let mut out = String::from(
            "\nenvironment of each task, as the plugin sets it in task_init (OMP_NUM_THREADS only \
             when the job does not set it):\n",
        );
        if p.is_empty() {
            return out;
        }
        let first = self.of(p, 0);
        let common: Vec<String> = first
            .iter()
            .filter(|(k, _)| shared.contains(k))
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        out += &format!("  every task: {}\n", common.join(" "));
        let (from, to) = ranks.unwrap_or((0, u32::MAX));
        for r in (from as usize)..p.len().min(to as usize + 1) {
            if only.is_some_and(|n| p.info(r).node != n) {
                continue;
            }
            let own: Vec<String> = self
                .of(p, r)
                .into_iter()
                .filter(|(k, _)| !shared.contains(k))
                .map(|(k, v)| format!("{k}={v}"))
                .collect();
            out += &format!("  rank {r:>4}: {}\n", own.join(" "));
        }
        out
    }
}

fn json(
    p: &Placement<'_>,
    membind: Membind,
    names: Option<&[String]>,
    env: Option<EnvPreview>,
    notes: Vec<String>,
) -> String {
    let processes = (0..p.len())
        .map(|r| {
            let info = p.info(r);
            let mems = (membind != Membind::None).then(|| {
                numa_nodes(p.nodes()[info.node as usize], &info.bound_logical)
                    .cpus()
                    .to_vec()
            });
            JsonProcess {
                rank: info.rank,
                node: info.node,
                pu: info.pu_os,
                cpus: info.cpus.cpus().to_vec(),
                mems,
                env: env.map(|e| e.of(p, r).into_iter().collect()),
                gpus: None,
                gpu_bus_ids: None,
                nic: None,
            }
        })
        .collect();
    let devices = p
        .nodes()
        .iter()
        .enumerate()
        .flat_map(|(n, m)| {
            m.devices()
                .iter()
                .map(move |d| JsonDevice::of(n, m, d, render::ranks_near(p, n as u32, d)))
        })
        .collect();
    let req = p.request();
    let request = JsonRequest {
        layout: req.layout.to_string(),
        bind: req.bind.to_string(),
        mppr: req.mppr.to_string(),
        order: req.order.to_string(),
        np: req.np,
        membind: membind.to_string(),
        gpu: None,
    };
    let nodes = p
        .nodes()
        .iter()
        .enumerate()
        .map(|(n, m)| JsonNode::of(n, m, names))
        .collect();
    let mut s = serde_json::to_string(&JsonPlacement {
        processes,
        request,
        nodes,
        devices,
        tasks_per_node: p.tasks_per_node(),
        notes,
    })
    .unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}"));
    s.push('\n');
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_full_picture_gives_way_to_the_compact_one_where_it_would_not_fit() {
        use render::PictureMode::{Compact as C, Full, None as NoPicture};
        use PictureWhen::*;
        // Into a pipe or a file (no terminal), auto keeps the full picture.
        let row = |n: usize| move || n;
        assert_eq!(show_picture(Auto, None, row(400)), Full);
        assert_eq!(show_picture(Auto, Some(400), row(400)), Full);
        assert_eq!(show_picture(Auto, Some(100), row(330)), C);
        assert_eq!(show_picture(Always, Some(100), row(330)), Full);
        assert_eq!(show_picture(Compact, None, row(10)), C);
        assert_eq!(show_picture(Never, None, row(10)), NoPicture);
    }

    #[test]
    fn prose_is_wrapped_to_the_terminal_and_tables_are_not() {
        let prose = "summary: ".to_string() + &"word ".repeat(30);
        let text = format!("{prose}\n  rank  picture  {}\nshort\n", "x".repeat(90));
        let fitted = fit(&text, Some(40));
        for line in fitted.lines().filter(|l| !l.starts_with("  rank")) {
            assert!(line.chars().count() <= 40, "{line}");
        }
        assert!(fitted.contains(&format!("  rank  picture  {}\n", "x".repeat(90))));
        assert!(fitted.ends_with("short\n"));
        assert_eq!(fit(&text, None), text);
    }

    #[test]
    fn command_line_definition_is_consistent() {
        command(false).debug_assert();
    }

    #[test]
    fn plugin_dir_is_read_from_scontrol_show_config() {
        let config = "Configuration data as of 2026-11-26T10:00:00\n\
                      PlugStackConfig         = /etc/slurm/plugstack.conf\n\
                      PluginDir               = /usr/local/lib/slurm:/opt/site/slurm\n\
                      SlurmdSpoolDir          = /var/spool/slurmd\n";
        assert_eq!(
            plugin_dir(config).as_deref(),
            Some("/usr/local/lib/slurm:/opt/site/slurm")
        );
        assert_eq!(
            plugin_dir("PlugStackConfig = /etc/slurm/plugstack.conf\n"),
            None
        );
    }

    #[test]
    fn plugin_version_reads_the_marker() {
        let dir = tempfile::tempdir().unwrap();
        let so = dir.path().join("spank_lama.so");
        let mut file = b"\x7fELF\0junk ".to_vec();
        file.extend_from_slice(&lama_slurm::built_for::encode(0x1a0505));
        file.extend_from_slice(b"\0more");
        std::fs::write(&so, file).unwrap();
        let path = so.to_str().unwrap();
        assert_eq!(
            plugin_version(path),
            format!("plugin: {path}, built for Slurm 26.05.5")
        );
        std::fs::write(&so, b"\x7fELF other").unwrap();
        assert!(plugin_version(path).ends_with("is not a spank-lama plugin"));
        let missing = dir.path().join("none.so");
        assert!(plugin_version(missing.to_str().unwrap()).contains("set LAMA_PLUGIN"));
        // Only --version reads the plugin.
        assert!(!version_text(false).contains("plugin"));
        assert_eq!(version_text(false).lines().count(), 1);
    }

    #[test]
    fn the_manual_page_has_every_subcommand_and_option() {
        let cmd = command(false);
        let page = manual::man_page(&cmd, "0.0.0");
        for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
            assert!(
                page.contains(&format!(".SS \"lama {}\"", sub.get_name())),
                "{}",
                sub.get_name()
            );
            for arg in sub.get_arguments().filter(|a| !a.is_hide_set()) {
                if let Some(long) = arg.get_long() {
                    let tag = lama_man::escape(&format!("--{long}"));
                    assert!(page.contains(&tag), "{} --{long}", sub.get_name());
                }
            }
        }
        for section in ["EXIT STATUS", "JSON OUTPUT", "EXAMPLES", "ENVIRONMENT"] {
            assert!(page.contains(&format!(".SH \"{section}\"")), "{section}");
        }
    }
}

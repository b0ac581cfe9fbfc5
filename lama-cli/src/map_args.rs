//! `lama map`'s options: the request, the nodes, how srun deals the ranks, the GPUs, and what
//! is shown.

use crate::emit;
use crate::output::PictureWhen;
use clap::Args;
use lama_engine::{BIND_ALIASES, MAP_ALIASES};

#[derive(Args, Debug)]
pub(crate) struct MapArgs {
    /// A node's topology: hwloc XML, a synthetic description, or `host` [default: host].
    ///
    /// An hwloc XML file (`lstopo --of xml`, `lama export`), an hwloc synthetic description
    /// ("pack:2 core:8 pu:2"), or `host` (this machine). Repeat for one node each, in order.
    #[arg(long = "topology", value_name = "T")]
    pub(crate) topologies: Vec<String>,
    /// With one --topology: that many identical nodes.
    #[arg(long, short = 'N', value_name = "N")]
    pub(crate) nodes: Option<u32>,
    /// Number of processes (1 or more), as srun's -n/--ntasks.
    #[arg(long, short = 'n', visible_alias = "ntasks", value_name = "NP",
          value_parser = clap::value_parser!(u32).range(1..))]
    pub(crate) np: u32,
    /// Mapping layout (e.g. scbnh) or alias (hwthread core l1cache l2cache l3cache numa socket node).
    #[arg(long, visible_alias = "lama-map", value_name = "LAYOUT", hide_possible_values = true,
          required_unless_present = "slurm",
          value_parser = Suggest(MAP_ALIASES.iter().map(|(a, _)| *a).collect()))]
    pub(crate) map: Option<String>,
    /// Show what Slurm itself gives each task, without LAMA.
    ///
    /// The step's CPUs and each task's
    /// binding as task/affinity makes it (with -m, -c, --cpu-bind, --hint, ...). A pasted
    /// line without --lama-map shows this.
    #[arg(long, conflicts_with_all = ["map", "emit", "env", "hostfile"])]
    pub(crate) slurm: bool,
    /// Show Slurm's own placement and the layout's side by side.
    ///
    /// Rank by rank, with how many
    /// tasks share a core, an L3 cache, a NUMA node or a socket either way.
    #[arg(long, requires = "map", conflicts_with_all = ["json", "emit", "summary"])]
    pub(crate) compare: bool,
    /// With --slurm or --compare: Slurm's --cpu-bind.
    ///
    /// none, threads, cores, sockets, ldoms,
    /// map_cpu:LIST, mask_cpu:LIST. Without --slurm or --compare it is read as --bind.
    #[arg(long, value_name = "KIND")]
    pub(crate) cpu_bind: Option<String>,
    /// With --slurm or --compare: the step takes only the cores its tasks' CPUs need (srun's
    /// --exact; -c and srun's --exclusive imply it), else every CPU the job has on a node.
    #[arg(long, hide_short_help = true)]
    pub(crate) exact: bool,
    /// With --slurm or --compare: srun's --hint (nomultithread, multithread, compute_bound).
    #[arg(long, value_name = "HINT", hide_short_help = true)]
    pub(crate) hint: Option<String>,
    /// With --slurm or --compare: srun's --threads-per-core.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..), hide_short_help = true)]
    pub(crate) threads_per_core: Option<u32>,
    /// With --slurm or --compare: srun's --ntasks-per-core.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..), hide_short_help = true)]
    pub(crate) ntasks_per_core: Option<u32>,
    /// With --slurm or --compare: srun's --ntasks-per-socket.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..), hide_short_help = true)]
    pub(crate) ntasks_per_socket: Option<u32>,
    /// With --slurm or --compare: the site's binding for steps without --cpu-bind (CpuBind=
    /// of the node or partition, else TaskPluginParam's: none, threads, cores, sockets).
    /// [default: Slurm's automatic binding]
    #[arg(long, value_name = "KIND", hide_short_help = true)]
    pub(crate) default_cpu_bind: Option<String>,
    /// With --slurm or --compare: TaskPluginParam=autobind= (threads, cores, sockets), where
    /// Slurm's automatic binding finds none.
    #[arg(long, value_name = "UNIT", hide_short_help = true)]
    pub(crate) autobind: Option<String>,
    /// Whether -c was given (it makes a Slurm step exact); set from the command line.
    #[arg(skip)]
    pub(crate) c_given: bool,
    /// Binding width (e.g. 1c, 2L2, 1s) or alias, or none.
    ///
    /// [default: 1c, or with
    /// --cpus-per-task N the narrowest binding of N CPUs, as the plugin does; with a layout
    /// led by 'g' and no -c, each task's share of the CPUs near its GPUs]
    #[arg(long, visible_alias = "lama-bind", value_name = "WIDTH", hide_possible_values = true,
          value_parser = Suggest(BIND_ALIASES.iter().map(|(a, _)| *a).collect()))]
    pub(crate) bind: Option<String>,
    /// CPUs per process, as Slurm's -c/--cpus-per-task.
    ///
    /// Without --bind, each process is bound
    /// to at least N CPUs, kept inside the smallest enclosing object where possible.
    #[arg(long, short = 'c', value_name = "N", default_value_t = 1,
          value_parser = clap::value_parser!(u32).range(1..=65536))]
    pub(crate) cpus_per_task: u32,
    /// What Slurm counts as one CPU on these nodes: thread (CPUs= counts hardware threads) or
    /// core (CPUs= counts cores).
    #[arg(long, value_name = "thread|core", default_value = "thread",
          value_parser = ["thread", "core"], hide_short_help = true)]
    pub(crate) cpu_unit: String,
    /// Memory binding: local or preferred (the NUMA nodes of each binding), or none. Shown per
    /// process, and as "mems" in --json.
    #[arg(
        long,
        visible_alias = "lama-membind",
        value_name = "local|preferred|none",
        default_value = "none",
        hide_short_help = true
    )]
    pub(crate) membind: String,
    /// With -m arbitrary: write the SLURM_HOSTFILE (one node name per rank) that makes
    /// `srun -m arbitrary` put every rank on the node this placement puts it on. Needs
    /// --node-names.
    #[arg(
        long,
        value_name = "FILE",
        requires = "node_names",
        hide_short_help = true
    )]
    pub(crate) hostfile: Option<std::path::PathBuf>,
    /// The nodes' names, in --topology order, as a Slurm hostlist (node[1-3]).
    #[arg(long, value_name = "HOSTLIST", hide_short_help = true)]
    pub(crate) node_names: Option<String>,
    /// Maximum processes per resource, e.g. 1:c,4:s (first pass only). Default: no limit.
    #[arg(long, visible_alias = "lama-mppr", value_name = "LIMITS", value_hint = clap::ValueHint::Other, hide_short_help = true)]
    pub(crate) mppr: Option<String>,
    /// Rank ordering: n (natural) or s (sequential).
    #[arg(
        long,
        visible_alias = "lama-order",
        value_name = "n|s",
        default_value = "n",
        hide_short_help = true
    )]
    pub(crate) order: String,
    /// Also print each level's width (the positions the layout's round-robin counts).
    #[arg(long, hide_short_help = true)]
    pub(crate) explain: bool,
    /// Print the request and the summary only, no table (for large previews).
    #[arg(long, conflicts_with = "json")]
    pub(crate) summary: bool,
    /// Print only this node's table (0 is the first node).
    #[arg(
        long,
        value_name = "INDEX",
        conflicts_with = "json",
        hide_short_help = true
    )]
    pub(crate) node: Option<u32>,
    /// How srun deals the ranks to the nodes, as srun's -m (block, cyclic, plane=P).
    ///
    /// Block (srun's default), cyclic or
    /// plane=P; each node then places its own ranks by the layout, as the plugin does. Or
    /// arbitrary: LAMA's own order across nodes (the layout spreads the ranks over the nodes),
    /// which only `srun -m arbitrary` with the SLURM_HOSTFILE --hostfile writes reproduces.
    /// [default: block]
    #[arg(long, short = 'm', value_name = "block|cyclic|plane=P|arbitrary")]
    pub(crate) distribution: Option<String>,
    /// The tasks of each node as the job's SLURM_TASKS_PER_NODE shows them (4,4,2 or
    /// 4(x2),2). Default: srun's counts for a job that holds its nodes whole (--exclusive).
    #[arg(
        long,
        value_name = "LIST",
        conflicts_with = "ntasks_per_node",
        hide_short_help = true
    )]
    pub(crate) tasks_per_node: Option<String>,
    /// As srun's --ntasks-per-node: at most N tasks on each node.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..), hide_short_help = true)]
    pub(crate) ntasks_per_node: Option<u32>,
    /// Also print each task's environment as the plugin sets it (LAMA_*, and with --omp the
    /// OpenMP variables); in --json, an "env" object per process.
    #[arg(long, conflicts_with = "summary", hide_short_help = true)]
    pub(crate) env: bool,
    /// The tables' picture column: auto (the full picture, or on a terminal too narrow for it
    /// the compact one: package[0][core:0-1] as Open MPI 5 writes it), always (the full one),
    /// compact or never.
    #[arg(long, value_enum, value_name = "WHEN", default_value_t = PictureWhen::Auto, hide_short_help = true)]
    pub(crate) picture: PictureWhen,
    /// As --lama-omp: OMP_PLACES (one place per bound core, or per thread with -c counting
    /// threads), OMP_PROC_BIND=close and OMP_NUM_THREADS, shown with --env.
    #[arg(
        long,
        visible_alias = "lama-omp",
        requires = "env",
        hide_short_help = true
    )]
    pub(crate) omp: bool,
    /// After the tables, the legend: what the picture's characters, the columns and the
    /// request's words mean (without it, one line says --legend shows it).
    #[arg(long, conflicts_with_all = ["json", "summary", "emit"], hide_short_help = true)]
    pub(crate) legend: bool,
    /// Print only these ranks' rows: one rank (7) or a range (100-199); nodes without any of
    /// them are left out.
    #[arg(long, value_name = "FIRST[-LAST]", conflicts_with_all = ["json", "summary"], hide_short_help = true)]
    pub(crate) ranks: Option<String>,
    /// Allow more processes than positions (further passes ignore MPPR limits); srun's
    /// spelling --overcommit is accepted too.
    #[arg(long, visible_alias = "overcommit", hide_short_help = true)]
    pub(crate) oversubscribe: bool,
    /// Limit the available PUs to these OS indexes, as a job's cpuset does.
    ///
    /// CPULIST (e.g. 2-3)
    /// for every node, NODE=CPULIST for one node (its index from 0, or its --node-names name).
    /// Repeat for several nodes.
    #[arg(long, value_name = "[NODE=]CPULIST")]
    pub(crate) restrict: Vec<String>,
    /// Machine-readable output: {"processes":[{"rank":0,"node":0,"pu":5,"cpus":[4,5]},...]}.
    #[arg(long)]
    pub(crate) json: bool,
    /// With a layout led by 'g': GPUs per task, as srun's --gpus-per-task, which makes Slurm
    /// bind them to the tasks in order (per_task:K): each task keeps Slurm's GPUs and LAMA
    /// places its CPUs near them. Without it each task gets one GPU, chosen by LAMA.
    #[arg(long, value_name = "K",
          value_parser = clap::value_parser!(u32).range(1..=1024), hide_short_help = true)]
    pub(crate) gpus_per_task: Option<u32>,
    /// With a layout led by 'g': Slurm's GPU binding, as srun's --gpu-bind: none (LAMA
    /// chooses each task's GPUs, also with --gpus-per-task), per_task:K or single:1
    /// (--ntasks-per-gpu=1).
    #[arg(long, value_name = "none|per_task:K|single:1", hide_short_help = true)]
    pub(crate) gpu_bind: Option<String>,
    /// With a layout led by 'g': tasks per GPU, as srun's --ntasks-per-gpu, which makes Slurm
    /// give each task one GPU (single:N) unless --gpu-bind says otherwise: with 1 each task
    /// keeps its own GPU and LAMA places its CPUs near it; with more, tasks share GPUs and the
    /// plugin refuses a layout led by 'g'.
    #[arg(long, value_name = "N",
          value_parser = clap::value_parser!(u32).range(1..=1024), hide_short_help = true)]
    pub(crate) ntasks_per_gpu: Option<u32>,
    /// With a layout led by 'g': the GPUs of each node the step has, as Slurm numbers them
    /// (SLURM_STEP_GPUS, e.g. 0,2). Default: all of the node's GPUs.
    #[arg(long, value_name = "LIST", hide_short_help = true)]
    pub(crate) gpus: Option<String>,
    /// With a layout led by 'g': each task sees only its own GPUs (--lama-gpu-isolate).
    #[arg(long, visible_alias = "lama-gpu-isolate", hide_short_help = true)]
    pub(crate) gpu_isolate: bool,
    /// The site's cgroup.conf says ConstrainDevices=yes: each task's variables number its
    /// visible GPUs from 0, as Slurm then does (default: by Slurm's indexes, ConstrainDevices=no).
    #[arg(long, hide_short_help = true)]
    pub(crate) constrain_devices: bool,
    /// Write the placement in a launcher's own format instead of the table: rankfile (Open
    /// MPI, PRRTE: mpirun --map-by rankfile:file=FILE), machinefile (hydra: mpiexec -f FILE)
    /// or srun (its -m and --cpu-bind=mask_cpu, where every node's list is the same).
    #[arg(long, value_enum, value_name = "FORMAT", hide_short_help = true)]
    pub(crate) emit: Option<emit::Emit>,
    /// The srun (or sbatch, salloc) line to preview, after `--`.
    ///
    /// The line (`-- srun -N2 -n8 -c2
    /// --lama-map=scbnh ./app`): its -N, -n, -c, -m, --ntasks-per-node, --gpus-per-task,
    /// --gpu-bind, -w, -O and --lama-* options are read as lama map's, with the counts srun
    /// derives (-n from -N, -N from -w) and an sbatch script's #SBATCH lines; those that place
    /// nothing (-p, -t, -J, --mem, -o, ...) are left out with a note; the program is not read.
    #[arg(last = true, value_name = "srun LINE")]
    pub(crate) srun: Vec<String>,
}

impl MapArgs {
    /// The layout asked for (empty with --slurm, which takes none).
    pub(crate) fn layout(&self) -> &str {
        self.map.as_deref().unwrap_or_default()
    }

    /// Whether an option only Slurm's own placement reads was given.
    pub(crate) fn slurm_only_option(&self) -> Option<&'static str> {
        [
            (self.hint.is_some(), "--hint"),
            (self.threads_per_core.is_some(), "--threads-per-core"),
            (self.ntasks_per_core.is_some(), "--ntasks-per-core"),
            (self.ntasks_per_socket.is_some(), "--ntasks-per-socket"),
            (self.default_cpu_bind.is_some(), "--default-cpu-bind"),
            (self.autobind.is_some(), "--autobind"),
            (self.exact, "--exact"),
        ]
        .into_iter()
        .find(|(given, _)| *given)
        .map(|(_, name)| name)
    }
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

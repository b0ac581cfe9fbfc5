//! lama(1), generated from the command-line definition itself (every subcommand, option, value
//! name, default and choice, with the help text `lama ... --help` prints) and from the exit
//! statuses, JSON contract and examples that the help also shows. `lama manpage` prints it.

use lama_man::Page;

/// Exit statuses (also in `lama --help`).
pub const EXIT_STATUS: [(&str, &str); 3] = [
    ("0", "success: placed, planned, shown or written"),
    (
        "1",
        "the request cannot be placed (too many processes for the positions, an empty cpuset), \
         or a file cannot be written; for lama verify, a task differs from its placement \
         (with a program, the program's own failure status is passed on instead)",
    ),
    (
        "2",
        "usage or syntax error: the message says what was wrong and what would work",
    ),
];

/// The JSON that `lama map --json` and `lama plan --json` print (also in `lama --help`).
pub const JSON_CONTRACT: &str = "lama map --json prints one object on one line: \
{\"processes\":[{\"rank\":0,\"node\":0,\"pu\":5,\"cpus\":[4,5]},...]}: per rank in rank order, \
the node's index in --topology order, the OS index of the PU it is mapped to and the OS indexes \
of the CPUs it is bound to; with --membind, \"mems\": the OS indexes of its NUMA nodes; in a \
layout led by g, \"gpus\", \"gpu_bus_ids\", \"nic\", and \"bind\" where the tasks got different \
bindings. Then \"request\" (layout, bind, mppr, order, np, membind as placed: bind is the \
binding every task got), \"nodes\" (index, name: \
--node-names or the topology's, topology, pus, available: OS indexes) and, when a topology has \
I/O objects, \"devices\" (node, kind gpu or nic, index, vendor, bus_id, uuid, names, near, \
cpus, ranks bound inside). \
lama verify --json prints one object per task: {\"rank\":3,\"node\":\"node1\",\"agrees\":true,\
\"bind\":\"1c\",\"cpus\":[3],\"threads\":[{\"pid\":P,\"tid\":T,\"name\":N,\"cpus\":[3]}],\
\"pages\":{\"0\":412},\"differences\":[]}, with membind, mems and policy when memory is \
bound, gpus and gpus_open with LAMA_GPUS, expected with --expect. \
lama plan --json prints {\"processes\":[...],\"cost\":{\"winner\":NAME,\"plan\":COST,\
\"candidates\":{NAME:COST or null,...}}}. Fields are only ever added.";

/// The layout language, with a worked example and the spellings of Slurm and Open MPI (in
/// `lama map --help` and lama(1)).
pub const LANGUAGE: &str = "\
The layout (--map) is a string of level tokens, innermost (fastest-varying)
first:
  n node  b board  s socket (package)  D die  N NUMA node  L3 L2 L1 caches
  c core  h hardware thread
Ranks are dealt round-robin over the leftmost level; each time it wraps, the
next level advances. n and h are added at the end when missing. Aliases: core
= csbnh, socket = scbnh, numa = Nscbnh, node = nscbh, hwthread = hcsbn (binds
1h unless --bind), l3cache = L3scbnh (as Open MPI's --map-by of the same
word).

Worked example: 2 nodes of 2 sockets x 2 cores (\"pack:2 core:2 pu:1\": cores
P#0-1 in socket 0, P#2-3 in socket 1), 4 ranks, one core each:
  layout  rank 0     rank 1     rank 2     rank 3
  csbnh   node0 P#0  node0 P#1  node0 P#2  node0 P#3  cores: a node in order
  scbnh   node0 P#0  node0 P#2  node0 P#1  node0 P#3  sockets alternate
  nscbh   node0 P#0  node1 P#0  node0 P#2  node1 P#2  nodes, then sockets
That is LAMA's own order across nodes (lama map -m arbitrary; srun -m
arbitrary with the SLURM_HOSTFILE that --hostfile writes). A plain srun deals
the ranks to the nodes itself (-m block by default: ranks 0,1 on node0, 2,3 on
node1) and the plugin places each node's ranks by the layout; lama map shows
that by default, with -m cyclic or -m plane=P as srun's -m.

The binding (--bind) is <count><token>: 1c one core, 2c two cores, 1s the
socket, 1N the NUMA node, 1h one hardware thread, none. The MPPR (--mppr,
maximum processes per resource) is a list of count:token limits: 1:c,2:s
allows at most one rank per core and two per socket; positions over a limit
are skipped.

Oversubscribing (--oversubscribe) after a pass that the MPPR cut short, a
departure from Open MPI 1.8's LAMA: the next pass ignores the limits and fills
the positions still free first, then starts again from the first position.
With \"pack:2 core:2 pu:1\", --np 3, --map csbnh, --bind 1h and --mppr 1:s,
ranks 0 and 1 take PU 0 and PU 2, and rank 2 goes to PU 1, where a pass
restarted from the first position (the paper's rule, Open MPI 1.8) would stack
it on PU 0 beside rank 0 while PUs 1 and 3 stay idle. No CPU is shared while
one is free.

Coming from Slurm or Open MPI:
  srun -m block:block --cpu-bind=cores        --map csbnh --bind 1c
  srun -m block:cyclic --cpu-bind=cores       --map scbnh --bind 1c
  srun -m cyclic:cyclic --cpu-bind=sockets    -m cyclic --map scbnh --bind 1s
  mpirun --map-by core --bind-to core         --map csbnh --bind 1c
  mpirun --map-by package --bind-to package   --map scbnh --bind 1s
  mpirun --map-by numa --bind-to numa         --map Nscbnh --bind 1N
  mpirun --map-by ppr:2:package               --map csbnh --mppr 2:s
What Slurm itself gives each task, without LAMA: --slurm with srun's options
(-m, -c, --cpu-bind, --hint, ...), or a pasted line without --lama-map;
--compare shows it beside a layout, rank by rank.";

/// Examples (also in `lama --help`), each line within 76 columns: `lama --help` indents
/// them by two (a `\` or `|` at a line's end continues the command).
pub const EXAMPLES: &str = "\
lama map --topology \"pack:2 core:4 pu:2\" --nodes 2 --np 24 --map scbnh \\
    --bind none -m arbitrary
lama map --topology node.xml --np 8 --map socket --bind 1c --json
lama map --topology node.xml --np 4 --cpus-per-task 4 --map scbnh \\
    --membind local
lama map --topology node.xml --nodes 3 --np 7 --map scbnh -m cyclic
lama map --topology a.xml --topology b.xml --np 6 --map scbnh \\
    --node-names n[1-2] --restrict n2=0-3
lama map --topology node.xml --np 8 -c 2 --map scbnh --env --omp
lama map --topology node.xml --nodes 4000 --np 288000 --map scbnh \\
    --ranks 1000-1099
lama plan --matrix comm.mat --np 96 --topology /etc/slurm/topology/%n.xml \\
    --node-names node[1-4] --out job
srun -N2 -n8 --lama-map=scbnh lama verify --json |
    lama verify --collect --np 8
srun -n4 --lama-map=scbnh lama verify -- ./app
lama topology host
lama export /etc/slurm/topology/$(hostname -s).xml
lama completions bash > /usr/share/bash-completion/completions/lama";

fn arg_tag(arg: &clap::Arg) -> (String, Option<String>) {
    let mut names = Vec::new();
    if let Some(s) = arg.get_short() {
        names.push(format!("-{s}"));
    }
    if let Some(l) = arg.get_long() {
        names.push(format!("--{l}"));
    }
    let value = arg.get_value_names().map(|v| {
        v.iter()
            .map(|s| s.to_string())
            .collect::<Vec<_>>()
            .join(" ")
    });
    if names.is_empty() {
        // A positional argument.
        return (value.unwrap_or_else(|| arg.get_id().to_string()), None);
    }
    (
        names.join(", "),
        value.filter(|_| arg.get_action().takes_values()),
    )
}

fn arg_text(arg: &clap::Arg) -> String {
    let mut text = arg
        .get_long_help()
        .or(arg.get_help())
        .map(|h| h.to_string())
        .unwrap_or_default();
    let choices: Vec<String> = arg
        .get_possible_values()
        .iter()
        .filter(|v| !v.is_hide_set())
        .map(|v| v.get_name().to_string())
        .collect();
    let takes_value = arg.get_action().takes_values();
    if takes_value
        && !choices.is_empty()
        && !arg.is_hide_possible_values_set()
        && !text.contains("possible values")
    {
        text += &format!(" [possible values: {}]", choices.join(", "));
    }
    let defaults: Vec<String> = arg
        .get_default_values()
        .iter()
        .map(|v| v.to_string_lossy().into_owned())
        .collect();
    if takes_value && !defaults.is_empty() {
        text += &format!(" [default: {}]", defaults.join(" "));
    }
    text
}

fn options(page: &mut Page, cmd: &clap::Command) {
    for arg in cmd.get_arguments().filter(|a| !a.is_hide_set()) {
        let (tag, value) = arg_tag(arg);
        page.item(&tag, value.as_deref(), &arg_text(arg));
    }
}

/// The page, for the command `cmd` (the one `lama` parses its arguments with).
pub fn man_page(cmd: &clap::Command, version: &str) -> String {
    let mut p = Page::new("lama", 1, &format!("spank-lama {version}"), "User Commands");
    p.section("name").paragraph(&format!(
        "lama - {}",
        cmd.get_about().map(|a| a.to_string()).unwrap_or_default()
    ));
    p.section("synopsis");
    let mut synopsis = String::from("lama [--color auto|always|never] COMMAND [OPTIONS]\n");
    synopsis += "lama --version | --help\n";
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        synopsis += &format!("lama {}", sub.get_name());
        for arg in sub
            .get_arguments()
            .filter(|a| a.is_required_set() && !a.is_positional())
        {
            let flag = arg
                .get_short()
                .map(|c| format!("-{c}"))
                .or_else(|| arg.get_long().map(|l| format!("--{l}")))
                .unwrap_or_default();
            let value = arg
                .get_value_names()
                .and_then(|v| v.first().map(|n| n.to_string()))
                .unwrap_or_default();
            synopsis += &format!(" {flag} {value}");
        }
        synopsis += " [OPTIONS]";
        for arg in sub.get_positionals() {
            let (tag, _) = arg_tag(arg);
            synopsis += &if arg.is_required_set() {
                format!(" {tag}")
            } else {
                format!(" [{tag}]")
            };
        }
        synopsis.push('\n');
    }
    p.literal(&synopsis);
    p.section("description");
    if let Some(text) = cmd.get_long_about() {
        p.paragraph(&text.to_string());
    }
    p.paragraph(
        "It uses the same engine as the spank-lama(8) plugin: what lama shows for a node's \
         topology and cpuset is what the plugin does there.",
    );
    p.section("global options");
    options(&mut p, cmd);
    p.item("-h, --help", None, "Print help (a summary with -h).")
        .item(
            "-V, --version",
            None,
            "Print lama's and the engine's versions, and the Slurm release the installed \
             plugin was built for (see LAMA_PLUGIN).",
        );
    p.section("commands");
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        p.subsection(&format!("lama {}", sub.get_name()));
        if let Some(about) = sub.get_long_about().or(sub.get_about()) {
            p.paragraph(&about.to_string());
        }
        options(&mut p, sub);
    }
    p.section("the layout language").literal(LANGUAGE);
    p.section("exit status");
    for (code, meaning) in EXIT_STATUS {
        p.item(code, None, meaning);
    }
    p.section("json output").paragraph(JSON_CONTRACT);
    p.section("environment")
        .item(
            "NO_COLOR",
            None,
            "When set to a non-empty value, --color=auto does not colour (no-color.org).",
        )
        .item(
            "LAMA_PLUGIN",
            None,
            "Where lama --version looks for the installed plugin; by default spank_lama.so in \
             the running Slurm's PluginDir (scontrol show config), then in the plugin \
             directory this lama was built for.",
        );
    p.section("examples").literal(EXAMPLES);
    p.section("see also")
        .paragraph("spank-lama(8), srun(1), hwloc(7), lstopo(1)");
    p.finish()
}

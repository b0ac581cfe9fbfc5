//! `lama map` with a layout led by `g`: which task gets which GPU, NIC and CPUs, node by node,
//! with tasks split over the nodes as `srun -N -n` does by default (docs/devices.md).

use crate::json::{JsonDevice, JsonGpuRequest, JsonNode, JsonPlacement, JsonProcess, JsonRequest};
use crate::map_args::MapArgs;
use crate::nodes::{cpu_unit, nodes_of};
use crate::output::{picture_for, print, print_human};
use crate::ranks::{lama_order, rank_range, rank_split};
use crate::Failure;
use lama_engine::{
    gpu_name, numa_nodes, place_bound, place_bound_in_order, place_by_gpu_ranked, render, Bind,
    Device, DeviceKind, GpuError, GpuRequest, GpuTask, Machine, Membind,
};
use lama_slurm::distribution::count_list;
use lama_slurm::gpu::{
    group_notes, nic_variables, parse_indexes, step_gpus, task_variables, visible_variable,
    SlurmGpuBind,
};
use lama_slurm::task_env;

/// The variables the plugin would set for this task: Slurm's value of the vendor variable for
/// the step names the GPUs by Slurm's indexes, or by their place in the step's list under
/// `ConstrainDevices=yes` (`constrained`); with Slurm's per-task binding (`fixed`) Slurm's own
/// value for the task is kept: its GPUs, numbered from 0 under `ConstrainDevices=yes`.
fn variables(
    m: &Machine,
    gpus: &[&Device],
    slurm: &[u32],
    t: &GpuTask,
    isolate: bool,
    (fixed, constrained): (bool, bool),
) -> Vec<(&'static str, String)> {
    let tokens: Vec<String> = (0..gpus.len())
        .map(|i| match constrained {
            true => i.to_string(),
            false => slurm[i].to_string(),
        })
        .collect();
    let vendor = gpus.first().map_or("", |d| d.vendor.as_str());
    let buses: Vec<String> = gpus.iter().map(|d| d.bus_id.clone()).collect();
    if fixed {
        // Slurm's value for the task, which the plugin leaves alone.
        let own: Vec<String> = match constrained {
            true => (0..t.gpus.len()).map(|i| i.to_string()).collect(),
            false => t.gpus.iter().map(|&g| slurm[g].to_string()).collect(),
        };
        let mut env = task_variables(vendor, None, slurm, &buses, &t.gpus, isolate);
        env.push((visible_variable(vendor), own.join(",")));
        if let Some(n) = t.nic {
            env.extend(nic_variables(&m.devices()[n]));
        }
        return env;
    }
    let mut env = task_variables(
        vendor,
        Some(tokens.as_slice()),
        slurm,
        &buses,
        &t.gpus,
        isolate,
    );
    if let Some(n) = t.nic {
        env.extend(nic_variables(&m.devices()[n]));
    }
    env
}

/// The task's `LAMA_*` and OpenMP variables, as the plugin sets them (lama-slurm's
/// task_env): the layout and binding as written (`gcsbnh`, `1g`), memory bound to the NUMA
/// nodes of its CPUs with `--membind`, OpenMP places with `--omp`.
fn lama_variables(
    m: &Machine,
    req: &GpuRequest,
    t: &GpuTask,
    membind: Membind,
    args: &MapArgs,
) -> Vec<(&'static str, String)> {
    // The binding the task's group used (widened for -c, or its exact fallback), as the
    // plugin's LAMA_BIND says.
    let bind = task_env::bind_label(t.bind, || req.bind_text());
    let labels = task_env::Labels::new(req.layout_text(), bind, &req.mppr, req.order);
    let asked = task_env::Asked {
        labels: &labels,
        bound: req.bind != Some(Bind::None),
        membind,
        omp: args.omp.then_some((req.cpus_per_task, req.cpu_unit)),
    };
    let pu = (m.pus()[t.pu_logical as usize].os, t.pu_logical);
    task_env::placed_variables(m, &asked, &t.cpus, pu, &t.bound_logical)
}

/// Slurm's GPU binding for the previewed step, as srun makes it: --gpu-bind as given, else
/// per_task:K from --gpus-per-task, else single:N from --ntasks-per-gpu (`src/srun/launch.c`).
pub(crate) fn slurm_binding(args: &MapArgs) -> SlurmGpuBind {
    match (&args.gpu_bind, args.gpus_per_task, args.ntasks_per_gpu) {
        (Some(b), _, _) => SlurmGpuBind::read(None, Some(b)),
        (None, Some(k), _) => SlurmGpuBind::PerTask(k),
        (None, None, Some(n)) => SlurmGpuBind::Single(n),
        (None, None, None) => SlurmGpuBind::None,
    }
}

/// `lama map` with a layout led by 'g'; `beside`: the layout has no 'g', and Slurm's
/// per-task GPUs place each task (map.rs).
pub(crate) fn map(args: &MapArgs, req: &GpuRequest, beside: bool) -> Result<(), Failure> {
    let binding = slurm_binding(args);
    let req = &with_slurms_binding(req, &binding)?;
    if lama_order(args) {
        return Err(Failure::Usage(
            "-m arbitrary with a layout led by 'g': the plugin places GPU tasks node by node, \
             so preview srun's own -m block, cyclic or plane=P"
                .into(),
        ));
    }
    let all_nodes = nodes_of(args)?;
    let names = all_nodes.names.clone();
    let nodes = all_nodes.list();
    let wanted = args
        .gpus
        .as_deref()
        .map(parse_indexes)
        .transpose()
        .map_err(|e| Failure::Usage(format!("--gpus: {e}")))?;
    // srun deals the ranks to the nodes (block unless --distribution says otherwise); each
    // node places its own, in ascending rank order.
    let ranks = match rank_split(args, &all_nodes, cpu_unit(args))? {
        Some(split) => split.ranks,
        None => vec![(0..args.np).collect()],
    };
    let counts: Vec<u32> = ranks.iter().map(|r| r.len() as u32).collect();
    let membind = Membind::parse(&args.membind).map_err(|d| Failure::Usage(d.to_string()))?;
    let mut out = Preview {
        text: header(args, req, &binding, nodes.len(), &counts, beside),
        json: json_skeleton(args, req, membind, &nodes, names.as_deref(), counts),
        env_text: String::new(),
        used_binds: Default::default(),
    };
    let shown = Shown {
        args,
        req,
        membind,
        wanted,
        // --ranks, read once (an invalid one refused as for any layout).
        chosen: args
            .ranks
            .as_deref()
            .map(|r| rank_range(r, args.np as usize))
            .transpose()?,
        // The picture as lama map's CPU tables choose it (--picture, the terminal's width):
        // the other columns take about 60 characters.
        picture: picture_for(args.picture, nodes.iter().copied(), 60),
    };
    for (k, (&m, node_ranks)) in nodes.iter().zip(&ranks).enumerate() {
        let name = names
            .as_ref()
            .map_or(m.name().to_string(), |n| n[k].clone());
        shown.node(&mut out, k, m, &name, node_ranks)?;
    }
    if args.json {
        // The binding the tasks got: the request's where it is every task's, else each
        // task's own.
        let binds: std::collections::BTreeSet<_> = out
            .json
            .processes
            .iter()
            .filter_map(|p| p.bind.clone())
            .collect();
        if binds.len() <= 1 {
            if let Some(b) = binds.into_iter().next() {
                out.json.request.bind = b;
            }
            out.json.processes.iter_mut().for_each(|p| p.bind = None);
        }
        let text = serde_json::to_string(&out.json)
            .map_err(|e| Failure::Place(format!("cannot write JSON: {e}")))?;
        return print(&text);
    }
    print_human(&out.finish(args, req))
}

/// The request with Slurm's GPU binding: per-task GPUs fix each task's GPUs (`fixed`); a
/// binding that makes tasks share GPUs, or names each task's, is refused as the plugin
/// refuses it.
fn with_slurms_binding(req: &GpuRequest, binding: &SlurmGpuBind) -> Result<GpuRequest, Failure> {
    let mut req = req.clone();
    match (binding, binding.own_gpus_per_task()) {
        (SlurmGpuBind::None, _) => {}
        (_, Some(k)) => {
            req.fixed = true;
            req.gpus_per_task = k;
        }
        (kind, None) => {
            return Err(Failure::Usage(format!(
                "--gpu-bind {kind}: Slurm would make tasks share GPUs, or name each task's, and \
                 which of a GPU's tasks each is can be read in no task, so the plugin refuses a \
                 layout led by 'g' with it; preview --gpu-bind none (LAMA chooses), per_task:K \
                 or single:1"
            )))
        }
    }
    Ok(req)
}

/// The preview's first lines: the request, how srun deals the tasks, who chooses the GPUs.
fn header(
    args: &MapArgs,
    req: &GpuRequest,
    binding: &SlurmGpuBind,
    nodes: usize,
    counts: &[u32],
    beside: bool,
) -> String {
    let mut text = format!(
        "{req}\n{} task(s) on {nodes} node(s): tasks per node {}, as srun -N{nodes} -n{} -m {} \
         gives them\n{}\n",
        args.np,
        count_list(counts),
        args.np,
        args.distribution.as_deref().unwrap_or("block"),
        if req.fixed {
            format!(
                "GPUs: Slurm binds each node's GPUs to its tasks ({binding}; --gpu-bind none lets \
                 LAMA choose), and each task runs on the CPUs of its GPUs.\nSlurm picks a \
                 task's GPUs as it starts: the free ones near the CPUs task/affinity binds it \
                 to (as lama map --slurm shows them), then any, in index order."
            )
        } else {
            "GPUs: tasks go round-robin over each node's GPUs in the order of the CPUs near \
             them."
                .into()
        }
    );
    if beside {
        text += &format!(
            "layout {} has no 'g', and Slurm chooses each task's GPUs: the plugin places each \
             task by {} within the CPUs of the GPUs Slurm gives it, as g{} does\n",
            args.layout(),
            args.layout(),
            args.layout()
        );
    }
    text
}

/// `--json` before the nodes are placed: the request and the nodes.
fn json_skeleton(
    args: &MapArgs,
    req: &GpuRequest,
    membind: Membind,
    nodes: &[&Machine],
    names: Option<&[String]>,
    tasks_per_node: Vec<u32>,
) -> JsonPlacement {
    JsonPlacement {
        processes: Vec::new(),
        request: JsonRequest {
            layout: req.layout_text(),
            bind: req.bind_text(),
            mppr: req.mppr.to_string(),
            order: req.order.to_string(),
            np: args.np,
            membind: membind.to_string(),
            gpu: Some(JsonGpuRequest {
                gpus_per_task: req.gpus_per_task,
                per_gpu: req.per_gpu,
                slurm_binds: req.fixed,
                isolate: args.gpu_isolate,
            }),
        },
        nodes: nodes
            .iter()
            .enumerate()
            .map(|(n, m)| JsonNode::of(n, m, names))
            .collect(),
        devices: Vec::new(),
        tasks_per_node,
        notes: Vec::new(),
    }
}

/// What the preview has written so far: the text, the JSON, the --env lines, and the
/// bindings the tasks got (the default widened for -c, or its exact fallback).
struct Preview {
    text: String,
    json: JsonPlacement,
    env_text: String,
    used_binds: std::collections::BTreeSet<String>,
}

/// What every node's part of the preview is made with.
struct Shown<'a> {
    args: &'a MapArgs,
    req: &'a GpuRequest,
    membind: Membind,
    /// --gpus: the step's GPUs as Slurm numbers them (else all of a node's).
    wanted: Option<Vec<u32>>,
    /// --ranks.
    chosen: Option<(u32, u32)>,
    picture: render::PictureMode,
}

impl Shown<'_> {
    /// The GPUs Slurm gives each of a node's `np` tasks under its per-task binding: near the
    /// CPUs task/affinity binds the task to (Slurm's own placement, as `lama map --slurm`
    /// shows it), then any ([`lama_slurm::gpu::per_task_choice`]). `Err` (why) where Slurm's
    /// own placement of the line cannot be told: task `i` is then shown with GPUs `i*K..`.
    fn slurms_choice(
        &self,
        m: &Machine,
        gpus: &[&Device],
        np: u32,
    ) -> Result<Vec<Vec<usize>>, String> {
        let (_, ask, _) = crate::own_view::ask_of(self.args, self.req.cpu_unit)?;
        let own = lama_slurm::own::place(m, &lama_slurm::own::Ask { tasks: np, ..ask })?;
        let near: Vec<Vec<u32>> = gpus.iter().map(|d| d.pus.clone().collect()).collect();
        let k = self.req.gpus_per_task.max(1) as usize;
        Ok(lama_slurm::gpu::per_task_choice(&near, &own.tasks, k))
    }

    /// Whether --ranks selects `rank`.
    fn in_ranks(&self, rank: u32) -> bool {
        self.chosen
            .is_none_or(|(first, last)| (first..=last).contains(&rank))
    }

    /// Node `k` (`m`, named `name`) with its global ranks: placed as the plugin places it,
    /// its notes, devices and tasks added to the JSON, and its table to the text unless
    /// --node, --summary or --ranks leaves it out.
    fn node(
        &self,
        out: &mut Preview,
        k: usize,
        m: &Machine,
        name: &str,
        node_ranks: &[u32],
    ) -> Result<(), Failure> {
        let (args, req) = (self.args, self.req);
        let np = node_ranks.len() as u32;
        let all: Vec<&Device> = m
            .devices()
            .iter()
            .filter(|d| d.kind == DeviceKind::Gpu)
            .collect();
        let mut slurm: Vec<u32> = match &self.wanted {
            Some(w) => w.clone(),
            None => all.iter().map(|d| d.index).collect(),
        };
        if req.fixed {
            // Slurm numbers and chooses them in index order.
            slurm.sort_unstable();
        }
        let gpus =
            step_gpus(&all, &slurm).map_err(|e| Failure::Usage(format!("node {name}: {e}")))?;
        let rank = |t: u32| node_ranks.get(t as usize).copied().unwrap_or(t);
        let no_gpu =
            "this node's topology has no GPU (an XML with I/O objects lists them: lstopo --of xml)";
        let placed = if req.fixed {
            match self.slurms_choice(m, &gpus, np) {
                Ok(choice) => place_bound(m, &gpus, &choice, req, no_gpu),
                Err(why) => {
                    out.json.notes.push(format!(
                        "node {name}: which GPUs Slurm gives each task cannot be shown ({why}): \
                         task i is shown with the GPUs i*K.. in index order"
                    ));
                    place_bound_in_order(m, &gpus, np, req, no_gpu)
                }
            }
        } else {
            place_by_gpu_ranked(m, &gpus, np, req, no_gpu, &rank)
        }
        .map_err(|e| match e {
            GpuError::Place { .. } if !args.oversubscribe => Failure::Place(format!(
                "node {name}: {e} (to oversubscribe: --oversubscribe)"
            )),
            e => Failure::Place(format!("node {name}: {e}")),
        })?;
        out.used_binds.extend(
            placed
                .tasks
                .iter()
                .filter_map(|t| t.bind)
                .map(|b| b.to_string()),
        );
        let cpu_notes = group_notes(m, &placed, req);
        for note in placed.notes.iter().chain(&cpu_notes) {
            out.json.notes.push(format!("node {name}: {note}"));
        }
        if args.node.is_some_and(|only| only as usize != k) || np == 0 {
            return Ok(());
        }
        // --summary leaves out every node's table; --ranks the nodes without a chosen rank.
        let shown = !args.summary && node_ranks.iter().any(|&r| self.in_ranks(r));
        for d in m.devices() {
            let near: Vec<u32> = placed
                .tasks
                .iter()
                .zip(node_ranks)
                .filter(|(t, _)| render::inside(d, &t.bound_logical, t.pu_logical))
                .map(|(_, &r)| r)
                .collect();
            out.json.devices.push(JsonDevice::of(k, m, d, near));
        }
        let node = PlacedNode {
            k,
            m,
            gpus: &gpus,
            slurm: &slurm,
        };
        let mut rows: Vec<[String; 6]> = Vec::new();
        for (t, &rank) in placed.tasks.iter().zip(node_ranks) {
            if let Some(row) = self.task(out, &node, t, rank, shown) {
                rows.push(row);
            }
        }
        if shown {
            out.text += &format!("\nnode {k} ({name}):\n");
            out.text += &self.table(&node, &rows);
        }
        Ok(())
    }

    /// Task `t` of `node` (global `rank`): its process in the JSON, its --env line, and its
    /// table row where the node's table is `shown` and --ranks selects it.
    fn task(
        &self,
        out: &mut Preview,
        node: &PlacedNode<'_>,
        t: &GpuTask,
        rank: u32,
        shown: bool,
    ) -> Option<[String; 6]> {
        let (args, m) = (self.args, node.m);
        let ids: Vec<u32> = t.gpus.iter().map(|&g| node.slurm[g]).collect();
        let nic = t
            .nic
            .map(|n| lama_engine::nic_name(&m.devices()[n]).to_string());
        let mut env = variables(
            m,
            node.gpus,
            node.slurm,
            t,
            args.gpu_isolate,
            (self.req.fixed, args.constrain_devices),
        );
        if args.env {
            let lama = lama_variables(m, self.req, t, self.membind, args);
            if self.in_ranks(rank) {
                out.env_text += &format!(
                    "  rank {rank:>4}: {}\n",
                    lama.iter()
                        .chain(&env)
                        .map(|(k, v)| format!("{k}={v}"))
                        .collect::<Vec<_>>()
                        .join(" ")
                );
            }
            env.extend(lama);
        }
        let bus_ids: Vec<String> = t
            .gpus
            .iter()
            .map(|&g| node.gpus[g].bus_id.clone())
            .collect();
        let row = (shown && self.in_ranks(rank)).then(|| {
            [
                rank.to_string(),
                ids.iter().map(u32::to_string).collect::<Vec<_>>().join(","),
                bus_ids.join(","),
                nic.clone().unwrap_or_else(|| "-".into()),
                t.cpus.to_string(),
                render::picture_cell(self.picture, m, &t.bound_logical),
            ]
        });
        let mems = numa_nodes(m, &t.bound_logical);
        out.json.processes.push(JsonProcess {
            rank,
            node: node.k as u32,
            pu: m.pus()[t.pu_logical as usize].os,
            cpus: t.cpus.cpus().to_vec(),
            mems: (self.membind != Membind::None).then(|| mems.cpus().to_vec()),
            env: Some(env.into_iter().collect()),
            gpus: Some(ids),
            gpu_bus_ids: Some(bus_ids),
            nic,
            bind: Some(
                t.bind
                    .map_or_else(|| self.req.bind_text(), |b| b.to_string()),
            ),
        });
        row
    }

    /// A node's table and its GPUs.
    fn table(&self, node: &PlacedNode<'_>, rows: &[[String; 6]]) -> String {
        let headers = [
            "rank",
            "gpu(s)",
            "bus id(s)",
            "nic",
            "cpus",
            self.picture.header(),
        ];
        let mut text = render::table(headers, rows);
        text += "  GPUs here (Slurm's numbers are PCI bus order):\n";
        for d in node.gpus {
            text += &format!(
                "    {} {} near {} (CPUs {})\n",
                gpu_name(d),
                d.vendor,
                d.near,
                render::device_cpus(node.m, d)
            );
        }
        text
    }
}

/// A node as placed: its index, machine, the step's GPUs there and Slurm's numbers for them.
struct PlacedNode<'a> {
    k: usize,
    m: &'a Machine,
    gpus: &'a [&'a Device],
    slurm: &'a [u32],
}

impl Preview {
    /// The text after the nodes: their notes, each task's variables (or the first task's),
    /// and the header's binding replaced by the ones the tasks got where they differ.
    fn finish(mut self, args: &MapArgs, req: &GpuRequest) -> String {
        let mut text = std::mem::take(&mut self.text);
        for note in &self.json.notes {
            text += &format!("note: {note}\n");
        }
        let numbering = match args.constrain_devices {
            true => "from 0, as under ConstrainDevices=yes",
            false => "by Slurm's indexes, as under ConstrainDevices=no (--constrain-devices: =yes)",
        };
        if args.env {
            text += &format!(
                "\nenvironment of each task, as the plugin sets it in task_init (OMP_NUM_THREADS \
                 only when the job does not set it; visible GPUs numbered {numbering}):\n"
            );
            text += &self.env_text;
        } else if let Some(first) = self.json.processes.first().and_then(|p| p.env.as_ref()) {
            text += &format!(
                "\nvariables of the first task (the plugin sets them in task_init; visible GPUs \
                 numbered {numbering}):\n"
            );
            for (k, v) in first {
                text += &format!("  {k}={v}\n");
            }
        }
        // The header names the binding the tasks got where it is not the one asked for.
        let asked = req.bind_text();
        if self.used_binds.is_empty() || self.used_binds.iter().all(|b| *b == asked) {
            return text;
        }
        let used: Vec<String> = self.used_binds.into_iter().collect();
        let why = if args.cpus_per_task > 1 {
            format!("{asked} widened for -c {}", args.cpus_per_task)
        } else if args.bind.is_none() {
            "the default: each task's share of the CPUs near its GPUs; -c or --bind sets it"
                .to_string()
        } else {
            format!("{asked} asked, which would share CPUs")
        };
        let shown = format!("binding {} ({why})", used.join(", "));
        text.replacen(&format!("binding {asked}"), &shown, 1)
    }
}

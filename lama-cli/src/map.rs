//! `lama map`: place the processes as the plugin would and show where each one goes.

use crate::asked::Asked;
use crate::env_preview::EnvPreview;
use crate::map_args::MapArgs;
use crate::nodes::{cpu_unit, nodes_of, Nodes};
use crate::output::{picture_for, print, print_human, ROW_BESIDES_PICTURE};
use crate::ranks::{rank_range, rank_split, RankSplit};
use crate::{emit, gpu, json, own_view, Failure};
use lama_engine::{
    cpus_covered, exact_binding, numa_nodes, place, place_cpus_per_task, render, Bind, CpuUnit,
    GpuRequest, Layout, Machine, Membind, Order, PlaceError, Placement, Request, MAP_ALIASES,
};

pub(crate) fn map(args: MapArgs) -> Result<(), Failure> {
    if let Some(first) = args.srun.first() {
        return Err(Failure::Usage(format!(
            "after --, lama map takes an srun line (-- srun -N2 -n8 --lama-map=scbnh ./app), \
             not '{first}'"
        )));
    }
    let unit = cpu_unit(&args);
    if args.slurm {
        return own_view::show(&args, unit);
    }
    refuse_slurm_only(&args)?;
    if let Some((request, slurm_binds)) = by_gpu(&args, unit)? {
        if args.compare {
            return Err(Failure::Usage(format!(
                "--compare puts Slurm's own CPU binding beside a CPU layout; layout '{}' places \
                 by GPU: compare with the same layout without 'g', or preview it alone",
                args.layout()
            )));
        }
        return gpu::map(&args, &request, slurm_binds);
    }
    refuse_gpu_options(&args)?;
    let asked = Asked::parse(
        args.layout(),
        args.bind.as_deref(),
        args.mppr.as_deref(),
        &args.order,
        &args.membind,
    )?;
    let job_nodes = nodes_of(&args)?;
    let split = rank_split(&args, &job_nodes, unit)?;
    let all_nodes = step_nodes(&args, &job_nodes, split.as_ref(), unit);
    let (req, exact) = request(&args, &asked, all_nodes.machines(), unit)?;
    let from_c = FromC::of(&args, &req, &all_nodes, unit);
    let placement = place_nodes(&all_nodes, &req, exact, split.as_ref(), from_c.as_ref())?;
    if args.compare {
        return own_view::compare(&args, &job_nodes, &placement, unit);
    }
    let names = all_nodes.names.as_deref();
    let fallback = fallback_note(&args, &placement, &req, names, unit);
    let warnings = warnings(&args, &placement, req.bind, unit);
    if let (Some(path), Some(names)) = (&args.hostfile, names) {
        write_hostfile(path, &placement, names)?;
    }
    let env = args.env.then_some(EnvPreview {
        membind: asked.membind,
        omp: args.omp.then_some((args.cpus_per_task, unit)),
    });
    if let Some(format) = args.emit {
        return print(&emit::emit(format, &placement, names)?);
    }
    if args.json {
        if let Some(note) = &fallback {
            eprintln!("lama: {note}");
        }
        let notes = warnings
            .into_iter()
            .chain(fallback.iter().flat_map(|n| n.lines().map(String::from)))
            .collect();
        return print(&json::json(&placement, asked.membind, names, env, notes));
    }
    let shown = Shown {
        args: &args,
        machines: all_nodes.machines(),
        names,
        split: split.as_ref(),
        fallback,
        bind: req.bind,
        bind_within: req.bind_within,
        membind: asked.membind,
        env,
    };
    text(&shown, &placement)
}

/// Options only Slurm's own placement reads, given for a layout's preview alone: refused, not
/// ignored.
fn refuse_slurm_only(args: &MapArgs) -> Result<(), Failure> {
    match (args.slurm_only_option(), args.compare) {
        (Some(option), false) => Err(Failure::Usage(format!(
            "{option} is read for Slurm's own placement: add --compare to see it beside layout \
             '{}' (with --lama-map the plugin's binding replaces Slurm's), or --slurm for \
             Slurm's alone",
            args.layout()
        ))),
        _ => Ok(()),
    }
}

/// The nodes as the plugin finds them: the job's CPUs, or where -c (or --exact) makes the
/// step exact, the cores Slurm gives it (said in a note). With -m arbitrary the layout deals
/// the ranks itself and no node's task count is known before placing: the job's CPUs.
fn step_nodes(args: &MapArgs, job: &Nodes, split: Option<&RankSplit>, unit: CpuUnit) -> Nodes {
    let ranks = match split {
        Some(s) => s.ranks.clone(),
        None => vec![(0..args.np).collect()],
    };
    if crate::ranks::lama_order(args) && job.list().len() > 1 {
        return job.clone();
    }
    match own_view::exact_steps(args, job, &ranks, unit) {
        Some((cpus, note)) => {
            eprintln!("lama: {note}");
            job.narrowed(&cpus)
        }
        None => job.clone(),
    }
}

/// A layout led by 'g', or Slurm's per-task GPUs with a layout without it: the GPU request
/// and whether Slurm binds the GPUs (the plugin then places each task by the layout within
/// the CPUs beside the GPUs Slurm gives it, as the layout led by 'g' does).
fn by_gpu(args: &MapArgs, unit: CpuUnit) -> Result<Option<(GpuRequest, bool)>, Failure> {
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
    if let Some(by_gpu) = gpu_request(args.layout()).map_err(Failure::Usage)? {
        return Ok(Some((by_gpu, false)));
    }
    let slurm_binds = gpu::slurm_binding(args).own_gpus_per_task().is_some();
    if slurm_binds && Layout::parse(args.layout()).is_ok() {
        if let Ok(Some(beside)) = gpu_request(&format!("g{}", args.layout())) {
            return Ok(Some((beside, true)));
        }
    }
    Ok(None)
}

/// GPU options mean nothing without a layout that places by GPU: refused, not ignored (the
/// plugin refuses --lama-gpu-isolate without 'g' the same way).
fn refuse_gpu_options(args: &MapArgs) -> Result<(), Failure> {
    let gpu_only = [
        (args.gpu_isolate, "--gpu-isolate"),
        (args.gpus.is_some(), "--gpus"),
        (args.gpus_per_task.is_some(), "--gpus-per-task"),
        (args.gpu_bind.is_some(), "--gpu-bind"),
        (args.ntasks_per_gpu.is_some(), "--ntasks-per-gpu"),
        (args.constrain_devices, "--constrain-devices"),
    ];
    match gpu_only.iter().find(|(given, _)| *given) {
        Some((_, option)) => Err(Failure::Usage(format!(
            "{option} previews placement by GPU, and layout '{}' does not place by GPU: lead it \
             with 'g' (g{}), or leave out {option} (a layout without 'g' still lists each node's \
             GPUs and NICs)",
            args.layout(),
            args.layout()
        ))),
        None => Ok(()),
    }
}

/// The request placed on `machines` and the binding of exactly -c CPUs: the plugin's rule
/// (lama_slurm::node::effective_bind), node by node, gives the binding asked for, else the
/// default widened for -c N, which never makes tasks share CPUs; when the widened binding
/// cannot do that, each task gets exactly its -c CPUs.
fn request(
    args: &MapArgs,
    asked: &Asked,
    machines: &[Machine],
    unit: CpuUnit,
) -> Result<(Request, Bind), Failure> {
    let rules = lama_slurm::node::StepRequest {
        layout: asked.layout.clone(),
        bind: asked.bind,
        membind: asked.membind,
        mppr: asked.mppr.clone(),
        order: asked.order,
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
    let exact: Vec<Bind> = machines
        .iter()
        .map(|m| exact_binding(m, args.cpus_per_task.max(1), unit))
        .collect();
    let exact = if exact.iter().all(|b| *b == exact[0]) {
        exact[0]
    } else {
        Bind::None
    };
    let req = Request {
        layout: asked.layout.clone(),
        bind,
        mppr: asked.mppr.clone(),
        order: asked.order,
        oversubscribe: args.oversubscribe,
        np: args.np,
        bind_within,
    };
    Ok((req, exact))
}

/// `np` ranks of `req` on `nodes`, with exactly -c CPUs each (`exact`) where the request binds
/// within them.
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

/// The failure of a placement on a preview of `one_node` (one node: more nodes would hold
/// the ranks, -N). `from_c`: the binding is the default widened for -c (then a shortfall is
/// said in -c's terms, not as a binding width the user never gave).
fn place_failure(e: PlaceError, one_node: bool, from_c: Option<&FromC>) -> Failure {
    match e {
        PlaceError::TooLarge { .. } => Failure::Usage(e.to_string()),
        PlaceError::Oversubscribed {
            placed, requested, ..
        } if from_c.is_some() && placed > 0 => {
            let c = from_c.expect("checked");
            let more = if one_node {
                format!(", more nodes (-N {})", requested.div_ceil(placed))
            } else {
                ", more nodes".to_string()
            };
            let need = u64::from(requested) * u64::from(c.per_task);
            let room = if need > c.have {
                String::new()
            } else {
                format!(
                    " (bound {} each, which tasks never share, they fit only {placed})",
                    c.bind
                )
            };
            Failure::Place(format!(
                "placed {placed} of {requested} processes: {requested} tasks of -c {} need {need} \
                 {}s of their own, and the node(s) have {}{room}; give fewer tasks, a smaller \
                 -c{more} (to oversubscribe: lama map --oversubscribe)",
                c.per_task, c.unit, c.have,
            ))
        }
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
    }
}

/// A binding that is the default widened for -c: the CPUs per task, what Slurm counts as a
/// CPU, the binding, and how many such CPUs the nodes have.
struct FromC {
    per_task: u32,
    unit: &'static str,
    bind: Bind,
    have: u64,
}

impl FromC {
    /// `None` unless the binding comes from -c (no --bind, -c above 1, bound within).
    fn of(args: &MapArgs, req: &Request, nodes: &Nodes, unit: CpuUnit) -> Option<FromC> {
        if args.bind.is_some() || args.cpus_per_task <= 1 || !req.bind_within {
            return None;
        }
        // Counted once per distinct machine, then once per node of it.
        let per_machine = nodes.cpus(unit);
        let have = nodes
            .machine_of()
            .iter()
            .map(|&k| u64::from(per_machine[k]))
            .sum();
        Some(FromC {
            per_task: args.cpus_per_task,
            unit: unit.name(),
            bind: req.bind,
            have,
        })
    }
}

/// The placement of the preview: over all nodes by the layout, or, as srun and the plugin do,
/// ranks dealt to the nodes first (`split`) and each node's placed there; nodes of one machine
/// with as many ranks are placed once.
fn place_nodes<'m>(
    all_nodes: &'m Nodes,
    req: &Request,
    exact: Bind,
    split: Option<&RankSplit>,
    from_c: Option<&FromC>,
) -> Result<Placement<'m>, Failure> {
    let (nodes, np) = (all_nodes.list(), req.np);
    let one_node = all_nodes.machine_of().len() == 1;
    let Some(split) = split else {
        return place_on(&nodes, req, np, exact).map_err(|e| place_failure(e, one_node, from_c));
    };
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
        let part =
            place_on(&[m], req, ranks.len() as u32, exact).map_err(|e| {
                match place_failure(e, one_node, from_c) {
                    Failure::Usage(e) => Failure::Usage(format!("node {n}: {e}")),
                    Failure::Place(e) => Failure::Place(format!("node {n}: {e}")),
                    status @ Failure::Status(_) => status,
                }
            })?;
        parts.push(part);
        done.insert(key, parts.len() - 1);
        of_node.push(parts.len() - 1);
    }
    Placement::join_shared(parts, &of_node, &split.ranks)
        .ok_or_else(|| Failure::Place("the nodes' placements do not fit together (a bug)".into()))
}

/// The note of the default binding's fallback to exactly -c CPUs, node by node as the plugin
/// decides on each node: one note where every node falls back alike, else one line a node.
fn fallback_note(
    args: &MapArgs,
    placement: &Placement<'_>,
    req: &Request,
    names: Option<&[String]>,
    unit: CpuUnit,
) -> Option<String> {
    if !req.bind_within {
        return None;
    }
    let per_task = args.cpus_per_task.max(1);
    let nodes = placement.nodes().len();
    let used: Vec<Bind> = (0..nodes as u32)
        .map(|n| placement.node_binding(n))
        .collect();
    if used.iter().all(|b| *b == used[0]) {
        return lama_slurm::cpus_per_task::exact_fallback_note(
            req.bind,
            used[0],
            placement.len(),
            per_task,
            unit,
        );
    }
    let counts = placement.tasks_per_node();
    let lines: Vec<String> = (0..nodes)
        .filter_map(|n| {
            let note = lama_slurm::cpus_per_task::exact_fallback_note(
                req.bind,
                used[n],
                counts[n] as usize,
                per_task,
                unit,
            )?;
            let name = names.map(|v| format!(" ({})", v[n])).unwrap_or_default();
            Some(format!("node {n}{name}: {note}"))
        })
        .collect();
    Some(lines.join("\n"))
}

/// Warnings, printed to standard error as they are found and returned for --json's notes:
/// tasks that share CPUs, and a --bind narrower than -c.
fn warnings(args: &MapArgs, placement: &Placement<'_>, bind: Bind, unit: CpuUnit) -> Vec<String> {
    let mut warnings = Vec::new();
    let nodes = placement.nodes();
    let need = lama_engine::threads_needed(nodes[0], args.cpus_per_task.max(1), unit);
    if let Some(w) = placement.overlap_warning_needing(|r| r, need) {
        eprintln!("lama: {w}");
        warnings.push(w);
    }
    if args.bind.is_none() || args.cpus_per_task <= 1 || bind == Bind::None {
        return warnings;
    }
    let narrowest = (0..placement.len())
        .map(|r| {
            let info = placement.info(r);
            cpus_covered(nodes[info.node as usize], &info.bound_logical, unit)
        })
        .min();
    let narrower = narrowest.and_then(|n| {
        lama_slurm::cpus_per_task::narrower_warning(nodes[0], bind, n, args.cpus_per_task, unit)
    });
    if let Some(w) = narrower {
        eprintln!("lama: {w}");
        warnings.push(w);
    }
    warnings
}

/// --hostfile: one node name per rank, for `srun -m arbitrary`.
fn write_hostfile(
    path: &std::path::Path,
    placement: &Placement<'_>,
    names: &[String],
) -> Result<(), Failure> {
    let mut text = String::with_capacity(placement.len() * 8);
    for p in placement.processes() {
        text += &names[p.node as usize];
        text.push('\n');
    }
    std::fs::write(path, text)
        .map_err(|e| Failure::Place(format!("cannot write {}: {e}", path.display())))
}

/// What the text output shows besides the placement.
struct Shown<'a> {
    args: &'a MapArgs,
    machines: &'a [Machine],
    names: Option<&'a [String]>,
    split: Option<&'a RankSplit>,
    fallback: Option<String>,
    bind: Bind,
    bind_within: bool,
    membind: Membind,
    env: Option<EnvPreview>,
}

/// The text output: the request's notes, the tables (written as they are made: a preview of a
/// million ranks never waits for all its text), the devices, the memory binding, --env and
/// the hostfile written.
fn text(shown: &Shown<'_>, placement: &Placement<'_>) -> Result<(), Failure> {
    let args = shown.args;
    let notes: Vec<String> = match shown.split {
        Some(split) => split.notes(placement),
        None => lama_slurm::distribution::node_assignment(placement)
            .into_iter()
            .collect(),
    };
    let ranks = args
        .ranks
        .as_deref()
        .map(|r| rank_range(r, placement.len()))
        .transpose()?;
    // The widest picture of the nodes' distinct machines, only when a terminal may be too
    // narrow for it.
    let picture = if args.summary {
        render::PictureMode::Full
    } else {
        picture_for(args.picture, shown.machines.iter(), ROW_BESIDES_PICTURE)
    };
    print_human(&header(shown))?;
    render::write_placement_text(
        placement,
        &notes,
        render::TextOptions {
            explain: args.explain,
            names: shown.names,
            summary_only: args.summary,
            node: args.node,
            ranks,
            picture,
            without_legend: !args.legend,
        },
        &mut |chunk| {
            let _ = print_human(chunk);
        },
    );
    let mut text = String::new();
    if !args.summary {
        text += &render::placement_devices_text(placement, args.node);
    }
    if shown.membind != Membind::None {
        text += &membind_text(shown, placement, ranks);
    }
    if let Some(env) = shown.env {
        text += &env.text(placement, ranks, args.node);
    }
    if let (Some(path), Some(names)) = (&args.hostfile, shown.names) {
        text += &format!(
            "\nwrote {}: run SLURM_HOSTFILE={} srun -m arbitrary -n{} on nodes {}\n",
            path.display(),
            path.display(),
            placement.len(),
            names.join(",")
        );
    }
    if !args.legend && !args.summary {
        text += "\n--legend says what the picture and the columns show.\n";
    }
    print_human(&text)
}

/// The lines before the tables: the map alias's expansion and the binding -c gave.
fn header(shown: &Shown<'_>) -> String {
    let args = shown.args;
    let mut text = String::new();
    if let Some((alias, expansion)) = MAP_ALIASES.iter().find(|(a, _)| *a == args.layout()) {
        text += &format!("map alias '{alias}' = layout {expansion}\n");
    }
    if let Some(note) = &shown.fallback {
        text += &format!("{note}\n");
    } else if shown.bind_within && args.cpus_per_task > 1 {
        text += &format!(
            "binding {}: at least {} CPU(s) ({}s) per process for --cpus-per-task\n",
            shown.bind,
            args.cpus_per_task,
            cpu_unit(args).name()
        );
    }
    text
}

/// Each rank's NUMA nodes under --membind (of `ranks` only, on --node only), or with
/// --summary how many ranks get each set.
fn membind_text(shown: &Shown<'_>, placement: &Placement<'_>, ranks: Option<(u32, u32)>) -> String {
    let mems_of = |r: usize| {
        let info = placement.info(r);
        let mems = numa_nodes(placement.nodes()[info.node as usize], &info.bound_logical);
        if shown.bind == Bind::None {
            "not bound (no CPU binding)".to_string()
        } else if mems.is_empty() {
            "not bound (the topology names no NUMA node)".to_string()
        } else {
            mems.to_string()
        }
    };
    let membind = shown.membind;
    if shown.args.summary {
        let mut count: std::collections::BTreeMap<String, usize> = Default::default();
        for r in 0..placement.len() {
            *count.entry(mems_of(r)).or_default() += 1;
        }
        let sets: Vec<String> = count.iter().map(|(m, n)| format!("{m}: {n}")).collect();
        return format!(
            "memory binding {membind}: ranks per set of NUMA nodes (OS indexes) {}\n",
            sets.join(", ")
        );
    }
    let mut text = format!("\nmemory binding {membind} (NUMA nodes, OS indexes):\n");
    let (first, last) = ranks.unwrap_or((0, u32::MAX));
    for r in (first as usize)..placement.len().min(last as usize + 1) {
        let node = placement.info(r).node;
        if shown.args.node.is_some_and(|k| k != node) {
            continue;
        }
        text += &format!("  rank {r:>4} node {node}: {}\n", mems_of(r));
    }
    text
}

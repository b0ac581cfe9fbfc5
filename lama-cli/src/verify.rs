//! `lama verify`: run as a task of a step placed by the plugin, it reads what really is (every
//! thread's CPU affinity, the memory policy and where anonymous pages landed, the GPUs the
//! task can open, the variables) and compares it with what LAMA placed for that rank (the
//! task's `LAMA_*` variables, and a `lama map --json` preview with `--expect`). One line per
//! task (or a JSON object), exit status 1 on any difference; `--collect` summarizes a step's
//! lines.
//!
//! With a program after `--`, the program is started and its threads (and its children's)
//! are read while it runs, so threads a runtime starts after start-up are checked too.

use crate::Failure;
use lama_engine::CpuList;
use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::PathBuf;

#[derive(clap::Args, Debug)]
pub struct VerifyArgs {
    /// With a program: how often its threads, memory policy and pages are read while it runs,
    /// in seconds.
    #[arg(long, value_name = "SECONDS", default_value_t = 0.2)]
    every: f64,
    /// Also compare with a preview: the output of `lama map --json` for the same step
    /// (`--node-names` in the step's node order); the task (SLURM_PROCID) must have the CPUs
    /// the preview gives its rank.
    #[arg(long, value_name = "FILE")]
    expect: Option<PathBuf>,
    /// One JSON object per task, on one line.
    #[arg(long)]
    json: bool,
    /// Read the tasks' lines (text or --json, with or without srun -l's prefix) from standard
    /// input and summarize the step; exit status 1 when a task differs, or none was read.
    #[arg(long, conflicts_with_all = ["expect", "command"])]
    collect: bool,
    /// With --collect: the step's task count; a rank without a line is a difference.
    #[arg(long, value_name = "N", requires = "collect")]
    np: Option<u32>,
    /// The program to start and watch, after `--`; its exit status is passed on when it
    /// fails.
    #[arg(last = true, value_name = "PROGRAM")]
    command: Vec<OsString>,
}

/// What LAMA placed for this task, from the variables the plugin set.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Planned {
    /// The rank its launcher gave it (`lama_slurm::launcher`), else SLURM_PROCID.
    pub rank: Option<u32>,
    /// SLURMD_NODENAME (or the host name).
    pub node: String,
    /// LAMA_BIND.
    pub bind: String,
    /// LAMA_CPUS: the CPUs every thread of the task is to run on (None without a binding).
    pub cpus: Option<CpuList>,
    /// LAMA_MEMBIND and LAMA_MEMS, when memory is bound.
    pub memory: Option<(String, CpuList)>,
    /// LAMA_GPUS: the task's GPUs, as Slurm numbers them.
    pub gpus: Option<Vec<u32>>,
    /// LAMA_GPU_BUS_IDS: the cards the plugin placed the task beside, its own first.
    pub gpu_buses: Option<Vec<String>>,
    /// The task's other variables that verification reads (OMP_*, vendor GPU variables).
    pub vars: BTreeMap<String, String>,
    /// Differences already found in the variables themselves.
    pub bad_vars: Vec<String>,
}

/// The GPU vendors' variables that name a task's GPUs, as the plugin sets them.
fn gpu_variables() -> [&'static str; 3] {
    ["NVIDIA", "AMD", "Intel"].map(lama_slurm::gpu::visible_variable)
}

/// The placement in a task's environment (`/proc/PID/environ`: NUL-separated `NAME=value`;
/// values that are not UTF-8 are read lossily, only `LAMA_*`, `SLURM*` and the checked
/// variables are used). `Err` when the task was not placed by LAMA.
pub fn planned(environ: &[u8], hostname: &str) -> Result<Planned, String> {
    let mut env = BTreeMap::new();
    for entry in environ.split(|&b| b == 0).filter(|e| !e.is_empty()) {
        let text = String::from_utf8_lossy(entry);
        if let Some((k, v)) = text.split_once('=') {
            env.insert(k.to_string(), v.to_string());
        }
    }
    let Some(cpus_text) = env.get("LAMA_CPUS") else {
        return Err(
            "the task has no LAMA_CPUS: it was not placed by LAMA; run lama verify as a \
                    task of a placed step (srun --lama-map=LAYOUT ... lama verify)"
                .to_string(),
        );
    };
    let mut bad_vars = Vec::new();
    let list = |name: &str, text: &str, bad: &mut Vec<String>| match CpuList::parse(text) {
        Ok(l) => Some(l),
        Err(e) => {
            bad.push(format!("{name} is not a list: {e}"));
            None
        }
    };
    let bind = env.get("LAMA_BIND").cloned().unwrap_or_default();
    let cpus = if cpus_text.is_empty() || bind == "none" {
        None
    } else {
        list("LAMA_CPUS", cpus_text, &mut bad_vars)
    };
    let memory = match (env.get("LAMA_MEMBIND"), env.get("LAMA_MEMS")) {
        (Some(policy), Some(mems)) => {
            list("LAMA_MEMS", mems, &mut bad_vars).map(|m| (policy.clone(), m))
        }
        (None, None) => None,
        (Some(_), None) => {
            bad_vars.push("LAMA_MEMBIND is set without LAMA_MEMS".to_string());
            None
        }
        (None, Some(_)) => {
            bad_vars.push("LAMA_MEMS is set without LAMA_MEMBIND".to_string());
            None
        }
    };
    let gpus = env.get("LAMA_GPUS").map(|g| {
        g.split(',')
            .filter_map(|t| t.trim().parse().ok())
            .collect::<Vec<u32>>()
    });
    let gpu_buses = env.get("LAMA_GPU_BUS_IDS").map(|b| {
        b.split(',')
            .map(|t| t.trim().to_string())
            .collect::<Vec<String>>()
    });
    if let Some(b) = &gpu_buses {
        if !b.iter().all(|t| lama_slurm::gpu::is_bus_id(t))
            || gpus.as_ref().is_none_or(|g| g.len() != b.len())
        {
            bad_vars.push(format!(
                "LAMA_GPU_BUS_IDS {} does not name one PCI bus id per GPU of LAMA_GPUS",
                b.join(",")
            ));
        }
    }
    let vars: BTreeMap<String, String> = ["OMP_PLACES", "OMP_PROC_BIND", "CUDA_DEVICE_ORDER"]
        .into_iter()
        .chain(gpu_variables())
        .filter_map(|k| env.get(k).map(|v| (k.to_string(), v.clone())))
        .collect();
    if let (Some(places), Some(cpus)) = (vars.get("OMP_PLACES"), &cpus) {
        match omp_place_cpus(places) {
            Some(p) if p.intersection(cpus) == p => {}
            Some(p) => bad_vars.push(format!(
                "OMP_PLACES names CPUs {p}, not all within LAMA_CPUS {cpus}"
            )),
            None => bad_vars.push(format!("OMP_PLACES {places} is not a list of places")),
        }
        if !vars.contains_key("OMP_PROC_BIND") {
            bad_vars.push("OMP_PLACES is set without OMP_PROC_BIND".to_string());
        }
    }
    if gpus.is_some()
        && !gpu_variables()
            .iter()
            .any(|k| vars.get(*k).is_some_and(|v| !v.is_empty()))
    {
        bad_vars.push("LAMA_GPUS is set but no GPU variable names the task's GPUs".to_string());
    }
    // The launcher's rank (an MPI launcher's before the Slurm step around it, as lama exec
    // reads it), else SLURM_PROCID; the node is Slurm's name only for a Slurm task (hydra
    // passes mpiexec's whole environment, SLURMD_NODENAME included, to every rank).
    let launcher = lama_slurm::launcher::find(|k| env.get(k).cloned()).ok();
    let mpi = launcher
        .as_ref()
        .and_then(|r| r.launcher)
        .is_some_and(|l| l != lama_slurm::launcher::SLURM.name);
    Ok(Planned {
        rank: match &launcher {
            Some(r) if r.launcher.is_some() => Some(r.rank),
            _ => env.get("SLURM_PROCID").and_then(|r| r.parse().ok()),
        },
        node: match env.get("SLURMD_NODENAME") {
            Some(n) if !mpi => n.clone(),
            _ => hostname.to_string(),
        },
        bind,
        cpus,
        memory,
        gpus,
        gpu_buses,
        vars,
        bad_vars,
    })
}

/// The CPUs of an `OMP_PLACES` list as the plugin writes it (`{0,36},{1,37}`, or `{0:4}`
/// intervals); `None` when it is not such a list (`cores`, `threads`).
fn omp_place_cpus(places: &str) -> Option<CpuList> {
    let mut cpus = Vec::new();
    for place in places.split('}') {
        let place = place.trim_start_matches(',').trim();
        if place.is_empty() {
            continue;
        }
        let inner = place.strip_prefix('{')?;
        for item in inner.split(',') {
            match item.split_once(':') {
                Some((start, len)) => {
                    let (s, n): (u32, u32) = (start.trim().parse().ok()?, len.trim().parse().ok()?);
                    cpus.extend(s..s + n);
                }
                None => cpus.push(item.trim().parse().ok()?),
            }
        }
    }
    Some(CpuList::from_cpus(cpus))
}

/// One thread as `/proc/PID/task/TID/status` shows it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Thread {
    pub pid: u32,
    pub tid: u32,
    pub name: String,
    pub cpus: Vec<u32>,
}

/// A thread's name and `Cpus_allowed_list` from its status file.
pub fn thread_status(status: &str) -> Option<(String, CpuList)> {
    let field = |key: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(key).map(|v| v.trim().to_string()))
    };
    let name = field("Name:")?;
    let cpus = CpuList::parse(&field("Cpus_allowed_list:")?).ok()?;
    Some((name, cpus))
}

/// What `/proc/PID/numa_maps` says: the task's memory policy (the policy of the main stack,
/// which shows the task's own unless the program gave the stack one) and the pages of
/// anonymous mappings per NUMA node (file pages are left out: the page cache put them where a
/// first reader ran, not where this task's policy asks).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NumaMaps {
    pub policy: Option<String>,
    pub anon_pages: BTreeMap<u32, u64>,
}

pub fn numa_maps(text: &str) -> NumaMaps {
    let mut out = NumaMaps::default();
    for line in text.lines() {
        let mut fields = line.split_whitespace();
        let _address = fields.next();
        let Some(policy) = fields.next() else {
            continue;
        };
        // "prefer (many):0-1" is one policy written with a space.
        let (policy, rest): (String, Vec<&str>) = if policy == "prefer" {
            let rest: Vec<&str> = fields.collect();
            match rest.first() {
                Some(r) if r.starts_with("(many)") => (format!("prefer {}", r), rest[1..].to_vec()),
                _ => (policy.to_string(), rest),
            }
        } else {
            (policy.to_string(), fields.collect())
        };
        if rest.contains(&"stack") || (out.policy.is_none() && rest.contains(&"heap")) {
            out.policy = Some(policy.clone());
        }
        if rest.iter().any(|f| f.starts_with("file=")) {
            continue;
        }
        for f in rest {
            if let Some((node, pages)) = f.strip_prefix('N').and_then(|f| f.split_once('=')) {
                if let (Ok(n), Ok(p)) = (node.parse::<u32>(), pages.parse::<u64>()) {
                    *out.anon_pages.entry(n).or_default() += p;
                }
            }
        }
    }
    out
}

/// A memory policy as numa_maps writes it (`bind:0-1`, `bind=static:0`, `prefer:1`,
/// `prefer (many):0-1`, `default`): its mode and its nodes.
fn policy_parts(policy: &str) -> (&str, Option<CpuList>) {
    let (head, nodes) = match policy.split_once(':') {
        Some((h, n)) => (h, CpuList::parse(n).ok()),
        None => (policy, None),
    };
    (head.split('=').next().unwrap_or(head), nodes)
}

/// What was read of one task, besides its plan.
#[derive(Debug, Clone, Default)]
pub struct Seen {
    /// Every thread seen, by thread id: the first reading that differed from the plan, else
    /// the last reading.
    pub threads: BTreeMap<u32, Thread>,
    pub memory: NumaMaps,
    /// The GPU device files the task may open (allowed by its devices cgroup), and those there
    /// are ([`gpus_open`]).
    pub gpus_open: Option<(Vec<u32>, Vec<u32>)>,
    /// The task's own cards and the card CUDA opens first ([`crate::verify_gpu::observe`]).
    pub gpu_cards: Option<crate::verify_gpu::CardsSeen>,
    /// The preview's CPUs for this rank (--expect).
    pub expected: Option<CpuList>,
}

impl Planned {
    /// Whether a thread runs elsewhere than on the planned CPUs (never, without a binding).
    fn off_plan(&self, t: &Thread) -> bool {
        self.cpus
            .as_ref()
            .is_some_and(|c| c.cpus() != t.cpus.as_slice())
    }
}

impl Seen {
    /// Records a thread reading; a differing reading is kept over later ones.
    pub fn thread(&mut self, plan: &Planned, t: Thread) {
        match self.threads.get(&t.tid) {
            Some(old) if plan.off_plan(old) => {}
            _ => {
                self.threads.insert(t.tid, t);
            }
        }
    }
}

/// The verdict on one task.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Report {
    pub rank: Option<u32>,
    pub node: String,
    pub agrees: bool,
    pub bind: String,
    /// LAMA_CPUS (empty without a binding).
    pub cpus: Vec<u32>,
    pub threads: Vec<Thread>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub membind: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mems: Option<Vec<u32>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub policy: Option<String>,
    /// Pages of anonymous memory per NUMA node.
    pub pages: BTreeMap<u32, u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gpus: Option<Vec<u32>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gpus_open: Option<Vec<u32>>,
    /// LAMA_GPU_BUS_IDS: the task's cards.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gpu_buses: Option<Vec<String>>,
    /// Those of the task's cards it may open.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gpu_cards_open: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expected: Option<Vec<u32>>,
    pub differences: Vec<String>,
}

/// Compares what was read with the plan.
pub fn judge(plan: &Planned, seen: &Seen) -> Report {
    let mut diffs = plan.bad_vars.clone();
    if let Some(cpus) = &plan.cpus {
        for t in seen.threads.values().filter(|t| plan.off_plan(t)) {
            diffs.push(format!(
                "thread {} ({}) of pid {} runs on CPUs {}, not LAMA_CPUS {cpus}",
                t.tid,
                t.name,
                t.pid,
                CpuList::from_cpus(t.cpus.iter().copied())
            ));
        }
    }
    if let (Some(expected), Some(cpus)) = (&seen.expected, &plan.cpus) {
        if expected != cpus {
            diffs.push(format!(
                "the preview gives rank {} CPUs {expected}, the plugin bound {cpus}",
                plan.rank.map_or("?".to_string(), |r| r.to_string())
            ));
        }
    }
    if let Some((membind, mems)) = &plan.memory {
        let want = match membind.as_str() {
            "local" => "bind",
            "preferred" => "prefer",
            other => other,
        };
        match seen.memory.policy.as_deref().map(policy_parts) {
            Some((mode, nodes)) if mode.starts_with(want) && nodes.as_ref() == Some(mems) => {}
            Some(_) | None => diffs.push(format!(
                "the memory policy is {}, not {want} to LAMA_MEMS {mems} (LAMA_MEMBIND {membind})",
                seen.memory.policy.as_deref().unwrap_or("unreadable")
            )),
        }
        if want == "bind" {
            for (node, pages) in &seen.memory.anon_pages {
                if *pages > 0 && !mems.contains(*node) {
                    diffs.push(format!(
                        "{pages} pages of anonymous memory on NUMA node {node}, outside LAMA_MEMS {mems}"
                    ));
                }
            }
        }
    }
    if let (Some(gpus), Some((open, present))) = (&plan.gpus, &seen.gpus_open) {
        if !present.is_empty() && open.len() < gpus.len() {
            diffs.push(format!(
                "the task may open {} of the node's GPU devices, fewer than its {} GPUs (LAMA_GPUS {})",
                open.len(),
                gpus.len(),
                join(gpus)
            ));
        }
    }
    if let (Some(gpus), Some(cards)) = (&plan.gpus, &seen.gpu_cards) {
        diffs.extend(crate::verify_gpu::differences(gpus, cards));
    }
    Report {
        rank: plan.rank,
        node: plan.node.clone(),
        agrees: diffs.is_empty(),
        bind: plan.bind.clone(),
        cpus: plan
            .cpus
            .as_ref()
            .map(|c| c.cpus().to_vec())
            .unwrap_or_default(),
        threads: seen.threads.values().cloned().collect(),
        membind: plan.memory.as_ref().map(|m| m.0.clone()),
        mems: plan.memory.as_ref().map(|m| m.1.cpus().to_vec()),
        policy: seen.memory.policy.clone(),
        pages: seen.memory.anon_pages.clone(),
        gpus: plan.gpus.clone(),
        gpus_open: seen.gpus_open.as_ref().map(|g| g.0.clone()),
        gpu_buses: plan.gpu_buses.clone(),
        gpu_cards_open: seen.gpu_cards.as_ref().map(|c| {
            c.cards
                .iter()
                .filter(|c| c.open)
                .map(|c| c.bus.clone())
                .collect()
        }),
        expected: seen.expected.as_ref().map(|c| c.cpus().to_vec()),
        differences: diffs,
    }
}

fn join(v: &[u32]) -> String {
    v.iter().map(u32::to_string).collect::<Vec<_>>().join(",")
}

/// The one line a task prints.
pub fn line(r: &Report) -> String {
    let who = format!(
        "lama verify: rank {} on {}",
        r.rank.map_or("?".to_string(), |x| x.to_string()),
        r.node
    );
    if !r.agrees {
        return format!("{who}: DIFFERS: {}", r.differences.join("; "));
    }
    let n = r.threads.len();
    let threads = format!("{n} thread{}", if n == 1 { "" } else { "s" });
    let mut parts = vec![if r.cpus.is_empty() {
        format!("{threads}, not bound (LAMA_BIND {})", r.bind)
    } else {
        format!(
            "{threads} on CPUs {} ({})",
            CpuList::from_cpus(r.cpus.iter().copied()),
            r.bind
        )
    }];
    if r.expected.is_some() {
        parts.push("as previewed".to_string());
    }
    if let (Some(policy), Some(_)) = (&r.policy, &r.membind) {
        let pages: Vec<String> = r
            .pages
            .iter()
            .filter(|(_, p)| **p > 0)
            .map(|(n, p)| format!("{p} on {n}"))
            .collect();
        parts.push(format!(
            "memory {policy} (anonymous pages: {})",
            if pages.is_empty() {
                "none".to_string()
            } else {
                pages.join(", ")
            }
        ));
    }
    if let (Some(gpus), Some(open)) = (&r.gpus, &r.gpus_open) {
        let cards = r
            .gpu_buses
            .as_ref()
            .map_or(String::new(), |b| format!(" on card(s) {}", b.join(",")));
        parts.push(format!(
            "GPUs {}{cards} ({} device(s) open)",
            join(gpus),
            open.len()
        ));
    }
    format!("{who}: agrees: {}", parts.join(", "))
}

/// A task's line for `--collect`: its rank and node, whether it agrees, and why not.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Collected {
    pub rank: Option<u32>,
    pub node: String,
    pub agrees: bool,
    pub why: String,
}

/// Reads one line a task printed (text or JSON, after srun -l's `N: ` prefix if any).
pub fn collected(line: &str) -> Option<Collected> {
    let mut line = line.trim();
    if let Some((prefix, rest)) = line.split_once(": ") {
        if !prefix.is_empty() && prefix.trim().bytes().all(|b| b.is_ascii_digit()) {
            line = rest.trim();
        }
    }
    if line.starts_with('{') {
        let v: serde_json::Value = serde_json::from_str(line).ok()?;
        let why = v["differences"]
            .as_array()
            .map(|d| {
                d.iter()
                    .filter_map(|s| s.as_str())
                    .collect::<Vec<_>>()
                    .join("; ")
            })
            .unwrap_or_default();
        return Some(Collected {
            rank: v["rank"].as_u64().and_then(|r| u32::try_from(r).ok()),
            node: v["node"].as_str()?.to_string(),
            agrees: v["agrees"].as_bool()?,
            why,
        });
    }
    let rest = line.strip_prefix("lama verify: rank ")?;
    let (rank, rest) = rest.split_once(" on ")?;
    let (node, verdict) = rest.split_once(": ")?;
    let (agrees, why) = if verdict.starts_with("agrees") {
        (true, String::new())
    } else {
        (false, verdict.strip_prefix("DIFFERS: ")?.to_string())
    };
    Some(Collected {
        rank: rank.parse().ok(),
        node: node.to_string(),
        agrees,
        why,
    })
}

/// The step's summary from its tasks' lines; `Ok` when every task (and, with `np`, every rank
/// below it) agrees.
pub fn summary(tasks: &[Collected], np: Option<u32>) -> (bool, String) {
    let nodes: std::collections::BTreeSet<&str> = tasks.iter().map(|t| t.node.as_str()).collect();
    let differ: Vec<&Collected> = tasks.iter().filter(|t| !t.agrees).collect();
    let missing: Vec<u32> = np.map_or_else(Vec::new, |n| {
        (0..n)
            .filter(|r| !tasks.iter().any(|t| t.rank == Some(*r)))
            .collect()
    });
    let mut text = format!(
        "lama verify: {} task{} on {} node{}: {} agree",
        tasks.len(),
        if tasks.len() == 1 { "" } else { "s" },
        nodes.len(),
        if nodes.len() == 1 { "" } else { "s" },
        tasks.len() - differ.len()
    );
    if !differ.is_empty() {
        text += &format!(", {} differ", differ.len());
    }
    if !missing.is_empty() {
        text += &format!(
            ", no line from rank{} {}",
            if missing.len() == 1 { "" } else { "s" },
            CpuList::from_cpus(missing.iter().copied())
        );
    }
    text.push('\n');
    for t in &differ {
        text += &format!(
            "  rank {} on {}: {}\n",
            t.rank.map_or("?".to_string(), |r| r.to_string()),
            t.node,
            t.why
        );
    }
    let ok = !tasks.is_empty() && differ.is_empty() && missing.is_empty();
    if tasks.is_empty() {
        text = "lama verify: no task line was read (pipe `srun ... lama verify` into \
                `lama verify --collect`)\n"
            .to_string();
    }
    (ok, text)
}

// --- reading /proc ------------------------------------------------------------------------------

fn read(path: &str) -> Option<String> {
    std::fs::read_to_string(path).ok()
}

/// Reads the threads of `pid` and of its children, recursively.
fn observe_threads(plan: &Planned, pid: u32, seen: &mut Seen, depth: u32) {
    let Ok(dir) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return;
    };
    let tids: Vec<u32> = dir
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .collect();
    for tid in tids {
        if let Some((name, cpus)) = read(&format!("/proc/{pid}/task/{tid}/status"))
            .as_deref()
            .and_then(thread_status)
        {
            seen.thread(
                plan,
                Thread {
                    pid,
                    tid,
                    name,
                    cpus: cpus.cpus().to_vec(),
                },
            );
        }
        if depth < 64 {
            if let Some(children) = read(&format!("/proc/{pid}/task/{tid}/children")) {
                for child in children.split_whitespace().filter_map(|c| c.parse().ok()) {
                    observe_threads(plan, child, seen, depth + 1);
                }
            }
        }
    }
}

/// The GPU device files this process may open, and those there are, by number: NVIDIA's
/// `/dev/nvidiaN` where the node has them, else DRM's render nodes `/dev/dri/renderDN` (AMD,
/// Intel). Judged by the devices controller without opening them
/// ([`lama_hwloc::device_access`]); a file the controller or its mode denies is not open.
fn gpus_open() -> (Vec<u32>, Vec<u32>) {
    let numbered = |dir: &str, prefix: &str| -> Vec<u32> {
        let mut found: Vec<u32> = std::fs::read_dir(dir)
            .map(|d| {
                d.flatten()
                    .filter_map(|e| {
                        e.file_name()
                            .to_str()
                            .and_then(|n| n.strip_prefix(prefix))
                            .and_then(|n| n.parse::<u32>().ok())
                    })
                    .collect()
            })
            .unwrap_or_default();
        found.sort_unstable();
        found
    };
    let (dir, prefix) = match numbered("/dev", "nvidia") {
        n if !n.is_empty() => ("/dev", "nvidia"),
        _ => ("/dev/dri", "renderD"),
    };
    let present = numbered(dir, prefix);
    let open = present
        .iter()
        .copied()
        .filter(|n| {
            lama_hwloc::device_access(std::path::Path::new(&format!("{dir}/{prefix}{n}")))
                .unwrap_or(false)
        })
        .collect();
    (open, present)
}

/// The preview's CPUs for `rank`, from `lama map --json` output.
fn expected_cpus(path: &PathBuf, rank: Option<u32>) -> Result<CpuList, Failure> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| Failure::Usage(format!("--expect {}: {e}", path.display())))?;
    let v: serde_json::Value = serde_json::from_str(&text).map_err(|e| {
        Failure::Usage(format!(
            "--expect {}: not lama map --json output ({e})",
            path.display()
        ))
    })?;
    let rank = rank.ok_or_else(|| {
        Failure::Usage(
            "--expect needs SLURM_PROCID, the task's rank: run as a task of the step".to_string(),
        )
    })?;
    let p = v["processes"]
        .as_array()
        .and_then(|ps| {
            ps.iter()
                .find(|p| p["rank"].as_u64() == Some(u64::from(rank)))
        })
        .ok_or_else(|| {
            Failure::Usage(format!(
                "--expect {}: the preview has no rank {rank} (is it for this step's size?)",
                path.display()
            ))
        })?;
    let cpus = p["cpus"].as_array().ok_or_else(|| {
        Failure::Usage(format!(
            "--expect {}: rank {rank} has no cpus",
            path.display()
        ))
    })?;
    Ok(CpuList::from_cpus(cpus.iter().filter_map(|c| {
        c.as_u64().and_then(|c| u32::try_from(c).ok())
    })))
}

pub fn run(args: VerifyArgs) -> Result<(), Failure> {
    if args.collect {
        return collect(args.np);
    }
    if !(args.every.is_finite() && args.every > 0.0 && args.every <= 3600.0) {
        return Err(Failure::Usage(format!(
            "--every {}: give a number of seconds above 0 and at most 3600, e.g. 0.2",
            args.every
        )));
    }
    let me = std::process::id();
    let environ = std::fs::read(format!("/proc/{me}/environ"))
        .map_err(|e| Failure::Place(format!("cannot read this task's environment: {e}")))?;
    let host = read("/proc/sys/kernel/hostname").unwrap_or_default();
    let plan = planned(&environ, host.trim()).map_err(Failure::Usage)?;
    let mut seen = Seen::default();
    if let Some(path) = &args.expect {
        seen.expected = Some(expected_cpus(path, plan.rank)?);
    }
    let mut status = None;
    let pid = if args.command.is_empty() {
        me
    } else {
        let mut child = crate::static_build::command(&args.command[0])
            .args(&args.command[1..])
            .spawn()
            .map_err(|e| {
                Failure::Place(format!(
                    "cannot start {}: {e}",
                    args.command[0].to_string_lossy()
                ))
            })?;
        let pid = child.id();
        let every = std::time::Duration::from_secs_f64(args.every);
        loop {
            // Read before asking whether it ended: the last reading is of a living process.
            observe_threads(&plan, pid, &mut seen, 0);
            // A program that has just ended (not yet reaped) has no mappings left: its last
            // reading stands.
            let m = numa_maps(&read(&format!("/proc/{pid}/numa_maps")).unwrap_or_default());
            if m.policy.is_some() {
                seen.memory = m;
            }
            match child.try_wait() {
                Ok(Some(s)) => {
                    status = Some(s);
                    break;
                }
                Ok(None) => std::thread::sleep(every),
                Err(e) => return Err(Failure::Place(format!("cannot wait for the program: {e}"))),
            }
        }
        pid
    };
    if pid == me {
        observe_threads(&plan, me, &mut seen, 0);
        seen.memory = numa_maps(&read(&format!("/proc/{me}/numa_maps")).unwrap_or_default());
    }
    if plan.gpus.is_some() {
        seen.gpus_open = Some(gpus_open());
    }
    if let Some(buses) = &plan.gpu_buses {
        let var = |k: &str| plan.vars.get(k).map(String::as_str);
        seen.gpu_cards = Some(crate::verify_gpu::observe(
            &crate::verify_gpu::RealCards,
            buses,
            var("CUDA_VISIBLE_DEVICES"),
            var("CUDA_DEVICE_ORDER"),
        ));
    }
    let report = judge(&plan, &seen);
    let text = if args.json {
        serde_json::to_string(&report).expect("a report serializes")
    } else {
        line(&report)
    };
    crate::output::print(&format!("{text}\n"))?;
    if let Some(s) = status {
        if !s.success() {
            use std::os::unix::process::ExitStatusExt;
            let code = s.code().unwrap_or_else(|| 128 + s.signal().unwrap_or(0));
            return Err(Failure::Status(u8::try_from(code).unwrap_or(1).max(1)));
        }
    }
    if report.agrees {
        Ok(())
    } else {
        Err(Failure::Status(1))
    }
}

fn collect(np: Option<u32>) -> Result<(), Failure> {
    use std::io::BufRead;
    let tasks: Vec<Collected> = std::io::stdin()
        .lock()
        .lines()
        .map_while(Result::ok)
        .filter_map(|l| collected(&l))
        .collect();
    let (ok, text) = summary(&tasks, np);
    crate::output::print(&text)?;
    if ok {
        Ok(())
    } else {
        Err(Failure::Status(1))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(vars: &[(&str, &str)]) -> Vec<u8> {
        let mut out = Vec::new();
        for (k, v) in vars {
            out.extend_from_slice(format!("{k}={v}").as_bytes());
            out.push(0);
        }
        out
    }

    fn base() -> Vec<(&'static str, &'static str)> {
        vec![
            ("SLURM_PROCID", "3"),
            ("SLURMD_NODENAME", "node1"),
            ("LAMA_BIND", "1c"),
            ("LAMA_CPUS", "2-3"),
        ]
    }

    fn thread(tid: u32, cpus: &[u32]) -> Thread {
        Thread {
            pid: 10,
            tid,
            name: "app".into(),
            cpus: cpus.to_vec(),
        }
    }

    #[test]
    fn the_plan_is_read_from_the_environment_whatever_else_it_holds() {
        let mut e = env(&base());
        e.extend_from_slice(b"ODD=\xff\xfe\0");
        let p = planned(&e, "host").unwrap();
        assert_eq!(p.rank, Some(3));
        assert_eq!(p.node, "node1");
        assert_eq!(p.cpus, Some(CpuList::parse("2-3").unwrap()));
        assert!(p.bad_vars.is_empty());
        let e = planned(&env(&[("PATH", "/bin")]), "h").unwrap_err();
        assert!(
            e.contains("no LAMA_CPUS") && e.contains("srun --lama-map"),
            "{e}"
        );
    }

    #[test]
    fn every_thread_must_run_on_the_planned_cpus() {
        let p = planned(&env(&base()), "h").unwrap();
        let mut seen = Seen::default();
        seen.thread(&p, thread(10, &[2, 3]));
        let r = judge(&p, &seen);
        assert!(r.agrees, "{:?}", r.differences);
        assert_eq!(
            line(&r),
            "lama verify: rank 3 on node1: agrees: 1 thread on CPUs 2-3 (1c)"
        );
        // A thread started before the binding keeps the wide mask; a later good reading does
        // not hide it.
        seen.thread(&p, thread(11, &[0, 1, 2, 3]));
        seen.thread(&p, thread(11, &[2, 3]));
        let r = judge(&p, &seen);
        assert!(!r.agrees);
        assert_eq!(
            line(&r),
            "lama verify: rank 3 on node1: DIFFERS: thread 11 (app) of pid 10 runs on CPUs 0-3, \
             not LAMA_CPUS 2-3"
        );
        // Without a binding the threads may run anywhere.
        let mut unbound = base();
        unbound[2] = ("LAMA_BIND", "none");
        unbound[3] = ("LAMA_CPUS", "");
        let p = planned(&env(&unbound), "h").unwrap();
        assert!(judge(&p, &seen).agrees);
    }

    #[test]
    fn the_preview_must_match() {
        let p = planned(&env(&base()), "h").unwrap();
        let mut seen = Seen::default();
        seen.thread(&p, thread(10, &[2, 3]));
        seen.expected = Some(CpuList::parse("2-3").unwrap());
        let r = judge(&p, &seen);
        assert!(line(&r).ends_with("(1c), as previewed"), "{}", line(&r));
        seen.expected = Some(CpuList::parse("0-1").unwrap());
        let r = judge(&p, &seen);
        assert_eq!(
            r.differences,
            ["the preview gives rank 3 CPUs 0-1, the plugin bound 2-3"]
        );
    }

    const MAPS: &str = "\
55d0c0a00000 bind:1 file=/usr/bin/app mapped=4 N0=4 kernelpagesize_kB=4
55d0c1a00000 bind:1 heap anon=40 dirty=40 N1=40 kernelpagesize_kB=4
7f0000000000 bind:1 anon=300 dirty=300 N0=12 N1=288 kernelpagesize_kB=4
7f1000000000 bind:1 file=/usr/lib/libc.so.6 mapped=90 mapmax=9 N0=90 kernelpagesize_kB=4
7ffd00000000 bind:1 stack anon=3 dirty=3 N1=3 kernelpagesize_kB=4
";

    #[test]
    fn memory_policy_and_anonymous_pages_are_read() {
        let m = numa_maps(MAPS);
        assert_eq!(m.policy.as_deref(), Some("bind:1"));
        // File pages (N0=4, N0=90) are the page cache's, not the task's.
        assert_eq!(m.anon_pages, BTreeMap::from([(0, 12), (1, 331)]));
        let many = numa_maps("7ffd00000000 prefer (many):0-1 stack anon=3 N0=3\n");
        assert_eq!(many.policy.as_deref(), Some("prefer (many):0-1"));
        assert_eq!(many.anon_pages, BTreeMap::from([(0, 3)]));
    }

    #[test]
    fn memory_must_follow_the_planned_policy() {
        let mut vars = base();
        vars.push(("LAMA_MEMBIND", "local"));
        vars.push(("LAMA_MEMS", "1"));
        let p = planned(&env(&vars), "h").unwrap();
        let mut seen = Seen {
            memory: numa_maps(MAPS),
            ..Seen::default()
        };
        seen.thread(&p, thread(10, &[2, 3]));
        assert_eq!(
            judge(&p, &seen).differences,
            ["12 pages of anonymous memory on NUMA node 0, outside LAMA_MEMS 1"]
        );
        seen.memory = numa_maps("7ffd00000000 default stack anon=3 N1=3\n");
        assert_eq!(
            judge(&p, &seen).differences,
            ["the memory policy is default, not bind to LAMA_MEMS 1 (LAMA_MEMBIND local)"]
        );
        seen.memory = numa_maps("7ffd00000000 bind=static:1 stack anon=3 N1=3\n");
        assert!(judge(&p, &seen).agrees);
        vars.pop();
        let p = planned(&env(&vars), "h").unwrap();
        assert_eq!(p.bad_vars, ["LAMA_MEMBIND is set without LAMA_MEMS"]);
    }

    #[test]
    fn variables_must_agree_with_the_binding() {
        let mut vars = base();
        vars.push(("OMP_PLACES", "{2},{3}"));
        vars.push(("OMP_PROC_BIND", "close"));
        assert!(planned(&env(&vars), "h").unwrap().bad_vars.is_empty());
        vars[4] = ("OMP_PLACES", "{2:3}");
        assert_eq!(
            planned(&env(&vars), "h").unwrap().bad_vars,
            ["OMP_PLACES names CPUs 2-4, not all within LAMA_CPUS 2-3"]
        );
        let mut gpu = base();
        gpu.push(("LAMA_GPUS", "2"));
        assert_eq!(
            planned(&env(&gpu), "h").unwrap().bad_vars,
            ["LAMA_GPUS is set but no GPU variable names the task's GPUs"]
        );
        gpu.push(("CUDA_VISIBLE_DEVICES", "2"));
        let p = planned(&env(&gpu), "h").unwrap();
        assert!(p.bad_vars.is_empty());
        let mut seen = Seen::default();
        seen.thread(&p, thread(10, &[2, 3]));
        seen.gpus_open = Some((vec![], vec![0, 1, 2, 3]));
        assert_eq!(
            judge(&p, &seen).differences,
            ["the task may open 0 of the node's GPU devices, fewer than its 1 GPUs (LAMA_GPUS 2)"]
        );
        seen.gpus_open = Some((vec![2], vec![0, 1, 2, 3]));
        assert!(line(&judge(&p, &seen)).ends_with("GPUs 2 (1 device(s) open)"));
        // The plugin names the task's card: the report names it, and a card it may not open
        // is a difference.
        gpu.push(("LAMA_GPU_BUS_IDS", "0000:84:00.0"));
        let p = planned(&env(&gpu), "h").unwrap();
        assert_eq!(
            p.gpu_buses.as_deref(),
            Some(&["0000:84:00.0".to_string()][..])
        );
        let card = |open| crate::verify_gpu::Card {
            bus: "0000:84:00.0".into(),
            file: Some("/dev/nvidia0".into()),
            open,
        };
        seen.gpu_cards = Some(crate::verify_gpu::CardsSeen {
            cards: vec![card(true)],
            cuda_first: Some(Ok("0000:84:00.0".into())),
        });
        let r = judge(&p, &seen);
        assert!(r.agrees, "{:?}", r.differences);
        assert!(line(&r).ends_with("GPUs 2 on card(s) 0000:84:00.0 (1 device(s) open)"));
        assert_eq!(
            r.gpu_cards_open.as_deref(),
            Some(&["0000:84:00.0".to_string()][..])
        );
        seen.gpu_cards.as_mut().unwrap().cards = vec![card(false)];
        assert_eq!(
            judge(&p, &seen).differences,
            ["the task may not open its GPU 2's card 0000:84:00.0 (/dev/nvidia0)"]
        );
        // One bus id per GPU, each a bus id.
        gpu.pop();
        gpu.push(("LAMA_GPU_BUS_IDS", "0000:84:00.0,/dev/sda"));
        assert_eq!(
            planned(&env(&gpu), "h").unwrap().bad_vars,
            [
                "LAMA_GPU_BUS_IDS 0000:84:00.0,/dev/sda does not name one PCI bus id per GPU of \
              LAMA_GPUS"
            ]
        );
    }

    #[test]
    fn a_step_is_summarized_from_its_lines() {
        let p = planned(&env(&base()), "h").unwrap();
        let mut seen = Seen::default();
        seen.thread(&p, thread(10, &[0]));
        let bad = judge(&p, &seen);
        let json = serde_json::to_string(&bad).unwrap();
        let lines = [
            "0: lama verify: rank 0 on node1: agrees: 1 thread on CPUs 0 (1c)".to_string(),
            format!("3: {json}"),
            "lama verify: rank 1 on node2: agrees: 1 thread on CPUs 1 (1c)".to_string(),
            "srun: some other line".to_string(),
        ];
        let tasks: Vec<Collected> = lines.iter().filter_map(|l| collected(l)).collect();
        assert_eq!(tasks.len(), 3);
        let (ok, text) = summary(&tasks, Some(5));
        assert!(!ok);
        assert_eq!(
            text,
            "lama verify: 3 tasks on 2 nodes: 2 agree, 1 differ, no line from ranks 2,4\n  \
             rank 3 on node1: thread 10 (app) of pid 10 runs on CPUs 0, not LAMA_CPUS 2-3\n"
        );
        let (ok, _) = summary(&tasks[..1], None);
        assert!(ok);
        let (ok, text) = summary(&[], None);
        assert!(!ok && text.contains("no task line"), "{text}");
    }
}

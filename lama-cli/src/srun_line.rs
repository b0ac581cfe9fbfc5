//! `lama map -- srun -N2 -n8 -c2 --lama-map=scbnh ./app`: the srun line a user is about to
//! run, translated into `lama map`'s own options (which take srun's spellings for the same
//! things), so that the preview is that step's. Options of srun that do not change where the
//! plugin puts a task (the partition, the time, the job's name, its output) are left out with a
//! note; options that change it in a way `lama map` does not model are refused with the reason,
//! never silently dropped; the program and its arguments are not read.

/// srun's options that `lama map` takes with the same meaning: srun's spellings (short, long)
/// and `lama map`'s option.
const SAME: [(Option<char>, &str, &str); 18] = [
    (Some('N'), "nodes", "--nodes"),
    (Some('n'), "ntasks", "--np"),
    (Some('c'), "cpus-per-task", "--cpus-per-task"),
    (Some('m'), "distribution", "--distribution"),
    (None, "ntasks-per-node", "--ntasks-per-node"),
    (None, "gpus-per-task", "--gpus-per-task"),
    (None, "gpu-bind", "--gpu-bind"),
    (None, "ntasks-per-gpu", "--ntasks-per-gpu"),
    (Some('w'), "nodelist", "--node-names"),
    (None, "lama-map", "--map"),
    (None, "lama-bind", "--bind"),
    (None, "lama-mppr", "--mppr"),
    (None, "lama-order", "--order"),
    // Read by Slurm's own placement (--slurm, --compare).
    (None, "cpu-bind", "--cpu-bind"),
    (None, "hint", "--hint"),
    (None, "threads-per-core", "--threads-per-core"),
    (None, "ntasks-per-core", "--ntasks-per-core"),
    (None, "ntasks-per-socket", "--ntasks-per-socket"),
];

/// srun's options that change nothing `lama map` shows, taking a value.
const IGNORED_WITH_VALUE: [(Option<char>, &str); 28] = [
    (Some('p'), "partition"),
    (Some('t'), "time"),
    (Some('J'), "job-name"),
    (Some('A'), "account"),
    (Some('q'), "qos"),
    (None, "mem"),
    (None, "mem-per-cpu"),
    (None, "mem-per-gpu"),
    (Some('o'), "output"),
    (Some('e'), "error"),
    (Some('i'), "input"),
    (Some('D'), "chdir"),
    (None, "export"),
    (None, "mpi"),
    (None, "reservation"),
    (Some('x'), "exclude"),
    (Some('d'), "dependency"),
    (None, "comment"),
    (None, "signal"),
    (None, "begin"),
    (None, "time-min"),
    (None, "kill-on-invalid-dep"),
    (Some('C'), "constraint"),
    // sbatch's and salloc's own.
    (Some('a'), "array"),
    (None, "mail-user"),
    (None, "mail-type"),
    (None, "wrap"),
    (None, "open-mode"),
];

/// srun's options that `lama map` translates otherwise, or refuses with the reason.
const SPECIAL: [&str; 12] = [
    "exclusive",
    "exact",
    "overcommit",
    "lama-omp",
    "lama-membind",
    "lama-gpu-isolate",
    "lama-plan",
    "extra-node-info",
    "gres",
    "gpus",
    "gpus-per-node",
    "cpus-per-gpu",
];

/// srun's options without a value that change nothing `lama map` shows.
const IGNORED_FLAGS: [(Option<char>, &str); 14] = [
    (None, "overlap"),
    (Some('l'), "label"),
    (Some('u'), "unbuffered"),
    (Some('v'), "verbose"),
    (Some('Q'), "quiet"),
    (None, "pty"),
    (Some('X'), "disable-status"),
    (Some('K'), "kill-on-bad-exit"),
    (None, "lama-verbose"),
    // sbatch's and salloc's own.
    (None, "requeue"),
    (None, "no-requeue"),
    (None, "parsable"),
    (Some('H'), "hold"),
    (Some('W'), "wait"),
];

/// The srun line (after `srun`) as `lama map`'s options, with a note for each option left out.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Translated {
    /// `lama map` options.
    pub args: Vec<String>,
    /// What was left out or differs, one line each.
    pub notes: Vec<String>,
    /// The first word that is no option: the program (srun, salloc) or the script (sbatch).
    pub program: Option<String>,
    /// The GPUs the line asks for (`--gres=gpu:N`, `--gpus-per-node`, `--gpus`/`-G`) and
    /// `--cpus-per-gpu`, as written, for [`gpu_counts`].
    pub gpus: GpuCounts,
}

impl Translated {
    /// The value given to `lama map`'s option `ours`, if the line gives it.
    fn value(&self, ours: &str) -> Option<String> {
        let at = self.args.iter().position(|a| a == ours)?;
        self.args.get(at + 1).cloned()
    }
}

/// The GPU counts of a line: per node (`--gres=gpu[:TYPE]:N`, `--gpus-per-node`), for the
/// job (`--gpus`), and CPUs per GPU.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct GpuCounts {
    per_node: Option<(String, u32)>,
    job: Option<u32>,
    cpus_per_gpu: Option<u32>,
}

/// One option of the srun line: its name as written (`-N`, `--nodes`), its long name, which
/// table it is in, and its value if it was written into the same word (`-N2`, `--nodes=2`).
struct Word {
    written: String,
    long: &'static str,
    kind: Kind,
    attached: Option<String>,
}

/// Which of the tables above an option is in.
#[derive(Clone, Copy)]
enum Kind {
    Same(&'static str),
    Value,
    Flag,
    Special,
}

/// The long option `long` as the tables name it, and which table that is.
fn kind_of(long: &str) -> Option<(&'static str, Kind)> {
    if let Some((_, l, ours)) = SAME.iter().find(|(_, l, _)| *l == long) {
        return Some((l, Kind::Same(ours)));
    }
    if let Some((_, l)) = IGNORED_WITH_VALUE.iter().find(|(_, l)| *l == long) {
        return Some((l, Kind::Value));
    }
    if let Some((_, l)) = IGNORED_FLAGS.iter().find(|(_, l)| *l == long) {
        return Some((l, Kind::Flag));
    }
    SPECIAL
        .iter()
        .find(|l| **l == long)
        .map(|l| (*l, Kind::Special))
}

/// The long name of a short option.
fn long_of(short: char) -> Option<&'static str> {
    let same = SAME.iter().map(|(s, l, _)| (*s, *l));
    let ignored = IGNORED_WITH_VALUE.iter().chain(&IGNORED_FLAGS).copied();
    same.chain(ignored)
        .chain([
            (Some('O'), "overcommit"),
            (Some('G'), "gpus"),
            (Some('B'), "extra-node-info"),
        ])
        .find(|(s, _)| *s == Some(short))
        .map(|(_, l)| l)
}

/// Splits one word of the line into an option, or `None` for the program.
fn word(w: &str) -> Result<Option<Word>, String> {
    let (written, name, attached) = if let Some(rest) = w.strip_prefix("--") {
        let (name, attached) = match rest.split_once('=') {
            Some((n, v)) => (n, Some(v.to_string())),
            None => (rest, None),
        };
        (format!("--{name}"), name, attached)
    } else if let Some(rest) = w.strip_prefix('-').filter(|r| !r.is_empty()) {
        let mut chars = rest.chars();
        let short = chars.next().unwrap_or_default();
        let name = long_of(short).ok_or_else(|| unknown(w))?;
        let tail: String = chars.collect();
        (
            format!("-{short}"),
            name,
            (!tail.is_empty()).then_some(tail),
        )
    } else {
        return Ok(None);
    };
    let (long, kind) = kind_of(name).ok_or_else(|| unknown(w))?;
    Ok(Some(Word {
        written,
        long,
        kind,
        attached,
    }))
}

fn unknown(w: &str) -> String {
    format!(
        "srun option '{w}' is not one lama map knows: leave it out of the line (lama map reads \
         -N, -n, -c, -m, --ntasks-per-node, --gpus-per-task, --gpu-bind, --ntasks-per-gpu, \
         --cpu-bind, --hint, --threads-per-core, --ntasks-per-core, --ntasks-per-socket, -B, \
         -w, -O and the --lama-* options, and leaves out those that place nothing, such as -p, -t, -J, \
         --mem and -o)"
    )
}

/// Translates the srun line `line` (the words after `srun`).
pub fn translate(line: &[String]) -> Result<Translated, String> {
    // (A ':' word anywhere, also after a component's program, makes the line heterogeneous.)
    if line.iter().any(|w| w == ":") {
        return Err(
            "a heterogeneous srun line (with ':') is previewed one component at a \
                    time: give lama map one component's options"
                .into(),
        );
    }
    let mut out = Translated::default();
    let mut words = line.iter();
    while let Some(w) = words.next() {
        let Some(opt) = word(w)? else {
            out.program = Some(w.clone());
            break;
        };
        let takes_value = match opt.kind {
            Kind::Same(_) | Kind::Value => true,
            Kind::Flag => false,
            Kind::Special => !matches!(
                opt.long,
                "overcommit" | "lama-omp" | "lama-gpu-isolate" | "exclusive" | "exact"
            ),
        };
        let value = match (takes_value, opt.attached.clone()) {
            (true, Some(v)) => Some(v),
            (true, None) => Some(
                words
                    .next()
                    .cloned()
                    .ok_or_else(|| format!("srun option {} needs a value", opt.written))?,
            ),
            (false, None) => None,
            (false, Some(_)) => return Err(format!("srun option {} takes no value", opt.written)),
        };
        apply(&mut out, &opt, value)?;
    }
    Ok(out)
}

/// What one option of the line becomes.
fn apply(out: &mut Translated, opt: &Word, value: Option<String>) -> Result<(), String> {
    let v = value.unwrap_or_default();
    match (opt.kind, opt.long) {
        (Kind::Same("--nodes"), _) => {
            let least = least_nodes(&opt.written, &v)?;
            if least != v {
                out.notes.push(format!(
                    "{} {v}: previewed on {least} node(s), the fewest srun may be given",
                    opt.written
                ));
            }
            set(out, "--nodes", least);
        }
        (Kind::Same(ours), _) => set(out, ours, v),
        (Kind::Value | Kind::Flag, _) => out.notes.push(format!(
            "{}: left out (it does not change where the plugin puts a task)",
            opt.written
        )),
        (_, "overcommit") => out.args.push("--oversubscribe".into()),
        // srun's --exclusive makes its step exact (and a job it creates exclusive).
        (_, "exclusive" | "exact") => {
            if !out.args.iter().any(|a| a == "--exact") {
                out.args.push("--exact".into());
            }
        }
        (_, "lama-omp") => out.args.extend(["--env".into(), "--omp".into()]),
        (_, "lama-gpu-isolate") => out.args.push("--gpu-isolate".into()),
        (_, "lama-membind") => set(out, "--membind", v),
        (_, "extra-node-info") => extra_node_info(out, &opt.written, &v)?,
        (_, "gres") => match gpus_of_gres(&v)? {
            Some(n) => out.gpus.per_node = Some((format!("--gres={v}"), n)),
            None => out.notes.push(format!(
                "--gres={v}: left out (no GPUs in it; it does not change where the plugin puts \
                 a task)"
            )),
        },
        (_, "gpus-per-node") => {
            out.gpus.per_node = Some((format!("--gpus-per-node={v}"), gpu_count(&opt.written, &v)?))
        }
        (_, "gpus") => out.gpus.job = Some(gpu_count(&opt.written, &v)?),
        (_, "cpus-per-gpu") => {
            out.gpus.cpus_per_gpu = Some(
                v.parse()
                    .ok()
                    .filter(|&c: &u32| c > 0)
                    .ok_or_else(|| format!("--cpus-per-gpu {v}: a count of CPUs"))?,
            )
        }
        (_, "lama-plan") => {
            return Err(
                "--lama-plan: a plan places every rank itself; `lama plan` shows it, \
                        and lama map previews layouts"
                    .into(),
            )
        }
        (_, other) => {
            return Err(format!(
                "srun option --{other} changes which CPUs a step's tasks may use, which lama \
                 map does not model: leave it out, and give the CPUs with --restrict"
            ))
        }
    }
    Ok(())
}

/// `-B S[:C[:T]]`: its threads as `--threads-per-core` (what a step's binding reads); its
/// sockets and cores size the allocation, which the preview takes whole.
fn extra_node_info(out: &mut Translated, written: &str, v: &str) -> Result<(), String> {
    let parts: Vec<&str> = v.split(':').collect();
    let count = |p: &str| p == "*" || p.parse::<u32>().is_ok_and(|n| n > 0);
    if parts.len() > 3 || !parts.iter().all(|p| count(p)) {
        return Err(format!(
            "{written} {v}: sockets[:cores[:threads]] per node, each a count or *"
        ));
    }
    if let Some(t) = parts.get(2).filter(|t| **t != "*") {
        set(out, "--threads-per-core", t.to_string());
    }
    out.notes.push(format!(
        "{written} {v}: its sockets and cores choose the nodes and size the allocation, which \
         the preview takes whole{}",
        if parts.len() == 3 {
            "; its threads are read as --threads-per-core"
        } else {
            ""
        }
    ));
    Ok(())
}

/// `lama map`'s option `ours` set to `value`: a later one replaces an earlier one, as srun's
/// own options do (and an `#SBATCH` line's give way to the command line's).
fn set(out: &mut Translated, ours: &str, value: String) {
    // (The flags among the arguments, --oversubscribe, --env, --omp, stand alone: an option is
    // found by its name, never by its place.)
    let at = out
        .args
        .iter()
        .position(|a| a == ours)
        .filter(|&i| i + 1 < out.args.len());
    match at {
        Some(i) => out.args[i + 1] = value,
        None => out.args.extend([ours.to_string(), value]),
    }
}

/// The node count of `-N MIN[-MAX]`: its minimum.
fn least_nodes(written: &str, v: &str) -> Result<String, String> {
    let least = v.split_once('-').map_or(v, |(min, _)| min);
    match least.parse::<u32>() {
        Ok(n) if n > 0 => Ok(n.to_string()),
        _ => Err(format!(
            "{written} {v}: a node count (2) or a range of them (2-4), as srun takes"
        )),
    }
}

/// The count of `[TYPE:]N` (`--gpus`, `--gpus-per-node`).
fn gpu_count(written: &str, v: &str) -> Result<u32, String> {
    v.rsplit(':')
        .next()
        .and_then(|n| n.parse().ok())
        .filter(|&n: &u32| n > 0)
        .ok_or_else(|| format!("{written} {v}: a count of GPUs, [TYPE:]N"))
}

/// The GPUs per node of a `--gres` list (`gpu:4`, `gpu:a100:2,shard:8`): `None` without a
/// `gpu` entry; `gpu` alone is one.
fn gpus_of_gres(v: &str) -> Result<Option<u32>, String> {
    let Some(gpu) = v.split(',').find(|g| *g == "gpu" || g.starts_with("gpu:")) else {
        return Ok(None);
    };
    if gpu == "gpu" {
        return Ok(Some(1));
    }
    gpu_count("--gres", gpu).map(Some)
}

/// The step's GPUs from the line's counts, as `lama map --gpus LIST` (the first N of each
/// node's by Slurm's index: which ones Slurm gives is its choice, said in the note), and
/// `--cpus-per-gpu` with `--gpus-per-task` as `-c`. `--gpus N` over several nodes is refused:
/// how many each node gets is the allocation's.
fn gpu_counts(t: &mut Translated, before: &[String]) -> Result<(), String> {
    let nodes: u32 = t.value("--nodes").and_then(|n| n.parse().ok()).unwrap_or(1);
    let per_node = match (&t.gpus.per_node, t.gpus.job) {
        (Some((written, n)), _) => Some((written.clone(), *n)),
        (None, Some(n)) if n % nodes == 0 => Some((format!("--gpus={n}"), n / nodes)),
        (None, Some(n)) => {
            return Err(format!(
                "--gpus={n} over -N {nodes}: how many each node gets is Slurm's choice; give \
                 --gpus-per-node (or --gres=gpu:N)"
            ))
        }
        (None, None) => None,
    };
    if let Some((written, n)) = per_node {
        if !given_before(before, "--gpus") {
            t.notes.push(format!(
                "{written}: {n} GPU(s) a node; which ones is Slurm's choice, previewed as the \
                 first {n} by Slurm's index (--gpus LIST before -- takes the ones \
                 SLURM_STEP_GPUS shows)"
            ));
            let list: Vec<String> = (0..n).map(|g| g.to_string()).collect();
            t.args.extend(["--gpus".to_string(), list.join(",")]);
        }
    }
    // Slurm's closest GPUs are what a layout led by 'g' gives each task anyway.
    let led_by_g = t.value("--map").is_some_and(|m| m.starts_with('g'));
    if led_by_g && t.value("--gpu-bind").as_deref() == Some("closest") {
        if let Some(at) = t.args.iter().position(|a| a == "--gpu-bind") {
            t.args.drain(at..at + 2);
        }
        t.notes.push(
            "--gpu-bind=closest: left out (a layout led by 'g' gives each task the GPUs closest \
             to its CPUs)"
                .into(),
        );
    }
    if let Some(c) = t.gpus.cpus_per_gpu {
        match t
            .value("--gpus-per-task")
            .and_then(|k| k.parse::<u32>().ok())
        {
            Some(k) if t.value("--cpus-per-task").is_none() => {
                t.notes.push(format!(
                    "--cpus-per-gpu={c} with --gpus-per-task={k}: -c {} a task, as Slurm gives",
                    c * k
                ));
                set(t, "--cpus-per-task", (c * k).to_string());
            }
            _ => t.notes.push(format!(
                "--cpus-per-gpu={c}: left out (without --gpus-per-task it sizes the job's CPUs, \
                 not a task's; -c sets a task's)"
            )),
        }
    }
    Ok(())
}

/// What `--cpu-bind=KIND` does beside LAMA (the plugin's own rule, `step::leave_alone` and its
/// warning).
fn cpu_bind_note(kind: &str) -> String {
    if lama_slurm::cpu_bind::cpu_bind_none(kind) {
        "--cpu-bind=none: with --lama-* options on the line LAMA places the tasks; without \
         them the plugin leaves the step alone (a launcher's daemons)"
            .into()
    } else {
        format!(
            "--cpu-bind={kind}: LAMA's binding replaces Slurm's (the plugin warns so); give \
             --cpu-bind=none or leave it out"
        )
    }
}

/// The launcher a pasted line starts with (`srun`, `sbatch`, `salloc`, also by path).
fn launcher(word: &str) -> Option<&'static str> {
    let name = word.rsplit('/').next().unwrap_or(word);
    ["srun", "sbatch", "salloc"]
        .into_iter()
        .find(|&l| l == name)
}

/// Whether `word` is a shell assignment (`OMP_NUM_THREADS=2`) before the command.
fn is_assignment(word: &str) -> bool {
    word.split_once('=').is_some_and(|(name, _)| {
        !name.is_empty()
            && !name.starts_with(|c: char| c.is_ascii_digit())
            && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
    })
}

/// The most of a batch script read for its `#SBATCH` lines.
const MAX_SCRIPT_BYTES: u64 = 1 << 20;

/// The options of a batch script's `#SBATCH` lines, as sbatch reads them: those before the
/// first line that is neither blank nor a comment, each line's words up to a `#` that starts
/// a word. `None` when the script cannot be read (then only the line's options count).
fn script_options(path: &str) -> Option<Vec<String>> {
    use std::io::Read;
    let mut text = String::new();
    std::fs::File::open(path)
        .ok()?
        .take(MAX_SCRIPT_BYTES)
        .read_to_string(&mut text)
        .ok()?;
    let mut words = Vec::new();
    for line in text.lines().map(str::trim) {
        if let Some(rest) = line.strip_prefix("#SBATCH") {
            words.extend(
                rest.split_whitespace()
                    .take_while(|w| !w.starts_with('#'))
                    .map(str::to_string),
            );
        } else if !line.is_empty() && !line.starts_with('#') {
            break;
        }
    }
    Some(words)
}

/// `lama map`'s options that a pasted line sets, with the spellings `lama map` takes for each
/// before `--` (long names, aliases, short options).
const SPELLINGS: [(&str, &[&str]); 21] = [
    ("--nodes", &["--nodes", "-N"]),
    ("--np", &["--np", "--ntasks", "-n"]),
    ("--cpus-per-task", &["--cpus-per-task", "-c"]),
    ("--distribution", &["--distribution", "-m"]),
    ("--ntasks-per-node", &["--ntasks-per-node"]),
    ("--gpus-per-task", &["--gpus-per-task"]),
    ("--gpu-bind", &["--gpu-bind"]),
    ("--ntasks-per-gpu", &["--ntasks-per-gpu"]),
    ("--node-names", &["--node-names"]),
    ("--map", &["--map", "--lama-map"]),
    ("--bind", &["--bind", "--lama-bind"]),
    ("--mppr", &["--mppr", "--lama-mppr"]),
    ("--order", &["--order", "--lama-order"]),
    ("--membind", &["--membind", "--lama-membind"]),
    ("--oversubscribe", &["--oversubscribe", "--overcommit"]),
    ("--gpus", &["--gpus"]),
    ("--cpu-bind", &["--cpu-bind"]),
    ("--hint", &["--hint"]),
    ("--threads-per-core", &["--threads-per-core"]),
    ("--ntasks-per-core", &["--ntasks-per-core"]),
    ("--ntasks-per-socket", &["--ntasks-per-socket"]),
];

/// Whether `before` (lama map's own words, before `--`) gives the option `ours`.
fn given_before(before: &[String], ours: &str) -> bool {
    let spellings = SPELLINGS
        .iter()
        .find(|(o, _)| *o == ours)
        .map_or(&[][..], |(_, s)| s);
    before.iter().any(|w| {
        spellings.iter().any(|s| {
            w == s
                || (s.starts_with("--") && w.starts_with(&format!("{s}=")))
                || (s.len() == 2 && !s.starts_with("--") && w.starts_with(s))
        })
    })
}

/// Refuses an option given both before `--` and in the line: which one is meant is not clear.
fn refuse_twice(t: &Translated, before: &[String], cmd: &str) -> Result<(), String> {
    for (ours, _) in SPELLINGS.iter() {
        if t.args.iter().any(|a| a == ours) && given_before(before, ours) {
            return Err(format!(
                "{ours} is given twice: before -- and in the {cmd} line; give it once (in the \
                 line, to preview the line as it is)"
            ));
        }
    }
    Ok(())
}

/// The counts srun derives when the line leaves them out: the nodes from a `-w` list, and
/// the tasks from `-N` (one per node) or `-N` with `--ntasks-per-node`.
fn derive_counts(t: &mut Translated, before: &[String], cmd: &str) -> Result<(), String> {
    if t.value("--nodes").is_none() && !given_before(before, "--nodes") {
        if let Some(list) = t.value("--node-names") {
            let names = lama_plan::hostlist::expand(&list).map_err(|e| format!("-w: {e}"))?;
            t.notes.push(format!(
                "-w {list}: {} node(s), as -N {}",
                names.len(),
                names.len()
            ));
            set(t, "--nodes", names.len().to_string());
        }
    }
    if t.value("--np").is_some() || given_before(before, "--np") {
        return Ok(());
    }
    let nodes: u64 = match t.value("--nodes") {
        Some(n) => n.parse().map_err(|_| format!("-N {n}: not a node count"))?,
        None if given_before(before, "--nodes") => return Ok(()),
        None => 1,
    };
    let tasks = match t.value("--ntasks-per-node") {
        Some(k) => {
            let k: u64 = k
                .parse()
                .map_err(|_| format!("--ntasks-per-node {k}: not a count"))?;
            t.notes.push(format!(
                "no -n: {cmd} runs -N {nodes} x --ntasks-per-node {k} = {} task(s)",
                nodes * k
            ));
            nodes * k
        }
        None => {
            let c = t.value("--cpus-per-task").map_or(String::new(), |c| {
                format!(
                    " (inside an allocation srun may start more with -c {c}: give -n to be sure)"
                )
            });
            t.notes.push(format!(
                "no -n: {cmd} runs one task per node, {nodes} task(s){c}"
            ));
            nodes
        }
    };
    set(t, "--np", tasks.to_string());
    Ok(())
}

/// `lama map`'s own words with mpirun's and srun's spellings of its options read as its own:
/// `-np N` as `-n N`, `--map-by V` as `--map V`, `--bind-to V` as `--bind V`, and Slurm's
/// `--cpu-bind=KIND` as the LAMA binding of the same width; the notes say so. A `--cpu-bind`
/// that names CPUs (map_cpu, mask_cpu, ...) is refused: lama map previews layouts.
fn own_spellings(words: &[String]) -> Result<(Vec<String>, Vec<String>), String> {
    // With --slurm or --compare, or without a layout, --cpu-bind is Slurm's own.
    let lama_only = words.iter().any(|w| {
        ["--map", "--lama-map", "--map-by"]
            .iter()
            .any(|m| w == m || w.starts_with(&format!("{m}=")))
    }) && !words.iter().any(|w| w == "--slurm" || w == "--compare");
    let mut out = Vec::with_capacity(words.len());
    let mut notes = Vec::new();
    let mut i = 0;
    while i < words.len() {
        let w = &words[i];
        let (name, attached) = match w.split_once('=') {
            Some((n, v)) if n.starts_with("--") => (n, Some(v.to_string())),
            _ => (w.as_str(), None),
        };
        let ours = match name {
            "-np" => "-n",
            "--map-by" => "--map",
            "--bind-to" => "--bind",
            "--cpu-bind" if lama_only => "--bind",
            _ => {
                out.push(w.clone());
                i += 1;
                continue;
            }
        };
        let value = match attached {
            Some(v) => v,
            None => {
                i += 1;
                words
                    .get(i)
                    .cloned()
                    .ok_or_else(|| format!("{name} needs a value"))?
            }
        };
        let lama = if name == "--cpu-bind" {
            cpu_bind_as_lama(&value)?
        } else {
            value.clone()
        };
        notes.push(format!("{name} {value}: read as {ours} {lama}"));
        out.extend([ours.to_string(), lama]);
        i += 1;
    }
    Ok((out, notes))
}

/// The LAMA binding of Slurm's `--cpu-bind=KIND` (its options after a comma, such as
/// `verbose`, left out).
fn cpu_bind_as_lama(value: &str) -> Result<String, String> {
    let kind = value
        .split(',')
        .find(|k| !lama_slurm::cpu_bind::is_modifier(k))
        .unwrap_or("");
    let width = match kind {
        "cores" => "1c",
        "threads" => "1h",
        "sockets" => "1s",
        "ldoms" => "1N",
        "none" | "no" => "none",
        other => {
            return Err(format!(
                "--cpu-bind={other}: Slurm's binding by CPU lists or ranks is not a layout, which \
                 is what lama map previews: give --bind (1c for cores, 1h threads, 1s sockets, \
                 1N NUMA nodes, none)"
            ))
        }
    };
    Ok(width.to_string())
}

/// `args` (a `lama` command line) with `map ... -- [VAR=value ...] srun|sbatch|salloc LINE`
/// replaced by `map ...` and the line's options, and `lama map`'s own words in mpirun's and
/// srun's spellings read as its own ([`own_spellings`]); the notes to print. For sbatch, the
/// script's `#SBATCH` options come first and the line's own win. Other command lines are
/// returned as they are (arguments that are no UTF-8 untouched).
pub fn expand(
    args: Vec<std::ffi::OsString>,
) -> Result<(Vec<std::ffi::OsString>, Vec<String>), String> {
    let text: Vec<String> = args
        .iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let is_map = text.iter().skip(1).find(|a| !a.starts_with('-')) == Some(&"map".to_string());
    if !is_map {
        return Ok((args, Vec::new()));
    }
    let dash = text.iter().position(|a| a == "--").unwrap_or(text.len());
    let (own, mut notes) = own_spellings(&text[..dash])?;
    // lama map's own words: as given, unless a spelling was read.
    let mut out: Vec<std::ffi::OsString> = match notes.is_empty() {
        true => args[..dash].to_vec(),
        false => own.iter().map(Into::into).collect(),
    };
    match pasted_line(&own, text.get(dash + 1..).unwrap_or_default())? {
        Some(t) => {
            out.extend(t.args.into_iter().map(Into::into));
            notes.extend(t.notes.into_iter().map(|n| format!("pasted line: {n}")));
        }
        None => out.extend(args[dash..].iter().cloned()),
    }
    Ok((out, notes))
}

/// The line after `--` (`line`) as `lama map`'s options and the notes, given lama map's own
/// words (`before`); `None` when it is no srun, sbatch or salloc line.
fn pasted_line(before: &[String], line: &[String]) -> Result<Option<Translated>, String> {
    let assignments = line.iter().take_while(|w| is_assignment(w)).count();
    let Some(cmd) = line.get(assignments).and_then(|w| launcher(w)) else {
        return Ok(None);
    };
    let mut notes: Vec<String> = line[..assignments]
        .iter()
        .map(|a| {
            let name = a.split('=').next().unwrap_or_default();
            let why = if name.starts_with("SLURM_") || name.starts_with("SRUN_") {
                format!("{cmd} reads it, lama map does not: give it as an option")
            } else {
                "the environment, left out".to_string()
            };
            format!("{name}=: {why}")
        })
        .collect();
    let own = &line[assignments + 1..];
    let mut t = translate(own)?;
    if cmd == "sbatch" {
        if let Some(script) = t.program.clone() {
            match script_options(&script) {
                Some(mut words) => {
                    notes.push(format!(
                        "{script}: its #SBATCH options read ({} word(s)); the line's own win",
                        words.len()
                    ));
                    words.extend(own.iter().cloned());
                    t = translate(&words)?;
                }
                None => notes.push(format!(
                    "{script}: not readable here, so its #SBATCH options are not read"
                )),
            }
        }
    }
    refuse_twice(&t, before, cmd)?;
    derive_counts(&mut t, before, cmd)?;
    gpu_counts(&mut t, before)?;
    let has_map =
        |a: &String| a == "--map" || a.starts_with("--map=") || a.starts_with("--lama-map");
    if !t.args.iter().any(has_map) && !before.iter().any(has_map) {
        t.notes.push(format!(
            "no --lama-map: the plugin leaves this {cmd} line's tasks to Slurm (unless the site \
             sets a default map=), so this is Slurm's own placement; add --lama-map=LAYOUT to \
             see LAMA's, or --compare --map LAYOUT before -- for both"
        ));
        if !before.iter().any(|w| w == "--slurm") {
            t.args.push("--slurm".into());
        }
    } else if !before.iter().any(|w| w == "--compare") {
        if let Some(kind) = t.value("--cpu-bind") {
            t.notes.push(cpu_bind_note(&kind));
        }
        if let Some(at) = t.args.iter().position(|a| a == "--exact") {
            // Only Slurm's own placement reads it; the LAMA preview takes the job's CPUs.
            t.args.remove(at);
            t.notes.push(
                "--exclusive/--exact: the step has only the cores its tasks need, and the \
                 preview places on the job's CPUs: where they differ, give the step's with \
                 --restrict (--compare shows Slurm's choice)"
                    .into(),
            );
        }
    }
    notes.append(&mut t.notes);
    t.notes = notes;
    Ok(Some(t))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(s: &str) -> Vec<String> {
        s.split_whitespace().map(str::to_string).collect()
    }

    /// A `lama` command line of words.
    fn os(s: &str) -> Vec<std::ffi::OsString> {
        line(s).into_iter().map(Into::into).collect()
    }

    #[test]
    fn srun_options_become_lama_maps() {
        let t = translate(&line(
            "-N2 -n 8 -c2 -m cyclic --ntasks-per-node=4 --lama-map=scbnh --lama-bind 1s -p debug -t 10 --exclusive ./app -n 3",
        ))
        .unwrap();
        assert_eq!(
            t.args,
            line("--nodes 2 --np 8 --cpus-per-task 2 --distribution cyclic --ntasks-per-node 4 --map scbnh --bind 1s --exact")
        );
        assert_eq!(t.notes.len(), 2, "{:?}", t.notes);
        assert!(t.notes[0].starts_with("-p: left out"));
        // The program's own options are not srun's.
        assert!(!t.args.contains(&"3".to_string()));
    }

    #[test]
    fn what_changes_the_placement_is_never_dropped() {
        let t = translate(&line("-n4 --hint=nomultithread -B 2:8:1 ./a")).unwrap();
        assert_eq!(
            t.args,
            line("--np 4 --hint nomultithread --threads-per-core 1")
        );
        assert!(
            t.notes[0].contains("-B 2:8:1: its sockets and cores"),
            "{:?}",
            t.notes
        );
        let e = translate(&line("-n4 -B 2:x ./a")).unwrap_err();
        assert!(e.contains("sockets[:cores[:threads]]"), "{e}");
        let e = translate(&line("-n4 --frobnicate ./a")).unwrap_err();
        assert!(
            e.contains("'--frobnicate' is not one lama map knows"),
            "{e}"
        );
        for het in ["-n2 ./a : -n2 ./b", "-n2 : -n2 ./b"] {
            let e = translate(&line(het)).unwrap_err();
            assert!(e.contains("heterogeneous"), "{e}");
        }
        let e = translate(&line("-n")).unwrap_err();
        assert!(e.contains("-n needs a value"), "{e}");
        let t = translate(&line("-n2 -O --cpu-bind=cores --lama-omp ./a")).unwrap();
        assert_eq!(
            t.args,
            line("--np 2 --oversubscribe --cpu-bind cores --env --omp")
        );
        // Beside a layout, the note says LAMA's binding replaces it.
        let (_, notes) = expand(os(
            "lama map -- srun -n2 --cpu-bind=cores --lama-map=cs ./a",
        ))
        .unwrap();
        assert!(
            notes[0].contains("LAMA's binding replaces Slurm's"),
            "{notes:?}"
        );
    }

    #[test]
    fn only_map_with_an_srun_line_is_rewritten() {
        let (args, notes) = expand(os(
            "lama map --topology host -- srun -n4 -J x --lama-map=cs ./a",
        ))
        .unwrap();
        assert_eq!(args, os("lama map --topology host --np 4 --map cs"));
        assert_eq!(notes.len(), 1);
        // The layout may come before --; without one the plugin would place nothing.
        assert!(expand(os("lama map --map cs -- srun -n4 ./a")).is_ok());
        // Without one, the line is Slurm's own placement.
        let (args, notes) = expand(os("lama map -- srun -n4 ./a")).unwrap();
        assert_eq!(args, os("lama map --np 4 --slurm"));
        assert!(notes[0].contains("no --lama-map"), "{notes:?}");
        let same = os("lama verify --json -- bash -c x");
        assert_eq!(expand(same.clone()).unwrap().0, same);
    }

    #[test]
    fn a_later_option_replaces_an_earlier_one_and_node_ranges_take_their_least() {
        let t = translate(&line("-N 4 -n8 -N 2-3 --lama-map=cs --lama-map scbnh ./a")).unwrap();
        assert_eq!(t.args, line("--nodes 2 --np 8 --map scbnh"));
        assert_eq!(t.program.as_deref(), Some("./a"));
        assert!(
            t.notes[0].contains("-N 2-3: previewed on 2 node(s)"),
            "{:?}",
            t.notes
        );
        for bad in ["-N x", "-N 0", "-N -3"] {
            let e = translate(&line(bad)).unwrap_err();
            assert!(e.contains("a node count (2) or a range"), "{bad}: {e}");
        }
    }

    #[test]
    fn counts_are_derived_as_srun_derives_them() {
        let derived = |l: &str, before: &str| {
            let mut t = translate(&line(l)).unwrap();
            derive_counts(&mut t, &line(before), "srun").map(|()| t.args)
        };
        assert_eq!(
            derived("-N3 --ntasks-per-node=2", "").unwrap(),
            line("--nodes 3 --ntasks-per-node 2 --np 6")
        );
        assert_eq!(derived("-N3", "").unwrap(), line("--nodes 3 --np 3"));
        assert_eq!(derived("", "").unwrap(), line("--np 1"));
        assert_eq!(
            derived("-w n[1-4] -n2", "").unwrap(),
            line("--node-names n[1-4] --np 2 --nodes 4")
        );
        // lama map's own -n or -N before -- is not overridden.
        assert_eq!(derived("-N3", "map -n8").unwrap(), line("--nodes 3"));
        assert_eq!(
            derived("-w n[1-2]", "map --nodes=2").unwrap(),
            line("--node-names n[1-2]")
        );
    }

    #[test]
    fn sbatch_and_salloc_lines_and_assignments_are_read() {
        let dir = tempfile::tempdir().unwrap();
        let script = dir.path().join("job.sh");
        std::fs::write(
            &script,
            "#!/bin/sh\n#SBATCH -N 3 # nodes\n\n#SBATCH --ntasks-per-node=2\nhostname\n#SBATCH -N 9\n",
        )
        .unwrap();
        assert_eq!(
            script_options(script.to_str().unwrap()).unwrap(),
            line("-N 3 --ntasks-per-node=2")
        );
        assert!(script_options("/nonexistent/job.sh").is_none());
        let (args, notes) = expand(os(&format!(
            "lama map -- A=1 sbatch -N 2 --lama-map=cs {}",
            script.display()
        )))
        .unwrap();
        assert_eq!(
            args,
            os("lama map --nodes 2 --ntasks-per-node 2 --map cs --np 4")
        );
        assert!(
            notes[0].starts_with("pasted line: A=: the environment"),
            "{notes:?}"
        );
        assert!(
            notes[1].contains("#SBATCH options read (3 word(s))"),
            "{notes:?}"
        );
        let (args, _) = expand(os("lama map -- /usr/bin/salloc -n3 --lama-map=cs")).unwrap();
        assert_eq!(args, os("lama map --np 3 --map cs"));
        let e = expand(os("lama map --map cs -- srun -n2 --lama-map=cs ./a")).unwrap_err();
        assert!(e.contains("--map is given twice"), "{e}");
        assert!(
            is_assignment("OMP_NUM_THREADS=2") && !is_assignment("--x=1") && !is_assignment("2A=1")
        );
    }

    #[test]
    fn mpirun_and_srun_spellings_are_read_as_lama_maps_own() {
        let (args, notes) = expand(os(
            "lama map --topology t -np 4 --map-by socket --bind-to core",
        ))
        .unwrap();
        assert_eq!(
            args,
            os("lama map --topology t -n 4 --map socket --bind core")
        );
        assert_eq!(notes[0], "-np 4: read as -n 4");
        let (args, notes) =
            expand(os("lama map -n 2 --map scbnh --cpu-bind=verbose,sockets")).unwrap();
        assert_eq!(args, os("lama map -n 2 --map scbnh --bind 1s"));
        assert!(
            notes[0].contains("--cpu-bind verbose,sockets: read as --bind 1s"),
            "{notes:?}"
        );
        let e = expand(os("lama map -n 2 --map scbnh --cpu-bind=map_cpu:0,1")).unwrap_err();
        assert!(
            e.contains("--cpu-bind=map_cpu:0: Slurm's binding by CPU lists"),
            "{e}"
        );
        // With a pasted line after -- as well.
        let (args, _) = expand(os("lama map -np 4 -- srun --lama-map=cs ./a")).unwrap();
        assert_eq!(args, os("lama map -n 4 --map cs"));
        // Other commands are left alone.
        let same = os("lama plan -np 4");
        assert_eq!(expand(same.clone()).unwrap().0, same);
    }

    #[test]
    fn the_lines_gpu_counts_give_the_steps_gpus() {
        let args = |s: &str| expand(os(s)).map(|(a, _)| a);
        assert_eq!(
            args("lama map -- srun -n4 --gres=gpu:4 --lama-map=gcsbnh ./a").unwrap(),
            os("lama map --np 4 --map gcsbnh --gpus 0,1,2,3")
        );
        assert_eq!(
            args("lama map -- srun -n2 --gres=gpu:a100:1,shard:8 --lama-map=gcsbnh ./a").unwrap(),
            os("lama map --np 2 --map gcsbnh --gpus 0")
        );
        assert_eq!(
            args("lama map -- srun -N2 -n4 -G 4 --lama-map=gcsbnh ./a").unwrap(),
            os("lama map --nodes 2 --np 4 --map gcsbnh --gpus 0,1")
        );
        let e = args("lama map -- srun -N2 -n4 --gpus=3 --lama-map=gcsbnh ./a").unwrap_err();
        assert!(e.contains("--gpus=3 over -N 2"), "{e}");
        // The list given before -- wins over the first N.
        assert_eq!(
            args("lama map --gpus 4-7 -- srun -n4 --gpus-per-node=4 --lama-map=gcsbnh ./a")
                .unwrap(),
            os("lama map --gpus 4-7 --np 4 --map gcsbnh")
        );
        assert_eq!(
            args("lama map -- srun -n2 --gpus-per-task=2 --cpus-per-gpu=8 --lama-map=gcsbnh ./a")
                .unwrap(),
            os("lama map --np 2 --gpus-per-task 2 --map gcsbnh --cpus-per-task 16")
        );
        let (a, notes) = expand(os(
            "lama map -- srun -n2 --gpu-bind=closest --lama-map=gcsbnh ./a",
        ))
        .unwrap();
        assert_eq!(a, os("lama map --np 2 --map gcsbnh"));
        assert!(
            notes
                .iter()
                .any(|n| n.contains("--gpu-bind=closest: left out")),
            "{notes:?}"
        );
        // A CPU layout keeps Slurm's closest (lama map says what it does with it).
        assert_eq!(
            args("lama map -- srun -n2 --gpu-bind=closest --lama-map=csbnh ./a").unwrap(),
            os("lama map --np 2 --gpu-bind closest --map csbnh")
        );
    }
}

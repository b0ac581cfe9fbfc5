//! The step path against hostile environments. The job's environment is the user's, and the
//! plugin reads it inside slurmstepd, which runs as root and which the OOM killer spares: each
//! function `user_init` hands the environment to (and the files it opens) is run here against
//! what a user can put there, each case in a child process of its own under an address-space
//! limit ([`ADDRESS_SPACE`]), a CPU limit and a wall-clock limit ([`WALL`]), and must answer
//! (refuse with a short message, or ignore) having grown by at most [`MAX_GROWTH_KIB`] (the
//! bound ARCHITECTURE.md states for a step) within [`MAX_MILLIS`]. Before the fixes of the
//! hostile-environment review, `forged_het_lists` expanded a list of 1,048,576 names of up to
//! 1 MiB each and `wide_include_tree` read 100^8 files.

use crate::gpu_cards::{step_cards, RealFiles};
use crate::plan_file::PlanRef;
use crate::step_node::{node_name_of, Here};
use std::collections::HashMap;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Names the case a child process runs.
const CASE: &str = "LAMA_HOSTILE_CASE";
/// The most a step may grow slurmstepd by, whatever its environment.
const MAX_GROWTH_KIB: u64 = 64 * 1024;
/// The most CPU time one case may take (a debug build): the work the case makes root do,
/// measured on the case's own thread, so that a busy machine (the test suites beside it, a
/// guest's emulator) does not count.
const MAX_MILLIS: u128 = 1_000;
/// A child past this is killed, and its case fails.
const WALL: Duration = Duration::from_secs(30);
/// A child's address space: an expansion of a forged list (gigabytes) fails in it.
const ADDRESS_SPACE: u64 = 2 << 30;
/// The longest message a user may get back.
const MAX_MESSAGE: usize = 2048;

type Env = HashMap<String, String>;

/// The step's environment as the plugin reads it: through `bounded::env_value`.
fn reader(env: &Env) -> impl Fn(&str) -> Option<String> + '_ {
    move |name| crate::bounded::env_value(env.get(name).cloned())
}

fn env(pairs: &[(&str, String)]) -> Env {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.clone()))
        .collect()
}

/// A refusal the user reads: short, and saying `what`.
fn refused(result: Result<impl std::fmt::Debug, String>, what: &str) -> String {
    let e = result.expect_err("a hostile value was accepted");
    assert!(e.contains(what), "the message does not say '{what}': {e}");
    assert!(e.len() <= MAX_MESSAGE, "a message of {} bytes", e.len());
    e
}

/// A FIFO at `path`, with no writer: opening it for reading would wait forever.
fn fifo(path: &Path) {
    let c = std::ffi::CString::new(path.to_str().unwrap()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
}

/// A directory with slurm.conf and the given files (a `None` text is a FIFO).
fn conf_dir(files: &[(&str, Option<String>)]) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("slurm.conf"), "ClusterName=c\n").unwrap();
    for (name, text) in files {
        match text {
            Some(text) => std::fs::write(dir.path().join(name), text).unwrap(),
            None => fifo(&dir.path().join(name)),
        }
    }
    let conf = dir.path().join("slurm.conf");
    (dir, conf)
}

type Run = Box<dyn FnOnce() -> String>;

/// `SLURM_PACK_SIZE` and `SLURM_JOB_{ID,NODELIST}_PACK_GROUP_1` before a plain step: not a
/// heterogeneous step (srun asks `SLURM_HET_SIZE` only); the node is the step list's.
fn forged_pack_variables() -> Run {
    let e = env(&[
        ("SLURM_STEP_NODELIST", "node[1-2]".into()),
        ("SLURM_PACK_SIZE", "2".into()),
        ("SLURM_JOB_ID_PACK_GROUP_1", "42".into()),
        (
            "SLURM_JOB_NODELIST_PACK_GROUP_1",
            "x".repeat(128 << 10) + "[0-1048575]",
        ),
    ]);
    Box::new(move || {
        let here = Here {
            id: 1,
            job: 42,
            nodes: 2,
        };
        let name = node_name_of(reader(&e), &here, || "node2".into());
        assert_eq!(name.as_deref(), Ok("node2"));
        "node2, from the step's own list".into()
    })
}

/// A forged heterogeneous step whose component list is 1,048,576 names of 1 MiB each:
/// counted and searched, never expanded.
fn forged_het_lists() -> Run {
    let prefix = "x".repeat(crate::bounded::MAX_ENV_VALUE - 16);
    let e = env(&[
        ("SLURM_STEP_NODELIST", format!("{prefix}[0-1048575]")),
        ("SLURM_HET_SIZE", "2".into()),
        ("SLURM_JOB_ID_HET_GROUP_1", "42".into()),
        (
            "SLURM_JOB_NODELIST_HET_GROUP_1",
            format!("{prefix}[0-1048575]"),
        ),
    ]);
    Box::new(move || {
        let here = Here {
            id: 7,
            job: 42,
            nodes: 3,
        };
        let e1 = refused(
            node_name_of(reader(&e), &here, || "node9".into()),
            "heterogeneous step",
        );
        // As many nodes as the list names: its 8th name, found without the others.
        let here = Here {
            id: 7,
            job: 42,
            nodes: 1 << 20,
        };
        let name = node_name_of(reader(&e), &here, || unreachable!()).unwrap();
        assert_eq!(name.len(), prefix.len() + 1);
        assert!(name.ends_with('7'));
        format!("refused ({} bytes), or the 8th name alone", e1.len())
    })
}

/// Every variable one byte over the bound: as if absent.
fn over_long_values() -> Run {
    let long = "1".repeat(crate::bounded::MAX_ENV_VALUE + 1);
    let names = [
        "SLURM_STEP_NODELIST",
        "SLURM_STEP_GPUS",
        "CUDA_VISIBLE_DEVICES",
        "SLURM_HET_SIZE",
        "SLURM_GPUS_PER_TASK",
        "SLURM_TRES_BIND",
    ];
    let e: Env = names
        .iter()
        .map(|n| (n.to_string(), long.clone()))
        .collect();
    Box::new(move || {
        let here = Here {
            id: 0,
            job: 1,
            nodes: 1,
        };
        refused(
            node_name_of(reader(&e), &here, String::new),
            "SLURM_STEP_NODELIST is not in the step's environment",
        );
        refused(
            crate::gpus::read(reader(&e), "NVIDIA"),
            "SLURM_STEP_GPUS is not set",
        );
        "ignored, as absent".into()
    })
}

/// The `--lama-*` values as slurmstepd gets them (the job's environment carries srun's option
/// values): a megabyte each, a layout led by 'g' with a megabyte MPPR, and the same under a
/// site default; each refused with a short message before anything expands it.
fn over_long_options() -> Run {
    Box::new(|| {
        use crate::request::{resolve, UserOptions};
        let site = crate::config::SiteConfig {
            map: lama_engine::Layout::parse("scbnh").ok(),
            ..Default::default()
        };
        let mega = |unit: &str| unit.repeat((1 << 20) / unit.len());
        let cases = [
            UserOptions {
                map: Some(mega("s")),
                ..Default::default()
            },
            UserOptions {
                map: Some("scbnh".into()),
                bind: Some(mega("1c")),
                ..Default::default()
            },
            UserOptions {
                map: Some("gcsbnh".into()),
                mppr: Some(mega("1:g,")),
                ..Default::default()
            },
            UserOptions {
                mppr: Some(mega("2:c,")),
                ..Default::default()
            },
            UserOptions {
                order: Some(mega("n")),
                membind: Some(mega("local")),
                ..Default::default()
            },
        ];
        for user in &cases {
            for site in [&crate::config::SiteConfig::default(), &site] {
                refused(resolve(user, site).map_err(|e| e.to_string()), "--lama-");
            }
        }
        "refused, each before it was expanded".into()
    })
}

/// Megabyte GPU lists: parsed in linear time, refused with a short message.
fn megabyte_gpu_lists() -> Run {
    let many: Vec<String> = (0..150_000).map(|i| i.to_string()).collect();
    let list = many.join(",");
    let twice = format!("{list},7");
    let migs = "MIG-0,".repeat(150_000);
    let cases = [
        env(&[
            ("SLURM_STEP_GPUS", twice),
            ("SLURM_TRES_BIND", "gres/gpu:per_task:1".into()),
        ]),
        env(&[
            ("SLURM_STEP_GPUS", list.clone()),
            ("CUDA_VISIBLE_DEVICES", migs),
        ]),
        env(&[
            ("SLURM_STEP_GPUS", list.clone()),
            ("SLURM_GPUS_PER_TASK", format!("gpu:{list}")),
        ]),
    ];
    let equal = env(&[
        ("SLURM_STEP_GPUS", list.clone()),
        ("CUDA_VISIBLE_DEVICES", list),
        ("SLURM_TRES_BIND", "gres/gpu:per_task:1".into()),
    ]);
    Box::new(move || {
        let whats = ["appears twice", "MIG instances", "is not a GPU count"];
        let mut sizes = Vec::new();
        for (e, what) in cases.iter().zip(whats) {
            let read = crate::gpus::read(reader(e), "NVIDIA");
            sizes.push(refused(read, what).len());
        }
        // Read whole, and judged later against the node's GPUs (a handful).
        let read = crate::gpus::read(reader(&equal), "NVIDIA");
        assert_eq!(read.map(|g| g.slurm.len()), Ok(150_000));
        format!("refused, messages of {sizes:?} bytes, or read in linear time")
    })
}

/// Names and values that are not UTF-8, among megabytes of others.
fn invalid_bytes() -> Run {
    use std::ffi::OsString;
    use std::os::unix::ffi::OsStringExt;
    let mut vars: Vec<(OsString, OsString)> = (0..100)
        .map(|i| {
            let value = vec![0xff_u8; 100 << 10];
            (format!("V{i}").into(), OsString::from_vec(value))
        })
        .collect();
    vars.push((
        "_SLURM_SPANK_OPTION_lama_lama_map".into(),
        OsString::from_vec(b"sc\xffbnh".to_vec()),
    ));
    vars.push((OsString::from_vec(b"BAD\xfeNAME".to_vec()), "x".into()));
    Box::new(move || {
        let text = crate::inherited::text_environment(vars);
        let found =
            crate::inherited::inherited_options(text.iter().map(|(k, v)| (k.as_str(), v.as_str())));
        assert_eq!(found, [("lama-map", "sc\u{fffd}bnh".to_string())]);
        assert_eq!(text.len(), 101, "the name that is not UTF-8 is left out");
        "kept as text with U+FFFD, judged by the option's own check".into()
    })
}

/// gres.conf including 100 files at each of 8 levels, and one including 90,000 records.
fn wide_include_tree() -> Run {
    let level = |next: &str| format!("Include {next}\n").repeat(100);
    let files = [
        ("gres.conf", Some(level("a.conf"))),
        ("a.conf", Some(level("b.conf"))),
        ("b.conf", Some(level("c.conf"))),
        ("c.conf", Some(level("d.conf"))),
        ("d.conf", Some(String::new())),
    ];
    let (dir, conf) = conf_dir(&files);
    let records = "Name=gpu File=/dev/nvidia0\n".repeat(30_000);
    let (dir2, conf2) = conf_dir(&[
        ("gres.conf", Some("Include big.conf\n".repeat(3))),
        ("big.conf", Some(records)),
    ]);
    Box::new(move || {
        let wide = refused(
            step_cards(Some(&conf), "n1", &[0], &RealFiles),
            "more than 64 files included",
        );
        refused(
            step_cards(Some(&conf2), "n1", &[0], &RealFiles),
            "more than 65536 lines",
        );
        drop((dir, dir2));
        format!("refused: {wide}")
    })
}

/// A FIFO as gres.conf, and as the plan file: refused at once, not waited on.
fn fifos() -> Run {
    let (dir, conf) = conf_dir(&[("gres.conf", None)]);
    let plan = dir.path().join("plan");
    fifo(&plan);
    Box::new(move || {
        refused(
            step_cards(Some(&conf), "n1", &[0], &RealFiles),
            "not a regular file",
        );
        let by_file = PlanRef {
            ranks: 1,
            digest: "1:0".into(),
            path: plan.display().to_string(),
        };
        let query = lama_planfile::NodeQuery {
            node: "n1",
            cpu_bound: 1,
            total: Some(1),
            most_here: 1,
            wanted: &[0],
        };
        refused(by_file.read_for_node(&query), "not a regular file");
        drop(dir);
        "refused at once".into()
    })
}

/// A plan of `ranks` ranks, rank r on node `name(r)` (short lines: 2,000,000 ranks in about
/// 60 MB), written to `path`; its reference as srun would write it, with `claimed` ranks.
fn plan_file(path: &Path, ranks: u32, name: impl Fn(u32) -> String, claimed: u32) -> PlanRef {
    use std::fmt::Write;
    let mut text = format!("lama-plan 1\nranks {ranks}\n");
    for r in 0..ranks {
        writeln!(text, "rank {r} {} pu 0 cpus 0", name(r)).unwrap();
    }
    std::fs::write(path, &text).unwrap();
    PlanRef {
        ranks: claimed,
        digest: lama_planfile::digest(text.as_bytes()),
        path: path.display().to_string(),
    }
}

/// The plan path's bounds: for node n0 of a step of `total` tasks, `most` of them here.
fn n0(total: u32, most: usize, wanted: &'static [u32]) -> lama_planfile::NodeQuery<'static> {
    lama_planfile::NodeQuery {
        node: "n0",
        cpu_bound: 64,
        total: Some(total),
        most_here: most,
        wanted,
    }
}

/// Rank r's node in the interleaved plans: this node (n0) has the first and the last rank,
/// every other rank a node of its own.
fn interleaved(ranks: u32) -> impl Fn(u32) -> String {
    move |r| match r {
        0 => "n0".to_string(),
        r if r == ranks - 1 => "n0".to_string(),
        r => format!("n{r}"),
    }
}

/// Plan files of 2,000,000 ranks (about 60 MB) before a step of 2 tasks: one whose ranks
/// are on 1,999,999 distinct nodes, this node's two interleaved with them, and whose
/// reference claims 2 ranks (a forged `LAMA_PLAN_FILE` with the right length and digest);
/// the same with its true count; one with every rank on this node. Each refused by the
/// step's count or the file's size before a line is read. Before, the node read such a file
/// whole and looked each line's node up among every name seen so far: hours of root's time.
fn forged_plan_files() -> Run {
    let dir = tempfile::tempdir().unwrap();
    let ranks = 2_000_000;
    let distinct = plan_file(&dir.path().join("a"), ranks, interleaved(ranks), 2);
    let all_here = plan_file(&dir.path().join("b"), ranks, |_| "n0".into(), 2);
    Box::new(move || {
        let step = n0(2, 2, &[0, 1]);
        let size = refused(distinct.read_for_node(&step), "more than a plan of 2 ranks");
        refused(all_here.read_for_node(&step), "more than a plan of 2 ranks");
        let honest = PlanRef {
            ranks,
            ..distinct.clone()
        };
        refused(
            honest.read_for_node(&step),
            "is for 2000000 ranks but the step has 2",
        );
        drop(dir);
        format!("refused unread: {size}")
    })
}

/// Plans as large as their steps (500,000 tasks, 2 of them here): every rank on this node
/// is refused at the third; this node's two ranks among 499,998 others on as many nodes
/// are read in one pass (about 15 MB), keeping the two. What it costs grows with the step.
fn large_plans_for_large_steps() -> Run {
    let dir = tempfile::tempdir().unwrap();
    let ranks = 500_000;
    let spread = plan_file(&dir.path().join("a"), ranks, interleaved(ranks), ranks);
    let all_here = plan_file(&dir.path().join("b"), ranks, |_| "n0".into(), ranks);
    Box::new(move || {
        let step = n0(ranks, 2, &[0, 499_999]);
        refused(
            all_here.read_for_node(&step),
            "line 5: the plan puts more than 2 rank(s) on n0",
        );
        let plan = spread.read_for_node(&step).unwrap();
        assert_eq!(plan.here.len(), 2);
        drop(dir);
        "all here: refused at the third rank; spread: read in one pass, 2 ranks kept".into()
    })
}

/// slurmstepd's own `SLURM_CONF` is `(null)` (the parent sets it for this child): no
/// configuration file is looked for in the working directory.
fn null_slurm_conf() -> Run {
    assert_eq!(std::env::var("SLURM_CONF").as_deref(), Ok("(null)"));
    let e = env(&[
        ("SLURM_STEP_GPUS", "0,1".into()),
        ("CUDA_VISIBLE_DEVICES", "0,1".into()),
        ("SLURM_TRES_BIND", "gres/gpu:per_task:1".into()),
    ]);
    Box::new(move || {
        let conf = crate::slurm_conf::config_file();
        assert_eq!(conf, None);
        refused(
            step_cards(conf.as_deref(), "n1", &[0], &RealFiles),
            "no SLURM_CONF of its own",
        );
        // Reading the step's GPUs opens no configuration file either.
        assert!(crate::gpus::read(reader(&e), "NVIDIA").is_ok());
        "no file opened; refused with the reason".into()
    })
}

/// Random environments over every variable the step path reads (proptest, a fixed number of
/// cases): no panic, and every call answers in time with a short message.
fn random_environments() -> Run {
    Box::new(|| {
        use proptest::prelude::*;
        use proptest::test_runner::{Config, TestRunner};
        let names = [
            "SLURM_STEP_NODELIST",
            "SLURM_HET_SIZE",
            "SLURM_PACK_SIZE",
            "SLURM_JOB_ID_HET_GROUP_0",
            "SLURM_JOB_ID_HET_GROUP_1",
            "SLURM_JOB_NODELIST_HET_GROUP_0",
            "SLURM_JOB_NODELIST_HET_GROUP_1",
            "SLURM_JOB_ID_PACK_GROUP_1",
            "SLURM_JOB_NODELIST_PACK_GROUP_1",
            "SLURM_STEP_GPUS",
            "CUDA_VISIBLE_DEVICES",
            "SLURM_GPUS_PER_TASK",
            "SLURM_TRES_PER_TASK",
            "SLURM_TRES_BIND",
            "SLURM_GPU_BIND",
        ];
        let value = prop_oneof![
            "[0-9]{1,3}",
            "[a-z]{1,8}\\[[0-9]{1,7}-[0-9]{1,10}\\]",
            "([a-z]{1,4}\\[[0-9,\\-]{1,12}\\],?){1,4}",
            "([0-9]{1,3},){0,20}[0-9]{1,3}",
            "gres/gpu(:[a-z]{1,3})?[:=]per_task:[0-9]{1,3}",
            ".{0,40}",
            ("[a-z\\[\\]0-9,-]{1,6}", 1usize..200_000).prop_map(|(s, n)| s.repeat(n)),
        ];
        let envs = proptest::collection::hash_map(
            proptest::sample::select(names.to_vec()).prop_map(str::to_string),
            value,
            0..10,
        );
        let mut runner = TestRunner::new(Config {
            cases: 200,
            failure_persistence: None,
            ..Config::default()
        });
        runner
            .run(&(envs, 0u32..5, 1u32..5), |(e, id, nodes)| {
                let t = thread_cpu_millis();
                let here = Here { id, job: 1, nodes };
                let short = |r: Result<String, String>| match r {
                    Ok(_) => true,
                    Err(e) => e.len() <= MAX_MESSAGE,
                };
                prop_assert!(short(node_name_of(reader(&e), &here, || "h1".into())));
                let gpus = crate::gpus::read(reader(&e), "NVIDIA");
                prop_assert!(short(gpus.map(|_| String::new())));
                prop_assert!(thread_cpu_millis() - t < 2_000);
                Ok(())
            })
            .unwrap();
        "200 environments answered".into()
    })
}

/// A case: its name, and what builds its inputs and returns its run.
type Case = (&'static str, fn() -> Run);

const CASES: [Case; 12] = [
    ("forged_pack_variables", forged_pack_variables),
    ("over_long_options", over_long_options),
    ("forged_het_lists", forged_het_lists),
    ("over_long_values", over_long_values),
    ("megabyte_gpu_lists", megabyte_gpu_lists),
    ("invalid_bytes", invalid_bytes),
    ("wide_include_tree", wide_include_tree),
    ("fifos", fifos),
    ("forged_plan_files", forged_plan_files),
    ("large_plans_for_large_steps", large_plans_for_large_steps),
    ("null_slurm_conf", null_slurm_conf),
    ("random_environments", random_environments),
];

/// A line of `/proc/self/status`, in kB.
fn status_kib(key: &str) -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix(key))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

/// The child's side: runs the case named by [`CASE`] and prints what it grew by.
#[test]
#[ignore = "run by hostile_environments in a child process under limits"]
fn child() {
    let name = std::env::var(CASE).expect("run by hostile_environments");
    let (_, setup) = CASES.iter().find(|(n, _)| *n == name).unwrap();
    let run = setup();
    // The high-water mark starts again from here (clear_refs 5, Linux 4.0): what the case's
    // inputs took is not the step's.
    std::fs::write("/proc/self/clear_refs", "5").unwrap();
    let before = status_kib("VmRSS:");
    let (start, wall) = (thread_cpu_millis(), Instant::now());
    let outcome = run();
    let millis = thread_cpu_millis() - start;
    let wall = wall.elapsed().as_millis();
    let grew = status_kib("VmHWM:").saturating_sub(before);
    println!("hostile: {name}: grew {grew} KiB in {millis} ms of CPU ({wall} ms wall): {outcome}");
}

/// The CPU time this thread has used, in milliseconds.
fn thread_cpu_millis() -> u128 {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec into `t`, which outlives the call.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut t) };
    assert_eq!(rc, 0, "clock_gettime(CLOCK_THREAD_CPUTIME_ID)");
    t.tv_sec as u128 * 1000 + t.tv_nsec as u128 / 1_000_000
}

/// Runs one case in a child under the limits; its report line.
fn run_case(name: &str) -> Result<String, String> {
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args([
        "hostile_tests::child",
        "--exact",
        "--ignored",
        "--nocapture",
    ])
    .args(["--test-threads", "1"])
    .env(CASE, name)
    .stdout(Stdio::piped())
    .stderr(Stdio::piped());
    if name == "null_slurm_conf" {
        cmd.env("SLURM_CONF", "(null)");
    }
    // SAFETY: setrlimit is async-signal-safe, and nothing else runs between fork and exec.
    unsafe {
        cmd.pre_exec(|| {
            let limit = |what, n: u64| {
                let l = libc::rlimit {
                    rlim_cur: n,
                    rlim_max: n,
                };
                if libc::setrlimit(what, &l) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            };
            limit(libc::RLIMIT_AS, ADDRESS_SPACE)?;
            limit(libc::RLIMIT_CPU, WALL.as_secs())
        });
    }
    let mut child = cmd.spawn().map_err(|e| e.to_string())?;
    let start = Instant::now();
    while child.try_wait().map_err(|e| e.to_string())?.is_none() {
        if start.elapsed() > WALL {
            let _ = child.kill();
            let _ = child.wait();
            return Err(format!("did not answer within {} s", WALL.as_secs()));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = child.wait_with_output().map_err(|e| e.to_string())?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    // (The harness prints "test ... " before the line on the same line.)
    let line = stdout
        .lines()
        .find_map(|l| l.find("hostile: ").map(|at| &l[at..]));
    match (out.status.success(), line) {
        (true, Some(line)) => Ok(line.to_string()),
        _ => Err(format!(
            "{}:\n{stdout}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        )),
    }
}

/// Every case, each in its own child under the limits: answered, within the time, having
/// grown by at most the step's bound.
#[test]
fn hostile_environments() {
    let mut failures = Vec::new();
    for (name, _) in CASES {
        match run_case(name) {
            Ok(line) => {
                println!("{line}");
                let number = |after: &str| -> u128 {
                    let rest = &line[line.find(after).unwrap() + after.len()..];
                    rest.split(' ').next().unwrap().parse().unwrap()
                };
                let (kib, millis) = (number("grew "), number(" in "));
                if kib > u128::from(MAX_GROWTH_KIB) || millis > MAX_MILLIS {
                    failures.push(format!("{name}: over the bounds: {line}"));
                }
            }
            Err(e) => failures.push(format!("{name}: {e}")),
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

//! A benchmark-style fuzz run (not a test): every parser of outside input gets N random and N
//! mutated inputs, each call inside `catch_unwind`. Prints, per parser, how many inputs it saw,
//! how many it accepted and how many panicked (the goal: none), and the time taken.
//!
//!   cargo run --release -p spank-lama --example fuzz -- 1000000

use lama_engine::{Bind, CpuList, Layout, Membind, Mppr, Order};
use lama_planfile::PlanFile;
use spank_lama::cgroup::{locate, parse_mountinfo, parse_proc_cgroup};
use spank_lama::config::SiteConfig;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::Instant;

/// xorshift64*: deterministic, so a run can be repeated exactly.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

/// A random string of up to `max` characters from `alphabet` (plus, rarely, any byte).
fn random(rng: &mut Rng, alphabet: &[u8], max: usize) -> String {
    let len = rng.below(max + 1);
    let bytes: Vec<u8> = (0..len)
        .map(|_| {
            if rng.below(50) == 0 {
                rng.next() as u8
            } else {
                alphabet[rng.below(alphabet.len())]
            }
        })
        .collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

/// A valid seed with a few bytes replaced, inserted or removed.
fn mutate(rng: &mut Rng, seed: &str, alphabet: &[u8]) -> String {
    let mut bytes = seed.as_bytes().to_vec();
    for _ in 0..=rng.below(3) {
        let at = rng.below(bytes.len() + 1);
        let b = if rng.below(4) == 0 {
            rng.next() as u8
        } else {
            alphabet[rng.below(alphabet.len())]
        };
        match rng.below(3) {
            0 if at < bytes.len() => bytes[at] = b,
            1 if at < bytes.len() => {
                bytes.remove(at);
            }
            _ => bytes.insert(at, b),
        }
    }
    String::from_utf8_lossy(&bytes).into_owned()
}

type Parser = fn(&str) -> bool;

/// A parser under test: its name, the bytes its random inputs use, valid seeds to mutate, the
/// longest random input, and the call.
type Case = (
    &'static str,
    &'static [u8],
    Vec<&'static str>,
    usize,
    Parser,
);

fn main() {
    let n: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(1_000_000);
    let mut rng = Rng(0x1a2b_3c4d_5e6f_7081);
    let tokens = b"nbsDNLch123456789:,0 xnone";
    let cases: Vec<Case> = vec![
        (
            "layout",
            tokens,
            vec!["scbnh", "L3csbnh", "Nscbnh", "socket"],
            16,
            |s| Layout::parse(s).is_ok(),
        ),
        ("binding", tokens, vec!["1c", "2L2", "none", "4h"], 8, |s| {
            Bind::parse(s).is_ok()
        }),
        (
            "mppr",
            tokens,
            vec!["1:c,4:s", "2:N", "1:h,2:s,8:n"],
            16,
            |s| Mppr::parse(s).is_ok(),
        ),
        ("order", b"nsx ", vec!["n", "s"], 3, |s| {
            Order::parse(s).is_ok()
        }),
        (
            "membind",
            b"localprefnoe ",
            vec!["local", "preferred", "none"],
            10,
            |s| Membind::parse(s).is_ok(),
        ),
        (
            "cpu list",
            b"0123456789,- x",
            vec!["0-3,8", "1,3-5,7-9", "0"],
            24,
            |s| CpuList::parse(s).is_ok(),
        ),
        (
            "site configuration",
            b"mapbindrtyoesc=/_%n1 ",
            vec![
                "map=scbnh bind=1c",
                "membind=local cpu_unit=core",
                "topology=/etc/slurm/%n.xml verbose=yes",
            ],
            48,
            |s| {
                let args: Vec<&str> = s.split(' ').filter(|a| !a.is_empty()).collect();
                SiteConfig::from_args(&args, |_| Ok("map = \"scbnh\"\n".to_string())).is_ok()
            },
        ),
        (
            "cgroup files",
            b"0123456789:/cpusetjob_step_\n ",
            vec![
                "5:cpuset:/slurm/uid_1000/job_42/step_0\n",
                "0::/system.slice/slurmstepd.scope/job_42/step_3/slurm\n",
                "36 25 0:31 / /sys/fs/cgroup/cpuset rw - cgroup cgroup rw,cpuset\n",
            ],
            80,
            |s| {
                let _ = parse_proc_cgroup(s);
                let _ = parse_mountinfo(s, false);
                let _ = parse_mountinfo(s, true);
                locate(
                    s,
                    Some(s),
                    spank_lama::cgroup::Job {
                        id: 42,
                        sluid: Some(s),
                    },
                    0,
                )
                .is_ok()
            },
        ),
        (
            "plan file",
            b"lama-plan1ranks0123456 nodepucs-\n#",
            vec!["lama-plan 1\nranks 2\nrank 0 n1 pu 0 cpus 0\nrank 1 n2 pu 1 cpus 0-1\n"],
            96,
            |s| PlanFile::parse(s).is_ok(),
        ),
    ];
    println!("| parser | inputs | accepted | panics | time |");
    println!("|---|---:|---:|---:|---:|");
    let mut total_panics = 0;
    std::panic::set_hook(Box::new(|_| {}));
    for (name, alphabet, seeds, max, parse) in cases {
        let t0 = Instant::now();
        let (mut accepted, mut panics) = (0usize, 0usize);
        for i in 0..n {
            let input = if i % 2 == 0 {
                random(&mut rng, alphabet, max)
            } else {
                let seed = seeds[rng.below(seeds.len())];
                mutate(&mut rng, seed, alphabet)
            };
            match catch_unwind(AssertUnwindSafe(|| parse(&input))) {
                Ok(true) => accepted += 1,
                Ok(false) => {}
                Err(_) => panics += 1,
            }
        }
        total_panics += panics;
        println!(
            "| {name} | {n} | {accepted} | {panics} | {:.1} s |",
            t0.elapsed().as_secs_f64()
        );
    }
    if total_panics > 0 {
        std::process::exit(1);
    }
}

//! `lama map -- srun -N2 -n8 -c2 --lama-map=scbnh ./app`: the srun line a user is about to
//! run, translated into `lama map`'s own options (which take srun's spellings for the same
//! things), so that the preview is that step's. Options of srun that do not change where the
//! plugin puts a task (the partition, the time, the job's name, its output) are left out with a
//! note; options that change it in a way `lama map` does not model are refused with the reason,
//! never silently dropped; the program and its arguments are not read.

/// srun's options that `lama map` takes with the same meaning: srun's spellings (short, long)
/// and `lama map`'s option.
const SAME: [(Option<char>, &str, &str); 13] = [
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
];

/// srun's options that change nothing `lama map` shows, taking a value.
const IGNORED_WITH_VALUE: [(Option<char>, &str); 25] = [
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
    (None, "gres"),
    (Some('G'), "gpus"),
];

/// srun's options that `lama map` translates otherwise, or refuses with the reason.
const SPECIAL: [&str; 10] = [
    "cpu-bind",
    "overcommit",
    "lama-omp",
    "lama-membind",
    "lama-gpu-isolate",
    "lama-plan",
    "hint",
    "threads-per-core",
    "ntasks-per-socket",
    "ntasks-per-core",
];

/// srun's options without a value that change nothing `lama map` shows.
const IGNORED_FLAGS: [(Option<char>, &str); 10] = [
    (None, "exclusive"),
    (None, "overlap"),
    (Some('l'), "label"),
    (Some('u'), "unbuffered"),
    (Some('v'), "verbose"),
    (Some('Q'), "quiet"),
    (None, "pty"),
    (Some('X'), "disable-status"),
    (Some('K'), "kill-on-bad-exit"),
    (None, "lama-verbose"),
];

/// The srun line (after `srun`) as `lama map`'s options, with a note for each option left out.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Translated {
    /// `lama map` options.
    pub args: Vec<String>,
    /// What was left out or differs, one line each.
    pub notes: Vec<String>,
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
        .chain([(Some('O'), "overcommit")])
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
         --cpu-bind, -w, -O and \
         the --lama-* options, and leaves out those that place nothing, such as -p, -t, -J, \
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
        let Some(opt) = word(w)? else { break };
        let takes_value = match opt.kind {
            Kind::Same(_) | Kind::Value => true,
            Kind::Flag => false,
            Kind::Special => !matches!(opt.long, "overcommit" | "lama-omp" | "lama-gpu-isolate"),
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
        (Kind::Same(ours), _) => out.args.extend([ours.to_string(), v]),
        (Kind::Value | Kind::Flag, _) => out.notes.push(format!(
            "{}: left out (it does not change where the plugin puts a task)",
            opt.written
        )),
        (_, "overcommit") => out.args.push("--oversubscribe".into()),
        (_, "lama-omp") => out.args.extend(["--env".into(), "--omp".into()]),
        (_, "lama-gpu-isolate") => out.args.push("--gpu-isolate".into()),
        (_, "lama-membind") => out.args.extend(["--membind".into(), v]),
        (_, "cpu-bind") => out.notes.push(cpu_bind_note(&v)),
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

/// `args` (a `lama` command line) with `map ... -- srun LINE` replaced by `map ...` and the
/// line's options; the notes to print. Other command lines are returned as they are.
pub fn expand(
    args: Vec<std::ffi::OsString>,
) -> Result<(Vec<std::ffi::OsString>, Vec<String>), String> {
    let text: Vec<String> = args
        .iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let is_map = text.iter().skip(1).find(|a| !a.starts_with('-')) == Some(&"map".to_string());
    let Some(dash) = text.iter().position(|a| a == "--") else {
        return Ok((args, Vec::new()));
    };
    let line = &text[dash + 1..];
    let is_srun = line
        .first()
        .is_some_and(|w| w == "srun" || w.ends_with("/srun"));
    if !is_map || !is_srun {
        return Ok((args, Vec::new()));
    }
    let t = translate(&line[1..])?;
    let has_map =
        |a: &String| a == "--map" || a.starts_with("--map=") || a.starts_with("--lama-map");
    if !t.args.iter().any(has_map) && !text[..dash].iter().any(has_map) {
        return Err(
            "this srun line has no --lama-map, so the plugin leaves its tasks to Slurm \
                    (unless the site sets a default map=): add --lama-map=LAYOUT to the line, or \
                    --map LAYOUT before --"
                .into(),
        );
    }
    let mut out: Vec<std::ffi::OsString> = args[..dash].to_vec();
    out.extend(t.args.into_iter().map(Into::into));
    Ok((out, t.notes))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(s: &str) -> Vec<String> {
        s.split_whitespace().map(str::to_string).collect()
    }

    #[test]
    fn srun_options_become_lama_maps() {
        let t = translate(&line(
            "-N2 -n 8 -c2 -m cyclic --ntasks-per-node=4 --lama-map=scbnh --lama-bind 1s -p debug -t 10 --exclusive ./app -n 3",
        ))
        .unwrap();
        assert_eq!(
            t.args,
            line("--nodes 2 --np 8 --cpus-per-task 2 --distribution cyclic --ntasks-per-node 4 --map scbnh --bind 1s")
        );
        assert_eq!(t.notes.len(), 3, "{:?}", t.notes);
        assert!(t.notes[0].starts_with("-p: left out"));
        // The program's own options are not srun's.
        assert!(!t.args.contains(&"3".to_string()));
    }

    #[test]
    fn what_changes_the_placement_is_never_dropped() {
        let e = translate(&line("-n4 --hint=nomultithread ./a")).unwrap_err();
        assert!(e.contains("--hint changes which CPUs"), "{e}");
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
        assert_eq!(t.args, line("--np 2 --oversubscribe --env --omp"));
        assert!(t.notes[0].contains("LAMA's binding replaces Slurm's"));
    }

    #[test]
    fn only_map_with_an_srun_line_is_rewritten() {
        let os =
            |s: &str| -> Vec<std::ffi::OsString> { line(s).into_iter().map(Into::into).collect() };
        let (args, notes) = expand(os(
            "lama map --topology host -- srun -n4 -J x --lama-map=cs ./a",
        ))
        .unwrap();
        assert_eq!(args, os("lama map --topology host --np 4 --map cs"));
        assert_eq!(notes.len(), 1);
        // The layout may come before --; without one the plugin would place nothing.
        assert!(expand(os("lama map --map cs -- srun -n4 ./a")).is_ok());
        let e = expand(os("lama map -- srun -n4 ./a")).unwrap_err();
        assert!(e.contains("has no --lama-map"), "{e}");
        let same = os("lama verify --json -- bash -c x");
        assert_eq!(expand(same.clone()).unwrap().0, same);
    }
}

//! spank-lama(8), generated from the tables the plugin itself uses: the `--lama-*` options and
//! their `srun --help` text ([`crate::options::OPTIONS`]) and the site settings
//! ([`crate::config::KEYS`], each with what it does). `cargo run -p spank-lama
//! --example manpage` prints it; the Debian package (`scripts/package.sh`) ships it.

use crate::config::KEYS;
use crate::options::OPTIONS;
use lama_man::Page;

/// The variables each placed task finds in its environment.
const TASK_VARIABLES: [(&str, &str); 11] = [
    ("LAMA_LAYOUT", "the layout used"),
    ("LAMA_BIND", "the binding width used"),
    ("LAMA_MPPR", "the MPPR limits used"),
    ("LAMA_ORDER", "the rank order used"),
    (
        "LAMA_CPUS",
        "the CPUs the task is bound to (OS indexes, a list like 0-3,8)",
    ),
    ("LAMA_PU", "the OS index of the PU the task is mapped to"),
    ("LAMA_PU_LOGICAL", "its logical index"),
    ("LAMA_MEMS", "with a memory binding: the NUMA nodes"),
    ("LAMA_MEMBIND", "with a memory binding: local or preferred"),
    ("LAMA_PLAN", "1 when the task was placed by --lama-plan"),
    (
        "OMP_PLACES, OMP_PROC_BIND, OMP_NUM_THREADS",
        "with --lama-omp: one place per bound core (or thread), close, and -c unless already set",
    ),
];

/// The page, for the plugin of `version`.
pub fn man_page(version: &str) -> String {
    let mut p = Page::new(
        "spank-lama",
        8,
        &format!("spank-lama {version}"),
        "Slurm plugins",
    );
    p.section("name").paragraph(
        "spank-lama - LAMA process placement and binding for srun, sbatch and salloc (a Slurm \
         SPANK plugin)",
    );
    p.section("synopsis").literal(&format!(
        "srun --lama-map=LAYOUT [--lama-bind=WIDTH] [--lama-mppr=LIMITS] [--lama-order=n|s]\n     \
             [--lama-membind=local|preferred|none] [--lama-omp] [--lama-verbose] PROGRAM\n\
             srun --lama-plan=FILE -m arbitrary PROGRAM\n\n\
             # plugstack.conf.d/lama.conf beside slurm.conf\n\
             required {} [KEY=VALUE ...]",
        lama_slurm::built_for::plugin_path()
    ));
    p.section("description")
        .paragraph(
            "The Locality-Aware Mapping Algorithm places the tasks of a step by a layout: a \
             string of level tokens read as nested loops, the leftmost varying fastest: n node, \
             b board, s socket, D die, N NUMA domain, L3 L2 L1 caches, c core, h hardware \
             thread. scbnh alternates sockets, then moves to the next core, then the next node, \
             and only then uses second hardware threads.",
        )
        .paragraph(
            "On each node, slurmstepd loads the node's hwloc topology, restricts it to the CPUs \
             Slurm gave the step (its cgroup cpuset; with task/affinity alone, the step's \
             allocated cores), places the node's tasks in ascending global rank, and binds each \
             task before it starts (sched_setaffinity, and set_mempolicy with --lama-membind). \
             Steps without a LAMA option, and batch, extern and interactive steps, are left to \
             Slurm. lama(1) previews any placement before a job is submitted.",
        );
    p.section("options");
    p.paragraph(
        "srun, sbatch and salloc take these options (sbatch and salloc pass them to the job's \
         steps); srun --help lists them with the same text:",
    );
    for (name, arg, usage) in OPTIONS {
        match arg {
            // A placeholder (layout) in capitals; a list of choices (n|s) as it is.
            Some(arg) if arg.contains('|') => p.item(&format!("--{name}="), Some(arg), usage),
            Some(arg) => p.item(&format!("--{name}="), Some(&arg.to_uppercase()), usage),
            None => p.item(&format!("--{name}"), None, usage),
        };
    }
    p.paragraph(
        "A bad value stops the command before anything is launched, with the message lama map \
         would print. --lama-plan cannot be combined with --lama-map, --lama-bind, --lama-mppr \
         or --lama-order. A plan of up to 120 KiB travels in the step's environment; a larger \
         one (up to 64 MiB) is read by every node from its file, as the job's user, and must be \
         on a file system all the job's nodes mount, unchanged since srun read it.",
    );
    p.section("site settings");
    p.paragraph(
        "KEY=VALUE words after the plugin's path on its plugstack.conf line (or in a TOML file \
         named by config=). Every key and value is checked when the plugin loads: an unknown \
         key or a bad value is logged (\"lama: invalid site configuration in ...\") and the \
         plugin refuses to load.",
    );
    for (key, form, details) in KEYS {
        p.item(
            &format!("{key}="),
            None,
            &format!("Value: {form}. {details}"),
        );
    }
    p.section("topology sources").paragraph(
        "Each step takes the node's topology from the first usable source: (1) the topology= \
         file; (2) the machine text of LAMA's cache (beside topology_cache=), read without \
         hwloc; (3) Slurm's cached XML (slurm_xml=); (4) LAMA's cached XML (topology_cache=); \
         (5) live hwloc discovery. A file is usable only while its PUs are exactly the node's online \
         CPUs; a missing, unreadable, corrupt or stale file is skipped, with the reason in \
         slurmd's log.",
    );
    p.section("environment");
    p.paragraph("Each placed task finds in its environment:");
    for (name, meaning) in TASK_VARIABLES {
        p.item(name, None, meaning);
    }
    p.section("logging").paragraph(
        "In slurmd's log (SlurmdLogFile), every line starts with lama:. When slurmd starts: \
         \"topology cached in FILE (N bytes, M ms)\" or why not. For each step and node: the \
         topology source and its cost (source=... topology_us=...), every source skipped with \
         the reason, the step cpuset and where it was read, and the layout and binding placed. \
         With --lama-verbose (or verbose=yes) each task prints one line to the user's terminal, \
         as Slurm's --cpu-bind=verbose does: the layout and binding, the task, its CPUs and \
         where they are (lama scbnh:1c - node1, task  0  0 [pid]: cpus 0-1 \
         package[0][core:0]), then its memory and devices. Warnings that concern the \
         whole step (a binding narrower than -c, --cpu-bind together with LAMA, a distribution \
         hint) are printed once, by the step's first node.",
    );
    p.section("failure behaviour")
        .paragraph(
            "The plugin line should say required: Slurm ignores every failure of an optional \
             plugin, so a bad --lama-* value or an impossible placement would be printed but the \
             job would run anyway, with Slurm's binding.",
        )
        .paragraph(
            "With required: a bad option value or combination stops srun, sbatch or salloc \
             before anything is launched; a placement the user asked for that cannot be made \
             (too many tasks for the positions, an empty cpuset) fails the step with the \
             reason on the user's terminal; a site default that cannot be placed warns and runs \
             the step with Slurm's binding (or fails it, with on_default_failure=fail); a \
             broken site configuration makes the plugin refuse to load, which stops srun on a submit host \
             with the same line, and fails the step on a node whose own line is broken (with \
             Slurm 26.05 the plugin asks for a job failure, not a drained node). A failed \
             topology cache only costs time. Nothing the plugin does stops a daemon: no panic \
             crosses into Slurm.",
        );
    p.section("files")
        .item(
            &lama_slurm::built_for::plugin_path(),
            None,
            "The plugin, in the plugin directory of the Slurm it was built for (PluginDir in \
             scontrol show config).",
        )
        .item(
            "plugstack.conf.d/lama.conf",
            None,
            "Beside slurm.conf (/etc/slurm for most sites): the plugin line, commented out as \
             installed: uncomment it on every node and submit host to enable the plugin.",
        )
        .item(
            "SlurmdSpoolDir/lama_topology.xml",
            None,
            "LAMA's topology cache (topology_cache=), in the SlurmdSpoolDir the running slurmd \
             reads from slurm.conf (/var/spool/slurmd by Slurm's default, /var/lib/slurm/slurmd \
             on Debian).",
        );
    p.section("see also")
        .paragraph("lama(1), spank(7), srun(1), sbatch(1), slurm.conf(5)");
    p.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_option_and_every_key_is_in_the_page() {
        let page = man_page("0.0.0");
        for (name, _, usage) in OPTIONS {
            let escaped = lama_man::escape(&format!("--{name}"));
            assert!(page.contains(&format!("\\fB{escaped}")), "{name}");
            assert!(page.contains(&lama_man::escape(usage)), "{name}'s usage");
        }
        for (key, _, details) in KEYS {
            let escaped = lama_man::escape(key);
            assert!(page.contains(&format!("\\fB{escaped}=\\fR")), "{key}");
            assert!(!details.is_empty(), "{key} has no explanation");
        }
    }

    #[test]
    fn every_key_is_in_plugstack_conf_example() {
        let example = include_str!("../../plugstack.conf.example");
        for (key, _, _) in KEYS {
            assert!(example.contains(&format!("#   {key}=")), "{key}");
        }
    }
}

//! Familiar spellings: a layout or binding written as in Slurm (`srun -m block:cyclic`,
//! `--cpu-bind=cores`) or Open MPI (`--map-by ppr:2:socket`, `--bind-to package`) is refused
//! by the engine as an unknown token; here the refusal says what it is in LAMA instead.

use lama_engine::{Diagnostic, Subject, BIND_ALIASES};

/// A diagnostic for a familiar word, with the reason naming the LAMA equivalent; any other
/// diagnostic unchanged.
pub fn explain(mut d: Diagnostic) -> Diagnostic {
    let reason = match d.subject {
        Subject::Layout => familiar_layout(&d.input),
        Subject::Binding => familiar_bind(&d.input),
        _ => None,
    };
    if let Some(r) = reason {
        d.reason = r;
        d.span = None;
    }
    d
}

/// What a layout spelled as in Slurm (`srun -m`) or Open MPI (`--map-by`) means in LAMA, for
/// the message that refuses it.
pub fn familiar_layout(input: &str) -> Option<String> {
    let lower = input.to_ascii_lowercase();
    // srun's -m deals the tasks to the nodes, and the plugin keeps that: only the part after
    // ':' (how a node's tasks go over its sockets) is a layout's.
    let slurm = |nodes: &str, layout: &str, what: &str| {
        format!(
            "'{input}' is a Slurm distribution (srun -m {input}); its first part deals the \
             tasks to the nodes, which srun keeps doing: srun -m {nodes} --lama-map={layout} \
             places like it ({what}; lama map -m {nodes} --map {layout})"
        )
    };
    Some(match lower.as_str() {
        "block" | "cyclic" => format!(
            "'{input}' is a Slurm distribution (srun -m {input}), which deals the tasks to the \
             nodes and stays srun's; a layout says how each node's tasks go over its sockets \
             and cores: srun -m {input} --lama-map=csbnh fills the cores in order (as -m \
             {input}:block), --lama-map=scbnh alternates the sockets (as -m {input}:cyclic)"
        ),
        "block:block" => slurm("block", "csbnh", "each node's cores in order"),
        "block:cyclic" => slurm("block", "scbnh", "each node's sockets in turn"),
        "cyclic:cyclic" => slurm("cyclic", "scbnh", "each node's sockets in turn"),
        "cyclic:block" => slurm("cyclic", "csbnh", "each node's cores in order"),
        _ if lower.starts_with("plane=") => format!(
            "'{input}' is a Slurm distribution (srun -m {input}), which deals the tasks to the \
             nodes in planes of that many: lama map -m {input} previews it, and a layout (csbnh: \
             cores in order, scbnh: round-robin over sockets) places each node's tasks"
        ),
        "plane" | "arbitrary" | "fcyclic" => format!(
            "'{input}' is a Slurm distribution (srun -m {input}), which says how tasks go to \
             nodes; a LAMA layout also orders the levels inside them: e.g. csbnh (cores in \
             order) or scbnh (round-robin over sockets)"
        ),
        "slot" | "ppr" => format!(
            "'{input}' is Open MPI's --map-by; LAMA's closest layout is csbnh (cores in order), \
             and per-resource limits are --lama-mppr (e.g. 2:s for 2 per socket)"
        ),
        "package" | "sockets" | "packages" => "Open MPI's package is LAMA's socket: the layout \
             scbnh (alias socket)"
            .to_string(),
        "cores" => "the layout csbnh (alias core) places one rank per core in order".to_string(),
        "threads" | "hwthreads" => "the layout hcsbn (alias hwthread) places one rank per \
             hardware thread in order"
            .to_string(),
        _ if lower.contains(':') => return open_mpi_map_by(input, &lower),
        _ => return None,
    })
}

/// LAMA's token and map alias for an Open MPI object name (`--map-by`, `ppr:N:OBJ`): the
/// alias of the same word (Open MPI's `package` is LAMA's `socket`), whose one-object binding
/// (`BIND_ALIASES`: `l3cache` is `1L3`) names the token.
fn open_mpi_object(name: &str) -> Option<(&'static str, &'static str)> {
    let name = if name == "package" { "socket" } else { name };
    BIND_ALIASES
        .iter()
        .find(|(alias, _)| *alias == name)
        .and_then(|(alias, width)| Some((width.strip_prefix('1')?, *alias)))
}

/// Open MPI's `--map-by OBJ:PE=n` and `ppr:N:OBJ[:PE=n]` translated into LAMA options:
/// `PE=n` (n processing elements per process, cores unless --use-hwthread-cpus) is the width
/// `nc`; `ppr:N:OBJ` (N processes on each OBJ, filled in turn in logical order) is the layout
/// `csbnh` (cores in logical order; `hcsbn` when OBJ is a core or a thread) closed after N
/// per object by the MPPR limit `N:TOKEN`.
fn open_mpi_map_by(input: &str, lower: &str) -> Option<String> {
    let parts: Vec<&str> = lower.split(':').collect();
    let pe = parts
        .iter()
        .find_map(|p| p.strip_prefix("pe="))
        .and_then(|n| n.parse::<u32>().ok())
        .filter(|n| *n > 0);
    let bind = pe.map_or_else(String::new, |n| format!(" --lama-bind={n}c"));
    let pe_text = pe.map_or_else(String::new, |n| {
        format!(", {n} cores each (PE={n}; {n}h with --use-hwthread-cpus)")
    });
    if parts[0] == "ppr" {
        let translated = match (
            parts.get(1).and_then(|n| n.parse::<u32>().ok()),
            parts.get(2),
        ) {
            (Some(n), Some(obj)) if n > 0 => open_mpi_object(obj).map(|(token, _)| {
                let layout = if token == "h" || token == "c" {
                    "hcsbn"
                } else {
                    "csbnh"
                };
                format!(
                    "'{input}' is Open MPI's --map-by ppr: {n} processes on each {obj}{pe_text}; \
                     in LAMA that is --lama-map={layout} --lama-mppr={n}:{token}{bind} (lama \
                     map --map {layout} --mppr {n}:{token}{})",
                    pe.map_or_else(String::new, |p| format!(" --bind {p}c"))
                )
            }),
            _ => None,
        };
        return Some(translated.unwrap_or_else(|| {
            format!(
                "'{input}' is Open MPI's --map-by ppr:N:resource; in LAMA that is a layout plus \
                 --lama-mppr N:token (e.g. --lama-map=csbnh --lama-mppr=2:s for ppr:2:package)"
            )
        }));
    }
    let (_, alias) = open_mpi_object(parts[0])?;
    let pe = pe?;
    Some(format!(
        "'{input}' is Open MPI's --map-by {}:PE={pe}: round-robin over the {}s{pe_text}; in \
         LAMA that is --lama-map={alias}{bind} (lama map --map {alias} --bind {pe}c)",
        parts[0], parts[0]
    ))
}

/// Open MPI's `PE=n` given as a binding: the width `nc`.
fn open_mpi_pe(input: &str, lower: &str) -> Option<String> {
    let n = lower
        .strip_prefix("pe=")?
        .parse::<u32>()
        .ok()
        .filter(|n| *n > 0)?;
    Some(format!(
        "'{input}' is Open MPI's PE={n} modifier ({n} processing elements per process, cores \
         unless --use-hwthread-cpus); in LAMA that is the width {n}c (or {n}h for hardware \
         threads)"
    ))
}

/// What a binding spelled as in Slurm (`--cpu-bind`) or Open MPI (`--bind-to`) means in LAMA.
pub fn familiar_bind(input: &str) -> Option<String> {
    let lower = input.to_ascii_lowercase();
    // Slurm's options after a comma (verbose, quiet) say nothing of the width.
    let kinds: Vec<&str> = lower
        .split(',')
        .filter(|k| !crate::cpu_bind::is_modifier(k))
        .collect();
    let kind = match kinds.as_slice() {
        [one] if lower.contains(',') => *one,
        _ => lower.as_str(),
    };
    let lists = [
        "map_cpu",
        "mask_cpu",
        "map_ldom",
        "mask_ldom",
        "rank",
        "rank_ldom",
    ];
    if let Some(list) = lists
        .iter()
        .find(|l| kind == **l || kind.starts_with(&format!("{l}:")))
    {
        return Some(format!(
            "'{input}' is Slurm's --cpu-bind={list}, which names CPUs or ranks task by task: a \
             LAMA binding is a width, the same for every task (1c a core, 1s a socket, 1N a NUMA \
             node); lama map --emit srun writes a layout's placement as --cpu-bind=mask_cpu"
        ));
    }
    let (width, what) = match kind {
        "cores" => ("1c", "one core"),
        "sockets" | "package" | "packages" => ("1s", "one socket"),
        "threads" | "hwthreads" => ("1h", "one hardware thread"),
        "ldoms" | "ldom" => ("1N", "one NUMA node"),
        "boards" => ("1b", "one board"),
        _ => return open_mpi_pe(input, &lower),
    };
    Some(format!(
        "'{input}' is Slurm's --cpu-bind or Open MPI's --bind-to; in LAMA that is the width \
         {width} ({what} per process)"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use lama_engine::{Bind, Layout};

    #[test]
    fn slurms_cpu_lists_and_planes_are_named() {
        let bind = |s: &str| explain(Bind::parse(s).unwrap_err()).reason;
        assert!(bind("map_cpu:0,1").contains("Slurm's --cpu-bind=map_cpu, which names CPUs"));
        assert!(bind("rank").contains("Slurm's --cpu-bind=rank"));
        assert!(bind("verbose,mask_cpu:0x3").contains("--cpu-bind=mask_cpu"));
        assert!(bind("verbose,cores").contains("in LAMA that is the width 1c"));
        let layout = |s: &str| explain(Layout::parse(s).unwrap_err()).reason;
        assert!(layout("plane=2").contains("lama map -m plane=2 previews it"));
    }

    #[test]
    fn familiar_spellings_get_the_lama_equivalent() {
        let reason = |s: &str| explain(Layout::parse(s).unwrap_err()).reason;
        assert!(reason("block").contains("srun -m block --lama-map=csbnh fills the cores"));
        assert!(reason("block").contains("--lama-map=scbnh alternates the sockets"));
        assert!(reason("cyclic").contains("srun -m cyclic --lama-map=csbnh"));
        assert!(reason("block:cyclic").contains("srun -m block --lama-map=scbnh"));
        // The nodes stay srun's: cyclic:cyclic keeps -m cyclic (a layout led by n would be
        // LAMA's own order, which srun does not give without -m arbitrary).
        assert!(reason("cyclic:cyclic").contains("srun -m cyclic --lama-map=scbnh"));
        assert!(reason("cyclic:block").contains("lama map -m cyclic --map csbnh"));
        assert_eq!(
            reason("ppr:2:socket:PE=4"),
            "'ppr:2:socket:PE=4' is Open MPI's --map-by ppr: 2 processes on each socket, 4 cores \
             each (PE=4; 4h with --use-hwthread-cpus); in LAMA that is --lama-map=csbnh \
             --lama-mppr=2:s --lama-bind=4c (lama map --map csbnh --mppr 2:s --bind 4c)"
        );
        assert!(reason("ppr:2:package").contains("--lama-map=csbnh --lama-mppr=2:s (lama"));
        assert!(reason("ppr:1:core").contains("--lama-map=hcsbn --lama-mppr=1:c"));
        assert!(reason("ppr:x:socket").contains("a layout plus --lama-mppr N:token"));
        assert!(reason("socket:PE=2").contains("in LAMA that is --lama-map=socket --lama-bind=2c"));
        assert!(reason("l3cache:pe=3").contains("--lama-map=l3cache --lama-bind=3c"));
        assert_eq!(
            explain(Bind::parse("PE=4").unwrap_err()).reason,
            "'PE=4' is Open MPI's PE=4 modifier (4 processing elements per process, cores \
             unless --use-hwthread-cpus); in LAMA that is the width 4c (or 4h for hardware \
             threads)"
        );
        assert!(explain(Bind::parse("PE=0").unwrap_err())
            .reason
            .contains("unknown token"));
        assert!(reason("package").contains("scbnh (alias socket)"));
        let bind = |s: &str| explain(Bind::parse(s).unwrap_err()).reason;
        assert!(bind("cores").contains("the width 1c"));
        assert!(bind("sockets").contains("the width 1s"));
        assert!(bind("ldoms").contains("the width 1N"));
        // The real names still parse.
        assert!(Layout::parse("socket").is_ok() && Bind::parse("core").is_ok());
        // Other unknown words keep the token diagnostic.
        assert!(reason("sxyz").contains("unknown token"));
    }
}

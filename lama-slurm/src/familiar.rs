//! Familiar spellings: a layout or binding written as in Slurm (`srun -m block:cyclic`,
//! `--cpu-bind=cores`) or Open MPI (`--map-by ppr:2:socket`, `--bind-to package`) is refused
//! by the engine as an unknown token; here the refusal says what it is in LAMA instead.

use lama_engine::{Diagnostic, Subject};

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
    let slurm = |layout: &str, what: &str| {
        format!(
            "'{input}' is a Slurm distribution (srun -m {input}); the LAMA layout that places \
             like it is {layout} ({what})"
        )
    };
    Some(match lower.as_str() {
        "block" | "cyclic" => format!(
            "'{input}' is a Slurm distribution (srun -m {input}), which says how tasks go to \
             nodes; how they go over a node's sockets is its second part: -m {input}:block is \
             the LAMA layout {}, -m {input}:cyclic is {}",
            if lower == "block" { "csbnh" } else { "ncsbh" },
            if lower == "block" { "scbnh" } else { "nscbh" }
        ),
        "block:block" => slurm("csbnh", "fill each node's cores in order"),
        "block:cyclic" => slurm("scbnh", "fill each node, alternating its sockets"),
        "cyclic:cyclic" => slurm(
            "nscbh",
            "round-robin over the nodes, then over each node's sockets",
        ),
        "cyclic:block" => slurm("ncsbh", "round-robin over the nodes, cores in order"),
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
        _ if lower.starts_with("ppr:") => format!(
            "'{input}' is Open MPI's --map-by ppr:N:resource; in LAMA that is a layout plus \
             --lama-mppr N:token (e.g. --lama-map=scbnh --lama-mppr=2:s)"
        ),
        _ => return None,
    })
}

/// What a binding spelled as in Slurm (`--cpu-bind`) or Open MPI (`--bind-to`) means in LAMA.
pub fn familiar_bind(input: &str) -> Option<String> {
    let lower = input.to_ascii_lowercase();
    let (width, what) = match lower.as_str() {
        "cores" => ("1c", "one core"),
        "sockets" | "package" | "packages" => ("1s", "one socket"),
        "threads" | "hwthreads" => ("1h", "one hardware thread"),
        "ldoms" | "ldom" => ("1N", "one NUMA node"),
        "boards" => ("1b", "one board"),
        _ => return None,
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
    fn familiar_spellings_get_the_lama_equivalent() {
        let reason = |s: &str| explain(Layout::parse(s).unwrap_err()).reason;
        assert!(reason("block").contains("-m block:block is the LAMA layout csbnh"));
        assert!(reason("block").contains("-m block:cyclic is scbnh"));
        assert!(reason("cyclic").contains("-m cyclic:cyclic is nscbh"));
        assert!(reason("block:cyclic").contains("scbnh"));
        assert!(reason("ppr:2:socket").contains("--lama-mppr"));
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

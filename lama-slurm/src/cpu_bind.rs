//! Slurm's `--cpu-bind`, as srun passes it to a step in `SLURM_CPU_BIND_TYPE` (`cores,`,
//! `map_cpu:`, `verbose,none`, ...).

/// Whether a `--cpu-bind` word is one of its modifiers (`verbose`, `quiet`), which say nothing
/// of the binding.
pub fn is_modifier(word: &str) -> bool {
    matches!(word, "verbose" | "v" | "quiet" | "q")
}

/// The binding a user asked Slurm for with `--cpu-bind`, from `SLURM_CPU_BIND_TYPE` as srun
/// passes it to the step (`cores,`, `map_cpu:`, `verbose,sockets,` ...): `None` for no type,
/// `none` and the modifiers alone.
pub fn explicit_cpu_bind(kind: &str) -> Option<String> {
    let types: Vec<&str> = kind
        .split(',')
        .map(|t| t.trim_end_matches(':'))
        .filter(|t| !t.is_empty() && !matches!(*t, "none" | "no") && !is_modifier(t))
        .collect();
    (!types.is_empty()).then(|| crate::hostlist::shown(&types.join(",")))
}

/// Whether `SLURM_CPU_BIND_TYPE` (`none,`, `verbose,none`, `cores,`) asks for no binding.
pub fn cpu_bind_none(kind: &str) -> bool {
    kind.split(',')
        .map(|t| t.trim_end_matches(':'))
        .any(|t| t == "none" || t == "no")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_bind_requests() {
        assert_eq!(explicit_cpu_bind("cores,"), Some("cores".to_string()));
        assert_eq!(
            explicit_cpu_bind("verbose,map_cpu:"),
            Some("map_cpu".to_string())
        );
        assert_eq!(explicit_cpu_bind("none,"), None);
        assert_eq!(explicit_cpu_bind("quiet,"), None);
        assert_eq!(explicit_cpu_bind(""), None);
    }

    #[test]
    fn cpu_bind_types() {
        assert!(cpu_bind_none("none,"));
        assert!(cpu_bind_none("verbose,none"));
        assert!(!cpu_bind_none("cores,"));
        assert!(!cpu_bind_none("mask_cpu:"));
        assert!(!cpu_bind_none(""));
    }
}

//! `srun --cpu-bind=none` without `--lama-*` options of its own leaves the step alone.
//!
//! Launchers start their daemons with `srun --cpu-bind=none` so that a daemon is not pinned
//! (Open MPI's `mpirun` starts its `prted` daemons that way): ranks inherit the daemon's mask. In
//! a batch script or allocation with `--lama-map`, that srun inherits the option through the
//! environment, and binding its one task per node to one core would run every rank of the node
//! on that core. So srun, which alone can tell its own options from inherited ones, writes
//! [`OWN_OPTIONS_VARIABLE`] into the step's environment; slurmstepd skips LAMA when it says `0`
//! and the step asked for `--cpu-bind=none`. An srun that gives a `--lama-*` option itself is
//! placed as usual, `--cpu-bind=none` or not (the README recommends that combination).

use crate::options::OPTIONS;
use crate::request::UserOptions;

/// Set by srun in the step's environment: `1` when srun was given a `--lama-*` option of its
/// own, `0` when all it has came from its batch script or allocation. Removed from the tasks'
/// environment.
pub const OWN_OPTIONS_VARIABLE: &str = "LAMA_SRUN_OWN_OPTIONS";

/// The `--lama-*` option values in an environment that an srun inherits from sbatch or salloc
/// (`SLURM_SPANK__SLURM_SPANK_OPTION_lama_<option>` or `_SLURM_SPANK_OPTION_lama_<option>`,
/// non-alphanumerics as `_`), by option name. Read before srun parses its own options.
pub fn inherited_options<'a>(
    env: impl IntoIterator<Item = (&'a str, &'a str)>,
) -> Vec<(&'static str, String)> {
    let mut found = Vec::new();
    for (key, value) in env {
        let Some(rest) = key
            .strip_prefix("SLURM_SPANK__SLURM_SPANK_OPTION_lama_")
            .or_else(|| key.strip_prefix("_SLURM_SPANK_OPTION_lama_"))
        else {
            continue;
        };
        // (A value over the environment bound is nobody's option: left out.)
        if value.len() > crate::bounded::MAX_ENV_VALUE {
            continue;
        }
        if let Some((name, _, _)) = OPTIONS.iter().find(|(name, _, _)| canonical(name) == rest) {
            if !found.iter().any(|(n, _)| n == name) {
                found.push((*name, value.to_string()));
            }
        }
    }
    found
}

/// An environment as text: names that are not UTF-8 (no option of the plugin's is) are left
/// out, values that are not are kept with each bad byte as U+FFFD, so that an option among them
/// is refused by its own diagnostic and every other variable is harmless.
pub fn text_environment(
    env: impl IntoIterator<Item = (std::ffi::OsString, std::ffi::OsString)>,
) -> Vec<(String, String)> {
    env.into_iter()
        .filter_map(|(k, v)| Some((k.into_string().ok()?, v.to_string_lossy().into_owned())))
        .collect()
}

/// Slurm's name for an option in the environment: non-alphanumerics become `_`.
fn canonical(name: &str) -> String {
    name.chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect()
}

/// Whether srun was given any `--lama-*` option itself: one that is set and was not inherited
/// with the same value. (An option given again with its inherited value counts as inherited.)
pub fn has_own_options(user: &UserOptions, inherited: &[(&'static str, String)]) -> bool {
    use crate::options::*;
    let inherited_as = |name: &str, value: &str| {
        inherited
            .iter()
            .any(|(n, v)| *n == name && (v == value || value.is_empty()))
    };
    let values = [
        (OPT_MAP, user.map.as_deref()),
        (OPT_BIND, user.bind.as_deref()),
        (OPT_MPPR, user.mppr.as_deref()),
        (OPT_ORDER, user.order.as_deref()),
        (OPT_MEMBIND, user.membind.as_deref()),
        (OPT_PLAN, user.plan.as_deref()),
        (OPT_VERBOSE, user.verbose.then_some("")),
        (OPT_OMP, user.omp.then_some("")),
        (OPT_GPU_ISOLATE, user.gpu_isolate.then_some("")),
    ];
    values
        .iter()
        .any(|(name, value)| value.is_some_and(|v| !inherited_as(name, v)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_environment_that_is_not_utf8_is_read_as_text() {
        use std::ffi::OsString;
        use std::os::unix::ffi::OsStringExt;
        let env = vec![
            (OsString::from("X"), OsString::from_vec(vec![0xff])),
            (OsString::from_vec(vec![b'Y', 0xfe]), OsString::from("1")),
            (
                OsString::from("SLURM_SPANK__SLURM_SPANK_OPTION_lama_lama_map"),
                OsString::from_vec(vec![b's', 0xff]),
            ),
        ];
        let text = text_environment(env);
        assert_eq!(text.len(), 2);
        assert_eq!(text[0], ("X".to_string(), "\u{fffd}".to_string()));
        let found = inherited_options(text.iter().map(|(k, v)| (k.as_str(), v.as_str())));
        assert_eq!(found, vec![("lama-map", "s\u{fffd}".to_string())]);
    }

    #[test]
    fn inherited_options_are_read_in_both_forms() {
        let env = [
            ("SLURM_SPANK__SLURM_SPANK_OPTION_lama_lama_map", "csbnh"),
            ("_SLURM_SPANK_OPTION_lama_lama_bind", "1s"),
            ("_SLURM_SPANK_OPTION_other_lama_map", "x"),
            ("_SLURM_SPANK_OPTION_lama_lama_nonsense", "x"),
            ("PATH", "/bin"),
        ];
        assert_eq!(
            inherited_options(env),
            vec![
                ("lama-map", "csbnh".to_string()),
                ("lama-bind", "1s".to_string())
            ]
        );
    }

    #[test]
    fn own_options_are_those_not_inherited() {
        let inherited = vec![("lama-map", "csbnh".to_string())];
        let from_script = UserOptions {
            map: Some("csbnh".into()),
            ..UserOptions::default()
        };
        assert!(!has_own_options(&from_script, &inherited));
        assert!(!has_own_options(&UserOptions::default(), &inherited));
        let changed = UserOptions {
            map: Some("scbnh".into()),
            ..UserOptions::default()
        };
        assert!(has_own_options(&changed, &inherited));
        let added = UserOptions {
            verbose: true,
            ..from_script
        };
        assert!(has_own_options(&added, &inherited));
        assert!(has_own_options(&changed, &[]));
        // Every option counts, --lama-gpu-isolate too (it was missing from the list).
        let isolate = UserOptions {
            gpu_isolate: true,
            ..UserOptions::default()
        };
        assert!(has_own_options(&isolate, &inherited));
        assert!(!has_own_options(
            &isolate,
            &[("lama-gpu-isolate", String::new())]
        ));
    }
}

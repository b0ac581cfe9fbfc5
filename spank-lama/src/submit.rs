//! srun, sbatch and salloc (the local and allocator contexts): the options are checked before
//! anything is launched, a `lama plan` plan is read as the user and travels with the job, and
//! srun tells the step whether it was given `--lama-*` options of its own.

use crate::config::SiteConfig;
use crate::inherited;
use crate::options::user_options;
use crate::plan_file::{PlanRef, PLAN_FILE_VARIABLE, PLAN_VARIABLE};
use lama_planfile::{PlanFile, MAX_INLINE_PLAN_BYTES};
use slurm_spank::SpankHandle;

/// `init_post_opt` in srun (`srun == true`), sbatch and salloc: checks the options with the
/// same diagnostics as `lama map`; reads the plan file as the user and puts its text (or, over
/// [`MAX_INLINE_PLAN_BYTES`], its path and digest) in the environment the job inherits; in
/// srun, writes [`inherited::OWN_OPTIONS_VARIABLE`]. `Err` is the message for the user's
/// terminal.
pub fn check_options(
    spank: &SpankHandle,
    site: &SiteConfig,
    srun: bool,
    inherited_options: &[(&'static str, String)],
) -> Result<(), String> {
    let user = user_options(spank);
    if srun {
        let own = inherited::has_own_options(&user, inherited_options);
        std::env::set_var(inherited::OWN_OPTIONS_VARIABLE, if own { "1" } else { "0" });
    }
    crate::request::resolve(&user, site).map_err(|e| e.to_string())?;
    if let Some(path) = &user.plan {
        match read_plan(path)? {
            Carried::Text(text) => {
                std::env::set_var(PLAN_VARIABLE, text);
                std::env::remove_var(PLAN_FILE_VARIABLE);
            }
            Carried::File(r) => {
                std::env::set_var(PLAN_FILE_VARIABLE, r.encode());
                std::env::remove_var(PLAN_VARIABLE);
            }
            Carried::Inherited => {}
        }
    }
    Ok(())
}

/// How a plan travels to the step's nodes.
enum Carried {
    /// Its text, in [`PLAN_VARIABLE`].
    Text(String),
    /// Its path and digest, in [`PLAN_FILE_VARIABLE`]: each node reads the file.
    File(PlanRef),
    /// As sbatch or salloc already sent it (the file is not readable where this srun runs).
    Inherited,
}

/// The plan the environment carries, if any, checked for a step of `total` tasks as each node
/// will check it: its text, or the file it names where this srun can read it (never only the
/// count written beside the file's name, which an inherited variable may carry from anywhere).
fn check_carried(total: u32) -> Result<(), String> {
    // Bounded as the nodes bound it (`step::plan_here`): a longer text is none of srun's.
    if let Ok(text) = std::env::var(PLAN_VARIABLE) {
        if text.len() <= lama_planfile::MAX_INLINE_PLAN_BYTES {
            return match PlanFile::parse(&text) {
                Ok(f) if f.ranks.len() != total as usize => Err(format!(
                    "is for {} ranks but this step has {total} tasks; launch with -n{}",
                    f.ranks.len(),
                    f.ranks.len()
                )),
                // A malformed text: each node says what is wrong with it.
                _ => Ok(()),
            };
        }
    }
    let Some(r) = std::env::var(PLAN_FILE_VARIABLE)
        .ok()
        .and_then(|v| PlanRef::decode(&v))
    else {
        return Ok(());
    };
    if r.ranks != total {
        return Err(format!(
            "is for {} ranks but this step has {total} tasks; launch with -n{}",
            r.ranks, r.ranks
        ));
    }
    // A file this host cannot see is each node's to read (and to refuse by its size first).
    if std::fs::metadata(&r.path).is_err() {
        return Ok(());
    }
    crate::plan_file::check_whole(&r, total).map_err(|e| format!("as carried: {e}"))
}

/// `local_user_init` in srun, once the step's size is known and before it is launched: a plan
/// for another number of ranks is refused. Not in a heterogeneous step (srun sets
/// `SLURM_HET_SIZE`): there `S_JOB_TOTAL_TASK_COUNT` is one component's count, and each node
/// checks the plan against the step's count and every task's rank before any task runs
/// ([`crate::step_node::het_plan_ranks`]).
pub fn check_plan_size(spank: &SpankHandle) -> Result<(), String> {
    let Some(path) = user_options(spank).plan else {
        return Ok(());
    };
    if crate::step_node::is_het(|name| std::env::var(name).ok()) {
        return Ok(());
    }
    let Ok(total) = spank.job_total_task_count() else {
        return Ok(());
    };
    check_carried(total).map_err(|why| format!("lama: --lama-plan: {path} {why}"))
}

/// The plan, read as the user and checked whole: its text when it is small enough to travel
/// in the environment, else its absolute path and digest; or, for an srun inside a batch
/// script or allocation whose file is not readable here, what sbatch/salloc already sent.
fn read_plan(path: &str) -> Result<Carried, String> {
    let text = match crate::bounded::read_file(
        std::path::Path::new(path),
        lama_planfile::MAX_PLAN_BYTES as u64,
    ) {
        Ok(t) => t,
        Err(why) => {
            let unreachable = matches!(
                why.kind(),
                std::io::ErrorKind::NotFound | std::io::ErrorKind::PermissionDenied
            );
            let sent = [PLAN_VARIABLE, PLAN_FILE_VARIABLE]
                .iter()
                .any(|v| std::env::var_os(v).is_some());
            return if unreachable && sent {
                Ok(Carried::Inherited)
            } else {
                Err(format!("lama: --lama-plan: cannot read {path}: {why}"))
            };
        }
    };
    let file = PlanFile::parse(&text).map_err(|e| format!("lama: --lama-plan: {path}: {e}"))?;
    if text.len() <= MAX_INLINE_PLAN_BYTES {
        return Ok(Carried::Text(text));
    }
    // Each node opens the file itself: the path must not depend on srun's directory.
    let absolute = std::fs::canonicalize(path)
        .map_err(|e| format!("lama: --lama-plan: cannot resolve {path}: {e}"))?;
    let absolute = absolute
        .to_str()
        .filter(|p| !p.contains('\n'))
        .ok_or_else(|| {
            format!(
                "lama: --lama-plan: {path}: the path {} cannot travel to the nodes (it is not \
                 UTF-8 or has a line break): rename it",
                absolute.display()
            )
        })?
        .to_string();
    Ok(Carried::File(PlanRef {
        ranks: file.ranks.len() as u32,
        digest: lama_planfile::digest(text.as_bytes()),
        path: absolute,
    }))
}

//! srun, sbatch and salloc (the local and allocator contexts): the options are checked before
//! anything is launched, a `lama plan` plan is read as the user and travels with the job, and
//! srun tells the step whether it was given `--lama-*` options of its own.

use crate::config::SiteConfig;
use crate::inherited;
use crate::options::user_options;
use crate::plan_file::PLAN_VARIABLE;
use lama_planfile::PlanFile;
use slurm_spank::SpankHandle;

/// `init_post_opt` in srun (`srun == true`), sbatch and salloc: checks the options with the
/// same diagnostics as `lama map`; reads the plan file as the user and puts its text in the
/// environment the job inherits; in srun, writes [`inherited::OWN_OPTIONS_VARIABLE`]. `Err` is
/// the message for the user's terminal.
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
        let (text, _) = read_plan(path)?;
        std::env::set_var(PLAN_VARIABLE, text);
    }
    Ok(())
}

/// `local_user_init` in srun, once the step's size is known and before it is launched: a plan
/// for another number of ranks is refused.
pub fn check_plan_size(spank: &SpankHandle) -> Result<(), String> {
    let Some(path) = user_options(spank).plan else {
        return Ok(());
    };
    let file = std::env::var(PLAN_VARIABLE)
        .ok()
        .and_then(|t| PlanFile::parse(&t).ok());
    if let (Some(file), Ok(total)) = (file, spank.job_total_task_count()) {
        if file.ranks.len() != total as usize {
            return Err(format!(
                "lama: --lama-plan: {path} is for {} ranks but this step has {total} tasks; \
                 launch with -n{}",
                file.ranks.len(),
                file.ranks.len()
            ));
        }
    }
    Ok(())
}

/// The plan's text, read as the user: the file, or (for an srun inside a batch script or
/// allocation whose file is not readable here) the text that sbatch/salloc already put in the
/// environment.
fn read_plan(path: &str) -> Result<(String, PlanFile), String> {
    let from_file = crate::bounded::read_file(
        std::path::Path::new(path),
        lama_planfile::MAX_PLAN_BYTES as u64,
    )
    .map_err(|e| e.to_string());
    let text = match from_file {
        Ok(t) => t,
        Err(why) => match std::env::var(PLAN_VARIABLE) {
            Ok(t) => t,
            Err(_) => return Err(format!("lama: --lama-plan: cannot read {path}: {why}")),
        },
    };
    let file = PlanFile::parse(&text).map_err(|e| format!("lama: --lama-plan: {path}: {e}"))?;
    Ok((text, file))
}

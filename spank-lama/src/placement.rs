//! Where this node's tasks go (SPEC §3.2): the rules live in [`lama_slurm::node`], shared by
//! the plugin, `lama map` and `lama exec`; this module names them for the plugin.

pub use lama_slurm::node::{
    effective_bind, one_thread_per_core, place_local, LocalPlacement, StepCpus, TaskPlacement,
};
pub(crate) use lama_slurm::task_env::{omp_place_list, omp_places};

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::SiteConfig;
    use crate::request::StepRequest;
    use crate::request::{resolve, tests::user, UserOptions};
    use crate::task_env::omp_threads;
    use lama_engine::{Bind, CpuList, Machine};
    use lama_engine::{CpuUnit, Layout};

    #[test]
    fn local_tasks_follow_global_rank() {
        let m = Machine::synthetic("pack:2 core:2 pu:1").unwrap();
        let plan = resolve(&user(Some("scbnh"), None), &SiteConfig::default())
            .unwrap()
            .unwrap();
        // Local task 0 is global rank 7, local task 1 is rank 3: rank 3 comes first.
        let tasks = place_local(&m, &plan, &[7, 3], false, StepCpus::default())
            .unwrap()
            .tasks;
        assert_eq!(tasks[1].cpus.to_string(), "0");
        assert_eq!(tasks[0].cpus.to_string(), "2");
        assert_eq!(tasks[0].picture, "");
        let verbose = StepRequest {
            verbose: true,
            ..plan.clone()
        };
        let tasks = place_local(&m, &verbose, &[7, 3], false, StepCpus::default())
            .unwrap()
            .tasks;
        assert_eq!(tasks[0].picture, "package[1][core:2]");
        let e = place_local(&m, &plan, &[0, 1, 2, 3, 4], false, StepCpus::default()).unwrap_err();
        assert!(e
            .to_string()
            .starts_with("placed 4 of 5 processes: oversubscribed"));
        assert_eq!(
            place_local(&m, &plan, &[0, 1, 2, 3, 4], true, StepCpus::default())
                .unwrap()
                .tasks
                .len(),
            5
        );
    }

    fn cpt(per_task: u32, unit: CpuUnit) -> StepCpus {
        StepCpus { per_task, unit }
    }

    #[test]
    fn cpus_per_task_widen_the_default_binding() {
        let omp = UserOptions {
            map: Some("scbnh".into()),
            omp: true,
            ..UserOptions::default()
        };
        let plan = resolve(&omp, &SiteConfig::default()).unwrap().unwrap();
        // One thread per core (node1, node3 of the test cluster): -c2 binds two cores.
        let flat = Machine::synthetic("pack:1 core:2 pu:1").unwrap();
        let local = place_local(&flat, &plan, &[0], false, cpt(2, CpuUnit::Thread)).unwrap();
        assert_eq!(local.bind.to_string(), "2c");
        assert_eq!(local.tasks[0].cpus.to_string(), "0-1");
        assert_eq!(local.tasks[0].omp_places, "{0},{1}");
        assert_eq!(omp_threads(cpt(2, CpuUnit::Thread), &local.tasks[0]), 2);
        assert_eq!(local.narrower, None);
        // Two threads per core, Slurm counting threads (node2): -c2 is the core, two places.
        let smt = Machine::synthetic("pack:2 core:2 pu:2").unwrap();
        let local = place_local(&smt, &plan, &[0, 1], false, cpt(2, CpuUnit::Thread)).unwrap();
        assert_eq!(local.bind.to_string(), "1c");
        assert_eq!(local.tasks[1].cpus.to_string(), "4-5");
        assert_eq!(local.tasks[1].omp_places, "{4},{5}");
        // Slurm counting cores: -c2 is two cores, places per core.
        let local = place_local(&smt, &plan, &[0, 1], false, cpt(2, CpuUnit::Core)).unwrap();
        assert_eq!(local.bind.to_string(), "2c");
        assert_eq!(local.tasks[0].cpus.to_string(), "0-3");
        assert_eq!(local.tasks[1].cpus.to_string(), "4-7");
        assert_eq!(local.tasks[1].omp_places, "{4,5},{6,7}");
        // Without -c nothing changes.
        let local = place_local(&smt, &plan, &[0], false, StepCpus::default()).unwrap();
        assert_eq!(local.bind.to_string(), "1c");
        assert_eq!(local.tasks[0].omp_places, "{0,1}");
    }

    #[test]
    fn the_default_binding_never_makes_tasks_share_cpus() {
        let plan = resolve(&user(Some("csbnh"), None), &SiteConfig::default())
            .unwrap()
            .unwrap();
        // srun -n4 -c3 on 12 CPUs of 2 threads per core: 2c four times does not fit; each
        // task gets exactly its 3 threads.
        let m = Machine::synthetic("pack:1 core:6 pu:2").unwrap();
        let local = place_local(&m, &plan, &[0, 1, 2, 3], false, cpt(3, CpuUnit::Thread)).unwrap();
        assert_eq!(local.bind.to_string(), "3h");
        let cpus: Vec<String> = local.tasks.iter().map(|t| t.cpus.to_string()).collect();
        assert_eq!(cpus, ["0-2", "3-5", "6-8", "9-11"]);
        assert_eq!(local.narrower, None);
        assert_eq!(local.here.len(), 1, "{:?}", local.here);
        let note = local.here.join("; ");
        assert!(
            note.starts_with("note: the default binding 2c cannot give 4 task(s)"),
            "{note}"
        );
        // Without -c: two tasks on one core of two threads get a thread each, not the core
        // twice.
        let node2 = Machine::synthetic("pack:1 core:1 pu:2").unwrap();
        let local = place_local(&node2, &plan, &[4, 5], false, StepCpus::default()).unwrap();
        assert_eq!(local.bind.to_string(), "1h");
        let cpus: Vec<String> = local.tasks.iter().map(|t| t.cpus.to_string()).collect();
        assert_eq!(cpus, ["0", "1"]);
        // A binding that was asked for: the two tasks share the core, as asked, a thread
        // each, which is what 1c means: nothing to warn about.
        let asked = resolve(&user(Some("csbnh"), Some("1c")), &SiteConfig::default())
            .unwrap()
            .unwrap();
        let local = place_local(&node2, &asked, &[4, 5], false, StepCpus::default()).unwrap();
        let cpus: Vec<String> = local.tasks.iter().map(|t| t.cpus.to_string()).collect();
        assert_eq!(cpus, ["0-1", "0-1"]);
        assert!(
            !local.here.iter().any(|l| l.contains("share CPUs")),
            "{:?}",
            local.here
        );
        // An asked-for binding wider than the mapping shares CPUs with a warning naming the
        // global ranks.
        let wide = resolve(&user(Some("cnsbh"), Some("2c")), &SiteConfig::default())
            .unwrap()
            .unwrap();
        let odd = Machine::synthetic("pack:2 core:3 pu:1").unwrap();
        let local = place_local(&odd, &wide, &[12, 10, 11], false, StepCpus::default()).unwrap();
        let warning = local.here.join("; ");
        assert!(
            warning.starts_with(
                "warning: binding 2c makes tasks share CPUs: ranks 11 and 12 share CPU 3."
            ),
            "{warning}"
        );
    }

    #[test]
    fn a_binding_narrower_than_cpus_per_task_runs_with_a_warning() {
        let m = Machine::synthetic("pack:1 core:4 pu:1").unwrap();
        let plan = resolve(&user(Some("scbnh"), Some("1c")), &SiteConfig::default())
            .unwrap()
            .unwrap();
        let local = place_local(&m, &plan, &[0, 1], false, cpt(2, CpuUnit::Thread)).unwrap();
        assert_eq!(local.tasks[0].cpus.to_string(), "0");
        let warning = local.narrower.unwrap();
        assert!(
            warning.starts_with(
                "warning: binding 1c gives a task 1 CPU(s) (threads, as Slurm counts them \
                 here) but -c/--cpus-per-task asks for 2"
            ),
            "{warning}"
        );
        assert!(warning.ends_with("such as 2c"), "{warning}");
        // The same from the site's default binding.
        let site = SiteConfig {
            map: Some(Layout::parse("scbnh").unwrap()),
            bind: Some(Bind::parse("1c").unwrap()),
            ..SiteConfig::default()
        };
        let plan = resolve(&UserOptions::default(), &site).unwrap().unwrap();
        let local = place_local(&m, &plan, &[0], false, cpt(3, CpuUnit::Thread)).unwrap();
        assert!(local.narrower.is_some());
        // Wide enough, or no binding at all: no warning.
        let plan = resolve(&user(Some("scbnh"), Some("2c")), &SiteConfig::default())
            .unwrap()
            .unwrap();
        let local = place_local(&m, &plan, &[0], false, cpt(2, CpuUnit::Thread)).unwrap();
        assert_eq!(local.narrower, None);
        let plan = resolve(&user(Some("scbnh"), Some("none")), &SiteConfig::default())
            .unwrap()
            .unwrap();
        let local = place_local(&m, &plan, &[0], false, cpt(2, CpuUnit::Thread)).unwrap();
        assert_eq!(local.narrower, None);
    }

    #[test]
    fn one_thread_of_each_core() {
        let m = Machine::synthetic("pack:1 core:3 pu:2")
            .unwrap()
            .restrict(&CpuList::parse("1-5").unwrap());
        assert_eq!(one_thread_per_core(&m).to_string(), "1-2,4");
    }
}

//! What each task gets besides its CPUs: its memory policy, its `LAMA_*` and OpenMP
//! variables, and the `--lama-verbose` line ([`lama_slurm::node_env`], shared with `lama exec`).

pub use lama_slurm::node_env::{
    hex_mask, memory_binding, omp_threads, task_environment, verbose_line,
};

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::SiteConfig;
    use crate::placement::place_local;
    use crate::placement::StepCpus;
    use crate::request::StepRequest;
    use crate::request::{resolve, tests::user, UserOptions};
    use lama_engine::Machine;
    use lama_engine::{Bind, CpuList, Membind};

    #[test]
    fn verbose_line_and_environment() {
        let m = Machine::synthetic("pack:2 core:2 pu:2").unwrap();
        let mut plan = resolve(&user(Some("scbnh"), Some("1c")), &SiteConfig::default())
            .unwrap()
            .unwrap();
        plan.verbose = true;
        let tasks = place_local(&m, &plan, &[0, 1], false, StepCpus::default())
            .unwrap()
            .tasks;
        assert_eq!(
            verbose_line(&plan, "node1", 1, 4242, &tasks[1]),
            "lama scbnh:1c - node1, task  1  1 [4242]: cpus 4-5 package[1][core:2]"
        );
        let env = task_environment(&plan, &tasks[1]);
        assert!(env.contains(&("LAMA_CPUS", "4-5".to_string())));
        assert!(env.contains(&("LAMA_LAYOUT", "scbnh".to_string())));
        assert!(!env.iter().any(|(k, _)| k.starts_with("OMP_")));
    }

    #[test]
    fn openmp_places_follow_the_binding() {
        // Scrambled OS indexes: core 0 holds P#0 and P#2, core 1 holds P#1 and P#3.
        let mut b = lama_engine::MachineBuilder::new("scrambled");
        for os in [0, 2, 1, 3] {
            b.pu(os, true);
        }
        b.object(lama_engine::Level::Core, Some(0), &[0, 2]);
        b.object(lama_engine::Level::Core, Some(1), &[1, 3]);
        let m = b.build().unwrap();
        let user = UserOptions {
            map: Some("cnh".into()),
            bind: Some("1n".into()),
            omp: true,
            ..UserOptions::default()
        };
        let plan = resolve(&user, &SiteConfig::default()).unwrap().unwrap();
        let tasks = place_local(&m, &plan, &[0], false, StepCpus::default())
            .unwrap()
            .tasks;
        assert_eq!(
            (tasks[0].omp_places.as_str(), tasks[0].omp_place_count),
            ("{0,2},{1,3}", 2)
        );
        let env = task_environment(&plan, &tasks[0]);
        assert!(env.contains(&("OMP_PLACES", "{0,2},{1,3}".to_string())));
        assert!(env.contains(&("OMP_PROC_BIND", "close".to_string())));
        // No binding, no OpenMP places.
        let plan = StepRequest {
            bind: Some(Bind::None),
            ..plan
        };
        let tasks = place_local(&m, &plan, &[0], false, StepCpus::default())
            .unwrap()
            .tasks;
        assert!(!task_environment(&plan, &tasks[0])
            .iter()
            .any(|(k, _)| k.starts_with("OMP_")));
    }

    #[test]
    fn memory_follows_the_cpu_binding() {
        let m = Machine::synthetic("pack:2 numa:1 core:2 pu:1").unwrap();
        let mut u = user(Some("scbnh"), Some("1c"));
        u.membind = Some("local".into());
        let mut plan = resolve(&u, &SiteConfig::default()).unwrap().unwrap();
        plan.verbose = true;
        let tasks = place_local(&m, &plan, &[0, 1], false, StepCpus::default())
            .unwrap()
            .tasks;
        assert_eq!(tasks[1].mems.to_string(), "1");
        assert_eq!(
            memory_binding(&plan, &tasks[1]),
            Some((Membind::Local, CpuList::from_cpus([1])))
        );
        let env = task_environment(&plan, &tasks[1]);
        assert!(env.contains(&("LAMA_MEMS", "1".to_string())));
        assert!(env.contains(&("LAMA_MEMBIND", "local".to_string())));
        assert!(verbose_line(&plan, "n", 1, 1, &tasks[1])
            .contains(": cpus 2 package[1][core:2], mems 1 local"));
        // A whole-node binding touches both NUMA nodes.
        plan.bind = Some(Bind::parse("1n").unwrap());
        plan.membind = Membind::Preferred;
        let tasks = place_local(&m, &plan, &[0], false, StepCpus::default())
            .unwrap()
            .tasks;
        assert_eq!(
            memory_binding(&plan, &tasks[0]).unwrap().1.to_string(),
            "0-1"
        );
        // No CPU binding: memory is left alone, and the verbose line says why.
        plan.bind = Some(Bind::None);
        let tasks = place_local(&m, &plan, &[0], false, StepCpus::default())
            .unwrap()
            .tasks;
        assert_eq!(memory_binding(&plan, &tasks[0]), None);
        assert!(!task_environment(&plan, &tasks[0])
            .iter()
            .any(|(k, _)| *k == "LAMA_MEMS"));
        assert!(verbose_line(&plan, "n", 0, 1, &tasks[0])
            .contains("memory not bound (preferred needs a CPU binding)"));
        // Bad values are refused like the other options.
        let mut bad = user(Some("scbnh"), None);
        bad.membind = Some("strict".into());
        let e = resolve(&bad, &SiteConfig::default()).unwrap_err();
        assert!(e
            .to_string()
            .starts_with("lama: --lama-membind: invalid memory binding 'strict'"));
    }

    #[test]
    fn hex_masks() {
        assert_eq!(hex_mask(&CpuList::new()), "0x0");
        assert_eq!(hex_mask(&CpuList::from_cpus([0, 1])), "0x3");
        assert_eq!(hex_mask(&CpuList::from_cpus([0, 33])), "0x200000001");
    }
}

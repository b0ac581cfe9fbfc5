//! Slurm's own placement, each expectation worked out by hand from task/affinity's and the
//! step manager's code (comments give the steps).

use super::*;

fn m(desc: &str) -> Machine {
    Machine::synthetic(desc).unwrap()
}

fn ask(tasks: u32) -> Ask {
    Ask {
        tasks,
        ..Ask::default()
    }
}

fn list(v: &[u32]) -> String {
    lama_engine::CpuList::from_cpus(v.iter().copied()).to_string()
}

fn tasks(own: &Own) -> Vec<String> {
    own.tasks.iter().map(|t| list(t)).collect()
}

const TWO_BY_FOUR: &str = "pack:2 core:4 pu:2";

#[test]
fn without_binding_that_fits_the_tasks_share_the_step() {
    // 4 tasks of 1 CPU on 16 threads: no whole sockets (2), cores (8) or threads (16) = 4.
    let own = place(&m(TWO_BY_FOUR), &ask(4)).unwrap();
    assert_eq!(tasks(&own), vec!["0-15"; 4]);
    assert!(own.how.starts_with("auto binding off"), "{}", own.how);
}

#[test]
fn as_many_tasks_as_cores_bind_to_cores_going_round_the_sockets() {
    let own = place(&m(TWO_BY_FOUR), &ask(8)).unwrap();
    assert_eq!(
        tasks(&own),
        vec!["0-1", "8-9", "2-3", "10-11", "4-5", "12-13", "6-7", "14-15"]
    );
    assert!(own.how.contains("8 whole core(s)"), "{}", own.how);
}

#[test]
fn c_takes_only_the_cores_the_tasks_need() {
    // 2 x 4 CPUs: 4 cores, 2 a task, round the sockets: cores 0,1 and 4,5; then 8 threads
    // for 8 CPUs asked: bound to threads, each task's 4 in order.
    let a = Ask {
        cpus_per_task: Some(4),
        ..ask(2)
    };
    let own = place(&m(TWO_BY_FOUR), &a).unwrap();
    assert_eq!(list(&own.step), "0-3,8-11");
    assert_eq!(tasks(&own), vec!["0-3", "8-11"]);
}

#[test]
fn an_exact_step_without_c_takes_a_core_per_task_round_the_sockets() {
    // srun --exclusive (or --exact) -n4: 4 CPUs = 2 cores of 2 threads, one a task's share
    // per socket in turn: cores 0 and 4 (PUs 0-1 and 8-9); 4 CPUs = the 4 threads: threads.
    let a = Ask {
        exact: true,
        ..ask(4)
    };
    let own = place(&m(TWO_BY_FOUR), &a).unwrap();
    assert_eq!(list(&own.step), "0-1,8-9");
    assert_eq!(tasks(&own), vec!["0", "8", "1", "9"]);
}

#[test]
fn explicit_kinds_widen_each_task_to_its_unit() {
    let sockets = Ask {
        cpu_bind: Some(CpuBind::Sockets),
        ..ask(2)
    };
    assert_eq!(
        tasks(&place(&m(TWO_BY_FOUR), &sockets).unwrap()),
        vec!["0-7", "8-15"]
    );
    let block_cores = Ask {
        cpu_bind: Some(CpuBind::Cores),
        dist: Some(SocketDist::Block),
        ..ask(4)
    };
    assert_eq!(
        tasks(&place(&m(TWO_BY_FOUR), &block_cores).unwrap()),
        vec!["0-1", "2-3", "4-5", "6-7"]
    );
    let ldoms = Ask {
        cpu_bind: Some(CpuBind::Ldoms),
        ..ask(2)
    };
    let numa = m("pack:2 numa:2 core:2 pu:2");
    assert_eq!(tasks(&place(&numa, &ldoms).unwrap()), vec!["0-3", "8-11"]);
}

#[test]
fn one_thread_per_core_skips_the_siblings() {
    let (kind, tpc, _) = srun_binding(SrunBinding {
        hint: Some("nomultithread"),
        ..SrunBinding::default()
    })
    .unwrap();
    let a = Ask {
        cpu_bind: kind,
        threads_per_core: tpc,
        ..ask(4)
    };
    assert_eq!(
        tasks(&place(&m(TWO_BY_FOUR), &a).unwrap()),
        vec!["0", "8", "2", "10"]
    );
}

#[test]
fn cpu_lists_go_by_local_task_id_and_must_be_the_steps() {
    let a = Ask {
        cpu_bind: CpuBind::parse("map_cpu:3,9").unwrap(),
        ..ask(3)
    };
    assert_eq!(
        tasks(&place(&m(TWO_BY_FOUR), &a).unwrap()),
        vec!["3", "9", "3"]
    );
    let a = Ask {
        cpu_bind: CpuBind::parse("verbose,mask_cpu:0x3,0xc0").unwrap(),
        ..ask(2)
    };
    assert_eq!(
        tasks(&place(&m(TWO_BY_FOUR), &a).unwrap()),
        vec!["0-1", "6-7"]
    );
    let a = Ask {
        cpu_bind: CpuBind::parse("map_cpu:20").unwrap(),
        ..ask(1)
    };
    let e = place(&m(TWO_BY_FOUR), &a).unwrap_err();
    assert!(e.contains("CPU 20 is outside the step's CPUs"), "{e}");
}

#[test]
fn a_partial_allocation_is_laid_out_within_the_jobs_cores() {
    // The job has cores 0 and 1 (PUs 0-3): 2 tasks = 2 whole cores; socket 1 has none, so
    // the cyclic walk comes back to socket 0 for the second task.
    let node = m(TWO_BY_FOUR).restrict(&lama_engine::CpuList::parse("0-3").unwrap());
    let own = place(&node, &ask(2)).unwrap();
    assert_eq!(list(&own.step), "0-3");
    assert_eq!(tasks(&own), vec!["0-1", "2-3"]);
}

#[test]
fn srun_reads_hints_and_task_counts_as_bindings() {
    let b = |o: SrunBinding<'_>| srun_binding(o).unwrap();
    let (k, t, notes) = b(SrunBinding {
        hint: Some("nomultithread"),
        cpu_bind: Some("cores"),
        ..SrunBinding::default()
    });
    assert_eq!((k, t), (Some(CpuBind::Cores), None));
    assert!(notes[0].contains("srun ignores it"), "{notes:?}");
    let (k, t, _) = b(SrunBinding {
        threads_per_core: Some(1),
        ..SrunBinding::default()
    });
    assert_eq!((k, t), (Some(CpuBind::Threads), Some(1)));
    let (k, _, _) = b(SrunBinding {
        ntasks_per_socket: Some(2),
        ..SrunBinding::default()
    });
    assert_eq!(k, Some(CpuBind::Sockets));
    assert!(srun_binding(SrunBinding {
        cpu_bind: Some("rank"),
        ..SrunBinding::default()
    })
    .unwrap_err()
    .contains("not modelled"));
}

#[test]
fn an_uneven_node_is_not_modelled() {
    let mut b = lama_engine::MachineBuilder::new("uneven");
    for os in 0..3 {
        b.pu(os, true);
    }
    b.object(Level::Core, Some(0), &[0, 1]);
    b.object(Level::Core, Some(1), &[2]);
    let e = place(&b.build().unwrap(), &ask(1)).unwrap_err();
    assert!(e.contains("not modelled"), "{e}");
}

//! Memory binding of the test process itself: its own integration binary, so no other test
//! shares the process whose memory policy changes. The policy is per thread (a task that execs
//! has one); the kernel's view is read back from `/proc/thread-self/numa_maps`, which shows the
//! thread's policy on every mapping without one of its own.

use lama_engine::{CpuList, Membind};
use spank_lama::bind::set_membind;

/// The policy `/proc/thread-self/numa_maps` shows on its first line (`default`, `bind:0`, ...).
fn policy() -> String {
    let maps = std::fs::read_to_string("/proc/thread-self/numa_maps").expect("a NUMA kernel");
    maps.lines()
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .unwrap_or_default()
        .to_string()
}

#[test]
fn local_and_preferred_are_what_the_kernel_reports() {
    assert_eq!(policy(), "default");
    assert_eq!(
        set_membind(Membind::Local, &CpuList::from_cpus([0])).unwrap(),
        CpuList::from_cpus([0])
    );
    assert_eq!(policy(), "bind:0");
    set_membind(Membind::Preferred, &CpuList::from_cpus([0])).unwrap();
    assert_eq!(policy(), "prefer:0");
    // `none` leaves the policy as it is; an empty node set or a node the machine lacks is
    // refused without changing it.
    set_membind(Membind::None, &CpuList::from_cpus([0])).unwrap();
    assert_eq!(policy(), "prefer:0");
    assert!(set_membind(Membind::Local, &CpuList::new()).is_err());
    let e = set_membind(Membind::Local, &CpuList::from_cpus([1000])).unwrap_err();
    assert!(
        e.starts_with("set_mempolicy(local, nodes 1000) failed"),
        "{e}"
    );
    assert_eq!(policy(), "prefer:0");
}

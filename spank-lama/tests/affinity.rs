//! Binding the test process itself: its own integration binary, so no other test shares the
//! process whose affinity changes.

use lama_engine::CpuList;
use spank_lama::bind::{get_affinity, set_affinity};

#[test]
fn set_then_get_affinity() {
    let before = get_affinity().unwrap();
    assert!(!before.is_empty());
    let first = CpuList::from_cpus([before.cpus()[0]]);
    set_affinity(&first).unwrap();
    assert_eq!(get_affinity().unwrap(), first);
    set_affinity(&before).unwrap();
    assert_eq!(get_affinity().unwrap(), before);
    assert!(set_affinity(&CpuList::new()).is_err());
    // A CPU this machine does not have is refused by the kernel.
    assert!(set_affinity(&CpuList::from_cpus([100_000])).is_err());
    assert_eq!(get_affinity().unwrap(), before);
}

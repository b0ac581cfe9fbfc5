//! Slurm's host lists from the job's environment: counted, indexed and searched without
//! being expanded.
#![no_main]
use lama_slurm::hostlist::{contains, count, nth};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let (expr, probe) = text.split_once('\n').unwrap_or((text, "node1"));
    if let Ok(n) = count(expr) {
        for i in [0, 1, n / 2, n.saturating_sub(1), n] {
            let name = nth(expr, i).unwrap();
            assert_eq!(name.is_some(), i < n, "{expr:?}[{i}]");
            if let Some(name) = name {
                assert_eq!(contains(expr, &name), Ok(true), "{expr:?} {name}");
            }
        }
    }
    let _ = contains(expr, probe);
});

//! The plan file: srun's whole parse, and a node's, from a text and read in pieces.
#![no_main]
use lama_planfile::{max_plan_bytes, read_for_node, NodeQuery, PlanFile};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let query = NodeQuery {
        node: "node1",
        cpu_bound: 64,
        total: Some(3),
        most_here: 2,
        wanted: &[0, 2],
    };
    if let Ok(text) = std::str::from_utf8(data) {
        let whole = PlanFile::parse(text);
        if let Ok(plan) = &whole {
            // What srun accepts, written back, reads the same.
            assert_eq!(PlanFile::parse(&plan.to_string()).as_ref(), Ok(plan));
        }
        let here = PlanFile::parse_for_node(text, &query);
        if let Ok(p) = &here {
            assert!(p.here.len() <= 2 && p.total == 3);
            assert!(p
                .here
                .iter()
                .all(|(_, r)| r.cpus.cpus().iter().all(|&c| c < 64)));
        }
    }
    let _ = read_for_node(data, &query, max_plan_bytes(3));
});

//! The topology cache's machine text, which steps read without hwloc.
#![no_main]
use lama_engine::Machine;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(m) = Machine::from_text("fuzz", text) {
        let again = Machine::from_text("fuzz", &m.to_text()).unwrap();
        assert_eq!(again.to_text(), m.to_text());
    }
});

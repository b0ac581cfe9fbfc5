//! hwloc XML as `lama map --topology FILE` and the site's topology files are read: LAMA's own
//! checks of the text (what it says of a file hwloc refuses), hwloc's parse, and the
//! conversion of what hwloc accepts into a machine, which must survive its own text form (the
//! plugin's topology cache).
#![no_main]
use lama_engine::Machine;
use libfuzzer_sys::fuzz_target;
use std::path::Path;

fuzz_target!(init: {
    // libfuzzer-sys's hook aborts on every panic, even one lama_hwloc catches (hwlocality's
    // "unreachable" on objects a malformed file gives): the default hook only prints, and a
    // panic that escapes still fails the target.
    let _ = std::panic::take_hook();
}, |data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let said = lama_hwloc::xml_problem(text);
    assert!(!said.is_empty());
    if let Ok(m) = lama_hwloc::load_xml_text(text, Path::new("fuzz.xml"), lama_hwloc::Io::Keep) {
        let again = Machine::from_text("fuzz", &m.to_text()).unwrap();
        assert_eq!(again.to_text(), m.to_text());
    }
});

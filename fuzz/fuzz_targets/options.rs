//! The option strings (--lama-map, -bind, -mppr, -order, -membind) and CPU lists.
#![no_main]
use lama_engine::{Bind, CpuList, Layout, Membind, Mppr, Order};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(layout) = Layout::parse(text) {
        assert_eq!(Layout::parse(&layout.to_string()).ok(), Some(layout));
    }
    let _ = Bind::parse(text);
    let _ = Mppr::parse(text);
    let _ = Order::parse(text);
    let _ = Membind::parse(text);
    if let Ok(ranges) = CpuList::ranges(text) {
        // Expanded only where it is small, as the plan parser does.
        if ranges
            .iter()
            .map(|&(a, b)| u64::from(b - a) + 1)
            .sum::<u64>()
            <= 1 << 16
        {
            let list = CpuList::parse(text).unwrap();
            assert_eq!(CpuList::parse(&list.to_string()).unwrap(), list);
        }
    }
});

//! The option strings (--lama-map, -bind, -mppr, -order, -membind, and their GPU forms: a
//! layout led by 'g', 1g, k:g in the MPPR) and CPU lists. Every refusal is short: a message
//! never echoes more than a bounded part of its input.
#![no_main]
use lama_engine::{
    is_gpu_bind, parse_gpu_layout, split_gpu_mppr, Bind, CpuList, Layout, Membind, Mppr, Order,
};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(layout) = Layout::parse(text) {
        assert_eq!(Layout::parse(&layout.to_string()).ok(), Some(layout));
    }
    let short = |e: String| assert!(e.len() <= 4096, "a message of {} bytes", e.len());
    if let Err(e) = Bind::parse(text) {
        short(e.to_string());
    }
    if let Err(e) = Mppr::parse(text) {
        short(e.to_string());
    }
    let _ = Order::parse(text);
    let _ = Membind::parse(text);
    let _ = is_gpu_bind(text);
    if let Some(Err(e)) = parse_gpu_layout(text) {
        short(e.to_string());
    }
    match split_gpu_mppr(text) {
        Ok((_, Some(rest))) => {
            let _ = Mppr::parse(&rest);
        }
        Ok(_) => {}
        Err(e) => short(e.to_string()),
    }
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

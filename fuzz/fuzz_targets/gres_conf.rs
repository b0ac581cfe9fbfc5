//! gres.conf, as slurmstepd reads it for a node's GPU numbering (Include lines read from a
//! second text, itself included at most as the reader allows).
#![no_main]
use lama_slurm::gres_conf::gpu_numbering;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let (main, included) = text.split_once("\n--\n").unwrap_or((text, ""));
    let included = included.to_string();
    let _ = gpu_numbering(main, "node1", &|_| Ok(included.clone()));
});

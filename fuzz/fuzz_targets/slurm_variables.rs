//! Slurm's variables that the plugin and lama exec read: GPU lists, GPUs per task, GPU
//! binding, task counts per node and the launchers' rank variables.
#![no_main]
use lama_slurm::gpu::{gpus_per_task, parse_indexes, SlurmGpuBind};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(list) = parse_indexes(text) {
        let mut seen = list.clone();
        seen.sort_unstable();
        seen.dedup();
        assert_eq!(seen.len(), list.len(), "duplicates accepted: {text:?}");
    }
    let _ = gpus_per_task(Some(text), Some(text));
    let _ = gpus_per_task(None, Some(text));
    let _ = SlurmGpuBind::read(Some(text), Some(text)).own_gpus_per_task();
    let _ = lama_slurm::distribution::parse_counts(text);
    let _ = lama_slurm::distribution::distinct_cpus_per_node(text);
    // A launcher's environment: KEY=VALUE lines.
    let env: Vec<(&str, &str)> = text.lines().filter_map(|l| l.split_once('=')).collect();
    let _ = lama_slurm::launcher::find(|k| {
        env.iter()
            .rev()
            .find(|(n, _)| *n == k)
            .map(|(_, v)| v.to_string())
    });
});

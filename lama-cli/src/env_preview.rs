//! `lama map --env`: each task's variables as the plugin sets them.

use lama_engine::{Bind, CpuUnit, Membind, Placement};
use lama_slurm::task_env;

/// What `--env` shows: how the plugin would set each task's variables.
#[derive(Debug, Clone, Copy)]
pub(crate) struct EnvPreview {
    pub(crate) membind: Membind,
    /// With --omp: the CPUs per task and what Slurm counts as a CPU.
    pub(crate) omp: Option<(u32, CpuUnit)>,
}

impl EnvPreview {
    /// Rank `r`'s variables, as the plugin sets them in task_init (`OMP_NUM_THREADS` last, set
    /// by the plugin only when the job does not set it).
    pub(crate) fn of(&self, p: &Placement<'_>, r: usize) -> Vec<(&'static str, String)> {
        let info = p.info(r);
        let m = p.nodes()[info.node as usize];
        let req = p.request();
        let bound = req.bind != Bind::None;
        let labels = task_env::Labels::new(&req.layout, req.bind, &req.mppr, req.order);
        task_env::placed_variables(
            m,
            &task_env::Asked {
                labels: &labels,
                bound,
                membind: self.membind,
                omp: self.omp,
            },
            &info.cpus,
            (info.pu_os, info.pu_logical),
            &info.bound_logical,
        )
    }

    /// The `--env` section of the text: the variables every task shares once, then each
    /// rank's own (those of `ranks` only, on node `only` only).
    pub(crate) fn text(
        &self,
        p: &Placement<'_>,
        ranks: Option<(u32, u32)>,
        only: Option<u32>,
    ) -> String {
        let shared = [
            "LAMA_LAYOUT",
            "LAMA_BIND",
            "LAMA_MPPR",
            "LAMA_ORDER",
            "OMP_PROC_BIND",
        ];
        let mut out = String::from(
            "\nenvironment of each task, as the plugin sets it in task_init (OMP_NUM_THREADS only \
             when the job does not set it):\n",
        );
        if p.is_empty() {
            return out;
        }
        let first = self.of(p, 0);
        let common: Vec<String> = first
            .iter()
            .filter(|(k, _)| shared.contains(k))
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        out += &format!("  every task: {}\n", common.join(" "));
        let (from, to) = ranks.unwrap_or((0, u32::MAX));
        for r in (from as usize)..p.len().min(to as usize + 1) {
            if only.is_some_and(|n| p.info(r).node != n) {
                continue;
            }
            let own: Vec<String> = self
                .of(p, r)
                .into_iter()
                .filter(|(k, _)| !shared.contains(k))
                .map(|(k, v)| format!("{k}={v}"))
                .collect();
            out += &format!("  rank {r:>4}: {}\n", own.join(" "));
        }
        out
    }
}

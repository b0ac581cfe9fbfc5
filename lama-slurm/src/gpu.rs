//! GPUs the way Slurm and the GPU runtimes name them, for the plugin and `lama map`: the
//! request of a `g` layout from the option strings, Slurm's GPU indexes of a step, and the
//! variables each task gets (docs/devices.md has the table).
//!
//! Slurm numbers a node's GPUs 0, 1, ... in the order of its GPU records; with `AutoDetect`
//! or `File=/dev/nvidia[0-N]` on a node whose device minors follow the PCI bus (NVIDIA's
//! default) that is PCI bus order, the order in which the topology numbers its GPUs. LAMA
//! takes Slurm's GPU `k` to be the topology's `gpu<k>`.

use lama_engine::{
    is_gpu_bind, parse_gpu_layout, split_gpu_mppr, Bind, Device, Diagnostic, GpuRequest, Mppr,
    Order,
};

/// The request of a `g` layout (`None` for any other layout). `1g` and `k:g` without a `g`
/// layout are refused: they mean nothing without GPUs to place by.
pub fn request(
    map: &str,
    bind: Option<&str>,
    mppr: Option<&str>,
    order: Order,
    gpus_per_task: u32,
    oversubscribe: bool,
) -> Result<Option<GpuRequest>, String> {
    let show = |d: Diagnostic| crate::familiar::explain(d).to_string();
    let (per_gpu, cpu_mppr) = match mppr {
        Some(m) => split_gpu_mppr(m).map_err(show)?,
        None => (None, None),
    };
    let Some(layout) = parse_gpu_layout(map) else {
        if bind.is_some_and(is_gpu_bind) {
            return Err(format!(
                "binding '{}' binds to the CPUs near each task's GPU, and layout '{map}' does not \
                 place by GPU: lead it with 'g' (g{map})",
                bind.unwrap_or_default()
            ));
        }
        if per_gpu.is_some() {
            return Err(format!(
                "the MPPR limit k:g counts tasks per GPU, and layout '{map}' does not place by \
                 GPU: lead it with 'g' (g{map})"
            ));
        }
        return Ok(None);
    };
    let layout = layout.map_err(show)?;
    let bind = match bind {
        None => Some(Bind::default()),
        Some(b) if is_gpu_bind(b) => None,
        Some(b) => Some(Bind::parse(b).map_err(show)?),
    };
    let mppr = match cpu_mppr {
        Some(m) => Mppr::parse(&m).map_err(show)?,
        None => Mppr::none(),
    };
    Ok(Some(GpuRequest {
        layout,
        bind,
        mppr,
        per_gpu,
        gpus_per_task: gpus_per_task.max(1),
        order,
        oversubscribe,
    }))
}

/// Slurm's GPU indexes (`SLURM_STEP_GPUS`, `0,2,5`), each once, in the order given.
pub fn parse_indexes(text: &str) -> Result<Vec<u32>, String> {
    let mut out = Vec::new();
    for item in text.split(',') {
        let n: u32 = item.trim().parse().map_err(|_| {
            format!("'{item}' in the GPU list '{text}' is not a GPU index (0, 1, ...)")
        })?;
        if out.contains(&n) {
            return Err(format!("GPU {n} appears twice in the GPU list '{text}'"));
        }
        out.push(n);
    }
    Ok(out)
}

/// The topology's GPUs for Slurm's indexes, or which index the topology lacks.
pub fn step_gpus<'m>(gpus: &[&'m Device], indexes: &[u32]) -> Result<Vec<&'m Device>, String> {
    indexes
        .iter()
        .map(|&k| {
            gpus.iter().copied().find(|d| d.index == k).ok_or_else(|| {
                format!(
                    "Slurm's GPU {k} is not in this node's topology, which has {} GPU(s){}; \
                     Slurm's GPU records and the topology disagree",
                    gpus.len(),
                    if gpus.is_empty() {
                        " (no I/O objects: a topology file without PCI devices)"
                    } else {
                        ""
                    }
                )
            })
        })
        .collect()
}

/// The variable that lists visible GPUs for a vendor's runtime.
pub fn visible_variable(vendor: &str) -> &'static str {
    match vendor {
        "AMD" => "ROCR_VISIBLE_DEVICES",
        "Intel" => "ZE_AFFINITY_MASK",
        _ => "CUDA_VISIBLE_DEVICES",
    }
}

/// A task's GPU variables. `tokens` is Slurm's value of the vendor variable for the whole
/// step, one token per step GPU (local numbers under `ConstrainDevices`, else Slurm's
/// indexes), `own` the task's GPUs as positions in it, `slurm` Slurm's indexes of the step's
/// GPUs. By default every GPU of the step stays visible, the task's own first (CUDA IPC and
/// NCCL's peer detection keep working); `strict` leaves only its own.
pub fn task_variables(
    vendor: &str,
    tokens: Option<&[String]>,
    slurm: &[u32],
    own: &[usize],
    strict: bool,
) -> Vec<(&'static str, String)> {
    let order: Vec<usize> = own
        .iter()
        .copied()
        .chain((0..slurm.len()).filter(|i| !strict && !own.contains(i)))
        .collect();
    let join =
        |f: &dyn Fn(usize) -> String| order.iter().map(|&i| f(i)).collect::<Vec<_>>().join(",");
    let mut out = vec![(
        "LAMA_GPUS",
        own.iter()
            .map(|&i| slurm[i].to_string())
            .collect::<Vec<_>>()
            .join(","),
    )];
    if let Some(tokens) = tokens.filter(|t| t.len() == slurm.len()) {
        let visible = join(&|i| tokens[i].clone());
        out.push((visible_variable(vendor), visible.clone()));
        out.push(("GPU_DEVICE_ORDINAL", visible));
        if vendor == "NVIDIA" {
            out.push(("CUDA_DEVICE_ORDER", "PCI_BUS_ID".to_string()));
        }
    }
    out
}

/// A task's network variables for its NIC: `LAMA_NICS` always; for an InfiniBand or RoCE
/// card (`mlx*`), UCX's and NCCL's device selection.
pub fn nic_variables(nic: &Device) -> Vec<(&'static str, String)> {
    let name = lama_engine::nic_name(nic);
    if name.is_empty() {
        return Vec::new();
    }
    let mut out = vec![("LAMA_NICS", name.to_string())];
    if name.starts_with("mlx") {
        out.push(("UCX_NET_DEVICES", format!("{name}:1")));
        out.push(("NCCL_IB_HCA", name.to_string()));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests() {
        let r = request(
            "gcsbnh",
            Some("1g"),
            Some("2:g,1:c"),
            Order::Natural,
            1,
            false,
        )
        .unwrap()
        .unwrap();
        assert_eq!(
            (r.bind, r.per_gpu, r.mppr.to_string()),
            (None, Some(2), "1:c".into())
        );
        assert_eq!(
            request("scbnh", None, None, Order::Natural, 1, false),
            Ok(None)
        );
        let e = request("scbnh", Some("1g"), None, Order::Natural, 1, false).unwrap_err();
        assert!(e.contains("lead it with 'g' (gscbnh)"), "{e}");
        let e = request("csbnh", None, Some("1:g"), Order::Natural, 1, false).unwrap_err();
        assert!(e.contains("counts tasks per GPU"), "{e}");
        assert!(request("gx", None, None, Order::Natural, 1, false).is_err());
    }

    #[test]
    fn indexes() {
        assert_eq!(parse_indexes("0,2,5"), Ok(vec![0, 2, 5]));
        assert!(parse_indexes("0,0").unwrap_err().contains("twice"));
        assert!(parse_indexes("a").unwrap_err().contains("not a GPU index"));
    }

    #[test]
    fn variables_put_the_task_gpu_first_or_alone() {
        let tokens: Vec<String> = ["0", "1", "2"].map(String::from).to_vec();
        let shared = task_variables("NVIDIA", Some(&tokens), &[4, 5, 7], &[1], false);
        assert_eq!(
            shared,
            vec![
                ("LAMA_GPUS", "5".to_string()),
                ("CUDA_VISIBLE_DEVICES", "1,0,2".to_string()),
                ("GPU_DEVICE_ORDINAL", "1,0,2".to_string()),
                ("CUDA_DEVICE_ORDER", "PCI_BUS_ID".to_string()),
            ]
        );
        let strict = task_variables("AMD", Some(&tokens), &[4, 5, 7], &[2], true);
        assert_eq!(strict[1], ("ROCR_VISIBLE_DEVICES", "2".to_string()));
        assert_eq!(strict.len(), 3, "no CUDA_DEVICE_ORDER for AMD");
        // Without Slurm's own list (or a list of another length) only LAMA_GPUS is set.
        assert_eq!(task_variables("NVIDIA", None, &[4], &[0], false).len(), 1);
        assert_eq!(visible_variable("Intel"), "ZE_AFFINITY_MASK");
    }
}

//! `lama map --json`: one schema for every layout (a layout led by 'g' fills its GPU fields).

use crate::env_preview::EnvPreview;
use lama_engine::{numa_nodes, render, Machine, Membind, Placement};

#[derive(serde::Serialize)]
pub(crate) struct JsonProcess {
    pub(crate) rank: u32,
    pub(crate) node: u32,
    pub(crate) pu: u32,
    pub(crate) cpus: Vec<u32>,
    /// NUMA nodes of the binding, with --membind only.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) mems: Option<Vec<u32>>,
    /// The variables the plugin sets in the task, with --env only (and in a layout led by
    /// 'g', always: the GPU and NIC variables).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) env: Option<std::collections::BTreeMap<&'static str, String>>,
    /// In a layout led by 'g': the task's GPUs as Slurm numbers them, their PCI bus ids and
    /// the task's NIC.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) gpus: Option<Vec<u32>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) gpu_bus_ids: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) nic: Option<String>,
    /// In a layout led by 'g' whose tasks got different bindings (each group of GPUs its
    /// share): the task's; else the request's `bind` is every task's.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) bind: Option<String>,
}

/// `lama map --json`, one schema for every layout (a layout led by 'g' fills its GPU fields).
#[derive(serde::Serialize)]
pub(crate) struct JsonPlacement {
    pub(crate) processes: Vec<JsonProcess>,
    /// The request as placed (the binding is the one used, after -c widening).
    pub(crate) request: JsonRequest,
    /// Each node: its index, its name (--node-names, else the topology's), its PUs.
    pub(crate) nodes: Vec<JsonNode>,
    /// The nodes' GPUs and NICs, when their topologies have any.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) devices: Vec<JsonDevice>,
    /// How many tasks each node gets.
    pub(crate) tasks_per_node: Vec<u32>,
    /// What the placement says besides the ranks (the default binding's fallback, GPU notes),
    /// as printed after the table.
    pub(crate) notes: Vec<String>,
}

#[derive(serde::Serialize)]
pub(crate) struct JsonRequest {
    pub(crate) layout: String,
    pub(crate) bind: String,
    pub(crate) mppr: String,
    pub(crate) order: String,
    pub(crate) np: u32,
    pub(crate) membind: String,
    /// In a layout led by 'g': how the GPUs are given to the tasks.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) gpu: Option<JsonGpuRequest>,
}

/// The GPU part of a request (a layout led by 'g').
#[derive(serde::Serialize)]
pub(crate) struct JsonGpuRequest {
    pub(crate) gpus_per_task: u32,
    /// `k:g`: at most this many tasks per GPU.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) per_gpu: Option<u32>,
    /// Slurm binds the GPUs to the tasks (per_task); else LAMA chooses them.
    pub(crate) slurm_binds: bool,
    /// Each task sees only its own GPUs.
    pub(crate) isolate: bool,
}

#[derive(serde::Serialize)]
pub(crate) struct JsonNode {
    index: u32,
    name: String,
    topology: String,
    pus: usize,
    available: Vec<u32>,
}

impl JsonNode {
    /// Node `n` (`m`), named from `names` when given.
    pub(crate) fn of(n: usize, m: &Machine, names: Option<&[String]>) -> JsonNode {
        JsonNode {
            index: n as u32,
            name: names
                .and_then(|v| v.get(n).cloned())
                .unwrap_or_else(|| m.name().to_string()),
            topology: m.name().to_string(),
            pus: m.pus().len(),
            available: m.available().cpus().to_vec(),
        }
    }
}

/// A device of a node, with the ranks bound inside its locality.
#[derive(serde::Serialize)]
pub(crate) struct JsonDevice {
    node: u32,
    kind: &'static str,
    index: u32,
    vendor: String,
    bus_id: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    uuid: Option<String>,
    names: Vec<String>,
    near: String,
    cpus: Vec<u32>,
    ranks: Vec<u32>,
}

impl JsonDevice {
    /// Device `d` of node `n` (`m`), with the ranks bound inside its locality.
    pub(crate) fn of(n: usize, m: &Machine, d: &lama_engine::Device, ranks: Vec<u32>) -> Self {
        JsonDevice {
            node: n as u32,
            kind: d.kind.name(),
            index: d.index,
            vendor: d.vendor.clone(),
            bus_id: d.bus_id.clone(),
            uuid: d.uuid.clone(),
            names: d.names.clone(),
            near: d.near.clone(),
            cpus: render::device_cpus(m, d).cpus().to_vec(),
            ranks,
        }
    }
}

pub(crate) fn json(
    p: &Placement<'_>,
    membind: Membind,
    names: Option<&[String]>,
    env: Option<EnvPreview>,
    notes: Vec<String>,
) -> String {
    let processes = (0..p.len())
        .map(|r| {
            let info = p.info(r);
            let mems = (membind != Membind::None).then(|| {
                numa_nodes(p.nodes()[info.node as usize], &info.bound_logical)
                    .cpus()
                    .to_vec()
            });
            JsonProcess {
                rank: info.rank,
                node: info.node,
                pu: info.pu_os,
                cpus: info.cpus.cpus().to_vec(),
                mems,
                env: env.map(|e| e.of(p, r).into_iter().collect()),
                gpus: None,
                gpu_bus_ids: None,
                nic: None,
                bind: None,
            }
        })
        .collect();
    let devices = p
        .nodes()
        .iter()
        .enumerate()
        .flat_map(|(n, m)| {
            m.devices()
                .iter()
                .map(move |d| JsonDevice::of(n, m, d, render::ranks_near(p, n as u32, d)))
        })
        .collect();
    let req = p.request();
    let request = JsonRequest {
        layout: req.layout.to_string(),
        bind: req.bind.to_string(),
        mppr: req.mppr.to_string(),
        order: req.order.to_string(),
        np: req.np,
        membind: membind.to_string(),
        gpu: None,
    };
    let nodes = p
        .nodes()
        .iter()
        .enumerate()
        .map(|(n, m)| JsonNode::of(n, m, names))
        .collect();
    let mut s = serde_json::to_string(&JsonPlacement {
        processes,
        request,
        nodes,
        devices,
        tasks_per_node: p.tasks_per_node(),
        notes,
    })
    .unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}"));
    s.push('\n');
    s
}

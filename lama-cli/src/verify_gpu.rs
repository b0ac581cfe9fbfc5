//! `lama verify`'s GPU checks: which of the node's cards a task may open, and which card its
//! runtime opens as its device 0. The plugin names the cards it placed the task beside
//! (`LAMA_GPU_BUS_IDS`, by PCI bus id, the task's own first); each card's device file is
//! found as the plugin finds it (NVIDIA's driver file, else DRM's render node) and judged by
//! the devices controller without opening it ([`lama_hwloc::device_access`]).

use std::path::Path;

/// What a task's node says of its GPU cards; the real files in use, a table in tests.
pub trait CardFiles {
    /// A text file's contents.
    fn read(&self, path: &Path) -> Option<String>;
    /// The names in a directory.
    fn list(&self, dir: &Path) -> Vec<String>;
    /// Whether the task may open a device file (its devices cgroup and its mode).
    fn may_open(&self, path: &Path) -> bool;
}

/// This node's files, as the task sees them.
pub struct RealCards;

impl CardFiles for RealCards {
    fn read(&self, path: &Path) -> Option<String> {
        // Driver and sysfs files of a few hundred bytes; more is not one of them.
        let text = std::fs::read(path).ok()?;
        (text.len() <= 64 * 1024).then(|| String::from_utf8_lossy(&text).into_owned())
    }
    fn list(&self, dir: &Path) -> Vec<String> {
        std::fs::read_dir(dir)
            .map(|d| {
                d.flatten()
                    .filter_map(|e| e.file_name().to_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default()
    }
    fn may_open(&self, path: &Path) -> bool {
        lama_hwloc::device_access(path).unwrap_or(false)
    }
}

/// One of the task's cards as the task sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Card {
    /// Its PCI bus id, lower case.
    pub bus: String,
    /// Its device file, where one is found.
    pub file: Option<String>,
    /// Whether the task may open it.
    pub open: bool,
}

/// What was read of the task's GPU cards.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CardsSeen {
    /// The task's cards, in `LAMA_GPU_BUS_IDS` order.
    pub cards: Vec<Card>,
    /// The bus id of the card CUDA opens as device 0, where that can be told (NVIDIA, with
    /// `CUDA_VISIBLE_DEVICES` naming a UUID, or a number under `CUDA_DEVICE_ORDER=PCI_BUS_ID`);
    /// `Err` where the variable names no card the task may open.
    pub cuda_first: Option<Result<String, String>>,
}

const NVIDIA_GPUS: &str = "/proc/driver/nvidia/gpus";

/// NVIDIA's driver file of the card at `bus`.
fn information(fs: &dyn CardFiles, bus: &str) -> Option<String> {
    fs.read(&lama_slurm::gpu::nvidia_information(bus))
}

/// The device file of the card at `bus`, found as the plugin finds it: `/dev/nvidiaN` (N its
/// Device Minor), else its first DRM render node ([`lama_slurm::gpu::card_device_files`]).
pub fn device_file(fs: &dyn CardFiles, bus: &str) -> Option<String> {
    let missing = || std::io::Error::from(std::io::ErrorKind::NotFound);
    lama_slurm::gpu::card_device_files(bus, |p| fs.read(p).ok_or_else(missing), |p| Ok(fs.list(p)))
        .ok()?
        .into_iter()
        .next()
}

/// The task's cards (`buses`, from `LAMA_GPU_BUS_IDS`) and, for NVIDIA, the card CUDA opens
/// first by the task's `CUDA_VISIBLE_DEVICES` and `CUDA_DEVICE_ORDER`.
pub fn observe(
    fs: &dyn CardFiles,
    buses: &[String],
    cuda_visible: Option<&str>,
    cuda_order: Option<&str>,
) -> CardsSeen {
    let cards = buses
        .iter()
        .map(|b| {
            let bus = b.to_ascii_lowercase();
            let file = device_file(fs, &bus);
            let open = file.as_deref().is_some_and(|f| fs.may_open(Path::new(f)));
            Card { bus, file, open }
        })
        .collect();
    let cuda_first = cuda_visible.and_then(|v| cuda_first_card(fs, v, cuda_order));
    CardsSeen { cards, cuda_first }
}

/// The card CUDA opens as device 0: the first token of `CUDA_VISIBLE_DEVICES`, a UUID (the
/// card whose driver file says it) or a number `k` (under `CUDA_DEVICE_ORDER=PCI_BUS_ID`, the
/// `k`-th by bus of the cards the task may open; in CUDA's default order it cannot be told).
fn cuda_first_card(
    fs: &dyn CardFiles,
    visible: &str,
    order: Option<&str>,
) -> Option<Result<String, String>> {
    let first = visible.split(',').next()?.trim();
    let mut node: Vec<String> = fs
        .list(Path::new(NVIDIA_GPUS))
        .into_iter()
        .filter(|b| lama_slurm::gpu::is_bus_id(b))
        .map(|b| b.to_ascii_lowercase())
        .collect();
    node.sort();
    node.dedup();
    if node.is_empty() {
        return None;
    }
    if first.starts_with("GPU-") {
        let found = node.into_iter().find(|b| {
            information(fs, b)
                .is_some_and(|t| lama_slurm::gpu::information_value(&t, "GPU UUID") == Some(first))
        });
        return Some(found.ok_or_else(|| {
            format!("CUDA_VISIBLE_DEVICES names {first}, which no card of this node has")
        }));
    }
    let k: usize = first.parse().ok()?;
    if order != Some("PCI_BUS_ID") {
        return None;
    }
    let open: Vec<String> = node
        .into_iter()
        .filter(|b| device_file(fs, b).is_some_and(|f| fs.may_open(Path::new(&f))))
        .collect();
    Some(open.get(k).cloned().ok_or_else(|| {
        format!(
            "CUDA_VISIBLE_DEVICES names device {k} first, and the task may open {} card(s)",
            open.len()
        )
    }))
}

/// What differs between the task's cards (`gpus`: Slurm's numbers, as `LAMA_GPUS` names them)
/// and what it may open.
pub fn differences(gpus: &[u32], seen: &CardsSeen) -> Vec<String> {
    let mut diffs = Vec::new();
    for (i, card) in seen.cards.iter().enumerate() {
        let gpu = gpus.get(i).map_or(String::new(), |g| format!("GPU {g}'s "));
        match (&card.file, card.open) {
            (None, _) => diffs.push(format!(
                "its {gpu}card {} has no device file on this node (no NVIDIA driver file, no \
                 DRM render node)",
                card.bus
            )),
            (Some(file), false) => diffs.push(format!(
                "the task may not open its {gpu}card {} ({file})",
                card.bus
            )),
            _ => {}
        }
    }
    match (&seen.cuda_first, seen.cards.first()) {
        (Some(Err(why)), _) => diffs.push(why.clone()),
        (Some(Ok(bus)), Some(own)) if *bus != own.bus => diffs.push(format!(
            "CUDA opens the card {bus} as its device 0, not the task's card {}",
            own.bus
        )),
        _ => {}
    }
    diffs
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::{BTreeMap, BTreeSet};

    /// A node written by hand: four NVIDIA cards whose minors are not in bus order (minor 0
    /// is the card at 84), of which the task may open `open`.
    #[derive(Default)]
    struct Node {
        texts: BTreeMap<String, String>,
        dirs: BTreeMap<String, Vec<String>>,
        open: BTreeSet<String>,
    }

    impl CardFiles for Node {
        fn read(&self, p: &Path) -> Option<String> {
            self.texts.get(p.to_str()?).cloned()
        }
        fn list(&self, p: &Path) -> Vec<String> {
            self.dirs
                .get(p.to_str().unwrap())
                .cloned()
                .unwrap_or_default()
        }
        fn may_open(&self, p: &Path) -> bool {
            self.open.contains(p.to_str().unwrap())
        }
    }

    const CARDS: [&str; 4] = [
        "0000:84:00.0",
        "0000:04:00.0",
        "0000:85:00.0",
        "0000:05:00.0",
    ];

    fn nvidia(open: &[u32]) -> Node {
        let mut n = Node::default();
        for (minor, bus) in CARDS.iter().enumerate() {
            n.texts.insert(
                format!("{NVIDIA_GPUS}/{bus}/information"),
                format!("Model: \t A100\nDevice Minor: \t {minor}\nGPU UUID: \t GPU-{minor}\n"),
            );
        }
        n.dirs
            .insert(NVIDIA_GPUS.into(), CARDS.map(String::from).to_vec());
        n.open = open.iter().map(|m| format!("/dev/nvidia{m}")).collect();
        n
    }

    fn buses(b: &[&str]) -> Vec<String> {
        b.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn the_task_opens_its_own_card_first() {
        // Confined to minors 1 and 3 (cards 04 and 05); the task's card is 05 (minor 3), CUDA
        // numbers the open cards by bus: 04 is its 0, 05 its 1.
        let node = nvidia(&[1, 3]);
        let own = buses(&["0000:05:00.0"]);
        let seen = observe(&node, &own, Some("1,0"), Some("PCI_BUS_ID"));
        assert_eq!(
            seen.cards,
            [Card {
                bus: "0000:05:00.0".into(),
                file: Some("/dev/nvidia3".into()),
                open: true
            }]
        );
        assert_eq!(seen.cuda_first, Some(Ok("0000:05:00.0".into())));
        assert!(differences(&[1], &seen).is_empty());
        // Slurm's number left as it was ("0"): CUDA would open the card at 04.
        let seen = observe(&node, &own, Some("0,1"), Some("PCI_BUS_ID"));
        assert_eq!(
            differences(&[1], &seen),
            ["CUDA opens the card 0000:04:00.0 as its device 0, not the task's card 0000:05:00.0"]
        );
        // In CUDA's default order the first card cannot be told: nothing is claimed.
        assert_eq!(observe(&node, &own, Some("0"), None).cuda_first, None);
        // By UUID: minor 3's.
        let seen = observe(&node, &own, Some("GPU-3,GPU-1"), None);
        assert_eq!(seen.cuda_first, Some(Ok("0000:05:00.0".into())));
        let seen = observe(&node, &own, Some("GPU-9"), None);
        assert_eq!(
            differences(&[1], &seen),
            ["CUDA_VISIBLE_DEVICES names GPU-9, which no card of this node has"]
        );
    }

    #[test]
    fn a_card_the_task_may_not_open_is_named() {
        // The task's cards 84 (minor 0) and 04 (minor 1); it may open minor 1 only.
        let node = nvidia(&[1]);
        let seen = observe(&node, &buses(&["0000:84:00.0", "0000:04:00.0"]), None, None);
        assert_eq!(
            differences(&[2, 0], &seen),
            ["the task may not open its GPU 2's card 0000:84:00.0 (/dev/nvidia0)"]
        );
        // A number past the cards it may open.
        let seen = observe(
            &node,
            &buses(&["0000:04:00.0"]),
            Some("1"),
            Some("PCI_BUS_ID"),
        );
        assert_eq!(
            differences(&[0], &seen),
            ["CUDA_VISIBLE_DEVICES names device 1 first, and the task may open 1 card(s)"]
        );
    }

    #[test]
    fn render_nodes_for_other_vendors() {
        let mut node = Node::default();
        node.dirs.insert(
            "/sys/bus/pci/devices/0000:c1:00.0/drm".into(),
            buses(&["card1", "renderD129"]),
        );
        node.open.insert("/dev/dri/renderD129".into());
        let seen = observe(&node, &buses(&["0000:C1:00.0", "0000:c2:00.0"]), None, None);
        assert_eq!(seen.cards[0].file.as_deref(), Some("/dev/dri/renderD129"));
        assert!(seen.cards[0].open);
        assert_eq!(
            differences(&[0, 1], &seen),
            [
                "its GPU 1's card 0000:c2:00.0 has no device file on this node (no NVIDIA driver \
              file, no DRM render node)"
            ]
        );
    }
}

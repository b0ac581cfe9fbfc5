//! Which card each of a step's GPUs is, by its device file: Slurm numbers a node's GPUs by
//! their files in gres.conf ([`lama_slurm::gres_conf`]), and a file names its card through the
//! kernel, whatever the file's name or its place in gres.conf.
//!
//! - NVIDIA (character major 195, the driver's own): `/proc/driver/nvidia/gpus/<bus id>/information`
//!   holds each card's `Device Minor`.
//! - Any other driver that registers its devices (DRM's `/dev/dri/renderD128` and
//!   `/dev/dri/card0`, AMD and Intel): `/sys/dev/char/<major>:<minor>/device` links to its
//!   PCI device, whose name is the bus id.
//!
//! With detection (`AutoDetect=`) Slurm numbers the GPUs in PCI bus order and no file is
//! read. A file that names no card refuses the step ([`step_cards`]): the plugin never guesses
//! which card a GPU is.

use lama_slurm::gpu::{information_value, is_bus_id, nvidia_information};
use lama_slurm::gres_conf::{gpu_numbering, GpuNumbering};
use std::path::{Path, PathBuf};

/// NVIDIA's character device major (`/dev/nvidia0` is 195:0).
const NVIDIA_MAJOR: u32 = 195;

/// The node's files, as this module reads them.
pub trait NodeFiles {
    /// The `(major, minor)` of a character device.
    fn char_device(&self, path: &Path) -> std::io::Result<(u32, u32)>;
    /// A small text file.
    fn read(&self, path: &Path) -> std::io::Result<String>;
    /// The names in a directory.
    fn list(&self, dir: &Path) -> std::io::Result<Vec<String>>;
    /// Where a symbolic link leads, resolved.
    fn resolve(&self, path: &Path) -> std::io::Result<PathBuf>;
}

/// The real files of this node.
#[derive(Debug)]
pub struct RealFiles;

impl NodeFiles for RealFiles {
    fn char_device(&self, path: &Path) -> std::io::Result<(u32, u32)> {
        use std::os::unix::fs::{FileTypeExt, MetadataExt};
        let meta = std::fs::metadata(path)?;
        if !meta.file_type().is_char_device() {
            return Err(std::io::Error::other("not a character device"));
        }
        Ok((libc::major(meta.rdev()), libc::minor(meta.rdev())))
    }
    fn read(&self, path: &Path) -> std::io::Result<String> {
        crate::bounded::read_file(path, crate::bounded::MAX_SMALL_FILE)
    }
    fn list(&self, dir: &Path) -> std::io::Result<Vec<String>> {
        std::fs::read_dir(dir)?
            .map(|e| e.map(|e| e.file_name().to_string_lossy().into_owned()))
            .collect()
    }
    fn resolve(&self, path: &Path) -> std::io::Result<PathBuf> {
        std::fs::canonicalize(path)
    }
}

/// The PCI bus id (lower case) of the card behind one device file.
fn card_of_file(fs: &dyn NodeFiles, file: &str) -> Result<String, String> {
    let (major, minor) = fs
        .char_device(Path::new(file))
        .map_err(|e| format!("{file}: {e}"))?;
    if major == NVIDIA_MAJOR {
        let gpus = Path::new("/proc/driver/nvidia/gpus");
        let dirs = fs.list(gpus).map_err(|e| {
            format!(
                "{file} is NVIDIA's device {minor}, and {}: {e}",
                gpus.display()
            )
        })?;
        for dir in dirs {
            let Ok(info) = fs.read(&gpus.join(&dir).join("information")) else {
                continue;
            };
            let own = information_value(&info, "Device Minor").map(str::parse) == Some(Ok(minor));
            if own && is_bus_id(&dir) {
                return Ok(dir.to_ascii_lowercase());
            }
        }
        return Err(format!(
            "{file} is NVIDIA's device {minor}, and no card in {} has that Device Minor",
            gpus.display()
        ));
    }
    let link = PathBuf::from(format!("/sys/dev/char/{major}:{minor}/device"));
    let target = fs.resolve(&link).map_err(|e| {
        format!(
            "{file} is device {major}:{minor}, and {}: {e}",
            link.display()
        )
    })?;
    match target.file_name().and_then(|n| n.to_str()) {
        Some(name) if is_bus_id(name) => Ok(name.to_ascii_lowercase()),
        _ => Err(format!(
            "{file} is device {major}:{minor}, whose {} is {}, not a PCI device",
            link.display(),
            target.display()
        )),
    }
}

/// The card of one GPU of gres.conf: the one card its files name (a `MultipleFiles=` GPU may
/// list files that name no card, such as `/dev/kfd`, but not two cards).
fn card_of_gpu(fs: &dyn NodeFiles, files: &[String]) -> Result<String, String> {
    let mut cards: Vec<String> = Vec::new();
    let mut first_error = None;
    for f in files {
        match card_of_file(fs, f) {
            Ok(c) if !cards.contains(&c) => cards.push(c),
            Ok(_) => {}
            Err(e) => {
                first_error.get_or_insert(e);
            }
        }
    }
    match cards.as_slice() {
        [one] => Ok(one.clone()),
        [] => Err(first_error.unwrap_or_else(|| "gres.conf gives it no file".to_string())),
        many => Err(format!(
            "its files {} are on different cards ({})",
            files.join(","),
            many.join(", ")
        )),
    }
}

/// Each GPU's files, by Slurm's index.
type GpuFiles = Vec<Vec<String>>;

/// Each of this node's GPUs' files in gres.conf, by Slurm's index, when Slurm numbers the
/// node's GPUs by gres.conf's files; `None` when it numbers them by detection, in PCI bus
/// order, or gres.conf gives this node no GPU file (detection is then the only way Slurm has
/// GPUs), or there is no gres.conf. `slurm_conf` is slurmstepd's own slurm.conf
/// ([`crate::slurm_conf::config_file`], never the job's `SLURM_CONF`), beside which gres.conf
/// is, also in configless mode; `node` is this node's `NodeName`, which gres.conf's
/// `NodeName=` lines name. With the path of gres.conf, for messages.
/// gres.conf beside slurmstepd's slurm.conf as this node's GPU numbering reads it: the file,
/// and each GPU's device files where Slurm numbers them by gres.conf (`None`: by detection).
/// Read once per step; [`GresFiles::cards`] and [`GresFiles::files`] use it.
#[derive(Debug, Clone)]
pub struct GresFiles {
    gres: PathBuf,
    files: Option<GpuFiles>,
}

/// Reads [`GresFiles`] for `node`.
pub fn gres_files(
    slurm_conf: Option<&Path>,
    node: &str,
    fs: &dyn NodeFiles,
) -> Result<GresFiles, String> {
    configured_files(slurm_conf, node, fs).map(|(gres, files)| GresFiles { gres, files })
}

fn configured_files(
    slurm_conf: Option<&Path>,
    node: &str,
    fs: &dyn NodeFiles,
) -> Result<(PathBuf, Option<GpuFiles>), String> {
    let conf = slurm_conf.ok_or(
        "slurmstepd has no SLURM_CONF of its own (slurmd sets it), so gres.conf cannot be found",
    )?;
    let gres = conf.with_file_name("gres.conf");
    let text = match fs.read(&gres) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok((gres, None)),
        Err(e) => return Err(format!("cannot read {}: {e}", gres.display())),
    };
    let dir = gres.parent().unwrap_or(Path::new("/")).to_path_buf();
    let include = |p: &str| {
        let path = dir.join(p);
        fs.read(&path)
            .map_err(|e| format!("gres.conf: cannot read {}: {e}", path.display()))
    };
    let numbering =
        gpu_numbering(&text, node, &include).map_err(|e| format!("{e} ({})", gres.display()))?;
    let files = match numbering {
        GpuNumbering::Configured(files) if !files.is_empty() => Some(files),
        _ => None,
    };
    Ok((gres, files))
}

/// gres.conf's files of Slurm's GPU `k`.
fn files_of<'f>(
    files: &'f [Vec<String>],
    k: u32,
    node: &str,
    gres: &Path,
) -> Result<&'f [String], String> {
    files.get(k as usize).map(Vec::as_slice).ok_or_else(|| {
        format!(
            "Slurm's GPU {k} is not among the {} GPU file(s) {} gives {node}",
            files.len(),
            gres.display()
        )
    })
}

/// The PCI bus id of each of the step's GPUs (`slurm`: `SLURM_STEP_GPUS`), in the same order,
/// when Slurm numbers this node's GPUs by gres.conf's files; `None` when it numbers them by
/// detection ([`configured_files`]).
pub fn step_cards(
    slurm_conf: Option<&Path>,
    node: &str,
    slurm: &[u32],
    fs: &dyn NodeFiles,
) -> Result<Option<Vec<String>>, String> {
    gres_files(slurm_conf, node, fs)?.cards(node, slurm, fs)
}

/// The device files of each of the step's GPUs (`slurm`, whose cards are `buses`), those
/// that name its card: the ones Slurm's devices cgroup allows or denies for the GPU. From
/// gres.conf where Slurm numbers the GPUs by its files (`/dev/kfd`, which names no card, is
/// left out); with detection, the card's own: NVIDIA's `/dev/nvidia<Device Minor>`, else its
/// DRM render node (`/sys/bus/pci/devices/<bus>/drm/renderD*`), the files Slurm's NVML, ROCm
/// SMI and oneAPI detection give.
pub fn step_files(
    slurm_conf: Option<&Path>,
    node: &str,
    slurm: &[u32],
    buses: &[String],
    fs: &dyn NodeFiles,
) -> Result<Vec<Vec<String>>, String> {
    gres_files(slurm_conf, node, fs)?.files(node, slurm, buses, fs)
}

impl GresFiles {
    /// [`step_cards`] from gres.conf already read.
    pub fn cards(
        &self,
        node: &str,
        slurm: &[u32],
        fs: &dyn NodeFiles,
    ) -> Result<Option<Vec<String>>, String> {
        let Some(files) = &self.files else {
            return Ok(None);
        };
        slurm
            .iter()
            .map(|&k| {
                let gpu = files_of(files, k, node, &self.gres)?;
                card_of_gpu(fs, gpu).map_err(|e| {
                    format!(
                        "cannot tell which card Slurm's GPU {k} ({}, {}) is: {e}",
                        gpu.join(","),
                        self.gres.display()
                    )
                })
            })
            .collect::<Result<Vec<_>, _>>()
            .map(Some)
    }

    /// [`step_files`] from gres.conf already read.
    pub fn files(
        &self,
        node: &str,
        slurm: &[u32],
        buses: &[String],
        fs: &dyn NodeFiles,
    ) -> Result<Vec<Vec<String>>, String> {
        slurm
            .iter()
            .zip(buses)
            .map(|(&k, bus)| {
                let own: Vec<String> = match &self.files {
                    Some(files) => files_of(files, k, node, &self.gres)?
                        .iter()
                        .filter(|f| card_of_file(fs, f).is_ok_and(|c| c.eq_ignore_ascii_case(bus)))
                        .cloned()
                        .collect(),
                    None => files_of_card(fs, bus)?,
                };
                if own.is_empty() {
                    return Err(format!(
                        "no device file of Slurm's GPU {k} names its card {bus} ({})",
                        self.gres.display()
                    ));
                }
                Ok(own)
            })
            .collect()
    }
}

/// The UUID by which `vendor`'s runtime names the card at `bus` in its variable, where the
/// driver says one: NVIDIA's ([`nvidia_uuid`]) and AMD's ([`amd_uuid`]); Level Zero's mask
/// takes no UUIDs.
pub fn card_uuid(fs: &dyn NodeFiles, vendor: &str, bus: &str) -> Option<String> {
    match vendor {
        "NVIDIA" => nvidia_uuid(fs, bus),
        "AMD" => amd_uuid(fs, bus),
        _ => None,
    }
}

/// The UUID ROCr gives the card at `bus` (`GPU-` and the 16 hexadecimal digits of its
/// `unique_id`), read from the kernel's KFD topology, whose nodes name their card by PCI
/// `domain` and `location_id` (bus << 8 | device << 3 | function). `None` where no node is
/// that card or it has no unique id (cards before gfx9): ROCR_VISIBLE_DEVICES then keeps
/// numbers.
pub fn amd_uuid(fs: &dyn NodeFiles, bus: &str) -> Option<String> {
    let (domain, location) = pci_location(bus)?;
    let nodes = Path::new("/sys/class/kfd/kfd/topology/nodes");
    let mut names = fs.list(nodes).ok()?;
    names.sort();
    names.iter().find_map(|n| {
        let text = fs.read(&nodes.join(n).join("properties")).ok()?;
        let value = |key: &str| {
            text.lines()
                .find_map(|l| l.split_once(' ').filter(|(k, _)| *k == key))
                .and_then(|(_, v)| v.trim().parse::<u64>().ok())
        };
        (value("domain") == Some(domain) && value("location_id") == Some(location))
            .then(|| value("unique_id"))
            .flatten()
            .filter(|&id| id != 0)
            .map(|id| format!("GPU-{id:016x}"))
    })
}

/// A PCI bus id `dddd:bb:dd.f` as KFD writes it: the domain and `bus << 8 | device << 3 |
/// function`.
fn pci_location(bus: &str) -> Option<(u64, u64)> {
    if !is_bus_id(bus) {
        return None;
    }
    let hex = |s: &str| u64::from_str_radix(s, 16).ok();
    let (domain, rest) = bus.split_once(':')?;
    let (b, rest) = rest.split_once(':')?;
    let (d, f) = rest.split_once('.')?;
    Some((hex(domain)?, hex(b)? << 8 | hex(d)? << 3 | hex(f)?))
}

/// The UUID NVIDIA's driver gives the card at `bus` (`GPU UUID` in
/// `/proc/driver/nvidia/gpus/<bus>/information`), if it says one.
pub fn nvidia_uuid(fs: &dyn NodeFiles, bus: &str) -> Option<String> {
    let text = fs.read(&nvidia_information(bus)).ok()?;
    information_value(&text, "GPU UUID")
        .filter(|v| v.starts_with("GPU-") && v.len() <= 64)
        .map(str::to_string)
}

/// The device files of the node's cards at `buses` (the GPUs outside a step), found by
/// detection; a card whose files cannot be found is left out.
pub fn cards_files(fs: &dyn NodeFiles, buses: &[&str]) -> Vec<Vec<String>> {
    buses
        .iter()
        .filter_map(|b| files_of_card(fs, b).ok())
        .collect()
}

/// The device file of the card at `bus`, found by detection: NVIDIA's, else DRM's render node
/// ([`lama_slurm::gpu::card_device_files`]).
fn files_of_card(fs: &dyn NodeFiles, bus: &str) -> Result<Vec<String>, String> {
    lama_slurm::gpu::card_device_files(bus, |p| fs.read(p), |p| fs.list(p))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    /// Files held in maps.
    #[derive(Default)]
    struct Fake {
        devices: HashMap<String, (u32, u32)>,
        texts: HashMap<String, String>,
        dirs: HashMap<String, Vec<String>>,
        links: HashMap<String, String>,
    }

    fn missing() -> std::io::Error {
        std::io::Error::from(std::io::ErrorKind::NotFound)
    }

    impl NodeFiles for Fake {
        fn char_device(&self, p: &Path) -> std::io::Result<(u32, u32)> {
            self.devices
                .get(p.to_str().unwrap())
                .copied()
                .ok_or_else(missing)
        }
        fn read(&self, p: &Path) -> std::io::Result<String> {
            self.texts
                .get(p.to_str().unwrap())
                .cloned()
                .ok_or_else(missing)
        }
        fn list(&self, p: &Path) -> std::io::Result<Vec<String>> {
            self.dirs
                .get(p.to_str().unwrap())
                .cloned()
                .ok_or_else(missing)
        }
        fn resolve(&self, p: &Path) -> std::io::Result<PathBuf> {
            self.links
                .get(p.to_str().unwrap())
                .map(PathBuf::from)
                .ok_or_else(missing)
        }
    }

    /// An NVIDIA node whose device minors are not in bus order: minor 0 is the card at 84.
    fn nvidia(gres: &str) -> Fake {
        let mut f = Fake::default();
        f.texts.insert("/etc/slurm/gres.conf".into(), gres.into());
        let cards = [
            "0000:84:00.0",
            "0000:04:00.0",
            "0000:85:00.0",
            "0000:05:00.0",
        ];
        for (minor, bus) in cards.iter().enumerate() {
            f.devices
                .insert(format!("/dev/nvidia{minor}"), (195, minor as u32));
            f.texts.insert(
                format!("/proc/driver/nvidia/gpus/{bus}/information"),
                format!("Model: \t\t A100\nIRQ:  \t\t 42\nDevice Minor: \t {minor}\nBus Location: \t {bus}\n"),
            );
        }
        f.dirs.insert(
            "/proc/driver/nvidia/gpus".into(),
            cards.iter().map(|c| c.to_string()).collect(),
        );
        f
    }

    fn conf() -> Option<&'static Path> {
        Some(Path::new("/etc/slurm/slurm.conf"))
    }

    #[test]
    fn nvidia_files_name_their_cards_by_device_minor() {
        // gres.conf lists nvidia2 and nvidia3 first: Slurm's GPU 0 is /dev/nvidia2, whose minor
        // 2 is the card at 85 (by hand from the fake driver files above).
        let fs = nvidia("AutoDetect=off\nNodeName=node1 Name=gpu File=/dev/nvidia[2-3]\nNodeName=node1 Name=gpu File=/dev/nvidia[0-1]\n");
        let cards = step_cards(conf(), "node1", &[0, 1, 2, 3], &fs)
            .unwrap()
            .unwrap();
        assert_eq!(
            cards,
            [
                "0000:85:00.0",
                "0000:05:00.0",
                "0000:84:00.0",
                "0000:04:00.0"
            ]
        );
        assert_eq!(
            step_cards(conf(), "node1", &[3], &fs).unwrap().unwrap(),
            ["0000:04:00.0"]
        );
        // Several records of one card: two files of the same device are the same card.
        let mut fs = nvidia("Name=gpu File=/dev/nvidia0,/dev/gpu-a\n");
        fs.devices.insert("/dev/gpu-a".into(), (195, 0));
        assert_eq!(
            step_cards(conf(), "node1", &[0, 1], &fs).unwrap().unwrap(),
            ["0000:84:00.0", "0000:84:00.0"]
        );
    }

    #[test]
    fn detection_and_no_gres_conf_read_no_file() {
        let fs = nvidia("AutoDetect=nvml\n");
        assert_eq!(step_cards(conf(), "node1", &[0], &fs).unwrap(), None);
        let fs = Fake::default();
        assert_eq!(step_cards(conf(), "node1", &[0], &fs).unwrap(), None);
        // A gres.conf with GPU files for other nodes only: this node's GPUs are detected.
        let fs = nvidia("NodeName=node9 Name=gpu File=/dev/nvidia[0-3]\n");
        assert_eq!(step_cards(conf(), "node1", &[0], &fs).unwrap(), None);
    }

    #[test]
    fn drm_files_name_their_cards_through_sysfs() {
        let mut f = Fake::default();
        f.texts.insert(
            "/etc/slurm/gres.conf".into(),
            "NodeName=node1 Name=gpu MultipleFiles=/dev/kfd,/dev/dri/renderD129\nNodeName=node1 Name=gpu File=/dev/dri/renderD128\n".into(),
        );
        f.devices.insert("/dev/kfd".into(), (511, 0));
        f.devices.insert("/dev/dri/renderD128".into(), (226, 128));
        f.devices.insert("/dev/dri/renderD129".into(), (226, 129));
        f.links.insert(
            "/sys/dev/char/226:128/device".into(),
            "/sys/devices/pci0000:c0/0000:c0:01.1/0000:C1:00.0".into(),
        );
        f.links.insert(
            "/sys/dev/char/226:129/device".into(),
            "/sys/devices/pci0000:00/0000:00:01.1/0000:03:00.0".into(),
        );
        // /dev/kfd names no card; renderD129 names the card at 03.
        assert_eq!(
            step_cards(conf(), "node1", &[1, 0], &f).unwrap().unwrap(),
            ["0000:c1:00.0", "0000:03:00.0"]
        );
        f.links.insert(
            "/sys/dev/char/511:0/device".into(),
            "/sys/devices/virtual/kfd".into(),
        );
        assert!(step_cards(conf(), "node1", &[0], &f).is_ok());
    }

    #[test]
    fn each_gpus_own_device_files_for_the_access_check() {
        // gres.conf's files, only those that name the GPU's card: /dev/kfd is left out.
        let mut f = Fake::default();
        f.texts.insert(
            "/etc/slurm/gres.conf".into(),
            "NodeName=node1 Name=gpu MultipleFiles=/dev/kfd,/dev/dri/renderD129\n".into(),
        );
        f.devices.insert("/dev/kfd".into(), (511, 0));
        f.devices.insert("/dev/dri/renderD129".into(), (226, 129));
        f.links.insert(
            "/sys/dev/char/226:129/device".into(),
            "/sys/devices/pci0000:00/0000:00:01.1/0000:03:00.0".into(),
        );
        let buses = ["0000:03:00.0".to_string()];
        assert_eq!(
            step_files(conf(), "node1", &[0], &buses, &f).unwrap(),
            [vec!["/dev/dri/renderD129".to_string()]]
        );
        // A GPU none of whose files names its card (not this node's topology): refused.
        let other = ["0000:c1:00.0".to_string()];
        let e = step_files(conf(), "node1", &[0], &other, &f).unwrap_err();
        assert!(
            e.contains("no device file of Slurm's GPU 0 names its card 0000:c1:00.0"),
            "{e}"
        );
        // NVIDIA with gres.conf: Slurm's GPU 0 is /dev/nvidia2 (the card at 85).
        let fs = nvidia("Name=gpu File=/dev/nvidia[2-3]\nName=gpu File=/dev/nvidia[0-1]\n");
        let buses = ["0000:85:00.0".to_string(), "0000:84:00.0".to_string()];
        assert_eq!(
            step_files(conf(), "node1", &[0, 2], &buses, &fs).unwrap(),
            [
                vec!["/dev/nvidia2".to_string()],
                vec!["/dev/nvidia0".to_string()]
            ]
        );
        // Detection: the card's own file, NVIDIA's by its Device Minor, else its render node.
        let fs = nvidia("AutoDetect=nvml\n");
        let buses = ["0000:04:00.0".to_string()];
        assert_eq!(
            step_files(conf(), "node1", &[0], &buses, &fs).unwrap(),
            [vec!["/dev/nvidia1".to_string()]]
        );
        let mut f = Fake::default();
        f.dirs.insert(
            "/sys/bus/pci/devices/0000:c1:00.0/drm".into(),
            vec!["card1".into(), "renderD129".into()],
        );
        assert_eq!(
            step_files(conf(), "node1", &[0], &["0000:C1:00.0".to_string()], &f).unwrap(),
            [vec!["/dev/dri/renderD129".to_string()]]
        );
        let e = step_files(conf(), "node1", &[0], &["0000:c2:00.0".to_string()], &f).unwrap_err();
        assert!(
            e.contains("the card at 0000:c2:00.0 is not NVIDIA's"),
            "{e}"
        );
    }

    #[test]
    fn files_that_name_no_card_refuse_the_step() {
        let fs = nvidia("Name=gpu File=/dev/nvidia[0-1]\n");
        let err = step_cards(conf(), "node1", &[2], &fs).unwrap_err();
        assert!(
            err.contains(
                "Slurm's GPU 2 is not among the 2 GPU file(s) /etc/slurm/gres.conf gives node1"
            ),
            "{err}"
        );
        let mut fs = nvidia("Name=gpu File=/dev/nvidia[0-1]\n");
        fs.devices.insert("/dev/nvidia1".into(), (195, 7));
        let err = step_cards(conf(), "node1", &[1], &fs).unwrap_err();
        assert!(
            err.contains("Slurm's GPU 1 (/dev/nvidia1, /etc/slurm/gres.conf)")
                && err.contains("no card in /proc/driver/nvidia/gpus has that Device Minor"),
            "{err}"
        );
        let mut fs = nvidia("Name=gpu File=/dev/nvidia[0-1]\n");
        fs.dirs.clear();
        let err = step_cards(conf(), "node1", &[0], &fs).unwrap_err();
        assert!(
            err.contains("is NVIDIA's device 0, and /proc/driver/nvidia/gpus"),
            "{err}"
        );
        let fs = nvidia("Name=gpu MultipleFiles=/dev/nvidia0,/dev/nvidia1\n");
        let err = step_cards(conf(), "node1", &[0], &fs).unwrap_err();
        assert!(err.contains("are on different cards"), "{err}");
        assert!(step_cards(None, "node1", &[0], &fs)
            .unwrap_err()
            .contains("slurmstepd has no SLURM_CONF of its own"));
    }

    #[test]
    fn amd_uuids_from_the_kfd_topology() {
        // Written by hand as the kernel writes it: node 0 the CPU (no location), node 1 the
        // card at 0000:c1:00.0 (0xc1 << 8 = 49408), node 2 the card at 0001:03:00.1 (0x03 << 8
        // | 0 << 3 | 1 = 769), node 3 a gfx8 card without unique id at 0000:04:00.0 (1024).
        let mut fs = Fake::default();
        let nodes = "/sys/class/kfd/kfd/topology/nodes";
        fs.dirs.insert(
            nodes.into(),
            vec!["3".into(), "0".into(), "2".into(), "1".into()],
        );
        for (n, text) in [
            (
                "0",
                "cpu_cores_count 64\nlocation_id 0\ndomain 0\nunique_id 0\n",
            ),
            (
                "1",
                "simd_count 304\nlocation_id 49408\ndomain 0\nunique_id 3458494292167047108\n",
            ),
            ("2", "location_id 769\ndomain 1\nunique_id 255\n"),
            ("3", "location_id 1024\ndomain 0\nunique_id 0\n"),
        ] {
            fs.texts
                .insert(format!("{nodes}/{n}/properties"), text.into());
        }
        // 3458494292167047108 = 0x2fff_0a3c_1e55_37c4.
        assert_eq!(
            card_uuid(&fs, "AMD", "0000:C1:00.0").as_deref(),
            Some("GPU-2fff0a3c1e5537c4")
        );
        assert_eq!(
            amd_uuid(&fs, "0001:03:00.1").as_deref(),
            Some("GPU-00000000000000ff")
        );
        // No unique id, no such card, not a bus id: none (the numbers stay).
        assert_eq!(amd_uuid(&fs, "0000:04:00.0"), None);
        assert_eq!(amd_uuid(&fs, "0000:05:00.0"), None);
        assert_eq!(amd_uuid(&fs, "../../x"), None);
        // Level Zero's mask takes no UUIDs.
        assert_eq!(card_uuid(&fs, "Intel", "0000:c1:00.0"), None);
        assert_eq!(
            pci_location("0000:c1:1f.7"),
            Some((0, 0xc1 << 8 | 0x1f << 3 | 7))
        );
    }
}

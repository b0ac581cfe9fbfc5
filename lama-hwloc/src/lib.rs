//! The hwloc adapter: turns an hwloc topology (an XML file, a synthetic description, or this
//! host) into the engine's [`Machine`].
//!
//! This crate is the only place in the workspace that talks to hwloc. The engine sees plain data:
//! PUs in hwloc's logical order with their OS indexes and availability, and the objects of the
//! levels LAMA knows (Package, Die, NUMANode, L3/L2/L1 data or unified caches, Core).
//!
//! Topologies are loaded with `INCLUDE_DISALLOWED`, so every PU of the machine is there, even
//! those outside the allowed set; offline PUs have no object in hwloc 2 and so are absent.
//!
//! An allowed set is the restriction of whoever discovered the topology, not a property of the
//! machine: an XML file records its writer's (slurmd confined to its specialised CPUs, `lama
//! export` inside a job), so a topology read from a file has every PU available, and
//! [`export_xml`] writes every PU allowed. Only live discovery with [`load`] marks the PUs this
//! process may not use as unavailable (`lama map --topology host` shows the caller's CPUs);
//! [`load_whole`] does not, for callers that restrict with CPUs of their own (a step's).
#![deny(missing_docs)]

use hwlocality::cpu::cpuset::CpuSet;
use hwlocality::object::types::ObjectType;
use hwlocality::topology::builder::{BuildFlags, TopologyBuilder};
use hwlocality::topology::editor::AllowSet;
use hwlocality::topology::export::xml::XMLExportFlags;
use hwlocality::topology::Topology;
use lama_engine::{CpuList, Level, Machine, MachineBuilder, TopologyError};
use std::path::{Path, PathBuf};

/// Where a topology comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// An hwloc XML file.
    Xml(PathBuf),
    /// An hwloc synthetic description such as `pack:2 core:6 pu:2`.
    Synthetic(String),
    /// Live discovery of this host.
    Live,
}

impl Source {
    /// Reads the preview's `--topology` argument: `host` is this machine; an existing file, or
    /// anything ending in `.xml` or containing `/`, is an XML file; anything else is an hwloc
    /// synthetic description.
    pub fn from_spec(spec: &str) -> Source {
        let path = Path::new(spec);
        if spec == "host" {
            Source::Live
        } else if spec.ends_with(".xml")
            || path.is_file()
            || (spec.contains('/') && !spec.contains(':'))
        {
            Source::Xml(path.to_path_buf())
        } else {
            Source::Synthetic(spec.to_string())
        }
    }
}

/// A topology that could not be loaded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum LoadError {
    /// The XML file does not exist or cannot be read.
    #[error("cannot read topology file {path}: {reason} (give an hwloc XML file, e.g. one written by `lama export` or `lstopo node.xml`)")]
    Unreadable {
        /// The file.
        path: String,
        /// Why.
        reason: String,
    },
    /// hwloc refused the XML.
    #[error("{path} is not a valid hwloc XML topology (write one with `lama export` or `lstopo node.xml`)")]
    InvalidXml {
        /// The file.
        path: String,
    },
    /// hwloc refused the synthetic description.
    #[error("invalid hwloc synthetic topology '{0}' (example: \"pack:2 core:6 pu:2\"; a path to an XML file or `host` also work)")]
    InvalidSynthetic(String),
    /// hwloc failed while discovering or exporting.
    #[error("hwloc failed to {action}: {reason}")]
    Hwloc {
        /// What it was doing.
        action: &'static str,
        /// hwloc's error.
        reason: String,
    },
    /// The topology has a shape the engine does not accept.
    #[error("unusable topology {name}: {source}")]
    Model {
        /// The topology's name.
        name: String,
        /// Why.
        source: TopologyError,
    },
}

fn builder() -> Result<TopologyBuilder, LoadError> {
    TopologyBuilder::new()
        .with_flags(BuildFlags::INCLUDE_DISALLOWED)
        .map_err(|e| LoadError::Hwloc {
            action: "set topology flags",
            reason: e.to_string(),
        })
}

fn build(b: TopologyBuilder, action: &'static str) -> Result<Topology, LoadError> {
    b.build().map_err(|e| LoadError::Hwloc {
        action,
        reason: e.to_string(),
    })
}

/// Loads a topology from `source` and converts it for the engine. A file's or a synthetic
/// description's PUs are all available; live discovery's are those this process may use.
pub fn load(source: &Source) -> Result<Machine, LoadError> {
    let (topology, name) = load_hwloc(source)?;
    match source {
        Source::Live => to_machine(&topology, &name),
        Source::Xml(_) | Source::Synthetic(_) => convert(&topology, &name, None),
    }
}

/// Loads a topology from `source` with every PU available, whatever the allowed set of the
/// process that discovered it (this one, for [`Source::Live`]): for callers that restrict the
/// machine with CPUs of their own, such as a step's.
pub fn load_whole(source: &Source) -> Result<Machine, LoadError> {
    let (topology, name) = load_hwloc(source)?;
    convert(&topology, &name, None)
}

/// Largest topology XML read (a 1,024-PU machine's XML is about 1 MB).
pub const MAX_XML_BYTES: u64 = 64 << 20;

/// Reads a text file of at most `max` bytes; a longer one is an error that says so.
pub fn read_bounded(path: &Path, max: u64) -> std::io::Result<String> {
    use std::io::Read;
    let mut text = String::new();
    std::fs::File::open(path)?
        .take(max + 1)
        .read_to_string(&mut text)?;
    if text.len() as u64 > max {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("longer than {max} bytes"),
        ));
    }
    Ok(text)
}

/// Loads the hwloc topology itself (for callers that also need hwloc, such as benchmarks).
pub fn load_hwloc(source: &Source) -> Result<(Topology, String), LoadError> {
    match source {
        Source::Xml(path) => {
            let shown = path.display().to_string();
            // Read the file ourselves first: a missing or unreadable file gets a clear reason
            // instead of hwloc's generic refusal.
            let text = read_bounded(path, MAX_XML_BYTES).map_err(|e| LoadError::Unreadable {
                path: shown.clone(),
                reason: e.to_string(),
            })?;
            let b = builder()?
                .from_xml(&text)
                .map_err(|_| LoadError::InvalidXml {
                    path: shown.clone(),
                })?;
            let t = b.build().map_err(|_| LoadError::InvalidXml {
                path: shown.clone(),
            })?;
            let name = path
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or(shown);
            Ok((t, name))
        }
        Source::Synthetic(desc) => {
            let b = builder()?
                .from_synthetic(desc)
                .map_err(|_| LoadError::InvalidSynthetic(desc.clone()))?;
            Ok((build(b, "build a synthetic topology")?, desc.clone()))
        }
        Source::Live => {
            let t = build(builder()?, "discover this host's topology")?;
            Ok((t, host_name()))
        }
    }
}

fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "host".to_string())
}

fn os_indexes(set: &hwlocality::cpu::cpuset::CpuSet) -> Vec<u32> {
    set.iter_set().map(|i| usize::from(i) as u32).collect()
}

/// Converts an hwloc topology into the engine's model; the PUs outside the topology's allowed
/// set are unavailable.
pub fn to_machine(topology: &Topology, name: &str) -> Result<Machine, LoadError> {
    convert(topology, name, Some(&topology.allowed_cpuset()))
}

/// Converts an hwloc topology into the engine's model; with `allowed`, the PUs outside it are
/// unavailable, without it every PU is available.
fn convert(
    topology: &Topology,
    name: &str,
    allowed: Option<&CpuSet>,
) -> Result<Machine, LoadError> {
    let mut b = MachineBuilder::new(name);
    for pu in topology.objects_with_type(ObjectType::PU) {
        let Some(os) = pu.os_index() else { continue };
        b.pu(os as u32, allowed.is_none_or(|a| a.is_set(os)));
    }
    let levels = [
        (ObjectType::Package, Level::Socket),
        (ObjectType::Die, Level::Die),
        (ObjectType::NUMANode, Level::Numa),
        (ObjectType::L3Cache, Level::L3),
        (ObjectType::L2Cache, Level::L2),
        (ObjectType::L1Cache, Level::L1),
        (ObjectType::Core, Level::Core),
    ];
    for (ty, level) in levels {
        for obj in topology.objects_with_type(ty) {
            let Some(cpuset) = obj.cpuset() else { continue };
            let pus = os_indexes(&cpuset);
            b.object(level, obj.os_index().map(|i| i as u32), &pus);
        }
    }
    b.build().map_err(|source| LoadError::Model {
        name: name.to_string(),
        source,
    })
}

/// A topology as hwloc XML (v2), every PU and NUMA node allowed: the caller's own restriction
/// (a job's cgroup, slurmd confined to specialised CPUs) is not the machine's and is not
/// written. With [`Source::Live`], this host's, for admins to save at boot and name in the
/// plugin's `topology=` setting, and for the plugin's topology cache.
pub fn export_xml(source: &Source) -> Result<String, LoadError> {
    let (mut topology, _) = load_hwloc(source)?;
    topology
        .edit(|editor| editor.allow(AllowSet::All))
        .map_err(|e| LoadError::Hwloc {
            action: "mark every PU allowed before exporting",
            reason: e.to_string(),
        })?;
    let xml = topology
        .export_xml(XMLExportFlags::empty())
        .map_err(|e| LoadError::Hwloc {
            action: "export XML",
            reason: e.to_string(),
        })?;
    Ok(xml.to_string())
}

/// The running system's online CPUs, from `/sys/devices/system/cpu/online`.
pub fn online_cpus() -> Result<CpuList, LoadError> {
    let path = "/sys/devices/system/cpu/online";
    let text = read_bounded(Path::new(path), 1 << 16).map_err(|e| LoadError::Unreadable {
        path: path.to_string(),
        reason: e.to_string(),
    })?;
    CpuList::parse(&text).map_err(|e| LoadError::Unreadable {
        path: path.to_string(),
        reason: e.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn synth(s: &str) -> Machine {
        load(&Source::Synthetic(s.to_string())).unwrap()
    }

    #[test]
    fn from_spec_tells_sources_apart() {
        assert_eq!(Source::from_spec("host"), Source::Live);
        assert_eq!(
            Source::from_spec("/nonexistent/node.xml"),
            Source::Xml("/nonexistent/node.xml".into())
        );
        assert_eq!(
            Source::from_spec("pack:2 core:2 pu:1"),
            Source::Synthetic("pack:2 core:2 pu:1".into())
        );
    }

    #[test]
    fn synthetic_topologies_keep_logical_and_os_apart() {
        let m = synth("pack:2 core:2 pu:2(indexes=0,4,2,6,1,5,3,7)");
        let os: Vec<u32> = m.pus().iter().map(|p| p.os).collect();
        assert_eq!(os, [0, 4, 2, 6, 1, 5, 3, 7]);
        assert_eq!(m.objects(Level::Socket).len(), 2);
        assert_eq!(m.objects(Level::Core).len(), 4);
        assert_eq!(m.objects(Level::Core)[1].pus, 2..4);
    }

    #[test]
    fn caches_are_matched_by_depth() {
        let m = synth("pack:1 l3:1 l2:2 l1d:2 core:1 pu:1");
        assert_eq!(m.objects(Level::L3).len(), 1);
        assert_eq!(m.objects(Level::L2).len(), 2);
        assert_eq!(m.objects(Level::L1).len(), 4);
    }

    #[test]
    fn bad_inputs_are_errors() {
        let e = load(&Source::Synthetic("pack:2 kore:2".into())).unwrap_err();
        assert!(e
            .to_string()
            .starts_with("invalid hwloc synthetic topology 'pack:2 kore:2'"));
        let e = load(&Source::Xml("/nonexistent/x.xml".into())).unwrap_err();
        assert!(matches!(e, LoadError::Unreadable { .. }), "{e}");
        let dir = tempfile::tempdir().unwrap();
        let bad = dir.path().join("bad.xml");
        std::fs::write(&bad, "<not hwloc").unwrap();
        let e = load(&Source::Xml(bad)).unwrap_err();
        assert!(matches!(e, LoadError::InvalidXml { .. }), "{e}");
    }

    #[test]
    fn live_discovery_and_export_round_trip() {
        // The export has every PU allowed, whatever this process's cgroup allows.
        let live = load_whole(&Source::Live).unwrap();
        assert!(!live.pus().is_empty());
        assert_eq!(live.available().len(), live.pus().len());
        let mine = load(&Source::Live).unwrap();
        assert_eq!(mine.pus().len(), live.pus().len());
        assert!(!mine.available().is_empty());
        let xml = export_xml(&Source::Live).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("host.xml");
        std::fs::write(&file, xml).unwrap();
        let back = load(&Source::Xml(file)).unwrap();
        assert_eq!(back.pus(), live.pus());
        assert!(!online_cpus().unwrap().is_empty());
    }
}

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

pub mod bind;

use hwlocality::cpu::cpuset::CpuSet;
use hwlocality::object::attributes::{DownstreamAttributes, ObjectAttributes};
use hwlocality::object::types::{BridgeType, OSDeviceType, ObjectType};
use hwlocality::object::TopologyObject;
use hwlocality::topology::builder::{BuildFlags, TopologyBuilder, TypeFilter};
use hwlocality::topology::editor::AllowSet;
use hwlocality::topology::export::xml::XMLExportFlags;
use hwlocality::topology::Topology;
use lama_engine::{
    vendor_name, CpuKind, CpuList, DeviceKind, DeviceSpec, Level, Machine, MachineBuilder,
    TopologyError,
};
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
    #[error("{path} is not a valid hwloc XML topology: {why} (write one with `lama export` or `lstopo node.xml`)")]
    InvalidXml {
        /// The file.
        path: String,
        /// Where the XML breaks ([`xml_problem`]), or that hwloc refused well-formed XML.
        why: String,
    },
    /// A synthetic description of more PUs than LAMA reads.
    #[error("hwloc synthetic topology '{desc}' has {pus} PUs, more than the {max} LAMA reads (hwloc builds a synthetic machine in a time that grows with the square of its size: 8,192 PUs take seconds, 16,384 more than ten); describe a smaller machine, or export the real one with `lama export`")]
    SyntheticTooLarge {
        /// The description.
        desc: String,
        /// Its PUs (the product of its counts).
        pus: u128,
        /// The most read.
        max: u64,
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

/// Whether a load keeps the machine's I/O objects (PCI devices, their GPUs and NICs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Io {
    /// Keep the important ones: what GPU and NIC placement needs. Live discovery then scans
    /// PCI and runs whichever vendor components hwloc has (CUDA, NVML, ROCm SMI, ...).
    Keep,
    /// Keep the important ones as the kernel shows them (PCI devices, and the OS devices sysfs
    /// names: DRM render nodes, network and InfiniBand interfaces, disks), without hwloc's
    /// vendor components ([`VENDOR_COMPONENTS`]), which load the GPU vendors' libraries and
    /// wake their drivers: for root slurmd at every start and for slurmstepd. GPUs are then
    /// known by their PCI class and vendor.
    Kernel,
    /// Leave them out: the CPU levels only. Live discovery then reads no PCI device and loads
    /// no vendor library; an XML file's I/O objects are skipped.
    Skip,
}

/// hwloc's discovery components that call a GPU vendor's library (hwloc 2.x: `cuda` the CUDA
/// runtime, `nvml` NVIDIA's management library, `rsmi` ROCm SMI, `levelzero` oneAPI Level
/// Zero, `opencl` an OpenCL ICD loader and its vendors' drivers, `gl` the X server's NV-CONTROL).
pub const VENDOR_COMPONENTS: [&str; 6] = ["cuda", "nvml", "rsmi", "levelzero", "opencl", "gl"];

fn builder(io: Io) -> Result<TopologyBuilder, LoadError> {
    let mut b = io_builder(io)?;
    if io == Io::Kernel {
        for name in VENDOR_COMPONENTS {
            // hwloc refuses to exclude a component it does not have (EINVAL, seen with
            // Debian's hwloc, built without CUDA): try on a throwaway builder first, since a
            // refused call consumes the builder.
            if io_builder(io)?.without_component(name).is_ok() {
                b = b.without_component(name).map_err(|e| LoadError::Hwloc {
                    action: "leave out a GPU vendor's discovery component",
                    reason: e.to_string(),
                })?;
            }
        }
    }
    Ok(b)
}

fn io_builder(io: Io) -> Result<TopologyBuilder, LoadError> {
    // I/O objects are dropped by hwloc unless its filters keep them, also when it reads XML.
    let filter = match io {
        Io::Keep | Io::Kernel => TypeFilter::KeepImportant,
        Io::Skip => TypeFilter::KeepNone,
    };
    TopologyBuilder::new()
        .with_flags(BuildFlags::INCLUDE_DISALLOWED)
        .map_err(|e| LoadError::Hwloc {
            action: "set topology flags",
            reason: e.to_string(),
        })?
        .with_io_type_filter(filter)
        .map_err(|e| LoadError::Hwloc {
            action: "set the I/O object filter",
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
    load_whole_with(source, Io::Keep)
}

/// [`load_whole`], keeping or skipping I/O objects: a caller that places by CPU only skips
/// them, and its live discovery is spared the PCI scan and the vendor libraries.
pub fn load_whole_with(source: &Source, io: Io) -> Result<Machine, LoadError> {
    let (topology, name) = load_hwloc_with(source, io)?;
    convert(&topology, &name, None)
}

/// Largest topology XML read (a 1,024-PU machine's XML is about 1 MB).
pub const MAX_XML_BYTES: u64 = 64 << 20;

/// Reads a text file of at most `max` bytes; a longer one is an error that says so.
pub fn read_bounded(path: &Path, max: u64) -> std::io::Result<String> {
    read_bounded_from(std::fs::File::open(path)?, max)
}

/// [`read_bounded`] from a file already open (one whose owner was checked on the descriptor).
pub fn read_bounded_from(file: impl std::io::Read, max: u64) -> std::io::Result<String> {
    use std::io::Read;
    let mut text = String::new();
    file.take(max + 1).read_to_string(&mut text)?;
    if text.len() as u64 > max {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("longer than {max} bytes"),
        ));
    }
    Ok(text)
}

/// Most PUs of a synthetic description ([`LoadError::SyntheticTooLarge`]).
pub const MAX_SYNTHETIC_PUS: u64 = 8192;

/// Largest PU or NUMA node OS index read from XML: far above any machine's (Linux's
/// `CONFIG_NR_CPUS` is at most 8,192), and hwloc's bitmaps grow with the index (an index of
/// 2·10⁹ costs hundreds of MB before anything is refused).
pub const MAX_OS_INDEX: u64 = 1 << 20;

/// The PUs of a synthetic description: the product of its levels' counts (`pack:2 core:6
/// pu:2` has 24). `None` where a count cannot be read, which hwloc then judges.
fn synthetic_pus(desc: &str) -> Option<u128> {
    let mut depth = 0usize;
    let mut outer = String::new();
    // Attributes in parentheses and memory children in brackets are not levels.
    for c in desc.chars() {
        match c {
            '(' | '[' => depth += 1,
            ')' | ']' => depth = depth.saturating_sub(1),
            _ if depth == 0 => outer.push(c),
            _ => {}
        }
    }
    let mut pus: u128 = 1;
    for token in outer.split_whitespace() {
        let (_, count) = token.split_once(':')?;
        let n: u128 = count.parse().ok()?;
        pus = pus.checked_mul(n)?;
    }
    Some(pus)
}

/// What in an XML text hwloc would read wrongly, slowly or not at all, checked before hwloc
/// reads it: an export of hwloc 3 or later (which hwloc 2 refuses without saying why), a CPU or
/// node set that is not an hwloc bitmap (`0xzz`: hwloc reads what it can and keeps going, so
/// half the machine may vanish), and a PU or NUMA node OS index past [`MAX_OS_INDEX`]. Each
/// with its line. One pass over the attributes.
pub fn xml_content_problem(text: &str) -> Option<String> {
    let line_at = |at: usize| line_of(text, at);
    if let Some(at) = text.find("<?xml") {
        let end = text[at..].find("?>").map_or(text.len(), |i| at + i);
        if let Some(enc) = attribute(&text[at..end], "encoding") {
            if !["UTF-8", "US-ASCII", "ASCII"]
                .iter()
                .any(|e| e.eq_ignore_ascii_case(enc))
            {
                return Some(format!(
                    "line {}: the encoding is \"{}\", where hwloc writes UTF-8",
                    line_at(at),
                    enc.chars().take(40).collect::<String>()
                ));
            }
        }
    }
    if let Some(at) = text.find("<topology") {
        let tag_end = text[at..].find('>').map_or(text.len(), |i| at + i);
        let tag = &text[at..tag_end];
        if let Some(v) = attribute(tag, "version") {
            let major: u32 = v
                .split('.')
                .next()
                .and_then(|m| m.parse().ok())
                .unwrap_or(0);
            if major >= 3 {
                return Some(format!(
                    "line {}: it is an hwloc {v} export (<topology version=\"{v}\">), which \
                     hwloc 2, the one LAMA is built with, cannot read; export the node with \
                     hwloc 2 (`lstopo --of xml` of hwloc 2.x, or `lama export` on the node)",
                    line_at(at)
                ));
            }
        }
    }
    let mut rest = 0;
    while let Some(lt) = text[rest..].find("<object").map(|i| rest + i) {
        let end = text[lt..].find('>').map_or(text.len(), |i| lt + i);
        let tag = &text[lt..end];
        rest = end;
        for name in [
            "cpuset",
            "complete_cpuset",
            "allowed_cpuset",
            "online_cpuset",
            "nodeset",
            "complete_nodeset",
            "allowed_nodeset",
        ] {
            if let Some(v) = attribute(tag, name) {
                if !is_bitmap(v) {
                    return Some(format!(
                        "line {}: {name}=\"{v}\" is not an hwloc bitmap (comma-separated \
                         words of 0x and up to 8 hex digits)",
                        line_at(lt)
                    ));
                }
            }
        }
        // hwloc 2 (2.9 to 2.12 at least) crashes on an object with a CPU or node set but no
        // complete one (found by fuzzing: a typo in an attribute's name was enough); it writes
        // both.
        for (set, complete) in [
            ("cpuset", "complete_cpuset"),
            ("nodeset", "complete_nodeset"),
        ] {
            if has_attribute(tag, set) && !has_attribute(tag, complete) {
                return Some(format!(
                    "line {}: an object with a {set} but no {complete}, which hwloc cannot \
                     read (hwloc writes both: export the node again with `lama export` or \
                     `lstopo --of xml`)",
                    line_at(lt)
                ));
            }
        }
        let ty = attribute(tag, "type").unwrap_or("");
        if !OBJECT_TYPES.iter().any(|t| t.eq_ignore_ascii_case(ty)) {
            return Some(format!(
                "line {}: an object of type \"{}\", which hwloc does not write (it takes \
                 abbreviations of its names, and a PU or NUMA node without its os_index \
                 costs it 512 MiB)",
                line_at(lt),
                ty.chars().take(40).collect::<String>()
            ));
        }
        if ty.eq_ignore_ascii_case("PU") || ty.eq_ignore_ascii_case("NUMANode") {
            if !has_attribute(tag, "os_index") {
                return Some(format!(
                    "line {}: a {ty} without its os_index, which hwloc always writes",
                    line_at(lt)
                ));
            }
            if let Some(v) = attribute(tag, "os_index") {
                if v.parse::<u64>().map_or(true, |n| n > MAX_OS_INDEX) {
                    return Some(format!(
                        "line {}: a {ty} with os_index=\"{v}\", where at most {MAX_OS_INDEX} \
                         is read (no machine numbers its CPUs so far)",
                        line_at(lt)
                    ));
                }
            }
        }
    }
    None
}

/// The line (from 1) of byte `at` of `text`.
fn line_of(text: &str, at: usize) -> usize {
    text[..at].bytes().filter(|&b| b == b'\n').count() + 1
}

/// The object types hwloc 2 writes in XML, and those of hwloc 1.x exports it still reads.
const OBJECT_TYPES: [&str; 24] = [
    "Machine", "Package", "Die", "Core", "PU", "NUMANode", "MemCache", "Group", "Misc", "L1Cache",
    "L2Cache", "L3Cache", "L4Cache", "L5Cache", "L1iCache", "L2iCache", "L3iCache", "Bridge",
    "PCIDev", "OSDev", "System", "Socket", "Cache", "Node",
];

/// Whether an XML start tag has attribute `name`, however its value is quoted.
fn has_attribute(tag: &str, name: &str) -> bool {
    tag.match_indices(name).any(|(i, _)| {
        tag[..i].ends_with(char::is_whitespace)
            && tag[i + name.len()..].trim_start().starts_with('=')
    })
}

/// The value of attribute `name` in an XML start tag, if there.
fn attribute<'t>(tag: &'t str, name: &str) -> Option<&'t str> {
    let mut from = 0;
    while let Some(i) = tag[from..].find(name).map(|i| from + i) {
        from = i + name.len();
        let before_ok = tag[..i].ends_with(char::is_whitespace);
        let after = &tag[from..];
        if before_ok {
            if let Some(v) = after.strip_prefix("=\"") {
                return v.find('"').map(|e| &v[..e]);
            }
        }
    }
    None
}

/// Whether `v` is an hwloc bitmap as hwloc writes one: comma-separated words, each empty (a
/// zero word), `0x` and 1 to 8 hex digits, or, first, `0xf...f` (infinitely many set bits).
fn is_bitmap(v: &str) -> bool {
    v.split(',').enumerate().all(|(i, w)| {
        w.is_empty()
            || (i == 0 && w == "0xf...f")
            || w.strip_prefix("0x").is_some_and(|h| {
                (1..=8).contains(&h.len()) && h.bytes().all(|b| b.is_ascii_hexdigit())
            })
    })
}

/// Where an XML text that hwloc refused breaks, for the error message: the first NUL byte, a
/// closing tag that does not match, an unclosed tag or comment, or an end before every element
/// is closed (a truncated file), each with its line; else that no `<topology>` element is there,
/// or that the XML is well-formed and hwloc refused its content.
pub fn xml_problem(text: &str) -> String {
    let line_at = |at: usize| line_of(text, at);
    if let Some(at) = text.find('\0') {
        return format!("line {}: a NUL byte", line_at(at));
    }
    // A file that is no XML at all (a README, a synthetic description saved to a file, a
    // node's Slurm line) is called that, not a broken XML file.
    let start = text.trim_start();
    if !start.is_empty() && !start.starts_with('<') {
        let first: String = start
            .lines()
            .next()
            .unwrap_or("")
            .chars()
            .take(40)
            .collect();
        return format!(
            "it is not XML at all: it starts with \"{first}\", not with <?xml or <topology>"
        );
    }
    let mut open: Vec<(&str, usize)> = Vec::new();
    let mut seen_topology = false;
    let mut rest = 0;
    while let Some(lt) = text[rest..].find('<').map(|i| rest + i) {
        let (end_marker, skip) = if text[lt..].starts_with("<!--") {
            ("-->", 4)
        } else if text[lt..].starts_with("<?") {
            ("?>", 2)
        } else if text[lt..].starts_with("<!") {
            (">", 2)
        } else {
            (">", 1)
        };
        let Some(close) = text[lt + skip..].find(end_marker).map(|i| lt + skip + i) else {
            return format!(
                "line {}: a tag or comment that never ends (the file looks truncated at line {})",
                line_at(lt),
                line_at(text.trim_end().len())
            );
        };
        rest = close + end_marker.len();
        if skip != 1 {
            continue;
        }
        let tag = &text[lt + 1..close];
        let name = |t: &str| -> String {
            t.split(|c: char| c.is_whitespace() || c == '/')
                .next()
                .unwrap_or("")
                .to_string()
        };
        if let Some(closing) = tag.strip_prefix('/') {
            let closing = closing.trim();
            match open.pop() {
                Some((name, _)) if name == closing => {}
                Some((name, opened)) => {
                    return format!(
                        "line {}: </{closing}> closes <{name}> opened at line {opened}",
                        line_at(lt)
                    )
                }
                None => return format!("line {}: </{closing}> closes nothing", line_at(lt)),
            }
        } else {
            let n = name(tag);
            seen_topology |= n == "topology";
            if !tag.ends_with('/') {
                let start = lt + 1;
                open.push((&text[start..start + n.len()], line_at(lt)));
            }
        }
    }
    if let Some((name, opened)) = open.last() {
        return format!(
            "it ends at line {} with <{name}> (opened at line {opened}) still open: the file \
             looks truncated",
            line_at(text.trim_end().len())
        );
    }
    if !seen_topology {
        return "it has no <topology> element".to_string();
    }
    "the XML is well-formed but hwloc refused its content (an hwloc 1.x or 2.x export?)".to_string()
}

/// An XML text already read (from a descriptor whose owner was checked, say) as a machine with
/// every PU available; `path` names it in errors and gives the machine its name.
pub fn load_xml_text(text: &str, path: &Path, io: Io) -> Result<Machine, LoadError> {
    let topology = xml_topology(text, &path.display().to_string(), io)?;
    convert(&topology, &file_name(path), None)
}

fn xml_topology(text: &str, shown: &str, io: Io) -> Result<Topology, LoadError> {
    if let Some(why) = xml_content_problem(text) {
        return Err(LoadError::InvalidXml {
            path: shown.to_string(),
            why,
        });
    }
    let invalid = || LoadError::InvalidXml {
        path: shown.to_string(),
        why: xml_problem(text),
    };
    // hwlocality panics ("unreachable") on some errors hwloc reports while reading a buffer
    // (EILSEQ for an encoding libxml2 refuses, found by fuzzing): an error here, never a crash.
    let b = builder(io)?;
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || {
        b.from_xml(text).ok()?.build().ok()
    }))
    .ok()
    .flatten()
    .ok_or_else(invalid)
}

/// LAMA's machine text (`lama_engine::machine_text`, the form of the plugin's topology cache
/// that steps read) already read from `path`, as the machine named after the file, as
/// [`load_xml_text`] names one; the error names `path`. No hwloc is involved.
pub fn load_machine_text(text: &str, path: &Path) -> Result<Machine, String> {
    Machine::from_text(&file_name(path), text).map_err(|e| format!("{}: {e}", path.display()))
}

fn file_name(path: &Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| path.display().to_string())
}

/// Loads the hwloc topology itself, I/O objects kept (for callers that also need hwloc, such
/// as benchmarks).
pub fn load_hwloc(source: &Source) -> Result<(Topology, String), LoadError> {
    load_hwloc_with(source, Io::Keep)
}

/// [`load_hwloc`], keeping or skipping I/O objects.
pub fn load_hwloc_with(source: &Source, io: Io) -> Result<(Topology, String), LoadError> {
    match source {
        Source::Xml(path) => {
            let shown = path.display().to_string();
            // Read the file ourselves first: a missing or unreadable file gets a clear reason
            // instead of hwloc's generic refusal.
            let text = read_bounded(path, MAX_XML_BYTES).map_err(|e| LoadError::Unreadable {
                path: shown.clone(),
                reason: e.to_string(),
            })?;
            Ok((xml_topology(&text, &shown, io)?, file_name(path)))
        }
        Source::Synthetic(desc) => {
            if let Some(pus) = synthetic_pus(desc).filter(|&p| p > MAX_SYNTHETIC_PUS.into()) {
                return Err(LoadError::SyntheticTooLarge {
                    desc: desc.clone(),
                    pus,
                    max: MAX_SYNTHETIC_PUS,
                });
            }
            let b = builder(io)?
                .from_synthetic(desc)
                .map_err(|_| LoadError::InvalidSynthetic(desc.clone()))?;
            Ok((build(b, "build a synthetic topology")?, desc.clone()))
        }
        Source::Live => {
            let t = build(builder(io)?, "discover this host's topology")?;
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
    // hwlocality panics ("unreachable") on some attributes hwloc accepted from a malformed XML
    // file (a host bridge below a bridge, found by fuzzing): an error, never a crash.
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        convert_objects(topology, name, allowed)
    }))
    .unwrap_or_else(|_| {
        Err(LoadError::Hwloc {
            action: "read the topology's objects",
            reason: "hwloc gave objects of impossible kinds (a host bridge below another \
                     bridge, say): export the node again with `lama export` or `lstopo --of xml`"
                .to_string(),
        })
    })
}

fn convert_objects(
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
    for d in devices(topology) {
        b.device(d);
    }
    let online = topology.cpuset();
    b.offline(CpuList::from_cpus(
        os_indexes(&topology.complete_cpuset())
            .into_iter()
            .filter(|&c| !online.is_set(c as usize)),
    ));
    for kind in cpu_kinds(topology) {
        b.kind(kind);
    }
    b.build().map_err(|source| LoadError::Model {
        name: name.to_string(),
        source,
    })
}

/// The topology's kinds of CPU cores, most power-efficient first (hwloc's order), named by
/// their `CoreType`, else `E-cores` and `P-cores` when there are two, else by index.
fn cpu_kinds(topology: &Topology) -> Vec<CpuKind> {
    let Ok(kinds) = topology.cpu_kinds() else {
        return Vec::new();
    };
    let kinds: Vec<_> = kinds.collect();
    let two = kinds.len() == 2;
    kinds
        .iter()
        .enumerate()
        .map(|(i, k)| {
            let info = |name: &str| {
                k.infos
                    .iter()
                    .find(|t| t.name().to_str() == Ok(name))
                    .and_then(|t| t.value().to_str().ok().map(str::to_string))
            };
            let name = info("CoreType").unwrap_or_else(|| match (two, i) {
                (true, 0) => "E-cores".to_string(),
                (true, _) => "P-cores".to_string(),
                _ => format!("kind {i}"),
            });
            CpuKind {
                name,
                details: info("FrequencyMaxMHz")
                    .map(|f| format!("max {f} MHz"))
                    .unwrap_or_default(),
                cpus: CpuList::from_cpus(os_indexes(&k.cpuset)),
            }
        })
        .collect()
}

/// What an OS device says its PCI device is: a GPU (a compute device: CUDA, NVML, ROCm SMI,
/// Level Zero, OpenCL), a NIC (a network or OpenFabrics device), or neither (a disk, a DMA
/// engine, a display adapter with only a DRM card such as a BMC's).
fn classify(osdev: &TopologyObject) -> Option<DeviceKind> {
    let name = osdev
        .name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let subtype = osdev
        .subtype()
        .map(|n| n.to_string_lossy().to_ascii_lowercase())
        .unwrap_or_default();
    let ty = match osdev.attributes() {
        Some(ObjectAttributes::OSDevice(a)) => Some(a.device_type()),
        _ => None,
    };
    let compute_name = ["cuda", "nvml", "rsmi", "opencl", "ze", "levelzero"]
        .iter()
        .any(|p| name.starts_with(p) || subtype == *p);
    match ty {
        Some(OSDeviceType::CoProcessor) => Some(DeviceKind::Gpu),
        Some(OSDeviceType::GPU) if compute_name => Some(DeviceKind::Gpu),
        Some(OSDeviceType::Network | OSDeviceType::OpenFabrics) => Some(DeviceKind::Nic),
        // Another encoding of the type (hwloc 3.0 writes a set of flags): by its name.
        _ if compute_name => Some(DeviceKind::Gpu),
        _ if ["mlx", "ib", "hsi", "hfi", "cxi", "bxi", "eth", "en"]
            .iter()
            .any(|p| name.starts_with(p)) =>
        {
            Some(DeviceKind::Nic)
        }
        _ => None,
    }
}

/// Whether a PCI device that no OS device describes is a GPU by its class and vendor alone:
/// what a node whose hwloc has only its PCI component (no CUDA, NVML, ROCm SMI or Level Zero
/// component, as Debian's) knows of its GPUs. A 3D controller (class 0x0302), a display
/// controller of another kind (0x0380) or a processing accelerator (0x1200) from NVIDIA, AMD
/// or Intel; a VGA controller (0x0300) from NVIDIA or AMD only, since Intel's is the
/// processor's integrated graphics. A BMC's display adapter (ASPEED, Matrox) is never one.
fn pci_gpu(class: u16, vendor: u16) -> bool {
    matches!(
        (class, vendor),
        (0x0302 | 0x0380 | 0x1200, 0x10de | 0x1002 | 0x8086) | (0x0300, 0x10de | 0x1002)
    )
}

/// The PCI host bridge above `pci`, by the buses below it (`0000:[17-19]`, as lstopo writes
/// it), if the topology has one.
fn host_bridge(pci: &TopologyObject) -> Option<String> {
    pci.ancestors().find_map(|a| match a.attributes() {
        Some(ObjectAttributes::Bridge(b)) if b.upstream_type() == BridgeType::Host => {
            match b.downstream_attributes() {
                Some(DownstreamAttributes::PCI(p)) => Some(format!(
                    "{:04x}:[{:02x}-{:02x}]",
                    p.domain(),
                    p.secondary_bus(),
                    p.subordinate_bus()
                )),
                _ => None,
            }
        }
        _ => None,
    })
}

/// The GPUs and NICs of a topology, in PCI bus order: each PCI device with an OS device of
/// either kind (a GPU when it has both), or without one a GPU by its class ([`pci_gpu`]), with
/// its vendor, bus id, UUID and locality.
fn devices(topology: &Topology) -> Vec<DeviceSpec> {
    let mut out = Vec::new();
    for pci in topology.pci_devices() {
        let Some(ObjectAttributes::PCIDevice(attr)) = pci.attributes() else {
            continue;
        };
        let osdevs: Vec<&TopologyObject> = pci
            .io_children()
            .filter(|c| c.object_type() == ObjectType::OSDevice)
            .collect();
        let kinds: Vec<DeviceKind> = osdevs.iter().filter_map(|o| classify(o)).collect();
        let by_class = kinds.is_empty() && pci_gpu(attr.class_id(), attr.vendor_id());
        let kind = if kinds.contains(&DeviceKind::Gpu) || by_class {
            DeviceKind::Gpu
        } else if kinds.contains(&DeviceKind::Nic) {
            DeviceKind::Nic
        } else {
            continue;
        };
        let info = |key: &str| {
            osdevs
                .iter()
                .find_map(|o| o.info(key).map(|v| v.to_string_lossy().into_owned()))
        };
        let uuid = ["NVIDIAUUID", "AMDUUID", "LevelZeroUUID"]
            .iter()
            .find_map(|k| info(k));
        let vendor = vendor_name(attr.vendor_id())
            .map(str::to_string)
            .or_else(|| info("GPUVendor"))
            .unwrap_or_else(|| format!("0x{:04x}", attr.vendor_id()));
        let (pus_os, near) = match pci.first_non_io_ancestor() {
            Some(a) => (
                a.cpuset().map(|c| os_indexes(&c)).unwrap_or_default(),
                format!("{} L#{}", a.object_type(), a.logical_index()),
            ),
            None => (Vec::new(), "Machine L#0".to_string()),
        };
        out.push((
            (
                u32::from(attr.domain()),
                attr.bus_id(),
                attr.bus_device(),
                attr.function(),
            ),
            DeviceSpec {
                kind,
                vendor,
                bus_id: format!(
                    "{:04x}:{:02x}:{:02x}.{:x}",
                    attr.domain(),
                    attr.bus_id(),
                    attr.bus_device(),
                    attr.function()
                ),
                uuid,
                names: osdevs
                    .iter()
                    .filter(|o| by_class || classify(o).is_some())
                    .filter_map(|o| o.name().map(|n| n.to_string_lossy().into_owned()))
                    .collect(),
                pus_os,
                near,
                bridge: host_bridge(pci),
            },
        ));
    }
    out.sort_by_key(|(bus, _)| *bus);
    out.into_iter().map(|(_, d)| d).collect()
}

/// A topology as hwloc XML (v2), every PU and NUMA node allowed: the caller's own restriction
/// (a job's cgroup, slurmd confined to specialised CPUs) is not the machine's and is not
/// written. With [`Source::Live`], this host's, for admins to save at boot and name in the
/// plugin's `topology=` setting, and for the plugin's topology cache.
pub fn export_xml(source: &Source) -> Result<String, LoadError> {
    export_xml_with(source, Io::Keep)
}

/// [`export_xml`] with the I/O objects `io` keeps: slurmd's topology cache uses [`Io::Kernel`].
pub fn export_xml_with(source: &Source, io: Io) -> Result<String, LoadError> {
    let (mut topology, _) = load_hwloc_with(source, io)?;
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
        let e = load(&Source::Xml(bad.clone())).unwrap_err();
        assert!(matches!(e, LoadError::InvalidXml { .. }), "{e}");
        assert!(
            e.to_string()
                .contains("line 1: a tag or comment that never ends"),
            "{e}"
        );
        // A real topology cut short: the message names the last line and the open element.
        let cut = "<?xml version=\"1.0\"?>\n<topology version=\"2.0\">\n  <object \
                   type=\"Machine\" os_index=\"0\">\n    <object type=\"Package\"/>\n";
        std::fs::write(&bad, cut).unwrap();
        let e = load(&Source::Xml(bad)).unwrap_err().to_string();
        assert!(
            e.contains("it ends at line 4 with <object> (opened at line 3) still open"),
            "{e}"
        );
        assert!(e.contains("the file looks truncated"), "{e}");
        let e = xml_problem("# spank-lama\n\nA SPANK plugin <b>and</b> more\n");
        assert!(
            e.starts_with("it is not XML at all: it starts with \"# spank-lama\""),
            "{e}"
        );
    }

    #[test]
    fn xml_problems_name_their_line() {
        assert_eq!(
            xml_problem("<a>\n<b>\n</a>"),
            "line 3: </a> closes <b> opened at line 2"
        );
        assert_eq!(xml_problem("<a/>\n</b>"), "line 2: </b> closes nothing");
        assert_eq!(xml_problem("<a>\0"), "line 1: a NUL byte");
        assert_eq!(
            xml_problem("<?xml version=\"1.0\"?><!-- x --><a/>"),
            "it has no <topology> element"
        );
        assert!(
            xml_problem("<topology>\n<object type=\"Machine\"/>\n</topology>")
                .starts_with("the XML is well-formed")
        );
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

#[cfg(test)]
mod device_tests {
    use super::*;

    fn synth(s: &str) -> Machine {
        load(&Source::Synthetic(s.to_string())).unwrap()
    }

    fn io(name: &str) -> Option<Machine> {
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../tests/topologies/io")
            .join(name);
        assert!(path.is_file(), "{} is missing", path.display());
        Some(load(&Source::Xml(path)).expect("a real machine's XML"))
    }

    fn table(m: &Machine) -> Vec<String> {
        m.devices()
            .iter()
            .map(|d| {
                let cpus: Vec<u32> = d.pus.clone().map(|p| m.pus()[p as usize].os).collect();
                format!(
                    "{}{} {} {} {} {} near {} cpus {}",
                    d.kind,
                    d.index,
                    d.vendor,
                    d.bus_id,
                    d.names.join(","),
                    d.uuid.as_deref().unwrap_or("-"),
                    d.near,
                    CpuList::from_cpus(cpus)
                )
            })
            .collect()
    }

    /// Expectations checked by hand against each XML: the PCIDev's `pci_busid`, its OSDev
    /// children's names and NVIDIAUUID/AMDUUID infos, the vendor id in `pci_type`, and the
    /// cpuset of its nearest non-I/O ancestor (Lassen's Package os_index 0 has cpuset
    /// 0x00ffffff,0xffffffff,0xffffff00 = PUs 8-87; Tioga's L3 os_index 6 has
    /// 0x00ff0000,,0x00ff0000,0x0 = 48-55,112-119). BMC display adapters (ASPEED, class 0300,
    /// no compute OS device) and disks are not devices.
    #[test]
    fn gpus_and_nics_of_real_machines() {
        let Some(lassen) = io("coral-lassen.xml") else {
            return;
        };
        assert_eq!(
            table(&lassen),
            [
                "nic0 Mellanox 0003:01:00.0 hsi0,mlx5_0 - near Package L#0 cpus 8-87",
                "nic1 Mellanox 0003:01:00.1 hsi1,mlx5_1 - near Package L#0 cpus 8-87",
                "gpu0 NVIDIA 0004:04:00.0 cuda0,nvml0 GPU-04732404-7fc3-5ae6-cddd-c879b3a379bb near Package L#0 cpus 8-87",
                "gpu1 NVIDIA 0004:05:00.0 cuda1,nvml1 GPU-c6f92517-d6ad-e039-6cbf-fc1d05507a3c near Package L#0 cpus 8-87",
                "nic2 Broadcom 0005:01:00.0 enP5p1s0f0 - near Package L#0 cpus 8-87",
                "nic3 Broadcom 0005:01:00.1 enP5p1s0f1 - near Package L#0 cpus 8-87",
                "nic4 Mellanox 0033:01:00.0 hsi2,mlx5_2 - near Package L#1 cpus 96-175",
                "nic5 Mellanox 0033:01:00.1 hsi3,mlx5_3 - near Package L#1 cpus 96-175",
                "gpu2 NVIDIA 0035:03:00.0 cuda2,nvml2 GPU-3e0871a1-dd1a-b447-40f2-86e6745c3206 near Package L#1 cpus 96-175",
                "gpu3 NVIDIA 0035:04:00.0 cuda3,nvml3 GPU-94d6ebb6-7f93-d19f-5b24-d8e69b74e4e7 near Package L#1 cpus 96-175",
            ]
        );
        // Tioga: GPU locality finer than a package (one L3 each), not in index order.
        let tioga = io("eas-tioga.xml").expect("the io folder is complete");
        let t = table(&tioga);
        assert_eq!(t.len(), 13);
        assert_eq!(
            t[1],
            "gpu0 AMD 0000:c1:00.0 rsmi0 4a7c19da329a2b8c near L3Cache L#6 cpus 48-55,112-119"
        );
        assert_eq!(
            t[7],
            "gpu4 AMD 0000:d1:00.0 rsmi4 e850aef0615db971 near L3Cache L#0 cpus 0-7,64-71"
        );
        assert_eq!(
            t[2],
            "nic1 HPE 0000:c5:00.0 hsi0 - near L3Cache L#7 cpus 56-63,120-127"
        );
        // g4dn: 8 T4s, each one device for its three OS devices.
        let g4dn = io("g4dnmetal.xml").expect("the io folder is complete");
        let gpus: Vec<&lama_engine::Device> = g4dn
            .devices()
            .iter()
            .filter(|d| d.kind == DeviceKind::Gpu)
            .collect();
        assert_eq!(gpus.len(), 8);
        assert_eq!(gpus[7].names, ["cuda7", "opencl0d7", "nvml7"]);
        // Their PCIe host bridges, by hand from the XML's depth-0 Bridges: two GPUs under each
        // (18 and 19 under [17-19], 35 and 36 under [34-36], ...).
        let bridges: Vec<&str> = gpus.iter().filter_map(|d| d.bridge.as_deref()).collect();
        assert_eq!(
            bridges,
            [
                "0000:[17-19]",
                "0000:[17-19]",
                "0000:[34-36]",
                "0000:[34-36]",
                "0000:[e6-e8]",
                "0000:[e6-e8]",
                "0000:[f3-f5]",
                "0000:[f3-f5]"
            ]
        );
        // Corona: MI50s seen only as OpenCL devices, no UUID.
        let corona = io("epyc-corona.xml").expect("the io folder is complete");
        let t = table(&corona);
        assert_eq!(
            t[2],
            "gpu0 AMD 0000:13:00.0 opencl0d0 - near Group L#1 cpus 6-11,54-59"
        );
        assert_eq!(
            corona
                .devices()
                .iter()
                .filter(|d| d.kind == DeviceKind::Gpu)
                .count(),
            4
        );
        // A machine without I/O objects has no devices.
        assert!(synth("pack:2 core:2 pu:1").devices().is_empty());
    }

    /// A node whose hwloc has only its PCI component: the GPUs have no CUDA or NVML OS device
    /// (one has nvidia-drm's `card1`), and are known by class and vendor alone. By hand from
    /// the XML: the NVIDIA 3D controllers (`pci_type="0302 [10de:...`) at 04:00.0 and 05:00.0
    /// (Package 0, PU 0), 84:00.0 and 85:00.0 (Package 1, PU 1); the ASPEED VGA at 10:00.0
    /// (with `card0`) and the Intel VGA at 00:02.0 are no GPUs; the NICs keep their names.
    #[test]
    fn gpus_by_pci_class_alone() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../lama-cli/tests/golden/stock-gpu-node.xml");
        let m = load(&Source::Xml(path.clone())).unwrap();
        assert_eq!(
            table(&m),
            [
                "nic0 Intel 0000:01:00.0 eno1 - near Package L#0 cpus 0",
                "gpu0 NVIDIA 0000:04:00.0  - near Package L#0 cpus 0",
                "gpu1 NVIDIA 0000:05:00.0  - near Package L#0 cpus 0",
                "nic1 Mellanox 0000:06:00.0 ib0,mlx5_0 - near Package L#0 cpus 0",
                "gpu2 NVIDIA 0000:84:00.0  - near Package L#1 cpus 1",
                "gpu3 NVIDIA 0000:85:00.0 card1 - near Package L#1 cpus 1",
                "nic2 Mellanox 0000:86:00.0 ib1,mlx5_1 - near Package L#1 cpus 1",
            ]
        );
        // Without I/O objects (a CPU step), no device at all.
        let cpu_only = load_whole_with(&Source::Xml(path), Io::Skip).unwrap();
        assert!(cpu_only.devices().is_empty());
        assert_eq!(cpu_only.pus().len(), 2);
    }

    #[test]
    fn damaged_input_is_judged_before_hwloc_reads_it() {
        assert_eq!(synthetic_pus("pack:2 core:6 pu:2"), Some(24));
        assert_eq!(
            synthetic_pus("pack:2(indexes=0,1) [numa] core:4 pu:2"),
            Some(16)
        );
        assert_eq!(synthetic_pus("pack:65536 pu:1"), Some(65536));
        assert_eq!(synthetic_pus("pack:x"), None);
        // What hwloc writes: empty (zero) words, the infinite prefix.
        for ok in ["0x0000000f", "0xffffffff,,0x0", "0xf...f,0x00000001", "0x1"] {
            assert!(is_bitmap(ok), "{ok}");
        }
        for bad in ["0xzz", "0x123456789", "ff", "0x", "0x1,0xf...f"] {
            assert!(!is_bitmap(bad), "{bad}");
        }
        assert_eq!(
            attribute(r#"<object type="PU" os_index="3""#, "os_index"),
            Some("3")
        );
        assert_eq!(
            attribute(r#"<object complete_cpuset="0x1" cpuset="0x2""#, "cpuset"),
            Some("0x2")
        );
        let v2 = r#"<topology version="2.0"><object type="PU" os_index="1048576" cpuset="0x1" complete_cpuset="0x1"/>"#;
        assert_eq!(xml_content_problem(v2), None);
        // A CPU set without its complete one, however quoted, which crashes hwloc (fuzzing).
        for tag in [
            r#"<object type="Core" cpuset="0x3" complete_cpuste="0x3">"#,
            r#"<object type="Core" cpuset = '0x3'>"#,
        ] {
            let e = xml_content_problem(&format!("<topology version=\"2.0\">\n{tag}")).unwrap();
            assert!(
                e.starts_with("line 2: an object with a cpuset but no complete_cpuset"),
                "{e}"
            );
        }
        // A type hwloc reads as an abbreviation ("NUM": a NUMA node), and a NUMA node without
        // its os_index: hwloc then sets bit 2^32-1 of a node set (512 MiB, fuzzing).
        let bad =
            r#"<topology version="2.0"><object type="NUM" cpuset="0x1" complete_cpuset="0x1">"#;
        assert!(xml_content_problem(bad)
            .unwrap()
            .contains("an object of type \"NUM\", which hwloc does not write"));
        let bad = bad.replace("\"NUM\"", "\"NUMANode\"");
        assert!(xml_content_problem(&bad)
            .unwrap()
            .contains("a NUMANode without its os_index"));
        // An encoding other than UTF-8 (hwlocality panicked on libxml2's EILSEQ, fuzzing).
        let utf7 = format!("<?xml version=\"1.0\" encoding=\"UTF-7\"?>\n{v2}");
        assert!(xml_content_problem(&utf7)
            .unwrap()
            .starts_with("line 1: the encoding is \"UTF-7\""));
        let far = v2.replace("1048576", "1048577");
        assert!(xml_content_problem(&far)
            .unwrap()
            .contains("os_index=\"1048577\""));
        let v3 = v2.replace("2.0", "3.0");
        assert!(xml_content_problem(&v3)
            .unwrap()
            .contains("an hwloc 3.0 export"));
        // Every shared real machine passes.
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/topologies");
        for sub in ["", "io"] {
            let entries = std::fs::read_dir(dir.join(sub)).expect("the test topologies");
            for e in entries.flatten() {
                let p = e.path();
                if p.extension().is_some_and(|x| x == "xml") {
                    let text = std::fs::read_to_string(&p).unwrap();
                    assert_eq!(xml_content_problem(&text), None, "{}", p.display());
                }
            }
        }
    }

    /// The fuzzer's find: one object's complete_cpuset misspelled made hwloc (2.9, 2.12)
    /// crash with SIGSEGV in `lama map --topology` and, for a site file, in slurmd. Refused with
    /// the line instead (without the check this test dies with the process).
    #[test]
    fn an_object_without_its_complete_cpuset_is_refused_not_a_crash() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../tests/topologies/Intel-Skylake-2xXeon6140.xml");
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(load_xml_text(&text, &path, Io::Skip).is_ok());
        let typo = text.replacen("complete_cpuset=", "complete_cpuste=", 1);
        match load_xml_text(&typo, &path, Io::Skip) {
            Err(LoadError::InvalidXml { why, .. }) => {
                assert!(why.contains("a cpuset but no complete_cpuset"), "{why}")
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn pci_class_and_vendor_rules() {
        assert!(pci_gpu(0x0302, 0x10de)); // NVIDIA 3D controller (A100, H100)
        assert!(pci_gpu(0x0300, 0x10de)); // NVIDIA VGA (workstation cards)
        assert!(pci_gpu(0x0380, 0x1002)); // AMD display controller (MI250X)
        assert!(pci_gpu(0x1200, 0x1002)); // AMD processing accelerator (MI300)
        assert!(pci_gpu(0x0380, 0x8086)); // Intel Data Center GPU Max
        assert!(!pci_gpu(0x0300, 0x8086)); // Intel integrated graphics
        assert!(!pci_gpu(0x0300, 0x1a03)); // ASPEED BMC
        assert!(!pci_gpu(0x0300, 0x102b)); // Matrox BMC
        assert!(!pci_gpu(0x0200, 0x10de)); // not a display class
    }
}

/// Whether this process may open the device file `path`, as the devices controller judges it
/// (Slurm's `ConstrainDevices=yes`: cgroup v1's `devices.allow`/`devices.deny`, or v2's BPF
/// device program), without opening it: `access(2)` passes a device file's check through
/// `devcgroup_inode_permission`, as `open(2)` does, and no driver is woken. `Ok(true)`:
/// allowed; `Ok(false)`: denied by the controller (`EPERM`); `Err`: not known (`EACCES` from
/// the file's mode, no such file, ...).
pub fn device_access(path: &std::path::Path) -> std::io::Result<bool> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(path.as_os_str().as_bytes())
        .map_err(|_| std::io::Error::from(std::io::ErrorKind::InvalidInput))?;
    // SAFETY: `c` is a NUL-terminated path that outlives the call; access(2) writes nothing.
    if unsafe { libc::access(c.as_ptr(), libc::R_OK | libc::W_OK) } == 0 {
        return Ok(true);
    }
    let e = std::io::Error::last_os_error();
    match e.raw_os_error() {
        Some(libc::EPERM) => Ok(false),
        _ => Err(e),
    }
}

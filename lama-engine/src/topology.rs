//! The topology model of one node: its processing units and the objects above them.
//!
//! A [`Machine`] is plain data: processing units (PUs) in hwloc's logical order, each with its OS
//! index and whether the job may use it, and for every object level (socket, die, NUMA, caches,
//! core) the objects in logical order, each covering a contiguous run of PUs. It is built with a
//! [`MachineBuilder`], which the hwloc adapter (`lama-hwloc`) drives from a real topology, or
//! from a small synthetic description ([`Machine::synthetic`]) in tests.
//!
//! Logical indexes (positions in these lists) and OS indexes (what the kernel calls a CPU) are kept
//! apart everywhere: the engine computes in logical space and converts to OS indexes only when it
//! reports a binding.

use crate::cpulist::CpuList;
use crate::device::{Device, DeviceSpec};
use crate::level::{Level, ALL_LEVELS};
use std::collections::HashMap;
use std::ops::Range;

/// One processing unit (hardware thread).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pu {
    /// The kernel's CPU number.
    pub os: u32,
    /// Whether the job may use it: allowed, online, and inside any restriction.
    pub available: bool,
}

/// One object of a level (a socket, a cache, a core, ...).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Object {
    /// The OS index hwloc reports (package id, NUMA node number), if any.
    pub os: Option<u32>,
    /// The PUs it covers: a contiguous range of logical PU indexes.
    pub pus: Range<u32>,
}

/// A topology that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TopologyError {
    /// Two PUs share an OS index.
    #[error("PU OS index {0} appears twice")]
    DuplicatePu(u32),
    /// An object names a PU the machine does not have.
    #[error("a {level} object refers to PU P#{os}, which the machine does not have", level = .level.name())]
    UnknownPu {
        /// The object's level.
        level: Level,
        /// The PU's OS index.
        os: u32,
    },
    /// An object's PUs are not consecutive in logical order.
    #[error("a {level} object covers PUs that are not consecutive in logical order ({pus}); hwloc never builds such a tree", level = .level.name())]
    NotContiguous {
        /// The object's level.
        level: Level,
        /// Its PUs (OS indexes).
        pus: String,
    },
    /// Two objects of one level overlap without one containing the other.
    #[error("two {level} objects overlap", level = .level.name())]
    Overlap {
        /// The level.
        level: Level,
    },
    /// The level cannot hold objects (node, board, hardware thread).
    #[error("'{0}' is not an object level")]
    NotAnObjectLevel(Level),
    /// The machine has no PU at all.
    #[error("the topology has no processing unit")]
    NoPu,
    /// A synthetic description could not be read.
    #[error("invalid synthetic topology '{input}': {reason} (example: \"pack:2 core:4 pu:2\")")]
    Synthetic {
        /// The description given.
        input: String,
        /// What is wrong with it.
        reason: String,
    },
}

/// A kind of CPU core on a machine with several (performance and efficiency cores).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CpuKind {
    /// What the topology calls it (`IntelCore`, `IntelAtom`), else `E-cores`/`P-cores` when a
    /// machine has two kinds, else `kind N`.
    pub name: String,
    /// What else the topology says of it (`max 3900 MHz`), possibly empty.
    pub details: String,
    /// OS indexes of its CPUs.
    pub cpus: CpuList,
}

/// Builds a [`Machine`] from PUs and objects given in hwloc's logical order.
#[derive(Debug, Default)]
pub struct MachineBuilder {
    name: String,
    pus: Vec<Pu>,
    objects: Vec<(Level, Option<u32>, Vec<u32>)>,
    devices: Vec<DeviceSpec>,
    offline: CpuList,
    kinds: Vec<CpuKind>,
}

impl MachineBuilder {
    /// Records the CPUs the topology lists but the OS has offline (they have no PU).
    pub fn offline(&mut self, cpus: CpuList) -> &mut Self {
        self.offline = cpus;
        self
    }

    /// Adds a kind of CPU core, from the most power-efficient to the most performant.
    pub fn kind(&mut self, kind: CpuKind) -> &mut Self {
        self.kinds.push(kind);
        self
    }

    /// A builder for a machine called `name` (a host name or a file name, for messages).
    pub fn new(name: impl Into<String>) -> Self {
        MachineBuilder {
            name: name.into(),
            ..Self::default()
        }
    }

    /// Adds the next PU in logical order.
    pub fn pu(&mut self, os: u32, available: bool) -> &mut Self {
        self.pus.push(Pu { os, available });
        self
    }

    /// Adds an object covering the PUs with these OS indexes. Objects of one level are given in
    /// logical order; an object without PUs (a memory-only NUMA node) is ignored.
    pub fn object(&mut self, level: Level, os: Option<u32>, pus_os: &[u32]) -> &mut Self {
        self.objects.push((level, os, pus_os.to_vec()));
        self
    }

    /// Adds a device (GPU or NIC), in PCI bus order; each kind is numbered from 0 in the order
    /// its devices are added.
    pub fn device(&mut self, device: DeviceSpec) -> &mut Self {
        self.devices.push(device);
        self
    }

    /// Checks and builds the machine.
    pub fn build(self) -> Result<Machine, TopologyError> {
        if self.pus.is_empty() {
            return Err(TopologyError::NoPu);
        }
        let mut logical_of: HashMap<u32, u32> = HashMap::with_capacity(self.pus.len());
        for (i, pu) in self.pus.iter().enumerate() {
            if logical_of.insert(pu.os, i as u32).is_some() {
                return Err(TopologyError::DuplicatePu(pu.os));
            }
        }
        let mut objects: Vec<Vec<Object>> = vec![Vec::new(); ALL_LEVELS.len()];
        for (level, os, pus_os) in self.objects {
            if !level.is_object_level() {
                return Err(TopologyError::NotAnObjectLevel(level));
            }
            if pus_os.is_empty() {
                continue;
            }
            let mut logical = Vec::with_capacity(pus_os.len());
            for &p in &pus_os {
                let l = *logical_of
                    .get(&p)
                    .ok_or(TopologyError::UnknownPu { level, os: p })?;
                logical.push(l);
            }
            logical.sort_unstable();
            logical.dedup();
            let (first, last) = (logical[0], logical[logical.len() - 1]);
            if (last - first + 1) as usize != logical.len() {
                return Err(TopologyError::NotContiguous {
                    level,
                    pus: CpuList::from_cpus(pus_os).to_string(),
                });
            }
            objects[level.index()].push(Object {
                os,
                pus: first..last + 1,
            });
        }
        for (i, objs) in objects.iter_mut().enumerate() {
            objs.sort_by_key(|o| (o.pus.start, std::cmp::Reverse(o.pus.end)));
            // Objects of one level are disjoint or nested (NUMA nodes attached at the same place
            // share their PUs); a partial overlap cannot come from hwloc.
            for w in objs.windows(2) {
                let (a, b) = (&w[0].pus, &w[1].pus);
                if b.start < a.end && b.end > a.end {
                    return Err(TopologyError::Overlap {
                        level: ALL_LEVELS[i],
                    });
                }
            }
        }
        let mut devices = Vec::with_capacity(self.devices.len());
        let mut counts = [0u32; 2];
        for d in self.devices {
            let mut logical: Vec<u32> = d
                .pus_os
                .iter()
                .filter_map(|p| logical_of.get(p).copied())
                .collect();
            logical.sort_unstable();
            logical.dedup();
            // A device whose locality names no PU of this machine is near nothing in
            // particular: the whole machine.
            let pus = match (logical.first(), logical.last()) {
                (Some(&a), Some(&b)) if (b - a + 1) as usize == logical.len() => a..b + 1,
                (Some(_), Some(_)) => {
                    return Err(TopologyError::NotContiguous {
                        level: Level::Node,
                        pus: CpuList::from_cpus(d.pus_os).to_string(),
                    })
                }
                _ => 0..self.pus.len() as u32,
            };
            let k = d.kind as usize;
            devices.push(Device {
                kind: d.kind,
                index: counts[k],
                vendor: d.vendor,
                bus_id: d.bus_id,
                uuid: d.uuid,
                names: d.names,
                pus,
                near: d.near,
                bridge: d.bridge,
            });
            counts[k] += 1;
        }
        Ok(Machine {
            name: self.name,
            pus: self.pus,
            objects,
            devices,
            offline: self.offline,
            // One kind tells nothing.
            kinds: if self.kinds.len() > 1 {
                self.kinds
            } else {
                Vec::new()
            },
        })
    }
}

/// One node's topology.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Machine {
    name: String,
    pus: Vec<Pu>,
    objects: Vec<Vec<Object>>,
    devices: Vec<Device>,
    offline: CpuList,
    kinds: Vec<CpuKind>,
}

impl Machine {
    /// OS indexes of the CPUs the topology lists but the OS has offline: no PU, never used.
    pub fn offline(&self) -> &CpuList {
        &self.offline
    }

    /// The kinds of CPU cores, most power-efficient first; empty unless there are several.
    pub fn kinds(&self) -> &[CpuKind] {
        &self.kinds
    }

    /// The name given to the builder.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// All PUs in logical order, available or not.
    pub fn pus(&self) -> &[Pu] {
        &self.pus
    }

    /// The objects of `level` in logical order (empty for node, board, hardware thread and
    /// levels the machine lacks).
    pub fn objects(&self, level: Level) -> &[Object] {
        &self.objects[level.index()]
    }

    /// The machine's GPUs and NICs (each kind in PCI bus order), none when its topology has no
    /// I/O objects.
    pub fn devices(&self) -> &[Device] {
        &self.devices
    }

    /// The same machine without its devices, as a topology loaded without I/O objects is.
    pub fn without_devices(mut self) -> Machine {
        self.devices.clear();
        self
    }

    /// OS indexes of the available PUs.
    pub fn available(&self) -> CpuList {
        CpuList::from_cpus(self.pus.iter().filter(|p| p.available).map(|p| p.os))
    }

    /// The same machine with only the PUs of `allowed` (OS indexes) left available, as a job
    /// cpuset or `--restrict` does. PUs already unavailable stay so.
    pub fn restrict(&self, allowed: &CpuList) -> Machine {
        let mut m = self.clone();
        for pu in &mut m.pus {
            pu.available &= allowed.contains(pu.os);
        }
        m
    }

    /// The logical index of the PU with OS index `os`.
    pub fn logical_of(&self, os: u32) -> Option<u32> {
        self.pus.iter().position(|p| p.os == os).map(|i| i as u32)
    }

    /// A machine from a uniform synthetic description such as `"pack:2 core:4 pu:2"`, numbered
    /// like hwloc does (OS index = logical index). Types: `pack`/`package`/`socket`, `die`,
    /// `numa`, `l3`, `l2`, `l1` (or `l3cache`...), `core`, `pu`, and `group` (ignored by LAMA).
    /// The last type must be `pu`. The hwloc adapter accepts hwloc's full syntax; this one is for
    /// tests and examples of the pure engine.
    pub fn synthetic(description: &str) -> Result<Machine, TopologyError> {
        let err = |reason: String| TopologyError::Synthetic {
            input: description.to_string(),
            reason,
        };
        let mut levels: Vec<(Option<Level>, u32)> = Vec::new();
        for part in description.split_whitespace() {
            let (kind, count) = part
                .split_once(':')
                .ok_or_else(|| err(format!("'{part}' should be TYPE:COUNT")))?;
            let count: u32 = count
                .parse()
                .ok()
                .filter(|c| (1..=4096).contains(c))
                .ok_or_else(|| err(format!("'{count}' is not a count from 1 to 4096")))?;
            let level = match kind.to_ascii_lowercase().as_str() {
                "pack" | "package" | "socket" => Some(Level::Socket),
                "die" => Some(Level::Die),
                "numa" | "numanode" => Some(Level::Numa),
                "l3" | "l3cache" => Some(Level::L3),
                "l2" | "l2cache" => Some(Level::L2),
                "l1" | "l1cache" | "l1d" => Some(Level::L1),
                "core" => Some(Level::Core),
                "pu" => Some(Level::Hwthread),
                "group" => None,
                other => return Err(err(format!("unknown type '{other}'"))),
            };
            levels.push((level, count));
        }
        match levels.last() {
            Some((Some(Level::Hwthread), _)) => {}
            _ => return Err(err("the last type must be pu".to_string())),
        }
        let total: u64 = levels.iter().map(|(_, c)| u64::from(*c)).product();
        if total > 1 << 20 {
            return Err(err(format!("{total} PUs is too many")));
        }
        let total = total as u32;
        let mut b = MachineBuilder::new(description);
        for os in 0..total {
            b.pu(os, true);
        }
        // Each level's objects cover equal consecutive runs of PUs.
        let mut below: u32 = total;
        for (level, count) in &levels {
            below /= count;
            if let Some(level) = level.filter(|l| l.is_object_level()) {
                for i in 0..total / below {
                    let pus: Vec<u32> = (i * below..(i + 1) * below).collect();
                    b.object(level, Some(i), &pus);
                }
            }
        }
        b.build()
    }
}

/// A two-core machine whose PU OS indexes are not in logical order (0, 2 | 1, 3), as hwloc
/// reports on many Intel machines; shared by tests.
#[cfg(test)]
pub(crate) fn scrambled_machine() -> Machine {
    let mut b = MachineBuilder::new("scrambled");
    for os in [0, 2, 1, 3] {
        b.pu(os, true);
    }
    b.object(Level::Core, Some(0), &[0, 2]);
    b.object(Level::Core, Some(1), &[1, 3]);
    b.build().expect("a valid machine")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn synthetic_builds_a_uniform_tree() {
        let m = Machine::synthetic("pack:2 core:4 pu:2").unwrap();
        assert_eq!(m.pus().len(), 16);
        assert_eq!(m.objects(Level::Socket).len(), 2);
        assert_eq!(m.objects(Level::Core).len(), 8);
        assert_eq!(m.objects(Level::Core)[3].pus, 6..8);
        assert!(m.objects(Level::L3).is_empty());
    }

    #[test]
    fn synthetic_rejects_what_it_cannot_read() {
        for bad in [
            "",
            "pack:2 core:x pu:2",
            "pack:2 core:2",
            "pack:2 cpu:2 pu:1",
            "pack2 pu:1",
        ] {
            assert!(Machine::synthetic(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn builder_keeps_logical_and_os_indexes_apart() {
        let m = scrambled_machine();
        assert_eq!(m.logical_of(1), Some(2));
        assert_eq!(m.objects(Level::Core)[1].pus, 2..4);
    }

    #[test]
    fn builder_rejects_inconsistent_input() {
        let mut b = MachineBuilder::new("x");
        b.pu(0, true).pu(1, true).pu(2, true);
        b.object(Level::Core, None, &[0, 2]);
        assert!(matches!(
            b.build(),
            Err(TopologyError::NotContiguous { .. })
        ));

        let mut b = MachineBuilder::new("x");
        b.pu(0, true).pu(0, true);
        assert_eq!(b.build(), Err(TopologyError::DuplicatePu(0)));

        let mut b = MachineBuilder::new("x");
        b.pu(0, true);
        b.object(Level::Core, None, &[7]);
        assert!(matches!(
            b.build(),
            Err(TopologyError::UnknownPu { os: 7, .. })
        ));

        let mut b = MachineBuilder::new("x");
        b.pu(0, true).pu(1, true).pu(2, true);
        b.object(Level::L2, None, &[0, 1]);
        b.object(Level::L2, None, &[1, 2]);
        assert!(matches!(b.build(), Err(TopologyError::Overlap { .. })));

        assert_eq!(MachineBuilder::new("x").build(), Err(TopologyError::NoPu));
    }

    #[test]
    fn restrict_only_removes() {
        let m = Machine::synthetic("core:4 pu:1").unwrap();
        let r = m.restrict(&CpuList::from_cpus([1, 2, 9]));
        assert_eq!(r.available(), CpuList::from_cpus([1, 2]));
        let rr = r.restrict(&CpuList::from_cpus([0, 1]));
        assert_eq!(rr.available(), CpuList::from_cpus([1]));
    }
}

//! Devices beside the CPUs: the GPUs and network cards of a node, each one PCI function with
//! its identity and its locality (the PUs of its nearest non-I/O ancestor in the topology).
//!
//! A device is what a task is given, not what the operating system names: one GPU has several
//! OS devices (`cuda0` and `nvml0`, or `rsmi0` and `opencl0d0`) and is one [`Device`] here, with
//! all their names. GPUs and NICs are each numbered in PCI bus order (the order of `nvidia-smi`
//! with `CUDA_DEVICE_ORDER=PCI_BUS_ID`, and of a resource manager that lists them by bus).

use std::fmt;
use std::ops::Range;

/// What a device is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DeviceKind {
    /// A GPU or another compute accelerator (CUDA, ROCm, Level Zero, OpenCL device).
    Gpu,
    /// A network card (InfiniBand, Slingshot, Ethernet, Omni-Path, ...).
    Nic,
}

impl DeviceKind {
    /// `gpu` or `nic`.
    pub const fn name(self) -> &'static str {
        match self {
            DeviceKind::Gpu => "gpu",
            DeviceKind::Nic => "nic",
        }
    }
}

impl fmt::Display for DeviceKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One device of a machine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Device {
    /// GPU or NIC.
    pub kind: DeviceKind,
    /// Its index among the machine's devices of its kind, in PCI bus order (from 0).
    pub index: u32,
    /// The vendor (`NVIDIA`, `AMD`, `Intel`, `Mellanox`, `HPE`, ..., or the PCI vendor id).
    pub vendor: String,
    /// The PCI bus id, `domain:bus:device.function` in hexadecimal (`0000:04:00.0`).
    pub bus_id: String,
    /// A unique id when the topology records one (the GPU's UUID).
    pub uuid: Option<String>,
    /// The operating system's names for it (`cuda0`, `nvml0`; `mlx5_0`, `ib0`).
    pub names: Vec<String>,
    /// The logical PUs of its locality: the nearest object above it that holds CPUs.
    pub pus: Range<u32>,
    /// What that object is, as hwloc names it (`Package L#1`, `NUMANode L#3`, `L3 L#2`,
    /// `Machine L#0`).
    pub near: String,
    /// The PCI host bridge it is under, by the buses below it (`0000:[17-19]`), when the
    /// topology records it: devices under one host bridge share its link to the processor.
    pub bridge: Option<String>,
}

/// A device as a topology adapter describes it: locality given by OS indexes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceSpec {
    /// GPU or NIC.
    pub kind: DeviceKind,
    /// The vendor.
    pub vendor: String,
    /// The PCI bus id.
    pub bus_id: String,
    /// A unique id, if any.
    pub uuid: Option<String>,
    /// The OS device names.
    pub names: Vec<String>,
    /// The OS indexes of the PUs of its locality.
    pub pus_os: Vec<u32>,
    /// What the locality object is.
    pub near: String,
    /// The PCI host bridge it is under ([`Device::bridge`]).
    pub bridge: Option<String>,
}

/// The PCI vendor's name for the vendor ids of GPUs and NICs in HPC nodes, else `None`.
pub fn vendor_name(id: u16) -> Option<&'static str> {
    Some(match id {
        0x10de => "NVIDIA",
        0x1002 => "AMD",
        0x8086 => "Intel",
        0x15b3 => "Mellanox",
        0x17db => "HPE",
        0x1590 => "HPE",
        0x14e4 => "Broadcom",
        0x1077 => "QLogic",
        0x1fc1 => "QLogic",
        0x1d0f => "Amazon",
        0x1af4 => "Red Hat (virtio)",
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_vendors() {
        assert_eq!(DeviceKind::Gpu.to_string(), "gpu");
        assert_eq!(DeviceKind::Nic.name(), "nic");
        assert_eq!(vendor_name(0x10de), Some("NVIDIA"));
        assert_eq!(vendor_name(0x1234), None);
    }
}

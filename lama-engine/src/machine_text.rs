//! A machine as a few lines of text, read back without any topology library: what a process
//! that places once and exits (a job step's) reads instead of an XML topology, whose library
//! costs milliseconds to start in every new process before it reads a byte.
//!
//! ```text
//! lama-machine 1
//! pus<TAB>0 2 1 3                 OS index of every PU, in logical order
//! unavailable<TAB>3               PUs not available (omitted when all are)
//! object<TAB>s<TAB>0<TAB>0-1      level token, OS index or -, its PUs' OS indexes
//! device<TAB>gpu<TAB>NVIDIA<TAB>0000:04:00.0<TAB>-<TAB>cuda0,nvml0<TAB>0-1<TAB>Package L#0[<TAB>0000:[00-07]]
//! offline<TAB>4-7                 listed CPUs the OS has offline (omitted when none)
//! kind<TAB>IntelCore<TAB>max 3900 MHz<TAB>0-7
//! ```
//!
//! Objects and devices are in logical and bus order, as [`MachineBuilder`] takes them; text
//! fields never hold a tab or a line break (they are written as spaces).

use crate::{CpuKind, CpuList, DeviceKind, DeviceSpec, Machine, MachineBuilder};
use std::fmt::Write;

/// The first line of the format.
pub const HEADER: &str = "lama-machine 1";

fn field(s: &str) -> String {
    s.replace(['\t', '\n', '\r'], " ")
}

impl Machine {
    /// The machine in the text form of this module, read back by [`Machine::from_text`].
    pub fn to_text(&self) -> String {
        let os_of = |range: &std::ops::Range<u32>| {
            CpuList::from_cpus(range.clone().map(|l| self.pus()[l as usize].os)).to_string()
        };
        let mut out = format!("{HEADER}\npus\t");
        let pus: Vec<String> = self.pus().iter().map(|p| p.os.to_string()).collect();
        out.push_str(&pus.join(" "));
        out.push('\n');
        let unavailable =
            CpuList::from_cpus(self.pus().iter().filter(|p| !p.available).map(|p| p.os));
        if !unavailable.is_empty() {
            let _ = writeln!(out, "unavailable\t{unavailable}");
        }
        for level in crate::level::ALL_LEVELS {
            if !level.is_object_level() {
                continue;
            }
            for o in self.objects(level) {
                let os = o.os.map_or("-".to_string(), |n| n.to_string());
                let _ = writeln!(out, "object\t{}\t{os}\t{}", level.token(), os_of(&o.pus));
            }
        }
        for d in self.devices() {
            let kind = match d.kind {
                DeviceKind::Gpu => "gpu",
                DeviceKind::Nic => "nic",
            };
            let names: Vec<String> = d.names.iter().map(|n| field(n).replace(',', " ")).collect();
            // The host bridge, where known, as a ninth field (text without it still reads).
            let bridge = d.bridge.as_deref().map(|b| format!("\t{}", field(b)));
            let _ = writeln!(
                out,
                "device\t{kind}\t{}\t{}\t{}\t{}\t{}\t{}{}",
                field(&d.vendor),
                field(&d.bus_id),
                d.uuid.as_deref().map_or("-".to_string(), field),
                names.join(","),
                os_of(&d.pus),
                field(&d.near),
                bridge.unwrap_or_default()
            );
        }
        if !self.offline().is_empty() {
            let _ = writeln!(out, "offline\t{}", self.offline());
        }
        for k in self.kinds() {
            let _ = writeln!(
                out,
                "kind\t{}\t{}\t{}",
                field(&k.name),
                field(&k.details),
                k.cpus
            );
        }
        out
    }

    /// Reads [`Machine::to_text`]'s form back as the machine called `name`; an error names the
    /// line and what is wrong with it.
    pub fn from_text(name: &str, text: &str) -> Result<Machine, String> {
        let mut lines = text.lines().enumerate();
        match lines.next() {
            Some((_, HEADER)) => {}
            Some((_, other)) => {
                return Err(format!(
                    "line 1: '{}' is not '{HEADER}'",
                    other.chars().take(40).collect::<String>()
                ))
            }
            None => return Err("it is empty".to_string()),
        }
        let mut b = MachineBuilder::new(name);
        let mut pus: Vec<u32> = Vec::new();
        let mut unavailable = CpuList::new();
        for (i, line) in lines {
            let at = |why: String| format!("line {}: {why}", i + 1);
            let cpus = |s: &str| CpuList::parse(s).map_err(|e| at(format!("'{s}': {e}")));
            let f: Vec<&str> = line.split('\t').collect();
            match (f[0], f.len()) {
                ("pus", 2) => {
                    pus = f[1]
                        .split(' ')
                        .filter(|s| !s.is_empty())
                        .map(|s| s.parse().map_err(|_| at(format!("'{s}' is not a CPU"))))
                        .collect::<Result<_, _>>()?;
                }
                ("unavailable", 2) => unavailable = cpus(f[1])?,
                ("object", 4) => {
                    let level = crate::level::ALL_LEVELS
                        .into_iter()
                        .find(|l| l.is_object_level() && l.token() == f[1])
                        .ok_or_else(|| at(format!("'{}' is not a level", f[1])))?;
                    let os = match f[2] {
                        "-" => None,
                        n => Some(
                            n.parse()
                                .map_err(|_| at(format!("'{n}' is not an index")))?,
                        ),
                    };
                    b.object(level, os, cpus(f[3])?.cpus());
                }
                ("device", 8 | 9) => {
                    let kind = match f[1] {
                        "gpu" => DeviceKind::Gpu,
                        "nic" => DeviceKind::Nic,
                        k => return Err(at(format!("'{k}' is not gpu or nic"))),
                    };
                    b.device(DeviceSpec {
                        kind,
                        vendor: f[2].to_string(),
                        bus_id: f[3].to_string(),
                        uuid: (f[4] != "-").then(|| f[4].to_string()),
                        names: f[5]
                            .split(',')
                            .filter(|n| !n.is_empty())
                            .map(str::to_string)
                            .collect(),
                        pus_os: cpus(f[6])?.cpus().to_vec(),
                        near: f[7].to_string(),
                        bridge: f.get(8).map(|b| b.to_string()),
                    });
                }
                ("offline", 2) => {
                    b.offline(cpus(f[1])?);
                }
                ("kind", 4) => {
                    b.kind(CpuKind {
                        name: f[1].to_string(),
                        details: f[2].to_string(),
                        cpus: cpus(f[3])?,
                    });
                }
                ("", 1) => {}
                _ => {
                    return Err(at(format!(
                        "'{}' is not a line of this form",
                        line.chars().take(40).collect::<String>()
                    )))
                }
            }
        }
        if pus.is_empty() {
            return Err("it has no 'pus' line".to_string());
        }
        for os in pus {
            b.pu(os, !unavailable.contains(os));
        }
        b.build().map_err(|e| e.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Level;

    fn gpu_node() -> Machine {
        let mut b = MachineBuilder::new("gpu");
        for os in [0, 2, 1, 3] {
            b.pu(os, os != 3);
        }
        b.object(Level::Socket, Some(0), &[0, 2])
            .object(Level::Socket, Some(1), &[1, 3])
            .object(Level::Numa, Some(0), &[0, 2])
            .object(Level::Numa, Some(1), &[1, 3])
            .object(Level::Core, None, &[0])
            .object(Level::Core, None, &[2])
            .object(Level::Core, None, &[1])
            .object(Level::Core, None, &[3])
            .device(DeviceSpec {
                kind: DeviceKind::Gpu,
                vendor: "NVIDIA".into(),
                bus_id: "0000:04:00.0".into(),
                uuid: Some("GPU-1234".into()),
                names: vec!["cuda0".into(), "nvml0".into()],
                pus_os: vec![1, 3],
                near: "Package L#1".into(),
                bridge: Some("0000:[00-07]".into()),
            })
            .device(DeviceSpec {
                kind: DeviceKind::Nic,
                vendor: "Mellanox".into(),
                bus_id: "0000:05:00.0".into(),
                uuid: None,
                names: vec![],
                pus_os: vec![0, 2],
                near: "Package L#0".into(),
                bridge: None,
            })
            .offline(CpuList::parse("4-5").unwrap())
            .kind(CpuKind {
                name: "E-cores".into(),
                details: String::new(),
                cpus: CpuList::parse("0,2").unwrap(),
            })
            .kind(CpuKind {
                name: "P-cores".into(),
                details: "max 3900\tMHz".into(),
                cpus: CpuList::parse("1,3").unwrap(),
            });
        b.build().unwrap()
    }

    #[test]
    fn a_machine_reads_back_as_itself() {
        for m in [
            gpu_node(),
            Machine::synthetic("pack:2 numa:2 l3:2 core:4 pu:2").unwrap(),
            Machine::synthetic("pack:16 numa:8 core:16 pu:2").unwrap(),
        ] {
            let back = Machine::from_text(m.name(), &m.to_text()).unwrap();
            assert_eq!(back.to_text(), m.to_text());
            // gpu_node's tab in a kind's details is written as a space.
            if m.name() != "gpu" {
                assert_eq!(back, m);
            }
        }
    }

    #[test]
    fn the_form_is_as_documented() {
        let text = gpu_node().to_text();
        assert_eq!(
            text,
            "lama-machine 1\npus\t0 2 1 3\nunavailable\t3\n\
             object\tN\t0\t0,2\nobject\tN\t1\t1,3\nobject\ts\t0\t0,2\nobject\ts\t1\t1,3\n\
             object\tc\t-\t0\nobject\tc\t-\t2\nobject\tc\t-\t1\nobject\tc\t-\t3\n\
             device\tgpu\tNVIDIA\t0000:04:00.0\tGPU-1234\tcuda0,nvml0\t1,3\tPackage L#1\t0000:[00-07]\n\
             device\tnic\tMellanox\t0000:05:00.0\t-\t\t0,2\tPackage L#0\n\
             offline\t4-5\nkind\tE-cores\t\t0,2\nkind\tP-cores\tmax 3900 MHz\t1,3\n"
        );
    }

    #[test]
    fn bad_text_is_refused_with_its_line() {
        let e = |t: &str| Machine::from_text("m", t).unwrap_err();
        assert_eq!(e(""), "it is empty");
        assert!(e("<?xml version").starts_with("line 1: '<?xml version' is not"));
        assert_eq!(e("lama-machine 1\n"), "it has no 'pus' line");
        assert_eq!(e("lama-machine 1\npus\t0 x\n"), "line 2: 'x' is not a CPU");
        assert_eq!(
            e("lama-machine 1\npus\t0 1\nobject\tq\t0\t0\n"),
            "line 3: 'q' is not a level"
        );
        assert!(e("lama-machine 1\npus\t0 1\nobject\ts\t0\n").starts_with("line 3: 'object"));
        // The builder's own checks: a PU twice, an object over an unknown PU.
        assert!(!e("lama-machine 1\npus\t0 0\n").is_empty());
        assert!(!e("lama-machine 1\npus\t0 1\nobject\ts\t0\t0-2\n").is_empty());
    }
}

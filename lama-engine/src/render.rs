//! Text for people: `[BB/..][..]` pictures, placement tables and topology summaries.
//!
//! Pictures follow Open MPI's `--report-bindings`: one bracket per socket, `/` between cores,
//! one character per hardware thread: `B` bound, `.` available, `-` not available to the job
//! (outside its cpuset or the `--restrict` set, or disallowed). A process without binding shows
//! its mapped hardware thread as `m`.

use crate::cpulist::CpuList;
use crate::device::Device;
use crate::level::Level;
use crate::place::{place, Placement, Request};
use crate::spec::{Bind, Layout};
use crate::topology::Machine;
use std::fmt::Write;

/// The picture of `machine` with the PUs of `bound` (logical indexes) marked `B`.
pub fn picture(machine: &Machine, bound: &[u32]) -> String {
    picture_with(machine, bound, 'B')
}

/// The picture of `machine` with the PUs of `marked` (logical indexes) shown as `mark`.
pub fn picture_with(machine: &Machine, marked: &[u32], mark: char) -> String {
    let pus = machine.pus();
    let owner = |level: Level| -> Vec<Option<usize>> {
        let mut v = vec![None; pus.len()];
        for (k, o) in machine.objects(level).iter().enumerate() {
            for p in o.pus.clone() {
                v[p as usize] = Some(k);
            }
        }
        v
    };
    let socket = owner(Level::Socket);
    let core = owner(Level::Core);
    let mut out = String::with_capacity(pus.len() * 2 + 8);
    for (i, pu) in pus.iter().enumerate() {
        let new_socket = i == 0 || socket[i] != socket[i - 1];
        let new_core = i == 0 || core[i].is_none() || core[i] != core[i - 1];
        if new_socket {
            if i > 0 {
                out.push(']');
            }
            out.push('[');
        } else if new_core {
            out.push('/');
        }
        out.push(if marked.contains(&(i as u32)) {
            mark
        } else if pu.available {
            '.'
        } else {
            '-'
        });
    }
    out.push(']');
    out
}

/// Logical index lists in the short form (`L#0-3,8`).
fn logical_list(pus: &[u32]) -> String {
    crate::CpuList::from_cpus(pus.iter().copied()).to_string()
}

/// A list with runs of equal items written once with their count: `4 x3, 2`.
pub fn runs(items: &[String]) -> String {
    let mut out: Vec<String> = Vec::new();
    let mut i = 0;
    while i < items.len() {
        let mut j = i + 1;
        while j < items.len() && items[j] == items[i] {
            j += 1;
        }
        out.push(if j - i > 1 {
            format!("{} x{}", items[i], j - i)
        } else {
            items[i].clone()
        });
        i = j;
    }
    out.join(", ")
}

/// The summary line: ranks per node and per socket, CPUs no rank is bound to, and the CPUs
/// bound by more than one rank (never left unsaid).
pub fn summary_line(p: &Placement<'_>) -> String {
    let req = p.request();
    let mut per_node = Vec::new();
    let mut idle = 0usize;
    let mut available = 0usize;
    for (m, ranks) in p.nodes().iter().zip(p.ranks_by_node()) {
        let sockets: Vec<String> = m
            .objects(Level::Socket)
            .iter()
            .map(|o| {
                ranks
                    .iter()
                    .filter(|&&r| o.pus.contains(&p.info(r).pu_logical))
                    .count()
                    .to_string()
            })
            .collect();
        per_node.push(if sockets.len() > 1 {
            format!("{} ({} per socket)", ranks.len(), sockets.join("+"))
        } else {
            ranks.len().to_string()
        });
        let mut bound = vec![false; m.pus().len()];
        for &r in &ranks {
            for &q in &p.info(r).bound_logical {
                bound[q as usize] = true;
            }
        }
        for (q, pu) in m.pus().iter().enumerate() {
            if pu.available {
                available += 1;
                if !bound[q] {
                    idle += 1;
                }
            }
        }
    }
    let shared = if req.bind == Bind::None {
        "no binding: each rank may run on any available CPU of its node".to_string()
    } else {
        let o = p.overlaps();
        if o.is_empty() {
            "no CPU is bound by more than one rank".to_string()
        } else {
            // A summary stays a line: the first few sets of shared CPUs, each with its first
            // few ranks, then how many more and how crowded the worst CPU is.
            const SETS: usize = 4;
            const RANKS: usize = 8;
            let list: Vec<String> = o
                .iter()
                .take(SETS)
                .map(|x| {
                    let mut ranks: Vec<String> =
                        x.ranks.iter().take(RANKS).map(u32::to_string).collect();
                    if x.ranks.len() > RANKS {
                        ranks.push(format!("... {} ranks", x.ranks.len()));
                    }
                    format!("node {} P#{} (ranks {})", x.node, x.cpus, ranks.join(","))
                })
                .collect();
            let mut text = format!("CPUs bound by more than one rank: {}", list.join("; "));
            if o.len() > SETS {
                let cpus: usize = o.iter().map(|x| x.cpus.len()).sum();
                let most = o.iter().map(|x| x.ranks.len()).max().unwrap_or(0);
                text += &format!(
                    "; and {} more sets ({cpus} shared CPUs in all, at most {most} ranks on one)",
                    o.len() - SETS
                );
            }
            text
        }
    };
    if req.bind == Bind::None {
        return format!("summary: ranks per node {}; {shared}", runs(&per_node));
    }
    format!(
        "summary: ranks per node {}; {idle} of {available} available CPUs bound by no rank; {shared}",
        runs(&per_node)
    )
}

/// How a table shows where each rank is bound.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum PictureMode {
    /// One character per hardware thread of the node ([`picture`]).
    #[default]
    Full,
    /// The package(s) and cores (or hardware threads) bound, as Open MPI 5's
    /// `--report-bindings` names them ([`compact_picture`]): a few words, whatever the node's
    /// size; the table then leaves out its `bound (logical)` column.
    Compact,
    /// No picture.
    None,
}

impl PictureMode {
    /// The picture column's header: none without a picture.
    pub fn header(self) -> &'static str {
        if self == PictureMode::None {
            ""
        } else {
            "picture"
        }
    }
}

/// What the preview's text shows besides the request and the summary.
#[derive(Debug, Clone, Copy, Default)]
pub struct TextOptions<'a> {
    /// The level widths.
    pub explain: bool,
    /// The nodes' names, in order.
    pub names: Option<&'a [String]>,
    /// No table: the request, the summary and the notes only.
    pub summary_only: bool,
    /// Only this node's table.
    pub node: Option<u32>,
    /// Only these ranks (first and last, inclusive) in the tables; nodes without any of them
    /// are left out.
    pub ranks: Option<(u32, u32)>,
    /// The tables' picture column: full, compact or none.
    pub picture: PictureMode,
    /// No legend after the tables (the caller offers it another way).
    pub without_legend: bool,
}

/// The preview's text: the request, a summary, the caller's notes (one line each), then per node
/// a table rank → mapped PU, its socket, NUMA node and core, binding (logical and OS indexes) and
/// picture, and the picture's legend. With `explain`, the width of each level over all nodes
/// too (how many positions the round-robin counts).
pub fn placement_text(p: &Placement<'_>, notes: &[String], opts: TextOptions<'_>) -> String {
    let mut out = String::new();
    write_placement_text(p, notes, opts, &mut |chunk| out.push_str(chunk));
    out
}

/// [`placement_text`] handed to `sink` a piece at a time (the header, then one piece per node,
/// then the legend), so that a large preview can be written out as it is made.
pub fn write_placement_text(
    p: &Placement<'_>,
    notes: &[String],
    opts: TextOptions<'_>,
    sink: &mut dyn FnMut(&str),
) {
    let TextOptions {
        explain,
        names,
        summary_only,
        node: only,
        ranks: wanted,
        picture: mode,
        without_legend,
    } = opts;
    let req = p.request();
    let mut out = String::new();
    let _ = writeln!(
        out,
        "layout {}  binding {}  mppr {}  order {}  processes {}{}",
        req.layout,
        req.bind,
        req.mppr,
        req.order,
        req.np,
        if p.passes() > 1 {
            format!(
                "  (oversubscribed: {} rounds over the available positions)",
                p.passes()
            )
        } else {
            String::new()
        }
    );
    let _ = writeln!(out, "{}", summary_line(p));
    if explain {
        let widths: Vec<String> = p.widths().iter().map(|(l, w)| format!("{l}={w}")).collect();
        let _ = writeln!(
            out,
            "level widths (the most objects of each level under one parent, over all nodes: the \
             positions the layout counts): {}",
            widths.join(" ")
        );
    }
    for note in notes {
        let _ = writeln!(out, "{note}");
    }
    sink(&out);
    if summary_only {
        return;
    }
    let by_node = p.ranks_by_node();
    for (n, (m, mut ranks)) in p.nodes().iter().zip(by_node).enumerate() {
        if only.is_some_and(|k| k as usize != n) {
            continue;
        }
        if let Some((first, last)) = wanted {
            ranks.retain(|&r| (first as usize..=last as usize).contains(&r));
            if ranks.is_empty() {
                continue;
            }
        }
        sink(&node_table(p, n, m, &ranks, names, mode));
    }
    if without_legend {
        return;
    }
    let rest = LEGEND.split_once('\n').map_or(LEGEND, |(_, rest)| rest);
    let legend = match picture_legend(mode) {
        Some(line) => format!("{line}\n{rest}"),
        None => rest.to_string(),
    };
    sink(&format!("\n{legend}\n"));
}

/// The legend's line for a table's picture column shown as `mode`, if it has one.
pub fn picture_legend(mode: PictureMode) -> Option<&'static str> {
    match mode {
        PictureMode::Full => LEGEND.lines().next(),
        PictureMode::Compact => Some(COMPACT_LEGEND),
        PictureMode::None => None,
    }
}

/// A table's picture cell for a task bound to `bound` (logical PUs) on `m`, as `mode` shows
/// it: [`picture`], [`compact_picture`] or nothing.
pub fn picture_cell(mode: PictureMode, m: &Machine, bound: &[u32]) -> String {
    match mode {
        PictureMode::Full => picture(m, bound),
        PictureMode::Compact => compact_picture(m, bound),
        PictureMode::None => String::new(),
    }
}

/// The legend's first line for [`PictureMode::Compact`].
const COMPACT_LEGEND: &str = "picture: package[P][core:LIST] the package (socket) and the cores \
    each rank is bound to, logical indexes, as Open MPI's --report-bindings writes them; \
    [hwt:LIST] the hardware threads where a core is bound in part (--picture always shows the \
    full picture)";

/// Where `bound` (logical PU indexes) is on `m`, in a few words: for each package it touches,
/// `package[P][core:LIST]` (logical indexes), or `[hwt:LIST]` (logical PU indexes) when it
/// holds part of a core; `-` for nothing.
pub fn compact_picture(m: &Machine, bound: &[u32]) -> String {
    let of = |level: Level, pu: u32| m.objects(level).iter().position(|o| o.pus.contains(&pu));
    let mut packages: Vec<(Option<usize>, Vec<u32>)> = Vec::new();
    for &pu in bound {
        let package = of(Level::Socket, pu);
        match packages.iter_mut().find(|(p, _)| *p == package) {
            Some((_, pus)) => pus.push(pu),
            None => packages.push((package, vec![pu])),
        }
    }
    if packages.is_empty() {
        return "-".into();
    }
    let parts: Vec<String> = packages
        .into_iter()
        .map(|(package, pus)| {
            let cores: Vec<usize> = {
                let mut c: Vec<usize> = pus.iter().filter_map(|&pu| of(Level::Core, pu)).collect();
                c.dedup();
                c
            };
            let whole = cores.iter().all(|&c| {
                m.objects(Level::Core)[c]
                    .pus
                    .clone()
                    .all(|pu| pus.contains(&pu))
            });
            let inner = if whole && !cores.is_empty() {
                let list: Vec<u32> = cores.iter().map(|&c| c as u32).collect();
                format!("[core:{}]", logical_list(&list))
            } else {
                format!("[hwt:{}]", logical_list(&pus))
            };
            match package {
                Some(p) => format!("package[{p}]{inner}"),
                None => inner,
            }
        })
        .collect();
    parts.join(" ")
}

/// `text` with each line wrapped at word boundaries to at most `width` columns (a word longer
/// than that keeps its own line), continuation lines indented by two spaces.
pub fn wrap(text: &str, width: usize) -> String {
    let mut out = String::new();
    for line in text.lines() {
        // A line that fits is kept as it is (its double spaces too).
        if line.chars().count() <= width {
            out.push_str(line);
            out.push('\n');
            continue;
        }
        let mut current = String::new();
        let mut has_word = false;
        for word in line.split(' ').filter(|w| !w.is_empty()) {
            if has_word && current.chars().count() + 1 + word.chars().count() > width {
                out.push_str(&current);
                out.push('\n');
                current = "  ".to_string();
                has_word = false;
            }
            if has_word {
                current.push(' ');
            }
            current.push_str(word);
            has_word = true;
        }
        out.push_str(&current);
        out.push('\n');
    }
    out.pop();
    out
}

/// What a machine's CPUs have that a user should know before reading a placement: CPUs the OS
/// has offline, and kinds of cores (performance and efficiency cores), one line each.
pub fn cpu_lines(m: &Machine) -> String {
    let mut out = String::new();
    if !m.offline().is_empty() {
        let _ = writeln!(
            out,
            "offline CPUs: P#{} ({} CPU(s) the topology lists but the OS has switched off: no \
             task is placed or bound there)",
            m.offline(),
            m.offline().len()
        );
    }
    if !m.kinds().is_empty() {
        let kinds: Vec<String> = m
            .kinds()
            .iter()
            .map(|k| {
                if k.details.is_empty() {
                    format!("{} P#{}", k.name, k.cpus)
                } else {
                    format!("{} P#{} ({})", k.name, k.cpus, k.details)
                }
            })
            .collect();
        let _ = writeln!(
            out,
            "CPU kinds, most power-efficient first: {} (layouts do not tell kinds apart: check \
             where ranks land)",
            kinds.join(", ")
        );
    }
    out
}

/// How many of the ranks' mapped PUs are of each CPU kind (machines with several kinds).
fn ranks_by_kind(p: &Placement<'_>, m: &Machine, ranks: &[usize]) -> Option<String> {
    if m.kinds().is_empty() {
        return None;
    }
    let counts: Vec<String> = m
        .kinds()
        .iter()
        .map(|k| {
            let n = ranks
                .iter()
                .filter(|&&r| k.cpus.contains(p.info(r).pu_os))
                .count();
            format!("{} {n}", k.name)
        })
        .collect();
    Some(format!("  ranks by CPU kind: {}", counts.join(", ")))
}

/// A table of N columns, each as wide as its widest cell: the first right-aligned, the last
/// unpadded, one line per row after the headers' line (lines end without spaces).
pub fn table<const N: usize>(headers: [&str; N], rows: &[[String; N]]) -> String {
    let mut w = headers.map(str::len);
    for row in rows {
        for (i, cell) in row.iter().enumerate() {
            w[i] = w[i].max(cell.len());
        }
    }
    let line = |c: [&str; N]| {
        let mut text = String::new();
        for (i, cell) in c.iter().enumerate() {
            text += "  ";
            if i == 0 {
                text += &format!("{cell:>0$}", w[0]);
            } else if i + 1 == N {
                text += cell;
            } else {
                text += &format!("{cell:<0$}", w[i]);
            }
        }
        format!("{}\n", text.trim_end())
    };
    let mut out = line(headers);
    for r in rows {
        out += &line(std::array::from_fn(|i| r[i].as_str()));
    }
    out
}

/// One node's piece of the preview: its heading and the table of `ranks` (all on node `n`).
fn node_table(
    p: &Placement<'_>,
    n: usize,
    m: &Machine,
    ranks: &[usize],
    names: Option<&[String]>,
    mode: PictureMode,
) -> String {
    let with_picture = mode == PictureMode::Full;
    let req = p.request();
    let mut out = String::new();
    let containment: Vec<&str> = p.containment(n).iter().map(|l| l.token()).collect();
    let _ = writeln!(
        out,
        "\nnode {n}: {} ({} PUs, {} available{}; levels outermost first: {})",
        names.and_then(|v| v.get(n)).map_or_else(
            || m.name().to_string(),
            |name| format!("{name}, {}", m.name())
        ),
        m.pus().len(),
        m.available().len(),
        if m.offline().is_empty() {
            String::new()
        } else {
            format!(", {} offline: P#{}", m.offline().len(), m.offline())
        },
        if containment.is_empty() {
            "-".to_string()
        } else {
            containment.join(" > ")
        }
    );
    if ranks.is_empty() {
        let picture = if with_picture {
            picture(m, &[])
        } else {
            String::new()
        };
        let _ = writeln!(out, "{}", format!("  no process   {picture}").trim_end());
        return out;
    }
    // Where the mapped PU is: its socket, NUMA node and core (logical indexes).
    let coordinates = |pu: u32| -> String {
        let at = |level: Level, tag: &str| {
            m.objects(level)
                .iter()
                .position(|o| o.pus.contains(&pu))
                .map(|i| format!("{tag}{i}"))
        };
        [
            at(Level::Socket, "s"),
            at(Level::Numa, "N"),
            at(Level::Core, "c"),
        ]
        .into_iter()
        .flatten()
        .collect::<Vec<_>>()
        .join(" ")
    };
    let rows: Vec<[String; 6]> = ranks
        .iter()
        .map(|&r| {
            let info = p.info(r);
            [
                r.to_string(),
                format!("L#{} P#{}", info.pu_logical, info.pu_os),
                coordinates(info.pu_logical),
                if req.bind == Bind::None {
                    "-".to_string()
                } else {
                    format!("L#{}", logical_list(&info.bound_logical))
                },
                if req.bind == Bind::None {
                    "-".to_string()
                } else {
                    format!("P#{}", info.cpus)
                },
                match (mode, req.bind) {
                    (PictureMode::Full, Bind::None) => picture_with(m, &[info.pu_logical], 'm'),
                    (PictureMode::Compact, Bind::None) => "-".to_string(),
                    _ => picture_cell(mode, m, &info.bound_logical),
                },
            ]
        })
        .collect();
    let headers = [
        "rank",
        "mapped PU",
        "socket NUMA core",
        "bound (logical)",
        "bound (OS)",
        mode.header(),
    ];
    out += &if mode == PictureMode::Compact {
        // The compact picture names what "bound (logical)" would: that column is left out.
        let drop = |r: &[String; 6]| [0, 1, 2, 4, 5].map(|i| r[i].clone());
        let rows: Vec<[String; 5]> = rows.iter().map(drop).collect();
        let h = [headers[0], headers[1], headers[2], headers[4], headers[5]];
        table(h, &rows)
    } else {
        table(headers, &rows)
    };
    if let Some(kinds) = ranks_by_kind(p, m, ranks) {
        let _ = writeln!(out, "{kinds}");
    }
    out
}

/// What a picture's characters, the table's columns and the request's words mean.
pub const LEGEND: &str = "picture: [...] one package (socket), / between cores, one character \
    per hardware thread: B bound, m mapped (no binding), . available, - not available (outside \
    the job's CPUs)
columns: mapped PU is the hardware thread (hwloc's \"processing unit\") the layout chose for the \
    rank, by hwloc's logical index L# and the OS's CPU number P# (as in Cpus_allowed_list); \
    socket NUMA core are that thread's socket, NUMA node and core (logical indexes); bound is \
    where the rank may run; levels outermost first: how the layout's levels nest on the node
request: binding is how wide each rank's CPUs are (1c one core, 1s one socket); mppr the most \
    processes per resource (none: no limit); order n numbers ranks as the layout places them, s \
    by CPU on each node";

/// How the engine sees `machine`: levels in containment order with their widths, and the
/// available PUs.
pub fn topology_text(machine: &Machine) -> String {
    let mut out = String::new();
    let available = machine.available();
    let _ = writeln!(
        out,
        "{}: {} PUs, {} available (OS {})",
        machine.name(),
        machine.pus().len(),
        available.len(),
        if available.is_empty() {
            "none".to_string()
        } else {
            available.to_string()
        }
    );
    out += &cpu_lines(machine);
    // A layout naming every level gives the full nesting; placing nothing computes the widths.
    let every = Layout::from_levels([
        Level::Hwthread,
        Level::Core,
        Level::L1,
        Level::L2,
        Level::L3,
        Level::Die,
        Level::Socket,
        Level::Numa,
        Level::Board,
        Level::Node,
    ]);
    let mut req = Request::new(every, 0);
    req.bind = Bind::None;
    match place(&[machine], &req) {
        Ok(p) => {
            let width = |l: Level| p.widths().iter().find(|(x, _)| *x == l).map(|x| x.1);
            let _ = writeln!(
                out,
                "levels, coarsest first (objects = available objects on the node; width = most under one parent):"
            );
            let mut levels = vec![Level::Node, Level::Board];
            levels.extend(p.containment(0));
            levels.push(Level::Hwthread);
            for l in levels {
                let objects = match l {
                    Level::Node | Level::Board => usize::from(!available.is_empty()),
                    Level::Hwthread => available.len(),
                    _ => machine
                        .objects(l)
                        .iter()
                        .filter(|o| o.pus.clone().any(|q| machine.pus()[q as usize].available))
                        .map(|o| (o.pus.start, o.pus.end))
                        .collect::<std::collections::BTreeSet<_>>()
                        .len(),
                };
                let note = if objects == 0 {
                    "  (absent: width 1)"
                } else if l == Level::Board {
                    "  (hwloc has no boards: width 1)"
                } else {
                    ""
                };
                let _ = writeln!(
                    out,
                    "  {:<3} {:<16} objects {:>5}  width {:>4}{note}",
                    l.token(),
                    l.name(),
                    objects,
                    width(l).unwrap_or(1)
                );
            }
        }
        Err(e) => {
            let _ = writeln!(out, "  (cannot enumerate: {e})");
        }
    }
    let _ = writeln!(out, "picture: {}", picture(machine, &[]));
    out += &device_lines(machine, &|_| Vec::new());
    out
}

/// The OS indexes of a device's locality.
pub fn device_cpus(m: &Machine, d: &Device) -> CpuList {
    CpuList::from_cpus(d.pus.clone().map(|p| m.pus()[p as usize].os))
}

/// The ranks of a placement on node `node` whose binding (or mapped PU, without binding) lies
/// inside a device's locality: the ranks the device is near.
pub fn ranks_near(p: &Placement<'_>, node: u32, d: &Device) -> Vec<u32> {
    near(p, &p.ranks_on(node), d)
}

/// Those of `ranks` whose binding (or mapped PU) lies inside `d`'s locality.
fn near(p: &Placement<'_>, ranks: &[usize], d: &Device) -> Vec<u32> {
    ranks
        .iter()
        .copied()
        .filter(|&r| {
            let info = p.info(r);
            inside(d, &info.bound_logical, info.pu_logical)
        })
        .map(|r| r as u32)
        .collect()
}

/// Whether a process bound to `bound_logical` (logical PUs; empty without binding, then its
/// mapped PU `pu_logical` counts) lies inside `d`'s locality.
pub fn inside(d: &Device, bound_logical: &[u32], pu_logical: u32) -> bool {
    let on: &[u32] = if bound_logical.is_empty() {
        std::slice::from_ref(&pu_logical)
    } else {
        bound_logical
    };
    on.iter().all(|q| d.pus.contains(q))
}

/// One line per device of `m`: kind and index, vendor, PCI bus id, OS names and locality; its
/// UUID and `ranks(device)` (when not empty) on lines of their own below it, so that a line
/// stays within a terminal's 80 columns.
fn device_lines(m: &Machine, ranks: &dyn Fn(&Device) -> Vec<u32>) -> String {
    let mut out = String::new();
    if m.devices().is_empty() {
        return out;
    }
    let _ = writeln!(
        out,
        "devices (GPUs and NICs in PCI bus order; near: the object above each that holds CPUs):"
    );
    let width = |f: &dyn Fn(&Device) -> usize| m.devices().iter().map(f).max().unwrap_or(0);
    let vendor_width = width(&|d| d.vendor.len());
    let names_width = width(&|d| d.names.join(",").len());
    for d in m.devices() {
        let _ = writeln!(
            out,
            "  {}{:<3} {:<vendor_width$} {}  {:<names_width$}  near {} (P#{})",
            d.kind,
            d.index,
            d.vendor,
            d.bus_id,
            d.names.join(","),
            d.near,
            device_cpus(m, d),
        );
        if let Some(u) = &d.uuid {
            let _ = writeln!(out, "          uuid {u}");
        }
        let r = ranks(d);
        if !r.is_empty() {
            let _ = writeln!(
                out,
                "          ranks bound inside: {}",
                CpuList::from_cpus(r)
            );
        }
    }
    out
}

/// Per node with devices (only node `only` when given), its devices and the ranks bound inside
/// each one's locality.
pub fn placement_devices_text(p: &Placement<'_>, only: Option<u32>) -> String {
    let mut out = String::new();
    if p.nodes().iter().all(|m| m.devices().is_empty()) {
        return out;
    }
    for (n, (m, ranks)) in p.nodes().iter().zip(p.ranks_by_node()).enumerate() {
        if m.devices().is_empty() || only.is_some_and(|k| k as usize != n) {
            continue;
        }
        let _ = write!(out, "\nnode {n} ({}): ", m.name());
        out += &device_lines(m, &|d| near(p, &ranks, d));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_legend_fits_the_width() {
        let wrapped = wrap(LEGEND, 80);
        assert!(
            wrapped.lines().all(|l| l.chars().count() <= 80),
            "{wrapped}"
        );
        // Nothing lost: the same words in the same order, each item still starts a line.
        let words = |t: &str| t.split_whitespace().map(String::from).collect::<Vec<_>>();
        assert_eq!(words(&wrapped), words(LEGEND));
        for item in ["picture:", "columns:", "request:"] {
            assert!(wrapped.lines().any(|l| l.starts_with(item)), "{item}");
        }
        assert!(wrapped.lines().count() > LEGEND.lines().count());
        // By hand: 11 columns hold "one two" and push "three" to an indented line; a word
        // longer than the width keeps a line of its own.
        assert_eq!(wrap("one two three", 11), "one two\n  three");
        assert_eq!(wrap("a verylongword b", 5), "a\n  verylongword\n  b");
    }

    #[test]
    fn pictures_show_sockets_cores_and_availability() {
        let m = Machine::synthetic("pack:2 core:3 pu:2").unwrap();
        assert_eq!(picture(&m, &[0, 1]), "[BB/../..][../../..]");
        let r = m.restrict(&CpuList::from_cpus([0, 1, 2, 3, 6, 7]));
        assert_eq!(picture(&r, &[6]), "[../../--][B./--/--]");
        let flat = Machine::synthetic("pu:3").unwrap();
        assert_eq!(picture(&flat, &[2]), "[././B]");
    }

    /// By hand on pack:2 core:2 pu:2 (PUs 0-1 core 0, 2-3 core 1 in package 0; 4-7 package
    /// 1): whole cores by core, part of a core by hardware thread, nothing as '-'.
    #[test]
    fn the_compact_picture_names_packages_and_cores() {
        let m = Machine::synthetic("pack:2 core:2 pu:2").unwrap();
        assert_eq!(compact_picture(&m, &[0, 1]), "package[0][core:0]");
        assert_eq!(compact_picture(&m, &[0]), "package[0][hwt:0]");
        assert_eq!(
            compact_picture(&m, &[0, 1, 2, 3, 4, 5, 6, 7]),
            "package[0][core:0-1] package[1][core:2-3]"
        );
        assert_eq!(
            compact_picture(&m, &[2, 3, 4]),
            "package[0][core:1] package[1][hwt:4]"
        );
        assert_eq!(compact_picture(&m, &[]), "-");
    }
}

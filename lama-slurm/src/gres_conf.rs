//! gres.conf, read the way slurmd reads it, for one question: which device file is Slurm's
//! GPU `k` on a node (the `k` of `SLURM_STEP_GPUS`).
//!
//! slurmd numbers a node's GPUs by the position of their device files in its list of GPU
//! records (`gres_node_config_load` in `src/interfaces/gres.c`, Slurm 24.11 to 26.05):
//! - The records are the `Name=` lines (which apply to every node) in file order, then the
//!   `NodeName=` lines whose host list holds the node, in file order (`_parse_gres_conf`:
//!   `s_p_get_array` of `Name`, then of `NodeName`).
//! - A record's `File=` (or `Files=`) is a host list of paths (`/dev/nvidia[0-3]`), one GPU per
//!   path; `MultipleFiles=` is one GPU with all its paths.
//! - With detection (`AutoDetect=nvml`, `rsmi`, `oneapi`, `nvidia`, `nrt`, or `full`) slurmd
//!   merges the detected GPUs in and sorts the records by their links, which the detection
//!   libraries give in PCI bus order (`_merge_system_gres_conf` in
//!   `src/plugins/gres/gpu/gres_gpu.c`); without it (`off`, or no `AutoDetect`: the generic GPU
//!   plugin detects nothing) nothing is sorted.
//!
//! Pure: the text of included files is asked of the caller.

use crate::hostlist;

/// How slurmd numbers the GPUs of one node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GpuNumbering {
    /// Detected (the `AutoDetect` value in force on the node): Slurm's GPUs are in the order
    /// of the detection library's links, PCI bus order.
    Detected(String),
    /// Configured: Slurm's GPU `k` is the `k`-th entry, each entry the device file(s) of one
    /// GPU (several for `MultipleFiles=`).
    Configured(Vec<Vec<String>>),
}

/// Most `Include` levels followed.
const MAX_INCLUDE_DEPTH: usize = 8;
/// Most files read through `Include`, at all levels together: slurmd's own gres.conf includes
/// a few. Depth alone does not bound the work (each level may include the same file many
/// times).
pub const MAX_INCLUDED_FILES: usize = 64;
/// Most records (lines that are not `Include`) in gres.conf and its included files together.
pub const MAX_RECORDS: usize = 65_536;

/// What reading gres.conf has used so far of its bounds.
#[derive(Default)]
struct Read {
    files: usize,
    records: Vec<Record>,
}

/// One line of gres.conf as `key=value` pairs, keys in lower case.
type Record = Vec<(String, String)>;

/// How slurmd on node `node` (its `NodeName`, which gres.conf's `NodeName=` lines name)
/// numbers its GPUs, from the text of gres.conf; `include` returns the text of a file an
/// `Include` line names. An error says which line could not be read.
pub fn gpu_numbering(
    text: &str,
    node: &str,
    include: &dyn Fn(&str) -> Result<String, String>,
) -> Result<GpuNumbering, String> {
    let mut read = Read::default();
    collect(text, include, 0, &mut read)?;
    let records = read.records;
    let value = |r: &Record, key: &str| {
        r.iter()
            .rev()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.clone())
    };
    let (mut global_detect, mut local_detect) = (None, None);
    let (mut common, mut own) = (Vec::new(), Vec::new());
    for r in &records {
        if let Some(names) = value(r, "nodename") {
            let here = hostlist::contains(&names, node)
                .map_err(|e| format!("gres.conf: NodeName={names}: {e}"))?;
            if !here {
                continue;
            }
            if let Some(a) = value(r, "autodetect") {
                local_detect = Some(a);
            }
            if value(r, "name").is_some() {
                own.push(r);
            }
        } else if value(r, "name").is_some() {
            common.push(r);
        } else if let Some(a) = value(r, "autodetect") {
            global_detect = Some(a);
        }
    }
    if let Some(detect) = local_detect.or(global_detect) {
        if !detect.eq_ignore_ascii_case("off") {
            return Ok(GpuNumbering::Detected(detect));
        }
    }
    let mut gpus = Vec::new();
    for r in common.into_iter().chain(own) {
        if value(r, "name").as_deref() != Some("gpu") {
            continue;
        }
        let files =
            |v: &str| hostlist::expand(v).map_err(|e| format!("gres.conf: the GPU files {v}: {e}"));
        if let Some(many) = value(r, "multiplefiles") {
            gpus.push(files(&many)?);
        } else if let Some(list) = value(r, "file").or_else(|| value(r, "files")) {
            gpus.extend(files(&list)?.into_iter().map(|f| vec![f]));
        }
    }
    Ok(GpuNumbering::Configured(gpus))
}

/// The records of `text` and of the files it includes, in order, within the bounds above.
fn collect(
    text: &str,
    include: &dyn Fn(&str) -> Result<String, String>,
    depth: usize,
    out: &mut Read,
) -> Result<(), String> {
    for line in logical_lines(text) {
        let words = words(&line)?;
        let Some(first) = words.first() else {
            continue;
        };
        if first.eq_ignore_ascii_case("include") {
            if depth >= MAX_INCLUDE_DEPTH {
                return Err(format!(
                    "gres.conf: more than {MAX_INCLUDE_DEPTH} levels of Include"
                ));
            }
            if out.files >= MAX_INCLUDED_FILES {
                return Err(format!(
                    "gres.conf: more than {MAX_INCLUDED_FILES} files included in all"
                ));
            }
            out.files += 1;
            let path = words.get(1).ok_or("gres.conf: Include without a file")?;
            collect(&include(path)?, include, depth + 1, out)?;
            continue;
        }
        if out.records.len() >= MAX_RECORDS {
            return Err(format!(
                "gres.conf: more than {MAX_RECORDS} lines in it and the files it includes"
            ));
        }
        let mut record = Record::new();
        for w in &words {
            let (k, v) = w
                .split_once('=')
                .ok_or_else(|| format!("gres.conf: '{w}' in '{line}' is not key=value"))?;
            record.push((k.to_ascii_lowercase(), v.to_string()));
        }
        out.records.push(record);
    }
    Ok(())
}

/// The lines of `text` with comments removed (`#` to the end of the line, `\#` is a `#`) and
/// lines ending in `\` joined to the next.
fn logical_lines(text: &str) -> Vec<String> {
    let mut lines = Vec::new();
    let mut current = String::new();
    for raw in text.lines() {
        let mut line = String::new();
        let mut chars = raw.chars().peekable();
        while let Some(c) = chars.next() {
            match c {
                '\\' if chars.peek() == Some(&'#') => {
                    line.push('#');
                    chars.next();
                }
                '#' => break,
                c => line.push(c),
            }
        }
        let trimmed = line.trim_end();
        if let Some(head) = trimmed.strip_suffix('\\') {
            current.push_str(head);
            current.push(' ');
            continue;
        }
        current.push_str(trimmed);
        if !current.trim().is_empty() {
            lines.push(current.trim().to_string());
        }
        current.clear();
    }
    if !current.trim().is_empty() {
        lines.push(current.trim().to_string());
    }
    lines
}

/// The words of a line, split at blanks; a double-quoted part may hold blanks.
fn words(line: &str) -> Result<Vec<String>, String> {
    let mut out = Vec::new();
    let mut word = String::new();
    let mut quoted = false;
    for c in line.chars() {
        match c {
            '"' => quoted = !quoted,
            c if c.is_whitespace() && !quoted => {
                if !word.is_empty() {
                    out.push(std::mem::take(&mut word));
                }
            }
            c => word.push(c),
        }
    }
    if quoted {
        return Err(format!("gres.conf: an unclosed quote in '{line}'"));
    }
    if !word.is_empty() {
        out.push(word);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn none(path: &str) -> Result<String, String> {
        Err(format!("no {path}"))
    }

    fn files(n: &GpuNumbering) -> Vec<String> {
        match n {
            GpuNumbering::Configured(g) => g.iter().map(|f| f.join("+")).collect(),
            GpuNumbering::Detected(d) => vec![format!("detected {d}")],
        }
    }

    #[test]
    fn records_in_file_order_name_lines_before_node_lines() {
        let conf = "# a comment\n\
                    AutoDetect=off\n\
                    NodeName=node[1-2] Name=gpu File=/dev/nvidia[2-3] Cores=1\n\
                    NodeName=node1 Name=gpu File=/dev/nvidia[0-1] Cores=0 # socket 0\n\
                    Name=gpu Type=a100 File=/dev/nvidia7\n\
                    NodeName=node3 Name=gpu File=/dev/nvidia9\n\
                    NodeName=node1 Name=shard Count=8 File=/dev/nvidia[0-3]\n";
        let n = gpu_numbering(conf, "node1", &none).unwrap();
        // By hand: the Name= line first, then node1's NodeName= lines in order; node3's line
        // and the shard record are not GPUs of node1.
        assert_eq!(
            files(&n),
            [
                "/dev/nvidia7",
                "/dev/nvidia2",
                "/dev/nvidia3",
                "/dev/nvidia0",
                "/dev/nvidia1"
            ]
        );
        assert_eq!(
            files(&gpu_numbering(conf, "node3", &none).unwrap()),
            ["/dev/nvidia7", "/dev/nvidia9"]
        );
    }

    #[test]
    fn multiple_files_are_one_gpu_and_keys_any_case() {
        let conf = "nodename=n1 name=gpu multiplefiles=/dev/dri/card0,/dev/dri/renderD128\n\
                    NODENAME=n1 NAME=gpu FILES=/dev/dri/renderD129\n";
        assert_eq!(
            files(&gpu_numbering(conf, "n1", &none).unwrap()),
            ["/dev/dri/card0+/dev/dri/renderD128", "/dev/dri/renderD129"]
        );
    }

    #[test]
    fn detection_global_or_for_the_node() {
        let conf = "AutoDetect=nvml\nNodeName=n1 Name=gpu File=/dev/nvidia[0-1]\n";
        assert_eq!(
            gpu_numbering(conf, "n1", &none).unwrap(),
            GpuNumbering::Detected("nvml".into())
        );
        // A node's own AutoDetect wins over the global one.
        let conf = "AutoDetect=nvml\nNodeName=n1 AutoDetect=off Name=gpu File=/dev/nvidia[0-1]\n";
        assert_eq!(
            files(&gpu_numbering(conf, "n1", &none).unwrap()),
            ["/dev/nvidia0", "/dev/nvidia1"]
        );
        assert_eq!(
            files(&gpu_numbering(conf, "n2", &none).unwrap()),
            ["detected nvml"]
        );
        // No AutoDetect: the generic plugin, nothing detected.
        assert_eq!(
            files(&gpu_numbering("Name=gpu File=/dev/nvidia0", "x", &none).unwrap()),
            ["/dev/nvidia0"]
        );
    }

    #[test]
    fn includes_continuations_and_errors() {
        let inc = |p: &str| {
            if p == "gpus.conf" {
                Ok("NodeName=n1 Name=gpu \\\n    File=/dev/nvidia4\n".to_string())
            } else {
                Err(format!("cannot read {p}"))
            }
        };
        let conf = "Name=gpu File=/dev/nvidia0\ninclude gpus.conf\n";
        assert_eq!(
            files(&gpu_numbering(conf, "n1", &inc).unwrap()),
            ["/dev/nvidia0", "/dev/nvidia4"]
        );
        let err = gpu_numbering("Include other.conf\n", "n1", &inc).unwrap_err();
        assert!(err.contains("cannot read other.conf"), "{err}");
        let err = gpu_numbering("Name=gpu File\n", "n1", &none).unwrap_err();
        assert!(
            err.contains("'File' in 'Name=gpu File' is not key=value"),
            "{err}"
        );
        let err = gpu_numbering("Name=gpu File=/dev/nvidia[0-\n", "n1", &none).unwrap_err();
        assert!(err.contains("/dev/nvidia[0-"), "{err}");
        let looped = |_: &str| Ok("include self.conf\n".to_string());
        let err = gpu_numbering("include self.conf\n", "n1", &looped).unwrap_err();
        assert!(err.contains("levels of Include"), "{err}");
    }

    #[test]
    fn wide_include_trees_are_bounded() {
        use std::cell::Cell;
        // Two levels, each file including the next 100 times: 100^8 files at the depth
        // bound without a count bound.
        let reads = Cell::new(0usize);
        let wide = |p: &str| {
            reads.set(reads.get() + 1);
            let level: usize = p.trim_end_matches(".conf").parse().unwrap();
            let next = format!("include {}.conf\n", level + 1);
            Ok(if level < 2 {
                next.repeat(100)
            } else {
                String::new()
            })
        };
        let err = gpu_numbering("include 1.conf\n", "n1", &wide).unwrap_err();
        assert!(err.contains("more than 64 files included"), "{err}");
        assert_eq!(reads.get(), MAX_INCLUDED_FILES);
        // One included file of many records, included a few times.
        let big = |_: &str| Ok("Name=gpu File=/dev/nvidia0\n".repeat(30_000));
        let err = gpu_numbering(&"include big.conf\n".repeat(3), "n1", &big).unwrap_err();
        assert!(err.contains("more than 65536 lines"), "{err}");
        // Within the bounds, the records are all read.
        let ok = |_: &str| Ok("Name=gpu File=/dev/nvidia0\n".to_string());
        let many = "include one.conf\n".repeat(MAX_INCLUDED_FILES);
        assert_eq!(files(&gpu_numbering(&many, "n1", &ok).unwrap()).len(), 64);
    }
}

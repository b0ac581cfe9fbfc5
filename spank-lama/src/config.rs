//! Site configuration (SPEC §3.5): `key=value` arguments on the plugin's `plugstack.conf` line,
//! optionally a TOML file named there with `config=/path/lama.toml`.
//!
//! The file is read first, then the line's other arguments override it. Every key is checked:
//! an unknown key, a malformed value or an unreadable file is an error, and the plugin refuses
//! to load with a message in slurmd's log that names the key and what would work.
//! `plugstack.conf.example` at the top of the repository documents every key.

use lama_engine::{Bind, CpuUnit, Layout, Membind, Mppr, Order};
use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;

/// The name of Slurm's cached whole-node topology in the running Slurm's `SlurmdSpoolDir`.
pub const SLURM_XML_NAME: &str = "hwloc_topo_whole.xml";

/// The name of LAMA's own cached topology, written at slurmd start, in the same directory
/// (beside Slurm's file, which Slurm ≥ 25.05 no longer writes).
pub const TOPOLOGY_CACHE_NAME: &str = "lama_topology.xml";

/// Where a cached topology file is: by default in the `SlurmdSpoolDir` of the Slurm the plugin
/// runs in (read from that Slurm, [`crate::slurm_conf`]), else where the site's line says.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum SpoolFile {
    /// `SlurmdSpoolDir/<name>`.
    #[default]
    InSpool,
    /// The path the site gave.
    At(PathBuf),
    /// `none`: neither written nor read.
    Off,
}

/// What to do when a site default cannot be placed for a step.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OnFailure {
    /// Run the step without LAMA binding and tell the user why (the default).
    #[default]
    Warn,
    /// Fail the step.
    Fail,
}

/// The site's settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SiteConfig {
    /// Default layout for steps without `--lama-map` (`None`: LAMA only when asked for).
    pub map: Option<Layout>,
    /// Default binding (used with the default layout or a user layout without `--lama-bind`);
    /// `None`: the built-in default, `1c`, widened to cover `-c` CPUs per task.
    pub bind: Option<Bind>,
    /// Default memory binding.
    pub membind: Membind,
    /// What Slurm counts as a CPU on this node (`None`: detected per step).
    pub cpu_unit: Option<CpuUnit>,
    /// Default MPPR limits.
    pub mppr: Mppr,
    /// Default rank ordering.
    pub order: Order,
    /// Whether users may give `--lama-*` options (when false, only the site default applies
    /// and user options are refused with a message).
    pub user_options: bool,
    /// Admin topology file, `%n` standing for the node name.
    pub topology: Option<String>,
    /// Slurm's cached XML.
    pub slurm_xml: SpoolFile,
    /// LAMA's own cached XML, written when slurmd starts.
    pub topology_cache: SpoolFile,
    /// The running Slurm's `SlurmdSpoolDir`, `%n` and `%h` expanded, or why it is not known
    /// (set by the plugin in slurmd and slurmstepd; unknown elsewhere).
    pub spool_dir: Result<PathBuf, String>,
    /// Print the per-task verbose line for every step LAMA places.
    pub verbose: bool,
    /// What to do when the site default cannot be placed.
    pub on_default_failure: OnFailure,
}

impl Default for SiteConfig {
    fn default() -> Self {
        SiteConfig {
            map: None,
            bind: None,
            membind: Membind::None,
            cpu_unit: None,
            mppr: Mppr::none(),
            order: Order::Natural,
            user_options: true,
            topology: None,
            slurm_xml: SpoolFile::InSpool,
            topology_cache: SpoolFile::InSpool,
            spool_dir: Err("SlurmdSpoolDir is read only in slurmd and slurmstepd".to_string()),
            verbose: false,
            on_default_failure: OnFailure::Warn,
        }
    }
}

/// A configuration error, reported in slurmd's log before the plugin refuses to load.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    /// Where: `plugstack.conf` or the TOML file's path.
    pub origin: String,
    /// What was wrong and what would work.
    pub message: String,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "lama: invalid site configuration in {}: {}",
            self.origin, self.message
        )
    }
}

impl std::error::Error for ConfigError {}

/// The keys: each with the form of its value (for messages) and what it does (for
/// spank-lama(8), [`crate::manual`]).
pub const KEYS: [(&str, &str, &str); 13] = [
    (
        "config",
        "path of a TOML file with these keys (plugstack.conf only)",
        "Read the settings from this TOML file first (key = \"value\", booleans as true or \
         false); settings on the plugstack.conf line override it.",
    ),
    (
        "map",
        "a layout or alias, or none",
        "The site's default layout for steps without --lama-map. Unset (none): LAMA acts only \
         when a user asks.",
    ),
    (
        "bind",
        "a binding width or alias, or none",
        "The default binding width, with the site layout or a user layout given without \
         --lama-bind. Unset: 1c, widened for -c N to the narrowest binding of N CPUs. Set: used \
         as it is; narrower than -c warns the user once per step.",
    ),
    (
        "membind",
        "local, preferred or none",
        "The default memory binding: local (only the NUMA nodes of each task's CPU binding), \
         preferred (prefer them) or none.",
    ),
    (
        "cpu_unit",
        "auto, thread or core",
        "What -c counts on this node: thread, core, or auto (from the job's CPUs and cpuset: \
         Slurm counts cores when each CPU it allocates brings a whole core's threads).",
    ),
    (
        "mppr",
        "MPPR limits like 1:c,4:s, or none",
        "The default MPPR limits, for example 1:c,4:s.",
    ),
    (
        "order",
        "n or s",
        "The default rank order within a node: n (natural) or s (sequential).",
    ),
    (
        "user_options",
        "yes or no",
        "Whether users may give --lama-* options. With no, only the site default applies and \
         user options are refused with a message.",
    ),
    (
        "topology",
        "path of the node's hwloc XML, %n = node name",
        "The node's hwloc XML file, %n standing for the node's NodeName (its short host name \
         where slurmd does not say otherwise), for example \
         /etc/slurm/topology/%n.xml (write it with lama export). Used first when it matches \
         the node's online CPUs.",
    ),
    (
        "slurm_xml",
        "path of Slurm's hwloc_topo_whole.xml, or none",
        "Slurm's cached whole-node topology, default hwloc_topo_whole.xml in the SlurmdSpoolDir \
         of the running Slurm (written by Slurm 18.08 to 24.11 only), used while it matches the \
         node's online CPUs. none: not read.",
    ),
    (
        "topology_cache",
        "path of the topology LAMA caches when slurmd starts, or none",
        "LAMA's own cached topology, default lama_topology.xml in the SlurmdSpoolDir of the \
         running Slurm (%n and %h expanded as slurmd does): written when slurmd starts (atomically, mode 0644) and used while it matches the node's online \
         CPUs. It replaces the file Slurm 25.05 and later no longer write. A failed write is \
         logged and slurmd starts anyway. none: neither written nor read.",
    ),
    (
        "verbose",
        "yes or no",
        "Print the per-task binding line for every step LAMA places, as --lama-verbose does.",
    ),
    (
        "on_default_failure",
        "warn or fail",
        "When the site default cannot be placed (too many tasks, an empty cpuset): warn and run \
         the step unbound, or fail it. A placement the user asked for always fails the step.",
    ),
];

fn known_keys() -> String {
    KEYS.iter()
        .map(|(k, _, _)| *k)
        .collect::<Vec<_>>()
        .join(", ")
}

fn boolean(key: &str, value: &str) -> Result<bool, String> {
    match value {
        "yes" | "true" | "1" | "on" => Ok(true),
        "no" | "false" | "0" | "off" => Ok(false),
        _ => Err(format!("{key}={value}: expected yes or no")),
    }
}

fn absolute_path(key: &str, value: &str) -> Result<String, String> {
    if value.starts_with('/') && !value.contains('\0') {
        Ok(value.to_string())
    } else {
        Err(format!("{key}={value}: expected an absolute path"))
    }
}

/// Whether a node name can stand for `%n` in a path: not empty, no `/`, no leading `.` (it
/// could escape the directory), no NUL.
pub fn usable_in_path(node: &str) -> bool {
    !(node.is_empty() || node.contains('/') || node.starts_with('.') || node.contains('\0'))
}

/// A cache file setting: `none` or an absolute path.
fn spool_file(key: &str, value: &str) -> Result<SpoolFile, String> {
    if value == "none" {
        return Ok(SpoolFile::Off);
    }
    absolute_path(key, value)
        .map(|p| SpoolFile::At(PathBuf::from(p)))
        .map_err(|e| format!("{e} or none"))
}

impl SiteConfig {
    /// Applies one `key=value` setting.
    fn set(&mut self, key: &str, value: &str) -> Result<(), String> {
        let diag = |d: lama_engine::Diagnostic| {
            let d = lama_slurm::familiar::explain(d);
            format!("{key}={value}: {}", d.headline())
        };
        match key {
            "map" => {
                self.map = if value == "none" {
                    None
                } else {
                    Some(Layout::parse(value).map_err(diag)?)
                }
            }
            "bind" => self.bind = Some(Bind::parse(value).map_err(diag)?),
            "membind" => self.membind = Membind::parse(value).map_err(diag)?,
            "cpu_unit" => {
                self.cpu_unit = match value {
                    "auto" => None,
                    "thread" => Some(CpuUnit::Thread),
                    "core" => Some(CpuUnit::Core),
                    _ => return Err(format!("{key}={value}: expected auto, thread or core")),
                }
            }
            "mppr" => {
                self.mppr = if value == "none" {
                    Mppr::none()
                } else {
                    Mppr::parse(value).map_err(diag)?
                }
            }
            "order" => self.order = Order::parse(value).map_err(diag)?,
            "user_options" => self.user_options = boolean(key, value)?,
            "topology" => self.topology = Some(absolute_path(key, value)?),
            "slurm_xml" => self.slurm_xml = spool_file(key, value)?,
            "topology_cache" => self.topology_cache = spool_file(key, value)?,
            "verbose" => self.verbose = boolean(key, value)?,
            "on_default_failure" => {
                self.on_default_failure = match value {
                    "warn" => OnFailure::Warn,
                    "fail" => OnFailure::Fail,
                    _ => return Err(format!("{key}={value}: expected warn or fail")),
                }
            }
            _ => {
                return Err(format!(
                    "unknown key '{key}' (known keys: {})",
                    known_keys()
                ))
            }
        }
        Ok(())
    }

    /// Reads the plugstack.conf arguments; `read_file` reads the TOML file named by `config=`
    /// (a parameter so tests need no file system).
    pub fn from_args(
        args: &[&str],
        read_file: impl Fn(&str) -> std::io::Result<String>,
    ) -> Result<SiteConfig, ConfigError> {
        let line_err = |message: String| ConfigError {
            origin: "plugstack.conf".to_string(),
            message,
        };
        let mut pairs: Vec<(&str, &str)> = Vec::with_capacity(args.len());
        for arg in args {
            let (k, v) = arg.split_once('=').ok_or_else(|| {
                line_err(format!(
                    "'{arg}' is not key=value (known keys: {})",
                    known_keys()
                ))
            })?;
            pairs.push((k, v));
        }
        let mut cfg = SiteConfig::default();
        if let Some(&(_, path)) = pairs.iter().rev().find(|(k, _)| *k == "config") {
            let path = absolute_path("config", path).map_err(line_err)?;
            let text = read_file(&path).map_err(|e| {
                line_err(format!(
                    "config={path}: cannot read it: {e}; srun, sbatch and salloc read it as \
                         the user who runs them, so it must be readable by every user (mode \
                         0644, like plugstack.conf)"
                ))
            })?;
            cfg.apply_toml(&text).map_err(|message| ConfigError {
                origin: path.clone(),
                message,
            })?;
        }
        for (k, v) in pairs {
            if k != "config" {
                cfg.set(k, v).map_err(line_err)?;
            }
        }
        Ok(cfg)
    }

    fn apply_toml(&mut self, text: &str) -> Result<(), String> {
        let table: BTreeMap<String, toml::Value> =
            toml::from_str(text).map_err(|e| format!("not valid TOML: {}", e.message()))?;
        for (key, value) in table {
            if key == "config" {
                return Err("'config' cannot name another file".to_string());
            }
            let text = match value {
                toml::Value::String(s) => s,
                toml::Value::Boolean(b) => if b { "yes" } else { "no" }.to_string(),
                other => {
                    return Err(format!(
                        "{key}: expected a string or a boolean, found {}",
                        other.type_str()
                    ))
                }
            };
            self.set(&key, &text)?;
        }
        Ok(())
    }

    /// The admin topology path for `node`, with `%n` replaced. Node names that could escape
    /// the directory (`/`, leading `.`) are refused.
    pub fn topology_for(&self, node: &str) -> Option<Result<PathBuf, String>> {
        let template = self.topology.as_ref()?;
        if !template.contains("%n") {
            return Some(Ok(PathBuf::from(template)));
        }
        if !usable_in_path(node) {
            return Some(Err(format!("node name '{node}' cannot be used in a path")));
        }
        Some(Ok(PathBuf::from(template.replace("%n", node))))
    }

    /// Slurm's cached topology: `Ok(None)` when the site turned it off, `Err` when it is in the
    /// spool directory and that is not known.
    pub fn slurm_xml_path(&self) -> Result<Option<PathBuf>, String> {
        self.spool_path(&self.slurm_xml, SLURM_XML_NAME)
    }

    /// LAMA's cached topology, as [`Self::slurm_xml_path`].
    pub fn topology_cache_path(&self) -> Result<Option<PathBuf>, String> {
        self.spool_path(&self.topology_cache, TOPOLOGY_CACHE_NAME)
    }

    fn spool_path(&self, file: &SpoolFile, name: &str) -> Result<Option<PathBuf>, String> {
        match file {
            SpoolFile::Off => Ok(None),
            SpoolFile::At(path) => Ok(Some(path.clone())),
            SpoolFile::InSpool => match &self.spool_dir {
                Ok(dir) => Ok(Some(dir.join(name))),
                Err(why) => Err(why.clone()),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn no_file(_: &str) -> std::io::Result<String> {
        Err(std::io::Error::new(
            std::io::ErrorKind::NotFound,
            "No such file",
        ))
    }

    #[test]
    fn defaults_without_arguments() {
        assert_eq!(
            SiteConfig::from_args(&[], no_file).unwrap(),
            SiteConfig::default()
        );
    }

    #[test]
    fn line_arguments() {
        let cfg = SiteConfig::from_args(
            &[
                "map=socket",
                "bind=1s",
                "mppr=2:c",
                "order=s",
                "user_options=no",
                "topology=/etc/slurm/topo/%n.xml",
                "verbose=yes",
                "on_default_failure=fail",
                "membind=preferred",
                "cpu_unit=core",
                "topology_cache=none",
            ],
            no_file,
        )
        .unwrap();
        assert_eq!(cfg.map, Some(Layout::parse("scbnh").unwrap()));
        assert_eq!(cfg.bind, Some(Bind::parse("1s").unwrap()));
        assert_eq!(cfg.membind, Membind::Preferred);
        assert_eq!(cfg.cpu_unit, Some(CpuUnit::Core));
        assert_eq!(cfg.mppr.to_string(), "2:c");
        assert_eq!(cfg.order, Order::Sequential);
        assert!(!cfg.user_options && cfg.verbose);
        assert_eq!(cfg.on_default_failure, OnFailure::Fail);
        assert_eq!(cfg.topology_cache, SpoolFile::Off);
        assert_eq!(cfg.topology_cache_path(), Ok(None));
        assert_eq!(
            cfg.topology_for("node1").unwrap().unwrap(),
            PathBuf::from("/etc/slurm/topo/node1.xml")
        );
        assert!(cfg.topology_for("../x").unwrap().is_err());
    }

    #[test]
    fn cache_files_are_in_the_running_slurms_spool_unless_the_line_says() {
        let mut cfg = SiteConfig::from_args(&[], no_file).unwrap();
        // Outside slurmd and slurmstepd the spool is unknown: no path is guessed.
        assert!(cfg.slurm_xml_path().unwrap_err().contains("SlurmdSpoolDir"));
        assert!(cfg.topology_cache_path().is_err());
        cfg.spool_dir = Ok(PathBuf::from("/var/spool/slurmd"));
        assert_eq!(
            cfg.slurm_xml_path(),
            Ok(Some(PathBuf::from(
                "/var/spool/slurmd/hwloc_topo_whole.xml"
            )))
        );
        assert_eq!(
            cfg.topology_cache_path(),
            Ok(Some(PathBuf::from("/var/spool/slurmd/lama_topology.xml")))
        );
        let mut cfg = SiteConfig::from_args(
            &["slurm_xml=none", "topology_cache=/srv/lama/topo.xml"],
            no_file,
        )
        .unwrap();
        cfg.spool_dir = Ok(PathBuf::from("/var/spool/slurmd"));
        assert_eq!(cfg.slurm_xml_path(), Ok(None));
        assert_eq!(
            cfg.topology_cache_path(),
            Ok(Some(PathBuf::from("/srv/lama/topo.xml")))
        );
    }

    #[test]
    fn toml_file_then_line_overrides() {
        let file = |p: &str| {
            assert_eq!(p, "/etc/slurm/lama.toml");
            Ok("map = \"scbnh\"\nbind = \"1c\"\nverbose = true\n".to_string())
        };
        let cfg =
            SiteConfig::from_args(&["config=/etc/slurm/lama.toml", "bind=none"], file).unwrap();
        assert_eq!(cfg.map.unwrap().to_string(), "scbnh");
        assert_eq!(cfg.bind, Some(Bind::None));
        assert!(cfg.verbose);
    }

    #[test]
    fn errors_name_the_key_and_what_works() {
        let e = SiteConfig::from_args(&["mapp=scbnh"], no_file).unwrap_err();
        assert_eq!(
            e.to_string(),
            "lama: invalid site configuration in plugstack.conf: unknown key 'mapp' (known keys: \
             config, map, bind, membind, cpu_unit, mppr, order, user_options, topology, \
             slurm_xml, topology_cache, verbose, on_default_failure)"
        );
        let e = SiteConfig::from_args(&["map=scbnx"], no_file).unwrap_err();
        assert!(e
            .message
            .contains("map=scbnx: invalid mapping layout 'scbnx': unknown token 'x'"));
        assert!(SiteConfig::from_args(&["verbose"], no_file)
            .unwrap_err()
            .message
            .contains("not key=value"));
        assert!(SiteConfig::from_args(&["verbose=maybe"], no_file).is_err());
        let e = SiteConfig::from_args(&["membind=strict"], no_file).unwrap_err();
        assert!(e
            .message
            .contains("membind=strict: invalid memory binding 'strict'"));
        let e = SiteConfig::from_args(&["cpu_unit=socket"], no_file).unwrap_err();
        assert!(e.message.contains("expected auto, thread or core"), "{e}");
        assert!(SiteConfig::from_args(&["topology=relative/x.xml"], no_file).is_err());
        let e = SiteConfig::from_args(&["topology_cache=cache.xml"], no_file).unwrap_err();
        assert!(
            e.message.contains("expected an absolute path or none"),
            "{e}"
        );
        let e = SiteConfig::from_args(&["config=/etc/slurm/lama.toml"], no_file).unwrap_err();
        assert!(e.message.contains("cannot read it"));
        assert!(e
            .message
            .ends_with("readable by every user (mode 0644, like plugstack.conf)"));
        let bad_toml = |_: &str| Ok("map = 3\n".to_string());
        let e = SiteConfig::from_args(&["config=/x.toml"], bad_toml).unwrap_err();
        assert_eq!(e.origin, "/x.toml");
        assert!(e.message.contains("expected a string or a boolean"));
        let unknown = |_: &str| Ok("colour = \"red\"\n".to_string());
        assert!(SiteConfig::from_args(&["config=/x.toml"], unknown)
            .unwrap_err()
            .message
            .contains("unknown key 'colour'"));
    }
}

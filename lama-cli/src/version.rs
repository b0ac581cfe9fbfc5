//! What `lama --version` says: the command's and engine's versions and, with `--version`,
//! the Slurm release of the installed plugin.

/// Where `lama --version` looks for the installed plugin: `LAMA_PLUGIN`, else in each
/// directory of the running Slurm's `PluginDir` (`scontrol show config`), else in the plugin
/// directory of this build ([`lama_slurm::built_for::INSTALL_DIR`]). The first file that
/// exists is read; `Err` lists where it looked.
fn installed_plugin() -> Result<String, String> {
    if let Ok(path) = std::env::var("LAMA_PLUGIN") {
        return Ok(path);
    }
    let slurm = crate::static_build::command("scontrol")
        .args(["show", "config"])
        .stderr(std::process::Stdio::null())
        .output()
        .ok()
        .filter(|out| out.status.success())
        .and_then(|out| plugin_dir(&String::from_utf8_lossy(&out.stdout)));
    let mut dirs: Vec<String> = slurm
        .iter()
        .flat_map(|d| d.split(':'))
        .filter(|d| !d.is_empty())
        .map(str::to_string)
        .collect();
    dirs.extend(lama_slurm::built_for::INSTALL_DIR.map(str::to_string));
    let candidates: Vec<String> = dirs.iter().map(|d| format!("{d}/spank_lama.so")).collect();
    candidates
        .iter()
        .find(|p| std::path::Path::new(p).is_file())
        .cloned()
        .ok_or_else(|| {
            let looked = if candidates.is_empty() {
                "nowhere: no Slurm answered scontrol show config, and this build names no plugin \
                 directory"
                    .to_string()
            } else {
                candidates.join(", ")
            };
            format!("plugin: not found (looked in {looked}); set LAMA_PLUGIN to its path")
        })
}

/// `PluginDir` from `scontrol show config` output (`PluginDir = /usr/lib64/slurm`).
fn plugin_dir(config: &str) -> Option<String> {
    config.lines().find_map(|line| {
        let (key, value) = line.split_once('=')?;
        (key.trim() == "PluginDir").then(|| value.trim().to_string())
    })
}

/// What `lama --version` says about the plugin at `path`: the Slurm release it was built for,
/// read from the text the plugin carries ([`lama_slurm::built_for`]).
fn plugin_version(path: &str) -> String {
    match std::fs::read(path) {
        Ok(bytes) => match lama_slurm::built_for::find(&bytes) {
            Some(release) => format!("plugin: {path}, built for Slurm {release}"),
            None => format!("plugin: {path} is not a spank-lama plugin"),
        },
        Err(e) => format!("plugin: none at {path} ({e}; set LAMA_PLUGIN to its path)"),
    }
}

/// The version text: the command's and engine's versions and, when `with_plugin`, the Slurm
/// release of the installed plugin (read from its file: only for `--version`).
pub(crate) fn version_text(with_plugin: bool) -> String {
    let mut text = format!(
        "{} (lama-engine {})",
        env!("CARGO_PKG_VERSION"),
        lama_engine::VERSION
    );
    if with_plugin {
        let line = match installed_plugin() {
            Ok(plugin) => plugin_version(&plugin),
            Err(why) => why,
        };
        text += &format!("\n{line}");
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plugin_dir_is_read_from_scontrol_show_config() {
        let config = "Configuration data as of 2026-11-26T10:00:00\n\
                      PlugStackConfig         = /etc/slurm/plugstack.conf\n\
                      PluginDir               = /usr/local/lib/slurm:/opt/site/slurm\n\
                      SlurmdSpoolDir          = /var/spool/slurmd\n";
        assert_eq!(
            plugin_dir(config).as_deref(),
            Some("/usr/local/lib/slurm:/opt/site/slurm")
        );
        assert_eq!(
            plugin_dir("PlugStackConfig = /etc/slurm/plugstack.conf\n"),
            None
        );
    }

    #[test]
    fn plugin_version_reads_the_marker() {
        let dir = tempfile::tempdir().unwrap();
        let so = dir.path().join("spank_lama.so");
        let mut file = b"\x7fELF\0junk ".to_vec();
        file.extend_from_slice(&lama_slurm::built_for::encode(0x1a0505));
        file.extend_from_slice(b"\0more");
        std::fs::write(&so, file).unwrap();
        let path = so.to_str().unwrap();
        assert_eq!(
            plugin_version(path),
            format!("plugin: {path}, built for Slurm 26.05.5")
        );
        std::fs::write(&so, b"\x7fELF other").unwrap();
        assert!(plugin_version(path).ends_with("is not a spank-lama plugin"));
        let missing = dir.path().join("none.so");
        assert!(plugin_version(missing.to_str().unwrap()).contains("set LAMA_PLUGIN"));
        // Only --version reads the plugin.
        assert!(!version_text(false).contains("plugin"));
        assert_eq!(version_text(false).lines().count(), 1);
    }
}

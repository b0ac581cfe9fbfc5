//! The text a spank-lama plugin carries to say which Slurm release it was built for:
//! `spank-lama built for Slurm MAJOR.MINOR.MICRO` (Slurm's form: 24.11.5, 26.05.5), NUL-padded.
//! The plugin embeds it ([`encode`] of its headers' `SLURM_VERSION_NUMBER`); `lama --version`
//! ([`find`]) and `scripts/install-plugin.sh` (`grep -a`) read it from the file, without
//! loading the plugin or reading ELF symbols.

/// The plugin directory this build installs into (`LAMA_PLUGINDIR` when it was built, set by
/// `./configure` and `make`: the running Slurm's `PluginDir`, or the one the admin named);
/// `None` for a plain `cargo build`, which names no directory.
pub const INSTALL_DIR: Option<&str> = option_env!("LAMA_PLUGINDIR");

/// The installed plugin's path as the documentation writes it: in [`INSTALL_DIR`], else in
/// Slurm's `PluginDir`.
pub fn plugin_path() -> String {
    format!("{}/spank_lama.so", INSTALL_DIR.unwrap_or("PluginDir"))
}

/// What precedes the release.
pub const PREFIX: &str = "spank-lama built for Slurm ";

/// The length of the embedded text, padding included.
pub const LEN: usize = 48;

/// The text for a `SLURM_VERSION_NUMBER` (`0x180b05` is 24.11.5).
pub const fn encode(version: u32) -> [u8; LEN] {
    let mut out = [0u8; LEN];
    let prefix = PREFIX.as_bytes();
    let mut i = 0;
    while i < prefix.len() {
        out[i] = prefix[i];
        i += 1;
    }
    let parts = [version >> 16, (version >> 8) & 0xff, version & 0xff];
    let mut p = 0;
    while p < 3 {
        if p > 0 {
            out[i] = b'.';
            i += 1;
        }
        let n = parts[p];
        if n >= 100 {
            out[i] = b'0' + (n / 100) as u8;
            i += 1;
        }
        // The minor version has two digits, as Slurm writes it: 26.05.
        if n >= 10 || p == 1 {
            out[i] = b'0' + (n / 10 % 10) as u8;
            i += 1;
        }
        out[i] = b'0' + (n % 10) as u8;
        i += 1;
        p += 1;
    }
    out
}

/// The release named by the first such text in `bytes` (a plugin file), if any.
pub fn find(bytes: &[u8]) -> Option<&str> {
    let prefix = PREFIX.as_bytes();
    let at = bytes.windows(prefix.len()).position(|w| w == prefix)?;
    let rest = &bytes[at + prefix.len()..];
    let end = rest
        .iter()
        .position(|b| !(b.is_ascii_digit() || *b == b'.'))
        .unwrap_or(rest.len());
    std::str::from_utf8(&rest[..end]).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(v: u32) -> String {
        let m = encode(v);
        String::from_utf8(m.iter().copied().take_while(|&b| b != 0).collect()).unwrap()
    }

    #[test]
    fn encodes_slurm_releases_as_slurm_writes_them() {
        assert_eq!(text(0x180b05), "spank-lama built for Slurm 24.11.5");
        assert_eq!(text(0x1a0500), "spank-lama built for Slurm 26.05.0");
        assert_eq!(text(0xffffff), "spank-lama built for Slurm 255.255.255");
    }

    #[test]
    fn finds_what_it_encoded() {
        let mut file = b"\x7fELF\0junk ".to_vec();
        file.extend_from_slice(&encode(0x1a0505));
        file.extend_from_slice(b"\0more");
        assert_eq!(find(&file), Some("26.05.5"));
        assert_eq!(find(b"\x7fELF other"), None);
    }
}

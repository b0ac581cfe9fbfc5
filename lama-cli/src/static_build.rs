//! A statically linked `lama` (`make static`): hwloc's plugins are shared objects that need a
//! dynamic libhwloc and the C library they were built with, so they cannot load into it, and
//! a dlopen of them into a static process would bring a second C library. hwloc looks for
//! them in `HWLOC_PLUGINS_PATH`: a static build empties it for itself (unless the user set it)
//! and gives programs it starts the environment they would have had.

use std::ffi::OsStr;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};

/// Whether this process emptied `HWLOC_PLUGINS_PATH`.
static EMPTIED: AtomicBool = AtomicBool::new(false);

/// Called first in `main`, before any thread or hwloc call.
pub fn no_hwloc_plugins() {
    if cfg!(target_feature = "crt-static") && std::env::var_os("HWLOC_PLUGINS_PATH").is_none() {
        std::env::set_var("HWLOC_PLUGINS_PATH", "");
        EMPTIED.store(true, Ordering::Relaxed);
    }
}

/// `Command::new(program)`, without the `HWLOC_PLUGINS_PATH` this process set for itself.
pub fn command(program: impl AsRef<OsStr>) -> Command {
    let mut c = Command::new(program);
    if EMPTIED.load(Ordering::Relaxed) {
        c.env_remove("HWLOC_PLUGINS_PATH");
    }
    c
}

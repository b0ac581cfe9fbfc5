//! Links Scotch statically where its archives are installed (Debian's libscotch-dev ships
//! them), so that the `lama` command runs on any Debian release whatever its Scotch library is
//! called: trixie's is `libscotch-7.0.so`, sid's `libscotch.so.7.0`. The archives are copied
//! alone into a directory of the build, which the linker searches before the system's, so
//! scotch-sys's `-lscotch -lscotcherr` find them there; Scotch's own dependencies follow.
//! Without the archives, the shared libraries are used as before. Built without the feature
//! `scotch`, nothing is linked.
use std::path::PathBuf;

fn main() {
    if std::env::var_os("CARGO_FEATURE_SCOTCH").is_none() {
        return;
    }
    let lib_dir = std::env::var_os("SCOTCH_LIB_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/usr/lib/x86_64-linux-gnu"));
    println!("cargo:rerun-if-env-changed=SCOTCH_LIB_DIR");
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"))
        .join("scotch-static");
    let archives = ["libscotch.a", "libscotcherr.a"];
    if !archives.iter().all(|a| lib_dir.join(a).is_file()) {
        println!(
            "cargo:warning=no Scotch archives in {}: lama links the shared Scotch library",
            lib_dir.display()
        );
        return;
    }
    std::fs::create_dir_all(&out).expect("create the archive directory");
    for a in archives {
        println!("cargo:rerun-if-changed={}", lib_dir.join(a).display());
        std::fs::copy(lib_dir.join(a), out.join(a)).expect("copy a Scotch archive");
    }
    println!("cargo:rustc-link-search=native={}", out.display());
    for lib in ["z", "bz2", "lzma", "m", "pthread"] {
        println!("cargo:rustc-link-lib={lib}");
    }
}

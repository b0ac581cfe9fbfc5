//! Compiles `csrc/slurm_conf.c` against the Slurm headers the plugin is built for (found as
//! the SPANK bindings find them: `CPATH`, or `-I` in `BINDGEN_EXTRA_CLANG_ARGS`). The C file
//! also refuses headers older than Slurm 23.02, with the reason.
fn main() {
    println!("cargo:rerun-if-changed=csrc/slurm_conf.c");
    println!("cargo:rerun-if-env-changed=CPATH");
    println!("cargo:rerun-if-env-changed=BINDGEN_EXTRA_CLANG_ARGS");
    let mut build = cc::Build::new();
    build.file("csrc/slurm_conf.c").warnings(true);
    if let Ok(args) = std::env::var("BINDGEN_EXTRA_CLANG_ARGS") {
        for arg in args.split_whitespace() {
            if let Some(dir) = arg.strip_prefix("-I") {
                build.include(dir);
            }
        }
    }
    build.compile("lama_slurm_conf");
}

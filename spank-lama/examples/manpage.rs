//! Prints spank-lama(8) in roff: `cargo run -p spank-lama --example manpage > spank-lama.8`.
fn main() {
    print!(
        "{}",
        spank_lama::manual::man_page(env!("CARGO_PKG_VERSION"))
    );
}

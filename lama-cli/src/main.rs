//! `lama`: preview LAMA placements on any topology, before a job is submitted.
//!
//! A thin shell over `lama-engine` (placement, rendering) and `lama-hwloc` (topologies).
//! Exit status: 0 success; 1 the request cannot be placed; 2 usage or syntax error.

use clap::FromArgMatches;
use lama_engine::render;
use lama_hwloc::Source;
use std::process::ExitCode;

mod asked;
mod cli;
mod color;
mod emit;
mod env_preview;
mod exec;
mod gpu;
mod json;
mod manual;
mod map;
mod map_args;
mod nodes;
mod output;
mod own_view;
mod plan;
mod ranks;
mod srun_line;
mod static_build;
mod verify;
mod verify_gpu;
mod version;

use cli::{command, Cli, Command};
use nodes::{cpulist, load, restricted};
use output::{print, print_human};

/// A failure with its exit status.
#[derive(Debug)]
pub(crate) enum Failure {
    /// Bad usage or syntax: exit 2.
    Usage(String),
    /// The request cannot be placed: exit 1.
    Place(String),
    /// Already reported (`lama verify`): exit with this status.
    Status(u8),
}

fn main() -> ExitCode {
    static_build::no_hwloc_plugins();
    let asks_version = std::env::args_os()
        .skip(1)
        .any(|a| a == "--version" || a == "-V");
    // `lama map ... -- srun LINE`: the line's options as lama map's own.
    let (args, notes) = match srun_line::expand(std::env::args_os().collect()) {
        Ok(expanded) => expanded,
        Err(e) => {
            eprintln!("{} {e}", color::error_prefix());
            return ExitCode::from(2);
        }
    };
    let matches = command(asks_version).get_matches_from(args);
    let mut cli = match Cli::from_arg_matches(&matches) {
        Ok(cli) => cli,
        Err(e) => e.exit(),
    };
    if let Command::Map(map) = &mut cli.command {
        // -c given, even as 1, makes a Slurm step exact.
        map.c_given = matches.subcommand_matches("map").is_some_and(|m| {
            m.value_source("cpus_per_task") == Some(clap::parser::ValueSource::CommandLine)
        });
    }
    color::set(cli.color);
    for note in notes {
        eprintln!("lama: {note}");
    }
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(Failure::Usage(msg)) => {
            eprintln!("{} {msg}", color::error_prefix());
            ExitCode::from(2)
        }
        Err(Failure::Place(msg)) => {
            eprintln!("{} {msg}", color::error_prefix());
            ExitCode::from(1)
        }
        Err(Failure::Status(code)) => ExitCode::from(code),
    }
}

fn run(cli: Cli) -> Result<(), Failure> {
    match cli.command {
        Command::Map(args) => map::map(*args),
        Command::Plan(args) => plan::run(*args),
        Command::Verify(args) => verify::run(*args),
        Command::Exec(args) => exec::run(*args),
        Command::Topology { topology, restrict } => {
            let machine = load(&topology)?;
            let machine = match restrict {
                Some(r) => restricted(machine, &cpulist(&r)?, "--restrict")?,
                None => machine,
            };
            let text = render::topology_text(&machine);
            print_human(&output::fold_pictures(&text, output::terminal_columns()))
        }
        Command::Export { file } => {
            let xml =
                lama_hwloc::export_xml(&Source::Live).map_err(|e| Failure::Place(e.to_string()))?;
            match file {
                Some(path) => std::fs::write(&path, xml)
                    .map_err(|e| Failure::Place(format!("cannot write {}: {e}", path.display()))),
                None => print(&xml),
            }
        }
        Command::Completions { shell } => {
            let mut out = Vec::new();
            // Hidden subcommands (manpage, for packaging) are not offered.
            let full = command(false);
            let mut shown = clap::Command::new("lama")
                .about(full.get_about().cloned().unwrap_or_default())
                .args(full.get_arguments().cloned());
            for sub in full.get_subcommands().filter(|s| !s.is_hide_set()) {
                shown = shown.subcommand(sub.clone());
            }
            clap_complete::generate(shell, &mut shown, "lama", &mut out);
            print(&String::from_utf8_lossy(&out))
        }
        Command::Manpage => print(&manual::man_page(
            &command(false),
            env!("CARGO_PKG_VERSION"),
        )),
    }
}

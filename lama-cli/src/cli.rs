//! The command line `lama` parses: its subcommands and `lama map`'s options (also the
//! source of lama(1) and the shell completions).

use crate::map_args::MapArgs;
use crate::{color, exec, manual, plan, verify};
use clap::{CommandFactory, Parser, Subcommand};

#[derive(Parser, Debug)]
#[command(
    name = "lama",
    version,
    about = "Preview Locality-Aware Mapping Algorithm (LAMA) placements",
    long_about = "Preview where `srun --lama-map=... --lama-bind=...` would place and bind each \
                  process, on any topology: an hwloc XML file, an hwloc synthetic description \
                  such as \"pack:2 core:6 pu:2\", or `host` for this machine."
)]
pub(crate) struct Cli {
    /// When to colour the output: auto (a terminal, unless NO_COLOR is set), always or never.
    #[arg(long, global = true, value_enum, value_name = "WHEN", default_value_t = color::When::Auto)]
    pub(crate) color: color::When,
    #[command(subcommand)]
    pub(crate) command: Command,
}

#[derive(Subcommand, Debug)]
pub(crate) enum Command {
    /// Place processes and show where each one goes.
    #[command(
        after_help = "-h shows the common options; --help shows all of them (GPUs, memory, \
                      ranks, launchers' formats, Slurm's own binding) and the language.",
        after_long_help = manual::LANGUAGE
    )]
    Map(Box<MapArgs>),
    /// Communication-aware placement: a plan for `srun --lama-plan`.
    ///
    /// Map a communication matrix onto the nodes and their
    /// network with Scotch, guarded by LAMA layouts; write a plan for `srun --lama-plan`.
    #[command(after_help = "-h shows the common options; --help shows all of them.")]
    Plan(Box<plan::PlanArgs>),
    /// Check a running task against its placement.
    ///
    /// Run as a task of a placed step (`srun --lama-map=... lama verify`): compare what the
    /// task really has (every thread's CPUs, its memory policy and pages, the GPUs it may open,
    /// its variables) with what LAMA placed for it; with a program after `--`, watch the
    /// program's threads while it runs.
    Verify(Box<verify::VerifyArgs>),
    /// Run a program as one rank placed by LAMA, under any launcher.
    ///
    /// Under any launcher (`mpirun -np 8 lama exec
    /// --map scbnh -- ./app`, `mpiexec`, `srun` with or without the plugin, `flux run`,
    /// `jsrun`): it finds its rank from the launcher's variables, places its node's ranks with
    /// the plugin's rules among the CPUs its cgroup allows, binds itself and executes the
    /// program.
    Exec(Box<exec::ExecArgs>),
    /// Show a topology as the engine sees it.
    ///
    /// Levels in containment order, widths, available PUs, and the picture.
    Topology {
        /// An hwloc XML file, an hwloc synthetic description, or `host`.
        topology: String,
        /// Limit the available PUs to these OS indexes (as a job cpuset would), e.g. 0-3,8.
        #[arg(long, value_name = "CPULIST")]
        restrict: Option<String>,
    },
    /// Write this host's topology as hwloc XML.
    ///
    /// To FILE, or standard output, for a site's
    /// `topology=` setting; every CPU is written as allowed, whatever the caller's cgroup.
    Export {
        /// Where to write; standard output when absent.
        file: Option<std::path::PathBuf>,
    },
    /// Print a shell completion script for lama.
    ///
    /// For bash, zsh, fish, elvish or powershell.
    Completions {
        /// The shell.
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Print the lama(1) manual page (roff).
    #[command(hide = true)]
    Manpage,
}

/// What `lama --help` adds after the options: examples and exit statuses (the same text as
/// lama(1), which also has the JSON contract: its examples are wider than a terminal).
fn after_help() -> String {
    let mut text = String::from("Examples:\n");
    for line in manual::EXAMPLES.lines() {
        text += &format!("  {line}\n");
    }
    text += "\nExit status:\n";
    for (code, meaning) in manual::EXIT_STATUS {
        // Written for 80 columns with a hanging indent, so that clap has nothing to wrap.
        let wrapped = lama_engine::render::wrap(meaning, 80 - 5).replace("\n  ", "\n     ");
        text += &format!("  {code}  {wrapped}\n");
    }
    text += "\nJSON output (--json): lama(1), section JSON OUTPUT; fields are only ever added.";
    text
}

/// The command line as `lama` parses it (also the source of lama(1) and the completions).
/// `with_plugin`: the version text names the installed plugin's Slurm, which reads the plugin
/// file; only `lama --version` needs it.
pub(crate) fn command(with_plugin: bool) -> clap::Command {
    let version: &'static str =
        Box::leak(crate::version::version_text(with_plugin).into_boxed_str());
    Cli::command()
        .version(version)
        .after_help(
            "lama COMMAND -h says how to use each command; --help adds examples, exit \
             statuses and the JSON contract.",
        )
        .after_long_help(after_help())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn command_line_definition_is_consistent() {
        command(false).debug_assert();
    }

    #[test]
    fn the_manual_page_has_every_subcommand_and_option() {
        let cmd = command(false);
        let page = manual::man_page(&cmd, "0.0.0");
        for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
            assert!(
                page.contains(&format!(".SS \"lama {}\"", sub.get_name())),
                "{}",
                sub.get_name()
            );
            for arg in sub.get_arguments().filter(|a| !a.is_hide_set()) {
                if let Some(long) = arg.get_long() {
                    let tag = lama_man::escape(&format!("--{long}"));
                    assert!(page.contains(&tag), "{} --{long}", sub.get_name());
                }
            }
        }
        for section in ["EXIT STATUS", "JSON OUTPUT", "EXAMPLES", "ENVIRONMENT"] {
            assert!(page.contains(&format!(".SH \"{section}\"")), "{section}");
        }
    }
}

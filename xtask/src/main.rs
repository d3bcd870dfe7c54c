// SPDX-License-Identifier: Apache-2.0
//! leasehook's build-time tasks (`cargo run -p xtask -- TASK`, or `cargo xtask
//! TASK`): the manual pages and the shell completion scripts the packages ship,
//! made from the clap definition of the `leasehook` command line, and the
//! configuration file's page from the table of configuration keys. The generator
//! lives here, not in `leasehook`, so the shipped binary links no `clap_mangen`,
//! `clap_complete` or `roff`. Performs IO: writes the files into the folder named.

#![allow(clippy::print_stdout, clippy::print_stderr)]

// The binary's own clap definition, the same file: every field is read by
// `leasehook`'s commands, none here.
#[path = "../../cli/src/cli.rs"]
#[allow(dead_code)]
mod cli;
mod generate;
mod reach;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{CommandFactory as _, Parser, Subcommand};
use clap_complete::Shell;

/// leasehook's build-time tasks.
#[derive(Debug, Parser)]
#[command(name = "xtask")]
struct Xtask {
    #[command(subcommand)]
    task: Task,
}

#[derive(Debug, Subcommand)]
enum Task {
    /// Write leasehook.1, a leasehook-SUBCOMMAND.1 page per subcommand and the
    /// configuration file's leasehook.yaml.5 into DIR.
    Man {
        /// The folder to write into (created when missing).
        dir: PathBuf,
    },
    /// Write the bash, zsh and fish completion scripts (leasehook.bash, _leasehook,
    /// leasehook.fish) into DIR.
    Completions {
        /// The folder to write into (created when missing).
        dir: PathBuf,
    },
    /// Print how far each cloud reaches outside its folder: the product files
    /// outside core/src/source/CLOUD/ whose code names it, and their lines (issue
    /// 32's "one row per cloud" measure). Fails when a cloud exceeds
    /// --max-files/--max-lines, or without them its recorded count (the ratchet
    /// in xtask/src/reach.rs; a cloud not recorded: 2 files, 3 lines).
    CloudReach {
        /// List each file and its line numbers.
        #[arg(short, long)]
        verbose: bool,
        /// Fail when a cloud is named in more files than this.
        #[arg(long, value_name = "N")]
        max_files: Option<usize>,
        /// Fail when a cloud is named on more lines than this.
        #[arg(long, value_name = "N")]
        max_lines: Option<usize>,
    },
}

fn main() -> ExitCode {
    let written = match Xtask::parse().task {
        Task::CloudReach {
            verbose,
            max_files,
            max_lines,
        } => return cloud_reach(verbose, max_files, max_lines),
        Task::Man { dir } => {
            generate::man_pages(cli::Cli::command()).and_then(|pages| generate::write(&dir, pages))
        }
        Task::Completions { dir } => generate::write(
            &dir,
            [Shell::Bash, Shell::Zsh, Shell::Fish]
                .into_iter()
                .map(|shell| generate::completion(cli::Cli::command(), shell))
                .collect(),
        ),
    };
    match written {
        Ok(paths) => {
            print!("{paths}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("xtask: error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// `cloud-reach` from the repository this xtask was built in.
fn cloud_reach(verbose: bool, max_files: Option<usize>, max_lines: Option<usize>) -> ExitCode {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    let reach = match reach::measure(&root) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("xtask: error: {e:#}");
            return ExitCode::FAILURE;
        }
    };
    print!("{}", reach::report(&reach, verbose));
    let over: Vec<&str> = reach
        .iter()
        .filter(|r| {
            let (files, lines) = reach::limit(&r.cloud);
            r.files.len() > max_files.unwrap_or(files) || r.lines() > max_lines.unwrap_or(lines)
        })
        .map(|r| r.cloud.as_str())
        .collect();
    if over.is_empty() {
        ExitCode::SUCCESS
    } else {
        eprintln!("xtask: cloud-reach: over the limit: {}", over.join(", "));
        ExitCode::FAILURE
    }
}

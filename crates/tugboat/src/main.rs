//! The `tugboat` command: parses the command line and hands over to the library.

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let cli = tugboat::cli::Cli::parse();
    tugboat::cli::main(cli)
}

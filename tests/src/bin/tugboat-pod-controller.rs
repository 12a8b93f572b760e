//! The `tugboat` command, built from the same `main` as crates/tugboat/src/main.rs into
//! this package, so that the chart pod test (tests/e2e/chart_pod.rs) always runs the
//! controller of the current code: Cargo builds a package's own binaries for its
//! tests, and exposes their paths (`CARGO_BIN_EXE_*`), but not another package's.

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let cli = tugboat::cli::Cli::parse();
    tugboat::cli::main(cli)
}

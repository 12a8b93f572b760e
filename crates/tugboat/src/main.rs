//! The `tugboat` command: parses the command line and hands over to the library.

use std::process::ExitCode;

use clap::Parser;

/// jemalloc instead of the C library's allocator: on the large-cluster benchmark
/// (docs/benchmarks.md) it took less CPU per change and a lower peak RSS than glibc's
/// allocator, and musl's (the image's C library) is slower still. Its options are fixed
/// when it is built (`.cargo/config.toml`).
#[cfg(feature = "jemalloc")]
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

fn main() -> ExitCode {
    let cli = tugboat::cli::Cli::parse();
    tugboat::cli::main(cli)
}

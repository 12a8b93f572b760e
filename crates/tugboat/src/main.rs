//! The `tugboat` command: parses the command line and hands over to the library.

use std::process::ExitCode;

use clap::Parser;

/// jemalloc instead of the C library's allocator: on the large-cluster benchmark
/// (docs/benchmarks.md) it cut the controller's CPU per change by about a third against
/// glibc's and more against musl's (the image's), and its peak RSS, because its arenas
/// are shared between the threads the first apply runs on.
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

fn main() -> ExitCode {
    let cli = tugboat::cli::Cli::parse();
    tugboat::cli::main(cli)
}

//! `matrixkv-server`: serve a matrixkv database over the Redis protocol.

use clap::Parser;

/// Serves a matrixkv database over the Redis protocol (RESP2/RESP3).
#[derive(Parser, Debug)]
#[command(name = "matrixkv-server", version)]
struct Cli {
    #[command(flatten)]
    args: matrixkv_server::ServerArgs,
}

fn main() -> anyhow::Result<()> {
    matrixkv_server::run_blocking(Cli::parse().args)
}

//! `matrixkv-server`: serve a matrixkv database over the Redis protocol.

use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::Parser;
use matrixkv_server::Config;

/// Serves a matrixkv database over the Redis protocol (RESP2/RESP3).
#[derive(Parser, Debug)]
#[command(name = "matrixkv-server", version)]
struct Args {
    /// A redis.conf-style file (`port 6380`, `requirepass secret`, ...), applied before flags.
    #[arg(long)]
    config: Option<PathBuf>,
    /// Address to listen on.
    #[arg(long)]
    bind: Option<String>,
    /// Port (0: any free port, printed at start).
    #[arg(long)]
    port: Option<u16>,
    /// The database directory (slow tier under `<dir>/slow`).
    #[arg(long)]
    dir: Option<PathBuf>,
    /// The fast tier's directory (default `<dir>/fast`; /dev/shm for benchmarks only: it does
    /// not survive a reboot).
    #[arg(long)]
    fast_dir: Option<PathBuf>,
    /// Number of databases (SELECT 0..N-1).
    #[arg(long)]
    databases: Option<usize>,
    /// Password clients must give with AUTH.
    #[arg(long)]
    requirepass: Option<String>,
    /// Most connected clients.
    #[arg(long)]
    maxclients: Option<usize>,
    /// Close clients idle this many seconds (0: never).
    #[arg(long)]
    timeout: Option<u64>,
    /// Where BGSAVE writes engine checkpoints.
    #[arg(long)]
    checkpoint_dir: Option<PathBuf>,
    /// Engine memtable size in bytes.
    #[arg(long)]
    write_buffer_bytes: Option<usize>,
    /// Engine matrix container size in bytes (fixed when the database is created).
    #[arg(long)]
    container_bytes: Option<u64>,
    /// Sync every write to the fast tier (like `appendfsync always`).
    #[arg(long)]
    sync_writes: bool,
}

fn main() -> Result<()> {
    let args = Args::parse();
    let mut c = Config::default();
    if let Some(path) = &args.config {
        let text =
            std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        c.apply_file(&text)?;
    }
    if let Some(v) = args.bind {
        c.bind = v;
    }
    if let Some(v) = args.port {
        c.port = v;
    }
    if let Some(v) = args.dir {
        c.dir = v;
    }
    c.fast_dir = args.fast_dir.or(c.fast_dir);
    if let Some(v) = args.databases {
        c.databases = v.clamp(1, 100);
    }
    c.requirepass = args.requirepass.or(c.requirepass);
    if let Some(v) = args.maxclients {
        c.maxclients = v;
    }
    if let Some(v) = args.timeout {
        c.timeout = std::time::Duration::from_secs(v);
    }
    c.checkpoint_dir = args.checkpoint_dir.or(c.checkpoint_dir);
    c.write_buffer_bytes = args.write_buffer_bytes.or(c.write_buffer_bytes);
    c.container_bytes = args.container_bytes.or(c.container_bytes);
    c.sync_writes |= args.sync_writes;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the runtime")?;
    runtime.block_on(matrixkv_server::run(c))
}

//! matrixkv-server: a Redis-protocol server (RESP2 and RESP3) over the matrixkv engine.
//!
//! Clients we did not write (`redis-cli`, `redis-benchmark`, redis-py, any Redis library)
//! read and write a matrixkv database through it: strings with expiry, hashes, databases as
//! engine keyspaces, `MULTI`/`EXEC` as one atomic write batch, pipelining, `AUTH`, and the
//! limits Redis applies to hostile clients. It uses only the engine's public API.
//!
//! - [`resp`]: the protocol codec, with limits on every length;
//! - [`limits`]: client limits as redis.conf spells them;
//! - [`store`]: how Redis data is laid out in the engine (docs/format/server-keys.md);
//! - `commands`: the commands and their Redis semantics;
//! - `conn`: a connection's socket I/O and the limits that close it;
//! - [`server`]: the listener, the connections, the configuration and shutdown.
//!
//! ```no_run
//! # async fn demo() -> anyhow::Result<()> {
//! let config = matrixkv_server::Config { port: 0, ..Default::default() };
//! let running = matrixkv_server::start(config).await?;
//! println!("listening on {}", running.addr);
//! running.shutdown().await?; // closes the engine cleanly
//! # Ok(()) }
//! ```
#![forbid(unsafe_code)]
#![deny(missing_docs)]

mod commands;
pub mod config;
mod conn;
mod cursors;
pub mod glob;
pub mod limits;
mod persistence;
pub mod resp;
mod security;
pub mod server;
pub mod store;

pub use config::{AppendFsync, Config, ServerArgs};
pub use limits::{OutputLimit, parse_output_buffer_limit};
pub use server::{Running, init_logging, run, run_blocking, start};

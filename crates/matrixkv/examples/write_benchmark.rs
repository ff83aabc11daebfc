//! A small benchmark from code: random 4 KiB writes from several threads, then the numbers the
//! engine keeps (write amplification, stalls, compactions). `matrixkv bench` (the CLI) is the
//! full db_bench-compatible harness; this shows how to measure from an application.
//!
//! `cargo run --release -p matrixkv --example write_benchmark -- [writes] [threads]`

use std::sync::Arc;
use std::time::Instant;

use matrixkv::{Db, Options};

fn main() -> matrixkv::Result<()> {
    let mut args = std::env::args().skip(1);
    let writes: u64 = args.next().and_then(|a| a.parse().ok()).unwrap_or(200_000);
    let threads: u64 = args.next().and_then(|a| a.parse().ok()).unwrap_or(2).max(1);
    let dir = tempfile::tempdir().map_err(|e| matrixkv::Error::invalid(e.to_string()))?;
    let db = Arc::new(Db::open(Options::new(dir.path()))?);
    let start = Instant::now();
    let workers: Vec<_> = (0..threads)
        .map(|t| {
            let db = Arc::clone(&db);
            std::thread::spawn(move || -> matrixkv::Result<()> {
                let value = vec![b'v'; 4096];
                // A multiplicative hash spreads the keys over the key space.
                for i in 0..writes / threads {
                    let n = (i * threads + t).wrapping_mul(0x9E37_79B9_7F4A_7C15);
                    db.put(format!("{n:016x}"), &value)?;
                }
                Ok(())
            })
        })
        .collect();
    for w in workers {
        w.join()
            .map_err(|_| matrixkv::Error::invalid("a writer panicked"))??;
    }
    let secs = start.elapsed().as_secs_f64();
    println!(
        "{writes} writes of 4 KiB with {threads} threads: {:.0} ops/s",
        writes as f64 / secs
    );
    println!("{}", db.stats());
    Ok(())
}

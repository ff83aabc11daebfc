//! A database on two real devices: the fast tier on persistent memory (a DAX mount) or a fast
//! NVMe, the slow tier on a disk.
//!
//! `cargo run --release -p matrixkv --example two_tiers -- /mnt/pmem0/mydb /data/mydb`
//!
//! Without arguments it uses a directory under /dev/shm as the fast tier and a temporary
//! directory as the slow one (tmpfs does not survive a reboot: for trying it out only).

use std::time::Instant;

use matrixkv::{Db, Options};

fn main() -> matrixkv::Result<()> {
    let mut args = std::env::args().skip(1);
    let scratch = tempfile::tempdir().map_err(|e| matrixkv::Error::invalid(e.to_string()))?;
    let fast = args.next().map_or_else(
        || std::path::PathBuf::from(format!("/dev/shm/matrixkv-example-{}", std::process::id())),
        std::path::PathBuf::from,
    );
    let slow = args
        .next()
        .map_or_else(|| scratch.path().to_owned(), std::path::PathBuf::from);
    let mut opts = Options::new(&slow);
    opts.fast_dir = fast.clone();
    opts.slow_dir = slow.join("slow");
    // The fast tier's budget for L0 (the matrix container) and the memtable size.
    opts.container_bytes = 256 << 20;
    opts.write_buffer_bytes = 32 << 20;
    let db = Db::open(opts)?;
    let start = Instant::now();
    let value = vec![7u8; 1024];
    for i in 0..100_000u32 {
        db.put(format!("key{i:08}"), &value)?;
    }
    println!(
        "100,000 writes of 1 KiB in {:.2} s; fast tier {}, slow tier {}",
        start.elapsed().as_secs_f64(),
        fast.display(),
        slow.display()
    );
    println!("{}", db.get_property("matrixkv.levelstats")?);
    db.close()?;
    if std::env::args().len() == 1 {
        let _ = std::fs::remove_dir_all(&fast);
    }
    Ok(())
}

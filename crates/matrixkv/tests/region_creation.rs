//! A fast-tier region whose creation a failed persist cut short, then a power loss that keeps
//! some of its unpersisted stores: the next open must not read it as a corrupt WAL segment
//! or persistent memtable. Found by `matrixkv stress --power-loss` (seed 172342455647033,
//! every fast-tier persist failing from some point on): "corruption in WAL segment
//! 012190.wal at offset 0: bad magic number".

mod common;

use matrixkv::tier::{CrashPolicy, FsCrashMode, MemFs, SimFastTier};
use matrixkv::{Db, Design, NoveLsmOptions, Options, WriteOptions};

fn options(fs: &MemFs, fast: &SimFastTier, novelsm: bool) -> Options {
    let mut o = common::small_options(std::path::Path::new("/db"));
    o.wal_recycle_segments = 0;
    if novelsm {
        o.design = Design::NoveLsm(NoveLsmOptions {
            persistent_memtable_bytes: 256 << 10,
            parallel_reads: false,
        });
        o.l0_layout = matrixkv::L0Layout::Tables;
    }
    common::on_simulated_tiers(o, fs, fast)
}

/// Writes, then makes every fast-tier persist from the `after`-th on fail while the next
/// memtable switches create regions; cuts the power (keeping unpersisted stores at random)
/// and reopens: every synced write is there.
fn case(novelsm: bool, after: u64, seed: u64) {
    let fs = MemFs::new();
    let fast = SimFastTier::new("/db/fast");
    let db = Db::open(options(&fs, &fast, novelsm)).expect("open");
    let sync = WriteOptions { sync: true };
    // NoveLSM starts with a DRAM memtable whose unsynced writes persist nothing: with no
    // synced write first, the first persists to fail are those of the switch to the first
    // persistent memtable (the old segment's, then the new region's header).
    let acked: u32 = if novelsm { 0 } else { 200 };
    for i in 0..acked {
        db.put_opt(format!("k{i:04}"), [b'v'; 300], &sync)
            .expect("put");
    }
    fast.fail_persist_after(Some(after));
    // Fills memtables without syncing until the failure stops writes: the persists that
    // fail are those of memtable switches (the old segment's, the new region's header).
    for i in acked..4000u32 {
        if db.put(format!("k{i:04}"), [b'v'; 300]).is_err() {
            break;
        }
    }
    let (fs2, fast2) = fs.crash_with(FsCrashMode::DropUnsynced, seed, || {
        fast.crash(CrashPolicy::Random { seed })
    });
    drop(db);
    let db = Db::open(options(&fs2, &fast2, novelsm)).unwrap_or_else(|e| {
        panic!("novelsm {novelsm}, persist {after} failed, crash seed {seed}: reopen: {e}")
    });
    for i in 0..acked {
        assert!(
            db.get(format!("k{i:04}")).expect("get").is_some(),
            "novelsm {novelsm}, persist {after}, seed {seed}: synced k{i:04} lost"
        );
    }
    db.close().expect("close");
}

#[test]
fn a_wal_segment_whose_header_persist_failed_is_not_corruption() {
    for after in 0..12 {
        for seed in 0..8 {
            case(false, after, seed);
        }
    }
}

#[test]
fn a_persistent_memtable_whose_header_persist_failed_is_not_corruption() {
    for after in 0..6 {
        for seed in 0..8 {
            case(true, after, seed);
        }
    }
}

//! A fast tier too small for a new database (Docker's 64 MiB /dev/shm under the default 512 MiB
//! container): the open refuses before it writes anything, with a sentence naming the
//! directory, the bytes needed and free, and the options to change; a database that fits
//! opens. On the simulated tier (its capacity) and, where the machine lets this test mount one,
//! on a real tmpfs.

use std::path::Path;

use matrixkv::tier::{FileSystem, MemFs, SimFastTier};
use matrixkv::{Db, Error, Options};

mod common;

/// Checks the refusal's message and that nothing was created on either tier.
fn assert_clear_refusal(e: &Error, dir: &Path, needed: u64, free: u64) {
    assert!(matches!(e, Error::InvalidArgument(_)), "{e:?}");
    let msg = e.to_string();
    for part in [
        dir.display().to_string(),
        format!("{needed} bytes"),
        format!("{free} bytes free"),
        "Options::container_bytes".to_owned(),
        "Options::write_buffer_bytes".to_owned(),
        "Options::fast_dir".to_owned(),
    ] {
        assert!(msg.contains(&part), "{part:?} missing from: {msg}");
    }
    // A sentence, not the Debug dump of a struct.
    assert!(
        !msg.contains("Placement {") && !msg.contains("Options {"),
        "{msg}"
    );
}

#[test]
fn a_simulated_fast_tier_too_small_for_the_container_refuses_the_open_naming_the_numbers() {
    let fs = MemFs::new();
    let fast = SimFastTier::new("/db/fast");
    let mut o = common::small_options(Path::new("/db"));
    o.container_bytes = 8 << 20;
    o = common::on_simulated_tiers(o, &fs, &fast);
    let needed = o.fast_tier_bytes_at_open();
    assert!(needed > 8 << 20);
    fast.set_capacity(Some(needed - 1));
    let e = Db::open(o.clone()).expect_err("the container does not fit");
    assert_clear_refusal(&e, Path::new("/db/fast"), needed, needed - 1);
    assert_eq!(fast.total_bytes(), 0, "a region was created");
    assert!(
        !fs.exists(Path::new("/db/slow/CURRENT")).expect("exists"),
        "the refused open created a database"
    );
    // Exactly enough room: the open succeeds and the database works.
    fast.set_capacity(Some(needed));
    let db = Db::open(o).expect("open with room for the container and a segment");
    db.put(b"k", b"v").expect("put");
    assert_eq!(db.get(b"k").expect("get").as_deref(), Some(&b"v"[..]));
    db.close().expect("close");
}

#[test]
fn a_64_mib_tmpfs_refuses_the_default_container_and_takes_a_small_one() {
    let root = tempfile::tempdir().expect("tempdir");
    let shm = root.path().join("shm");
    if let Err(why) = common::mount_tmpfs(&shm, 64) {
        eprintln!("SKIP a_64_mib_tmpfs_...: cannot mount a 64 MiB tmpfs here ({why})");
        return;
    }
    let _mount = common::Mount(shm.clone());
    let mut o = Options::new(root.path());
    o.fast_dir = shm.join("db");
    // The defaults: a 512 MiB container and 64 MiB memtables.
    let needed = o.fast_tier_bytes_at_open();
    let e = Db::open(o.clone()).expect_err("512 MiB do not fit in 64 MiB");
    let msg = e.to_string();
    assert!(msg.contains(&o.fast_dir.display().to_string()), "{msg}");
    assert!(msg.contains(&format!("needs {needed} bytes")), "{msg}");
    assert!(
        msg.contains("bytes free") && msg.contains("container_bytes"),
        "{msg}"
    );
    assert!(
        !o.slow_dir.join("CURRENT").exists(),
        "a database was created"
    );
    let left: Vec<_> = std::fs::read_dir(&o.fast_dir)
        .expect("list")
        .map(|e| e.expect("entry").file_name())
        .filter(|n| n != "LOCK")
        .collect();
    assert!(left.is_empty(), "files left on the fast tier: {left:?}");
    // Sized to the tier: a 16 MiB container and 4 MiB memtables.
    o.container_bytes = 16 << 20;
    o.write_buffer_bytes = 4 << 20;
    o.l1_target_bytes = 16 << 20;
    assert!(o.fast_tier_bytes() < 64 << 20);
    let db = Db::open(o).expect("a database sized to the tier opens");
    for i in 0..2000u32 {
        db.put(format!("k{i:05}"), vec![b'v'; 4000]).expect("put");
    }
    db.flush().expect("flush");
    assert_eq!(
        db.get(b"k01999").expect("get").as_deref(),
        Some(&[b'v'; 4000][..])
    );
    db.close().expect("close");
}

#[test]
fn reopening_on_a_fast_tier_that_filled_names_the_missing_room_and_loses_nothing() {
    reopen_on_a_full_fast_tier(None, false, "the WAL segment new writes go to");
}

#[test]
fn reopening_slmdb_on_a_full_fast_tier_names_the_persistent_memtable_it_needs() {
    let slmdb = matrixkv::Design::SlmDb(matrixkv::SlmDbOptions {
        persistent_memtable_bytes: 1 << 20,
        index_bytes: 8 << 20,
        ..matrixkv::SlmDbOptions::default()
    });
    // Room for the WAL segment the open makes first, not for the memtable.
    reopen_on_a_full_fast_tier(
        Some(slmdb),
        true,
        "the persistent memtable new writes go to",
    );
}

/// Fills the fast tier behind a closed database of `design` (leaving room for one WAL segment
/// if `segment_fits`) and reopens it: a sentence containing `names`, then, with room again,
/// every write.
fn reopen_on_a_full_fast_tier(design: Option<matrixkv::Design>, segment_fits: bool, names: &str) {
    let fs = MemFs::new();
    let fast = SimFastTier::new("/db/fast");
    let mut o = common::small_options(Path::new("/db"));
    if let Some(d) = design {
        o.design = d;
        o.l0_layout = matrixkv::L0Layout::Tables;
    }
    // No segment kept for recycling: the reopen must make a new one.
    o.wal_recycle_segments = 0;
    o = common::on_simulated_tiers(o, &fs, &fast);
    let db = Db::open(o.clone()).expect("open");
    for i in 0..100u32 {
        db.put(format!("k{i:03}"), b"v").expect("put");
    }
    db.close().expect("close");
    // Something else filled the tier: it has what the database holds and nothing more.
    let segment = (o.write_buffer_bytes + o.write_buffer_bytes / 4 + (1 << 20)) as u64;
    let room = if segment_fits { segment } else { 0 };
    fast.set_capacity(Some(fast.total_bytes() + room));
    let e = Db::open(o.clone()).expect_err("no room for the open's new region");
    let msg = e.to_string();
    for part in [
        "/db/fast",
        names,
        "bytes free",
        "Options::write_buffer_bytes",
        "Options::fast_dir",
        "existing regions are intact",
    ] {
        assert!(msg.contains(part), "{part:?} missing from: {msg}");
    }
    // Room again: every acknowledged write is there.
    fast.set_capacity(None);
    let db = Db::open(o).expect("reopen with room");
    for i in 0..100u32 {
        assert_eq!(
            db.get(format!("k{i:03}")).expect("get").as_deref(),
            Some(&b"v"[..])
        );
    }
    db.close().expect("close");
}

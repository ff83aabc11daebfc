use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::layout::{self, FileNum};
use crate::tier::{FileSystem, MemFs, SimFastTier};
use crate::{Db, Options, Tiers};

/// Small matrix-layout options at `root` on `fs` and `fast`: 64 KiB memtables, a 1 MiB
/// container, no values separated (every slow-tier file is a table).
fn options(root: &str, fs: &MemFs, fast: &SimFastTier) -> Options {
    let mut o = Options::new(root);
    o.write_buffer_bytes = 64 << 10;
    o.container_bytes = 1 << 20;
    o.l1_target_bytes = 1 << 20;
    o.target_file_bytes = 64 << 10;
    o.column_lower_bytes = Some(64 << 10);
    o.column_upper_bytes = Some(256 << 10);
    o.min_blob_bytes = None;
    o.separate_at_flush = false;
    o.separate_at_write = false;
    o.tiers = Some(Tiers {
        slow_fs: Arc::new(fs.clone()),
        fast_fs: Arc::new(fs.clone()),
        fast: Arc::new(fast.clone()),
    });
    o
}

fn key(i: u32) -> Vec<u8> {
    format!("key{i:06}").into_bytes()
}

/// Runs `f` on another thread and returns its result, or panics when it has not returned
/// within `secs` seconds (a hung wait).
fn within<T: Send + 'static>(secs: u64, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(Duration::from_secs(secs))
        .expect("returns instead of hanging")
}

#[test]
fn work_signalled_while_the_compaction_thread_is_between_steps_is_not_lost() {
    let fs = MemFs::new();
    let fast = SimFastTier::new("/wakeup/fast");
    let mut o = options("/wakeup", &fs, &fast);
    // A role switch is due once the receiver holds a quarter of the container.
    o.receiver_switch_ratio = 0.25;
    let db = Arc::new(Db::open(o).unwrap());
    // The compaction thread finds nothing to do and, before it waits, gets held with the
    // state lock released.
    let window = db.inner().test_hooks.open_idle_window();
    db.flush().unwrap();
    window
        .entered
        .recv_timeout(Duration::from_secs(10))
        .expect("the compaction thread looked for work");
    // Meanwhile flushes fill the receiver past the switch ratio and signal the thread,
    // which is not waiting yet.
    for i in 0..4000 {
        db.put(key(i), [b'v'; 100]).unwrap();
    }
    db.flush().unwrap();
    assert_eq!(db.stats().role_switches, 0);
    window.release.send(()).unwrap();
    // Nothing signals the thread again: it must have seen the work by itself.
    let deadline = Instant::now() + Duration::from_secs(5);
    while db.stats().role_switches == 0 {
        assert!(
            Instant::now() < deadline,
            "the role switch signalled while the compaction thread was between steps never ran"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn a_flush_into_a_full_container_without_compactions_fails_instead_of_hanging() {
    let fs = MemFs::new();
    let fast = SimFastTier::new("/stuck/fast");
    let mut o = options("/stuck", &fs, &fast);
    o.compaction_enabled = false;
    o.no_space_timeout = Duration::from_millis(300);
    let db = Arc::new(Db::open(o).unwrap());
    let writer = Arc::clone(&db);
    // 3 MB into a 1 MiB container that nothing drains.
    let result = within(30, move || {
        for i in 0..30_000 {
            writer.put(key(i), [b'v'; 100])?;
        }
        writer.flush()
    });
    match result {
        Err(crate::Error::NoSpace { tier, cause, .. }) => {
            assert_eq!(tier, crate::TierKind::Fast);
            assert!(cause.contains("compaction_enabled"), "{cause}");
        }
        other => panic!("expected NoSpace on the fast tier, got {other:?}"),
    }
    // Reads go on; Db::flush and wait_for_compactions report the condition too.
    assert_eq!(db.get(key(0)).unwrap().as_deref(), Some(&[b'v'; 100][..]));
    let waiter = Arc::clone(&db);
    assert!(matches!(
        within(30, move || waiter.flush()),
        Err(crate::Error::NoSpace { .. })
    ));
    let waiter = Arc::clone(&db);
    assert!(matches!(
        within(30, move || waiter.wait_for_compactions()),
        Err(crate::Error::NoSpace { .. })
    ));
}

#[test]
fn a_column_compaction_failing_after_its_merge_leaves_orphans_the_next_pass_deletes() {
    let fs = MemFs::new();
    let fast = SimFastTier::new("/orphans/fast");
    let mut o = options("/orphans", &fs, &fast);
    // Only the manual compaction below runs.
    o.compaction_enabled = false;
    let slow_dir = o.slow_dir.clone();
    let db = Db::open(o).unwrap();
    for i in 0..3000 {
        db.put(key(i), [b'v'; 100]).unwrap();
    }
    let recorded = db.inner().test_hooks.fail_next_column_after_merge();
    let err = db.compact_range(None, None).unwrap_err();
    assert!(err.to_string().contains("injected"), "{err}");
    let outputs = recorded
        .lock()
        .clone()
        .expect("the column failed after its merge");
    assert!(!outputs.is_empty());
    {
        let st = db.inner().state.lock();
        assert!(!st.compacting, "the failed job's flag is cleared");
        let pending: Vec<&u64> = outputs
            .iter()
            .filter(|n| st.pending_outputs.contains(n))
            .collect();
        assert!(pending.is_empty(), "outputs {pending:?} are still pending");
    }
    // The next pass of obsolete-file deletion (no reopen) removes them.
    db.inner().delete_obsolete_files(false);
    let names = fs.list(&slow_dir).unwrap();
    for n in &outputs {
        let name = layout::table_name(FileNum(*n));
        assert!(!names.contains(&name), "orphan {name} is still there");
    }
    // The retried compaction installs, and every key reads back.
    db.compact_range(None, None).unwrap();
    for i in (0..3000).step_by(97) {
        assert_eq!(db.get(key(i)).unwrap().as_deref(), Some(&[b'v'; 100][..]));
    }
}

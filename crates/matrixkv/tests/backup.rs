//! `BackupEngine`: incremental backups, list, verify, restore, delete and purge, through the
//! public API, on real files and on simulated ones for full disks.

mod common;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use common::{on_simulated_tiers, small_options};
use matrixkv::tier::{MemFs, SimFastTier};
use matrixkv::{BackupEngine, Db, L0Layout, Options};

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

fn fill(db: &Db, model: &mut Model, range: std::ops::Range<u64>, round: u64) {
    for i in range {
        let k = format!("key{:06}", i * 7919 % 100_000).into_bytes();
        let len = if i % 4 == 0 { 1500 } else { 80 };
        let mut v = format!("{i}/{round}/").into_bytes();
        v.resize(len, b'v');
        db.put(&k, &v).expect("put");
        model.insert(k, v);
    }
}

fn contents(db: &Db) -> Model {
    db.iter()
        .expect("iter")
        .collect::<matrixkv::Result<Model>>()
        .expect("scan")
}

fn restored(base: &Options, dir: &Path) -> Options {
    let mut o = base.clone();
    o.fast_dir = dir.join("fast");
    o.slow_dir = dir.join("slow");
    o
}

fn incremental_backups_restore_exactly_what_they_held(layout: L0Layout) {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut opts = small_options(&dir.path().join("db"));
    opts.l0_layout = layout;
    // Compactions only when asked: a background compaction between two backups would
    // rewrite the tables the second one could share, and make the test depend on timing.
    opts.compaction_enabled = false;
    let db = Db::open(opts.clone()).expect("open");
    let engine = BackupEngine::open(dir.path().join("backups")).expect("backup dir");
    let mut model = Model::new();
    fill(&db, &mut model, 0..1500, 0);
    db.compact_range(None, None).expect("compact");
    fill(&db, &mut model, 1000..1600, 1);
    let first = engine.create_backup(&db).expect("backup 1");
    let model1 = model.clone();
    assert_eq!(first.sequence, db.last_sequence());
    assert!(first.new_bytes > 0 && first.files > 3, "{first:?}");
    // A few more writes: the second backup shares the tables the first holds.
    fill(&db, &mut model, 1600..1700, 2);
    let second = engine.create_backup(&db).expect("backup 2");
    assert!(
        second.new_bytes < first.new_bytes / 2,
        "the second backup copied {} of {} bytes",
        second.new_bytes,
        second.bytes
    );
    let model2 = model.clone();
    fill(&db, &mut model, 0..100, 3);
    let list = engine.list().expect("list");
    assert_eq!(
        list.iter().map(|b| b.id).collect::<Vec<_>>(),
        [first.id, second.id]
    );
    engine.verify(first.id).expect("verify 1");
    engine.verify(second.id).expect("verify 2");
    for (id, want, name) in [(first.id, &model1, "r1"), (second.id, &model2, "r2")] {
        let target = restored(&opts, &dir.path().join(name));
        engine.restore(id, target.clone()).expect("restore");
        let copy = Db::open(target).expect("open restored");
        assert!(contents(&copy) == *want, "backup {id} restored other data");
        assert!(copy.verify().expect("verify tables") > 0 || layout == L0Layout::Matrix);
        copy.close().expect("close");
    }
    // Deleting the first keeps the second restorable; purging keeps the newest.
    engine.delete(first.id).expect("delete");
    engine.verify(second.id).expect("verify after delete");
    let third = engine.create_backup(&db).expect("backup 3");
    assert_eq!(engine.purge_old_backups(1).expect("purge"), [second.id]);
    let target = restored(&opts, &dir.path().join("r3"));
    assert_eq!(
        engine
            .restore_latest(target.clone())
            .expect("restore latest"),
        third.id
    );
    let copy = Db::open(target).expect("open restored");
    assert!(contents(&copy) == model);
    copy.close().expect("close");
    db.close().expect("close");
    // Reopening the backup directory keeps everything it holds.
    drop(engine);
    let engine = BackupEngine::open(dir.path().join("backups")).expect("reopen");
    engine.verify(third.id).expect("verify after reopen");
}

#[test]
fn incremental_backups_of_the_matrix_layout_restore_exactly_what_they_held() {
    incremental_backups_restore_exactly_what_they_held(L0Layout::Matrix);
}

#[test]
fn incremental_backups_of_the_table_layout_restore_exactly_what_they_held() {
    incremental_backups_restore_exactly_what_they_held(L0Layout::Tables);
}

/// Flips one byte in the middle of the largest file of `dir` that `pick` accepts; its path.
fn damage_largest(dir: &Path, pick: impl Fn(&Path) -> bool) -> std::path::PathBuf {
    let victim = std::fs::read_dir(dir)
        .expect("list")
        .map(|e| e.expect("entry").path())
        .filter(|p| pick(p))
        .max_by_key(|p| std::fs::metadata(p).map(|m| m.len()).unwrap_or(0))
        .unwrap_or_else(|| panic!("no file to damage in {}", dir.display()));
    let mut bytes = std::fs::read(&victim).expect("read");
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0x20;
    std::fs::write(&victim, &bytes).expect("write");
    victim
}

#[test]
fn a_damaged_backup_fails_verify_and_restore_naming_the_file() {
    let dir = tempfile::tempdir().expect("tempdir");
    let opts = small_options(&dir.path().join("db"));
    let db = Db::open(opts.clone()).expect("open");
    let mut model = Model::new();
    fill(&db, &mut model, 0..800, 0);
    db.compact_range(None, None).expect("compact");
    let backups = dir.path().join("backups");
    let engine = BackupEngine::open(&backups).expect("backup dir");
    let b = engine.create_backup(&db).expect("backup");
    db.close().expect("close");
    // Flip one byte in the middle of the largest shared file.
    let victim = damage_largest(&backups.join("shared"), |_| true);
    let name = victim
        .file_name()
        .expect("name")
        .to_string_lossy()
        .into_owned();
    let e = engine.verify(b.id).expect_err("damaged");
    assert!(e.is_corruption() && e.to_string().contains(&name), "{e}");
    let target = restored(&opts, &dir.path().join("r"));
    let e = engine.restore(b.id, target.clone()).expect_err("damaged");
    assert!(e.to_string().contains(&name), "{e}");
    for tier in ["fast", "slow"] {
        let left: Vec<_> = std::fs::read_dir(dir.path().join("r").join(tier))
            .map(|d| d.map(|e| e.expect("entry").file_name()).collect())
            .unwrap_or_default();
        assert!(left.is_empty(), "a failed restore left {left:?} in {tier}");
    }
    // A restore never writes into a directory that holds something.
    std::fs::write(dir.path().join("r/slow/precious"), b"x").expect("write");
    let e = engine.restore(b.id, target).expect_err("not empty");
    assert!(e.to_string().contains("not empty"), "{e}");
    assert!(engine.verify(b.id + 1).is_err(), "unknown id");
}

/// Issue 37: a table or blob file damaged on the database's disk is reported when a backup
/// copies it, instead of being stored with a checksum of its damage (which `verify` would then
/// accept and `restore` would bring back).
#[test]
fn a_source_file_damaged_on_disk_fails_the_backup_naming_it() {
    for ext in ["sst", "blob"] {
        let dir = tempfile::tempdir().expect("tempdir");
        let opts = small_options(&dir.path().join("db"));
        let db = Db::open(opts.clone()).expect("open");
        let mut model = Model::new();
        fill(&db, &mut model, 0..800, 0);
        db.compact_range(None, None).expect("compact");
        db.close().expect("close");
        let victim = damage_largest(&opts.slow_dir, |p| p.extension().is_some_and(|e| e == ext));
        let db = Db::open(opts.clone()).expect("reopen");
        let engine = BackupEngine::open(dir.path().join("backups")).expect("backup dir");
        let e = engine
            .create_backup(&db)
            .expect_err("a backup of a damaged file");
        let name = victim
            .file_name()
            .expect("name")
            .to_string_lossy()
            .into_owned();
        let number = name.split('.').next().expect("number").to_owned();
        assert!(e.is_corruption(), "{ext}: {e}");
        assert!(e.to_string().contains(&number), "{ext}: {e}");
        assert!(
            engine.list().expect("list").is_empty(),
            "{ext}: a backup was recorded"
        );
        db.close().expect("close");
    }
}

#[test]
fn a_backup_that_runs_out_of_space_leaves_no_trace_and_the_earlier_ones_intact() {
    let fs = MemFs::new();
    let fast = SimFastTier::new("/db/fast");
    let mut o = small_options(Path::new("/db"));
    o.fast_dir = "/db/fast".into();
    o.slow_dir = "/db/slow".into();
    let opts = on_simulated_tiers(o, &fs, &fast);
    let db = Db::open(opts).expect("open");
    let mut model = Model::new();
    fill(&db, &mut model, 0..1000, 0);
    db.compact_range(None, None).expect("compact");
    let backup_fs = MemFs::new();
    let engine =
        BackupEngine::open_on(Arc::new(backup_fs.clone()), "/backups").expect("backup dir");
    let first = engine.create_backup(&db).expect("backup");
    let used = backup_fs.total_bytes();
    fill(&db, &mut model, 0..1000, 1);
    db.compact_range(None, None).expect("compact");
    for room in [0, 4 << 10, 64 << 10, 256 << 10] {
        backup_fs.set_capacity(Some(used + room));
        let e = engine
            .create_backup(&db)
            .expect_err("the backup disk is full");
        assert!(e.is_no_space(), "room {room}: {e}");
        assert_eq!(
            backup_fs.total_bytes(),
            used,
            "room {room}: files left behind"
        );
        assert_eq!(engine.list().expect("list").len(), 1);
    }
    backup_fs.set_capacity(None);
    engine.verify(first.id).expect("the first backup is intact");
    let second = engine.create_backup(&db).expect("backup with room");
    engine.verify(second.id).expect("verify");
    db.close().expect("close");
}

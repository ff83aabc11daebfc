//! `Db::checkpoint`: an openable, consistent copy (docs/reliability.md: a checkpoint is durable when
//! the call returns and holds every write acknowledged before it).

mod common;

use std::collections::BTreeMap;
use std::path::Path;

use common::{on_simulated_tiers, small_options};
use matrixkv::tier::{CrashPolicy, FsCrashMode, MemFs, SimFastTier};
use matrixkv::{Db, L0Layout, Options};

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

fn key(i: u64) -> Vec<u8> {
    format!("key{:06}", i * 7919 % 100_000).into_bytes()
}

fn value(i: u64, round: u64) -> Vec<u8> {
    let len = if i.is_multiple_of(5) { 2000 } else { 100 };
    let mut v = format!("{i}/{round}/").into_bytes();
    v.resize(len, b'x');
    v
}

fn fill(db: &Db, model: &mut Model, range: std::ops::Range<u64>, round: u64) {
    for i in range {
        let (k, v) = (key(i), value(i, round));
        db.put(&k, &v).expect("put");
        model.insert(k, v);
    }
}

fn contents(db: &Db) -> Model {
    let mut it = db.iter().expect("iter");
    it.seek_to_first().expect("seek");
    let mut m = Model::new();
    while it.valid() {
        m.insert(it.key().to_vec(), it.value().to_vec());
        it.next().expect("next");
    }
    m
}

/// `base`'s options with the directories of a checkpoint written by `Db::checkpoint(dir)`.
fn at_checkpoint(base: &Options, dir: &Path) -> Options {
    let mut o = base.clone();
    o.fast_dir = dir.join("fast");
    o.slow_dir = dir.join("slow");
    o
}

fn checkpoint_holds_what_was_acknowledged_before_it(layout: L0Layout) {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut opts = small_options(&dir.path().join("db"));
    opts.l0_layout = layout;
    let db = Db::open(opts.clone()).expect("open");
    let mut model = Model::new();
    fill(&db, &mut model, 0..1500, 0);
    // Tables on L1+ (hard-linked) as well as rows or L0 tables and a memtable.
    db.compact_range(None, None).expect("compact");
    fill(&db, &mut model, 1000..2500, 1);
    let ckpt = dir.path().join("ckpt");
    let info = db.checkpoint(&ckpt).expect("checkpoint");
    assert_eq!(info.sequence, db.last_sequence());
    assert!(
        info.linked_files > 0,
        "L1 tables share the same disk: {info:?}"
    );
    if layout == L0Layout::Matrix {
        assert!(info.container_pages > 0, "rows exported: {info:?}");
    }
    // Writes after the checkpoint stay out of it.
    let before = model.clone();
    fill(&db, &mut model, 0..300, 2);
    db.delete(key(2000)).expect("delete");
    model.remove(&key(2000));

    let copy = Db::open(at_checkpoint(&opts, &ckpt)).expect("open checkpoint");
    assert_eq!(copy.last_sequence(), info.sequence);
    assert!(
        contents(&copy) == before,
        "the checkpoint differs from the model"
    );
    assert!(copy.verify().expect("verify") > 0);
    // The checkpoint is a database of its own: writable, and the original is untouched.
    copy.put(b"only-in-copy", b"1").expect("put into the copy");
    copy.close().expect("close copy");
    assert_eq!(db.get(b"only-in-copy").expect("get"), None);
    assert!(contents(&db) == model);
    db.close().expect("close");
    // Both reopen, each with its own data (hard links shared files, nothing is shared now that
    // either side compacts).
    let db = Db::open(opts.clone()).expect("reopen");
    db.compact_range(None, None).expect("compact original");
    assert!(contents(&db) == model);
    let copy = Db::open(at_checkpoint(&opts, &ckpt)).expect("reopen checkpoint");
    assert_eq!(
        copy.get(b"only-in-copy").expect("get").as_deref(),
        Some(&b"1"[..])
    );
    copy.close().expect("close copy");
    db.close().expect("close");
}

#[test]
fn a_checkpoint_of_the_matrix_layout_holds_what_was_acknowledged_before_it() {
    checkpoint_holds_what_was_acknowledged_before_it(L0Layout::Matrix);
}

#[test]
fn a_checkpoint_of_the_table_layout_holds_what_was_acknowledged_before_it() {
    checkpoint_holds_what_was_acknowledged_before_it(L0Layout::Tables);
}

#[test]
fn a_checkpoint_into_a_directory_that_is_not_empty_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let opts = small_options(&dir.path().join("db"));
    let db = Db::open(opts).expect("open");
    db.put(b"k", b"v").expect("put");
    let ckpt = dir.path().join("ckpt");
    std::fs::create_dir_all(ckpt.join("slow")).expect("mkdir");
    std::fs::write(ckpt.join("slow/precious"), b"x").expect("write");
    let err = db.checkpoint(&ckpt).expect_err("must refuse");
    assert!(err.to_string().contains("not empty"), "{err}");
    assert_eq!(
        std::fs::read(ckpt.join("slow/precious")).expect("kept"),
        b"x"
    );
    // The database itself, an existing database included, is never a target.
    let err = db.checkpoint(dir.path().join("db")).expect_err("own dirs");
    assert!(err.to_string().contains("not empty"), "{err}");
    db.close().expect("close");
}

#[test]
fn a_checkpoint_is_a_new_database_whose_tiers_do_not_mix_with_the_original() {
    let dir = tempfile::tempdir().expect("tempdir");
    let opts = small_options(&dir.path().join("db"));
    let db = Db::open(opts.clone()).expect("open");
    db.put(b"k", b"v").expect("put");
    let ckpt = dir.path().join("ckpt");
    db.checkpoint(&ckpt).expect("checkpoint");
    db.close().expect("close");
    let mut mixed = opts.clone();
    mixed.slow_dir = ckpt.join("slow");
    let err = Db::open(mixed).expect_err("mixed tiers");
    assert!(err.to_string().contains("do not belong together"), "{err}");
}

/// Simulated tiers for a checkpoint target.
struct Target {
    fs: MemFs,
    fast: SimFastTier,
}

impl Target {
    fn new() -> Target {
        Target {
            fs: MemFs::new(),
            fast: SimFastTier::new("/ckpt/fast"),
        }
    }

    fn options(&self, base: &Options) -> Options {
        let mut o = base.clone();
        o.fast_dir = "/ckpt/fast".into();
        o.slow_dir = "/ckpt/slow".into();
        on_simulated_tiers(o, &self.fs, &self.fast)
    }
}

fn simulated_db() -> (MemFs, SimFastTier, Options) {
    let fs = MemFs::new();
    let fast = SimFastTier::new("/db/fast");
    let mut o = small_options(Path::new("/db"));
    o.fast_dir = "/db/fast".into();
    o.slow_dir = "/db/slow".into();
    let o = on_simulated_tiers(o, &fs, &fast);
    (fs, fast, o)
}

#[test]
fn a_checkpoint_survives_a_power_loss_right_after_it_returns() {
    let (_fs, _fast, opts) = simulated_db();
    let db = Db::open(opts.clone()).expect("open");
    let mut model = Model::new();
    fill(&db, &mut model, 0..1200, 0);
    db.compact_range(None, None).expect("compact");
    fill(&db, &mut model, 500..1500, 1);
    for policy in [
        CrashPolicy::DropUnpersisted,
        CrashPolicy::Random { seed: 7 },
    ] {
        let t = Target::new();
        let info = db.checkpoint_to(t.options(&opts)).expect("checkpoint");
        assert_eq!(info.linked_files, 0, "no hard links on simulated tiers");
        assert!(info.copied_files > 0 && info.copied_bytes > 0, "{info:?}");
        let (fs, fast) =
            t.fs.crash_with(FsCrashMode::DropUnsynced, 1, || t.fast.crash(policy));
        let crashed = Target { fs, fast };
        let copy = Db::open(crashed.options(&opts)).expect("open after power loss");
        assert!(contents(&copy) == model, "{policy:?}: checkpoint lost data");
        copy.close().expect("close");
    }
    db.close().expect("close");
}

#[test]
fn a_checkpoint_that_runs_out_of_space_removes_itself_and_a_later_one_succeeds() {
    let (_fs, _fast, opts) = simulated_db();
    let db = Db::open(opts.clone()).expect("open");
    let mut model = Model::new();
    fill(&db, &mut model, 0..1200, 0);
    db.compact_range(None, None).expect("compact");
    fill(&db, &mut model, 0..400, 1);
    let t = Target::new();
    for capacity in [0, 4 << 10, 64 << 10] {
        t.fs.set_capacity(Some(capacity));
        let err = db
            .checkpoint_to(t.options(&opts))
            .expect_err("the target disk is full");
        assert!(err.is_no_space(), "capacity {capacity}: {err}");
        assert_eq!(
            t.fs.total_bytes(),
            0,
            "capacity {capacity}: files left behind"
        );
    }
    // The container region of the fast tier fails the same way.
    t.fs.set_capacity(None);
    t.fast.set_capacity(Some(64 << 10));
    let err = db
        .checkpoint_to(t.options(&opts))
        .expect_err("fast tier full");
    assert!(err.is_no_space(), "{err}");
    t.fast.set_capacity(None);
    // Nothing was lost or stopped: the database takes writes, and a checkpoint into the same
    // (cleaned) directories succeeds.
    fill(&db, &mut model, 0..50, 2);
    db.checkpoint_to(t.options(&opts)).expect("checkpoint");
    let copy = Db::open(t.options(&opts)).expect("open checkpoint");
    assert!(contents(&copy) == model);
    copy.close().expect("close copy");
    db.close().expect("close");
}

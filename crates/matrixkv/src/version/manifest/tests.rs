//! Tests of the manifest: writing, replay, recovery and the worked example in docs/format/manifest.md.

use super::*;
use crate::key::{SeqNo, ValueKind, make_internal_key};
use crate::matrix::meta::{PageList, RowMeta};
use crate::tier::StdFs;
use crate::version::testutil::file;
use crate::version::version::test_row;

/// A manifest with a snapshot and three edits; returns the directory, the offsets of the
/// records and the expected describe() after each record.
fn write_manifest(dir: &Path) -> (Vec<u64>, Vec<String>) {
    let mut vs = VersionSet::new(5, vec![("page_bytes".into(), "4096".into())]);
    let mnum = vs.new_file_number();
    let mut w = ManifestWriter::create(&StdFs, dir, mnum, &vs.snapshot_edit()).unwrap();
    set_current(&StdFs, dir, mnum).unwrap();
    vs.set_manifest_number(mnum);
    let mut offsets = vec![0];
    let mut states = vec![vs.current().describe()];
    for i in 0..3u64 {
        let n = vs.new_file_number();
        vs.set_last_sequence(SeqNo(10 * (i + 1)));
        let mut e = VersionEdit::default();
        e.add_file(1, file(&format!("{}:{}-{}", n.0, i * 2, i * 2 + 1)));
        let v = vs.prepare(&mut e).unwrap();
        offsets.push(w.size_bytes());
        w.append(&e).unwrap();
        vs.install(&e, v);
        states.push(vs.current().describe());
    }
    (offsets, states)
}

fn manifest_path(dir: &Path) -> PathBuf {
    dir.join(manifest_name(read_current(&StdFs, dir).unwrap()))
}

fn rewrite(path: &Path, f: impl FnOnce(&mut Vec<u8>)) {
    let mut b = std::fs::read(path).unwrap();
    f(&mut b);
    std::fs::write(path, b).unwrap();
}

#[test]
fn written_manifest_recovers_the_same_state() {
    let d = tempfile::tempdir().unwrap();
    let (_, states) = write_manifest(d.path());
    let vs = recover(&StdFs, d.path()).unwrap();
    assert_eq!(&vs.current().describe(), states.last().unwrap());
    assert_eq!(vs.db_id(), 5);
    assert_eq!(vs.last_sequence(), SeqNo(30));
    assert_eq!(vs.next_file_number(), 5);
    assert_eq!(vs.manifest_number(), FileNum(1));
    assert_eq!(vs.fixed_options(), &[("page_bytes".into(), "4096".into())]);
    vs.current().check_invariants().unwrap();
}

#[test]
fn torn_last_record_is_dropped() {
    let d = tempfile::tempdir().unwrap();
    let (offsets, states) = write_manifest(d.path());
    let last = *offsets.last().unwrap() as usize;
    let full_len = std::fs::metadata(manifest_path(d.path())).unwrap().len() as usize;
    // Every cut inside the last record recovers the state before it.
    for cut in last + 1..full_len {
        rewrite(&manifest_path(d.path()), |b| b.truncate(cut));
        let vs = recover(&StdFs, d.path()).unwrap();
        assert_eq!(vs.current().describe(), states[2], "cut at {cut}");
    }
}

#[test]
fn garbled_or_zeroed_last_record_is_dropped() {
    let d = tempfile::tempdir().unwrap();
    let (offsets, states) = write_manifest(d.path());
    let last = *offsets.last().unwrap() as usize;
    let p = manifest_path(d.path());
    let orig = std::fs::read(&p).unwrap();
    rewrite(&p, |b| {
        let n = b.len();
        b[n - 2] ^= 0x10;
    });
    assert_eq!(
        recover(&StdFs, d.path()).unwrap().current().describe(),
        states[2]
    );
    std::fs::write(&p, &orig).unwrap();
    rewrite(&p, |b| b[last..].iter_mut().for_each(|x| *x = 0));
    assert_eq!(
        recover(&StdFs, d.path()).unwrap().current().describe(),
        states[2]
    );
}

#[test]
fn corruption_before_the_last_record_reports_offset() {
    let d = tempfile::tempdir().unwrap();
    let (offsets, _) = write_manifest(d.path());
    let p = manifest_path(d.path());
    let orig = std::fs::read(&p).unwrap();
    // A flipped payload byte, a flipped length byte, and a zeroed header, in record 2.
    let at = offsets[2] as usize;
    for (what, pos, mask) in [
        ("payload", at + record::HEADER_LEN + 1, 0x01u8),
        ("length", at + 5, 0x40),
        ("checksum", at, 0xff),
    ] {
        std::fs::write(&p, &orig).unwrap();
        rewrite(&p, |b| b[pos] ^= mask);
        let err = recover(&StdFs, d.path()).unwrap_err();
        match &err {
            Error::Corruption { site, .. } => {
                assert_eq!(site.kind, ArtifactKind::Manifest, "{what}");
                assert_eq!(site.offset, at as u64, "{what}");
                assert_eq!(site.path, p, "{what}");
            }
            other => panic!("{what}: expected corruption, got {other}"),
        }
        assert!(err.to_string().contains(&format!("offset {at}")), "{err}");
    }
    std::fs::write(&p, &orig).unwrap();
    rewrite(&p, |b| b[at..at + 8].iter_mut().for_each(|x| *x = 0));
    assert!(recover(&StdFs, d.path()).unwrap_err().is_corruption());
}

#[test]
fn valid_record_with_undecodable_edit_is_corruption() {
    let d = tempfile::tempdir().unwrap();
    write_manifest(d.path());
    let p = manifest_path(d.path());
    let mut rec = Vec::new();
    record::encode(&mut rec, &[99, 1]);
    let start = std::fs::metadata(&p).unwrap().len();
    rewrite(&p, |b| b.extend_from_slice(&rec));
    match recover(&StdFs, d.path()).unwrap_err() {
        Error::Corruption { site, reason } => {
            assert_eq!(site.offset, start);
            assert_eq!(reason, CorruptionReason::UnknownType(99));
        }
        other => panic!("expected corruption, got {other}"),
    }
}

#[test]
fn manifest_without_snapshot_fields_is_corruption() {
    let d = tempfile::tempdir().unwrap();
    let mut e = VersionEdit::default();
    e.add_file(1, file("3:a-b"));
    ManifestWriter::create(&StdFs, d.path(), FileNum(2), &e).unwrap();
    set_current(&StdFs, d.path(), FileNum(2)).unwrap();
    let err = recover(&StdFs, d.path()).unwrap_err();
    assert!(err.is_corruption(), "{err}");
    assert!(err.to_string().contains("never records"), "{err}");
}

#[test]
fn edit_that_does_not_apply_is_corruption() {
    let d = tempfile::tempdir().unwrap();
    let vs = VersionSet::new(1, vec![]);
    let mut w = ManifestWriter::create(&StdFs, d.path(), FileNum(1), &vs.snapshot_edit()).unwrap();
    set_current(&StdFs, d.path(), FileNum(1)).unwrap();
    let at = w.size_bytes();
    let mut e = VersionEdit::default();
    e.delete_file(1, FileNum(77));
    w.append(&e).unwrap();
    match recover(&StdFs, d.path()).unwrap_err() {
        Error::Corruption { site, .. } => assert_eq!(site.offset, at),
        other => panic!("expected corruption, got {other}"),
    }
}

#[test]
fn hostile_current_is_rejected() {
    let d = tempfile::tempdir().unwrap();
    write_manifest(d.path());
    let cur = d.path().join(CURRENT);
    for bad in [
        "../x\n",
        "MANIFEST-000001",
        "MANIFEST-000001\n\n",
        "/etc/passwd\n",
        "000001.sst\n",
        "MANIFEST-1\n",
        "",
    ] {
        std::fs::write(&cur, bad).unwrap();
        match recover(&StdFs, d.path()).unwrap_err() {
            Error::Corruption { site, .. } => {
                assert_eq!(site.kind, ArtifactKind::Current, "{bad:?}");
            }
            other => panic!("{bad:?}: expected corruption, got {other}"),
        }
    }
    std::fs::write(&cur, vec![b'M'; 1 << 20]).unwrap();
    assert!(matches!(
        recover(&StdFs, d.path()),
        Err(Error::Corruption {
            reason: CorruptionReason::BadLength,
            ..
        })
    ));
    std::fs::write(&cur, [0xff, 0xfe, b'\n']).unwrap();
    assert!(recover(&StdFs, d.path()).unwrap_err().is_corruption());
}

/// Found by the corruption campaign (tests/corruption.rs): a flipped digit in CURRENT was
/// reported as an I/O error on a manifest that never existed, naming no damaged file.
#[test]
fn current_naming_a_missing_manifest_is_corruption_of_current() {
    let d = tempfile::tempdir().unwrap();
    write_manifest(d.path());
    let cur = d.path().join(CURRENT);
    std::fs::write(&cur, "MANIFEST-000011\n").unwrap();
    match recover(&StdFs, d.path()).unwrap_err() {
        Error::Corruption { site, .. } => {
            assert_eq!(site.kind, ArtifactKind::Current);
            assert_eq!(site.path, cur);
            assert_eq!(site.offset, 0);
        }
        other => panic!("expected corruption of CURRENT, got {other}"),
    }
}

#[test]
fn set_current_switches_manifests_atomically() {
    let d = tempfile::tempdir().unwrap();
    write_manifest(d.path());
    let mut vs = recover(&StdFs, d.path()).unwrap();
    let n = vs.new_file_number();
    let mut e = vs.snapshot_edit();
    e.last_sequence = Some(SeqNo(1234));
    ManifestWriter::create(&StdFs, d.path(), n, &e).unwrap();
    // Until CURRENT moves, the old manifest is the truth.
    assert_eq!(
        recover(&StdFs, d.path()).unwrap().last_sequence(),
        SeqNo(30)
    );
    set_current(&StdFs, d.path(), n).unwrap();
    let back = recover(&StdFs, d.path()).unwrap();
    assert_eq!(back.last_sequence(), SeqNo(1234));
    assert_eq!(back.manifest_number(), n);
    assert_eq!(back.current().describe(), vs.current().describe());
    assert!(!d.path().join("CURRENT.tmp").exists());
}

#[test]
fn missing_current_is_an_io_error() {
    let d = tempfile::tempdir().unwrap();
    assert!(matches!(recover(&StdFs, d.path()), Err(Error::Io { .. })));
}

#[test]
fn read_edits_lists_every_record_with_its_offset() {
    let d = tempfile::tempdir().unwrap();
    let (offsets, _) = write_manifest(d.path());
    let edits = read_edits(&StdFs, &manifest_path(d.path())).unwrap();
    let got: Vec<u64> = edits.iter().map(|(o, _)| *o).collect();
    assert_eq!(got, offsets);
    assert!(edits[0].1.db_id.is_some());
}

/// The ```hex blocks of docs/format/manifest.md, in order.
fn doc_hex_blocks() -> Vec<Vec<u8>> {
    crate::golden::hex_blocks(include_str!("../../../../../docs/format/manifest.md"))
}

#[test]
fn docs_worked_example_matches_the_encoder() {
    use crate::version::FileMeta;
    let meta = FileMeta {
        number: FileNum(5),
        size: 300,
        smallest: make_internal_key(b"a", SeqNo(8), ValueKind::Value),
        largest: make_internal_key(b"c", SeqNo(9), ValueKind::Value),
        smallest_seq: SeqNo(8),
        largest_seq: SeqNo(9),
        entries: 2,
        blob_refs: None,
    };
    let mut vs = VersionSet::new(42, vec![("page_bytes".into(), "4096".into())]);
    for _ in 0..5 {
        vs.new_file_number();
    }
    vs.set_last_sequence(SeqNo(9));
    let mut first = VersionEdit {
        log_number: Some(FileNum(3)),
        ..VersionEdit::default()
    };
    first.add_file(1, meta.clone());
    let v = vs.prepare(&mut first).unwrap();
    vs.install(&first, v);
    let snapshot = vs.snapshot_edit();
    let mut mv = VersionEdit::default();
    mv.compact_pointers.push((1, meta.largest.clone()));
    mv.delete_file(1, FileNum(5));
    mv.add_file(2, meta.clone());

    let v = vs.prepare(&mut mv).unwrap();
    vs.install(&mv, v);

    // Record 2: a flush into the container that also switches roles; record 3: a column
    // up to "b" that frees the row's first page.
    let n = vs.new_row_number();
    vs.set_last_sequence(SeqNo(11));
    let mut flush = VersionEdit {
        switch_roles: true,
        ..VersionEdit::default()
    };
    flush.new_rows.push(RowMeta {
        row: n,
        prev_row: 0,
        pages: std::sync::Arc::new(PageList::new(vec![0, 1])),
        entries: 2,
        bytes: 5000,
        smallest: make_internal_key(b"a", SeqNo(10), ValueKind::Value),
        largest: make_internal_key(b"c", SeqNo(11), ValueKind::Deletion),
        smallest_seq: SeqNo(10),
        largest_seq: SeqNo(11),
    });
    let v = vs.prepare(&mut flush).unwrap();
    vs.install(&flush, v);
    let mut column = VersionEdit {
        column: Some(crate::version::ColumnDone {
            cursor: b"b".to_vec(),
            wrapped: false,
            freed: vec![(1, 0, 1)],
        }),
        ..VersionEdit::default()
    };
    let v = vs.prepare(&mut column).unwrap();
    vs.install(&column, v);
    // Record 4: file 5 rewritten as file 7 whose pointers reference the new blob file 6
    // (tag 19, as a blob GC job or any compaction now writes it).
    vs.new_file_number();
    vs.new_file_number();
    let mut gc = VersionEdit::default();
    gc.delete_file(2, FileNum(5));
    gc.add_file(
        2,
        FileMeta {
            number: FileNum(7),
            blob_refs: Some(vec![FileNum(6)]),
            ..meta.clone()
        },
    );
    gc.new_blobs.push(crate::version::edit::BlobFileMeta {
        number: FileNum(6),
        records: 2,
        record_bytes: 8240,
    });
    let v = vs.prepare(&mut gc).unwrap();
    vs.install(&gc, v);

    let d = tempfile::tempdir().unwrap();
    let mut w = ManifestWriter::create(&StdFs, d.path(), FileNum(1), &snapshot).unwrap();
    for e in [&mv, &flush, &column, &gc] {
        w.append(e).unwrap();
    }
    set_current(&StdFs, d.path(), FileNum(1)).unwrap();

    let blocks = doc_hex_blocks();
    if std::env::var_os("MATRIXKV_PRINT_GOLDEN").is_some() {
        let bytes = std::fs::read(w.path()).unwrap();
        let hex: Vec<String> = bytes.iter().map(|b| format!("{b:02x}")).collect();
        println!("{}", hex.join(" "));
    }
    assert_eq!(blocks.len(), 6);
    assert_eq!(std::fs::read(w.path()).unwrap(), blocks[0]);
    assert_eq!(std::fs::read(d.path().join(CURRENT)).unwrap(), blocks[1]);
    let back = recover(&StdFs, d.path()).unwrap();
    assert_eq!(
        back.current().describe().lines().nth(2).unwrap(),
        "L2: 7:a-c"
    );
    let v = back.current();
    assert_eq!(v.files(2)[0].blob_refs, Some(vec![FileNum(6)]));
    assert_eq!(v.blob_files().keys().copied().collect::<Vec<_>>(), vec![6]);
    assert_eq!(back.current().container(), vs.current().container());
    assert!(back.current().consumed(b"a") && !back.current().consumed(b"b"));
    assert_eq!(back.current().all_row_pages(), vec![1]);
}

#[test]
fn range_tombstone_tags_match_the_format_doc() {
    use crate::range_del::RangeTombstone;
    let edit = VersionEdit {
        deleted_range_dels: vec![SeqNo(7)],
        new_range_dels: vec![RangeTombstone {
            start: b"b".to_vec(),
            end: b"d".to_vec(),
            seq: SeqNo(12),
        }],
        ..VersionEdit::default()
    };
    let blocks = doc_hex_blocks();
    assert_eq!(
        edit.encode(),
        blocks[2],
        "docs/format/manifest.md is out of date"
    );
    assert_eq!(VersionEdit::decode(&blocks[2]).unwrap(), edit);
    // An empty range is corruption.
    assert!(VersionEdit::decode(&[0x14, 1, b'd', 1, b'b', 12]).is_err());
    assert!(VersionEdit::decode(&[0x14, 1, b'b', 1, b'b', 12]).is_err());
    // Replayed: the tombstone joins, a snapshot edit carries it, removing it works and
    // removing an absent one is corruption.
    let mut vs = VersionSet::new(1, vec![]);
    let mut add = VersionEdit {
        new_range_dels: edit.new_range_dels.clone(),
        ..VersionEdit::default()
    };
    let v = vs.prepare(&mut add).unwrap();
    vs.install(&add, v);
    assert_eq!(vs.current().range_dels().len(), 1);
    let snap = vs.snapshot_edit();
    assert_eq!(snap.new_range_dels, edit.new_range_dels);
    let mut twice = add.clone();
    assert!(
        vs.prepare(&mut twice).is_err(),
        "a live sequence number added again"
    );
    let mut gone = VersionEdit {
        deleted_range_dels: vec![SeqNo(12)],
        ..VersionEdit::default()
    };
    let v = vs.prepare(&mut gone).unwrap();
    vs.install(&gone, v);
    assert!(vs.current().range_dels().is_empty());
    let mut absent = gone.clone();
    assert!(
        vs.prepare(&mut absent).is_err(),
        "an absent tombstone removed"
    );
}

#[test]
fn index_generation_tag_matches_the_format_doc() {
    let edit = VersionEdit {
        index_generation: Some(5),
        ..VersionEdit::default()
    };
    let blocks = doc_hex_blocks();
    assert_eq!(
        edit.encode(),
        blocks[4],
        "docs/format/manifest.md is out of date"
    );
    assert_eq!(VersionEdit::decode(&blocks[4]).unwrap(), edit);
    // Given twice in one edit: corruption.
    assert!(VersionEdit::decode(&[0x17, 5, 0x17, 6]).is_err());
    // Installed, replayed, and restated by a snapshot edit.
    let mut vs = VersionSet::new(1, vec![]);
    assert_eq!(vs.index_generation(), 0);
    let mut e = edit.clone();
    let v = vs.prepare(&mut e).unwrap();
    vs.install(&e, v);
    assert_eq!(vs.index_generation(), 5);
    let snapshot = vs.snapshot_edit();
    assert_eq!(snapshot.index_generation, Some(5));
    let mut r = crate::version::set::Replay::new();
    r.apply(&VersionEdit::decode(&snapshot.encode()).unwrap())
        .unwrap();
    r.apply(&VersionEdit::default()).unwrap();
    assert_eq!(r.finish(FileNum(9)).unwrap().index_generation(), 5);
}

#[test]
fn partition_tags_match_the_format_doc() {
    let edit = VersionEdit {
        partition_bounds: Some(vec![b"m".to_vec()]),
        table_runs: vec![(FileNum(9), 2)],
        ..VersionEdit::default()
    };
    let blocks = doc_hex_blocks();
    let doc = blocks
        .iter()
        .find(|b| b.first() == Some(&0x18))
        .expect("the partition example");
    assert_eq!(
        &edit.encode(),
        doc,
        "docs/format/manifest.md is out of date"
    );
    assert_eq!(VersionEdit::decode(doc).unwrap(), edit);
    // Bounds out of order, empty, or given twice: corruption.
    assert!(VersionEdit::decode(&[0x18, 2, 1, b'm', 1, b'a']).is_err());
    assert!(VersionEdit::decode(&[0x18, 1, 0]).is_err());
    assert!(VersionEdit::decode(&[0x18, 0, 0x18, 0]).is_err());
    // Installed and restated by a snapshot edit.
    let mut vs = VersionSet::new(1, vec![]);
    let mut e = edit.clone();
    let v = vs.prepare(&mut e).unwrap();
    vs.install(&e, v);
    assert_eq!(vs.partitions().bounds, vec![b"m".to_vec()]);
    assert_eq!(vs.partitions().run(FileNum(9)), 2);
    let snapshot = vs.snapshot_edit();
    let mut r = crate::version::set::Replay::new();
    r.apply(&VersionEdit::decode(&snapshot.encode()).unwrap())
        .unwrap();
    let replayed = r.finish(FileNum(20)).unwrap();
    assert_eq!(replayed.partitions(), vs.partitions());
}

#[test]
fn keyspace_tag_matches_the_format_doc() {
    use crate::keyspace::registry::KeyspaceRecord;
    let record = KeyspaceRecord {
        id: 3,
        name: "users".into(),
        ttl: true,
        dropped: false,
    };
    let edit = VersionEdit {
        keyspaces: vec![record.clone()],
        ..VersionEdit::default()
    };
    let blocks = doc_hex_blocks();
    assert_eq!(
        edit.encode(),
        blocks[3],
        "docs/format/manifest.md is out of date"
    );
    assert_eq!(VersionEdit::decode(&blocks[3]).unwrap(), edit);
    // Id 0, an empty name and unknown flags are corruption.
    assert!(VersionEdit::decode(&[0x16, 0, 1, b'a', 0]).is_err());
    assert!(VersionEdit::decode(&[0x16, 3, 0, 0]).is_err());
    assert!(VersionEdit::decode(&[0x16, 3, 1, b'a', 4]).is_err());
    // Replayed and restated by a snapshot; a drop replaces the record.
    let mut vs = VersionSet::new(1, vec![]);
    let mut e = edit.clone();
    let v = vs.prepare(&mut e).unwrap();
    vs.install(&e, v);
    let dropped = KeyspaceRecord {
        dropped: true,
        ..record.clone()
    };
    let mut e = VersionEdit {
        keyspaces: vec![dropped.clone()],
        ..VersionEdit::default()
    };
    let v = vs.prepare(&mut e).unwrap();
    vs.install(&e, v);
    assert_eq!(vs.keyspaces(), std::slice::from_ref(&dropped));
    let mut r = crate::version::set::Replay::new();
    r.apply(&VersionEdit::decode(&vs.snapshot_edit().encode()).unwrap())
        .unwrap();
    assert_eq!(r.finish(FileNum(9)).unwrap().keyspaces(), [dropped]);
    // Two live keyspaces may not share a name.
    let mut r = crate::version::set::Replay::new();
    let other = KeyspaceRecord { id: 4, ..record };
    r.apply(&edit).unwrap();
    let clash = VersionEdit {
        keyspaces: vec![other],
        ..VersionEdit::default()
    };
    assert!(r.apply(&clash).is_err());
}

#[test]
fn manifest_with_rows_recovers_the_container() {
    let d = tempfile::tempdir().unwrap();
    let mut vs = VersionSet::new(5, vec![]);
    let mnum = vs.new_file_number();
    let mut w = ManifestWriter::create(&StdFs, d.path(), mnum, &vs.snapshot_edit()).unwrap();
    set_current(&StdFs, d.path(), mnum).unwrap();
    vs.set_manifest_number(mnum);
    let mut commit = |vs: &mut VersionSet, mut e: VersionEdit| {
        let v = vs.prepare(&mut e).unwrap();
        w.append(&e).unwrap();
        vs.install(&e, v);
    };
    for i in 0..4u32 {
        let n = vs.new_row_number();
        let mut e = VersionEdit::default();
        e.new_rows
            .push(test_row(n, "a", "z", (10 * i..10 * i + 4).collect()));
        e.switch_roles = i == 1;
        commit(&mut vs, e);
    }
    let column = |cursor: &str, wrapped, freed| VersionEdit {
        column: Some(crate::version::ColumnDone {
            cursor: cursor.into(),
            wrapped,
            freed,
        }),
        ..VersionEdit::default()
    };
    commit(&mut vs, column("g", false, vec![(1, 0, 2), (2, 0, 1)]));
    commit(&mut vs, column("", true, vec![(1, 2, 1)]));
    let expect = vs.current().container().clone();
    assert!(expect.drain.as_ref().unwrap().wrapped);
    let back = recover(&StdFs, d.path()).unwrap();
    assert_eq!(back.current().container(), &expect);
    assert_eq!(back.next_row_number(), 5);
    back.current().check_invariants().unwrap();

    // A new manifest started from the recovered state's snapshot recovers it again.
    let mut back = back;
    let n = back.new_file_number();
    ManifestWriter::create(&StdFs, d.path(), n, &back.snapshot_edit()).unwrap();
    set_current(&StdFs, d.path(), n).unwrap();
    let again = recover(&StdFs, d.path()).unwrap();
    assert_eq!(again.current().container(), &expect);
    assert_eq!(again.next_row_number(), 5);
}

/// A file system whose files fail `sync` while `fail` is set.
#[derive(Debug, Default)]
struct SyncFailFs {
    fail: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

struct SyncFailFile {
    inner: Box<dyn WritableFile>,
    fail: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

impl WritableFile for SyncFailFile {
    fn append(&mut self, data: &[u8]) -> Result<()> {
        self.inner.append(data)
    }
    fn sync(&mut self) -> Result<()> {
        // Relaxed: the flag is set and read by the same test thread.
        if self.fail.load(std::sync::atomic::Ordering::Relaxed) {
            return Err(Error::io(
                crate::error::IoOp::Sync,
                "manifest",
                std::io::Error::from_raw_os_error(5),
            ));
        }
        self.inner.sync()
    }
    fn flush(&mut self) -> Result<()> {
        self.inner.flush()
    }
    fn preallocate(&mut self, bytes: u64) -> Result<()> {
        self.inner.preallocate(bytes)
    }
    fn len(&self) -> u64 {
        self.inner.len()
    }
}

impl FileSystem for SyncFailFs {
    fn create_dir_all(&self, dir: &Path) -> Result<()> {
        StdFs.create_dir_all(dir)
    }
    fn create(&self, path: &Path) -> Result<Box<dyn WritableFile>> {
        Ok(Box::new(SyncFailFile {
            inner: StdFs.create(path)?,
            fail: std::sync::Arc::clone(&self.fail),
        }))
    }
    fn open(&self, path: &Path) -> Result<std::sync::Arc<dyn crate::tier::RandomAccessFile>> {
        StdFs.open(path)
    }
    fn rename(&self, from: &Path, to: &Path) -> Result<()> {
        StdFs.rename(from, to)
    }
    fn remove(&self, path: &Path) -> Result<()> {
        StdFs.remove(path)
    }
    fn list(&self, dir: &Path) -> Result<Vec<String>> {
        StdFs.list(dir)
    }
    fn exists(&self, path: &Path) -> Result<bool> {
        StdFs.exists(path)
    }
    fn sync_dir(&self, dir: &Path) -> Result<()> {
        StdFs.sync_dir(dir)
    }
    fn sync_file(&self, path: &Path) -> Result<()> {
        StdFs.sync_file(path)
    }
    fn lock(&self, path: &Path) -> Result<Box<dyn crate::tier::FileLock>> {
        StdFs.lock(path)
    }
}

#[test]
fn failed_sync_poisons_the_writer() {
    let d = tempfile::tempdir().unwrap();
    let fs = SyncFailFs::default();
    let vs = VersionSet::new(1, vec![]);
    let mut w = ManifestWriter::create(&fs, d.path(), FileNum(1), &vs.snapshot_edit()).unwrap();
    fs.fail.store(true, std::sync::atomic::Ordering::Relaxed);
    let e = VersionEdit {
        last_sequence: Some(SeqNo(5)),
        ..VersionEdit::default()
    };
    assert!(matches!(w.append(&e), Err(Error::Io { .. })));
    fs.fail.store(false, std::sync::atomic::Ordering::Relaxed);
    // Even though the device recovered, the tail is unknown: no further record.
    assert!(matches!(w.append(&e), Err(Error::Poisoned { .. })));
    // set_current propagates the same failure instead of renaming an unsynced file.
    fs.fail.store(true, std::sync::atomic::Ordering::Relaxed);
    assert!(set_current(&fs, d.path(), FileNum(1)).is_err());
    assert!(!d.path().join(CURRENT).exists());
}

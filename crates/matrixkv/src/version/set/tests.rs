//! Tests of `VersionSet`: installing edits, file numbers and live files.

use super::*;
use crate::version::ColumnDone;
use crate::version::testutil::file;
use crate::version::version::test_row;

#[test]
fn a_deleted_table_forgets_its_merge_count_and_new_bounds_replace_old_ones() {
    let mut p = Partitions::default();
    p.apply(&VersionEdit {
        partition_bounds: Some(vec![b"k".to_vec()]),
        table_runs: vec![(FileNum(4), 1), (FileNum(5), 0)],
        ..VersionEdit::default()
    });
    assert_eq!((p.run(FileNum(4)), p.run(FileNum(5))), (1, 0));
    let mut e = VersionEdit {
        partition_bounds: Some(vec![b"c".to_vec(), b"k".to_vec()]),
        ..VersionEdit::default()
    };
    e.deleted_files.push((0, FileNum(4)));
    p.apply(&e);
    assert_eq!(p.run(FileNum(4)), 0);
    assert!(p.runs.is_empty());
    assert_eq!(p.bounds, vec![b"c".to_vec(), b"k".to_vec()]);
}

fn add(level: usize, spec: &str) -> VersionEdit {
    let mut e = VersionEdit::default();
    e.add_file(level, file(spec));
    e
}

fn commit(vs: &mut VersionSet, mut e: VersionEdit) {
    let v = vs.prepare(&mut e).unwrap();
    vs.install(&e, v);
}

#[test]
fn prepare_fills_counters_and_does_not_install() {
    let mut vs = VersionSet::new(7, vec![]);
    let n = vs.new_file_number();
    vs.set_last_sequence(SeqNo(40));
    let mut e = add(1, &format!("{}:a-c", n.0));
    let v = vs.prepare(&mut e).unwrap();
    assert_eq!(e.next_file_number, Some(2));
    assert_eq!(e.last_sequence, Some(SeqNo(40)));
    assert_eq!(vs.current().num_files(1), 0);
    vs.install(&e, v);
    assert_eq!(vs.current().num_files(1), 1);
}

#[test]
fn install_applies_log_number_and_compact_pointers() {
    let mut vs = VersionSet::new(7, vec![]);
    let mut e = VersionEdit {
        log_number: Some(FileNum(5)),
        ..VersionEdit::default()
    };
    e.compact_pointers.push((2, file("1:m-n").largest));
    commit(&mut vs, e);
    assert_eq!(vs.log_number(), FileNum(5));
    assert_eq!(vs.compact_pointers()[2], file("1:m-n").largest);
    let mut back = VersionEdit {
        log_number: Some(FileNum(4)),
        ..VersionEdit::default()
    };
    assert!(vs.prepare(&mut back).is_err());
}

#[test]
fn live_files_keep_files_of_a_version_a_reader_still_holds() {
    let mut vs = VersionSet::new(7, vec![]);
    commit(&mut vs, add(1, "1:a-c"));
    let reader = vs.current();
    let mut e = add(2, "2:a-c");
    e.delete_file(1, FileNum(1));
    commit(&mut vs, e);
    let live = vs.live_files();
    assert!(live.contains(&FileNum(1)), "held by the reader");
    assert!(live.contains(&FileNum(2)));
    assert_eq!(vs.live_versions(), 2);
    drop(reader);
    let live = vs.live_files();
    assert!(!live.contains(&FileNum(1)));
    assert_eq!(vs.live_versions(), 1);
}

#[test]
fn snapshot_edit_replays_to_the_same_state() {
    let mut vs = VersionSet::new(99, vec![("page_bytes".into(), "4096".into())]);
    for _ in 0..10 {
        vs.new_file_number();
    }
    vs.set_last_sequence(SeqNo(77));
    let mut e = add(0, "3:a-z@5");
    e.add_file(3, file("4:c-d"));
    e.log_number = Some(FileNum(8));
    e.compact_pointers.push((3, file("4:c-d").largest));
    commit(&mut vs, e);

    let mut r = Replay::new();
    r.apply(&vs.snapshot_edit()).unwrap();
    let back = r.finish(FileNum(9)).unwrap();
    assert_eq!(back.current().describe(), vs.current().describe());
    assert_eq!(back.next_file_number(), vs.next_file_number());
    assert_eq!(back.last_sequence(), SeqNo(77));
    assert_eq!(back.log_number(), FileNum(8));
    assert_eq!(back.db_id(), 99);
    assert_eq!(back.fixed_options(), vs.fixed_options());
    assert_eq!(back.compact_pointers(), vs.compact_pointers());
    assert_eq!(back.manifest_number(), FileNum(9));
}

fn rows(vs: &mut VersionSet, pages: &[Vec<u32>]) -> VersionEdit {
    let mut e = VersionEdit::default();
    for p in pages {
        let n = vs.new_row_number();
        e.new_rows.push(test_row(n, "a", "z", p.clone()));
    }
    e
}

/// A set whose container has a half-drained compactor (rows 1, 2, with freed pages and a
/// wrapped cursor), a receiver (rows 3, 4) and a global cursor.
fn with_container() -> VersionSet {
    let mut vs = VersionSet::new(3, vec![]);
    // The global cursor applies after a switch in the same edit: set it first.
    commit(
        &mut vs,
        VersionEdit {
            global_cursor: Some(b"k".to_vec()),
            ..VersionEdit::default()
        },
    );
    let mut e = rows(&mut vs, &[vec![0, 1, 2], vec![3, 4]]);
    e.switch_roles = true;
    commit(&mut vs, e);
    let mut e = rows(&mut vs, &[vec![5], vec![6, 7]]);
    e.column = Some(ColumnDone {
        cursor: b"c".to_vec(),
        wrapped: true,
        freed: vec![(1, 1, 2), (2, 0, 1)],
    });
    commit(&mut vs, e);
    vs
}

#[test]
fn snapshot_edit_reproduces_the_container() {
    let vs = with_container();
    let c = vs.current().container().clone();
    assert_eq!(c.drain.as_ref().unwrap().start, b"k");
    assert!(c.drain.as_ref().unwrap().wrapped);
    let snap = vs.snapshot_edit();
    let bytes = snap.encode();
    let mut r = Replay::new();
    r.apply(&VersionEdit::decode(&bytes).unwrap()).unwrap();
    let back = r.finish(FileNum(9)).unwrap();
    assert_eq!(back.current().container(), &c);
    assert_eq!(back.next_row_number(), 5);
    back.current().check_invariants().unwrap();
    // The snapshot of the replayed set is the same edit (but for the next file number,
    // raised above the manifest's).
    let again = VersionEdit {
        next_file_number: snap.next_file_number,
        ..back.snapshot_edit()
    };
    assert_eq!(again, snap);
}

#[test]
fn row_numbers_are_allocated_and_recorded_by_prepare() {
    let mut vs = VersionSet::new(3, vec![]);
    assert_eq!(vs.new_row_number(), 1);
    let mut unallocated = VersionEdit::default();
    unallocated.new_rows.push(test_row(2, "a", "b", vec![0]));
    assert_eq!(
        vs.prepare(&mut unallocated).err(),
        Some(CorruptionReason::Invalid(
            "edit adds a row number that was never allocated"
        ))
    );
    let mut e = rows(&mut vs, &[vec![0]]);
    let v = vs.prepare(&mut e).unwrap();
    assert_eq!(e.next_row_number, Some(3));
    vs.install(&e, v);
    // Edits without rows leave the counter out.
    let mut e = VersionEdit::default();
    vs.prepare(&mut e).unwrap();
    assert_eq!(e.next_row_number, None);
}

#[test]
fn replay_raises_a_stale_next_row_number() {
    let mut e = VersionSet::new(1, vec![]).snapshot_edit();
    e.new_rows.push(test_row(7, "a", "b", vec![0]));
    let mut r = Replay::new();
    r.apply(&e).unwrap();
    let mut vs = r.finish(FileNum(2)).unwrap();
    assert_eq!(vs.new_row_number(), 8);
    // A manifest that never mentions rows starts at row 1.
    let mut e = VersionSet::new(1, vec![]).snapshot_edit();
    e.next_row_number = None;
    let mut r = Replay::new();
    r.apply(&e).unwrap();
    assert_eq!(r.finish(FileNum(2)).unwrap().next_row_number(), 1);
}

#[test]
fn replay_rejects_a_page_referenced_by_two_rows() {
    let mut e = VersionSet::new(1, vec![]).snapshot_edit();
    e.new_rows.push(test_row(1, "a", "b", vec![0, 1]));
    e.new_rows.push(test_row(2, "a", "b", vec![1, 2]));
    let mut r = Replay::new();
    r.apply(&e).unwrap();
    assert_eq!(
        r.finish(FileNum(2)).err(),
        Some(CorruptionReason::Invalid(
            "a container page is referenced twice"
        ))
    );
}

#[test]
fn older_live_versions_keep_the_pages_a_reader_still_holds() {
    let mut vs = with_container();
    let reader = vs.current();
    assert!(
        vs.older_live_versions().is_empty(),
        "the reader holds the current version"
    );
    let e = VersionEdit {
        column: Some(ColumnDone {
            cursor: b"k".to_vec(),
            wrapped: true,
            freed: vec![],
        }),
        drop_compactor: true,
        ..VersionEdit::default()
    };
    commit(&mut vs, e);
    assert_eq!(vs.current().container().cursor, b"k");
    let older = vs.older_live_versions();
    assert_eq!(older.len(), 1);
    assert!(Arc::ptr_eq(&older[0], &reader));
    let mut held = older[0].all_row_pages();
    held.sort_unstable();
    assert_eq!(
        held,
        vec![0, 4, 5, 6, 7],
        "the reader's version still holds row 1"
    );
    let mut current = vs.current().all_row_pages();
    current.sort_unstable();
    assert_eq!(current, vec![5, 6, 7]);
    drop((older, reader));
    assert!(vs.older_live_versions().is_empty());
}

#[test]
fn replay_without_a_required_field_is_invalid() {
    let complete = VersionSet::new(1, vec![]).snapshot_edit();
    let strip: [fn(&mut VersionEdit); 4] = [
        |e| e.db_id = None,
        |e| e.log_number = None,
        |e| e.next_file_number = None,
        |e| e.last_sequence = None,
    ];
    for f in strip {
        let mut e = complete.clone();
        f(&mut e);
        let mut r = Replay::new();
        r.apply(&e).unwrap();
        assert!(matches!(
            r.finish(FileNum(1)),
            Err(CorruptionReason::Invalid(_))
        ));
    }
}

#[test]
fn replay_raises_a_stale_next_file_number() {
    let mut e = VersionSet::new(1, vec![]).snapshot_edit();
    e.add_file(1, file("30:a-b"));
    let mut r = Replay::new();
    r.apply(&e).unwrap();
    let vs = r.finish(FileNum(12)).unwrap();
    assert_eq!(vs.next_file_number(), 31);
}

#[test]
fn replay_rejects_a_changed_db_id() {
    let mut r = Replay::new();
    r.apply(&VersionSet::new(1, vec![]).snapshot_edit())
        .unwrap();
    let e = VersionEdit {
        db_id: Some(2),
        ..VersionEdit::default()
    };
    assert!(r.apply(&e).is_err());
}

#[test]
#[cfg(debug_assertions)]
#[should_panic(expected = "installed out of order")]
fn installing_a_stale_prepared_version_is_caught() {
    let mut vs = VersionSet::new(7, vec![]);
    let mut a = add(1, "1:a-c");
    let mut b = add(1, "2:b-d");
    let va = vs.prepare(&mut a).unwrap();
    let vb = vs.prepare(&mut b).unwrap();
    vs.install(&a, va);
    // `vb` was built from the version `va` replaced: installing it would lose file 1.
    vs.install(&b, vb);
}

#[test]
fn mark_file_number_used_skips_past_it() {
    let mut vs = VersionSet::new(1, vec![]);
    vs.mark_file_number_used(FileNum(41));
    assert_eq!(vs.new_file_number(), FileNum(42));
    vs.mark_file_number_used(FileNum(3));
    assert_eq!(vs.new_file_number(), FileNum(43));
}

//! Tests of `Version`: file layout, lookups, the builder and key rendering.

use super::*;
use crate::version::testutil::{file, version};

fn numbers(files: &[Arc<FileMeta>]) -> Vec<u64> {
    files.iter().map(|f| f.number.0).collect()
}

#[test]
fn apply_adds_and_orders_each_level() {
    let v = version(
        "L0: 4:a-c@4 5:b-d@5 3:x-z@9\n\
         L1: 2:m-p 1:a-f",
    );
    assert_eq!(
        v.describe(),
        "L0: 3:x-z 5:b-d 4:a-c\nL1: 1:a-f 2:m-p\nL2: -\nL3: -\nL4: -\nL5: -\nL6: -\n"
    );
    v.check_invariants().unwrap();
    assert_eq!(v.num_files(0), 3);
    assert_eq!(v.level_bytes(1), 2 * 1024);
    assert_eq!(v.files(NUM_LEVELS).len(), 0);
}

#[test]
fn l0_ties_on_sequence_are_broken_by_file_number() {
    let v = version("L0: 4:a-c@7 6:b-d@7 5:x-z@7");
    assert_eq!(numbers(v.files(0)), vec![6, 5, 4]);
}

#[test]
fn delete_then_add_moves_a_file_between_levels() {
    let v = version("L1: 1:a-f 2:g-k\nL2: 3:a-c");
    let mut e = VersionEdit::default();
    let moved = v.files(1)[1].as_ref().clone();
    e.delete_file(1, FileNum(2));
    e.add_file(2, moved);
    let v2 = v.apply(&e).unwrap();
    assert_eq!(v2.describe().lines().nth(1).unwrap(), "L1: 1:a-f");
    assert_eq!(v2.describe().lines().nth(2).unwrap(), "L2: 3:a-c 2:g-k");
    assert_eq!(v2.generation(), v.generation() + 1);
    // The base is untouched.
    assert_eq!(v.num_files(1), 2);
}

#[test]
fn deleting_a_missing_file_or_from_the_wrong_level_is_invalid() {
    let v = version("L1: 1:a-f");
    let mut e = VersionEdit::default();
    e.delete_file(1, FileNum(9));
    assert!(matches!(v.apply(&e), Err(CorruptionReason::Invalid(_))));
    let mut e = VersionEdit::default();
    e.delete_file(2, FileNum(1));
    assert!(matches!(v.apply(&e), Err(CorruptionReason::Invalid(_))));
}

#[test]
fn adding_a_live_number_twice_is_invalid() {
    let v = version("L1: 1:a-f");
    let mut e = VersionEdit::default();
    e.add_file(3, file("1:x-y"));
    assert!(matches!(v.apply(&e), Err(CorruptionReason::Invalid(_))));
}

#[test]
fn a_table_numbered_like_a_live_blob_file_is_invalid() {
    let mut with_blob = VersionEdit::default();
    with_blob.new_blobs.push(BlobFileMeta {
        number: FileNum(2),
        records: 1,
        record_bytes: 10,
    });
    let v = version("L1: 1:a-f").apply(&with_blob).unwrap();
    let mut e = VersionEdit::default();
    e.add_file(1, file("2:k-m"));
    assert_eq!(
        v.apply(&e).err(),
        Some(CorruptionReason::Invalid(
            "edit adds a file number that is already live"
        ))
    );
}

#[test]
fn overlapping_files_in_l1_are_invalid() {
    let v = version("L1: 1:a-f");
    for spec in ["2:e-k", "2:f-k", "2:0-a", "2:b-c"] {
        let mut e = VersionEdit::default();
        e.add_file(1, file(spec));
        assert_eq!(
            v.apply(&e).err(),
            Some(CorruptionReason::Invalid(
                "files of one level L1+ overlap in user keys"
            )),
            "{spec}"
        );
    }
    // Touching ranges in L0 are fine.
    let mut e = VersionEdit::default();
    e.add_file(0, file("2:a-f"));
    e.add_file(0, file("3:a-f"));
    assert!(v.apply(&e).is_ok());
}

#[test]
fn overlapping_in_l1_is_a_contiguous_key_range() {
    let v = version("L1: 1:a-c 2:e-g 3:i-k 4:m-o");
    assert_eq!(numbers(&v.overlapping(1, b"d", b"i")), vec![2, 3]);
    assert_eq!(numbers(&v.overlapping(1, b"c", b"c")), vec![1]);
    assert_eq!(numbers(&v.overlapping(1, b"p", b"z")), Vec::<u64>::new());
    assert_eq!(numbers(&v.overlapping(1, b"0", b"z")), vec![1, 2, 3, 4]);
    assert_eq!(numbers(&v.overlapping(1, b"d", b"d")), Vec::<u64>::new());
}

#[test]
fn overlapping_in_l0_expands_transitively() {
    // 7 overlaps [e,e]; it widens the range to [d,h], which pulls in 6 ([g,k]) and then
    // 5 ([a,d]); 8 stays out.
    let v = version("L0: 8:x-z@8 7:d-h@7 6:g-k@6 5:a-d@5");
    assert_eq!(numbers(&v.overlapping(0, b"e", b"e")), vec![7, 6, 5]);
    assert_eq!(numbers(&v.overlapping(0, b"x", b"x")), vec![8]);
    assert_eq!(numbers(&v.overlapping(0, b"l", b"w")), Vec::<u64>::new());
}

#[test]
fn files_for_key_finds_covering_files() {
    let v = version("L0: 3:a-m@3 2:k-z@2 1:a-c@1\nL2: 4:a-c 5:e-g");
    let l0: Vec<u64> = v.files_for_key(0, b"l").map(|f| f.number.0).collect();
    assert_eq!(l0, vec![3, 2]);
    let l2: Vec<u64> = v.files_for_key(2, b"f").map(|f| f.number.0).collect();
    assert_eq!(l2, vec![5]);
    assert_eq!(v.files_for_key(2, b"d").count(), 0);
    assert_eq!(v.files_for_key(2, b"zz").count(), 0);
    assert_eq!(v.files_for_key(5, b"a").count(), 0);
}

#[test]
fn find_file_and_all_file_numbers_cover_every_level() {
    let v = version("L0: 3:a-m\nL4: 9:a-c");
    assert_eq!(v.find_file(FileNum(9)).map(|(l, _)| l), Some(4));
    assert!(v.find_file(FileNum(1)).is_none());
    let mut all = v.all_file_numbers();
    all.sort();
    assert_eq!(all, vec![FileNum(3), FileNum(9)]);
}

#[test]
fn check_invariants_reports_a_broken_version() {
    let mut v = version("L1: 1:a-f 2:g-k");
    v.check_invariants().unwrap();
    v.levels[1] = vec![Arc::new(file("3:a-f")), Arc::new(file("4:c-z"))];
    let err = v.check_invariants().unwrap_err();
    assert!(err.contains("overlap"), "{err}");
    let mut v = version("L0: 1:a-f@1 2:a-f@2");
    v.levels[0].reverse();
    assert!(v.check_invariants().unwrap_err().contains("newest first"));
    let mut v = version("L1: 1:a-f\nL2: 2:a-f");
    v.levels[2] = vec![Arc::new(file("1:a-f"))];
    assert!(v.check_invariants().unwrap_err().contains("twice"));
}

use super::test_row as row;
use crate::matrix::meta::FREED;

fn flush(rows: Vec<RowMeta>) -> VersionEdit {
    VersionEdit {
        new_rows: rows,
        ..VersionEdit::default()
    }
}

fn column(cursor: &str, wrapped: bool, freed: Vec<(u64, u32, u32)>) -> VersionEdit {
    VersionEdit {
        column: Some(ColumnDone {
            cursor: cursor.into(),
            wrapped,
            freed,
        }),
        ..VersionEdit::default()
    }
}

fn row_numbers(rows: &[Arc<RowMeta>]) -> Vec<u64> {
    rows.iter().map(|r| r.row).collect()
}

fn invalid(r: Result<Version, CorruptionReason>) -> &'static str {
    match r {
        Err(CorruptionReason::Invalid(what)) => what,
        other => panic!("expected Invalid, got {other:?}"),
    }
}

/// Rows 1 and 2 flushed, switched to the compactor, row 3 flushed to the receiver.
fn switched() -> Version {
    let v = Version::default()
        .apply(&flush(vec![
            row(1, "a", "m", vec![0, 1, 2]),
            row(2, "c", "z", vec![3, 4]),
        ]))
        .unwrap();
    let v = v
        .apply(&VersionEdit {
            switch_roles: true,
            ..VersionEdit::default()
        })
        .unwrap();
    v.apply(&flush(vec![row(3, "b", "k", vec![7, 8])])).unwrap()
}

#[test]
fn flush_switch_column_drop_lifecycle() {
    let v = switched();
    v.check_invariants().unwrap();
    let c = v.container();
    assert_eq!(row_numbers(&c.compactor), vec![1, 2]);
    assert_eq!(row_numbers(&c.receiver), vec![3]);
    let newest_first: Vec<u64> = v.rows_newest_first().map(|r| r.row).collect();
    assert_eq!(newest_first, vec![3, 2, 1]);
    assert_eq!(c.drain, Some(Drain::default()));
    assert_eq!(
        (v.live_pages(), c.receiver_pages(), c.compactor_pages()),
        (7, 2, 5)
    );
    assert_eq!(v.row_bytes(), 6000);
    assert_eq!(c.find_row(2).map(|r| r.row), Some(2));
    assert!(c.find_row(9).is_none());

    // A column up to "f" empties page 0 of row 1 and page 0 of row 2.
    let v = v
        .apply(&column("f", false, vec![(1, 0, 1), (2, 0, 1)]))
        .unwrap();
    v.check_invariants().unwrap();
    let c = v.container();
    assert_eq!(c.compactor[0].pages.physical(0), None);
    assert_eq!(c.compactor[0].pages.physical(1), Some(1));
    let mut pages = v.all_row_pages();
    pages.sort_unstable();
    assert_eq!(pages, vec![1, 2, 4, 7, 8]);
    assert_eq!(c.compactor_pages(), 3);
    assert!(v.consumed(b"a") && v.consumed(b"e") && v.consumed(b""));
    assert!(!v.consumed(b"f") && !v.consumed(b"z"));

    // To the end of the key space, then the drain completes and the compactor goes.
    let v = v.apply(&column("", true, vec![(2, 1, 1)])).unwrap();
    // The drain began at the empty key: wrapping to it drained everything.
    assert!(v.consumed(b"z") && v.consumed(b"\x00"));
    assert!(v.container().drain.as_ref().unwrap().is_complete());
    let mut last = column("", true, vec![(1, 1, 2)]);
    last.drop_compactor = true;
    let v = v.apply(&last).unwrap();
    v.check_invariants().unwrap();
    let c = v.container();
    assert!(c.compactor.is_empty() && c.drain.is_none());
    assert_eq!(row_numbers(&c.receiver), vec![3]);
    assert_eq!(v.all_row_pages(), vec![7, 8]);
    assert!(!v.consumed(b"a"), "no compactor, nothing consumed");
    assert!(
        v.describe().contains("receiver: 3\ncompactor:\n"),
        "{}",
        v.describe()
    );
}

#[test]
fn drop_moves_the_global_cursor_and_the_next_drain_starts_there() {
    let v = switched();
    let mut e = column("p", false, vec![]);
    e.drop_compactor = true;
    let v = v.apply(&e).unwrap();
    assert_eq!(v.container().cursor, b"p");
    let v = v
        .apply(&VersionEdit {
            switch_roles: true,
            ..VersionEdit::default()
        })
        .unwrap();
    let d = v.container().drain.clone().unwrap();
    assert_eq!(
        (d.start.as_slice(), d.cursor.as_slice()),
        (&b"p"[..], &b"p"[..])
    );
    // A global cursor in the edit is applied after the drop.
    let mut e = column("q", false, vec![]);
    e.drop_compactor = true;
    e.global_cursor = Some(b"c".to_vec());
    assert_eq!(v.apply(&e).unwrap().container().cursor, b"c");
}

#[test]
fn flush_and_switch_in_one_edit_moves_the_new_row_too() {
    let mut e = flush(vec![row(1, "a", "b", vec![0])]);
    e.switch_roles = true;
    let v = Version::default().apply(&e).unwrap();
    assert_eq!(row_numbers(&v.container().compactor), vec![1]);
    assert!(v.container().receiver.is_empty());
}

#[test]
fn consumed_follows_the_circular_drained_range() {
    let d = Drain {
        start: b"m".to_vec(),
        cursor: b"t".to_vec(),
        wrapped: false,
    };
    let got: Vec<bool> = ["", "a", "l", "m", "s", "t", "z"]
        .iter()
        .map(|k| d.consumed(k.as_bytes()))
        .collect();
    assert_eq!(got, vec![false, false, false, true, true, false, false]);
    let d = Drain {
        start: b"m".to_vec(),
        cursor: b"c".to_vec(),
        wrapped: true,
    };
    let got: Vec<bool> = ["", "b", "c", "l", "m", "z"]
        .iter()
        .map(|k| d.consumed(k.as_bytes()))
        .collect();
    assert_eq!(got, vec![true, true, false, false, true, true]);
    assert!(!d.is_complete());
    let full = Drain {
        cursor: b"m".to_vec(),
        ..d
    };
    assert!(full.is_complete() && full.consumed(b"l") && full.consumed(b""));
    assert!(!Drain::default().consumed(b""), "nothing drained yet");
}

#[test]
fn invalid_container_edits_are_rejected() {
    let v = switched();
    // Row numbers must rise above every row, including the compactor's.
    assert_eq!(
        invalid(v.apply(&flush(vec![row(3, "a", "b", vec![20])]))),
        "a new row's number is not above every row's"
    );
    assert_eq!(
        invalid(v.apply(&flush(vec![
            row(5, "a", "b", vec![20]),
            row(4, "a", "b", vec![21])
        ]))),
        "a new row's number is not above every row's"
    );
    assert_eq!(
        invalid(v.apply(&flush(vec![row(4, "a", "b", vec![20, FREED])]))),
        "a new row has freed pages"
    );
    let switch = VersionEdit {
        switch_roles: true,
        ..VersionEdit::default()
    };
    assert_eq!(
        invalid(v.apply(&switch)),
        "role switch while the compactor is not empty"
    );
    assert_eq!(
        invalid(Version::default().apply(&switch)),
        "role switch with an empty receiver"
    );
    assert_eq!(
        invalid(v.apply(&column("f", false, vec![(3, 0, 1)]))),
        "freed pages of a row that is not in the compactor"
    );
    assert_eq!(
        invalid(v.apply(&column("f", false, vec![(1, 2, 2)]))),
        "freed page range is empty or outside its row"
    );
    assert_eq!(
        invalid(v.apply(&column("f", false, vec![(1, 0, 0)]))),
        "freed page range is empty or outside its row"
    );
    assert_eq!(
        invalid(v.apply(&column("f", false, vec![(1, u32::MAX, u32::MAX)]))),
        "freed page range is empty or outside its row"
    );
    let none = Version::default();
    assert_eq!(
        invalid(none.apply(&column("f", false, vec![]))),
        "column compaction without a compactor"
    );
    let drop = VersionEdit {
        drop_compactor: true,
        ..VersionEdit::default()
    };
    assert_eq!(
        invalid(none.apply(&drop)),
        "compactor dropped while it is empty"
    );
    // The cursor only moves forward and never passes the start after wrapping.
    let v = v.apply(&column("f", false, vec![])).unwrap();
    assert_eq!(
        invalid(v.apply(&column("e", false, vec![]))),
        "column moves the drain cursor back"
    );
    let v = v
        .apply(&VersionEdit {
            drop_compactor: true,
            ..column("f", false, vec![])
        })
        .unwrap()
        .apply(&flush(vec![row(4, "a", "b", vec![30])]))
        .unwrap()
        .apply(&switch)
        .unwrap();
    // This drain starts at f.
    let v = v.apply(&column("", true, vec![])).unwrap();
    assert_eq!(
        invalid(v.apply(&column("g", true, vec![]))),
        "column drains past the start of the drain"
    );
    assert_eq!(
        invalid(v.apply(&column("z", false, vec![]))),
        "column moves the drain cursor back"
    );
    assert!(v.apply(&column("f", true, vec![])).is_ok());
}

#[test]
fn freeing_a_freed_page_again_is_a_no_op() {
    let v = switched();
    let once = v.apply(&column("f", false, vec![(1, 0, 2)])).unwrap();
    let twice = once.apply(&column("g", false, vec![(1, 1, 1)])).unwrap();
    assert_eq!(
        once.container().compactor[0].pages,
        twice.container().compactor[0].pages
    );
}

#[test]
fn restored_compactor_must_come_with_its_drain_into_an_empty_container() {
    let drain = Drain {
        start: b"c".to_vec(),
        cursor: b"a".to_vec(),
        wrapped: true,
    };
    let restore = VersionEdit {
        compactor_rows: vec![row(1, "a", "b", vec![0, FREED]), row(2, "a", "b", vec![1])],
        drain: Some(drain.clone()),
        new_rows: vec![row(3, "a", "b", vec![2])],
        ..VersionEdit::default()
    };
    let v = Version::default().apply(&restore).unwrap();
    v.check_invariants().unwrap();
    assert_eq!(v.container().drain, Some(drain.clone()));
    assert_eq!(row_numbers(&v.container().compactor), vec![1, 2]);
    assert_eq!(row_numbers(&v.container().receiver), vec![3]);
    assert_eq!(
        invalid(v.apply(&restore)),
        "edit restores a compactor into a non-empty container"
    );
    let no_drain = VersionEdit {
        drain: None,
        ..restore.clone()
    };
    assert_eq!(
        invalid(Version::default().apply(&no_drain)),
        "compactor rows restored without drain state"
    );
    let no_rows = VersionEdit {
        compactor_rows: vec![],
        ..restore.clone()
    };
    assert_eq!(
        invalid(Version::default().apply(&no_rows)),
        "drain state restored without compactor rows"
    );
    let bad_drain = VersionEdit {
        drain: Some(Drain {
            cursor: b"d".to_vec(),
            ..drain
        }),
        ..restore.clone()
    };
    assert_eq!(
        invalid(Version::default().apply(&bad_drain)),
        "drain cursor is past its start after wrapping"
    );
    let unordered = VersionEdit {
        compactor_rows: vec![row(2, "a", "b", vec![0]), row(1, "a", "b", vec![1])],
        ..restore
    };
    assert_eq!(
        invalid(Version::default().apply(&unordered)),
        "restored compactor rows are not oldest first"
    );
}

#[test]
fn check_invariants_catches_a_page_referenced_twice() {
    // `apply` does not check pages (a pass over every page per edit); the check does.
    let v = switched()
        .apply(&flush(vec![row(4, "a", "b", vec![9, 3])]))
        .unwrap();
    assert_eq!(v.container().duplicate_page(), Some(3));
    let err = v.check_invariants().unwrap_err();
    assert!(err.contains("page 3 is referenced twice"), "{err}");
    let v = Version::default()
        .apply(&flush(vec![row(1, "a", "b", vec![5, 5])]))
        .unwrap();
    assert!(v.check_invariants().unwrap_err().contains("page 5"));
}

#[test]
fn check_invariants_catches_broken_container_state() {
    let mut v = switched();
    v.container.drain = None;
    assert!(v.check_invariants().unwrap_err().contains("no drain state"));
    let mut v = switched();
    v.container.receiver[0] = Arc::new(row(1, "a", "b", vec![50]));
    assert!(v.check_invariants().unwrap_err().contains("not older"));
    let mut v = switched();
    let r = row(3, "b", "k", vec![7, FREED]);
    v.container.receiver[0] = Arc::new(r);
    assert!(v.check_invariants().unwrap_err().contains("freed pages"));
    let mut v = switched();
    v.container.compactor.clear();
    assert!(
        v.check_invariants()
            .unwrap_err()
            .contains("drain state without compactor rows")
    );
}

#[test]
fn describe_escapes_unprintable_bytes() {
    assert_eq!(render_key(b"a-b\x00 \\"), "a\\x2db\\x00\\x20\\x5c");
}

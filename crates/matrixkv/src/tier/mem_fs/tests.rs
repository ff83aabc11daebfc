use super::*;

const DIR: &str = "/db";

fn fs_with_dir() -> MemFs {
    let fs = MemFs::new();
    fs.create_dir_all(Path::new(DIR)).unwrap();
    fs
}

fn p(name: &str) -> PathBuf {
    Path::new(DIR).join(name)
}

fn write(fs: &MemFs, name: &str, data: &[u8], sync: bool) -> Box<dyn WritableFile> {
    let mut w = fs.create(&p(name)).unwrap();
    w.append(data).unwrap();
    if sync {
        w.sync().unwrap();
    }
    w
}

fn read(fs: &MemFs, name: &str) -> Vec<u8> {
    fs.read_all(&p(name)).unwrap()
}

fn raw_os_error(e: &Error) -> Option<i32> {
    match e {
        Error::Io { source, .. } => source.raw_os_error(),
        _ => None,
    }
}

#[test]
fn synced_data_survives_drop_unsynced_and_unsynced_data_does_not() {
    let fs = fs_with_dir();
    let mut w = write(&fs, "a", b"durable", true);
    w.append(b" volatile").unwrap();
    fs.sync_dir(Path::new(DIR)).unwrap();
    assert_eq!(read(&fs, "a"), b"durable volatile");
    let img = fs.crash(FsCrashMode::DropUnsynced, 1);
    assert_eq!(read(&img, "a"), b"durable");
    let img = fs.crash(FsCrashMode::KeepAll, 1);
    assert_eq!(read(&img, "a"), b"durable volatile");
}

#[test]
fn created_file_without_dir_sync_vanishes_in_drop_unsynced_but_not_keep_all() {
    let fs = fs_with_dir();
    drop(write(&fs, "new", b"data", true));
    let img = fs.crash(FsCrashMode::DropUnsynced, 0);
    assert!(!img.exists(&p("new")).unwrap());
    assert!(img.list(Path::new(DIR)).unwrap().is_empty());
    let img = fs.crash(FsCrashMode::KeepAll, 0);
    assert_eq!(read(&img, "new"), b"data");
}

#[test]
fn rename_is_durable_only_after_dir_sync() {
    let fs = fs_with_dir();
    drop(write(&fs, "tmp", b"v1", true));
    fs.sync_dir(Path::new(DIR)).unwrap();
    fs.rename(&p("tmp"), &p("CURRENT")).unwrap();
    let img = fs.crash(FsCrashMode::DropUnsynced, 0);
    assert_eq!(img.list(Path::new(DIR)).unwrap(), vec!["tmp".to_string()]);
    assert_eq!(read(&img, "tmp"), b"v1");
    fs.sync_dir(Path::new(DIR)).unwrap();
    let img = fs.crash(FsCrashMode::DropUnsynced, 0);
    assert_eq!(
        img.list(Path::new(DIR)).unwrap(),
        vec!["CURRENT".to_string()]
    );
    assert_eq!(read(&img, "CURRENT"), b"v1");
}

#[test]
fn removed_file_reappears_after_crash_without_dir_sync() {
    let fs = fs_with_dir();
    drop(write(&fs, "old.sst", b"table", true));
    fs.sync_dir(Path::new(DIR)).unwrap();
    fs.remove(&p("old.sst")).unwrap();
    assert!(!fs.exists(&p("old.sst")).unwrap());
    let img = fs.crash(FsCrashMode::DropUnsynced, 0);
    assert_eq!(read(&img, "old.sst"), b"table");
    fs.sync_dir(Path::new(DIR)).unwrap();
    let img = fs.crash(FsCrashMode::DropUnsynced, 0);
    assert!(!img.exists(&p("old.sst")).unwrap());
}

#[test]
fn random_tail_keeps_a_prefix_of_the_unsynced_tail_deterministically() {
    let fs = fs_with_dir();
    let data: Vec<u8> = (0..200u8).collect();
    let mut w = write(&fs, "log", data.get(..50).unwrap(), true);
    w.append(data.get(50..).unwrap()).unwrap();
    fs.sync_dir(Path::new(DIR)).unwrap();
    let mut lengths = BTreeSet::new();
    for seed in 0..64 {
        let got = read(&fs.crash(FsCrashMode::RandomTail, seed), "log");
        assert!((50..=200).contains(&got.len()), "len {}", got.len());
        assert_eq!(got.as_slice(), data.get(..got.len()).unwrap());
        let again = read(&fs.crash(FsCrashMode::RandomTail, seed), "log");
        assert_eq!(got, again, "seed {seed} must give the same image");
        lengths.insert(got.len());
    }
    assert!(
        lengths.len() > 10,
        "tails should vary with the seed: {lengths:?}"
    );
}

#[test]
fn garbage_tail_keeps_the_length_but_changes_unsynced_bytes() {
    let fs = fs_with_dir();
    let mut w = write(&fs, "log", b"synced--", true);
    w.append(&[0xAB; 64]).unwrap();
    fs.sync_dir(Path::new(DIR)).unwrap();
    let got = read(&fs.crash(FsCrashMode::GarbageTail, 7), "log");
    assert_eq!(got.len(), 8 + 64);
    assert_eq!(got.get(..8).unwrap(), b"synced--");
    assert_ne!(got.get(8..).unwrap(), &[0xAB; 64][..]);
    let zeroed = read(&fs.crash(FsCrashMode::ZeroTail, 7), "log");
    assert_eq!(zeroed.get(8..).unwrap(), &[0u8; 64][..]);
}

#[test]
fn random_blocks_keeps_the_length_and_zeroes_or_keeps_whole_blocks() {
    let fs = fs_with_dir();
    let mut w = write(&fs, "sst", &[1u8; 100], true);
    w.append(&[9u8; 8 * CRASH_BLOCK]).unwrap();
    fs.sync_dir(Path::new(DIR)).unwrap();
    let got = read(&fs.crash(FsCrashMode::RandomBlocks, 3), "sst");
    assert_eq!(got.len(), 100 + 8 * CRASH_BLOCK);
    assert_eq!(got.get(..100).unwrap(), &[1u8; 100][..]);
    let mut kept = 0;
    let mut zeroed = 0;
    // Blocks are aligned to file offsets, so the first unsynced piece is short.
    for piece in got
        .get(100..CRASH_BLOCK)
        .into_iter()
        .chain(got.get(CRASH_BLOCK..).unwrap().chunks(CRASH_BLOCK))
    {
        if piece.iter().all(|&b| b == 9) {
            kept += 1;
        } else if piece.iter().all(|&b| b == 0) {
            zeroed += 1;
        } else {
            panic!("a block was partly kept");
        }
    }
    assert!(kept > 0 && zeroed > 0, "kept {kept}, zeroed {zeroed}");
}

#[test]
fn second_lock_is_refused_until_the_guard_is_dropped() {
    let fs = fs_with_dir();
    let guard = fs.lock(&p("LOCK")).unwrap();
    let err = fs.lock(&p("LOCK")).unwrap_err();
    assert!(matches!(err, Error::Locked { .. }), "{err}");
    assert!(fs.clone().lock(&p("LOCK")).is_err(), "clones share locks");
    assert!(fs.exists(&p("LOCK")).unwrap(), "lock file is created");
    fs.sync_dir(Path::new(DIR)).unwrap();
    let img = fs.crash(FsCrashMode::DropUnsynced, 0);
    assert!(img.lock(&p("LOCK")).is_ok(), "crash image holds no locks");
    drop(guard);
    assert!(fs.lock(&p("LOCK")).is_ok());
}

#[test]
fn fault_fires_after_n_matching_ops_then_stops() {
    let fs = fs_with_dir();
    fs.inject(
        Fault::new(FaultOp::Write, FaultKind::Eio)
            .on_path("sst")
            .after(2)
            .times(1),
    );
    let mut log = fs.create(&p("x.log")).unwrap();
    for _ in 0..5 {
        log.append(b"l").unwrap();
    }
    let mut w = fs.create(&p("1.sst")).unwrap();
    w.append(b"a").unwrap();
    w.append(b"b").unwrap();
    let err = w.append(b"c").unwrap_err();
    assert_eq!(raw_os_error(&err), Some(5), "EIO");
    assert!(matches!(
        err,
        Error::Io {
            op: IoOp::Write,
            ..
        }
    ));
    w.append(b"d").unwrap();
    assert_eq!(read(&fs, "1.sst"), b"abd", "a failed append writes nothing");
    assert_eq!(fs.faults_fired(), 1);
    fs.inject(Fault::new(FaultOp::Sync, FaultKind::NoSpace));
    assert!(w.sync().unwrap_err().is_no_space());
    fs.clear_faults();
    w.sync().unwrap();
}

#[test]
fn sweep_fails_each_counted_operation_in_turn() {
    fn workload(fs: &MemFs) -> Result<()> {
        fs.create_dir_all(Path::new(DIR))?;
        let mut w = fs.create(&p("t"))?;
        w.append(b"abc")?;
        w.sync()?;
        drop(w);
        fs.rename(&p("t"), &p("f"))?;
        fs.sync_dir(Path::new(DIR))?;
        let r = fs.open(&p("f"))?;
        r.read_exact_at(0, &mut [0u8; 3])
    }
    let counting = MemFs::new();
    workload(&counting).unwrap();
    let n = counting.op_count(FaultOp::Any);
    assert_eq!(n, 8);
    assert_eq!(counting.op_count(FaultOp::Write), 1);
    for i in 0..n {
        let fs = MemFs::new();
        fs.inject(Fault::new(FaultOp::Any, FaultKind::Eio).after(i).times(1));
        assert!(workload(&fs).is_err(), "op {i} should fail");
        assert_eq!(fs.faults_fired(), 1);
    }
}

#[test]
fn appends_beyond_capacity_fail_with_no_space_and_write_nothing() {
    let fs = fs_with_dir();
    fs.set_capacity(Some(10));
    let mut w = fs.create(&p("a")).unwrap();
    w.append(b"12345678").unwrap();
    let err = w.append(b"abc").unwrap_err();
    assert!(err.is_no_space(), "{err}");
    assert_eq!(fs.total_bytes(), 8);
    assert_eq!(w.len(), 8);
    drop(w);
    let mut w2 = fs.create(&p("b")).unwrap();
    assert!(w2.append(b"abc").is_err());
    fs.remove(&p("a")).unwrap();
    assert_eq!(fs.total_bytes(), 0, "removing frees space");
    w2.append(b"abc").unwrap();
}

#[test]
fn open_handle_reads_the_file_after_removal_and_replacement() {
    let fs = fs_with_dir();
    drop(write(&fs, "f", b"first", false));
    let r = fs.open(&p("f")).unwrap();
    fs.remove(&p("f")).unwrap();
    assert!(matches!(
        fs.open(&p("f")).unwrap_err(),
        Error::Io { op: IoOp::Open, .. }
    ));
    drop(write(&fs, "g", b"other", false));
    fs.rename(&p("g"), &p("f")).unwrap();
    let mut buf = [0u8; 5];
    r.read_exact_at(0, &mut buf).unwrap();
    assert_eq!(&buf, b"first");
    assert_eq!(r.len(), 5);
    assert_eq!(
        fs.total_bytes(),
        10,
        "the open removed file still takes space"
    );
    drop(r);
    assert_eq!(fs.total_bytes(), 5);
}

#[test]
fn missing_files_are_not_found_and_reads_past_the_end_are_eof() {
    let fs = fs_with_dir();
    let err = fs.open(&p("nope")).unwrap_err();
    match &err {
        Error::Io {
            op: IoOp::Open,
            source,
            ..
        } => assert_eq!(source.kind(), io::ErrorKind::NotFound),
        other => panic!("unexpected {other}"),
    }
    assert!(
        fs.create(Path::new("/nodir/f")).is_err(),
        "parent must exist"
    );
    assert!(fs.rename(&p("nope"), &p("x")).is_err());
    assert!(fs.remove(&p("nope")).is_err());
    drop(write(&fs, "f", b"abc", false));
    let r = fs.open(&p("f")).unwrap();
    match r.read_exact_at(2, &mut [0u8; 2]).unwrap_err() {
        Error::Io { source, .. } => {
            assert_eq!(source.kind(), io::ErrorKind::UnexpectedEof);
        }
        other => panic!("unexpected {other}"),
    }
    assert!(r.read_exact_at(u64::MAX, &mut [0u8; 1]).is_err());
}

#[test]
fn list_names_files_and_subdirectories_of_one_directory() {
    let fs = fs_with_dir();
    fs.create_dir_all(&p("sub/deeper")).unwrap();
    drop(write(&fs, "b", b"", false));
    drop(write(&fs, "a", b"", false));
    drop(write(&fs, "sub/inner", b"", false));
    assert_eq!(fs.list(Path::new(DIR)).unwrap(), vec!["a", "b", "sub"]);
    assert_eq!(fs.list(&p("sub")).unwrap(), vec!["deeper", "inner"]);
    assert!(fs.list(Path::new("/missing")).is_err());
    assert!(fs.exists(&p("sub")).unwrap());
    // Directories are durable at once.
    let img = fs.crash(FsCrashMode::DropUnsynced, 0);
    assert_eq!(img.list(Path::new(DIR)).unwrap(), vec!["sub"]);
}

#[test]
fn corrupt_flips_a_byte_and_truncate_shortens() {
    let fs = fs_with_dir();
    drop(write(&fs, "f", b"abcd", true));
    fs.corrupt(&p("f"), 1, 0x20).unwrap();
    assert_eq!(read(&fs, "f"), b"aBcd");
    assert!(fs.corrupt(&p("f"), 4, 1).is_err());
    fs.truncate(&p("f"), 2).unwrap();
    assert_eq!(read(&fs, "f"), b"aB");
    assert_eq!(fs.synced_len(&p("f")).unwrap(), 2);
    fs.truncate(&p("f"), 3).unwrap();
    assert_eq!(read(&fs, "f"), b"aB\0");
}

#[test]
fn failed_sync_loses_the_tail_even_if_a_retry_succeeds() {
    let fs = fs_with_dir();
    let mut w = write(&fs, "m", b"ok", true);
    w.append(b"lost").unwrap();
    fs.inject(Fault::new(FaultOp::Sync, FaultKind::Eio).times(1));
    assert!(w.sync().is_err());
    w.append(b"new").unwrap();
    w.sync().unwrap();
    fs.sync_dir(Path::new(DIR)).unwrap();
    assert_eq!(read(&fs, "m"), b"oklostnew", "the page cache still has it");
    assert_eq!(
        read(&fs.crash(FsCrashMode::DropUnsynced, 0), "m"),
        b"ok\0\0\0\0new"
    );
    assert_eq!(read(&fs.crash(FsCrashMode::KeepAll, 0), "m"), b"oklostnew");
}

#[test]
fn short_write_appends_half_and_corrupt_read_flips_the_last_byte() {
    let fs = fs_with_dir();
    fs.inject(Fault::new(FaultOp::Write, FaultKind::ShortWrite).times(1));
    let mut w = fs.create(&p("f")).unwrap();
    assert!(w.append(b"abcdef").is_err());
    assert_eq!(read(&fs, "f"), b"abc");
    fs.inject(Fault::new(FaultOp::Read, FaultKind::CorruptRead).times(1));
    let r = fs.open(&p("f")).unwrap();
    let mut buf = [0u8; 3];
    r.read_exact_at(0, &mut buf).unwrap();
    assert_eq!(&buf, b"abb");
    r.read_exact_at(0, &mut buf).unwrap();
    assert_eq!(&buf, b"abc");
}

#[test]
fn a_mapped_file_is_its_capacity_long_until_its_first_sync_and_a_crash_may_keep_it_so() {
    let fs = MemFs::new();
    fs.create_dir_all(Path::new("/d")).unwrap();
    let p = Path::new("/d/m");
    let mut w = fs.create_mapped(p, 100, 0).unwrap();
    w.append(b"abc").unwrap();
    w.append(b"def").unwrap();
    let mut expected = b"abcdef".to_vec();
    expected.resize(100, 0);
    assert_eq!(fs.read_all(p).unwrap(), expected);
    fs.sync_dir(Path::new("/d")).unwrap();
    let crashed = fs.crash(FsCrashMode::KeepAll, 1);
    assert_eq!(crashed.read_all(p).unwrap(), expected, "a process crash");
    assert!(
        fs.crash(FsCrashMode::DropUnsynced, 1)
            .read_all(p)
            .unwrap()
            .is_empty(),
        "nothing was synced"
    );
    w.sync().unwrap();
    assert_eq!(fs.read_all(p).unwrap(), b"abcdef");
    w.append(b"ghi").unwrap();
    w.sync().unwrap();
    assert_eq!(fs.read_all(p).unwrap(), b"abcdefghi");
    // Past the capacity the file grows as any other.
    let mut w = fs.create_mapped(Path::new("/d/n"), 4, 0).unwrap();
    w.append(b"abc").unwrap();
    w.append(b"defg").unwrap();
    assert_eq!(fs.read_all(Path::new("/d/n")).unwrap(), b"abcdefg");
}

#[test]
fn a_sync_of_the_appends_keeps_a_mapped_file_its_capacity_long_and_durable() {
    let fs = fs_with_dir();
    let mut w = fs.create_mapped(&p("v"), 32, 0).unwrap();
    w.append(b"abc").unwrap();
    w.sync_appended().unwrap();
    fs.sync_dir(Path::new(DIR)).unwrap();
    let mut expected = b"abc".to_vec();
    expected.resize(32, 0);
    assert_eq!(read(&fs, "v"), expected, "still its capacity long");
    assert_eq!(
        read(&fs.crash(FsCrashMode::DropUnsynced, 0), "v"),
        b"abc",
        "the appends survive a power loss"
    );
    // Later appends still overwrite the reserved zeros in place, and are the unsynced
    // tail until the next sync...
    w.append(b"def").unwrap();
    expected[3..6].copy_from_slice(b"def");
    assert_eq!(read(&fs, "v"), expected);
    assert_eq!(read(&fs.crash(FsCrashMode::DropUnsynced, 0), "v"), b"abc");
    w.sync_appended().unwrap();
    assert_eq!(
        read(&fs.crash(FsCrashMode::DropUnsynced, 0), "v"),
        b"abcdef"
    );
    // ...and the last sync shortens the file to them.
    w.sync().unwrap();
    assert_eq!(
        read(&fs.crash(FsCrashMode::DropUnsynced, 0), "v"),
        b"abcdef"
    );
}

#[test]
fn a_mapped_handle_reads_the_live_file_and_what_was_appended_past_its_length() {
    let fs = fs_with_dir();
    let mut w = fs.create_mapped(&p("v"), 64, 0).unwrap();
    w.append(b"0123456789").unwrap();
    w.flush().unwrap();
    // The file is its capacity long until its first sync: the mapping covers it.
    let f = fs.open_mapped(&p("v")).unwrap();
    assert_eq!(f.len(), 64);
    let mut buf = [0u8; 4];
    f.read_exact_at(3, &mut buf).unwrap();
    assert_eq!(&buf, b"3456");
    // The sync shortens it to the bytes appended; reads below them go on, and so do reads
    // of what is appended after it, past the mapped length too.
    w.sync().unwrap();
    f.read_exact_at(6, &mut buf).unwrap();
    assert_eq!(&buf, b"6789");
    w.append(&[b'x'; 100]).unwrap();
    w.flush().unwrap();
    let mut tail = [0u8; 20];
    f.read_exact_at(60, &mut tail).unwrap();
    assert_eq!(tail, [b'x'; 20]);
    // Past the current end and the mapped length: an error, as `pread` gives.
    assert!(f.read_exact_at(200, &mut buf).is_err());
}

#[test]
fn create_over_an_existing_file_truncates_it() {
    let fs = fs_with_dir();
    drop(write(&fs, "f", b"old contents", true));
    fs.sync_dir(Path::new(DIR)).unwrap();
    let mut w = fs.create(&p("f")).unwrap();
    assert_eq!(read(&fs, "f"), b"");
    w.append(b"new").unwrap();
    assert_eq!(read(&fs.crash(FsCrashMode::DropUnsynced, 0), "f"), b"");
    w.sync().unwrap();
    assert_eq!(read(&fs.crash(FsCrashMode::DropUnsynced, 0), "f"), b"new");
}

#[test]
fn crash_image_is_independent_and_fully_durable() {
    let fs = fs_with_dir();
    let mut w = write(&fs, "f", b"abc", false);
    let img = fs.crash(FsCrashMode::KeepAll, 0);
    w.append(b"def").unwrap();
    assert_eq!(read(&img, "f"), b"abc");
    assert_eq!(
        img.op_count(FaultOp::Any),
        2,
        "only the open and read of read_all"
    );
    let again = img.crash(FsCrashMode::DropUnsynced, 0);
    assert_eq!(read(&again, "f"), b"abc");
}

#[test]
fn clones_share_files_across_threads() {
    let fs = fs_with_dir();
    let handles: Vec<_> = (0..4)
        .map(|t| {
            let fs = fs.clone();
            std::thread::spawn(move || {
                let mut w = fs.create(&p(&format!("t{t}"))).unwrap();
                for _ in 0..100 {
                    w.append(&[t; 10]).unwrap();
                }
                w.sync().unwrap();
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    assert_eq!(fs.total_bytes(), 4000);
    assert_eq!(fs.op_count(FaultOp::Write), 400);
}

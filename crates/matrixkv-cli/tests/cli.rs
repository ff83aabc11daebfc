//! The inspecting and maintenance commands of the CLI, run as a user would run them.

use std::process::{Command, Output};

use matrixkv::{Db, Options};

/// Runs the CLI. A database this test process closed a moment ago may still read as locked:
/// the LOCK file's `flock` belongs to its open file description, which a child that another
/// test thread is spawning holds from its fork until its exec closes it (close-on-exec). That
/// refusal is retried for up to 2 s; any other outcome is returned as it is.
fn matrixkv(args: &[&str]) -> Output {
    let run = || {
        Command::new(env!("CARGO_BIN_EXE_matrixkv"))
            .args(args)
            .output()
            .expect("run matrixkv")
    };
    let mut out = run();
    for _ in 0..40 {
        if out.status.success() || !stderr(&out).contains("the database is already open") {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
        out = run();
    }
    out
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// A database in `dir` (fast tier in `<dir>/fast`, the CLI's default) holding 500 keys.
fn database(dir: &std::path::Path) -> String {
    let db = Db::open(Options::new(dir)).expect("open");
    for i in 0..500u32 {
        db.put(format!("k{i:04}"), vec![b'v'; 100]).expect("put");
    }
    db.close().expect("close");
    dir.to_string_lossy().into_owned()
}

#[test]
fn property_prints_one_value_and_lists_every_name() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = database(dir.path());
    let out = matrixkv(&["property", "--db", &db, "matrixkv.latest-sequence-number"]);
    assert!(out.status.success(), "{out:?}");
    assert_eq!(stdout(&out).trim(), "500");
    let list = matrixkv(&["property", "--list"]);
    assert!(list.status.success(), "{list:?}");
    assert_eq!(
        stdout(&list).lines().count(),
        matrixkv::PROPERTY_NAMES.len()
    );
    let bad = matrixkv(&["property", "--db", &db, "rocksdb.stats"]);
    assert!(!bad.status.success());
    assert!(
        String::from_utf8_lossy(&bad.stderr).contains("unknown property"),
        "{bad:?}"
    );
}

#[test]
fn delete_range_removes_the_keys_from_to_exclusive() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = database(dir.path());
    let out = matrixkv(&["delete-range", "--db", &db, "k0100", "k0400"]);
    assert!(out.status.success(), "{out:?}");
    for (key, present) in [
        ("k0099", true),
        ("k0100", false),
        ("k0399", false),
        ("k0400", true),
    ] {
        let got = matrixkv(&["get", "--db", &db, key]);
        assert_eq!(
            stdout(&got).contains(&"v".repeat(100)),
            present,
            "{key}: {got:?}"
        );
    }
    let reopened = Db::open(Options::new(dir.path())).expect("open");
    assert_eq!(reopened.iter().expect("iter").count(), 200);
    reopened.close().expect("close");
    let bad = matrixkv(&["delete-range", "--db", &db, "k9", "k1"]);
    assert!(
        !bad.status.success(),
        "an inverted range is refused: {bad:?}"
    );
}

#[test]
fn compact_empties_level_zero_and_keeps_the_data() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = database(dir.path());
    let out = matrixkv(&["compact", "--db", &db]);
    assert!(out.status.success(), "{out:?}");
    assert!(stdout(&out).contains("compacted in"), "{}", stdout(&out));
    let l0 = matrixkv(&["property", "--db", &db, "matrixkv.num-files-at-level0"]);
    assert_eq!(stdout(&l0).trim(), "0");
    let got = matrixkv(&["get", "--db", &db, "k0123"]);
    assert!(got.status.success(), "{got:?}");
    assert!(stdout(&got).contains(&"v".repeat(100)), "{}", stdout(&got));
    let inverted = matrixkv(&["compact", "--db", &db, "--from", "z", "--to", "a"]);
    assert!(!inverted.status.success());
    assert!(
        String::from_utf8_lossy(&inverted.stderr).contains("after end"),
        "{inverted:?}"
    );
}

#[test]
fn checkpoint_writes_a_copy_the_other_commands_open() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = database(&dir.path().join("db"));
    let to = dir.path().join("ckpt").to_string_lossy().into_owned();
    let out = matrixkv(&["checkpoint", "--db", &db, "--to", &to]);
    assert!(out.status.success(), "{out:?}");
    assert!(
        stdout(&out).contains("checkpoint at sequence 500"),
        "{}",
        stdout(&out)
    );
    // The original moves on; the copy keeps what it had.
    let put = matrixkv(&["put", "--db", &db, "k0001", "changed"]);
    assert!(put.status.success(), "{put:?}");
    let got = matrixkv(&["get", "--db", &to, "k0001"]);
    assert!(got.status.success(), "{got:?}");
    assert!(stdout(&got).contains(&"v".repeat(100)), "{}", stdout(&got));
    // A second checkpoint into the same place is refused, with the reason.
    let again = matrixkv(&["checkpoint", "--db", &db, "--to", &to]);
    assert!(!again.status.success());
    assert!(
        String::from_utf8_lossy(&again.stderr).contains("not empty"),
        "{again:?}"
    );
}

#[test]
fn updates_prints_one_line_per_batch_from_a_sequence_number() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut o = Options::new(dir.path());
    o.wal_retention_segments = 4;
    let db = Db::open(o.clone()).expect("open");
    for i in 0..20u32 {
        db.put(format!("k{i:04}"), "v").expect("put");
    }
    let mut b = matrixkv::WriteBatch::new();
    b.put(b"sp ace\x01", "v");
    b.delete("k0001");
    db.write(b).expect("write");
    // Flushed: the batches are read from a retained segment.
    db.flush().expect("flush");
    db.close().expect("close");
    let path = dir.path().to_string_lossy().into_owned();
    let out = matrixkv(&["updates", "--db", &path, "--since", "1", "--limit", "3"]);
    assert!(out.status.success(), "{out:?}");
    assert_eq!(
        stdout(&out).lines().collect::<Vec<_>>(),
        [
            "1 1 put \"k0000\"",
            "2 1 put \"k0001\"",
            "3 1 put \"k0002\""
        ]
    );
    let out = matrixkv(&["updates", "--db", &path, "--since", "21"]);
    assert!(out.status.success(), "{out:?}");
    assert_eq!(stdout(&out), "21 2 put \"sp ace\\x01\" delete \"k0001\"\n");
    let out = matrixkv(&["updates", "--db", &path, "--since", "1000"]);
    assert!(out.status.success(), "{out:?}");
    assert_eq!(stdout(&out), "");
    // Once the history is gone, the oldest sequence number still held is named.
    o.wal_retention_segments = 0;
    let db = Db::open(o).expect("open without retention");
    db.put("later", "x").expect("put");
    db.flush().expect("flush");
    db.close().expect("close");
    let out = matrixkv(&["updates", "--db", &path, "--since", "5"]);
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("oldest sequence number it holds is 24"),
        "{out:?}"
    );
}

#[test]
fn updates_names_the_keyspace_of_each_operation_by_id() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut o = Options::new(dir.path());
    o.wal_retention_segments = 4;
    let db = Db::open(o).expect("open");
    let users = db
        .create_keyspace("users", matrixkv::KeyspaceOptions::default())
        .expect("create");
    let mut b = matrixkv::WriteBatch::new();
    b.put("k", "default");
    b.put_cf(&users, "k", "users");
    b.delete_range_cf(&users, "a", "b");
    db.write(b).expect("write");
    db.drop_keyspace("users").expect("drop");
    db.flush().expect("flush");
    db.close().expect("close");
    let path = dir.path().to_string_lossy().into_owned();
    let out = matrixkv(&["updates", "--db", &path, "--since", "1"]);
    assert!(out.status.success(), "{out:?}");
    assert_eq!(
        stdout(&out),
        "1 3 put \"k\" put@1 \"k\" delete-range@1 \"a\" \"b\"\n4 1 drop-keyspace@1\n"
    );
}

#[test]
fn backup_create_list_verify_restore_and_purge() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = database(&dir.path().join("db"));
    let backups = dir.path().join("backups").to_string_lossy().into_owned();
    let out = matrixkv(&["backup", "create", "--db", &db, "--backup-dir", &backups]);
    assert!(out.status.success(), "{out:?}");
    assert!(
        stdout(&out).starts_with("backup 1 at sequence 500"),
        "{}",
        stdout(&out)
    );
    let put = matrixkv(&["put", "--db", &db, "k0001", "changed"]);
    assert!(put.status.success(), "{put:?}");
    let out = matrixkv(&["backup", "create", "--db", &db, "--backup-dir", &backups]);
    assert!(out.status.success(), "{out:?}");
    let list = matrixkv(&["backup", "list", "--backup-dir", &backups]);
    assert_eq!(stdout(&list).lines().count(), 2, "{}", stdout(&list));
    let verify = matrixkv(&["backup", "verify", "--backup-dir", &backups, "--id", "1"]);
    assert!(stdout(&verify).contains("backup 1: ok"), "{verify:?}");
    let to = dir.path().join("restored").to_string_lossy().into_owned();
    let out = matrixkv(&[
        "backup",
        "restore",
        "--backup-dir",
        &backups,
        "--id",
        "1",
        "--to",
        &to,
    ]);
    assert!(out.status.success(), "{out:?}");
    let got = matrixkv(&["get", "--db", &to, "k0001"]);
    assert!(stdout(&got).contains(&"v".repeat(100)), "{}", stdout(&got));
    let purge = matrixkv(&["backup", "purge", "--backup-dir", &backups, "--keep", "1"]);
    assert!(stdout(&purge).contains("[1]"), "{purge:?}");
    let missing = matrixkv(&["backup", "verify", "--backup-dir", &backups, "--id", "1"]);
    assert!(!missing.status.success());
    assert!(
        String::from_utf8_lossy(&missing.stderr).contains("no backup 1"),
        "{missing:?}"
    );
}

#[test]
fn merge_adds_to_counters_and_appends_with_the_named_operator() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = database(&dir.path().join("db"));
    for n in ["1", "2", "39"] {
        let out = matrixkv(&[
            "merge",
            "--db",
            &db,
            "--merge-operator",
            "u64add",
            "hits",
            n,
        ]);
        assert!(out.status.success(), "{out:?}");
    }
    let got = matrixkv(&["get", "--db", &db, "--merge-operator", "u64add", "hits"]);
    assert_eq!(stdout(&got).trim(), "42", "{got:?}");
    // Without the operator the operands cannot be read, and say why.
    let plain = matrixkv(&["get", "--db", &db, "hits"]);
    assert!(!plain.status.success());
    assert!(
        String::from_utf8_lossy(&plain.stderr).contains("merge operator"),
        "{plain:?}"
    );
    let bad = matrixkv(&[
        "merge",
        "--db",
        &db,
        "--merge-operator",
        "u64add",
        "hits",
        "x",
    ]);
    assert!(!bad.status.success());
    for part in ["a", "b"] {
        let out = matrixkv(&[
            "merge",
            "--db",
            &db,
            "--merge-operator",
            "append",
            "tags",
            part,
        ]);
        assert!(out.status.success(), "{out:?}");
    }
    let got = matrixkv(&["get", "--db", &db, "--merge-operator", "append", "tags"]);
    assert_eq!(stdout(&got).trim(), "a,b");
}

#[test]
fn keyspace_keeps_its_keys_apart_from_default_until_dropped() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = database(dir.path());
    // A keyspace the database lacks is refused, by name.
    let missing = matrixkv(&["put", "--db", &db, "--keyspace", "users", "k0001", "x"]);
    assert!(!missing.status.success());
    assert!(
        stderr(&missing).contains("no keyspace named \"users\""),
        "{missing:?}"
    );
    let out = matrixkv(&["keyspace", "create", "--db", &db, "users"]);
    assert!(out.status.success(), "{out:?}");
    assert_eq!(stdout(&out).trim(), "keyspace \"users\" created with id 1");
    let put = matrixkv(&["put", "--db", &db, "--keyspace", "users", "k0001", "alice"]);
    assert!(put.status.success(), "{put:?}");
    // The same key, two keyspaces, two values.
    let got = matrixkv(&["get", "--db", &db, "--keyspace", "users", "k0001"]);
    assert!(got.status.success(), "{got:?}");
    assert_eq!(stdout(&got).trim(), "alice");
    let got = matrixkv(&["get", "--db", &db, "k0001"]);
    assert_eq!(stdout(&got).trim(), "v".repeat(100), "{got:?}");
    let got = matrixkv(&["get", "--db", &db, "--keyspace", "users", "k0002"]);
    assert_eq!(stdout(&got).trim(), "(not found)", "{got:?}");
    let scan = matrixkv(&["scan", "--db", &db, "--keyspace", "users"]);
    assert!(scan.status.success(), "{scan:?}");
    assert_eq!(stdout(&scan), "k0001 => alice\n");
    let list = matrixkv(&["keyspace", "list", "--db", &db]);
    assert!(list.status.success(), "{list:?}");
    assert_eq!(
        stdout(&list).lines().collect::<Vec<_>>(),
        ["0\tdefault", "1\tusers"]
    );
    let out = matrixkv(&["keyspace", "drop", "--db", &db, "users"]);
    assert!(out.status.success(), "{out:?}");
    let gone = matrixkv(&["get", "--db", &db, "--keyspace", "users", "k0001"]);
    assert!(!gone.status.success());
    assert!(
        stderr(&gone).contains("no keyspace named \"users\""),
        "{gone:?}"
    );
    let list = matrixkv(&["keyspace", "list", "--db", &db]);
    assert_eq!(stdout(&list), "0\tdefault\n", "{list:?}");
    let got = matrixkv(&["get", "--db", &db, "k0001"]);
    assert_eq!(stdout(&got).trim(), "v".repeat(100), "{got:?}");
}

#[test]
fn delete_range_and_compact_in_a_keyspace_leave_default_alone() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = database(dir.path());
    let out = matrixkv(&["keyspace", "create", "--db", &db, "users"]);
    assert!(out.status.success(), "{out:?}");
    for key in ["k0100", "k0200", "k0300"] {
        let put = matrixkv(&["put", "--db", &db, "--keyspace", "users", key, "u"]);
        assert!(put.status.success(), "{put:?}");
    }
    let out = matrixkv(&[
        "delete-range",
        "--db",
        &db,
        "--keyspace",
        "users",
        "k0000",
        "k0250",
    ]);
    assert!(out.status.success(), "{out:?}");
    let out = matrixkv(&["delete", "--db", &db, "--keyspace", "users", "k0300"]);
    assert!(out.status.success(), "{out:?}");
    let out = matrixkv(&["compact", "--db", &db, "--keyspace", "users"]);
    assert!(out.status.success(), "{out:?}");
    let scan = matrixkv(&["scan", "--db", &db, "--keyspace", "users"]);
    assert_eq!(stdout(&scan), "", "{scan:?}");
    let scan = matrixkv(&["scan", "--db", &db, "--limit", "1000"]);
    assert_eq!(stdout(&scan).lines().count(), 500, "{scan:?}");
}

#[test]
fn merge_in_a_keyspace_adds_with_its_keyspace_merge_operator() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = database(dir.path());
    let out = matrixkv(&[
        "keyspace",
        "create",
        "--db",
        &db,
        "--merge-operator",
        "u64add",
        "counters",
    ]);
    assert!(out.status.success(), "{out:?}");
    for n in ["1", "2", "39"] {
        let out = matrixkv(&[
            "merge",
            "--db",
            &db,
            "--keyspace",
            "counters",
            "--keyspace-merge-operator",
            "counters=u64add",
            "hits",
            n,
        ]);
        assert!(out.status.success(), "{out:?}");
    }
    let got = matrixkv(&[
        "get",
        "--db",
        &db,
        "--keyspace",
        "counters",
        "--keyspace-merge-operator",
        "counters=u64add",
        "hits",
    ]);
    assert_eq!(stdout(&got).trim(), "42", "{got:?}");
    let got = matrixkv(&["get", "--db", &db, "--merge-operator", "u64add", "hits"]);
    assert_eq!(stdout(&got).trim(), "(not found)", "{got:?}");
    // `--merge-operator` is the default keyspace's: the keyspace's operator is named for it.
    let bad = matrixkv(&[
        "merge",
        "--db",
        &db,
        "--merge-operator",
        "u64add",
        "--keyspace",
        "counters",
        "hits",
        "1",
    ]);
    assert!(!bad.status.success());
    assert!(
        stderr(&bad).contains("--keyspace-merge-operator counters=u64add"),
        "{bad:?}"
    );
    let plain = matrixkv(&["get", "--db", &db, "--keyspace", "counters", "hits"]);
    assert!(!plain.status.success());
    assert!(stderr(&plain).contains("merge operator"), "{plain:?}");
}

#[test]
fn ttl_keyspace_opens_only_with_keyspace_ttl() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = database(dir.path());
    let out = matrixkv(&[
        "keyspace",
        "create",
        "--db",
        &db,
        "--ttl-secs",
        "3600",
        "sessions",
    ]);
    assert!(out.status.success(), "{out:?}");
    // Every open needs the TTL, whichever keyspace the command reads.
    for args in [
        &["get", "--db", &db, "k0001"][..],
        &["keyspace", "list", "--db", &db],
    ] {
        let out = matrixkv(args);
        assert!(!out.status.success(), "{args:?}");
        let err = stderr(&out);
        assert!(
            err.contains("keyspace \"sessions\" ttl true")
                && err.contains("--keyspace-ttl NAME=SECS"),
            "{out:?}"
        );
    }
    let ttl = ["--keyspace-ttl", "sessions=3600"];
    let put = matrixkv(
        &[
            &["put", "--db", &db, "--keyspace", "sessions", "s1", "token"][..],
            &ttl,
        ]
        .concat(),
    );
    assert!(put.status.success(), "{put:?}");
    let got = matrixkv(
        &[
            &["get", "--db", &db, "--keyspace", "sessions", "s1"][..],
            &ttl,
        ]
        .concat(),
    );
    assert!(got.status.success(), "{got:?}");
    assert_eq!(stdout(&got).trim(), "token");
    let list = matrixkv(&[&["keyspace", "list", "--db", &db][..], &ttl].concat());
    assert_eq!(stdout(&list), "0\tdefault\n1\tsessions\n", "{list:?}");
    let zero = matrixkv(&["get", "--db", &db, "--keyspace-ttl", "sessions=0", "k0001"]);
    assert!(!zero.status.success(), "a TTL under a second is refused");
}

#[test]
fn keyspace_compression_is_given_at_creation_and_to_later_commands() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = database(dir.path());
    let out = matrixkv(&[
        "keyspace",
        "create",
        "--db",
        &db,
        "--compression",
        "lz4",
        "cold",
    ]);
    assert!(out.status.success(), "{out:?}");
    let value = "abc".repeat(200);
    for k in ["a", "b", "c"] {
        let put = matrixkv(&[
            "put",
            "--db",
            &db,
            "--keyspace",
            "cold",
            "--keyspace-compression",
            "cold=lz4",
            k,
            &value,
        ]);
        assert!(put.status.success(), "{put:?}");
    }
    let compact = matrixkv(&["compact", "--db", &db, "--keyspace-compression", "cold=lz4"]);
    assert!(compact.status.success(), "{compact:?}");
    let got = matrixkv(&["get", "--db", &db, "--keyspace", "cold", "b"]);
    assert_eq!(stdout(&got).trim(), value, "{got:?}");
    let bad = matrixkv(&[
        "get",
        "--db",
        &db,
        "--keyspace-compression",
        "cold=brotli",
        "b",
    ]);
    assert!(!bad.status.success());
    assert!(stderr(&bad).contains("unknown compression"), "{bad:?}");
}

/// Every file under `dir` with its bytes and modification time.
fn snapshot_files(
    dir: &std::path::Path,
) -> std::collections::BTreeMap<std::path::PathBuf, (Vec<u8>, std::time::SystemTime)> {
    let mut out = std::collections::BTreeMap::new();
    let mut stack = vec![dir.to_owned()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).expect("list") {
            let p = e.expect("entry").path();
            if p.is_dir() {
                stack.push(p);
            } else {
                let mtime = std::fs::metadata(&p)
                    .and_then(|m| m.modified())
                    .expect("mtime");
                out.insert(p.clone(), (std::fs::read(&p).expect("read"), mtime));
            }
        }
    }
    out
}

#[test]
fn inspecting_commands_open_a_bench_sized_database_read_only_and_change_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    // Another container size than the CLI's default options, as `matrixkv bench` makes.
    let mut o = Options::new(dir.path());
    o.container_bytes = 8 << 20;
    o.write_buffer_bytes = 1 << 20;
    let db = Db::open(o).expect("open");
    for i in 0..2000u32 {
        db.put(format!("k{i:04}"), vec![b'v'; 500]).expect("put");
    }
    db.close().expect("close");
    let path = dir.path().to_string_lossy().into_owned();
    let before = snapshot_files(dir.path());
    let stats = matrixkv(&["stats", "--db", &path]);
    assert!(stats.status.success(), "{}", stderr(&stats));
    assert!(stdout(&stats).contains("fast tier"), "{}", stdout(&stats));
    let get = matrixkv(&["get", "--db", &path, "k1234"]);
    assert!(get.status.success(), "{}", stderr(&get));
    assert_eq!(stdout(&get).trim(), "v".repeat(500));
    let scan = matrixkv(&["scan", "--db", &path, "--limit", "3"]);
    assert!(scan.status.success(), "{}", stderr(&scan));
    assert_eq!(stdout(&scan).lines().count(), 3);
    for args in [
        vec!["verify", "--db", path.as_str()],
        vec!["property", "--db", path.as_str(), "matrixkv.levelstats"],
        vec!["keyspace", "list", "--db", path.as_str()],
    ] {
        let out = matrixkv(&args);
        assert!(out.status.success(), "{args:?}: {}", stderr(&out));
    }
    assert!(snapshot_files(dir.path()) == before, "a file changed");
}

/// The files of a database with tables, blob files, a WAL segment and container rows.
fn dump_fixture(dir: &std::path::Path) -> (std::path::PathBuf, std::path::PathBuf) {
    let mut o = Options::new(dir);
    o.container_bytes = 8 << 20;
    o.write_buffer_bytes = 256 << 10;
    o.min_blob_bytes = Some(100);
    let db = Db::open(o).expect("open");
    for i in 0..3000u32 {
        db.put(format!("k{i:05}"), vec![b'a' + (i % 26) as u8; 300])
            .expect("put");
    }
    db.compact_range(None, None).expect("compact");
    // Rows in the container: flushed after the compaction.
    for i in 0..300u32 {
        db.put(format!("late{i:03}"), b"in a row").expect("put");
    }
    db.flush().expect("flush");
    for i in 0..200u32 {
        db.put(format!("late{i:03}"), b"in the WAL").expect("put");
    }
    db.close().expect("close");
    (dir.join("slow"), dir.join("fast"))
}

fn first_file(dir: &std::path::Path, ext: &str) -> String {
    let mut names: Vec<_> = std::fs::read_dir(dir)
        .expect("list")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == ext))
        .collect();
    names.sort();
    names
        .last()
        .unwrap_or_else(|| panic!("no .{ext} file in {}", dir.display()))
        .to_string_lossy()
        .into_owned()
}

#[test]
fn dump_tools_print_each_file_as_text_and_json() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (slow, fast) = dump_fixture(dir.path());
    let db = dir.path().to_string_lossy().into_owned();
    let sst = first_file(&slow, "sst");
    let out = matrixkv(&["dump", "sst", &sst, "--entries"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stdout(&out).contains("entries"), "{}", stdout(&out));
    let json = matrixkv(&["dump", "sst", &sst, "--json", "--entries"]);
    let v: serde_json::Value = serde_json::from_slice(&json.stdout).expect("sst json");
    assert_eq!(
        v["versions"].as_array().map(Vec::len),
        v["entries"].as_u64().map(|n| n as usize)
    );
    let blob = first_file(&slow, "blob");
    let v: serde_json::Value =
        serde_json::from_slice(&matrixkv(&["dump", "blob", &blob, "--json"]).stdout)
            .expect("blob json");
    assert!(v["records"].as_u64().is_some_and(|n| n > 0), "{v}");
    let wal = first_file(&fast, "wal");
    let out = matrixkv(&["dump", "wal", &wal, "--entries"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stdout(&out).contains("late199"), "{}", stdout(&out));
    let v: serde_json::Value =
        serde_json::from_slice(&matrixkv(&["dump", "wal", &wal, "--json", "--entries"]).stdout)
            .expect("wal json");
    assert_eq!(v["records"].as_u64(), Some(200), "{v}");
    let m = matrixkv(&["dump", "manifest", "--db", &db, "--entries"]);
    assert!(m.status.success(), "{}", stderr(&m));
    assert!(stdout(&m).contains("fixed option container_bytes = 8388608"));
    let v: serde_json::Value =
        serde_json::from_slice(&matrixkv(&["dump", "manifest", "--db", &db, "--json"]).stdout)
            .expect("manifest json");
    assert!(v["edits"].as_array().is_some_and(|e| !e.is_empty()));
    let l = matrixkv(&["layout", "--db", &db]);
    assert!(l.status.success(), "{}", stderr(&l));
    assert!(stdout(&l).contains("L1"), "{}", stdout(&l));
    let v: serde_json::Value =
        serde_json::from_slice(&matrixkv(&["layout", "--db", &db, "--json"]).stdout)
            .expect("layout json");
    let row = v["container_rows"][0]["row"]
        .as_u64()
        .expect("a container row");
    let r = matrixkv(&[
        "dump",
        "rowtable",
        "--db",
        &db,
        "--row",
        &row.to_string(),
        "--entries",
    ]);
    assert!(r.status.success(), "{}", stderr(&r));
    assert!(stdout(&r).contains("late"), "{}", stdout(&r));
    assert!(stdout(&r).contains("(hint "), "{}", stdout(&r));
    let rj: serde_json::Value = serde_json::from_slice(
        &matrixkv(&[
            "dump",
            "rowtable",
            "--db",
            &db,
            "--row",
            &row.to_string(),
            "--json",
        ])
        .stdout,
    )
    .expect("rowtable json");
    assert_eq!(rj["row"].as_u64(), Some(row));
    let missing = matrixkv(&["dump", "rowtable", "--db", &db, "--row", "999999"]);
    assert!(!missing.status.success());
    assert!(
        stderr(&missing).contains("no row 999999"),
        "{}",
        stderr(&missing)
    );
    let v: serde_json::Value =
        serde_json::from_slice(&matrixkv(&["layout", "--db", &db, "--json"]).stdout)
            .expect("layout json");
    assert!(v["levels"].as_array().is_some_and(|l| !l.is_empty()));
}

#[test]
fn dump_tools_name_the_file_and_offset_of_damage() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (slow, fast) = dump_fixture(dir.path());
    let copy = |from: &str, to: &std::path::Path, keep: usize| {
        let mut b = std::fs::read(from).expect("read");
        b.truncate(keep.min(b.len()));
        std::fs::write(to, b).expect("write");
    };
    let sst = first_file(&slow, "sst");
    let bad_sst = dir.path().join("000777.sst");
    let len = std::fs::metadata(&sst).expect("len").len() as usize;
    copy(&sst, &bad_sst, len - 10);
    let blob = first_file(&slow, "blob");
    let bad_blob = dir.path().join("000778.blob");
    copy(&blob, &bad_blob, 500);
    let wal = first_file(&fast, "wal");
    let bad_wal = dir.path().join("000779.wal");
    let mut w = std::fs::read(&wal).expect("read");
    w[0] ^= 0xff; // the header's magic
    std::fs::write(&bad_wal, w).expect("write");
    for (kind, file) in [("sst", &bad_sst), ("blob", &bad_blob), ("wal", &bad_wal)] {
        let f = file.to_string_lossy().into_owned();
        let out = matrixkv(&["dump", kind, &f, "--entries"]);
        assert!(!out.status.success(), "{kind}: damaged input accepted");
        let err = stderr(&out);
        assert!(err.contains(&f), "{kind}: {err}");
        assert!(
            err.contains("offset") && !err.contains("panicked"),
            "{kind}: {err}"
        );
    }
    let wrong = matrixkv(&["dump", "wal", &sst]);
    assert!(!wrong.status.success());
    assert!(stderr(&wrong).contains("not named as a WAL segment"));
}

#[test]
fn inspecting_commands_work_while_another_process_holds_the_database_open() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().to_string_lossy().into_owned();
    // This process is the writer: it holds the lock and keeps writing.
    let db = Db::open(Options::new(dir.path())).expect("open");
    for i in 0..1000u32 {
        db.put(format!("k{i:04}"), b"before").expect("put");
    }
    let locked = matrixkv(&["put", "--db", &path, "x", "y"]);
    assert!(!locked.status.success(), "a second writer must be refused");
    let get = matrixkv(&["get", "--db", &path, "k0999"]);
    assert!(get.status.success(), "{}", stderr(&get));
    assert_eq!(stdout(&get).trim(), "before");
    db.put("k0999", b"after").expect("put");
    let get = matrixkv(&["get", "--db", &path, "k0999"]);
    assert_eq!(
        stdout(&get).trim(),
        "after",
        "a new read-only open sees the new write"
    );
    let layout = matrixkv(&["layout", "--db", &path]);
    assert!(layout.status.success(), "{}", stderr(&layout));
    db.close().expect("close");
}

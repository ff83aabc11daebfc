//! Blackbox crash test (docs/reliability.md T6, PR-sized): a child process writes in a loop and
//! reports every acknowledged write; the test kills it with SIGKILL at a random moment, reopens
//! the database, and checks that every acknowledged write is present with its value and that no
//! batch is half-applied. Repeated over many cycles on the same database, so kills land during
//! flushes, compactions, manifest writes and WAL rotations.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use matrixkv::{Db, Options};

fn value_for(n: u64, size: usize) -> Vec<u8> {
    let mut v = format!("v{n}:").into_bytes();
    while v.len() < size {
        v.push(b'a' + (n % 26) as u8);
    }
    v
}

/// The options the crash writer runs with (crates/matrixkv-cli/src/crash.rs). The checking
/// opens use the same ones: with the default blob threshold (1 KiB) their compactions would
/// relocate the writer's 200-byte separated values back inline, and whether any blob file
/// survives to the end would depend on the machine's speed.
/// Where the crash writer separates values into blob files.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Sep {
    /// Column compaction separates them.
    Off,
    /// The flush does (`Options::separate_at_flush`).
    AtFlush,
    /// The write path does (`Options::separate_at_write`, with `separate_at_flush`).
    AtWrite,
}

fn writer_options(db_path: &std::path::Path, design: &str, sep: Sep, load: Load) -> Options {
    let mut o = Options::new(db_path);
    o.design = design.parse().expect("a design");
    if let matrixkv::Design::NoveLsm(n) = &mut o.design {
        n.persistent_memtable_bytes = 1 << 20;
    }
    if let matrixkv::Design::SlmDb(d) = &mut o.design {
        // As the crash writer's (crates/matrixkv-cli/src/crash.rs, `slmdb_knobs`), for its
        // 64 KiB write buffer.
        *d = matrixkv::SlmDbOptions {
            persistent_memtable_bytes: 4 * (64 << 10),
            index_bytes: 64 << 20,
            leaf_scan_threshold: 3,
            candidate_trigger: 3,
            max_merge_tables: 4,
            ..matrixkv::SlmDbOptions::default()
        };
        o.l0_layout = matrixkv::L0Layout::Tables;
    }
    if let matrixkv::Design::LightKv(d) = &mut o.design {
        // As the crash writer's (crates/matrixkv-cli/src/crash.rs, `lightkv_knobs`), for its
        // 64 KiB write buffer.
        *d = matrixkv::LightKvOptions {
            write_buffer_bytes: 4 * (64 << 10),
            index_bytes: 64 << 20,
            compaction_size: 2,
            max_partitions: 8,
            partition_bytes: 2 << 20,
        };
        o.l0_layout = matrixkv::L0Layout::Tables;
    }
    o.separate_at_flush = sep != Sep::Off;
    o.separate_at_write = sep == Sep::AtWrite;
    // As the crash writer's (crates/matrixkv-cli/src/crash.rs, `container_bytes`): four
    // memtables or 4 MiB.
    o.write_buffer_bytes = load.write_buffer_bytes.unwrap_or(256 << 10);
    o.container_bytes = (4u64 << 20).max(4 * o.write_buffer_bytes as u64);
    o.min_blob_bytes = Some(100);
    o.blob_file_bytes = 64 << 10;
    o.blob_gc_ratio = 0.3;
    // Blob GC jobs run whenever garbage passes a tenth of the live records: kills land in
    // them too.
    o.blob_space_budget = 1.1;
    o.merge_operator = Some(std::sync::Arc::new(matrixkv::U64AddOperator));
    o.keyspace_options.insert(
        "mirror".into(),
        matrixkv::KeyspaceOptions {
            merge_operator: Some(std::sync::Arc::new(matrixkv::U64AddOperator)),
            ..matrixkv::KeyspaceOptions::default()
        },
    );
    o
}

/// Whether `d<n>` is present once every write up to `latest` is applied: the batch of write
/// `m` (m % 50 == 49) deletes `[d<m-49>, d<m-9>)` (crates/matrixkv-cli/src/crash.rs).
fn d_present(n: u64, latest: u64) -> bool {
    let m = n / 50 * 50 + 49;
    !(n % 50 < 40 && m <= latest)
}

fn cycles() -> u64 {
    std::env::var("MATRIXKV_KILL_CYCLES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(25)
}

#[test]
fn kill_minus_9_loses_no_acknowledged_write() {
    kill_loop("matrixkv", Sep::Off, cycles());
}

/// Values separated into blob files by the flush: kills land between a flush's blob files
/// and the manifest edit that names them.
#[test]
fn kill_minus_9_with_values_separated_at_flush_loses_no_acknowledged_write() {
    kill_loop("matrixkv", Sep::AtFlush, cycles().div_ceil(2));
}

/// Values separated into the memtable's blob file as they are written: the WAL logs
/// pointers, kills land between a value's append and its record, and in the flush that
/// installs the file.
#[test]
fn kill_minus_9_with_values_separated_at_write_loses_no_acknowledged_write() {
    kill_loop("matrixkv", Sep::AtWrite, cycles().div_ceil(2));
}

/// X-Engine's design: the memtables point into the WAL records, rebuilt at every reopen.
#[test]
fn kill_minus_9_in_the_xengine_design_loses_no_acknowledged_write() {
    kill_loop("xengine", Sep::Off, cycles().div_ceil(2));
}

/// NoveLSM's design: writes alternate between WAL-backed DRAM memtables and persistent
/// memtables written in place, reopened without replay.
#[test]
fn kill_minus_9_in_the_novelsm_design_loses_no_acknowledged_write() {
    kill_loop("novelsm", Sep::AtFlush, cycles().div_ceil(2));
}

/// SLM-DB's design: persistent memtables only, one level of tables on the slow tier and the
/// global index, committed before each manifest edit: kills land between the two.
#[test]
fn kill_minus_9_in_the_slmdb_design_loses_no_acknowledged_write() {
    kill_loop("slmdb", Sep::Off, cycles().div_ceil(2));
}

/// LightKV's design: persistent write buffers, partitions of tables on the slow tier and the
/// RH-tree index, changed in place before each manifest edit: kills land between the two and
/// the index is rebuilt from the tables at open.
#[test]
fn kill_minus_9_in_the_lightkv_design_loses_no_acknowledged_write() {
    kill_loop("lightkv", Sep::Off, cycles().div_ceil(2));
}

/// Opens `opts`, retrying for up to 30 s while the database reads as locked: the tests of this
/// file run at once and spawn processes, and a child forked by another test holds a copy of
/// this process's LOCK descriptor until it execs (on a loaded machine, a while after the
/// database that took the lock was closed).
fn open_retrying(opts: matrixkv::Options, what: &str) -> Db {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        match Db::open(opts.clone()) {
            Ok(db) => return db,
            Err(matrixkv::Error::Locked { .. }) if Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(50));
            }
            Err(e) => panic!("{what}: {e}"),
        }
    }
}

/// Kills the crash writer (`design`, values separated at flush or not) `cycles` times and
/// checks every acknowledged write.
fn kill_loop(design: &str, sep: Sep, cycles: u64) {
    kill_loop_with(design, sep, Load::SMALL, cycles)
}

/// What the crash writer writes: its memtable size and value size.
#[derive(Debug, Clone, Copy)]
struct Load {
    /// `--write-buffer-bytes`, or the design's default in this test.
    write_buffer_bytes: Option<usize>,
    /// `--value-size` of the `k` keys.
    value_size: usize,
}

impl Load {
    /// The crash writer's defaults: 200-byte values, small memtables.
    const SMALL: Load = Load {
        write_buffer_bytes: None,
        value_size: 200,
    };
}

/// Values separated at write into value files of a few MiB: the mapped file
/// (crates/matrixkv/src/tier/mapped.rs) unmaps the pages behind its writer every 2 MiB, so the
/// kills land before, during and after those unmappings, and the reopen reads values from the
/// released front of the file.
#[test]
fn kill_minus_9_with_values_separated_at_write_into_files_of_several_mib_loses_no_acknowledged_write()
 {
    let load = Load {
        write_buffer_bytes: Some(3 << 20),
        value_size: 2000,
    };
    kill_loop_with("matrixkv", Sep::AtWrite, load, cycles().div_ceil(2));
}

/// Kills the crash writer (`design`, values separated at flush or not, writing `load`)
/// `cycles` times and checks every acknowledged write.
fn kill_loop_with(design: &str, sep: Sep, load: Load, cycles: u64) {
    let dir = tempfile::tempdir().expect("tempdir");
    let db_path = dir.path().join("db");
    let mut next: u64 = 0;
    let mut acked_total: u64 = 0;
    let mut rng: u64 = 0x1234_5678;
    // Kills after which a persistent memtable (NoveLSM) held unflushed writes.
    let mut pmt_kills = 0;
    // Cycles whose writer wrote more than 2.5 MiB of values.
    let mut long_cycles = 0;
    for cycle in 0..cycles {
        rng = rng
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        // Killed after a random time, but never before it acknowledged `min_acks` writes: a
        // loaded machine that runs the writer slowly still gives each cycle the volume the
        // checks after the loop expect (every fourth cycle of a large-buffer run writes more
        // than the 2.5 MiB of values they count).
        let run_ms = 50 + (rng >> 33) % 400;
        let long_cycle_acks = (5u64 << 20) / 2 / load.value_size as u64 + 1;
        let min_acks = if load.write_buffer_bytes.is_some_and(|b| b > 1 << 20) && cycle % 4 == 1 {
            long_cycle_acks
        } else {
            10 + (rng >> 40) % 60
        };
        let mut child = Command::new(env!("CARGO_BIN_EXE_matrixkv"))
            .args(["crash-writer", "--db"])
            .arg(&db_path)
            .args(["--start", &next.to_string()])
            .args(["--design", design])
            .args((sep != Sep::Off).then_some("--separate-at-flush"))
            .args((sep == Sep::AtWrite).then_some("--separate-at-write"))
            // Every third cycle of the write path's separation logs its values in the WAL
            // instead (a threshold above the value size): the next open recovers pointers and
            // logged values of one history, and flushes separate the logged ones.
            .args(if sep == Sep::AtWrite && cycle % 3 == 2 {
                vec![
                    "--separate-at-write-min-bytes".to_string(),
                    (load.value_size + 1).to_string(),
                ]
            } else {
                vec![]
            })
            // NoveLSM: DRAM memtables small enough to fill, and be followed by a persistent
            // one, within a cycle.
            .args(match load.write_buffer_bytes {
                Some(b) => vec!["--write-buffer-bytes".to_string(), b.to_string()],
                None if design == "novelsm" || design == "slmdb" => {
                    vec!["--write-buffer-bytes".to_string(), "65536".to_string()]
                }
                None => vec![],
            })
            .args(["--value-size", &load.value_size.to_string()])
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn crash-writer");
        let stdout = child.stdout.take().expect("stdout");
        let (tx, rx) = mpsc::channel();
        let reader = std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        // Wait until the writer is ready, then for `run_ms` and `min_acks` acknowledged writes.
        let ready = rx
            .recv_timeout(Duration::from_secs(60))
            .expect("writer did not start");
        assert_eq!(ready, "ready");
        let mut last_acked: Option<u64> = None;
        let started = Instant::now();
        let mut idle_since = Instant::now();
        loop {
            let acked = last_acked.map_or(0, |n| (n + 1).saturating_sub(next));
            if acked >= min_acks && started.elapsed() >= Duration::from_millis(run_ms) {
                break;
            }
            match rx.recv_timeout(Duration::from_millis(5)) {
                Ok(line) => {
                    if let Some(n) = line.strip_prefix("ack ") {
                        last_acked = Some(n.parse().expect("ack number"));
                        idle_since = Instant::now();
                    }
                }
                Err(mpsc::RecvTimeoutError::Timeout) => assert!(
                    idle_since.elapsed() < Duration::from_secs(120),
                    "cycle {cycle}: the writer acknowledged nothing for 120 s"
                ),
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    panic!("cycle {cycle}: the writer exited before its kill")
                }
            }
        }
        child.kill().expect("kill -9");
        child.wait().expect("wait");
        pmt_kills += u32::from(
            std::fs::read_dir(db_path.join("fast"))
                .expect("list the fast tier")
                .any(|e| {
                    e.as_ref()
                        .is_ok_and(|e| e.file_name().to_string_lossy().ends_with(".pmt"))
                }),
        );
        reader.join().expect("reader");
        for line in rx.try_iter() {
            if let Some(n) = line.strip_prefix("ack ") {
                last_acked = Some(n.parse().expect("ack number"));
            }
        }
        // Reopen and verify every write acknowledged in this cycle (earlier cycles were
        // verified already and are re-checked by sampling).
        // The container size is fixed at creation: open with the crash writer's.
        let db = open_retrying(
            writer_options(&db_path, design, sep, load),
            "reopen after kill -9",
        );
        if let Some(last) = last_acked {
            for n in next..=last {
                let k = format!("k{n:012}");
                let got = db.get(k.as_bytes()).expect("get");
                assert_eq!(
                    got.as_deref(),
                    Some(value_for(n, load.value_size).as_slice()),
                    "cycle {cycle}: acknowledged write {n} is missing after kill -9"
                );
                if n.is_multiple_of(3) {
                    let b = db.get(format!("b{n:012}").as_bytes()).expect("get");
                    assert_eq!(
                        b.as_deref(),
                        Some(value_for(n, 8).as_slice()),
                        "cycle {cycle}: half batch {n}"
                    );
                }
            }
            acked_total += last + 1 - next;
            // One value file takes every value a writer writes until its memtable switches.
            if (last + 1 - next) * load.value_size as u64 > 5 << 20 >> 1 {
                long_cycles += 1;
            }
            next = last + 1;
        }
        // `latest` names the last acknowledged write or the one in flight: no write was lost
        // and no older one was replayed over a newer one.
        let latest: Option<u64> = db.get(b"latest").expect("get").map(|v| {
            String::from_utf8(v)
                .expect("utf-8")
                .parse()
                .expect("number")
        });
        let in_flight = next;
        assert!(
            latest.is_none_or(|l| l + 1 == in_flight || l == in_flight),
            "cycle {cycle}: latest is {latest:?}, but {} was acknowledged last",
            in_flight.saturating_sub(1)
        );
        assert!(
            latest.is_some() || in_flight == 0,
            "cycle {cycle}: latest lost"
        );
        // The other keys of every batch: `d<n>` (minus the applied range deletions) and the
        // mirror keyspace's `k<n>` and counter, all from the same atomic batches.
        let mirror = db.keyspace("mirror").ok();
        if let Some(l) = latest {
            assert!(
                mirror.is_some(),
                "cycle {cycle}: the mirror keyspace is gone"
            );
            let from = l.saturating_sub(300);
            for n in from..=l {
                let d = db.get(format!("d{n:012}").as_bytes()).expect("get d");
                assert_eq!(
                    d.is_some(),
                    d_present(n, l),
                    "cycle {cycle}: d{n} after range deletes up to write {l}"
                );
            }
            let m = mirror.as_ref().expect("mirror");
            for n in [0, l / 2, l] {
                assert_eq!(
                    m.get(format!("k{n:012}")).expect("get mirror"),
                    Some(n.to_string().into_bytes()),
                    "cycle {cycle}: mirror k{n}"
                );
            }
            let mcount = m
                .get(b"count")
                .expect("get mirror count")
                .map(|v| u64::from_le_bytes(v.as_slice().try_into().expect("8 bytes")));
            assert_eq!(mcount, Some(l + 1), "cycle {cycle}: the mirror counter");
        }
        drop(mirror);
        // Every applied batch merged 1 into `count`: exactly latest + 1 of them.
        let count = db
            .get(b"count")
            .expect("get count")
            .map(|v| u64::from_le_bytes(v.as_slice().try_into().expect("an 8-byte counter")));
        assert_eq!(
            count,
            latest.map(|l| l + 1),
            "cycle {cycle}: the merged counter disagrees with latest"
        );
        // The write in flight at the kill is all-or-nothing: a batch is never half-applied.
        let n = next;
        if n.is_multiple_of(3) {
            let k = db
                .get(format!("k{n:012}").as_bytes())
                .expect("get")
                .is_some();
            let b = db
                .get(format!("b{n:012}").as_bytes())
                .expect("get")
                .is_some();
            assert_eq!(k, b, "cycle {cycle}: batch {n} was half-applied");
        }
        for probe in [0, next / 2, next.saturating_sub(1)] {
            if probe < next {
                let got = db.get(format!("k{probe:012}").as_bytes()).expect("get");
                assert_eq!(
                    got.as_deref(),
                    Some(value_for(probe, load.value_size).as_slice()),
                    "old write {probe}"
                );
            }
        }
        // The next writer starts after the last write applied, the one in flight included:
        // writing it again would be harmless for its puts but would merge 1 into `count`
        // twice.
        if let Some(l) = latest {
            next = next.max(l + 1);
        }
        db.close().expect("close");
    }
    assert!(acked_total > 0, "the writer acknowledged nothing");
    if load.write_buffer_bytes.is_some_and(|b| b > 1 << 20) && sep == Sep::AtWrite {
        // The value files were unmapped behind their writers (every 2 MiB) before some kills.
        assert!(
            long_cycles > 0,
            "no cycle wrote more than 2.5 MiB of values"
        );
    }
    // The kills landed while the matrix container was switching roles and compacting columns:
    // data reached L1 through column compactions during the run.
    let db = open_retrying(writer_options(&db_path, design, sep, load), "final open");
    let s = db.stats();
    if design == "slmdb" || design == "lightkv" {
        // One level of tables, described by the index.
        assert!(
            s.levels[0].0 > 0 && s.levels.iter().skip(1).all(|(n, _)| *n == 0),
            "not a single level: {s}"
        );
        assert!(
            db_path.join("fast").join("INDEX").exists(),
            "no global index"
        );
    } else {
        assert!(
            s.levels.iter().skip(1).any(|(n, _)| *n > 0),
            "no column compaction happened: {s}"
        );
        // The writer separated its large values: the kills also landed in blob writes.
        assert!(s.blob_files > 0, "no blob file survived: {s}");
    }
    db.verify().expect("verify after the kills");
    db.close().expect("close");
    // The writer's memtables (256 KiB) switch often: WAL segments were recycled, so kills also
    // landed while regions were zeroed, renamed and taken over (obsolete segments are kept as
    // `.walfree` regions, Options::wal_recycle_segments).
    let free = std::fs::read_dir(db_path.join("fast"))
        .expect("list the fast tier")
        .filter(|e| {
            e.as_ref()
                .is_ok_and(|e| e.file_name().to_string_lossy().ends_with(".walfree"))
        })
        .count();
    assert!(free > 0, "no WAL segment was kept for recycling");
    assert_eq!(
        pmt_kills > 0,
        matches!(design, "novelsm" | "slmdb" | "lightkv"),
        "kills with a persistent memtable on the fast tier: {pmt_kills}"
    );
    eprintln!(
        "kill -9 test ({design}, values separated {sep:?}, {load:?}): {cycles} cycles, {acked_total} acknowledged writes verified, {pmt_kills} kills with a persistent memtable, {long_cycles} cycles past 2.5 MiB of values"
    );
}

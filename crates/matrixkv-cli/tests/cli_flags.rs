//! One CLI (issue 39, item 7): every subcommand takes `--fast-dir` and `--fast_dir` alike; a
//! database `matrixkv bench` kept opens in the inspecting commands with `--db` alone; `stats`
//! prints what the database holds; the demo prints a short summary, its detail behind
//! `--verbose`.

use std::path::Path;
use std::process::{Command, Output};

fn matrixkv_in(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_matrixkv"))
        .args(args)
        .current_dir(dir)
        .env("RUST_BACKTRACE", "0")
        .output()
        .expect("run matrixkv")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Runs `matrixkv bench` in `dir` keeping its database: `<dir>/bd/matrixkv` (slow tier) and
/// `<dir>/fd/matrixkv` (fast tier), 3000 values of 3000 bytes (blob files), flags spelled both
/// ways.
fn bench_database(dir: &Path) {
    let out = matrixkv_in(
        dir,
        &[
            "bench",
            "--benchmarks=fillrandom",
            "--num=3000",
            "--value-size=3000",
            "--db=bd",
            "--fast-dir",
            "fd",
            "--use_existing_db",
            "--no-results-dir",
            "--write_buffer_size=1048576",
            "--container-bytes=8388608",
            "--max_bytes_for_level_base=8388608",
            "--target-file-size-base=1048576",
            "--progress=never",
        ],
    );
    assert!(out.status.success(), "bench: {}", stderr(&out));
    assert!(dir.join("bd/matrixkv/CURRENT").is_file());
    assert!(dir.join("fd/matrixkv").is_dir());
}

#[test]
fn a_bench_database_opens_with_db_alone_in_the_inspecting_commands() {
    let t = tempfile::tempdir().expect("tempdir");
    let dir = t.path();
    bench_database(dir);
    let stats = matrixkv_in(dir, &["stats", "--db", "bd/matrixkv"]);
    assert!(stats.status.success(), "{}", stderr(&stats));
    let text = stdout(&stats);
    for part in [
        "slow tier bd/matrixkv",
        "fast tier",
        "fd/matrixkv",
        "keys: about",
        "matrix container:",
        "L0:",
        "blob files:",
        "garbage",
    ] {
        assert!(text.contains(part), "{part:?} missing from:\n{text}");
    }
    // The content, not this read-only open's counters (all zero).
    assert!(!text.contains("flushes: 0"), "{text}");
    assert!(!text.contains("keys: about 0 "), "{text}");
    let with_counters = matrixkv_in(dir, &["stats", "--db", "bd/matrixkv", "--counters"]);
    assert!(stdout(&with_counters).contains("counters of this open"));

    let scan = matrixkv_in(dir, &["scan", "--db", "bd/matrixkv", "--limit", "1"]);
    assert!(scan.status.success(), "{}", stderr(&scan));
    let first = stdout(&scan);
    let (key, _) = first.split_once(" => ").expect("a key");
    let get = matrixkv_in(dir, &["get", "--db", "bd/matrixkv", key]);
    assert!(get.status.success(), "{}", stderr(&get));
    assert!(!stdout(&get).contains("(not found)"), "{key}");
    for args in [
        vec!["layout", "--db", "bd/matrixkv"],
        vec!["dump", "manifest", "--db", "bd/matrixkv"],
        vec!["dump", "rowtable", "--db", "bd/matrixkv", "--row", "1"],
        vec![
            "property",
            "--db",
            "bd/matrixkv",
            "matrixkv.estimate-num-keys",
        ],
        vec!["verify", "--db", "bd/matrixkv"],
        // Underscores outside bench, and the tiers given explicitly.
        vec![
            "get",
            "--db=bd/matrixkv",
            "--fast_dir",
            "fd/matrixkv",
            "--slow_dir=bd/matrixkv",
            key,
        ],
    ] {
        let out = matrixkv_in(dir, &args);
        assert!(out.status.success(), "{args:?}: {}", stderr(&out));
    }
}

#[test]
fn a_missing_database_or_fast_tier_is_named_with_what_to_give() {
    let t = tempfile::tempdir().expect("tempdir");
    let dir = t.path();
    bench_database(dir);
    // The base directory of bench's --db: the databases below it are named.
    let out = matrixkv_in(dir, &["stats", "--db", "bd"]);
    assert!(!out.status.success());
    let e = stderr(&out);
    assert!(
        e.contains("no matrixkv database at bd") && e.contains("--db bd/matrixkv"),
        "{e}"
    );
    // Nothing there at all.
    let out = matrixkv_in(dir, &["get", "--db", "nowhere", "k"]);
    let e = stderr(&out);
    assert!(
        e.contains("nowhere/slow/CURRENT") && e.contains("--use_existing_db"),
        "{e}"
    );
    // The fast tier is gone (a reboot under /dev/shm).
    std::fs::remove_dir_all(dir.join("fd/matrixkv")).expect("remove the fast tier");
    let out = matrixkv_in(dir, &["stats", "--db", "bd/matrixkv"]);
    assert!(!out.status.success());
    let e = stderr(&out);
    assert!(
        e.contains("fd/matrixkv") && e.contains("does not exist") && e.contains("FAST_DIR"),
        "{e}"
    );
}

#[test]
fn help_names_both_spellings_and_unknown_flags_are_still_refused() {
    let t = tempfile::tempdir().expect("tempdir");
    for args in [vec!["--help"], vec!["bench", "--help"]] {
        let out = matrixkv_in(t.path(), &args);
        assert!(
            stdout(&out).contains("--fast-dir and --fast_dir"),
            "{args:?}"
        );
    }
    // bench's own spelling in its help, the others' in theirs.
    assert!(stdout(&matrixkv_in(t.path(), &["bench", "--help"])).contains("--fast_dir <"));
    assert!(stdout(&matrixkv_in(t.path(), &["stats", "--help"])).contains("--fast-dir <"));
    let out = matrixkv_in(t.path(), &["stats", "--db", "x", "--no_such_flag"]);
    assert!(!out.status.success());
    assert!(stderr(&out).contains("--no_such_flag"), "{}", stderr(&out));
}

#[test]
fn the_demo_prints_a_short_summary_and_its_detail_with_verbose() {
    let t = tempfile::tempdir().expect("tempdir");
    let out = matrixkv_in(t.path(), &["demo", "--num", "5000"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.lines().count() <= 12, "{text}");
    for part in ["writes:", "reads:", "fast tier", "slow tier", "--verbose"] {
        assert!(text.contains(part), "{part:?} missing from:\n{text}");
    }
    // No engine options or db_bench lines.
    assert!(
        !text.contains("write_buffer_bytes") && !text.contains("micros/op"),
        "{text}"
    );
    let verbose = matrixkv_in(t.path(), &["demo", "--num", "5000", "--verbose"]);
    assert!(verbose.status.success(), "{}", stderr(&verbose));
    let text = stdout(&verbose);
    assert!(
        text.contains("write_buffer_bytes") && text.contains("micros/op"),
        "{text}"
    );
    assert!(text.contains("writes:"), "{text}");
    // The demo deleted its database and its folders.
    let left: Vec<_> = std::fs::read_dir(t.path()).expect("list").collect();
    assert!(left.is_empty(), "{left:?}");
}

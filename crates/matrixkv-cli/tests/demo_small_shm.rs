//! The demo where newcomers run it (issue 39, item 8): in a container whose /dev/shm is
//! Docker's default 64 MiB, the demo sizes itself to the room there and says so in one line;
//! with less room than its smallest size it puts the fast tier in a local folder and says so.
//! Each run gets its own small tmpfs over /dev/shm in a private mount namespace
//! (`unshare -m`), so the machine's /dev/shm is untouched; where the machine does not allow
//! that (no root, no `unshare`), the tests print why and pass.

use std::path::Path;
use std::process::{Command, Output};

/// Runs the demo with a `mib` MiB tmpfs as /dev/shm, in `dir`; `None` (and the reason printed)
/// when no private mount namespace with a tmpfs can be made here.
fn demo_with_shm(dir: &Path, mib: u32, test: &str) -> Option<Output> {
    let probe = Command::new("unshare")
        .args(["-m", "sh", "-c"])
        .arg(format!("mount -t tmpfs -o size={mib}m tmpfs /dev/shm"))
        .output();
    match probe {
        Ok(o) if o.status.success() => {}
        Ok(o) => {
            eprintln!(
                "SKIP {test}: cannot mount a tmpfs in a private mount namespace here ({})",
                String::from_utf8_lossy(&o.stderr).trim()
            );
            return None;
        }
        Err(e) => {
            eprintln!("SKIP {test}: cannot run unshare ({e})");
            return None;
        }
    }
    let out = Command::new("unshare")
        .args(["-m", "sh", "-c"])
        .arg(format!(
            "mount -t tmpfs -o size={mib}m tmpfs /dev/shm && exec \"$0\" demo --num 20000"
        ))
        .arg(env!("CARGO_BIN_EXE_matrixkv"))
        .current_dir(dir)
        .env("RUST_BACKTRACE", "0")
        .output()
        .expect("run the demo");
    Some(out)
}

fn check_summary(out: &Output) -> String {
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "the demo failed:\n{text}\n{err}");
    for part in ["writes:", "reads:", "deleted"] {
        assert!(text.contains(part), "{part:?} missing from:\n{text}");
    }
    // Never a Debug dump of an internal struct.
    assert!(
        !text.contains(" { ") && !err.contains(" { "),
        "{text}\n{err}"
    );
    text
}

#[test]
fn in_a_64_mib_dev_shm_the_demo_runs_smaller_and_says_so() {
    let t = tempfile::tempdir().expect("tempdir");
    let Some(out) = demo_with_shm(t.path(), 64, "in_a_64_mib_dev_shm_...") else {
        return;
    };
    let text = check_summary(&out);
    let first = text.lines().next().unwrap_or_default();
    assert!(
        first.starts_with("/dev/shm has 64 MiB free") && first.contains("MiB matrix container"),
        "{text}"
    );
    assert!(text.contains("fast tier /dev/shm/"), "{text}");
    assert!(
        std::fs::read_dir(t.path()).expect("list").next().is_none(),
        "the demo left files behind"
    );
}

#[test]
fn in_a_16_mib_dev_shm_the_demo_puts_the_fast_tier_on_the_disk_and_says_so() {
    let t = tempfile::tempdir().expect("tempdir");
    let Some(out) = demo_with_shm(t.path(), 16, "in_a_16_mib_dev_shm_...") else {
        return;
    };
    let text = check_summary(&out);
    let first = text.lines().next().unwrap_or_default();
    assert!(
        first.starts_with("/dev/shm has only 16 MiB free") && first.contains("on this disk"),
        "{text}"
    );
    assert!(text.contains("fast tier bench-data/demo-fast/"), "{text}");
    assert!(
        std::fs::read_dir(t.path()).expect("list").next().is_none(),
        "the demo left files behind"
    );
}

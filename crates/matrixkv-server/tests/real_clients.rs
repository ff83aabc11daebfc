//! Clients we did not write: `redis-cli` (a scripted session), `redis-benchmark` (a smoke load)
//! and the Python `redis` package (pytest). Each test prints why it skips when the client is
//! not installed (`scripts/install-test-deps` installs them).

mod common;

use std::io::Write;
use std::process::{Command, Stdio};

use common::{R, TestServer};

fn have(cmd: &str, args: &[&str]) -> bool {
    Command::new(cmd)
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

#[test]
fn redis_cli_runs_a_scripted_session() {
    if !have("redis-cli", &["--version"]) {
        eprintln!("skipped: redis-cli not installed (scripts/install-test-deps)");
        return;
    }
    let s = TestServer::start();
    let script = "SET greeting hello\nGET greeting\nAPPEND greeting !\nINCR visits\nINCRBY visits 10\n\
                  HSET user:1 name ada lang rust\nHGET user:1 name\nHLEN user:1\nTYPE user:1\n\
                  EXPIRE greeting 100\nTTL greeting\nSELECT 2\nSET k v\nDBSIZE\nSELECT 0\nDBSIZE\n\
                  MULTI\nSET a 1\nINCR a\nEXEC\nGET a\nDEL greeting\nEXISTS greeting\nPING\n";
    let mut child = Command::new("redis-cli")
        .args(["-p", &s.addr.port().to_string()])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("redis-cli");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(script.as_bytes())
        .expect("script");
    let out = child.wait_with_output().expect("redis-cli output");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(
        lines,
        [
            "OK", "hello", "6", "1", "11", "2", "ada", "2", "hash", "1", "100", "OK", "OK", "1",
            // EXEC's array prints one element a line: SET's OK, INCR's 2.
            "OK", "3", "OK", "QUEUED", "QUEUED", "OK", "2", "2", "1", "0", "PONG"
        ],
        "{text}"
    );
}

#[test]
fn redis_benchmark_runs_a_smoke_load() {
    if !have("redis-benchmark", &["--version"]) {
        eprintln!("skipped: redis-benchmark not installed (scripts/install-test-deps)");
        return;
    }
    let s = TestServer::start();
    let out = Command::new("redis-benchmark")
        .args([
            "-p",
            &s.addr.port().to_string(),
            "-t",
            "set,get,incr,hset",
            "-n",
            "3000",
            "-c",
            "8",
            "-P",
            "16",
            "-d",
            "512",
            "-r",
            "1000",
            "-q",
        ])
        .output()
        .expect("redis-benchmark");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for t in ["SET", "GET", "INCR", "HSET"] {
        assert!(text.contains(&format!("{t}:")), "no {t} line in: {text}");
    }
    let mut c = s.client();
    assert!(matches!(c.cmd(&["DBSIZE"]), R::I(n) if n > 100));
}

#[test]
fn the_python_redis_package_passes_its_pytest_suite() {
    if !have("python3", &["-c", "import redis, pytest"]) {
        eprintln!(
            "skipped: python3 with the redis and pytest packages not installed (scripts/install-test-deps)"
        );
        return;
    }
    let s = TestServer::start();
    let tests = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/python");
    let out = Command::new("python3")
        .args(["-m", "pytest", "-q", "-p", "no:cacheprovider"])
        .arg(&tests)
        .env("MATRIXKV_SERVER_PORT", s.addr.port().to_string())
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .output()
        .expect("pytest");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "pytest failed:\n{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.contains("6 passed"), "{text}");
}

//! Measurements, not checks: what hostile clients cost the server binary (its RSS before,
//! at the peak and after each attack, and the time to the error). Run by hand, alone:
//!
//! ```sh
//! cargo test --release -p matrixkv-server --test hostile -- --ignored --nocapture
//! MATRIXKV_SERVER_BIN=/path/to/other/matrixkv-server cargo test ...   # another build
//! ```
//!
//! `HOSTILE_REQUEST_BYTES` sets the size of the request sent in tiny pieces (default 8 MiB),
//! `HOSTILE_ATTACKS` which attacks run (default `123`), `HOSTILE_QUERY_LIMIT` the
//! `client-query-buffer-limit` of the third (default `256mb`).

mod common;

use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use common::{Client, R};

fn spawn(bin: &str, db: &std::path::Path) -> (Child, SocketAddr) {
    let mut child = Command::new(bin)
        .args(["--port", "0", "--dir"])
        .arg(db)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn the server");
    let mut line = String::new();
    BufReader::new(child.stdout.take().expect("stdout"))
        .read_line(&mut line)
        .expect("the ready line");
    let addr = line
        .trim()
        .rsplit(' ')
        .next()
        .and_then(|a| a.parse().ok())
        .expect("an address");
    (child, addr)
}

/// The resident set of process `pid`, in MiB.
fn rss_mib(pid: u32) -> f64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse::<f64>().ok())
        .map_or(0.0, |kib| kib / 1024.0)
}

/// Samples the RSS of `pid` every 5 ms while `attack` runs; prints before, peak, after.
fn measure(name: &str, pid: u32, attack: impl FnOnce() -> String) {
    let before = rss_mib(pid);
    let stop = Arc::new(AtomicBool::new(false));
    let peak = Arc::new(AtomicU64::new(0));
    let sampler = {
        let (stop, peak) = (Arc::clone(&stop), Arc::clone(&peak));
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                peak.fetch_max((rss_mib(pid) * 1024.0) as u64, Ordering::Relaxed);
                std::thread::sleep(Duration::from_millis(5));
            }
        })
    };
    let start = Instant::now();
    let outcome = attack();
    let took = start.elapsed();
    std::thread::sleep(Duration::from_millis(500));
    stop.store(true, Ordering::Relaxed);
    sampler.join().expect("sampler");
    println!(
        "{name}: {outcome} after {:.2} s; server RSS before {before:.1} MiB, peak {:.1} MiB, \
         0.5 s after {:.1} MiB",
        took.as_secs_f64(),
        peak.load(Ordering::Relaxed) as f64 / 1024.0,
        rss_mib(pid)
    );
}

/// Reads one reply line (and a bulk's body) or says how the connection ended.
fn outcome(s: &mut TcpStream) -> String {
    let mut r = BufReader::new(s);
    let mut line = String::new();
    match r.read_line(&mut line) {
        Ok(0) => "closed".into(),
        Ok(_) => format!("reply {:?}", line.trim_end()),
        Err(e) => format!("no reply ({e})"),
    }
}

#[test]
#[ignore = "a measurement, run by hand"]
fn hostile_clients_rss_and_time_to_error() {
    let bin = std::env::var("MATRIXKV_SERVER_BIN")
        .unwrap_or_else(|_| env!("CARGO_BIN_EXE_matrixkv-server").to_string());
    let request_bytes: usize = std::env::var("HOSTILE_REQUEST_BYTES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(8 << 20);
    let dir = tempfile::tempdir().expect("tempdir");
    let (mut child, addr) = spawn(&bin, &dir.path().join("db"));
    let pid = child.id();
    println!("server {bin}");
    let attacks = std::env::var("HOSTILE_ATTACKS").unwrap_or_else(|_| "123".into());

    // 1. A large request of many small arguments sent in pieces of 1 to 13 bytes.
    let run = |n: char| attacks.contains(n);
    if run('1') {
        measure(
            &format!("{} MiB HSET in 1-13 byte writes", request_bytes >> 20),
            pid,
            || {
                let mut args: Vec<Vec<u8>> = vec![b"HSET".to_vec(), b"h".to_vec()];
                let mut size = 0;
                let mut i = 0;
                while size < request_bytes {
                    let f = format!("f{i}").into_bytes();
                    size += f.len() + 16;
                    args.extend([f, b"v".to_vec()]);
                    i += 1;
                }
                let a: Vec<&[u8]> = args.iter().map(Vec::as_slice).collect();
                let req = Client::encode(&a);
                let mut s = TcpStream::connect(addr).expect("connect");
                s.set_nodelay(true).expect("nodelay");
                s.set_read_timeout(Some(Duration::from_secs(120)))
                    .expect("timeout");
                let (mut at, mut k) = (0, 0);
                while at < req.len() {
                    let n = (k % 13 + 1).min(req.len() - at);
                    if s.write_all(&req[at..at + n]).is_err() {
                        return "write failed".into();
                    }
                    at += n;
                    k += 1;
                }
                let sent = Instant::now();
                let o = outcome(&mut s);
                format!(
                    "{} bytes in {k} writes, {o} {:.2} s after the last byte",
                    req.len(),
                    sent.elapsed().as_secs_f64()
                )
            },
        );
    }

    // 2. A client that sends GETs of a 25 KiB value and never reads.
    if run('2') {
        assert_eq!(
            Client::connect(addr).cmd(&["SET", "k", &"x".repeat(25 << 10)]),
            R::S("OK".into())
        );
        measure("never-reading client sending GETs of 25 KiB", pid, || {
            let mut s = TcpStream::connect(addr).expect("connect");
            s.set_write_timeout(Some(Duration::from_secs(120)))
                .expect("timeout");
            let gets = Client::encode(&[b"GET", b"k"]).repeat(1000);
            let mut sent = 0u64;
            while sent < 10_000_000 {
                if let Err(e) = s.write_all(&gets) {
                    return format!("closed ({e}) after {sent} GETs sent");
                }
                sent += 1000;
            }
            format!("still open after {sent} GETs")
        });
    }

    // 3. Arguments of 64 MiB in one request, up to 320 MiB, under a 256 MiB query limit.
    if run('3') {
        let mut c = Client::connect(addr);
        let q = std::env::var("HOSTILE_QUERY_LIMIT").unwrap_or_else(|_| "256mb".into());
        let limit = c.cmd(&["CONFIG", "SET", "client-query-buffer-limit", &q]);
        println!("CONFIG SET client-query-buffer-limit {q}: {limit:?}");
        measure(
            "one request of 64 MiB arguments, 320 MiB in all",
            pid,
            || {
                let mut s = TcpStream::connect(addr).expect("connect");
                s.set_read_timeout(Some(Duration::from_secs(120)))
                    .expect("timeout");
                let part = vec![b'x'; 64 << 20];
                let mut req = b"*7\r\n$4\r\nMSET\r\n".to_vec();
                let mut written = 0usize;
                let mut send = |bytes: &[u8], s: &mut TcpStream| {
                    written += bytes.len();
                    s.write_all(bytes).is_ok()
                };
                let mut ok = send(&std::mem::take(&mut req), &mut s);
                for _ in 0..5 {
                    ok = ok
                        && send(format!("${}\r\n", part.len()).as_bytes(), &mut s)
                        && send(&part, &mut s)
                        && send(b"\r\n", &mut s);
                }
                ok = ok && send(b"$1\r\nv\r\n", &mut s);
                let o = outcome(&mut s);
                format!("{written} bytes written (all: {ok}), {o}")
            },
        );
    }

    child.kill().expect("kill");
    child.wait().expect("wait");
}

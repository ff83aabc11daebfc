//! The connection's I/O under load and against clients that misbehave (issue 38): requests
//! cut into tiny writes, deep pipelines and huge replies for clients that read, and limits
//! that close clients that do not (query buffer, output buffer, write and idle timeouts),
//! with settings changed by `CONFIG SET` reaching connections already open.

mod common;

use std::io::Write;
use std::net::TcpStream;
use std::time::{Duration, Instant};

use common::{Client, R, TestServer};

/// Connections open, counted by a connection of its own (which it leaves out).
fn connections(s: &TestServer) -> usize {
    match s.client().cmd(&["CLIENT", "LIST"]) {
        R::B(list) => String::from_utf8_lossy(&list).lines().count() - 1,
        other => panic!("CLIENT LIST: {other:?}"),
    }
}

/// Waits up to `secs` seconds for `done`.
fn eventually(secs: u64, mut done: impl FnMut() -> bool) -> bool {
    let end = Instant::now() + Duration::from_secs(secs);
    while Instant::now() < end {
        if done() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    done()
}

fn set_config(s: &TestServer, name: &str, value: &str) {
    assert_eq!(
        s.client().cmd(&["CONFIG", "SET", name, value]),
        R::S("OK".into()),
        "CONFIG SET {name} {value}"
    );
}

#[test]
fn a_request_cut_into_tiny_writes_is_read_whole() {
    let s = TestServer::start();
    let mut c = s.client();
    let fields: Vec<String> = (0..20_000).map(|i| format!("f{i}")).collect();
    let mut args: Vec<&[u8]> = vec![b"HSET", b"h"];
    for f in &fields {
        args.extend([f.as_bytes(), b"v"]);
    }
    let req = Client::encode(&args);
    let mut w = c.writer();
    w.set_nodelay(true).unwrap();
    let (mut at, mut k) = (0, 0);
    while at < req.len() {
        let n = (k % 13 + 1).min(req.len() - at);
        w.write_all(&req[at..at + n]).unwrap();
        at += n;
        k += 1;
    }
    assert_eq!(c.read(), Some(R::I(20_000)));
    assert_eq!(c.cmd(&["HLEN", "h"]), R::I(20_000));
}

#[test]
fn a_reply_over_64_mib_reaches_a_client_that_reads() {
    // The engine stores values of up to 64 MiB: two of 36 MiB make a 72 MiB MGET reply.
    let s = TestServer::start();
    let mut c = s.client();
    let value = vec![b'v'; 36 << 20];
    for k in [&b"a"[..], b"b"] {
        c.send_raw(&Client::encode(&[b"SET", k, &value]));
        assert_eq!(c.read(), Some(R::S("OK".into())));
    }
    let both = R::A(vec![R::B(value.clone()), R::B(value.clone())]);
    assert!(c.cmd(&["MGET", "a", "b"]) == both, "MGET a b");
    // Even with a hard limit far below the replies' size, pipelined.
    set_config(&s, "client-output-buffer-limit", "normal 1mb 0 0");
    let mget = Client::encode(&[b"MGET", b"a", b"b"]);
    let get = Client::encode(&[b"GET", b"a"]);
    c.send_raw(&[mget.clone(), get.clone(), mget, get].concat());
    for _ in 0..2 {
        assert!(c.read() == Some(both.clone()), "MGET a b");
        assert!(c.read() == Some(R::B(value.clone())), "GET a");
    }
    assert_eq!(c.cmd(&["PING"]), R::S("PONG".into()));
}

#[test]
fn a_deep_pipeline_of_gets_is_answered_whole() {
    let s = TestServer::start();
    let mut c = s.client();
    let value = "x".repeat(25 << 10);
    assert_eq!(c.cmd(&["SET", "k", &value]), R::S("OK".into()));
    // 5,000 replies, 125 MiB, asked for in one write.
    let n = 5000;
    let gets = Client::encode(&[b"GET", b"k"]).repeat(n);
    let mut w = c.writer();
    let sender = std::thread::spawn(move || w.write_all(&gets).unwrap());
    for i in 0..n {
        match c.read() {
            Some(R::B(v)) if v.len() == value.len() => {}
            Some(other) => panic!("reply {i}: {other:?}"),
            None => panic!("closed after {i} of {n} replies"),
        }
    }
    sender.join().unwrap();
    assert_eq!(c.cmd(&["PING"]), R::S("PONG".into()));
}

#[test]
fn a_client_that_never_reads_is_closed_once_its_unsent_replies_pass_the_hard_limit() {
    let s = TestServer::start();
    set_config(&s, "client-output-buffer-limit", "normal 4mb 0 0");
    assert_eq!(
        s.client().cmd(&["SET", "k", &"x".repeat(25 << 10)]),
        R::S("OK".into())
    );
    let mut hostile = TcpStream::connect(s.addr).unwrap();
    hostile
        .set_write_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let gets = Client::encode(&[b"GET", b"k"]).repeat(1000);
    // 2M GETs would be 50 GB of replies: the server must close long before.
    let mut sent = 0;
    while sent < 2_000_000 && hostile.write_all(&gets).is_ok() {
        sent += 1000;
    }
    assert!(
        sent < 2_000_000,
        "the server read 2M GETs from a client that never reads"
    );
    assert!(
        eventually(20, || connections(&s) == 0),
        "the connection is still open"
    );
    assert_eq!(s.client().cmd(&["PING"]), R::S("PONG".into()));
}

/// Asks for 40 MiB of replies and never reads them; the socket, to keep it open.
fn stall_on_big_replies(s: &TestServer) -> TcpStream {
    assert_eq!(
        s.client().cmd(&["SET", "big", &"x".repeat(4 << 20)]),
        R::S("OK".into())
    );
    let mut stalled = TcpStream::connect(s.addr).expect("connect");
    stalled
        .write_all(&Client::encode(&[b"GET", b"big"]).repeat(10))
        .expect("write");
    stalled
}

#[test]
fn a_client_that_takes_no_replies_is_closed_after_the_write_timeout() {
    let s = TestServer::start();
    set_config(&s, "write-timeout", "1");
    let _stalled = stall_on_big_replies(&s);
    assert!(
        eventually(20, || connections(&s) == 0),
        "a client that reads nothing is still connected"
    );
}

#[test]
fn the_idle_timeout_covers_a_client_stalled_in_a_write() {
    let s = TestServer::start_with(|c| c.timeout = Duration::from_secs(1));
    let _stalled = stall_on_big_replies(&s);
    assert!(
        eventually(20, || connections(&s) == 0),
        "a client stalled in a write outlived the idle timeout"
    );
}

#[test]
fn config_set_timeout_reaches_open_connections() {
    let s = TestServer::start();
    let mut idle = s.client();
    assert_eq!(idle.cmd(&["PING"]), R::S("PONG".into()));
    set_config(&s, "timeout", "1");
    assert!(
        eventually(20, || connections(&s) == 0),
        "a connection opened before CONFIG SET timeout stayed open"
    );
    assert_eq!(idle.read(), None);
}

#[test]
fn a_request_over_the_query_buffer_limit_gets_an_error_and_a_closed_connection() {
    let s = TestServer::start();
    set_config(&s, "client-query-buffer-limit", "1mb");
    let mut c = s.client();
    let part = vec![b'x'; 600 << 10];
    c.send_raw(&Client::encode(&[b"MSET", b"a", &part, b"b", &part]));
    match c.read() {
        Some(R::E(e)) => assert!(e.contains("query buffer limit"), "{e}"),
        other => panic!("expected an error, got {other:?}"),
    }
    assert_eq!(c.read(), None);
    // A request under the limit passes.
    let mut c = s.client();
    c.send_raw(&Client::encode(&[b"SET", b"a", &part]));
    assert_eq!(c.read(), Some(R::S("OK".into())));
}

#[test]
fn a_client_over_the_soft_limit_for_its_seconds_is_closed() {
    let s = TestServer::start();
    set_config(&s, "client-output-buffer-limit", "normal 0 64kb 1");
    assert_eq!(
        s.client().cmd(&["SET", "k", &"x".repeat(25 << 10)]),
        R::S("OK".into())
    );
    // 50 MB of replies asked for, none read; no hard limit.
    let mut hostile = TcpStream::connect(s.addr).unwrap();
    let _ = hostile.write_all(&Client::encode(&[b"GET", b"k"]).repeat(2000));
    assert!(
        eventually(20, || connections(&s) == 0),
        "a client over the soft limit for longer than its seconds is still connected"
    );
}

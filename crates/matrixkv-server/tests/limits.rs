//! Hostile and careless clients: malformed or oversized requests get a protocol error and a
//! closed connection, unauthenticated clients get small limits, idle and surplus connections
//! are closed; the server keeps serving the others.

mod common;

use std::io::Read;
use std::time::Duration;

use common::{Client, R, TestServer};

fn closed(c: &mut Client) -> bool {
    c.read().is_none()
}

#[test]
fn garbage_and_oversized_requests_get_a_protocol_error_and_a_closed_connection() {
    let s = TestServer::start_with(|c| c.max_bulk = 1 << 20);
    for bad in [
        &b"*1\r\n$99999999999\r\n"[..],
        b"*2\r\n$3\r\nGET\r\n:1\r\n",
        b"*abc\r\n",
        b"*1\r\n$2\r\nabcd\r\n",
        b"*1\r\n$2000000\r\n",
    ] {
        let mut c = s.client();
        c.send_raw(bad);
        match c.read() {
            Some(R::E(e)) => assert!(e.starts_with("ERR Protocol error"), "{e}"),
            other => panic!("{bad:?}: expected a protocol error, got {other:?}"),
        }
        assert!(closed(&mut c), "{bad:?}: connection left open");
    }
    let mut c = s.client();
    c.send_raw(&vec![b'x'; 70 << 10]);
    assert!(matches!(c.read(), Some(R::E(e)) if e.contains("too big inline request")));
    // The server still serves.
    assert_eq!(s.client().cmd(&["PING"]), R::S("PONG".into()));
}

#[test]
fn before_auth_only_small_requests_are_read() {
    let s = TestServer::start_with(|c| c.requirepass = Some("secret".into()));
    let mut c = s.client();
    assert_eq!(
        c.cmd(&["GET", "k"]),
        R::E("NOAUTH Authentication required.".into())
    );
    assert_eq!(
        c.cmd(&["AUTH", "wrong"]),
        R::E("WRONGPASS invalid username-password pair or user is disabled.".into())
    );
    // 100 KiB before AUTH: refused without being buffered (CVE-2021-32675).
    let big = "v".repeat(100 << 10);
    let a: Vec<&[u8]> = vec![b"SET", b"k", big.as_bytes()];
    c.send_raw(&Client::encode(&a));
    assert!(matches!(c.read(), Some(R::E(e)) if e.starts_with("ERR Protocol error")));
    assert!(closed(&mut c));
    let mut c = s.client();
    assert_eq!(c.cmd(&["AUTH", "secret"]), R::S("OK".into()));
    assert_eq!(c.cmd(&["SET", "k", &big]), R::S("OK".into()));
    let mut h = s.client();
    let (R::M(_) | R::A(_)) = h.cmd(&["HELLO", "3", "AUTH", "default", "secret"]) else {
        panic!("HELLO with AUTH authenticates")
    };
    assert_eq!(h.cmd(&["STRLEN", "k"]), R::I(100 << 10));
}

#[test]
fn idle_clients_are_closed_after_the_timeout() {
    let s = TestServer::start_with(|c| c.timeout = Duration::from_secs(1));
    let mut c = s.client();
    assert_eq!(c.cmd(&["PING"]), R::S("PONG".into()));
    std::thread::sleep(Duration::from_millis(1500));
    assert!(closed(&mut c), "an idle connection outlived the timeout");
}

#[test]
fn clients_beyond_maxclients_are_refused() {
    let s = TestServer::start_with(|c| c.maxclients = 2);
    let mut a = s.client();
    let mut b = s.client();
    assert_eq!(a.cmd(&["PING"]), R::S("PONG".into()));
    assert_eq!(b.cmd(&["PING"]), R::S("PONG".into()));
    let mut third = std::net::TcpStream::connect(s.addr).unwrap();
    third
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let mut text = String::new();
    let _ = third.read_to_string(&mut text);
    assert!(text.contains("max number of clients reached"), "{text:?}");
    drop(a);
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(s.client().cmd(&["PING"]), R::S("PONG".into()));
}

#[test]
fn a_reading_client_gets_pipelined_replies_past_the_output_limit() {
    // Replies are written as they are produced: a client that reads never has 80 KiB
    // waiting, so a 64 KiB limit does not close it (it closed it before issue 38).
    let s = TestServer::start_with(|c| {
        c.output_limit = matrixkv_server::OutputLimit {
            hard_bytes: 64 << 10,
            soft_bytes: 0,
            soft_seconds: 0,
        }
    });
    let mut c = s.client();
    let v = "x".repeat(40 << 10);
    assert_eq!(c.cmd(&["SET", "big", &v]), R::S("OK".into()));
    let get = Client::encode(&[b"GET", b"big"]);
    c.send_raw(&[get.clone(), get].concat());
    for _ in 0..2 {
        assert_eq!(c.read(), Some(R::b(&v)));
    }
    assert_eq!(c.cmd(&["PING"]), R::S("PONG".into()));
}

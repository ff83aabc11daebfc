//! The Redis commands through a real socket: Redis's replies and error strings.

mod common;

use common::{R, TestServer};

fn ok() -> R {
    R::S("OK".into())
}

#[test]
fn strings_behave_as_in_redis() {
    let s = TestServer::start();
    let mut c = s.client();
    assert_eq!(c.cmd(&["PING"]), R::S("PONG".into()));
    assert_eq!(c.cmd(&["ECHO", "hi"]), R::b("hi"));
    assert_eq!(c.cmd(&["GET", "k"]), R::Nil);
    assert_eq!(c.cmd(&["SET", "k", "v"]), ok());
    assert_eq!(c.cmd(&["GET", "k"]), R::b("v"));
    assert_eq!(c.cmd(&["SET", "k", "w", "NX"]), R::Nil);
    assert_eq!(c.cmd(&["SET", "k", "w", "XX", "GET"]), R::b("v"));
    assert_eq!(c.cmd(&["SET", "new", "x", "XX"]), R::Nil);
    assert_eq!(c.cmd(&["APPEND", "k", "123"]), R::I(4));
    assert_eq!(c.cmd(&["STRLEN", "k"]), R::I(4));
    assert_eq!(c.cmd(&["GETRANGE", "k", "1", "-2"]), R::b("12"));
    assert_eq!(c.cmd(&["SETRANGE", "k", "6", "z"]), R::I(7));
    assert_eq!(c.cmd(&["GET", "k"]), R::B(b"w123\0\0z".to_vec()));
    assert_eq!(c.cmd(&["INCR", "n"]), R::I(1));
    assert_eq!(c.cmd(&["INCRBY", "n", "41"]), R::I(42));
    assert_eq!(c.cmd(&["DECRBY", "n", "2"]), R::I(40));
    assert_eq!(c.cmd(&["DECR", "n"]), R::I(39));
    assert_eq!(c.cmd(&["INCRBYFLOAT", "f", "1.5"]), R::b("1.5"));
    assert_eq!(c.cmd(&["INCRBYFLOAT", "f", "1.5"]), R::b("3"));
    assert_eq!(
        c.cmd(&["INCR", "k"]),
        R::E("ERR value is not an integer or out of range".into())
    );
    assert_eq!(c.cmd(&["SET", "max", "9223372036854775807"]), ok());
    assert_eq!(
        c.cmd(&["INCR", "max"]),
        R::E("ERR increment or decrement would overflow".into())
    );
    assert_eq!(c.cmd(&["MSET", "a", "1", "b", "2"]), ok());
    assert_eq!(
        c.cmd(&["MGET", "a", "nope", "b"]),
        R::A(vec![R::b("1"), R::Nil, R::b("2")])
    );
    assert_eq!(c.cmd(&["MSETNX", "a", "9", "c", "3"]), R::I(0));
    assert_eq!(c.cmd(&["MSETNX", "c", "3", "d", "4"]), R::I(1));
    assert_eq!(c.cmd(&["EXISTS", "a", "b", "nope", "a"]), R::I(3));
    assert_eq!(c.cmd(&["GETDEL", "a"]), R::b("1"));
    assert_eq!(c.cmd(&["DEL", "a", "b", "c"]), R::I(2));
    assert_eq!(c.cmd(&["TYPE", "d"]), R::S("string".into()));
    assert_eq!(c.cmd(&["TYPE", "nope"]), R::S("none".into()));
    assert_eq!(c.cmd(&["RENAME", "d", "e"]), ok());
    assert_eq!(c.cmd(&["GET", "e"]), R::b("4"));
    assert_eq!(
        c.cmd(&["RENAME", "nope", "x"]),
        R::E("ERR no such key".into())
    );
    assert_eq!(
        c.cmd(&["GET"]),
        R::E("ERR wrong number of arguments for 'get' command".into())
    );
    assert_eq!(
        c.cmd(&["SET", "k", "v", "EX", "0"]),
        R::E("ERR invalid expire time in 'set' command".into())
    );
    assert_eq!(
        c.cmd(&["SET", "k", "v", "NX", "XX"]),
        R::E("ERR syntax error".into())
    );
    assert!(
        matches!(c.cmd(&["NOSUCH", "x"]), R::E(e) if e.starts_with("ERR unknown command 'NOSUCH'"))
    );
}

#[test]
fn expiry_is_seen_by_reads_and_persist_removes_it() {
    let s = TestServer::start();
    let mut c = s.client();
    assert_eq!(c.cmd(&["SET", "k", "v", "EX", "100"]), ok());
    assert!(matches!(c.cmd(&["TTL", "k"]), R::I(t) if (99..=100).contains(&t)));
    assert!(matches!(c.cmd(&["PTTL", "k"]), R::I(t) if t > 98_000));
    assert_eq!(c.cmd(&["SET", "k", "w", "KEEPTTL"]), ok());
    assert!(matches!(c.cmd(&["TTL", "k"]), R::I(t) if t > 0));
    assert_eq!(c.cmd(&["PERSIST", "k"]), R::I(1));
    assert_eq!(c.cmd(&["TTL", "k"]), R::I(-1));
    assert_eq!(c.cmd(&["TTL", "nope"]), R::I(-2));
    assert_eq!(c.cmd(&["SET", "short", "v", "PX", "50"]), ok());
    assert_eq!(c.cmd(&["HSET", "h", "f", "v"]), R::I(1));
    assert_eq!(c.cmd(&["PEXPIRE", "h", "50"]), R::I(1));
    std::thread::sleep(std::time::Duration::from_millis(120));
    assert_eq!(c.cmd(&["GET", "short"]), R::Nil);
    assert_eq!(c.cmd(&["EXISTS", "short"]), R::I(0));
    assert_eq!(c.cmd(&["HGET", "h", "f"]), R::Nil);
    // A new hash under the expired one's name starts empty.
    assert_eq!(c.cmd(&["HSET", "h", "g", "w"]), R::I(1));
    assert_eq!(c.cmd(&["HLEN", "h"]), R::I(1));
    assert_eq!(c.cmd(&["HGET", "h", "f"]), R::Nil);
    assert_eq!(c.cmd(&["EXPIRE", "k", "-1"]), R::I(1));
    assert_eq!(c.cmd(&["GET", "k"]), R::Nil);
}

#[test]
fn hashes_keep_their_fields_and_refuse_other_types() {
    let s = TestServer::start();
    let mut c = s.client();
    assert_eq!(c.cmd(&["HSET", "h", "a", "1", "b", "2"]), R::I(2));
    assert_eq!(c.cmd(&["HSET", "h", "a", "3", "c", "4"]), R::I(1));
    assert_eq!(c.cmd(&["HGET", "h", "a"]), R::b("3"));
    assert_eq!(
        c.cmd(&["HMGET", "h", "a", "x", "c"]),
        R::A(vec![R::b("3"), R::Nil, R::b("4")])
    );
    assert_eq!(c.cmd(&["HLEN", "h"]), R::I(3));
    assert_eq!(c.cmd(&["HEXISTS", "h", "b"]), R::I(1));
    assert_eq!(
        c.cmd(&["HGETALL", "h"]),
        R::A(vec![
            R::b("a"),
            R::b("3"),
            R::b("b"),
            R::b("2"),
            R::b("c"),
            R::b("4")
        ])
    );
    assert_eq!(c.cmd(&["HINCRBY", "h", "n", "5"]), R::I(5));
    assert_eq!(c.cmd(&["HINCRBY", "h", "n", "-7"]), R::I(-2));
    assert_eq!(c.cmd(&["HDEL", "h", "a", "zz"]), R::I(1));
    assert_eq!(c.cmd(&["HLEN", "h"]), R::I(3));
    assert_eq!(c.cmd(&["TYPE", "h"]), R::S("hash".into()));
    let wrong = R::E("WRONGTYPE Operation against a key holding the wrong kind of value".into());
    assert_eq!(c.cmd(&["GET", "h"]), wrong);
    assert_eq!(c.cmd(&["SET", "s", "v"]), ok());
    assert_eq!(c.cmd(&["HSET", "s", "f", "v"]), wrong);
    assert_eq!(c.cmd(&["RENAME", "h", "h2"]), ok());
    assert_eq!(c.cmd(&["HGET", "h2", "c"]), R::b("4"));
    assert_eq!(c.cmd(&["EXISTS", "h"]), R::I(0));
    // SET over a hash replaces it, fields and all.
    assert_eq!(c.cmd(&["SET", "h2", "plain"]), ok());
    assert_eq!(c.cmd(&["HSET", "h2x", "f", "v"]), R::I(1));
    assert_eq!(c.cmd(&["DEL", "h2", "h2x"]), R::I(2));
    assert_eq!(c.cmd(&["HGETALL", "h2x"]), R::A(vec![]));
    let mut fields = Vec::new();
    for i in 0..25 {
        fields.push(format!("f{i:02}"));
        fields.push(i.to_string());
    }
    let mut args = vec!["HSET", "big"];
    args.extend(fields.iter().map(String::as_str));
    assert_eq!(c.cmd(&args), R::I(25));
    let mut seen = 0;
    let mut cursor = "0".to_string();
    loop {
        let R::A(reply) = c.cmd(&["HSCAN", "big", &cursor, "COUNT", "7"]) else {
            panic!()
        };
        let (R::B(next), R::A(items)) = (&reply[0], &reply[1]) else {
            panic!()
        };
        seen += items.len() / 2;
        cursor = String::from_utf8(next.clone()).unwrap();
        if cursor == "0" {
            break;
        }
    }
    assert_eq!(seen, 25);
}

#[test]
fn multi_exec_is_one_atomic_batch_that_reads_its_own_writes() {
    let s = TestServer::start();
    let mut c = s.client();
    assert_eq!(c.cmd(&["EXEC"]), R::E("ERR EXEC without MULTI".into()));
    assert_eq!(c.cmd(&["MULTI"]), ok());
    assert_eq!(
        c.cmd(&["MULTI"]),
        R::E("ERR MULTI calls can not be nested".into())
    );
    assert_eq!(c.cmd(&["SET", "x", "1"]), R::S("QUEUED".into()));
    assert_eq!(c.cmd(&["INCR", "x"]), R::S("QUEUED".into()));
    assert_eq!(c.cmd(&["HSET", "h", "f", "v"]), R::S("QUEUED".into()));
    assert_eq!(c.cmd(&["HGETALL", "h"]), R::S("QUEUED".into()));
    // Another client sees nothing before EXEC.
    let mut other = s.client();
    assert_eq!(other.cmd(&["GET", "x"]), R::Nil);
    assert_eq!(
        c.cmd(&["EXEC"]),
        R::A(vec![
            ok(),
            R::I(2),
            R::I(1),
            R::A(vec![R::b("f"), R::b("v")])
        ])
    );
    assert_eq!(other.cmd(&["GET", "x"]), R::b("2"));
    assert_eq!(c.cmd(&["MULTI"]), ok());
    assert_eq!(c.cmd(&["SET", "y", "1"]), R::S("QUEUED".into()));
    assert_eq!(c.cmd(&["DISCARD"]), ok());
    assert_eq!(c.cmd(&["GET", "y"]), R::Nil);
    assert_eq!(c.cmd(&["MULTI"]), ok());
    assert!(matches!(c.cmd(&["BOGUS"]), R::E(_)));
    assert_eq!(c.cmd(&["SET", "z", "1"]), R::S("QUEUED".into()));
    assert_eq!(
        c.cmd(&["EXEC"]),
        R::E("EXECABORT Transaction discarded because of previous errors.".into())
    );
    assert_eq!(c.cmd(&["GET", "z"]), R::Nil);
}

#[test]
fn databases_are_separate_keyspaces_with_keys_scan_and_flushdb() {
    let s = TestServer::start();
    let mut c = s.client();
    for i in 0..30 {
        assert_eq!(c.cmd(&["SET", &format!("user:{i}"), "x"]), ok());
    }
    assert_eq!(c.cmd(&["SET", "other", "y"]), ok());
    assert_eq!(c.cmd(&["DBSIZE"]), R::I(31));
    let R::A(keys) = c.cmd(&["KEYS", "user:1*"]) else {
        panic!()
    };
    assert_eq!(keys.len(), 11);
    let mut all = Vec::new();
    let mut cursor = "0".to_string();
    loop {
        let R::A(reply) = c.cmd(&["SCAN", &cursor, "MATCH", "user:*", "COUNT", "4"]) else {
            panic!()
        };
        let (R::B(next), R::A(items)) = (&reply[0], &reply[1]) else {
            panic!()
        };
        all.extend(items.iter().cloned());
        cursor = String::from_utf8(next.clone()).unwrap();
        if cursor == "0" {
            break;
        }
    }
    assert_eq!(all.len(), 30);
    // No hash: a full SCAN by type finds nothing (pages may come back empty on the way).
    let mut cursor = "0".to_string();
    loop {
        let R::A(reply) = c.cmd(&["SCAN", &cursor, "TYPE", "hash"]) else {
            panic!()
        };
        assert_eq!(reply[1], R::A(vec![]));
        let R::B(next) = &reply[0] else { panic!() };
        cursor = String::from_utf8(next.clone()).unwrap();
        if cursor == "0" {
            break;
        }
    }
    assert_eq!(c.cmd(&["SELECT", "1"]), ok());
    assert_eq!(c.cmd(&["GET", "other"]), R::Nil);
    assert_eq!(c.cmd(&["SET", "other", "db1"]), ok());
    assert_eq!(
        c.cmd(&["SELECT", "9"]),
        R::E("ERR DB index is out of range".into())
    );
    assert_eq!(c.cmd(&["SELECT", "0"]), ok());
    assert_eq!(c.cmd(&["GET", "other"]), R::b("y"));
    assert_eq!(c.cmd(&["FLUSHDB"]), ok());
    assert_eq!(c.cmd(&["DBSIZE"]), R::I(0));
    assert_eq!(c.cmd(&["SELECT", "1"]), ok());
    assert_eq!(c.cmd(&["GET", "other"]), R::b("db1"));
    assert_eq!(c.cmd(&["FLUSHALL"]), ok());
    assert_eq!(c.cmd(&["DBSIZE"]), R::I(0));
}

#[test]
fn data_survives_a_restart_and_resp3_replies_use_its_types() {
    let s = TestServer::start();
    let mut c = s.client();
    assert_eq!(c.cmd(&["SET", "k", "v"]), ok());
    assert_eq!(c.cmd(&["HSET", "h", "f", "1"]), R::I(1));
    drop(c);
    let dir = s.stop();
    let s = TestServer::start_in(dir, |_| {});
    let mut c = s.client();
    assert_eq!(c.cmd(&["GET", "k"]), R::b("v"));
    let R::M(hello) = c.cmd(&["HELLO", "3"]) else {
        panic!("HELLO 3 answers a map")
    };
    assert!(hello.contains(&(R::b("proto"), R::I(3))));
    assert_eq!(c.cmd(&["GET", "nope"]), R::Nil);
    assert_eq!(c.cmd(&["HGETALL", "h"]), R::M(vec![(R::b("f"), R::b("1"))]));
    assert_eq!(c.cmd(&["INCRBYFLOAT", "fl", "2.5"]), R::b("2.5"));
    assert_eq!(
        c.cmd(&["HELLO", "4"]),
        R::E("NOPROTO unsupported protocol version".into())
    );
}

#[test]
fn server_commands_answer_redis_cli_and_monitoring() {
    let s = TestServer::start_with(|c| c.checkpoint_dir = None);
    let mut c = s.client();
    assert_eq!(c.cmd(&["CLIENT", "SETNAME", "tester"]), ok());
    assert_eq!(c.cmd(&["CLIENT", "GETNAME"]), R::b("tester"));
    assert!(matches!(c.cmd(&["CLIENT", "ID"]), R::I(n) if n > 0));
    let R::B(list) = c.cmd(&["CLIENT", "LIST"]) else {
        panic!()
    };
    assert!(String::from_utf8_lossy(&list).contains("name=tester"));
    assert!(matches!(c.cmd(&["COMMAND", "COUNT"]), R::I(n) if n > 50));
    assert!(matches!(c.cmd(&["COMMAND", "DOCS"]), R::A(_)));
    let R::B(info) = c.cmd(&["INFO"]) else {
        panic!()
    };
    let info = String::from_utf8_lossy(&info).into_owned();
    for want in [
        "# Server",
        "# Clients",
        "# Engine",
        "connected_clients:1",
        "user_ops:",
    ] {
        assert!(info.contains(want), "INFO lacks {want}: {info}");
    }
    assert_eq!(
        c.cmd(&["CONFIG", "GET", "maxclients"]),
        R::A(vec![R::b("maxclients"), R::b("10000")])
    );
    assert_eq!(c.cmd(&["CONFIG", "SET", "maxclients", "50"]), ok());
    assert_eq!(
        c.cmd(&["CONFIG", "GET", "maxclients"]),
        R::A(vec![R::b("maxclients"), R::b("50")])
    );
    assert!(matches!(c.cmd(&["CONFIG", "SET", "nosuch", "1"]), R::E(_)));
    assert!(matches!(c.cmd(&["BGSAVE"]), R::E(e) if e.contains("checkpoint")));
    assert!(matches!(c.cmd(&["WATCH", "k"]), R::E(e) if e.contains("WATCH is not supported")));
}

#[test]
fn bgsave_writes_an_engine_checkpoint() {
    let ck = tempfile::tempdir().unwrap();
    let path = ck.path().to_owned();
    let s = TestServer::start_with(move |c| c.checkpoint_dir = Some(path));
    let mut c = s.client();
    assert_eq!(c.cmd(&["SET", "k", "v"]), ok());
    assert_eq!(c.cmd(&["BGSAVE"]), R::S("Background saving started".into()));
    // It saves in the background: wait for INFO to say it finished.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while !matches!(c.cmd(&["INFO", "persistence"]), R::B(i) if i.windows(24).any(|w| w == b"rdb_bgsave_in_progress:0"))
    {
        assert!(
            std::time::Instant::now() < deadline,
            "BGSAVE never finished"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let copies: Vec<_> = std::fs::read_dir(ck.path()).unwrap().collect();
    assert_eq!(copies.len(), 1);
    let copy = copies.into_iter().next().unwrap().unwrap().path();
    let db = matrixkv::Db::open_read_only(matrixkv::Options::new(&copy)).unwrap();
    assert_eq!(
        db.get(b"Mk").unwrap().map(|v| v[9..].to_vec()),
        Some(b"v".to_vec())
    );
}

#[test]
fn pipelined_commands_are_answered_in_order() {
    let s = TestServer::start();
    let mut c = s.client();
    let mut batch = Vec::new();
    for i in 0..200 {
        batch.extend(common::Client::encode(&[
            b"SET",
            format!("k{i}").as_bytes(),
            b"v",
        ]));
        batch.extend(common::Client::encode(&[b"INCR", b"counter"]));
    }
    c.send_raw(&batch);
    for i in 0..200 {
        assert_eq!(c.read(), Some(ok()));
        assert_eq!(c.read(), Some(R::I(i + 1)));
    }
    // Inline commands, as telnet sends them.
    c.send_raw(b"GET k7\r\nPING\r\n");
    assert_eq!(c.read(), Some(R::b("v")));
    assert_eq!(c.read(), Some(R::S("PONG".into())));
}

/// Writes pipelined back to back run as one group (one engine write, one sync under
/// `appendfsync always`), yet each sees the writes before it, a failing one fails alone, and
/// reads, `SELECT` and `MULTI` between them see every earlier write of the pipeline.
#[test]
fn pipelined_writes_commit_as_one_group_in_order() {
    let s = TestServer::start();
    let mut c = s.client();
    assert_eq!(c.cmd(&["CONFIG", "SET", "appendfsync", "always"]), ok());
    assert_eq!(c.cmd(&["HSET", "h", "f", "1"]), R::I(1));
    let before = wal_syncs(&mut c);
    let mut batch = Vec::new();
    for i in 0..100 {
        batch.extend(common::Client::encode(&[
            b"SET",
            format!("k{i}").as_bytes(),
            b"v",
        ]));
    }
    c.send_raw(&batch);
    for _ in 0..100 {
        assert_eq!(c.read(), Some(ok()));
    }
    let syncs = wal_syncs(&mut c) - before;
    // One sync per group; the pipeline may reach the server in a few reads.
    assert!(
        (1..=10).contains(&syncs),
        "100 pipelined SETs took {syncs} syncs"
    );
    let cmds: &[&[&str]] = &[
        &["SET", "n", "1"],
        &["INCR", "n"],
        &["INCR", "h"],
        &["INCRBY", "n", "10"],
        &["GET", "n"],
        &["SELECT", "1"],
        &["SET", "n", "other"],
        &["SELECT", "0"],
        &["APPEND", "n", "0"],
        &["MULTI"],
        &["INCR", "n"],
        &["EXEC"],
        &["GET", "n"],
        &["DEL", "n", "k0"],
        &["EXISTS", "n", "k0", "k1"],
    ];
    let mut batch = Vec::new();
    for cmd in cmds {
        let args: Vec<&[u8]> = cmd.iter().map(|a| a.as_bytes()).collect();
        batch.extend(common::Client::encode(&args));
    }
    c.send_raw(&batch);
    let expect = [
        ok(),
        R::I(2),
        R::E("WRONGTYPE Operation against a key holding the wrong kind of value".into()),
        R::I(12),
        R::b("12"),
        ok(),
        ok(),
        ok(),
        R::I(3),
        ok(),
        R::S("QUEUED".into()),
        R::A(vec![R::I(121)]),
        R::b("121"),
        R::I(2),
        R::I(1),
    ];
    for (cmd, want) in cmds.iter().zip(expect) {
        assert_eq!(c.read(), Some(want), "{cmd:?}");
    }
    assert_eq!(c.cmd(&["HGET", "h", "f"]), R::b("1"));
    assert_eq!(c.cmd(&["SELECT", "1"]), ok());
    assert_eq!(c.cmd(&["GET", "n"]), R::b("other"));
}

#[test]
fn shutdown_closes_the_engine_and_the_data_is_there_at_the_next_start() {
    let s = TestServer::start();
    let mut c = s.client();
    assert_eq!(c.cmd(&["SET", "k", "v"]), ok());
    assert_eq!(c.cmd(&["SHUTDOWN"]), ok());
    assert!(c.read().is_none(), "SHUTDOWN closes the connection");
    let dir = s.stop();
    let ro = matrixkv::Db::open_read_only(matrixkv::Options::new(dir.path())).unwrap();
    assert!(ro.get(b"Mk").unwrap().is_some());
}

/// The engine's `wal_syncs` counter, from `INFO engine`.
fn wal_syncs(c: &mut common::Client) -> u64 {
    let R::B(info) = c.cmd(&["INFO", "engine"]) else {
        panic!("INFO engine")
    };
    let info = String::from_utf8_lossy(&info).into_owned();
    info.lines()
        .find_map(|l| l.strip_prefix("wal_syncs:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no wal_syncs in {info}"))
}

/// `appendfsync`: `everysec` by default (Redis's) syncs once a second, `always` makes every
/// write a sync write, `no` syncs neither; anything else is refused.
#[test]
fn appendfsync_always_everysec_and_no_decide_when_writes_are_synced() {
    let s = TestServer::start();
    let mut c = s.client();
    assert_eq!(
        c.cmd(&["CONFIG", "GET", "appendfsync"]),
        R::A(vec![R::b("appendfsync"), R::b("everysec")])
    );
    assert_eq!(c.cmd(&["SET", "a", "1"]), ok());
    let before = wal_syncs(&mut c);
    // A condition with a generous deadline: a loaded machine may run the tick late.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while wal_syncs(&mut c) == before {
        assert!(
            std::time::Instant::now() < deadline,
            "no sync within 30 s under everysec"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }

    assert_eq!(c.cmd(&["CONFIG", "SET", "appendfsync", "always"]), ok());
    let before = wal_syncs(&mut c);
    for i in 0..5 {
        assert_eq!(c.cmd(&["SET", &format!("k{i}"), "v"]), ok());
    }
    assert!(wal_syncs(&mut c) >= before + 5, "always: a sync per write");

    assert_eq!(c.cmd(&["CONFIG", "SET", "appendfsync", "no"]), ok());
    // At most the one tick already under way may still sync; then nothing does, over three
    // ticks' time (a slow machine only makes this check weaker, never wrong).
    let before = wal_syncs(&mut c);
    for i in 0..5 {
        assert_eq!(c.cmd(&["SET", &format!("n{i}"), "2"]), ok());
    }
    std::thread::sleep(std::time::Duration::from_millis(3000));
    assert!(wal_syncs(&mut c) <= before + 1, "no: writes were synced");

    assert!(matches!(
        c.cmd(&["CONFIG", "SET", "appendfsync", "sometimes"]),
        R::E(e) if e.contains("appendfsync")
    ));
    assert_eq!(
        c.cmd(&["CONFIG", "GET", "appendfsync"]),
        R::A(vec![R::b("appendfsync"), R::b("no")])
    );
}

/// Read-modify-writes are atomic across connections: concurrent INCRs of one key and HINCRBYs
/// of one field lose no update while MSETs over many keys, RENAMEs and a FLUSHDB of another
/// database interleave with them.
#[test]
fn concurrent_read_modify_writes_lose_no_update() {
    let s = TestServer::start();
    let (clients, rounds) = (6u32, 150u32);
    std::thread::scope(|scope| {
        for t in 0..clients {
            let mut c = s.client();
            scope.spawn(move || {
                for i in 0..rounds {
                    assert!(matches!(c.cmd(&["INCR", "counter"]), R::I(n) if n > 0));
                    assert!(matches!(
                        c.cmd(&["HINCRBY", "h", "field", "2"]),
                        R::I(n) if n > 0
                    ));
                    let (a, b) = (format!("m{t}-{i}"), format!("m{t}-{}", i + 1));
                    assert_eq!(c.cmd(&["MSET", &a, "x", &b, "y"]), ok());
                    if i % 10 == 0 {
                        let _ = c.cmd(&["RENAME", &a, &format!("r{t}")]);
                        assert_eq!(c.cmd(&["SELECT", "1"]), ok());
                        assert_eq!(c.cmd(&["FLUSHDB"]), ok());
                        assert_eq!(c.cmd(&["SELECT", "0"]), ok());
                    }
                }
            });
        }
    });
    let mut c = s.client();
    let total = i64::from(clients * rounds);
    assert_eq!(c.cmd(&["GET", "counter"]), R::b(&total.to_string()));
    assert_eq!(
        c.cmd(&["HGET", "h", "field"]),
        R::b(&(2 * total).to_string())
    );
}

/// SET reads a key's metadata once: over an expired hash it still drops the hash's fields,
/// GET returns the old value only while it lives, KEEPTTL keeps the live expiry.
#[test]
fn set_over_expired_and_live_keys_replaces_them_whole() {
    let s = TestServer::start();
    let mut c = s.client();
    assert_eq!(c.cmd(&["HSET", "e", "f", "v"]), R::I(1));
    assert_eq!(c.cmd(&["PEXPIRE", "e", "50"]), R::I(1));
    assert_eq!(c.cmd(&["SET", "old", "1", "PX", "50"]), ok());
    std::thread::sleep(std::time::Duration::from_millis(120));
    assert_eq!(c.cmd(&["SET", "e", "string", "GET"]), R::Nil);
    assert_eq!(c.cmd(&["GET", "e"]), R::b("string"));
    assert_eq!(c.cmd(&["DEL", "e"]), R::I(1));
    assert_eq!(c.cmd(&["HSET", "e", "g", "w"]), R::I(1));
    assert_eq!(
        c.cmd(&["HLEN", "e"]),
        R::I(1),
        "no field of the expired hash is left"
    );
    assert_eq!(c.cmd(&["HGET", "e", "f"]), R::Nil);
    assert_eq!(c.cmd(&["SET", "old", "2", "NX", "GET"]), R::Nil);
    assert_eq!(c.cmd(&["SET", "live", "a", "EX", "100"]), ok());
    assert_eq!(c.cmd(&["SET", "live", "b", "KEEPTTL", "GET"]), R::b("a"));
    assert!(matches!(c.cmd(&["TTL", "live"]), R::I(t) if t > 0));
    assert!(matches!(c.cmd(&["SET", "e", "x", "GET"]), R::E(e) if e.contains("WRONGTYPE")));
}

//! Issue 38: the server is safe next to a browser and a hostile client, and its answers are
//! right under concurrency (transactions, snapshots, cursors, secrets, configuration).

mod common;

use std::time::{Duration, Instant};

use common::{Client, R, TestServer};

fn ok() -> R {
    R::S("OK".into())
}

fn text(r: R) -> String {
    match r {
        R::B(b) => String::from_utf8(b).expect("utf-8"),
        R::S(s) | R::E(s) => s,
        other => panic!("expected text, got {other:?}"),
    }
}

/// A browser's form POST (or an SSRF request) to the port: Redis closes the connection at
/// `POST` or `Host:` and runs nothing of the body.
#[test]
fn an_http_request_runs_nothing_and_closes_the_connection() {
    let s = TestServer::start();
    assert_eq!(s.client().cmd(&["SET", "keep", "1"]), ok());
    for request in [
        &b"POST / HTTP/1.1\r\nHost: 127.0.0.1:6379\r\nContent-Type: text/plain\r\n\
           Content-Length: 27\r\n\r\nSET pwned 1\r\nFLUSHALL\r\nSHUTDOWN\r\n"[..],
        b"GET / HTTP/1.1\r\nHost: 127.0.0.1:6379\r\n\r\nSET pwned 1\r\nFLUSHALL\r\n",
        b"host: x\r\nFLUSHALL\r\n",
    ] {
        let mut c = s.client();
        c.send_raw(request);
        // Whatever came before the header line, the connection then closes.
        let deadline = Instant::now() + Duration::from_secs(20);
        while c.read().is_some() {
            assert!(Instant::now() < deadline, "connection left open");
        }
    }
    let mut c = s.client();
    assert_eq!(c.cmd(&["GET", "keep"]), R::b("1"), "the body ran FLUSHALL");
    assert_eq!(c.cmd(&["GET", "pwned"]), R::Nil, "the body ran SET");
}

/// Redis's protected mode: no password, and a client from another host is refused with the
/// explanation (unit-tested on addresses; through a socket where this host has a
/// non-loopback address).
#[test]
fn protected_mode_refuses_remote_clients_when_no_password_is_set() {
    let Some(ip) = non_loopback_address() else {
        eprintln!("skipped: this host has no non-loopback IPv4 address");
        return;
    };
    let s = TestServer::start_with(|c| c.bind = "0.0.0.0".into());
    let mut remote = Client::connect(std::net::SocketAddr::new(ip, s.addr.port()));
    match remote.cmd(&["PING"]) {
        R::E(e) => assert!(e.starts_with("DENIED"), "{e}"),
        other => panic!("a remote client was served: {other:?}"),
    }
    // Loopback clients are served.
    let local = std::net::SocketAddr::new([127, 0, 0, 1].into(), s.addr.port());
    assert_eq!(Client::connect(local).cmd(&["PING"]), R::S("PONG".into()));
}

fn non_loopback_address() -> Option<std::net::IpAddr> {
    let out = std::process::Command::new("hostname")
        .arg("-I")
        .output()
        .ok()?;
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .filter_map(|w| w.parse::<std::net::IpAddr>().ok())
        .find(|ip| ip.is_ipv4() && !ip.is_loopback())
}

#[test]
fn select_inside_multi_changes_the_database_of_the_commands_after_it() {
    let s = TestServer::start();
    let mut c = s.client();
    assert_eq!(c.cmd(&["MULTI"]), ok());
    assert_eq!(c.cmd(&["SELECT", "1"]), R::S("QUEUED".into()));
    assert_eq!(c.cmd(&["SET", "k", "v"]), R::S("QUEUED".into()));
    assert_eq!(c.cmd(&["PING"]), R::S("QUEUED".into()));
    assert_eq!(
        c.cmd(&["EXEC"]),
        R::A(vec![ok(), ok(), R::S("PONG".into())])
    );
    assert_eq!(c.cmd(&["GET", "k"]), R::b("v"), "still in database 1");
    assert_eq!(c.cmd(&["SELECT", "0"]), ok());
    assert_eq!(c.cmd(&["GET", "k"]), R::Nil, "written to database 0");
}

#[test]
fn a_command_of_the_wrong_arity_inside_multi_aborts_the_exec() {
    let s = TestServer::start();
    let mut c = s.client();
    assert_eq!(c.cmd(&["MULTI"]), ok());
    assert_eq!(c.cmd(&["SET", "a", "1"]), R::S("QUEUED".into()));
    assert_eq!(
        c.cmd(&["GET"]),
        R::E("ERR wrong number of arguments for 'get' command".into())
    );
    assert_eq!(
        c.cmd(&["EXEC"]),
        R::E("EXECABORT Transaction discarded because of previous errors.".into())
    );
    assert_eq!(c.cmd(&["GET", "a"]), R::Nil);
}

/// Keys that a writer only ever changes together (MULTI/EXEC, or one MSET) are read
/// together by MGET and HGETALL: each command reads at one snapshot.
#[test]
fn mget_never_sees_half_of_a_transaction() {
    let s = TestServer::start();
    let addr = s.addr;
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let writer = {
        let stop = std::sync::Arc::clone(&stop);
        std::thread::spawn(move || {
            let mut w = Client::connect(addr);
            let mut i = 0u64;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let v = i.to_string();
                w.cmd(&["MULTI"]);
                w.cmd(&["SET", "a", &v]);
                w.cmd(&["HSET", "h", "x", &v]);
                w.cmd(&["SET", "b", &v]);
                w.cmd(&["HSET", "h", "y", &v]);
                assert!(matches!(w.cmd(&["EXEC"]), R::A(_)));
                i += 1;
            }
            i
        })
    };
    let mut r = s.client();
    let mut torn = 0;
    let reads = 4000;
    for _ in 0..reads {
        if let R::A(v) = r.cmd(&["MGET", "a", "b"])
            && v.first() != v.get(1)
        {
            torn += 1;
        }
        if let R::A(v) = r.cmd(&["HMGET", "h", "x", "y"])
            && v.first() != v.get(1)
        {
            torn += 1;
        }
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let commits = writer.join().expect("writer");
    assert_eq!(
        torn, 0,
        "{torn} of {reads}×2 reads saw half of a transaction ({commits} commits)"
    );
}

/// A SCAN cursor is the server's, not the connection's: redis-py's `scan_iter` over a pool
/// continues on whichever connection is free, and thousands of cursors may be outstanding.
#[test]
fn scan_cursors_continue_on_any_connection() {
    let s = TestServer::start();
    let mut c = s.client();
    let keys: Vec<String> = (0..300).map(|i| format!("key:{i:04}")).collect();
    for k in &keys {
        assert_eq!(c.cmd(&["SET", k, "v"]), ok());
    }
    // Many cursors left behind by other scans.
    for _ in 0..1100 {
        let R::A(page) = c.cmd(&["SCAN", "0", "COUNT", "2"]) else {
            panic!("SCAN reply");
        };
        assert_ne!(page[0], R::b("0"));
    }
    let mut conns = [s.client(), s.client(), s.client()];
    let mut cursor = "0".to_string();
    let mut seen = std::collections::BTreeSet::new();
    for round in 0.. {
        let R::A(page) = conns[round % 3].cmd(&["SCAN", &cursor, "COUNT", "7"]) else {
            panic!("SCAN reply");
        };
        cursor = text(page[0].clone());
        cursor
            .parse::<u64>()
            .expect("a cursor clients can parse as an integer");
        let R::A(found) = page[1].clone() else {
            panic!("keys")
        };
        seen.extend(found.into_iter().map(text));
        if cursor == "0" {
            break;
        }
        assert!(round < 1000, "SCAN never ended");
    }
    assert_eq!(seen.into_iter().collect::<Vec<_>>(), keys);
}

/// Errors never echo a client's bytes at length (Redis cuts them to 128 characters), and
/// names that would forge `CLIENT LIST` lines are refused.
#[test]
fn errors_and_client_names_are_bounded_and_clean() {
    let s = TestServer::start();
    let mut c = s.client();
    let long = "x".repeat(1 << 20);
    for args in [
        vec![long.as_str(), "a"],
        vec!["CLIENT", long.as_str()],
        vec!["CONFIG", "SET", long.as_str(), "1"],
        vec!["CONFIG", "SET", "maxclients", long.as_str()],
    ] {
        let e = text(c.cmd(&args));
        assert!(e.len() < 400, "{} bytes echoed for {}", e.len(), &args[0]);
    }
    for name in ["a b", "a\r\nid=1 addr=evil", "tab\tname"] {
        assert!(
            matches!(c.cmd(&["CLIENT", "SETNAME", name]), R::E(_)),
            "{name:?}"
        );
        assert!(
            matches!(c.cmd(&["HELLO", "2", "SETNAME", name]), R::E(_)),
            "HELLO SETNAME {name:?}"
        );
    }
    let list = text(c.cmd(&["CLIENT", "LIST"]));
    assert_eq!(list.lines().count(), 1, "{list}");
}

/// Before AUTH, nothing a client sends is recorded: no command name in CLIENT LIST.
#[test]
fn an_unauthenticated_client_leaves_no_trace_in_client_list() {
    let s = TestServer::start_with(|c| c.requirepass = Some("pw".into()));
    let mut stranger = s.client();
    let name = "z".repeat(10_000);
    assert!(matches!(stranger.cmd(&[&name]), R::E(e) if e.starts_with("NOAUTH")));
    let mut admin = s.client();
    assert_eq!(admin.cmd(&["AUTH", "pw"]), ok());
    let list = text(admin.cmd(&["CLIENT", "LIST"]));
    assert!(
        !list.contains("zzz"),
        "CLIENT LIST holds {} bytes of a stranger's command",
        list.len()
    );
}

#[test]
fn secrets_stay_secret_and_runtime_config_changes_are_safe() {
    let s = TestServer::start_with(|c| {
        c.requirepass = Some("s3cret".into());
        c.checkpoint_dir = Some(std::env::temp_dir().join("matrixkv-safety-ckpt"));
    });
    let mut c = s.client();
    assert_eq!(c.cmd(&["AUTH", "s3cret"]), ok());
    let info = text(c.cmd(&["INFO"]));
    assert!(!info.contains("s3cret"), "INFO prints the password");
    // HELLO AUTH checks the user name: only `default` exists.
    let mut other = s.client();
    assert!(matches!(
        other.cmd(&["HELLO", "3", "AUTH", "admin", "s3cret"]),
        R::E(e) if e.starts_with("WRONGPASS")
    ));
    // A new password reaches connections opened before it.
    let mut early = s.client();
    assert_eq!(c.cmd(&["CONFIG", "SET", "requirepass", "n3w"]), ok());
    assert!(matches!(early.cmd(&["AUTH", "s3cret"]), R::E(e) if e.starts_with("WRONGPASS")));
    assert_eq!(early.cmd(&["AUTH", "n3w"]), ok());
    // Settings that would write anywhere or that need a restart are refused at runtime.
    for (k, v) in [
        ("checkpoint-dir", "/"),
        ("dir", "/"),
        ("port", "1"),
        ("bind", "0.0.0.0"),
        ("databases", "3"),
    ] {
        let r = c.cmd(&["CONFIG", "SET", k, v]);
        assert!(matches!(&r, R::E(_)), "CONFIG SET {k} accepted: {r:?}");
    }
}

#[test]
fn rename_command_in_the_config_file_hides_or_renames_commands() {
    let mut config = matrixkv_server::Config::default();
    config
        .apply_file(
            "rename-command FLUSHALL \"\"\nrename-command CONFIG my-config\n\
             save 900 1\nloglevel notice\nprotected-mode yes\nclient-output-buffer-limit normal 0 0 0\n",
        )
        .expect("redis.conf lines");
    assert!(config.apply_file("no-such-directive 1\n").is_err());
    let renames = config.renamed_commands.clone();
    let s = TestServer::start_with(move |c| c.renamed_commands = renames);
    let mut c = s.client();
    assert!(matches!(c.cmd(&["FLUSHALL"]), R::E(e) if e.contains("unknown command")));
    assert!(matches!(c.cmd(&["CONFIG", "GET", "port"]), R::E(e) if e.contains("unknown command")));
    assert!(matches!(
        c.cmd(&["MY-CONFIG", "GET", "port"]),
        R::A(_) | R::M(_)
    ));
}

/// BGSAVE answers at once and saves in the background; LASTSAVE and INFO persistence say
/// when it finished.
#[test]
fn bgsave_runs_in_the_background_and_lastsave_reports_it() {
    let ckpt = tempfile::tempdir().expect("tempdir");
    let dir = ckpt.path().to_owned();
    let s = TestServer::start_with(move |c| c.checkpoint_dir = Some(dir));
    let mut c = s.client();
    for i in 0..200 {
        assert_eq!(c.cmd(&["SET", &format!("k{i}"), "v"]), ok());
    }
    let R::I(before) = c.cmd(&["LASTSAVE"]) else {
        panic!("LASTSAVE")
    };
    std::thread::sleep(Duration::from_millis(1100));
    assert_eq!(c.cmd(&["BGSAVE"]), R::S("Background saving started".into()));
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let info = text(c.cmd(&["INFO", "persistence"]));
        if info.contains("rdb_bgsave_in_progress:0") && info.contains("rdb_last_bgsave_status:ok") {
            break;
        }
        assert!(Instant::now() < deadline, "BGSAVE never finished: {info}");
        std::thread::sleep(Duration::from_millis(50));
    }
    let R::I(after) = c.cmd(&["LASTSAVE"]) else {
        panic!("LASTSAVE")
    };
    assert!(after > before, "LASTSAVE {before} -> {after}");
    assert_eq!(std::fs::read_dir(ckpt.path()).expect("ls").count(), 1);
}

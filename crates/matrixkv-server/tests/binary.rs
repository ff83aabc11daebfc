//! The `matrixkv-server` binary: flags and a config file, the port it prints, and SIGTERM
//! closing the engine with every acknowledged write durable.

mod common;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

use common::{Client, R};

#[test]
fn sigterm_closes_the_engine_cleanly() {
    let dir = tempfile::tempdir().unwrap();
    let conf = dir.path().join("server.conf");
    std::fs::write(
        &conf,
        "# a redis.conf-style file\nport 0\ndatabases 2\nrequirepass hunter2\n",
    )
    .unwrap();
    // The port comes from the config file.
    let (mut child, addr) = spawn_server(
        &["--config".as_ref(), conf.as_os_str()],
        &dir.path().join("db"),
    );
    let mut c = Client::connect(addr);
    assert_eq!(
        c.cmd(&["GET", "k"]),
        R::E("NOAUTH Authentication required.".into())
    );
    assert_eq!(c.cmd(&["AUTH", "hunter2"]), R::S("OK".into()));
    assert_eq!(
        c.cmd(&["SELECT", "2"]),
        R::E("ERR DB index is out of range".into())
    );
    for i in 0..500 {
        assert_eq!(c.cmd(&["SET", &format!("k{i}"), "v"]), R::S("OK".into()));
    }
    let Ok(status) = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
    else {
        eprintln!("skipped: no `kill` command to send SIGTERM");
        let _ = child.kill();
        let _ = child.wait();
        return;
    };
    assert!(status.success());
    let exit = child.wait().unwrap();
    assert!(
        exit.success(),
        "the server exits cleanly on SIGTERM: {exit:?}"
    );
    let db = matrixkv::Db::open_read_only(matrixkv::Options::new(dir.path().join("db"))).unwrap();
    assert!(
        db.get(b"Mk499").unwrap().is_some(),
        "the last acknowledged write is there"
    );
}

/// Starts the server binary with `args` (which must choose port 0, by flag or config file)
/// on `db`; the child and the address it printed.
fn spawn_server(
    args: &[&std::ffi::OsStr],
    db: &std::path::Path,
) -> (std::process::Child, std::net::SocketAddr) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_matrixkv-server"))
        .args(args)
        .arg("--dir")
        .arg(db)
        .args([
            "--container-bytes",
            "4194304",
            "--write-buffer-bytes",
            "262144",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn matrixkv-server");
    let mut line = String::new();
    BufReader::new(child.stdout.take().expect("piped stdout"))
        .read_line(&mut line)
        .expect("the line naming the port");
    let addr = line
        .trim()
        .rsplit(' ')
        .next()
        .and_then(|a| a.parse().ok())
        .expect("an address at the end of the first line");
    (child, addr)
}

/// kill -9 of the server loses no acknowledged write: pipelined SETs commit as groups (values
/// on both sides of the engine's 2 KiB at-write threshold) and INCRs of one counter among
/// them, then the process is killed with a pipeline still unanswered; after a restart every
/// acknowledged SET reads back and the counter equals the acknowledged INCRs (the last
/// pipeline holds SETs only).
#[test]
fn kill_minus_9_loses_no_acknowledged_pipelined_write() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let value = |i: usize| vec![b'a' + (i % 26) as u8; [100, 1500, 3000][i % 3]];
    let (mut child, addr) = spawn_server(&["--port".as_ref(), "0".as_ref()], &db);
    let mut c = Client::connect(addr);
    let mut acked = 0usize;
    for round in 0..40 {
        let mut batch = Vec::new();
        for j in 0..50 {
            let i = round * 50 + j;
            batch.extend(Client::encode(&[
                b"SET",
                format!("k{i}").as_bytes(),
                &value(i),
            ]));
            batch.extend(Client::encode(&[b"INCR", b"counter"]));
        }
        c.send_raw(&batch);
        for j in 0..50 {
            assert_eq!(c.read(), Some(R::S("OK".into())));
            assert_eq!(c.read(), Some(R::I((round * 50 + j + 1) as i64)));
        }
        acked = (round + 1) * 50;
    }
    // A pipeline the server may be running when it dies: nothing of it is acknowledged.
    let mut batch = Vec::new();
    for i in acked..acked + 200 {
        batch.extend(Client::encode(&[
            b"SET",
            format!("k{i}").as_bytes(),
            &value(i),
        ]));
    }
    c.send_raw(&batch);
    child.kill().unwrap();
    child.wait().unwrap();
    let (mut child, addr) = spawn_server(&["--port".as_ref(), "0".as_ref()], &db);
    let mut c = Client::connect(addr);
    for i in 0..acked {
        assert_eq!(
            c.cmd(&["GET", &format!("k{i}")]),
            R::B(value(i)),
            "acknowledged SET k{i}"
        );
    }
    let R::B(n) = c.cmd(&["GET", "counter"]) else {
        panic!("the counter is gone")
    };
    let n: usize = String::from_utf8(n).unwrap().parse().unwrap();
    assert_eq!(n, acked, "the counter counts the acknowledged INCRs");
    child.kill().unwrap();
    child.wait().unwrap();
}

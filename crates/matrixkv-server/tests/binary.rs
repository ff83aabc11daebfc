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
    let mut child = Command::new(env!("CARGO_BIN_EXE_matrixkv-server"))
        .args(["--config"])
        .arg(&conf)
        .args(["--dir"])
        .arg(dir.path().join("db"))
        .args([
            "--container-bytes",
            "4194304",
            "--write-buffer-bytes",
            "262144",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let addr = line.trim().rsplit(' ').next().unwrap().parse().unwrap();
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

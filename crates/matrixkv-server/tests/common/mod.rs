//! A server on a free loopback port, and a minimal RESP client to talk to it.
#![allow(dead_code, reason = "each test file uses a different subset")]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use matrixkv_server::Config;

/// A server running on its own runtime thread.
pub struct TestServer {
    pub addr: SocketAddr,
    runtime: Option<tokio::runtime::Runtime>,
    running: Option<matrixkv_server::Running>,
    pub dir: tempfile::TempDir,
}

/// Small engine settings so tests are fast.
pub fn config(dir: &std::path::Path) -> Config {
    Config {
        port: 0,
        dir: dir.to_owned(),
        write_buffer_bytes: Some(256 << 10),
        container_bytes: Some(4 << 20),
        databases: 4,
        ..Config::default()
    }
}

impl TestServer {
    pub fn start() -> TestServer {
        TestServer::start_with(|_| {})
    }

    pub fn start_with(adjust: impl FnOnce(&mut Config)) -> TestServer {
        let dir = tempfile::tempdir().expect("tempdir");
        TestServer::start_in(dir, adjust)
    }

    pub fn start_in(dir: tempfile::TempDir, adjust: impl FnOnce(&mut Config)) -> TestServer {
        let mut c = config(dir.path());
        adjust(&mut c);
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("runtime");
        let running = runtime.block_on(matrixkv_server::start(c)).expect("start");
        TestServer {
            addr: running.addr,
            runtime: Some(runtime),
            running: Some(running),
            dir,
        }
    }

    pub fn client(&self) -> Client {
        Client::connect(self.addr)
    }

    /// Stops the server (closing the engine) and returns its directory.
    pub fn stop(mut self) -> tempfile::TempDir {
        self.shutdown();
        let dir = tempfile::tempdir().expect("tempdir");
        std::mem::replace(&mut self.dir, dir)
    }

    fn shutdown(&mut self) {
        if let (Some(rt), Some(r)) = (self.runtime.as_ref(), self.running.take()) {
            rt.block_on(r.shutdown()).expect("clean shutdown");
        }
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        self.shutdown();
        if let Some(rt) = self.runtime.take() {
            rt.shutdown_timeout(Duration::from_secs(5));
        }
    }
}

/// A reply as the tests compare it.
#[derive(Debug, Clone, PartialEq)]
pub enum R {
    S(String),
    E(String),
    I(i64),
    B(Vec<u8>),
    Nil,
    A(Vec<R>),
    /// RESP3 map.
    M(Vec<(R, R)>),
    D(String),
}

impl R {
    pub fn b(s: &str) -> R {
        R::B(s.as_bytes().to_vec())
    }
}

pub struct Client {
    r: BufReader<TcpStream>,
    w: TcpStream,
}

impl Client {
    pub fn connect(addr: SocketAddr) -> Client {
        let s = TcpStream::connect(addr).expect("connect");
        s.set_read_timeout(Some(Duration::from_secs(20)))
            .expect("timeout");
        Client {
            r: BufReader::new(s.try_clone().expect("clone")),
            w: s,
        }
    }

    /// Another handle on the socket, to write from a second thread while this one reads.
    pub fn writer(&self) -> TcpStream {
        self.w.try_clone().expect("clone")
    }

    pub fn send_raw(&mut self, bytes: &[u8]) {
        self.w.write_all(bytes).expect("write");
    }

    pub fn encode(args: &[&[u8]]) -> Vec<u8> {
        let mut v = format!("*{}\r\n", args.len()).into_bytes();
        for a in args {
            v.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
            v.extend_from_slice(a);
            v.extend_from_slice(b"\r\n");
        }
        v
    }

    pub fn cmd(&mut self, args: &[&str]) -> R {
        let a: Vec<&[u8]> = args.iter().map(|s| s.as_bytes()).collect();
        self.send_raw(&Client::encode(&a));
        self.read().expect("a reply")
    }

    fn line(&mut self) -> Option<String> {
        let mut l = String::new();
        let n = self.r.read_line(&mut l).ok()?;
        (n > 0).then(|| l.trim_end_matches("\r\n").to_owned())
    }

    /// The next reply; `None` when the server closed the connection.
    pub fn read(&mut self) -> Option<R> {
        let l = self.line()?;
        let (t, rest) = l.split_at(1);
        Some(match t {
            "+" => R::S(rest.into()),
            "-" => R::E(rest.into()),
            ":" => R::I(rest.parse().expect("int")),
            "_" => R::Nil,
            "," => R::D(rest.into()),
            "$" => {
                let n: i64 = rest.parse().expect("len");
                if n < 0 {
                    R::Nil
                } else {
                    let mut b = vec![0u8; n as usize + 2];
                    self.r.read_exact(&mut b).ok()?;
                    b.truncate(n as usize);
                    R::B(b)
                }
            }
            "*" => {
                let n: i64 = rest.parse().expect("len");
                if n < 0 {
                    R::Nil
                } else {
                    R::A((0..n).map(|_| self.read().expect("element")).collect())
                }
            }
            "%" => {
                let n: usize = rest.parse().expect("len");
                R::M(
                    (0..n)
                        .map(|_| (self.read().expect("key"), self.read().expect("value")))
                        .collect(),
                )
            }
            other => panic!("unexpected reply type {other}: {l}"),
        })
    }
}

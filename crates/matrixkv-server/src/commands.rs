//! The Redis commands: what each does to the store, with Redis's replies and error strings.
//!
//! [`Session::execute`] runs one command for one connection. Commands that write hold the
//! store's write lock for their whole read-modify-write and commit one batch; `MULTI` queues
//! commands and `EXEC` runs them all in one [`Txn`] (one atomic batch).

use std::collections::HashMap;

use crate::cursors::{Cursors, Position};
use crate::glob;
use crate::persistence::Persistence;
use crate::resp::{Reply, format_double};
use crate::security;
use crate::store::{HASH, META_HEADER, Meta, STRING, Store, Txn, field_prefix, meta_key, now_ms};

/// What the connection does after a reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum After {
    /// Read the next command.
    Continue,
    /// Close this connection (QUIT).
    Close,
    /// Close this connection without sending the reply (an HTTP request: nothing more of
    /// what it sent is read).
    Abort,
    /// Stop the server (SHUTDOWN).
    Shutdown,
}

/// The per-connection state.
#[derive(Debug)]
pub struct Session {
    /// Client id (`CLIENT ID`).
    pub id: u64,
    /// `CLIENT SETNAME`.
    pub name: Option<String>,
    /// Selected database.
    pub db: usize,
    /// 2 or 3 (`HELLO`).
    pub proto: u8,
    /// AUTH passed (or no password is set).
    pub authenticated: bool,
    /// Commands queued by `MULTI`; `Some` inside a block.
    queued: Option<Vec<Vec<Vec<u8>>>>,
    /// A queued command failed to parse: `EXEC` aborts.
    multi_error: bool,
    /// Last command, for `CLIENT LIST`.
    pub last_command: String,
}

/// What the server tells a session.
pub struct Shared<'a> {
    /// The store.
    pub store: &'a Store,
    /// `requirepass`, if any (read from the configuration for each command, so `CONFIG SET
    /// requirepass` reaches open connections).
    pub password: Option<&'a str>,
    /// `rename-command`: a command name as clients send it (lower case) -> the command it
    /// runs, `None` for a name that was renamed away or disabled.
    pub renamed: &'a HashMap<String, Option<String>>,
    /// SCAN/HSCAN cursors, shared by every connection.
    pub cursors: &'a Cursors,
    /// SAVE/BGSAVE state.
    pub persistence: &'a Persistence,
    /// BGSAVE: starts a checkpoint in the background.
    pub bgsave: &'a (dyn Fn() -> Result<(), String> + Sync),
    /// The keys of each database as `INFO keyspace` reports them: counted in the background
    /// at most every few seconds, never by the call.
    pub key_counts: &'a (dyn Fn() -> Vec<u64> + Sync),
    /// Lines of `CLIENT LIST` (computed by the server on demand).
    pub client_list: &'a (dyn Fn() -> String + Sync),
    /// `CONFIG GET` pairs and `INFO` server fields.
    pub config: &'a (dyn Fn(&str) -> Vec<(String, String)> + Sync),
    /// `CONFIG SET`: Ok, or the error text.
    pub config_set: &'a (dyn Fn(&str, &str) -> Result<(), String> + Sync),
    /// `BGSAVE`'s checkpoint directory, if configured.
    pub checkpoint_dir: Option<&'a std::path::Path>,
    /// Commit writes as sync writes (`appendfsync always`).
    pub sync_writes: bool,
}

fn wrong_args(cmd: &str) -> Reply {
    Reply::err(format!("wrong number of arguments for '{cmd}' command"))
}

const WRONGTYPE: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";
const NOT_INT: &str = "value is not an integer or out of range";
const SYNTAX: &str = "syntax error";
const BAD_NAME: &str = "Client names cannot contain spaces, newlines or special characters.";

fn engine_err(e: &matrixkv::Error) -> Reply {
    Reply::err(format!("engine error: {e}"))
}

fn int_arg(b: &[u8]) -> Option<i64> {
    std::str::from_utf8(b).ok()?.parse().ok()
}

fn float_arg(b: &[u8]) -> Option<f64> {
    let s = std::str::from_utf8(b).ok()?;
    let f: f64 = s.trim().parse().ok()?;
    (!f.is_nan()).then_some(f)
}

/// Commands that change data (they take the write lock and are refused inside nothing).
const WRITES: &[&str] = &[
    "set",
    "getdel",
    "mset",
    "msetnx",
    "del",
    "incr",
    "incrby",
    "decr",
    "decrby",
    "incrbyfloat",
    "append",
    "setrange",
    "expire",
    "pexpire",
    "expireat",
    "pexpireat",
    "persist",
    "rename",
    "flushdb",
    "flushall",
    "hset",
    "hmset",
    "hdel",
    "hincrby",
    "unlink",
];

/// True if `cmd` (lower case) writes.
pub fn is_write(cmd: &str) -> bool {
    WRITES.contains(&cmd)
}

impl Session {
    /// A new connection's state.
    pub fn new(id: u64, authenticated: bool) -> Session {
        Session {
            id,
            name: None,
            db: 0,
            proto: 2,
            authenticated,
            queued: None,
            multi_error: false,
            last_command: String::new(),
        }
    }

    /// True when `args` may join a group of pipelined writes ([`Session::execute_writes`]):
    /// a known writing command of an authenticated connection outside `MULTI`.
    /// A name `rename-command` touched never joins (it runs through [`Session::execute`]).
    pub fn joins_write_group(
        &self,
        renamed: &HashMap<String, Option<String>>,
        args: &[Vec<u8>],
    ) -> bool {
        self.authenticated
            && self.queued.is_none()
            && args.first().is_some_and(|c| {
                WRITES.iter().any(|w| c.eq_ignore_ascii_case(w.as_bytes()))
                    && (renamed.is_empty()
                        || !renamed.contains_key(&String::from_utf8_lossy(c).to_ascii_lowercase()))
            })
    }

    /// Runs writing commands a client pipelined back to back (each accepted by
    /// [`Session::joins_write_group`]) under one hold of the write lock, in one [`Txn`]
    /// committed once: each command sees the writes of those before it, as it would one after
    /// the other, and the group reaches the engine as one write instead of one per command
    /// (one WAL record, one sync with `appendfsync always`). The replies in order; if the
    /// commit fails, none of the writes is applied and every command is answered with the
    /// engine's error.
    pub async fn execute_writes(&mut self, sh: &Shared<'_>, cmds: Vec<Vec<Vec<u8>>>) -> Vec<Reply> {
        let n = cmds.len();
        let _guard = sh.store.write_lock.lock().await;
        let mut txn = Txn::new(sh.store);
        if let Some(c) = cmds.last().and_then(|args| args.first()) {
            self.last_command = String::from_utf8_lossy(c).to_ascii_lowercase();
        }
        let mut replies = Vec::with_capacity(n);
        for args in cmds {
            replies.push(self.data_command(sh, &mut txn, args));
        }
        match blocking(sh.sync_writes, || txn.commit(sh.sync_writes)) {
            Ok(()) => replies,
            Err(e) => (0..n).map(|_| engine_err(&e)).collect(),
        }
    }

    /// Runs `args` (a whole command); the reply and what to do next.
    pub async fn execute(&mut self, sh: &Shared<'_>, args: Vec<Vec<u8>>) -> (Reply, After) {
        let Some(first) = args.first() else {
            return (Reply::Null, After::Continue);
        };
        if security::is_http_probe(first) {
            log::warn!(
                "client {}: possible security attack detected: a client sent an HTTP request \
                 ('{}') to the Redis port; connection closed",
                self.id,
                security::echo(first)
            );
            return (Reply::Null, After::Abort);
        }
        let Some(cmd) = resolve(sh, first) else {
            return (self.refuse_unknown(first, &args), After::Continue);
        };
        if !self.authenticated && !matches!(cmd.as_str(), "auth" | "hello" | "quit") {
            // Nothing of an unauthenticated client's input is kept.
            return (
                Reply::err("NOAUTH Authentication required."),
                After::Continue,
            );
        }
        if !known(&cmd) {
            return (self.refuse_unknown(first, &args), After::Continue);
        }
        self.last_command.clone_from(&cmd);
        if !arity_ok(&cmd, args.len()) {
            self.multi_error |= self.queued.is_some();
            return (wrong_args(&cmd), After::Continue);
        }
        // Inside MULTI everything but the block's own commands is queued, arity checked.
        if self.queued.is_some() && !matches!(cmd.as_str(), "exec" | "discard" | "multi" | "quit") {
            if cmd == "watch" {
                return (
                    Reply::err("WATCH inside MULTI is not allowed"),
                    After::Continue,
                );
            }
            if let Some(q) = self.queued.as_mut() {
                q.push(args);
            }
            return (Reply::Simple("QUEUED".into()), After::Continue);
        }
        match cmd.as_str() {
            "quit" => return (Reply::ok(), After::Close),
            "shutdown" => return (Reply::ok(), After::Shutdown),
            "multi" => {
                if self.queued.is_some() {
                    return (Reply::err("MULTI calls can not be nested"), After::Continue);
                }
                self.queued = Some(Vec::new());
                self.multi_error = false;
                return (Reply::ok(), After::Continue);
            }
            "discard" => {
                self.multi_error = false;
                if self.queued.take().is_none() {
                    return (Reply::err("DISCARD without MULTI"), After::Continue);
                }
                return (Reply::ok(), After::Continue);
            }
            "watch" | "unwatch" => {
                return (
                    Reply::err(
                        "WATCH is not supported by matrixkv-server (MULTI/EXEC blocks are atomic batches)",
                    ),
                    After::Continue,
                );
            }
            "exec" => return (self.exec(sh).await, After::Continue),
            _ => {}
        }
        if let Some(r) = self.server_command(sh, &cmd, &args) {
            return (r, After::Continue);
        }
        let _guard = if is_write(&cmd) {
            Some(sh.store.write_lock.lock().await)
        } else {
            None
        };
        let mut txn = Txn::new(sh.store);
        let reply = blocking(is_slow(&cmd), || self.data_command(sh, &mut txn, args));
        if let Err(e) = blocking(sh.sync_writes, || txn.commit(sh.sync_writes)) {
            return (engine_err(&e), After::Continue);
        }
        (reply, After::Continue)
    }

    /// An unknown (or renamed-away) command: the error, and inside MULTI the block aborts.
    fn refuse_unknown(&mut self, first: &[u8], args: &[Vec<u8>]) -> Reply {
        if !self.authenticated {
            return Reply::err("NOAUTH Authentication required.");
        }
        self.multi_error |= self.queued.is_some();
        unknown(first, args)
    }

    /// EXEC: the queued commands in order, in one transaction committed as one batch under
    /// the write lock; commands that touch no data (SELECT, PING, ...) run in their place.
    async fn exec(&mut self, sh: &Shared<'_>) -> Reply {
        let Some(cmds) = self.queued.take() else {
            return Reply::err("EXEC without MULTI");
        };
        if std::mem::take(&mut self.multi_error) {
            return Reply::err("EXECABORT Transaction discarded because of previous errors.");
        }
        let _guard = sh.store.write_lock.lock().await;
        let mut txn = Txn::new(sh.store);
        let mut replies = Vec::with_capacity(cmds.len());
        for c in cmds {
            let name = c.first().and_then(|f| resolve(sh, f)).unwrap_or_default();
            let reply = match self.server_command(sh, &name, &c) {
                Some(r) => r,
                None if runs_in_exec(&name) => {
                    blocking(is_slow(&name), || self.data_command(sh, &mut txn, c))
                }
                None => Reply::err(format!("'{name}' is not allowed inside MULTI")),
            };
            replies.push(reply);
        }
        match blocking(sh.sync_writes, || txn.commit(sh.sync_writes)) {
            Ok(()) => Reply::Array(replies),
            Err(e) => engine_err(&e),
        }
    }

    /// The commands that touch no data; `None` for the others.
    fn server_command(&mut self, sh: &Shared<'_>, cmd: &str, args: &[Vec<u8>]) -> Option<Reply> {
        let arg = |i: usize| args.get(i).map(|a| String::from_utf8_lossy(a).into_owned());
        let r = match cmd {
            "ping" => match args.len() {
                1 => Reply::Simple("PONG".into()),
                2 => Reply::Bulk(args.get(1).cloned().unwrap_or_default()),
                _ => wrong_args("ping"),
            },
            "echo" if args.len() == 2 => Reply::Bulk(args.get(1).cloned().unwrap_or_default()),
            "echo" => wrong_args("echo"),
            "auth" => {
                // AUTH password, or AUTH default password.
                let given = match args.len() {
                    2 => arg(1),
                    3 if arg(1).as_deref() == Some("default") => arg(2),
                    3 => {
                        return Some(Reply::err(
                            "WRONGPASS invalid username-password pair or user is disabled.",
                        ));
                    }
                    _ => return Some(wrong_args("auth")),
                };
                match sh.password {
                    None => Reply::err(
                        "AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?",
                    ),
                    Some(p)
                        if given.as_deref().is_some_and(|g| {
                            security::constant_time_eq(g.as_bytes(), p.as_bytes())
                        }) =>
                    {
                        self.authenticated = true;
                        Reply::ok()
                    }
                    Some(_) => {
                        Reply::err("WRONGPASS invalid username-password pair or user is disabled.")
                    }
                }
            }
            "hello" => {
                let mut i = 1;
                if let Some(v) = args.get(1) {
                    match int_arg(v) {
                        Some(2) => self.proto = 2,
                        Some(3) => self.proto = 3,
                        _ => return Some(Reply::err("NOPROTO unsupported protocol version")),
                    }
                    i = 2;
                }
                while i < args.len() {
                    match arg(i).map(|a| a.to_ascii_lowercase()).as_deref() {
                        Some("auth") if i + 2 < args.len() => {
                            let (user, pass) = (arg(i + 1), arg(i + 2));
                            let pass_ok = |p: &str| {
                                pass.as_deref().is_some_and(|g| {
                                    security::constant_time_eq(g.as_bytes(), p.as_bytes())
                                })
                            };
                            // `default` is the only user.
                            let user_ok = user.as_deref() == Some("default");
                            match sh.password {
                                Some(p) if user_ok && pass_ok(p) => self.authenticated = true,
                                None if user_ok => {}
                                _ => {
                                    return Some(Reply::err(
                                        "WRONGPASS invalid username-password pair or user is disabled.",
                                    ));
                                }
                            }
                            i += 3;
                        }
                        Some("setname") if i + 1 < args.len() => {
                            let name = args.get(i + 1).map(Vec::as_slice).unwrap_or_default();
                            if !security::valid_client_name(name) {
                                return Some(Reply::err(BAD_NAME));
                            }
                            self.name = arg(i + 1);
                            i += 2;
                        }
                        _ => return Some(Reply::err(SYNTAX)),
                    }
                }
                if !self.authenticated {
                    return Some(Reply::err(
                        "NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO <proto> AUTH <user> <pass> option can be used to authenticate the client and select the RESP protocol version at the same time",
                    ));
                }
                Reply::Map(vec![
                    (Reply::text("server"), Reply::text("matrixkv")),
                    (
                        Reply::text("version"),
                        Reply::text(env!("CARGO_PKG_VERSION")),
                    ),
                    (Reply::text("proto"), Reply::Int(i64::from(self.proto))),
                    (Reply::text("id"), Reply::Int(self.id as i64)),
                    (Reply::text("mode"), Reply::text("standalone")),
                    (Reply::text("role"), Reply::text("master")),
                    (Reply::text("modules"), Reply::Array(vec![])),
                ])
            }
            "select" => match args.get(1).and_then(|a| int_arg(a)) {
                _ if args.len() != 2 => wrong_args("select"),
                Some(n) if n >= 0 && (n as usize) < sh.store.databases() => {
                    self.db = n as usize;
                    Reply::ok()
                }
                Some(_) => Reply::err("DB index is out of range"),
                None => Reply::err(NOT_INT),
            },
            "client" => match arg(1).map(|a| a.to_ascii_lowercase()).as_deref() {
                Some("setname") if args.len() == 3 => {
                    let n = args.get(2).map(Vec::as_slice).unwrap_or_default();
                    if security::valid_client_name(n) {
                        self.name = (!n.is_empty()).then(|| String::from_utf8_lossy(n).into());
                        Reply::ok()
                    } else {
                        Reply::err(BAD_NAME)
                    }
                }
                Some("getname") => self.name.as_ref().map_or(Reply::Null, Reply::text),
                Some("id") => Reply::Int(self.id as i64),
                Some("list") => Reply::text((sh.client_list)()),
                Some("setinfo") => Reply::ok(),
                _ => Reply::err(format!(
                    "unknown subcommand '{}'. Try CLIENT HELP.",
                    security::echo(args.get(1).map(Vec::as_slice).unwrap_or_default())
                )),
            },
            "command" => match arg(1).map(|a| a.to_ascii_lowercase()).as_deref() {
                Some("count") => Reply::Int(COMMANDS.len() as i64),
                Some("docs") => Reply::Map(vec![]),
                None => Reply::Array(
                    COMMANDS
                        .iter()
                        .map(|(name, arity)| {
                            Reply::Array(vec![
                                Reply::text(name),
                                Reply::Int(*arity),
                                Reply::Array(vec![]),
                                Reply::Int(0),
                                Reply::Int(0),
                                Reply::Int(0),
                            ])
                        })
                        .collect(),
                ),
                _ => Reply::Array(vec![]),
            },
            "config" => match arg(1).map(|a| a.to_ascii_lowercase()).as_deref() {
                Some("get") if args.len() == 3 => {
                    let pairs = (sh.config)(&arg(2).unwrap_or_default());
                    Reply::Map(
                        pairs
                            .into_iter()
                            .map(|(k, v)| (Reply::text(k), Reply::text(v)))
                            .collect(),
                    )
                }
                Some("set") if args.len() == 4 => {
                    match (sh.config_set)(&arg(2).unwrap_or_default(), &arg(3).unwrap_or_default())
                    {
                        Ok(()) => Reply::ok(),
                        Err(e) => Reply::err(security::echo(e.as_bytes())),
                    }
                }
                Some("resetstat") => Reply::ok(),
                _ => Reply::err(SYNTAX),
            },
            "info" => Reply::text(info(sh, arg(1).as_deref())),
            "dbsize" => {
                let txn = Txn::new(sh.store);
                match blocking(true, || count_keys(&txn, self.db)) {
                    Ok(n) => Reply::Int(n as i64),
                    Err(e) => engine_err(&e),
                }
            }
            "bgsave" | "save" => match sh.checkpoint_dir {
                None => Reply::err("no checkpoint directory configured (--checkpoint-dir)"),
                Some(_) if cmd == "bgsave" => match (sh.bgsave)() {
                    Ok(()) => Reply::Simple("Background saving started".into()),
                    Err(e) => Reply::err(e),
                },
                Some(dir) => match blocking(true, || sh.persistence.save(sh.store.engine(), dir)) {
                    Ok(()) => Reply::ok(),
                    Err(e) => Reply::err(e),
                },
            },
            "lastsave" => Reply::Int(sh.persistence.last_save() as i64),
            "time" => {
                let us = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |d| d.as_micros());
                Reply::Array(vec![
                    Reply::text((us / 1_000_000).to_string()),
                    Reply::text((us % 1_000_000).to_string()),
                ])
            }
            _ => return None,
        };
        Some(r)
    }

    /// Runs a data command in `txn`.
    fn data_command(&mut self, sh: &Shared<'_>, txn: &mut Txn<'_>, args: Vec<Vec<u8>>) -> Reply {
        let db = self.db;
        let cmd = args
            .first()
            .and_then(|a| resolve(sh, a))
            .unwrap_or_default();
        let a = |i: usize| args.get(i).map(Vec::as_slice).unwrap_or_default();
        let n = args.len();
        let r: Result<Reply, matrixkv::Error> = (|| {
            Ok(match cmd.as_str() {
                "get" if n == 2 => match txn.meta(db, a(1))? {
                    None => Reply::Null,
                    Some(m) if m.kind == STRING => Reply::Bulk(m.payload),
                    Some(_) => Reply::err(WRONGTYPE),
                },
                "getdel" if n == 2 => match txn.meta(db, a(1))? {
                    None => Reply::Null,
                    Some(m) if m.kind == STRING => {
                        txn.delete_key(db, a(1))?;
                        Reply::Bulk(m.payload)
                    }
                    Some(_) => Reply::err(WRONGTYPE),
                },
                "set" if n >= 3 => set(txn, db, &args)?,
                "mget" if n >= 2 => Reply::Array(
                    args[1..]
                        .iter()
                        .map(|k| {
                            Ok(match txn.meta(db, k)? {
                                Some(m) if m.kind == STRING => Reply::Bulk(m.payload),
                                _ => Reply::Null,
                            })
                        })
                        .collect::<Result<_, matrixkv::Error>>()?,
                ),
                "mset" | "msetnx" if n >= 3 && n % 2 == 1 => {
                    if cmd == "msetnx" {
                        for pair in args[1..].chunks(2) {
                            if txn.meta(db, &pair[0])?.is_some() {
                                return Ok(Reply::Int(0));
                            }
                        }
                    }
                    for pair in args[1..].chunks(2) {
                        put_string(txn, db, &pair[0], pair[1].clone(), 0)?;
                    }
                    if cmd == "msetnx" {
                        Reply::Int(1)
                    } else {
                        Reply::ok()
                    }
                }
                "del" | "unlink" if n >= 2 => {
                    let mut k = 0;
                    for key in &args[1..] {
                        k += i64::from(txn.delete_key(db, key)?);
                    }
                    Reply::Int(k)
                }
                "exists" if n >= 2 => {
                    let mut k = 0;
                    for key in &args[1..] {
                        k += i64::from(txn.meta(db, key)?.is_some());
                    }
                    Reply::Int(k)
                }
                "incr" | "decr" if n == 2 => {
                    incr_by(txn, db, a(1), if cmd == "incr" { 1 } else { -1 })?
                }
                "incrby" | "decrby" if n == 3 => match int_arg(a(2)) {
                    None => Reply::err(NOT_INT),
                    Some(d) if cmd == "decrby" => match d.checked_neg() {
                        Some(d) => incr_by(txn, db, a(1), d)?,
                        None => Reply::err("decrement would overflow"),
                    },
                    Some(d) => incr_by(txn, db, a(1), d)?,
                },
                "incrbyfloat" if n == 3 => match float_arg(a(2)) {
                    None => Reply::err("value is not a valid float"),
                    Some(d) => {
                        let (cur, exp) = match txn.meta(db, a(1))? {
                            None => (0.0, 0),
                            Some(m) if m.kind != STRING => return Ok(Reply::err(WRONGTYPE)),
                            Some(m) => match float_arg(&m.payload) {
                                Some(f) => (f, m.expire_at),
                                None => return Ok(Reply::err("value is not a valid float")),
                            },
                        };
                        let v = cur + d;
                        if !v.is_finite() {
                            return Ok(Reply::err("increment would produce NaN or Infinity"));
                        }
                        let s = format_double(v);
                        put_string(txn, db, a(1), s.clone().into_bytes(), exp)?;
                        Reply::text(s)
                    }
                },
                "append" if n == 3 => {
                    let (mut v, exp) = match txn.meta(db, a(1))? {
                        None => (Vec::new(), 0),
                        Some(m) if m.kind != STRING => return Ok(Reply::err(WRONGTYPE)),
                        Some(m) => (m.payload, m.expire_at),
                    };
                    v.extend_from_slice(a(2));
                    let len = v.len();
                    put_string(txn, db, a(1), v, exp)?;
                    Reply::Int(len as i64)
                }
                "strlen" if n == 2 => match txn.meta(db, a(1))? {
                    None => Reply::Int(0),
                    Some(m) if m.kind == STRING => Reply::Int(m.payload.len() as i64),
                    Some(_) => Reply::err(WRONGTYPE),
                },
                "getrange" | "substr" if n == 4 => match (int_arg(a(2)), int_arg(a(3))) {
                    (Some(s), Some(e)) => match txn.meta(db, a(1))? {
                        None => Reply::Bulk(Vec::new()),
                        Some(m) if m.kind == STRING => {
                            Reply::Bulk(range(&m.payload, s, e).to_vec())
                        }
                        Some(_) => Reply::err(WRONGTYPE),
                    },
                    _ => Reply::err(NOT_INT),
                },
                "setrange" if n == 4 => match int_arg(a(2)) {
                    Some(off) if (0..=512 << 20).contains(&off) => {
                        let (mut v, exp) = match txn.meta(db, a(1))? {
                            None => (Vec::new(), 0),
                            Some(m) if m.kind != STRING => return Ok(Reply::err(WRONGTYPE)),
                            Some(m) => (m.payload, m.expire_at),
                        };
                        let off = off as usize;
                        if a(3).is_empty() {
                            return Ok(Reply::Int(v.len() as i64));
                        }
                        if v.len() < off + a(3).len() {
                            v.resize(off + a(3).len(), 0);
                        }
                        v[off..off + a(3).len()].copy_from_slice(a(3));
                        let len = v.len();
                        put_string(txn, db, a(1), v, exp)?;
                        Reply::Int(len as i64)
                    }
                    Some(_) => Reply::err("offset is out of range"),
                    None => Reply::err(NOT_INT),
                },
                "expire" | "pexpire" | "expireat" | "pexpireat" if n == 3 => {
                    let Some(t) = int_arg(a(2)) else {
                        return Ok(Reply::err(NOT_INT));
                    };
                    let at = match cmd.as_str() {
                        "expire" => (now_ms() as i64).checked_add(t.saturating_mul(1000)),
                        "pexpire" => (now_ms() as i64).checked_add(t),
                        "expireat" => t.checked_mul(1000),
                        _ => Some(t),
                    };
                    let Some(at) = at else {
                        return Ok(Reply::err(format!(
                            "invalid expire time in '{cmd}' command"
                        )));
                    };
                    match txn.meta(db, a(1))? {
                        None => Reply::Int(0),
                        Some(_) if at <= now_ms() as i64 => {
                            txn.delete_key(db, a(1))?;
                            Reply::Int(1)
                        }
                        Some(mut m) => {
                            m.expire_at = at as u64;
                            txn.put(db, meta_key(a(1)), m.encode())?;
                            Reply::Int(1)
                        }
                    }
                }
                "ttl" | "pttl" if n == 2 => match txn.meta(db, a(1))? {
                    None => Reply::Int(-2),
                    Some(m) if m.expire_at == 0 => Reply::Int(-1),
                    Some(m) => {
                        let left = m.expire_at.saturating_sub(now_ms());
                        Reply::Int(if cmd == "ttl" {
                            left.div_ceil(1000)
                        } else {
                            left
                        } as i64)
                    }
                },
                "persist" if n == 2 => match txn.meta(db, a(1))? {
                    Some(mut m) if m.expire_at != 0 => {
                        m.expire_at = 0;
                        txn.put(db, meta_key(a(1)), m.encode())?;
                        Reply::Int(1)
                    }
                    _ => Reply::Int(0),
                },
                "type" if n == 2 => Reply::Simple(
                    match txn.meta(db, a(1))? {
                        None => "none",
                        Some(m) if m.kind == HASH => "hash",
                        Some(_) => "string",
                    }
                    .into(),
                ),
                "keys" if n == 2 => {
                    let mut out = Vec::new();
                    let mut from = b"M".to_vec();
                    loop {
                        let page = txn.scan(db, b"M", &from, 1000)?;
                        let Some(last) = page.last().map(|(k, _)| k.clone()) else {
                            break;
                        };
                        for (k, v) in &page {
                            let key = &k[1..];
                            if Meta::decode(v).is_some_and(|m| !m.expired(now_ms()))
                                && glob::matches(a(1), key)
                            {
                                out.push(Reply::Bulk(key.to_vec()));
                            }
                        }
                        from = [last.as_slice(), b"\0"].concat();
                    }
                    Reply::Array(out)
                }
                "scan" if n >= 2 => Self::scan(sh, txn, db, &args)?,
                "flushdb" | "flushall" if n <= 2 => {
                    let dbs: Vec<usize> = if cmd == "flushall" {
                        (0..sh.store.databases()).collect()
                    } else {
                        vec![db]
                    };
                    for d in dbs {
                        // Every key of the database: metadata and hash fields.
                        txn.delete_range(d, b"H".to_vec(), b"I".to_vec())?;
                        txn.delete_range(d, b"M".to_vec(), b"N".to_vec())?;
                    }
                    Reply::ok()
                }
                "rename" if n == 3 => {
                    let Some(m) = txn.meta(db, a(1))? else {
                        return Ok(Reply::err("no such key"));
                    };
                    if a(1) == a(2) {
                        return Ok(Reply::ok());
                    }
                    if m.kind == STRING {
                        txn.delete_key(db, a(2))?;
                        txn.delete_key(db, a(1))?;
                        put_string(txn, db, a(2), m.payload, m.expire_at)?;
                    } else {
                        let fields = hash_fields(txn, db, a(1), &m)?;
                        txn.delete_key(db, a(2))?;
                        txn.delete_key(db, a(1))?;
                        let version = new_version(&m);
                        txn.put(
                            db,
                            meta_key(a(2)),
                            Meta::hash(version, fields.len() as u64, m.expire_at).encode(),
                        )?;
                        for (f, v) in fields {
                            txn.put(db, [field_prefix(a(2), version), f].concat(), v)?;
                        }
                    }
                    Reply::ok()
                }
                "hset" | "hmset" if n >= 4 && n.is_multiple_of(2) => {
                    let (version, mut count, exp) = match txn.meta(db, a(1))? {
                        Some(m) if m.kind != HASH => return Ok(Reply::err(WRONGTYPE)),
                        Some(m) => {
                            let (v, c) = m.hash_header();
                            (v, c, m.expire_at)
                        }
                        None => {
                            // A hash that expired (or a fresh key): clear what is left of it.
                            txn.delete_key(db, a(1))?;
                            (fresh_version(), 0, 0)
                        }
                    };
                    let mut added = 0;
                    for pair in args[2..].chunks(2) {
                        let fk = [field_prefix(a(1), version), pair[0].clone()].concat();
                        if txn.get(db, &fk)?.is_none() {
                            added += 1;
                            count += 1;
                        }
                        txn.put(db, fk, pair[1].clone())?;
                    }
                    txn.put(db, meta_key(a(1)), Meta::hash(version, count, exp).encode())?;
                    if cmd == "hmset" {
                        Reply::ok()
                    } else {
                        Reply::Int(added)
                    }
                }
                "hget" if n == 3 => match hash_meta(txn, db, a(1))? {
                    Err(r) => r,
                    Ok(None) => Reply::Null,
                    Ok(Some(m)) => txn
                        .get(
                            db,
                            &[field_prefix(a(1), m.hash_header().0), a(2).to_vec()].concat(),
                        )?
                        .map_or(Reply::Null, Reply::Bulk),
                },
                "hmget" if n >= 3 => match hash_meta(txn, db, a(1))? {
                    Err(r) => r,
                    Ok(m) => {
                        let mut out = Vec::new();
                        for f in &args[2..] {
                            out.push(match &m {
                                None => Reply::Null,
                                Some(m) => txn
                                    .get(
                                        db,
                                        &[field_prefix(a(1), m.hash_header().0), f.clone()]
                                            .concat(),
                                    )?
                                    .map_or(Reply::Null, Reply::Bulk),
                            });
                        }
                        Reply::Array(out)
                    }
                },
                "hexists" if n == 3 => match hash_meta(txn, db, a(1))? {
                    Err(r) => r,
                    Ok(None) => Reply::Int(0),
                    Ok(Some(m)) => Reply::Int(i64::from(
                        txn.get(
                            db,
                            &[field_prefix(a(1), m.hash_header().0), a(2).to_vec()].concat(),
                        )?
                        .is_some(),
                    )),
                },
                "hlen" if n == 2 => match hash_meta(txn, db, a(1))? {
                    Err(r) => r,
                    Ok(None) => Reply::Int(0),
                    Ok(Some(m)) => Reply::Int(m.hash_header().1 as i64),
                },
                "hdel" if n >= 3 => match hash_meta(txn, db, a(1))? {
                    Err(r) => r,
                    Ok(None) => Reply::Int(0),
                    Ok(Some(m)) => {
                        let (version, mut count) = m.hash_header();
                        let mut removed = 0;
                        for f in &args[2..] {
                            let fk = [field_prefix(a(1), version), f.clone()].concat();
                            if txn.get(db, &fk)?.is_some() {
                                txn.delete(db, fk)?;
                                removed += 1;
                                count -= 1;
                            }
                        }
                        if count == 0 {
                            txn.delete_key(db, a(1))?;
                        } else {
                            txn.put(
                                db,
                                meta_key(a(1)),
                                Meta::hash(version, count, m.expire_at).encode(),
                            )?;
                        }
                        Reply::Int(removed)
                    }
                },
                "hgetall" if n == 2 => match hash_meta(txn, db, a(1))? {
                    Err(r) => r,
                    Ok(None) => Reply::Map(vec![]),
                    Ok(Some(m)) => Reply::Map(
                        hash_fields(txn, db, a(1), &m)?
                            .into_iter()
                            .map(|(f, v)| (Reply::Bulk(f), Reply::Bulk(v)))
                            .collect(),
                    ),
                },
                "hkeys" | "hvals" if n == 2 => match hash_meta(txn, db, a(1))? {
                    Err(r) => r,
                    Ok(None) => Reply::Array(vec![]),
                    Ok(Some(m)) => Reply::Array(
                        hash_fields(txn, db, a(1), &m)?
                            .into_iter()
                            .map(|(f, v)| Reply::Bulk(if cmd == "hkeys" { f } else { v }))
                            .collect(),
                    ),
                },
                "hincrby" if n == 4 => {
                    let Some(d) = int_arg(a(3)) else {
                        return Ok(Reply::err(NOT_INT));
                    };
                    let (version, count, exp) = match txn.meta(db, a(1))? {
                        Some(m) if m.kind != HASH => return Ok(Reply::err(WRONGTYPE)),
                        Some(m) => {
                            let (v, c) = m.hash_header();
                            (v, c, m.expire_at)
                        }
                        None => {
                            txn.delete_key(db, a(1))?;
                            (fresh_version(), 0, 0)
                        }
                    };
                    let fk = [field_prefix(a(1), version), a(2).to_vec()].concat();
                    let (cur, new_field) = match txn.get(db, &fk)? {
                        None => (0, true),
                        Some(v) => match int_arg(&v) {
                            Some(c) => (c, false),
                            None => return Ok(Reply::err("hash value is not an integer")),
                        },
                    };
                    let Some(v) = cur.checked_add(d) else {
                        return Ok(Reply::err("increment or decrement would overflow"));
                    };
                    txn.put(db, fk, v.to_string().into_bytes())?;
                    txn.put(
                        db,
                        meta_key(a(1)),
                        Meta::hash(version, count + u64::from(new_field), exp).encode(),
                    )?;
                    Reply::Int(v)
                }
                "hscan" if n >= 3 => Self::hscan(sh, txn, db, &args)?,
                other => wrong_args(other),
            })
        })();
        r.unwrap_or_else(|e| engine_err(&e))
    }

    /// Where the scan of `prefix` in `db` resumes for cursor argument `arg` (`0`: its start);
    /// `None` for a cursor the server does not know or that belongs to another scan.
    fn cursor(sh: &Shared<'_>, arg: &[u8], db: usize, prefix: &[u8]) -> Option<Vec<u8>> {
        match std::str::from_utf8(arg).ok()?.parse::<u64>().ok()? {
            0 => Some(prefix.to_vec()),
            c => sh
                .cursors
                .get(c)
                .filter(|p| p.db == db && p.prefix == prefix)
                .map(|p| p.resume),
        }
    }

    /// The cursor to return after a page of `count` asked and `page` read: 0 when the scan
    /// is done.
    fn next_cursor(sh: &Shared<'_>, db: usize, prefix: &[u8], page: &Pairs, count: usize) -> u64 {
        match page.last() {
            Some((k, _)) if page.len() == count => sh.cursors.remember(Position {
                db,
                prefix: prefix.to_vec(),
                resume: [k.as_slice(), b"\0"].concat(),
            }),
            _ => 0,
        }
    }

    fn scan(
        sh: &Shared<'_>,
        txn: &Txn<'_>,
        db: usize,
        args: &[Vec<u8>],
    ) -> Result<Reply, matrixkv::Error> {
        let Some(from) = args.get(1).and_then(|c| Self::cursor(sh, c, db, b"M")) else {
            return Ok(Reply::err("invalid cursor"));
        };
        let (pattern, count, typ) = match scan_options(args, 2, true) {
            Ok(o) => o,
            Err(r) => return Ok(r),
        };
        let page = txn.scan(db, b"M", &from, count)?;
        let mut keys = Vec::new();
        for (k, v) in &page {
            let key = &k[1..];
            let Some(m) = Meta::decode(v).filter(|m| !m.expired(now_ms())) else {
                continue;
            };
            let t = if m.kind == HASH { "hash" } else { "string" };
            if pattern.as_ref().is_none_or(|p| glob::matches(p, key))
                && typ.as_deref().is_none_or(|x| x == t)
            {
                keys.push(Reply::Bulk(key.to_vec()));
            }
        }
        let next = Self::next_cursor(sh, db, b"M", &page, count);
        Ok(Reply::Array(vec![
            Reply::text(next.to_string()),
            Reply::Array(keys),
        ]))
    }

    fn hscan(
        sh: &Shared<'_>,
        txn: &Txn<'_>,
        db: usize,
        args: &[Vec<u8>],
    ) -> Result<Reply, matrixkv::Error> {
        let key = args.get(1).cloned().unwrap_or_default();
        let (pattern, count, _) = match scan_options(args, 3, false) {
            Ok(o) => o,
            Err(r) => return Ok(r),
        };
        let m = match hash_meta(txn, db, &key)? {
            Err(r) => return Ok(r),
            Ok(None) => return Ok(Reply::Array(vec![Reply::text("0"), Reply::Array(vec![])])),
            Ok(Some(m)) => m,
        };
        let prefix = field_prefix(&key, m.hash_header().0);
        let Some(from) = args.get(2).and_then(|c| Self::cursor(sh, c, db, &prefix)) else {
            return Ok(Reply::err("invalid cursor"));
        };
        let page = txn.scan(db, &prefix, &from, count)?;
        let mut out = Vec::new();
        for (k, v) in &page {
            let f = &k[prefix.len()..];
            if pattern.as_ref().is_none_or(|p| glob::matches(p, f)) {
                out.push(Reply::Bulk(f.to_vec()));
                out.push(Reply::Bulk(v.clone()));
            }
        }
        let next = Self::next_cursor(sh, db, &prefix, &page, count);
        Ok(Reply::Array(vec![
            Reply::text(next.to_string()),
            Reply::Array(out),
        ]))
    }
}

/// A scan's `MATCH` pattern, `COUNT` and `TYPE`.
type ScanOptions = (Option<Vec<u8>>, usize, Option<String>);

/// Field/value pairs.
type Pairs = Vec<(Vec<u8>, Vec<u8>)>;

/// `MATCH`, `COUNT` and (for SCAN) `TYPE` from `args[from..]`.
fn scan_options(args: &[Vec<u8>], from: usize, with_type: bool) -> Result<ScanOptions, Reply> {
    let (mut pattern, mut count, mut typ) = (None, 10usize, None);
    let mut i = from;
    while i < args.len() {
        let opt = String::from_utf8_lossy(&args[i]).to_ascii_lowercase();
        let val = args.get(i + 1).ok_or_else(|| Reply::err(SYNTAX))?;
        match opt.as_str() {
            "match" => pattern = Some(val.clone()),
            "count" => match int_arg(val) {
                Some(c) if c >= 1 => count = (c as usize).min(100_000),
                Some(_) => return Err(Reply::err(SYNTAX)),
                None => return Err(Reply::err(NOT_INT)),
            },
            "type" if with_type => typ = Some(String::from_utf8_lossy(val).to_ascii_lowercase()),
            _ => return Err(Reply::err(SYNTAX)),
        }
        i += 2;
    }
    Ok((pattern, count, typ))
}

/// The live metadata of hash `key`: `Err(WRONGTYPE)` for another type.
fn hash_meta(
    txn: &Txn<'_>,
    db: usize,
    key: &[u8],
) -> Result<Result<Option<Meta>, Reply>, matrixkv::Error> {
    Ok(match txn.meta(db, key)? {
        Some(m) if m.kind != HASH => Err(Reply::err(WRONGTYPE)),
        m => Ok(m),
    })
}

/// Every field of hash `key` (metadata `m`), in field order.
fn hash_fields(txn: &Txn<'_>, db: usize, key: &[u8], m: &Meta) -> Result<Pairs, matrixkv::Error> {
    let prefix = field_prefix(key, m.hash_header().0);
    Ok(txn
        .scan(db, &prefix, &prefix, usize::MAX)?
        .into_iter()
        .map(|(k, v)| (k[prefix.len()..].to_vec(), v))
        .collect())
}

/// A version for a new hash: the time in microseconds (above every version of earlier hashes
/// of the same key, whose fields were deleted with them anyway).
fn fresh_version() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(1, |d| d.as_micros() as u64)
}

fn new_version(old: &Meta) -> u64 {
    fresh_version().max(old.hash_header().0 + 1)
}

/// Writes string `key` (deleting a hash it replaces).
fn put_string(
    txn: &mut Txn<'_>,
    db: usize,
    key: &[u8],
    value: Vec<u8>,
    expire_at: u64,
) -> Result<(), matrixkv::Error> {
    let old_kind = txn
        .get(db, &meta_key(key))?
        .and_then(|raw| Meta::decode_header(&raw))
        .map(|(kind, _)| kind);
    write_string(txn, db, key, &value, expire_at, old_kind)
}

/// Writes string `value` at `key`, where `old_kind` is the kind of the metadata the key holds
/// (expired or not): a hash's fields go first.
fn write_string(
    txn: &mut Txn<'_>,
    db: usize,
    key: &[u8],
    value: &[u8],
    expire_at: u64,
    old_kind: Option<u8>,
) -> Result<(), matrixkv::Error> {
    if old_kind == Some(HASH) {
        txn.delete_key(db, key)?;
    }
    txn.put(
        db,
        meta_key(key),
        Meta::encode_parts(STRING, expire_at, value),
    )
}

fn incr_by(txn: &mut Txn<'_>, db: usize, key: &[u8], d: i64) -> Result<Reply, matrixkv::Error> {
    let (cur, exp) = match txn.meta(db, key)? {
        None => (0, 0),
        Some(m) if m.kind != STRING => return Ok(Reply::err(WRONGTYPE)),
        Some(m) => match int_arg(&m.payload) {
            Some(c) => (c, m.expire_at),
            None => return Ok(Reply::err(NOT_INT)),
        },
    };
    let Some(v) = cur.checked_add(d) else {
        return Ok(Reply::err("increment or decrement would overflow"));
    };
    put_string(txn, db, key, v.to_string().into_bytes(), exp)?;
    Ok(Reply::Int(v))
}

/// SET key value [NX|XX] [GET] [EX s|PX ms|EXAT s|PXAT ms|KEEPTTL].
fn set(txn: &mut Txn<'_>, db: usize, args: &[Vec<u8>]) -> Result<Reply, matrixkv::Error> {
    let (key, value) = (&args[1], &args[2]);
    let (mut nx, mut xx, mut get, mut keepttl) = (false, false, false, false);
    let mut expire_at: Option<u64> = None;
    let mut i = 3;
    while i < args.len() {
        let opt = String::from_utf8_lossy(&args[i]).to_ascii_uppercase();
        match opt.as_str() {
            "NX" => nx = true,
            "XX" => xx = true,
            "GET" => get = true,
            "KEEPTTL" => keepttl = true,
            "EX" | "PX" | "EXAT" | "PXAT" => {
                if expire_at.is_some() {
                    return Ok(Reply::err(SYNTAX));
                }
                let Some(t) = args.get(i + 1).and_then(|v| int_arg(v)) else {
                    return Ok(Reply::err(if args.get(i + 1).is_some() {
                        NOT_INT
                    } else {
                        SYNTAX
                    }));
                };
                if t <= 0 {
                    return Ok(Reply::err("invalid expire time in 'set' command"));
                }
                let now = now_ms() as i64;
                let at = match opt.as_str() {
                    "EX" => t.checked_mul(1000).and_then(|ms| now.checked_add(ms)),
                    "PX" => now.checked_add(t),
                    "EXAT" => t.checked_mul(1000),
                    _ => Some(t),
                };
                let Some(at) = at else {
                    return Ok(Reply::err("invalid expire time in 'set' command"));
                };
                expire_at = Some(at as u64);
                i += 1;
            }
            _ => return Ok(Reply::err(SYNTAX)),
        }
        i += 1;
    }
    if (nx && xx) || (keepttl && expire_at.is_some()) {
        return Ok(Reply::err(SYNTAX));
    }
    // One read of the key's metadata: its kind (expired or not, for a hash's fields) and,
    // if live, its expiry; the old value is copied out only for GET.
    let raw = txn.get(db, &meta_key(key))?;
    let header = raw.as_deref().and_then(Meta::decode_header);
    let old_kind = header.map(|(kind, _)| kind);
    let live = header.filter(|&(_, exp)| exp == 0 || now_ms() < exp);
    if get && live.is_some_and(|(kind, _)| kind != STRING) {
        return Ok(Reply::err(WRONGTYPE));
    }
    let old_value = || match (live, raw.as_deref().and_then(|r| r.get(META_HEADER..))) {
        (Some(_), Some(payload)) => Reply::Bulk(payload.to_vec()),
        _ => Reply::Null,
    };
    if (nx && live.is_some()) || (xx && live.is_none()) {
        return Ok(if get { old_value() } else { Reply::Null });
    }
    let exp = match (expire_at, keepttl) {
        (Some(at), _) => at,
        (None, true) => live.map_or(0, |(_, exp)| exp),
        (None, false) => 0,
    };
    let reply = if get { old_value() } else { Reply::ok() };
    write_string(txn, db, key, value, exp, old_kind)?;
    Ok(reply)
}

/// Bytes `start..=end` of `v`, with Redis's negative indexes.
fn range(v: &[u8], start: i64, end: i64) -> &[u8] {
    let len = v.len() as i64;
    let norm = |i: i64| if i < 0 { (len + i).max(0) } else { i };
    let (s, e) = (norm(start), norm(end).min(len - 1));
    if len == 0 || s > e || s >= len {
        return &[];
    }
    v.get(s as usize..=e as usize).unwrap_or_default()
}

/// The live keys of database `db`, counted by a scan.
///
/// # Errors
/// The engine's read errors.
pub fn count_keys(txn: &Txn<'_>, db: usize) -> Result<usize, matrixkv::Error> {
    let mut n = 0;
    let mut from = b"M".to_vec();
    loop {
        let page = txn.scan(db, b"M", &from, 1000)?;
        let Some(last) = page.last().map(|(k, _)| k.clone()) else {
            break;
        };
        n += page
            .iter()
            .filter(|(_, v)| Meta::decode(v).is_some_and(|m| !m.expired(now_ms())))
            .count();
        from = [last.as_slice(), b"\0"].concat();
    }
    Ok(n)
}

/// The commands and their arities (as `COMMAND` reports them; negative: at least).
const COMMANDS: &[(&str, i64)] = &[
    ("get", 2),
    ("set", -3),
    ("getdel", 2),
    ("mget", -2),
    ("mset", -3),
    ("msetnx", -3),
    ("del", -2),
    ("unlink", -2),
    ("exists", -2),
    ("incr", 2),
    ("incrby", 3),
    ("decr", 2),
    ("decrby", 3),
    ("incrbyfloat", 3),
    ("append", 3),
    ("strlen", 2),
    ("getrange", 4),
    ("substr", 4),
    ("setrange", 4),
    ("expire", 3),
    ("pexpire", 3),
    ("expireat", 3),
    ("pexpireat", 3),
    ("ttl", 2),
    ("pttl", 2),
    ("persist", 2),
    ("type", 2),
    ("keys", 2),
    ("scan", -2),
    ("dbsize", 1),
    ("flushdb", -1),
    ("flushall", -1),
    ("rename", 3),
    ("select", 2),
    ("hset", -4),
    ("hmset", -4),
    ("hget", 3),
    ("hmget", -3),
    ("hdel", -3),
    ("hgetall", 2),
    ("hkeys", 2),
    ("hvals", 2),
    ("hlen", 2),
    ("hexists", 3),
    ("hincrby", 4),
    ("hscan", -3),
    ("ping", -1),
    ("echo", 2),
    ("auth", -2),
    ("hello", -1),
    ("client", -2),
    ("command", -1),
    ("config", -2),
    ("info", -1),
    ("multi", 1),
    ("watch", -2),
    ("unwatch", 1),
    ("exec", 1),
    ("discard", 1),
    ("quit", 1),
    ("shutdown", -1),
    ("bgsave", -1),
    ("save", 1),
    ("lastsave", 1),
    ("time", 1),
];

fn known(cmd: &str) -> bool {
    COMMANDS.iter().any(|(c, _)| *c == cmd)
}

/// True if `n` arguments (the name included) fit `cmd`'s arity.
fn arity_ok(cmd: &str, n: usize) -> bool {
    COMMANDS
        .iter()
        .find(|(c, _)| *c == cmd)
        .is_none_or(|&(_, a)| {
            let need = a.unsigned_abs() as usize;
            if a < 0 { n >= need } else { n == need }
        })
}

/// True for a command EXEC hands to [`Session::data_command`] once
/// [`Session::server_command`] declined it: every known command but the block's own and the
/// connection's (which are never queued).
fn runs_in_exec(cmd: &str) -> bool {
    known(cmd)
        && !matches!(
            cmd,
            "multi" | "exec" | "discard" | "quit" | "shutdown" | "watch" | "unwatch"
        )
}

/// Commands whose work grows with the data (they run where blocking is allowed).
fn is_slow(cmd: &str) -> bool {
    matches!(cmd, "keys" | "flushall" | "flushdb" | "rename")
}

/// Runs `f`, on a multi-threaded runtime as blocking work (`block_in_place`: the worker's
/// other connections move to another worker meanwhile) when `slow`.
fn blocking<T>(slow: bool, f: impl FnOnce() -> T) -> T {
    let multi = tokio::runtime::Handle::try_current()
        .is_ok_and(|h| h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread);
    if slow && multi {
        tokio::task::block_in_place(f)
    } else {
        f()
    }
}

/// The command a client's name for it runs (lower case), after `rename-command`; `None` for
/// a name renamed away.
fn resolve(sh: &Shared<'_>, name: &[u8]) -> Option<String> {
    let lower = String::from_utf8_lossy(name).to_ascii_lowercase();
    if sh.renamed.is_empty() {
        return Some(lower);
    }
    match sh.renamed.get(&lower) {
        None => Some(lower),
        Some(to) => to.clone(),
    }
}

fn unknown(cmd: &[u8], args: &[Vec<u8>]) -> Reply {
    let rest: Vec<String> = args
        .iter()
        .skip(1)
        .take(3)
        .map(|a| format!("'{}'", security::echo(a)))
        .collect();
    Reply::err(format!(
        "unknown command '{}', with args beginning with: {}",
        security::echo(cmd),
        rest.join(" ")
    ))
}

/// The `INFO` text (sections `server`, `clients`, `keyspace`, `engine`; `all` or none: every
/// section).
fn info(sh: &Shared<'_>, section: Option<&str>) -> String {
    let want = |s: &str| {
        section.is_none_or(|x| {
            x.eq_ignore_ascii_case(s)
                || x.eq_ignore_ascii_case("all")
                || x.eq_ignore_ascii_case("everything")
        })
    };
    let mut out = String::new();
    if want("server") {
        out.push_str("# Server\r\nredis_version:7.0.0\r\nmatrixkv_version:");
        out.push_str(env!("CARGO_PKG_VERSION"));
        out.push_str("\r\nredis_mode:standalone\r\narch_bits:64\r\n");
        for (k, v) in (sh.config)("*") {
            // Secrets stay out of INFO (CONFIG GET is the authenticated way to read them).
            if k != "requirepass" {
                out.push_str(&format!("{k}:{v}\r\n"));
            }
        }
        out.push_str("\r\n");
    }
    if want("clients") {
        let clients = (sh.client_list)().lines().count();
        out.push_str(&format!("# Clients\r\nconnected_clients:{clients}\r\n\r\n"));
    }
    if want("persistence") {
        out.push_str(&sh.persistence.info());
    }
    if want("keyspace") {
        out.push_str("# Keyspace\r\n");
        for (d, n) in (sh.key_counts)().into_iter().enumerate() {
            if n > 0 {
                out.push_str(&format!("db{d}:keys={n},expires=0,avg_ttl=0\r\n"));
            }
        }
        out.push_str("\r\n");
    }
    if want("engine") {
        out.push_str("# Engine\r\n");
        let db = sh.store.engine();
        for name in matrixkv::PROPERTY_NAMES {
            if let Ok(v) = db.get_int_property(name) {
                out.push_str(&format!("{}:{v}\r\n", name.replace(['.', '-'], "_")));
            }
        }
        let s = db.stats();
        out.push_str(&format!(
            "user_ops:{}\r\nuser_bytes:{}\r\nwrite_groups:{}\r\nwal_bytes:{}\r\nwal_syncs:{}\r\nflushes:{}\r\ncompactions:{}\r\n",
            s.user_ops, s.user_bytes, s.write_groups, s.wal_bytes, s.wal_syncs, s.flushes, s.compactions
        ));
        // Write amplification of the slow tier and of both tiers (WAL included).
        let user = s.user_bytes.max(1) as f64;
        out.push_str(&format!(
            "write_amplification_slow_tier:{:.3}\r\nwrite_amplification_all_tiers:{:.3}\r\n",
            s.slow_bytes_written as f64 / user,
            (s.slow_bytes_written + s.wal_bytes + s.fast_sst_bytes_written) as f64 / user
        ));
        out.push_str(&format!(
            "stalls:{}\r\nstall_memtable_micros:{}\r\nstall_l0_slowdown_micros:{}\r\nstall_l0_stop_micros:{}\r\nstall_container_micros:{}\r\n",
            s.stalls,
            s.stall_memtable_micros,
            s.stall_l0_slowdown_micros,
            s.stall_l0_stop_micros,
            s.stall_container_micros
        ));
        for line in s.to_string().lines() {
            out.push_str("# ");
            out.push_str(line);
            out.push_str("\r\n");
        }
    }
    out
}

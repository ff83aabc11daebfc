//! The network side: the listener, one task per connection, limits, and a clean shutdown.

use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Notify;

use crate::commands::{After, Session, Shared};
use crate::conn::{Closed, Conn, NetSettings};
use crate::cursors::Cursors;
use crate::limits::{OutputLimit, parse_memory, parse_output_buffer_limits};
use crate::persistence::Persistence;
use crate::resp::{Limits, Parse, Reply};
use crate::store::Store;

/// The server's settings (flags, a config file, `CONFIG SET`).
#[derive(Debug, Clone)]
pub struct Config {
    /// Address to listen on. Default 127.0.0.1.
    pub bind: String,
    /// Port (0: any free port). Default 6379.
    pub port: u16,
    /// The database directory (slow tier `<dir>/slow` unless `slow_dir`).
    pub dir: PathBuf,
    /// The fast tier's directory. Default `<dir>/fast`.
    pub fast_dir: Option<PathBuf>,
    /// Redis databases (keyspaces). Default 16.
    pub databases: usize,
    /// The password (`requirepass`); `None`: no AUTH needed.
    pub requirepass: Option<String>,
    /// Most connections at once. Default 10,000.
    pub maxclients: usize,
    /// Close a connection with no byte read or written for this long, also when it is
    /// stalled writing replies (0: never). Default 0. `CONFIG SET` reaches open connections.
    pub timeout: Duration,
    /// `client-output-buffer-limit` on replies produced and not yet taken by the client.
    /// Default `256mb 64mb 60` ([`OutputLimit::default`]).
    pub output_limit: OutputLimit,
    /// Largest argument after AUTH. Default 512 MiB.
    pub max_bulk: usize,
    /// Where `BGSAVE` writes checkpoints (`None`: BGSAVE is refused).
    pub checkpoint_dir: Option<PathBuf>,
    /// Engine options: memtable size.
    pub write_buffer_bytes: Option<usize>,
    /// Engine options: matrix container size (fixed at creation).
    pub container_bytes: Option<u64>,
    /// When writes become durable (`appendfsync`). Default `everysec`, as Redis's.
    pub appendfsync: AppendFsync,
    /// `rename-command OLD NEW` lines (lower case): `OLD` answers as unknown, `NEW` runs it
    /// (an empty `NEW` disables the command).
    pub renamed_commands: Vec<(String, String)>,
    /// Redis's protected mode: with no password, clients from other hosts are refused.
    /// Default on.
    pub protected_mode: bool,
    /// `client-query-buffer-limit`: most bytes held for one client's request not yet whole.
    /// Default 1 GiB, as Redis's.
    pub query_buffer_limit: usize,
    /// Close a connection whose replies wait and that takes no byte of them for this long
    /// (0: never). Default 60 s.
    pub write_timeout: Duration,
    /// `tcp-keepalive`: TCP keepalive probes after this long idle, so dead peers are found
    /// (0: off). Default 300 s, as Redis's.
    pub tcp_keepalive: Duration,
}

/// Settings only a config file or a flag can set: they need a restart (the listener, the
/// engine) or they would let a client write files anywhere (`checkpoint-dir`, `dir`).
const IMMUTABLE: &[&str] = &[
    "bind",
    "port",
    "dir",
    "fast-dir",
    "databases",
    "checkpoint-dir",
    "write-buffer-bytes",
    "container-bytes",
    "rename-command",
];

/// redis.conf directives this server does not implement and that change nothing a client
/// relies on: a config file written for Redis starts with a warning for each.
const IGNORED_REDIS_DIRECTIVES: &[&str] = &[
    "save",
    "loglevel",
    "logfile",
    "daemonize",
    "supervised",
    "pidfile",
    "tcp-backlog",
    "unixsocket",
    "unixsocketperm",
    "always-show-logo",
    "set-proc-title",
    "proc-title-template",
    "locale-collate",
    "stop-writes-on-bgsave-error",
    "rdbcompression",
    "rdbchecksum",
    "dbfilename",
    "rdb-del-sync-files",
    "appendonly",
    "appendfilename",
    "appenddirname",
    "no-appendfsync-on-rewrite",
    "auto-aof-rewrite-percentage",
    "auto-aof-rewrite-min-size",
    "aof-load-truncated",
    "aof-use-rdb-preamble",
    "aof-timestamp-enabled",
    "lua-time-limit",
    "busy-reply-threshold",
    "slowlog-log-slower-than",
    "slowlog-max-len",
    "latency-monitor-threshold",
    "notify-keyspace-events",
    "hash-max-listpack-entries",
    "hash-max-listpack-value",
    "hash-max-ziplist-entries",
    "hash-max-ziplist-value",
    "list-max-listpack-size",
    "list-max-ziplist-size",
    "list-compress-depth",
    "set-max-intset-entries",
    "set-max-listpack-entries",
    "set-max-listpack-value",
    "zset-max-listpack-entries",
    "zset-max-listpack-value",
    "zset-max-ziplist-entries",
    "zset-max-ziplist-value",
    "hll-sparse-max-bytes",
    "stream-node-max-bytes",
    "stream-node-max-entries",
    "activerehashing",
    "hz",
    "dynamic-hz",
    "aof-rewrite-incremental-fsync",
    "rdb-save-incremental-fsync",
    "jemalloc-bg-thread",
    "lazyfree-lazy-eviction",
    "lazyfree-lazy-expire",
    "lazyfree-lazy-server-del",
    "lazyfree-lazy-user-del",
    "lazyfree-lazy-user-flush",
    "replica-lazy-flush",
    "replica-serve-stale-data",
    "replica-read-only",
    "repl-diskless-sync",
    "repl-diskless-sync-delay",
    "repl-diskless-sync-max-replicas",
    "repl-diskless-load",
    "repl-disable-tcp-nodelay",
    "replica-priority",
    "oom-score-adj",
    "oom-score-adj-values",
    "disable-thp",
    "io-threads",
    "io-threads-do-reads",
    "maxmemory-policy",
    "maxmemory-samples",
    "maxmemory-eviction-tenacity",
    "acllog-max-len",
    "activedefrag",
    "crash-log-enabled",
    "crash-memcheck-enabled",
    "enable-protected-configs",
    "enable-debug-command",
    "enable-module-command",
    "sanitize-dump-payload",
    "shutdown-timeout",
    "shutdown-on-sigint",
    "shutdown-on-sigterm",
    "syslog-enabled",
    "syslog-ident",
    "syslog-facility",
];

/// The words of a redis.conf value: split on spaces, `"..."` and `'...'` kept whole (an
/// empty `""` is an empty word).
fn conf_words(v: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut cur: Option<String> = None;
    let mut quote: Option<char> = None;
    for c in v.chars() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), c) => cur.get_or_insert_with(String::new).push(c),
            (None, '"' | '\'') => {
                quote = Some(c);
                cur.get_or_insert_with(String::new);
            }
            (None, c) if c.is_whitespace() => words.extend(cur.take()),
            (None, c) => cur.get_or_insert_with(String::new).push(c),
        }
    }
    words.extend(cur);
    words
}

/// Redis's `appendfsync`: when acknowledged writes become durable (survive a power loss; a
/// crash of the server process never loses them).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AppendFsync {
    /// Every write is a sync write.
    Always,
    /// Every write acknowledged so far is made durable once a second (`Db::sync_wal`).
    EverySec,
    /// When the engine flushes its memtables, and at shutdown.
    No,
}

impl AppendFsync {
    /// The redis.conf spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            AppendFsync::Always => "always",
            AppendFsync::EverySec => "everysec",
            AppendFsync::No => "no",
        }
    }

    fn parse(v: &str) -> Option<AppendFsync> {
        [AppendFsync::Always, AppendFsync::EverySec, AppendFsync::No]
            .into_iter()
            .find(|m| m.as_str().eq_ignore_ascii_case(v))
    }
}

impl Default for Config {
    fn default() -> Config {
        Config {
            bind: "127.0.0.1".into(),
            port: 6379,
            dir: PathBuf::from("matrixkv-data"),
            fast_dir: None,
            databases: 16,
            requirepass: None,
            maxclients: 10_000,
            timeout: Duration::ZERO,
            output_limit: OutputLimit::default(),
            max_bulk: 512 << 20,
            checkpoint_dir: None,
            write_buffer_bytes: None,
            container_bytes: None,
            appendfsync: AppendFsync::EverySec,
            renamed_commands: Vec::new(),
            protected_mode: true,
            query_buffer_limit: 1 << 30,
            write_timeout: Duration::from_secs(60),
            tcp_keepalive: Duration::from_secs(300),
        }
    }
}

impl Config {
    /// Reads `name value` lines (redis.conf style; `#` comments) into `self`.
    ///
    /// # Errors
    /// An unknown directive or a bad value, naming the line.
    pub fn apply_file(&mut self, text: &str) -> Result<()> {
        for (i, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let (k, v) = line.split_once(char::is_whitespace).unwrap_or((line, ""));
            let key = k.to_ascii_lowercase();
            if key == "rename-command" {
                let words = conf_words(v);
                let [old, new] = words.as_slice() else {
                    anyhow::bail!("config line {}: rename-command takes two names", i + 1);
                };
                self.renamed_commands
                    .push((old.to_ascii_lowercase(), new.to_ascii_lowercase()));
                continue;
            }
            match self.set(k, v.trim().trim_matches('"')) {
                Ok(()) => {}
                Err(_) if IGNORED_REDIS_DIRECTIVES.contains(&key.as_str()) => {
                    log::warn!(
                        "config line {}: '{key}' is a Redis setting matrixkv-server does not \
                         implement; ignored",
                        i + 1
                    );
                }
                Err(e) => anyhow::bail!("config line {}: {e}", i + 1),
            }
        }
        Ok(())
    }

    /// `CONFIG SET`: as [`Config::set`], but settings that need a restart or that could
    /// write outside the database ([`IMMUTABLE`]) are refused.
    ///
    /// # Errors
    /// An immutable or unknown name, or a bad value.
    pub fn set_at_runtime(&mut self, name: &str, value: &str) -> std::result::Result<(), String> {
        let lower = name.to_ascii_lowercase();
        if IMMUTABLE.contains(&lower.as_str()) {
            return Err(format!(
                "CONFIG SET failed (possibly related to argument '{lower}') - can't set \
                 immutable config"
            ));
        }
        self.set(name, value)
    }

    /// The `rename-command` table as commands look it up: a client's name for a command
    /// (lower case) -> the command it runs, `None` if renamed away or disabled.
    pub fn rename_map(&self) -> HashMap<String, Option<String>> {
        let mut map = HashMap::new();
        for (old, _) in &self.renamed_commands {
            map.insert(old.clone(), None);
        }
        for (old, new) in &self.renamed_commands {
            if !new.is_empty() {
                map.insert(new.clone(), Some(old.clone()));
            }
        }
        map
    }

    /// Sets one setting by its redis.conf name.
    ///
    /// # Errors
    /// An unknown name or a bad value.
    pub fn set(&mut self, name: &str, value: &str) -> std::result::Result<(), String> {
        let num = |v: &str| {
            v.parse::<u64>()
                .map_err(|_| format!("invalid value '{v}' for '{name}'"))
        };
        match name.to_ascii_lowercase().as_str() {
            "bind" => {
                self.bind = value
                    .split_whitespace()
                    .next()
                    .unwrap_or("127.0.0.1")
                    .into()
            }
            "port" => {
                self.port = num(value)?
                    .try_into()
                    .map_err(|_| "port out of range".to_string())?
            }
            "dir" => self.dir = value.into(),
            "fast-dir" => self.fast_dir = Some(value.into()),
            "databases" => self.databases = (num(value)? as usize).clamp(1, 100),
            "requirepass" => self.requirepass = (!value.is_empty()).then(|| value.into()),
            "maxclients" => self.maxclients = num(value)? as usize,
            "timeout" => self.timeout = Duration::from_secs(num(value)?),
            "client-output-buffer-limit" | "output-limit" => {
                // Limits of other classes (replica, pubsub) are accepted and unused.
                if let Some(l) = parse_output_buffer_limits(value)? {
                    self.output_limit = l;
                }
            }
            "proto-max-bulk-len" => self.max_bulk = num(value)? as usize,
            "protected-mode" => {
                self.protected_mode = match value.to_ascii_lowercase().as_str() {
                    "yes" => true,
                    "no" => false,
                    _ => return Err("invalid value for 'protected-mode' (yes or no)".to_string()),
                }
            }
            "checkpoint-dir" => self.checkpoint_dir = Some(value.into()),
            "write-buffer-bytes" => self.write_buffer_bytes = Some(num(value)? as usize),
            "container-bytes" => self.container_bytes = Some(num(value)?),
            "appendfsync" => {
                self.appendfsync = AppendFsync::parse(value).ok_or_else(|| {
                    format!("invalid value '{value}' for 'appendfsync' (always, everysec or no)")
                })?
            }
            "client-query-buffer-limit" => {
                self.query_buffer_limit = usize::try_from(parse_memory(value)?)
                    .map_err(|_| format!("invalid value '{value}' for '{name}'"))?
            }
            "write-timeout" => self.write_timeout = Duration::from_secs(num(value)?),
            "tcp-keepalive" => self.tcp_keepalive = Duration::from_secs(num(value)?),
            other => return Err(format!("unknown setting '{other}'")),
        }
        Ok(())
    }

    /// `CONFIG GET` pairs matching `pattern`.
    pub fn get(&self, pattern: &str) -> Vec<(String, String)> {
        let all = [
            ("bind", self.bind.clone()),
            ("port", self.port.to_string()),
            ("dir", self.dir.display().to_string()),
            ("databases", self.databases.to_string()),
            ("requirepass", self.requirepass.clone().unwrap_or_default()),
            ("maxclients", self.maxclients.to_string()),
            ("timeout", self.timeout.as_secs().to_string()),
            ("client-output-buffer-limit", self.output_limit.to_string()),
            ("proto-max-bulk-len", self.max_bulk.to_string()),
            ("appendfsync", self.appendfsync.as_str().to_string()),
            (
                "protected-mode",
                if self.protected_mode { "yes" } else { "no" }.to_string(),
            ),
            (
                "client-query-buffer-limit",
                self.query_buffer_limit.to_string(),
            ),
            ("write-timeout", self.write_timeout.as_secs().to_string()),
            ("tcp-keepalive", self.tcp_keepalive.as_secs().to_string()),
        ];
        all.into_iter()
            .filter(|(k, _)| crate::glob::matches(pattern.as_bytes(), k.as_bytes()))
            .map(|(k, v)| (k.to_string(), v))
            .collect()
    }

    fn engine_options(&self) -> matrixkv::Options {
        let mut o = matrixkv::Options::new(&self.dir);
        if let Some(f) = &self.fast_dir {
            o.fast_dir = f.clone();
        }
        if let Some(w) = self.write_buffer_bytes {
            o.write_buffer_bytes = w;
        }
        if let Some(c) = self.container_bytes {
            o.container_bytes = c;
        }
        o
    }
}

/// One connected client, for `CLIENT LIST`.
struct ClientInfo {
    addr: SocketAddr,
    since: Instant,
    name: String,
    db: usize,
    cmd: String,
}

/// A running server: its address and a handle to stop it.
pub struct Running {
    /// The address it listens on (the port chosen when 0 was given).
    pub addr: SocketAddr,
    stop: Arc<Notify>,
    done: tokio::task::JoinHandle<Result<()>>,
}

impl Running {
    /// Asks the server to stop (as SHUTDOWN does) and waits until the engine is closed.
    ///
    /// # Errors
    /// The engine's close errors.
    pub async fn shutdown(self) -> Result<()> {
        self.stop.notify_one();
        self.done.await.context("server task")?
    }

    /// Waits until the server stops by itself (SHUTDOWN or a signal).
    ///
    /// # Errors
    /// The engine's close errors.
    pub async fn wait(self) -> Result<()> {
        self.done.await.context("server task")?
    }
}

struct State {
    store: Store,
    config: std::sync::RwLock<Config>,
    clients: std::sync::Mutex<BTreeMap<u64, ClientInfo>>,
    connected: AtomicUsize,
    next_id: AtomicU64,
    stop: Arc<Notify>,
    /// Told after every `CONFIG SET`, so open connections read their settings again.
    config_changed: tokio::sync::watch::Sender<()>,
    /// `rename-command`, fixed at start ([`Config::rename_map`]).
    renamed: HashMap<String, Option<String>>,
    cursors: Cursors,
    persistence: Arc<Persistence>,
    key_counts: KeyCounts,
}

/// How often `INFO keyspace`'s counts are refreshed, at most.
const KEY_COUNT_AGE: Duration = Duration::from_secs(5);

/// The keys of each database as INFO reports them: counted by a background thread when an
/// INFO finds them older than [`KEY_COUNT_AGE`] (the caller gets the last counts meanwhile).
#[derive(Default)]
struct KeyCounts {
    last: std::sync::Mutex<(Option<Instant>, Vec<u64>)>,
    counting: std::sync::atomic::AtomicBool,
}

/// The last key counts of `state`, starting a recount in the background if they are stale.
fn key_counts(state: &Arc<State>) -> Vec<u64> {
    let (at, counts) = state
        .key_counts
        .last
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .clone();
    let stale = at.is_none_or(|t| t.elapsed() >= KEY_COUNT_AGE);
    if stale && !state.key_counts.counting.swap(true, Ordering::AcqRel) {
        let st = Arc::clone(state);
        let started = std::thread::Builder::new()
            .name("matrixkv-keycount".into())
            .spawn(move || {
                let txn = crate::store::Txn::new(&st.store);
                let counts: Vec<u64> = (0..st.store.databases())
                    .map(|d| crate::commands::count_keys(&txn, d).map_or(0, |n| n as u64))
                    .collect();
                drop(txn);
                *st.key_counts
                    .last
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner) =
                    (Some(Instant::now()), counts);
                st.key_counts.counting.store(false, Ordering::Release);
            });
        if started.is_err() {
            state.key_counts.counting.store(false, Ordering::Release);
        }
    }
    counts
}

/// Opens the database and starts listening; returns once the socket is bound.
///
/// # Errors
/// The engine's open errors, or the address cannot be bound.
pub async fn start(config: Config) -> Result<Running> {
    let store = Store::open(config.engine_options(), config.databases.max(1))
        .with_context(|| format!("opening the database in {}", config.dir.display()))?;
    let listener = TcpListener::bind((config.bind.as_str(), config.port))
        .await
        .with_context(|| format!("binding {}:{}", config.bind, config.port))?;
    let addr = listener.local_addr()?;
    log::info!(
        "matrixkv-server listening on {addr}, database {}",
        config.dir.display()
    );
    let stop = Arc::new(Notify::new());
    let renamed = config.rename_map();
    let state = Arc::new(State {
        store,
        config: std::sync::RwLock::new(config),
        clients: std::sync::Mutex::new(BTreeMap::new()),
        connected: AtomicUsize::new(0),
        next_id: AtomicU64::new(1),
        stop: Arc::clone(&stop),
        renamed,
        cursors: Cursors::default(),
        persistence: Arc::new(Persistence::default()),
        key_counts: KeyCounts::default(),
        config_changed: tokio::sync::watch::Sender::new(()),
    });
    let done = tokio::spawn(accept_loop(listener, state));
    Ok(Running { addr, stop, done })
}

async fn accept_loop(listener: TcpListener, state: Arc<State>) -> Result<()> {
    let mut tasks = tokio::task::JoinSet::new();
    let stop_syncing = Arc::new(Notify::new());
    let syncer = tokio::spawn(sync_every_second(
        Arc::clone(&state),
        Arc::clone(&stop_syncing),
    ));
    loop {
        tokio::select! {
            () = state.stop.notified() => break,
            accepted = listener.accept() => {
                let (sock, addr) = match accepted {
                    Ok(a) => a,
                    Err(e) => {
                        log::warn!("accept failed: {e}");
                        tokio::time::sleep(Duration::from_millis(10)).await;
                        continue;
                    }
                };
                let max = read_config(&state).maxclients;
                if state.connected.load(Ordering::Acquire) >= max {
                    let mut sock = sock;
                    let _ = sock.write_all(b"-ERR max number of clients reached\r\n").await;
                    continue;
                }
                state.connected.fetch_add(1, Ordering::AcqRel);
                let st = Arc::clone(&state);
                tasks.spawn(async move {
                    if let Err(e) = serve(sock, addr, &st).await {
                        log::debug!("connection {addr}: {e}");
                    }
                    st.connected.fetch_sub(1, Ordering::AcqRel);
                });
            }
            Some(_) = tasks.join_next(), if !tasks.is_empty() => {}
        }
    }
    log::info!("matrixkv-server shutting down");
    tasks.abort_all();
    while tasks.join_next().await.is_some() {}
    // Not aborted: a sync in progress finishes (and gives the store back) first.
    stop_syncing.notify_one();
    let _ = syncer.await;
    // A background save or key count holds the state: let it finish.
    state.persistence.wait();
    while state.key_counts.counting.load(Ordering::Acquire) {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let state =
        Arc::try_unwrap(state).map_err(|_| anyhow::anyhow!("connections still hold the store"))?;
    state.store.close().context("closing the engine")?;
    Ok(())
}

/// `appendfsync everysec`: once a second, makes every write acknowledged so far durable;
/// stops when `stop` is notified (after the sync in progress, if any).
async fn sync_every_second(state: Arc<State>, stop: Arc<Notify>) {
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            () = stop.notified() => return,
            _ = tick.tick() => {}
        }
        if read_config(&state).appendfsync != AppendFsync::EverySec {
            continue;
        }
        let st = Arc::clone(&state);
        match tokio::task::spawn_blocking(move || st.store.engine().sync_wal()).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => log::error!("appendfsync everysec: the sync failed: {e}"),
            Err(e) => log::error!("appendfsync everysec: the sync task failed: {e}"),
        }
    }
}

fn read_config(state: &State) -> std::sync::RwLockReadGuard<'_, Config> {
    state
        .config
        .read()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

async fn serve(sock: TcpStream, addr: SocketAddr, state: &Arc<State>) -> Result<()> {
    sock.set_nodelay(true)?;
    let id = state.next_id.fetch_add(1, Ordering::Relaxed);
    let (password, max_bulk, keepalive, protected) = {
        let c = read_config(state);
        (
            c.requirepass.clone(),
            c.max_bulk,
            c.tcp_keepalive,
            c.protected_mode,
        )
    };
    if crate::security::protected_refuses(protected, password.is_some(), addr.ip()) {
        log::warn!("client {addr}: refused by protected mode (no password is set)");
        let mut out = Vec::new();
        Reply::Error(crate::security::DENIED.into()).encode(2, &mut out);
        let mut sock = sock;
        sock.write_all(&out).await?;
        return Ok(());
    }
    if !keepalive.is_zero() {
        // As Redis: probes after `keepalive` idle, then every third of it.
        let params = socket2::TcpKeepalive::new().with_time(keepalive);
        #[cfg(any(target_os = "linux", target_os = "macos", target_os = "windows"))]
        let params = params.with_interval((keepalive / 3).max(Duration::from_secs(1)));
        if let Err(e) = socket2::SockRef::from(&sock).set_tcp_keepalive(&params) {
            log::debug!("connection {addr}: TCP keepalive not set: {e}");
        }
    }
    let mut session = Session::new(id, password.is_none());
    state
        .clients
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .insert(
            id,
            ClientInfo {
                addr,
                since: Instant::now(),
                name: String::new(),
                db: 0,
                cmd: String::new(),
            },
        );
    let result = connection_loop(&sock, state, &mut session, max_bulk).await;
    state
        .clients
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .remove(&id);
    result
}

/// Writing commands a client pipelined back to back run as one group
/// ([`Session::execute_writes`]) of at most this many commands...
const MAX_WRITE_GROUP: usize = 256;
/// ...and about this many bytes of arguments.
const MAX_WRITE_GROUP_BYTES: usize = 4 << 20;

/// The settings a command runs with, read from the configuration as it runs: the
/// checkpoint directory, sync writes, the password.
fn run_settings(state: &State) -> (Option<PathBuf>, bool, Option<String>) {
    let c = read_config(state);
    (
        c.checkpoint_dir.clone(),
        c.appendfsync == AppendFsync::Always,
        c.requirepass.clone(),
    )
}

/// BGSAVE: a checkpoint of `state`'s engine on a thread of its own.
fn bgsave(state: &Arc<State>) -> std::result::Result<(), String> {
    let Some(dir) = read_config(state).checkpoint_dir.clone() else {
        return Err("no checkpoint directory configured (--checkpoint-dir)".into());
    };
    let st = Arc::clone(state);
    state
        .persistence
        .start_background(&dir, move |to| st.store.engine().checkpoint(to))
}

/// Says why a connection is closed (the client sees only the close).
fn log_close(id: u64, why: Closed, net: &NetSettings) {
    match why {
        Closed::Eof => {}
        Closed::Idle => log::debug!("client {id}: idle for {:?}, closing", net.timeout),
        Closed::WriteStalled => log::warn!(
            "client {id}: took no reply bytes for {:?}, closing",
            net.write_timeout
        ),
        Closed::OutputHard | Closed::OutputSoft => log::warn!(
            "client {id}: unsent replies over the output limit ({}), closing",
            net.output
        ),
    }
}

async fn connection_loop(
    sock: &TcpStream,
    state: &Arc<State>,
    session: &mut Session,
    max_bulk: usize,
) -> Result<()> {
    let client_list = || client_list(state);
    let config_get = |p: &str| read_config(state).get(p);
    let config_set = |k: &str, v: &str| {
        let r = state
            .config
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .set_at_runtime(k, v);
        state.config_changed.send_replace(());
        r
    };
    let reload = || NetSettings::of(&read_config(state));
    let mut conn = Conn::new(sock, &reload, state.config_changed.subscribe());
    // Ends the connection when `$e` says it must close.
    macro_rules! close_if {
        ($e:expr) => {
            if let Some(why) = $e {
                log_close(session.id, why, &conn.net);
                return Ok(());
            }
        };
    }
    let start_bgsave = || bgsave(state);
    let counts = || key_counts(state);
    // Pipelined writes waiting to run as one group, and their argument bytes.
    let mut group: Vec<Vec<Vec<u8>>> = Vec::new();
    let mut group_bytes = 0usize;
    loop {
        // Answer every whole command buffered (pipelining); replies go out as they are made.
        loop {
            let limits = if session.authenticated {
                Limits {
                    max_bulk,
                    max_query: conn.net.max_query,
                    ..Limits::AUTHENTICATED
                }
            } else {
                Limits {
                    max_query: conn.net.max_query,
                    ..Limits::UNAUTHENTICATED
                }
            };
            let (next, error) = match conn.input.next(&limits) {
                Parse::Command(args, _) => {
                    if args.is_empty() {
                        continue;
                    }
                    let bytes: usize = args.iter().map(Vec::len).sum();
                    if session.joins_write_group(&state.renamed, &args)
                        && (group.is_empty()
                            || (group.len() < MAX_WRITE_GROUP
                                && group_bytes + bytes <= MAX_WRITE_GROUP_BYTES))
                    {
                        group_bytes += bytes;
                        group.push(args);
                        continue;
                    }
                    (Some((args, bytes)), None)
                }
                Parse::Incomplete => (None, None),
                Parse::Error(msg) => (None, Some(msg)),
            };
            if group.is_empty() && next.is_none() && error.is_none() {
                break;
            }
            let (checkpoint_dir, sync_writes, password) = run_settings(state);
            let shared = Shared {
                store: &state.store,
                password: password.as_deref(),
                renamed: &state.renamed,
                cursors: &state.cursors,
                persistence: &state.persistence,
                bgsave: &start_bgsave,
                key_counts: &counts,
                client_list: &client_list,
                config: &config_get,
                config_set: &config_set,
                checkpoint_dir: checkpoint_dir.as_deref(),
                sync_writes,
            };
            let (mut after, more) = (After::Continue, next.is_some());
            // The group runs before whatever comes after it.
            if !group.is_empty() {
                group_bytes = 0;
                let replies = session
                    .execute_writes(&shared, std::mem::take(&mut group))
                    .await;
                for reply in replies {
                    close_if!(conn.push(reply, session.proto).await?);
                }
            }
            if let Some(msg) = error {
                let reply = Reply::Error(format!("ERR Protocol error: {msg}"));
                close_if!(conn.push(reply, session.proto).await?);
                close_if!(conn.drain().await?);
                return Ok(());
            }
            if let Some((args, bytes)) = next {
                if session.joins_write_group(&state.renamed, &args) {
                    // It did not fit the group just run: it starts the next one.
                    group_bytes = bytes;
                    group.push(args);
                } else {
                    let (reply, a) = session.execute(&shared, args).await;
                    close_if!(conn.push(reply, session.proto).await?);
                    after = a;
                }
            }
            note_client(state, session);
            match after {
                After::Continue => {}
                After::Close => {
                    close_if!(conn.drain().await?);
                    return Ok(());
                }
                After::Abort => return Ok(()),
                After::Shutdown => {
                    close_if!(conn.drain().await?);
                    state.stop.notify_one();
                    return Ok(());
                }
            }
            if !more {
                break;
            }
        }
        match conn.read_more().await? {
            Ok(_) => {}
            Err(Closed::Eof) => {
                // Replies to what the client sent before closing its side still go out.
                close_if!(conn.drain().await?);
                return Ok(());
            }
            Err(why) => close_if!(Some(why)),
        }
    }
}

/// Records the session's name, database and last command for `CLIENT LIST`.
fn note_client(state: &State, session: &Session) {
    if let Some(c) = state
        .clients
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .get_mut(&session.id)
    {
        c.name = session.name.clone().unwrap_or_default();
        c.db = session.db;
        c.cmd = session.last_command.clone();
    }
}

fn client_list(state: &State) -> String {
    let now = Instant::now();
    state
        .clients
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .iter()
        .map(|(id, c)| {
            format!(
                "id={id} addr={} name={} age={} db={} cmd={}\n",
                c.addr,
                c.name,
                now.duration_since(c.since).as_secs(),
                c.db,
                c.cmd
            )
        })
        .collect()
}

/// Runs the server until SHUTDOWN, SIGTERM or Ctrl-C, then closes the engine.
///
/// # Errors
/// The engine's open or close errors, or the address cannot be bound.
pub async fn run(config: Config) -> Result<()> {
    let running = start(config).await?;
    println!("matrixkv-server ready on {}", running.addr);
    let stop = Arc::clone(&running.stop);
    tokio::spawn(async move {
        let term = async {
            #[cfg(unix)]
            {
                if let Ok(mut s) =
                    tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
                {
                    s.recv().await;
                }
            }
        };
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            () = term => {}
        }
        log::info!("signal received, shutting down");
        stop.notify_one();
    });
    running.wait().await
}

/// Serves a matrixkv database over the Redis protocol (RESP2/RESP3).
#[derive(clap::Args, Debug, Clone)]
pub struct ServerArgs {
    /// A redis.conf-style file (`port 6380`, `requirepass secret`, ...), applied before flags.
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Address to listen on.
    #[arg(long)]
    pub bind: Option<String>,
    /// Port (0: any free port, printed at start).
    #[arg(long)]
    pub port: Option<u16>,
    /// The database directory (slow tier under `<dir>/slow`).
    #[arg(long)]
    pub dir: Option<PathBuf>,
    /// The fast tier's directory (default `<dir>/fast`; /dev/shm for benchmarks only: it does
    /// not survive a reboot).
    #[arg(long)]
    pub fast_dir: Option<PathBuf>,
    /// Number of databases (SELECT 0..N-1).
    #[arg(long)]
    pub databases: Option<usize>,
    /// Password clients must give with AUTH.
    #[arg(long)]
    pub requirepass: Option<String>,
    /// Most connected clients.
    #[arg(long)]
    pub maxclients: Option<usize>,
    /// Close clients idle this many seconds (0: never).
    #[arg(long)]
    pub timeout: Option<u64>,
    /// Where BGSAVE writes engine checkpoints.
    #[arg(long)]
    pub checkpoint_dir: Option<PathBuf>,
    /// Engine memtable size in bytes.
    #[arg(long)]
    pub write_buffer_bytes: Option<usize>,
    /// Engine matrix container size in bytes (fixed when the database is created).
    #[arg(long)]
    pub container_bytes: Option<u64>,
    /// Sync every write (`appendfsync always`).
    #[arg(long)]
    pub sync_writes: bool,
    /// When writes become durable: always, everysec (the default, as Redis's) or no.
    #[arg(long)]
    pub appendfsync: Option<String>,
    /// Redis's protected mode (yes, the default, or no): with no password set, clients
    /// from other hosts are refused.
    #[arg(long)]
    pub protected_mode: Option<String>,
}

impl ServerArgs {
    /// The configuration these flags give (a `--config` file first, then the flags).
    ///
    /// # Errors
    /// An unreadable or invalid config file.
    pub fn into_config(self) -> anyhow::Result<Config> {
        use anyhow::Context;
        let mut c = Config::default();
        if let Some(path) = &self.config {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("reading {}", path.display()))?;
            c.apply_file(&text)?;
        }
        if let Some(v) = self.bind {
            c.bind = v;
        }
        if let Some(v) = self.port {
            c.port = v;
        }
        if let Some(v) = self.dir {
            c.dir = v;
        }
        c.fast_dir = self.fast_dir.or(c.fast_dir);
        if let Some(v) = self.databases {
            c.databases = v.clamp(1, 100);
        }
        c.requirepass = self.requirepass.or(c.requirepass);
        if let Some(v) = self.maxclients {
            c.maxclients = v;
        }
        if let Some(v) = self.timeout {
            c.timeout = std::time::Duration::from_secs(v);
        }
        c.checkpoint_dir = self.checkpoint_dir.or(c.checkpoint_dir);
        c.write_buffer_bytes = self.write_buffer_bytes.or(c.write_buffer_bytes);
        c.container_bytes = self.container_bytes.or(c.container_bytes);
        if let Some(v) = &self.appendfsync {
            c.set("appendfsync", v).map_err(anyhow::Error::msg)?;
        }
        if self.sync_writes {
            c.appendfsync = AppendFsync::Always;
        }
        if let Some(v) = &self.protected_mode {
            c.set("protected-mode", v).map_err(anyhow::Error::msg)?;
        }
        Ok(c)
    }
}

/// Runs the server with `args` on a new multi-threaded runtime until it stops.
///
/// # Errors
/// Bad flags or config file, the engine's open or close errors, the address in use.
pub fn run_blocking(args: ServerArgs) -> anyhow::Result<()> {
    use anyhow::Context;
    init_logging();
    let config = args.into_config()?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the runtime")?;
    runtime.block_on(run(config))
}

/// Structured log lines on stderr (`ts=… level=… target=… msg="…"`, logfmt); the level from
/// `MATRIXKV_LOG` (error, warn, info, debug; default info).
struct Logfmt(log::LevelFilter);

impl log::Log for Logfmt {
    fn enabled(&self, m: &log::Metadata<'_>) -> bool {
        m.level() <= self.0
    }

    fn log(&self, r: &log::Record<'_>) {
        if self.enabled(r.metadata()) {
            let ts = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0.0, |d| d.as_secs_f64());
            let msg = r.args().to_string().replace('"', "'");
            eprintln!(
                "ts={ts:.3} level={} target={} msg=\"{msg}\"",
                r.level().as_str().to_ascii_lowercase(),
                r.target()
            );
        }
    }

    fn flush(&self) {}
}

/// Installs the logfmt logger (once per process; later calls do nothing).
pub fn init_logging() {
    let level = std::env::var("MATRIXKV_LOG")
        .ok()
        .and_then(|l| l.parse().ok())
        .unwrap_or(log::LevelFilter::Info);
    // One logger for the life of the process.
    let logger: &'static Logfmt = Box::leak(Box::new(Logfmt(level)));
    if log::set_logger(logger).is_ok() {
        log::set_max_level(level);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn appendfsync_comes_from_the_config_file_and_the_flags_and_bad_values_are_refused() {
        let mut c = Config::default();
        assert_eq!(c.appendfsync, AppendFsync::EverySec);
        c.apply_file("# durability\nappendfsync always\n").unwrap();
        assert_eq!(c.appendfsync, AppendFsync::Always);
        assert_eq!(
            c.get("appendfsync"),
            vec![("appendfsync".to_string(), "always".to_string())]
        );
        let e = c.apply_file("appendfsync sometimes").unwrap_err();
        assert!(e.to_string().contains("line 1"), "{e}");
        assert_eq!(
            c.appendfsync,
            AppendFsync::Always,
            "unchanged by a bad value"
        );

        #[derive(clap::Parser)]
        struct Cli {
            #[command(flatten)]
            server: ServerArgs,
        }
        let args = |extra: &[&str]| {
            let words = ["matrixkv-server"].iter().chain(extra).copied();
            <Cli as clap::Parser>::try_parse_from(words).unwrap().server
        };
        let c = args(&["--appendfsync", "no"]).into_config().unwrap();
        assert_eq!(c.appendfsync, AppendFsync::No);
        let c = args(&["--sync-writes"]).into_config().unwrap();
        assert_eq!(c.appendfsync, AppendFsync::Always);
        assert!(args(&["--appendfsync", "never"]).into_config().is_err());
        assert_eq!(
            args(&[]).into_config().unwrap().appendfsync,
            AppendFsync::EverySec
        );
    }
}

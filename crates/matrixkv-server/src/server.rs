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
use crate::config::{AppendFsync, Config, ServerArgs};
use crate::conn::{Closed, Conn, NetSettings};
use crate::cursors::Cursors;
use crate::persistence::Persistence;
use crate::resp::{Limits, Parse, Reply};
use crate::store::Store;

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

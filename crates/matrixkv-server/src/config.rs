//! The server's settings: [`Config`] (a redis.conf-style file, `CONFIG SET`), and the
//! command-line flags ([`ServerArgs`]) that fill it.

use std::collections::HashMap;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Result;

use crate::limits::{OutputLimit, parse_memory, parse_output_buffer_limits};

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

    pub(crate) fn engine_options(&self) -> matrixkv::Options {
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

//! One connection's socket I/O, for `server::connection_loop`: requests in through the
//! [`Decoder`], replies out as they are produced, and the limits that end a connection.
//!
//! Replies are written as they are produced (gathered up to [`FLUSH_AT`] bytes per write),
//! with non-blocking writes, so a client that reads never has replies waiting in the server.
//! While a client does not read, its replies wait in its output buffer and the server goes on
//! reading and running its commands, as Redis does, until the buffer passes the output limit
//! ([`OutputLimit`]: a hard limit, or a soft limit held for some seconds), which closes it. A
//! reply of [`WRITE_THROUGH`] bytes or more, or one over the hard limit by itself, is not
//! buffered: the connection writes it out before it reads the next command, waiting for the
//! client to take it; a client that takes nothing for `write-timeout` is closed. The idle
//! `timeout` counts from the last byte read or written, so it covers a client stalled in a
//! write too. Settings are read again when `CONFIG SET` changes them, so they apply to open
//! connections.

use std::io;
use std::time::{Duration, Instant};

use tokio::io::{Interest, Ready};
use tokio::net::TcpStream;
use tokio::sync::watch;

use crate::config::Config;
use crate::limits::OutputLimit;
use crate::resp::{Decoder, READ_BYTES, Reply, SHRINK_ABOVE};

/// Buffered replies are written once they reach this many bytes, and at the end of the input
/// read (so pipelined replies share writes).
pub const FLUSH_AT: usize = 64 << 10;
/// A reply this large is written out before the next command runs, never buffered.
pub const WRITE_THROUGH: usize = 1 << 20;
/// Most bytes read at once before the commands read are run.
const MAX_GATHER: usize = 64 << 10;

/// The settings of a connection, read from the configuration when it changes.
#[derive(Debug, Clone, Copy)]
pub struct NetSettings {
    /// Close after this long without a byte read or written (0: never).
    pub timeout: Duration,
    /// Close after this long without a byte written while replies wait (0: never).
    pub write_timeout: Duration,
    /// The output buffer limit.
    pub output: OutputLimit,
    /// The query buffer limit.
    pub max_query: usize,
}

impl NetSettings {
    /// The connection settings of `c`.
    pub fn of(c: &Config) -> NetSettings {
        NetSettings {
            timeout: c.timeout,
            write_timeout: c.write_timeout,
            output: c.output_limit,
            max_query: c.query_buffer_limit,
        }
    }
}

/// Why a connection ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Closed {
    /// The client closed its side.
    Eof,
    /// No byte read or written for `timeout`.
    Idle,
    /// Replies waited and the client took none for `write-timeout`.
    WriteStalled,
    /// Unsent replies passed the hard output limit.
    OutputHard,
    /// Unsent replies stayed over the soft output limit for its seconds.
    OutputSoft,
}

/// A connection's socket, its query buffer and its output buffer.
pub struct Conn<'a> {
    sock: &'a TcpStream,
    /// Requests received.
    pub input: Decoder,
    /// Replies produced; `out[sent..]` not written yet.
    out: Vec<u8>,
    sent: usize,
    /// The settings in force.
    pub net: NetSettings,
    reload: &'a (dyn Fn() -> NetSettings + Sync),
    config: Option<watch::Receiver<()>>,
    /// The last byte read or written.
    last_io: Instant,
    /// Since when replies have waited without a byte written.
    stalled_since: Option<Instant>,
    /// Since when unsent replies have been over the soft limit.
    over_soft_since: Option<Instant>,
}

impl<'a> Conn<'a> {
    /// A connection on `sock`; `reload` reads the settings again when `config` says they
    /// changed.
    pub fn new(
        sock: &'a TcpStream,
        reload: &'a (dyn Fn() -> NetSettings + Sync),
        config: watch::Receiver<()>,
    ) -> Conn<'a> {
        Conn {
            sock,
            input: Decoder::new(),
            out: Vec::new(),
            sent: 0,
            net: reload(),
            reload,
            config: Some(config),
            last_io: Instant::now(),
            stalled_since: None,
            over_soft_since: None,
        }
    }

    /// Bytes of replies produced and not yet written.
    pub fn unsent(&self) -> usize {
        self.out.len() - self.sent
    }

    /// Bytes of memory the output buffer holds.
    #[cfg(test)]
    fn out_capacity(&self) -> usize {
        self.out.capacity()
    }

    /// Adds a reply; writes what the socket takes now. `Some` when the client must be closed.
    ///
    /// # Errors
    /// The socket's errors.
    pub async fn push(&mut self, reply: Reply, proto: u8) -> io::Result<Option<Closed>> {
        if self.sent > 0 && self.sent * 2 >= self.out.len() {
            self.out.drain(..self.sent);
            self.sent = 0;
        }
        let hard = usize::try_from(self.net.output.hard_bytes).unwrap_or(usize::MAX);
        let big = |n: usize| n >= WRITE_THROUGH || (hard > 0 && n > hard);
        match reply {
            Reply::Bulk(v) if big(v.len()) => {
                // Written from the value itself: no copy of it in the output buffer.
                self.out
                    .extend_from_slice(format!("${}\r\n", v.len()).as_bytes());
                if let Some(why) = self.drain().await? {
                    return Ok(Some(why));
                }
                if let Some(why) = self.write_through(&v).await? {
                    return Ok(Some(why));
                }
                self.out.extend_from_slice(b"\r\n");
                self.try_flush()?;
            }
            reply => {
                let before = self.out.len();
                reply.encode(proto, &mut self.out);
                if big(self.out.len() - before) {
                    return self.drain().await;
                }
                if self.unsent() >= FLUSH_AT || (hard > 0 && self.unsent() > hard) {
                    self.try_flush()?;
                }
            }
        }
        Ok(self.over_limit(Instant::now()))
    }

    /// Writes what the socket takes now, without waiting.
    fn try_flush(&mut self) -> io::Result<()> {
        let mut progress = false;
        while self.sent < self.out.len() {
            match self
                .sock
                .try_write(self.out.get(self.sent..).unwrap_or_default())
            {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => {
                    self.sent += n;
                    progress = true;
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) => return Err(e),
            }
        }
        let now = Instant::now();
        if progress {
            self.last_io = now;
        }
        if self.sent == self.out.len() {
            self.out.clear();
            self.sent = 0;
            self.stalled_since = None;
        } else if progress || self.stalled_since.is_none() {
            self.stalled_since = Some(now);
        }
        Ok(())
    }

    /// Which output limit the unsent replies are over, if any (starting the soft limit's
    /// clock when they first pass it).
    fn over_limit(&mut self, now: Instant) -> Option<Closed> {
        let unsent = self.unsent() as u64;
        let OutputLimit {
            hard_bytes,
            soft_bytes,
            soft_seconds,
        } = self.net.output;
        if hard_bytes > 0 && unsent > hard_bytes {
            return Some(Closed::OutputHard);
        }
        if soft_bytes > 0 && unsent > soft_bytes {
            let since = *self.over_soft_since.get_or_insert(now);
            if now.duration_since(since) >= Duration::from_secs(soft_seconds) {
                return Some(Closed::OutputSoft);
            }
        } else {
            self.over_soft_since = None;
        }
        None
    }

    /// The first deadline that would close the connection.
    fn deadline(&self) -> Option<(Instant, Closed)> {
        let net = &self.net;
        let candidates = [
            (!net.timeout.is_zero()).then(|| (self.last_io + net.timeout, Closed::Idle)),
            self.stalled_since
                .filter(|_| !net.write_timeout.is_zero())
                .map(|s| (s + net.write_timeout, Closed::WriteStalled)),
            self.over_soft_since
                .filter(|_| net.output.soft_bytes > 0)
                .map(|s| {
                    let secs = Duration::from_secs(net.output.soft_seconds);
                    (s + secs, Closed::OutputSoft)
                }),
        ];
        candidates.into_iter().flatten().min_by_key(|(at, _)| *at)
    }

    /// Waits until the socket is ready for `interest` (`Ok(Some)`), the configuration changes
    /// (`Ok(None)`, the settings read again), or a deadline closes the connection (`Err`).
    async fn wait(&mut self, interest: Interest) -> io::Result<Result<Option<Ready>, Closed>> {
        enum Woke {
            Ready(io::Result<Ready>),
            Deadline(Closed),
            Config(bool),
        }
        let deadline = self.deadline();
        let sleep = async {
            match deadline {
                Some((at, why)) => {
                    tokio::time::sleep_until(at.into()).await;
                    why
                }
                None => std::future::pending().await,
            }
        };
        let config = self.config.as_mut();
        let changed = async {
            match config {
                Some(c) => c.changed().await.is_ok(),
                None => std::future::pending().await,
            }
        };
        let woke = tokio::select! {
            r = self.sock.ready(interest) => Woke::Ready(r),
            why = sleep => Woke::Deadline(why),
            open = changed => Woke::Config(open),
        };
        match woke {
            Woke::Ready(r) => Ok(Ok(Some(r?))),
            Woke::Deadline(why) => Ok(Err(why)),
            Woke::Config(open) => {
                if open {
                    self.net = (self.reload)();
                } else {
                    self.config = None; // the server is stopping
                }
                Ok(Ok(None))
            }
        }
    }

    /// Writes every buffered reply, waiting for the client to take them. `Some` when the
    /// client must be closed first.
    ///
    /// # Errors
    /// The socket's errors.
    pub async fn drain(&mut self) -> io::Result<Option<Closed>> {
        loop {
            self.try_flush()?;
            if self.unsent() == 0 {
                return Ok(None);
            }
            if let Err(why) = self.wait(Interest::WRITABLE).await? {
                return Ok(Some(why));
            }
        }
    }

    /// Writes `bytes` (the output buffer empty), waiting for the client to take them.
    async fn write_through(&mut self, bytes: &[u8]) -> io::Result<Option<Closed>> {
        let mut at = 0;
        self.stalled_since = Some(Instant::now());
        while at < bytes.len() {
            match self.sock.try_write(bytes.get(at..).unwrap_or_default()) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => {
                    at += n;
                    self.last_io = Instant::now();
                    self.stalled_since = Some(self.last_io);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    if let Err(why) = self.wait(Interest::WRITABLE).await? {
                        return Ok(Some(why));
                    }
                }
                Err(e) => return Err(e),
            }
        }
        self.stalled_since = None;
        Ok(None)
    }

    /// Returns idle buffers that grew past [`SHRINK_ABOVE`] to a small size.
    pub fn shrink(&mut self) {
        self.input.shrink();
        if self.unsent() == 0 && self.out.capacity() > SHRINK_ABOVE {
            self.out = Vec::with_capacity(READ_BYTES);
            self.sent = 0;
        }
    }

    /// Writes what it can and waits for more requests: `Ok(Ok(n))` once `n` bytes were read,
    /// `Ok(Err(why))` when the connection must end. Reads go on while replies wait (the
    /// output limit bounds them).
    ///
    /// # Errors
    /// The socket's errors.
    pub async fn read_more(&mut self) -> io::Result<Result<usize, Closed>> {
        loop {
            self.try_flush()?;
            if let Some(why) = self.over_limit(Instant::now()) {
                return Ok(Err(why));
            }
            self.shrink();
            let interest = if self.unsent() > 0 {
                Interest::READABLE | Interest::WRITABLE
            } else {
                Interest::READABLE
            };
            let ready = match self.wait(interest).await? {
                Ok(Some(r)) => r,
                Ok(None) => continue,
                Err(why) => return Ok(Err(why)),
            };
            if !ready.is_readable() && !ready.is_read_closed() {
                continue;
            }
            let mut got = 0;
            loop {
                let buf = self.input.read_buf();
                let room = buf.capacity() - buf.len();
                match self.sock.try_read_buf(buf) {
                    Ok(0) if got == 0 => return Ok(Err(Closed::Eof)),
                    Ok(0) => return Ok(Ok(got)),
                    Ok(n) => {
                        got += n;
                        self.last_io = Instant::now();
                        if n < room || got >= MAX_GATHER {
                            return Ok(Ok(got));
                        }
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                        if got > 0 {
                            return Ok(Ok(got));
                        }
                        break;
                    }
                    Err(e) => return Err(e),
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn an_idle_output_buffer_returns_to_a_small_size_after_a_big_reply() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let reader = std::thread::spawn(move || {
            let mut c = std::net::TcpStream::connect(addr).unwrap();
            let mut all = Vec::new();
            std::io::Read::read_to_end(&mut c, &mut all).unwrap();
            all.len()
        });
        let (sock, _) = listener.accept().await.unwrap();
        let reload = || NetSettings::of(&Config::default());
        let (_tx, rx) = watch::channel(());
        let mut conn = Conn::new(&sock, &reload, rx);
        // Under WRITE_THROUGH: encoded into the output buffer.
        let value = vec![b'v'; 900 << 10];
        for _ in 0..4 {
            let r = conn.push(Reply::Bulk(value.clone()), 2).await.unwrap();
            assert_eq!(r, None);
        }
        assert_eq!(conn.drain().await.unwrap(), None);
        assert!(conn.out_capacity() > SHRINK_ABOVE);
        conn.shrink();
        assert!(conn.out_capacity() <= READ_BYTES, "{}", conn.out_capacity());
        drop(conn);
        drop(sock);
        let framing = format!("${}\r\n\r\n", value.len()).len();
        assert_eq!(reader.join().unwrap(), 4 * (value.len() + framing));
    }
}

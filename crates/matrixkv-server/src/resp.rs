//! RESP, the Redis serialization protocol: requests in (arrays of bulk strings, or inline
//! commands) with limits on every length, replies out in RESP2 or RESP3.
//!
//! A hand-written decoder (docs/decisions/0017-redis-server.md says why): every length is
//! checked against [`Limits`] before a byte of it is buffered, so a hostile client cannot make
//! the server allocate more than the limits allow, and malformed input is a [`Parse::Error`]
//! that the connection answers with `-ERR Protocol error: ...` before closing. The
//! [`Decoder`] keeps its place between reads, so a request cut into many small reads is
//! parsed in time linear in its size. Pure: no I/O.

/// The most a request may hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Longest bulk string (an argument), in bytes.
    pub max_bulk: usize,
    /// Most arguments of one command.
    pub max_args: usize,
    /// Longest inline command line.
    pub max_inline: usize,
    /// Most bytes held for a request not yet whole: the query buffer and the arguments
    /// received so far (Redis's `client-query-buffer-limit`).
    pub max_query: usize,
}

impl Limits {
    /// Redis's defaults: 512 MiB arguments, 1M arguments... scaled to what one server of
    /// this engine should accept: 512 MiB per argument, 1,048,576 arguments, 64 KiB inline,
    /// 1 GiB held for one request (the connection sets `max_query` from the configuration).
    pub const AUTHENTICATED: Limits = Limits {
        max_bulk: 512 << 20,
        max_args: 1 << 20,
        max_inline: 64 << 10,
        max_query: 1 << 30,
    };

    /// Before AUTH (as Redis since CVE-2021-32675): 16 KiB arguments, 10 arguments.
    pub const UNAUTHENTICATED: Limits = Limits {
        max_bulk: 16 << 10,
        max_args: 10,
        max_inline: 16 << 10,
        max_query: 1 << 30,
    };
}

/// What [`parse`] or [`Decoder::next`] found.
#[derive(Debug, PartialEq, Eq)]
pub enum Parse {
    /// More bytes are needed (nothing is consumed).
    Incomplete,
    /// A whole command and the number of bytes it took. An empty inline line is an empty
    /// command (skipped by the caller, as Redis does).
    Command(Vec<Vec<u8>>, usize),
    /// The request is malformed or over a limit: answer and close.
    Error(String),
}

/// Parses one request at the start of `buf` under `limits` (a [`Decoder`] fed `buf` at once).
pub fn parse(buf: &[u8], limits: &Limits) -> Parse {
    let mut d = Decoder::new();
    d.feed(buf);
    d.next(limits)
}

/// Arguments of at least this many bytes that have not arrived whole are received straight
/// into a buffer of their own, allocated once at their announced length (Redis's
/// `PROTO_MBULK_BIG_ARG`), instead of through the query buffer.
pub const BIG_ARG: usize = 32 << 10;
/// Room the query buffer keeps for a read, and the size it returns to when idle (Redis's
/// `PROTO_IOBUF_LEN`).
pub const READ_BYTES: usize = 16 << 10;
/// An idle query buffer holding more than this is returned to [`READ_BYTES`].
pub const SHRINK_ABOVE: usize = 128 << 10;
/// A length line (`*3`, `$5`) longer than this without its end is an error.
const MAX_LENGTH_LINE: usize = 32;

/// A request decoder that keeps its state between reads: each byte received is looked at
/// once and copied at most once into its argument, however the request is cut into reads, so
/// a large request sent in small pieces costs time linear in its size.
///
/// Bytes come in through [`Decoder::read_buf`] (the connection reads into it) or
/// [`Decoder::feed`]; [`Decoder::next`] returns each whole command. Every length is checked
/// against [`Limits`] when its line arrives, before any byte of it is buffered, and the bytes
/// held for a request not yet whole (the query buffer and the arguments received so far)
/// never exceed [`Limits::max_query`]. After a [`Parse::Error`] the decoder is not used again.
#[derive(Debug, Default)]
pub struct Decoder {
    /// The query buffer: bytes received; `buf[pos..]` not consumed yet.
    buf: Vec<u8>,
    pos: usize,
    /// Where the search for the end of the current line resumes (`>= pos`).
    scan: usize,
    state: State,
    /// The arguments of the request being received, and their bytes.
    args: Vec<Vec<u8>>,
    args_bytes: usize,
    /// Bytes of the request being received consumed so far.
    used: usize,
    /// Bytes looked at or copied, for the tests that bound the work.
    work: u64,
}

#[derive(Debug, Default)]
enum State {
    /// At the start of a request.
    #[default]
    Start,
    /// In an inline command line.
    Inline,
    /// `*n` read: `left` bulk strings still to come.
    Array { left: usize },
    /// `$len` read: waiting for `len` bytes and CRLF in the query buffer.
    Bulk { left: usize, len: usize },
    /// `$len` read for a big argument: its bytes (and CRLF) go straight into `arg`.
    Big {
        left: usize,
        len: usize,
        arg: Vec<u8>,
    },
}

impl Decoder {
    /// An empty decoder (it allocates on the first read).
    pub fn new() -> Decoder {
        Decoder::default()
    }

    /// Where the next read should put its bytes: the big argument being received (its
    /// spare capacity is what it still needs), or else the query buffer with room for at
    /// least [`READ_BYTES`]. Append only; then call [`Decoder::next`].
    pub fn read_buf(&mut self) -> &mut Vec<u8> {
        let big = self.pos == self.buf.len()
            && matches!(&self.state, State::Big { len, arg, .. } if arg.len() < len + 2);
        if !big {
            self.compact();
            if self.buf.capacity() - self.buf.len() < READ_BYTES {
                self.buf.reserve(READ_BYTES);
            }
        }
        match &mut self.state {
            State::Big { arg, .. } if big => arg,
            _ => &mut self.buf,
        }
    }

    /// Appends received bytes (for callers that read elsewhere, and the tests).
    pub fn feed(&mut self, mut bytes: &[u8]) {
        if self.pos == self.buf.len()
            && let State::Big { len, arg, .. } = &mut self.state
        {
            let take = (*len + 2).saturating_sub(arg.len()).min(bytes.len());
            let (now, rest) = bytes.split_at(take);
            arg.extend_from_slice(now);
            self.work += take as u64;
            bytes = rest;
        }
        if !bytes.is_empty() {
            self.compact();
            self.buf.extend_from_slice(bytes);
        }
    }

    /// Bytes held for requests not yet returned: the unconsumed query buffer and the
    /// arguments of the request being received.
    pub fn pending(&self) -> usize {
        let big = match &self.state {
            State::Big { arg, .. } => arg.len(),
            _ => 0,
        };
        self.buf.len() - self.pos + self.args_bytes + big
    }

    /// Bytes of memory the query buffer holds (its capacity).
    pub fn capacity(&self) -> usize {
        self.buf.capacity()
    }

    /// Bytes looked at or copied since the decoder was made (a measure of parsing work).
    pub fn work(&self) -> u64 {
        self.work
    }

    /// Returns an idle query buffer that grew past [`SHRINK_ABOVE`] to [`READ_BYTES`].
    pub fn shrink(&mut self) {
        if self.buf.capacity() > SHRINK_ABOVE && self.buf.len() - self.pos <= READ_BYTES {
            self.compact();
            self.buf.shrink_to(READ_BYTES);
        }
    }

    /// Drops the consumed bytes from the front of the query buffer. What remains is at most
    /// one partial line or small argument, each moved at most twice in its life.
    fn compact(&mut self) {
        if self.pos == 0 {
            return;
        }
        if self.pos < self.buf.len() {
            self.buf.drain(..self.pos);
            self.work += self.buf.len() as u64;
        } else {
            self.buf.clear();
        }
        self.scan -= self.pos;
        self.pos = 0;
    }

    /// Consumes `n` bytes of the current request.
    fn advance(&mut self, n: usize) {
        self.pos += n;
        self.used += n;
        self.scan = self.pos;
    }

    /// The end (index of `\n`) of the line at `pos`, searching only bytes not searched
    /// before.
    fn line_end(&mut self) -> Option<usize> {
        let from = self.scan.max(self.pos);
        let rest = self.buf.get(from..).unwrap_or_default();
        match rest.iter().position(|&b| b == b'\n') {
            Some(i) => {
                self.work += i as u64 + 1;
                Some(from + i)
            }
            None => {
                self.work += rest.len() as u64;
                self.scan = self.buf.len();
                None
            }
        }
    }

    /// The value of the length line at `pos` (`*3\r\n`, `$5\r\n`), consumed; `Err(())` when
    /// it is malformed, `Ok(None)` when it is not whole yet.
    fn length_line(&mut self) -> Result<Option<i64>, ()> {
        let Some(nl) = self.line_end() else {
            return if self.buf.len() - self.pos > MAX_LENGTH_LINE {
                Err(())
            } else {
                Ok(None)
            };
        };
        let line = self.buf.get(self.pos + 1..nl).unwrap_or_default();
        let n = line.strip_suffix(b"\r").and_then(parse_len).ok_or(())?;
        self.advance(nl + 1 - self.pos);
        Ok(Some(n))
    }

    /// The next whole command received, under `limits` (they may change between calls: each
    /// length is checked against the limits of the call that reads its line).
    pub fn next(&mut self, limits: &Limits) -> Parse {
        if self.pending() > limits.max_query {
            return Parse::Error("query buffer limit reached".into());
        }
        loop {
            match &mut self.state {
                State::Start => {
                    let Some(&first) = self.buf.get(self.pos) else {
                        return Parse::Incomplete;
                    };
                    if first != b'*' {
                        self.state = State::Inline;
                        continue;
                    }
                    let n = match self.length_line() {
                        Ok(Some(n)) => n,
                        Ok(None) => return Parse::Incomplete,
                        Err(()) => return Parse::Error("invalid multibulk length".into()),
                    };
                    if n <= 0 {
                        // `*0` and `*-1` are empty requests.
                        return self.finish();
                    }
                    let n = n as usize;
                    if n > limits.max_args {
                        return Parse::Error("invalid multibulk length".into());
                    }
                    self.args = Vec::with_capacity(n.min(1024));
                    self.state = State::Array { left: n };
                }
                State::Array { left: 0 } => return self.finish(),
                &mut State::Array { left } => {
                    match self.buf.get(self.pos) {
                        None => return Parse::Incomplete,
                        Some(b'$') => {}
                        Some(&c) => {
                            return Parse::Error(format!(
                                "expected '$', got '{}'",
                                c.escape_ascii()
                            ));
                        }
                    }
                    let len = match self.length_line() {
                        Ok(Some(l)) if l >= 0 && (l as u64) <= limits.max_bulk as u64 => l as usize,
                        Ok(None) => return Parse::Incomplete,
                        Ok(Some(_)) | Err(()) => {
                            return Parse::Error("invalid bulk length".into());
                        }
                    };
                    if self.args_bytes.saturating_add(len) > limits.max_query {
                        return Parse::Error("query buffer limit reached".into());
                    }
                    let have = self.buf.len() - self.pos;
                    self.state = if len >= BIG_ARG && have < len + 2 {
                        let mut arg = Vec::with_capacity(len + 2);
                        arg.extend_from_slice(self.buf.get(self.pos..).unwrap_or_default());
                        self.work += have as u64;
                        self.pos += have;
                        self.scan = self.pos;
                        State::Big { left, len, arg }
                    } else {
                        State::Bulk { left, len }
                    };
                }
                &mut State::Bulk { left, len } => {
                    let (start, stop) = (self.pos, self.pos + len);
                    if self.buf.len() < stop + 2 {
                        return Parse::Incomplete;
                    }
                    if self.buf.get(stop..stop + 2) != Some(b"\r\n") {
                        return Parse::Error("bulk string not terminated by CRLF".into());
                    }
                    let arg = self.buf.get(start..stop).unwrap_or_default().to_vec();
                    self.args.push(arg);
                    self.work += len as u64;
                    self.args_bytes += len;
                    self.advance(len + 2);
                    self.state = State::Array { left: left - 1 };
                }
                State::Big { left, len, arg } => {
                    let (left, len, want) = (*left, *len, *len + 2);
                    // Bytes read past the argument (a read may fill spare capacity beyond
                    // what was asked) belong to the query buffer, empty at this point.
                    if arg.len() > want {
                        let extra = arg.split_off(want);
                        self.buf.splice(self.pos..self.pos, extra);
                    }
                    // Bytes fed into the query buffer meanwhile belong to the argument.
                    let more = (want - arg.len()).min(self.buf.len() - self.pos);
                    if more > 0 {
                        let bytes = self.buf.get(self.pos..self.pos + more);
                        arg.extend_from_slice(bytes.unwrap_or_default());
                        self.work += more as u64;
                        self.pos += more;
                        self.scan = self.pos;
                    }
                    if arg.len() < want {
                        return Parse::Incomplete;
                    }
                    if arg.get(len..) != Some(b"\r\n") {
                        return Parse::Error("bulk string not terminated by CRLF".into());
                    }
                    arg.truncate(len);
                    let arg = std::mem::take(arg);
                    self.used += want;
                    self.args_bytes += len;
                    self.args.push(arg);
                    self.state = State::Array { left: left - 1 };
                }
                State::Inline => return self.inline(limits),
            }
        }
    }

    /// Returns the request received and starts the next.
    fn finish(&mut self) -> Parse {
        let used = std::mem::take(&mut self.used);
        self.args_bytes = 0;
        self.state = State::Start;
        self.scan = self.pos;
        Parse::Command(std::mem::take(&mut self.args), used)
    }

    fn inline(&mut self, limits: &Limits) -> Parse {
        let Some(nl) = self.line_end() else {
            return if self.buf.len() - self.pos > limits.max_inline {
                Parse::Error("too big inline request".into())
            } else {
                Parse::Incomplete
            };
        };
        if nl - self.pos > limits.max_inline {
            return Parse::Error("too big inline request".into());
        }
        let line = self.buf.get(self.pos..nl).unwrap_or_default();
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        self.work += line.len() as u64;
        let Some(args) = split_inline(line) else {
            return Parse::Error("unbalanced quotes in request".into());
        };
        if args.len() > limits.max_args {
            return Parse::Error("invalid multibulk length".into());
        }
        self.advance(nl + 1 - self.pos);
        self.args = args;
        self.finish()
    }
}

/// The words of an inline command (`set k "a b"`); `None` for unbalanced quotes.
fn split_inline(line: &[u8]) -> Option<Vec<Vec<u8>>> {
    let mut args = Vec::new();
    let mut cur: Option<Vec<u8>> = None;
    let mut quote: Option<u8> = None;
    for &b in line {
        match (quote, b) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), c) => cur.get_or_insert_with(Vec::new).push(c),
            (None, b'"' | b'\'') => {
                quote = Some(b);
                cur.get_or_insert_with(Vec::new);
            }
            (None, b' ' | b'\t') => args.extend(cur.take()),
            (None, c) => cur.get_or_insert_with(Vec::new).push(c),
        }
    }
    if quote.is_some() {
        return None;
    }
    args.extend(cur);
    Some(args)
}

/// A decimal integer of a length line (`*3`, `$5`), at most 19 digits.
fn parse_len(digits: &[u8]) -> Option<i64> {
    if digits.is_empty() || digits.len() > 19 {
        return None;
    }
    let (neg, d) = match digits.split_first() {
        Some((b'-', rest)) => (true, rest),
        _ => (false, digits),
    };
    if d.is_empty() || !d.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let n: i64 = std::str::from_utf8(d).ok()?.parse().ok()?;
    Some(if neg { -n } else { n })
}

/// A reply, encoded for the connection's protocol version.
#[derive(Debug, Clone, PartialEq)]
pub enum Reply {
    /// `+OK`
    Simple(String),
    /// `-ERR ...` (the text includes the error code).
    Error(String),
    /// `:1`
    Int(i64),
    /// `$3\r\nfoo`
    Bulk(Vec<u8>),
    /// The null bulk string (RESP2 `$-1`, RESP3 `_`).
    Null,
    /// An array; RESP2 null array for `None` elements is not needed.
    Array(Vec<Reply>),
    /// A map (RESP3 `%`; RESP2: a flat array of keys and values).
    Map(Vec<(Reply, Reply)>),
    /// A double (RESP3 `,`; RESP2: a bulk string).
    Double(f64),
}

impl Reply {
    /// `+OK`.
    pub fn ok() -> Reply {
        Reply::Simple("OK".into())
    }

    /// `-ERR <msg>`, or `-<msg>` when it starts with one of Redis's own error codes
    /// (`WRONGTYPE`, `NOAUTH`, `WRONGPASS`, `NOPROTO`, `EXECABORT`).
    pub fn err(msg: impl Into<String>) -> Reply {
        const CODES: [&str; 5] = ["WRONGTYPE", "NOAUTH", "WRONGPASS", "NOPROTO", "EXECABORT"];
        let m = msg.into();
        let coded = m.split(' ').next().is_some_and(|w| CODES.contains(&w));
        Reply::Error(if coded { m } else { format!("ERR {m}") })
    }

    /// A bulk string of text.
    pub fn text(s: impl AsRef<str>) -> Reply {
        Reply::Bulk(s.as_ref().as_bytes().to_vec())
    }

    /// Appends the encoding of `self` in protocol `proto` (2 or 3) to `out`.
    pub fn encode(&self, proto: u8, out: &mut Vec<u8>) {
        match self {
            Reply::Simple(s) => {
                out.push(b'+');
                out.extend(s.bytes().filter(|&b| b != b'\r' && b != b'\n'));
                out.extend_from_slice(b"\r\n");
            }
            Reply::Error(s) => {
                out.push(b'-');
                out.extend(s.bytes().filter(|&b| b != b'\r' && b != b'\n'));
                out.extend_from_slice(b"\r\n");
            }
            Reply::Int(n) => out.extend_from_slice(format!(":{n}\r\n").as_bytes()),
            Reply::Bulk(b) => {
                out.extend_from_slice(format!("${}\r\n", b.len()).as_bytes());
                out.extend_from_slice(b);
                out.extend_from_slice(b"\r\n");
            }
            Reply::Null if proto >= 3 => out.extend_from_slice(b"_\r\n"),
            Reply::Null => out.extend_from_slice(b"$-1\r\n"),
            Reply::Array(items) => {
                out.extend_from_slice(format!("*{}\r\n", items.len()).as_bytes());
                for i in items {
                    i.encode(proto, out);
                }
            }
            Reply::Map(pairs) if proto >= 3 => {
                out.extend_from_slice(format!("%{}\r\n", pairs.len()).as_bytes());
                for (k, v) in pairs {
                    k.encode(proto, out);
                    v.encode(proto, out);
                }
            }
            Reply::Map(pairs) => {
                out.extend_from_slice(format!("*{}\r\n", pairs.len() * 2).as_bytes());
                for (k, v) in pairs {
                    k.encode(proto, out);
                    v.encode(proto, out);
                }
            }
            Reply::Double(d) if proto >= 3 => {
                out.extend_from_slice(format!(",{}\r\n", format_double(*d)).as_bytes());
            }
            Reply::Double(d) => Reply::text(format_double(*d)).encode(proto, out),
        }
    }
}

/// A double as Redis prints it (`INCRBYFLOAT`): shortest form, no trailing `.0`.
pub fn format_double(d: f64) -> String {
    if d.is_infinite() {
        return if d > 0.0 { "inf".into() } else { "-inf".into() };
    }
    let s = format!("{d}");
    s.strip_suffix(".0").map(str::to_owned).unwrap_or(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    const L: Limits = Limits::AUTHENTICATED;

    #[test]
    fn an_array_of_bulk_strings_parses_and_reports_its_length() {
        let b = b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\nrest";
        assert_eq!(
            parse(b, &L),
            Parse::Command(vec![b"GET".to_vec(), b"k".to_vec()], b.len() - 4)
        );
    }

    #[test]
    fn every_prefix_of_a_request_is_incomplete() {
        let b = b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$5\r\nvalue\r\n";
        for i in 0..b.len() {
            assert_eq!(parse(&b[..i], &L), Parse::Incomplete, "prefix {i}");
        }
        assert!(matches!(parse(b, &L), Parse::Command(a, n) if a.len() == 3 && n == b.len()));
    }

    #[test]
    fn inline_commands_split_on_spaces_and_honour_quotes() {
        assert_eq!(
            parse(b"set k \"a b\"\r\n", &L),
            Parse::Command(vec![b"set".to_vec(), b"k".to_vec(), b"a b".to_vec()], 13)
        );
        assert_eq!(parse(b"\r\n", &L), Parse::Command(vec![], 2));
        assert!(matches!(parse(b"get 'x\r\n", &L), Parse::Error(_)));
    }

    #[test]
    fn lengths_over_the_limits_are_errors_before_any_byte_is_buffered() {
        let small = Limits::UNAUTHENTICATED;
        assert!(matches!(parse(b"*11\r\n", &small), Parse::Error(_)));
        assert!(matches!(
            parse(b"*1\r\n$16385\r\n", &small),
            Parse::Error(_)
        ));
        assert!(matches!(
            parse(b"*1\r\n$99999999999999999999\r\n", &L),
            Parse::Error(_)
        ));
        assert!(matches!(parse(b"*1\r\n$-5\r\n", &L), Parse::Error(_)));
        assert!(matches!(parse(b"*x\r\n", &L), Parse::Error(_)));
        assert!(matches!(parse(b"*1\r\n:5\r\n", &L), Parse::Error(_)));
        assert!(matches!(parse(b"*1\r\n$1\r\nab\r\n", &L), Parse::Error(_)));
        let long = vec![b'a'; (16 << 10) + 1];
        assert!(matches!(parse(&long, &small), Parse::Error(_)));
    }

    /// `pieces` fed one after the other; the commands (and errors) in order.
    fn decode_in_pieces<'a>(
        pieces: impl IntoIterator<Item = &'a [u8]>,
        limits: &Limits,
        through_read_buf: bool,
    ) -> (Vec<Parse>, Decoder) {
        let mut d = Decoder::new();
        let mut out = Vec::new();
        for p in pieces {
            if through_read_buf {
                // As a socket read does: at most the spare capacity offered.
                let mut p = p;
                while !p.is_empty() {
                    let b = d.read_buf();
                    let room = (b.capacity() - b.len()).max(1);
                    let (now, rest) = p.split_at(room.min(p.len()));
                    b.extend_from_slice(now);
                    p = rest;
                    if drain(&mut d, &mut out, limits) {
                        return (out, d);
                    }
                }
            } else {
                d.feed(p);
                if drain(&mut d, &mut out, limits) {
                    return (out, d);
                }
            }
        }
        (out, d)
    }

    /// Takes every whole command into `out`; true after an error.
    fn drain(d: &mut Decoder, out: &mut Vec<Parse>, limits: &Limits) -> bool {
        loop {
            match d.next(limits) {
                Parse::Incomplete => return false,
                Parse::Error(e) => {
                    out.push(Parse::Error(e));
                    return true;
                }
                r => out.push(r),
            }
        }
    }

    /// The argument lengths and sizes of the commands (a failure message without the bytes).
    fn summary(got: &[Parse]) -> Vec<String> {
        got.iter()
            .map(|p| match p {
                Parse::Command(a, n) => {
                    format!("{:?} in {n}", a.iter().map(Vec::len).collect::<Vec<_>>())
                }
                other => format!("{other:?}"),
            })
            .collect()
    }

    fn request(args: &[&[u8]]) -> Vec<u8> {
        let mut v = format!("*{}\r\n", args.len()).into_bytes();
        for a in args {
            v.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
            v.extend_from_slice(a);
            v.extend_from_slice(b"\r\n");
        }
        v
    }

    #[test]
    fn a_pipeline_cut_anywhere_decodes_as_when_sent_whole() {
        let big = vec![b'b'; BIG_ARG + 100];
        let mut stream = request(&[b"SET", b"k", b"v"]);
        stream.extend_from_slice(b"ping\r\n\r\n*0\r\n");
        stream.extend(request(&[b"SET", b"big", &big]));
        stream.extend(request(&[b"GET", b"k"]));
        stream.extend(request(&[b"MSET", &big, b"x", b"", &big]));
        let mut whole = Vec::new();
        let mut at = 0;
        while at < stream.len() {
            match parse(&stream[at..], &L) {
                Parse::Command(a, n) => {
                    at += n;
                    whole.push(Parse::Command(a, n));
                }
                other => panic!("at {at}: {other:?}"),
            }
        }
        assert_eq!(whole.len(), 7);
        for piece in [
            1,
            2,
            3,
            7,
            100,
            4096,
            BIG_ARG - 1,
            BIG_ARG + 3,
            stream.len(),
        ] {
            for through_read_buf in [false, true] {
                let (got, d) = decode_in_pieces(stream.chunks(piece), &L, through_read_buf);
                assert!(
                    got == whole,
                    "pieces of {piece}, read_buf {through_read_buf}: {:?}",
                    summary(&got)
                );
                assert_eq!(d.pending(), 0);
            }
        }
    }

    #[test]
    fn a_large_request_in_small_pieces_costs_work_linear_in_its_size() {
        // One 8 MiB value, and 8 MiB of small arguments (where a decoder that restarts from
        // the first byte on every read does work quadratic in the request's size).
        let value = vec![b'v'; 8 << 20];
        let one_value = request(&[b"SET", b"k", &value]);
        let words: Vec<Vec<u8>> = (0..800_000).map(|i| format!("f{i}").into_bytes()).collect();
        let mut many: Vec<&[u8]> = vec![b"HSET", b"h"];
        many.extend(words.iter().map(Vec::as_slice));
        let many_args = request(&many);
        assert!(many_args.len() > 8 << 20);
        for (name, req) in [("one value", &one_value), ("many args", &many_args)] {
            // Pieces of 1 to 13 bytes.
            let mut pieces = Vec::new();
            let (mut at, mut k) = (0, 0);
            while at < req.len() {
                let n = (k % 13 + 1).min(req.len() - at);
                pieces.push(&req[at..at + n]);
                at += n;
                k += 1;
            }
            for through_read_buf in [false, true] {
                let (got, d) = decode_in_pieces(pieces.iter().copied(), &L, through_read_buf);
                assert!(
                    matches!(got.as_slice(), [Parse::Command(_, n)] if *n == req.len()),
                    "{name}: {:?}",
                    summary(&got)
                );
                let work = d.work();
                assert!(
                    work <= 3 * req.len() as u64,
                    "{name}: {work} bytes of work for a request of {}",
                    req.len()
                );
            }
        }
    }

    #[test]
    fn the_query_buffer_limit_refuses_a_request_before_buffering_past_it() {
        let small = Limits {
            max_query: 1 << 20,
            ..L
        };
        // One argument over the limit: refused at its length line.
        let (got, d) = decode_in_pieces(
            [&b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$2000000\r\n"[..]],
            &small,
            false,
        );
        assert_eq!(got, [Parse::Error("query buffer limit reached".into())]);
        assert!(d.capacity() < 64 << 10);
        // Arguments under the limit each, over it together.
        let part = vec![b'x'; 600 << 10];
        let req = request(&[b"MSET", &part, &part]);
        let (got, d) = decode_in_pieces(req.chunks(4096), &small, true);
        assert_eq!(got, [Parse::Error("query buffer limit reached".into())]);
        assert!(d.pending() <= 1 << 20);
        // A request of the limit's size passes.
        let req = request(&[b"SET", b"k", &vec![b'x'; (1 << 20) - 100]]);
        let (got, _) = decode_in_pieces(req.chunks(4096), &small, true);
        assert!(matches!(got.as_slice(), [Parse::Command(..)]));
    }

    #[test]
    fn an_idle_query_buffer_returns_to_a_small_size_after_a_big_request() {
        let wide = Limits {
            max_inline: 4 << 20,
            ..L
        };
        let mut line = vec![b'a'; 1 << 20];
        line.extend_from_slice(b"\r\n");
        let (got, mut d) = decode_in_pieces(line.chunks(READ_BYTES), &wide, true);
        assert!(matches!(got.as_slice(), [Parse::Command(a, _)] if a.len() == 1));
        assert!(d.capacity() >= 1 << 20);
        d.shrink();
        assert!(d.capacity() <= READ_BYTES, "capacity {}", d.capacity());
        // Big arguments never pass through the query buffer.
        let req = request(&[b"SET", b"k", &vec![b'x'; 4 << 20]]);
        let (got, d) = decode_in_pieces(req.chunks(READ_BYTES), &L, true);
        assert!(matches!(got.as_slice(), [Parse::Command(..)]));
        assert!(d.capacity() <= 2 * READ_BYTES, "capacity {}", d.capacity());
    }

    #[test]
    fn replies_encode_in_both_protocols() {
        let mut v = Vec::new();
        Reply::Null.encode(2, &mut v);
        Reply::Null.encode(3, &mut v);
        Reply::Map(vec![(Reply::text("a"), Reply::Int(1))]).encode(2, &mut v);
        Reply::Map(vec![(Reply::text("a"), Reply::Int(1))]).encode(3, &mut v);
        Reply::Double(1.5).encode(2, &mut v);
        Reply::Double(3.0).encode(3, &mut v);
        Reply::err("unknown command").encode(2, &mut v);
        Reply::err("WRONGTYPE Operation against a key").encode(2, &mut v);
        assert_eq!(
            String::from_utf8(v).unwrap(),
            "$-1\r\n_\r\n*2\r\n$1\r\na\r\n:1\r\n%1\r\n$1\r\na\r\n:1\r\n$3\r\n1.5\r\n,3\r\n\
             -ERR unknown command\r\n-WRONGTYPE Operation against a key\r\n"
        );
    }
}

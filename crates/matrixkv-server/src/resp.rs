//! RESP, the Redis serialization protocol: requests in (arrays of bulk strings, or inline
//! commands) with limits on every length, replies out in RESP2 or RESP3.
//!
//! A hand-written decoder (docs/decisions/0017-redis-server.md says why): every length is
//! checked against [`Limits`] before a byte of it is buffered, so a hostile client cannot make
//! the server allocate more than the limits allow, and malformed input is a [`Parse::Error`]
//! that the connection answers with `-ERR Protocol error: ...` before closing. Pure: no I/O.

/// The most a request may hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Longest bulk string (an argument), in bytes.
    pub max_bulk: usize,
    /// Most arguments of one command.
    pub max_args: usize,
    /// Longest inline command line.
    pub max_inline: usize,
}

impl Limits {
    /// Redis's defaults: 512 MiB arguments, 1M arguments... scaled to what one server of
    /// this engine should accept: 512 MiB per argument, 1,048,576 arguments, 64 KiB inline.
    pub const AUTHENTICATED: Limits = Limits {
        max_bulk: 512 << 20,
        max_args: 1 << 20,
        max_inline: 64 << 10,
    };

    /// Before AUTH (as Redis since CVE-2021-32675): 16 KiB arguments, 10 arguments.
    pub const UNAUTHENTICATED: Limits = Limits {
        max_bulk: 16 << 10,
        max_args: 10,
        max_inline: 16 << 10,
    };
}

/// What [`parse`] found at the start of a buffer.
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

/// Finds `\r\n` from `from`; the index of `\r`.
fn line_end(buf: &[u8], from: usize) -> Option<usize> {
    buf.get(from..)?
        .windows(2)
        .position(|w| w == b"\r\n")
        .map(|i| from + i)
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

/// Parses one request at the start of `buf` under `limits`.
pub fn parse(buf: &[u8], limits: &Limits) -> Parse {
    match buf.first() {
        None => Parse::Incomplete,
        Some(b'*') => parse_array(buf, limits),
        Some(_) => parse_inline(buf, limits),
    }
}

fn parse_array(buf: &[u8], limits: &Limits) -> Parse {
    let Some(end) = line_end(buf, 1) else {
        return if buf.len() > 32 {
            Parse::Error("invalid multibulk length".into())
        } else {
            Parse::Incomplete
        };
    };
    let Some(n) = parse_len(buf.get(1..end).unwrap_or_default()) else {
        return Parse::Error("invalid multibulk length".into());
    };
    if n <= 0 {
        // `*0` and `*-1` are empty requests.
        return Parse::Command(Vec::new(), end + 2);
    }
    let n = n as usize;
    if n > limits.max_args {
        return Parse::Error("invalid multibulk length".into());
    }
    let mut args = Vec::with_capacity(n.min(1024));
    let mut at = end + 2;
    for _ in 0..n {
        match buf.get(at) {
            None => return Parse::Incomplete,
            Some(b'$') => {}
            Some(&c) => {
                return Parse::Error(format!("expected '$', got '{}'", c.escape_ascii()));
            }
        }
        let Some(e) = line_end(buf, at + 1) else {
            return if buf.len() - at > 32 {
                Parse::Error("invalid bulk length".into())
            } else {
                Parse::Incomplete
            };
        };
        let len = match parse_len(buf.get(at + 1..e).unwrap_or_default()) {
            Some(l) if l >= 0 && (l as u64) <= limits.max_bulk as u64 => l as usize,
            _ => return Parse::Error("invalid bulk length".into()),
        };
        let start = e + 2;
        let Some(stop) = start.checked_add(len) else {
            return Parse::Error("invalid bulk length".into());
        };
        if buf.len() < stop + 2 {
            return Parse::Incomplete;
        }
        if buf.get(stop..stop + 2) != Some(b"\r\n") {
            return Parse::Error("bulk string not terminated by CRLF".into());
        }
        args.push(buf.get(start..stop).unwrap_or_default().to_vec());
        at = stop + 2;
    }
    Parse::Command(args, at)
}

fn parse_inline(buf: &[u8], limits: &Limits) -> Parse {
    let end = match buf.iter().position(|&b| b == b'\n') {
        Some(e) => e,
        None if buf.len() > limits.max_inline => {
            return Parse::Error("too big inline request".into());
        }
        None => return Parse::Incomplete,
    };
    if end > limits.max_inline {
        return Parse::Error("too big inline request".into());
    }
    let line = buf.get(..end).unwrap_or_default();
    let line = line.strip_suffix(b"\r").unwrap_or(line);
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
        return Parse::Error("unbalanced quotes in request".into());
    }
    args.extend(cur);
    if args.len() > limits.max_args {
        return Parse::Error("invalid multibulk length".into());
    }
    Parse::Command(args, end + 1)
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

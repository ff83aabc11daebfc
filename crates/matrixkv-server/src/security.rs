//! What keeps a browser, a remote stranger or a careless client from driving the server:
//! HTTP detection, Redis's protected mode, constant-time password checks, and bounded,
//! printable echoes of client bytes in replies and in `CLIENT LIST`.

use std::net::IpAddr;

/// Redis's reply to a client refused by protected mode.
pub const DENIED: &str = "DENIED Redis is running in protected mode because protected mode is \
enabled and no password is set for the default user. In this mode connections are only \
accepted from the loopback interface. If you want to connect from external computers to \
matrixkv-server you may adopt one of the following solutions: 1) Just disable protected mode \
sending the command 'CONFIG SET protected-mode no' from the loopback interface by connecting \
to the server from the same host the server is running, however MAKE SURE it is not publicly \
accessible from internet if you do so. 2) Set a password with 'requirepass' (in the config \
file or with CONFIG SET from the loopback interface) and use AUTH. 3) Start the server with \
'--protected-mode no' or 'protected-mode no' in its config file.";

/// The most bytes of a client's input any reply or listing repeats (Redis: 128).
pub const ECHO_MAX: usize = 128;

/// True for the first word of an HTTP request line or header that Redis treats as an attack
/// (`POST`, `Host:`): a browser or an SSRF request speaking to the port. The connection is
/// closed before anything else it sent runs.
pub fn is_http_probe(command: &[u8]) -> bool {
    command.eq_ignore_ascii_case(b"post") || command.eq_ignore_ascii_case(b"host:")
}

/// True when protected mode refuses a client from `peer`: it is on, no password is set, and
/// the client is not on the loopback interface (an IPv4-mapped loopback counts as loopback).
pub fn protected_refuses(protected_mode: bool, has_password: bool, peer: IpAddr) -> bool {
    let loopback = match peer {
        IpAddr::V4(v4) => v4.is_loopback(),
        IpAddr::V6(v6) => {
            v6.is_loopback() || v6.to_ipv4_mapped().is_some_and(|v4| v4.is_loopback())
        }
    };
    protected_mode && !has_password && !loopback
}

/// `a == b` in time that depends on their lengths only, not on where they first differ.
pub fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// At most [`ECHO_MAX`] bytes of `bytes` as printable text (control characters and bytes
/// outside ASCII escaped), with `...` when cut.
pub fn echo(bytes: &[u8]) -> String {
    let cut = bytes.len() > ECHO_MAX;
    let mut s: String = bytes
        .iter()
        .take(ECHO_MAX)
        .flat_map(|b| std::ascii::escape_default(*b))
        .map(char::from)
        .collect();
    if cut {
        s.push_str("...");
    }
    s
}

/// True for a client name Redis accepts: 1 to 128 printable ASCII characters, no space
/// (so a `CLIENT LIST` line cannot be forged).
pub fn valid_client_name(name: &[u8]) -> bool {
    name.len() <= ECHO_MAX && name.iter().all(|b| (b'!'..=b'~').contains(b))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn protected_mode_refuses_only_remote_clients_without_a_password() {
        let remote: IpAddr = "192.168.1.9".parse().unwrap();
        let mapped: IpAddr = "::ffff:127.0.0.1".parse().unwrap();
        for local in ["127.0.0.1", "::1"] {
            assert!(!protected_refuses(true, false, local.parse().unwrap()));
        }
        assert!(!protected_refuses(true, false, mapped));
        assert!(protected_refuses(true, false, remote));
        assert!(!protected_refuses(true, true, remote), "a password is set");
        assert!(
            !protected_refuses(false, false, remote),
            "protected mode off"
        );
    }

    #[test]
    fn echoes_are_short_and_printable_and_names_cannot_forge_lines() {
        assert_eq!(echo(b"a\r\nb"), "a\\r\\nb");
        let long = echo(&[b'x'; 10_000]);
        assert_eq!(long.len(), ECHO_MAX + 3);
        assert!(valid_client_name(b"worker-1"));
        for bad in [&b"a b"[..], b"a\nid=1", b"\xff", &[b'n'; 200]] {
            assert!(!valid_client_name(bad), "{bad:?}");
        }
        assert!(constant_time_eq(b"pw", b"pw"));
        assert!(!constant_time_eq(b"pw", b"pW"));
        assert!(!constant_time_eq(b"pw", b"pw2"));
        assert!(is_http_probe(b"POST") && is_http_probe(b"Host:") && !is_http_probe(b"host"));
    }
}

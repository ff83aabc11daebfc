//! Client limits as redis.conf spells them: sizes with units (`256mb`) and
//! `client-output-buffer-limit <class> <hard> <soft> <soft-seconds>`.

use std::fmt;

/// Redis's `client-output-buffer-limit` for normal clients, on the bytes of replies produced
/// and not yet taken by the client (its output buffer). Replies are written as they are
/// produced, so a client that reads keeps this near zero; it grows while the client sends
/// commands and does not read their replies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OutputLimit {
    /// Close the client as soon as its unsent replies exceed this many bytes (0: no limit).
    pub hard_bytes: u64,
    /// Close the client when its unsent replies stay above this many bytes (0: no limit)...
    pub soft_bytes: u64,
    /// ...for this many seconds in a row.
    pub soft_seconds: u64,
}

impl OutputLimit {
    /// No limit (Redis's default for normal clients, `0 0 0`).
    pub const UNLIMITED: OutputLimit = OutputLimit {
        hard_bytes: 0,
        soft_bytes: 0,
        soft_seconds: 0,
    };
}

impl Default for OutputLimit {
    /// `256mb 64mb 60` (Redis's default for replicas): a client that stops reading while it
    /// sends commands is closed once 256 MiB of replies wait for it, or when more than 64 MiB
    /// have waited for a minute. Redis's own default for normal clients, `0 0 0`, lets one such
    /// client take all the memory.
    fn default() -> OutputLimit {
        OutputLimit {
            hard_bytes: 256 << 20,
            soft_bytes: 64 << 20,
            soft_seconds: 60,
        }
    }
}

impl fmt::Display for OutputLimit {
    /// As `CONFIG GET` shows it: `normal <hard> <soft> <soft-seconds>`, in bytes.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "normal {} {} {}",
            self.hard_bytes, self.soft_bytes, self.soft_seconds
        )
    }
}

/// A size as redis.conf writes it: a number of bytes, or with a unit (`k` 1000, `kb` 1024, `m`,
/// `mb`, `g`, `gb`; any case).
///
/// # Errors
/// Not a non-negative number with one of those units, or over `u64::MAX` bytes.
pub fn parse_memory(s: &str) -> Result<u64, String> {
    let bad = || format!("invalid size '{s}'");
    let lower = s.trim().to_ascii_lowercase();
    let digits = lower.trim_end_matches(|c: char| c.is_ascii_alphabetic());
    let unit: u64 = match &lower[digits.len()..] {
        "" | "b" => 1,
        "k" => 1000,
        "kb" => 1 << 10,
        "m" => 1000 * 1000,
        "mb" => 1 << 20,
        "g" => 1000 * 1000 * 1000,
        "gb" => 1 << 30,
        _ => return Err(bad()),
    };
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(bad());
    }
    digits
        .parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(unit))
        .ok_or_else(bad)
}

/// The classes of `client-output-buffer-limit`.
const CLASSES: [&str; 4] = ["normal", "replica", "slave", "pubsub"];

/// The limit for normal clients in a `client-output-buffer-limit` value, `None` when the
/// value names only other classes (this server has no replicas or pub/sub clients, so their
/// limits are accepted and have no effect). Either redis.conf syntax, one or more
/// `<class> <hard> <soft> <soft-seconds>` groups (`normal 256mb 64mb 60`), or a bare size
/// (the hard limit; no soft limit).
///
/// # Errors
/// A bad size, class or number of words.
pub fn parse_output_buffer_limits(value: &str) -> Result<Option<OutputLimit>, String> {
    let words: Vec<&str> = value.split_whitespace().collect();
    if let [bare] = words.as_slice() {
        return Ok(Some(OutputLimit {
            hard_bytes: parse_memory(bare)?,
            soft_bytes: 0,
            soft_seconds: 0,
        }));
    }
    if words.is_empty() || !words.len().is_multiple_of(4) {
        return Err(format!(
            "invalid client-output-buffer-limit '{value}': <class> <hard> <soft> <soft-seconds>"
        ));
    }
    let mut normal = None;
    for group in words.chunks(4) {
        let [class, hard, soft, seconds] = group else {
            continue;
        };
        let class = class.to_ascii_lowercase();
        if !CLASSES.contains(&class.as_str()) {
            return Err(format!(
                "invalid client-output-buffer-limit class '{class}' (normal, replica, pubsub)"
            ));
        }
        let limit = OutputLimit {
            hard_bytes: parse_memory(hard)?,
            soft_bytes: parse_memory(soft)?,
            soft_seconds: seconds
                .parse()
                .map_err(|_| format!("invalid soft-seconds '{seconds}'"))?,
        };
        if class == "normal" {
            normal = Some(limit);
        }
    }
    Ok(normal)
}

/// The limit for normal clients in a `client-output-buffer-limit` value
/// ([`parse_output_buffer_limits`]).
///
/// # Errors
/// A bad value, or one without the class `normal`.
pub fn parse_output_buffer_limit(value: &str) -> Result<OutputLimit, String> {
    parse_output_buffer_limits(value)?
        .ok_or_else(|| format!("no limit for class normal in '{value}'"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_take_redis_units() {
        assert_eq!(parse_memory("0"), Ok(0));
        assert_eq!(parse_memory("1234"), Ok(1234));
        assert_eq!(parse_memory("1k"), Ok(1000));
        assert_eq!(parse_memory("1KB"), Ok(1024));
        assert_eq!(parse_memory("256mb"), Ok(256 << 20));
        assert_eq!(parse_memory("2m"), Ok(2_000_000));
        assert_eq!(parse_memory("1gb"), Ok(1 << 30));
        for bad in [
            "",
            "mb",
            "-1",
            "1.5mb",
            "1tb",
            "99999999999999999999",
            "99999999999gb",
        ] {
            assert!(parse_memory(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn output_limits_take_redis_conf_syntax_and_a_bare_size() {
        let l = |h: u64, s: u64, secs: u64| OutputLimit {
            hard_bytes: h,
            soft_bytes: s,
            soft_seconds: secs,
        };
        assert_eq!(
            parse_output_buffer_limit("normal 0 0 0"),
            Ok(OutputLimit::UNLIMITED)
        );
        assert_eq!(
            parse_output_buffer_limit("normal 256mb 64mb 60"),
            Ok(l(256 << 20, 64 << 20, 60))
        );
        assert_eq!(parse_output_buffer_limit("67108864"), Ok(l(64 << 20, 0, 0)));
        assert_eq!(parse_output_buffer_limit("64mb"), Ok(l(64 << 20, 0, 0)));
        assert_eq!(
            parse_output_buffer_limit(
                "replica 256mb 64mb 60 NORMAL 1mb 512kb 10 pubsub 32mb 8mb 60"
            ),
            Ok(l(1 << 20, 512 << 10, 10))
        );
        assert_eq!(parse_output_buffer_limits("pubsub 32mb 8mb 60"), Ok(None));
        assert!(parse_output_buffer_limit("pubsub 32mb 8mb 60").is_err());
        for bad in [
            "",
            "normal 0 0",
            "normal 0 0 x",
            "master 0 0 0",
            "normal -1 0 0",
            "1 2",
        ] {
            assert!(parse_output_buffer_limits(bad).is_err(), "{bad:?}");
        }
        // CONFIG GET shows what CONFIG SET takes.
        let d = OutputLimit::default();
        assert_eq!(parse_output_buffer_limit(&d.to_string()), Ok(d));
    }
}

//! How a keyspace's keys are laid out in the one key space the engine orders: every key of a
//! database created with keyspaces starts with its keyspace's id, encoded so that the first
//! byte says how long the id is (no id's encoding is a prefix of another's), and each keyspace
//! owns one contiguous range of engine keys, `[prefix, successor(prefix))`.
//! `docs/format/keyspaces.md` specifies it; never change it.
#![deny(clippy::indexing_slicing)]
#![expect(
    clippy::big_endian_bytes,
    reason = "ids are encoded big-endian so that encodings sort like the ids"
)]

/// Longest encoded id.
pub(crate) const MAX_PREFIX_LEN: usize = 5;

/// Appends the encoding of keyspace `id` to `out`:
///
/// - `0..=0x7f`: one byte, the id;
/// - `0x80..=0x3fff`: two bytes, `0x80 | id >> 8`, then `id & 0xff`;
/// - above: five bytes, `0xc0`, then the id as u32 big-endian.
pub(crate) fn encode_id(id: u32, out: &mut Vec<u8>) {
    if id < 0x80 {
        out.push(id as u8);
    } else if id < 0x4000 {
        out.push(0x80 | (id >> 8) as u8);
        out.push((id & 0xff) as u8);
    } else {
        out.push(0xc0);
        out.extend_from_slice(&id.to_be_bytes());
    }
}

/// The encoding of keyspace `id`.
pub(crate) fn prefix_of(id: u32) -> Vec<u8> {
    let mut v = Vec::with_capacity(MAX_PREFIX_LEN);
    encode_id(id, &mut v);
    v
}

/// The keyspace id `key` starts with and the length of its encoding; `None` if `key` does not
/// start with a well-formed id (empty, truncated, or a first byte above `0xc0`).
pub(crate) fn decode_id(key: &[u8]) -> Option<(u32, usize)> {
    let first = *key.first()?;
    match first {
        0..=0x7f => Some((u32::from(first), 1)),
        0x80..=0xbf => {
            let second = *key.get(1)?;
            Some(((u32::from(first & 0x3f) << 8) | u32::from(second), 2))
        }
        0xc0 => {
            let b: [u8; 4] = key.get(1..5)?.try_into().ok()?;
            Some((u32::from_be_bytes(b), 5))
        }
        _ => None,
    }
}

/// The smallest key above every key that starts with `prefix`: the prefix with its last byte
/// below `0xff` incremented and the bytes after it removed. `None` if `prefix` is empty or all
/// `0xff` (never the case for an encoded id, whose first byte is at most `0xc0`).
pub(crate) fn successor(prefix: &[u8]) -> Option<Vec<u8>> {
    let last = prefix.iter().rposition(|&b| b != 0xff)?;
    let mut v = prefix.get(..=last)?.to_vec();
    if let Some(b) = v.last_mut() {
        *b += 1;
    }
    Some(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_round_trip_and_encodings_sort_like_ids() {
        let ids = [
            0u32,
            1,
            0x7f,
            0x80,
            0xff,
            0x100,
            0x3fff,
            0x4000,
            0x1234_5678,
            u32::MAX,
        ];
        let mut last: Option<Vec<u8>> = None;
        for id in ids {
            let p = prefix_of(id);
            assert_eq!(decode_id(&p), Some((id, p.len())), "id {id}");
            let mut key = p.clone();
            key.extend_from_slice(b"user key");
            assert_eq!(decode_id(&key), Some((id, p.len())));
            if let Some(prev) = &last {
                assert!(prev < &p, "{prev:?} < {p:?}");
                // The whole range of the smaller id lies below the larger id's prefix.
                assert!(successor(prev).unwrap() <= p);
            }
            last = Some(p);
        }
    }

    #[test]
    fn encoding_matches_the_format_doc() {
        assert_eq!(prefix_of(0), [0x00]);
        assert_eq!(prefix_of(5), [0x05]);
        assert_eq!(prefix_of(0x80), [0x80, 0x80]);
        assert_eq!(prefix_of(0x3fff), [0xbf, 0xff]);
        assert_eq!(prefix_of(0x4000), [0xc0, 0x00, 0x00, 0x40, 0x00]);
        assert_eq!(successor(&[0x05]), Some(vec![0x06]));
        assert_eq!(successor(&[0x81, 0xff]), Some(vec![0x82]));
        assert_eq!(successor(&[]), None);
    }

    #[test]
    fn malformed_prefixes_are_rejected_without_panicking() {
        assert_eq!(decode_id(&[]), None);
        assert_eq!(decode_id(&[0x80]), None);
        assert_eq!(decode_id(&[0xc0, 1, 2]), None);
        assert_eq!(decode_id(&[0xc1, 0, 0, 0, 0]), None);
        assert_eq!(decode_id(&[0xff]), None);
    }

    #[test]
    fn a_key_never_falls_outside_its_keyspace_range() {
        for id in [0u32, 0x7f, 0x80, 0x3fff, 0x4000, u32::MAX] {
            let p = prefix_of(id);
            let end = successor(&p).unwrap();
            for suffix in [&b""[..], b"\x00", b"\xff\xff\xff\xff\xff\xff"] {
                let mut k = p.clone();
                k.extend_from_slice(suffix);
                assert!(
                    p.as_slice() <= k.as_slice() && k < end,
                    "id {id} suffix {suffix:?}"
                );
            }
        }
    }
}

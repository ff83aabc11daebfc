//! Redis's glob patterns (`KEYS`, `SCAN MATCH`): `*`, `?`, `[abc]`, `[^a-z]`, `\x`.

/// True if `text` matches `pattern`.
pub fn matches(pattern: &[u8], text: &[u8]) -> bool {
    let (mut p, mut t) = (0usize, 0usize);
    // Where to resume after the last `*`: (pattern index after it, text index it matched to).
    let mut star: Option<(usize, usize)> = None;
    while t < text.len() {
        let step = match pattern.get(p) {
            Some(b'*') => {
                star = Some((p + 1, t));
                p += 1;
                continue;
            }
            Some(b'?') => Some(p + 1),
            Some(b'[') => class(pattern, p, text.get(t).copied().unwrap_or(0)),
            Some(b'\\') if p + 1 < pattern.len() => {
                (pattern.get(p + 1) == text.get(t)).then_some(p + 2)
            }
            Some(&c) => (Some(&c) == text.get(t)).then_some(p + 1),
            None => None,
        };
        match (step, star) {
            (Some(next), _) => {
                p = next;
                t += 1;
            }
            (None, Some((sp, st))) => {
                p = sp;
                t = st + 1;
                star = Some((sp, st + 1));
            }
            (None, None) => return false,
        }
    }
    pattern
        .get(p..)
        .is_some_and(|rest| rest.iter().all(|&c| c == b'*'))
}

/// Matches `c` against the class starting at `pattern[p] == b'['`; the index after it.
fn class(pattern: &[u8], p: usize, c: u8) -> Option<usize> {
    let mut i = p + 1;
    let negate = pattern.get(i) == Some(&b'^');
    if negate {
        i += 1;
    }
    let mut hit = false;
    let mut first = true;
    loop {
        match pattern.get(i) {
            None => return None,
            Some(b']') if !first => break,
            Some(b'\\') => {
                hit |= pattern.get(i + 1) == Some(&c);
                i += 2;
            }
            Some(&lo)
                if pattern.get(i + 1) == Some(&b'-')
                    && pattern.get(i + 2).is_some_and(|&h| h != b']') =>
            {
                let hi = pattern.get(i + 2).copied().unwrap_or(lo);
                let (a, b) = if lo <= hi { (lo, hi) } else { (hi, lo) };
                hit |= (a..=b).contains(&c);
                i += 3;
            }
            Some(&x) => {
                hit |= x == c;
                i += 1;
            }
        }
        first = false;
    }
    (hit != negate).then_some(i + 1)
}

#[cfg(test)]
mod tests {
    use super::matches;

    #[test]
    fn patterns_match_as_in_redis() {
        let yes = [
            ("*", "anything"),
            ("h?llo", "hello"),
            ("h*llo", "heeeello"),
            ("h[ae]llo", "hallo"),
            ("h[^e]llo", "hallo"),
            ("h[a-b]llo", "hbllo"),
            ("user:*:name", "user:42:name"),
            ("a\\*b", "a*b"),
            ("", ""),
        ];
        for (p, t) in yes {
            assert!(matches(p.as_bytes(), t.as_bytes()), "{p} should match {t}");
        }
        let no = [
            ("h?llo", "hllo"),
            ("h[ae]llo", "hillo"),
            ("h[^e]llo", "hello"),
            ("user:*:name", "user:42:age"),
            ("a\\*b", "axb"),
            ("abc", "ab"),
            ("[", "a"),
        ];
        for (p, t) in no {
            assert!(
                !matches(p.as_bytes(), t.as_bytes()),
                "{p} should not match {t}"
            );
        }
    }
}

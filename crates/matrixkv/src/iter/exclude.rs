//! [`ExcludeRanges`]: hides the entries of a source whose user keys fall in a few half-open
//! user-key ranges. Used for the rows of the matrix container's compactor, whose drained key
//! range now lives in L1 (and whose value pages may already be reused).

use crate::error::Result;
use crate::iter::{BoxedIter, InternalIterator};
use crate::key::{self, SeqNo, ValueKind};

/// A half-open user-key range `[lower, upper)`; `upper = None` means the end of the key space.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct KeyRange {
    pub lower: Vec<u8>,
    pub upper: Option<Vec<u8>>,
}

impl KeyRange {
    /// True if `user_key` lies in the range.
    pub fn contains(&self, user_key: &[u8]) -> bool {
        user_key >= self.lower.as_slice() && self.upper.as_deref().is_none_or(|u| user_key < u)
    }
}

/// An iterator that skips every entry whose user key lies in one of `ranges`.
pub(crate) struct ExcludeRanges {
    inner: BoxedIter,
    ranges: Vec<KeyRange>,
}

impl ExcludeRanges {
    /// Wraps `inner`, hiding `ranges` (at most a few; checked linearly).
    pub fn new(inner: BoxedIter, ranges: Vec<KeyRange>) -> ExcludeRanges {
        ExcludeRanges { inner, ranges }
    }

    fn hiding(&self) -> Option<&KeyRange> {
        if !self.inner.valid() {
            return None;
        }
        let uk = key::user_key(self.inner.key());
        self.ranges.iter().find(|r| r.contains(uk))
    }

    /// Moves forward past hidden entries: seek to the end of the range that hides the
    /// current entry, until the entry is visible or the source is exhausted.
    fn skip_forward(&mut self) -> Result<()> {
        while let Some(r) = self.hiding() {
            match r.upper.clone() {
                Some(u) => self.inner.seek(&key::seek_key(&u, SeqNo::MAX))?,
                None => {
                    // Nothing after the end of the key space: exhaust the source.
                    self.inner.seek_to_last()?;
                    if self.inner.valid() {
                        self.inner.next()?;
                    }
                    return Ok(());
                }
            }
        }
        Ok(())
    }

    /// Moves backward past hidden entries: to the last entry before the hiding range.
    fn skip_backward(&mut self) -> Result<()> {
        while let Some(r) = self.hiding() {
            let lower = r.lower.clone();
            // (lower, MAX, Value) sorts before every version of `lower`.
            let target = key::make_internal_key(&lower, SeqNo::MAX, ValueKind::Value);
            self.inner.seek_for_prev(&target)?;
            if self.inner.valid() && key::compare_internal(self.inner.key(), &target).is_eq() {
                self.inner.prev()?;
            }
        }
        Ok(())
    }
}

impl InternalIterator for ExcludeRanges {
    fn valid(&self) -> bool {
        self.inner.valid()
    }

    fn seek_to_first(&mut self) -> Result<()> {
        self.inner.seek_to_first()?;
        self.skip_forward()
    }

    fn seek_to_last(&mut self) -> Result<()> {
        self.inner.seek_to_last()?;
        self.skip_backward()
    }

    fn seek(&mut self, target: &[u8]) -> Result<()> {
        self.inner.seek(target)?;
        self.skip_forward()
    }

    fn seek_for_prev(&mut self, target: &[u8]) -> Result<()> {
        self.inner.seek_for_prev(target)?;
        self.skip_backward()
    }

    fn next(&mut self) -> Result<()> {
        self.inner.next()?;
        self.skip_forward()
    }

    fn prev(&mut self) -> Result<()> {
        self.inner.prev()?;
        self.skip_backward()
    }

    fn key(&self) -> &[u8] {
        self.inner.key()
    }

    fn value(&self) -> &[u8] {
        self.inner.value()
    }

    fn value_status(&self) -> Result<()> {
        self.inner.value_status()
    }

    fn site(&self) -> Option<crate::error::CorruptionSite> {
        self.inner.site()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::iter::vec_iter::VecIter;

    fn entries(keys: &[&str]) -> Vec<(Vec<u8>, Vec<u8>)> {
        keys.iter()
            .flat_map(|k| {
                [2u64, 1].map(|s| {
                    (
                        key::make_internal_key(k.as_bytes(), SeqNo(s), ValueKind::Value),
                        vec![],
                    )
                })
            })
            .collect()
    }

    fn collect_fwd(it: &mut ExcludeRanges) -> Vec<String> {
        let mut out = Vec::new();
        it.seek_to_first().unwrap();
        while it.valid() {
            out.push(String::from_utf8(key::user_key(it.key()).to_vec()).unwrap());
            it.next().unwrap();
        }
        out.dedup();
        out
    }

    fn collect_rev(it: &mut ExcludeRanges) -> Vec<String> {
        let mut out = Vec::new();
        it.seek_to_last().unwrap();
        while it.valid() {
            out.push(String::from_utf8(key::user_key(it.key()).to_vec()).unwrap());
            it.prev().unwrap();
        }
        out.dedup();
        out.reverse();
        out
    }

    #[test]
    fn drained_ranges_are_hidden_in_both_directions() {
        let keys = ["a", "b", "c", "d", "e", "f", "g"];
        let ranges = vec![
            KeyRange {
                lower: b"b".to_vec(),
                upper: Some(b"d".to_vec()),
            },
            KeyRange {
                lower: b"f".to_vec(),
                upper: None,
            },
        ];
        let mut it = ExcludeRanges::new(Box::new(VecIter::new(entries(&keys))), ranges);
        assert_eq!(collect_fwd(&mut it), ["a", "d", "e"]);
        assert_eq!(collect_rev(&mut it), ["a", "d", "e"]);
        it.seek(&key::seek_key(b"bb", SeqNo::MAX)).unwrap();
        assert_eq!(key::user_key(it.key()), b"d");
        it.seek_for_prev(&key::seek_key(b"c", SeqNo(0))).unwrap();
        assert_eq!(key::user_key(it.key()), b"a");
        it.seek(&key::seek_key(b"f", SeqNo::MAX)).unwrap();
        assert!(!it.valid());
    }

    #[test]
    fn a_range_from_the_empty_key_hides_the_start() {
        let keys = ["a", "b", "c"];
        let ranges = vec![KeyRange {
            lower: Vec::new(),
            upper: Some(b"b".to_vec()),
        }];
        let mut it = ExcludeRanges::new(Box::new(VecIter::new(entries(&keys))), ranges);
        assert_eq!(collect_fwd(&mut it), ["b", "c"]);
        assert_eq!(collect_rev(&mut it), ["b", "c"]);
    }
}

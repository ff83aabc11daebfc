//! [`VecIter`]: an [`InternalIterator`] over an owned, sorted vector of entries.
//!
//! Used wherever a small in-memory source is needed (tests of the merging and user-facing
//! iterators, tests of other modules, small fixed sources). Under `cfg(test)` the module also
//! holds `testutil`: a checker that drives any internal iterator with random operations and
//! compares it with a sorted model, and the seed helper used by randomized tests.
//!
//! Thread safety: a `VecIter` is owned by one thread at a time (`Send`).

use crate::error::Result;
use crate::iter::InternalIterator;
use crate::key::compare_internal;

/// An iterator over `(internal key, value)` pairs held in a vector.
#[derive(Debug, Clone, Default)]
pub struct VecIter {
    entries: Vec<(Vec<u8>, Vec<u8>)>,
    /// Index of the current entry; `entries.len()` when not positioned.
    pos: usize,
    /// The file `site()` names (with the entry's index as the offset), if any.
    file: Option<std::path::PathBuf>,
}

impl VecIter {
    /// An iterator over `entries`, sorted here into internal-key order (a stable sort, so
    /// already sorted input costs one pass). The iterator starts unpositioned.
    pub fn new(mut entries: Vec<(Vec<u8>, Vec<u8>)>) -> VecIter {
        entries.sort_by(|a, b| compare_internal(&a.0, &b.0));
        let pos = entries.len();
        VecIter {
            entries,
            pos,
            file: None,
        }
    }

    /// Makes `site()` name `file` as an SSTable, at the current entry's index: a stand-in
    /// for a table in tests of how callers report damaged entries.
    pub fn read_from(mut self, file: impl Into<std::path::PathBuf>) -> VecIter {
        self.file = Some(file.into());
        self
    }

    fn current(&self) -> Option<&(Vec<u8>, Vec<u8>)> {
        self.entries.get(self.pos)
    }
}

impl InternalIterator for VecIter {
    fn valid(&self) -> bool {
        self.pos < self.entries.len()
    }

    fn seek_to_first(&mut self) -> Result<()> {
        self.pos = 0;
        Ok(())
    }

    fn seek_to_last(&mut self) -> Result<()> {
        // An empty vector leaves `pos == len == 0`, i.e. invalid.
        self.pos = self.entries.len().saturating_sub(1);
        Ok(())
    }

    fn seek(&mut self, target: &[u8]) -> Result<()> {
        self.pos = self
            .entries
            .partition_point(|(k, _)| compare_internal(k, target).is_lt());
        Ok(())
    }

    fn seek_for_prev(&mut self, target: &[u8]) -> Result<()> {
        let after = self
            .entries
            .partition_point(|(k, _)| compare_internal(k, target).is_le());
        self.pos = after.checked_sub(1).unwrap_or(self.entries.len());
        Ok(())
    }

    fn next(&mut self) -> Result<()> {
        if self.valid() {
            self.pos += 1;
        }
        Ok(())
    }

    fn prev(&mut self) -> Result<()> {
        self.pos = self.pos.checked_sub(1).unwrap_or(self.entries.len());
        Ok(())
    }

    fn key(&self) -> &[u8] {
        self.current().map_or(&[], |(k, _)| k)
    }

    fn value(&self) -> &[u8] {
        self.current().map_or(&[], |(_, v)| v)
    }

    fn site(&self) -> Option<crate::error::CorruptionSite> {
        let file = self.file.as_ref()?;
        self.valid().then(|| {
            crate::error::CorruptionSite::new(
                crate::error::ArtifactKind::Sst,
                file,
                self.pos as u64,
            )
        })
    }
}

/// Helpers for randomized iterator tests.
#[cfg(test)]
pub(crate) mod testutil {
    use rand::Rng;
    use rand::rngs::StdRng;

    use super::VecIter;
    use crate::error::{Error, Result};
    use crate::iter::InternalIterator;
    use crate::key::{SeqNo, ValueKind, compare_internal, make_internal_key, split_internal};

    /// The seed for a randomized test: `MATRIXKV_TEST_SEED` if set, otherwise a fresh random
    /// one. It is printed so a failing run (whose output is shown) can be replayed.
    pub(crate) fn test_seed() -> u64 {
        let seed = std::env::var("MATRIXKV_TEST_SEED")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(rand::random);
        eprintln!("randomized test seed: {seed} (replay with MATRIXKV_TEST_SEED={seed})");
        seed
    }

    /// A seek target near the model's keys: an exact key, another version of a present user
    /// key, a neighbouring user key, or an extreme.
    pub(crate) fn random_target(rng: &mut StdRng, model: &[(Vec<u8>, Vec<u8>)]) -> Vec<u8> {
        let pick = |rng: &mut StdRng| -> Vec<u8> {
            model
                .get(rng.gen_range(0..model.len().max(1)))
                .map_or_else(|| b"m".to_vec(), |(k, _)| k.clone())
        };
        let random_version = |rng: &mut StdRng, user: &[u8]| {
            let kind = if rng.gen_bool(0.5) {
                ValueKind::Value
            } else {
                ValueKind::Deletion
            };
            make_internal_key(user, SeqNo(rng.gen_range(0..300)), kind)
        };
        match rng.gen_range(0..10) {
            0..=3 => pick(rng),
            4..=6 => {
                let k = pick(rng);
                let user = split_internal(&k).map_or(&k[..], |(u, _)| u).to_vec();
                random_version(rng, &user)
            }
            7 | 8 => {
                let k = pick(rng);
                let mut user = split_internal(&k).map_or(&k[..], |(u, _)| u).to_vec();
                if rng.gen_bool(0.5) {
                    user.push(rng.r#gen());
                } else if let Some(last) = user.last_mut() {
                    *last = last.wrapping_add(1);
                }
                random_version(rng, &user)
            }
            _ => {
                if rng.gen_bool(0.5) {
                    make_internal_key(b"", SeqNo::MAX, ValueKind::Value)
                } else {
                    make_internal_key(&[0xff; 6], SeqNo::ZERO, ValueKind::Deletion)
                }
            }
        }
    }

    /// Drives `it` with `steps` random operations (seeks of every kind, `next`, `prev`, mixed
    /// directions) and asserts after each that it is positioned exactly where the sorted
    /// `model` says. `ctx` (holding the seed) is part of every failure message.
    pub(crate) fn check_iter_against_model(
        it: &mut dyn InternalIterator,
        model: &[(Vec<u8>, Vec<u8>)],
        rng: &mut StdRng,
        steps: usize,
        ctx: &str,
    ) {
        // Model position: Some(index) when valid.
        let mut pos: Option<usize> = None;
        for step in 0..steps {
            let op: String;
            match rng.gen_range(0..12) {
                0 => {
                    op = "seek_to_first".into();
                    it.seek_to_first().unwrap();
                    pos = (!model.is_empty()).then_some(0);
                }
                1 => {
                    op = "seek_to_last".into();
                    it.seek_to_last().unwrap();
                    pos = model.len().checked_sub(1);
                }
                2 | 3 => {
                    let t = random_target(rng, model);
                    op = format!("seek({t:?})");
                    it.seek(&t).unwrap();
                    let i = model.partition_point(|(k, _)| compare_internal(k, &t).is_lt());
                    pos = (i < model.len()).then_some(i);
                }
                4 | 5 => {
                    let t = random_target(rng, model);
                    op = format!("seek_for_prev({t:?})");
                    it.seek_for_prev(&t).unwrap();
                    let i = model.partition_point(|(k, _)| compare_internal(k, &t).is_le());
                    pos = i.checked_sub(1);
                }
                6..=8 => {
                    op = "next".into();
                    if pos.is_some() {
                        it.next().unwrap();
                        pos = pos.map(|p| p + 1).filter(|&p| p < model.len());
                    }
                }
                _ => {
                    op = "prev".into();
                    if pos.is_some() {
                        it.prev().unwrap();
                        pos = pos.and_then(|p| p.checked_sub(1));
                    }
                }
            }
            assert_eq!(
                it.valid(),
                pos.is_some(),
                "{ctx} step {step} after {op}: valid"
            );
            if let Some(p) = pos {
                let (k, v) = &model[p];
                assert_eq!(it.key(), k.as_slice(), "{ctx} step {step} after {op}: key");
                assert_eq!(
                    it.value(),
                    v.as_slice(),
                    "{ctx} step {step} after {op}: value"
                );
            }
        }
    }

    /// A child that fails every movement after a countdown.
    pub(crate) struct FailAfter {
        pub inner: VecIter,
        pub moves_left: usize,
    }

    impl FailAfter {
        fn tick(&mut self) -> Result<()> {
            if self.moves_left == 0 {
                return Err(Error::invalid("injected read failure"));
            }
            self.moves_left -= 1;
            Ok(())
        }
    }

    impl InternalIterator for FailAfter {
        fn valid(&self) -> bool {
            self.inner.valid()
        }
        fn seek_to_first(&mut self) -> Result<()> {
            self.tick()?;
            self.inner.seek_to_first()
        }
        fn seek_to_last(&mut self) -> Result<()> {
            self.tick()?;
            self.inner.seek_to_last()
        }
        fn seek(&mut self, t: &[u8]) -> Result<()> {
            self.tick()?;
            self.inner.seek(t)
        }
        fn seek_for_prev(&mut self, t: &[u8]) -> Result<()> {
            self.tick()?;
            self.inner.seek_for_prev(t)
        }
        fn next(&mut self) -> Result<()> {
            self.tick()?;
            self.inner.next()
        }
        fn prev(&mut self) -> Result<()> {
            self.tick()?;
            self.inner.prev()
        }
        fn key(&self) -> &[u8] {
            self.inner.key()
        }
        fn value(&self) -> &[u8] {
            self.inner.value()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::testutil::{check_iter_against_model, test_seed};
    use super::*;
    use crate::key::{SeqNo, ValueKind, make_internal_key};
    use rand::SeedableRng;
    use rand::rngs::StdRng;

    fn entry(user: &[u8], seq: u64, v: &[u8]) -> (Vec<u8>, Vec<u8>) {
        (
            make_internal_key(user, SeqNo(seq), ValueKind::Value),
            v.to_vec(),
        )
    }

    #[test]
    fn unsorted_input_is_iterated_in_internal_key_order() {
        let mut it = VecIter::new(vec![
            entry(b"b", 1, b"b1"),
            entry(b"a", 1, b"a1"),
            entry(b"a", 7, b"a7"),
        ]);
        assert!(!it.valid());
        it.seek_to_first().unwrap();
        let mut values = Vec::new();
        while it.valid() {
            values.push(it.value().to_vec());
            it.next().unwrap();
        }
        assert_eq!(values, [b"a7".to_vec(), b"a1".to_vec(), b"b1".to_vec()]);
    }

    #[test]
    fn empty_iterator_is_never_valid() {
        let mut it = VecIter::new(Vec::new());
        it.seek_to_first().unwrap();
        assert!(!it.valid());
        it.seek_to_last().unwrap();
        assert!(!it.valid());
        it.seek(b"x").unwrap();
        assert!(!it.valid());
        it.seek_for_prev(b"x").unwrap();
        assert!(!it.valid());
        assert_eq!(it.key(), b"");
    }

    #[test]
    fn vec_iter_matches_model_under_random_operations() {
        let seed = test_seed();
        let mut rng = StdRng::seed_from_u64(seed);
        let model: Vec<_> = (0..50u64)
            .map(|i| entry(format!("k{:02}", i / 3).as_bytes(), 100 - i, b"v"))
            .collect();
        let mut it = VecIter::new(model.clone());
        check_iter_against_model(&mut it, &model, &mut rng, 2000, &format!("seed {seed}"));
    }
}

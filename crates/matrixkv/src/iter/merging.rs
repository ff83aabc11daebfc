//! [`MergingIterator`]: the union of several internal iterators, in internal-key order, in
//! both directions.
//!
//! The read path merges memtables, RowTables of the matrix container and the levels into one
//! stream, which [`crate::iter::db_iter::DbIterator`] then turns into user-visible entries;
//! compactions merge their inputs the same way.
//!
//! Semantics follow LevelDB `table/merger.cc`. Children are ordered by `(internal key, child
//! index)`: for equal keys (duplicates of one entry) the lower index, i.e. the newer source
//! because children are passed newest first, comes first going forward and last going
//! backward, so `prev` exactly retraces `next`. The current child is the top of a binary heap
//! of child indices (min-heap forward, max-heap backward), so a step costs O(log n) key
//! comparisons for n children. When the direction changes, every other child is repositioned
//! around the current key with `seek` / `seek_for_prev`.
//!
//! Thread safety: owned by one thread at a time (`Send`, like its children).

use crate::error::Result;
use crate::iter::{BoxedIter, InternalIterator};
use crate::key::compare_internal;

/// Direction of the last movement; it decides the heap order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Direction {
    Forward,
    Backward,
}

/// Merges children into one iterator over the union of their entries.
pub struct MergingIterator {
    children: Vec<BoxedIter>,
    /// Indices of the valid children, heap-ordered for `direction`; `heap[0]` is current.
    /// Empty when the iterator is not positioned.
    heap: Vec<usize>,
    direction: Direction,
}

impl MergingIterator {
    /// An iterator over the union of `children`, passed newest source first. It starts
    /// unpositioned: call a seek first.
    pub fn new(children: Vec<BoxedIter>) -> MergingIterator {
        let heap = Vec::with_capacity(children.len());
        MergingIterator {
            children,
            heap,
            direction: Direction::Forward,
        }
    }

    /// The index of the current child, if positioned.
    fn current(&self) -> Option<usize> {
        self.heap.first().copied()
    }

    /// The index (in the order given to [`MergingIterator::new`]) of the child the current
    /// entry comes from, if positioned.
    pub fn current_child(&self) -> Option<usize> {
        self.current()
    }

    /// Applies `op` to every child, then rebuilds the heap for `direction`. On an error the
    /// iterator is left unpositioned.
    fn reposition_all(
        &mut self,
        direction: Direction,
        mut op: impl FnMut(&mut dyn InternalIterator) -> Result<()>,
    ) -> Result<()> {
        self.heap.clear();
        self.direction = direction;
        for child in &mut self.children {
            op(child.as_mut())?;
        }
        self.rebuild_heap();
        Ok(())
    }

    /// Refills the heap with every valid child, ordered for the current direction.
    fn rebuild_heap(&mut self) {
        self.heap.clear();
        self.heap
            .extend((0..self.children.len()).filter(|&i| self.children[i].valid()));
        let n = self.heap.len();
        for i in (0..n / 2).rev() {
            sift_down(&self.children, &mut self.heap, self.direction, i);
        }
    }

    /// Moves the current child one step in `direction` (which must be the heap's direction)
    /// and restores the heap.
    fn step_current(&mut self, cur: usize) -> Result<()> {
        let child = &mut self.children[cur];
        let moved = match self.direction {
            Direction::Forward => child.next(),
            Direction::Backward => child.prev(),
        };
        if let Err(e) = moved {
            self.heap.clear();
            return Err(e);
        }
        if !self.children[cur].valid() {
            // Remove the top: move the last element up and sift it down.
            self.heap.swap_remove(0);
        }
        sift_down(&self.children, &mut self.heap, self.direction, 0);
        Ok(())
    }

    /// Positions every child except `cur` after `(key, cur)` in the `(key, index)` order, ready
    /// to move forward from the current entry.
    fn switch_to_forward(&mut self, cur: usize) -> Result<()> {
        let key = self.children[cur].key().to_vec();
        for (j, child) in self.children.iter_mut().enumerate() {
            if j == cur {
                continue;
            }
            child.seek(&key)?;
            // A duplicate of the current key in a lower (newer) child comes before it.
            while j < cur && child.valid() && child.key() == key.as_slice() {
                child.next()?;
            }
        }
        Ok(())
    }

    /// Positions every child except `cur` before `(key, cur)` in the `(key, index)` order,
    /// ready to move backward from the current entry.
    fn switch_to_backward(&mut self, cur: usize) -> Result<()> {
        let key = self.children[cur].key().to_vec();
        for (j, child) in self.children.iter_mut().enumerate() {
            if j == cur {
                continue;
            }
            child.seek_for_prev(&key)?;
            // A duplicate of the current key in a higher (older) child comes after it.
            while j > cur && child.valid() && child.key() == key.as_slice() {
                child.prev()?;
            }
        }
        Ok(())
    }

    /// Changes direction at the current child `cur`: repositions the other children, then
    /// rebuilds the heap (the current child is moved afterwards by the caller).
    fn switch_direction(&mut self, cur: usize, direction: Direction) -> Result<()> {
        let repositioned = match direction {
            Direction::Forward => self.switch_to_forward(cur),
            Direction::Backward => self.switch_to_backward(cur),
        };
        if let Err(e) = repositioned {
            self.heap.clear();
            return Err(e);
        }
        self.direction = direction;
        self.rebuild_heap();
        // The current child is still valid and, in the new order, comes before every other
        // child, so it is back on top.
        debug_assert_eq!(self.current(), Some(cur));
        Ok(())
    }
}

/// True if child `a` comes before child `b` in `direction`: `(key, index)` ascending going
/// forward, descending going backward.
fn before(children: &[BoxedIter], direction: Direction, a: usize, b: usize) -> bool {
    let ord = compare_internal(children[a].key(), children[b].key()).then(a.cmp(&b));
    match direction {
        Direction::Forward => ord.is_lt(),
        Direction::Backward => ord.is_gt(),
    }
}

/// Restores the heap property below position `i`.
fn sift_down(children: &[BoxedIter], heap: &mut [usize], direction: Direction, mut i: usize) {
    let n = heap.len();
    loop {
        let left = 2 * i + 1;
        if left >= n {
            return;
        }
        let right = left + 1;
        let mut best = left;
        if right < n && before(children, direction, heap[right], heap[left]) {
            best = right;
        }
        if !before(children, direction, heap[best], heap[i]) {
            return;
        }
        heap.swap(i, best);
        i = best;
    }
}

impl InternalIterator for MergingIterator {
    fn valid(&self) -> bool {
        !self.heap.is_empty()
    }

    fn seek_to_first(&mut self) -> Result<()> {
        self.reposition_all(Direction::Forward, |c| c.seek_to_first())
    }

    fn seek_to_last(&mut self) -> Result<()> {
        self.reposition_all(Direction::Backward, |c| c.seek_to_last())
    }

    fn seek(&mut self, target: &[u8]) -> Result<()> {
        self.reposition_all(Direction::Forward, |c| c.seek(target))
    }

    fn seek_for_prev(&mut self, target: &[u8]) -> Result<()> {
        self.reposition_all(Direction::Backward, |c| c.seek_for_prev(target))
    }

    fn next(&mut self) -> Result<()> {
        let Some(cur) = self.current() else {
            return Ok(());
        };
        if self.direction != Direction::Forward {
            self.switch_direction(cur, Direction::Forward)?;
        }
        self.step_current(cur)
    }

    fn prev(&mut self) -> Result<()> {
        let Some(cur) = self.current() else {
            return Ok(());
        };
        if self.direction != Direction::Backward {
            self.switch_direction(cur, Direction::Backward)?;
        }
        self.step_current(cur)
    }

    fn key(&self) -> &[u8] {
        self.current().map_or(&[], |c| self.children[c].key())
    }

    fn value(&self) -> &[u8] {
        self.current().map_or(&[], |c| self.children[c].value())
    }

    fn value_status(&self) -> Result<()> {
        self.current()
            .map_or(Ok(()), |c| self.children[c].value_status())
    }

    fn site(&self) -> Option<crate::error::CorruptionSite> {
        self.current().and_then(|c| self.children[c].site())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::iter::vec_iter::VecIter;
    use crate::iter::vec_iter::testutil::{FailAfter, check_iter_against_model, test_seed};
    use crate::key::{SeqNo, ValueKind, make_internal_key};
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};

    type KeyValue = (Vec<u8>, Vec<u8>);
    type Entries = Vec<KeyValue>;

    fn entry(user: &[u8], seq: u64, v: &[u8]) -> (Vec<u8>, Vec<u8>) {
        (
            make_internal_key(user, SeqNo(seq), ValueKind::Value),
            v.to_vec(),
        )
    }

    fn boxed(entries: Entries) -> BoxedIter {
        Box::new(VecIter::new(entries))
    }

    /// The model of a merge: all entries ordered by `(internal key, child index)`.
    fn merged_model(children: &[Entries]) -> Entries {
        let mut all: Vec<(usize, KeyValue)> = children
            .iter()
            .enumerate()
            .flat_map(|(i, c)| c.iter().cloned().map(move |e| (i, e)))
            .collect();
        all.sort_by(|(ia, a), (ib, b)| compare_internal(&a.0, &b.0).then(ia.cmp(ib)));
        all.into_iter().map(|(_, e)| e).collect()
    }

    /// Random children: `n` sources sharing a key space, each entry tagged with its child in
    /// the value. With `duplicates`, some internal keys appear in several children.
    fn random_children(rng: &mut StdRng, duplicates: bool) -> Vec<Entries> {
        let n = rng.gen_range(0..8);
        let mut children = vec![Vec::new(); n];
        if n == 0 {
            return children;
        }
        let mut seq = 0;
        for _ in 0..rng.gen_range(0..150) {
            seq += 1;
            let user = format!("k{:02}", rng.gen_range(0..40));
            let copies = if duplicates && rng.gen_bool(0.2) {
                2
            } else {
                1
            };
            for _ in 0..copies {
                let c = rng.gen_range(0..n);
                let e = entry(user.as_bytes(), seq, format!("c{c}s{seq}").as_bytes());
                if !children[c].contains(&e) {
                    children[c].push(e);
                }
            }
        }
        for c in &mut children {
            c.sort_by(|a, b| compare_internal(&a.0, &b.0));
        }
        children
    }

    #[test]
    fn merge_of_disjoint_children_matches_sorted_union() {
        let seed = test_seed();
        let mut rng = StdRng::seed_from_u64(seed);
        for round in 0..20 {
            let children = random_children(&mut rng, false);
            let model = merged_model(&children);
            let mut it = MergingIterator::new(children.into_iter().map(boxed).collect());
            let ctx = format!("seed {seed} round {round}");
            check_iter_against_model(&mut it, &model, &mut rng, 800, &ctx);
        }
    }

    #[test]
    fn duplicate_keys_come_from_newer_children_first_and_prev_retraces_next() {
        let seed = test_seed();
        let mut rng = StdRng::seed_from_u64(seed);
        for round in 0..20 {
            let children = random_children(&mut rng, true);
            let model = merged_model(&children);
            let mut it = MergingIterator::new(children.into_iter().map(boxed).collect());
            let ctx = format!("seed {seed} round {round}");
            check_iter_against_model(&mut it, &model, &mut rng, 800, &ctx);
        }
    }

    #[test]
    fn direction_switch_repositions_every_child() {
        let a = vec![entry(b"a", 1, b"a"), entry(b"d", 1, b"d")];
        let b = vec![entry(b"b", 1, b"b"), entry(b"e", 1, b"e")];
        let c = vec![entry(b"c", 1, b"c"), entry(b"f", 1, b"f")];
        let mut it = MergingIterator::new(vec![boxed(a), boxed(b), boxed(c)]);
        it.seek_to_first().unwrap();
        let mut seen = Vec::new();
        for step in [
            "next", "next", "next", "prev", "prev", "next", "next", "next", "next",
        ] {
            seen.push(it.value().to_vec());
            if step == "next" {
                it.next().unwrap();
            } else {
                it.prev().unwrap();
            }
        }
        seen.push(it.value().to_vec());
        let got: Vec<String> = seen
            .into_iter()
            .map(|v| String::from_utf8(v).unwrap())
            .collect();
        assert_eq!(got, ["a", "b", "c", "d", "c", "b", "c", "d", "e", "f"]);
        it.next().unwrap();
        assert!(!it.valid());
    }

    #[test]
    fn merge_with_no_children_is_empty() {
        let mut it = MergingIterator::new(Vec::new());
        it.seek_to_first().unwrap();
        assert!(!it.valid());
        it.seek_for_prev(b"anything").unwrap();
        assert!(!it.valid());
    }

    #[test]
    fn child_error_is_returned_and_leaves_the_merge_unpositioned() {
        let good = (0..10u64)
            .map(|i| entry(format!("a{i}").as_bytes(), 1, b"g"))
            .collect();
        let failing = FailAfter {
            inner: VecIter::new(
                (0..10u64)
                    .map(|i| entry(format!("b{i}").as_bytes(), 1, b"f"))
                    .collect(),
            ),
            moves_left: 3,
        };
        let mut it = MergingIterator::new(vec![boxed(good), Box::new(failing)]);
        it.seek_to_first().unwrap(); // failing child: 1 move used
        let mut result = Ok(());
        for _ in 0..30 {
            result = it.next();
            if result.is_err() {
                break;
            }
        }
        assert!(result.is_err(), "the injected failure must surface");
        assert!(!it.valid());
        // A failing seek also surfaces.
        assert!(it.seek_to_first().is_err());
        assert!(!it.valid());
    }

    #[test]
    fn the_site_is_the_current_childs() {
        let a = VecIter::new(vec![entry(b"a", 1, b"1"), entry(b"c", 1, b"3")]).read_from("/a.sst");
        let b = VecIter::new(vec![entry(b"b", 1, b"2")]).read_from("/b.sst");
        let mut it = MergingIterator::new(vec![Box::new(a), Box::new(b)]);
        let mut sites = Vec::new();
        it.seek_to_first().unwrap();
        while it.valid() {
            let s = it.site().unwrap();
            sites.push((s.path.display().to_string(), s.offset));
            it.next().unwrap();
        }
        let want = [("/a.sst", 0), ("/b.sst", 0), ("/a.sst", 1)];
        let want: Vec<(String, u64)> = want.iter().map(|(p, o)| ((*p).to_owned(), *o)).collect();
        assert_eq!(sites, want);
        assert!(it.site().is_none());
    }
}

//! Reads: point lookups newest-to-oldest (memtables, L0, L1..Ln) and merged iterators.

use std::cmp::Ordering as CmpOrdering;
use std::sync::Arc;

use super::{DbInner, TableCache};
use crate::error::Result;
use crate::iter::db_iter::DbIterator;
use crate::iter::merging::MergingIterator;
use crate::iter::{BoxedIter, InternalIterator};
use crate::key::{self, SeqNo, ValueKind};
use crate::keyspace::registry::Settings;
use crate::options::ReadOptions;
use crate::stats::Counters;
use crate::version::edit::FileMeta;

impl DbInner {
    /// The sequence number a read without a snapshot sees.
    pub(crate) fn latest_seq(&self) -> SeqNo {
        self.visible_seq.load()
    }

    /// What a read searches and the sequence number it reads at (`snapshot`, or the latest
    /// write), taken in this order. The view keeps its memtables and version, and so every
    /// version of a key they hold, for as long as the read holds it; a sequence number taken
    /// first, unregistered, could be passed by a flush or compaction that starts and installs
    /// before the view is taken, and drops the versions only that sequence number would see
    /// (it keeps those of `smallest_snapshot`, at least the sequence number published when it
    /// started). RocksDB's `GetImpl` takes its SuperVersion before its sequence number for the
    /// same reason. `Err(Closed)` once the database is closed.
    pub(crate) fn read_point(
        &self,
        snapshot: Option<SeqNo>,
    ) -> Result<(Arc<super::ReadView>, SeqNo)> {
        self.check_open()?;
        let view = self.read_view();
        #[cfg(feature = "testing")]
        super::test_hooks::TestHooks::run(&self.test_hooks.after_read_view);
        Ok((view, snapshot.unwrap_or_else(|| self.latest_seq())))
    }

    /// Point lookup as of `snapshot`.
    pub(crate) fn get(
        self: &Arc<Self>,
        ks: &Settings,
        user_key: &[u8],
        snapshot: Option<SeqNo>,
    ) -> Result<Option<Vec<u8>>> {
        let (view, seq) = self.read_point(snapshot)?;
        self.get_in_view(&view, ks, &ks.engine_key(user_key), seq, None)
    }

    /// Point lookups of `keys`, all as of one sequence number (`snapshot`, or the latest
    /// write when the call starts) in one read view: the result is consistent across the keys
    /// even while writes and compactions go on. Keys are looked up once each, in key order,
    /// so consecutive lookups reuse the blocks, rows and table readers the previous one
    /// brought into the caches; the results come back in the order of `keys`, one per key
    /// (duplicates included), each with its own error.
    pub(crate) fn multi_get(
        self: &Arc<Self>,
        ks: &Settings,
        keys: &[&[u8]],
        snapshot: Option<SeqNo>,
    ) -> Vec<Result<Option<Vec<u8>>>> {
        let (view, seq) = match self.read_point(snapshot) {
            Ok(p) => p,
            Err(e) => return keys.iter().map(|_| Err(e.duplicate())).collect(),
        };
        let mut order: Vec<usize> = (0..keys.len()).collect();
        order.sort_by(|&a, &b| keys.get(a).cmp(&keys.get(b)));
        let mut results: Vec<Result<Option<Vec<u8>>>> = keys.iter().map(|_| Ok(None)).collect();
        // Keys go in ascending order: each row's search starts where the previous key's ended.
        let mut floors = super::matrix::RowFloors::new();
        // One lookup per distinct key; its duplicates get copies of the answer.
        for same in order.chunk_by(|&a, &b| keys.get(a) == keys.get(b)) {
            let (Some((&last, rest)), Some(key)) =
                (same.split_last(), same.first().and_then(|&i| keys.get(i)))
            else {
                continue;
            };
            let found = self.get_in_view(&view, ks, &ks.engine_key(key), seq, Some(&mut floors));
            for &i in rest {
                if let Some(slot) = results.get_mut(i) {
                    *slot = match &found {
                        Ok(v) => Ok(v.clone()),
                        Err(e) => Err(e.duplicate()),
                    };
                }
            }
            if let Some(slot) = results.get_mut(last) {
                *slot = found;
            }
        }
        results
    }

    /// Point lookup as of `seq` in `view`.
    ///
    /// The newest version found decides, unless it is a merge operand: then the lookup goes
    /// on through the same sources, newest first, collecting every version of the key
    /// (`versions` of each memtable, row and table; rows keep their cross-row hint windows)
    /// until the first that is not an operand, and combines them.
    fn get_in_view(
        self: &Arc<Self>,
        view: &Arc<super::ReadView>,
        ks: &Settings,
        user_key: &[u8],
        seq: SeqNo,
        floors: Option<&mut super::matrix::RowFloors>,
    ) -> Result<Option<Vec<u8>>> {
        Counters::add(&self.counters.gets, 1);
        let range_dels = view.range_dels();
        if let Some(tombstone) = (!range_dels.is_empty())
            .then(|| range_dels.max_covering(user_key, seq))
            .flatten()
        {
            return self.get_covered(view, ks, user_key, seq, tombstone);
        }
        let found = |kind: ValueKind, v: Vec<u8>| self.resolve_found(ks, user_key, kind, v);
        // The key's versions, newest first, once the newest turned out to be an operand.
        let mut chain: crate::key::Versions = Vec::new();
        let resolved = |chain: &[(ValueKind, Vec<u8>)]| {
            chain.last().is_some_and(|(k, _)| *k != ValueKind::Merge)
        };
        // Memtables and rows give their versions in one search (just the newest one unless it
        // is an operand), so the newest version of a merged key is never searched twice.
        for m in std::iter::once(&view.mem).chain(&view.imm) {
            chain.extend(m.versions(user_key, seq)?);
            if let [(kind, _)] = chain.as_slice()
                && *kind != ValueKind::Merge
            {
                Counters::add(&self.counters.get_hits_memtable, 1);
                let (kind, v) = chain.swap_remove(0);
                return found(kind, v);
            }
            if resolved(&chain) {
                return self.combine(ks, user_key, chain);
            }
        }
        let read = super::levels::PointRead { ks, user_key, seq };
        match self
            .levels
            .get_below_memtables(self, view, &read, chain, floors)?
        {
            Some(answer) => Ok(answer),
            None => self.get_by_iterator(view, ks, user_key, seq),
        }
    }

    /// The leveled structures' point read below the memtables: the container's rows (with
    /// their cross-row hint windows), then the tables level by level, in parallel when the
    /// design asks for it. `chain` holds the memtables' versions of the key (merge operands,
    /// newest first).
    pub(super) fn get_in_levels(
        self: &Arc<Self>,
        view: &super::ReadView,
        read: &super::levels::PointRead<'_>,
        mut chain: crate::key::Versions,
        floors: Option<&mut super::matrix::RowFloors>,
    ) -> Result<Option<Vec<u8>>> {
        let &super::levels::PointRead { ks, user_key, seq } = read;
        let found = |kind: ValueKind, v: Vec<u8>| self.resolve_found(ks, user_key, kind, v);
        let resolved = |chain: &[(ValueKind, Vec<u8>)]| {
            chain.last().is_some_and(|(k, _)| *k != ValueKind::Merge)
        };
        let version = &view.version;
        let before = chain.len();
        self.versions_in_container(version, user_key, seq, &mut chain, floors)?;
        if before == 0
            && let [(kind, _)] = chain.as_slice()
            && *kind != ValueKind::Merge
        {
            Counters::add(&self.counters.get_hits_l0, 1);
            let (kind, v) = chain.swap_remove(0);
            return found(kind, v);
        }
        if resolved(&chain) {
            return self.combine(ks, user_key, chain);
        }
        if chain.is_empty()
            && let Some(pool) = &self.level_readers
        {
            match self.get_levels_in_parallel(pool, version, user_key, seq)? {
                None => return Ok(None),
                Some((level, kind, v)) if kind != ValueKind::Merge => {
                    let c = if level == 0 {
                        &self.counters.get_hits_l0
                    } else {
                        &self.counters.get_hits_levels
                    };
                    Counters::add(c, 1);
                    return found(kind, v);
                }
                // A merge operand: the serial path below collects the key's operands.
                Some(_) => {}
            }
        }
        for level in 0..crate::version::NUM_LEVELS {
            for f in version.files_for_key(level, user_key) {
                if f.smallest_seq > seq {
                    continue;
                }
                let table = self.tables.get(level, f)?;
                if chain.is_empty() {
                    match table.get(user_key, seq)? {
                        Some((ValueKind::Merge, _)) => chain = table.versions(user_key, seq)?,
                        Some((kind, v)) => {
                            let c = if level == 0 {
                                &self.counters.get_hits_l0
                            } else {
                                &self.counters.get_hits_levels
                            };
                            Counters::add(c, 1);
                            return found(kind, v);
                        }
                        None => continue,
                    }
                } else {
                    chain.extend(table.versions(user_key, seq)?);
                }
                if resolved(&chain) {
                    return self.combine(ks, user_key, chain);
                }
            }
        }
        if chain.is_empty() {
            return Ok(None);
        }
        self.combine(ks, user_key, chain)
    }

    /// Point lookup of a key that a range tombstone visible at `seq` covers (the newest such,
    /// of sequence number `tombstone`): its versions older than the tombstone read as deleted. Memtable lookups give the newest version's
    /// sequence number, rows and tables their range: sources wholly older than the tombstone
    /// are skipped unsearched (RocksDB stops at a covering tombstone likewise), a version in a
    /// source wholly newer stands ([`Self::covered_by_source`]). Otherwise (a row or table on
    /// both sides of the tombstone, or a merge operand) a user iterator bounded to the key
    /// decides: it sees every version with its sequence number and applies the tombstones,
    /// merges, blob pointers and TTL as a scan does.
    fn get_covered(
        self: &Arc<Self>,
        view: &Arc<super::ReadView>,
        ks: &Settings,
        user_key: &[u8],
        seq: SeqNo,
        tombstone: SeqNo,
    ) -> Result<Option<Vec<u8>>> {
        if let Some(answer) = self.covered_by_source(view, ks, user_key, seq, tombstone)? {
            Counters::add(&self.counters.covered_gets_by_source, 1);
            return Ok(answer);
        }
        self.get_by_iterator(view, ks, user_key, seq)
    }

    /// Point lookup with a user iterator bounded to the key: it sees every version with its
    /// sequence number and applies tombstones, merges, blob pointers and TTL as a scan does.
    fn get_by_iterator(
        self: &Arc<Self>,
        view: &Arc<super::ReadView>,
        ks: &Settings,
        user_key: &[u8],
        seq: SeqNo,
    ) -> Result<Option<Vec<u8>>> {
        let mut upper = user_key.to_vec();
        upper.push(0);
        // On engine keys: no prefix to add or strip.
        let mut it = self.iter_in_view(
            Arc::clone(view),
            seq,
            (Some(user_key.to_vec()), Some(upper)),
            ks,
            Vec::new(),
        )?;
        it.seek(user_key)?;
        if it.valid() && it.key() == user_key {
            Ok(Some(it.value().to_vec()))
        } else {
            Ok(None)
        }
    }

    /// [`Self::get_covered`]'s fast path: `Some(answer)` when the source holding the key's
    /// newest version lies wholly on one side of the covering tombstone (sequence number
    /// `tombstone`), `None` to decide with an iterator.
    fn covered_by_source(
        self: &Arc<Self>,
        view: &Arc<super::ReadView>,
        ks: &Settings,
        user_key: &[u8],
        seq: SeqNo,
        tombstone: SeqNo,
    ) -> Result<Option<Option<Vec<u8>>>> {
        // The first source holding a version of the key decides, as in `get_in_view`.
        // Memtables give its sequence number; rows and tables their range: wholly older than
        // the tombstone, they are not even searched (whatever they hold is deleted, and the
        // sources after them hold older versions still).
        for m in std::iter::once(&view.mem).chain(&view.imm) {
            if let Some((kind, s, v)) = m.newest(user_key, seq)? {
                return match kind {
                    ValueKind::Merge => Ok(None),
                    _ if s < tombstone => Ok(Some(None)),
                    _ => self.resolve_found(ks, user_key, kind, v).map(Some),
                };
            }
        }
        let decide = |kind: ValueKind, v: Vec<u8>, smallest: SeqNo| {
            if kind == ValueKind::Merge || smallest < tombstone {
                // Merge operands, or a source on both sides of the tombstone.
                Ok(None)
            } else {
                self.resolve_found(ks, user_key, kind, v).map(Some)
            }
        };
        let version = &view.version;
        if !self.levels.first_found_is_newest() {
            return Ok(None);
        }
        if let Some(n) = self.newest_in_container(version, user_key, seq, tombstone)? {
            return decide(n.kind, n.value, n.smallest_seq);
        }
        for level in 0..crate::version::NUM_LEVELS {
            for f in version.files_for_key(level, user_key) {
                if f.smallest_seq > seq || f.largest_seq < tombstone {
                    continue;
                }
                if let Some((kind, v)) = self.tables.get(level, f)?.get(user_key, seq)? {
                    return decide(kind, v, f.smallest_seq);
                }
            }
        }
        Ok(Some(None))
    }

    /// The user's value of the newest version `(kind, v)` of `user_key` (no merge operand):
    /// `None` for a tombstone or an expired value, the blob record for a pointer.
    pub(super) fn resolve_found(
        &self,
        ks: &Settings,
        user_key: &[u8],
        kind: ValueKind,
        v: Vec<u8>,
    ) -> Result<Option<Vec<u8>>> {
        let value = match kind {
            ValueKind::Value => v,
            ValueKind::Deletion | ValueKind::Merge | ValueKind::RangeDeletion => {
                return Ok(None);
            }
            ValueKind::BlobIndex => self.blobs.read_pointer(user_key, &v)?,
        };
        match ks.ttl_check(self.opts.clock.as_ref()) {
            Some(ttl) => Ok(ttl.visible(user_key, &value)?.map(<[u8]>::to_vec)),
            None => Ok(Some(value)),
        }
    }

    /// The value of `user_key` from its versions `chain`, newest first: merge operands, then
    /// possibly a base (a value, a blob pointer or a tombstone).
    fn combine(
        &self,
        ks: &Settings,
        user_key: &[u8],
        chain: crate::key::Versions,
    ) -> Result<Option<Vec<u8>>> {
        let mut operands: Vec<&[u8]> = Vec::with_capacity(chain.len());
        let mut base: Option<Vec<u8>> = None;
        for (kind, v) in &chain {
            match kind {
                ValueKind::Merge => operands.push(v),
                ValueKind::Value => base = Some(v.clone()),
                ValueKind::BlobIndex => base = Some(self.blobs.read_pointer(user_key, v)?),
                ValueKind::Deletion | ValueKind::RangeDeletion => {}
            }
        }
        operands.reverse();
        crate::merge::full_merge(
            ks.merge_operator.as_ref(),
            ks.user_key(user_key),
            base.as_deref(),
            &operands,
        )
        .map(Some)
    }

    /// Every source of a scan of `view` merged: `memtables` (newest first), the container's
    /// rows, the L0 tables (or the single level's), then one iterator per deeper level.
    pub(super) fn leveled_sources(
        self: &Arc<Self>,
        view: &super::ReadView,
        memtables: Vec<BoxedIter>,
    ) -> Result<MergingIterator> {
        let mut children = memtables;
        children.extend(self.container_iters(&view.version)?);
        for f in view.version.files(0) {
            children.push(Box::new(self.tables.get(0, f)?.iter()));
        }
        for level in 1..crate::version::NUM_LEVELS {
            let files = view.version.files(level);
            if !files.is_empty() {
                children.push(Box::new(LevelIter::new(
                    level,
                    files.to_vec(),
                    Arc::clone(&self.tables),
                )));
            }
        }
        Ok(MergingIterator::new(children))
    }

    /// A user iterator over the state as of the read options' snapshot.
    pub(crate) fn iter(self: &Arc<Self>, ks: &Settings, ro: &ReadOptions) -> Result<DbIterator> {
        let (view, seq) = self.read_point(ro.snapshot)?;
        let bounds = ks.bounds(ro.lower_bound.as_deref(), ro.upper_bound.as_deref());
        self.iter_in_view(view, seq, bounds, ks, ks.prefix.clone())
    }

    /// A user iterator over `view` as of `seq`, within the engine-key bounds `[lower, upper)`,
    /// resolving values with the settings of keyspace `ks` and taking `prefix` off (and
    /// putting it on) the keys it exchanges with its user.
    fn iter_in_view(
        self: &Arc<Self>,
        view: Arc<super::ReadView>,
        seq: SeqNo,
        (lower, upper): crate::keyspace::registry::Bounds,
        ks: &Settings,
        prefix: Vec<u8>,
    ) -> Result<DbIterator> {
        let mut memtables: Vec<BoxedIter> = Vec::new();
        memtables.push(Box::new(view.mem.iter()));
        for m in &view.imm {
            memtables.push(Box::new(m.iter()));
        }
        let inner = self.levels.scan(self, &view, seq, memtables)?;
        Ok(DbIterator::new(
            inner,
            seq,
            lower,
            upper,
            crate::iter::db_iter::Resolvers {
                blobs: Some(Arc::clone(&self.blobs)),
                merge: ks.merge_operator.clone(),
                ttl: ks.ttl_check(self.opts.clock.as_ref()),
                range_dels: view.range_dels(),
                prefix,
            },
            Box::new(view),
        ))
    }
}

/// Concatenates the tables of one sorted, non-overlapping level, opening them lazily.
pub(crate) struct LevelIter {
    level: usize,
    files: Vec<Arc<FileMeta>>,
    tables: Arc<TableCache>,
    index: usize,
    current: Option<BoxedIter>,
}

impl LevelIter {
    pub(crate) fn new(level: usize, files: Vec<Arc<FileMeta>>, tables: Arc<TableCache>) -> Self {
        LevelIter {
            level,
            files,
            tables,
            index: 0,
            current: None,
        }
    }

    fn open(&mut self, index: usize) -> Result<bool> {
        self.index = index;
        match self.files.get(index) {
            Some(f) => {
                let t = self.tables.get(self.level, f)?;
                self.current = Some(Box::new(t.iter()));
                Ok(true)
            }
            None => {
                self.current = None;
                Ok(false)
            }
        }
    }

    /// Moves forward over exhausted tables.
    fn skip_forward(&mut self) -> Result<()> {
        while self.current.as_ref().is_some_and(|c| !c.valid()) {
            if !self.open(self.index + 1)? {
                return Ok(());
            }
            if let Some(c) = self.current.as_mut() {
                c.seek_to_first()?;
            }
        }
        Ok(())
    }

    /// Moves backward over exhausted tables.
    fn skip_backward(&mut self) -> Result<()> {
        while self.current.as_ref().is_some_and(|c| !c.valid()) {
            if self.index == 0 {
                self.current = None;
                return Ok(());
            }
            self.open(self.index - 1)?;
            if let Some(c) = self.current.as_mut() {
                c.seek_to_last()?;
            }
        }
        Ok(())
    }
}

impl InternalIterator for LevelIter {
    fn valid(&self) -> bool {
        self.current.as_ref().is_some_and(|c| c.valid())
    }

    fn seek_to_first(&mut self) -> Result<()> {
        if self.open(0)?
            && let Some(c) = self.current.as_mut()
        {
            c.seek_to_first()?;
        }
        self.skip_forward()
    }

    fn seek_to_last(&mut self) -> Result<()> {
        if self.files.is_empty() {
            self.current = None;
            return Ok(());
        }
        self.open(self.files.len() - 1)?;
        if let Some(c) = self.current.as_mut() {
            c.seek_to_last()?;
        }
        self.skip_backward()
    }

    fn seek(&mut self, target: &[u8]) -> Result<()> {
        // First file whose largest key is >= target.
        let i = self
            .files
            .partition_point(|f| key::compare_internal(&f.largest, target) == CmpOrdering::Less);
        if self.open(i)?
            && let Some(c) = self.current.as_mut()
        {
            c.seek(target)?;
        }
        self.skip_forward()
    }

    fn seek_for_prev(&mut self, target: &[u8]) -> Result<()> {
        // Last file whose smallest key is <= target.
        let i = self.files.partition_point(|f| {
            key::compare_internal(&f.smallest, target) != CmpOrdering::Greater
        });
        if i == 0 {
            self.current = None;
            return Ok(());
        }
        self.open(i - 1)?;
        if let Some(c) = self.current.as_mut() {
            c.seek_for_prev(target)?;
        }
        self.skip_backward()
    }

    fn next(&mut self) -> Result<()> {
        if let Some(c) = self.current.as_mut() {
            c.next()?;
        }
        self.skip_forward()
    }

    fn prev(&mut self) -> Result<()> {
        if let Some(c) = self.current.as_mut() {
            c.prev()?;
        }
        self.skip_backward()
    }

    fn key(&self) -> &[u8] {
        self.current.as_ref().map_or(&[], |c| c.key())
    }

    fn value(&self) -> &[u8] {
        self.current.as_ref().map_or(&[], |c| c.value())
    }

    fn site(&self) -> Option<crate::error::CorruptionSite> {
        self.current.as_ref().and_then(|c| c.site())
    }
}

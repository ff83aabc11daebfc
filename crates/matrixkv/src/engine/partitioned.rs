//! The LightKV design's engine stages (Han, Jiang, Xiong, MSST 2020; decision 0027): the
//! single level of tables on the slow tier ([`super::single_level`], whose read path, index
//! commits and merges it shares) cut into key-range partitions
//! ([`crate::compaction::partition`]).
//!
//! - flush: the persistent write buffer becomes one table per partition it has keys for;
//! - partition compaction: `compaction_size` tables of one merge count of a partition merge
//!   into one table of the next count, cut at the partition bounds;
//! - split: a partition above `partition_bytes` is rewritten in two at the middle key of its
//!   largest table, while fewer than `max_partitions` exist.
//!
//! The index is LightKV's RH-tree ([`crate::index::rhtree`]), changed in place by each job
//! under the index's commit lock, before the job's edit (lock order: index commit lock,
//! manifest, state).

use std::sync::Arc;

use crate::lock_order::MutexGuard;

use super::single_level::Shape;
use super::{DbInner, State};
use crate::compaction::partition::{self, PartitionConfig, Pick};
use crate::error::Result;
use crate::index::global::GlobalIndex;
use crate::key::user_key;
use crate::memtable::MemEntry;
use crate::sst::builder::KeyBlock;
use crate::version::edit::FileMeta;

impl DbInner {
    /// What partition compaction would do now. A split of a partition whose split key was
    /// found unusable earlier in this process (recorded in `ix`) is not proposed again.
    pub(super) fn partition_pick(
        &self,
        st: &State,
        ix: &GlobalIndex,
        cfg: &PartitionConfig,
    ) -> Option<Pick> {
        let partitions = st.versions.partitions();
        let pick = partition::pick(st.versions.current().files(0), partitions, cfg)?;
        if let Pick::Split { partition, .. } = &pick
            && ix.split_refused(partition::range(&partitions.bounds, *partition).0)
        {
            return None;
        }
        Some(pick)
    }

    /// One step of partition compaction: a merge or a split, if one is due. Called by the
    /// compaction thread with `state` locked; releases it around the I/O.
    pub(super) fn partition_step(
        &self,
        st: &mut MutexGuard<'_, State>,
        ix: &GlobalIndex,
        cfg: &PartitionConfig,
    ) -> Result<bool> {
        let Some(pick) = self.partition_pick(st, ix, cfg) else {
            return Ok(false);
        };
        let version = st.versions.current();
        let partitions = st.versions.partitions().clone();
        match pick {
            Pick::Merge { run, inputs, .. } => {
                let shape = Shape {
                    cut_at: Some(partitions.bounds),
                    run: Some(run + 1),
                    bounds: None,
                };
                self.run_selective_job(st, ix, &version, inputs, &shape)?;
            }
            Pick::Split { partition, members } => {
                let (lo, hi) = partition::range(&partitions.bounds, partition);
                let Some(largest) = members.iter().max_by_key(|f| (f.size, f.number)) else {
                    return Ok(false);
                };
                let largest = Arc::clone(largest);
                let key = MutexGuard::unlocked(st, || self.tables.get(0, &largest)?.middle_key())?;
                let Some(key) =
                    key.filter(|k| k.as_slice() > lo && hi.is_none_or(|h| k.as_slice() < h))
                else {
                    log::warn!(
                        "matrixkv: partition {partition} of {} bytes has no key to split at",
                        members.iter().map(|f| f.size).sum::<u64>()
                    );
                    ix.refuse_split(lo.to_vec());
                    return Ok(true);
                };
                let mut bounds = partitions.bounds.clone();
                bounds.insert(partition, key);
                let run = members
                    .iter()
                    .map(|f| partitions.run(f.number))
                    .max()
                    .unwrap_or(0);
                let shape = Shape {
                    cut_at: Some(bounds.clone()),
                    run: Some(run),
                    bounds: Some(bounds),
                };
                self.run_selective_job(st, ix, &version, members, &shape)?;
            }
        }
        Ok(true)
    }

    /// A manual compaction step's merge in this design: at most `compaction_size` of
    /// `inputs` (oldest numbers first), cut at the partition bounds, one merge count above
    /// the highest input's.
    pub(super) fn manual_partition_shape(
        &self,
        st: &State,
        cfg: &PartitionConfig,
        inputs: &mut Vec<Arc<FileMeta>>,
    ) -> Shape {
        inputs.truncate(cfg.compaction_size.max(2));
        let p = st.versions.partitions();
        let run = inputs.iter().map(|f| p.run(f.number)).max().unwrap_or(0) + 1;
        Shape {
            cut_at: Some(p.bounds.clone()),
            run: Some(run),
            bounds: None,
        }
    }

    /// Writes `entries` (a flush, sorted) as one table per partition of `bounds` that has
    /// keys, numbered in `outputs` (the caller's install releases them; an error leaves the
    /// tables written so far orphans once the caller drops `outputs`).
    pub(super) fn write_partitioned(
        &self,
        entries: &[MemEntry],
        outputs: &mut super::jobs::ReservedOutputs<'_>,
        out: &super::flush::TableOut<'_>,
        bounds: &[Vec<u8>],
    ) -> Result<Vec<(FileMeta, Vec<KeyBlock>)>> {
        let codecs = self.keyspaces().block_codecs();
        let mut metas = Vec::new();
        let mut rest = entries;
        while let Some(first) = rest.first() {
            let p = partition::partition_of_key(bounds, user_key(first.key()));
            let end = match bounds.get(p) {
                Some(b) => rest.partition_point(|e| user_key(e.key()) < b.as_slice()),
                None => rest.len(),
            };
            let (part, tail) = rest.split_at(end.max(1));
            let n = outputs.reserve();
            if let Some(m) =
                super::flush::write_table(out, &self.opts.table, part, n, codecs.clone())?
            {
                metas.push(m);
            }
            rest = tail;
        }
        Ok(metas)
    }
}

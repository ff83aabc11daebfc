//! The entries a compaction writes instead of what it read: a merge chain folded by the
//! operator ([`DbInner::fold_merge`]), a value the compaction filter or the TTL replaces
//! ([`DbInner::filter_entry`]).

use std::collections::BTreeMap;

use super::{MergeExtras, decode_pointer, input_site, parse_input, unknown_input_site};
use crate::compaction_filter::Decision;
use crate::engine::DbInner;
use crate::error::{CorruptionSite, Result};
use crate::iter::{BoxedIter, InternalIterator};
use crate::key::{self, ValueKind};
use crate::stats::Counters;
use crate::version::version::Version;

/// Entries (internal key, value) a compaction writes instead of what it read.
pub(super) type Entries = Vec<(Vec<u8>, Vec<u8>)>;

impl DbInner {
    /// Folds merge operands for one user key. `it` is at the key's newest entry at or below the
    /// smallest snapshot, a merge operand; the operands after it and the first non-operand
    /// (the base: a value, a blob pointer or a tombstone) are read and `it` is left after the
    /// last one read. Returns the entries to write, newest first:
    ///
    /// - with a base, or none anywhere below (`is_bottommost_for`): one value, the operator's
    ///   full merge, at the newest operand's sequence number (a base blob pointer becomes
    ///   garbage);
    /// - otherwise one operand combining them (`partial_merge`), or the operands unchanged
    ///   when the operator cannot combine them without the base;
    /// - when the operator fails (an error or a panic): everything read, unchanged (counted in
    ///   `merge_failures`; reads of the key report the error).
    pub(super) fn fold_merge(
        &self,
        it: &mut BoxedIter,
        (version, output_level, extras): (&Version, usize, &MergeExtras),
        ks: &crate::keyspace::registry::Settings,
        garbage: &mut BTreeMap<u64, (u64, u64)>,
    ) -> Result<Entries> {
        let newest = it.key().to_vec();
        let (user, seq) = parse_input(it.as_ref()).map(|p| (p.user_key.to_vec(), p.seq))?;
        // Everything read, newest first, and the base if one was found.
        let mut read: Vec<(Vec<u8>, Vec<u8>)> = vec![(newest, it.value().to_vec())];
        let mut base_kind: Option<ValueKind> = None;
        // Where the base was read (for a damaged blob pointer).
        let mut base_site: Option<CorruptionSite> = None;
        // A range tombstone at or below the newest operand ends the chain at the first version
        // it covers, as a tombstone there would (that version is left in `it`; the caller
        // drops it and the older ones below the folded value).
        let cut = version.range_dels().max_covering(&user, seq);
        let mut cut_by_range = false;
        it.next()?;
        while it.valid() {
            // A key that does not parse is corruption: read as some other key or kind, it
            // would end the chain early or become its base.
            let parsed = parse_input(it.as_ref())?;
            if parsed.user_key != user.as_slice() {
                break;
            }
            if cut.is_some_and(|t| parsed.seq < t) {
                cut_by_range = true;
                break;
            }
            let kind = parsed.kind;
            read.push((it.key().to_vec(), it.value().to_vec()));
            if kind != ValueKind::Merge {
                base_kind = Some(kind);
                if kind == ValueKind::BlobIndex {
                    base_site = it.site();
                }
                it.next()?;
                break;
            }
            it.next()?;
        }
        let operands_end = read.len() - usize::from(base_kind.is_some());
        let operands: Vec<&[u8]> = read
            .get(..operands_end)
            .unwrap_or_default()
            .iter()
            .rev()
            .map(|(_, v)| v.as_slice())
            .collect();
        let base_value = read.last().map(|(_, v)| v.as_slice()).unwrap_or_default();
        if extras.beside.iter().any(|f| f.contains_user_key(&user)) {
            // A table beside the inputs (SLM-DB's single level) may hold versions of the key
            // between the ones read here: neither the base nor the order of the operands
            // read is known, so nothing is combined.
            return Ok(read);
        }
        // The operator of the key's keyspace (`ks`) sees the key without the keyspace prefix.
        let full =
            base_kind.is_some() || cut_by_range || extras.bottommost(version, output_level, &user);
        if full {
            let (existing, pointer) = match base_kind {
                Some(ValueKind::Value) => (Some(base_value.to_vec()), None),
                Some(ValueKind::BlobIndex) => {
                    let site = || base_site.unwrap_or_else(unknown_input_site);
                    let p = decode_pointer(base_value, site)?;
                    (Some(self.blobs.read(&user, &p)?), Some(p))
                }
                _ => (None, None),
            };
            match crate::merge::full_merge(
                ks.merge_operator.as_ref(),
                ks.user_key(&user),
                existing.as_deref(),
                &operands,
            ) {
                Ok(v) => {
                    if let Some(p) = pointer {
                        let g = garbage.entry(p.file.0).or_default();
                        g.0 += 1;
                        g.1 += p.len;
                    }
                    return Ok(vec![(
                        key::make_internal_key(&user, seq, ValueKind::Value),
                        v,
                    )]);
                }
                Err(e) => {
                    log::warn!("matrixkv: compaction keeps the operands of a failed merge: {e}");
                    Counters::add(&self.counters.merge_failures, 1);
                    return Ok(read);
                }
            }
        }
        if operands.len() >= 2
            && let Some(op) = &ks.merge_operator
            && let Some(v) = crate::merge::partial_merge(op, ks.user_key(&user), &operands)
        {
            return Ok(vec![(
                key::make_internal_key(&user, seq, ValueKind::Merge),
                v,
            )]);
        }
        Ok(read)
    }

    /// What the compaction filter and the TTL decide for the value entry `it` is at (a value
    /// or a blob pointer; a key that does not parse is corruption): `None` to keep it, or the entries that replace it (a tombstone of the
    /// same sequence number for a removal, none at the last level with no snapshot, or the
    /// changed value with the original write time). A replaced blob pointer becomes garbage.
    pub(super) fn filter_entry(
        &self,
        it: &dyn InternalIterator,
        at: &Filtering<'_>,
        garbage: &mut BTreeMap<u64, (u64, u64)>,
    ) -> Result<Option<Entries>> {
        let parsed = parse_input(it)?;
        let value = it.value();
        let user = parsed.user_key;
        let (stored, pointer): (std::borrow::Cow<'_, [u8]>, _) = match parsed.kind {
            ValueKind::BlobIndex => {
                let p = decode_pointer(value, || input_site(it))?;
                (self.blobs.read(user, &p)?.into(), Some(p))
            }
            _ => (value.into(), None),
        };
        let ks = at.keyspace;
        let ttl = ks
            .ttl
            .map(|t| crate::compaction_filter::TtlCheck::at(t, at.now));
        let (user_value, written, expired) = match ttl {
            Some(ttl) => match crate::compaction_filter::split(&stored) {
                Some((v, t)) => (v, Some(t), ttl.expired(t)),
                // Too short to hold a write time: reads report it; keep it as it is.
                None => return Ok(None),
            },
            None => (&stored[..], None, false),
        };
        let decision = if expired {
            Decision::Remove
        } else if let Some(f) = &ks.compaction_filter {
            match crate::compaction_filter::call(f, at.output_level, ks.user_key(user), user_value)
            {
                Some(d) => d,
                None => {
                    Counters::add(&self.counters.filter_failures, 1);
                    Decision::Keep
                }
            }
        } else {
            Decision::Keep
        };
        let replaced = match decision {
            Decision::Keep => return Ok(None),
            Decision::Remove => {
                let last = parsed.seq.0 <= at.smallest_snapshot
                    && at.extras.bottommost(at.version, at.output_level, user);
                if last {
                    Vec::new()
                } else {
                    vec![(
                        key::make_internal_key(user, parsed.seq, ValueKind::Deletion),
                        Vec::new(),
                    )]
                }
            }
            Decision::ChangeValue(v) => {
                let v = match written {
                    Some(t) => crate::compaction_filter::stamp(&v, t),
                    None => v,
                };
                vec![(
                    key::make_internal_key(user, parsed.seq, ValueKind::Value),
                    v,
                )]
            }
        };
        if let Some(p) = pointer {
            let g = garbage.entry(p.file.0).or_default();
            g.0 += 1;
            g.1 += p.len;
        }
        Counters::add(&self.counters.filtered_entries, 1);
        Ok(Some(replaced))
    }
}

/// Where a compaction applies its filter and TTL (see `filter_entry`).
pub(super) struct Filtering<'a> {
    pub(super) version: &'a Version,
    pub(super) extras: &'a MergeExtras,
    pub(super) output_level: usize,
    pub(super) smallest_snapshot: u64,
    /// The settings of the entry's keyspace.
    pub(super) keyspace: &'a crate::keyspace::registry::Settings,
    /// The time TTLs are checked against (milliseconds).
    pub(super) now: u64,
}

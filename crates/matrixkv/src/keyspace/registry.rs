//! The keyspaces of an open database and the settings each one's keys are read, written and
//! compacted with. The registry is an immutable value: creating or dropping a keyspace
//! publishes a new one (`DbInner::keyspaces`), so a compaction or an iterator keeps using the
//! registry it started with.
#![deny(clippy::indexing_slicing)]

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use super::encoding;
use super::{DEFAULT_KEYSPACE, KeyspaceOptions};
use crate::compaction_filter::{CompactionFilter, TtlCheck};
use crate::error::{Error, Result};
use crate::merge::{MergeOperator, MergeOperators};

/// Engine-key bounds `(lower, upper)`; `None` is unbounded.
pub(crate) type Bounds = (Option<Vec<u8>>, Option<Vec<u8>>);

/// A keyspace as the manifest records it (tags 22 and 23, `docs/format/manifest.md`). The
/// default keyspace (id 0) is implicit and never recorded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyspaceRecord {
    /// The id its keys start with; never reused, never 0.
    pub id: u32,
    /// Its name (UTF-8, 1 to [`super::MAX_KEYSPACE_NAME_BYTES`] bytes).
    pub name: String,
    /// Whether its values carry their write time (a TTL was set at creation).
    pub ttl: bool,
    /// Dropped: its keys are deleted and its name is free.
    pub dropped: bool,
}

/// What the engine needs to know about one keyspace's keys.
pub(crate) struct Settings {
    pub id: u32,
    pub name: String,
    /// The bytes every engine key of the keyspace starts with (empty for the default
    /// keyspace of a database created before keyspaces existed).
    pub prefix: Vec<u8>,
    /// The first engine key after the keyspace (`None`: the end of the key space).
    pub end: Option<Vec<u8>>,
    pub merge_operator: Option<Arc<dyn MergeOperator>>,
    pub compaction_filter: Option<Arc<dyn CompactionFilter>>,
    pub ttl: Option<Duration>,
    pub min_blob_bytes: Option<usize>,
    pub compression: Option<crate::Compression>,
}

impl std::fmt::Debug for Settings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Settings")
            .field("id", &self.id)
            .field("name", &self.name)
            .field("ttl", &self.ttl)
            .finish_non_exhaustive()
    }
}

impl Settings {
    fn new(id: u32, name: &str, prefixed: bool, opts: &KeyspaceOptions) -> Settings {
        let prefix = if prefixed {
            encoding::prefix_of(id)
        } else {
            Vec::new()
        };
        Settings {
            id,
            name: name.to_owned(),
            end: encoding::successor(&prefix),
            prefix,
            merge_operator: opts.merge_operator.clone(),
            compaction_filter: opts.compaction_filter.clone(),
            ttl: opts.ttl,
            min_blob_bytes: opts.min_blob_bytes,
            compression: opts.compression,
        }
    }

    /// The engine key of `user_key` in this keyspace.
    pub(crate) fn engine_key<'a>(&self, user_key: &'a [u8]) -> Cow<'a, [u8]> {
        if self.prefix.is_empty() {
            return Cow::Borrowed(user_key);
        }
        let mut k = Vec::with_capacity(self.prefix.len() + user_key.len());
        k.extend_from_slice(&self.prefix);
        k.extend_from_slice(user_key);
        Cow::Owned(k)
    }

    /// The user's part of `engine_key`, one of this keyspace's keys.
    pub(crate) fn user_key<'a>(&self, engine_key: &'a [u8]) -> &'a [u8] {
        engine_key.get(self.prefix.len()..).unwrap_or_default()
    }

    /// Engine-key bounds `[lower, upper)` for user-key bounds within this keyspace.
    pub(crate) fn bounds(&self, lower: Option<&[u8]>, upper: Option<&[u8]>) -> Bounds {
        if self.prefix.is_empty() {
            return (lower.map(<[u8]>::to_vec), upper.map(<[u8]>::to_vec));
        }
        let lower = Some(self.engine_key(lower.unwrap_or_default()).into_owned());
        let upper = match upper {
            Some(u) => Some(self.engine_key(u).into_owned()),
            None => self.end.clone(),
        };
        (lower, upper)
    }

    /// The TTL check of this keyspace's values as of `clock`'s now (`None` without a TTL).
    pub(crate) fn ttl_check(
        &self,
        clock: &dyn crate::compaction_filter::Clock,
    ) -> Option<TtlCheck> {
        TtlCheck::of(self.ttl, clock)
    }

    /// True if compaction filters this keyspace's values (a filter or a TTL).
    pub(crate) fn filtering(&self) -> bool {
        self.compaction_filter.is_some() || self.ttl.is_some()
    }
}

/// The keyspaces of a database: the default one, those created and not dropped, and the
/// dropped ones (their ids stay taken).
#[derive(Debug, Clone)]
pub(crate) struct Registry {
    /// Keys carry their keyspace's id (databases created with keyspaces support).
    prefixed: bool,
    default: Arc<Settings>,
    /// Every keyspace but the default one, dropped or not, by id.
    others: BTreeMap<u32, (Arc<Settings>, bool)>,
    next_id: u32,
}

impl Registry {
    /// The registry of a database whose manifest holds `records`: the default keyspace has
    /// `default_opts` (the database's options), each other keyspace its options in `given`
    /// by name (the defaults otherwise).
    ///
    /// # Errors
    /// `OptionMismatch` if a live keyspace was created with a TTL and is opened without one,
    /// or the other way round.
    pub(crate) fn open(
        default_opts: KeyspaceOptions,
        given: &BTreeMap<String, KeyspaceOptions>,
        prefixed: bool,
        records: &[KeyspaceRecord],
    ) -> Result<Self> {
        let mut others = BTreeMap::new();
        let mut next_id = 1;
        for r in records {
            let given = given.get(&r.name);
            let ks_opts = match (r.dropped, given) {
                (false, Some(o)) => o.clone(),
                _ => KeyspaceOptions::default(),
            };
            if !r.dropped && ks_opts.ttl.is_some() != r.ttl {
                return Err(Error::OptionMismatch {
                    option: "keyspace ttl",
                    stored: format!("keyspace {:?} ttl {}", r.name, r.ttl),
                    given: format!("keyspace {:?} ttl {}", r.name, ks_opts.ttl.is_some()),
                });
            }
            let mut settings = Settings::new(r.id, &r.name, prefixed, &ks_opts);
            if r.dropped && r.ttl {
                // Its values still carry write times (`updates_since` strips them).
                settings.ttl = Some(Duration::from_secs(1));
            }
            others.insert(r.id, (Arc::new(settings), r.dropped));
            next_id = next_id.max(r.id.saturating_add(1));
        }
        Ok(Registry {
            prefixed,
            default: Arc::new(Settings::new(0, DEFAULT_KEYSPACE, prefixed, &default_opts)),
            others,
            next_id,
        })
    }

    /// True if keys carry their keyspace id (a database created with keyspaces).
    pub(crate) fn prefixed(&self) -> bool {
        self.prefixed
    }

    /// The default keyspace.
    pub(crate) fn default_keyspace(&self) -> &Arc<Settings> {
        &self.default
    }

    /// The smallest `min_blob_bytes` of any keyspace (`default` for those without their own),
    /// `None` when no keyspace separates values.
    pub(crate) fn smallest_min_blob_bytes(&self, default: Option<usize>) -> Option<usize> {
        std::iter::once(&self.default)
            .chain(self.others.values().map(|(s, _)| s))
            .filter_map(|s| s.min_blob_bytes.or(default))
            .min()
    }

    /// The live keyspace `id`.
    pub(crate) fn live(&self, id: u32) -> Option<&Arc<Settings>> {
        if id == 0 {
            return Some(&self.default);
        }
        match self.others.get(&id) {
            Some((s, false)) => Some(s),
            _ => None,
        }
    }

    /// Keyspace `id`, live or dropped.
    pub(crate) fn any(&self, id: u32) -> Option<&Arc<Settings>> {
        if id == 0 {
            return Some(&self.default);
        }
        self.others.get(&id).map(|(s, _)| s)
    }

    /// The live keyspace named `name`.
    pub(crate) fn by_name(&self, name: &str) -> Option<&Arc<Settings>> {
        if name == DEFAULT_KEYSPACE {
            return Some(&self.default);
        }
        self.others
            .values()
            .find(|(s, dropped)| !dropped && s.name == name)
            .map(|(s, _)| s)
    }

    /// The names of the live keyspaces, the default one first, then by id.
    pub(crate) fn names(&self) -> Vec<String> {
        std::iter::once(self.default.name.clone())
            .chain(
                self.others
                    .values()
                    .filter(|(_, dropped)| !dropped)
                    .map(|(s, _)| s.name.clone()),
            )
            .collect()
    }

    /// The settings that apply to `engine_key`: its keyspace's, or the default keyspace's
    /// for a key of no known keyspace (no filter, merge operator or TTL then applies, only
    /// the database-wide blob threshold).
    pub(crate) fn for_key(&self, engine_key: &[u8]) -> &Settings {
        if !self.prefixed {
            return &self.default;
        }
        match encoding::decode_id(engine_key) {
            Some((0, _)) | None => &self.default,
            Some((id, _)) => self
                .others
                .get(&id)
                .map_or(&self.default, |(s, _)| s.as_ref()),
        }
    }

    /// The per-block codec chooser for tables, if some live keyspace has its own compression.
    pub(crate) fn block_codecs(
        self: &Arc<Self>,
    ) -> Option<Arc<dyn crate::sst::compression::BlockCodecs>> {
        self.others
            .values()
            .any(|(s, dropped)| !dropped && s.compression.is_some())
            .then(|| Arc::clone(self) as Arc<dyn crate::sst::compression::BlockCodecs>)
    }

    /// True if compaction filters some keyspace's values.
    pub(crate) fn any_filtering(&self) -> bool {
        self.default.filtering() || self.others.values().any(|(s, d)| !d && s.filtering())
    }

    /// The record of a new keyspace `name` (the next id) and the registry with it.
    pub(crate) fn with_created(
        &self,
        name: &str,
        opts: &KeyspaceOptions,
    ) -> Result<(KeyspaceRecord, Registry)> {
        if !self.prefixed {
            return Err(Error::invalid(
                "this database was created before keyspaces existed (its keys carry no keyspace \
                 id): it has only the default keyspace; copy it into a new database to use \
                 keyspaces",
            ));
        }
        super::check_name(name)?;
        if self.by_name(name).is_some() {
            return Err(Error::invalid(format!("keyspace {name:?} already exists")));
        }
        if opts.ttl.is_some_and(|t| t < Duration::from_secs(1)) {
            return Err(Error::invalid(
                "a keyspace's ttl must be at least one second",
            ));
        }
        let id = self.next_id;
        let next_id = id
            .checked_add(1)
            .ok_or_else(|| Error::invalid("every keyspace id has been used"))?;
        let record = KeyspaceRecord {
            id,
            name: name.to_owned(),
            ttl: opts.ttl.is_some(),
            dropped: false,
        };
        let mut next = self.clone();
        next.others.insert(
            id,
            (
                Arc::new(Settings::new(id, name, self.prefixed, opts)),
                false,
            ),
        );
        next.next_id = next_id;
        Ok((record, next))
    }

    /// The registry with keyspace `id` dropped (or, `dropped` false, live again).
    pub(crate) fn with_dropped(&self, id: u32, dropped: bool) -> Registry {
        let mut next = self.clone();
        if let Some(entry) = next.others.get_mut(&id) {
            entry.1 = dropped;
        }
        next
    }
}

impl crate::sst::compression::BlockCodecs for Registry {
    fn codec_for(&self, user_key: &[u8]) -> Option<crate::Compression> {
        self.for_key(user_key).compression
    }
}

impl MergeOperators for Registry {
    fn for_key(&self, key: &[u8]) -> (Option<&Arc<dyn MergeOperator>>, usize) {
        let s = Registry::for_key(self, key);
        (s.merge_operator.as_ref(), s.prefix.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn registry(prefixed: bool) -> Registry {
        Registry::open(KeyspaceOptions::default(), &BTreeMap::new(), prefixed, &[]).unwrap()
    }

    #[test]
    fn keys_map_to_their_keyspace_and_back() {
        let r = registry(true);
        let (rec, r) = r
            .with_created("users", &KeyspaceOptions::default())
            .unwrap();
        assert_eq!(rec.id, 1);
        let users = r.by_name("users").unwrap();
        let k = users.engine_key(b"alice");
        assert_eq!(&*k, b"\x01alice");
        assert_eq!(r.for_key(&k).name, "users");
        assert_eq!(users.user_key(&k), b"alice");
        assert_eq!(r.for_key(b"\x00x").name, "default");
        assert_eq!(
            users.bounds(None, None),
            (Some(b"\x01".to_vec()), Some(b"\x02".to_vec()))
        );
        assert_eq!(r.names(), ["default", "users"]);
        let r = r.with_dropped(1, true);
        assert!(r.by_name("users").is_none() && r.live(1).is_none() && r.any(1).is_some());
        // Ids are never reused.
        let (rec, _) = r
            .with_created("users", &KeyspaceOptions::default())
            .unwrap();
        assert_eq!(rec.id, 2);
    }

    #[test]
    fn engine_key_matches_the_format_doc() {
        let golden =
            crate::golden::hex_blocks(include_str!("../../../../docs/format/keyspaces.md"))
                .remove(0);
        let mut r = registry(true);
        for name in ["a", "b", "c"] {
            r = r.with_created(name, &KeyspaceOptions::default()).unwrap().1;
        }
        let c = r.by_name("c").unwrap();
        assert_eq!(c.id, 3);
        assert_eq!(
            &*c.engine_key(b"ab"),
            golden.as_slice(),
            "docs/format/keyspaces.md is out of date"
        );
        assert_eq!(r.for_key(&golden).id, 3);
    }

    #[test]
    fn a_database_without_keyspace_ids_has_only_the_default_keyspace() {
        let r = registry(false);
        assert_eq!(&*r.default_keyspace().engine_key(b"k"), b"k");
        assert_eq!(r.default_keyspace().bounds(None, None), (None, None));
        let err = r
            .with_created("x", &KeyspaceOptions::default())
            .unwrap_err();
        assert!(err.to_string().contains("before keyspaces"), "{err}");
    }

    #[test]
    fn bad_names_and_duplicates_are_refused() {
        let r = registry(true);
        for bad in ["", "default"] {
            assert!(
                r.with_created(bad, &KeyspaceOptions::default()).is_err(),
                "{bad:?}"
            );
        }
        assert!(
            r.with_created(&"x".repeat(256), &KeyspaceOptions::default())
                .is_err()
        );
        let (_, r) = r.with_created("a", &KeyspaceOptions::default()).unwrap();
        assert!(r.with_created("a", &KeyspaceOptions::default()).is_err());
    }
}

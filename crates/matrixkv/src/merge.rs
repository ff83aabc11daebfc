//! Merge operators: read-modify-write without the read (RocksDB's `MergeOperator`).
//!
//! [`crate::Db::merge`] stores an *operand* for a key instead of a value. Reads combine the
//! operands with the key's older value through the database's [`MergeOperator`]
//! (`Options::merge_operator`), lazily, as of the read's snapshot; compaction folds them into a
//! value once no snapshot needs them apart (or, without a base value in its input, combines
//! the operands with [`MergeOperator::partial_merge`] when the operator supports it).
//!
//! Two operators are built in: [`U64AddOperator`] (a counter) and [`AppendOperator`].
//!
//! An operator that returns an error or panics does not lose data: a read of that key returns
//! [`Error::MergeFailed`] naming the operator and the key, and compaction keeps the
//! operands and the base unchanged (counted in `Stats::merge_failures`).

use std::fmt;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;

use crate::error::{Error, Result};

/// Combines merge operands with a key's existing value.
///
/// Operands are passed oldest first. The operator must be deterministic, and associative in
/// the sense that folding any consecutive run of operands first (with `partial_merge`, or with
/// `full_merge` when compaction finds the base) gives the same final value; compaction relies
/// on it. It is called from reading threads and background threads concurrently.
///
/// ```
/// use matrixkv::MergeOperator;
///
/// /// Keeps the largest operand (an associative "max").
/// struct Max;
///
/// impl MergeOperator for Max {
///     fn name(&self) -> &str {
///         "max"
///     }
///     fn full_merge(
///         &self,
///         _key: &[u8],
///         existing: Option<&[u8]>,
///         operands: &[&[u8]],
///     ) -> Result<Vec<u8>, String> {
///         let best = operands.iter().copied().chain(existing).max().unwrap_or_default();
///         Ok(best.to_vec())
///     }
/// }
/// # fn main() -> matrixkv::Result<()> {
/// # let dir = tempfile::tempdir().unwrap();
/// let mut opts = matrixkv::Options::new(dir.path());
/// # opts.container_bytes = 8 << 20;
/// # opts.write_buffer_bytes = 2 << 20;
/// opts.merge_operator = Some(std::sync::Arc::new(Max));
/// let db = matrixkv::Db::open(opts)?;
/// db.merge("k", "b")?;
/// db.merge("k", "c")?;
/// db.merge("k", "a")?;
/// assert_eq!(db.get("k")?.as_deref(), Some(&b"c"[..]));
/// # Ok(()) }
/// ```
pub trait MergeOperator: Send + Sync {
    /// A name for errors, logs and statistics.
    fn name(&self) -> &str;

    /// The value of `key` after applying `operands` (oldest first) to `existing` (`None`: the
    /// key had no value, or was deleted). An `Err` is reported to the reader as
    /// [`Error::MergeFailed`].
    ///
    /// # Errors
    /// Whatever the operator cannot combine (a malformed operand, for one).
    fn full_merge(
        &self,
        key: &[u8],
        existing: Option<&[u8]>,
        operands: &[&[u8]],
    ) -> std::result::Result<Vec<u8>, String>;

    /// One operand equivalent to `operands` (oldest first, at least two), or `None` if the
    /// operator cannot combine operands without the base value (then compaction keeps them
    /// all). The default is `None`.
    fn partial_merge(&self, key: &[u8], operands: &[&[u8]]) -> Option<Vec<u8>> {
        let _ = (key, operands);
        None
    }
}

impl fmt::Debug for dyn MergeOperator {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "MergeOperator({})", self.name())
    }
}

/// A counter: values and operands are unsigned 64-bit integers, 8 bytes little-endian; the
/// merge adds them (wrapping). A missing value counts as 0; a value or operand of another
/// length is an error.
///
/// ```
/// # fn main() -> matrixkv::Result<()> {
/// # let dir = tempfile::tempdir().unwrap();
/// let mut opts = matrixkv::Options::new(dir.path());
/// # opts.container_bytes = 8 << 20;
/// # opts.write_buffer_bytes = 2 << 20;
/// opts.merge_operator = Some(std::sync::Arc::new(matrixkv::U64AddOperator));
/// let db = matrixkv::Db::open(opts)?;
/// db.merge("visits", 1u64.to_le_bytes())?;
/// db.merge("visits", 41u64.to_le_bytes())?;
/// assert_eq!(db.get("visits")?, Some(42u64.to_le_bytes().to_vec()));
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct U64AddOperator;

impl U64AddOperator {
    fn decode(what: &str, bytes: &[u8]) -> std::result::Result<u64, String> {
        let b: [u8; 8] = bytes
            .try_into()
            .map_err(|_| format!("{what} is {} bytes, not an 8-byte u64", bytes.len()))?;
        Ok(u64::from_le_bytes(b))
    }
}

impl MergeOperator for U64AddOperator {
    fn name(&self) -> &str {
        "u64add"
    }

    fn full_merge(
        &self,
        _key: &[u8],
        existing: Option<&[u8]>,
        operands: &[&[u8]],
    ) -> std::result::Result<Vec<u8>, String> {
        let mut sum = match existing {
            Some(v) => U64AddOperator::decode("the existing value", v)?,
            None => 0,
        };
        for op in operands {
            sum = sum.wrapping_add(U64AddOperator::decode("an operand", op)?);
        }
        Ok(sum.to_le_bytes().to_vec())
    }

    fn partial_merge(&self, key: &[u8], operands: &[&[u8]]) -> Option<Vec<u8>> {
        self.full_merge(key, None, operands).ok()
    }
}

/// Appends each operand to the value, with a delimiter between parts (RocksDB's
/// `StringAppendOperator`): `existing ++ d ++ op1 ++ d ++ op2`; a missing value starts with
/// the first operand.
///
/// ```
/// # fn main() -> matrixkv::Result<()> {
/// # let dir = tempfile::tempdir().unwrap();
/// let mut opts = matrixkv::Options::new(dir.path());
/// # opts.container_bytes = 8 << 20;
/// # opts.write_buffer_bytes = 2 << 20;
/// opts.merge_operator = Some(std::sync::Arc::new(matrixkv::AppendOperator::new(b",")));
/// let db = matrixkv::Db::open(opts)?;
/// db.put("tags", "a")?;
/// db.merge("tags", "b")?;
/// db.merge("tags", "c")?;
/// assert_eq!(db.get("tags")?.as_deref(), Some(&b"a,b,c"[..]));
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, Default)]
pub struct AppendOperator {
    delimiter: Vec<u8>,
}

impl AppendOperator {
    /// An append operator that puts `delimiter` (possibly empty) between parts.
    pub fn new(delimiter: impl AsRef<[u8]>) -> AppendOperator {
        AppendOperator {
            delimiter: delimiter.as_ref().to_vec(),
        }
    }

    fn join<'a>(&self, parts: impl Iterator<Item = &'a [u8]>) -> Vec<u8> {
        let mut out = Vec::new();
        for (i, p) in parts.enumerate() {
            if i > 0 {
                out.extend_from_slice(&self.delimiter);
            }
            out.extend_from_slice(p);
        }
        out
    }
}

impl MergeOperator for AppendOperator {
    fn name(&self) -> &str {
        "append"
    }

    fn full_merge(
        &self,
        _key: &[u8],
        existing: Option<&[u8]>,
        operands: &[&[u8]],
    ) -> std::result::Result<Vec<u8>, String> {
        Ok(self.join(existing.into_iter().chain(operands.iter().copied())))
    }

    fn partial_merge(&self, _key: &[u8], operands: &[&[u8]]) -> Option<Vec<u8>> {
        Some(self.join(operands.iter().copied()))
    }
}

/// Which merge operator applies to a key, for code that handles the keys of every keyspace
/// (flushes): the operator of the key's keyspace, and the length of the keyspace prefix the
/// key starts with (operators see the key without it).
pub(crate) trait MergeOperators {
    /// The operator for `key` and the length of its keyspace prefix.
    fn for_key(&self, key: &[u8]) -> (Option<&Arc<dyn MergeOperator>>, usize);
}

/// One operator for every key, none of which has a keyspace prefix.
impl MergeOperators for Option<&Arc<dyn MergeOperator>> {
    fn for_key(&self, _key: &[u8]) -> (Option<&Arc<dyn MergeOperator>>, usize) {
        (*self, 0)
    }
}

/// Calls `op.full_merge`, turning a missing operator, an `Err` and a panic into
/// [`Error::MergeFailed`] / `InvalidArgument`.
pub(crate) fn full_merge(
    op: Option<&Arc<dyn MergeOperator>>,
    key: &[u8],
    existing: Option<&[u8]>,
    operands: &[&[u8]],
) -> Result<Vec<u8>> {
    let op = op.ok_or_else(|| {
        Error::invalid(format!(
            "key {} holds merge operands but the database has no merge operator \
             (Options::merge_operator)",
            crate::error::render_key(key)
        ))
    })?;
    let failed = |message: String| Error::MergeFailed {
        operator: op.name().to_owned(),
        key: key.to_vec(),
        message,
    };
    match catch_unwind(AssertUnwindSafe(|| op.full_merge(key, existing, operands))) {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(message)) => Err(failed(message)),
        Err(panic) => Err(failed(panic_message(panic.as_ref()))),
    }
}

/// Calls `op.partial_merge`; a panic counts as "cannot" (`None`), logged.
pub(crate) fn partial_merge(
    op: &Arc<dyn MergeOperator>,
    key: &[u8],
    operands: &[&[u8]],
) -> Option<Vec<u8>> {
    match catch_unwind(AssertUnwindSafe(|| op.partial_merge(key, operands))) {
        Ok(v) => v,
        Err(panic) => {
            log::warn!(
                "matrixkv: merge operator {} panicked in partial_merge: {}",
                op.name(),
                panic_message(panic.as_ref())
            );
            None
        }
    }
}

/// `panicked: <the panic's message>`, for errors that report a caught panic.
pub(crate) fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    let what = panic
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic".to_owned());
    format!("panicked: {what}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_counter_adds_and_rejects_operands_of_the_wrong_length() {
        let op = U64AddOperator;
        let one = 1u64.to_le_bytes();
        let five = 5u64.to_le_bytes();
        assert_eq!(
            op.full_merge(b"k", Some(&five), &[&one, &one]),
            Ok(7u64.to_le_bytes().to_vec())
        );
        assert_eq!(
            op.full_merge(b"k", None, &[&one]),
            Ok(1u64.to_le_bytes().to_vec())
        );
        assert!(op.full_merge(b"k", Some(b"x"), &[&one]).is_err());
        assert_eq!(
            op.partial_merge(b"k", &[&one, &five]),
            Some(6u64.to_le_bytes().to_vec())
        );
        assert_eq!(op.partial_merge(b"k", &[&one, b"bad"]), None);
    }

    #[test]
    fn append_joins_with_the_delimiter_and_partial_merges_associatively() {
        let op = AppendOperator::new(b",");
        assert_eq!(
            op.full_merge(b"k", Some(b"a"), &[b"b", b"c"]),
            Ok(b"a,b,c".to_vec())
        );
        assert_eq!(op.full_merge(b"k", None, &[b"b"]), Ok(b"b".to_vec()));
        let folded = op.partial_merge(b"k", &[b"b", b"c"]).unwrap_or_default();
        assert_eq!(
            op.full_merge(b"k", Some(b"a"), &[&folded]),
            Ok(b"a,b,c".to_vec())
        );
    }

    struct Panics;
    impl MergeOperator for Panics {
        fn name(&self) -> &str {
            "panics"
        }
        fn full_merge(
            &self,
            _key: &[u8],
            _existing: Option<&[u8]>,
            _operands: &[&[u8]],
        ) -> std::result::Result<Vec<u8>, String> {
            panic!("boom")
        }
        fn partial_merge(&self, _key: &[u8], _operands: &[&[u8]]) -> Option<Vec<u8>> {
            panic!("boom")
        }
    }

    #[test]
    fn a_panicking_or_missing_operator_is_an_error_naming_it() {
        let op: Arc<dyn MergeOperator> = Arc::new(Panics);
        let e = full_merge(Some(&op), b"key", None, &[b"x"]).expect_err("panics");
        let text = e.to_string();
        assert!(text.contains("panics") && text.contains("boom"), "{text}");
        assert_eq!(partial_merge(&op, b"key", &[b"x", b"y"]), None);
        let e = full_merge(None, b"key", None, &[b"x"]).expect_err("no operator");
        assert!(e.to_string().contains("no merge operator"), "{e}");
    }
}

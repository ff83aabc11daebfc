//! The `matrixkv` Python package: a Pythonic face over the engine's public API.
//!
//! Every engine call releases the GIL (`py.allow_threads`) and holds the database's read lock
//! while it runs, so `close()` waits for calls in progress and later ones raise `ClosedError`
//! (`Handle`). Iterators fetch entries in batches at a snapshot they keep alive, so they never
//! hold engine state across Python calls and stay valid while other threads write.

use std::sync::{Arc, Mutex, RwLock};

use mkv::{Db, Options, ReadOptions, WriteBatch, WriteOptions};
use pyo3::create_exception;
use pyo3::exceptions::{PyException, PyKeyError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyByteArray, PyBytes, PyDict, PyMemoryView, PyString};

create_exception!(
    matrixkv,
    Error,
    PyException,
    "Base class of every matrixkv error."
);
create_exception!(
    matrixkv,
    CorruptionError,
    Error,
    "Stored data failed a check; the message names the file and offset."
);
create_exception!(
    matrixkv,
    StorageError,
    Error,
    "An I/O error or a full tier."
);
create_exception!(
    matrixkv,
    InvalidArgumentError,
    Error,
    "A bad argument or option (also raised as such by the engine)."
);
create_exception!(matrixkv, ClosedError, Error, "The database is closed.");
create_exception!(
    matrixkv,
    ReadOnlyError,
    Error,
    "The database was opened read-only."
);

/// The Python exception for an engine error, keeping its message.
fn to_py(e: mkv::Error) -> PyErr {
    let msg = e.to_string();
    match e {
        mkv::Error::Corruption { .. } => CorruptionError::new_err(msg),
        mkv::Error::InvalidArgument(_) | mkv::Error::OptionMismatch { .. } => {
            InvalidArgumentError::new_err(msg)
        }
        mkv::Error::Io { .. } | mkv::Error::NoSpace { .. } => StorageError::new_err(msg),
        mkv::Error::Closed => ClosedError::new_err(msg),
        mkv::Error::ReadOnly { .. } => ReadOnlyError::new_err(msg),
        _ => Error::new_err(msg),
    }
}

/// Bytes of a key or value: `bytes`, `bytearray` or `memoryview`. A `str` is refused with a
/// `TypeError`: it would be stored as UTF-8 and come back as `bytes`, so `db["k"]` would find
/// what `db.keys()` lists as `b"k"`; callers encode (and pick the encoding) themselves.
fn bytes_of(obj: &Bound<'_, PyAny>) -> PyResult<Vec<u8>> {
    if let Ok(b) = obj.downcast::<PyBytes>() {
        return Ok(b.as_bytes().to_vec());
    }
    if let Ok(b) = obj.downcast::<PyByteArray>() {
        return Ok(b.to_vec());
    }
    if obj.downcast::<PyMemoryView>().is_ok() {
        let b = obj.call_method0("tobytes")?;
        return Ok(b.downcast::<PyBytes>()?.as_bytes().to_vec());
    }
    if obj.downcast::<PyString>().is_ok() {
        return Err(PyTypeError::new_err(
            "keys and values are bytes, not str: encode it first (e.g. key.encode())",
        ));
    }
    Err(PyTypeError::new_err(format!(
        "expected bytes, bytearray or memoryview, got {}",
        obj.get_type().name()?
    )))
}

fn opt_bytes(obj: Option<&Bound<'_, PyAny>>) -> PyResult<Option<Vec<u8>>> {
    obj.filter(|o| !o.is_none()).map(bytes_of).transpose()
}

fn poisoned() -> PyErr {
    Error::new_err("a thread panicked holding the database")
}

fn released() -> PyErr {
    ClosedError::new_err("the snapshot was released")
}

/// The engine behind a `DB` and everything made from it (keyspaces, batches, snapshots,
/// iterators); `None` once closed.
///
/// Every call runs with the GIL released and holds the read lock for its whole duration;
/// `close()` takes the write lock, so it waits for the calls in progress in other threads and
/// then closes, and a call that starts meanwhile waits and raises `ClosedError`. Locks are
/// only ever taken and released with the GIL released, so a thread waiting for one never
/// holds the GIL that the holder needs to finish.
struct Handle {
    db: RwLock<Option<Db>>,
    /// The database's default for `sync=`.
    sync: bool,
}

type Shared = Arc<Handle>;

impl Handle {
    /// Runs `f` on the open engine, the GIL released.
    fn call<T: Send>(
        &self,
        py: Python<'_>,
        f: impl FnOnce(&Db) -> mkv::Result<T> + Send,
    ) -> PyResult<T> {
        self.call_py(py, |db| f(db).map_err(to_py))
    }

    /// [`Handle::call`] for a closure that makes its own Python errors.
    fn call_py<T: Send>(
        &self,
        py: Python<'_>,
        f: impl FnOnce(&Db) -> PyResult<T> + Send,
    ) -> PyResult<T> {
        py.allow_threads(|| {
            let g = self.db.read().map_err(|_| poisoned())?;
            let db = g
                .as_ref()
                .ok_or_else(|| ClosedError::new_err("the database is closed"))?;
            f(db)
        })
    }

    fn write_options(&self, sync: Option<bool>) -> WriteOptions {
        WriteOptions {
            sync: sync.unwrap_or(self.sync),
        }
    }
}

/// The keyspace a handle reads and writes: the database's own or a named one.
#[derive(Clone)]
enum Space {
    Default,
    Named(mkv::Keyspace),
}

impl Space {
    fn put(&self, db: &Db, k: &[u8], v: &[u8], wo: &WriteOptions) -> mkv::Result<()> {
        match self {
            Space::Default => db.put_opt(k, v, wo),
            Space::Named(ks) => ks.put_opt(k, v, wo),
        }
    }

    fn delete(&self, db: &Db, k: &[u8], wo: &WriteOptions) -> mkv::Result<()> {
        match self {
            Space::Default => db.delete_opt(k, wo),
            Space::Named(ks) => ks.delete_opt(k, wo),
        }
    }

    fn delete_range(&self, db: &Db, s: &[u8], e: &[u8], wo: &WriteOptions) -> mkv::Result<()> {
        match self {
            Space::Default => db.delete_range_opt(s, e, wo),
            Space::Named(ks) => ks.delete_range_opt(s, e, wo),
        }
    }

    fn merge(&self, db: &Db, k: &[u8], v: &[u8], wo: &WriteOptions) -> mkv::Result<()> {
        match self {
            Space::Default => db.merge_opt(k, v, wo),
            Space::Named(ks) => ks.merge_opt(k, v, wo),
        }
    }

    fn get(&self, db: &Db, k: &[u8], ro: &ReadOptions) -> mkv::Result<Option<Vec<u8>>> {
        match self {
            Space::Default => db.get_opt(k, ro),
            Space::Named(ks) => ks.get_opt(k, ro),
        }
    }

    fn multi_get(
        &self,
        db: &Db,
        keys: &[Vec<u8>],
        ro: &ReadOptions,
    ) -> mkv::Result<Vec<Option<Vec<u8>>>> {
        match self {
            Space::Default => db.multi_get_opt(keys, ro),
            Space::Named(ks) => ks.multi_get_opt(keys, ro),
        }
        .into_iter()
        .collect()
    }

    fn iter(&self, db: &Db, ro: &ReadOptions) -> mkv::Result<mkv::DbIterator> {
        match self {
            Space::Default => db.iter_opt(ro),
            Space::Named(ks) => ks.iter_opt(ro),
        }
    }

    fn compact_range(&self, db: &Db, s: Option<&[u8]>, e: Option<&[u8]>) -> mkv::Result<()> {
        match self {
            Space::Default => db.compact_range(s, e),
            Space::Named(ks) => ks.compact_range(s, e),
        }
    }

    fn name(&self) -> &str {
        match self {
            Space::Default => mkv::DEFAULT_KEYSPACE,
            Space::Named(ks) => ks.name(),
        }
    }
}

/// The keyspace a `keyspace=` argument names (`None`: the default one), which must belong to
/// the database of `h`.
fn space_arg(h: &Shared, ks: Option<PyRef<'_, PyKeyspace>>) -> PyResult<Space> {
    match ks {
        None => Ok(Space::Default),
        Some(ks) if Arc::ptr_eq(&ks.h, h) => Ok(ks.space.clone()),
        Some(_) => Err(InvalidArgumentError::new_err(
            "the keyspace belongs to another database",
        )),
    }
}

/// The engine's iterator bounds (lower inclusive, upper exclusive) for a Python range;
/// `None` when the range is empty.
struct Bounds {
    lower: Option<Vec<u8>>,
    upper: Option<Vec<u8>>,
}

impl Bounds {
    fn new(
        start: Option<&Bound<'_, PyAny>>,
        end: Option<&Bound<'_, PyAny>>,
        include_start: bool,
        include_end: bool,
        prefix: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Option<Bounds>> {
        // The key right after `k` in byte order is `k` + 0x00.
        let after = |mut k: Vec<u8>| {
            k.push(0);
            k
        };
        let mut lower = opt_bytes(start)?.map(|s| if include_start { s } else { after(s) });
        let mut upper = opt_bytes(end)?.map(|e| if include_end { after(e) } else { e });
        if let Some(p) = opt_bytes(prefix)? {
            // Past every key starting with `p`: `p` with its last byte below 0xff incremented
            // and what follows dropped; none if `p` is all 0xff (or empty).
            let mut past = p.clone();
            while past.last() == Some(&0xff) {
                past.pop();
            }
            let past = past.last_mut().map(|b| *b += 1).map(|()| past);
            lower = Some(lower.map_or(p.clone(), |l| l.max(p)));
            upper = match (upper, past) {
                (Some(u), Some(q)) => Some(u.min(q)),
                (u, q) => u.or(q),
            };
        }
        if let (Some(l), Some(u)) = (&lower, &upper)
            && l >= u
        {
            return Ok(None);
        }
        Ok(Some(Bounds { lower, upper }))
    }
}

/// Where a batch of entries starts and which way it goes.
enum From {
    First,
    Last,
    AtOrAfter(Vec<u8>),
    AtOrBefore(Vec<u8>),
    After(Vec<u8>),
    Before(Vec<u8>),
}

impl From {
    fn reverse(&self) -> bool {
        matches!(self, From::Last | From::AtOrBefore(_) | From::Before(_))
    }
}

type Entry = (Vec<u8>, Vec<u8>);

/// Up to `n` entries of `space` as of `snap` within `b`, from `from` in its direction.
fn read_batch(
    db: &Db,
    space: &Space,
    snap: &mkv::Snapshot,
    b: &Bounds,
    from: &From,
    n: usize,
) -> mkv::Result<Vec<Entry>> {
    let ro = ReadOptions {
        snapshot: Some(snap.sequence()),
        lower_bound: b.lower.clone(),
        upper_bound: b.upper.clone(),
    };
    let mut it = space.iter(db, &ro)?;
    match from {
        From::First => it.seek_to_first()?,
        From::Last => it.seek_to_last()?,
        From::AtOrAfter(k) => it.seek(k)?,
        From::AtOrBefore(k) => it.seek_for_prev(k)?,
        From::After(k) => {
            it.seek(k)?;
            if it.valid() && it.key() == k.as_slice() {
                it.next()?;
            }
        }
        From::Before(k) => {
            it.seek_for_prev(k)?;
            if it.valid() && it.key() == k.as_slice() {
                it.prev()?;
            }
        }
    }
    let reverse = from.reverse();
    let mut out = Vec::with_capacity(n.min(BATCH));
    while it.valid() && out.len() < n {
        out.push((it.key().to_vec(), it.value().to_vec()));
        if reverse {
            it.prev()?;
        } else {
            it.next()?;
        }
    }
    Ok(out)
}

/// Parses a merge operator's name.
fn merge_operator(name: &str) -> PyResult<Arc<dyn mkv::MergeOperator>> {
    Ok(match name {
        "u64add" => Arc::new(mkv::U64AddOperator),
        "append" => Arc::new(mkv::AppendOperator::new(b",")),
        other => {
            return Err(PyValueError::new_err(format!(
                "unknown merge_operator {other:?} (u64add or append)"
            )));
        }
    })
}

/// A keyspace's options from Python arguments.
fn keyspace_options(
    merge: Option<&str>,
    ttl: Option<f64>,
    min_blob_bytes: Option<usize>,
) -> PyResult<mkv::KeyspaceOptions> {
    Ok(mkv::KeyspaceOptions {
        merge_operator: merge.map(merge_operator).transpose()?,
        ttl: ttl
            .map(|s| {
                std::time::Duration::try_from_secs_f64(s)
                    .map_err(|e| PyValueError::new_err(format!("ttl={s}: {e}")))
            })
            .transpose()?,
        min_blob_bytes,
        ..mkv::KeyspaceOptions::default()
    })
}

/// A keyspace's options from a dict of ``create_keyspace``'s keyword arguments.
fn keyspace_options_of(name: &str, d: &Bound<'_, PyAny>) -> PyResult<mkv::KeyspaceOptions> {
    let d = d.downcast::<PyDict>()?;
    let (mut merge, mut ttl, mut min_blob) = (None, None, None);
    for (k, v) in d.iter() {
        let key: String = k.extract()?;
        match key.as_str() {
            "merge_operator" => merge = v.extract::<Option<String>>()?,
            "ttl" => ttl = v.extract::<Option<f64>>()?,
            "min_blob_bytes" => min_blob = v.extract::<Option<usize>>()?,
            other => {
                return Err(PyTypeError::new_err(format!(
                    "keyspace_options[{name:?}] has an unexpected option {other:?} \
                     (merge_operator, ttl, min_blob_bytes)"
                )));
            }
        }
    }
    keyspace_options(merge.as_deref(), ttl, min_blob)
}

/// Python bytes of an optional value, or `default`.
fn value_or(py: Python<'_>, v: Option<Vec<u8>>, default: Option<PyObject>) -> PyObject {
    match v {
        Some(v) => PyBytes::new(py, &v).into_any().unbind(),
        None => default.unwrap_or_else(|| py.None()),
    }
}

fn keys_of(keys: &Bound<'_, PyAny>) -> PyResult<Vec<Vec<u8>>> {
    keys.try_iter()?.map(|k| bytes_of(&k?)).collect()
}

fn optional_values(py: Python<'_>, vs: Vec<Option<Vec<u8>>>) -> Vec<Option<Py<PyBytes>>> {
    vs.into_iter()
        .map(|v| v.map(|v| PyBytes::new(py, &v).unbind()))
        .collect()
}

/// A keyspace of an open database (``db.create_keyspace(name)``, ``db.keyspace(name)``);
/// ``DB`` is its default keyspace, so everything here works on a ``DB`` too.
///
/// Keys and values are ``bytes`` (``bytearray`` and ``memoryview`` are accepted; ``str`` is
/// refused with ``TypeError``). Writes take ``sync=`` (default: the database's ``sync``
/// option). Iterators read one snapshot, taken when they are made, which they keep alive.
#[pyclass(module = "matrixkv", name = "Keyspace", subclass)]
struct PyKeyspace {
    h: Shared,
    space: Space,
}

impl PyKeyspace {
    fn py_iter(
        &self,
        py: Python<'_>,
        range: Option<Bounds>,
        reverse: bool,
        what: Yield,
    ) -> PyResult<PyIter> {
        let snap = self.h.call(py, |db| Ok(db.snapshot()))?;
        Ok(PyIter::new(
            &self.h,
            self.space.clone(),
            Arc::new(snap),
            range,
            reverse,
            what,
        ))
    }
}

#[pymethods]
impl PyKeyspace {
    /// The keyspace's name (``"default"`` for the ``DB`` itself).
    #[getter]
    fn name(&self) -> String {
        self.space.name().to_owned()
    }

    /// ``True`` once the database is closed.
    #[getter]
    fn closed(&self, py: Python<'_>) -> PyResult<bool> {
        py.allow_threads(|| Ok(self.h.db.read().map_err(|_| poisoned())?.is_none()))
    }

    /// The value of ``key``, or ``default`` if it is absent.
    #[pyo3(signature = (key, default=None))]
    fn get(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        default: Option<PyObject>,
    ) -> PyResult<PyObject> {
        let k = bytes_of(key)?;
        let v = self
            .h
            .call(py, |db| self.space.get(db, &k, &ReadOptions::default()))?;
        Ok(value_or(py, v, default))
    }

    /// The values of ``keys`` (``None`` for an absent key), in the order given, all read at
    /// one point in time.
    fn multi_get(
        &self,
        py: Python<'_>,
        keys: &Bound<'_, PyAny>,
    ) -> PyResult<Vec<Option<Py<PyBytes>>>> {
        let ks = keys_of(keys)?;
        let vs = self.h.call(py, |db| {
            self.space.multi_get(db, &ks, &ReadOptions::default())
        })?;
        Ok(optional_values(py, vs))
    }

    /// Sets ``key`` to ``value``.
    #[pyo3(signature = (key, value, *, sync=None))]
    fn put(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        value: &Bound<'_, PyAny>,
        sync: Option<bool>,
    ) -> PyResult<()> {
        let (k, v) = (bytes_of(key)?, bytes_of(value)?);
        let wo = self.h.write_options(sync);
        self.h.call(py, |db| self.space.put(db, &k, &v, &wo))
    }

    /// Deletes ``key`` (no error if absent).
    #[pyo3(signature = (key, *, sync=None))]
    fn delete(&self, py: Python<'_>, key: &Bound<'_, PyAny>, sync: Option<bool>) -> PyResult<()> {
        let k = bytes_of(key)?;
        let wo = self.h.write_options(sync);
        self.h.call(py, |db| self.space.delete(db, &k, &wo))
    }

    /// Deletes every key in ``[start, end)``.
    #[pyo3(signature = (start, end, *, sync=None))]
    fn delete_range(
        &self,
        py: Python<'_>,
        start: &Bound<'_, PyAny>,
        end: &Bound<'_, PyAny>,
        sync: Option<bool>,
    ) -> PyResult<()> {
        let (s, e) = (bytes_of(start)?, bytes_of(end)?);
        let wo = self.h.write_options(sync);
        self.h
            .call(py, |db| self.space.delete_range(db, &s, &e, &wo))
    }

    /// Merges ``operand`` into ``key`` with the keyspace's merge operator.
    #[pyo3(signature = (key, operand, *, sync=None))]
    fn merge(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        operand: &Bound<'_, PyAny>,
        sync: Option<bool>,
    ) -> PyResult<()> {
        let (k, v) = (bytes_of(key)?, bytes_of(operand)?);
        let wo = self.h.write_options(sync);
        self.h.call(py, |db| self.space.merge(db, &k, &v, &wo))
    }

    fn __getitem__(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<Py<PyBytes>> {
        let k = bytes_of(key)?;
        match self
            .h
            .call(py, |db| self.space.get(db, &k, &ReadOptions::default()))?
        {
            Some(v) => Ok(PyBytes::new(py, &v).unbind()),
            None => Err(PyKeyError::new_err(PyBytes::new(py, &k).unbind())),
        }
    }

    fn __setitem__(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        value: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        self.put(py, key, value, None)
    }

    fn __delitem__(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<()> {
        self.delete(py, key, None)
    }

    fn __contains__(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<bool> {
        let k = bytes_of(key)?;
        Ok(self
            .h
            .call(py, |db| self.space.get(db, &k, &ReadOptions::default()))?
            .is_some())
    }

    /// ``(key, value)`` pairs with ``start <= key < end`` (``include_start``,
    /// ``include_end`` change either side) and starting with ``prefix``, in key order
    /// (reversed with ``reverse=True``).
    #[pyo3(signature = (start=None, end=None, reverse=false, *, prefix=None, include_start=true, include_end=false))]
    #[allow(clippy::too_many_arguments)]
    fn items(
        &self,
        py: Python<'_>,
        start: Option<&Bound<'_, PyAny>>,
        end: Option<&Bound<'_, PyAny>>,
        reverse: bool,
        prefix: Option<&Bound<'_, PyAny>>,
        include_start: bool,
        include_end: bool,
    ) -> PyResult<PyIter> {
        let range = Bounds::new(start, end, include_start, include_end, prefix)?;
        self.py_iter(py, range, reverse, Yield::Items)
    }

    /// The keys, as :meth:`items` orders them.
    #[pyo3(signature = (start=None, end=None, reverse=false, *, prefix=None, include_start=true, include_end=false))]
    #[allow(clippy::too_many_arguments)]
    fn keys(
        &self,
        py: Python<'_>,
        start: Option<&Bound<'_, PyAny>>,
        end: Option<&Bound<'_, PyAny>>,
        reverse: bool,
        prefix: Option<&Bound<'_, PyAny>>,
        include_start: bool,
        include_end: bool,
    ) -> PyResult<PyIter> {
        let range = Bounds::new(start, end, include_start, include_end, prefix)?;
        self.py_iter(py, range, reverse, Yield::Keys)
    }

    /// The values, as :meth:`items` orders them.
    #[pyo3(signature = (start=None, end=None, reverse=false, *, prefix=None, include_start=true, include_end=false))]
    #[allow(clippy::too_many_arguments)]
    fn values(
        &self,
        py: Python<'_>,
        start: Option<&Bound<'_, PyAny>>,
        end: Option<&Bound<'_, PyAny>>,
        reverse: bool,
        prefix: Option<&Bound<'_, PyAny>>,
        include_start: bool,
        include_end: bool,
    ) -> PyResult<PyIter> {
        let range = Bounds::new(start, end, include_start, include_end, prefix)?;
        self.py_iter(py, range, reverse, Yield::Values)
    }

    fn __iter__(&self, py: Python<'_>) -> PyResult<PyIter> {
        self.py_iter(
            py,
            Some(Bounds {
                lower: None,
                upper: None,
            }),
            false,
            Yield::Keys,
        )
    }

    /// A seekable iterator (unpositioned: call a seek first) over the keys in the range, as
    /// of now.
    #[pyo3(signature = (start=None, end=None, *, prefix=None, include_start=true, include_end=false))]
    fn iter(
        &self,
        py: Python<'_>,
        start: Option<&Bound<'_, PyAny>>,
        end: Option<&Bound<'_, PyAny>>,
        prefix: Option<&Bound<'_, PyAny>>,
        include_start: bool,
        include_end: bool,
    ) -> PyResult<PyRawIter> {
        let range = Bounds::new(start, end, include_start, include_end, prefix)?;
        let snap = self.h.call(py, |db| Ok(db.snapshot()))?;
        Ok(PyRawIter::new(
            &self.h,
            self.space.clone(),
            Arc::new(snap),
            range,
        ))
    }

    /// Compacts ``[start, end]`` (everything by default) down to the deepest level.
    #[pyo3(signature = (start=None, end=None))]
    fn compact_range(
        &self,
        py: Python<'_>,
        start: Option<&Bound<'_, PyAny>>,
        end: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<()> {
        let (s, e) = (opt_bytes(start)?, opt_bytes(end)?);
        self.h.call(py, |db| {
            self.space.compact_range(db, s.as_deref(), e.as_deref())
        })
    }

    fn __repr__(&self) -> String {
        format!("<matrixkv.Keyspace {:?}>", self.space.name())
    }
}

/// A matrixkv database, and its default keyspace (see :class:`Keyspace`).
///
/// ``DB(path, fast_dir=None, read_only=False, **options)`` opens (creating) the database at
/// ``path`` (slow tier ``<path>/slow``, fast tier ``<path>/fast`` unless ``fast_dir``).
/// Options: ``write_buffer_bytes``, ``container_bytes``, ``block_cache_bytes``,
/// ``merge_operator`` (``"u64add"`` or ``"append"``), ``sync`` (the default of every write's
/// ``sync=``), ``keyspace_options`` (``{name: {merge_operator=, ttl=, min_blob_bytes=}}``,
/// the options of keyspaces created earlier). Use it as a context manager to close it.
#[pyclass(module = "matrixkv", name = "DB", extends = PyKeyspace)]
struct PyDb {
    h: Shared,
}

#[pymethods]
impl PyDb {
    #[new]
    #[pyo3(signature = (path, fast_dir=None, read_only=false, **options))]
    #[pyo3(text_signature = "(path, fast_dir=None, read_only=False, **options)")]
    fn new(
        py: Python<'_>,
        path: std::path::PathBuf,
        fast_dir: Option<std::path::PathBuf>,
        read_only: bool,
        options: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<PyClassInitializer<PyDb>> {
        let mut o = Options::new(&path);
        if let Some(f) = fast_dir {
            o.fast_dir = f;
        }
        let mut sync = false;
        if let Some(opts) = options {
            for (k, v) in opts.iter() {
                let name: String = k.extract()?;
                match name.as_str() {
                    "write_buffer_bytes" => o.write_buffer_bytes = v.extract()?,
                    "container_bytes" => o.container_bytes = v.extract()?,
                    "block_cache_bytes" => o.block_cache_bytes = v.extract()?,
                    "sync" => sync = v.extract()?,
                    "merge_operator" => {
                        o.merge_operator = Some(merge_operator(&v.extract::<String>()?)?);
                    }
                    "keyspace_options" => {
                        for (ks, ko) in v.downcast::<PyDict>()?.iter() {
                            let ks: String = ks.extract()?;
                            let ko = keyspace_options_of(&ks, &ko)?;
                            o.keyspace_options.insert(ks, ko);
                        }
                    }
                    other => {
                        return Err(PyTypeError::new_err(format!(
                            "DB() got an unexpected option {other:?}"
                        )));
                    }
                }
            }
        }
        let db = py
            .allow_threads(|| {
                if read_only {
                    Db::open_read_only(o)
                } else {
                    Db::open(o)
                }
            })
            .map_err(to_py)?;
        let h = Arc::new(Handle {
            db: RwLock::new(Some(db)),
            sync,
        });
        Ok(PyClassInitializer::from(PyKeyspace {
            h: Arc::clone(&h),
            space: Space::Default,
        })
        .add_subclass(PyDb { h }))
    }

    /// A write batch (``sync`` is its default for :meth:`WriteBatch.write`); as a context
    /// manager it commits on a clean exit and discards on an exception.
    #[pyo3(signature = (*, sync=None))]
    fn write_batch(&self, sync: Option<bool>) -> PyWriteBatch {
        PyWriteBatch {
            h: Arc::clone(&self.h),
            batch: Mutex::new(Some(WriteBatch::new())),
            sync,
        }
    }

    /// A snapshot: reads through it see the database as it is now.
    fn snapshot(&self, py: Python<'_>) -> PyResult<PySnapshot> {
        let snap = self.h.call(py, |db| Ok(db.snapshot()))?;
        Ok(PySnapshot {
            h: Arc::clone(&self.h),
            snap: Mutex::new(Some(Arc::new(snap))),
        })
    }

    /// Creates keyspace ``name`` (durable when this returns). Give the same options in
    /// ``DB(keyspace_options={name: {...}})`` at later opens.
    #[pyo3(signature = (name, *, merge_operator=None, ttl=None, min_blob_bytes=None))]
    fn create_keyspace(
        &self,
        py: Python<'_>,
        name: &str,
        merge_operator: Option<&str>,
        ttl: Option<f64>,
        min_blob_bytes: Option<usize>,
    ) -> PyResult<PyKeyspace> {
        let ko = keyspace_options(merge_operator, ttl, min_blob_bytes)?;
        let ks = self.h.call(py, |db| db.create_keyspace(name, ko))?;
        Ok(PyKeyspace {
            h: Arc::clone(&self.h),
            space: Space::Named(ks),
        })
    }

    /// The keyspace called ``name`` (``InvalidArgumentError`` if there is none).
    fn keyspace(&self, py: Python<'_>, name: &str) -> PyResult<PyKeyspace> {
        let space = if name == mkv::DEFAULT_KEYSPACE {
            Space::Default
        } else {
            Space::Named(self.h.call(py, |db| db.keyspace(name))?)
        };
        Ok(PyKeyspace {
            h: Arc::clone(&self.h),
            space,
        })
    }

    /// Drops keyspace ``name`` and every key in it; its handles raise ``Error`` afterwards.
    fn drop_keyspace(&self, py: Python<'_>, name: &str) -> PyResult<()> {
        self.h.call(py, |db| db.drop_keyspace(name))
    }

    /// The keyspaces' names, ``"default"`` first.
    fn list_keyspaces(&self, py: Python<'_>) -> PyResult<Vec<String>> {
        self.h.call(py, |db| Ok(db.list_keyspaces()))
    }

    /// Writes an openable copy of the database to ``path`` (a checkpoint).
    fn checkpoint(&self, py: Python<'_>, path: std::path::PathBuf) -> PyResult<()> {
        self.h.call(py, |db| db.checkpoint(&path).map(|_| ()))
    }

    /// Makes every write acknowledged so far durable (survive a power loss), as a sync write
    /// would (RocksDB's ``SyncWAL``).
    fn sync_wal(&self, py: Python<'_>) -> PyResult<()> {
        self.h.call(py, Db::sync_wal)
    }

    /// Flushes the memtables.
    fn flush(&self, py: Python<'_>) -> PyResult<()> {
        self.h.call(py, Db::flush)
    }

    /// The engine's statistics as a dict of numbers.
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let (s, props) = self.h.call(py, |db| {
            let props: Vec<(&str, u64)> = mkv::PROPERTY_NAMES
                .iter()
                .filter_map(|name| db.get_int_property(name).ok().map(|v| (*name, v)))
                .collect();
            Ok((db.stats(), props))
        })?;
        let d = PyDict::new(py);
        for (k, v) in [
            ("user_ops", s.user_ops),
            ("user_bytes", s.user_bytes),
            ("write_groups", s.write_groups),
            ("wal_bytes", s.wal_bytes),
            ("wal_syncs", s.wal_syncs),
            ("flushes", s.flushes),
            ("compactions", s.compactions),
            ("slow_bytes_written", s.slow_bytes_written),
            ("blob_bytes_written", s.blob_bytes_written),
            ("blob_gc_jobs", s.blob_gc_jobs),
        ] {
            d.set_item(k, v)?;
        }
        for (name, v) in props {
            d.set_item(name, v)?;
        }
        Ok(d)
    }

    /// A RocksDB-named property (``matrixkv.levelstats``, ...), as text.
    fn property(&self, py: Python<'_>, name: &str) -> PyResult<String> {
        self.h.call(py, |db| db.get_property(name))
    }

    /// Closes the database: waits for the calls other threads have in progress, then syncs
    /// the WAL and releases the database. Calls made afterwards (and calls that start while
    /// it waits) raise ``ClosedError``. Safe to call twice.
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        py.allow_threads(|| {
            let taken = self.h.db.write().map_err(|_| poisoned())?.take();
            match taken {
                Some(db) => db.close().map_err(to_py),
                None => Ok(()),
            }
        })
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    #[pyo3(signature = (*_exc))]
    fn __exit__(&self, py: Python<'_>, _exc: &Bound<'_, pyo3::types::PyTuple>) -> PyResult<bool> {
        self.close(py)?;
        Ok(false)
    }

    fn __repr__(&self) -> String {
        "<matrixkv.DB>".to_owned()
    }
}

/// An atomic group of writes (``db.write_batch()``), to any keyspaces of one database.
#[pyclass(module = "matrixkv", name = "WriteBatch")]
struct PyWriteBatch {
    h: Shared,
    batch: Mutex<Option<WriteBatch>>,
    /// The default of `write(sync=)`; `None` takes the database's.
    sync: Option<bool>,
}

impl PyWriteBatch {
    fn with(&self, f: impl FnOnce(&mut WriteBatch)) -> PyResult<()> {
        let mut g = self
            .batch
            .lock()
            .map_err(|_| Error::new_err("a thread panicked holding the batch"))?;
        let b = g
            .as_mut()
            .ok_or_else(|| Error::new_err("the batch was already written or discarded"))?;
        f(b);
        Ok(())
    }
}

#[pymethods]
impl PyWriteBatch {
    /// Adds a put.
    #[pyo3(signature = (key, value, *, keyspace=None))]
    fn put(
        &self,
        key: &Bound<'_, PyAny>,
        value: &Bound<'_, PyAny>,
        keyspace: Option<PyRef<'_, PyKeyspace>>,
    ) -> PyResult<()> {
        let (k, v) = (bytes_of(key)?, bytes_of(value)?);
        match space_arg(&self.h, keyspace)? {
            Space::Default => self.with(|b| b.put(&k, &v)),
            Space::Named(ks) => self.with(|b| b.put_cf(&ks, &k, &v)),
        }
    }

    /// Adds a delete.
    #[pyo3(signature = (key, *, keyspace=None))]
    fn delete(
        &self,
        key: &Bound<'_, PyAny>,
        keyspace: Option<PyRef<'_, PyKeyspace>>,
    ) -> PyResult<()> {
        let k = bytes_of(key)?;
        match space_arg(&self.h, keyspace)? {
            Space::Default => self.with(|b| b.delete(&k)),
            Space::Named(ks) => self.with(|b| b.delete_cf(&ks, &k)),
        }
    }

    /// Adds a deletion of every key in ``[start, end)``.
    #[pyo3(signature = (start, end, *, keyspace=None))]
    fn delete_range(
        &self,
        start: &Bound<'_, PyAny>,
        end: &Bound<'_, PyAny>,
        keyspace: Option<PyRef<'_, PyKeyspace>>,
    ) -> PyResult<()> {
        let (s, e) = (bytes_of(start)?, bytes_of(end)?);
        match space_arg(&self.h, keyspace)? {
            Space::Default => self.with(|b| b.delete_range(&s, &e)),
            Space::Named(ks) => self.with(|b| b.delete_range_cf(&ks, &s, &e)),
        }
    }

    /// Adds a merge.
    #[pyo3(signature = (key, operand, *, keyspace=None))]
    fn merge(
        &self,
        key: &Bound<'_, PyAny>,
        operand: &Bound<'_, PyAny>,
        keyspace: Option<PyRef<'_, PyKeyspace>>,
    ) -> PyResult<()> {
        let (k, v) = (bytes_of(key)?, bytes_of(operand)?);
        match space_arg(&self.h, keyspace)? {
            Space::Default => self.with(|b| b.merge(&k, &v)),
            Space::Named(ks) => self.with(|b| b.merge_cf(&ks, &k, &v)),
        }
    }

    /// Applies every write atomically. A closed database raises ``ClosedError`` and keeps
    /// the batch; once the engine has it (written, or failed with another error) it is spent.
    #[pyo3(signature = (*, sync=None))]
    fn write(&self, py: Python<'_>, sync: Option<bool>) -> PyResult<()> {
        let wo = self.h.write_options(sync.or(self.sync));
        self.h.call_py(py, |db| {
            let batch = self
                .batch
                .lock()
                .map_err(|_| Error::new_err("a thread panicked holding the batch"))?
                .take()
                .ok_or_else(|| Error::new_err("the batch was already written or discarded"))?;
            db.write_opt(batch, &wo).map_err(to_py)
        })
    }

    /// Drops every write.
    fn discard(&self) -> PyResult<()> {
        self.batch
            .lock()
            .map_err(|_| Error::new_err("a thread panicked holding the batch"))?
            .take();
        Ok(())
    }

    fn __len__(&self) -> PyResult<usize> {
        Ok(self
            .batch
            .lock()
            .map_err(|_| Error::new_err("a thread panicked holding the batch"))?
            .as_ref()
            .map_or(0, WriteBatch::len))
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    #[pyo3(signature = (*exc))]
    fn __exit__(&self, py: Python<'_>, exc: &Bound<'_, pyo3::types::PyTuple>) -> PyResult<bool> {
        // (exc_type, exc_value, traceback): an exception ends the block when exc_type is set.
        if exc.get_item(0).is_ok_and(|t| !t.is_none()) {
            self.discard()?;
        } else {
            self.write(py, None)?;
        }
        Ok(false)
    }
}

/// A consistent view (``db.snapshot()``); a context manager that releases it on exit.
/// Iterators made from it keep it alive until they are exhausted or dropped, even after
/// ``release()``.
#[pyclass(module = "matrixkv", name = "Snapshot")]
struct PySnapshot {
    h: Shared,
    snap: Mutex<Option<Arc<mkv::Snapshot>>>,
}

impl PySnapshot {
    fn held(&self) -> PyResult<Arc<mkv::Snapshot>> {
        self.snap
            .lock()
            .map_err(|_| Error::new_err("a thread panicked holding the snapshot"))?
            .clone()
            .ok_or_else(released)
    }

    fn py_iter(
        &self,
        range: Option<Bounds>,
        reverse: bool,
        what: Yield,
        keyspace: Option<PyRef<'_, PyKeyspace>>,
    ) -> PyResult<PyIter> {
        let space = space_arg(&self.h, keyspace)?;
        Ok(PyIter::new(
            &self.h,
            space,
            self.held()?,
            range,
            reverse,
            what,
        ))
    }
}

#[pymethods]
impl PySnapshot {
    /// The value of ``key`` as of the snapshot, or ``default``.
    #[pyo3(signature = (key, default=None, *, keyspace=None))]
    fn get(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        default: Option<PyObject>,
        keyspace: Option<PyRef<'_, PyKeyspace>>,
    ) -> PyResult<PyObject> {
        let k = bytes_of(key)?;
        let space = space_arg(&self.h, keyspace)?;
        let ro = self.held()?.read_options();
        let v = self.h.call(py, |db| space.get(db, &k, &ro))?;
        Ok(value_or(py, v, default))
    }

    /// The values of ``keys`` as of the snapshot (see ``Keyspace.multi_get``).
    #[pyo3(signature = (keys, *, keyspace=None))]
    fn multi_get(
        &self,
        py: Python<'_>,
        keys: &Bound<'_, PyAny>,
        keyspace: Option<PyRef<'_, PyKeyspace>>,
    ) -> PyResult<Vec<Option<Py<PyBytes>>>> {
        let ks = keys_of(keys)?;
        let space = space_arg(&self.h, keyspace)?;
        let ro = self.held()?.read_options();
        let vs = self.h.call(py, |db| space.multi_get(db, &ks, &ro))?;
        Ok(optional_values(py, vs))
    }

    /// ``(key, value)`` pairs as of the snapshot (see ``Keyspace.items``).
    #[pyo3(signature = (start=None, end=None, reverse=false, *, prefix=None, include_start=true, include_end=false, keyspace=None))]
    #[allow(clippy::too_many_arguments)]
    fn items(
        &self,
        start: Option<&Bound<'_, PyAny>>,
        end: Option<&Bound<'_, PyAny>>,
        reverse: bool,
        prefix: Option<&Bound<'_, PyAny>>,
        include_start: bool,
        include_end: bool,
        keyspace: Option<PyRef<'_, PyKeyspace>>,
    ) -> PyResult<PyIter> {
        let range = Bounds::new(start, end, include_start, include_end, prefix)?;
        self.py_iter(range, reverse, Yield::Items, keyspace)
    }

    /// The keys as of the snapshot (see ``Keyspace.keys``).
    #[pyo3(signature = (start=None, end=None, reverse=false, *, prefix=None, include_start=true, include_end=false, keyspace=None))]
    #[allow(clippy::too_many_arguments)]
    fn keys(
        &self,
        start: Option<&Bound<'_, PyAny>>,
        end: Option<&Bound<'_, PyAny>>,
        reverse: bool,
        prefix: Option<&Bound<'_, PyAny>>,
        include_start: bool,
        include_end: bool,
        keyspace: Option<PyRef<'_, PyKeyspace>>,
    ) -> PyResult<PyIter> {
        let range = Bounds::new(start, end, include_start, include_end, prefix)?;
        self.py_iter(range, reverse, Yield::Keys, keyspace)
    }

    /// The values as of the snapshot (see ``Keyspace.values``).
    #[pyo3(signature = (start=None, end=None, reverse=false, *, prefix=None, include_start=true, include_end=false, keyspace=None))]
    #[allow(clippy::too_many_arguments)]
    fn values(
        &self,
        start: Option<&Bound<'_, PyAny>>,
        end: Option<&Bound<'_, PyAny>>,
        reverse: bool,
        prefix: Option<&Bound<'_, PyAny>>,
        include_start: bool,
        include_end: bool,
        keyspace: Option<PyRef<'_, PyKeyspace>>,
    ) -> PyResult<PyIter> {
        let range = Bounds::new(start, end, include_start, include_end, prefix)?;
        self.py_iter(range, reverse, Yield::Values, keyspace)
    }

    /// A seekable iterator as of the snapshot (see ``Keyspace.iter``).
    #[pyo3(signature = (start=None, end=None, *, prefix=None, include_start=true, include_end=false, keyspace=None))]
    fn iter(
        &self,
        start: Option<&Bound<'_, PyAny>>,
        end: Option<&Bound<'_, PyAny>>,
        prefix: Option<&Bound<'_, PyAny>>,
        include_start: bool,
        include_end: bool,
        keyspace: Option<PyRef<'_, PyKeyspace>>,
    ) -> PyResult<PyRawIter> {
        let range = Bounds::new(start, end, include_start, include_end, prefix)?;
        let space = space_arg(&self.h, keyspace)?;
        Ok(PyRawIter::new(&self.h, space, self.held()?, range))
    }

    /// Releases the snapshot (iterators made from it keep it until they finish).
    fn release(&self) -> PyResult<()> {
        self.snap
            .lock()
            .map_err(|_| Error::new_err("a thread panicked holding the snapshot"))?
            .take();
        Ok(())
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    #[pyo3(signature = (*_exc))]
    fn __exit__(&self, _exc: &Bound<'_, pyo3::types::PyTuple>) -> PyResult<bool> {
        self.release()?;
        Ok(false)
    }
}

#[derive(Clone, Copy)]
enum Yield {
    Items,
    Keys,
    Values,
}

/// A Python iterator over a key range, from ``items()``, ``keys()``, ``values()``: it reads
/// ahead in batches, each through a fresh engine iterator at the snapshot it holds, so it
/// pins no memtable or table between calls and stays valid while other threads write.
#[pyclass(module = "matrixkv", name = "Iterator")]
struct PyIter {
    h: Shared,
    space: Space,
    /// Kept until the iterator is exhausted: what the engine protects the batches' version by.
    snap: Option<Arc<mkv::Snapshot>>,
    /// `None`: the range is empty.
    range: Option<Bounds>,
    reverse: bool,
    what: Yield,
    /// The next batch, in the order to yield.
    ahead: std::collections::VecDeque<Entry>,
    /// The last key yielded (the next batch starts past it).
    resume: Option<Vec<u8>>,
}

const BATCH: usize = 256;

impl PyIter {
    fn new(
        h: &Shared,
        space: Space,
        snap: Arc<mkv::Snapshot>,
        range: Option<Bounds>,
        reverse: bool,
        what: Yield,
    ) -> PyIter {
        PyIter {
            h: Arc::clone(h),
            space,
            snap: range.is_some().then_some(snap),
            range,
            reverse,
            what,
            ahead: std::collections::VecDeque::new(),
            resume: None,
        }
    }

    fn fill(&mut self, py: Python<'_>) -> PyResult<()> {
        let (Some(snap), Some(range)) = (&self.snap, &self.range) else {
            return Ok(());
        };
        let from = match (self.resume.clone(), self.reverse) {
            (None, false) => From::First,
            (None, true) => From::Last,
            (Some(k), false) => From::After(k),
            (Some(k), true) => From::Before(k),
        };
        let space = &self.space;
        let batch = self
            .h
            .call(py, |db| read_batch(db, space, snap, range, &from, BATCH))?;
        if batch.len() < BATCH {
            // The last batch: the snapshot is no longer needed.
            self.snap = None;
        }
        if let Some((k, _)) = batch.last() {
            self.resume = Some(k.clone());
        }
        self.ahead.extend(batch);
        Ok(())
    }
}

#[pymethods]
impl PyIter {
    fn __iter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    fn __next__(&mut self, py: Python<'_>) -> PyResult<Option<PyObject>> {
        if self.ahead.is_empty() {
            self.fill(py)?;
        }
        let Some((k, v)) = self.ahead.pop_front() else {
            return Ok(None);
        };
        Ok(Some(match self.what {
            Yield::Items => (PyBytes::new(py, &k), PyBytes::new(py, &v))
                .into_pyobject(py)?
                .into_any()
                .unbind(),
            Yield::Keys => PyBytes::new(py, &k).into_any().unbind(),
            Yield::Values => PyBytes::new(py, &v).into_any().unbind(),
        }))
    }
}

/// A seekable iterator (``db.iter()``, rocksdict's ``RdictIter``, RocksDB's ``Iterator``):
/// position it with ``seek_to_first``, ``seek_to_last``, ``seek`` (first key >= target) or
/// ``seek_for_prev`` (last key <= target), then move with ``next`` and ``prev`` while
/// ``valid()``. It reads at the snapshot it was made with, which it keeps alive, in batches
/// that grow as it keeps moving one way, so it pins no engine state between calls.
#[pyclass(module = "matrixkv", name = "RawIterator")]
struct PyRawIter {
    h: Shared,
    space: Space,
    snap: Arc<mkv::Snapshot>,
    range: Option<Bounds>,
    /// The current entry; `None`: not valid.
    cur: Option<Entry>,
    /// The entries after `cur` in the direction `reverse`, as read ahead.
    ahead: std::collections::VecDeque<Entry>,
    reverse: bool,
    /// The last read reached the end of the range in direction `reverse`.
    at_end: bool,
    /// Entries the next read fetches.
    batch: usize,
}

/// The first read after a seek: a seek is often followed by a few moves only.
const FIRST_BATCH: usize = 16;

impl PyRawIter {
    fn new(h: &Shared, space: Space, snap: Arc<mkv::Snapshot>, range: Option<Bounds>) -> PyRawIter {
        PyRawIter {
            h: Arc::clone(h),
            space,
            snap,
            range,
            cur: None,
            ahead: std::collections::VecDeque::new(),
            reverse: false,
            at_end: true,
            batch: FIRST_BATCH,
        }
    }

    /// Reads from `from`, making the first entry read current and keeping the rest ahead.
    fn read(&mut self, py: Python<'_>, from: From) -> PyResult<()> {
        let reverse = from.reverse();
        let Some(range) = &self.range else {
            self.cur = None;
            return Ok(());
        };
        // One more than the batch: the first becomes current.
        let n = self.batch + 1;
        let (space, snap) = (&self.space, &self.snap);
        let batch = self
            .h
            .call(py, |db| read_batch(db, space, snap, range, &from, n))?;
        self.at_end = batch.len() < n;
        self.reverse = reverse;
        self.ahead = batch.into();
        self.cur = self.ahead.pop_front();
        Ok(())
    }

    fn seek_fresh(&mut self, py: Python<'_>, from: From) -> PyResult<()> {
        self.batch = FIRST_BATCH;
        self.read(py, from)
    }

    fn step(&mut self, py: Python<'_>, reverse: bool) -> PyResult<()> {
        let Some((key, _)) = &self.cur else {
            return Err(InvalidArgumentError::new_err(
                "the iterator is not positioned at an entry (seek first)",
            ));
        };
        if self.reverse == reverse {
            if let Some(e) = self.ahead.pop_front() {
                self.cur = Some(e);
                return Ok(());
            }
            if self.at_end {
                self.cur = None;
                return Ok(());
            }
            self.batch = (self.batch * 2).min(BATCH);
        } else {
            self.batch = FIRST_BATCH;
        }
        let key = key.clone();
        self.read(
            py,
            if reverse {
                From::Before(key)
            } else {
                From::After(key)
            },
        )
    }

    fn current(&self) -> PyResult<&Entry> {
        self.cur.as_ref().ok_or_else(|| {
            InvalidArgumentError::new_err("the iterator is not positioned at an entry")
        })
    }
}

#[pymethods]
impl PyRawIter {
    /// ``True`` while positioned at an entry.
    fn valid(&self) -> bool {
        self.cur.is_some()
    }

    /// Positions at the first key of the range.
    fn seek_to_first(&mut self, py: Python<'_>) -> PyResult<()> {
        self.seek_fresh(py, From::First)
    }

    /// Positions at the last key of the range.
    fn seek_to_last(&mut self, py: Python<'_>) -> PyResult<()> {
        self.seek_fresh(py, From::Last)
    }

    /// Positions at the first key ``>= target``.
    fn seek(&mut self, py: Python<'_>, target: &Bound<'_, PyAny>) -> PyResult<()> {
        let t = bytes_of(target)?;
        self.seek_fresh(py, From::AtOrAfter(t))
    }

    /// Positions at the last key ``<= target``.
    fn seek_for_prev(&mut self, py: Python<'_>, target: &Bound<'_, PyAny>) -> PyResult<()> {
        let t = bytes_of(target)?;
        self.seek_fresh(py, From::AtOrBefore(t))
    }

    /// Moves to the next key (invalid past the last).
    fn next(&mut self, py: Python<'_>) -> PyResult<()> {
        self.step(py, false)
    }

    /// Moves to the previous key (invalid before the first).
    fn prev(&mut self, py: Python<'_>) -> PyResult<()> {
        self.step(py, true)
    }

    /// The current key (``InvalidArgumentError`` unless ``valid()``).
    fn key<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        Ok(PyBytes::new(py, &self.current()?.0))
    }

    /// The current value (``InvalidArgumentError`` unless ``valid()``).
    fn value<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        Ok(PyBytes::new(py, &self.current()?.1))
    }
}

/// The `matrixkv` module.
#[pymodule]
fn matrixkv(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add_class::<PyKeyspace>()?;
    m.add_class::<PyDb>()?;
    m.add_class::<PyWriteBatch>()?;
    m.add_class::<PySnapshot>()?;
    m.add_class::<PyIter>()?;
    m.add_class::<PyRawIter>()?;
    m.add("Error", py.get_type::<Error>())?;
    m.add("CorruptionError", py.get_type::<CorruptionError>())?;
    m.add("StorageError", py.get_type::<StorageError>())?;
    m.add(
        "InvalidArgumentError",
        py.get_type::<InvalidArgumentError>(),
    )?;
    m.add("ClosedError", py.get_type::<ClosedError>())?;
    m.add("ReadOnlyError", py.get_type::<ReadOnlyError>())?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}

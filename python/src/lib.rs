//! The `matrixkv` Python package: a Pythonic face over the engine's public API.
//!
//! Every engine call that may do I/O releases the GIL (`py.allow_threads`). A closed database
//! raises `ClosedError`; iterators fetch entries in batches through a snapshot they own, so
//! they never hold engine state across Python calls and stay valid while other threads write.

use std::sync::{Arc, Mutex};

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

/// Bytes of a key or value: `bytes`, `bytearray`, `memoryview`, or `str` (encoded UTF-8).
fn bytes_of(obj: &Bound<'_, PyAny>) -> PyResult<Vec<u8>> {
    if let Ok(b) = obj.downcast::<PyBytes>() {
        return Ok(b.as_bytes().to_vec());
    }
    if let Ok(b) = obj.downcast::<PyByteArray>() {
        return Ok(b.to_vec());
    }
    if let Ok(s) = obj.downcast::<PyString>() {
        return Ok(s.to_cow()?.as_bytes().to_vec());
    }
    if obj.downcast::<PyMemoryView>().is_ok() {
        let b = obj.call_method0("tobytes")?;
        return Ok(b.downcast::<PyBytes>()?.as_bytes().to_vec());
    }
    Err(PyTypeError::new_err(format!(
        "expected bytes, bytearray, memoryview or str, got {}",
        obj.get_type().name()?
    )))
}

fn opt_bytes(obj: Option<&Bound<'_, PyAny>>) -> PyResult<Option<Vec<u8>>> {
    obj.filter(|o| !o.is_none()).map(bytes_of).transpose()
}

/// The engine handle, shared with iterators and snapshots; `None` once closed.
type Shared = Arc<Mutex<Option<Arc<Db>>>>;

fn live(db: &Shared) -> PyResult<Arc<Db>> {
    db.lock()
        .map_err(|_| Error::new_err("a thread panicked holding the database"))?
        .clone()
        .ok_or_else(|| ClosedError::new_err("the database is closed"))
}

/// A matrixkv database.
///
/// ``DB(path, fast_dir=None, read_only=False, **options)`` opens (creating) the database at
/// ``path`` (slow tier ``<path>/slow``, fast tier ``<path>/fast`` unless ``fast_dir``).
/// Options: ``write_buffer_bytes``, ``container_bytes``, ``block_cache_bytes``,
/// ``merge_operator`` (``"u64add"`` or ``"append"``), ``sync`` (sync every write).
/// Use it as a context manager to close it.
#[pyclass(module = "matrixkv", name = "DB")]
struct PyDb {
    db: Shared,
    sync: bool,
}

#[pymethods]
impl PyDb {
    #[new]
    #[pyo3(signature = (path, fast_dir=None, read_only=false, **options))]
    fn new(
        py: Python<'_>,
        path: std::path::PathBuf,
        fast_dir: Option<std::path::PathBuf>,
        read_only: bool,
        options: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<PyDb> {
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
                        let op: String = v.extract()?;
                        o.merge_operator = Some(match op.as_str() {
                            "u64add" => Arc::new(mkv::U64AddOperator),
                            "append" => Arc::new(mkv::AppendOperator::new(b",")),
                            other => {
                                return Err(PyValueError::new_err(format!(
                                    "unknown merge_operator {other:?} (u64add or append)"
                                )));
                            }
                        });
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
        Ok(PyDb {
            db: Arc::new(Mutex::new(Some(Arc::new(db)))),
            sync,
        })
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
        let db = live(&self.db)?;
        match py.allow_threads(|| db.get(&k)).map_err(to_py)? {
            Some(v) => Ok(PyBytes::new(py, &v).into_any().unbind()),
            None => Ok(default.unwrap_or_else(|| py.None())),
        }
    }

    /// Sets ``key`` to ``value``.
    fn put(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        value: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        let (k, v) = (bytes_of(key)?, bytes_of(value)?);
        let db = live(&self.db)?;
        let wo = WriteOptions { sync: self.sync };
        py.allow_threads(|| db.put_opt(&k, &v, &wo)).map_err(to_py)
    }

    /// Deletes ``key`` (no error if absent).
    fn delete(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<()> {
        let k = bytes_of(key)?;
        let db = live(&self.db)?;
        let wo = WriteOptions { sync: self.sync };
        py.allow_threads(|| db.delete_opt(&k, &wo)).map_err(to_py)
    }

    /// Deletes every key in ``[start, end)``.
    fn delete_range(
        &self,
        py: Python<'_>,
        start: &Bound<'_, PyAny>,
        end: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        let (s, e) = (bytes_of(start)?, bytes_of(end)?);
        let db = live(&self.db)?;
        py.allow_threads(|| db.delete_range(&s, &e)).map_err(to_py)
    }

    /// Merges ``operand`` into ``key`` with the database's merge operator.
    fn merge(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        operand: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        let (k, v) = (bytes_of(key)?, bytes_of(operand)?);
        let db = live(&self.db)?;
        py.allow_threads(|| db.merge(&k, &v)).map_err(to_py)
    }

    fn __getitem__(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<Py<PyBytes>> {
        let k = bytes_of(key)?;
        let db = live(&self.db)?;
        match py.allow_threads(|| db.get(&k)).map_err(to_py)? {
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
        self.put(py, key, value)
    }

    fn __delitem__(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<()> {
        self.delete(py, key)
    }

    fn __contains__(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<bool> {
        let k = bytes_of(key)?;
        let db = live(&self.db)?;
        Ok(py.allow_threads(|| db.get(&k)).map_err(to_py)?.is_some())
    }

    /// A write batch; as a context manager it commits on a clean exit and discards on an
    /// exception.
    fn write_batch(&self) -> PyWriteBatch {
        PyWriteBatch {
            db: Arc::clone(&self.db),
            batch: Mutex::new(Some(WriteBatch::new())),
            sync: self.sync,
        }
    }

    /// A snapshot: reads through it see the database as it is now.
    fn snapshot(&self) -> PyResult<PySnapshot> {
        let db = live(&self.db)?;
        Ok(PySnapshot {
            db: Arc::clone(&self.db),
            snap: Mutex::new(Some(db.snapshot())),
        })
    }

    /// ``(key, value)`` pairs with ``start <= key < end``, in key order (reversed with
    /// ``reverse=True``).
    #[pyo3(signature = (start=None, end=None, reverse=false))]
    fn items(
        &self,
        start: Option<&Bound<'_, PyAny>>,
        end: Option<&Bound<'_, PyAny>>,
        reverse: bool,
    ) -> PyResult<PyIter> {
        PyIter::new(
            &self.db,
            None,
            opt_bytes(start)?,
            opt_bytes(end)?,
            reverse,
            Yield::Items,
        )
    }

    /// The keys, as :meth:`items` orders them.
    #[pyo3(signature = (start=None, end=None, reverse=false))]
    fn keys(
        &self,
        start: Option<&Bound<'_, PyAny>>,
        end: Option<&Bound<'_, PyAny>>,
        reverse: bool,
    ) -> PyResult<PyIter> {
        PyIter::new(
            &self.db,
            None,
            opt_bytes(start)?,
            opt_bytes(end)?,
            reverse,
            Yield::Keys,
        )
    }

    /// The values, as :meth:`items` orders them.
    #[pyo3(signature = (start=None, end=None, reverse=false))]
    fn values(
        &self,
        start: Option<&Bound<'_, PyAny>>,
        end: Option<&Bound<'_, PyAny>>,
        reverse: bool,
    ) -> PyResult<PyIter> {
        PyIter::new(
            &self.db,
            None,
            opt_bytes(start)?,
            opt_bytes(end)?,
            reverse,
            Yield::Values,
        )
    }

    fn __iter__(&self) -> PyResult<PyIter> {
        PyIter::new(&self.db, None, None, None, false, Yield::Keys)
    }

    /// Writes an openable copy of the database to ``path`` (a checkpoint).
    fn checkpoint(&self, py: Python<'_>, path: std::path::PathBuf) -> PyResult<()> {
        let db = live(&self.db)?;
        py.allow_threads(|| db.checkpoint(&path))
            .map(|_| ())
            .map_err(to_py)
    }

    /// Makes every write acknowledged so far durable (survive a power loss), as a sync write
    /// would (RocksDB's ``SyncWAL``).
    fn sync_wal(&self, py: Python<'_>) -> PyResult<()> {
        let db = live(&self.db)?;
        py.allow_threads(|| db.sync_wal()).map_err(to_py)
    }

    /// Flushes the memtables.
    fn flush(&self, py: Python<'_>) -> PyResult<()> {
        let db = live(&self.db)?;
        py.allow_threads(|| db.flush()).map_err(to_py)
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
        let db = live(&self.db)?;
        py.allow_threads(|| db.compact_range(s.as_deref(), e.as_deref()))
            .map_err(to_py)
    }

    /// The engine's statistics as a dict of numbers.
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let db = live(&self.db)?;
        let s = db.stats();
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
        for name in mkv::PROPERTY_NAMES {
            if let Ok(v) = db.get_int_property(name) {
                d.set_item(*name, v)?;
            }
        }
        Ok(d)
    }

    /// A RocksDB-named property (``matrixkv.levelstats``, ...), as text.
    fn property(&self, name: &str) -> PyResult<String> {
        live(&self.db)?.get_property(name).map_err(to_py)
    }

    /// Closes the database (later calls raise ClosedError). Safe to call twice.
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        let taken = self
            .db
            .lock()
            .map_err(|_| Error::new_err("a thread panicked holding the database"))?
            .take();
        if let Some(db) = taken {
            // Iterators and snapshots hold their own references; the engine closes when the
            // last goes (Drop), or here if this is the last.
            if let Ok(db) = Arc::try_unwrap(db) {
                py.allow_threads(|| db.close()).map_err(to_py)?;
            }
        }
        Ok(())
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    #[pyo3(signature = (*_exc))]
    fn __exit__(&self, py: Python<'_>, _exc: &Bound<'_, pyo3::types::PyTuple>) -> PyResult<bool> {
        self.close(py)?;
        Ok(false)
    }
}

/// An atomic group of writes (``db.write_batch()``).
#[pyclass(module = "matrixkv", name = "WriteBatch")]
struct PyWriteBatch {
    db: Shared,
    batch: Mutex<Option<WriteBatch>>,
    sync: bool,
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
    fn put(&self, key: &Bound<'_, PyAny>, value: &Bound<'_, PyAny>) -> PyResult<()> {
        let (k, v) = (bytes_of(key)?, bytes_of(value)?);
        self.with(|b| b.put(&k, &v))
    }

    /// Adds a delete.
    fn delete(&self, key: &Bound<'_, PyAny>) -> PyResult<()> {
        let k = bytes_of(key)?;
        self.with(|b| b.delete(&k))
    }

    /// Adds a merge.
    fn merge(&self, key: &Bound<'_, PyAny>, operand: &Bound<'_, PyAny>) -> PyResult<()> {
        let (k, v) = (bytes_of(key)?, bytes_of(operand)?);
        self.with(|b| b.merge(&k, &v))
    }

    /// Applies every write atomically.
    fn write(&self, py: Python<'_>) -> PyResult<()> {
        let batch = self
            .batch
            .lock()
            .map_err(|_| Error::new_err("a thread panicked holding the batch"))?
            .take()
            .ok_or_else(|| Error::new_err("the batch was already written or discarded"))?;
        let db = live(&self.db)?;
        let wo = WriteOptions { sync: self.sync };
        py.allow_threads(|| db.write_opt(batch, &wo)).map_err(to_py)
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

    #[pyo3(signature = (exc_type=None, _exc=None, _tb=None))]
    fn __exit__(
        &self,
        py: Python<'_>,
        exc_type: Option<&Bound<'_, PyAny>>,
        _exc: Option<&Bound<'_, PyAny>>,
        _tb: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<bool> {
        if exc_type.is_some_and(|t| !t.is_none()) {
            self.discard()?;
        } else {
            self.write(py)?;
        }
        Ok(false)
    }
}

/// A consistent view (``db.snapshot()``); a context manager that releases it on exit.
#[pyclass(module = "matrixkv", name = "Snapshot")]
struct PySnapshot {
    db: Shared,
    snap: Mutex<Option<mkv::Snapshot>>,
}

impl PySnapshot {
    fn read_options(&self) -> PyResult<ReadOptions> {
        self.snap
            .lock()
            .map_err(|_| Error::new_err("a thread panicked holding the snapshot"))?
            .as_ref()
            .map(mkv::Snapshot::read_options)
            .ok_or_else(|| ClosedError::new_err("the snapshot was released"))
    }
}

#[pymethods]
impl PySnapshot {
    /// The value of ``key`` as of the snapshot, or ``default``.
    #[pyo3(signature = (key, default=None))]
    fn get(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        default: Option<PyObject>,
    ) -> PyResult<PyObject> {
        let k = bytes_of(key)?;
        let ro = self.read_options()?;
        let db = live(&self.db)?;
        match py.allow_threads(|| db.get_opt(&k, &ro)).map_err(to_py)? {
            Some(v) => Ok(PyBytes::new(py, &v).into_any().unbind()),
            None => Ok(default.unwrap_or_else(|| py.None())),
        }
    }

    /// ``(key, value)`` pairs as of the snapshot (see ``DB.items``).
    #[pyo3(signature = (start=None, end=None, reverse=false))]
    fn items(
        &self,
        start: Option<&Bound<'_, PyAny>>,
        end: Option<&Bound<'_, PyAny>>,
        reverse: bool,
    ) -> PyResult<PyIter> {
        let ro = self.read_options()?;
        PyIter::new(
            &self.db,
            ro.snapshot,
            opt_bytes(start)?,
            opt_bytes(end)?,
            reverse,
            Yield::Items,
        )
    }

    /// Releases the snapshot.
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

/// An iterator over a key range; it reads ahead in batches through its own snapshot.
#[pyclass(module = "matrixkv", name = "Iterator")]
struct PyIter {
    db: Shared,
    snapshot: Option<mkv::Snapshot>,
    seq: Option<mkv::SeqNo>,
    lower: Option<Vec<u8>>,
    upper: Option<Vec<u8>>,
    reverse: bool,
    what: Yield,
    /// The next batch, in the order to yield.
    ahead: std::collections::VecDeque<(Vec<u8>, Vec<u8>)>,
    /// Where the next batch starts (exclusive of the last key yielded).
    resume: Option<Vec<u8>>,
    done: bool,
}

const BATCH: usize = 256;

impl PyIter {
    fn new(
        db: &Shared,
        seq: Option<mkv::SeqNo>,
        lower: Option<Vec<u8>>,
        upper: Option<Vec<u8>>,
        reverse: bool,
        what: Yield,
    ) -> PyResult<PyIter> {
        let d = live(db)?;
        // A snapshot of its own unless one is given, so every batch reads one view.
        let snapshot = seq.is_none().then(|| d.snapshot());
        let seq = seq.or_else(|| snapshot.as_ref().map(mkv::Snapshot::sequence));
        Ok(PyIter {
            db: Arc::clone(db),
            snapshot,
            seq,
            lower,
            upper,
            reverse,
            what,
            ahead: std::collections::VecDeque::new(),
            resume: None,
            done: false,
        })
    }

    fn fill(&mut self, py: Python<'_>) -> PyResult<()> {
        let db = live(&self.db)?;
        let ro = ReadOptions {
            snapshot: self.seq,
            lower_bound: self.lower.clone(),
            upper_bound: self.upper.clone(),
        };
        let (reverse, resume) = (self.reverse, self.resume.clone());
        let batch = py
            .allow_threads(move || -> mkv::Result<Vec<(Vec<u8>, Vec<u8>)>> {
                let mut it = db.iter_opt(&ro)?;
                match (&resume, reverse) {
                    (None, false) => it.seek_to_first()?,
                    (None, true) => it.seek_to_last()?,
                    (Some(k), false) => {
                        it.seek(k)?;
                        if it.valid() && it.key() == k.as_slice() {
                            it.next()?;
                        }
                    }
                    (Some(k), true) => {
                        it.seek_for_prev(k)?;
                        if it.valid() && it.key() == k.as_slice() {
                            it.prev()?;
                        }
                    }
                }
                let mut out = Vec::with_capacity(BATCH);
                while it.valid() && out.len() < BATCH {
                    out.push((it.key().to_vec(), it.value().to_vec()));
                    if reverse {
                        it.prev()?;
                    } else {
                        it.next()?;
                    }
                }
                Ok(out)
            })
            .map_err(to_py)?;
        if batch.len() < BATCH {
            self.done = true;
        }
        self.resume = batch.last().map(|(k, _)| k.clone()).or(self.resume.take());
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
        if self.ahead.is_empty() && !self.done {
            self.fill(py)?;
        }
        let Some((k, v)) = self.ahead.pop_front() else {
            self.snapshot = None;
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

/// The `matrixkv` module.
#[pymodule]
fn matrixkv(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add_class::<PyDb>()?;
    m.add_class::<PyWriteBatch>()?;
    m.add_class::<PySnapshot>()?;
    m.add_class::<PyIter>()?;
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

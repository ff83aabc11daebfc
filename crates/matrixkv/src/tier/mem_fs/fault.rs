//! Fault injection for [`MemFs`]: which operations fail ([`FaultOp`], [`Fault`])
//! and how ([`FaultKind`]).
//!
//! Used only by `mem_fs`, under its state mutex (so nothing here needs to be thread-safe on its
//! own); the types are re-exported for tests that build faults.

use std::path::Path;

use crate::error::IoOp;
#[cfg(doc)]
use crate::{
    error::Error,
    tier::{FileSystem, MemFs, RandomAccessFile, WritableFile},
};

const EIO: i32 = 5;
const ENOSPC: i32 = 28;
const EDQUOT: i32 = 122;

/// A kind of file-system operation, for [`Fault`] matching and [`MemFs::op_count`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FaultOp {
    /// [`FileSystem::create_dir_all`].
    CreateDir,
    /// [`FileSystem::create`].
    Create,
    /// [`FileSystem::open`] (also the open inside [`FileSystem::read_all`]).
    Open,
    /// [`RandomAccessFile::read_exact_at`].
    Read,
    /// [`WritableFile::append`].
    Write,
    /// [`WritableFile::sync`].
    Sync,
    /// [`FileSystem::rename`]; a path filter matches either the source or the target.
    Rename,
    /// [`FileSystem::remove`].
    Remove,
    /// [`FileSystem::list`].
    List,
    /// [`FileSystem::exists`].
    Exists,
    /// [`FileSystem::sync_dir`].
    SyncDir,
    /// [`FileSystem::lock`].
    Lock,
    /// Any of the above (a matcher; [`MemFs::op_count`] of `Any` is the total).
    Any,
}

impl FaultOp {
    /// Every concrete operation (not [`FaultOp::Any`]).
    pub const CONCRETE: [FaultOp; 12] = [
        FaultOp::CreateDir,
        FaultOp::Create,
        FaultOp::Open,
        FaultOp::Read,
        FaultOp::Write,
        FaultOp::Sync,
        FaultOp::Rename,
        FaultOp::Remove,
        FaultOp::List,
        FaultOp::Exists,
        FaultOp::SyncDir,
        FaultOp::Lock,
    ];

    pub(super) fn index(self) -> usize {
        FaultOp::CONCRETE
            .iter()
            .position(|&o| o == self)
            .unwrap_or(FaultOp::CONCRETE.len())
    }

    fn matches_op(self, op: FaultOp) -> bool {
        self == FaultOp::Any || self == op
    }

    pub(super) fn io_op(self) -> IoOp {
        match self {
            FaultOp::CreateDir | FaultOp::Create | FaultOp::Open | FaultOp::Exists => IoOp::Open,
            FaultOp::Read => IoOp::Read,
            FaultOp::Write => IoOp::Write,
            FaultOp::Sync | FaultOp::SyncDir => IoOp::Sync,
            FaultOp::Rename => IoOp::Rename,
            FaultOp::Remove => IoOp::Remove,
            FaultOp::List => IoOp::List,
            FaultOp::Lock | FaultOp::Any => IoOp::Lock,
        }
    }
}

/// What an injected fault does to the operation it hits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FaultKind {
    /// Fails with EIO (raw os error 5); nothing changes.
    Eio,
    /// Fails with ENOSPC (28); nothing changes; [`Error::is_no_space`] is true.
    NoSpace,
    /// Fails with EDQUOT (122); nothing changes; [`Error::is_no_space`] is true.
    QuotaExceeded,
    /// On [`FaultOp::Write`]: the first half of the data is appended, then the call fails with
    /// EIO. On other operations it acts as [`FaultKind::Eio`].
    ShortWrite,
    /// On [`FaultOp::Read`]: the read succeeds but the last byte of the buffer is flipped
    /// (silent corruption; the stored file is unchanged). On other operations it acts as
    /// [`FaultKind::Eio`].
    CorruptRead,
}

impl FaultKind {
    pub(super) fn raw_os_error(self) -> i32 {
        match self {
            FaultKind::NoSpace => ENOSPC,
            FaultKind::QuotaExceeded => EDQUOT,
            FaultKind::Eio | FaultKind::ShortWrite | FaultKind::CorruptRead => EIO,
        }
    }
}

/// An injected failure: which operations it matches and when it fires.
///
/// Each fault counts the operations it matches; the first `after` of them succeed, then the
/// next `times` (or all, if `None`) fail with `kind`. When several faults match one operation,
/// all count it and the first eligible one (in injection order) fires.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fault {
    /// Operations to match.
    pub op: FaultOp,
    /// Only operations on a path whose text contains this substring (`None`: every path).
    pub path_contains: Option<String>,
    /// Only operations called from the thread of this name (`None`: every thread). The engine's
    /// background threads are named (`matrixkv:flush`, `matrixkv:compact`), so a fault can aim
    /// at the n-th operation of one job whatever the other threads do meanwhile.
    pub thread: Option<String>,
    /// Matching operations that succeed before the fault starts firing.
    pub after: u64,
    /// How many matching operations fail once firing; `None` means forever.
    pub times: Option<u64>,
    /// What the failure looks like.
    pub kind: FaultKind,
}

impl Fault {
    /// A fault that fails every `op`, on every path, with `kind`, starting now.
    pub fn new(op: FaultOp, kind: FaultKind) -> Self {
        Fault {
            op,
            path_contains: None,
            thread: None,
            after: 0,
            times: None,
            kind,
        }
    }

    /// Restricts the fault to paths containing `fragment`.
    #[must_use]
    pub fn on_path(mut self, fragment: impl Into<String>) -> Self {
        self.path_contains = Some(fragment.into());
        self
    }

    /// Restricts the fault to operations called from the thread named `name`.
    #[must_use]
    pub fn on_thread(mut self, name: impl Into<String>) -> Self {
        self.thread = Some(name.into());
        self
    }

    /// Lets `n` matching operations succeed first.
    #[must_use]
    pub fn after(mut self, n: u64) -> Self {
        self.after = n;
        self
    }

    /// Fails only `n` matching operations, then stops.
    #[must_use]
    pub fn times(mut self, n: u64) -> Self {
        self.times = Some(n);
        self
    }

    pub(super) fn matches(&self, op: FaultOp, paths: &[&Path]) -> bool {
        self.op.matches_op(op)
            && match &self.path_contains {
                None => true,
                Some(frag) => paths
                    .iter()
                    .any(|p| p.to_string_lossy().contains(frag.as_str())),
            }
            && match &self.thread {
                None => true,
                Some(name) => std::thread::current().name() == Some(name.as_str()),
            }
    }
}

#[derive(Debug)]
pub(super) struct ActiveFault {
    pub(super) fault: Fault,
    /// Matching operations seen so far.
    pub(super) seen: u64,
    /// Operations this fault has failed.
    pub(super) fired: u64,
}

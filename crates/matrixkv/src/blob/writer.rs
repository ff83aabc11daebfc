//! [`BlobWriter`]: appends value records to one new blob file (format in `super`).
//!
//! Called by compaction when it writes L1+ tables. `finish` writes the footer and syncs the
//! file; the caller syncs the directory and logs the file in the manifest edit that also adds
//! the tables pointing into it. A file that never reaches the manifest is an orphan that
//! obsolete-file deletion removes.
//!
//! Thread safety: used by one thread at a time (`Send`).

use super::{BlobPointer, encode_footer, encode_header, record_len, record_prefix};
use crate::error::Result;
use crate::layout::FileNum;
use crate::tier::WritableFile;

/// What a finished blob file holds, for the manifest.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlobSummary {
    /// The file's number.
    pub number: FileNum,
    /// Number of records.
    pub records: u64,
    /// Bytes of all records (the file minus header and footer).
    pub record_bytes: u64,
    /// Size of the file.
    pub file_bytes: u64,
}

/// Writes one blob file.
pub struct BlobWriter {
    number: FileNum,
    file: Box<dyn WritableFile>,
    offset: u64,
    records: u64,
    record_bytes: u64,
    /// The prefix of the record being added (reused).
    prefix: Vec<u8>,
}

impl BlobWriter {
    /// Starts blob file `number` in `file` (newly created) by writing its header.
    pub fn new(number: FileNum, file: Box<dyn WritableFile>) -> Result<BlobWriter> {
        let mut w = BlobWriter {
            number,
            file,
            offset: 0,
            records: 0,
            record_bytes: 0,
            prefix: Vec::with_capacity(24),
        };
        let header = encode_header(number);
        w.file.append(&header)?;
        w.offset = header.len() as u64;
        Ok(w)
    }

    /// The file's number.
    pub fn number(&self) -> FileNum {
        self.number
    }

    /// Bytes written so far (header and records).
    pub fn len(&self) -> u64 {
        self.offset
    }

    /// Bytes of the records appended so far.
    pub fn record_bytes(&self) -> u64 {
        self.record_bytes
    }

    /// Appends the record `(user_key, value)` and returns where it is.
    pub fn add(&mut self, user_key: &[u8], value: &[u8]) -> Result<BlobPointer> {
        record_prefix(user_key, value, &mut self.prefix);
        self.file.append(&self.prefix)?;
        self.file.append(user_key)?;
        self.file.append(value)?;
        let len = record_len(user_key.len(), value.len());
        debug_assert_eq!(
            len,
            (self.prefix.len() + user_key.len() + value.len()) as u64
        );
        let p = BlobPointer {
            file: self.number,
            offset: self.offset,
            len,
        };
        self.offset += len;
        self.records += 1;
        self.record_bytes += len;
        Ok(p)
    }

    /// Hands the records appended so far to the kernel (`Options::separate_at_write`: a
    /// process crash keeps them, readers see them).
    pub fn flush(&mut self) -> Result<()> {
        self.file.flush()
    }

    /// Makes the records appended so far durable, without finishing the file (a sync write
    /// after writes whose values went here): a mapped file stays mapped
    /// (`WritableFile::sync_appended`).
    pub fn sync(&mut self) -> Result<()> {
        self.file.sync_appended()
    }

    /// Writes the footer and syncs the file.
    pub fn finish(mut self) -> Result<BlobSummary> {
        let footer = encode_footer(self.records, self.record_bytes);
        self.file.append(&footer)?;
        self.offset += footer.len() as u64;
        self.file.sync()?;
        Ok(BlobSummary {
            number: self.number,
            records: self.records,
            record_bytes: self.record_bytes,
            file_bytes: self.offset,
        })
    }
}

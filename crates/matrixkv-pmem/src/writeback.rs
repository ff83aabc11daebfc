//! Starting the kernel's writeback of a file range without waiting for it.

use std::fs::File;
use std::io;

/// Asks the kernel to start writing back the dirty pages of `file` in `offset..offset + len`
/// and returns without waiting for the device (Linux `sync_file_range` with
/// `SYNC_FILE_RANGE_WRITE`; RocksDB's `bytes_per_sync` uses the same call). It makes nothing
/// durable: file metadata and the device cache still need `fdatasync`. Elsewhere it does
/// nothing.
pub fn start_writeback(file: &File, offset: u64, len: u64) -> io::Result<()> {
    #[cfg(target_os = "linux")]
    {
        use std::os::fd::AsRawFd;
        let offset = libc::off64_t::try_from(offset)
            .map_err(|_| io::Error::other("writeback offset out of range"))?;
        let len = libc::off64_t::try_from(len)
            .map_err(|_| io::Error::other("writeback length out of range"))?;
        // SAFETY: sync_file_range reads no memory of ours; the descriptor is borrowed from a
        // live `File` for the duration of the call.
        let rc = unsafe {
            libc::sync_file_range(file.as_raw_fd(), offset, len, libc::SYNC_FILE_RANGE_WRITE)
        };
        if rc != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = (file, offset, len);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn writeback_of_written_bytes_succeeds_and_leaves_them_readable() {
        let dir = std::env::temp_dir().join(format!("mkv-writeback-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("f");
        let mut f = File::create(&path).unwrap();
        f.write_all(&[7u8; 1 << 16]).unwrap();
        start_writeback(&f, 0, 1 << 16).unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), vec![7u8; 1 << 16]);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

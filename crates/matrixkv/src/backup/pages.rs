//! `CONTAINER.pages`: the live pages of a matrix container, exported for a backup (a backup
//! directory holds files, and a container file is `container_bytes` long however little of it
//! is live). Format in `docs/format/backup.md`; a restore turns it back into a `CONTAINER`
//! region with every page at its offset.
#![deny(clippy::indexing_slicing)]

use std::path::Path;

use crate::checksum;
use crate::coding::{self, Decoder};
use crate::error::{ArtifactKind, CorruptionReason, CorruptionSite, Error, IoOp, Result};
use crate::tier::{FileSystem, RandomAccessFile, Region};

/// Magic of a pages file.
// FORMAT: never change; see docs/format/backup.md
const MAGIC: &[u8; 8] = b"mxkv-pgs";
/// Format version written.
// FORMAT: never change; see docs/format/backup.md
const VERSION: u32 = 1;
/// Header bytes: magic, version, page_bytes, container_bytes, runs, header checksum.
// FORMAT: never change; see docs/format/backup.md
const HEADER_LEN: usize = 32;
/// Bytes before a run's pages: first page, page count, checksum of the pages, zero.
// FORMAT: never change; see docs/format/backup.md
const RUN_HEADER_LEN: usize = 16;
/// Most pages in one run (bounds the buffer a reader allocates).
const MAX_RUN_PAGES: usize = 256;

/// Writes the pages `pages` of `region` (pages of `page_bytes`) to `path` on `fs` and syncs it.
/// Returns the file's length.
pub(crate) fn write(
    fs: &dyn FileSystem,
    path: &Path,
    region: &dyn Region,
    page_bytes: usize,
    mut pages: Vec<u32>,
) -> Result<u64> {
    pages.sort_unstable();
    pages.dedup();
    let runs = runs_of(&pages);
    let mut out = fs.create(path)?;
    let mut header = Vec::with_capacity(HEADER_LEN);
    header.extend_from_slice(MAGIC);
    coding::put_u32(&mut header, VERSION);
    coding::put_u32(&mut header, u32::try_from(page_bytes).unwrap_or(u32::MAX));
    coding::put_u64(&mut header, region.len() as u64);
    coding::put_u32(&mut header, u32::try_from(runs.len()).unwrap_or(u32::MAX));
    let crc = checksum::checksum(&header);
    coding::put_u32(&mut header, crc);
    out.append(&header)?;
    let io = |e: std::io::Error| Error::io(IoOp::Read, path, e);
    let mut buf = Vec::new();
    for (first, count) in runs {
        buf.resize(count as usize * page_bytes, 0);
        region
            .read(first as usize * page_bytes, &mut buf)
            .map_err(io)?;
        let mut h = Vec::with_capacity(RUN_HEADER_LEN);
        coding::put_u32(&mut h, first);
        coding::put_u32(&mut h, count);
        coding::put_u32(&mut h, checksum::checksum(&buf));
        coding::put_u32(&mut h, 0);
        out.append(&h)?;
        out.append(&buf)?;
    }
    out.sync()?;
    Ok(out.len())
}

/// Consecutive pages grouped into runs `(first, count)` of at most `MAX_RUN_PAGES`.
fn runs_of(sorted: &[u32]) -> Vec<(u32, u32)> {
    let mut runs: Vec<(u32, u32)> = Vec::new();
    for &p in sorted {
        match runs.last_mut() {
            Some((first, count)) if *first + *count == p && (*count as usize) < MAX_RUN_PAGES => {
                *count += 1;
            }
            _ => runs.push((p, 1)),
        }
    }
    runs
}

/// What a pages file says about the container it came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Header {
    pub page_bytes: usize,
    pub container_bytes: u64,
    pub runs: u32,
}

/// Reads the header of the pages file `file` (at `path`, for errors).
pub(crate) fn read_header(file: &dyn RandomAccessFile, path: &Path) -> Result<Header> {
    let site = |off: u64| CorruptionSite::new(ArtifactKind::Backup, path, off);
    let mut h = [0u8; HEADER_LEN];
    if file.len() < HEADER_LEN as u64 {
        return Err(Error::corruption(site(0), CorruptionReason::Truncated));
    }
    file.read_exact_at(0, &mut h)?;
    let mut d = Decoder::new(&h);
    let magic = d
        .bytes(MAGIC.len())
        .map_err(|r| Error::corruption(site(0), r))?;
    if magic != MAGIC {
        return Err(Error::corruption(site(0), CorruptionReason::BadMagic));
    }
    let fields = (|| -> std::result::Result<_, CorruptionReason> {
        Ok((d.u32()?, d.u32()?, d.u64()?, d.u32()?, d.u32()?))
    })();
    let (version, page_bytes, container_bytes, runs, crc) =
        fields.map_err(|r| Error::corruption(site(0), r))?;
    checksum::verify(crc, h.get(..HEADER_LEN - 4).unwrap_or_default())
        .map_err(|r| Error::corruption(site(0), r))?;
    if version != VERSION {
        return Err(Error::NotSupported {
            what: "container pages file",
            found_version: version,
        });
    }
    if page_bytes == 0 || container_bytes % u64::from(page_bytes) != 0 {
        return Err(Error::corruption(
            site(0),
            CorruptionReason::Invalid("page_bytes does not divide container_bytes"),
        ));
    }
    Ok(Header {
        page_bytes: page_bytes as usize,
        container_bytes,
        runs,
    })
}

/// Writes every run of the pages file `file` into `region` (a fresh container of the
/// header's size) at its offset, checking each run, then persists the region. Returns the
/// number of pages written.
pub(crate) fn restore(
    file: &dyn RandomAccessFile,
    path: &Path,
    region: &dyn Region,
) -> Result<u64> {
    let h = read_header(file, path)?;
    let site = |off: u64| CorruptionSite::new(ArtifactKind::Backup, path, off);
    if region.len() as u64 != h.container_bytes {
        return Err(Error::invalid(format!(
            "the container region is {} bytes, the pages file is of a {}-byte container",
            region.len(),
            h.container_bytes
        )));
    }
    let total_pages = h.container_bytes / h.page_bytes as u64;
    let mut off = HEADER_LEN as u64;
    let mut pages = 0u64;
    let mut buf = Vec::new();
    for _ in 0..h.runs {
        let mut rh = [0u8; RUN_HEADER_LEN];
        if off + RUN_HEADER_LEN as u64 > file.len() {
            return Err(Error::corruption(site(off), CorruptionReason::Truncated));
        }
        file.read_exact_at(off, &mut rh)?;
        let mut d = Decoder::new(&rh);
        let fields = (|| -> std::result::Result<_, CorruptionReason> {
            Ok((d.u32()?, d.u32()?, d.u32()?))
        })();
        let (first, count, crc) = fields.map_err(|r| Error::corruption(site(off), r))?;
        if count == 0
            || count as usize > MAX_RUN_PAGES
            || u64::from(first) + u64::from(count) > total_pages
        {
            return Err(Error::corruption(
                site(off),
                CorruptionReason::Invalid("a run lies outside the container"),
            ));
        }
        off += RUN_HEADER_LEN as u64;
        let len = count as usize * h.page_bytes;
        if off + len as u64 > file.len() {
            return Err(Error::corruption(site(off), CorruptionReason::Truncated));
        }
        buf.resize(len, 0);
        file.read_exact_at(off, &mut buf)?;
        checksum::verify(crc, &buf).map_err(|r| Error::corruption(site(off), r))?;
        let at = first as usize * h.page_bytes;
        let io = |e: std::io::Error| Error::io(IoOp::Write, path, e);
        region.write(at, &buf).map_err(io)?;
        region.persist(at, len).map_err(io)?;
        off += len as u64;
        pages += u64::from(count);
    }
    if off != file.len() {
        return Err(Error::corruption(
            site(off),
            CorruptionReason::Invalid("bytes after the last run"),
        ));
    }
    Ok(pages)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::tier::{FileSystem, MemFs};
    use crate::wal::mem_region::MemRegion;

    fn container(pages: usize, page_bytes: usize) -> MemRegion {
        let r = MemRegion::new(pages * page_bytes);
        for p in 0..pages {
            r.write(p * page_bytes, &vec![p as u8 + 1; page_bytes])
                .unwrap();
        }
        r
    }

    #[test]
    fn live_pages_round_trip_into_a_fresh_container() {
        let fs = MemFs::new();
        let src = container(16, 64);
        let path = Path::new("/b/CONTAINER.pages");
        fs.create_dir_all(Path::new("/b")).unwrap();
        let live = vec![9, 1, 2, 3, 15, 2];
        let len = write(&fs, path, &src, 64, live).unwrap();
        // Header, runs (1-3), (9), (15), 5 pages.
        assert_eq!(len, 32 + 3 * 16 + 5 * 64);
        let file = fs.open(path).unwrap();
        let dst = Arc::new(MemRegion::new(16 * 64));
        assert_eq!(restore(file.as_ref(), path, dst.as_ref()).unwrap(), 5);
        for p in 0..16usize {
            let mut b = vec![0u8; 64];
            dst.read(p * 64, &mut b).unwrap();
            let want = if [1, 2, 3, 9, 15].contains(&p) {
                p as u8 + 1
            } else {
                0
            };
            assert!(b.iter().all(|&x| x == want), "page {p}");
        }
    }

    #[test]
    fn a_damaged_pages_file_is_an_error_naming_it() {
        let fs = MemFs::new();
        fs.create_dir_all(Path::new("/b")).unwrap();
        let src = container(8, 64);
        let path = Path::new("/b/CONTAINER.pages");
        write(&fs, path, &src, 64, vec![0, 5]).unwrap();
        let good = fs.read_all(path).unwrap();
        for at in [0, 20, 40, 60, good.len() - 1] {
            let mut bad = good.clone();
            bad[at] ^= 0x40;
            let p = Path::new("/b/bad.pages");
            let mut f = fs.create(p).unwrap();
            f.append(&bad).unwrap();
            f.sync().unwrap();
            let dst = MemRegion::new(8 * 64);
            let e = restore(fs.open(p).unwrap().as_ref(), p, &dst).expect_err("damaged");
            assert!(e.to_string().contains("bad.pages"), "{e}");
        }
        let p = Path::new("/b/short.pages");
        let mut f = fs.create(p).unwrap();
        f.append(&good[..good.len() - 10]).unwrap();
        f.sync().unwrap();
        let dst = MemRegion::new(8 * 64);
        assert!(restore(fs.open(p).unwrap().as_ref(), p, &dst).is_err());
    }

    #[test]
    fn golden_pages_file_matches_the_format_doc() {
        let doc = include_str!("../../../../docs/format/backup.md");
        let golden = crate::golden::hex_blocks(doc).remove(0);
        let fs = MemFs::new();
        fs.create_dir_all(Path::new("/b")).unwrap();
        let src = MemRegion::new(4 * 8);
        src.write(8, b"ROW-PAGE").unwrap();
        let path = Path::new("/b/CONTAINER.pages");
        write(&fs, path, &src, 8, vec![1]).unwrap();
        let got = fs.read_all(path).unwrap();
        let dump: Vec<String> = got.iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(
            got,
            golden,
            "docs/format/backup.md is out of date: {}",
            dump.join(" ")
        );
    }
}

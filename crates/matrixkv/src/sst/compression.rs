//! Block compression of SSTables: the [`Compression`] choice and the codec for one block.
//!
//! The builder compresses every data block with a [`BlockCompressor`]; the reader calls
//! [`decompress_block`] after the block's checksum was verified. A compressed block is
//! `varint(uncompressed_len) ++ codec output`. The declared length is checked against
//! [`MAX_UNCOMPRESSED_BLOCK_BYTES`] (and, for LZ4, against the codec's maximum ratio) *before*
//! any buffer is allocated, and the decompressed length must equal the declared one.
//! See docs/format/sst.md, section "Compression".
//!
//! Thread safety: pure functions over their arguments.
#![deny(clippy::indexing_slicing)]

use std::fmt;
use std::str::FromStr;

use crate::coding::{Decoder, put_varint64};
use crate::error::{CorruptionReason, Error};

use super::format::{
    BLOCK_TYPE_LZ4, BLOCK_TYPE_NONE, BLOCK_TYPE_ZSTD, MAX_UNCOMPRESSED_BLOCK_BYTES,
};

/// The zstd level used for SSTable blocks (a balance of speed and ratio; not part of the format).
#[cfg(feature = "zstd")]
const ZSTD_LEVEL: i32 = 3;

/// How the data blocks of an SSTable are compressed. The default is no compression.
///
/// Parsed from and displayed as `"none"`, `"lz4"` or `"zstd"` (for options and the CLI).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Compression {
    /// Blocks are stored as they are.
    #[default]
    None,
    /// LZ4 block format (`lz4_flex`), fast with a moderate ratio.
    Lz4,
    /// Zstandard, a better ratio at more CPU; needs the `zstd` feature.
    Zstd,
}

impl Compression {
    /// The block-type byte written in a block trailer for a block compressed this way.
    pub(crate) fn block_type(self) -> u8 {
        match self {
            Compression::None => BLOCK_TYPE_NONE,
            Compression::Lz4 => BLOCK_TYPE_LZ4,
            Compression::Zstd => BLOCK_TYPE_ZSTD,
        }
    }

    /// The compression a block-type byte denotes.
    pub(crate) fn from_block_type(t: u8) -> Result<Compression, CorruptionReason> {
        match t {
            BLOCK_TYPE_NONE => Ok(Compression::None),
            BLOCK_TYPE_LZ4 => Ok(Compression::Lz4),
            BLOCK_TYPE_ZSTD => Ok(Compression::Zstd),
            other => Err(CorruptionReason::UnknownType(other)),
        }
    }

    /// True if this build can compress and decompress with this codec.
    pub fn is_supported(self) -> bool {
        match self {
            Compression::None | Compression::Lz4 => true,
            Compression::Zstd => cfg!(feature = "zstd"),
        }
    }

    /// The lower-case name (`"none"`, `"lz4"`, `"zstd"`).
    pub fn name(self) -> &'static str {
        match self {
            Compression::None => "none",
            Compression::Lz4 => "lz4",
            Compression::Zstd => "zstd",
        }
    }
}

impl fmt::Display for Compression {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Compression {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.to_ascii_lowercase().as_str() {
            "none" => Ok(Compression::None),
            "lz4" => Ok(Compression::Lz4),
            "zstd" => Ok(Compression::Zstd),
            _ => Err(Error::invalid(format!(
                "unknown compression `{s}` (expected none, lz4 or zstd)"
            ))),
        }
    }
}

/// Compresses blocks for one builder, reusing its codec context and scratch buffer (a zstd
/// context costs hundreds of KiB to set up, far too much per 4 KiB block).
pub(crate) struct BlockCompressor {
    codec: Compression,
    #[cfg(feature = "zstd")]
    zstd: Option<zstd::bulk::Compressor<'static>>,
    #[cfg(feature = "zstd")]
    scratch: Vec<u8>,
}

impl fmt::Debug for BlockCompressor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BlockCompressor")
            .field("codec", &self.codec)
            .finish_non_exhaustive()
    }
}

impl BlockCompressor {
    /// A compressor for `codec`.
    pub(crate) fn new(codec: Compression) -> BlockCompressor {
        BlockCompressor {
            codec,
            #[cfg(feature = "zstd")]
            zstd: None,
            #[cfg(feature = "zstd")]
            scratch: Vec::new(),
        }
    }

    /// The codec this compressor applies.
    pub(crate) fn codec(&self) -> Compression {
        self.codec
    }

    /// Applies `codec` to the next blocks (each block records its own codec).
    pub(crate) fn set_codec(&mut self, codec: Compression) {
        self.codec = codec;
    }

    /// Compresses `raw` into `out` (cleared first) as `varint(len) ++ payload`.
    ///
    /// Returns false, leaving `out` unspecified, when the block should be stored
    /// uncompressed: the codec is `None` or unavailable, the block is larger than
    /// [`MAX_UNCOMPRESSED_BLOCK_BYTES`] (a reader would reject its declared length), the
    /// codec failed (logged), or compression saves less than 12.5% of `raw`.
    pub(crate) fn compress(&mut self, raw: &[u8], out: &mut Vec<u8>) -> bool {
        if self.codec == Compression::None || raw.len() > MAX_UNCOMPRESSED_BLOCK_BYTES {
            return false;
        }
        out.clear();
        put_varint64(out, raw.len() as u64);
        let prefix = out.len();
        let ok = match self.codec {
            Compression::None => false,
            Compression::Lz4 => {
                out.resize(
                    prefix + lz4_flex::block::get_maximum_output_size(raw.len()),
                    0,
                );
                match out
                    .get_mut(prefix..)
                    .map(|dst| lz4_flex::block::compress_into(raw, dst))
                {
                    Some(Ok(n)) => {
                        out.truncate(prefix + n);
                        true
                    }
                    Some(Err(e)) => {
                        log::warn!("lz4 compression of a {} byte block failed: {e}", raw.len());
                        false
                    }
                    None => false,
                }
            }
            Compression::Zstd => self.zstd_into(raw, out),
        };
        // Keep the compressed form only if it saves at least 1/8 of the raw size.
        ok && out.len() <= raw.len() - raw.len() / 8
    }

    #[cfg(feature = "zstd")]
    fn zstd_into(&mut self, raw: &[u8], out: &mut Vec<u8>) -> bool {
        let ctx = match &mut self.zstd {
            Some(c) => c,
            None => match zstd::bulk::Compressor::new(ZSTD_LEVEL) {
                Ok(c) => self.zstd.insert(c),
                Err(e) => {
                    log::warn!("cannot create a zstd compression context: {e}");
                    return false;
                }
            },
        };
        self.scratch.clear();
        self.scratch
            .reserve(zstd::zstd_safe::compress_bound(raw.len()));
        match ctx.compress_to_buffer(raw, &mut self.scratch) {
            Ok(_) => {
                out.extend_from_slice(&self.scratch);
                true
            }
            Err(e) => {
                log::warn!("zstd compression of a {} byte block failed: {e}", raw.len());
                false
            }
        }
    }

    #[cfg(not(feature = "zstd"))]
    fn zstd_into(&mut self, _raw: &[u8], _out: &mut Vec<u8>) -> bool {
        false
    }
}

/// Chooses the codec of each data block from the user key of its last entry (keyspaces with
/// their own compression); `None` keeps the table's (`TableOptions::compression`).
pub(crate) trait BlockCodecs: Send + Sync {
    /// The codec for a block whose last user key is `user_key`.
    fn codec_for(&self, user_key: &[u8]) -> Option<Compression>;
}

/// Why a block could not be decompressed.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum DecompressError {
    /// The stored bytes are damaged (bad declared length, codec failure, length mismatch).
    Corrupt(CorruptionReason),
    /// The block uses a codec this build does not include.
    #[cfg_attr(
        feature = "zstd",
        expect(
            dead_code,
            reason = "constructed only by builds without the zstd feature"
        )
    )]
    Unsupported(Compression),
}

impl From<CorruptionReason> for DecompressError {
    fn from(r: CorruptionReason) -> Self {
        DecompressError::Corrupt(r)
    }
}

/// Largest uncompressed size an LZ4 block of `compressed` bytes can expand to (LZ4 expands
/// at most 255:1; a little slack covers the literal tail).
fn lz4_max_expansion(compressed: usize) -> usize {
    compressed.saturating_mul(255).saturating_add(16)
}

/// Decompresses the stored bytes of a block whose trailer says `codec` (not `None`).
///
/// # Preconditions
/// The block checksum has been verified.
pub(crate) fn decompress_block(
    codec: Compression,
    stored: &[u8],
) -> Result<Vec<u8>, DecompressError> {
    if codec == Compression::None {
        return Ok(stored.to_vec());
    }
    let mut d = Decoder::new(stored);
    let declared = d.varint64()?;
    let payload = d.rest();
    // Never trust a stored length: bound it before allocating.
    let declared = usize::try_from(declared).map_err(|_| CorruptionReason::BadLength)?;
    if declared > MAX_UNCOMPRESSED_BLOCK_BYTES {
        return Err(CorruptionReason::BadLength.into());
    }
    match codec {
        Compression::None => Ok(stored.to_vec()),
        Compression::Lz4 => {
            if declared > lz4_max_expansion(payload.len()) {
                return Err(CorruptionReason::BadLength.into());
            }
            let mut out = vec![0u8; declared];
            let n = lz4_flex::block::decompress_into(payload, &mut out)
                .map_err(|_| CorruptionReason::Invalid("lz4 payload does not decode"))?;
            if n != declared {
                return Err(CorruptionReason::BadLength.into());
            }
            Ok(out)
        }
        Compression::Zstd => decompress_zstd(payload, declared),
    }
}

#[cfg(feature = "zstd")]
thread_local! {
    /// One zstd decompression context per reading thread, reused across blocks (creating
    /// one per block would dominate the cost of a read). Holds no data between calls.
    static ZSTD_DCTX: std::cell::RefCell<Option<zstd::bulk::Decompressor<'static>>> =
        const { std::cell::RefCell::new(None) };
}

#[cfg(feature = "zstd")]
fn decompress_zstd(payload: &[u8], declared: usize) -> Result<Vec<u8>, DecompressError> {
    let bad = |_| CorruptionReason::Invalid("zstd payload does not decode");
    // The buffer's capacity bounds the output: a payload expanding beyond it is an error.
    let mut out = Vec::with_capacity(declared);
    ZSTD_DCTX.with(|cell| -> Result<(), CorruptionReason> {
        let mut slot = cell.borrow_mut();
        let ctx = match &mut *slot {
            Some(c) => c,
            None => slot.insert(zstd::bulk::Decompressor::new().map_err(bad)?),
        };
        ctx.decompress_to_buffer(payload, &mut out).map_err(bad)?;
        Ok(())
    })?;
    if out.len() != declared {
        return Err(CorruptionReason::BadLength.into());
    }
    Ok(out)
}

#[cfg(not(feature = "zstd"))]
fn decompress_zstd(_payload: &[u8], _declared: usize) -> Result<Vec<u8>, DecompressError> {
    Err(DecompressError::Unsupported(Compression::Zstd))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn compressible(n: usize) -> Vec<u8> {
        (0..n).map(|i| b"abcdefgh"[(i / 7) % 8]).collect()
    }

    fn codecs() -> Vec<Compression> {
        let mut v = vec![Compression::Lz4];
        if Compression::Zstd.is_supported() {
            v.push(Compression::Zstd);
        }
        v
    }

    #[test]
    fn compressed_block_round_trips_for_every_codec() {
        let raw = compressible(10_000);
        for c in codecs() {
            let mut out = Vec::new();
            assert!(BlockCompressor::new(c).compress(&raw, &mut out), "{c}");
            assert!(out.len() < raw.len());
            assert_eq!(decompress_block(c, &out).unwrap(), raw, "{c}");
        }
    }

    #[test]
    fn incompressible_block_is_stored_raw() {
        // A pseudo-random sequence does not compress by 12.5%.
        let mut x = 0x1234_5678_9abc_def0u64;
        let raw: Vec<u8> = (0..4096)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect();
        for c in codecs() {
            assert!(
                !BlockCompressor::new(c).compress(&raw, &mut Vec::new()),
                "{c}"
            );
        }
        assert!(
            !BlockCompressor::new(Compression::None).compress(&compressible(100), &mut Vec::new())
        );
    }

    #[test]
    fn declared_length_above_the_cap_is_rejected_before_allocating() {
        let mut stored = Vec::new();
        put_varint64(&mut stored, 1 << 40);
        stored.extend_from_slice(&[0u8; 32]);
        for c in codecs() {
            assert_eq!(
                decompress_block(c, &stored),
                Err(DecompressError::Corrupt(CorruptionReason::BadLength))
            );
        }
    }

    #[test]
    fn lz4_declared_length_beyond_the_codec_ratio_is_rejected() {
        let mut stored = Vec::new();
        put_varint64(&mut stored, 1 << 20);
        stored.extend_from_slice(&[0u8; 8]);
        assert_eq!(
            decompress_block(Compression::Lz4, &stored),
            Err(DecompressError::Corrupt(CorruptionReason::BadLength))
        );
    }

    #[test]
    fn declared_length_that_differs_from_the_output_is_rejected() {
        let raw = compressible(5000);
        for c in codecs() {
            let mut out = Vec::new();
            assert!(BlockCompressor::new(c).compress(&raw, &mut out));
            // Re-declare one byte more than the payload decodes to.
            let mut d = Decoder::new(&out);
            d.varint64().unwrap();
            let mut bad = Vec::new();
            put_varint64(&mut bad, 5001);
            bad.extend_from_slice(d.rest());
            assert!(
                matches!(decompress_block(c, &bad), Err(DecompressError::Corrupt(_))),
                "{c}"
            );
        }
    }

    #[test]
    fn compression_names_parse_and_display() {
        for c in [Compression::None, Compression::Lz4, Compression::Zstd] {
            assert_eq!(c.to_string().parse::<Compression>().unwrap(), c);
        }
        assert_eq!("LZ4".parse::<Compression>().unwrap(), Compression::Lz4);
        assert!(matches!(
            "snappy".parse::<Compression>(),
            Err(Error::InvalidArgument(_))
        ));
        assert_eq!(Compression::default(), Compression::None);
    }
}

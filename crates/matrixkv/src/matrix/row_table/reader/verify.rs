//! [`RowReader::verify`]: the full check of a row, and of its forward pointers into the
//! previous row.

use super::*;

impl RowReader {
    /// Full check of the invariants a reader relies on but does not check at open: offsets
    /// contiguous and matching the header, keys well formed and strictly increasing, sequence
    /// numbers inside the header's range, forward pointers non-decreasing, the bloom filter
    /// admitting every user key of the row, and every value whose pages are still live
    /// matching its checksum. Reads the whole row.
    pub fn verify(&self) -> Result<()> {
        let mut key = Vec::new();
        let mut last = Vec::new();
        let mut value = Vec::new();
        let mut key_pos = 0u64;
        let mut value_pos = 0u64;
        let mut last_fwd = 0u32;
        for i in 0..self.len() {
            let at = Self::entry_offset(i);
            let bad = |what| self.src.corrupt(at, CorruptionReason::Invalid(what));
            let e = self.entry(i)?;
            if u64::from(e.key_off) != key_pos || e.value_off != value_pos {
                return Err(bad("entry offsets are not contiguous"));
            }
            if e.fwd < last_fwd {
                return Err(bad("forward pointers decrease"));
            }
            self.key_of(&e, &mut key)?;
            let parsed = parse_internal_key(&key).map_err(|r| self.src.corrupt(at, r))?;
            if parsed.seq < self.header.smallest_seq || parsed.seq > self.header.largest_seq {
                return Err(bad("sequence number outside the header's range"));
            }
            if i > 0 && compare_internal(&last, &key) != Ordering::Less {
                return Err(bad("keys are not in increasing order"));
            }
            if !self.may_contain(parsed.user_key) {
                return Err(self.src.corrupt(
                    self.header.filter_offset(),
                    CorruptionReason::Invalid("the bloom filter rules out a key of the row"),
                ));
            }
            if self.value_pages_live(&e) {
                self.value_of(&e, &mut value)?;
            }
            std::mem::swap(&mut last, &mut key);
            key_pos += u64::from(e.key_len);
            value_pos += u64::from(e.value_len);
            last_fwd = e.fwd;
        }
        if key_pos != self.header.key_bytes || value_pos != self.header.value_bytes {
            return Err(self.src.corrupt(
                0,
                CorruptionReason::Invalid("the areas' lengths differ from the entries' sum"),
            ));
        }
        Ok(())
    }

    /// Checks every forward pointer against `prev` (which must be this row's previous row)
    /// by a merge walk over both rows' keys.
    pub fn verify_forward_pointers(&self, prev: &RowReader) -> Result<()> {
        if prev.row() != self.prev_row() || prev.len() != self.prev_entries() {
            return Err(Error::invalid(format!(
                "row {} ({} entries) is not the previous row of row {} (row {}, {} entries)",
                prev.row(),
                prev.len(),
                self.row(),
                self.prev_row(),
                self.prev_entries()
            )));
        }
        let mut key = Vec::new();
        let mut pkey = Vec::new();
        let mut j = 0usize;
        let mut pkey_loaded = false;
        for i in 0..self.len() {
            self.key(i, &mut key)?;
            while j < prev.len() {
                if !pkey_loaded {
                    prev.key(j, &mut pkey)?;
                    pkey_loaded = true;
                }
                if compare_internal(&pkey, &key) != Ordering::Less {
                    break;
                }
                j += 1;
                pkey_loaded = false;
            }
            if self.fwd(i)? as usize != j {
                return Err(self.src.corrupt(
                    Self::entry_offset(i),
                    CorruptionReason::Invalid("forward pointer differs from the previous row"),
                ));
            }
        }
        Ok(())
    }

    /// True when every page holding entry `e`'s value is live.
    fn value_pages_live(&self, e: &RowEntry) -> bool {
        if e.value_len == 0 {
            return true;
        }
        let pb = self.src.page_bytes as u64;
        let start = self.header.values_offset() + e.value_off;
        let end = start + u64::from(e.value_len);
        (start / pb..end.div_ceil(pb)).all(|p| self.src.pages.physical(p as usize).is_some())
    }
}

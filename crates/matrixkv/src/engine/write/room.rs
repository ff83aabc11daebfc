//! Making room for a write: switching the memtable and its WAL segment when they are full,
//! or waiting for background work (counted as stalls), and switching to a persistent memtable.

use super::*;

impl DbInner {
    /// Makes sure the active memtable and WAL segment can take `needed` more bytes (and a
    /// persistent memtable `cost` more bytes of its region), switching the memtable or waiting
    /// for background work (counted as stalls) as required.
    /// With `force`, switches to a new memtable unless the active one is empty.
    pub(crate) fn make_room(
        &self,
        ctx: &mut WriterCtx,
        needed: usize,
        cost: u64,
        force: bool,
    ) -> Result<()> {
        // The common case without the state lock: nothing to refuse, pace or switch.
        if !force
            && !self.value_file_full(ctx)
            && ctx.mem.has_room(self.opts.write_buffer_bytes, cost)
            && (ctx.mem.is_persistent() || ctx.wal.fits(needed))
        {
            match self.gauges.admission(&self.opts) {
                Admission::Free => {
                    ctx.pacing_debt = Duration::ZERO;
                    return Ok(());
                }
                Admission::Paced { overshoot } => {
                    self.pace(ctx, overshoot);
                    return Ok(());
                }
                Admission::Locked => {}
            }
        }
        let mut delayed = false;
        let mut force = force;
        loop {
            let mut st = self.state.lock();
            self.gauges.publish(&st);
            check_poison(&st)?;
            let l0 = st.l0_backlog();
            let compaction_on = self.opts.compaction_enabled;
            if !delayed && !force && compaction_on && l0 >= self.opts.l0_slowdown_writes_trigger {
                // Gradual admission control: the delay grows with L0 from 0 at the slowdown
                // trigger to MAX_SLOWDOWN at the stop trigger (never an on/off cliff).
                let span = (self.opts.l0_stop_writes_trigger - self.opts.l0_slowdown_writes_trigger)
                    .max(1) as u32;
                let over = (l0 + 1 - self.opts.l0_slowdown_writes_trigger) as u32;
                let delay = MAX_SLOWDOWN * over.min(span) / span;
                drop(st);
                let t = Instant::now();
                matrixkv_pmem::sleep_precisely(delay);
                self.counters
                    .record_stall(StallCause::L0Slowdown, t.elapsed());
                delayed = true;
                continue;
            }
            let overshoot = st.pool.as_ref().and_then(|p| {
                container_overshoot(
                    p.used_pages(),
                    p.total_pages(),
                    self.opts.container_slowdown_ratio,
                )
            });
            if !delayed
                && !force
                && compaction_on
                && let Some(overshoot) = overshoot
            {
                drop(st);
                self.pace(ctx, overshoot);
                delayed = true;
                continue;
            }
            if overshoot.is_none() {
                ctx.pacing_debt = Duration::ZERO;
            }
            let mem_full = !ctx.mem.has_room(self.opts.write_buffer_bytes, cost);
            if mem_full
                && ctx.mem.is_persistent()
                && ctx.mem.is_empty()
                && self.memtable_design.only_persistent()
            {
                // Every memtable of the design is persistent and a fresh one cannot take the
                // batch: switching again would never end.
                return Err(Error::invalid(format!(
                    "a write batch needing {cost} bytes of persistent write buffer does not fit \
                     an empty one of the {} design ({} bytes): write it in smaller batches or \
                     give the design larger buffers",
                    self.opts.design,
                    self.memtable_design
                        .persistent_memtable_bytes()
                        .unwrap_or_default()
                )));
            }
            // A persistent memtable's writes bypass the WAL.
            let wal_full = !ctx.mem.is_persistent() && !ctx.wal.fits(needed);
            let want_switch =
                mem_full || wal_full || self.value_file_full(ctx) || (force && !ctx.mem.is_empty());
            if !want_switch {
                return Ok(());
            }
            if st.imm.len() + 1 >= self.opts.max_write_buffers {
                let t = Instant::now();
                let waited = self.wait_for_background(&mut st);
                self.counters
                    .record_stall(StallCause::MemtableFull, t.elapsed());
                waited?;
                continue;
            }
            if compaction_on && !force && l0 >= self.opts.l0_stop_writes_trigger {
                let t = Instant::now();
                let waited = self.wait_for_background(&mut st);
                self.counters.record_stall(StallCause::L0Stop, t.elapsed());
                waited?;
                continue;
            }
            let number = st.versions.new_file_number();
            drop(st);
            self.switch_memtable(ctx, number, needed)?;
            force = false;
        }
    }

    /// The region size of a new persistent memtable: the design's `bytes`, capped by the
    /// level structure ([`crate::engine::levels::LevelDesign::persistent_memtable_cap`]).
    fn persistent_memtable_cap(&self, bytes: u64) -> u64 {
        self.levels.persistent_memtable_cap(bytes)
    }

    /// Starts a new memtable numbered `number`; the old one becomes immutable. The new one is
    /// a DRAM memtable with WAL segment `number`, or, when the design alternates with
    /// persistent memtables and the old one is a DRAM one (or when every memtable is
    /// persistent), a persistent memtable in region `number` (see
    /// [`DbInner::switch_to_persistent`]).
    fn switch_memtable(
        &self,
        ctx: &mut WriterCtx,
        number: layout::FileNum,
        needed: usize,
    ) -> Result<()> {
        if let Some(bytes) = self.memtable_design.persistent_memtable_bytes()
            && (!ctx.mem.is_persistent() || self.memtable_design.only_persistent())
        {
            return self.switch_to_persistent(ctx, number, self.persistent_memtable_cap(bytes));
        }
        if ctx.mem.is_persistent() {
            // A DRAM memtable after a full persistent one continues in the writer's segment,
            // which stayed empty while the persistent memtable took the writes (see
            // `switch_to_persistent`).
            let wal = ctx.wal.number();
            let mem = MemTable::with_filter(self.opts.memtable_filter_bytes());
            self.install_memtable(ctx, Arc::new(mem), wal, None);
            return Ok(());
        }
        self.sync_before_switch(ctx)?;
        let writer = self
            .create_wal(number, needed)
            .map_err(|e| self.switch_failed(e))?;
        let mem = MemTable::with_filter(self.opts.memtable_filter_bytes());
        self.install_memtable(ctx, Arc::new(mem), number, Some(writer));
        Ok(())
    }

    /// In designs whose memtables are all persistent (SLM-DB), replaces the empty DRAM
    /// memtable an open starts with by a persistent one, before any write.
    pub(crate) fn start_persistent_memtable(&self) -> Result<()> {
        if !self.memtable_design.only_persistent() {
            return Ok(());
        }
        let mut ctx = self.writer.lock();
        let number = self.state.lock().versions.new_file_number();
        self.switch_memtable(&mut ctx, number, 0).map_err(|e| {
            let design = self.memtable_design.as_ref();
            let bytes = design.persistent_memtable_bytes().unwrap_or(0);
            let needed = design.persistent_region_len(self.persistent_memtable_cap(bytes));
            let what = "the persistent memtable new writes go to (the design's \
                        persistent_memtable_bytes)";
            crate::engine::fast_room::explain_full_fast_tier_at_open(&self.tiers, what, needed, e)
        })
    }

    /// Persists the writer's segment completely, before anything newer exists: a later sync
    /// persists only the new segment, and an unpersisted tail left behind would become a hole in
    /// the history after a power loss (contract C3: recovery yields a prefix). Doing it first
    /// also means that only the newest non-blank segment can end in a torn record, which is
    /// what recovery accepts. A failure stops writes.
    fn sync_before_switch(&self, ctx: &mut WriterCtx) -> Result<()> {
        ctx.wal
            .sync()
            .inspect_err(|e| self.poison(&mut self.state.lock(), e))
    }

    /// The error of a memtable switch that could not create its segment or region: with the
    /// tier full nothing changed yet, the write is refused and the next one tries again;
    /// anything else stops writes.
    fn switch_failed(&self, e: Error) -> Error {
        if e.is_no_space() {
            Counters::add(&self.counters.no_space_rejections, 1);
            self.no_space_error(&e)
        } else {
            self.poison(&mut self.state.lock(), &e);
            e
        }
    }

    /// Makes `new_mem`, numbered `number` (its WAL segment's or its region's number), the
    /// active memtable, with `new_wal` as the writer's segment when given. The old memtable
    /// becomes immutable under its own number, with its segment's region to recycle after the
    /// flush when it is a DRAM memtable (a persistent one's region is deleted instead).
    fn install_memtable(
        &self,
        ctx: &mut WriterCtx,
        new_mem: Arc<MemTable>,
        number: layout::FileNum,
        new_wal: Option<crate::wal::Writer>,
    ) {
        let region = (!ctx.mem.is_persistent())
            .then(|| crate::engine::wal_recycle::SegmentRegion::of(&ctx.wal));
        // The replaced writer is dropped after the state lock is released.
        let _old_wal = new_wal.map(|w| std::mem::replace(&mut ctx.wal, w));
        let old_mem = std::mem::replace(&mut ctx.mem, Arc::clone(&new_mem));
        let mut st = self.state.lock();
        self.seal_value_file(ctx, st.mem_wal);
        let imm = crate::engine::ImmMem {
            mem: old_mem,
            wal: st.mem_wal,
            first_seq: st.mem_wal_first_seq,
            region,
        };
        st.imm.push_back(imm);
        st.mem = new_mem;
        st.mem_wal = number;
        // The next commit (this leader's) is the new memtable's first.
        st.mem_wal_first_seq = SeqNo(ctx.last_seq + 1);
        self.refresh_view(&st);
        self.work_cv.notify_all();
    }

    /// Makes persistent memtable `number` (a new region of `bytes` on the fast tier) the
    /// active memtable, after a full DRAM memtable (NoveLSM, decision 0023). Its writes need
    /// no WAL, but a fresh, empty WAL segment numbered after it becomes the writer's segment:
    /// the old one is recycled once its memtable is flushed, and the DRAM memtable that
    /// follows the persistent one continues in the fresh segment, so the memtables' numbers
    /// (the log numbers) keep their order. In designs without DRAM memtables (SLM-DB, LightKV)
    /// nothing follows in it, and it takes one page.
    fn switch_to_persistent(
        &self,
        ctx: &mut WriterCtx,
        number: layout::FileNum,
        bytes: u64,
    ) -> Result<()> {
        self.sync_before_switch(ctx)?;
        let name = layout::pmt_name(number);
        let path = layout::path(self.tiers.fast.dir(), &name);
        // Made under a temporary name and renamed once its header is persisted: a crash (or a
        // failed persist) before that leaves a temporary region, which the next open deletes,
        // never a persistent memtable whose header is half there.
        let tmp = layout::temp_name(number);
        let new_mem = usize::try_from(self.memtable_design.persistent_region_len(bytes))
            .map_err(|_| Error::invalid("persistent_memtable_bytes does not fit in memory"))
            .and_then(|len| self.tiers.fast.create_region(&tmp, len))
            .and_then(|region| {
                self.memtable_design
                    .create_persistent(region, &path, number.0)
            })
            .and_then(|mem| self.tiers.fast.rename(&tmp, &name).map(|()| mem))
            .and_then(|mem| self.tiers.fast.sync_dir().map(|()| mem))
            .map_err(|e| self.switch_failed(e))?;
        let wal_number = self.state.lock().versions.new_file_number();
        let writer = if self.memtable_design.only_persistent() {
            self.create_unwritten_wal(wal_number)
        } else {
            self.create_wal(wal_number, 0)
        }
        .map_err(|e| self.switch_failed(e))?;
        self.install_memtable(ctx, Arc::new(new_mem), number, Some(writer));
        Ok(())
    }
}

//! The scheduling priority of the calling thread, so that the engine's background threads
//! (flush, compaction) can yield the CPU to writers on small machines.

use std::io;

/// Sets the nice value (0 = normal, up to 19 = lowest priority) of the calling thread only.
/// On Linux, `setpriority(PRIO_PROCESS, tid)` applies to one thread; elsewhere this does
/// nothing. Raising the value needs no privilege.
pub fn set_current_thread_nice(nice: i32) -> io::Result<()> {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: gettid has no preconditions and cannot fail.
        let tid = unsafe { libc::syscall(libc::SYS_gettid) };
        let tid =
            libc::id_t::try_from(tid).map_err(|_| io::Error::other("thread id out of range"))?;
        // SAFETY: setpriority reads no memory of ours; PRIO_PROCESS with a thread id changes
        // that thread's nice value only (Linux semantics).
        let rc = unsafe { libc::setpriority(libc::PRIO_PROCESS, tid, nice) };
        if rc != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = nice;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lowering_a_threads_priority_leaves_other_threads_alone() {
        let main_before = {
            // SAFETY: getpriority reads no memory of ours.
            unsafe { libc::getpriority(libc::PRIO_PROCESS, 0) }
        };
        let child = std::thread::spawn(|| {
            set_current_thread_nice(7).unwrap();
            // SAFETY: gettid has no preconditions.
            let tid = unsafe { libc::syscall(libc::SYS_gettid) } as libc::id_t;
            // SAFETY: getpriority reads no memory of ours.
            unsafe { libc::getpriority(libc::PRIO_PROCESS, tid) }
        })
        .join()
        .unwrap();
        // 7, or the niceness the thread started with if it was already higher and the process
        // may not lower it (root may: the suite run under `nice` as root gets 7).
        assert!(
            child == 7 || child == 7.max(main_before),
            "child {child}, main {main_before}"
        );
        // SAFETY: as above.
        let main_after = unsafe { libc::getpriority(libc::PRIO_PROCESS, 0) };
        assert_eq!(main_after, main_before);
    }
}

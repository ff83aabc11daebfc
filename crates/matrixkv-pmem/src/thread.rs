//! The scheduling priority of the calling thread, so that the engine's background threads
//! (flush, compaction) can yield the CPU to writers on small machines, and sleeps that end on
//! time, for the writers' admission control.

use std::io;
use std::time::Duration;

/// Sleeps for `d` with the calling thread's timer slack lowered to 1 ns for the sleep: Linux
/// lets a sleep of a normal thread end up to 50 µs late (the default slack) to batch timer
/// wake-ups, which for the short pacing sleeps of a writer (tens of µs) doubles them, and
/// the caller's latency with them. The thread's slack is restored afterwards, so a thread
/// the caller owns keeps its own setting. Elsewhere: `std::thread::sleep`.
pub fn sleep_precisely(d: Duration) {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: PR_GET_TIMERSLACK reads no memory of ours; it returns the calling thread's
        // slack in ns (or -1 on error).
        let old = unsafe { libc::prctl(libc::PR_GET_TIMERSLACK, 0, 0, 0, 0) };
        let lowered = old > 1 && {
            // SAFETY: PR_SET_TIMERSLACK only sets the calling thread's slack; no memory of
            // ours is read or written.
            unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong, 0, 0, 0) == 0 }
        };
        std::thread::sleep(d);
        if lowered {
            // SAFETY: as above; `old` is the positive slack read before.
            unsafe {
                libc::prctl(libc::PR_SET_TIMERSLACK, old as libc::c_ulong, 0, 0, 0);
            }
        }
    }
    #[cfg(not(target_os = "linux"))]
    std::thread::sleep(d);
}

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

    #[cfg(target_os = "linux")]
    #[test]
    fn a_precise_sleep_lasts_at_least_its_duration_and_restores_the_threads_slack() {
        // SAFETY: PR_GET_TIMERSLACK reads no memory of ours.
        let before = unsafe { libc::prctl(libc::PR_GET_TIMERSLACK, 0, 0, 0, 0) };
        let t = std::time::Instant::now();
        sleep_precisely(Duration::from_micros(200));
        assert!(t.elapsed() >= Duration::from_micros(200));
        // SAFETY: as above.
        let after = unsafe { libc::prctl(libc::PR_GET_TIMERSLACK, 0, 0, 0, 0) };
        assert_eq!(after, before);
    }

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

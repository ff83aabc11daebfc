#!/usr/bin/env python3
"""Measures the cost of a CPU's first access to page-cache pages, by how they were filled.

Usage: scripts/first-touch.py DIR [MiB]

Writes a file of MiB (default 1024) in DIR with O_DIRECT, reads it back into the page cache
with POSIX_FADV_WILLNEED, then reads one byte of every 4 KiB page through a mapping, twice;
then does the same for a file written with buffered write()s (whose pages the writer's copy
touched). On a VM whose host backs freed guest memory lazily (free page reporting), the first
pass over the DMA-filled pages costs microseconds per page and the second nothing
(decision 0008, section "Later: readahead after direct writes, and why reads stay slower on
this VM"). Removes both files.
"""
import mmap
import os
import sys
import time


def touch(m, size):
    t = time.perf_counter()
    s = 0
    for off in range(0, size, 4096):
        s += m[off]
    return time.perf_counter() - t


def passes(path, size, advise):
    fd = os.open(path, os.O_RDONLY)
    try:
        if advise:
            os.posix_fadvise(fd, 0, size, os.POSIX_FADV_WILLNEED)
            time.sleep(8)  # the readahead runs asynchronously
        m = mmap.mmap(fd, size, prot=mmap.PROT_READ)
        try:
            return touch(m, size), touch(m, size)
        finally:
            m.close()
    finally:
        os.close(fd)


def write(path, size, flags):
    buf = mmap.mmap(-1, 1 << 20)  # page-aligned, as O_DIRECT needs
    buf.write(b"x" * (1 << 20))
    fd = os.open(path, os.O_CREAT | os.O_WRONLY | os.O_TRUNC | flags, 0o600)
    try:
        for _ in range(size >> 20):
            os.write(fd, buf)
        os.fsync(fd)
    finally:
        os.close(fd)


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    size = (int(sys.argv[2]) if len(sys.argv) > 2 else 1024) << 20
    path = os.path.join(sys.argv[1], "first-touch.bin")
    try:
        write(path, size, os.O_DIRECT)
        first, second = passes(path, size, advise=True)
        print(f"direct+willneed: first pass {first:.3f} s, second pass {second:.3f} s")
        os.unlink(path)
        write(path, size, 0)
        first, second = passes(path, size, advise=False)
        print(f"buffered: first pass {first:.3f} s, second pass {second:.3f} s")
        pages = size // 4096
        print(f"({pages} pages of 4 KiB)")
    finally:
        if os.path.exists(path):
            os.unlink(path)


if __name__ == "__main__":
    main()

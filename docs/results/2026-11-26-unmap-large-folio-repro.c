// Reproduction of the writer page faults fixed in e67fdfd (docs/results/README.md, fifteenth
// session): a file is fallocated and mapped shared, a helper thread populates it 8 MiB ahead of
// the writer (MADV_POPULATE_WRITE, 2 MiB at a time), the writer copies 1,100-byte records with
// 2 µs of work between them and unmaps the pages behind it every MiB, rounded down to a multiple
// of ALIGN KiB. Prints the writer's page faults.
//   cc -O2 -pthread -o repro 2026-11-26-unmap-large-folio-repro.c
//   ./repro /path/on/ext4/file 64     # unmap at 64 KiB multiples
//   ./repro /path/on/ext4/file 2048   # unmap at 2 MiB multiples
//   ./repro /path/on/ext4/file 0      # never unmap
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

static long minflt(void) { struct rusage r; getrusage(RUSAGE_THREAD, &r); return r.ru_minflt; }
static char *p;
static const size_t cap = 64 << 20;
static _Atomic size_t want = 0, released_at = 0;

static void *helper(void *a) {
  (void)a;
  size_t at = 0;
  while (at < cap) {
    while (atomic_load(&want) <= at) usleep(50);
    size_t l = 2 << 20;
    if (at + l > cap) l = cap - at;
    size_t lo = atomic_load(&released_at);
    if (at >= lo && madvise(p + at, l, 23 /* MADV_POPULATE_WRITE */)) perror("madvise");
    at += l;
  }
  return 0;
}

static void work(long ns) {
  struct timespec a, b;
  clock_gettime(CLOCK_MONOTONIC, &a);
  do clock_gettime(CLOCK_MONOTONIC, &b);
  while ((b.tv_sec - a.tv_sec) * 1000000000L + (b.tv_nsec - a.tv_nsec) < ns);
}

int main(int argc, char **argv) {
  if (argc < 3) return 2;
  size_t align = (size_t)atoi(argv[2]) << 10;
  int fd = open(argv[1], O_RDWR | O_CREAT | O_TRUNC, 0600);
  if (fd < 0 || fallocate(fd, 0, 0, cap)) { perror("open/fallocate"); return 1; }
  p = mmap(0, cap, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  pthread_t t;
  pthread_create(&t, 0, helper, 0);
  atomic_store(&want, 8 << 20);
  usleep(20000);
  char buf[1100];
  memset(buf, 7, sizeof buf);
  long f0 = minflt();
  size_t len = 0, released = 0;
  while (len + 1100 < cap - (8 << 20)) {
    work(2000);
    memcpy(p + len, buf, 1100);
    len += 1100;
    atomic_store(&want, len + (8 << 20));
    if (align && len - released >= (1 << 20)) {
      size_t to = len / align * align;
      if (to > released) { munmap(p + released, to - released); released = to; atomic_store(&released_at, to); }
    }
  }
  printf("unmap at multiples of %zu KiB: writer faults %ld over %zu pages\n", align >> 10, minflt() - f0, len / 4096);
  pthread_join(t, 0);
  unlink(argv[1]);
  return 0;
}

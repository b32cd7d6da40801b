/*
 * heap — how a sweep's process keeps its heap. Every run allocates and
 * frees the same large buffers: keep all of them in the heap (no mmap per
 * block) and never give the heap back, so that each page is faulted in
 * once per process rather than once per run; one arena, which the workers
 * share (a second one would fault its own pages in again); and advise the
 * whole heap, as it grows, to use 2 MiB pages (transparent huge pages), as
 * glibc's glibc.malloc.hugetlb=1 tunable would. Page faults in 4 KiB pages
 * were half of a large run's time.
 *
 * These are hints to glibc and the kernel: where the kernel refuses huge
 * pages (THP off, or no THP at all), nothing changes but the speed, and no
 * count depends on them. In a virtual machine whose balloon hands free
 * memory back to the host (virtio_balloon's free page reporting, which
 * reports free 2 MiB blocks), a huge page can come from a block the host
 * took back and faults in on the host too: then 2 MiB pages are slower
 * than 4 KiB ones taken from fragments the guest still holds.
 */
#ifndef ZS_HEAP_H
#define ZS_HEAP_H

#include <stddef.h>

/* Tune glibc's heap as above; heap_grown then advises what it adds. */
void heap_tune(void);

/* Advise the part of the heap added since the last call (nothing before
 * heap_tune). The tracker calls it after each large allocation, before it
 * writes to the block. Thread-safe. */
void heap_grown(void);

#endif

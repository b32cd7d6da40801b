/*
 * heap — see heap.h. The main arena grows by brk; after each large
 * allocation the range between the last advised break and the current one
 * gets madvise(MADV_HUGEPAGE), so the kernel backs it with 2 MiB pages on
 * first touch. A generous top pad makes the heap grow in large steps, so
 * the blocks that follow land in a range already advised.
 */
#include "config.h"

#include <errno.h>
#include <limits.h>
#include <malloc.h>
#include <pthread.h>
#include <stdint.h>
#include <sys/mman.h>
#include <unistd.h>

#include "engine/heap.h"

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static uintptr_t advised; /* the heap is advised up to here; 0 before heap_tune or once refused */

void heap_tune(void)
{
#ifdef M_MMAP_THRESHOLD
	mallopt(M_ARENA_MAX, 1);
	mallopt(M_MMAP_MAX, 0);
	mallopt(M_TRIM_THRESHOLD, INT_MAX);
	mallopt(M_TOP_PAD, 64 << 20);
#endif
#ifdef MADV_HUGEPAGE
	uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
	pthread_mutex_lock(&lock);
	advised = (uintptr_t)sbrk(0) & ~(page - 1);
	pthread_mutex_unlock(&lock);
#endif
}

void heap_grown(void)
{
#ifdef MADV_HUGEPAGE
	pthread_mutex_lock(&lock);
	uintptr_t end = (uintptr_t)sbrk(0);
	if (advised != 0 && end > advised) {
		/* EINVAL: no THP in this kernel; stop asking. Other failures
		 * (part of the range not mapped) only cost speed. */
		if (madvise((void *)advised, end - advised, MADV_HUGEPAGE) != 0 && errno == EINVAL)
			end = 0;
		advised = end & ~((uintptr_t)sysconf(_SC_PAGESIZE) - 1);
	}
	pthread_mutex_unlock(&lock);
#endif
}

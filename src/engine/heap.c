/*
 * heap — see heap.h. The main arena grows by brk; after each large
 * allocation the range between the last advised break and the current one
 * gets madvise(MADV_HUGEPAGE), so the kernel backs it with 2 MiB pages on
 * first touch. A generous top pad makes the heap grow in large steps, so
 * the blocks that follow land in a range already advised.
 *
 * The first whole 2 MiB page of each large block is touched here and the
 * thread's CPU time for that one fault compared with what 2 MiB in 4 KiB
 * pages cost (measured once, in heap_tune, on a scratch mapping): past
 * twice that, the rest of the heap is advised back to 4 KiB pages for the
 * rest of the process. The touch rewrites the byte it reads, in a block
 * its caller is about to fill, so nothing is faulted in that the run
 * would not fault itself.
 */
#include "config.h"

#include <errno.h>
#include <limits.h>
#include <malloc.h>
#include <pthread.h>
#include <stdint.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "engine/heap.h"

#define HUGE_PAGE ((uintptr_t)2 << 20)

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static uintptr_t advised; /* the heap is advised up to here; 0 before heap_tune or once refused */
static double small_cost; /* CPU seconds to fault in 2 MiB in 4 KiB pages; 0 when unknown */
static int small_pages;   /* huge pages were found dearer than small ones: advise no more */

static double cpu_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

#ifdef MADV_HUGEPAGE
/* The cost of 2 MiB in 4 KiB pages, on a mapping of its own (unmapped at
 * once, before any run's peak resident set is taken). */
static double small_page_cost(void)
{
	uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
	volatile char *m = mmap(NULL, HUGE_PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (m == MAP_FAILED)
		return 0;
	(void)madvise((void *)m, HUGE_PAGE, MADV_NOHUGEPAGE);
	double t0 = cpu_now();
	for (uintptr_t i = 0; i < HUGE_PAGE; i += page)
		m[i] = 1;
	double t = cpu_now() - t0;
	munmap((void *)m, HUGE_PAGE);
	return t;
}
#endif

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
	double cost = small_page_cost();
	pthread_mutex_lock(&lock);
	advised = (uintptr_t)sbrk(0) & ~(page - 1);
	small_cost = cost;
	pthread_mutex_unlock(&lock);
#endif
}

#ifdef MADV_HUGEPAGE
/* Touch the first whole 2 MiB page of [block, block + bytes), if any, and
 * keep to 4 KiB pages from there on if that fault cost more than twice
 * small_cost. Called with the lock held, in huge-page mode. */
static void probe(char *block, size_t bytes)
{
	uintptr_t first = ((uintptr_t)block + HUGE_PAGE - 1) & ~(HUGE_PAGE - 1);
	if (small_cost <= 0 || first + HUGE_PAGE > (uintptr_t)block + bytes || first + HUGE_PAGE > advised)
		return;
	volatile char *p = (volatile char *)first;
	double t0 = cpu_now();
	*p = *p;
	if (cpu_now() - t0 <= 2 * small_cost)
		return;
	small_pages = 1;
	(void)madvise((void *)(first + HUGE_PAGE), advised - first - HUGE_PAGE, MADV_NOHUGEPAGE);
}
#endif

void heap_grown(void *block, size_t bytes)
{
#ifdef MADV_HUGEPAGE
	pthread_mutex_lock(&lock);
	uintptr_t end = (uintptr_t)sbrk(0);
	if (advised != 0 && end > advised) {
		/* EINVAL: no THP in this kernel; stop asking. Other failures
		 * (part of the range not mapped) only cost speed. */
		int advice = small_pages ? MADV_NOHUGEPAGE : MADV_HUGEPAGE;
		if (madvise((void *)advised, end - advised, advice) != 0 && errno == EINVAL)
			end = 0;
		advised = end & ~((uintptr_t)sysconf(_SC_PAGESIZE) - 1);
	}
	if (advised != 0 && !small_pages)
		probe(block, bytes);
	pthread_mutex_unlock(&lock);
#else
	(void)block;
	(void)bytes;
#endif
}

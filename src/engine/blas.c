/*
 * blas — OpenBLAS on one thread, checked before main(); one product at a
 * time; and its work buffer taken where a failure can be said, not spun on.
 *
 * zerosim links OpenBLAS's serial build (configure.ac says why): a
 * threaded one would make a transformer's sums depend on the CPUs the run
 * may use, and hangs at exit under a virtual-memory limit. The check is a
 * constructor, not a call in each main(), so that every program linking
 * OpenBLAS through configure's OPENBLAS_LIBS is checked, the tests and
 * benchmarks too: that variable carries -u zs_blas_check_serial, which
 * pulls this file in from libzsengine.a.
 *
 * One product at a time. Debian's serial OpenBLAS (0.3.21) is not safe to
 * call from two threads at once, as a sweep's workers do: the same
 * transformer sweep at --jobs 2 gave other weights in 5 runs of 20 (the
 * threaded build, run on one thread, in none of 20). So every product
 * goes through here (OPENBLAS_LIBS carries --wrap=cblas_sgemm) and takes
 * one lock; the workers still overlap everything else.
 *
 * And its work buffer taken where a failure can be said: a product takes a
 * 128 MiB buffer from OpenBLAS's pool, and where the pool has none
 * OpenBLAS allocates one and retries without end while that fails
 * (memory.c, blas_memory_alloc): under ulimit -v a transformer run spun
 * forever. Before the first product, the buffer's size is tried with
 * malloc (an out-of-memory line if it fails), then OpenBLAS's own
 * allocation of it is made and handed back to the pool, where every later
 * product, one at a time, finds it. (Another thread can still take the
 * memory between the try and OpenBLAS's allocation; only a limit within a
 * few MB of the need meets that.)
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* program_invocation_short_name */
#endif
#include "config.h"

#include <cblas.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "engine/blas.h"
#include "util/util.h"

__attribute__((constructor)) void zs_blas_check_serial(void)
{
	int parallel = openblas_get_parallel(); /* 0 serial, 1 pthreads, 2 OpenMP */
	int threads = openblas_get_num_threads();
	if (parallel == 0 && threads == 1)
		return;
	fprintf(stderr,
	        "%s: OpenBLAS here is a threaded build (openblas_get_parallel() = %d, %d threads), "
	        "but results must not depend on the CPU count: link the serial one (libopenblas-serial-dev) "
	        "and rerun ./configure\n",
	        program_invocation_short_name, parallel, threads);
	/* _exit: a threaded OpenBLAS's exit handler can wait forever on its
	 * threads (under ulimit -v). */
	_exit(1);
}

/* OpenBLAS's own pool (driver/others/memory.c), exported by the library. */
void *blas_memory_alloc(int procpos);
void blas_memory_free(void *buffer);

/* What one buffer takes: BUFFER_SIZE (32 << 22 on x86-64) and a page, as
 * seen asked of malloc by OpenBLAS 0.3.21, with room to spare. */
#define BLAS_BUFFER_BYTES ((size_t)(128u << 20) + (1u << 16))

static pthread_mutex_t one_at_a_time = PTHREAD_MUTEX_INITIALIZER;
static int reserved; /* under the lock */

static void reserve_buffer(void)
{
	void *room = malloc(BLAS_BUFFER_BYTES);
	if (room == NULL)
		zs_oom(__FILE__, __LINE__);
	free(room);
	blas_memory_free(blas_memory_alloc(0));
	reserved = 1;
}

void __real_cblas_sgemm(const enum CBLAS_ORDER order, const enum CBLAS_TRANSPOSE ta, const enum CBLAS_TRANSPOSE tb,
                        const blasint m, const blasint n, const blasint k, const float alpha, const float *a,
                        const blasint lda, const float *b, const blasint ldb, const float beta, float *c,
                        const blasint ldc);
void __wrap_cblas_sgemm(const enum CBLAS_ORDER order, const enum CBLAS_TRANSPOSE ta, const enum CBLAS_TRANSPOSE tb,
                        const blasint m, const blasint n, const blasint k, const float alpha, const float *a,
                        const blasint lda, const float *b, const blasint ldb, const float beta, float *c,
                        const blasint ldc);

void __wrap_cblas_sgemm(const enum CBLAS_ORDER order, const enum CBLAS_TRANSPOSE ta, const enum CBLAS_TRANSPOSE tb,
                        const blasint m, const blasint n, const blasint k, const float alpha, const float *a,
                        const blasint lda, const float *b, const blasint ldb, const float beta, float *c,
                        const blasint ldc)
{
	pthread_mutex_lock(&one_at_a_time);
	if (!reserved)
		reserve_buffer(); /* zs_oom exits; the lock need not be let go */
	__real_cblas_sgemm(order, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
	pthread_mutex_unlock(&one_at_a_time);
}

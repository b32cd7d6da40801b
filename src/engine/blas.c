/*
 * blas — the check that OpenBLAS runs one thread, made before main().
 *
 * zerosim links OpenBLAS's serial build (configure.ac says why): a
 * threaded one would make a transformer's sums depend on the CPUs the run
 * may use, and hangs at exit under a virtual-memory limit. A constructor,
 * not a call in each main(), so that every program linking OpenBLAS
 * through configure's OPENBLAS_LIBS is checked, the tests and benchmarks
 * too: that variable carries -u zs_blas_check_serial, which pulls this
 * file in from libzsengine.a.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* program_invocation_short_name */
#endif
#include "config.h"

#include <cblas.h>
#include <errno.h>
#include <stdio.h>
#include <unistd.h>

#include "engine/blas.h"

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

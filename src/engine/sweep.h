/*
 * sweep — every run of a sweep (one per unit, scheme and N), side by side
 * on a few worker threads as memory allows. Each run is independent and
 * single-threaded, so its result does not depend on how many workers there
 * are or which one ran it.
 *
 * Ownership: sweep_run fills *out with njobs results the caller releases
 * with sweep_results_free.
 */
#ifndef ZS_SWEEP_H
#define ZS_SWEEP_H

#include <stddef.h>

#include "engine/engine.h"
#include "util/config.h"

struct zs_sweep_options {
	unsigned jobs;        /* workers; 0: one per CPU the process may run on */
	int timeline;         /* every run records rank 0's last step */
	int dump;             /* the last run returns its final weights */
	const char *progress; /* prefix of a progress line on stderr, or NULL for none */
	int mpi;              /* the MPI backend: every process runs every job, one at a time
	                         (jobs is unused); a world size the processes do not divide is
	                         skipped and said so; process 0 gets the results of those run */
	int timeline_ranks;   /* with timeline: every rank's events (zs_run_options) */
	const struct cuda_alloc_opts *alloc; /* the allocator replay's options, or NULL */
};

/* Run c's sweep (on case cs, or NULL). The results come in the sweep's
 * order: world sizes vary fastest, then schemes, then units. Fails before
 * running anything if the largest run cannot fit in the memory available;
 * after a failed run only the runs before it in the sweep's order still
 * run, and *cause is the first failure in that order, whatever the
 * workers. Under MPI (o->mpi) *njobs counts the runs made, and a failed
 * run ends the whole job with a line naming the failing process's ranks. */
int sweep_run(const struct zs_config *c, const struct zs_case *cs, const struct zs_sweep_options *o,
              struct zs_result **out, size_t *njobs, char **cause);
void sweep_results_free(struct zs_result *res, size_t njobs);

#endif

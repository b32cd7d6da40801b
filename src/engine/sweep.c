/*
 * sweep — the scheduler of a sweep (sweep.h): a few worker threads take
 * the jobs in a cost order, a job starts only while the memory bounds of
 * the running ones fit in a budget, and the results are kept in the
 * sweep's order.
 */
#define _GNU_SOURCE /* sched_getaffinity and CPU_COUNT, where glibc has them */
#include "config.h"

#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "engine/heap.h"
#include "engine/sweep.h"
#include "util/util.h"
#ifdef HAVE_MPI
#include "engine/mpi_job.h"
#endif

struct sweep {
	const struct zs_config *c;
	const struct zs_case *cs;
	const struct zs_sweep_options *o;
	const float *init;
	size_t njobs;
	size_t *order;           /* job indices, the costliest first */
	double *bound;           /* per job: engine_bytes_upper_bound */
	struct zs_result *res;   /* per job, in the sweep's order */
	char **cause;            /* per job: why it failed, or NULL */
	unsigned workers;
	double budget;           /* bytes the running jobs' bounds may add up to */

	pthread_mutex_t lock;    /* guards what follows */
	size_t next, last, done; /* order[next..last) are still to run */
	size_t first_failed;     /* the smallest failed job index, or njobs */
	unsigned nworkers_in;
	unsigned running;        /* jobs running now, and their bounds' sum */
	double running_bytes;
	pthread_cond_t finished; /* signalled when a job ends */
	int shown;
	double start;
};

/* MemAvailable from /proc/meminfo, in bytes; 0 when unknown. */
static double available_memory(void)
{
	FILE *f = fopen("/proc/meminfo", "r");
	if (f == NULL)
		return 0;
	char line[256];
	double kb = 0;
	while (fgets(line, sizeof line, f) != NULL)
		if (sscanf(line, "MemAvailable: %lf kB", &kb) == 1)
			break;
	fclose(f);
	return kb * 1024.0;
}

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* The CPUs this process may run on (taskset, cpusets), 1 to 64. */
static unsigned usable_cpus(void)
{
	long n = sysconf(_SC_NPROCESSORS_ONLN);
#ifdef CPU_COUNT
	cpu_set_t set;
	if (sched_getaffinity(0, sizeof set, &set) == 0)
		n = CPU_COUNT(&set);
#endif
	return n < 1 ? 1 : n > 64 ? 64 : (unsigned)n;
}

/* Job i is the sweep's i-th run: world sizes vary fastest, then schemes,
 * then units, as the output lists them. */
static unsigned job_world(const struct sweep *sw, size_t i) { return sw->c->world[i % sw->c->nworld]; }

static void job_params(const struct sweep *sw, size_t i, enum zs_unit *u, enum zs_scheme *sc, unsigned *w)
{
	const struct zs_config *c = sw->c;
	*w = job_world(sw, i);
	*sc = c->schemes[i / c->nworld % c->nschemes];
	*u = c->units[i / (c->nworld * c->nschemes)];
}

static void sweep_init(struct sweep *sw, const struct zs_config *c, const struct zs_case *cs,
                       const struct zs_sweep_options *o)
{
	memset(sw, 0, sizeof *sw);
	sw->c = c;
	sw->cs = cs;
	sw->o = o;
	sw->njobs = c->nunits * c->nschemes * c->nworld;
	sw->order = zs_calloc(sw->njobs, sizeof *sw->order);
	sw->bound = zs_calloc(sw->njobs, sizeof *sw->bound);
	sw->res = zs_calloc(sw->njobs, sizeof *sw->res);
	sw->cause = zs_calloc(sw->njobs, sizeof *sw->cause);
	/* Largest world first (a run's work grows with N), the sweep's order
	 * among equals (an insertion sort, stable): the last jobs to start
	 * are the short ones. */
	for (size_t i = 0; i < sw->njobs; i++) {
		size_t b = i;
		for (; b > 0 && job_world(sw, sw->order[b - 1]) < job_world(sw, i); b--)
			sw->order[b] = sw->order[b - 1];
		sw->order[b] = i;
		enum zs_unit u;
		enum zs_scheme sc;
		unsigned w;
		job_params(sw, i, &u, &sc, &w);
		sw->bound[i] = engine_bytes_upper_bound(c, sc, w, u);
	}
	pthread_mutex_init(&sw->lock, NULL);
	pthread_cond_init(&sw->finished, NULL);
}

/* Runs go side by side only while the upper bounds of their bytes fit in
 * the budget: 1.5 times the largest run's bound, or that bound plus
 * SIDE_BY_SIDE_EXTRA if more, and never more than the memory available.
 * A large run spends its time in page faults; a second run of its size
 * beside it faults in pages of its own instead of reusing the first one's,
 * and both take longer (measured: 1024,4096,1024 at N = 16 took 2.4 s one
 * run at a time, 3.5 s two at a time). Smaller runs beside it cost little,
 * and a sweep over many world sizes still gains from two cores
 * (512,2048,512 at N = 1..32: 3.5 s one at a time, 2.5 s). The bounds are
 * each run's own (engine_bytes_upper_bound). The budget is the largest
 * run's bound and 256 MB more: with 1.5 times the largest, dp ran beside
 * zero2 or zero3 of the same shape and the pair took 2-5 times as long as
 * one run at a time (1024,4096,1024 at N = 16, --jobs 2, on a busy 2-core
 * machine: 5.9-13.6 s against 1.1-2.8 s, same output). */
#define SIDE_BY_SIDE_EXTRA 256e6

/* The workers (as asked, else one per usable CPU, at most one per job) and
 * the memory budget; refuse a sweep whose largest run cannot fit. */
static int sweep_fit_memory(struct sweep *sw, double avail, char **cause)
{
	/* the initial weights (4 bytes a parameter) are held beside every run
	 * (a transformer's ranks draw theirs: none; a case's were read before
	 * this, so MemAvailable already lacks them) */
	double one = 0;
	for (size_t i = 0; i < sw->njobs; i++)
		one = sw->bound[i] > one ? sw->bound[i] : one;
	one += sw->c->tfm != NULL || sw->cs != NULL ? 0.0 : 4.0 * zs_config_params(sw->c);
	if (avail > 0 && one > avail)
		return zs_fail(cause, "the largest run needs up to %.3g GB and this machine has %.3g GB available; "
		               "ask 'zerosim theory' instead, or use a smaller %s or --world", one / 1e9, avail / 1e9,
		               sw->c->tfm != NULL ? "--seq, --batch" : "--layers");
	unsigned jobs = sw->o->jobs != 0 ? sw->o->jobs : usable_cpus();
	sw->workers = jobs < sw->njobs ? jobs : (unsigned)sw->njobs;
	sw->budget = one + SIDE_BY_SIDE_EXTRA;
	if (avail > 0 && sw->budget > avail)
		sw->budget = avail;
	return 0;
}

/* Workers take jobs alternately from the two ends of order[] (the first
 * from the costliest end, the second from the cheapest, and so on), so
 * that a large run shares the machine with small ones. A job starts when
 * its bound fits in the budget beside the running ones, or when nothing
 * runs. */
static void *worker(void *arg)
{
	struct sweep *sw = arg;
	pthread_mutex_lock(&sw->lock);
	int from_back = sw->nworkers_in++ % 2;
	for (;;) {
		if (sw->next == sw->last)
			break;
		size_t i = from_back ? sw->order[--sw->last] : sw->order[sw->next++];
		double bound = sw->bound[i];
		while (i < sw->first_failed && sw->running > 0 && sw->running_bytes + bound > sw->budget)
			pthread_cond_wait(&sw->finished, &sw->lock);
		/* After a failure only the jobs before it in the sweep's order
		 * still run, so that the error reported is the same whatever
		 * the workers and their timing: the first in the sweep's order. */
		if (i > sw->first_failed)
			continue;
		sw->running++;
		sw->running_bytes += bound;
		pthread_mutex_unlock(&sw->lock);

		enum zs_unit u;
		enum zs_scheme sc;
		unsigned w;
		job_params(sw, i, &u, &sc, &w);
		struct zs_run_options ro = {sw->o->timeline, sw->o->dump && i + 1 == sw->njobs, sw->init, 0,
		                              sw->o->timeline_ranks, sw->o->alloc};
		int r = engine_run(sw->c, sc, w, u, sw->cs, &ro, &sw->res[i], &sw->cause[i]);

		pthread_mutex_lock(&sw->lock);
		sw->running--;
		sw->running_bytes -= bound;
		pthread_cond_broadcast(&sw->finished);
		if (r != 0 && i < sw->first_failed)
			sw->first_failed = i;
		sw->done++;
		if (sw->o->progress != NULL && (sw->shown || now() - sw->start > 1.0)) {
			fprintf(stderr, "\r%s: run %zu/%zu (%s, N=%u, unit=%s)   ", sw->o->progress, sw->done, sw->njobs,
			        zs_scheme_name(sc), w, zs_unit_name(u));
			sw->shown = 1;
		}
	}
	pthread_mutex_unlock(&sw->lock);
	return NULL;
}

/* Run every job; on failure, the cause of the first failed job in the
 * sweep's order (the jobs after it are skipped). */
static int run_jobs(struct sweep *sw, char **cause)
{
	sw->start = now();
	sw->last = sw->njobs;
	sw->first_failed = sw->njobs;
	pthread_t *th = zs_calloc(sw->workers, sizeof *th);
	unsigned started = 0;
	for (unsigned k = 1; k < sw->workers; k++)
		if (pthread_create(&th[k], NULL, worker, sw) == 0)
			started = k;
		else
			break; /* fewer workers: the same results, later */
	worker(sw);
	for (unsigned k = 1; k <= started; k++)
		pthread_join(th[k], NULL);
	free(th);
	if (sw->shown)
		fprintf(stderr, "\r%s: %zu runs in %.1f s%30s\n", sw->o->progress, sw->done, now() - sw->start, "");
	if (sw->first_failed == sw->njobs)
		return 0;
	*cause = sw->cause[sw->first_failed];
	sw->cause[sw->first_failed] = NULL;
	return *cause != NULL ? -1 : zs_fail(cause, "a run failed");
}

/* ------------------------------------------------------------------------- */
/* under MPI: every process runs every job in the sweep's order, one at a
 * time, holding N/P of its ranks; process 0 keeps the results. */

#ifdef HAVE_MPI
/* "rank 3" or "ranks 4-7": the ranks MPI process p holds at N = w. */
static char *ranks_of(unsigned p, unsigned w, unsigned P)
{
	unsigned per = w / P;
	if (per == 1)
		return zs_asprintf("rank %u", p);
	return zs_asprintf("ranks %u-%u", p * per, (p + 1) * per - 1);
}

/* Run the jobs P divides, in order, and move their results to the front;
 * *ran is how many. */
static int run_jobs_mpi(struct sweep *sw, size_t *ran, char **cause)
{
	unsigned P = mpi_job_size(), me = mpi_job_rank();
	unsigned char *skip = zs_calloc(sw->njobs, 1);
	double one = 0;
	size_t todo = 0;
	*ran = 0;
	for (size_t i = 0; i < sw->njobs; i++) {
		skip[i] = job_world(sw, i) % P != 0;
		todo += !skip[i];
		if (skip[i] && me == 0 && i < sw->c->nworld) /* once per world size */
			fprintf(stderr, "zerosim measure: skipping N=%u: %u MPI processes cannot share its ranks evenly\n",
			        job_world(sw, i), P);
		if (!skip[i] && sw->bound[i] / P > one)
			one = sw->bound[i] / P;
	}
	/* Each process holds N/P ranks of a run, and the initial weights (as
	 * in sweep_fit_memory). */
	one += sw->c->tfm != NULL || sw->cs != NULL ? 0.0 : 4.0 * zs_config_params(sw->c);
	double avail = available_memory();
	int r = 0;
	if (todo == 0)
		r = zs_fail(cause, "no world size of the sweep is a multiple of the %u MPI processes", P);
	else if (avail > 0 && one > avail)
		r = zs_fail(cause, "each process needs up to %.3g GB for the largest run and this machine has %.3g GB "
		            "available; use more processes, or a smaller --layers or --world", one / 1e9, avail / 1e9);
	sw->start = now();
	double shown_at = sw->start;
	size_t last = sw->njobs;
	while (last > 0 && skip[last - 1])
		last--;
	for (size_t i = 0; i < sw->njobs && r == 0; i++) {
		if (skip[i])
			continue;
		enum zs_unit u;
		enum zs_scheme sc;
		unsigned w;
		job_params(sw, i, &u, &sc, &w);
		char *what = zs_asprintf("%s, N=%u, unit=%s", zs_scheme_name(sc), w, zs_unit_name(u));
		mpi_job_set_run(what, w);
		struct zs_run_options ro = {sw->o->timeline, sw->o->dump && i + 1 == last, sw->init, 1,
		                              sw->o->timeline_ranks, sw->o->alloc};
		struct zs_result *res = &sw->res[(*ran)++];
		if (engine_run(sw->c, sc, w, u, sw->cs, &ro, res, &sw->cause[i]) != 0) {
			char *who = ranks_of(me, w, P);
			char *line = zs_asprintf("%s (MPI process %u of %u) failed in %s: %s", who, me, P, what,
			                         sw->cause[i] ? sw->cause[i] : "failed");
			zs_print_error("zerosim measure", line);
			mpi_job_abort(ZS_EXIT_RUNTIME);
		}
		free(what);
		sw->done++;
		/* mpirun hands stderr on through a pipe: whole lines, at most
		 * one a second, for a terminal and a batch job's log alike. */
		if (sw->o->progress != NULL && me == 0 && now() - shown_at > 1.0) {
			fprintf(stderr, "%s: run %zu/%zu done (%s, N=%u, unit=%s, %u processes), %.1f s\n", sw->o->progress,
			        sw->done, todo, zs_scheme_name(sc), w, zs_unit_name(u), P, now() - sw->start);
			shown_at = now();
		}
	}
	if (r == 0 && last > 0)
		mpi_job_set_run("the writing of the output", job_world(sw, last - 1));
	free(skip);
	return r;
}
#endif

void sweep_results_free(struct zs_result *res, size_t njobs)
{
	for (size_t i = 0; res != NULL && i < njobs; i++)
		engine_result_free(&res[i]);
	free(res);
}

int sweep_run(const struct zs_config *c, const struct zs_case *cs, const struct zs_sweep_options *o,
              struct zs_result **out, size_t *njobs, char **cause)
{
	struct sweep sw;
	sweep_init(&sw, c, cs, o);
	float *init = NULL;
	size_t ran = sw.njobs;
	int r = o->mpi ? 0 : sweep_fit_memory(&sw, available_memory(), cause);
	if (r == 0) {
		/* Under MPI too: the engine trims the heap before each run, so
		 * that the run's peak RSS is its own. */
		heap_tune();
		init = cs == NULL ? engine_initial_weights(c) : NULL;
		sw.init = init;
#ifdef HAVE_MPI
		if (o->mpi)
			r = run_jobs_mpi(&sw, &ran, cause);
		else
#endif
			r = run_jobs(&sw, cause);
	}
	for (size_t i = 0; i < sw.njobs; i++)
		free(sw.cause[i]);
	if (r == 0) {
		*out = sw.res;
		*njobs = ran;
	} else {
		sweep_results_free(sw.res, sw.njobs);
	}
	free(init);
	free(sw.order);
	free(sw.bound);
	free(sw.cause);
	pthread_mutex_destroy(&sw.lock);
	pthread_cond_destroy(&sw.finished);
	return r;
}

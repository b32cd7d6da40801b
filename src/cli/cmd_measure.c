/*
 * zerosim measure — run the sweep through the engine and write
 * zerosim-measured/1 (docs/formats.md). One record per (scheme, N, unit).
 */
#define _GNU_SOURCE /* sched_getaffinity and CPU_COUNT, where glibc has them */
#include "config.h"

#include <errno.h>
#include <limits.h>
#include <malloc.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/options.h"
#include "engine/engine.h"
#include "engine/measure_json.h"
#ifdef HAVE_MPI
#include "engine/mpi_job.h"
#endif
#include "util/config.h"
#include "util/util.h"

static void usage(FILE *f)
{
	fputs("Usage: zerosim measure [OPTION]...\n"
	      "Run real mixed-precision training steps of an MLP across N simulated\n"
	      "data-parallel ranks under DP and ZeRO-1/2/3, with every buffer tracked,\n"
	      "and write the measurement as JSON (zerosim-measured/1).\n"
	      "\n"
	      "Model and run:\n"
	      "      --layers LIST      layer widths d0,d1,...,dL (default 64,256,64)\n"
	      "      --world LIST       world sizes N (default 1,2,4,8,16,32)\n"
	      "      --schemes LIST     among dp,zero1,zero2,zero3 (default all four)\n"
	      "      --unit LIST        model and/or layer: what is sharded and gathered\n"
	      "                         as one piece (default model)\n"
	      "      --steps S          training steps per run (default 3)\n"
	      "      --batch B          per-rank batch (default 4)\n"
	      "      --seed SEED        seed of the weights and batches (default 3)\n"
	      "      --precision P      mixed (fp16 params and grads, fp32 master) or fp32\n"
	      "      --optimizer O      adam (default) or sgd (with momentum 0.9)\n"
	      "      --lr RATE          learning rate (default 0.001)\n"
	      "      --beta1 B1, --beta2 B2, --eps E\n"
	      "                         Adam's decay rates and epsilon (default 0.9,\n"
	      "                         0.999, 1e-8)\n"
	      "      --spec FILE        read the options above from a zerosim-sweep/1 file;\n"
	      "                         options on the command line override it\n"
	      "      --case FILE        initial weights and every batch from a\n"
	      "                         zerosim-case file (fixes layers, world, batch, steps;\n"
	      "                         a zerosim-case/2 file also the training options)\n"
	      "\n"
	      "Output:\n"
	      "  -o, --out FILE         write the JSON to FILE (default: standard output)\n"
	      "      --timeline         record rank 0's allocations through the last step\n"
	      "      --dump-weights FILE  write the final fp32 weights (zerosim-weights/1)\n"
	      "  -q, --quiet            no progress line on standard error\n"
	      "\n"
	      "Other:\n"
	      "  -j, --jobs J           run up to J runs at once (default: one per CPU, as\n"
	      "                         memory allows); the results do not depend on J\n"
	      "      --backend B        inprocess (default: all N ranks in this process) or\n"
	      "                         mpi (under mpirun or srun with P processes, N/P ranks\n"
	      "                         each, one run at a time; needs ./configure --with-mpi)\n"
	      "  -h, --help             display this help and exit\n"
	      "  -V, --version          output version information and exit\n"
	      "\n"
	      "Exit status: 0 success, 1 failure at run time, 2 bad usage or bad input.\n",
	      f);
}

/* Bad usage, refused before anything runs: an output that is a folder, or
 * that names one of the inputs (it would be overwritten). */
static int check_output(const char *opt, const char *path, const char *spec, const char *case_path,
                        const char *other, char **cause)
{
	struct stat st;
	if (path == NULL)
		return 0;
	if (stat(path, &st) == 0 && S_ISDIR(st.st_mode))
		return zs_fail(cause, "%s %s: is a folder, not a file", opt, path);
	if (zs_same_file(path, spec))
		return zs_fail(cause, "%s %s: is the --spec file; it would be overwritten", opt, path);
	if (zs_same_file(path, case_path))
		return zs_fail(cause, "%s %s: is the --case file; it would be overwritten", opt, path);
	if (other != NULL && (strcmp(path, other) == 0 || zs_same_file(path, other)))
		return zs_fail(cause, "--out and --dump-weights name the same file %s", path);
	return 0;
}

/* Fail now, before a long run, if FILE's folder cannot take the output. */
static int check_writable(const char *path, char **cause)
{
	struct stat st;
	if (stat(path, &st) == 0 && !S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode))
		/* a device or FIFO is written in place (zs_write_atomic) */
		return access(path, W_OK) == 0 ? 0 : zs_fail(cause, "cannot write %s: %s", path, strerror(errno));
	const char *slash = strrchr(path, '/');
	char *dir = slash ? zs_asprintf("%.*s", (int)(slash - path), path) : zs_strdup(".");
	if (*dir == '\0') {
		free(dir);
		dir = zs_strdup("/");
	}
	int ok = access(dir, W_OK | X_OK) == 0;
	int r = ok ? 0 : zs_fail(cause, "cannot write %s: the folder %s is missing or not writable", path, dir);
	free(dir);
	return r;
}

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

static int parse_jobs(const char *s, unsigned *jobs, char **cause)
{
	unsigned long long v;
	if (s == NULL)
		return zs_fail(cause, "--jobs needs a value");
	if (zs_parse_uint("jobs", s, 64, "a number of jobs", &v, cause) != 0)
		return -1;
	*jobs = (unsigned)v;
	return 0;
}

/* Options the case file fixes: given on the command line, they must agree. */
static int apply_case(struct zs_config *c, const struct zs_case *cs, char **cause)
{
	const unsigned given[4] = {c->given & 1u << ZS_KEY_LAYERS, c->given & 1u << ZS_KEY_WORLD,
	                           c->given & 1u << ZS_KEY_BATCH, c->given & 1u << ZS_KEY_STEPS};
	if (given[0] && (c->nwidths != cs->nwidths || memcmp(c->widths, cs->widths, cs->nwidths * sizeof *cs->widths) != 0))
		return zs_fail(cause, "--layers disagrees with the case file's layers");
	if (given[1] && (c->nworld != 1 || c->world[0] != cs->world))
		return zs_fail(cause, "--world disagrees with the case file's world size %u", cs->world);
	if (given[2] && c->batch != cs->batch)
		return zs_fail(cause, "--batch %u disagrees with the case file's batch %u", c->batch, cs->batch);
	if (given[3] && c->steps != cs->steps)
		return zs_fail(cause, "--steps %u disagrees with the case file's %u steps", c->steps, cs->steps);
	c->nwidths = cs->nwidths;
	memcpy(c->widths, cs->widths, sizeof c->widths);
	c->nworld = 1;
	c->world[0] = cs->world;
	c->batch = cs->batch;
	c->steps = cs->steps;
	return 0;
}

/* ------------------------------------------------------------------------- */
/* the sweep: one job per (unit, scheme, N), run by a few worker threads.
 * Every run is independent and single-threaded, so its result does not
 * depend on how many workers there are or which one ran it; the results
 * are written in the sweep's order once all are done. */

struct sweep {
	const struct zs_config *c;
	const struct zs_case *cs;
	const float *init;
	int timeline, dump, tty;
	size_t njobs;
	size_t *order;           /* job indices, the costliest first */
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

static void sweep_init(struct sweep *sw, const struct zs_config *c, const struct zs_case *cs, int timeline, int dump)
{
	memset(sw, 0, sizeof *sw);
	sw->c = c;
	sw->cs = cs;
	sw->timeline = timeline;
	sw->dump = dump;
	sw->njobs = c->nunits * c->nschemes * c->nworld;
	sw->order = zs_calloc(sw->njobs, sizeof *sw->order);
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
	}
	pthread_mutex_init(&sw->lock, NULL);
	pthread_cond_init(&sw->finished, NULL);
}

static void sweep_free(struct sweep *sw)
{
	for (size_t i = 0; i < sw->njobs; i++) {
		engine_result_free(&sw->res[i]);
		free(sw->cause[i]);
	}
	free(sw->order);
	free(sw->res);
	free(sw->cause);
	pthread_mutex_destroy(&sw->lock);
	pthread_cond_destroy(&sw->finished);
}

/* Every run allocates and frees the same large buffers: keep all of them
 * in the heap (no mmap per block) and never give the heap back, so that
 * each page is faulted in once per process rather than once per run; and
 * grow the heap once, by what the running jobs may hold (up to 256 MB),
 * advised to use 2 MiB pages. Page faults were a third of the default
 * sweep's time, and most of a large run's. One arena, which the workers
 * share: a second one would fault its own pages in again. These are
 * hints to glibc and the kernel; no count depends on them. */
static void tune_heap(double budget)
{
#ifdef M_MMAP_THRESHOLD
	mallopt(M_ARENA_MAX, 1);
	mallopt(M_MMAP_MAX, 0);
	mallopt(M_TRIM_THRESHOLD, INT_MAX);
#ifdef MADV_HUGEPAGE
	const uintptr_t huge = (uintptr_t)2 << 20;
	size_t want = (size_t)(budget < 240e6 ? budget : 240e6) + ((size_t)16 << 20);
	char *block = malloc(want);
	if (block == NULL)
		return;
	uintptr_t lo = ((uintptr_t)block + huge - 1) & ~(huge - 1), hi = (uintptr_t)block + want;
	if (hi > lo + huge)
		(void)madvise((void *)lo, (hi - lo) & ~(huge - 1), MADV_HUGEPAGE);
	free(block);
#endif
#else
	(void)budget;
#endif
}

/* Runs go side by side only while the upper bounds of their bytes fit in
 * the budget: 1.5 times the largest run's bound, or that bound plus
 * SIDE_BY_SIDE_EXTRA if more, and never more than the memory available.
 * A large run spends its time in page faults; a second run of its size
 * beside it faults in pages of its own instead of reusing the first one's,
 * and both take longer (measured: 1024,4096,1024 at N = 16 took 2.4 s one
 * run at a time, 3.5 s two at a time). Smaller runs beside it cost little,
 * and a sweep over many world sizes still gains from two cores
 * (512,2048,512 at N = 1..32: 3.5 s one at a time, 2.5 s). */
#define SIDE_BY_SIDE_EXTRA 256e6

static double job_bound(const struct sweep *sw, size_t i)
{
	return engine_bytes_upper_bound(sw->c, job_world(sw, i));
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

/* The workers (as asked, else one per usable CPU, at most one per job) and
 * the memory budget; refuse a sweep whose largest run cannot fit. */
static int sweep_fit_memory(struct sweep *sw, unsigned jobs, double avail, char **cause)
{
	/* order[] is by N, and the bound grows with N; the initial weights
	 * (4 bytes a parameter) are held beside every run. */
	double one = job_bound(sw, sw->order[0]) + 4.0 * zs_config_params(sw->c);
	if (avail > 0 && one > avail)
		return zs_fail(cause, "the largest run needs up to %.3g GB and this machine has %.3g GB available; "
		               "ask 'zerosim theory' instead, or use a smaller --layers or --world", one / 1e9, avail / 1e9);
	if (jobs == 0)
		jobs = usable_cpus();
	sw->workers = jobs < sw->njobs ? jobs : (unsigned)sw->njobs;
	sw->budget = one * 1.5 > one + SIDE_BY_SIDE_EXTRA ? one * 1.5 : one + SIDE_BY_SIDE_EXTRA;
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
		double bound = job_bound(sw, i);
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
		struct zs_run_options ro = {sw->timeline, sw->dump && i + 1 == sw->njobs, sw->init, 0};
		int r = engine_run(sw->c, sc, w, u, sw->cs, &ro, &sw->res[i], &sw->cause[i]);

		pthread_mutex_lock(&sw->lock);
		sw->running--;
		sw->running_bytes -= bound;
		pthread_cond_broadcast(&sw->finished);
		if (r != 0 && i < sw->first_failed)
			sw->first_failed = i;
		sw->done++;
		if (sw->tty && (sw->shown || now() - sw->start > 1.0)) {
			fprintf(stderr, "\rzerosim measure: run %zu/%zu (%s, N=%u, unit=%s)   ", sw->done, sw->njobs,
			        zs_scheme_name(sc), w, zs_unit_name(u));
			sw->shown = 1;
		}
	}
	pthread_mutex_unlock(&sw->lock);
	return NULL;
}

/* Run every job; on failure, the cause of the first failed job in the
 * sweep's order (the jobs after it are skipped). */
static int sweep_run(struct sweep *sw, char **cause)
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
		fprintf(stderr, "\rzerosim measure: %zu runs in %.1f s%30s\n", sw->done, now() - sw->start, "");
	if (sw->first_failed == sw->njobs)
		return 0;
	*cause = sw->cause[sw->first_failed];
	sw->cause[sw->first_failed] = NULL;
	return *cause != NULL ? -1 : zs_fail(cause, "a run failed");
}

/* This process's rank in a job being launched, from the launcher's
 * environment (Open MPI, PMIx, MPICH, Slurm), before MPI_Init and even
 * without MPI built in; -1 if none. */
static int launched_rank(void)
{
	static const char *const vars[] = {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "SLURM_PROCID"};
	for (size_t i = 0; i < sizeof vars / sizeof *vars; i++) {
		const char *v = getenv(vars[i]);
		if (v != NULL && *v != '\0')
			return atoi(v);
	}
	return -1;
}

/* ------------------------------------------------------------------------- */
/* under MPI (--backend mpi): every process runs every job, one at a time,
 * holding N/P of its ranks; process 0 keeps the results. A world size the
 * processes do not divide is skipped, and said so; a failure anywhere
 * ends the job with a line naming the failing process's ranks. */

#ifdef HAVE_MPI
/* "rank 3" or "ranks 4-7": the ranks MPI process p holds at N = w. */
static char *ranks_of(unsigned p, unsigned w, unsigned P)
{
	unsigned per = w / P;
	if (per == 1)
		return zs_asprintf("rank %u", p);
	return zs_asprintf("ranks %u-%u", p * per, (p + 1) * per - 1);
}

static int sweep_run_mpi(struct sweep *sw, unsigned char *skip, char **cause)
{
	unsigned P = mpi_job_size(), me = mpi_job_rank();
	size_t ran = 0;
	for (size_t i = 0; i < sw->njobs; i++) {
		skip[i] = job_world(sw, i) % P != 0;
		if (skip[i] && me == 0 && i < sw->c->nworld) /* once per world size */
			fprintf(stderr, "zerosim measure: skipping N=%u: %u MPI processes cannot share its ranks evenly\n",
			        job_world(sw, i), P);
		ran += !skip[i];
	}
	if (ran == 0)
		return zs_fail(cause, "no world size of the sweep is a multiple of the %u MPI processes", P);
	/* Each process holds N/P ranks of the largest run. */
	double one = job_bound(sw, sw->order[0]) / P + 4.0 * zs_config_params(sw->c), avail = available_memory();
	if (avail > 0 && one > avail)
		return zs_fail(cause, "each process needs up to %.3g GB for the largest run and this machine has %.3g GB "
		               "available; use more processes, or a smaller --layers or --world", one / 1e9, avail / 1e9);
	/* The heap as in process (2 MiB pages, no mmap per block); the engine
	 * trims it before each run, so that the run's peak RSS is its own. */
	tune_heap(one);
	sw->start = now();
	size_t last = sw->njobs;
	while (last > 0 && skip[last - 1])
		last--;
	for (size_t i = 0; i < sw->njobs; i++) {
		if (skip[i])
			continue;
		enum zs_unit u;
		enum zs_scheme sc;
		unsigned w;
		job_params(sw, i, &u, &sc, &w);
		char *what = zs_asprintf("%s, N=%u, unit=%s", zs_scheme_name(sc), w, zs_unit_name(u));
		mpi_job_set_run(what, w);
		struct zs_run_options ro = {sw->timeline, sw->dump && i + 1 == last, sw->init, 1};
		if (engine_run(sw->c, sc, w, u, sw->cs, &ro, &sw->res[i], &sw->cause[i]) != 0) {
			char *who = ranks_of(me, w, P);
			char *line = zs_asprintf("%s (MPI process %u of %u) failed in %s: %s", who, me, P, what,
			                         sw->cause[i] ? sw->cause[i] : "failed");
			zs_print_error("zerosim measure", line);
			mpi_job_abort(ZS_EXIT_RUNTIME);
		}
		free(what);
		if (me != 0)
			engine_result_free(&sw->res[i]);
		sw->done++;
		if (sw->tty && me == 0 && (sw->shown || now() - sw->start > 1.0)) {
			fprintf(stderr, "\rzerosim measure: run %zu/%zu (%s, N=%u, unit=%s, %u processes)   ", sw->done, ran,
			        zs_scheme_name(sc), w, zs_unit_name(u), P);
			sw->shown = 1;
		}
	}
	if (sw->shown)
		fprintf(stderr, "\rzerosim measure: %zu runs in %.1f s%40s\n", sw->done, now() - sw->start, "");
	return 0;
}
#endif

enum { OPT_CASE = ZS_OPT_COMMAND, OPT_OUT, OPT_TIMELINE, OPT_DUMP, OPT_QUIET, OPT_JOBS, OPT_BACKEND };

static const struct zs_opt options[] = {
	ZS_OPTS_MODEL,
	{"case", 0, 1, OPT_CASE, NULL},
	{"out", 'o', 1, OPT_OUT, NULL},
	{"timeline", 0, 0, OPT_TIMELINE, NULL},
	{"dump-weights", 0, 1, OPT_DUMP, NULL},
	{"quiet", 'q', 0, OPT_QUIET, NULL},
	{"jobs", 'j', 1, OPT_JOBS, NULL},
	{"backend", 0, 1, OPT_BACKEND, NULL},
	ZS_OPTS_STANDARD,
	{NULL, 0, 0, ZS_OPT_END, NULL},
};

int zs_cmd_measure(int argc, char **argv)
{
	struct zs_config c;
	zs_config_defaults(&c);
	const char *spec = NULL, *case_path = NULL, *out = NULL, *dump = NULL;
	int timeline = 0, quiet = 0;
	unsigned jobs = 0; /* 0: one per CPU online */
	int jobs_given = 0, mpi = 0;
#ifdef HAVE_MPI
	int mpi_started = 0;
#endif
	unsigned char *skip = NULL; /* per job: not run (MPI: N not a multiple of P) */
	char *cause = NULL;
	struct zs_case *cs = NULL;
	cJSON *root = NULL;
	float *init = NULL;
	struct zs_arg *args = NULL;
	size_t nargs = 0;
	int status = ZS_EXIT_USAGE;

	if (zs_opts_parse(options, argc, argv, &args, &nargs, &cause) != 0)
		goto fail;
	for (size_t i = 0; i < nargs; i++) {
		const char *v = args[i].value;
		switch (args[i].opt->id) {
		case ZS_OPT_HELP:
			usage(stdout);
			free(args);
			return ZS_EXIT_OK; /* main() checks that it was written */
		case ZS_OPT_VERSION:
			zs_opts_print_version();
			free(args);
			return ZS_EXIT_OK;
		case ZS_OPT_SPEC: spec = v; break;
		case OPT_CASE: case_path = v; break;
		case OPT_OUT: out = v; break;
		case OPT_TIMELINE: timeline = 1; break;
		case OPT_DUMP: dump = v; break;
		case OPT_QUIET: quiet = 1; break;
		case OPT_JOBS:
			if (parse_jobs(v, &jobs, &cause) != 0)
				goto fail;
			jobs_given = 1;
			break;
		case OPT_BACKEND:
			if (strcmp(v, "inprocess") != 0 && strcmp(v, "mpi") != 0) {
				zs_fail(&cause, "--backend '%s': not a backend (inprocess or mpi)", v);
				goto fail;
			}
			mpi = strcmp(v, "mpi") == 0;
			break;
		default: break;
		}
	}
	if (zs_opts_config(&c, args, nargs, &cause) != 0)
		goto fail;
	if ((out != NULL && *out == '\0') || (dump != NULL && *dump == '\0')) {
		zs_fail(&cause, "%s: the file name is empty", out != NULL && *out == '\0' ? "--out" : "--dump-weights");
		goto fail;
	}
	if (case_path != NULL) {
		if (engine_case_load(case_path, &cs, &cause) != 0 || apply_case(&c, cs, &cause) != 0)
			goto fail;
	}
	if (zs_config_validate(&c, &cause) != 0)
		goto fail;
#ifndef HAVE_MPI
	if (mpi) {
		zs_fail(&cause, "--backend mpi: this zerosim was built without MPI (./configure --with-mpi)");
		goto fail;
	}
#endif
	if (mpi && jobs_given) {
		zs_fail(&cause, "--jobs does not apply to --backend mpi: its runs go one at a time over the processes");
		goto fail;
	}
	/* Under MPI only process 0 writes (and checks where it writes). */
	int writer = !mpi || launched_rank() <= 0;
	if (writer && (check_output("--out", out, spec, case_path, dump, &cause) != 0 ||
	               check_output("--dump-weights", dump, spec, case_path, NULL, &cause) != 0))
		goto fail;
	if (writer && ((out && check_writable(out, &cause) != 0) || (dump && check_writable(dump, &cause) != 0))) {
		status = ZS_EXIT_RUNTIME;
		goto fail;
	}

	struct sweep sw;
	sweep_init(&sw, &c, cs, timeline, dump != NULL);
	skip = zs_calloc(sw.njobs, 1);
#ifdef HAVE_MPI
	if (mpi) {
		status = ZS_EXIT_RUNTIME;
		if (mpi_job_start(NULL, NULL, &cause) != 0) {
			sweep_free(&sw);
			goto fail;
		}
		mpi_started = 1;
		writer = mpi_job_rank() == 0;
		if (c.nworld == 1 && c.world[0] % mpi_job_size() != 0) {
			zs_fail(&cause, "--world %u: %u MPI processes cannot share %u ranks evenly; give a multiple of %u",
			        c.world[0], mpi_job_size(), c.world[0], mpi_job_size());
			status = ZS_EXIT_USAGE;
			sweep_free(&sw);
			goto fail;
		}
	}
#endif
	status = ZS_EXIT_RUNTIME;
	if (!mpi && sweep_fit_memory(&sw, jobs, available_memory(), &cause) != 0) {
		sweep_free(&sw);
		goto fail;
	}
	if (!mpi)
		tune_heap(sw.budget);
	root = measure_json_new(&c, case_path);
	init = cs == NULL ? engine_initial_weights(&c) : NULL;
	sw.init = init;
	sw.tty = !quiet && isatty(STDERR_FILENO);
	int ran;
#ifdef HAVE_MPI
	if (mpi)
		ran = sweep_run_mpi(&sw, skip, &cause);
	else
#endif
		ran = sweep_run(&sw, &cause);
	if (ran != 0) {
		sweep_free(&sw);
		goto fail;
	}
	if (!writer) {
		sweep_free(&sw);
		goto done;
	}
	int diverged = 0;
	size_t last = 0;
	for (size_t i = 0; i < sw.njobs; i++) {
		const struct zs_result *res = &sw.res[i];
		if (skip[i])
			continue;
		last = i;
		for (unsigned t = 0; t < c.steps; t++)
			if (!isfinite(res->losses[t]) && diverged++ == 0)
				fprintf(stderr, "zerosim measure: warning: the loss is not finite (%s, N=%u, step %u): "
				        "training diverged (try a smaller --lr); the bytes are still exact\n",
				        zs_scheme_name(res->scheme), res->world, t + 1);
		measure_json_add_run(root, &c, res);
	}
	if (dump != NULL) { /* the last run's weights */
		cJSON *wj = measure_json_weights(&c, &sw.res[last]);
		int r = zs_json_write(dump, wj, &cause);
		cJSON_Delete(wj);
		if (r != 0) {
			sweep_free(&sw);
			goto fail;
		}
	}
	sweep_free(&sw);
	if (out != NULL) {
		if (zs_json_write(out, root, &cause) != 0)
			goto fail;
	} else {
		char *text = cJSON_Print(root);
		if (text == NULL || fputs(text, stdout) == EOF || fputc('\n', stdout) == EOF || fflush(stdout) != 0) {
			cJSON_free(text);
			zs_fail(&cause, "cannot write to standard output");
			goto fail;
		}
		cJSON_free(text);
	}
done:
	status = ZS_EXIT_OK;
fail:;
	/* Under MPI every process meets the same bad input: one says so. */
	int say = !mpi || launched_rank() <= 0;
#ifdef HAVE_MPI
	if (mpi_started) {
		say = mpi_job_rank() == 0;
		mpi_job_finish();
	}
#endif
	if (status != ZS_EXIT_OK && say)
		zs_print_error("zerosim measure", cause ? cause : "failed");
	free(cause);
	free(skip);
	cJSON_Delete(root);
	engine_case_free(cs);
	free(init);
	free(args);
	return status;
}

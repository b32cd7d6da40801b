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
	      "  -h, --help             display this help and exit\n"
	      "  -V, --version          output version information and exit\n"
	      "\n"
	      "Exit status: 0 success, 1 failure at run time, 2 bad usage or bad input.\n",
	      f);
}

/* Fail now, before a long run, if FILE's folder cannot take the output. */
static int check_writable(const char *path, char **cause)
{
	char *target = NULL;
	int fd;
	struct stat st;
	if (zs_output_resolve(path, &target, &fd) != 0 && fd < 0) {
		const char *slash = strrchr(path, '/');
		return zs_fail(cause, "cannot write %s: the folder %.*s is missing", path,
		               slash != NULL ? (int)(slash - path) : 1, slash != NULL ? path : ".");
	}
	if (fd >= 0)
		return 0;
	if (stat(target, &st) == 0 && S_ISDIR(st.st_mode)) {
		free(target);
		return zs_fail(cause, "%s: is a folder, not a file", path);
	}
	int ok;
	char *slash = strrchr(target, '/');
	if (stat(target, &st) == 0 && !S_ISREG(st.st_mode)) { /* a device or FIFO: written in place */
		ok = access(target, W_OK) == 0;
	} else {
		if (slash != NULL)
			slash[slash == target] = '\0'; /* the folder ("/" for /x) */
		ok = stat(target, &st) == 0 && S_ISDIR(st.st_mode) ? access(target, W_OK | X_OK) == 0 : (errno = ENOTDIR, 0);
	}
	int r = ok ? 0 : zs_fail(cause, "cannot write %s: %s", path, strerror(errno));
	free(target);
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

/* A training setting as the command line writes it, for comparing and
 * for messages. */
static void setting_text(const struct zs_config *c, enum zs_key k, char *buf, size_t n)
{
	switch (k) {
	case ZS_KEY_PRECISION: snprintf(buf, n, "%s", zs_precision_name(c->precision)); break;
	case ZS_KEY_OPTIMIZER: snprintf(buf, n, "%s", zs_optimizer_name(c->optimizer)); break;
	case ZS_KEY_LR: zs_number_text(c->lr, buf, n); break;
	case ZS_KEY_BETA1: zs_number_text(c->beta1, buf, n); break;
	case ZS_KEY_BETA2: zs_number_text(c->beta2, buf, n); break;
	default: zs_number_text(c->eps, buf, n); break;
	}
}

/* What the case file fixes: the model, one world size, the batch and the
 * steps, and (zerosim-case/2) the training settings it gives. An option
 * that says otherwise, on the command line or in --spec, is refused. */
static int apply_case(struct zs_config *c, const struct zs_case *cs, char **cause)
{
	static const enum zs_key training[] = {ZS_KEY_PRECISION, ZS_KEY_OPTIMIZER, ZS_KEY_LR,
	                                       ZS_KEY_BETA1, ZS_KEY_BETA2, ZS_KEY_EPS};
	static const char *const names[] = {"precision", "optimizer", "lr", "beta1", "beta2", "eps"};
	const unsigned given = c->given;
	if ((given & 1u << ZS_KEY_LAYERS) &&
	    (c->nwidths != cs->nwidths || memcmp(c->widths, cs->widths, cs->nwidths * sizeof *cs->widths) != 0))
		return zs_fail(cause, "--layers disagrees with the case file's layers");
	if ((given & 1u << ZS_KEY_WORLD) && (c->nworld != 1 || c->world[0] != cs->world))
		return zs_fail(cause, "--world disagrees with the case file's world size %u", cs->world);
	if ((given & 1u << ZS_KEY_BATCH) && c->batch != cs->batch)
		return zs_fail(cause, "--batch %u disagrees with the case file's batch %u", c->batch, cs->batch);
	if ((given & 1u << ZS_KEY_STEPS) && c->steps != cs->steps)
		return zs_fail(cause, "--steps %u disagrees with the case file's %u steps", c->steps, cs->steps);
	if (given & 1u << ZS_KEY_SEED)
		return zs_fail(cause, "--seed is not used with --case: the case holds the weights and batches");
	for (size_t i = 0; i < sizeof training / sizeof training[0]; i++) {
		char mine[40], theirs[40];
		if (!(cs->train.given & 1u << training[i]))
			continue;
		setting_text(c, training[i], mine, sizeof mine);
		setting_text(&cs->train, training[i], theirs, sizeof theirs);
		if ((given & 1u << training[i]) && strcmp(mine, theirs) != 0)
			return zs_fail(cause, "--%s %s disagrees with the case file's %s %s", names[i], mine, names[i], theirs);
	}
	c->nwidths = cs->nwidths;
	memcpy(c->widths, cs->widths, sizeof c->widths);
	c->nworld = 1;
	c->world[0] = cs->world;
	c->batch = cs->batch;
	c->steps = cs->steps;
	const struct zs_config *t = &cs->train;
	if (t->given & 1u << ZS_KEY_PRECISION)
		c->precision = t->precision;
	if (t->given & 1u << ZS_KEY_OPTIMIZER)
		c->optimizer = t->optimizer;
	if (t->given & 1u << ZS_KEY_LR)
		c->lr = t->lr;
	if (t->given & 1u << ZS_KEY_BETA1)
		c->beta1 = t->beta1;
	if (t->given & 1u << ZS_KEY_BETA2)
		c->beta2 = t->beta2;
	if (t->given & 1u << ZS_KEY_EPS)
		c->eps = t->eps;
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
		struct zs_run_options ro = {sw->timeline, sw->dump && i + 1 == sw->njobs, sw->init};
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

enum { OPT_CASE = ZS_OPT_COMMAND, OPT_OUT, OPT_TIMELINE, OPT_DUMP, OPT_QUIET, OPT_JOBS };

static const struct zs_opt options[] = {
	ZS_OPTS_MODEL,
	{"case", 0, 1, OPT_CASE, NULL},
	{"out", 'o', 1, OPT_OUT, NULL},
	{"timeline", 0, 0, OPT_TIMELINE, NULL},
	{"dump-weights", 0, 1, OPT_DUMP, NULL},
	{"quiet", 'q', 0, OPT_QUIET, NULL},
	{"jobs", 'j', 1, OPT_JOBS, NULL},
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
	const struct zs_path in[] = {{"--spec", spec}, {"--case", case_path}};
	const struct zs_path outs[] = {{"--out", out}, {"--dump-weights", dump}};
	if (zs_check_paths(in, 2, outs, 2, &cause) != 0)
		goto fail;
	/* A folder is bad usage; a folder that cannot take the file, a run-time failure. */
	struct stat st;
	if ((out != NULL && stat(out, &st) == 0 && S_ISDIR(st.st_mode)) ||
	    (dump != NULL && stat(dump, &st) == 0 && S_ISDIR(st.st_mode))) {
		const char *d = out != NULL && stat(out, &st) == 0 && S_ISDIR(st.st_mode) ? out : dump;
		zs_fail(&cause, "%s %s: is a folder, not a file", d == out ? "--out" : "--dump-weights", d);
		goto fail;
	}
	if ((out && check_writable(out, &cause) != 0) || (dump && check_writable(dump, &cause) != 0)) {
		status = ZS_EXIT_RUNTIME;
		goto fail;
	}

	status = ZS_EXIT_RUNTIME;
	struct sweep sw;
	sweep_init(&sw, &c, cs, timeline, dump != NULL);
	if (sweep_fit_memory(&sw, jobs, available_memory(), &cause) != 0) {
		sweep_free(&sw);
		goto fail;
	}
	tune_heap(sw.budget);
	root = measure_json_new(&c, case_path);
	init = cs == NULL ? engine_initial_weights(&c) : NULL;
	sw.init = init;
	sw.tty = !quiet && isatty(STDERR_FILENO);
	if (sweep_run(&sw, &cause) != 0) {
		sweep_free(&sw);
		goto fail;
	}
	int diverged = 0;
	for (size_t i = 0; i < sw.njobs; i++) {
		const struct zs_result *res = &sw.res[i];
		for (unsigned t = 0; t < c.steps; t++)
			if (!isfinite(res->losses[t]) && diverged++ == 0)
				fprintf(stderr, "zerosim measure: warning: the loss is not finite (%s, N=%u, step %u): "
				        "training diverged (try a smaller --lr); the bytes are still exact\n",
				        zs_scheme_name(res->scheme), res->world, t + 1);
		measure_json_add_run(root, &c, res);
	}
	if (dump != NULL) { /* the last run's weights */
		cJSON *wj = measure_json_weights(&c, &sw.res[sw.njobs - 1]);
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
		char *text = zs_json_print(root);
		if (fputs(text, stdout) == EOF || fputc('\n', stdout) == EOF || fflush(stdout) != 0) {
			free(text);
			zs_fail(&cause, "cannot write to standard output: %s", strerror(errno));
			goto fail;
		}
		free(text);
	}
	cJSON_Delete(root);
	engine_case_free(cs);
	free(init);
	free(args);
	return ZS_EXIT_OK;

fail:
	zs_print_error("zerosim measure", cause ? cause : "failed");
	free(cause);
	cJSON_Delete(root);
	engine_case_free(cs);
	free(init);
	free(args);
	return status;
}

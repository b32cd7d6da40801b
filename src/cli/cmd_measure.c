/*
 * zerosim measure — run the sweep through the engine and write
 * zerosim-measured/1 (docs/formats.md). One record per (scheme, N, unit).
 */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"
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
	      "      --spec FILE        read the options above from a zerosim-sweep/1 file;\n"
	      "                         options on the command line override it\n"
	      "      --case FILE        initial weights and every batch from a\n"
	      "                         zerosim-case/1 file (fixes layers, world, batch, steps)\n"
	      "\n"
	      "Output:\n"
	      "  -o, --out FILE         write the JSON to FILE (default: standard output)\n"
	      "      --timeline         record rank 0's allocations through the last step\n"
	      "      --dump-weights FILE  write the final fp32 weights (zerosim-weights/1)\n"
	      "  -q, --quiet            no progress line on standard error\n"
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

/* Options the case file fixes: given on the command line, they must agree. */
static int apply_case(struct zs_config *c, const struct zs_case *cs, const int *given, char **cause)
{
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

enum { OPT_SPEC = 256, OPT_CASE, OPT_TIMELINE, OPT_DUMP };

int zs_cmd_measure(int argc, char **argv)
{
	static const struct option longopts[] = {
		{"layers", required_argument, NULL, 'L'},   {"world", required_argument, NULL, 'N'},
		{"schemes", required_argument, NULL, 'S'},  {"scheme", required_argument, NULL, 'S'},
		{"unit", required_argument, NULL, 'U'},     {"steps", required_argument, NULL, 's'},
		{"batch", required_argument, NULL, 'b'},    {"seed", required_argument, NULL, 'r'},
		{"precision", required_argument, NULL, 'p'}, {"optimizer", required_argument, NULL, 'O'},
		{"lr", required_argument, NULL, 'l'},       {"spec", required_argument, NULL, OPT_SPEC},
		{"case", required_argument, NULL, OPT_CASE}, {"out", required_argument, NULL, 'o'},
		{"timeline", no_argument, NULL, OPT_TIMELINE}, {"dump-weights", required_argument, NULL, OPT_DUMP},
		{"quiet", no_argument, NULL, 'q'},          {"help", no_argument, NULL, 'h'},
		{"version", no_argument, NULL, 'V'},        {NULL, 0, NULL, 0},
	};
	struct zs_config c;
	zs_config_defaults(&c);
	const char *spec = NULL, *case_path = NULL, *out = NULL, *dump = NULL;
	int timeline = 0, quiet = 0, ch;
	char *cause = NULL;
	struct zs_case *cs = NULL;
	cJSON *root = NULL;
	int status = ZS_EXIT_USAGE;

	/* First pass: the spec, so that options override it wherever they stand. */
	opterr = 0;
	optind = 1;
	while ((ch = getopt_long(argc, argv, "o:qhV", longopts, NULL)) != -1)
		if (ch == OPT_SPEC)
			spec = optarg;
	if (spec != NULL && zs_config_load_spec(&c, spec, &cause) != 0)
		goto fail;

	int given[4] = {0, 0, 0, 0}; /* layers, world, batch, steps */
	opterr = 0;
	optind = 1;
	while ((ch = getopt_long(argc, argv, ":o:qhV", longopts, NULL)) != -1) {
		const char *key = NULL;
		switch (ch) {
		case 'L': key = "layers"; given[0] = 1; break;
		case 'N': key = "world"; given[1] = 1; break;
		case 'S': key = "schemes"; break;
		case 'U': key = "unit"; break;
		case 's': key = "steps"; given[3] = 1; break;
		case 'b': key = "batch"; given[2] = 1; break;
		case 'r': key = "seed"; break;
		case 'p': key = "precision"; break;
		case 'O': key = "optimizer"; break;
		case 'l': key = "lr"; break;
		case OPT_SPEC: break;
		case OPT_CASE: case_path = optarg; break;
		case 'o': out = optarg; break;
		case OPT_TIMELINE: timeline = 1; break;
		case OPT_DUMP: dump = optarg; break;
		case 'q': quiet = 1; break;
		case 'h':
			usage(stdout);
			return ZS_EXIT_OK; /* main() checks that it was written */
		case 'V':
			printf("zerosim %s\n", PACKAGE_VERSION);
			return ZS_EXIT_OK; /* main() checks that it was written */
		case ':':
			zs_fail(&cause, "option '%s' needs a value", argv[optind - 1]);
			goto fail;
		default:
			zs_fail(&cause, "unknown option '%s'; try 'zerosim measure --help'", argv[optind - 1]);
			goto fail;
		}
		if (key != NULL && zs_config_set(&c, key, optarg, &cause) != 0)
			goto fail;
	}
	if (optind < argc) {
		zs_fail(&cause, "unexpected argument '%s'; try 'zerosim measure --help'", argv[optind]);
		goto fail;
	}
	if ((out != NULL && *out == '\0') || (dump != NULL && *dump == '\0')) {
		zs_fail(&cause, "%s: the file name is empty", out != NULL && *out == '\0' ? "--out" : "--dump-weights");
		goto fail;
	}
	if (case_path != NULL) {
		if (engine_case_load(case_path, &cs, &cause) != 0 || apply_case(&c, cs, given, &cause) != 0)
			goto fail;
	}
	if (zs_config_validate(&c, &cause) != 0)
		goto fail;
	if (check_output("--out", out, spec, case_path, dump, &cause) != 0 ||
	    check_output("--dump-weights", dump, spec, case_path, NULL, &cause) != 0)
		goto fail;
	if ((out && check_writable(out, &cause) != 0) || (dump && check_writable(dump, &cause) != 0)) {
		status = ZS_EXIT_RUNTIME;
		goto fail;
	}

	status = ZS_EXIT_RUNTIME;
	double need = 0, avail = available_memory();
	for (size_t w = 0; w < c.nworld; w++)
		if (engine_bytes_upper_bound(&c, c.world[w]) > need)
			need = engine_bytes_upper_bound(&c, c.world[w]);
	if (avail > 0 && need > avail) {
		zs_fail(&cause, "the largest run needs up to %.3g GB and this machine has %.3g GB available; "
		        "ask 'zerosim theory' instead, or use a smaller --layers or --world", need / 1e9, avail / 1e9);
		goto fail;
	}
#ifdef M_MMAP_THRESHOLD
	/* Runs allocate and free the same large buffers again and again: keep
	 * them in the heap instead of mapping fresh zero pages every time
	 * (a third of the default sweep's time went to page faults). */
	mallopt(M_MMAP_THRESHOLD, 32 * 1024 * 1024); /* glibc's largest */
	mallopt(M_TRIM_THRESHOLD, 64 * 1024 * 1024);
#endif
	root = measure_json_new(&c, case_path);
	size_t total = c.nunits * c.nschemes * c.nworld, done = 0;
	int tty = !quiet && isatty(STDERR_FILENO), shown = 0, diverged = 0;
	double start = now();
	struct zs_result last; /* the last run, kept for --dump-weights */
	memset(&last, 0, sizeof last);
	for (size_t u = 0; u < c.nunits; u++)
		for (size_t sc = 0; sc < c.nschemes; sc++)
			for (size_t w = 0; w < c.nworld; w++) {
				done++;
				struct zs_run_options ro = {timeline, dump != NULL && done == total};
				struct zs_result res;
				if (engine_run(&c, c.schemes[sc], c.world[w], c.units[u], cs, &ro, &res, &cause) != 0)
					goto fail;
				for (unsigned t = 0; t < c.steps; t++)
					if (!isfinite(res.losses[t]) && diverged++ == 0)
						fprintf(stderr, "%szerosim measure: warning: the loss is not finite (%s, N=%u, step %u): "
						        "training diverged (try a smaller --lr); the bytes are still exact\n",
						        shown ? "\n" : "", zs_scheme_name(c.schemes[sc]), c.world[w], t + 1);
				measure_json_add_run(root, &c, &res);
				if (ro.weights)
					last = res;
				else
					engine_result_free(&res);
				if (tty && (shown || now() - start > 1.0)) {
					fprintf(stderr, "\rzerosim measure: run %zu/%zu (%s, N=%u, unit=%s)   ", done, total,
					        zs_scheme_name(c.schemes[sc]), c.world[w], zs_unit_name(c.units[u]));
					shown = 1;
				}
			}
	if (shown)
		fprintf(stderr, "\rzerosim measure: %zu runs in %.1f s%30s\n", total, now() - start, "");

	if (dump != NULL) {
		cJSON *wj = measure_json_weights(&c, &last);
		int r = zs_json_write(dump, wj, &cause);
		cJSON_Delete(wj);
		engine_result_free(&last);
		if (r != 0)
			goto fail;
	}
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
	cJSON_Delete(root);
	engine_case_free(cs);
	return ZS_EXIT_OK;

fail:
	zs_print_error("zerosim measure", cause ? cause : "failed");
	free(cause);
	cJSON_Delete(root);
	engine_case_free(cs);
	return status;
}

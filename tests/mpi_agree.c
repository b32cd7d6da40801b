/*
 * mpi_agree — an MPI run against the in-process run of the same sweep.
 * Requires the two zerosim-measured/1 files' config objects to be equal,
 * joins their runs on (scheme, world, unit) and requires, for every run of
 * the MPI file, every field of the in-process run to be in it and equal
 * (resident and peak bytes and their breakdowns, per-rank figures, host
 * bytes, collectives, losses, weights digest, timeline: all of it), but
 * the fields that say how it ran: "backend" ("mpi" there, "inprocess"
 * here) and "processes" (P there, 1 here). The MPI run may add only its
 * own figures: per_rank.os_peak_bytes, for every rank and never below that
 * rank's tracked peak (the process holding the rank holds at least its
 * bytes; less DeepSpeed's reduce buckets, which are counted at their full
 * size but mapped, so that the pages a small model never writes are never
 * resident: tracker.h), and each collective's mpi_calls_per_step and
 * mpi_bytes_per_step. It also requires the MPI file to have as many runs
 * as it should (EXPECTED_RUNS), so that a sweep that lost runs cannot
 * pass, and, given PROCESSES, each run's "processes" to be it.
 *
 * Usage: mpi_agree INPROCESS.json MPI.json EXPECTED_RUNS [PROCESSES]
 * Prints the first difference and exits 1; 2 if a file cannot be read.
 *
 * mpi_agree --alone TWO.json EACH.json: the processes hold only their own
 * ranks' buffers. TWO has runs over 2 processes, EACH the same runs over N
 * (one rank each): process 0 peaks higher in TWO, where it holds ranks 0
 * to N/2-1, than in EACH, where it holds rank 0 alone, by at least half of
 * what rank 1 holds between steps (resident_bytes; a process holding every
 * rank's buffers would peak alike in both). For runs whose ranks' bytes dwarf the noise of a
 * process's own (tens of MB: DeepSpeed's mapped buckets are not).
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/util.h"

/* Fields only an MPI run has, wherever they are. */
static const char *const mpi_only[] = {"os_peak_bytes", "mpi_calls_per_step", "mpi_bytes_per_step"};
/* Fields of a run that say how it ran. */
static const char *const how[] = {"backend", "processes"};

static int listed(const char *key, const char *const *list, size_t n)
{
	for (size_t i = 0; key != NULL && i < n; i++)
		if (strcmp(key, list[i]) == 0)
			return 1;
	return 0;
}

/* Two JSON values printed alike are alike (numbers print exactly). */
static int same(const cJSON *a, const cJSON *b)
{
	if (a == NULL || b == NULL)
		return a == b;
	char *x = cJSON_PrintUnformatted(a), *y = cJSON_PrintUnformatted(b);
	int eq = x != NULL && y != NULL && strcmp(x, y) == 0;
	cJSON_free(x);
	cJSON_free(y);
	return eq;
}

/* a (in process) against b (MPI) at path: every field of a in b and
 * equal, and b's other fields MPI's own; `top`: a run's own level. */
static int compare(const cJSON *a, const cJSON *b, const char *run, const char *path, int top)
{
	if (cJSON_IsObject(a) && cJSON_IsObject(b)) {
		const cJSON *x;
		cJSON_ArrayForEach(x, a)
		{
			if (top && listed(x->string, how, sizeof how / sizeof *how))
				continue;
			char sub[256];
			snprintf(sub, sizeof sub, "%s%s%s", path, *path ? "." : "", x->string);
			if (compare(x, cJSON_GetObjectItemCaseSensitive(b, x->string), run, sub, 0) != 0)
				return 1;
		}
		cJSON_ArrayForEach(x, b)
		{
			if (cJSON_GetObjectItemCaseSensitive(a, x->string) == NULL &&
			    !listed(x->string, mpi_only, sizeof mpi_only / sizeof *mpi_only) &&
			    !(top && listed(x->string, how, sizeof how / sizeof *how))) {
				fprintf(stderr, "mpi_agree: %s: %s%s%s is in the MPI run only\n", run, path, *path ? "." : "",
				        x->string);
				return 1;
			}
		}
		return 0;
	}
	if (cJSON_IsArray(a) && cJSON_IsArray(b) && cJSON_GetArraySize(a) == cJSON_GetArraySize(b)) {
		for (int i = 0; i < cJSON_GetArraySize(a); i++) {
			char sub[256];
			snprintf(sub, sizeof sub, "%s[%d]", path, i);
			if (compare(cJSON_GetArrayItem(a, i), cJSON_GetArrayItem(b, i), run, sub, 0) != 0)
				return 1;
		}
		return 0;
	}
	if (!cJSON_IsObject(a) && !cJSON_IsArray(a) && same(a, b))
		return 0;
	char *x = a ? cJSON_PrintUnformatted(a) : NULL, *y = b ? cJSON_PrintUnformatted(b) : NULL;
	fprintf(stderr, "mpi_agree: %s: %s is %s in process, %s under MPI\n", run, path, x ? x : "missing",
	        y ? y : "missing");
	cJSON_free(x);
	cJSON_free(y);
	return 1;
}

static const cJSON *find(const cJSON *runs, const cJSON *like)
{
	const cJSON *r;
	cJSON_ArrayForEach(r, runs)
	{
		if (same(cJSON_GetObjectItem(r, "scheme"), cJSON_GetObjectItem(like, "scheme")) &&
		    same(cJSON_GetObjectItem(r, "world"), cJSON_GetObjectItem(like, "world")) &&
		    same(cJSON_GetObjectItem(r, "unit"), cJSON_GetObjectItem(like, "unit")))
			return r;
	}
	return NULL;
}

static double number(const cJSON *o, const char *key)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
	return cJSON_IsNumber(v) ? v->valuedouble : 0;
}

/* The MPI run's own fields: how it ran, and its processes' peaks. */
static int check_mpi(const cJSON *mp, const char *name, int deepspeed, int procs)
{
	const cJSON *backend = cJSON_GetObjectItem(mp, "backend");
	if (!cJSON_IsString(backend) || strcmp(backend->valuestring, "mpi") != 0) {
		fprintf(stderr, "mpi_agree: %s: the backend is not \"mpi\"\n", name);
		return 1;
	}
	int world = cJSON_GetObjectItem(mp, "world")->valueint, p = (int)number(mp, "processes");
	if (p < 1 || world % p != 0 || (procs > 0 && p != procs)) {
		fprintf(stderr, "mpi_agree: %s: \"processes\" is %d\n", name, p);
		return 1;
	}
	const cJSON *coll = cJSON_GetObjectItem(mp, "collectives"), *k;
	cJSON_ArrayForEach(k, coll)
	{
		if (!cJSON_IsNumber(cJSON_GetObjectItem(k, "mpi_calls_per_step")) ||
		    !cJSON_IsNumber(cJSON_GetObjectItem(k, "mpi_bytes_per_step"))) {
			fprintf(stderr, "mpi_agree: %s: collectives.%s has no mpi_calls_per_step or mpi_bytes_per_step\n", name,
			        k->string);
			return 1;
		}
	}
	const cJSON *mpr = cJSON_GetObjectItem(mp, "per_rank");
	const cJSON *os = cJSON_GetObjectItem(mpr, "os_peak_bytes"), *peak = cJSON_GetObjectItem(mpr, "peak_bytes");
	if (!cJSON_IsArray(os) || cJSON_GetArraySize(os) != world) {
		fprintf(stderr, "mpi_agree: %s: per_rank.os_peak_bytes is missing or has not %d entries\n", name, world);
		return 1;
	}
	/* DeepSpeed's buckets are the same on every rank */
	double mapped = deepspeed ? number(cJSON_GetObjectItem(mp, "peak_breakdown"), "buckets") : 0;
	for (int r = 0; r < world; r++) {
		double o = cJSON_GetArrayItem(os, r)->valuedouble, t = cJSON_GetArrayItem(peak, r)->valuedouble - mapped;
		if (!(o >= t)) {
			fprintf(stderr, "mpi_agree: %s: rank %d's process peaked at %.0f bytes, below its tracked peak %.0f\n",
			        name, r, o, t);
			return 1;
		}
	}
	return 0;
}

static double at(const cJSON *run, const char *array, int k)
{
	const cJSON *v = cJSON_GetArrayItem(cJSON_GetObjectItem(cJSON_GetObjectItem(run, "per_rank"), array), k);
	return cJSON_IsNumber(v) ? v->valuedouble : -1;
}

/* Process 0 of each run over two processes (ranks 0 and 1) against
 * process 0 of the same run over N (rank 0 alone). */
static int alone(const cJSON *two, const cJSON *each)
{
	const cJSON *r;
	int n = 0;
	cJSON_ArrayForEach(r, each)
	{
		const cJSON *twin = find(two, r);
		const char *scheme = cJSON_GetStringValue(cJSON_GetObjectItem(r, "scheme"));
		int world = (int)number(r, "world");
		if (twin == NULL || number(twin, "processes") != 2 || number(r, "processes") != world) {
			fprintf(stderr, "mpi_agree: %s N=%d: not over 2 and %d processes in the two files\n", scheme, world, world);
			return 1;
		}
		double o2 = at(twin, "os_peak_bytes", 0), o1 = at(r, "os_peak_bytes", 0), extra = at(r, "resident_bytes", 1);
		printf("%s N=%d: process 0 peaked at %.1f MB holding ranks 0-%d, %.1f MB holding rank 0; rank 1 holds "
		       "%.1f MB between steps\n", scheme, world, o2 / 1e6, world / 2 - 1, o1 / 1e6, extra / 1e6);
		if (!(o2 - o1 >= extra / 2)) {
			fprintf(stderr, "mpi_agree: %s N=%d: one rank alone costs its process as much as more ranks\n", scheme,
			        world);
			return 1;
		}
		n++;
	}
	return n == 0;
}

/* Both files, or a line and 2. */
static int load(const char *a, const char *b, cJSON **x, cJSON **y)
{
	char *cause = NULL;
	*x = *y = NULL;
	if (zs_json_load(a, "zerosim-measured/1", x, &cause) == 0 && zs_json_load(b, "zerosim-measured/1", y, &cause) == 0)
		return 0;
	fprintf(stderr, "mpi_agree: %s\n", cause ? cause : "cannot read input");
	free(cause);
	cJSON_Delete(*x);
	return 2;
}

int main(int argc, char **argv)
{
	zs_json_init(); /* before any cJSON call (util.h) */
	cJSON *ip, *mp;
	if (argc == 4 && strcmp(argv[1], "--alone") == 0) {
		if (load(argv[2], argv[3], &ip, &mp) != 0)
			return 2;
		int bad = alone(cJSON_GetObjectItem(ip, "runs"), cJSON_GetObjectItem(mp, "runs"));
		cJSON_Delete(ip);
		cJSON_Delete(mp);
		return bad;
	}
	if (argc != 4 && argc != 5) {
		fprintf(stderr, "usage: mpi_agree INPROCESS.json MPI.json EXPECTED_RUNS [PROCESSES]\n"
		                "       mpi_agree --alone TWO.json EACH.json\n");
		return 2;
	}
	if (load(argv[1], argv[2], &ip, &mp) != 0)
		return 2;
	const cJSON *config = cJSON_GetObjectItem(mp, "config");
	const cJSON *fw = cJSON_GetObjectItem(config, "framework");
	int deepspeed = cJSON_IsString(fw) && strcmp(fw->valuestring, "deepspeed") == 0;
	int bad = compare(cJSON_GetObjectItem(ip, "config"), config, "the file", "config", 0), n = 0;
	const cJSON *ipruns = cJSON_GetObjectItem(ip, "runs"), *mpruns = cJSON_GetObjectItem(mp, "runs"), *r;
	cJSON_ArrayForEach(r, mpruns)
	{
		if (bad)
			break;
		char name[96];
		snprintf(name, sizeof name, "%s N=%d unit=%s", cJSON_GetStringValue(cJSON_GetObjectItem(r, "scheme")),
		         cJSON_GetObjectItem(r, "world")->valueint, cJSON_GetStringValue(cJSON_GetObjectItem(r, "unit")));
		const cJSON *twin = find(ipruns, r);
		if (twin == NULL) {
			fprintf(stderr, "mpi_agree: %s: not in the in-process file\n", name);
			bad = 1;
			break;
		}
		if ((bad = compare(twin, r, name, "", 1) || check_mpi(r, name, deepspeed, argc == 5 ? atoi(argv[4]) : 0)) != 0)
			break;
		n++;
	}
	if (!bad && n != atoi(argv[3])) {
		fprintf(stderr, "mpi_agree: %d runs agree, but %s were expected\n", n, argv[3]);
		bad = 1;
	}
	cJSON_Delete(ip);
	cJSON_Delete(mp);
	return bad;
}

/*
 * mpi_agree — an MPI run against the in-process run of the same sweep.
 * Joins two zerosim-measured/1 files on (scheme, world, unit) and requires,
 * for every run of the MPI file: backend "mpi"; resident, peak and comm
 * bytes, every category of both breakdowns, the calls and bytes of every
 * collective, the losses, the weights digest and every per-rank array of
 * the in-process file equal to the in-process run's; and per_rank
 * os_peak_bytes present for every rank and never below that rank's
 * tracked peak (the process holding the rank holds at least its bytes).
 * It also requires the MPI file to have as many runs as it should
 * (EXPECTED_RUNS), so that a sweep that lost runs cannot pass.
 *
 * Usage: mpi_agree INPROCESS.json MPI.json EXPECTED_RUNS
 * Prints the first difference and exits 1; 2 if a file cannot be read.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/util.h"

static const char *const numbers[] = {"resident_bytes", "peak_bytes", "comm_bytes_per_rank_per_step", "world",
                                      "shard_elements", "padded_elements", "peak_rank", "final_loss"};
static const char *const objects[] = {"resident_breakdown", "peak_breakdown", "units", "losses"};
static const char *const per_rank[] = {"resident_bytes", "peak_bytes", "comm_bytes_per_step"};
static const char *const kinds[] = {"all_reduce", "reduce_scatter", "all_gather"};

static int differ(const char *what, const char *run, const char *key)
{
	fprintf(stderr, "mpi_agree: %s: %s differs from the in-process run's%s%s\n", run, what, key ? " at " : "",
	        key ? key : "");
	return 1;
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

static int check_run(const cJSON *ip, const cJSON *mp, const char *name)
{
	if (!cJSON_IsString(cJSON_GetObjectItem(mp, "backend")) ||
	    strcmp(cJSON_GetObjectItem(mp, "backend")->valuestring, "mpi") != 0)
		return differ("the backend (not \"mpi\")", name, NULL);
	for (size_t i = 0; i < sizeof numbers / sizeof *numbers; i++)
		if (!same(cJSON_GetObjectItem(ip, numbers[i]), cJSON_GetObjectItem(mp, numbers[i])))
			return differ(numbers[i], name, NULL);
	for (size_t i = 0; i < sizeof objects / sizeof *objects; i++)
		if (!same(cJSON_GetObjectItem(ip, objects[i]), cJSON_GetObjectItem(mp, objects[i])))
			return differ(objects[i], name, NULL);
	if (!same(cJSON_GetObjectItem(ip, "weights_digest"), cJSON_GetObjectItem(mp, "weights_digest")))
		return differ("the weights digest", name, NULL);
	const cJSON *ipc = cJSON_GetObjectItem(ip, "collectives"), *mpc = cJSON_GetObjectItem(mp, "collectives");
	for (size_t i = 0; i < sizeof kinds / sizeof *kinds; i++) {
		const cJSON *a = cJSON_GetObjectItem(ipc, kinds[i]), *b = cJSON_GetObjectItem(mpc, kinds[i]);
		if (!same(cJSON_GetObjectItem(a, "calls_per_step"), cJSON_GetObjectItem(b, "calls_per_step")) ||
		    !same(cJSON_GetObjectItem(a, "bytes_per_step"), cJSON_GetObjectItem(b, "bytes_per_step")))
			return differ("collectives", name, kinds[i]);
		if (!cJSON_IsNumber(cJSON_GetObjectItem(b, "mpi_bytes_per_step")))
			return differ("collectives (no mpi_bytes_per_step)", name, kinds[i]);
	}
	const cJSON *ipr = cJSON_GetObjectItem(ip, "per_rank"), *mpr = cJSON_GetObjectItem(mp, "per_rank");
	for (size_t i = 0; i < sizeof per_rank / sizeof *per_rank; i++)
		if (!same(cJSON_GetObjectItem(ipr, per_rank[i]), cJSON_GetObjectItem(mpr, per_rank[i])))
			return differ("per_rank", name, per_rank[i]);
	const cJSON *os = cJSON_GetObjectItem(mpr, "os_peak_bytes"), *peak = cJSON_GetObjectItem(mpr, "peak_bytes");
	int world = cJSON_GetObjectItem(mp, "world")->valueint;
	if (!cJSON_IsArray(os) || cJSON_GetArraySize(os) != world) {
		fprintf(stderr, "mpi_agree: %s: per_rank.os_peak_bytes is missing or has not %d entries\n", name, world);
		return 1;
	}
	for (int k = 0; k < world; k++) {
		double o = cJSON_GetArrayItem(os, k)->valuedouble, t = cJSON_GetArrayItem(peak, k)->valuedouble;
		if (!(o >= t)) {
			fprintf(stderr, "mpi_agree: %s: rank %d's process peaked at %.0f bytes, below its tracked peak %.0f\n",
			        name, k, o, t);
			return 1;
		}
	}
	return 0;
}

int main(int argc, char **argv)
{
	if (argc != 4) {
		fprintf(stderr, "usage: mpi_agree INPROCESS.json MPI.json EXPECTED_RUNS\n");
		return 2;
	}
	cJSON *ip = NULL, *mp = NULL;
	char *cause = NULL;
	if (zs_json_load(argv[1], "zerosim-measured/1", &ip, &cause) != 0 ||
	    zs_json_load(argv[2], "zerosim-measured/1", &mp, &cause) != 0) {
		fprintf(stderr, "mpi_agree: %s\n", cause ? cause : "cannot read input");
		free(cause);
		cJSON_Delete(ip);
		return 2;
	}
	const cJSON *ipruns = cJSON_GetObjectItem(ip, "runs"), *mpruns = cJSON_GetObjectItem(mp, "runs"), *r;
	int bad = 0, n = 0;
	cJSON_ArrayForEach(r, mpruns)
	{
		char name[96];
		snprintf(name, sizeof name, "%s N=%d unit=%s", cJSON_GetStringValue(cJSON_GetObjectItem(r, "scheme")),
		         cJSON_GetObjectItem(r, "world")->valueint, cJSON_GetStringValue(cJSON_GetObjectItem(r, "unit")));
		const cJSON *twin = find(ipruns, r);
		if (twin == NULL) {
			fprintf(stderr, "mpi_agree: %s: not in the in-process file\n", name);
			bad = 1;
			break;
		}
		if ((bad = check_run(twin, r, name)) != 0)
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

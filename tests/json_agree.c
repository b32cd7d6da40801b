/*
 * json_agree — join a zerosim-measured/1 file and a zerosim-theory/1 file on
 * (scheme, world, unit) and require the schedule model to equal the
 * measurement exactly: resident_bytes, peak_bytes,
 * comm_bytes_per_rank_per_step, every category of peak_breakdown (and of
 * resident_breakdown, and every rank's bytes, when the measurement has
 * them; with a --timeline, each phase's peak and the binding phase). docs/schedule.md is the contract both sides implement, so any
 * difference is a bug in one of them; the first one is printed and the
 * program exits 1. Exit 2 if a file cannot be read.
 *
 * Usage: json_agree MEASURED.json THEORY.json
 * Links libzsutil.a and cJSON only: it reads the files, nothing else.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/schedule.h"
#include "util/util.h"


static const char *measured_path, *theory_path;

static int fail_load(char *cause)
{
	fprintf(stderr, "json_agree: %s\n", cause != NULL ? cause : "cannot read input");
	free(cause);
	return 2;
}

/* A run's label for messages: "zero3 N=4 unit=layer". */
static void label(char *buf, size_t size, const char *scheme, double world, const char *unit)
{
	snprintf(buf, size, "%s N=%.0f unit=%s", scheme, world, unit);
}

static int mismatch(const char *run, const char *metric, double measured, double theory)
{
	fprintf(stderr,
	        "json_agree: MISMATCH %s %s: measured %.17g, schedule %.17g (measured - schedule = %.17g)\n"
	        "  measured: %s\n  theory:   %s\n",
	        run, metric, measured, theory, measured - theory, measured_path, theory_path);
	return 1;
}

/* Compare one number that both objects must have. */
static int same(const cJSON *m, const cJSON *t, const char *key, const char *run,
                const char *prefix, char **cause)
{
	double mv, tv;
	char metric[128];

	if (zs_json_number(m, key, run, &mv, cause) < 0 || zs_json_number(t, key, run, &tv, cause) < 0)
		return 2;
	snprintf(metric, sizeof metric, "%s%s", prefix, key);
	return mv == tv ? 0 : mismatch(run, metric, mv, tv);
}

static int same_breakdown(const cJSON *mrun, const cJSON *sched, const char *key,
                          const char *run, int required, char **cause)
{
	const cJSON *mb, *tb;
	char prefix[64];

	if (!required && cJSON_GetObjectItemCaseSensitive(mrun, key) == NULL)
		return 0;
	if (zs_json_object(mrun, key, run, &mb, cause) < 0
	    || zs_json_object(sched, key, run, &tb, cause) < 0)
		return 2;
	snprintf(prefix, sizeof prefix, "%s.", key);
	for (int c = 0; c < ZS_NCATS; c++) {
		const char *name = zs_cat_name((enum zs_cat)c);
		if (!cJSON_HasObjectItem(mb, name) && !cJSON_HasObjectItem(tb, name))
			continue; /* a category neither lists (zs_cat_json): 0 on both sides */
		int r = same(mb, tb, name, run, prefix, cause);
		if (r != 0)
			return r;
	}
	return 0;
}

/* With an offload, the host bytes too: the run's, and every rank's (all
 * ranks equal). A theory row with host bytes for a run without them is a
 * mismatch as well. */
static int same_host(const cJSON *mrun, const cJSON *sched, const char *run, char **cause)
{
	static const char *const keys[] = {"host_resident_bytes", "host_peak_bytes"};
	const cJSON *per = cJSON_GetObjectItemCaseSensitive(mrun, "per_rank");
	if (cJSON_GetObjectItemCaseSensitive(mrun, keys[0]) == NULL)
		return cJSON_GetObjectItemCaseSensitive(sched, keys[0]) == NULL ? 0 : mismatch(run, keys[0], 0, 1);
	for (size_t i = 0; i < 2; i++) {
		const cJSON *arr, *v;
		double tv;
		int r = same(mrun, sched, keys[i], run, "", cause), k = 0;
		if (r == 0 && i == 0)
			r = same(mrun, sched, "host_resident_bytes_per_node", run, "", cause);
		if (r != 0)
			return r;
		if (zs_json_array(per, keys[i], run, &arr, cause) < 0 || zs_json_number(sched, keys[i], run, &tv, cause) < 0)
			return 2;
		cJSON_ArrayForEach(v, arr) {
			char metric[64];
			snprintf(metric, sizeof metric, "per_rank.%s[%d]", keys[i], k++);
			if (!cJSON_IsNumber(v) || v->valuedouble != tv)
				return mismatch(run, metric, cJSON_IsNumber(v) ? v->valuedouble : -1, tv);
		}
	}
	return 0;
}

/* Every rank holds and sends the schedule's bytes: all ranks are equal,
 * unless the schedule has per-rank arrays of its own (a framework's uneven
 * partition), which must then be the measured ones. */
static int same_per_rank(const cJSON *mrun, const cJSON *sched, const char *run, char **cause)
{
	static const struct { const char *rank_key, *sched_key; } pairs[] = {
		{ "resident_bytes", "resident_bytes" },
		{ "peak_bytes", "peak_bytes" },
		{ "comm_bytes_per_step", "comm_bytes_per_rank_per_step" },
	};
	const cJSON *per_rank = cJSON_GetObjectItemCaseSensitive(mrun, "per_rank");
	const cJSON *theirs = cJSON_GetObjectItemCaseSensitive(sched, "per_rank");

	if (!cJSON_IsObject(per_rank))
		return 0;
	for (size_t i = 0; i < sizeof pairs / sizeof pairs[0]; i++) {
		const cJSON *arr, *v;
		double want;
		int r = 0;
		char metric[96];

		if (zs_json_array(per_rank, pairs[i].rank_key, run, &arr, cause) < 0
		    || zs_json_number(sched, pairs[i].sched_key, run, &want, cause) < 0)
			return 2;
		const cJSON *tarr = NULL;
		if (theirs != NULL && zs_json_array(theirs, pairs[i].rank_key, run, &tarr, cause) < 0)
			return 2;
		if (tarr != NULL && cJSON_GetArraySize(tarr) != cJSON_GetArraySize(arr))
			return mismatch(run, "per_rank ranks", cJSON_GetArraySize(arr), cJSON_GetArraySize(tarr));
		cJSON_ArrayForEach(v, arr) {
			if (tarr != NULL)
				want = cJSON_GetArrayItem(tarr, r)->valuedouble;
			snprintf(metric, sizeof metric, "per_rank.%s[%d]", pairs[i].rank_key, r++);
			if (!cJSON_IsNumber(v) || v->valuedouble != want)
				return mismatch(run, metric, cJSON_IsNumber(v) ? v->valuedouble : -1, want);
		}
	}
	return 0;
}

/* With the measured run's --timeline (rank 0's events) where rank 0 binds:
 * each phase's peak the theory lists (phase_peak_bytes) is the most the
 * timeline holds in that phase, and binding_phase the phase of the
 * timeline's first event at the peak (docs/formats.md). Without a
 * timeline there is nothing to hold them to. */
static double timeline_most(const cJSON *tl, const char *phase)
{
	const cJSON *e;
	double most = -1;
	cJSON_ArrayForEach(e, tl) {
		const cJSON *ph = cJSON_GetObjectItemCaseSensitive(e, "phase");
		const cJSON *cur = cJSON_GetObjectItemCaseSensitive(e, "current_bytes");
		if (cJSON_IsString(ph) && strcmp(ph->valuestring, phase) == 0 && cJSON_IsNumber(cur) && cur->valuedouble > most)
			most = cur->valuedouble;
	}
	return most;
}

static int same_phases(const cJSON *mrun, const cJSON *sched, const char *run)
{
	const cJSON *tl = cJSON_GetObjectItemCaseSensitive(mrun, "timeline");
	const cJSON *pp = cJSON_GetObjectItemCaseSensitive(sched, "phase_peak_bytes");
	const cJSON *bind = cJSON_GetObjectItemCaseSensitive(sched, "binding_phase");
	const cJSON *rank = cJSON_GetObjectItemCaseSensitive(mrun, "peak_rank");
	const cJSON *peak = cJSON_GetObjectItemCaseSensitive(mrun, "peak_bytes"), *p, *e;
	char metric[96];
	if (!cJSON_IsArray(tl) || !cJSON_IsObject(pp) || !cJSON_IsString(bind) || !cJSON_IsNumber(rank) ||
	    rank->valuedouble != 0 || !cJSON_IsNumber(peak))
		return 0;
	/* a run whose peak is reached before the last step (its own peak
	 * above every event of the timeline: ZeRO-3's step 1, whose fetches
	 * hold a lone param's padded buffer where later steps' prefetch holds
	 * n, docs/schedule.md) holds each phase's timeline to at most the
	 * theory's, which is over every step */
	double tl_most = -1;
	cJSON_ArrayForEach(e, tl) {
		const cJSON *cur = cJSON_GetObjectItemCaseSensitive(e, "current_bytes");
		if (cJSON_IsNumber(cur) && cur->valuedouble > tl_most)
			tl_most = cur->valuedouble;
	}
	const cJSON *bp = cJSON_GetObjectItemCaseSensitive(pp, bind->valuestring);
	int earlier = tl_most < peak->valuedouble && cJSON_IsNumber(bp) && bp->valuedouble == peak->valuedouble &&
	              strcmp(bind->valuestring, "setup") != 0;
	cJSON_ArrayForEach(p, pp) {
		double most = timeline_most(tl, p->string);
		snprintf(metric, sizeof metric, "phase_peak_bytes.%s (the timeline's most)", p->string);
		if (!cJSON_IsNumber(p) || (earlier ? most > p->valuedouble : most != p->valuedouble))
			return mismatch(run, metric, most, cJSON_IsNumber(p) ? p->valuedouble : -1);
	}
	if (earlier)
		return 0;
	/* the set-up's own peak (DDP's broadcast copy at construction: docs/
	 * formats.md) binds before the last step the timeline records: then
	 * no event of it may reach the peak */
	const cJSON *sp = cJSON_GetObjectItemCaseSensitive(pp, "setup");
	int before = strcmp(bind->valuestring, "setup") == 0 && cJSON_IsNumber(sp) && sp->valuedouble < peak->valuedouble;
	cJSON_ArrayForEach(e, tl) {
		const cJSON *ph = cJSON_GetObjectItemCaseSensitive(e, "phase");
		const cJSON *cur = cJSON_GetObjectItemCaseSensitive(e, "current_bytes");
		if (!cJSON_IsNumber(cur) || cur->valuedouble < peak->valuedouble)
			continue;
		if (before || cur->valuedouble > peak->valuedouble)
			return mismatch(run, before ? "peak_bytes (the set-up's own, reached in the timeline)"
			                            : "peak_bytes (a timeline event above it)", cur->valuedouble, peak->valuedouble);
		if (cJSON_IsString(ph) && strcmp(ph->valuestring, bind->valuestring) == 0)
			return 0;
		fprintf(stderr, "json_agree: MISMATCH %s binding_phase: the timeline first reaches the peak in %s, the "
		        "schedule says %s\n  measured: %s\n  theory:   %s\n", run, cJSON_IsString(ph) ? ph->valuestring : "?",
		        bind->valuestring, measured_path, theory_path);
		return 1;
	}
	return before ? 0 : mismatch(run, "peak_bytes (no timeline event at it)", -1, peak->valuedouble);
}

int main(int argc, char **argv)
{
	zs_json_init(); /* before any cJSON call (util.h) */
	cJSON *measured = NULL, *theory = NULL;
	const cJSON *runs, *rows, *mrun, *row;
	char *cause = NULL;
	double mparams, tparams;
	int status = 2, points = 0, matched_rows = 0;

	if (argc != 3) {
		fputs("usage: json_agree MEASURED.json THEORY.json\n", stderr);
		return 2;
	}
	measured_path = argv[1];
	theory_path = argv[2];
	if (zs_json_load(measured_path, "zerosim-measured/1", &measured, &cause) < 0
	    || zs_json_load(theory_path, "zerosim-theory/1", &theory, &cause) < 0)
		goto bad;
	{
		const cJSON *cfg;
		if (zs_json_object(measured, "config", measured_path, &cfg, &cause) < 0
		    || zs_json_number(cfg, "params", "config", &mparams, &cause) < 0
		    || zs_json_number(theory, "params", theory_path, &tparams, &cause) < 0)
			goto bad;
	}
	if (mparams != tparams) {
		status = mismatch("config", "params", mparams, tparams);
		goto end;
	}
	if (zs_json_array(measured, "runs", measured_path, &runs, &cause) < 0
	    || zs_json_array(theory, "rows", theory_path, &rows, &cause) < 0)
		goto bad;

	cJSON_ArrayForEach(mrun, runs) {
		const char *scheme, *unit;
		double world;
		const cJSON *match = NULL, *sched;
		char run[96];
		int r;

		if (zs_json_string(mrun, "scheme", "runs[]", &scheme, &cause) < 0
		    || zs_json_number(mrun, "world", "runs[]", &world, &cause) < 0
		    || zs_json_string(mrun, "unit", "runs[]", &unit, &cause) < 0)
			goto bad;
		label(run, sizeof run, scheme, world, unit);
		cJSON_ArrayForEach(row, rows) {
			const cJSON *s = cJSON_GetObjectItemCaseSensitive(row, "scheme");
			const cJSON *w = cJSON_GetObjectItemCaseSensitive(row, "world");
			const cJSON *u = cJSON_GetObjectItemCaseSensitive(row, "unit");

			if (cJSON_IsString(s) && strcmp(s->valuestring, scheme) == 0
			    && cJSON_IsNumber(w) && w->valuedouble == world
			    && cJSON_IsString(u) && strcmp(u->valuestring, unit) == 0) {
				match = row;
				break;
			}
		}
		if (match == NULL) {
			fprintf(stderr, "json_agree: MISMATCH %s: measured, but no theory row (%s)\n",
			        run, theory_path);
			status = 1;
			goto end;
		}
		matched_rows++;
		if (zs_json_object(match, "schedule", run, &sched, &cause) < 0)
			goto bad;
		if ((r = same(mrun, sched, "resident_bytes", run, "", &cause)) != 0
		    || (r = same(mrun, sched, "peak_bytes", run, "", &cause)) != 0
		    || (r = same(mrun, sched, "comm_bytes_per_rank_per_step", run, "", &cause)) != 0
		    || (r = same_breakdown(mrun, sched, "peak_breakdown", run, 1, &cause)) != 0
		    || (r = same_breakdown(mrun, sched, "resident_breakdown", run, 0, &cause)) != 0
		    || (r = same_per_rank(mrun, sched, run, &cause)) != 0
		    || (r = same_host(mrun, sched, run, &cause)) != 0 || (r = same_phases(mrun, sched, run)) != 0) {
			if (r == 2)
				goto bad;
			status = r;
			goto end;
		}
		points++;
	}
	if (matched_rows != cJSON_GetArraySize(rows)) {
		fprintf(stderr, "json_agree: MISMATCH: %d measured runs but %d theory rows\n",
		        matched_rows, cJSON_GetArraySize(rows));
		status = 1;
		goto end;
	}
	if (points == 0) {
		fprintf(stderr, "json_agree: %s has no runs\n", measured_path);
		status = 1;
		goto end;
	}
	printf("json_agree: %d points agree exactly\n", points);
	status = 0;
	goto end;

bad:
	status = fail_load(cause);
	cause = NULL;
end:
	free(cause);
	cJSON_Delete(measured);
	cJSON_Delete(theory);
	return status;
}

/*
 * fuzz_routing — libFuzzer harness for the reader of `zerosim theory
 * --routing FILE` (theory_routing_parse, theory/theory_routing.c): a
 * measured.json's "routing" of every run (docs/formats.md). A file it
 * refuses must say why in one line that names the file, and hold nothing
 * (the leak check). One it loads must hold every run's counts as the
 * file's lists gave them; they are then checked against a mixtral of the
 * first run's shape (theory_routing_check, as theory does for its sweep),
 * and what that accepts must be what the walk relies on: each rank's
 * every block summing to B·T·k, no expert above B·T.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "fuzz_common.h"
#include "theory/theory.h"
#include "util/config.h"
#include "util/model.h"
#include "util/util.h"

/* A refusal: one line, naming the file. */
static void refused(const char *path, char *cause)
{
	if (cause == NULL || strlen(cause) == 0 || strchr(cause, '\n') != NULL || strstr(cause, path) == NULL)
		abort();
	free(cause);
}

/* Run x against a mixtral of its shape, top k of its experts, at the B·T
 * its first block's counts give. */
static void check(const struct theory_routing *r, const struct theory_routing_run *x, const char *path)
{
	uint64_t sum = 0;
	for (size_t e = 0; e < x->experts; e++)
		sum += x->counts[e];
	uint64_t k = x->experts >= 2 && sum % 2 == 0 ? 2 : 1, BT = sum / k;
	if (BT == 0)
		return;
	struct zs_model m;
	struct zs_config c;
	memset(&m, 0, sizeof m);
	snprintf(m.name, sizeof m.name, "fuzz-mixtral");
	m.layers = x->blocks;
	m.experts = x->experts;
	m.experts_per_tok = k;
	zs_config_defaults(&c);
	c.world[0] = x->world;
	c.nworld = 1;
	c.schemes[0] = x->scheme;
	c.nschemes = 1;
	c.units[0] = x->unit;
	c.nunits = 1;
	c.steps = (unsigned)x->steps;
	char *cause = NULL;
	if (x->steps != c.steps || theory_routing_check(r, &m, &c, BT, &cause) != 0) {
		if (x->steps == c.steps)
			refused(path, cause);
		return;
	}
	if (cause != NULL)
		abort();
	for (unsigned rank = 0; rank < x->world; rank++) {
		struct theory_rank_counts rc;
		theory_rank_counts(&rc, r, &m, BT, x->scheme, x->unit, x->world, rank);
		if (rc.steps != x->steps || rc.blocks != x->blocks || rc.experts != x->experts)
			abort();
		for (size_t i = 0; i < rc.steps * rc.blocks; i++) {
			uint64_t s = 0;
			for (size_t e = 0; e < rc.experts; e++) {
				if (rc.counts[i * rc.experts + e] > BT)
					abort(); /* the check let an expert take a token twice */
				s += rc.counts[i * rc.experts + e];
			}
			if (s != BT * k)
				abort(); /* the check let a block route other than B·T·k */
		}
		theory_rank_counts_free(&rc);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct theory_routing r;
	char *cause = NULL;
	const char *path = fuzz_file(data, size);

	if (theory_routing_parse(&r, path, &cause) != 0) {
		refused(path, cause);
		if (r.run != NULL || r.nruns != 0)
			abort(); /* a refused file left runs behind */
		return 0;
	}
	if (cause != NULL || r.mode != THEORY_ROUTING_FILE || r.nruns == 0 || r.run == NULL)
		abort();
	for (size_t i = 0; i < r.nruns; i++) {
		const struct theory_routing_run *x = &r.run[i];
		if (x->world < 1 || x->world > ZS_MAX_WORLD || x->steps < 1 || x->blocks < 1 || x->experts < 1 ||
		    x->experts > ZS_MODEL_MAX_EXPERTS || x->counts == NULL || x->json == NULL)
			abort();
	}
	check(&r, &r.run[0], path);
	theory_routing_free(&r);
	return 0;
}

/*
 * fuzz_model — libFuzzer harness for the Hugging Face config reader
 * (zs_model_load, util/model.h) and the theory computed from what it
 * accepts. A config that loads must satisfy the reader's limits, and its
 * units must add up to its parameter count; the peak of every scheme is
 * then computed at a short sequence. One that does not load must say why
 * in one line and leave the model untouched.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "fuzz_common.h"
#include "theory/theory.h"
#include "util/model.h"
#include "util/util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct zs_model m, before;
	char *cause = NULL;

	memset(&m, 0x5a, sizeof m);
	memcpy(&before, &m, sizeof m);
	if (zs_model_load(fuzz_file(data, size), &m, &cause) != 0) {
		if (cause == NULL || strlen(cause) == 0 || strchr(cause, '\n') != NULL)
			abort();
		if (memcmp(&m, &before, sizeof m) != 0)
			abort(); /* a refused config changed the model */
		free(cause);
		return 0;
	}
	if (cause != NULL)
		abort();
	if (m.hidden < 1 || m.hidden > ZS_MODEL_MAX_WIDTH || m.layers < 1 ||
	    m.layers > ZS_MODEL_MAX_LAYERS || m.heads < 1 || m.kv_heads < 1 ||
	    m.heads % m.kv_heads != 0 || m.head_dim < 1 || m.head_dim * m.heads > ZS_MODEL_MAX_WIDTH ||
	    m.vocab < 1 || m.vocab > ZS_MODEL_MAX_VOCAB || m.positions < 1 || m.intermediate < 1)
		abort(); /* the reader let a shape through its own limits */

	struct theory_units u;
	theory_tfm_units(&m, &u);
	uint64_t psi = theory_tfm_params(&m);
	if (u.embeddings + u.layers * u.block + u.head != psi || psi == 0)
		abort();
	if ((double)psi > ZS_MAX_PARAMS)
		return 0; /* the command line refuses it */

	struct theory_act_opts o = { .seq = m.positions < 64 ? m.positions : 64, .elem = 2 };
	struct theory_bytes b;
	theory_bytes_per_param(ZS_MIXED, ZS_ADAM, &b);
	if (!theory_tfm_exact(&m, &o, 1))
		return 0;
	for (int s = 0; s < ZS_NSCHEMES; s++) {
		struct theory_peak p;
		theory_tfm_peak(&m, &o, &b, 1, (enum zs_scheme)s, ZS_UNIT_LAYER, 3, &p);
		if (p.peak_bytes < p.states.resident_bytes || p.activations == 0)
			abort();
	}
	return 0;
}

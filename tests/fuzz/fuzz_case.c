/*
 * fuzz_case — libFuzzer harness for the case-file reader
 * (engine_case_load, docs/formats.md "Case": an MLP's or a transformer's,
 * with its weights in the file or in a side file). Every input must
 * either load or be refused with a sentence; nothing may crash, leak, or
 * allocate more than the file can justify.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "fuzz_common.h"
#include "engine/engine.h"
#include "engine/tfm.h"
#include "util/util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct zs_case *cs = NULL;
	char *cause = NULL;

	if (engine_case_load(fuzz_file(data, size), &cs, &cause) == 0) {
		/* A loaded case must be whole: touch every value it promises. */
		volatile float sink = 0;
		size_t per = (size_t)cs->steps * cs->world * cs->batch;
		if (cs->tfm != NULL) { /* a transformer: Ψ weights, seq + 1 ids a row, each in the vocabulary */
			size_t psi = tfm_nparams(&cs->tfm->dims);
			for (size_t i = 0; i < psi; i++)
				sink += cs->weights[i];
			for (size_t i = 0; i < per * (cs->tfm->seq + 1); i++)
				if (cs->tokens[i] < 0 || (size_t)cs->tokens[i] >= cs->tfm->dims.vocab)
					abort(); /* an id the reader let through */
		} else {
			size_t psi = 0;
			for (size_t l = 0; l + 1 < cs->nwidths; l++)
				psi += cs->widths[l] * cs->widths[l + 1] + cs->widths[l + 1];
			for (size_t i = 0; i < psi; i++)
				sink += cs->weights[i];
			for (size_t i = 0; i < per * cs->widths[0]; i++)
				sink += cs->x[i];
			for (size_t i = 0; i < per * cs->widths[cs->nwidths - 1]; i++)
				sink += cs->y[i];
		}
		(void)sink;
		if (cause != NULL)
			abort(); /* success with a cause set */
		engine_case_free(cs);
	} else if (cause == NULL || strlen(cause) == 0 || strchr(cause, '\n') != NULL) {
		abort(); /* a refusal must say why, in one line */
	}
	free(cause);
	return 0;
}

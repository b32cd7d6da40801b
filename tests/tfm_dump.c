/*
 * tfm_dump — what the PyTorch agreement test (tests/tfm_torch.sh) needs
 * from zerosim beyond what `zerosim measure` writes.
 *
 *   tests/tfm_dump CASE DIR
 *
 * reads a transformer's zerosim-case/2 file (written by measure
 * --write-case: the model, the tokens, the initial weights in their side
 * file, the optimizer), trains rank 0's batches with the model the engine
 * runs (tfm_driver_step, equal to the engine bit for bit: test_tfm) and
 * writes
 *
 *   DIR/model.json  each step's loss (before its update) and the loss on
 *                   the last batch after the last update;
 *   DIR/grad1.f32   the first step's gradient, Ψ raw little-endian float32;
 *   DIR/step1.f32   the weights after the first step, the same way.
 *
 * The initial weights, the tokens and the settings tests/tfm_torch.py
 * takes from the case itself, and the run's losses and final weights from
 * `measure --case` (measured.json, --dump-weights).
 */
#include "config.h"

#include <cjson/cJSON.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/engine.h"
#include "engine/optim.h"
#include "engine/tfm.h"
#include "util/util.h"
#include "tfm_driver.h"

static void write_f32(const char *dir, const char *name, const float *w, size_t n)
{
	unsigned char *buf = zs_malloc(4 * n);
	for (size_t i = 0; i < n; i++) {
		uint32_t u;
		memcpy(&u, &w[i], 4);
		for (int k = 0; k < 4; k++)
			buf[4 * i + (size_t)k] = (unsigned char)(u >> (8 * k));
	}
	char *path = zs_asprintf("%s/%s", dir, name), *cause = NULL;
	if (zs_write_atomic(path, (const char *)buf, 4 * n, &cause) != 0) {
		zs_print_error("tfm_dump", cause);
		exit(1);
	}
	free(path);
	free(buf);
}

int main(int argc, char **argv)
{
	zs_json_init(); /* before any cJSON call (util.h) */
	if (argc != 3) {
		fprintf(stderr, "usage: tfm_dump CASE DIR\n");
		return 2;
	}
	struct zs_case *cs;
	char *cause = NULL;
	if (engine_case_load(argv[1], &cs, &cause) != 0 || cs->tfm == NULL ||
	    (cs->train.given & ZS_KEY_BIT(ZS_KEY_OPTIMIZER) && cs->train.optimizer != ZS_ADAM)) {
		zs_print_error("tfm_dump", cause != NULL ? cause : "the case is not a transformer's trained by Adam");
		return 2;
	}
	const struct zs_config *tr = &cs->train;
	size_t B = cs->batch, T = cs->tfm->seq;
	struct tfm_driver m;
	tfm_driver_init(&m, &cs->tfm->dims, B, T, ZS_RECOMPUTE_NONE);
	memcpy(m.params, cs->weights, m.nparams * sizeof *m.params);
	float *mo = zs_calloc(m.nparams, sizeof *mo), *v = zs_calloc(m.nparams, sizeof *v);
	struct optim o;
	optim_init(&o, ZS_ADAM, tr->lr);
	o.beta1 = (float)tr->beta1, o.beta2 = (float)tr->beta2, o.eps = (float)tr->eps;

	cJSON *run = cJSON_CreateObject(), *losses = cJSON_AddArrayToObject(run, "losses");
	int *in = zs_malloc(B * T * sizeof *in), *target = zs_malloc(B * T * sizeof *target);
	for (unsigned s = 0; s < cs->steps; s++) {
		const int *row = cs->tokens + (size_t)s * cs->world * B * (T + 1); /* rank 0's */
		for (size_t b = 0; b < B; b++, row += T + 1) {
			memcpy(in + b * T, row, T * sizeof *in);
			memcpy(target + b * T, row + 1, T * sizeof *target);
		}
		float loss = tfm_driver_step(&m, in, target);
		cJSON_AddItemToArray(losses, cJSON_CreateNumber((double)loss));
		if (s == 0)
			write_f32(argv[2], "grad1.f32", m.grads, m.nparams);
		optim_update(&o, s + 1, m.params, mo, v, m.grads, ZS_F32, NULL, m.nparams);
		if (s == 0)
			write_f32(argv[2], "step1.f32", m.params, m.nparams);
	}
	cJSON_AddNumberToObject(run, "final_loss", (double)tfm_driver_loss(&m, in, target));

	char *path = zs_asprintf("%s/model.json", argv[2]);
	int rc = zs_json_write(path, run, &cause);
	if (rc != 0)
		zs_print_error("tfm_dump", cause);
	free(cause);
	free(path);
	cJSON_Delete(run);
	free(in);
	free(target);
	free(mo);
	free(v);
	tfm_driver_free(&m);
	engine_case_free(cs);
	return rc == 0 ? 0 : 1;
}

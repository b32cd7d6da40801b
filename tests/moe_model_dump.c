/*
 * moe_model_dump — the whole tiny mixtral of tests/moe_model.h trained for
 * the PyTorch agreement test (tests/moe_model_torch.sh).
 *
 *   tests/moe_model_dump CONFIG B T STEPS LR SEED DIR
 *
 * reads a mixtral config.json, draws the weights (tfm_init_weights) and
 * the synthetic task's batches from SEED, trains STEPS steps of Adam (lr
 * LR, PyTorch's betas and eps) and writes, raw little-endian:
 *
 *   DIR/init.f32     the initial weights (Ψ float32, the layout's order);
 *   DIR/grad1.f32    the first step's gradient;
 *   DIR/final.f32    the weights after the last step;
 *   DIR/batch.i32    each step's tokens, then its targets (B·T int32 each);
 *   DIR/choice.i32   each step's, each block's experts chosen (B·T·k);
 *   DIR/run.json     each step's loss (before its update), and the layout:
 *                    each parameter tensor's Hugging Face name (a fused
 *                    tensor's, with its parts' rows), offset and shape.
 *
 * Exit 0, 1 on a failed write, 2 on bad arguments.
 */
#include "config.h"

#include <cjson/cJSON.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/optim.h"
#include "engine/tfm.h"
#include "engine/tfm_kernels.h"
#include "util/model.h"
#include "util/util.h"
#include "moe_model.h"

/* n 4-byte words (floats or int32) as little-endian bytes */
static void write_le32(const char *dir, const char *name, const void *words, size_t n)
{
	unsigned char *buf = zs_malloc(4 * n + 1);
	for (size_t i = 0; i < n; i++) {
		uint32_t u;
		memcpy(&u, (const unsigned char *)words + 4 * i, 4);
		for (int k = 0; k < 4; k++)
			buf[4 * i + (size_t)k] = (unsigned char)(u >> (8 * k));
	}
	char *path = zs_asprintf("%s/%s", dir, name), *cause = NULL;
	if (zs_write_atomic(path, (const char *)buf, 4 * n, &cause) != 0) {
		zs_print_error("moe_model_dump", cause);
		exit(1);
	}
	free(path);
	free(buf);
}

static unsigned long arg(const char *s, unsigned long max)
{
	char *end;
	unsigned long v = strtoul(s, &end, 10);
	if (*end != '\0' || v == 0 || v > max) {
		fprintf(stderr, "moe_model_dump: '%s' is not a whole number in 1..%lu\n", s, max);
		exit(2);
	}
	return v;
}

static cJSON *layout_json(const struct step_params *p)
{
	cJSON *a = cJSON_CreateArray();
	char name[160];
	for (size_t i = 0, off = 0; i < p->ntensors; off += p->tensor[i++].numel) {
		const struct step_tensor *t = &p->tensor[i];
		cJSON *o = cJSON_CreateObject(), *shape = cJSON_AddArrayToObject(o, "shape");
		cJSON_AddStringToObject(o, "name", step_tensor_name(p, i, name, sizeof name));
		cJSON_AddNumberToObject(o, "offset", (double)off);
		for (unsigned k = 0; k < t->ndim; k++)
			cJSON_AddItemToArray(shape, cJSON_CreateNumber((double)t->shape[k]));
		cJSON *parts = cJSON_AddArrayToObject(o, "parts");
		for (unsigned k = 0; k < t->nparts; k++)
			cJSON_AddItemToArray(parts, cJSON_CreateNumber((double)t->part_rows[k]));
		cJSON_AddItemToArray(a, o);
	}
	return a;
}

int main(int argc, char **argv)
{
	zs_json_init(); /* before any cJSON call (util.h) */
	if (argc != 8) {
		fprintf(stderr, "usage: moe_model_dump CONFIG B T STEPS LR SEED DIR\n");
		return 2;
	}
	char *text = NULL, *cause = NULL, *end;
	size_t len;
	struct zs_model hf;
	struct tfm_dims d;
	cJSON *cfg = NULL;
	if (zs_read_file(argv[1], &text, &len, &cause) != 0 || (cfg = cJSON_Parse(text)) == NULL ||
	    zs_model_from_json(cfg, argv[1], &hf, &cause) != 0) {
		zs_print_error("moe_model_dump", cause != NULL ? cause : "the config is not JSON");
		return 2;
	}
	cJSON_Delete(cfg);
	free(text);
	size_t B = arg(argv[2], 64), T = arg(argv[3], 4096), steps = arg(argv[4], 1000);
	unsigned long long seed = arg(argv[6], 1ul << 30);
	double lr = strtod(argv[5], &end);
	if (*end != '\0' || !(lr > 0.0 && lr < 1.0)) {
		fprintf(stderr, "moe_model_dump: '%s' is not a learning rate in (0, 1)\n", argv[5]);
		return 2;
	}
	tfm_dims_from_config(&d, &hf);
	if (T > d.seq) {
		fprintf(stderr, "moe_model_dump: T %zu is more than the config's %zu positions\n", T, d.seq);
		return 2;
	}
	struct moe_model m;
	if (tfm_dims_check(&d, &cause) != 0 || moe_model_init(&m, &d, B, T, seed, &cause) != 0) {
		zs_print_error("moe_model_dump", cause);
		return 2;
	}
	tfm_blas_init();
	const char *dir = argv[7];
	size_t BT = B * T, K = d.top_k, L = d.layers, N = m.p.numel;
	write_le32(dir, "init.f32", m.w, N);
	struct optim o;
	optim_init(&o, ZS_ADAM, lr);
	struct tfm_task task;
	tfm_task_init(&task, d.vocab, seed);
	int *batch = zs_malloc(steps * 2 * BT * sizeof *batch), *choice = zs_malloc(steps * L * BT * K * sizeof *choice);
	cJSON *run = cJSON_CreateObject(), *losses = cJSON_AddArrayToObject(run, "losses");
	cJSON_AddItemToObject(run, "layout", layout_json(&m.p));
	for (size_t s = 0; s < steps; s++) {
		int *in = batch + s * 2 * BT, *tgt = in + BT;
		tfm_task_batch(in, tgt, &task, seed, s, 0, B, T);
		float loss = moe_model_step(&m, &o, (unsigned)s + 1, in, tgt);
		cJSON_AddItemToArray(losses, cJSON_CreateNumber((double)loss));
		for (size_t l = 0; l < L; l++)
			memcpy(choice + (s * L + l) * BT * K, m.ma[l].idx, BT * K * sizeof *choice);
		if (s == 0) /* moe_model_step updated the weights; the gradient is the step's */
			write_le32(dir, "grad1.f32", m.g, N);
	}
	write_le32(dir, "final.f32", m.w, N);
	write_le32(dir, "batch.i32", batch, steps * 2 * BT);
	write_le32(dir, "choice.i32", choice, steps * L * BT * K);
	char *path = zs_asprintf("%s/run.json", dir);
	int rc = zs_json_write(path, run, &cause);
	if (rc != 0)
		zs_print_error("moe_model_dump", cause);
	free(cause);
	free(path);
	cJSON_Delete(run);
	free(batch);
	free(choice);
	tfm_task_free(&task);
	moe_model_free(&m);
	return rc == 0 ? 0 : 1;
}

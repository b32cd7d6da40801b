/*
 * moe_dump — the engine's mixture-of-experts kernels (engine/moe_kernels.h)
 * on inputs from a file, for tests/moe_torch.py to hold against PyTorch.
 *
 *   moe_dump BT D E K F IN OUT
 *
 * IN, raw float32: x (BT, D), the router gate (E, D), then for each
 * expert w1 (F, D), w2 (D, F), w3 (F, D) (nn.Linear's (out, in), in the
 * order the expert's parameters() gives them, the engine's layout's),
 * then r (BT, D). The loss is Σ out · r. OUT, raw float32: out (BT, D),
 * then d loss / d x (BT, D), d gate (E, D), for each expert d w1, d w2, d w3,
 * then the chosen experts (BT, K) and the tokens each expert got (E), as
 * floats. Exit 0, or 2 on bad arguments or files.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>

#include "engine/moe_kernels.h"
#include "engine/tfm_kernels.h"
#include "util/util.h"

static size_t arg(const char *s)
{
	char *end;
	unsigned long v = strtoul(s, &end, 10);
	if (*end != '\0' || v == 0 || v > 4096) {
		fprintf(stderr, "moe_dump: '%s' is not a size in 1..4096\n", s);
		exit(2);
	}
	return v;
}

int main(int argc, char **argv)
{
	if (argc != 8) {
		fprintf(stderr, "usage: moe_dump BT D E K F IN OUT\n");
		return 2;
	}
	size_t BT = arg(argv[1]), D = arg(argv[2]), E = arg(argv[3]), K = arg(argv[4]), F = arg(argv[5]);
	if (K > E) {
		fprintf(stderr, "moe_dump: K is more than E\n");
		return 2;
	}
	size_t nin = BT * D + E * D + E * 3 * F * D + BT * D;
	float *in = zs_calloc(nin, sizeof *in);
	FILE *f = fopen(argv[6], "rb");
	if (f == NULL || fread(in, sizeof *in, nin, f) != nin) {
		fprintf(stderr, "moe_dump: %s: not %zu floats\n", argv[6], nin);
		return 2;
	}
	fclose(f);
	const float *x = in, *gate = x + BT * D, *experts = gate + E * D, *r = experts + E * 3 * F * D;

	size_t A = BT * K, *counts = zs_calloc(E, sizeof *counts), *start = zs_calloc(E + 1, sizeof *start);
	size_t *tok = zs_calloc(A, sizeof *tok), *slot = zs_calloc(A, sizeof *slot);
	int *idx = zs_calloc(A, sizeof *idx);
	float *probs = zs_calloc(BT * E, sizeof *probs), *w = zs_calloc(A, sizeof *w);
	float *out = zs_calloc(BT * D, sizeof *out), *xe = zs_calloc(A * D, sizeof *xe);
	float *gu = zs_calloc(A * 2 * F, sizeof *gu), *act = zs_calloc(A * F, sizeof *act);
	float *ye = zs_calloc(A * D, sizeof *ye);
	tfm_blas_init();
	moe_router_forward(probs, x, gate, BT, D, E);
	moe_topk(idx, w, counts, probs, BT, E, K);
	moe_dispatch(start, tok, slot, idx, BT, E, K);
	for (size_t e = 0; e < E; e++) {
		size_t a = start[e], n = start[e + 1] - a;
		const float *w1 = experts + e * 3 * F * D, *w2 = w1 + F * D, *w3 = w2 + D * F;
		moe_expert_forward(out, xe + a * D, gu + a * 2 * F, act + a * F, ye + a * D, x, w1, w2, w3, w, tok + a,
		                   slot + a, n, K, D, F);
	}

	float *dx = zs_calloc(BT * D, sizeof *dx), *dgate = zs_calloc(E * D, sizeof *dgate);
	float *dexperts = zs_calloc(E * 3 * F * D, sizeof *dexperts);
	float *dw = zs_calloc(A, sizeof *dw), *dye = zs_calloc(A * D, sizeof *dye), *dact = zs_calloc(A * F, sizeof *dact);
	float *dgu = zs_calloc(A * 2 * F, sizeof *dgu), *dxe = zs_calloc(A * D, sizeof *dxe);
	float *dl = zs_calloc(BT * E, sizeof *dl), *dxr = zs_calloc(BT * D, sizeof *dxr);
	for (size_t e = 0; e < E; e++) {
		size_t a = start[e], n = start[e + 1] - a;
		const float *w1 = experts + e * 3 * F * D, *w2 = w1 + F * D, *w3 = w2 + D * F;
		float *dw1 = dexperts + e * 3 * F * D, *dw2 = dw1 + F * D, *dw3 = dw2 + D * F;
		moe_expert_backward(dx, dw1, dw2, dw3, dw, dye, dact, dgu, dxe, r, xe + a * D, gu + a * 2 * F,
		                    act + a * F, ye + a * D, w1, w2, w3, w, tok + a, slot + a, n, K, D, F);
	}
	moe_router_backward(dx, dgate, dl, dxr, dw, idx, w, probs, x, gate, BT, D, E, K);

	f = fopen(argv[7], "wb");
	int ok = f != NULL;
	ok = ok && fwrite(out, sizeof *out, BT * D, f) == BT * D;
	ok = ok && fwrite(dx, sizeof *dx, BT * D, f) == BT * D;
	ok = ok && fwrite(dgate, sizeof *dgate, E * D, f) == E * D;
	ok = ok && fwrite(dexperts, sizeof *dexperts, E * 3 * F * D, f) == E * 3 * F * D;
	for (size_t i = 0; i < A && ok; i++) {
		float v = (float)idx[i];
		ok = fwrite(&v, sizeof v, 1, f) == 1;
	}
	for (size_t e = 0; e < E && ok; e++) {
		float v = (float)counts[e];
		ok = fwrite(&v, sizeof v, 1, f) == 1;
	}
	if (f != NULL && fclose(f) != 0)
		ok = 0;
	if (!ok) {
		fprintf(stderr, "moe_dump: %s: cannot write\n", argv[7]);
		return 2;
	}
	void *bufs[] = {in, counts, start, tok, slot, idx, probs, w, out, xe, gu, act, ye,
	                dx, dgate, dexperts, dw, dye, dact, dgu, dxe, dl, dxr};
	for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
		free(bufs[i]);
	return 0;
}

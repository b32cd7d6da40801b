/*
 * moe_dump — the engine's mixture-of-experts kernels (engine/moe_kernels.h)
 * on inputs from a file, for tests/moe_torch.py to hold against PyTorch.
 *
 *   moe_dump BT D E K F IN OUT [S NORM]
 *
 * IN, raw float32: x (BT, D), the router gate (E, D), then for each
 * expert w1 (F, D), w2 (D, F), w3 (F, D) (nn.Linear's (out, in), in the
 * order the expert's parameters() gives them, the engine's layout's),
 * then r (BT, D). The loss is Σ out · r. OUT, raw float32: out (BT, D),
 * then d loss / d x (BT, D), d gate (E, D), for each expert d w1, d w2, d w3,
 * then the chosen experts (BT, K) and the tokens each expert got (E), as
 * floats.
 *
 * With S (> 0) the block is Qwen2-MoE's: each expert's tensors are
 * gate_proj (F, D), up_proj (F, D), down_proj (D, F) (Qwen2MoeMLP's
 * order), the top-k weights renormalised only if NORM is 1
 * (norm_topk_prob), and the shared expert's gate_proj, up_proj (S, D),
 * down_proj (D, S) and shared_expert_gate (1, D) follow the experts in IN
 * (before r) and their gradients follow the experts' in OUT. With S 0
 * the block is Qwen3-MoE's: Qwen2-MoE's experts, order and NORM, and no
 * shared expert.
 * Exit 0, or 2 on bad arguments or files.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
	if (argc != 8 && argc != 10) {
		fprintf(stderr, "usage: moe_dump BT D E K F IN OUT [S NORM]\n");
		return 2;
	}
	size_t BT = arg(argv[1]), D = arg(argv[2]), E = arg(argv[3]), K = arg(argv[4]), F = arg(argv[5]);
	int qwen = argc == 10; /* qwen3_moe's block: S 0 */
	size_t S = qwen && strcmp(argv[8], "0") != 0 ? arg(argv[8]) : 0;
	int renorm = qwen ? argv[9][0] == '1' && argv[9][1] == '\0' : 1;
	/* where the kernels' w1 (gate), w2 (down), w3 (up) sit in an expert's three */
	const size_t at1 = 0, at2 = qwen ? 2 : 1, at3 = qwen ? 1 : 2;
	size_t NS = S > 0 ? 3 * S * D + D : 0;
	if (K > E) {
		fprintf(stderr, "moe_dump: K is more than E\n");
		return 2;
	}
	size_t nin = BT * D + E * D + E * 3 * F * D + NS + BT * D;
	float *in = zs_calloc(nin, sizeof *in);
	FILE *f = fopen(argv[6], "rb");
	if (f == NULL || fread(in, sizeof *in, nin, f) != nin) {
		fprintf(stderr, "moe_dump: %s: not %zu floats\n", argv[6], nin);
		return 2;
	}
	fclose(f);
	const float *x = in, *gate = x + BT * D, *experts = gate + E * D, *shared = experts + E * 3 * F * D;
	const float *r = shared + NS;
	const float *sw1 = shared, *sw3 = sw1 + S * D, *sw2 = sw3 + S * D, *sgate = sw2 + D * S;

	size_t A = BT * K, *counts = zs_calloc(E, sizeof *counts), *start = zs_calloc(E + 1, sizeof *start);
	size_t *tok = zs_calloc(A, sizeof *tok), *slot = zs_calloc(A, sizeof *slot);
	int *idx = zs_calloc(A, sizeof *idx);
	float *probs = zs_calloc(BT * E, sizeof *probs), *w = zs_calloc(A, sizeof *w);
	float *out = zs_calloc(BT * D, sizeof *out), *xe = zs_calloc(A * D, sizeof *xe);
	float *gu = zs_calloc(A * 2 * F, sizeof *gu), *act = zs_calloc(A * F, sizeof *act);
	float *ye = zs_calloc(A * D, sizeof *ye);
	tfm_blas_init();
	moe_router_forward(probs, x, gate, BT, D, E);
	moe_topk(idx, w, counts, probs, BT, E, K, renorm);
	moe_dispatch(start, tok, slot, idx, BT, E, K);
	for (size_t e = 0; e < E; e++) {
		size_t a = start[e], n = start[e + 1] - a;
		const float *ex = experts + e * 3 * F * D;
		moe_expert_forward(out, xe + a * D, gu + a * 2 * F, act + a * F, ye + a * D, x, ex + at1 * F * D,
		                   ex + at2 * F * D, ex + at3 * F * D, w, tok + a, slot + a, n, K, D, F);
	}
	float *sgu = zs_calloc(BT * 2 * S + 1, sizeof *sgu), *sact = zs_calloc(BT * S + 1, sizeof *sact);
	float *sye = zs_calloc(BT * D, sizeof *sye), *sg = zs_calloc(BT, sizeof *sg);
	if (S > 0)
		moe_shared_forward(out, sgu, sact, sye, sg, x, sw1, sw2, sw3, sgate, BT, D, S);

	float *dx = zs_calloc(BT * D, sizeof *dx), *dgate = zs_calloc(E * D, sizeof *dgate);
	float *dexperts = zs_calloc(E * 3 * F * D + NS, sizeof *dexperts);
	float *dw = zs_calloc(A, sizeof *dw), *dye = zs_calloc(A * D, sizeof *dye), *dact = zs_calloc(A * F, sizeof *dact);
	float *dgu = zs_calloc(A * 2 * F, sizeof *dgu), *dxe = zs_calloc(A * D, sizeof *dxe);
	float *dl = zs_calloc(BT * E, sizeof *dl), *dxr = zs_calloc(BT * D, sizeof *dxr);
	for (size_t e = 0; e < E; e++) {
		size_t a = start[e], n = start[e + 1] - a;
		const float *ex = experts + e * 3 * F * D;
		float *dex = dexperts + e * 3 * F * D;
		moe_expert_backward(dx, dex + at1 * F * D, dex + at2 * F * D, dex + at3 * F * D, dw, dye, dact, dgu, dxe, r,
		                    xe + a * D, gu + a * 2 * F, act + a * F, ye + a * D, ex + at1 * F * D, ex + at2 * F * D,
		                    ex + at3 * F * D, w, tok + a, slot + a, n, K, D, F);
	}
	float *dsye = zs_calloc(BT * D, sizeof *dsye), *dsxe = zs_calloc(BT * D, sizeof *dsxe);
	float *dsact = zs_calloc(BT * S + 1, sizeof *dsact), *dsgu = zs_calloc(BT * 2 * S + 1, sizeof *dsgu);
	if (S > 0) {
		float *ds1 = dexperts + E * 3 * F * D, *ds3 = ds1 + S * D, *ds2 = ds3 + S * D, *dsg = ds2 + D * S;
		moe_shared_backward(dx, ds1, ds2, ds3, dsg, dsye, dsact, dsgu, dsxe, dl, dxr, r, x, sgu, sact, sye, sg, sw1,
		                    sw2, sw3, sgate, BT, D, S);
	}
	moe_router_backward(dx, dgate, dl, dxr, dw, idx, w, probs, x, gate, BT, D, E, K, renorm);

	f = fopen(argv[7], "wb");
	int ok = f != NULL;
	ok = ok && fwrite(out, sizeof *out, BT * D, f) == BT * D;
	ok = ok && fwrite(dx, sizeof *dx, BT * D, f) == BT * D;
	ok = ok && fwrite(dgate, sizeof *dgate, E * D, f) == E * D;
	ok = ok && fwrite(dexperts, sizeof *dexperts, E * 3 * F * D + NS, f) == E * 3 * F * D + NS;
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
	                dx, dgate, dexperts, dw, dye, dact, dgu, dxe, dl, dxr, sgu, sact, sye, sg, dsye, dsxe, dsact, dsgu};
	for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
		free(bufs[i]);
	return 0;
}

/*
 * nf4 — bitsandbytes' NF4 quantization and its double quantization,
 * written from bitsandbytes 0.47.0's algorithm (util/nf4.h cites the
 * lines). fp32 throughout, as the default backend computes.
 */
#include "config.h"

#include "util/nf4.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "util/step.h"
#include "util/util.h"

/* get_4bit_type("nf4") (functional.py lines 732–749): the published
 * values, already of absolute maximum 1 (its div_ by abs().max() is by 1). */
const float nf4_code[16] = {
	-1.0f, -0.6961928009986877f, -0.5250730514526367f, -0.39491748809814453f,
	-0.28444138169288635f, -0.18477343022823334f, -0.09105003625154495f, 0.0f,
	0.07958029955625534f, 0.16093020141124725f, 0.24611230194568634f, 0.33791524171829224f,
	0.44070982933044434f, 0.5626170039176941f, 0.7229568362236023f, 1.0f,
};

/* torch.linspace(start, end, steps) in fp32 as ATen's CPU kernel computes
 * it (RangeFactoriesKernel.cpp): the first half from start, the second
 * from end, by the one fp32 step. */
static void linspace_f32(float *out, float start, float end, unsigned steps)
{
	float step = (end - start) / (float)(steps - 1);
	unsigned half = steps / 2;
	for (unsigned i = 0; i < steps; i++)
		out[i] = i < half ? start + step * (float)i : end - step * (float)(steps - i - 1);
}

static int cmp_float(const void *a, const void *b)
{
	float x = *(const float *)a, y = *(const float *)b;
	return (x > y) - (x < y);
}

void nf4_dynamic_map(float code[256])
{
	/* create_dynamic_map(signed=True, max_exponent_bits=7, total_bits=8):
	 * for exponent i = 0..6, 2^i + 1 boundaries in [0.1, 1], their 2^i
	 * midpoints times ±10^(i − 6) (a Python float times an fp32 tensor:
	 * the product in fp32); no additional items (2^(7 − 7) − 1 = 0); then
	 * 0 and 1; sorted. 127 + 127 + 2 = 256 values. */
	unsigned n = 0;
	float bnd[65];
	for (unsigned i = 0; i < 7; i++) {
		unsigned items = (1u << i) + 1;
		linspace_f32(bnd, 0.1f, 1.0f, items);
		float scale = (float)pow(10.0, (double)i - 6.0);
		for (unsigned k = 0; k + 1 < items; k++)
			code[n++] = scale * ((bnd[k] + bnd[k + 1]) / 2.0f);
		for (unsigned k = 0; k + 1 < items; k++)
			code[n++] = -scale * ((bnd[k] + bnd[k + 1]) / 2.0f);
	}
	code[n++] = 0.0f;
	code[n++] = 1.0f;
	qsort(code, n, sizeof *code, cmp_float);
}

unsigned nf4_nearest(const float *code, unsigned ncode, float x)
{
	/* torch.argmin(|x − code|): the first index of the smallest distance */
	unsigned best = 0;
	float bd = fabsf(x - code[0]);
	for (unsigned k = 1; k < ncode; k++) {
		float d = fabsf(x - code[k]);
		if (d < bd)
			bd = d, best = k;
	}
	return best;
}

/* The absolute maximum of each block of x[0..n), and each element's index
 * in code after scaling by 1/absmax and clamping (the default backend's
 * quantize_4bit and quantize_blockwise share this). idx[n]. */
static void quantize_blocks(uint8_t *idx, float *absmax, const float *x, const float *code, unsigned ncode,
                            uint64_t n, unsigned blocksize)
{
	unsigned zero = nf4_nearest(code, ncode, 0.0f);
	for (uint64_t b0 = 0, blk = 0; b0 < n; b0 += blocksize, blk++) {
		uint64_t end = b0 + blocksize < n ? b0 + blocksize : n;
		float m = 0.0f;
		for (uint64_t e = b0; e < end; e++)
			m = fmaxf(m, fabsf(x[e]));
		absmax[blk] = m;
		/* an all-zero block: 1/0 would make NaN (the default backend) —
		 * its values are 0, the code's 0 */
		float inv = m > 0.0f ? 1.0f / m : 0.0f;
		for (uint64_t e = b0; e < end; e++) {
			float s = m > 0.0f ? fminf(fmaxf(x[e] * inv, -1.0f), 1.0f) : 0.0f;
			idx[e] = (uint8_t)(m > 0.0f ? nf4_nearest(code, ncode, s) : zero);
		}
	}
}

void nf4_quantize(uint8_t *packed, float *absmax, const float *w, uint64_t n)
{
	uint8_t *idx = zs_malloc(n ? n : 1);
	quantize_blocks(idx, absmax, w, nf4_code, 16, n, NF4_BLOCK);
	/* packed = quantized[::2] << 4 | quantized[1::2] */
	for (uint64_t e = 0; e < n; e += 2)
		packed[e / 2] = (uint8_t)(idx[e] << 4 | (e + 1 < n ? idx[e + 1] : 0));
	free(idx);
}

void nf4_dequantize(float *w, const uint8_t *packed, const float *absmax, uint64_t n)
{
	for (uint64_t e = 0; e < n; e++) {
		unsigned q = e % 2 ? packed[e / 2] & 0xFu : packed[e / 2] >> 4;
		w[e] = nf4_code[q] * absmax[e / NF4_BLOCK];
	}
}

void nf4_quantize_blockwise(uint8_t *q, float *absmax, const float *x, const float *code, uint64_t n,
                            unsigned blocksize)
{
	quantize_blocks(q, absmax, x, code, 256, n, blocksize);
}

void nf4_dequantize_blockwise(float *x, const uint8_t *q, const float *absmax, const float *code, uint64_t n,
                              unsigned blocksize)
{
	for (uint64_t e = 0; e < n; e++)
		x[e] = code[q[e]] * absmax[e / blocksize];
}

static uint64_t ceil_div(uint64_t a, uint64_t b) { return (a + b - 1) / b; }

void nf4_layer_bytes(struct nf4_bytes *b, uint64_t numel, int double_quant)
{
	uint64_t blocks = ceil_div(numel, NF4_BLOCK);
	memset(b, 0, sizeof *b);
	b->packed = (numel + 1) / 2;
	b->code = 16 * sizeof(float);
	if (double_quant) {
		b->qabsmax = blocks;
		b->offset = sizeof(float);
		b->absmax2 = ceil_div(blocks, NF4_DQ_BLOCK) * sizeof(float);
		b->code2 = 256 * sizeof(float);
		b->shared = 256 * sizeof(float);
	} else {
		b->absmax = blocks * sizeof(float);
	}
	b->total = b->packed + b->absmax + b->code + b->qabsmax + b->offset + b->absmax2 + b->code2;
}

/* An array of n bytes, counted into *acc as allocated. */
static void *counted(uint64_t n, uint64_t *acc)
{
	*acc += n;
	return zs_malloc(n ? (size_t)n : 1);
}

void nf4_layer_quantize(struct nf4_layer *l, const float *w, uint64_t n, int double_quant)
{
	memset(l, 0, sizeof *l);
	l->n = n;
	l->double_quant = double_quant;
	uint64_t blocks = ceil_div(n, NF4_BLOCK);
	l->packed = counted((n + 1) / 2, &l->b.packed);
	float *absmax = zs_malloc((size_t)(blocks ? blocks : 1) * sizeof *absmax);
	nf4_quantize(l->packed, absmax, w, n);
	memcpy(l->code, nf4_code, sizeof l->code);
	l->b.code = sizeof l->code;
	if (!double_quant) {
		l->absmax = absmax;
		l->b.absmax = blocks * sizeof *absmax;
	} else {
		/* offset = _absmax.mean(); quantize_blockwise(_absmax - offset, blocksize=256) */
		double sum = 0.0;
		for (uint64_t k = 0; k < blocks; k++)
			sum += absmax[k];
		l->offset = blocks ? (float)(sum / (double)blocks) : 0.0f;
		l->b.offset = sizeof l->offset;
		for (uint64_t k = 0; k < blocks; k++)
			absmax[k] -= l->offset;
		l->qabsmax = counted(blocks, &l->b.qabsmax);
		l->absmax2 = counted(ceil_div(blocks, NF4_DQ_BLOCK) * sizeof *l->absmax2, &l->b.absmax2);
		l->code2 = counted(256 * sizeof *l->code2, &l->b.code2);
		nf4_dynamic_map(l->code2);
		l->b.shared = 256 * sizeof *l->code2; /* name2qmap["dynamic"], which code2 copies */
		nf4_quantize_blockwise(l->qabsmax, l->absmax2, absmax, l->code2, blocks, NF4_DQ_BLOCK);
		free(absmax); /* del _absmax */
	}
	l->b.total = l->b.packed + l->b.absmax + l->b.code + l->b.qabsmax + l->b.offset + l->b.absmax2 + l->b.code2;
}

void nf4_dequantize_state(float *w, const struct nf4_state *s, float *tmp, uint64_t n)
{
	const float *absmax = s->absmax;
	if (s->qabsmax != NULL) {
		uint64_t blocks = ceil_div(n, NF4_BLOCK);
		nf4_dequantize_blockwise(tmp, s->qabsmax, s->absmax2, s->code2, blocks, NF4_DQ_BLOCK);
		for (uint64_t k = 0; k < blocks; k++)
			tmp[k] += s->offset; /* absmax += quant_state.offset */
		absmax = tmp;
	}
	nf4_dequantize(w, s->packed, absmax, n);
}

void nf4_layer_dequantize(float *w, const struct nf4_layer *l)
{
	uint64_t blocks = ceil_div(l->n, NF4_BLOCK);
	float *tmp = l->double_quant ? zs_malloc((size_t)(blocks ? blocks : 1) * sizeof *tmp) : NULL;
	struct nf4_state s = {l->packed, l->absmax, l->double_quant ? l->qabsmax : NULL, l->offset, l->absmax2,
	                      l->code2};
	nf4_dequantize_state(w, &s, tmp, l->n);
	free(tmp);
}

void nf4_layer_free(struct nf4_layer *l)
{
	free(l->packed);
	free(l->absmax);
	free(l->qabsmax);
	free(l->absmax2);
	free(l->code2);
	memset(l, 0, sizeof *l);
}

int nf4_quantized(const struct step_params *p, size_t i)
{
	char name[256];
	const struct step_tensor *t = &p->tensor[i];
	if (p->module[t->module].adapter != NULL) /* LoRA's lora_A, lora_B: trained, not quantized */
		return 0;
	step_tensor_name(p, i, name, sizeof name);
	return t->ndim == 2 && strcmp(t->leaf, "weight") == 0 && !strstr(name, "lm_head") && !strstr(name, "wte") &&
	       !strstr(name, "wpe") && !strstr(name, "embed_tokens");
}

void nf4_base_count(const struct step_params *p, int double_quant, struct nf4_base *q)
{
	uint64_t shared = 0;

	*q = (struct nf4_base){0};
	for (size_t i = 0; i < p->ntensors; i++) {
		const struct step_tensor *t = &p->tensor[i];
		if (p->module[t->module].adapter != NULL) /* LoRA's lora_A, lora_B: trained, not quantized */
			continue;
		if (!nf4_quantized(p, i)) {
			q->rest += t->numel;
			continue;
		}
		unsigned parts = t->nparts ? t->nparts : 1;
		for (unsigned k = 0; k < parts; k++) {
			uint64_t e = t->nparts ? t->part_rows[k] * t->shape[1] : t->numel;
			struct nf4_bytes b;
			nf4_layer_bytes(&b, e, double_quant);
			q->weights += e, q->held += b.total, q->codes += b.packed, shared = b.shared, q->layers++;
			q->largest = e > q->largest ? e : q->largest;
		}
	}
	q->held += shared; /* double quantization: the one dynamic map */
}

/* One scratch of b, appended. */
static void nf4_buf(struct step_buffers *b, const char *name, unsigned index, uint64_t elements, unsigned esize)
{
	b->buf = zs_realloc(b->buf, (b->n + 1) * sizeof *b->buf);
	b->buf[b->n++] = (struct step_buffer){name, STEP_NF4, index, -1, elements, esize, ZS_CAT_SCRATCH,
	                                      STEP_AT_FORWARD, 0, 0, 0, 0};
}

void nf4_step_buffers(struct step_buffers *b, const struct step_params *p, int mixed, int double_quant)
{
	uint64_t w = 0, blocks = 0;
	for (size_t i = 0; i < p->ntensors; i++) {
		const struct step_tensor *t = &p->tensor[i];
		if (!nf4_quantized(p, i))
			continue;
		w = t->numel > w ? t->numel : w;
		for (unsigned k = 0; k < (t->nparts ? t->nparts : 1); k++) {
			uint64_t e = t->nparts ? t->part_rows[k] * t->shape[1] : t->numel;
			blocks = ceil_div(e, NF4_BLOCK) > blocks ? ceil_div(e, NF4_BLOCK) : blocks;
		}
	}
	if (w == 0)
		return;
	nf4_buf(b, "nf4_w", NF4_W, w, mixed ? 2 : 4);
	if (double_quant)
		nf4_buf(b, "nf4_absmax", NF4_ABSMAX, blocks, 4);
}

uint64_t nf4_storage_elements(uint64_t n, unsigned esize) { return (n + 1) / (2 * (uint64_t)esize); }

/* Part k of tensor t's elements (the whole tensor without parts). */
static uint64_t part_numel(const struct step_tensor *t, unsigned k)
{
	return t->nparts ? t->part_rows[k] * t->shape[1] : t->numel;
}

uint64_t nf4_tensor_storage(const struct step_params *p, size_t i, unsigned esize)
{
	const struct step_tensor *t = &p->tensor[i];
	uint64_t n = 0;
	for (unsigned k = 0; k < (t->nparts ? t->nparts : 1); k++)
		n += nf4_storage_elements(part_numel(t, k), esize);
	return n;
}

int nf4_storage_exact(const struct step_params *p, unsigned esize, uint64_t *n)
{
	for (size_t i = 0; i < p->ntensors; i++)
		for (unsigned k = 0; nf4_quantized(p, i) && k < (p->tensor[i].nparts ? p->tensor[i].nparts : 1); k++)
			if (part_numel(&p->tensor[i], k) % (2 * (uint64_t)esize) != 0) {
				*n = part_numel(&p->tensor[i], k);
				return 0;
			}
	return 1;
}

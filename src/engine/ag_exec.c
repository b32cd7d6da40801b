/*
 * ag_exec — the PyTorch step's events run with real kernels (ag_exec.h).
 *
 * Every operand is a view: a base pointer into its storage's buffer, a
 * dtype, a shape and strides in elements. Elementwise ops broadcast their
 * operands to the output's shape as PyTorch does (trailing dimensions
 * aligned, a size-1 or missing dimension read with stride 0) and walk it
 * with an odometer; row ops (norms, softmax, the loss) walk the last
 * dimension of each row; products go to sgemm where the views allow.
 * Values are computed in fp32: 16-bit operands are widened as they are read
 * and rounded once as they are written (bf16 to nearest even, fp16 by
 * fp16.h), int64 and bool read as numbers.
 */
#include "config.h"

#include <cblas.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <xxhash.h>

#include "engine/ag_exec.h"
#include "engine/fp16.h"
#include "engine/moe_kernels.h"
#include "engine/rng.h"
#include "engine/tfm.h"
#include "engine/tfm_kernels.h"
#include "util/ag_ddp.h"
#include "util/nf4.h"
#include "util/schedule.h"
#include "util/step.h"
#include "util/util.h"

/* ------------------------------------------------------------------------ */
/* Views */

struct agv {
	void *base;          /* the element at index 0 */
	enum ag_dtype dt;
	unsigned es;
	unsigned nd;
	uint64_t shape[AG_MAXDIM];
	int64_t stride[AG_MAXDIM];
	uint64_t numel;
};

static unsigned esize(enum ag_dtype d) { return (unsigned)d <= AG_U8 ? ag_dtype_size(d) : 0; }

static inline float ld(const struct agv *v, int64_t e)
{
	const unsigned char *p = (const unsigned char *)v->base + e * (int64_t)v->es;
	switch (v->dt) {
	case AG_F32: {
		float f;
		memcpy(&f, p, 4);
		return f;
	}
	case AG_BF16: {
		uint16_t h;
		memcpy(&h, p, 2);
		uint32_t u = (uint32_t)h << 16;
		float f;
		memcpy(&f, &u, 4);
		return f;
	}
	case AG_F16: {
		zs_half h;
		memcpy(&h, p, 2);
		return zs_half_to_float(h);
	}
	case AG_I64: {
		int64_t i;
		memcpy(&i, p, 8);
		return (float)i;
	}
	case AG_F64: { /* a wrapped Python number: read as the fp32 op uses it */
		double d;
		memcpy(&d, p, 8);
		return (float)d;
	}
	case AG_U8: /* the 4-bit base's codes (util/nf4.h) */
		return (float)*p;
	default:
		return *p != 0;
	}
}

static inline int64_t ldi(const struct agv *v, int64_t e)
{
	const unsigned char *p = (const unsigned char *)v->base + e * (int64_t)v->es;
	if (v->dt == AG_I64) {
		int64_t i;
		memcpy(&i, p, 8);
		return i;
	}
	return (int64_t)ld(v, e);
}

/* bf16 by round to nearest even, as c10::BFloat16's round_to_nearest_even. */
static inline uint16_t to_bf16(float f)
{
	uint32_t u;
	memcpy(&u, &f, 4);
	if (isnan(f))
		return 0x7fc0;
	u += 0x7fffu + ((u >> 16) & 1u);
	return (uint16_t)(u >> 16);
}

static inline void st(const struct agv *v, int64_t e, float x)
{
	unsigned char *p = (unsigned char *)v->base + e * (int64_t)v->es;
	switch (v->dt) {
	case AG_F32:
		memcpy(p, &x, 4);
		break;
	case AG_BF16: {
		uint16_t h = to_bf16(x);
		memcpy(p, &h, 2);
		break;
	}
	case AG_F16: {
		zs_half h = zs_float_to_half(x);
		memcpy(p, &h, 2);
		break;
	}
	case AG_I64: {
		int64_t i = (int64_t)x;
		memcpy(p, &i, 8);
		break;
	}
	case AG_F64: {
		double d = x;
		memcpy(p, &d, 8);
		break;
	}
	case AG_U8:
		*p = (unsigned char)x;
		break;
	default:
		*p = x != 0.0f;
	}
}

static inline void sti(const struct agv *v, int64_t e, int64_t i)
{
	if (v->dt == AG_I64)
		memcpy((unsigned char *)v->base + e * 8, &i, 8);
	else
		st(v, e, (float)i);
}

/* The element offset of linear index r (row-major over v's shape). */
static int64_t at_lin(const struct agv *v, uint64_t r)
{
	int64_t off = 0;
	for (unsigned k = v->nd; k-- > 0;) {
		off += (int64_t)(r % v->shape[k]) * v->stride[k];
		r /= v->shape[k];
	}
	return off;
}

/* v read as if of out's shape (PyTorch's broadcasting); -1 if it cannot be. */
static int bcast(struct agv *b, const struct agv *v, const struct agv *out)
{
	/* leading dims of size 1 beyond out's are no dims (a result PyTorch
	 * would shape (1, ...) the list may give without them) */
	for (unsigned k = 0; v->nd > out->nd && k < v->nd - out->nd; k++)
		if (v->shape[k] != 1)
			return -1;
	*b = *v;
	b->nd = out->nd;
	for (unsigned k = 0; k < out->nd; k++) {
		int i = (int)v->nd - (int)out->nd + (int)k;
		b->shape[k] = out->shape[k];
		if (i >= 0 && v->shape[i] == out->shape[k])
			b->stride[k] = v->stride[i];
		else if (i < 0 || v->shape[i] == 1) /* missing or of size 1: read again */
			b->stride[k] = 0;
		else
			return -1;
	}
	b->numel = out->numel;
	return 0;
}

/* ------------------------------------------------------------------------ */
/* The run's state */

/* One line naming what failed: the event's place and its op. fail_ev
 * evaluates to -1 where the analysers see it (as zs_fail). */
static void fail_ev_(char **cause, const struct ag_event *e, size_t i, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
static void fail_ev_(char **cause, const struct ag_event *e, size_t i, const char *fmt, ...)
{
	char msg[200];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	zs_set_cause(cause, "the PyTorch step cannot be computed: event %zu (%s, %s%s): %s", i, zs_phase_name(e->phase),
	             e->kind == AG_EV_OP ? "op " : e->kind == AG_EV_ALLOC ? "alloc" : "free",
	             e->kind == AG_EV_OP ? ag_op_name(e->op) : "", msg);
}
#define fail_ev(...) (fail_ev_(__VA_ARGS__), -1)

static const char *what_of(const struct ag_step *s, uint32_t i)
{
	return i < s->ntensors && s->tensor[i].what != NULL ? s->tensor[i].what : "?";
}

/* The view of tensor i, checked: its storage live and its reach inside
 * the storage's bytes. */
static int view(const struct ag_exec *x, uint32_t i, struct agv *v, const struct ag_event *e, size_t ei, char **cause)
{
	const struct ag_step *s = x->s;
	if (i >= s->ntensors)
		return fail_ev(cause, e, ei, "operand %u is not a tensor of the list", i);
	const struct ag_tensor *t = &s->tensor[i];
	uint32_t sti_ = t->storage;
	if (sti_ >= s->ntensors || s->tensor[sti_].storage != sti_)
		return fail_ev(cause, e, ei, "tensor %s (%u) views no storage", what_of(s, i), i);
	if (x->buf[sti_] == NULL)
		return fail_ev(cause, e, ei, "tensor %s (%u) is used while its storage is not allocated", what_of(s, i),
		               i);
	if (t->ndim > AG_MAXDIM || esize(t->dtype) == 0)
		return fail_ev(cause, e, ei, "tensor %s (%u) has a bad rank or dtype", what_of(s, i), i);
	v->dt = t->dtype;
	v->es = esize(t->dtype);
	v->nd = t->ndim;
	v->numel = 1;
	int64_t lo = 0, hi = 0;
	for (unsigned k = 0; k < t->ndim; k++) {
		v->shape[k] = t->shape[k];
		v->stride[k] = t->stride[k];
		v->numel *= t->shape[k];
		if (t->shape[k] == 0)
			continue;
		int64_t reach = (int64_t)(t->shape[k] - 1) * t->stride[k];
		if (reach < 0)
			lo += reach;
		else
			hi += reach;
	}
	uint64_t bytes = s->tensor[sti_].bytes;
	if (v->numel > 0 && ((int64_t)t->offset + lo < 0 ||
	                     (uint64_t)((int64_t)t->offset + hi + 1) * v->es > bytes))
		return fail_ev(cause, e, ei, "the view %s (%u) reaches outside its storage's bytes", what_of(s, i), i);
	v->base = (unsigned char *)x->buf[sti_] + t->offset * v->es;
	return 0;
}

static uint32_t storage_of(const struct ag_exec *x, uint32_t i) { return x->s->tensor[i].storage; }

/* ------------------------------------------------------------------------ */
/* Elementwise ops */

/* The odometer over out's shape: visits every element with each
 * operand's offset. */
#define EW_MAX (AG_MAXIN + 1)
struct walk {
	unsigned n, nd;
	const struct agv *v[EW_MAX];
	uint64_t idx[AG_MAXDIM];
	int64_t off[EW_MAX];
};

static void walk_init(struct walk *w, const struct agv *const *v, unsigned n)
{
	memset(w, 0, sizeof *w);
	w->n = n;
	w->nd = v[0]->nd;
	for (unsigned i = 0; i < n; i++)
		w->v[i] = v[i];
}

/* Step to the next element; 0 at the end. */
static int walk_next(struct walk *w)
{
	const struct agv *o = w->v[0];
	for (unsigned k = w->nd; k-- > 0;) {
		if (++w->idx[k] < o->shape[k]) {
			for (unsigned i = 0; i < w->n; i++)
				w->off[i] += w->v[i]->stride[k];
			return 1;
		}
		for (unsigned i = 0; i < w->n; i++)
			w->off[i] -= (int64_t)(o->shape[k] - 1) * w->v[i]->stride[k];
		w->idx[k] = 0;
	}
	return 0;
}

/* PyTorch's pow for the exponents its CPU kernel special-cases
 * (pow_tensor_scalar_optimized_kernel: 2, 3, 0.5, -0.5, -1, -2). */
static inline float pow_s(float a, float p)
{
	if (p == 2.0f)
		return a * a;
	if (p == 3.0f)
		return a * a * a;
	if (p == 0.5f)
		return sqrtf(a);
	if (p == -0.5f)
		return 1.0f / sqrtf(a);
	if (p == -1.0f)
		return 1.0f / a;
	if (p == -2.0f)
		return 1.0f / (a * a);
	return powf(a, p);
}

static inline float sigm(float a) { return 1.0f / (1.0f + expf(-a)); }

/* gelu(x, approximate="tanh") and its derivative, as ATen's GeluKernel.cpp
 * writes them: kBeta = √2 · 2/√π · 1/2 = √(2/π), kKappa = 0.044715 */
static inline float gelu_tanh(float x)
{
	const float beta = 0.7978845608028654f, kappa = 0.044715f;
	return 0.5f * x * (1.0f + tanhf(beta * (x + kappa * x * x * x)));
}

static inline float gelu_tanh_bwd(float dy, float x)
{
	const float beta = 0.7978845608028654f, kappa = 0.044715f;
	float inner = beta * (x + kappa * x * x * x), t = tanhf(inner);
	float left = 0.5f * x, right = 1.0f + t;
	float left_d = 0.5f * right, right_d = left * (1.0f - t * t) * beta * (1.0f + 3.0f * kappa * x * x);
	return dy * (left_d + right_d);
}

static inline __attribute__((always_inline)) float ew_value(enum ag_op op, float s0, float a, float b, float c)
{
	switch (op) {
	case AG_OP_FILL: return s0;
	case AG_OP_COPY: return a;
	case AG_OP_ADD:
	case AG_OP_ADD_: return a + s0 * b;
	case AG_OP_ADD_SCALAR:
	case AG_OP_ADD_SCALAR_: return a + s0;
	case AG_OP_MUL: return a * b;
	case AG_OP_MUL_SCALAR:
	case AG_OP_MUL_SCALAR_: return a * s0;
	case AG_OP_DIV: return a / b;
	case AG_OP_DIV_SCALAR_: return a / s0;
	case AG_OP_NEG: return -a;
	case AG_OP_POW_SCALAR: return pow_s(a, s0);
	case AG_OP_TANH: return tanhf(a);
	case AG_OP_COS: return cosf(a);
	case AG_OP_SIN: return sinf(a);
	case AG_OP_RSQRT: return 1.0f / sqrtf(a);
	case AG_OP_SQRT: return sqrtf(a);
	case AG_OP_SILU: return a / (1.0f + expf(-a));
	case AG_OP_SIGMOID: return sigm(a);
	case AG_OP_SIGMOID_BWD: return a * b * (1.0f - b);
	case AG_OP_GT: return a > b ? 1.0f : 0.0f;
	case AG_OP_GELU_TANH: return gelu_tanh(a);
	case AG_OP_GELU_TANH_BWD: return gelu_tanh_bwd(a, b);
	case AG_OP_WHERE: return a != 0.0f ? b : c;
	case AG_OP_TANH_BWD: return a * (1.0f - b * b);
	case AG_OP_SILU_BWD: {
		float sg = sigm(b);
		return a * sg * (1.0f + b * (1.0f - sg));
	}
	case AG_OP_RSQRT_BWD: return -0.5f * a * b * b * b;
	case AG_OP_POW_BWD: return s0 == 2.0f ? a * 2.0f * b : a * s0 * pow_s(b, s0 - 1.0f);
	case AG_OP_ZERO_: return 0.0f;
	case AG_OP_ADDCMUL_: return a + s0 * b * c;
	case AG_OP_ADDCDIV_: return a + s0 * b / c;
	case AG_OP_LERP_: /* at::lerp's two forms, by the weight */
		return fabsf(s0) < 0.5f ? a + s0 * (b - a) : b - (b - a) * (1.0f - s0);
	default: return NAN;
	}
}

/* The number of inputs an elementwise op reads (in place: in0 is out). */
static int ew_inputs(enum ag_op op)
{
	switch (op) {
	case AG_OP_FILL:
	case AG_OP_ZERO_: return 0;
	case AG_OP_COPY:
	case AG_OP_ADD_SCALAR:
	case AG_OP_MUL_SCALAR:
	case AG_OP_NEG:
	case AG_OP_POW_SCALAR:
	case AG_OP_TANH:
	case AG_OP_COS:
	case AG_OP_SIN:
	case AG_OP_RSQRT:
	case AG_OP_SQRT:
	case AG_OP_SILU:
	case AG_OP_SIGMOID:
	case AG_OP_GELU_TANH:
	case AG_OP_MUL_SCALAR_:
	case AG_OP_ADD_SCALAR_:
	case AG_OP_DIV_SCALAR_: return 1;
	case AG_OP_ADD:
	case AG_OP_MUL:
	case AG_OP_DIV:
	case AG_OP_TANH_BWD:
	case AG_OP_SILU_BWD:
	case AG_OP_SIGMOID_BWD:
	case AG_OP_GT:
	case AG_OP_GELU_TANH_BWD:
	case AG_OP_RSQRT_BWD:
	case AG_OP_POW_BWD:
	case AG_OP_ADD_:
	case AG_OP_LERP_: return 2;
	case AG_OP_WHERE:
	case AG_OP_ADDCMUL_:
	case AG_OP_ADDCDIV_: return 3;
	default: return -1;
	}
}

/* out and n inputs, already broadcast to out's shape. */
static void run_ew(enum ag_op op, float s0, const struct agv *out, const struct agv *in, int n)
{
	const struct agv *v[EW_MAX] = {out};
	for (int i = 0; i < n; i++)
		v[1 + i] = &in[i];
	if (out->numel == 0)
		return;
	/* fp32 and unit strides everywhere: a flat loop */
	int flat = out->dt == AG_F32;
	for (int i = 0; i < n && flat; i++)
		flat = in[i].dt == AG_F32 || (op == AG_OP_WHERE && i == 0 && in[i].dt == AG_BOOL);
	for (unsigned k = 0; k + 1 < out->nd && flat; k++)
		for (int i = 0; i <= n; i++)
			flat &= v[i]->stride[k] == v[i]->stride[k + 1] * (int64_t)v[i]->shape[k + 1];
	for (int i = 0; i <= n && flat && out->nd > 0; i++)
		flat &= v[i]->stride[out->nd - 1] == 1;
	if (flat && op != AG_OP_WHERE) {
		/* one loop per op, each with its formula inlined (the switch in
		 * ew_value folds away), so that the compiler can vectorise it;
		 * an absent operand reads the output, which no formula uses */
		float *o = (float *)out->base;
		const float *a = n > 0 ? (const float *)in[0].base : o, *b = n > 1 ? (const float *)in[1].base : o,
		            *c = n > 2 ? (const float *)in[2].base : o;
		uint64_t N = out->numel;
#define FLAT(OP)                                                   \
	case OP:                                                   \
		for (uint64_t e = 0; e < N; e++)                   \
			o[e] = ew_value(OP, s0, a[e], b[e], c[e]); \
		return;
		switch (op) {
			FLAT(AG_OP_FILL) FLAT(AG_OP_COPY) FLAT(AG_OP_ADD) FLAT(AG_OP_ADD_) FLAT(AG_OP_ADD_SCALAR)
			FLAT(AG_OP_ADD_SCALAR_) FLAT(AG_OP_MUL) FLAT(AG_OP_MUL_SCALAR) FLAT(AG_OP_MUL_SCALAR_) FLAT(AG_OP_DIV)
			FLAT(AG_OP_DIV_SCALAR_) FLAT(AG_OP_NEG) FLAT(AG_OP_POW_SCALAR) FLAT(AG_OP_TANH) FLAT(AG_OP_RSQRT)
			FLAT(AG_OP_SQRT) FLAT(AG_OP_SILU) FLAT(AG_OP_TANH_BWD) FLAT(AG_OP_SILU_BWD) FLAT(AG_OP_RSQRT_BWD)
			FLAT(AG_OP_POW_BWD) FLAT(AG_OP_SIGMOID) FLAT(AG_OP_SIGMOID_BWD) FLAT(AG_OP_ZERO_) FLAT(AG_OP_ADDCMUL_) FLAT(AG_OP_ADDCDIV_) FLAT(AG_OP_LERP_)
		default:
			break;
		}
#undef FLAT
	}
	struct walk w;
	walk_init(&w, v, (unsigned)n + 1);
	do {
		float a = n > 0 ? ld(&in[0], w.off[1]) : 0.0f, b = n > 1 ? ld(&in[1], w.off[2]) : 0.0f,
		      c = n > 2 ? ld(&in[2], w.off[3]) : 0.0f;
		if (op == AG_OP_COPY && out->dt == AG_I64 && in[0].dt == AG_I64)
			sti(out, w.off[0], ldi(&in[0], w.off[1]));
		else if (op == AG_OP_COPY && out->dt == in[0].dt && out->es == 2) /* the bits as they are: a 16-bit
			                                                          * NaN (a 4-bit layer's codes held
			                                                          * as bf16) keeps its payload */
			memcpy((unsigned char *)out->base + w.off[0] * 2, (const unsigned char *)in[0].base + w.off[1] * 2, 2);
		else
			st(out, w.off[0], ew_value(op, s0, a, b, c));
	} while (walk_next(&w));
}

/* ------------------------------------------------------------------------ */
/* Row ops: the last dimension of each row */

/* Offset of row r's first element in v (v's last dim the row). */
static int64_t row_off(const struct agv *v, uint64_t r)
{
	int64_t off = 0;
	if (v->nd == 0)
		return 0;
	for (unsigned k = v->nd - 1; k-- > 0;) {
		off += (int64_t)(r % v->shape[k]) * v->stride[k];
		r /= v->shape[k];
	}
	return off;
}

static uint64_t rows_of(const struct agv *v) { return v->nd == 0 ? 1 : v->numel / (v->shape[v->nd - 1] ? v->shape[v->nd - 1] : 1); }
static uint64_t cols_of(const struct agv *v) { return v->nd == 0 ? 1 : v->shape[v->nd - 1]; }
static int64_t cs_of(const struct agv *v) { return v->nd == 0 ? 0 : v->stride[v->nd - 1]; }

static void zero_all(const struct agv *v)
{
	run_ew(AG_OP_FILL, 0.0f, v, NULL, 0);
}

/* ------------------------------------------------------------------------ */
/* Products */

/* v's dims [0, k) merged into one if their strides allow: returns the
 * merged size and stride through *n, *s, or -1. Size-1 dims merge freely. */
static int merge(const struct agv *v, unsigned k, uint64_t *n, int64_t *s)
{
	uint64_t size = 1;
	int64_t stride = 0;
	int have = 0;
	for (unsigned i = k; i-- > 0;) {
		if (v->shape[i] == 1)
			continue;
		if (!have) {
			stride = v->stride[i];
			size = v->shape[i];
			have = 1;
			continue;
		}
		if (v->stride[i] != stride * (int64_t)size)
			return -1;
		size *= v->shape[i];
	}
	*n = size;
	*s = have ? stride : 1;
	return 0;
}

/* A matrix: rows × cols, strides rs, cs, at p. */
struct mat {
	void *p;
	const struct agv *v; /* its dtype */
	uint64_t r, c;
	int64_t rs, cs;
};

/* cblas's view of m: its transposition and leading dimension, or -1. */
static int blas_of(const struct mat *m, CBLAS_TRANSPOSE *t, blasint *ld)
{
	if (m->v->dt != AG_F32)
		return -1;
	if ((m->c == 1 || m->cs == 1) && (m->r == 1 || m->rs >= (int64_t)m->c)) {
		*t = CblasNoTrans;
		*ld = (blasint)(m->r == 1 ? (m->c ? m->c : 1) : (uint64_t)m->rs);
		return 0;
	}
	if ((m->r == 1 || m->rs == 1) && (m->c == 1 || m->cs >= (int64_t)m->r)) {
		*t = CblasTrans;
		*ld = (blasint)(m->c == 1 ? (m->r ? m->r : 1) : (uint64_t)m->cs);
		return 0;
	}
	return -1;
}

/* n elements of v from element `at`, `step` apart, widened into out[]
 * (ld's values; the dtype's case chosen once) */
static void ld_run(const struct agv *v, int64_t at, int64_t step, uint64_t n, float *out)
{
	const unsigned char *p = (const unsigned char *)v->base;
	if (v->dt == AG_BF16) {
		for (uint64_t j = 0; j < n; j++) {
			uint16_t h;
			memcpy(&h, p + (at + (int64_t)j * step) * 2, 2);
			uint32_t u = (uint32_t)h << 16;
			memcpy(&out[j], &u, 4);
		}
	} else if (v->dt == AG_F32) {
		for (uint64_t j = 0; j < n; j++)
			memcpy(&out[j], p + (at + (int64_t)j * step) * 4, 4);
	} else {
		for (uint64_t j = 0; j < n; j++)
			out[j] = ld(v, at + (int64_t)j * step);
	}
}

/* c = beta·c + a @ b (beta 0 or 1). */
static void gemm(const struct mat *c, const struct mat *a, const struct mat *b, float beta)
{
	CBLAS_TRANSPOSE ta, tb, tc;
	blasint la, lb, lc;
	uint64_t M = c->r, N = c->c, K = a->c;
	if (M == 0 || N == 0)
		return;
	if (K > 0 && blas_of(a, &ta, &la) == 0 && blas_of(b, &tb, &lb) == 0 && blas_of(c, &tc, &lc) == 0 &&
	    tc == CblasNoTrans) {
		cblas_sgemm(CblasRowMajor, ta, tb, (blasint)M, (blasint)N, (blasint)K, 1.0f, (const float *)a->p, la,
		            (const float *)b->p, lb, beta, (float *)c->p, lc);
		return;
	}
	/* (16-bit or strided operands) each element's sum in k's order, as
	 * one accumulator a column would: a row's columns 256 at a time, a
	 * over k outside, so b is read along its rows */
	struct agv av = *a->v, bv = *b->v, cv = *c->v;
	av.base = a->p, bv.base = b->p, cv.base = c->p;
	float acc[256], brow[256];
	for (uint64_t i = 0; i < M; i++)
		for (uint64_t j0 = 0; j0 < N; j0 += 256) {
			uint64_t nj = N - j0 < 256 ? N - j0 : 256;
			for (uint64_t j = 0; j < nj; j++)
				acc[j] = beta != 0.0f ? ld(&cv, (int64_t)i * c->rs + (int64_t)(j0 + j) * c->cs) : 0.0f;
			for (uint64_t k = 0; k < K; k++) {
				float aik = ld(&av, (int64_t)i * a->rs + (int64_t)k * a->cs);
				ld_run(&bv, (int64_t)k * b->rs + (int64_t)j0 * b->cs, b->cs, nj, brow);
				for (uint64_t j = 0; j < nj; j++)
					acc[j] += aik * brow[j];
			}
			for (uint64_t j = 0; j < nj; j++)
				st(&cv, (int64_t)i * c->rs + (int64_t)(j0 + j) * c->cs, acc[j]);
		}
}

/* The 2-D matrix of v: its leading dims merged into rows. */
static int mat2(const struct agv *v, struct mat *m)
{
	if (v->nd < 1)
		return -1;
	m->v = v;
	m->p = v->base;
	m->c = v->nd >= 1 ? v->shape[v->nd - 1] : 1;
	m->cs = v->stride[v->nd - 1];
	if (v->nd == 1) {
		m->r = 1;
		m->rs = (int64_t)m->c;
		return 0;
	}
	return merge(v, v->nd - 1, &m->r, &m->rs);
}

/* ------------------------------------------------------------------------ */
/* The ops */

struct opctx {
	struct ag_exec *x;
	const struct ag_event *e;
	size_t ei;
	char **cause;
};

#define FAIL(...) fail_ev(oc->cause, oc->e, oc->ei, __VA_ARGS__)

static int op_mm(struct opctx *oc, const struct agv *out, const struct agv *in, int bias)
{
	struct mat c, a, b;
	if (mat2(out, &c) != 0 || mat2(&in[0], &a) != 0 || in[1].nd != 2 || mat2(&in[1], &b) != 0)
		return FAIL("mm: a product's operands are not matrices");
	if (a.r != c.r || b.c != c.c || a.c != b.r)
		return FAIL("mm: the product's shapes do not agree");
	float beta = 0.0f;
	if (bias) { /* out = bias broadcast over rows, then += a @ b */
		struct agv bb;
		if (bcast(&bb, &in[2], out) != 0)
			return FAIL("addmm: the bias does not broadcast to the output");
		run_ew(AG_OP_COPY, 0.0f, out, &bb, 1);
		beta = 1.0f;
	}
	gemm(&c, &a, &b, beta);
	return 0;
}

static int op_bmm(struct opctx *oc, const struct agv *out, const struct agv *in)
{
	unsigned nd = out->nd;
	if (nd < 3 || in[0].nd < 2 || in[1].nd < 2)
		return FAIL("bmm: bmm's operands are not batches of matrices");
	uint64_t M = out->shape[nd - 2], N = out->shape[nd - 1];
	uint64_t K = in[0].shape[in[0].nd - 1];
	if (in[0].shape[in[0].nd - 2] != M || in[1].shape[in[1].nd - 2] != K || in[1].shape[in[1].nd - 1] != N)
		return FAIL("bmm: the product's shapes do not agree");
	/* the batch dims of each operand, broadcast to out's */
	struct agv ob = *out, ab = in[0], bb = in[1], a2, b2;
	ob.nd = nd - 2;
	ab.nd = in[0].nd - 2;
	bb.nd = in[1].nd - 2;
	ob.numel = 1;
	for (unsigned k = 0; k < ob.nd; k++)
		ob.numel *= ob.shape[k];
	if (bcast(&a2, &ab, &ob) != 0 || bcast(&b2, &bb, &ob) != 0)
		return FAIL("bmm: the batch dimensions do not agree");
	const struct agv *v[3] = {&ob, &a2, &b2};
	struct walk w;
	walk_init(&w, v, 3);
	do {
		struct mat c = {(unsigned char *)out->base + w.off[0] * (int64_t)out->es, out, M, N, out->stride[nd - 2], out->stride[nd - 1]};
		struct mat a = {(unsigned char *)in[0].base + w.off[1] * (int64_t)in[0].es, &in[0], M, K, in[0].stride[in[0].nd - 2],
		                in[0].stride[in[0].nd - 1]};
		struct mat b = {(unsigned char *)in[1].base + w.off[2] * (int64_t)in[1].es, &in[1], K, N, in[1].stride[in[1].nd - 2],
		                in[1].stride[in[1].nd - 1]};
		gemm(&c, &a, &b, 0.0f);
	} while (ob.numel > 0 && walk_next(&w));
	return 0;
}

/* Rows of x (rows × C): every row operand must have as many rows. */
static int same_rows(const struct agv *a, const struct agv *b) { return rows_of(a) == rows_of(b) && cols_of(a) == cols_of(b); }

static int op_layer_norm(struct opctx *oc, const struct agv *out, const struct agv *mean, const struct agv *rstd,
                         const struct agv *xv, const struct agv *w, const struct agv *b, float eps)
{
	uint64_t R = rows_of(xv), C = cols_of(xv);
	if (!same_rows(out, xv) || (mean && mean->numel != R) || (rstd && rstd->numel != R) ||
	    (w && w->numel != C) || (b && b->numel != C))
		return FAIL("layer_norm: layer_norm's operands do not agree");
	for (uint64_t r = 0; r < R; r++) {
		int64_t xo = row_off(xv, r), oo = row_off(out, r), xs = cs_of(xv), os = cs_of(out);
		double s = 0, s2 = 0;
		for (uint64_t j = 0; j < C; j++)
			s += ld(xv, xo + (int64_t)j * xs);
		float mu = (float)(s / (double)C);
		for (uint64_t j = 0; j < C; j++) {
			float d = ld(xv, xo + (int64_t)j * xs) - mu;
			s2 += (double)d * d;
		}
		float rs = 1.0f / sqrtf((float)(s2 / (double)C) + eps);
		for (uint64_t j = 0; j < C; j++) {
			float y = (ld(xv, xo + (int64_t)j * xs) - mu) * rs;
			if (w)
				y *= ld(w, at_lin(w, j));
			if (b)
				y += ld(b, at_lin(b, j));
			st(out, oo + (int64_t)j * os, y);
		}
		if (mean)
			st(mean, at_lin(mean, r), mu);
		if (rstd)
			st(rstd, at_lin(rstd, r), rs);
	}
	return 0;
}

static int op_layer_norm_bwd(struct opctx *oc, const struct agv *dx, const struct agv *dw, const struct agv *db,
                             const struct agv *g, const struct agv *xv, const struct agv *mean, const struct agv *rstd,
                             const struct agv *w)
{
	uint64_t R = rows_of(xv), C = cols_of(xv);
	if (!same_rows(g, xv) || mean->numel != R || rstd->numel != R || (w && w->numel != C) ||
	    (dx && !same_rows(dx, xv)) || (dw && dw->numel != C) || (db && db->numel != C))
		return FAIL("layer_norm_backward: layer_norm_backward's operands do not agree");
	if (dw)
		zero_all(dw);
	if (db)
		zero_all(db);
	for (uint64_t r = 0; r < R; r++) {
		int64_t xo = row_off(xv, r), go = row_off(g, r), xs = cs_of(xv), gs = cs_of(g);
		float mu = ld(mean, at_lin(mean, r)), rs = ld(rstd, at_lin(rstd, r));
		float m1 = 0, m2 = 0; /* mean(g·w), mean(g·w·xhat) */
		for (uint64_t j = 0; j < C; j++) {
			float xh = (ld(xv, xo + (int64_t)j * xs) - mu) * rs, gj = ld(g, go + (int64_t)j * gs);
			float dxh = w ? gj * ld(w, at_lin(w, j)) : gj;
			m1 += dxh;
			m2 += dxh * xh;
			if (dw) {
				int64_t o = at_lin(dw, j);
				st(dw, o, ld(dw, o) + gj * xh);
			}
			if (db) {
				int64_t o = at_lin(db, j);
				st(db, o, ld(db, o) + gj);
			}
		}
		m1 /= (float)C;
		m2 /= (float)C;
		if (!dx)
			continue;
		int64_t dxo = row_off(dx, r), dxs = cs_of(dx);
		for (uint64_t j = 0; j < C; j++) {
			float xh = (ld(xv, xo + (int64_t)j * xs) - mu) * rs, gj = ld(g, go + (int64_t)j * gs);
			float dxh = w ? gj * ld(w, at_lin(w, j)) : gj;
			st(dx, dxo + (int64_t)j * dxs, rs * (dxh - m1 - xh * m2));
		}
	}
	return 0;
}

/* softmax (lg 0) or log_softmax (lg 1) of each row. */
static int op_softmax(struct opctx *oc, const struct agv *out, const struct agv *in, int lg)
{
	if (!same_rows(out, in))
		return FAIL("softmax: softmax's output and input differ in shape");
	uint64_t R = rows_of(in), C = cols_of(in);
	for (uint64_t r = 0; r < R && C > 0; r++) {
		int64_t io = row_off(in, r), oo = row_off(out, r), is = cs_of(in), os = cs_of(out);
		float mx = -INFINITY;
		for (uint64_t j = 0; j < C; j++) {
			float v = ld(in, io + (int64_t)j * is);
			mx = v > mx ? v : mx;
		}
		double sum = 0;
		for (uint64_t j = 0; j < C; j++)
			sum += exp((double)(ld(in, io + (int64_t)j * is) - mx));
		float lse = (float)log(sum);
		for (uint64_t j = 0; j < C; j++) {
			float z = ld(in, io + (int64_t)j * is) - mx;
			st(out, oo + (int64_t)j * os, lg ? z - lse : (float)(exp((double)z) / sum));
		}
	}
	return 0;
}

/* (grad g, output y): softmax's (lg 0) or log_softmax's (lg 1) backward. */
static int op_softmax_bwd(struct opctx *oc, const struct agv *out, const struct agv *g, const struct agv *y, int lg)
{
	if (!same_rows(out, g) || !same_rows(g, y))
		return FAIL("softmax_backward: softmax_backward's operands differ in shape");
	uint64_t R = rows_of(g), C = cols_of(g);
	for (uint64_t r = 0; r < R; r++) {
		int64_t go = row_off(g, r), yo = row_off(y, r), oo = row_off(out, r);
		int64_t gs = cs_of(g), ys = cs_of(y), os = cs_of(out);
		double dot = 0;
		for (uint64_t j = 0; j < C; j++)
			dot += lg ? (double)ld(g, go + (int64_t)j * gs)
			          : (double)ld(g, go + (int64_t)j * gs) * ld(y, yo + (int64_t)j * ys);
		for (uint64_t j = 0; j < C; j++) {
			float gj = ld(g, go + (int64_t)j * gs), yj = ld(y, yo + (int64_t)j * ys);
			st(out, oo + (int64_t)j * os, lg ? gj - expf(yj) * (float)dot : (gj - (float)dot) * yj);
		}
	}
	return 0;
}

static int op_nll(struct opctx *oc, const struct agv *loss, const struct agv *tw, const struct agv *lp,
                  const struct agv *tg, int64_t ignore)
{
	uint64_t R = rows_of(lp), V = cols_of(lp);
	if (tg->numel != R)
		return FAIL("nll_loss: the targets are not one a row");
	double sum = 0;
	uint64_t n = 0;
	for (uint64_t r = 0; r < R; r++) {
		int64_t t = ldi(tg, at_lin(tg, r));
		if (t == ignore) /* ignore_index (-100: the labels' padding) */
			continue;
		if (t < 0 || (uint64_t)t >= V)
			return FAIL("nll_loss: a target is outside the vocabulary");
		sum -= ld(lp, row_off(lp, r) + t * cs_of(lp));
		n++;
	}
	st(loss, 0, n ? (float)(sum / (double)n) : NAN);
	if (tw)
		st(tw, 0, (float)n);
	return 0;
}

static int op_nll_bwd(struct opctx *oc, const struct agv *out, const struct agv *g, const struct agv *tg,
                      const struct agv *tw, int64_t ignore)
{
	uint64_t R = rows_of(out), V = cols_of(out);
	if (tg->numel != R)
		return FAIL("nll_loss_backward: the targets are not one a row");
	zero_all(out);
	float v = -ld(g, 0) / ld(tw, 0);
	for (uint64_t r = 0; r < R; r++) {
		int64_t t = ldi(tg, at_lin(tg, r));
		if (t == ignore) /* ignore_index (-100: the labels' padding) */
			continue;
		if (t < 0 || (uint64_t)t >= V)
			return FAIL("nll_loss_backward: a target is outside the vocabulary");
		st(out, row_off(out, r) + t * cs_of(out), v);
	}
	return 0;
}

static int op_embedding(struct opctx *oc, const struct agv *out, const struct agv *tab, const struct agv *idx, int bwd)
{
	/* forward: out (rows, C) = tab[idx]; backward: out is the table's
	 * grad, tab the incoming grad (rows, C) */
	const struct agv *rowsv = bwd ? tab : out, *table = bwd ? out : tab;
	uint64_t R = rows_of(rowsv), C = cols_of(rowsv), V = table->nd == 2 ? table->shape[0] : 0;
	if (idx->numel != R || table->nd != 2 || table->shape[1] != C)
		return FAIL("embedding: the embedding's operands do not agree");
	if (bwd)
		zero_all(out);
	for (uint64_t r = 0; r < R; r++) {
		int64_t t = ldi(idx, at_lin(idx, r));
		if (t < 0 || (uint64_t)t >= V)
			return FAIL("embedding: a token id is outside the table");
		int64_t ro = row_off(rowsv, r), rs = cs_of(rowsv), to = t * table->stride[0], ts = table->stride[1];
		for (uint64_t j = 0; j < C; j++) {
			if (bwd)
				st(out, to + (int64_t)j * ts, ld(out, to + (int64_t)j * ts) + ld(tab, ro + (int64_t)j * rs));
			else
				st(out, ro + (int64_t)j * rs, ld(tab, to + (int64_t)j * ts));
		}
	}
	return 0;
}

/* Non-elementwise ops over indices. */
/* (s1: ROPE_INV_FREQ's linear rope_scaling factor, arg[1]; 0: none) */
static int op_indexed(struct opctx *oc, enum ag_op op, const struct agv *out, float s0, float s1)
{
	if (out->numel == 0)
		return 0;
	const struct agv *v[1] = {out};
	struct walk w;
	walk_init(&w, v, 1);
	uint64_t lin = 0;
	do {
		uint64_t i = out->nd >= 2 ? w.idx[out->nd - 2] : 0, j = out->nd >= 1 ? w.idx[out->nd - 1] : 0;
		switch (op) {
		case AG_OP_ARANGE:
			sti(out, w.off[0], (int64_t)lin);
			break;
		case AG_OP_TRIL_MASK:
			st(out, w.off[0], j <= i ? 1.0f : 0.0f);
			break;
		case AG_OP_SLIDING_MASK: /* tril(diagonal=-window): j - i <= -window */
			st(out, w.off[0], (double)j + s0 <= (double)i ? 1.0f : 0.0f);
			break;
		case AG_OP_ROPE_INV_FREQ: { /* 1.0 / (base ** (arange(0, dim, 2).float() / dim)), dim = 2n; then a
		                             * linear rope_scaling's `inv_freq /= factor` (modeling_rope_utils.py) */
			float inv = 1.0f / powf(s0, (float)(2 * lin) / (float)(2 * out->numel));
			if (s1 > 0.0f && s1 != 1.0f)
				inv /= s1;
			st(out, w.off[0], inv);
			break;
		}
		default: /* AG_OP_CAUSAL_ADD_MASK */
			st(out, w.off[0], j <= i ? 0.0f : s0);
		}
		lin++;
	} while (walk_next(&w));
	(void)oc;
	return 0;
}

/* out = cat((in0, .., in(n-1)), dim = -1). An operand is read as rows of
 * its own count of columns in row-major order over its view, so that a
 * permuted 4-D view (B, T, h, hd) gives its (B·T, h·hd) rows as PyTorch's
 * cat reads a strided input. */
static int op_cat_last(struct opctx *oc, const struct agv *out, const struct agv *in, int n)
{
	uint64_t R = rows_of(out), cols = 0, c[AG_MAXIN];
	for (int k = 0; k < n; k++) {
		if (R == 0 || in[k].numel % R != 0)
			return FAIL("cat: operand %d's %llu elements are not rows of the output's %llu", k,
			            (unsigned long long)in[k].numel, (unsigned long long)R);
		c[k] = in[k].numel / R;
		cols += c[k];
	}
	if (cols != cols_of(out))
		return FAIL("cat: the operands' columns do not sum to the output's");
	for (uint64_t r = 0; r < R; r++) {
		int64_t oo = row_off(out, r), os = cs_of(out);
		uint64_t at = 0;
		for (int k = 0; k < n; k++) {
			int rowwise = rows_of(&in[k]) == R;
			int64_t io = rowwise ? row_off(&in[k], r) : 0, is = cs_of(&in[k]);
			for (uint64_t j = 0; j < c[k]; j++)
				st(out, oo + (int64_t)(at + j) * os,
				   ld(&in[k], rowwise ? io + (int64_t)j * is : at_lin(&in[k], r * c[k] + j)));
			at += c[k];
		}
	}
	return 0;
}

static int op_mean_last(struct opctx *oc, const struct agv *out, const struct agv *in)
{
	uint64_t R = rows_of(in), C = cols_of(in);
	if (out->numel != R)
		return FAIL("mean: mean's output is not one a row");
	for (uint64_t r = 0; r < R; r++) {
		int64_t io = row_off(in, r), is = cs_of(in);
		double s = 0;
		for (uint64_t j = 0; j < C; j++)
			s += ld(in, io + (int64_t)j * is);
		st(out, at_lin(out, r), (float)(s / (double)C));
	}
	return 0;
}

/* QLoRA's 4-bit base (util/nf4.h's kernels, bitsandbytes 0.47.0's
 * algorithm): each operand read in row-major order of its view into a
 * flat array, the kernel run, its outputs written back. */
static float *flat_in(const struct agv *v)
{
	float *f = zs_malloc((size_t)(v->numel ? v->numel : 1) * sizeof *f);
	for (uint64_t r = 0; r < v->numel; r++)
		f[r] = ld(v, at_lin(v, r));
	return f;
}

static uint8_t *flat_in_u8(const struct agv *v)
{
	uint8_t *f = zs_malloc((size_t)(v->numel ? v->numel : 1));
	for (uint64_t r = 0; r < v->numel; r++)
		f[r] = (uint8_t)ld(v, at_lin(v, r));
	return f;
}

static void flat_out(const struct agv *v, const float *f)
{
	for (uint64_t r = 0; r < v->numel; r++)
		st(v, at_lin(v, r), f[r]);
}

static void flat_out_u8(const struct agv *v, const uint8_t *f)
{
	for (uint64_t r = 0; r < v->numel; r++)
		st(v, at_lin(v, r), (float)f[r]);
}

/* The packed codes' bytes, (n + 1) / 2 of them: a uint8 view's elements,
 * or under FSDP (bitsandbytes' quant_storage float32, or bfloat16 where
 * the model is loaded in bf16: util/autograd.c's q4_quantize) the bytes
 * of a contiguous fp32 or bf16 view, as the kernel reads
 * them; codes_view: whether v holds them. */
static int codes_view(const struct agv *v, uint64_t n)
{
	if (v->dt == AG_U8)
		return v->numel == (n + 1) / 2;
	return (v->dt == AG_F32 || v->dt == AG_BF16) && v->numel * v->es == (n + 1) / 2 &&
	       (v->nd == 0 || v->stride[0] == 1 || v->numel <= 1);
}

static uint8_t *codes_in(const struct agv *v)
{
	if (v->dt == AG_U8)
		return flat_in_u8(v);
	uint8_t *f = zs_malloc((size_t)(v->numel * v->es > 0 ? v->numel * v->es : 1));
	memcpy(f, v->base, (size_t)(v->numel * v->es));
	return f;
}

static void codes_out(const struct agv *v, const uint8_t *f)
{
	if (v->dt == AG_U8)
		flat_out_u8(v, f);
	else
		memcpy(v->base, f, (size_t)(v->numel * v->es));
}

/* ------------------------------------------------------------------------ */
/* A mixture's routing (MixtralSparseMoeBlock.forward, modeling_mixtral.py
 * at 00d4b3d2 105-142, and its backward as 1.13's autograd runs it: util/
 * autograd.c's moe_fwd, moe_bwd). Every operand is walked in its view's
 * row-major order (at_lin), so the permuted expert mask and torch.where's
 * strided columns read as PyTorch reads them; indices are int64. */

/* out0 (.., k) the k largest of each row of in0 (.., C), largest first, of
 * equal ones the lower index (moe_kernels.h's moe_topk, unnormalised);
 * out1 (int64) their columns. */
static int op_topk(struct opctx *oc, const struct agv *val, const struct agv *ix, const struct agv *in, double arg)
{
	uint64_t R = rows_of(in), C = cols_of(in), k = (uint64_t)arg;
	if (k < 1 || k > C || rows_of(val) != R || cols_of(val) != k || rows_of(ix) != R || cols_of(ix) != k)
		return FAIL("topk: the outputs are not (rows, %llu) of a (rows, %llu) input", (unsigned long long)k,
		            (unsigned long long)C);
	float *p = flat_in(in), *w = zs_malloc(R * k * sizeof *w);
	int *idx = zs_malloc(R * k * sizeof *idx);
	size_t *counts = zs_calloc(C, sizeof *counts);
	moe_topk(idx, w, counts, p, R, C, k, 0);
	for (uint64_t r = 0; r < R * k; r++) {
		st(val, at_lin(val, r), w[r]);
		sti(ix, at_lin(ix, r), idx[r]);
	}
	free(counts);
	free(idx);
	free(w);
	free(p);
	return 0;
}

/* out (0-dim) = the min (or max) of in0's elements, read as integers
 * (one_hot's range check of the chosen experts). */
static int op_extreme(struct opctx *oc, const struct agv *out, const struct agv *in, int max)
{
	if (in->numel == 0 || out->numel != 1)
		return FAIL("min/max: an empty input or an output of more than one element");
	int64_t m = ldi(in, at_lin(in, 0));
	for (uint64_t r = 1; r < in->numel; r++) {
		int64_t v = ldi(in, at_lin(in, r));
		m = max ? (v > m ? v : m) : (v < m ? v : m);
	}
	sti(out, 0, m);
	return 0;
}

/* dst[.., idx[.., j]] = src[.., j] (src NULL: val) along the last dim,
 * row for row: scatter_ (one_hot's ones; topk's backward). */
static int op_scatter(struct opctx *oc, const struct agv *dst, const struct agv *idx, const struct agv *src,
                      float val)
{
	uint64_t R = rows_of(idx), J = cols_of(idx), C = cols_of(dst);
	if (rows_of(dst) != R || (src != NULL && (rows_of(src) != R || cols_of(src) != J)))
		return FAIL("scatter_: the index's rows are not the target's");
	for (uint64_t r = 0; r < R; r++)
		for (uint64_t j = 0; j < J; j++) {
			int64_t c = ldi(idx, at_lin(idx, r * J + j));
			if (c < 0 || (uint64_t)c >= C)
				return FAIL("scatter_: index %lld is out of the last dim's %llu", (long long)c,
				            (unsigned long long)C);
			float v = src != NULL ? ld(src, at_lin(src, r * J + j)) : val;
			if (dst->dt == AG_I64)
				sti(dst, at_lin(dst, r * C + (uint64_t)c), (int64_t)v);
			else
				st(dst, at_lin(dst, r * C + (uint64_t)c), v);
		}
	return 0;
}

/* out (n) = in0 (n, ...) summed over every dim but the first, as
 * integers where out is int64 (the expert mask's tokens per expert). */
static int op_sum_lead(struct opctx *oc, const struct agv *out, const struct agv *in)
{
	uint64_t n = in->nd ? in->shape[0] : 1, inner = n ? in->numel / n : 0;
	if (out->numel != n)
		return FAIL("sum: the output is not the input's first dim");
	for (uint64_t i = 0; i < n; i++) {
		int64_t si = 0;
		double sf = 0;
		for (uint64_t j = 0; j < inner; j++) {
			si += ldi(in, at_lin(in, i * inner + j));
			sf += ld(in, at_lin(in, i * inner + j));
		}
		if (out->dt == AG_I64)
			sti(out, at_lin(out, i), si);
		else
			st(out, at_lin(out, i), (float)sf);
	}
	return 0;
}

/* out (n, nd) int64 = the indices of in0's nonzero elements in row-major
 * order. n is the list's: the routing the step was built for. A run
 * whose values route otherwise fails here, naming both counts, before
 * anything of the wrong size is read or written. */
static int op_nonzero(struct opctx *oc, const struct agv *out, const struct agv *in)
{
	uint64_t n = 0, want = out->nd ? out->shape[0] : 0;
	for (uint64_t r = 0; r < in->numel; r++)
		n += ld(in, at_lin(in, r)) != 0.0f;
	if (out->nd != 2 || out->shape[1] != (in->nd ? in->nd : 1) || n != want)
		return FAIL("nonzero: %llu nonzero elements, the list's routing has %llu (the step was built for "
		            "another routing)", (unsigned long long)n, (unsigned long long)want);
	uint64_t i = 0, nd = out->shape[1];
	for (uint64_t r = 0; r < in->numel; r++) {
		if (ld(in, at_lin(in, r)) == 0.0f)
			continue;
		uint64_t q = r;
		for (uint64_t k = nd; k-- > 0;) {
			uint64_t size = in->nd ? in->shape[k] : 1;
			sti(out, at_lin(out, i * nd + k), (int64_t)(q % size));
			q /= size;
		}
		i++;
	}
	return 0;
}

/* The routing the values make (ag_exec.moe_seen): this topk's choices
 * counted as block x->moe_topk's, C experts. */
static void count_choices(struct ag_exec *x, const struct agv *ix, uint64_t C)
{
	size_t base = (size_t)x->moe_topk++ * C;
	if (base + C > x->moe_seen_n)
		return;
	uint64_t *at = x->moe_seen + base;
	for (uint64_t r = 0; r < ix->numel; r++) {
		int64_t e = ldi(ix, at_lin(ix, r));
		if (e >= 0 && (uint64_t)e < C)
			at[e]++;
	}
}

/* The element of src at row (i0, i1) (i1 < 0: row i0 of dim 0 alone),
 * inner element j: advanced indexing's address. -1 if out of range. */
static int64_t index_at(const struct agv *src, int64_t i0, int64_t i1, uint64_t j)
{
	unsigned lead = i1 < 0 ? 1 : 2;
	if (src->nd < lead || i0 < 0 || (uint64_t)i0 >= src->shape[0] ||
	    (lead == 2 && (i1 < 0 || (uint64_t)i1 >= src->shape[1])))
		return -1;
	uint64_t inner = 1;
	for (unsigned k = lead; k < src->nd; k++)
		inner *= src->shape[k];
	uint64_t row = lead == 2 ? (uint64_t)i0 * src->shape[1] + (uint64_t)i1 : (uint64_t)i0;
	return at_lin(src, row * inner + j);
}

/* Advanced indexing's gather and its accumulating scatter, over rows
 * picked by a (and b: src[a[i], b[i]]): acc 0, out[i] = src[rows i]
 * (index, index_select; out's leading 1 of hidden_states[None, top_x]
 * is no dim); acc 1, dst[rows i] += src[i] in index order (index_add_,
 * _index_put_impl_ with accumulate: a row picked twice adds twice). */
static int op_gather(struct opctx *oc, int acc, const struct agv *dst, const struct agv *src, const struct agv *a,
                     const struct agv *b)
{
	const struct agv *big = acc ? dst : src, *small = acc ? src : dst;
	uint64_t n = a->numel;
	if (b != NULL && b->numel != n)
		return FAIL("index: the two index tensors differ in length");
	if (n == 0)
		return 0;
	uint64_t inner = small->numel / n;
	if (inner * n != small->numel)
		return FAIL("index: %llu elements do not split into %llu rows", (unsigned long long)small->numel,
		            (unsigned long long)n);
	for (uint64_t i = 0; i < n; i++) {
		int64_t i0 = ldi(a, at_lin(a, i)), i1 = b != NULL ? ldi(b, at_lin(b, i)) : -1;
		for (uint64_t j = 0; j < inner; j++) {
			int64_t at = index_at(big, i0, i1, j);
			if (at < 0)
				return FAIL("index: row %lld is out of range", (long long)i0);
			int64_t s = at_lin(small, i * inner + j);
			if (acc)
				st(dst, at, ld(dst, at) + ld(src, s));
			else
				st(dst, s, ld(src, at));
		}
	}
	return 0;
}

static int op_quant(struct opctx *oc, enum ag_op k, const struct agv *out, const struct agv *in, int nin, double arg)
{
	static const int need[] = {[AG_OP_NF4_CODE] = 0, [AG_OP_DYNAMIC_MAP] = 0, [AG_OP_NF4_QUANTIZE] = 1,
	                           [AG_OP_NF4_DEQUANTIZE] = 2, [AG_OP_MEAN_ALL] = 1, [AG_OP_QUANTIZE_BLOCKWISE] = 2,
	                           [AG_OP_DEQUANTIZE_BLOCKWISE] = 3};
	if (nin < need[k])
		return FAIL("%s: too few operands", ag_op_name(k));
	unsigned bs = k == AG_OP_QUANTIZE_BLOCKWISE || k == AG_OP_DEQUANTIZE_BLOCKWISE ? (unsigned)arg : NF4_BLOCK;
	if (bs == 0)
		return FAIL("%s: no block size", ag_op_name(k));
	uint64_t n = k == AG_OP_NF4_DEQUANTIZE || k == AG_OP_DEQUANTIZE_BLOCKWISE ? out[0].numel
	             : nin > 0                                                  ? in[0].numel
	                                                                        : out[0].numel;
	uint64_t blocks = (n + bs - 1) / bs;
	float *f = NULL, *a = NULL, *c = NULL;
	uint8_t *q = NULL;
	int rc = 0;
	switch (k) {
	case AG_OP_NF4_CODE:
		if (out[0].numel != 16)
			return FAIL("nf4_code: the code book has 16 values");
		flat_out(&out[0], nf4_code);
		break;
	case AG_OP_DYNAMIC_MAP:
		if (out[0].numel != 256)
			return FAIL("dynamic_map: the map has 256 values");
		c = zs_malloc(256 * sizeof *c);
		nf4_dynamic_map(c);
		flat_out(&out[0], c);
		break;
	case AG_OP_MEAN_ALL: {
		if (out[0].numel != 1)
			return FAIL("mean: the output is not one element");
		double sum = 0;
		for (uint64_t r = 0; r < n; r++)
			sum += ld(&in[0], at_lin(&in[0], r));
		st(&out[0], 0, n ? (float)(sum / (double)n) : NAN);
		break;
	}
	case AG_OP_NF4_QUANTIZE:
	case AG_OP_QUANTIZE_BLOCKWISE:
		if (!(k == AG_OP_NF4_QUANTIZE ? codes_view(&out[0], n) : out[0].numel == n) || out[1].numel != blocks ||
		    (k == AG_OP_QUANTIZE_BLOCKWISE && in[1].numel != 256))
			return FAIL("%s: the outputs do not hold the input's codes and absmax", ag_op_name(k));
		f = flat_in(&in[0]);
		a = zs_malloc((size_t)(blocks ? blocks : 1) * sizeof *a);
		q = zs_malloc((size_t)(out[0].numel * out[0].es > 0 ? out[0].numel * out[0].es : 1));
		if (k == AG_OP_NF4_QUANTIZE) {
			nf4_quantize(q, a, f, n);
		} else {
			c = flat_in(&in[1]);
			nf4_quantize_blockwise(q, a, f, c, n, bs);
		}
		codes_out(&out[0], q);
		flat_out(&out[1], a);
		break;
	case AG_OP_NF4_DEQUANTIZE:
	case AG_OP_DEQUANTIZE_BLOCKWISE:
		if (!(k == AG_OP_NF4_DEQUANTIZE ? codes_view(&in[0], n) : in[0].numel == n) || in[1].numel != blocks ||
		    (k == AG_OP_DEQUANTIZE_BLOCKWISE && in[2].numel != 256))
			return FAIL("%s: the operands are not the output's codes and absmax", ag_op_name(k));
		q = codes_in(&in[0]);
		a = flat_in(&in[1]);
		f = zs_malloc((size_t)(n ? n : 1) * sizeof *f);
		if (k == AG_OP_NF4_DEQUANTIZE) {
			nf4_dequantize(f, q, a, n);
		} else {
			c = flat_in(&in[2]);
			nf4_dequantize_blockwise(f, q, a, c, n, bs);
		}
		flat_out(&out[0], f);
		break;
	default:
		rc = FAIL("op %u is not a quantization op", (unsigned)k);
	}
	free(f), free(a), free(c), free(q);
	return rc;
}

/* out = in summed to out's shape (SUM_ROWS: over every dim but the last). */
static int op_sum_to(struct opctx *oc, const struct agv *out, const struct agv *in, int rows)
{
	struct agv o2 = *out;
	if (rows) { /* out (n) against in (..., n) */
		if (out->numel != cols_of(in))
			return FAIL("sum: the sum's output is not one a column");
		o2.nd = 1;
		o2.shape[0] = out->numel;
		o2.stride[0] = out->nd ? out->stride[out->nd - 1] : 1;
	}
	struct agv ob;
	if (bcast(&ob, &o2, in) != 0)
		return FAIL("sum_to_size: the output does not broadcast to the input");
	/* accumulate in place over the output, which is zeroed first */
	zero_all(&o2);
	if (in->numel == 0)
		return 0;
	const struct agv *v[2] = {in, &ob};
	struct walk w;
	walk_init(&w, v, 2);
	do
		st(&ob, w.off[1], ld(&ob, w.off[1]) + ld(in, w.off[0]));
	while (walk_next(&w));
	return 0;
}

static int op_adam_fused(struct opctx *oc, const struct agv *in)
{
	const struct ag_options *o = &oc->x->o;
	for (int i = 1; i < 4; i++)
		if (in[i].numel != in[0].numel)
			return FAIL("_fused_adam_: the fused Adam's tensors differ in size");
	double t = (double)oc->x->steps + 1;
	float b1 = (float)o->beta1, b2 = (float)o->beta2, eps = (float)o->eps;
	float step = (float)(o->lr / (1.0 - pow(o->beta1, t))), bc2s = (float)sqrt(1.0 - pow(o->beta2, t));
	for (uint64_t e = 0; e < in[0].numel; e++) {
		int64_t p = at_lin(&in[0], e), g = at_lin(&in[1], e), m = at_lin(&in[2], e), v = at_lin(&in[3], e);
		float gi = ld(&in[1], g);
		float mi = ld(&in[2], m) * b1 + (1.0f - b1) * gi, vi = ld(&in[3], v) * b2 + (1.0f - b2) * gi * gi;
		st(&in[2], m, mi);
		st(&in[3], v, vi);
		st(&in[0], p, ld(&in[0], p) - step * mi / (sqrtf(vi) / bc2s + eps));
	}
	return 0;
}

/* noise.bernoulli_(keep): each element 1 with probability `keep`, else 0,
 * from a counter-based generator (splitmix64, engine/rng.h's
 * rng_bernoulli_key) over the run's seed, the step, the draw (`draw`: the
 * step's dropout draw, 1-based, which a checkpointed layer's rerun gives
 * again; 0: the event's index) and the element: the same mask for the
 * same run and draw, a new one each step and each dropout (the paper
 * step's LoRA dropout draws the same, engine/tfm_net.c). Not PyTorch's
 * generator (its masks cannot be shared): the engine's numbers are its
 * own, its bytes the step's. */
static int op_bernoulli(struct opctx *oc, const struct agv *out, double keep, double draw)
{
	if (!(keep >= 0 && keep <= 1))
		return FAIL("bernoulli_: the probability %g is not in 0..1", keep);
	uint64_t at = draw > 0 ? (uint64_t)draw | 1ULL << 31 : (uint64_t)oc->ei;
	uint64_t key = rng_bernoulli_key(oc->x->o.seed, oc->x->steps, at);
	for (uint64_t e = 0; e < out->numel; e++)
		st(out, at_lin(out, e), rng_bernoulli_at(key, e, keep) ? 1.0f : 0.0f);
	return 0;
}

/* _scaled_dot_product_flash_attention_for_cpu, causal, no dropout, as its
 * math: per batch and head, row i attends to j <= i: s = q_i · k_j ·
 * scale, out_i = Σ softmax(s)_j v_j, lse_i = log Σ exp(s); q, k, v, out
 * [B, h, T, hd] views (k and v of h heads), lse [B, h, T]. The kernel's
 * blocking (its workspace) is the list's: values do not depend on it. */
static int op_sdpa(struct opctx *oc, const struct agv *out, const struct agv *lse, const struct agv *q,
                   const struct agv *k, const struct agv *v, double scale)
{
	if (q->nd != 4 || k->nd != 4 || v->nd != 4 || out->nd != 4 || lse->nd != 3 || k->shape[1] != q->shape[1] ||
	    out->numel != q->numel || lse->numel * q->shape[3] != q->numel)
		return FAIL("sdpa: the operands are not [B, h, T, hd] and [B, h, T]");
	uint64_t BH = q->shape[0] * q->shape[1], T = q->shape[2], D = q->shape[3];
	float *s = zs_calloc(T, sizeof *s), *acc = zs_calloc(D, sizeof *acc);
	for (uint64_t bh = 0; bh < BH; bh++)
		for (uint64_t i = 0; i < T; i++) {
			float mx = -INFINITY;
			for (uint64_t j = 0; j <= i; j++) {
				float d = 0.0f;
				for (uint64_t e = 0; e < D; e++)
					d += ld(q, at_lin(q, (bh * T + i) * D + e)) * ld(k, at_lin(k, (bh * T + j) * D + e));
				s[j] = d * (float)scale;
				mx = s[j] > mx ? s[j] : mx;
			}
			float sum = 0.0f;
			for (uint64_t j = 0; j <= i; j++)
				sum += s[j] = expf(s[j] - mx);
			for (uint64_t e = 0; e < D; e++)
				acc[e] = 0.0f;
			for (uint64_t j = 0; j <= i; j++)
				for (uint64_t e = 0; e < D; e++)
					acc[e] += s[j] / sum * ld(v, at_lin(v, (bh * T + j) * D + e));
			for (uint64_t e = 0; e < D; e++)
				st(out, at_lin(out, (bh * T + i) * D + e), acc[e]);
			st(lse, at_lin(lse, bh * T + i), mx + logf(sum));
		}
	free(s);
	free(acc);
	return 0;
}

/* Its backward (_scaled_dot_product_flash_attention_for_cpu_backward):
 * from the output's gradient g and the saved q, k, v and lse, P_ij =
 * exp(s_ij − lse_i) (j <= i), out_i = Σ_j P_ij v_j, D_i = g_i · out_i,
 * dS_ij = P_ij (g_i · v_j − D_i); dq_i = scale Σ_j dS_ij k_j, dk_j = scale
 * Σ_i dS_ij q_i, dv_j = Σ_i P_ij g_i. */
static int op_sdpa_bwd(struct opctx *oc, const struct agv *dq, const struct agv *dk, const struct agv *dv,
                       const struct agv *in, double scale)
{
	const struct agv *g = &in[0], *q = &in[1], *k = &in[2], *v = &in[3], *lse = &in[4];
	if (q->nd != 4 || g->numel != q->numel || dq->numel != q->numel || dk->numel != k->numel ||
	    dv->numel != v->numel || k->numel != q->numel || lse->numel * q->shape[3] != q->numel)
		return FAIL("sdpa backward: the operands are not [B, h, T, hd] and [B, h, T]");
	uint64_t BH = q->shape[0] * q->shape[1], T = q->shape[2], D = q->shape[3];
	float *P = zs_calloc(T * T, sizeof *P), *o = zs_calloc(D, sizeof *o);
	float *gq = zs_calloc(T * D, sizeof *gq), *gk = zs_calloc(T * D, sizeof *gk), *gv = zs_calloc(T * D, sizeof *gv);
	for (uint64_t bh = 0; bh < BH; bh++) {
		memset(gq, 0, T * D * sizeof *gq);
		memset(gk, 0, T * D * sizeof *gk);
		memset(gv, 0, T * D * sizeof *gv);
		for (uint64_t i = 0; i < T; i++) {
			float l = ld(lse, at_lin(lse, bh * T + i));
			for (uint64_t j = 0; j <= i; j++) {
				float d = 0.0f;
				for (uint64_t e = 0; e < D; e++)
					d += ld(q, at_lin(q, (bh * T + i) * D + e)) * ld(k, at_lin(k, (bh * T + j) * D + e));
				P[i * T + j] = expf(d * (float)scale - l);
			}
		}
		for (uint64_t i = 0; i < T; i++) {
			float Di = 0.0f;
			for (uint64_t e = 0; e < D; e++) {
				o[e] = 0.0f;
				for (uint64_t j = 0; j <= i; j++)
					o[e] += P[i * T + j] * ld(v, at_lin(v, (bh * T + j) * D + e));
				Di += ld(g, at_lin(g, (bh * T + i) * D + e)) * o[e];
			}
			for (uint64_t j = 0; j <= i; j++) {
				float gvd = 0.0f;
				for (uint64_t e = 0; e < D; e++) {
					float gi = ld(g, at_lin(g, (bh * T + i) * D + e));
					gvd += gi * ld(v, at_lin(v, (bh * T + j) * D + e));
					gv[j * D + e] += P[i * T + j] * gi;
				}
				float ds = P[i * T + j] * (gvd - Di) * (float)scale;
				for (uint64_t e = 0; e < D; e++) {
					gq[i * D + e] += ds * ld(k, at_lin(k, (bh * T + j) * D + e));
					gk[j * D + e] += ds * ld(q, at_lin(q, (bh * T + i) * D + e));
				}
			}
		}
		for (uint64_t r = 0; r < T * D; r++) {
			st(dq, at_lin(dq, bh * T * D + r), gq[r]);
			st(dk, at_lin(dk, bh * T * D + r), gk[r]);
			st(dv, at_lin(dv, bh * T * D + r), gv[r]);
		}
	}
	free(P);
	free(o);
	free(gq);
	free(gk);
	free(gv);
	return 0;
}

/* ------------------------------------------------------------------------ */
/* Events */

static int is_param(const struct ag_exec *x, uint32_t i)
{
	return i < x->s->ntensors && x->s->tensor[storage_of(x, i)].role == AG_ROLE_PARAM;
}

/* in fits in out's leading corner, dimension by dimension (a pad). */
static int pads(const struct agv *in, const struct agv *out)
{
	if (in->nd != out->nd)
		return 0;
	for (unsigned k = 0; k < in->nd; k++)
		if (in->shape[k] > out->shape[k])
			return 0;
	return 1;
}

/* out = in element by element in row-major order, whatever their shapes
 * (the same count). */
static void copy_reshape(const struct agv *out, const struct agv *in)
{
	if (out->numel == 0)
		return;
	const struct agv *vo[1] = {out}, *vi[1] = {in};
	struct walk wo, wi;
	walk_init(&wo, vo, 1);
	walk_init(&wi, vi, 1);
	int exact = out->dt == AG_I64 && in->dt == AG_I64;
	do {
		if (exact)
			sti(out, wo.off[0], ldi(in, wi.off[0]));
		else
			st(out, wo.off[0], ld(in, wi.off[0]));
	} while (walk_next(&wo) && walk_next(&wi));
}

static int is_inplace(enum ag_op op)
{
	return (op >= AG_OP_ZERO_ && op <= AG_OP_ADAM_FUSED_) || op == AG_OP_BERNOULLI_;
}

/* Whether the feed gave parameter storage t its value: a step_params
 * tensor's, or a case's LoRA adapter (feed.adapter). */
static int fed_param(const struct ag_exec *x, uint32_t t)
{
	const struct ag_tensor *a = &x->s->tensor[t];
	return a->param >= 0 || (a->adapter != 0 && x->feed.adapter != NULL);
}

static int do_op(struct ag_exec *x, const struct ag_event *e, size_t ei, char **cause)
{
	struct opctx oc_ = {x, e, ei, cause}, *oc = &oc_;
	/* Set-up ops that write parameters stand for their initialisation
	 * (nn.Module's init): the feed gave them their values. */
	int params_only = x->in_setup;
	for (int k = 0; k < AG_MAXOUT && params_only; k++)
		params_only = e->out[k] == AG_NONE || (is_param(x, e->out[k]) && fed_param(x, storage_of(x, e->out[k])));
	if (params_only && e->out[0] != AG_NONE)
		return 0;
	struct agv in[AG_MAXIN] = {0}, out[AG_MAXOUT] = {0};
	int nin = 0, nout = 0, have_out[AG_MAXOUT] = {0};
	for (; nin < AG_MAXIN && e->in[nin] != AG_NONE; nin++)
		if (view(x, e->in[nin], &in[nin], e, ei, cause) != 0)
			return -1;
	/* outputs may skip a slot (layer_norm_backward's AG_NONE grads) */
	for (int k = 0; k < AG_MAXOUT; k++)
		if (e->out[k] != AG_NONE) {
			if (view(x, e->out[k], &out[k], e, ei, cause) != 0)
				return -1;
			have_out[k] = 1;
			nout = k + 1;
		}
	/* Inputs must hold values: a storage nothing wrote is a missing op
	 * in the list (an in-place op's target reads itself). */
	for (int i = 0; i < nin; i++)
		if (!x->written[storage_of(x, e->in[i])] && !((e->op == AG_OP_ZERO_ || e->op == AG_OP_BERNOULLI_) && i == 0) &&
		    !(e->op == AG_OP_FILL))
			return FAIL("tensor %s (%u) is read before anything wrote it", what_of(x->s, e->in[i]), e->in[i]);
	if (is_inplace(e->op) && e->op != AG_OP_ADAM_FUSED_ && (nout < 1 || nin < 1 || e->out[0] != e->in[0]))
		return FAIL("an in-place op names its target as out[0] and in[0]");
	/* (layer_norm_backward may skip dx: a frozen run's input that
	 * requires no grad, util/autograd.c) */
	if (!is_inplace(e->op) && !have_out[0] && !(e->op == AG_OP_LAYER_NORM_BWD && nout > 0))
		return FAIL("the op has no output");

	float s0 = (float)e->arg[0];
	const struct ag_options *o = &x->o;
	double t = (double)x->steps + 1;
	int opt = e->phase == ZS_PH_OPTIMIZER;
	int divides_sqrt = opt && nin >= 1 && x->sqrt_out[storage_of(x, e->in[0])] &&
	                   (e->op == AG_OP_DIV_SCALAR_ || e->op == AG_OP_MUL_SCALAR_ || e->op == AG_OP_MUL_SCALAR ||
	                    e->op == AG_OP_DIV);
	if (divides_sqrt) { /* Adam's sqrt(v) / sqrt(1 − β2^t) */
		float bc2s = (float)sqrt(1.0 - pow(o->beta2, t));
		x->sqrt_out[storage_of(x, e->in[0])] = 0;
		if (e->op == AG_OP_DIV_SCALAR_)
			s0 = bc2s;
		else if (e->op == AG_OP_DIV) {
			if (in[1].numel != 1)
				return FAIL("div: Adam's sqrt is divided by a tensor of more than one element");
			st(&in[1], 0, bc2s);
		} else
			s0 = 1.0f / bc2s;
	}
	if (opt && e->op == AG_OP_ADDCDIV_ && is_param(x, e->in[0]))
		s0 = (float)(-o->lr / (1.0 - pow(o->beta1, t)));

	int ni = ew_inputs(e->op);
	int rc = 0;
	if (ni >= 0) {
		/* in place, in0 is the target and counts among the inputs read
		 * (ZERO_ reads none) */
		struct agv b[AG_MAXIN] = {0};
		if (nin < ni)
			return FAIL("too few operands");
		if (e->op == AG_OP_COPY && bcast(&b[0], &in[0], &out[0]) != 0 && in[0].numel == out[0].numel) {
			/* reshape's copy: the elements in row-major order */
			copy_reshape(&out[0], &in[0]);
			goto done;
		}
		if (e->op == AG_OP_COPY && bcast(&b[0], &in[0], &out[0]) != 0 && pads(&in[0], &out[0])) {
			/* constant_pad_nd: out = arg[0] around in0, in its leading
			 * corner; slice_backward (arg[1] = p): zeros around in0 put
			 * at p along the last dim */
			struct agv corner = out[0];
			uint64_t at = e->arg[1] > 0 ? (uint64_t)e->arg[1] : 0;
			unsigned last = out[0].nd - 1;
			if (out[0].nd == 0 || at + in[0].shape[last] > out[0].shape[last])
				return FAIL("copy: the slice does not fit in the output");
			memcpy(corner.shape, in[0].shape, sizeof corner.shape);
			corner.numel = in[0].numel;
			corner.base = (unsigned char *)out[0].base + (int64_t)at * out[0].stride[last] * (int64_t)out[0].es;
			run_ew(AG_OP_FILL, s0, &out[0], NULL, 0);
			run_ew(AG_OP_COPY, 0.0f, &corner, &in[0], 1);
			goto done;
		}
		for (int i = 0; i < ni; i++)
			if (bcast(&b[i], &in[i], &out[0]) != 0)
				return FAIL("operand %d does not broadcast to the output", i);
		run_ew(e->op, s0, &out[0], b, ni);
	} else {
		switch (e->op) {
		case AG_OP_ARANGE:
		case AG_OP_TRIL_MASK:
		case AG_OP_ROPE_INV_FREQ:
		case AG_OP_SLIDING_MASK:
		case AG_OP_CAUSAL_ADD_MASK: rc = op_indexed(oc, e->op, &out[0], s0, (float)e->arg[1]); break;
		case AG_OP_CAT_LAST:
			rc = nin < 1 ? FAIL("cat: no operand") : op_cat_last(oc, &out[0], in, nin);
			break;
		case AG_OP_MEAN_LAST: rc = nin < 1 ? FAIL("mean: no operand") : op_mean_last(oc, &out[0], &in[0]); break;
		case AG_OP_SUM_ROWS:
		case AG_OP_SUM_TO:
			rc = nin < 1 ? FAIL("sum: no operand") : op_sum_to(oc, &out[0], &in[0], e->op == AG_OP_SUM_ROWS);
			break;
		case AG_OP_LAYER_NORM:
			rc = nin < 1 ? FAIL("layer_norm: no operand")
			             : op_layer_norm(oc, &out[0], have_out[1] ? &out[1] : NULL, have_out[2] ? &out[2] : NULL,
			                             &in[0], nin > 1 ? &in[1] : NULL, nin > 2 ? &in[2] : NULL, s0);
			break;
		case AG_OP_SOFTMAX:
		case AG_OP_LOG_SOFTMAX:
			rc = nin < 1 ? FAIL("softmax: no operand")
			             : op_softmax(oc, &out[0], &in[0], e->op == AG_OP_LOG_SOFTMAX);
			break;
		case AG_OP_NLL:
			rc = nin < 2 ? FAIL("nll_loss: too few operands")
			             : op_nll(oc, &out[0], have_out[1] ? &out[1] : NULL, &in[0], &in[1], (int64_t)e->arg[0]);
			if (rc == 0) {
				x->loss = ld(&out[0], 0);
				x->loss_sum = (x->have_loss ? x->loss_sum : 0) + x->loss;
				x->have_loss = 1;
				x->loss_t = e->out[0];
			}
			break;
		case AG_OP_MM: rc = nin < 2 ? FAIL("mm: too few operands") : op_mm(oc, &out[0], in, 0); break;
		case AG_OP_ADDMM: rc = nin < 3 ? FAIL("addmm: too few operands") : op_mm(oc, &out[0], in, 1); break;
		case AG_OP_BMM: rc = nin < 2 ? FAIL("bmm: too few operands") : op_bmm(oc, &out[0], in); break;
		case AG_OP_EMBEDDING:
			rc = nin < 2 ? FAIL("embedding: too few operands") : op_embedding(oc, &out[0], &in[0], &in[1], 0);
			break;
		case AG_OP_EMBEDDING_BWD:
			rc = nin < 2 ? FAIL("embedding_backward: too few operands")
			             : op_embedding(oc, &out[0], &in[0], &in[1], 1);
			break;
		case AG_OP_LAYER_NORM_BWD:
			rc = nin < 4 ? FAIL("layer_norm_backward: too few operands")
			             : op_layer_norm_bwd(oc, have_out[0] ? &out[0] : NULL, have_out[1] ? &out[1] : NULL,
			                                 have_out[2] ? &out[2] : NULL, &in[0], &in[1], &in[2], &in[3],
			                                 nin > 4 ? &in[4] : NULL);
			break;
		case AG_OP_SOFTMAX_BWD:
		case AG_OP_LOG_SOFTMAX_BWD:
			rc = nin < 2 ? FAIL("softmax_backward: too few operands")
			             : op_softmax_bwd(oc, &out[0], &in[0], &in[1], e->op == AG_OP_LOG_SOFTMAX_BWD);
			break;
		case AG_OP_NLL_BWD:
			rc = nin < 3 ? FAIL("nll_loss_backward: too few operands")
			             : op_nll_bwd(oc, &out[0], &in[0], &in[1], &in[2], (int64_t)e->arg[0]);
			break;
		case AG_OP_ADAM_FUSED_: rc = nin < 4 ? FAIL("_fused_adam_: too few operands") : op_adam_fused(oc, in); break;
		case AG_OP_BERNOULLI_: rc = nin < 1 ? FAIL("bernoulli_: no operand") : op_bernoulli(oc, &in[0], e->arg[0], e->arg[1]); break;
		case AG_OP_SDPA_FLASH:
			rc = nin < 3 || !have_out[1] ? FAIL("sdpa: too few operands")
			                             : op_sdpa(oc, &out[0], &out[1], &in[0], &in[1], &in[2], e->arg[0]);
			break;
		case AG_OP_SDPA_FLASH_BWD:
			rc = nin < 5 || !have_out[2] ? FAIL("sdpa backward: too few operands")
			                             : op_sdpa_bwd(oc, &out[0], &out[1], &out[2], in, e->arg[0]);
			break;
		case AG_OP_NF4_CODE:
		case AG_OP_DYNAMIC_MAP:
		case AG_OP_NF4_QUANTIZE:
		case AG_OP_NF4_DEQUANTIZE:
		case AG_OP_MEAN_ALL:
		case AG_OP_QUANTIZE_BLOCKWISE:
		case AG_OP_DEQUANTIZE_BLOCKWISE: rc = op_quant(oc, e->op, out, in, nin, e->arg[0]); break;
		case AG_OP_TOPK:
			rc = nin < 1 || !have_out[1] ? FAIL("topk: too few operands")
			                             : op_topk(oc, &out[0], &out[1], &in[0], e->arg[0]);
			if (rc == 0 && x->moe_seen != NULL)
				count_choices(x, &out[1], cols_of(&in[0]));
			break;
		case AG_OP_MIN_ALL:
		case AG_OP_MAX_ALL:
			rc = nin < 1 ? FAIL("min/max: no operand") : op_extreme(oc, &out[0], &in[0], e->op == AG_OP_MAX_ALL);
			break;
		case AG_OP_SCATTER_:
			rc = nin < 2 ? FAIL("scatter_: too few operands")
			             : op_scatter(oc, &out[0], &in[1], nin > 2 ? &in[2] : NULL, s0);
			break;
		case AG_OP_SUM_LEAD: rc = nin < 1 ? FAIL("sum: no operand") : op_sum_lead(oc, &out[0], &in[0]); break;
		case AG_OP_NONZERO: rc = nin < 1 ? FAIL("nonzero: no operand") : op_nonzero(oc, &out[0], &in[0]); break;
		case AG_OP_INDEX:
			rc = nin < 2 ? FAIL("index: too few operands")
			             : op_gather(oc, 0, &out[0], &in[0], &in[1], nin > 2 ? &in[2] : NULL);
			break;
		case AG_OP_INDEX_ADD_:
			rc = nin < 3 ? FAIL("index_add_: too few operands") : op_gather(oc, 1, &out[0], &in[2], &in[1], NULL);
			break;
		case AG_OP_INDEX_PUT_ACC_: { /* its source is in3, after an absent in2 for one index */
			struct agv src;
			if (nin < 2 || e->in[3] == AG_NONE)
				rc = FAIL("_index_put_impl_: too few operands");
			else if (view(x, e->in[3], &src, e, ei, cause) != 0)
				rc = -1;
			else if (!x->written[storage_of(x, e->in[3])])
				rc = FAIL("tensor %s (%u) is read before anything wrote it", what_of(x->s, e->in[3]), e->in[3]);
			else
				rc = op_gather(oc, 1, &out[0], &src, &in[1], nin > 2 ? &in[2] : NULL);
			break;
		}
		default: rc = FAIL("op %u is not one the executor knows", (unsigned)e->op);
		}
	}
	if (rc != 0)
		return -1;
	/* `loss += router_aux_loss_coef * aux_loss` (a mixture's auxiliary
	 * loss, util/autograd.c's moe_aux_fwd): the model's loss is the sum */
	if (e->op == AG_OP_ADD_ && x->have_loss && e->in[0] == x->loss_t) {
		float v = ld(&out[0], 0);
		x->loss_sum += v - x->loss;
		x->loss = v;
	}
done:
	for (int k = 0; k < AG_MAXOUT; k++)
		if (have_out[k])
			x->written[storage_of(x, e->out[k])] = 1;
	if (e->op == AG_OP_ADAM_FUSED_)
		for (int i = 0; i < 4; i++)
			x->written[storage_of(x, e->in[i])] = 1;
	if (opt && e->op == AG_OP_SQRT && have_out[0])
		x->sqrt_out[storage_of(x, e->out[0])] = 1;
	return 0;
}

/* Storage t's buffer: the tracker's (the device's bytes), or, for a host
 * storage (ag_tensor.host: a CPU scalar under --torch-device cuda), the
 * process's own, counted nowhere. */
static void *buf_alloc(struct ag_exec *x, uint32_t t)
{
	const struct ag_tensor *st = &x->s->tensor[t];
	return st->host ? zs_calloc(1, st->bytes) : tracker_alloc(x->tr, x->rank, st->cat, st->bytes);
}

static void buf_free(struct ag_exec *x, uint32_t t)
{
	if (x->s->tensor[t].host)
		free(x->buf[t]);
	else
		tracker_free(x->tr, x->rank, x->buf[t]);
	x->buf[t] = NULL;
}

static int do_alloc(struct ag_exec *x, const struct ag_event *e, size_t ei, char **cause)
{
	const struct ag_step *s = x->s;
	uint32_t t = e->t;
	if (t >= s->ntensors || s->tensor[t].storage != t)
		return fail_ev(cause, e, ei, "%u is not a storage", t);
	if (x->buf[t] != NULL)
		return fail_ev(cause, e, ei, "storage %s (%u) is allocated twice", what_of(s, t), t);
	if (s->tensor[t].bytes == 0)
		return fail_ev(cause, e, ei, "storage %s (%u) has no bytes", what_of(s, t), t);
	x->buf[t] = buf_alloc(x, t);
	x->written[t] = 0;
	x->sqrt_out[t] = 0;
	if (s->tensor[t].role == AG_ROLE_PARAM && s->tensor[t].param >= 0) { /* a wrapper's own (FSDP's shard) is made */
		if (x->feed.param == NULL || x->feed.param(x->feed.ctx, s, t, x->buf[t], cause) != 0)
			return x->feed.param == NULL ? fail_ev(cause, e, ei, "parameter %s (%u) has no initial value",
			                                       what_of(s, t), t)
			                             : -1;
		x->written[t] = 1;
	}
	if (s->tensor[t].role == AG_ROLE_PARAM && s->tensor[t].param < 0 && s->tensor[t].adapter != 0 &&
	    x->feed.adapter != NULL && x->in_setup) { /* a case's adapter, in place of its draw */
		if (x->feed.adapter(x->feed.ctx, s, t, x->buf[t], cause) != 0)
			return -1;
		x->written[t] = 1;
	}
	if (s->tensor[t].role == AG_ROLE_INPUT) {
		if (x->feed.input == NULL || x->feed.input(x->feed.ctx, s, t, x->steps, x->buf[t], cause) != 0)
			return x->feed.input == NULL ? fail_ev(cause, e, ei, "input %s (%u) has no value",
			                                       what_of(s, t), t)
			                             : -1;
		x->written[t] = 1;
	}
	return 0;
}

static int do_free(struct ag_exec *x, const struct ag_event *e, size_t ei, char **cause)
{
	const struct ag_step *s = x->s;
	uint32_t t = e->t;
	if (t >= s->ntensors || s->tensor[t].storage != t)
		return fail_ev(cause, e, ei, "%u is not a storage", t);
	if (x->buf[t] == NULL)
		return fail_ev(cause, e, ei, "storage %s (%u) is freed while not allocated",
		               what_of(s, t), t);
	buf_free(x, t);
	return 0;
}

/* A boundary of the step: its label and the rank's live bytes there. */
static void log_mark(struct ag_exec *x, const char *label)
{
	if (x->nmarks == x->capmarks) {
		x->capmarks = x->capmarks ? 2 * x->capmarks : 64;
		x->mark_label = zs_realloc(x->mark_label, x->capmarks * sizeof *x->mark_label);
		x->mark_bytes = zs_realloc(x->mark_bytes, x->capmarks * sizeof *x->mark_bytes);
	}
	x->mark_label[x->nmarks] = zs_asprintf("%s", label != NULL ? label : "");
	x->mark_bytes[x->nmarks++] = x->tr->rank[x->rank].total;
}

int ag_exec_events(struct ag_exec *x, const struct ag_event *ev, size_t n, char **cause)
{
	for (size_t i = 0; i < n; i++) {
		const struct ag_event *e = &ev[i];
		if (!ag_event_on_rank(e, x->rank)) /* another rank's (ZeroRedundancyOptimizer's local step) */
			continue;
		if (e->kind != AG_EV_MARK)
			tracker_set_rank_phase(x->tr, x->rank, e->phase);
		int rc = 0;
		switch (e->kind) {
		case AG_EV_ALLOC: rc = do_alloc(x, e, i, cause); break;
		case AG_EV_FREE: rc = do_free(x, e, i, cause); break;
		case AG_EV_OP:
			if (AG_OP_CUBLAS(e->op)) /* PyTorch's first cuBLAS call makes its workspace */
				tracker_matmul(x->tr, x->rank);
			rc = do_op(x, e, i, cause);
			break;
		case AG_EV_GRAD_READY: break;
		default:
			if (x->record_marks)
				log_mark(x, e->label);
		}
		if (rc != 0)
			return -1;
	}
	return 0;
}

/* A rank's executor, its tables empty, before its set-up. */
static void exec_init(struct ag_exec *x, const struct ag_step *s, const struct ag_options *o, struct zs_tracker *tr,
                      unsigned rank, const struct ag_exec_feed *feed)
{
	memset(x, 0, sizeof *x);
	x->s = s;
	x->o = *o;
	x->tr = tr;
	x->rank = rank;
	if (feed != NULL)
		x->feed = *feed;
	size_t n = s->ntensors ? s->ntensors : 1;
	x->buf = zs_calloc(n, sizeof *x->buf);
	x->written = zs_calloc(n, 1);
	x->sqrt_out = zs_calloc(n, 1);
	x->in_setup = 1;
}

int ag_exec_begin(struct ag_exec *x, const struct ag_step *s, const struct ag_options *o, struct zs_tracker *tr,
                  unsigned rank, const struct ag_exec_feed *feed, char **cause)
{
	exec_init(x, s, o, tr, rank, feed);
	int rc = ag_exec_events(x, s->setup, s->nsetup, cause);
	x->in_setup = 0;
	if (rc != 0) {
		ag_exec_end(x);
		return -1;
	}
	return 0;
}

int ag_exec_step(struct ag_exec *x, char **cause)
{
	const struct ag_step *s = x->s;
	x->have_loss = 0;
	/* Inputs made in setup (the batch held across steps) take this
	 * step's batch. */
	for (uint32_t t = 0; t < s->ntensors; t++)
		if (x->buf[t] != NULL && s->tensor[t].role == AG_ROLE_INPUT && x->feed.input != NULL) {
			if (x->feed.input(x->feed.ctx, s, t, x->steps, x->buf[t], cause) != 0)
				return -1;
			x->written[t] = 1;
		}
	/* the step's lists: at the first, its own (step1) or first_step's
	 * prefix and the steady step; after it, the steady step */
	const struct ag_event *ev[2];
	size_t nev[2];
	unsigned nl = ag_step_lists(s, x->steps, ev, nev);
	for (unsigned l = 0; l < nl; l++)
		if (ag_exec_events(x, ev[l], nev[l], cause) != 0)
			return -1;
	x->steps++;
	return 0;
}

void *ag_exec_data(const struct ag_exec *x, uint32_t t)
{
	return t < x->s->ntensors ? x->buf[t] : NULL;
}

void ag_exec_end(struct ag_exec *x)
{
	for (size_t t = 0; x->buf != NULL && t < x->s->ntensors; t++)
		if (x->buf[t] != NULL)
			buf_free(x, (uint32_t)t);
	free(x->buf);
	free(x->written);
	free(x->sqrt_out);
	x->buf = NULL;
	x->written = x->sqrt_out = NULL;
	for (size_t i = 0; i < x->nmarks; i++)
		free(x->mark_label[i]);
	free(x->mark_label);
	free(x->mark_bytes);
	x->mark_label = NULL;
	x->mark_bytes = NULL;
	x->nmarks = x->capmarks = 0;
}

/* ------------------------------------------------------------------------ */
/* N ranks in lockstep (DDP: util/ag_ddp.h) */

static int is_collective(const struct ag_event *e)
{
	return e->kind == AG_EV_OP && (e->op == AG_OP_ALL_REDUCE_SUM_ || e->op == AG_OP_BROADCAST_ ||
	                               e->op == AG_OP_ALL_GATHER || e->op == AG_OP_REDUCE_SCATTER_SUM ||
	                               e->op == AG_OP_SHARD);
}

/* FSDP's (util/ag_fsdp.h): out0 N times in0 (all-gather: every rank's
 * shard in rank order), in0 N times out0 (reduce-scatter: this rank's
 * chunk of the ranks' sum, added 0..N-1 in fp32 as gloo's and the
 * reference's), or this rank's own chunk of in0 (shard, zeros past its
 * end: FlatParamHandle._get_shard). Both operands fp32 storages (or
 * views of one), contiguous. Counted as coll.h counts a reduce-scatter
 * and an all-gather: (N-1) shards sent a rank, the steps only. */
static int do_sharded(struct ag_exec *x, unsigned n, const struct ag_event *e, size_t ei, char **cause)
{
	if (e->in[0] == AG_NONE || e->out[0] == AG_NONE)
		return fail_ev(cause, e, ei, "an FSDP collective takes one input and one output");
	struct agv *vi = zs_malloc(n * sizeof *vi), *vo = zs_malloc(n * sizeof *vo);
	int rc = 0;
	for (unsigned k = 0; k < n && rc == 0; k++) {
		rc = view(&x[k], e->in[0], &vi[k], e, ei, cause);
		if (rc == 0)
			rc = view(&x[k], e->out[0], &vo[k], e, ei, cause);
		/* (DeepSpeed's bf16 gathers into its bf16 flat buffer from the fp32
		 * partition its rank's view was copied from, util/ag_ds.c: the
		 * same values, rounded as they are stored) */
		/* (a bf16 flat parameter, --load-dtype bf16: gathered and sharded
		 * bit for bit, its 4-bit codes' NaN patterns kept) */
		int raw16 = e->op != AG_OP_REDUCE_SCATTER_SUM && vi[k].dt == AG_BF16 && vo[k].dt == AG_BF16;
		if (rc == 0 && !raw16 && (vi[k].dt != AG_F32 ||
		                (vo[k].dt != AG_F32 && !(e->op == AG_OP_ALL_GATHER && vo[k].dt == AG_BF16))))
			rc = fail_ev(cause, e, ei, "an FSDP collective over %s: fp32 only",
			             ag_dtype_name(vi[k].dt != AG_F32 ? vi[k].dt : vo[k].dt));
		if (rc == 0 && !x[k].written[storage_of(&x[k], e->in[0])])
			rc = fail_ev(cause, e, ei, "%s (%u) is read before anything wrote it", what_of(x[k].s, e->in[0]),
			             e->in[0]);
	}
	uint64_t shard = rc == 0 ? (e->op == AG_OP_ALL_GATHER ? vi[0].numel : vo[0].numel) : 0;
	if (rc == 0 && e->op == AG_OP_ALL_GATHER && vo[0].numel != (uint64_t)n * shard)
		rc = fail_ev(cause, e, ei, "an all-gather of %llu elements a rank into %llu", (unsigned long long)shard,
		             (unsigned long long)vo[0].numel);
	if (rc == 0 && e->op == AG_OP_REDUCE_SCATTER_SUM && vi[0].numel != (uint64_t)n * shard)
		rc = fail_ev(cause, e, ei, "a reduce-scatter of %llu elements into %llu a rank",
		             (unsigned long long)vi[0].numel, (unsigned long long)shard);
	int raw = rc == 0 && e->op != AG_OP_REDUCE_SCATTER_SUM && vi[0].dt == AG_BF16 && vo[0].dt == AG_BF16;
	for (unsigned k = 0; rc == 0 && raw && k < n; k++)
		for (uint64_t i = 0; i < vo[k].numel; i++) {
			uint16_t h = 0;
			uint64_t j = (uint64_t)k * shard + i;
			const struct agv *src = e->op == AG_OP_ALL_GATHER ? &vi[i / shard] : &vi[k];
			uint64_t si = e->op == AG_OP_ALL_GATHER ? i % shard : j;
			if (e->op == AG_OP_ALL_GATHER || j < vi[k].numel)
				memcpy(&h, (const unsigned char *)src->base + at_lin(src, si) * 2, 2);
			memcpy((unsigned char *)vo[k].base + at_lin(&vo[k], i) * 2, &h, 2);
		}
	for (unsigned k = 0; rc == 0 && !raw && k < n; k++)
		for (uint64_t i = 0; i < vo[k].numel; i++) {
			float v = 0;
			uint64_t j = (uint64_t)k * shard + i;
			if (e->op == AG_OP_ALL_GATHER)
				v = ld(&vi[i / shard], at_lin(&vi[i / shard], i % shard));
			else if (e->op == AG_OP_REDUCE_SCATTER_SUM)
				for (unsigned r = 0; r < n; r++)
					v += ld(&vi[r], at_lin(&vi[r], j));
			else if (j < vi[k].numel)
				v = ld(&vi[k], at_lin(&vi[k], j));
			st(&vo[k], at_lin(&vo[k], i), v);
		}
	for (unsigned k = 0; rc == 0 && k < n; k++) {
		x[k].written[storage_of(&x[k], e->out[0])] = 1;
		if (x[k].in_setup || e->op == AG_OP_SHARD)
			continue;
		enum zs_coll_kind kind = e->op == AG_OP_ALL_GATHER ? ZS_ALL_GATHER : ZS_REDUCE_SCATTER;
		unsigned long long elems = (unsigned long long)(n - 1) * shard;
		x[k].comm.calls[kind]++;
		x[k].comm.elements[kind] += elems;
		x[k].comm.bytes[kind] += elems * (kind == ZS_ALL_GATHER ? vo[k].es : vi[k].es); /* the gathered buffer's */
	}
	free(vi);
	free(vo);
	return rc;
}

/* A collective over the n ranks' storage e->in[0] (a whole fp32 storage,
 * or a view of one: every rank's the same view), in place. DDP's reducer
 * divides each gradient by N as it copies it into the bucket and its
 * all-reduce sums (reducer.cpp copy_grad_to_bucket; ProcessGroupGloo's
 * ReduceOp::SUM), which is not coll.h's all-reduce (the mean of zerosim's
 * schemes): the sum is made here, ranks added in order 0..n-1 in fp32, and
 * every rank gets it; a broadcast copies rank arg[0]'s to every other. */
static int do_collective(struct ag_exec *x, unsigned n, const struct ag_event *e, size_t ei, char **cause)
{
	struct agv v0;
	if (e->in[0] == AG_NONE || e->out[0] != e->in[0])
		return fail_ev(cause, e, ei, "a collective works in place on one tensor");
	if (view(&x[0], e->in[0], &v0, e, ei, cause) != 0)
		return -1;
	/* a broadcast copies: uint8 too (QLoRA's packed weights at DDP's
	 * construction; every code 0..255 is exact through a float); an
	 * all-reduce sums float64 in float64 (DeepSpeed's ZeRO-3 norm,
	 * util/ag_ds3.c); bf16 (DeepSpeed's bf16, util/ag_ds.c) sums in fp32,
	 * rounded once */
	const int f64 = e->op == AG_OP_ALL_REDUCE_SUM_ && v0.dt == AG_F64;
	if (v0.dt != AG_F32 && v0.dt != AG_BF16 && !(e->op == AG_OP_BROADCAST_ && v0.dt == AG_U8) && !f64)
		return fail_ev(cause, e, ei, "a collective over %s: fp32 only", ag_dtype_name(v0.dt));
	struct agv *v = zs_malloc(n * sizeof *v);
	int rc = 0;
	for (unsigned k = 0; k < n && rc == 0; k++) {
		rc = view(&x[k], e->in[0], &v[k], e, ei, cause);
		if (rc == 0 && !x[k].written[storage_of(&x[k], e->in[0])])
			rc = fail_ev(cause, e, ei, "%s (%u) is read before anything wrote it", what_of(x[k].s, e->in[0]),
			             e->in[0]);
	}
	unsigned root = e->op == AG_OP_BROADCAST_ ? (unsigned)e->arg[0] : 0;
	if (rc == 0 && root >= n)
		rc = fail_ev(cause, e, ei, "a broadcast from rank %u of %u", root, n);
	for (uint64_t i = 0; rc == 0 && f64 && i < v0.numel; i++) {
		double s = 0, y;
		for (unsigned k = 0; k < n; k++) {
			memcpy(&y, (const unsigned char *)v[k].base + at_lin(&v[k], i) * 8, 8);
			s += y;
		}
		for (unsigned k = 0; k < n; k++)
			memcpy((unsigned char *)v[k].base + at_lin(&v[k], i) * 8, &s, 8);
	}
	for (uint64_t i = 0; rc == 0 && !f64 && i < v0.numel; i++) {
		float s = 0;
		if (e->op == AG_OP_BROADCAST_)
			s = ld(&v[root], at_lin(&v[root], i));
		else
			for (unsigned k = 0; k < n; k++)
				s += ld(&v[k], at_lin(&v[k], i));
		for (unsigned k = 0; k < n; k++)
			st(&v[k], at_lin(&v[k], i), s);
	}
	free(v);
	/* Counted as coll.h counts zerosim's own collectives (the ring over
	 * the padded buffer: an all-reduce sends 2(N-1)/N of it a rank, a
	 * broadcast (N-1)/N), for the steps only: DDP's construction is
	 * set-up. At N = 1 DDP still calls its process group of one
	 * (coll.h's one_rank_calls): a call, no bytes. */
	enum zs_coll_kind kind = e->op == AG_OP_BROADCAST_ ? ZS_BROADCAST : ZS_ALL_REDUCE;
	unsigned long long elems = (unsigned long long)(n - 1) * coll_shard_len(v0.numel, n) * (kind == ZS_ALL_REDUCE ? 2 : 1);
	for (unsigned k = 0; rc == 0 && k < n; k++)
		if (!x[k].in_setup) {
			x[k].comm.calls[kind]++;
			x[k].comm.elements[kind] += elems;
			x[k].comm.bytes[kind] += elems * v0.es;
		}
	return rc;
}

/* List `which` of rank x (0 its set-up; 1 and 2 the lists its step
 * x->steps runs, ag_step_lists: none past them) into *n. */
static const struct ag_event *rank_events(const struct ag_exec *x, int which, size_t *n)
{
	const struct ag_step *s = x->s;
	const struct ag_event *ev[2];
	size_t nev[2];
	if (which == 0) {
		*n = s->nsetup;
		return s->setup;
	}
	unsigned nl = ag_step_lists(s, x->steps, ev, nev);
	*n = (unsigned)which <= nl ? nev[which - 1] : 0;
	return (unsigned)which <= nl ? ev[which - 1] : NULL;
}

/* Run list `which` (rank_events) on every rank: each rank's events up to
 * the next collective, rank after rank (nothing passes between them
 * there), then the collective across them. Each rank walks its own list
 * (a mixture's under DDP: each rank's routing sizes its routed tensors);
 * the lists keep one shape, their collectives where rank 0's are. */
static int world_events(struct ag_exec *x, unsigned n, int which, char **cause)
{
	size_t nev, nk;
	const struct ag_event *ev = rank_events(&x[0], which, &nev);
	for (unsigned k = 1; k < n; k++)
		if (rank_events(&x[k], which, &nk), nk != nev)
			return zs_fail(cause, "internal error: rank %u's step list has %zu events there, rank 0's %zu", k, nk,
			               nev);
	for (size_t i = 0; i < nev;) {
		size_t j = i;
		while (j < nev && !is_collective(&ev[j]))
			j++;
		for (unsigned k = 0; k < n; k++)
			if (ag_exec_events(&x[k], rank_events(&x[k], which, &nk) + i, j - i, cause) != 0)
				return -1;
		if (j == nev)
			break;
		for (unsigned k = 0; k < n; k++)
			tracker_set_rank_phase(x[k].tr, x[k].rank, ev[j].phase);
		if (ev[j].op == AG_OP_ALL_GATHER || ev[j].op == AG_OP_REDUCE_SCATTER_SUM || ev[j].op == AG_OP_SHARD
		        ? do_sharded(x, n, &ev[j], j, cause) != 0
		        : do_collective(x, n, &ev[j], j, cause) != 0)
			return -1;
		i = j + 1;
	}
	return 0;
}

int ag_exec_begin_ranks(struct ag_exec *x, unsigned n, const struct ag_step *s, const struct ag_options *o,
                        struct zs_tracker *tr, const struct ag_exec_feed *feed, char **cause)
{
	for (unsigned k = 0; k < n; k++)
		exec_init(&x[k], s, o, tr, k, feed != NULL ? &feed[k] : NULL);
	int rc = world_events(x, n, 0, cause);
	for (unsigned k = 0; k < n; k++)
		x[k].in_setup = 0;
	if (rc != 0)
		for (unsigned k = 0; k < n; k++)
			ag_exec_end(&x[k]);
	return rc;
}

int ag_exec_step_ranks(struct ag_exec *x, unsigned n, char **cause)
{
	for (unsigned k = 0; k < n; k++) {
		const struct ag_step *s = x[k].s;
		x[k].have_loss = 0;
		for (uint32_t t = 0; t < s->ntensors; t++)
			if (x[k].buf[t] != NULL && s->tensor[t].role == AG_ROLE_INPUT && x[k].feed.input != NULL) {
				if (x[k].feed.input(x[k].feed.ctx, s, t, x[k].steps, x[k].buf[t], cause) != 0)
					return -1;
				x[k].written[t] = 1;
			}
	}
	for (int which = 1; which <= 2; which++)
		if (world_events(x, n, which, cause) != 0)
			return -1;
	for (unsigned k = 0; k < n; k++)
		x[k].steps++;
	return 0;
}

/* ------------------------------------------------------------------------ */
/* A transformer's plain training loop */

/* The run's view of zerosim's flat vector: each step_params tensor's
 * offset, and for each parameter storage of the list the rows it takes. */
struct tfm_feed {
	const struct zs_config *c;
	const struct zs_model *hf;
	struct tfm_dims dims;
	struct step_params p;
	uint64_t *off;            /* per step_params tensor: its first element */
	uint64_t **rowmap;        /* --experts-impl eager (fused_rows): per step_params tensor, NULL, or for a
	                           * fused expert tensor each row's first element in the flat vector */
	uint64_t nflat;           /* the flat vector's elements */
	int32_t *part;            /* per storage of the list: its part of a fused tensor, or -1 */
	const float *init;        /* a case's Ψ values, or NULL: the seed's */
	const int *tokens;        /* a case's ids ([step][world][B][T + 1]), or NULL: the seed's task */
	const float *lora;        /* a case's LoRA adapters (nlora values, ag_exec_tfm_adapters' order), or
	                           * NULL: the set-up draws them */
	size_t nlora;
	struct tfm_task task;
	uint64_t B, T;
	unsigned K;               /* --grad-accum: micro-steps an optimizer step */
	unsigned world, rank;     /* the run's ranks; the one being fed */
};

/* One rank's feed: the run's, and which rank it feeds. */
struct rank_feed {
	struct tfm_feed *f;
	unsigned rank;
};

/* Whether step_params tensor i is a gpt2 Conv1D weight: (in, out) in the
 * list as Hugging Face holds it, (out, in) in the flat vector
 * (docs/formats.md). */
static int conv1d(const struct tfm_feed *f, size_t i)
{
	const struct step_tensor *st = &f->p.tensor[i];
	size_t layer = f->p.module[st->module].layer;
	return f->hf->family == ZS_FAMILY_GPT2 && st->ndim == 2 && layer >= 1 && layer <= f->hf->layers;
}

/* The rows [r0, r0 + n) of step_params tensor i as the flat vector holds
 * them (rows of its (out, in) form). */
static void part_rows(const struct tfm_feed *f, size_t i, int32_t part, uint64_t *r0, uint64_t *n)
{
	const struct step_tensor *st = &f->p.tensor[i];
	*r0 = 0;
	*n = st->ndim == 2 ? st->shape[0] : st->numel;
	if (part < 0 || st->nparts == 0)
		return;
	for (int32_t k = 0; k < part; k++)
		*r0 += st->part_rows[k];
	*n = st->part_rows[part];
}

/* Row `row` (of `cols` elements) of step_params tensor i: its first
 * element in the flat vector. */
static uint64_t flat_row(const struct tfm_feed *f, size_t i, uint64_t row, uint64_t cols)
{
	return f->rowmap != NULL && f->rowmap[i] != NULL ? f->rowmap[i][row] : f->off[i] + row * cols;
}

/* --experts-impl eager (zs_model.fused_experts): the list's parameters
 * are util/step.c's fused layout, a block's experts two tensors,
 * gate_up_proj (E·2F, d) (expert e's rows e·2F..: gate's F, then up's)
 * and down_proj (E·d, F) (expert e's rows e·d..); zerosim's flat vector
 * (tfm_params, the seed's initialisation, a case's values, the digest)
 * keeps 4.x's ModuleList order, each expert's w1 (F, d), w2 (d, F), w3
 * (F, d). The two layouts list every other tensor in the same order, the
 * fused pair standing where the 3E expert tensors stand: each fused row's
 * place in the flat vector, so that the fused run starts from the
 * ModuleList run's weights and its digest reads the same order. 0, or -1
 * with *cause where the layouts do not line up. */
static int fused_rows(struct tfm_feed *f, char **cause)
{
	struct step_params pm;
	tfm_params(&pm, &f->dims); /* the flat vector's: tfm_dims carries no fused_experts */
	uint64_t *poff = zs_calloc(pm.ntensors ? pm.ntensors : 1, sizeof *poff);
	for (size_t j = 1; j < pm.ntensors; j++)
		poff[j] = poff[j - 1] + pm.tensor[j - 1].numel;
	f->rowmap = zs_calloc(f->p.ntensors ? f->p.ntensors : 1, sizeof *f->rowmap);
	const uint64_t E = f->hf->experts, F = f->hf->intermediate, d = f->hf->hidden;
	int rc = 0;
	size_t j = 0;
	for (size_t i = 0; i < f->p.ntensors && rc == 0; i++) {
		const struct step_tensor *st = &f->p.tensor[i];
		const int gu = strcmp(st->leaf, "gate_up_proj") == 0, dp = strcmp(st->leaf, "down_proj") == 0;
		if (dp)
			continue; /* laid out with gate_up_proj, just before it */
		if (!gu) {
			if (j >= pm.ntensors || pm.tensor[j].numel != st->numel) {
				rc = zs_fail(cause, "--experts-impl eager: the fused layout's tensor %zu has no ModuleList twin", i);
				break;
			}
			f->off[i] = poff[j++];
			continue;
		}
		/* the next 3E of the flat vector: expert e's w1, w2, w3 */
		if (i + 1 >= f->p.ntensors || strcmp(f->p.tensor[i + 1].leaf, "down_proj") != 0 || j + 3 * E > pm.ntensors) {
			rc = zs_fail(cause, "--experts-impl eager: the fused layout's tensor %zu has no ModuleList experts", i);
			break;
		}
		for (uint64_t e = 0; e < E && rc == 0; e++)
			if (pm.module[pm.tensor[j + 3 * e].module].expert != (long long)e ||
			    pm.tensor[j + 3 * e].numel != F * d || pm.tensor[j + 3 * e + 1].numel != d * F)
				rc = zs_fail(cause, "--experts-impl eager: the ModuleList's tensor %zu is not expert %llu's w1",
				             (size_t)(j + 3 * e), (unsigned long long)e);
		uint64_t *g = f->rowmap[i] = zs_calloc(E * 2 * F, sizeof *g);
		uint64_t *w = f->rowmap[i + 1] = zs_calloc(E * d, sizeof *w);
		for (uint64_t e = 0; e < E; e++) {
			for (uint64_t r = 0; r < F; r++) {
				g[e * 2 * F + r] = poff[j + 3 * e] + r * d;         /* w1: the gate */
				g[e * 2 * F + F + r] = poff[j + 3 * e + 2] + r * d; /* w3: the up */
			}
			for (uint64_t r = 0; r < d; r++)
				w[e * d + r] = poff[j + 3 * e + 1] + r * F; /* w2: the down */
		}
		f->off[i] = g[0];
		f->off[i + 1] = w[0];
		j += 3 * E;
	}
	if (rc == 0 && j != pm.ntensors)
		rc = zs_fail(cause, "--experts-impl eager: the fused layout leaves %zu ModuleList tensors over", pm.ntensors - j);
	f->nflat = 0;
	for (size_t k = 0; k < pm.ntensors; k++)
		f->nflat += pm.tensor[k].numel;
	free(poff);
	step_params_free(&pm);
	return rc;
}

/* Storage t's place: its step_params tensor, part, first row and rows,
 * and the columns of a row; -1 with *cause where its bytes are not the
 * part's. */
static int param_place(const struct tfm_feed *f, const struct ag_step *s, uint32_t t, size_t *i, uint64_t *r0,
                       uint64_t *rows, uint64_t *cols, char **cause)
{
	const struct ag_tensor *a = &s->tensor[t];
	if (a->param < 0 || (size_t)a->param >= f->p.ntensors)
		return zs_fail(cause, "the PyTorch step's parameter %s (%u) names no parameter tensor", what_of(s, t), t);
	*i = (size_t)a->param;
	const struct step_tensor *st = &f->p.tensor[*i];
	part_rows(f, *i, f->part[t], r0, rows);
	*cols = st->ndim == 2 ? st->numel / (conv1d(f, *i) ? st->shape[1] : st->shape[0]) : 1;
	if (conv1d(f, *i)) /* (in, out): the flat vector's rows are its columns */
		*rows = st->shape[1];
	/* fp32, or bf16 after module.bfloat16() (DeepSpeed's bf16) */
	if ((a->dtype != AG_F32 && a->dtype != AG_BF16) || a->bytes != *rows * *cols * ag_dtype_size(a->dtype))
		return zs_fail(cause, "the PyTorch step's parameter %s (%u) is not the fp32 %llu x %llu part of its tensor",
		               what_of(s, t), t, (unsigned long long)*rows, (unsigned long long)*cols);
	return 0;
}

static int feed_tfm_param(void *ctx, const struct ag_step *s, uint32_t t, void *data, char **cause)
{
	struct tfm_feed *f = ctx;
	size_t i;
	uint64_t r0, rows, cols;
	if (param_place(f, s, t, &i, &r0, &rows, &cols, cause) != 0)
		return -1;
	uint64_t first = f->off[i] + r0 * cols, n = rows * cols;
	float *d = data;
	/* module.bfloat16(): the fp32 weights rounded to bf16 (nearest even) */
	const int bf = s->tensor[t].dtype == AG_BF16;
	uint16_t *d16 = data;
	if (!conv1d(f, i) && !bf && (f->rowmap == NULL || f->rowmap[i] == NULL)) {
		if (f->init != NULL)
			memcpy(d, f->init + first, n * sizeof *d);
		else
			tfm_init_range(d, &f->dims, f->c->seed, first, n);
		return 0;
	}
	/* the flat vector's (out, in) rows into the list's (in, out) (or its
	 * rows into bf16), a piece of a row at a time through a small buffer
	 * on the stack */
	float piece[512];
	for (uint64_t o = 0; o < rows; o++)
		for (uint64_t c0 = 0; c0 < cols; c0 += 512) {
			uint64_t k = cols - c0 < 512 ? cols - c0 : 512;
			const float *src = piece;
			const uint64_t at0 = conv1d(f, i) ? first + o * cols : flat_row(f, i, r0 + o, cols);
			if (f->init != NULL)
				src = f->init + at0 + c0;
			else
				tfm_init_range(piece, &f->dims, f->c->seed, at0 + c0, k);
			for (uint64_t j = 0; j < k; j++) {
				uint64_t at = conv1d(f, i) ? (c0 + j) * rows + o : o * cols + c0 + j;
				if (bf)
					d16[at] = to_bf16(src[j]);
				else
					d[at] = src[j];
			}
		}
	return 0;
}

/* The batch's ids into an int64 storage of B·T: drawn as ints into the
 * storage's own bytes (ids, then the targets the task also gives), then
 * widened in place from the last down, so that no scratch is needed. */
static int feed_tfm_input(void *ctx, const struct ag_step *s, uint32_t t, unsigned step, void *data, char **cause)
{
	struct tfm_feed *f = ctx;
	const struct ag_tensor *a = &s->tensor[t];
	uint64_t BT = f->B * f->T;
	if (a->dtype != AG_I64 || a->bytes != BT * 8)
		return zs_fail(cause, "the PyTorch step's input %s (%u) is not the batch's %llu int64 token ids", what_of(s, t),
		               t, (unsigned long long)BT);
	int *ids = data;
	/* under --grad-accum K, micro-step k of optimizer step t is the
	 * batch t·K + k of the seed's task or of the case's tokens (K = 1:
	 * the step's own) */
	unsigned micro = (unsigned)step * f->K + a->micro;
	if (f->tokens != NULL) {
		const int *row = f->tokens + ((size_t)micro * f->world + f->rank) * f->B * (f->T + 1);
		for (uint64_t b = 0; b < f->B; b++)
			memcpy(ids + b * f->T, row + b * (f->T + 1), f->T * sizeof *ids);
	} else
		tfm_task_batch(ids, ids + BT, &f->task, f->c->seed, micro, f->rank, f->B, f->T);
	int64_t *wide = data;
	for (uint64_t k = BT; k-- > 0;)
		wide[k] = ids[k];
	return 0;
}

/* A case's adapter t: its values from f->lora, at the place its number
 * gives (the adapters before it in that order, each its elements). */
static int feed_tfm_adapter(void *ctx, const struct ag_step *s, uint32_t t, void *data, char **cause)
{
	const struct tfm_feed *f = ctx;
	const struct ag_tensor *a = &s->tensor[t];
	uint64_t n = a->bytes / ag_dtype_size(a->dtype), at = 0;
	for (uint32_t u = 0; u < s->ntensors; u++)
		if (s->tensor[u].storage == u && s->tensor[u].adapter != 0 && s->tensor[u].adapter < a->adapter)
			at += s->tensor[u].bytes / ag_dtype_size(s->tensor[u].dtype);
	if ((a->dtype != AG_F32 && a->dtype != AG_BF16) || at + n > f->nlora)
		return zs_fail(cause, "the case's lora holds %zu values, and the run's adapter %u (%s) is not a float32 "
		               "part of them", f->nlora, a->adapter, what_of(s, t));
	if (a->dtype == AG_F32) {
		memcpy(data, f->lora + at, n * sizeof(float));
		return 0;
	}
	uint16_t *d16 = data; /* module.bfloat16() (DeepSpeed's bf16): rounded as the base's weights are */
	for (uint64_t i = 0; i < n; i++)
		d16[i] = to_bf16(f->lora[at + i]);
	return 0;
}

static int feed_rank_adapter(void *ctx, const struct ag_step *s, uint32_t t, void *data, char **cause)
{
	const struct rank_feed *r = ctx;
	return feed_tfm_adapter(r->f, s, t, data, cause);
}

static int feed_rank_param(void *ctx, const struct ag_step *s, uint32_t t, void *data, char **cause)
{
	const struct rank_feed *r = ctx;
	r->f->rank = r->rank;
	return feed_tfm_param(r->f, s, t, data, cause);
}

static int feed_rank_input(void *ctx, const struct ag_step *s, uint32_t t, unsigned step, void *data, char **cause)
{
	const struct rank_feed *r = ctx;
	r->f->rank = r->rank;
	return feed_tfm_input(r->f, s, t, step, data, cause);
}

static void feed_free(struct tfm_feed *f)
{
	for (size_t i = 0; f->rowmap != NULL && i < f->p.ntensors; i++)
		free(f->rowmap[i]);
	free(f->rowmap);
	step_params_free(&f->p);
	free(f->off);
	free(f->part);
	if (f->task.perm != NULL)
		tfm_task_free(&f->task);
}

/* Build the run's step and its feed; 0 or -1 with *cause. */
static int tfm_prepare(struct tfm_feed *f, struct ag_step *s, struct ag_options *o, const struct zs_config *c,
                       const struct zs_model *hf, uint64_t seq, unsigned world, char **cause)
{
	memset(f, 0, sizeof *f);
	memset(s, 0, sizeof *s);
	f->c = c;
	f->world = world;
	f->hf = hf;
	f->B = c->batch;
	f->K = c->grad_accum ? c->grad_accum : 1;
	f->T = seq;
	tfm_dims_from_config(&f->dims, hf);
	step_params_build(&f->p, hf);
	ag_options_from_config(o, c, c->batch, seq);
	/* the run's own training settings (--lr, --beta1, --beta2, --eps) */
	o->lr = c->lr;
	o->beta1 = c->beta1;
	o->beta2 = c->beta2;
	o->eps = c->eps;
	/* (mixed under --wrapper deepspeed is DeepSpeed's bf16: the list's own
	 * bf16 module, util/autograd.h ag_options.mdt) */
	if (c->precision == ZS_MIXED && c->wrapper != ZS_WRAPPER_DEEPSPEED) {
		feed_free(f);
		return zs_fail(cause, "--precision %s: the PyTorch step (--wrapper %s) runs fp32 or autocast",
		               zs_precision_name(c->precision), zs_wrapper_name(c->wrapper));
	}
	if (ag_step_build_run(s, hf, &f->p, o, c, world, cause) != 0) {
		feed_free(f);
		return -1;
	}
	f->off = zs_calloc(f->p.ntensors ? f->p.ntensors : 1, sizeof *f->off);
	for (size_t i = 1; i < f->p.ntensors; i++)
		f->off[i] = f->off[i - 1] + f->p.tensor[i - 1].numel;
	if (hf->fused_experts && fused_rows(f, cause) != 0) {
		ag_step_free(s);
		feed_free(f);
		return -1;
	}
	/* a fused tensor's parts (the list's `part`) */
	f->part = zs_calloc(s->ntensors ? s->ntensors : 1, sizeof *f->part);
	for (uint32_t t = 0; t < s->ntensors; t++) {
		const struct ag_tensor *a = &s->tensor[t];
		int fused = a->param >= 0 && (size_t)a->param < f->p.ntensors && f->p.tensor[a->param].nparts != 0;
		f->part[t] = fused ? a->part : -1;
	}
	return 0;
}

/* Under FSDP (util/ag_fsdp.h) the model's parameter storage t is gone
 * at the step's end (freed at construction): its values are those of the
 * parameter's view of the unit's gathered flat parameter, which are the n
 * ranks' shards in rank order (the all-gather's input): into d (its
 * elements). -1 with *cause where the list has no such view. */
static int sharded_param(const struct ag_exec *x, unsigned n, uint32_t t, float *d, char **cause)
{
	const struct ag_step *s = x[0].s;
	const struct ag_tensor *a = &s->tensor[t];
	uint32_t v = 0;
	while (v < s->ntensors && !(s->tensor[v].role == AG_ROLE_PARAM && s->tensor[v].storage != v &&
	                            s->tensor[v].param == a->param && s->tensor[v].part == a->part))
		v++;
	/* (a unit SHARD_GRAD_OP keeps gathered from its first forward on is
	 * gathered in the first step alone: its prefix, or its own list) */
	uint32_t sh = AG_NONE;
	const size_t n1 = s->nevents + s->nfirst;
	for (size_t i = 0; v < s->ntensors && i < n1 + s->nstep1 && sh == AG_NONE; i++) {
		const struct ag_event *e = i < s->nevents ? &s->event[i]
		                           : i < n1       ? &s->first_step[i - s->nevents]
		                                          : &s->step1[i - n1];
		if (e->kind == AG_EV_OP && e->op == AG_OP_ALL_GATHER && e->out[0] == s->tensor[v].storage)
			sh = e->in[0];
	}
	if (sh == AG_NONE)
		return zs_fail(cause, "the PyTorch step holds no parameter %s (%u) at its end", what_of(s, t), t);
	/* the shard a storage, or (DeepSpeed's ZeRO-3 at N > 1, util/ag_ds3.c)
	 * a 1-D view of one: the rank's partition in lp_param_buffer */
	const struct ag_tensor *q = &s->tensor[sh];
	const uint32_t shs = q->storage;
	/* (a bf16 flat parameter, --load-dtype bf16: its values widened, exactly) */
	const unsigned es = ag_dtype_size(s->tensor[shs].dtype);
	if (es != 4 && s->tensor[shs].dtype != AG_BF16)
		return zs_fail(cause, "the PyTorch step's shard of parameter %s (%u) is %s", what_of(s, t), t,
		               ag_dtype_name(s->tensor[shs].dtype));
	const uint64_t shard = shs == sh ? q->bytes / es : q->shape[0], at = shs == sh ? 0 : q->offset,
	               numel = a->bytes / ag_dtype_size(a->dtype);
	for (uint64_t e = 0; e < numel; e++) {
		uint64_t j = s->tensor[v].offset + e;
		const void *src = j / shard < n ? ag_exec_data(&x[j / shard], shs) : NULL;
		if (src == NULL)
			return zs_fail(cause, "the PyTorch step holds no shard of parameter %s (%u) at its end", what_of(s, t), t);
		if (es == 4) {
			d[e] = ((const float *)src)[at + j % shard];
		} else {
			uint32_t u = (uint32_t)((const uint16_t *)src)[at + j % shard] << 16;
			memcpy(&d[e], &u, 4);
		}
	}
	return 0;
}

/* Under DeepSpeed's engine (util/ag_ds.h) the model's parameter storage t
 * is gone too (freed at construction), and its parameter a view of the
 * flat buffer, whole on every rank after the step's all-gather: that view
 * (AG_NONE where t has none); viewed_param gives rank x's fp32 values
 * there, or NULL. */
static uint32_t param_view(const struct ag_step *s, uint32_t t)
{
	const struct ag_tensor *a = &s->tensor[t];
	for (uint32_t v = 0; v < s->ntensors; v++) {
		const struct ag_tensor *b = &s->tensor[v];
		if (b->role == AG_ROLE_PARAM && b->storage != v && b->param == a->param && b->part == a->part)
			return v;
	}
	return AG_NONE;
}

static const float *viewed_param(const struct ag_exec *x, uint32_t t)
{
	const struct ag_step *s = x->s;
	uint32_t v = param_view(s, t);
	if (v == AG_NONE)
		return NULL;
	const float *d = ag_exec_data(x, s->tensor[v].storage);
	return d != NULL && s->tensor[s->tensor[v].storage].dtype == AG_F32 ? d + s->tensor[v].offset : NULL;
}

/* viewed_param's bf16 case (DeepSpeed's bf16): the view's values widened
 * into out[] (the parameter's elements); 0 where t has no such view. */
static int viewed_param16(const struct ag_exec *x, uint32_t t, float *out)
{
	const struct ag_step *s = x->s;
	uint32_t v = param_view(s, t);
	const uint16_t *d = v != AG_NONE ? ag_exec_data(x, s->tensor[v].storage) : NULL;
	uint64_t at = v != AG_NONE ? s->tensor[v].offset : 0;
	if (d == NULL || s->tensor[s->tensor[v].storage].dtype != AG_BF16) {
		/* a frozen parameter (no place in the flat buffer): its own
		 * bf16 storage, live to the end */
		d = ag_exec_data(x, t);
		at = 0;
		if (d == NULL || s->tensor[t].storage != t)
			return 0;
	}
	for (uint64_t e = 0; e < s->tensor[t].bytes / 2; e++) {
		uint32_t u = (uint32_t)d[at + e] << 16;
		memcpy(&out[e], &u, 4);
	}
	return 1;
}

/* The final weights in zerosim's flat order, tensor by tensor from the
 * list's parameter storages, into the digest (and w if not NULL): rank
 * x[0]'s, or under FSDP (n > 1) the n ranks' shards joined. */
static int final_weights(const struct tfm_feed *f, const struct ag_exec *x, unsigned nranks, float *w,
                         uint64_t *digest, char **cause)
{
	const struct ag_step *s = x->s;
	float *joined = NULL;
	XXH3_state_t *h = XXH3_createState();
	if (h == NULL || XXH3_64bits_reset(h) != XXH_OK)
		zs_oom(__FILE__, __LINE__);
	/* fused experts (fused_rows): the whole flat vector gathered first,
	 * then digested in its order, the ModuleList run's */
	float *all = f->rowmap == NULL ? NULL : w != NULL ? w : zs_malloc(f->nflat * sizeof *all);
	int rc = 0;
	for (size_t i = 0; i < f->p.ntensors && rc == 0; i++) {
		/* its storages in part order (one where it is not fused) */
		unsigned nparts = f->p.tensor[i].nparts ? f->p.tensor[i].nparts : 1;
		for (int32_t part = 0; part < (int32_t)nparts && rc == 0; part++) {
			uint32_t t = 0;
			while (t < s->ntensors && !(s->tensor[t].storage == t && s->tensor[t].role == AG_ROLE_PARAM &&
			                            s->tensor[t].param == (int32_t)i &&
			                            (f->part[t] == part || (f->part[t] < 0 && part == 0))))
				t++;
			if (t < s->ntensors && ag_exec_data(x, t) == NULL && s->tensor[t].q4)
				continue; /* --quant-base: a 4-bit base weight (frozen; its fp32 form is gone) */
			/* (a bf16 storage is read by viewed_param16, widened) */
			const float *d = t < s->ntensors && s->tensor[t].dtype != AG_BF16 ? ag_exec_data(x, t) : NULL;
			if (d == NULL && t < s->ntensors && nranks < 2)
				d = viewed_param(x, t);
			if (d == NULL && t < s->ntensors && nranks < 2 && s->tensor[t].dtype == AG_BF16) {
				/* DeepSpeed's bf16: the model's bf16 view of the flat
				 * buffer, widened (exactly) */
				joined = zs_realloc(joined, (s->tensor[t].bytes / 2) * sizeof *joined);
				if (viewed_param16(x, t, joined))
					d = joined;
			}
			if (t == s->ntensors || (d == NULL && nranks < 2)) {
				rc = zs_fail(cause, "the PyTorch step holds no parameter for tensor %zu (part %d) at its end", i, part);
				break;
			}
			size_t ti;
			uint64_t r0, rows, cols;
			if (param_place(f, s, t, &ti, &r0, &rows, &cols, cause) != 0) {
				rc = -1;
				break;
			}
			if (d == NULL) {
				joined = zs_realloc(joined, rows * cols * sizeof *joined);
				if ((rc = sharded_param(x, nranks, t, joined, cause)) != 0)
					break;
				d = joined;
			}
			uint64_t first = f->off[i] + r0 * cols, n = rows * cols;
			if (all != NULL) {
				for (uint64_t o = 0; o < rows; o++)
					memcpy(all + flat_row(f, i, r0 + o, cols), d + o * cols, cols * sizeof *d);
				continue;
			}
			if (!conv1d(f, i)) {
				if (XXH3_64bits_update(h, d, n * sizeof *d) != XXH_OK)
					zs_oom(__FILE__, __LINE__);
				if (w)
					memcpy(w + first, d, n * sizeof *d);
				continue;
			}
			/* (in, out) back to rows of (out, in), a few at a time */
			float chunk[256];
			size_t k = 0;
			for (uint64_t e = 0; e < n; e++) {
				uint64_t o = e / cols, in = e % cols;
				chunk[k++] = d[in * rows + o];
				if (w)
					w[first + e] = chunk[k - 1];
				if (k == 256 || e + 1 == n) {
					if (XXH3_64bits_update(h, chunk, k * sizeof *chunk) != XXH_OK)
						zs_oom(__FILE__, __LINE__);
					k = 0;
				}
			}
		}
	}
	if (all != NULL && rc == 0 && XXH3_64bits_update(h, all, f->nflat * sizeof *all) != XXH_OK)
		zs_oom(__FILE__, __LINE__);
	if (all != w)
		free(all);
	*digest = XXH3_64bits_digest(h);
	XXH3_freeState(h);
	free(joined);
	return rc;
}

/* A digest of the step's parameters that are no tensor of the model's
 * flat order (LoRA's adapters: --lora-r), storage by storage in the list's
 * order; 0 where there are none. final_weights reads the model's own
 * parameters only, so under --wrapper ddp with LoRA, where the adapters
 * are all DDP trains, this is what shows every rank's replica the same. */
static uint64_t adapters_digest(const struct ag_exec *x)
{
	const struct ag_step *s = x->s;
	XXH3_state_t *h = XXH3_createState();
	if (h == NULL || XXH3_64bits_reset(h) != XXH_OK)
		zs_oom(__FILE__, __LINE__);
	size_t n = 0;
	for (uint32_t t = 0; t < s->ntensors; t++) {
		const struct ag_tensor *q = &s->tensor[t];
		const void *d = q->storage == t && q->role == AG_ROLE_PARAM && q->param < 0 ? ag_exec_data(x, t) : NULL;
		if (d == NULL)
			continue;
		if (XXH3_64bits_update(h, d, (size_t)q->bytes) != XXH_OK)
			zs_oom(__FILE__, __LINE__);
		n++;
	}
	uint64_t r = n ? XXH3_64bits_digest(h) : 0;
	XXH3_freeState(h);
	return r;
}

int ag_exec_tfm_adapters(const struct zs_config *c, const struct zs_model *hf, uint64_t seq, unsigned world,
                         float **vals, size_t *n, char **cause)
{
	*vals = NULL;
	*n = 0;
	struct tfm_feed f;
	struct ag_step s;
	struct ag_options o;
	if (world < 1)
		return zs_fail(cause, "internal error: a run of %u ranks", world);
	/* --wrapper fsdp: its set-up flattens the adapters into shards and
	 * frees them; before that it is the plain loop's set-up event for
	 * event (util/ag_fsdp.c copies it first, in order), whose draws are
	 * keyed by the seed and the event's index, every rank's alike: the
	 * plain loop's adapters are the ones the FSDP run starts from */
	struct zs_config plain;
	/* (DeepSpeed's engine likewise: its set-up copies the plain loop's,
	 * then flattens the adapters into its fp32 partitions and frees them;
	 * tests/case_lora.sh holds the --wrapper deepspeed run from its case
	 * to the seed's losses) */
	if (c->wrapper == ZS_WRAPPER_FSDP || c->wrapper == ZS_WRAPPER_DEEPSPEED) {
		plain = *c;
		plain.wrapper = ZS_WRAPPER_NONE;
		c = &plain;
		world = 1;
	}
	if (tfm_prepare(&f, &s, &o, c, hf, seq, world, cause) != 0)
		return -1;
	tfm_task_init(&f.task, f.dims.vocab, c->seed); /* the set-up holds the step's tokens */
	tfm_blas_init();
	struct zs_tracker tr;
	tracker_init(&tr, world);
	struct rank_feed *rf = zs_malloc(world * sizeof *rf);
	struct ag_exec_feed *feed = zs_malloc(world * sizeof *feed);
	struct ag_exec *x = zs_calloc(world, sizeof *x);
	for (unsigned k = 0; k < world; k++) {
		rf[k] = (struct rank_feed){.f = &f, .rank = k};
		feed[k] = (struct ag_exec_feed){.ctx = &rf[k], .param = feed_rank_param, .input = feed_rank_input};
	}
	/* the set-up alone: the model's, the adapters' draws, DDP's broadcast */
	int rc = ag_exec_begin_ranks(x, world, &s, &o, &tr, feed, cause);
	if (rc == 0) {
		for (uint32_t t = 0; t < s.ntensors; t++) {
			const struct ag_tensor *q = &s.tensor[t];
			/* the adapters alone (util/autograd.c tags them): not a
			 * wrapper's own parameter storages, such as DeepSpeed's
			 * fp32 partition of them (which made the case's lora 2,688
			 * values for llama-tiny q,v r 4 at N = 2, not 1,792) */
			const float *d = q->storage == t && q->role == AG_ROLE_PARAM && q->param < 0 && q->adapter != 0 &&
			                         q->dtype == AG_F32
			                     ? ag_exec_data(&x[0], t)
			                     : NULL;
			if (d == NULL)
				continue;
			size_t m = (size_t)q->bytes / sizeof *d;
			*vals = zs_realloc(*vals, (*n + m) * sizeof **vals);
			memcpy(*vals + *n, d, m * sizeof *d);
			*n += m;
		}
		for (unsigned k = 0; k < world; k++)
			ag_exec_end(&x[k]);
	}
	free(x);
	free(feed);
	free(rf);
	tracker_destroy(&tr);
	ag_step_free(&s);
	feed_free(&f);
	return rc;
}

/* A rank's state at a step's start (a mixture's routing discovery): each
 * live storage's bytes and flags, so that a step whose values route
 * otherwise than its list runs again from there once the list is built
 * for the values' routing. Plain memory: the discovery's tracker is a
 * scratch one. */
struct step_save {
	void **data;           /* per storage: a copy of its bytes if it was live, else NULL */
	unsigned char *written, *sqrt_out;
	size_t nmarks;
};

static void step_save_take(struct step_save *v, const struct ag_exec *x)
{
	const struct ag_step *s = x->s;
	for (uint32_t t = 0; t < s->ntensors; t++) {
		free(v->data[t]);
		v->data[t] = NULL;
		if (x->buf[t] != NULL) {
			v->data[t] = zs_malloc(s->tensor[t].bytes);
			memcpy(v->data[t], x->buf[t], s->tensor[t].bytes);
		}
	}
	memcpy(v->written, x->written, s->ntensors);
	memcpy(v->sqrt_out, x->sqrt_out, s->ntensors);
	v->nmarks = x->nmarks;
}

/* x back to v: what the failed step made freed, what it freed made again,
 * every byte that was live as it was. */
static void step_save_give(const struct step_save *v, struct ag_exec *x)
{
	const struct ag_step *s = x->s;
	for (uint32_t t = 0; t < s->ntensors; t++) {
		if (x->buf[t] != NULL && v->data[t] == NULL) {
			buf_free(x, t);
		} else if (v->data[t] != NULL) {
			if (x->buf[t] == NULL)
				x->buf[t] = buf_alloc(x, t);
			memcpy(x->buf[t], v->data[t], s->tensor[t].bytes);
		}
	}
	memcpy(x->written, v->written, s->ntensors);
	memcpy(x->sqrt_out, v->sqrt_out, s->ntensors);
	for (size_t i = v->nmarks; i < x->nmarks; i++)
		free(x->mark_label[i]);
	x->nmarks = v->nmarks;
}

static void step_save_free(struct step_save *v, size_t n)
{
	for (size_t t = 0; v->data != NULL && t < n; t++)
		free(v->data[t]);
	free(v->data);
	free(v->written);
	free(v->sqrt_out);
}

/* A mixture's lists: rank k's step t's at own[k·S + t] (S the run's
 * steps), but for rank 0's first step, s itself (the set-up's). */
static struct ag_step *list_at(struct ag_step *s, struct ag_step *own, unsigned S, unsigned k, unsigned t)
{
	return k == 0 && t == 0 ? s : &own[(size_t)k * S + t];
}

static void tfm_run_free(struct tfm_feed *f, struct ag_step *s, struct ag_step *own, unsigned steps, unsigned world)
{
	for (size_t i = 1; own != NULL && i < (size_t)world * steps; i++)
		ag_step_free(&own[i]);
	free(own);
	ag_step_free(s);
	feed_free(f);
}

/* Rank k's step t's list of a mixture, built for counts (its routing)
 * into *n; it must keep the shape of s, rank 0's first step's. 0, or -1
 * with *cause; MOE_RESHAPE where the first step's own list changes shape
 * (under --grad-accum an expert idle in one of its micro-steps and used
 * in another: the discovery starts again with that routing, moe_run). */
enum { MOE_RESHAPE = -3 };
static int moe_step_build(struct ag_step *n, const struct tfm_feed *f, const struct ag_options *o,
                          const uint64_t *counts, const struct ag_step *s, unsigned k, unsigned t, char **cause)
{
	struct ag_options ot = *o;
	ot.moe_counts = counts;
	if (ag_step_build_run(n, f->hf, &f->p, &ot, f->c, f->world, cause) != 0)
		return -1;
	if (n->ntensors == s->ntensors)
		return 0;
	ag_step_free(n);
	if (t == 0 && k == 0) {
		(void)zs_fail(cause, "%s: the first step's routing leaves an expert without a token in some of its "
		              "micro-steps, and measure's routing search does not settle it (give more tokens: --batch, "
		              "--seq)", f->hf->name);
		return MOE_RESHAPE;
	}
	if (f->world > 1) /* under DDP every expert has a token on every rank (moe_starved) */
		return zs_fail(cause, "internal error: rank %u's step %u's list is not rank 0's first step's shape", k,
		               t + 1);
	/* (--steps 1 is refused for a mixture: no first step of its own;
	 * under --experts-impl eager the lists' shape is each block's number
	 * of hit experts, not which) */
	const char *other = f->hf->fused_experts ? "leaves another number of experts without a token in some block"
	                                         : "leaves other experts without a token";
	if (t < 2)
		return zs_fail(cause, "%s: step %u's routing %s than step 1's (the PyTorch step's lists of a mixture keep "
		               "one shape, so far; give more tokens: --batch, --seq)", f->hf->name, t + 1, other);
	return zs_fail(cause, "%s: step %u's routing %s than step 1's (the PyTorch step's lists of a mixture keep one "
	               "shape, so far; give --steps %u or fewer, or more tokens)", f->hf->name, t + 1, other, t);
}

/* An expert without a token where the lists cannot follow it (counts:
 * [rank][step][block][expert], S steps, `world` ranks): in the run's
 * first step (its .grad stays None and Adam skips it until one comes)
 * and, under DDP (find_unused_parameters False, `world` > 1), in any
 * step on any rank (its bucket never reduces: 1.13's reducer raises at
 * the step after, reducer.cpp ensure_prior_reduction_finished); with
 * find_unused_parameters (`unused`) the rank's list differs in shape
 * from the others' (util/ag_ddp.c describes it; the executor keeps one
 * shape a run): not run yet. 0, or -1 with *cause. */
static int moe_starved(const struct zs_model *hf, const uint64_t *counts, unsigned S, unsigned K, unsigned world,
                       int unused, enum zs_wrapper wrapper, char **cause)
{
	int fsdp = wrapper == ZS_WRAPPER_FSDP, ds = wrapper == ZS_WRAPPER_DEEPSPEED;
	size_t LE1 = (size_t)hf->layers * hf->experts, LE = K * LE1; /* a step's lists: K micro-steps' (moe_run) */
	/* --experts-impl eager in one process: an idle expert's slice is
	 * part of its block's fused parameters, whose .grad the block's hit
	 * experts make whole (SelectBackward0's zeros), so no .grad stays None */
	if (hf->fused_experts && world == 1)
		return 0;
	for (size_t k = 0; k < world; k++)
		for (size_t t = 0; t < (world > 1 || ds ? S : 1); t++)
			for (size_t i = 0; i < LE; i++) {
				if (counts[(k * S + t) * LE + i] != 0)
					continue;
				/* DeepSpeed's engine: an idle expert's .grad None at any
				 * step, on any rank (ZS_MOE_DS_WRAPPER_STARVED) */
				if (ds)
					return zs_fail(cause, "%s: expert %zu of block %zu on rank %zu at step %zu gets no token: "
					               ZS_MOE_DS_WRAPPER_STARVED, hf->name, i % hf->experts,
					               i / hf->experts % hf->layers, k, t + 1);
				/* one rank: an expert idle in a micro-step of the first step
				 * and used in another has its .grad by the step's end
				 * (AccumulateGrad), as at K = 1 */
				int later = 0;
				for (size_t m = 0; world == 1 && m < K && !later; m++)
					later = counts[(k * S + t) * LE + m * LE1 + i % LE1] != 0;
				if (later)
					continue;
				if (world > 1 && unused)
					return zs_fail(cause, "%s: expert %zu of block %zu on rank %zu at step %zu gets no token: "
					               "under --ddp-find-unused measure does not run an expert idle on a rank yet "
					               "(the theory describes it: zerosim theory --routing FILE)", hf->name,
					               i % hf->experts, i / hf->experts % hf->layers, k, t + 1);
				/* under FSDP the flat parameter's gradient is whole (the
				 * idle slot SplitWithSizesBackward's zeros, util/ag_fsdp.c),
				 * which the theory describes; the executor keeps one list
				 * shape a run, and an idle expert's list is another */
				if (world > 1 && fsdp)
					return zs_fail(cause, "%s: expert %zu of block %zu on rank %zu at step %zu gets no token: "
					               "under --wrapper fsdp measure does not run an expert idle on a rank yet (the "
					               "theory describes it: zerosim theory --routing FILE; or give more tokens: "
					               "--batch, --seq)", hf->name, i % hf->experts, i / hf->experts % hf->layers, k,
					               t + 1);
				if (world > 1)
					return zs_fail(cause, "%s: expert %zu of block %zu on rank %zu at step %zu gets no token: "
					               "under --wrapper ddp (find_unused_parameters False) its bucket is never "
					               "reduced, and PyTorch 1.13 raises at the step after (give more tokens: "
					               "--batch, --seq)", hf->name, i % hf->experts, i / hf->experts % hf->layers, k, t + 1);
				return zs_fail(cause, "%s: block %zu's expert %zu gets no token in the run's first step%s, so its "
				               ".grad stays None and Adam skips it until one comes: not described under "
				               "--framework torch yet (give more tokens: --batch, --seq)", hf->name,
				               i % LE1 / hf->experts, i % hf->experts, K > 1 ? " (in any micro-step)" : "");
			}
	return 0;
}

/* A mixture's discovery (tfm_run's fix, the lists' routing, c->moe_counts
 * itself, [rank][step][block][expert]): step t failed on some rank. On
 * each rank whose values routed a block otherwise than its list (the
 * first block whose topk ran whole, B·T·k choices, and differs), that
 * block's counts are corrected in fix and the rank's list of step t
 * rebuilt for them; then every rank's state is given back as the step
 * found it (v[k]): 1, the step is to run again (blocks before route as
 * before, the state being the same). 0 where the failure was not the
 * routing (*cause the run's own); -1 with a new *cause where the
 * corrected routing is refused. */
static int moe_refit(struct ag_exec *x, const struct step_save *v, struct ag_step *s, struct ag_step *own,
                     const struct tfm_feed *f, const struct ag_options *o, uint64_t *fix, const uint64_t *seen,
                     unsigned t, char **cause)
{
	const struct zs_model *hf = f->hf;
	unsigned S = f->c->steps, world = f->world, refit = 0;
	/* a step's lists: under --grad-accum K its K micro-steps' blocks,
	 * micro-step major (L of them each), as the topks count them */
	size_t L = (size_t)o->grad_accum * hf->layers, E = hf->experts, LE = L * E;
	unsigned char *redo = zs_calloc(world, 1);
	for (unsigned k = 0; k < world; k++) {
		size_t at = ((size_t)k * S + t) * LE, l = 0;
		for (; l < L; l++) {
			uint64_t sum = 0;
			const uint64_t *got = seen + at + l * E;
			for (size_t e = 0; e < E; e++)
				sum += got[e];
			if (sum == f->B * f->T * hf->experts_per_tok && memcmp(got, fix + at + l * E, E * sizeof *got) != 0)
				break;
		}
		if (l < L) {
			memcpy(fix + at + l * E, seen + at + l * E, E * sizeof *fix);
			redo[k] = 1;
			refit++;
		}
	}
	int rc = refit ? 1 : 0;
	if (refit) {
		free(*cause);
		*cause = NULL;
		if (moe_starved(hf, fix, S, o->grad_accum, world, f->c->ddp_find_unused, f->c->wrapper,
		                cause) != 0)
			rc = -1;
	}
	/* every rank back to the step's start (under the lists it ran), then
	 * the corrected ranks' lists of step t rebuilt */
	for (unsigned k = 0; rc > 0 && k < world; k++)
		step_save_give(&v[k], &x[k]);
	for (unsigned k = 0; rc > 0 && k < world; k++) {
		struct ag_step n, *st = list_at(s, own, S, k, t);
		if (!redo[k])
			continue;
		int b = moe_step_build(&n, f, o, fix + ((size_t)k * S + t) * LE, s, k, t, cause);
		if (b != 0)
			rc = b;
		else {
			ag_step_free(st); /* (x[k].s points at st, whose contents change) */
			*st = n;
		}
	}
	free(redo);
	return rc;
}

/* ag_exec_tfm_run's run; seen (a mixture's, else NULL): each rank's
 * steps' routing as its values make it, [rank][step][block][expert], the
 * lists' routing c->moe_counts the same way (each rank routes its own
 * batch, so under DDP each rank has its own lists). fix (a mixture's
 * discovery, else NULL) is c->moe_counts, which a step whose values
 * route otherwise on some rank corrects, running again from its start
 * (moe_refit) rather than failing. */
static int tfm_run(const struct zs_config *c, const struct zs_model *hf, uint64_t seq, unsigned world,
                   const float *init, const int *tokens, const float *lora, size_t nlora, int want_weights,
                   struct zs_tracker *trk,
                   int want_timeline, struct ag_exec_result *out, uint64_t *seen, uint64_t *fix, char **cause)
{
	struct ag_step *own = NULL; /* a mixture's: each rank's step's list, built for its routing (list_at) */
	memset(out, 0, sizeof *out);
	struct tfm_feed f;
	struct ag_step s;
	struct ag_options o;
	struct step_save *sv = NULL;
	if (world < 1)
		return zs_fail(cause, "internal error: a run of %u ranks", world);
	if (tfm_prepare(&f, &s, &o, c, hf, seq, world, cause) != 0)
		return -1;
	f.init = init;
	f.tokens = tokens;
	f.lora = lora;
	f.nlora = nlora;
	if (lora != NULL) { /* a case's adapters: as many values as the run has */
		uint64_t want = 0;
		for (uint32_t u = 0; u < s.ntensors; u++)
			if (s.tensor[u].storage == u && s.tensor[u].adapter != 0)
				want += s.tensor[u].bytes / ag_dtype_size(s.tensor[u].dtype);
		if (want != nlora) {
			zs_fail(cause, "the case's lora holds %zu adapter values, and the run's adapters have %llu", nlora,
			        (unsigned long long)want);
			ag_step_free(&s);
			feed_free(&f);
			return -1;
		}
	}
	if (tokens == NULL)
		tfm_task_init(&f.task, f.dims.vocab, c->seed);
	tfm_blas_init();
	/* a mixture's step's lists of counts: under --grad-accum K, K
	 * micro-steps' L blocks each (moe_run) */
	size_t LE = (size_t)o.grad_accum * hf->layers * hf->experts;
	unsigned S = c->steps;
	if (seen != NULL) {
		own = zs_calloc((size_t)world * S, sizeof *own);
		for (unsigned k = 0; k < world; k++)
			for (unsigned t = k == 0; t < S; t++)
				if (moe_step_build(&own[(size_t)k * S + t], &f, &o, c->moe_counts + ((size_t)k * S + t) * LE, &s, k, t,
				                   cause) != 0)
					return tfm_run_free(&f, &s, own, S, world), -1;
	}
	if (fix != NULL) {
		size_t n = s.ntensors ? s.ntensors : 1;
		sv = zs_calloc(world, sizeof *sv);
		for (unsigned k = 0; k < world; k++)
			sv[k] = (struct step_save){zs_calloc(n, sizeof *sv[k].data), zs_calloc(n, 1), zs_calloc(n, 1), 0};
	}
#define tr (*trk)
	struct rank_feed *rf = zs_malloc(world * sizeof *rf);
	struct ag_exec_feed *feed = zs_malloc(world * sizeof *feed);
	struct ag_exec *x = zs_calloc(world, sizeof *x);
	for (unsigned k = 0; k < world; k++) {
		rf[k] = (struct rank_feed){.f = &f, .rank = k};
		feed[k] = (struct ag_exec_feed){.ctx = &rf[k], .param = feed_rank_param, .input = feed_rank_input,
		                                .adapter = lora != NULL ? feed_rank_adapter : NULL};
	}
	out->losses = zs_calloc(c->steps ? c->steps : 1, sizeof *out->losses);
	int rc = ag_exec_begin_ranks(x, world, &s, &o, &tr, feed, cause), begun = rc == 0;
	unsigned refits = 0; /* fix's: a block (a micro-step's under --grad-accum) a refit at most */
	/* a mixture's peak is its set-up's and its steps' after the first:
	 * the list's first step runs with the grads and Adam's state its
	 * set-up made, where 1.13 makes the state after the first backward,
	 * so the first step's routing moves a peak 1.13 does not reach
	 * (docs/schedule.md; the theory's walk_rank) */
	struct zs_rank_mem *setup_mem = seen != NULL && fix == NULL && c->steps > 1 && rc == 0
	                                        ? zs_malloc(world * sizeof *setup_mem) : NULL;
	for (unsigned k = 0; setup_mem != NULL && k < world; k++)
		setup_mem[k] = tr.rank[k];
	/* the first step's own list (ag_step.step1): its peak from its start,
	 * each rank's (first_peak), the run's then the set-up's or it, as one
	 * tracker keeps it (the first to reach it) */
	struct zs_rank_mem *before = s.step1 != NULL && rc == 0 ? zs_malloc(world * sizeof *before) : NULL;
	size_t *first_peak = zs_calloc(world, sizeof *first_peak);
	for (unsigned t = 0; rc == 0 && t < c->steps; t++) {
		for (unsigned k = 0; setup_mem != NULL && t == 1 && k < world; k++) {
			struct zs_rank_mem *m = &tr.rank[k];
			int now = m->total > setup_mem[k].peak;
			m->peak = now ? m->total : setup_mem[k].peak;
			memcpy(m->at_peak, now ? m->cur : setup_mem[k].at_peak, sizeof m->at_peak);
		}
		if (want_timeline > 1 && t + 1 == c->steps)
			tracker_record_ranks(&tr);
		else if (want_timeline && t + 1 == c->steps)
			tracker_record(&tr);
		for (unsigned k = 0; k < world; k++)
			x[k].record_marks = t + 1 == c->steps; /* the steady step's boundaries */
		for (unsigned k = 0; seen != NULL && k < world; k++) {
			x[k].s = list_at(&s, own, S, k, t);
			x[k].moe_seen_n = LE;
			x[k].moe_seen = seen + ((size_t)k * S + t) * LE;
			x[k].moe_topk = 0;
			memset(x[k].moe_seen, 0, LE * sizeof *seen);
		}
		for (unsigned k = 0; fix != NULL && k < world; k++)
			step_save_take(&sv[k], &x[k]);
		for (unsigned k = 0; before != NULL && t == 0 && k < world; k++) {
			before[k] = tr.rank[k];
			tr.rank[k].peak = tr.rank[k].total;
		}
		rc = ag_exec_step_ranks(x, world, cause);
		for (unsigned k = 0; before != NULL && t == 0 && k < world; k++) {
			struct zs_rank_mem *m = &tr.rank[k];
			first_peak[k] = m->peak;
			if (before[k].peak >= m->peak) {
				m->peak = before[k].peak;
				memcpy(m->at_peak, before[k].at_peak, sizeof m->at_peak);
			}
		}
		tracker_stop_recording(&tr);
		if (rc != 0 && fix != NULL && refits++ < (uint64_t)c->steps * o.grad_accum * hf->layers * world) {
			int r = moe_refit(x, sv, &s, own, &f, &o, fix, seen, t, cause);
			if (r > 0) {
				rc = 0;
				t--; /* step t again */
				continue;
			}
			if (r == MOE_RESHAPE)
				rc = MOE_RESHAPE;
		}
		/* the mean loss of the step: ranks summed 0..N-1 in double, as
		 * the engine's other runs report it */
		double sum = 0;
		for (unsigned k = 0; rc == 0 && k < world; k++) {
			if (!x[k].have_loss)
				rc = zs_fail(cause, "the PyTorch step computes no loss (no nll op)");
			sum += x[k].loss;
		}
		/* under --grad-accum K, the step's mean over its micro-steps (as
		 * the loop's sum of loss / K) */
		if (rc == 0 && o.grad_accum > 1) {
			sum = 0;
			for (unsigned k = 0; k < world; k++)
				sum += x[k].loss_sum;
			sum /= o.grad_accum;
		}
		if (rc == 0)
			out->losses[t] = (float)(sum / world);
	}
	if (rc == 0) {
		out->world = world;
		out->rank_resident = zs_calloc(world, sizeof *out->rank_resident);
		out->rank_peak = zs_calloc(world, sizeof *out->rank_peak);
		out->rank_comm = zs_calloc(world, sizeof *out->rank_comm);
		for (unsigned k = 0; k < world; k++) {
			out->rank_resident[k] = tr.rank[k].total;
			out->rank_peak[k] = tr.rank[k].peak;
			out->rank_comm[k] = x[k].comm;
		}
		/* the binding rank (the most at its peak, the first of equals):
		 * its breakdowns and marks (ranks differ under zero1) */
		unsigned b = 0;
		for (unsigned k = 1; k < world; k++)
			if (tr.rank[k].peak > tr.rank[b].peak)
				b = k;
		out->binding_rank = b;
		out->first_step_peak = first_peak[b];
		const struct zs_rank_mem *m = &tr.rank[b];
		out->resident = m->total;
		out->peak = m->peak;
		memcpy(out->resident_breakdown, m->cur, sizeof m->cur);
		memcpy(out->peak_breakdown, m->at_peak, sizeof m->at_peak);
		if (want_weights)
			out->weights = zs_malloc(f.p.numel * sizeof *out->weights);
		/* FSDP's: every rank's shard of each unit, joined */
		int sharded = c->wrapper == ZS_WRAPPER_FSDP;
		rc = final_weights(&f, x, sharded ? world : 1, out->weights, &out->digest, cause);
		/* DDP's replicas: every rank ends with rank 0's weights */
		for (unsigned k = 1; rc == 0 && !sharded && k < world; k++) {
			uint64_t d;
			rc = final_weights(&f, &x[k], 1, NULL, &d, cause);
			if (rc == 0 && d != out->digest)
				rc = zs_fail(cause, "internal error: rank %u's weights differ from rank 0's (--wrapper %s, %s, N=%u)",
				             k, zs_wrapper_name(c->wrapper), zs_scheme_name(c->schemes[0]), world);
			/* (LoRA's alone: DeepSpeed's fp32 partitions differ by rank) */
			if (rc == 0 && c->lora_r && c->wrapper == ZS_WRAPPER_DDP && adapters_digest(&x[k]) != adapters_digest(&x[0]))
				rc = zs_fail(cause, "internal error: rank %u's LoRA adapters differ from rank 0's (--wrapper ddp, "
				             "N=%u)", k, world);
		}
		/* every rank's marks where they differ (zero1; a mixture's ranks
		 * under DDP, each its own routing; FSDP's use_orig_params, each
		 * rank's Adam state its shard's trained pieces) */
		if ((ag_zero1_scheme(c) || (seen != NULL && world > 1) ||
		     (c->wrapper == ZS_WRAPPER_FSDP && c->fsdp_orig_params)) && x[b].nmarks > 0) {
			out->rank_mark_bytes = zs_calloc((size_t)world * x[b].nmarks, sizeof *out->rank_mark_bytes);
			for (unsigned k = 0; k < world && rc == 0; k++) {
				if (x[k].nmarks != x[b].nmarks)
					rc = zs_fail(cause, "internal error: rank %u logged %zu marks, rank %u %zu", k, x[k].nmarks,
					             b, x[b].nmarks);
				for (size_t i = 0; rc == 0 && i < x[k].nmarks; i++)
					out->rank_mark_bytes[(size_t)k * x[b].nmarks + i] = x[k].mark_bytes[i];
			}
		}
		/* the marks move to the result */
		out->mark_label = x[b].mark_label;
		out->mark_bytes = x[b].mark_bytes;
		out->nmarks = x[b].nmarks;
		x[b].mark_label = NULL;
		x[b].mark_bytes = NULL;
		x[b].nmarks = 0;
	}
	if (begun)
		for (unsigned k = 0; k < world; k++)
			ag_exec_end(&x[k]);
	free(x);
	free(feed);
	free(rf);
	size_t left = tracker_outstanding(&tr);
#undef tr
	free(setup_mem);
	free(before);
	free(first_peak);
	for (unsigned k = 0; sv != NULL && k < world; k++)
		step_save_free(&sv[k], s.ntensors);
	free(sv);
	tfm_run_free(&f, &s, own, S, world);
	if (rc == 0 && left != 0)
		rc = zs_fail(cause, "internal error: %zu tracked blocks were not freed", left);
	if (rc != 0)
		ag_exec_result_free(out);
	return rc;
}

/* A mixture's run (ag_exec.h): the routing its values make found on a
 * scratch tracker, each rank's (under DDP each routes its own batch),
 * each step that routes otherwise than its list on some rank run again
 * from its start for the corrected lists (tfm_run's fix), then the run
 * on trk under that routing. */
static int moe_run(const struct zs_config *c, const struct zs_model *hf, uint64_t seq, unsigned world,
                   int want_weights, struct zs_tracker *trk, int want_timeline, const float *init, const int *tokens,
                   struct ag_exec_result *out, char **cause)
{
	unsigned S = c->steps ? c->steps : 1, K = c->grad_accum > 1 ? c->grad_accum : 1;
	/* under --grad-accum K each micro-step routes its own micro-batch: a
	 * step's routing is its K micro-steps' blocks, micro-step major
	 * ([rank][step][k·L + block][expert]; its topks count them in that
	 * order, count_choices), L·K lists a step */
	size_t L = (size_t)K * hf->layers, E = hf->experts, LE = L * E, n = (size_t)world * S * LE;
	uint64_t *guess = zs_calloc(n, sizeof *guess), *seen = zs_calloc(n, sizeof *seen);
	struct zs_config *c2 = zs_malloc(sizeof *c2);
	*c2 = *c;
	c2->moe_counts = guess; /* [rank][step][block][expert] (tfm_run) */
	zs_moe_balanced(guess, (size_t)world * S * L, E, c->batch * seq * hf->experts_per_tok);
	struct zs_tracker sc;
	struct ag_exec_result r;
	tracker_init(&sc, world);
	int rc = tfm_run(c2, hf, seq, world, init, tokens, NULL, 0, 0, &sc, 0, &r, seen, guess, cause);
	tracker_destroy(&sc);
	/* the first step's list reshaped by its routing (moe_step_build):
	 * guess holds the corrected blocks, so the search starts again with
	 * step 1's list built for them (each start corrects a block: at most
	 * L·world of them) */
	for (size_t again = 0; rc == MOE_RESHAPE && again < L * world; again++) {
		free(*cause);
		*cause = NULL;
		tracker_init(&sc, world);
		rc = tfm_run(c2, hf, seq, world, init, tokens, NULL, 0, 0, &sc, 0, &r, seen, guess, cause);
		tracker_destroy(&sc);
	}
	if (rc == MOE_RESHAPE)
		rc = -1;
	if (rc == 0) {
		ag_exec_result_free(&r);
		rc = moe_starved(hf, guess, S, K, world, c->ddp_find_unused, c->wrapper, cause);
	}
	if (rc == 0)
		rc = tfm_run(c2, hf, seq, world, init, tokens, NULL, 0, want_weights, trk, want_timeline, out, seen, NULL, cause);
	if (rc == 0) {
		out->routing = zs_malloc(n * sizeof *out->routing);
		for (size_t i = 0; i < n; i++)
			out->routing[i] = (size_t)seen[i];
		out->routing_blocks = L;
		out->routing_micro = K;
		out->routing_experts = E;
	}
	free(c2);
	free(seen);
	free(guess);
	return rc;
}

int ag_exec_tfm_run(const struct zs_config *c, const struct zs_model *hf, uint64_t seq, unsigned world,
                    const float *init, const int *tokens, int want_weights, struct zs_tracker *trk,
                    int want_timeline, struct ag_exec_result *out, char **cause)
{
	if (hf->experts > 0 && (world == 1 || c->wrapper == ZS_WRAPPER_DDP || c->wrapper == ZS_WRAPPER_FSDP ||
	                        c->wrapper == ZS_WRAPPER_DEEPSPEED))
		return moe_run(c, hf, seq, world, want_weights, trk, want_timeline, init, tokens, out, cause);
	return tfm_run(c, hf, seq, world, init, tokens, NULL, 0, want_weights, trk, want_timeline, out, NULL, NULL, cause);
}

int ag_exec_tfm_run_lora(const struct zs_config *c, const struct zs_model *hf, uint64_t seq, unsigned world,
                         const float *init, const int *tokens, const float *lora, size_t nlora, int want_weights,
                         struct zs_tracker *trk, int want_timeline, struct ag_exec_result *out, char **cause)
{
	if (lora == NULL)
		return ag_exec_tfm_run(c, hf, seq, world, init, tokens, want_weights, trk, want_timeline, out, cause);
	if (hf->experts > 0)
		return zs_fail(cause, "a case's LoRA adapters over a mixture of experts: not run");
	return tfm_run(c, hf, seq, world, init, tokens, lora, nlora, want_weights, trk, want_timeline, out, NULL, NULL,
	               cause);
}

void ag_exec_result_free(struct ag_exec_result *r)
{
	free(r->routing);
	free(r->losses);
	free(r->rank_resident);
	free(r->rank_peak);
	free(r->rank_comm);
	free(r->weights);
	for (size_t i = 0; i < r->nmarks; i++)
		free(r->mark_label[i]);
	free(r->mark_label);
	free(r->mark_bytes);
	free(r->rank_mark_bytes);
	memset(r, 0, sizeof *r);
}

double ag_exec_tfm_peak_bytes(const struct zs_config *c, const struct zs_model *hf, uint64_t seq)
{
	struct tfm_feed f;
	struct ag_step s;
	struct ag_options o;
	if (tfm_prepare(&f, &s, &o, c, hf, seq, 1, NULL) != 0)
		return 0;
	/* the list's live bytes at every event: setup, then the lists of the
	 * first three steps (ag_step_lists: the first step's and the second's
	 * own where there are, and the steady step, which every later step
	 * runs again) (built for one rank: under zero1 that rank owns every
	 * parameter's state, as much as any rank of more holds) */
	double live = 0, peak = 0;
	const struct ag_event *lists[7] = {s.setup};
	size_t ns[7] = {s.nsetup}, nl = 1;
	for (unsigned t = 0; t < 3; t++)
		nl += ag_step_lists(&s, t, lists + nl, ns + nl);
	for (size_t l = 0; l < nl; l++)
		for (size_t i = 0; i < ns[l]; i++) {
			const struct ag_event *e = &lists[l][i];
			if (e->kind == AG_EV_ALLOC && e->t < s.ntensors)
				live += (double)ag_device_bytes(&s.tensor[e->t]);
			else if (e->kind == AG_EV_FREE && e->t < s.ntensors)
				live -= (double)ag_device_bytes(&s.tensor[e->t]);
			peak = live > peak ? live : peak;
		}
	ag_step_free(&s);
	feed_free(&f);
	return peak;
}

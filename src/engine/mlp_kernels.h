/*
 * mlp_kernels — the layer kernels, written once and included by mlp.c for
 * each working-parameter type. Define T (the storage type), LOAD(x) and
 * STORE(x) (one element to and from float), LOAD8(p) and STORE8(p, v)
 * (eight elements to and from a v8f), STREAM8(p, v) (STORE8 past the
 * caches, to an aligned p), and NAME(f) (the suffixed name).
 *
 * Every sum has one fixed order, whatever the blocking:
 *  - a forward dot product: eight fp32 lanes over the contiguous index,
 *    then from 0 the tail, then the lanes 0..7 (finish8 below);
 *  - a weight or bias gradient: over the batch rows b = 0..B-1, from 0;
 *  - an input gradient: over the outputs j = 0..dout-1, from 0.
 * The blocks of four batch rows only decide which sums share a load.
 * Vector and scalar code give the same bits, and nothing depends on
 * threads or on the schedule.
 */

/* One dot product alone: used for rows that do not fill a block. */
static float NAME(dot)(const float *x, const T *w, size_t n)
{
	v8f acc = {0};
	size_t i = 0;
	for (; i + 8 <= n; i += 8)
		acc += load8_f32(x + i) * LOAD8(w + i);
	float s = 0.0f;
	for (; i < n; i++)
		s += x[i] * LOAD(w[i]);
	for (int k = 0; k < 8; k++)
		s += acc[k];
	return s;
}

/* Two rows of w (u, v) against four rows of x: eight dot products, each w
 * and x load shared. Lane 2q + p holds x row q against w row p; n >= 8.
 * The first block's products start the lane sums, not 0 + them: a lane
 * then differs from 0 + p_0 + p_1 + ... only where that is +0 and this
 * -0 (0 + x is x but for x = -0), and finish8 adds every lane to a tail
 * that is never -0 (+0, or a sum from 0.0f), where +0 and -0 give the
 * same bits: the results are the same, without zeroing the eight sums
 * and a first block of additions (1.6M of the default sweep's 213M
 * instructions, callgrind). */
static inline __attribute__((always_inline)) v8f NAME(dot2x4)(const float *x, size_t xstride, const T *w,
                                                                size_t wstride, size_t n, const int pf)
{
	v8f a[8];
	const float *x0 = x, *x1 = x + xstride, *x2 = x + 2 * xstride, *x3 = x + 3 * xstride;
	const T *w0 = w, *w1 = w + wstride;
	{
		if (pf) {
			__builtin_prefetch(w0 + 2 * wstride);
			__builtin_prefetch(w1 + 2 * wstride);
		}
		v8f u = LOAD8(w0), v = LOAD8(w1);
		v8f b0 = load8_f32(x0), b1 = load8_f32(x1), b2 = load8_f32(x2), b3 = load8_f32(x3);
		a[0] = b0 * u;
		a[1] = b0 * v;
		a[2] = b1 * u;
		a[3] = b1 * v;
		a[4] = b2 * u;
		a[5] = b2 * v;
		a[6] = b3 * u;
		a[7] = b3 * v;
	}
	size_t i = 8;
	for (; i + 8 <= n; i += 8) {
		/* the next pair of w rows (the caller's next call), a pair ahead:
		 * each row is a short stream of its own, which the hardware
		 * prefetcher would find only after its first misses */
		if (pf) {
			__builtin_prefetch(w0 + 2 * wstride + i);
			__builtin_prefetch(w1 + 2 * wstride + i);
		}
		v8f u = LOAD8(w0 + i), v = LOAD8(w1 + i);
		v8f b0 = load8_f32(x0 + i), b1 = load8_f32(x1 + i);
		v8f b2 = load8_f32(x2 + i), b3 = load8_f32(x3 + i);
		a[0] += b0 * u;
		a[1] += b0 * v;
		a[2] += b1 * u;
		a[3] += b1 * v;
		a[4] += b2 * u;
		a[5] += b2 * v;
		a[6] += b3 * u;
		a[7] += b3 * v;
	}
	v8f tail = {0};
	for (int r = 0; i < n && r < 8; r++) {
		const float *xr = x + (size_t)(r >> 1) * xstride;
		const T *wr = r & 1 ? w1 : w0;
		float t = 0.0f;
		for (size_t k = i; k < n; k++)
			t += xr[k] * LOAD(wr[k]);
		tail[r] = t;
	}
	return finish8(a, tail);
}

/* The bias, then ReLU if relu: the same two steps for every output. */
static inline float NAME(bias_relu)(float sum, const T *bias, size_t j, int relu)
{
	float v = LOAD(bias[j]) + sum;
	return relu && v < 0.0f ? 0.0f : v;
}

/* pf: prefetch w's rows (a constant where it is inlined, so that the
 * loops test nothing). */
static inline __attribute__((always_inline)) void NAME(linear_forward_pf)(float *out, const float *in, const T *w,
                                                                           const T *bias, int relu, size_t B,
                                                                           size_t din, size_t dout, const int pf)
{
	size_t b = 0;
	for (; b + 4 <= B && din >= 8; b += 4) {
		size_t j = 0;
		for (; j + 2 <= dout; j += 2) {
			v8f s = NAME(dot2x4)(in + b * din, din, w + j * din, din, din, pf);
			float bj = LOAD(bias[j]), bk = LOAD(bias[j + 1]);
			v8f v = (v8f){bj, bk, bj, bk, bj, bk, bj, bk} + s;
			if (relu)
				v = (v8f)((v8i)v & ~(v8i)(v < (v8f){0}));
			store2x4(out + b * dout + j, dout, v);
		}
		for (; j < dout; j++)
			for (size_t q = b; q < b + 4; q++)
				out[q * dout + j] = NAME(bias_relu)(NAME(dot)(in + q * din, w + j * din, din), bias, j, relu);
	}
	for (; b < B; b++)
		for (size_t j = 0; j < dout; j++)
			out[b * dout + j] = NAME(bias_relu)(NAME(dot)(in + b * din, w + j * din, din), bias, j, relu);
}

void NAME(linear_forward)(float *out, const float *in, const T *w, const T *bias, int relu,
                          size_t B, size_t din, size_t dout)
{
	if (din * dout * sizeof(T) >= LARGE_BYTES)
		NAME(linear_forward_pf)(out, in, w, bias, relu, B, din, dout, 1);
	else
		NAME(linear_forward_pf)(out, in, w, bias, relu, B, din, dout, 0);
}

/* dw (dout, din) and dbias: each element a sum over b = 0..B-1 from 0.
 * With four rows, two rows of dw share each load of in. nt: stream dw past
 * the caches (a constant where it is inlined, so the loops test nothing). */
static inline __attribute__((always_inline)) void NAME(weight_grads_nt)(T *dw, T *dbias, const float *dy,
                                                                         const float *in, size_t B, size_t din,
                                                                         size_t dout, const int nt)
{
	size_t j = 0;
	for (; j + 8 <= dout; j += 8) {
		v8f acc = {0};
		for (size_t b = 0; b < B; b++)
			acc += load8_f32(dy + b * dout + j);
		STORE8(dbias + j, acc);
	}
	for (; j < dout; j++) {
		float db = 0.0f;
		for (size_t b = 0; b < B; b++)
			db += dy[b * dout + j];
		dbias[j] = STORE(db);
	}
	j = 0;
	if (B == 4) {
		const float *x0 = in, *x1 = in + din, *x2 = in + 2 * din, *x3 = in + 3 * din;
		for (; j + 2 <= dout; j += 2) {
			/* each factor broadcast once from memory (one instruction, not three) */
			const v8f d0 = splat8(dy + j), d1 = splat8(dy + dout + j), d2 = splat8(dy + 2 * dout + j),
			          d3 = splat8(dy + 3 * dout + j);
			const v8f e0 = splat8(dy + j + 1), e1 = splat8(dy + dout + j + 1), e2 = splat8(dy + 2 * dout + j + 1),
			          e3 = splat8(dy + 3 * dout + j + 1);
			T *dwj = dw + j * din, *dwk = dwj + din;
			size_t i = 0;
			for (; i + 8 <= din; i += 8) {
				v8f y0 = load8_f32(x0 + i), y1 = load8_f32(x1 + i);
				v8f y2 = load8_f32(x2 + i), y3 = load8_f32(x3 + i);
				v8f acc = {0}, acd = {0};
				acc += d0 * y0;
				acd += e0 * y0;
				acc += d1 * y1;
				acd += e1 * y1;
				acc += d2 * y2;
				acd += e2 * y2;
				acc += d3 * y3;
				acd += e3 * y3;
				if (nt) {
					STREAM8(dwj + i, acc);
					STREAM8(dwk + i, acd);
				} else {
					STORE8(dwj + i, acc);
					STORE8(dwk + i, acd);
				}
			}
			for (; i < din; i++) {
				float acc = 0.0f, acd = 0.0f;
				for (size_t b = 0; b < 4; b++) {
					acc += dy[b * dout + j] * in[b * din + i];
					acd += dy[b * dout + j + 1] * in[b * din + i];
				}
				dwj[i] = STORE(acc);
				dwk[i] = STORE(acd);
			}
		}
	}
	for (; j < dout; j++) {
		T *dwj = dw + j * din;
		size_t i = 0;
		for (; i + 8 <= din; i += 8) {
			v8f acc = {0};
			for (size_t b = 0; b < B; b++)
				acc += dy[b * dout + j] * load8_f32(in + b * din + i);
			if (nt)
				STREAM8(dwj + i, acc);
			else
				STORE8(dwj + i, acc);
		}
		for (; i < din; i++) {
			float acc = 0.0f;
			for (size_t b = 0; b < B; b++)
				acc += dy[b * dout + j] * in[b * din + i];
			dwj[i] = STORE(acc);
		}
	}
	if (nt)
		stream_fence();
}

static void NAME(weight_grads)(T *dw, T *dbias, const float *dy, const float *in, size_t B, size_t din,
                               size_t dout)
{
	/* eight elements' alignment (16 B for fp16, 32 B for fp32) at every row */
	const size_t al = 8 * sizeof(T);
	if (dout * din * sizeof(T) >= STREAM_BYTES && (uintptr_t)dw % al == 0 && din * sizeof(T) % al == 0)
		NAME(weight_grads_nt)(dw, dbias, dy, in, B, din, dout, 1);
	else
		NAME(weight_grads_nt)(dw, dbias, dy, in, B, din, dout, 0);
}

/* dx[b][i] = Σ_j dy[b][j]·w[j][i] over j = 0..dout-1 from 0, then ReLU's
 * mask, one element at a time, for the rows [b0, b1) and the columns
 * [i0, i1): what the vector loops below leave (the same sums in the same
 * order, so the same bits). */
static void NAME(input_grads_scalar)(float *dx, const float *dy, const float *in, const T *w, size_t b0, size_t b1,
                                     size_t i0, size_t i1, size_t din, size_t dout)
{
	for (size_t b = b0; b < b1; b++)
		for (size_t i = i0; i < i1; i++) {
			float s = 0.0f;
			for (size_t j = 0; j < dout; j++)
				s += dy[b * dout + j] * LOAD(w[j * din + i]);
			dx[b * din + i] = in[b * din + i] > 0.0f ? s : 0.0f;
		}
}

/* The same sums for a w that the caches hold. Four rows of b and sixteen of i are
 * summed in registers; each w load serves the four rows. ReLU's mask is
 * applied as the sums are stored: 0 where in is not > 0 (NaN included). */
static void NAME(input_grads_tile)(float *dx, const float *dy, const float *in, const T *w, size_t B, size_t din,
                              size_t dout)
{
	size_t b = 0;
	for (; b + 4 <= B; b += 4) {
		const float *e0 = dy + b * dout, *e1 = e0 + dout, *e2 = e1 + dout, *e3 = e2 + dout;
		float *o = dx + b * din;
		size_t i = 0;
		for (; i + 16 <= din; i += 16) {
			v8f a0 = {0}, a1 = {0}, a2 = {0}, a3 = {0}, c0 = {0}, c1 = {0}, c2 = {0}, c3 = {0};
			for (size_t j = 0; j < dout; j++) {
				v8f u = LOAD8(w + j * din + i), v = LOAD8(w + j * din + i + 8);
				float d0 = e0[j], d1 = e1[j], d2 = e2[j], d3 = e3[j];
				a0 += d0 * u;
				c0 += d0 * v;
				a1 += d1 * u;
				c1 += d1 * v;
				a2 += d2 * u;
				c2 += d2 * v;
				a3 += d3 * u;
				c3 += d3 * v;
			}
			const float *m = in + b * din + i;
			store8_f32(o + i, relu_mask8(a0, m));
			store8_f32(o + i + 8, relu_mask8(c0, m + 8));
			store8_f32(o + din + i, relu_mask8(a1, m + din));
			store8_f32(o + din + i + 8, relu_mask8(c1, m + din + 8));
			store8_f32(o + 2 * din + i, relu_mask8(a2, m + 2 * din));
			store8_f32(o + 2 * din + i + 8, relu_mask8(c2, m + 2 * din + 8));
			store8_f32(o + 3 * din + i, relu_mask8(a3, m + 3 * din));
			store8_f32(o + 3 * din + i + 8, relu_mask8(c3, m + 3 * din + 8));
		}
		NAME(input_grads_scalar)(dx, dy, in, w, b, b + 4, i, din, din, dout);
	}
	NAME(input_grads_scalar)(dx, dy, in, w, b, B, 0, din, din, dout);
}

/* The same sums for a w too large for the caches: four rows of b at a time,
 * summed in dx itself over a chunk of IG_CHUNK columns: for each j (two at
 * a time), the chunk's row of w is read once, contiguously, and added to
 * the four rows' sums, which stay in the L1 cache. Walking w by rows lets
 * the hardware prefetch it; a register tile that walked it down its
 * columns (a stride of din elements, every access in the same cache set)
 * waited on memory for most of the backward pass. Each sum is still
 * 0 + p_0 + p_1 + ... in j order, so the bits do not change. */
#ifndef IG_CHUNK
#define IG_CHUNK 512
#endif
static void NAME(input_grads_rows)(float *dx, const float *dy, const float *in, const T *w, size_t B, size_t din,
                                   size_t dout)
{
	size_t b = 0;
	for (; b + 4 <= B && dout > 0; b += 4) {
		const float *e0 = dy + b * dout, *e1 = e0 + dout, *e2 = e1 + dout, *e3 = e2 + dout;
		float *o0 = dx + b * din, *o1 = o0 + din, *o2 = o1 + din, *o3 = o2 + din;
		for (size_t i0 = 0; i0 < din; i0 += IG_CHUNK) {
			const size_t i1 = din - i0 < IG_CHUNK ? din : i0 + IG_CHUNK;
			const size_t v1 = i0 + (i1 - i0) / 8 * 8; /* the chunk's whole vectors end here */
			/* j = 0: each sum starts as 0 + p_0 */
			for (size_t i = i0; i < v1; i += 8) {
				v8f u = LOAD8(w + i), z = {0};
				store8_f32(o0 + i, z + e0[0] * u);
				store8_f32(o1 + i, z + e1[0] * u);
				store8_f32(o2 + i, z + e2[0] * u);
				store8_f32(o3 + i, z + e3[0] * u);
			}
			size_t j = 1;
			for (; j + 2 <= dout; j += 2) {
				const T *wj = w + j * din, *wk = wj + din;
				const float d0 = e0[j], d1 = e1[j], d2 = e2[j], d3 = e3[j];
				const float f0 = e0[j + 1], f1 = e1[j + 1], f2 = e2[j + 1], f3 = e3[j + 1];
				for (size_t i = i0; i < v1; i += 8) {
					/* the next two rows' part of the chunk, a pair ahead */
					__builtin_prefetch(wj + 2 * din + i);
					__builtin_prefetch(wk + 2 * din + i);
					v8f u = LOAD8(wj + i), v = LOAD8(wk + i);
					store8_f32(o0 + i, load8_f32(o0 + i) + d0 * u + f0 * v);
					store8_f32(o1 + i, load8_f32(o1 + i) + d1 * u + f1 * v);
					store8_f32(o2 + i, load8_f32(o2 + i) + d2 * u + f2 * v);
					store8_f32(o3 + i, load8_f32(o3 + i) + d3 * u + f3 * v);
				}
			}
			for (; j < dout; j++) {
				const T *wj = w + j * din;
				const float d0 = e0[j], d1 = e1[j], d2 = e2[j], d3 = e3[j];
				for (size_t i = i0; i < v1; i += 8) {
					v8f u = LOAD8(wj + i);
					store8_f32(o0 + i, load8_f32(o0 + i) + d0 * u);
					store8_f32(o1 + i, load8_f32(o1 + i) + d1 * u);
					store8_f32(o2 + i, load8_f32(o2 + i) + d2 * u);
					store8_f32(o3 + i, load8_f32(o3 + i) + d3 * u);
				}
			}
			/* the columns past the last whole vector */
			NAME(input_grads_scalar)(dx, dy, in, w, b, b + 4, v1, i1, din, dout);
			for (size_t q = 0; q < 4; q++) {
				float *o = dx + (b + q) * din;
				const float *m = in + (b + q) * din;
				for (size_t i = i0; i < v1; i += 8)
					store8_f32(o + i, relu_mask8(load8_f32(o + i), m + i));
			}
		}
	}
	NAME(input_grads_scalar)(dx, dy, in, w, b, B, 0, din, din, dout);
}

void NAME(linear_backward)(T *dw, T *dbias, float *dx, const float *dy, const float *in,
                           const T *w, size_t B, size_t din, size_t dout)
{
	NAME(weight_grads)(dw, dbias, dy, in, B, din, dout);
	if (dx != NULL && din * dout * sizeof(T) >= LARGE_BYTES)
		NAME(input_grads_rows)(dx, dy, in, w, B, din, dout);
	else if (dx != NULL)
		NAME(input_grads_tile)(dx, dy, in, w, B, din, dout);
}

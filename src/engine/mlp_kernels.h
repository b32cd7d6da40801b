/*
 * mlp_kernels — the layer kernels, written once and included by mlp.c for
 * each working-parameter type. Define T (the storage type), LOAD(x) and
 * STORE(x) (one element to and from float), LOAD8(p) and STORE8(p, v)
 * (eight elements to and from a v8f), and NAME(f) (the suffixed name).
 *
 * Sums run in a fixed order: eight fp32 lanes over the contiguous index,
 * then the tail, then the lanes 0..7. Vector and scalar code give the same
 * bits, and nothing depends on threads or on the schedule.
 */

/* The lanes, then the tail: the order every dot product in this file uses. */
static inline float NAME(finish)(v8f acc, const float *x, const T *w, size_t i, size_t n)
{
	float s = 0.0f;
	for (; i < n; i++)
		s += x[i] * LOAD(w[i]);
	for (int k = 0; k < 8; k++)
		s += acc[k];
	return s;
}

static float NAME(dot)(const float *x, const T *w, size_t n)
{
	v8f acc = {0};
	size_t i = 0;
	for (; i + 8 <= n; i += 8)
		acc += load8_f32(x + i) * LOAD8(w + i);
	return NAME(finish)(acc, x, w, i, n);
}

/* Four rows of x against one row of w: w is loaded and converted once for
 * the four. Each result has the bits NAME(dot) would give it. */
static void NAME(dot4)(float *out, size_t stride, const float *x, size_t xstride, const T *w, size_t n)
{
	v8f a0 = {0}, a1 = {0}, a2 = {0}, a3 = {0};
	size_t i = 0;
	for (; i + 8 <= n; i += 8) {
		v8f wv = LOAD8(w + i);
		a0 += load8_f32(x + i) * wv;
		a1 += load8_f32(x + xstride + i) * wv;
		a2 += load8_f32(x + 2 * xstride + i) * wv;
		a3 += load8_f32(x + 3 * xstride + i) * wv;
	}
	out[0] = NAME(finish)(a0, x, w, i, n);
	out[stride] = NAME(finish)(a1, x + xstride, w, i, n);
	out[2 * stride] = NAME(finish)(a2, x + 2 * xstride, w, i, n);
	out[3 * stride] = NAME(finish)(a3, x + 3 * xstride, w, i, n);
}

void NAME(linear_forward)(float *out, const float *in, const T *w, const T *bias, int relu,
                          size_t B, size_t din, size_t dout)
{
	for (size_t j = 0; j < dout; j++) {
		const T *wj = w + j * din;
		float bj = LOAD(bias[j]);
		size_t b = 0;
		for (; b + 4 <= B; b += 4)
			NAME(dot4)(out + b * dout + j, dout, in + b * din, din, wj, din);
		for (; b < B; b++)
			out[b * dout + j] = NAME(dot)(in + b * din, wj, din);
		for (b = 0; b < B; b++) {
			float v = bj + out[b * dout + j];
			out[b * dout + j] = relu && v < 0.0f ? 0.0f : v;
		}
	}
}

void NAME(linear_backward)(T *dw, T *dbias, float *dx, const float *dy, const float *in,
                           const T *w, size_t B, size_t din, size_t dout)
{
	for (size_t j = 0; j < dout; j++) {
		float db = 0.0f;
		for (size_t b = 0; b < B; b++)
			db += dy[b * dout + j];
		dbias[j] = STORE(db);
		T *dwj = dw + j * din;
		size_t i = 0;
		for (; i + 8 <= din; i += 8) {
			v8f acc = {0};
			for (size_t b = 0; b < B; b++)
				acc += dy[b * dout + j] * load8_f32(in + b * din + i);
			STORE8(dwj + i, acc);
		}
		for (; i < din; i++) {
			float acc = 0.0f;
			for (size_t b = 0; b < B; b++)
				acc += dy[b * dout + j] * in[b * din + i];
			dwj[i] = STORE(acc);
		}
	}
	if (dx == NULL)
		return;
	memset(dx, 0, B * din * sizeof *dx);
	/* dx[b][i] sums over j in order; w's row is converted once for all b. */
	for (size_t j = 0; j < dout; j++) {
		const T *wj = w + j * din;
		size_t i = 0;
		for (; i + 8 <= din; i += 8) {
			v8f wv = LOAD8(wj + i);
			for (size_t b = 0; b < B; b++) {
				float *p = dx + b * din + i;
				store8_f32(p, load8_f32(p) + dy[b * dout + j] * wv);
			}
		}
		for (; i < din; i++) {
			float wi = LOAD(wj[i]);
			for (size_t b = 0; b < B; b++)
				dx[b * din + i] += dy[b * dout + j] * wi;
		}
	}
	for (size_t e = 0; e < B * din; e++)
		if (!(in[e] > 0.0f))
			dx[e] = 0.0f;
}

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

void NAME(linear_forward)(float *out, const float *in, const T *w, const T *bias, int relu,
                          size_t B, size_t din, size_t dout)
{
	for (size_t j = 0; j < dout; j++) {
		const T *wj = w + j * din;
		float bj = LOAD(bias[j]);
		for (size_t b = 0; b < B; b++) {
			float v = bj + NAME(dot)(in + b * din, wj, din);
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
	for (size_t j = 0; j < dout; j++) {
		const T *wj = w + j * din;
		for (size_t b = 0; b < B; b++) {
			float d = dy[b * dout + j];
			float *dxb = dx + b * din;
			size_t i = 0;
			for (; i + 8 <= din; i += 8)
				store8_f32(dxb + i, load8_f32(dxb + i) + d * LOAD8(wj + i));
			for (; i < din; i++)
				dxb[i] += d * LOAD(wj[i]);
		}
	}
	for (size_t e = 0; e < B * din; e++)
		if (!(in[e] > 0.0f))
			dx[e] = 0.0f;
}

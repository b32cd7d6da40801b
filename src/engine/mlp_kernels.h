/*
 * mlp_kernels — the layer kernels, written once and included by mlp.c for
 * each working-parameter type. Define T (the storage type), LOAD(x) and
 * STORE(x) (to and from float) and NAME(f) (the suffixed name) first.
 *
 * Sums run in a fixed order, with eight independent fp32 lanes over the
 * contiguous index (the compiler turns them into vector code without
 * reassociating anything), so results never depend on threads or schedule.
 */
#define LANES 8

static float NAME(dot)(const float *x, const T *w, size_t n)
{
	float acc[LANES] = {0};
	size_t i = 0;
	for (; i + LANES <= n; i += LANES)
		for (size_t k = 0; k < LANES; k++)
			acc[k] += x[i + k] * LOAD(w[i + k]);
	float s = 0.0f;
	for (; i < n; i++)
		s += x[i] * LOAD(w[i]);
	for (size_t k = 0; k < LANES; k++)
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
		for (; i + LANES <= din; i += LANES) {
			float acc[LANES] = {0};
			for (size_t b = 0; b < B; b++) {
				float d = dy[b * dout + j];
				for (size_t k = 0; k < LANES; k++)
					acc[k] += d * in[b * din + i + k];
			}
			for (size_t k = 0; k < LANES; k++)
				dwj[i + k] = STORE(acc[k]);
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
			for (size_t i = 0; i < din; i++)
				dxb[i] += d * LOAD(wj[i]);
		}
	}
	for (size_t e = 0; e < B * din; e++)
		if (!(in[e] > 0.0f))
			dx[e] = 0.0f;
}

#undef LANES

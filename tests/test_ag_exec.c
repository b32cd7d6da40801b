/*
 * test_ag_exec — the executor of the PyTorch step (engine/ag_exec.h) on
 * hand-built event lists, each checked against values worked here by the
 * formulas themselves (not by the executor's kernels):
 *
 *   h = x @ W + b (addmm), a = tanh(h), y = a · a; backward from dy = 1:
 *   da = 2a, dh = da · (1 − a²), dW = xᵀ dh, db = Σ_rows dh, dx = dh Wᵀ,
 *
 * with xᵀ and Wᵀ transposed views of x's and W's storages (sgemm's
 * transposition flags), and once more through views no BLAS takes (every
 * stride 2: the plain loop); the loss as Hugging Face computes it
 * (log_softmax, nll with ignore index −100, their backward: (softmax −
 * onehot) / n on the rows that count); layer_norm's backward against
 * finite differences of its forward. And what the executor refuses: an op
 * reading a storage freed before it, one nothing wrote, a view past its
 * storage's bytes; dropout's seeded noise (its values, its kept share,
 * the same mask for the same seed); the tracker's peak is the list's live bytes, and
 * nothing is left allocated after a run, nor after a failed one. And one
 * whole step: QLoRA's (a tiny llama, --lora-r 2 over an NF4 base, with and
 * without double quantization) as ag_step_build_run builds it, its
 * adapters' gradients against finite differences of the executor's own
 * forward.
 */
#include "config.h"

#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/ag_exec.h"
#include "engine/tfm_kernels.h"
#include "engine/tracker.h"
#include "util/ag_ddp.h"
#include "util/step.h"
#include "util/util.h"

/* ---- building lists by hand -------------------------------------------- */

#define MAXT 64
#define MAXE 128

struct list {
	struct ag_step s;
	struct ag_tensor t[MAXT];
	struct ag_event e[MAXE];
};

static void list_init(struct list *l)
{
	memset(l, 0, sizeof *l);
	l->s.tensor = l->t;
	l->s.event = l->e;
}

/* A contiguous fp32 storage of shape sh (nd dims). */
static uint32_t stor(struct list *l, const char *what, unsigned nd, const uint64_t *sh, enum ag_role role, int param)
{
	uint32_t i = (uint32_t)l->s.ntensors++;
	struct ag_tensor *t = &l->t[i];
	*t = (struct ag_tensor){.what = what, .dtype = AG_F32, .ndim = nd, .storage = i, .role = role,
	                        .cat = ZS_CAT_ACTIVATIONS, .param = param, .module = -1};
	uint64_t n = 1;
	for (unsigned k = nd; k-- > 0;) {
		t->shape[k] = sh[k];
		t->stride[k] = (int64_t)n;
		n *= sh[k];
	}
	t->bytes = 4 * n;
	if (role == AG_ROLE_PARAM)
		t->cat = ZS_CAT_PARAM32;
	return i;
}

static uint32_t view_of(struct list *l, uint32_t base, unsigned nd, const uint64_t *sh, const int64_t *str,
                        uint64_t off)
{
	uint32_t i = (uint32_t)l->s.ntensors++;
	struct ag_tensor *t = &l->t[i];
	*t = l->t[base];
	t->ndim = nd;
	for (unsigned k = 0; k < nd; k++) {
		t->shape[k] = sh[k];
		t->stride[k] = str[k];
	}
	t->storage = base;
	t->offset = off;
	t->bytes = 0;
	return i;
}

static void ev(struct list *l, enum ag_event_kind kind, uint32_t t)
{
	l->e[l->s.nevents++] = (struct ag_event){.kind = kind, .t = t, .phase = ZS_PH_FORWARD, .module = -1,
	                                         .in = {AG_NONE, AG_NONE, AG_NONE, AG_NONE, AG_NONE},
	                                         .out = {AG_NONE, AG_NONE, AG_NONE}};
}

/* An op: up to 4 inputs and 3 outputs, AG_NONE-terminated. */
static void op(struct list *l, enum ag_op o, uint32_t i0, uint32_t i1, uint32_t i2, uint32_t i3, uint32_t o0,
               uint32_t o1, uint32_t o2, double arg)
{
	ev(l, AG_EV_OP, 0);
	struct ag_event *e = &l->e[l->s.nevents - 1];
	e->op = o;
	e->in[0] = i0;
	e->in[1] = i1;
	e->in[2] = i2;
	e->in[3] = i3;
	e->out[0] = o0;
	e->out[1] = o1;
	e->out[2] = o2;
	e->arg[0] = arg;
}
#define N AG_NONE

/* ---- values ------------------------------------------------------------ */

static const float X[2][3] = {{0.5f, -1.0f, 2.0f}, {1.5f, 0.25f, -0.5f}};
static const float W[3][2] = {{0.1f, -0.2f}, {0.3f, 0.4f}, {-0.5f, 0.6f}};
static const float Bv[2] = {0.05f, -0.1f};

/* Parameters by their `param`: 0 W, 1 b, 2 x (as laid out), 3 x spread
 * out (2, 6) with x at the even places, 4 a table of 5 × 4. */
static int feed_param(void *ctx, const struct ag_step *s, uint32_t t, void *data, char **cause)
{
	(void)ctx;
	(void)cause;
	float *d = data;
	switch (s->tensor[t].param) {
	case 0: memcpy(d, W, sizeof W); break;
	case 1: memcpy(d, Bv, sizeof Bv); break;
	case 2: memcpy(d, X, sizeof X); break;
	case 3:
		for (int i = 0; i < 2; i++)
			for (int j = 0; j < 6; j++)
				d[i * 6 + j] = j % 2 == 0 ? X[i][j / 2] : 1e9f;
		break;
	default:
		for (int i = 0; i < (int)(s->tensor[t].bytes / 4); i++)
			d[i] = (float)sin(0.7 * i + 0.3) * 1.5f;
	}
	return 0;
}

static const struct ag_exec_feed feed = {.ctx = NULL, .param = feed_param, .input = NULL, .adapter = NULL};

static struct ag_options opts(void)
{
	return (struct ag_options){.batch = 2, .seq = 1, .lr = 1e-3, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8};
}

/* A tracker of one rank and the executor over l's list, set up, and
 * `steps` steps run; each must succeed. */
static void start(struct list *l, struct zs_tracker *tr, struct ag_exec *x, unsigned steps)
{
	struct ag_options o = opts();
	char *cause = NULL;
	tracker_init(tr, 1);
	ck_assert_msg(ag_exec_begin(x, &l->s, &o, tr, 0, &feed, &cause) == 0, "%s", cause ? cause : "");
	for (unsigned t = 0; t < steps; t++)
		ck_assert_msg(ag_exec_step(x, &cause) == 0, "%s", cause ? cause : "");
}

/* The small network above; `spread`: x read through stride-2 views.
 * Its storages: ids into *ix (W, b, x, h, a, y, dy, da1, da, dh, dW, db, dx). */
struct mlp_ids {
	uint32_t W, b, x, h, a, y, dy, da1, da, dh, dW, db, dx;
};

static void build_mlp(struct list *l, int spread, struct mlp_ids *ix)
{
	list_init(l);
	uint64_t s32[2] = {3, 2}, s2[1] = {2}, s22[2] = {2, 2}, s23[2] = {2, 3}, s26[2] = {2, 6};
	ix->W = stor(l, "W", 2, s32, AG_ROLE_PARAM, 0);
	ix->b = stor(l, "b", 1, s2, AG_ROLE_PARAM, 1);
	uint32_t xs = spread ? stor(l, "x spread", 2, s26, AG_ROLE_PARAM, 3) : stor(l, "x", 2, s23, AG_ROLE_PARAM, 2);
	int64_t xstr[2] = {spread ? 6 : 3, spread ? 2 : 1};
	ix->x = spread ? view_of(l, xs, 2, s23, xstr, 0) : xs;
	ix->h = stor(l, "h", 2, s22, AG_ROLE_TEMP, -1);
	ix->a = stor(l, "a", 2, s22, AG_ROLE_TEMP, -1);
	ix->y = stor(l, "y", 2, s22, AG_ROLE_TEMP, -1);
	ix->dy = stor(l, "dy", 2, s22, AG_ROLE_TEMP, -1);
	ix->da1 = stor(l, "da1", 2, s22, AG_ROLE_TEMP, -1);
	ix->da = stor(l, "da", 2, s22, AG_ROLE_TEMP, -1);
	ix->dh = stor(l, "dh", 2, s22, AG_ROLE_TEMP, -1);
	ix->dW = stor(l, "dW", 2, s32, AG_ROLE_TEMP, -1);
	ix->db = stor(l, "db", 1, s2, AG_ROLE_TEMP, -1);
	ix->dx = stor(l, "dx", 2, s23, AG_ROLE_TEMP, -1);
	/* xᵀ (3, 2) and Wᵀ (2, 3): transposed views */
	uint64_t s32b[2] = {3, 2};
	int64_t xt[2] = {xstr[1], xstr[0]}, wt[2] = {1, 2};
	uint32_t xT = view_of(l, xs, 2, s32b, xt, 0), WT = view_of(l, ix->W, 2, s23, wt, 0);

	/* setup: the parameters */
	struct ag_event *keep = l->e;
	l->s.setup = keep;
	ev(l, AG_EV_ALLOC, ix->W);
	ev(l, AG_EV_ALLOC, ix->b);
	ev(l, AG_EV_ALLOC, xs);
	l->s.nsetup = l->s.nevents;
	l->s.event = l->e + l->s.nevents;
	size_t first = l->s.nevents;
	ev(l, AG_EV_ALLOC, ix->h);
	op(l, AG_OP_ADDMM, ix->x, ix->W, ix->b, N, ix->h, N, N, 0);
	ev(l, AG_EV_ALLOC, ix->a);
	op(l, AG_OP_TANH, ix->h, N, N, N, ix->a, N, N, 0);
	ev(l, AG_EV_FREE, ix->h);
	ev(l, AG_EV_ALLOC, ix->y);
	op(l, AG_OP_MUL, ix->a, ix->a, N, N, ix->y, N, N, 0);
	ev(l, AG_EV_ALLOC, ix->dy);
	op(l, AG_OP_FILL, N, N, N, N, ix->dy, N, N, 1.0);
	ev(l, AG_EV_ALLOC, ix->da1);
	op(l, AG_OP_MUL, ix->dy, ix->a, N, N, ix->da1, N, N, 0);
	ev(l, AG_EV_ALLOC, ix->da);
	op(l, AG_OP_ADD, ix->da1, ix->da1, N, N, ix->da, N, N, 1.0);
	ev(l, AG_EV_FREE, ix->da1);
	ev(l, AG_EV_ALLOC, ix->dh);
	op(l, AG_OP_TANH_BWD, ix->da, ix->a, N, N, ix->dh, N, N, 0);
	ev(l, AG_EV_ALLOC, ix->dW);
	op(l, AG_OP_MM, xT, ix->dh, N, N, ix->dW, N, N, 0);
	ev(l, AG_EV_ALLOC, ix->db);
	op(l, AG_OP_SUM_ROWS, ix->dh, N, N, N, ix->db, N, N, 0);
	ev(l, AG_EV_ALLOC, ix->dx);
	op(l, AG_OP_MM, ix->dh, WT, N, N, ix->dx, N, N, 0);
	l->s.nevents -= first;
	for (size_t i = 0; i < l->s.nevents; i++)
		l->s.event[i].phase = i < 5 ? ZS_PH_FORWARD : ZS_PH_BACKWARD;
}

/* The expected values, worked in double from the formulas. */
struct mlp_want {
	double h[2][2], a[2][2], dh[2][2], dW[3][2], db[2], dx[2][3];
};

static void want_mlp(struct mlp_want *w)
{
	memset(w, 0, sizeof *w);
	for (int i = 0; i < 2; i++)
		for (int j = 0; j < 2; j++) {
			double h = Bv[j];
			for (int k = 0; k < 3; k++)
				h += (double)X[i][k] * W[k][j];
			w->h[i][j] = h;
			w->a[i][j] = tanh(h);
			w->dh[i][j] = 2 * w->a[i][j] * (1 - w->a[i][j] * w->a[i][j]);
		}
	for (int k = 0; k < 3; k++)
		for (int j = 0; j < 2; j++)
			for (int i = 0; i < 2; i++)
				w->dW[k][j] += (double)X[i][k] * w->dh[i][j];
	for (int i = 0; i < 2; i++)
		for (int j = 0; j < 2; j++)
			w->db[j] += w->dh[i][j];
	for (int i = 0; i < 2; i++)
		for (int k = 0; k < 3; k++)
			for (int j = 0; j < 2; j++)
				w->dx[i][k] += w->dh[i][j] * W[k][j];
}

static void check_mlp(int spread)
{
	struct list *l = zs_calloc(1, sizeof *l);
	struct mlp_ids ix;
	build_mlp(l, spread, &ix);
	struct zs_tracker tr;
	struct ag_exec x;
	start(l, &tr, &x, 1);
	struct mlp_want w;
	want_mlp(&w);
	const float *a = ag_exec_data(&x, ix.a), *dW = ag_exec_data(&x, ix.dW), *db = ag_exec_data(&x, ix.db),
	            *dx = ag_exec_data(&x, ix.dx), *dh = ag_exec_data(&x, ix.dh);
	ck_assert_ptr_null(ag_exec_data(&x, ix.h)); /* freed after tanh */
	for (int i = 0; i < 2; i++)
		for (int j = 0; j < 2; j++) {
			ck_assert_double_eq_tol(a[i * 2 + j], w.a[i][j], 1e-6);
			ck_assert_double_eq_tol(dh[i * 2 + j], w.dh[i][j], 1e-6);
		}
	for (int k = 0; k < 3; k++)
		for (int j = 0; j < 2; j++)
			ck_assert_double_eq_tol(dW[k * 2 + j], w.dW[k][j], 1e-6);
	for (int j = 0; j < 2; j++)
		ck_assert_double_eq_tol(db[j], w.db[j], 1e-6);
	for (int i = 0; i < 2; i++)
		for (int k = 0; k < 3; k++)
			ck_assert_double_eq_tol(dx[i * 3 + k], w.dx[i][k], 1e-6);
	/* The peak is the list's: params (24 + 8 + x's) and, at the last
	 * alloc, a, y, dy, da, dh (16 each), dW 24, db 8, dx 24. */
	size_t xbytes = spread ? 48 : 24, want_peak = 24 + 8 + xbytes + 80 + 24 + 8 + 24; /* 80: five of 16 */
	ck_assert_uint_eq(tr.rank[0].peak, want_peak);
	ag_exec_end(&x);
	ck_assert_uint_eq(tracker_outstanding(&tr), 0);
	tracker_destroy(&tr);
	free(l);
}

START_TEST(test_addmm_tanh_mul_forward_and_backward_against_hand_values)
{
	check_mlp(0);
}
END_TEST

START_TEST(test_the_same_through_views_blas_cannot_take)
{
	check_mlp(1);
}
END_TEST

/* A failing list: the cause must hold `want`, and nothing stays allocated. */
static void check_refused(struct list *l, const char *want)
{
	struct zs_tracker tr;
	tracker_init(&tr, 1);
	struct ag_exec x;
	struct ag_options o = opts();
	char *cause = NULL;
	int rc = ag_exec_begin(&x, &l->s, &o, &tr, 0, &feed, &cause);
	if (rc == 0) {
		rc = ag_exec_step(&x, &cause);
		ag_exec_end(&x);
	}
	ck_assert_int_eq(rc, -1);
	ck_assert_ptr_nonnull(cause);
	ck_assert_msg(strstr(cause, want) != NULL, "cause \"%s\" lacks \"%s\"", cause, want);
	ck_assert_ptr_null(strchr(cause, '\n'));
	ck_assert_uint_eq(tracker_outstanding(&tr), 0);
	tracker_destroy(&tr);
	free(cause);
}

START_TEST(test_reading_a_freed_storage_fails_the_run)
{
	struct list *l = zs_calloc(1, sizeof *l);
	struct mlp_ids ix;
	build_mlp(l, 0, &ix);
	/* free a (the tanh's output) right after y is made: dy·a then reads it */
	for (size_t i = 0; i < l->s.nevents; i++)
		if (l->s.event[i].kind == AG_EV_ALLOC && l->s.event[i].t == ix.dy) {
			memmove(&l->s.event[i + 1], &l->s.event[i], (l->s.nevents - i) * sizeof *l->s.event);
			l->s.event[i] = (struct ag_event){.kind = AG_EV_FREE, .t = ix.a, .phase = ZS_PH_BACKWARD,
			                                  .in = {N, N, N, N, N}, .out = {N, N, N}};
			l->s.nevents++;
			break;
		}
	check_refused(l, "tensor a (4) is used while its storage is not allocated");
	free(l);
}
END_TEST

START_TEST(test_reading_what_nothing_wrote_fails_the_run)
{
	struct list *l = zs_calloc(1, sizeof *l);
	struct mlp_ids ix;
	build_mlp(l, 0, &ix);
	for (size_t i = 0; i < l->s.nevents; i++) /* drop dy's fill */
		if (l->s.event[i].kind == AG_EV_OP && l->s.event[i].op == AG_OP_FILL)
			l->s.event[i].kind = AG_EV_MARK;
	check_refused(l, "before anything wrote it");
	free(l);
}
END_TEST

START_TEST(test_a_view_past_its_storage_fails_the_run)
{
	struct list *l = zs_calloc(1, sizeof *l);
	struct mlp_ids ix;
	build_mlp(l, 0, &ix);
	l->t[ix.x].shape[0] = 3; /* x (2, 3) read as (3, 3) */
	check_refused(l, "outside its storage");
	free(l);
}
END_TEST

/* Hugging Face's loss: log_softmax, nll over the rows whose label is not
 * −100, backward from 1. Logits (3, 4), labels (1, −100, 3). */
START_TEST(test_the_loss_and_its_gradient_against_hand_values)
{
	struct list *l = zs_calloc(1, sizeof *l);
	list_init(l);
	uint64_t s34[2] = {3, 4}, s3[1] = {3}, s0[1] = {1};
	uint32_t z = stor(l, "logits", 2, s34, AG_ROLE_PARAM, 4);
	uint32_t lab = stor(l, "labels", 1, s3, AG_ROLE_TEMP, -1);
	l->t[lab].dtype = AG_I64;
	l->t[lab].bytes = 24;
	uint32_t lp = stor(l, "log_softmax", 2, s34, AG_ROLE_TEMP, -1);
	uint32_t loss = stor(l, "loss", 0, s0, AG_ROLE_TEMP, -1), tw = stor(l, "total_weight", 0, s0, AG_ROLE_TEMP, -1);
	uint32_t one = stor(l, "ones", 0, s0, AG_ROLE_TEMP, -1);
	uint32_t dlp = stor(l, "nll_backward", 2, s34, AG_ROLE_TEMP, -1), dz = stor(l, "dlogits", 2, s34, AG_ROLE_TEMP, -1);
	uint32_t lab1 = view_of(l, lab, 1, (uint64_t[]){1}, (int64_t[]){1}, 0);
	uint32_t lab3 = view_of(l, lab, 1, (uint64_t[]){1}, (int64_t[]){1}, 2);
	l->s.setup = l->e;
	ev(l, AG_EV_ALLOC, z);
	l->s.nsetup = 1;
	l->s.event = l->e + 1;
	size_t first = l->s.nevents;
	ev(l, AG_EV_ALLOC, lab);
	op(l, AG_OP_FILL, N, N, N, N, lab, N, N, -100.0); /* then 1 and 3 into rows 0 and 2 */
	op(l, AG_OP_FILL, N, N, N, N, lab1, N, N, 1.0);
	op(l, AG_OP_FILL, N, N, N, N, lab3, N, N, 3.0);
	ev(l, AG_EV_ALLOC, lp);
	op(l, AG_OP_LOG_SOFTMAX, z, N, N, N, lp, N, N, 0);
	ev(l, AG_EV_ALLOC, loss);
	ev(l, AG_EV_ALLOC, tw);
	op(l, AG_OP_NLL, lp, lab, N, N, loss, tw, N, -100.0);
	ev(l, AG_EV_ALLOC, one);
	op(l, AG_OP_FILL, N, N, N, N, one, N, N, 1.0);
	ev(l, AG_EV_ALLOC, dlp);
	op(l, AG_OP_NLL_BWD, one, lab, tw, N, dlp, N, N, -100.0);
	ev(l, AG_EV_ALLOC, dz);
	op(l, AG_OP_LOG_SOFTMAX_BWD, dlp, lp, N, N, dz, N, N, 0);
	l->s.nevents -= first;

	struct zs_tracker tr;
	struct ag_exec x;
	start(l, &tr, &x, 1);
	const float *zz = ag_exec_data(&x, z), *g = ag_exec_data(&x, dz);
	int target[3] = {1, -1, 3};
	double want_loss = 0;
	for (int r = 0; r < 3; r++) {
		double mx = -1e30, sum = 0;
		for (int j = 0; j < 4; j++)
			mx = fmax(mx, zz[r * 4 + j]);
		for (int j = 0; j < 4; j++)
			sum += exp(zz[r * 4 + j] - mx);
		for (int j = 0; j < 4; j++) {
			double p = exp(zz[r * 4 + j] - mx) / sum;
			double want = target[r] < 0 ? 0.0 : (p - (j == target[r])) / 2.0;
			ck_assert_double_eq_tol(g[r * 4 + j], want, 1e-6);
		}
		if (target[r] >= 0)
			want_loss += (-(zz[r * 4 + target[r]] - mx) + log(sum)) / 2.0;
	}
	ck_assert(x.have_loss);
	ck_assert_double_eq_tol(x.loss, want_loss, 1e-6);
	ck_assert_float_eq(*(const float *)ag_exec_data(&x, tw), 2.0f);
	ag_exec_end(&x);
	ck_assert_uint_eq(tracker_outstanding(&tr), 0);
	tracker_destroy(&tr);
	free(l);
}
END_TEST

/* layer_norm (3 rows of 4, weight and bias) and its backward: dx, dw, db
 * against central differences of L = Σ out · g with g fixed. */
static double ln_loss(const float *xv, const float *w, const float *b, const float *g)
{
	double L = 0;
	for (int r = 0; r < 3; r++) {
		double mu = 0, var = 0;
		for (int j = 0; j < 4; j++)
			mu += xv[r * 4 + j] / 4.0;
		for (int j = 0; j < 4; j++)
			var += (xv[r * 4 + j] - mu) * (xv[r * 4 + j] - mu) / 4.0;
		for (int j = 0; j < 4; j++)
			L += ((xv[r * 4 + j] - mu) / sqrt(var + 1e-5) * w[j] + b[j]) * g[r * 4 + j];
	}
	return L;
}

START_TEST(test_layer_norm_backward_against_finite_differences)
{
	struct list *l = zs_calloc(1, sizeof *l);
	list_init(l);
	uint64_t s34[2] = {3, 4}, s4[1] = {4}, s3[1] = {3};
	uint32_t xv = stor(l, "x", 2, s34, AG_ROLE_PARAM, 4), w = stor(l, "w", 1, s4, AG_ROLE_PARAM, 5),
	         b = stor(l, "b", 1, s4, AG_ROLE_PARAM, 6), g = stor(l, "g", 2, s34, AG_ROLE_PARAM, 7);
	uint32_t out = stor(l, "out", 2, s34, AG_ROLE_TEMP, -1), mean = stor(l, "mean", 1, s3, AG_ROLE_TEMP, -1),
	         rstd = stor(l, "rstd", 1, s3, AG_ROLE_TEMP, -1), dx = stor(l, "dx", 2, s34, AG_ROLE_TEMP, -1),
	         dw = stor(l, "dw", 1, s4, AG_ROLE_TEMP, -1), db = stor(l, "db", 1, s4, AG_ROLE_TEMP, -1);
	l->s.setup = l->e;
	ev(l, AG_EV_ALLOC, xv);
	ev(l, AG_EV_ALLOC, w);
	ev(l, AG_EV_ALLOC, b);
	ev(l, AG_EV_ALLOC, g);
	l->s.nsetup = 4;
	l->s.event = l->e + 4;
	size_t first = l->s.nevents;
	ev(l, AG_EV_ALLOC, out);
	ev(l, AG_EV_ALLOC, mean);
	ev(l, AG_EV_ALLOC, rstd);
	op(l, AG_OP_LAYER_NORM, xv, w, b, N, out, mean, rstd, 1e-5);
	ev(l, AG_EV_ALLOC, dx);
	ev(l, AG_EV_ALLOC, dw);
	ev(l, AG_EV_ALLOC, db);
	op(l, AG_OP_LAYER_NORM_BWD, g, xv, mean, rstd, dx, dw, db, 0);
	l->e[l->s.nevents - 1].in[4] = w;
	l->s.nevents -= first;

	struct zs_tracker tr;
	struct ag_exec x;
	start(l, &tr, &x, 1);
	float *X0 = ag_exec_data(&x, xv), *W0 = ag_exec_data(&x, w), *B0 = ag_exec_data(&x, b), *G = ag_exec_data(&x, g);
	const float *DX = ag_exec_data(&x, dx), *DW = ag_exec_data(&x, dw), *DB = ag_exec_data(&x, db);
	float *vars[3] = {X0, W0, B0};
	const float *grads[3] = {DX, DW, DB};
	int sizes[3] = {12, 4, 4};
	for (int v = 0; v < 3; v++)
		for (int i = 0; i < sizes[v]; i++) {
			float keep = vars[v][i], h = 1e-2f;
			vars[v][i] = keep + h;
			double up = ln_loss(X0, W0, B0, G);
			vars[v][i] = keep - h;
			double dn = ln_loss(X0, W0, B0, G);
			vars[v][i] = keep;
			ck_assert_double_eq_tol(grads[v][i], (up - dn) / (2.0 * h), 2e-3);
		}
	ag_exec_end(&x);
	tracker_destroy(&tr);
	free(l);
}
END_TEST

/* Adam's single-tensor ops as torch.optim.Adam (1.13) writes them, over
 * two steps of one parameter with a fixed gradient: the executor supplies
 * the step-dependent scalars; the weights against Adam worked here. */
START_TEST(test_adams_ops_take_the_steps_scalars)
{
	struct list *l = zs_calloc(1, sizeof *l);
	list_init(l);
	uint64_t s4[1] = {4};
	uint32_t p = stor(l, "p", 1, s4, AG_ROLE_PARAM, 5), gr = stor(l, "grad", 1, s4, AG_ROLE_GRAD, 5),
	         m = stor(l, "m", 1, s4, AG_ROLE_ADAM_M, 5), v = stor(l, "v", 1, s4, AG_ROLE_ADAM_V, 5),
	         sq = stor(l, "sqrt", 1, s4, AG_ROLE_TEMP, -1), dn = stor(l, "denom", 1, s4, AG_ROLE_TEMP, -1);
	l->s.setup = l->e;
	ev(l, AG_EV_ALLOC, p);
	l->s.nsetup = 1;
	l->s.first_step = l->e + 1;
	ev(l, AG_EV_ALLOC, m);
	op(l, AG_OP_ZERO_, m, N, N, N, m, N, N, 0);
	ev(l, AG_EV_ALLOC, v);
	op(l, AG_OP_ZERO_, v, N, N, N, v, N, N, 0);
	l->s.nfirst = 4;
	l->s.event = l->e + 5;
	size_t first = l->s.nevents;
	ev(l, AG_EV_ALLOC, gr);
	op(l, AG_OP_COPY, p, N, N, N, gr, N, N, 0); /* the gradient: the weights themselves, as at the step's start */
	op(l, AG_OP_MUL_SCALAR_, m, N, N, N, m, N, N, 0.9);
	op(l, AG_OP_ADD_, m, gr, N, N, m, N, N, 0.1);
	op(l, AG_OP_MUL_SCALAR_, v, N, N, N, v, N, N, 0.999);
	op(l, AG_OP_ADDCMUL_, v, gr, gr, N, v, N, N, 0.001);
	ev(l, AG_EV_ALLOC, sq);
	op(l, AG_OP_SQRT, v, N, N, N, sq, N, N, 0);
	ev(l, AG_EV_ALLOC, dn);
	op(l, AG_OP_MUL_SCALAR, sq, N, N, N, dn, N, N, 12345.0); /* the executor's 1/sqrt(1 − β2^t) */
	op(l, AG_OP_ADD_SCALAR_, dn, N, N, N, dn, N, N, 1e-8);
	op(l, AG_OP_ADDCDIV_, p, m, dn, N, p, N, N, 12345.0); /* the executor's −lr/(1 − β1^t) */
	ev(l, AG_EV_FREE, sq);
	ev(l, AG_EV_FREE, dn);
	ev(l, AG_EV_FREE, gr);
	l->s.nevents -= first;
	for (size_t i = 0; i < l->s.nevents; i++)
		l->s.event[i].phase = i < 2 ? ZS_PH_BACKWARD : ZS_PH_OPTIMIZER;
	for (size_t i = 0; i < l->s.nfirst; i++)
		l->s.first_step[i].phase = ZS_PH_OPTIMIZER;

	struct zs_tracker tr;
	struct ag_exec x;
	char *cause = NULL;
	start(l, &tr, &x, 0);
	double want[4], mm[4] = {0}, vv[4] = {0};
	const float *pp = ag_exec_data(&x, p);
	for (int i = 0; i < 4; i++)
		want[i] = pp[i];
	for (int t = 1; t <= 3; t++) {
		ck_assert_msg(ag_exec_step(&x, &cause) == 0, "%s", cause ? cause : "");
		for (int i = 0; i < 4; i++) {
			double gi = want[i];
			mm[i] = 0.9 * mm[i] + 0.1 * gi;
			vv[i] = 0.999 * vv[i] + 0.001 * gi * gi;
			double mh = mm[i] / (1 - pow(0.9, t)), vh = vv[i] / (1 - pow(0.999, t));
			want[i] -= 1e-3 * mh / (sqrt(vh) + 1e-8);
			ck_assert_double_eq_tol(pp[i], want[i], 1e-6);
		}
	}
	ag_exec_end(&x);
	ck_assert_uint_eq(tracker_outstanding(&tr), 0);
	tracker_destroy(&tr);
	free(l);
}
END_TEST

/* Llama's rotary tables and rotate_half's slice_backward, and add's alpha
 * read as given: LlamaRotaryEmbedding's inv_freq for base 10000 and
 * dim 4 is (10000^0, 10000^(-2/4)) = (1, 0.01); cos and sin of 0.5 are
 * the tabulated 0.8775825619 and 0.4794255386; slice_backward of
 * x[..., 2:] puts the grad at offset 2 of zeros; 1 + 0·5 is 1. */
START_TEST(test_rope_tables_slice_backward_and_alpha)
{
	struct list *l = zs_calloc(1, sizeof *l);
	list_init(l);
	uint64_t s2[1] = {2}, s3[1] = {3}, s12[2] = {1, 2}, s14[2] = {1, 4};
	uint32_t inv = stor(l, "inv_freq", 1, s2, AG_ROLE_TEMP, -1);
	uint32_t ang = stor(l, "angles", 1, s3, AG_ROLE_TEMP, -1);
	uint32_t c = stor(l, "cos", 1, s3, AG_ROLE_TEMP, -1), sn = stor(l, "sin", 1, s3, AG_ROLE_TEMP, -1);
	uint32_t g = stor(l, "grad of x2", 2, s12, AG_ROLE_TEMP, -1), sb = stor(l, "slice_backward", 2, s14, AG_ROLE_TEMP, -1);
	uint32_t one = stor(l, "ones", 1, s3, AG_ROLE_TEMP, -1), five = stor(l, "fives", 1, s3, AG_ROLE_TEMP, -1);
	uint32_t sum = stor(l, "add alpha 0", 1, s3, AG_ROLE_TEMP, -1);
	ev(l, AG_EV_ALLOC, inv);
	op(l, AG_OP_ROPE_INV_FREQ, N, N, N, N, inv, N, N, 10000.0);
	ev(l, AG_EV_ALLOC, ang);
	op(l, AG_OP_FILL, N, N, N, N, ang, N, N, 0.5);
	ev(l, AG_EV_ALLOC, c);
	op(l, AG_OP_COS, ang, N, N, N, c, N, N, 0);
	ev(l, AG_EV_ALLOC, sn);
	op(l, AG_OP_SIN, ang, N, N, N, sn, N, N, 0);
	ev(l, AG_EV_ALLOC, g);
	op(l, AG_OP_FILL, N, N, N, N, g, N, N, 3.0);
	ev(l, AG_EV_ALLOC, sb);
	op(l, AG_OP_COPY, g, N, N, N, sb, N, N, 0);
	l->e[l->s.nevents - 1].arg[1] = 2;
	ev(l, AG_EV_ALLOC, one);
	op(l, AG_OP_FILL, N, N, N, N, one, N, N, 1.0);
	ev(l, AG_EV_ALLOC, five);
	op(l, AG_OP_FILL, N, N, N, N, five, N, N, 5.0);
	ev(l, AG_EV_ALLOC, sum);
	op(l, AG_OP_ADD, one, five, N, N, sum, N, N, 0.0);

	struct zs_tracker tr;
	struct ag_exec x;
	start(l, &tr, &x, 1);
	const float *fi = ag_exec_data(&x, inv), *fc = ag_exec_data(&x, c), *fs = ag_exec_data(&x, sn);
	ck_assert_float_eq_tol(fi[0], 1.0f, 1e-7f);
	ck_assert_float_eq_tol(fi[1], 0.01f, 1e-8f);
	for (int i = 0; i < 3; i++) {
		ck_assert_float_eq_tol(fc[i], 0.8775825619f, 1e-7f);
		ck_assert_float_eq_tol(fs[i], 0.4794255386f, 1e-7f);
		ck_assert_float_eq(((const float *)ag_exec_data(&x, sum))[i], 1.0f);
	}
	const float *fb = ag_exec_data(&x, sb);
	ck_assert_float_eq(fb[0], 0.0f);
	ck_assert_float_eq(fb[1], 0.0f);
	ck_assert_float_eq(fb[2], 3.0f);
	ck_assert_float_eq(fb[3], 3.0f);
	ag_exec_end(&x);
	ck_assert_uint_eq(tracker_outstanding(&tr), 0);
	tracker_destroy(&tr);
	free(l);
}
END_TEST

/* An operand of the output's count but not its shape ([6] into [2, 3]) is
 * refused: the list must name the view PyTorch reads. */
START_TEST(test_an_operand_in_another_shape_fails_the_run)
{
	struct list *l = zs_calloc(1, sizeof *l);
	list_init(l);
	uint64_t s6[1] = {6}, s23[2] = {2, 3};
	uint32_t a = stor(l, "flat", 1, s6, AG_ROLE_TEMP, -1), o = stor(l, "out", 2, s23, AG_ROLE_TEMP, -1);
	ev(l, AG_EV_ALLOC, a);
	op(l, AG_OP_FILL, N, N, N, N, a, N, N, 1.0);
	ev(l, AG_EV_ALLOC, o);
	op(l, AG_OP_NEG, a, N, N, N, o, N, N, 0);
	check_refused(l, "does not broadcast to the output");
	free(l);
}
END_TEST

/* Dropout's noise (AG_OP_BERNOULLI_, then the division by 1 − p, then
 * x · noise as util/autograd.c writes it): every element 0 or 1/(1 − p),
 * the kept share within 5 standard deviations of 1 − p, y = x · noise;
 * the same seed draws the same mask, another seed another; a
 * probability outside 0..1 fails the run. */
static void dropout_list(struct list *l, double keep, uint32_t *noise, uint32_t *y)
{
	list_init(l);
	uint64_t sh[2] = {64, 64};
	uint32_t xx = stor(l, "x", 2, sh, AG_ROLE_PARAM, 4);
	*noise = stor(l, "noise", 2, sh, AG_ROLE_TEMP, -1);
	*y = stor(l, "y", 2, sh, AG_ROLE_TEMP, -1);
	l->s.setup = zs_calloc(1, sizeof *l->s.setup);
	l->s.setup[0] = (struct ag_event){.kind = AG_EV_ALLOC, .t = xx, .phase = ZS_PH_SETUP, .module = -1,
	                                  .in = {N, N, N, N, N}, .out = {N, N, N}};
	l->s.nsetup = 1;
	ev(l, AG_EV_ALLOC, *noise);
	op(l, AG_OP_BERNOULLI_, *noise, N, N, N, *noise, N, N, keep);
	op(l, AG_OP_DIV_SCALAR_, *noise, N, N, N, *noise, N, N, keep);
	ev(l, AG_EV_ALLOC, *y);
	op(l, AG_OP_MUL, xx, *noise, N, N, *y, N, N, 0);
}

static void run_dropout(struct list *l, uint64_t seed, uint32_t noise, uint32_t y, float *mask, float *out)
{
	struct zs_tracker tr;
	struct ag_exec x;
	struct ag_options o = opts();
	o.seed = seed;
	char *cause = NULL;
	tracker_init(&tr, 1);
	ck_assert_msg(ag_exec_begin(&x, &l->s, &o, &tr, 0, &feed, &cause) == 0, "%s", cause ? cause : "");
	ck_assert_msg(ag_exec_step(&x, &cause) == 0, "%s", cause ? cause : "");
	memcpy(mask, ag_exec_data(&x, noise), 64 * 64 * sizeof *mask);
	memcpy(out, ag_exec_data(&x, y), 64 * 64 * sizeof *out);
	ag_exec_end(&x);
	ck_assert_uint_eq(tracker_outstanding(&tr), 0);
	tracker_destroy(&tr);
}

START_TEST(test_dropout_noise_and_its_product)
{
	struct list *l = zs_calloc(1, sizeof *l);
	uint32_t noise, y;
	dropout_list(l, 0.75, &noise, &y);
	float *m1 = zs_calloc(3 * 64 * 64, sizeof *m1), *m2 = m1 + 64 * 64, *out = m2 + 64 * 64;
	run_dropout(l, 3, noise, y, m1, out);
	int kept = 0;
	for (int i = 0; i < 64 * 64; i++) {
		float xv = (float)sin(0.7 * i + 0.3) * 1.5f; /* the feed's table */
		ck_assert_msg(m1[i] == 0.0f || m1[i] == 1.0f / 0.75f, "noise %d is %g", i, (double)m1[i]);
		kept += m1[i] != 0.0f;
		ck_assert_float_eq_tol(out[i], xv * m1[i], 1e-6f);
	}
	double sd = sqrt(4096 * 0.75 * 0.25);
	ck_assert_msg(fabs(kept - 0.75 * 4096) < 5 * sd, "%d of 4096 kept for p = 0.25", kept);
	run_dropout(l, 3, noise, y, m2, out);
	ck_assert_int_eq(memcmp(m1, m2, 64 * 64 * sizeof *m1), 0);
	run_dropout(l, 4, noise, y, m2, out);
	ck_assert_int_ne(memcmp(m1, m2, 64 * 64 * sizeof *m1), 0);
	free(m1);
	free(l->s.setup);
	dropout_list(l, 1.5, &noise, &y);
	check_refused(l, "bernoulli_: the probability 1.5 is not in 0..1");
	free(l->s.setup);
	free(l);
}
END_TEST

/* The draw (bernoulli_'s arg[1], util/autograd.c's dropout ordinal): two
 * noises at different events drawn with the same draw are the same mask
 * (a checkpointed layer's rerun gives its forward's draws again), with
 * another draw another mask. */
START_TEST(test_dropout_draw_keys_the_mask)
{
	for (int same = 0; same < 2; same++) {
		struct list *l = zs_calloc(1, sizeof *l);
		list_init(l);
		uint64_t sh[2] = {64, 64};
		uint32_t a = stor(l, "a", 2, sh, AG_ROLE_TEMP, -1), c = stor(l, "c", 2, sh, AG_ROLE_TEMP, -1);
		ev(l, AG_EV_ALLOC, a);
		op(l, AG_OP_BERNOULLI_, a, N, N, N, a, N, N, 0.5);
		l->e[l->s.nevents - 1].arg[1] = 3;
		ev(l, AG_EV_ALLOC, c);
		op(l, AG_OP_BERNOULLI_, c, N, N, N, c, N, N, 0.5);
		l->e[l->s.nevents - 1].arg[1] = same ? 3 : 4;
		struct zs_tracker tr;
		struct ag_exec x;
		struct ag_options o = opts();
		char *cause = NULL;
		tracker_init(&tr, 1);
		ck_assert_msg(ag_exec_begin(&x, &l->s, &o, &tr, 0, &feed, &cause) == 0, "%s", cause ? cause : "");
		ck_assert_msg(ag_exec_step(&x, &cause) == 0, "%s", cause ? cause : "");
		int eq = memcmp(ag_exec_data(&x, a), ag_exec_data(&x, c), 64 * 64 * sizeof(float)) == 0;
		ck_assert_msg(eq == same, "draws %s: the masks %s", same ? "3 and 3" : "3 and 4", eq ? "equal" : "differ");
		ag_exec_end(&x);
		tracker_destroy(&tr);
		free(l);
	}
}
END_TEST

/* A 4-bit linear layer as util/autograd.c's QLoRA section lists it:
 * W [2, 64] (one block a row) quantized in set-up and freed; forward y =
 * x Dᵀ with D dequantized, freed; backward from dy = 1, dx = dy D with D
 * dequantized again. D worked here from the paper's NF4 values (nearest
 * to w / absmax), not by the executor's kernels; the tracker's peak is
 * the list's live bytes. */
START_TEST(test_a_4bit_linear_quantizes_for_real_and_frees_its_weight)
{
	static const double nf4[16] = {
		-1.0, -0.6961928009986877, -0.5250730514526367, -0.39491748809814453,
		-0.28444138169288635, -0.18477343022823334, -0.09105003625154495, 0.0,
		0.07958029955625534, 0.16093020141124725, 0.24611230194568634, 0.33791524171829224,
		0.44070982933044434, 0.5626170039176941, 0.7229568362236023, 1.0,
	};
	struct list *l = zs_calloc(1, sizeof *l);
	list_init(l);
	uint64_t s264[2] = {2, 64}, s364[2] = {3, 64}, s32[2] = {3, 2}, s641[2] = {64, 1}, s2[1] = {2};
	uint32_t w = stor(l, "W", 2, s264, AG_ROLE_PARAM, 4), xs = stor(l, "x", 2, s364, AG_ROLE_PARAM, 5);
	uint32_t packed = stor(l, "packed", 2, s641, AG_ROLE_BUFFER, -1), absmax = stor(l, "absmax", 1, s2, AG_ROLE_BUFFER, -1);
	l->t[packed].dtype = AG_U8, l->t[packed].bytes = 64;
	uint32_t d = stor(l, "D", 2, s264, AG_ROLE_TEMP, -1), y = stor(l, "y", 2, s32, AG_ROLE_TEMP, -1);
	uint32_t g = stor(l, "dy", 2, s32, AG_ROLE_TEMP, -1), d2 = stor(l, "D again", 2, s264, AG_ROLE_TEMP, -1);
	uint32_t dx = stor(l, "dx", 2, s364, AG_ROLE_TEMP, -1);
	uint64_t s642[2] = {64, 2};
	int64_t tr2[2] = {1, 64};
	uint32_t dT = view_of(l, d, 2, s642, tr2, 0);
	l->s.setup = l->e;
	ev(l, AG_EV_ALLOC, w);
	ev(l, AG_EV_ALLOC, xs);
	ev(l, AG_EV_ALLOC, packed);
	ev(l, AG_EV_ALLOC, absmax);
	op(l, AG_OP_NF4_QUANTIZE, w, N, N, N, packed, absmax, N, 0);
	ev(l, AG_EV_FREE, w);
	l->s.nsetup = l->s.nevents;
	l->s.event = l->e + l->s.nevents;
	size_t first = l->s.nevents;
	ev(l, AG_EV_ALLOC, d);
	op(l, AG_OP_NF4_DEQUANTIZE, packed, absmax, N, N, d, N, N, 0);
	ev(l, AG_EV_ALLOC, y);
	op(l, AG_OP_MM, xs, dT, N, N, y, N, N, 0);
	ev(l, AG_EV_FREE, d);
	ev(l, AG_EV_ALLOC, g);
	op(l, AG_OP_FILL, N, N, N, N, g, N, N, 1.0);
	ev(l, AG_EV_ALLOC, d2);
	op(l, AG_OP_NF4_DEQUANTIZE, packed, absmax, N, N, d2, N, N, 0);
	ev(l, AG_EV_ALLOC, dx);
	op(l, AG_OP_MM, g, d2, N, N, dx, N, N, 0);
	ev(l, AG_EV_FREE, d2);
	l->s.nevents -= first;
	struct zs_tracker tr;
	struct ag_exec x;
	start(l, &tr, &x, 1);
	/* the feed's table: sin(0.7 i + 0.3) · 1.5 for W and for x */
	double D[2][64], X4[3][64];
	for (int r = 0; r < 3; r++)
		for (int k = 0; k < 64; k++)
			X4[r][k] = (float)sin(0.7 * (r * 64 + k) + 0.3) * 1.5f;
	for (int o = 0; o < 2; o++) {
		double m = 0;
		float wv[64];
		for (int k = 0; k < 64; k++) {
			wv[k] = (float)sin(0.7 * (o * 64 + k) + 0.3) * 1.5f;
			m = fmax(m, fabs(wv[k]));
		}
		for (int k = 0; k < 64; k++) {
			int best = 0;
			for (int c = 1; c < 16; c++)
				if (fabs(wv[k] / m - nf4[c]) < fabs(wv[k] / m - nf4[best]))
					best = c;
			D[o][k] = nf4[best] * m;
		}
	}
	ck_assert_ptr_null(ag_exec_data(&x, w)); /* the fp32 weight is gone */
	const float *yv = ag_exec_data(&x, y), *dxv = ag_exec_data(&x, dx);
	for (int r = 0; r < 3; r++) {
		for (int o = 0; o < 2; o++) {
			double want = 0;
			for (int k = 0; k < 64; k++)
				want += X4[r][k] * D[o][k];
			ck_assert_double_eq_tol(yv[r * 2 + o], want, 1e-4);
		}
		for (int k = 0; k < 64; k++)
			ck_assert_double_eq_tol(dxv[r * 64 + k], D[0][k] + D[1][k], 1e-5);
	}
	/* peak: x 768, packed 64, absmax 8, y 24, dy 24, D 512, dx 768 (set-up's: W 512 + x + packed + absmax) */
	ck_assert_uint_eq(tr.rank[0].peak, 768 + 64 + 8 + 24 + 24 + 512 + 768);
	ag_exec_end(&x);
	ck_assert_uint_eq(tracker_outstanding(&tr), 0);
	tracker_destroy(&tr);
	free(l);
}
END_TEST

/* ---- QLoRA's adapter gradients against finite differences -------------- */

/* The step of a tiny llama (1 block, d 32, MLP 64, 2 heads, vocabulary 48,
 * batch 2, seq 6) under --lora-r 2 --quant-base nf4 (and --double-quant
 * on), fp32, the plain loop of 1.13 on the CPU, built by the real builder
 * (ag_step_build_run) from zs_config's options and run by the executor up
 * to the optimizer: the gradients the backward leaves in the adapters'
 * .grad, against central differences of the loss the same executor's
 * forward computes with one adapter element moved ±h. PEFT starts lora_B
 * at zeros, which would leave lora_A's gradient zero: after the set-up
 * the adapters are given values of their own (the same in every run).
 * The base is frozen and 4-bit (the set-up's quantization runs, the fp32
 * weights are gone: checked); no base parameter, the input embedding
 * included, has a .grad (checked), so no embedding element is sampled.
 * q_proj's adapter reaches the loss through the attention, o_proj's and
 * the MLP's 4-bit backward (dx through the dequantized weights). */
static const char qfd_llama[] =
	"{\"model_type\": \"llama\", \"hidden_size\": 32, \"intermediate_size\": 64, \"num_attention_heads\": 2,"
	" \"num_key_value_heads\": 2, \"num_hidden_layers\": 1, \"vocab_size\": 48, \"max_position_embeddings\": 16,"
	" \"rms_norm_eps\": 1e-05, \"tie_word_embeddings\": false, \"hidden_act\": \"silu\"}";
#define QFD_B 2
#define QFD_T 6
#define QFD_AMP 0.5 /* the adapters' values: QFD_AMP sin(...) */

/* Base parameters: 1 + 0.1 sin for a vector (RMSNorm's weight), a sin
 * table of amplitude 1.5/sqrt(columns) for a matrix, its phase the
 * storage's (q, k and v differ); the batch's ids a walk over the
 * vocabulary. */
static int qfd_param(void *ctx, const struct ag_step *s, uint32_t t, void *data, char **cause)
{
	(void)ctx;
	(void)cause;
	const struct ag_tensor *a = &s->tensor[t];
	float *d = data;
	size_t n = (size_t)a->bytes / 4;
	double amp = a->ndim == 2 ? 1.5 / sqrt((double)a->shape[1]) : 0.1;
	for (size_t i = 0; i < n; i++)
		d[i] = (float)((a->ndim == 2 ? 0.0 : 1.0) + amp * sin(0.37 * (double)i + 1.3 * t + 0.3));
	return 0;
}

static int qfd_input(void *ctx, const struct ag_step *s, uint32_t t, unsigned step, void *data, char **cause)
{
	(void)ctx;
	(void)step;
	(void)cause;
	int64_t *d = data;
	for (size_t i = 0; i < (size_t)s->tensor[t].bytes / 8; i++)
		d[i] = (int64_t)((i * 29 + 7) % 48);
	return 0;
}

static const struct ag_exec_feed qfd_feed = {.ctx = NULL, .param = qfd_param, .input = qfd_input, .adapter = NULL};

/* The step, its adapter storages (model.parameters()'s order: q_proj's
 * lora_A, lora_B, v_proj's) and each one's .grad, paired as the
 * optimizer pairs them: a parameter's Adam ops read its .grad (ADD_ or
 * LERP_, ADDCMUL_) before the one that writes the parameter. */
struct qfd_run {
	struct zs_model m;
	struct step_params p;
	struct zs_config c;
	struct ag_options o;
	struct ag_step s;
	uint32_t w[4], g[4];
	size_t nad;
	float *val; /* the adapters' values, storage after storage */
	size_t nval;
};

static void qfd_build(struct qfd_run *r, int double_quant)
{
	char *cause = NULL;
	memset(r, 0, sizeof *r);
	cJSON *j = cJSON_Parse(qfd_llama);
	ck_assert_ptr_nonnull(j);
	ck_assert_msg(zs_model_from_json(j, "qfd", &r->m, &cause) == 0, "%s", cause);
	cJSON_Delete(j);
	zs_config_defaults(&r->c);
	const char *kv[][2] = {{"framework", "torch"},   {"wrapper", "none"},     {"precision", "fp32"},
	                       {"torch-version", "1.13"}, {"torch-device", "cpu"}, {"lora-r", "2"},
	                       {"quant-base", "nf4"},     {"double-quant", double_quant ? "on" : "off"}};
	for (size_t i = 0; i < sizeof kv / sizeof kv[0]; i++)
		ck_assert_msg(zs_config_set(&r->c, kv[i][0], kv[i][1], &cause) == 0, "%s: %s", kv[i][0], cause);
	ag_options_from_config(&r->o, &r->c, QFD_B, QFD_T);
	step_params_build(&r->p, &r->m);
	ck_assert_msg(ag_step_build_run(&r->s, &r->m, &r->p, &r->o, &r->c, 1, &cause) == 0, "%s", cause);
	const struct ag_step *s = &r->s;
	for (uint32_t t = 0; t < s->ntensors; t++) {
		const struct ag_tensor *a = &s->tensor[t];
		if (a->storage == t && a->role == AG_ROLE_PARAM && a->param < 0) {
			ck_assert_uint_lt(r->nad, 4); /* q_proj's and v_proj's lora_A and lora_B */
			ck_assert_int_eq(a->dtype, AG_F32);
			r->w[r->nad] = t;
			r->g[r->nad++] = AG_NONE;
			r->nval += (size_t)a->bytes / 4;
		}
		/* LoRA freezes the base: no base parameter has a .grad */
		ck_assert_msg(!(a->role == AG_ROLE_GRAD && a->param >= 0), "base parameter %d has a .grad", a->param);
	}
	ck_assert_uint_eq(r->nad, 4);
	const struct ag_event *ev[2];
	size_t nev[2];
	unsigned nl = ag_step_lists(s, 0, ev, nev);
	uint32_t last = AG_NONE;
	for (unsigned l = 0; l < nl; l++)
		for (size_t i = 0; i < nev[l]; i++) {
			const struct ag_event *e = &ev[l][i];
			if (e->kind != AG_EV_OP || e->phase != ZS_PH_OPTIMIZER)
				continue;
			for (int k = 0; k < AG_MAXIN; k++)
				if (e->in[k] != AG_NONE && s->tensor[s->tensor[e->in[k]].storage].role == AG_ROLE_GRAD)
					last = s->tensor[e->in[k]].storage;
			for (size_t a = 0; a < r->nad; a++)
				if (e->out[0] != AG_NONE && s->tensor[e->out[0]].storage == r->w[a] && r->g[a] == AG_NONE)
					r->g[a] = last;
		}
	for (size_t a = 0; a < r->nad; a++) {
		ck_assert_msg(r->g[a] != AG_NONE, "adapter %zu: no .grad read by its Adam", a);
		ck_assert_uint_eq(s->tensor[r->g[a]].bytes, s->tensor[r->w[a]].bytes);
	}
	r->val = zs_malloc(r->nval * sizeof *r->val);
	for (size_t i = 0; i < r->nval; i++)
		r->val[i] = (float)(QFD_AMP * sin(0.53 * (double)i + 1.1));
}

static void qfd_free(struct qfd_run *r)
{
	free(r->val);
	ag_step_free(&r->s);
	step_params_free(&r->p);
}

/* A fresh executor: the set-up (the base quantized, its fp32 weights
 * freed), the adapters given r->val, the batch fed, then the first step's
 * events up to the first of phase `stop` (the backward: the forward
 * alone; the optimizer: forward and backward). */
static void qfd_run(struct qfd_run *r, struct zs_tracker *tr, struct ag_exec *x, enum zs_phase stop)
{
	char *cause = NULL;
	tracker_init(tr, 1);
	ck_assert_msg(ag_exec_begin(x, &r->s, &r->o, tr, 0, &qfd_feed, &cause) == 0, "%s", cause);
	for (size_t a = 0, at = 0; a < r->nad; a++) {
		float *d = ag_exec_data(x, r->w[a]);
		ck_assert_ptr_nonnull(d);
		size_t n = (size_t)r->s.tensor[r->w[a]].bytes / 4;
		memcpy(d, r->val + at, n * sizeof *d);
		at += n;
	}
	/* the batch held from the set-up on takes the step's, as ag_exec_step
	 * gives it */
	for (uint32_t t = 0; t < r->s.ntensors; t++)
		if (r->s.tensor[t].role == AG_ROLE_INPUT && ag_exec_data(x, t) != NULL)
			qfd_input(NULL, &r->s, t, 0, ag_exec_data(x, t), &cause);
	const struct ag_event *ev[2];
	size_t nev[2];
	unsigned nl = ag_step_lists(&r->s, 0, ev, nev);
	int done = 0;
	for (unsigned l = 0; l < nl && !done; l++) {
		size_t i = 0;
		while (i < nev[l] && ev[l][i].phase != stop)
			i++;
		done = i < nev[l];
		ck_assert_msg(ag_exec_events(x, ev[l], i, &cause) == 0, "%s", cause);
	}
	ck_assert_msg(done, "the first step has no phase %d", (int)stop);
	ck_assert(x->have_loss);
}

static void qfd_end(struct ag_exec *x, struct zs_tracker *tr)
{
	ag_exec_end(x);
	ck_assert_uint_eq(tracker_outstanding(tr), 0);
	tracker_destroy(tr);
}

/* The forward's loss with adapter value j set to v. */
static float qfd_loss(struct qfd_run *r, size_t j, float v)
{
	struct zs_tracker tr;
	struct ag_exec x;
	float keep = r->val[j];
	r->val[j] = v;
	qfd_run(r, &tr, &x, ZS_PH_BACKWARD);
	r->val[j] = keep;
	float loss = x.loss;
	qfd_end(&x, &tr);
	return loss;
}

/* Check every element of the adapters in `which` (bit a: adapter a). */
static void qfd_check(int double_quant, unsigned which)
{
	tfm_blas_init();
	struct qfd_run r;
	qfd_build(&r, double_quant);
	struct zs_tracker tr;
	struct ag_exec x;
	qfd_run(&r, &tr, &x, ZS_PH_OPTIMIZER);
	/* the base is 4-bit: 7 linear layers, each its packed codes (and,
	 * double quantized, its 8-bit absmax: uint8 too), each one's fp32
	 * weight freed by the set-up */
	size_t u8 = 0, gone = 0;
	for (uint32_t t = 0; t < r.s.ntensors; t++) {
		const struct ag_tensor *a = &r.s.tensor[t];
		u8 += a->storage == t && a->role == AG_ROLE_BUFFER && a->dtype == AG_U8;
		gone += a->storage == t && a->role == AG_ROLE_PARAM && a->param >= 0 && ag_exec_data(&x, t) == NULL;
	}
	ck_assert_uint_eq(u8, double_quant ? 14 : 7);
	ck_assert_uint_eq(gone, 7);
	float *g = zs_malloc(r.nval * sizeof *g);
	for (size_t a = 0, at = 0; a < r.nad; a++) {
		const float *d = ag_exec_data(&x, r.g[a]);
		ck_assert_ptr_nonnull(d);
		size_t n = (size_t)r.s.tensor[r.w[a]].bytes / 4;
		memcpy(g + at, d, n * sizeof *g);
		at += n;
	}
	float loss = x.loss;
	qfd_end(&x, &tr);
	ck_assert_float_eq(qfd_loss(&r, 0, r.val[0]), loss); /* the forward alone is the step's */
	/* h: 1e-2 of the adapters' amplitude (5e-3). The loss is an fp32
	 * value near 3.9, its unit in the last place u = 2.4e-7: a difference
	 * of two losses is a multiple of u, the quotient one of u / 2h = 2.4e-5
	 * (seen: errors up to 1.5 of it, 3.6e-5). atol 4 u / 2h (9.5e-5)
	 * leaves the forward's rounding a few units either side; rtol 1e-2 the
	 * truncation (h^2 / 6 times the third derivative) and the backward's
	 * own rounding (seen: within atol alone; 0.3 % where |num| > 1e-2).
	 * Each adapter's largest gradient is 0.017 (q_proj's lora_A) to 0.24
	 * (v_proj's lora_B), over 100 atol: a backward off by 3 % there, or of
	 * the wrong sign, fails. */
	const float h = (float)(1e-2 * QFD_AMP);
	double u = nextafterf(loss, INFINITY) - loss, atol = 4 * u / (2 * h), rtol = 1e-2;
	for (size_t a = 0, at = 0; a < r.nad; a++) {
		size_t n = (size_t)r.s.tensor[r.w[a]].bytes / 4;
		double gmax = 0;
		for (size_t j = at; j < at + n && (which >> a & 1); j++) {
			float up = r.val[j] + h, dn = r.val[j] - h;
			double num = ((double)qfd_loss(&r, j, up) - qfd_loss(&r, j, dn)) / ((double)up - dn);
			ck_assert_msg(fabs(num - g[j]) <= atol + rtol * fabs(num),
			              "adapter %zu's element %zu: backward %.7g, finite difference %.7g (h %g)", a, j - at,
			              (double)g[j], num, (double)h);
			gmax = fmax(gmax, fabs(g[j]));
		}
		/* every adapter checked has gradients well past atol */
		ck_assert_msg(!(which >> a & 1) || gmax > 100 * atol, "adapter %zu: largest gradient %g", a, gmax);
		at += n;
	}
	free(g);
	qfd_free(&r);
}

/* every element of the four adapters */
START_TEST(test_qlora_adapter_gradients_against_finite_differences) { qfd_check(0, 0xf); }
END_TEST

/* double quantization: every element of q_proj's lora_A and v_proj's lora_B */
START_TEST(test_qlora_double_quant_adapter_gradients_against_finite_differences) { qfd_check(1, 0x9); }
END_TEST

/* ---- a mixture's routing (util/autograd.c's moe_fwd and moe_bwd) -------- */

/* An int64 storage of shape sh. */
static uint32_t stor_i64(struct list *l, const char *what, unsigned nd, const uint64_t *sh)
{
	uint32_t i = stor(l, what, nd, sh, AG_ROLE_TEMP, -1);
	l->t[i].dtype = AG_I64;
	l->t[i].bytes *= 2;
	return i;
}

/* A small routed block over p (3, 4), the router's probabilities and
 * the tokens' rows at once, and a (3, 1), the gate's logits: w, ix =
 * topk(p, 2); the mask one_hot(ix) permuted to (4, 2, 3), its tokens per
 * expert, expert_hit = nonzero(> 0); for expert `ex` (the hit one at
 * `slot`), torch.where's (idx, top_x), xs = p[top_x], out = index_add_
 * (full of 0.5, top_x, xs · w[top_x, idx, None]) · sigmoid(a). Backward from G
 * by the ops moe_bwd uses: index_select, the weight's _index_put_,
 * topk's scatter_, x's _index_put_, sigmoid_backward. `n` tokens to the
 * expert and `hit` experts hit: the routing the list is built for. */
struct moe_ids {
	uint32_t p, a, G, w, ix, es, hitn, nz, out, dp, da;
	size_t nfwd; /* the forward's ops: l->s.event[0, nfwd) */
};

static void build_moe(struct list *l, uint64_t hit, uint64_t slot, uint64_t n, struct moe_ids *m)
{
	list_init(l);
	uint64_t s34[2] = {3, 4}, s31[2] = {3, 1}, s32[2] = {3, 2}, s324[3] = {3, 2, 4}, s4[1] = {4},
	         sh1[2] = {hit, 1}, s123[3] = {1, 2, 3}, sn2[2] = {n, 2}, sn4[2] = {n, 4}, sn1[2] = {n, 1};
	m->p = stor(l, "p", 2, s34, AG_ROLE_PARAM, 4);
	m->a = stor(l, "a", 2, s31, AG_ROLE_PARAM, 5);
	m->G = stor(l, "G", 2, s34, AG_ROLE_PARAM, 6);
	m->w = stor(l, "w", 2, s32, AG_ROLE_TEMP, -1);
	m->ix = stor_i64(l, "ix", 2, s32);
	uint32_t oh = stor_i64(l, "one_hot", 3, s324);
	uint32_t ix3 = view_of(l, m->ix, 3, (const uint64_t[]){3, 2, 1}, (const int64_t[]){2, 1, 1}, 0);
	uint32_t em = view_of(l, oh, 3, (const uint64_t[]){4, 2, 3}, (const int64_t[]){1, 4, 8}, 0);
	m->es = stor_i64(l, "tokens per expert", 1, s4);
	uint32_t zero = stor_i64(l, "0", 0, NULL);
	uint32_t hb = stor(l, "hit", 1, s4, AG_ROLE_TEMP, -1);
	l->t[hb].dtype = AG_BOOL;
	l->t[hb].bytes = 4;
	m->hitn = stor_i64(l, "expert_hit", 2, sh1);
	uint32_t eidx = view_of(l, m->hitn, 1, (const uint64_t[]){1}, (const int64_t[]){1}, slot);
	uint32_t sel = stor_i64(l, "expert_mask[e]", 3, s123);
	uint32_t sq = view_of(l, sel, 2, (const uint64_t[]){2, 3}, (const int64_t[]){3, 1}, 0);
	m->nz = stor_i64(l, "where", 2, sn2);
	uint32_t idx = view_of(l, m->nz, 1, (const uint64_t[]){n}, (const int64_t[]){2}, 0);
	uint32_t top = view_of(l, m->nz, 1, (const uint64_t[]){n}, (const int64_t[]){2}, 1);
	uint32_t xs = stor(l, "xs", 2, sn4, AG_ROLE_TEMP, -1), rw = stor(l, "rw", 2, sn1, AG_ROLE_TEMP, -1),
	         prod = stor(l, "prod", 2, sn4, AG_ROLE_TEMP, -1), fin = stor(l, "fin", 2, s34, AG_ROLE_TEMP, -1),
	         sg = stor(l, "sg", 2, s31, AG_ROLE_TEMP, -1);
	m->out = stor(l, "out", 2, s34, AG_ROLE_TEMP, -1);
	uint32_t dfin = stor(l, "dfin", 2, s34, AG_ROLE_TEMP, -1), dsgf = stor(l, "dsgf", 2, s34, AG_ROLE_TEMP, -1),
	         dsg = stor(l, "dsg", 2, s31, AG_ROLE_TEMP, -1), dprod = stor(l, "dprod", 2, sn4, AG_ROLE_TEMP, -1),
	         dxs = stor(l, "dxs", 2, sn4, AG_ROLE_TEMP, -1), drwf = stor(l, "drwf", 2, sn4, AG_ROLE_TEMP, -1),
	         drw = stor(l, "drw", 2, sn1, AG_ROLE_TEMP, -1), dw = stor(l, "dw", 2, s32, AG_ROLE_TEMP, -1),
	         dpr = stor(l, "dp route", 2, s34, AG_ROLE_TEMP, -1), dpx = stor(l, "dp x", 2, s34, AG_ROLE_TEMP, -1);
	m->dp = stor(l, "dp", 2, s34, AG_ROLE_TEMP, -1);
	m->da = stor(l, "da", 2, s31, AG_ROLE_TEMP, -1);
	/* every storage allocated at set-up, so that the forward can run again */
	l->s.setup = l->e;
	for (uint32_t t = 0; t < l->s.ntensors; t++)
		if (l->t[t].storage == t)
			ev(l, AG_EV_ALLOC, t);
	l->s.nsetup = l->s.nevents;
	size_t first = l->s.nevents;
	op(l, AG_OP_TOPK, m->p, N, N, N, m->w, m->ix, N, 2);
	op(l, AG_OP_FILL, N, N, N, N, oh, N, N, 0);
	op(l, AG_OP_SCATTER_, oh, ix3, N, N, oh, N, N, 1);
	op(l, AG_OP_SUM_LEAD, em, N, N, N, m->es, N, N, 0);
	op(l, AG_OP_FILL, N, N, N, N, zero, N, N, 0);
	op(l, AG_OP_GT, m->es, zero, N, N, hb, N, N, 0);
	op(l, AG_OP_NONZERO, hb, N, N, N, m->hitn, N, N, 0);
	op(l, AG_OP_INDEX, em, eidx, N, N, sel, N, N, 0);
	op(l, AG_OP_NONZERO, sq, N, N, N, m->nz, N, N, 0);
	op(l, AG_OP_INDEX, m->p, top, N, N, xs, N, N, 0);
	op(l, AG_OP_INDEX, m->w, top, idx, N, rw, N, N, 0);
	op(l, AG_OP_MUL, xs, rw, N, N, prod, N, N, 0);
	op(l, AG_OP_FILL, N, N, N, N, fin, N, N, 0.5); /* not zeros: index_add_ must add */
	op(l, AG_OP_INDEX_ADD_, fin, top, prod, N, fin, N, N, 0);
	op(l, AG_OP_SIGMOID, m->a, N, N, N, sg, N, N, 0);
	op(l, AG_OP_MUL, fin, sg, N, N, m->out, N, N, 0);
	m->nfwd = l->s.nevents - first;
	op(l, AG_OP_MUL, m->G, sg, N, N, dfin, N, N, 0);
	op(l, AG_OP_MUL, m->G, fin, N, N, dsgf, N, N, 0);
	op(l, AG_OP_SUM_TO, dsgf, N, N, N, dsg, N, N, 0);
	op(l, AG_OP_SIGMOID_BWD, dsg, sg, N, N, m->da, N, N, 0);
	op(l, AG_OP_INDEX, dfin, top, N, N, dprod, N, N, 0);
	op(l, AG_OP_MUL, dprod, rw, N, N, dxs, N, N, 0);
	op(l, AG_OP_MUL, dprod, xs, N, N, drwf, N, N, 0);
	op(l, AG_OP_SUM_TO, drwf, N, N, N, drw, N, N, 0);
	op(l, AG_OP_FILL, N, N, N, N, dw, N, N, 0);
	op(l, AG_OP_INDEX_PUT_ACC_, dw, top, idx, drw, dw, N, N, 0);
	op(l, AG_OP_FILL, N, N, N, N, dpr, N, N, 0);
	op(l, AG_OP_SCATTER_, dpr, m->ix, dw, N, dpr, N, N, 0);
	op(l, AG_OP_FILL, N, N, N, N, dpx, N, N, 0);
	op(l, AG_OP_INDEX_PUT_ACC_, dpx, top, N, dxs, dpx, N, N, 0);
	op(l, AG_OP_ADD, dpr, dpx, N, N, m->dp, N, N, 1);
	l->s.event = l->e + first;
	l->s.nevents -= first;
}

/* The feed's p (as feed_param's default draws it) and its routing worked
 * here: each row's two largest (largest first), the tokens per expert. */
static void moe_routing(float p[3][4], int64_t ix[3][2], uint64_t cnt[4])
{
	for (int i = 0; i < 12; i++)
		p[i / 4][i % 4] = (float)sin(0.7 * i + 0.3) * 1.5f;
	memset(cnt, 0, 4 * sizeof *cnt);
	for (int r = 0; r < 3; r++) {
		int b0 = 0;
		for (int c = 1; c < 4; c++)
			b0 = p[r][c] > p[r][b0] ? c : b0;
		int b1 = b0 == 0 ? 1 : 0;
		for (int c = 0; c < 4; c++)
			b1 = c != b0 && p[r][c] > p[r][b1] ? c : b1;
		ix[r][0] = b0;
		ix[r][1] = b1;
		cnt[b0]++;
		cnt[b1]++;
	}
}

static double moe_loss(struct ag_exec *x, const struct list *l, const struct moe_ids *m)
{
	char *cause = NULL;
	ck_assert_msg(ag_exec_events(x, l->s.event, m->nfwd, &cause) == 0, "%s", cause ? cause : "");
	const float *o = ag_exec_data(x, m->out), *G = ag_exec_data(x, m->G);
	double L = 0;
	for (int i = 0; i < 12; i++)
		L += (double)o[i] * G[i];
	return L;
}

START_TEST(test_routing_ops_against_hand_values_and_their_backward_against_finite_differences)
{
	float p[3][4];
	int64_t want_ix[3][2];
	uint64_t cnt[4], hit = 0;
	moe_routing(p, want_ix, cnt);
	uint64_t ex = 4, slot = 0;
	for (uint64_t e = 0; e < 4; e++) { /* the busiest expert, the first of equals */
		if (cnt[e] > 0 && (ex == 4 || cnt[e] > cnt[ex])) {
			ex = e;
			slot = hit;
		}
		hit += cnt[e] > 0;
	}
	ck_assert_uint_ge(cnt[ex], 2); /* 6 assignments over 4 experts: some expert gets two */
	struct list *l = zs_calloc(1, sizeof *l);
	struct moe_ids m;
	build_moe(l, hit, slot, cnt[ex], &m);
	struct zs_tracker tr;
	struct ag_exec x;
	start(l, &tr, &x, 1);
	const int64_t *ix = ag_exec_data(&x, m.ix), *es = ag_exec_data(&x, m.es), *hn = ag_exec_data(&x, m.hitn),
	              *nz = ag_exec_data(&x, m.nz);
	const float *w = ag_exec_data(&x, m.w);
	for (int r = 0; r < 3; r++)
		for (int j = 0; j < 2; j++) {
			ck_assert_int_eq(ix[r * 2 + j], want_ix[r][j]);
			ck_assert_float_eq(w[r * 2 + j], p[r][want_ix[r][j]]);
		}
	for (uint64_t e = 0, j = 0; e < 4; e++) {
		ck_assert_int_eq(es[e], (int64_t)cnt[e]);
		if (cnt[e] > 0)
			ck_assert_int_eq(hn[j++], (int64_t)e);
	}
	/* torch.where over the mask (k, BT): (choice, token) pairs in that order */
	for (uint64_t i = 0, j = 0; j < 2; j++)
		for (int r = 0; r < 3; r++)
			if (want_ix[r][j] == (int64_t)ex) {
				ck_assert_int_eq(nz[2 * i], (int64_t)j);
				ck_assert_int_eq(nz[2 * i + 1], r);
				i++;
			}
	float *P = ag_exec_data(&x, m.p), *A = ag_exec_data(&x, m.a);
	const float *DP = ag_exec_data(&x, m.dp), *DA = ag_exec_data(&x, m.da);
	float *vars[2] = {P, A};
	const float *grads[2] = {DP, DA};
	int sizes[2] = {12, 3}, nonzero = 0;
	for (int v = 0; v < 2; v++)
		for (int i = 0; i < sizes[v]; i++) {
			float keep = vars[v][i], h = 1e-3f;
			vars[v][i] = keep + h;
			double up = moe_loss(&x, l, &m);
			vars[v][i] = keep - h;
			double dn = moe_loss(&x, l, &m);
			vars[v][i] = keep;
			ck_assert_double_eq_tol(grads[v][i], (up - dn) / (2.0 * h), 2e-3);
			nonzero += fabsf(grads[v][i]) > 1e-3f;
		}
	ck_assert_int_ge(nonzero, 6); /* the routed rows, their weights and the gate carry gradient */
	ag_exec_end(&x);
	tracker_destroy(&tr);
	free(l);
}
END_TEST

/* The list is built for a routing: values that route otherwise fail the
 * run at torch.where, naming both counts. */
START_TEST(test_a_routing_other_than_the_lists_fails_at_nonzero)
{
	float p[3][4];
	int64_t ix[3][2];
	uint64_t cnt[4], hit = 0;
	moe_routing(p, ix, cnt);
	for (uint64_t e = 0; e < 4; e++)
		hit += cnt[e] > 0;
	struct list *l = zs_calloc(1, sizeof *l);
	struct moe_ids m;
	build_moe(l, hit + 1, 0, 1, &m);
	check_refused(l, "the list's routing has");
	free(l);
}
END_TEST

static Suite *ag_exec_suite(void)
{
	Suite *s = suite_create("ag_exec");
	TCase *t = tcase_create("kernels");
	tcase_add_test(t, test_addmm_tanh_mul_forward_and_backward_against_hand_values);
	tcase_add_test(t, test_the_same_through_views_blas_cannot_take);
	tcase_add_test(t, test_the_loss_and_its_gradient_against_hand_values);
	tcase_add_test(t, test_layer_norm_backward_against_finite_differences);
	tcase_add_test(t, test_adams_ops_take_the_steps_scalars);
	tcase_add_test(t, test_rope_tables_slice_backward_and_alpha);
	tcase_add_test(t, test_dropout_noise_and_its_product);
	tcase_add_test(t, test_dropout_draw_keys_the_mask);
	tcase_add_test(t, test_a_4bit_linear_quantizes_for_real_and_frees_its_weight);
	tcase_add_test(t, test_routing_ops_against_hand_values_and_their_backward_against_finite_differences);
	suite_add_tcase(s, t);
	t = tcase_create("qlora");
	tcase_add_test(t, test_qlora_adapter_gradients_against_finite_differences);
	tcase_add_test(t, test_qlora_double_quant_adapter_gradients_against_finite_differences);
	suite_add_tcase(s, t);
	t = tcase_create("lifetimes");
	tcase_add_test(t, test_reading_a_freed_storage_fails_the_run);
	tcase_add_test(t, test_reading_what_nothing_wrote_fails_the_run);
	tcase_add_test(t, test_a_view_past_its_storage_fails_the_run);
	tcase_add_test(t, test_an_operand_in_another_shape_fails_the_run);
	tcase_add_test(t, test_a_routing_other_than_the_lists_fails_at_nonzero);
	suite_add_tcase(s, t);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(ag_exec_suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}

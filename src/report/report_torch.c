/*
 * report_torch — the section "zerosim against PyTorch" (report_torch.h).
 */
#include "report/report_torch.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "report/report_buf.h"
#include "report/report_data.h"
#include "util/buf.h"
#include "util/util.h"

const char *const report_torch_class_title[RT_NCLASSES] = {
	[RT_PARAM] = "parameters",
	[RT_GRAD] = "gradients",
	[RT_ADAM] = "Adam's m and v",
	[RT_ACT] = "activations kept for backward",
	[RT_SCRATCH] = "zerosim's backward scratch",
	[RT_BWD] = "backward's gradients in flight",
	[RT_LOSS] = "the loss's buffers",
	[RT_TIED] = "the tied head's held gradient",
	[RT_OPBYOP] = "op-by-op GELU / RMSNorm",
	[RT_DROPOUT] = "dropout's kept noise",
	[RT_OPTIM] = "the optimizer's temporaries",
	[RT_STEP] = "Adam's step counters",
	[RT_BUFFER] = "the model's buffers",
	[RT_INPUT] = "the batch",
	[RT_DEQUANT] = "the 4-bit base's dequantized weight",
	[RT_QCLONE] = "PEFT's clone of the 4-bit result",
};

static const char *const phase_key[RT_NPHASES] = {"forward", "backward", "optimizer"};

/* ------------------------------------------------------------------------ */
/* The classes, by the names util/autograd.c gives what it makes. */

static int among(const char *s, const char *const *list)
{
	for (; *list != NULL; list++)
		if (strcmp(s, *list) == 0)
			return 1;
	return 0;
}

static int starts(const char *s, const char *p)
{
	return strncmp(s, p, strlen(p)) == 0;
}

static int ends(const char *s, const char *p)
{
	size_t n = strlen(s), m = strlen(p);
	return n >= m && strcmp(s + n - m, p) == 0;
}

/* transformers' ForCausalLMLoss: the labels padded and shifted, the
 * log-softmax cross_entropy keeps, nll_loss's outputs, and their
 * gradients from loss.backward()'s ones_like on. */
static const char *const loss_ops[] = {
	"constant_pad_nd (labels)", "clone (shift_labels)", "_log_softmax", "nll_loss_forward",
	"nll_loss_forward (total_weight)", "ones_like (loss grad)", "nll_loss_backward",
	"_log_softmax_backward_data", NULL,
};

/* Dropout on the CPU (util/autograd.c's dropout(), after
 * aten/src/ATen/native/Dropout.cpp's _dropout_impl): the noise tensor of
 * the input's dtype MulBackward0 keeps for backward (p = 1: a 0-dim
 * zeros). Its output (`mul (dropout)`) is the activation the next op
 * keeps, as a fused dropout's; its backward's product is a gradient in
 * flight. */
static const char *const dropout_ops[] = {"empty_like (dropout noise)", "zeros (dropout p = 1)", NULL};

/* QLoRA's 4-bit base (util/autograd.c's q4_*; docs/finetune.md, "QLoRA's
 * 4-bit base"): MatMul4Bit's dequantize_4bit into a temporary of the
 * run's dtype, in forward and again in backward (bitsandbytes 0.47.0
 * autograd/_functions.py lines 380 and 411), with double quantization
 * first the fp32 absmax back (functional.py lines 981-984); and PEFT's
 * `result = result.clone()` (tuners/lora/bnb.py line 533). The base's
 * packed weights, absmax and code are buffers (role buffer). */
static const char *const dequant_ops[] = {"dequantize_4bit", "dequantize_blockwise (absmax)", NULL};

/* Whether a temporary is one of an op-by-op activation's or norm's
 * intermediates: GPT-2's gelu_new runs in c_fc's module after its addmm
 * (everything there but the addmm, its backward's products and the
 * activation's output, which a fused GELU makes too); Llama's RMSNorm
 * modules (everything but the output `weight * x` and the weight's
 * gradient, which a fused norm makes too). */
static int op_by_op(const char *what, const char *module)
{
	if (module == NULL)
		return 0;
	if (strcmp(module, "mlp.c_fc") == 0)
		return strcmp(what, "addmm") != 0 && strcmp(what, "mul (gelu_new)") != 0 && !starts(what, "mm (addmm") &&
		       !starts(what, "sum (addmm");
	if (ends(module, "layernorm") || strcmp(module, "model.norm") == 0)
		return strcmp(what, "mul (weight x)") != 0 && strstr(what, "weight grad") == NULL;
	return 0;
}

enum report_torch_class report_torch_class(const char *role, const char *what, const char *module,
                                           const char *made, int tied)
{
	static const struct { const char *role; enum report_torch_class c; } roles[] = {
		{"param", RT_PARAM}, {"grad", RT_GRAD}, {"adam_m", RT_ADAM}, {"adam_v", RT_ADAM},
		{"adam_step", RT_STEP}, {"buffer", RT_BUFFER}, {"input", RT_INPUT},
	};
	for (size_t i = 0; i < sizeof roles / sizeof roles[0]; i++)
		if (strcmp(role, roles[i].role) == 0)
			return roles[i].c;
	if (strcmp(made, "optimizer") == 0)
		return RT_OPTIM;
	if (among(what, loss_ops))
		return RT_LOSS;
	if (tied && strcmp(what, "mm (lm_head weight grad)") == 0)
		return RT_TIED;
	if (among(what, dropout_ops))
		return RT_DROPOUT;
	if (among(what, dequant_ops))
		return RT_DEQUANT;
	if (strcmp(what, "clone (lora.bnb.Linear4bit's result)") == 0)
		return RT_QCLONE;
	if (op_by_op(what, module))
		return RT_OPBYOP;
	return strcmp(made, "forward") == 0 ? RT_ACT : RT_BWD;
}

/* ------------------------------------------------------------------------ */
/* Loading */

int report_torch_is_plain(const cJSON *theory)
{
	const cJSON *cfg = cJSON_GetObjectItemCaseSensitive(theory, "config");
	const char *w = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(cfg, "wrapper"));
	return w != NULL && strcmp(w, "none") == 0;
}

/* A string of o into out (n bytes), or a refusal: one without LaTeX's
 * or gnuplot's special characters (`name`, which the section escapes, may
 * have LaTeX's but no quote, backslash or control character). */
static int str_of(const cJSON *o, const char *key, const char *where, char *out, size_t n, char **cause)
{
	const char *s = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(o, key));
	int ok = s != NULL && strlen(s) < n &&
	         strpbrk(s, strcmp(key, "name") == 0 ? "\\'\"" : "\\{}$&#^_%~'\"") == NULL;
	for (const char *c = s; ok && *c; c++)
		ok = (unsigned char)*c >= 0x20;
	if (!ok)
		return zs_fail(cause, "%s: %s is not a short plain string", where, key);
	snprintf(out, n, "%s", s);
	return 0;
}

/* A list of live groups into cls[] (added); their sum into *sum. */
static int groups(const cJSON *arr, const char *where, int tied, double *cls, double *sum, char **cause)
{
	const cJSON *g;
	*sum = 0;
	if (!cJSON_IsArray(arr))
		return zs_fail(cause, "%s is not an array of groups", where);
	cJSON_ArrayForEach(g, arr) {
		const char *role = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(g, "role"));
		const char *what = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(g, "what"));
		const char *made = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(g, "made"));
		const char *module = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(g, "module"));
		double bytes;
		if (role == NULL || what == NULL || made == NULL)
			return zs_fail(cause, "%s: a group without its role, what or made", where);
		if (report_read_bytes(g, "bytes", where, &bytes, cause) < 0)
			return -1;
		cls[report_torch_class(role, what, module, made, tied)] += bytes;
		*sum += bytes;
	}
	return 0;
}

/* The tied head's gradient at each module's backward start: the most,
 * and the first and last marks that hold it. */
static int held_of(const cJSON *marks, const char *where, struct report_torch_run *r, char **cause)
{
	const cJSON *m;
	if (marks == NULL || !r->tied)
		return 0;
	if (!cJSON_IsObject(marks))
		return zs_fail(cause, "%s: mark_live is not an object of marks", where);
	cJSON_ArrayForEach(m, marks) {
		double cls[RT_NCLASSES] = { 0 }, sum;
		if (groups(m, where, 1, cls, &sum, cause) < 0)
			return -1;
		if (cls[RT_TIED] <= 0)
			continue;
		if (cls[RT_TIED] > r->held)
			r->held = cls[RT_TIED];
		if (r->held_from[0] == '\0')
			snprintf(r->held_from, sizeof r->held_from, "%s", m->string);
		snprintf(r->held_to, sizeof r->held_to, "%s", m->string);
	}
	return 0;
}

/* config.freeze (a pattern, printed escaped: any printable text) and
 * config.grad_accum (K > 1), which a run has only where it was given. */
static int optional_run_keys(struct report_torch_run *r, const cJSON *cfg, const char *path, char **cause)
{
	const cJSON *fz = cJSON_GetObjectItemCaseSensitive(cfg, "freeze");
	r->grad_accum = 1;
	if (fz != NULL && !cJSON_IsNull(fz)) {
		const char *s = cJSON_GetStringValue(fz);
		int ok = s != NULL && *s != '\0' && strlen(s) < sizeof r->freeze;
		for (const char *c = s; ok && *c; c++)
			ok = (unsigned char)*c >= 0x20 && *c != 0x7f;
		if (!ok)
			return zs_fail(cause, "%s: config.freeze is not a short printable pattern", path);
		snprintf(r->freeze, sizeof r->freeze, "%s", s);
	}
	if (cJSON_GetObjectItemCaseSensitive(cfg, "lora_r") != NULL) {
		const char *t = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(cfg, "lora_targets"));
		int ok = t != NULL && strlen(t) < sizeof r->lora_targets;
		for (const char *c = t; ok && *c; c++)
			ok = (unsigned char)*c >= 0x20 && *c != 0x7f;
		if (report_read_bytes(cfg, "lora_r", path, &r->lora_r, cause) < 0)
			return -1;
		if (r->lora_r < 1 || !ok)
			return zs_fail(cause, "%s: config.lora_r is not a rank with its lora_targets", path);
		snprintf(r->lora_targets, sizeof r->lora_targets, "%s", t);
		/* two runs that differ only in these are two runs (the same
		 * check as the rank's: a number where the run wrote one) */
		if (zs_json_number(cfg, "lora_alpha", path, &r->lora_alpha, cause) < 0 ||
		    zs_json_number(cfg, "lora_dropout", path, &r->lora_dropout, cause) < 0)
			return -1;
		if (!(r->lora_alpha > 0) || !(r->lora_dropout >= 0 && r->lora_dropout < 1))
			return zs_fail(cause, "%s: config.lora_alpha is not above 0 or config.lora_dropout not in [0, 1)", path);
		/* QLoRA's 4-bit base (written with --lora-r only) */
		const cJSON *qb = cJSON_GetObjectItemCaseSensitive(cfg, "quant_base");
		const cJSON *dq = cJSON_GetObjectItemCaseSensitive(cfg, "double_quant");
		if (qb != NULL && !cJSON_IsNull(qb)) {
			const char *q = cJSON_GetStringValue(qb);
			if (q == NULL || (strcmp(q, "nf4") != 0 && strcmp(q, "none") != 0) ||
			    (dq != NULL && !cJSON_IsBool(dq)))
				return zs_fail(cause, "%s: config.quant_base is not nf4 or none, or double_quant not true or false",
				               path);
			r->nf4 = strcmp(q, "nf4") == 0;
			r->double_quant = r->nf4 && cJSON_IsTrue(dq);
		}
		/* --load-dtype bf16: the section's terms (its 4-bit base's
		 * split, the floors) are the fp32-loaded model's */
		if (cJSON_GetObjectItemCaseSensitive(cfg, "load_dtype") != NULL)
			return zs_fail(cause, "%s: config.load_dtype: a model loaded in bf16 is not in the report yet", path);
	}
	if (cJSON_GetObjectItemCaseSensitive(cfg, "grad_accum") != NULL) {
		if (report_read_bytes(cfg, "grad_accum", path, &r->grad_accum, cause) < 0)
			return -1;
		if (r->grad_accum < 1 || r->grad_accum != (double)(uint64_t)r->grad_accum)
			return zs_fail(cause, "%s: config.grad_accum is not a whole number of micro-steps", path);
	}
	return 0;
}

static int read_run(struct report_torch_run *r, const cJSON *theory, const char *path, char **cause)
{
	const cJSON *cfg = cJSON_GetObjectItemCaseSensitive(theory, "config");
	const cJSON *model = cJSON_GetObjectItemCaseSensitive(cfg, "model");
	const cJSON *rows = cJSON_GetObjectItemCaseSensitive(theory, "rows");
	const cJSON *row = cJSON_GetArrayItem(rows, 0);
	const cJSON *s = cJSON_GetObjectItemCaseSensitive(row, "schedule");
	const cJSON *pp = cJSON_GetObjectItemCaseSensitive(s, "phase_peak_bytes");
	const cJSON *live = cJSON_GetObjectItemCaseSensitive(s, "peak_live");
	const cJSON *tie = cJSON_GetObjectItemCaseSensitive(model, "tie_word_embeddings");
	const char *bind = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(s, "binding_phase"));
	double sum, rb[REPORT_NCATS] = { 0 };

	r->path = path;
	if (str_of(model, "name", path, r->name, sizeof r->name, cause) < 0 ||
	    str_of(model, "model_type", path, r->model_type, sizeof r->model_type, cause) < 0 ||
	    str_of(cfg, "torch_version", path, r->version, sizeof r->version, cause) < 0 ||
	    str_of(cfg, "zero_grad", path, r->zero_grad, sizeof r->zero_grad, cause) < 0 ||
	    str_of(cfg, "optimizer_impl", path, r->optim_impl, sizeof r->optim_impl, cause) < 0 ||
	    str_of(cfg, "attn", path, r->attn, sizeof r->attn, cause) < 0 ||
	    str_of(cfg, "torch_device", path, r->device, sizeof r->device, cause) < 0 ||
	    str_of(cfg, "precision", path, r->precision, sizeof r->precision, cause) < 0)
		return -1;
	if (!cJSON_IsBool(tie))
		return zs_fail(cause, "%s: config.model.tie_word_embeddings is not true or false", path);
	r->tied = cJSON_IsTrue(tie);
	if (optional_run_keys(r, cfg, path, cause) < 0)
		return -1;
	if (r->freeze[0] || r->lora_r > 0) { /* its own paper level, over Ψ_t */
		const cJSON *lv = cJSON_GetObjectItemCaseSensitive(row, "peak");
		double bd[REPORT_NCATS] = { 0 }, level;
		if (report_read_bytes(theory, "params", path, &r->params, cause) < 0 ||
		    report_read_trained(theory, path, r->freeze[0] ? "freeze" : "lora_r", r->params, &r->trained, cause) < 0 ||
		    report_read_bytes(lv, "peak_bytes", path, &level, cause) < 0 ||
		    report_read_breakdown(lv, "peak_breakdown", path, "the plain loop's paper level", "peak_bytes", level, bd,
		                          cause) < 0)
			return -1;
		r->level_peak = level;
		r->level_grad = bd[REPORT_CAT_GRAD16] + bd[REPORT_CAT_GRAD32] + bd[REPORT_CAT_FULL_GRADS];
		r->level_adam = bd[REPORT_CAT_ADAM_M] + bd[REPORT_CAT_ADAM_V] + bd[REPORT_CAT_MOMENTUM];
	}
	if (report_read_bytes(cfg, "seq", path, &r->seq, cause) < 0 ||
	    report_read_bytes(cfg, "batch", path, &r->batch, cause) < 0)
		return -1;
	if (s == NULL || live == NULL || bind == NULL)
		return zs_fail(cause, "%s: the plain loop's first row has no schedule with peak_live and binding_phase "
		               "(made by an older zerosim theory?)", path);
	if (report_read_bytes(s, "resident_bytes", path, &r->resident, cause) < 0 ||
	    report_read_bytes(s, "peak_bytes", path, &r->peak, cause) < 0 ||
	    report_read_breakdown(s, "resident_breakdown", path, "the plain loop", "resident_bytes", r->resident, rb,
	                          cause) < 0)
		return -1;
	r->resident_grads = rb[REPORT_CAT_GRAD16] + rb[REPORT_CAT_GRAD32];
	r->binding = -1;
	for (int p = 0; p < RT_NPHASES; p++) {
		r->phase_peak[p] = -1;
		if (cJSON_GetObjectItemCaseSensitive(pp, phase_key[p]) != NULL &&
		    report_read_bytes(pp, phase_key[p], path, &r->phase_peak[p], cause) < 0)
			return -1;
		if (strcmp(bind, phase_key[p]) == 0)
			r->binding = p;
	}
	if (r->binding < 0)
		return zs_fail(cause, "%s: binding_phase %s is not forward, backward or the optimizer", path, bind);
	for (int p = 0; p < RT_NPHASES; p++)
		if (r->phase_peak[p] < 0)
			return zs_fail(cause, "%s: the plain loop's schedule has no phase_peak_bytes.%s", path, phase_key[p]);
	if (groups(cJSON_GetObjectItemCaseSensitive(live, bind), path, r->tied, r->cls, &sum, cause) < 0)
		return -1;
	if (sum != r->peak)
		return zs_fail(cause, "%s: peak_live.%s sums to %.0f bytes, not the peak's %.0f", path, bind, sum,
		               r->peak);
	if (r->phase_peak[RT_OPTIMIZER] >= 0) {
		if (groups(cJSON_GetObjectItemCaseSensitive(live, "optimizer"), path, r->tied, r->opt_cls, &sum, cause) < 0)
			return -1;
		if (sum != r->phase_peak[RT_OPTIMIZER])
			return zs_fail(cause, "%s: peak_live.optimizer sums to %.0f bytes, not the phase's %.0f", path, sum,
			               r->phase_peak[RT_OPTIMIZER]);
	}
	return held_of(cJSON_GetObjectItemCaseSensitive(s, "mark_live"), path, r, cause);
}

int report_torch_add(struct report_torch *t, const cJSON *theory, const char *path, char **cause)
{
	struct report_torch_run r = { 0 };
	if (read_run(&r, theory, path, cause) < 0)
		return -1;
	size_t i = 0;
	while (i < t->n && strcmp(t->models[i].name, r.name) != 0)
		i++;
	char *routing = report_moe_arg(theory);
	if (i == t->n) {
		t->models = zs_realloc(t->models, (t->n + 1) * sizeof *t->models);
		t->models[t->n++] = (struct report_torch_model){.seq = r.seq, .batch = r.batch,
		                                                 .routing = routing != NULL ? zs_strdup(routing) : NULL};
		snprintf(t->models[i].name, sizeof t->models[i].name, "%s", r.name);
	}
	struct report_torch_model *m = &t->models[i];
	int same = report_moe_same(m->routing, routing);
	free(routing);
	if (m->seq != r.seq || m->batch != r.batch)
		return zs_fail(cause, "%s: %s at seq %.0f, batch %.0f, where %s gave seq %.0f, batch %.0f", path, r.name,
		               r.seq, r.batch, m->runs[0].path, m->seq, m->batch);
	if (!same)
		return zs_fail(cause, "%s: %s at another --routing than %s's (%s): give one routing's runs", path,
		               r.name, m->runs[0].path, m->routing != NULL ? m->routing : "none");
	for (size_t k = 0; k < m->nruns; k++)
		if (strcmp(m->runs[k].version, r.version) == 0 && strcmp(m->runs[k].zero_grad, r.zero_grad) == 0 &&
		    strcmp(m->runs[k].optim_impl, r.optim_impl) == 0 && strcmp(m->runs[k].attn, r.attn) == 0 &&
		    strcmp(m->runs[k].device, r.device) == 0 && strcmp(m->runs[k].freeze, r.freeze) == 0 &&
		    m->runs[k].grad_accum == r.grad_accum && m->runs[k].lora_r == r.lora_r &&
		    strcmp(m->runs[k].lora_targets, r.lora_targets) == 0 && m->runs[k].lora_alpha == r.lora_alpha &&
		    m->runs[k].lora_dropout == r.lora_dropout && m->runs[k].nf4 == r.nf4 &&
		    m->runs[k].double_quant == r.double_quant && strcmp(m->runs[k].precision, r.precision) == 0)
			return zs_fail(cause, "%s: the plain loop of %s under the same settings is given twice (first: %s)",
			               path, r.name, m->runs[k].path);
	m->runs = zs_realloc(m->runs, (m->nruns + 1) * sizeof *m->runs);
	m->runs[m->nruns++] = r;
	return 0;
}

void report_torch_note_paper(struct report_torch *t, const cJSON *theory)
{
	const cJSON *cfg = cJSON_GetObjectItemCaseSensitive(theory, "config"), *row;
	const char *fw = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(cfg, "framework"));
	const char *name = cJSON_GetStringValue(
		cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(cfg, "model"), "name"));
	const cJSON *seq = cJSON_GetObjectItemCaseSensitive(cfg, "seq"), *batch = cJSON_GetObjectItemCaseSensitive(cfg, "batch");
	const cJSON *fz = cJSON_GetObjectItemCaseSensitive(cfg, "freeze"), *lr = cJSON_GetObjectItemCaseSensitive(cfg, "lora_r");
	if ((fw != NULL && strcmp(fw, "paper") != 0) || name == NULL || !cJSON_IsNumber(seq) || !cJSON_IsNumber(batch))
		return;
	if ((fz != NULL && !cJSON_IsNull(fz)) || (lr != NULL && !cJSON_IsNull(lr))) /* as report_torch_join */
		return;
	cJSON_ArrayForEach(row, cJSON_GetObjectItemCaseSensitive(theory, "rows")) {
		const char *sch = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(row, "scheme"));
		const char *unit = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(row, "unit"));
		const cJSON *w = cJSON_GetObjectItemCaseSensitive(row, "world");
		const char *bind = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(
			cJSON_GetObjectItemCaseSensitive(row, "schedule"), "binding_phase"));
		if (sch == NULL || unit == NULL || !cJSON_IsNumber(w) || bind == NULL || strcmp(sch, "dp") != 0 ||
		    strcmp(unit, "layer") != 0 || w->valuedouble != 1 || strlen(bind) >= 16 || strlen(name) >= 64)
			continue;
		t->papers = zs_realloc(t->papers, (t->npapers + 1) * sizeof *t->papers);
		struct report_torch_paper *p = &t->papers[t->npapers++];
		*p = (struct report_torch_paper){.seq = seq->valuedouble, .batch = batch->valuedouble};
		snprintf(p->name, sizeof p->name, "%s", name);
		snprintf(p->binding, sizeof p->binding, "%s", bind);
		return;
	}
}

int report_torch_join(struct report_torch *t, const struct report_tfm *tf, char **cause)
{
	for (size_t i = 0; i < t->n; i++) {
		struct report_torch_model *m = &t->models[i];
		const struct report_tfm_row *row = NULL;
		const struct report_tfm_model *other = NULL;   /* the same run of the paper at another routing */
		for (size_t k = 0; k < tf->n && row == NULL; k++) {
			const struct report_tfm_model *p = &tf->models[k];
			/* the paper's schedule trains every parameter: not a frozen or
			 * LoRA run's (a model of its own in the transformer section) */
			if (strcmp(p->name, m->name) != 0 || strcmp(p->framework, "paper") != 0 ||
			    strcmp(p->precision, "fp32") != 0 || p->seq != m->seq || p->batch != m->batch ||
			    p->freeze[0] != '\0' || p->lora_r > 0)
				continue;
			if (report_moe_same(p->moe.arg, m->routing))
				row = report_tfm_find(p, ZS_DP, 1, ZS_UNIT_LAYER);
			else
				other = p;
		}
		if (row == NULL && other != NULL)
			return zs_fail(cause, "%s (--routing %s) and %s (--routing %s): the plain loop and the paper's "
			               "schedule of %s at two routings; make both with the same", m->runs[0].path,
			               m->routing != NULL ? m->routing : "none", other->path,
			               other->moe.arg != NULL ? other->moe.arg : "none", m->name);
		if (row == NULL || !row->run.has_schedule || !row->run.has_sched_peak_bd)
			return zs_fail(cause, "%s: the plain loop of %s needs the paper's schedule beside it: give "
			               "--transformer with `zerosim theory --model %s --framework paper --precision fp32 "
			               "--world 1 --unit layer --seq %.0f --batch %.0f%s%s`", m->runs[0].path, m->name,
			               m->name, m->seq, m->batch, m->routing != NULL ? " --routing " : "",
			               m->routing != NULL ? m->routing : "");
		const double *bd = row->run.sched_peak_bd;
		for (size_t k = 0; k < t->npapers; k++)
			if (!strcmp(t->papers[k].name, m->name) && t->papers[k].seq == m->seq && t->papers[k].batch == m->batch)
				snprintf(m->paper_binding, sizeof m->paper_binding, "%s", t->papers[k].binding);
		m->paper_peak = row->run.schedule[REPORT_PEAK];
		m->paper_resident = row->run.schedule[REPORT_RESIDENT];
		m->paper_cls[RT_PARAM] = bd[REPORT_CAT_PARAM16] + bd[REPORT_CAT_PARAM32] + bd[REPORT_CAT_MASTER32];
		m->paper_cls[RT_GRAD] = bd[REPORT_CAT_GRAD16] + bd[REPORT_CAT_GRAD32] + bd[REPORT_CAT_FULL_GRADS];
		m->paper_cls[RT_ADAM] = bd[REPORT_CAT_ADAM_M] + bd[REPORT_CAT_ADAM_V] + bd[REPORT_CAT_MOMENTUM];
		m->paper_cls[RT_SCRATCH] = bd[REPORT_CAT_SCRATCH];
		m->paper_cls[RT_ACT] = bd[REPORT_CAT_ACTIVATIONS] + bd[REPORT_CAT_GATHERED] + bd[REPORT_CAT_BUCKETS] +
		                       bd[REPORT_CAT_UNKNOWN];
	}
	return 0;
}

void report_torch_free(struct report_torch *t)
{
	for (size_t i = 0; i < t->n; i++) {
		free(t->models[i].runs);
		free(t->models[i].routing);
	}
	free(t->models);
	free(t->papers);
	*t = (struct report_torch){ 0 };
}

/* ------------------------------------------------------------------------ */
/* The section */

static void bytes(struct zs_buf *b, double v)
{
	report_buf_grouped(b, v);
	zs_buf_printf(b, "~B");
}

/* Run k's --freeze pattern as a letter: the distinct patterns lettered
 * A, B, ... in the order the runs first give them (the text gives each
 * run's pattern). */
static char freeze_letter(const struct report_torch_model *m, size_t k)
{
	int letter = 0;
	for (size_t j = 0; j < m->nruns; j++) {
		int first = m->runs[j].freeze[0] != '\0';
		for (size_t i = 0; i < j && first; i++)
			first = strcmp(m->runs[i].freeze, m->runs[j].freeze) != 0;
		if (!first)
			continue;
		if (strcmp(m->runs[j].freeze, m->runs[k].freeze) == 0)
			break;
		letter++;
	}
	return (char)('A' + letter % 26);
}

const char *report_torch_label(const struct report_torch_model *m, size_t k, char *buf, size_t n)
{
	const struct report_torch_run *r = &m->runs[k];
	int zg = 0, oi = 0, at = 0, fz = 0, ga = 0, lo = 0, la = 0, ld = 0, pr = 0, q4 = 0;
	for (size_t j = 0; j < m->nruns; j++) {
		const struct report_torch_run *o = &m->runs[j];
		if (j == k || strcmp(o->version, r->version) != 0)
			continue;
		zg |= strcmp(o->zero_grad, r->zero_grad) != 0;
		oi |= strcmp(o->optim_impl, r->optim_impl) != 0;
		at |= strcmp(o->attn, r->attn) != 0;
		fz |= strcmp(o->freeze, r->freeze) != 0;
		ga |= o->grad_accum != r->grad_accum;
		lo |= o->lora_r != r->lora_r || strcmp(o->lora_targets, r->lora_targets) != 0;
		/* (alpha and dropout tell LoRA runs apart; a run without is "no LoRA") */
		la |= o->lora_r > 0 && o->lora_alpha != r->lora_alpha;
		ld |= o->lora_r > 0 && o->lora_dropout != r->lora_dropout;
		q4 |= o->lora_r > 0 && (o->nf4 != r->nf4 || o->double_quant != r->double_quant);
		pr |= strcmp(o->precision, r->precision) != 0;
	}
	/* (a label is also gnuplot's, quoted: the pattern itself is in the
	 * text, not here) */
	char k_of[96] = "", fz_of[24] = "";
	if (pr)
		snprintf(k_of, sizeof k_of, ", %s", r->precision);
	if (ga)
		snprintf(k_of + strlen(k_of), sizeof k_of - strlen(k_of), ", K = %.0f", r->grad_accum);
	if (lo && r->lora_r > 0)
		snprintf(k_of + strlen(k_of), sizeof k_of - strlen(k_of), ", LoRA r = %.0f", r->lora_r);
	else if (lo)
		snprintf(k_of + strlen(k_of), sizeof k_of - strlen(k_of), ", no LoRA");
	if (la && r->lora_r > 0)
		snprintf(k_of + strlen(k_of), sizeof k_of - strlen(k_of), ", alpha %g", r->lora_alpha);
	if (ld && r->lora_r > 0)
		snprintf(k_of + strlen(k_of), sizeof k_of - strlen(k_of), ", dropout %g", r->lora_dropout);
	if (q4 && r->lora_r > 0)
		snprintf(k_of + strlen(k_of), sizeof k_of - strlen(k_of), ", %s", !r->nf4 ? "fp32 base"
		         : r->double_quant ? "nf4 dq" : "nf4");
	if (fz && !r->freeze[0])
		snprintf(fz_of, sizeof fz_of, ", all trained");
	else if (fz)
		snprintf(fz_of, sizeof fz_of, ", frozen %c", freeze_letter(m, k));
	snprintf(buf, n, "%s%s%s%s%s%s%s%s%s", r->version, zg ? ", " : "",
	         zg ? (strcmp(r->zero_grad, "none") == 0 ? "set_to_none" : "zeros") : "", oi ? ", " : "",
	         oi ? r->optim_impl : "", at ? ", " : "", at ? r->attn : "", fz_of, k_of);
	return buf;
}

static const char *version_name(const struct report_torch_model *m, size_t k, char *buf, size_t n)
{
	char l[96];
	snprintf(buf, n, "PyTorch %s", report_torch_label(m, k, l, sizeof l));
	return buf;
}

/* "ln_f" from "bwd:ln_f:start" */
static void mark_module(struct zs_buf *b, const char *mark)
{
	char m[48];
	snprintf(m, sizeof m, "%s", starts(mark, "bwd:") ? mark + 4 : mark);
	char *c = strrchr(m, ':');
	if (c != NULL)
		*c = '\0';
	zs_buf_printf(b, "\\texttt{");
	report_buf_tex(b, m);
	zs_buf_printf(b, "}");
}

/* Each run's value of class c, "1.13: x; 2.6: y". */
static void per_run(struct zs_buf *b, const struct report_torch_model *m, const double *(*pick)(const struct report_torch_run *),
                    int c)
{
	int same = 1;
	for (size_t k = 1; k < m->nruns; k++)
		same &= pick(&m->runs[k])[c] == pick(&m->runs[0])[c];
	if (same && m->nruns > 1) {
		bytes(b, pick(&m->runs[0])[c]);
		zs_buf_printf(b, " in each release");
		return;
	}
	for (size_t k = 0; k < m->nruns; k++) {
		char l[96];
		zs_buf_printf(b, "%s", k ? "; " : "");
		report_buf_tex(b, report_torch_label(m, k, l, sizeof l));
		zs_buf_printf(b, " ");
		bytes(b, pick(&m->runs[k])[c]);
	}
}

static const double *at_peak(const struct report_torch_run *r) { return r->cls; }

/* "WHAT PER-RUN against WHOSE BYTES": class c at each run's peak beside
 * the schedule's figure for it (whose: "the paper's"), one way for every
 * departure that has one. */
static void per_run_against(struct zs_buf *b, const struct report_torch_model *m, const char *what, int c,
                            const char *whose, double v)
{
	zs_buf_printf(b, "%s ", what);
	per_run(b, m, at_peak, c);
	zs_buf_printf(b, " against %s ", whose);
	bytes(b, v);
}

static void table(struct zs_buf *b, const struct report_torch_model *m)
{
	char v[112];
	/* scaled down to the text's width where many runs make it wider */
	zs_buf_printf(b, "\\begin{center}\\small\n\\resizebox{\\ifdim\\width>\\linewidth\\linewidth\\else\\width\\fi}{!}{"
	              "\\begin{tabular}{l r");
	for (size_t k = 0; k < m->nruns; k++)
		zs_buf_printf(b, " r");
	zs_buf_printf(b, "}\n\\hline\n\\textbf{");
	report_buf_tex(b, m->name);
	zs_buf_printf(b, "}, bytes at the peak & paper");
	for (size_t k = 0; k < m->nruns; k++)
	{
		/* the label a line per setting, so that the columns stay narrow */
		zs_buf_printf(b, " & \\begin{tabular}[b]{@{}r@{}}");
		version_name(m, k, v, sizeof v);
		for (char *part = v, *next; part != NULL; part = next) {
			next = strstr(part, ", ");
			if (next != NULL) {
				*next = '\0';
				next += 2;
			}
			report_buf_tex(b, part);
			zs_buf_printf(b, "%s", next != NULL ? "\\\\" : "");
		}
		zs_buf_printf(b, "\\end{tabular}");
	}
	zs_buf_printf(b, " \\\\\n\\hline\n");
	for (int c = 0; c < RT_NCLASSES; c++) {
		int any = m->paper_cls[c] > 0;
		for (size_t k = 0; k < m->nruns; k++)
			any |= m->runs[k].cls[c] > 0;
		if (!any)
			continue;
		zs_buf_printf(b, "%s & ", report_torch_class_title[c]);
		report_buf_grouped(b, m->paper_cls[c]);
		for (size_t k = 0; k < m->nruns; k++) {
			zs_buf_printf(b, " & ");
			report_buf_grouped(b, m->runs[k].cls[c]);
		}
		zs_buf_printf(b, " \\\\\n");
	}
	zs_buf_printf(b, "\\hline\n\\textbf{peak} & ");
	report_buf_grouped(b, m->paper_peak);
	for (size_t k = 0; k < m->nruns; k++) {
		zs_buf_printf(b, " & ");
		report_buf_grouped(b, m->runs[k].peak);
	}
	int lora = 0;
	for (size_t k = 0; k < m->nruns; k++)
		lora |= m->runs[k].lora_r > 0 && m->runs[k].level_peak > 0;
	if (lora) { /* LoRA's own paper level, the adapters trained: what its peak is judged by */
		zs_buf_printf(b, " \\\\\nits paper level (LoRA: $\\Psi_t$ trained) & --");
		for (size_t k = 0; k < m->nruns; k++) {
			const struct report_torch_run *r = &m->runs[k];
			zs_buf_printf(b, " & ");
			if (r->lora_r > 0 && r->level_peak > 0)
				report_buf_grouped(b, r->level_peak);
			else
				zs_buf_printf(b, "--");
		}
	}
	zs_buf_printf(b, " \\\\\nits phase & %s", m->paper_binding[0] ? m->paper_binding : "--");
	for (size_t k = 0; k < m->nruns; k++)
		zs_buf_printf(b, " & %s", m->runs[k].binding == RT_OPTIMIZER ? "optimizer step" : phase_key[m->runs[k].binding]);
	zs_buf_printf(b, " \\\\\nthe optimizer step's most & --");
	for (size_t k = 0; k < m->nruns; k++) {
		zs_buf_printf(b, " & ");
		report_buf_grouped(b, m->runs[k].phase_peak[RT_OPTIMIZER]);
	}
	zs_buf_printf(b, " \\\\\nbetween steps & ");
	report_buf_grouped(b, m->paper_resident);
	for (size_t k = 0; k < m->nruns; k++) {
		zs_buf_printf(b, " & ");
		report_buf_grouped(b, m->runs[k].resident);
	}
	zs_buf_printf(b, " \\\\\n\\hline\n\\end{tabular}}\n\\end{center}\n");
}

/* Dropout's kept noise: the paper keeps no mask (docs/schedule.md). */
static void dropout_item(struct zs_buf *b, const struct report_torch_model *m)
{
	int any = 0;
	for (size_t k = 0; k < m->nruns; k++)
		any |= m->runs[k].cls[RT_DROPOUT] > 0;
	if (!any) {
		zs_buf_printf(b, "\\item dropout: no noise of it is alive at the peak (the config's probabilities are 0 "
		              "or its noise is freed by then);\n");
		return;
	}
	zs_buf_printf(b, "\\item dropout, which the paper's schedule does not run (it keeps no mask): on the CPU "
	              "\\texttt{\\_dropout\\_impl} (ATen's native/Dropout.cpp) keeps a noise tensor of the input's "
	              "dtype and size for each dropout (MulBackward0's \\texttt{other}); its output is the activation "
	              "the next op keeps, counted with the other activations below: ");
	per_run(b, m, at_peak, RT_DROPOUT);
	zs_buf_printf(b, " (CUDA's fused \\texttt{native\\_dropout} would keep a bool mask, 1 byte an element; "
	              "docs/schedule.md, ``Dropout'')");
	int lora = 0;
	for (size_t k = 0; k < m->nruns; k++)
		lora |= m->runs[k].lora_r > 0 && m->runs[k].lora_dropout > 0;
	if (lora)
		zs_buf_printf(b, "; with \\texttt{--lora-dropout} above 0 LoRA's dropout on each adapter's input "
		              "(PEFT's \\texttt{lora\\_A(dropout(x))}, tuners/lora/layer.py) is among it: its noise, a copy "
		              "of the adapted layer's input's size, and its output, which lora\\_A keeps in $x$'s place "
		              "(counted with the activations below)");
	zs_buf_printf(b, ";\n");
}

/* "single-tensor", "foreach", "fused" */
static const char *adam_name(const struct report_torch_run *r)
{
	return strcmp(r->optim_impl, "single") == 0 ? "single-tensor" : r->optim_impl;
}

/* --freeze: the paper's schedule trains every parameter. */
static void frozen_item(struct zs_buf *b, const struct report_torch_model *m)
{
	int any = 0, lora = 0;
	for (size_t k = 0; k < m->nruns; k++) {
		any |= m->runs[k].freeze[0] != '\0' || m->runs[k].lora_r > 0;
		lora |= m->runs[k].lora_r > 0;
	}
	if (!any)
		return;
	zs_buf_printf(b, "\\item frozen parameters (\\texttt{--freeze}%s), where the paper's schedule trains every "
	              "parameter: a frozen one holds no gradient and no Adam state, and autograd keeps no activation "
	              "for a frozen prefix (docs/finetune.md)%s: ",
	              lora ? ", or LoRA's frozen base" : "",
	              lora ? "; LoRA's adapters are parameters of their own, trained" : "");
	per_run_against(b, m, "gradients at the peak", RT_GRAD, "the paper's", m->paper_cls[RT_GRAD]);
	zs_buf_printf(b, ", ");
	per_run_against(b, m, "Adam's m and v", RT_ADAM, "the paper's", m->paper_cls[RT_ADAM]);
	/* and each frozen or LoRA run against its own paper level, whose g
	 * and k count Ψ_t alone (the whole model's is the column's) */
	zs_buf_printf(b, "; judged by the trained parameters alone, as each run's own paper level (theory.json's "
	              "\\texttt{peak}, $g$ and $k$ over $\\Psi_t$) counts them: ");
	int first = 1;
	for (size_t k = 0; k < m->nruns; k++) {
		const struct report_torch_run *r = &m->runs[k];
		char l[96];
		if (r->trained <= 0)
			continue;
		zs_buf_printf(b, "%s", first ? "" : "; ");
		first = 0;
		report_buf_tex(b, report_torch_label(m, k, l, sizeof l));
		zs_buf_printf(b, " $\\Psi_t = ");
		report_buf_grouped(b, r->trained);
		zs_buf_printf(b, "$ of ");
		report_buf_grouped(b, r->params);
		zs_buf_printf(b, ", gradients ");
		bytes(b, r->cls[RT_GRAD]);
		zs_buf_printf(b, " against ");
		bytes(b, r->level_grad);
		zs_buf_printf(b, ", Adam's ");
		bytes(b, r->cls[RT_ADAM]);
		zs_buf_printf(b, " against ");
		bytes(b, r->level_adam);
	}
	zs_buf_printf(b, ";\n");
}

/* QLoRA's 4-bit base (--quant-base nf4): where its terms are at the peak. */
static void qlora_item(struct zs_buf *b, const struct report_torch_model *m)
{
	int any = 0;
	for (size_t k = 0; k < m->nruns; k++)
		any |= m->runs[k].nf4;
	if (!any)
		return;
	zs_buf_printf(b, "\\item QLoRA's 4-bit base (\\texttt{--quant-base nf4}; bitsandbytes 0.47.0's Linear4bit, "
	              "docs/finetune.md), which the paper's schedule does not hold: every linear layer's weight but "
	              "the output embedding's is packed two to a byte with an fp32 absmax per 64 elements (with double quantization an 8-bit "
	              "absmax, an fp32 constant per 256 blocks and the 256-entry map), its fp32 weight freed; those "
	              "storages are buffers, counted in the model's buffers below (the theory's \\texttt{peak\\_live} "
	              "groups every buffer as one, so they are not shown apart here). The weight dequantized into a "
	              "temporary of the run's dtype, in each 4-bit layer's forward and again in its backward, freed "
	              "when its product returns: ");
	per_run(b, m, at_peak, RT_DEQUANT);
	zs_buf_printf(b, " at the peak (none where the peak falls between two layers' products); PEFT's defensive "
	              "clone of the 4-bit layer's result (tuners/lora/bnb.py line 533): ");
	per_run(b, m, at_peak, RT_QCLONE);
	zs_buf_printf(b, ";\n");
}

static void departures(struct zs_buf *b, const struct report_torch_model *m)
{
	const struct report_torch_run *r0 = &m->runs[0];
	zs_buf_printf(b, "\\paragraph{");
	report_buf_tex(b, m->name);
	zs_buf_printf(b, " (seq %.0f, batch %.0f, %s head).} The paper's peak is ", m->seq, m->batch,
	              r0->tied ? "tied" : "untied");
	bytes(b, m->paper_peak);
	for (size_t k = 0; k < m->nruns; k++) {
		const struct report_torch_run *r = &m->runs[k];
		char l[96];
		zs_buf_printf(b, "; PyTorch ");
		report_buf_tex(b, report_torch_label(m, k, l, sizeof l));
		zs_buf_printf(b, "'s (zero\\_grad %s, %s Adam, %s attention",
		              strcmp(r->zero_grad, "none") == 0 ? "set\\_to\\_none" : "zeros", adam_name(r), r->attn);
		if (r->freeze[0]) {
			zs_buf_printf(b, ", \\texttt{--freeze '");
			report_buf_tex(b, r->freeze);
			zs_buf_printf(b, "'}");
		}
		if (r->grad_accum > 1)
			zs_buf_printf(b, ", %.0f micro-steps accumulated a step", r->grad_accum);
		if (r->lora_r > 0) {
			zs_buf_printf(b, ", LoRA r = %.0f over \\texttt{", r->lora_r);
			report_buf_tex(b, r->lora_targets);
			zs_buf_printf(b, "} (its base frozen%s%s)", r->nf4 ? ", 4-bit NF4" : "",
			              r->nf4 ? (r->double_quant ? " with double quantization" : " without double quantization") : "");
			if (r->lora_dropout > 0)
				zs_buf_printf(b, ", LoRA dropout %g", r->lora_dropout);
		}
		zs_buf_printf(b, ") is ");
		bytes(b, r->peak);
		/* LoRA against LoRA's own paper level (the adapters trained, g
		 * and k over Ψ_t), not the whole model's, which trains Ψ */
		if (r->lora_r > 0 && r->level_peak > 0) {
			zs_buf_printf(b, ", %.3f times its own paper level's ", r->peak / r->level_peak);
			bytes(b, r->level_peak);
			zs_buf_printf(b, " (LoRA's: the adapters trained, $\\Psi_t = ");
			report_buf_grouped(b, r->trained);
			zs_buf_printf(b, "$; %.3f times the whole model's)", r->peak / m->paper_peak);
		} else
			zs_buf_printf(b, ", %.3f times the paper's", r->peak / m->paper_peak);
		zs_buf_printf(b, ", in %s", r->binding == RT_OPTIMIZER ? "the optimizer step" : phase_key[r->binding]);
	}
	zs_buf_printf(b, ". The departures, at each one's peak:\n\\begin{itemize}\n");
	frozen_item(b, m);
	qlora_item(b, m);
	zs_buf_printf(b, "\\item the loss's buffers (the labels padded and shifted, the log-softmax "
	              "\\texttt{cross\\_entropy} keeps, its gradient and nll\\_loss's): ");
	per_run(b, m, at_peak, RT_LOSS);
	zs_buf_printf(b, ";\n");
	if (r0->tied) {
		zs_buf_printf(b, "\\item the tied head's weight gradient, held in autograd's input buffer of the token "
		              "table until the embedding's backward adds the second: ");
		per_run(b, m, at_peak, RT_TIED);
		zs_buf_printf(b, " at the peak");
		for (size_t k = 0; k < m->nruns; k++) {
			const struct report_torch_run *r = &m->runs[k], *p = k ? &m->runs[k - 1] : NULL;
			if (r->held <= 0 || (p != NULL && p->held == r->held && !strcmp(p->held_from, r->held_from) &&
			                     !strcmp(p->held_to, r->held_to)))
				continue; /* said once where the releases agree */
			zs_buf_printf(b, "; %s ", k == 0 ? "it is" : "under this release");
			bytes(b, r->held);
			zs_buf_printf(b, ", held from the start of ");
			mark_module(b, r->held_from);
			zs_buf_printf(b, "'s backward to the start of ");
			mark_module(b, r->held_to);
			zs_buf_printf(b, "'s%s", r->cls[RT_TIED] > 0 ? "" : ", after the loss's buffers are freed");
		}
		zs_buf_printf(b, ";\n");
	}
	zs_buf_printf(b, "\\item %s written op by op (the intermediates a fused kernel would not keep): ",
	              strcmp(m->runs[0].model_type, "gpt2") != 0 ? "RMSNorm" : "GELU (\\texttt{gelu\\_new})");
	per_run(b, m, at_peak, RT_OPBYOP);
	zs_buf_printf(b, ";\n");
	dropout_item(b, m);
	zs_buf_printf(b, "\\item ");
	per_run_against(b, m, "the other activations kept for backward:", RT_ACT, "the paper's", m->paper_cls[RT_ACT]);
	zs_buf_printf(b, "; ");
	per_run_against(b, m, "backward's gradients in flight:", RT_BWD, "zerosim's preallocated scratch of",
	                m->paper_cls[RT_SCRATCH]);
	zs_buf_printf(b, ";\n\\item the model's buffers, Adam's step counters and the batch, which the paper "
	              "leaves out: ");
	for (size_t k = 0; k < m->nruns; k++) {
		char l[96];
		zs_buf_printf(b, "%s", k ? "; " : "");
		report_buf_tex(b, report_torch_label(m, k, l, sizeof l));
		zs_buf_printf(b, " ");
		bytes(b, m->runs[k].cls[RT_BUFFER]);
		zs_buf_printf(b, ", ");
		bytes(b, m->runs[k].cls[RT_STEP]);
		zs_buf_printf(b, ", ");
		bytes(b, m->runs[k].cls[RT_INPUT]);
	}
	zs_buf_printf(b, ";\n\\item the optimizer's temporaries, which the paper has none of, at the optimizer "
	              "step (its most beside it):");
	for (size_t k = 0; k < m->nruns; k++) {
		const struct report_torch_run *r = &m->runs[k];
		char l[96];
		zs_buf_printf(b, "%s ", k ? ";" : "");
		report_buf_tex(b, report_torch_label(m, k, l, sizeof l));
		zs_buf_printf(b, " (%s Adam) ", adam_name(r));
		bytes(b, r->opt_cls[RT_OPTIM]);
		zs_buf_printf(b, " (");
		bytes(b, r->phase_peak[RT_OPTIMIZER]);
		zs_buf_printf(b, ", %s the peak)", r->binding == RT_OPTIMIZER ? "which is" : "below");
	}
	zs_buf_printf(b, ";\n");
	/* set_to_none: two runs of the model that differ in zero_grad */
	for (size_t k = 0; k < m->nruns; k++)
		for (size_t j = 0; j < m->nruns; j++) {
			const struct report_torch_run *z = &m->runs[k], *n = &m->runs[j];
			if (strcmp(z->zero_grad, "zeros") != 0 || strcmp(n->zero_grad, "none") != 0)
				continue;
			zs_buf_printf(b, "\\item \\texttt{zero\\_grad(set\\_to\\_none=True)} (%s's default) frees the "
			              "gradients between steps: %s holds ", n->version, n->version);
			bytes(b, n->resident);
			zs_buf_printf(b, " there against %s's ", z->version);
			bytes(b, z->resident);
			zs_buf_printf(b, " (the gradients' ");
			bytes(b, z->resident_grads - n->resident_grads);
			zs_buf_printf(b, "); at the peak %s holds ", n->version);
			bytes(b, n->cls[RT_GRAD]);
			zs_buf_printf(b, " of gradients (backward makes them as it goes) against %s's ", z->version);
			bytes(b, z->cls[RT_GRAD]);
			zs_buf_printf(b, ";\n");
		}
	zs_buf_printf(b, "\\end{itemize}\n");
}

/* The attention the runs follow: "eager attention" when every run's is
 * eager, else each run's as its text names it. */
static const char *attention(const struct report_torch *t)
{
	for (size_t i = 0; i < t->n; i++)
		for (size_t k = 0; k < t->models[i].nruns; k++)
			if (strcmp(t->models[i].runs[k].attn, "eager") != 0)
				return "eager attention or SDPA, as each run names it";
	return "eager attention";
}

static int write_tex(const struct report_torch *t, const char *out, char **cause)
{
	struct zs_buf b = {0};
	zs_buf_printf(&b,
		"%% torch.tex, written by zerosim report from the plain loop's theory.json files.\n"
		"\\clearpage\n\\section*{zerosim against PyTorch}\n"
		"The paper's schedule (\\texttt{--framework paper}) is what zerosim idealises; the plain PyTorch loop "
		"(\\texttt{--framework torch --wrapper none}) is what a user's eager PyTorch allocates training Hugging "
		"Face's modeling code on one rank in fp32, op by op: autograd's saved tensors, the loss, the tied "
		"head, \\texttt{torch.optim.Adam} and \\texttt{zero\\_grad} as each release does them (CPU variant, "
		"%s; docs/schedule.md, ``The PyTorch step''). That step, allocation by allocation, is the "
		"one \\texttt{tests/hf\\_torch.sh} holds equal to the byte to real PyTorch's own allocator "
		"(PyTorch 1.13 in \\texttt{make check}, on the issue's tiny GPT-2 and Llama; 2.6 in \\texttt{make "
		"check-torch26}); no PyTorch runs here. Below, each side's peak is broken down by what is alive "
		"there, read from the theory files (\\texttt{schedule.peak\\_live}: the live tensors grouped by the op "
		"that made them); the figure after the tables (fig11) draws the same.\n", attention(t));
	for (size_t i = 0; i < t->n; i++) {
		table(&b, &t->models[i]);
		departures(&b, &t->models[i]);
	}
	zs_buf_printf(&b,
		"\\begin{figure}[!htbp]\n\\centering\n"
		"\\includegraphics[width=\\textwidth]{figures/%s.pdf}\n"
		"\\caption{The peak of one rank by what is alive there: the paper's schedule against the plain "
		"PyTorch loop of each release, per model (fp32, one rank).}\n\\label{fig:torch}\n\\end{figure}\n",
		REPORT_FIGURE_TORCH);
	char *path = zs_asprintf("%s/%s", out, REPORT_TORCH_TEX);
	int rc = zs_buf_write(&b, path, cause);
	free(path);
	zs_buf_free(&b);
	return rc;
}

int report_torch_write(const struct report_torch *t, const char *out, char **cause)
{
	if (t->n == 0) {
		char *path = zs_asprintf("%s/%s", out, REPORT_TORCH_TEX);
		remove(path);
		free(path);
		return 0;
	}
	return write_tex(t, out, cause);
}

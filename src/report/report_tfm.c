/*
 * report_tfm — load transformers' theory.json files and write the
 * transformer section (report_tfm.h). Numbers are printed from the files;
 * what this file knows is which cause each of Korthikanti's terms is
 * exposed to, by the term's name (docs/schedule.md, "Transformers").
 */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "report/report_buf.h"
#include "report/report_classify.h"
#include "report/report_figures.h"
#include "report/report_text.h"
#include "report/report_tfm.h"
#include "util/freeze.h"
#include "util/lora.h"
#include "util/model.h"
#include "util/nf4.h"
#include "util/step.h"
#include "util/util.h"

static const char *const scheme_title[ZS_NSCHEMES] = {"DP", "ZeRO-1", "ZeRO-2", "ZeRO-3"};

/* ------------------------------------------------------------------------ */
/* Loading */

static int read_uint(const cJSON *o, const char *key, const char *where, double *out, char **cause)
{
	unsigned long long v;

	if (zs_json_uint(o, key, where, 1, 9007199254740991.0, &v, cause) < 0)
		return -1;
	*out = (double)v;
	return 0;
}

static int read_str(const cJSON *o, const char *key, const char *where, char *dst, size_t len,
                    char **cause)
{
	const char *s;

	if (zs_json_string(o, key, where, &s, cause) < 0)
		return -1;
	if (strlen(s) >= len)
		return zs_fail(cause, "%s: \"%s\" is longer than %zu characters", where, key, len - 1);
	snprintf(dst, len, "%s", s);
	return 0;
}

/* " under framework F", or nothing for the paper's. */
static const char *under(const char *framework)
{
	return strcmp(framework, "torch") == 0       ? " under framework torch"
	       : strcmp(framework, "deepspeed") == 0 ? " under framework deepspeed"
	                                              : "";
}

/* config.freeze or config.lora_r and, with either, the floors' Ψ_t
 * (trainable_params, docs/formats.md): a frozen theory.json without it is
 * an older zerosim's, whose floors counted every parameter as trained.
 * LoRA under zerosim's own step: the adapters are the trained elements,
 * the base frozen (docs/finetune.md, "LoRA under the paper's schedule");
 * the PyTorch step's LoRA is the section "zerosim against PyTorch"'s. */
static int read_freeze(const cJSON *theory, const char *path, const char *where, struct report_tfm_model *m,
                       char **cause)
{
	const cJSON *fz = m->fw.step[ZS_SJ_FREEZE], *lr = m->fw.step[ZS_SJ_LORA_R];

	m->freeze[0] = m->lora_targets[0] = '\0';
	m->lora_r = m->lora_alpha = 0;
	m->trained = m->params;
	if (fz != NULL) {
		if (!cJSON_IsString(fz) || fz->valuestring[0] == '\0' || strlen(fz->valuestring) > ZS_FREEZE_MAX)
			return zs_fail(cause, "%s: \"freeze\" is not a pattern of 1 to %d characters", where, ZS_FREEZE_MAX);
		snprintf(m->freeze, sizeof m->freeze, "%s", fz->valuestring);
	}
	if (lr != NULL && !cJSON_IsNull(lr)) {
		const char *t = cJSON_GetStringValue(m->fw.step[ZS_SJ_LORA_TARGETS]);
		const cJSON *a = m->fw.step[ZS_SJ_LORA_ALPHA];
		if (!cJSON_IsNumber(lr) || lr->valuedouble < 1 || lr->valuedouble > 65536 ||
		    lr->valuedouble != floor(lr->valuedouble) || t == NULL || t[0] == '\0' ||
		    strlen(t) > ZS_LORA_TARGETS_MAX || !cJSON_IsNumber(a) || !(a->valuedouble > 0))
			return zs_fail(cause, "%s: \"lora_r\" is not a rank with its lora_targets and a positive lora_alpha",
			               where);
		m->lora_r = lr->valuedouble;
		m->lora_alpha = a->valuedouble;
		snprintf(m->lora_targets, sizeof m->lora_targets, "%s", t);
		/* the PyTorch step's (zerosim's own refuses them) */
		const cJSON *d = m->fw.step[ZS_SJ_LORA_DROPOUT], *q = m->fw.step[ZS_SJ_QUANT_BASE];
		const cJSON *dq = m->fw.step[ZS_SJ_DOUBLE_QUANT];
		if (d != NULL && !cJSON_IsNull(d) && !(cJSON_IsNumber(d) && d->valuedouble >= 0 && d->valuedouble < 1))
			return zs_fail(cause, "%s: \"lora_dropout\" is not a probability in [0, 1)", where);
		m->lora_dropout = d != NULL && cJSON_IsNumber(d) ? d->valuedouble : 0;
		const char *qs = cJSON_GetStringValue(q);
		if (q != NULL && !cJSON_IsNull(q) && (qs == NULL || (strcmp(qs, "nf4") != 0 && strcmp(qs, "none") != 0)))
			return zs_fail(cause, "%s: \"quant_base\" is not nf4 or none", where);
		m->nf4 = qs != NULL && strcmp(qs, "nf4") == 0;
		m->double_quant = m->nf4 && cJSON_IsTrue(dq);
		/* --load-dtype bf16: the paragraph's split (embeddings, norms
		 * and head at 4 B an element) is the fp32-loaded model's */
		if (m->fw.step[ZS_SJ_LOAD_DTYPE] != NULL)
			return zs_fail(cause, "%s: \"load_dtype\": a model loaded in bf16 is not in the report yet", where);
	}
	if (!m->freeze[0] && !m->lora_r)
		return 0;
	return report_read_trained(theory, path, m->freeze[0] ? "freeze" : "lora_r", m->params, &m->trained, cause);
}

/* A frozen or LoRA run's trainable_params (and params) against its
 * config over config.model's shape: the description zerosim's own step
 * runs (util/lora.h's zs_lora_step_params: --freeze's marks, then the
 * adapters), what the theory wrote them from; a count edited by hand
 * would move every floor. */
static int check_trained(const cJSON *model, const char *path, struct report_tfm_model *m, char **cause)
{
	char where[320], *why = NULL;
	struct zs_model hf;
	struct step_params p;
	struct zs_config c;

	snprintf(where, sizeof where, "%s: config.model", path);
	if (zs_model_from_written(model, where, &hf, cause) < 0)
		return -1;
	if (m->freeze[0] && zs_freeze_check(m->freeze, &why) < 0) {
		int r = zs_fail(cause, "%s: config.freeze: %s", path, why);
		free(why);
		return r;
	}
	zs_config_defaults(&c);
	c.framework = ZS_FW_PAPER; /* the paper's and DeepSpeed's description is the same (zs_freeze_saved_spec) */
	snprintf(c.freeze, sizeof c.freeze, "%s", m->freeze);
	c.lora_r = (unsigned)m->lora_r;
	c.lora_alpha = m->lora_alpha;
	c.lora_dropout = 0;
	snprintf(c.lora_targets, sizeof c.lora_targets, "%s", strcmp(m->lora_targets, "default") == 0 ? ""
	                                                        : m->lora_targets);
	if (zs_lora_step_params(&p, &hf, &hf, &c, &why) < 0) {
		int r = zs_fail(cause, "%s: config.lora_targets: %s", path, why);
		free(why);
		return r;
	}
	uint64_t all = p.numel, trained = zs_freeze_trained(&p);
	step_params_free(&p);
	if (m->lora_r) { /* what the section names: the adapters zs_lora_step_params added */
		struct zs_lora_set ls;
		const char *t = zs_lora_targets(&hf, c.lora_targets, &why);
		step_params_build(&p, &hf);
		int bad = t == NULL || zs_lora_build(&ls, &p, &hf, c.lora_r, c.lora_targets, &why) != 0;
		step_params_free(&p);
		if (bad) {
			int r = zs_fail(cause, "%s: config.lora_targets: %s", path, why);
			free(why);
			return r;
		}
		snprintf(m->lora_resolved, sizeof m->lora_resolved, "%s", t);
		m->lora_n = (double)ls.n;
		m->lora_rsum = (double)ls.n * ls.r;
		m->lora_insum = 0;
		for (size_t i = 0; i < ls.n; i++)
			m->lora_insum += (double)ls.a[i].in;
		m->lora_frozen = (double)zs_lora_trained(&ls) - (double)trained;
		zs_lora_free(&ls);
		if (m->nf4) { /* the 4-bit base, from the same shapes the theory counted it from */
			struct nf4_base q;
			step_params_build(&p, &hf);
			nf4_base_count(&p, m->double_quant, &q);
			step_params_free(&p);
			m->q4_weights = (double)q.weights;
			m->q4_held = (double)q.held;
		}
	}
	if ((double)all != m->params)
		return zs_fail(cause, "%s: params %.0f is not the %llu elements of config.model's shape%s", path, m->params,
		               (unsigned long long)all, m->lora_r ? " with its adapters" : "");
	if ((double)trained != m->trained)
		return zs_fail(cause, "%s: trainable_params %.0f is not the %llu that config.%s leaves trainable of "
		               "config.model's %llu", path, m->trained, (unsigned long long)trained,
		               m->lora_r ? "lora_r" : "freeze", (unsigned long long)all);
	return 0;
}

/* The shape the causes read (report_tfm_data.h's model_type, shape):
 * config.model read back as the outputs wrote it; a mixture's (config
 * has "routing"), whose experts are not written, as its attention block
 * over a dense llama MLP of the experts' width, its experts counted from
 * config.routing where the causes are written. Unread, the causes name
 * Korthikanti's and the family's alone. */
static void read_shape(const cJSON *model, const cJSON *cfg, struct report_tfm_model *m)
{
	const cJSON *type = cJSON_GetObjectItemCaseSensitive(model, "model_type");
	char *why = NULL;

	snprintf(m->model_type, sizeof m->model_type, "%s", cJSON_IsString(type) ? type->valuestring : m->family);
	m->has_shape = zs_model_from_written(model, "config.model", &m->shape, &why) == 0;
	free(why);
	why = NULL;
	if (!m->has_shape && cJSON_GetObjectItemCaseSensitive(cfg, "routing") != NULL) {
		/* its attention's type: qwen3_moe's is qwen3's (q/k norms),
		 * TYPE_moe's TYPE's; mixtral's llama's */
		char base[32];
		size_t n = strlen(m->model_type);
		snprintf(base, sizeof base, "%s", n > 4 && strcmp(m->model_type + n - 4, "_moe") == 0 ? m->model_type : "llama");
		if (strcmp(base, "llama") != 0)
			base[n - 4] = '\0';
		cJSON *dense = cJSON_Duplicate(model, 1);
		cJSON_ReplaceItemInObjectCaseSensitive(dense, "model_type", cJSON_CreateString(base));
		m->mixture = m->has_shape = zs_model_from_written(dense, "config.model", &m->shape, &why) == 0;
		cJSON_Delete(dense);
		free(why);
		const cJSON *sh = cJSON_GetObjectItemCaseSensitive(model, "shared_expert_intermediate_size");
		if (m->mixture && cJSON_IsNumber(sh) && sh->valuedouble >= 1 && sh->valuedouble <= ZS_MODEL_MAX_FFN)
			m->shape.shared_ffn = (uint64_t)sh->valuedouble;
	}
}

static int read_model(const cJSON *theory, const char *path, struct report_tfm_model *m,
                      char **cause)
{
	const cJSON *cfg, *model, *units, *head, *flash, *layers;
	char where[320];

	snprintf(where, sizeof where, "%s: config", path);
	if (read_uint(theory, "params", path, &m->params, cause) < 0 ||
	    zs_json_object(theory, "config", path, &cfg, cause) < 0)
		return -1;
	layers = cJSON_GetObjectItemCaseSensitive(cfg, "layers");
	model = cJSON_GetObjectItemCaseSensitive(cfg, "model");
	if (!cJSON_IsObject(model) || (layers != NULL && !cJSON_IsNull(layers)))
		return zs_fail(cause, "%s is not a transformer's theory.json (config.model is not an object, "
		               "or config.layers is set): --transformer takes the output of "
		               "zerosim theory --model", path);
	struct report_train tr;
	if (report_read_train(cfg, where, &tr, cause) < 0 || read_str(cfg, "recompute", where, m->recompute,
	                                                                sizeof m->recompute, cause) < 0 ||
	    read_uint(cfg, "seq", where, &m->seq, cause) < 0 || read_uint(cfg, "batch", where, &m->batch, cause) < 0)
		return -1;
	if (report_read_framework(cfg, where, &m->fw, cause) < 0)
		return -1;
	snprintf(m->framework, sizeof m->framework, "%s", m->fw.framework); /* known names: short */
	const char *wrapper = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(cfg, "wrapper"));
	m->torch_step = wrapper != NULL && (strcmp(wrapper, "ddp") == 0 || strcmp(wrapper, "none") == 0 ||
	                                    strcmp(wrapper, "fsdp") == 0);
	m->ds_step = wrapper != NULL && strcmp(wrapper, "deepspeed") == 0;
	if (read_freeze(theory, path, where, m, cause) < 0)
		return -1;
	/* the PyTorch step's dropout, as its theory.json names it (zerosim's
	 * own step runs none, and its file names no probability) */
	static const char *const pdrop[] = {"embd_pdrop", "attn_pdrop", "resid_pdrop", "attention_dropout"};
	for (size_t i = 0; i < sizeof pdrop / sizeof pdrop[0]; i++) {
		const cJSON *p = cJSON_GetObjectItemCaseSensitive(model, pdrop[i]);
		m->dropout |= m->torch_step && cJSON_IsNumber(p) && p->valuedouble > 0;
	}
	snprintf(m->offload, sizeof m->offload, "%s", m->fw.offload != NULL ? m->fw.offload : "none");
	snprintf(m->precision, sizeof m->precision, "%s", tr.precision);
	snprintf(m->optimizer, sizeof m->optimizer, "%s", tr.optimizer);
	m->p = tr.p;
	m->g = tr.g;
	m->k = tr.k;
	if (strcmp(m->recompute, "none") != 0 && strcmp(m->recompute, "selective") != 0 &&
	    strcmp(m->recompute, "full") != 0)
		return zs_fail(cause, "%s: unknown recompute '%.40s' (none, selective, full)", where,
		               m->recompute);
	flash = cJSON_GetObjectItemCaseSensitive(cfg, "flash_attn");
	if (!cJSON_IsBool(flash))
		return zs_fail(cause, "%s: \"flash_attn\" is not true or false", where);
	m->flash = cJSON_IsTrue(flash);

	snprintf(where, sizeof where, "%s: config.model", path);
	if (read_str(model, "name", where, m->name, sizeof m->name, cause) < 0 ||
	    read_str(model, "family", where, m->family, sizeof m->family, cause) < 0 ||
	    read_uint(model, "hidden_size", where, &m->hidden, cause) < 0 ||
	    read_uint(model, "intermediate_size", where, &m->ffn, cause) < 0 ||
	    read_uint(model, "layers", where, &m->blocks, cause) < 0 ||
	    read_uint(model, "attention_heads", where, &m->heads, cause) < 0 ||
	    read_uint(model, "key_value_heads", where, &m->kv_heads, cause) < 0 ||
	    read_uint(model, "vocab_size", where, &m->vocab, cause) < 0 ||
	    zs_json_object(model, "units", where, &units, cause) < 0)
		return -1;
	/* The name reaches the LaTeX and the figures' scripts: plain names only. */
	if (m->name[0] == '\0' || strspn(m->name, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
	                                  "0123456789-_.") != strlen(m->name))
		return zs_fail(cause, "%s: \"name\" must be letters, digits, '-', '_' and '.'", where);
	if (strcmp(m->family, "gpt2") != 0 && strcmp(m->family, "llama") != 0)
		return zs_fail(cause, "%s: unknown family '%.15s' (gpt2, llama)", where, m->family);
	if (!cJSON_IsBool(cJSON_GetObjectItemCaseSensitive(model, "tie_word_embeddings")))
		return zs_fail(cause, "%s: \"tie_word_embeddings\" is not true or false", where);
	m->tied = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(model, "tie_word_embeddings"));
	read_shape(model, cfg, m);
	snprintf(where, sizeof where, "%s: config.model.units", path);
	head = cJSON_GetObjectItemCaseSensitive(units, "head");
	if (read_uint(units, "embeddings", where, &m->u_embeddings, cause) < 0 ||
	    read_uint(units, "block", where, &m->u_block, cause) < 0)
		return -1;
	m->u_head = 0;
	if (m->tied != (head == NULL || cJSON_IsNull(head)))
		return zs_fail(cause, "%s: \"head\" must be null exactly when the head is tied", where);
	if (!m->tied && read_uint(units, "head", where, &m->u_head, cause) < 0)
		return -1;
	/* The units are the model cut: the embeddings (with the final norm when
	 * tied), the blocks and the untied head add up to params. */
	if ((double)m->u_embeddings + (double)m->blocks * (double)m->u_block + (double)m->u_head != (double)m->params)
		return zs_fail(cause, "%s: the embeddings, %.0f blocks and the head add up to %.0f elements, not "
		               "params %.0f", where, (double)m->blocks,
		               (double)m->u_embeddings + (double)m->blocks * (double)m->u_block + (double)m->u_head,
		               (double)m->params);
	if ((m->freeze[0] || m->lora_r) && check_trained(model, path, m, cause) < 0)
		return -1;
	m->model = cJSON_Duplicate(model, 1);
	if (m->model == NULL)
		zs_oom(__FILE__, __LINE__);
	cJSON_DeleteItemFromObjectCaseSensitive(m->model, "units");
	return 0;
}

/* The activation terms of a row: their names are taken from the first row
 * and every row must give the same names in the same order. */
static int read_terms(const cJSON *peak, const char *where, struct report_tfm_model *m,
                      struct report_tfm_row *r, char **cause)
{
	const cJSON *acts, *c;
	double sum = 0;
	size_t i = 0;
	int first = m->term == NULL;

	if (zs_json_object(peak, "activations_breakdown", where, &acts, cause) < 0)
		return -1;
	/* As many as the file gives: a row's terms, and the first row's names. */
	r->act = zs_calloc((size_t)cJSON_GetArraySize(acts) + 1, sizeof *r->act);
	if (first)
		m->term = zs_calloc((size_t)cJSON_GetArraySize(acts) + 1, sizeof *m->term);
	cJSON_ArrayForEach(c, acts) {
		if (first) {
			m->term[i] = zs_strdup(c->string);
			m->nterms = i + 1; /* freed whatever follows */
		} else if (i >= m->nterms || strcmp(m->term[i], c->string) != 0) {
			return zs_fail(cause, "%s: activations_breakdown names other terms than the first row's",
			               where);
		}
		if (report_read_bytes(acts, c->string, where, &r->act[i], cause) < 0)
			return -1;
		sum += r->act[i++];
	}
	if (first)
		m->nterms = i;
	else if (i != m->nterms)
		return zs_fail(cause, "%s: activations_breakdown names other terms than the first row's", where);
	if (sum != r->activations)
		return zs_fail(cause, "%s: activations_breakdown sums to %.0f B, but activations_bytes is "
		               "%.0f B", where, sum, r->activations);
	return 0;
}

/* What a transformer's files may leave out of the shared readers'
 * (report_data.h): the comm bytes; DeepSpeed's zero3 gives them as a mean
 * over the steps, as the MLP's does, and so does the PyTorch step under
 * DDP and ZeroRedundancyOptimizer (--framework torch), whose first steps
 * send other bytes than the steady one (step 2 rebuilds the buckets and
 * broadcasts their sizes: docs/schedule.md, "DDP's first and second
 * steps"). */
static unsigned comm_flags(const struct report_tfm_model *m, const struct report_tfm_row *r)
{
	int mean = (strcmp(m->framework, "deepspeed") == 0 && r->run.scheme == ZS_ZERO3) ||
	           strcmp(m->framework, "torch") == 0;
	return REPORT_READ_COMM_OPTIONAL | (mean ? REPORT_READ_COMM_SHARE : 0);
}

/* A theory row, its key set by the join (report_join_rows). */
static int read_row(const cJSON *row, const char *where, void *rp, void *ctx, char **cause)
{
	struct report_tfm_model *m = ctx;
	struct report_tfm_row *r = rp;
	const cJSON *fl, *peak;
	double bd[REPORT_NCATS] = {0};
	char at[400], lab[96];

	report_run_label(r->run.scheme, r->run.world, r->run.unit, lab, sizeof lab);
	snprintf(at, sizeof at, "%s.floor", where);
	if (zs_json_object(row, "floor", where, &fl, cause) < 0 ||
	    report_read_share(fl, "resident_bytes", at, &r->run.floor[REPORT_RESIDENT], cause) < 0)
		return -1;
	snprintf(at, sizeof at, "%s.peak", where);
	if (zs_json_object(row, "peak", where, &peak, cause) < 0 ||
	    read_uint(peak, "largest_unit", at, &r->run.largest_unit, cause) < 0 ||
	    report_read_bytes(peak, "resident_bytes", at, &r->resident, cause) < 0 ||
	    report_read_share(peak, "padding_bytes", at, &r->padding, cause) < 0 ||
	    report_read_bytes(peak, "gathered_params_bytes", at, &r->gathered, cause) < 0 ||
	    report_read_bytes(peak, "full_grads_bytes", at, &r->full_grads, cause) < 0 ||
	    report_read_bytes(peak, "activations_bytes", at, &r->activations, cause) < 0 ||
	    report_read_bytes(peak, "peak_bytes", at, &r->peak, cause) < 0 ||
	    report_read_breakdown(peak, "resident_breakdown", at, lab, "resident_bytes", r->resident,
	                          bd, cause) < 0 ||
	    report_read_breakdown(peak, "peak_breakdown", at, lab, "peak_bytes", r->peak, r->peak_bd,
	                          cause) < 0 ||
	    read_terms(peak, at, m, r, cause) < 0)
		return -1;
	/* a frozen or LoRA run's paper level over Ψ_t (docs/formats.md): an
	 * older zerosim's counted every parameter as trained */
	if (m->freeze[0] || m->lora_r) {
		double pt;
		if (cJSON_GetObjectItemCaseSensitive(peak, "trainable_params") == NULL)
			return zs_fail(cause, "%s: config.%s without peak.trainable_params: a theory.json of an older "
			               "zerosim, whose paper level counts every parameter as trained; run zerosim theory "
			               "again", at, m->freeze[0] ? "freeze" : "lora_r");
		if (read_uint(peak, "trainable_params", at, &pt, cause) < 0)
			return -1;
		if (pt != m->trained)
			return zs_fail(cause, "%s: trainable_params %.0f is not the file's %.0f", at, pt, m->trained);
	}
	r->run.floor[REPORT_PEAK] = r->run.floor[REPORT_RESIDENT]; /* as the MLP's: the paper counts no transients */
	r->run.measured[REPORT_COMM] = r->run.schedule[REPORT_COMM] = -1;
	const cJSON *sc = cJSON_GetObjectItemCaseSensitive(row, "schedule");
	if (sc != NULL && !cJSON_IsNull(sc)) {
		snprintf(at, sizeof at, "%s.schedule", where);
		if (report_read_schedule(sc, at, lab, comm_flags(m, r), &r->run, cause) < 0 ||
		    (cJSON_GetObjectItemCaseSensitive(sc, "imbalance_bytes") != NULL &&
		     report_read_share(sc, "imbalance_bytes", at, &r->s_imbalance, cause) < 0))
			return -1;
	}
	/* S and P, which the padding of a departure from the floor is measured
	 * by (report_classify.h), where the schedule gives them; else Ψ/N and
	 * Ψ: no padding is named */
	r->run.shard_elements = m->params / r->run.world;
	r->run.padded_elements = m->params;
	if (sc != NULL && !cJSON_IsNull(sc) && cJSON_GetObjectItemCaseSensitive(sc, "shard_elements") != NULL &&
	    (report_read_bytes(sc, "shard_elements", at, &r->run.shard_elements, cause) < 0 ||
	     report_read_bytes(sc, "padded_elements", at, &r->run.padded_elements, cause) < 0))
		return -1;
	snprintf(at, sizeof at, "%s.peak", where);
	if (r->resident + r->gathered + r->full_grads + r->activations != r->peak)
		return zs_fail(cause, "%s: peak_bytes is not resident_bytes + gathered_params_bytes + "
		               "full_grads_bytes + activations_bytes (%s)", at, lab);
	if (r->peak_bd[REPORT_CAT_ACTIVATIONS] != r->activations)
		return zs_fail(cause, "%s: peak_breakdown.activations is not activations_bytes (%s)", at, lab);
	return 0;
}

static void free_model(struct report_tfm_model *m)
{
	for (size_t j = 0; m->rows != NULL && j < m->nrows; j++) {
		report_run_free(&m->rows[j].run);
		free(m->rows[j].act);
		free(m->rows[j].routing);
	}
	free(m->rows);
	m->rows = NULL;
	for (size_t i = 0; m->term != NULL && i < m->nterms; i++)
		free(m->term[i]);
	free(m->term);
	m->term = NULL;
	cJSON_Delete(m->model);
	m->model = NULL;
	report_moe_free(&m->moe);
}

/* The measured run's figures, into the theory row its key joined
 * (report_join_runs). */
static int read_measured_run(const cJSON *run, const char *where, void *rp, void *ctx, char **cause)
{
	struct report_tfm_model *m = ctx;
	struct report_tfm_row *r = rp;
	char lab[96];

	report_run_label(r->run.scheme, r->run.world, r->run.unit, lab, sizeof lab);
	if (report_read_measured(run, where, lab, comm_flags(m, r), &r->run, cause) < 0)
		return -1;
	r->unchecked = !r->run.has_schedule;
	r->unexplained = report_run_unexplained(&r->run);
	if (r->unexplained && report_moe_imbalance(&m->moe, run, &r->run, &r->routing))
		r->unexplained = 0;
	report_moe_keep(&m->moe, run, lab); /* fig12-moe's run: the first joined */
	return 0;
}

static struct report_join join_of(struct report_tfm_model *m)
{
	return (struct report_join){sizeof(struct report_tfm_row), read_row, read_measured_run, m, m->name};
}

/* Whether two files fine-tune the model alike (config.freeze and LoRA's
 * keys: both absent or equal): a frozen or LoRA run of a model is a model
 * of its own in the section, beside the same model trained whole. The
 * files' trees are alive while loading (report_load). */
static int same_tuning(const struct report_framework *a, const struct report_framework *b)
{
	static const int keys[] = {ZS_SJ_FREEZE, ZS_SJ_LORA_R, ZS_SJ_LORA_ALPHA, ZS_SJ_LORA_TARGETS,
	                           ZS_SJ_LORA_DROPOUT, ZS_SJ_QUANT_BASE, ZS_SJ_DOUBLE_QUANT};
	for (size_t i = 0; i < sizeof keys / sizeof *keys; i++) {
		const cJSON *x = a->step[keys[i]], *y = b->step[keys[i]];
		if ((x == NULL) != (y == NULL) || (x != NULL && !cJSON_Compare(x, y, 1)))
			return 0;
	}
	return 1;
}

int report_tfm_add(const cJSON *theory, const char *path, struct report_tfm *t, char **cause)
{
	struct report_tfm_model *m;
	const cJSON *rows;

	t->models = zs_realloc(t->models, (t->n + 1) * sizeof *t->models);
	m = &t->models[t->n];
	memset(m, 0, sizeof *m);
	m->path = path;
	if (report_json_unique(theory, path, cause) < 0 || read_model(theory, path, m, cause) < 0 ||
	    report_moe_theory(theory, path, &m->moe, cause) < 0 ||
	    zs_json_array(theory, "rows", path, &rows, cause) < 0)
		goto fail;
	for (size_t i = 0; i < t->n; i++)
		if (strcmp(t->models[i].name, m->name) == 0 && strcmp(t->models[i].precision, m->precision) == 0 &&
		    strcmp(t->models[i].framework, m->framework) == 0 && same_tuning(&t->models[i].fw, &m->fw)) {
			zs_fail(cause, "%s and %s are both %s in %s precision%s; give each model once",
			        t->models[i].path, path, m->name, m->precision, under(m->framework));
			goto fail;
		}
	if (cJSON_GetArraySize(rows) == 0) {
		zs_fail(cause, "%s holds no rows", path);
		goto fail;
	}
	const struct report_join j = join_of(m);
	void *joined = NULL;
	int rc = report_join_rows(&j, rows, path, &joined, &m->nrows, cause);
	m->rows = joined;
	if (rc < 0)
		goto fail;
	t->n++;
	return 0;
fail:
	free_model(m);
	if (t->n == 0) { /* nothing added: t is as it was, owning nothing */
		free(t->models);
		t->models = NULL;
	}
	return -1;
}

/* The first key both objects give with different values, or NULL. */
static const char *first_difference(const cJSON *a, const cJSON *b)
{
	const cJSON *x;

	cJSON_ArrayForEach(x, a) {
		const cJSON *y = cJSON_GetObjectItemCaseSensitive(b, x->string);
		if (y != NULL && !cJSON_Compare(x, y, 1))
			return x->string;
	}
	return NULL;
}

/* The measurement's settings that the params/batch/seq/recompute check
 * does not cover, against the theory's: a run of another shape (the same
 * name and Ψ with other heads or positions), optimizer or bytes, or a
 * theory of flash attention, which zerosim's own step does not run, would
 * otherwise be drawn as a departure of the code (or, without a schedule,
 * pass unchecked). Each key is compared where the measurement gives it. */
static int same_run(const struct report_tfm_model *m, const cJSON *cfg, const cJSON *model,
                    const char *path, char **cause)
{
	const cJSON *opt = cJSON_GetObjectItemCaseSensitive(cfg, "optimizer");
	const cJSON *bpp = cJSON_GetObjectItemCaseSensitive(cfg, "bytes_per_param");
	const char *key = first_difference(model, m->model);
	char where[320];
	double v[3] = {m->p, m->g, m->k};
	static const char *const bytes_key[3] = {"param", "grad", "optimizer"};

	if (m->flash && !m->torch_step) /* (the PyTorch step runs SDPA's kernels itself) */
		return zs_fail(cause, "%s models flash attention, which the engine does not run: %s is not a "
		               "measurement of it; give a theory.json without --flash-attn", m->path, path);
	if (key != NULL)
		return zs_fail(cause, "%s and %s describe different models named %s: config.model.%s differs",
		               m->path, path, m->name, key);
	if (opt != NULL && (!cJSON_IsString(opt) || strcmp(opt->valuestring, m->optimizer) != 0))
		return zs_fail(cause, "%s and %s describe different runs of %s: the optimizer differs", m->path,
		               path, m->name);
	snprintf(where, sizeof where, "%s: config.bytes_per_param", path);
	for (int i = 0; i < 3 && bpp != NULL; i++) {
		double b = 0;
		if (report_read_bytes(bpp, bytes_key[i], where, &b, cause) < 0)
			return -1;
		if (b != v[i])
			return zs_fail(cause, "%s and %s describe different runs of %s: bytes_per_param.%s differs "
			               "(%.0f, %.0f)", m->path, path, m->name, bytes_key[i], v[i], b);
	}
	return 0;
}

int report_tfm_add_measured(const cJSON *measured, const char *path, struct report_tfm *t,
                            char **cause)
{
	const cJSON *cfg, *model, *runs;
	const char *name, *precision, *recompute;
	struct report_tfm_model *m = NULL;
	double params, batch, seq;
	char where[320];
	size_t i;

	snprintf(where, sizeof where, "%s: config", path);
	if (report_json_unique(measured, path, cause) < 0 ||
	    zs_json_object(measured, "config", path, &cfg, cause) < 0)
		return -1;
	model = cJSON_GetObjectItemCaseSensitive(cfg, "model");
	if (!cJSON_IsObject(model))
		return zs_fail(cause, "%s is not a transformer's measurement (config.model is not an object): "
		               "--transformer takes the output of zerosim measure --model", path);
	if (zs_json_string(model, "name", where, &name, cause) < 0 ||
	    zs_json_string(cfg, "precision", where, &precision, cause) < 0 ||
	    zs_json_string(cfg, "recompute", where, &recompute, cause) < 0 ||
	    read_uint(cfg, "params", where, &params, cause) < 0 ||
	    read_uint(cfg, "batch", where, &batch, cause) < 0 ||
	    read_uint(cfg, "seq", where, &seq, cause) < 0)
		return -1;
	struct report_framework fw;
	if (report_read_framework(cfg, where, &fw, cause) < 0)
		return -1;
	/* the theory fine-tuned alike; else the first of the model, which
	 * report_same_framework then refuses naming the key that differs */
	for (int alike = 1; alike >= 0 && m == NULL; alike--)
		for (i = 0; i < t->n && m == NULL; i++)
			if (strcmp(t->models[i].name, name) == 0 && strcmp(t->models[i].precision, precision) == 0 &&
			    strcmp(t->models[i].framework, fw.framework) == 0 && (!alike || same_tuning(&t->models[i].fw, &fw)))
				m = &t->models[i];
	if (m == NULL)
		return zs_fail(cause, "%s measures %.64s in %.16s precision%s, but no --transformer theory.json is of "
		               "that model%s", path, name, precision, under(fw.framework),
		               strcmp(fw.framework, "paper") != 0 ? " and framework" : "");
	if (m->measured_path != NULL)
		return zs_fail(cause, "%s and %s both measure %s in %s precision%s; give each model once",
		               m->measured_path, path, m->name, m->precision, under(m->framework));
	if (report_same_framework(&m->fw, &fw, m->path, path, cause) < 0)
		return -1;
	if (params != m->params || batch != m->batch || seq != m->seq || strcmp(recompute, m->recompute) != 0)
		return zs_fail(cause, "%s and %s describe different runs of %s: params, batch, seq or "
		               "recompute differ", m->path, path, m->name);
	if (same_run(m, cfg, model, path, cause) < 0)
		return -1;
	const struct report_join j = join_of(m);
	if (zs_json_array(measured, "runs", path, &runs, cause) < 0 ||
	    report_join_runs(&j, runs, path, m->path, m->rows, m->nrows, cause) < 0)
		return -1;
	m->measured_path = path;
	return 0;
}

size_t report_tfm_unexplained(const struct report_tfm *t)
{
	size_t n = 0;

	for (size_t i = 0; i < t->n; i++)
		for (size_t j = 0; j < t->models[i].nrows; j++)
			n += (size_t)t->models[i].rows[j].unexplained + (report_host_departures(&t->models[i].rows[j].run.host) > 0);
	return n;
}

/* "gpt2-tiny zero1 N=2 unit=layer" */
static void row_label(const struct report_tfm_model *m, const struct report_tfm_row *r, char *buf, size_t len)
{
	snprintf(buf, len, "%s %s N=%u unit=%s", m->name, zs_scheme_name(r->run.scheme), r->run.world, zs_unit_name(r->run.unit));
}

size_t report_tfm_summary(const struct report_tfm *t)
{
	size_t total = 0;

	for (size_t i = 0; i < t->n; i++) {
		const struct report_tfm_model *m = &t->models[i];
		size_t measured = 0, unexplained = 0, unchecked = 0, host = 0, host_bad = 0, routed = 0;
		for (size_t j = 0; j < m->nrows; j++) {
			const struct report_tfm_row *r = &m->rows[j];
			char lab[160];
			row_label(m, r, lab, sizeof lab);
			host += (size_t)r->run.host.has;
			host_bad += (size_t)report_host_check(lab, &r->run.host);
			measured += (size_t)r->run.has_measured;
			unexplained += (size_t)r->unexplained;
			unchecked += (size_t)r->unchecked;
			routed += r->routing != NULL && !r->unexplained;
			if (r->routing != NULL) /* named, or its size beyond the routing's bound */
				fprintf(stderr, "zerosim report: %s: %s\n", lab, r->routing);
			if (r->unexplained)
				fprintf(stderr, "zerosim report: UNEXPLAINED %s %s N=%u unit=%s: measured peak %.0f B, "
				        "resident %.0f B; schedule model %.0f B, %.0f B (or a category, or the comm bytes, "
				        "differ): the engine or the theory departs from docs/schedule.md\n", m->name,
				        zs_scheme_name(r->run.scheme), r->run.world, zs_unit_name(r->run.unit), r->run.measured[REPORT_PEAK],
				        r->run.measured[REPORT_RESIDENT], r->run.schedule[REPORT_PEAK], r->run.schedule[REPORT_RESIDENT]);
		}
		int fw = strcmp(m->framework, "paper") != 0;
		printf("zerosim report: transformer %s (%s%s%s", m->name, m->precision, fw ? ", framework " : "",
		       fw ? m->framework : "");
		if (m->lora_r)
			printf(", LoRA r = %.0f on %s", m->lora_r, m->lora_resolved);
		printf("): %zu rows, %zu measured, %zu unexplained", m->nrows, measured, unexplained);
		if (unchecked > 0)
			printf(", %zu not checked (theory.json has no schedule for them)", unchecked);
		if (routed > 0)
			printf(", %zu %s", routed, report_moe_named(&m->moe));
		if (host > 0)
			printf(", host bytes of %zu offloaded runs, %zu unexplained", host, host_bad);
		printf("\n");
		total += unexplained + host_bad;
	}
	return total;
}

static int add_theory(void *t, const cJSON *theory, const char *path, char **cause)
{
	return report_tfm_add(theory, path, t, cause);
}

static int add_measured(void *t, const cJSON *measured, const char *path, char **cause)
{
	return report_tfm_add_measured(measured, path, t, cause);
}

int report_tfm_load(const char *const *paths, size_t n, struct report_tfm *t, char **cause)
{
	static const struct report_family family = {add_theory, add_measured};

	memset(t, 0, sizeof *t);
	int rc = report_load(&family, paths, NULL, n, t, cause);
	if (rc < 0)
		report_tfm_free(t);
	return rc;
}

void report_tfm_free(struct report_tfm *t)
{
	for (size_t i = 0; i < t->n; i++)
		free_model(&t->models[i]);
	free(t->models);
	t->models = NULL;
	t->n = 0;
}

/* ------------------------------------------------------------------------ */
/* Departures from the floor (report_classify.h, the MLP's rule) */

/* The model as the MLP's report_data holds what report_classify_point
 * reads: Ψ, Ψ_t, the bytes, the framework and its offload; no runs. */
static void data_of(const struct report_tfm_model *m, struct report_data *d)
{
	memset(d, 0, sizeof *d);
	d->params = m->params;
	d->trained = m->trained;
	d->batch = m->batch;
	snprintf(d->precision, sizeof d->precision, "%s", m->precision);
	snprintf(d->optimizer, sizeof d->optimizer, "%s", m->optimizer);
	snprintf(d->framework, sizeof d->framework, "%s", m->framework);
	d->ds_persist = -1;
	d->offload = strcmp(m->offload, "none") != 0;
	d->offload_params = strcmp(m->offload, "params") == 0;
	d->grad_accum = m->fw.grad_accum;
	d->p = m->p;
	d->g = m->g;
	d->k = m->k;
}

/* A measured row's resident or peak against its floor, by cause; 0 for a
 * row without a measurement or a schedule (nothing to judge it by). Its
 * unexplained is the row's (a mixture's routing may explain it). */
static int classify(const struct report_data *d, const struct report_tfm_row *r, enum report_metric m,
                    struct report_point *pt)
{
	if (!r->run.has_measured || !r->run.has_schedule)
		return 0;
	report_classify_point(d, &r->run, m, pt);
	pt->unexplained = pt->unexplained && r->unexplained;
	return 1;
}

cJSON *report_tfm_diff_json(const struct report_tfm *t)
{
	static const enum report_metric metrics[] = {REPORT_RESIDENT, REPORT_PEAK};
	cJSON *arr = cJSON_CreateArray();

	for (size_t i = 0; i < t->n; i++) {
		const struct report_tfm_model *m = &t->models[i];
		struct report_data d;
		cJSON *o = cJSON_CreateObject(), *pts;
		data_of(m, &d);
		cJSON_AddStringToObject(o, "model", m->name);
		cJSON_AddStringToObject(o, "precision", m->precision);
		cJSON_AddStringToObject(o, "framework", m->framework);
		zs_json_add_number(o, "params", m->params);
		if (m->freeze[0])
			cJSON_AddStringToObject(o, "freeze", m->freeze);
		if (m->lora_r) {
			zs_json_add_number(o, "lora_r", m->lora_r);
			cJSON_AddStringToObject(o, "lora_targets", m->lora_resolved);
		}
		if (m->freeze[0] || m->lora_r)
			zs_json_add_number(o, "trainable_params", m->trained);
		pts = cJSON_AddArrayToObject(o, "points");
		for (size_t j = 0; j < m->nrows; j++)
			for (size_t k = 0; k < sizeof metrics / sizeof metrics[0]; k++) {
				struct report_point pt;
				if (classify(&d, &m->rows[j], metrics[k], &pt))
					cJSON_AddItemToArray(pts, report_point_json(&d, &pt));
			}
		cJSON_AddItemToArray(arr, o);
	}
	return arr;
}

/* ------------------------------------------------------------------------ */
/* What the section shows */

static void grouped(struct zs_buf *b, double v)
{
	report_buf_grouped(b, v);
}

/* Decimal units (1 kB = 1000 B), the same for a whole table, so that the
 * largest value has at most four digits before the point. */
static double scale_of(double top, const char **name)
{
	*name = top < 1e7 ? "kB" : top < 1e10 ? "MB" : "GB";
	return top < 1e7 ? 1e3 : top < 1e10 ? 1e6 : 1e9;
}

static void tex(struct zs_buf *b, const char *s)
{
	report_buf_tex(b, s);
}

/* The largest unit's name, from the model's units. */
static const char *largest_name(const struct report_tfm_model *m, double largest)
{
	if (m->u_head > 0 && largest == m->u_head)
		return "the head (with the final norm)";
	if (largest == m->u_embeddings)
		return m->tied ? "the embeddings (with the final norm; the tied head gathers them again)"
		               : "the embeddings";
	if (largest == m->u_block)
		return "a block";
	return "the whole model";
}

static void units_table(const struct report_tfm_model *m, struct zs_buf *b)
{
	const enum zs_unit u = report_tfm_unit(m);
	const unsigned w = report_tfm_world(m);
	const struct report_tfm_row *z3 = report_tfm_find(m, ZS_ZERO3, w, u);
	const double largest = z3 != NULL ? z3->run.largest_unit : m->rows[0].run.largest_unit;
	struct { const char *name; double n, count; } rows[3] = {
		{m->tied ? "embeddings + final norm (tied head)" : "embeddings", m->u_embeddings, 1},
		{"block", m->u_block, m->blocks},
		{"head + final norm", m->u_head, 1},
	};

	zs_buf_printf(b, "\\begin{center}\\small\n\\begin{tabular}{lrrr}\n\\toprule\n"
	              "unit (\\texttt{--unit layer}) & elements & units & $\\times$ a block\\\\\n\\midrule\n");
	for (int i = 0; i < 3; i++) {
		if (rows[i].n == 0)
			continue;
		int big = rows[i].n == largest;
		zs_buf_printf(b, "%s%s%s & %s", big ? "\\textbf{" : "", rows[i].name, big ? "}" : "",
		              big ? "\\textbf{" : "");
		grouped(b, rows[i].n);
		zs_buf_printf(b, "%s & %.0f & %.2f\\\\\n", big ? "}" : "", rows[i].count, rows[i].n / m->u_block);
	}
	zs_buf_printf(b, "\\midrule\nall ($\\Psi$) & ");
	grouped(b, m->params);
	zs_buf_printf(b, " & & \\\\\n\\bottomrule\n\\end{tabular}\n\\end{center}\n\n");
	zs_buf_printf(b, "ZeRO-3's largest unit is %s: ", largest_name(m, largest));
	grouped(b, largest);
	zs_buf_printf(b, " elements, %.2f times a block.", largest / m->u_block);
	if (z3 != NULL)  {
		zs_buf_printf(b, " At $N = %u$ its gather is the largest transient: ", w);
		grouped(b, z3->gathered);
		zs_buf_printf(b, " B of gathered parameters and ");
		grouped(b, z3->full_grads);
		zs_buf_printf(b, " B of full gradients at the peak (\\texttt{peak.gathered\\_params\\_bytes}, "
		              "\\texttt{full\\_grads\\_bytes}).");
	}
	zs_buf_printf(b, "\n\n");
}

/* A framework's departures at the peak: the model states and buffers of
 * the schedule (the framework's) against the paper's level, by group of
 * categories (activations and scratch are the engine's tensors against
 * Korthikanti's, in the table after this one, whatever the framework). */
static void framework_departures(const struct report_tfm_model *m, struct zs_buf *b)
{
	static const struct {
		const char *name;
		enum report_cat first, last;
	} groups[] = {
		{"params", REPORT_CAT_PARAM16, REPORT_CAT_PARAM32},
		{"grads", REPORT_CAT_GRAD16, REPORT_CAT_GRAD32},
		{"optimizer state", REPORT_CAT_MASTER32, REPORT_CAT_MOMENTUM},
		{"gathered params", REPORT_CAT_GATHERED, REPORT_CAT_GATHERED},
		{"full grads", REPORT_CAT_FULL_GRADS, REPORT_CAT_FULL_GRADS},
		{"buckets", REPORT_CAT_BUCKETS, REPORT_CAT_BUCKETS},
	};
	const enum zs_unit u = report_tfm_unit(m);
	const unsigned w = report_tfm_world(m);
	int any = 0;

	if (strcmp(m->framework, "paper") == 0)
		return;
	zs_buf_printf(b, "Under framework %s the schedule column is the framework's (docs/schedule.md, "
	              "\\emph{Frameworks on the transformer}). At the peak its model states and buffers depart "
	              "from the paper's level by:", m->framework);
	for (int s = 0; s < ZS_NSCHEMES; s++) {
		const struct report_tfm_row *r = report_tfm_find(m, (enum zs_scheme)s, w, u);
		if (r == NULL || !r->run.has_schedule)
			continue;
		zs_buf_printf(b, "%s %s:", any++ ? ";" : "", scheme_title[s]);
		int named = 0;
		for (size_t g = 0; g < sizeof groups / sizeof groups[0]; g++) {
			double d = 0;
			for (int c = (int)groups[g].first; c <= (int)groups[g].last; c++)
				d += r->run.sched_peak_bd[c] - r->peak_bd[c];
			if (d == 0)
				continue;
			zs_buf_printf(b, "%s %s %s", named++ ? "," : "", groups[g].name, d > 0 ? "$+$" : "$-$");
			grouped(b, fabs(d));
			zs_buf_printf(b, " B");
		}
		if (!named)
			zs_buf_printf(b, " none");
		if (r->s_imbalance > 0) {
			zs_buf_printf(b, " (whole tensors on unequal ranks: the rank shown holds ");
			grouped(b, r->s_imbalance);
			zs_buf_printf(b, " B above the average)");
		}
	}
	zs_buf_printf(b, "%s\n\n", any ? "." : " no row of the table has a schedule.");
}

static void peak_table(const struct report_tfm_model *m, struct zs_buf *b)
{
	const enum zs_unit u = report_tfm_unit(m);
	const unsigned w = report_tfm_world(m);
	const char *unit_name;
	double top = 0, scale;
	int sched = 0, unexplained = 0, unchecked = 0;

	for (size_t i = 0; i < m->nrows; i++) {
		top = fmax(top, m->rows[i].peak);
		sched |= m->rows[i].run.has_schedule;
	}
	scale = scale_of(top, &unit_name);
	zs_buf_printf(b, "\\begin{center}\\footnotesize\n\\begin{tabular}{lrrrrrrr%sr}\n\\toprule\n"
	              "$N = %u$, unit=%s & floor & padding & gathered & full grads & activations & peak & "
	              "peak / floor%s & measured\\\\\n"
	              "(%s per rank) & (paper) & & params & & (Korthikanti) & & & %speak\\\\\n\\midrule\n",
	              sched ? "r" : "", w, zs_unit_name(u), sched ? " & schedule" : "", unit_name,
	              sched ? "peak & " : "");
	for (int s = 0; s < ZS_NSCHEMES; s++) {
		const struct report_tfm_row *r = report_tfm_find(m, (enum zs_scheme)s, w, u);
		if (r == NULL)
			continue;
		zs_buf_printf(b, "%s & %.1f & %.1f & %.1f & %.1f & %.1f & %.1f & %.2f & ", scheme_title[s],
		              r->run.floor[REPORT_RESIDENT] / scale, r->padding / scale, r->gathered / scale, r->full_grads / scale,
		              r->activations / scale, r->peak / scale, r->run.floor[REPORT_RESIDENT] > 0 ? r->peak / r->run.floor[REPORT_RESIDENT] : 0);
		if (sched && r->run.has_schedule)
			zs_buf_printf(b, "%.1f & ", r->run.schedule[REPORT_PEAK] / scale);
		else if (sched)
			zs_buf_printf(b, "--- & ");
		if (r->run.has_measured)
			zs_buf_printf(b, "%.1f%s\\\\\n", r->run.measured[REPORT_PEAK] / scale, r->unexplained ? "\\textsuperscript{u}"
			              : r->unchecked ? "\\textsuperscript{c}" : "");
		else
			zs_buf_printf(b, "not measured\\\\\n");
	}
	/* The sentences below speak of every run of the model, not only of the
	 * rows shown: one unexplained at another N must not read as none. */
	for (size_t i = 0; i < m->nrows; i++) {
		unexplained += m->rows[i].unexplained;
		unchecked += m->rows[i].unchecked;
	}
	zs_buf_printf(b, "\\bottomrule\n\\end{tabular}\n\\end{center}\n\n");
	if (sched)
		zs_buf_printf(b, "The schedule is the theory's exact level for zerosim's own transformer "
		              "(\\texttt{schedule} in theory.json): what the engine holds, predicted from the "
		              "shape. ");
	if (unexplained)
		zs_buf_printf(b, "\\textsuperscript{u}\\,\\textbf{Unexplained}: %d measured run%s of the model "
		              "differ%s from the schedule (resident, peak, a category of either, or the comm "
		              "bytes) --- a bug in the engine or the theory; \\texttt{zerosim report} lists "
		              "each on stderr. ", unexplained, unexplained == 1 ? "" : "s", unexplained == 1 ? "s" : "");
	else if (sched && !unchecked && m->measured_path != NULL)
		zs_buf_printf(b, "Every measured run of the model equals the schedule to the byte (resident, "
		              "peak, every category of both, and the comm bytes). ");
	if (unchecked)
		zs_buf_printf(b, "\\textsuperscript{c}\\,\\textbf{Not checked}: theory.json gives no schedule for "
		              "%d measured run%s of the model, so nothing predicts %s to the byte. ", unchecked,
		              unchecked == 1 ? "" : "s", unchecked == 1 ? "it" : "them");
	zs_buf_printf(b, "\n\n");
}

/* The causes of a departure from Korthikanti's formula: where the
 * engine's tensors (docs/schedule.md, "The transformer's tensors") differ
 * from what the formula counts. Each has a tag the table uses. */
enum cause {
	C_BITS, C_DROPOUT, C_SOFTMAX, C_SWIGLU, C_SOFTCAP, C_WINDOW, C_POSTNORM, C_QKNORM, C_ROUTER, C_EXPERTS,
	C_IMBALANCE, C_GQA, C_NORMSTATS, C_LOGITS, C_LOGITS_GRAD, C_UNKNOWN, C_TOKENS, NCAUSES
};

/* The bytes the description of m's block 0 (util/step.h's buffers at the
 * file's batch, sequence, precision and recompute) keeps to its backward
 * in its saved tensors [first, last] of enum step_act, or (first < 0) in
 * a mixture's routed tensors: the router's (which = 0: its probabilities,
 * choice and weights, counts and grouping), one assignment's row through
 * an expert (1), the shared expert's (2). With its shape's
 * attention soft-capped (softcap) or not. */
static double block_bytes(const struct report_tfm_model *m, int first, int last, int which, int softcap)
{
	struct zs_model s = m->shape;
	struct step_buffers b;
	double n = 0;
	enum zs_recompute rc = strcmp(m->recompute, "full") == 0 ? ZS_RECOMPUTE_FULL
	                       : strcmp(m->recompute, "selective") == 0 ? ZS_RECOMPUTE_SELECTIVE : ZS_RECOMPUTE_NONE;

	s.attn_softcap = softcap ? 1 : 0;
	if (m->mixture && m->moe.experts > 0 && m->seq * m->batch > 0) {
		s.experts = m->moe.experts;
		s.experts_per_tok = (uint64_t)(m->moe.assignments / (m->seq * m->batch) + 0.5);
	}
	if (first < 0 && s.experts == 0)
		return 0;
	step_buffers_build(&b, &s, NULL, (uint64_t)m->batch, (uint64_t)m->seq, strcmp(m->precision, "fp32") != 0, rc);
	for (size_t i = 0; i < b.n; i++) {
		const struct step_buffer *x = &b.buf[i];
		if (x->block != 0)
			continue;
		if (first >= 0 && x->role == STEP_SAVED && x->index >= (unsigned)first && x->index <= (unsigned)last)
			n += x->recomputed ? 0 : (double)(x->elements * x->esize);
		else if (first < 0 && x->role == STEP_MOE) {
			int kind = x->index >= STEP_MOE_EXPERT ? 1 : x->index >= STEP_MOE_SGU ? 2 : 0;
			if (kind == which && (kind != 1 || step_moe_expert(x) == 0))
				n += (double)(kind == 1 ? step_moe_row(&s, x) * x->esize : x->elements * x->esize);
		}
	}
	free(b.buf);
	return n;
}

/* The departures of m's block that its description holds (as bits). */
static unsigned family_causes(const struct report_tfm_model *m)
{
	unsigned c = 0;
	/* a gated MLP (gate and up, llama's family) keeps a third product;
	 * gpt2's GELU MLP is the formula's */
	if (m->shape.family == ZS_FAMILY_LLAMA && !m->mixture)
		c |= 1u << C_SWIGLU;
	if (m->shape.gemma && !m->flash) /* the tanh and the full scores, where the config sets them */
		c |= 1u << C_SOFTCAP | 1u << C_WINDOW;
	if (m->shape.gemma)
		c |= 1u << C_POSTNORM;
	if (m->shape.qk_norm)
		c |= 1u << C_QKNORM;
	if (m->mixture)
		c |= 1u << C_ROUTER | 1u << C_EXPERTS | 1u << C_IMBALANCE;
	return c;
}

/* The causes term `term` is exposed to, as bits. */
static unsigned term_causes(const struct report_tfm_model *m, const char *term)
{
	const int layer = strcmp(term, "layers") == 0 || strcmp(term, "recomputed_layer") == 0;
	unsigned c = 0;

	if (strcmp(term, "logits") != 0 && strcmp(term, "logits_grad") != 0)
		c |= 1u << C_BITS;
	if (layer) {
		c |= 1u << C_DROPOUT | 1u << C_NORMSTATS;
		if (!m->flash)
			c |= 1u << C_SOFTMAX;
		if (m->has_shape)
			c |= family_causes(m);
		else if (strcmp(m->family, "llama") == 0)
			c |= 1u << C_SWIGLU;
		if (m->kv_heads < m->heads)
			c |= 1u << C_GQA;
	} else if (strcmp(term, "embedding_dropout_mask") == 0) {
		c |= 1u << C_DROPOUT;
	} else if (strcmp(term, "logits") == 0) {
		c |= 1u << C_LOGITS;
	} else if (strcmp(term, "logits_grad") == 0) {
		c |= 1u << C_LOGITS_GRAD;
	} else if (strcmp(term, "final_norm_input") != 0 && strcmp(term, "head_input") != 0) {
		c |= 1u << C_UNKNOWN;
	}
	return c;
}

/* ": 12,345 B a block." after a cause, from its description. */
static void cause_bytes(const struct report_tfm_model *m, double bytes, struct zs_buf *b)
{
	if (!m->has_shape) {
		zs_buf_printf(b, ".");
		return;
	}
	zs_buf_printf(b, ": ");
	grouped(b, bytes);
	zs_buf_printf(b, "~B a block%s.", bytes == 0 && m->recompute[0] != 'n' ? " to the backward (recomputed)" : "");
}

/* A cause: its text, its bytes (cause_bytes) and what follows them. */
static void cause_line(const struct report_tfm_model *m, struct zs_buf *b, const char *text, double bytes,
                       const char *tail)
{
	zs_buf_printf(b, "%s", text);
	cause_bytes(m, bytes, b);
	zs_buf_printf(b, "%s", tail);
}

static void cause_text(const struct report_tfm_model *m, enum cause c, struct zs_buf *b)
{
	switch (c) {
	case C_BITS:
		if (strcmp(m->precision, "fp32") == 0)
			zs_buf_printf(b, "16- vs 32-bit tensors: the formula counts 2 bytes an element; in fp32 the "
			              "theory doubles every 2-byte term (the 1-byte masks stay) and the engine keeps "
			              "every tensor in fp32, so this "
			              "cause leaves no departure here.");
		else
			zs_buf_printf(b, "16- vs 32-bit tensors: the formula counts 2 bytes an element for every "
			              "activation; the engine, as PyTorch's autocast, keeps the matrix products' "
			              "outputs in 16 bits but the normalisation statistics, the softmax and the loss "
			              "in fp32.");
		break;
	case C_TOKENS:
		zs_buf_printf(b, "Token ids: the engine's activations also hold the rank's input tokens and "
		              "next-token targets (int32, $4sb$ bytes each), which the formula does not count.");
		break;
	case C_DROPOUT:
		zs_buf_printf(b, "%s: the formula counts a 1-byte mask after attention and after "
		              "the MLP ($2sbh$ a layer), on the scores ($as^2b$) and, for gpt2, on the "
		              "embeddings ($sbh$), in any precision; ", m->dropout ? "Dropout's noise, not a mask" :
		              "No dropout masks");
		if (!m->torch_step)
			zs_buf_printf(b, "zerosim's own step (the engine's DDP, FSDP and DeepSpeed steps) runs no "
			              "dropout, so none of them.");
		else if (!m->dropout)
			zs_buf_printf(b, "the PyTorch step runs the config's dropout, whose probabilities are 0 here: "
			              "it keeps none of them.");
		else
			zs_buf_printf(b, "the PyTorch step runs the config's dropout as the CPU's "
			              "\\texttt{\\_dropout\\_impl} does (ATen's native/Dropout.cpp), keeping for each "
			              "of probability above 0 a noise tensor of its input's dtype and size (4 bytes an "
			              "element in fp32), and none for a probability of 0.");
		break;
	case C_SOFTMAX:
		zs_buf_printf(b, "The softmax: the formula keeps the softmax ($2as^2b$) and its dropout's "
		              "output ($2as^2b$); %s", m->torch_step && m->dropout ?
		              "the PyTorch step keeps the softmax, and where the attention's dropout is above 0 "
		              "its output and noise too." : "the engine keeps the softmax only.");
		break;
	case C_SWIGLU:
		zs_buf_printf(b, "%s: the engine keeps the gate and up products ($2sbI$ elements) and their "
		              "%s product ($sbI$), $I = %.0f$, where the formula counts GELU's input and output "
		              "($4sbh$ elements each, $I = 4h$)", m->has_shape && m->shape.gemma ? "GeGLU" : "SwiGLU",
		              m->has_shape && m->shape.gemma ? "tanh-GELU" : "SiLU", m->ffn);
		cause_bytes(m, block_bytes(m, STEP_ACT_FCH, STEP_ACT_FCH_ACT, 0, 0), b);
		break;
	case C_SOFTCAP:
		cause_line(m, b, "Attention soft-capping ($c \\tanh(s/c)$ of the scores, where the config sets "
		           "\\texttt{attn\\_logit\\_softcapping}: Gemma~2's default 50, Gemma~3's none; theory.json "
		           "does not write it): the tanh of the $as^2b$ scores is one more fp32 tensor the formula "
		           "does not count", block_bytes(m, STEP_ACT_ATT_TANH, STEP_ACT_ATT_TANH, 0, 1),
		           " The final logits' soft-capping is done in place on the logits: no more bytes.");
		break;
	case C_WINDOW:
		cause_line(m, b, "Sliding windows: eager attention computes and keeps the full $s \\times s$ scores "
		           "under the windowed mask, as many as without a window", block_bytes(m, STEP_ACT_ATT,
		           STEP_ACT_ATT, 0, 0), " It saves memory only under SDPA's kernels.");
		break;
	case C_POSTNORM:
		cause_line(m, b, "Four norms (before and after attention and the MLP): the engine keeps the inputs of "
		           "the two after and their $1/\\mathrm{rms}$, which the formula does not count",
		           block_bytes(m, STEP_ACT_PROJ_OUT, STEP_ACT_PROJ_RSTD, 0, 0) +
		           block_bytes(m, STEP_ACT_DOWN_OUT, STEP_ACT_DOWN_RSTD, 0, 0), "");
		break;
	case C_QKNORM:
		cause_line(m, b, "Query and key norms (an RMSNorm over each head's $q$ and $k$): the engine keeps "
		           "their input and $1/\\mathrm{rms}$", block_bytes(m, STEP_ACT_QK_PRE, STEP_ACT_QK_RSTD, 0, 0), "");
		break;
	case C_ROUTER:
		zs_buf_printf(b, "The router: its logits' softmax ($sbE$, fp32, $E = %zu$), each token's top-$k$ "
		              "choice and routing weights, the counts and the grouping, which the formula's dense "
		              "layer has not", m->moe.experts);
		cause_bytes(m, block_bytes(m, -1, 0, 0, 0), b);
		break;
	case C_EXPERTS:
		if (m->moe.experts > 0 && m->seq * m->batch > 0)
			zs_buf_printf(b, "The experts in place of the formula's MLP: each expert's saved tensors scale "
			              "with the tokens it receives, $k \\cdot sb = %.0f$ assignments a block "
			              "(dropless), ", m->moe.assignments);
		if (m->moe.experts > 0 && m->seq * m->batch > 0) {
			grouped(b, block_bytes(m, -1, 0, 1, 0));
			zs_buf_printf(b, "~B each");
		}
		else
			zs_buf_printf(b, "The experts in place of the formula's MLP: each expert's saved tensors scale "
			              "with the tokens it receives ($k \\cdot sb$ assignments a block)");
		if (m->moe.experts > 0)
			cause_bytes(m, m->moe.assignments * block_bytes(m, -1, 0, 1, 0), b);
		else
			zs_buf_printf(b, ".");
		if (m->moe.experts > 0 && m->shape.shared_ffn > 0) {
			zs_buf_printf(b, " The shared expert and its gate (every token, $I = %llu$) keep ",
			              (unsigned long long)m->shape.shared_ffn);
			grouped(b, block_bytes(m, -1, 0, 2, 0));
			zs_buf_printf(b, "~B a block.");
		}
		break;
	case C_IMBALANCE:
		zs_buf_printf(b, "Routing imbalance: the theory's routing (\\texttt{--routing}) spreads the "
		              "assignments as it says; the measured run's router did not, and the busiest "
		              "expert sizes the backward's scratch");
		if (m->moe.token_bytes > 0)
{
			zs_buf_printf(b, " (");
			grouped(b, m->moe.token_bytes);
			zs_buf_printf(b, "~B a token of its count)");
		}
		zs_buf_printf(b, "%s", m->moe.experts > 0 ? ": the measured counts beside the theory's are in the "
		              "figure below." : ".");
		break;
	case C_GQA:
		zs_buf_printf(b, "Grouped-query attention: K and V for %.0f of the %.0f heads, smaller than the "
		              "formula's.", m->kv_heads, m->heads);
		break;
	case C_NORMSTATS:
		zs_buf_printf(b, "Normalisation statistics: %s per row, which the formula does not count.",
		              strcmp(m->family, "gpt2") == 0 ? "LayerNorm's mean and $1/\\sigma$" :
		              "RMSNorm's $1/\\mathrm{rms}$");
		break;
	case C_LOGITS:
		zs_buf_printf(b, "The logits: no departure expected: fp32 ($4sbv$ bytes) in the formula as the "
		              "theory applies it, and in the engine, which keeps them for the loss.");
		break;
	case C_LOGITS_GRAD:
		zs_buf_printf(b, "The logits' gradient: the engine overwrites the logits in place with their "
		              "softmax and then its gradient, so it holds no second $4sbv$.");
		break;
	default:
		zs_buf_printf(b, "A term this report does not know: no cause is named.");
		break;
	}
}

/* Korthikanti counts every activation at once: compared with DP's peak,
 * at the start of backward with every tensor alive (a ZeRO-3 peak may come
 * later, during a gather, when some are freed). */
static void activations_table(const struct report_tfm_model *m, struct zs_buf *b)
{
	const struct report_tfm_row *r = report_tfm_find(m, ZS_DP, report_tfm_world(m), report_tfm_unit(m));
	unsigned all = 0;
	double sum = 0;
	int zero = 0;

	if (r == NULL)
		r = &m->rows[0];
	/* Tagged (a), (b), ... in the order the causes are listed below. */
	char tag[NCAUSES];
	for (size_t i = 0; i < m->nterms; i++)
		if (r->act[i] > 0)
			all |= term_causes(m, m->term[i]);
	if (r->run.has_measured)
		all |= 1u << C_TOKENS;
	for (int k = 0, n = 0; k < NCAUSES; k++)
		tag[k] = all & 1u << k ? (char)('a' + n++) : '?';
	zs_buf_printf(b, "\\begin{center}\\small\n\\begin{tabular}{lrrl}\n\\toprule\n"
	              "Korthikanti's term & formula (B) & engine (B) & causes of departure\\\\\n\\midrule\n");
	for (size_t i = 0; i < m->nterms; i++) {
		unsigned c = term_causes(m, m->term[i]);
		const char *sep = "";
		sum += r->act[i];
		if (r->act[i] == 0) {
			zero = 1;
			continue;
		}
		zs_buf_printf(b, "\\texttt{");
		tex(b, m->term[i]);
		zs_buf_printf(b, "} & ");
		grouped(b, r->act[i]);
		zs_buf_printf(b, " & %s & ", r->run.has_measured ? "(in the total)" : "not measured");
		for (int k = 0; k < NCAUSES; k++)
			if (c & 1u << k) {
				zs_buf_printf(b, "%s(%c)", sep, tag[k]);
				sep = ", ";
			}
		zs_buf_printf(b, "%s\\\\\n", *sep ? "" : "---");
	}
	zs_buf_printf(b, "\\midrule\nall activations & ");
	grouped(b, sum);
	if (r->run.has_measured) {
		const double act = r->run.peak_bd[REPORT_CAT_ACTIVATIONS], scratch = r->run.peak_bd[REPORT_CAT_SCRATCH];
		zs_buf_printf(b, " & ");
		grouped(b, act);
		zs_buf_printf(b, " & %s ", act >= sum ? "+" : "$-$");
		grouped(b, fabs(act - sum));
		zs_buf_printf(b, " B (%+.1f\\,\\%%); (%c)\\\\\nscratch (not in the formula) & --- & ",
		              sum > 0 ? 100 * (act - sum) / sum : 0, tag[C_TOKENS]);
		grouped(b, scratch);
		zs_buf_printf(b, " & \\\\\n");
	} else {
		zs_buf_printf(b, " & not measured & \\\\\n");
	}
	zs_buf_printf(b, "\\bottomrule\n\\end{tabular}\n\\end{center}\n\n");
	if (r->run.has_measured)
		zs_buf_printf(b, "Measured at the peak of %s $N = %u$ unit=%s (\\texttt{", zs_scheme_name(r->run.scheme),
		              r->run.world, zs_unit_name(r->run.unit));
	if (r->run.has_measured) {
		tex(b, m->measured_path);
		zs_buf_printf(b, "}): measured.json gives the activations as one category, so the departure "
		              "is shown in total; its causes are named term by term. ");
	}
	if (zero) {
		const char *sep = "";
		zs_buf_printf(b, "The formula gives 0 bytes here for ");
		for (size_t i = 0; i < m->nterms; i++)
			if (r->act[i] == 0) {
				zs_buf_printf(b, "%s\\texttt{", sep);
				tex(b, m->term[i]);
				zs_buf_printf(b, "}");
				sep = ", ";
			}
		zs_buf_printf(b, ". ");
	}
	zs_buf_printf(b, "The causes, where the engine is expected to depart from the formula:\n"
	              "\\begin{itemize}\\setlength{\\itemsep}{0pt}\\small\n");
	for (int k = 0; k < NCAUSES; k++)
		if (all & 1u << k) {
			zs_buf_printf(b, "\\item[(%c)] ", tag[k]);
			cause_text(m, (enum cause)k, b);
			zs_buf_printf(b, "\n");
		}
	zs_buf_printf(b, "\\end{itemize}\n\n");
}

/* The measurement of each scheme at the table's N against its floor (a
 * frozen or LoRA run's: Ψ_t), split by report_classify.h's causes. */
static void by_cause(const struct report_tfm_model *m, const char *floor_name, struct zs_buf *b)
{
	const enum zs_unit u = report_tfm_unit(m);
	const unsigned w = report_tfm_world(m);
	struct report_data d;
	int any = 0;

	data_of(m, &d);
	for (int s = 0; s < ZS_NSCHEMES; s++) {
		const struct report_tfm_row *r = report_tfm_find(m, (enum zs_scheme)s, w, u);
		struct report_point pt[2];
		if (r == NULL || !classify(&d, r, REPORT_RESIDENT, &pt[0]) || !classify(&d, r, REPORT_PEAK, &pt[1]))
			continue;
		if (!any++)
			zs_buf_printf(b, " The measurement against the %s floor at $N = %u$, unit=%s, by cause:", floor_name, w,
			              zs_unit_name(u));
		else
			zs_buf_printf(b, ";");
		zs_buf_printf(b, " %s", scheme_title[s]);
		for (int k = 0; k < 2; k++) {
			const char *sep = "";
			zs_buf_printf(b, "%s %s %s", k ? "," : "", report_metric_name(pt[k].metric),
			              pt[k].departure >= 0 ? "$+$" : "$-$");
			grouped(b, fabs(pt[k].departure));
			zs_buf_printf(b, " B (");
			for (int c = 0; c < REPORT_NCAUSES; c++)
				if (pt[k].cause[c] != 0) {
					zs_buf_printf(b, "%s%s %s", sep, report_cause_name((enum report_cause)c),
					              pt[k].cause[c] >= 0 ? "" : "$-$");
					grouped(b, fabs(pt[k].cause[c]));
					sep = ", ";
				}
			zs_buf_printf(b, "%s)%s", *sep ? "" : "none", pt[k].unexplained ? " \\textbf{unexplained}" : "");
		}
	}
	zs_buf_printf(b, "%s\n\n", any ? "." : " No row of the table was measured against a schedule.");
}

/* A frozen run (--freeze): its pattern, Ψ_t/Ψ, which columns are the
 * frozen run's, and the measurement's departure from the frozen floor by
 * cause at the table's N (report_classify.h's causes). */
static void frozen_tex(const struct report_tfm_model *m, struct zs_buf *b)
{
	if (!m->freeze[0] || m->lora_r > 0) /* over LoRA's adapters: the LoRA paragraph names it */
		return;
	zs_buf_printf(b, "\\paragraph{A frozen run.} \\texttt{-{}-freeze ");
	tex(b, m->freeze);
	zs_buf_printf(b, "}: $\\Psi_t = ");
	grouped(b, m->trained);
	zs_buf_printf(b, "$ of $\\Psi = ");
	grouped(b, m->params);
	zs_buf_printf(b, "$ parameters trained (%.1f\\,\\%%). The floor column is the frozen run's "
	              "(docs/schedule.md, \\emph{The floors under -{}-freeze}): a frozen parameter holds its $p$ "
	              "bytes, sharded as the scheme shards params, and no $g$, no $k$: DP $p\\Psi + (g+k)\\Psi_t$, "
	              "ZeRO-1 $p\\Psi + g\\Psi_t + k\\Psi_t/N$, ZeRO-2 $p\\Psi + (g+k)\\Psi_t/N$, ZeRO-3 "
	              "$(p\\Psi + (g+k)\\Psi_t)/N$. The paper level's columns (padding, gathered params, full "
	              "grads, peak, and so peak / floor) are the frozen run's too, its grads and optimizer state "
	              "over each unit's trainable elements%s; so are the schedule and the measurement.", 100 * m->trained / m->params,
	              strcmp(m->framework, "paper") != 0 ? " (the framework's departures from that level follow "
	              "this paragraph)" : "");
	by_cause(m, "frozen", b);
}

/* A row's breakdown (the schedule's or the measurement's) summed over
 * the n categories c of one of LoRA's terms. */
static double cats(const double *bd, const enum report_cat *c, size_t n)
{
	double v = 0;
	for (size_t i = 0; i < n; i++)
		v += bd[c[i]];
	return v;
}

/* One term of LoRA's table: the schedule's and the measurement's bytes at
 * the peak of each scheme at the table's N. */
static void lora_row(const struct report_tfm_model *m, struct zs_buf *b, const char *name, const enum report_cat *c,
                     size_t n, double scale)
{
	const enum zs_unit u = report_tfm_unit(m);
	const unsigned w = report_tfm_world(m);

	zs_buf_printf(b, "%s", name);
	for (int s = 0; s < ZS_NSCHEMES; s++) {
		const struct report_tfm_row *r = report_tfm_find(m, (enum zs_scheme)s, w, u);
		if (r == NULL)
			continue;
		if (r->run.has_schedule && r->run.has_sched_peak_bd)
			zs_buf_printf(b, " & %.1f", cats(r->run.sched_peak_bd, c, n) / scale);
		else
			zs_buf_printf(b, " & ---");
		if (r->run.has_measured)
			zs_buf_printf(b, " & %.1f", cats(r->run.peak_bd, c, n) / scale);
		else
			zs_buf_printf(b, " & ---");
	}
	zs_buf_printf(b, "\\\\\n");
}

/* A LoRA run under zerosim's own step (config.lora_r; docs/finetune.md,
 * "LoRA under the paper's schedule"): the adapters the description
 * holds, Ψ_t, the floor it is judged by, and each fine-tuning term at the
 * peak, the schedule beside the measurement, by the tracker's categories:
 * the frozen base holds params only, so the grads and optimizer state are
 * the adapters' alone; the params are the base's and the adapters' (the
 * measurement does not split them by tensor: the split is the
 * description's); the adapters' saved x·Aᵀ are activations and the
 * backward's [B·T, r] scratch is scratch. Then the departures by cause. */
static void lora_tex(const struct report_tfm_model *m, struct zs_buf *b)
{
	static const enum report_cat params[] = {REPORT_CAT_PARAM16, REPORT_CAT_PARAM32};
	static const enum report_cat grads[] = {REPORT_CAT_GRAD16, REPORT_CAT_GRAD32};
	static const enum report_cat optim[] = {REPORT_CAT_MASTER32, REPORT_CAT_ADAM_M, REPORT_CAT_ADAM_V,
	                                        REPORT_CAT_MOMENTUM};
	static const enum report_cat trans[] = {REPORT_CAT_GATHERED, REPORT_CAT_FULL_GRADS, REPORT_CAT_BUCKETS,
	                                        REPORT_CAT_UNKNOWN};
	static const enum report_cat acts[] = {REPORT_CAT_ACTIVATIONS};
	static const enum report_cat scratch[] = {REPORT_CAT_SCRATCH};
	static const enum report_cat all[] = {REPORT_CAT_PARAM16, REPORT_CAT_PARAM32, REPORT_CAT_GRAD16,
	                                      REPORT_CAT_GRAD32, REPORT_CAT_MASTER32, REPORT_CAT_ADAM_M,
	                                      REPORT_CAT_ADAM_V, REPORT_CAT_MOMENTUM, REPORT_CAT_GATHERED,
	                                      REPORT_CAT_FULL_GRADS, REPORT_CAT_ACTIVATIONS, REPORT_CAT_SCRATCH,
	                                      REPORT_CAT_BUCKETS, REPORT_CAT_UNKNOWN};
	const enum zs_unit u = report_tfm_unit(m);
	const unsigned w = report_tfm_world(m);
	const char *unit_name;
	double top = 0, bt = m->batch * m->seq;
	int ncols = 0;

	if (!m->lora_r)
		return;
	zs_buf_printf(b, "\\paragraph{A LoRA run.} \\texttt{-{}-lora-r %.0f -{}-lora-alpha %g} over \\texttt{",
	              m->lora_r, m->lora_alpha);
	tex(b, m->lora_resolved);
	const int own = !m->torch_step && !m->ds_step; /* zerosim's own step, else the PyTorch step's */
	zs_buf_printf(b, "}%s: %.0f adapters, each a trained lora\\_A $[r, \\mathit{in}]$ and lora\\_B "
	              "$[\\mathit{out}, r]$ beside its frozen base layer%s (PEFT's LoraLayer; docs/finetune.md, "
	              "\\emph{%s}). $\\Psi_t = ", strcmp(m->lora_targets, "default") == 0 ?
	              " (PEFT's default for the family)" : "", m->lora_n,
	              m->nf4 ? (m->double_quant ? ", 4-bit NF4 with double quantization" : ", 4-bit NF4") : "",
	              own ? "LoRA under the paper's schedule" : "What zerosim predicts for LoRA");
	grouped(b, m->trained);
	zs_buf_printf(b, "$ (PEFT's count $\\sum r(\\mathit{in}+\\mathit{out})$) of $\\Psi = ");
	grouped(b, m->params);
	zs_buf_printf(b, "$ (%.2f\\,\\%%; the base's ", 100 * m->trained / m->params);
	grouped(b, m->params - m->trained - m->lora_frozen);
	if (m->lora_frozen > 0) { /* --freeze over the adapters */
		zs_buf_printf(b, " and $F = ");
		grouped(b, m->lora_frozen);
		zs_buf_printf(b, "$ of the adapters', those \\texttt{-{}-freeze ");
		tex(b, m->freeze);
		zs_buf_printf(b, "} names,");
	}
	zs_buf_printf(b, " frozen). The floor column is the frozen run's with the adapters as $\\Psi_t$ "
	              "(docs/schedule.md, \\emph{The floors under -{}-freeze}): the base holds its $p$ bytes an "
	              "element and no $g$, no $k$; only the adapters carry grads and optimizer state: DP $p\\Psi + "
	              "(g+k)\\Psi_t$, ZeRO-1 $p\\Psi + g\\Psi_t + k\\Psi_t/N$, ZeRO-2 $p\\Psi + (g+k)\\Psi_t/N$, "
	              "ZeRO-3 $(p\\Psi + (g+k)\\Psi_t)/N$; so are the paper level's columns, the schedule and the "
	              "measurement. The fine-tuning terms at the peak, by the tracker's categories (the schedule, "
	              "then the measurement):\n\n");
	for (int s = 0; s < ZS_NSCHEMES; s++) {
		const struct report_tfm_row *r = report_tfm_find(m, (enum zs_scheme)s, w, u);
		if (r == NULL)
			continue;
		ncols++;
		top = fmax(top, fmax(r->run.has_measured ? r->run.measured[REPORT_PEAK] : 0,
		                     r->run.has_schedule ? r->run.schedule[REPORT_PEAK] : 0));
	}
	if (ncols == 0)
		return;
	double scale = scale_of(top, &unit_name);
	zs_buf_printf(b, "\\begin{center}\\footnotesize\n\\begin{tabular}{l");
	for (int i = 0; i < ncols; i++)
		zs_buf_printf(b, "rr");
	zs_buf_printf(b, "}\n\\toprule\n$N = %u$, unit=%s", w, zs_unit_name(u));
	for (int s = 0; s < ZS_NSCHEMES; s++)
		if (report_tfm_find(m, (enum zs_scheme)s, w, u) != NULL)
			zs_buf_printf(b, " & \\multicolumn{2}{c}{%s}", scheme_title[s]);
	zs_buf_printf(b, "\\\\\n(%s per rank at the peak)", unit_name);
	for (int i = 0; i < ncols; i++)
		zs_buf_printf(b, " & schedule & measured");
	zs_buf_printf(b, "\\\\\n\\midrule\n");
	lora_row(m, b, "params: the frozen base's and the adapters'", params, sizeof params / sizeof *params, scale);
	lora_row(m, b, "the adapters' grads", grads, sizeof grads / sizeof *grads, scale);
	lora_row(m, b, "the adapters' optimizer state", optim, sizeof optim / sizeof *optim, scale);
	lora_row(m, b, "gathered params, full grads", trans, sizeof trans / sizeof *trans, scale);
	lora_row(m, b, "activations (the adapters' $x A^\\top$ among them)", acts, 1, scale);
	lora_row(m, b, m->torch_step || m->ds_step ? "scratch" : "scratch (the adapters' $[B T, r]$ among it)", scratch, 1,
	         scale);
	zs_buf_printf(b, "\\midrule\n");
	lora_row(m, b, "peak", all, sizeof all / sizeof *all, scale);
	zs_buf_printf(b, "\\bottomrule\n\\end{tabular}\n\\end{center}\n\n");
	/* the split of the params and the adapters' saved tensors, from the
	 * description (measured.json has the categories, not the tensors) */
	if (m->nf4) { /* the 4-bit base at its stored bytes (util/nf4.h's nf4_base_count) */
		zs_buf_printf(b, "Of the params, the frozen base is $p(\\Psi - \\Psi_t - n_4%s) = ", m->lora_frozen > 0 ? " - F" : "");
		grouped(b, m->p * (m->params - m->trained - m->q4_weights - m->lora_frozen));
		zs_buf_printf(b, "$ B of embeddings, norms and head and ");
		grouped(b, m->q4_held);
		zs_buf_printf(b, " B for its $n_4 = ");
		grouped(b, m->q4_weights);
		zs_buf_printf(b, "$ 4-bit linear weights as bitsandbytes stores them (%.3f bits a weight: $n_4/2$ packed, %s; "
		              "$p n_4 = ", m->q4_weights > 0 ? m->q4_held * 8 / m->q4_weights : 0.0,
		              m->double_quant ? "an 8-bit absmax per 64, an fp32 constant per 256 blocks, the codes and maps"
		                              : "an fp32 absmax per 64 and the 16-entry code");
		grouped(b, m->p * m->q4_weights);
		zs_buf_printf(b, "$ B in fp32; the floor and the paper level hold the same)");
	} else {
		zs_buf_printf(b, "Of the params, the frozen base is $p(\\Psi - \\Psi_t%s) = ", m->lora_frozen > 0 ? " - F" : "");
		grouped(b, m->p * (m->params - m->trained - m->lora_frozen));
		zs_buf_printf(b, "$ B");
	}
	if (m->lora_frozen > 0) { /* --freeze over the adapters: F of their elements */
		zs_buf_printf(b, ", the frozen adapters' $pF = ");
		grouped(b, m->p * m->lora_frozen);
		zs_buf_printf(b, "$ B");
	}
	zs_buf_printf(b, " and the %sadapters $p\\Psi_t = ", m->lora_frozen > 0 ? "trained " : "");
	grouped(b, m->p * m->trained);
	zs_buf_printf(b, "$ B, where the scheme keeps params whole (DP, ZeRO-1, ZeRO-2; ZeRO-3 at $N = 1$); the "
	              "measurement counts them as one category, measured.json naming no tensor. ");
	if (own) {
		zs_buf_printf(b, "Each adapter saves $x A^\\top$, $[B T, r]$, for lora\\_B's weight gradient: $B T \\sum r \\cdot p = ");
		grouped(b, bt * m->lora_rsum * m->p);
		zs_buf_printf(b, "$ B over the %.0f adapters from their layer's forward to its backward, and the backward "
		              "one $[B T, r]$ scratch (", m->lora_n);
		grouped(b, bt * m->lora_r * m->p);
		zs_buf_printf(b, " B)%s; a frozen base linear keeps its input only where an adapter reads it%s. ",
		              m->lora_frozen > 0 ? "; a frozen lora\\_B's $x A^\\top$, and what an adapter of a layer "
		                                   "outside autograd's graph saves, is freed after its forward instead" : "",
		              m->lora_dropout > 0 ? " without dropout" : "");
		if (m->lora_dropout > 0) { /* util/step.c step_buffers_lora's lora_drop and lora_noise */
			zs_buf_printf(b, "LoRA's dropout (probability %g, its masks the PyTorch step's) keeps, per adapter, its output, "
			              "which lora\\_A's weight gradient reads, and its noise, $[B T, \\mathit{in}]$ each: "
			              "$2 B T \\sum \\mathit{in} \\cdot p = ", m->lora_dropout);
			grouped(b, 2 * bt * m->lora_insum * m->p);
			zs_buf_printf(b, "$ B among the activations, and the backward's $[B T, \\mathit{in}]$ scratch. ");
		}
		zs_buf_printf(b, "Not in this step: QLoRA's 4-bit base with its constants and dequantized temporary "
		              "(\\texttt{-{}-quant-base nf4} runs in the PyTorch step alone): see the PyTorch step's section "
		              "for it.");
	} else {
		zs_buf_printf(b, "Each adapted layer's lora\\_B keeps lora\\_A's output $x A^\\top$, $[B T, r]$, for its weight "
		              "gradient, among the activations (");
		if (strcmp(m->precision, "fp32") == 0) {
			zs_buf_printf(b, "$4 B T \\sum r = ");
			grouped(b, 4 * bt * m->lora_rsum);
			zs_buf_printf(b, "$ B over the %.0f adapters in fp32", m->lora_n);
		} else {
			zs_buf_printf(b, "in the autocast dtype over the %.0f adapters", m->lora_n);
		}
		zs_buf_printf(b, "), and a frozen base linear keeps its input only where something else needs it "
		              "(docs/finetune.md)");
		if (m->lora_dropout > 0)
			zs_buf_printf(b, "; LoRA's dropout (probability %g) on each adapter's input keeps its noise where the input "
			              "requires grad and its output in the input's place for lora\\_A, activations too",
			              m->lora_dropout);
		if (m->nf4)
			zs_buf_printf(b, "; the 4-bit base's storages are buffers of its parameters (the params' category), "
			              "and each use of a 4-bit layer dequantizes its weight into a temporary freed after the "
			              "product, with PEFT's defensive clone of its result");
		zs_buf_printf(b, ".");
	}
	by_cause(m, "LoRA run's", b);
}

static void model_tex(const struct report_tfm_model *m, struct zs_buf *b)
{
	zs_buf_printf(b, "\\subsection*{");
	tex(b, m->name);
	zs_buf_printf(b, " (");
	if (strcmp(m->model_type, m->family) != 0) {
		tex(b, m->model_type);
		zs_buf_printf(b, ", ");
	}
	zs_buf_printf(b, "%s%s): ", m->family, strcmp(m->model_type, m->family) != 0 ? " family" : "");
	grouped(b, m->params);
	zs_buf_printf(b, " parameters");
	if (m->lora_r) {
		zs_buf_printf(b, ", LoRA $r = %.0f$ on \\texttt{", m->lora_r);
		tex(b, m->lora_resolved);
		zs_buf_printf(b, "}");
	}
	zs_buf_printf(b, "}\n%.0f blocks, hidden %.0f, %.0f heads", m->blocks, m->hidden, m->heads);
	if (m->kv_heads < m->heads)
		zs_buf_printf(b, " (%.0f key-value)", m->kv_heads);
	zs_buf_printf(b, ", MLP width %.0f, vocabulary %.0f, %s head; %s precision, sequence %.0f, "
	              "micro-batch %.0f, recompute %s%s%s%s (\\texttt{", m->ffn, m->vocab,
	              m->tied ? "tied" : "untied", m->precision, m->seq, m->batch, m->recompute,
	              m->flash ? ", flash attention" : "", strcmp(m->framework, "paper") != 0 ? "; framework " : "",
	              strcmp(m->framework, "paper") != 0 ? m->framework : "");
	tex(b, m->path);
	zs_buf_printf(b, "}).\n\n");
	units_table(m, b);
	peak_table(m, b);
	frozen_tex(m, b);
	lora_tex(m, b);
	framework_departures(m, b);
	activations_table(m, b);
}

/* The offloaded runs: every model's host lines (the MLP's kind,
 * report_host.h), then fig9 with a panel per model. */
static int host_pick(const void *ctx, size_t i)
{
	return ((const struct report_tfm_model *)ctx)->rows[i].run.host.has;
}

static void host_line(const void *ctx, size_t i, struct zs_buf *b)
{
	const struct report_tfm_model *m = ctx;
	char lab[160];
	row_label(m, &m->rows[i], lab, sizeof lab);
	report_host_line(lab, &m->rows[i].run.host, b);
}

static size_t host_runs(const struct report_tfm *t)
{
	size_t n = 0;
	for (size_t i = 0; i < t->n; i++)
		n += report_items_count(&(struct report_items){&t->models[i], t->models[i].nrows, host_pick, host_line});
	return n;
}

static void host_tex(const struct report_tfm *t, struct zs_buf *b)
{
	if (host_runs(t) == 0)
		return;
	zs_buf_printf(b, "\\subsection*{Host memory (\\texttt{--offload})}\n"
	                 "The tables and figure above are the device's. What %zu offloaded runs hold on the host, per "
	                 "rank between steps and at its peak, and a node's ranks between steps, measured beside the "
	                 "schedule model's; every rank's figures are checked against the schedule's too (a departure "
	                 "is unexplained). ", host_runs(t));
	/* One table for every model (report_host_table, the MLP's): a run's
	 * name is its model's and its scheme's. */
	size_t n = 0, all = host_runs(t);
	struct report_host_run *runs = zs_calloc(all + 1, sizeof *runs);
	char (*name)[96] = zs_calloc(all + 1, sizeof *name);
	for (size_t i = 0; i < t->n; i++)
		for (size_t j = 0; j < t->models[i].nrows; j++) {
			const struct report_tfm_row *r = &t->models[i].rows[j];
			if (!r->run.host.has)
				continue;
			snprintf(name[n], sizeof name[n], "%s %s", t->models[i].name, zs_scheme_name(r->run.scheme));
			runs[n] = (struct report_host_run){name[n], r->run.world, r->run.unit, &r->run.host};
			n++;
		}
	report_host_table(b, runs, n);
	free(runs);
	free(name);
	zs_buf_printf(b, "\\begin{figure}[!htbp]\n\\centering\n"
	                 "\\includegraphics[width=\\textwidth]{figures/" REPORT_FIGURE_TFM_HOST ".pdf}\n"
	                 "\\caption{Host bytes per rank at the peak against $N$, the offloaded transformer runs of "
	                 "each model's shown unit: the schedule model's line, and every rank's measurement as a point "
	                 "on it (a line hidden under another holds the same bytes).}\n\\end{figure}\n");
}

void report_tfm_text(const struct report_tfm *t, struct zs_buf *b)
{
	if (host_runs(t) == 0)
		return;
	zs_buf_printf(b, "# the transformers' host bytes (--offload), per rank (per node: its ranks'), measured "
	                 "beside the schedule model's, every rank's too\n");
	for (size_t i = 0; i < t->n; i++)
		report_items(b, 0, "host", &(struct report_items){&t->models[i], t->models[i].nrows, host_pick, host_line});
}

/* fig9's panels: per model with host bytes, its runs of the shown unit. */
static int host_figure(const struct report_tfm *t, const char *figdir, char **cause)
{
	struct report_host_panel *p = zs_calloc(t->n + 1, sizeof *p);
	size_t np = 0;
	for (size_t i = 0; i < t->n; i++) {
		const struct report_tfm_model *m = &t->models[i];
		struct report_host_panel *q = &p[np];
		q->n = 0;
		q->pt = zs_calloc(m->nrows + 1, sizeof *q->pt);
		for (size_t j = 0; j < m->nrows; j++)
			if (m->rows[j].run.host.has && m->rows[j].run.unit == report_tfm_unit(m))
				q->pt[q->n++] = (struct report_host_point){m->rows[j].run.scheme, m->rows[j].run.world, &m->rows[j].run.host};
		if (q->n == 0) {
			free(q->pt);
			continue;
		}
		snprintf(q->title, sizeof q->title, "%s (%s), %s --offload %s, unit=%s", m->name, m->precision,
		         m->framework, m->offload, zs_unit_name(report_tfm_unit(m)));
		np++;
	}
	int rc = report_figures_host(REPORT_FIGURE_TFM_HOST, p, np, figdir, cause);
	for (size_t j = 0; j < np; j++)
		free(p[j].pt);
	free(p);
	return rc;
}

static void section_tex(const struct report_tfm *t, struct zs_buf *b)
{
	const int measured = report_tfm_measured(t);

	zs_buf_printf(b,
		"%% transformer.tex, written by zerosim report from the --transformer files.\n"
		"\\clearpage\n\\section*{Transformers: the peak with activations}\n"
		"Each model below is given by its \\texttt{theory.json} (\\texttt{zerosim theory --model}): "
		"the paper's floor, and the peak of its level for transformers --- the schedule's model states "
		"with padding per unit, ZeRO's transients, and the activations of Korthikanti et al.\\ (2022, "
		"Table 2 without parallelism, 2-byte activations, doubled in fp32). ");
	if (measured)
		zs_buf_printf(b,
			"Where the engine's measurement of a model was given (\\texttt{zerosim measure --model}), "
			"the figure draws what was measured at the peak, with the theory's peak as a mark, and the "
			"tables put it beside the theory; a model without one reads \\emph{not measured}. ");
	else
		zs_buf_printf(b,
			"\\textbf{The engine's measurement of these models is not in this report} (no measured.json "
			"was given for them): the column ``engine'' reads \\emph{not measured}. ");
	zs_buf_printf(b,
		"The causes named for each of Korthikanti's terms are where the engine's tensors "
		"(\\texttt{docs/schedule.md}) depart from the formula.\n\n"
		"\\begin{figure}[htbp]\n\\centering\n"
		"\\includegraphics[width=\\textwidth]{figures/" REPORT_FIGURE_TFM ".pdf}\n"
		"\\caption{The peak per rank by category at the largest $N$, one panel per model: %s. "
		"ZeRO-3's gathered parameters are its largest unit, named in the text.}\n\\end{figure}\n\n",
		measured ? "measured where the panel says so (the mark is the theory's peak with Korthikanti's "
		           "activations), else the theory" : "the theory, with Korthikanti's activations (not measured)");
	for (size_t i = 0; i < t->n; i++)
		model_tex(&t->models[i], b);
	host_tex(t, b);
	for (size_t i = 0; i < t->n; i++) /* fig12-moe: report_tfm_write's first kept mixture */
		if (t->models[i].moe.measured != NULL) {
			zs_buf_printf(b,
				"\\begin{figure}[htbp]\n\\centering\n"
				"\\includegraphics[width=\\textwidth]{figures/" REPORT_FIGURE_MOE ".pdf}\n"
				"\\caption{A mixture of experts' routing: the tokens each expert of each block received in "
				"the measured run (the mean over its ranks and steps, with the least and most), beside the "
				"theory's \\texttt{--routing %s}; where they differ, the departure is the routing "
				"imbalance.}\n\\end{figure}\n\n", t->models[i].moe.mode == REPORT_MOE_WORST ? "worst" : "balanced");
			break;
		}
}

static void remove_outputs(const char *out, const char *figdir)
{
	static const char *const ext[] = {"gp", "dat", "pdf", "png"};
	char *path = zs_asprintf("%s/%s", out, REPORT_TFM_TEX);

	remove(path);
	free(path);
	for (size_t i = 0; i < 4; i++) {
		path = zs_asprintf("%s/%s.%s", figdir, REPORT_FIGURE_TFM, ext[i]);
		remove(path);
		free(path);
	}
}

int report_tfm_write(const struct report_tfm *t, const char *out, const char *figdir, char **cause)
{
	struct zs_buf b = {0};
	char *path;
	int rc;

	if (t->n == 0) {
		remove_outputs(out, figdir);
		return report_figures_host(REPORT_FIGURE_TFM_HOST, NULL, 0, figdir, cause);
	}
	if (report_figures_tfm(t, figdir, cause) < 0 || host_figure(t, figdir, cause) < 0)
		return -1;
	/* fig12-moe: the first mixture whose measured run is kept (report_moe_keep) */
	size_t moe = 0;
	while (moe < t->n && t->models[moe].moe.measured == NULL)
		moe++;
	if (report_moe_figure(moe < t->n ? &t->models[moe].moe : &(struct report_moe){0},
	                      moe < t->n ? t->models[moe].name : "", figdir, cause) < 0)
		return -1;
	section_tex(t, &b);
	path = zs_asprintf("%s/%s", out, REPORT_TFM_TEX);
	rc = zs_buf_write(&b, path, cause);
	free(path);
	zs_buf_free(&b);
	return rc;
}

/*
 * theory_routing — a mixture of experts' routing as the theory takes it
 * (--routing balanced|worst|FILE; theory.h, docs/schedule.md "Mixtures of
 * experts"). The theory never runs the router: balanced and worst are
 * counts from the shape alone (B·T·k assignments a block, dropless, so
 * that Σ_e n_e = B·T·k either way), and a file is a measured run's record
 * of what its router chose (measured.json's "routing", docs/formats.md),
 * read as data, not by asking the engine.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "theory/theory.h"
#include "util/util.h"

static const char *const mode_names[] = {"balanced", "worst", "file"};

const char *theory_routing_name(enum theory_routing_mode m) { return mode_names[m]; }

void theory_routing_free(struct theory_routing *r)
{
	for (size_t i = 0; i < r->nruns; i++) {
		free(r->run[i].counts);
		cJSON_Delete(r->run[i].json);
	}
	free(r->run);
	free(r->torch.counts);
	cJSON_Delete(r->config);
	memset(r, 0, sizeof *r);
}

/* Where in the file a count list is, for its message: the file's name,
 * then runs[i].routing.tokens_per_expert[k][t][l]. */
struct at {
	const char *path;
	size_t run, rank, step, block;
};

/* One list of n counts (JSON numbers, whole, at most 2^53) into out
 * (NULL: only checked). */
static int count_list(const cJSON *a, size_t n, uint64_t *out, const struct at *at, char **cause)
{
	if (!cJSON_IsArray(a) || (size_t)cJSON_GetArraySize(a) != n)
		return zs_fail(cause, "%s: runs[%zu].routing.tokens_per_expert[%zu][%zu][%zu]: not a list of %zu counts "
		               "(its experts)", at->path, at->run, at->rank, at->step, at->block, n);
	size_t e = 0;
	const cJSON *v;
	cJSON_ArrayForEach(v, a) {
		if (!cJSON_IsNumber(v) || !(v->valuedouble >= 0) || v->valuedouble > 0x1p53 ||
		    v->valuedouble != (double)(uint64_t)v->valuedouble)
			return zs_fail(cause, "%s: runs[%zu].routing.tokens_per_expert[%zu][%zu][%zu][%zu]: not a whole number "
			               "of tokens", at->path, at->run, at->rank, at->step, at->block, e);
		if (out != NULL)
			out[e] = (uint64_t)v->valuedouble;
		e++;
	}
	return 0;
}

/* The run's counts, ranks x steps x blocks x E, each list checked against
 * the run's shape, into out (NULL: only checked). */
static int fill_counts(const struct theory_routing_run *run, const cJSON *tok, struct at *at, uint64_t *out,
                       char **cause)
{
	const cJSON *rank;
	at->rank = 0;
	cJSON_ArrayForEach(rank, tok) {
		if (!cJSON_IsArray(rank) || (size_t)cJSON_GetArraySize(rank) != run->steps)
			return zs_fail(cause, "%s: runs[%zu].routing.tokens_per_expert[%zu]: not %zu steps", at->path, at->run,
			               at->rank, run->steps);
		const cJSON *step, *block;
		at->step = 0;
		cJSON_ArrayForEach(step, rank) {
			if (!cJSON_IsArray(step) || (size_t)cJSON_GetArraySize(step) != run->blocks)
				return zs_fail(cause, "%s: runs[%zu].routing.tokens_per_expert[%zu][%zu]: not %zu blocks", at->path,
				               at->run, at->rank, at->step, run->blocks);
			at->block = 0;
			cJSON_ArrayForEach(block, step) {
				size_t first = ((at->rank * run->steps + at->step) * run->blocks + at->block) * run->experts;
				if (count_list(block, run->experts, out == NULL ? NULL : out + first, at, cause) < 0)
					return -1;
				at->block++;
			}
			at->step++;
		}
		at->rank++;
	}
	return 0;
}

/* Run i of the file: its key and its counts, ranks x steps x blocks x E.
 * Every message names the file (zs_json_*'s through `where`). */
static int load_run(struct theory_routing_run *run, const cJSON *mrun, const char *path, size_t i, char **cause)
{
	char *where = zs_asprintf("%s: runs[%zu]", path, i), *rwhere = zs_asprintf("%s.routing", where);
	const char *scheme, *unit;
	double world;
	unsigned long long blocks, experts, micro = 1;
	const cJSON *rt, *tok;
	int rc = -1;
	if (zs_json_string(mrun, "scheme", where, &scheme, cause) < 0 || zs_json_string(mrun, "unit", where, &unit, cause) < 0 ||
	    zs_json_number(mrun, "world", where, &world, cause) < 0)
		goto end;
	if (zs_scheme_parse(scheme, &run->scheme) < 0 || zs_unit_parse(unit, &run->unit) < 0 || world < 1 ||
	    world > ZS_MAX_WORLD || world != (double)(unsigned)world) {
		zs_fail(cause, "%s: scheme, unit or world is not one zerosim runs", where);
		goto end;
	}
	run->world = (unsigned)world;
	rt = cJSON_GetObjectItemCaseSensitive(mrun, "routing");
	if (!cJSON_IsObject(rt)) {
		zs_fail(cause, "%s has no \"routing\" (the tokens per expert a mixture's measure records)", where);
		goto end;
	}
	if (zs_json_uint(rt, "blocks", rwhere, 1, 1e6, &blocks, cause) < 0 ||
	    zs_json_uint(rt, "experts", rwhere, 1, ZS_MODEL_MAX_EXPERTS, &experts, cause) < 0 ||
	    zs_json_array(rt, "tokens_per_expert", rwhere, &tok, cause) < 0)
		goto end;
	/* "micro_steps" K (measure's under --grad-accum K > 1): each step
	 * lists its K micro-steps' blocks, micro-step major */
	if (cJSON_GetObjectItemCaseSensitive(rt, "micro_steps") != NULL &&
	    zs_json_uint(rt, "micro_steps", rwhere, 1, 1e6, &micro, cause) < 0)
		goto end;
	if (blocks * micro > 1e6) {
		zs_fail(cause, "%s: %llu blocks of %llu micro-steps: too many lists a step", rwhere, blocks, micro);
		goto end;
	}
	run->blocks = blocks * micro;
	run->micro = micro;
	run->experts = experts;
	if ((unsigned)cJSON_GetArraySize(tok) != run->world) {
		zs_fail(cause, "%s.tokens_per_expert has %d ranks, the run %u", rwhere, cJSON_GetArraySize(tok), run->world);
		goto end;
	}
	const cJSON *rank = cJSON_GetArrayItem(tok, 0);
	if (!cJSON_IsArray(rank)) {
		zs_fail(cause, "%s.tokens_per_expert[0]: not a list of steps", rwhere);
		goto end;
	}
	run->steps = (size_t)cJSON_GetArraySize(rank);
	if (run->steps == 0) {
		zs_fail(cause, "%s.tokens_per_expert has no steps", rwhere);
		goto end;
	}
	/* twice: the shape first, every list the size it says, so that the
	 * counts allocated are the numbers the file holds (a file that names
	 * more blocks or experts than it lists is refused before any
	 * allocation), then the counts */
	struct at at = {path, i, 0, 0, 0};
	if (fill_counts(run, tok, &at, NULL, cause) < 0)
		goto end;
	run->counts = zs_calloc(run->world * run->steps * run->blocks * run->experts, sizeof *run->counts);
	if (fill_counts(run, tok, &at, run->counts, cause) < 0)
		goto end;
	run->json = cJSON_Duplicate(rt, 1);
	rc = 0;
end:
	free(where);
	free(rwhere);
	return rc;
}

int theory_routing_parse(struct theory_routing *r, const char *arg, char **cause)
{
	memset(r, 0, sizeof *r);
	if (strcmp(arg, "balanced") == 0 || strcmp(arg, "worst") == 0) {
		r->mode = strcmp(arg, "worst") == 0 ? THEORY_ROUTING_WORST : THEORY_ROUTING_BALANCED;
		return 0;
	}
	cJSON *root = NULL;
	const cJSON *runs = NULL, *mrun;
	if (zs_json_load(arg, "zerosim-measured/1", &root, cause) < 0)
		return -1;
	r->mode = THEORY_ROUTING_FILE;
	r->file = arg;
	r->config = cJSON_DetachItemFromObjectCaseSensitive(root, "config");
	int rc = zs_json_array(root, "runs", arg, &runs, cause);
	if (rc == 0 && cJSON_GetArraySize(runs) == 0)
		rc = zs_fail(cause, "%s: no runs", arg);
	if (rc == 0) {
		r->run = zs_calloc((size_t)cJSON_GetArraySize(runs), sizeof *r->run);
		cJSON_ArrayForEach(mrun, runs) {
			rc = load_run(&r->run[r->nruns], mrun, arg, r->nruns, cause);
			r->nruns++;
			if (rc < 0)
				break;
		}
	}
	cJSON_Delete(root);
	if (rc < 0)
		theory_routing_free(r);
	return rc;
}

int theory_routing_per_rank(const struct theory_routing *r) { return r != NULL && r->mode == THEORY_ROUTING_FILE; }

const struct theory_routing_run *theory_routing_run_of(const struct theory_routing *r, enum zs_scheme scheme,
                                                       enum zs_unit unit, unsigned world)
{
	const struct theory_routing_run *same_world = NULL;
	for (size_t i = 0; r != NULL && i < r->nruns; i++) {
		const struct theory_routing_run *x = &r->run[i];
		if (x->world != world)
			continue;
		if (x->scheme == scheme && x->unit == unit)
			return x;
		if (same_world == NULL)
			same_world = x;
	}
	return same_world;
}

/* What decides the router's choices, so the file's run must be the
 * sweep's in it: the weights and tokens (the model's shape, --seed,
 * --batch, --seq), the logits' rounding (--precision), and from step 2 on
 * the weights the optimizer left (--optimizer, --lr, Adam's betas and
 * eps). The scheme, unit and N are the run's own keys (theory_routing_run_of);
 * --recompute and --flash-attn change what is saved, not what is routed. A
 * key the file's config lacks is not checked (a file from before it). */
static int config_check(const struct theory_routing *r, const struct zs_model *m, const struct zs_config *c,
                        uint64_t BT, char **cause)
{
	uint64_t seq = c->batch > 0 ? BT / c->batch : 0;
	const struct {
		const char *key, *option;
		int from_step2, adam_only;
		double num;
		const char *str;          /* a string key's; NULL for a number's */
		int flag;                 /* a true/false key's, num 1 or 0 */
	} decides[] = {
		{"model.hidden_size", "the model's hidden_size", 0, 0, (double)m->hidden, NULL, 0},
		{"model.intermediate_size", "the model's intermediate_size", 0, 0, (double)m->intermediate, NULL, 0},
		{"model.attention_heads", "the model's num_attention_heads", 0, 0, (double)m->heads, NULL, 0},
		{"model.key_value_heads", "the model's num_key_value_heads", 0, 0, (double)m->kv_heads, NULL, 0},
		{"model.head_dim", "the model's head_dim", 0, 0, (double)m->head_dim, NULL, 0},
		{"model.vocab_size", "the model's vocab_size", 0, 0, (double)m->vocab, NULL, 0},
		/* qwen2_moe's: its shared expert and the routing weights'
		 * renormalisation shape each block's output, the next one's
		 * router's input */
		{"model.shared_expert_intermediate_size", "the model's shared_expert_intermediate_size", 0, 0,
		 (double)m->shared_ffn, NULL, 0},
		{"model.norm_topk_prob", "the model's norm_topk_prob", 0, 0, m->topk_raw ? 0.0 : 1.0, NULL, 1},
		{"seq", "--seq", 0, 0, (double)seq, NULL, 0},
		{"batch", "--batch", 0, 0, c->batch, NULL, 0},
		{"seed", "--seed", 0, 0, (double)c->seed, NULL, 0},
		{"precision", "--precision", 0, 0, 0, zs_precision_name(c->precision), 0},
		{"optimizer", "--optimizer", 1, 0, 0, zs_optimizer_name(c->optimizer), 0},
		{"lr", "--lr", 1, 0, c->lr, NULL, 0},
		{"beta1", "--beta1", 1, 1, c->beta1, NULL, 0},
		{"beta2", "--beta2", 1, 1, c->beta2, NULL, 0},
		{"eps", "--eps", 1, 1, c->eps, NULL, 0},
	};
	for (size_t i = 0; i < sizeof decides / sizeof *decides; i++) {
		if ((decides[i].from_step2 && c->steps < 2) || (decides[i].adam_only && c->optimizer != ZS_ADAM))
			continue;
		const char *key = decides[i].key, *dot = strchr(key, '.');
		const cJSON *v = dot == NULL ? cJSON_GetObjectItemCaseSensitive(r->config, key)
		                             : cJSON_GetObjectItemCaseSensitive(
		                                   cJSON_GetObjectItemCaseSensitive(r->config, "model"), dot + 1);
		if (v == NULL || cJSON_IsNull(v))
			continue;
		const char *str = decides[i].str;
		if (str != NULL       ? !cJSON_IsString(v) || strcmp(v->valuestring, str) != 0
		    : decides[i].flag ? !cJSON_IsBool(v) || cJSON_IsTrue(v) != (decides[i].num != 0)
		                      : !cJSON_IsNumber(v) || v->valuedouble != decides[i].num) {
			char *file = cJSON_PrintUnformatted(v);
			char *here = str != NULL ? zs_asprintf("%s", str)
			             : decides[i].flag ? zs_asprintf("%s", decides[i].num != 0 ? "true" : "false")
			                               : zs_asprintf("%.17g", decides[i].num);
			zs_fail(cause, "--routing %s: its config.%s is %s, %s is %s here (the router's choices follow it)",
			        r->file, key, file != NULL ? file : "?", decides[i].option, here);
			free(file);
			free(here);
			return -1;
		}
	}
	return 0;
}

int theory_routing_check(const struct theory_routing *r, const struct zs_model *m, const struct zs_config *c,
                         uint64_t BT, char **cause)
{
	if (!theory_routing_per_rank(r))
		return 0;
	if (config_check(r, m, c, BT, cause) < 0)
		return -1;
	uint64_t want = BT * m->experts_per_tok;
	for (size_t s = 0; s < c->nschemes; s++)
		for (size_t u = 0; u < c->nunits; u++)
			for (size_t w = 0; w < c->nworld; w++) {
				const struct theory_routing_run *x = theory_routing_run_of(r, c->schemes[s], c->units[u], c->world[w]);
				if (x == NULL)
					return zs_fail(cause, "--routing %s: no run of N = %u (the file's routing is per rank)", r->file,
					               c->world[w]);
				/* under the PyTorch step's --grad-accum K each micro-step routes
				 * its own micro-batch: the run's K micro-steps' counts a step */
				size_t K = c->framework == ZS_FW_TORCH && c->grad_accum > 1 ? c->grad_accum : 1;
				if (x->micro != K)
					return zs_fail(cause, "--routing %s: %zu micro-step%s a step at N = %u, %s%zu here (each "
					               "micro-step routes its own micro-batch: give a run of the same --grad-accum)",
					               r->file, x->micro, x->micro == 1 ? "" : "s", x->world,
					               c->framework == ZS_FW_TORCH ? "--grad-accum " : "1 outside --framework torch, ",
					               K);
				if (x->experts != m->experts || x->blocks != m->layers * x->micro)
					return zs_fail(cause, "--routing %s: %zu blocks of %zu experts, %s has %llu of %llu", r->file,
					               x->blocks / x->micro, x->experts, m->name, (unsigned long long)m->layers,
					               (unsigned long long)m->experts);
				if (x->steps != c->steps)
					return zs_fail(cause, "--routing %s: %zu steps at N = %u, --steps %u", r->file, x->steps,
					               x->world, c->steps);
				for (size_t i = 0; i < (size_t)x->world * x->steps * x->blocks; i++) {
					uint64_t sum = 0;
					for (size_t e = 0; e < x->experts; e++)
						sum += x->counts[i * x->experts + e];
					if (sum != want)
						return zs_fail(cause, "--routing %s: N = %u routes %llu assignments a block, B·T·k is "
						               "%llu here (--batch, --seq or num_experts_per_tok differ)", r->file,
						               x->world, (unsigned long long)sum, (unsigned long long)want);
					/* top-k picks k distinct experts a token: one gets each token at most once */
					for (size_t e = 0; e < x->experts; e++)
						if (x->counts[i * x->experts + e] > BT)
							return zs_fail(cause, "--routing %s: N = %u sends %llu tokens to one expert of a block, "
							               "more than the B·T = %llu there are", r->file, x->world,
							               (unsigned long long)x->counts[i * x->experts + e], (unsigned long long)BT);
				}
			}
	return 0;
}

void theory_rank_counts(struct theory_rank_counts *out, const struct theory_routing *r, const struct zs_model *m,
                        uint64_t BT, enum zs_scheme scheme, enum zs_unit unit, unsigned world, unsigned k)
{
	const struct theory_routing_run *x = theory_routing_per_rank(r) ? theory_routing_run_of(r, scheme, unit, world)
	                                                                 : NULL;
	memset(out, 0, sizeof *out);
	out->blocks = m->layers;
	out->experts = m->experts;
	out->steps = 1;
	if (x != NULL && k < x->world) {
		out->steps = x->steps;
		out->blocks = x->blocks; /* (the model's, or under --grad-accum K its K micro-steps') */
		out->counts = x->counts + (size_t)k * x->steps * x->blocks * x->experts;
		return;
	}
	/* the same counts in every block */
	uint64_t E = m->experts, k_ = m->experts_per_tok, A = BT * k_;
	out->own = zs_calloc(out->blocks * E > 0 ? out->blocks * E : 1, sizeof *out->own);
	for (size_t l = 0; l < out->blocks; l++)
		for (uint64_t e = 0; e < E; e++)
			out->own[l * E + e] = r != NULL && r->mode == THEORY_ROUTING_WORST ? (e < k_ ? BT : 0)
			                      : A / E + (e < A % E ? 1 : 0);
	out->counts = out->own;
}

int theory_routing_torch(struct theory_routing *r, const struct zs_model *m, const struct zs_config *c, uint64_t BT,
                         char **cause)
{
	if (r->mode == THEORY_ROUTING_WORST && c->steps < 2)
		return zs_fail(cause, "--routing worst under --framework torch: --steps 1 is the run's first step, where "
		               "the experts worst leaves idle would never get their .grad and Adam's state (give --steps "
		               "2 or more: step 1 routes balanced, every later step worst)");
	struct theory_rank_counts bal, own;
	theory_rank_counts(&bal, NULL, m, BT, ZS_DP, ZS_UNIT_MODEL, 1, 0);
	theory_rank_counts(&own, r, m, BT, ZS_DP, ZS_UNIT_MODEL, 1, 0);
	struct theory_routing_run *x = &r->torch;
	size_t K = c->grad_accum > 1 ? c->grad_accum : 1, LE = (size_t)m->layers * m->experts;
	free(x->counts);
	*x = (struct theory_routing_run){.scheme = c->schemes[0], .unit = c->units[0], .world = 1, .steps = c->steps,
	                                 .blocks = K * m->layers, .experts = m->experts, .micro = K};
	x->counts = zs_calloc(x->steps * K * LE, sizeof *x->counts);
	for (size_t t = 0; t < x->steps; t++)
		for (size_t k = 0; k < K; k++)
			memcpy(x->counts + (t * K + k) * LE, (t == 0 ? &bal : &own)->counts, LE * sizeof *x->counts);
	theory_rank_counts_free(&bal);
	theory_rank_counts_free(&own);
	return 0;
}

/* Whether c's sweep takes run x (theory_routing_run_of) for a scheme of
 * the mask (bit 1 << scheme). */
static int run_used(const struct theory_routing *r, const struct theory_routing_run *x, const struct zs_config *c,
                    unsigned schemes)
{
	for (size_t s = 0; s < c->nschemes; s++)
		for (size_t u = 0; (schemes >> c->schemes[s] & 1) && u < c->nunits; u++)
			for (size_t w = 0; w < c->nworld; w++)
				if (theory_routing_run_of(r, c->schemes[s], c->units[u], c->world[w]) == x)
					return 1;
	return 0;
}

int theory_routing_starved(const struct theory_routing *r, const struct zs_model *m, const struct zs_config *c,
                           unsigned schemes, uint64_t BT, char *what, size_t n)
{
	for (size_t i = 0; theory_routing_per_rank(r) && i < r->nruns; i++) {
		const struct theory_routing_run *x = &r->run[i];
		if (!run_used(r, x, c, schemes))
			continue;
		size_t per_rank = x->steps * x->blocks * x->experts;
		for (size_t j = 0; j < (size_t)x->world * per_rank; j++)
			if (x->counts[j] == 0) {
				snprintf(what, n, "expert %zu of block %zu on rank %zu at step %zu of %s N = %u --unit %s",
				         j % x->experts, j / x->experts % x->blocks, j / per_rank,
				         j / (x->blocks * x->experts) % x->steps + 1, zs_scheme_name(x->scheme), x->world,
				         zs_unit_name(x->unit));
				return 1;
			}
	}
	if (theory_routing_per_rank(r))
		return 0;
	struct theory_rank_counts rc;
	theory_rank_counts(&rc, r, m, BT, ZS_DP, ZS_UNIT_MODEL, 1, 0);
	int starved = 0;
	for (size_t e = 0; e < rc.experts && !starved; e++)
		if (rc.counts[e] == 0) { /* the same counts in every block */
			snprintf(what, n, "expert %zu of every block under --routing %s", e,
			         theory_routing_name(r != NULL ? r->mode : THEORY_ROUTING_BALANCED));
			starved = 1;
		}
	theory_rank_counts_free(&rc);
	return starved;
}

void theory_rank_counts_free(struct theory_rank_counts *c)
{
	free(c->own);
	memset(c, 0, sizeof *c);
}

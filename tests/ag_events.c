/*
 * ag_events — util/autograd.c's steady step of a model as the allocator
 * sees it, for an event-by-event comparison with PyTorch
 * (tests/moe_hf_torch.sh).
 *
 * Usage: ag_events MODEL B T [OPTION=VALUE ...] [-- COUNT ...]. The step
 * of --framework torch --wrapper none (or the wrapper=W given: one rank's
 * step, ag_step_build_run's at N = 1) under zs_config's defaults and the
 * options given (command-line spellings without dashes: torch-version=1.13,
 * zero-grad=zeros, ...); a mixture's routing as COUNTs, the tokens per
 * expert, block by block (layers x experts). Writes each allocation of the
 * steady step as +BYTES and each free as -BYTES, one a line: what
 * tests/hf_torch.py --trace writes into FILE.clean for PyTorch's clean
 * step. With step=1 (first of the options), the first step's own list
 * (util/autograd.h's step1; FILE.step1); with step=2, the second's (DDP's
 * step2, its forward rebuilding the buckets; FILE.step2). With ds3=1
 * (after step=, before the options) the step is built with DeepSpeed's
 * ZeRO-3 leaf marks (util/autograd.h, ds3_leaf_marks), each written in
 * its place as its label ("ds3:NAME:fwd", ...; tests/ds3_torch.sh). With
 * ds3=saved, the same step, and in place of its events the parameters
 * whose storage a view made in forward holds into backward, where a
 * backward op reads it: NAME SHAPE STRIDE of that view transposed (the
 * saved weight.t()), one a line, what tests/ds3_saved.py lists. Exit 0, 2 on
 * bad arguments or a step zerosim refuses (its line), or with step=1 or 2
 * where that step has no list of its own.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/ag_ddp.h"
#include "util/autograd.h"
#include "util/config.h"
#include "util/model.h"
#include "util/step.h"

static int usage(const char *why)
{
	fprintf(stderr, "ag_events: %s (usage: ag_events MODEL B T [OPTION=VALUE ...] [-- COUNT ...])\n", why);
	return 2;
}

int main(int argc, char **argv)
{
	char *cause = NULL;
	struct zs_model m;
	if (argc < 4)
		return usage("too few arguments");
	if (zs_model_load(argv[1], &m, &cause) < 0)
		return usage(cause);
	uint64_t B = strtoull(argv[2], NULL, 10), T = strtoull(argv[3], NULL, 10);
	struct zs_config c;
	zs_config_defaults(&c);
	int i = 4, first = 0;
	if (i < argc && (strcmp(argv[i], "step=1") == 0 || strcmp(argv[i], "step=2") == 0)) {
		first = argv[i][5] - '0';
		i++;
	}
	int ds3 = 0;
	if (i < argc && (strcmp(argv[i], "ds3=1") == 0 || strcmp(argv[i], "ds3=saved") == 0)) {
		ds3 = argv[i][4] == '1' ? 1 : 2;
		i++;
	}
	for (; i < argc && strcmp(argv[i], "--") != 0; i++) {
		char key[64], *eq = strchr(argv[i], '=');
		if (eq == NULL || (size_t)(eq - argv[i]) >= sizeof key)
			return usage("an option is OPTION=VALUE");
		memcpy(key, argv[i], (size_t)(eq - argv[i]));
		key[eq - argv[i]] = '\0';
		if (zs_config_set(&c, key, eq + 1, &cause) < 0)
			return usage(cause);
	}
	if (zs_config_set(&c, "framework", "torch", &cause) < 0 ||
	    (!(c.given & ZS_KEY_BIT(ZS_KEY_WRAPPER)) && zs_config_set(&c, "wrapper", "none", &cause) < 0))
		return usage(cause);
	if (zs_model_fused_experts(&m, c.experts_impl == ZS_EXPERTS_EAGER, &cause) < 0)
		return usage(cause);
	size_t n = i < argc ? (size_t)(argc - i - 1) : 0;
	uint64_t *counts = n ? calloc(n, sizeof *counts) : NULL;
	for (size_t k = 0; k < n; k++)
		counts[k] = strtoull(argv[(size_t)i + 1 + k], NULL, 10);
	if (m.experts > 0 && n != m.layers * m.experts)
		return usage("a mixture takes layers x experts COUNTs");
	c.moe_counts = counts;
	struct ag_options o;
	ag_options_from_config(&o, &c, B, T);
	o.ds3_leaf_marks = ds3;
	struct step_params p;
	struct ag_step s;
	step_params_build(&p, &m);
	if (ag_step_build_run(&s, &m, &p, &o, &c, 1, &cause) < 0) {
		/* a refusal: its line, nothing left held (LeakSanitizer) */
		int rc = usage(cause);
		free(cause);
		step_params_free(&p);
		free(counts);
		return rc;
	}
	if ((first == 1 && s.step1 == NULL) || (first == 2 && s.step2 == NULL)) {
		ag_step_free(&s);
		step_params_free(&p);
		free(counts);
		return usage(first == 1 ? "step=1: this step's first step has no list of its own"
		                        : "step=2: this step's second step has no list of its own");
	}
	const struct ag_event *ev = first == 1 ? s.step1 : first == 2 ? s.step2 : s.event;
	size_t nev = first == 1 ? s.nstep1 : first == 2 ? s.nstep2 : s.nevents;
	/* ds3=saved: the tensors made in forward, numbered from its first
	 * allocation to backward's first (tensors are numbered as made) */
	uint32_t lo = UINT32_MAX, hi = UINT32_MAX;
	for (size_t k = 0; k < nev && ds3 == 2; k++) {
		const struct ag_event *e = &ev[k];
		if (e->kind == AG_EV_ALLOC && e->phase == ZS_PH_FORWARD && lo == UINT32_MAX)
			lo = e->t;
		if (e->kind == AG_EV_ALLOC && e->phase == ZS_PH_BACKWARD && hi == UINT32_MAX)
			hi = e->t;
		for (int j = 0; e->kind == AG_EV_OP && e->phase == ZS_PH_BACKWARD && j < AG_MAXIN; j++) {
			uint32_t t = e->in[j];
			if (t == AG_NONE || t < lo || t >= hi || s.tensor[t].storage == t ||
			    s.tensor[s.tensor[t].storage].role != AG_ROLE_PARAM)
				continue;
			const struct ag_tensor *x = &s.tensor[t];
			char name[256];
			step_part_name(&p, (size_t)s.tensor[x->storage].param, x->part, name, sizeof name);
			printf("%s %llux%llu %lld,%lld\n", name, (unsigned long long)x->shape[1], (unsigned long long)x->shape[0],
			       (long long)x->stride[1], (long long)x->stride[0]);
		}
	}
	for (size_t k = 0; k < nev && ds3 != 2; k++) {
		const struct ag_event *e = &ev[k];
		if ((e->kind == AG_EV_ALLOC || e->kind == AG_EV_FREE) && s.tensor[e->t].bytes > 0)
			printf("%s%llu\n", e->kind == AG_EV_FREE ? "-" : "", (unsigned long long)s.tensor[e->t].bytes);
		else if (ds3 && e->kind == AG_EV_MARK && strncmp(e->label, "ds3:", 4) == 0)
			printf("%s\n", e->label);
	}
	ag_step_free(&s);
	step_params_free(&p);
	free(counts);
	return 0;
}

/*
 * moe_model — a whole mixtral, qwen2_moe or qwen3_moe in malloc'd memory, trained by calling the
 * layers in order (tfm.h's embedding and head, tfm_moe.h's blocks): the
 * plain single-process model the tests train (test_moe.c) and hold to
 * PyTorch (moe_model_dump.c, moe_model_torch.py), as tfm_driver.h is for
 * the dense families. Not the engine's step. Only tests link it.
 */
#ifndef ZS_TESTS_MOE_MODEL_H
#define ZS_TESTS_MOE_MODEL_H

#include <stddef.h>

#include "engine/optim.h"
#include "engine/tfm.h"
#include "engine/tfm_moe.h"
#include "util/step.h"

struct moe_model {
	struct tfm_dims d;
	size_t B, T, L;
	struct step_params p;             /* the step description's layout: Hugging Face's parameters() order */
	float *w, *g, *mom, *var, *x0;    /* Ψ each; x0 (BT, d) */
	struct tfm_embed_params ew, eg;
	struct tfm_final_params fw, fg;
	struct tfm_block_params *bw, *bg; /* L each: the attention half */
	struct tfm_moe_params *mw, *mg;   /* L each: the router and experts */
	float **mwp, **mgp;               /* L·3E expert pointers each */
	struct tfm_block_acts *ba;        /* L */
	struct tfm_moe_acts *ma;          /* L: ma[l].counts, the tokens per expert of the last step */
	struct tfm_head_acts ha;
	struct tfm_scratch sc;
	struct tfm_moe_scratch ms;
};

/* A mixtral, qwen2_moe or qwen3_moe of the config d (tfm_dims_check passed, d->experts > 0, no
 * tied head), batch B of T tokens, the weights tfm_init_weights gives for
 * seed. 0, or -1 with a sentence in *cause (the config's blocks are not
 * the layout this model reads); either way moe_model_free releases it. */
int moe_model_init(struct moe_model *t, const struct tfm_dims *d, size_t B, size_t T, unsigned long long seed,
                   char **cause);
/* Forward and backward on (in, tgt) and the optimizer's step `step`
 * (1-based) on every weight: the loss before the update. */
float moe_model_step(struct moe_model *t, const struct optim *o, unsigned step, const int *in, const int *tgt);
void moe_model_free(struct moe_model *t);

#endif

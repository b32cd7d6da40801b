/*
 * tfm_driver — a whole transformer in malloc'd memory, trained by calling
 * tfm.h's layers in order: forward, loss, backward. Not zerosim's driver
 * (the engine runs the same layers through its layer list, tfm_net.c,
 * with every buffer tracked and sharded); this is the plain single-process
 * reference the tests hold the engine to bit for bit (test_tfm.c), the
 * PyTorch comparison dumps (tfm_dump.c) and the benchmark times
 * (bench_tfm.c). Only tests link it.
 */
#ifndef ZS_TESTS_TFM_DRIVER_H
#define ZS_TESTS_TFM_DRIVER_H

#include <stddef.h>

#include "engine/tfm.h"

struct tfm_driver {
	struct tfm_dims dims;
	size_t B, T, nparams;
	struct step_params layout;        /* the step description's: where each tensor lives */
	enum zs_recompute recompute;
	float *params, *grads;            /* Ψ each */
	float *x0;                        /* (BT, d) the embedding's output */
	struct tfm_block_acts *blocks;    /* L views (shared tensors under recompute) */
	struct tfm_head_acts head;
	struct tfm_scratch scratch;
	size_t act_elems;                 /* elements of x0, the blocks' and the head's tensors */
	float *acts_memory;               /* all of the above and the scratch, one block */
};

/* T <= d->seq; d passes tfm_dims_check. */
/* The elements of each saved tensor (a block's, as block 0 saves it) and
 * each scratch buffer, the step description's (util/step.h); returns the
 * scratch's sum. */
size_t tfm_driver_sizes(const struct tfm_dims *d, size_t B, size_t T, size_t act[STEP_NACTS],
                       size_t sc[STEP_NSCRATCH]);
void tfm_driver_init(struct tfm_driver *m, const struct tfm_dims *d, size_t B, size_t T, enum zs_recompute rc);
void tfm_driver_free(struct tfm_driver *m);
/* Forward and backward on one batch: returns the loss; m->grads holds its
 * gradient (zeroed first). */
float tfm_driver_step(struct tfm_driver *m, const int *in, const int *target);
/* Forward only: the loss. */
float tfm_driver_loss(struct tfm_driver *m, const int *in, const int *target);

#endif

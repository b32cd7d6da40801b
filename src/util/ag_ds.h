/*
 * ag_ds — DeepSpeed's engine (deepspeed.initialize over the user's model
 * and a client torch.optim.Adam) over the PyTorch step as data
 * (util/autograd.h): a pass that takes the plain loop's built step and
 * makes one list for every rank under DeepSpeedZeroOptimizer, ZeRO stage 1
 * or 2 in fp32 (--framework deepspeed --wrapper deepspeed; docs/schedule.md,
 * "DeepSpeed over the PyTorch step", has what it allocates, read at
 * DeepSpeed's commit 38327e0 with file and line), at the config's defaults
 * for those stages: contiguous_gradients on, overlap_comm and
 * round_robin_gradients off, reduce_scatter and
 * use_multi_rank_bucket_allreduce on, one param group, no offload; the
 * step's own --freeze, LoRA, --recompute full and --grad-accum K (each
 * micro-step the engine's backward: stage 2 reduces every one, adding
 * into averaged_gradients, stage 1 the last).
 *
 *   set-up   the trainable parameters (the client Adam's, in its order)
 *            flattened into one buffer padded to a multiple of 2N, each
 *            parameter a view of it; the rank's fp32 partition a clone of
 *            its S = len / N elements;
 *   backward the reduce bucket (reduce_bucket_size elements); loss * 1.0
 *            and its MulBackward; each gradient copied into the bucket and
 *            freed (stage 2 at its AccumulateGrad hook, stage 1 after
 *            backward, in group order); a full bucket (and backward's
 *            end) divided by N in place, its slices all-reduced through
 *            one flat copy and copied back on the ranks that own them,
 *            the rank's own parameters' gradients copied into
 *            grads_in_partition; the epilogue's views and the last rank's
 *            padding;
 *   step     the gradient norm, the flat fp32 gradient partition, the
 *            client Adam over the fp32 partition, the copy back into the
 *            flat buffer and its all-gather.
 *
 * The run's first step is a list of its own (ag_step.step1), written from
 * the same steady list: Adam's state made inside the client Adam's first
 * step(), and _global_grad_norm made there with nothing before it
 * (docs/schedule.md, "DeepSpeed over the PyTorch step", "The first step").
 *
 * The ranks differ (their partition, grads_in_partition's whole tensors,
 * the last rank's padding): those events are sections marked with their
 * rank (ag_event.only_rank), as ZeroRedundancyOptimizer's are, so one list
 * serves every rank; the engine runs each rank's own, the theory sums
 * them rank by rank.
 */
#ifndef ZS_UTIL_AG_DS_H
#define ZS_UTIL_AG_DS_H

#include "util/autograd.h"

/* Turn the plain loop's step s (built under o with zero_grad none: the
 * engine's own zero_grad sets every .grad to None) into the step under
 * DeepSpeed's ZeRO stage 1 (stage2 0) or 2 over `world` ranks with a
 * reduce bucket of `bucket` elements. 0; -1 with *cause where a
 * parameter is larger than the bucket (not built: s is unchanged); -2
 * with *cause where the step is not one the pass takes (an internal
 * error: s is then only to be freed). */
int ag_ds_apply(struct ag_step *s, const struct ag_options *o, unsigned world, int stage2, uint64_t bucket,
                char **cause);

/* What util/ag_ds3.c (ZeRO-3) shares with stages 1 and 2. */
struct ag_pass;
/* The client Adam's parameters: which storages of s it trains
 * (trained[t]) and the plain .grad each reads (grad_of[g]: its
 * parameter, AG_NONE for the rest; util/ag_pass.h), each in its order
 * (the optimizer's first write: w[k] the k-th, k_of[t] its place, -1 for
 * the rest), its elements and its place in a flat buffer of them all
 * (L). get allocates, free releases. */
struct ag_ds_params {
	size_t nt0, n;
	unsigned char *trained;
	uint32_t *grad_of, *w;
	int32_t *k_of;
	uint64_t *numel, *off, L;
};
void ag_ds_params_get(const struct ag_step *s, struct ag_ds_params *pp);
void ag_ds_params_free(struct ag_ds_params *pp);
/* The model's parameters (pp's) made views of storage `flat` at their off[k]
 * (and every view of them a view of it), after stand-ins of their own
 * that the set-up list, copied into the pass, fills: the stand-ins by
 * storage (orig[t], AG_NONE for the rest: the caller frees the array);
 * then the engine's _broadcast_model of each stand-in. */
uint32_t *ag_ds_flat_views(struct ag_pass *p, const struct ag_ds_params *pp, uint32_t flat);
/* The same with parameter k a view of storage each[k] of its own, at its
 * start (ZeRO-3 at N > 1: each parameter's gathered copy, util/ag_ds3.c;
 * a frozen one's partition at N = 1), where each[k] is not AG_NONE;
 * each NULL: ag_ds_flat_views. pp's parameters past the trained ones
 * (k_of and w of a pp that ZeRO-3 lengthens with the frozen ones) take
 * each[k] alone. */
uint32_t *ag_ds_param_views(struct ag_pass *p, const struct ag_ds_params *pp, uint32_t flat, const uint32_t *each);
/* loss_scaler.backward in fp32 (a static scale of 1) around each of the
 * step's backwards: the walk's (below), its tensors (loss: the current
 * micro-step's forward's). */
struct ag_ds_scaler {
	uint32_t loss, one, wrapped, scaled, gl;
	int await_one;
};
/* Adam's state over a partition of n elements (exp_avg, exp_avg_sq: the
 * first step makes them) and its step; the optimizer's _global_grad_norm
 * (0-dim, of dtype norm), kept from one step to the next. */
void ag_ds_adam_state(struct ag_pass *p, uint64_t n, enum ag_dtype norm, uint32_t *am, uint32_t *av, uint32_t *astep,
                      uint32_t *gnorm);
/* The first step's prefix (s->first_step): Adam's state, and a
 * _global_grad_norm for the steady step to replace (ZeRO-3 at N > 1,
 * whose run's step 1 is the steady step). */
void ag_ds_first_step(struct ag_pass *p, uint32_t am, uint32_t av, uint32_t astep, uint32_t gnorm);
/* The run's first step as a list of its own (both passes): the plain
 * loop's steady list (s->event) copied for the steady step's pass, n its
 * events, and s->first_step dropped (the plain loop's Adam state is not
 * the engine's); then, once the first step's list is written into
 * s->event, it becomes s->step1 and *plain s->event again (*plain NULL). */
struct ag_event *ag_ds_plain_keep(struct ag_step *s, size_t *n);
void ag_ds_plain_step1(struct ag_step *s, struct ag_event **plain, size_t n);
/* The client Adam over one partition, its mark left out (the step's is
 * the caller's): where its events start. first: its first step() (the
 * lazy state made and zeroed before the update; ZeRO-3's step 1 at N = 1). */
size_t ag_ds_adam_step(struct ag_pass *p, const struct ag_options *o, const struct ag_param_state *ps, int first);
/* The walk over the plain loop's step that both passes make (ZeRO-1/2's
 * and ZeRO-3's): the events it copies, the gradients as backward makes
 * them (each parameter's storage gs[k] and tensor gt[k] at its first
 * arrival, AG_NONE until then; the plain .grads the pass frees, whose own
 * free or zero is dropped), loss_scaler.backward around each backward,
 * the plain loop's optimizer passed over, over pp's parameters;
 * at_backward, a storage allocated where each backward starts (AG_NONE:
 * none; freed first at a later micro-step's where moves is 0). Under K
 * micro-steps (--grad-accum K) the engine scales each loss (lossk, its
 * storage, until its backward returns); moves: each micro-step's gradient
 * is moved out of .grad at its hook (stages 2 and 3), so a later
 * micro-step's arrives again (and AccumulateGrad's add into the moved
 * .grad is dropped); 0: stage 1, the plain loop's accumulation in .grad
 * kept. The engine's backward logs each micro-step's loss (engine.py
 * 2105-2106): mean, the micro-step's loss.mean().detach() until its
 * backward returns; losses, self.losses (the first mean, then each sum
 * `self.losses + mean_loss`, a new tensor replacing the last) until the
 * step sets it to None (_take_model_step, 2278: after zero_grad, where the
 * walk frees it). */
struct ag_ds_walk {
	struct ag_pass *p;
	struct ag_ds_scaler sc;
	size_t nt0, n, nready, i;
	const uint32_t *grad_of;
	const int32_t *k_of;
	const uint64_t *numel;
	uint32_t at_backward, lossk, mean, losses;
	unsigned K, micro;
	int moves;
	unsigned char *gone, *cloned;
	uint32_t *gs, *gt, *pend;
	uint32_t put_t, put_s;
	int skip;
	/* ZeRO-3's step 1 at N > 1 (util/ag_ds3.c), set after
	 * ag_ds_walk_begin: marks, ag_ds_next hands each "ds3:" mark to the
	 * caller (AG_EV_MARK, not copied); copy, where set, copies each event
	 * the walk passes on as it is (its operands renamed by the caller)
	 * in place of agp_copy. */
	int marks;
	void (*copy)(void *ctx, const struct ag_event *e);
	void *ctx;
	/* past the plain loop's zero_grad mark: its 1.13 record_function
	 * dropped (ag_ds_next) */
	int in_zero_grad;
};
void ag_ds_walk_begin(struct ag_ds_walk *wk, struct ag_pass *p, const struct ag_ds_params *pp, uint32_t at_backward,
                      unsigned K, int moves);
/* The next event the pass handles itself, in *e: a "ds3:" mark where
 * marks is set, a gradient for the
 * hook (AG_EV_GRAD_READY, copied and recorded: its parameter in *k, the
 * tensor to move put_t, of storage put_s: autograd's at the first
 * arrival; a later micro-step's, or the copy AccumulateGrad makes of it,
 * where moves), a micro-step's end before the last (AG_EV_FREE of its
 * scaled loss: the engine's backward has returned; not copied), or the
 * optimizer's mark (every gradient arrived; not copied: the pass copies
 * it and writes the step). At either end the pass calls
 * ag_ds_backward_returns once the engine's backward is done. 1: one; 0: the
 * step's end; -1 with *cause (an internal error). */
int ag_ds_next(struct ag_ds_walk *wk, const struct ag_event **e, size_t *k, char **cause);
/* The engine's backward returns (after the optimizer's part of it, its
 * allreduce_gradients): its scaled loss (lossk, where set) and the
 * micro-step's mean_loss (where self.losses is not it) freed, in the
 * frame's order. The pass calls it at a micro-step's end and at the
 * optimizer's mark. */
void ag_ds_backward_returns(struct ag_ds_walk *wk, enum zs_phase ph);
/* The walk's end: rc (0, or an internal error made -2), after checking
 * the loss scaler's; the list written becomes the step's where it is 0,
 * else it is dropped; the walk's arrays freed. */
int ag_ds_walk_end(struct ag_ds_walk *wk, int rc, char **cause);
/* A gradient g (its storage gs) copied into the bucket's next n elements
 * and freed (.grad made a view of them: the bucket add of both passes'
 * hooks): its parameter k recorded in bk[*nb], its place in bo[*nb]; *nb
 * and *used grow. */
void ag_ds_bucket_put(struct ag_pass *p, uint32_t bucket, uint32_t g, uint32_t gs, size_t k, uint64_t n,
                      size_t *bk, uint64_t *bo, size_t *nb, uint64_t *used, enum zs_phase ph);
/* get_grad_norm_direct's checks of the 0-dim norm (stage_1_and_2.py
 * 1712-1716, stage3.py 1813-1817): isinf, isnan, logical_or and
 * tensor(-1.0), made in that order (the caller frees them). */
void ag_ds_norm_flags(struct ag_pass *p, enum zs_phase po, uint32_t *inf, uint32_t *nan, uint32_t *ion, uint32_t *err);
/* A storage made (allocated) and filled with v. */
uint32_t ag_ds_made(struct ag_pass *p, const char *what, enum ag_dtype dt, uint64_t n, int scalar, enum zs_cat cat,
                    double v, enum zs_phase ph);

#endif

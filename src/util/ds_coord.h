/*
 * ds_coord — DeepSpeed's ZeRO-3 PartitionedParameterCoordinator as rules
 * over a tensor list in modules: which tensors a module's fetch gathers
 * (with the prefetch), which its release drops, what step() releases and
 * _post_step gathers again. It is part of the step's description (a
 * framework's placement and hooks as data): the engine executes its
 * answers with real collectives and the tracker (scheme_deepspeed.c), the
 * theory sums them (theory_walk.c, its one walk); neither writes
 * the rules again. Line numbers are partitioned_param_coordinator.py's at
 * DeepSpeed 38327e0 (docs/schedule.md, "deepspeed", ZeRO-3's coordinator).
 *
 * Modules are runs of tensors, [mod_first, mod_first + mod_n) (a tied
 * head's is the token table again); the trace is the modules forward,
 * then backward (with a full recompute, each checkpointed block's
 * modules forward again before its backward: ds_coord_new_recompute). Ownership: ds_coord_new allocates the coordinator and its
 * lists, ds_coord_free releases them. Out of memory is fatal.
 */
#ifndef ZS_UTIL_DS_COORD_H
#define ZS_UTIL_DS_COORD_H

#include <stddef.h>
#include <stdint.h>

#include "util/config.h"
#include "util/step.h"

#define DS_REUSE_DISTANCE 1e9 /* stage3_max_reuse_distance's default (runtime/zero/config.py 237) */

struct ds_coord {
	size_t ntensors, nmodules, ntrace, nqueue, head;
	/* Every list malloc'd to its size by ds_coord_new (ds_coord_free). */
	uint64_t *n, *s;                     /* per tensor: elements, and ceil(n/N) a rank */
	uint64_t *held;                      /* per tensor: the elements of its block while whole (ds_coord_step) */
	uint64_t flat;                       /* _post_step's transient flat, elements (ds_coord_step) */
	unsigned world;
	int offp;                            /* --offload params */
	size_t *mod_first, *mod_n;           /* per module */
	uint64_t gathered;                   /* Σ ceil(n/N) of the tensors gathered so far */
	int *persist, *avail;                /* per tensor */
	double *recent;                      /* __most_recent_step_id_param_fetched_for */
	size_t *trace;                       /* __submodule_order: the modules forward, then backward */
	int *bwd;                            /* per trace entry: a backward's (it makes its grads) */
	int *no_grad_in;                     /* per module: no input needs grad, no release after its backward */
	size_t *qt, *qs;                     /* __param_queue: (param, step_id_last_used_at) */
	double n_avail;                      /* __n_available_params */
	size_t *fetched, nfetched;           /* gathered by the last fetch, in order */
};

/* The tensors n[0..nt) in modules, N = world; persistent when
 * n <= c->ds_persist (partition_parameters.py 1130). */
struct ds_coord *ds_coord_new(const uint64_t *n, size_t nt, const size_t *mod_first, const size_t *mod_n,
                              size_t nmod, const struct zs_config *c, unsigned world);
/* The same, with activation checkpointing: group[m] >= 0 names the
 * checkpointed block module m runs in (a block's modules consecutive),
 * -1 none. Backward reaches a block's last module first and reruns the
 * block's forward there (torch.utils.checkpoint), so the trace holds,
 * before the block's backward entries, its modules forward again, each a
 * fetch and a release (docs/schedule.md, "deepspeed", ZeRO-3 with full
 * recompute). And no_grad_in[m] (NULL: none) when no input of module m
 * requires grad (a table's lookup of token ids or positions): its
 * post-backward hook never fires, so its backward releases nothing and
 * its params stay whole until step() (docs/schedule.md, "deepspeed",
 * ZeRO-3's coordinator); no_grad_in[m] == 2 when moreover its output
 * needs no grad (a table, or a module before the first that trains,
 * frozen by --freeze: ds_coord_grad_flow): no pre-backward hook fires
 * either and the trace holds no backward of it (docs/schedule.md,
 * "Frozen parameters under DeepSpeed"). */
struct ds_coord *ds_coord_new_recompute(const uint64_t *n, size_t nt, const size_t *mod_first, const size_t *mod_n,
                                        size_t nmod, const long *group, const int *no_grad_in,
                                        const struct zs_config *c, unsigned world);
void ds_coord_free(struct ds_coord *d);
/* The no_grad_in of nmod modules in forward order (what
 * ds_coord_new_recompute takes), in place: on entry no_grad_in[m] says
 * whether module m is a table (a lookup of ids: no input of it ever needs
 * grad), trained[m] whether any of its params requires grad. Autograd's
 * graph starts at the first module that trains (or, with input_grad, at
 * the first table's output: transformers' enable_input_require_grads,
 * installed under --recompute full, docs/finetune.md): a module before it
 * has an output needing no grad, so neither of DeepSpeed's backward hooks
 * fires for it (2: no backward); a module whose params require grad but
 * whose input does not (a table that trains, the first module that
 * trains) gets its pre-backward hook only (1: no release after its
 * backward; parameter_offload.py 342-379, 401-442 at 38327e0); the rest
 * 0. Modules read the previous one's output or the residual stream
 * (which needs grad once any earlier output does): zerosim's modules are
 * that chain, the branches that read one input being one module (llama's
 * q, k and v; gate and up; a mixture's z3 leaf), each of whose
 * DeepSpeed modules gets the same answer (a first that trains inside its
 * layer: each of q, k and v has its pre-backward hook, its weight
 * training, and none its post-backward hook, their input needing no
 * grad; docs/schedule.md, "Frozen parameters under DeepSpeed"). */
void ds_coord_grad_flow(size_t nmod, const uint64_t *trained, int input_grad, int *no_grad_in);
/* The same with LoRA's adapters among the modules (util/lora.h): PEFT's
 * lora_A reads its base layer's input, not the running output, and
 * lora_B lora_A's output; adapter[m] is 1 for a lora_A, 2 for a lora_B, 0
 * for a module of the chain, and base[m] an adapter's base module (its
 * index among the nmod). So a lora_A whose base's input needs no grad
 * (a q_proj over block 0's norm, the embeddings frozen) gets its
 * pre-backward hook only (1), as DeepSpeed's lora_A module does there,
 * and its lora_B (whose input, lora_A's output, needs grad) 0. The
 * output after a base and its adapters needs grad where any of them
 * trains or the base's input needed it. NULL adapter: the chain. */
void ds_coord_grad_flow_lora(size_t nmod, const uint64_t *trained, int input_grad, int *no_grad_in,
                             const int *adapter, const size_t *base);
/* A step's start (step 1 records the trace); `gathered` starts again. */
void ds_coord_begin_step(struct ds_coord *d, unsigned step);
/* A micro-step's start under gradient accumulation, before the
 * boundary's step(): reset_step (228-264) alone, the queue and the
 * step's marks from the start; what is whole stays whole, counted as it
 * was. */
void ds_coord_begin_micro(struct ds_coord *d);
/* The fetch of trace entry j: the tensors it gathered, in order, in
 * *fetched (the coordinator's list); how many. */
size_t ds_coord_fetch(struct ds_coord *d, const struct zs_config *c, size_t j, int complete,
                      const size_t **fetched);
/* The release after trace entry j: the tensors released into out (if not
 * NULL), how many (none after the backward of a no_grad_in module). */
size_t ds_coord_release(struct ds_coord *d, size_t j, int complete, size_t *out);
/* step(): everything released (into released, *nreleased of them), then
 * _post_step gathers the persistent params (into out; how many).
 *
 * What a gathered param holds (docs/schedule.md, "deepspeed", ZeRO-3's
 * gathered blocks; partition_parameters.py at 38327e0): after a fetch or
 * this, held[t] elements of tensor t's block, whole while t is. At N > 1
 * a fetch's all_gather_coalesced (1200-1310) of one param gives it a
 * buffer of ceil(n/N)·N, param.data a narrow of it (1246-1266); of
 * several, torch.cat's n each (707; _all_gather_dtype's flat they came
 * from, 1172, is not counted here). _post_step's _all_gather (1500-1534)
 * of several gives each a flat of ceil(n/N)·N, param.data a narrow of it
 * (_allgather_params_coalesced, 1817-1821, 1886); of one, n
 * (_allgather_params, 1895-1970: replicated_tensor, 1954), copied out of
 * a flat of ceil(n/N)·N that it frees on return (at N = 1 too): `flat`
 * elements, 0 otherwise. At N = 1 no gather (_no_gather_coalesced,
 * 810-820, from all_gather_coalesced 1207-1208 and
 * _allgather_params_coalesced 1796-1799): param.data a view of the
 * partition (NoGatherHandle, 54-55; NoGatherCoalescedHandle, 77-78), 0
 * elements; with --offload params its device copy, n; _post_step's one
 * param n as above. */
size_t ds_coord_step(struct ds_coord *d, size_t *released, size_t *nreleased, size_t *out);
/* That rule: the elements of the block a param of n elements holds,
 * gathered at N = world in one call of ncall params by a fetch (fetch
 * 1) or by _post_step (fetch 0), offp under --offload params. */
uint64_t ds_coord_block(uint64_t n, unsigned world, size_t ncall, int fetch, int offp);
/* Whether tensor t is in module m; the elements whole now. */
int ds_coord_in(const struct ds_coord *d, size_t t, size_t m);
/* DeepSpeed's z3 leaf in layer l of p (docs/schedule.md, "Mixtures of
 * experts"): a mixture's sparse-MoE block marked with set_z3_leaf_modules
 * (deepspeed/utils/z3_leaf_module.py 47-81), from its router (the module
 * before the layer's first expert) to the layer's last module (qwen2_moe's
 * shared expert too), is one module to the coordinator: its hooks fetch
 * and release every param of it together (iter_params(..., recurse=
 * z3_leaf_module), partitioned_param_coordinator.py 218, 300, 425-433) and
 * its children get none (parameter_offload.py 282-288). The index in
 * p->module of its first module, or p->nmodules where layer l has none. */
size_t ds_coord_leaf(const struct step_params *p, size_t l);
uint64_t ds_coord_live(const struct ds_coord *d);

/* DeepSpeed's ZeRO-1 and ZeRO-2 and an expert that got no token
 * (docs/schedule.md, "Mixtures of experts"): its params' grads stay None,
 * so no hook puts them in the bucket (stage_1_and_2.py 904-920; ZeRO-1's
 * reduce_gradients skips them, 719-724), and the epilogue's
 * get_flat_partition (1723-1729, called at 780-790) gives each param of
 * the rank's partition a torch.zeros_like of the whole param in
 * gradient_accumulation_dtype (the params' dtype, engine.py 1017-1021),
 * made after the last reduce_ipg_grads, before _release_ipg_buffers drops
 * the buckets (766, 802), and held in averaged_gradients until step() has
 * flattened the partition into its fp32 gradient (1892-1906). The
 * elements of those zeros at one step: every trained (step_trained)
 * tensor of each expert e of block b with counts[b·E + e] == 0 (every
 * block a mixture's: the others are refused). */
uint64_t ds_coord_starved(const struct step_params *p, const uint64_t *counts, size_t E);
/* Whether zerosim follows that for scheme at N = world under c: ZeRO-1
 * or ZeRO-2 at N = 1 (every param in the one partition: at N > 1 a rank
 * that starved an expert fills its bucket apart from the others, and
 * average_tensor's reduces are each rank's own bucket's, 1069-1135), one
 * micro-step (no --grad-accum: each micro-step's epilogue adds a new
 * list, 791-800) and no --offload optimizer (its epilogue makes none,
 * 780, and the host fp32 grads keep the last step's slots). 1, or 0. */
int ds_coord_starved_built(const struct zs_config *c, enum zs_scheme scheme, unsigned world);

/* DeepSpeed ZeRO-3's optimizer sub groups (stage3.py
 * _create_fp16_sub_groups, 943-966 at 38327e0; docs/schedule.md,
 * "deepspeed", ZeRO-3's step), which step() prepares, steps and releases
 * one after another (2111-2126). s[0..nt): each tensor's partition_numel
 * on a rank, ceil(n/N), 0 for a frozen one (in no param group,
 * stage3.py 491-505); the trainable ones are the one param group's, in
 * order. One sub group of all of them when size >= their sum (948-949);
 * else one closes after the tensor that brings its running sum to size or
 * more, and after the last (959): a sub group overshoots size by less
 * than its last tensor, and a tensor larger than size closes the one it
 * joins. end[i] (nt entries at most): one past sub group i's last tensor,
 * nt for the last (the frozen tensors after it join it); returns the
 * count, 0 when nothing trains. */
size_t ds_sub_groups(const uint64_t *s, size_t nt, double size, size_t *end);

#endif

/*
 * ag_pass — what a wrapper's pass over the PyTorch step as data
 * (util/autograd.h) writes with: a list of events being rebuilt and the
 * step's tensors grown beside it. DDP's (util/ag_ddp.h), FSDP's
 * (util/ag_fsdp.h) and DeepSpeed's (util/ag_ds.h) passes share it.
 *
 * Ownership: the pass's list (ev) is the caller's to hand to the step or
 * free; tensors are appended to s->tensor (the step owns them).
 */
#ifndef ZS_UTIL_AG_PASS_H
#define ZS_UTIL_AG_PASS_H

#include "util/autograd.h"

struct ag_pass {
	struct ag_step *s;
	size_t cap_tensors;
	struct ag_event *ev; /* the list being written */
	size_t nev, cap;
};

/* A new tensor of s (zeroed); its index. */
uint32_t agp_newt(struct ag_pass *p);
/* The elements of a whole contiguous storage (a 0-dim scalar is one). */
uint64_t agp_elements(const struct ag_tensor *x);
/* A storage of n elements of dtype dt (1-D; 0-dim where scalar), a
 * temporary (AG_ROLE_TEMP) of category cat. */
uint32_t agp_storage(struct ag_pass *p, const char *what, enum ag_dtype dt, uint64_t n, int scalar, enum zs_cat cat);
/* A contiguous view of storage `flat` shaped as tensor `like`, at element `off`. */
uint32_t agp_view_as(struct ag_pass *p, uint32_t flat, uint32_t like, uint64_t off);
/* Append an event of kind k (operands AG_NONE); the list may move. */
struct ag_event *agp_emit(struct ag_pass *p, enum ag_event_kind k, enum zs_phase ph, int32_t module);
void agp_alloc(struct ag_pass *p, uint32_t t, enum zs_phase ph);
void agp_free(struct ag_pass *p, uint32_t t, enum zs_phase ph);
/* An op out0 = k(in0). */
struct ag_event *agp_op(struct ag_pass *p, enum zs_phase ph, enum ag_op k, uint32_t in0, uint32_t out0);
void agp_copy(struct ag_pass *p, const struct ag_event *e);
/* The list written so far becomes *list (*n events; the old one freed),
 * and the pass starts a new one. */
void agp_take(struct ag_pass *p, struct ag_event **list, size_t *n);
/* A copy of e with each storage t < nt that orig names (orig[t] !=
 * AG_NONE) renamed to it: a pass's stand-ins for the tensors it remade
 * (the set-up's parameters before FSDP or DeepSpeed flattened them). */
void agp_copy_renamed(struct ag_pass *p, const struct ag_event *e, const uint32_t *orig, size_t nt);
/* torch.autograd.profiler.record_function in 1.13 on the CPU: a zeros(1)
 * handle and the 288-byte one _record_function_enter returns, gone before
 * the body runs (util/autograd.c's record_function, as the optimizer's);
 * nothing elsewhere. */
void agp_record_function(struct ag_pass *p, const struct ag_options *o, enum zs_phase ph);

/* A contiguous view of storage `flat` with x's shape (strides made
 * contiguous), at element `off`. */
uint32_t agp_view_shaped(struct ag_pass *p, uint32_t flat, uint32_t x, uint64_t off);
/* A 1-D view of n elements of storage `flat` at element `at`. */
uint32_t agp_view1(struct ag_pass *p, uint32_t flat, uint64_t at, uint64_t n);
/* Mark the pass's events from `from` on as rank r's alone (only_rank r + 1). */
void agp_rank_only(struct ag_pass *p, size_t from, unsigned r);
/* A Python float v given to in-place op k on x: its 8-byte wrapped
 * number and TensorIterator's fp32 copy around the op. */
void agp_scalar_inplace(struct ag_pass *p, enum ag_op k, uint32_t x, double v, enum zs_phase ph);
/* Which parameter storages of s (below nt) the optimizer updates, and
 * the plain .grad each of them reads, paired in the optimizer's order:
 * trained[t] is set for those; grad_of[g] is the parameter of .grad g,
 * AG_NONE for the rest (the caller's arrays of nt). */
void agp_trained_params(const struct ag_step *s, size_t nt, unsigned char *trained, uint32_t *grad_of);

/* Whether event e (an op) reads or writes storage st, through any view. */
int agp_touches(const struct ag_step *s, const struct ag_event *e, uint32_t st);

#endif

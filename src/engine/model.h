/*
 * model — a model as the step driver sees it: a list of layers, each with
 * its forward, its backward, the parameters it owns and the activations it
 * saves, and the list of per-rank tensors those activations live in, each
 * saying when it is allocated and when it is freed (llm.c's
 * ParameterTensors and ActivationTensors, as tables the driver walks).
 * Parameters are one flat vector (mlp.h's layout); a layer owns the run
 * [param_off, param_off + nparams) of it. Activations are fp32.
 *
 * The schemes never see a layer: they shard and gather units of the flat
 * vector (layout.h). A new model is a new builder and, if it needs them,
 * new layer kinds.
 */
#ifndef ZS_ENGINE_MODEL_H
#define ZS_ENGINE_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "engine/fp16.h"
#include "util/config.h"
#include "util/schedule.h"

#define ZS_MAX_LAYERS ZS_MAX_WIDTHS
#define ZS_MAX_TENSORS (ZS_MAX_LAYERS + 4)
#define ZS_MAX_LAYER_TENSORS 8  /* parameter tensors of one layer */
#define ZS_NO_TENSOR UINT32_MAX
#define ZS_END_OF_BACKWARD SIZE_MAX

/* When a tensor is allocated: at the start of forward, just before the
 * layer that writes it runs forward, or at the start of backward. */
enum zs_when { ZS_AT_FORWARD, ZS_AT_LAYER, ZS_AT_BACKWARD };

struct zs_tensor {
	size_t elements;    /* fp32 elements, per rank */
	enum zs_cat cat;
	enum zs_when alloc;
	size_t freed_after; /* the layer whose backward frees it, or ZS_END_OF_BACKWARD */
};

/* What a layer's kernels work on, on one rank. */
struct zs_layer_io {
	const void *w;      /* its params (first element), fp16 or fp32 */
	void *g;            /* its grads (backward only), same type */
	float *const *t;    /* the rank's tensors, by index */
	enum zs_dtype dt;
	size_t batch;
};

struct zs_layer;

struct zs_layer_kind {
	const char *name;
	void (*forward)(const struct zs_layer *l, const struct zs_layer_io *io);
	void (*backward)(const struct zs_layer *l, const struct zs_layer_io *io);
};

struct zs_layer {
	const struct zs_layer_kind *kind;
	size_t param_off, nparams; /* the params it owns in the flat vector */
	unsigned in, out;          /* tensors it reads and writes (out is saved for backward) */
	unsigned dy, dx;           /* backward: d loss/d out (read), d loss/d in (written, or ZS_NO_TENSOR) */
	size_t din, dout;          /* linear: in (B, din), out (B, dout), weight (dout, din), bias (dout) */
	int relu;                  /* linear: ReLU on the output */
	/* Its parameter tensors (PyTorch's nn.Parameter), their elements in
	 * flat order: a linear layer's weight, then its bias. A framework that
	 * assigns whole tensors to ranks partitions these (layout.h). */
	size_t nptensors, ptensor[ZS_MAX_LAYER_TENSORS];
};

struct zs_model {
	size_t nparams;            /* Ψ */
	size_t batch;              /* per rank */
	size_t nlayers;
	struct zs_layer layer[ZS_MAX_LAYERS];
	/* Allocated in list order at each point of enum zs_when, freed in
	 * list order at the end of backward (or after their layer). */
	size_t ntensors;
	struct zs_tensor tensor[ZS_MAX_TENSORS];
	unsigned input, target;    /* the batch: x (B, d_in) and y (B, d_out) */
	/* The loss of the last layer's output against the target; writes
	 * d loss/d out into the last layer's dy tensor. */
	float (*loss)(const struct zs_model *m, float *const *t);
};

/* The MLP of mlp.h (ReLU between layers, MSE loss): layer l is a linear
 * layer owning its weight and bias; tensors are the two delta buffers
 * (scratch; backward of layer l reads delta[(L-1-l) mod 2] and writes the
 * other), x, y, and each layer's output. All are freed at the end of
 * backward: the scratch, then x and y, then the outputs. */
void model_mlp_init(struct zs_model *m, const size_t *widths, size_t nwidths, size_t batch);

/* Fp32 bytes of every tensor the model allocates in one step, per rank. */
size_t model_tensor_bytes(const struct zs_model *m);

#endif

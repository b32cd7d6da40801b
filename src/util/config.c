/*
 * config — see config.h. Every option value is parsed strictly: the whole
 * string must be consumed, lists have no empty items, counts have limits
 * that keep byte counts exact in a double.
 */
#include "config.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/util.h"
#include "util/config.h"

static const char *const scheme_names[ZS_NSCHEMES] = {"dp", "zero1", "zero2", "zero3"};
static const char *const unit_names[ZS_NUNITS] = {"model", "layer"};

const char *zs_scheme_name(enum zs_scheme s) { return scheme_names[s]; }
const char *zs_unit_name(enum zs_unit u) { return unit_names[u]; }
const char *zs_precision_name(enum zs_precision p)
{
	return p == ZS_MIXED ? "mixed" : p == ZS_AMP_BF16 ? "amp-bf16" : p == ZS_AMP_FP16 ? "amp-fp16" : "fp32";
}
const char *zs_optimizer_name(enum zs_optimizer o) { return o == ZS_ADAM ? "adam" : "sgd"; }

static const char *const framework_names[ZS_NFRAMEWORKS] = {"paper", "torch", "deepspeed"};
const char *zs_framework_name(enum zs_framework f) { return framework_names[f]; }
static const char *const offload_names[ZS_NOFFLOADS] = {"none", "optimizer", "params"};
const char *zs_offload_name(enum zs_offload o) { return offload_names[o]; }

static const char *const prefetch_names[ZS_NPREFETCH] = {"none", "backward-pre"};
const char *zs_prefetch_name(enum zs_prefetch p) { return prefetch_names[p]; }

/* The PyTorch options' spellings, in their enums' order (config.h). */
static const char *const torch_version_names[] = {"2.6", "1.13"};
static const char *const torch_device_names[] = {"cuda", "cpu"};
static const char *const optim_impl_names[] = {"default", "single", "foreach", "fused"};
static const char *const zero_grad_names[] = {"default", "none", "zeros"};
static const char *const attn_names[] = {"default", "eager", "sdpa"};
static const char *const wrapper_names[] = {"auto", "none", "ddp", "fsdp", "deepspeed"};
#define NNAMES(a) ((unsigned)(sizeof(a) / sizeof(a)[0]))
const char *zs_torch_version_name(enum zs_torch_version v) { return torch_version_names[v]; }
const char *zs_torch_device_name(enum zs_torch_device d) { return torch_device_names[d]; }
const char *zs_optim_impl_name(enum zs_optim_impl i) { return optim_impl_names[i]; }
const char *zs_zero_grad_name(enum zs_zero_grad z) { return zero_grad_names[z]; }
const char *zs_attn_name(enum zs_attn a) { return attn_names[a]; }
static const char *const experts_impl_names[] = {"modulelist", "eager", "grouped_mm", "batched_mm"};
const char *zs_experts_impl_name(enum zs_experts_impl e) { return experts_impl_names[e]; }
const char *zs_wrapper_name(enum zs_wrapper w) { return wrapper_names[w]; }
int zs_config_trains_part(const struct zs_config *c)
{
	return c->freeze[0] || c->lora_r;
}

int zs_wrapper_step(const struct zs_config *c)
{
	return c->wrapper == ZS_WRAPPER_NONE || c->wrapper == ZS_WRAPPER_DDP || c->wrapper == ZS_WRAPPER_FSDP ||
	       c->wrapper == ZS_WRAPPER_DEEPSPEED;
}

enum zs_optim_impl zs_optim_impl_resolve(const struct zs_config *c)
{
	if (c->optim_impl != ZS_OPTIM_IMPL_DEFAULT)
		return c->optim_impl;
	/* 1.13: foreach None is False (adam.py 288); 2.x: foreach where every
	 * parameter is on CUDA (optimizer.py's _default_to_fused_or_foreach). */
	return c->torch_version == ZS_TORCH_1_13 || c->torch_device == ZS_DEVICE_CPU ? ZS_OPTIM_SINGLE
	                                                                              : ZS_OPTIM_FOREACH;
}

enum zs_zero_grad zs_zero_grad_resolve(const struct zs_config *c)
{
	if (c->zero_grad != ZS_ZERO_GRAD_DEFAULT)
		return c->zero_grad;
	/* DeepSpeed's engine sets every .grad to None itself (stage_1_and_2.py
	 * 1638-1651: check_ds_wrapper takes no --zero-grad) */
	if (c->wrapper == ZS_WRAPPER_DEEPSPEED)
		return ZS_ZERO_GRAD_NONE;
	/* set_to_none: False in 1.13 (optimizer.py 246), True from 2.0 (2.6: 940). */
	return c->torch_version == ZS_TORCH_1_13 ? ZS_ZERO_GRAD_ZEROS : ZS_ZERO_GRAD_NONE;
}

enum zs_attn zs_attn_resolve(const struct zs_config *c)
{
	if (c->attn != ZS_ATTN_DEFAULT)
		return c->attn;
	return c->torch_version == ZS_TORCH_1_13 ? ZS_ATTN_EAGER : ZS_ATTN_SDPA;
}

int zs_scheme_parse(const char *s, enum zs_scheme *out)
{
	for (int i = 0; i < ZS_NSCHEMES; i++)
		if (strcmp(s, scheme_names[i]) == 0) {
			*out = (enum zs_scheme)i;
			return 0;
		}
	return -1;
}

int zs_unit_parse(const char *s, enum zs_unit *out)
{
	for (int i = 0; i < ZS_NUNITS; i++)
		if (strcmp(s, unit_names[i]) == 0) {
			*out = (enum zs_unit)i;
			return 0;
		}
	return -1;
}

int zs_precision_parse(const char *s, enum zs_precision *out)
{
	static const enum zs_precision v[] = { ZS_MIXED, ZS_FP32, ZS_AMP_BF16, ZS_AMP_FP16 };
	for (size_t i = 0; i < sizeof v / sizeof *v; i++)
		if (strcmp(s, zs_precision_name(v[i])) == 0) {
			*out = v[i];
			return 0;
		}
	return -1;
}

int zs_precision_amp_check(const struct zs_config *c, int has_model, char **cause)
{
	if (c->precision != ZS_AMP_BF16 && c->precision != ZS_AMP_FP16)
		return 0;
	if (!has_model || c->framework != ZS_FW_TORCH || !zs_wrapper_step(c))
		return zs_fail(cause, "--precision %s: PyTorch's autocast is described for the PyTorch step only "
		               "(--framework torch --wrapper none, ddp or fsdp, over a transformer); zerosim's own schedules take "
		               "mixed or fp32", zs_precision_name(c->precision));
	return 0;
}

int zs_torch_recompute_set(struct zs_config *c, const char *recompute, char **cause)
{
	c->hf_recompute = 0;
	if (strcmp(recompute, "full") != 0 && c->recompute_nonreentrant)
		return zs_fail(cause, "--recompute-impl non-reentrant: only with --recompute full (Hugging Face's "
		               "gradient checkpointing; give --recompute full, or leave --recompute-impl out)");
	if (strcmp(recompute, "none") == 0)
		return 0;
	if (strcmp(recompute, "full") != 0)
		return zs_fail(cause, "--recompute %s: the PyTorch step has no such checkpointing (Hugging Face's "
		               "gradient checkpointing reruns whole decoder layers: --recompute full); give none or full",
		               recompute);
	/* use_reentrant=False (util/autograd.c, layer_bwd_nonreentrant): the
	 * plain loop, DDP and FSDP (tests/hf_torch.sh); DeepSpeed's hooks
	 * around it are not compared yet */
	if (c->recompute_nonreentrant && c->wrapper != ZS_WRAPPER_NONE && c->wrapper != ZS_WRAPPER_DDP &&
	    c->wrapper != ZS_WRAPPER_FSDP)
		return zs_fail(cause, "--recompute-impl non-reentrant with --wrapper %s: not described yet (give --wrapper "
		               "none, ddp or fsdp, or --recompute-impl reentrant)", zs_wrapper_name(c->wrapper));
	c->hf_recompute = 1;
	return 0;
}

int zs_optimizer_parse(const char *s, enum zs_optimizer *out)
{
	if (strcmp(s, "adam") != 0 && strcmp(s, "sgd") != 0)
		return -1;
	*out = strcmp(s, "adam") == 0 ? ZS_ADAM : ZS_SGD;
	return 0;
}

void zs_bytes_per_param(enum zs_precision pr, enum zs_optimizer opt, unsigned *p, unsigned *g, unsigned *k)
{
	*p = pr == ZS_MIXED ? 2 : 4;
	*g = *p;
	if (opt == ZS_ADAM)
		*k = pr == ZS_MIXED ? 12 : 8;
	else
		*k = pr == ZS_MIXED ? 8 : 4;
}

void zs_config_defaults(struct zs_config *c)
{
	memset(c, 0, sizeof *c);
	c->widths[0] = 64;
	c->widths[1] = 256;
	c->widths[2] = 64;
	c->nwidths = 3;
	for (unsigned n = 1; n <= 32; n *= 2)
		c->world[c->nworld++] = n;
	for (int s = 0; s < ZS_NSCHEMES; s++)
		c->schemes[c->nschemes++] = (enum zs_scheme)s;
	c->units[0] = ZS_UNIT_MODEL;
	c->nunits = 1;
	c->steps = 3;
	c->batch = 4;
	c->seed = 3;
	c->lr = 1e-3;
	c->beta1 = 0.9;
	c->beta2 = 0.999;
	c->eps = 1e-8;
	c->precision = ZS_MIXED;
	c->optimizer = ZS_ADAM;
	c->bucket_cap_mb = 25;
	c->prefetch = ZS_PREFETCH_NONE;
	c->ds_reduce_bucket = c->ds_allgather_bucket = 5e8;
	c->ds_persist = 1e5;
	c->ds_prefetch_bucket = 5e7;
	c->ds_max_live = 1e9;
	c->ds_sub_group = ZS_DS_SUB_GROUP;
	c->ranks_per_node = 1;
	c->torch_version = ZS_TORCH_2_6;
	c->torch_device = ZS_DEVICE_CUDA;
	c->optim_impl = ZS_OPTIM_IMPL_DEFAULT;
	c->zero_grad = ZS_ZERO_GRAD_DEFAULT;
	c->attn = ZS_ATTN_DEFAULT;
	c->wrapper = ZS_WRAPPER_AUTO;
	c->grad_accum = 1;
	c->ddp_no_sync = 1;
	c->lora_alpha = 8; /* peft/tuners/lora/config.py's LoraConfig.lora_alpha (v0.20.0) */
}

int zs_parse_uint(const char *opt, const char *s, unsigned long long max, const char *what,
                      unsigned long long *out, char **cause)
{
	if (*s == '\0')
		return zs_fail(cause, "--%s: an empty value is not %s", opt, what);
	for (const char *q = s; *q; q++)
		if (*q < '0' || *q > '9')
			return zs_fail(cause, "--%s: '%.40s' is not %s (1..%llu)", opt, s, what, max);
	errno = 0;
	unsigned long long v = strtoull(s, NULL, 10);
	if (errno == ERANGE || v < 1 || v > max)
		return zs_fail(cause, "--%s: '%.40s' is not %s (1..%llu)", opt, s, what, max);
	*out = v;
	return 0;
}

/* Split a comma list; calls fn for each item. Empty items are errors. */
static int each_item(const char *opt, const char *list, int (*fn)(void *, const char *, char **), void *ctx,
                     char **cause)
{
	if (*list == '\0')
		return zs_fail(cause, "--%s: the list is empty", opt);
	char *copy = zs_strdup(list);
	char *p = copy;
	int r = 0;
	for (;;) {
		char *comma = strchr(p, ',');
		if (comma)
			*comma = '\0';
		if (*p == '\0') {
			r = zs_fail(cause, "--%s: '%.60s' has an empty item", opt, list);
			break;
		}
		if ((r = fn(ctx, p, cause)) != 0)
			break;
		if (!comma)
			break;
		p = comma + 1;
	}
	free(copy);
	return r;
}

struct list_ctx {
	struct zs_config *c;
	size_t n;
};

static int add_width(void *vctx, const char *item, char **cause)
{
	struct list_ctx *x = vctx;
	unsigned long long v = 0;
	if (x->n >= ZS_MAX_WIDTHS)
		return zs_fail(cause, "--layers: more than %d widths", ZS_MAX_WIDTHS);
	if (zs_parse_uint("layers", item, ZS_MAX_WIDTH, "a layer width", &v, cause) != 0)
		return -1;
	x->c->widths[x->n++] = (size_t)v;
	return 0;
}

static int add_world(void *vctx, const char *item, char **cause)
{
	struct list_ctx *x = vctx;
	unsigned long long v = 0;
	if (x->n >= ZS_MAX_WORLDS)
		return zs_fail(cause, "--world: more than %d world sizes", ZS_MAX_WORLDS);
	if (zs_parse_uint("world", item, ZS_MAX_WORLD, "a world size", &v, cause) != 0)
		return -1;
	for (size_t i = 0; i < x->n; i++)
		if (x->c->world[i] == v)
			return zs_fail(cause, "--world: %llu is listed twice", v);
	x->c->world[x->n++] = (unsigned)v;
	return 0;
}

static int add_scheme(void *vctx, const char *item, char **cause)
{
	struct list_ctx *x = vctx;
	enum zs_scheme s;
	if (zs_scheme_parse(item, &s) != 0)
		return zs_fail(cause, "--schemes: unknown scheme '%.40s' (dp, zero1, zero2, zero3)", item);
	for (size_t i = 0; i < x->n; i++)
		if (x->c->schemes[i] == s)
			return zs_fail(cause, "--schemes: '%s' is listed twice", item);
	x->c->schemes[x->n++] = s;
	return 0;
}

static int add_unit(void *vctx, const char *item, char **cause)
{
	struct list_ctx *x = vctx;
	enum zs_unit u;
	if (zs_unit_parse(item, &u) != 0)
		return zs_fail(cause, "--unit: unknown unit '%.40s' (model, layer)", item);
	for (size_t i = 0; i < x->n; i++)
		if (x->c->units[i] == u)
			return zs_fail(cause, "--unit: '%s' is listed twice", item);
	x->c->units[x->n++] = u;
	return 0;
}

/* A quantity in [lo, hi] (zs_parse_decimal's grammar). */
static int set_real(const char *key, const char *value, double lo, double hi, const char *what, double *out,
                    char **cause)
{
	double d;
	if (*value == '\0')
		return zs_fail(cause, "--%s: an empty value is not %s", key, what);
	int nonzero = 0; /* a digit 1-9 before the exponent: "1e-400" underflows to 0, and is no 0 */
	for (size_t i = 0, m = strcspn(value, "eE"); i < m; i++)
		nonzero |= value[i] >= '1' && value[i] <= '9';
	if (zs_parse_decimal(value, &d) != 0 || d < lo || d > hi || (d == 0 && nonzero))
		return zs_fail(cause, "--%s: '%.40s' is not %s", key, value, what);
	*out = d;
	return 0;
}

/* The index of value among names[0..n), or n. */
static unsigned name_index(const char *value, const char *const *names, unsigned n)
{
	unsigned i = 0;
	while (i < n && strcmp(value, names[i]) != 0)
		i++;
	return i;
}

static const char *const key_names[ZS_NKEYS] = {
	"layers", "world", "schemes", "unit", "steps", "batch", "seed",
	"precision", "optimizer", "lr", "beta1", "beta2", "eps", "framework", "bucket-cap", "prefetch",
	"ds-reduce-bucket", "ds-allgather-bucket", "ds-overlap-comm", "ds-persist", "offload", "ranks-per-node",
	"ds-prefetch-bucket", "ds-max-live", "torch-version", "torch-device", "optimizer-impl", "zero-grad", "attn",
	"wrapper", "grad-accum", "ddp-no-sync", "freeze", "lora-r", "lora-alpha", "lora-dropout", "lora-targets",
	"quant-base", "double-quant", "ds-sub-group-size", "ddp-find-unused",
	"recompute-impl", "logits", "experts-impl", "load-dtype", "fsdp-orig-params", "lora-dtype"};
_Static_assert(sizeof key_names / sizeof key_names[0] == ZS_NKEYS, "a name for every key");

/* One of a PyTorch option's names (names[first..n): "default" is no value
 * to give), or a one-line error listing them. */
static int set_name(const char *key, const char *value, const char *const *names, unsigned first, unsigned n,
                    unsigned *out, char **cause)
{
	unsigned i = first;
	while (i < n && strcmp(value, names[i]) != 0)
		i++;
	if (i < n) {
		*out = i;
		return 0;
	}
	char list[80] = "";
	for (unsigned j = first; j < n; j++)
		snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", j > first ? ", " : "", names[j]);
	return zs_fail(cause, "--%s: '%.40s' is not one of %s", key, value, list);
}

int zs_config_key(const char *name, size_t len)
{
	if (len == 6 && strncmp(name, "scheme", 6) == 0)
		name = "schemes", len = 7;
	if (len == 5 && strncmp(name, "units", 5) == 0)
		name = "unit", len = 4;
	for (int k = 0; k < ZS_NKEYS; k++)
		if (strlen(key_names[k]) == len && strncmp(name, key_names[k], len) == 0)
			return k;
	return -1;
}

int zs_config_set(struct zs_config *c, const char *key, const char *value, char **cause)
{
	struct zs_config t = *c; /* change c only if the whole value parses */
	struct list_ctx x = {&t, 0};
	unsigned long long v = 0;
	int k = zs_config_key(key, strlen(key));
	if (k < 0)
		return zs_fail(cause, "unknown option --%s", key);
	key = key_names[k];
	if (value == NULL)
		return zs_fail(cause, "--%s needs a value", key);
	switch ((enum zs_key)k) {
	case ZS_KEY_LAYERS:
		if (each_item(key, value, add_width, &x, cause) != 0)
			return -1;
		if (x.n < 2)
			return zs_fail(cause, "--layers: '%.40s' needs at least two widths (input and output)", value);
		t.nwidths = x.n;
		break;
	case ZS_KEY_WORLD:
		if (each_item(key, value, add_world, &x, cause) != 0)
			return -1;
		t.nworld = x.n;
		break;
	case ZS_KEY_SCHEMES:
		if (each_item("schemes", value, add_scheme, &x, cause) != 0)
			return -1;
		t.nschemes = x.n;
		break;
	case ZS_KEY_UNITS:
		if (each_item("unit", value, add_unit, &x, cause) != 0)
			return -1;
		t.nunits = x.n;
		break;
	case ZS_KEY_STEPS:
		if (zs_parse_uint(key, value, ZS_MAX_STEPS, "a step count", &v, cause) != 0)
			return -1;
		t.steps = (unsigned)v;
		break;
	case ZS_KEY_BATCH:
		if (zs_parse_uint(key, value, ZS_MAX_BATCH, "a batch size", &v, cause) != 0)
			return -1;
		t.batch = (unsigned)v;
		break;
	case ZS_KEY_SEED:
		/* 0 is a seed, so not zs_parse_uint (1..max). */
		errno = 0;
		if (*value == '\0' || strspn(value, "0123456789") != strlen(value) ||
		    (v = strtoull(value, NULL, 10), errno == ERANGE) || v > ZS_MAX_SEED)
			return zs_fail(cause, "--seed: '%.40s' is not a seed (a whole number 0..2^53-1 = %llu)", value,
			               ZS_MAX_SEED);
		t.seed = v;
		break;
	case ZS_KEY_LR:
		/* Below 1e-12 the fp32 update vanishes (an fp32 lr underflows at 1e-45). */
		if (set_real(key, value, 1e-12, 1e3, "a learning rate (a number in [1e-12, 1000])", &t.lr, cause) != 0)
			return -1;
		break;
	case ZS_KEY_BETA1:
	case ZS_KEY_BETA2:
		if (set_real(key, value, 0, 1, "a decay rate of Adam (a number in [0, 1))",
		             k == ZS_KEY_BETA1 ? &t.beta1 : &t.beta2, cause) != 0)
			return -1;
		if ((k == ZS_KEY_BETA1 ? t.beta1 : t.beta2) >= 1)
			return zs_fail(cause, "--%s: '%.40s' is not a decay rate of Adam (a number in [0, 1))", key, value);
		break;
	case ZS_KEY_EPS:
		/* In fp32, below 1e-30 it is not a number Adam can add. */
		if (set_real(key, value, 1e-30, 1, "Adam's epsilon (a number in [1e-30, 1])", &t.eps, cause) != 0)
			return -1;
		break;
	case ZS_KEY_PRECISION:
		if (zs_precision_parse(value, &t.precision) != 0)
			return zs_fail(cause, "--precision: unknown precision '%.40s' (mixed, fp32, amp-bf16, amp-fp16)", value);
		break;
	case ZS_KEY_OPTIMIZER:
		if (zs_optimizer_parse(value, &t.optimizer) != 0)
			return zs_fail(cause, "--optimizer: unknown optimizer '%.40s' (adam, sgd)", value);
		break;
	case ZS_KEY_FRAMEWORK:
		if ((v = name_index(value, framework_names, ZS_NFRAMEWORKS)) == ZS_NFRAMEWORKS)
			return zs_fail(cause, "--framework: unknown framework '%.40s' (paper, torch, deepspeed)", value);
		t.framework = (enum zs_framework)v;
		break;
	case ZS_KEY_BUCKET_CAP:
		/* DDP takes any size; 2^20 MB (1 TiB) keeps the bytes exact. */
		if (set_real(key, value, 0, 1048576, "a bucket size in MB (a number in [0, 1048576])", &t.bucket_cap_mb,
		             cause) != 0)
			return -1;
		break;
	case ZS_KEY_PREFETCH:
		if ((v = name_index(value, prefetch_names, ZS_NPREFETCH)) == ZS_NPREFETCH)
			return zs_fail(cause, "--prefetch: unknown prefetch '%.40s' (none, backward-pre)", value);
		t.prefetch = (enum zs_prefetch)v;
		break;
	case ZS_KEY_DS_REDUCE_BUCKET:
	case ZS_KEY_DS_ALLGATHER_BUCKET: {
		/* Allocated at full size on every rank: at most 4e9 elements
		 * (8 GB of fp16, 16 GB of fp32) a buffer. */
		double *b = k == ZS_KEY_DS_REDUCE_BUCKET ? &t.ds_reduce_bucket : &t.ds_allgather_bucket;
		if (zs_parse_count(value, ZS_MAX_DS_BUCKET, b, cause) != 0) {
			char *why = *cause;
			*cause = zs_asprintf("--%s: %s (a bucket in elements, 1..4e9)", key, why);
			free(why);
			return -1;
		}
		/* DeepSpeed asserts allgather_bucket_size % 2 == 0 (stage_1_and_2.py). */
		if (k == ZS_KEY_DS_ALLGATHER_BUCKET && fmod(*b, 2) != 0)
			return zs_fail(cause, "--%s: '%.40s' is odd (DeepSpeed requires a multiple of 2)", key, value);
		break;
	}
	case ZS_KEY_DS_OVERLAP_COMM:
		if (strcmp(value, "on") != 0 && strcmp(value, "off") != 0)
			return zs_fail(cause, "--ds-overlap-comm: '%.40s' is neither on nor off", value);
		t.ds_overlap_comm = strcmp(value, "on") == 0;
		break;
	case ZS_KEY_OFFLOAD:
		if ((v = name_index(value, offload_names, ZS_NOFFLOADS)) == ZS_NOFFLOADS)
			return zs_fail(cause, "--offload: unknown offload '%.40s' (none, optimizer, params)", value);
		t.offload = (enum zs_offload)v;
		break;
	case ZS_KEY_RANKS_PER_NODE:
		if (zs_parse_uint(key, value, ZS_MAX_WORLD, "a number of ranks a node", &v, cause) != 0)
			return -1;
		t.ranks_per_node = (unsigned)v;
		break;
	case ZS_KEY_DS_PERSIST:
	case ZS_KEY_DS_PREFETCH_BUCKET:
	case ZS_KEY_DS_MAX_LIVE:
	case ZS_KEY_DS_SUB_GROUP: {
		/* 0 is a setting (nothing persists, nothing prefetched, a sub
		 * group a parameter), so not zs_parse_count; DeepSpeed's fields
		 * are ints, ge=0. */
		double *to = k == ZS_KEY_DS_PERSIST ? &t.ds_persist : k == ZS_KEY_DS_MAX_LIVE ? &t.ds_max_live
		             : k == ZS_KEY_DS_SUB_GROUP ? &t.ds_sub_group : &t.ds_prefetch_bucket;
		if (set_real(key, value, 0, ZS_MAX_PARAMS, "a number of elements (a whole number, 0 to 1e14)", to, cause) != 0)
			return -1;
		if (*to != floor(*to))
			return zs_fail(cause, "--%s: '%.40s' is not a number of elements (a whole number, 0 to 1e14)", key,
			               value);
		break;
	}
	case ZS_KEY_TORCH_VERSION:
	case ZS_KEY_TORCH_DEVICE:
	case ZS_KEY_OPTIM_IMPL:
	case ZS_KEY_ZERO_GRAD:
	case ZS_KEY_ATTN:
	case ZS_KEY_WRAPPER: {
		/* "default" is what is left untouched, not a value to give. */
		unsigned i = 0;
		int r = k == ZS_KEY_TORCH_VERSION ? set_name(key, value, torch_version_names, 0, NNAMES(torch_version_names), &i, cause)
		        : k == ZS_KEY_TORCH_DEVICE ? set_name(key, value, torch_device_names, 0, NNAMES(torch_device_names), &i, cause)
		        : k == ZS_KEY_OPTIM_IMPL ? set_name(key, value, optim_impl_names, 1, NNAMES(optim_impl_names), &i, cause)
		        : k == ZS_KEY_ZERO_GRAD ? set_name(key, value, zero_grad_names, 1, NNAMES(zero_grad_names), &i, cause)
		        : k == ZS_KEY_ATTN ? set_name(key, value, attn_names, 1, NNAMES(attn_names), &i, cause)
		                           : set_name(key, value, wrapper_names, 0, NNAMES(wrapper_names), &i, cause);
		if (r != 0)
			return -1;
		if (k == ZS_KEY_TORCH_VERSION)
			t.torch_version = (enum zs_torch_version)i;
		else if (k == ZS_KEY_TORCH_DEVICE)
			t.torch_device = (enum zs_torch_device)i;
		else if (k == ZS_KEY_OPTIM_IMPL)
			t.optim_impl = (enum zs_optim_impl)i;
		else if (k == ZS_KEY_ZERO_GRAD)
			t.zero_grad = (enum zs_zero_grad)i;
		else if (k == ZS_KEY_ATTN)
			t.attn = (enum zs_attn)i;
		else
			t.wrapper = (enum zs_wrapper)i;
		break;
	}
	case ZS_KEY_GRAD_ACCUM:
		if (zs_parse_uint(key, value, ZS_MAX_GRAD_ACCUM, "a number of micro-steps", &v, cause) != 0)
			return -1;
		t.grad_accum = (unsigned)v;
		break;
	case ZS_KEY_DDP_NO_SYNC:
		if (strcmp(value, "on") != 0 && strcmp(value, "off") != 0)
			return zs_fail(cause, "--%s: '%.40s' is not one of on, off", key, value);
		t.ddp_no_sync = strcmp(value, "on") == 0;
		break;
	case ZS_KEY_FREEZE:
		/* checked whole here (a bad term is one line, exit 2); matched
		 * against the model's names when the step is built */
		if (strlen(value) > ZS_FREEZE_MAX)
			return zs_fail(cause, "--freeze: the pattern is %zu characters long (at most %d)", strlen(value),
			               ZS_FREEZE_MAX);
		if (zs_freeze_check(value, cause) != 0)
			return -1;
		snprintf(t.freeze, sizeof t.freeze, "%s", value);
		break;
	case ZS_KEY_LORA_R:
		if (zs_parse_uint(key, value, ZS_MAX_LORA_R, "a rank", &v, cause) != 0)
			return -1;
		t.lora_r = (unsigned)v;
		break;
	case ZS_KEY_LORA_ALPHA:
		if (set_real(key, value, 0, 1e9, "a positive number (at most 1e9)", &t.lora_alpha, cause) != 0)
			return -1;
		if (t.lora_alpha <= 0)
			return zs_fail(cause, "--lora-alpha: '%.40s' is not a positive number (at most 1e9)", value);
		break;
	case ZS_KEY_LORA_DROPOUT:
		if (set_real(key, value, 0, 1, "a probability (0 <= p < 1)", &t.lora_dropout, cause) != 0)
			return -1;
		if (t.lora_dropout >= 1)
			return zs_fail(cause, "--lora-dropout: '%.40s' is not a probability (0 <= p < 1)", value);
		break;
	case ZS_KEY_LORA_TARGETS:
		if (!*value || strlen(value) > ZS_LORA_TARGETS_MAX)
			return zs_fail(cause, "--lora-targets: give all-linear or a comma list of module names (1 to %d "
			               "characters)", ZS_LORA_TARGETS_MAX);
		snprintf(t.lora_targets, sizeof t.lora_targets, "%s", value);
		break;
	case ZS_KEY_QUANT_BASE:
		/* bnb's other 4-bit type, fp4, is Linear4bit's default but not
		 * QLoRA's: not described */
		if (strcmp(value, "nf4") != 0 && strcmp(value, "none") != 0)
			return zs_fail(cause, "--quant-base: '%.40s' is not one of nf4, none", value);
		t.quant_nf4 = strcmp(value, "nf4") == 0;
		break;
	case ZS_KEY_DOUBLE_QUANT:
		if (strcmp(value, "on") != 0 && strcmp(value, "off") != 0)
			return zs_fail(cause, "--double-quant: '%.40s' is not one of on, off", value);
		t.double_quant = strcmp(value, "on") == 0;
		break;
	case ZS_KEY_DDP_FIND_UNUSED:
		if (strcmp(value, "on") != 0 && strcmp(value, "off") != 0)
			return zs_fail(cause, "--ddp-find-unused: '%.40s' is not one of on, off", value);
		t.ddp_find_unused = strcmp(value, "on") == 0;
		break;
	case ZS_KEY_RECOMPUTE_IMPL:
		if (strcmp(value, "reentrant") != 0 && strcmp(value, "non-reentrant") != 0)
			return zs_fail(cause, "--recompute-impl: '%.40s' is not one of reentrant, non-reentrant", value);
		t.recompute_nonreentrant = strcmp(value, "non-reentrant") == 0;
		break;
	case ZS_KEY_LOGITS:
		if (strcmp(value, "kept") != 0 && strcmp(value, "dropped") != 0)
			return zs_fail(cause, "--logits: '%.40s' is not one of kept, dropped", value);
		t.logits_dropped = strcmp(value, "dropped") == 0;
		break;
	case ZS_KEY_EXPERTS_IMPL: {
		unsigned i = name_index(value, experts_impl_names, NNAMES(experts_impl_names));
		if (i == NNAMES(experts_impl_names))
			return zs_fail(cause, "--experts-impl: '%.40s' is not one of modulelist, eager, grouped_mm, batched_mm",
			               value);
		t.experts_impl = (enum zs_experts_impl)i;
		break;
	}
	case ZS_KEY_LOAD_DTYPE:
		if (strcmp(value, "fp32") != 0 && strcmp(value, "bf16") != 0)
			return zs_fail(cause, "--load-dtype: '%.40s' is not one of fp32, bf16", value);
		t.load_bf16 = strcmp(value, "bf16") == 0;
		break;
	case ZS_KEY_FSDP_ORIG_PARAMS:
		if (strcmp(value, "on") != 0 && strcmp(value, "off") != 0)
			return zs_fail(cause, "--fsdp-orig-params: '%.40s' is not one of on, off", value);
		t.fsdp_orig_params = strcmp(value, "on") == 0;
		break;
	case ZS_KEY_LORA_DTYPE:
		if (strcmp(value, "fp32") != 0 && strcmp(value, "bf16") != 0)
			return zs_fail(cause, "--lora-dtype: '%.40s' is not one of fp32, bf16", value);
		t.lora_bf16 = strcmp(value, "bf16") == 0;
		break;
	case ZS_NKEYS:
		break;
	}
	t.given |= ZS_KEY_BIT(k);
	*c = t;
	return 0;
}

/* The keys of zerosim-sweep/5 and the JSON type each takes: a list key
 * takes an array (or one item), the others one value. A key's `joined`
 * says that its value is itself a comma list (--freeze A,B, --lora-targets
 * q_proj,v_proj): a string holding several is the command line's value,
 * an array's items join into one, and an empty array is refused with that
 * hint. Each version's keys follow the one before's (spec_since). */
enum spec_type { SPEC_NUMBER, SPEC_STRING, SPEC_NUMBERS, SPEC_STRINGS };
static const struct {
	const char *key;
	enum spec_type type;
	const char *joined;
} spec_keys[] = {
	{"layers", SPEC_NUMBERS, NULL}, {"world", SPEC_NUMBERS, NULL}, {"schemes", SPEC_STRINGS, NULL},
	{"units", SPEC_STRINGS, NULL}, {"steps", SPEC_NUMBER, NULL}, {"batch", SPEC_NUMBER, NULL},
	{"seed", SPEC_NUMBER, NULL}, {"precision", SPEC_STRING, NULL}, {"optimizer", SPEC_STRING, NULL},
	{"lr", SPEC_NUMBER, NULL}, {"beta1", SPEC_NUMBER, NULL}, {"beta2", SPEC_NUMBER, NULL},
	{"eps", SPEC_NUMBER, NULL}, {"framework", SPEC_STRING, NULL}, {"bucket-cap", SPEC_NUMBER, NULL},
	{"prefetch", SPEC_STRING, NULL},
	/* zerosim-sweep/2 */
	{"torch-version", SPEC_STRING, NULL}, {"torch-device", SPEC_STRING, NULL},
	{"optimizer-impl", SPEC_STRING, NULL}, {"zero-grad", SPEC_STRING, NULL}, {"attn", SPEC_STRING, NULL},
	{"wrapper", SPEC_STRING, NULL},
	/* zerosim-sweep/3 */
	{"grad-accum", SPEC_NUMBER, NULL}, {"ddp-no-sync", SPEC_STRING, NULL},
	{"freeze", SPEC_STRINGS, "leave the key out to train every parameter"},
	/* zerosim-sweep/4: LoRA's, QLoRA's 4-bit base and the dtype loaded in */
	{"lora-r", SPEC_NUMBER, NULL}, {"lora-alpha", SPEC_NUMBER, NULL}, {"lora-dropout", SPEC_NUMBER, NULL},
	{"lora-targets", SPEC_STRINGS, "leave the key out for the family's default targets"},
	{"quant-base", SPEC_STRING, NULL}, {"double-quant", SPEC_STRING, NULL}, {"load-dtype", SPEC_STRING, NULL},
	{"fsdp-orig-params", SPEC_STRING, NULL},
	/* zerosim-sweep/5: the adapters' dtype (s52) */
	{"lora-dtype", SPEC_STRING, NULL},
};
#define NSPEC_KEYS (sizeof spec_keys / sizeof spec_keys[0])
#define SPEC_VERSION 5
/* spec_keys[0..spec_ends[v]) are zerosim-sweep/v's (v = 1..SPEC_VERSION) */
static const size_t spec_ends[SPEC_VERSION + 1] = {0, 16, 22, 25, 33, NSPEC_KEYS};

/* The first version that has spec_keys[i]. */
static int spec_since(size_t i)
{
	int v = 1;
	while (i >= spec_ends[v])
		v++;
	return v;
}

/* A JSON number as the command line would give it: a whole number's
 * digits (exact below 2^53), else the shortest form that reads back. */
static int spec_number(const cJSON *it, const char *key, char **out, char **cause)
{
	double d = it->valuedouble;
	if (!isfinite(d))
		return zs_fail(cause, "\"%s\" is not a finite number", key);
	if (d < 0)
		return zs_fail(cause, "\"%s\" is %s, a negative number", key, zs_number_text(d, (char[32]){0}, 32));
	if (d == floor(d) && d < 9007199254740992.0)
		*out = zs_asprintf("%.0f", d);
	else if (d == floor(d)) /* not quoted: the digits in the file are lost above 2^53 */
		return zs_fail(cause, "\"%s\" is a whole number of 2^53 or more, where a JSON number is no longer exact",
		               key);
	else
		*out = zs_strdup(zs_number_text(d, (char[32]){0}, 32));
	return 0;
}

/* A JSON value of the key's type as the string the command line would give. */
static int spec_value(const cJSON *it, const char *key, enum spec_type type, char **out, char **cause)
{
	int numbers = type == SPEC_NUMBER || type == SPEC_NUMBERS;
	/* a comma list itself (spec_keys' joined) */
	const char *joined = NULL;
	for (size_t i = 0; i < NSPEC_KEYS; i++)
		if (strcmp(key, spec_keys[i].key) == 0)
			joined = spec_keys[i].joined;
	int commas = joined != NULL;
	static const char *const type_name[] = {"a number", "a string", "an array of numbers", "an array of strings"};
	if ((type == SPEC_NUMBERS || type == SPEC_STRINGS) && cJSON_IsArray(it)) {
		/* as every list's: an empty one is refused, not read as none */
		if (commas && cJSON_GetArraySize(it) == 0)
			return zs_fail(cause, "\"%s\": the list is empty (%s)", key, joined);
		size_t cap = 16, n = 0;
		char *s = zs_malloc(cap);
		s[0] = '\0';
		const cJSON *e;
		cJSON_ArrayForEach(e, it) {
			char *one = NULL;
			if (cJSON_IsArray(e)) {
				free(s);
				return zs_fail(cause, "\"%s\" holds a nested array", key);
			}
			if (numbers ? !cJSON_IsNumber(e) : !cJSON_IsString(e) || (!commas && strchr(e->valuestring, ',') != NULL)) {
				free(s);
				return zs_fail(cause, "\"%s\" is not %s", key, type_name[type]);
			}
			if (spec_value(e, key, numbers ? SPEC_NUMBER : SPEC_STRING, &one, cause) != 0) {
				free(s);
				return -1;
			}
			size_t need = n + strlen(one) + 2;
			if (need > cap) {
				cap = need * 2;
				s = zs_realloc(s, cap);
			}
			n += (size_t)sprintf(s + n, "%s%s", n ? "," : "", one);
			free(one);
		}
		*out = s;
		return 0;
	}
	if (numbers && cJSON_IsNumber(it))
		return spec_number(it, key, out, cause);
	/* A list item may not hold the separator the list is joined with. */
	if (!numbers && cJSON_IsString(it) && (commas || strchr(it->valuestring, ',') == NULL)) {
		*out = zs_strdup(it->valuestring);
		return 0;
	}
	return zs_fail(cause, "\"%s\" is not %s", key, type_name[type]);
}

int zs_config_set_json(struct zs_config *c, const char *key, const cJSON *value, char **cause)
{
	size_t i = 0;
	char *text = NULL, *why = NULL;
	int r = 0;
	while (i < NSPEC_KEYS && strcmp(key, spec_keys[i].key) != 0)
		i++;
	if (i == NSPEC_KEYS)
		return zs_fail(cause, "unknown key \"%.40s\"", key);
	if (spec_value(value, key, spec_keys[i].type, &text, &why) != 0) {
		r = zs_fail(cause, "%s", why);
	} else if (zs_config_set(c, key, text, &why) != 0) {
		/* The file's key, not the option's spelling: "--unit: ..." is "units": ... */
		const char *rest = strncmp(why, "--", 2) == 0 ? why + strcspn(why, ": ") : why;
		r = zs_fail(cause, "\"%s\"%s", key, rest);
	}
	free(text);
	free(why);
	return r;
}

int zs_config_load_spec(struct zs_config *c, const char *path, char **cause)
{
	cJSON *root;
	char formats[96] = "";
	for (int v = SPEC_VERSION; v >= 1; v--)
		snprintf(formats + strlen(formats), sizeof formats - strlen(formats), "%szerosim-sweep/%d",
		         v < SPEC_VERSION ? " or " : "", v);
	if (zs_json_load(path, formats, &root, cause) != 0)
		return -1;
	/* An older version's file is read as before: the later versions' keys
	 * are refused there, naming the version that has them. */
	const char *fmt = cJSON_GetObjectItemCaseSensitive(root, "format")->valuestring;
	int version = fmt[strlen(fmt) - 1] - '0';
	size_t nkeys = spec_ends[version];
	struct zs_config t = *c;
	int r = 0;
	const cJSON *it;
	cJSON_ArrayForEach(it, root) {
		size_t i = 0;
		while (i < nkeys && strcmp(it->string, spec_keys[i].key) != 0)
			i++;
		if (strcmp(it->string, "format") == 0)
			continue;
		if (i == nkeys) {
			size_t j = i;
			while (j < NSPEC_KEYS && strcmp(it->string, spec_keys[j].key) != 0)
				j++;
			if (j < NSPEC_KEYS) {
				int since = spec_since(j);
				r = zs_fail(cause, "%s: \"%s\" is a key of zerosim-sweep/%d, not of this zerosim-sweep/%d file "
				            "(give \"format\": \"zerosim-sweep/%d\")", path, it->string, since, version, since);
				break;
			}
			const char *hint = strcmp(it->string, "unit") == 0 ? " (did you mean \"units\"?)"
			                   : strcmp(it->string, "scheme") == 0 ? " (did you mean \"schemes\"?)"
			                   : strncmp(it->string, "ds-", 3) == 0 || strcmp(it->string, "offload") == 0 ||
			                             strcmp(it->string, "ranks-per-node") == 0
			                       ? " (DeepSpeed's settings are command-line options only)"
			                       : "";
			char known[512] = "";
			for (size_t k = 0; k < nkeys; k++)
				snprintf(known + strlen(known), sizeof known - strlen(known), "%s%s", k ? ", " : "",
				         spec_keys[k].key);
			r = zs_fail(cause, "%s: unknown key \"%.40s\"%s; zerosim-sweep/%d has %s", path, it->string, hint,
			            version, known);
			break;
		}
		for (const cJSON *e = root->child; e != it && r == 0; e = e->next)
			if (strcmp(e->string, it->string) == 0)
				r = zs_fail(cause, "%s: the key \"%.40s\" is given twice", path, it->string);
		if (r != 0)
			break;
		char *why = NULL;
		if (zs_config_set_json(&t, spec_keys[i].key, it, &why) != 0)
			r = zs_fail(cause, "%s: %s", path, why);
		free(why);
		if (r != 0)
			break;
	}
	cJSON_Delete(root);
	if (r == 0)
		*c = t;
	return r;
}

uint64_t zs_layer_params(const size_t *widths, size_t l)
{
	return (uint64_t)widths[l] * widths[l + 1] + widths[l + 1];
}

uint64_t zs_params(const size_t *widths, size_t nwidths)
{
	uint64_t psi = 0;
	for (size_t l = 0; l + 1 < nwidths; l++)
		psi += zs_layer_params(widths, l);
	return psi;
}

double zs_config_params(const struct zs_config *c)
{
	return (double)zs_params(c->widths, c->nwidths);
}

int zs_config_validate(const struct zs_config *c, char **cause)
{
	if (c->nwidths < 2)
		return zs_fail(cause, "--layers: at least two widths are needed");
	double psi = zs_config_params(c);
	if (psi > ZS_MAX_PARAMS)
		return zs_fail(cause, "--layers: %.3g parameters is more than zerosim counts exactly (%.0e)", psi,
		               ZS_MAX_PARAMS);
	if (c->nworld == 0 || c->nschemes == 0 || c->nunits == 0)
		return zs_fail(cause, "nothing to run: an empty --world, --schemes or --unit list");
	/* torch's options where no scheme of the sweep builds their class (the
	 * other frameworks refuse them: zs_framework_check). */
	if (c->framework == ZS_FW_TORCH) {
		unsigned ddp = 0, fsdp = 0;
		char list[64] = "";
		for (size_t i = 0; i < c->nschemes; i++) {
			ddp |= c->schemes[i] <= ZS_ZERO1;
			fsdp |= c->schemes[i] >= ZS_ZERO2;
			snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", i ? "," : "",
			         zs_scheme_name(c->schemes[i]));
		}
		if ((c->given & ZS_KEY_BIT(ZS_KEY_BUCKET_CAP)) && !ddp)
			return zs_fail(cause, "--bucket-cap is DDP's bucket size, and --schemes %s builds no DDP "
			               "(torch's dp and zero1 do)", list);
		if (c->fsdp_orig_params && !fsdp)
			return zs_fail(cause, "--fsdp-orig-params is FSDP's use_orig_params, and --schemes %s builds no FSDP "
			               "(torch's zero2 and zero3 do)", list);
		if ((c->given & ZS_KEY_BIT(ZS_KEY_PREFETCH)) && !fsdp)
			return zs_fail(cause, "--prefetch is FSDP's backward prefetch, and --schemes %s builds no FSDP "
			               "(torch's zero2 and zero3 do)", list);
	}
	return zs_config_check_torch(c, cause);
}

/* The PyTorch step (util/autograd.h) runs Hugging Face's model whole,
 * under --wrapper none and ddp alike: it has no ZeRO-3 gather units, so a
 * --unit would change the rows' label and nothing else; refused rather
 * than recorded. --model sets the unit to layer unasked: only a unit
 * given (on the command line or in a spec) is refused. */
static int check_step_unit(const struct zs_config *c, char **cause)
{
	if (c->given & ZS_KEY_BIT(ZS_KEY_UNITS))
		return zs_fail(cause, "--unit: --wrapper %s runs the PyTorch step over the whole model, which has no "
		               "units (ZeRO-3's gather units): leave --unit out", zs_wrapper_name(c->wrapper));
	return 0;
}

/* LoRA (--lora-r): so far the plain loop's PyTorch step and DDP over it
 * (its buckets take the adapters' gradients alone: frozen parameters have
 * no slot), fp32 or autocast (tests/ft_lora.sh checks
 * what is described against tests/ft_torch.py), and FSDP with PEFT's wrap
 * policy, each adapter a unit of its own (util/ag_fsdp.h,
 * tests/ft_fsdp_lora.sh); its other keys only with it. */
/* --lora-r under the paper's step and DeepSpeed's own (docs/finetune.md,
 * "LoRA under the paper's schedule and DeepSpeed's own step"; the latter
 * dp, ZeRO-1, ZeRO-2 and ZeRO-3 without offload): fp32 or mixed, with or
 * without the adapters' dropout (drawn as the PyTorch step's,
 * engine/tfm_net.c), with or without the 4-bit base (under DeepSpeed's
 * ZeRO-3 its codes a frozen tensor of the model's dtype: docs/
 * finetune.md, "QLoRA under DeepSpeed's own ZeRO-3"), built so far; the model's part (a
 * mixture, --unit model, the paper's zero3 at N > 1) is util/lora.h's
 * zs_lora_paper_check. */
static int check_lora_paper(const struct zs_config *c, char **cause)
{
	const char *fw = zs_framework_name(c->framework);
	if (c->precision == ZS_AMP_BF16 || c->precision == ZS_AMP_FP16)
		return zs_fail(cause, "--lora-r under --framework %s: --precision %s is PyTorch's autocast, the PyTorch "
		               "step's (give --framework torch, or --precision fp32 or mixed)", fw,
		               zs_precision_name(c->precision));
	if (c->precision != ZS_FP32 && c->precision != ZS_MIXED)
		return zs_fail(cause, "--lora-r under --framework %s: --precision %s is not run with adapters yet (give "
		               "--precision fp32 or mixed)", fw, zs_precision_name(c->precision));
	if (c->framework != ZS_FW_DEEPSPEED)
		return 0;
	/* DeepSpeed's own step (docs/finetune.md, "LoRA under DeepSpeed's
	 * own step", "LoRA under DeepSpeed's ZeRO-3"): dp, ZeRO-1, ZeRO-2
	 * and ZeRO-3 on the device, as its --freeze (the same frozen layout:
	 * the base a frozen tensor of each unit; ZeRO-3's each tensor's own
	 * partition, each adapter a module of the coordinator's) */
	if (c->offload != ZS_OFFLOAD_NONE)
		return zs_fail(cause, "--lora-r under --framework deepspeed with --offload %s: not described yet (give "
		               "--offload none)", zs_offload_name(c->offload));
	return 0;
}

static int check_lora(const struct zs_config *c, char **cause)
{
	static const enum zs_key with_r[] = {ZS_KEY_LORA_ALPHA, ZS_KEY_LORA_DROPOUT, ZS_KEY_LORA_TARGETS};
	for (size_t i = 0; i < sizeof with_r / sizeof with_r[0]; i++)
		if (!c->lora_r && (c->given & ZS_KEY_BIT(with_r[i])))
			return zs_fail(cause, "--%s: only with --lora-r", key_names[with_r[i]]);
	/* by whether given, as --lora-alpha: --double-quant off and
	 * --quant-base none alone would say nothing */
	if ((c->given & ZS_KEY_BIT(ZS_KEY_DOUBLE_QUANT)) && !c->quant_nf4)
		return zs_fail(cause, "--double-quant: only with --quant-base nf4 (it quantizes the 4-bit base's absmax)");
	/* --load-dtype bf16: QLoRA's bf16 recipe (docs/finetune.md, "QLoRA
	 * loaded in bf16"): the plain loop, DDP and FSDP of PyTorch 2.6,
	 * without autocast or under bf16 autocast ("... under autocast"); the
	 * rest by name */
	if (c->load_bf16 && !c->quant_nf4)
		return zs_fail(cause, "--load-dtype bf16: only with --quant-base nf4 (QLoRA's bf16 recipe) so far");
	if (c->load_bf16 && (c->framework != ZS_FW_TORCH || (c->wrapper != ZS_WRAPPER_NONE && c->wrapper != ZS_WRAPPER_FSDP && c->wrapper != ZS_WRAPPER_DDP)))
		return zs_fail(cause, "--load-dtype bf16 under --framework %s --wrapper %s: not described yet (give "
		               "--framework torch --wrapper none, ddp or fsdp)", zs_framework_name(c->framework),
		               zs_wrapper_name(c->wrapper));
	if (c->load_bf16 && c->precision != ZS_FP32 && c->precision != ZS_AMP_BF16)
		return zs_fail(cause, "--load-dtype bf16 with --precision %s: not described yet (give --precision fp32: "
		               "no autocast, every op in its operands' dtype, or amp-bf16: bf16 autocast)",
		               zs_precision_name(c->precision));
	/* --lora-dtype bf16: TRL's SFTTrainer's cast of a quantized model's
	 * trainable parameters (docs/finetune.md, "TRL's bf16 adapters"),
	 * over the bf16-loaded QLoRA it is given; checked against 2.6 */
	if ((c->given & ZS_KEY_BIT(ZS_KEY_LORA_DTYPE)) && !c->lora_r)
		return zs_fail(cause, "--lora-dtype: only with --lora-r");
	/* (the adapters' dtype elsewhere is the step's own: DeepSpeed's
	 * module.bfloat16() casts them, the paper's step keeps its precision's) */
	if ((c->given & ZS_KEY_BIT(ZS_KEY_LORA_DTYPE)) && (c->framework != ZS_FW_TORCH || !zs_wrapper_step(c)))
		return zs_fail(cause, "--lora-dtype: the adapters' dtype of the PyTorch step (--framework torch --wrapper "
		               "none, ddp or fsdp); elsewhere the step's precision sets it (leave --lora-dtype out)");
	if (c->lora_bf16 && !c->load_bf16)
		return zs_fail(cause, "--lora-dtype bf16: only with --load-dtype bf16 (TRL's cast over a bf16-loaded "
		               "QLoRA) so far");
	if (c->lora_bf16 && c->wrapper == ZS_WRAPPER_FSDP)
		return zs_fail(cause, "--lora-dtype bf16 under --wrapper fsdp: not described yet (give --wrapper none or "
		               "ddp)");
	if ((c->given & ZS_KEY_BIT(ZS_KEY_QUANT_BASE)) && !c->lora_r)
		return zs_fail(cause, "--quant-base %s: only with --lora-r (the 4-bit base is frozen: QLoRA trains "
		               "adapters over it)", c->quant_nf4 ? "nf4" : "none");
	if (!c->lora_r)
		return 0;
	/* get_peft_model freezes every base parameter (PEFT v0.20.0's
	 * _mark_only_adapters_as_trainable): --freeze then freezes adapters by
	 * name (blocks:0-0, the adapters of block 0), as tests/ft_torch.py
	 * does after wrapping; the PyTorch step's plain loop, DDP and FSDP (a
	 * frozen adapter flattened into its block's unit: util/ag_fsdp.c's
	 * make_units) run it, DeepSpeed's engine (ZeRO-1/2 in fp32: a frozen
	 * adapter stays out of the flat buffer, util/ag_ds.c), and the paper's
	 * step (util/lora.h's zs_lora_paper_check judges the pattern) */
	if (c->freeze[0] && c->framework != ZS_FW_PAPER &&
	    (c->framework != ZS_FW_TORCH || (c->wrapper != ZS_WRAPPER_NONE && c->wrapper != ZS_WRAPPER_DDP &&
	                                     c->wrapper != ZS_WRAPPER_FSDP)) &&
	    (c->framework != ZS_FW_DEEPSPEED || c->wrapper != ZS_WRAPPER_DEEPSPEED))
		return zs_fail(cause, "--freeze with --lora-r: frozen adapters (LoRA already freezes every base parameter, "
		               "so --freeze can only freeze adapters) are described under --framework paper, torch "
		               "--wrapper none, ddp or fsdp, and --wrapper deepspeed, only so far");
	if (c->framework == ZS_FW_PAPER || (c->framework == ZS_FW_DEEPSPEED && c->wrapper != ZS_WRAPPER_DEEPSPEED))
		return check_lora_paper(c, cause);
	if ((c->framework != ZS_FW_TORCH && c->wrapper != ZS_WRAPPER_DEEPSPEED) || !zs_wrapper_step(c))
		return zs_fail(cause, "--lora-r: only under --framework paper or deepspeed, or torch with --wrapper none, ddp "
		               "or fsdp, so far (--framework %s --wrapper %s: its DDP buckets and FSDP units hold every "
		               "parameter, as under --freeze; docs/finetune.md)",
		               zs_framework_name(c->framework), zs_wrapper_name(c->wrapper));
	/* bitsandbytes 0.47.0 requires torch >= 2.2 (its pyproject.toml line 45;
	 * it registers its ops with torch.library.register_kernel) */
	if (c->quant_nf4 && c->torch_version == ZS_TORCH_1_13)
		return zs_fail(cause, "--quant-base nf4 with --torch-version 1.13: bitsandbytes 0.47.0 needs torch >= 2.2 "
		               "(give --torch-version 2.6)");
	/* under bf16 autocast the compute dtype is bf16, as the QLoRA recipe
	 * sets it (bnb_4bit_compute_dtype=torch.bfloat16: docs/finetune.md,
	 * "QLoRA under bf16 autocast"); float16's (its compute dtype, the
	 * CPU's float16 autocast) is not described */
	if (c->quant_nf4 && c->precision == ZS_AMP_FP16)
		return zs_fail(cause, "--quant-base nf4 with --precision amp-fp16: QLoRA under float16 autocast is not "
		               "described yet (give --precision amp-bf16 or fp32)");
	return 0;
}

/* --wrapper ddp: torch's DistributedDataParallel over the PyTorch step
 * (util/ag_ddp.h), which is torch's dp at any N, and with
 * ZeroRedundancyOptimizer torch's zero1 (util/ag_zero1.h): one of them a
 * run, since the step is built for the run's scheme. */
static int check_ddp(const struct zs_config *c, char **cause)
{
	if (c->framework != ZS_FW_TORCH)
		return zs_fail(cause, "--wrapper ddp is torch's DistributedDataParallel: give --framework torch");
	for (size_t i = 0; i < c->nschemes; i++)
		if (c->schemes[i] != ZS_DP && c->schemes[i] != ZS_ZERO1)
			return zs_fail(cause, "--wrapper ddp runs torch's dp (DistributedDataParallel) and zero1 (with "
			               "ZeroRedundancyOptimizer) only: give --schemes dp or zero1 (it lists %s)",
			               zs_scheme_name(c->schemes[i]));
		else if (c->schemes[i] != c->schemes[0])
			return zs_fail(cause, "--wrapper ddp runs one scheme a run, dp or zero1 (it lists %s and %s): run "
			               "them apart", zs_scheme_name(c->schemes[0]), zs_scheme_name(c->schemes[i]));
	for (int k = ZS_KEY_BUCKET_CAP + 1; k <= ZS_KEY_DS_MAX_LIVE; k++)
		if (c->given & ZS_KEY_BIT(k))
			return zs_fail(cause, "--%s: --wrapper ddp builds no %s to set", key_names[k],
			               k <= ZS_KEY_PREFETCH ? "FSDP" : "DeepSpeed engine");
	return check_step_unit(c, cause);
}

/* --fsdp-orig-params on (FSDP's use_orig_params=True: util/ag_fsdp.h;
 * docs/finetune.md, "FSDP with use_orig_params=True"): built for PyTorch
 * 2.6's FULL_SHARD and SHARD_GRAD_OP at any K in fp32 without prefetch,
 * checkpointing or a 4-bit base, LoRA's adapters in their blocks' units;
 * the rest by name. */
static int check_fsdp_orig_params(const struct zs_config *c, char **cause)
{
	const char *what = c->torch_version == ZS_TORCH_1_13 ? "--torch-version 1.13 (its FSDP has no use_orig_params: "
	                                                       "flat_param.py 334-340; give --torch-version 2.6)"
	                   : c->precision != ZS_FP32    ? "a --precision other than fp32 (give --precision fp32)"
	                   : c->prefetch != ZS_PREFETCH_NONE ? "--prefetch backward-pre (give --prefetch none)"
	                   : c->quant_nf4               ? "--quant-base nf4 (give --quant-base none)"
	                   : c->hf_recompute            ? "--recompute full (give --recompute none)"
	                   : zs_optim_impl_resolve(c) != ZS_OPTIM_SINGLE
	                           ? "Adam's foreach or fused (give --optimizer-impl single)"
	                                                : NULL;
	if (what != NULL)
		return zs_fail(cause, "--fsdp-orig-params on with %s: not compared with PyTorch yet", what);
	return 0;
}

/* --wrapper fsdp: torch's FullyShardedDataParallel over the PyTorch step
 * (util/ag_fsdp.h), FULL_SHARD (torch's zero3) or SHARD_GRAD_OP (zero2),
 * at 1.13's defaults or 2.6's (docs/schedule.md, "FSDP over the PyTorch
 * step"): one of them a run, since the step is built for the run's
 * scheme (as --wrapper ddp's dp and zero1). */
static int check_fsdp(const struct zs_config *c, char **cause)
{
	if (c->framework != ZS_FW_TORCH)
		return zs_fail(cause, "--wrapper fsdp is torch's FullyShardedDataParallel: give --framework torch");
	for (size_t i = 0; i < c->nschemes; i++)
		if (c->schemes[i] != ZS_ZERO2 && c->schemes[i] != ZS_ZERO3)
			return zs_fail(cause, "--wrapper fsdp runs torch's zero2 (FSDP SHARD_GRAD_OP) and zero3 (FULL_SHARD) "
			               "only: give --schemes zero2 or zero3 (it lists %s; torch's dp and zero1 are --wrapper "
			               "ddp's)", zs_scheme_name(c->schemes[i]));
		else if (c->schemes[i] != c->schemes[0])
			return zs_fail(cause, "--wrapper fsdp runs one scheme a run, zero2 or zero3 (it lists %s and %s): run "
			               "them apart", zs_scheme_name(c->schemes[0]), zs_scheme_name(c->schemes[i]));
	/* its units are the wrap policy's: a --unit would relabel the rows and
	 * change nothing else (as under none and ddp, check_step_unit) */
	if (c->given & ZS_KEY_BIT(ZS_KEY_UNITS))
		return zs_fail(cause, "--unit: --wrapper fsdp's units are transformer_auto_wrap_policy's (a unit per "
		               "block and the root), not --unit's: leave --unit out");
	for (size_t w = 0; w < c->nworld; w++)
		if (c->world[w] < 2)
			return zs_fail(cause, "--wrapper fsdp shards over N ranks: every --world must be at least 2 (it lists "
			               "%u)", c->world[w]);
	/* backward_prefetch: --prefetch's default none (1.13's default;
	 * 2.6's is BACKWARD_PRE, fully_sharded_data_parallel.py 420, which
	 * --prefetch backward-pre gives; the text says which) */
	if (c->prefetch != ZS_PREFETCH_NONE && c->torch_version == ZS_TORCH_1_13)
		return zs_fail(cause, "--prefetch %s: --wrapper fsdp under PyTorch 1.13 models backward_prefetch None only "
		               "so far (its default; give --torch-version 2.6)", zs_prefetch_name(c->prefetch));
	if (c->prefetch != ZS_PREFETCH_NONE && (c->freeze[0] || c->lora_r))
		return zs_fail(cause, "--prefetch %s with --%s: --wrapper fsdp's prefetch of frozen units is not compared "
		               "with PyTorch yet (give --prefetch none)", zs_prefetch_name(c->prefetch),
		               c->lora_r ? "lora-r" : "freeze");
	if (c->prefetch != ZS_PREFETCH_NONE && c->grad_accum > 1)
		return zs_fail(cause, "--prefetch %s with --grad-accum %u: --wrapper fsdp's prefetch across micro-steps is "
		               "not described yet (give --prefetch none)", zs_prefetch_name(c->prefetch), c->grad_accum);
	if (c->fsdp_orig_params && check_fsdp_orig_params(c, cause) != 0)
		return -1;
	for (int k = ZS_KEY_BUCKET_CAP; k <= ZS_KEY_DS_MAX_LIVE; k++)
		if (k != ZS_KEY_PREFETCH && (c->given & ZS_KEY_BIT(k)))
			return zs_fail(cause, "--%s: --wrapper fsdp builds no %s to set", key_names[k],
			               k == ZS_KEY_BUCKET_CAP ? "DDP" : "DeepSpeed engine");
	return 0;
}

/* --wrapper deepspeed: DeepSpeed's engine (deepspeed.initialize over the
 * client Adam) over the PyTorch step (util/ag_ds.h; docs/schedule.md,
 * "DeepSpeed over the PyTorch step"): ZeRO stage 1 or 2 in fp32 under
 * PyTorch 1.13 or 2.6 (the same pass over either release's step list:
 * docs/schedule.md, "Under PyTorch 2.6"), one a run (the step is built
 * for the run's stage); what is not built is refused by name. */
static int check_ds_wrapper(const struct zs_config *c, char **cause)
{
	if (c->framework != ZS_FW_DEEPSPEED)
		return zs_fail(cause, "--wrapper deepspeed is DeepSpeed's engine: give --framework deepspeed");
	for (size_t i = 0; i < c->nschemes; i++)
		if (c->schemes[i] == ZS_DP)
			return zs_fail(cause, "--wrapper deepspeed builds ZeRO stages 1, 2 and 3 so far: give --schemes zero1, "
			               "zero2 or zero3 (it lists %s%s)", zs_scheme_name(c->schemes[i]),
			               c->schemes[i] == ZS_DP ? "; DeepSpeed's stage 0 is DDP's arithmetic with its own "
			                                        "all-reduce, not built: give --wrapper auto or --framework "
			                                        "torch --wrapper ddp" : "");
		else if (c->schemes[i] != c->schemes[0])
			return zs_fail(cause, "--wrapper deepspeed runs one scheme a run, zero1, zero2 or zero3 (it lists %s and "
			               "%s): run them apart", zs_scheme_name(c->schemes[0]), zs_scheme_name(c->schemes[i]));
	/* ZeRO-3's first step at N > 1 gathers module by module at the leaf
	 * marks (util/ag_ds3.c); over a model whose marks are not described,
	 * or with --freeze or LoRA (the frozen parameters' gathers there are
	 * not built), its --steps 1 is refused, util/autograd.c
	 * ag_step1_check; docs/schedule.md */
	/* ZeRO-3 over the plain step, --freeze's and LoRA's (util/ag_ds3.h:
	 * the frozen parameters partitioned too) and --grad-accum's (each
	 * micro-step reduced into the gradient partitions, util/ag_ds3.c
	 * partition_grad; its first step at N > 1 is the steady step's,
	 * --steps 1 refused: ag_ds3_marks_lacking): overlap_comm (on by
	 * default for stage 3, runtime/zero/config.py 351-354) is not built */
	/* QLoRA's 4-bit base under DeepSpeed's engine: stages 1 and 2 flatten
	 * the requires_grad parameters alone (stage_1_and_2.py 305-315), so
	 * the frozen packed weight stays a module tensor whole on every rank
	 * (docs/finetune.md, "QLoRA under --wrapper deepspeed"); stage 3 would
	 * partition it (held as quant_storage float32, as under --wrapper
	 * fsdp) and gather it before each dequantize: not built (DeepSpeed's
	 * own step runs it: --wrapper auto) */
	if (c->quant_nf4 && c->nschemes > 0 && c->schemes[0] == ZS_ZERO3)
		return zs_fail(cause, "--quant-base nf4 with --wrapper deepspeed --schemes zero3: not built yet (stage 3's "
		               "partitions of the packed 4-bit weight are not described; give --schemes zero1 or zero2, or "
		               "--wrapper auto: DeepSpeed's own step)");
	if (c->nschemes > 0 && c->schemes[0] == ZS_ZERO3 && (c->given & ZS_KEY_BIT(ZS_KEY_DS_OVERLAP_COMM)))
		return zs_fail(cause, "--ds-overlap-comm with --wrapper deepspeed --schemes zero3: not built yet (stage 3 "
		               "takes the plain step, --freeze, --lora-r and --grad-accum so far; leave --ds-overlap-comm "
		               "out, or give --schemes zero1 or zero2)");
	/* --precision mixed: DeepSpeed's bf16 ({"bf16": {"enabled": true}}),
	 * module.bfloat16() (engine.py 1224-1231 at 38327e0) and the ZeRO
	 * optimizer's fp32 partition (util/ag_ds.c); stages 1 and 2 (held to
	 * 1.13's allocator at N = 1, whose gloo reduces no bf16, and to 2.6's
	 * at N = 1 and 2: tests/ds_torch26.sh; a bf16 module's SDPA math path
	 * is refused in util/autograd.c), with
	 * --freeze, LoRA, --grad-accum (the accumulation in bf16) and
	 * --recompute full (docs/schedule.md, "bf16 with frozen parameters and
	 * LoRA", "bf16 under gradient accumulation", "bf16 under --recompute
	 * full") */
	if (c->precision == ZS_MIXED && c->nschemes > 0 && c->schemes[0] == ZS_ZERO3)
		return zs_fail(cause, "--precision mixed with --wrapper deepspeed --schemes zero3: DeepSpeed's bf16 is built for "
		               "stages 1 and 2 so far (give --schemes zero1 or zero2, or --precision fp32)");
	if (c->precision != ZS_FP32 && c->precision != ZS_MIXED)
		return zs_fail(cause, "--precision %s with --wrapper deepspeed: DeepSpeed 0.16.5 has no autocast (its bf16 casts "
		               "the module: give --precision mixed, or fp32)",
		               zs_precision_name(c->precision));
	/* the engine's zero_grad sets every .grad to None (stage_1_and_2.py
	 * 1638-1651), whatever torch's default */
	if (c->given & ZS_KEY_BIT(ZS_KEY_ZERO_GRAD))
		return zs_fail(cause, "--zero-grad: --wrapper deepspeed's engine sets every .grad to None itself (leave "
		               "--zero-grad out)");
	if (c->given & ZS_KEY_BIT(ZS_KEY_UNITS))
		return zs_fail(cause, "--unit: --wrapper deepspeed's rows are the PyTorch step's modules (leave --unit out)");
	if (c->given & ZS_KEY_BIT(ZS_KEY_BUCKET_CAP))
		return zs_fail(cause, "--bucket-cap is DDP's bucket size: DeepSpeed's engine reduces through its own "
		               "bucket (give --ds-reduce-bucket, reduce_bucket_size in elements)");
	/* overlap_comm is off for stages 1 and 2 unless set (zero/config.py
	 * 351-353): the pass's; on, a second ipg buffer (stage_1_and_2.py
	 * 2055-2060) and the reductions on their own stream (1382-1383) */
	if (c->ds_overlap_comm)
		return zs_fail(cause, "--ds-overlap-comm on with --wrapper deepspeed: DeepSpeed's overlap_comm (a second "
		               "reduce bucket, the reductions on their own stream) is not built yet (give --ds-overlap-comm "
		               "off, stages 1 and 2's default)");
	for (int k = ZS_KEY_PREFETCH; k <= ZS_KEY_DS_MAX_LIVE; k++)
		if (k != ZS_KEY_DS_REDUCE_BUCKET && k != ZS_KEY_DS_OVERLAP_COMM && (c->given & ZS_KEY_BIT(k)))
			return zs_fail(cause, "--%s: --wrapper deepspeed (ZeRO-1, 2 and 3 in fp32, no offload) takes "
			               "--ds-reduce-bucket (and, with zero1 or zero2, --ds-overlap-comm off) alone so far", key_names[k]);
	return 0;
}

/* --ds-sub-group-size: zerosim's own ZeRO-3 step cuts the optimizer's
 * sub groups by it (scheme_deepspeed.c, ds_sub_groups); under --wrapper
 * deepspeed util/ag_ds3.c builds the default's one sub group alone (it
 * refuses a model of more than 1e9 parameters), so another value is
 * refused there; the PyTorch step's other wrappers build no DeepSpeed
 * engine (a framework other than deepspeed is zs_framework_check's). */
static int check_ds_sub_group(const struct zs_config *c, char **cause)
{
	if (!(c->given & ZS_KEY_BIT(ZS_KEY_DS_SUB_GROUP)))
		return 0;
	if (c->wrapper == ZS_WRAPPER_DEEPSPEED && c->ds_sub_group != ZS_DS_SUB_GROUP)
		return zs_fail(cause, "--ds-sub-group-size %.17g with --wrapper deepspeed: its ZeRO-3 step builds "
		               "DeepSpeed's default 1e9 alone so far (leave it out, or give --wrapper auto)", c->ds_sub_group);
	if (c->wrapper != ZS_WRAPPER_AUTO && c->wrapper != ZS_WRAPPER_DEEPSPEED)
		return zs_fail(cause, "--ds-sub-group-size: --wrapper %s builds no DeepSpeed engine to set",
		               zs_wrapper_name(c->wrapper));
	return 0;
}

/* DeepSpeed's gradient_accumulation_steps (docs/schedule.md, "deepspeed",
 * "Gradient accumulation"): the engine's dp, ZeRO-1, ZeRO-2 and ZeRO-3
 * steps on the MLP and the transformer take it (a transformer's case holds
 * its micro-batches, an MLP's does not: cmd_measure.c); the offloaded
 * accumulation through the host is described there but not built. */
static int ds_accum_check(const struct zs_config *c, char **cause)
{
	if (c->offload != ZS_OFFLOAD_NONE)
		return zs_fail(cause, "--grad-accum %u with --offload: DeepSpeed's accumulation through the host "
		               "(async_accumulate_grad_in_cpu_via_gpu) is not described yet (give --offload none)", c->grad_accum);
	return 0;
}

/* DDP's find_unused_parameters=True (util/ag_ddp.h): described for DDP
 * over the plain loop's step (dp) in 1.13, one micro-step an optimizer
 * step, and held to 1.13 there (tests/hf_torch.sh); the rest refused by
 * name until it is compared. */
static int ddp_find_unused_check(const struct zs_config *c, char **cause)
{
	/* given at all elsewhere: a setting that changes nothing is refused */
	if (c->framework != ZS_FW_TORCH || c->wrapper != ZS_WRAPPER_DDP)
		return zs_fail(cause, "--ddp-find-unused: only with --framework torch --wrapper ddp "
		               "(DistributedDataParallel's find_unused_parameters)");
	if (!c->ddp_find_unused)
		return 0;
	for (size_t i = 0; i < c->nschemes; i++)
		if (c->schemes[i] != ZS_DP)
			return zs_fail(cause, "--ddp-find-unused with --schemes %s: not built yet (give --schemes dp)",
			               zs_scheme_name(c->schemes[i]));
	if (c->torch_version != ZS_TORCH_1_13)
		return zs_fail(cause, "--ddp-find-unused: PyTorch 1.13 alone so far (give --torch-version 1.13)");
	if (c->grad_accum > 1)
		return zs_fail(cause, "--ddp-find-unused with --grad-accum %u: not built yet (give --grad-accum 1)",
		               c->grad_accum);
	if (c->lora_r > 0 || c->freeze[0])
		return zs_fail(cause, "--ddp-find-unused with %s: not built yet", c->lora_r > 0 ? "--lora-r" : "--freeze");
	/* _DDPSink runs inside DDP's forward, within the loop's autocast
	 * region: its clones come before the cast cache is freed, which the
	 * pass does not place yet (found by an outside review) */
	if (c->precision == ZS_AMP_BF16 || c->precision == ZS_AMP_FP16)
		return zs_fail(cause, "--ddp-find-unused with --precision %s: not built yet (give --precision fp32)",
		               c->precision == ZS_AMP_BF16 ? "amp-bf16" : "amp-fp16");
	return 0;
}

int zs_config_check_torch(const struct zs_config *c, char **cause)
{
	static const enum zs_key torch_keys[] = {ZS_KEY_TORCH_VERSION, ZS_KEY_TORCH_DEVICE, ZS_KEY_OPTIM_IMPL,
	                                         ZS_KEY_ZERO_GRAD, ZS_KEY_ATTN, ZS_KEY_WRAPPER, ZS_KEY_RECOMPUTE_IMPL,
	                                         ZS_KEY_LOGITS, ZS_KEY_EXPERTS_IMPL};
	/* The paper's schedule runs no PyTorch: a setting of it would change
	 * nothing, so it is refused rather than recorded. */
	for (size_t i = 0; i < sizeof torch_keys / sizeof torch_keys[0]; i++)
		if (c->framework == ZS_FW_PAPER && (c->given & ZS_KEY_BIT(torch_keys[i])))
			return zs_fail(cause, "--%s: only under --framework torch or deepspeed", key_names[torch_keys[i]]);
	/* The wrapped frameworks (DDP, FSDP, DeepSpeed) still run zerosim's own
	 * step, which follows none of these yet: a setting would change
	 * nothing, so it is refused rather than recorded (--attn stays: it is
	 * --flash-attn's reference column there). */
	static const enum zs_key plain_keys[] = {ZS_KEY_TORCH_VERSION, ZS_KEY_TORCH_DEVICE, ZS_KEY_OPTIM_IMPL,
	                                         ZS_KEY_ZERO_GRAD, ZS_KEY_RECOMPUTE_IMPL, ZS_KEY_LOGITS};
	for (size_t i = 0; i < sizeof plain_keys / sizeof plain_keys[0]; i++)
		if (!zs_wrapper_step(c) && (c->given & ZS_KEY_BIT(plain_keys[i])))
			return zs_fail(cause, "--%s: only with --wrapper none, ddp, fsdp or deepspeed so far (the engine's own DDP, FSDP and "
			               "DeepSpeed steps do not follow it yet)", key_names[plain_keys[i]]);
	/* Gradient accumulation is described for the PyTorch step (the plain
	 * loop, DDP and FSDP over it), DeepSpeed's (ds_accum_check)
	 * and the paper's schedule: the engine's own wrapped steps
	 * (docs/finetune.md, the plan) do not take it yet. */
	if (c->grad_accum > 1 && c->framework == ZS_FW_DEEPSPEED && ds_accum_check(c, cause) != 0)
		return -1;
	if (c->grad_accum > 1 && c->framework == ZS_FW_TORCH && !zs_wrapper_step(c))
		return zs_fail(cause, "--grad-accum %u: only with --framework paper, --framework torch and --wrapper none, "
		               "ddp or fsdp, or --framework deepspeed, so far (--wrapper auto, the engine's own DDP and "
		               "FSDP step, takes no accumulation yet)", c->grad_accum);
	/* (--fsdp-no-sync is its other name: FSDP's no_sync() under --wrapper fsdp) */
	if ((c->given & ZS_KEY_BIT(ZS_KEY_DDP_NO_SYNC)) && c->wrapper != ZS_WRAPPER_DDP && c->wrapper != ZS_WRAPPER_FSDP)
		return zs_fail(cause, "--ddp-no-sync: only with --wrapper ddp or fsdp (DistributedDataParallel's or "
		               "FullyShardedDataParallel's no_sync())");
	if ((c->given & ZS_KEY_BIT(ZS_KEY_DDP_FIND_UNUSED)) && ddp_find_unused_check(c, cause) != 0)
		return -1;
	/* --logits dropped (util/autograd.c, drop_outputs): the plain loop at
	 * K = 1, held to tests/hf_torch.py --keep-logits 0; the wrappers'
	 * and accumulation's Trainer are not held to a reference yet */
	if (c->logits_dropped && c->wrapper != ZS_WRAPPER_NONE)
		return zs_fail(cause, "--logits dropped with --wrapper %s: not described yet (give --wrapper none, or "
		               "--logits kept)", zs_wrapper_name(c->wrapper));
	/* --experts-impl (zs_model.fused_experts): 5.x's eager experts over
	 * the fused 3-D parameters, the plain loop's fp32 step at K = 1
	 * (util/autograd.c's moe_fused_*), held to tests/hf_torch.py
	 * --experts eager; grouped_mm and batched_mm not described */
	if (c->experts_impl == ZS_EXPERTS_GROUPED_MM || c->experts_impl == ZS_EXPERTS_BATCHED_MM)
		return zs_fail(cause, "--experts-impl %s: transformers 5.x's %s experts forward (integrations/moe.py) is not "
		               "described yet (give modulelist or eager)", zs_experts_impl_name(c->experts_impl),
		               zs_experts_impl_name(c->experts_impl));
	if (c->experts_impl == ZS_EXPERTS_EAGER) {
		const char *no = c->framework != ZS_FW_TORCH         ? "--framework deepspeed"
		                 : c->wrapper != ZS_WRAPPER_NONE     ? "a --wrapper other than none"
		                 : c->precision != ZS_FP32           ? "a --precision other than fp32"
		                 : c->grad_accum > 1                 ? "--grad-accum"
		                 : c->freeze[0]                      ? "--freeze"
		                 : c->lora_r > 0                     ? "--lora-r"
		                 : c->quant_nf4                      ? "--quant-base"
		                 : c->logits_dropped                 ? "--logits dropped"
		                                                     : NULL;
		if (no)
			return zs_fail(cause, "--experts-impl eager with %s: not described yet (the fused experts are the plain "
			               "loop's fp32 step so far: --framework torch --wrapper none --precision fp32)", no);
	}
	if (c->logits_dropped && c->grad_accum > 1)
		return zs_fail(cause, "--logits dropped with --grad-accum %u: not described yet (give --grad-accum 1, or "
		               "--logits kept)", c->grad_accum);
	/* no_sync() wraps micro-steps 0..K-2: at K = 1 there are none, and
	 * a setting that changes nothing is refused rather than ignored */
	if ((c->given & ZS_KEY_BIT(ZS_KEY_DDP_NO_SYNC)) && c->grad_accum <= 1)
		return zs_fail(cause, "--ddp-no-sync: only with --grad-accum K > 1 (no_sync() wraps the first K - 1 "
		               "micro-steps; without accumulation there are none)");
	/* 1.13 has no torch.nn.functional.scaled_dot_product_attention (2.0
	 * added it), and its fused Adam takes CUDA tensors only (adam.py
	 * 147-151: "FusedAdam requires all the params to be CUDA"). */
	if (c->torch_version == ZS_TORCH_1_13 && c->attn == ZS_ATTN_SDPA)
		return zs_fail(cause, "--attn sdpa: PyTorch 1.13 has no scaled_dot_product_attention (2.0 added it); "
		               "give --attn eager or --torch-version 2.6");
	if (c->torch_version == ZS_TORCH_1_13 && c->torch_device == ZS_DEVICE_CPU && c->optim_impl == ZS_OPTIM_FUSED)
		return zs_fail(cause, "--optimizer-impl fused: PyTorch 1.13's fused Adam runs on CUDA only "
		               "(give --torch-device cuda, --torch-version 2.6 or another --optimizer-impl)");
	/* --freeze: so far the PyTorch step's (plain loop, DDP and FSDP,
	 * whose units must each be all frozen or all trainable: util/ag_fsdp.h)
	 * and the paper's schedule and DeepSpeed's on a transformer
	 * (zs_freeze_paper_check); the engine's own wrappers (--wrapper auto)
	 * train every parameter (docs/finetune.md, docs/schedule.md) */
	if ((c->given & ZS_KEY_BIT(ZS_KEY_FREEZE)) && c->freeze[0] && c->framework != ZS_FW_PAPER &&
	    c->framework != ZS_FW_DEEPSPEED && (c->framework != ZS_FW_TORCH || !zs_wrapper_step(c)))
		return zs_fail(cause, "--freeze: only under --framework torch with --wrapper none, ddp or fsdp so far "
		               "(--framework %s%s%s trains every parameter), and under --framework paper or deepspeed "
		               "with --model",
		               zs_framework_name(c->framework),
		               c->framework == ZS_FW_TORCH ? " --wrapper " : "",
		               c->framework == ZS_FW_TORCH ? zs_wrapper_name(c->wrapper) : "");
	if (c->fsdp_orig_params && (c->framework != ZS_FW_TORCH || c->wrapper != ZS_WRAPPER_FSDP))
		return zs_fail(cause, "--fsdp-orig-params on: FSDP's use_orig_params, only with --framework torch "
		               "--wrapper fsdp (--framework %s --wrapper %s builds no FSDP)",
		               zs_framework_name(c->framework), zs_wrapper_name(c->wrapper));
	if (check_lora(c, cause) != 0 || check_ds_sub_group(c, cause) != 0)
		return -1;
	if (c->wrapper == ZS_WRAPPER_DDP)
		return check_ddp(c, cause);
	if (c->wrapper == ZS_WRAPPER_FSDP)
		return check_fsdp(c, cause);
	if (c->wrapper == ZS_WRAPPER_DEEPSPEED)
		return check_ds_wrapper(c, cause);
	if (c->wrapper != ZS_WRAPPER_NONE)
		return 0;
	/* The plain loop is one process's: no DDP, FSDP or DeepSpeed engine,
	 * so nothing of theirs to set either. */
	for (size_t w = 0; w < c->nworld; w++)
		if (c->world[w] != 1)
			return zs_fail(cause, "--wrapper none is one process's plain training loop: every --world must be 1 "
			               "(it lists %u)", c->world[w]);
	for (int k = ZS_KEY_BUCKET_CAP; k <= ZS_KEY_DS_MAX_LIVE; k++)
		if (c->given & ZS_KEY_BIT(k))
			return zs_fail(cause, "--%s: --wrapper none builds no %s to set", key_names[k],
			               k <= ZS_KEY_PREFETCH ? (k == ZS_KEY_BUCKET_CAP ? "DDP" : "FSDP") : "DeepSpeed engine");
	return check_step_unit(c, cause);
}

int zs_config_check_model(const struct zs_config *c, int transformer, char **cause)
{
	if (transformer)
		return 0;
	/* Hugging Face's attention and the plain loop over its model: an MLP
	 * has no attention, and zerosim's torch MLP is always wrapped. */
	if (c->given & ZS_KEY_BIT(ZS_KEY_ATTN))
		return zs_fail(cause, "--attn needs a transformer (--model): the MLP has no attention");
	if (zs_wrapper_step(c))
		return zs_fail(cause, "--wrapper %s needs a transformer (--model): it is %s over a Hugging Face model",
		               zs_wrapper_name(c->wrapper),
		               c->wrapper == ZS_WRAPPER_DDP    ? "DDP over the PyTorch step"
		               : c->wrapper == ZS_WRAPPER_FSDP ? "FSDP over the PyTorch step"
		               : c->wrapper == ZS_WRAPPER_DEEPSPEED ? "DeepSpeed's engine over the PyTorch step"
		                                               : "the plain loop");
	return 0;
}

/* The length of the quantity at the start of s (digits, an optional
 * fraction and exponent), or 0 if s does not start with one. */
static size_t decimal_length(const char *s)
{
	size_t i = strspn(s, "0123456789"), digits = i;
	if (s[i] == '.') {
		size_t f = strspn(s + i + 1, "0123456789");
		digits += f;
		i += 1 + f;
	}
	if (digits == 0)
		return 0;
	if (s[i] == 'e' || s[i] == 'E') {
		size_t j = i + 1 + (s[i + 1] == '+' || s[i + 1] == '-');
		size_t e = strspn(s + j, "0123456789");
		if (e > 0)
			i = j + e;
	}
	return i;
}

/* The quantity at the start of s (its length n), finite. */
static int decimal_prefix(const char *s, double *out, size_t *n)
{
	*n = decimal_length(s);
	if (*n == 0)
		return -1;
	char *q = zs_asprintf("%.*s", (int)*n, s);
	errno = 0;
	double v = strtod(q, NULL);
	free(q);
	if (errno == ERANGE && v != 0) /* overflow; an underflow is a range check's to refuse */
		return -1;
	if (!isfinite(v))
		return -1;
	*out = v;
	return 0;
}

int zs_parse_decimal(const char *s, double *out)
{
	size_t n;
	double v;
	if (decimal_prefix(s, &v, &n) != 0 || s[n] != '\0')
		return -1;
	*out = v;
	return 0;
}

int zs_parse_count(const char *s, double max, double *out, char **cause)
{
	double v;
	if (zs_parse_decimal(s, &v) != 0)
		return zs_fail(cause, "'%.40s' is not a number (decimal digits or e-notation such as 7.5e9)", s);
	if (v < 1 || v != floor(v))
		return zs_fail(cause, "'%.40s' is not a positive whole count", s);
	if (v > max)
		return zs_fail(cause, "'%.40s' is more than %.3g", s, max);
	*out = v;
	return 0;
}

int zs_parse_bytes(const char *s, double *out, char **cause)
{
	static const struct {
		const char *suffix;
		double mult;
	} units[] = {{"", 1},        {"B", 1},          {"KB", 1e3},      {"MB", 1e6},
	             {"GB", 1e9},    {"TB", 1e12},      {"KiB", 1024.0},  {"MiB", 1048576.0},
	             {"GiB", 1073741824.0}, {"TiB", 1099511627776.0}};
	double v;
	size_t n;
	if (decimal_prefix(s, &v, &n) != 0)
		return zs_fail(cause, "'%.40s' is not a memory size (such as 80GB or 40GiB)", s);
	const char *rest = s + n;
	for (size_t i = 0; i < sizeof units / sizeof units[0]; i++)
		if (strcmp(rest, units[i].suffix) == 0) {
			double b = v * units[i].mult;
			if (!(b >= 1) || !isfinite(b) || b > 1e18)
				return zs_fail(cause, "'%.40s' is not a memory size between 1 byte and 1e18 bytes", s);
			/* "1.5B" is no size; "0.3GB" is 3e8 bytes, not 3e8 and a bit. */
			if (units[i].mult == 1 && b != floor(b))
				return zs_fail(cause, "'%.40s' is not a whole number of bytes", s);
			*out = round(b);
			return 0;
		}
	return zs_fail(cause, "'%.40s' is not a memory size: unknown unit '%.20s' (B, KB, MB, GB, TB, KiB, MiB, GiB, TiB)", s, rest);
}

static void json_deepspeed(cJSON *cfg, const struct zs_config *c)
{
	if (c->framework != ZS_FW_DEEPSPEED)
		return;
	cJSON *o = cJSON_AddObjectToObject(cfg, "deepspeed");
	cJSON_AddNumberToObject(o, "reduce_bucket", c->ds_reduce_bucket);
	cJSON_AddNumberToObject(o, "allgather_bucket", c->ds_allgather_bucket);
	cJSON_AddBoolToObject(o, "overlap_comm", c->ds_overlap_comm);
	cJSON_AddNumberToObject(o, "persist", c->ds_persist);
	cJSON_AddNumberToObject(o, "prefetch_bucket", c->ds_prefetch_bucket);
	cJSON_AddNumberToObject(o, "max_live", c->ds_max_live);
	if (c->ds_sub_group != ZS_DS_SUB_GROUP) /* the default's files are what they were */
		cJSON_AddNumberToObject(o, "sub_group_size", c->ds_sub_group);
	cJSON_AddStringToObject(o, "offload", zs_offload_name(c->offload));
	cJSON_AddNumberToObject(o, "ranks_per_node", c->ranks_per_node);
}

const char *const zs_torch_json_keys[ZS_NTORCH_JSON_KEYS] = {"torch_version", "torch_device", "optimizer_impl",
                                                                "zero_grad", "attn", "wrapper"};

const char *const zs_step_json_keys[ZS_NSTEP_JSON_KEYS] = {
	"grad_accum", "ddp_no_sync", "freeze", "lora_r", "lora_alpha", "lora_dropout", "lora_targets", "quant_base",
	"double_quant", "ddp_find_unused", "recompute_impl", "logits", "experts_impl", "load_dtype",
	"fsdp_orig_params", "lora_dtype"};

/* zs_step_json_keys' values, each only where it is on: a K = 1 run, one
 * that freezes nothing, one without LoRA or its 4-bit base writes none,
 * so that its files are what they were. */
static void json_step_settings(cJSON *cfg, const struct zs_config *c)
{
	const char *const *key = zs_step_json_keys;
	if (c->grad_accum > 1) {
		cJSON_AddNumberToObject(cfg, key[ZS_SJ_GRAD_ACCUM], c->grad_accum);
		/* no_sync() is DDP's and FSDP's (ag_ddp.c, ag_fsdp.c): either
		 * run's peak depends on it */
		if (c->framework == ZS_FW_TORCH && (c->wrapper == ZS_WRAPPER_DDP || c->wrapper == ZS_WRAPPER_FSDP))
			cJSON_AddBoolToObject(cfg, key[ZS_SJ_DDP_NO_SYNC], c->ddp_no_sync);
	}
	if (c->freeze[0])
		cJSON_AddStringToObject(cfg, key[ZS_SJ_FREEZE], c->freeze);
	if (c->lora_r) {
		cJSON_AddNumberToObject(cfg, key[ZS_SJ_LORA_R], c->lora_r);
		cJSON_AddNumberToObject(cfg, key[ZS_SJ_LORA_ALPHA], c->lora_alpha);
		cJSON_AddNumberToObject(cfg, key[ZS_SJ_LORA_DROPOUT], c->lora_dropout);
		cJSON_AddStringToObject(cfg, key[ZS_SJ_LORA_TARGETS], c->lora_targets[0] ? c->lora_targets : "default");
	}
	if (c->quant_nf4) {
		cJSON_AddStringToObject(cfg, key[ZS_SJ_QUANT_BASE], "nf4");
		cJSON_AddBoolToObject(cfg, key[ZS_SJ_DOUBLE_QUANT], c->double_quant);
	}
	if (c->load_bf16)
		cJSON_AddStringToObject(cfg, key[ZS_SJ_LOAD_DTYPE], "bf16");
	if (c->fsdp_orig_params)
		cJSON_AddBoolToObject(cfg, key[ZS_SJ_FSDP_ORIG_PARAMS], 1);
	if (c->lora_bf16)
		cJSON_AddStringToObject(cfg, key[ZS_SJ_LORA_DTYPE], "bf16");
	if (c->ddp_find_unused)
		cJSON_AddBoolToObject(cfg, key[ZS_SJ_DDP_FIND_UNUSED], 1);
	if (c->recompute_nonreentrant)
		cJSON_AddStringToObject(cfg, key[ZS_SJ_RECOMPUTE_IMPL], "non-reentrant");
	if (c->logits_dropped)
		cJSON_AddStringToObject(cfg, key[ZS_SJ_LOGITS], "dropped");
	if (c->experts_impl != ZS_EXPERTS_MODULELIST) /* the default's files are what they were */
		cJSON_AddStringToObject(cfg, key[ZS_SJ_EXPERTS_IMPL], zs_experts_impl_name(c->experts_impl));
}

static void json_torch(cJSON *cfg, const struct zs_config *c, int attention)
{
	/* only the PyTorch step (plain or DDP) follows them (zs_config_check_torch) */
	if (c->framework != ZS_FW_PAPER && zs_wrapper_step(c)) {
		const char *value[ZS_NTORCH_JSON_KEYS] = {
			zs_torch_version_name(c->torch_version), zs_torch_device_name(c->torch_device),
			zs_optim_impl_name(zs_optim_impl_resolve(c)), zs_zero_grad_name(zs_zero_grad_resolve(c)),
			attention ? zs_attn_name(zs_attn_resolve(c)) : NULL, zs_wrapper_name(c->wrapper)};
		for (int i = 0; i < ZS_NTORCH_JSON_KEYS; i++)
			if (value[i] != NULL)
				cJSON_AddStringToObject(cfg, zs_torch_json_keys[i], value[i]);
	}
	json_step_settings(cfg, c); /* under every framework: K is the paper's and DeepSpeed's too */
}

void zs_config_json_framework(cJSON *cfg, const struct zs_config *c, int attention)
{
	if (c->framework != ZS_FW_PAPER) /* absent: the paper's, as before the key existed */
		cJSON_AddStringToObject(cfg, "framework", zs_framework_name(c->framework));
	if (c->framework == ZS_FW_TORCH) { /* torch's own options */
		zs_json_add_number(cfg, "bucket_cap_mb", c->bucket_cap_mb);
		cJSON_AddStringToObject(cfg, "prefetch", zs_prefetch_name(c->prefetch));
	}
	json_torch(cfg, c, attention);
	json_deepspeed(cfg, c);
}

/*
 * zerosim measure — run the sweep through the engine and write
 * zerosim-measured/1 (docs/formats.md). One record per (scheme, N, unit).
 */
#include "config.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/options.h"
#include "engine/ag_exec.h"
#include "engine/engine.h"
#include "engine/measure_json.h"
#include "engine/net.h"
#include "engine/sweep.h"
#ifdef HAVE_MPI
#include "engine/mpi_job.h"
#endif
#include "engine/tfm.h"
#include "util/ag_ddp.h"
#include "util/autograd.h"
#include "util/config.h"
#include "util/cuda_alloc.h"
#include "util/freeze.h"
#include "util/lora.h"
#include "util/model.h"
#include "util/schedule.h"
#include "util/step.h"
#include "util/util.h"

static void usage(FILE *f)
{
	fputs("Usage: zerosim measure [OPTION]...\n"
	      "Run real training steps of an MLP or, with --model, a transformer (mixed\n"
	      "precision or fp32) across N simulated data-parallel ranks under DP and\n"
	      "ZeRO-1/2/3, with every buffer tracked, and write the measurement as JSON\n"
	      "(zerosim-measured/1).\n"
	      "\n"
	      "Model and run:\n"
	      "      --layers LIST      layer widths d0,d1,...,dL (default 64,256,64)\n"
	      "      --world LIST       world sizes N (default 1,2,4,8,16,32; 1 under\n"
	      "                         --wrapper none)\n"
	      "      --schemes LIST     among dp,zero1,zero2,zero3 (default all four)\n"
	      "      --unit LIST        model and/or layer: what is sharded and gathered\n"
	      "                         as one piece (default model)\n"
	      "      --steps S          training steps per run (default 3)\n"
	      "      --batch B          per-rank batch (default 4)\n"
	      "      --seed SEED        seed of the weights and batches (default 3)\n"
	      "      --precision P      mixed (default: fp16 params and grads, fp32 master)\n"
	      "                         or fp32 (--model: the default); amp-bf16: PyTorch's\n"
	      "                         autocast (bf16 on the CPU, fp32 state) over the\n"
	      "                         PyTorch step (--wrapper none, ddp or fsdp; gpt2, llama,\n"
	      "                         mistral, qwen2, qwen3, phi3); amp-fp16: float16\n"
	      "                         autocast with GradScaler (2.6; --wrapper none, ddp\n"
	      "                         or fsdp); under --wrapper\n"
	      "                         deepspeed, mixed is DeepSpeed's bf16 (the module\n"
	      "                         cast to bf16, fp32 partition; zero1, zero2)\n"
	      "      --optimizer O      adam (default) or sgd (with momentum 0.9)\n"
	      "      --lr RATE          learning rate (default 0.001)\n"
	      "      --beta1 B1, --beta2 B2, --eps E\n"
	      "                         Adam's decay rates and epsilon (default 0.9,\n"
	      "                         0.999, 1e-8)\n"
	      "      --framework F      paper (default: the ZeRO paper's schedule), torch\n"
	      "                         (DDP for dp, ZeroRedundancyOptimizer for zero1,\n"
	      "                         FSDP SHARD_GRAD_OP and FULL_SHARD for zero2 and\n"
	      "                         zero3) or deepspeed (dp, zero1, zero2, zero3)\n"
	      "      --bucket-cap MB    torch: DDP's gradient bucket size (default 25)\n"
	      "      --prefetch P       torch: FSDP's backward prefetch, none (default, as\n"
	      "                         PyTorch 1.13) or backward-pre (torch 2.x's default)\n"
	      "      --ds-reduce-bucket B, --ds-allgather-bucket B, --ds-overlap-comm on|off\n"
	      "                         DeepSpeed's bucket sizes in elements (default\n"
	      "                         5e8 each) and overlap_comm (default off)\n"
	      "      --ds-persist T     DeepSpeed ZeRO-3's persistence threshold (1e5)\n"
	      "      --ds-prefetch-bucket B, --ds-max-live M\n"
	      "                         DeepSpeed ZeRO-3's prefetch bucket and max live\n"
	      "                         parameters, in elements (5e7, 1e9)\n"
	      "      --ds-sub-group-size S\n"
	      "                         DeepSpeed ZeRO-3's sub_group_size: the step's fp32\n"
	      "                         gradient a sub group of about S elements at a time\n"
	      "                         (default 1e9)\n"
	      "      --offload O        none (default), optimizer (zero1, zero2, zero3) or\n"
	      "                         params (zero3): DeepSpeed's host bytes apart\n"
	      "                         from the device's\n"
	      "      --ranks-per-node R with --offload: host bytes per node (1)\n"
	      ZS_HELP_TORCH_STEP
	      "      --spec FILE        read the options above from a zerosim-sweep/5 file;\n"
	      "                         options on the command line override it\n"
	      "      --model NAME|ORG/NAME|FILE\n"
	      "                         train a transformer instead: a shipped config (gpt2,\n"
	      "                         llama-2-7b, ...), a Hugging Face Hub id (a shipped\n"
	      "                         one's, meta-llama/Llama-2-7b-hf, or one in the local\n"
	      "                         Hugging Face cache) or a config.json, on\n"
	      "                         tokens from --seed; --precision defaults to fp32,\n"
	      "                         --batch to 1 and --unit to layer; a mixture\n"
	      "                         (mixtral, qwen2_moe, qwen3_moe) under --framework\n"
	      "                         paper or deepspeed, or torch --wrapper none or ddp\n"
	      "                         (1.13, fp32; ddp: each rank its own routing), or\n"
	      "                         deepspeed --wrapper deepspeed zero1 or zero2 (fp32,\n"
	      "                         each rank its own routing, no expert idle), its\n"
	      "                         routing recorded (\"routing\": give it to theory\n"
	      "                         --routing)\n"
	      "      --seq S            tokens per sequence (default: the model's positions)\n"
	      "      --recompute R      none (default), selective (the attention softmax) or\n"
	      "                         full (all but each block's input) in backward;\n"
	      "                         under --wrapper none, ddp or fsdp full is\n"
	      "                         Hugging Face's gradient checkpointing (selective:\n"
	      "                         none)\n"
	      "      --case FILE        initial weights and every batch from a\n"
	      "                         zerosim-case file (fixes layers, world, batch, steps;\n"
	      "                         a zerosim-case/2 or /3 file also the training\n"
	      "                         options, a /3 file a frozen run's --freeze too; a\n"
	      "                         transformer's also its model, seq, recompute and\n"
	      "                         tokens)\n"
	      "\n"
	      "Output:\n"
	      "  -o, --out FILE         write the JSON to FILE (default: standard output)\n"
	      "      --timeline         record rank 0's allocations through the last step\n"
	      "      --timeline-ranks R with --timeline: 0 (default: rank 0's) or all\n"
	      "                         (every rank's; in process only)\n"
	      "      --allocator A      none (default) or cuda: replay every rank's\n"
	      "                         allocations through PyTorch 2.6.0's CUDA caching\n"
	      "                         allocator and record reserved bytes, fragmentation\n"
	      "                         and segments\n"
	      "      --alloc-conf CONF  with --allocator cuda: its PYTORCH_CUDA_ALLOC_CONF,\n"
	      "                         e.g. expandable_segments:True,max_split_size_mb:512\n"
	      "      --cublas-workspace SIZE\n"
	      "                         with --allocator cuda: the cuBLAS workspace each\n"
	      "                         rank's first matmul asks the allocator for (0:\n"
	      "                         none; default 33554432, PyTorch 2.6 on H100/H200;\n"
	      "                         8519680 on other GPUs)\n"
	      "      --dump-weights FILE  write the final fp32 weights (zerosim-weights/1)\n"
	      "      --write-case FILE  write the run's case (zerosim-case/2, /3 with --freeze,\n"
	      "                         /4 with --quant-base nf4:\n"
	      "                         initial weights, every batch, the training options;\n"
	      "                         one --world), for --case or another framework; a\n"
	      "                         transformer's weights go to FILE's name with .f32\n"
	      "                         for .json beside it\n"
	      "                         (--lora-r: the adapters to .lora.f32's, which\n"
	      "                         --case starts them from)\n"
	      "  -q, --quiet            no progress line on standard error\n"
	      "\n"
	      "Other:\n"
	      "  -j, --jobs J           run up to J runs at once (default: one per CPU, as\n"
	      "                         memory allows); the results do not depend on J\n"
	      "      --backend B        inprocess (default: all N ranks in this process) or\n"
	      "                         mpi (under mpirun or srun with P processes, N/P ranks\n"
	      "                         each, one run at a time; needs ./configure --with-mpi)\n"
	      "  -h, --help             display this help and exit\n"
	      "  -V, --version          output version information and exit\n"
	      "\n"
	      "Exit status: 0 success, 1 failure at run time, 2 bad usage or bad input.\n",
	      f);
}

/* Fail now, before a long run, if FILE's folder cannot take the output. */
static int check_writable(const char *path, char **cause)
{
	char *target = NULL;
	int fd;
	struct stat st;
	if (zs_output_resolve(path, &target, &fd) != 0 && fd < 0) {
		const char *slash = strrchr(target, '/');
		int r = zs_fail(cause, "cannot write %s: the folder %.*s is missing", path,
		                slash != NULL ? (int)(slash - target) : 1, slash != NULL ? target : ".");
		free(target);
		return r;
	}
	if (fd >= 0)
		return 0;
	if (stat(target, &st) == 0 && S_ISDIR(st.st_mode)) {
		free(target);
		return zs_fail(cause, "%s: is a folder, not a file", path);
	}
	int ok;
	char *slash = strrchr(target, '/');
	if (stat(target, &st) == 0 && !S_ISREG(st.st_mode)) { /* a device or FIFO: written in place */
		ok = access(target, W_OK) == 0;
	} else {
		if (slash != NULL)
			slash[slash == target] = '\0'; /* the folder ("/" for /x) */
		ok = stat(target, &st) == 0 && S_ISDIR(st.st_mode) ? access(target, W_OK | X_OK) == 0 : (errno = ENOTDIR, 0);
	}
	int r = ok ? 0 : zs_fail(cause, "cannot write %s: %s", path, strerror(errno));
	free(target);
	return r;
}

static int parse_jobs(const char *s, unsigned *jobs, char **cause)
{
	unsigned long long v;
	if (s == NULL)
		return zs_fail(cause, "--jobs needs a value");
	if (zs_parse_uint("jobs", s, 64, "a number of jobs", &v, cause) != 0)
		return -1;
	*jobs = (unsigned)v;
	return 0;
}

/* A training setting as the command line writes it, for comparing and
 * for messages. */
static void setting_text(const struct zs_config *c, enum zs_key k, char *buf, size_t n)
{
	switch (k) {
	case ZS_KEY_PRECISION: snprintf(buf, n, "%s", zs_precision_name(c->precision)); break;
	case ZS_KEY_OPTIMIZER: snprintf(buf, n, "%s", zs_optimizer_name(c->optimizer)); break;
	case ZS_KEY_LR: zs_number_text(c->lr, buf, n); break;
	case ZS_KEY_BETA1: zs_number_text(c->beta1, buf, n); break;
	case ZS_KEY_BETA2: zs_number_text(c->beta2, buf, n); break;
	case ZS_KEY_LORA_R: snprintf(buf, n, "%u", c->lora_r); break;
	case ZS_KEY_LORA_ALPHA: zs_number_text(c->lora_alpha, buf, n); break;
	case ZS_KEY_LORA_DROPOUT: zs_number_text(c->lora_dropout, buf, n); break;
	case ZS_KEY_LORA_TARGETS: snprintf(buf, n, "%s", c->lora_targets[0] ? c->lora_targets : "default"); break;
	case ZS_KEY_QUANT_BASE: snprintf(buf, n, "%s", c->quant_nf4 ? "nf4" : "none"); break;
	case ZS_KEY_DOUBLE_QUANT: snprintf(buf, n, "%s", c->double_quant ? "on" : "off"); break;
	default: zs_number_text(c->eps, buf, n); break;
	}
}

/* What the case file fixes: the model (an MLP's layers, or a
 * transformer's config, seq and recompute), one world size, the batch and
 * the steps, and (zerosim-case/2) the training settings it gives
 * ((/3) its --freeze too). An
 * option that says otherwise, on the command line or in --spec, is
 * refused. */
static int apply_case(struct zs_config *c, const struct zs_case *cs, const char *seq, const char *recompute,
                      char **cause)
{
	static const enum zs_key training[] = {ZS_KEY_PRECISION, ZS_KEY_OPTIMIZER, ZS_KEY_LR,
	                                       ZS_KEY_BETA1, ZS_KEY_BETA2, ZS_KEY_EPS};
	static const char *const names[] = {"precision", "optimizer", "lr", "beta1", "beta2", "eps"};
	const zs_keys given = c->given;
	if ((given & ZS_KEY_BIT(ZS_KEY_LAYERS)) && cs->tfm != NULL)
		return zs_fail(cause, "--layers with a transformer's case: the case file's model gives the shape");
	if ((given & ZS_KEY_BIT(ZS_KEY_LAYERS)) &&
	    (c->nwidths != cs->nwidths || memcmp(c->widths, cs->widths, cs->nwidths * sizeof *cs->widths) != 0))
		return zs_fail(cause, "--layers disagrees with the case file's layers");
	if ((seq != NULL || recompute != NULL) && cs->tfm == NULL)
		return zs_fail(cause, "%s with an MLP's case file (it has no transformer)", seq != NULL ? "--seq" : "--recompute");
	if (seq != NULL) {
		char have[32];
		snprintf(have, sizeof have, "%zu", cs->tfm->seq);
		if (strcmp(seq, have) != 0)
			return zs_fail(cause, "--seq %.40s disagrees with the case file's seq %s", seq, have);
	}
	if (recompute != NULL && strcmp(recompute, zs_recompute_name(cs->tfm->recompute)) != 0)
		return zs_fail(cause, "--recompute %.40s disagrees with the case file's recompute %s", recompute,
		               zs_recompute_name(cs->tfm->recompute));
	if ((given & ZS_KEY_BIT(ZS_KEY_WORLD)) && (c->nworld != 1 || c->world[0] != cs->world))
		return zs_fail(cause, "--world disagrees with the case file's world size %u", cs->world);
	if ((given & ZS_KEY_BIT(ZS_KEY_BATCH)) && c->batch != cs->batch)
		return zs_fail(cause, "--batch %u disagrees with the case file's batch %u", c->batch, cs->batch);
	if ((given & ZS_KEY_BIT(ZS_KEY_STEPS)) && c->steps != cs->steps)
		return zs_fail(cause, "--steps %u disagrees with the case file's %u steps", c->steps, cs->steps);
	if (given & ZS_KEY_BIT(ZS_KEY_SEED))
		return zs_fail(cause, "--seed is not used with --case: the case holds the weights and batches");
	/* a transformer's case holds its micro-steps' batches (grad_accum) */
	unsigned K = cs->grad_accum ? cs->grad_accum : 1;
	if ((given & ZS_KEY_BIT(ZS_KEY_GRAD_ACCUM)) && c->grad_accum != K)
		return zs_fail(cause, "--grad-accum %u disagrees with the case file's grad_accum %u", c->grad_accum, K);
	c->grad_accum = K;
	/* the seed the case's dropout masks were drawn from: the run's draws
	 * are keyed by it (nothing else of a case run is: its weights,
	 * tokens and adapters are the file's) */
	if (cs->has_dropout_seed)
		c->seed = cs->dropout_seed;
	for (size_t i = 0; i < sizeof training / sizeof training[0]; i++) {
		char mine[40], theirs[40];
		if (!(cs->train.given & ZS_KEY_BIT(training[i])))
			continue;
		setting_text(c, training[i], mine, sizeof mine);
		setting_text(&cs->train, training[i], theirs, sizeof theirs);
		if ((given & ZS_KEY_BIT(training[i])) && strcmp(mine, theirs) != 0)
			return zs_fail(cause, "--%s %s disagrees with the case file's %s %s", names[i], mine, names[i], theirs);
	}
	if (cs->tfm == NULL) {
		c->nwidths = cs->nwidths;
		memcpy(c->widths, cs->widths, sizeof c->widths);
	}
	c->nworld = 1;
	c->world[0] = cs->world;
	c->batch = cs->batch;
	c->steps = cs->steps;
	const struct zs_config *t = &cs->train;
	if (t->given & ZS_KEY_BIT(ZS_KEY_PRECISION))
		c->precision = t->precision;
	if (t->given & ZS_KEY_BIT(ZS_KEY_OPTIMIZER))
		c->optimizer = t->optimizer;
	if (t->given & ZS_KEY_BIT(ZS_KEY_LR))
		c->lr = t->lr;
	if (t->given & ZS_KEY_BIT(ZS_KEY_BETA1))
		c->beta1 = t->beta1;
	if (t->given & ZS_KEY_BIT(ZS_KEY_BETA2))
		c->beta2 = t->beta2;
	if (t->given & ZS_KEY_BIT(ZS_KEY_EPS))
		c->eps = t->eps;
	/* zerosim-case/3's freeze: the run's --freeze (a case without one:
	 * the command line's, as any setting the case does not give) */
	if (t->given & ZS_KEY_BIT(ZS_KEY_FREEZE)) {
		if ((given & ZS_KEY_BIT(ZS_KEY_FREEZE)) && strcmp(c->freeze, t->freeze) != 0)
			return zs_fail(cause, "--freeze %s disagrees with the case file's freeze %s", c->freeze, t->freeze);
		snprintf(c->freeze, sizeof c->freeze, "%s", t->freeze);
		c->given |= ZS_KEY_BIT(ZS_KEY_FREEZE);
	}
	/* the case's "lora": LoRA's settings and (zerosim-case/4) the 4-bit
	 * base's, each as its option; the adapters start from the case's
	 * values, so a case without them runs no LoRA (its adapters' start
	 * would be a seed's the case does not name) */
	static const enum zs_key lora_keys[] = {ZS_KEY_LORA_R, ZS_KEY_LORA_ALPHA, ZS_KEY_LORA_DROPOUT,
	                                        ZS_KEY_LORA_TARGETS, ZS_KEY_QUANT_BASE, ZS_KEY_DOUBLE_QUANT};
	static const char *const lora_names[] = {"lora-r", "lora-alpha", "lora-dropout",
	                                         "lora-targets", "quant-base", "double-quant"};
	if (cs->lora_init == NULL && c->lora_r)
		return zs_fail(cause, "--lora-r with a case that has no \"lora\": the case does not hold the adapters' "
		               "initial values (write it with measure --write-case --lora-r)");
	if (cs->lora_init == NULL)
		return 0;
	for (size_t i = 0; i < sizeof lora_keys / sizeof lora_keys[0]; i++) {
		char mine[ZS_LORA_TARGETS_MAX + 16], theirs[ZS_LORA_TARGETS_MAX + 16];
		setting_text(c, lora_keys[i], mine, sizeof mine);
		setting_text(t, lora_keys[i], theirs, sizeof theirs);
		if ((given & ZS_KEY_BIT(lora_keys[i])) && strcmp(mine, theirs) != 0)
			return zs_fail(cause, "--%s %s disagrees with the case file's %s %s", lora_names[i], mine, lora_names[i],
			               theirs);
	}
	c->lora_r = t->lora_r;
	c->lora_alpha = t->lora_alpha;
	c->lora_dropout = t->lora_dropout;
	snprintf(c->lora_targets, sizeof c->lora_targets, "%s", t->lora_targets);
	c->quant_nf4 = t->quant_nf4;
	c->double_quant = t->double_quant;
	c->given |= t->given & (ZS_KEY_BIT(ZS_KEY_LORA_R) | ZS_KEY_BIT(ZS_KEY_LORA_ALPHA) |
	                        ZS_KEY_BIT(ZS_KEY_LORA_DROPOUT) | ZS_KEY_BIT(ZS_KEY_LORA_TARGETS) |
	                        ZS_KEY_BIT(ZS_KEY_QUANT_BASE) | ZS_KEY_BIT(ZS_KEY_DOUBLE_QUANT));
	return 0;
}

/* A transformer run, from --model or a case (as many blocks as memory
 * holds: the engine's lists are sized by the model); the batch 1 (unless a case gives it) and the unit layer where
 * neither the command line nor a spec sets them, as `zerosim theory --model` does;
 * fp32 unless --precision (or a spec) says mixed. A transformer's case is
 * fp32 only so far (its side file holds the fp32 weights; a mixed case is
 * refused). */
static int transformer_run(struct zs_config *c, struct zs_tfm_run *tr, int mixed_asked, int from_case, char **cause)
{
	const struct zs_model hf = tr->hf;
	if (tfm_dims_check(&tr->dims, cause) != 0)
		return -1;
	if (zs_model_router_check(&hf, c->framework == ZS_FW_TORCH, cause) < 0)
		return -1;
	if (hf.unrun[0] != '\0')
		return zs_fail(cause, "%s: %s", hf.name, hf.unrun);
	/* (gemma3_text with sliding_window_pattern 1: every layer global, none slides; a gemma's
	 * PyTorch step, --wrapper none, ddp or fsdp, applies the window itself: util/autograd.c's
	 * gemma_sliding_mask) */
	if (hf.sliding_window != 0 && tr->seq > hf.sliding_window && hf.window_pattern != 1 &&
	    !(hf.gemma && zs_wrapper_step(c)))
		return zs_fail(cause, "%s: --seq %zu is longer than its sliding_window %llu; the engine's attention sees "
		               "every earlier token", hf.name, tr->seq, (unsigned long long)hf.sliding_window);
	if (from_case && mixed_asked && c->precision != ZS_FP32 && c->precision != ZS_AMP_FP16)
		return zs_fail(cause, "precision %s in a transformer's case: a transformer's case is fp32 or amp-fp16 "
		               "only so far (--precision fp32 or amp-fp16)", zs_precision_name(c->precision));
	if (!mixed_asked)
		c->precision = ZS_FP32;
	if (!(c->given & ZS_KEY_BIT(ZS_KEY_BATCH)) && !from_case)
		c->batch = 1;
	if (!(c->given & ZS_KEY_BIT(ZS_KEY_UNITS))) {
		c->nunits = 1;
		c->units[0] = ZS_UNIT_LAYER;
	}
	double psi = (double)tfm_nparams(&tr->dims), acts = (double)c->batch * (double)tr->seq *
	             ((double)hf.layers * 40.0 * (double)hf.hidden + (double)hf.vocab) * 4.0;
	if (psi > ZS_MAX_PARAMS || acts > 0x1p52)
		return zs_fail(cause, "%s at --seq %zu, --batch %u: more bytes than zerosim counts exactly", hf.name,
		               tr->seq, c->batch);
	c->tfm = tr;
	return 0;
}

/* A mixture of experts (mixtral): the engine's step runs it in
 * ZS_MOE_SCOPE, one process (its routed tensors, tfm_net.c's moe block);
 * the rest is refused by name until a test holds it. */
static int moe_run_check(const struct zs_config *c, int mpi, int allocator, int with_case, char **cause)
{
	const struct zs_tfm_run *tr = c->tfm;
	if (tr == NULL || tr->dims.experts == 0)
		return 0;
	char what[96];
	zs_moe_scope(c, tr->hf.model_type, (mpi ? ZS_MOE_MPI : 0) | (allocator ? ZS_MOE_ALLOCATOR : 0) |
	             (with_case ? ZS_MOE_CASE : 0), what, sizeof what);
	if (what[0] == '\0')
		return 0;
	return zs_fail(cause, "%s: a mixture of experts runs in the engine's step in " ZS_MOE_SCOPE
	               ", in one process, so far; not with %s", tr->hf.name, what);
}

/* --model and the options that go with it: the shape from the config,
 * T = --seq (default: the model's positions), --recompute. */
static int load_transformer(struct zs_config *c, struct zs_tfm_run *tr, const char *arg, const char *seq,
                            const char *recompute, char **cause)
{
	struct zs_model hf;
	memset(tr, 0, sizeof *tr);
	if (c->given & ZS_KEY_BIT(ZS_KEY_LAYERS))
		return zs_fail(cause, "--model and --layers exclude each other: the config gives the shape");
	if (zs_model_load(arg, &hf, cause) < 0)
		return -1;
	/* 5.x's fused experts (--experts-impl eager): the executor runs the
	 * list's fused layout (engine/ag_exec.c's fused_rows); grouped_mm and
	 * batched_mm are refused by zs_config_check_torch */
	if (zs_model_fused_experts(&hf, c->experts_impl == ZS_EXPERTS_EAGER, cause) < 0)
		return -1;
	snprintf(tr->name, sizeof tr->name, "%s", hf.name);
	tr->hf = hf;
	tfm_dims_from_config(&tr->dims, &hf);
	tr->seq = hf.positions;
	if (seq != NULL) {
		unsigned long long v;
		if (zs_parse_uint("seq", seq, ZS_MODEL_MAX_POSITIONS, "a sequence length", &v, cause) < 0)
			return -1;
		if (v > hf.positions)
			return zs_fail(cause, "--seq: %llu is more than %s's %llu positions (%s)", v, hf.name,
			               (unsigned long long)hf.positions,
			               hf.family == ZS_FAMILY_GPT2 ? "n_positions" : "max_position_embeddings");
		tr->seq = (size_t)v;
	}
	if (recompute != NULL && zs_recompute_parse(recompute, &tr->recompute) != 0)
		return zs_fail(cause, "--recompute: '%.40s' is none of none, selective, full", recompute);
	return transformer_run(c, tr, (c->given & ZS_KEY_BIT(ZS_KEY_PRECISION)) != 0, 0, cause);
}

/* This process's rank in a job being launched, from the launcher's
 * environment (Open MPI, PMIx, MPICH, Slurm), before MPI_Init and even
 * without MPI built in; -1 if none. */
static int launched_rank(void)
{
	static const char *const vars[] = {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "SLURM_PROCID"};
	for (size_t i = 0; i < sizeof vars / sizeof *vars; i++) {
		const char *v = getenv(vars[i]);
		if (v != NULL && *v != '\0')
			return atoi(v);
	}
	return -1;
}

enum { OPT_CASE = ZS_OPT_COMMAND, OPT_OUT, OPT_TIMELINE, OPT_DUMP, OPT_QUIET, OPT_JOBS, OPT_BACKEND, OPT_MODEL,
       OPT_SEQ, OPT_RECOMPUTE, OPT_WRITE_CASE, OPT_TIMELINE_RANKS, OPT_ALLOCATOR, OPT_ALLOC_CONF,
       OPT_CUBLAS_WORKSPACE };

static const struct zs_opt options[] = {
	ZS_OPTS_MODEL,
	{"case", 0, ZS_OPT_FILE, OPT_CASE, NULL},
	{"out", 'o', 1, OPT_OUT, NULL},
	{"timeline", 0, 0, OPT_TIMELINE, NULL},
	{"timeline-ranks", 0, 1, OPT_TIMELINE_RANKS, NULL},
	{"allocator", 0, 1, OPT_ALLOCATOR, NULL},
	{"alloc-conf", 0, 1, OPT_ALLOC_CONF, NULL},
	{"cublas-workspace", 0, 1, OPT_CUBLAS_WORKSPACE, NULL},
	{"dump-weights", 0, 1, OPT_DUMP, NULL},
	{"write-case", 0, 1, OPT_WRITE_CASE, NULL},
	{"quiet", 'q', 0, OPT_QUIET, NULL},
	{"jobs", 'j', 1, OPT_JOBS, NULL},
	{"backend", 0, 1, OPT_BACKEND, NULL},
	{"model", 0, 1, OPT_MODEL, NULL},
	{"seq", 0, 1, OPT_SEQ, NULL},
	{"recompute", 0, 1, OPT_RECOMPUTE, NULL},
	ZS_OPTS_STANDARD,
	{NULL, 0, 0, ZS_OPT_END, NULL},
};

/* The PyTorch step (--wrapper none or ddp) of the run's transformer at
 * its first micro-batch: what it cannot describe yet (a family, an
 * option) is bad usage, refused before anything runs, as theory refuses
 * it. 0; -1 with *cause (bad input); -2 with *cause where DDP's pass
 * fails on the built step (zerosim's internal error: exit 1). */
static int plain_step_check(const struct zs_config *c, char **cause)
{
	/* (under --wrapper deepspeed, mixed is DeepSpeed's bf16: module.bfloat16(),
	 * util/config.c check_ds_wrapper) */
	if (c->precision == ZS_MIXED && c->wrapper != ZS_WRAPPER_DEEPSPEED)
		return zs_fail(cause, "--precision mixed: the PyTorch step (--wrapper %s) is PyTorch's own: fp32 or "
		               "autocast (give --precision fp32 or amp-bf16)", zs_wrapper_name(c->wrapper));
	struct step_params p;
	struct ag_options o;
	struct ag_step s;
	step_params_build(&p, &c->tfm->hf);
	ag_options_from_config(&o, c, 1, c->tfm->seq);
	/* a mixture's list needs a routing: its run finds the values' own
	 * (ag_exec_tfm_run); a balanced one stands for it here */
	const struct zs_model *m = &c->tfm->hf;
	uint64_t *counts = NULL;
	if (m->experts > 0 && o.moe_counts == NULL) {
		size_t L = (size_t)o.grad_accum * m->layers; /* (--grad-accum K: each micro-step's blocks) */
		counts = zs_calloc(L * m->experts, sizeof *counts);
		zs_moe_balanced(counts, L, m->experts, o.batch * o.seq * m->experts_per_tok);
		o.moe_counts = counts;
	}
	/* (FSDP's use_orig_params: what is built depends on N, each the run lists) */
	int each = c->wrapper == ZS_WRAPPER_FSDP && c->fsdp_orig_params, rc = 0;
	for (size_t k = 0; rc == 0 && k < (each ? c->nworld : 1); k++) {
		rc = ag_step_build_run(&s, &c->tfm->hf, &p, &o, c, each ? c->world[k] : 1, cause);
		if (rc == 0)
			ag_step_free(&s);
	}
	free(counts);
	step_params_free(&p);
	return rc; /* -2: the DDP pass's internal error */
}

int zs_cmd_measure(int argc, char **argv)
{
	struct zs_config c;
	zs_config_defaults(&c);
	const char *spec = NULL, *case_path = NULL, *out = NULL, *dump = NULL, *write_case = NULL;
	char *write_side = NULL, *write_lora = NULL;
	const char *model_arg = NULL, *seq_arg = NULL, *recompute_arg = NULL;
	struct zs_tfm_run tfm;
	int timeline = 0, quiet = 0, timeline_ranks = 0, allocator = 0;
	const char *timeline_ranks_arg = NULL, *alloc_conf = NULL, *workspace = NULL;
	struct cuda_alloc_opts alloc_opts;
	unsigned jobs = 0; /* 0: one per CPU online */
	int jobs_given = 0, mpi = 0;
#ifdef HAVE_MPI
	int mpi_started = 0;
#endif
	char *cause = NULL;
	struct zs_case *cs = NULL;
	/* what the case gave once taken (apply_case): it fixes the world,
	 * batch, steps and micro-steps and gives its training settings (a
	 * disagreement apply_case finds is the command line's or the spec's) */
	zs_keys case_keys = 0;
	cJSON *root = NULL;
	struct zs_arg *args = NULL;
	size_t nargs = 0;
	int status = ZS_EXIT_USAGE;

	if (zs_opts_parse(options, argc, argv, &args, &nargs, &cause) != 0)
		goto fail;
	for (size_t i = 0; i < nargs; i++) {
		const char *v = args[i].value;
		switch (args[i].opt->id) {
		case ZS_OPT_HELP:
			usage(stdout);
			free(args);
			return ZS_EXIT_OK; /* main() checks that it was written */
		case ZS_OPT_VERSION:
			zs_opts_print_version();
			free(args);
			return ZS_EXIT_OK;
		case ZS_OPT_SPEC: spec = v; break;
		case OPT_CASE: case_path = v; break;
		case OPT_OUT: out = v; break;
		case OPT_TIMELINE: timeline = 1; break;
		case OPT_TIMELINE_RANKS:
			if (strcmp(v, "0") != 0 && strcmp(v, "all") != 0) {
				zs_fail(&cause, "--timeline-ranks '%.40s': give 0 (rank 0's) or all", v);
				goto fail;
			}
			timeline_ranks_arg = v;
			timeline_ranks = strcmp(v, "all") == 0;
			break;
		case OPT_ALLOCATOR:
			if (strcmp(v, "none") != 0 && strcmp(v, "cuda") != 0) {
				zs_fail(&cause, "--allocator '%.40s': not an allocator (none or cuda)", v);
				goto fail;
			}
			allocator = strcmp(v, "cuda") == 0;
			break;
		case OPT_ALLOC_CONF: alloc_conf = v; break;
		case OPT_CUBLAS_WORKSPACE: workspace = v; break;
		case OPT_DUMP: dump = v; break;
		case OPT_WRITE_CASE: write_case = v; break;
		case OPT_QUIET: quiet = 1; break;
		case OPT_JOBS:
			if (parse_jobs(v, &jobs, &cause) != 0)
				goto fail;
			jobs_given = 1;
			break;
		case OPT_BACKEND:
			if (strcmp(v, "inprocess") != 0 && strcmp(v, "mpi") != 0) {
				zs_fail(&cause, "--backend '%s': not a backend (inprocess or mpi)", v);
				goto fail;
			}
			mpi = strcmp(v, "mpi") == 0;
			break;
		case OPT_MODEL: model_arg = v; break;
		case OPT_SEQ: seq_arg = v; break;
		case OPT_RECOMPUTE: recompute_arg = v; break;
		default: break;
		}
	}
	if (zs_opts_config(&c, args, nargs, &cause) != 0)
		goto fail;
	if (timeline_ranks_arg != NULL && !timeline) {
		zs_fail(&cause, "--timeline-ranks needs --timeline");
		goto fail;
	}
	if (alloc_conf != NULL && !allocator) {
		zs_fail(&cause, "--alloc-conf needs --allocator cuda");
		goto fail;
	}
	if (workspace != NULL && !allocator) {
		zs_fail(&cause, "--cublas-workspace needs --allocator cuda (the workspace is a block of its replay)");
		goto fail;
	}
	/* No memory fraction: measure's replay has no device size (it never
	 * runs out of memory). */
	cuda_alloc_opts_default(&alloc_opts);
	if (allocator && cuda_alloc_parse_conf(alloc_conf, &alloc_opts, &cause) != 0) {
		char *why = cause;
		cause = NULL;
		zs_fail(&cause, "--alloc-conf: %s", why);
		free(why);
		goto fail;
	}
	if (zs_opts_cublas_workspace(workspace, &alloc_opts, &cause) != 0)
		goto fail;
	const char *empty = out != NULL && *out == '\0' ? "--out" : dump != NULL && *dump == '\0' ? "--dump-weights"
	                    : write_case != NULL && *write_case == '\0' ? "--write-case" : NULL;
	if (empty != NULL) {
		zs_fail(&cause, "%s: the file name is empty", empty);
		goto fail;
	}
	if (model_arg == NULL && case_path == NULL && (seq_arg != NULL || recompute_arg != NULL)) {
		zs_fail(&cause, "%s needs --model (a transformer)", seq_arg != NULL ? "--seq" : "--recompute");
		goto fail;
	}
	if (model_arg != NULL && case_path != NULL) {
		zs_fail(&cause, "--model and --case exclude each other: the case file gives the model");
		goto fail;
	}
	/* --recompute-impl non-reentrant: a case has no key for the
	 * checkpoint's implementation (docs/formats.md); one written without
	 * it would name the reentrant run */
	if (c.recompute_nonreentrant && write_case != NULL) {
		zs_fail(&cause, "--write-case with --recompute-impl non-reentrant: a case has no key for the checkpoint's "
		        "implementation (its reader would run the reentrant one)");
		goto fail;
	}
	/* --logits dropped: likewise no key (docs/formats.md); the case
	 * would name the loop that keeps the logits */
	if (c.logits_dropped && write_case != NULL) {
		zs_fail(&cause, "--write-case with --logits dropped: a case has no key for the loop's hold on the logits "
		        "(its reader would keep them)");
		goto fail;
	}
	/* --load-dtype bf16: a case has no key for the dtype the model is
	 * loaded in (docs/formats.md); its values are fp32, and a bf16-loaded
	 * set-up quantizes from their bf16 rounding, so neither side is one run */
	if (c.load_bf16 && (write_case != NULL || case_path != NULL)) {
		zs_fail(&cause, "--load-dtype bf16 with %s: a case has no key for the dtype the model is loaded in",
		        write_case != NULL ? "--write-case" : "--case");
		goto fail;
	}
	if (model_arg != NULL && load_transformer(&c, &tfm, model_arg, seq_arg, recompute_arg, &cause) != 0)
		goto fail;
	if (case_path != NULL) {
		if (engine_case_load(case_path, &cs, &cause) != 0 || apply_case(&c, cs, seq_arg, recompute_arg, &cause) != 0)
			goto fail;
		case_keys = cs->train.given | ZS_KEY_BIT(ZS_KEY_WORLD) | ZS_KEY_BIT(ZS_KEY_BATCH) | ZS_KEY_BIT(ZS_KEY_STEPS) |
		            ZS_KEY_BIT(ZS_KEY_GRAD_ACCUM);
		if (cs->tfm != NULL) {
			tfm = *cs->tfm;
			int mixed_asked = ((c.given | cs->train.given) & ZS_KEY_BIT(ZS_KEY_PRECISION)) != 0;
			if (transformer_run(&c, &tfm, mixed_asked != 0, 1, &cause) != 0)
				goto fail;
		}
	}
	if (write_case != NULL && c.tfm != NULL && c.precision != ZS_FP32 && c.precision != ZS_AMP_FP16) {
		zs_fail(&cause, "--write-case: a transformer's case is fp32 or amp-fp16 only so far (--precision fp32 or amp-fp16)");
		goto fail;
	}
	if (write_case != NULL && c.nworld != 1) {
		zs_fail(&cause, "--write-case: a case holds one world size, and the run has %zu (give one --world)", c.nworld);
		goto fail;
	}
	/* an MLP case holds a batch a step: not the K micro-batches DeepSpeed's
	 * accumulation reads (a case file is given, K is its: 1) */
	if (write_case != NULL && c.tfm == NULL && c.grad_accum > 1) {
		zs_fail(&cause, "--write-case with --grad-accum %u: an MLP case holds one batch a step, not K micro-batches "
		        "(give --grad-accum 1)", c.grad_accum);
		goto fail;
	}
	if (write_case != NULL && c.tfm != NULL)
		write_side = engine_case_side_path(write_case);
	if (write_case != NULL && c.tfm != NULL && c.lora_r)
		write_lora = engine_case_lora_path(write_case);
	if (zs_config_validate(&c, &cause) != 0 || zs_framework_check(&c, 0, &cause) != 0 ||
	    zs_config_check_model(&c, c.tfm != NULL, &cause) != 0)
		goto fail;
	if (zs_precision_amp_check(&c, c.tfm != NULL, &cause) != 0)
		goto fail;
	if (moe_run_check(&c, mpi, allocator, case_path != NULL || write_case != NULL, &cause) != 0)
		goto fail;
	int lora_paper = zs_lora_engine(&c);
	if (lora_paper && (case_path != NULL || write_case != NULL)) {
		zs_fail(&cause, "--lora-r under --framework %s with %s: the case's weights are the base's alone (give "
		        "--framework torch)", zs_framework_name(c.framework), case_path != NULL ? "--case" : "--write-case");
		goto fail;
	}
	if ((c.freeze[0] || lora_paper) && (c.framework == ZS_FW_PAPER || c.framework == ZS_FW_DEEPSPEED) && mpi) {
		cause = zs_asprintf("--%s under --framework %s: in one process so far (not with --backend mpi)",
		                    lora_paper ? "lora-r" : "freeze", zs_framework_name(c.framework));
		goto fail;
	}
	if (zs_freeze_paper_check(&c, c.tfm != NULL ? &c.tfm->hf : NULL, &cause) != 0 ||
	    zs_lora_paper_check(&c, c.tfm != NULL ? &c.tfm->hf : NULL, &cause) != 0)
		goto fail;
	if (zs_wrapper_step(&c) && c.tfm != NULL &&
	    zs_torch_recompute_set(&c, zs_recompute_name(c.tfm->recompute), &cause) != 0)
		goto fail;
	/* --attn reaches the PyTorch step only: the engine's own steps
	 * (--framework deepspeed, torch's --wrapper auto) run eager attention,
	 * so a measure given sdpa there would record what it did not run
	 * (theory keeps it as --flash-attn's reference column) */
	if ((c.given & ZS_KEY_BIT(ZS_KEY_ATTN)) && c.attn == ZS_ATTN_SDPA && !zs_wrapper_step(&c)) {
		cause = zs_asprintf("--attn sdpa: --framework %s%s runs zerosim's own step, whose attention is eager "
		                    "(give --attn eager, or --framework torch --wrapper none, ddp or fsdp)",
		                    zs_framework_name(c.framework), c.framework == ZS_FW_TORCH ? " --wrapper auto" : "");
		goto fail;
	}
	if (zs_wrapper_step(&c) && c.tfm != NULL) {
		int rc = plain_step_check(&c, &cause);
		if (rc == -2) /* zerosim's failure, not the input's */
			status = ZS_EXIT_RUNTIME;
		if (rc != 0)
			goto fail;
	}
	if (mpi && zs_wrapper_step(&c)) {
		zs_fail(&cause, "--backend mpi: --wrapper %s runs its ranks in one process (the PyTorch step under MPI "
		        "is not built yet); leave --backend out", zs_wrapper_name(c.wrapper));
		goto fail;
	}
#ifndef HAVE_MPI
	if (mpi) {
		zs_fail(&cause, "--backend mpi: this zerosim was built without MPI (./configure --with-mpi)");
		goto fail;
	}
#endif
	if (mpi && timeline_ranks) {
		zs_fail(&cause, "--timeline-ranks all does not apply to --backend mpi: process 0 logs only the ranks it holds");
		goto fail;
	}
	if (mpi && jobs_given) {
		zs_fail(&cause, "--jobs does not apply to --backend mpi: its runs go one at a time over the processes");
		goto fail;
	}
	/* Under MPI only process 0 writes, and checks where it writes. */
	int writer = !mpi || launched_rank() <= 0;
	char *model_file = zs_model_file(model_arg); /* the config --model reads */
	const struct zs_path in[] = {{"--spec", spec}, {"--case", case_path}, {"--model", model_file},
	                             {"--case's weights", cs != NULL ? cs->weights_file : NULL},
	                             {"--case's adapters", cs != NULL ? cs->lora_file : NULL}};
	const struct zs_path outs[] = {{"--out", out}, {"--dump-weights", dump}, {"--write-case", write_case},
	                               {"--write-case's weights", write_side}, {"--write-case's adapters", write_lora}};
	int clash = writer ? zs_check_paths(in, 5, outs, 5, &cause) : 0;
	free(model_file);
	if (clash != 0)
		goto fail;
	/* A folder is bad usage; a folder that cannot take the file, a run-time failure. */
	struct stat st;
	for (size_t i = 0; writer && i < sizeof outs / sizeof outs[0]; i++)
		if (outs[i].path != NULL && stat(outs[i].path, &st) == 0 && S_ISDIR(st.st_mode)) {
			zs_fail(&cause, "%s %s: is a folder, not a file", outs[i].opt, outs[i].path);
			goto fail;
		}
	for (size_t i = 0; writer && i < sizeof outs / sizeof outs[0]; i++)
		if (outs[i].path != NULL && check_writable(outs[i].path, &cause) != 0) {
			status = ZS_EXIT_RUNTIME;
			goto fail;
		}

	status = ZS_EXIT_RUNTIME;
#ifdef HAVE_MPI
	if (mpi) {
		if (mpi_job_start(NULL, NULL, &cause) != 0)
			goto fail;
		mpi_started = 1;
		writer = mpi_job_rank() == 0;
		if (c.nworld == 1 && c.world[0] % mpi_job_size() != 0) {
			zs_fail(&cause, "--world %u: %u MPI processes cannot share %u ranks evenly; give a multiple of %u",
			        c.world[0], mpi_job_size(), c.world[0], mpi_job_size());
			status = ZS_EXIT_USAGE;
			goto fail;
		}
	}
#endif
	struct zs_sweep_options so = {jobs, timeline, dump != NULL,
	                              !quiet && (mpi || isatty(STDERR_FILENO)) ? "zerosim measure" : NULL, mpi,
	                              timeline_ranks, allocator ? &alloc_opts : NULL};
	struct zs_result *res = NULL;
	size_t nres = 0;
	if (sweep_run(&c, cs, &so, &res, &nres, &cause) != 0)
		goto fail;
	if (!writer) {
		sweep_results_free(res, nres);
		goto done;
	}
	root = measure_json_new(&c, case_path);
	if (allocator)
		zs_alloc_config_json(root, alloc_conf, alloc_opts.cublas_workspace);
	int diverged = 0;
	for (size_t i = 0; i < nres; i++) {
		for (unsigned t = 0; t < c.steps; t++)
			if (!isfinite(res[i].losses[t]) && diverged++ == 0)
				fprintf(stderr, "zerosim measure: warning: the loss is not finite (%s, N=%u, step %u): "
				        "training diverged (try a smaller --lr); the bytes are still exact\n",
				        zs_scheme_name(res[i].scheme), res[i].world, t + 1);
		measure_json_add_run(root, &c, &res[i]);
	}
	if (dump != NULL) { /* the last run's weights */
		cJSON *wj = measure_json_weights(&c, &res[nres - 1]);
		int r = zs_json_write(dump, wj, &cause);
		cJSON_Delete(wj);
		if (r != 0) {
			sweep_results_free(res, nres);
			goto fail;
		}
	}
	sweep_results_free(res, nres);
	if (write_case != NULL) { /* the case this run trained: the one it read, or its seed's */
		struct zs_case *made = cs != NULL ? NULL : engine_case_from_seed(&c, c.world[0]);
		/* LoRA's adapters as the run started them: its set-up again */
		int r = made != NULL && c.lora_r && c.tfm != NULL
		            ? ag_exec_tfm_adapters(&c, &c.tfm->hf, c.tfm->seq, c.world[0], &made->lora_init,
		                                   &made->nlora_init, &cause)
		            : 0;
		if (r == 0)
			r = engine_case_write(write_case, cs != NULL ? cs : made, &c, &cause);
		engine_case_free(made);
		if (r != 0)
			goto fail;
	}
	if (out != NULL) {
		if (zs_json_write(out, root, &cause) != 0)
			goto fail;
	} else {
		char *text = zs_json_print(root);
		if (fputs(text, stdout) == EOF || fputc('\n', stdout) == EOF || fflush(stdout) != 0) {
			free(text);
			zs_fail(&cause, "cannot write to standard output: %s", strerror(errno));
			goto fail;
		}
		free(text);
	}
done:
	status = ZS_EXIT_OK;
fail:;
	/* Under MPI every process meets the same bad input: one says so. */
	int say = !mpi || launched_rank() <= 0;
#ifdef HAVE_MPI
	if (mpi_started)
		say = mpi_job_rank() == 0;
#endif
	zs_opts_name_as_typed(args, nargs, &cause);
	zs_opts_name_source(args, nargs, c.given, spec, case_keys, case_path, &cause);
	if (status != ZS_EXIT_OK && say)
		zs_print_error("zerosim measure", cause ? cause : "failed");
#ifdef HAVE_MPI
	/* After the line: once a process has ended non-zero, mpirun may kill
	 * process 0 before it could say why. */
	if (mpi_started)
		mpi_job_finish();
#endif
	free(cause);
	cJSON_Delete(root);
	engine_case_free(cs);
	free(write_side);
	free(write_lora);
	free(args);
	return status;
}

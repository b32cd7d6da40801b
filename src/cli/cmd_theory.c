/*
 * cmd_theory — `zerosim theory`: the closed-form model (src/theory/) for the
 * engine's model options, for a transformer given by a Hugging Face config
 * (--model), or for a model given only as a parameter count. Writes
 * theory.json (docs/formats.md, zerosim-theory/1) or text tables.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli/cli.h"
#include "cli/options.h"
#include "theory/theory.h"
#include "theory/theory_nccl.h"
#include "util/config.h"
#include "util/ds_coord.h"
#include "util/freeze.h"
#include "util/lora.h"
#include "util/model.h"
#include "util/schedule.h"
#include "util/step.h"
#include "util/util.h"

/* The paper's data-parallel degrees (Table 1), used with --params. */
static const unsigned paper_worlds[] = { 1, 4, 16, 64, 256, 1024 };
/* With --model: powers of two, one node to a large cluster. */
static const unsigned model_worlds[] = { 1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024 };

enum {
	OPT_PARAMS = ZS_OPT_COMMAND, OPT_LARGEST_UNIT, OPT_DEVICE_MEM, OPT_FORMAT, OPT_OUT,
	OPT_MODEL, OPT_SEQ, OPT_RECOMPUTE, OPT_FLASH, OPT_RESERVE, OPT_ALLOCATOR, OPT_ALLOC_CONF,
	OPT_DEVICE_OVERHEAD, OPT_NCCL_CHANNELS, OPT_NCCL_BUFFSIZE, OPT_CUBLAS_WORKSPACE, OPT_ROUTING
};

static const struct zs_opt options[] = {
	ZS_OPTS_MODEL,
	{"params", 0, 1, OPT_PARAMS, NULL},
	{"largest-unit", 0, 1, OPT_LARGEST_UNIT, NULL},
	{"device-mem", 0, 1, OPT_DEVICE_MEM, NULL},
	{"reserve", 0, 1, OPT_RESERVE, NULL},
	{"model", 0, 1, OPT_MODEL, NULL},
	{"seq", 0, 1, OPT_SEQ, NULL},
	{"recompute", 0, 1, OPT_RECOMPUTE, NULL},
	{"flash-attn", 0, 0, OPT_FLASH, NULL},
	{"routing", 0, 1, OPT_ROUTING, NULL},
	{"allocator", 0, 1, OPT_ALLOCATOR, NULL},
	{"alloc-conf", 0, 1, OPT_ALLOC_CONF, NULL},
	{"device-overhead", 0, 1, OPT_DEVICE_OVERHEAD, NULL},
	{"nccl-channels", 0, 1, OPT_NCCL_CHANNELS, NULL},
	{"nccl-buffsize", 0, 1, OPT_NCCL_BUFFSIZE, NULL},
	{"cublas-workspace", 0, 1, OPT_CUBLAS_WORKSPACE, NULL},
	{"format", 0, 1, OPT_FORMAT, NULL},
	{"out", 'o', 1, OPT_OUT, NULL},
	ZS_OPTS_STANDARD,
	{NULL, 0, 0, ZS_OPT_END, NULL},
};

/* --nccl-channels and --nccl-buffsize: parts of the fixed costs, which
 * --allocator cuda counts and --device-overhead replaces. */
static int nccl_options_check(const struct theory_request *req, int allocator, char **cause)
{
	if (req->nccl_buffsize > 0 && req->nccl_channels == 0)
		return zs_fail(cause, "--nccl-buffsize needs --nccl-channels (the measured figures are at NCCL's "
		               "default 4 MiB)");
	if (req->nccl_channels > 0 && !allocator)
		return zs_fail(cause, "--nccl-channels needs --allocator cuda (NCCL's buffers are a fixed cost "
		               "added to what it reserves)");
	if (req->nccl_channels > 0 && req->overhead_given)
		return zs_fail(cause, "--nccl-channels and --device-overhead: --device-overhead replaces "
		               "NCCL's buffers with the rest of the fixed costs");
	/* NCCL keeps the sizes, and p2p.cc 419-421 a receive connection's
	 * sum of them, in an int. */
	if (req->nccl_buffsize > (double)THEORY_NCCL_MAX_BUFFSIZE)
		return zs_fail(cause, "--nccl-buffsize: %.0f bytes is more than the %llu a receive buffer's size "
		               "(an int in NCCL) leaves", req->nccl_buffsize,
		               (unsigned long long)THEORY_NCCL_MAX_BUFFSIZE);
	return 0;
}

static void usage(void)
{
	fputs(
"Usage: zerosim theory [MODEL OPTIONS] [--out FILE]\n"
"   or: zerosim theory --model NAME|ORG/NAME|FILE [--seq S] [--batch B]\n"
"                      [--recompute R] [--flash-attn] [--routing R]\n"
"                      [--device-mem SIZE [--reserve SIZE]] [--out FILE]\n"
"   or: zerosim theory --params P [--largest-unit L] [--world LIST] [--out FILE]\n"
"Print or write the closed-form per-rank memory and communication of DP and\n"
"ZeRO-1/2/3: the ZeRO paper's floors and the exact step schedule\n"
"(docs/schedule.md), or for a transformer the peak with its activations.\n"
"\n"
"Model options (as for 'zerosim measure'):\n"
"      --layers LIST      layer widths d0,...,dL (default 64,256,64)\n"
"      --world LIST       world sizes N (default 1,2,4,8,16,32; 1 under\n"
"                         --wrapper none)\n"
"      --schemes LIST     of dp,zero1,zero2,zero3 (default all)\n"
"      --unit LIST        of model,layer (default model)\n"
"      --precision P      mixed, bf16 (mixed's bytes) or fp32 (default mixed;\n"
"                         fp32 under --wrapper none, ddp or fsdp);\n"
"                         amp-bf16: PyTorch's autocast over the PyTorch step\n"
"                         (--wrapper none, ddp or fsdp, --torch-device cpu; gpt2,\n"
"                         llama, mistral, qwen2, qwen3, phi3); amp-fp16: float16\n"
"                         autocast with GradScaler (2.6; --wrapper none, ddp\n"
"                         or fsdp); under --wrapper\n"
"                         deepspeed, mixed (or bf16) is DeepSpeed's bf16 (the\n"
"                         module cast to bf16, fp32 partition; zero1, zero2)\n"
"      --optimizer O      adam or sgd (default adam)\n"
"      --batch B          per-rank batch (default 4)\n"
"      --framework F      paper (default), torch (dp: DDP, zero1:\n"
"                         ZeroRedundancyOptimizer, zero2/3: FSDP) or\n"
"                         deepspeed (every scheme as DeepSpeed runs it;\n"
"                         DeepSpeed's own zero2/zero3 estimate beside)\n"
"      --ds-reduce-bucket B, --ds-allgather-bucket B, --ds-overlap-comm on|off\n"
"                         DeepSpeed's settings (default 5e8, 5e8, off)\n"
"      --ds-persist T     tensors of at most T elements stay whole under\n"
"                         DeepSpeed's ZeRO-3 (default 1e5)\n"
"      --ds-prefetch-bucket B, --ds-max-live M\n"
"                         ZeRO-3's parameter coordinator: elements a fetch\n"
"                         prefetches, and the most whole before a prefetch\n"
"                         (default 5e7, 1e9; zero3 only)\n"
"      --ds-sub-group-size S\n"
"                         ZeRO-3's sub_group_size: the step's fp32 gradient a\n"
"                         sub group of about S elements at a time (default 1e9)\n"
"      --offload O        none (default), optimizer or params (zero3 only):\n"
"                         DeepSpeed's device and host bytes per rank\n"
"      --ranks-per-node R ranks of a node (default 1): host bytes per node\n"
"      --bucket-cap MB    torch: DDP's gradient bucket size (default 25)\n"
"      --prefetch P       torch: FSDP's backward prefetch, none (default, as\n"
"                         PyTorch 1.13) or backward-pre (torch 2.x's default)\n"
ZS_HELP_TORCH_STEP
"      --steps N          the run's steps: 1 gives the first step's list\n"
"                         (the plain loop, DDP, FSDP, DeepSpeed ZeRO-1/2);\n"
"                         DeepSpeed's zero3: its mean comm over N steps\n"
"      --seed, --lr, --beta1, --beta2, --eps\n"
"                         ignored but by --routing FILE, whose run's they\n"
"                         must be (the theory needs none)\n"
"      --spec FILE        read a zerosim-sweep/5 file; options override it\n"
"\n"
"A transformer (a Hugging Face config.json):\n"
"      --model NAME|ORG/NAME|FILE\n"
"                         a shipped config (gpt2, gpt2-medium, gpt2-large,\n"
"                         gpt2-xl, llama-2-7b, llama-2-13b, llama-2-70b,\n"
"                         llama-3-8b, llama-3-70b, mistral-7b, qwen2.5-0.5b,\n"
"                         phi-3-mini-4k, qwen3-0.6b, gemma-2-2b, gemma-3-1b,\n"
"                         gemma-3-4b, qwen2.5-7b, qwen3-8b, gemma-2-9b;\n"
"                         mixtures: mixtral-8x7b, qwen1.5-moe-a2.7b,\n"
"                         qwen3-30b-a3b, --framework paper or deepspeed, and\n"
"                         --framework torch --wrapper none too)\n"
"                         or its Hugging Face Hub id\n"
"                         (meta-llama/Meta-Llama-3-8B), either in any case;\n"
"                         another id's config.json in the local Hugging Face\n"
"                         cache (HF_HUB_CACHE, HF_HOME/hub; never the\n"
"                         network); or a config.json path;\n"
"                         then N defaults to 1,2,4,...,1024, --unit to layer\n"
"                         and --batch (the micro-batch per rank) to 1\n"
"      --seq S            tokens per sequence (default: the model's positions)\n"
"      --recompute R      none, selective or full (default none); under\n"
"                         --wrapper none, ddp or fsdp full is Hugging Face's\n"
"                         gradient checkpointing (selective has none)\n"
"      --flash-attn       the attention scores are never stored (under torch\n"
"                         and deepspeed: --attn sdpa)\n"
"      --routing R        a mixture of experts' tokens per expert: balanced\n"
"                         (default: a block's B*T*k assignments as even as\n"
"                         integers allow), worst (all on k experts), or FILE,\n"
"                         a measured.json of the sweep's N, --steps, --batch\n"
"                         and --seq (its runs' \"routing\"), model, --seed\n"
"                         and --precision (from step 2 --optimizer, --lr,\n"
"                         --beta1, --beta2, --eps); --framework torch\n"
"                         --wrapper none, ddp or fsdp (mixtral, qwen2_moe,\n"
"                         qwen3_moe; 1.13 or 2.6, fp32): balanced or worst\n"
"                         every step and rank alike (worst: step 1\n"
"                         balanced, --steps 2 or more; no bound there: a\n"
"                         run can peak above it), or FILE, its last\n"
"                         step (its peak the most of its steps' after the\n"
"                         first; ddp: each rank's own, none idle but under\n"
"                         --ddp-find-unused on, one N a sweep where the\n"
"                         ranks route apart; so under --framework deepspeed\n"
"                         --wrapper deepspeed zero1 and zero2, fp32, none\n"
"                         idle; --grad-accum K, --wrapper\n"
"                         none: each step's K micro-steps' counts, the\n"
"                         file's \"micro_steps\" K)\n"
"\n"
"A model known only by its size (floors only):\n"
"      --params P         parameter count, e.g. 7.5e9 (default N list:\n"
"                         1,4,16,64,256,1024 as in the paper's Table 1)\n"
"      --largest-unit L   elements of the largest unit ZeRO-3 gathers; adds\n"
"                         its transient L*(p+g) bytes\n"
"\n"
"Output:\n"
"      --device-mem SIZE  device memory, e.g. 80GB (1e9) or 80GiB (2^30);\n"
"                         says where the floor and the peak fit, and the\n"
"                         largest micro-batch whose peak fits\n"
"      --reserve SIZE     held back from --device-mem for anything else you\n"
"                         know the device holds (default 0); without\n"
"                         --allocator cuda, also the CUDA context and the\n"
"                         allocator's cache, which it models (device less\n"
"                         reserve less fixed costs is what cudaMalloc gets)\n"
"      --allocator A      none (default) or cuda: replay each row's step\n"
"                         through PyTorch 2.6.0's CUDA caching allocator:\n"
"                         reserved bytes, fragmentation, segments, and where\n"
"                         --device-mem runs out (rows with an exact step);\n"
"                         the fits and the largest micro-batch are then\n"
"                         judged on reserved plus the device's fixed costs\n"
"      --alloc-conf CONF  with --allocator cuda: its PYTORCH_CUDA_ALLOC_CONF,\n"
"                         e.g. expandable_segments:True,max_split_size_mb:512\n"
"      --device-overhead SIZE\n"
"                         with --allocator cuda: what the device holds\n"
"                         outside the allocator, instead of the documented\n"
"                         CUDA context and NCCL buffers\n"
"      --nccl-channels C  with --allocator cuda: NCCL's buffers per\n"
"                         communicator from NCCL 2.21.5's source at C\n"
"                         channels (1 to 32) instead of the figures\n"
"                         measured in NCCL issue 964\n"
"      --nccl-buffsize SIZE\n"
"                         with --nccl-channels: NCCL_BUFFSIZE (default 4MiB)\n"
"      --cublas-workspace SIZE\n"
"                         with --allocator cuda: the cuBLAS workspace the\n"
"                         step's first matmul asks the allocator for (0:\n"
"                         none; default 33554432, PyTorch 2.6 on H100/H200;\n"
"                         8519680 on other GPUs)\n"
"      --format F         json or text (default json with --out, else text)\n"
"  -o, --out FILE         write there (atomically) instead of stdout\n"
"  -h, --help             show this help and exit\n"
"  -V, --version          output version information and exit\n"
"\n"
"Exit status: 0 success, 1 failure at run time, 2 bad usage or input.\n",
	stdout);
}

/* The shared parsers say what is wrong with a value; name the option too. */
static void name_option(char **cause, const char *option)
{
	char *named = zs_asprintf("%s: %s", option, *cause != NULL ? *cause : "bad value");

	free(*cause);
	*cause = named;
}

static int usage_error(const char *cause)
{
	zs_print_error("zerosim theory", cause);
	return ZS_EXIT_USAGE;
}

/* --device-mem and --reserve together. */
static int check_memory(const struct theory_request *req, int reserve_given, char **cause)
{
	if (reserve_given && req->device_mem <= 0)
		return zs_fail(cause, "--reserve needs --device-mem (it is held back from the device)");
	if (req->device_mem > 0 && req->reserve >= req->device_mem)
		return zs_fail(cause, "--reserve: %.6g GB leaves nothing of the %.6g GB of --device-mem",
		               req->reserve / 1e9, req->device_mem / 1e9);
	return 0;
}

/* A mixture of experts (mixtral): the theory follows the engine's step
 * (docs/schedule.md, "Mixtures of experts"), so it takes what measure
 * runs (zs_moe_scope) and a routing (--routing, default balanced); a
 * file's counts must be the sweep's (theory_routing_check). Under
 * --framework torch the PyTorch step follows one step's routing, a
 * file's (config->moe_counts). */
static int moe_check(struct theory_request *req, struct zs_config *config, const struct zs_model *m, const char *arg,
                     struct theory_routing *r, int allocator, int flash, char **cause)
{
	int dense = m == NULL || m->experts == 0;
	if (dense && arg != NULL)
		return zs_fail(cause, "--routing needs a mixture of experts (--model of a mixtral, qwen2_moe or qwen3_moe)");
	if (dense)
		return 0;
	/* the auxiliary loss's tensors (load_balancing_loss_func's concatenated
	 * router logits, softmax, one-hot, means) are in the PyTorch step
	 * only: elsewhere a prediction without them would be short, so none,
	 * as measure's */
	if (zs_model_router_check(m, req->config->framework == ZS_FW_TORCH, cause) < 0)
		return -1;
	char what[96];
	zs_moe_scope(req->config, m->model_type,
	             (allocator ? ZS_MOE_ALLOCATOR : 0) | (flash ? ZS_MOE_FLASH : 0), what, sizeof what);
	if (what[0] != '\0') {
		/* its model states are known whatever the step: point at them */
		struct step_params p;
		uint64_t unit = 0;
		step_params_build(&p, m);
		for (size_t l = 0; l < p.nlayers; l++)
			unit = p.layer[l].numel > unit ? p.layer[l].numel : unit;
		uint64_t psi = p.numel;
		step_params_free(&p);
		return zs_fail(cause, "%s: a mixture of experts (%llu expert%s, top %llu): the theory follows the engine's "
		               "step, " ZS_MOE_SCOPE ", so far; not with %s (its model "
		               "states alone: --params %llu --largest-unit %llu)", m->name, (unsigned long long)m->experts,
		               m->experts == 1 ? "" : "s", (unsigned long long)m->experts_per_tok, what,
		               (unsigned long long)psi, (unsigned long long)unit);
	}
	if (theory_routing_parse(r, arg != NULL ? arg : "balanced", cause) < 0)
		return -1;
	req->act.routing = r;
	if (r->mode == THEORY_ROUTING_FILE && req->device_mem > 0)
		return zs_fail(cause, "--routing %s: a measured routing is the counts of its batch; --device-mem's "
		               "largest micro-batch needs --routing balanced or worst", arg);
	uint64_t BT = (uint64_t)req->config->batch * req->act.seq;
	if (theory_routing_check(r, m, req->config, BT, cause) < 0)
		return -1;
	/* the schemes it concerns: those given DeepSpeed's own step
	 * (theory_tfm_has_schedule: every scheme, zero3's the z3 leaf), not
	 * a row at the paper's level only */
	char starved[160], schemes[64] = "";
	unsigned mask = 0; /* the schemes of schemes[], bit 1 << scheme */
	struct theory_bytes bytes;
	theory_bytes_per_param(req->config->precision, req->config->optimizer, &bytes);
	for (size_t i = 0; req->config->framework == ZS_FW_DEEPSPEED && !zs_wrapper_step(req->config) &&
	                   i < req->config->nschemes; i++) {
		int built = 1; /* zero3's leaf; zero1 and zero2 at every N given where ds_coord_starved_built */
		for (size_t w = 0; req->config->schemes[i] != ZS_ZERO3 && w < req->config->nworld; w++)
			built &= ds_coord_starved_built(req->config, req->config->schemes[i], req->config->world[w]);
		if (!built && theory_tfm_has_schedule(m, &req->act, &bytes)) {
			mask |= 1u << req->config->schemes[i];
			snprintf(schemes + strlen(schemes), sizeof schemes - strlen(schemes), "%s%s", schemes[0] ? ", " : "",
			         zs_scheme_name(req->config->schemes[i]));
		}
	}
	if (schemes[0] && theory_routing_starved(r, m, req->config, mask, BT, starved, sizeof starved))
		return zs_fail(cause, "%s: %s gets no token (--schemes %s): " ZS_MOE_STARVED, m->name, starved, schemes);
	/* (--wrapper deepspeed: DeepSpeed's engine over the same PyTorch step) */
	if (zs_wrapper_step(config)) {
		/* the steady step's: the file's run of the sweep's first (scheme,
		 * unit, N), rank 0, its last step (tests/moe_hf_torch.sh); under
		 * balanced or worst the run those counts make, every rank alike
		 * (theory_routing_torch) */
		if (r->mode != THEORY_ROUTING_FILE && theory_routing_torch(r, m, config, BT, cause) < 0)
			return -1;
		const char *rarg = arg != NULL ? arg : "balanced";
		const struct theory_routing_run *x =
		        r->mode == THEORY_ROUTING_FILE
		                ? theory_routing_run_of(r, config->schemes[0], config->units[0], config->world[0])
		                : &r->torch;
		/* an expert without a token keeps its .grad None under zero_grad
		 * zeros too (1.13's zeroes the grads there are), so Adam skips it
		 * until its first token: the step's set-up gives every parameter
		 * its grad and state, as every expert's first-step token does */
		int unused = config->wrapper == ZS_WRAPPER_DDP && config->ddp_find_unused;
		if (config->wrapper == ZS_WRAPPER_DEEPSPEED && theory_routing_starved(r, m, config, ~0u, BT, starved,
		                                                                      sizeof starved))
			return zs_fail(cause, "--routing %s: %s gets no token: " ZS_MOE_DS_WRAPPER_STARVED, rarg, starved);
		size_t LE1 = x->blocks / x->micro * x->experts; /* one micro-step's lists */
		/* (under --wrapper fsdp no parameter has a .grad of its own: the
		 * flat parameter's, whole, from the first step on, an idle
		 * expert's slot SplitWithSizesBackward's zeros, util/ag_fsdp.c;
		 * under --experts-impl eager the fused parameters' grads come
		 * whole from any hit expert's select_backward, so an idle expert
		 * has its slot of them from the first step on) */
		int whole = config->wrapper == ZS_WRAPPER_FSDP || config->experts_impl == ZS_EXPERTS_EAGER;
		for (size_t i = 0; !whole && i < x->blocks * x->experts; i++) {
			/* under --grad-accum K an expert idle in one micro-step of the
			 * first step and used in another has its .grad by the step's
			 * end (AccumulateGrad makes it at its first token), and the
			 * first step() its state, as at K = 1 */
			int later = 0;
			for (size_t k = 0; x->micro > 1 && k < x->micro && !later; k++)
				later = x->counts[k * LE1 + i % LE1] != 0;
			if (later)
				continue;
			if (x->counts[i] == 0 && unused) {
				/* --ddp-find-unused: the reducer gives a rank's idle expert
				 * its .grad at finalize from the bucket where another rank
				 * used it (finalize_bucket_dense), and leaves it None where
				 * none did */
				int some = 0;
				for (unsigned k = 1; k < x->world && !some; k++)
					some = x->counts[(size_t)k * x->steps * x->blocks * x->experts + i] != 0;
				if (!some)
					return zs_fail(cause, "--routing %s: block %zu's expert %zu gets no token on any rank in "
					               "the run's first step: under --ddp-find-unused the reducer leaves its .grad "
					               "None and Adam skips it until one comes: not described yet (give more "
					               "tokens: --batch, --seq)", rarg, i / x->experts % (x->blocks / x->micro), i % x->experts);
			} else if (x->counts[i] == 0)
				return zs_fail(cause, "--routing %s: block %zu's expert %zu gets no token in the run's first "
				               "step%s, so its .grad stays None and Adam skips it until one comes: not described "
				               "under --framework torch yet (give more tokens: --batch, --seq)", rarg,
				               i % LE1 / x->experts, i % x->experts, x->micro > 1 ? " (in any micro-step)" : "");
		}
		size_t LE = x->blocks * x->experts;
		config->moe_counts = x->counts + (x->steps - 1) * LE;
		config->moe_run = x->counts;
		config->moe_run_steps = (unsigned)x->steps;
		config->moe_run_ranks = 1;
		if (config->wrapper == ZS_WRAPPER_DDP || config->wrapper == ZS_WRAPPER_FSDP ||
		    config->wrapper == ZS_WRAPPER_DEEPSPEED) {
			/* DDP at its defaults (find_unused_parameters False, ag_ddp.h):
			 * an expert without a token on some rank has no grad there, its
			 * bucket never reduces, and 1.13's reducer raises at the next
			 * forward (reducer.cpp ensure_prior_reduction_finished); under
			 * FSDP the unit's flat gradient takes it (util/ag_fsdp.c) */
			if (config->wrapper == ZS_WRAPPER_DDP && !unused &&
			    theory_routing_starved(r, m, config, ~0u, BT, starved, sizeof starved))
				return zs_fail(cause, "--routing %s: %s gets no token: under --wrapper ddp "
				               "(find_unused_parameters False) its bucket is never reduced, and PyTorch 1.13 "
				               "raises at the step after (give more tokens: --batch, --seq)", rarg, starved);
			/* each rank routes its own batch: where the ranks route apart
			 * (in any step), each walks its own lists (zs_config.moe_run),
			 * which the theory follows for one N a sweep (its run's
			 * ranks); one routing for every rank serves every N */
			int apart = 0;
			for (size_t w = 0; r->mode == THEORY_ROUTING_FILE && w < config->nworld; w++) {
				const struct theory_routing_run *y =
				        theory_routing_run_of(r, config->schemes[0], config->units[0], config->world[w]);
				for (unsigned k = y == x; k < y->world; k++)
					if (y->steps != x->steps ||
					    memcmp(y->counts + (size_t)k * y->steps * LE, x->counts, x->steps * LE * sizeof *x->counts) !=
					            0) {
						if (config->nworld > 1)
							return zs_fail(cause, "--routing %s: rank %u at N = %u routes otherwise than rank 0 at "
							               "N = %u: under --wrapper %s the theory follows each rank's own routing "
							               "for one N a sweep (give one N, or a file whose ranks route alike)",
							               arg, k, y->world, x->world, zs_wrapper_name(config->wrapper));
						apart = 1;
					}
			}
			config->moe_run_ranks = apart ? x->world : 1;
		}
	}
	return 0;
}

/* --model and the options that go with it; the defaults a transformer
 * gets where the command line (or a spec) is silent. */
static int load_model(struct theory_request *req, struct zs_config *c, struct zs_model *m,
                      const char *arg, const char *seq, const char *recompute, int flash,
                      int params_given, const struct zs_arg *args, size_t nargs, char **cause)
{
	if (params_given || zs_opts_sets(args, nargs, "layers") || req->largest_unit > 0)
		return zs_fail(cause, "--model and %s exclude each other: the config gives the shape",
		               params_given ? "--params" : req->largest_unit > 0 ? "--largest-unit"
		                                                              : "--layers");
	if (zs_model_load(arg, m, cause) < 0)
		return -1;
	/* transformers 5.x's fused experts (util/step.c's moe_block) */
	if (zs_model_fused_experts(m, c->experts_impl == ZS_EXPERTS_EAGER, cause) < 0)
		return -1;
	req->model = m;
	req->act.elem = c->precision == ZS_FP32 ? 4 : 2;
	req->act.flash = flash;
	req->act.seq = m->positions;
	if (seq != NULL) {
		unsigned long long v;
		if (zs_parse_uint("seq", seq, ZS_MODEL_MAX_POSITIONS, "a sequence length", &v, cause) < 0)
			return -1;
		if (v > m->positions)
			return zs_fail(cause, "--seq: %llu is more than %s's %llu positions (%s)", v, m->name,
			               (unsigned long long)m->positions,
			               m->family == ZS_FAMILY_GPT2 ? "n_positions" : "max_position_embeddings");
		req->act.seq = v;
	}
	if (recompute != NULL && zs_recompute_parse(recompute, &req->act.recompute) < 0)
		return zs_fail(cause, "--recompute: '%.40s' is none of none, selective, full", recompute);
	/* each where neither the command line nor the spec gives it (c->given:
	 * both), as measure --model's transformer_run does; s49: any --spec
	 * kept the MLP's batch 4, unit model and N for all three */
	if (!(c->given & ZS_KEY_BIT(ZS_KEY_BATCH)))
		c->batch = 1;
	if (!(c->given & ZS_KEY_BIT(ZS_KEY_UNITS))) {
		c->nunits = 1;
		c->units[0] = ZS_UNIT_LAYER;
	}
	if (!(c->given & ZS_KEY_BIT(ZS_KEY_WORLD)) && c->wrapper != ZS_WRAPPER_NONE) {
		c->nworld = sizeof model_worlds / sizeof model_worlds[0];
		memcpy(c->world, model_worlds, sizeof model_worlds);
	}
	if ((double)theory_tfm_params(m) > ZS_MAX_PARAMS)
		return zs_fail(cause, "%s: %llu parameters, more than zerosim counts exactly (1e14)", m->name,
		               (unsigned long long)theory_tfm_params(m));
	if (!theory_tfm_exact(m, &req->act, c->batch))
		return zs_fail(cause, "--seq %llu with --batch %u: the activations would pass 2^52 bytes per "
		               "rank, more than zerosim counts exactly", (unsigned long long)req->act.seq,
		               c->batch);
	return 0;
}

int zs_cmd_theory(int argc, char **argv)
{
	struct zs_config config;
	struct theory_request req = { .config = &config };
	struct zs_arg *args = NULL;
	size_t nargs = 0;
	struct zs_model model;
	const char *spec = NULL, *out = NULL, *format = NULL, *model_arg = NULL, *seq_arg = NULL;
	const char *recompute_arg = NULL, *routing_arg = NULL;
	struct theory_routing routing = {0};
	int params_given = 0, flash = 0, reserve_given = 0, status = ZS_EXIT_USAGE, allocator = 0;
	const char *alloc_conf = NULL, *workspace = NULL;
	struct cuda_alloc_opts alloc_opts;
	char *cause = NULL, *text = NULL, *json = NULL;
	cJSON *root = NULL;

	zs_config_defaults(&config);
	if (zs_opts_parse(options, argc, argv, &args, &nargs, &cause) != 0)
		goto bad;
	for (size_t i = 0; i < nargs; i++) {
		const char *v = args[i].value;
		switch (args[i].opt->id) {
		case ZS_OPT_SPEC:
			spec = v;
			break;
		case OPT_PARAMS:
			if (zs_parse_count(v, ZS_MAX_PARAMS, &req.params, &cause) < 0) {
				name_option(&cause, "--params");
				goto bad;
			}
			params_given = 1;
			break;
		case OPT_LARGEST_UNIT:
			if (zs_parse_count(v, ZS_MAX_PARAMS, &req.largest_unit, &cause) < 0) {
				name_option(&cause, "--largest-unit");
				goto bad;
			}
			break;
		case OPT_DEVICE_MEM:
			if (zs_parse_bytes(v, &req.device_mem, &cause) < 0) {
				name_option(&cause, "--device-mem");
				goto bad;
			}
			break;
		case OPT_RESERVE:
			if (zs_parse_bytes(v, &req.reserve, &cause) < 0) {
				name_option(&cause, "--reserve");
				goto bad;
			}
			reserve_given = 1;
			break;
		case OPT_MODEL:
			model_arg = v;
			break;
		case OPT_SEQ:
			seq_arg = v;
			break;
		case OPT_RECOMPUTE:
			recompute_arg = v;
			break;
		case OPT_FLASH:
			flash = 1;
			break;
		case OPT_ROUTING:
			routing_arg = v;
			break;
		case OPT_ALLOCATOR:
			if (strcmp(v, "none") != 0 && strcmp(v, "cuda") != 0) {
				cause = zs_asprintf("--allocator '%.40s': not an allocator (none or cuda)", v);
				goto bad;
			}
			allocator = strcmp(v, "cuda") == 0;
			break;
		case OPT_ALLOC_CONF:
			alloc_conf = v;
			break;
		case OPT_CUBLAS_WORKSPACE:
			workspace = v;
			break;
		case OPT_DEVICE_OVERHEAD:
			/* 0: the device is the allocator's alone (a size is at
			 * least a byte elsewhere) */
			if (strcmp(v, "0") == 0)
				req.overhead = 0;
			else if (zs_parse_bytes(v, &req.overhead, &cause) < 0) {
				name_option(&cause, "--device-overhead");
				goto bad;
			}
			req.overhead_given = 1;
			break;
		case OPT_NCCL_CHANNELS: {
			unsigned long long ch;
			if (zs_parse_uint("nccl-channels", v, THEORY_NCCL_MAXCHANNELS, "a number of channels", &ch,
			                  &cause) != 0)
				goto bad;
			req.nccl_channels = (unsigned)ch;
			break;
		}
		case OPT_NCCL_BUFFSIZE:
			if (zs_parse_bytes(v, &req.nccl_buffsize, &cause) < 0) {
				name_option(&cause, "--nccl-buffsize");
				goto bad;
			}
			break;
		case ZS_OPT_CONFIG:
			/* bf16 has mixed precision's bytes: the theory only renames it. */
			if (strcmp(args[i].opt->name, "precision") == 0) {
				req.bf16 = strcmp(v, "bf16") == 0;
				if (req.bf16)
					args[i].value = "mixed";
			}
			break;
		case OPT_FORMAT:
			if (strcmp(v, "json") != 0 && strcmp(v, "text") != 0) {
				cause = zs_asprintf("--format: '%s' is neither json nor text", v);
				goto bad;
			}
			format = v;
			break;
		case OPT_OUT:
			out = v;
			break;
		case ZS_OPT_HELP:
			usage();
			status = ZS_EXIT_OK;
			goto end;
		case ZS_OPT_VERSION:
			zs_opts_print_version();
			status = ZS_EXIT_OK;
			goto end;
		default:
			break;
		}
	}
	if (out != NULL && *out == '\0') {
		cause = zs_strdup("--out: the file name is empty");
		goto bad;
	}
	struct stat st;
	if (out != NULL && stat(out, &st) == 0 && S_ISDIR(st.st_mode)) {
		cause = zs_asprintf("--out %s: is a folder, not a file", out);
		goto bad;
	}
	/* --model names a file or a shipped config: the file it reads is an input. */
	char *model_file = zs_model_file(model_arg);
	/* --routing FILE reads a measured.json */
	const char *routing_file = routing_arg != NULL && strcmp(routing_arg, "balanced") != 0 &&
	                           strcmp(routing_arg, "worst") != 0 ? routing_arg : NULL;
	const struct zs_path in[] = {{"--spec", spec}, {"--model", model_file}, {"--routing", routing_file}},
	                     outs[] = {{"--out", out}};
	int clash = zs_check_paths(in, 3, outs, 1, &cause);
	free(model_file);
	if (clash != 0)
		goto bad;

	if (alloc_conf != NULL && !allocator) {
		cause = zs_strdup("--alloc-conf needs --allocator cuda");
		goto bad;
	}
	if (workspace != NULL && !allocator) {
		cause = zs_strdup("--cublas-workspace needs --allocator cuda (the workspace is a block of its replay)");
		goto bad;
	}
	if (req.overhead_given && !allocator) {
		cause = zs_strdup("--device-overhead needs --allocator cuda (the fixed costs are added to what it reserves)");
		goto bad;
	}
	if (nccl_options_check(&req, allocator, &cause) != 0)
		goto bad;
	/* No memory fraction (a Python call, not PYTORCH_CUDA_ALLOC_CONF). */
	cuda_alloc_opts_default(&alloc_opts);
	if (allocator && cuda_alloc_parse_conf(alloc_conf, &alloc_opts, &cause) != 0) {
		name_option(&cause, "--alloc-conf");
		goto bad;
	}
	if (zs_opts_cublas_workspace(workspace, &alloc_opts, &cause) != 0)
		goto bad;
	req.alloc = allocator ? &alloc_opts : NULL;
	if (zs_opts_config(&config, args, nargs, &cause) < 0)
		goto bad;
	/* the PyTorch step is PyTorch's own (fp32 or autocast: mixed, the
	 * theory's default, is refused there): fp32 where --precision is not
	 * given, as measure --model's default (DeepSpeed's engine keeps mixed,
	 * its bf16) */
	if (model_arg != NULL && !(config.given & ZS_KEY_BIT(ZS_KEY_PRECISION)) &&
	    (config.wrapper == ZS_WRAPPER_NONE || config.wrapper == ZS_WRAPPER_DDP || config.wrapper == ZS_WRAPPER_FSDP))
		config.precision = ZS_FP32;
	if (zs_config_validate(&config, &cause) < 0 || zs_framework_check(&config, 1, &cause) < 0 ||
	    zs_config_check_model(&config, model_arg != NULL, &cause) < 0)
		goto bad;
	/* --flash-attn is --attn sdpa where a PyTorch runs (no T x T matrix
	 * kept: SDPA's flash and memory-efficient kernels); under paper, where
	 * --attn is refused, it keeps its meaning, Korthikanti's no-scores
	 * formula. Either sets the activations' flash, so that --flash-attn's
	 * outputs are what they were. */
	if (flash && config.framework != ZS_FW_PAPER) {
		if (config.attn == ZS_ATTN_EAGER) {
			cause = zs_strdup("--flash-attn is --attn sdpa, and --attn eager says otherwise: give one");
			goto bad;
		}
		if (config.torch_version == ZS_TORCH_1_13) {
			cause = zs_strdup("--flash-attn (--attn sdpa): PyTorch 1.13 has no scaled_dot_product_attention "
			                  "(2.0 added it); give --torch-version 2.6");
			goto bad;
		}
		config.attn = ZS_ATTN_SDPA;
	}
	flash |= config.attn == ZS_ATTN_SDPA;
	if (check_memory(&req, reserve_given, &cause) < 0 ||
	    (model_arg != NULL && load_model(&req, &config, &model, model_arg, seq_arg, recompute_arg,
	                                     flash, params_given, args, nargs, &cause) < 0))
		goto bad;
	/* LoRA under the paper's zero3 is described at N = 1 only
	 * (util/lora.c): where neither --schemes nor a spec names zero3, the
	 * default schemes keep it, its rows at N > 1 the paper level alone
	 * with no step (theory_row's undescribed, as the PyTorch step's N it
	 * does not describe) and the text says why, so that the question
	 * "does it fit" is answered for the rest; named by hand it is refused */
	struct zs_config lora_list = config;
	if (config.framework == ZS_FW_PAPER && config.lora_r && !(config.given & ZS_KEY_BIT(ZS_KEY_SCHEMES))) {
		int wide = 0;
		for (size_t w = 0; w < config.nworld; w++)
			wide |= config.world[w] > 1;
		size_t n = 0;
		for (size_t i = 0; wide && i < config.nschemes; i++)
			if (config.schemes[i] != ZS_ZERO3)
				lora_list.schemes[n++] = config.schemes[i];
		req.lora_zero3_left = wide && n < config.nschemes;
		if (wide)
			lora_list.nschemes = n;
	}
	if (zs_precision_amp_check(&config, model_arg != NULL, &cause) < 0 ||
	    moe_check(&req, &config, model_arg != NULL ? &model : NULL, routing_arg, &routing, allocator, flash, &cause) < 0 ||
	    zs_freeze_paper_check(&config, model_arg != NULL ? &model : NULL, &cause) < 0 ||
	    zs_lora_paper_check(&lora_list, model_arg != NULL ? &model : NULL, &cause) < 0)
		goto bad;
	req.act.freeze = config.freeze;
	req.act.freeze_graph = *zs_freeze_saved_spec(&config) != '\0';
	/* LoRA's adapters in the description under every framework that takes
	 * --lora-r: the floors and the paper level count PEFT's model, its
	 * base frozen and its adapters trained (the PyTorch step's own list,
	 * util/autograd.c, makes its adapters itself) */
	req.act.lora = config.lora_r ? &config : NULL;
	if (model_arg != NULL && zs_wrapper_step(&config) &&
	    zs_torch_recompute_set(&config, zs_recompute_name(req.act.recompute), &cause) < 0)
		goto bad;
	if (model_arg != NULL && zs_wrapper_step(&config)) {
		int rc = theory_autograd_check(&model, &config, req.act.seq, req.bf16, &cause);
		if (rc == -2) { /* zerosim's failure, not the input's */
			status = ZS_EXIT_RUNTIME;
			goto fail;
		}
		if (rc < 0)
			goto bad;
	}
	if (model_arg != NULL && config.lora_r && !zs_lora_engine(&config)) { /* the description's adapters */
		struct step_params lp;
		if (zs_lora_params(&lp, &model, &model, &config, &cause) != 0)
			goto bad;
		step_params_free(&lp);
	}
	if (model_arg == NULL && (seq_arg != NULL || recompute_arg != NULL || flash)) {
		cause = zs_asprintf("%s needs --model (the MLP's activations are exact already)",
		                    seq_arg != NULL ? "--seq" : recompute_arg != NULL ? "--recompute"
		                                                                   : "--flash-attn");
		goto bad;
	}

	req.shape_known = !params_given && model_arg == NULL;
	if (config.framework == ZS_FW_TORCH && params_given) {
		cause = zs_strdup("--framework torch needs the model's shape (--layers or --model), not --params: "
		                  "ZeroRedundancyOptimizer assigns whole tensors");
		goto bad;
	}
	if (params_given) {
		if (zs_opts_sets(args, nargs, "layers")) {
			cause = zs_strdup("--params and --layers exclude each other: give the shape or the count");
			goto bad;
		}
		if (!(config.given & ZS_KEY_BIT(ZS_KEY_WORLD))) { /* nor the command line nor a spec's key */
			config.nworld = sizeof paper_worlds / sizeof paper_worlds[0];
			memcpy(config.world, paper_worlds, sizeof paper_worlds);
		}
		if (req.largest_unit > req.params) {
			cause = zs_asprintf("--largest-unit: %.17g is more than the %.17g parameters",
			                    req.largest_unit, req.params);
			goto bad;
		}
	} else if (req.largest_unit > 0 && model_arg == NULL) {
		cause = zs_strdup("--largest-unit needs --params (a model with layers knows its units)");
		goto bad;
	}

	if (format == NULL)
		format = out != NULL ? "json" : "text";
	status = ZS_EXIT_RUNTIME;
	if (strcmp(format, "json") == 0) {
		root = theory_json(&req);
		if (allocator)
			zs_alloc_config_json(root, alloc_conf, alloc_opts.cublas_workspace);
		if (out != NULL) {
			if (zs_json_write(out, root, &cause) < 0)
				goto fail;
		} else {
			json = zs_json_print(root);
			if (puts(json) == EOF)
				goto stdout_fail;
		}
	} else {
		text = theory_text(&req);
		if (out != NULL) {
			if (zs_write_atomic(out, text, strlen(text), &cause) < 0)
				goto fail;
		} else if (fputs(text, stdout) == EOF) {
			goto stdout_fail;
		}
	}
	if (fflush(stdout) != 0)
		goto stdout_fail;
	status = ZS_EXIT_OK;
	goto end;

stdout_fail:
	zs_fail(&cause, "cannot write to standard output: %s", strerror(errno));
fail:
	zs_print_error("zerosim theory", cause != NULL ? cause : "cannot write the output");
	goto end;
bad:
	zs_opts_name_as_typed(args, nargs, &cause);
	zs_opts_name_source(args, nargs, config.given, spec, 0, NULL, &cause);
	status = usage_error(cause != NULL ? cause : "bad usage");
end:
	theory_routing_free(&routing);
	free(cause);
	free(text);
	free(json);
	cJSON_Delete(root);
	free(args);
	return status;
}

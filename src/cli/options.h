/*
 * options — one option table per command and one parser for all three.
 *
 * A command lists its options in a table of struct zs_opt; zs_opts_parse
 * turns argv into the options as typed, in order, and every message names
 * the argument the user typed. zs_opts_config is the one spec-then-override
 * path: the --spec file over the defaults, then every model option of the
 * command line in order, wherever --spec stands among them.
 *
 * Grammar (GNU-like): "--name VALUE", "--name=VALUE", "-x VALUE", "-xVALUE",
 * short flags grouped ("-qh"); "--" ends the options. Long names must be
 * typed in full (an abbreviation is refused, with the option it may mean),
 * so that an option added later never changes what a script meant. A value
 * may start with '-' ("--out -"). Operands are refused.
 */
#ifndef ZS_OPTIONS_H
#define ZS_OPTIONS_H

#include <stddef.h>

#include "util/config.h"

enum {
	ZS_OPT_END = 0,   /* ends a table */
	ZS_OPT_HELP,      /* parsing stops at it: it is the last option parsed */
	ZS_OPT_VERSION,   /* likewise */
	ZS_OPT_SPEC,      /* --spec FILE, read by zs_opts_config */
	ZS_OPT_CONFIG,    /* a zs_config key, set by zs_opts_config */
	ZS_OPT_COMMAND    /* a command's own options are ZS_OPT_COMMAND + k */
};

/* An option whose value is a file to read: an empty name is refused as
 * typed ("--spec: the file name is empty"), not as a file "" missing. */
#define ZS_OPT_FILE 2

struct zs_opt {
	const char *name;  /* long name without the dashes */
	char letter;       /* short option, or 0 */
	int value;         /* 1: takes a value; ZS_OPT_FILE: a file to read */
	int id;            /* ZS_OPT_... or the command's own */
	const char *key;   /* ZS_OPT_CONFIG: the zs_config_set key (NULL: name) */
};

/* The model and run options measure and theory share, in --help's order. */
#define ZS_OPTS_MODEL \
	{"layers", 0, 1, ZS_OPT_CONFIG, NULL}, {"world", 0, 1, ZS_OPT_CONFIG, NULL}, \
	{"schemes", 0, 1, ZS_OPT_CONFIG, NULL}, {"scheme", 0, 1, ZS_OPT_CONFIG, "schemes"}, \
	{"unit", 0, 1, ZS_OPT_CONFIG, NULL}, {"steps", 0, 1, ZS_OPT_CONFIG, NULL}, \
	{"batch", 0, 1, ZS_OPT_CONFIG, NULL}, {"seed", 0, 1, ZS_OPT_CONFIG, NULL}, \
	{"precision", 0, 1, ZS_OPT_CONFIG, NULL}, {"optimizer", 0, 1, ZS_OPT_CONFIG, NULL}, \
	{"lr", 0, 1, ZS_OPT_CONFIG, NULL}, {"beta1", 0, 1, ZS_OPT_CONFIG, NULL}, \
	{"beta2", 0, 1, ZS_OPT_CONFIG, NULL}, {"eps", 0, 1, ZS_OPT_CONFIG, NULL}, \
	{"framework", 0, 1, ZS_OPT_CONFIG, NULL}, {"bucket-cap", 0, 1, ZS_OPT_CONFIG, NULL}, \
	{"prefetch", 0, 1, ZS_OPT_CONFIG, NULL}, \
	{"ds-reduce-bucket", 0, 1, ZS_OPT_CONFIG, NULL}, {"ds-allgather-bucket", 0, 1, ZS_OPT_CONFIG, NULL}, \
	{"ds-overlap-comm", 0, 1, ZS_OPT_CONFIG, NULL}, {"ds-persist", 0, 1, ZS_OPT_CONFIG, NULL}, \
	{"offload", 0, 1, ZS_OPT_CONFIG, NULL}, {"ranks-per-node", 0, 1, ZS_OPT_CONFIG, NULL}, \
	{"ds-prefetch-bucket", 0, 1, ZS_OPT_CONFIG, NULL}, {"ds-max-live", 0, 1, ZS_OPT_CONFIG, NULL}, \
	{"ds-sub-group-size", 0, 1, ZS_OPT_CONFIG, NULL}, \
	{"torch-version", 0, 1, ZS_OPT_CONFIG, NULL}, {"torch-device", 0, 1, ZS_OPT_CONFIG, NULL}, \
	{"optimizer-impl", 0, 1, ZS_OPT_CONFIG, NULL}, {"zero-grad", 0, 1, ZS_OPT_CONFIG, NULL}, \
	{"attn", 0, 1, ZS_OPT_CONFIG, NULL}, {"wrapper", 0, 1, ZS_OPT_CONFIG, NULL}, \
	{"grad-accum", 0, 1, ZS_OPT_CONFIG, NULL}, {"ddp-no-sync", 0, 1, ZS_OPT_CONFIG, NULL}, \
	{"fsdp-no-sync", 0, 1, ZS_OPT_CONFIG, "ddp-no-sync"}, {"ddp-find-unused", 0, 1, ZS_OPT_CONFIG, NULL}, \
	{"fsdp-orig-params", 0, 1, ZS_OPT_CONFIG, NULL}, \
	{"recompute-impl", 0, 1, ZS_OPT_CONFIG, NULL}, {"logits", 0, 1, ZS_OPT_CONFIG, NULL}, \
	{"experts-impl", 0, 1, ZS_OPT_CONFIG, NULL}, \
	{"freeze", 0, 1, ZS_OPT_CONFIG, NULL}, \
	{"lora-r", 0, 1, ZS_OPT_CONFIG, NULL}, {"lora-alpha", 0, 1, ZS_OPT_CONFIG, NULL}, \
	{"lora-dropout", 0, 1, ZS_OPT_CONFIG, NULL}, {"lora-targets", 0, 1, ZS_OPT_CONFIG, NULL}, \
	{"quant-base", 0, 1, ZS_OPT_CONFIG, NULL}, {"double-quant", 0, 1, ZS_OPT_CONFIG, NULL}, \
	{"load-dtype", 0, 1, ZS_OPT_CONFIG, NULL}, {"lora-dtype", 0, 1, ZS_OPT_CONFIG, NULL}, \
	{"spec", 0, ZS_OPT_FILE, ZS_OPT_SPEC, NULL}

/* --help's lines for the PyTorch step's options (--torch-version through
 * --double-quant), which measure and theory take alike: one text, so that
 * the two helps cannot drift apart. A string literal, to stand inside each
 * command's usage text. */
#define ZS_HELP_TORCH_STEP \
	"      --torch-version V  --wrapper none, ddp, fsdp or deepspeed only: the\n" \
	"                         PyTorch followed, 1.13 or 2.6 (default; its\n" \
	"                         defaults below); the\n" \
	"                         plain loop's step is described for fp32 or\n" \
	"                         amp-bf16 on the CPU, eager attention or (2.6)\n" \
	"                         sdpa with as many k/v heads as heads; on CUDA\n" \
	"                         for fp32 (amp-bf16: gpt2, llama) and eager\n" \
	"                         attention\n" \
	"      --torch-device D   cuda (default) or cpu; cuda: the plain loop's\n" \
	"                         step predicted from source (host scalars, Adam's\n" \
	"                         host step counters, no LayerNorm CPU scratch,\n" \
	"                         dropout's bool mask; amp-bf16: softmax and pow\n" \
	"                         in fp32, no promotion copies; --recompute full:\n" \
	"                         host rng states; QLoRA's llama loaded in bf16\n" \
	"                         under amp-bf16), up to 3,072 tokens a step\n" \
	"                         into a trained embedding, not yet measured on\n" \
	"                         a GPU (tests/gpu_torch.py)\n" \
	"      --optimizer-impl I Adam's single, foreach or fused (default: single\n" \
	"                         in 1.13 and on the CPU, foreach on CUDA from 2.0)\n" \
	"      --zero-grad Z      none (set_to_none, default from 2.0) or zeros\n" \
	"                         (1.13's default)\n" \
	"      --attn A           --model: eager (1.13's default) or sdpa (2.x's)\n" \
	"      --wrapper W        auto (default: DDP, FSDP or DeepSpeed's engine, also\n" \
	"                         at N = 1, zerosim's own step), none (the plain loop:\n" \
	"                         --model, N = 1), ddp (DistributedDataParallel\n" \
	"                         over the plain loop's PyTorch step at any N:\n" \
	"                         --model, --framework torch, --schemes dp; with\n" \
	"                         --schemes zero1 ZeroRedundancyOptimizer over it,\n" \
	"                         each rank's bytes its own: one scheme a run),\n" \
	"                         fsdp (FSDP, a unit per block, over it as PyTorch\n" \
	"                         1.13 or 2.6 runs it, N >= 2: --schemes zero3 is\n" \
	"                         FULL_SHARD, zero2 SHARD_GRAD_OP; one a run);\n" \
	"                         deepspeed (DeepSpeed's engine over it, --framework\n" \
	"                         deepspeed: ZeRO-1 or ZeRO-2, or ZeRO-3 (N > 1: every\n" \
	"                         parameter persisting; its first step under 1.13),\n" \
	"                         fp32, PyTorch 1.13 or 2.6, one a run, each rank's\n" \
	"                         bytes its own; --ds-reduce-bucket sets its bucket;\n" \
	"                         ZeRO-1 and 2 with --freeze, --lora-r, --recompute\n" \
	"                         full, --grad-accum; ZeRO-3 with --freeze, --lora-r\n" \
	"                         (frozen parameters partitioned too), --grad-accum;\n" \
	"                         ZeRO-1 and 2 with --quant-base nf4; ZeRO-1 and 2 in\n" \
	"                         DeepSpeed's bf16, --precision mixed:\n" \
	"                         module.bfloat16(), gpt2, llama; with --attn sdpa\n" \
	"                         where SDPA runs its flash kernel)\n" \
	"      --grad-accum K     --wrapper none, ddp, fsdp or deepspeed, --framework\n" \
	"                         deepspeed\n" \
	"                         (no --offload) or --framework paper (the MLP and the\n" \
	"                         transformer for both): K micro-steps (each\n" \
	"                         of --batch) per optimizer step, each loss / K\n" \
	"                         (default 1)\n" \
	"      --ddp-no-sync S    --wrapper ddp or fsdp with --grad-accum: the wrapper's\n" \
	"                         no_sync() on the first K - 1 micro-steps, on (default)\n" \
	"                         or off; --fsdp-no-sync S is its other name\n" \
	"      --fsdp-orig-params S\n" \
	"                         --wrapper fsdp (zero3 or zero2), 2.6: FSDP's\n" \
	"                         use_orig_params, on or off (default, as FSDP's);\n" \
	"                         on: a unit may mix frozen and trainable (--freeze,\n" \
	"                         --lora-r: each block's unit its base and adapters)\n" \
	"                         parameters, the frozen ones' gradients computed,\n" \
	"                         Adam per trainable parameter's piece of the shard\n" \
	"                         (each rank's bytes its own); fp32, no 4-bit base\n" \
	"      --ddp-find-unused S\n" \
	"                         --wrapper ddp --schemes dp, 1.13: DDP's\n" \
	"                         find_unused_parameters, on (what Hugging Face's\n" \
	"                         Trainer passes without checkpointing) or off\n" \
	"                         (default): its output clones and used-parameter\n" \
	"                         maps, the constructor's buckets kept, a\n" \
	"                         mixture's expert idle on a rank marked unused\n" \
	"      --recompute-impl S --recompute full on the PyTorch step: its\n" \
	"                         torch.utils.checkpoint, reentrant (default;\n" \
	"                         transformers 4.35-4.x's use_reentrant=True) or\n" \
	"                         non-reentrant (use_reentrant=False, transformers'\n" \
	"                         default from PR #43203): every dense family,\n" \
	"                         fp32 or amp-bf16, --wrapper none, ddp or fsdp,\n" \
	"                         --freeze too, eager attention (as reentrant:\n" \
	"                         not the gemmas under fsdp or autocast)\n" \
	"      --logits S         the PyTorch step's loop: kept (default; it holds\n" \
	"                         the model's output to the step's end) or\n" \
	"                         dropped (Hugging Face Trainer: the loss alone,\n" \
	"                         the logits freed before backward); --wrapper\n" \
	"                         none, --grad-accum 1, no mixture of experts\n" \
	"      --experts-impl S   a mixtral's experts: modulelist (default;\n" \
	"                         transformers 4.x's ModuleList of linears) or\n" \
	"                         eager (5.x's fused gate_up_proj and down_proj,\n" \
	"                         each hit expert's whole-parameter gradient):\n" \
	"                         theory and measure, --framework torch\n" \
	"                         --wrapper none, fp32;\n" \
	"                         grouped_mm, batched_mm refused by name\n" \
	"      --freeze PATTERN   --wrapper none, ddp or fsdp (1.13: whole FSDP units),\n" \
	"                         --framework paper with --model, or deepspeed\n" \
	"                         with --model (dp, zero1, zero2, zero3; --offload\n" \
	"                         optimizer or params): leave out of training the\n" \
	"                         parameters whose Hugging Face names PATTERN\n" \
	"                         matches, comma-separated terms:\n" \
	"                         embeddings, blocks:A-B, all-but-last:N, re:REGEX or\n" \
	"                         a glob (*.ln_*); with --lora-r (--wrapper none,\n" \
	"                         ddp, fsdp, deepspeed zero1 to zero3 in fp32, or\n" \
	"                         --framework paper) the adapters it names\n" \
	"                         (blocks:0-0: block 0's)\n" \
	"      --lora-r R         --wrapper none, ddp (dp, zero1), fsdp or deepspeed\n" \
	"                         (zero1, zero2; zero3 in fp32), --framework\n" \
	"                         deepspeed (dp to zero3, --unit layer, no\n" \
	"                         offload) or paper (fp32\n" \
	"                         or mixed, --unit layer; its zero3 at N = 1): LoRA\n" \
	"                         of rank R over --lora-targets T (all-linear or\n" \
	"                         module names; default PEFT's by model_type: gpt2's\n" \
	"                         c_attn, llama's, mistral's, mixtral's, the gemmas'\n" \
	"                         and qwen2/3's q_proj,v_proj; phi3's, qwen2_moe's\n" \
	"                         and qwen3_moe's to be given), scaled by\n" \
	"                         --lora-alpha A / R (A 8);\n" \
	"                         every base parameter frozen; --lora-dropout P\n" \
	"                         (default 0) its nn.Dropout on the adapters' input\n" \
	"      --quant-base nf4   with --lora-r: QLoRA's 4-bit base, every base linear\n" \
	"                         layer but the head as bitsandbytes' Linear4bit (NF4,\n" \
	"                         fp32 absmax per 64: 4.5 bits), dequantized into an\n" \
	"                         fp32 temporary at each use (default none;\n" \
	"                         torch 2.6; fp32, or amp-bf16: compute dtype bf16,\n" \
	"                         the temporary copied to bf16; not gpt2, nor as\n" \
	"                         many k/v heads as heads; --wrapper\n" \
	"                         none, ddp (dp, zero1) or fsdp, whose units hold\n" \
	"                         the codes as fp32 elements, quant_storage\n" \
	"                         float32, the quant state on every rank; and\n" \
	"                         --framework paper, or deepspeed dp, zero1,\n" \
	"                         zero2, fp32 or mixed: the base whole on every\n" \
	"                         rank, each product's weight dequantized into one\n" \
	"                         scratch of the largest 4-bit tensor; deepspeed\n" \
	"                         zero3: the codes as elements of the params'\n" \
	"                         dtype, partitioned and gathered by stage 3, the\n" \
	"                         quant state on every rank; --wrapper deepspeed\n" \
	"                         zero1, zero2, fp32 or mixed: the PyTorch step's\n" \
	"                         Linear4bit, the base whole)\n" \
	"      --double-quant S   with --quant-base nf4: the absmax in 8 bits, on or\n" \
	"                         off (default off; about 4.127 bits a weight)\n" \
	"      --load-dtype D     the model's dtype as loaded, fp32 (default) or\n" \
	"                         bf16 (with --quant-base nf4: QLoRA's bf16 recipe;\n" \
	"                         norms, embeddings, head and activations bf16, the\n" \
	"                         weight dequantized into bf16, the adapters fp32;\n" \
	"                         --wrapper none, ddp (dp) or fsdp, whose units\n" \
	"                         flatten the codes as bf16 elements; --precision\n" \
	"                         fp32, no autocast, or amp-bf16, where only the\n" \
	"                         adapters' linears cast; --recompute full)\n" \
	"      --lora-dtype D     the adapters' dtype, fp32 (default: PEFT's) or bf16\n" \
	"                         (with --load-dtype bf16: TRL's SFTTrainer's cast of\n" \
	"                         a quantized model's trainable parameters; their\n" \
	"                         gradients and Adam state bf16; --wrapper none or\n" \
	"                         ddp)\n"

/* Every command has these. */
#define ZS_OPTS_STANDARD \
	{"help", 'h', 0, ZS_OPT_HELP, NULL}, {"version", 'V', 0, ZS_OPT_VERSION, NULL}

/* One option as the user gave it. */
struct zs_arg {
	const struct zs_opt *opt;
	const char *value;  /* NULL for an option without a value */
	char typed[48];     /* "--out", "-o": for messages */
};

/* Parse argv[1..argc) (argv[0] is the command, "measure") against `table`.
 * On success *args (free() it) holds *nargs options in order; parsing stops
 * after a help or version option. On failure, -1 and *cause names the
 * argument and the way to get help. */
int zs_opts_parse(const struct zs_opt *table, int argc, char **argv, struct zs_arg **args, size_t *nargs,
                  char **cause);

/* The last option with this id, or NULL. */
const struct zs_arg *zs_opts_last(const struct zs_arg *args, size_t nargs, int id);

/* Nonzero if the command line sets the zs_config key ("layers"). */
int zs_opts_sets(const struct zs_arg *args, size_t nargs, const char *key);

/* The spec-then-override path: the last --spec over `c`, then every
 * ZS_OPT_CONFIG option in order (two names of one key with different
 * values, --ddp-no-sync on --fsdp-no-sync off, refused). Returns 0 or -1
 * with *cause set. */
int zs_opts_config(struct zs_config *c, const struct zs_arg *args, size_t nargs, char **cause);

/* A message about a setting ("--ddp-no-sync: only with ...", the key
 * and a colon first) names it
 * as the user typed it last (--fsdp-no-sync): *cause rewritten in place
 * (freed and replaced) when the last option setting that key is another
 * name of it; left as it is otherwise, or when *cause is NULL. */
void zs_opts_name_as_typed(const struct zs_arg *args, size_t nargs, char **cause);

/* A message about settings ("--freeze X under --framework paper --schemes
 * zero3: ...") names each one its subject (the words before the first
 * ": ") names that the command line does not set but a file gave by the
 * file and its key: the case's (case_keys, from case_path; its keys spelt
 * with '_') before the spec's (spec_keys, from spec_path; "units" for
 * --unit), as FILE's "KEY" ("spec.json's \"freeze\" X under ..."). *cause
 * rewritten in place; left as it is where NULL or where nothing came from
 * a file. */
void zs_opts_name_source(const struct zs_arg *args, size_t nargs, zs_keys spec_keys, const char *spec_path,
                         zs_keys case_keys, const char *case_path, char **cause);

/* "--version" output, the same for every command. */
void zs_opts_print_version(void);

/* --cublas-workspace's value ("0" for none, else a size: 8519680,
 * 32MiB) into o->cublas_workspace; 0, or -1 with *cause naming the option.
 * NULL leaves the default (PyTorch 2.6's on sm_90). */
struct cuda_alloc_opts;
int zs_opts_cublas_workspace(const char *v, struct cuda_alloc_opts *o, char **cause);

#endif

/*
 * cmd_theory — `zerosim theory`: the closed-form model (src/theory/) for the
 * engine's model options, for a transformer given by a Hugging Face config
 * (--model), or for a model given only as a parameter count. Writes
 * theory.json (docs/formats.md, zerosim-theory/1) or text tables.
 */
#include "config.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli/cli.h"
#include "theory/theory.h"
#include "util/config.h"
#include "util/model.h"
#include "util/util.h"

/* The paper's data-parallel degrees (Table 1), used with --params. */
static const unsigned paper_worlds[] = { 1, 4, 16, 64, 256, 1024 };
/* With --model: powers of two, one node to a large cluster. */
static const unsigned model_worlds[] = { 1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024 };

enum {
	OPT_LAYERS = 256, OPT_WORLD, OPT_SCHEMES, OPT_UNIT, OPT_PRECISION,
	OPT_OPTIMIZER, OPT_BATCH, OPT_STEPS, OPT_SEED, OPT_LR,
	OPT_SPEC, OPT_PARAMS, OPT_LARGEST_UNIT, OPT_DEVICE_MEM, OPT_FORMAT,
	OPT_OUT, OPT_HELP, OPT_VERSION, OPT_MODEL, OPT_SEQ, OPT_RECOMPUTE, OPT_FLASH,
	OPT_RESERVE
};

/* The first ten entries are in the order of the enum from OPT_LAYERS: the
 * option's name is the key zs_config_set takes. */
static const struct option long_options[] = {
	{ "layers", required_argument, NULL, OPT_LAYERS },
	{ "world", required_argument, NULL, OPT_WORLD },
	{ "schemes", required_argument, NULL, OPT_SCHEMES },
	{ "unit", required_argument, NULL, OPT_UNIT },
	{ "precision", required_argument, NULL, OPT_PRECISION },
	{ "optimizer", required_argument, NULL, OPT_OPTIMIZER },
	{ "batch", required_argument, NULL, OPT_BATCH },
	/* Run options: accepted so one sweep's flags serve measure and theory. */
	{ "steps", required_argument, NULL, OPT_STEPS },
	{ "seed", required_argument, NULL, OPT_SEED },
	{ "lr", required_argument, NULL, OPT_LR },
	{ "spec", required_argument, NULL, OPT_SPEC },
	{ "params", required_argument, NULL, OPT_PARAMS },
	{ "largest-unit", required_argument, NULL, OPT_LARGEST_UNIT },
	{ "device-mem", required_argument, NULL, OPT_DEVICE_MEM },
	{ "format", required_argument, NULL, OPT_FORMAT },
	{ "out", required_argument, NULL, OPT_OUT },
	{ "help", no_argument, NULL, OPT_HELP },
	{ "version", no_argument, NULL, OPT_VERSION },
	{ "model", required_argument, NULL, OPT_MODEL },
	{ "seq", required_argument, NULL, OPT_SEQ },
	{ "recompute", required_argument, NULL, OPT_RECOMPUTE },
	{ "flash-attn", no_argument, NULL, OPT_FLASH },
	{ "reserve", required_argument, NULL, OPT_RESERVE },
	{ NULL, 0, NULL, 0 }
};

static void usage(void)
{
	fputs(
"Usage: zerosim theory [MODEL OPTIONS] [--out FILE]\n"
"   or: zerosim theory --model NAME|FILE [--seq S] [--batch B] [--recompute R]\n"
"                      [--flash-attn] [--device-mem SIZE [--reserve SIZE]] [--out FILE]\n"
"   or: zerosim theory --params P [--largest-unit L] [--world LIST] [--out FILE]\n"
"Print or write the closed-form per-rank memory and communication of DP and\n"
"ZeRO-1/2/3: the ZeRO paper's floors and the exact step schedule\n"
"(docs/schedule.md), or for a transformer the peak with its activations.\n"
"\n"
"Model options (as for 'zerosim measure'):\n"
"      --layers LIST      layer widths d0,...,dL (default 64,256,64)\n"
"      --world LIST       world sizes N (default 1,2,4,8,16,32)\n"
"      --schemes LIST     of dp,zero1,zero2,zero3 (default all)\n"
"      --unit LIST        of model,layer (default model)\n"
"      --precision P      mixed, bf16 (mixed's bytes) or fp32 (default mixed)\n"
"      --optimizer O      adam or sgd (default adam)\n"
"      --batch B          per-rank batch (default 4)\n"
"      --steps, --seed, --lr  accepted and ignored (the theory needs none)\n"
"      --spec FILE        read a zerosim-sweep/1 file; options override it\n"
"\n"
"A transformer (Hugging Face config.json):\n"
"      --model NAME|FILE  a shipped config (gpt2, gpt2-medium, gpt2-large, gpt2-xl,\n"
"                         llama-2-7b, llama-2-13b, llama-2-70b, llama-3-8b,\n"
"                         llama-3-70b, mistral-7b) or a config.json path;\n"
"                         default N list 1,2,4,...,1024, unit layer, batch 1\n"
"      --seq S            tokens per sequence (default: the model's positions)\n"
"      --batch B          sequences per rank, the micro-batch (default 1)\n"
"      --recompute R      none, selective or full (default none)\n"
"      --flash-attn       the attention scores are never stored\n"
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
"      --reserve SIZE     what the device keeps for itself (CUDA context,\n"
"                         allocator fragmentation; default 0)\n"
"      --format F         json or text (default json with --out, else text)\n"
"      --out FILE         write there (atomically) instead of stdout\n"
"  -h, --help             show this help and exit\n"
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

/* Model options are kept in order and applied after --spec, so that options
 * override the file wherever --spec appears. */
struct setting {
	const char *key, *value;
};

int zs_cmd_theory(int argc, char **argv)
{
	struct zs_config config;
	struct zs_model model;
	struct theory_request req = { .config = &config };
	struct setting *settings = zs_calloc((size_t)argc + 1, sizeof *settings);
	size_t nsettings = 0;
	const char *spec = NULL, *out = NULL, *format = NULL, *model_arg = NULL, *seq_arg = NULL;
	const char *recompute_arg = NULL;
	int layers_given = 0, world_given = 0, params_given = 0, unit_given = 0, batch_given = 0;
	int flash = 0, reserve_given = 0, status = ZS_EXIT_USAGE, opt;
	char *cause = NULL, *text = NULL, *json = NULL;
	cJSON *root = NULL;

	zs_config_defaults(&config);
	optind = 1;
	opterr = 0;      /* errors are ours: one line, our prefix */
	while ((opt = getopt_long(argc, argv, ":h", long_options, NULL)) != -1) {
		switch (opt) {
		case OPT_LAYERS: case OPT_WORLD: case OPT_SCHEMES: case OPT_UNIT:
		case OPT_PRECISION: case OPT_OPTIMIZER: case OPT_BATCH:
		case OPT_STEPS: case OPT_SEED: case OPT_LR:
			settings[nsettings].key = long_options[opt - OPT_LAYERS].name;
			settings[nsettings++].value = optarg;
			layers_given |= opt == OPT_LAYERS;
			world_given |= opt == OPT_WORLD;
			unit_given |= opt == OPT_UNIT;
			batch_given |= opt == OPT_BATCH;
			break;
		case OPT_SPEC:
			spec = optarg;
			break;
		case OPT_PARAMS:
			if (zs_parse_count(optarg, ZS_MAX_PARAMS, &req.params, &cause) < 0) {
				name_option(&cause, "--params");
				goto bad;
			}
			params_given = 1;
			break;
		case OPT_LARGEST_UNIT:
			if (zs_parse_count(optarg, ZS_MAX_PARAMS, &req.largest_unit, &cause) < 0) {
				name_option(&cause, "--largest-unit");
				goto bad;
			}
			break;
		case OPT_DEVICE_MEM:
			if (zs_parse_bytes(optarg, &req.device_mem, &cause) < 0) {
				name_option(&cause, "--device-mem");
				goto bad;
			}
			break;
		case OPT_RESERVE:
			if (zs_parse_bytes(optarg, &req.reserve, &cause) < 0) {
				name_option(&cause, "--reserve");
				goto bad;
			}
			reserve_given = 1;
			break;
		case OPT_MODEL:
			model_arg = optarg;
			break;
		case OPT_SEQ:
			seq_arg = optarg;
			break;
		case OPT_RECOMPUTE:
			recompute_arg = optarg;
			break;
		case OPT_FLASH:
			flash = 1;
			break;
		case OPT_FORMAT:
			if (strcmp(optarg, "json") != 0 && strcmp(optarg, "text") != 0) {
				cause = zs_asprintf("--format: '%s' is neither json nor text", optarg);
				goto bad;
			}
			format = optarg;
			break;
		case OPT_OUT:
			out = optarg;
			break;
		case 'h':
		case OPT_HELP:
			usage();
			status = ZS_EXIT_OK;
			goto end;
		case OPT_VERSION:
			printf("zerosim %s\n", PACKAGE_VERSION);
			status = ZS_EXIT_OK;
			goto end;
		case ':':
			cause = zs_asprintf("%s needs a value", argv[optind - 1]);
			goto bad;
		case '?':
		default:
			if (optopt != 0)
				cause = zs_asprintf("unknown option '-%c' (try --help)", optopt);
			else
				cause = zs_asprintf("unknown option '%s' (try --help)", argv[optind - 1]);
			goto bad;
		}
	}
	if (optind < argc) {
		cause = zs_asprintf("unexpected argument '%s' (try --help)", argv[optind]);
		goto bad;
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
	if (zs_same_file(out, spec)) {
		cause = zs_asprintf("--out %s: is the --spec file; it would be overwritten", out);
		goto bad;
	}
	if (model_arg != NULL && zs_same_file(out, model_arg)) {
		cause = zs_asprintf("--out %s: is the --model file; it would be overwritten", out);
		goto bad;
	}

	if (spec != NULL && zs_config_load_spec(&config, spec, &cause) < 0)
		goto bad;
	for (size_t i = 0; i < nsettings; i++) {
		/* bf16 has mixed precision's bytes: the theory only renames it. */
		int bf16 = strcmp(settings[i].key, "precision") == 0 && strcmp(settings[i].value, "bf16") == 0;
		if (zs_config_set(&config, settings[i].key, bf16 ? "mixed" : settings[i].value, &cause) < 0)
			goto bad;
		if (strcmp(settings[i].key, "precision") == 0)
			req.bf16 = bf16;
	}
	if (zs_config_validate(&config, &cause) < 0)
		goto bad;

	if (reserve_given && req.device_mem <= 0) {
		cause = zs_strdup("--reserve needs --device-mem (it is held back from the device)");
		goto bad;
	}
	if (req.device_mem > 0 && req.reserve >= req.device_mem) {
		cause = zs_asprintf("--reserve: %.6g GB leaves nothing of the %.6g GB --device-mem",
		                    req.reserve / 1e9, req.device_mem / 1e9);
		goto bad;
	}
	if (model_arg == NULL && (seq_arg != NULL || recompute_arg != NULL || flash)) {
		cause = zs_asprintf("%s needs --model (the MLP's activations are exact already)",
		                    seq_arg != NULL ? "--seq" : recompute_arg != NULL ? "--recompute"
		                                                                   : "--flash-attn");
		goto bad;
	}
	if (model_arg != NULL && (params_given || layers_given || req.largest_unit > 0)) {
		cause = zs_asprintf("--model and %s exclude each other: the config gives the shape",
		                    params_given ? "--params" : layers_given ? "--layers" : "--largest-unit");
		goto bad;
	}

	if (model_arg != NULL) {
		if (zs_model_load(model_arg, &model, &cause) < 0)
			goto bad;
		req.model = &model;
		req.act.elem = config.precision == ZS_FP32 ? 4 : 2;
		req.act.flash = flash;
		req.act.seq = model.positions;
		if (seq_arg != NULL) {
			unsigned long long v;
			if (zs_parse_uint("seq", seq_arg, ZS_MODEL_MAX_POSITIONS, "a sequence length", &v,
			                  &cause) < 0)
				goto bad;
			if (v > model.positions) {
				cause = zs_asprintf("--seq: %llu is more than %s's %llu positions (%s)", v,
				                    model.name, (unsigned long long)model.positions,
				                    model.family == ZS_FAMILY_GPT2 ? "n_positions"
				                                                   : "max_position_embeddings");
				goto bad;
			}
			req.act.seq = v;
		}
		if (recompute_arg != NULL &&
		    theory_recompute_parse(recompute_arg, &req.act.recompute) < 0) {
			cause = zs_asprintf("--recompute: '%.40s' is none of none, selective, full",
			                    recompute_arg);
			goto bad;
		}
		if (!batch_given && spec == NULL)
			config.batch = 1;
		if (!unit_given && spec == NULL) {
			config.nunits = 1;
			config.units[0] = ZS_UNIT_LAYER;
		}
		if (!world_given && spec == NULL) {
			config.nworld = sizeof model_worlds / sizeof model_worlds[0];
			memcpy(config.world, model_worlds, sizeof model_worlds);
		}
		if ((double)theory_model_params(&model) > ZS_MAX_PARAMS) {
			cause = zs_asprintf("%s: %llu parameters, more than zerosim counts exactly (1e14)",
			                    model.name, (unsigned long long)theory_model_params(&model));
			goto bad;
		}
		if (!theory_model_exact(&model, &req.act, config.batch)) {
			cause = zs_asprintf("--seq %llu with --batch %u: the activations would pass 2^52 bytes "
			                    "per rank, more than zerosim counts exactly",
			                    (unsigned long long)req.act.seq, config.batch);
			goto bad;
		}
	}

	req.shape_known = !params_given && model_arg == NULL;
	if (params_given) {
		if (layers_given) {
			cause = zs_strdup("--params and --layers exclude each other: give the shape or the count");
			goto bad;
		}
		if (!world_given && spec == NULL) {
			config.nworld = sizeof paper_worlds / sizeof paper_worlds[0];
			memcpy(config.world, paper_worlds, sizeof paper_worlds);
		}
		if (req.largest_unit > req.params) {
			cause = zs_asprintf("--largest-unit: %.17g is more than the %.17g parameters",
			                    req.largest_unit, req.params);
			goto bad;
		}
	} else if (req.largest_unit > 0) {
		cause = zs_strdup("--largest-unit needs --params (a model with layers knows its units)");
		goto bad;
	}

	if (format == NULL)
		format = out != NULL ? "json" : "text";
	status = ZS_EXIT_RUNTIME;
	if (strcmp(format, "json") == 0) {
		root = theory_json(&req);
		if (root == NULL) {
			cause = zs_strdup("out of memory building theory.json");
			goto fail;
		}
		if (out != NULL) {
			if (zs_json_write(out, root, &cause) < 0)
				goto fail;
		} else {
			json = cJSON_Print(root);
			if (json == NULL || puts(json) == EOF)
				goto fail;
		}
	} else {
		text = theory_text(&req);
		if (out != NULL) {
			if (zs_write_atomic(out, text, strlen(text), &cause) < 0)
				goto fail;
		} else if (fputs(text, stdout) == EOF) {
			goto fail;
		}
	}
	if (fflush(stdout) != 0)
		goto fail;
	status = ZS_EXIT_OK;
	goto end;

fail:
	zs_print_error("zerosim theory", cause != NULL ? cause : "cannot write the output");
	goto end;
bad:
	status = usage_error(cause != NULL ? cause : "bad usage");
end:
	free(cause);
	free(text);
	cJSON_free(json);
	cJSON_Delete(root);
	free(settings);
	return status;
}

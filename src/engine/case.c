/*
 * case — reading and writing a zerosim-case/4, /3, /2 or /1 file (docs/formats.md):
 * the model (an MLP's widths, or a transformer's config with its sequence
 * length and recompute mode), the initial weights (in the file, or a
 * transformer's in a raw float32 side file beside it) and every rank's
 * batch at every step, and (/2) the training settings ((/3) with its
 * --freeze), LoRA's settings and adapters ("lora"; (/4) over the 4-bit
 * base), so that the same run can be fed to another framework and
 * compared. Every key is checked,
 * and a key the version does not have is an error naming it (a user
 * writes this file); a wrong shape names the place it was found.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include "engine/engine.h"
#include "engine/tfm.h"
#include "util/model.h"
#include "util/schedule.h"
#include "util/util.h"

/* Read exactly n finite fp32 values from a JSON array into out. */
static int floats(const cJSON *arr, size_t n, float *out, const char *where, char **cause)
{
	if (!cJSON_IsArray(arr))
		return zs_fail(cause, "%s is not an array", where);
	size_t i = 0;
	const cJSON *e;
	cJSON_ArrayForEach(e, arr) {
		if (i == n)
			return zs_fail(cause, "%s has more than %zu numbers", where, n);
		if (!cJSON_IsNumber(e) || !isfinite(e->valuedouble) || fabs(e->valuedouble) > FLT_MAX)
			return zs_fail(cause, "%s[%zu] is not a finite fp32 number", where, i);
		out[i++] = (float)e->valuedouble;
	}
	if (i != n)
		return zs_fail(cause, "%s has %zu numbers, the model needs %zu", where, i, n);
	return 0;
}

/* `rows` rows of `d` numbers each. */
static int matrix(const cJSON *arr, size_t rows, size_t d, float *out, const char *where, char **cause)
{
	if (!cJSON_IsArray(arr))
		return zs_fail(cause, "%s is not an array", where);
	if ((size_t)cJSON_GetArraySize(arr) != rows)
		return zs_fail(cause, "%s has %d rows, the batch is %zu", where, cJSON_GetArraySize(arr), rows);
	size_t b = 0;
	const cJSON *row;
	cJSON_ArrayForEach(row, arr) {
		char *w = zs_asprintf("%s[%zu]", where, b);
		int r = floats(row, d, out + b * d, w, cause);
		free(w);
		if (r != 0)
			return -1;
		b++;
	}
	return 0;
}

/* The nesting of "batches": steps of `world` ranks, each {"x": batch rows
 * of d0 numbers, "y": batch rows of dL numbers}. Checked in full before
 * anything is allocated for it, so that a small file cannot ask for a large
 * allocation through its "batch" or "world" alone. */
static int batches_shape(const cJSON *batches, const struct zs_case *cs, char **cause)
{
	static const char *const keys[2] = {"x", "y"};
	const size_t width[2] = {cs->widths[0], cs->widths[cs->nwidths - 1]};
	size_t t = 0;
	const cJSON *stepv;
	cJSON_ArrayForEach(stepv, batches) {
		if (!cJSON_IsArray(stepv) || (size_t)cJSON_GetArraySize(stepv) != cs->world)
			return zs_fail(cause, "the case's batches[%zu] is not an array of %u ranks", t, cs->world);
		size_t k = 0;
		const cJSON *rk;
		cJSON_ArrayForEach(rk, stepv) {
			if (!cJSON_IsObject(rk))
				return zs_fail(cause, "the case's batches[%zu][%zu] is not an object", t, k);
			const cJSON *key;
			cJSON_ArrayForEach(key, rk)
				if (strcmp(key->string, "x") != 0 && strcmp(key->string, "y") != 0)
					return zs_fail(cause, "the case's batches[%zu][%zu] has the unknown key \"%.40s\" (x, y)", t,
					               k, key->string);
			if (cJSON_GetArraySize(rk) > 2)
				return zs_fail(cause, "the case's batches[%zu][%zu] gives x or y twice", t, k);
			for (int i = 0; i < 2; i++) {
				const cJSON *m = cJSON_GetObjectItemCaseSensitive(rk, keys[i]), *row;
				if (!cJSON_IsArray(m))
					return zs_fail(cause, "the case's batches[%zu][%zu].%s is not an array", t, k, keys[i]);
				if ((size_t)cJSON_GetArraySize(m) != cs->batch)
					return zs_fail(cause, "the case's batches[%zu][%zu].%s has %d rows, the batch is %u", t,
					               k, keys[i], cJSON_GetArraySize(m), cs->batch);
				size_t b = 0;
				cJSON_ArrayForEach(row, m) {
					if (!cJSON_IsArray(row) || (size_t)cJSON_GetArraySize(row) != width[i])
						return zs_fail(cause, "the case's batches[%zu][%zu].%s[%zu] is not %zu numbers", t, k,
						               keys[i], b, width[i]);
					b++;
				}
			}
			k++;
		}
		t++;
	}
	return 0;
}

/* The keys of each version; a key of neither is refused by name. */
static const char *const keys_v1[] = {"format", "layers", "world", "batch", "steps", "weights", "batches"};
static const char *const training_v2[] = {"precision", "optimizer", "lr", "beta1", "beta2", "eps"};
/* A transformer's, in place of "layers" and "batches" (zerosim-case/2). */
static const char *const tfm_v2[] = {"model", "seq", "recompute", "tokens", "grad_accum", "dropout_seed"};

static int listed(const char *key, const char *const *list, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (strcmp(key, list[i]) == 0)
			return 1;
	return 0;
}

#define LISTED(key, list) listed((key), (list), sizeof(list) / sizeof(list)[0])

/* Check every top-level key, and read /2's training settings. */
static int keys(const cJSON *root, int version, struct zs_case *cs, char **cause)
{
	const cJSON *it;
	cJSON_ArrayForEach(it, root) {
		for (const cJSON *e = root->child; e != it; e = e->next)
			if (strcmp(e->string, it->string) == 0)
				return zs_fail(cause, "the case gives the key \"%.40s\" twice", it->string);
		if (LISTED(it->string, keys_v1))
			continue;
		/* zerosim-case/3's freeze: the run's --freeze, the parameters
		 * the case trains without (a /2 case trains them all) */
		int freeze = strcmp(it->string, "freeze") == 0;
		if (freeze && version < 3)
			return zs_fail(cause, "unknown key \"freeze\" in a zerosim-case/%d file (frozen parameters are "
			               "zerosim-case/3's)", version);
		if ((version >= 2 && LISTED(it->string, training_v2)) || freeze) {
			char *why = NULL;
			if (zs_config_set_json(&cs->train, it->string, it, &why) != 0) {
				int r = zs_fail(cause, "the case's %s", why);
				free(why);
				return r;
			}
			continue;
		}
		if (version >= 2 && LISTED(it->string, tfm_v2))
			continue;
		/* LoRA's settings and adapters (measure --write-case --lora-r):
		 * read by lora() below */
		if (version >= 2 && strcmp(it->string, "lora") == 0)
			continue;
		if (version == 1 && (LISTED(it->string, training_v2) || LISTED(it->string, tfm_v2)))
			return zs_fail(cause, "unknown key \"%.40s\" in a zerosim-case/1 file (training settings "
			               "and transformers are zerosim-case/2's)", it->string);
		return zs_fail(cause, "unknown key \"%.40s\" in the case", it->string);
	}
	/* SGD has no betas or epsilon: a case that gives them means Adam. */
	zs_keys adam_only = ZS_KEY_BIT(ZS_KEY_BETA1) | ZS_KEY_BIT(ZS_KEY_BETA2) | ZS_KEY_BIT(ZS_KEY_EPS);
	if ((cs->train.given & ZS_KEY_BIT(ZS_KEY_OPTIMIZER)) && cs->train.optimizer == ZS_SGD &&
	    (cs->train.given & adam_only))
		return zs_fail(cause, "the case trains sgd but gives Adam's beta1, beta2 or eps");
	/* An MLP ("layers", "batches") or a transformer ("model", "seq", "tokens"). */
	int mlp = cJSON_HasObjectItem(root, "layers") || cJSON_HasObjectItem(root, "batches");
	int tfm = cJSON_HasObjectItem(root, "model") || cJSON_HasObjectItem(root, "tokens") ||
	          cJSON_HasObjectItem(root, "seq") || cJSON_HasObjectItem(root, "recompute") ||
	          cJSON_HasObjectItem(root, "grad_accum") || cJSON_HasObjectItem(root, "dropout_seed");
	if (mlp && tfm)
		return zs_fail(cause, "the case mixes an MLP's \"layers\" and \"batches\" with a transformer's "
		               "\"model\", \"seq\", \"recompute\", \"tokens\" and \"grad_accum\"");
	if (mlp && cJSON_HasObjectItem(root, "freeze"))
		return zs_fail(cause, "\"freeze\" in an MLP's case (--freeze names a transformer's parameters)");
	if (mlp && cJSON_HasObjectItem(root, "lora"))
		return zs_fail(cause, "\"lora\" in an MLP's case (LoRA adapts a transformer's linear layers)");
	return 0;
}

/* Read a side file {"file", "count", "digest"} of `what` (the case's
 * "weights", or its "lora"'s part: `what` names it, the key's other keys
 * are the caller's) of raw little-endian float32 (its path relative to the
 * case's folder), read without blocking and only if it is a regular file
 * of exactly 4n bytes (n 0: its count's): *vals (n values), *side its path
 * (both the caller's). */
static int side_file(const cJSON *w, const char *path, size_t n, const char *what, float **vals, char **sidep,
                     size_t *got_n, char **cause)
{
	const char *file, *digest = NULL;
	unsigned long long count;
	char *where = zs_asprintf("the case's %s", what);
	int bad = zs_json_string(w, "file", where, &file, cause) != 0 ||
	          zs_json_uint(w, "count", where, 1, 0x1p53, &count, cause) != 0 ||
	          (cJSON_HasObjectItem(w, "digest") && zs_json_string(w, "digest", where, &digest, cause) != 0);
	free(where);
	if (bad)
		return -1;
	if (*file == '\0' || *file == '/')
		return zs_fail(cause, "the case's %s.file \"%.60s\" is not a path relative to the case's folder", what, file);
	if (n != 0 && count != n)
		return zs_fail(cause, "the case's %s.count is %llu, the model has %zu parameters", what, count, n);
	n = (size_t)count;
	*got_n = n;
	const char *slash = strrchr(path, '/');
	*sidep = slash == NULL ? zs_strdup(file) : zs_asprintf("%.*s/%s", (int)(slash - path), path, file);
	const char *side = *sidep;
	struct stat st;
	char *why = NULL;
	int fd = zs_open_regular(side, &st, &why);
	if (fd < 0) {
		int r = zs_fail(cause, "the case's %s file %s", what, why);
		free(why);
		return r;
	}
	if ((double)st.st_size != 4.0 * (double)n) {
		close(fd);
		return zs_fail(cause, "the case's %s file %s holds %lld bytes, not 4 x %zu (its count)", what, side,
		               (long long)st.st_size, n);
	}
	unsigned char *buf = zs_malloc(4 * n + 1);
	size_t got = 0;
	for (;;) { /* to the end: a file that grew since fstat is refused too */
		ssize_t k = read(fd, buf + got, 4 * n + 1 - got);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0) {
			if (k < 0)
				got = SIZE_MAX;
			break;
		}
		got += (size_t)k;
		if (got == 4 * n + 1)
			break;
	}
	close(fd);
	if (got != 4 * n) {
		free(buf);
		return got == SIZE_MAX ? zs_fail(cause, "the case's %s file %s: %s", what, side, strerror(errno))
		                       : zs_fail(cause, "the case's %s file %s changed size while read", what, side);
	}
	if (digest != NULL) {
		char have[32];
		snprintf(have, sizeof have, "xxh3:%016llx", (unsigned long long)XXH3_64bits(buf, 4 * n));
		if (strcmp(have, digest) != 0) {
			free(buf);
			return zs_fail(cause, "the case's %s file %s has the digest %s, the case says %.40s", what, side,
			               have, digest);
		}
	}
	float *v = *vals = zs_malloc(n * sizeof(float));
	for (size_t i = 0; i < n; i++) {
		const unsigned char *b = buf + 4 * i;
		uint32_t u = (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
		memcpy(&v[i], &u, sizeof u);
		if (!isfinite(v[i])) {
			free(buf);
			return zs_fail(cause, "the case's %s file %s: value %zu is not a finite fp32 number", what, side, i);
		}
	}
	free(buf);
	return 0;
}

/* The case's "weights" as a side file (n values). */
static int weights_file(const cJSON *w, const char *path, size_t n, struct zs_case *cs, char **cause)
{
	const cJSON *it;
	cJSON_ArrayForEach(it, w)
		if (strcmp(it->string, "file") != 0 && strcmp(it->string, "count") != 0 &&
		    strcmp(it->string, "digest") != 0)
			return zs_fail(cause, "the case's \"weights\" has the unknown key \"%.40s\" (file, count, digest)",
			               it->string);
	size_t got;
	return side_file(w, path, n, "weights", &cs->weights, &cs->weights_file, &got, cause);
}

/* A setting of the case's "lora" as the option of that name takes it
 * (zs_config_set: its ranges and messages), into cs->train. */
static int lora_setting(struct zs_case *cs, const char *option, const char *key, const cJSON *v, char **cause)
{
	char text[64];
	if (cJSON_IsNumber(v))
		snprintf(text, sizeof text, "%.17g", v->valuedouble);
	else if (cJSON_IsString(v) && strlen(v->valuestring) < sizeof text)
		snprintf(text, sizeof text, "%s", v->valuestring);
	else if (cJSON_IsBool(v))
		snprintf(text, sizeof text, "%s", cJSON_IsTrue(v) ? "on" : "off");
	else
		return zs_fail(cause, "the case's lora.%s is not %s", key,
		               strcmp(key, "targets") == 0 || strcmp(key, "quant_base") == 0 ? "a string (at most 63 characters)"
		               : strcmp(key, "double_quant") == 0                          ? "a boolean"
		                                                                            : "a number");
	if (strcmp(key, "double_quant") == 0 && !cJSON_IsBool(v))
		return zs_fail(cause, "the case's lora.double_quant is not a boolean");
	char *why = NULL;
	if (zs_config_set(&cs->train, option, text, &why) != 0) {
		const char *rest = strncmp(why, "--", 2) == 0 ? why + strcspn(why, ": ") : why;
		int r = zs_fail(cause, "the case's lora.%s%s", key, rest);
		free(why);
		return r;
	}
	return 0;
}

/* The case's "lora" (a transformer's; zerosim-case/2 on, its quant_base
 * and double_quant zerosim-case/4's): LoRA's settings into cs->train, as
 * --lora-r, --lora-alpha, --lora-dropout and --lora-targets would set them
 * ("default": the family's own, no --lora-targets), the 4-bit base's, and
 * the adapters' initial values from its side file. */
static int lora(const cJSON *root, const char *path, int version, struct zs_case *cs, char **cause)
{
	const cJSON *l = cJSON_GetObjectItemCaseSensitive(root, "lora");
	if (l == NULL)
		return 0;
	if (!cJSON_IsObject(l))
		return zs_fail(cause, "the case's \"lora\" is not an object");
	static const char *const lkeys[] = {"r", "alpha", "dropout", "targets", "file", "count", "digest"};
	static const char *const qkeys[] = {"quant_base", "double_quant"};
	const cJSON *it;
	cJSON_ArrayForEach(it, l) {
		for (const cJSON *e = l->child; e != it; e = e->next)
			if (strcmp(e->string, it->string) == 0)
				return zs_fail(cause, "the case's \"lora\" gives the key \"%.40s\" twice", it->string);
		if (LISTED(it->string, qkeys) && version < 4)
			return zs_fail(cause, "unknown key \"%.40s\" in a zerosim-case/%d file's lora (the 4-bit base is "
			               "zerosim-case/4's)", it->string, version);
		if (!LISTED(it->string, lkeys) && !LISTED(it->string, qkeys))
			return zs_fail(cause, "the case's \"lora\" has the unknown key \"%.40s\" (r, alpha, dropout, targets, "
			               "file, count, digest%s)", it->string, version >= 4 ? ", quant_base, double_quant" : "");
	}
	/* every setting written: a case that leaves one out would train at
	 * the command line's (as tests/ft_torch.py refuses one without
	 * dropout) */
	static const char *const need[] = {"r", "alpha", "dropout", "targets"};
	static const char *const option[] = {"lora-r", "lora-alpha", "lora-dropout", "lora-targets"};
	for (size_t i = 0; i < sizeof need / sizeof need[0]; i++) {
		const cJSON *v = cJSON_GetObjectItemCaseSensitive(l, need[i]);
		if (v == NULL)
			return zs_fail(cause, "the case's \"lora\" has no \"%s\"", need[i]);
		if (i == 0 && (!cJSON_IsNumber(v) || v->valuedouble < 1))
			return zs_fail(cause, "the case's lora.r is not a rank (1 to %llu)", ZS_MAX_LORA_R);
		if (i == 3 && cJSON_IsString(v) && strcmp(v->valuestring, "default") == 0)
			continue; /* the family's own: no --lora-targets */
		if (lora_setting(cs, option[i], need[i], v, cause) != 0)
			return -1;
	}
	const cJSON *qb = cJSON_GetObjectItemCaseSensitive(l, "quant_base"),
	            *dq = cJSON_GetObjectItemCaseSensitive(l, "double_quant");
	if (qb != NULL && lora_setting(cs, "quant-base", "quant_base", qb, cause) != 0)
		return -1;
	if (dq != NULL && !cs->train.quant_nf4)
		return zs_fail(cause, "the case's lora.double_quant without its quant_base nf4");
	if (cs->train.quant_nf4 && dq == NULL)
		return zs_fail(cause, "the case's lora.quant_base nf4 without its double_quant");
	if (dq != NULL && lora_setting(cs, "double-quant", "double_quant", dq, cause) != 0)
		return -1;
	return side_file(l, path, 0, "lora", &cs->lora_init, &cs->lora_file, &cs->nlora_init, cause);
}

/* "weights": Ψ values as an array, or the side file. */
static int weights(const cJSON *root, const char *path, size_t psi, struct zs_case *cs, char **cause)
{
	const cJSON *w = cJSON_GetObjectItemCaseSensitive(root, "weights");
	if (cJSON_IsObject(w))
		return weights_file(w, path, psi, cs, cause);
	if (zs_json_array(root, "weights", "case", &w, cause) != 0)
		return -1;
	/* A file states its sizes before it proves them; check the size
	 * against the array it holds before allocating anything. */
	if ((size_t)cJSON_GetArraySize(w) != psi)
		return zs_fail(cause, "the case's \"weights\" has %d numbers, the model has %zu parameters",
		               cJSON_GetArraySize(w), psi);
	cs->weights = zs_malloc(psi * sizeof(float));
	return floats(w, psi, cs->weights, "the case's \"weights\"", cause);
}

static int world_batch_steps(const cJSON *root, struct zs_case *cs, char **cause)
{
	unsigned long long v;
	if (zs_json_uint(root, "world", "case", 1, ZS_MAX_WORLD, &v, cause) != 0)
		return -1;
	cs->world = (unsigned)v;
	if (zs_json_uint(root, "batch", "case", 1, ZS_MAX_BATCH, &v, cause) != 0)
		return -1;
	cs->batch = (unsigned)v;
	if (zs_json_uint(root, "steps", "case", 1, ZS_MAX_STEPS, &v, cause) != 0)
		return -1;
	cs->steps = (unsigned)v;
	return 0;
}

static int load_mlp(const cJSON *root, const char *path, struct zs_case *cs, char **cause)
{
	const cJSON *layers, *batches;
	if (zs_json_array(root, "layers", "case", &layers, cause) != 0)
		return -1;
	int nl = cJSON_GetArraySize(layers);
	if (nl < 2 || nl > ZS_MAX_WIDTHS)
		return zs_fail(cause, "the case's \"layers\" has %d widths (2..%d)", nl, ZS_MAX_WIDTHS);
	for (int i = 0; i < nl; i++) {
		const cJSON *e = cJSON_GetArrayItem(layers, i);
		if (!cJSON_IsNumber(e) || e->valuedouble != floor(e->valuedouble) || e->valuedouble < 1 ||
		    e->valuedouble > ZS_MAX_WIDTH)
			return zs_fail(cause, "the case's layers[%d] is not a width (1..%d)", i, ZS_MAX_WIDTH);
		cs->widths[i] = (size_t)e->valuedouble;
	}
	cs->nwidths = (size_t)nl;
	if (world_batch_steps(root, cs, cause) != 0)
		return -1;

	double psi = (double)zs_params(cs->widths, cs->nwidths);
	if (!cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(root, "weights"))) {
		const cJSON *w;
		if (zs_json_array(root, "weights", "case", &w, cause) != 0)
			return -1;
		if ((double)cJSON_GetArraySize(w) != psi) /* before Ψ is trusted as a size */
			return zs_fail(cause, "the case's \"weights\" has %d numbers, its layers need %.0f",
			               cJSON_GetArraySize(w), psi);
	} else if (psi > 0x1p53) {
		return zs_fail(cause, "the case's layers have %.0f parameters, more than a side file holds", psi);
	}
	if (zs_json_array(root, "batches", "case", &batches, cause) != 0)
		return -1;
	if ((size_t)cJSON_GetArraySize(batches) != cs->steps)
		return zs_fail(cause, "the case's \"batches\" has %d steps, \"steps\" is %u",
		               cJSON_GetArraySize(batches), cs->steps);
	if (batches_shape(batches, cs, cause) != 0 || weights(root, path, (size_t)psi, cs, cause) != 0)
		return -1;
	size_t d0 = cs->widths[0], dL = cs->widths[cs->nwidths - 1];
	size_t per = (size_t)cs->steps * cs->world * cs->batch;
	size_t t = 0;
	const cJSON *stepv;
	cJSON_ArrayForEach(stepv, batches) {
		if (cs->x == NULL) {
			cs->x = zs_malloc(per * d0 * sizeof(float));
			cs->y = zs_malloc(per * dL * sizeof(float));
		}
		size_t k = 0;
		const cJSON *rk;
		cJSON_ArrayForEach(rk, stepv) {
			size_t at = (t * cs->world + k) * cs->batch;
			char *wx = zs_asprintf("the case's batches[%zu][%zu].x", t, k);
			char *wy = zs_asprintf("the case's batches[%zu][%zu].y", t, k);
			int r = matrix(cJSON_GetObjectItemCaseSensitive(rk, "x"), cs->batch, d0, cs->x + at * d0, wx, cause) != 0 ||
			                matrix(cJSON_GetObjectItemCaseSensitive(rk, "y"), cs->batch, dL, cs->y + at * dL, wy,
			                       cause) != 0
			            ? -1
			            : 0;
			free(wx);
			free(wy);
			if (r != 0)
				return -1;
			k++;
		}
		t++;
	}
	return 0;
}

/* ------------------------------------------------------------------------- */
/* A transformer */

/* The shortest decimal that reads back to the fp32 f, as a double. */
static double short_float(float f)
{
	char buf[32];
	for (int p = 1; p < 10; p++) {
		snprintf(buf, sizeof buf, "%.*g", p, (double)f);
		if (strtof(buf, NULL) == f)
			break;
	}
	return strtod(buf, NULL);
}

static int model(const cJSON *root, struct zs_tfm_run *tr, char **cause)
{
	const cJSON *m = cJSON_GetObjectItemCaseSensitive(root, "model");
	struct zs_model hf;
	if (cJSON_IsString(m)) { /* a shipped name, not a path: the case names its own files only */
		if (strchr(m->valuestring, '/') != NULL || strstr(m->valuestring, ".json") != NULL)
			return zs_fail(cause, "the case's \"model\" '%.60s' is neither a shipped model's name nor a config "
			               "object", m->valuestring);
		char *why = NULL;
		if (zs_model_load(m->valuestring, &hf, &why) != 0) {
			const char *opt = "--model: "; /* the message names the option; here the case is at fault */
			int r = zs_fail(cause, "the case's \"model\": %s",
			                strncmp(why, opt, strlen(opt)) == 0 ? why + strlen(opt) : why);
			free(why);
			return r;
		}
	} else if (cJSON_IsObject(m)) {
		if (zs_model_from_json(m, "the case's model", &hf, cause) != 0)
			return -1;
		const cJSON *name = cJSON_GetObjectItemCaseSensitive(m, "_name_or_path");
		snprintf(hf.name, sizeof hf.name, "%s", cJSON_IsString(name) && *name->valuestring ? name->valuestring : "case");
		for (char *p = hf.name; *p != '\0'; p++)
			if ((unsigned char)*p < 0x20 || *p == 0x7f)
				*p = '?';
	} else {
		return m == NULL ? zs_fail(cause, "the case has neither \"layers\" (an MLP) nor \"model\" (a transformer)")
		                 : zs_fail(cause, "the case's \"model\" is neither a model config object nor a shipped "
		                           "model's name");
	}
	memset(tr, 0, sizeof *tr);
	snprintf(tr->name, sizeof tr->name, "%s", hf.name);
	tr->hf = hf;
	tfm_dims_from_config(&tr->dims, &hf);
	if (tfm_dims_check(&tr->dims, cause) != 0)
		return -1;
	unsigned long long v;
	if (zs_json_uint(root, "seq", "case", 1, (double)hf.positions, &v, cause) != 0)
		return -1;
	tr->seq = (size_t)v;
	const cJSON *rc = cJSON_GetObjectItemCaseSensitive(root, "recompute");
	if (rc != NULL && (!cJSON_IsString(rc) || zs_recompute_parse(rc->valuestring, &tr->recompute) != 0))
		return zs_fail(cause, "the case's \"recompute\" is none of none, selective, full");
	return 0;
}

/* "tokens": steps of `world` ranks of `batch` rows of seq + 1 ids in
 * [0, V). Checked in full before anything is allocated for it. */
static int tokens(const cJSON *root, struct zs_case *cs, char **cause)
{
	const cJSON *all;
	const size_t row = cs->tfm->seq + 1, V = cs->tfm->dims.vocab;
	if (zs_json_array(root, "tokens", "case", &all, cause) != 0)
		return -1;
	const size_t n = (size_t)cs->steps * cs->grad_accum; /* micro-steps (--grad-accum) */
	if ((size_t)cJSON_GetArraySize(all) != n) {
		if (cs->grad_accum > 1)
			return zs_fail(cause, "the case's \"tokens\" has %d micro-steps, \"steps\" %u times \"grad_accum\" %u "
			               "is %zu", cJSON_GetArraySize(all), cs->steps, cs->grad_accum, n);
		return zs_fail(cause, "the case's \"tokens\" has %d steps, \"steps\" is %u", cJSON_GetArraySize(all),
		               cs->steps);
	}
	for (int pass = 0; pass < 2; pass++) {
		size_t t = 0, at = 0;
		const cJSON *stepv, *rk, *r, *e;
		if (pass == 1)
			cs->tokens = zs_malloc(n * cs->world * cs->batch * row * sizeof *cs->tokens);
		cJSON_ArrayForEach(stepv, all) {
			if (!cJSON_IsArray(stepv) || (size_t)cJSON_GetArraySize(stepv) != cs->world)
				return zs_fail(cause, "the case's tokens[%zu] is not an array of %u ranks", t, cs->world);
			size_t k = 0;
			cJSON_ArrayForEach(rk, stepv) {
				if (!cJSON_IsArray(rk) || (size_t)cJSON_GetArraySize(rk) != cs->batch)
					return zs_fail(cause, "the case's tokens[%zu][%zu] is not an array of %u rows (the batch)", t,
					               k, cs->batch);
				size_t b = 0;
				cJSON_ArrayForEach(r, rk) {
					if (!cJSON_IsArray(r) || (size_t)cJSON_GetArraySize(r) != row)
						return zs_fail(cause, "the case's tokens[%zu][%zu][%zu] is not %zu token ids (seq + 1)", t,
						               k, b, row);
					size_t j = 0;
					cJSON_ArrayForEach(e, r) {
						if (!cJSON_IsNumber(e) || e->valuedouble != floor(e->valuedouble) || e->valuedouble < 0 ||
						    e->valuedouble >= (double)V)
							return zs_fail(cause, "the case's tokens[%zu][%zu][%zu][%zu] is not a token id in 0..%zu "
							               "(the vocabulary)", t, k, b, j, V - 1);
						if (pass == 1)
							cs->tokens[at++] = (int)e->valuedouble;
						j++;
					}
					b++;
				}
				k++;
			}
			t++;
		}
	}
	return 0;
}

static int load_tfm(const cJSON *root, const char *path, int version, struct zs_case *cs, char **cause)
{
	cs->tfm = zs_calloc(1, sizeof *cs->tfm);
	cs->grad_accum = 1;
	unsigned long long k = 1;
	if (cJSON_HasObjectItem(root, "grad_accum") &&
	    zs_json_uint(root, "grad_accum", "case", 1, (double)ZS_MAX_GRAD_ACCUM, &k, cause) != 0)
		return -1;
	cs->grad_accum = (unsigned)k;
	/* the seed the run's dropout masks were drawn from (the model's and
	 * LoRA's: the PyTorch step's bernoulli_, engine/rng.h, keyed by it) */
	unsigned long long ds;
	if (cJSON_HasObjectItem(root, "dropout_seed")) {
		if (zs_json_uint(root, "dropout_seed", "case", 0, (double)ZS_MAX_SEED, &ds, cause) != 0)
			return -1;
		cs->dropout_seed = (uint64_t)ds;
		cs->has_dropout_seed = 1;
	}
	if (model(root, cs->tfm, cause) != 0 || world_batch_steps(root, cs, cause) != 0 || tokens(root, cs, cause) != 0)
		return -1;
	/* The side files last: read once all else is known good. */
	return weights(root, path, tfm_nparams(&cs->tfm->dims), cs, cause) != 0 ? -1
	       : lora(root, path, version, cs, cause);
}

int engine_case_load(const char *path, struct zs_case **out, char **cause)
{
	cJSON *root;
	if (zs_json_load(path, "zerosim-case/4 or zerosim-case/3 or zerosim-case/2 or zerosim-case/1", &root, cause) != 0)
		return -1;
	struct zs_case *cs = zs_calloc(1, sizeof *cs);
	zs_config_defaults(&cs->train);
	cs->train.given = 0;
	const char *format = cJSON_GetObjectItemCaseSensitive(root, "format")->valuestring;
	/* (zs_json_load took one of the four formats alone) */
	int version = format[strlen(format) - 1] - '0';
	char *why = NULL;
	int r = keys(root, version, cs, &why) != 0                   ? -1
	        : cJSON_HasObjectItem(root, "layers") || version == 1 ? load_mlp(root, path, cs, &why)
	                                                              : load_tfm(root, path, version, cs, &why);
	cJSON_Delete(root);
	if (r != 0) {
		zs_fail(cause, "%s: %s", path, why);
		free(why);
		engine_case_free(cs);
		return -1;
	}
	*out = cs;
	return 0;
}

void engine_case_free(struct zs_case *cs)
{
	if (cs == NULL)
		return;
	free(cs->weights);
	free(cs->x);
	free(cs->y);
	free(cs->tfm);
	free(cs->tokens);
	free(cs->weights_file);
	free(cs->lora_init);
	free(cs->lora_file);
	free(cs);
}

/* ------------------------------------------------------------------------- */
/* Writing: the case a seed gives, and a case to a file */

struct zs_case *engine_case_from_seed(const struct zs_config *c, unsigned world)
{
	struct zs_case *cs = zs_calloc(1, sizeof *cs);
	cs->world = world;
	cs->batch = c->batch;
	cs->steps = c->steps;
	cs->train = *c;
	if (c->tfm != NULL) {
		const struct tfm_dims *d = &c->tfm->dims;
		size_t B = c->batch, T = c->tfm->seq, row = T + 1;
		cs->tfm = zs_malloc(sizeof *cs->tfm);
		*cs->tfm = *c->tfm;
		cs->weights = zs_malloc(tfm_nparams(d) * sizeof *cs->weights);
		tfm_init_weights(cs->weights, d, c->seed);
		struct tfm_task task;
		tfm_task_init(&task, d->vocab, c->seed);
		int *in = zs_malloc(B * T * sizeof *in), *target = zs_malloc(B * T * sizeof *target);
		/* under --grad-accum K, micro-step m = t·K + k of the run is the
		 * task's batch m (engine/ag_exec.c feeds it so) */
		cs->grad_accum = c->grad_accum ? c->grad_accum : 1;
		unsigned nmicro = cs->steps * cs->grad_accum;
		cs->tokens = zs_malloc((size_t)nmicro * world * B * row * sizeof *cs->tokens);
		for (unsigned t = 0; t < nmicro; t++)
			for (unsigned k = 0; k < world; k++) {
				tfm_task_batch(in, target, &task, c->seed, t, k, B, T);
				int *at = cs->tokens + ((size_t)t * world + k) * B * row;
				for (size_t b = 0; b < B; b++, at += row) {
					memcpy(at, in + b * T, T * sizeof *at);
					at[T] = target[b * T + T - 1];
				}
			}
		free(in);
		free(target);
		tfm_task_free(&task);
		return cs;
	}
	memcpy(cs->widths, c->widths, sizeof cs->widths);
	cs->nwidths = c->nwidths;
	cs->weights = engine_initial_weights(c);
	size_t per = (size_t)cs->steps * world * cs->batch, d0 = c->widths[0], dL = c->widths[c->nwidths - 1];
	cs->x = zs_malloc(per * d0 * sizeof *cs->x);
	cs->y = zs_malloc(per * dL * sizeof *cs->y);
	for (unsigned t = 0; t < cs->steps; t++)
		for (unsigned k = 0; k < world; k++) {
			size_t at = ((size_t)t * world + k) * cs->batch;
			engine_mlp_batch(cs->x + at * d0, cs->y + at * dL, c->seed, t, k, cs->batch, d0, dL);
		}
	return cs;
}

char *engine_case_side_path(const char *path)
{
	size_t n = strlen(path);
	if (n > 5 && strcmp(path + n - 5, ".json") == 0)
		n -= 5;
	return zs_asprintf("%.*s.f32", (int)n, path);
}

/* The model as a Hugging Face config object: the keys zerosim reads
 * (util/model.h), and the epsilon and rotary base the engine uses. */
static cJSON *hf_config(const struct zs_tfm_run *tr)
{
	const struct zs_model *m = &tr->hf;
	cJSON *o = cJSON_CreateObject();
	cJSON_AddItemToObject(o, "_name_or_path", cJSON_CreateString(tr->name));
	cJSON_AddItemToObject(o, "model_type", cJSON_CreateString(m->model_type));
	int gpt2 = m->family == ZS_FAMILY_GPT2;
	const struct { const char *gpt2, *llama; double v; } k[] = {
		{"n_embd", "hidden_size", (double)m->hidden},
		{"n_inner", "intermediate_size", (double)m->intermediate},
		{"n_layer", "num_hidden_layers", (double)m->layers},
		{"n_head", "num_attention_heads", (double)m->heads},
		{NULL, "num_key_value_heads", (double)m->kv_heads},
		{NULL, "head_dim", (double)m->head_dim},
		{"vocab_size", "vocab_size", (double)m->vocab},
		{"n_positions", "max_position_embeddings", (double)m->positions},
	};
	for (size_t i = 0; i < sizeof k / sizeof k[0]; i++)
		if ((gpt2 ? k[i].gpt2 : k[i].llama) != NULL)
			cJSON_AddItemToObject(o, gpt2 ? k[i].gpt2 : k[i].llama, cJSON_CreateNumber(k[i].v));
	cJSON_AddItemToObject(o, "tie_word_embeddings", cJSON_CreateBool(m->tied));
	cJSON_AddItemToObject(o, gpt2 ? "layer_norm_epsilon" : "rms_norm_eps", cJSON_CreateNumber(short_float(tr->dims.eps)));
	if (!gpt2)
		cJSON_AddItemToObject(o, "rope_theta", cJSON_CreateNumber(short_float(tr->dims.rope_theta)));
	/* the dropout probabilities the plain PyTorch loop runs with (GPT2Config's
	 * default is 0.1: a case says what its run had) */
	zs_model_dropout_json(o, m);
	/* gemma2's attention scalar, soft-caps (null: none) and window, as read */
	if (m->gemma) {
		cJSON_AddItemToObject(o, "query_pre_attn_scalar", cJSON_CreateNumber(m->attn_scalar));
		cJSON_AddItemToObject(o, "attn_logit_softcapping",
		                      m->attn_softcap > 0 ? cJSON_CreateNumber(m->attn_softcap) : cJSON_CreateNull());
		cJSON_AddItemToObject(o, "final_logit_softcapping",
		                      m->final_softcap > 0 ? cJSON_CreateNumber(m->final_softcap) : cJSON_CreateNull());
		cJSON_AddItemToObject(o, "sliding_window", m->sliding_window > 0 ? cJSON_CreateNumber((double)m->sliding_window)
		                                                                : cJSON_CreateNull());
	}
	/* gemma3_text's layer pattern and the sliding layers' rotary base */
	if (m->window_pattern != 0) {
		cJSON_AddItemToObject(o, "sliding_window_pattern", cJSON_CreateNumber((double)m->window_pattern));
		cJSON_AddItemToObject(o, "rope_local_base_freq", cJSON_CreateNumber(short_float(tr->dims.rope_local_theta)));
		/* the global layers' linear scaling where there is one (zs_model's
		 * rope_factor; absent is none, as a case without it always said) */
		if (tr->dims.rope_factor > 0.0f && tr->dims.rope_factor != 1.0f) {
			cJSON *rs = cJSON_AddObjectToObject(o, "rope_scaling");
			cJSON_AddItemToObject(rs, "rope_type", cJSON_CreateString("linear"));
			cJSON_AddItemToObject(rs, "factor", cJSON_CreateNumber(short_float(tr->dims.rope_factor)));
		}
	}
	/* the row nn.Embedding's padding_idx holds, or null for none: the llama
	 * family's configs say it always, since some families' default is a
	 * row (phi3's 32000, gemma2's and gemma3's 0: a case of a config that
	 * said null replayed with row 0 before) */
	if (m->pad_row != 0)
		cJSON_AddItemToObject(o, "pad_token_id", cJSON_CreateNumber((double)(m->pad_row - 1)));
	else if (!gpt2)
		cJSON_AddItemToObject(o, "pad_token_id", cJSON_CreateNull());
	return o;
}

/* Raw little-endian float32. */
static unsigned char *f32_bytes(const float *w, size_t n)
{
	unsigned char *buf = zs_malloc(4 * n);
	for (size_t i = 0; i < n; i++) {
		uint32_t u;
		memcpy(&u, &w[i], sizeof u);
		for (int b = 0; b < 4; b++)
			buf[4 * i + (size_t)b] = (unsigned char)(u >> (8 * b));
	}
	return buf;
}

char *engine_case_lora_path(const char *path)
{
	size_t n = strlen(path);
	if (n > 5 && strcmp(path + n - 5, ".json") == 0)
		n -= 5;
	return zs_asprintf("%.*s.lora.f32", (int)n, path);
}

/* The case's "lora": the run's LoRA settings and its adapters' initial
 * values, a side file {"file", "count", "digest"} as the weights' (raw
 * little-endian float32, model.parameters() order: per adapted layer
 * lora_A [r, in], lora_B [out, r]). Returns the side file's path and its
 * bytes in *bytes (both the caller's). */
static char *lora_key(cJSON *root, const struct zs_case *cs, const struct zs_config *c, const char *path,
                      unsigned char **bytes)
{
	char *lpath = engine_case_lora_path(path);
	*bytes = f32_bytes(cs->lora_init, cs->nlora_init);
	const char *base = strrchr(lpath, '/');
	char digest[32];
	snprintf(digest, sizeof digest, "xxh3:%016llx", (unsigned long long)XXH3_64bits(*bytes, 4 * cs->nlora_init));
	cJSON *l = cJSON_CreateObject();
	cJSON_AddItemToObject(root, "lora", l);
	cJSON_AddItemToObject(l, "r", cJSON_CreateNumber(c->lora_r));
	cJSON_AddItemToObject(l, "alpha", cJSON_CreateNumber(c->lora_alpha));
	/* (its reader, tests/ft_torch.py --case, trains at this dropout) */
	cJSON_AddItemToObject(l, "dropout", cJSON_CreateNumber(c->lora_dropout));
	cJSON_AddItemToObject(l, "targets", cJSON_CreateString(c->lora_targets[0] ? c->lora_targets : "default"));
	/* the 4-bit base (zerosim-case/4): quantized from the case's fp32
	 * weights as the run's set-up quantizes them */
	if (c->quant_nf4) {
		cJSON_AddItemToObject(l, "quant_base", cJSON_CreateString("nf4"));
		cJSON_AddItemToObject(l, "double_quant", cJSON_CreateBool(c->double_quant));
	}
	cJSON_AddItemToObject(l, "file", cJSON_CreateString(base != NULL ? base + 1 : lpath));
	cJSON_AddItemToObject(l, "count", cJSON_CreateNumber((double)cs->nlora_init));
	cJSON_AddItemToObject(l, "digest", cJSON_CreateString(digest));
	return lpath;
}

int engine_case_write(const char *path, const struct zs_case *cs, const struct zs_config *c, char **cause)
{
	cJSON *root = cJSON_CreateObject();
	/* /3 only where it says more than /2 can (its freeze), /4 where the
	 * base is 4-bit (lora's quant_base): every other case stays one an
	 * older reader takes */
	cJSON_AddItemToObject(root, "format", cJSON_CreateString(c->lora_r && c->quant_nf4 ? "zerosim-case/4"
	                                                         : c->freeze[0]              ? "zerosim-case/3"
	                                                                                     : "zerosim-case/2"));
	if (cs->tfm != NULL) {
		cJSON_AddItemToObject(root, "model", hf_config(cs->tfm));
		cJSON_AddItemToObject(root, "seq", cJSON_CreateNumber((double)cs->tfm->seq));
		cJSON_AddItemToObject(root, "recompute", cJSON_CreateString(zs_recompute_name(cs->tfm->recompute)));
	} else {
		cJSON *l = cJSON_CreateArray();
		cJSON_AddItemToObject(root, "layers", l);
		for (size_t i = 0; i < cs->nwidths; i++)
			cJSON_AddItemToArray(l, cJSON_CreateNumber((double)cs->widths[i]));
	}
	cJSON_AddItemToObject(root, "world", cJSON_CreateNumber(cs->world));
	cJSON_AddItemToObject(root, "batch", cJSON_CreateNumber(cs->batch));
	cJSON_AddItemToObject(root, "steps", cJSON_CreateNumber(cs->steps));
	cJSON_AddItemToObject(root, "precision", cJSON_CreateString(zs_precision_name(c->precision)));
	cJSON_AddItemToObject(root, "optimizer", cJSON_CreateString(zs_optimizer_name(c->optimizer)));
	cJSON_AddItemToObject(root, "lr", cJSON_CreateNumber(c->lr));
	if (c->optimizer == ZS_ADAM) {
		cJSON_AddItemToObject(root, "beta1", cJSON_CreateNumber(c->beta1));
		cJSON_AddItemToObject(root, "beta2", cJSON_CreateNumber(c->beta2));
		cJSON_AddItemToObject(root, "eps", cJSON_CreateNumber(c->eps));
	}
	if (c->freeze[0])
		cJSON_AddItemToObject(root, "freeze", cJSON_CreateString(c->freeze));
	size_t psi = cs->tfm != NULL ? tfm_nparams(&cs->tfm->dims) : zs_params(cs->widths, cs->nwidths);
	struct zs_out *side = NULL, *lside = NULL;
	char *side_path = NULL, *lora_path = NULL;
	unsigned char *bytes = NULL, *lbytes = NULL;
	if (cs->tfm != NULL) { /* the weights in the side file, beside the case */
		side_path = engine_case_side_path(path);
		bytes = f32_bytes(cs->weights, psi);
		const char *base = strrchr(side_path, '/');
		char digest[32];
		snprintf(digest, sizeof digest, "xxh3:%016llx", (unsigned long long)XXH3_64bits(bytes, 4 * psi));
		cJSON *w = cJSON_CreateObject();
		cJSON_AddItemToObject(root, "weights", w);
		cJSON_AddItemToObject(w, "file", cJSON_CreateString(base != NULL ? base + 1 : side_path));
		cJSON_AddItemToObject(w, "count", cJSON_CreateNumber((double)psi));
		cJSON_AddItemToObject(w, "digest", cJSON_CreateString(digest));
		if (cs->lora_init != NULL && c->lora_r) /* the adapters, a side file of their own */
			lora_path = lora_key(root, cs, c, path, &lbytes);
		cJSON *all = cJSON_CreateArray();
		cJSON_AddItemToObject(root, "tokens", all);
		const size_t row = cs->tfm->seq + 1;
		const int *at = cs->tokens;
		if (cs->grad_accum > 1)
			cJSON_AddItemToObject(root, "grad_accum", cJSON_CreateNumber(cs->grad_accum));
		/* a run that draws dropout masks (the model's probabilities, or
		 * LoRA's) draws them from its seed: the case names it, so that
		 * --case draws the same masks */
		const struct zs_model *hf = &cs->tfm->hf;
		if ((c->lora_r && c->lora_dropout > 0) || hf->embd_pdrop > 0 || hf->attn_pdrop > 0 || hf->resid_pdrop > 0)
			cJSON_AddItemToObject(root, "dropout_seed", cJSON_CreateNumber((double)c->seed));
		for (unsigned t = 0; t < cs->steps * (cs->grad_accum ? cs->grad_accum : 1); t++) {
			cJSON *stepv = cJSON_CreateArray();
			cJSON_AddItemToArray(all, stepv);
			for (unsigned k = 0; k < cs->world; k++) {
				cJSON *rk = cJSON_CreateArray();
				cJSON_AddItemToArray(stepv, rk);
				for (unsigned b = 0; b < cs->batch; b++, at += row) {
					cJSON *r = cJSON_CreateIntArray(at, (int)row);
					cJSON_AddItemToArray(rk, r);
				}
			}
		}
	} else {
		cJSON *w = cJSON_CreateArray();
		cJSON_AddItemToObject(root, "weights", w);
		for (size_t i = 0; i < psi; i++)
			cJSON_AddItemToArray(w, cJSON_CreateNumber((double)cs->weights[i]));
		cJSON *all = cJSON_CreateArray();
		cJSON_AddItemToObject(root, "batches", all);
		size_t d0 = cs->widths[0], dL = cs->widths[cs->nwidths - 1];
		for (unsigned t = 0; t < cs->steps; t++) {
			cJSON *stepv = cJSON_CreateArray();
			cJSON_AddItemToArray(all, stepv);
			for (unsigned k = 0; k < cs->world; k++) {
				cJSON *rk = cJSON_CreateObject(), *x = cJSON_CreateArray(), *y = cJSON_CreateArray();
				cJSON_AddItemToArray(stepv, rk);
				cJSON_AddItemToObject(rk, "x", x);
				cJSON_AddItemToObject(rk, "y", y);
				size_t at = ((size_t)t * cs->world + k) * cs->batch;
				for (unsigned b = 0; b < cs->batch; b++, at++) {
					cJSON *xr = cJSON_CreateArray(), *yr = cJSON_CreateArray();
					cJSON_AddItemToArray(x, xr);
					cJSON_AddItemToArray(y, yr);
					for (size_t j = 0; j < d0; j++)
						cJSON_AddItemToArray(xr, cJSON_CreateNumber((double)cs->x[at * d0 + j]));
					for (size_t j = 0; j < dL; j++)
						cJSON_AddItemToArray(yr, cJSON_CreateNumber((double)cs->y[at * dL + j]));
				}
			}
		}
	}
	/* Every file written in full before any is put in place. */
	char *text = zs_json_print(root);
	cJSON_Delete(root);
	struct zs_out *o = NULL;
	int r = zs_out_open(path, &o, cause);
	if (r == 0 && side_path != NULL && (r = zs_out_open(side_path, &side, cause)) == 0)
		r = zs_out_write(side, bytes, 4 * psi, cause);
	if (r == 0 && lora_path != NULL && (r = zs_out_open(lora_path, &lside, cause)) == 0)
		r = zs_out_write(lside, lbytes, 4 * cs->nlora_init, cause);
	if (r == 0)
		r = zs_out_write(o, text, strlen(text), cause);
	if (r == 0)
		r = zs_out_write(o, "\n", 1, cause);
	if (r == 0 && lside != NULL) {
		r = zs_out_commit(lside, cause);
		lside = NULL;
	}
	if (r == 0 && side != NULL) {
		r = zs_out_commit(side, cause);
		side = NULL;
	}
	if (r == 0) {
		r = zs_out_commit(o, cause);
		o = NULL;
	}
	if (lside != NULL)
		zs_out_abort(lside);
	if (side != NULL)
		zs_out_abort(side);
	if (o != NULL)
		zs_out_abort(o);
	free(text);
	free(bytes);
	free(lbytes);
	free(side_path);
	free(lora_path);
	return r;
}

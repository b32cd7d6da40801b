/*
 * case — reading a zerosim-case/2 or /1 file (docs/formats.md): the model,
 * the initial weights and every rank's batch at every step, and (/2) the
 * training settings, so that the same run can be fed to another framework
 * and compared. Every key is checked, and a key the version does not have
 * is an error naming it (a user writes this file); a wrong shape names the
 * place it was found.
 */
#include "config.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine/engine.h"
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
/* Keys zerosim-case/2 defines for a transformer (docs/formats.md) that
 * this zerosim does not read yet: refused, never ignored. */
static const char *const later_v2[] = {"model", "tokens"};

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
		if (version >= 2 && LISTED(it->string, training_v2)) {
			char *why = NULL;
			if (zs_config_set_json(&cs->train, it->string, it, &why) != 0) {
				int r = zs_fail(cause, "the case's %s", why);
				free(why);
				return r;
			}
			continue;
		}
		if (version >= 2 && LISTED(it->string, later_v2))
			return zs_fail(cause, "the case's \"%s\" (a transformer's) is not read by this zerosim, "
			               "which trains the MLP of \"layers\"", it->string);
		if (version == 1 && LISTED(it->string, training_v2))
			return zs_fail(cause, "unknown key \"%.40s\" in a zerosim-case/1 file (training settings "
			               "are zerosim-case/2's)", it->string);
		return zs_fail(cause, "unknown key \"%.40s\" in the case", it->string);
	}
	/* SGD has no betas or epsilon: a case that gives them means Adam. */
	unsigned adam_only = 1u << ZS_KEY_BETA1 | 1u << ZS_KEY_BETA2 | 1u << ZS_KEY_EPS;
	if ((cs->train.given & 1u << ZS_KEY_OPTIMIZER) && cs->train.optimizer == ZS_SGD &&
	    (cs->train.given & adam_only))
		return zs_fail(cause, "the case trains sgd but gives Adam's beta1, beta2 or eps");
	return 0;
}

static int load(const cJSON *root, struct zs_case *cs, char **cause)
{
	const cJSON *layers, *weights, *batches;
	unsigned long long v;
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
	if (zs_json_uint(root, "world", "case", 1, ZS_MAX_WORLD, &v, cause) != 0)
		return -1;
	cs->world = (unsigned)v;
	if (zs_json_uint(root, "batch", "case", 1, ZS_MAX_BATCH, &v, cause) != 0)
		return -1;
	cs->batch = (unsigned)v;
	if (zs_json_uint(root, "steps", "case", 1, ZS_MAX_STEPS, &v, cause) != 0)
		return -1;
	cs->steps = (unsigned)v;

	double psi = 0;
	for (size_t l = 0; l + 1 < cs->nwidths; l++)
		psi += (double)cs->widths[l] * (double)cs->widths[l + 1] + (double)cs->widths[l + 1];
	weights = cJSON_GetObjectItemCaseSensitive(root, "weights");
	if (cJSON_IsObject(weights))
		return zs_fail(cause, "the case's \"weights\" names a side file, which this zerosim does not read "
		               "yet; give them as an array");
	if (zs_json_array(root, "weights", "case", &weights, cause) != 0 ||
	    zs_json_array(root, "batches", "case", &batches, cause) != 0)
		return -1;
	/* A file states its sizes before it proves them; check the sizes
	 * against the arrays it holds before allocating anything. */
	if ((double)cJSON_GetArraySize(weights) != psi)
		return zs_fail(cause, "the case's \"weights\" has %d numbers, its layers need %.0f",
		               cJSON_GetArraySize(weights), psi);
	if ((size_t)cJSON_GetArraySize(batches) != cs->steps)
		return zs_fail(cause, "the case's \"batches\" has %d steps, \"steps\" is %u",
		               cJSON_GetArraySize(batches), cs->steps);
	if (batches_shape(batches, cs, cause) != 0)
		return -1;
	size_t d0 = cs->widths[0], dL = cs->widths[cs->nwidths - 1];
	size_t per = (size_t)cs->steps * cs->world * cs->batch;
	cs->weights = zs_malloc((size_t)psi * sizeof(float));
	if (floats(weights, (size_t)psi, cs->weights, "the case's \"weights\"", cause) != 0)
		return -1;
	size_t t = 0;
	const cJSON *stepv;
	cJSON_ArrayForEach(stepv, batches) {
		if (!cJSON_IsArray(stepv) || (size_t)cJSON_GetArraySize(stepv) != cs->world)
			return zs_fail(cause, "the case's batches[%zu] is not an array of %u ranks", t, cs->world);
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
			int r = !cJSON_IsObject(rk)
			            ? zs_fail(cause, "the case's batches[%zu][%zu] is not an object", t, k)
			            : matrix(cJSON_GetObjectItemCaseSensitive(rk, "x"), cs->batch, d0, cs->x + at * d0,
			                     wx, cause) != 0 ||
			                      matrix(cJSON_GetObjectItemCaseSensitive(rk, "y"), cs->batch, dL,
			                             cs->y + at * dL, wy, cause) != 0
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

int engine_case_load(const char *path, struct zs_case **out, char **cause)
{
	cJSON *root;
	if (zs_json_load(path, "zerosim-case/2 or zerosim-case/1", &root, cause) != 0)
		return -1;
	struct zs_case *cs = zs_calloc(1, sizeof *cs);
	zs_config_defaults(&cs->train);
	cs->train.given = 0;
	int version = strcmp(cJSON_GetObjectItemCaseSensitive(root, "format")->valuestring, "zerosim-case/2") == 0 ? 2 : 1;
	char *why = NULL;
	int r = keys(root, version, cs, &why) != 0 ? -1 : load(root, cs, &why);
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
	free(cs);
}

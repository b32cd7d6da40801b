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
#include "util/schedule.h"

static const char *const scheme_names[ZS_NSCHEMES] = {"dp", "zero1", "zero2", "zero3"};
static const char *const unit_names[ZS_NUNITS] = {"model", "layer"};

const char *zs_scheme_name(enum zs_scheme s) { return scheme_names[s]; }
const char *zs_unit_name(enum zs_unit u) { return unit_names[u]; }
const char *zs_precision_name(enum zs_precision p) { return p == ZS_MIXED ? "mixed" : "fp32"; }
const char *zs_optimizer_name(enum zs_optimizer o) { return o == ZS_ADAM ? "adam" : "sgd"; }

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
	c->precision = ZS_MIXED;
	c->optimizer = ZS_ADAM;
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

int zs_config_set(struct zs_config *c, const char *key, const char *value, char **cause)
{
	struct zs_config t = *c; /* change c only if the whole value parses */
	struct list_ctx x = {&t, 0};
	unsigned long long v = 0;
	if (value == NULL)
		return zs_fail(cause, "--%s needs a value", key);
	if (strcmp(key, "layers") == 0) {
		if (each_item(key, value, add_width, &x, cause) != 0)
			return -1;
		if (x.n < 2)
			return zs_fail(cause, "--layers: '%.40s' needs at least two widths (input and output)", value);
		t.nwidths = x.n;
	} else if (strcmp(key, "world") == 0) {
		if (each_item(key, value, add_world, &x, cause) != 0)
			return -1;
		t.nworld = x.n;
	} else if (strcmp(key, "schemes") == 0 || strcmp(key, "scheme") == 0) {
		if (each_item("schemes", value, add_scheme, &x, cause) != 0)
			return -1;
		t.nschemes = x.n;
	} else if (strcmp(key, "unit") == 0 || strcmp(key, "units") == 0) {
		if (each_item("unit", value, add_unit, &x, cause) != 0)
			return -1;
		t.nunits = x.n;
	} else if (strcmp(key, "steps") == 0) {
		if (zs_parse_uint(key, value, ZS_MAX_STEPS, "a step count", &v, cause) != 0)
			return -1;
		t.steps = (unsigned)v;
	} else if (strcmp(key, "batch") == 0) {
		if (zs_parse_uint(key, value, ZS_MAX_BATCH, "a batch size", &v, cause) != 0)
			return -1;
		t.batch = (unsigned)v;
	} else if (strcmp(key, "seed") == 0) {
		if (*value == '\0' || strspn(value, "0123456789") != strlen(value))
			return zs_fail(cause, "--seed: '%.40s' is not a whole number", value);
		errno = 0;
		t.seed = strtoull(value, NULL, 10);
		if (errno == ERANGE)
			return zs_fail(cause, "--seed: '%.40s' is too large (at most 2^64-1)", value);
	} else if (strcmp(key, "lr") == 0) {
		char *end;
		errno = 0;
		double d = strtod(value, &end);
		/* Below 1e-12 the fp32 update vanishes (an fp32 lr underflows at 1e-45). */
		if (*value == '\0' || *end != '\0' || errno == ERANGE || !isfinite(d) || d < 1e-12 || d > 1e3)
			return zs_fail(cause, "--lr: '%.40s' is not a learning rate (a number in [1e-12, 1000])", value);
		t.lr = d;
	} else if (strcmp(key, "precision") == 0) {
		if (strcmp(value, "mixed") == 0)
			t.precision = ZS_MIXED;
		else if (strcmp(value, "fp32") == 0)
			t.precision = ZS_FP32;
		else
			return zs_fail(cause, "--precision: unknown precision '%.40s' (mixed, fp32)", value);
	} else if (strcmp(key, "optimizer") == 0) {
		if (strcmp(value, "adam") == 0)
			t.optimizer = ZS_ADAM;
		else if (strcmp(value, "sgd") == 0)
			t.optimizer = ZS_SGD;
		else
			return zs_fail(cause, "--optimizer: unknown optimizer '%.40s' (adam, sgd)", value);
	} else {
		return zs_fail(cause, "unknown option --%s", key);
	}
	*c = t;
	return 0;
}

/* A JSON value as the string the command line would have given. */
static int spec_value(const cJSON *it, const char *key, char **out, char **cause)
{
	if (cJSON_IsString(it)) {
		*out = zs_strdup(it->valuestring);
		return 0;
	}
	if (cJSON_IsNumber(it)) {
		if (!isfinite(it->valuedouble))
			return zs_fail(cause, "\"%s\" is not a finite number", key);
		if (strcmp(key, "lr") == 0)
			*out = zs_asprintf("%.17g", it->valuedouble);
		else if (it->valuedouble >= 0 && it->valuedouble < 1.9e19 && it->valuedouble == floor(it->valuedouble))
			*out = zs_asprintf("%.0f", it->valuedouble);
		else
			return zs_fail(cause, "\"%s\" is %g, not a whole number", key, it->valuedouble);
		return 0;
	}
	if (cJSON_IsArray(it)) {
		size_t cap = 16, n = 0;
		char *s = zs_malloc(cap);
		s[0] = '\0';
		const cJSON *e;
		cJSON_ArrayForEach(e, it) {
			char *one = NULL;
			if (cJSON_IsArray(e) || spec_value(e, key, &one, cause) != 0) {
				free(s);
				return cJSON_IsArray(e) ? zs_fail(cause, "\"%s\" holds a nested array", key) : -1;
			}
			size_t need = n + strlen(one) + 2;
			if (need > cap) {
				cap = need * 2;
				char *ns = realloc(s, cap);
				if (ns == NULL) {
					free(s);
					free(one);
					return zs_fail(cause, "out of memory");
				}
				s = ns;
			}
			n += (size_t)sprintf(s + n, "%s%s", n ? "," : "", one);
			free(one);
		}
		*out = s;
		return 0;
	}
	return zs_fail(cause, "\"%s\" has the wrong type", key);
}

int zs_config_load_spec(struct zs_config *c, const char *path, char **cause)
{
	static const char *const keys[] = {"layers", "world", "schemes", "units", "steps", "batch",
	                                   "seed", "precision", "optimizer", "lr"};
	cJSON *root;
	if (zs_json_load(path, "zerosim-sweep/1", &root, cause) != 0)
		return -1;
	struct zs_config t = *c;
	int r = 0;
	for (size_t i = 0; i < sizeof keys / sizeof keys[0] && r == 0; i++) {
		const cJSON *it = cJSON_GetObjectItemCaseSensitive(root, keys[i]);
		if (it == NULL)
			continue;
		char *value = NULL, *why = NULL;
		if (spec_value(it, keys[i], &value, &why) != 0 || zs_config_set(&t, keys[i], value, &why) != 0)
			r = zs_fail(cause, "%s: %s", path, why);
		free(value);
		free(why);
	}
	cJSON_Delete(root);
	if (r == 0)
		*c = t;
	return r;
}

double zs_config_params(const struct zs_config *c)
{
	return (double)zs_params(c->widths, c->nwidths);
}

size_t zs_config_units(const struct zs_config *c, enum zs_unit unit, size_t *n)
{
	if (unit == ZS_UNIT_MODEL) {
		n[0] = (size_t)zs_config_params(c);
		return 1;
	}
	for (size_t l = 0; l + 1 < c->nwidths; l++)
		n[l] = zs_layer_params(c->widths, l);
	return c->nwidths - 1;
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
	return 0;
}

/* Nonzero if s holds white space: strtod would skip it silently. */
static int isspace_free(const char *s)
{
	return strpbrk(s, " \t\n\r\f\v") != NULL;
}

static int parse_number(const char *s, double *out, const char **rest)
{
	char *end;
	errno = 0;
	double v = strtod(s, &end);
	if (end == s || errno == ERANGE || !isfinite(v))
		return -1;
	*out = v;
	*rest = end;
	return 0;
}

int zs_parse_count(const char *s, double max, double *out, char **cause)
{
	double v;
	const char *rest;
	if (parse_number(s, &v, &rest) != 0 || *rest != '\0' || isspace_free(s) != 0)
		return zs_fail(cause, "'%.40s' is not a number", s);
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
	const char *rest;
	if (parse_number(s, &v, &rest) != 0 || isspace_free(s) != 0)
		return zs_fail(cause, "'%.40s' is not a memory size (such as 80GB or 40GiB)", s);
	for (size_t i = 0; i < sizeof units / sizeof units[0]; i++)
		if (strcmp(rest, units[i].suffix) == 0) {
			double b = v * units[i].mult;
			if (!(b > 0) || !isfinite(b) || b > 1e18)
				return zs_fail(cause, "'%.40s' is not a memory size between 1 byte and 1e18 bytes", s);
			*out = b;
			return 0;
		}
	return zs_fail(cause, "'%.40s' is not a memory size: unknown unit '%.20s' (B, KB, MB, GB, TB, KiB, MiB, GiB, TiB)", s, rest);
}

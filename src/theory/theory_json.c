/*
 * theory_json — the theory's two outputs: the zerosim-theory/1 tree
 * (docs/formats.md) and text tables per rank laid out like Table 1 of the
 * ZeRO paper (Rajbhandari et al., SC'20): one line per N, one column per
 * scheme, in GB = 1e9 bytes as in the paper (smaller decimal units for a
 * model whose largest cell is below 1 GB).
 */
#include "config.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "theory/theory.h"
#include "util/util.h"

#define GB 1e9

/* The paper's values for one row: bytes for a model known only by Ψ, or
 * by its shape. */
struct row {
	enum zs_scheme scheme;
	enum zs_unit unit;
	unsigned world;
	struct theory_floor floor;
	struct theory_schedule sched;    /* valid when the shape is known */
};

static void request_bytes(const struct theory_request *req, struct theory_bytes *b)
{
	theory_bytes_per_param(req->config->precision, req->config->optimizer, b);
}

static void request_shape(const struct theory_request *req, struct theory_shape *s)
{
	s->widths = req->config->widths;
	s->nwidths = req->config->nwidths;
	s->batch = req->config->batch;
	s->framework = req->config->framework;
	request_bytes(req, &s->bytes);
}

static double request_params(const struct theory_request *req)
{
	struct theory_shape s;

	if (!req->shape_known)
		return req->params;
	request_shape(req, &s);
	return (double)theory_params(&s);
}

static void compute_row(const struct theory_request *req, enum zs_scheme scheme,
                        enum zs_unit unit, unsigned world, struct row *r)
{
	struct theory_shape s;

	r->scheme = scheme;
	r->unit = unit;
	r->world = world;
	request_shape(req, &s);
	theory_floor(request_params(req), scheme, world, &s.bytes, &r->floor);
	if (req->shape_known)
		theory_schedule(&s, scheme, unit, world, &r->sched);
}

/* ------------------------------------------------------------------------ */
/* JSON */

static void add_breakdown(cJSON *obj, const char *key, const uint64_t *cat)
{
	cJSON *b = cJSON_AddObjectToObject(obj, key);

	for (int c = 0; c < THEORY_NCATEGORIES; c++)
		zs_json_add_number(b, theory_category_name((enum theory_category)c),
		                   (double)cat[c]);
}

static void add_comm(cJSON *obj, double bytes, double elements, double psi)
{
	zs_json_add_number(obj, "comm_bytes_per_rank_per_step", bytes);
	zs_json_add_number(obj, "comm_per_param_fp32", bytes / (4 * psi));
	zs_json_add_number(obj, "comm_elements_per_param", elements / psi);
}

static cJSON *schedule_json(const struct row *r)
{
	const struct theory_schedule *s = &r->sched;
	double psi = (double)s->params;
	cJSON *o = cJSON_CreateObject(), *units = cJSON_AddArrayToObject(o, "units");

	for (size_t u = 0; u < s->nunits; u++)
		cJSON_AddItemToArray(units, cJSON_CreateNumber((double)s->units[u]));
	zs_json_add_number(o, "shard_elements", (double)s->shard_elements);
	zs_json_add_number(o, "padded_elements", (double)s->padded_elements);
	zs_json_add_number(o, "resident_bytes", (double)s->resident_bytes);
	zs_json_add_number(o, "resident_bytes_per_param", (double)s->resident_bytes / psi);
	add_breakdown(o, "resident_breakdown", s->resident_breakdown);
	zs_json_add_number(o, "padding_bytes", s->padding_bytes);
	zs_json_add_number(o, "peak_bytes", (double)s->peak_bytes);
	zs_json_add_number(o, "peak_bytes_per_param", (double)s->peak_bytes / psi);
	add_breakdown(o, "peak_breakdown", s->peak_breakdown);
	add_comm(o, (double)s->comm_bytes, (double)s->comm_elements, psi);
	return o;
}

static cJSON *row_json(const struct theory_request *req, const struct row *r)
{
	struct theory_bytes b;
	double psi = request_params(req);
	cJSON *o = cJSON_CreateObject(), *floor;

	request_bytes(req, &b);
	cJSON_AddStringToObject(o, "scheme", zs_scheme_name(r->scheme));
	zs_json_add_number(o, "world", r->world);
	cJSON_AddStringToObject(o, "unit", zs_unit_name(r->unit));

	floor = cJSON_AddObjectToObject(o, "floor");
	zs_json_add_number(floor, "resident_bytes", r->floor.resident_bytes);
	zs_json_add_number(floor, "resident_bytes_per_param", r->floor.resident_bytes / psi);
	add_comm(floor, r->floor.comm_bytes, r->floor.comm_elements, psi);

	if (req->shape_known) {
		cJSON *sched = schedule_json(r);
		struct theory_shape shape;
		request_shape(req, &shape);
		if (shape.framework != ZS_FW_PAPER)
			theory_framework_json(sched, &shape, r->scheme, r->world, &r->sched);
		cJSON_AddItemToObject(o, "schedule", sched);
	} else if (req->largest_unit > 0 && r->scheme == ZS_ZERO3) {
		/* Only the ZeRO-3 transient is known for a model without shape. */
		cJSON *s = cJSON_AddObjectToObject(o, "schedule");
		zs_json_add_number(s, "transient_bytes", req->largest_unit * (b.p + b.g));
	} else {
		cJSON_AddNullToObject(o, "schedule");
	}

	if (req->device_mem > 0)
		cJSON_AddBoolToObject(o, "fits", r->floor.resident_bytes <= req->device_mem);
	else
		cJSON_AddNullToObject(o, "fits");
	if (req->config->framework != ZS_FW_PAPER)
		theory_framework_row_json(o, req, r->scheme, r->world);
	return o;
}

cJSON *theory_json(const struct theory_request *req)
{
	const struct zs_config *c = req->config;
	struct theory_bytes b;
	cJSON *root = cJSON_CreateObject(), *cfg, *arr, *bpp, *rows;

	if (root == NULL)
		goto oom;
	request_bytes(req, &b);
	cJSON_AddStringToObject(root, "format", "zerosim-theory/1");
	cJSON_AddStringToObject(root, "generator", PACKAGE_STRING);
	zs_json_add_number(root, "params", request_params(req));

	cfg = cJSON_AddObjectToObject(root, "config");
	if (req->shape_known) {
		arr = cJSON_AddArrayToObject(cfg, "layers");
		for (size_t i = 0; i < c->nwidths; i++)
			cJSON_AddItemToArray(arr, cJSON_CreateNumber((double)c->widths[i]));
		zs_json_add_number(cfg, "batch", c->batch);
	} else {
		cJSON_AddNullToObject(cfg, "layers");
		cJSON_AddNullToObject(cfg, "batch");
	}
	arr = cJSON_AddArrayToObject(cfg, "world");
	for (size_t i = 0; i < c->nworld; i++)
		cJSON_AddItemToArray(arr, cJSON_CreateNumber(c->world[i]));
	arr = cJSON_AddArrayToObject(cfg, "schemes");
	for (size_t i = 0; i < c->nschemes; i++)
		cJSON_AddItemToArray(arr, cJSON_CreateString(zs_scheme_name(c->schemes[i])));
	arr = cJSON_AddArrayToObject(cfg, "units");
	for (size_t i = 0; i < c->nunits; i++)
		cJSON_AddItemToArray(arr, cJSON_CreateString(zs_unit_name(c->units[i])));
	cJSON_AddStringToObject(cfg, "precision", zs_precision_name(c->precision));
	cJSON_AddStringToObject(cfg, "optimizer", zs_optimizer_name(c->optimizer));
	if (c->framework != ZS_FW_PAPER) /* absent: the paper's */
		cJSON_AddStringToObject(cfg, "framework", zs_framework_name(c->framework));
	bpp = cJSON_AddObjectToObject(cfg, "bytes_per_param");
	zs_json_add_number(bpp, "param", b.p);
	zs_json_add_number(bpp, "grad", b.g);
	zs_json_add_number(bpp, "optimizer", b.k);
	if (req->largest_unit > 0)
		zs_json_add_number(cfg, "largest_unit", req->largest_unit);
	else
		cJSON_AddNullToObject(cfg, "largest_unit");
	if (req->device_mem > 0)
		zs_json_add_number(cfg, "device_mem_bytes", req->device_mem);
	else
		cJSON_AddNullToObject(cfg, "device_mem_bytes");

	rows = cJSON_AddArrayToObject(root, "rows");
	if (rows == NULL)
		goto oom;
	for (size_t s = 0; s < c->nschemes; s++)
		for (size_t u = 0; u < c->nunits; u++)
			for (size_t w = 0; w < c->nworld; w++) {
				struct row r;
				cJSON *item;

				compute_row(req, c->schemes[s], c->units[u], c->world[w], &r);
				item = row_json(req, &r);
				if (item == NULL || !cJSON_AddItemToArray(rows, item))
					goto oom;
			}
	return root;

oom:
	/* cJSON reports allocation failure only by NULL; STYLE.md makes it fatal. */
	fprintf(stderr, "zerosim: out of memory building theory.json (%s:%d)\n",
	        __FILE__, __LINE__);
	abort();
}

/* ------------------------------------------------------------------------ */
/* Text */

struct text {
	char *buf;
	size_t len, cap;
};

static void put(struct text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void put(struct text *t, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(t->buf + t->len, t->cap - t->len, fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	if ((size_t)n >= t->cap - t->len) {
		char *bigger;

		t->cap = 2 * (t->len + (size_t)n + 1);
		bigger = zs_malloc(t->cap);
		memcpy(bigger, t->buf, t->len + 1);
		free(t->buf);
		t->buf = bigger;
		va_start(ap, fmt);
		vsnprintf(t->buf + t->len, t->cap - t->len, fmt, ap);
		va_end(ap);
	}
	t->len += (size_t)n;
}

/* A value with the paper's precision: three significant digits, whole
 * units from 1000 up (Table 1 prints 120, 52.5, 1.88, 0.12, 4011). Halves
 * round up as the paper does (41.25 -> 41.3), not to even as printf does:
 * the tiny nudge only decides exact ties. */
static const char *num_str(char *num, size_t size, double v)
{
	v *= 1 + 1e-12;
	if (v >= 1000)
		snprintf(num, size, "%.0f", v);
	else
		snprintf(num, size, "%.3g", v);
	return num;
}

/* Decimal units (the paper's GB is 1e9 bytes), the same spellings that
 * --device-mem accepts. */
static const struct { const char *name; double bytes; } scales[] = {
	{ "GB (1e9 bytes)", 1e9 }, { "MB (1e6 bytes)", 1e6 },
	{ "KB (1e3 bytes)", 1e3 }, { "bytes", 1 },
};

enum quantity { Q_FLOOR, Q_RESIDENT, Q_PEAK };

static double quantity(const struct row *r, enum quantity q)
{
	switch (q) {
	case Q_RESIDENT: return (double)r->sched.resident_bytes;
	case Q_PEAK: return (double)r->sched.peak_bytes;
	case Q_FLOOR:
	default: return r->floor.resident_bytes;
	}
}

/* One Table-1-like block: N down, schemes across, in GB unless the
 * largest value is below 1 GB (a model small enough to run): then in the
 * largest decimal unit that keeps it at or above 1. */
static void put_table(struct text *t, const struct theory_request *req,
                      enum zs_unit unit, enum quantity q, const char *title)
{
	const struct zs_config *c = req->config;
	double largest = 0;
	size_t sc = 0;

	for (size_t w = 0; w < c->nworld; w++)
		for (size_t s = 0; s < c->nschemes; s++) {
			struct row r;

			compute_row(req, c->schemes[s], unit, c->world[w], &r);
			if (quantity(&r, q) > largest)
				largest = quantity(&r, q);
		}
	while (sc + 1 < sizeof scales / sizeof scales[0] && largest < scales[sc].bytes)
		sc++;

	put(t, "\n%s, %s\n%8s", title, scales[sc].name, "N");
	for (size_t s = 0; s < c->nschemes; s++)
		put(t, " %10s", zs_scheme_name(c->schemes[s]));
	put(t, "\n");
	for (size_t w = 0; w < c->nworld; w++) {
		put(t, "%8u", c->world[w]);
		for (size_t s = 0; s < c->nschemes; s++) {
			struct row r;
			char num[64];

			compute_row(req, c->schemes[s], unit, c->world[w], &r);
			put(t, " %10s", num_str(num, sizeof num, quantity(&r, q) / scales[sc].bytes));
		}
		put(t, "\n");
	}
}

static void put_fits(struct text *t, const struct theory_request *req)
{
	const struct zs_config *c = req->config;

	put(t, "\nSmallest N in the list whose floor fits %.6g GB per rank:\n",
	    req->device_mem / GB);
	for (size_t s = 0; s < c->nschemes; s++) {
		long found = -1;

		for (size_t w = 0; w < c->nworld; w++) {
			struct row r;

			compute_row(req, c->schemes[s], c->units[0], c->world[w], &r);
			if (r.floor.resident_bytes <= req->device_mem
			    && (found < 0 || c->world[w] < (unsigned long)found))
				found = (long)c->world[w];
		}
		if (found < 0)
			put(t, "  %-6s none\n", zs_scheme_name(c->schemes[s]));
		else
			put(t, "  %-6s N = %ld\n", zs_scheme_name(c->schemes[s]), found);
	}
}

char *theory_text(const struct theory_request *req)
{
	const struct zs_config *c = req->config;
	struct theory_bytes b;
	struct text t = { zs_malloc(1024), 0, 1024 };
	char num[64];

	t.buf[0] = '\0';
	request_bytes(req, &b);
	put(&t, "Psi = %.17g parameters, %s precision, %s: p = %u, g = %u, k = %u bytes per parameter\n",
	    request_params(req), zs_precision_name(c->precision),
	    zs_optimizer_name(c->optimizer), b.p, b.g, b.k);
	if (req->shape_known) {
		put(&t, "layers");
		for (size_t i = 0; i < c->nwidths; i++)
			put(&t, "%s%zu", i ? "," : " ", c->widths[i]);
		put(&t, ", batch %u per rank\n", c->batch);
	}

	put_table(&t, req, c->units[0], Q_FLOOR,
	          "Model states per rank, the paper's floors (ZeRO, SC'20, Table 1)");
	if (req->shape_known) {
		for (size_t u = 0; u < c->nunits; u++) {
			char *title = zs_asprintf("Model states per rank, the schedule (docs/schedule.md), unit = %s",
			                          zs_unit_name(c->units[u]));
			put_table(&t, req, c->units[u], Q_RESIDENT, title);
			free(title);
			title = zs_asprintf("Peak per rank, the schedule, unit = %s",
			                    zs_unit_name(c->units[u]));
			put_table(&t, req, c->units[u], Q_PEAK, title);
			free(title);
		}
	} else if (req->largest_unit > 0) {
		put(&t, "\nZeRO-3 transient (largest unit %.17g params gathered with its grads): ",
		    req->largest_unit);
		put(&t, "%s GB\n", num_str(num, sizeof num, req->largest_unit * (b.p + b.g) / GB));
	}
	if (req->device_mem > 0)
		put_fits(&t, req);
	char *fw = theory_framework_text(req);
	if (fw != NULL)
		put(&t, "%s", fw);
	free(fw);
	return t.buf;
}

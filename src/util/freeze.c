/*
 * freeze — --freeze SPEC over Hugging Face parameter names (util/freeze.h).
 * Written to mean what tests/ft_torch.py's freeze_matches means: the block
 * of a name is the first `.h.<i>.` or `.layers.<i>.` in it, an embedding
 * a name with `.wte.`, `.wpe.` or `.embed_tokens.` in it.
 */
#include "util/freeze.h"

#include <ctype.h>
#include <fnmatch.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/config.h"
#include "util/step.h"
#include "util/util.h"

/* The block index in name (-1: none): the first ".h.<digits>." or
 * ".layers.<digits>.". */
static long block_of(const char *name)
{
	static const char *const pre[] = {".h.", ".layers."};
	const char *best = NULL;
	long idx = -1;
	for (int k = 0; k < 2; k++)
		for (const char *p = strstr(name, pre[k]); p; p = strstr(p + 1, pre[k])) {
			const char *d = p + strlen(pre[k]), *e = d;
			while (isdigit((unsigned char)*e))
				e++;
			if (e > d && *e == '.') {
				if (!best || p < best) {
					best = p;
					idx = strtol(d, NULL, 10);
				}
				break;
			}
		}
	return idx;
}

static int is_embedding(const char *name)
{
	return strstr(name, ".wte.") || strstr(name, ".wpe.") || strstr(name, ".embed_tokens.");
}

/* "A-B" (blocks:) or "N" (all-but-last:): whole numbers, nothing after. */
static int parse_range(const char *s, int two, unsigned long *a, unsigned long *b)
{
	char *e;
	if (!isdigit((unsigned char)*s))
		return -1;
	*a = strtoul(s, &e, 10);
	if (!two)
		return *e ? -1 : 0;
	if (*e != '-' || !isdigit((unsigned char)e[1]))
		return -1;
	*b = strtoul(e + 1, &e, 10);
	return *e || *b < *a ? -1 : 0;
}

/* One term against name: 1 matches, 0 not, -1 malformed (*why set). */
static int term_match(const char *t, const char *name, uint64_t blocks, const char **why)
{
	unsigned long a = 0, b = 0;
	if (!strcmp(t, "embeddings"))
		return name && is_embedding(name);
	if (!strncmp(t, "blocks:", 7)) {
		if (parse_range(t + 7, 1, &a, &b) < 0) {
			*why = "blocks:A-B, whole numbers, A <= B";
			return -1;
		}
		long i = name ? block_of(name) : -1;
		return i >= 0 && (unsigned long)i >= a && (unsigned long)i <= b;
	}
	if (!strncmp(t, "all-but-last:", 13)) {
		if (parse_range(t + 13, 0, &a, &b) < 0) {
			*why = "all-but-last:N, a whole number";
			return -1;
		}
		if (!name)
			return 0;
		long i = block_of(name);
		return is_embedding(name) || (i >= 0 && (uint64_t)i + a < blocks);
	}
	if (!strncmp(t, "re:", 3)) {
		regex_t re;
		if (regcomp(&re, t + 3, REG_EXTENDED | REG_NOSUB) != 0) {
			*why = "re:REGEX, a POSIX extended regular expression";
			return -1;
		}
		int r = name && regexec(&re, name, 0, NULL, 0) == 0;
		regfree(&re);
		return r;
	}
	return name && fnmatch(t, name, 0) == 0;
}

/* Calls f on each term of spec (trimmed of blanks, empty ones skipped);
 * stops at the first nonzero return, which it returns. */
static int each_term(const char *spec, const char *name, uint64_t blocks, char **cause)
{
	char buf[ZS_FREEZE_MAX + 1];
	size_t n = strlen(spec);
	if (n > ZS_FREEZE_MAX)
		return zs_fail(cause, "--freeze: the pattern is %zu characters long (at most %d)", n, ZS_FREEZE_MAX);
	memcpy(buf, spec, n + 1);
	char *save = NULL;
	for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		while (isspace((unsigned char)*t))
			t++;
		char *e = t + strlen(t);
		while (e > t && isspace((unsigned char)e[-1]))
			*--e = 0;
		if (!*t)
			continue;
		const char *why = NULL;
		int r = term_match(t, name, blocks, &why);
		if (r < 0)
			return zs_fail(cause, "--freeze: bad term '%.60s' (%s)", t, why);
		if (r > 0)
			return 1;
	}
	return 0;
}

int zs_freeze_check(const char *spec, char **cause)
{
	return each_term(spec, NULL, 0, cause) < 0 ? -1 : 0;
}

int zs_freeze_match(const char *spec, const char *name, uint64_t blocks)
{
	return each_term(spec, name, blocks, NULL) > 0;
}

/* ------------------------------------------------------------------------ */
/* The paper's units */

/* Part k of tensor i's name: a fused tensor's "{q,k,v}_proj" names its
 * parts in braces; the k-th word stands for them (k < 0: the name). */
static void part_of(const struct step_params *p, size_t i, int k, char *out, size_t n)
{
	char name[256];
	step_tensor_name(p, i, name, sizeof name);
	const char *l = strchr(name, '{'), *r = l ? strchr(l, '}') : NULL;
	if (k < 0 || r == NULL) {
		snprintf(out, n, "%s", name);
		return;
	}
	const char *a = l + 1;
	for (int j = 0; j < k && a < r; j++)
		a += strcspn(a, ",}") + 1;
	snprintf(out, n, "%.*s%.*s%s", (int)(l - name), name, (int)strcspn(a, ",}"), a, r + 1);
}

/* Parts frozen of tensor i, and how many parts it has. */
static unsigned frozen_parts(const struct step_params *p, const char *spec, size_t i, unsigned *parts)
{
	unsigned np = p->tensor[i].nparts ? p->tensor[i].nparts : 1, hit = 0;
	for (unsigned k = 0; k < np; k++) {
		char name[256];
		part_of(p, i, p->tensor[i].nparts ? (int)k : -1, name, sizeof name);
		hit += zs_freeze_match(spec, name, p->nlayers - 2) != 0;
	}
	*parts = np;
	return hit;
}

int zs_freeze_tensor(const struct step_params *p, const char *spec, size_t i)
{
	unsigned np;
	return spec != NULL && *spec && frozen_parts(p, spec, i, &np) == np;
}

struct zs_freeze_run *zs_freeze_units(const struct step_params *p, const char *spec, int by_layer, int whole,
                                      size_t *nunits, char **cause)
{
	struct zs_freeze_run *run = zs_calloc(p->nlayers + 1, sizeof *run);
	size_t U = 0, u = SIZE_MAX;
	uint64_t end = 0; /* where unit u's run ended: a trainable tensor after a frozen one opens a second */
	int closed = 0;
	char name[256];
	for (size_t l = 0; l < p->nlayers; l++) {
		const struct step_layer *ly = &p->layer[l];
		if (U == 0 || (by_layer && ly->numel > 0)) {
			u = U++;
			run[u] = (struct zs_freeze_run){ly->offset, 0, 0};
			end = ly->offset, closed = 0;
		}
		run[u].size += ly->numel;
		uint64_t off = ly->offset;
		for (size_t i = ly->first; i < ly->first + ly->n; off += p->tensor[i++].numel) {
			unsigned np = 1, hit = spec != NULL && *spec ? frozen_parts(p, spec, i, &np) : 0;
			step_tensor_name(p, i, name, sizeof name);
			if (hit > 0 && hit < np) {
				(void)zs_fail(cause, "--freeze %s: freezes some parts of the fused tensor %s, not all (the "
				                     "engine's kernels fuse them; freeze all or none)", spec, name);
				free(run);
				return NULL;
			}
			if (hit) {
				closed = run[u].n > 0;
				continue;
			}
			if (closed || (run[u].n > 0 && off != end)) {
				(void)zs_fail(cause, "--freeze %s under --framework paper --unit %s: the trainable parameters "
				                     "of a unit are not one run of the flat vector (%s follows a frozen tensor; "
				                     "docs/schedule.md, \"Frozen parameters\")%s", spec, by_layer ? "layer" : "model", name,
				              !by_layer ? ": give --unit layer" : "");
				free(run);
				return NULL;
			}
			if (run[u].n == 0)
				run[u].off = off;
			run[u].n += p->tensor[i].numel;
			end = off + p->tensor[i].numel;
		}
	}
	for (size_t k = 0; whole && k < U; k++)
		if (run[k].n != 0 && run[k].n != run[k].size) {
			(void)zs_fail(cause, "--freeze %s under --framework paper --schemes zero3 --unit %s: unit %zu is "
			                     "part frozen, part trainable (zero3 shards its optimizer state as its params: a "
			                     "unit must be all frozen or all trainable; docs/schedule.md, \"Frozen "
			                     "parameters\")", spec, by_layer ? "layer" : "model", k);
			free(run);
			return NULL;
		}
	*nunits = U;
	return run;
}

int zs_freeze_paper_check(const struct zs_config *c, const struct zs_model *m, char **cause)
{
	if (!c->freeze[0] || c->framework != ZS_FW_PAPER)
		return 0;
	if (m == NULL)
		return zs_fail(cause, "--freeze %s under --framework paper: only with --model (a transformer: the MLP's "
		                      "layers have no Hugging Face names)", c->freeze);
	struct step_params p;
	step_params_build(&p, m);
	size_t nfrozen = 0;
	for (size_t i = 0; i < p.ntensors; i++)
		nfrozen += zs_freeze_tensor(&p, c->freeze, i) != 0;
	int zero3 = 0, bad = nfrozen == 0 || nfrozen == p.ntensors;
	for (size_t i = 0; i < c->nschemes; i++)
		for (size_t w = 0; w < c->nworld; w++)
			zero3 |= c->schemes[i] == ZS_ZERO3 && c->world[w] > 1;
	int units_bad = 0;
	for (size_t u = 0; !units_bad && u < c->nunits; u++) {
		size_t n;
		struct zs_freeze_run *run = zs_freeze_units(&p, c->freeze, c->units[u] == ZS_UNIT_LAYER, zero3, &n, cause);
		units_bad = run == NULL;
		free(run);
	}
	if (bad && !units_bad)
		(void)zs_fail(cause, "--freeze %s: freezes %s of %s's %zu parameter tensors (nothing to %s)", c->freeze,
		              nfrozen ? "every one" : "none", m->name, p.ntensors, nfrozen ? "train" : "freeze");
	bad |= units_bad;
	step_params_free(&p);
	return bad ? -1 : 0;
}

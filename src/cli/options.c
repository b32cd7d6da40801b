/*
 * options — see options.h. Hand-written rather than getopt_long: getopt
 * accepts abbreviations (a later option can change what "--lay" means),
 * and after a bad letter in a group its optind does not point at the
 * argument that was wrong, so the message blamed another one.
 */
#include "config.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/options.h"
#include "util/buf.h"
#include "util/cuda_alloc.h"
#include "util/util.h"

static const struct zs_opt *by_name(const struct zs_opt *t, const char *name, size_t len)
{
	for (; t->id != ZS_OPT_END; t++)
		if (strlen(t->name) == len && strncmp(t->name, name, len) == 0)
			return t;
	return NULL;
}

static const struct zs_opt *by_letter(const struct zs_opt *t, char c)
{
	for (; t->id != ZS_OPT_END; t++)
		if (t->letter != 0 && t->letter == c)
			return t;
	return NULL;
}

/* The one option `name` abbreviates, if exactly one. */
static const struct zs_opt *completion(const struct zs_opt *t, const char *name, size_t len)
{
	const struct zs_opt *found = NULL;
	for (; t->id != ZS_OPT_END && len > 0; t++)
		if (strncmp(t->name, name, len) == 0) {
			if (found != NULL && found->id != t->id)
				return NULL;
			found = found != NULL ? found : t;
		}
	return found;
}

static int unknown(const struct zs_opt *table, const char *cmd, const char *arg, const char *name, size_t len,
                   char **cause)
{
	const struct zs_opt *maybe = completion(table, name, len);
	if (maybe != NULL)
		return zs_fail(cause, "unknown option '%.60s' (did you mean --%s?); try 'zerosim %s --help'", arg,
		               maybe->name, cmd);
	return zs_fail(cause, "unknown option '%.60s'; try 'zerosim %s --help'", arg, cmd);
}

int zs_opts_parse(const struct zs_opt *table, int argc, char **argv, struct zs_arg **args, size_t *nargs,
                  char **cause)
{
	const char *cmd = argv[0];
	/* A group of short flags ("-qqq") is one record per letter, so the
	 * records are bounded by the characters of the arguments, not by argc. */
	size_t cap = 1;
	for (int k = 1; k < argc; k++)
		cap += strlen(argv[k]);
	struct zs_arg *out = zs_calloc(cap, sizeof *out);
	size_t n = 0;
	int i = 1;
	for (; i < argc; i++) {
		const char *a = argv[i];
		if (strcmp(a, "--") == 0) {
			i++;
			break;
		}
		if (a[0] != '-' || a[1] == '\0')
			break; /* an operand ("-" included) */
		struct zs_arg *r = &out[n];
		if (a[1] == '-') {
			const char *name = a + 2, *eq = strchr(name, '=');
			size_t len = eq != NULL ? (size_t)(eq - name) : strlen(name);
			const struct zs_opt *o = by_name(table, name, len);
			if (o == NULL) {
				char typed[80]; /* the name as typed, without its value */
				snprintf(typed, sizeof typed, "%.*s", (int)(len + 2 < 79 ? len + 2 : 79), a);
				unknown(table, cmd, typed, name, len, cause);
				goto fail;
			}
			snprintf(r->typed, sizeof r->typed, "--%s", o->name);
			r->opt = o;
			if (!o->value && eq != NULL) {
				zs_fail(cause, "option '--%s' takes no value (given '%.60s')", o->name, a);
				goto fail;
			}
			if (o->value) {
				if (eq != NULL) {
					r->value = eq + 1;
				} else if (i + 1 < argc) {
					r->value = argv[++i];
				} else {
					zs_fail(cause, "option '--%s' needs a value; try 'zerosim %s --help'", o->name, cmd);
					goto fail;
				}
			}
			if (o->value == ZS_OPT_FILE && *r->value == '\0') {
				zs_fail(cause, "--%s: the file name is empty", o->name);
				goto fail;
			}
			n++;
			if (o->id == ZS_OPT_HELP || o->id == ZS_OPT_VERSION)
				goto done;
			continue;
		}
		/* One or more short options: "-q", "-qh", "-o FILE", "-oFILE". */
		for (const char *p = a + 1; *p != '\0'; p++) {
			const struct zs_opt *o = by_letter(table, *p);
			r = &out[n];
			if (o == NULL) {
				if (p == a + 1 && p[1] != '\0' && by_name(table, a + 1, strlen(a + 1)) != NULL)
					zs_fail(cause, "unknown option '%.60s' (long options take two dashes: '-%.60s'); "
					        "try 'zerosim %s --help'", a, a, cmd);
				else if (p == a + 1)
					unknown(table, cmd, a, a + 1, strlen(a + 1), cause);
				else
					zs_fail(cause, "unknown option '-%c' in '%.60s'; try 'zerosim %s --help'", *p, a, cmd);
				goto fail;
			}
			snprintf(r->typed, sizeof r->typed, "-%c", *p);
			r->opt = o;
			n++;
			if (o->value) {
				if (p[1] != '\0') {
					r->value = p + 1;
				} else if (i + 1 < argc) {
					r->value = argv[++i];
				} else {
					zs_fail(cause, "option '-%c' needs a value; try 'zerosim %s --help'", *p, cmd);
					goto fail;
				}
				if (o->value == ZS_OPT_FILE && *r->value == '\0') {
					zs_fail(cause, "-%c: the file name is empty", *p);
					goto fail;
				}
				break;
			}
			if (o->id == ZS_OPT_HELP || o->id == ZS_OPT_VERSION)
				goto done;
		}
	}
	if (i < argc) {
		zs_fail(cause, "unexpected argument '%.60s'; try 'zerosim %s --help'", argv[i], cmd);
		goto fail;
	}
done:
	*args = out;
	*nargs = n;
	return 0;
fail:
	free(out);
	return -1;
}

const struct zs_arg *zs_opts_last(const struct zs_arg *args, size_t nargs, int id)
{
	const struct zs_arg *last = NULL;
	for (size_t i = 0; i < nargs; i++)
		if (args[i].opt->id == id)
			last = &args[i];
	return last;
}

int zs_opts_sets(const struct zs_arg *args, size_t nargs, const char *key)
{
	for (size_t i = 0; i < nargs; i++) {
		const struct zs_opt *o = args[i].opt;
		if (o->id == ZS_OPT_CONFIG && strcmp(o->key != NULL ? o->key : o->name, key) == 0)
			return 1;
	}
	return 0;
}

/* The zs_config key an option sets, or NULL for a command's own. */
static const char *config_key(const struct zs_opt *o)
{
	return o->id != ZS_OPT_CONFIG ? NULL : o->key != NULL ? o->key : o->name;
}

/* Two names of one setting with different values ("--ddp-no-sync on
 * --fsdp-no-sync off"): the user meant two things, and letting the last
 * win would silently drop one; the same option given twice is a plain
 * override. 0, or -1 with *cause naming both as typed. */
static int names_agree(const struct zs_arg *args, size_t nargs, char **cause)
{
	for (size_t i = 0; i < nargs; i++)
		for (size_t j = 0; j < i; j++) {
			const char *ki = config_key(args[i].opt), *kj = config_key(args[j].opt);
			if (ki != NULL && kj != NULL && args[i].opt != args[j].opt && strcmp(ki, kj) == 0 &&
			    strcmp(args[i].value, args[j].value) != 0)
				return zs_fail(cause, "%s %.40s and %s %.40s: two names of one setting with different values "
				               "(give one)", args[j].typed, args[j].value, args[i].typed, args[i].value);
		}
	return 0;
}

void zs_opts_name_as_typed(const struct zs_arg *args, size_t nargs, char **cause)
{
	const struct zs_opt *last = NULL;
	if (*cause == NULL || strncmp(*cause, "--", 2) != 0)
		return;
	for (size_t i = 0; i < nargs; i++) {
		const char *k = config_key(args[i].opt);
		size_t n = k != NULL ? strlen(k) : 0;
		if (k != NULL && strncmp(*cause + 2, k, n) == 0 && (*cause)[2 + n] == ':')
			last = args[i].opt;
	}
	if (last == NULL || last->key == NULL)
		return; /* not given on the command line, or by its own name */
	char *named = zs_asprintf("--%s%s", last->name, *cause + 2 + strlen(last->key));
	free(*cause);
	*cause = named;
}

void zs_opts_name_source(const struct zs_arg *args, size_t nargs, zs_keys spec_keys, const char *spec_path,
                         zs_keys case_keys, const char *case_path, char **cause)
{
	if (*cause == NULL)
		return;
	const char *m = *cause, *end = strstr(m, ": ");
	if (end == NULL)
		end = m + strlen(m);
	struct zs_buf b = {0};
	int changed = 0;
	for (const char *at = m; *at != '\0';) {
		int dashes = at < end && strncmp(at, "--", 2) == 0 && (at == m || at[-1] == ' ' || at[-1] == '(');
		size_t n = dashes ? strspn(at + 2, "abcdefghijklmnopqrstuvwxyz0123456789-") : 0;
		int k = dashes ? zs_config_key(at + 2, n) : -1;
		char name[48];
		if (k >= 0)
			snprintf(name, sizeof name, "%.*s", (int)n, at + 2);
		int from_case = k >= 0 && case_path != NULL && (case_keys & ZS_KEY_BIT(k)) != 0;
		int from_spec = k >= 0 && spec_path != NULL && (spec_keys & ZS_KEY_BIT(k)) != 0;
		if ((from_case || from_spec) && !zs_opts_sets(args, nargs, name)) {
			for (char *d = name; from_case && *d != '\0'; d++)
				*d = *d == '-' ? '_' : *d;
			zs_buf_printf(&b, "%s's \"%s\"", from_case ? case_path : spec_path,
			              !from_case && k == ZS_KEY_UNITS ? "units" : name);
			at += 2 + n;
			changed = 1;
			continue;
		}
		zs_buf_printf(&b, "%c", *at++);
	}
	if (!changed) {
		zs_buf_free(&b);
		return;
	}
	free(*cause);
	*cause = zs_buf_take(&b);
}

int zs_opts_config(struct zs_config *c, const struct zs_arg *args, size_t nargs, char **cause)
{
	if (names_agree(args, nargs, cause) != 0)
		return -1;
	const struct zs_arg *spec = zs_opts_last(args, nargs, ZS_OPT_SPEC);
	if (spec != NULL && zs_config_load_spec(c, spec->value, cause) != 0)
		return -1;
	for (size_t i = 0; i < nargs; i++) {
		const struct zs_opt *o = args[i].opt;
		if (o->id == ZS_OPT_CONFIG &&
		    zs_config_set(c, o->key != NULL ? o->key : o->name, args[i].value, cause) != 0)
			return -1;
	}
	/* a default that follows the step: the plain loop (--wrapper none)
	 * is one process, N = 1 where neither --world nor a spec lists N */
	if (c->wrapper == ZS_WRAPPER_NONE && !(c->given & ZS_KEY_BIT(ZS_KEY_WORLD))) {
		c->nworld = 1;
		c->world[0] = 1;
	}
	return 0;
}

int zs_opts_cublas_workspace(const char *v, struct cuda_alloc_opts *o, char **cause)
{
	double bytes = 0;
	if (v == NULL)
		return 0;
	/* 0: CUBLAS_WORKSPACE_CONFIG=:0:0, no workspace (a size is at least
	 * a byte elsewhere) */
	char *end = NULL;
	double zero = strtod(v, &end);
	int is_zero = end != v && zero == 0 && (*end == '\0' || strcmp(end, "B") == 0);
	if (!is_zero && zs_parse_bytes(v, &bytes, cause) < 0) {
		char *why = *cause;
		*cause = zs_asprintf("--cublas-workspace: %s", why);
		free(why);
		return -1;
	}
	o->cublas_workspace = (uint64_t)bytes;
	return 0;
}

void zs_opts_print_version(void)
{
	printf("zerosim %s\n", PACKAGE_VERSION);
}

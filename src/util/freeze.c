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
			*why = "blocks:A-B, whole numbers, A <= B; one block N is blocks:N-N";
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

/* The next term of a writable copy of spec from *at (cut at its comma,
 * trimmed of blanks; *at moved past it), or NULL after the last. */
static char *next_term(char **at)
{
	char *t = *at;
	if (t == NULL)
		return NULL;
	char *next = strchr(t, ',');
	if (next != NULL)
		*next++ = 0;
	*at = next;
	while (isspace((unsigned char)*t))
		t++;
	char *e = t + strlen(t);
	while (e > t && isspace((unsigned char)e[-1]))
		*--e = 0;
	return t;
}

/* Matches name against each term of spec (trimmed of blanks); 1 at the
 * first term that matches, 0 when none does, -1 with *cause when spec or a
 * term of it is empty (a user's slip: `--freeze ''`, `embeddings,`) or a
 * term is malformed. */
static int each_term(const char *spec, const char *name, uint64_t blocks, char **cause)
{
	char buf[ZS_FREEZE_MAX + 1];
	size_t n = strlen(spec);
	if (n > ZS_FREEZE_MAX)
		return zs_fail(cause, "--freeze: the pattern is %zu characters long (at most %d)", n, ZS_FREEZE_MAX);
	if (strspn(spec, " \t\n\v\f\r") == n)
		return zs_fail(cause, "--freeze: the pattern is empty (give terms such as embeddings or blocks:0-1)");
	memcpy(buf, spec, n + 1);
	for (char *at = buf, *t; (t = next_term(&at)) != NULL;) {
		if (!*t)
			return zs_fail(cause, "--freeze: '%.60s' has an empty term", spec);
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

int zs_freeze_unmatched(const char *spec, const char *const *names, size_t n, uint64_t blocks, char *out, size_t outn)
{
	char buf[ZS_FREEZE_MAX + 1];
	snprintf(buf, sizeof buf, "%s", spec);
	for (char *at = buf, *t; (t = next_term(&at)) != NULL;) {
		const char *why = NULL;
		int hit = 0;
		for (size_t i = 0; i < n && !hit; i++)
			hit = term_match(t, names[i], blocks, &why) > 0;
		if (!hit) {
			snprintf(out, outn, "%s", t);
			return 1;
		}
	}
	if (outn > 0)
		out[0] = '\0';
	return 0;
}

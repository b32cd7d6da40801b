/*
 * buf — growable string for text outputs. See buf.h.
 */
#include "config.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/buf.h"
#include "util/util.h"

static void reserve(struct zs_buf *b, size_t extra)
{
	if (b->len + extra + 1 <= b->cap)
		return;
	b->cap = (b->len + extra + 1) * 2;
	char *s = zs_malloc(b->cap);
	if (b->s != NULL)
		memcpy(s, b->s, b->len + 1);
	else
		s[0] = '\0';
	free(b->s);
	b->s = s;
}

void zs_buf_printf(struct zs_buf *b, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	int n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (n <= 0)
		return;
	reserve(b, (size_t)n);
	va_start(ap, fmt);
	vsnprintf(b->s + b->len, (size_t)n + 1, fmt, ap);
	va_end(ap);
	b->len += (size_t)n;
}

const char *zs_buf_str(const struct zs_buf *b)
{
	return b->s != NULL ? b->s : "";
}

int zs_buf_write(const struct zs_buf *b, const char *path, char **cause)
{
	return zs_write_atomic(path, zs_buf_str(b), b->len, cause);
}

char *zs_buf_take(struct zs_buf *b)
{
	char *s = b->s != NULL ? b->s : zs_strdup("");

	*b = (struct zs_buf){0};
	return s;
}

void zs_buf_free(struct zs_buf *b)
{
	free(b->s);
	*b = (struct zs_buf){0};
}

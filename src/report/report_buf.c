/*
 * report_buf — growable string for the report's text outputs.
 */
#include "config.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "report/report_buf.h"
#include "util/util.h"

static void reserve(struct report_buf *b, size_t extra)
{
	char *s;

	if (b->len + extra + 1 <= b->cap)
		return;
	b->cap = (b->len + extra + 1) * 2;
	s = zs_malloc(b->cap);
	if (b->s != NULL)
		memcpy(s, b->s, b->len + 1);
	else
		s[0] = '\0';
	free(b->s);
	b->s = s;
}

void report_buf_printf(struct report_buf *b, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (n <= 0)
		return;
	reserve(b, (size_t)n);
	va_start(ap, fmt);
	vsnprintf(b->s + b->len, (size_t)n + 1, fmt, ap);
	va_end(ap);
	b->len += (size_t)n;
}

void report_buf_tex(struct report_buf *b, const char *s)
{
	for (; *s != '\0'; s++) {
		switch (*s) {
		case '%': case '&': case '#': case '_': case '$': case '{': case '}':
			report_buf_printf(b, "\\%c", *s);
			break;
		case '\\': report_buf_printf(b, "\\textbackslash{}"); break;
		case '~': report_buf_printf(b, "\\textasciitilde{}"); break;
		case '^': report_buf_printf(b, "\\textasciicircum{}"); break;
		/* The default OT1 font has no < and > in text. */
		case '<': report_buf_printf(b, "\\textless{}"); break;
		case '>': report_buf_printf(b, "\\textgreater{}"); break;
		default: report_buf_printf(b, "%c", *s); break;
		}
	}
}

const char *report_buf_str(const struct report_buf *b)
{
	return b->s != NULL ? b->s : "";
}

int report_buf_write(const struct report_buf *b, const char *path, char **cause)
{
	return zs_write_atomic(path, report_buf_str(b), b->len, cause);
}

void report_buf_free(struct report_buf *b)
{
	free(b->s);
	b->s = NULL;
	b->len = b->cap = 0;
}

/*
 * report_buf — LaTeX escaping into a zs_buf. See report_buf.h.
 */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include "report/report_buf.h"

void report_buf_tex(struct zs_buf *b, const char *s)
{
	for (; *s != '\0'; s++) {
		switch (*s) {
		case '%': case '&': case '#': case '_': case '$': case '{': case '}':
			zs_buf_printf(b, "\\%c", *s);
			break;
		case '\\': zs_buf_printf(b, "\\textbackslash{}"); break;
		case '~': zs_buf_printf(b, "\\textasciitilde{}"); break;
		case '^': zs_buf_printf(b, "\\textasciicircum{}"); break;
		/* The default OT1 font has no < and > in text. */
		case '<': zs_buf_printf(b, "\\textless{}"); break;
		case '>': zs_buf_printf(b, "\\textgreater{}"); break;
		default: zs_buf_printf(b, "%c", *s); break;
		}
	}
}

void report_buf_grouped(struct zs_buf *b, double v)
{
	char s[40];
	size_t n, i;

	snprintf(s, sizeof s, "%.0f", v);
	n = strlen(s);
	for (i = 0; i < n; i++) {
		if (i > 0 && s[i - 1] != '-' && (n - i) % 3 == 0)
			zs_buf_printf(b, "\\,");
		zs_buf_printf(b, "%c", s[i]);
	}
}

size_t report_items_count(const struct report_items *it)
{
	size_t n = 0;
	for (size_t i = 0; i < it->n; i++)
		n += it->pick(it->ctx, i) != 0;
	return n;
}

void report_items(struct zs_buf *b, int tex, const char *prefix, const struct report_items *it)
{
	if (report_items_count(it) == 0) /* LaTeX refuses an empty list */
		return;
	if (tex)
		zs_buf_printf(b, "\\begin{itemize}\\footnotesize\n");
	for (size_t i = 0; i < it->n; i++) {
		if (!it->pick(it->ctx, i))
			continue;
		struct zs_buf one = {0};
		it->line(it->ctx, i, &one);
		if (tex) {
			zs_buf_printf(b, "\\item ");
			report_buf_tex(b, zs_buf_str(&one));
		} else {
			zs_buf_printf(b, "%s: %s", prefix, zs_buf_str(&one));
		}
		zs_buf_printf(b, "\n");
		zs_buf_free(&one);
	}
	if (tex)
		zs_buf_printf(b, "\\end{itemize}\n");
}

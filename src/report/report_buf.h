/*
 * report_buf — LaTeX escaping for the report's text outputs, printed into
 * the shared growable string (util/buf.h), and the lists of lines that
 * flags.txt and flags.tex both give (the process overhead, host bytes).
 */
#ifndef ZS_REPORT_BUF_H
#define ZS_REPORT_BUF_H

#include <stddef.h>

#include "util/buf.h"

/* Append s with LaTeX's special characters escaped. */
void report_buf_tex(struct zs_buf *b, const char *s);

/* A whole number with LaTeX's thin spaces between groups of three
 * digits. */
void report_buf_grouped(struct zs_buf *b, double v);

/* A list of items: item i < n is in it where pick(ctx, i), and line(ctx,
 * i, b) prints it. */
struct report_items {
	const void *ctx;
	size_t n;
	int (*pick)(const void *ctx, size_t i);
	void (*line)(const void *ctx, size_t i, struct zs_buf *b);
};

/* How many items are picked. */
size_t report_items_count(const struct report_items *it);

/* Each picked item as a line of flags.txt, "PREFIX: LINE\n" (tex 0), or
 * as an \item of an itemize in flags.tex, escaped, the list opened and
 * closed here (tex 1); nothing when none is picked. */
void report_items(struct zs_buf *b, int tex, const char *prefix, const struct report_items *it);

#endif

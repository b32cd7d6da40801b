/*
 * report_buf — a growable string the report's writers print into before
 * one atomic write (zs_write_atomic), so no output is ever half written.
 */
#ifndef ZS_REPORT_BUF_H
#define ZS_REPORT_BUF_H

#include <stddef.h>

struct report_buf {
	char *s;        /* NUL-terminated; NULL until the first print */
	size_t len, cap;
};

/* Append printf output. Out of memory is fatal (zs_malloc). */
void report_buf_printf(struct report_buf *b, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* Append s with LaTeX's special characters escaped. */
void report_buf_tex(struct report_buf *b, const char *s);

/* The text so far ("" when empty); valid until the next print. */
const char *report_buf_str(const struct report_buf *b);

/* Write the buffer atomically to path. Returns 0 or -1 with *cause. */
int report_buf_write(const struct report_buf *b, const char *path, char **cause);

/* Free the text and empty the buffer. */
void report_buf_free(struct report_buf *b);

#endif

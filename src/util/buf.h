/*
 * buf — a growable string that writers print into before one atomic write
 * (zs_write_atomic), so that no output is ever half written. Used by the
 * theory's text table and by every text output of the report.
 */
#ifndef ZS_BUF_H
#define ZS_BUF_H

#include <stddef.h>

struct zs_buf {
	char *s;        /* NUL-terminated; NULL until the first print */
	size_t len, cap;
};

/* Append printf output. Out of memory is fatal (zs_malloc). */
void zs_buf_printf(struct zs_buf *b, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* The text so far ("" when empty); valid until the next print. */
const char *zs_buf_str(const struct zs_buf *b);

/* Write the buffer atomically to path. Returns 0 or -1 with *cause. */
int zs_buf_write(const struct zs_buf *b, const char *path, char **cause);

/* Hand the text over: the caller frees the result with free() ("" when
 * nothing was printed, never NULL). The buffer is left empty. */
char *zs_buf_take(struct zs_buf *b);

/* Free the text and empty the buffer. */
void zs_buf_free(struct zs_buf *b);

#endif

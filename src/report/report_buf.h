/*
 * report_buf — LaTeX escaping for the report's text outputs, printed into
 * the shared growable string (util/buf.h).
 */
#ifndef ZS_REPORT_BUF_H
#define ZS_REPORT_BUF_H

#include "util/buf.h"

/* Append s with LaTeX's special characters escaped. */
void report_buf_tex(struct zs_buf *b, const char *s);

#endif

/*
 * report_buf — LaTeX escaping into a zs_buf. See report_buf.h.
 */
#include "config.h"

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

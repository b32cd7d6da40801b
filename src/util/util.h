/*
 * util — small helpers shared by every stage: fatal allocation, messages,
 * whole-file reads, atomic writes, and checked access to cJSON trees.
 * Nothing here knows about the engine, the theory or the report.
 *
 * Functions that can fail return 0 on success or -1 on failure and, when
 * `cause` is not NULL, set *cause to one sentence for the user (no trailing
 * newline). The caller frees *cause with free().
 */
#ifndef ZS_UTIL_H
#define ZS_UTIL_H

#include <stddef.h>
#include <stdarg.h>
#include <cjson/cJSON.h>

/* Exit statuses of every command (docs/design.md). */
#define ZS_EXIT_OK 0
#define ZS_EXIT_RUNTIME 1
#define ZS_EXIT_USAGE 2

/* Out of memory is fatal, with file and line, through one handler
 * (redis's zmalloc_oom_handler): "zerosim: out of memory at FILE:LINE" on
 * stderr and exit status 1. Every allocation of the code goes through
 * these, or calls zs_oom when a library reports that it could not
 * allocate (cJSON, libxxhash). */
#define zs_malloc(n) zs_malloc_at((n), __FILE__, __LINE__)
#define zs_calloc(n, s) zs_calloc_at((n), (s), __FILE__, __LINE__)
#define zs_realloc(p, n) zs_realloc_at((p), (n), __FILE__, __LINE__)
#define zs_strdup(s) zs_strdup_at((s), __FILE__, __LINE__)
void zs_oom(const char *file, int line) __attribute__((noreturn));
void *zs_malloc_at(size_t n, const char *file, int line);
void *zs_calloc_at(size_t n, size_t size, const char *file, int line);
void *zs_realloc_at(void *p, size_t n, const char *file, int line);
char *zs_strdup_at(const char *s, const char *file, int line);

/* printf into a fresh string; the caller frees it. Never NULL. */
char *zs_asprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Set *cause (if cause != NULL) to a formatted sentence; evaluates to -1.
 * A macro (a GNU statement expression) so that the -1 is visible at every
 * call, to the compiler and to static analysers alike. */
void zs_set_cause(char **cause, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
#define zs_fail(...) ({ zs_set_cause(__VA_ARGS__); -1; })

/* The shortest decimal text of v that reads back to v ("0.999", not
 * "0.99899999999999999"), into buf of n bytes. Returns buf. */
char *zs_number_text(double v, char *buf, size_t n);

/* Print "PREFIX: MESSAGE" as one line on stderr: control characters in the
 * message (a newline in a file name or an option value) print as '?'. */
void zs_print_error(const char *prefix, const char *message);

/* Read a whole regular file into a NUL-terminated buffer the caller frees.
 * Anything else (a FIFO, a device, a folder) is refused without blocking. */
int zs_read_file(const char *path, char **out, size_t *len, char **cause);
/* Open an input for reading the same way: a descriptor (blocking reads)
 * and its *st, or -1 with *cause ("PATH: is a directory"). */
struct stat;
int zs_open_regular(const char *path, struct stat *st, char **cause);

/* Outputs. One family of functions writes every output file:
 *   zs_out_open   where PATH goes (below); a missing folder is an error
 *   zs_out_write  append bytes (any number of calls)
 *   zs_out_commit flush and put the file in place; frees the handle
 *   zs_out_abort  drop it, leaving the target as it was; frees the handle
 * and zs_write_atomic(path, data, len) is the three in one.
 *
 * A regular file (or a new one) is written to an unnamed O_TMPFILE file in
 * its folder and linked into place at commit, replacing the old one
 * atomically: a failure or a kill at any point (even SIGKILL) leaves the
 * target untouched, and no temporary file but in the instant of the final
 * rename. The new file keeps the mode (and, where allowed, the owner) of
 * the one it replaces. A symbolic link is written through to its target,
 * created if missing. "-", /dev/stdout, /dev/stderr, /dev/fd/N and
 * /proc/self/fd/N are that descriptor as it stands (appending where it was
 * opened so); a device, FIFO or socket is written in place: these are the
 * outputs an interruption can leave half-written. Where O_TMPFILE is not
 * supported, a named temporary file (.zerosim.tmpXXXXXX) is renamed into
 * place, with SIGINT, SIGTERM, SIGHUP and SIGQUIT held back meanwhile
 * (zs_signals_init's handlers remove the file if another thread gets one). */
struct zs_out;
int zs_out_open(const char *path, struct zs_out **out, char **cause);
int zs_out_write(struct zs_out *o, const void *data, size_t len, char **cause);
int zs_out_commit(struct zs_out *o, char **cause);
void zs_out_abort(struct zs_out *o);
int zs_write_atomic(const char *path, const char *data, size_t len, char **cause);

/* Signal dispositions every command wants (zs_out_open sets them too):
 * SIGXFSZ ignored (a file over ulimit -f is a write error, EFBIG), SIGPIPE
 * default (a closed pipe ends the run quietly), SIGXCPU (ulimit -t) one
 * line on stderr, any named temporary file removed, exit 1. SIGINT,
 * SIGTERM, SIGHUP and SIGQUIT, unless ignored or handled already: any named
 * temporary file removed, then the process dies of the signal. */
void zs_signals_init(void);

/* Where output `path` would be written: *fd >= 0 for a descriptor's name
 * ("-", /dev/stdout...); else *target (the caller frees it) is the file,
 * symbolic links followed even when dangling, its folder resolved. -1 when
 * the folder does not exist (then *target is the path with the links
 * followed, for the message). The caller frees *target in both cases. */
int zs_output_resolve(const char *path, char **target, int *fd);

/* Nonzero if both paths name the same existing file (same device and
 * inode: through links, "./x" and "x" alike). */
int zs_same_file(const char *a, const char *b);

/* No output may replace an input or another output, existing or not:
 * compared by resolved path and by device and inode. `opt` names each for
 * the message ("--out"); NULL paths are skipped. */
struct zs_path {
	const char *opt, *path;
};
int zs_check_paths(const struct zs_path *in, size_t nin, const struct zs_path *out, size_t nout, char **cause);

/* Parse the JSON file at `path` (any JSON value; no NUL byte, nothing
 * after it; every number in JSON's own grammar). The caller frees *out
 * with cJSON_Delete(). */
int zs_json_read(const char *path, cJSON **out, char **cause);

/* Parse the JSON file at `path` and check that its "format" equals
 * `format` (e.g. "zerosim-measured/1"), or one of a list ("zerosim-case/2
 * or zerosim-case/1"). On success *out is the tree; the caller frees it
 * with cJSON_Delete(). */
int zs_json_load(const char *path, const char *format, cJSON **out, char **cause);

/* `root` printed (formatted), every number as text that reads back to the
 * same double; the caller frees it with free(). */
char *zs_json_print(const cJSON *root);

/* Print `root` as zs_json_print does and write it atomically to `path`. */
int zs_json_write(const char *path, const cJSON *root, char **cause);

/* Checked getters. `where` names the object for messages ("runs[3]").
 * A missing key, a wrong type, or a non-finite number is an error. */
int zs_json_number(const cJSON *obj, const char *key, const char *where, double *out, char **cause);
/* An integer in [min, max], given as a JSON number with no fraction. */
int zs_json_uint(const cJSON *obj, const char *key, const char *where, double min, double max,
                 unsigned long long *out, char **cause);
/* A string; *out points into the tree. */
int zs_json_string(const cJSON *obj, const char *key, const char *where, const char **out, char **cause);
/* An array or object; *out points into the tree. */
int zs_json_array(const cJSON *obj, const char *key, const char *where, const cJSON **out, char **cause);
int zs_json_object(const cJSON *obj, const char *key, const char *where, const cJSON **out, char **cause);

/* Add a number that is an exact integer byte count, or a double. */
cJSON *zs_json_add_number(cJSON *obj, const char *key, double v);

/* per_rank's "marks" into per: an array of n objects, rank r's filled by
 * fill(obj, r, ctx) with its marks (label: bytes, in the step's order).
 * The one writer of measured.json's (engine/measure_json.c: what each
 * rank's tracker held there) and theory.json's (theory/theory_autograd.c:
 * what each rank's walk sums), which report and the tests read alike. */
void zs_json_rank_marks(cJSON *per, unsigned n, void (*fill)(cJSON *obj, unsigned rank, const void *ctx),
                        const void *ctx);

/* Point cJSON's allocations at zs_malloc, so that running out of memory
 * inside cJSON is fatal with one line and cJSON_Create* and cJSON_Add*
 * never return NULL (their callers do not check). Call once at start-up,
 * before any cJSON call: every binary that uses cJSON does. */
void zs_json_init(void);

#endif

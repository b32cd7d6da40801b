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

/* Print "PREFIX: MESSAGE" as one line on stderr: control characters in the
 * message (a newline in a file name or an option value) print as '?'. */
void zs_print_error(const char *prefix, const char *message);

/* Read a whole file into a NUL-terminated buffer the caller frees. */
int zs_read_file(const char *path, char **out, size_t *len, char **cause);

/* Write `len` bytes to `path` through a temporary file in the same folder,
 * flushed and renamed into place: a failure never leaves a partial file and
 * never touches an existing one. */
int zs_write_atomic(const char *path, const char *data, size_t len, char **cause);

/* Nonzero if both paths name the same existing file (same device and
 * inode: through links, "./x" and "x" alike). */
int zs_same_file(const char *a, const char *b);

/* Parse the JSON file at `path` (any JSON value; no NUL byte, nothing
 * after it). The caller frees *out with cJSON_Delete(). */
int zs_json_read(const char *path, cJSON **out, char **cause);

/* Parse the JSON file at `path` and check that its "format" equals
 * `format` (e.g. "zerosim-measured/1"). On success *out is the tree; the
 * caller frees it with cJSON_Delete(). */
int zs_json_load(const char *path, const char *format, cJSON **out, char **cause);

/* Print `root` (formatted) and write it atomically to `path`. */
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

#endif

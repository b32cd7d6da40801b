/*
 * util — see util.h. The atomic write follows the usual recipe: a mkstemp
 * file next to the target, write, fsync, rename (POSIX guarantees rename
 * replaces the target atomically within one file system), with SIGINT,
 * SIGTERM, SIGHUP and SIGQUIT held back from mkstemp to rename.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/util.h"

void zs_oom(const char *file, int line)
{
	fprintf(stderr, "zerosim: out of memory at %s:%d\n", file, line);
	exit(ZS_EXIT_RUNTIME);
}

void *zs_malloc_at(size_t n, const char *file, int line)
{
	void *p = malloc(n ? n : 1);
	if (p == NULL)
		zs_oom(file, line);
	return p;
}

void *zs_calloc_at(size_t n, size_t size, const char *file, int line)
{
	void *p = calloc(n ? n : 1, size ? size : 1);
	if (p == NULL)
		zs_oom(file, line);
	return p;
}

void *zs_realloc_at(void *p, size_t n, const char *file, int line)
{
	void *q = realloc(p, n ? n : 1);
	if (q == NULL)
		zs_oom(file, line);
	return q;
}

char *zs_strdup_at(const char *s, const char *file, int line)
{
	size_t n = strlen(s) + 1;
	char *d = zs_malloc_at(n, file, line);
	memcpy(d, s, n);
	return d;
}

static char *vasprintf_or_die(const char *fmt, va_list ap)
{
	va_list aq;
	va_copy(aq, ap);
	int n = vsnprintf(NULL, 0, fmt, aq);
	va_end(aq);
	if (n < 0)
		n = 0;
	char *s = zs_malloc((size_t)n + 1);
	vsnprintf(s, (size_t)n + 1, fmt, ap);
	return s;
}

char *zs_asprintf(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	char *s = vasprintf_or_die(fmt, ap);
	va_end(ap);
	return s;
}

void zs_set_cause(char **cause, const char *fmt, ...)
{
	if (cause != NULL) {
		va_list ap;
		va_start(ap, fmt);
		free(*cause);
		*cause = vasprintf_or_die(fmt, ap);
		va_end(ap);
		/* A cause is one line on stderr, even when it quotes a file or an
		 * option that holds a newline or another control character. */
		for (char *c = *cause; *c != '\0'; c++)
			if ((unsigned char)*c < 0x20 || *c == 0x7f)
				*c = '?';
	}
}

/* Far above any file zerosim writes or reads (a case file of 60 million
 * weights); /dev/zero or a runaway file stops here, not at the end of the
 * machine's memory. */
#define ZS_MAX_INPUT ((size_t)1 << 30)

void zs_print_error(const char *prefix, const char *message)
{
	fprintf(stderr, "%s: ", prefix);
	for (const char *c = message; *c != '\0'; c++)
		fputc((unsigned char)*c < 0x20 || *c == 0x7f ? '?' : *c, stderr);
	fputc('\n', stderr);
}

int zs_read_file(const char *path, char **out, size_t *len, char **cause)
{
	FILE *f = fopen(path, "rb");
	if (f == NULL)
		return zs_fail(cause, "%s: %s", path, strerror(errno));
	struct stat st;
	if (fstat(fileno(f), &st) == 0 && S_ISDIR(st.st_mode)) {
		fclose(f);
		return zs_fail(cause, "%s: is a directory", path);
	}
	size_t cap = 65536, n = 0;
	char *buf = zs_malloc(cap);
	for (;;) {
		if (n + 1 >= cap) {
			if (cap >= ZS_MAX_INPUT) {
				free(buf);
				fclose(f);
				return zs_fail(cause, "%s: larger than %zu MiB, more than any zerosim file", path,
				               (size_t)(ZS_MAX_INPUT >> 20));
			}
			cap *= 2;
			char *nb = realloc(buf, cap);
			if (nb == NULL) {
				free(buf);
				fclose(f);
				return zs_fail(cause, "%s: out of memory reading the file", path);
			}
			buf = nb;
		}
		size_t got = fread(buf + n, 1, cap - n - 1, f);
		n += got;
		if (got == 0)
			break;
	}
	int err = ferror(f);
	fclose(f);
	if (err) {
		free(buf);
		return zs_fail(cause, "%s: read error", path);
	}
	buf[n] = '\0';
	*out = buf;
	if (len != NULL)
		*len = n;
	return 0;
}

/* write(2) until all of it is written; -1 with errno set on failure. */
static int write_all(int fd, const char *data, size_t len)
{
	size_t done = 0;
	while (done < len) {
		ssize_t w = write(fd, data + done, len - done);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
			return -1;
		done += (size_t)w;
	}
	return 0;
}

/* A device, FIFO or socket (/dev/full, /dev/stdout) is written in place:
 * renaming a temporary file over it would replace the node itself. */
static int write_in_place(const char *path, const char *data, size_t len, char **cause)
{
	int fd = open(path, O_WRONLY | O_NOCTTY);
	if (fd < 0)
		return zs_fail(cause, "cannot write %s: %s", path, strerror(errno));
	if (write_all(fd, data, len) != 0) {
		int e = errno;
		close(fd);
		return zs_fail(cause, "cannot write %s: %s", path, strerror(e));
	}
	if (close(fd) != 0)
		return zs_fail(cause, "cannot write %s: %s", path, strerror(errno));
	return 0;
}

int zs_same_file(const char *a, const char *b)
{
	struct stat sa, sb;
	return a != NULL && b != NULL && stat(a, &sa) == 0 && stat(b, &sb) == 0 && sa.st_dev == sb.st_dev &&
	       sa.st_ino == sb.st_ino;
}

int zs_write_atomic(const char *path, const char *data, size_t len, char **cause)
{
	/* Through a symbolic link, replace its target, not the link. */
	struct stat lst;
	if (lstat(path, &lst) == 0 && S_ISLNK(lst.st_mode)) {
		char *target = realpath(path, NULL);
		if (target != NULL) {
			int r = zs_write_atomic(target, data, len, cause);
			free(target);
			return r;
		}
	}
	struct stat st;
	if (stat(path, &st) == 0) {
		if (S_ISDIR(st.st_mode))
			return zs_fail(cause, "%s: is a directory", path);
		if (!S_ISREG(st.st_mode))
			return write_in_place(path, data, len, cause);
	}
	const char *slash = strrchr(path, '/');
	char *dir = slash ? zs_asprintf("%.*s", (int)(slash - path + 1), path) : zs_strdup("");
	char *tmp = zs_asprintf("%s.%s.tmpXXXXXX", *dir ? dir : "", "zerosim");
	free(dir);
	/* From mkstemp to rename, an interrupt waits: the temporary file is
	 * then either renamed or removed before the signal is delivered. */
	sigset_t stop, old;
	sigemptyset(&stop);
	sigaddset(&stop, SIGINT);
	sigaddset(&stop, SIGTERM);
	sigaddset(&stop, SIGHUP);
	sigaddset(&stop, SIGQUIT);
	pthread_sigmask(SIG_BLOCK, &stop, &old);
	int fd = mkstemp(tmp);
	if (fd < 0) {
		int e = errno;
		pthread_sigmask(SIG_SETMASK, &old, NULL);
		free(tmp);
		return zs_fail(cause, "cannot write %s: %s", path, strerror(e));
	}
	if (write_all(fd, data, len) != 0)
		goto fail;
	if (fsync(fd) != 0 && errno != EINVAL)
		goto fail;
	/* mkstemp makes 0600 files; outputs are ordinary files. */
	mode_t mask = umask(0);
	umask(mask);
	if (fchmod(fd, 0666 & ~mask) != 0)
		goto fail;
	if (close(fd) != 0) {
		fd = -1;
		goto fail;
	}
	fd = -1;
	if (rename(tmp, path) != 0)
		goto fail;
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	free(tmp);
	return 0;
fail:;
	int e = errno;
	if (fd >= 0)
		close(fd);
	unlink(tmp);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	free(tmp);
	return zs_fail(cause, "cannot write %s: %s", path, strerror(e));
}

int zs_json_read(const char *path, cJSON **out, char **cause)
{
	char *text = NULL;
	size_t len = 0;
	if (zs_read_file(path, &text, &len, cause) != 0)
		return -1;
	if (strlen(text) != len) {
		free(text);
		return zs_fail(cause, "%s: not JSON (it contains a NUL byte)", path);
	}
	const char *end = NULL;
	cJSON *root = cJSON_ParseWithOpts(text, &end, 1);
	if (root == NULL) {
		size_t at = end ? (size_t)(end - text) : 0;
		free(text);
		return zs_fail(cause, "%s: not valid JSON (near byte %zu)", path, at);
	}
	free(text);
	*out = root;
	return 0;
}

int zs_json_load(const char *path, const char *format, cJSON **out, char **cause)
{
	cJSON *root;
	if (zs_json_read(path, &root, cause) != 0)
		return -1;
	if (!cJSON_IsObject(root)) {
		cJSON_Delete(root);
		return zs_fail(cause, "%s: not a zerosim file (the top level is not a JSON object)", path);
	}
	const cJSON *f = cJSON_GetObjectItemCaseSensitive(root, "format");
	if (!cJSON_IsString(f)) {
		cJSON_Delete(root);
		return zs_fail(cause, "%s: this file has no \"format\" string, this zerosim reads %s", path, format);
	}
	if (strcmp(f->valuestring, format) != 0) {
		int r = zs_fail(cause, "%s: this file is format %.80s, this zerosim reads %s", path, f->valuestring, format);
		cJSON_Delete(root);
		return r;
	}
	*out = root;
	return 0;
}

int zs_json_write(const char *path, const cJSON *root, char **cause)
{
	char *text = cJSON_Print(root);
	if (text == NULL)
		return zs_fail(cause, "cannot write %s: out of memory printing JSON", path);
	size_t n = strlen(text);
	char *withnl = zs_malloc(n + 2);
	memcpy(withnl, text, n);
	withnl[n] = '\n';
	withnl[n + 1] = '\0';
	cJSON_free(text);
	int r = zs_write_atomic(path, withnl, n + 1, cause);
	free(withnl);
	return r;
}

static const cJSON *get(const cJSON *obj, const char *key, const char *where, char **cause)
{
	if (!cJSON_IsObject(obj)) {
		zs_fail(cause, "%s is not a JSON object", where);
		return NULL;
	}
	const cJSON *it = cJSON_GetObjectItemCaseSensitive(obj, key);
	if (it == NULL)
		zs_fail(cause, "%s has no \"%s\"", where, key);
	return it;
}

int zs_json_number(const cJSON *obj, const char *key, const char *where, double *out, char **cause)
{
	const cJSON *it = get(obj, key, where, cause);
	if (it == NULL)
		return -1;
	if (!cJSON_IsNumber(it))
		return zs_fail(cause, "%s.%s is not a number", where, key);
	if (!isfinite(it->valuedouble))
		return zs_fail(cause, "%s.%s is not a finite number", where, key);
	*out = it->valuedouble;
	return 0;
}

int zs_json_uint(const cJSON *obj, const char *key, const char *where, double min, double max,
                 unsigned long long *out, char **cause)
{
	double v = 0;
	if (zs_json_number(obj, key, where, &v, cause) != 0)
		return -1;
	if (v != floor(v) || v < min || v > max)
		return zs_fail(cause, "%s.%s is %g, not a whole number in %.0f..%.0f", where, key, v, min, max);
	*out = (unsigned long long)v;
	return 0;
}

int zs_json_string(const cJSON *obj, const char *key, const char *where, const char **out, char **cause)
{
	const cJSON *it = get(obj, key, where, cause);
	if (it == NULL)
		return -1;
	if (!cJSON_IsString(it))
		return zs_fail(cause, "%s.%s is not a string", where, key);
	*out = it->valuestring;
	return 0;
}

int zs_json_array(const cJSON *obj, const char *key, const char *where, const cJSON **out, char **cause)
{
	const cJSON *it = get(obj, key, where, cause);
	if (it == NULL)
		return -1;
	if (!cJSON_IsArray(it))
		return zs_fail(cause, "%s.%s is not an array", where, key);
	*out = it;
	return 0;
}

int zs_json_object(const cJSON *obj, const char *key, const char *where, const cJSON **out, char **cause)
{
	const cJSON *it = get(obj, key, where, cause);
	if (it == NULL)
		return -1;
	if (!cJSON_IsObject(it))
		return zs_fail(cause, "%s.%s is not an object", where, key);
	*out = it;
	return 0;
}

cJSON *zs_json_add_number(cJSON *obj, const char *key, double v)
{
	cJSON *n = cJSON_AddNumberToObject(obj, key, v);
	if (n == NULL)
		zs_oom(__FILE__, __LINE__);
	return n;
}

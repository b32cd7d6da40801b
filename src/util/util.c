/*
 * util — see util.h. An output is written to an unnamed file (Linux's
 * O_TMPFILE) in the target's folder, flushed, and given its name at the end
 * with linkat(2): where the target does not exist yet that is the whole
 * story, and a process killed at any moment, even by SIGKILL, leaves
 * nothing behind. Where it exists, the file is linked under a temporary
 * name and renamed over it (rename replaces a file atomically within one
 * file system); only that short window can leave a named temporary file.
 * A file system without O_TMPFILE gets the classic recipe: a mkstemp file,
 * write, fsync, rename. SIGINT, SIGTERM, SIGHUP and SIGQUIT are held back
 * by the writing thread while a named temporary file exists (and from
 * before mkstemp makes one); their handlers, and SIGXCPU's, remove it when
 * such a signal reaches another thread (an MPI library's; before the BLAS
 * was serial, OpenBLAS's, which is how a SIGINT left one).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* O_TMPFILE, AT_EMPTY_PATH */
#endif
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
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/util.h"

/* A sweep's workers run side by side and can run out of memory at the same
 * moment (the same allocation, in two runs): the first says it and ends the
 * process; any other waits for that end, so the line is printed once and
 * exit() runs once. */
void zs_oom(const char *file, int line)
{
	static int said;
	if (__atomic_exchange_n(&said, 1, __ATOMIC_SEQ_CST))
		for (;;)
			pause();
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

/* The shortest of %.1g ... %.17g that reads back. A double's rounding
 * interval is symmetric except at a power of two (narrower below), so
 * elsewhere, if the closest 15-digit decimal does not read back, no
 * shorter one does either (each is a 15-digit decimal too, and no closer):
 * start at 16 then, which spares most measured values (losses, ratios)
 * fourteen tries; a power of two is tried from 1 as always. */
char *zs_number_text(double v, char *buf, size_t n)
{
	int e, first = 1;
	if (isfinite(v) && v != 0 && frexp(v, &e) != 0.5 && frexp(v, &e) != -0.5) {
		snprintf(buf, n, "%.15g", v);
		if (strtod(buf, NULL) != v)
			first = 16;
	}
	for (int digits = first; digits <= 17; digits++) {
		snprintf(buf, n, "%.*g", digits, v);
		if (strtod(buf, NULL) == v)
			break;
	}
	return buf;
}

void zs_print_error(const char *prefix, const char *message)
{
	fprintf(stderr, "%s: ", prefix);
	for (const char *c = message; *c != '\0'; c++)
		fputc((unsigned char)*c < 0x20 || *c == 0x7f ? '?' : *c, stderr);
	fputc('\n', stderr);
}

int zs_open_regular(const char *path, struct stat *st, char **cause)
{
	/* O_NONBLOCK: a FIFO with no writer must not hang the open; anything
	 * but a regular file is refused before a byte is read. */
	int fd = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
	if (fd < 0)
		return zs_fail(cause, "%s: %s", path, strerror(errno));
	if (fstat(fd, st) != 0 || !S_ISREG(st->st_mode)) {
		int r = zs_fail(cause, "%s: %s", path,
		                S_ISDIR(st->st_mode) ? "is a directory" :
		                S_ISFIFO(st->st_mode) ? "is a FIFO or a pipe, not a regular file" :
		                S_ISCHR(st->st_mode) || S_ISBLK(st->st_mode) ? "is a device, not a regular file" :
		                "is not a regular file");
		close(fd);
		return r;
	}
	(void)fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
	return fd;
}

int zs_read_file(const char *path, char **out, size_t *len, char **cause)
{
	struct stat st;
	int fd = zs_open_regular(path, &st, cause);
	if (fd < 0)
		return -1;
	FILE *f = fdopen(fd, "rb");
	if (f == NULL) {
		close(fd);
		return zs_fail(cause, "%s: %s", path, strerror(errno));
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
			buf = zs_realloc(buf, cap);
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

int zs_same_file(const char *a, const char *b)
{
	struct stat sa, sb;
	return a != NULL && b != NULL && stat(a, &sa) == 0 && stat(b, &sb) == 0 && sa.st_dev == sb.st_dev &&
	       sa.st_ino == sb.st_ino;
}

/* ------------------------------------------------------------------------- */
/* Where an output goes. */

/* "-", /dev/stdout, /dev/stderr, /dev/fd/N and /proc/self/fd/N name a
 * descriptor: the descriptor N, else -1. */
static int descriptor_name(const char *path)
{
	static const char *const prefixes[] = {"/dev/fd/", "/proc/self/fd/"};
	if (strcmp(path, "-") == 0 || strcmp(path, "/dev/stdout") == 0)
		return 1;
	if (strcmp(path, "/dev/stderr") == 0)
		return 2;
	for (size_t i = 0; i < 2; i++) {
		size_t n = strlen(prefixes[i]);
		const char *d = path + n;
		if (strncmp(path, prefixes[i], n) == 0 && *d != '\0' && strlen(d) < 4 && strspn(d, "0123456789") == strlen(d))
			return atoi(d);
	}
	return -1;
}

/* The folder part of path ("." for a bare name), freshly allocated. */
static char *folder_of(const char *path)
{
	const char *slash = strrchr(path, '/');
	if (slash == NULL)
		return zs_strdup(".");
	if (slash == path)
		return zs_strdup("/");
	return zs_asprintf("%.*s", (int)(slash - path), path);
}

int zs_output_resolve(const char *path, char **target, int *fd)
{
	char *p = zs_strdup(path);
	*target = NULL;
	*fd = -1;
	/* Follow symbolic links by hand, so that a dangling one still names
	 * the file it points at; stop at a name of a descriptor, which the
	 * kernel would resolve to whatever it is open on (/dev/stdout to the
	 * log file the shell opened for appending). */
	for (int hops = 0; hops < 40; hops++) {
		if ((*fd = descriptor_name(p)) >= 0) {
			free(p);
			return 0;
		}
		struct stat st;
		if (lstat(p, &st) != 0 || !S_ISLNK(st.st_mode))
			break;
		char buf[PATH_MAX];
		ssize_t n = readlink(p, buf, sizeof buf - 1);
		if (n < 0)
			break;
		buf[n] = '\0';
		char *next;
		if (buf[0] == '/') {
			next = zs_strdup(buf);
		} else {
			char *dir = folder_of(p);
			next = zs_asprintf("%s/%s", dir, buf);
			free(dir);
		}
		free(p);
		p = next;
	}
	/* The folder by realpath (it must exist); the last name as it is. */
	char *dir = folder_of(p), *real = realpath(dir, NULL);
	const char *slash = strrchr(p, '/');
	const char *base = slash != NULL ? slash + 1 : p;
	if (real != NULL && *base != '\0' && strcmp(base, ".") != 0 && strcmp(base, "..") != 0)
		*target = zs_asprintf("%s%s%s", real, strcmp(real, "/") == 0 ? "" : "/", base);
	else if (real != NULL)
		*target = realpath(p, NULL);
	int r = *target != NULL ? 0 : -1;
	if (r != 0) /* the links followed, for a message about its folder */
		*target = p;
	else
		free(p);
	free(real);
	free(dir);
	return r;
}

int zs_check_paths(const struct zs_path *in, size_t nin, const struct zs_path *out, size_t nout, char **cause)
{
	char **key = zs_calloc(nout + 1, sizeof *key);
	int *fd = zs_calloc(nout + 1, sizeof *fd), r = 0;
	for (size_t i = 0; i < nout && r == 0; i++) {
		if (out[i].path == NULL)
			continue;
		/* A missing folder is said when the output is written; the
		 * links followed still name the file. */
		(void)zs_output_resolve(out[i].path, &key[i], &fd[i]);
		if (key[i] == NULL)
			key[i] = zs_strdup(out[i].path);
		for (size_t j = 0; j < i && r == 0; j++) {
			if (out[j].path == NULL)
				continue;
			int same = fd[i] >= 0 ? fd[i] == fd[j]
			                      : fd[j] < 0 && (strcmp(key[i], key[j]) == 0 || zs_same_file(key[i], key[j]));
			if (same)
				r = zs_fail(cause, "%s %s and %s %s are the same file; one would replace the other", out[j].opt,
				            out[j].path, out[i].opt, out[i].path);
		}
		for (size_t j = 0; j < nin && r == 0 && fd[i] < 0; j++) {
			if (in[j].path == NULL)
				continue;
			char *ik = NULL;
			int ifd;
			int same = zs_same_file(key[i], in[j].path) ||
			           (zs_output_resolve(in[j].path, &ik, &ifd) == 0 && ik != NULL && strcmp(ik, key[i]) == 0);
			free(ik);
			if (same)
				r = zs_fail(cause, "%s %s: is the %s file; it would be overwritten", out[i].opt, out[i].path,
				            in[j].opt);
		}
	}
	for (size_t i = 0; i < nout; i++)
		free(key[i]);
	free(key);
	free(fd);
	return r;
}

/* ------------------------------------------------------------------------- */
/* Writing an output. */

struct zs_out {
	char *path;     /* the name the user gave, for messages */
	char *target;   /* the file to replace, symbolic links followed */
	char *tmp;      /* a named temporary file (the fallback), or NULL */
	int fd;
	int in_place;   /* a descriptor, device, FIFO or socket: written as it is */
	int owned;      /* fd was opened here (not a descriptor given by name) */
	int exists;     /* target exists (to be replaced, not linked anew) */
	sigset_t old;   /* the signal mask before a named temporary file existed */
	int masked;
};

/* The named temporary file that exists now, if any, for the signal
 * handlers. One at a time: the commands write their outputs one after
 * another. */
static char pending_tmp[PATH_MAX];
static volatile sig_atomic_t pending;

static void hold_signals(struct zs_out *o)
{
	sigset_t stop;
	if (o->masked)
		return;
	sigemptyset(&stop);
	sigaddset(&stop, SIGINT);
	sigaddset(&stop, SIGTERM);
	sigaddset(&stop, SIGHUP);
	sigaddset(&stop, SIGQUIT);
	pthread_sigmask(SIG_BLOCK, &stop, &o->old);
	o->masked = 1;
}

static void release_signals(struct zs_out *o)
{
	if (o->masked)
		pthread_sigmask(SIG_SETMASK, &o->old, NULL);
	o->masked = 0;
}

/* A handler can run on another thread (an MPI library's, say) while this
 * one writes: the name is complete before `pending` says it is there. */
static void set_pending(const char *tmp)
{
	__atomic_store_n(&pending, 0, __ATOMIC_SEQ_CST);
	size_t n = tmp != NULL ? strlen(tmp) : 0;
	if (tmp != NULL && n < sizeof pending_tmp) {
		memcpy(pending_tmp, tmp, n + 1);
		__atomic_store_n(&pending, 1, __ATOMIC_SEQ_CST);
	}
}

/* SIGINT, SIGTERM, SIGHUP and SIGQUIT: remove the named temporary file, if
 * one exists, then die of the signal as if there were no handler. The
 * thread writing an output holds these signals back while its temporary
 * file exists (hold_signals), so there the write completes first; but a
 * signal sent to the process goes to any thread not holding it back, and
 * this handler is what removes the file then. unlink, signal and raise
 * are async-signal-safe. */
static void on_stop(int sig)
{
	int e = errno;
	if (__atomic_load_n(&pending, __ATOMIC_SEQ_CST))
		unlink(pending_tmp);
	signal(sig, SIG_DFL);
	raise(sig); /* delivered when this handler returns: the process dies of it */
	errno = e;
}

static void on_xcpu(int sig)
{
	static const char msg[] = "zerosim: the CPU time limit (ulimit -t) was reached; stopped\n";
	(void)sig;
	if (pending)
		unlink(pending_tmp);
	(void)!write(2, msg, sizeof msg - 1);
	_exit(ZS_EXIT_RUNTIME);
}

void zs_signals_init(void)
{
	/* A file larger than ulimit -f is a failed write (EFBIG), said in one
	 * line like any other; a closed pipe ends the run quietly (SIGPIPE's
	 * default, even when the parent ignored it). */
	signal(SIGXFSZ, SIG_IGN);
	signal(SIGPIPE, SIG_DFL);
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_xcpu;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGXCPU, &sa, NULL);
	/* A signal the parent had ignored (nohup's SIGHUP, a background job's
	 * SIGINT) stays ignored, and another handler is left alone. */
	static const int stops[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT};
	for (size_t i = 0; i < sizeof stops / sizeof stops[0]; i++) {
		struct sigaction old;
		if (sigaction(stops[i], NULL, &old) != 0 || (old.sa_flags & SA_SIGINFO) ||
		    (old.sa_handler != SIG_DFL && old.sa_handler != on_stop))
			continue;
		sa.sa_handler = on_stop;
		sigaction(stops[i], &sa, NULL);
	}
	/* ulimit -t sets the soft and the hard limit alike, and at the hard
	 * limit the kernel sends SIGKILL, which no handler sees: stop a second
	 * earlier, at a soft limit of our own, with the message. */
	struct rlimit rl;
	if (getrlimit(RLIMIT_CPU, &rl) == 0 && rl.rlim_max != RLIM_INFINITY && rl.rlim_max > 1 &&
	    (rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur >= rl.rlim_max)) {
		rl.rlim_cur = rl.rlim_max - 1;
		(void)setrlimit(RLIMIT_CPU, &rl);
	}
}

static void out_free(struct zs_out *o)
{
	free(o->path);
	free(o->target);
	free(o->tmp);
	free(o);
}

/* A temporary name next to the target: FOLDER/.zerosim.tmpXXXXXX. */
static char *tmp_template(const char *target)
{
	char *dir = folder_of(target);
	char *t = zs_asprintf("%s/.zerosim.tmpXXXXXX", dir);
	free(dir);
	return t;
}

/* The mode and owner of the file replaced, or an ordinary new file's. */
static int set_mode(struct zs_out *o)
{
	struct stat st;
	if (o->exists && stat(o->target, &st) == 0) {
		/* Where allowed (root, or a group of ours); else the file is ours,
		 * as with sed -i. */
		if (st.st_uid != geteuid() || st.st_gid != getegid())
			(void)!fchown(o->fd, st.st_uid, st.st_gid);
		return fchmod(o->fd, st.st_mode & 07777);
	}
	mode_t mask = umask(0);
	umask(mask);
	return fchmod(o->fd, 0666 & ~mask);
}

int zs_out_open(const char *path, struct zs_out **out, char **cause)
{
	struct zs_out *o = zs_calloc(1, sizeof *o);
	struct stat st;
	int dfd;
	o->fd = -1;
	o->path = zs_strdup(path);
	*out = NULL;
	zs_signals_init();
	if (*path == '\0') {
		out_free(o);
		return zs_fail(cause, "the output file name is empty");
	}
	if (zs_output_resolve(path, &o->target, &dfd) != 0 && dfd < 0) {
		char *dir = folder_of(o->target);
		int r = zs_fail(cause, "cannot write %s: the folder %s is missing", path, dir);
		free(dir);
		out_free(o);
		return r;
	}
	if (dfd >= 0) { /* a descriptor, as it stands (appending if opened so) */
		if (fstat(dfd, &st) != 0) {
			int r = zs_fail(cause, "cannot write %s: descriptor %d is not open", path, dfd);
			out_free(o);
			return r;
		}
		if (dfd == 1)
			fflush(stdout);
		o->fd = dfd;
		o->in_place = 1;
		*out = o;
		return 0;
	}
	if (stat(o->target, &st) == 0) {
		if (S_ISDIR(st.st_mode)) {
			out_free(o);
			return zs_fail(cause, "%s: is a folder, not a file", path);
		}
		if (!S_ISREG(st.st_mode)) { /* a device, FIFO or socket: in place */
			o->fd = open(o->target, O_WRONLY | O_NOCTTY | O_CLOEXEC);
			if (o->fd < 0) {
				int r = zs_fail(cause, "cannot write %s: %s", path, strerror(errno));
				out_free(o);
				return r;
			}
			o->in_place = 1;
			o->owned = 1;
			*out = o;
			return 0;
		}
		o->exists = 1;
	}
	char *dir = folder_of(o->target);
	o->owned = 1;
	errno = EOPNOTSUPP;
#ifdef O_TMPFILE
	o->fd = open(dir, O_TMPFILE | O_WRONLY | O_CLOEXEC, 0600);
#endif
	if (o->fd < 0) { /* no O_TMPFILE here: a named temporary file */
		if (errno == ENOENT || errno == EACCES || errno == EROFS || errno == ENOTDIR) {
			int r = zs_fail(cause, "cannot write %s: %s", path, strerror(errno));
			free(dir);
			out_free(o);
			return r;
		}
		o->tmp = tmp_template(o->target);
		hold_signals(o);
		o->fd = mkstemp(o->tmp);
		if (o->fd < 0) {
			int r = zs_fail(cause, "cannot write %s: %s", path, strerror(errno));
			release_signals(o);
			free(dir);
			out_free(o);
			return r;
		}
		set_pending(o->tmp);
	}
	free(dir);
	*out = o;
	return 0;
}

int zs_out_write(struct zs_out *o, const void *data, size_t len, char **cause)
{
	if (write_all(o->fd, data, len) != 0)
		return zs_fail(cause, "cannot write %s: %s", o->path, strerror(errno));
	return 0;
}

void zs_out_abort(struct zs_out *o)
{
	if (o == NULL)
		return;
	if (o->owned && o->fd >= 0)
		close(o->fd);
	if (o->tmp != NULL)
		unlink(o->tmp);
	set_pending(NULL);
	release_signals(o);
	out_free(o);
}

/* Give the unnamed file (O_TMPFILE) the name `name`. */
static int link_unnamed(int fd, const char *name)
{
	if (linkat(fd, "", AT_FDCWD, name, AT_EMPTY_PATH) == 0) /* needs CAP_DAC_READ_SEARCH */
		return 0;
	char proc[64];
	snprintf(proc, sizeof proc, "/proc/self/fd/%d", fd);
	return linkat(AT_FDCWD, proc, AT_FDCWD, name, AT_SYMLINK_FOLLOW);
}

/* Link the unnamed file over an existing target: under a fresh temporary
 * name, then renamed over it. */
static int link_over(struct zs_out *o)
{
	for (int tries = 0; tries < 100; tries++) {
		char *t = tmp_template(o->target);
		/* Held from before the name exists: mkstemp makes a file. */
		hold_signals(o);
		int fd = mkstemp(t); /* only to pick a free name */
		if (fd < 0) {
			int e = errno;
			release_signals(o);
			free(t);
			errno = e;
			return -1;
		}
		/* Pending from the file's making through the link and the
		 * rename: a handler on another thread removes whichever exists. */
		set_pending(t);
		close(fd);
		unlink(t);
		if (link_unnamed(o->fd, t) == 0) {
			o->tmp = t;
			if (rename(t, o->target) != 0)
				return -1;
			free(o->tmp);
			o->tmp = NULL;
			set_pending(NULL);
			return 0;
		}
		int e = errno;
		set_pending(NULL);
		release_signals(o);
		free(t);
		if (e != EEXIST) {
			errno = e;
			return -1;
		}
	}
	errno = EEXIST;
	return -1;
}

/* Where the unnamed file cannot be linked (no /proc, no capability): copy
 * it into a named temporary file, to be renamed over the target. */
static int copy_to_named(struct zs_out *o)
{
	char buf[65536];
	o->tmp = tmp_template(o->target);
	hold_signals(o);
	int fd = mkstemp(o->tmp);
	if (fd < 0)
		return -1;
	set_pending(o->tmp);
	off_t at = 0;
	for (;;) {
		ssize_t n = pread(o->fd, buf, sizeof buf, at);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 || (n > 0 && write_all(fd, buf, (size_t)n) != 0)) {
			int e = errno;
			close(fd);
			errno = e;
			return -1;
		}
		if (n == 0)
			break;
		at += n;
	}
	close(o->fd);
	o->fd = fd;
	return set_mode(o) != 0 || (fsync(fd) != 0 && errno != EINVAL) ? -1 : 0;
}

int zs_out_commit(struct zs_out *o, char **cause)
{
	int e = 0;
	if (o->in_place) {
		if (o->owned && close(o->fd) != 0)
			e = errno;
		int r = e ? zs_fail(cause, "cannot write %s: %s", o->path, strerror(e)) : 0;
		out_free(o);
		return r;
	}
	if (set_mode(o) != 0 || (fsync(o->fd) != 0 && errno != EINVAL)) {
		e = errno;
		goto fail;
	}
	if (o->tmp == NULL) { /* the unnamed file */
		int r = o->exists ? link_over(o) : link_unnamed(o->fd, o->target);
		if (r != 0 && !o->exists && errno == EEXIST) /* it appeared meanwhile */
			r = link_over(o);
		if (r == 0)
			goto done;
		if (o->tmp != NULL || (errno != ENOENT && errno != EPERM && errno != EOPNOTSUPP) ||
		    copy_to_named(o) != 0) {
			e = errno;
			goto fail;
		}
	}
	/* A named temporary file: closed, then renamed into place. */
	if (close(o->fd) != 0) {
		o->fd = -1;
		e = errno;
		goto fail;
	}
	o->fd = -1;
	if (rename(o->tmp, o->target) != 0) {
		e = errno;
		goto fail;
	}
	free(o->tmp);
	o->tmp = NULL;
done:
	if (o->fd >= 0)
		close(o->fd); /* written and linked: nothing is left to fail */
	o->fd = -1;
	set_pending(NULL);
	release_signals(o);
	out_free(o);
	return 0;
fail:;
	int r = zs_fail(cause, "cannot write %s: %s", o->path, strerror(e));
	zs_out_abort(o);
	return r;
}

int zs_write_atomic(const char *path, const char *data, size_t len, char **cause)
{
	struct zs_out *o;
	if (zs_out_open(path, &o, cause) != 0)
		return -1;
	if (zs_out_write(o, data, len, cause) != 0) {
		zs_out_abort(o);
		return -1;
	}
	return zs_out_commit(o, cause);
}

/* The offset of the first number in the JSON text that is not in JSON's
 * grammar, -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?, or -1. cJSON
 * hands whatever strtod takes ("01", "1.", "1.e5") to strtod. */
static long bad_json_number(const char *t)
{
	for (const char *p = t; *p != '\0'; p++) {
		if (*p == '"') {
			for (p++; *p != '\0' && *p != '"'; p++)
				if (*p == '\\' && p[1] != '\0')
					p++;
			if (*p == '\0')
				return -1; /* cJSON says what is wrong */
			continue;
		}
		if (*p != '-' && (*p < '0' || *p > '9'))
			continue;
		const char *q = p, *start = p;
		size_t run = strspn(p, "0123456789+-eE.");
		if (*q == '-')
			q++;
		if (*q == '0')
			q++;
		else if (*q >= '1' && *q <= '9')
			q += strspn(q, "0123456789");
		else
			return start - t;
		if (*q == '.') {
			size_t f = strspn(q + 1, "0123456789");
			if (f == 0)
				return start - t;
			q += 1 + f;
		}
		if (*q == 'e' || *q == 'E') {
			q++;
			if (*q == '+' || *q == '-')
				q++;
			size_t e = strspn(q, "0123456789");
			if (e == 0)
				return start - t;
			q += e;
		}
		if ((size_t)(q - start) != run)
			return start - t;
		p = q - 1;
	}
	return -1;
}

/* Whether the text's first `upto` bytes open more than cJSON's nesting
 * limit of arrays and objects: the reason cJSON stopped there, which is
 * not a syntax error. */
static int too_deep(const char *t, size_t upto)
{
	long depth = 0;
	for (size_t i = 0; i <= upto && t[i] != '\0'; i++) {
		if (t[i] == '"') {
			for (i++; t[i] != '\0' && t[i] != '"'; i++)
				if (t[i] == '\\' && t[i + 1] != '\0')
					i++;
			if (t[i] == '\0')
				return 0;
		} else if (t[i] == '[' || t[i] == '{') {
			if (++depth > CJSON_NESTING_LIMIT)
				return 1;
		} else if (t[i] == ']' || t[i] == '}') {
			depth--;
		}
	}
	return 0;
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
	long bad = bad_json_number(text);
	if (bad >= 0) {
		int r = zs_fail(cause, "%s: not valid JSON (a number such as '%.*s' near byte %ld is not in JSON's "
		                "decimal form)", path, (int)strspn(text + bad, "0123456789+-eE."), text + bad, bad);
		free(text);
		return r;
	}
	const char *end = NULL;
	cJSON *root = cJSON_ParseWithOpts(text, &end, 1);
	if (root == NULL) {
		size_t at = end ? (size_t)(end - text) : 0;
		int r = too_deep(text, at)
		        ? zs_fail(cause, "%s: arrays or objects nested deeper than %d (near byte %zu), deeper than "
		                  "zerosim reads", path, CJSON_NESTING_LIMIT, at)
		        : zs_fail(cause, "%s: not valid JSON (near byte %zu)", path, at);
		free(text);
		return r;
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
	/* `format` may list several: "zerosim-case/2 or zerosim-case/1". */
	int known = 0;
	for (const char *p = format; *p != '\0' && !known;) {
		const char *or = strstr(p, " or ");
		size_t n = or != NULL ? (size_t)(or - p) : strlen(p);
		known = strlen(f->valuestring) == n && strncmp(f->valuestring, p, n) == 0;
		p += n + (or != NULL ? 4 : 0);
	}
	if (!known) {
		int r = zs_fail(cause, "%s: this file is format %.80s, this zerosim reads %s", path, f->valuestring, format);
		cJSON_Delete(root);
		return r;
	}
	*out = root;
	return 0;
}

/* cJSON prints a number with 15 significant digits whenever they read
 * back to within a relative 2.2e-16 of it, so 9007199254740991 comes out as
 * 9.00719925474099e+15 and many doubles as a neighbour. Every number is
 * printed here instead, as raw text that reads back to the same double:
 * whole numbers below 2^53 as their digits, others in the shortest form. */
static void exact_numbers(cJSON *item)
{
	for (; item != NULL; item = item->next) {
		if (cJSON_IsNumber(item)) {
			char buf[40];
			double v = item->valuedouble;
			if (!isfinite(v))
				snprintf(buf, sizeof buf, "null");
			else if (v == floor(v) && fabs(v) < 9007199254740992.0)
				snprintf(buf, sizeof buf, "%.0f", v);
			else
				zs_number_text(v, buf, sizeof buf);
			item->type = cJSON_Raw;
			item->valuestring = zs_strdup(buf);
		}
		exact_numbers(item->child);
	}
}

char *zs_json_print(const cJSON *root)
{
	cJSON *copy = cJSON_Duplicate(root, 1);
	exact_numbers(copy);
	char *text = cJSON_Print(copy);
	cJSON_Delete(copy);
	if (text == NULL)
		zs_oom(__FILE__, __LINE__);
	char *own = zs_strdup(text);
	cJSON_free(text);
	return own;
}

int zs_json_write(const char *path, const cJSON *root, char **cause)
{
	char *text = zs_json_print(root);
	size_t n = strlen(text);
	char *withnl = zs_malloc(n + 2);
	memcpy(withnl, text, n);
	withnl[n] = '\n';
	withnl[n + 1] = '\0';
	free(text);
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
	return cJSON_AddNumberToObject(obj, key, v);
}

void zs_json_rank_marks(cJSON *per, unsigned n, void (*fill)(cJSON *obj, unsigned rank, const void *ctx),
                        const void *ctx)
{
	cJSON *ma = cJSON_AddArrayToObject(per, "marks");
	if (ma == NULL)
		zs_oom(__FILE__, __LINE__);
	for (unsigned r = 0; r < n; r++) {
		cJSON *o = cJSON_CreateObject();
		if (o == NULL)
			zs_oom(__FILE__, __LINE__);
		cJSON_AddItemToArray(ma, o);
		fill(o, r, ctx);
	}
}

/* cJSON's allocations through zs_malloc: out of memory is zs_oom's one
 * line and exit, so no cJSON_Create or cJSON_Add returns NULL and no
 * caller checks. free stays libc's. */
static void *json_malloc(size_t n) { return zs_malloc(n); }

void zs_json_init(void)
{
	cJSON_Hooks hooks = {json_malloc, free};
	cJSON_InitHooks(&hooks);
}

/*
 * sig_at — an LD_PRELOAD library for tests/signal_write.sh that sends a
 * signal to its own process at an exact point of writing an output, where
 * a timed kill would hit once in thousands of tries: right after mkstemp
 * makes a temporary file, or as linkat or rename is called
 * (ZS_SIGNAL_AT=mkstemp|linkat|rename, ZS_SIGNAL=the signal's number).
 * The signal goes to the process, not to the thread, as kill(1)'s does:
 * any thread not holding it back may take it. ZS_NO_TMPFILE=1 makes
 * open(O_TMPFILE) fail as on a file system without it, so that the whole
 * write goes through a named temporary file.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int mkstemp(char *template);
int linkat(int olddirfd, const char *oldpath, int newdirfd, const char *newpath, int flags);
int rename(const char *oldpath, const char *newpath);
int open(const char *path, int flags, ...);

static void *real(const char *name)
{
	return dlsym(RTLD_NEXT, name);
}

static void signal_at(const char *call)
{
	const char *at = getenv("ZS_SIGNAL_AT"), *sig = getenv("ZS_SIGNAL");
	if (at != NULL && sig != NULL && strcmp(at, call) == 0)
		kill(getpid(), atoi(sig));
}

int mkstemp(char *template)
{
	int (*f)(char *) = (int (*)(char *))real("mkstemp");
	int fd = f(template);
	if (fd >= 0)
		signal_at("mkstemp");
	return fd;
}

int linkat(int olddirfd, const char *oldpath, int newdirfd, const char *newpath, int flags)
{
	int (*f)(int, const char *, int, const char *, int) =
		(int (*)(int, const char *, int, const char *, int))real("linkat");
	signal_at("linkat");
	return f(olddirfd, oldpath, newdirfd, newpath, flags);
}

int rename(const char *oldpath, const char *newpath)
{
	int (*f)(const char *, const char *) = (int (*)(const char *, const char *))real("rename");
	signal_at("rename");
	return f(oldpath, newpath);
}

int open(const char *path, int flags, ...)
{
	int (*f)(const char *, int, ...) = (int (*)(const char *, int, ...))real("open");
	mode_t mode = 0;
	if ((flags & O_CREAT) || (flags & O_TMPFILE) == O_TMPFILE) {
		va_list ap;
		va_start(ap, flags);
		mode = (mode_t)va_arg(ap, int);
		va_end(ap);
	}
	if ((flags & O_TMPFILE) == O_TMPFILE && getenv("ZS_NO_TMPFILE") != NULL) {
		errno = EOPNOTSUPP;
		return -1;
	}
	return f(path, flags, mode);
}

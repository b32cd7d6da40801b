/*
 * report_exec — fork/execve of the external renderers, output to a log.
 *
 * A renderer is started by its absolute path, as argv[0] too (pdflatex's
 * kpathsea finds its own files from where it was started), with PATH set
 * to the search path it was found in when the caller's PATH is empty or
 * unset ("/usr/bin:/bin"), so that it can find itself and its helpers.
 * A program that cannot be started is named with the reason, through a
 * close-on-exec pipe from the child, never as a bare "exit status 127".
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* pipe2 */
#endif
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "report/report_exec.h"
#include "util/util.h"

extern char **environ;

#define DEFAULT_PATH "/usr/bin:/bin"

static const char *search_path(void)
{
	const char *path = getenv("PATH");
	return path == NULL || *path == '\0' ? DEFAULT_PATH : path;
}

char *report_exec_which(const char *name)
{
	const char *path = search_path(), *p, *end;

	for (p = path; ; p = end + 1) {
		char *full, *abs;
		struct stat st;
		end = strchr(p, ':');
		if (end == NULL)
			end = p + strlen(p);
		/* An empty PATH entry means the current folder. */
		full = end > p ? zs_asprintf("%.*s/%s", (int)(end - p), p, name) : zs_asprintf("./%s", name);
		/* A folder or a non-executable file of that name is not the program. */
		if (stat(full, &st) == 0 && S_ISREG(st.st_mode) && access(full, X_OK) == 0) {
			/* Absolute: the renderer runs in another folder. */
			abs = full[0] == '/' ? zs_strdup(full) : realpath(full, NULL);
			free(full);
			if (abs != NULL)
				return abs;
		} else {
			free(full);
		}
		if (*end == '\0')
			return NULL;
	}
}

/* The environment for the child: ours, with PATH set when ours has none. */
static char **child_env(void)
{
	size_t n = 0;
	while (environ != NULL && environ[n] != NULL)
		n++;
	char **env = zs_calloc(n + 2, sizeof *env);
	size_t k = 0;
	const char *path = getenv("PATH");
	for (size_t i = 0; i < n; i++)
		if (strncmp(environ[i], "PATH=", 5) != 0 || (path != NULL && *path != '\0'))
			env[k++] = environ[i];
	if (path == NULL || *path == '\0')
		env[k++] = (char *)"PATH=" DEFAULT_PATH;
	env[k] = NULL;
	return env;
}

int report_exec(const char *prog, const char *const argv[], const char *cwd, const char *log,
                char **cause)
{
	int fd, status, report[2];
	pid_t pid;
	const char *name = argv[0];

	fd = open(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
	if (fd < 0)
		return zs_fail(cause, "cannot open %s: %s", log, strerror(errno));
	if (pipe2(report, O_CLOEXEC) < 0) {
		close(fd);
		return zs_fail(cause, "cannot start %s: %s", prog, strerror(errno));
	}
	size_t argc = 0;
	while (argv[argc] != NULL)
		argc++;
	char **args = zs_calloc(argc + 1, sizeof *args), **env = child_env();
	for (size_t i = 1; i < argc; i++)
		args[i] = (char *)argv[i]; /* execve does not write them */
	args[0] = (char *)prog;
	pid = fork();
	if (pid < 0) {
		int e = errno;
		close(fd);
		close(report[0]);
		close(report[1]);
		free(args);
		free(env);
		return zs_fail(cause, "cannot start %s: %s", prog, strerror(e));
	}
	if (pid == 0) {
		/* Child: only async-signal-safe calls until execve. On failure the
		 * step (0 setup, 1 chdir, 2 exec) and errno go up the pipe. */
		int why[2] = {0, 0};
		int null = open("/dev/null", O_RDONLY);
		if (null >= 0 && dup2(null, 0) >= 0 && dup2(fd, 1) >= 0 && dup2(fd, 2) >= 0) {
			why[0] = 1;
			if (chdir(cwd) == 0) {
				why[0] = 2;
				execve(prog, args, env);
			}
		}
		why[1] = errno;
		(void)!write(report[1], why, sizeof why);
		_exit(127);
	}
	close(fd);
	close(report[1]);
	free(args);
	free(env);
	int why[2];
	ssize_t got;
	while ((got = read(report[0], why, sizeof why)) < 0 && errno == EINTR)
		;
	close(report[0]);
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR)
			return zs_fail(cause, "waiting for %s: %s", prog, strerror(errno));
	if (got == (ssize_t)sizeof why)
		return why[0] == 2 ? zs_fail(cause, "cannot run %s (%s): %s", name, prog, strerror(why[1]))
		     : why[0] == 1 ? zs_fail(cause, "cannot run %s in %s: %s", name, cwd, strerror(why[1]))
		                   : zs_fail(cause, "cannot start %s: %s", name, strerror(why[1]));
	if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
		return 0;
	if (WIFEXITED(status))
		return zs_fail(cause, "%s (%s) failed (exit status %d); see %s", name, prog, WEXITSTATUS(status),
		               log);
	return zs_fail(cause, "%s (%s) was killed by signal %d; see %s", name, prog,
	               WIFSIGNALED(status) ? WTERMSIG(status) : 0, log);
}

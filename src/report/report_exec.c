/*
 * report_exec — fork/execv of the external renderers, output to a log.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "report/report_exec.h"
#include "util/util.h"

char *report_exec_which(const char *name)
{
	const char *path = getenv("PATH"), *p, *end;

	if (path == NULL || *path == '\0')
		path = "/usr/bin:/bin";
	for (p = path; ; p = end + 1) {
		char *full;
		end = strchr(p, ':');
		if (end == NULL)
			end = p + strlen(p);
		/* An empty PATH entry means the current folder. */
		full = end > p ? zs_asprintf("%.*s/%s", (int)(end - p), p, name) : zs_asprintf("./%s", name);
		if (access(full, X_OK) == 0)
			return full;
		free(full);
		if (*end == '\0')
			return NULL;
	}
}

int report_exec(const char *prog, const char *const argv[], const char *cwd, const char *log,
                char **cause)
{
	int fd, status;
	pid_t pid;

	fd = open(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
	if (fd < 0)
		return zs_fail(cause, "cannot open %s: %s", log, strerror(errno));
	pid = fork();
	if (pid < 0) {
		close(fd);
		return zs_fail(cause, "cannot start %s: %s", prog, strerror(errno));
	}
	if (pid == 0) {
		/* Child: only async-signal-safe calls until execv. */
		int null = open("/dev/null", O_RDONLY);
		if (null < 0 || dup2(null, 0) < 0 || dup2(fd, 1) < 0 || dup2(fd, 2) < 0 ||
		    chdir(cwd) < 0)
			_exit(127);
		execv(prog, (char *const *)argv); /* execv does not write them */
		_exit(127);
	}
	close(fd);
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR)
			return zs_fail(cause, "waiting for %s: %s", prog, strerror(errno));
	if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
		return 0;
	if (WIFEXITED(status))
		return zs_fail(cause, "%s failed (exit status %d); see %s", argv[0], WEXITSTATUS(status),
		               log);
	return zs_fail(cause, "%s was killed by signal %d; see %s", argv[0],
	               WIFSIGNALED(status) ? WTERMSIG(status) : 0, log);
}

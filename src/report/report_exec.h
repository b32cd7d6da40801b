/*
 * report_exec — running gnuplot and pdflatex: found in PATH, started with
 * fork and execv on an argument vector (never a shell string), in a given
 * folder, with their output appended to a log file.
 */
#ifndef ZS_REPORT_EXEC_H
#define ZS_REPORT_EXEC_H

/* The full path of `name` in PATH, or NULL. The caller frees it. */
char *report_exec_which(const char *name);

/* Run `prog` (a path) with argv (argv[0] first, NULL last) in folder `cwd`,
 * stdin from /dev/null, stdout and stderr appended to `log`. Returns 0 when
 * it exits with status 0, else -1 with *cause naming the log. */
int report_exec(const char *prog, const char *const argv[], const char *cwd, const char *log,
                char **cause);

#endif

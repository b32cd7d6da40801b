/*
 * datafile — the lookup of shipped files described in datafile.h.
 */
#include "config.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util/datafile.h"
#include "util/util.h"

#ifndef ZS_DATADIR
#error "ZS_DATADIR (the installed data folder) must be defined by the build"
#endif

/* dir/name if it is readable (a fresh string), else NULL. */
static char *readable(const char *dir, const char *name)
{
	char *p = zs_asprintf("%s/%s", dir, name);
	if (access(p, R_OK) == 0)
		return p;
	free(p);
	return NULL;
}

/* The folder of the running binary, or NULL where the system cannot say. */
static char *binary_folder(void)
{
	char buf[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
	if (n <= 0)
		return NULL;
	buf[n] = '\0';
	char *slash = strrchr(buf, '/');
	if (slash == NULL)
		return NULL;
	*slash = '\0';
	return zs_strdup(slash == buf ? "/" : buf);
}

char *zs_datafile(const char *name, char **cause)
{
	const char *env = getenv("ZEROSIM_DATADIR");
	char *p;

	if (env != NULL && *env != '\0') {
		if ((p = readable(env, name)) == NULL)
			zs_set_cause(cause, "%s is not in ZEROSIM_DATADIR (%s)", name, env);
		return p;
	}
	char *bin = binary_folder();
	p = bin != NULL ? readable(bin, name) : NULL;
	free(bin);
	if (p == NULL && (p = readable(ZS_DATADIR, name)) == NULL)
		zs_set_cause(cause, "%s is neither in %s nor beside the zerosim binary "
		             "(set ZEROSIM_DATADIR to the source tree to run zerosim uninstalled)",
		             name, ZS_DATADIR);
	return p;
}

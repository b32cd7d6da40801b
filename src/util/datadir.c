/*
 * datadir — see datadir.h. The executable's folder comes from
 * /proc/self/exe (Linux), which names the binary whatever the current
 * folder or $PATH.
 */
#include "config.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util/datadir.h"
#include "util/util.h"

static char *existing(const char *dir, const char *rel)
{
	char *path = zs_asprintf("%s/%s", dir, rel);

	if (access(path, R_OK) == 0)
		return path;
	free(path);
	return NULL;
}

/* The running executable's folder, or NULL. */
static char *exe_dir(void)
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
	return zs_strdup(buf[0] != '\0' ? buf : "/");
}

char *zs_data_find(const char *installed, const char *in_tree, char **cause)
{
	const char *env = getenv("ZEROSIM_DATADIR");
	char *found;

	if (env != NULL && *env != '\0') {
		found = existing(env, installed);
		if (found == NULL)
			found = existing(env, in_tree);
		if (found == NULL)
			zs_set_cause(cause, "neither %s/%s nor %s/%s exists (ZEROSIM_DATADIR is set)", env,
			             installed, env, in_tree);
		return found;
	}
	char *dir = exe_dir();
	found = dir != NULL ? existing(dir, in_tree) : NULL;
	free(dir);
	if (found == NULL)
		found = existing(ZS_DATADIR, installed);
	if (found == NULL)
		zs_set_cause(cause, "%s/%s does not exist (is zerosim installed? ZEROSIM_DATADIR can "
		             "name the folder)", ZS_DATADIR, installed);
	return found;
}

/*
 * osmem — see osmem.h.
 */
#include "config.h"

#include <errno.h>
#include <malloc.h>
#include <stdio.h>
#include <string.h>

#include "engine/osmem.h"
#include "util/util.h"

size_t osmem_peak_bytes(void)
{
	FILE *f = fopen("/proc/self/status", "r");
	if (f == NULL)
		return 0;
	char line[256];
	unsigned long long kb = 0;
	while (fgets(line, sizeof line, f) != NULL)
		if (sscanf(line, "VmHWM: %llu kB", &kb) == 1)
			break;
	fclose(f);
	return (size_t)kb * 1024;
}

int osmem_reset_peak(char **cause)
{
	malloc_trim(0);
	FILE *f = fopen("/proc/self/clear_refs", "w");
	if (f == NULL)
		return zs_fail(cause, "cannot reset the peak resident set: /proc/self/clear_refs: %s", strerror(errno));
	int bad = fputs("5", f) == EOF;
	bad |= fclose(f) != 0;
	if (bad)
		return zs_fail(cause, "cannot reset the peak resident set: writing /proc/self/clear_refs failed");
	return 0;
}

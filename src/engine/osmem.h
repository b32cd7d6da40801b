/*
 * osmem — the operating system's own figure for this process's memory:
 * its peak resident set, VmHWM in /proc/self/status (Linux, proc(5)), and
 * a way to start that peak again from now, so that runs one after another
 * in one process each get their own: give the heap's free pages back to the
 * kernel (malloc_trim), then write 5 to /proc/self/clear_refs, which resets
 * VmHWM to the current resident set (Linux 4.0 and later).
 *
 * It sees everything the process holds: every rank's tracked buffers, and
 * also the code, the libraries (MPI's among them), the allocator's slack
 * and the collectives' staging, which the tracker does not.
 */
#ifndef ZS_OSMEM_H
#define ZS_OSMEM_H

#include <stddef.h>

/* The peak resident set in bytes; 0 if the system does not say. */
size_t osmem_peak_bytes(void);

/* Trim the heap and restart the peak from the current resident set. */
int osmem_reset_peak(char **cause);

#endif

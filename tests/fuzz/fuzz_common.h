/*
 * fuzz_common — what every libFuzzer harness of zerosim's JSON readers
 * shares. The readers take a path, so each input is written into one
 * memfd (an anonymous in-memory file) and handed over as /dev/fd/N: no
 * disk traffic, nothing left behind, the same fopen/fstat/fread path a
 * user's file takes.
 *
 * Only for tests/fuzz/fuzz_*.c, built by `make fuzz` (tests/hardening.mk).
 */
#ifndef ZS_FUZZ_COMMON_H
#define ZS_FUZZ_COMMON_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* memfd_create; tests/hardening.mk passes it too */
#endif
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "util/util.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#ifdef FUZZ_SETUP
/* The harness's own start, after the common one (the report's: its
 * partner file); a harness that has one defines FUZZ_SETUP before
 * including this. */
static void fuzz_setup(void);
#endif

/* libFuzzer's start, every harness's: cJSON's allocations through
 * zs_malloc, as zerosim's (zs_json_init). */
int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	zs_json_init();
#ifdef FUZZ_SETUP
	fuzz_setup();
#endif
	return 0;
}

static int fuzz_fd = -1;
static char fuzz_path[64];

/* The path of a file that holds exactly data[0..size). Aborts (a harness
 * bug, not a finding) if the memfd cannot be made. */
static const char *fuzz_file(const uint8_t *data, size_t size)
{
	if (fuzz_fd < 0) {
		fuzz_fd = memfd_create("zerosim-fuzz", 0);
		if (fuzz_fd < 0) {
			perror("fuzz: memfd_create");
			abort();
		}
		snprintf(fuzz_path, sizeof fuzz_path, "/dev/fd/%d", fuzz_fd);
	}
	if (ftruncate(fuzz_fd, 0) != 0) {
		perror("fuzz: ftruncate");
		abort();
	}
	size_t done = 0;
	while (done < size) {
		ssize_t w = pwrite(fuzz_fd, data + done, size - done, (off_t)done);
		if (w <= 0) {
			perror("fuzz: pwrite");
			abort();
		}
		done += (size_t)w;
	}
	return fuzz_path;
}

#endif

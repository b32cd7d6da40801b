/*
 * model_lookup — the tests' way to a shipped config and to a tensor of a
 * step description by its Hugging Face name (test_theory.c, test_moe.c).
 * Static functions: each test program includes it once, after check.h.
 */
#ifndef ZS_TESTS_MODEL_LOOKUP_H
#define ZS_TESTS_MODEL_LOOKUP_H

#include <stdlib.h>
#include <string.h>

#include "util/model.h"
#include "util/step.h"
#include "suite_run.h"

/* A shipped config, found as zerosim finds it (the test's main() sets
 * ZEROSIM_DATADIR to the source tree). */
static struct zs_model shipped(const char *name)
{
	struct zs_model m;
	char *cause = NULL;

	ck_assert_msg(zs_model_load(name, &m, &cause) == 0, "%s: %s", name, cause);
	return m;
}

/* The tensor of p named name; the test fails where there is none. */
static const struct step_tensor *named(const struct step_params *p, const char *name)
{
	char buf[160];
	for (size_t i = 0; i < p->ntensors; i++)
		if (strcmp(step_tensor_name(p, i, buf, sizeof buf), name) == 0)
			return &p->tensor[i];
	ck_abort_msg("no tensor %s", name);
	return NULL;
}

/* Runs the suite s with the shipped configs read from the source tree
 * (make check sets srcdir; a ZEROSIM_DATADIR already set wins): main's
 * exit status. */
static int run_with_shipped(Suite *s)
{
	const char *srcdir = getenv("srcdir");
	if (getenv("ZEROSIM_DATADIR") == NULL)
		setenv("ZEROSIM_DATADIR", srcdir != NULL ? srcdir : ".", 1);
	return suite_run(s);
}

#endif

/*
 * ds_suite — what the DeepSpeed engine tests (test_deepspeed,
 * test_ds_accum) share: a run of the engine that must succeed, and the
 * suite's run to an exit status. Include after <check.h> and
 * engine/engine.h.
 */
#ifndef ZS_DS_SUITE_H
#define ZS_DS_SUITE_H

#include <stdlib.h>

/* engine_run of scheme s at N = n, unit u (the final weights with
 * weights), failing the test with the cause if it fails; the caller frees
 * the result (engine_result_free). */
static inline struct zs_result ds_run(const struct zs_config *c, enum zs_scheme s, unsigned n, enum zs_unit u,
                                      int weights)
{
	struct zs_result res;
	struct zs_run_options opt = {.weights = weights};
	char *cause = NULL;
	int r = engine_run(c, s, n, u, NULL, &opt, &res, &cause);
	ck_assert_msg(r == 0, "engine_run failed: %s", cause ? cause : "?");
	return res;
}

/* Suite s (its test cases added) run; main's exit status. */
static inline int ds_run_suite(Suite *s)
{
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}

#endif

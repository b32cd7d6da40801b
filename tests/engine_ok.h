/*
 * engine_ok — the engine tests' run (test_deepspeed, test_ds_accum,
 * test_paper_accum): engine_run, which must succeed. Include after
 * <check.h> and engine/engine.h.
 */
#ifndef ZS_TESTS_ENGINE_OK_H
#define ZS_TESTS_ENGINE_OK_H

/* engine_run of scheme s at N = n, unit u (the final weights with
 * weights), failing the test with the cause if it fails; the caller frees
 * the result (engine_result_free). */
static inline struct zs_result engine_ok(const struct zs_config *c, enum zs_scheme s, unsigned n, enum zs_unit u,
                                         int weights)
{
	struct zs_result res;
	struct zs_run_options opt = {.weights = weights};
	char *cause = NULL;
	int r = engine_run(c, s, n, u, NULL, &opt, &res, &cause);
	ck_assert_msg(r == 0, "engine_run failed: %s", cause ? cause : "?");
	return res;
}

#endif

/*
 * suite_run — a test program's main() after its suite is built: the suite
 * run, main's exit status. Include after <check.h>.
 */
#ifndef ZS_TESTS_SUITE_RUN_H
#define ZS_TESTS_SUITE_RUN_H

#include <stdlib.h>

static inline int suite_run(Suite *s)
{
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}

#endif

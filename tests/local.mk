# Engine tests (Check) and the command-line tests.
check_PROGRAMS += tests/test_engine
TESTS += tests/test_engine
tests_test_engine_SOURCES = tests/test_engine.c
tests_test_engine_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
tests_test_engine_LDADD = libzsengine.a libzsutil.a $(CJSON_LIBS) $(CHECK_LIBS) -lm

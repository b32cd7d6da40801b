# Engine tests (Check) and the command-line tests.
check_PROGRAMS += tests/test_engine
TESTS += tests/test_engine
tests_test_engine_SOURCES = tests/test_engine.c
tests_test_engine_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
tests_test_engine_LDADD = libzsengine.a libzsutil.a $(CJSON_LIBS) $(XXHASH_LIBS) $(CHECK_LIBS) -lm

# The tracker sees every byte: peak RSS against the tracked peaks.
check_PROGRAMS += tests/test_rss
TESTS += tests/test_rss
tests_test_rss_SOURCES = tests/test_rss.c
tests_test_rss_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
tests_test_rss_LDADD = libzsutil.a $(CJSON_LIBS) $(CHECK_LIBS)

# The transformer's layers and model (Check): finite differences, training.
check_PROGRAMS += tests/test_tfm
TESTS += tests/test_tfm
tests_test_tfm_SOURCES = tests/test_tfm.c
tests_test_tfm_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
tests_test_tfm_LDADD = libzsengine.a libzsutil.a $(CJSON_LIBS) $(XXHASH_LIBS) $(OPENBLAS_LIBS) $(CHECK_LIBS) -lm

# Agreement with PyTorch (skipped where no python3 imports torch).
check_PROGRAMS += tests/tfm_dump
tests_tfm_dump_SOURCES = tests/tfm_dump.c
tests_tfm_dump_LDADD = libzsengine.a libzsutil.a $(CJSON_LIBS) $(XXHASH_LIBS) $(OPENBLAS_LIBS) -lm
TESTS += tests/tfm_torch.sh
EXTRA_DIST += tests/tfm_torch.sh tests/tfm_torch.py

# make bench: the transformer's matrix product, own kernel against OpenBLAS.
EXTRA_PROGRAMS = tests/bench_matmul
tests_bench_matmul_SOURCES = tests/bench_matmul.c
tests_bench_matmul_LDADD = libzsengine.a libzsutil.a $(OPENBLAS_LIBS) -lm
CLEANFILES += tests/bench_matmul$(EXEEXT)

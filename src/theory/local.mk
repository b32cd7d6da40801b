# theory stage. Included by the top Makefile.am;
# paths are relative to the top directory. The theory never links the engine:
# neither libzstheory.a nor its tests name an engine object.
libzstheory_a_SOURCES = \
	src/theory/theory.c src/theory/theory.h \
	src/theory/theory_tfm.c src/theory/theory_walk.c \
	src/theory/theory_json.c src/theory/theory_text.c \
	src/theory/theory_framework.c src/theory/theory_deepspeed.c \
	src/theory/theory_alloc.c src/theory/theory_autograd.c \
	src/theory/theory_nccl.c src/theory/theory_nccl.h \
	src/theory/theory_routing.c

zerosim_SOURCES += src/cli/cmd_theory.c

# Unit tests: the ZeRO paper's Table 1 and hand-worked schedules.
if HAVE_CHECK
check_PROGRAMS += tests/test_theory
TESTS += tests/test_theory
tests_test_theory_SOURCES = tests/test_theory.c tests/model_lookup.h tests/suite_run.h
tests_test_theory_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
tests_test_theory_LDADD = libzstheory.a libzsutil.a $(CJSON_LIBS) $(CHECK_LIBS) -lm
# NCCL's buffers per communicator, worked by hand from NCCL's sizes.
check_PROGRAMS += tests/test_nccl
TESTS += tests/test_nccl
tests_test_nccl_SOURCES = tests/test_nccl.c
tests_test_nccl_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
tests_test_nccl_LDADD = libzstheory.a libzsutil.a $(CJSON_LIBS) $(CHECK_LIBS) -lm
endif

# Integration: `zerosim theory` against `zerosim measure`, point by point,
# through their JSON files, and the command line's answers to bad input.
check_PROGRAMS += tests/json_agree
tests_json_agree_SOURCES = tests/json_agree.c
tests_json_agree_LDADD = libzsutil.a $(CJSON_LIBS)
# (tests/theory_vs_measure.sh is in TESTS' head, Makefile.am: the longest start first)
TESTS += tests/theory_cli.sh
EXTRA_DIST += tests/theory_vs_measure.sh tests/theory_cli.sh
# DeepSpeed's defaults on a transformer past its persistence threshold, and
# the precision theory and measure take with --model when none is given.
TESTS += tests/ds_defaults.sh
EXTRA_DIST += tests/ds_defaults.sh tests/agree_lib.sh

# report stage. Paths are relative to the top; the report never links the
# engine or the theory (docs/design.md).
libzsreport_a_SOURCES = \
	src/report/report.c src/report/report.h \
	src/report/report_buf.c src/report/report_buf.h \
	src/report/report_data.c src/report/report_data.h \
	src/report/report_classify.c src/report/report_classify.h \
	src/report/report_findings.c src/report/report_findings.h \
	src/report/report_text.c src/report/report_text.h \
	src/report/report_figures.c src/report/report_figures.h \
	src/report/report_exec.c src/report/report_exec.h \
	src/report/report_overhead.c src/report/report_overhead.h \
	src/report/report_host.c src/report/report_host.h \
	src/report/report_tfm_data.c src/report/report_tfm_data.h \
	src/report/report_tfm.c src/report/report_tfm.h \
	src/report/report_moe.c src/report/report_moe.h \
	src/report/report_torch.c src/report/report_torch.h

zerosim_SOURCES += src/cli/cmd_report.c

if HAVE_CHECK
check_PROGRAMS += tests/test_report
TESTS += tests/test_report
tests_test_report_SOURCES = tests/test_report.c tests/suite_run.h
tests_test_report_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
tests_test_report_LDADD = libzsreport.a libzsutil.a $(CJSON_LIBS) $(CHECK_LIBS) -lm
endif

# The transformer section on the shipped tiny models; the MLP's outputs unchanged.
TESTS += tests/report_transformer.sh
EXTRA_DIST += tests/report_transformer.sh
# The families' departures from Korthikanti's layer (gemma2, qwen3, a
# mixture), worked by hand in the report and the theory's text (about 2 s)
TESTS += tests/report_families.sh
EXTRA_DIST += tests/report_families.sh

# The report on runs of K micro-steps: DeepSpeed zero3's gathers against 2K a step.
TESTS += tests/report_accum.sh
EXTRA_DIST += tests/report_accum.sh

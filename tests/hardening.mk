# hardening: bad input and fuzzing. Included by the top
# Makefile.am; paths are relative to the top directory.
#
#   make check      runs tests/cli_errors.sh (every bad option and file:
#                   exit status, one stderr line, --out untouched, signals)
#                   and tests/fuzz_regress.sh (every input a fuzzer ever
#                   crashed on, fed to the real binary: a clean exit 2)
#   make fuzz       builds one libFuzzer harness per JSON reader with clang
#   make fuzz-run   runs each for FUZZ_SECONDS on a copy of its seed corpus;
#                   a crash fails it, the input lands in tests/fuzz/crashes/

TESTS += tests/cli_errors.sh tests/fuzz_regress.sh
EXTRA_DIST += tests/cli_errors.sh tests/json_edit.sh tests/fuzz_regress.sh \
	tests/fuzz/fuzz_common.h tests/fuzz/fuzz_report.h \
	tests/fuzz/fuzz_case.c tests/fuzz/fuzz_spec.c \
	tests/fuzz/fuzz_measured.c tests/fuzz/fuzz_theory.c tests/fuzz/fuzz_model.c tests/fuzz/fuzz_routing.c \
	tests/fuzz/zerosim.dict tests/fuzz/corpus tests/fuzz/regress

# ---------------------------------------------------------------------------
# libFuzzer harnesses. Each is linked from the sources it needs, compiled
# here with clang and the fuzzer's flags into tests/fuzz/obj/ (never from
# the libraries, which are built with the project's compiler and flags),
# with config.h from the build directory; each source compiled once for
# all six, side by side under make -j (before: each harness one clang
# over all its sources, 187 compilations of 77 files; make -j2 fuzz 172 s,
# now 50 s on 2 cores, 2026-12-07).
FUZZ_SECONDS = 30
FUZZ_FLAGS = -timeout=60 -rss_limit_mb=2048
FUZZ_NAMES = case spec measured theory model routing
FUZZ_PROGS = $(FUZZ_NAMES:%=tests/fuzz/fuzz_%)
FUZZ_CFLAGS_COMMON = -std=gnu11 -fno-sanitize-recover=all -g -O1 \
	-D_GNU_SOURCE -I$(top_builddir) -I$(top_srcdir)/tests/fuzz $(AM_CPPFLAGS)
FUZZ_CFLAGS = -fsanitize=fuzzer,address,undefined $(FUZZ_CFLAGS_COMMON)
FUZZ_LIBS = $(CJSON_LIBS) -lm
FUZZ_COMMON = $(top_srcdir)/tests/fuzz/fuzz_common.h $(top_builddir)/config.h \
	$(top_srcdir)/src/util/util.h $(top_srcdir)/src/util/config.h $(top_srcdir)/src/util/freeze.h
# Every source of libzsutil.a (Makefile.am), built here with the fuzzer flags
# (the four lists name them under src/).
FUZZ_UTIL = util/util.c util/config.c \
	util/schedule.c util/datafile.c \
	util/buf.c util/model.c \
	util/step.c util/ds_coord.c \
	util/cuda_alloc.c util/autograd.c \
	util/ag_ddp.c util/ag_pass.c \
	util/ag_fsdp.c util/ag_zero1.c \
	util/ag_ds.c \
	util/ag_ds3.c \
	util/freeze.c util/nf4.c \
	util/lora.c
# The case reader reads a transformer's shape through engine/tfm.h, whose
# sources need the rest of the engine: every source of libzsengine.a.
FUZZ_ENGINE = engine/case.c engine/tfm.c \
	engine/tfm_kernels.c engine/tfm_net.c engine/moe_kernels.c \
	engine/tfm_moe.c \
	engine/ag_exec.c \
	engine/fp16.c engine/tracker.c engine/coll.c \
	engine/mlp.c engine/optim.c engine/net.c \
	engine/layout.c engine/scheme_dp.c \
	engine/scheme_zero1.c engine/scheme_zero2.c \
	engine/scheme_zero3.c engine/scheme_torch.c \
	engine/scheme_deepspeed.c engine/scheme_registry.c \
	engine/engine.c \
	engine/heap.c engine/sweep.c \
	engine/measure_json.c engine/osmem.c engine/blas.c
FUZZ_REPORT = report/report.c report/report_buf.c \
	report/report_data.c report/report_classify.c \
	report/report_findings.c report/report_text.c \
	report/report_figures.c report/report_exec.c \
	report/report_overhead.c report/report_tfm.c \
	report/report_tfm_data.c report/report_host.c \
	report/report_moe.c \
	report/report_torch.c
FUZZ_REPORT_H = $(top_srcdir)/tests/fuzz/fuzz_report.h $(top_srcdir)/src/report/report_data.h \
	$(top_srcdir)/src/report/report_classify.h $(top_srcdir)/src/report/report_findings.h \
	$(top_srcdir)/src/report/report_text.h $(top_srcdir)/src/report/report_figures.h \
	$(top_srcdir)/src/report/report_buf.h $(top_srcdir)/src/report/report_overhead.h \
	$(top_srcdir)/src/report/report_tfm.h $(top_srcdir)/src/report/report_tfm_data.h \
	$(top_srcdir)/src/report/report_host.h $(top_srcdir)/src/report/report_torch.h \
	$(top_srcdir)/src/report/report_moe.h
# The valid file each report harness joins its input with.
FUZZ_PARTNER_measured = $(abs_top_srcdir)/tests/fuzz/corpus/theory/valid-4-8-4-model-layer.json
FUZZ_PARTNER_theory = $(abs_top_srcdir)/tests/fuzz/corpus/measured/valid-4-8-4-model.json

fuzz_need_clang = if test -z "$(CLANG)"; then \
	  echo "make fuzz: configure found no clang; install clang and libclang-rt-dev, then rerun configure" >&2; \
	  exit 1; fi; $(MKDIR_P) tests/fuzz

tests/fuzz/fuzz_case: $(top_srcdir)/tests/fuzz/fuzz_case.c $(FUZZ_COMMON) $(FUZZ_UTIL_O) $(FUZZ_ENGINE_O) \
		$(top_srcdir)/src/engine/engine.h
	@$(fuzz_need_clang)
	$(AM_V_GEN)$(CLANG) $(FUZZ_CFLAGS) -o $@ $(top_srcdir)/tests/fuzz/fuzz_case.c \
		$(FUZZ_ENGINE_O) $(FUZZ_UTIL_O) $(FUZZ_LIBS) $(XXHASH_LIBS) $(OPENBLAS_LIBS) -lpthread

tests/fuzz/fuzz_spec: $(top_srcdir)/tests/fuzz/fuzz_spec.c $(FUZZ_COMMON) $(FUZZ_UTIL_O)
	@$(fuzz_need_clang)
	$(AM_V_GEN)$(CLANG) $(FUZZ_CFLAGS) -o $@ $(top_srcdir)/tests/fuzz/fuzz_spec.c \
		$(FUZZ_UTIL_O) $(FUZZ_LIBS)

tests/fuzz/fuzz_measured: $(top_srcdir)/tests/fuzz/fuzz_measured.c $(FUZZ_COMMON) $(FUZZ_UTIL_O) \
		$(FUZZ_REPORT_O) $(FUZZ_REPORT_H)
	@$(fuzz_need_clang)
	$(AM_V_GEN)$(CLANG) $(FUZZ_CFLAGS) -DFUZZ_PARTNER='"$(FUZZ_PARTNER_measured)"' -o $@ \
		$(top_srcdir)/tests/fuzz/fuzz_measured.c $(FUZZ_REPORT_O) $(FUZZ_UTIL_O) $(FUZZ_LIBS)

tests/fuzz/fuzz_theory: $(top_srcdir)/tests/fuzz/fuzz_theory.c $(FUZZ_COMMON) $(FUZZ_UTIL_O) \
		$(FUZZ_REPORT_O) $(FUZZ_REPORT_H)
	@$(fuzz_need_clang)
	$(AM_V_GEN)$(CLANG) $(FUZZ_CFLAGS) -DFUZZ_PARTNER='"$(FUZZ_PARTNER_theory)"' -o $@ \
		$(top_srcdir)/tests/fuzz/fuzz_theory.c $(FUZZ_REPORT_O) $(FUZZ_UTIL_O) $(FUZZ_LIBS)

# The config reader and the theory that reads what it accepts.
FUZZ_MODEL = theory/theory.c theory/theory_tfm.c \
	theory/theory_walk.c theory/theory_routing.c \
	theory/theory_framework.c theory/theory_deepspeed.c \
	theory/theory_text.c theory/theory_alloc.c \
	theory/theory_autograd.c theory/theory_nccl.c
tests/fuzz/fuzz_model: $(top_srcdir)/tests/fuzz/fuzz_model.c $(FUZZ_COMMON) $(FUZZ_UTIL_O) $(FUZZ_MODEL_O) \
		$(top_srcdir)/src/util/model.h $(top_srcdir)/src/theory/theory.h
	@$(fuzz_need_clang)
	$(AM_V_GEN)$(CLANG) $(FUZZ_CFLAGS) -o $@ \
		$(top_srcdir)/tests/fuzz/fuzz_model.c $(FUZZ_MODEL_O) $(FUZZ_UTIL_O) $(FUZZ_LIBS)

# theory --routing FILE's reader alone: theory_routing.c needs only the
# util sources (its theory.json output is theory_json.c's).
tests/fuzz/fuzz_routing: $(top_srcdir)/tests/fuzz/fuzz_routing.c $(FUZZ_COMMON) $(FUZZ_UTIL_O) \
		tests/fuzz/obj/theory/theory_routing.o $(top_srcdir)/src/theory/theory.h
	@$(fuzz_need_clang)
	$(AM_V_GEN)$(CLANG) $(FUZZ_CFLAGS) -o $@ \
		$(top_srcdir)/tests/fuzz/fuzz_routing.c tests/fuzz/obj/theory/theory_routing.o $(FUZZ_UTIL_O) $(FUZZ_LIBS)

# The objects: each source of the six lists once, with the fuzzer's
# instrumentation but not its main (fuzzer-no-link); every header of src/
# a prerequisite of each (a make-time wildcard: a header's change remakes
# them all).
FUZZ_OBJ_CFLAGS = -fsanitize=fuzzer-no-link,address,undefined $(FUZZ_CFLAGS_COMMON)
FUZZ_UTIL_O = $(FUZZ_UTIL:%.c=tests/fuzz/obj/%.o)
FUZZ_ENGINE_O = $(FUZZ_ENGINE:%.c=tests/fuzz/obj/%.o)
FUZZ_REPORT_O = $(FUZZ_REPORT:%.c=tests/fuzz/obj/%.o)
FUZZ_MODEL_O = $(FUZZ_MODEL:%.c=tests/fuzz/obj/%.o)
FUZZ_OBJS = $(FUZZ_UTIL_O) $(FUZZ_ENGINE_O) $(FUZZ_REPORT_O) $(FUZZ_MODEL_O)
$(FUZZ_OBJS): tests/fuzz/obj/%.o: $(top_srcdir)/src/%.c $(top_builddir)/config.h $(top_srcdir)/src/*/*.h
	@$(fuzz_need_clang)
	@$(MKDIR_P) $(@D)
	$(AM_V_CC)$(CLANG) $(FUZZ_OBJ_CFLAGS) -c -o $@ $<

fuzz: $(FUZZ_PROGS)

# Each harness on a fresh copy of its seeds and regression inputs, so the
# source tree's corpus never grows behind anyone's back. New inputs stay in
# tests/fuzz/work/NAME for a longer run; a crash's input is saved in
# tests/fuzz/crashes/NAME/ (copy it to tests/fuzz/regress/NAME/ once fixed).
# One target a harness, each needing only its own program, so that
# make -j fuzz-run builds and runs them side by side (each still runs
# FUZZ_SECONDS; give make no more jobs than cores, or they share them).
fuzz_run_one = rm -rf tests/fuzz/work/$$n && $(MKDIR_P) tests/fuzz/work/$$n tests/fuzz/crashes/$$n || exit 1; \
	cp $(top_srcdir)/tests/fuzz/corpus/$$n/* tests/fuzz/work/$$n/ || exit 1; \
	if test -d $(top_srcdir)/tests/fuzz/regress/$$n; then \
	  cp $(top_srcdir)/tests/fuzz/regress/$$n/* tests/fuzz/work/$$n/ 2>/dev/null; fi; \
	echo "fuzz-run: fuzz_$$n for $(FUZZ_SECONDS) s"; \
	./tests/fuzz/fuzz_$$n -max_total_time=$(FUZZ_SECONDS) $(FUZZ_FLAGS) \
	  -dict=$(top_srcdir)/tests/fuzz/zerosim.dict \
	  -artifact_prefix=tests/fuzz/crashes/$$n/ tests/fuzz/work/$$n \
	  >tests/fuzz/fuzz_$$n.log 2>&1; \
	status=$$?; grep -E '^(\#[0-9]+.*DONE|Done [0-9]+ runs)' tests/fuzz/fuzz_$$n.log | sed "s/^/fuzz_$$n: /"; \
	if test $$status -ne 0; then \
	  echo "fuzz-run: fuzz_$$n FAILED (status $$status); see tests/fuzz/fuzz_$$n.log and tests/fuzz/crashes/$$n/" >&2; \
	  exit 1; \
	fi
$(FUZZ_NAMES:%=fuzz-run-%): fuzz-run-%: tests/fuzz/fuzz_%
	@n=$*; $(fuzz_run_one)
fuzz-run: $(FUZZ_NAMES:%=fuzz-run-%)

.PHONY: fuzz fuzz-run $(FUZZ_NAMES:%=fuzz-run-%)
CLEANFILES += $(FUZZ_PROGS) $(FUZZ_NAMES:%=tests/fuzz/fuzz_%.log)
mostlyclean-local:
	rm -rf tests/fuzz/work tests/fuzz/crashes tests/fuzz/obj

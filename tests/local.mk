# Engine tests (Check) and the command-line tests.
if HAVE_CHECK
check_PROGRAMS += tests/test_engine
TESTS += tests/test_engine
tests_test_engine_SOURCES = tests/test_engine.c
tests_test_engine_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
tests_test_engine_LDADD = libzsengine.a libzsutil.a $(CJSON_LIBS) $(XXHASH_LIBS) $(OPENBLAS_LIBS) $(CHECK_LIBS) -lm

# The tracker sees every byte: peak RSS against the tracked peaks.
check_PROGRAMS += tests/test_rss
TESTS += tests/test_rss
tests_test_rss_SOURCES = tests/test_rss.c
tests_test_rss_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
tests_test_rss_LDADD = libzsutil.a $(CJSON_LIBS) $(CHECK_LIBS)

# LoRA's adapters over the step description (util/lora.h): PEFT's counts
# and order, from the shape alone.
check_PROGRAMS += tests/test_lora
TESTS += tests/test_lora
tests_test_lora_SOURCES = tests/test_lora.c tests/model_lookup.h tests/suite_run.h
tests_test_lora_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
tests_test_lora_LDADD = libzsutil.a $(CJSON_LIBS) $(CHECK_LIBS) -lm
endif

# The arithmetic pinned: golden digests and losses of fixed runs.
if HAVE_CHECK
check_PROGRAMS += tests/test_golden
TESTS += tests/test_golden
tests_test_golden_SOURCES = tests/test_golden.c
tests_test_golden_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
tests_test_golden_LDADD = libzsengine.a libzsutil.a $(CJSON_LIBS) $(XXHASH_LIBS) $(OPENBLAS_LIBS) $(CHECK_LIBS) -lm
endif

# Hostile input, class by class: files, limits, signals, paths.
TESTS += tests/hostile.sh
EXTRA_DIST += tests/hostile.sh

# Where report finds its template without --template.
TESTS += tests/datafile.sh
EXTRA_DIST += tests/datafile.sh

# --model by Hub id, in any case, and from a fake Hugging Face cache.
TESTS += tests/model_names.sh
EXTRA_DIST += tests/model_names.sh

# The phi3 family: a tiny one trained, its digests, the shipped config.
TESTS += tests/phi3.sh
EXTRA_DIST += tests/phi3.sh

# The qwen2 family: a tiny one trained (the loss falls over 100 steps),
# its units, its fp32 digests.
TESTS += tests/qwen2.sh
EXTRA_DIST += tests/qwen2.sh

# The qwen3 family: a tiny one trained, its digests, the shipped config.
TESTS += tests/qwen3.sh
EXTRA_DIST += tests/qwen3.sh tests/family_lib.sh

# The gemma2 family: a tiny one trained, its digests, the shipped config.
TESTS += tests/gemma2.sh
EXTRA_DIST += tests/gemma2.sh
# The gemma3_text family: a tiny one trained, its digests, its rotary
# bases, the shipped config, what is refused.
TESTS += tests/gemma3.sh
EXTRA_DIST += tests/gemma3.sh

# The transformer's layers and model (Check): finite differences, training.
if HAVE_CHECK
check_PROGRAMS += tests/test_tfm
TESTS += tests/test_tfm
tests_test_tfm_SOURCES = tests/test_tfm.c tests/tfm_driver.c tests/tfm_driver.h
tests_test_tfm_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
tests_test_tfm_LDADD = libzstheory.a libzsengine.a libzsutil.a $(CJSON_LIBS) $(XXHASH_LIBS) $(OPENBLAS_LIBS) $(CHECK_LIBS) -lm
endif

# The PyTorch step's executor (Check): its kernels against hand values
# and finite differences, the lifetimes it refuses.
if HAVE_CHECK
check_PROGRAMS += tests/test_ag_exec
TESTS += tests/test_ag_exec
tests_test_ag_exec_SOURCES = tests/test_ag_exec.c
tests_test_ag_exec_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
tests_test_ag_exec_LDADD = libzsengine.a libzsutil.a $(CJSON_LIBS) $(XXHASH_LIBS) $(OPENBLAS_LIBS) $(CHECK_LIBS) -lm
endif

# The plain loop's engine computes the step it describes: its losses are
# the fused engine's (first step: the forward and the loss; three steps:
# backward and Adam too).
TESTS += tests/ag_exec_losses.sh tests/ag_exec_train.sh tests/ag_exec_llama.sh tests/ag_exec_families.sh
EXTRA_DIST += tests/ag_exec_losses.sh tests/ag_exec_train.sh tests/ag_exec_llama.sh tests/ag_exec_families.sh
# measure --timeline and the theory agree on every phase under DDP and FSDP
TESTS += tests/ag_exec_phases.sh
EXTRA_DIST += tests/ag_exec_phases.sh

# Mixtures of experts (issue #25): the mixtral config, its description
# and the engine's routing kernels against hand counts and finite differences;
# the kernels against PyTorch running transformers' MixtralSparseMoeBlock.
if HAVE_CHECK
check_PROGRAMS += tests/test_moe
TESTS += tests/test_moe
tests_test_moe_SOURCES = tests/test_moe.c tests/model_lookup.h tests/suite_run.h tests/moe_model.c tests/moe_model.h
tests_test_moe_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
tests_test_moe_LDADD = libzsengine.a libzsutil.a $(CJSON_LIBS) $(XXHASH_LIBS) $(OPENBLAS_LIBS) $(CHECK_LIBS) -lm
endif
check_PROGRAMS += tests/moe_dump
tests_moe_dump_SOURCES = tests/moe_dump.c
tests_moe_dump_LDADD = libzsengine.a libzsutil.a $(CJSON_LIBS) $(XXHASH_LIBS) $(OPENBLAS_LIBS) -lm
TESTS += tests/moe_torch.sh
EXTRA_DIST += tests/moe_torch.sh tests/moe_torch.py tests/moe_cmp.py
check_PROGRAMS += tests/moe_model_dump
tests_moe_model_dump_SOURCES = tests/moe_model_dump.c tests/moe_model.c tests/moe_model.h
tests_moe_model_dump_LDADD = libzsengine.a libzsutil.a $(CJSON_LIBS) $(XXHASH_LIBS) $(OPENBLAS_LIBS) -lm
TESTS += tests/moe_model_torch.sh
EXTRA_DIST += tests/moe_model_torch.sh tests/moe_model_torch.py
TESTS += tests/moe_step.sh
EXTRA_DIST += tests/moe_step.sh
TESTS += tests/moe_theory.sh
EXTRA_DIST += tests/moe_theory.sh tests/moe_lib.sh
TESTS += tests/qwen_moe.sh
EXTRA_DIST += tests/qwen_moe.sh
TESTS += tests/qwen3_moe.sh
EXTRA_DIST += tests/qwen3_moe.sh
TESTS += tests/moe_fw.sh
EXTRA_DIST += tests/moe_fw.sh
TESTS += tests/ds_moe.sh
EXTRA_DIST += tests/ds_moe.sh
# zerosim's own DeepSpeed ZeRO-3: each gathered param in DeepSpeed's block
# (padded at N > 1 where DeepSpeed's buffer is, a view at N = 1)
TESTS += tests/ds3_gather.sh
EXTRA_DIST += tests/ds3_gather.sh

# Agreement with PyTorch (skipped where no python3 imports torch).
check_PROGRAMS += tests/tfm_dump
tests_tfm_dump_SOURCES = tests/tfm_dump.c tests/tfm_driver.c tests/tfm_driver.h
tests_tfm_dump_LDADD = libzsengine.a libzsutil.a $(CJSON_LIBS) $(XXHASH_LIBS) $(OPENBLAS_LIBS) -lm
TESTS += tests/tfm_torch.sh
EXTRA_DIST += tests/tfm_torch.sh tests/tfm_torch.py
TESTS += tests/fsdp_torch.sh
EXTRA_DIST += tests/fsdp_torch.sh tests/fsdp_torch.py tests/torch_python.sh
# ZS_TORCH_CACHE: the references' results kept for a second make
# check-torch (tests/torch_python.sh, docs/torch_saved.md)
EXTRA_DIST += tests/torch_cache.sh tests/torch_cache.py tests/batch_torch.py tests/batch_lib.sh
TESTS += tests/torch_cache_check.sh
EXTRA_DIST += tests/torch_cache_check.sh

# Frameworks (torch's zero1): engine and theory against a hand-worked partition.
if HAVE_CHECK
check_PROGRAMS += tests/test_framework
TESTS += tests/test_framework
tests_test_framework_SOURCES = tests/test_framework.c
tests_test_framework_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
tests_test_framework_LDADD = libzstheory.a libzsengine.a libzsutil.a $(CJSON_LIBS) $(XXHASH_LIBS) $(OPENBLAS_LIBS) $(CHECK_LIBS) -lm
endif
TESTS += tests/framework_cli.sh
EXTRA_DIST += tests/framework_cli.sh
# DeepSpeed's engine over the PyTorch step (--wrapper deepspeed, ZeRO-1/2
# fp32): theory = measure, DDP's losses, stage 2's freed gradients, and
# what is not built refused (docs/schedule.md, "DeepSpeed over the PyTorch
# step")
# (tests/ds_torch.sh: in TESTS' head, Makefile.am: the longest start first)
EXTRA_DIST += tests/ds_torch.sh
# ZeRO-3 over the PyTorch step at N > 1 (read, not built): its refusal, and
# which releases PyTorch 1.13 cannot free (docs/schedule.md, "ZeRO-3 over
# the PyTorch step")
TESTS += tests/ds3_torch.sh
EXTRA_DIST += tests/ds3_torch.sh tests/ds3_saved.py
# DeepSpeed's ZeRO-1/2 transcribed onto real PyTorch 1.13 (N = 1 and 2): zerosim's
# fp32 pass = PyTorch's allocator to the byte; bf16 (not built) refused by
# name, its bytes by hand (docs/schedule.md, "DeepSpeed over the PyTorch step")
TESTS += tests/ds_bf16_torch.sh
EXTRA_DIST += tests/ds_bf16_torch.sh tests/ds_bf16_torch.py
# --wrapper deepspeed under PyTorch 2.6 (ZeRO-1/2 fp32 and bf16, eager and
# SDPA, ZeRO-3), the transcriptions above run in 2.6's root: make
# check-torch26 alone (TORCH26_RUNS), not make check
EXTRA_DIST += tests/ds_torch26.sh
# A mixture of experts under --wrapper deepspeed (ZeRO-1/2, fp32): measure =
# theory and the refusals (make check); the theory = PyTorch 1.13's
# allocator over the same transcription (make check-torch)
TESTS += tests/ds_moe_wrapper.sh tests/ds_moe_torch.sh
EXTRA_DIST += tests/ds_moe_wrapper.sh tests/ds_moe_torch.sh tests/moe_configs.sh

# DeepSpeed's ZeRO-1/2: engine and theory against hand computations; the
# command line's DeepSpeed settings and their refusals.
if HAVE_CHECK
check_PROGRAMS += tests/test_deepspeed
TESTS += tests/test_deepspeed
tests_test_deepspeed_SOURCES = tests/test_deepspeed.c tests/engine_ok.h tests/suite_run.h
tests_test_deepspeed_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
tests_test_deepspeed_LDADD = libzstheory.a libzsengine.a libzsutil.a $(CJSON_LIBS) $(XXHASH_LIBS) $(OPENBLAS_LIBS) $(CHECK_LIBS) -lm
check_PROGRAMS += tests/test_ds_accum
TESTS += tests/test_ds_accum
tests_test_ds_accum_SOURCES = tests/test_ds_accum.c tests/accum_lib.h tests/engine_ok.h tests/suite_run.h
tests_test_ds_accum_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
tests_test_ds_accum_LDADD = libzstheory.a libzsengine.a libzsutil.a $(CJSON_LIBS) $(XXHASH_LIBS) $(OPENBLAS_LIBS) $(CHECK_LIBS) -lm
check_PROGRAMS += tests/test_paper_accum
TESTS += tests/test_paper_accum
tests_test_paper_accum_SOURCES = tests/test_paper_accum.c tests/accum_lib.h tests/engine_ok.h tests/suite_run.h
tests_test_paper_accum_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
tests_test_paper_accum_LDADD = libzstheory.a libzsengine.a libzsutil.a $(CJSON_LIBS) $(XXHASH_LIBS) $(OPENBLAS_LIBS) $(CHECK_LIBS) -lm
endif
TESTS += tests/deepspeed_cli.sh
EXTRA_DIST += tests/deepspeed_cli.sh

# PyTorch's CUDA caching allocator replayed (src/util/cuda_alloc.c): one
# short trace per rule, worked by hand from the cited source lines.
if HAVE_CHECK
check_PROGRAMS += tests/test_cuda_alloc
TESTS += tests/test_cuda_alloc
tests_test_cuda_alloc_SOURCES = tests/test_cuda_alloc.c
tests_test_cuda_alloc_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
tests_test_cuda_alloc_LDADD = libzsutil.a $(CJSON_LIBS) $(CHECK_LIBS) -lm
endif

# BLAS on one thread: a transformer's results under 1 and 2 CPUs and
# OPENBLAS_NUM_THREADS 1 and 2 are the same.
TESTS += tests/blas_threads.sh
EXTRA_DIST += tests/blas_threads.sh

# Signals aimed at the write of an output: no temporary file is left.
# tests/sig_at.so is preloaded into zerosim to send them (a shared library,
# built by hand: the project has no libtool).
TESTS += tests/signal_write.sh
EXTRA_DIST += tests/signal_write.sh tests/sig_at.c
check_DATA = tests/sig_at.so
CLEANFILES += tests/sig_at.so
tests/sig_at.so: $(top_srcdir)/tests/sig_at.c
	@$(MKDIR_P) tests
	$(AM_V_CC)$(CC) $(CPPFLAGS) $(AM_CFLAGS) $(CFLAGS) -shared -fPIC -o $@ $(top_srcdir)/tests/sig_at.c -ldl

# Under ulimit -v every command answers or says why not in one line, and
# ends (the threaded OpenBLAS hung at exit).
TESTS += tests/memlimit.sh
EXTRA_DIST += tests/memlimit.sh

# No include cycle among the modules of src/engine and src/theory.
TESTS += tests/includes.sh
EXTRA_DIST += tests/includes.sh

# Eager PyTorch training Hugging Face's GPT-2 and Llama op for op (the
# reference of docs/torch_saved.md): the bytes between steps against zerosim's resident.
TESTS += tests/hf_torch.sh
EXTRA_DIST += tests/hf_torch.sh tests/hf_torch.py tests/torch26_root.sh
check_PROGRAMS += tests/ag_events
tests_ag_events_SOURCES = tests/ag_events.c
tests_ag_events_LDADD = libzsutil.a $(CJSON_LIBS) $(XXHASH_LIBS) -lm
TESTS += tests/moe_hf_torch.sh
EXTRA_DIST += tests/moe_hf_torch.sh
TESTS += tests/moe_measure.sh
EXTRA_DIST += tests/moe_measure.sh
TESTS += tests/moe_fused.sh
EXTRA_DIST += tests/moe_fused.sh

# Fine-tuning's reference (issue #23): accumulation, frozen parameters,
# LoRA and DDP no_sync in real PyTorch, its own invariants (about 75 s on
# 2 cores: in check-torch-ref, not in check).
EXTRA_DIST += tests/ft_torch.sh tests/ft_torch.py
# zerosim's --grad-accum (plain loop and DDP with and without no_sync)
# against tests/ft_torch.py, to the byte (about 60 s on 2 cores).
TESTS += tests/ft_accum.sh
EXTRA_DIST += tests/ft_accum.sh
TESTS += tests/paper_accum_tfm.sh
EXTRA_DIST += tests/paper_accum_tfm.sh
# --freeze (issue #23's frozen parameters): zerosim's theory and measure of
# the plain loop and DDP N = 2 against PyTorch 1.13 with the same
# parameters frozen, to the byte (about 2 minutes on 2 cores)
TESTS += tests/ft_freeze.sh
EXTRA_DIST += tests/ft_freeze.sh
# --freeze under the paper's schedule (docs/schedule.md): theory = measure,
# the losses against the PyTorch step's, the frozen bytes, the refusals
# (about 10 s on one core)
TESTS += tests/paper_freeze_tfm.sh
EXTRA_DIST += tests/paper_freeze_tfm.sh
TESTS += tests/paper_lora.sh
EXTRA_DIST += tests/paper_lora.sh
# LoRA under DeepSpeed's own step at ZeRO-3: theory = measure, the losses
# against ZeRO-2's and DeepSpeed's engine over the PyTorch step, the bytes
# by hand, the refusals (about 8 s)
TESTS += tests/ds3_lora.sh
EXTRA_DIST += tests/ds3_lora.sh
# The floors under --freeze by hand, and the report of frozen paper and
# DeepSpeed runs: their points at the frozen floors, none unexplained
# (about 3 s)
TESTS += tests/report_freeze.sh
EXTRA_DIST += tests/report_freeze.sh
# The report of LoRA and QLoRA runs: zerosim's own step against the
# floors over the adapters' Ψ_t by hand, the PyTorch step's LoRA and
# QLoRA loops with the 4-bit base's bytes by hand (about 3 s)
TESTS += tests/report_lora.sh
EXTRA_DIST += tests/report_lora.sh
# --attn sdpa given under the PyTorch step's DDP and FSDP: theory's exact step
# = measure, the report takes the pair (about 2 s)
TESTS += tests/sdpa_wrapped.sh
EXTRA_DIST += tests/sdpa_wrapped.sh
# --freeze under --framework deepspeed (dp, ZeRO-1/2): theory = measure,
# the losses against the paper's, the frozen bytes, the refusals (about
# 12 s on one core)
# (tests/ds_freeze.sh: in TESTS' head, Makefile.am: the longest start first)
EXTRA_DIST += tests/ds_freeze.sh tests/freeze_lib.sh
# DeepSpeed ZeRO-3's optimizer sub groups (--ds-sub-group-size): theory = measure,
# the step by hand (llama-2-70b too), the same bits, the refusals (a few seconds)
TESTS += tests/ds_subgroup.sh
EXTRA_DIST += tests/ds_subgroup.sh
check_PROGRAMS += tests/ds_trace
tests_ds_trace_SOURCES = tests/ds_trace.c
tests_ds_trace_LDADD = libzsutil.a $(CJSON_LIBS) -lm
TESTS += tests/ds_ckpt_hooks.sh
EXTRA_DIST += tests/ds_ckpt_hooks.sh tests/ds_ckpt_hooks.py
# --grad-accum under --wrapper fsdp (issue #23: FSDP accumulation with and
# without no_sync()): theory and measure against PyTorch 1.13's FSDP, N = 2,
# to the byte, and the losses (about 2 minutes on 2 cores)
TESTS += tests/ft_fsdp.sh
EXTRA_DIST += tests/ft_fsdp.sh
# --lora-r (PEFT's wrap policy: each adapter its own unit) and --freeze
# (whole units) under --wrapper fsdp, FULL_SHARD and SHARD_GRAD_OP: theory
# and measure against PyTorch 1.13's FSDP, N = 2, to the byte, the losses,
# and the refusal of a unit mixing frozen and trainable parameters (about
# 4 to 5 minutes on 2 cores)
TESTS += tests/ft_fsdp_lora.sh
EXTRA_DIST += tests/ft_fsdp_lora.sh
# --lora-r (issue #23's LoRA, PEFT's lora.Linear): theory and measure of the
# plain loop against PyTorch 1.13 training the same adapters, to the byte
# (about a minute on 2 cores)
TESTS += tests/ft_lora.sh
EXTRA_DIST += tests/ft_lora.sh tests/ft_cmp.py tests/ft_lib.sh
# --quant-base nf4 (issue #23's QLoRA, bitsandbytes' Linear4bit): theory =
# measure, and the resident bytes from the shapes (no reference: bitsandbytes
# does not install here; a few seconds)
TESTS += tests/ft_qlora.sh
EXTRA_DIST += tests/ft_qlora.sh
TESTS += tests/case_lora.sh
EXTRA_DIST += tests/case_lora.sh
# zerosim-sweep/4: LoRA's, QLoRA's and --load-dtype's keys of the sweep
# spec give the options' measured and theory files byte for byte; each
# key's bad values, one line, exit 2 (a few seconds)
TESTS += tests/spec_keys.sh
EXTRA_DIST += tests/spec_keys.sh
# torch's zero1 (--wrapper ddp --schemes zero1) with --freeze, --lora-r and
# --grad-accum: theory and measure, every rank, against PyTorch 1.13's
# ZeroRedundancyOptimizer over the trainable parameters, to the byte, and
# the losses (about a minute on 2 cores)
TESTS += tests/ft_zero1.sh
EXTRA_DIST += tests/ft_zero1.sh tests/zero1_cmp.py

# The issue's table, PyTorch's peak beside zerosim's (1.13 here; 2.6 in a
# Debian 13 root that tests/torch26_root.sh makes, about 1.5 GB, when root
# and a mirror allow). Not part of check: zerosim does not model eager
# PyTorch's step yet, and GPT-2 small takes minutes on a CPU.
check-torch-ref: zerosim$(EXEEXT)
	ZS_CHECK_TORCH=1 ZS_BUILDDIR=. srcdir=$(srcdir) $(SHELL) $(srcdir)/tests/hf_torch.sh table
	ZS_CHECK_TORCH=1 srcdir=$(srcdir) $(SHELL) $(srcdir)/tests/ft_torch.sh
.PHONY: check-torch-ref
# make check-torch: the agreement tests against real PyTorch 1.13 (those
# that source tests/torch_python.sh; make check skips them), side by side
# under make -j, the longest first (CPU seconds on one core, 2026-12-07,
# every row (check-torch-full): 348, 167, 141, 129, 118, 109, 84, 76, 46,
# then 23 or less; tests/batch_torch.py's ZS_CASE_TIMES gives each case's);
# about 9 minutes on 2 cores with check-torch26 beside it, once per CI run
# (.ci/run, ZS_REQUIRE_TORCH=1: no torch fails).
# A test that sources torch_python.sh and is missing here fails it by name.
TORCH_TESTS = tests/hf_torch.sh tests/moe_hf_torch.sh tests/ft_zero1.sh tests/ft_lora.sh tests/ft_accum.sh \
	tests/ft_fsdp_lora.sh tests/ft_fsdp.sh tests/ft_freeze.sh tests/moe_model_torch.sh tests/ds_bf16_torch.sh \
	tests/fsdp_torch.sh tests/moe_torch.sh tests/tfm_torch.sh tests/ds3_torch.sh tests/torch_cache_check.sh \
	tests/ds_ckpt_hooks.sh tests/ds_moe_torch.sh
check-torch:
	@for t in $(TESTS); do \
	  if test -f "$(srcdir)/$$t" && grep -q 'tests/torch_python.sh"' "$(srcdir)/$$t"; then \
	    case " $(TORCH_TESTS) " in *" $$t "*) ;; \
	    *) echo "check-torch: $$t sources tests/torch_python.sh but is not in TORCH_TESTS (tests/local.mk)" >&2; exit 1 ;; \
	    esac; \
	  fi; \
	done
	ZS_CHECK_TORCH=1 $(MAKE) $(AM_MAKEFLAGS) check TESTS='$(TORCH_TESTS)'
.PHONY: check-torch
# make check-families-full: theory = measure to the byte over the full
# product for every family's tiny config (N 1, 2, 3, 4, 8 x both units x
# measure's four precisions x paper, torch and deepspeed, each scheme x
# the three recompute modes; tests/families_full.sh); make check holds a
# covering set. Not in make check or .ci/run (CI's budget): about 6
# minutes of CPU, an hour niced on this project's 2 shared cores
# (docs/design.md).
check-families-full: zerosim$(EXEEXT) tests/json_agree$(EXEEXT)
	ZS_BUILDDIR=. srcdir=$(srcdir) $(SHELL) $(srcdir)/tests/families_full.sh
.PHONY: check-families-full
EXTRA_DIST += tests/families_full.sh
# The make check-torch comparison against PyTorch 2.6 (issue #22), in its
# Debian 13 root (made when absent: debootstrap, root and a Debian mirror),
# a few minutes: once per CI run (.ci/run, ZS_REQUIRE_TORCH26=1). Each test
# a target of its own, so that make -j check-torch26 runs them side by side
# (the longest first); each target a phony run, never taken for done.
TORCH26_RUNS = hf_torch moe_hf_torch ft_zero1 ft_lora ft_accum ft_fsdp ft_freeze ft_fsdp_lora ds_torch26
# The root is made (or found) once, before them: made side by side, each
# would run debootstrap; its failure is each test's to report (a skip, or a
# failure under ZS_REQUIRE_TORCH26=1).
check-torch26: $(TORCH26_RUNS:%=check-torch26-%)
check-torch26-root:
	-@$(SHELL) $(srcdir)/tests/torch26_root.sh >/dev/null
$(TORCH26_RUNS:%=check-torch26-%): check-torch26-root zerosim$(EXEEXT) tests/ag_events$(EXEEXT) tests/json_agree$(EXEEXT)
	ZS_CHECK_TORCH=1 ZS_BUILDDIR=. srcdir=$(srcdir) $(SHELL) $(srcdir)/tests/$(@:check-torch26-%=%).sh torch26
.PHONY: check-torch26 check-torch26-root $(TORCH26_RUNS:%=check-torch26-%)
# make check-torch-full: check-torch and check-torch26 with every row of
# their tables (ZS_TORCH_FULL=1): the rows marked "+" (tests/torch_python.sh's
# torch_row: each a path another row of the same run takes, over another
# family, zero_grad mode or K) run too; by hand, not in CI, about twice
# CI's PyTorch step.
check-torch-full:
	ZS_TORCH_FULL=1 $(MAKE) $(AM_MAKEFLAGS) check-torch check-torch26
.PHONY: check-torch-full
TESTS += tests/theory_headline.sh
EXTRA_DIST += tests/theory_headline.sh
# measure --allocator cuda and --timeline's trace (ids, live blocks, every rank)
# (tests/alloc_replay.sh: in TESTS' head, Makefile.am: the longest start first)
EXTRA_DIST += tests/alloc_replay.sh

# QLoRA's 4-bit base (Check): NF4 against the code book worked by hand,
# double quantization, and the bits a parameter against the QLoRA paper.
if HAVE_CHECK
check_PROGRAMS += tests/test_nf4
TESTS += tests/test_nf4
tests_test_nf4_SOURCES = tests/test_nf4.c
tests_test_nf4_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
tests_test_nf4_LDADD = libzsutil.a $(CJSON_LIBS) $(CHECK_LIBS) -lm
endif
# make check-san: make check without SAN_SKIP_TESTS, what CI's sanitizer
# build runs (.ci/run). Each test skipped there runs no line of src/ that
# the others do not: line coverage per test (gcov, a --coverage build's
# make check, 2026-12-06 at 3f50d6de) leaves every executed line of src/
# to the rest, but for two one-line returns of theory_vs_measure.sh
# (ag_ddp.c's first DDP bucket under 2.6 with --bucket-cap, arithmetic)
# and theory_headline.sh (theory_walk.c's "described" for a run outside
# the PyTorch step). These twenty-two cost a third of the suite's CPU under
# ASan (theory_vs_measure.sh alone 140 s at the worlds up to 3); the plain
# build's make check runs them all. A test added to TESTS runs under the
# sanitizers unless named here.
SAN_SKIP_TESTS = tests/theory_vs_measure.sh tests/theory_headline.sh tests/test_rss tests/ds_freeze.sh \
	tests/ds_moe.sh tests/qwen3_moe.sh tests/ag_exec_train.sh tests/moe_fw.sh tests/ag_exec_losses.sh \
	tests/test_ds_accum tests/blas_threads.sh tests/paper_accum_tfm.sh tests/moe_step.sh tests/ds_defaults.sh \
	tests/ds3_gather.sh tests/test_paper_accum tests/qwen3.sh tests/qwen2.sh tests/sdpa_wrapped.sh \
	tests/test_golden tests/report_accum.sh tests/test_nccl
check-san:
	@t=; for x in $(TESTS); do \
	  case " $(SAN_SKIP_TESTS) " in *" $$x "*) ;; *) t="$$t $$x" ;; esac; \
	done; \
	$(MAKE) $(AM_MAKEFLAGS) check TESTS="$$t"
.PHONY: check-san

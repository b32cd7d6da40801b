# torch_python.sh — sourced by the tests that run PyTorch (tfm_torch.sh,
# fsdp_torch.sh, hf_torch.sh, ft_*.sh): sets py to the first of $PYTHON,
# Debian's /usr/bin/python3 and the python3 on PATH (one earlier on PATH
# may lack torch) that has torch; without one, skips the test named
# $name with a message (exit 77, automake's skip), or fails under
# ZS_REQUIRE_TORCH=1. Torch is found (importlib's find_spec), not
# imported: an import takes seconds on a busy machine and every PyTorch
# test sources this; a torch there that fails to import fails the test's
# reference instead of skipping it.
#
# They run PyTorch for minutes (about 18 of CPU, 9 on 2 cores), so make check
# skips them (77, with a message) and make check-torch runs them
# (ZS_CHECK_TORCH=1, tests/local.mk's TORCH_TESTS; check-torch26 and
# check-torch-ref too): make check stays a few minutes, and CI runs them
# once per run, not in every build flavour (.ci/run).
if [ "${ZS_CHECK_TORCH:-0}" != 1 ]; then
	echo "SKIP: $name: a PyTorch agreement test: make check-torch runs it (or ZS_CHECK_TORCH=1)"
	exit 77
fi
py=""
for p in ${PYTHON:-} /usr/bin/python3 python3; do
	if command -v "$p" >/dev/null 2>&1 && "$p" -c 'import importlib.util, sys
sys.exit(importlib.util.find_spec("torch") is None)' >/dev/null 2>&1; then
		py=$p
		break
	fi
done
if [ -z "$py" ]; then
	if [ "${ZS_REQUIRE_TORCH:-0}" = 1 ]; then
		echo "$name: FAIL: no python3 here imports torch (ZS_REQUIRE_TORCH=1; Debian: apt-get install python3-torch)" >&2
		exit 1
	fi
	echo "SKIP: $name: no python3 here imports torch (Debian: apt-get install python3-torch)"
	exit 77
fi
# ZS_TORCH_CACHE=DIR: the reference scripts run through
# tests/torch_cache.sh, which keeps each one's results in DIR, keyed by the
# script, its arguments' bytes and the torch; a second make check-torch
# (another build's, say under ASan) reads them instead of training again
# (a miss runs PyTorch).
if [ -n "${ZS_TORCH_CACHE:-}" ] && [ -d "$ZS_TORCH_CACHE" ] && [ -x "$src/tests/torch_cache.sh" ]; then
	ZS_TORCH_PY=$(command -v "$py")
	export ZS_TORCH_PY
	py=$(cd "$src/tests" && pwd)/torch_cache.sh
fi
# torch_pin_blas: OpenBLAS picks its kernels by CPU, for zerosim's products
# and PyTorch's (Debian's links the same library), so fp32 rounding, which
# Adam amplifies over the steps where a gradient is near zero or a routing
# near a tie, is the host's. The tests that hold zerosim's final weights to
# PyTorch's fp32 and float64 runs (tfm_torch.sh, moe_model_torch.sh) call it
# to run both on OpenBLAS's Haswell (AVX2) kernels wherever the CPU has
# AVX2: on an AVX-512 Xeon (2026-12-07) its own kernels put zerosim's
# distance to float64 at 2.3 and 3.1 times PyTorch's (qwen2_moe top 4) and
# gemma3's rope-scaled weights 0.5 % short of the bound; with Haswell's,
# both within, as on the earlier hosts. Bytes never depend on it.
torch_pin_blas() {
	if grep -qw avx2 /proc/cpuinfo 2>/dev/null; then
		OPENBLAS_CORETYPE=Haswell
		export OPENBLAS_CORETYPE
	fi
}
# torch_row LABEL: whether a row of the test's table runs. A label that
# starts with "+" marks a row of the full agreement alone (make
# check-torch-full, ZS_TORCH_FULL=1): a case whose every path another row
# of the same run takes (the same framework, precision and PyTorch
# release over another family, zero_grad mode or K), left out of make
# check-torch and check-torch26 (CI's) to keep CI's PyTorch step within
# its budget; the row's "+" is no part of its name (torch_label).
torch_row() {
	case $1 in
	+*) [ "${ZS_TORCH_FULL:-0}" = 1 ] ;;
	*) return 0 ;;
	esac
}
torch_label() {
	printf '%s\n' "${1#+}"
}

#!/bin/sh
# moe_torch — the engine's mixture-of-experts kernels agree with PyTorch
# running transformers 4.x's MixtralSparseMoeBlock, Qwen2MoeSparseMoeBlock and
# Qwen3MoeSparseMoeBlock (tests/moe_torch.py, which cites what it follows): the experts chosen, the
# tokens per expert, the output and the gradients of the input, the router
# and every expert (and qwen2_moe's shared expert and its gate), on three
# mixtral shapes (top 2 of 4, top 2 of 8 with an expert likely idle, top 1
# of 3) and three qwen2_moe ones (top 2 of 4 and top 4 of 8 unnormalised as
# Qwen1.5-MoE-A2.7B's norm_topk_prob false, top 2 of 4 renormalised) and two
# qwen3_moe ones (top 2 of 4 renormalised as Qwen3-30B-A3B's, top 4 of 8 not).
#
# PyTorch is looked for by tests/torch_python.sh; without it the test is
# skipped (exit 77). Exit 0 pass, 1 disagreement, 99 hard error.
set -u

top=${ZS_BUILDDIR:-.}
src=${srcdir:-.}
dump=$top/tests/moe_dump
if [ ! -x "$dump" ]; then
	echo "moe_torch: $dump is not built" >&2
	exit 99
fi
name=moe_torch
. "$src/tests/torch_python.sh"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/zs-moe.XXXXXX") || exit 99
trap 'rm -rf "$tmp"' EXIT HUP INT TERM

rc=0
n=0
# BT D E K F SEED; then qwen2_moe's S NORM (its shared expert's width,
# norm_topk_prob), qwen3_moe's with S 0 (no shared expert)
for shape in "24 16 4 2 24 1" "3 8 8 2 12 2" "30 12 3 1 20 3" "24 16 4 2 24 1 : 40 0" "24 16 8 4 12 4 : 20 0" \
	"16 12 4 2 10 5 : 16 1" "24 16 4 2 24 1 : 0 1" "24 16 8 4 12 4 : 0 0"; do
	qwen=""
	case $shape in *:*) qwen=${shape#*:} ;; esac
	# PyTorch's side writes the inputs and its results into a folder of
	# the case's own (kept by tests/torch_cache.py, keyed by the
	# arguments: a sanitizer build reads them, no PyTorch); moe_dump runs
	# here, and tests/moe_cmp.py (no torch) compares
	n=$((n + 1))
	mkdir "$tmp/$n" || exit 99
	# shellcheck disable=SC2086
	if ! OMP_NUM_THREADS=1 "$py" "$src/tests/moe_torch.py" ${shape%%:*} "$tmp/$n" $qwen; then
		rc=1
		continue
	fi
	set -- ${shape%%:*}
	# shellcheck disable=SC2086
	"$dump" "$1" "$2" "$3" "$4" "$5" "$tmp/$n/moe.in" "$tmp/$n/moe.out" $qwen || { echo "moe_torch: $dump failed" >&2; exit 99; }
	"$py" "$src/tests/moe_cmp.py" "$tmp/$n" || rc=1
done
exit $rc

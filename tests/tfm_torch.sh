#!/bin/sh
# tfm_torch — zerosim's transformer agrees with PyTorch: tests/tfm_dump
# trains the tiny gpt2 and llama models three fp32 Adam steps and writes
# their initial weights, tokens, losses and final weights; tests/tfm_torch.py
# builds the same models in PyTorch, trains them on the same tokens and
# compares (the bounds are in its opening comment).
#
# PyTorch is looked for in $PYTHON, Debian's /usr/bin/python3, then the
# python3 on PATH (one earlier on PATH may lack torch); without it the test
# is skipped with a message (exit 77). Exit 0 pass, 1 disagreement, 99 hard
# error (automake's conventions). Runs from the build directory.
set -u

top=${ZS_BUILDDIR:-.}
src=${srcdir:-.}
dump=$top/tests/tfm_dump
if [ ! -x "$dump" ]; then
	echo "tfm_torch: $dump is not built" >&2
	exit 99
fi

py=""
for p in ${PYTHON:-} /usr/bin/python3 python3; do
	if command -v "$p" >/dev/null 2>&1 && "$p" -c 'import torch' >/dev/null 2>&1; then
		py=$p
		break
	fi
done
if [ -z "$py" ]; then
	echo "SKIP: tfm_torch: no python3 here imports torch (Debian: apt-get install python3-torch)"
	exit 77
fi
echo "tfm_torch: $py, torch $("$py" -c 'import torch; print(torch.__version__)')"

tmp=$(mktemp -d "${TMPDIR:-/tmp}/zs-torch.XXXXXX") || exit 99
trap 'rm -rf "$tmp"' EXIT HUP INT TERM

status=0
for family in gpt2 llama; do
	mkdir "$tmp/$family" || exit 99
	"$dump" "$family" "$tmp/$family" || exit 99
	"$py" "$src/tests/tfm_torch.py" "$tmp/$family"
	rc=$?
	[ "$rc" -eq 0 ] || status=1
	[ "$rc" -le 1 ] || { echo "tfm_torch: tfm_torch.py failed (status $rc)" >&2; exit 99; }
done
exit $status

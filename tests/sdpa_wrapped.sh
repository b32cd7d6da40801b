#!/bin/sh
# sdpa_wrapped — `--attn sdpa` given explicitly under the PyTorch step's
# DDP and FSDP (--wrapper ddp, fsdp; PyTorch 2.6's default attention):
# the step describes SDPA's kernels itself (util/autograd.c), so theory
# gives its exact step there, equal to measure to the byte, as it does
# when sdpa is only 2.6's default, and the report takes the pair (theory
# had dropped the step, saying "flash attention, which measure does not
# run", and the report refused the pair, where --wrapper was not none).
name=sdpa_wrapped
tag=sdpa
. "${srcdir:-.}/tests/agree_lib.sh"
status=0
fail() { echo "$name: FAIL: $*" >&2; status=1; }
model=${srcdir:-.}/report/models/llama-tiny.json
"$zerosim" measure -q --world 1 --steps 1 --out "$tmp/mlp-m.json" && "$zerosim" theory --world 1 --out "$tmp/mlp-t.json" ||
	exit 99
for w in "fsdp --schemes zero3" "ddp --schemes dp"; do
	set -- --framework torch --torch-version 2.6 --torch-device cpu --seq 16 --batch 2 --steps 2 --precision fp32 \
		--world 2 --model "$model" --attn sdpa --wrapper
	# shellcheck disable=SC2086 # $w is the wrapper and its scheme
	OPENBLAS_NUM_THREADS=1 "$zerosim" measure -q "$@" $w --out "$tmp/m.json" || exit 99
	# shellcheck disable=SC2086
	"$zerosim" theory "$@" $w --out "$tmp/t.json" 2>"$tmp/err" || exit 99
	if "$agree" "$tmp/m.json" "$tmp/t.json" >"$tmp/out" 2>&1; then
		echo "ok: --wrapper $w --attn sdpa: theory = measure ($(cat "$tmp/out"))"
	else
		fail "--wrapper $w --attn sdpa: $(cat "$tmp/out")"
	fi
	python3 -c 'import json, sys; sys.exit(json.load(open(sys.argv[1]))["rows"][0]["schedule"] is None)' "$tmp/t.json" ||
		fail "--wrapper $w --attn sdpa: the theory's row has no exact step"
	if ZEROSIM_DATADIR=${srcdir:-.} "$zerosim" report --measured "$tmp/mlp-m.json" --theory "$tmp/mlp-t.json" --transformer "$tmp/m.json" \
		--transformer "$tmp/t.json" --strict --no-render --out "$tmp/rep" >/dev/null 2>"$tmp/err"; then
		echo "ok: --wrapper $w --attn sdpa: the report takes the pair"
	else
		fail "--wrapper $w --attn sdpa: the report: $(tail -1 "$tmp/err")"
	fi
done
exit $status

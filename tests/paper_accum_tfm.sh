#!/bin/sh
# paper_accum_tfm — the paper's schedule under --grad-accum K on zerosim's
# transformer (docs/schedule.md, "Gradient accumulation under the paper's
# schedule"): micro-step m of step t trains the task's batch t·K + m, its
# loss's gradient divided by K, and the K micro-steps' grads add up as the
# scheme holds them (dp, zero1: in the full grads, reduced once; zero2,
# zero3: reduce-scattered every micro-step into the shard).
#
# Its losses must be the PyTorch step's over the same batches, within 1e-5
# relative: the plain loop (--wrapper none, N = 1) and DDP with no_sync()
# (--wrapper ddp, N = 2), each itself held to real PyTorch by
# tests/ft_accum.sh. As tests/ag_exec_losses.sh says, the plain loop at
# --seq T scores T − 1 tokens of a row, zerosim's fused engine every one of
# T: the engine runs at --seq T − 1 over the same rows. Every scheme, gpt2
# and llama (the issue's tiny shapes), K = 2 and 3, fp32 Adam, three steps.
# Last, its run written as a case (--write-case: every micro-step's tokens
# and grad_accum) replays to the same weights (measure --case).
# (The bytes: tests/theory_vs_measure.sh.) About 10 s on one core.
#
# Exit 0 pass, 1 mismatch, 99 hard error.
set -u
name=paper_accum_tfm
. "${srcdir:-.}/tests/ft_lib.sh"
ft_configs 256 160

# A measured file's losses, one a line; its weights digest.
losses() {
	tr -d ' \n\t' <"$1" | grep -o '"losses":\[[^]]*\]' | head -1 | sed 's/.*\[//; s/\]//' | tr ',' '\n'
}
digest() { tr -d ' \n\t' <"$1" | grep -o '"weights_digest":"[^"]*"' | head -1; }

checked=0
torch="--framework torch --torch-version 1.13 --torch-device cpu --optimizer-impl single --zero-grad none --attn eager"
for model in gpt2 llama; do
	for K in 2 3; do
		for world in 1 2; do
			wrapper=none
			[ "$world" -eq 2 ] && wrapper=ddp
			common="--model $tmp/$model.json --world $world --precision fp32 --batch 2 --steps 3 --grad-accum $K"
			# shellcheck disable=SC2086
			"$zerosim" measure $common --schemes dp $torch --wrapper $wrapper --seq 32 --out "$tmp/a.json" ||
				exit 99
			losses "$tmp/a.json" >"$tmp/la"
			for scheme in dp zero1 zero2 zero3; do
				# shellcheck disable=SC2086
				"$zerosim" measure $common --schemes $scheme --seq 31 --out "$tmp/b.json" || exit 99
				losses "$tmp/b.json" >"$tmp/lb"
				[ "$(wc -l <"$tmp/la")" -eq 3 ] && [ "$(wc -l <"$tmp/lb")" -eq 3 ] || {
					echo "paper_accum_tfm: 3 losses expected in each file" >&2
					exit 99
				}
				checked=$((checked + 1))
				what="$model K=$K N=$world $scheme against --wrapper $wrapper"
				if paste "$tmp/la" "$tmp/lb" | awk -v tol=1e-5 '
					{ d = $1 - $2; if (d < 0) d = -d; r = d / ($1 < 0 ? -$1 : $1)
					  printf " %.2g", r; if (!(r <= tol)) bad = 1 }
					END { exit bad }' >"$tmp/cmp"; then
					echo "ok: $what: relative$(cat "$tmp/cmp")"
				else
					echo "paper_accum_tfm: FAIL: $what: the losses differ by more than 1e-5:" >&2
					paste "$tmp/la" "$tmp/lb" >&2
					status=1
				fi
			done
		done
	done
done
# The control: without accumulation (K·1 batches of 2 at K = 1) the plain
# loop's losses are other ones, so the comparison above can fail.
# shellcheck disable=SC2086
"$zerosim" measure --model "$tmp/gpt2.json" --world 1 --precision fp32 --batch 2 --steps 3 --schemes dp $torch \
	--wrapper none --seq 32 --grad-accum 2 --out "$tmp/a.json" || exit 99
"$zerosim" measure --model "$tmp/gpt2.json" --world 1 --precision fp32 --batch 2 --steps 3 --schemes dp --seq 31 \
	--out "$tmp/b.json" || exit 99
losses "$tmp/a.json" >"$tmp/la"
losses "$tmp/b.json" >"$tmp/lb"
if paste "$tmp/la" "$tmp/lb" | awk '{ d = $1 - $2; if (d < 0) d = -d; if (d / $1 > 1e-3) far = 1 } END { exit !far }'
then
	echo "ok: the control (K = 1 against K = 2) differs by more than 1e-3"
else
	echo "paper_accum_tfm: FAIL: K = 1 and K = 2 give the same losses: the check above cannot fail" >&2
	status=1
fi
# The case: a run of the paper's zero2, N = 2, K = 3, written and replayed.
"$zerosim" measure --model "$tmp/llama.json" --world 2 --schemes zero2 --precision fp32 --batch 2 --seq 16 --steps 2 \
	--grad-accum 3 --write-case "$tmp/case.json" --out "$tmp/w.json" || exit 99
"$zerosim" measure --case "$tmp/case.json" --schemes zero2 --out "$tmp/r.json" || exit 99
if [ -n "$(digest "$tmp/w.json")" ] && [ "$(digest "$tmp/w.json")" = "$(digest "$tmp/r.json")" ] &&
	[ "$(losses "$tmp/w.json")" = "$(losses "$tmp/r.json")" ]; then
	echo "ok: the case of K = 3 replays to the same losses and weights ($(digest "$tmp/r.json"))"
else
	echo "paper_accum_tfm: FAIL: the case of K = 3 does not replay: $(digest "$tmp/w.json") $(digest "$tmp/r.json")" >&2
	status=1
fi
[ "$checked" -eq 32 ] || { echo "paper_accum_tfm: $checked comparisons, 32 expected" >&2; exit 1; }
exit $status

# family_lib — what the model-family tests (tests/phi3.sh, tests/qwen3.sh)
# share, sourced after setting `name` (and srcdir, as automake does): the
# build's zerosim (ZS_BUILDDIR overrides; exit 99 when it is not built), a
# temporary folder $tmp removed on exit, `failed` and fail, and the checks:
#
#   learns MODEL LR DIV   100 steps of measure on the seed's task (seq 16,
#                         batch 2, N = 1): the first loss near ln 256 = 5.55
#                         and the mean of the last ten under the first's 1/DIV
#                         ($tmp/train.json is the run)
#   one_digest MODEL PRECISION   N = 1, 2, 3 under dp, zero1, zero2, zero3,
#                         2 steps: one weights digest per N
#   expect_refused PATTERN MODEL [OPTIONS]   measure refuses it: exit 2, one
#                         line matching PATTERN, no output file
#   plain_loop_agrees MODEL   the plain PyTorch loop (--framework torch
#                         --wrapper none, 1.13, eager; util/autograd.c's
#                         step) at seq 16, batch 2, 3 steps: measure's bytes
#                         between steps, peak and every mark are the
#                         theory's, and its losses the fused engine's at
#                         seq 15 within 1e-5 relative (ag_exec_losses.sh
#                         says why 15); tests/hf_torch.sh holds both to
#                         PyTorch's own bytes
# shellcheck shell=sh disable=SC2034,SC2154
# (name is the sourcing test's; failed, its result, is read there)

top=${ZS_BUILDDIR:-.}
zerosim=$top/zerosim
srcdir=${srcdir:-.}
if [ ! -x "$zerosim" ]; then
	echo "$name: $zerosim is not built" >&2
	exit 99
fi
[ -d "$top/data/models" ] || { ZEROSIM_DATADIR=$srcdir; export ZEROSIM_DATADIR; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/zs-$name.XXXXXX") || exit 99
trap 'rm -rf "$tmp"' EXIT HUP INT TERM
failed=0
fail() {
	echo "$name: FAIL: $*" >&2
	failed=1
}

learns() { # MODEL LR DIV
	"$zerosim" measure --quiet --model "$1" --seq 16 --batch 2 --world 1 --steps 100 --lr "$2" \
		--out "$tmp/train.json" 2>"$tmp/err" || fail "measure: $(cat "$tmp/err")"
	# the losses, one a line: the first, and the mean of the last ten
	tr -d ' \t\n' <"$tmp/train.json" | sed 's/.*"losses":\[\([^]]*\)\].*/\1/' | tr ',' '\n' >"$tmp/losses"
	[ "$(wc -l <"$tmp/losses")" -eq 99 ] || fail "not 100 losses: $(wc -l <"$tmp/losses")+1"
	awk -v name="$name" -v div="$3" 'NR == 1 { first = $1 } NR > 90 { last += $1 / 10 }
	     END { printf "%s: loss %.4f at the first step, %.4f over the last ten\n", name, first, last
	           exit !(first > 5.45 && first < 5.65 && last < first / div) }' "$tmp/losses" ||
		fail "the loss did not fall under 1/$3 of the first step's"
}

one_digest() { # MODEL PRECISION
	"$zerosim" measure --quiet --model "$1" --seq 8 --batch 1 --world 1,2,3 --steps 2 \
		--precision "$2" --unit layer --out "$tmp/d.json" 2>"$tmp/err" || fail "measure: $(cat "$tmp/err")"
	tr -d ' \t\n' <"$tmp/d.json" | grep -o '"world":[0-9]*\|"weights_digest":"[^"]*"' | paste - - >"$tmp/dg"
	[ "$(wc -l <"$tmp/dg")" -eq 12 ] || fail "$1 $2: not 4 schemes x 3 worlds: $(cat "$tmp/dg")"
	[ "$(sort -u "$tmp/dg" | wc -l)" -eq 3 ] || fail "$1 $2: not one digest per N: $(cat "$tmp/dg")"
}

plain_loop_agrees() { # MODEL
	pl="--framework torch --wrapper none --torch-version 1.13 --torch-device cpu --attn eager --zero-grad zeros"
	for cmd in theory measure; do
		# shellcheck disable=SC2086
		"$zerosim" $cmd --model "$1" --seq 16 --batch 2 --world 1 --schemes dp --precision fp32 --steps 3 $pl \
			--out "$tmp/pl-$cmd.json" 2>"$tmp/err" || fail "$cmd --wrapper none: $(cat "$tmp/err")"
	done
	"$zerosim" measure --model "$1" --seq 15 --batch 2 --world 1 --schemes dp --precision fp32 --steps 3 \
		--out "$tmp/pl-fused.json" 2>"$tmp/err" || fail "measure: $(cat "$tmp/err")"
	for f in theory measure fused; do
		tr -d ' \t\n' <"$tmp/pl-$f.json" >"$tmp/pl-$f"
	done
	# theory: the row's schedule; measure: the run's per-rank bytes and marks
	sed 's/.*"schedule":{//' "$tmp/pl-theory" >"$tmp/pl-sched"
	t_res=$(grep -o '"resident_bytes":[0-9]*' "$tmp/pl-sched" | head -1 | cut -d: -f2)
	t_peak=$(grep -o '"peak_bytes":[0-9]*' "$tmp/pl-sched" | head -1 | cut -d: -f2)
	m_res=$(grep -o '"resident_bytes":\[[0-9]*\]' "$tmp/pl-measure" | head -1 | tr -dc 0-9)
	m_peak=$(grep -o '"peak_bytes":\[[0-9]*\]' "$tmp/pl-measure" | head -1 | tr -dc 0-9)
	t_marks=$(grep -o '"marks":{[^}]*}' "$tmp/pl-sched" | head -1)
	m_marks=$(grep -o '"marks":{[^}]*}' "$tmp/pl-measure" | head -1)
	if [ -z "$t_res" ] || [ "$t_res" != "$m_res" ] || [ "$t_peak" != "$m_peak" ] || [ -z "$t_marks" ] ||
		[ "$t_marks" != "$m_marks" ]; then
		fail "plain loop: theory between steps $t_res, peak $t_peak; measure $m_res, $m_peak (or the marks differ)"
	else
		echo "$name: plain loop: theory = measure, between steps $t_res, peak $t_peak and every mark"
	fi
	for f in measure fused; do
		sed 's/.*"losses":\[\([^]]*\)\].*/\1/' "$tmp/pl-$f" | tr ',' '\n' >"$tmp/pl-l$f"
	done
	paste "$tmp/pl-lmeasure" "$tmp/pl-lfused" | awk -v name="$name" '
		{ d = $1 - $2; if (d < 0) d = -d; r = d / ($2 < 0 ? -$2 : $2); if (!(r <= 1e-5)) bad = 1; n++ }
		END { printf "%s: plain loop: %d losses, the fused engine'"'"'s within 1e-5 relative: %s\n", name, n,
		             bad || n != 3 ? "no" : "yes"; exit bad || n != 3 }' || fail "plain loop: losses differ"
}

expect_refused() { # PATTERN MODEL [options]
	p=$1
	shift
	rm -f "$tmp/r.json"
	"$zerosim" measure --model "$@" --world 1 --steps 1 --out "$tmp/r.json" >/dev/null 2>"$tmp/err"
	rc=$?
	if [ "$rc" -ne 2 ] || [ "$(wc -l <"$tmp/err")" -ne 1 ] || ! grep -q "$p" "$tmp/err"; then
		fail "measure --model $*: exit $rc, $(cat "$tmp/err")"
	fi
	[ ! -e "$tmp/r.json" ] || fail "measure --model $*: wrote r.json"
}

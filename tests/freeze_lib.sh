# freeze_lib.sh — what tests/paper_freeze_tfm.sh, tests/paper_lora.sh, ds3_lora.sh and
# tests/ds_freeze.sh share (sourced after tests/ft_lib.sh, with name, tmp,
# zerosim and status set; it sets gpt2 and llama, report/models'
# gpt2-tiny.json and llama-tiny.json):
# fz_agree OPTIONS...: theory = measure (tests/json_agree) for a sweep at
#   --seq 16 --batch 2 --steps 2, counted in configs, its points in points.
# fz_close A B: the losses of measure files A and B (fz_losses: one a
#   line) within 1e-5 relative, 3 each (the paper's step against the
#   PyTorch step's); the relative differences in $tmp/cmp.
# fz_train WHAT WRAPPER SCHEMES OPTIONS...: the PyTorch step's losses
#   (--wrapper WRAPPER, $fz_torch) and each of the paper's SCHEMES'
#   (--unit layer) over OPTIONS, fz_close (counted in checked).
# fz_control OPTIONS...: the control: tests/ft_lib.sh's tiny llama, N = 1,
#   the PyTorch step with OPTIONS against the paper's without them: the
#   losses must differ (else fz_train could not fail).
# fz_units: llama-tiny's units (theory --unit layer: the embedding,
#   block 0, block 1, the head, in the flat vector's order) into units,
#   e (the embedding's elements), b0 (block 0's) and n = e + b0, and its
#   initial weights into $tmp/w0.
# frozen_check WHAT LO HI TRAINLO TRAINHI OPTIONS...: a frozen tensor's
#   bytes never change: the frozen range LO..HI of --dump-weights (1-based)
#   bitwise the same after one step and three, and the initial weights
#   (fp32; mixed precision: rounded to fp16), while TRAINLO..TRAINHI moved.
# fz_report_taken FRAMEWORK: the report takes $tmp/t.json, a frozen run's
#   theory file of FRAMEWORK (its floors the frozen run's: tests/report_freeze.sh
#   holds them to the byte), exit 0, and names the pattern in its section.
# fz_padding FRAMEWORK SCHEMES EXPECTED: theory's schedule.padding_bytes
#   for llama-tiny, frozen embeddings, unit = layer, N = 3, mixed, each
#   scheme's to 0.001 the space-separated EXPECTED (docs/formats.md); and
#   its text says the model states and the paper level are the frozen
#   run's.
# fz_level FRAMEWORK: the paper level (theory.json's peak: resident, full
#   grads, gathered params) of llama-tiny, frozen embeddings, unit = layer,
#   N = 3, mixed, Adam, every scheme, against a count by hand from the
#   units (fz_units' $units: the embedding frozen, t_u = n_u elsewhere):
#   p over every n_u, g and k over the t_u (docs/schedule.md, "The paper
#   level under --freeze"), the same under every framework.
# fz_saved DROP FREEZE OPTIONS...: what the step saves under --freeze
#   (docs/schedule.md, "Frozen parameters under the paper's schedule"):
#   the activations at the peak (peak_breakdown) of measure and theory at
#   --seq 16 --batch 2 --steps 1 --world 1 --unit layer --precision fp32
#   OPTIONS with --freeze FREEZE are each the unfrozen run's (measured, and
#   theory's equal to it) less DROP, bytes counted by hand in the test; a
#   DROP of =BYTES: BYTES themselves (a frozen run whose peak moves).
# fz_bits FREEZE OPTIONS...: the weights digest and losses of --recompute
#   none, selective and full (full runs every block's backward, none skips
#   those below the first trainable tensor) are the same, 3 steps.
# fz_hand WHAT GOT WANT HOW: a figure GOT against WANT worked by hand
#   (HOW, the sum as the log shows it).
# fz_refuse WANT OPTIONS...: measure and theory of llama-tiny at --seq 16
#   --batch 2 with $fz_refuse_with (word-split) and OPTIONS are refused:
#   exit 2, one line of stderr holding WANT, no output file.
# POSIX sh, as the tests.
agree=$top/tests/json_agree
[ -x "$agree" ] || { echo "$name: $agree is not built" >&2; exit 99; }
configs=0 points=0
gpt2=$src/report/models/gpt2-tiny.json llama=$src/report/models/llama-tiny.json
for f in "$gpt2" "$llama"; do
	[ -r "$f" ] || { echo "$name: $f is missing" >&2; exit 99; }
done
fz_agree() {
	configs=$((configs + 1))
	common="--seq 16 --batch 2 --steps 2 $*"
	# fz_largest (set by a test under the sanitizers): each --world list's largest N alone
	[ -z "${fz_largest:-}" ] || common=$(printf %s\\n "$common" | sed 's/--world [0-9,]*,\([0-9][0-9]*\)/--world \1/g')
	# shellcheck disable=SC2086
	"$zerosim" measure $common --out "$tmp/m.json" 2>"$tmp/err" || { cat "$tmp/err" >&2; exit 99; }
	# shellcheck disable=SC2086
	"$zerosim" theory $common --out "$tmp/t.json" 2>"$tmp/err" || { cat "$tmp/err" >&2; exit 99; }
	if "$agree" "$tmp/m.json" "$tmp/t.json" >"$tmp/out"; then
		echo "ok $configs: $* ($(cat "$tmp/out"))"
		points=$((points + $(grep -o '[0-9]* points' "$tmp/out" | cut -d' ' -f1)))
	else
		echo "$name: FAIL for: $*" >&2
		cat "$tmp/out" >&2
		status=1
	fi
}
fz_losses() {
	tr -d ' \n\t' <"$1" | grep -o '"losses":\[[^]]*\]' | head -1 | sed 's/.*\[//; s/\]//' | tr ',' '\n'
}
fz_close() {
	fz_losses "$1" >"$tmp/la"
	fz_losses "$2" >"$tmp/lb"
	[ "$(wc -l <"$tmp/la")" -eq 3 ] && [ "$(wc -l <"$tmp/lb")" -eq 3 ] ||
		{ echo "$name: 3 losses expected in each file" >&2; exit 99; }
	paste "$tmp/la" "$tmp/lb" | awk -v tol=1e-5 '
		{ d = $1 - $2; if (d < 0) d = -d; r = d / ($1 < 0 ? -$1 : $1)
		  printf " %.2g", r; if (!(r <= tol)) bad = 1 }
		END { exit bad }' >"$tmp/cmp"
}

# The PyTorch step the paper's is held to (the engine at --seq T - 1: the
# plain loop scores T - 1 tokens of a row, as tests/paper_accum_tfm.sh says).
fz_torch="--framework torch --torch-version 1.13 --torch-device cpu --optimizer-impl single --zero-grad none --attn eager"
checked=0
fz_train() {
	what=$1 wrapper=$2 schemes=$3
	shift 3
	# shellcheck disable=SC2086
	"$zerosim" measure "$@" --schemes dp $fz_torch --wrapper "$wrapper" --seq 32 --out "$tmp/a.json" || exit 99
	for scheme in $(echo "$schemes" | tr ',' ' '); do
		"$zerosim" measure "$@" --schemes "$scheme" --unit layer --seq 31 --out "$tmp/b.json" || exit 99
		checked=$((checked + 1))
		if fz_close "$tmp/a.json" "$tmp/b.json"; then
			echo "ok: $what $scheme against --wrapper $wrapper: relative$(cat "$tmp/cmp")"
		else
			echo "$name: FAIL: $what $scheme against --wrapper $wrapper: the losses differ by more than 1e-5" \
				"(relative$(cat "$tmp/cmp"))" >&2
			status=1
		fi
	done
}

fz_control() {
	common="--model $tmp/llama.json --world 1 --precision fp32 --batch 2 --steps 3 --schemes dp"
	# shellcheck disable=SC2086
	"$zerosim" measure $common $fz_torch --wrapper none --seq 32 "$@" --out "$tmp/a.json" || exit 99
	# shellcheck disable=SC2086
	"$zerosim" measure $common --seq 31 --out "$tmp/b.json" || exit 99
	if fz_close "$tmp/a.json" "$tmp/b.json"; then
		echo "$name: FAIL: the control (the paper's step without $*) agrees with the PyTorch step with it:" \
			"the check cannot fail" >&2
		status=1
	else
		echo "ok: the control (the paper's step without $*) differs:$(cat "$tmp/cmp")"
	fi
}

weights() { tr -d ' \n\t' <"$1" | sed 's/.*"weights":\[//; s/\].*//' | tr ',' '\n'; }

fz_units() {
	"$zerosim" theory --model "$llama" --unit layer --world 1 --schemes dp --out "$tmp/u.json" || exit 99
	units=$(tr -d ' \n\t' <"$tmp/u.json" | grep -o '"units":\[[0-9,]*\]' | head -1 | sed 's/.*\[//; s/\]//')
	e=$(echo "$units" | cut -d, -f1) b0=$(echo "$units" | cut -d, -f2)
	[ -n "$e" ] && [ -n "$b0" ] || { echo "$name: no units in theory's file" >&2; exit 99; }
	n=$((e + b0))
	# The initial weights: a run's case (--write-case, without --freeze:
	# the seed's weights, whatever is frozen), raw fp32, printed by od (as
	# few digits as tell the float: compared within 1e-7 relative, where
	# one Adam step at --lr 1e-3 moves a weight by about 1e-3).
	"$zerosim" measure --model "$llama" --seq 16 --batch 2 --steps 1 --world 1 --precision fp32 \
		--write-case "$tmp/case.json" --out "$tmp/x.json" || exit 99
	od -An -v -t f4 -w4 "$tmp/case.f32" | awk '{ print $1 }' >"$tmp/w0"
	[ "$(wc -l <"$tmp/w0")" -gt "$n" ] || { echo "$name: no initial weights in $tmp/case.f32" >&2; exit 99; }
}

# cmp_range A B LO HI: elements LO..HI (1-based) of A and B: "same" (bitwise),
# "near" (within 1e-7 relative), "half" (within fp16's rounding, 2^-11
# relative or 2^-25 below its normal range), or "moved" (further apart).
cmp_range() {
	paste "$1" "$2" | awk -v lo="$3" -v hi="$4" 'NR >= lo && NR <= hi {
		n++; d = $1 - $2; if (d < 0) d = -d; m = $1 < 0 ? -$1 : $1
		if ($1 != $2) diff++; if (d > 1e-7 * m + 1e-30) far++; if (d > 4.9e-4 * m + 3e-8) farther++ }
		END { print (n != hi - lo + 1) ? "short" : !diff ? "same" : !far ? "near" : !farther ? "half" : "moved" }'
}

frozen_check() {
	what=$1 lo=$2 hi=$3 tlo=$4 thi=$5
	shift 5
	for steps in 1 3; do
		"$zerosim" measure --model "$llama" --seq 16 --batch 2 "$@" --steps $steps \
			--dump-weights "$tmp/d.json" --out "$tmp/x.json" || exit 99
		weights "$tmp/d.json" >"$tmp/w$steps"
	done
	a=$(cmp_range "$tmp/w1" "$tmp/w3" "$lo" "$hi") b=$(cmp_range "$tmp/w0" "$tmp/w3" "$lo" "$hi")
	c=$(cmp_range "$tmp/w1" "$tmp/w3" "$tlo" "$thi") d=$(cmp_range "$tmp/w0" "$tmp/w1" "$tlo" "$thi")
	# mixed precision's frozen weights are the fp16 params: the initial rounded
	ok=near
	case "$*" in *mixed*) ok=half ;; esac
	if [ "$a" = same ] && [ "$b" = "$ok" ] && [ "$c" = moved ] && [ "$d" = moved ]; then
		echo "ok: $what: frozen $lo..$hi the same after 1 and 3 steps and $b the initial (near: 1e-7, half: fp16), the trainable moved"
	else
		echo "$name: FAIL: $what: frozen $lo..$hi after 1 and 3 steps: $a, against the initial: $b;" \
			"trainable $tlo..$thi: $c, $d (expected same, $ok, moved, moved)" >&2
		status=1
	fi
}

fz_report_taken() {
	"$zerosim" measure --world 1 --steps 1 --out "$tmp/mm.json" || exit 99
	"$zerosim" theory --world 1 --out "$tmp/mt.json" || exit 99
	ZEROSIM_DATADIR=${ZEROSIM_DATADIR:-${srcdir:-.}} "$zerosim" report --no-render --measured "$tmp/mm.json" \
		--theory "$tmp/mt.json" --transformer "$tmp/t.json" --out "$tmp/rep" >/dev/null 2>"$tmp/err"
	rc=$?
	if [ "$rc" -eq 0 ] && grep -q 'paragraph{A frozen run.}' "$tmp/rep/transformer.tex"; then
		echo "ok: report took the frozen $1 run"
	else
		echo "$name: FAIL: report on a frozen $1 run (exit $rc):" >&2
		cat "$tmp/err" >&2
		status=1
	fi
}

fz_padding() {
	opts="--framework $1 --schemes $2 --model $llama --freeze embeddings --unit layer --world 3 --precision mixed"
	# shellcheck disable=SC2086
	"$zerosim" theory $opts --seq 16 --batch 2 --out "$tmp/p.json" || exit 99
	# shellcheck disable=SC2086
	"$zerosim" theory $opts --seq 16 --batch 2 >"$tmp/p.txt" || exit 99
	# a row's padding_bytes: its schedule's, then its paper level's (peak)
	got=$(tr -d ' \n\t' <"$tmp/p.json" | grep -o '"padding_bytes":[0-9.]*' | cut -d: -f2 |
		awk 'NR % 2 { printf "%s%.3f", sep, $1; sep = " " }')
	if [ "$got" = "$3" ]; then
		echo "ok: $1 $2 --freeze embeddings N=3 mixed: schedule padding_bytes $got (by hand)"
	else
		echo "$name: FAIL: $1 $2 --freeze embeddings N=3 mixed: schedule padding_bytes '$got', by hand '$3'" >&2
		status=1
	fi
	grep -q "^(--freeze embeddings: .* the model states, the paper level and its parts.* are the frozen run's" \
		"$tmp/p.txt" || { echo "$name: FAIL: $1's text does not say what is the frozen run's" >&2; status=1; }
}

fz_level() {
	[ -n "${units:-}" ] || fz_units
	"$zerosim" theory --framework "$1" --schemes dp,zero1,zero2,zero3 --model "$llama" --freeze embeddings \
		--unit layer --world 3 --precision mixed --seq 16 --batch 2 --out "$tmp/l.json" || exit 99
	# per scheme: the peak's resident_bytes, full_grads_bytes, gathered_params_bytes
	got=$(python3 -c 'import json, sys
for r in json.load(open(sys.argv[1]))["rows"]:
    p = r["peak"]
    print(p["resident_bytes"], p["full_grads_bytes"], p["gathered_params_bytes"], end=" ")' "$tmp/l.json") || exit 99
	# by hand: Ψ, S = Σ ceil(n_u/3); Ψ_t, S_t over the units after the
	# embedding; p = 2, g = 2, k = 12 (fp32 master 4, Adam 8)
	want=$(echo "$units" | tr ',' '\n' | awk '{ n[NR] = $1 } END {
		for (u = 1; u <= NR; u++) {
			c = int((n[u] + 2) / 3); P += n[u]; S += c; if (n[u] > L) L = n[u]
			if (u > 1) { T += n[u]; St += c; if (n[u] > Lt) Lt = n[u] } }
		printf "%d 0 0 %d 0 0 %d %d 0 %d %d %d ", 2*P + 14*T, 2*P + 2*T + 12*St, 2*P + 14*St, 2*T,
			2*S + 14*St, 2*Lt, 2*L }')
	if [ "$got" = "$want" ]; then
		echo "ok: $1 paper level, llama-tiny --freeze embeddings N=3 mixed (resident, full grads, gathered" \
			"of dp zero1 zero2 zero3): $got(by hand)"
	else
		echo "$name: FAIL: $1 paper level, --freeze embeddings N=3 mixed: '$got', by hand '$want'" >&2
		status=1
	fi
}

# the activations at the peak of FILE's first run
fz_acts() { tr -d ' \n\t' <"$1" | grep -o '"peak_breakdown":{[^}]*}' | head -1 | grep -o '"activations":[0-9]*' | cut -d: -f2; }

fz_saved() {
	drop=$1 fz=$2
	shift 2
	common="--seq 16 --batch 2 --steps 1 --world 1 --unit layer --precision fp32 $*"
	for f in "" "--freeze $fz"; do
		for cmd in measure theory; do
			# shellcheck disable=SC2086
			"$zerosim" $cmd $common $f --out "$tmp/s-$cmd.json" 2>"$tmp/err" || { cat "$tmp/err" >&2; exit 99; }
		done
		m=$(fz_acts "$tmp/s-measure.json") t=$(fz_acts "$tmp/s-theory.json")
		[ -n "$m" ] && [ -n "$t" ] || { echo "$name: no activations at the peak in $tmp/s-*.json" >&2; exit 99; }
		[ -z "$f" ] && base=$m
	done
	[ "$base" -gt 0 ] || { echo "$name: $*: no activation at the unfrozen peak (a row that cannot tell)" >&2; exit 99; }
	case $drop in
	=*) want=${drop#=} how="by hand $want, unfrozen $base" ;;
	*) want=$((base - drop)) how="$base - $drop = $want" ;;
	esac
	if [ "$m" -eq "$want" ] && [ "$t" -eq "$want" ]; then
		echo "ok: saved, --freeze $fz $*: $how B of activations at the peak"
	else
		echo "$name: FAIL: saved, --freeze $fz $*: measure $m, theory $t B of activations at the peak; $how" >&2
		status=1
	fi
}

fz_bits() {
	fz=$1
	shift
	for rc in none selective full; do
		# shellcheck disable=SC2086
		"$zerosim" measure --seq 16 --batch 2 --steps 3 --freeze "$fz" --recompute $rc "$@" --out "$tmp/b-$rc.json" \
			2>"$tmp/err" || { cat "$tmp/err" >&2; exit 99; }
		tr -d ' \n\t' <"$tmp/b-$rc.json" | grep -o '"losses":\[[^]]*\]\|"weights_digest":"[^"]*"' >"$tmp/b-$rc"
	done
	if [ -s "$tmp/b-none" ] && cmp -s "$tmp/b-none" "$tmp/b-selective" && cmp -s "$tmp/b-none" "$tmp/b-full"; then
		echo "ok: bits, --freeze $fz $*: recompute none, selective and full alike ($(wc -l <"$tmp/b-none") values)"
	else
		echo "$name: FAIL: bits, --freeze $fz $*: the weights or losses differ between recompute modes" >&2
		status=1
	fi
}

fz_refuse() {
	want=$1
	shift
	for cmd in measure theory; do
		rm -f "$tmp/o.json"
		# shellcheck disable=SC2086
		"$zerosim" $cmd --model "$llama" --seq 16 --batch 2 $fz_refuse_with "$@" --out "$tmp/o.json" \
			>/dev/null 2>"$tmp/err"
		rc=$?
		if [ $rc -eq 2 ] && [ "$(wc -l <"$tmp/err")" -eq 1 ] && grep -q -- "$want" "$tmp/err" && [ ! -e "$tmp/o.json" ]
		then
			echo "ok: $cmd $* refused: $(cat "$tmp/err")"
		else
			echo "$name: FAIL: $cmd $*: exit $rc, stderr: $(cat "$tmp/err")" >&2
			status=1
		fi
	done
}

fz_hand() {
	if [ "$2" = "$3" ]; then
		echo "ok: $1: $2 = $4"
	else
		echo "$name: FAIL: $1: $2, by hand $3 ($4)" >&2
		status=1
	fi
}

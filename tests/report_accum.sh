#!/bin/sh
# report_accum — the report on runs of K micro-steps a step (--grad-accum),
# measured and predicted by this zerosim, the MLP 64,256,64 (Ψ = P = 33,088
# elements, p = 2 B; docs/schedule.md, "Gradient accumulation"):
#  - DeepSpeed's zero3 at N = 2, K = 2, --ds-persist 0 (every tensor
#    partitioned), 2 steps: the comm departs from the K-fold floor (3·K·Ψ·p·
#    (N−1)/N = 198,528 B) by the coordinator's all-gathers measured against
#    the paper's two a micro-step, 2·K·(N−1)/N·P·p = 132,352 B a step, and
#    nothing is left over as "other" (it was: the gathers were held to 2 a
#    step, 66,176 B, and "other" took −66,176 B);
#  - the paper's schedule at K = 3: every run equals the schedule.
set -u
zerosim=${ZS_BUILDDIR:-.}/zerosim
tmp=$(mktemp -d "${TMPDIR:-/tmp}/zs-accum.XXXXXX") || exit 99
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
# The number after "KEY": in the comm point of diff.json (the third point).
comm_cause() { tr -d ' \t\n' <"$2" | sed 's/"metric":"comm"/\n/' | sed -n 2p | sed -n "s/.*\"$1\":\(-\{0,1\}[0-9.e+-]*\).*/\1/p" | head -n 1; }

ds="--framework deepspeed --schemes zero3 --world 2 --grad-accum 2 --ds-persist 0 --steps 2"
# shellcheck disable=SC2086
"$zerosim" measure --quiet $ds --out "$tmp/m.json" && "$zerosim" theory $ds --out "$tmp/t.json" ||
	fail "measure or theory of DeepSpeed's zero3 at K = 2"
ZEROSIM_DATADIR=${ZEROSIM_DATADIR:-${srcdir:-.}} "$zerosim" report --no-render --measured "$tmp/m.json" --theory "$tmp/t.json" --out "$tmp/ds" >"$tmp/out" 2>"$tmp/err" ||
	fail "report: $(cat "$tmp/err")"
grep -q "^zerosim report: 3 points, 3 flagged, 0 unexplained$" "$tmp/out" || fail "not every point explained: $(cat "$tmp/out")"
# The measured all-gathers a step, from the file (a mean over the steps).
ag=$(tr -d ' \t\n' <"$tmp/m.json" | sed -n 's/.*"all_gather":{[^}]*"bytes_per_step":\([0-9.]*\).*/\1/p')
[ -n "$ag" ] || fail "no all_gather bytes in measured.json"
want=$(awk -v a="$ag" 'BEGIN { printf "%.10g", a - 2 * 2 * (2 - 1) / 2 * 33088 * 2 }')
[ "$(comm_cause coordinator_gathers "$tmp/ds/diff.json")" = "$want" ] ||
	fail "coordinator's gathers $(comm_cause coordinator_gathers "$tmp/ds/diff.json") B, not $ag - 132352 = $want B"
[ "$(comm_cause other "$tmp/ds/diff.json")" = 0 ] ||
	fail "comm's other is $(comm_cause other "$tmp/ds/diff.json") B, not 0"
[ "$(comm_cause floor_bytes "$tmp/ds/diff.json")" = 198528 ] ||
	fail "comm's floor is $(comm_cause floor_bytes "$tmp/ds/diff.json") B, not K-fold 198528 B"
grep -q "^FLAG zero3 N=2 unit=model comm: .* = coordinator's gathers -[0-9.]* B$" "$tmp/ds/flags.txt" ||
	fail "flags.txt's comm line: $(grep comm "$tmp/ds/flags.txt")"

# The paper's schedule at K = 3 joins its theory and equals it.
"$zerosim" measure --quiet --grad-accum 3 --world 1,2,3 --steps 2 --out "$tmp/pm.json" &&
	"$zerosim" theory --grad-accum 3 --world 1,2,3 --out "$tmp/pt.json" || fail "the paper's K = 3 files"
ZEROSIM_DATADIR=${ZEROSIM_DATADIR:-${srcdir:-.}} "$zerosim" report --no-render --measured "$tmp/pm.json" --theory "$tmp/pt.json" --out "$tmp/paper" >"$tmp/out" 2>"$tmp/err" ||
	fail "report of the paper's K = 3: $(cat "$tmp/err")"
grep -q "^zerosim report: [0-9]* points, [0-9]* flagged, 0 unexplained$" "$tmp/out" || fail "paper K = 3: $(cat "$tmp/out")"
exit 0

#!/bin/sh
# moe_theory — the theory of a mixture of experts (zerosim theory --routing,
# docs/schedule.md "Mixtures of experts") against the engine's step on the
# tiny mixtral of tests/moe_step.sh (d 64, F 96, 2 blocks, 4 experts, top
# 2; B 4, T 16, 3 steps; fp32, --framework paper, N = 1, 2, 3, the four
# schemes, both units):
#
#  - --routing FILE (the measurement's own counts): every point equal to
#    the byte (resident, peak, every category, comm, each rank's peak;
#    tests/json_agree), N = 2's and 3's ranks peaking apart as measured;
#  - --routing balanced: a departure shown (its peak is not the measured
#    one), and the report names it routing imbalance, none unexplained;
#  - --routing worst: at least every rank's measured peak;
#  - balanced and worst counts by hand: B·T·k = 3·7·2 = 42 over 4 experts
#    is 11, 11, 10, 10 (the first 42 mod 4 one more), worst 21, 21, 0, 0;
#    at B·T = 64 worst's peak is balanced's plus the largest expert's
#    backward scratch, (64 − 32) rows of (2d + 3F)·4 bytes = 53,248 B;
#  - the refusals, one line each and exit 2: a file without routing, a
#    file of another shape (steps, batch, N), another framework,
#    --routing for a dense model, FILE with --device-mem;
#  - the shipped mixtral-8x7b at fp32 under the paper's schedule.
#
# About 1 s. Exit 0 pass, 1 fail, 77 skip (no python3), 99 error.
name=moe_theory
needs=${ZS_BUILDDIR:-.}/tests/json_agree
. "${srcdir:-.}/tests/moe_lib.sh"
# the shipped configs (gpt2, mixtral-8x7b) from the source tree in a VPATH build
[ -d "$top/data/models" ] || { ZEROSIM_DATADIR=${srcdir:-.}; export ZEROSIM_DATADIR; }
agree=$needs
status=0
fail() { echo "moe_theory: FAIL: $*" >&2; status=1; }

sweep="--model $tmp/config.json --seq 16 --batch 4 --precision fp32 --world 1,2,3 --schemes dp,zero1,zero2,zero3
       --unit model,layer --steps 3"
# shellcheck disable=SC2086
OPENBLAS_NUM_THREADS=1 "$zerosim" measure -q $sweep --out "$tmp/m.json" || { echo "moe_theory: measure failed" >&2; exit 99; }
for r in file balanced worst; do
	arg=$r
	[ "$r" = file ] && arg=$tmp/m.json
	# shellcheck disable=SC2086
	"$zerosim" theory $sweep --routing "$arg" --out "$tmp/$r.json" || { echo "moe_theory: theory --routing $r failed" >&2; exit 99; }
done

# FILE: the measurement to the byte
if "$agree" "$tmp/m.json" "$tmp/file.json" >"$tmp/out" 2>&1; then
	echo "ok: --routing FILE = measure: $(cat "$tmp/out")"
else
	fail "--routing FILE against measure: $(cat "$tmp/out")"
fi
# balanced: a departure the report names
if "$agree" "$tmp/m.json" "$tmp/balanced.json" >"$tmp/out" 2>&1; then
	fail "--routing balanced agrees with the measurement: the routing shows nothing"
else
	echo "ok: --routing balanced departs: $(head -1 "$tmp/out")"
fi
"$zerosim" measure -q --world 1 --steps 1 --out "$tmp/mlp-m.json" && "$zerosim" theory --world 1 --out "$tmp/mlp-t.json" ||
	exit 99
for r in balanced file; do
	ZEROSIM_DATADIR=${ZEROSIM_DATADIR:-${srcdir:-.}} "$zerosim" report --no-render --measured "$tmp/mlp-m.json" --theory "$tmp/mlp-t.json" --transformer "$tmp/m.json" \
		--transformer "$tmp/$r.json" --out "$tmp/rep-$r" --no-render >"$tmp/rep-$r.out" 2>&1 ||
		{ cat "$tmp/rep-$r.out" >&2; exit 99; }
done
line=$(grep "^zerosim report: transformer " "$tmp/rep-balanced.out")
case $line in
*"24 measured, 0 unexplained, 24 departing by routing imbalance"*) echo "ok: report: $line" ;;
*) fail "report of balanced: '$line'" ;;
esac
grep -q "routing imbalance: measured tokens per expert \[.*\] (rank .*) beside balanced \[32, 32, 32, 32\]" \
	"$tmp/rep-balanced.out" || fail "report of balanced names no routing imbalance with its counts"
line=$(grep "^zerosim report: transformer " "$tmp/rep-file.out")
case $line in
*"24 measured, 0 unexplained") echo "ok: report of FILE: $line" ;;
*) fail "report of FILE: '$line'" ;;
esac

python3 - "$tmp" <<'PY' || status=1
import json, sys
tmp = sys.argv[1]
m = json.load(open(tmp + "/m.json"))
t = {r: json.load(open("%s/%s.json" % (tmp, r))) for r in ("file", "balanced", "worst")}
bad = []
def row(f, run):
    return [x for x in f["rows"] if (x["scheme"], x["world"], x["unit"]) == (run["scheme"], run["world"], run["unit"])][0]["schedule"]
apart = 0
for run in m["runs"]:
    tag = "%s N=%d %s" % (run["scheme"], run["world"], run["unit"])
    mp = run["per_rank"]["peak_bytes"]
    fp = row(t["file"], run)["per_rank"]["peak_bytes"]
    apart += len(set(fp)) > 1
    if row(t["file"], run)["peak_rank"] != run["peak_rank"]:
        bad.append("%s: peak_rank %s, measured %s" % (tag, row(t["file"], run)["peak_rank"], run["peak_rank"]))
    if row(t["balanced"], run)["peak_bytes"] == run["peak_bytes"]:
        bad.append("%s: balanced's peak is the measured one" % tag)
    w = row(t["worst"], run)["peak_bytes"]
    if any(p > w for p in mp):
        bad.append("%s: measured peaks %s above worst's %d" % (tag, mp, w))
if apart == 0:
    bad.append("no row's ranks peak apart under FILE: the test cannot see per-rank routing")
cfg = {r: t[r]["config"]["routing"] for r in t}
if cfg["file"].get("mode") != "file" or cfg["balanced"] != {"mode": "balanced", "tokens_per_expert": [32] * 4} \
   or cfg["worst"] != {"mode": "worst", "tokens_per_expert": [64, 64, 0, 0]}:
    bad.append("config.routing: %s" % cfg)
first = m["runs"][0]
if row(t["file"], first).get("routing") != first["routing"]:
    bad.append("FILE's row does not record the run's routing")
# by hand: worst - balanced = (B·T - ceil(B·T·k/E)) rows of (2d + 3F)·4
d, F = 64, 96
for run in m["runs"]:
    diff = row(t["worst"], run)["peak_bytes"] - row(t["balanced"], run)["peak_bytes"]
    if diff != (64 - 32) * (2 * d + 3 * F) * 4:
        bad.append("%s %s N=%d: worst - balanced = %d, by hand 53248" % (run["scheme"], run["unit"], run["world"], diff))
        break
print("moe_theory: %d runs; rows whose ranks peak apart under FILE: %d" % (len(m["runs"]), apart))
for b in bad[:20]:
    print("moe_theory: FAIL: " + b)
sys.exit(1 if bad else 0)
PY

# balanced and worst counts by hand at B·T·k = 42
for r in balanced worst; do
	"$zerosim" theory --model "$tmp/config.json" --seq 7 --batch 3 --precision fp32 --world 1 --routing $r \
		--out "$tmp/h.json" || exit 99
	got=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["config"]["routing"]["tokens_per_expert"])' "$tmp/h.json")
	want="[11, 11, 10, 10]"
	[ $r = worst ] && want="[21, 21, 0, 0]"
	if [ "$got" = "$want" ]; then echo "ok: $r at B·T·k = 42: $got"; else fail "$r at B·T·k = 42: $got, by hand $want"; fi
done

# refusals: one line naming the cause, exit 2
refuse() { # WANT ARGS...: theory ARGS exits 2 with one line containing WANT
	want=$1
	shift
	"$zerosim" theory "$@" >"$tmp/r.out" 2>"$tmp/r.err"
	rc=$?
	if [ $rc -ne 2 ] || [ "$(wc -l <"$tmp/r.err")" -ne 1 ] || ! grep -qF -- "$want" "$tmp/r.err"; then
		fail "theory $*: exit $rc, stderr '$(cat "$tmp/r.err")', expected '$want'"
	else
		echo "ok: refused: $(cat "$tmp/r.err")"
	fi
}
# shellcheck disable=SC2086
refuse "has no \"routing\"" $sweep --routing "$tmp/mlp-m.json"
# shellcheck disable=SC2086
refuse "nothing.json" $sweep --routing "$tmp/nothing.json"
one="--model $tmp/config.json --seq 16 --batch 4 --precision fp32 --schemes dp --unit model"
# shellcheck disable=SC2086
refuse "3 steps at N = 1, --steps 2" $one --world 1 --steps 2 --routing "$tmp/m.json"
# shellcheck disable=SC2086
refuse "routes 128 assignments a block, B·T·k is 64" $one --world 1 --batch 2 --steps 3 --routing "$tmp/m.json"
# shellcheck disable=SC2086
refuse "no run of N = 4" $one --world 4 --steps 3 --routing "$tmp/m.json"
# shellcheck disable=SC2086
refuse "not with --framework torch" $one --world 1 --framework torch --routing balanced
refuse "--routing needs a mixture of experts" --model gpt2 --precision fp32 --world 1 --routing worst
# shellcheck disable=SC2086
refuse "--device-mem's largest micro-batch needs --routing balanced or worst" $one --world 1 --steps 3 \
	--routing "$tmp/m.json" --device-mem 80GB
# the review of s32-int: counts no router can make (one expert sent more
# tokens than the block has, the sum kept), a file that names more blocks
# and experts than it lists (it crashed), and --out over the file read
python3 - "$tmp" <<'PY' || exit 99
import json, sys
t = sys.argv[1]
m = json.load(open(t + "/m.json"))
run = [r for r in m["runs"] if r["world"] == 1][0]
m["runs"] = [run]
rt = run["routing"]
for step in rt["tokens_per_expert"][0]:
    for b in range(len(step)):
        n = sum(step[b])
        step[b] = [n] + [0] * (len(step[b]) - 1)
json.dump(m, open(t + "/over.json", "w"))
rt["blocks"], rt["experts"] = 1000000, 4096
json.dump(m, open(t + "/huge.json", "w"))
PY
# shellcheck disable=SC2086
refuse "sends 128 tokens to one expert of a block, more than the B·T = 64" $one --world 1 --steps 3 \
	--routing "$tmp/over.json"
# shellcheck disable=SC2086
refuse "not 1000000 blocks" $one --world 1 --steps 3 --routing "$tmp/huge.json"
cp "$tmp/m.json" "$tmp/same.json"
# shellcheck disable=SC2086
refuse "same.json" $one --world 1 --steps 3 --routing "$tmp/same.json" --out "$tmp/same.json"
cmp -s "$tmp/m.json" "$tmp/same.json" || fail "theory --out over its --routing file changed it"

# the shipped mixtral-8x7b: the paper's exact step at fp32
"$zerosim" theory --model mixtral-8x7b --precision fp32 --world 8 --seq 4096 --schemes zero3 --out "$tmp/x.json" ||
	fail "theory --model mixtral-8x7b --precision fp32 refused"
exit $status

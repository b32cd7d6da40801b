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
#    1,000,000 B added to one run's activations (or 20,000 B to its
#    scratch, beyond (47 − 32) tokens of 1,664 B) stays unexplained with
#    its size;
#  - --routing worst: at least every rank's measured peak, and the report
#    names every row within the worst-case routing bound;
#  - config.routing.routed_bytes_per_token, 1,664 B = (2d + 3F)·4, against
#    the engine's allocations: the busiest expert's four scratch tensors
#    and each expert's four saved ones in a --timeline step, and every
#    pair of ranks' measured peaks apart by their largest counts;
#  - balanced and worst counts by hand: B·T·k = 3·7·2 = 42 over 4 experts
#    is 11, 11, 10, 10 (the first 42 mod 4 one more), worst 21, 21, 0, 0;
#    at B·T = 64 worst's peak is balanced's plus the largest expert's
#    backward scratch, (64 − 32) rows of (2d + 3F)·4 bytes = 53,248 B;
#  - the refusals, one line each and exit 2: a file without routing, a
#    file of another shape (steps, batch, N), another framework,
#    --routing for a dense model, FILE with --device-mem, a file whose
#    config is another run's (batch, seed, lr, precision, vocab_size), a
#    rank that is not a list of steps; every message about the file names it;
#  - the report refuses a theory's routing no --routing makes (no experts,
#    uneven balanced counts) or a token's bytes of 0 or 1e308, and leaves
#    unexplained, saying why, counts no router makes (1e300, an extra step);
#  - the fuzz harness's seeds (tests/fuzz/corpus/routing/valid-*) load, its
#    regression inputs are refused naming the file;
#  - the report refuses the plain loop's theory (--framework torch) beside
#    the paper's at another routing, naming both, and its hint gives FILE;
#  - the shipped mixtral-8x7b at fp32 under the paper's schedule.
#
# About 2 s. Exit 0 pass, 1 fail, 77 skip (no python3), 99 error.
name=moe_theory
needs=${ZS_BUILDDIR:-.}/tests/json_agree
. "${srcdir:-.}/tests/moe_lib.sh"
# the shipped configs (gpt2, mixtral-8x7b) from the source tree in a VPATH build
[ -d "$top/data/models" ] || { ZEROSIM_DATADIR=${srcdir:-.}; export ZEROSIM_DATADIR; }
agree=$needs

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
# the review of s33: a departure beyond what the counts allow is not the
# routing's. Run dp N=3 model (largest count 47, balanced 32) with 1,000,000 B
# more activations at its peak, or 20,000 B more scratch.
python3 - "$tmp" <<'PY' || exit 99
import json, sys
t = sys.argv[1]
for cat, more in (("activations", 1000000), ("scratch", 20000)):
    m = json.load(open(t + "/m.json"))
    r = [x for x in m["runs"] if (x["scheme"], x["world"], x["unit"]) == ("dp", 3, "model")][0]
    r["peak_bytes"] += more
    r["peak_breakdown"][cat] += more
    r["per_rank"]["peak_bytes"][r["peak_rank"]] += more
    json.dump(m, open("%s/m-%s.json" % (t, cat), "w"))
PY
report() { # NAME MEASURED THEORY: the report of both, its output in $tmp/rep-NAME.out
	ZEROSIM_DATADIR=${ZEROSIM_DATADIR:-${srcdir:-.}} "$zerosim" report --no-render --measured "$tmp/mlp-m.json" \
		--theory "$tmp/mlp-t.json" --transformer "$2" --transformer "$3" --out "$tmp/rep-$1" >"$tmp/rep-$1.out" 2>&1 ||
		{ cat "$tmp/rep-$1.out" >&2; exit 99; }
}
for r in balanced worst file; do
	report $r "$tmp/m.json" "$tmp/$r.json"
done
report activations "$tmp/m-activations.json" "$tmp/balanced.json"
# fig12-moe: the report's tokens per expert of each block, the first
# measured run's (its mean over ranks and steps, least, most) beside
# balanced's and worst's counts, worked here from measured.json; none
# under FILE (no routing of its own to compare)
if python3 - "$tmp" <<'PY' >"$tmp/out" 2>&1; then
import json, sys
t = sys.argv[1]
runs = json.load(open(t + "/m.json"))["runs"]
for mode, theory in (("balanced", [32, 32, 32, 32]), ("worst", [64, 64, 0, 0])):
    lines = open("%s/rep-%s/figures/fig12-moe.dat" % (t, mode)).read().split("\n")
    head = lines[0]
    run = [r for r in runs if (", %s N=%d unit=%s:" % (r["scheme"], r["world"], r["unit"])) in head]
    if len(run) != 1:
        sys.exit("%s: its first line names no run: %s" % (mode, head))
    tok = run[0]["routing"]["tokens_per_expert"]
    rows = [l.split() for l in lines if l and not l.startswith("#")]
    want = []
    for l in range(len(tok[0][0])):
        for e in range(4):
            v = [tok[k][s][l][e] for k in range(len(tok)) for s in range(len(tok[k]))]
            want.append((sum(v) / len(v), min(v), max(v), theory[e]))
    got = [(float(r[3]), float(r[4]), float(r[5]), float(r[6])) for r in rows]
    if len(got) != len(want) or any(abs(a[0] - b[0]) > 1e-6 or a[1:] != b[1:] for a, b in zip(got, want)):
        sys.exit("%s: %s, worked here %s" % (mode, got, want))
    print("%s: %d bars of %s" % (mode, len(got), head[2:60]))
import os
if os.path.exists(t + "/rep-file/figures/fig12-moe.dat"):
    sys.exit("file: a fig12-moe with no theory counts to compare")
PY
	echo "ok: fig12-moe: $(tr '\n' ' ' <"$tmp/out")"
else
	fail "fig12-moe: $(cat "$tmp/out")"
fi
grep -q "fig12-moe" "$tmp/rep-balanced/transformer.tex" || fail "fig12-moe is not in the transformer section"
report scratch "$tmp/m-scratch.json" "$tmp/balanced.json"
summary() { # NAME WANT: report NAME's transformer summary ends in WANT
	line=$(grep "^zerosim report: transformer " "$tmp/rep-$1.out")
	case $line in
	*"$2") echo "ok: report of $1: $line" ;;
	*) fail "report of $1: '$line', expected '...$2'" ;;
	esac
}
summary balanced "24 measured, 0 unexplained, 24 departing by routing imbalance (the theory's --routing balanced)"
summary worst "24 measured, 0 unexplained, 24 within the worst-case routing bound (the theory's --routing worst)"
summary file "24 measured, 0 unexplained"
summary activations "24 measured, 1 unexplained, 23 departing by routing imbalance (the theory's --routing balanced)"
summary scratch "24 measured, 1 unexplained, 23 departing by routing imbalance (the theory's --routing balanced)"
says() { # NAME TEXT: report NAME's output has TEXT
	if grep -qF -- "$2" "$tmp/rep-$1.out"; then echo "ok: report of $1 says '$2'"; else fail "report of $1 does not say '$2'"; fi
}
dp3="${tmp##*/} dp N=3 unit=model:" # the model is named after its config's folder
says balanced "$dp3 routing imbalance: measured tokens per expert [47, 39, 23, 19] (rank 1, step 3, block 1: the most on one expert) beside balanced [32, 32, 32, 32]; peak 3840784 B measured, 3815824 B balanced: +24960 B, within 0 to 24960 B (1664 B a routed token)"
says worst "$dp3 within the worst-case routing bound: measured tokens per expert [47, 39, 23, 19] (rank 1, step 3, block 1: the most on one expert) beside worst [64, 64, 0, 0]; peak 3840784 B measured, 3869072 B worst: -28288 B, within -29952 to 0 B (1664 B a routed token)"
says activations "$dp3 the routing (--routing balanced; tokens per expert up to 47 measured, 32 balanced) moves the peak by 0 to 24960 B (1664 B a routed token) and the activations by none; measured: peak +1024960 B (1000000 B beyond), activations +1000000 B, scratch +24960 B"
says activations "UNEXPLAINED $dp3 measured peak 4840784 B"
says scratch "measured: peak +44960 B (20000 B beyond), activations +0 B, scratch +44960 B"
# the review of s33-int: a theory's routing no --routing makes, or a token's
# bytes that are none or beyond any peak, refuse its file in one line; counts
# no router makes (one of 1e300, a rank one step longer) are not named
python3 - "$tmp" <<'PY' || exit 99
import json, sys
t = sys.argv[1]
for name, key, val in (("empty", "tokens_per_expert", []), ("uneven", "tokens_per_expert", [40, 32, 32, 24]),
                       ("zero", "routed_bytes_per_token", 0), ("huge", "routed_bytes_per_token", 1e308)):
    b = json.load(open(t + "/balanced.json"))
    b["config"]["routing"][key] = val
    json.dump(b, open("%s/t-%s.json" % (t, name), "w"))
m = json.load(open(t + "/m.json"))
r = [x for x in m["runs"] if (x["scheme"], x["world"], x["unit"]) == ("dp", 3, "model")][0]
r["routing"]["tokens_per_expert"][1][2][1][0] = 1e300
json.dump(m, open(t + "/m-1e300.json", "w"))
m = json.load(open(t + "/m.json"))
r = [x for x in m["runs"] if (x["scheme"], x["world"], x["unit"]) == ("dp", 3, "model")][0]
r["routing"]["tokens_per_expert"][2].append(r["routing"]["tokens_per_expert"][2][0])
json.dump(m, open(t + "/m-step.json", "w"))
PY
report_refuse() { # WANT THEORY: the report of m.json and THEORY exits 2 with one line containing WANT
	ZEROSIM_DATADIR=${ZEROSIM_DATADIR:-${srcdir:-.}} "$zerosim" report --no-render --measured "$tmp/mlp-m.json" \
		--theory "$tmp/mlp-t.json" --transformer "$tmp/m.json" --transformer "$2" --out "$tmp/rep-refused" \
		>"$tmp/r.out" 2>"$tmp/r.err"
	rc=$?
	if [ $rc -ne 2 ] || [ "$(wc -l <"$tmp/r.err")" -ne 1 ] || ! grep -qF -- "$1" "$tmp/r.err"; then
		fail "report of $2: exit $rc, stderr '$(cat "$tmp/r.err")', expected '$1'"
	else
		echo "ok: report refused: $(cat "$tmp/r.err")"
	fi
}
report_refuse "$tmp/t-empty.json: config.routing.tokens_per_expert: 0 experts, not 1 to 4096" "$tmp/t-empty.json"
report_refuse "$tmp/t-uneven.json: config.routing.tokens_per_expert: not counts --routing balanced makes" \
	"$tmp/t-uneven.json"
report_refuse "$tmp/t-zero.json: config.routing.routed_bytes_per_token: not a whole number of bytes from 1 to" \
	"$tmp/t-zero.json"
report_refuse "$tmp/t-huge.json: config.routing.routed_bytes_per_token: not a whole number of bytes from 1 to" \
	"$tmp/t-huge.json"
report 1e300 "$tmp/m-1e300.json" "$tmp/balanced.json"
report step "$tmp/m-step.json" "$tmp/balanced.json"
summary 1e300 "24 measured, 1 unexplained, 23 departing by routing imbalance (the theory's --routing balanced)"
summary step "24 measured, 1 unexplained, 23 departing by routing imbalance (the theory's --routing balanced)"
says 1e300 "$dp3 measured routing.tokens_per_expert has a count that is not a whole number up to the B·T·k a block routes: no router made it"
says step "$dp3 measured routing.tokens_per_expert has a rank of more steps than the first: no router made it"

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
u = (2 * 64 + 3 * 96) * 4 # (2d + 3F)·4 by hand, d 64, F 96
if cfg["file"].get("mode") != "file" or cfg["file"].get("routed_bytes_per_token") != u \
   or cfg["balanced"] != {"mode": "balanced", "routed_bytes_per_token": u, "tokens_per_expert": [32] * 4} \
   or cfg["worst"] != {"mode": "worst", "routed_bytes_per_token": u, "tokens_per_expert": [64, 64, 0, 0]}:
    bad.append("config.routing: %s" % cfg)
# the engine's ranks peak apart by their largest counts, (c_k - c_0) tokens of u
pairs = 0
for run in m["runs"]:
    top = [max(max(b) for s in rk for b in s) for rk in run["routing"]["tokens_per_expert"]]
    pk = run["per_rank"]["peak_bytes"]
    for k in range(1, len(pk)):
        pairs += top[k] != top[0]
        if pk[k] - pk[0] != (top[k] - top[0]) * u:
            bad.append("%s N=%d %s: ranks 0 and %d peak %d B apart, largest counts %d and %d" %
                       (run["scheme"], run["world"], run["unit"], k, pk[k] - pk[0], top[0], top[k]))
if pairs == 0:
    bad.append("no two ranks with different largest counts: the routed bytes a token go unchecked")
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

# routed_bytes_per_token in the engine's own allocations (one --timeline
# step, N = 1): each expert's saved tensors (xe, gu, act, ye: four allocations
# in a row) are n_e of it, the busiest expert's scratch (dye, dxe, dact, dgu:
# four scratch allocations in a row) the step's largest count of it
OPENBLAS_NUM_THREADS=1 "$zerosim" measure -q --model "$tmp/config.json" --seq 16 --batch 4 --precision fp32 --world 1 \
	--schemes dp --unit model --steps 1 --timeline --out "$tmp/tl.json" || exit 99
python3 - "$tmp" <<'PY' || status=1
import json, sys
tmp = sys.argv[1]
u = json.load(open(tmp + "/balanced.json"))["config"]["routing"]["routed_bytes_per_token"]
run = json.load(open(tmp + "/tl.json"))["runs"][0]
blocks = run["routing"]["tokens_per_expert"][0][-1]
ev = run["timeline"]
def allocs(phase, cat):
    return [e["bytes"] for e in ev if e["op"] == "alloc" and e["phase"] == phase and e["category"] == cat]
def runs_of(sizes, want):
    """where sizes holds, in a row, groups of four summing to each of want"""
    n = 4 * len(want)
    return [i for i in range(len(sizes) - n + 1)
            if all(sum(sizes[i + 4 * j:i + 4 * j + 4]) == w for j, w in enumerate(want))]
bad = []
fwd, at = allocs("forward", "activations"), 0
for l, counts in enumerate(blocks):
    found = [i for i in runs_of(fwd, [n * u for n in counts if n > 0]) if i >= at]
    if not found:
        bad.append("block %d: no four allocations an expert of %s tokens x %d B in the forward" % (l, counts, u))
    else:
        at = found[0] + 4 * len(counts)
top = max(max(c) for c in blocks)
if not runs_of(allocs("backward", "scratch"), [top * u]):
    bad.append("no four scratch allocations of the busiest expert, %d tokens x %d B" % (top, u))
print("moe_theory: routed bytes a token %d: each expert's saved tensors and the scratch of %d tokens in the engine's "
      "timeline%s" % (u, top, "" if not bad else ": NO"))
for b in bad:
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
# the sums, in a file whose config does not say its batch (one from before
# config.batch is checked below)
python3 -c 'import json,sys; m = json.load(open(sys.argv[1])); del m["config"]; json.dump(m, open(sys.argv[2], "w"))' \
	"$tmp/m.json" "$tmp/no-config.json" || exit 99
# shellcheck disable=SC2086
refuse "routes 128 assignments a block, B·T·k is 64" $one --world 1 --batch 2 --steps 3 --routing "$tmp/no-config.json"
# the review of s33-int: a file of another run than the sweep's, in what
# decides the router's choices, is refused naming the key (its shape alone
# was checked)
# shellcheck disable=SC2086
refuse "$tmp/m.json: its config.batch is 4, --batch is 2 here" $one --world 1 --batch 2 --steps 3 --routing "$tmp/m.json"
# shellcheck disable=SC2086
refuse "$tmp/m.json: its config.seed is 3, --seed is 7 here" $one --world 1 --steps 3 --seed 7 --routing "$tmp/m.json"
# shellcheck disable=SC2086
refuse "$tmp/m.json: its config.lr is 0.001, --lr is 0.5 here" $one --world 1 --steps 3 --lr 0.5 --routing "$tmp/m.json"
refuse "$tmp/m.json: its config.precision is \"fp32\", --precision is mixed here" --model "$tmp/config.json" --seq 16 \
	--batch 4 --precision mixed --schemes dp --unit model --world 1 --steps 3 --routing "$tmp/m.json"
python3 - "$tmp" <<'PY' || exit 99
import json, sys
t = sys.argv[1]
m = json.load(open(t + "/m.json"))
m["config"]["model"]["vocab_size"] = 65
json.dump(m, open(t + "/vocab.json", "w"))
m = json.load(open(t + "/m.json"))
run = [r for r in m["runs"] if r["world"] == 2][0]
m["runs"] = [run]
run["routing"]["tokens_per_expert"] = [5, [[1]]]
json.dump(m, open(t + "/rank-five.json", "w"))
PY
# shellcheck disable=SC2086
refuse "$tmp/vocab.json: its config.model.vocab_size is 65, the model's vocab_size is 64 here" $one --world 1 \
	--steps 3 --routing "$tmp/vocab.json"
# shellcheck disable=SC2086
refuse "$tmp/rank-five.json: runs[0].routing.tokens_per_expert[0]: not a list of steps" $one --world 2 --steps 3 \
	--routing "$tmp/rank-five.json"
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
# every message about the file names it (the review of s33: runs[i]'s keys
# did not, and a long path was cut short)
mkdir -p "$tmp/a folder whose name is long enough to pass the old message's ninety-six bytes"
python3 - "$tmp" <<'PY' || exit 99
import json, sys
t = sys.argv[1]
m = json.load(open(t + "/m.json"))
del m["runs"][0]["scheme"]
json.dump(m, open(t + "/no-scheme.json", "w"))
m = json.load(open(t + "/m.json"))
m["runs"][0]["routing"]["blocks"] = 0
json.dump(m, open(t + "/no-blocks.json", "w"))
m = json.load(open(t + "/m.json"))
m["runs"][0]["routing"]["tokens_per_expert"][0][0][1][2] = 1.5
json.dump(m, open(t + "/a folder whose name is long enough to pass the old message's ninety-six bytes/half.json", "w"))
PY
# shellcheck disable=SC2086
refuse "$tmp/no-scheme.json: runs[0] has no \"scheme\"" $one --world 1 --steps 3 --routing "$tmp/no-scheme.json"
# shellcheck disable=SC2086
refuse "$tmp/no-blocks.json: runs[0].routing.blocks is 0" $one --world 1 --steps 3 --routing "$tmp/no-blocks.json"
long="$tmp/a folder whose name is long enough to pass the old message's ninety-six bytes/half.json"
# shellcheck disable=SC2086
refuse "$long: runs[0].routing.tokens_per_expert[0][0][1][2]: not a whole number of tokens" $one --world 1 --steps 3 \
	--routing "$long"
# the fuzz harness's seeds load (a seed the reader refuses fuzzes nothing
# past it) and its regression inputs are refused naming the file
fz=${srcdir:-.}/tests/fuzz
seeds=0
for f in "$fz"/corpus/routing/valid-*.json; do
	[ -f "$f" ] || continue
	seeds=$((seeds + 1))
	args=$(python3 -c 'import json,sys
r = json.load(open(sys.argv[1]))["runs"]
print("--world %s --schemes %s --unit %s --steps %d" % (",".join(sorted({str(x["world"]) for x in r})),
      ",".join(sorted({x["scheme"] for x in r})), ",".join(sorted({x["unit"] for x in r})),
      len(r[0]["routing"]["tokens_per_expert"][0])))' "$f")
	# shellcheck disable=SC2086
	"$zerosim" theory --model "$tmp/config.json" --seq 4 --batch 2 --precision fp32 $args --routing "$f" \
		--out "$tmp/seed.json" 2>"$tmp/r.err" || fail "the seed $f: $(cat "$tmp/r.err")"
done
[ $seeds -ge 2 ] || fail "$seeds valid seeds in $fz/corpus/routing"
for f in "$fz"/regress/routing/*.json; do
	refuse "$f: " --model "$tmp/config.json" --seq 4 --batch 2 --precision fp32 --world 1 --steps 2 --routing "$f"
done
cp "$tmp/m.json" "$tmp/same.json"
# shellcheck disable=SC2086
refuse "same.json" $one --world 1 --steps 3 --routing "$tmp/same.json" --out "$tmp/same.json"
cmp -s "$tmp/m.json" "$tmp/same.json" || fail "theory --out over its --routing file changed it"

# the review of s35-int: the report joins the plain loop's theory (--framework
# torch --wrapper none, --routing FILE) only with the paper's at the same
# routing; at another one it refuses naming both, and its hint gives the FILE
w1="--model $tmp/config.json --seq 16 --batch 4 --precision fp32 --world 1 --steps 3"
# shellcheck disable=SC2086
"$zerosim" measure -q $w1 --schemes dp --unit layer --out "$tmp/m1.json" &&
	"$zerosim" theory $w1 --framework torch --torch-version 1.13 --torch-device cpu --wrapper none --routing "$tmp/m1.json" --out "$tmp/tt.json" &&
	"$zerosim" theory $w1 --schemes dp --unit layer --routing balanced --out "$tmp/tp-balanced.json" &&
	"$zerosim" theory $w1 --schemes dp --unit layer --routing "$tmp/m1.json" --out "$tmp/tp-file.json" ||
	{ echo "moe_theory: the plain loop's theories failed" >&2; exit 99; }
# its text says measure runs it, and measure does (tests/moe_measure.sh holds the two to the byte)
# shellcheck disable=SC2086
"$zerosim" theory $w1 --framework torch --torch-version 1.13 --torch-device cpu --wrapper none \
	--routing "$tmp/m1.json" >"$tmp/tt.txt" || fail "the plain loop's text"
if ! grep -q "what measure --model" "$tmp/tt.txt" || grep -q "which measure does not run" "$tmp/tt.txt"; then
	fail "the plain loop's text of a mixture: $(grep "exact step" "$tmp/tt.txt")"
fi
# shellcheck disable=SC2086
"$zerosim" measure -q $w1 --framework torch --torch-version 1.13 --torch-device cpu --wrapper none \
	--out "$tmp/mt.json" 2>"$tmp/err" || fail "measure of a mixture under torch: $(cat "$tmp/err")"
# the plain loop's theory under --routing balanced and worst (not only FILE):
# under set_to_none FILE is the measurement to the byte, balanced departs
# from it (its counts the issue's: 32 each), worst is the FILE of its own
# counts (step 1 balanced, then the first k experts B·T each), and worst
# at --steps 1 is refused (its idle experts would never get a .grad)
pl="--framework torch --torch-version 1.13 --torch-device cpu --wrapper none --zero-grad none"
# shellcheck disable=SC2086
"$zerosim" measure -q $w1 $pl --out "$tmp/mn.json" || fail "measure of a mixture under set_to_none"
for r in file balanced worst; do
	arg=$r
	[ "$r" = file ] && arg=$tmp/mn.json
	# shellcheck disable=SC2086
	"$zerosim" theory $w1 $pl --routing "$arg" --out "$tmp/pl-$r.json" 2>"$tmp/err" ||
		fail "theory --framework torch --routing $r: $(cat "$tmp/err")"
done
python3 - "$tmp" <<'PY' || exit 99
import json, sys
t = sys.argv[1]
m = json.load(open(t + "/mn.json"))
json.dump(m, open(t + "/mn-orig.json", "w"))
run = m["runs"][0]
L, E = run["routing"]["blocks"], run["routing"]["experts"]
bal, worst = [[32] * E] * L, [[64, 64] + [0] * (E - 2)] * L
run["routing"]["tokens_per_expert"] = [[bal, worst, worst]]
json.dump(m, open(t + "/mn-worst.json", "w"))
PY
# shellcheck disable=SC2086
"$zerosim" theory $w1 $pl --routing "$tmp/mn-worst.json" --out "$tmp/pl-wfile.json" 2>"$tmp/err" ||
	fail "theory --routing FILE of worst's counts: $(cat "$tmp/err")"
if python3 - "$tmp" <<'PY' >"$tmp/out" 2>&1; then
import json, sys
t = sys.argv[1]
run = json.load(open(t + "/mn.json"))["runs"][0]
def sched(n):
    j = json.load(open("%s/pl-%s.json" % (t, n)))
    return j["rows"][0]["schedule"], j["config"].get("routing", {})
bad = []
first = lambda v: v[0] if isinstance(v, list) else v
meas = (first(run["resident_bytes"]), first(run["peak_bytes"]))
for n in ("file", "balanced", "worst", "wfile"):
    s, _ = sched(n)
    print(n, s["resident_bytes"], s["peak_bytes"])
f, b, w, wf = (sched(n)[0] for n in ("file", "balanced", "worst", "wfile"))
if (f["resident_bytes"], f["peak_bytes"]) != meas:
    bad.append("FILE %s, measured %s" % ((f["resident_bytes"], f["peak_bytes"]), meas))
if b["resident_bytes"] != meas[0] or b["peak_bytes"] == meas[1]:
    bad.append("balanced %s against measured %s: no departure shown" % ((b["resident_bytes"], b["peak_bytes"]), meas))
if (w["resident_bytes"], w["peak_bytes"]) != (wf["resident_bytes"], wf["peak_bytes"]):
    bad.append("worst %s, the FILE of its counts %s" % ((w["resident_bytes"], w["peak_bytes"]),
                                                          (wf["resident_bytes"], wf["peak_bytes"])))
for n, want in (("balanced", [32, 32, 32, 32]), ("worst", [64, 64, 0, 0])):
    got = sched(n)[1].get("tokens_per_expert")
    if got != want:
        bad.append("config.routing.tokens_per_expert of %s: %s" % (n, got))
print("measured", meas[0], meas[1], "; balanced departs by %+d B" % (meas[1] - b["peak_bytes"]))
if bad:
    sys.exit("; ".join(bad))
PY
	echo "ok: the plain loop's routings: $(tr '\n' ' ' <"$tmp/out")"
else
	fail "the plain loop's routings: $(cat "$tmp/out")"
fi
# shellcheck disable=SC2086
refuse "--routing worst under --framework torch: --steps 1 is the run's first step" --model "$tmp/config.json" \
	--seq 16 --batch 4 --precision fp32 --world 1 --steps 1 $pl --routing worst
# shellcheck disable=SC2086
"$zerosim" theory $w1 $pl --routing worst >"$tmp/pw.txt" || fail "the plain loop's text under worst"
grep -q "the routing is worst (--routing), tokens per expert a block 64, 64, 0, 0 (step 1 balanced" "$tmp/pw.txt" ||
	fail "the plain loop's text under worst: $(grep "the routing is" "$tmp/pw.txt")"
pair() { # PAPER: the report of the plain loop's theory beside PAPER, its stderr in $tmp/r.err
	ZEROSIM_DATADIR=${ZEROSIM_DATADIR:-${srcdir:-.}} "$zerosim" report --no-render --measured "$tmp/mlp-m.json" \
		--theory "$tmp/mlp-t.json" --transformer "$tmp/tt.json" ${1:+--transformer "$1"} --out "$tmp/rep-pair" \
		>"$tmp/r.out" 2>"$tmp/r.err"
}
pair "$tmp/tp-file.json" || fail "report of the plain loop with the paper at its routing: $(cat "$tmp/r.err")"
pair "$tmp/tp-balanced.json"
rc=$?
want="$tmp/tt.json (--routing $tmp/m1.json) and $tmp/tp-balanced.json (--routing balanced): the plain loop and the paper's schedule of"
if [ $rc -ne 2 ] || [ "$(wc -l <"$tmp/r.err")" -ne 1 ] || ! grep -qF -- "$want" "$tmp/r.err"; then
	fail "report of the plain loop with the paper at another routing: exit $rc, '$(cat "$tmp/r.err")'"
else
	echo "ok: report refused: $(cat "$tmp/r.err")"
fi
pair ""
grep -qF -- "--batch 4 --routing $tmp/m1.json\`" "$tmp/r.err" ||
	fail "the plain loop's hint without its --routing: '$(cat "$tmp/r.err")'"

# the shipped mixtral-8x7b: the paper's exact step at fp32
"$zerosim" theory --model mixtral-8x7b --precision fp32 --world 8 --seq 4096 --schemes zero3 --out "$tmp/x.json" ||
	fail "theory --model mixtral-8x7b --precision fp32 refused"
exit $status

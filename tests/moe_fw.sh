#!/bin/sh
# moe_fw — the tiny mixtral of tests/moe_step.sh (d 64, F 96, 2 blocks,
# 8 heads, 4 experts, top 2; B 4, T 16) beyond fp32 without recompute,
# under the paper's schedule (docs/schedule.md, "Mixtures of experts"):
# --precision mixed (the routing weights and the experts' tensors 16-bit,
# the probabilities fp32), --recompute selective (the attention's scores
# rebuilt, the router's and experts' tensors kept) and full (a block keeps
# its output and its counts; the router runs again in backward and the
# experts' tensors are made again by its choice).
#
#  - theory --routing FILE = measure to the byte (resident, peak, every
#    category, comm, each rank's peak; tests/json_agree) over a covering
#    set: mixed without recompute at N = 1, 2, 3, fp32 and mixed with
#    selective at N = 1, 2 and 1, 3, with full at N = 1, 3 and 1, 2; and
#    at N = 4, 8 mixed with selective, and DeepSpeed's fp32 with full; the
#    four schemes, both units; --routing balanced departs from each;
#  - selective's peak (dp, N = 1) is the one without recompute less every
#    block's scores, L·B·H·T² fp32 = 2·4·8·16²·4 = 65,536 B, in fp32 and
#    in mixed (the peak is where every block's are kept without it);
#  - recomputation changes no bit: each sweep's weights digests are the
#    ones without it, per precision and N;
#  - mixed trains: over 30 steps the loss falls from about ln 64 to under
#    a half, one weights digest per N (1, 2) across the four schemes; its
#    first loss within 1e-3 of fp32's (the same seed: weights and batch);
#  - mixed's N = 2 ranks peak apart, in every scheme, by their largest experts' backward
#    scratch, still fp32: (2d + 3F)·4 = 1,664 bytes a token;
#  - one step's routed tensors counted by hand, apart from src/util/step.c
#    (which sizes both the engine's and the theory's): in each block's
#    forward, --timeline shows (fp32, mixed) the probabilities B·T·E·4,
#    the choice B·T·k·8 (int64), the routing weights B·T·k·(4, 2), the
#    counts E·8, the starts (E+1)·8, the token and slot indices B·T·k·8,
#    then (after the block's output, B·T·d·(4, 2)) each expert's xe, gu,
#    act, ye: c·d, c·2F, c·F, c·d elements of (4, 2) bytes, c the tokens
#    measure says it routed there, in the engine's order; and mixed's
#    act32 (fp32) is a block's input and 16-bit tensors widened,
#    B·T·(d + d + (H + 2·Hkv)·hd + H·hd + d + d + d) + B·T·k·(1 + 2d + 3F);
#  - (--framework deepspeed at N = 1, 2, 3 is tests/ds_moe.sh's; the full
#    product, every N, precision, framework and recompute mode, is make
#    check-families-full's, tests/families_full.sh.)
#
# About 6 s. Exit 0 pass, 1 fail, 77 skip (no python3), 99 error.
name=moe_fw
needs=${ZS_BUILDDIR:-.}/tests/json_agree
. "${srcdir:-.}/tests/moe_lib.sh"

base="--model $tmp/config.json --seq 16 --batch 4 --schemes dp,zero1,zero2,zero3 --unit model,layer --steps 3"
for set in "mixed none 1,2,3" "fp32 selective 1,2" "mixed selective 1,3" "fp32 full 1,3" "mixed full 1,2"; do
	# shellcheck disable=SC2086
	set -- $set
	# FILE agrees to the byte; balanced departs
	sweep_agree "$1-$2" "$base --precision $1 --recompute $2 --world $3"
done
# N = 4 and 8: the paper's schedule (mixed, selective) and DeepSpeed's
# (fp32, full), the four schemes, both units
sweep_agree mixed-selective-48 "$base --precision mixed --recompute selective --world 4,8"
sweep_agree ds-fp32-full-48 "$base --framework deepspeed --precision fp32 --recompute full --world 4,8"
# one step of each precision with its timeline, for the routed tensors counted by hand
for p in fp32 mixed; do
	OPENBLAS_NUM_THREADS=1 "$zerosim" measure -q --model "$tmp/config.json" --seq 16 --batch 4 --schemes dp \
		--world 1 --precision $p --steps 1 --timeline --out "$tmp/t-$p.json" ||
		{ echo "moe_fw: measure --timeline $p failed" >&2; exit 99; }
done
# fp32 without recompute, N = 1, 2, 3, for the hand checks (moe_theory.sh holds it)
# shellcheck disable=SC2086
OPENBLAS_NUM_THREADS=1 "$zerosim" measure -q $base --precision fp32 --world 1,2,3 --out "$tmp/m-fp32-none.json" || exit 99
OPENBLAS_NUM_THREADS=1 "$zerosim" measure -q --model "$tmp/config.json" --seq 16 --batch 4 --lr 1e-2 --seed 1 \
	--precision mixed --world 1,2 --steps 30 --out "$tmp/m-train.json" || { echo "moe_fw: measure 30 steps failed" >&2; exit 99; }

python3 - "$tmp" <<'PY' || status=1
import json, math, sys
tmp = sys.argv[1]
B, T, H, L, d, F = 4, 16, 8, 2, 64, 96
bad = []
def run(tag, scheme="dp", world=1, unit="model"):
    m = json.load(open("%s/m-%s.json" % (tmp, tag)))
    return [r for r in m["runs"] if r["scheme"] == scheme and r["world"] == world and r["unit"] == unit][0]
scores = L * B * H * T * T * 4
for p in ("fp32", "mixed"):
    none, sel = run(p + "-none")["peak_bytes"], run(p + "-selective")["peak_bytes"]
    if none - sel != scores:
        bad.append("%s: selective's peak %d, none's %d: not %d apart (every block's scores)" % (p, sel, none, scores))
    else:
        print("ok: %s: selective's peak %d = none's %d - %d" % (p, sel, none, scores))
want = {}
for p in ("fp32", "mixed"):
    for r in json.load(open("%s/m-%s-none.json" % (tmp, p)))["runs"]:
        want.setdefault((p, r["world"]), set()).add(r["weights_digest"])
for tag in ("fp32-selective", "mixed-selective", "fp32-full", "mixed-full"):
    p = tag.split("-")[0]
    for r in json.load(open("%s/m-%s.json" % (tmp, tag)))["runs"]:
        if {r["weights_digest"]} != want[(p, r["world"])]:
            bad.append("%s %s N=%d %s: weights %s, without recompute %s"
                       % (tag, r["scheme"], r["world"], r["unit"], r["weights_digest"], sorted(want[(p, r["world"])])))
print("ok: recomputation changes no weight (%s)" % ", ".join("%s N=%d %s" % (p, n, sorted(d)[0][5:13])
                                                           for (p, n), d in sorted(want.items())))
m = json.load(open(tmp + "/m-train.json"))
digests = {}
for r in m["runs"]:
    tag = "%s N=%d %s" % (r["scheme"], r["world"], r["unit"])
    digests.setdefault(r["world"], set()).add(r["weights_digest"])
    l = r["losses"]
    if not (abs(l[0] - math.log(64)) < 0.5 and l[-1] < 0.5 * l[0]):
        bad.append("%s: mixed loss %g -> %g over %d steps" % (tag, l[0], l[-1], len(l)))
for n, s in sorted(digests.items()):
    if len(s) != 1:
        bad.append("mixed N=%d: %d weights digests across the schemes: %s" % (n, len(s), sorted(s)))
first32, first16 = run("fp32-none")["losses"][0], run("mixed-none")["losses"][0]
if abs(first16 - first32) > 1e-3 * first32:
    bad.append("mixed's first loss %r, fp32's %r" % (first16, first32))
# every scheme's two ranks: apart by their largest experts' fp32 scratch
apart = []
for r in (r for r in m["runs"] if r["world"] == 2):
    most = [max(max(c) for blocks in s for c in blocks) for s in r["routing"]["tokens_per_expert"]]
    peaks = r["per_rank"]["peak_bytes"]
    want = (most[1] - most[0]) * (2 * d + 3 * F) * 4
    apart.append("%s %d" % (r["scheme"], peaks[1] - peaks[0]))
    if most[0] == most[1]:
        bad.append("mixed %s N=2: both ranks' largest expert got %d tokens; nothing to see" % (r["scheme"], most[0]))
    elif peaks[1] - peaks[0] != want:
        bad.append("mixed %s N=2: peaks %s, largest experts %s: %d bytes apart, not %d"
                   % (r["scheme"], peaks, most, peaks[1] - peaks[0], want))
r1 = [r for r in m["runs"] if r["world"] == 1][0]
print("ok: mixed: loss %.4f -> %.4f over 30 steps, first %.6f (fp32 %.6f), one digest per N; N=2 ranks' peaks apart: %s"
      % (r1["losses"][0], r1["losses"][-1], first16, first32, ", ".join(apart)))
# the routed tensors by hand: (dtype bytes, elements) from the shape and
# the step's counts; a wrong dtype in step.c changes a size in the timeline
E, k, Hkv, hd = 4, 2, 4, 8
for p, e16 in (("fp32", 4), ("mixed", 2)):
    r = json.load(open("%s/t-%s.json" % (tmp, p)))["runs"][0]
    counts = r["routing"]["tokens_per_expert"][0][-1]
    fwd = [e["bytes"] for e in r["timeline"] if e["phase"] == "forward" and e["op"] == "alloc"]
    at, blocks = 0, []
    for c in counts:
        want = [B * T * E * 4, B * T * k * 8, B * T * k * e16, E * 8, (E + 1) * 8, B * T * k * 8, B * T * k * 8]
        want.append(B * T * d * e16)  # the block's output, made before the experts run into it
        for n in c:
            want += [n * d * e16, n * 2 * F * e16, n * F * e16, n * d * e16]
        where = next((i for i in range(at, len(fwd)) if fwd[i:i + len(want)] == want), -1)
        if where < 0:
            bad.append("%s: no run of forward allocations %s (counts %s) after the %dth" % (p, want, c, at))
            break
        at = where + len(want)
        blocks.append(sum(want) - B * T * d * e16)
    else:
        print("ok: %s: each block's routed tensors as counted by hand, in order: %s bytes" % (p, blocks))
    act32 = B * T * (d + d + (H + 2 * Hkv) * hd + H * hd + 3 * d) * 4 + B * T * k * (1 + 2 * d + 3 * F) * 4
    scratch = [e["bytes"] for e in r["timeline"] if e["op"] == "alloc" and e["category"] == "scratch"]
    if (act32 in scratch) != (p == "mixed"):
        bad.append("%s: act32 by hand %d B; the scratch allocated %s" % (p, act32, scratch))
    elif p == "mixed":
        print("ok: mixed: act32 %d B as counted by hand" % act32)
for b in bad:
    print("moe_fw: FAIL: " + b)
sys.exit(1 if bad else 0)
PY

exit $status

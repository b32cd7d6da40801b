#!/bin/sh
# moe_step — the tiny mixtral (d 64, 2 blocks, 4 experts, top 2) trained
# by the engine's step (zerosim measure --framework paper, fp32: its
# experts' tensors sized by each step's routing, tfm_net.c's moe block),
# held to the model tests/moe_model_torch.sh holds to PyTorch:
#
#  - N = 1: each step's loss is the one tests/moe_model_dump gives (the
#    same weights, batches and Adam; moe_model is PyTorch's
#    MixtralForCausalLM op for op), bit for bit, and each block's tokens per
#    expert in measured.json are the counts of the experts moe_model_dump
#    chose (its choice.i32);
#  - the loss falls over 100 steps (from about ln 64 to under a half);
#  - one weights digest per N (1, 2) across the paper's four schemes;
#  - every rank, step and block routes B·T·k assignments, none of its
#    experts more than B·T;
#  - the peak follows the routing: at N = 2 (the ranks see other batches)
#    the two ranks' peaks differ by the experts' backward scratch of their
#    largest expert, (2d + 3F) fp32 a row (docs/schedule.md), their most
#    tokens to one expert in any step and block apart; the experts' saved
#    tensors sum to B·T·k rows on both.
#
# ZS_MOE_CONFIG names another mixture's config to train so (tests/qwen_moe.sh
# gives a tiny qwen2_moe). About 2 s on one core. Exit 0 pass, 1 fail, 77 skip (no python3), 99 error.
name=moe_step
needs=${ZS_BUILDDIR:-.}/tests/moe_model_dump
. "${srcdir:-.}/tests/moe_lib.sh"
dump=$needs
B=4 T=16 STEPS=100
OPENBLAS_NUM_THREADS=1 "$zerosim" measure -q --model "$tmp/config.json" --seq $T --batch $B --lr 1e-2 --seed 1 \
	--framework paper --world 1,2 --steps $STEPS --out "$tmp/measured.json" || { echo "moe_step: measure failed" >&2; exit 1; }
mkdir "$tmp/ref"
OPENBLAS_NUM_THREADS=1 "$dump" "$tmp/config.json" $B $T $STEPS 1e-2 1 "$tmp/ref" ||
	{ echo "moe_step: moe_model_dump failed" >&2; exit 99; }

python3 - "$tmp/measured.json" "$tmp/ref" $B $T $STEPS "$tmp/config.json" <<'PY'
import json, math, struct, sys
m = json.load(open(sys.argv[1]))
ref = sys.argv[2]
B, T, steps = (int(a) for a in sys.argv[3:6])
cfg = json.load(open(sys.argv[6]))
qwen = cfg["model_type"] in ("qwen2_moe", "qwen3_moe")  # their experts' keys
E, K, L = cfg["num_experts" if qwen else "num_local_experts"], cfg["num_experts_per_tok"], cfg["num_hidden_layers"]
BT = B * T
bad = []
want = json.load(open(ref + "/run.json"))["losses"]
raw = open(ref + "/choice.i32", "rb").read()
choice = struct.unpack("<%di" % (len(raw) // 4), raw)
assert len(choice) == steps * L * BT * K, len(choice)
digests = {}
for r in m["runs"]:
    tag = "%s N=%d" % (r["scheme"], r["world"])
    rt = r.get("routing")
    if rt is None or rt["blocks"] != L or rt["experts"] != E:
        bad.append("%s: no routing of %d blocks of %d experts" % (tag, L, E))
        continue
    tok = rt["tokens_per_expert"]
    if len(tok) != r["world"] or any(len(s) != steps for s in tok):
        bad.append("%s: routing is not ranks x steps" % tag)
        continue
    for k, per_step in enumerate(tok):
        for t, blocks in enumerate(per_step):
            for l, c in enumerate(blocks):
                if len(c) != E or sum(c) != BT * K or max(c) > BT:
                    bad.append("%s rank %d step %d block %d: counts %s (B*T*k %d, at most %d each)"
                               % (tag, k, t, l, c, BT * K, BT))
    digests.setdefault(r["world"], set()).add(r["weights_digest"])
    losses = r["losses"]
    if not (abs(losses[0] - math.log(64)) < 0.5 and losses[-1] < 0.5 * losses[0]):
        bad.append("%s: loss %g -> %g over %d steps" % (tag, losses[0], losses[-1], steps))
    if r["world"] == 1:
        diff = [t for t in range(steps) if struct.pack("<f", losses[t]) != struct.pack("<f", want[t])]
        if diff:
            t = diff[0]
            bad.append("%s: %d losses differ from moe_model's, first at step %d: %r vs %r"
                       % (tag, len(diff), t + 1, losses[t], want[t]))
        for t in range(steps):
            for l in range(L):
                at = (t * L + l) * BT * K
                c = [0] * E
                for e in choice[at:at + BT * K]:
                    c[e] += 1
                if tok[0][t][l] != c:
                    bad.append("%s step %d block %d: tokens per expert %s, moe_model chose %s"
                               % (tag, t + 1, l, tok[0][t][l], c))
for n, d in sorted(digests.items()):
    if len(d) != 1:
        bad.append("N=%d: %d weights digests across the schemes: %s" % (n, len(d), sorted(d)))
# the routing moves the bytes: N = 2's ranks peak apart by their largest
# experts' backward scratch (dye, dxe: d each; dact F; dgu 2F; fp32)
d, F = cfg["hidden_size"], cfg["moe_intermediate_size" if qwen else "intermediate_size"]
dp2 = [r for r in m["runs"] if r["scheme"] == "dp" and r["world"] == 2][0]
most = [max(max(c) for blocks in s for c in blocks) for s in dp2["routing"]["tokens_per_expert"]]
peaks = dp2["per_rank"]["peak_bytes"]
if most[0] == most[1]:
    bad.append("dp N=2: both ranks' largest expert got %d tokens; the test cannot see the routing" % most[0])
elif peaks[1] - peaks[0] != (most[1] - most[0]) * (2 * d + 3 * F) * 4:
    bad.append("dp N=2: peaks %s, largest experts %s tokens: not (2d + 3F)·4 bytes a token apart" % (peaks, most))
r1 = [r for r in m["runs"] if r["scheme"] == "dp" and r["world"] == 1][0]
print("moe_step: %s N=1 loss %.4f -> %.4f, peak %d bytes, block 0's last tokens per expert %s"
      % (cfg["model_type"], r1["losses"][0], r1["losses"][-1], r1["peak_bytes"], r1["routing"]["tokens_per_expert"][0][-1][0]))
for b in bad[:20]:
    print("moe_step: FAIL: " + b)
sys.exit(1 if bad else 0)
PY

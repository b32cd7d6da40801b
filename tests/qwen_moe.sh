#!/bin/sh
# qwen_moe — a tiny Qwen2-MoE (model_type qwen2_moe: d 64, 2 blocks, 4
# experts 48 wide, top 2 unnormalised as Qwen1.5-MoE-A2.7B's norm_topk_prob
# false, the shared expert 80 wide and its gate; B 4, T 16) trained by the
# engine's step (zerosim measure --framework paper) and predicted by the
# theory:
#
#  - fp32, N = 1, 2: the loss falls over 100 steps (from about ln 64 to
#    under a half); N = 1's losses are tests/moe_model_dump's bit for bit
#    (the model tests/moe_model_torch.sh holds to PyTorch's
#    Qwen2MoeForCausalLM), its tokens per expert the counts of the experts
#    moe_model_dump chose; one weights digest per N across the paper's
#    four schemes;
#  - the theory with --routing FILE equal to the measurement to the byte
#    (resident, peak, every category, comm, each rank's peak;
#    tests/json_agree) at fp32 and mixed, N = 1, 2, 3, the four schemes,
#    both units, recompute none and full (3 steps each); --routing
#    balanced departs from it;
#  - the shared expert's tensors in the engine's own allocations (one
#    --timeline step, fp32, N = 1), sized by hand from the config: in each
#    block's forward its four saved ones in a row, sgu B·T·2S, sact B·T·S,
#    sye B·T·d and the gate's sigmoid B·T, 40,960, 20,480, 16,384 and 256
#    bytes (B·T 64, S 80, d 64); in backward its scratch, dsye and dsxe
#    B·T·d, dsact B·T·S, dsgu B·T·2S: 16,384, 16,384, 20,480, 40,960.
#
# About 5 s on one core. Exit 0 pass, 1 fail, 77 skip (no python3), 99 error.
set -u
name=qwen_moe
top=${ZS_BUILDDIR:-.}
zerosim=$top/zerosim
dump=$top/tests/moe_model_dump
agree=$top/tests/json_agree
for b in "$zerosim" "$dump" "$agree"; do
	[ -x "$b" ] || { echo "$name: $b is not built" >&2; exit 99; }
done
command -v python3 >/dev/null 2>&1 || { echo "SKIP: $name: no python3"; exit 77; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/zs-$name.XXXXXX") || exit 99
trap 'rm -rf "$tmp"' EXIT HUP INT TERM
cat >"$tmp/config.json" <<'JSON'
{"model_type": "qwen2_moe", "hidden_size": 64, "intermediate_size": 160, "num_hidden_layers": 2,
 "num_attention_heads": 8, "num_key_value_heads": 4, "vocab_size": 64, "max_position_embeddings": 32,
 "num_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 48, "shared_expert_intermediate_size": 80,
 "norm_topk_prob": false, "rms_norm_eps": 1e-06, "rope_theta": 1000000.0}
JSON
status=0
fail() { echo "$name: FAIL: $*" >&2; status=1; }

B=4 T=16 STEPS=100
OPENBLAS_NUM_THREADS=1 "$zerosim" measure -q --model "$tmp/config.json" --seq $T --batch $B --lr 1e-2 --seed 1 \
	--framework paper --world 1,2 --steps $STEPS --out "$tmp/trained.json" || { echo "$name: measure failed" >&2; exit 1; }
mkdir "$tmp/ref"
OPENBLAS_NUM_THREADS=1 "$dump" "$tmp/config.json" $B $T $STEPS 1e-2 1 "$tmp/ref" ||
	{ echo "$name: moe_model_dump failed" >&2; exit 99; }
python3 - "$tmp/trained.json" "$tmp/ref" $B $T $STEPS <<'PY' || status=1
import json, math, struct, sys
m = json.load(open(sys.argv[1]))
ref = sys.argv[2]
B, T, steps = (int(a) for a in sys.argv[3:6])
BT, E, K, L = B * T, 4, 2, 2
bad = []
want = json.load(open(ref + "/run.json"))["losses"]
raw = open(ref + "/choice.i32", "rb").read()
choice = struct.unpack("<%di" % (len(raw) // 4), raw)
if len(choice) != steps * L * BT * K:
    bad.append("moe_model_dump chose %d experts, not %d" % (len(choice), steps * L * BT * K))
digests = {}
runs = m["runs"]
if len(runs) != 8:
    bad.append("%d runs, not the 4 schemes x N = 1, 2" % len(runs))
for r in runs:
    tag = "%s N=%d" % (r["scheme"], r["world"])
    digests.setdefault(r["world"], set()).add(r["weights_digest"])
    losses = r["losses"]
    if not (abs(losses[0] - math.log(64)) < 0.5 and losses[-1] < 0.5 * losses[0]):
        bad.append("%s: loss %g -> %g over %d steps" % (tag, losses[0], losses[-1], steps))
    tok = r["routing"]["tokens_per_expert"]
    for k, per_step in enumerate(tok):
        for t, blocks in enumerate(per_step):
            for l, c in enumerate(blocks):
                if len(c) != E or sum(c) != BT * K or max(c) > BT:
                    bad.append("%s rank %d step %d block %d: counts %s" % (tag, k, t, l, c))
    if r["world"] == 1 and not bad:
        diff = [t for t in range(steps) if struct.pack("<f", losses[t]) != struct.pack("<f", want[t])]
        if diff:
            bad.append("%s: %d losses differ from moe_model's, first at step %d" % (tag, len(diff), diff[0] + 1))
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
r1 = [r for r in runs if r["scheme"] == "dp" and r["world"] == 1][0]
print("ok: qwen2_moe trained: N=1 loss %.4f -> %.4f (moe_model's bit for bit), one digest per N %s"
      % (r1["losses"][0], r1["losses"][-1], {n: sorted(d)[0] for n, d in sorted(digests.items())}))
for b in bad[:20]:
    print("qwen_moe: FAIL: " + b)
sys.exit(1 if bad else 0)
PY

for prec in fp32 mixed; do
	for rc in none full; do
		sweep="--model $tmp/config.json --seq 16 --batch 4 --precision $prec --recompute $rc --world 1,2,3
		       --schemes dp,zero1,zero2,zero3 --unit model,layer --steps 3 --framework paper"
		# shellcheck disable=SC2086
		OPENBLAS_NUM_THREADS=1 "$zerosim" measure -q $sweep --out "$tmp/m.json" || { echo "$name: measure failed" >&2; exit 99; }
		for r in file balanced; do
			arg=$r
			[ "$r" = file ] && arg=$tmp/m.json
			# shellcheck disable=SC2086
			"$zerosim" theory $sweep --routing "$arg" --out "$tmp/$r.json" || { echo "$name: theory failed" >&2; exit 99; }
		done
		if "$agree" "$tmp/m.json" "$tmp/file.json" >"$tmp/out" 2>&1; then
			echo "ok: $prec, recompute $rc: --routing FILE = measure: $(cat "$tmp/out")"
		else
			fail "$prec, recompute $rc: --routing FILE against measure: $(cat "$tmp/out")"
		fi
		if "$agree" "$tmp/m.json" "$tmp/balanced.json" >"$tmp/out" 2>&1; then
			fail "$prec, recompute $rc: --routing balanced agrees with the measurement: the routing shows nothing"
		fi
	done
done
OPENBLAS_NUM_THREADS=1 "$zerosim" measure -q --model "$tmp/config.json" --seq 16 --batch 4 --precision fp32 --world 1 \
	--schemes dp --unit model --steps 1 --timeline --out "$tmp/tl.json" || exit 99
python3 - "$tmp/tl.json" <<'PY' || status=1
import json, sys
ev = json.load(open(sys.argv[1]))["runs"][0]["timeline"]
def allocs(phase, cat):
    return [e["bytes"] for e in ev if e["op"] == "alloc" and e["phase"] == phase and e["category"] == cat]
def rows(sizes, want):
    return [i for i in range(len(sizes) - len(want) + 1) if sizes[i:i + len(want)] == want]
bad = []
saved, scratch = [40960, 20480, 16384, 256], [16384, 16384, 20480, 40960]
n = len(rows(allocs("forward", "activations"), saved))
if n != 2:
    bad.append("%d runs of the shared expert's saved tensors %s in the forward, not one a block (2)" % (n, saved))
if not rows(allocs("backward", "scratch"), scratch):
    bad.append("no shared expert's scratch %s in the backward" % scratch)
print("ok: the shared expert's tensors in the engine's timeline" if not bad else "qwen_moe: FAIL: " + "; ".join(bad))
sys.exit(1 if bad else 0)
PY
exit $status

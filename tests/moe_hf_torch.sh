#!/bin/sh
# moe_hf_torch — the outside side of issue #25's mixture under the PyTorch
# step (--framework torch): tests/hf_torch.py trains the tiny mixtral of
# tests/moe_lib.sh (d 64, F 96, 2 blocks, 8 heads, 4 experts, top 2) op for
# op from modeling_mixtral.py at 00d4b3d2 (MixtralDecoderLayer, and
# tests/moe_torch.py's MixtralSparseMoeBlock) under PyTorch 1.13's
# profiler (fp32, the plain loop, Adam, zero_grad zeros, eager attention),
# and records the run's own routing, each step's tokens per expert a block.
# zerosim's PyTorch step does not describe the block yet (util/autograd.c
# has no mixture functions), so this holds what is built:
#
#  - the reference's routing is a routing: every block of every step routes
#    B·T·k assignments over E experts, and zerosim's theory takes it as a
#    measured run's (--routing FILE, the paper's scope, which parses and
#    checks it: blocks, experts, steps, the B·T·k sum);
#  - the routing is what PyTorch's allocator saw: in the traced step each
#    block's hit experts, in order, allocate their w1 products of
#    n_e · F fp32 bytes (n_e the recorded count) and their gathered inputs
#    hidden_states[None, top_x] of n_e · d, and torch.where's nonzero of
#    n_e · 2 int64 — a record that disagrees with the allocator fails;
#  - zerosim refuses the mixture under --framework torch, measure and
#    theory, with ZS_MOE_SCOPE's sentence (not a silent wrong answer).
#
# About 4 s. Exit 0 pass, 1 fail, 77 skip (no PyTorch; ZS_REQUIRE_TORCH=1
# makes that a failure), 99 hard error.
name=moe_hf_torch
needs=""
src=${srcdir:-.}
. "$src/tests/moe_lib.sh"
. "$src/tests/torch_python.sh"
export PYTHONDONTWRITEBYTECODE=1
B=2 T=16 S=3
"$py" "$src/tests/hf_torch.py" --model "$tmp/config.json" --seq $T --batch $B --steps $S --zero-grad zeros \
	--no-attribution --trace "$tmp/trace" --out "$tmp/ref.json" >"$tmp/ref.log" 2>&1 ||
	{ cat "$tmp/ref.log" >&2; echo "$name: hf_torch.py failed" >&2; exit 99; }

# the routing as a measured run's (docs/formats.md's "routing"), one rank
python3 - "$tmp/ref.json" "$tmp/config.json" "$tmp/trace" "$tmp/routing.json" $B $T $S <<'PY' || status=1
import json, sys
ref, cfg = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
trace, out = sys.argv[3], sys.argv[4]
B, T, S = (int(x) for x in sys.argv[5:8])
E, K, L = cfg["num_local_experts"], cfg["num_experts_per_tok"], cfg["num_hidden_layers"]
d, F = cfg["hidden_size"], cfg["intermediate_size"]
rt, bad = ref.get("routing"), []
if not rt or rt["blocks"] != L or rt["experts"] != E or len(rt["steps"]) != S or rt["traced"] is None:
    sys.exit("moe_hf_torch: FAIL: the reference recorded no routing of %d steps x %d blocks x %d experts" % (S, L, E))
for s, step in enumerate(rt["steps"] + [rt["traced"]]):
    for l, c in enumerate(step):
        if len(c) != E or sum(c) != B * T * K:
            bad.append("forward %d block %d routes %s, not %d assignments over %d experts" % (s, l, c, B * T * K, E))
# the traced step's allocations inside each block's forward: per hit
# expert, nonzero [n, 2] int64, index [1, n, d], then its w1's mm [n, F]
seen, blk = [[] for _ in range(L)], None
for line in open(trace):
    w = line.split()
    if w[0] == "mark" and w[1].startswith("fwd:layers.") and w[1].endswith(".block_sparse_moe:start"):
        blk = int(w[1].split(".")[1])
    elif w[0] == "mark" and w[1].endswith(".block_sparse_moe:end"):
        blk = None
    elif blk is not None and w[0] == "alloc" and w[2] in ("nonzero.default", "index.Tensor", "mm.default"):
        seen[blk].append((w[2], w[4], int(w[1])))
for l in range(L):
    mod = "layers.%d.block_sparse_moe" % l
    hit = sum(1 for n in rt["traced"][l] if n)
    want = [("mm.default", mod + ".gate", B * T * E * 4),
            ("nonzero.default", mod, hit * 8)]  # expert_hit: [hit, 1] int64
    for e, n in enumerate(rt["traced"][l]):
        if n == 0:
            continue
        want += [("index.Tensor", mod, K * B * T * 8),  # expert_mask[expert_idx]: [1, k, BT] int64
                 ("nonzero.default", mod, n * 2 * 8),
                 ("index.Tensor", mod, n * d * 4),
                 ("mm.default", "%s.experts.%d.w1" % (mod, e), n * F * 4),
                 ("mm.default", "%s.experts.%d.w3" % (mod, e), n * F * 4),
                 ("mm.default", "%s.experts.%d.w2" % (mod, e), n * d * 4),
                 ("index.Tensor", mod, n * 4)]  # routing_weights[top_x, idx, None]
    if seen[l] != want:
        bad.append("block %d: the allocator's expert allocations %s, the recorded routing %s gives %s" %
                   (l, seen[l], rt["traced"][l], want))
meta = dict(seq=T, batch=B)
json.dump({"format": "zerosim-measured/1", "config": meta,
           "runs": [{"scheme": "dp", "unit": "model", "world": 1,
                     "routing": {"blocks": L, "experts": E, "tokens_per_expert": [rt["steps"]]}}]}, open(out, "w"))
for b in bad:
    print("moe_hf_torch: FAIL: " + b, file=sys.stderr)
sys.exit(1 if bad else 0)
PY
[ -s "$tmp/routing.json" ] || exit $status

# zerosim's theory takes the reference's routing as a measured run's
common="--model $tmp/config.json --seq $T --batch $B --steps $S --world 1 --schemes dp"
# shellcheck disable=SC2086
"$zerosim" theory $common --framework paper --routing "$tmp/routing.json" --out "$tmp/t.json" 2>"$tmp/err" ||
	fail "theory --routing the reference's routing: $(cat "$tmp/err")"

# and refuses the PyTorch step's mixture by name, measure and theory
for cmd in theory measure; do
	# shellcheck disable=SC2086
	"$zerosim" $cmd $common --framework torch --wrapper none --out "$tmp/x.json" 2>"$tmp/err"
	rc=$?
	if [ $rc -ne 2 ] || ! grep -q "^zerosim $cmd: .*a mixture of experts .*; not with --framework torch (give --framework paper or deepspeed)" "$tmp/err" ||
		[ "$(wc -l <"$tmp/err")" -ne 1 ] || [ -e "$tmp/x.json" ]; then
		fail "$cmd --framework torch on a mixture: exit $rc, '$(cat "$tmp/err")' (want 2 and ZS_MOE_SCOPE's sentence)"
	fi
done
[ $status -eq 0 ] && echo "moe_hf_torch: the reference's routing (B·T·k = $((B * T * 2)) a block) agrees with its allocator and zerosim's parser; --framework torch refused"
exit $status

#!/bin/sh
# qwen3_moe — a tiny Qwen3-MoE (model_type qwen3_moe: d 64, 2 blocks, 8
# heads and 4 key-value heads of head_dim 16, apart from d / heads as
# Qwen3-30B-A3B's 128 is from 2048 / 32, q_norm and k_norm, no biases; 4
# experts 48 wide, top 2 renormalised as Qwen3-30B-A3B's norm_topk_prob
# true, no shared expert; B 4, T 16) trained by the engine's step (zerosim
# measure --framework paper) and predicted by the theory:
#
#  - tests/moe_step.sh's checks on it (fp32, N = 1, 2, 100 steps): the loss
#    falls; N = 1's losses are tests/moe_model_dump's bit for bit (the
#    model tests/moe_model_torch.sh holds to PyTorch's Qwen3MoeForCausalLM),
#    its tokens per expert the counts of the experts moe_model_dump chose;
#    one weights digest per N across the paper's four schemes; N = 2's
#    ranks' peaks apart by their largest experts' scratch;
#  - tests/ds_moe.sh's on it: DeepSpeed's dp, zero1, zero2 and zero3, theory
#    --routing FILE = measure to the byte, the bucket, the starved-expert
#    refusals;
#  - the theory with --routing FILE equal to the measurement to the byte
#    (tests/json_agree: resident, peak, every category, comm, each rank's
#    peak) at fp32 and mixed, N = 1, 2, 3, the four schemes, both units,
#    recompute none and full, and mixed selective (3 steps each);
#    --routing balanced departs from it;
#  - the block's tensors in the engine's own allocations (one --timeline
#    step, fp32, N = 1), sized by hand from the config: in each block's
#    forward qkv B·T·(H + 2·KV)·hd, the head norms' input B·T·(H + KV)·hd
#    and 1/rms B·T·(H + KV), then the scores B·H·T·T: 65,536, 49,152,
#    3,072 and 32,768 bytes (B·T 64, H 8, KV 4, hd 16, T 16), twice; and
#    after the router's seven (probs B·T·E 1,024, the experts' indices
#    1,024, weights 512, counts 32, start 40, tok and slot 1,024) and the
#    block's output res3 (B·T·d, 16,384) the experts' four as the route
#    sized them, B·T·k·(2d + 3F)·4 = 139,264 bytes in all, then the next
#    layer's first (B·T·d, 16,384): no shared expert;
#  - what is refused, by name: output_router_logits true outside the
#    PyTorch step (measure --framework paper and theory: the auxiliary
#    loss is built in util/autograd.c's step alone, tests/moe_hf_torch.sh),
#    a dense block among the
#    sparse ones (decoder_sparse_step 2, mlp_only_layers [1]), a --routing
#    file of another norm_topk_prob;
#  - the shipped qwen3-30b-a3b: theory counts its 30,532,122,624
#    parameters (tests/test_moe.c works them by hand).
#
# About 10 s on one core. Exit 0 pass, 1 fail, 77 skip (no python3), 99 error.
name=qwen3_moe
needs="${ZS_BUILDDIR:-.}/tests/moe_model_dump ${ZS_BUILDDIR:-.}/tests/json_agree"
. "${srcdir:-.}/tests/moe_lib.sh"
. "${srcdir:-.}/tests/moe_configs.sh"
moe_configs "$tmp" && cp "$tmp/qwen3_moe.json" "$tmp/config.json"

ZS_MOE_CONFIG=$tmp/config.json sh "${srcdir:-.}/tests/moe_step.sh" || fail "tests/moe_step.sh on the tiny qwen3_moe"
ZS_MOE_CONFIG=$tmp/config.json sh "${srcdir:-.}/tests/ds_moe.sh" || fail "tests/ds_moe.sh on the tiny qwen3_moe"

# theory --routing FILE = measure to the byte, balanced departing (moe_lib.sh)
for run in fp32-none fp32-full mixed-none mixed-full mixed-selective; do
	sweep_agree "$run" "--model $tmp/config.json --seq 16 --batch 4 --precision ${run%-*} --recompute ${run#*-}
	       --world 1,2,3 --schemes dp,zero1,zero2,zero3 --unit model,layer --steps 3 --framework paper"
done

# refused, naming the key: measure and theory (measure's --framework paper)
refused() { # WHAT SED-EXPRESSION TEXT COMMAND...
	what=$1 expr=$2 text=$3
	shift 3
	sed "$expr" "$tmp/config.json" >"$tmp/other.json"
	"$zerosim" "$@" --model "$tmp/other.json" --seq 16 --batch 4 --out "$tmp/x.json" 2>"$tmp/err"
	st=$?
	if [ $st = 2 ] && [ "$(wc -l <"$tmp/err")" = 1 ] && grep -qF "$text" "$tmp/err" && [ ! -e "$tmp/x.json" ]; then
		echo "ok: $1 $what refused: $(cat "$tmp/err")"
	else
		fail "$1 $what: exit $st, $(cat "$tmp/err")"
	fi
}
aux='s/"norm_topk_prob": true/"norm_topk_prob": true, "output_router_logits": true/'
refused "output_router_logits" "$aux" "\"output_router_logits\" is true: the router's auxiliary load-balancing loss" \
	measure --framework paper
refused "output_router_logits" "$aux" "\"output_router_logits\" is true: the router's auxiliary load-balancing loss" \
	theory
refused "decoder_sparse_step 2" 's/"decoder_sparse_step": 1/"decoder_sparse_step": 2/' \
	'"decoder_sparse_step": dense blocks among the sparse ones are not modelled' theory
refused "mlp_only_layers [1]" 's/"mlp_only_layers": \[\]/"mlp_only_layers": [1]/' \
	'"mlp_only_layers": dense blocks among the sparse ones are not modelled' measure --framework paper
# a measured routing of another renormalisation: refused, naming the key (moe_lib.sh)
routing_refused 's/"norm_topk_prob": true/"norm_topk_prob": false/' "norm_topk_prob is true"

OPENBLAS_NUM_THREADS=1 "$zerosim" measure -q --model "$tmp/config.json" --seq 16 --batch 4 --precision fp32 --world 1 \
	--schemes dp --unit model --steps 1 --timeline --out "$tmp/tl.json" || exit 99
python3 - "$tmp/tl.json" <<'PY' || status=1
import json, sys
ev = json.load(open(sys.argv[1]))["runs"][0]["timeline"]
fwd = [e["bytes"] for e in ev if e["op"] == "alloc" and e["phase"] == "forward" and e["category"] == "activations"]
def rows(want):
    return [i for i in range(len(fwd) - len(want) + 1) if fwd[i:i + len(want)] == want]
bad = []
heads = [65536, 49152, 3072, 32768]  # qkv, the head norms' input and 1/rms, the scores
if len(rows(heads)) != 2:
    bad.append("%d runs of qkv and the head norms' tensors %s in the forward, not one a block (2)"
               % (len(rows(heads)), heads))
router = [1024, 1024, 512, 32, 40, 1024, 1024]  # probs, idx, weights, counts, start, tok, slot
at = rows(router)
if len(at) != 2:
    bad.append("%d runs of the router's tensors %s, not 2" % (len(at), router))
for i in at:
    n, s = i + len(router) + 1, 0  # past res3
    while s < 139264 and n < len(fwd):  # the experts' four each: B·T·k·(2d + 3F)·4 in all
        s, n = s + fwd[n], n + 1
    if fwd[i + len(router)] != 16384 or s != 139264 or n >= len(fwd) or fwd[n] != 16384:
        bad.append("after the router at %d: res3 %d, the experts' tensors sum to %d, then %s (want 16384, 139264, "
                   "16384)" % (i, fwd[i + len(router)], s, fwd[n] if n < len(fwd) else None))
print("ok: qwen3_moe's head norms and routed experts in the engine's timeline, no shared expert" if not bad
      else "qwen3_moe: FAIL: " + "; ".join(bad))
sys.exit(1 if bad else 0)
PY

# the shipped config's parameters (ZEROSIM_DATADIR: the source tree's data/ in a VPATH build)
ZEROSIM_DATADIR=${srcdir:-.} "$zerosim" theory --model qwen3-30b-a3b --world 8 --seq 4096 --out "$tmp/t.json" || exit 99
python3 - "$tmp/t.json" <<'PY' || status=1
import json, sys
p = json.load(open(sys.argv[1]))["params"]
print("ok: qwen3-30b-a3b: %d parameters" % p if p == 30532122624 else "qwen3_moe: FAIL: qwen3-30b-a3b has %d" % p)
sys.exit(0 if p == 30532122624 else 1)
PY
exit $status

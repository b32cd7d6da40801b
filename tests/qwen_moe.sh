#!/bin/sh
# qwen_moe — a tiny Qwen2-MoE (model_type qwen2_moe: d 64, 2 blocks, 4
# experts 48 wide, top 2 unnormalised as Qwen1.5-MoE-A2.7B's norm_topk_prob
# false, the shared expert 80 wide and its gate; B 4, T 16) trained by the
# engine's step (zerosim measure --framework paper) and predicted by the
# theory:
#
#  - tests/moe_step.sh's checks on it (fp32, N = 1, 2, 100 steps): the loss
#    falls (from about ln 64 to under a half); N = 1's losses are
#    tests/moe_model_dump's bit for bit (the model tests/moe_model_torch.sh
#    holds to PyTorch's Qwen2MoeForCausalLM), its tokens per expert the
#    counts of the experts moe_model_dump chose; one weights digest per N
#    across the paper's four schemes; N = 2's ranks' peaks apart by their
#    largest experts' scratch, (2d + 3F)·4 bytes a token (the shared
#    expert's scratch is fixed);
#  - the theory with --routing FILE equal to the measurement to the byte
#    (resident, peak, every category, comm, each rank's peak;
#    tests/json_agree) at fp32 and mixed, N = 1, 2, 3, the four schemes,
#    both units, recompute none and full (3 steps each), and at N = 4, 8
#    fp32 with full and DeepSpeed's mixed without recompute; --routing
#    balanced departs from it;
#  - the shared expert's tensors in the engine's own allocations (one
#    --timeline step, fp32, N = 1), sized by hand from the config: in each
#    block's forward its four saved ones in a row, sgu B·T·2S, sact B·T·S,
#    sye B·T·d and the gate's sigmoid B·T, 40,960, 20,480, 16,384 and 256
#    bytes (B·T 64, S 80, d 64); in backward its scratch, dsye and dsxe
#    B·T·d, dsact B·T·S, dsgu B·T·2S: 16,384, 16,384, 20,480, 40,960.
#
# About 5 s on one core. Exit 0 pass, 1 fail, 77 skip (no python3), 99 error.
name=qwen_moe
needs="${ZS_BUILDDIR:-.}/tests/moe_model_dump ${ZS_BUILDDIR:-.}/tests/json_agree"
. "${srcdir:-.}/tests/moe_lib.sh"
. "${srcdir:-.}/tests/moe_configs.sh"
moe_configs "$tmp" && cp "$tmp/qwen2_moe.json" "$tmp/config.json"

# the training: tests/moe_step.sh's checks on this config
ZS_MOE_CONFIG=$tmp/config.json sh "${srcdir:-.}/tests/moe_step.sh" || fail "tests/moe_step.sh on the tiny qwen2_moe"
# and DeepSpeed's dp, zero1, zero2 and zero3 of it (tests/ds_moe.sh: theory --routing FILE = measure to the
# byte, the bucket, the starved-expert refusals)
ZS_MOE_CONFIG=$tmp/config.json sh "${srcdir:-.}/tests/ds_moe.sh" || fail "tests/ds_moe.sh on the tiny qwen2_moe"

# theory --routing FILE = measure to the byte, balanced departing (moe_lib.sh)
for prec in fp32 mixed; do
	for rc in none full; do
		sweep_agree "$prec-$rc" "--model $tmp/config.json --seq 16 --batch 4 --precision $prec --recompute $rc
		       --world 1,2,3 --schemes dp,zero1,zero2,zero3 --unit model,layer --steps 3 --framework paper"
	done
done
# and at N = 4, 8: the paper's schedule (fp32, full) and DeepSpeed's
# (mixed, no recompute), the four schemes, both units
sweep_agree fp32-full-48 "--model $tmp/config.json --seq 16 --batch 4 --precision fp32 --recompute full --world 4,8
       --schemes dp,zero1,zero2,zero3 --unit model,layer --steps 3 --framework paper"
sweep_agree ds-mixed-none-48 "--model $tmp/config.json --seq 16 --batch 4 --precision mixed --recompute none --world 4,8
       --schemes dp,zero1,zero2,zero3 --unit model,layer --steps 3 --framework deepspeed"
# a file from another shared expert or renormalisation routed otherwise:
# refused, naming the key
routing_refused 's/"shared_expert_intermediate_size": 80/"shared_expert_intermediate_size": 96/' \
	"shared_expert_intermediate_size is 80"
routing_refused 's/"norm_topk_prob": false/"norm_topk_prob": true/' "norm_topk_prob is false"
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

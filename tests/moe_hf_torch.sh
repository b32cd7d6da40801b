#!/bin/sh
# moe_hf_torch — issue #25's mixture under the PyTorch step (--framework
# torch --wrapper none): zerosim's theory of util/autograd.c's mixtral block
# against PyTorch 1.13 training the tiny mixtral of tests/moe_lib.sh (d 64,
# F 96, 2 blocks, 8 heads, 4 experts, top 2) op for op (tests/hf_torch.py's
# MixtralDecoderLayer over tests/moe_torch.py's MixtralSparseMoeBlock,
# modeling_mixtral.py at 00d4b3d2) under its profiler: fp32, Adam, zero_grad
# zeros, eager attention, 3 steps. The reference records its own routing
# (each step's tokens per expert a block), which the theory takes as a
# measured run's (--routing FILE: the steady step's, the last):
#
#  - the record is a routing (B·T·k assignments a block over E experts)
#    and is what the allocator saw: in the traced step each block's hit
#    experts allocate expert_mask[expert_idx], torch.where's nonzero
#    [n, 2], hidden_states[None, top_x] [n, d], w1, w3, w2 and the routing
#    weights' [n, 1], each sized by the recorded count n;
#  - the theory's bytes between steps, the steady step's peak and every
#    mark it names equal the allocator's to the byte (tests/ft_cmp.py), at
#    B 2 T 16 and at B 1 T 8, whose steady step leaves block 1's expert 0
#    without a token (its grad stays zeros, Adam still steps it);
#  - the same for the tiny qwen2_moe of tests/qwen_moe.sh (its shared
#    expert 80 wide, top 2 of 4 unnormalised) and qwen3_moe of
#    tests/qwen3_moe.sh (q/k norms, top 2 of 4 renormalised) at B 2 T 16
#    (hf_torch.py's QwenMoeDecoderLayer over moe_torch.py's blocks; the
#    shared expert's four mm's checked in the record's allocations too);
#  - the mixtral at B 2 T 16 under foreach Adam (1.13's
#    _multi_tensor_adam) the same;
#  - the mixtral at B 2 T 16 under bf16 autocast (hf_torch.py --amp bf16;
#    --precision amp-bf16) the same, bytes, peak, marks and every event;
#    the theory with block 0's least used expert idled departs from it,
#    and measure of it equals its theory; qwen3_moe under bf16 autocast
#    the same (bytes, peak, marks: its events depart in the order of two
#    frees in the dense q_norm); qwen2_moe under bf16 autocast (its
#    shared expert's sigmoid gate, the promoted add) the same, every event
#    but the order within three windows of the dense qwen2 attention's
#    code; 2.6's autocast refused by name;
#  - under zero_grad(set_to_none=True) (--zero-grad none: no grad between
#    steps, the backward's taken as .grad) the mixtral at B 2 T 16 and at
#    B 1 T 8 (an expert idle in the steady step keeps no grad: Adam skips
#    it), qwen2_moe and qwen3_moe at B 2 T 16 the same (bytes, peak,
#    marks, every event);
#  - the steady step's list, event for event (tests/ag_events), equal to
#    1.13's clean step's allocations and frees (hf_torch.py --trace's
#    FILE.clean) in every row;
#  - under DDP N = 2 and 3 over gloo (--wrapper ddp; hf_torch.py --ddp N:
#    find_unused_parameters False, every rank's allocator and routing), the
#    mixtral 512 wide: the theory given every rank's routing (each rank its
#    own lists) equals each rank's bytes between steps, peak (the steps'
#    after the first) and every mark to the byte, the ranks' peaks apart;
#    measure --wrapper ddp equals the theory given its own routing, every
#    rank's row and marks;
#  - under FSDP N = 2 over gloo (--wrapper fsdp --schemes zero3, FULL_SHARD;
#    hf_torch.py --fsdp N: a unit per decoder layer, the router and the
#    experts flattened into it; every rank's allocator and routing): the
#    theory given every rank's routing equals each rank's bytes between
#    steps, peak (the steps' after the first) and every mark: the 512-wide
#    mixtral at B 4 T 32 (the ranks' peaks apart; measure --wrapper fsdp
#    equals the theory given its own routing, every rank's row and marks)
#    and the tiny mixtral at B 1 T 9, its ranks leaving experts idle (in the
#    first step too: the idle view's slot of the flat gradient
#    SplitWithSizesBackward's zeros; main refused a mixture under fsdp);
#  - with output_router_logits true (the auxiliary load-balancing loss,
#    tests/hf_torch.py's moe_aux_outputs; qwen's router_aux_loss_coef
#    0.02) the mixtral, qwen2_moe and qwen3_moe at B 2 T 16 (bytes, peak,
#    marks, every event) and the 512-wide mixtral under DDP N = 2 (each
#    rank, and measure against its theory) the same;
#  - under DDP N = 2 with find_unused_parameters (--ddp-find-unused on;
#    hf_torch.py --ddp 2 --ddp-find-unused --trace) the tiny mixtral at
#    B 1 T 9, its steady step leaving experts idle on one rank and one
#    idle on both: the theory given every rank's routing equals each
#    rank's bytes, peak and marks, and util/ag_ddp.c's list each rank's
#    clean step event for event; measure refuses that routing and the
#    theory an expert idle on every rank in the first step and
#    output_router_logits true, by name; and
#    measure of the tiny mixtral at B 2 T 16 (every expert used) equals
#    its theory;
#  - under gradient accumulation (--grad-accum K, the plain loop; the
#    reference tests/ft_torch.py's loop through hf_torch.py --ft, its
#    routing each micro-step's): the theory given the K micro-steps'
#    counts a step equals the allocator's bytes between steps, peak and
#    every mark of every micro-step: the mixtral at B 2 T 16, K = 2, zeros;
#    qwen2_moe at K = 3, set_to_none; the mixtral at B 1 T 8, K = 2,
#    set_to_none, an expert idle in one micro-step of the steady step and
#    used in the other; the mixtral at K = 2 under DDP N = 2 (ft_torch.py
#    --world 2, every rank's routing) with and without no_sync(): rank 0's
#    bytes, peak, marks and all-reduces a micro-step; measure of the
#    mixtral at K = 2, and under DDP N = 2 with no_sync, equals its theory
#    (main refused --grad-accum for a mixture);
#  - with --freeze (main refused it for a mixture): the tiny mixtral with
#    its routers frozen (zeros) and qwen2_moe with block 0's experts and
#    the shared expert's MLP frozen (set_to_none), bytes, peak, marks and
#    every event; with LoRA (--lora-r 4 on q_proj,v_proj, tests/ft_torch.py's
#    loop through hf_torch.py --ft) the mixtral's bytes, peak and marks;
#    an adapter inside the block (w1, all-linear, shared_expert_gate)
#    refused by name;
#  - transformers 5.x's fused experts (--experts-impl eager; hf_torch.py
#    --experts eager: moe_torch.py's FusedExperts, the eager forward of
#    integrations/moe.py at 8b584a67) on the tiny mixtral at B 2 T 16,
#    zeros and set_to_none (in 2.6 too): bytes, peak, marks and every
#    event, each hit expert's select making zeros of the whole gate_up_proj
#    and down_proj; the 4.x ModuleList theory under the same routing
#    departs (main refused --experts-impl as an unknown option); measure
#    --experts-impl eager under the same options equals its theory given
#    its own routing (tests/moe_fused.sh holds more of measure);
#  - refused by name: a routing whose first step leaves an expert without a
#    token (at B 1 T 2: its .grad stays None), under --wrapper ddp a step
#    leaving an expert idle on any rank (1.13's reducer raises "Expected to
#    have finished reduction in the prior iteration" at the step after) or
#    a sweep of two N whose ranks route apart (each rank's routing is
#    followed for one N a sweep). (measure runs the step:
#    tests/moe_measure.sh holds it to this theory too.)
#
# Every PyTorch run is a case of one batch (tests/batch_torch.py: one
# python process). `moe_hf_torch.sh torch26` (make check-torch26) holds
# the same to PyTorch 2.6 in tests/torch26_root.sh's root: the mixtral,
# qwen2_moe, qwen3_moe and the mixtral with the aux loss at B 2 T 16 under
# set_to_none (2.6's default) and zeros (qwen2_moe's zeros row left out:
# the dense qwen2 layer's step frees one tensor in another order than
# 2.6's under zeros, bytes and marks equal), the mixtral at B 1 T 8 (an
# expert idle) and under foreach Adam (set_to_none), and the 512-wide
# mixtral's ranks under DDP N = 2 (zeros) and the fused experts (both
# zero_grads): bytes, peak, marks, every event; and under --grad-accum the mixtral (K = 2) and qwen3_moe (K = 3),
# set_to_none: bytes, peak, marks.
#
# About 120 s (the find_unused rows about 25 of them, the FSDP rows about 8). Exit 0 pass, 1 fail, 77 skip (no PyTorch; ZS_REQUIRE_TORCH=1
# makes that a failure), 99 hard error.
name=moe_hf_torch
needs="${ZS_BUILDDIR:-.}/tests/ag_events ${ZS_BUILDDIR:-.}/tests/json_agree"
src=${srcdir:-.}
. "$src/tests/moe_lib.sh"
. "$src/tests/torch_python.sh"
export PYTHONDONTWRITEBYTECODE=1
S=3
# `moe_hf_torch.sh torch26` (make check-torch26): the rows marked 2.6
# below against PyTorch 2.6 in tests/torch26_root.sh's Debian 13 root
# (skip without it; a failure under ZS_REQUIRE_TORCH26=1)
mode=${1:-} TV=1.13
if [ "$mode" = torch26 ]; then
	if ! root=$("$src/tests/torch26_root.sh"); then
		[ "${ZS_REQUIRE_TORCH26:-0}" = 1 ] && { echo "$name: FAIL: no PyTorch 2.6 root (ZS_REQUIRE_TORCH26=1)" >&2; exit 1; }
		echo "$name: SKIP: no PyTorch 2.6 root (tests/torch26_root.sh)" >&2
		exit 77
	fi
	TV=2.6 in=/tmp/zs-moe26.$$
	trap 'rm -rf "$tmp" "${root:?}$in"' EXIT HUP INT TERM
fi
. "$src/tests/batch_lib.sh"
# zero_grad: zg (zeros, or none: set_to_none); eager attention (2.6's
# default in zerosim is sdpa, hf_torch.py's eager)
zg=zeros
torch_opts="--framework torch --wrapper none --torch-version $TV --torch-device cpu --zero-grad zeros
	--optimizer-impl single --precision fp32 --world 1 --schemes dp --steps $S --attn eager"
# the options of zero_grad $zg, Adam $impl and precision $prec (fp32, or
# amp-bf16: hf_torch.py --amp bf16, 1.13's CPU autocast)
prec=fp32
opts() {
	echo "$torch_opts" | sed "s/--optimizer-impl single/--optimizer-impl $impl/;s/--zero-grad zeros/--zero-grad $zg/;s/--precision fp32/--precision $prec/"
}

# the tiny qwen2_moe of tests/qwen_moe.sh (its shared expert 80 wide, top 2
# of 4 unnormalised) and qwen3_moe of tests/qwen3_moe.sh (q/k norms, top 2
# of 4 renormalised), their configs tests/moe_configs.sh's
. "$src/tests/moe_configs.sh"
moe_configs "$tmp" && cp "$tmp/qwen2_moe.json" "$tmp/qwen_moe.json"

# ref B T [CONFIG]: the reference's run of CONFIG (config.json's, the
# mixtral, by default) into $tmp/ref-B-T.json (its trace beside), its
# routing as a measured run's in $tmp/routing-B-T.json; the record checked
# against its allocator's events (status 1 where it is not); Adam's
# implementation $impl
impl=single
# The references: every hf_torch.py run of the test is a case of one batch
# (tests/batch_torch.py: torch imported once), added by hf_add TAG ARGS
# (ARGS' $tmp paths copied in; --trace trace-TAG and --out ref-TAG.json
# added), run once by ft_run (under torch26 in the root), each case's
# files brought back by hf_get TAG (exit 99 where it failed).
hf_add() {
	t=$1
	shift
	# shellcheck disable=SC2046,SC2086
	ft_add mh $(ft_rel mh "$*") --no-attribution --trace "trace-$t" --out "ref-$t.json"
	echo "$n" >"$tmp/mh-$t.n"
}
hf_get() {
	k=$(cat "$tmp/mh-$1.n" 2>/dev/null) || { echo "$name: no reference $1 in the batch" >&2; exit 99; }
	if [ "$(ft_got mh "$k")" != 0 ]; then
		tail -20 "$tmp/mh/$k.err" >&2
		echo "$name: hf_torch.py's case $1 failed (PyTorch $TV)" >&2
		exit 99
	fi
	cp "$tmp/mh/ref-$1.json" "$tmp/" && for f in "$tmp/mh/trace-$1"*; do [ ! -e "$f" ] || cp "$f" "$tmp/" || exit 99; done
}
# the tag of a plain-loop reference at B $1 T $2 (Adam $impl, zero_grad $zg)
# (and --freeze $FZ where FZ is set, $FZT naming it in the tag)
FZ= FZT=
# EX: the experts implementation (eager: transformers 5.x's fused experts,
# hf_torch.py --experts eager, zerosim --experts-impl eager; empty: 4.x's
# ModuleList)
EX=
rtag() { echo "$1-$2${impl#single}${zg#zeros}${prec#fp32}${3:+-$(basename "$3" .json)}${FZT:+-fz$FZT}${EX:+-$EX}"; }
ref_add() {
	# shellcheck disable=SC2046
	hf_add "$(rtag "$@")" --model "${3:-$tmp/config.json}" --seq "$2" --batch "$1" --steps $S --zero-grad "$zg" \
		--optimizer-impl "$impl" $([ "$prec" = fp32 ] || echo --amp bf16) ${FZ:+--freeze "$FZ"} ${EX:+--experts "$EX"}
}
ref() {
	tag=$(rtag "$@") cfg=${3:-$tmp/config.json}
	hf_get "$tag"
	python3 - "$tmp/ref-$tag.json" "$cfg" "$tmp/trace-$tag" "$tmp/routing-$tag.json" "$1" "$2" $S $prec "${EX:-}" <<'PY' ||
import json, sys
ref, cfg = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
trace, out = sys.argv[3], sys.argv[4]
B, T, S = (int(x) for x in sys.argv[5:8])
mm = 2 if sys.argv[8] == "amp-bf16" else 4  # autocast: the linears' mm's are bf16
qwen = cfg["model_type"] != "mixtral"
E, K, L = cfg["num_experts" if qwen else "num_local_experts"], cfg["num_experts_per_tok"], cfg["num_hidden_layers"]
d, F = cfg["hidden_size"], cfg["moe_intermediate_size" if qwen else "intermediate_size"]
Sh = cfg.get("shared_expert_intermediate_size", 0)
fused = sys.argv[9] == "eager"  # 5.x's fused experts: the block is `mlp`, its experts one module
blkname = "mlp" if qwen or fused else "block_sparse_moe"
w1, w3, w2 = ("gate_proj", "up_proj", "down_proj") if qwen else ("w1", "w3", "w2")
rt, bad = ref.get("routing"), []
if not rt or rt["blocks"] != L or rt["experts"] != E or len(rt["steps"]) != S or rt["traced"] is None:
    sys.exit("moe_hf_torch: FAIL: the reference recorded no routing of %d steps x %d blocks x %d experts" % (S, L, E))
for s, step in enumerate(rt["steps"] + [rt["traced"]]):
    for l, c in enumerate(step):
        if len(c) != E or sum(c) != B * T * K:
            bad.append("forward %d block %d routes %s, not %d assignments over %d experts" % (s, l, c, B * T * K, E))
# the traced step's allocations inside each block's forward
seen, blk = [[] for _ in range(L)], None
for line in open(trace):
    w = line.split()
    if w[0] == "mark" and w[1].startswith("fwd:layers.") and w[1].endswith("." + blkname + ":start"):
        blk = int(w[1].split(".")[1])
    elif w[0] == "mark" and w[1].endswith("." + blkname + ":end"):
        blk = None
    elif blk is not None and w[0] == "alloc" and w[2] in ("nonzero.default", "index.Tensor", "mm.default"):
        seen[blk].append((w[2], w[4], int(w[1])))
for l in range(L):
    mod = "layers.%d.%s" % (l, blkname)
    hit = sum(1 for n in rt["traced"][l] if n)
    want = [("mm.default", mod + ".gate", B * T * E * mm),
            ("nonzero.default", mod + (".experts" if fused else ""), hit * 8)]  # expert_hit: [hit, 1] int64
    for e, n in enumerate(rt["traced"][l]):
        if n == 0:
            continue
        if fused:  # expert_mask[expert_idx] a select (no copy); gate_up [n, 2F] and down in `experts`
            want += [("nonzero.default", mod + ".experts", n * 2 * 8),
                     ("index.Tensor", mod + ".experts", n * d * 4),
                     ("mm.default", mod + ".experts", n * 2 * F * mm),
                     ("mm.default", mod + ".experts", n * d * mm),
                     ("index.Tensor", mod + ".experts", n * 4)]
            continue
        want += [("index.Tensor", mod, K * B * T * 8),  # expert_mask[expert_idx]: [1, k, BT] int64
                 ("nonzero.default", mod, n * 2 * 8),
                 ("index.Tensor", mod, n * d * 4),
                 ("mm.default", "%s.experts.%d.%s" % (mod, e, w1), n * F * mm),
                 ("mm.default", "%s.experts.%d.%s" % (mod, e, w3), n * F * mm),
                 ("mm.default", "%s.experts.%d.%s" % (mod, e, w2), n * d * mm),
                 ("index.Tensor", mod, n * 4)]  # routing_weights[top_x, idx, None]
    if Sh:  # qwen2_moe's shared expert on every token, then its gate (BT, 1)
        want += [("mm.default", mod + ".shared_expert.gate_proj", B * T * Sh * mm),
                 ("mm.default", mod + ".shared_expert.up_proj", B * T * Sh * mm),
                 ("mm.default", mod + ".shared_expert.down_proj", B * T * d * mm),
                 ("mm.default", mod + ".shared_expert_gate", B * T * mm)]
    if seen[l] != want:
        bad.append("block %d: the allocator's expert allocations %s, the recorded routing %s gives %s" %
                   (l, seen[l], rt["traced"][l], want))
json.dump({"format": "zerosim-measured/1", "config": dict(seq=T, batch=B),
           "runs": [{"scheme": "dp", "unit": "model", "world": 1,
                     "routing": {"blocks": L, "experts": E, "tokens_per_expert": [rt["steps"]]}}]}, open(out, "w"))
for b in bad:
    print("moe_hf_torch: FAIL: B %d T %d: %s" % (B, T, b), file=sys.stderr)
sys.exit(1 if bad else 0)
PY
		status=1
}

# agree B T [CONFIG]: the theory under the reference's routing against the reference
agree() {
	tag=$(rtag "$@") cfg=${3:-$tmp/config.json}
	# shellcheck disable=SC2046
	if ! "$zerosim" theory --model "$cfg" --seq "$2" --batch "$1" $(opts) ${FZ:+--freeze "$FZ"} \
		${EX:+--experts-impl "$EX"} --routing "$tmp/routing-$tag.json" --out "$tmp/t-$tag.json" 2>"$tmp/err"; then
		fail "B $1 T $2: theory: $(cat "$tmp/err")"
		return
	fi
	label="$(sed -n 's/.*"model_type": "\([a-z0-9_]*\)".*/\1/p' "$cfg") B $1 T $2 (${EX:+5.x fused experts ($EX), }${FZ:+--freeze $FZ, }$impl Adam$(grep -q '"output_router_logits": true' "$cfg" && echo ', aux loss')$([ $zg = none ] && echo ', set_to_none')$([ $prec = fp32 ] || echo ', bf16 autocast'), PyTorch $TV)"
	"$py" "$src/tests/ft_cmp.py" "$tmp/ref-$tag.json" "$tmp/t-$tag.json" - "$label" || status=1
	[ -z "${NOEV:-}" ] || return 0
	# and event for event: the steady step's allocations and frees
	# (tests/ag_events) against 1.13's clean step (hf_torch.py --trace's .clean)
	counts=$(python3 -c 'import json, sys
print(" ".join(str(n) for b in json.load(open(sys.argv[1]))["routing"]["steps"][-1] for n in b))' "$tmp/ref-$tag.json")
	# shellcheck disable=SC2086
	"${ZS_BUILDDIR:-.}/tests/ag_events" "$cfg" "$1" "$2" torch-version=$TV torch-device=cpu zero-grad=$zg \
		optimizer-impl="$impl" precision=$prec attn=eager ${FZ:+"freeze=$FZ"} ${EX:+"experts-impl=$EX"} -- $counts \
		>"$tmp/ev-$tag" ||
		{ fail "B $1 T $2: tests/ag_events"; return; }
	python3 - "$tmp/ev-$tag" "$tmp/trace-$tag.clean" "$label" "${EVPERM:-0}" <<'PY' || status=1
import sys
z, t = (open(f).read().split() for f in sys.argv[1:3])
# EVPERM W: at most W windows (of at most 9 events each) where the two
# lists hold the same events in another order (a departure of the dense
# layers' code, named where the row sets it); none by default
perm, i, wins = int(sys.argv[4]), 0, []
while i < min(len(z), len(t)):
    if z[i] == t[i]:
        i += 1
        continue
    j = next((j for j in range(i + 2, min(i + 10, len(z), len(t)) + 1) if sorted(z[i:j]) == sorted(t[i:j])), None)
    if j is None or len(wins) >= perm:
        break
    wins.append((i, j - i))
    i = j
if i < min(len(z), len(t)) or len(z) != len(t) or not z:
    at = i
    sys.exit("moe_hf_torch: FAIL: %s: zerosim's step list departs from PyTorch's clean step at event %d of %d "
             "(zerosim %s, PyTorch %s)" % (sys.argv[3], at, len(t), z[at:at + 3], t[at:at + 3]))
print("ok: %s: %d allocations and frees, PyTorch's one for one%s" % (sys.argv[3], len(z), "".join(
    "" if not wins else ", but for the order within %s" % ", ".join("%d at event %d" % (n, a) for a, n in wins))))
PY
}

# the 512-wide mixtral of DDP's rows (below), and each config with the
# auxiliary load-balancing loss (output_router_logits true; qwen's
# router_aux_loss_coef 0.02)
sed 's/"intermediate_size": 96/"intermediate_size": 512/' "$tmp/config.json" >"$tmp/wide.json"
aux() { # a config's last brace closes it: the keys added before it
	c=', "router_aux_loss_coef": 0.02'
	grep -q '"model_type": "mixtral"' "$1" && c=''
	sed "s/}[[:space:]]*\$/, \"output_router_logits\": true$c}/" "$1" >"$2" || exit 99
}
for q in config qwen_moe qwen3_moe wide; do
	aux "$tmp/$q.json" "$tmp/$q-aux.json"
done
# ddp_add N CONFIG [SUFFIX]: DDP N's reference (tag ddpN[SUFFIX])
ddp_add() {
	hf_add "ddp$1${3:-}" --model "$2" --seq 16 --batch 2 --steps $S --zero-grad zeros --optimizer-impl single --ddp "$1"
}
# fsdp_add N CONFIG B T: FSDP N's reference (FULL_SHARD, a unit per
# decoder block: hf_torch.py --fsdp N; tag fsdpN-CONFIG-B-T)
fsdp_add() {
	hf_add "fsdp$1-$(basename "$2" .json)-$3-$4" --model "$2" --seq "$4" --batch "$3" --steps $S --zero-grad zeros \
		--optimizer-impl single --fsdp "$1"
}
# Gradient accumulation (--grad-accum K, the plain loop): each micro-step
# routes its own micro-batch, so the routing is each step's K micro-steps'
# blocks (measured.json's "micro_steps"). The reference is
# tests/ft_torch.py's loop (micro-batch k of K drawn at once, loss / K,
# the marks "LABEL@k"), run in this batch through hf_torch.py --ft; its
# "routing" the K micro-steps' counts (hf_torch.py's layers record them).
# atag B T K ZG [CONFIG]: the tag; acc_add the same: its reference. Under
# DDP (W ranks over gloo, W > 1; no_sync() on the first K − 1 micro-steps
# where NS is 1) every rank's routing in the reference's routing.ranks.
W=1 NS=1
# LA: more options of both sides (LoRA's: --lora-r R --lora-targets T)
LA=
atag() { echo "acc-$1-$2-k$3-$4${5:+-$(basename "$5" .json)}$([ "$W" = 1 ] || echo "-ddp$W-ns$NS")${LA:+-lora}"; }
acc_add() {
	t=$(atag "$@")
	# shellcheck disable=SC2046,SC2086
	ft_add mh --ft $(ft_rel mh "--model ${5:-$tmp/config.json}") --seq "$2" --batch "$1" --steps $S --grad-accum "$3" \
		--zero-grad "$4" --optimizer-impl single --world "$W" --no-sync "$NS" $LA --out "ref-$t.json"
	echo "$n" >"$tmp/mh-$t.n"
}
# every reference the rows below take, one batch
if [ "$mode" = torch26 ]; then
	# 2.6: zero_grad set_to_none (its default) and zeros, single and
	# foreach Adam, an expert idle, qwen2_moe and qwen3_moe, the aux loss,
	# DDP N = 2
	# (qwen2_moe under zeros left out: the dense qwen2 layer's own step
	# departs from 2.6's clean step in the order of one free under zeros,
	# bytes and marks equal: tiny qwen2 B 2 T 16, event 426 of 1,230)
	for zg in none zeros; do
		ref_add 2 16
		for q in qwen_moe qwen3_moe config-aux; do
			[ $zg:$q = zeros:qwen_moe ] || ref_add 2 16 "$tmp/$q.json"
		done
	done
	zg=none
	ref_add 1 8
	impl=foreach
	ref_add 2 16
	impl=single
	zg=zeros
	EX=eager
	for zg in none zeros; do ref_add 2 16; done
	EX=
	zg=zeros
	ddp_add 2 "$tmp/wide.json"
	acc_add 2 16 2 none
	acc_add 2 16 3 none "$tmp/qwen3_moe.json"
	mkdir -p "$root$in" && cp "$src/tests/moe_torch.py" "$root$in/" || exit 99
else
	for q in qwen_moe qwen3_moe; do
		ref_add 2 16 "$tmp/$q.json"
	done
	ref_add 2 16
	ref_add 1 8
	impl=foreach
	ref_add 2 16
	impl=single
	EX=eager
	for zg in zeros none; do ref_add 2 16; done
	ref_add 1 6 "$tmp/wide.json" # zg none: fused_idle below
	EX=
	zg=zeros
	prec=amp-bf16
	ref_add 2 16
	ref_add 2 16 "$tmp/qwen3_moe.json"
	ref_add 2 16 "$tmp/qwen_moe.json"
	prec=fp32
	zg=none
	ref_add 2 16
	ref_add 1 8
	for q in qwen_moe qwen3_moe; do
		ref_add 2 16 "$tmp/$q.json"
	done
	FZ='*.layers.0.mlp.experts.*,*.shared_expert.*' FZT=experts
	ref_add 2 16 "$tmp/qwen_moe.json"
	zg=zeros
	FZ='*.block_sparse_moe.gate.weight' FZT=router
	ref_add 2 16
	FZ= FZT=
	ddp_add 2 "$tmp/wide.json"
	ddp_add 3 "$tmp/wide.json"
	fsdp_add 2 "$tmp/wide.json" 4 32
	fsdp_add 2 "$tmp/config.json" 1 9
	ref_add 1 2
	for q in config qwen_moe qwen3_moe; do
		ref_add 2 16 "$tmp/$q-aux.json"
	done
	ddp_add 2 "$tmp/wide-aux.json" -aux
	hf_add unused-1-9 --model "$tmp/config.json" --seq 9 --batch 1 --steps $S --zero-grad zeros \
		--optimizer-impl single --ddp 2 --ddp-find-unused --trace trace-unused-1-9
	acc_add 2 16 2 zeros
	acc_add 2 16 3 none "$tmp/qwen_moe.json"
	acc_add 1 8 2 none
	W=2
	for NS in 1 0; do acc_add 2 16 2 zeros; done
	W=1 NS=1
	LA='--lora-r 4 --lora-targets q_proj,v_proj'
	acc_add 2 16 1 zeros
	LA=
fi
ft_run mh hf_torch.py

# measure_agree LABEL TAG WHAT OPTS: measure of the tiny mixtral at B 2 T
# 16 under OPTS (its own routing) against the theory given that routing:
# every row and mark (tests/json_agree)
# shellcheck disable=SC2086
measure_agree() {
	if ! OPENBLAS_NUM_THREADS=1 "$zerosim" measure -q --model "$tmp/config.json" --seq 16 --batch 2 $4 \
		--out "$tmp/m-$2.json" 2>"$tmp/err"; then
		fail "$1: measure: $(cat "$tmp/err")"
	elif ! "$zerosim" theory --model "$tmp/config.json" --seq 16 --batch 2 $4 --routing "$tmp/m-$2.json" \
		--out "$tmp/tm-$2.json" 2>"$tmp/err"; then
		fail "$1: theory --routing (measure's): $(cat "$tmp/err")"
	elif ! "$top/tests/json_agree" "$tmp/m-$2.json" "$tmp/tm-$2.json" >"$tmp/out" 2>&1; then
		fail "$1: theory --routing (measure's) against measure: $(cat "$tmp/out")"
	else
		echo "ok: $1: $3 equals its theory: $(head -1 "$tmp/out")"
	fi
}
# idle B T: the rows at B T whose steady step leaves an expert without a
# token (its grad stays zeros, or under set_to_none None: Adam skips it)
idle() {
	ref "$1" "$2"
	python3 -c 'import json, sys; sys.exit(0 if any(0 in c for c in json.load(open(sys.argv[1]))["routing"]["steps"][-1]) else 1)' \
		"$tmp/ref-$(rtag "$1" "$2").json" || fail "B $1 T $2: no expert is left without a token in the steady step any more"
	agree "$1" "$2"
}
# fused_rows ZG...: transformers 5.x's fused experts under eager
# (hf_torch.py --experts eager: moe_torch.py's FusedExperts, the eager
# forward of integrations/moe.py at 8b584a67; zerosim --experts-impl
# eager), the tiny mixtral at B 2 T 16 under each zero_grad: the theory
# given the reference's routing equals bytes, peak, marks and every event
# (each hit expert's SelectBackward makes zeros of the whole gate_up_proj
# and down_proj, summed in their input buffers: out of place in 1.13, in
# place in 2.6); and, so that the row can fail, the theory of 4.x's
# ModuleList under the same routing departs from it (peak); then measure
# --experts-impl eager under the same options (its own routing: zerosim's
# weights, not hf_torch.py's) equals that theory given its routing, so
# measure meets the allocator through the theory (tests/moe_fused.sh
# covers more)
fused_rows() {
	for zg in "$@"; do
		EX=eager
		ref 2 16
		agree 2 16
		tag=$(rtag 2 16)
		EX=
		# shellcheck disable=SC2046
		"$zerosim" theory --model "$tmp/config.json" --seq 16 --batch 2 $(opts) --routing "$tmp/routing-$tag.json" \
			--out "$tmp/t4-$tag.json" 2>"$tmp/err" || { fail "fused $zg: theory: $(cat "$tmp/err")"; continue; }
		if "$py" "$src/tests/ft_cmp.py" "$tmp/ref-$tag.json" "$tmp/t4-$tag.json" - "4.x" >"$tmp/out4" 2>&1; then
			fail "fused $zg: 4.x's ModuleList theory equals the fused experts' allocator (the row cannot fail)"
		else
			echo "ok: fused $zg: 4.x's ModuleList theory under the same routing departs: $(grep 'theory peak' "$tmp/out4")"
		fi
		measure_agree "fused $zg" "fused-$zg" "measure of the mixtral, 5.x fused experts (eager), B 2 T 16, PyTorch $TV" \
			"$(opts) --experts-impl eager"
	done
	zg=zeros
}
if [ "$mode" = torch26 ]; then
	for zg in none zeros; do
		ref 2 16
		agree 2 16
		for q in qwen_moe qwen3_moe config-aux; do
			[ $zg:$q = zeros:qwen_moe ] && continue
			ref 2 16 "$tmp/$q.json"
			agree 2 16 "$tmp/$q.json"
		done
	done
	zg=none
	idle 1 8
	impl=foreach
	ref 2 16
	agree 2 16
	impl=single
	zg=zeros
	fused_rows none zeros
else
	for q in qwen_moe qwen3_moe; do
		ref 2 16 "$tmp/$q.json"
		agree 2 16 "$tmp/$q.json"
	done
	ref 2 16
	agree 2 16
	idle 1 8
	# foreach Adam (1.13's _multi_tensor_adam) over the mixtral's parameters
	impl=foreach
	ref 2 16
	agree 2 16
	impl=single
	fused_rows zeros none
	# fused_idle: the 512-wide mixtral at B 1 T 6 leaves an expert without a
	# token in the first step; 4.x's ModuleList would keep its .grad None
	# (refused), 5.x's fused parameters get theirs whole from the other
	# experts' SelectBackward, so the theory describes it (s49 review)
	EX=eager zg=none
	ref 1 6 "$tmp/wide.json"
	python3 -c 'import json, sys; sys.exit(0 if any(0 in c for c in json.load(open(sys.argv[1]))["routing"]["steps"][0]) else 1)' \
		"$tmp/ref-$(rtag 1 6 "$tmp/wide.json").json" || fail "fused idle: no expert is left without a token in the first step any more"
	agree 1 6 "$tmp/wide.json"
	EX= zg=zeros
	# bf16 autocast (hf_torch.py --amp bf16: torch.autocast("cpu",
	# dtype=torch.bfloat16) around the forward, 1.13's CPU policy): the
	# gate's and the experts' mm's bf16 (W cached, x copied at each use),
	# softmax's dtype=torch.float copy of the bf16 logits, the fp32
	# routing weight times w2's bf16 output promoted (a fp32 copy) into
	# the fp32 final_hidden_states; then, so that the row can fail, the
	# theory under the same routing but block 0's least used expert idle
	# in the steady step (its tokens given to the others: its weights
	# then never cast, the linear sums alike) departs from the allocator,
	# and measure (its own routing) equals its theory
	prec=amp-bf16
	ref 2 16
	agree 2 16
	tag=$(rtag 2 16)
	python3 - "$tmp/routing-$tag.json" "$tmp/moved-$tag.json" <<'PY' || exit 99
import json, sys
f = json.load(open(sys.argv[1]))
c = f["runs"][0]["routing"]["tokens_per_expert"][0][-1][0]  # rank 0, the steady step, block 0
lo = c.index(min(c))  # the least used expert's tokens to the others (at most B·T each): it idles
for e in range(len(c)):
    give = 0 if e == lo else min(c[lo], 32 - c[e])
    c[e], c[lo] = c[e] + give, c[lo] - give
if c[lo]:
    sys.exit("moe_hf_torch: no room to idle an expert in %s" % c)
json.dump(f, open(sys.argv[2], "w"))
PY
	# shellcheck disable=SC2046
	if ! "$zerosim" theory --model "$tmp/config.json" --seq 16 --batch 2 $(opts) --routing "$tmp/moved-$tag.json" \
		--out "$tmp/tmoved.json" 2>"$tmp/err"; then
		fail "bf16 autocast, an expert idled: theory: $(cat "$tmp/err")"
	elif "$py" "$src/tests/ft_cmp.py" "$tmp/ref-$tag.json" "$tmp/tmoved.json" - "block 0 idled (must differ)" >"$tmp/out" 2>&1; then
		fail "bf16 autocast: the theory with block 0's least used expert idled still equals 1.13's allocator"
	else
		echo "ok: bf16 autocast: block 0's least used expert idled departs: $(grep -c . "$tmp/out") lines, $(head -1 "$tmp/out")"
	fi
	measure_agree "bf16 autocast" amp "measure of the mixtral (B 2 T 16)" "$(opts)"
	# qwen3_moe under bf16 autocast (its routed block as the mixtral's, its
	# attention qwen3's with q_norm and k_norm): bytes between steps, peak
	# and marks (main refused it); its clean step's events depart from
	# 1.13's in the order of two frees in block 0's q_norm (event 69 of
	# 2,924: the dense attention's, head_dim 16 apart from d / heads), so
	# not event for event
	ref 2 16 "$tmp/qwen3_moe.json"
	NOEV=1
	agree 2 16 "$tmp/qwen3_moe.json"
	NOEV=
	# qwen2_moe under bf16 autocast (main refused it): its shared expert's
	# linears bf16 mm's, sigmoid and the product bf16 (in no 1.13 CPU
	# autocast list: their input's dtype), the routed sum fp32, so the add
	# promotes (a fp32 copy of the product) and AddBackward0's gradient to
	# the product is cast back to bf16 before the bf16 MulBackward0 and its
	# sum to [BT, 1]; bytes, peak, marks and every event, but for the order
	# within three windows of the dense qwen2 attention's code (its q, k, v
	# biases' cached bf16 copies that only the autocast cache holds go at the
	# region's exit in the cache's hash order, after the forward's locals in
	# 1.13, before them in zerosim; and one pair of frees a layer in the
	# biased projections' backward)
	ref 2 16 "$tmp/qwen_moe.json"
	EVPERM=3
	agree 2 16 "$tmp/qwen_moe.json"
	EVPERM=0
	prec=fp32
	# zero_grad(set_to_none=True): the grads made by the backward
	# (AccumulateGrad takes the gradient itself), none between steps; at B 1
	# T 8 an expert idle in the steady step keeps no grad and Adam skips it
	zg=none
	ref 2 16
	agree 2 16
	idle 1 8
	for q in qwen_moe qwen3_moe; do
		ref 2 16 "$tmp/$q.json"
		agree 2 16 "$tmp/$q.json"
	done
	# --freeze (main refused it for a mixture): qwen2_moe with block 0's
	# routed experts and the shared expert's MLP frozen (set_to_none: no
	# grad and no Adam state for them; their mm's keep no input for a
	# weight gradient, the expert's indexing still keeps its indices for
	# x's gradient), and the mixtral with its routers frozen (zeros: the
	# gate's mm keeps no x, its softmax and topk still carry the routing
	# weights' gradient to x): bytes, peak, marks and every event
	FZ='*.layers.0.mlp.experts.*,*.shared_expert.*' FZT=experts
	ref 2 16 "$tmp/qwen_moe.json"
	agree 2 16 "$tmp/qwen_moe.json"
	zg=zeros
	FZ='*.block_sparse_moe.gate.weight' FZT=router
	ref 2 16
	agree 2 16
	FZ= FZT=
fi

# acc B T K ZG [CONFIG]: the theory given the reference's routing (its K
# micro-steps' counts a step, --routing FILE) against the reference's
# allocator: bytes between steps, the steady step's peak, every mark of
# every micro-step (tests/ft_cmp.py); main refused --grad-accum for a
# mixture. With IDLE set, the steady step must leave some expert idle in
# one micro-step and give it tokens in another (its grad made or added to
# there).
acc() {
	t=$(atag "$@") cfg=${5:-$tmp/config.json}
	hf_get "$t"
	python3 - "$tmp/ref-$t.json" "$tmp/routing-$t.json" "$3" "${IDLE:-}" <<'PY' || { fail "$t: the reference's routing"; return; }
import json, sys
ref, K, idle = json.load(open(sys.argv[1])), int(sys.argv[3]), sys.argv[4]
rt = ref.get("routing")
L = rt["blocks"] if rt else 0
ranks = (rt.get("ranks") or [rt["steps"]]) if rt else []
if not rt or rt.get("micro_steps") != K or any(len(s) != K * L for r in ranks for s in r):
    sys.exit("moe_hf_torch: FAIL: the reference recorded no routing of %d micro-steps a step" % K)
last = rt["steps"][-1]
if idle and not any(last[k * L + l][e] == 0 and any(last[j * L + l][e] for j in range(K))
                    for k in range(K) for l in range(L) for e in range(rt["experts"])):
    sys.exit("moe_hf_torch: FAIL: no expert of the steady step is idle in one micro-step and used in another")
json.dump({"format": "zerosim-measured/1", "config": dict(seq=ref["seq"], batch=ref["batch"]),
           "runs": [{"scheme": "dp", "unit": "model", "world": len(ranks),
                     "routing": {"blocks": L, "experts": rt["experts"], "micro_steps": K,
                                 "tokens_per_expert": ranks}}]}, open(sys.argv[2], "w"))
PY
	ddp=$([ "$W" = 1 ] || echo ", DDP N = $W, no_sync $([ "$NS" = 1 ] && echo on || echo off), rank 0")
	label="$(sed -n 's/.*"model_type": "\([a-z0-9_]*\)".*/\1/p' "$cfg") B $1 T $2 --grad-accum $3 (zero_grad $4${IDLE:+, an expert idle in a micro-step}$ddp${LA:+, $LA}, PyTorch $TV)"
	# shellcheck disable=SC2046,SC2086
	if ! "$zerosim" theory --model "$cfg" --seq "$2" --batch "$1" $(acc_opts "$4") $LA \
		--grad-accum "$3" --routing "$tmp/routing-$t.json" --out "$tmp/t-$t.json" 2>"$tmp/err"; then
		fail "$label: theory: $(cat "$tmp/err")"
		return
	fi
	# (and DDP's all-reduces per micro-step: --comm)
	"$py" "$src/tests/ft_cmp.py" "$tmp/ref-$t.json" "$tmp/t-$t.json" - "$label" --comm || status=1
}
# acc_opts ZG: the options of an acc row (zero_grad ZG; DDP W, no_sync NS)
acc_opts() {
	if [ "$W" = 1 ]; then
		echo "$torch_opts" | sed "s/--zero-grad zeros/--zero-grad $1/"
	else
		echo "$torch_opts --ddp-no-sync $([ "$NS" = 1 ] && echo on || echo off)" |
			sed "s/--zero-grad zeros/--zero-grad $1/;s/--wrapper none/--wrapper ddp/;s/--world 1/--world $W/"
	fi
}
if [ "$mode" = torch26 ]; then
	acc 2 16 2 none
	acc 2 16 3 none "$tmp/qwen3_moe.json"
else
	acc 2 16 2 zeros
	acc 2 16 3 none "$tmp/qwen_moe.json"
	IDLE=1
	acc 1 8 2 none
	IDLE=
	# measure under --grad-accum 2 (its own routing, each micro-step's)
	# equals its theory given that routing, every row and mark
	measure_agree "--grad-accum 2" acc "measure of the mixtral under --grad-accum 2 (B 2 T 16)" "$(opts) --grad-accum 2"
	# DDP N = 2 over it, with no_sync() on the first micro-step and without
	# (each rank its own routing; DDP's all-reduces per micro-step too), and
	# measure's every rank against its theory
	W=2
	for NS in 1 0; do acc 2 16 2 zeros; done
	NS=1
	measure_agree "--grad-accum 2, DDP N = 2, no_sync" acc-ddp "measure of the mixtral under --grad-accum 2, DDP N = 2, no_sync (B 2 T 16)" \
		"$(acc_opts zeros) --grad-accum 2"
	W=1
	# LoRA (main refused --lora-r for a mixture): PEFT's adapters on
	# q_proj and v_proj (mixtral's default, peft/utils/constants.py at
	# v0.20.0 line 94), the base frozen, the mixture block as it is with its
	# parameters frozen: ft_torch.py's LoraLinear loop at K = 1, bytes
	# between steps, peak and every mark; then an adapter inside the block
	# (an expert's w1, all-linear, qwen2_moe's shared_expert_gate) refused
	# by name (below, with the other refusals)
	LA='--lora-r 4 --lora-targets q_proj,v_proj'
	acc 2 16 1 zeros
	LA=
fi

# ddp N: DDP N over gloo (hf_torch.py --ddp N: find_unused_parameters
# False, the bucket of 25 MiB; every rank's allocator figures and routing
# in its "ranks"), the mixtral 512 wide (its peak in a block's backward, by
# the busiest expert: each rank's own) at B 2 T 16: the theory under
# --wrapper ddp --world N given every rank's routing (each rank its own
# lists) equals each rank's bytes between steps, its peak (the most of
# the steps after the first: 1.13's first step holds no Adam state yet)
# and every mark to the byte, the ranks' peaks apart; then measure
# --wrapper ddp --world N (each rank's routing found on it) against the
# theory given measure's own routing: every rank's row and marks
# rank_check (ddp_rank.py, imported by ddp's and unused's checks): rank
# k's figures r of the reference against the theory's per_rank per: its
# bytes between steps (the same after every step), its peak (`peak`) and
# every mark; appends to bad
cat >"$tmp/ddp_rank.py" <<'PY'
def rank_check(r, per, k, peak, bad):
    marks, want = per["marks"][k], dict(r["boundaries"])
    if per["resident_bytes"][k] != r["between_steps"][-1] or len(set(r["between_steps"])) != 1:
        bad.append("rank %d: between steps %s, the theory %d" % (k, r["between_steps"], per["resident_bytes"][k]))
    if per["peak_bytes"][k] != peak:
        bad.append("rank %d: peak %d, the theory %d" % (k, peak, per["peak_bytes"][k]))
    bad += ["rank %d: mark %s %d, the theory %d" % (k, x, want.get(x, -1), v) for x, v in marks.items() if want.get(x) != v]
    if len(marks) < 29:
        bad.append("rank %d: the theory names %d marks" % (k, len(marks)))


def ranks_check(ref, per, bad):
    """rank_check of every rank of ref against per: their peaks (the
    steps' after the first)"""
    peaks = []
    for k, r in enumerate(ref["ranks"]):
        peak = max([r["peak"]] + r["step_peaks"][1:])  # the run's after its first step
        peaks.append(peak)
        rank_check(r, per, k, peak, bad)
    return peaks
PY
ddp() {
	tag=ddp$1${3:-}
	cfg=${2:-$tmp/wide.json}
	hf_get "$tag"
	python3 - "$tmp/ref-$tag.json" "$1" "$tmp/routing-$tag.json" <<'PY' || { fail "$tag: the routing"; return; }
import json, sys
ref, N = json.load(open(sys.argv[1])), int(sys.argv[2])
rt, ranks = ref.get("routing"), ref.get("ranks") or []
if ref.get("ddp") != N or not rt or len(ranks) != N or any(len(r["routing"]["steps"]) != 3 for r in ranks):
    sys.exit("moe_hf_torch: FAIL: the DDP %d reference recorded no routing of 3 steps on every rank" % N)
run = {"scheme": "dp", "unit": "model", "world": N,
       "routing": {"blocks": rt["blocks"], "experts": rt["experts"],
                   "tokens_per_expert": [r["routing"]["steps"] for r in ranks]}}
json.dump({"format": "zerosim-measured/1", "config": dict(seq=16, batch=2), "runs": [run]}, open(sys.argv[3], "w"))
PY
	ddp_opts=$(echo "$torch_opts" | sed 's/--wrapper none/--wrapper ddp/;s/--world 1/--world '"$1"'/')
	# shellcheck disable=SC2086
	"$zerosim" theory --model "$cfg" --seq 16 --batch 2 $ddp_opts \
		--routing "$tmp/routing-$tag.json" --out "$tmp/t-$tag.json" 2>"$tmp/err" ||
		{ fail "$tag: theory: $(cat "$tmp/err")"; return; }
	# shellcheck disable=SC2086
	OPENBLAS_NUM_THREADS=1 "$zerosim" measure -q --model "$cfg" --seq 16 --batch 2 $ddp_opts \
		--out "$tmp/m-$tag.json" 2>"$tmp/err" || { fail "$tag: measure: $(cat "$tmp/err")"; return; }
	# shellcheck disable=SC2086
	"$zerosim" theory --model "$cfg" --seq 16 --batch 2 $ddp_opts \
		--routing "$tmp/m-$tag.json" --out "$tmp/tm-$tag.json" 2>"$tmp/err" ||
		{ fail "$tag: theory --routing (measure's): $(cat "$tmp/err")"; return; }
	"$top/tests/json_agree" "$tmp/m-$tag.json" "$tmp/tm-$tag.json" >"$tmp/out" 2>&1 ||
		{ fail "$tag: theory --routing (measure's) against measure: $(cat "$tmp/out")"; return; }
	python3 - "$tmp/ref-$tag.json" "$tmp/t-$tag.json" "$tmp/m-$tag.json" "$tmp/tm-$tag.json" "$1" "$tmp" <<'PY' || status=1
import json, sys
sys.path.insert(0, sys.argv[6])
from ddp_rank import ranks_check
ref, t, m, tm = (json.load(open(f)) for f in sys.argv[1:5])
N, bad = int(sys.argv[5]), []
per = t["rows"][0]["schedule"]["per_rank"]
peaks = ranks_check(ref, per, bad)
if len(set(peaks)) == 1:
    bad.append("the ranks' peaks are alike (%d): the row cannot tell each rank's routing from rank 0's" % peaks[0])
mr, ts = m["runs"][0]["per_rank"], tm["rows"][0]["schedule"]["per_rank"]
if mr.get("marks") != ts.get("marks") or len(mr.get("marks") or []) != N:
    bad.append("measure's every rank's marks are not the theory's under its routing")
if len(set(mr["peak_bytes"])) == 1:
    bad.append("measure's ranks' peaks are alike: the row cannot tell")
for b in bad:
    print("moe_hf_torch: FAIL: DDP N = %d: %s" % (N, b), file=sys.stderr)
if not bad:
    print("ok: DDP N = %d: each rank's theory equals PyTorch's rank (between steps %d, peaks %s, %d marks each); "
          "measure's ranks (peaks %s) its theory's" % (N, per["resident_bytes"][0], peaks, len(per["marks"][0]),
                                                         mr["peak_bytes"]))
sys.exit(1 if bad else 0)
PY
}

# refused: one line on stderr, exit 2 (or $want_rc), nothing written (refuse LABEL PATTERN COMMAND...)
refuse() {
	label=$1 pattern=$2
	shift 2
	rm -f "$tmp/x.json" # a row that failed by writing it fails alone
	"$@" --out "$tmp/x.json" 2>"$tmp/err"
	rc=$?
	if [ $rc -ne "${want_rc:-2}" ] || ! grep -q -- "$pattern" "$tmp/err" || [ "$(wc -l <"$tmp/err")" -ne 1 ] ||
		[ -e "$tmp/x.json" ]; then
		fail "$label: exit $rc, '$(cat "$tmp/err")' (want ${want_rc:-2} and '$pattern')"
	fi
}
if [ "$mode" = torch26 ]; then
	ddp 2
	[ $status -eq 0 ] && echo "$name: under PyTorch 2.6 the tiny mixtral's (B 2 T 16 under set_to_none and zeros, single and foreach Adam; B 1 T 8, an expert idle), qwen2_moe's and qwen3_moe's PyTorch step, with the auxiliary loss too, and the 512-wide mixtral's ranks under DDP N = 2 equal 2.6's allocator to the byte, every mark and event; the mixtral under --grad-accum 2 and qwen3_moe under --grad-accum 3 (set_to_none) every mark"
	exit $status
fi
ddp 2
ddp 3
# fsdp N CONFIG B T [IDLE]: FSDP N over gloo (--wrapper fsdp --schemes
# zero3; hf_torch.py --fsdp N: FULL_SHARD, transformer_auto_wrap_policy on
# the decoder layer, so the router and the experts (and qwen2_moe's shared
# expert) are flattened into their block's unit, as accelerate's
# FSDP_AUTO_WRAP_POLICY TRANSFORMER_BASED_WRAP does over the model's
# _no_split_modules, ["MixtralDecoderLayer"]; every rank's allocator and
# routing in its "ranks"): the theory given every rank's routing equals
# each rank's bytes between steps, peak and every mark; IDLE: the steady
# step leaves an expert without a token on some rank (its view unused:
# SplitWithSizesBackward's zeros in its slot of the flat gradient,
# util/ag_fsdp.c post_backward; the ranks' figures alike there: the row
# holds the zeros); else the ranks' peaks apart (the 512-wide mixtral at
# B 4 T 32: each rank's peak in a block's backward by its own busiest
# expert; at B 2 T 16 the peak falls where the ranks agree) and measure
# --wrapper fsdp equals the theory given its own routing, every rank's row
# and marks, its ranks' peaks apart
fsdp() {
	tag=fsdp$1-$(basename "$2" .json)-$3-$4
	hf_get "$tag"
	python3 - "$tmp/ref-$tag.json" "$1" "$tmp/routing-$tag.json" "$3" "$4" "${5:-}" <<'PY' || { fail "$tag: the routing"; return; }
import json, sys
ref, N, B, T = json.load(open(sys.argv[1])), int(sys.argv[2]), int(sys.argv[4]), int(sys.argv[5])
rt, ranks = ref.get("routing"), ref.get("ranks") or []
if ref.get("fsdp") != N or not rt or len(ranks) != N or any(len(r["routing"]["steps"]) != 3 for r in ranks):
    sys.exit("moe_hf_torch: FAIL: the FSDP %d reference recorded no routing of 3 steps on every rank" % N)
idle = any(0 in c for r in ranks for c in r["routing"]["steps"][-1])
if idle != bool(sys.argv[6]):
    sys.exit("moe_hf_torch: FAIL: FSDP %d B %d T %d: the steady step %s an expert idle on some rank" %
             (N, B, T, "leaves" if idle else "no longer leaves"))
run = {"scheme": "zero3", "unit": "model", "world": N,
       "routing": {"blocks": rt["blocks"], "experts": rt["experts"],
                   "tokens_per_expert": [r["routing"]["steps"] for r in ranks]}}
json.dump({"format": "zerosim-measured/1", "config": dict(seq=T, batch=B), "runs": [run]}, open(sys.argv[3], "w"))
PY
	fopts=$(echo "$torch_opts" | sed 's/--wrapper none/--wrapper fsdp/;s/--world 1/--world '"$1"'/;s/--schemes dp/--schemes zero3/')
	# shellcheck disable=SC2086
	"$zerosim" theory --model "$2" --seq "$4" --batch "$3" $fopts \
		--routing "$tmp/routing-$tag.json" --out "$tmp/t-$tag.json" 2>"$tmp/err" ||
		{ fail "$tag: theory: $(cat "$tmp/err")"; return; }
	if [ -z "${5:-}" ]; then
		# shellcheck disable=SC2086
		OPENBLAS_NUM_THREADS=1 "$zerosim" measure -q --model "$2" --seq "$4" --batch "$3" $fopts \
			--out "$tmp/m-$tag.json" 2>"$tmp/err" || { fail "$tag: measure: $(cat "$tmp/err")"; return; }
		# shellcheck disable=SC2086
		"$zerosim" theory --model "$2" --seq "$4" --batch "$3" $fopts \
			--routing "$tmp/m-$tag.json" --out "$tmp/tm-$tag.json" 2>"$tmp/err" ||
			{ fail "$tag: theory --routing (measure's): $(cat "$tmp/err")"; return; }
		"$top/tests/json_agree" "$tmp/m-$tag.json" "$tmp/tm-$tag.json" >"$tmp/out" 2>&1 ||
			{ fail "$tag: theory --routing (measure's) against measure: $(cat "$tmp/out")"; return; }
	fi
	python3 - "$tmp/ref-$tag.json" "$tmp/t-$tag.json" "$tmp/m-$tag.json" "$tmp/tm-$tag.json" "$1" "$tmp" "$tag" <<'PY' || status=1
import json, os, sys
sys.path.insert(0, sys.argv[6])
from ddp_rank import ranks_check
ref, t = (json.load(open(f)) for f in sys.argv[1:3])
N, tag, bad = int(sys.argv[5]), sys.argv[7], []
per = t["rows"][0]["schedule"]["per_rank"]
peaks = ranks_check(ref, per, bad)
said = ""
if os.path.exists(sys.argv[3]):
    m, tm = json.load(open(sys.argv[3])), json.load(open(sys.argv[4]))
    mr, ts = m["runs"][0]["per_rank"], tm["rows"][0]["schedule"]["per_rank"]
    if mr.get("marks") != ts.get("marks") or len(mr.get("marks") or []) != N:
        bad.append("measure's every rank's marks are not the theory's under its routing")
    if len(set(peaks)) == 1:
        bad.append("the ranks' peaks are alike (%d): the row cannot tell each rank's routing from rank 0's" % peaks[0])
    if len(set(mr["peak_bytes"])) == 1:
        bad.append("measure's ranks' peaks are alike: the row cannot tell")
    said = "; measure's ranks (peaks %s) its theory's" % mr["peak_bytes"]
for b in bad:
    print("moe_hf_torch: FAIL: %s: %s" % (tag, b), file=sys.stderr)
if not bad:
    print("ok: %s: each rank's theory equals PyTorch's FSDP rank (between steps %d, peaks %s, %d marks each)%s" %
          (tag, per["resident_bytes"][0], peaks, len(per["marks"][0]), said))
sys.exit(1 if bad else 0)
PY
}
fsdp 2 "$tmp/wide.json" 4 32
fsdp 2 "$tmp/config.json" 1 9 idle
# a sweep of N = 2 and 3: each rank's own routing is followed for one N a
# sweep, so N = 3's ranks routing otherwise than N = 2's rank 0 is refused
python3 - "$tmp/routing-ddp2.json" "$tmp/routing-ddp3.json" "$tmp/ddp23.json" <<'PY' || exit 99
import json, sys
f = json.load(open(sys.argv[1]))
f["runs"] += json.load(open(sys.argv[2]))["runs"]
json.dump(f, open(sys.argv[3], "w"))
PY
# shellcheck disable=SC2086
refuse "ddp 2,3: ranks routing apart" "rank [0-9] at N = [23] routes otherwise than rank 0 at N = 2" \
	"$zerosim" theory --model "$tmp/wide.json" --seq 16 --batch 2 $(echo "$torch_opts" | sed 's/--wrapper none/--wrapper ddp/;s/--world 1/--world 2,3/') \
	--routing "$tmp/ddp23.json"
# bf16 autocast is described for the three mixtures on 1.13's plain loop:
# 2.6's refused by name
prec=amp-bf16
# shellcheck disable=SC2046
refuse "2.6's autocast" "the PyTorch step of a mixture (mixtral) with autocast under 2.6 (not compared yet" \
	"$zerosim" theory --model "$tmp/config.json" --seq 16 --batch 2 $(opts | sed 's/--torch-version 1.13/--torch-version 2.6/') \
	--routing "$tmp/routing-2-16amp-bf16.json"
prec=fp32
# LoRA with an adapter inside the mixture block (the router, an expert,
# qwen2_moe's shared expert or its gate): refused by name
for lt in w1 all-linear; do
	# shellcheck disable=SC2086
	refuse "--lora-targets $lt" "--lora-targets $lt: model.layers.0.block_sparse_moe.experts.0.w1 is in the mixture block: an adapter on the router or an expert is not described yet" \
		"$zerosim" theory --model "$tmp/config.json" --seq 16 --batch 2 $torch_opts --lora-r 4 --lora-targets $lt \
		--routing "$tmp/routing-2-16.json"
done
# shellcheck disable=SC2086
refuse "--lora-targets shared_expert_gate" "model.layers.0.mlp.shared_expert_gate is in the mixture block" \
	"$zerosim" theory --model "$tmp/qwen_moe.json" --seq 16 --batch 2 $torch_opts --lora-r 4 \
	--lora-targets shared_expert_gate --routing "$tmp/routing-2-16-qwen_moe.json"
prec=fp32
ref 1 2
# shellcheck disable=SC2086
refuse "first-step starved expert" "block 0's expert [0-9] gets no token in the run's first step" \
	"$zerosim" theory --model "$tmp/config.json" --seq 2 --batch 1 $torch_opts --routing "$tmp/routing-1-2.json"
# under DDP an expert without a token in any step (find_unused_parameters
# False: 1.13 raises "Expected to have finished reduction in the prior
# iteration" at the next step)
python3 - "$tmp/routing-ddp2.json" "$tmp/starved-ddp2.json" <<'PY' || exit 99
import json, sys
f = json.load(open(sys.argv[1]))
c, B, T = f["runs"][0]["routing"]["tokens_per_expert"][1][1][0], 2, 16
for e in range(1, len(c)):  # expert 0's tokens to the others, each at most B·T
    give = min(c[0], B * T - c[e])
    c[e], c[0] = c[e] + give, c[0] - give
if c[0]:
    sys.exit("moe_hf_torch: no room to starve expert 0 in %s" % c)
json.dump(f, open(sys.argv[2], "w"))
PY
# shellcheck disable=SC2086
refuse "--wrapper ddp, an expert idle" "expert 0 of block 0 on rank 1 at step 2 of dp N = 2 --unit model gets no token: under --wrapper ddp (find_unused_parameters False)" \
	"$zerosim" theory --model "$tmp/wide.json" --seq 16 --batch 2 $(echo "$torch_opts" | sed 's/--wrapper none/--wrapper ddp/;s/--world 1/--world 2/') \
	--routing "$tmp/starved-ddp2.json"
# the auxiliary load-balancing loss (output_router_logits true; qwen's
# router_aux_loss_coef 0.02): the tiny mixtral, qwen2_moe and qwen3_moe at
# B 2 T 16 and the 512-wide mixtral under DDP N = 2, as the rows above
for q in config qwen_moe qwen3_moe; do
	ref 2 16 "$tmp/$q-aux.json"
	agree 2 16 "$tmp/$q-aux.json"
done
ddp 2 "$tmp/wide-aux.json" -aux

# unused B T: DDP N = 2 with find_unused_parameters=True (--ddp-find-unused
# on; hf_torch.py --ddp 2 --ddp-find-unused --trace, every rank's
# allocator, routing and clean step) on the tiny mixtral at B x T, whose
# steady step (the third) leaves an expert idle on one rank and used on
# the other (at B 1 T 4 block 1's experts 0 and 2 on rank 0, 1 and 3 on
# rank 1; the first step leaves block 0's expert 0 idle on rank 0, its
# .grad made at finalize from the bucket): the reducer marks the idle
# expert's parameters ready at the first hook (util/ag_ddp.c). The theory
# given every rank's routing equals each rank's bytes between steps, peak
# and every mark, and util/ag_ddp.c's step (tests/ag_events, wrapper=ddp)
# each rank's clean step, allocation for allocation. Then refused by name:
# measure with such a routing, and an expert idle on every rank in the
# first step (its .grad stays None, Adam skips it: hf_torch.py at B 1 T 2,
# block 0's expert 3, holds 221,184 B less between steps, not described)
unused() {
	tag=unused-$1-$2
	hf_get "$tag"
	python3 - "$tmp/ref-$tag.json" "$tmp/routing-$tag.json" "$1" "$2" <<'PY' || { fail "$tag: the routing"; return; }
import json, sys
ref, B, T = json.load(open(sys.argv[1])), int(sys.argv[3]), int(sys.argv[4])
rt, ranks = ref.get("routing"), ref.get("ranks") or []
if ref.get("ddp") != 2 or not rt or len(ranks) != 2 or any(len(r["routing"]["steps"]) != 3 for r in ranks):
    sys.exit("moe_hf_torch: FAIL: the DDP 2 reference recorded no routing of 3 steps on every rank")
c = [r["routing"]["steps"] for r in ranks]  # [rank][step][block][expert]
# the case's point: in the steady step an expert idle on one rank is used
# on the other, and another is idle on both (used by some rank in the first)
LE = [(l, e) for l in range(rt["blocks"]) for e in range(rt["experts"])]
one = [x for x in LE if sorted(c[k][-1][x[0]][x[1]] == 0 for k in range(2)) == [False, True]]
both = [x for x in LE if all(c[k][-1][x[0]][x[1]] == 0 for k in range(2)) and any(c[k][0][x[0]][x[1]] for k in range(2))]
if not one or not both:
    sys.exit("moe_hf_torch: FAIL: B %d T %d: the steady step leaves no expert idle on %s any more (%s)"
             % (B, T, "one rank only" if not one else "both ranks", c))
run = {"scheme": "dp", "unit": "model", "world": 2,
       "routing": {"blocks": rt["blocks"], "experts": rt["experts"], "tokens_per_expert": c}}
json.dump({"format": "zerosim-measured/1", "config": dict(seq=T, batch=B), "runs": [run]}, open(sys.argv[2], "w"))
PY
	uopts=$(echo "$torch_opts" | sed 's/--wrapper none/--wrapper ddp --ddp-find-unused on/;s/--world 1/--world 2/')
	# shellcheck disable=SC2086
	"$zerosim" theory --model "$tmp/config.json" --seq "$2" --batch "$1" $uopts \
		--routing "$tmp/routing-$tag.json" --out "$tmp/t-$tag.json" 2>"$tmp/err" ||
		{ fail "$tag: theory: $(cat "$tmp/err")"; return; }
	for k in 0 1; do
		counts=$(python3 -c 'import json, sys
print(" ".join(str(n) for b in json.load(open(sys.argv[1]))["ranks"][int(sys.argv[2])]["routing"]["steps"][-1] for n in b))' \
			"$tmp/ref-$tag.json" $k)
		# shellcheck disable=SC2086
		"${ZS_BUILDDIR:-.}/tests/ag_events" "$tmp/config.json" "$1" "$2" torch-version=1.13 torch-device=cpu \
			zero-grad=zeros optimizer-impl=single precision=fp32 wrapper=ddp ddp-find-unused=on -- $counts \
			>"$tmp/ev-$tag.$k" || { fail "$tag: tests/ag_events rank $k"; return; }
	done
	python3 - "$tmp/ref-$tag.json" "$tmp/t-$tag.json" "$tmp/ev-$tag" "$tmp/trace-$tag" "$tag" "$tmp" <<'PY' || status=1
import json, sys
sys.path.insert(0, sys.argv[6])
from ddp_rank import rank_check
ref, t = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
ev, trace, tag, bad = sys.argv[3], sys.argv[4], sys.argv[5], []
per = t["rows"][0]["schedule"]["per_rank"]
for k, r in enumerate(ref["ranks"]):
    peak = max([r["peak"]] + r["step_peaks"][1:])  # the run's after its first step
    rank_check(r, per, k, peak, bad)
    z, p = open("%s.%d" % (ev, k)).read().split(), open("%s.rank%d.clean" % (trace, k)).read().split()
    at = next((i for i, (a, b) in enumerate(zip(z, p)) if a != b), None)
    if at is not None or len(z) != len(p) or not z:
        at = min(len(z), len(p)) if at is None else at
        bad.append("rank %d: zerosim's step list departs from 1.13's clean step at event %d of %d (zerosim %s, "
                   "PyTorch %s)" % (k, at, len(p), z[at:at + 3], p[at:at + 3]))
for b in bad:
    print("moe_hf_torch: FAIL: %s: %s" % (tag, b), file=sys.stderr)
if not bad:
    print("ok: %s: DDP N = 2, find_unused_parameters, experts idle on one rank and on both: each rank's theory equals 1.13's "
          "(between steps %s, peaks %s, %d marks; %s allocations and frees one for one)"
          % (tag, per["resident_bytes"], per["peak_bytes"], len(per["marks"][0]),
             [len(open("%s.%d" % (ev, k)).read().split()) for k in range(2)]))
sys.exit(1 if bad else 0)
PY
	# (a run-time refusal, found by running the step: exit 1; measure's own
	# routing at B 1 T 4 leaves block 0's expert 1 idle on rank 0)
	# shellcheck disable=SC2086
	want_rc=1 refuse "$tag: measure" "under --ddp-find-unused measure does not run an expert idle on a rank yet" \
		"$zerosim" measure -q --model "$tmp/config.json" --seq 4 --batch 1 $uopts
	# every rank's step-1 tokens of block 0's expert 0 given to the others: idle everywhere in the first step
	python3 - "$tmp/routing-$tag.json" "$tmp/idle-$tag.json" "$1" "$2" <<'PY' || exit 99
import json, sys
f, BT = json.load(open(sys.argv[1])), int(sys.argv[3]) * int(sys.argv[4])
for r in f["runs"][0]["routing"]["tokens_per_expert"]:
    c = r[0][0]
    for e in range(1, len(c)):
        give = min(c[0], BT - c[e])
        c[e], c[0] = c[e] + give, c[0] - give
    if c[0]:
        sys.exit("moe_hf_torch: no room to idle expert 0 in %s" % c)
json.dump(f, open(sys.argv[2], "w"))
PY
	# shellcheck disable=SC2086
	refuse "$tag: idle on every rank in step 1" "block 0's expert 0 gets no token on any rank in the run's first step: under --ddp-find-unused the reducer leaves its .grad None" \
		"$zerosim" theory --model "$tmp/config.json" --seq "$2" --batch "$1" $uopts --routing "$tmp/idle-$tag.json"
	# output_router_logits true: _DDPSink clones the router logits and the aux loss too (not placed)
	sed 's/}[[:space:]]*$/, "output_router_logits": true}/' "$tmp/config.json" >"$tmp/unused-aux.json" || exit 99
	# shellcheck disable=SC2086
	refuse "$tag: output_router_logits" "with output_router_logits true (_DDPSink's clones of the router logits and the aux loss): not built yet" \
		"$zerosim" theory --model "$tmp/unused-aux.json" --seq "$2" --batch "$1" $uopts --routing "$tmp/routing-$tag.json"
}
unused 1 9
# measure under --ddp-find-unused on of a mixture whose every expert gets
# a token on every rank (the tiny mixtral at B 2 T 16, N = 2): each rank's
# row and marks equal the theory given its routing (main refused it)
measure_agree find-unused unused "measure of the mixtral at N = 2 (B 2 T 16)" \
	"$(echo "$torch_opts" | sed 's/--wrapper none/--wrapper ddp --ddp-find-unused on/;s/--world 1/--world 2/')"
[ $status -eq 0 ] && echo "$name: the tiny mixtral's (B 2 T 16, single and foreach Adam, and under bf16 autocast; B 1 T 8, an expert idle), qwen2_moe's and qwen3_moe's (B 2 T 16) PyTorch step, and the 512-wide mixtral's ranks under DDP N = 2 and 3, equal 1.13's allocator to the byte, with the auxiliary loss too (the three at B 2 T 16, the 512-wide one under DDP N = 2), and the tiny mixtral's ranks under DDP N = 2 with find_unused_parameters (B 1 T 9: experts idle on one rank and on both); qwen3_moe under bf16 autocast; under --grad-accum 2 and 3 (each micro-step its own routing, an expert idle in one micro-step and used in another, DDP N = 2 with and without no_sync); qwen2_moe under bf16 autocast; --freeze (mixtral's routers, qwen2_moe's experts and shared expert) and LoRA on q_proj,v_proj; the 512-wide mixtral's and the tiny mixtral's ranks under FSDP N = 2 (B 1 T 9: experts idle); the refusals hold"
exit $status

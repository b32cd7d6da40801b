#!/bin/sh
# moe_measure — issue #25's mixture measured under the PyTorch step
# (--framework torch --wrapper none): engine/ag_exec.c runs util/
# autograd.c's mixture block (topk, one_hot, nonzero, index, index_add_,
# _index_put_, sigmoid ...) on the tiny mixtral of tests/moe_lib.sh, the
# tiny qwen2_moe of tests/qwen_moe.sh (shared expert, top 2 of 4
# unnormalised) and qwen3_moe of tests/qwen3_moe.sh (top 2 of 4
# renormalised), fp32, 1.13, zero_grad zeros, 3 steps:
#
#  - the run records its routing (each step's tokens per expert a block,
#    B·T·k assignments each) and the theory given it back (--routing FILE)
#    equals the measurement to the byte (resident, peak, every category;
#    tests/json_agree), at B 2 T 16 and B 1 T 8 (single Adam) and B 2 T 16
#    (foreach); the same file with one token moved between two experts of
#    the last step departs from it (the check can fail);
#  - the losses equal zerosim's fused engine's (--framework paper, itself
#    held to PyTorch's MixtralForCausalLM and Qwen2MoeForCausalLM by
#    tests/moe_model_torch.sh) at --seq T − 1 within 1e-5 relative, every
#    step (Hugging Face's shifted loss scores T − 1 tokens of T:
#    tests/ag_exec_losses.sh);
#  - under --wrapper ddp --world 2 and 3 (the 512-wide mixtral, each rank
#    its own batch, its routing found on it and recorded per rank): the
#    theory given that file (each rank its own lists) equals every rank's
#    resident, peak and marks; rank 1's last block moved departs; the
#    starved-expert check reads only the runs the sweep takes;
#  - under --grad-accum K (the plain loop, each micro-step its own
#    routing, "micro_steps" K in the file): the theory given measure's
#    file equals it (the 512-wide mixtral at K = 2, whose file with the
#    last micro-step's last block moved departs; the tiny mixtral at K = 3
#    under set_to_none; qwen2_moe at K = 2);
#  - refused by name, one line, exit 2 or 1, nothing written: a first step
#    that leaves an expert without a token (B 1 T 2), under --wrapper ddp
#    an expert idle on a rank in any step (B 1 T 6 seed 7: rank 1's step
#    2), --recompute full, a LoRA adapter inside the block (--lora-targets
#    w1), --freeze under --wrapper ddp, --grad-accum with
#    output_router_logits true;
#  - the tiny mixtral at B 2 T 16 and B 1 T 8 under zero_grad
#    set_to_none (1.13) and under PyTorch 2.6 (set_to_none and zeros):
#    the theory under the measured routing equals the measurement;
#  - qwen2_moe under bf16 autocast, the mixtral with its routers frozen,
#    qwen2_moe with block 0's experts frozen, the mixtral with LoRA on
#    q_proj,v_proj (B 2 T 16): the same.
#
# About 6 s of CPU. Exit 0 pass, 1 fail, 77 skip (no python3), 99 hard error.
name=moe_measure
needs="${ZS_BUILDDIR:-.}/tests/json_agree"
src=${srcdir:-.}
. "$src/tests/moe_lib.sh"
torch_opts="--framework torch --wrapper none --torch-version 1.13 --torch-device cpu --zero-grad zeros
	--precision fp32 --world 1 --schemes dp --steps 3"
. "$src/tests/moe_configs.sh"
moe_configs "$tmp" && cp "$tmp/qwen2_moe.json" "$tmp/qwen_moe.json"

# agree CONFIG B T IMPL [moved]: measure, the routing it records, the
# theory under it (and, with "moved", under it with the last step's last
# block all on k experts: a peak the measure did not reach)
# (under acc: M micro-steps a step, zero_grad $zg, $xo more options)
M=1 zg=zeros xo=
agree() {
	cfg=$1 tag=$(basename "$1" .json)-$2-$3-$4
	[ "$M" = 1 ] || tag=acc-$tag-k$M-$zg
	opts="$(echo "$torch_opts" | sed "s/--zero-grad zeros/--zero-grad $zg/") $xo"
	# shellcheck disable=SC2086
	OPENBLAS_NUM_THREADS=1 "$zerosim" measure -q --model "$cfg" --batch "$2" --seq "$3" $opts \
		--optimizer-impl "$4" --out "$tmp/m-$tag.json" 2>"$tmp/err" ||
		{ fail "$tag: measure: $(cat "$tmp/err")"; return; }
	python3 - "$tmp/m-$tag.json" "$cfg" "$2" "$3" "$tmp/moved-$tag.json" "$M" <<'PY' || { fail "$tag: the routing"; return; }
import json, sys
m, cfg = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
B, T, M = int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[6])
E = cfg.get("num_experts", cfg.get("num_local_experts"))
K, L = cfg["num_experts_per_tok"], cfg["num_hidden_layers"]
rt = m["runs"][0]["routing"]
steps = rt["tokens_per_expert"][0]
bad = [(s, l, c) for s, st in enumerate(steps) for l, c in enumerate(st) if len(c) != E or sum(c) != B * T * K]
if rt["blocks"] != L or rt.get("micro_steps", 1) != M or any(len(st) != M * L for st in steps) or \
        rt["experts"] != E or len(steps) != 3 or bad:
    sys.exit("moe_measure: FAIL: the recorded routing is not 3 steps x %d micro-steps x %d blocks of %d "
             "assignments over %d experts: %s" % (M, L, B * T * K, E, bad or rt))
steps[-1][-1] = [B * T if e < K else 0 for e in range(E)]
json.dump(m, open(sys.argv[5], "w"))
PY
	for r in m ${5:-}; do
		# shellcheck disable=SC2086
		"$zerosim" theory --model "$cfg" --batch "$2" --seq "$3" $opts --optimizer-impl "$4" \
			--routing "$tmp/$r-$tag.json" --out "$tmp/t-$r-$tag.json" 2>"$tmp/err" ||
			{ fail "$tag: theory --routing ($r): $(cat "$tmp/err")"; return; }
		"$top/tests/json_agree" "$tmp/m-$tag.json" "$tmp/t-$r-$tag.json" >"$tmp/out" 2>&1
		case $r:$? in
		m:0) echo "ok: $tag: theory --routing (measure's own) against measure: $(head -1 "$tmp/out")" ;;
		moved:1) echo "ok: $tag: the last block on k experts departs: $(head -1 "$tmp/out")" ;;
		*) fail "$tag: theory --routing ($r) against measure: $(cat "$tmp/out")" ;;
		esac
	done
}

# losses CONFIG B T: the plain loop at T against the fused engine at T − 1
losses() {
	common="--model $1 --world 1 --schemes dp --precision fp32 --batch $2 --steps 3"
	# shellcheck disable=SC2086
	"$zerosim" measure -q $common $torch_opts --optimizer-impl single --seq "$3" --out "$tmp/a.json" &&
		"$zerosim" measure -q $common --seq $(($3 - 1)) --out "$tmp/b.json" || { fail "$1: losses: a run failed"; return; }
	python3 - "$tmp/a.json" "$tmp/b.json" "$(basename "$1" .json) B $2 T $3" <<'PY' || status=1
import json, sys
a, b = (json.load(open(f))["runs"][0]["losses"] for f in sys.argv[1:3])
bad = len(a) != 3 or len(b) != 3 or any(abs(x - y) > 1e-5 * abs(y) for x, y in zip(a, b))
print("%s: %s: plain loop %s, fused engine %s" % ("FAIL" if bad else "ok", sys.argv[3], a, b),
      file=sys.stderr if bad else sys.stdout)
sys.exit(1 if bad else 0)
PY
}

agree "$tmp/config.json" 2 16 single
agree "$tmp/config.json" 1 8 single
agree "$tmp/config.json" 2 16 foreach
sed 's/"intermediate_size": 96/"intermediate_size": 512/' "$tmp/config.json" >"$tmp/wide.json"
agree "$tmp/wide.json" 2 16 single moved
# ddp N: --wrapper ddp --world N of the 512-wide mixtral, each rank its
# own batch and routing (found on it): the theory given the run's routing
# (each rank its own lists) equals every rank's row (resident, peak) and
# marks; the same file with rank 1's last step's last block on one expert
# B·T tokens (its busiest) departs
ddp() {
	opts=$(echo "$torch_opts" | sed 's/--wrapper none/--wrapper ddp/;s/--world 1/--world '"$1"'/')
	# shellcheck disable=SC2086
	OPENBLAS_NUM_THREADS=1 "$zerosim" measure -q --model "$tmp/wide.json" --batch 2 --seq 16 $opts \
		--optimizer-impl single --out "$tmp/m-ddp$1.json" 2>"$tmp/err" || { fail "ddp $1: measure: $(cat "$tmp/err")"; return; }
	python3 - "$tmp/m-ddp$1.json" "$tmp/moved-ddp$1.json" <<'PY' || { fail "ddp $1: the routing"; return; }
import json, sys
m = json.load(open(sys.argv[1]))
ranks = m["runs"][0]["routing"]["tokens_per_expert"]
if len(ranks) != m["runs"][0]["world"] or ranks[0] == ranks[1]:
    sys.exit("moe_measure: FAIL: not every rank's own routing recorded: %s" % ranks)
c, BT = ranks[1][-1][-1], 32  # B 2 T 16: B·T on one expert, one token on each but two (none idle)
ranks[1][-1][-1] = [BT, sum(c) - BT - (len(c) - 2)] + [1] * (len(c) - 2)
json.dump(m, open(sys.argv[2], "w"))
PY
	for r in m moved; do
		# shellcheck disable=SC2086
		"$zerosim" theory --model "$tmp/wide.json" --batch 2 --seq 16 $opts --optimizer-impl single \
			--routing "$tmp/$r-ddp$1.json" --out "$tmp/t-$r-ddp$1.json" 2>"$tmp/err" ||
			{ fail "ddp $1: theory --routing ($r): $(cat "$tmp/err")"; return; }
		"$top/tests/json_agree" "$tmp/m-ddp$1.json" "$tmp/t-$r-ddp$1.json" >"$tmp/out" 2>&1
		case $r:$? in
		m:0) python3 -c 'import json, sys
m, t = (json.load(open(f)) for f in sys.argv[1:3])
pm, pt = m["runs"][0]["per_rank"], t["rows"][0]["schedule"]["per_rank"]
sys.exit(0 if pm.get("marks") == pt.get("marks") and len(pm["marks"]) == m["runs"][0]["world"] else 1)' \
			"$tmp/m-ddp$1.json" "$tmp/t-m-ddp$1.json" || { fail "ddp $1: every rank's marks are not the theory's"; return; }
			echo "ok: ddp $1: theory --routing (measure's own, each rank's) against measure: $(head -1 "$tmp/out")" ;;
		moved:1) echo "ok: ddp $1: rank 1's last block moved departs: $(head -1 "$tmp/out")" ;;
		*) fail "ddp $1: theory --routing ($r) against measure: $(cat "$tmp/out")" ;;
		esac
	done
}
ddp 2
ddp 3
# the starved-expert check reads the runs the sweep takes: N = 2's file
# with an N = 3 run whose rank 1 starves expert 0 of block 0 at step 2 is
# taken by --world 2 (refused before, every run read) and refused by
# --world 3
python3 - "$tmp/m-ddp2.json" "$tmp/m-ddp3.json" "$tmp/ddp2-starved3.json" <<'PY' || exit 99
import json, sys
f, g = (json.load(open(x)) for x in sys.argv[1:3])
c = g["runs"][0]["routing"]["tokens_per_expert"][1][1][0]
for e in range(1, len(c)):  # expert 0's tokens to the others, each at most B·T = 32
    give = min(c[0], 32 - c[e])
    c[e], c[0] = c[e] + give, c[0] - give
if c[0]:
    sys.exit("moe_measure: no room to starve expert 0 in %s" % c)
f["runs"] += g["runs"]
json.dump(f, open(sys.argv[3], "w"))
PY
for n in 2 3; do
	# shellcheck disable=SC2086
	"$zerosim" theory --model "$tmp/wide.json" --batch 2 --seq 16 --optimizer-impl single \
		$(echo "$torch_opts" | sed 's/--wrapper none/--wrapper ddp/;s/--world 1/--world '"$n"'/') \
		--routing "$tmp/ddp2-starved3.json" --out "$tmp/t-starved.json" 2>"$tmp/err"
	case $n:$? in
	2:0) "$top/tests/json_agree" "$tmp/m-ddp2.json" "$tmp/t-starved.json" >"$tmp/out" 2>&1 &&
		echo "ok: ddp 2 under a file whose N = 3 run starves an expert: $(head -1 "$tmp/out")" ||
		fail "ddp 2 under a file whose N = 3 run starves an expert: $(cat "$tmp/out")" ;;
	3:2) grep -q "expert 0 of block 0 on rank 1 at step 2 of dp N = 3 --unit [a-z]* gets no token" "$tmp/err" &&
		echo "ok: refused: ddp 3: $(cat "$tmp/err")" || fail "ddp 3, expert starved: $(cat "$tmp/err")" ;;
	*) fail "ddp $n under a file whose N = 3 run starves an expert: $(cat "$tmp/err")" ;;
	esac
done
agree "$tmp/qwen_moe.json" 2 16 single
agree "$tmp/qwen3_moe.json" 2 16 single
# zero_grad(set_to_none=True) under 1.13, and PyTorch 2.6 (its default
# set_to_none, and zeros; eager attention): main refused both
base_opts=$torch_opts
for v in "1.13 none" "2.6 none" "2.6 zeros"; do
	# shellcheck disable=SC2086
	set -- $v
	torch_opts=$(echo "$base_opts" | sed "s/--torch-version 1.13/--torch-version $1 --attn eager/;s/--zero-grad zeros/--zero-grad $2/")
	agree "$tmp/config.json" 2 16 single
	agree "$tmp/config.json" 1 8 single
done
torch_opts=$base_opts
# acc CONFIG B T K ZG [moved]: agree under --grad-accum K (the plain
# loop) and zero_grad ZG: each micro-step routes its own micro-batch, measure
# records each step's K micro-steps' blocks ("micro_steps" K, micro-step
# major), and the theory given that file equals the measurement to the
# byte; with "moved" (the 512-wide mixtral, whose peak is a block's
# backward) the same file with the last micro-step's last block all on k
# experts departs (main refused --grad-accum for a mixture); $xo: more
# options
acc() {
	M=$4 zg=$5 xo0=$xo
	xo="$xo --grad-accum $4"
	agree "$1" "$2" "$3" single "${6:-}"
	M=1 zg=zeros xo=$xo0
}
# (seed 2: the default seed's steps idle other experts of the wide one in
# a micro-step, which measure's lists of one shape refuse)
xo="--seed 2"
acc "$tmp/wide.json" 2 16 2 zeros moved
xo=
acc "$tmp/config.json" 2 16 3 none
acc "$tmp/qwen_moe.json" 2 16 2 zeros
# qwen2_moe under bf16 autocast (its shared expert's casts), --freeze (the
# mixtral's routers; qwen2_moe's block 0's experts) and LoRA (q_proj,v_proj)
# on the plain loop: main refused them for a mixture
base_opts=$torch_opts
torch_opts=$(echo "$base_opts" | sed 's/--precision fp32/--precision amp-bf16/')
agree "$tmp/qwen_moe.json" 2 16 single
torch_opts=$base_opts
xo="--freeze re:block_sparse_moe.gate.weight"
agree "$tmp/config.json" 2 16 single
xo="--freeze re:layers.0.mlp.experts"
agree "$tmp/qwen_moe.json" 2 16 single
xo="--lora-r 4 --lora-targets q_proj,v_proj"
agree "$tmp/config.json" 2 16 single
xo=
losses "$tmp/config.json" 2 16
losses "$tmp/config.json" 1 8
losses "$tmp/qwen_moe.json" 2 16
losses "$tmp/qwen3_moe.json" 2 16

# refused: one line on stderr, exit RC, nothing written (refuse LABEL RC
# PATTERN SED-CHANGE-OF-THE-OPTIONS OPTIONS...)
refuse() {
	label=$1 want=$2 pattern=$3 change=$4
	shift 4
	# shellcheck disable=SC2086
	"$zerosim" measure -q --model "${rmodel:-$tmp/config.json}" $(echo "$torch_opts" | sed "$change") "$@" --out "$tmp/x.json" 2>"$tmp/err"
	rc=$?
	if [ $rc -ne "$want" ] || ! grep -q -- "$pattern" "$tmp/err" || [ "$(wc -l <"$tmp/err")" -ne 1 ] || [ -e "$tmp/x.json" ]; then
		fail "$label: exit $rc, '$(cat "$tmp/err")' (want $want and '$pattern')"
	else
		echo "ok: refused: $label: $(cat "$tmp/err")"
	fi
}
refuse "first-step starved expert" 1 "block [0-9]'s expert [0-9] gets no token in the run's first step" s/x/x/ --batch 1 --seq 2
# (an expert idle in one micro-step of step 1 and used in the other:
# step 1's list reshaped by the routing search, not an internal error;
# step 2 then idles others, which the lists of one shape refuse)
refuse "--grad-accum 2, step 1 reshaped, step 2 otherwise" 1 "step 2's routing leaves other experts without a token than step 1's (.*give more tokens" \
	s/x/x/ --batch 1 --seq 4 --grad-accum 2
# (rank 1's routing, found on it, idles an expert at step 2)
refuse "--wrapper ddp, an expert idle on a rank" 1 "expert 0 of block 1 on rank 1 at step 2 gets no token: under --wrapper ddp" \
	"s/--wrapper none/--wrapper ddp/;s/--world 1/--world 2/" --batch 1 --seq 6 --seed 7
refuse "--recompute full" 2 "--recompute full (give none)" s/x/x/ --batch 2 --seq 16 --recompute full
refuse "--lora-targets w1" 2 "--lora-targets w1: model.layers.0.block_sparse_moe.experts.0.w1 is in the mixture block" \
	s/x/x/ --batch 2 --seq 16 --lora-r 4 --lora-targets w1
refuse "--freeze under --wrapper ddp" 2 "not with --freeze or --lora-r outside --framework torch --wrapper none" \
	"s/--wrapper none/--wrapper ddp/;s/--world 1/--world 2/" --batch 2 --seq 16 --freeze embeddings
# a sparse block whose input requires no grad with some of its own
# parameters frozen: PyTorch 1.13 saves only what the trained ones need
# (mixtral, embeddings and block 0 frozen: 109,184 B under what the
# block's ops would save; an outside review's hf_torch.py run), the
# builder saves as if all were: refused by name; LoRA with block 0's
# adapters frozen is the same case
refuse "--freeze embeddings,blocks:0-0" 2 "a mixture's sparse block whose input requires no grad" \
	s/x/x/ --batch 2 --seq 16 --freeze embeddings,blocks:0-0
refuse "LoRA, block 0's adapters frozen" 2 "a mixture's sparse block whose input requires no grad" \
	s/x/x/ --batch 2 --seq 16 --lora-r 4 --lora-targets q_proj,v_proj --freeze blocks:0-0
# (the aux loss's own topk would count as a micro-step's block)
sed 's/}[[:space:]]*$/, "output_router_logits": true}/' "$tmp/config.json" >"$tmp/aux.json" || exit 99
rmodel=$tmp/aux.json
refuse "--grad-accum with output_router_logits true" 2 "with --grad-accum and output_router_logits true" s/x/x/ \
	--batch 2 --seq 16 --grad-accum 2
rmodel=
# 2.6's default attention in zerosim is SDPA: a mixture's is refused (not compared yet)
refuse "2.6's default --attn sdpa" 2 "--attn sdpa (2.6's default; give --attn eager)" \
	"s/--torch-version 1.13/--torch-version 2.6/" --batch 2 --seq 16
[ $status -eq 0 ] && echo "$name: the tiny mixtral's, qwen2_moe's and qwen3_moe's PyTorch step measured: the theory under the measured routing equals it to the byte, the losses the fused engine's; the refusals hold"
exit $status

#!/bin/sh
# ft_fsdp_lora — zerosim's --lora-r and --freeze under --wrapper fsdp
# (issue #23: LoRA under FSDP N = 2) against real PyTorch 1.13's
# FullyShardedDataParallel (tests/ft_torch.py --fsdp over gloo with
# tests/fsdp_torch.py's shims; FULL_SHARD, fp32 (autocast: below), Adam
# single-tensor):
#   - LoRA with PEFT's wrap policy (ft_torch.py's fsdp_wrap_peft, written
#     from peft/utils/other.py v0.20.0 fsdp_auto_wrap_policy: each lora_A
#     and lora_B a unit of its own inside its block's frozen unit; the
#     root frozen): llama q_proj,v_proj r 4 at K = 1 (zeros) and K = 2 with
#     no_sync() (set_to_none), gpt2 c_attn r 4 at K = 2 without no_sync()
#     (zeros);
#   - --lora-dropout 0.1 (llama r 4, K = 1); autocast (--precision
#     amp-bf16, ft_torch.py --amp bf16: torch.autocast around the
#     forward, no FSDP MixedPrecision): llama r 4, K = 1;
#   - --freeze blocks:0-0 on llama (transformer_auto_wrap_policy's units:
#     block 0's all frozen), K = 2 with no_sync(); gpt2 --freeze
#     blocks:1-1, K = 2 without no_sync(); and the root and block 0
#     frozen (block 0 then runs no backward), K = 1;
#   - SHARD_GRAD_OP (--schemes zero2, ft_torch.py --fsdp-strategy
#     shard_grad_op): LoRA llama K = 2 with no_sync() and gpt2 K = 2
#     without, --freeze blocks:0-0 on llama K = 2 with no_sync(), and the
#     frozen prefix (block 0 keeps its gathered copy for good);
#   - frozen adapters (--freeze with --lora-r): PEFT's lambda policy asks
#     requires_grad when FSDP wraps, so a frozen lora_A or lora_B is
#     flattened into its block's frozen unit: llama q,v r 4 with block 0's
#     adapters frozen (block 0 all frozen, over the frozen embeddings: no
#     backward), K = 2 with no_sync(); gpt2 c_attn r 4 with every lora_A
#     frozen (each lora_B a unit over it), K = 2 without, SHARD_GRAD_OP;
#   each: zerosim's theory and measure (both ranks) against PyTorch's
#   bytes between steps, the steady step's peak and every mark zerosim
#   names (tests/ft_cmp.py), and PyTorch's all-gathers and reduce-scatters
#   in the run's steps against measure's;
#   - the losses: zerosim's llama LoRA K = 2 no_sync run written as a case
#     (--write-case, the adapters as it started them), trained by
#     tests/ft_torch.py --fsdp --case (ft_lib.sh's ft_losses): each
#     step's loss (the mean over the ranks) within 1e-5 relative; and the
#     same case trained with block 0's adapters frozen against zerosim's
#     frozen run (the unfrozen run's case, given --freeze: the same start
#     checked by the first loss, bit for bit);
#   - --freeze embeddings on llama (the root's unit would mix the frozen
#     table and the trainable norm and head): zerosim refuses it (one line,
#     exit 2, nothing written), and so does PyTorch ("`FlatParameter`
#     requires uniform `requires_grad`").
# Every PyTorch run but the refusal's in one batch (tests/batch_torch.py:
# one python3, each case's two ranks spawned from it). About 84 s of CPU
# (3.5 minutes on 2 shared cores; seventeen PyTorch runs of two ranks).
#
# `tests/ft_fsdp_lora.sh torch26` (make check-torch26): six of the rows
# against PyTorch 2.6's FSDP (FSDP1, backward_prefetch None) in its Debian
# 13 root (ft_lib.sh's mode and ft_ref), where a frozen unit is resharded
# when its inputs' gradients are in (llama LoRA K = 1, --freeze
# blocks:0-0 K = 2 no_sync) and SHARD_GRAD_OP's (gpt2 LoRA K = 2, the
# frozen prefix), and the two frozen adapters' rows; not the refusals nor
# the losses. And two of its own: QLoRA (--quant-base nf4, bitsandbytes
# 0.47.0's Linear4bit written op by op in ft_torch.py, quant_storage
# float32), llama q_proj,v_proj K = 1 and gpt2 all-linear with double
# quantization, K = 2 no_sync; and loaded in bf16 (--load-dtype bf16),
# llama all-linear with double quantization K = 2 no_sync, and q_proj,
# v_proj under bf16 autocast (s51: about 5 s of CPU). And FSDP's
# use_orig_params=True (--fsdp-orig-params on, ft_torch.py's too): gpt2
# with each block's attention frozen (set_to_none) and llama with its
# attention and embeddings frozen (zeros), every rank held apart
# (tests/zero1_cmp.py: each rank's Adam state its shard's trained pieces),
# and the gpt2 run's losses (its case trained by PyTorch 2.6; about 20 s of
# CPU for the three); and with LoRA (s52: no PEFT policy, each block's unit
# its frozen base and its adapters, every adapter in rank 0's shard): llama
# q_proj,v_proj r 4 at K = 2 without no_sync() under zeros (rank 1 lets its
# sharded gradients go at each forward), and gpt2 c_attn r 4 SHARD_GRAD_OP
# at K = 2 with no_sync(), and the llama run's losses (about 25 s of CPU for
# the three). And float16 autocast under ShardedGradScaler (s52):
# llama LoRA K = 2 no_sync zeros, bytes and losses (a case written under
# --precision amp-fp16). Without a root: skip (77), a failure under
# ZS_REQUIRE_TORCH26=1.
#
# PyTorch is looked for by tests/torch_python.sh; without it: skip (77).
# Exit 0 pass, 1 a difference, 99 hard error.
set -u
name=ft_fsdp_lora
# top, src, zerosim, tmp, status
. "${srcdir:-.}/tests/ft_lib.sh"

ft_configs 256 160 tiny-

version=1.13
[ "$mode" = torch26 ] && version=2.6
z="--seq 32 --batch 2 --schemes zero3 --world 2 --steps 3 --framework torch --wrapper fsdp
--torch-version $version --torch-device cpu --attn eager --optimizer-impl single"

# The refusal first (needs no PyTorch): one line, exit 2, nothing written;
# and PyTorch refuses the same unit (the error is raised in each rank)
# (1.13's run alone).
refusals() {
	# shellcheck disable=SC2086
	"$zerosim" theory --model "$tmp/tiny-llama.json" $z --precision fp32 --freeze embeddings \
		--out "$tmp/refused.json" >"$tmp/out" 2>"$tmp/err"
	rc=$?
	if [ $rc -ne 2 ] || [ "$(wc -l <"$tmp/err")" -ne 1 ] || [ -e "$tmp/refused.json" ] ||
		! grep -q 'unit root .*requires uniform `requires_grad`' "$tmp/err"; then
		echo "FAIL: --freeze embeddings under --wrapper fsdp: exit $rc, stderr: $(cat "$tmp/err")"
		status=1
	else
		echo "ok: --freeze embeddings under --wrapper fsdp: $(cat "$tmp/err")"
	fi
	timeout 300 "$py" "$src/tests/ft_torch.py" --model "$tmp/tiny-llama.json" --world 2 --fsdp --freeze embeddings \
		--out "$tmp/refused.json" >"$tmp/out" 2>"$tmp/err"
	rc=$?
	if [ $rc -eq 0 ] || ! grep -q 'FlatParameter` requires uniform `requires_grad`' "$tmp/err"; then
		echo "FAIL: PyTorch's FSDP with --freeze embeddings: exit $rc, $(tail -3 "$tmp/err")"
		status=1
	else
		echo "ok: PyTorch 1.13's FSDP refuses --freeze embeddings too: $(grep -m1 -o 'ValueError: .*requires_grad`' \
			"$tmp/err")"
	fi
}

. "$src/tests/torch_python.sh"
export PYTHONDONTWRITEBYTECODE=1 OPENBLAS_NUM_THREADS=1
[ "$mode" = torch26 ] || refusals

# coll.py REF MEASURE LABEL: PyTorch's all-gathers and reduce-scatters in
# the run's steps against measure's (its calls a step times the steps:
# a frozen unit SHARD_GRAD_OP keeps is gathered in step 1 alone, so the
# steady step's count would miss it)
cat >"$tmp/coll.py" <<'EOF'
import json, sys
d, label = json.load(open(sys.argv[1])), sys.argv[3]
bad = []
for r in json.load(open(sys.argv[2]))["runs"]:
    for kind in ("all_gather", "reduce_scatter"):
        calls = round(r["collectives"][kind]["calls_per_step"] * d["steps"])
        if d[kind + "_run"] != calls:
            bad.append(f"{kind}: PyTorch {d[kind + '_run']} in the run's steps ({d[kind + '_per_micro']} per "
                       f"micro-step of the last) against measure's {calls}")
print(f"{'FAIL' if bad else 'ok'}: {label}: all-gathers per micro-step {d['all_gather_per_micro']} "
      f"({d['all_gather_run']} in the run), reduce-scatters {d['reduce_scatter_per_micro']} "
      f"({d['reduce_scatter_run']}): PyTorch's and measure's calls {'differ' if bad else 'agree'}"
      + "".join("\n  " + b for b in bad))
sys.exit(1 if bad else 0)
EOF

# case LABEL MODEL K ZERO_GRAD NO_SYNC(on|off) PRECISION(fp32|amp-bf16|amp-fp16: ft_torch.py --amp bf16|fp16)
#       SCHEME(zero3|zero2: ft_torch.py --fsdp-strategy shard_grad_op) ARGS...
# Called twice a case (the loop below): phase add appends its reference
# to the batch $tmp/ft (tests/ft_lib.sh's ft_add: every case's PyTorch in
# one python3, tests/batch_torch.py; each case's ranks spawned by it),
# phase check compares case $i's JSON with zerosim's theory and measure.
case_() {
	torch_row "$1" || return 0
	label=$(torch_label "$1") m=$2 K=$3 zg=$4 ns=$5 prec=$6 scheme=$7
	shift 7
	i=$((i + 1))
	if [ "$phase" = add ]; then
		amp=
		case $prec in amp-bf16) amp="--amp bf16" ;; amp-fp16) amp="--amp fp16" ;; esac
		strategy=full_shard
		[ "$scheme" = zero2 ] && strategy=shard_grad_op
		set -f
		# shellcheck disable=SC2046,SC2086
		ft_add ft $(ft_rel ft "--model $tmp/tiny-$m.json") --grad-accum "$K" --zero-grad "$zg" --world 2 --fsdp \
			--fsdp-strategy $strategy --no-sync "$([ "$ns" = on ] && echo 1 || echo 0)" $amp "$@"
		set +f
		return 0
	fi
	if [ "$(ft_got ft $i)" != 0 ]; then
		echo "ft_fsdp_lora: FAIL: tests/ft_torch.py --fsdp, $label:" >&2
		tail -n 20 "$tmp/ft/$i.err" "$tmp/ft.log" >&2 2>/dev/null
		exit 99
	fi
	cp "$tmp/ft/$i.json" "$tmp/$label.json" || exit 99
	ns_arg=
	[ "$K" -gt 1 ] && ns_arg="--fsdp-no-sync $ns"
	for cmd in theory measure; do
		# shellcheck disable=SC2086
		if ! "$zerosim" $cmd --model "$tmp/tiny-$m.json" $z --schemes "$scheme" --precision "$prec" --zero-grad "$zg" \
			--grad-accum "$K" \
			$ns_arg "$@" --out "$tmp/$label.$cmd.json" 2>"$tmp/err"; then
			echo "ft_fsdp_lora: FAIL: zerosim $cmd, $label: $(cat "$tmp/err")" >&2
			exit 99
		fi
	done
	# (and the first step, a list of its own with frozen units and PEFT's
	# adapter units too, 1.13's and 2.6's: ft_cmp.py --first against
	# step_peaks[0])
	# (use_orig_params: each rank's Adam state its shard's trained pieces,
	# every rank's figures held apart, tests/zero1_cmp.py's)
	cmp=ft_cmp.py
	case " $* " in *" --fsdp-orig-params on "*) cmp=zero1_cmp.py ;; esac
	"$py" "$src/tests/$cmp" "$tmp/$label.json" "$tmp/$label.theory.json" "$tmp/$label.measure.json" "$label" \
		--first || status=1
	"$py" "$tmp/coll.py" "$tmp/$label.json" "$tmp/$label.measure.json" "$label" || status=1
}

# (a row whose label starts with "+" runs under make check-torch-full alone:
# tests/torch_python.sh's torch_row)
# (under torch26 six rows, each one 2.6 reads apart from 1.13: check-torch26's
# time; the others ran by hand, docs/finetune.md)
all= only26=:
[ "$mode" = torch26 ] && all=: only26=
for phase in add check; do
i=0
[ $phase = check ] && ft_run ft ft_torch.py
case_ fsdp2-lora-llama-k1-zeros llama 1 zeros on fp32 zero3 --lora-r 4
$all case_ fsdp2-lora-llama-k2-none-nosync llama 2 none on fp32 zero3 --lora-r 4
$all case_ +fsdp2-lora-gpt2-k2-zeros-sync gpt2 2 zeros off fp32 zero3 --lora-r 4
case_ fsdp2-freeze-llama-k2-none-nosync llama 2 none on fp32 zero3 --freeze blocks:0-0
# the root and block 0 frozen: block 0's output requires no grad, so 1.13
# registers no pre-backward hook on it (no second gather)
$all case_ fsdp2-freeze-prefix-llama-k1-zeros llama 1 zeros on fp32 zero3 \
	--freeze 'model.embed_tokens.weight,model.layers.0.*,model.norm.weight,lm_head.weight'
# the review's two: LoRA's dropout (nn.Dropout in each adapter's unit: its
# mask saved for backward), and the last block frozen without no_sync()
# (block 1's unit runs no reduce-scatter; block 0's sharded grads add up)
$all case_ fsdp2-lora-dropout-llama-k1-zeros llama 1 zeros on fp32 zero3 --lora-r 4 --lora-dropout 0.1
$all case_ +fsdp2-freeze-last-gpt2-k2-none-sync gpt2 2 none off fp32 zero3 --freeze blocks:1-1
# autocast (no FSDP MixedPrecision): the adapters' units' views cast at
# every use (no cache), the frozen base's too
$all case_ fsdp2-amp-lora-llama-k1-zeros llama 1 zeros on amp-bf16 zero3 --lora-r 4
# SHARD_GRAD_OP (--schemes zero2): every unit keeps its gathered copy from
# forward to its post-backward hook, a frozen one to backward's end
# (_catch_all_reshard); without no_sync() freed there, with it kept into
# the next micro-step; a frozen block whose output requires no grad (the
# frozen prefix) keeps it for good, gathered once, in step 1
$all case_ fsdp2-zero2-lora-llama-k2-none-nosync llama 2 none on fp32 zero2 --lora-r 4
case_ fsdp2-zero2-lora-gpt2-k2-zeros-sync gpt2 2 zeros off fp32 zero2 --lora-r 4
$all case_ +fsdp2-zero2-freeze-llama-k2-none-nosync llama 2 none on fp32 zero2 --freeze blocks:0-0
case_ +fsdp2-zero2-freeze-prefix-llama-k1-zeros llama 1 zeros on fp32 zero2 \
	--freeze 'model.embed_tokens.weight,model.layers.0.*,model.norm.weight,lm_head.weight'
# frozen adapters (--freeze with --lora-r): PEFT's lambda policy asks
# requires_grad when FSDP wraps, after the freezing, so a frozen lora_A or
# lora_B is no unit of its own but flattened into its block's frozen unit
# (block 0's q_proj and v_proj adapters with its base); every lora_A
# frozen, each lora_B a trained unit over it
case_ fsdp2-lora-frozen0-llama-k2-none-nosync llama 2 none on fp32 zero3 --lora-r 4 --freeze blocks:0-0
case_ +fsdp2-zero2-lora-frozenA-gpt2-k2-zeros-sync gpt2 2 zeros off fp32 zero2 --lora-r 4 --freeze re:lora_A
# QLoRA (--quant-base nf4; 2.6 alone: bitsandbytes 0.47.0 needs torch >=
# 2.2): ft_torch.py's Linear4bit with quant_storage float32 under --fsdp,
# the codes flattened into each block's frozen unit, the quant state
# whole on every rank (docs/finetune.md, "QLoRA under FSDP"); llama q, v,
# and gpt2 all-linear (Conv1D, biased) with double quantization, K = 2
$only26 case_ +fsdp2-qlora-llama-k1-zeros llama 1 zeros on fp32 zero3 --lora-r 4 --quant-base nf4
$only26 case_ fsdp2-qlora-gpt2-dq-k2-none-nosync gpt2 2 none on fp32 zero3 --lora-r 4 --lora-targets all-linear \
	--quant-base nf4 --double-quant on
# QLoRA loaded in bf16 (--load-dtype bf16, PEFT's run_peft_qlora_fsdp.sh
# recipe without its autocast): quant_storage bfloat16, each block's unit a
# bf16 flat parameter (codes and norms), the root's (embeddings, norm,
# head) too, each adapter fp32 in a unit of its own (docs/finetune.md,
# "QLoRA loaded in bf16"); llama all-linear with double
# quantization, K = 2 under no_sync() (llama q, v, K = 1, zeros, run by
# hand and equal too: docs/finetune.md's table; not here, for CI's time)
$only26 case_ fsdp2-qlora-bf16-llama-dq-k2-none-nosync llama 2 none on fp32 zero3 --lora-r 4 --lora-targets all-linear \
	--quant-base nf4 --double-quant on --load-dtype bf16
# FSDP's use_orig_params=True (--fsdp-orig-params on; 2.6 alone: 1.13 has
# none): a unit mixing frozen and trainable parameters, the frozen ones'
# gradients computed into the flat gradient, Adam per rank over its
# shard's trained pieces, the sharded gradient kept past set_to_none's
# zero_grad to the next forward (docs/finetune.md, "FSDP with
# use_orig_params=True"): gpt2's attention frozen in each block, and
# llama's with the embeddings (the root's unit mixed too: the table frozen
# beside the trained norm and head)
$only26 case_ fsdp2-orig-attn-gpt2-k1-none gpt2 1 none on fp32 zero3 --freeze re:attn --fsdp-orig-params on
$only26 case_ +fsdp2-orig-emb-llama-k1-zeros llama 1 zeros on fp32 zero3 --freeze 'embeddings,re:self_attn' \
	--fsdp-orig-params on
# and its losses: zerosim's run as a case (it carries the --freeze),
# trained by PyTorch 2.6 with use_orig_params
oz="--model $tmp/tiny-gpt2.json $z --precision fp32 --zero-grad none --freeze re:attn --fsdp-orig-params on"
$only26 ft_losses "$tmp/loss-orig" "gpt2 attention frozen, FSDP use_orig_params N=2" "$oz" \
	"--model $tmp/tiny-gpt2.json --zero-grad none --world 2 --fsdp --freeze re:attn --fsdp-orig-params on"
# with LoRA (s52): a training script under use_orig_params keeps the
# block policy alone (tests/ft_torch.py), so each block's unit mixes its
# frozen base (its gradient computed) and its adapters, all in rank 0's
# shard at N = 2: rank 1 holds no trained piece, and lets its sharded
# gradient go at each root pre-forward after a reduce-scatter, under zeros
# and between micro-steps (docs/finetune.md); llama q,v K = 2 without
# no_sync() under zeros, and gpt2 c_attn SHARD_GRAD_OP K = 2 with it
$only26 case_ fsdp2-orig-lora-llama-k2-zeros-sync llama 2 zeros off fp32 zero3 --lora-r 4 --fsdp-orig-params on
$only26 case_ fsdp2-orig-zero2-lora-gpt2-k2-none-nosync gpt2 2 none on fp32 zero2 --lora-r 4 --fsdp-orig-params on
# and the llama run's losses (its case: the adapters as zerosim started them)
oz="--model $tmp/tiny-llama.json $z --precision fp32 --zero-grad zeros --grad-accum 2 --fsdp-no-sync off --lora-r 4
--fsdp-orig-params on"
$only26 ft_losses "$tmp/loss-orig-lora" "LoRA llama r 4, FSDP use_orig_params N=2 K=2 without no_sync" "$oz" \
	"--model $tmp/tiny-llama.json --grad-accum 2 --no-sync 0 --zero-grad zeros --world 2 --fsdp --lora-r 4 \
--fsdp-orig-params on"
# and under bf16 autocast (s51): the adapters' linears alone cast, their
# fp32 views of PEFT's units copied to bf16 at every use (docs/finetune.md,
# "QLoRA loaded in bf16 under autocast")
$only26 case_ fsdp2-qlora-bf16-amp-llama-k1-zeros llama 1 zeros on amp-bf16 zero3 --lora-r 4 --quant-base nf4 \
	--load-dtype bf16
# float16 autocast under ShardedGradScaler (s52): its unscale_ over the
# adapters' sharded flat gradients, its CPU update in Python; and the
# losses of a case written under amp-fp16, trained by PyTorch 2.6
$only26 case_ fsdp2-fp16-lora-llama-k2-zeros-nosync llama 2 zeros on amp-fp16 zero3 --lora-r 4
lz16="--model $tmp/tiny-llama.json $z --precision amp-fp16 --zero-grad zeros --grad-accum 2 --fsdp-no-sync on --lora-r 4"
$only26 ft_losses "$tmp/loss-fp16" "float16 autocast, ShardedGradScaler: LoRA llama r 4, FSDP N=2 K=2 no_sync" "$lz16" \
	"--model $tmp/tiny-llama.json --grad-accum 2 --zero-grad zeros --world 2 --fsdp --lora-r 4 --amp fp16"

# The losses: zerosim's LoRA run as a case, trained by PyTorch under FSDP
# (the loss moves through the adapters alone: the base is frozen)
[ "$mode" = torch26 ] && continue
lz="--model $tmp/tiny-llama.json $z --precision fp32 --zero-grad none --grad-accum 2 --fsdp-no-sync on --lora-r 4"
ft_losses "$tmp/loss" "LoRA llama q_proj + v_proj r 4, FSDP N=2 K=2 no_sync" "$lz" \
	"--model $tmp/tiny-llama.json --grad-accum 2 --zero-grad none --world 2 --fsdp --lora-r 4"
# and with block 0's adapters frozen (moving through block 1's alone): a
# case has no key for --freeze (measure --write-case refuses it), so the
# case is the unfrozen run's, trained by PyTorch with --freeze, and its
# losses are held to zerosim's frozen run's, whose start is the case's:
# the same first loss, bit for bit (checked; the next ones differ)
if [ $phase = check ]; then
	# shellcheck disable=SC2086
	"$zerosim" measure -q $lz --freeze blocks:0-0 --out "$tmp/loss-frozen0/frozen.json" 2>"$tmp/err" ||
		{ echo "ft_fsdp_lora: FAIL: zerosim measure --freeze blocks:0-0: $(cat "$tmp/err")" >&2; exit 99; }
	"$py" - "$tmp/loss-frozen0" <<'PY' || exit 1
import json, os, sys
a, b = (json.load(open(os.path.join(sys.argv[1], f)))["runs"][0]["losses"] for f in ("seed.json", "frozen.json"))
ok = len(a) == len(b) == 3 and a[0] == b[0] and a[1:] != b[1:]
print(f"{'ok' if ok else 'FAIL'}: zerosim's LoRA run {a} and with block 0's adapters frozen {b}: the same start "
      f"(the first loss bit for bit), trained apart")
sys.exit(0 if ok else 1)
PY
	cp "$tmp/loss-frozen0/frozen.json" "$tmp/loss-frozen0/seed.json" || exit 99
fi
ft_losses "$tmp/loss-frozen0" "LoRA llama r 4, block 0's adapters frozen, FSDP N=2 K=2 no_sync" "$lz" \
	"--model $tmp/tiny-llama.json --grad-accum 2 --zero-grad none --world 2 --fsdp --lora-r 4 --freeze blocks:0-0"
done
exit $status

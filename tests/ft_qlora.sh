#!/bin/sh
# ft_qlora — zerosim's --quant-base nf4 (issue #23: QLoRA's 4-bit base,
# bitsandbytes 0.47.0's Linear4bit under PEFT's adapters; docs/finetune.md,
# "QLoRA's 4-bit base"), without PyTorch (bitsandbytes does not install
# here; the quantizer's kernels are checked against the code book by hand
# in tests/test_nf4.c; the bytes against PyTorch 2.6 with Linear4bit
# written op by op in tests/ft_torch.py: tests/ft_lora.sh torch26's
# "QLoRA" rows).
#
# 1. The CLI: --quant-base (nf4 or none) without --lora-r, --double-quant
#    (on or off) without --quant-base nf4, fp4, a bad on/off, torch 1.13,
#    and under FSDP a layer of n not a multiple of 8: one line, exit 2,
#    nothing written (measure --write-case: tests/case_lora.sh).
# 2. theory = measure to the byte (between steps, the steady step's peak,
#    both breakdowns and every mark) over gpt2 tiny (Conv1D, which
#    transformers' _replace_with_bnb_linear converts too) and llama tiny,
#    r = 4, zero_grad zeros and set_to_none, the default targets and
#    all-linear, with and without double quantization, K = 2; qwen2's
#    biased projections and phi3's fused ones.
# 3. The resident bytes from the shapes alone: the same run without the
#    4-bit base (its bytes are PyTorch's: tests/ft_lora.sh) less 4 B a
#    base linear weight's element, plus what bitsandbytes holds for each
#    layer of n elements in b = ceil(n / 64) blocks: n/2 packed + 4b
#    absmax + 64 (the 16-entry code); with double quantization n/2 + b
#    (8-bit absmax) + 4 ceil(b / 256) + 4 (the offset) + 1024 (the map's
#    copy) + 64, and the one shared map, 1024 B. The layers' shapes are
#    the model's (gpt2: d x 3d, d x d, d x 4d, 4d x d a block; llama:
#    q and o d x d, k and v kv·hd x d, gate, up and down i x d), written
#    here from transformers' modeling files, not read from zerosim.
# 4. A dequantized weight at the peak: llama with a wide MLP (i = 4096),
#    a 16-token vocabulary, T = 4, B = 1: the peak is the forward's, at
#    the last down_proj, and equals the fp32-base run's forward peak less
#    the weights' difference (3.) plus the dequantized [d, i] fp32 weight,
#    4 d i bytes, from the shape (both sides count the set-up's own peak
#    too: it quantizes each weight as it is made, as transformers' 4-bit
#    load does, so it holds one fp32 weight at a time, below the forward's;
#    made whole first, the fp32 base would be the peak here, 6.5 MB).
# 5. Under --wrapper ddp, N = 2, K = 1 and 2: 2. and 3. again, and the
#    steps' traffic equal to the fp32-base run's (the 4-bit base is frozen,
#    and only its packed weights are broadcast, once, in set-up).
# 6. DDP N = 2 at T = 4, B = 1: the set-up binds, at the construction's
#    broadcast copy of the fp32 module states (DDP's _sync_module_states:
#    docs/finetune.md, "LoRA under DDP"): the peak is those states twice
#    (embeddings, head, norms, adapters, inv_freq: from the shapes; their
#    flat copy, one bucket) plus the 4-bit storages (3.) and the packed
#    weights' flat copy (their uint8 bucket, in flight with the fp32 one),
#    binding_phase setup.
# 7. Under --schemes zero1 (ZeroRedundancyOptimizer over DDP, N = 2 and 3):
#    2. and 3. against the fp32-base zero1 LoRA run (PyTorch's bytes:
#    tests/ft_zero1.sh), and the binding rank's bytes between steps the
#    same QLoRA run's under plain DDP less the other ranks' Adam states,
#    the adapters' partition computed here from their shapes (the 4-bit
#    base is frozen: not given to it); its losses DDP's.
# 8. Under bf16 autocast (--precision amp-bf16: bitsandbytes' compute
#    dtype bf16, as the QLoRA recipe sets it): 2. and 3. (its fp32-base run
#    the LoRA run under the same autocast), plain loop, DDP N = 2 and zero1
#    N = 2 (their bytes against PyTorch 2.6: tests/ft_lora.sh torch26's
#    "QLoRA" rows); float16 autocast and gpt2 under autocast are refused (1.).
# 9. Under --wrapper fsdp (N = 2 and 3, FULL_SHARD and SHARD_GRAD_OP, fp32
#    and autocast): 2., and 3. with each block's unit flattening the codes
#    as quant_storage float32 (n / 8 elements, 4 B each) in the fp32
#    weights' place, beside its norms and biases, padded to a multiple of
#    N and sharded; the quant state whole on every rank (docs/finetune.md,
#    "QLoRA under FSDP"; the bytes against PyTorch 2.6: tests/
#    ft_fsdp_lora.sh torch26's QLoRA rows).
# 10. Loaded in bf16 (--load-dtype bf16: QLoRA's bf16 recipe, docs/
#    finetune.md "QLoRA loaded in bf16"): its refusals (1.); 2. and 3. on
#    the plain loop, DDP N = 2 and FSDP N = 2 and 3 (the plain loop under
#    bf16 autocast and --recompute full too), the embeddings, head
#    and norms 2 B an element, under FSDP the codes as quant_storage
#    bfloat16 (n / 4 elements) in bf16 units; and FSDP's losses DDP's, bit
#    for bit (the bytes against PyTorch 2.6: tests/ft_lora.sh and
#    ft_fsdp_lora.sh torch26's "loaded in bf16" rows).
# 11. Under --wrapper deepspeed (DeepSpeed's engine over the PyTorch step),
#    zero1 and zero2, fp32 and mixed, K = 1 and 2, --recompute full: 2.
#    and 3. (the packed weights in no flat group, whole on every rank; in
#    mixed the fp32 base's weights 2 B an element), the traffic the fp32
#    base's, and in fp32 the losses --wrapper ddp's bit for bit (the bytes
#    against PyTorch 2.6: tests/ds_torch26.sh's QLoRA rows); zero3 refused
#    (1.).
# Exit 0 pass, 1 disagreement, 99 hard error.
set -u
top=${ZS_BUILDDIR:-.}
zerosim=$top/zerosim
if [ ! -x "$zerosim" ]; then
	echo "ft_qlora: $zerosim is not built" >&2
	exit 99
fi
py=$(command -v python3) || { echo "ft_qlora: SKIP: no python3 to read the JSON" >&2; exit 77; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/zs-qlora.XXXXXX") || exit 99
trap 'rm -rf "$tmp"' EXIT HUP INT TERM
status=0

cat >"$tmp/gpt2.json" <<'JSON'
{"model_type": "gpt2", "n_embd": 64, "n_head": 4, "n_layer": 2, "n_positions": 64, "vocab_size": 1024,
 "activation_function": "gelu_new", "tie_word_embeddings": true, "layer_norm_epsilon": 1e-05, "embd_pdrop": 0.0,
 "attn_pdrop": 0.0, "resid_pdrop": 0.0}
JSON
cat >"$tmp/llama.json" <<'JSON'
{"model_type": "llama", "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
 "num_key_value_heads": 2, "intermediate_size": 176, "max_position_embeddings": 64, "vocab_size": 1024,
 "rms_norm_eps": 1e-05, "tie_word_embeddings": false, "hidden_act": "silu"}
JSON
sed 's/"llama"/"qwen2"/; s/1e-05/1e-06/' "$tmp/llama.json" >"$tmp/qwen2.json"
# wide: llama with a wide MLP (i = 4096), a tiny vocabulary and (below)
# T = 4, B = 1, so that a dequantized weight, not the logits, makes the peak
sed 's/"intermediate_size": 176/"intermediate_size": 4096/; s/"vocab_size": 1024/"vocab_size": 16/' \
	"$tmp/llama.json" >"$tmp/wide.json"
sed 's/"llama"/"phi3"/; s/"silu"/"silu", "resid_pdrop": 0.0, "pad_token_id": null/' "$tmp/llama.json" >"$tmp/phi3.json"

plain="--seq 32 --batch 2 --precision fp32 --schemes dp --world 1 --framework torch --wrapper none
--torch-version 2.6 --torch-device cpu --attn eager --optimizer-impl single"

refuse() { # WHAT TEXT ARGS...: theory (or $cmd) refuses with one line naming TEXT, exit 2, nothing written
	what=$1 text=$2
	shift 2
	# shellcheck disable=SC2086
	"$zerosim" "${cmd:-theory}" --model "$tmp/$rm.json" $plain "$@" --out "$tmp/refused.json" >"$tmp/out" 2>"$tmp/err"
	rc=$?
	if [ $rc -ne 2 ] || [ "$(wc -l <"$tmp/err")" -ne 1 ] || [ -e "$tmp/refused.json" ] ||
		! grep -q -- "$text" "$tmp/err"; then
		echo "FAIL: $what: exit $rc, stderr: $(cat "$tmp/err")"
		status=1
	else
		echo "ok: $what: $(cat "$tmp/err")"
	fi
}
rm=llama # the model refuse() runs
refuse "--quant-base without --lora-r" "only with --lora-r" --quant-base nf4
refuse "--double-quant without --quant-base" "only with --quant-base nf4" --lora-r 4 --double-quant on
refuse "--quant-base none without --lora-r" "only with --lora-r" --quant-base none
refuse "--double-quant off without --quant-base" "only with --quant-base nf4" --lora-r 4 --double-quant off
refuse "--double-quant off with --quant-base none" "only with --quant-base nf4" --lora-r 4 --quant-base none \
	--double-quant off
refuse "fp4" "not one of nf4, none" --lora-r 4 --quant-base fp4
refuse "--double-quant yes" "not one of on, off" --lora-r 4 --quant-base nf4 --double-quant yes
refuse "--torch-version 1.13" "bitsandbytes 0.47.0 needs torch >= 2.2" --lora-r 4 --quant-base nf4 \
	--torch-version 1.13
refuse "--precision amp-fp16" "QLoRA under float16 autocast is not described yet" --lora-r 4 --quant-base nf4 \
	--precision amp-fp16
# --load-dtype bf16 (QLoRA's bf16 recipe): the plain loop, DDP and FSDP, without
# autocast or under bf16 autocast, reentrant checkpointing; the rest by name
refuse "--load-dtype bf16 without --quant-base" "only with --quant-base nf4" --lora-r 4 --load-dtype bf16
refuse "--load-dtype fp16" "not one of fp32, bf16" --lora-r 4 --quant-base nf4 --load-dtype fp16
refuse "--load-dtype bf16 under ZeroRedundancyOptimizer" "--load-dtype bf16 with ZeroRedundancyOptimizer" \
	--lora-r 4 --quant-base nf4 --load-dtype bf16 --wrapper ddp --world 2 --schemes zero1
refuse "--load-dtype bf16 under DeepSpeed" "--load-dtype bf16 under --framework deepspeed --wrapper deepspeed" \
	--lora-r 4 --quant-base nf4 --load-dtype bf16 --framework deepspeed --wrapper deepspeed --world 2 --schemes zero1
refuse "--load-dtype bf16 under float16 autocast" "--load-dtype bf16 with --precision amp-fp16: not described yet" \
	--lora-r 4 --quant-base nf4 --load-dtype bf16 --precision amp-fp16
rm=gpt2
refuse "--load-dtype bf16 over gpt2" "--load-dtype bf16 with a model that is not a llama" --lora-r 4 \
	--quant-base nf4 --load-dtype bf16
# (a config with dropout: no row has a bf16 dropout's noise, with or
# without autocast)
sed 's/"silu"/"silu", "attention_dropout": 0.1/' "$tmp/llama.json" >"$tmp/llama-drop.json"
rm=llama-drop
for p in fp32 amp-bf16; do
	refuse "--load-dtype bf16 with the config's dropout, $p" "--load-dtype bf16 with dropout (the model's config" \
		--lora-r 4 --quant-base nf4 --load-dtype bf16 --precision $p
done
rm=llama
# (DeepSpeed's engine over the PyTorch step: stages 1 and 2 built, stage
# 3's partitions of a packed weight not described)
refuse "--quant-base nf4 under --wrapper deepspeed --schemes zero3" \
	"--quant-base nf4 with --wrapper deepspeed --schemes zero3: not built yet" \
	--lora-r 4 --quant-base nf4 --framework deepspeed --wrapper deepspeed --world 2 --schemes zero3
# a case has no key for the dtype the model is loaded in: --write-case
# refuses it and writes no case (the 4-bit base it writes: case_lora.sh)
cmd=measure refuse "--load-dtype bf16 with --write-case" "--load-dtype bf16 with --write-case: a case has no key" \
	--lora-r 4 --quant-base nf4 --load-dtype bf16 --write-case "$tmp/bf16case.json"
if [ -e "$tmp/bf16case.json" ]; then
	echo "FAIL: --load-dtype bf16 with --write-case wrote a case"
	status=1
fi
# the theory's text of a bf16-loaded base says bf16 (its 4-bit paragraph
# and the precision line), not the fp32-loaded step's words
# shellcheck disable=SC2086
"$zerosim" theory --model "$tmp/llama.json" $plain --lora-r 4 --quant-base nf4 --load-dtype bf16 >"$tmp/bf16.txt" 2>&1
for w in "head stay bf16, as the model was loaded" "into a bf16 temporary" "the model loaded in bf16"; do
	grep -q -- "$w" "$tmp/bf16.txt" || { echo "FAIL: --load-dtype bf16: the theory's text lacks '$w'"; status=1; }
done
# gpt2 under autocast: Linear4bit hands c_attn's result back in fp32, and
# c_proj's bf16 input would cast its bias to bf16 for good (bitsandbytes
# 0.47.0 nn/modules.py line 551)
rm=gpt2
refuse "gpt2 under autocast" "QLoRA under autocast over gpt2" --lora-r 4 --quant-base nf4 --precision amp-bf16
rm=llama
# under FSDP the codes are quant_storage float32's (n + 1) // 8 elements
# (bitsandbytes 0.47.0 backends/cuda/ops.py line 320): a layer of n not a
# multiple of 8 would lose codes (hidden 10, 1 head: q_proj 100
# elements; the head dimension even, so that measure reaches the check)
sed 's/"hidden_size": 64/"hidden_size": 10/; s/"num_attention_heads": 4/"num_attention_heads": 1/;
     s/"num_key_value_heads": 2/"num_key_value_heads": 1/' "$tmp/llama.json" >"$tmp/odd.json"
rm=odd
for cmd in theory measure; do
	refuse "$cmd --wrapper fsdp, a layer of n not a multiple of 8" "elements not a multiple of 8" --lora-r 4 \
		--quant-base nf4 --wrapper fsdp --world 2 --schemes zero3
done
cmd=theory rm=llama
# (measure --write-case with the 4-bit base, refused before: a
# zerosim-case/4 now, read back by --case: tests/case_lora.sh)

# label;model;zero_grad;K;args (zero_grad -: not given, --wrapper
# deepspeed's engine sets every .grad to None itself)
while IFS=';' read -r label m zg K args; do
	[ -n "$label" ] || continue
	zgo="--zero-grad $zg"
	[ "$zg" = - ] && zgo=
	for cmd in theory measure; do
		# shellcheck disable=SC2086
		if ! "$zerosim" $cmd --model "$tmp/$m.json" $plain --steps 3 $zgo --grad-accum "$K" $args \
			--out "$tmp/$cmd.json" 2>"$tmp/err"; then
			echo "ft_qlora: FAIL: zerosim $cmd, $label: $(cat "$tmp/err")" >&2
			exit 99
		fi
	done
	# the same LoRA run with its base in fp32 (drop the quantization options)
	base=$(echo "$args" | sed 's/--quant-base nf4//; s/--double-quant on//; s/--load-dtype bf16//')
	# shellcheck disable=SC2086
	if ! "$zerosim" theory --model "$tmp/$m.json" $plain --steps 3 $zgo --grad-accum "$K" $base \
		--out "$tmp/fp32.json" 2>"$tmp/err"; then
		echo "ft_qlora: FAIL: zerosim theory, $label without the 4-bit base: $(cat "$tmp/err")" >&2
		exit 99
	fi
	dq=0
	case "$args" in *"--double-quant on"*) dq=1 ;; esac
	# zero1 (the row's --schemes after $plain's dp: the last one given
	# holds), and DeepSpeed's zero1 and zero2: the same QLoRA run under
	# plain DDP, measured, for 7. and 11.
	echo '{}' >"$tmp/dp.json"
	case "$args" in
	*"--precision mixed"*) ddp= ;; # (DeepSpeed's bf16: DDP has none)
	*"--wrapper deepspeed"*) ddp=$(echo "$args" | sed 's/--framework deepspeed --wrapper deepspeed/--wrapper ddp/; s/--ds-reduce-bucket [0-9]*//;
		s/--schemes zero[12]/--schemes dp/') ;;
	*"--schemes zero1"*) ddp=$(echo "$args" | sed 's/--schemes zero1/--schemes dp/') ;;
	*) ddp= ;;
	esac
	# shellcheck disable=SC2086
	if [ -n "$ddp" ] && ! "$zerosim" measure --model "$tmp/$m.json" $plain --steps 3 $zgo --grad-accum "$K" $ddp \
		--out "$tmp/dp.json" 2>"$tmp/err"; then
		echo "ft_qlora: FAIL: zerosim measure, $label under --schemes dp: $(cat "$tmp/err")" >&2
		exit 99
	fi
	"$py" - "$tmp/$m.json" "$tmp/theory.json" "$tmp/measure.json" "$tmp/fp32.json" "$tmp/dp.json" "$dq" "$label" \
		<<'PY' || status=1
import json, sys
cfg, t, runs, f, dp = (json.load(open(p)) for p in sys.argv[1:6])
dq, label = sys.argv[6] == "1", sys.argv[7]
t, f = t["rows"][0]["schedule"], f["rows"][0]["schedule"]
bad = []
for r in runs["runs"]:
    for k in ("resident_bytes", "peak_bytes", "resident_breakdown", "peak_breakdown", "marks"):
        if r.get(k) != t.get(k):
            bad.append(f"measure's {k} is not theory's")
    if not all(x == x and x < 1e3 for x in r["losses"]):
        bad.append(f"losses {r['losses']}")
if not t.get("marks"):
    bad.append("no marks")
# the base linear layers' weights, [out, in] (the head and embeddings stay fp32)
if cfg["model_type"] == "gpt2":
    d = cfg["n_embd"]
    layers = [(3 * d, d), (d, d), (4 * d, d), (d, 4 * d)] * cfg["n_layer"]
else:
    d, i = cfg["hidden_size"], cfg["intermediate_size"]
    kv = cfg["num_key_value_heads"] * d // cfg["num_attention_heads"]
    if cfg["model_type"] == "phi3":  # qkv_proj and gate_up_proj fused
        block = [(d + 2 * kv, d), (d, d), (2 * i, d), (d, i)]
    else:
        block = [(d, d), (kv, d), (kv, d), (d, d), (i, d), (i, d), (d, i)]
    layers = block * cfg["num_hidden_layers"]
n_all = sum(o * k for o, k in layers)
held = 1024 if dq else 0
# the fp32 base's bytes an element: 2 under DeepSpeed's bf16 (the
# module's .bfloat16(): "mixed" rows)
wb = 2 if "mixed" in label else 4
for o, k in layers:
    n = o * k
    b = -(-n // 64)
    held += n // 2 + 64 + (b + 4 * -(-b // 256) + 4 + 1024 if dq else 4 * b)
want = f["resident_bytes"] - wb * n_all + held
# loaded in bf16 (--load-dtype bf16): the parameters that are not base
# linear weights (embeddings, head, norms: biases none in llama) 2 B an
# element, not 4; the adapters fp32 (PEFT's autocast_adapter_dtype) and
# inv_freq fp32, as in the fp32 run
if "loaded in bf16" in label and not label.startswith("FSDP"):
    V, L = cfg["vocab_size"], cfg["num_hidden_layers"]
    other = V * d * (1 if cfg.get("tie_word_embeddings") else 2) + (2 * L + 1) * d
    want -= 2 * other
# FSDP (FULL_SHARD, N ranks): each block's unit flattens its base linear
# weights (fp32: 4 B an element; 4-bit: the codes as quant_storage
# float32, n / 8 elements) with the block's other parameters (norms,
# biases: e elements), padded to a multiple of N, each rank a shard of 4
# B an element; the quant state (all but the codes) whole on every rank
if label.startswith("FSDP"):
    N = int(label.split("N = ")[1].split(":")[0])
    L = cfg.get("n_layer", cfg.get("num_hidden_layers"))
    per = layers[:len(layers) // L]
    e = 13 * d if cfg["model_type"] == "gpt2" else 2 * d  # ln_1/ln_2 weight and bias, 4 biases; two RMSNorms
    fp, q4 = -(-(sum(o * k for o, k in per) + e) // N), -(-(sum(o * k // 8 for o, k in per) + e) // N)
    want = f["resident_bytes"] - 4 * L * (fp - q4) + held - n_all // 2
    if "loaded in bf16" in label:
        # the codes as quant_storage bfloat16 (n / 4 elements, 2 B each)
        # and the norms bf16 in each block's unit; the root's unit
        # (embeddings, final norm, head) bf16: its shard 2 B an element
        q4b = -(-(sum(o * k // 4 for o, k in per) + e) // N)
        V = cfg["vocab_size"]
        root = -(-(V * d * (1 if cfg.get("tie_word_embeddings") else 2) + d) // N)
        want = f["resident_bytes"] - 4 * L * fp + 2 * L * q4b - 2 * root + held - n_all // 2
if t["resident_bytes"] != want:
    bad.append(f"between steps {t['resident_bytes']:,}, from the shapes {want:,} ({t['resident_bytes'] - want:+,} B)")
# wide: the forward's last down_proj (the most activations held) is where
# the peak is. There the fp32-base run holds X (the down_proj's mm output
# included); the 4-bit run holds the same X less the weights' difference
# plus the dequantized down_proj weight, [d, i] fp32 (bitsandbytes'
# dequantize_4bit output, freed after the matmul): 4 d i bytes. Without
# double quantization no other temporary is live then.
# DDP: the 4-bit base is frozen (no bucket slot) and, of its storages,
# only the packed weight is a module state (broadcast once at
# construction, in set-up): the steps' traffic is the fp32-base run's
if not label.startswith("FSDP") and t.get("comm_bytes_per_rank_per_step") != f.get("comm_bytes_per_rank_per_step"):
    bad.append(f"comm a step {t.get('comm_bytes_per_rank_per_step')}, the fp32 base's "
               f"{f.get('comm_bytes_per_rank_per_step')}")
if label.startswith("wide"):
    tmpw = 4 * cfg["hidden_size"] * cfg["intermediate_size"]
    wantp = f["phase_peak_bytes"]["forward"] - (f["resident_bytes"] - want) + tmpw
    if t["peak_bytes"] != wantp or t["binding_phase"] != "forward":
        bad.append(f"peak {t['peak_bytes']:,} ({t['binding_phase']}), by hand {wantp:,}: the fp32 base's forward "
                   f"peak {f['phase_peak_bytes']['forward']:,} less {f['resident_bytes'] - want:,} plus the "
                   f"dequantized [d, i] weight {tmpw:,}")
    if wantp <= f["peak_bytes"] - (f["resident_bytes"] - want):
        bad.append("the dequantized weight does not make the peak here")
# broadcast_coalesced's buckets (250 MiB a dtype, comm.cpp): llama tiny's
# fp32 states fill one, the packed uint8 weights another; each is flattened
# into a copy (a cat), and both copies are live at once (max_in_flight = 2:
# neither finishes before the loop's end).
if label.startswith("DDP set-up"):
    d, L, r = cfg["hidden_size"], cfg["num_hidden_layers"], 4
    hd = d // cfg["num_attention_heads"]
    s32 = 2 * cfg["vocab_size"] * d + (2 * L + 1) * d + L * (2 * r * d + r * d + kv * r) + hd // 2
    wantp = 2 * 4 * s32 + held + n_all // 2
    if t["peak_bytes"] != wantp or t["binding_phase"] != "setup":
        bad.append(f"peak {t['peak_bytes']:,} ({t['binding_phase']}), by hand {wantp:,} (setup): the fp32 "
                   f"states {4 * s32:,} twice, the 4-bit storages {held:,} and the packed weights' copy "
                   f"{n_all // 2:,}")
# zero1: ZeroRedundancyOptimizer is given the adapters alone (a 4-bit
# base's Params4bit, uint8, beside them would be refused: "only supports
# using the same dense type for all parameters"): the binding rank holds
# the DDP run's bytes less the other ranks' Adam states (exp_avg and
# exp_avg_sq, 8 B an element, and a 4 B step each) under the greedy
# partition (numel, largest first, stable; to the first least-loaded
# rank), written here from the adapters' shapes; the losses are DDP's
if dp.get("runs") and label.startswith("DeepSpeed"):
    # 11. DeepSpeed's stages 1 and 2 reduce the adapters' gradients as
    # DDP does (divided by N, summed) and step them in fp32 as torch's
    # Adam: in fp32 the losses are DDP's bit for bit
    if runs["runs"][0]["losses"] != dp["runs"][0]["losses"]:
        bad.append(f"losses {runs['runs'][0]['losses']}, DDP's {dp['runs'][0]['losses']}")
elif dp.get("runs"):
    r = 4
    if cfg["model_type"] == "gpt2":
        # c_attn only, or all-linear (c_attn, c_proj, c_fc, mlp's c_proj), [in, out] as Conv1D
        tl = [(d, 3 * d)] if "all-linear" not in label else [(d, 3 * d), (d, d), (d, 4 * d), (4 * d, d)]
    elif "all-linear" not in label:
        tl = [(d, d), (d, kv)]
    elif cfg["model_type"] == "phi3":
        tl = [(d, d + 2 * kv), (d, d), (d, 2 * i), (i, d)]
    else:
        tl = [(d, d), (d, kv), (d, kv), (d, d), (d, i), (d, i), (i, d)]
    L = cfg.get("n_layer", cfg.get("num_hidden_layers"))
    adapters = [n for _ in range(L) for k, o in tl for n in (r * k, o * r)]  # lora_A [r, in], lora_B [out, r]
    N = int(label.split("N = ")[1].split(",")[0].split(":")[0])
    load, held_r = [0] * N, [0] * N
    for n in sorted(adapters, reverse=True):
        q = load.index(min(load))
        load[q] += n
        held_r[q] += 8 * n + 4
    dpr, dpt = dp["runs"][0], dp["runs"]
    want = dpr["resident_bytes"] - (sum(held_r) - max(held_r))
    if t["resident_bytes"] != want:
        bad.append(f"zero1 between steps {t['resident_bytes']:,}, the DDP run's {dpr['resident_bytes']:,} less the "
                   f"other ranks' Adam states {sum(held_r) - max(held_r):,} (loads {load}) = {want:,}")
    for a, b in zip(runs["runs"], dpt):
        if any(abs(x - y) > 1e-5 * max(1.0, abs(y)) for x, y in zip(a["losses"], b["losses"])):
            bad.append(f"zero1 losses {a['losses']}, DDP's {b['losses']}")
print(("FAIL: " if bad else "ok: ") + label + f": between steps {t['resident_bytes']:,} (fp32 base "
      f"{f['resident_bytes']:,}; 4-bit storages {held:,} B for {n_all:,} weights), peak {t['peak_bytes']:,} "
      f"(fp32 base {f['peak_bytes']:,})" + "".join("\n  " + x for x in bad))
sys.exit(1 if bad else 0)
PY
done <<'CASES'
gpt2, c_attn, zeros;gpt2;zeros;1;--lora-r 4 --quant-base nf4
gpt2, all-linear, set_to_none, double quant;gpt2;none;1;--lora-r 4 --lora-targets all-linear --quant-base nf4 --double-quant on
llama, q_proj + v_proj, zeros;llama;zeros;1;--lora-r 4 --quant-base nf4
llama, q_proj + v_proj, set_to_none, double quant;llama;none;1;--lora-r 4 --quant-base nf4 --double-quant on
llama, all-linear, set_to_none;llama;none;1;--lora-r 4 --lora-targets all-linear --quant-base nf4
llama, all-linear, zeros, double quant, K = 2;llama;zeros;2;--lora-r 4 --lora-targets all-linear --quant-base nf4 --double-quant on
checkpointed (--recompute full), llama, q_proj + v_proj, zeros;llama;zeros;1;--lora-r 4 --quant-base nf4 --recompute full
checkpointed, DDP N = 2: gpt2, c_attn, double quant, K = 2;gpt2;none;2;--lora-r 4 --quant-base nf4 --double-quant on --recompute full --wrapper ddp --world 2
qwen2, q_proj + v_proj (biased), double quant;qwen2;zeros;1;--lora-r 4 --quant-base nf4 --double-quant on
phi3, all-linear (fused);phi3;none;1;--lora-r 4 --lora-targets all-linear --quant-base nf4
wide MLP, T = 4, B = 1: a dequantized weight at the peak;wide;none;1;--lora-r 4 --quant-base nf4 --seq 4 --batch 1
DDP N = 2: llama, q_proj + v_proj, zeros;llama;zeros;1;--lora-r 4 --quant-base nf4 --wrapper ddp --world 2
DDP N = 2: llama, all-linear, double quant, K = 2;llama;none;2;--lora-r 4 --lora-targets all-linear --quant-base nf4 --double-quant on --wrapper ddp --world 2
DDP N = 2: gpt2, c_attn, K = 2;gpt2;zeros;2;--lora-r 4 --quant-base nf4 --wrapper ddp --world 2
DDP N = 2: phi3, all-linear (fused), double quant;phi3;none;1;--lora-r 4 --lora-targets all-linear --quant-base nf4 --double-quant on --wrapper ddp --world 2
zero1 N = 2: llama, q_proj + v_proj, zeros;llama;zeros;1;--lora-r 4 --quant-base nf4 --wrapper ddp --world 2 --schemes zero1
zero1 N = 2: llama, all-linear, double quant, K = 2;llama;none;2;--lora-r 4 --lora-targets all-linear --quant-base nf4 --double-quant on --wrapper ddp --world 2 --schemes zero1
zero1 N = 3: gpt2, c_attn, set_to_none;gpt2;none;1;--lora-r 4 --quant-base nf4 --wrapper ddp --world 3 --schemes zero1
zero1 N = 2: phi3, all-linear (fused), double quant;phi3;zeros;1;--lora-r 4 --lora-targets all-linear --quant-base nf4 --double-quant on --wrapper ddp --world 2 --schemes zero1
loaded in bf16: llama, q_proj + v_proj, zeros;llama;zeros;1;--lora-r 4 --quant-base nf4 --load-dtype bf16
loaded in bf16: llama, all-linear, set_to_none, double quant, K = 2;llama;none;2;--lora-r 4 --lora-targets all-linear --quant-base nf4 --double-quant on --load-dtype bf16
DDP N = 2: loaded in bf16: llama, all-linear, zeros;llama;zeros;1;--lora-r 4 --lora-targets all-linear --quant-base nf4 --load-dtype bf16 --wrapper ddp --world 2
FSDP N = 2: loaded in bf16: llama, all-linear, zeros;llama;zeros;1;--lora-r 4 --lora-targets all-linear --quant-base nf4 --load-dtype bf16 --wrapper fsdp --world 2 --schemes zero3
FSDP N = 3: loaded in bf16: llama, q_proj + v_proj, set_to_none, K = 2, SHARD_GRAD_OP (padding);llama;none;2;--lora-r 4 --quant-base nf4 --load-dtype bf16 --wrapper fsdp --world 3 --schemes zero2
loaded in bf16: the recipe: autocast, checkpointed, llama, all-linear, zeros;llama;zeros;1;--lora-r 4 --lora-targets all-linear --quant-base nf4 --load-dtype bf16 --precision amp-bf16 --recompute full
checkpointed zero1 N = 2: gpt2, all-linear, K = 2;gpt2;zeros;2;--lora-r 4 --lora-targets all-linear --quant-base nf4 --recompute full --wrapper ddp --world 2 --schemes zero1
autocast: llama, q_proj + v_proj, zeros, double quant;llama;zeros;1;--lora-r 4 --quant-base nf4 --double-quant on --precision amp-bf16
autocast: DDP N = 2: llama, all-linear, double quant, K = 2;llama;none;2;--lora-r 4 --lora-targets all-linear --quant-base nf4 --double-quant on --precision amp-bf16 --wrapper ddp --world 2
autocast: zero1 N = 2: llama, all-linear, double quant, K = 2;llama;none;2;--lora-r 4 --lora-targets all-linear --quant-base nf4 --double-quant on --precision amp-bf16 --wrapper ddp --world 2 --schemes zero1
FSDP N = 2: llama, q_proj + v_proj, zeros;llama;zeros;1;--lora-r 4 --quant-base nf4 --wrapper fsdp --world 2 --schemes zero3
FSDP N = 2: gpt2, all-linear, double quant, K = 2 no_sync;gpt2;none;2;--lora-r 4 --lora-targets all-linear --quant-base nf4 --double-quant on --wrapper fsdp --world 2 --schemes zero3
FSDP N = 3: llama, all-linear, autocast, SHARD_GRAD_OP;llama;zeros;1;--lora-r 4 --lora-targets all-linear --quant-base nf4 --precision amp-bf16 --wrapper fsdp --world 3 --schemes zero2
DDP set-up, N = 2, T = 4, B = 1: the broadcast copy at the peak;llama;zeros;1;--lora-r 4 --quant-base nf4 --wrapper ddp --world 2 --seq 4 --batch 1
DeepSpeed zero1 N = 2: llama, q_proj + v_proj;llama;-;1;--lora-r 4 --quant-base nf4 --framework deepspeed --wrapper deepspeed --schemes zero1 --world 2 --ds-reduce-bucket 100000
DeepSpeed zero2 N = 3: gpt2, all-linear, double quant, K = 2;gpt2;-;2;--lora-r 4 --lora-targets all-linear --quant-base nf4 --double-quant on --framework deepspeed --wrapper deepspeed --schemes zero2 --world 3 --ds-reduce-bucket 3000
DeepSpeed zero2 N = 2, mixed: llama, all-linear, double quant, K = 2, checkpointed;llama;-;2;--lora-r 4 --lora-targets all-linear --quant-base nf4 --double-quant on --framework deepspeed --wrapper deepspeed --schemes zero2 --world 2 --precision mixed --recompute full --ds-reduce-bucket 100000
CASES

# 10. Loaded in bf16 (--load-dtype bf16), FSDP N = 2 trains as DDP N = 2:
# the same losses, bit for bit. The codes are bf16 elements of each
# block's flat parameter there, flattened, sharded and all-gathered each
# use; a copy that went through fp32 would turn their NaN patterns into
# one (0x7fc0), and the dequantized weights, hence the losses, would
# differ (seen: 6.94979 against 6.95049 at step 1 with the engine's
# 16-bit copies made through fp32).
for w in ddp fsdp; do
	# shellcheck disable=SC2086
	if ! "$zerosim" measure -q --model "$tmp/llama.json" $plain --steps 3 --zero-grad zeros --lora-r 4 \
		--lora-targets all-linear --quant-base nf4 --load-dtype bf16 --wrapper $w --world 2 \
		--schemes "$([ $w = fsdp ] && echo zero3 || echo dp)" --out "$tmp/loss-$w.json" 2>"$tmp/err"; then
		echo "ft_qlora: FAIL: zerosim measure --load-dtype bf16 --wrapper $w: $(cat "$tmp/err")" >&2
		exit 99
	fi
done
"$py" - "$tmp/loss-ddp.json" "$tmp/loss-fsdp.json" <<'PY' || status=1
import json, sys
a, b = (json.load(open(p))["runs"][0]["losses"] for p in sys.argv[1:3])
ok = a == b and len(a) == 3
print(("ok" if ok else "FAIL") + f": loaded in bf16, llama all-linear N = 2: FSDP's losses {b} "
      + ("equal to" if ok else "against") + f" DDP's {a}")
sys.exit(0 if ok else 1)
PY
# and the report, whose QLoRA terms are the fp32-loaded model's, refuses
# such a file in one line (exit 2, nothing written)
# shellcheck disable=SC2086
"$zerosim" theory --model "$tmp/llama.json" $plain --lora-r 4 --quant-base nf4 --load-dtype bf16 \
	--out "$tmp/bf16-t.json" 2>"$tmp/err" && "$zerosim" measure -q --layers 16,32,16 --world 1 --out "$tmp/mlp-m.json" &&
	"$zerosim" theory --layers 16,32,16 --world 1 --out "$tmp/mlp-t.json" >/dev/null 2>&1 ||
	{ echo "ft_qlora: FAIL: zerosim theory for the report: $(cat "$tmp/err")" >&2; exit 99; }
ZEROSIM_DATADIR=${srcdir:-.} "$zerosim" report --no-render --measured "$tmp/mlp-m.json" --theory "$tmp/mlp-t.json" \
	--transformer "$tmp/bf16-t.json" --out "$tmp/rep" >"$tmp/out" 2>"$tmp/err"
rc=$?
if [ $rc -ne 2 ] || [ "$(wc -l <"$tmp/err")" -ne 1 ] || [ -e "$tmp/rep" ] ||
	! grep -q "a model loaded in bf16 is not in the report yet" "$tmp/err"; then
	echo "FAIL: report of a model loaded in bf16: exit $rc, stderr: $(cat "$tmp/err")"
	status=1
else
	echo "ok: report of a model loaded in bf16: $(cat "$tmp/err")"
fi
exit $status

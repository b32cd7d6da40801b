#!/bin/sh
# hf_torch — zerosim against real PyTorch training Hugging Face's models op
# for op (tests/hf_torch.py; issue #22's reference side).
#
# As a make check test (no argument): zerosim's theory of the plain loop
# (--framework torch --wrapper none --torch-version 1.13 --torch-device cpu:
# util/autograd.c's step, summed by theory/theory_autograd.c) against
# PyTorch 1.13 training the same model here (fp32, one rank, Adam,
# zero_grad(set_to_none=False), dropout 0, eager attention): the bytes live
# between steps (replayed from PyTorch's own allocator events: parameters,
# grads, Adam's m, v and step tensors, the buffers and the token ids), the
# steady step's peak, and the live bytes at every mark zerosim's step names
# (phases, units' forward and backward boundaries), all equal to the byte;
# any difference is printed with its size; on the plain loop, DDP and
# FSDP the first step's peak too (its own list: the grads made by the
# first backward, Adam's state by the first step(); PyTorch's
# step_peaks[0]). Cases: the tiny gpt2 and
# llama of the issue, each tied and untied; gpt2 with foreach Adam; llama
# with zero_grad(set_to_none=True); gpt2 at batch 1 (matmul's operands are
# views there, not copies); DDP N = 2 over gloo (--wrapper ddp, gpt2 and
# llama, llama with foreach Adam, gpt2 with set_to_none, and a gpt2 whose
# gradients span four buckets at bucket_cap_mb 0.25, their sizes equal to
# the buckets the reducer rebuilt, hf_torch.py ddp_buckets), the engine's measure at N = 2
# too; torch's zero1, ZeroRedundancyOptimizer over DDP
# (--wrapper ddp --schemes zero1), every rank's figures, at N = 2 and 3;
# FSDP FULL_SHARD, a unit per block and the root, over gloo (--wrapper
# fsdp: gpt2 and llama at N = 2, gpt2 with set_to_none, llama with foreach
# Adam, gpt2 at N = 3, qwen2, and phi3 with set_to_none, at N = 2; gpt2 with set_to_none
# and llama under --recompute full, the checkpoint inside the unit), theory and measure, and at N = 2 the measure's
# final weights equal DDP's to the bit; FSDP SHARD_GRAD_OP (--schemes zero2:
# gpt2 at N = 2 and 3, llama with set_to_none, both under --recompute full); gpt2 and llama with dropout 0.1
# from their
# configs (the CPU's noise tensors kept by autograd), where zerosim's
# measure, which runs real dropout with its own seeded masks, must give
# the theory's bytes too; the tiny qwen2 (q/k/v biased) and qwen3 (q_norm
# and k_norm, head_dim 24 apart from hidden / heads), qwen2 with
# set_to_none, qwen3 tied with foreach Adam, each with the engine's
# measure too, and qwen3 under DDP N = 2; the tiny phi3 (qkv_proj and gate_up_proj fused), and tied
# with set_to_none, and with its residual dropouts (resid_pdrop 0.1),
# with measure; the tiny gemma2 (Gemma2RMSNorm's (1 + w), four norms a
# block, the scaled embeddings, GeGLU, the soft-capped scores and logits,
# layer 0's sliding-window mask), tied with zeros, untied with
# set_to_none, under DDP N = 2 and FSDP N = 2 (its final weights DDP's),
# with measure; the tiny gemma3_text (q_norm and k_norm on the transposed
# heads, masking_utils' two masks, a rotary call a layer, the scaled
# embedding's buffer), tied with zeros, untied with set_to_none and a
# final logit softcap, under DDP N = 2 and FSDP N = 2, with measure;
# gpt2, llama, qwen2, qwen3 and phi3 under bf16 autocast
# (--precision amp-bf16, hf_torch.py --amp bf16: gpt2 tied with zeros,
# untied with set_to_none, DDP N = 2; llama untied with zeros, and DDP
# N = 2; qwen2 and phi3 with zeros, qwen3 with set_to_none; gpt2 with
# ZeroRedundancyOptimizer at N = 2), theory and
# measure, and measure's bf16 losses against its own fp32 run's
# (docs/schedule.md, "Autocast"); under --recompute full with dropout
# (gpt2, llama, phi3, DDP N = 2 and FSDP N = 2 gpt2) and with bf16
# autocast (gpt2, llama, qwen3, phi3, DDP N = 2 llama): theory and
# measure, the measure's losses and weights those of the run without
# checkpointing to the bit, and PyTorch's losses with it within 1e-6 of
# its own without (docs/torch_saved.md, "Dropout under checkpointing",
# "Autocast under checkpointing"); gemma2 and gemma3_text under
# --recompute full (each layer's call as its transformers release makes
# it: docs/torch_saved.md, "The gemmas' checkpointed call"), tied with
# zeros, untied with set_to_none (gemma2 with foreach Adam, gemma3_text
# with the logits' softcap), DDP N = 2, theory and measure, the measure's
# losses and weights those without to the bit; --recompute-impl
# non-reentrant (use_reentrant=False): gpt2 and llama on the plain loop,
# DDP N = 2 llama, FSDP N = 2 gpt2, gemma3_text (docs/torch_saved.md,
# "Non-reentrant checkpointing"; autocast and --freeze: 2.6's rows); Hugging Face Trainer's
# loop (--logits dropped, hf_torch.py --keep-logits 0: the model's output
# let go before backward), gpt2 with zeros and llama with set_to_none, each
# in fp32 and under bf16 autocast, theory and measure.
#
# `tests/hf_torch.sh table` (make check-torch-ref; ZS_HF_SMALL=0 leaves out
# GPT-2 small, minutes a run; ZS_TORCH26_ROOT names the 2.6 root): the issue's cases with
# PyTorch's peak, zerosim's paper-level peak and the plain loop's (--wrapper
# none, the PyTorch step summed; "-" with the reason where it is not
# described yet) and each one's ratio, under the PyTorch 1.13 here and,
# when tests/torch26_root.sh can make or find its Debian 13 root, 2.6,
# and there 2.6-only rows with --attn sdpa (1.13 has none) (a table: exit
# 0; `tests/hf_torch.sh torch26` is 2.6's check).
#
# PyTorch is looked for by tests/torch_python.sh; without it: skip (77).
# Exit 0 pass, 1 disagreement, 99 hard error.
set -u
top=${ZS_BUILDDIR:-.}
src=${srcdir:-.}
zerosim=$top/zerosim
if [ ! -x "$zerosim" ]; then
	echo "hf_torch: $zerosim is not built" >&2
	exit 99
fi
name=hf_torch
. "$src/tests/torch_python.sh"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/zs-hf.XXXXXX") || exit 99
# ft_add, ft_rel, ft_run, ft_got: the references in batches
. "$src/tests/batch_lib.sh"
trap 'rm -rf "$tmp"' EXIT HUP INT TERM
export PYTHONDONTWRITEBYTECODE=1

# The issue's tiny shapes: d 64, 2 blocks, 4 heads, V 256 (llama: 2 kv
# heads, ffn 160), 64 positions; dropout 0 (GPT2Config's default is 0.1,
# so gpt2's are given), and the same with dropout 0.1 (-drop), which
# tests/hf_torch.py --dropout config reads from the file as zerosim does.
cat >"$tmp/tiny-gpt2.json" <<'EOF'
{"model_type": "gpt2", "n_embd": 64, "n_head": 4, "n_layer": 2, "n_positions": 64, "vocab_size": 256,
 "activation_function": "gelu_new", "tie_word_embeddings": true, "embd_pdrop": 0.0, "attn_pdrop": 0.0,
 "resid_pdrop": 0.0}
EOF
cat >"$tmp/tiny-llama.json" <<'EOF'
{"model_type": "llama", "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
 "num_key_value_heads": 2, "intermediate_size": 160, "max_position_embeddings": 64, "vocab_size": 256,
 "rms_norm_eps": 1e-05, "tie_word_embeddings": false, "hidden_act": "silu", "attention_dropout": 0.0}
EOF
sed 's/"embd_pdrop": 0.0, "attn_pdrop": 0.0,/"embd_pdrop": 0.1, "attn_pdrop": 0.1,/; s/"resid_pdrop": 0.0/"resid_pdrop": 0.1/' \
	"$tmp/tiny-gpt2.json" >"$tmp/tiny-gpt2-drop.json"
sed 's/"attention_dropout": 0.0/"attention_dropout": 0.1/' "$tmp/tiny-llama.json" >"$tmp/tiny-llama-drop.json"
# gpt2 of d 128, V 512: 470,528 parameters, 1,882,112 B of gradients, more
# than DDP's first bucket of 1 MiB: with bucket_cap_mb 0.25 four buckets
# under 1.13, seven under 2.6 (whose first bucket is the cap once given)
sed 's/"n_embd": 64/"n_embd": 128/; s/"vocab_size": 256/"vocab_size": 512/' "$tmp/tiny-gpt2.json" >"$tmp/tiny-gpt2-wide.json"
# qwen2 (llama's shape, q/k/v biased: modeling_qwen2.py) and qwen3 (q_norm
# and k_norm over each head, a head_dim, 24, apart from hidden / heads:
# modeling_qwen3.py), the tiny llama's shape otherwise
cat >"$tmp/tiny-qwen2.json" <<'EOF'
{"model_type": "qwen2", "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
 "num_key_value_heads": 2, "intermediate_size": 160, "max_position_embeddings": 64, "vocab_size": 256,
 "rms_norm_eps": 1e-06, "tie_word_embeddings": false, "hidden_act": "silu", "attention_dropout": 0.0}
EOF
cat >"$tmp/tiny-qwen3.json" <<'EOF'
{"model_type": "qwen3", "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
 "num_key_value_heads": 2, "head_dim": 24, "intermediate_size": 160, "max_position_embeddings": 64,
 "vocab_size": 256, "rms_norm_eps": 1e-06, "tie_word_embeddings": false, "hidden_act": "silu",
 "attention_dropout": 0.0}
EOF
# phi3 (modeling_phi3.py: qkv_proj and gate_up_proj fused, sliced and
# chunked; pad_token_id null: Phi3Config's 32000 is no row of V 256)
cat >"$tmp/tiny-phi3.json" <<'EOF'
{"model_type": "phi3", "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
 "num_key_value_heads": 2, "intermediate_size": 160, "max_position_embeddings": 64, "vocab_size": 256,
 "rms_norm_eps": 1e-05, "tie_word_embeddings": false, "hidden_act": "silu", "attention_dropout": 0.0,
 "resid_pdrop": 0.0, "pad_token_id": null}
EOF
# phi3 with its residual dropouts (Phi3DecoderLayer's resid_attn_dropout and
# resid_mlp_dropout, nn.Dropout(resid_pdrop))
sed 's/"resid_pdrop": 0.0/"resid_pdrop": 0.1/' "$tmp/tiny-phi3.json" >"$tmp/tiny-phi3-drop.json"
# phi3 and llama with as many k/v heads as heads (repeat_kv's n_rep 1)
sed 's/"num_key_value_heads": 2/"num_key_value_heads": 4/' "$tmp/tiny-phi3.json" >"$tmp/tiny-phi3-mha.json"
sed 's/"num_key_value_heads": 2/"num_key_value_heads": 4/' "$tmp/tiny-llama.json" >"$tmp/tiny-llama-mha.json"
# (qwen3 with 4: 2.6's flash kernel under SDPA, its q_norm and k_norm before the rope)
sed 's/"num_key_value_heads": 2/"num_key_value_heads": 4/' "$tmp/tiny-qwen3.json" >"$tmp/tiny-qwen3-mha.json"
# and with one (MQA: repeat_kv's expand and reshape a view, the heads of stride 0)
sed 's/"num_key_value_heads": 2/"num_key_value_heads": 1/' "$tmp/tiny-llama.json" >"$tmp/tiny-llama-mqa.json"
sed 's/"num_key_value_heads": 2/"num_key_value_heads": 1/' "$tmp/tiny-phi3.json" >"$tmp/tiny-phi3-mqa.json"
sed 's/"tie_word_embeddings": true/"tie_word_embeddings": false/' "$tmp/tiny-gpt2.json" >"$tmp/tiny-gpt2-untied.json"
# gemma2 (modeling_gemma2.py: Gemma2RMSNorm's (1 + w), the embeddings times
# sqrt(hidden), GeGLU with tanh GELU, four norms a block, the scores scaled
# by query_pre_attn_scalar^-1/2 and soft-capped at 50, the logits at 30,
# tied; a head_dim, 16, and a sliding window, 16, shorter than seq 32, so
# that layer 0 adds its windowed mask)
cat >"$tmp/tiny-gemma2.json" <<'EOF'
{"model_type": "gemma2", "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
 "num_key_value_heads": 2, "head_dim": 16, "intermediate_size": 160, "max_position_embeddings": 64,
 "vocab_size": 256, "rms_norm_eps": 1e-06, "hidden_activation": "gelu_pytorch_tanh",
 "query_pre_attn_scalar": 16, "attn_logit_softcapping": 50.0, "final_logit_softcapping": 30.0,
 "sliding_window": 16, "attention_dropout": 0.0, "pad_token_id": 0}
EOF
# gemma3_text (modeling_gemma3.py at 0018aa64, masking_utils.py at 00c4411c:
# the scaled embedding's buffer, q_norm and k_norm on the transposed heads,
# the full and sliding masks built once, rotary_emb once per layer with its
# type's inv_freq; Gemma3TextConfig ties and caps nothing): gemma2's shape
# with a head_dim, 24, and 3 layers at sliding_window_pattern 2 (sliding,
# full, sliding: the third rotary call replaces the first's pair), the
# window 16 shorter than seq 32; -cap: final_logit_softcapping 30
cat >"$tmp/tiny-gemma3_text.json" <<'EOF'
{"model_type": "gemma3_text", "hidden_size": 64, "num_hidden_layers": 3, "num_attention_heads": 4,
 "num_key_value_heads": 2, "head_dim": 24, "intermediate_size": 160, "max_position_embeddings": 64,
 "vocab_size": 256, "rms_norm_eps": 1e-06, "hidden_activation": "gelu_pytorch_tanh",
 "query_pre_attn_scalar": 24, "sliding_window": 16, "sliding_window_pattern": 2, "attention_dropout": 0.0,
 "pad_token_id": 0}
EOF
sed 's/"pad_token_id": 0}/"pad_token_id": 0, "final_logit_softcapping": 30.0}/' "$tmp/tiny-gemma3_text.json" \
	>"$tmp/tiny-gemma3_text-cap.json"
# -w48: the window 48 past seq 32, so that under SDPA (2.6) masking_utils'
# sdpa_mask skips both masks (is_causal); -mha-w48 with 4 k/v heads (the
# CPU's flash kernel, where 2 take the math path)
sed 's/"sliding_window": 16/"sliding_window": 48/' "$tmp/tiny-gemma3_text.json" >"$tmp/tiny-gemma3_text-w48.json"
sed 's/"num_key_value_heads": 2/"num_key_value_heads": 4/' "$tmp/tiny-gemma3_text-w48.json" \
	>"$tmp/tiny-gemma3_text-mha-w48.json"
# llama with as many k/v heads as heads (no grouped-query attention: 2.6's
# CPU SDPA runs its flash kernel), 256 positions (seq 200 takes 64-row blocks)
sed 's/"num_key_value_heads": 2/"num_key_value_heads": 4/; s/"max_position_embeddings": 64/"max_position_embeddings": 256/' \
	"$tmp/tiny-llama.json" >"$tmp/tiny-llama-mha.json"

# tests/zero1_cmp.py REF THEORY MEASURE LABEL: torch's zero1
# (ZeroRedundancyOptimizer over DDP, hf_torch.py --ddp N --zero1: every
# rank's figures in "ranks") against zerosim's theory and measure of
# --wrapper ddp --schemes zero1 at the same N, every rank; exit 1 if not.

# zero1 CFG N TARGS ZARGS LABEL: PyTorch's JSON in $zout (hf_torch.py
# --ddp N --zero1) against zerosim's theory and measure of the same case
# (--seq 32 --batch 2 unless ZARGS gives its own); status 1 on a difference
zero1() {
	zcfg=$1 zN=$2 zzargs=$4 zlabel=$5
	for cmd in theory measure; do
		# shellcheck disable=SC2086
		if ! "$zerosim" $cmd --model "$tmp/$zcfg.json" --seq 32 --batch 2 --precision fp32 --schemes zero1 \
			--world "$zN" --steps 3 --framework torch --wrapper ddp --torch-device cpu --attn eager $zzargs \
			--out "$tmp/z$cmd.json" 2>"$tmp/err"; then
			echo "hf_torch: FAIL: zerosim $cmd, $zlabel: $(cat "$tmp/err")" >&2
			exit 99
		fi
	done
	# (and the binding rank's first step, its own list under DDP: --first)
	"$py" "$src/tests/zero1_cmp.py" "$zout" "$tmp/ztheory.json" "$tmp/zmeasure.json" "$zlabel" --first || status=1
}

# in26 ROOT COMMAND: COMMAND (python3's arguments, paths inside the root)
# in PyTorch 2.6's Debian 13 root, with its own /proc; USE_LIBUV=0: 2.6's
# gloo rendezvous. The table's 2.6 rows and the torch26 check run it.
in26() {
	one "unshare -m sh -c" "mount -t proc proc $1/proc && chroot $1 env USE_LIBUV=0 python3 $2"
}

# weights.py FSDP DDP LABEL: the two measures' final weights, equal to the bit
cat >"$tmp/weights.py" <<'EOF'
import json, sys
f, d = (json.load(open(a))["runs"][0]["weights_digest"] for a in sys.argv[1:3])
print(f"{'ok' if f == d else 'FAIL'}: {sys.argv[3]}: final weights {f} under FSDP, {d} under DDP")
sys.exit(f != d)
EOF

# one PY MODEL ARGS...: runs hf_torch.py, the JSON in $tmp/out.json
one() {
	runpy=$1
	shift
	if ! timeout 1200 $runpy "$@" >"$tmp/err" 2>&1; then
		echo "hf_torch: FAIL: $runpy hf_torch.py $*:" >&2
		tail -20 "$tmp/err" >&2
		exit 99
	fi
}

if [ "${1:-}" = table ]; then
	cat >"$tmp/row.py" <<'EOF'
import json, os, subprocess, sys, tempfile
label, path, model, zerosim = sys.argv[1:5]
d = json.load(open(path))
z = d.get("zerosim", {})
a = d.get("attribution", {})
peak, phase, after, between = d["peak"], d["peak_phase"], d["peak_after"], d["between_steps"][-1]
# zerosim's plain loop for the same run (--framework torch --wrapper none,
# the PyTorch step summed): what it cannot describe yet it refuses ("-").
plain, why = None, ""
with tempfile.TemporaryDirectory() as t:
    raw = json.load(open(model))
    raw["tie_word_embeddings"] = d["tied"]
    cfg = os.path.join(t, os.path.basename(model))
    json.dump(raw, open(cfg, "w"))
    opts = ["--framework", "torch", "--wrapper", "none", "--world", "1", "--schemes", "dp", "--precision",
            "amp-" + d["amp"] if d["amp"] != "none" else "fp32", "--torch-device", "cpu", "--torch-version", "1.13" if d["torch"].startswith("1.") else "2.6",
            "--optimizer-impl", d["optimizer_impl"], "--zero-grad", d["zero_grad"], "--attn", d["attn"]]
    if not d["keep_logits"]:
        opts += ["--logits", "dropped"]  # Trainer's compute_loss: the loss alone
    if d["loss"] != "5.x" or d.get("mask", "where") == "add":
        why = "not described yet"
    else:
        p = subprocess.run([zerosim, "theory", "--model", cfg, "--seq", str(d["seq"]), "--batch", str(d["batch"])]
                           + opts + ["--out", os.path.join(t, "t.json")], capture_output=True, text=True)
        if p.returncode:
            why = p.stderr.strip().split(": ", 1)[-1]
        else:
            plain = json.load(open(os.path.join(t, "t.json")))["rows"][0]["schedule"]["peak_bytes"]
pl = f"{plain:,} | {plain / peak:.4f}" if plain is not None else f"- ({why}) | -"
zp = f"{z['peak']:,}" if "peak" in z else "-"
print(f"| {label} | {d['torch']} | {zp} | {peak:,} | {z.get('ratio', '-')} | {pl} | "
      f"{phase} ({after}) | {between:,} |")
for k, v in a.get("named", {}).items():
    print(f"|   {k} | | | {v:,} | | | | | |")
EOF
	row() { "$py" "$tmp/row.py" "$1" "$2" "$3" "$zerosim"; } # label, the JSON, the model's config here
	# The 2.6 root, made once here when absent (a minute or more, ~1.5 GB);
	# without it, 1.13's rows alone.
	root=$("$src/tests/torch26_root.sh") || root=
	echo "| case | torch | zerosim paper peak | PyTorch peak | ratio | zerosim plain loop peak | ratio | phase (after mark) | between steps |"
	echo "|---|---|---|---|---|---|---|---|---|"
	set -- \
		"gpt2 tiny" "--model $tmp/tiny-gpt2.json" \
		"gpt2 tiny, Trainer (logits dropped)" "--model $tmp/tiny-gpt2.json --keep-logits 0" \
		"gpt2 tiny, untied" "--model $tmp/tiny-gpt2.json --untied" \
		"gpt2 tiny, foreach" "--model $tmp/tiny-gpt2.json --optimizer-impl foreach" \
		"gpt2 tiny, set_to_none" "--model $tmp/tiny-gpt2.json --zero-grad none" \
		"gpt2 tiny, dropout 0.1" "--model $tmp/tiny-gpt2-drop.json --dropout config" \
		"gpt2 tiny, bf16 autocast" "--model $tmp/tiny-gpt2.json --amp bf16" \
		"llama tiny, untied" "--model $tmp/tiny-llama.json" \
		"llama tiny, Trainer (logits dropped)" "--model $tmp/tiny-llama.json --keep-logits 0" \
		"llama tiny, tied" "--model $tmp/tiny-llama.json --tied" \
		"llama tiny, foreach" "--model $tmp/tiny-llama.json --optimizer-impl foreach" \
		"llama tiny, attention dropout 0.1" "--model $tmp/tiny-llama-drop.json --dropout config" \
		"qwen2 tiny" "--model $tmp/tiny-qwen2.json" \
		"qwen3 tiny" "--model $tmp/tiny-qwen3.json" \
		"phi3 tiny" "--model $tmp/tiny-phi3.json" \
		"GPT-2 small seq 256" "--model $src/data/models/gpt2.json --seq 256 --batch 1" \
		"GPT-2 small seq 256, foreach" "--model $src/data/models/gpt2.json --seq 256 --batch 1 --optimizer-impl foreach"
	while [ $# -ge 2 ]; do
		label=$1 args=$2
		shift 2
		case $label in GPT-2*) [ "${ZS_HF_SMALL:-1}" = 0 ] && continue ;; esac
		# shellcheck disable=SC2086
		one "$py" "$src/tests/hf_torch.py" $args --zerosim "$zerosim" --out "$tmp/out.json"
		model=$(echo "$args" | sed 's/^--model \([^ ]*\).*/\1/')
		row "$label" "$tmp/out.json" "$model"
		if [ -n "$root" ]; then
			mkdir -p "$root/tmp/zs-hf" && cp "$src/tests/hf_torch.py" "$tmp"/*.json "$src/data/models/gpt2.json" \
				"$root/tmp/zs-hf/" || exit 99
			a26=$(echo "$args" | sed "s|$tmp/|/tmp/zs-hf/|; s|$src/data/models/|/tmp/zs-hf/|")
			for extra in "--zero-grad zeros" ""; do
				in26 "$root" "/tmp/zs-hf/hf_torch.py $a26 $extra --out /tmp/zs-hf/out.json"
				"$py" - "$root/tmp/zs-hf/out.json" "$tmp/out.json" <<'EOF' || exit 99
import json, sys
d26, d = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
d26["zerosim"] = dict(d.get("zerosim", {}))
if "peak" in d26["zerosim"]:
    d26["zerosim"]["ratio"] = round(d26["zerosim"]["peak"] / d26["peak"], 4)
json.dump(d26, open(sys.argv[1], "w"))
EOF
				row "$label (2.6${extra:+, $extra})" "$root/tmp/zs-hf/out.json" "$model"
			done
		fi
	done
	# SDPA (transformers' default under 2.x; 1.13 has none): 2.6 alone.
	# llama's 2 k/v heads for 4 go to SDPA as enable_gqa, which the CPU
	# runs in its math path (the plain loop refuses it by name).
	[ -n "$root" ] || exit 0
	mkdir -p "$root/tmp/zs-hf" && cp "$src/tests/hf_torch.py" "$tmp"/*.json "$root/tmp/zs-hf/" || exit 99
	set -- \
		"gpt2 tiny, sdpa" "--model $tmp/tiny-gpt2.json --attn sdpa" \
		"llama tiny, kv = heads, sdpa" "--model $tmp/tiny-llama-mha.json --attn sdpa" \
		"llama tiny, kv = heads, sdpa, seq 200 batch 1" "--model $tmp/tiny-llama-mha.json --attn sdpa --seq 200 --batch 1" \
		"llama tiny, sdpa (enable_gqa)" "--model $tmp/tiny-llama.json --attn sdpa"
	while [ $# -ge 2 ]; do
		label=$1 args=$2
		shift 2
		model=$(echo "$args" | sed 's/^--model \([^ ]*\).*/\1/')
		a26=$(echo "$args" | sed "s|$tmp/|/tmp/zs-hf/|")
		for extra in "--zero-grad zeros" ""; do
			in26 "$root" "/tmp/zs-hf/hf_torch.py $a26 $extra --out /tmp/zs-hf/out.json"
			row "$label (2.6${extra:+, $extra})" "$root/tmp/zs-hf/out.json" "$model"
		done
	done
	exit 0
fi

# `tests/hf_torch.sh torch26` (make check-torch26; CI runs it once): the
# comparison above against PyTorch 2.6 in its Debian 13 root
# (tests/torch26_root.sh makes it when absent), at 2.6's defaults and
# beyond: zero_grad set_to_none and zeros, Adam single, foreach and fused,
# SDPA (gpt2; llama with as many k/v heads as heads, and with fewer: the
# math path; qwen2, qwen3 and phi3 with fewer), dropout, activation
# checkpointing (--recompute full: gpt2, llama, llama under DDP, and at 2
# steps (the buckets read from the reducer: 2.6 logs them from the third
# forward), gpt2 and llama with 4 k/v heads under SDPA, llama and phi3 with
# 2 (the math path under no_grad), gpt2 and llama with dropout and under
# bf16 autocast; gemma2 set_to_none, gemma3_text zeros with foreach Adam,
# under DDP N = 2, and with 4 k/v heads under SDPA, the window past the
# sequence; non-reentrant: gpt2 and llama with dropout, DDP N = 2 gpt2,
# gemma2 (its early stop from the saved set), llama
# under bf16 autocast and with all but its last layer frozen), qwen2,
# qwen3 and phi3 (eager), phi3's residual dropouts, gemma2 (eager:
# set_to_none, zeros with foreach Adam), gemma3_text (eager: set_to_none,
# zeros with foreach Adam, DDP N = 2; SDPA with the window past the
# sequence: the math path, set_to_none and zeros with foreach, and the
# flash kernel), gpt2, llama, qwen2,
# qwen3 and phi3 under bf16 autocast (and SDPA's flash kernel under it,
# s50: gpt2, llama and qwen3 with 4 k/v heads, DDP N = 2 and checkpointed
# too), DDP N = 2
# (USE_LIBUV=0: 2.6's gloo rendezvous), FSDP FULL_SHARD (FSDP1,
# backward_prefetch None: hf_torch.py's fsdp_wrap with device_id the CPU,
# tests/fsdp_torch.py's exchanges) at N = 2 (gpt2 set_to_none, llama
# zeros with foreach Adam, gemma2 zeros; autocast: tests/ft_fsdp.sh
# torch26) and N = 3 (gpt2, every unit padded, with 2.6's default
# backward_prefetch BACKWARD_PRE: --prefetch backward-pre), FSDP
# SHARD_GRAD_OP (--schemes zero2: llama zeros foreach at N = 2, gpt2 with
# BACKWARD_PRE at N = 3), and at N = 2 the
# measure's final weights DDP's to the bit, ZeroRedundancyOptimizer over DDP
# at N = 2 and 3 (its every rank), Trainer's loop (--logits dropped: gpt2
# set_to_none, llama zeros under bf16 autocast), SDPA with attention
# dropout (the math path: sdp_utils_cpp's check_for_dropout; gpt2
# set_to_none and zeros with foreach Adam, under DDP N = 2, llama with 2
# k/v heads; the -ev rows also allocation for allocation: hf_torch.py
# --trace's clean and first steps against tests/ag_events). PyTorch
# runs in the root (hf_torch.py alone: zerosim is this machine's binary),
# zerosim's theory and measure here; equal to the byte or this fails.
# Without a root: skip (77), a failure under ZS_REQUIRE_TORCH26=1.
if [ "${1:-}" = torch26 ]; then
	if ! root=$("$src/tests/torch26_root.sh"); then
		[ "${ZS_REQUIRE_TORCH26:-0}" = 1 ] && { echo "hf_torch: FAIL: no PyTorch 2.6 root (ZS_REQUIRE_TORCH26=1)" >&2; exit 1; }
		echo "hf_torch: SKIP: no PyTorch 2.6 root (tests/torch26_root.sh)" >&2
		exit 77
	fi
	in=/tmp/zs-hf26.$$
	mkdir -p "$root$in" && cp "$src/tests/hf_torch.py" "$src/tests/fsdp_torch.py" "$tmp"/tiny-*.json "$root$in/" || exit 99
	trap 'rm -rf "$tmp" "${root:?}$in"' EXIT HUP INT TERM
	status=0
	# (a row whose label starts with "+" runs under make check-torch-full alone:
	# tests/torch_python.sh's torch_row)
	# (twice: phase add collects both loops' PyTorch runs into the batch
	# $tmp/hf, phase check runs it once in the root and compares:
	# tests/batch_lib.sh)
	mode=torch26
	for phase in add check; do
		i=0
		[ $phase = check ] && ft_run hf hf_torch.py
		for case in \
			"gpt2|tiny-gpt2|--zero-grad none|--wrapper none --optimizer-impl single --zero-grad none" \
			"+gpt2-zeros|tiny-gpt2|--zero-grad zeros|--wrapper none --optimizer-impl single --zero-grad zeros" \
			"+gpt2-foreach|tiny-gpt2|--zero-grad none --optimizer-impl foreach|--wrapper none --optimizer-impl foreach --zero-grad none" \
			"gpt2-fused|tiny-gpt2|--zero-grad none --optimizer-impl fused|--wrapper none --optimizer-impl fused --zero-grad none" \
			"gpt2-sdpa|tiny-gpt2|--zero-grad none --attn sdpa|--wrapper none --optimizer-impl single --zero-grad none --attn sdpa" \
			"gpt2-dropout|tiny-gpt2-drop|--zero-grad none --dropout config|--wrapper none --optimizer-impl single --zero-grad none" \
			"gpt2-sdpa-dropout-ev|tiny-gpt2-drop|--zero-grad none --dropout config --attn sdpa|--wrapper none --optimizer-impl single --zero-grad none --attn sdpa" \
			"+gpt2-sdpa-dropout-zeros-foreach|tiny-gpt2-drop|--zero-grad zeros --optimizer-impl foreach --dropout config --attn sdpa|--wrapper none --optimizer-impl foreach --zero-grad zeros --attn sdpa" \
			"ddp2-gpt2-sdpa-dropout|tiny-gpt2-drop|--zero-grad none --ddp 2 --dropout config --attn sdpa|--wrapper ddp --optimizer-impl single --zero-grad none --attn sdpa" \
			"llama-gqa-sdpa-dropout-ev|tiny-llama-drop|--zero-grad none --dropout config --attn sdpa|--wrapper none --optimizer-impl single --zero-grad none --attn sdpa" \
			"gpt2-ckpt|tiny-gpt2|--zero-grad none --recompute full|--wrapper none --optimizer-impl single --zero-grad none --recompute full" \
			"+llama-ckpt-zeros|tiny-llama|--zero-grad zeros --recompute full|--wrapper none --optimizer-impl single --zero-grad zeros --recompute full" \
			"ddp2-llama-ckpt|tiny-llama|--zero-grad none --ddp 2 --recompute full|--wrapper ddp --optimizer-impl single --zero-grad none --recompute full" \
			"+gpt2-sdpa-ckpt-zeros|tiny-gpt2|--zero-grad zeros --attn sdpa --recompute full|--wrapper none --optimizer-impl single --zero-grad zeros --attn sdpa --recompute full" \
			"llama-mha-sdpa-ckpt|tiny-llama-mha|--zero-grad none --attn sdpa --recompute full|--wrapper none --optimizer-impl single --zero-grad none --attn sdpa --recompute full" \
			"llama|tiny-llama|--zero-grad none|--wrapper none --optimizer-impl single --zero-grad none" \
			"llama-zeros-foreach|tiny-llama|--zero-grad zeros --optimizer-impl foreach|--wrapper none --optimizer-impl foreach --zero-grad zeros" \
			"+llama-dropout|tiny-llama-drop|--zero-grad none --dropout config|--wrapper none --optimizer-impl single --zero-grad none" \
			"llama-mha-sdpa|tiny-llama-mha|--zero-grad none --attn sdpa|--wrapper none --optimizer-impl single --zero-grad none --attn sdpa" \
			"+llama-mha-sdpa-zeros|tiny-llama-mha|--zero-grad zeros --attn sdpa|--wrapper none --optimizer-impl single --zero-grad zeros --attn sdpa" \
			"llama-gqa-sdpa|tiny-llama|--zero-grad none --attn sdpa|--wrapper none --optimizer-impl single --zero-grad none --attn sdpa" \
			"+llama-gqa-sdpa-zeros-foreach|tiny-llama|--zero-grad zeros --optimizer-impl foreach --attn sdpa|--wrapper none --optimizer-impl foreach --zero-grad zeros --attn sdpa" \
			"qwen2|tiny-qwen2|--zero-grad none|--wrapper none --optimizer-impl single --zero-grad none" \
			"+qwen2-zeros|tiny-qwen2|--zero-grad zeros|--wrapper none --optimizer-impl single --zero-grad zeros" \
			"qwen3|tiny-qwen3|--zero-grad none|--wrapper none --optimizer-impl single --zero-grad none" \
			"+qwen3-zeros-foreach|tiny-qwen3|--zero-grad zeros --optimizer-impl foreach|--wrapper none --optimizer-impl foreach --zero-grad zeros" \
			"phi3|tiny-phi3|--zero-grad none|--wrapper none --optimizer-impl single --zero-grad none" \
			"+phi3-zeros|tiny-phi3|--zero-grad zeros|--wrapper none --optimizer-impl single --zero-grad zeros" \
			"+qwen2-sdpa|tiny-qwen2|--zero-grad none --attn sdpa|--wrapper none --optimizer-impl single --zero-grad none --attn sdpa" \
			"qwen3-sdpa-zeros|tiny-qwen3|--zero-grad zeros --attn sdpa|--wrapper none --optimizer-impl single --zero-grad zeros --attn sdpa" \
			"+phi3-sdpa|tiny-phi3|--zero-grad none --attn sdpa|--wrapper none --optimizer-impl single --zero-grad none --attn sdpa" \
			"gpt2-sdpa-amp-bf16|tiny-gpt2|--zero-grad none --attn sdpa --amp bf16|--wrapper none --optimizer-impl single --zero-grad none --attn sdpa --precision amp-bf16" \
			"+gpt2-sdpa-amp-bf16-zeros-foreach|tiny-gpt2|--zero-grad zeros --optimizer-impl foreach --attn sdpa --amp bf16|--wrapper none --optimizer-impl foreach --zero-grad zeros --attn sdpa --precision amp-bf16" \
			"llama-mha-sdpa-amp-bf16|tiny-llama-mha|--zero-grad none --attn sdpa --amp bf16|--wrapper none --optimizer-impl single --zero-grad none --attn sdpa --precision amp-bf16" \
			"+llama-mha-sdpa-amp-bf16-zeros|tiny-llama-mha|--zero-grad zeros --attn sdpa --amp bf16|--wrapper none --optimizer-impl single --zero-grad zeros --attn sdpa --precision amp-bf16" \
			"ddp2-gpt2-sdpa-amp-bf16|tiny-gpt2|--zero-grad none --ddp 2 --attn sdpa --amp bf16|--wrapper ddp --optimizer-impl single --zero-grad none --attn sdpa --precision amp-bf16" \
			"qwen3-mha-sdpa-amp-bf16|tiny-qwen3-mha|--zero-grad none --attn sdpa --amp bf16|--wrapper none --optimizer-impl single --zero-grad none --attn sdpa --precision amp-bf16" \
			"gpt2-sdpa-amp-bf16-ckpt|tiny-gpt2|--zero-grad none --attn sdpa --amp bf16 --recompute full|--wrapper none --optimizer-impl single --zero-grad none --attn sdpa --precision amp-bf16 --recompute full" \
			"+llama-mha-sdpa-amp-bf16-ckpt-zeros|tiny-llama-mha|--zero-grad zeros --attn sdpa --amp bf16 --recompute full|--wrapper none --optimizer-impl single --zero-grad zeros --attn sdpa --precision amp-bf16 --recompute full" \
			"ddp2-llama-mha-sdpa-amp-bf16-ckpt|tiny-llama-mha|--zero-grad none --ddp 2 --attn sdpa --amp bf16 --recompute full|--wrapper ddp --optimizer-impl single --zero-grad none --attn sdpa --precision amp-bf16 --recompute full" \
			"+ddp2-llama-mha-sdpa-amp-bf16-zeros|tiny-llama-mha|--zero-grad zeros --ddp 2 --attn sdpa --amp bf16|--wrapper ddp --optimizer-impl single --zero-grad zeros --attn sdpa --precision amp-bf16" \
			"ddp2-gpt2|tiny-gpt2|--zero-grad none --ddp 2|--wrapper ddp --optimizer-impl single --zero-grad none" \
			"+ddp2-gpt2-zeros|tiny-gpt2|--zero-grad zeros --ddp 2|--wrapper ddp --optimizer-impl single --zero-grad zeros" \
			"+ddp2-llama|tiny-llama|--zero-grad none --ddp 2|--wrapper ddp --optimizer-impl single --zero-grad none" \
			"+ddp2-llama-zeros|tiny-llama|--zero-grad zeros --ddp 2|--wrapper ddp --optimizer-impl single --zero-grad zeros" \
			"ddp2-gpt2-buckets|tiny-gpt2-wide|--zero-grad none --ddp 2 --bucket-cap-mb 0.25|--wrapper ddp --optimizer-impl single --zero-grad none --bucket-cap 0.25" \
			"gpt2-amp-bf16|tiny-gpt2|--zero-grad none --amp bf16|--wrapper none --optimizer-impl single --zero-grad none --precision amp-bf16" \
			"+gpt2-amp-bf16-zeros-foreach|tiny-gpt2|--zero-grad zeros --optimizer-impl foreach --amp bf16|--wrapper none --optimizer-impl foreach --zero-grad zeros --precision amp-bf16" \
			"ddp2-gpt2-amp-bf16|tiny-gpt2|--zero-grad none --ddp 2 --amp bf16|--wrapper ddp --optimizer-impl single --zero-grad none --precision amp-bf16" \
			"llama-amp-bf16|tiny-llama|--zero-grad none --amp bf16|--wrapper none --optimizer-impl single --zero-grad none --precision amp-bf16" \
			"+qwen2-amp-bf16|tiny-qwen2|--zero-grad none --amp bf16|--wrapper none --optimizer-impl single --zero-grad none --precision amp-bf16" \
			"+qwen3-amp-bf16-zeros|tiny-qwen3|--zero-grad zeros --amp bf16|--wrapper none --optimizer-impl single --zero-grad zeros --precision amp-bf16" \
			"+phi3-amp-bf16|tiny-phi3|--zero-grad none --amp bf16|--wrapper none --optimizer-impl single --zero-grad none --precision amp-bf16" \
			"phi3-dropout|tiny-phi3-drop|--zero-grad none --dropout config|--wrapper none --optimizer-impl single --zero-grad none" \
			"phi3-mha-batch1|tiny-phi3-mha|--zero-grad zeros --batch 1|--wrapper none --optimizer-impl single --zero-grad zeros --batch 1" \
			"llama-mqa-batch1|tiny-llama-mqa|--zero-grad zeros --batch 1|--wrapper none --optimizer-impl single --zero-grad zeros --batch 1" \
			"gemma2|tiny-gemma2|--zero-grad none|--wrapper none --optimizer-impl single --zero-grad none" \
			"+gemma2-zeros-foreach|tiny-gemma2|--zero-grad zeros --optimizer-impl foreach|--wrapper none --optimizer-impl foreach --zero-grad zeros" \
			"gemma3_text|tiny-gemma3_text|--zero-grad none|--wrapper none --optimizer-impl single --zero-grad none" \
			"+gemma3_text-zeros-foreach|tiny-gemma3_text|--zero-grad zeros --optimizer-impl foreach|--wrapper none --optimizer-impl foreach --zero-grad zeros" \
			"ddp2-gemma3_text|tiny-gemma3_text|--zero-grad none --ddp 2|--wrapper ddp --optimizer-impl single --zero-grad none" \
			"gemma3_text-sdpa|tiny-gemma3_text-w48|--zero-grad none --attn sdpa|--wrapper none --optimizer-impl single --zero-grad none --attn sdpa" \
			"+gemma3_text-sdpa-zeros-foreach|tiny-gemma3_text-w48|--zero-grad zeros --optimizer-impl foreach --attn sdpa|--wrapper none --optimizer-impl foreach --zero-grad zeros --attn sdpa" \
			"gemma3_text-mha-sdpa|tiny-gemma3_text-mha-w48|--zero-grad none --attn sdpa|--wrapper none --optimizer-impl single --zero-grad none --attn sdpa" \
			"fsdp2-gpt2|tiny-gpt2|--zero-grad none --fsdp 2|--wrapper fsdp --optimizer-impl single --zero-grad none" \
			"fsdp2-llama-zeros-foreach|tiny-llama|--zero-grad zeros --optimizer-impl foreach --fsdp 2|--wrapper fsdp --optimizer-impl foreach --zero-grad zeros" \
			"fsdp3-gpt2-backward-pre|tiny-gpt2|--zero-grad none --fsdp 3 --fsdp-prefetch backward-pre|--wrapper fsdp --optimizer-impl single --zero-grad none --prefetch backward-pre" \
			"+fsdp2-gemma2-zeros|tiny-gemma2|--zero-grad zeros --fsdp 2|--wrapper fsdp --optimizer-impl single --zero-grad zeros" \
			"fsdp2-gpt2-ckpt|tiny-gpt2|--zero-grad none --fsdp 2 --recompute full|--wrapper fsdp --optimizer-impl single --zero-grad none --recompute full" \
			"+fsdp2-llama-ckpt-zeros-foreach|tiny-llama|--zero-grad zeros --optimizer-impl foreach --fsdp 2 --recompute full|--wrapper fsdp --optimizer-impl foreach --zero-grad zeros --recompute full" \
			"+fsdp3-gpt2-backward-pre-ckpt|tiny-gpt2|--zero-grad none --fsdp 3 --fsdp-prefetch backward-pre --recompute full|--wrapper fsdp --optimizer-impl single --zero-grad none --prefetch backward-pre --recompute full" \
			"gpt2-dropout-ckpt|tiny-gpt2-drop|--zero-grad none --dropout config --recompute full|--wrapper none --optimizer-impl single --zero-grad none --recompute full" \
			"+llama-dropout-ckpt-zeros|tiny-llama-drop|--zero-grad zeros --dropout config --recompute full|--wrapper none --optimizer-impl single --zero-grad zeros --recompute full" \
			"gpt2-amp-bf16-ckpt|tiny-gpt2|--zero-grad none --amp bf16 --recompute full|--wrapper none --optimizer-impl single --zero-grad none --precision amp-bf16 --recompute full" \
			"+llama-amp-bf16-ckpt-zeros|tiny-llama|--zero-grad zeros --amp bf16 --recompute full|--wrapper none --optimizer-impl single --zero-grad zeros --precision amp-bf16 --recompute full" \
			"fsdp2-zero2-llama-zeros-foreach|tiny-llama|--zero-grad zeros --optimizer-impl foreach --fsdp 2 --fsdp-strategy shard_grad_op|--wrapper fsdp --optimizer-impl foreach --zero-grad zeros" \
			"+fsdp3-zero2-gpt2-backward-pre|tiny-gpt2|--zero-grad none --fsdp 3 --fsdp-prefetch backward-pre --fsdp-strategy shard_grad_op|--wrapper fsdp --optimizer-impl single --zero-grad none --prefetch backward-pre" \
			"gemma2-ckpt|tiny-gemma2|--zero-grad none --recompute full|--wrapper none --optimizer-impl single --zero-grad none --recompute full" \
			"+gemma3_text-ckpt-zeros-foreach|tiny-gemma3_text|--zero-grad zeros --optimizer-impl foreach --recompute full|--wrapper none --optimizer-impl foreach --zero-grad zeros --recompute full" \
			"+ddp2-gemma3_text-ckpt|tiny-gemma3_text|--zero-grad none --ddp 2 --recompute full|--wrapper ddp --optimizer-impl single --zero-grad none --recompute full" \
			"gemma3_text-mha-sdpa-ckpt|tiny-gemma3_text-mha-w48|--zero-grad none --attn sdpa --recompute full|--wrapper none --optimizer-impl single --zero-grad none --attn sdpa --recompute full" \
			"llama-sdpa-ckpt|tiny-llama|--zero-grad none --attn sdpa --recompute full|--wrapper none --optimizer-impl single --zero-grad none --attn sdpa --recompute full" \
			"+phi3-sdpa-ckpt-zeros|tiny-phi3|--zero-grad zeros --attn sdpa --recompute full|--wrapper none --optimizer-impl single --zero-grad zeros --attn sdpa --recompute full" \
			"ddp2-llama-ckpt-steps2|tiny-llama|--zero-grad none --ddp 2 --recompute full --steps 2|--wrapper ddp --optimizer-impl single --zero-grad none --recompute full --steps 2" \
			"gpt2-nonreentrant-ckpt|tiny-gpt2|--zero-grad none --recompute full --recompute-impl non-reentrant|--wrapper none --optimizer-impl single --zero-grad none --recompute full --recompute-impl non-reentrant" \
			"+gpt2-nonreentrant-ckpt-dropout-zeros|tiny-gpt2-drop|--zero-grad zeros --dropout config --recompute full --recompute-impl non-reentrant|--wrapper none --optimizer-impl single --zero-grad zeros --recompute full --recompute-impl non-reentrant" \
			"llama-nonreentrant-ckpt-dropout|tiny-llama-drop|--zero-grad none --dropout config --recompute full --recompute-impl non-reentrant|--wrapper none --optimizer-impl single --zero-grad none --recompute full --recompute-impl non-reentrant" \
			"ddp2-gpt2-nonreentrant-ckpt|tiny-gpt2|--zero-grad none --ddp 2 --recompute full --recompute-impl non-reentrant|--wrapper ddp --optimizer-impl single --zero-grad none --recompute full --recompute-impl non-reentrant" \
			"gemma2-nonreentrant-ckpt|tiny-gemma2|--zero-grad none --recompute full --recompute-impl non-reentrant|--wrapper none --optimizer-impl single --zero-grad none --recompute full --recompute-impl non-reentrant" \
			"llama-amp-bf16-nonreentrant-ckpt-zeros|tiny-llama|--zero-grad zeros --amp bf16 --recompute full --recompute-impl non-reentrant|--wrapper none --optimizer-impl single --zero-grad zeros --precision amp-bf16 --recompute full --recompute-impl non-reentrant" \
			"llama-frozen-nonreentrant-ckpt-zeros|tiny-llama|--zero-grad zeros --freeze all-but-last:1 --recompute full --recompute-impl non-reentrant|--wrapper none --optimizer-impl single --zero-grad zeros --freeze all-but-last:1 --recompute full --recompute-impl non-reentrant" \
			"gpt2-trainer|tiny-gpt2|--zero-grad none --keep-logits 0|--wrapper none --optimizer-impl single --zero-grad none --logits dropped" \
			"llama-trainer-amp-bf16-zeros|tiny-llama|--zero-grad zeros --amp bf16 --keep-logits 0|--wrapper none --optimizer-impl single --zero-grad zeros --precision amp-bf16 --logits dropped" \
			"gpt2-sdpa-trainer-amp-bf16|tiny-gpt2|--zero-grad none --attn sdpa --amp bf16 --keep-logits 0|--wrapper none --optimizer-impl single --zero-grad none --attn sdpa --precision amp-bf16 --logits dropped" \
			"+llama-mha-sdpa-trainer-amp-bf16-zeros|tiny-llama-mha|--zero-grad zeros --attn sdpa --amp bf16 --keep-logits 0|--wrapper none --optimizer-impl single --zero-grad zeros --attn sdpa --precision amp-bf16 --logits dropped" \
			"gpt2-amp-fp16|tiny-gpt2|--zero-grad none --amp fp16|--wrapper none --optimizer-impl single --zero-grad none --precision amp-fp16" \
			"+gpt2-amp-fp16-zeros-foreach|tiny-gpt2|--zero-grad zeros --optimizer-impl foreach --amp fp16|--wrapper none --optimizer-impl foreach --zero-grad zeros --precision amp-fp16" \
			"llama-amp-fp16|tiny-llama|--zero-grad none --amp fp16|--wrapper none --optimizer-impl single --zero-grad none --precision amp-fp16" \
			"ddp2-gpt2-amp-fp16|tiny-gpt2|--zero-grad none --ddp 2 --amp fp16|--wrapper ddp --optimizer-impl single --zero-grad none --precision amp-fp16" \
			"+ddp2-llama-amp-fp16-zeros-foreach|tiny-llama|--zero-grad zeros --optimizer-impl foreach --ddp 2 --amp fp16|--wrapper ddp --optimizer-impl foreach --zero-grad zeros --precision amp-fp16" \
			"+gpt2-sdpa-amp-fp16|tiny-gpt2|--zero-grad none --attn sdpa --amp fp16|--wrapper none --optimizer-impl single --zero-grad none --attn sdpa --precision amp-fp16" \
			"llama-mha-sdpa-amp-fp16-zeros|tiny-llama-mha|--zero-grad zeros --attn sdpa --amp fp16|--wrapper none --optimizer-impl single --zero-grad zeros --attn sdpa --precision amp-fp16" \
			"gpt2-amp-fp16-ckpt|tiny-gpt2|--zero-grad none --amp fp16 --recompute full|--wrapper none --optimizer-impl single --zero-grad none --precision amp-fp16 --recompute full" \
			"+llama-mha-sdpa-trainer-amp-fp16-zeros|tiny-llama-mha|--zero-grad zeros --attn sdpa --amp fp16 --keep-logits 0|--wrapper none --optimizer-impl single --zero-grad zeros --attn sdpa --precision amp-fp16 --logits dropped" \
			"llama-frozen-amp-fp16-zeros|tiny-llama|--zero-grad zeros --amp fp16 --freeze all-but-last:1|--wrapper none --optimizer-impl single --zero-grad zeros --precision amp-fp16 --freeze all-but-last:1" \
			"+phi3-amp-fp16|tiny-phi3|--zero-grad none --amp fp16|--wrapper none --optimizer-impl single --zero-grad none --precision amp-fp16"
		do
			torch_row "$case" || continue
			case=$(torch_label "$case")
			label=${case%%|*} rest=${case#*|}
			cfg=${rest%%|*} rest=${rest#*|}
			targs=${rest%%|*} zargs=${rest#*|}
			case $zargs in *--attn*) ;; *) zargs="$zargs --attn eager" ;; esac
			world=1 tl= schemes=dp
			case $label in ddp2-*) world=2 tl=--timeline ;; fsdp2-*) world=2 schemes=zero3 ;; fsdp3-*) world=3 schemes=zero3 ;; esac
			case $label in fsdp*-zero2-*) schemes=zero2 ;; esac # SHARD_GRAD_OP
			i=$((i + 1))
			# -ev: with --trace, whose clean and first steps tests/ag_events'
			# lists must equal one for one
			tr=
			case $label in *-ev) tr="--trace $i.trace" ;; esac
			if [ $phase = add ]; then
				[ -e "$tmp/hf/$cfg.json" ] || ft_in hf "$tmp/$cfg.json" "$cfg.json"
				# shellcheck disable=SC2086
				ft_add hf --model "$cfg.json" $targs --no-attribution $tr
				continue
			fi
			if [ "$(ft_got hf $i)" != 0 ]; then
				echo "hf_torch: FAIL: hf_torch.py (2.6) --model $cfg.json $targs:" >&2
				tail -n 20 "$tmp/hf/$i.err" "$tmp/hf.log" >&2 2>/dev/null
				exit 99
			fi
			for cmd in theory measure; do
				# (a --precision in zargs comes after fp32's and wins)
				# shellcheck disable=SC2086
				if ! "$zerosim" $cmd --model "$tmp/$cfg.json" --seq 32 --batch 2 --precision fp32 --schemes $schemes \
					--world $world --steps 3 --framework torch --torch-version 2.6 --torch-device cpu $zargs \
					$([ $cmd = measure ] && echo $tl) --out "$tmp/$cmd.json" 2>"$tmp/err"; then
					echo "hf_torch: FAIL: zerosim $cmd, $label (2.6): $(cat "$tmp/err")" >&2
					exit 99
				fi
			done
			# FSDP N = 2's final weights equal DDP's to the bit (as 1.13's, below)
			case $label in
			fsdp2-*)
				# shellcheck disable=SC2086
				if ! "$zerosim" measure --model "$tmp/$cfg.json" --seq 32 --batch 2 --precision fp32 --schemes dp \
					--world 2 --steps 3 --framework torch --torch-version 2.6 --torch-device cpu \
					$(echo "$zargs" | sed 's/--wrapper fsdp/--wrapper ddp/') --out "$tmp/d.json" 2>"$tmp/err"; then
					echo "hf_torch: FAIL: $label (2.6): zerosim measure (DDP): $(cat "$tmp/err")" >&2
					exit 99
				fi
				"$py" "$tmp/weights.py" "$tmp/measure.json" "$tmp/d.json" "$label (2.6)" || status=1
				;;
			esac
			# shellcheck disable=SC2046
			# (the plain loop's and FSDP's first step's peak too: ft_cmp.py --first)
			"$py" "$src/tests/ft_cmp.py" "$tmp/hf/$i.json" "$tmp/theory.json" "$tmp/measure.json" "$label (2.6)" \
				$(case $label in (ddp2-*) echo --buckets ;; (*) echo --first ;; esac) || status=1
			[ -n "$tr" ] || continue
			for st in clean step1; do
				# shellcheck disable=SC2046
				"$top/tests/ag_events" "$tmp/$cfg.json" 2 32 $([ $st = step1 ] && echo step=1) torch-version=2.6 \
					torch-device=cpu zero-grad=none optimizer-impl=single precision=fp32 attn=sdpa >"$tmp/ev" ||
					{ echo "hf_torch: FAIL: $label: tests/ag_events" >&2; exit 99; }
				"$py" - "$tmp/ev" "$tmp/hf/$i.trace.$st" "$label (2.6, $([ $st = step1 ] && echo first || echo clean) step)" <<'EOF' || status=1
import sys
z, t = (open(f).read().split() for f in sys.argv[1:3])
at = next((i for i, (a, b) in enumerate(zip(z, t)) if a != b), min(len(z), len(t)))
ok = z == t and len(z) > 0
print(f"{'ok' if ok else 'FAIL'}: {sys.argv[3]}: " + (f"{len(z)} allocations and frees, 2.6's one for one" if ok else
      f"zerosim's step list departs from 2.6's at event {at} of {len(t)} (zerosim {z[at:at + 3]}, PyTorch {t[at:at + 3]})"))
sys.exit(0 if ok else 1)
EOF
			done
		done
		# torch's zero1 (ZeroRedundancyOptimizer over DDP) as above, 2.6's
		for case in \
			"zero1-2-gpt2|tiny-gpt2|2|--zero-grad none|--optimizer-impl single --zero-grad none" \
			"+zero1-2-llama-zeros-foreach|tiny-llama|2|--zero-grad zeros --optimizer-impl foreach|--optimizer-impl foreach --zero-grad zeros" \
			"zero1-3-gpt2-fused-optimizer-peak|tiny-gpt2|3|--zero-grad none --optimizer-impl fused --seq 4 --batch 1|--optimizer-impl fused --zero-grad none --seq 4 --batch 1" \
			"zero1-2-gpt2-sdpa-amp-bf16|tiny-gpt2|2|--zero-grad none --attn sdpa --amp bf16|--optimizer-impl single --zero-grad none --attn sdpa --precision amp-bf16"
		do
			torch_row "$case" || continue
			case=$(torch_label "$case")
			label=${case%%|*} rest=${case#*|}
			cfg=${rest%%|*} rest=${rest#*|}
			N=${rest%%|*} rest=${rest#*|}
			targs=${rest%%|*} zargs=${rest#*|}
			i=$((i + 1))
			if [ $phase = add ]; then
				[ -e "$tmp/hf/$cfg.json" ] || ft_in hf "$tmp/$cfg.json" "$cfg.json"
				# shellcheck disable=SC2086
				ft_add hf --model "$cfg.json" $targs --ddp "$N" --zero1 --no-attribution
				continue
			fi
			if [ "$(ft_got hf $i)" != 0 ]; then
				echo "hf_torch: FAIL: hf_torch.py (2.6) --model $cfg.json $targs --ddp $N --zero1:" >&2
				tail -n 20 "$tmp/hf/$i.err" "$tmp/hf.log" >&2 2>/dev/null
				exit 99
			fi
			zout=$tmp/hf/$i.json
			zero1 "$cfg" "$N" "$targs" "--torch-version 2.6 $zargs" "$label (2.6)"
		done
	done
	exit $status
fi

status=0
# The plain loop's theory (--framework torch --wrapper none, util/autograd.c's
# step summed) against PyTorch 1.13 itself: the bytes between steps, the
# steady step's peak and the live bytes at every mark the step names, equal
# to the byte. Cases: the label, the PyTorch side's options, zerosim's.
plain="--framework torch --wrapper none --torch-version 1.13 --torch-device cpu --attn eager"
# DDP N = 2 over gloo (hf_torch.py --ddp 2: two processes, rank 0's
# allocator recorded) against zerosim's DDP over the same step
# (--wrapper ddp: util/ag_ddp.c): the theory as above, and the engine's
# measure at N = 2 (two ranks in lockstep, the buckets all-reduced across
# them): every rank's bytes between steps and peak, and rank 0's marks.
# The reference pins the one thing gloo's timing decides (which thread
# frees a tensor a collective took: the buffers' flat copy broadcast at
# every forward and the bucket sizes broadcast at the rebuild), waiting on
# each collective where DDP on a GPU waits on its stream (hf_torch.py
# ddp_group): without the pin a loaded machine made the between-steps bytes
# 4 bytes over from step 2 on.
ddp="--framework torch --wrapper ddp --torch-version 1.13 --torch-device cpu --attn eager"
# FSDP FULL_SHARD (and SHARD_GRAD_OP, the fsdp*-zero2-* cases: hf_torch.py
# --fsdp-strategy shard_grad_op against --schemes zero2, the gathered flat
# parameter kept from forward to the post-backward hook) over gloo, a unit
# per block and the root (hf_torch.py
# --fsdp N, N processes, rank 0's allocator recorded; tests/fsdp_torch.py's
# shims: CUDA's streams no-ops, the two collectives gloo lacks as
# point-to-point exchanges that allocate nothing) against zerosim's FSDP
# over the same step (--wrapper fsdp: util/ag_fsdp.c), theory and measure
# as DDP's, at N = 2 and at N = 3 (a padded unit, the gradient divided
# before and after the reduce-scatter); and at N = 2 the measure's final
# weights (every rank's shards joined) equal DDP's, to the bit.
# Nothing here needed a pin: FSDP's collectives are the point-to-point
# exchanges above, waited before they return, and no tensor they take is
# freed by gloo's worker thread.
fsdp="--framework torch --wrapper fsdp --torch-version 1.13 --torch-device cpu --attn eager"
# hf_case CASE: one case of the loop below, in its phase (add: the
# references join the batches; check: compared)
hf_case() {
	torch_row "$1" || return 0
	case=$(torch_label "$1")
	label=${case%%|*} rest=${case#*|}
	targs=${rest%%|*} zargs=${rest#*|}
	i=$((i + 1)) j=$((j + 1))
	# the checkpointed runs under dropout or autocast: PyTorch's plain run too (below)
	p=
	case $label in *ckpt*) case $label in *dropout* | *amp*) p=$((i + 1)) ;; esac ;; esac
	if [ $phase = add ]; then
		# PyTorch's side a case of the batch $tmp/hf (cached as one); zerosim's
		# theory beside it (hf_torch.py --torch-json --zerosim: no PyTorch)
		# a case of $tmp/hz, run by this build's binary, never cached
		set -f
		# shellcheck disable=SC2046
		ft_add hf $(ft_rel hf "$targs") --no-attribution
		# shellcheck disable=SC2086
		ft_add hz --torch-json "$tmp/hf/$i.json" $targs --zerosim "$zabs" --zerosim-args "$zargs" --no-attribution
		# shellcheck disable=SC2046
		[ -n "$p" ] && ft_add hf $(ft_rel hf "$(echo "$targs" | sed 's/--recompute full//')") --no-attribution
		set +f
		[ -n "$p" ] && i=$p
		return 0
	fi
	if [ "$(ft_got hf $i)" != 0 ] || [ "$(ft_got hz $j)" != 0 ] || ! cp "$tmp/hz/$j.json" "$tmp/out.json"; then
		echo "hf_torch: FAIL: hf_torch.py $targs --zerosim $zerosim --zerosim-args $zargs:" >&2
		tail -n 20 "$tmp/hf/$i.err" "$tmp/hz/$j.out" "$tmp/hz/$j.err" "$tmp/hf.log" "$tmp/hz.log" >&2 2>/dev/null
		exit 99
	fi
	# DDP's, dropout's and the newer families' cases: the engine's measure
	# too (dropout's masks are its own, drawn from --seed: the bytes are
	# what is compared)
	set --
	case $label in
	ddp2-* | fsdp* | *dropout* | qwen* | phi3* | gemma* | *amp* | *ckpt* | *trainer*)
		cfg=$(echo "$targs" | sed 's/^--model \([^ ]*\).*/\1/')
		case $targs in
		*--tied*)
			sed 's/"tie_word_embeddings": false/"tie_word_embeddings": true/' "$cfg" >"$tmp/tied-case.json"
			cfg=$tmp/tied-case.json ;;
		*--untied*) # gemma2 and gemma3_text tie by default (Gemma2Config, Gemma3TextConfig)
			sed 's/"model_type": "\(gemma[23][a-z_]*\)",/"model_type": "\1", "tie_word_embeddings": false,/' "$cfg" \
				>"$tmp/untied-case.json"
			cfg=$tmp/untied-case.json ;;
		esac
		world=1 schemes=dp tl=
		# --timeline: DDP's buckets, each its bytes
		case $label in ddp2-*) world=2 tl=--timeline ;; fsdp2-*) world=2 schemes=zero3 ;; fsdp3-*) world=3 schemes=zero3 ;; esac
		# SHARD_GRAD_OP (hf_torch.py --fsdp-strategy shard_grad_op): zero2
		case $label in fsdp*-zero2-*) schemes=zero2 ;; esac
		# shellcheck disable=SC2086
		if ! "$zerosim" measure --model "$cfg" --seq 32 --batch 2 --precision fp32 --schemes $schemes --world $world \
			--steps 3 $tl $zargs --out "$tmp/m.json" 2>"$tmp/err"; then
			echo "hf_torch: FAIL: $label: zerosim measure: $(cat "$tmp/err")" >&2
			exit 99
		fi
		set -- "$tmp/m.json"
		;;
	esac
	# activation checkpointing reruns each block's forward with the same
	# weights and kernels: the measure's losses and final weights are
	# those of the same run without it, to the bit (PyTorch's are too)
	case $label in
	*ckpt*)
		# shellcheck disable=SC2086
		if ! "$zerosim" measure --model "$cfg" --seq 32 --batch 2 --precision fp32 --schemes $schemes --world $world \
			--steps 3 $(echo "$zargs" | sed 's/--recompute full//; s/--recompute-impl [a-z-]*//') --out "$tmp/d.json" \
			2>"$tmp/err"; then
			echo "hf_torch: FAIL: $label: zerosim measure (no recompute): $(cat "$tmp/err")" >&2
			exit 99
		fi
		"$py" - "$tmp/m.json" "$tmp/d.json" "$label" <<'EOF' || status=1
import json, sys
a, b = (json.load(open(p))["runs"][0] for p in sys.argv[1:3])
ok = a["losses"] == b["losses"] and a["weights_digest"] == b["weights_digest"] and len(a["losses"]) == 3
print(f"{'ok' if ok else 'FAIL'}: {sys.argv[3]}: losses {a['losses']} and weights {a['weights_digest']} with "
      f"--recompute full, {b['losses']} and {b['weights_digest']} without")
sys.exit(0 if ok else 1)
EOF
		# and PyTorch's: with dropout, the checkpoint's rerun draws the
		# forward's masks (preserve_rng_state, torch/utils/checkpoint.py),
		# under autocast it casts as the forward did (the ctx's autocast
		# kwargs): its losses are those of the run without, within 1e-6
		# relative
		case $label in
		*dropout* | *amp*)
			i=$p
			if [ "$(ft_got hf $i)" != 0 ] || ! cp "$tmp/hf/$i.json" "$tmp/plain.json"; then
				echo "hf_torch: FAIL: hf_torch.py $(echo "$targs" | sed 's/--recompute full//'):" >&2
				tail -n 20 "$tmp/hf/$i.err" "$tmp/hf.log" >&2 2>/dev/null
				exit 99
			fi
			"$py" - "$tmp/out.json" "$tmp/plain.json" "$label" <<'EOF' || status=1
import json, sys
a, b = (json.load(open(p))["losses"] for p in sys.argv[1:3])
ok = len(a) == len(b) == 3 and all(abs(x - y) <= 1e-6 * abs(y) for x, y in zip(a, b))
print(f"{'ok' if ok else 'FAIL'}: {sys.argv[3]}: PyTorch's losses {a} with checkpointing, {b} without")
sys.exit(0 if ok else 1)
EOF
			;;
		esac
		;;
	esac
	# FSDP's final weights against DDP's over the same step, ranks and
	# batches: at N = 2 the same arithmetic (DDP's g * 1/2 and FSDP's
	# g / 2 are exact, both sum ranks 0..N-1 in fp32); at N = 3 FSDP
	# divides by 2 and 1.5, DDP multiplies by fp32's 1/3: not bit for bit
	case $label in
	fsdp2-*)
		# shellcheck disable=SC2086
		if ! "$zerosim" measure --model "$cfg" --seq 32 --batch 2 --precision fp32 --schemes dp --world $world \
			--steps 3 $(echo "$zargs" | sed 's/--wrapper fsdp/--wrapper ddp/') --out "$tmp/d.json" 2>"$tmp/err"; then
			echo "hf_torch: FAIL: $label: zerosim measure (DDP): $(cat "$tmp/err")" >&2
			exit 99
		fi
		if ! "$py" "$tmp/weights.py" "$tmp/m.json" "$tmp/d.json" "$label"; then status=1; fi
		;;
	esac
	# the theory hf_torch.py --zerosim wrote into out.json; the measure
	# where there is one; DDP's buckets in its (--timeline)
	# shellcheck disable=SC2046
	# the plain loop's, DDP's and FSDP's first step (its own list: grads
	# made by the first backward, Adam's state by the first step(), DDP's
	# hooks on the constructor's bucket, FSDP's _lazy_init and first
	# iteration's _check_order): its peak too, PyTorch's step_peaks[0]
	if ! "$py" "$src/tests/ft_cmp.py" "$tmp/out.json" - "${1:--}" "$label" \
		$(case $label in (ddp2-*) echo --buckets --first ;; (*) echo --first ;; esac); then status=1; fi
	# autocast's arithmetic: the engine's bf16 kernels (widen to fp32,
	# round once) against its own fp32 run of the same weights and
	# batches: each step's loss within 1e-3 relative and not equal to it
	# (PyTorch's own bf16 and fp32 losses differ by 2e-4 here; it starts
	# from other weights, so its losses are printed beside, not compared)
	case $label in
	*amp*)
		# shellcheck disable=SC2086
		if ! "$zerosim" measure --model "$cfg" --seq 32 --batch 2 --schemes dp --world $world --steps 3 \
			$zargs --precision fp32 --out "$tmp/m32.json" 2>"$tmp/err"; then
			echo "hf_torch: FAIL: $label: zerosim measure (fp32): $(cat "$tmp/err")" >&2
			exit 99
		fi
		"$py" - "$tmp/m.json" "$tmp/m32.json" "$tmp/out.json" "$label" <<'EOF' || status=1
import json, sys
amp, f32 = (json.load(open(p))["runs"][0]["losses"] for p in sys.argv[1:3])
torch_amp = json.load(open(sys.argv[3])).get("losses", [])
worst = max(abs(a - b) / abs(b) for a, b in zip(amp, f32))
# worst > 0: the bf16 path rounds (it is not the fp32 run again)
ok = len(amp) == len(f32) == 3 and 0 < worst <= 1e-3
print(f"{'ok' if ok else 'FAIL'}: {sys.argv[4]}: measure's bf16 losses {[round(x, 4) for x in amp]} against its fp32 "
      f"{[round(x, 4) for x in f32]}: worst {worst:.2e} relative (bound 1e-3); PyTorch's bf16 "
      f"{[round(x, 4) for x in torch_amp[:3]]}")
sys.exit(0 if ok else 1)
EOF
		;;
	esac
}
# torch's zero1: ZeroRedundancyOptimizer(optimizer_class=Adam) over DDP
# (hf_torch.py --ddp N --zero1, gloo; its broadcasts are in place on each
# parameter and free nothing, so no gloo timing reaches the bytes) against
# --wrapper ddp --schemes zero1 (util/ag_zero1.h): every rank's bytes, the
# ranks differing by the parameters each owns. Cases: gpt2 and llama at
# N = 2, gpt2 at N = 3, and at seq 4, batch 1, where every rank's peak is
# in the optimizer step (its local Adam's temporaries): gpt2 with
# set_to_none at N = 3, llama with foreach Adam at N = 5, where rank 2
# binds (by 4 bytes: the first of equals would be rank 0 otherwise); and
# gpt2 under bf16 autocast at N = 2.
z1="--torch-version 1.13 --optimizer-impl"
# (in the phases of the loop above: PyTorch's side cases of its batch)
hf_zero1_cases() {
	for case in \
		"zero1-2-gpt2|tiny-gpt2|2|--zero-grad zeros|$z1 single --zero-grad zeros" \
		"+zero1-2-llama|tiny-llama|2|--zero-grad zeros|$z1 single --zero-grad zeros" \
		"+zero1-3-gpt2|tiny-gpt2|3|--zero-grad zeros|$z1 single --zero-grad zeros" \
		"zero1-5-llama-foreach-optimizer-peak|tiny-llama|5|--zero-grad zeros --optimizer-impl foreach --seq 4 --batch 1|$z1 foreach --zero-grad zeros --seq 4 --batch 1" \
		"zero1-3-gpt2-optimizer-peak|tiny-gpt2|3|--zero-grad none --seq 4 --batch 1|$z1 single --zero-grad none --seq 4 --batch 1" \
		"zero1-2-gpt2-amp-bf16|tiny-gpt2|2|--zero-grad zeros --amp bf16|$z1 single --zero-grad zeros --precision amp-bf16"
	do
		torch_row "$case" || continue
		case=$(torch_label "$case")
		label=${case%%|*} rest=${case#*|}
		cfg=${rest%%|*} rest=${rest#*|}
		N=${rest%%|*} rest=${rest#*|}
		targs=${rest%%|*} zargs=${rest#*|}
		i=$((i + 1))
		if [ $phase = add ]; then
			[ -e "$tmp/hf/$cfg.json" ] || ft_in hf "$tmp/$cfg.json" "$cfg.json"
			# shellcheck disable=SC2086
			ft_add hf --model "$cfg.json" $targs --ddp "$N" --zero1 --no-attribution
			continue
		fi
		if [ "$(ft_got hf $i)" != 0 ]; then
			echo "hf_torch: FAIL: hf_torch.py --model $cfg.json $targs --ddp $N --zero1:" >&2
			tail -n 20 "$tmp/hf/$i.err" "$tmp/hf.log" >&2 2>/dev/null
			exit 99
		fi
		zout=$tmp/hf/$i.json
		zero1 "$cfg" "$N" "$targs" "$zargs" "$label"
	done
}
# (a row whose label starts with "+" runs under make check-torch-full alone:
# tests/torch_python.sh's torch_row)
# (twice: phase add collects every case's references, phase check runs
# them, two python runs in all, and compares: tests/batch_lib.sh)
# (the replays run in $tmp/hz: zerosim by its absolute path)
zabs=$(cd "$(dirname "$zerosim")" && pwd)/$(basename "$zerosim")
for phase in add check; do
	i=0 j=0
	if [ $phase = check ]; then
		ft_run hf hf_torch.py
		ft_run hz hf_torch.py "${ZS_TORCH_PY:-$py}"
	fi
	for case in \
		"gpt2|--model $tmp/tiny-gpt2.json --zero-grad zeros|$plain --optimizer-impl single --zero-grad zeros" \
		"gpt2-untied|--model $tmp/tiny-gpt2.json --untied --zero-grad zeros|$plain --optimizer-impl single --zero-grad zeros" \
		"llama|--model $tmp/tiny-llama.json --zero-grad zeros|$plain --optimizer-impl single --zero-grad zeros" \
		"+llama-tied|--model $tmp/tiny-llama.json --tied --zero-grad zeros|$plain --optimizer-impl single --zero-grad zeros" \
		"gpt2-foreach|--model $tmp/tiny-gpt2.json --zero-grad zeros --optimizer-impl foreach|$plain --optimizer-impl foreach --zero-grad zeros" \
		"llama-set_to_none|--model $tmp/tiny-llama.json --zero-grad none|$plain --optimizer-impl single --zero-grad none" \
		"gpt2-batch1|--model $tmp/tiny-gpt2.json --batch 1 --zero-grad zeros|$plain --optimizer-impl single --zero-grad zeros" \
		"ddp2-gpt2|--model $tmp/tiny-gpt2.json --zero-grad zeros --ddp 2|$ddp --optimizer-impl single --zero-grad zeros" \
		"ddp2-llama|--model $tmp/tiny-llama.json --zero-grad zeros --ddp 2|$ddp --optimizer-impl single --zero-grad zeros" \
		"+ddp2-llama-foreach|--model $tmp/tiny-llama.json --zero-grad zeros --ddp 2 --optimizer-impl foreach|$ddp --optimizer-impl foreach --zero-grad zeros" \
		"+ddp2-gpt2-set_to_none|--model $tmp/tiny-gpt2.json --zero-grad none --ddp 2|$ddp --optimizer-impl single --zero-grad none" \
		"ddp2-gpt2-buckets|--model $tmp/tiny-gpt2-wide.json --zero-grad zeros --ddp 2 --bucket-cap-mb 0.25|$ddp --optimizer-impl single --zero-grad zeros --bucket-cap 0.25" \
		"fsdp2-gpt2|--model $tmp/tiny-gpt2.json --zero-grad zeros --fsdp 2|$fsdp --optimizer-impl single --zero-grad zeros" \
		"fsdp2-llama|--model $tmp/tiny-llama.json --zero-grad zeros --fsdp 2|$fsdp --optimizer-impl single --zero-grad zeros" \
		"+fsdp2-gpt2-set_to_none|--model $tmp/tiny-gpt2.json --zero-grad none --fsdp 2|$fsdp --optimizer-impl single --zero-grad none" \
		"+fsdp2-llama-foreach|--model $tmp/tiny-llama.json --zero-grad zeros --fsdp 2 --optimizer-impl foreach|$fsdp --optimizer-impl foreach --zero-grad zeros" \
		"fsdp3-gpt2|--model $tmp/tiny-gpt2.json --zero-grad zeros --fsdp 3|$fsdp --optimizer-impl single --zero-grad zeros" \
		"+fsdp2-qwen2|--model $tmp/tiny-qwen2.json --zero-grad zeros --fsdp 2|$fsdp --optimizer-impl single --zero-grad zeros" \
		"+fsdp2-phi3|--model $tmp/tiny-phi3.json --zero-grad none --fsdp 2|$fsdp --optimizer-impl single --zero-grad none" \
		"gpt2-dropout|--model $tmp/tiny-gpt2-drop.json --dropout config --zero-grad zeros|$plain --optimizer-impl single --zero-grad zeros" \
		"llama-dropout|--model $tmp/tiny-llama-drop.json --dropout config --zero-grad zeros|$plain --optimizer-impl single --zero-grad zeros" \
		"qwen2|--model $tmp/tiny-qwen2.json --zero-grad zeros|$plain --optimizer-impl single --zero-grad zeros" \
		"+qwen2-set_to_none|--model $tmp/tiny-qwen2.json --zero-grad none|$plain --optimizer-impl single --zero-grad none" \
		"qwen3|--model $tmp/tiny-qwen3.json --zero-grad zeros|$plain --optimizer-impl single --zero-grad zeros" \
		"qwen3-tied-foreach|--model $tmp/tiny-qwen3.json --tied --zero-grad zeros --optimizer-impl foreach|$plain --optimizer-impl foreach --zero-grad zeros" \
		"phi3|--model $tmp/tiny-phi3.json --zero-grad zeros|$plain --optimizer-impl single --zero-grad zeros" \
		"+phi3-tied-set_to_none|--model $tmp/tiny-phi3.json --tied --zero-grad none|$plain --optimizer-impl single --zero-grad none" \
		"gpt2-amp-bf16|--model $tmp/tiny-gpt2.json --amp bf16 --zero-grad zeros|$plain --optimizer-impl single --zero-grad zeros --precision amp-bf16" \
		"+gpt2-untied-amp-bf16-set_to_none|--model $tmp/tiny-gpt2-untied.json --amp bf16 --zero-grad none|$plain --optimizer-impl single --zero-grad none --precision amp-bf16" \
		"ddp2-gpt2-amp-bf16|--model $tmp/tiny-gpt2.json --amp bf16 --zero-grad zeros --ddp 2|$ddp --optimizer-impl single --zero-grad zeros --precision amp-bf16" \
		"+ddp2-llama-amp-bf16|--model $tmp/tiny-llama.json --amp bf16 --zero-grad zeros --ddp 2|$ddp --optimizer-impl single --zero-grad zeros --precision amp-bf16" \
		"+ddp2-qwen3|--model $tmp/tiny-qwen3.json --zero-grad zeros --ddp 2|$ddp --optimizer-impl single --zero-grad zeros" \
		"llama-amp-bf16|--model $tmp/tiny-llama.json --amp bf16 --zero-grad zeros|$plain --optimizer-impl single --zero-grad zeros --precision amp-bf16" \
		"+qwen2-amp-bf16|--model $tmp/tiny-qwen2.json --amp bf16 --zero-grad zeros|$plain --optimizer-impl single --zero-grad zeros --precision amp-bf16" \
		"+qwen3-amp-bf16-set_to_none|--model $tmp/tiny-qwen3.json --amp bf16 --zero-grad none|$plain --optimizer-impl single --zero-grad none --precision amp-bf16" \
		"+phi3-amp-bf16|--model $tmp/tiny-phi3.json --amp bf16 --zero-grad zeros|$plain --optimizer-impl single --zero-grad zeros --precision amp-bf16" \
		"phi3-dropout|--model $tmp/tiny-phi3-drop.json --dropout config --zero-grad zeros|$plain --optimizer-impl single --zero-grad zeros" \
		"gemma2|--model $tmp/tiny-gemma2.json --zero-grad zeros|$plain --optimizer-impl single --zero-grad zeros" \
		"+gemma2-untied-set_to_none|--model $tmp/tiny-gemma2.json --untied --zero-grad none|$plain --optimizer-impl single --zero-grad none" \
		"ddp2-gemma2|--model $tmp/tiny-gemma2.json --zero-grad zeros --ddp 2|$ddp --optimizer-impl single --zero-grad zeros" \
		"+fsdp2-gemma2|--model $tmp/tiny-gemma2.json --zero-grad zeros --fsdp 2|$fsdp --optimizer-impl single --zero-grad zeros" \
		"gemma3_text|--model $tmp/tiny-gemma3_text.json --zero-grad zeros|$plain --optimizer-impl single --zero-grad zeros" \
		"+gemma3_text-cap-untied-set_to_none|--model $tmp/tiny-gemma3_text-cap.json --untied --zero-grad none|$plain --optimizer-impl single --zero-grad none" \
		"ddp2-gemma3_text|--model $tmp/tiny-gemma3_text.json --zero-grad zeros --ddp 2|$ddp --optimizer-impl single --zero-grad zeros" \
		"+fsdp2-gemma3_text|--model $tmp/tiny-gemma3_text.json --zero-grad zeros --fsdp 2|$fsdp --optimizer-impl single --zero-grad zeros" \
		"fsdp2-gpt2-ckpt-set_to_none|--model $tmp/tiny-gpt2.json --zero-grad none --fsdp 2 --recompute full|$fsdp --optimizer-impl single --zero-grad none --recompute full" \
		"gpt2-nonreentrant-ckpt|--model $tmp/tiny-gpt2.json --zero-grad zeros --recompute full --recompute-impl non-reentrant|$plain --optimizer-impl single --zero-grad zeros --recompute full --recompute-impl non-reentrant" \
		"llama-nonreentrant-ckpt-set_to_none|--model $tmp/tiny-llama.json --zero-grad none --recompute full --recompute-impl non-reentrant|$plain --optimizer-impl single --zero-grad none --recompute full --recompute-impl non-reentrant" \
		"ddp2-llama-nonreentrant-ckpt-set_to_none|--model $tmp/tiny-llama.json --zero-grad none --ddp 2 --recompute full --recompute-impl non-reentrant|$ddp --optimizer-impl single --zero-grad none --recompute full --recompute-impl non-reentrant" \
		"+fsdp2-gpt2-nonreentrant-ckpt|--model $tmp/tiny-gpt2.json --zero-grad zeros --fsdp 2 --recompute full --recompute-impl non-reentrant|$fsdp --optimizer-impl single --zero-grad zeros --recompute full --recompute-impl non-reentrant" \
		"gemma3_text-nonreentrant-ckpt|--model $tmp/tiny-gemma3_text.json --zero-grad zeros --recompute full --recompute-impl non-reentrant|$plain --optimizer-impl single --zero-grad zeros --recompute full --recompute-impl non-reentrant" \
		"gpt2-trainer|--model $tmp/tiny-gpt2.json --zero-grad zeros --keep-logits 0|$plain --optimizer-impl single --zero-grad zeros --logits dropped" \
		"+llama-trainer-set_to_none|--model $tmp/tiny-llama.json --zero-grad none --keep-logits 0|$plain --optimizer-impl single --zero-grad none --logits dropped" \
		"gpt2-trainer-amp-bf16|--model $tmp/tiny-gpt2.json --amp bf16 --zero-grad zeros --keep-logits 0|$plain --optimizer-impl single --zero-grad zeros --precision amp-bf16 --logits dropped" \
		"+llama-trainer-amp-bf16-set_to_none|--model $tmp/tiny-llama.json --amp bf16 --zero-grad none --keep-logits 0|$plain --optimizer-impl single --zero-grad none --precision amp-bf16 --logits dropped" \
		"fsdp2-llama-ckpt|--model $tmp/tiny-llama.json --zero-grad zeros --fsdp 2 --recompute full|$fsdp --optimizer-impl single --zero-grad zeros --recompute full" \
		"fsdp2-zero2-gpt2|--model $tmp/tiny-gpt2.json --zero-grad zeros --fsdp 2 --fsdp-strategy shard_grad_op|$fsdp --optimizer-impl single --zero-grad zeros" \
		"+fsdp2-zero2-llama-set_to_none|--model $tmp/tiny-llama.json --zero-grad none --fsdp 2 --fsdp-strategy shard_grad_op|$fsdp --optimizer-impl single --zero-grad none" \
		"+fsdp3-zero2-gpt2|--model $tmp/tiny-gpt2.json --zero-grad zeros --fsdp 3 --fsdp-strategy shard_grad_op|$fsdp --optimizer-impl single --zero-grad zeros" \
		"+fsdp2-zero2-gpt2-ckpt-set_to_none|--model $tmp/tiny-gpt2.json --zero-grad none --fsdp 2 --fsdp-strategy shard_grad_op --recompute full|$fsdp --optimizer-impl single --zero-grad none --recompute full" \
		"+fsdp2-zero2-llama-ckpt|--model $tmp/tiny-llama.json --zero-grad zeros --fsdp 2 --fsdp-strategy shard_grad_op --recompute full|$fsdp --optimizer-impl single --zero-grad zeros --recompute full" \
		"gpt2-ckpt|--model $tmp/tiny-gpt2.json --zero-grad zeros --recompute full|$plain --optimizer-impl single --zero-grad zeros --recompute full" \
		"+gpt2-untied-ckpt-set_to_none|--model $tmp/tiny-gpt2-untied.json --zero-grad none --recompute full|$plain --optimizer-impl single --zero-grad none --recompute full" \
		"gpt2-foreach-ckpt|--model $tmp/tiny-gpt2.json --zero-grad zeros --optimizer-impl foreach --recompute full|$plain --optimizer-impl foreach --zero-grad zeros --recompute full" \
		"llama-ckpt|--model $tmp/tiny-llama.json --zero-grad zeros --recompute full|$plain --optimizer-impl single --zero-grad zeros --recompute full" \
		"+llama-tied-ckpt-set_to_none|--model $tmp/tiny-llama.json --tied --zero-grad none --recompute full|$plain --optimizer-impl single --zero-grad none --recompute full" \
		"qwen3-foreach-ckpt|--model $tmp/tiny-qwen3.json --zero-grad zeros --optimizer-impl foreach --recompute full|$plain --optimizer-impl foreach --zero-grad zeros --recompute full" \
		"phi3-ckpt|--model $tmp/tiny-phi3.json --zero-grad zeros --recompute full|$plain --optimizer-impl single --zero-grad zeros --recompute full" \
		"+qwen2-ckpt-set_to_none|--model $tmp/tiny-qwen2.json --zero-grad none --recompute full|$plain --optimizer-impl single --zero-grad none --recompute full" \
		"ddp2-gpt2-buckets-ckpt|--model $tmp/tiny-gpt2-wide.json --zero-grad zeros --ddp 2 --bucket-cap-mb 0.25 --recompute full|$ddp --optimizer-impl single --zero-grad zeros --bucket-cap 0.25 --recompute full" \
		"gpt2-dropout-ckpt|--model $tmp/tiny-gpt2-drop.json --dropout config --zero-grad zeros --recompute full|$plain --optimizer-impl single --zero-grad zeros --recompute full" \
		"+llama-dropout-ckpt-set_to_none|--model $tmp/tiny-llama-drop.json --dropout config --zero-grad none --recompute full|$plain --optimizer-impl single --zero-grad none --recompute full" \
		"+phi3-dropout-ckpt|--model $tmp/tiny-phi3-drop.json --dropout config --zero-grad zeros --recompute full|$plain --optimizer-impl single --zero-grad zeros --recompute full" \
		"+ddp2-gpt2-dropout-ckpt|--model $tmp/tiny-gpt2-drop.json --dropout config --zero-grad zeros --ddp 2 --recompute full|$ddp --optimizer-impl single --zero-grad zeros --recompute full" \
		"+fsdp2-gpt2-dropout-ckpt-set_to_none|--model $tmp/tiny-gpt2-drop.json --dropout config --zero-grad none --fsdp 2 --recompute full|$fsdp --optimizer-impl single --zero-grad none --recompute full" \
		"gpt2-amp-bf16-ckpt|--model $tmp/tiny-gpt2.json --amp bf16 --zero-grad zeros --recompute full|$plain --optimizer-impl single --zero-grad zeros --precision amp-bf16 --recompute full" \
		"llama-amp-bf16-ckpt-set_to_none|--model $tmp/tiny-llama.json --amp bf16 --zero-grad none --recompute full|$plain --optimizer-impl single --zero-grad none --precision amp-bf16 --recompute full" \
		"+qwen3-amp-bf16-ckpt|--model $tmp/tiny-qwen3.json --amp bf16 --zero-grad zeros --recompute full|$plain --optimizer-impl single --zero-grad zeros --precision amp-bf16 --recompute full" \
		"+phi3-amp-bf16-ckpt-set_to_none|--model $tmp/tiny-phi3.json --amp bf16 --zero-grad none --recompute full|$plain --optimizer-impl single --zero-grad none --precision amp-bf16 --recompute full" \
		"ddp2-llama-amp-bf16-ckpt|--model $tmp/tiny-llama.json --amp bf16 --zero-grad zeros --ddp 2 --recompute full|$ddp --optimizer-impl single --zero-grad zeros --precision amp-bf16 --recompute full" \
		"gemma2-ckpt|--model $tmp/tiny-gemma2.json --zero-grad zeros --recompute full|$plain --optimizer-impl single --zero-grad zeros --recompute full" \
		"+gemma2-untied-foreach-ckpt-set_to_none|--model $tmp/tiny-gemma2.json --untied --zero-grad none --optimizer-impl foreach --recompute full|$plain --optimizer-impl foreach --zero-grad none --recompute full" \
		"+ddp2-gemma2-ckpt|--model $tmp/tiny-gemma2.json --zero-grad zeros --ddp 2 --recompute full|$ddp --optimizer-impl single --zero-grad zeros --recompute full" \
		"gemma3_text-ckpt|--model $tmp/tiny-gemma3_text.json --zero-grad zeros --recompute full|$plain --optimizer-impl single --zero-grad zeros --recompute full" \
		"+gemma3_text-cap-untied-ckpt-set_to_none|--model $tmp/tiny-gemma3_text-cap.json --untied --zero-grad none --recompute full|$plain --optimizer-impl single --zero-grad none --recompute full" \
		"+ddp2-gemma3_text-ckpt|--model $tmp/tiny-gemma3_text.json --zero-grad zeros --ddp 2 --recompute full|$ddp --optimizer-impl single --zero-grad zeros --recompute full"
	do
		hf_case "$case"
	done
	hf_zero1_cases
done
# ev_cmp.py ZEROSIM TORCH LABEL: tests/ag_events' list against hf_torch.py
# --trace's clean step (FILE.clean), one for one
cat >"$tmp/ev_cmp.py" <<'EOF'
import sys
z, t = (open(f).read().split() for f in sys.argv[1:3])
at = next((i for i, (a, b) in enumerate(zip(z, t)) if a != b), min(len(z), len(t)))
ok = z == t and len(z) > 0
print(f"{'ok' if ok else 'FAIL'}: {sys.argv[3]}: " + (f"{len(z)} allocations and frees, 1.13's one for one" if ok else
      f"zerosim's step list departs from 1.13's clean step at event {at} of {len(t)} "
      f"(zerosim {z[at:at + 3]}, PyTorch {t[at:at + 3]})"))
sys.exit(0 if ok else 1)
EOF
# As many k/v heads as heads (n_rep 1: modeling_llama.py's repeat_kv returns
# k and v themselves): matmul reshapes v as it lies, a view where batch and
# heads merge (batch 1), else a copy — phi3's v, a slice of qkv_proj's
# product, keeps that product whole to backward at batch 1 (2·T·d·4 bytes
# a layer over a copy of v). phi3 at batch 1 (theory and measure) and llama
# at batch 2 (q and k^T both copied): the bytes as above, and the steady
# step's allocations and frees one for one (tests/ag_events against
# hf_torch.py --trace's clean step).
# One k/v head (MQA): repeat_kv's reshape is a view too (kv, of size 1,
# merges with the stride-0 repeat), so matmul reshapes k^T and v of head
# stride 0: a view at batch 1 (nothing copied), a copy at batch 2 that bmm
# keeps — llama at batch 1 and 2, phi3 at batch 1, as above.
# (twice, as the loop above: phase add puts PyTorch's runs, traces and
# all, into the batch $tmp/tr, cached as one with their trace files
# beside their JSON (tests/torch_cache.py keeps what the folder gained),
# and zerosim's theory into $tmp/tz (--torch-json: no PyTorch, never
# cached); phase check runs both batches and compares)
for phase in add check; do
	i=0
	if [ $phase = check ]; then
		ft_run tr hf_torch.py
		ft_run tz hf_torch.py "${ZS_TORCH_PY:-$py}"
	fi
for case in "phi3-mha-batch1 1 measure" "llama-mha 2" "llama-mqa-batch1 1 measure" "llama-mqa 2" \
	"phi3-mqa-batch1 1 measure"; do
	set -- $case
	cfg=$tmp/tiny-${1%-batch1}.json
	zargs="$plain --optimizer-impl single --zero-grad zeros --seq 32 --batch $2"
	i=$((i + 1))
	if [ $phase = add ]; then
		# shellcheck disable=SC2046
		ft_add tr $(ft_rel tr "--model $cfg") --batch "$2" --zero-grad zeros --no-attribution --trace "$i.trace"
		ft_add tz --torch-json "$tmp/tr/$i.json" --model "$cfg" --batch "$2" --zero-grad zeros --no-attribution \
			--zerosim "$zabs" --zerosim-args "$zargs"
		continue
	fi
	if [ "$(ft_got tr $i)" != 0 ] || [ "$(ft_got tz $i)" != 0 ]; then
		echo "hf_torch: FAIL: $1: hf_torch.py --model $cfg --batch $2 --trace (zerosim-args $zargs):" >&2
		tail -n 20 "$tmp/tr/$i.err" "$tmp/tz/$i.err" "$tmp/tr.log" "$tmp/tz.log" >&2 2>/dev/null
		exit 99
	fi
	m=-
	if [ -n "${3:-}" ]; then
		# shellcheck disable=SC2086
		"$zerosim" measure --model "$cfg" --precision fp32 --schemes dp --world 1 --steps 3 $zargs \
			--out "$tmp/m.json" 2>"$tmp/err" || { echo "hf_torch: FAIL: $1: zerosim measure: $(cat "$tmp/err")" >&2; exit 99; }
		m=$tmp/m.json
	fi
	"$py" "$src/tests/ft_cmp.py" "$tmp/tz/$i.json" - "$m" "$1" || status=1
	"$top/tests/ag_events" "$cfg" "$2" 32 torch-version=1.13 torch-device=cpu zero-grad=zeros optimizer-impl=single \
		precision=fp32 >"$tmp/ev" || { echo "hf_torch: FAIL: $1: tests/ag_events" >&2; exit 99; }
	"$py" "$tmp/ev_cmp.py" "$tmp/ev" "$tmp/tr/$i.trace.clean" "$1" || status=1
	# and the first step's own list against 1.13's first step
	"$top/tests/ag_events" "$cfg" "$2" 32 step=1 torch-version=1.13 torch-device=cpu zero-grad=zeros \
		optimizer-impl=single precision=fp32 >"$tmp/ev" || { echo "hf_torch: FAIL: $1: tests/ag_events step=1" >&2; exit 99; }
	"$py" "$tmp/ev_cmp.py" "$tmp/ev" "$tmp/tr/$i.trace.step1" "$1 (first step)" || status=1
done
done
# DDP with find_unused_parameters=True (hf_torch.py --ddp 2
# --ddp-find-unused; zerosim's --ddp-find-unused on, util/ag_ddp.c), what
# transformers' Trainer passes for a model trained without gradient
# checkpointing: the theory and the engine's measure at N = 2 against
# 1.13 over gloo, bytes between steps, peak and every mark, and the
# reducer's buckets (the constructor's, never rebuilt: the wide gpt2 at
# bucket_cap_mb 0.25 cuts five, the last parameters' first); the theory
# at N = 2 has the measure's traffic (the buckets' all-reduces and the
# used map's); and the steady step event for event against 1.13's clean
# step (tests/ag_events with wrapper=ddp: _DDPSink's clones of the loss
# and the logits, the model's own going as DDP's forward returns); the
# first step, a list of its own on the constructor's buckets (util/ag_ddp.c:
# no rebuild, _DDPSink cloning step 1's outputs): its peak (ft_cmp.py
# --first, theory and measure) and its list event for event (step=1).
fu="$ddp --ddp-find-unused on"
# (in batches, as the loop above: $tmp/fu PyTorch's, $tmp/fz the theory's)
for phase in add check; do
	i=0
	if [ $phase = check ]; then
		ft_run fu hf_torch.py
		ft_run fz hf_torch.py "${ZS_TORCH_PY:-$py}"
	fi
for case in \
	"fu-gpt2|tiny-gpt2|--zero-grad zeros|--optimizer-impl single --zero-grad zeros|zeros" \
	"fu-llama|tiny-llama|--zero-grad zeros|--optimizer-impl single --zero-grad zeros|zeros" \
	"fu-gpt2-set_to_none|tiny-gpt2|--zero-grad none|--optimizer-impl single --zero-grad none|none" \
	"fu-gpt2-buckets|tiny-gpt2-wide|--zero-grad zeros --bucket-cap-mb 0.25|--optimizer-impl single --zero-grad zeros --bucket-cap 0.25|zeros"
do
	IFS='|' read -r label cfg targs zargs zg <<EOF
$case
EOF
	i=$((i + 1))
	if [ $phase = add ]; then
		# shellcheck disable=SC2046,SC2086
		ft_add fu $(ft_rel fu "--model $tmp/$cfg.json") $targs --ddp 2 --ddp-find-unused --no-attribution \
			--trace "$i.trace"
		# shellcheck disable=SC2086
		ft_add fz --torch-json "$tmp/fu/$i.json" --model "$tmp/$cfg.json" $targs --ddp 2 --ddp-find-unused \
			--no-attribution --zerosim "$zabs" --zerosim-args "$fu $zargs"
		continue
	fi
	if [ "$(ft_got fu $i)" != 0 ] || [ "$(ft_got fz $i)" != 0 ] || ! cp "$tmp/fz/$i.json" "$tmp/out.json"; then
		echo "hf_torch: FAIL: $label: hf_torch.py --model $tmp/$cfg.json $targs --ddp 2 --ddp-find-unused --trace:" >&2
		tail -n 20 "$tmp/fu/$i.err" "$tmp/fz/$i.err" "$tmp/fu.log" "$tmp/fz.log" >&2 2>/dev/null
		exit 99
	fi
	for cmd in measure theory; do
		# shellcheck disable=SC2086
		if ! "$zerosim" $cmd --model "$tmp/$cfg.json" --seq 32 --batch 2 --precision fp32 --schemes dp --world 2 \
			$(case $cmd in (measure) echo --steps 3 --timeline ;; esac) $fu $zargs --out "$tmp/$cmd.json" 2>"$tmp/err"; then
			echo "hf_torch: FAIL: $label: zerosim $cmd: $(cat "$tmp/err")" >&2
			exit 99
		fi
	done
	# (and the first step, a list of its own on the constructor's
	# buckets: ft_cmp.py --first, step_peaks[0])
	"$py" "$src/tests/ft_cmp.py" "$tmp/out.json" - "$tmp/measure.json" "$label" --buckets --first || status=1
	"$py" "$src/tests/ft_cmp.py" "$tmp/out.json" "$tmp/theory.json" "$tmp/measure.json" "$label (theory N = 2)" \
		--comm --first || status=1
	# the steady step's list, then the first step's (step=1), each
	# against 1.13's rank 0 event for event
	for st in "" step=1; do
		# shellcheck disable=SC2046,SC2086
		"$top/tests/ag_events" "$tmp/$cfg.json" 2 32 $st torch-version=1.13 torch-device=cpu zero-grad="$zg" \
			optimizer-impl=single precision=fp32 schemes=dp wrapper=ddp ddp-find-unused=on \
			$(case $targs in (*bucket-cap-mb*) echo bucket-cap=0.25 ;; esac) >"$tmp/ev" ||
			{ echo "hf_torch: FAIL: $label: tests/ag_events $st" >&2; exit 99; }
		if [ -z "$st" ]; then
			"$py" "$tmp/ev_cmp.py" "$tmp/ev" "$tmp/fu/$i.trace.rank0.clean" "$label" || status=1
		else
			"$py" "$tmp/ev_cmp.py" "$tmp/ev" "$tmp/fu/$i.trace.rank0.step1" "$label (first step)" || status=1
		fi
	done
done
done
exit $status

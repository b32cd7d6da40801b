#!/bin/sh
# ft_lora — zerosim's --lora-r (issue #23: LoRA) against real PyTorch
# training PEFT v0.20.0's lora.Linear as tests/ft_torch.py writes it
# (peft/tuners/lora/layer.py, the lines cited there and in
# docs/finetune.md): the base model frozen, lora_A and lora_B trained,
# result = base(x) + lora_B(lora_A(x)) * lora_alpha / r.
#
# zerosim's theory (util/autograd.c's step, summed) and its engine's
# measure (the step run for real: the adapters compute, lora_B zeros) of
# the plain loop (--wrapper none), each equal to PyTorch's bytes between
# steps, the steady step's peak and every mark zerosim's step names, to
# the byte. Cases: gpt2 tiny on its default target (c_attn, a Conv1D) r =
# 4, zero_grad zeros and set_to_none; on all its linear layers; on two
# named ones with another alpha; llama tiny on its default targets
# (q_proj, v_proj: over layer 0, whose input requires no grad, q and v
# require grad and k not), on all-linear r = 8; both under --grad-accum 2;
# mistral, qwen2 (biased q, k, v: addmm), qwen3 (q_norm, k_norm) and phi3
# (fused qkv_proj, gate_up_proj; PEFT has no default targets for it:
# given here); under bf16 autocast (labels "autocast": ft_torch.py --amp
# bf16, --precision amp-bf16; DDP N = 2 too); the adapters' dropout (--lora-dropout 0.1, 0.2: bytes, the
# noise kept where x requires grad; losses at 0 only, the masks differ;
# DDP N = 2 K = 2 at 0.2 with its buckets; --write-case keeps the dropout);
# --freeze over PEFT's model (the base frozen already: it freezes the
# adapters it names, blocks:0-0 block 0's, re:lora_A every lora_A, as
# ft_torch.py freezes by name after wrapping), plain loop and DDP N = 2,
# with ft_cmp.py --lora counting one Adam step counter per trained
# adapter tensor and none for a frozen one (a doctored reference with one
# more must fail), and both sides refusing a term that freezes no adapter.
# And the CLI (FSDP's LoRA: tests/ft_fsdp_lora.sh):
# SDPA under autocast where not described (fewer k/v heads, QLoRA), phi3 without targets, a target that matches nothing, and the
# LoRA keys without --lora-r are one line, exit 2, nothing written (the
# reference refuses a target that matches nothing too).
#
# `tests/ft_lora.sh torch26` (make check-torch26): the same comparison
# against PyTorch 2.6 in its Debian 13 root (tests/torch26_root.sh; skip
# without one, a failure under ZS_REQUIRE_TORCH26=1). Its "QLoRA" rows
# (--quant-base nf4, 2.6 only: bitsandbytes 0.47.0 needs torch >= 2.2):
# ft_torch.py's op-by-op Linear4bit (bitsandbytes does not install here;
# docs/finetune.md, "QLoRA under bf16 autocast"), fp32 and under bf16
# autocast with bitsandbytes' compute dtype bf16 (llama, qwen2's biased
# q and v, phi3's fused layers, double quantization, K = 2, and a wide
# MLP whose dequantized fp32 weight and its bf16 copy make the peak).
# Its "loaded in bf16" rows (--load-dtype bf16): without autocast, and
# since s51 under bf16 autocast ("autocast:", only the fp32 adapters'
# linears cast) and checkpointed ("checkpointed:", --recompute full,
# reentrant; DDP N = 2 too): QLoRA's bf16 recipe (docs/finetune.md,
# "QLoRA loaded in bf16 under autocast, and checkpointed"; about 10 s of
# CPU for those five).
# Its "non-reentrant:" rows (s52, and 1.13's): --recompute full
# --recompute-impl non-reentrant on both sides (ft_torch.py's
# --recompute-impl: checkpoint(use_reentrant=False), what TRL's
# SFTTrainer passes; docs/finetune.md, "Non-reentrant checkpointing with
# LoRA"): the plain loop and DDP, fp32 and autocast, K = 2, and under 2.6
# QLoRA's bf16-loaded recipe. Its "bf16 adapters:" rows (s52): TRL's
# SFTTrainer's cast (--lora-dtype bf16 on both sides: ft_torch.py casts
# every trainable parameter's data to bf16 after wrapping, as
# sft_trainer.py lines 1127-1130 do), the plain loop, under autocast,
# non-reentrant checkpointing and DDP N = 2 (its bucket bf16): TRL's
# recipe (docs/finetune.md, "TRL's bf16 adapters").
# Its "sdpa:" rows (s49): transformers' SDPA on both sides (ft_torch.py
# --attn sdpa, zerosim --attn sdpa; docs/schedule.md, "Fine-tuning under
# SDPA"): gpt2's flash kernel over the adapted c_attn, llama's math path
# with layer 0's k requiring no grad, the flash kernel's dk made and let
# go (4 k/v heads), all-linear, the adapters' dropout, K = 2, QLoRA; and
# "sdpa: autocast:" (s50): the flash kernel in bf16 (gpt2 c_attn, llama
# with 4 k/v heads: autocast's copies of q and k; docs/schedule.md, "SDPA
# under bf16 autocast"). Its "fp16:" rows (s52): float16 autocast under
# GradScaler("cpu") (--precision amp-fp16, ft_torch.py --amp fp16; gpt2
# c_attn, llama all-linear K = 2, DDP N = 2 K = 2 no_sync) and the losses
# of a case written under amp-fp16 (docs/schedule.md, "Float16 autocast").
#
# PyTorch is looked for by tests/torch_python.sh; without it: skip (77).
# Exit 0 pass, 1 disagreement, 99 hard error.
set -u
name=ft_lora
# top, src, zerosim, tmp, status, mode; root and in under torch26
. "${srcdir:-.}/tests/ft_lib.sh"

# the tiny gpt2, llama, qwen2, qwen3, phi3 and mistral (tests/ft_lib.sh)
ft_configs 1024 176
# qwen2 with a tied head (as Qwen2.5-0.5B): at seq 2 the step stays below
# what a set-up holding the head's own V x d weight would reach; neither
# side makes it (tests/hf_torch.py, LlamaForCausalLM: the head is made on
# the meta device, as from_pretrained makes it)
sed 's/"tie_word_embeddings": false/"tie_word_embeddings": true/' "$tmp/qwen2.json" >"$tmp/qwen2t.json"
# llama with as many k/v heads as heads: under SDPA the CPU's flash kernel
# (the tiny llama's 2 of 4 take the math path)
sed 's/"num_key_value_heads": 2/"num_key_value_heads": 4/' "$tmp/llama.json" >"$tmp/llamamha.json"
# QLoRA's wide llama (tests/ft_qlora.sh's): an MLP of 4,096, a vocabulary of
# 16, so that at T = 4, B = 1 a dequantized weight makes the peak
sed 's/"intermediate_size": 176/"intermediate_size": 4096/; s/"vocab_size": 1024/"vocab_size": 16/' \
	"$tmp/llama.json" >"$tmp/wide.json"
# llama at hidden 1024, 8 layers, vocab 32000 (674 MB of fp32 parameters):
# DDP's construction broadcasts them in three buckets of 250 MiB (1.13
# distributed.py 643, broadcast_bucket_size), several tensors each
cat >"$tmp/big.json" <<'JSON'
{"model_type": "llama", "hidden_size": 1024, "num_hidden_layers": 8, "num_attention_heads": 8,
 "num_key_value_heads": 8, "intermediate_size": 2816, "max_position_embeddings": 64, "vocab_size": 32000,
 "rms_norm_eps": 1e-05, "tie_word_embeddings": false, "hidden_act": "silu"}
JSON

# The CLI first (needs no PyTorch): one line, exit 2, nothing written,
# the text checked.
plain="--world 1 --framework torch --wrapper none --torch-version 1.13 --torch-device cpu --attn eager --optimizer-impl single"
refuse() { # WHAT TEXT MODEL ARGS...: zerosim theory must refuse with one line naming TEXT, exit 2
	what=$1 text=$2 m=$3
	shift 3
	"$zerosim" theory --model "$tmp/$m.json" --seq 32 --batch 2 --precision fp32 --schemes dp "$@" \
		--out "$tmp/refused.json" >"$tmp/out" 2>"$tmp/err"
	rc=$?
	if [ $rc -ne 2 ] || [ "$(wc -l <"$tmp/err")" -ne 1 ] || [ -e "$tmp/refused.json" ] ||
		! grep -q -- "$text" "$tmp/err"; then
		echo "FAIL: $what: exit $rc, stderr: $(cat "$tmp/err")"
		status=1
	else
		echo "ok: $what: $(cat "$tmp/err")"
	fi
}
# shellcheck disable=SC2086
{
	refuse "--framework torch's own step (--wrapper auto)" "torch --wrapper auto: its DDP buckets and FSDP units hold every parameter" gpt2 \
		--framework torch --world 2 --lora-r 4 # --framework paper and deepspeed run it: tests/paper_lora.sh
	refuse "--attn sdpa under autocast with fewer k/v heads" "autocast with --attn sdpa and fewer k/v heads than heads (SDPA's math path) is not described" \
		llama --world 1 --framework torch --wrapper none --torch-version 2.6 --torch-device cpu --attn sdpa --lora-r 4 \
		--precision amp-bf16
	refuse "--attn sdpa under autocast over QLoRA" "autocast with --attn sdpa and --quant-base nf4 (a 4-bit v_proj's fp32 v) is not described" \
		gpt2 --world 1 --framework torch --wrapper none --torch-version 2.6 --torch-device cpu --attn sdpa --lora-r 4 \
		--quant-base nf4 --precision amp-bf16
	refuse "phi3 without targets" "PEFT has no default LoRA targets for a phi3" phi3 $plain --lora-r 4
	refuse "a target that matches nothing" "no linear layer of" llama $plain --lora-r 4 --lora-targets c_attn
	refuse "lm_head: not described" "output embedding (lm_head) is not described" gpt2 $plain --lora-r 4 --lora-targets lm_head
	refuse "--lora-alpha without --lora-r" "only with --lora-r" gpt2 $plain --lora-alpha 16
	refuse "--freeze with LoRA under the engine's own step" "--freeze: only under --framework torch with --wrapper none" gpt2 --world 2 \
		--framework torch --lora-r 4 --freeze blocks:0-0 # (FSDP, DeepSpeed's engine and the paper's step run it: ft_fsdp_lora.sh, ds_torch.sh, paper_lora.sh)
	refuse "--freeze with LoRA naming no adapter" "its term 'embeddings' matches no adapter of" gpt2 $plain \
		--lora-r 4 --freeze blocks:0-0,embeddings
	refuse "--lora-r 0" "is not a rank" gpt2 $plain --lora-r 0
	refuse "--lora-dtype bf16 without --load-dtype bf16" "--lora-dtype bf16: only with --load-dtype bf16" gpt2 $plain \
		--lora-r 4 --lora-dtype bf16
	refuse "--lora-dtype without --lora-r" "--lora-dtype: only with --lora-r" gpt2 $plain --lora-dtype fp32
	refuse "--lora-dtype bf16 under FSDP" "--lora-dtype bf16 under --wrapper fsdp: not described yet" llama \
		--world 2 --schemes zero3 --framework torch --wrapper fsdp --torch-version 2.6 --torch-device cpu \
		--attn eager --lora-r 4 --quant-base nf4 --load-dtype bf16 --lora-dtype bf16
	refuse "--lora-dtype outside the PyTorch step" "--lora-dtype: the adapters' dtype of the PyTorch step" gpt2 \
		--world 2 --framework deepspeed --schemes zero1 --lora-r 4 --lora-dtype fp32
	refuse "LoRA under autocast outside the PyTorch step" "--precision amp-bf16 is PyTorch's autocast, the PyTorch step's (give --framework torch" \
		gpt2 --world 2 --framework paper --lora-r 4 --precision amp-bf16
	refuse "--lora-dtype: a bad value" "--lora-dtype: 'fp16' is not one of fp32, bf16" gpt2 $plain --lora-r 4 \
		--lora-dtype fp16
	refuse "LoRA under FSDP with --recompute full" "gradient checkpointing with --lora-r under --wrapper fsdp" gpt2 \
		--world 2 --schemes zero3 --framework torch --wrapper fsdp --torch-version 1.13 --torch-device cpu \
		--attn eager --lora-r 4 --recompute full
}

. "$src/tests/torch_python.sh"
export PYTHONDONTWRITEBYTECODE=1
# (ft_torch.py's refusal of a target that matches nothing: the first case
# of the batch below, checked after it ran)
# (and its refusal of a --freeze term that freezes no adapter, as
# zerosim's: the second case)
if [ "$mode" != torch26 ]; then
	ft_in ft "$tmp/llama.json" llama.json
	ft_add ft --model llama.json --lora-r 4 --lora-targets c_attn
	ft_in ft "$tmp/gpt2.json" gpt2.json
	ft_add ft --model gpt2.json --lora-r 4 --freeze blocks:0-0,embeddings
fi

# The losses: zerosim's run written as a case (measure --write-case: the
# weights, every micro-step's tokens and, under LoRA, the adapters as the
# run started them, the case's "lora") and trained by tests/ft_torch.py
# --case: each step's loss (the mean over the micro-steps and, under DDP,
# over the ranks, as measure reports it) within 1e-5 relative; steps 2 and
# 3 move only through the adapters (the base is frozen). Under DDP
# PyTorch's ranks end with the same adapters, as zerosim's do (its own
# check). zerosim reads such a case back to the same losses.
# (ft_lora_losses: run by the case loop below in each of its phases: the
# references cases of its batch.)
ft_lora_losses() {
	if [ "$mode" = torch26 ]; then
		# float16 autocast under GradScaler (a case written under
		# --precision amp-fp16 holds the fp32 weights autocast keeps):
		# within 1e-5, as fp32's; on this tiny llama PyTorch's fp32 run of
		# the case is within 1.6e-6 too, so this holds the run's training,
		# not float16's rounding (the bytes rows above hold that)
		ft_losses "$tmp/loss-fp16" "float16 autocast, GradScaler: LoRA llama r 4 (default targets), K = 2, zeros" \
			"--model $tmp/llama.json --seq 32 --batch 2 --precision amp-fp16 --schemes dp --world 1 --steps 3 \
--framework torch --wrapper none --torch-version 2.6 --torch-device cpu --attn eager --optimizer-impl single \
--zero-grad zeros --grad-accum 2 --lora-r 4" \
			"--model $tmp/llama.json --seq 32 --batch 2 --steps 3 --grad-accum 2 --zero-grad zeros --lora-r 4 --amp fp16"
		return 0
	fi
	for c in "llama 2 1 none" "llama 2 2 zeros" "gpt2 2 1 zeros --recompute full"; do
		# shellcheck disable=SC2086
		set -- $c
		m=$1 K=$2 world=$3 zg=$4 d=$tmp/loss-$3$m
		shift 4
		z="--wrapper none" r=
		[ "$world" -gt 1 ] && z="--wrapper ddp --ddp-no-sync on" r="--world $world --no-sync 1"
		ft_losses "$d" "LoRA $m r 4 (default targets), K = $K, N = $world, $zg${1:+ $*}" \
			"--model $tmp/$m.json --seq 32 --batch 2 --precision fp32 --schemes dp --world $world --steps 3 \
--framework torch $z --torch-version 1.13 --torch-device cpu --attn eager --optimizer-impl single --zero-grad $zg \
--grad-accum $K --lora-r 4 $*" \
			"--model $tmp/$m.json --seq 32 --batch 2 --steps 3 --grad-accum $K --zero-grad $zg $r --lora-r 4 $*"
	done
	d=$tmp/loss-do
	if [ $phase = add ]; then
		# (below: the case for the dropout check, its reference a case of the batch)
		mkdir -p "$d" || exit 99
		# shellcheck disable=SC2086
		if ! "$zerosim" measure -q --model "$tmp/llama.json" --seq 32 --batch 2 --precision fp32 --schemes dp \
			--steps 2 $plain --zero-grad none --lora-r 4 --lora-dropout 0.1 --write-case "$d/case.json" \
			--out "$d/seed.json" 2>"$tmp/err"; then
			echo "ft_lora: FAIL: zerosim measure --write-case --lora-dropout 0.1: $(cat "$tmp/err")" >&2
			exit 99
		fi
		ft_casedir ft "$d"
		set -f
		# shellcheck disable=SC2046
		ft_add ft $(ft_rel ft "--model $tmp/llama.json --seq 32 --batch 2 --steps 2 --zero-grad none --lora-r 4") \
			--case loss-do/case.json
		set +f
		dn=$n
		return 0
	fi
	# zerosim reads such a case back (s49; refused before): its losses
	# are the run's that wrote it, which PyTorch's matched above
	"$zerosim" measure -q --case "$tmp/loss-2llama/case.json" --schemes dp --framework torch --wrapper ddp \
		--ddp-no-sync on --torch-version 1.13 --torch-device cpu --attn eager --optimizer-impl single --zero-grad zeros \
		--out "$tmp/back.json" 2>"$tmp/err" || { cat "$tmp/err" >&2; exit 99; }
	a=$(tr -d ' \n\t' <"$tmp/loss-2llama/seed.json" | grep -o '"losses":\[[^]]*\]' | head -1)
	b=$(tr -d ' \n\t' <"$tmp/back.json" | grep -o '"losses":\[[^]]*\]' | head -1)
	if [ -z "$a" ] || [ "$a" != "$b" ]; then
		echo "FAIL: measure --case of a LoRA case: $b, the run that wrote it $a"
		status=1
	else
		echo "ok: measure --case of a LoRA case: $b, the run's that wrote it"
	fi
	# --lora-dropout reaches the case (its "lora" gives the dropout), and
	# ft_torch.py --case trains it at that dropout only: a case written at
	# 0.1 was trained at 0 (the option's default) before. (About 5 s.)
	rc=$(ft_got ft "$dn")
	cp "$tmp/ft/$dn.err" "$tmp/err" || exit 99
	got=$("$py" -c 'import json, sys; print(json.load(open(sys.argv[1]))["lora"].get("dropout"))' "$d/case.json")
	if [ "$got" != 0.1 ] || [ $rc -ne 2 ] || [ "$(wc -l <"$tmp/err")" -ne 1 ] || ! grep -q 'dropout 0.1' "$tmp/err"; then
		echo "FAIL: --write-case --lora-dropout 0.1: the case's lora.dropout $got; ft_torch.py --case at 0: exit $rc, stderr: $(tail -3 "$tmp/err")"
		status=1
	else
		echo "ok: --write-case --lora-dropout 0.1: the case's lora.dropout $got; ft_torch.py --case at 0: $(cat "$tmp/err")"
	fi
}
# One loop over every case: the plain loop's (--wrapper none, world 1,
# no_sync "-": theory and measure against tests/ft_torch.py to the byte),
# then LoRA under DDP N = 2 (--wrapper ddp; issue #23's case: llama tiny, LoRA
# on q_proj and v_proj, K = 2 with no_sync() on the first micro-step and
# without), and the same case's plain loop at set_to_none: theory and
# measure (both ranks; every rank's adapters equal to rank 0's, the
# engine's own check) equal to tests/ft_torch.py --world 2 to the byte, and
# DDP's buckets as the reducer rebuilt them after step 1 (the adapters'
# gradients alone: lora_B then lora_A of each layer, v_proj before q_proj,
# the last block first) equal to measure's, bytes each: one under 1.13 (its
# first bucket is 1 MiB), six under 2.6 at --bucket-cap 0.0009 (943 B).
# At --seq 16 (llama) the run's peak is the set-up's: DDP's construction
# flattens every parameter, the frozen base too, into one broadcast copy
# (1.13 distributed.py _sync_module_states -> torch/distributed/utils.py
# _sync_params_and_buffers -> dist._broadcast_coalesced; comm.cpp
# BroadcastWork), before the loop draws its batch: ft_torch.py's
# setup_peak, which ft_cmp.py holds zerosim's peak to where it is higher.
# Three broadcast buckets (the "big" llama): comm.cpp broadcast_coalesced
# keeps two in flight (max_in_flight = 2: the first finishes, copied back
# and freed, only when the third starts), so the set-up's peak holds the
# first two buckets' flat copies at once, each bucket the states in
# named_parameters() order (each layer's lora_A and lora_B after its
# base_layer's weight).
# (a row whose label starts with "+" runs under make check-torch-full alone:
# tests/torch_python.sh's torch_row)
# label;model;zero_grad;K;world;no_sync;args
# (twice: phase add collects every case's reference, and the losses' below,
# into one batch, tests/ft_lib.sh's ft_add; phase check runs it once and
# compares)
cat >"$tmp/cases" <<'CASES'
gpt2, default target (c_attn), zeros;gpt2;zeros;1;1;-;--lora-r 4
+gpt2, default target (c_attn), set_to_none;gpt2;none;1;1;-;--lora-r 4
gpt2, all-linear;gpt2;none;1;1;-;--lora-r 4 --lora-targets all-linear
gpt2, two named layers, alpha 16;gpt2;zeros;1;1;-;--lora-r 2 --lora-alpha 16 --lora-targets c_fc,attn.c_proj
gpt2, default target, K = 2;gpt2;none;2;1;-;--lora-r 4
llama, default targets (q_proj, v_proj), zeros;llama;zeros;1;1;-;--lora-r 4
+llama, default targets, set_to_none;llama;none;1;1;-;--lora-r 4
llama, all-linear r = 8;llama;zeros;1;1;-;--lora-r 8 --lora-targets all-linear
+llama, all-linear r = 8, set_to_none;llama;none;1;1;-;--lora-r 8 --lora-targets all-linear
llama, default targets, K = 2;llama;zeros;2;1;-;--lora-r 4
+mistral, default targets (q_proj, v_proj);mistral;zeros;1;1;-;--lora-r 4
qwen2, default targets (biased q_proj, v_proj);qwen2;zeros;1;1;-;--lora-r 4
+qwen2, all-linear;qwen2;none;1;1;-;--lora-r 4 --lora-targets all-linear
qwen2, tied head, default targets, seq 2, batch 1 (the set-up's peak holds no head weight of its own);qwen2t;none;1;1;-;--lora-r 4 --seq 2 --batch 1
qwen3, default targets (q_proj, v_proj: q_norm over a q that requires grad);qwen3;zeros;1;1;-;--lora-r 4
+qwen3, all-linear;qwen3;none;1;1;-;--lora-r 4 --lora-targets all-linear
phi3, qkv_proj (fused);phi3;zeros;1;1;-;--lora-r 4 --lora-targets qkv_proj
phi3, all-linear (gate_up_proj fused);phi3;none;1;1;-;--lora-r 4 --lora-targets all-linear
gpt2, all-linear, dropout 0.1;gpt2;zeros;1;1;-;--lora-r 4 --lora-targets all-linear --lora-dropout 0.1
llama, default targets, dropout 0.2, K = 2;llama;none;2;1;-;--lora-r 4 --lora-dropout 0.2
qwen2, all-linear, dropout 0.1 (biased q, k, v);qwen2;none;1;1;-;--lora-r 4 --lora-targets all-linear --lora-dropout 0.1
2.6: gpt2, default target;gpt2;none;1;1;-;--lora-r 4
2.6: gpt2, all-linear, zeros;gpt2;zeros;1;1;-;--lora-r 4 --lora-targets all-linear
2.6: llama, default targets;llama;none;1;1;-;--lora-r 4
2.6: llama, all-linear r = 8, zeros;llama;zeros;1;1;-;--lora-r 8 --lora-targets all-linear
+2.6: qwen3, default targets;qwen3;none;1;1;-;--lora-r 4
+2.6: qwen2, default targets, zeros;qwen2;zeros;1;1;-;--lora-r 4
+2.6: phi3, qkv_proj, zeros;phi3;zeros;1;1;-;--lora-r 4 --lora-targets qkv_proj
2.6: gpt2, all-linear, dropout 0.1;gpt2;none;1;1;-;--lora-r 4 --lora-targets all-linear --lora-dropout 0.1
autocast: gpt2, default target (c_attn);gpt2;none;1;1;-;--lora-r 4
autocast: gpt2, all-linear, dropout 0.1;gpt2;zeros;1;1;-;--lora-r 4 --lora-targets all-linear --lora-dropout 0.1
autocast: llama, default targets, K = 2;llama;zeros;2;1;-;--lora-r 4
autocast: llama, all-linear (o_proj's and down_proj's bf16 input cast to fp32);llama;none;1;1;-;--lora-r 4 --lora-targets all-linear
+autocast: qwen2, default targets (biased q_proj, v_proj);qwen2;zeros;1;1;-;--lora-r 4
+autocast: phi3, all-linear;phi3;none;1;1;-;--lora-r 4 --lora-targets all-linear
2.6: autocast: llama, all-linear;llama;none;1;1;-;--lora-r 4 --lora-targets all-linear
2.6: QLoRA: gpt2, all-linear (Conv1D, biased), zeros;gpt2;zeros;1;1;-;--lora-r 4 --lora-targets all-linear --quant-base nf4
2.6: autocast: QLoRA: llama, default targets, zeros;llama;zeros;1;1;-;--lora-r 4 --quant-base nf4
2.6: autocast: QLoRA: llama, all-linear, double quant, K = 2;llama;none;2;1;-;--lora-r 4 --lora-targets all-linear --quant-base nf4 --double-quant on
+2.6: autocast: QLoRA: qwen2, default targets (biased q, v: the bias's bf16 copy a call);qwen2;zeros;1;1;-;--lora-r 4 --quant-base nf4
+2.6: autocast: QLoRA: phi3, all-linear (fused), double quant;phi3;none;1;1;-;--lora-r 4 --lora-targets all-linear --quant-base nf4 --double-quant on
2.6: autocast: QLoRA: wide MLP, T = 4, B = 1 (the dequantized fp32 weight and its bf16 copy at the peak);wide;none;1;1;-;--lora-r 4 --quant-base nf4 --seq 4 --batch 1
2.6: QLoRA loaded in bf16: llama, default targets, zeros;llama;zeros;1;1;-;--lora-r 4 --quant-base nf4 --load-dtype bf16
+2.6: QLoRA loaded in bf16: llama, all-linear, double quant, K = 2;llama;none;2;1;-;--lora-r 4 --lora-targets all-linear --quant-base nf4 --double-quant on --load-dtype bf16
2.6: QLoRA loaded in bf16: wide MLP, T = 4, B = 1 (the dequantized bf16 weight at the peak);wide;none;1;1;-;--lora-r 4 --quant-base nf4 --seq 4 --batch 1 --load-dtype bf16
2.6: DDP N = 2, QLoRA loaded in bf16: llama q_proj + v_proj, K = 2, no_sync, zeros;llama;zeros;2;2;on;--lora-r 4 --quant-base nf4 --load-dtype bf16
+2.6: autocast: QLoRA loaded in bf16: llama, default targets, zeros (the fp32 adapters' linears alone cast);llama;zeros;1;1;-;--lora-r 4 --quant-base nf4 --load-dtype bf16
2.6: autocast: QLoRA loaded in bf16: llama, all-linear, double quant, K = 2;llama;none;2;1;-;--lora-r 4 --lora-targets all-linear --quant-base nf4 --double-quant on --load-dtype bf16
2.6: checkpointed: QLoRA loaded in bf16: llama, default targets, zeros;llama;zeros;1;1;-;--lora-r 4 --quant-base nf4 --load-dtype bf16 --recompute full
2.6: checkpointed: autocast: QLoRA loaded in bf16: llama, all-linear, K = 2 (the recipe: bf16-loaded, bf16=True, gradient checkpointing);llama;none;2;1;-;--lora-r 4 --lora-targets all-linear --quant-base nf4 --load-dtype bf16 --recompute full
2.6: checkpointed: autocast: DDP N = 2, QLoRA loaded in bf16: llama q_proj + v_proj, K = 2, no_sync, zeros;llama;zeros;2;2;on;--lora-r 4 --quant-base nf4 --load-dtype bf16 --recompute full
DDP N = 2, llama q_proj + v_proj, K = 2, no_sync, zeros;llama;zeros;2;2;on;--lora-r 4
DDP N = 2, llama q_proj + v_proj, K = 2, without no_sync, set_to_none;llama;none;2;2;off;--lora-r 4
+DDP N = 2, gpt2 c_attn, K = 2, no_sync, set_to_none;gpt2;none;2;2;on;--lora-r 4
DDP N = 2, llama q_proj + v_proj, seq 16: the peak is the set-up's (DDP's broadcast copy of every parameter, frozen ones too);llama;zeros;1;2;off;--lora-r 4 --seq 16
+DDP N = 2, llama q_proj + v_proj, dropout 0.2, K = 2, no_sync, zeros;llama;zeros;2;2;on;--lora-r 4 --lora-dropout 0.2
DDP N = 2, big llama (hidden 1024, 8 layers), seq 2: three broadcast buckets, two in flight at the set-up's peak;big;zeros;1;2;off;--lora-r 4 --seq 2 --batch 1
checkpointed: gpt2, default target, zeros;gpt2;zeros;1;1;-;--lora-r 4 --recompute full
checkpointed: llama, all-linear r = 8, K = 2, set_to_none;llama;none;2;1;-;--lora-r 8 --lora-targets all-linear --recompute full
+checkpointed: phi3, qkv_proj (fused), zeros;phi3;zeros;1;1;-;--lora-r 4 --lora-targets qkv_proj --recompute full
checkpointed: DDP N = 2, llama q_proj + v_proj, K = 2, no_sync, zeros;llama;zeros;2;2;on;--lora-r 4 --recompute full
checkpointed: gpt2, all-linear, dropout 0.1 (the rerun's masks the forward's), zeros;gpt2;zeros;1;1;-;--lora-r 4 --lora-targets all-linear --lora-dropout 0.1 --recompute full
+checkpointed: DDP N = 2, llama q_proj + v_proj, dropout 0.2, K = 2, no_sync, set_to_none;llama;none;2;2;on;--lora-r 4 --lora-dropout 0.2 --recompute full
checkpointed: autocast: llama, all-linear, zeros;llama;zeros;1;1;-;--lora-r 4 --lora-targets all-linear --recompute full
checkpointed: autocast: gpt2, all-linear, dropout 0.1, set_to_none;gpt2;none;1;1;-;--lora-r 4 --lora-targets all-linear --lora-dropout 0.1 --recompute full
non-reentrant: gpt2, all-linear, dropout 0.1, zeros;gpt2;zeros;1;1;-;--lora-r 4 --lora-targets all-linear --lora-dropout 0.1 --recompute full --recompute-impl non-reentrant
non-reentrant: llama, all-linear r = 8, K = 2, set_to_none;llama;none;2;1;-;--lora-r 8 --lora-targets all-linear --recompute full --recompute-impl non-reentrant
non-reentrant: autocast: DDP N = 2, llama q_proj + v_proj, K = 2, no_sync, set_to_none;llama;none;2;2;on;--lora-r 4 --recompute full --recompute-impl non-reentrant
2.6: non-reentrant: llama, all-linear r = 8, K = 2 (down_proj's adapter: its MulBackward0 before the rerun, the early stop before the rerun's number);llama;none;2;1;-;--lora-r 8 --lora-targets all-linear --recompute full --recompute-impl non-reentrant
2.6: non-reentrant: DDP N = 2, llama q_proj + v_proj, K = 2, no_sync, zeros (each adapter's number kept by the forward's node);llama;zeros;2;2;on;--lora-r 4 --recompute full --recompute-impl non-reentrant
+2.6: non-reentrant: autocast: gpt2, all-linear, dropout 0.1, set_to_none;gpt2;none;1;1;-;--lora-r 4 --lora-targets all-linear --lora-dropout 0.1 --recompute full --recompute-impl non-reentrant
2.6: non-reentrant: autocast: QLoRA loaded in bf16: llama, all-linear, K = 2 (TRL's checkpointing, PEFT's fp32 adapters);llama;none;2;1;-;--lora-r 4 --lora-targets all-linear --quant-base nf4 --load-dtype bf16 --recompute full --recompute-impl non-reentrant
2.6: bf16 adapters: QLoRA loaded in bf16: llama, default targets, zeros (TRL's cast: the adapters, their grads and Adam state bf16);llama;zeros;1;1;-;--lora-r 4 --quant-base nf4 --load-dtype bf16 --lora-dtype bf16
+2.6: bf16 adapters: autocast: QLoRA loaded in bf16: llama, all-linear, double quant, K = 2 (autocast casts nothing);llama;none;2;1;-;--lora-r 4 --lora-targets all-linear --quant-base nf4 --double-quant on --load-dtype bf16 --lora-dtype bf16
2.6: bf16 adapters: non-reentrant: autocast: QLoRA loaded in bf16: llama, all-linear, K = 2 (TRL's recipe);llama;none;2;1;-;--lora-r 4 --lora-targets all-linear --quant-base nf4 --load-dtype bf16 --lora-dtype bf16 --recompute full --recompute-impl non-reentrant
2.6: bf16 adapters: non-reentrant: autocast: DDP N = 2, QLoRA loaded in bf16: llama q_proj + v_proj, K = 2, no_sync, zeros (a bf16 bucket);llama;zeros;2;2;on;--lora-r 4 --quant-base nf4 --load-dtype bf16 --lora-dtype bf16 --recompute full --recompute-impl non-reentrant
plain loop, llama q_proj + v_proj, K = 2, set_to_none;llama;none;2;1;-;--lora-r 4
frozen adapters: gpt2 c_attn, block 0's (--freeze blocks:0-0), zeros;gpt2;zeros;1;1;-;--lora-r 4 --freeze blocks:0-0
frozen adapters: llama q_proj + v_proj, block 1's, K = 2, set_to_none;llama;none;2;1;-;--lora-r 4 --freeze blocks:1-1
+frozen adapters: DDP N = 2, llama q_proj + v_proj, block 0's, K = 2, no_sync, zeros;llama;zeros;2;2;on;--lora-r 4 --freeze blocks:0-0
frozen adapters by name alone: llama q_proj + v_proj, every lora_A (lora_B trained over it), set_to_none;llama;none;1;1;-;--lora-r 4 --freeze re:lora_A
autocast: DDP N = 2, llama q_proj + v_proj, K = 2, no_sync, zeros;llama;zeros;2;2;on;--lora-r 4
2.6: DDP N = 2, llama q_proj + v_proj, K = 2, no_sync, set_to_none, six buckets;llama;none;2;2;on;--lora-r 4 --bucket-cap 0.0009
+2.6: DDP N = 2, gpt2 c_attn, K = 2, without no_sync, zeros;gpt2;zeros;2;2;off;--lora-r 4
2.6: sdpa: gpt2, default target (c_attn: the flash kernel over q, k, v of the adapted split);gpt2;none;1;1;-;--lora-r 4
2.6: sdpa: gpt2, all-linear, dropout 0.1, zeros;gpt2;zeros;1;1;-;--lora-r 4 --lora-targets all-linear --lora-dropout 0.1
2.6: sdpa: llama, default targets (layer 0's k requires no grad: the math path's bmm keeps k^T alone), zeros;llama;zeros;1;1;-;--lora-r 4
+2.6: sdpa: llama, all-linear r = 8;llama;none;1;1;-;--lora-r 8 --lora-targets all-linear
2.6: sdpa: llama, 4 k/v heads, default targets (the flash kernel's dk made and let go);llamamha;none;1;1;-;--lora-r 4
+2.6: sdpa: qwen3, default targets (q_norm);qwen3;zeros;1;1;-;--lora-r 4
+2.6: sdpa: llama, default targets, K = 2;llama;none;2;1;-;--lora-r 4
2.6: sdpa: QLoRA: gpt2, all-linear, zeros;gpt2;zeros;1;1;-;--lora-r 4 --lora-targets all-linear --quant-base nf4
+2.6: sdpa: QLoRA: llama, default targets;llama;none;1;1;-;--lora-r 4 --quant-base nf4
2.6: sdpa: autocast: gpt2, default target (the bf16 flash kernel over the adapted c_attn);gpt2;none;1;1;-;--lora-r 4
2.6: sdpa: autocast: llama, 4 k/v heads, default targets (q's and k's bf16 copies), zeros;llamamha;zeros;1;1;-;--lora-r 4
+2.6: sdpa: autocast: checkpointed: gpt2, default target (c_attn), zeros;gpt2;zeros;1;1;-;--lora-r 4 --recompute full
2.6: sdpa: autocast: checkpointed: llama, 4 k/v heads, all-linear;llamamha;none;1;1;-;--lora-r 4 --lora-targets all-linear --recompute full
2.6: fp16: gpt2, default target (c_attn), set_to_none;gpt2;none;1;1;-;--lora-r 4
2.6: fp16: llama, all-linear, K = 2 (each micro-step's scaled loss / K), zeros;llama;zeros;2;1;-;--lora-r 4 --lora-targets all-linear
2.6: fp16: DDP N = 2, llama q_proj + v_proj, K = 2, no_sync, set_to_none;llama;none;2;2;on;--lora-r 4
CASES
i0=0
[ "$mode" != torch26 ] && i0=2
for phase in add check; do
	i=$i0
	[ $phase = check ] && ft_run ft ft_torch.py
	while IFS=';' read -r label m zg K world ns args; do
		[ -n "$label" ] || continue
		version=$(ft_version "$label") || continue
		label=$(torch_label "$label")
		rargs=$args zargs="--wrapper none" cmp=--lora prec=fp32 ft_attn=eager
		# "sdpa:" in the label: transformers' SDPA on both sides (2.6;
		# ft_attn: tests/ft_lib.sh's ft_case reads it)
		# shellcheck disable=SC2034
		case $label in *sdpa:*) ft_attn=sdpa rargs="$rargs --attn sdpa" ;; esac
		# "autocast" in the label: bf16 autocast on both sides; "fp16:"
		# float16 autocast under GradScaler("cpu") (2.6)
		case $label in *autocast*) prec=amp-bf16 ;; *fp16:*) prec=amp-fp16 ;; esac
		if [ "$world" -gt 1 ]; then
			rargs="--world $world --no-sync $([ "$ns" = on ] && echo 1 || echo 0) $(echo "$args" | sed 's/--bucket-cap /--bucket-cap-mb /')"
			zargs="--wrapper ddp" cmp="--lora --buckets"
			[ "$K" -gt 1 ] && zargs="$zargs --ddp-no-sync $ns"
		fi
		[ $prec = amp-bf16 ] && rargs="$rargs --amp bf16"
		[ $prec = amp-fp16 ] && rargs="$rargs --amp fp16"
		tl=
		[ "$world" -gt 1 ] && tl=--timeline
		# shellcheck disable=SC2086
		ft_case $version "$m" "$zg" "$K" "$rargs" "--precision $prec --schemes dp --world $world $zargs $args" $tl
		[ $phase = add ] && continue
		# shellcheck disable=SC2086
		"$py" "$src/tests/ft_cmp.py" "$ref" "$tmp/theory.json" "$tmp/measure.json" "$label ($args)" $cmp || status=1
		case $label in "frozen adapters by name alone:"*)
			# ft_cmp.py --lora counts Adam's step counters: one per trained
			# adapter tensor, none for a frozen one; the reference's JSON
			# with one counter more (as if a frozen lora_A had one) must fail
			"$py" -c 'import json, sys; d = json.load(open(sys.argv[1])); d["persistent"]["adam_trainable"] += 4
json.dump(d, open(sys.argv[2], "w"))' "$ref" "$tmp/doctored.json" || exit 99
			if "$py" "$src/tests/ft_cmp.py" "$tmp/doctored.json" "$tmp/theory.json" "$tmp/measure.json" \
				"doctored: $label ($args)" --lora >"$tmp/out" 2>&1 || ! grep -q "step counters for" "$tmp/out"; then
				echo "FAIL: ft_cmp.py --lora took a step counter for a frozen adapter: $(cat "$tmp/out")"
				status=1
			else
				echo "ok: ft_cmp.py --lora refuses a step counter for a frozen adapter"
			fi
			;;
		esac
		# and the phases to the measured --timeline (tests/json_agree: where
		# the set-up's own peak binds, before the last step the timeline
		# records, no event of it reaches the peak)
		if [ "$world" -gt 1 ] && ! "$top/tests/json_agree" "$tmp/measure.json" "$tmp/theory.json" >"$tmp/agree" 2>&1; then
			echo "FAIL: $label: json_agree: $(cat "$tmp/agree")"
			status=1
		fi
		if [ "$world" -gt 1 ] && [ $version = 1.13 ]; then
			# PyTorch's all-reduces per micro-step: DDP's one bucket once a
			# synchronized backward, none inside no_sync()
			want=$("$py" -c "K, ns = $K, '$ns'; print([0 if ns == 'on' and k < K - 1 else 1 for k in range(K)])")
			got=$("$py" -c "import json, sys; print(json.load(open(sys.argv[1]))['allreduce_per_micro'])" "$ref")
			if [ "$got" != "$want" ]; then
				echo "FAIL: $label: PyTorch's all-reduces per micro-step $got, not $want"
				status=1
			fi
		fi
	done <"$tmp/cases"
	ft_lora_losses
done
if [ "$mode" != torch26 ]; then
	rc=$(ft_got ft 1)
	if [ "$rc" -ne 2 ] || [ "$(wc -l <"$tmp/ft/1.err")" -ne 1 ] || ! grep -q "no module matches" "$tmp/ft/1.err"; then
		echo "FAIL: ft_torch.py --lora-targets c_attn on llama: exit $rc, stderr: $(tail -3 "$tmp/ft/1.err")"
		status=1
	else
		echo "ok: ft_torch.py --lora-targets c_attn on llama: $(cat "$tmp/ft/1.err")"
	fi
	rc=$(ft_got ft 2)
	if [ "$rc" -ne 2 ] || [ "$(wc -l <"$tmp/ft/2.err")" -ne 1 ] ||
		! grep -q "its term 'embeddings' matches no adapter" "$tmp/ft/2.err"; then
		echo "FAIL: ft_torch.py --lora-r 4 --freeze blocks:0-0,embeddings: exit $rc, stderr: $(tail -3 "$tmp/ft/2.err")"
		status=1
	else
		echo "ok: ft_torch.py --lora-r 4 --freeze blocks:0-0,embeddings: $(cat "$tmp/ft/2.err")"
	fi
fi

exit $status

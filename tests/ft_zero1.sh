#!/bin/sh
# ft_zero1 — torch's zero1 (--wrapper ddp --schemes zero1: DDP with
# ZeroRedundancyOptimizer over the PyTorch step, util/ag_zero1.h) with
# frozen parameters, LoRA adapters and gradient accumulation (issue #23),
# against real PyTorch 1.13 (tests/ft_torch.py --world 2 --zero1: the
# optimizer given the trainable parameters alone, as
# Trainer.create_optimizer filters them, so ZeroRedundancyOptimizer
# partitions and broadcasts those alone and each rank's local Adam holds
# state for its share of them).
#
# zerosim's theory (the step summed rank by rank) and its engine's measure
# (both ranks run) at N = 2, every rank's bytes between steps, the steady
# step's peak, every mark zerosim names and the binding rank equal to
# PyTorch's ranks' to the byte (tests/zero1_cmp.py), PyTorch's ranks ending
# with equal weights. Cases: gpt2 and llama tiny with frozen embeddings or
# all but the last block, LoRA (PEFT's default targets), K = 2 with and
# without no_sync() (full training and LoRA), at zeros and set_to_none;
# N = 3: llama --freeze embeddings,blocks:0-0 K = 2 without no_sync, gpt2
# LoRA all-linear dropout 0.1 K = 3 with it. Under autocast (--precision
# amp-bf16, ft_torch.py --amp bf16: each micro-step's forward in
# torch.autocast): llama LoRA K = 2 with no_sync and gpt2 with frozen
# embeddings at N = 2, gpt2 K = 2 without no_sync at N = 3. Checkpointed
# without reentrance (s52, refused before: --recompute-impl non-reentrant,
# ft_torch.py's too): llama LoRA K = 2 with no_sync (1.13), gpt2 with frozen
# embeddings K = 2 (2.6).
# Then the losses: zerosim's run written as a case (measure --write-case)
# trained by tests/ft_torch.py --case --zero1, each step's loss within 1e-5
# relative.
#
# `tests/ft_zero1.sh torch26` (make check-torch26): a subset against
# PyTorch 2.6 in its Debian 13 root (tests/torch26_root.sh; skip without
# one, a failure under ZS_REQUIRE_TORCH26=1), with float16 autocast's
# rows ("fp16:", --precision amp-fp16, ft_torch.py --amp fp16: each
# micro-step's scaler.scale(loss).backward(), one scaler.step(opt) whose
# unscale_ runs over every rank's parameters, ZeroRedundancyOptimizer's
# param_groups being all of them).
#
# PyTorch is looked for by tests/torch_python.sh; without it: skip (77).
# Exit 0 pass, 1 disagreement, 99 hard error.
set -u
name=ft_zero1
# top, src, zerosim, tmp, status, mode; root and in under torch26
. "${srcdir:-.}/tests/ft_lib.sh"
. "$src/tests/torch_python.sh"
export PYTHONDONTWRITEBYTECODE=1
ft_configs 1024 176

# (a row whose label starts with "+" runs under make check-torch-full alone:
# tests/torch_python.sh's torch_row)
# label;model;zero_grad;K;world;no_sync;precision (fp32, amp-bf16 or amp-fp16: ft_torch.py's --amp bf16 or
# fp16, the latter under GradScaler("cpu"), 2.6);args
# (zerosim's and ft_torch.py's alike)
# (twice: phase add collects every case's reference and the losses' below
# into one batch, tests/ft_lib.sh's ft_add; phase check runs it once and
# compares)
cat >"$tmp/cases" <<'CASES'
gpt2, frozen embeddings, zeros;gpt2;zeros;1;2;-;fp32;--freeze embeddings
llama, all-but-last:1, set_to_none;llama;none;1;2;-;fp32;--freeze all-but-last:1
+gpt2 LoRA c_attn r 4, set_to_none;gpt2;none;1;2;-;fp32;--lora-r 4
llama LoRA q_proj + v_proj r 4, K = 2, no_sync, zeros;llama;zeros;2;2;on;fp32;--lora-r 4
+gpt2, K = 2, no_sync, set_to_none;gpt2;none;2;2;on;fp32;
llama, frozen embeddings, K = 2, without no_sync, zeros;llama;zeros;2;2;off;fp32;--freeze embeddings
N = 3, llama, frozen embeddings and block 0, K = 2, without no_sync, zeros;llama;zeros;2;3;off;fp32;--freeze embeddings,blocks:0-0
N = 3, gpt2 LoRA all-linear r 4, dropout 0.1, K = 3, no_sync, set_to_none;gpt2;none;3;3;on;fp32;--lora-r 4 --lora-targets all-linear --lora-dropout 0.1
autocast: llama LoRA q_proj + v_proj r 4, K = 2, no_sync, zeros;llama;zeros;2;2;on;amp-bf16;--lora-r 4
+autocast: gpt2, frozen embeddings, set_to_none;gpt2;none;1;2;-;amp-bf16;--freeze embeddings
autocast: N = 3, gpt2, K = 2, without no_sync, zeros;gpt2;zeros;2;3;off;amp-bf16;
checkpointed: gpt2, frozen embeddings, K = 2, no_sync, zeros;gpt2;zeros;2;2;on;fp32;--freeze embeddings --recompute full
+checkpointed: llama LoRA q_proj + v_proj r 4, set_to_none;llama;none;1;2;-;fp32;--lora-r 4 --recompute full
+checkpointed: N = 3, llama, K = 2, without no_sync, zeros;llama;zeros;2;3;off;fp32;--recompute full
checkpointed: autocast: gpt2, frozen embeddings, set_to_none;gpt2;none;1;2;-;amp-bf16;--freeze embeddings --recompute full
non-reentrant: llama LoRA q_proj + v_proj r 4, K = 2, no_sync, set_to_none;llama;none;2;2;on;fp32;--lora-r 4 --recompute full --recompute-impl non-reentrant
2.6: non-reentrant: gpt2, frozen embeddings, K = 2, no_sync, zeros;gpt2;zeros;2;2;on;fp32;--freeze embeddings --recompute full --recompute-impl non-reentrant
2.6: llama LoRA q_proj + v_proj r 4, K = 2, no_sync, set_to_none;llama;none;2;2;on;fp32;--lora-r 4
+2.6: gpt2, all-but-last:1, K = 2, without no_sync, zeros;gpt2;zeros;2;2;off;fp32;--freeze all-but-last:1
2.6: fp16: llama LoRA q_proj + v_proj r 4, K = 2, no_sync, zeros;llama;zeros;2;2;on;amp-fp16;--lora-r 4
2.6: fp16: N = 3, gpt2, K = 2, without no_sync, zeros;gpt2;zeros;2;3;off;amp-fp16;
CASES
for phase in add check; do
	i=0
	[ $phase = check ] && ft_run ft ft_torch.py
	while IFS=';' read -r label m zg K world ns prec args; do
		[ -n "$label" ] || continue
		version=$(ft_version "$label") || continue
		label=$(torch_label "$label")
		zargs=$args rargs=$args
		[ "$K" -gt 1 ] && zargs="$zargs --ddp-no-sync $ns"
		case $prec in amp-bf16) rargs="$rargs --amp bf16" ;; amp-fp16) rargs="$rargs --amp fp16" ;; esac
		ft_case "$version" "$m" "$zg" "$K" "--world $world --zero1 --no-sync $([ "$ns" = on ] && echo 1 || echo 0) $rargs" \
			"--precision $prec --schemes zero1 --world $world --wrapper ddp $zargs"
		[ $phase = add ] && continue
		"$py" "$src/tests/zero1_cmp.py" "$ref" "$tmp/theory.json" "$tmp/measure.json" "$label" --first || status=1
	done <"$tmp/cases"

	# The losses: zerosim's run written as a case (measure --write-case: the
	# weights, every micro-step's tokens and, under LoRA, the adapters as the
	# run started them) trained by tests/ft_torch.py --case --zero1: each
	# step's loss (the mean over the micro-steps and the ranks, as measure
	# reports it) within 1e-5 relative, and PyTorch's ranks ending with the
	# same trained parameters. (No frozen row yet: --write-case keeps
	# --freeze since zerosim-case/3.)
	if [ "$mode" != torch26 ]; then
		for c in "llama zeros on --lora-r 4" "gpt2 none off" "llama none on --lora-r 4 --recompute full"; do
			# shellcheck disable=SC2086
			set -- $c
			m=$1 zg=$2 ns=$3
			shift 3
			what=$m
			[ $# -gt 0 ] && what="$m $*"
			ft_losses "$tmp/loss-$m$#" "zero1 N = 2, $what, K = 2, no_sync $ns, $zg" \
				"--model $tmp/$m.json --seq 32 --batch 2 --precision fp32 --schemes zero1 --world 2 --steps 3 \
--framework torch --wrapper ddp --ddp-no-sync $ns --torch-version 1.13 --torch-device cpu --attn eager \
--optimizer-impl single --zero-grad $zg --grad-accum 2 $*" \
				"--model $tmp/$m.json --seq 32 --batch 2 --steps 3 --grad-accum 2 --zero-grad $zg --world 2 --zero1 \
--no-sync $([ "$ns" = on ] && echo 1 || echo 0) $*"
		done
	fi
done
exit $status

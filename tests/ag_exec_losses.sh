#!/bin/sh
# ag_exec_losses — the plain loop's engine (--framework torch --wrapper
# none: util/autograd's step run op by op by engine/ag_exec.c, every
# tensor a tracked buffer, every product sgemm over the views) computes
# the training step it describes: its losses equal those of zerosim's fused
# engine (tfm_kernels, itself checked against PyTorch by tfm_torch.sh) for
# the same model, weights, batches and fp32 Adam, within 1e-5 relative
# (they differ only in the order of their sums).
#
# The two see the same task differently: Hugging Face's loss
# (ForCausalLMLoss: labels = input_ids, padded with -100 and shifted)
# scores T − 1 tokens of a row of T, zerosim's engine every one of T with
# its next token. Causal attention makes the first T − 1 positions blind to
# the last, so the plain loop at --seq T is, to the rounding, the fused
# engine at --seq T − 1 over the same rows (tfm_task_batch draws a row's
# tokens whatever its length): same loss, same gradients, same weights.
#
# ZS_AG_STEPS (default 1) sets the steps: 1 checks the forward and the
# loss from the seed's weights; tests/ag_exec_train.sh runs 3 (the
# backward and Adam too). ZS_AG_MODELS (default "gpt2 gpt2-untied") the
# models among gpt2, gpt2-untied, llama, llama-tied, llama-mha (4 k/v heads
# for 4 heads: --attn sdpa only; tests/ag_exec_llama.sh the last three),
# qwen2 (tied), qwen3, phi3, gemma2 and gemma3_text (tests/ag_exec_families.sh).
# A combination the step does not describe yet
# (util/autograd.c refuses it with one line) is said, not checked.
#
# Exit 0 pass, 1 mismatch, 99 hard error.
set -u
top=${ZS_BUILDDIR:-.}
zerosim=$top/zerosim
if [ ! -x "$zerosim" ]; then
	echo "ag_exec_losses: $zerosim is not built" >&2
	exit 99
fi
steps=${ZS_AG_STEPS:-1}
models=${ZS_AG_MODELS:-gpt2 gpt2-untied}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/zs-agx.XXXXXX") || exit 99
trap 'rm -rf "$tmp"' EXIT HUP INT TERM

# The issue's tiny shapes (d 64, 2 blocks, 4 heads, V 256; llama 2 kv
# heads, ffn 160), tied and untied.
cat >"$tmp/gpt2.json" <<'EOF'
{"model_type": "gpt2", "n_embd": 64, "n_head": 4, "n_layer": 2, "n_positions": 64, "vocab_size": 256,
 "embd_pdrop": 0.0, "attn_pdrop": 0.0, "resid_pdrop": 0.0}
EOF
cat >"$tmp/llama.json" <<'EOF'
{"model_type": "llama", "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
 "num_key_value_heads": 2, "intermediate_size": 160, "max_position_embeddings": 64, "vocab_size": 256,
 "rms_norm_eps": 1e-05, "tie_word_embeddings": false}
EOF
sed 's/}$/, "tie_word_embeddings": false}/' "$tmp/gpt2.json" >"$tmp/gpt2-untied.json"
sed 's/"tie_word_embeddings": false/"tie_word_embeddings": true/' "$tmp/llama.json" >"$tmp/llama-tied.json"
# llama with 4 k/v heads for 4 heads: its sdpa is the CPU's flash kernel
sed 's/"num_key_value_heads": 2/"num_key_value_heads": 4/' "$tmp/llama.json" >"$tmp/llama-mha.json"
# qwen2 (q/k/v biased, tied), qwen3 (q_norm, k_norm; head_dim 24 apart
# from hidden / heads) and phi3 (fused qkv_proj and gate_up_proj): the
# llama's shape otherwise
sed 's/"llama"/"qwen2"/; s/"tie_word_embeddings": false/"tie_word_embeddings": true/' "$tmp/llama.json" \
	>"$tmp/qwen2.json"
sed 's/"llama"/"qwen3"/; s/"num_key_value_heads": 2,/"num_key_value_heads": 2, "head_dim": 24,/' "$tmp/llama.json" \
	>"$tmp/qwen3.json"
sed 's/"llama"/"phi3"/; s/}$/, "pad_token_id": null}/' "$tmp/llama.json" >"$tmp/phi3.json"
# gemma2 (Gemma2Config's defaults: tied, soft-caps 50 and 30, scores
# scaled by query_pre_attn_scalar 256's -1/2, window 4096: none at seq 32;
# head_dim 16), the llama's shape otherwise
sed 's/"llama"/"gemma2"/; s/"num_key_value_heads": 2,/"num_key_value_heads": 2, "head_dim": 16,/;
     s/, "tie_word_embeddings": false//' "$tmp/llama.json" >"$tmp/gemma2.json"
# gemma3_text (Gemma3TextConfig's defaults: tied, no soft-caps, window 4096:
# its sliding mask is the causal one at seq 32, as the fused engine's
# attention, which does not slide; rope_local_base_freq 1e4 on the sliding
# layers, rope_theta 1e6 on the global ones) at sliding_window_pattern 2:
# layer 0 slides, layer 1 is global; head_dim 24
sed 's/"llama"/"gemma3_text"/; s/"num_key_value_heads": 2,/"num_key_value_heads": 2, "head_dim": 24,/;
     s/, "tie_word_embeddings": false/, "sliding_window_pattern": 2/' "$tmp/llama.json" >"$tmp/gemma3_text.json"

# The losses of a measured file, one a line.
losses() {
	tr -d ' \n\t' <"$1" | grep -o '"losses":\[[^]]*\]' | head -1 | sed 's/.*\[//; s/\]//' | tr ',' '\n'
}

fail=0 checked=0
for model in $models; do
	for impl in single foreach fused; do
		for zg in zeros none; do
			for version in 1.13 2.6; do
			# 1.13's fused Adam takes CUDA tensors only (refused on the CPU)
			[ "$impl.$version" = fused.1.13 ] && continue
			for batch in 2 1; do
			for attn in eager sdpa; do
			# SDPA: 2.x only, described for gpt2, llama with as many k/v
			# heads as heads (the CPU's flash kernel) and llama with fewer
			# (enable_gqa: its math path, qwen2's, qwen3's, phi3's and
			# gemma3_text's too, the last at query_pre_attn_scalar's scale);
			# llama-mha for sdpa alone
			case $attn.$version.$zg.$model in
			sdpa.2.6.none.gpt2* | sdpa.2.6.*.llama-mha | sdpa.2.6.*.llama) ;;
			sdpa.2.6.none.qwen* | sdpa.2.6.none.phi3 | sdpa.2.6.none.gemma3_text) ;;
			sdpa.* | eager.*.*.llama-mha) continue ;;
			esac
			plain="--framework torch --wrapper none --torch-version $version --torch-device cpu --optimizer-impl $impl"
			plain="$plain --zero-grad $zg --attn $attn"
			common="--model $tmp/$model.json --world 1 --schemes dp --precision fp32 --batch $batch --steps $steps"
			# shellcheck disable=SC2086
			if ! "$zerosim" measure $common $plain --seq 32 --out "$tmp/a.json" 2>"$tmp/err"; then
				if grep -q 'yet' "$tmp/err"; then
					echo "not yet: $model $impl $zg $version $attn batch $batch: $(cat "$tmp/err")"
					continue
				fi
				echo "ag_exec_losses: FAIL: zerosim measure $common $plain --seq 32:" >&2
				cat "$tmp/err" >&2
				exit 1
			fi
			# shellcheck disable=SC2086
			"$zerosim" measure $common --seq 31 --out "$tmp/b.json" || exit 99
			losses "$tmp/a.json" >"$tmp/la"
			losses "$tmp/b.json" >"$tmp/lb"
			if [ "$(wc -l <"$tmp/la")" -ne "$steps" ] || [ "$(wc -l <"$tmp/lb")" -ne "$steps" ]; then
				echo "ag_exec_losses: $steps losses expected in each file" >&2
				exit 99
			fi
			checked=$((checked + 1))
			if paste "$tmp/la" "$tmp/lb" | awk -v tol=1e-5 '
				{ d = $1 - $2; if (d < 0) d = -d; r = d / ($2 < 0 ? -$2 : $2)
				  printf "  step %d: plain loop %s, fused engine %s, relative %.2g%s\n", NR, $1, $2, r,
				         r <= tol ? "" : "  <- more than 1e-5"
				  if (!(r <= tol)) bad = 1 }
				END { exit bad }' >"$tmp/cmp"; then
				echo "ok: $model $impl $zg $version $attn batch $batch, $steps steps"
				cat "$tmp/cmp"
			else
				echo "ag_exec_losses: FAIL: $model $impl $zg $version $attn batch $batch: the plain loop's losses are not the fused engine's" >&2
				cat "$tmp/cmp" >&2
				fail=1
			fi
			done
			done
			done
		done
	done
done
# The models' dropout is 0 (the fused engine has none; GPT2Config's
# default of 0.1 is overridden in the file).
#
# A case file (zerosim-case/2: the initial weights in zerosim's flat
# order, gpt2's Conv1D weights among them, and every step's tokens) gives
# the plain loop the seed's run again, bit for bit.
case $models in
*gpt2*)
	plain="--framework torch --wrapper none --torch-version 1.13 --torch-device cpu --attn eager"
	"$zerosim" measure --model "$tmp/gpt2.json" --world 1 --schemes dp --precision fp32 --batch 2 --seq 32 \
		--steps "$steps" --write-case "$tmp/case.json" --out "$tmp/w.json" || exit 99
	# shellcheck disable=SC2086
	"$zerosim" measure --model "$tmp/gpt2.json" --world 1 --schemes dp --precision fp32 --batch 2 --seq 32 \
		--steps "$steps" $plain --out "$tmp/a.json" || exit 1
	# shellcheck disable=SC2086
	"$zerosim" measure --case "$tmp/case.json" --schemes dp --precision fp32 $plain --out "$tmp/c.json" || exit 1
	losses "$tmp/a.json" >"$tmp/la"
	losses "$tmp/c.json" >"$tmp/lc"
	if [ ! -s "$tmp/la" ] || ! cmp -s "$tmp/la" "$tmp/lc"; then
		echo "ag_exec_losses: FAIL: the plain loop from the case file trains otherwise than from the seed:" >&2
		paste "$tmp/la" "$tmp/lc" >&2
		fail=1
	else
		echo "ok: gpt2 from its case file, the seed's losses: $(tr '\n' ' ' <"$tmp/lc")"
	fi
	# Dropout from the config (0.1 each): the plain loop runs real masks,
	# drawn from --seed (not PyTorch's generator): the losses move off the
	# dropout-free run's, the same seed gives the same losses again, and
	# its case file (which carries the probabilities) replays them.
	sed 's/"embd_pdrop": 0.0, "attn_pdrop": 0.0, "resid_pdrop": 0.0/"embd_pdrop": 0.1, "attn_pdrop": 0.1, "resid_pdrop": 0.1/' \
		"$tmp/gpt2.json" >"$tmp/gpt2-drop.json"
	for run in d1 d2; do
		# shellcheck disable=SC2086
		"$zerosim" measure --model "$tmp/gpt2-drop.json" --world 1 --schemes dp --precision fp32 --batch 2 --seq 32 \
			--steps "$steps" $plain --write-case "$tmp/$run-case.json" --out "$tmp/$run.json" || exit 1
		losses "$tmp/$run.json" >"$tmp/l$run"
	done
	# shellcheck disable=SC2086
	"$zerosim" measure --case "$tmp/d1-case.json" --schemes dp --precision fp32 $plain --out "$tmp/dc.json" || exit 1
	losses "$tmp/dc.json" >"$tmp/ldc"
	if [ ! -s "$tmp/ld1" ] || cmp -s "$tmp/ld1" "$tmp/la" || ! cmp -s "$tmp/ld1" "$tmp/ld2" ||
		! cmp -s "$tmp/ld1" "$tmp/ldc"; then
		echo "ag_exec_losses: FAIL: gpt2 with dropout 0.1: losses without dropout, twice, from the case file:" >&2
		paste "$tmp/la" "$tmp/ld1" "$tmp/ld2" "$tmp/ldc" >&2
		fail=1
	else
		echo "ok: gpt2 with dropout 0.1: its own losses, the same again and from its case file: $(tr '\n' ' ' <"$tmp/ld1")"
	fi
	;;
esac
if [ "$checked" -eq 0 ]; then
	echo "ag_exec_losses: no case could be run" >&2
	exit 1
fi
exit $fail

#!/bin/sh
# ft_freeze — zerosim's --freeze (issue #23: frozen parameters) against
# real PyTorch 1.13 training the same model with the same parameters
# frozen (tests/hf_torch.py --freeze: requires_grad False by
# tests/ft_torch.py's matcher, the optimizer over the trainable ones, as
# transformers' Trainer.create_optimizer filters them).
#
# zerosim's theory (util/autograd.c's step, summed) and its engine's
# measure (the step run for real) of the plain loop (--wrapper none) and of
# DDP over it (--wrapper ddp, N = 2; theory and measure at N = 2, two ranks in
# lockstep), each equal to PyTorch's bytes between steps, the steady
# step's peak and every mark zerosim's step names, to the byte. Cases:
# gpt2 tiny and llama tiny, each with its embeddings frozen, all but the
# last block (all-but-last:1), the last block (blocks:1-1, its gradients
# flow through it), the norms (a glob), everything but the norms (re:),
# part of a layer (gpt2's c_attn, llama's q_proj alone) and everything but
# the head (and gpt2's tied head with its position embedding); zero_grad
# zeros and set_to_none; DDP N = 2 for gpt2 with frozen embeddings and
# llama with all-but-last:1; the families with guards of their own (issue
# #25): qwen2 (q/k/v biased: addmm keeps mat1 only for a trainable
# weight), qwen3 (q_norm, k_norm: a norm whose weight alone needs a
# gradient), phi3 (fused qkv_proj sliced, gate_up_proj chunked), each
# with a prefix frozen and with a projection frozen alone (a re:), DDP N
# = 2 for qwen3 and phi3; under bf16 autocast (--precision amp-bf16,
# hf_torch.py --amp bf16): gpt2, llama, qwen2 and phi3 with parts frozen,
# DDP N = 2 for gpt2. And the CLI: a bad term, a pattern that
# freezes everything or nothing, a term of it that freezes nothing and
# --freeze outside the PyTorch step are one line, exit 2, in zerosim and
# in both references (--world 2 included).
#
# `tests/ft_freeze.sh torch26` (make check-torch26): the same comparison
# against PyTorch 2.6 in its Debian 13 root (tests/torch26_root.sh; skip
# without one, a failure under ZS_REQUIRE_TORCH26=1) for a covering subset
# at 2.6's set_to_none and zeros, eager attention, DDP N = 2 included;
# and its "sdpa:" rows (s49) under transformers' SDPA on both sides
# (hf_torch.py --attn sdpa; docs/schedule.md, "Fine-tuning under SDPA"):
# a frozen block over a frozen input (no node: nothing kept, flash and
# math path), k_proj frozen over a frozen input (the math path's bmm keeps
# k^T alone; the flash kernel makes dk and lets it go), qwen2's and phi3's
# frozen projections; "sdpa: autocast:" (s50) the bf16 flash kernel
# (gpt2 embeddings frozen, llama 4 k/v heads with k_proj frozen over a
# frozen input). (SDPA with q_proj frozen over a frozen input is
# refused by name, as under eager attention: the CLI rows.)
#
# PyTorch is looked for by tests/torch_python.sh; without it: skip (77).
# Exit 0 pass, 1 disagreement, 99 hard error.
set -u
name=ft_freeze
# top, src, zerosim, tmp, status, mode; root and in under torch26
. "${srcdir:-.}/tests/ft_lib.sh"

# The CLI first (needs no PyTorch): one line, exit 2, nothing written.
# the tiny gpt2, llama, qwen2, qwen3 and phi3 (tests/ft_lib.sh)
ft_configs 1024 176
# llama with as many k/v heads as heads: under SDPA the CPU's flash kernel
sed 's/"num_key_value_heads": 2/"num_key_value_heads": 4/' "$tmp/llama.json" >"$tmp/llamamha.json"
plain="--world 1 --framework torch --wrapper none --torch-version 1.13 --torch-device cpu --attn eager --optimizer-impl single"
refuse() { # WHAT TEXT ARGS...: zerosim theory (or $zcmd) must refuse with one line that has TEXT, exit 2
	what=$1 text=$2
	shift 2
	"$zerosim" "${zcmd:-theory}" --model "$tmp/gpt2.json" --seq 32 --batch 2 --precision fp32 --schemes dp "$@" \
		--out "$tmp/refused.json" >"$tmp/out" 2>"$tmp/err"
	rc=$?
	if [ $rc -ne 2 ] || [ "$(wc -l <"$tmp/err")" -ne 1 ] || [ -e "$tmp/refused.json" ] ||
		! grep -qF -- "$text" "$tmp/err"; then
		echo "FAIL: $what: exit $rc, stderr: $(cat "$tmp/err") (wanted one line with: $text)"
		status=1
	else
		echo "ok: $what: $(cat "$tmp/err")"
	fi
}
only="--freeze: only under --framework torch with --wrapper none, ddp or fsdp so far"
# shellcheck disable=SC2086
{
	refuse "bad blocks: term" "--freeze: bad term 'blocks:2-1' (blocks:A-B, whole numbers, A <= B; one block N is blocks:N-N)" \
		$plain --freeze blocks:2-1
	refuse "bad all-but-last: term" "--freeze: bad term 'all-but-last:x' (all-but-last:N, a whole number)" \
		$plain --freeze all-but-last:x
	refuse "bad re: term" "--freeze: bad term 're:(' (re:REGEX, a POSIX extended regular expression)" \
		$plain --freeze 're:('
	refuse "everything frozen" "--freeze re:.: it freezes every parameter: nothing to train" $plain --freeze 're:.'
	# a pattern that freezes nothing: a mistake, not the full run (the
	# wording of a LoRA target that matches nothing)
	for zcmd in theory measure; do
		refuse "nothing frozen ($zcmd)" "--freeze all: no parameter of gpt2 matches" $plain --freeze all
	done
	zcmd=
	# (--framework paper and deepspeed take --freeze on a transformer:
	# tests/paper_freeze_tfm.sh, tests/ds_freeze.sh)
	refuse "--wrapper auto" "$only (--framework torch --wrapper auto trains every parameter)" \
		--framework torch --freeze embeddings
	printf '{"format": "zerosim-sweep/2", "freeze": "embeddings"}\n' >"$tmp/spec2.json"
	refuse "a zerosim-sweep/2 spec with freeze" \
		'"freeze" is a key of zerosim-sweep/3, not of this zerosim-sweep/2 file (give "format": "zerosim-sweep/3")' \
		$plain --spec "$tmp/spec2.json"
	# input_require_grads' leaf beside wpe's gradient (AddBackward's one
	# gradient to both: which of them copies it is not traced)
	refuse "wte frozen, wpe trained, checkpointed" \
		"--freeze transformer.wte.*: under --recompute full, transformer.wte frozen with transformer.wpe trained (not described yet)" \
		$plain --freeze 'transformer.wte.*' --recompute full
	refuse "--attn sdpa: q_proj frozen over a frozen input, k_proj trained" \
		"a layer whose input requires no grad with only some of q_proj, k_proj and v_proj frozen" \
		--world 1 --framework torch --wrapper none --torch-version 2.6 --torch-device cpu --attn sdpa \
		--model "$tmp/llama.json" --freeze 're:(embed|input_layernorm|q_proj)'
}

. "$src/tests/torch_python.sh"
export PYTHONDONTWRITEBYTECODE=1
# (the references' refusals: here, not in the 2.6 root; cases of the
# batches $tmp/ft and $tmp/hf, tests/ft_lib.sh's ft_add, checked below)
worlds="1 2"
[ "$mode" = torch26 ] && worlds=
for world in $worlds; do
	ft_in ft "$tmp/gpt2.json" gpt2.json
	ft_in hf "$tmp/gpt2.json" gpt2.json
	ft_add ft --model gpt2.json --freeze blocks:1-0 --world "$world"
	if [ "$world" -gt 1 ]; then
		ft_add hf --model gpt2.json --freeze blocks:1-0 --ddp "$world"
	else
		ft_add hf --model gpt2.json --freeze blocks:1-0
	fi
done
if [ "$mode" != torch26 ]; then
	ft_add ft --model gpt2.json --freeze all
	ft_add hf --model gpt2.json --freeze all
	# a term that freezes nothing beside one that does: zerosim's
	# "its term ... matches no parameter", the references' too
	ft_add ft --model gpt2.json --freeze embeddings,blocks:7-9
	ft_add hf --model gpt2.json --freeze embeddings,blocks:7-9
fi
# refused B N WHAT [TEXT]: case N of batch B refused (exit 2, one line on stderr, TEXT in it)
refused() {
	rc=$(ft_got "$1" "$2")
	e=$tmp/$1/$2.err
	if [ "$rc" -ne 2 ] || [ "$(wc -l <"$e")" -ne 1 ] || ! grep -qF -- "${4:-}" "$e"; then
		echo "FAIL: $3: exit $rc, stderr: $(tail -n 3 "$e")"
		status=1
	else
		echo "ok: $3: $(cat "$e")"
	fi
}

# label;model;zero_grad;pattern;world (1: the plain loop; 2: DDP N = 2)[;fp32|amp-bf16[;full]]
# (full: --recompute full, Hugging Face's gradient checkpointing with its
# input_require_grads hook, on both sides)
# (twice: phase add collects the cases' references into the batch $tmp/hf;
# phase check runs the batches once and compares)
# (a row whose label starts with "+" runs under make check-torch-full alone:
# tests/torch_python.sh's torch_row)
cat >"$tmp/cases" <<'CASES'
gpt2, embeddings frozen (the tied head with them);gpt2;zeros;embeddings;1
+gpt2, embeddings frozen, set_to_none;gpt2;none;embeddings;1
gpt2, all but the last block frozen;gpt2;zeros;all-but-last:1;1
+gpt2, all but the last block frozen, set_to_none;gpt2;none;all-but-last:1;1
gpt2, the last block frozen;gpt2;zeros;blocks:1-1;1
gpt2, the norms frozen;gpt2;zeros;*.ln_*;1
+gpt2, all but the norms frozen;gpt2;none;re:(attn|mlp|wte|wpe);1
gpt2, c_attn frozen;gpt2;none;*.c_attn.*;1
gpt2, all but the tied head and wpe frozen;gpt2;zeros;re:^transformer\.(h|ln_f)\.;1
llama, embeddings frozen;llama;zeros;embeddings;1
+llama, embeddings frozen, set_to_none;llama;none;embeddings;1
llama, all but the last layer frozen;llama;zeros;all-but-last:1;1
+llama, all but the last layer frozen, set_to_none;llama;none;all-but-last:1;1
+llama, the last layer frozen;llama;none;blocks:1-1;1
llama, the norms frozen;llama;none;*layernorm*;1
llama, all but the norms frozen;llama;zeros;re:(proj|embed_tokens|lm_head);1
+llama, q_proj frozen;llama;zeros;*.q_proj.*;1
llama, all but the head frozen;llama;none;re:^model\.;1
+qwen2, embeddings frozen;qwen2;zeros;embeddings;1
+qwen2, all but the last layer frozen, set_to_none;qwen2;none;all-but-last:1;1
qwen2, q_proj frozen (weight and bias);qwen2;zeros;re:\.q_proj\.;1
qwen2, the q/k/v weights frozen, their biases trained;qwen2;none;re:(q|k|v)_proj\.weight;1
+qwen3, all but the last layer frozen, set_to_none;qwen3;none;all-but-last:1;1
+qwen3, all but the last layer frozen;qwen3;zeros;all-but-last:1;1
qwen3, q_norm and k_norm frozen;qwen3;none;*_norm*;1
qwen3, q_proj frozen over a frozen input (q_norm's weight alone trained);qwen3;zeros;re:(embed|input_layernorm|q_proj);1
phi3, the first layer frozen;phi3;zeros;blocks:0-0;1
+phi3, all but the last layer frozen, set_to_none;phi3;none;all-but-last:1;1
phi3, qkv_proj frozen;phi3;zeros;re:qkv_proj;1
+phi3, gate_up_proj frozen;phi3;none;re:gate_up_proj;1
DDP N = 2, gpt2, embeddings frozen;gpt2;zeros;embeddings;2
DDP N = 2, qwen3, the first layer frozen, set_to_none;qwen3;none;blocks:0-0;2
+DDP N = 2, phi3, qkv_proj frozen;phi3;zeros;re:qkv_proj;2
+DDP N = 2, llama, all but the last layer frozen, set_to_none;llama;none;all-but-last:1;2
autocast: gpt2, embeddings frozen (the tied head with them);gpt2;zeros;embeddings;1;amp-bf16
+autocast: gpt2, c_attn frozen;gpt2;none;*.c_attn.*;1;amp-bf16
autocast: llama, all but the last layer frozen;llama;none;all-but-last:1;1;amp-bf16
autocast: llama, o_proj frozen;llama;zeros;re:o_proj;1;amp-bf16
autocast: qwen2, the q/k/v weights frozen, their biases trained;qwen2;none;re:(q|k|v)_proj\.weight;1;amp-bf16
+autocast: phi3, qkv_proj frozen;phi3;zeros;re:qkv_proj;1;amp-bf16
autocast: DDP N = 2, gpt2, embeddings frozen;gpt2;zeros;embeddings;2;amp-bf16
checkpointed: gpt2, embeddings frozen (the hook's leaf and its grad held to the graph's end);gpt2;zeros;embeddings;1;fp32;full
+checkpointed: gpt2, the last block frozen;gpt2;none;blocks:1-1;1;fp32;full
checkpointed: llama, embeddings frozen, set_to_none;llama;none;embeddings;1;fp32;full
checkpointed: llama, all but the last layer frozen;llama;zeros;all-but-last:1;1;fp32;full
+checkpointed: phi3, embeddings frozen;phi3;none;embeddings;1;fp32;full
checkpointed: DDP N = 2, llama, embeddings frozen;llama;zeros;embeddings;2;fp32;full
checkpointed: autocast: gpt2, embeddings frozen;gpt2;zeros;embeddings;1;amp-bf16;full
checkpointed: autocast: llama, all but the last layer frozen, set_to_none;llama;none;all-but-last:1;1;amp-bf16;full
2.6: gpt2, embeddings frozen;gpt2;none;embeddings;1
2.6: gpt2, all but the last block frozen, zeros;gpt2;zeros;all-but-last:1;1
+2.6: gpt2, c_attn frozen;gpt2;none;*.c_attn.*;1
2.6: llama, embeddings frozen;llama;none;embeddings;1
2.6: llama, all but the last layer frozen;llama;none;all-but-last:1;1
+2.6: llama, all but the norms frozen, zeros;llama;zeros;re:(proj|embed_tokens|lm_head);1
2.6: qwen2, the q/k/v weights frozen, their biases trained;qwen2;none;re:(q|k|v)_proj\.weight;1
+2.6: qwen3, all but the last layer frozen, zeros;qwen3;zeros;all-but-last:1;1
+2.6: phi3, the first layer frozen;phi3;none;blocks:0-0;1
2.6: phi3, qkv_proj frozen, zeros;phi3;zeros;re:qkv_proj;1
2.6: DDP N = 2, gpt2, embeddings frozen;gpt2;none;embeddings;2
2.6: DDP N = 2, llama, all but the last layer frozen, zeros;llama;zeros;all-but-last:1;2
2.6: autocast: gpt2, embeddings frozen;gpt2;none;embeddings;1;amp-bf16
2.6: autocast: llama, all but the last layer frozen, zeros;llama;zeros;all-but-last:1;1;amp-bf16
+2.6: sdpa: gpt2, embeddings frozen;gpt2;none;embeddings;1
2.6: sdpa: gpt2, all but the last block frozen (block 0's flash kernel makes no node), zeros;gpt2;zeros;all-but-last:1;1
2.6: sdpa: llama, all but the last layer frozen (layer 0's math path keeps nothing);llama;none;all-but-last:1;1
2.6: sdpa: llama, k_proj frozen over a frozen input (the math path's bmm keeps k^T alone), zeros;llama;zeros;re:(embed|input_layernorm|k_proj);1
2.6: sdpa: llama, 4 k/v heads, k_proj frozen over a frozen input (the flash kernel's dk made and let go);llamamha;none;re:(embed|input_layernorm|k_proj);1
+2.6: sdpa: qwen2, the q/k/v weights frozen, their biases trained;qwen2;none;re:(q|k|v)_proj\.weight;1
+2.6: sdpa: phi3, qkv_proj frozen, zeros;phi3;zeros;re:qkv_proj;1
2.6: sdpa: autocast: gpt2, embeddings frozen (the flash kernel's bf16 output, c_proj's operand as it is);gpt2;none;embeddings;1;amp-bf16
2.6: sdpa: autocast: checkpointed: gpt2, embeddings frozen, zeros;gpt2;zeros;embeddings;1;amp-bf16;full
2.6: sdpa: autocast: llama, 4 k/v heads, k_proj frozen over a frozen input (k's bf16 copy without a ToCopyBackward), zeros;llamamha;zeros;re:(embed|input_layernorm|k_proj);1;amp-bf16
CASES
for phase in add check; do
	i=0
	[ "$mode" != torch26 ] && i=4
	[ "$mode" != torch26 ] && [ $phase = check ] && ft_run ft ft_torch.py
	[ $phase = check ] && ft_run hf hf_torch.py
	while IFS=';' read -r label m zg pat world prec rc; do
		[ -n "$label" ] || continue
		torch_row "$label" || continue
		label=$(torch_label "$label")
		set --
		wrapper=none
		if [ "$world" = 2 ]; then
			set -- --ddp 2
			wrapper=ddp
		fi
		# under bf16 autocast (hf_torch.py --amp bf16): a frozen weight is
		# cast at every use, uncached
		[ "${prec:=fp32}" = amp-bf16 ] && set -- "$@" --amp bf16
		[ "${rc:=none}" = full ] && set -- "$@" --recompute full
		# "sdpa:" in the label: transformers' SDPA on both sides (2.6)
		attn=eager
		case $label in *sdpa:*) attn=sdpa && set -- "$@" --attn sdpa ;; esac
		version=1.13
		case $label in 2.6:*) version=2.6 ;; esac
		[ "$mode" = torch26 ] && [ $version = 1.13 ] && continue
		[ "$mode" != torch26 ] && [ $version = 2.6 ] && continue
		i=$((i + 1))
		if [ $phase = add ]; then
			# hf_torch.py (and ft_torch.py, whose matcher it imports) under
			# this run's PyTorch (2.6: in the root; zerosim is this machine's
			# binary), a case of the batch $tmp/hf
			[ -e "$tmp/hf/$m.json" ] || ft_in hf "$tmp/$m.json" "$m.json"
			ft_add hf --model "$m.json" --zero-grad "$zg" --freeze "$pat" --no-attribution "$@"
			continue
		fi
		ref=$tmp/hf/$i.json
		if [ "$(ft_got hf $i)" != 0 ]; then
			echo "ft_freeze: FAIL: hf_torch.py ($version) --freeze '$pat' $*:" >&2
			tail -n 20 "$tmp/hf/$i.err" "$tmp/hf.log" >&2 2>/dev/null
			exit 99
		fi
		for cmd in theory measure; do
			if ! "$zerosim" $cmd --model "$tmp/$m.json" --seq 32 --batch 2 --precision "$prec" --schemes dp --world "$world" \
				--steps 3 --framework torch --wrapper $wrapper --torch-version $version --torch-device cpu --attn $attn \
				--optimizer-impl single --zero-grad "$zg" --freeze "$pat" --recompute "$rc" --out "$tmp/$cmd.json" \
				2>"$tmp/err"; then
				echo "ft_freeze: FAIL: zerosim $cmd, $label: $(cat "$tmp/err")" >&2
				exit 99
			fi
		done
		"$py" "$src/tests/ft_cmp.py" "$ref" "$tmp/theory.json" "$tmp/measure.json" "$label (--freeze '$pat')" || status=1
	done <"$tmp/cases"
done
if [ "$mode" != torch26 ]; then
	refused ft 1 "ft_torch.py --freeze blocks:1-0 --world 1"
	refused hf 1 "hf_torch.py --freeze blocks:1-0"
	refused ft 2 "ft_torch.py --freeze blocks:1-0 --world 2"
	refused hf 2 "hf_torch.py --freeze blocks:1-0 --ddp 2"
	refused ft 3 "ft_torch.py --freeze all" "--freeze all: no parameter matches"
	refused hf 3 "hf_torch.py --freeze all" "--freeze all: no parameter matches"
	refused ft 4 "ft_torch.py --freeze embeddings,blocks:7-9" "its term 'blocks:7-9' matches no parameter"
	refused hf 4 "hf_torch.py --freeze embeddings,blocks:7-9" "its term 'blocks:7-9' matches no parameter"
fi
exit $status

# ft_lib.sh — the start the fine-tuning tests share (tests/ft_accum.sh,
# ft_freeze.sh, ft_lora.sh, ft_zero1.sh, ft_fsdp.sh source it, name set to
# the test's name, their arguments theirs): zerosim built (else exit 99) in top (ZS_BUILDDIR),
# src (srcdir), a temp dir tmp removed on exit, status 0, mode the first
# argument; under `torch26` root, PyTorch 2.6's Debian 13 root
# (tests/torch26_root.sh; skip 77 without one, a failure under
# ZS_REQUIRE_TORCH26=1), and in, a dir for the case inside it
# (/tmp/zs-NAME26.PID; removed on exit, made by the test).
# ft_configs V I [PREFIX]: the tiny models as Hugging Face config.json
# files, $tmp/PREFIXgpt2.json, llama, qwen2, qwen3, phi3 and mistral: 2
# layers, hidden 64, 4 heads (llama's shape: 2 k/v heads, intermediate
# I), vocab V, dropout 0 (GPT2Config's default is 0.1); qwen3's head_dim
# 24 apart from hidden / heads; phi3's pad_token_id null (Phi3Config's
# 32000 is no row of a small vocab).
# ft_version and ft_case (below): the case loop ft_lora.sh and ft_zero1.sh
# share; their references run in batches (tests/batch_lib.sh).
# ft_losses (below): the losses check ft_lora.sh, ft_zero1.sh, ft_fsdp.sh
# and ft_fsdp_lora.sh share; ft_ref (below): ft_fsdp.sh's and
# ft_fsdp_lora.sh's reference run.
# POSIX sh, as the tests.
top=${ZS_BUILDDIR:-.}
src=${srcdir:-.}
zerosim=$top/zerosim
if [ ! -x "$zerosim" ]; then
	echo "$name: $zerosim is not built" >&2
	exit 99
fi
tmp=$(mktemp -d "${TMPDIR:-/tmp}/zs-$name.XXXXXX") || exit 99
trap 'rm -rf "$tmp"' EXIT HUP INT TERM
status=0
mode=${1:-}
if [ "$mode" = torch26 ]; then
	if ! root=$("$src/tests/torch26_root.sh"); then
		[ "${ZS_REQUIRE_TORCH26:-0}" = 1 ] && { echo "$name: FAIL: no PyTorch 2.6 root (ZS_REQUIRE_TORCH26=1)" >&2; exit 1; }
		echo "$name: SKIP: no PyTorch 2.6 root (tests/torch26_root.sh)" >&2
		exit 77
	fi
	in=/tmp/zs-${name}26.$$
	trap 'rm -rf "$tmp" "${root:?}$in"' EXIT HUP INT TERM
fi
# ft_add, ft_in, ft_rel, ft_run, ft_got: the batch (tests/batch_lib.sh)
. "$src/tests/batch_lib.sh"

ft_configs() {
	cat >"$tmp/${3:-}gpt2.json" <<JSON
{"model_type": "gpt2", "n_embd": 64, "n_head": 4, "n_layer": 2, "n_positions": 64, "vocab_size": $1,
 "activation_function": "gelu_new", "tie_word_embeddings": true, "layer_norm_epsilon": 1e-05, "embd_pdrop": 0.0,
 "attn_pdrop": 0.0, "resid_pdrop": 0.0}
JSON
	cat >"$tmp/${3:-}llama.json" <<JSON
{"model_type": "llama", "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
 "num_key_value_heads": 2, "intermediate_size": $2, "max_position_embeddings": 64, "vocab_size": $1,
 "rms_norm_eps": 1e-05, "tie_word_embeddings": false, "hidden_act": "silu"}
JSON
	sed 's/"llama"/"qwen2"/; s/1e-05/1e-06/' "$tmp/${3:-}llama.json" >"$tmp/${3:-}qwen2.json"
	sed 's/"llama"/"qwen3"/; s/1e-05/1e-06/; s/"num_key_value_heads": 2,/"num_key_value_heads": 2, "head_dim": 24,/' \
		"$tmp/${3:-}llama.json" >"$tmp/${3:-}qwen3.json"
	sed 's/"llama"/"phi3"/; s/"silu"/"silu", "resid_pdrop": 0.0, "pad_token_id": null/' \
		"$tmp/${3:-}llama.json" >"$tmp/${3:-}phi3.json"
	sed 's/"llama"/"mistral"/' "$tmp/${3:-}llama.json" >"$tmp/${3:-}mistral.json"
}

# ft_version LABEL: the PyTorch release a case of a loop runs under, 2.6
# for a label "2.6: ...", else 1.13; fails (the case skipped) where it is
# not this run's (`torch26` mode runs the 2.6 cases alone, else 1.13's),
# and for a row of the full agreement alone ("+2.6: ...", "+...":
# tests/torch_python.sh's torch_row) outside make check-torch-full.
ft_version() {
	torch_row "$1" || return 1
	case ${1#+} in 2.6:*) v=2.6 ;; *) v=1.13 ;; esac
	[ "$mode" = torch26 ] && [ $v = 1.13 ] && return 1
	[ "$mode" != torch26 ] && [ $v = 2.6 ] && return 1
	echo $v
}

# ft_ref ARGS... (--model $tmp/tiny-X.json ..., --out $tmp/Y last):
# tests/ft_torch.py ARGS under this run's PyTorch, 1.13 here or, under
# torch26, 2.6 in the root (the files of $tmp it names copied in, its
# JSON copied back); 5 minutes at most (gloo waits 30 for a peer). Needs
# $py (tests/torch_python.sh).
ft_ref() {
	if [ "$mode" != torch26 ]; then
		timeout 300 "$py" "$src/tests/ft_torch.py" "$@"
		return
	fi
	mkdir -p "$root$in" && cp "$src/tests/ft_torch.py" "$src/tests/hf_torch.py" "$src/tests/fsdp_torch.py" \
		"$tmp"/tiny-*.json "$root$in/" || return 1
	args=$(echo "$*" | sed "s|$tmp/|$in/|g")
	eval "out=\${$#}"
	timeout 300 unshare -m sh -c "mount -t proc proc $root/proc && chroot $root env USE_LIBUV=0 \
PYTHONDONTWRITEBYTECODE=1 OPENBLAS_NUM_THREADS=1 python3 $in/ft_torch.py $args" &&
		cp "$root$in/$(basename "$out")" "$out"
}

# ft_case VERSION MODEL ZERO_GRAD K RARGS ZARGS [MARGS]: one case of the
# loops of ft_lora.sh and ft_zero1.sh (label in $label), both sides at
# seq 32, batch 2, 3 steps: tests/ft_torch.py --model MODEL.json
# --zero-grad ZERO_GRAD --grad-accum K RARGS under PyTorch VERSION (2.6:
# in the root), its JSON at $ref; then zerosim theory and measure of the
# same (--framework torch, CPU, attention $ft_attn (eager unset),
# single-tensor Adam, ZARGS;
# measure also MARGS) into $tmp/theory.json and $tmp/measure.json. Either
# failing: the message, exit 99. Needs $py (tests/torch_python.sh).
# In a loop run twice (phase=add, then phase=check), the reference is
# a case of the batch $tmp/ft (ft_add) and the check reads its JSON; with
# phase unset, a batch of its own, run at once.
ft_case() {
	v=$1 m=$2 zg=$3 K=$4 rargs=$5 zargs=$6 margs=${7:-}
	i=$((${i:-0} + 1))
	if [ "${phase:-}" != check ]; then
		[ -n "${phase:-}" ] || { rm -rf "$tmp/ft"; i=1; }
		set -f
		# shellcheck disable=SC2046
		ft_add ft $(ft_rel ft "--model $tmp/$m.json --seq 32 --batch 2 --steps 3 --zero-grad $zg --grad-accum $K $rargs")
		set +f
		[ -n "${phase:-}" ] && return 0
		ft_run ft ft_torch.py
	fi
	ref=$tmp/ft/$i.json
	if [ "$(ft_got ft $i)" != 0 ]; then
		echo "$name: FAIL: ft_torch.py ($v) $rargs:" >&2
		tail -n 20 "$tmp/ft/$i.err" "$tmp/ft.log" >&2 2>/dev/null
		exit 99
	fi
	for cmd in theory measure; do
		a=
		[ $cmd = measure ] && a=$margs
		# shellcheck disable=SC2086
		if ! "$zerosim" $cmd --model "$tmp/$m.json" --seq 32 --batch 2 --steps 3 --framework torch --torch-version "$v" \
			--torch-device cpu --attn "${ft_attn:-eager}" --optimizer-impl single --zero-grad "$zg" --grad-accum "$K" $zargs $a \
			--out "$tmp/$cmd.json" 2>"$tmp/err"; then
			echo "$name: FAIL: zerosim $cmd, $label: $(cat "$tmp/err")" >&2
			exit 99
		fi
	done
}

# ft_losses DIR LABEL ZARGS RARGS: the losses check of ft_lora.sh,
# ft_zero1.sh, ft_fsdp.sh and ft_fsdp_lora.sh: zerosim measure ZARGS
# written as a case into DIR (--write-case: the weights, every
# micro-step's tokens, under LoRA the adapters as it started them) and
# trained by tests/ft_torch.py RARGS --case (PyTorch 1.13); each of the 3
# steps' loss (the mean over the ranks of the mean of their K
# micro-steps', as measure's `losses`) within 1e-5 relative, the loss
# moved (something was trained), one loss list per rank, DDP's ranks
# (plain and ZeroRedundancyOptimizer) ending with equal trained
# parameters, and under LoRA the case's adapter values PyTorch's
# trainable ones (FSDP's are its shards: not compared). A difference:
# status 1; either run failing: the message, exit 99. Needs $py. The
# reference a case of the batch $tmp/ft, as ft_case's (phase add, check;
# unset: a batch of its own, at once).
ft_losses() {
	i=$((${i:-0} + 1))
	if [ "${phase:-}" != check ]; then
		[ -n "${phase:-}" ] || { rm -rf "$tmp/ft"; i=1; }
		mkdir -p "$1" || exit 99
		# shellcheck disable=SC2086
		if ! "$zerosim" measure -q $3 --write-case "$1/case.json" --out "$1/seed.json" 2>"$tmp/err"; then
			echo "$name: FAIL: zerosim measure --write-case, $2: $(cat "$tmp/err")" >&2
			exit 99
		fi
		ft_casedir ft "$1"
		set -f
		# shellcheck disable=SC2046
		ft_add ft $(ft_rel ft "$4") --case "${1##*/}/case.json"
		set +f
		[ -n "${phase:-}" ] && return 0
		ft_run ft ft_torch.py
	fi
	if [ "$(ft_got ft $i)" != 0 ]; then
		echo "$name: FAIL: tests/ft_torch.py --case, $2:" >&2
		tail -n 20 "$tmp/ft/$i.err" "$tmp/ft.log" >&2 2>/dev/null
		exit 99
	fi
	cp "$tmp/ft/$i.json" "$1/torch.json" || exit 99
	"$py" - "$1" "$2" <<'PY' || status=1
import json, os, sys
d, label = sys.argv[1], sys.argv[2]
seed = json.load(open(os.path.join(d, "seed.json")))["runs"][0]
t = json.load(open(os.path.join(d, "torch.json")))
lora = json.load(open(os.path.join(d, "case.json"))).get("lora")
ranks = t.get("rank_losses") or [t["losses"]]
mean = [sum(x) / len(x) for x in zip(*ranks)]
rel = [abs(z - m) / abs(m) for z, m in zip(seed["losses"], mean)]
bad = []
if len(rel) != 3 or max(rel) > 1e-5:
    bad.append(f"losses {seed['losses']} against PyTorch's {mean}")
if len(ranks) != t["world"]:
    bad.append(f"{len(ranks)} ranks' losses from a world of {t['world']}")
if mean[1] == mean[0]:
    bad.append("the loss did not move: nothing was trained")
ddp = t["world"] > 1 and t.get("trained_equal_across_ranks") is not None
if ddp and not t["trained_equal_across_ranks"]:
    bad.append("PyTorch's ranks end with different trained parameters")
if lora and (ddp or t["world"] == 1) and lora["count"] != t["trainable"]:
    bad.append(f"the case holds {lora['count']} adapter values, PyTorch trains {t['trainable']}")
print(f"{'FAIL' if bad else 'ok'}: {label}: measure's losses {[round(x, 6) for x in seed['losses']]} and PyTorch "
      f"{t['torch']}'s (the mean of its ranks' {[round(x, 6) for x in mean]}) on the same case"
      + (f" ({lora['count']:,} adapter values)" if lora else "") + f" within {max(rel):.1e} relative (bound 1e-5)"
      + "".join("\n  " + b for b in bad))
sys.exit(1 if bad else 0)
PY
}

#!/bin/sh
# spec_keys — LoRA's, QLoRA's and the load dtype's options as keys of the
# sweep spec (issue #23: "new options are keys of the sweep spec ... one
# version bump"): zerosim-sweep/4's lora-r, lora-alpha, lora-dropout,
# lora-targets, quant-base, double-quant and load-dtype (docs/formats.md);
# and FSDP's fsdp-orig-params (s51), /4's too; zerosim-sweep/5's
# lora-dtype (s52).
#
# 1. A spec with the keys gives the same measured.json and theory.json, byte
#    for byte, as the options of those names: tiny llama and gpt2 under the
#    PyTorch step's plain loop (the 4-bit base with and without double
#    quantization, loaded in bf16), DDP N = 2, the paper's schedule, and
#    lora-targets as an array, a comma string and all-linear; the files
#    record what the run used (config.lora_alpha 16, ...), and differ from
#    the same run without the keys (so that a key read and dropped fails).
#    The shipped llama-3-8b with LoRA r = 16 on all-linear against a 24 GB
#    device (the issue's question), theory only.
# 2. An option on the command line overrides the file's key.
# 3. A bad value of each key: one line naming the file and the key, exit 2,
#    the output file untouched; a later check on a value the file gave
#    names the file's key, not an option the user did not type.
# 4. A zerosim-sweep/3 (and /2) file with any /4 key is refused, naming
#    the version that has it.
# 5. With a case (measure --case, whose "lora" fixes LoRA's settings): the
#    spec's agreeing key runs as the case alone does, a disagreeing one is
#    refused naming the spec's key.
# Each row fails before zerosim-sweep/4 (s49's 823a535: every such key was
# an unknown key of the spec). A few seconds.
# Exit 0 pass, 1 mismatch, 99 hard error.
set -u
name=spec_keys
# top, src, zerosim, tmp, status; the tiny gpt2 and llama (vocab 256)
. "${srcdir:-.}/tests/ft_lib.sh"
ft_configs 256 176
torch="--seq 16 --batch 2 --steps 2 --precision fp32 --framework torch --torch-version 2.6
--torch-device cpu --attn eager --optimizer-impl single"
plain="$torch --schemes dp --world 1 --wrapper none"
spec() { printf '{"format": "zerosim-sweep/%s", %s}\n' "$1" "$2" >"$tmp/spec.json"; }

# same WHAT MODEL KEYS -- OPTIONS: the spec of KEYS (a /4 file) and the
# OPTIONS give the same files, measure's and theory's; the spec's differ
# from the run without either; then each remaining argument after OPTIONS
# (KEY=VALUE) is in the measured file's config
same() {
	what=$1 model=$2 keys=$3
	shift 4
	opts=$1
	shift
	spec "$sv" "$keys"
	for cmd in measure theory; do
		# shellcheck disable=SC2086
		"$zerosim" $cmd --model "$tmp/$model.json" $plain --spec "$tmp/spec.json" -o "$tmp/a.json" 2>"$tmp/err" &&
			"$zerosim" $cmd --model "$tmp/$model.json" $plain $opts -o "$tmp/b.json" 2>>"$tmp/err" &&
			"$zerosim" $cmd --model "$tmp/$model.json" $plain $base -o "$tmp/c.json" 2>>"$tmp/err"
		rc=$?
		if [ $rc -ne 0 ]; then
			echo "FAIL: $what ($cmd): exit $rc: $(cat "$tmp/err")"
			status=1
		elif ! cmp -s "$tmp/a.json" "$tmp/b.json"; then
			echo "FAIL: $what ($cmd): the spec's file is not the options': $(diff "$tmp/a.json" "$tmp/b.json" | head -4)"
			status=1
		elif cmp -s "$tmp/a.json" "$tmp/c.json"; then
			echo "FAIL: $what ($cmd): the spec's file is the run's without the keys"
			status=1
		else
			echo "ok: $what ($cmd): the same $(wc -c <"$tmp/a.json") bytes"
		fi
		[ $cmd = measure ] && cp "$tmp/a.json" "$tmp/measured.json"
	done
	for kv in "$@"; do
		if ! grep -q "\"${kv%%=*}\":[[:space:]]*${kv#*=}[,]*\$" "$tmp/measured.json"; then
			echo "FAIL: $what: measured.json's config has no ${kv%%=*} ${kv#*=}"
			status=1
		fi
	done
}

# the run each same() row is told apart from: LoRA with PEFT's defaults
# (the quant rows), or (base=) no LoRA at all
base= sv=4
same "LoRA: r, alpha, dropout, targets as an array" llama \
	'"lora-r": 4, "lora-alpha": 16, "lora-dropout": 0.05, "lora-targets": ["q_proj", "v_proj", "up_proj"]' -- \
	"--lora-r 4 --lora-alpha 16 --lora-dropout 0.05 --lora-targets q_proj,v_proj,up_proj" \
	lora_r=4 lora_alpha=16 lora_dropout=0.05 'lora_targets="q_proj,v_proj,up_proj"'
same "LoRA: targets all-linear (gpt2)" gpt2 '"lora-r": 2, "lora-targets": "all-linear"' -- \
	"--lora-r 2 --lora-targets all-linear" lora_r=2 'lora_targets="all-linear"'
base="--lora-r 4"
same "QLoRA: nf4 with double quantization, targets a comma string" llama \
	'"lora-r": 4, "quant-base": "nf4", "double-quant": "on", "lora-targets": "q_proj,v_proj,down_proj"' -- \
	"--lora-r 4 --quant-base nf4 --double-quant on --lora-targets q_proj,v_proj,down_proj" \
	'quant_base="nf4"' double_quant=true
same "QLoRA: nf4, double-quant off" llama '"lora-r": 4, "quant-base": "nf4", "double-quant": "off"' -- \
	"--lora-r 4 --quant-base nf4 --double-quant off" 'quant_base="nf4"' double_quant=false
same "QLoRA loaded in bf16" llama '"lora-r": 4, "quant-base": "nf4", "load-dtype": "bf16"' -- \
	"--lora-r 4 --quant-base nf4 --load-dtype bf16" 'load_dtype="bf16"'
# (s52: zerosim-sweep/5's one key, TRL's bf16 adapters)
sv=5
same "TRL's bf16 adapters over QLoRA loaded in bf16" llama \
	'"lora-r": 4, "quant-base": "nf4", "load-dtype": "bf16", "lora-dtype": "bf16"' -- \
	"--lora-r 4 --quant-base nf4 --load-dtype bf16 --lora-dtype bf16" 'lora_dtype="bf16"'
sv=4
# other runs than the plain loop: the spec names them too
plain="$torch --schemes dp --world 2 --wrapper ddp"
same "LoRA under DDP, N = 2, all the /4 keys of a QLoRA run" llama \
	'"lora-r": 4, "lora-alpha": 32, "lora-targets": "all-linear", "quant-base": "nf4", "double-quant": "on"' -- \
	"--lora-r 4 --lora-alpha 32 --lora-targets all-linear --quant-base nf4 --double-quant on" \
	lora_alpha=32 double_quant=true
# FSDP's use_orig_params (fsdp-orig-params, s51): each rank's Adam state its
# shard's trained pieces, told apart from the run without it
plain="$torch --schemes zero3 --world 2 --wrapper fsdp"
base="--freeze blocks:0-0"
same "FSDP use_orig_params, N = 2" llama '"freeze": "blocks:0-0", "fsdp-orig-params": "on"' -- \
	"--freeze blocks:0-0 --fsdp-orig-params on" fsdp_orig_params=true
plain="--seq 16 --batch 2 --unit layer --steps 2 --precision fp32 --framework paper --schemes dp,zero2 --world 2"
base=
same "LoRA under the paper's schedule" llama '"lora-r": 4, "lora-alpha": 12, "lora-targets": ["q_proj", "v_proj"]' -- \
	"--lora-r 4 --lora-alpha 12 --lora-targets q_proj,v_proj" lora_alpha=12
plain="$torch --schemes dp --world 1 --wrapper none"

# The issue's question on a shipped model (theory only: 8B parameters).
[ -d "$top/data/models" ] || { ZEROSIM_DATADIR=$src; export ZEROSIM_DATADIR; }
spec 4 '"lora-r": 16, "lora-targets": "all-linear"'
if "$zerosim" theory --model llama-3-8b --device-mem 24GB --spec "$tmp/spec.json" -o "$tmp/a.json" 2>"$tmp/err" &&
	"$zerosim" theory --model llama-3-8b --device-mem 24GB --lora-r 16 --lora-targets all-linear -o "$tmp/b.json" \
		2>>"$tmp/err" && "$zerosim" theory --model llama-3-8b --device-mem 24GB -o "$tmp/c.json" 2>>"$tmp/err" &&
	cmp -s "$tmp/a.json" "$tmp/b.json" && ! cmp -s "$tmp/a.json" "$tmp/c.json"; then
	echo "ok: llama-3-8b, r = 16 on all-linear, 24 GB: the spec's theory is the options'"
else
	echo "FAIL: llama-3-8b, r = 16 on all-linear, 24 GB: $(cat "$tmp/err") $(diff "$tmp/a.json" "$tmp/b.json" | head -4)"
	status=1
fi
[ -d "$top/data/models" ] || unset ZEROSIM_DATADIR

# 2. The command line over the file.
spec 4 '"lora-r": 8, "lora-alpha": 2, "lora-targets": "all-linear", "double-quant": "on", "quant-base": "nf4"'
for cmd in measure theory; do
	# shellcheck disable=SC2086
	"$zerosim" $cmd --model "$tmp/llama.json" $plain --lora-r 4 --spec "$tmp/spec.json" --lora-alpha 16 \
		--lora-targets q_proj --double-quant off -o "$tmp/a.json" 2>"$tmp/err"
	# shellcheck disable=SC2086
	"$zerosim" $cmd --model "$tmp/llama.json" $plain --lora-r 4 --lora-alpha 16 --lora-targets q_proj \
		--quant-base nf4 -o "$tmp/b.json" 2>>"$tmp/err"
	if cmp -s "$tmp/a.json" "$tmp/b.json"; then
		echo "ok: options override the spec's keys ($cmd)"
	else
		echo "FAIL: options override the spec's keys ($cmd): $(cat "$tmp/err")"
		status=1
	fi
done

# 3. Bad values: one line naming the file's key, exit 2, the output kept.
refuse() { # WHAT TEXT CMD ARGS...: CMD refuses with one line holding TEXT, exit 2, -o's file untouched
	what=$1 text=$2 cmd=$3
	shift 3
	echo kept >"$tmp/kept.json"
	# shellcheck disable=SC2086
	"$zerosim" "$cmd" --model "$tmp/llama.json" $plain "$@" -o "$tmp/kept.json" >"$tmp/out" 2>"$tmp/err"
	rc=$?
	if [ $rc -ne 2 ] || [ "$(wc -l <"$tmp/err")" -ne 1 ] || [ "$(cat "$tmp/kept.json")" != kept ] ||
		! grep -qF -- "$text" "$tmp/err"; then
		echo "FAIL: $what ($cmd): exit $rc, stderr: $(cat "$tmp/err") (wanted one line with: $text)"
		status=1
	else
		echo "ok: $what ($cmd): $(cat "$tmp/err")"
	fi
}
S=$tmp/spec.json
bad() { # WHAT KEYS TEXT: a /5 spec of KEYS refused by measure and theory
	spec 5 "$2"
	for cmd in measure theory; do
		refuse "$1" "$S: $3" $cmd --spec "$S"
	done
}
bad "fsdp-orig-params yes" '"fsdp-orig-params": "yes"' "\"fsdp-orig-params\": 'yes' is not one of on, off"
bad "lora-dtype fp16" '"lora-r": 4, "quant-base": "nf4", "load-dtype": "bf16", "lora-dtype": "fp16"' \
	"\"lora-dtype\": 'fp16' is not one of fp32, bf16"
bad "lora-r 0" '"lora-r": 0' "\"lora-r\": '0' is not a rank (1..65536)"
bad "lora-r 2.5" '"lora-r": 2.5' "\"lora-r\": '2.5' is not a rank (1..65536)"
bad "lora-r a string" '"lora-r": "4"' '"lora-r" is not a number'
bad "lora-alpha 0" '"lora-r": 4, "lora-alpha": 0' "\"lora-alpha\": '0' is not a positive number (at most 1e9)"
bad "lora-alpha negative" '"lora-r": 4, "lora-alpha": -1' '"lora-alpha" is -1, a negative number'
bad "lora-dropout 1" '"lora-r": 4, "lora-dropout": 1' "\"lora-dropout\": '1' is not a probability (0 <= p < 1)"
bad "lora-targets empty" '"lora-r": 4, "lora-targets": ""' \
	'"lora-targets": give all-linear or a comma list of module names (1 to 255 characters)'
bad "lora-targets an empty list" '"lora-r": 4, "lora-targets": []' \
	"\"lora-targets\": the list is empty (leave the key out for the family's default targets)"
bad "lora-targets a number" '"lora-r": 4, "lora-targets": 4' '"lora-targets" is not an array of strings'
bad "quant-base fp4" '"lora-r": 4, "quant-base": "fp4"' "\"quant-base\": 'fp4' is not one of nf4, none"
bad "double-quant yes" '"lora-r": 4, "quant-base": "nf4", "double-quant": "yes"' \
	"\"double-quant\": 'yes' is not one of on, off"
bad "double-quant a boolean" '"lora-r": 4, "quant-base": "nf4", "double-quant": true' '"double-quant" is not a string'
bad "load-dtype fp16" '"lora-r": 4, "quant-base": "nf4", "load-dtype": "fp16"' \
	"\"load-dtype\": 'fp16' is not one of fp32, bf16"
# the value parses, a later check refuses it: named as the file's key
spec 4 '"lora-r": 4, "lora-targets": "nope"'
refuse "a target that matches nothing" "$S's \"lora-targets\" nope: no linear layer of llama matches" theory --spec "$S"
spec 4 '"quant-base": "nf4"'
refuse "quant-base without lora-r" "$S's \"quant-base\" nf4: only with --lora-r" theory --spec "$S"
spec 4 '"lora-r": 4, "double-quant": "on"'
refuse "double-quant without quant-base" "$S's \"double-quant\": only with --quant-base nf4" measure --spec "$S"
spec 5 '"lora-r": 4, "lora-dtype": "bf16"'
refuse "lora-dtype without load-dtype" "$S's \"lora-dtype\" bf16: only with --load-dtype bf16" theory --spec "$S"
spec 4 '"lora-r": 4, "load-dtype": "bf16"'
refuse "load-dtype without quant-base" "$S's \"load-dtype\" bf16: only with --quant-base nf4" theory --spec "$S"
# a key the file gives beside an option the command line gives: each as typed
spec 4 '"lora-r": 4, "quant-base": "nf4", "load-dtype": "bf16"'
refuse "load-dtype with dropout" "$S's \"load-dtype\" bf16 with --lora-dropout (give 0) is not described yet" \
	theory --spec "$S" --lora-dropout 0.1

# 4. Older versions have none of /4's keys, nor /5's.
spec 4 '"lora-r": 4, "quant-base": "nf4", "load-dtype": "bf16", "lora-dtype": "bf16"'
refuse "lora-dtype in a /4 spec" \
	"$S: \"lora-dtype\" is a key of zerosim-sweep/5, not of this zerosim-sweep/4 file (give \"format\": \"zerosim-sweep/5\")" \
	theory --spec "$S"
for kv in '"lora-r": 4' '"lora-alpha": 16' '"lora-dropout": 0.1' '"lora-targets": "all-linear"' \
	'"quant-base": "nf4"' '"double-quant": "on"' '"load-dtype": "bf16"' '"fsdp-orig-params": "on"'; do
	k=${kv%%:*}
	for v in 3 2; do
		spec $v "$kv"
		refuse "$k in a /$v spec" \
			"$S: $k is a key of zerosim-sweep/4, not of this zerosim-sweep/$v file (give \"format\": \"zerosim-sweep/4\")" \
			theory --spec "$S"
	done
done
spec 1 '"lora-r": 4'
refuse "lora-r in a /1 spec" "$S: \"lora-r\" is a key of zerosim-sweep/4, not of this zerosim-sweep/1 file" measure --spec "$S"

# 5. With a case that has LoRA: the spec agrees or is refused by its key.
# shellcheck disable=SC2086
if "$zerosim" measure --model "$tmp/llama.json" $plain --lora-r 4 --lora-alpha 16 --write-case "$tmp/case.json" \
	-o /dev/null 2>"$tmp/err"; then
	run="--framework torch --torch-version 2.6 --torch-device cpu --attn eager --optimizer-impl single --schemes dp
--precision fp32 --wrapper none"
	spec 4 '"lora-r": 4, "lora-alpha": 16'
	# shellcheck disable=SC2086
	if "$zerosim" measure $run --case "$tmp/case.json" --spec "$S" -o "$tmp/a.json" 2>"$tmp/err" &&
		"$zerosim" measure $run --case "$tmp/case.json" -o "$tmp/b.json" 2>>"$tmp/err" &&
		cmp -s "$tmp/a.json" "$tmp/b.json"; then
		echo "ok: a case and a spec that agree: the case's run"
	else
		echo "FAIL: a case and a spec that agree: $(cat "$tmp/err")"
		status=1
	fi
	spec 4 '"lora-r": 4, "lora-alpha": 8'
	echo kept >"$tmp/kept.json"
	# shellcheck disable=SC2086
	"$zerosim" measure $run --case "$tmp/case.json" --spec "$S" -o "$tmp/kept.json" 2>"$tmp/err"
	rc=$?
	if [ $rc -eq 2 ] && [ "$(cat "$tmp/kept.json")" = kept ] &&
		grep -qF "$S's \"lora-alpha\" 8 disagrees with the case file's lora-alpha 16" "$tmp/err"; then
		echo "ok: a spec that disagrees with the case: $(cat "$tmp/err")"
	else
		echo "FAIL: a spec that disagrees with the case: exit $rc: $(cat "$tmp/err")"
		status=1
	fi
else
	echo "FAIL: measure --write-case with LoRA: $(cat "$tmp/err")"
	status=1
fi
exit $status

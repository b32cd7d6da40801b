#!/bin/sh
# ds3_torch — DeepSpeed's ZeRO-3 over the PyTorch step at N > 1
# (`--framework deepspeed --wrapper deepspeed --schemes zero3`,
# util/ag_ds3.c; docs/schedule.md, "ZeRO-3 over the PyTorch step", N > 1):
#  - not built: N = 2 and 3 refused with one line (exit 2), by measure and
#    theory alike, an existing --out left as it was;
#  - the reading's PyTorch part, on real PyTorch 1.13: which gathered
#    parameters a ZeRO-3 release cannot free because a node saved a view
#    of them (tests/ds3_saved.py over the reference models, every
#    parameter released after the forward as free_param does), against
#    the list counted from each model's config: on llama-tiny every
#    projection and the head (F.linear saves weight.t(), shape (in, out),
#    strides (1, in)), on gpt2-tiny the tied table alone (its head's
#    F.linear; Conv1D's addmm saves the leaf);
#  - the leaf-module marks a build at N > 1 needs (util/autograd.c
#    ds3_mark; docs/schedule.md, "The leaf modules' marks"), in the same
#    python process: tests/ag_events ds3=1's marks, each with the live
#    bytes since the one before it, against PyTorch 1.13 running one
#    step with DeepSpeed 38327e0's four hooks on every module
#    (tests/ds3_saved.py --hooks): the same hooks in the same order, each
#    at the same bytes (62 on gpt2-tiny, 83 on llama-tiny, q/k/v_proj and
#    gate/up_proj each its own);
#  - the saved weight.t() views zerosim's step keeps under those marks
#    (tests/ag_events ds3=saved: each parameter whose storage a view made
#    in forward holds into a backward op) against ds3_saved.py's list.
# Not compared with DeepSpeed itself (not installable here).
# PyTorch is looked for by tests/torch_python.sh; without it the second
# part is skipped (exit 77 after the first passed). About 5 s.
set -u
top=${ZS_BUILDDIR:-.}
src=${srcdir:-.}
zerosim=$top/zerosim
models=$src/report/models
[ -x "$zerosim" ] || { echo "ds3_torch: $zerosim is not built" >&2; exit 99; }
[ -x "$top/tests/ag_events" ] || { echo "ds3_torch: $top/tests/ag_events is not built" >&2; exit 99; }
for model in gpt2-tiny llama-tiny; do
	[ -f "$models/$model.json" ] || { echo "ds3_torch: no model config at $models/$model.json" >&2; exit 99; }
done
tmp=$(mktemp -d "${TMPDIR:-/tmp}/zs-ds3.XXXXXX") || exit 99
trap 'rm -rf "$tmp"' EXIT HUP INT TERM
fail() { echo "ds3_torch: FAIL: $*" >&2; exit 1; }

keep=$tmp/keep.json
echo kept >"$keep"
n=0
for cmd in measure theory; do
	for w in 2 3 1,2; do
		"$zerosim" $cmd --framework deepspeed --wrapper deepspeed --schemes zero3 --model "$models/gpt2-tiny.json" \
			--torch-device cpu --torch-version 1.13 --precision fp32 --world $w --out "$keep" >"$tmp/out" 2>"$tmp/err"
		rc=$?
		[ "$rc" -eq 2 ] || fail "$cmd --world $w: exit $rc, not 2"
		want="zerosim $cmd: --wrapper deepspeed --schemes zero3 is built at N = 1 so far (it lists ${w#1,}): give --world 1"
		[ "$(cat "$tmp/err")" = "$want" ] || fail "$cmd --world $w: stderr $(cat "$tmp/err")"
		[ -s "$tmp/out" ] && fail "$cmd --world $w: stdout $(cat "$tmp/out")"
		[ "$(cat "$keep")" = kept ] || fail "$cmd --world $w changed $keep"
		n=$((n + 1))
	done
done
[ "$n" -eq 6 ] || fail "ran $n refusals, not 6"
echo "ok: N > 1 refused $n times (measure and theory, N = 2, 3 and 1,2)"

name=ds3_torch
. "$src/tests/torch_python.sh"
for model in gpt2-tiny llama-tiny; do
	PYTHONDONTWRITEBYTECODE=1 PYTHONPATH="$src/tests" "$py" "$src/tests/ds3_saved.py" "$models/$model.json" \
		--hooks "$tmp/hooks-torch" >"$tmp/got" 2>"$tmp/err" || { cat "$tmp/err" >&2; fail "tests/ds3_saved.py $model"; }
	# the expected list from the config alone: each weight F.linear reads
	# (the head's, the tied table's on gpt2), saved as its transpose
	python3 - "$models/$model.json" >"$tmp/want" <<'EOF' || fail "the expected list of $model"
import json, sys
c = json.load(open(sys.argv[1]))
V = c["vocab_size"]
rows = []
if c["model_type"] == "gpt2":
    d = c["n_embd"]
    rows.append(("wte.weight", d, V))
else:
    d, f, H = c["hidden_size"], c["intermediate_size"], c["num_attention_heads"]
    hd = d // H
    kv = c.get("num_key_value_heads", H) * hd
    for l in range(c["num_hidden_layers"]):
        for name, i, o in (("mlp.down_proj", f, d), ("mlp.gate_proj", d, f), ("mlp.up_proj", d, f),
                           ("self_attn.k_proj", d, kv), ("self_attn.o_proj", H * hd, d),
                           ("self_attn.q_proj", d, H * hd), ("self_attn.v_proj", d, kv)):
            rows.append((f"layers.{l}.{name}.weight", i, o))
    rows.append(("embed_tokens.weight" if c.get("tie_word_embeddings") else "lm_head.weight", d, V))
for name, i, o in sorted(rows):
    print(name, "MmBackward0._saved_mat2", f"{i}x{o}", f"1,{i}")
EOF
	[ -s "$tmp/want" ] || fail "no expected row for $model"
	diff "$tmp/want" "$tmp/got" >"$tmp/diff" || fail "$model: the releases PyTorch 1.13 cannot free differ:
$(cat "$tmp/diff")"
	echo "ok: $model: $(wc -l <"$tmp/got") gathered parameters held by a saved view after their release, as counted"
	# zerosim's step keeps the same views (ag_options.ds3_leaf_marks: the
	# saved weight.t() that x's gradient reads, made in forward; util/
	# autograd.c ds3_saved_wt): the parameters whose storage a view made in
	# forward holds into a backward op, with its shape and strides
	"$top/tests/ag_events" "$models/$model.json" 2 32 ds3=saved torch-version=1.13 torch-device=cpu precision=fp32 \
		>"$tmp/ev" || fail "tests/ag_events $model ds3=saved"
	sed 's/^\(transformer\|model\)\.//' "$tmp/ev" | LC_ALL=C sort -u >"$tmp/saved-zs"
	awk '{ print $1, $3, $4 }' "$tmp/got" | LC_ALL=C sort >"$tmp/saved-torch"
	diff "$tmp/saved-zs" "$tmp/saved-torch" >"$tmp/diff" ||
		fail "$model: the views zerosim's step keeps (<) and those PyTorch 1.13 saves (>) differ:
$(cat "$tmp/diff")"
	echo "ok: $model: zerosim keeps the $(wc -l <"$tmp/saved-zs") saved weight.t() views PyTorch 1.13 keeps"
	# the marks: ag_events' stream (+bytes, -bytes, labels) to the same
	# lines (Hugging Face's names less the base model's prefix)
	"$top/tests/ag_events" "$models/$model.json" 2 32 ds3=1 torch-version=1.13 torch-device=cpu precision=fp32 \
		>"$tmp/ev" || fail "tests/ag_events $model ds3=1"
	awk '/^ds3:/ { sub(/^ds3:(transformer|model)\./, "ds3:")
		if (n++) printf "%s %+d\n", $0, live - last; else print $0 " "
		last = live; next }
		{ live += $1 }' "$tmp/ev" >"$tmp/hooks-zs"
	[ "$(wc -l <"$tmp/hooks-torch")" -gt 0 ] || fail "$model: PyTorch ran no hook"
	diff "$tmp/hooks-zs" "$tmp/hooks-torch" >"$tmp/diff" ||
		fail "$model: zerosim's ds3 marks (<) and DeepSpeed's hooks in PyTorch 1.13 (>) differ:
$(cat "$tmp/diff")"
	echo "ok: $model: $(wc -l <"$tmp/hooks-zs") ds3 marks, DeepSpeed's hooks' order and bytes on PyTorch 1.13"
done
exit 0

#!/bin/sh
# ds_defaults — DeepSpeed on a transformer at DeepSpeed's own settings (no
# --ds-* option), and the two commands' precision defaults.
#
# A review saw full gpt2 under --framework deepspeed differ, theory 2.77 GB
# against measure 4.26 GB. The bytes agree (theory = measure to the byte on
# full gpt2, every scheme, N = 1 and 2, both precisions); the two commands
# had been given the same options, and with --model `theory` defaults to
# mixed precision where `measure` runs fp32 (cmd_measure.c,
# transformer_run). This test holds:
# 1. a gpt2 whose larger tensors pass DeepSpeed's persistence threshold
#    (1e5 elements: wte, c_attn, c_fc and the MLP's c_proj are partitioned
#    under ZeRO-3, the norms, biases and attention's c_proj stay whole)
#    at every default (buckets 5e8, prefetch 5e7, max live 1e9): theory =
#    measure to the byte, resident, peak, every category, every rank;
# 2. the defaults: measure --model without --precision is fp32 (equal to
#    theory --precision fp32), theory --model without it is mixed, and the
#    theory's text says so, and names the precision of the step it predicts.
#
# Runs from the build directory; ZS_BUILDDIR overrides. Exit 0 pass, 1 fail,
# 99 hard error.
set -u

name=ds_defaults tag=dsdef
. "${srcdir:-.}/tests/agree_lib.sh"
fail() {
	echo "ds_defaults: FAIL: $*" >&2
	exit 1
}

# hidden 192, vocabulary 1024: wte 196,608, c_attn 110,592, c_fc and the
# MLP's c_proj 147,456 elements each, above 1e5; attention's c_proj 36,864
printf '{"model_type": "gpt2", "n_embd": 192, "n_layer": 2, "n_head": 4, "vocab_size": 1024, "n_positions": 16}\n' \
	>"$tmp/gpt2-medium.json"
run="--model $tmp/gpt2-medium.json --framework deepspeed --seq 16 --world 1,2,3 --schemes zero1,zero2,zero3 --steps 2"

# 1. theory = measure at DeepSpeed's defaults, both precisions
for precision in mixed fp32; do
	# shellcheck disable=SC2086
	"$zerosim" measure $run --precision $precision --quiet --out "$tmp/m.json" || fail "measure $run --precision $precision"
	# shellcheck disable=SC2086
	"$zerosim" theory $run --precision $precision --out "$tmp/t.json" || fail "theory $run --precision $precision"
	"$agree" "$tmp/m.json" "$tmp/t.json" >"$tmp/out" ||
		fail "theory and measure differ: $run --precision $precision: $(cat "$tmp/out")"
	# whole between steps under ZeRO-3: the 21 tensors of at most 1e5
	# elements, 82,176 parameters (per block the norms, the biases and
	# attention's c_proj weight, 39,360; wpe 3,072; ln_f 384), p bytes each
	[ $precision = mixed ] && whole=164352 || whole=328704
	grep -q "\"gathered_params\":[[:space:]]*$whole," "$tmp/m.json" ||
		fail "$precision: ZeRO-3 does not hold $whole bytes whole (the threshold is not crossed as intended)"
	echo "ok: $run --precision $precision ($(cat "$tmp/out"))"
done

# 2. the same options without --precision: two precisions
# shellcheck disable=SC2086
"$zerosim" measure $run --schemes zero3 --world 2 --quiet --out "$tmp/md.json" || fail "measure $run (no --precision)"
grep -q '"precision":[[:space:]]*"fp32"' "$tmp/md.json" || fail "measure --model's default precision is not fp32"
# shellcheck disable=SC2086
"$zerosim" theory $run --schemes zero3 --world 2 --precision fp32 --out "$tmp/tf.json" || fail "theory --precision fp32"
"$agree" "$tmp/md.json" "$tmp/tf.json" >"$tmp/out" ||
	fail "measure without --precision is not theory --precision fp32: $(cat "$tmp/out")"
# shellcheck disable=SC2086
"$zerosim" theory $run --schemes zero3 --world 2 --out "$tmp/td.json" || fail "theory $run (no --precision)"
grep -q '"precision":[[:space:]]*"mixed"' "$tmp/td.json" || fail "theory --model's default precision is not mixed"
# shellcheck disable=SC2086
"$zerosim" theory $run --schemes zero3 --world 2 >"$tmp/text" || fail "theory $run (text)"
grep -q "^mixed precision (theory's default; measure --model's is fp32: give --precision to both to compare them)" \
	"$tmp/text" || fail "the theory's text does not name its default precision: $(sed -n 2p "$tmp/text")"
grep -q "what measure --model --precision mixed runs" "$tmp/text" ||
	fail "the theory's text does not name the precision of the step it predicts"
# shellcheck disable=SC2086
"$zerosim" theory $run --schemes zero3 --world 2 --precision mixed >"$tmp/text" || fail "theory --precision mixed (text)"
if grep -q "theory's default" "$tmp/text"; then
	fail "--precision mixed given, the text still calls it the default"
fi
echo "ok: the defaults (measure --model fp32, theory --model mixed, named)"

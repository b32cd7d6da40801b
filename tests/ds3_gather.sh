#!/bin/sh
# ds3_gather — zerosim's own DeepSpeed ZeRO-3 step holds each gathered
# param in the block DeepSpeed 38327e0 allocates (docs/schedule.md,
# "deepspeed", ZeRO-3's gathered blocks): at N > 1 _post_step's several
# persistent params ceil(n/N)·N each, a single one n (beside a transient
# flat), a fetch's single param ceil(n/N)·N; at N = 1 a view (0 bytes).
# 1. theory = measure to the byte (tests/json_agree) on the MLP and the
#    tiny transformers at N = 1, 2, 3, with and without persistent params,
#    one persistent param, --unit layer (single-param fetches) and
#    --offload params;
# 2. hand-counted rows, from the shapes here, not from zerosim's output:
#    the resident gathered_params between steps on the default MLP
#    (64-256-64) at N = 1, 2, 3, with one persistent tensor (--ds-persist
#    100: b2's 64) at N = 3, and gpt2-tiny's (every tensor persists) at
#    N = 3, from its config. Runs from the build directory.
set -u
name=ds3_gather tag=ds3g
. "${srcdir:-.}/tests/agree_lib.sh"
models=${srcdir:-.}/report/models
fail() { echo "ds3_gather: FAIL: $*" >&2; exit 1; }
command -v python3 >/dev/null || { echo "ds3_gather: SKIP: no python3 to read the files"; exit 77; }
ds="--framework deepspeed --schemes zero3"
tfm="--seq 16 --batch 2 --precision fp32 --steps 2"

# 1. theory = measure
agree() {
	k=$1
	shift
	# shellcheck disable=SC2086 # options are words
	"$zerosim" measure -q $ds --world 1,2,3 "$@" --out "$tmp/m-$k.json" || fail "measure $*"
	# shellcheck disable=SC2086
	"$zerosim" theory $ds --world 1,2,3 "$@" --out "$tmp/t-$k.json" >/dev/null || fail "theory $*"
	out=$("$agree" "$tmp/m-$k.json" "$tmp/t-$k.json") || fail "theory and measure differ, $*: $out"
	[ "$out" = "json_agree: 3 points agree exactly" ] || fail "$*: $out"
}
agree mlp --steps 3
agree p100 --steps 3 --ds-persist 100
agree lu300 --steps 3 --unit layer --ds-persist 300
agree lu0 --steps 3 --unit layer --ds-persist 0
agree offp --steps 3 --offload params --unit layer --ds-persist 300
agree offp100 --steps 3 --offload params --ds-persist 100
# shellcheck disable=SC2086
agree gpt2 --model "$models/gpt2-tiny.json" $tfm
# shellcheck disable=SC2086
agree llama --model "$models/llama-tiny.json" $tfm
# shellcheck disable=SC2086
agree llama300 --model "$models/llama-tiny.json" $tfm --ds-persist 300

# 2. hand-counted: the resident gathered_params of a measure's run at N
gathered() {
	python3 -c 'import json, sys
d = json.load(open(sys.argv[1]))
print([r for r in d["runs"] if r["world"] == int(sys.argv[2])][0]["resident_breakdown"]["gathered_params"])' "$@"
}
# padded N n...: Σ ceil(n/N)·N
padded() {
	N=$1
	shift
	s=0
	for n in "$@"; do s=$((s + (n + N - 1) / N * N)); done
	echo $s
}
mlp="16384 256 16384 64" # 64-256-64: each layer's weight and bias, fp16 params (mixed)
for N in 2 3; do
	want=$((2 * $(padded $N $mlp)))
	[ "$(gathered "$tmp/m-mlp.json" $N)" = "$want" ] || fail "MLP N=$N: gathered $(gathered "$tmp/m-mlp.json" $N), want $want"
done
[ "$(gathered "$tmp/m-mlp.json" 3)" = 66192 ] || fail "MLP N=3: not 2·(16386 + 258 + 16386 + 66)"
[ "$(gathered "$tmp/m-mlp.json" 1)" = 0 ] || fail "MLP N=1: gathered $(gathered "$tmp/m-mlp.json" 1), want 0 (views)"
[ "$(gathered "$tmp/m-p100.json" 3)" = 128 ] || fail "one persistent (b2) at N=3: not n·p = 128"
[ "$(gathered "$tmp/m-p100.json" 1)" = 128 ] || fail "one persistent (b2) at N=1: not n·p = 128"
# gpt2-tiny (GPT2LMHeadModel, tied head): wte, wpe, per layer ln_1, attn
# c_attn and c_proj, ln_2, mlp c_fc and c_proj (Conv1D, weight and bias),
# ln_f; every tensor at most 1e5 elements, so every one persists
want=$(python3 -c 'import json, sys
c = json.load(open(sys.argv[1]))
E, V, P, L, N = c["n_embd"], c["vocab_size"], c["n_positions"], c["n_layer"], 3
layer = [E, E, E * 3 * E, 3 * E, E * E, E, E, E, E * 4 * E, 4 * E, 4 * E * E, E]
t = [V * E, P * E] + layer * L + [E, E]
assert max(t) <= 1e5
print(4 * sum(-(-n // N) * N for n in t))' "$models/gpt2-tiny.json")
[ "$(gathered "$tmp/m-gpt2.json" 3)" = "$want" ] || fail "gpt2-tiny N=3: gathered $(gathered "$tmp/m-gpt2.json" 3), want $want"
echo "ds3_gather: ok (MLP N=3 gathered 66192 B, gpt2-tiny N=3 $want B)"

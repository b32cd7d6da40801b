#!/bin/sh
# fuzz_regress — every input a fuzz harness ever crashed on
# (tests/fuzz/regress/NAME/), fed to the real binary the way a user would
# give it: each must be refused cleanly, exit status 2 with exactly one
# line on stderr starting with "zerosim", never a signal, and the --out
# file of the command must not change.
#
# Runs from the build directory (automake sets $srcdir); ZS_BUILDDIR
# overrides where the binary is. Exit 0 pass, 1 fail, 77 skip, 99 error.
set -u

top=${ZS_BUILDDIR:-.}
zerosim=$top/zerosim
regress=${srcdir:-.}/tests/fuzz/regress
if [ ! -x "$zerosim" ]; then
	echo "fuzz_regress: $zerosim is not built" >&2
	exit 99
fi
tmp=$(mktemp -d "${TMPDIR:-/tmp}/zs-regress.XXXXXX") || exit 99
trap 'rm -rf "$tmp"' EXIT HUP INT TERM

# Valid partners for the report, made by this binary.
"$zerosim" measure -q --layers 4,8,4 --world 1,2,3 --out "$tmp/m.json" 2>"$tmp/err" &&
	"$zerosim" theory --layers 4,8,4 --world 1,2,3 --unit model,layer --out "$tmp/t.json" 2>>"$tmp/err" || {
	echo "fuzz_regress: cannot make the partner files: $(cat "$tmp/err")" >&2
	exit 99
}
# A mixtral for theory --routing FILE (tests/moe_lib.sh's, 2 blocks of 4 experts, top 2).
cat >"$tmp/mixtral.json" <<'JSON'
{"model_type": "mixtral", "hidden_size": 64, "intermediate_size": 96, "num_hidden_layers": 2,
 "num_attention_heads": 8, "num_key_value_heads": 4, "vocab_size": 64, "max_position_embeddings": 32,
 "num_local_experts": 4, "num_experts_per_tok": 2, "rms_norm_eps": 1e-05, "rope_theta": 1000000.0}
JSON
template=${srcdir:-.}/report/zerosim-report.tex
printf 'keep me\n' >"$tmp/keep"
mkdir "$tmp/rep" && printf 'old diff\n' >"$tmp/rep/diff.json"
cp "$tmp/keep" "$tmp/keep.orig"
cp "$tmp/rep/diff.json" "$tmp/diff.orig"

n=0
# run FILE ARGS...: the command must refuse FILE cleanly.
run() {
	file=$1
	shift
	n=$((n + 1))
	echo "fuzz_regress: $n: zerosim $* ($file)"
	"$zerosim" "$@" >"$tmp/out" 2>"$tmp/err" </dev/null
	st=$?
	if [ "$st" -gt 128 ]; then
		echo "fuzz_regress: FAIL: zerosim $* died of signal $((st - 128)) on $file" >&2
		exit 1
	fi
	if [ "$st" -ne 2 ]; then
		echo "fuzz_regress: FAIL: zerosim $* exited $st on $file, expected 2; stderr: $(cat "$tmp/err")" >&2
		exit 1
	fi
	if [ "$(wc -l <"$tmp/err")" -ne 1 ] || ! head -n 1 "$tmp/err" | grep -q '^zerosim' ||
		[ "$(tail -c 1 "$tmp/err" | od -An -c | tr -d ' ')" != '\n' ]; then
		echo "fuzz_regress: FAIL: zerosim $* on $file: stderr is not one 'zerosim...' line:" >&2
		cat "$tmp/err" >&2
		exit 1
	fi
	if ! cmp -s "$tmp/keep" "$tmp/keep.orig" || ! cmp -s "$tmp/rep/diff.json" "$tmp/diff.orig"; then
		echo "fuzz_regress: FAIL: zerosim $* on $file changed an existing output file" >&2
		exit 1
	fi
}

# feed NAME FILE: give FILE to every command that reads what harness
# tests/fuzz/fuzz_NAME reads. A new harness needs a line here.
feed() {
	case $1 in
	case)
		run "$2" measure -q --case "$2" --out "$tmp/keep" ;;
	spec)
		run "$2" theory --spec "$2" --out "$tmp/keep"
		run "$2" measure -q --spec "$2" --out "$tmp/keep" ;;
	measured)
		run "$2" report --measured "$2" --theory "$tmp/t.json" --template "$template" --no-render --out "$tmp/rep" ;;
	theory)
		run "$2" report --measured "$tmp/m.json" --theory "$2" --template "$template" --no-render --out "$tmp/rep" ;;
	model)
		run "$2" theory --model "$2" --out "$tmp/keep" ;;
	routing)
		run "$2" theory --model "$tmp/mixtral.json" --precision fp32 --seq 4 --batch 2 --world 1 --steps 2 \
			--routing "$2" --out "$tmp/keep" ;;
	*)
		echo "fuzz_regress: FAIL: no command is known to read what tests/fuzz/fuzz_$1.c reads; add it to feed() in $0" >&2
		exit 1 ;;
	esac
}

# Every harness, and only harnesses, has regression inputs: a loop that
# finds nothing to run must not pass.
harnesses=0
for h in "${srcdir:-.}"/tests/fuzz/fuzz_*.c; do
	[ -f "$h" ] || continue
	name=${h##*/fuzz_}
	name=${name%.c}
	harnesses=$((harnesses + 1))
	inputs=0
	for f in "$regress/$name"/*; do
		[ -f "$f" ] || continue
		inputs=$((inputs + 1))
		feed "$name" "$f"
	done
	if [ "$inputs" -eq 0 ]; then
		echo "fuzz_regress: FAIL: harness fuzz_$name has no regression inputs in $regress/$name/" >&2
		exit 1
	fi
done
if [ "$harnesses" -eq 0 ]; then
	echo "fuzz_regress: FAIL: no harness found in ${srcdir:-.}/tests/fuzz/" >&2
	exit 1
fi
for d in "$regress"/*/; do
	name=${d%/}
	name=${name##*/}
	if [ ! -f "${srcdir:-.}/tests/fuzz/fuzz_$name.c" ]; then
		echo "fuzz_regress: FAIL: $regress/$name/ belongs to no harness (no tests/fuzz/fuzz_$name.c)" >&2
		exit 1
	fi
done
echo "fuzz_regress: $n runs of the regression inputs of $harnesses harnesses refused cleanly"
exit 0

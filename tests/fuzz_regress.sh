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

for f in "$regress"/case/* "$regress"/spec/* "$regress"/measured/* "$regress"/theory/*; do
	[ -f "$f" ] || continue
	case $f in
	*/case/*)
		run "$f" measure -q --case "$f" --out "$tmp/keep" ;;
	*/spec/*)
		run "$f" theory --spec "$f" --out "$tmp/keep"
		run "$f" measure -q --spec "$f" --out "$tmp/keep" ;;
	*/measured/*)
		run "$f" report --measured "$f" --theory "$tmp/t.json" --template "$template" --no-render --out "$tmp/rep" ;;
	*/theory/*)
		run "$f" report --measured "$tmp/m.json" --theory "$f" --template "$template" --no-render --out "$tmp/rep" ;;
	esac
done
echo "fuzz_regress: $n regression inputs refused cleanly"
exit 0

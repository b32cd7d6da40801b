#!/bin/sh
# memlimit — under a virtual-memory limit (ulimit -v) every command answers
# or says in one line why it cannot, and ends: --version, --help, measure
# (the default sweep, a larger MLP and a transformer), theory, report, and
# bad usage, at limits from 40 MB (a few MB more than the binary itself,
# whose OpenBLAS is linked in: under that the kernel cannot even load it)
# to 1 GB. A run that has not ended within TIMEOUT seconds (60) fails:
# with the threaded OpenBLAS every command hung at exit, and a transformer
# whose OpenBLAS could not allocate its work buffer spun forever.
#
# Each run must either exit 0 or exit 1 or 2 with exactly one line on
# stderr, starting with "zerosim"; an out-of-memory line is printed once,
# however many of a sweep's runs meet the limit at once.
#
# Runs from the build directory (automake sets $srcdir); ZS_BUILDDIR
# overrides where the binary is. Exit 0 pass, 1 fail, 77 skip (a sanitizer
# build), 99 hard error.
set -u

top=${ZS_BUILDDIR:-.}
zerosim=$top/zerosim
srcdir=${srcdir:-.}
limit=${TIMEOUT:-60}
if [ ! -x "$zerosim" ]; then
	echo "memlimit: $zerosim is not built" >&2
	exit 99
fi
case $zerosim in /*) ;; *) zerosim=$(pwd)/$zerosim ;; esac
if ldd "$zerosim" 2>/dev/null | grep -q 'libasan'; then
	echo "memlimit: a sanitizer build (AddressSanitizer maps terabytes of shadow memory, so no ulimit -v lets it start): skipped"
	exit 77
fi
model=$srcdir/report/models/gpt2-tiny.json
template=$srcdir/report/zerosim-report.tex
case $model in /*) ;; *) model=$(pwd)/$model ;; esac
case $template in /*) ;; *) template=$(pwd)/$template ;; esac
tmp=$(mktemp -d "${TMPDIR:-/tmp}/zs-memlimit.XXXXXX") || exit 99
trap 'rm -rf "$tmp"' EXIT
trap 'exit 99' HUP INT TERM
cd "$tmp" || exit 99
if [ "$(ulimit -v)" != unlimited ]; then
	echo "memlimit: a memory limit is set already ($(ulimit -v) KB); the limits below may not be raised"
fi

# The report's inputs, made without a limit.
"$zerosim" measure -q --layers 4,8,4 --world 1,2 --out m.json &&
	"$zerosim" theory --layers 4,8,4 --world 1,2 --out t.json ||
	{ echo "memlimit: cannot make the report's inputs" >&2; exit 99; }

n=0
fails=0
for kb in 40000 60000 100000 200000 300000 400000 1000000; do
	for args in "--version" "--help" "measure -q --out o.json" \
		"measure -q --layers 512,2048,512 --world 1,2,4 --jobs 2 --out o.json" \
		"measure -q --model $model --world 1,2 --seq 32 --batch 2 --jobs 2 --out o.json" \
		"theory --out o.json" "theory --params 7.5e9 --world 64 --format text" \
		"report --measured m.json --theory t.json --template $template --no-render --out rep" \
		"frobnicate" "measure --layers 4,x,4"; do
		n=$((n + 1))
		# shellcheck disable=SC2086 # $args are the words of the command
		(ulimit -v "$kb" && exec timeout "$limit" "$zerosim" $args) >out 2>err </dev/null
		st=$?
		what="ulimit -v $kb; zerosim $args"
		lines=$(wc -l <err)
		bad=
		if [ "$st" -eq 124 ] || [ "$st" -eq 137 ]; then
			bad="still running after $limit s"
		elif [ "$st" -eq 0 ]; then
			[ -s out ] || [ -s o.json ] || [ -d rep ] || bad="exit 0 and no output"
		elif [ "$st" -gt 2 ]; then
			bad="exit $st; stderr: $(head -c 300 err)"
		elif [ "$lines" -ne 1 ] || ! grep -q '^zerosim' err; then
			bad="exit $st with $lines lines on stderr, not one 'zerosim...' line: $(head -c 300 err)"
		fi
		if [ -n "$bad" ]; then
			echo "memlimit: FAIL: $what: $bad" >&2
			fails=$((fails + 1))
		else
			echo "ok: $what => $st${lines:+ }$(head -n 1 err)"
		fi
		rm -rf o.json rep
	done
done
[ "$fails" -eq 0 ] || { echo "memlimit: $fails of $n runs failed" >&2; exit 1; }
echo "memlimit: all $n runs answered or said why not, in one line"
exit 0

#!/bin/sh
# signal_write — SIGINT, SIGTERM, SIGHUP or SIGQUIT arriving while an output
# is being written never leaves a .zerosim.tmpXXXXXX file, and the output
# is either as it was or whole. A timed kill meets that instant (a few
# microseconds) once in thousands of tries, so the signal is aimed:
# tests/sig_at.so, preloaded, has the process signal itself right after
# mkstemp makes a temporary file, or as linkat or rename is called (the
# three steps of util.c's write), and can take O_TMPFILE away so that the
# whole write goes through a named file. Every signal at every step, with
# and without O_TMPFILE, for `theory` and `measure` replacing an existing
# output, each tried REPEAT times (a signal that another thread takes
# races the writing thread).
#
# Before the fix, the mkstemp cases left the file every time (the name
# was picked before the signals were held back); with the threaded
# OpenBLAS, whose thread took the signal, the rename cases did now and then.
#
# Runs from the build directory; ZS_BUILDDIR overrides where the binary
# is, ZS_SIG_AT where the preload library is. Exit 0 pass, 1 fail, 77 skip
# (a sanitizer build, whose runtime must be loaded first), 99 hard error.
set -u

top=${ZS_BUILDDIR:-.}
zerosim=$top/zerosim
shim=${ZS_SIG_AT:-./tests/sig_at.so}
repeat=${REPEAT:-3}
for f in "$zerosim" "$shim"; do
	if [ ! -e "$f" ]; then
		echo "signal_write: $f is not built" >&2
		exit 99
	fi
done
case $zerosim in /*) ;; *) zerosim=$(pwd)/$zerosim ;; esac
case $shim in /*) ;; *) shim=$(pwd)/$shim ;; esac
if ldd "$zerosim" 2>/dev/null | grep -q 'libasan'; then
	echo "signal_write: a sanitizer build (its runtime must come before any preload): skipped"
	exit 77
fi
tmp=$(mktemp -d "${TMPDIR:-/tmp}/zs-sigwrite.XXXXXX") || exit 99
trap 'rm -rf "$tmp"' EXIT
trap 'exit 99' HUP INT TERM
cd "$tmp" || exit 99
ulimit -c 0 # SIGQUIT dumps no core here

# What each command writes when nothing stops it.
"$zerosim" theory --layers 4,8,4 --world 1,2 --out theory-ref.json &&
	"$zerosim" measure -q --layers 4,8,4 --world 1,2 --out measure-ref.json ||
	{ echo "signal_write: cannot make the reference outputs" >&2; exit 99; }

n=0
fails=0
hits=0
for cmd in theory measure; do
	for notmp in "" 1; do
		for at in mkstemp linkat rename; do
			for sig in INT:2 TERM:15 HUP:1 QUIT:3; do # Linux's numbers
				num=${sig#*:} sig=${sig%:*}
				i=0
				while [ "$i" -lt "$repeat" ]; do
					i=$((i + 1))
					n=$((n + 1))
					printf 'keep\n' >out.json
					if [ "$cmd" = theory ]; then
						set -- theory --layers 4,8,4 --world 1,2 --out out.json
					else
						set -- measure -q --layers 4,8,4 --world 1,2 --out out.json
					fi
					# env --default-signal: this shell's background or
					# non-interactive state must not leave SIGINT ignored.
					env --default-signal ZS_SIGNAL_AT="$at" ZS_SIGNAL="$num" ${notmp:+ZS_NO_TMPFILE=1} \
						LD_PRELOAD="$shim" timeout 300 "$zerosim" "$@" 2>err
					st=$?
					[ "$st" -gt 128 ] && hits=$((hits + 1))
					what="SIG$sig at $at${notmp:+ (no O_TMPFILE)}: zerosim $*"
					left=$(find . -name '.zerosim.tmp*')
					if [ -n "$left" ]; then
						echo "signal_write: FAIL: $what left $left" >&2
						fails=$((fails + 1))
						rm -f ./.zerosim.tmp*
					fi
					if ! cmp -s out.json "$cmd-ref.json" && [ "$(cat out.json)" != keep ]; then
						echo "signal_write: FAIL: $what left out.json neither as it was nor whole" >&2
						fails=$((fails + 1))
					fi
				done
			done
		done
	done
done
# env --default-signal is coreutils 8.31 or later; without it the runs
# above fail to start and nothing was tested.
if [ "$hits" -eq 0 ]; then
	echo "signal_write: no run died of its signal: the preload library did not act ($(cat err))" >&2
	exit 99
fi
[ "$fails" -eq 0 ] || { echo "signal_write: $fails of $n runs failed" >&2; exit 1; }
echo "signal_write: $n runs, $hits killed by their signal while writing, none left a temporary file"
exit 0

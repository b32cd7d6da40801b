#!/bin/sh
# deepspeed_cli — DeepSpeed's settings on the command line: each bad value
# is refused in one line with exit 2 and nothing written; the settings are
# recorded in both files' config; the 1 GB reduce bucket every rank counts
# is not resident in this process (its pages are never written). Runs
# from the build directory.
set -u
zerosim=${ZS_BUILDDIR:-.}/zerosim
[ -x "$zerosim" ] || { echo "deepspeed_cli: $zerosim is not built" >&2; exit 99; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/zs-ds.XXXXXX") || exit 99
trap 'rm -rf "$tmp"' EXIT HUP INT TERM
fail() { echo "deepspeed_cli: FAIL: $*" >&2; exit 1; }

refused() {
	"$@" --out "$tmp/no.json" >/dev/null 2>"$tmp/err"
	rc=$?
	[ $rc -eq 2 ] || fail "$* exited $rc, not 2"
	[ "$(wc -l <"$tmp/err")" -eq 1 ] || fail "$*: not one line: $(cat "$tmp/err")"
	[ ! -e "$tmp/no.json" ] || fail "$* wrote its output"
}
for cmd in measure theory; do
	for bad in "--ds-reduce-bucket 0" "--ds-reduce-bucket 2.5" "--ds-reduce-bucket 1e10" "--ds-reduce-bucket x" \
		"--ds-reduce-bucket -5" "--ds-allgather-bucket 3" "--ds-allgather-bucket 0" "--ds-overlap-comm yes" \
		"--ds-overlap-comm"; do
		# shellcheck disable=SC2086 # the option and its value are two words
		refused "$zerosim" $cmd --framework deepspeed --schemes zero1 --world 2 $bad
	done
	refused "$zerosim" $cmd --ds-reduce-bucket 100 --world 2
	refused "$zerosim" $cmd --framework torch --ds-overlap-comm on --world 2
done
refused "$zerosim" measure --framework deepspeed --schemes zero3 --world 2

# the settings in both files
for cmd in measure theory; do
	"$zerosim" $cmd --framework deepspeed --schemes zero2 --world 2 --ds-reduce-bucket 1000 --ds-overlap-comm on \
		--out "$tmp/$cmd.json" 2>/dev/null || fail "$cmd"
	tr -d ' \t\n' <"$tmp/$cmd.json" | grep -q '"deepspeed":{"reduce_bucket":1000,"allgather_bucket":500000000,"overlap_comm":true}' ||
		fail "$cmd: no deepspeed settings in config"
done
"$zerosim" theory --out "$tmp/d.json" && ! grep -q '"deepspeed"' "$tmp/d.json" || fail "the default names DeepSpeed's settings"

# Eight ranks with two 1e9-byte buckets each count 2e9 bytes apiece at the
# peak; the process holds a few megabytes (GNU time's maximum RSS, where
# installed).
"$zerosim" measure -q --framework deepspeed --schemes zero2 --world 8 --ds-overlap-comm on --out "$tmp/m8.json" ||
	fail "measure N=8"
tr -d ' \t\n' <"$tmp/m8.json" | grep -q '"peak_bytes":\[2000[0-9]\{6\},' || fail "no 2e9-byte peak per rank"
if [ -x /usr/bin/time ]; then
	/usr/bin/time -f %M -o "$tmp/rss" "$zerosim" measure -q --framework deepspeed --schemes zero2 --world 8 \
		--ds-overlap-comm on --out "$tmp/m8.json" || fail "measure under time"
	[ "$(cat "$tmp/rss")" -lt 262144 ] || fail "the buckets were resident: $(cat "$tmp/rss") kB"
fi
echo "deepspeed_cli: ok"

#!/bin/sh
# theory_cli — `zerosim theory` as a user meets it: the paper's Table 1 from
# --params, --device-mem, --largest-unit, --help, --spec with overrides, and
# the options that conflict. Bad values of single options are in
# cli_errors.sh.
# Runs from the build directory; ZS_BUILDDIR overrides.
set -u

top=${ZS_BUILDDIR:-.}
zerosim=$top/zerosim
spec=${srcdir:-.}/data/sweep.json
if [ ! -x "$zerosim" ]; then
	echo "theory_cli: $zerosim is not built" >&2
	exit 99
fi
tmp=$(mktemp -d "${TMPDIR:-/tmp}/zs-cli.XXXXXX") || exit 99
trap 'rm -rf "$tmp"' EXIT HUP INT TERM
failed=0

fail() {
	echo "theory_cli: FAIL: $*" >&2
	failed=1
}

# expect STATUS ARGS...: run `zerosim theory ARGS`, check the exit status,
# and for exit 2 exactly one stderr line "zerosim theory: ...".
expect() {
	want=$1
	shift
	"$zerosim" theory "$@" >"$tmp/out" 2>"$tmp/err"
	got=$?
	if [ "$got" -ne "$want" ]; then
		fail "zerosim theory $* exited $got, expected $want; stderr: $(cat "$tmp/err")"
		return
	fi
	if [ "$want" -ne 0 ]; then
		lines=$(wc -l <"$tmp/err")
		if [ "$lines" -ne 1 ] || ! grep -q '^zerosim theory: ' "$tmp/err"; then
			fail "zerosim theory $*: stderr is not one 'zerosim theory: ' line: $(cat "$tmp/err")"
		fi
	elif [ -s "$tmp/err" ]; then
		fail "zerosim theory $* succeeded but wrote to stderr: $(cat "$tmp/err")"
	fi
}

# The paper's Table 1 at N = 64, and its N list by default.
expect 0 --params 7.5e9 --world 64
tr -s ' ' <"$tmp/out" | grep -q '^ 64 120 31.4 16.6 1.88$' ||
	fail "--params 7.5e9 --world 64 does not print 120 31.4 16.6 1.88: $(cat "$tmp/out")"
expect 0 --params 1e12
tr -s ' ' <"$tmp/out" | grep -q '^ 1024 16000 4012 2014 15.6$' ||
	fail "--params 1e12 does not print N = 1024: 16000 4012 2014 15.6: $(cat "$tmp/out")"
expect 0 --params 7.5e9 --device-mem 32GB
grep -q 'zero2 *N = 16$' "$tmp/out" || fail "--device-mem 32GB: zero2 should fit from N = 16"
expect 0 --params 7.5e9 --device-mem 30GiB --largest-unit 1e8 --format json
grep -q '"transient_bytes":' "$tmp/out" || fail "--largest-unit gives no transient_bytes"
expect 0 --help
grep -q '^Usage: zerosim theory' "$tmp/out" || fail "--help does not start with Usage"

# JSON to a file, a spec with overrides, and the run options a spec has.
expect 0 --spec "$spec" --world 3 --unit layer --steps 9 --seed 1 --lr 0.5 --out "$tmp/t.json"
grep -q '"format":[[:space:]]*"zerosim-theory/1"' "$tmp/t.json" || fail "--out: no zerosim-theory/1 in $tmp/t.json"
[ "$(grep -c '"scheme"' "$tmp/t.json")" -eq 4 ] || fail "--spec --world 3 --unit layer: expected 4 rows"
expect 0 --layers 2,3,1 --world 2 --format text
grep -q 'unit = model' "$tmp/out" || fail "--format text for a shape has no schedule table"

# Conflicting options (the rest of the bad input is in cli_errors.sh, which
# also checks that an existing output survives): exit 2, one line.
expect 2 --layers 2,3,1 --largest-unit 5
expect 2 --params 100 --layers 2,3,1

[ "$failed" -eq 0 ] && echo "theory_cli: all checks passed"
exit "$failed"

#!/bin/sh
# cli_errors — zerosim meets bad input the way a stranger would give it:
# every bad option and every broken file must be refused with
# exit status 2 (1 for a failure at run time: an unwritable folder, a full
# disk), exactly one line on stderr that starts with "zerosim", nothing on
# stdout, never a signal, and an existing output file left byte for byte as
# it was. Every case names the message it expects (never an option's name
# alone), and nothing is written outside this test's temporary folder.
# Then --help and --version. Signals, limits, pipes and the environment are
# hostile.sh's.
#
# Runs from the build directory (automake sets $srcdir); ZS_BUILDDIR
# overrides where the binary is. Prints each case; stops at the first
# failure; CLI_ERRORS_VERBOSE=1 prints each message too. Exit 0 pass,
# 1 fail, 99 hard error (automake's convention).
set -u

top=${ZS_BUILDDIR:-.}
zerosim=$top/zerosim
srcdir=${srcdir:-.}
. "$srcdir/tests/json_edit.sh"
template=$srcdir/report/zerosim-report.tex
if [ ! -x "$zerosim" ]; then
	echo "cli_errors: $zerosim is not built" >&2
	exit 99
fi
if [ ! -f "$template" ]; then
	echo "cli_errors: no report template at $template" >&2
	exit 99
fi
tmp=$(mktemp -d "${TMPDIR:-/tmp}/zs-errors.XXXXXX") || exit 99
trap 'rm -rf "$tmp"' EXIT
trap 'exit 99' HUP INT TERM

n=0
fail() {
	echo "cli_errors: FAIL (case $n): $*" >&2
	exit 1
}

# Outputs that must survive every failed run: --out FILE for measure and
# theory, and an earlier report in the --out folder of report.
keep=$tmp/keep.json
printf '{"keep": "this file must not change"}\n' >"$keep"
cp "$keep" "$tmp/keep.orig"
rep=$tmp/rep
mkdir "$rep" || exit 99
printf '{"earlier": "report"}\n' >"$rep/diff.json"
cp "$rep/diff.json" "$tmp/diff.orig"

# try STATUS PATTERN ARGS...: run `zerosim ARGS`; it must exit STATUS and,
# when STATUS is not 0, print one line on stderr, starting with "zerosim"
# and containing PATTERN (a fixed string, the message expected), and, for
# STATUS 2, nothing on stdout. The kept outputs must be unchanged.
try() {
	want=$1
	pat=$2
	shift 2
	n=$((n + 1))
	echo "cli_errors: $n: zerosim $* => $want"
	"$zerosim" "$@" >"$tmp/out" 2>"$tmp/err" </dev/null
	st=$?
	[ "$st" -gt 128 ] && fail "zerosim $* died of signal $((st - 128)); stderr: $(cat "$tmp/err")"
	[ "$st" -eq "$want" ] || fail "zerosim $* exited $st, expected $want; stderr: $(cat "$tmp/err")"
	if [ "$want" -ne 0 ]; then
		lines=$(wc -l <"$tmp/err")
		[ "$lines" -eq 1 ] && [ "$(tail -c 1 "$tmp/err" | od -An -c | tr -d ' ')" = '\n' ] ||
			fail "zerosim $*: stderr is not exactly one line: $(cat "$tmp/err")"
		head -n 1 "$tmp/err" | grep -q '^zerosim' ||
			fail "zerosim $*: the message does not start with 'zerosim': $(cat "$tmp/err")"
		[ -n "$pat" ] || fail "zerosim $*: the test gives no message to expect"
		grep -qF -e "$pat" "$tmp/err" ||
			fail "zerosim $*: the message does not say '$pat': $(cat "$tmp/err")"
	fi
	[ -n "${CLI_ERRORS_VERBOSE:-}" ] && sed 's/^/      /' "$tmp/err"
	if [ "$want" -eq 2 ] && [ -s "$tmp/out" ]; then
		fail "zerosim $*: bad input, yet something was printed on stdout: $(head -c 200 "$tmp/out")"
	fi
	cmp -s "$keep" "$tmp/keep.orig" || fail "zerosim $*: the existing --out file was changed"
	cmp -s "$rep/diff.json" "$tmp/diff.orig" || fail "zerosim $*: the earlier report's diff.json was changed"
}

# The same with the output already there to be clobbered.
bad_measure() { p=$1; shift; try 2 "$p" measure -q --out "$keep" "$@"; }
bad_theory() { p=$1; shift; try 2 "$p" theory --out "$keep" "$@"; }
bad_report() { p=$1; shift; try 2 "$p" report --template "$template" --no-render --out "$rep" "$@"; }

# ---------------------------------------------------------------------------
# Help and version: exit 0, on stdout, nothing on stderr.
for args in "--help" "--version" "measure --help" "theory --help" "report --help" \
	"measure --version" "theory --version" "report --version"; do
	n=$((n + 1))
	echo "cli_errors: $n: zerosim $args => 0, text on stdout"
	# shellcheck disable=SC2086 # word splitting of $args is intended
	"$zerosim" $args >"$tmp/out" 2>"$tmp/err" </dev/null
	st=$?
	[ "$st" -eq 0 ] || fail "zerosim $args exited $st"
	[ -s "$tmp/out" ] || fail "zerosim $args printed nothing on stdout"
	[ -s "$tmp/err" ] && fail "zerosim $args wrote to stderr: $(cat "$tmp/err")"
done
"$zerosim" --version | head -n 1 | grep -q '^zerosim [0-9]' ||
	fail "zerosim --version does not start with 'zerosim VERSION'"

try 2 "missing command (measure, theory, report); try 'zerosim --help'" # no command at all
try 2 "unknown command 'frobnicate' (measure, theory, report); try 'zerosim --help'" frobnicate
try 2 "unknown command '--bogus' (measure, theory, report); try 'zerosim --help'" --bogus

# ---------------------------------------------------------------------------
# measure: every option's bad values.
bad_measure "--world: '0' is not a world size (1..65536)" --world 0
bad_measure "--world: '-1' is not a world size (1..65536)" --world -1
bad_measure "--world: 'abc' is not a world size (1..65536)" --world abc
bad_measure "--world: '1,,2' has an empty item" --world 1,,2
bad_measure "--world: the list is empty" --world ""
bad_measure "--world: '1,' has an empty item" --world 1,
bad_measure "--world: 2 is listed twice" --world 2,2
bad_measure "--world: '65537' is not a world size (1..65536)" --world 65537
bad_measure "--world: ' 2' is not a world size (1..65536)" --world " 2"
bad_measure "--world: '0x10' is not a world size (1..65536)" --world 0x10
bad_measure "--layers: '64' needs at least two widths (input and output)" --layers 64
bad_measure "--layers: '4294967296' is not a layer width (1..1000000)" --layers 4294967296,4294967296
bad_measure "--layers: '0' is not a layer width (1..1000000)" --layers 64,0,64
bad_measure "--layers: '-1' is not a layer width (1..1000000)" --layers 64,-1
bad_measure "--layers: '18446744073709551617' is not a layer width (1..1000000)" --layers 18446744073709551617,2
bad_measure "--layers: more than 131 widths" --layers "$(seq -s, 1 132)"
bad_measure "--steps: '0' is not a step count (1..1000000)" --steps 0
bad_measure "--steps: '-3' is not a step count (1..1000000)" --steps -3
bad_measure "--steps: '2.5' is not a step count (1..1000000)" --steps 2.5
bad_measure "--steps: '99999999999999999999' is not a step count (1..1000000)" --steps 99999999999999999999
bad_measure "--batch: '0' is not a batch size (1..65536)" --batch 0
bad_measure "--batch: an empty value is not a batch size" --batch ""
bad_measure "--seed: '-1' is not a seed (a whole number 0..2^53-1 = 9007199254740991)" --seed -1
bad_measure "--seed: '18446744073709551616' is not a seed (a whole number 0..2^53-1 = 9007199254740991)" --seed 18446744073709551616
bad_measure "--lr: '-1' is not a learning rate (a number in [1e-12, 1000])" --lr -1
bad_measure "--lr: '0' is not a learning rate (a number in [1e-12, 1000])" --lr 0
bad_measure "--lr: '1e-13' is not a learning rate (a number in [1e-12, 1000])" --lr 1e-13
bad_measure "--lr: 'nan' is not a learning rate (a number in [1e-12, 1000])" --lr nan
bad_measure "--lr: 'inf' is not a learning rate (a number in [1e-12, 1000])" --lr inf
bad_measure "--lr: '1e999' is not a learning rate (a number in [1e-12, 1000])" --lr 1e999
bad_measure "--lr: '0.1x' is not a learning rate (a number in [1e-12, 1000])" --lr 0.1x
bad_measure "--schemes: unknown scheme 'zero4' (dp, zero1, zero2, zero3)" --schemes zero4
bad_measure "--schemes: 'dp,,zero3' has an empty item" --schemes dp,,zero3
bad_measure "--unit: unknown unit 'block' (model, layer)" --unit block
bad_measure "--precision: unknown precision 'fp8' (mixed, fp32, amp-bf16, amp-fp16)" --precision fp8
bad_measure "--optimizer: unknown optimizer 'lamb' (adam, sgd)" --optimizer lamb
bad_measure "--jobs: '0' is not a number of jobs (1..64)" --jobs 0
bad_measure "--jobs: '65' is not a number of jobs (1..64)" --jobs 65
bad_measure "--jobs: 'two' is not a number of jobs (1..64)" --jobs two
bad_measure "--jobs: an empty value is not a number of jobs" --jobs ""
bad_measure "--jobs: '1.5' is not a number of jobs (1..64)" -j 1.5
bad_measure "--jobs: ' 2' is not a number of jobs (1..64)" --jobs " 2"
bad_measure "unknown option '--frobnicate'; try 'zerosim measure --help'" --frobnicate
bad_measure "unexpected argument 'stray'; try 'zerosim measure --help'" stray
bad_measure "option '--world' needs a value; try 'zerosim measure --help'" --world
bad_measure "option '--out' needs a value; try 'zerosim measure --help'" --layers 4,8,4 --out
bad_measure "--out: the file name is empty" --layers 4,8,4 --out ""
bad_measure "--dump-weights: the file name is empty" --layers 4,8,4 --dump-weights ""

# Run-time failures: the output cannot be written (exit 1), found before
# the run where possible; the existing file is kept.
try 1 "cannot write $tmp/missing-dir/m.json: the folder $tmp/missing-dir is missing" measure -q --layers 4,8,4 --world 1 --out "$tmp/missing-dir/m.json"
try 1 "cannot write $tmp/keep.json/m.json: Not a directory" measure -q --layers 4,8,4 --world 1 --out "$keep/m.json"
try 1 "cannot write $tmp/missing-dir/w.json: the folder $tmp/missing-dir is missing" measure -q --layers 4,8,4 --world 1 --dump-weights "$tmp/missing-dir/w.json"
try 2 "--out $tmp: is a folder, not a file" measure -q --layers 4,8,4 --world 1 --out "$tmp"
[ -e "$tmp/missing-dir" ] && fail "a failed run created $tmp/missing-dir"

# A full disk. As root, writing next to /dev/full could replace the device
# itself with a file (a temporary file renamed over it), so a private copy
# of the device is used when one can be made; it must still be a character
# device afterwards.
if mknod "$tmp/full" c 1 7 2>/dev/null; then
	full=$tmp/full
elif [ "$(id -u)" -ne 0 ]; then
	full=/dev/full
else
	full=
	echo "cli_errors: cannot make a private /dev/full as root: the full-disk cases are skipped"
fi
if [ -n "$full" ] && [ -c "$full" ]; then
	try 1 "cannot write $full: No space left on device" measure -q --layers 4,8,4 --world 1 --out "$full"
	[ -c "$full" ] || fail "zerosim measure --out $full replaced the device with a file"
	try 1 "cannot write $full: No space left on device" theory --layers 4,8,4 --world 1 --out "$full"
	[ -c "$full" ] || fail "zerosim theory --out $full replaced the device with a file"
	try 1 "cannot write $full: No space left on device" theory --params 7.5e9 --format text --out "$full"
	[ -c "$full" ] || fail "zerosim theory --format text --out $full replaced the device with a file"
	try 1 "cannot write $full: No space left on device" measure -q --layers 4,8,4 --world 1 --dump-weights "$full"
	[ -c "$full" ] || fail "zerosim measure --dump-weights $full replaced the device with a file"
fi

# Standard output on a full disk, redirected by the shell (safe with the
# real /dev/full: nothing is renamed): an error said in one line, exit 1,
# for --help and --version too (GNU's close_stdout).
stdout_full=$full
[ -z "$stdout_full" ] && [ -c /dev/full ] && stdout_full=/dev/full
if [ -n "$stdout_full" ]; then
	for args in "--help" "--version" "measure --help" "measure --version" "theory --help" \
		"theory --version" "report --help" "report --version" "theory --params 7.5e9" \
		"theory --layers 4,8,4 --world 2 --format json" "measure -q --layers 4,8,4 --world 1"; do
		n=$((n + 1))
		echo "cli_errors: $n: zerosim $args >$stdout_full => 1"
		# shellcheck disable=SC2086 # word splitting of $args is intended
		"$zerosim" $args >"$stdout_full" 2>"$tmp/err" </dev/null
		st=$?
		[ "$st" -eq 1 ] || fail "zerosim $args >$stdout_full exited $st, expected 1: $(cat "$tmp/err")"
		[ "$(wc -l <"$tmp/err")" -eq 1 ] && head -n 1 "$tmp/err" | grep -q '^zerosim' ||
			fail "zerosim $args >$stdout_full: stderr is not one 'zerosim' line: $(cat "$tmp/err")"
	done
fi

# A pipe reached through a link (as /dev/stdout is) is written in place:
# renaming a temporary file over the link would replace it.
if [ -e /proc/self/fd/1 ] && ln -s /proc/self/fd/1 "$tmp/out-link" 2>/dev/null; then
	n=$((n + 1))
	echo "cli_errors: $n: zerosim theory --out LINK-TO-STDOUT | cat => 0, JSON in the pipe"
	{
		"$zerosim" theory --params 7.5e9 --out "$tmp/out-link" 2>"$tmp/err"
		echo $? >"$tmp/st"
	} | cat >"$tmp/piped"
	[ -L "$tmp/out-link" ] || fail "zerosim theory --out LINK replaced the link to its standard output with a file"
	[ "$(cat "$tmp/st")" -eq 0 ] || fail "zerosim theory --out LINK exited $(cat "$tmp/st"): $(cat "$tmp/err")"
	grep -q 'zerosim-theory/1' "$tmp/piped" || fail "zerosim theory --out LINK wrote nothing into the pipe"
fi

# ---------------------------------------------------------------------------
# Sweep specs (measure and theory read them alike).
spec() { printf '%s\n' "$2" >"$tmp/$1.json"; }
spec sp-notjson 'this is not JSON'
spec sp-trunc '{"format": "zerosim-sweep/1", "layers": [64, 256'
spec sp-empty ''
spec sp-array '[1, 2, 3]'
spec sp-noformat '{"layers": [4, 8, 4]}'
spec sp-format '{"format": "zerosim-sweep/6"}'
spec sp-format-case '{"format": "zerosim-case/1"}'
spec sp-steps-str '{"format": "zerosim-sweep/1", "steps": "three"}'
spec sp-world-str '{"format": "zerosim-sweep/1", "world": "one"}'
spec sp-steps-inf '{"format": "zerosim-sweep/1", "steps": 1e999}'
spec sp-lr-inf '{"format": "zerosim-sweep/1", "lr": 1e999}'
spec sp-layers-inf '{"format": "zerosim-sweep/1", "layers": [4, -1e999]}'
spec sp-seed-big '{"format": "zerosim-sweep/1", "seed": 1e30}'
spec sp-steps-frac '{"format": "zerosim-sweep/1", "steps": 2.5}'
spec sp-nested '{"format": "zerosim-sweep/1", "world": [1, [2]]}'
spec sp-world-empty '{"format": "zerosim-sweep/1", "world": []}'
spec sp-world-obj '{"format": "zerosim-sweep/1", "world": {"n": 2}}'
spec sp-world-bool '{"format": "zerosim-sweep/1", "world": true}'
spec sp-batch0 '{"format": "zerosim-sweep/1", "batch": 0}'
spec sp-layers1 '{"format": "zerosim-sweep/1", "layers": [64]}'
spec sp-layers-huge '{"format": "zerosim-sweep/1", "layers": [4294967296, 4294967296]}'
spec sp-scheme '{"format": "zerosim-sweep/1", "schemes": ["zero4"]}'
spec sp-unit '{"format": "zerosim-sweep/1", "units": ["block"]}'
spec sp-precision '{"format": "zerosim-sweep/1", "precision": "fp8"}'
spec sp-optimizer '{"format": "zerosim-sweep/1", "optimizer": null}'
spec sp-lr-neg '{"format": "zerosim-sweep/1", "lr": -1}'
printf '{"format": "zerosim-sweep/1"}\0\n' >"$tmp/sp-nul.json"
mkdir "$tmp/sp-dir.json"
bad_measure "$tmp/sp-missing.json: No such file or directory" --spec "$tmp/sp-missing.json"
bad_theory "$tmp/sp-missing.json: No such file or directory" --spec "$tmp/sp-missing.json"
bad_measure "$tmp/sp-notjson.json: not valid JSON (near byte 0)" --spec "$tmp/sp-notjson.json"
bad_theory "$tmp/sp-notjson.json: not valid JSON (near byte 0)" --spec "$tmp/sp-notjson.json"
bad_measure "$tmp/sp-trunc.json: not valid JSON (near byte 49)" --spec "$tmp/sp-trunc.json"
bad_theory "$tmp/sp-trunc.json: not valid JSON (near byte 49)" --spec "$tmp/sp-trunc.json"
bad_measure "$tmp/sp-empty.json: not valid JSON (near byte 1)" --spec "$tmp/sp-empty.json"
bad_theory "$tmp/sp-empty.json: not valid JSON (near byte 1)" --spec "$tmp/sp-empty.json"
bad_measure "$tmp/sp-array.json: not a zerosim file (the top level is not a JSON object)" --spec "$tmp/sp-array.json"
bad_theory "$tmp/sp-array.json: not a zerosim file (the top level is not a JSON object)" --spec "$tmp/sp-array.json"
bad_measure "$tmp/sp-noformat.json: this file has no \"format\" string, this zerosim reads zerosim-sweep/5 or zerosim-sweep/4 or zerosim-sweep/3 or zerosim-sweep/2 or zerosim-sweep/1" --spec "$tmp/sp-noformat.json"
bad_theory "$tmp/sp-noformat.json: this file has no \"format\" string, this zerosim reads zerosim-sweep/5 or zerosim-sweep/4 or zerosim-sweep/3 or zerosim-sweep/2 or zerosim-sweep/1" --spec "$tmp/sp-noformat.json"
bad_measure "$tmp/sp-format.json: this file is format zerosim-sweep/6, this zerosim reads zerosim-sweep/5 or zerosim-sweep/4 or zerosim-sweep/3 or zerosim-sweep/2 or zerosim-sweep/1" --spec "$tmp/sp-format.json"
bad_theory "$tmp/sp-format.json: this file is format zerosim-sweep/6, this zerosim reads zerosim-sweep/5 or zerosim-sweep/4 or zerosim-sweep/3 or zerosim-sweep/2 or zerosim-sweep/1" --spec "$tmp/sp-format.json"
bad_measure "$tmp/sp-format-case.json: this file is format zerosim-case/1, this zerosim reads zerosim-sweep/5 or zerosim-sweep/4 or zerosim-sweep/3 or zerosim-sweep/2 or zerosim-sweep/1" --spec "$tmp/sp-format-case.json"
bad_theory "$tmp/sp-format-case.json: this file is format zerosim-case/1, this zerosim reads zerosim-sweep/5 or zerosim-sweep/4 or zerosim-sweep/3 or zerosim-sweep/2 or zerosim-sweep/1" --spec "$tmp/sp-format-case.json"
# A setting that the spec gave, not the command line, is named by the
# file and its key where a check refuses it (the message once said
# "--freeze", an option the user never typed); given on the command line
# too, the option is what it names.
printf '{"format": "zerosim-sweep/3", "freeze": "embeddings", "schemes": ["zero3"], "world": [2]}\n' >"$tmp/sp-freeze.json"
for cmd in measure theory; do
	bad_$cmd "$tmp/sp-freeze.json's \"freeze\" embeddings under --framework paper: only with --model" \
		--spec "$tmp/sp-freeze.json" --layers 8,8
	bad_$cmd "zerosim $cmd: --freeze embeddings under --framework paper: only with --model" \
		--spec "$tmp/sp-freeze.json" --layers 8,8 --freeze embeddings
done
bad_measure "$tmp/sp-steps-str.json: \"steps\" is not a number" --spec "$tmp/sp-steps-str.json"
bad_theory "$tmp/sp-steps-str.json: \"steps\" is not a number" --spec "$tmp/sp-steps-str.json"
bad_measure "$tmp/sp-world-str.json: \"world\" is not an array of numbers" --spec "$tmp/sp-world-str.json"
bad_theory "$tmp/sp-world-str.json: \"world\" is not an array of numbers" --spec "$tmp/sp-world-str.json"
bad_measure "$tmp/sp-steps-inf.json: \"steps\" is not a finite number" --spec "$tmp/sp-steps-inf.json"
bad_theory "$tmp/sp-steps-inf.json: \"steps\" is not a finite number" --spec "$tmp/sp-steps-inf.json"
bad_measure "$tmp/sp-lr-inf.json: \"lr\" is not a finite number" --spec "$tmp/sp-lr-inf.json"
bad_theory "$tmp/sp-lr-inf.json: \"lr\" is not a finite number" --spec "$tmp/sp-lr-inf.json"
bad_measure "$tmp/sp-layers-inf.json: \"layers\" is not a finite number" --spec "$tmp/sp-layers-inf.json"
bad_theory "$tmp/sp-layers-inf.json: \"layers\" is not a finite number" --spec "$tmp/sp-layers-inf.json"
bad_measure "$tmp/sp-seed-big.json: \"seed\" is a whole number of 2^53 or more, where a JSON number is no longer exact" --spec "$tmp/sp-seed-big.json"
bad_theory "$tmp/sp-seed-big.json: \"seed\" is a whole number of 2^53 or more, where a JSON number is no longer exact" --spec "$tmp/sp-seed-big.json"
bad_measure "$tmp/sp-steps-frac.json: \"steps\": '2.5' is not a step count (1..1000000)" --spec "$tmp/sp-steps-frac.json"
bad_theory "$tmp/sp-steps-frac.json: \"steps\": '2.5' is not a step count (1..1000000)" --spec "$tmp/sp-steps-frac.json"
bad_measure "$tmp/sp-nested.json: \"world\" holds a nested array" --spec "$tmp/sp-nested.json"
bad_theory "$tmp/sp-nested.json: \"world\" holds a nested array" --spec "$tmp/sp-nested.json"
bad_measure "$tmp/sp-world-empty.json: \"world\": the list is empty" --spec "$tmp/sp-world-empty.json"
bad_theory "$tmp/sp-world-empty.json: \"world\": the list is empty" --spec "$tmp/sp-world-empty.json"
bad_measure "$tmp/sp-world-obj.json: \"world\" is not an array of numbers" --spec "$tmp/sp-world-obj.json"
bad_theory "$tmp/sp-world-obj.json: \"world\" is not an array of numbers" --spec "$tmp/sp-world-obj.json"
bad_measure "$tmp/sp-world-bool.json: \"world\" is not an array of numbers" --spec "$tmp/sp-world-bool.json"
bad_theory "$tmp/sp-world-bool.json: \"world\" is not an array of numbers" --spec "$tmp/sp-world-bool.json"
bad_measure "$tmp/sp-batch0.json: \"batch\": '0' is not a batch size (1..65536)" --spec "$tmp/sp-batch0.json"
bad_theory "$tmp/sp-batch0.json: \"batch\": '0' is not a batch size (1..65536)" --spec "$tmp/sp-batch0.json"
bad_measure "$tmp/sp-layers1.json: \"layers\": '64' needs at least two widths (input and output)" --spec "$tmp/sp-layers1.json"
bad_theory "$tmp/sp-layers1.json: \"layers\": '64' needs at least two widths (input and output)" --spec "$tmp/sp-layers1.json"
bad_measure "$tmp/sp-layers-huge.json: \"layers\": '4294967296' is not a layer width (1..1000000)" --spec "$tmp/sp-layers-huge.json"
bad_theory "$tmp/sp-layers-huge.json: \"layers\": '4294967296' is not a layer width (1..1000000)" --spec "$tmp/sp-layers-huge.json"
bad_measure "$tmp/sp-scheme.json: \"schemes\": unknown scheme 'zero4' (dp, zero1, zero2, zero3)" --spec "$tmp/sp-scheme.json"
bad_theory "$tmp/sp-scheme.json: \"schemes\": unknown scheme 'zero4' (dp, zero1, zero2, zero3)" --spec "$tmp/sp-scheme.json"
bad_measure "$tmp/sp-unit.json: \"units\": unknown unit 'block' (model, layer)" --spec "$tmp/sp-unit.json"
bad_theory "$tmp/sp-unit.json: \"units\": unknown unit 'block' (model, layer)" --spec "$tmp/sp-unit.json"
bad_measure "$tmp/sp-precision.json: \"precision\": unknown precision 'fp8' (mixed, fp32, amp-bf16, amp-fp16)" --spec "$tmp/sp-precision.json"
bad_theory "$tmp/sp-precision.json: \"precision\": unknown precision 'fp8' (mixed, fp32, amp-bf16, amp-fp16)" --spec "$tmp/sp-precision.json"
bad_measure "$tmp/sp-optimizer.json: \"optimizer\" is not a string" --spec "$tmp/sp-optimizer.json"
bad_theory "$tmp/sp-optimizer.json: \"optimizer\" is not a string" --spec "$tmp/sp-optimizer.json"
bad_measure "$tmp/sp-lr-neg.json: \"lr\" is -1, a negative number" --spec "$tmp/sp-lr-neg.json"
bad_theory "$tmp/sp-lr-neg.json: \"lr\" is -1, a negative number" --spec "$tmp/sp-lr-neg.json"
bad_measure "$tmp/sp-nul.json: not JSON (it contains a NUL byte)" --spec "$tmp/sp-nul.json"
bad_theory "$tmp/sp-nul.json: not JSON (it contains a NUL byte)" --spec "$tmp/sp-nul.json"
bad_measure "$tmp/sp-dir.json: is a directory" --spec "$tmp/sp-dir.json"
bad_theory "$tmp/sp-dir.json: is a directory" --spec "$tmp/sp-dir.json"
try 2 "$tmp/sp-format.json: this file is format zerosim-sweep/6, this zerosim reads zerosim-sweep/5 or zerosim-sweep/4 or zerosim-sweep/3 or zerosim-sweep/2 or zerosim-sweep/1" measure -q --spec "$tmp/sp-format.json"

# ---------------------------------------------------------------------------
# Case files. The valid one is docs/formats.md's example; each broken one
# changes one thing, and the change is checked to have happened.
case_ok='{"format": "zerosim-case/1", "layers": [2, 3, 1], "world": 2, "batch": 1, "steps": 1,
 "weights": [0.1, -0.2, 0.3, 0.4, 0.5, -0.6, 0.0, 0.1, 0.2, 0.7, -0.8, 0.9, 0.05],
 "batches": [[{"x": [[1.0, 2.0]], "y": [[0.5]]}, {"x": [[0.0, -1.0]], "y": [[1.0]]}]]}'
printf '%s\n' "$case_ok" >"$tmp/case.json"
try 0 "" measure -q --case "$tmp/case.json" --out "$tmp/case-out.json"

# bad_case NAME SED-EXPRESSION PATTERN: the valid case changed by the sed
# expression must be refused, with PATTERN in the message.
bad_case() {
	printf '%s\n' "$case_ok" | sed "$2" >"$tmp/$1.json"
	cmp -s "$tmp/case.json" "$tmp/$1.json" && fail "bad_case $1: the sed expression changed nothing"
	bad_measure "$3" --case "$tmp/$1.json"
}
bad_measure "$tmp/case-missing.json: No such file or directory" --case "$tmp/case-missing.json"
bad_measure "$tmp/sp-dir.json: is a directory" --case "$tmp/sp-dir.json"
printf 'not JSON at all\n' >"$tmp/case-notjson.json"
bad_measure "$tmp/case-notjson.json: not valid JSON (near byte 0)" --case "$tmp/case-notjson.json"
printf '%s' "$case_ok" | head -c 150 >"$tmp/case-trunc.json"
bad_measure "$tmp/case-trunc.json: not valid JSON (near byte 150)" --case "$tmp/case-trunc.json"
: >"$tmp/case-empty.json"
bad_measure "$tmp/case-empty.json: not valid JSON (near byte 0)" --case "$tmp/case-empty.json"
bad_case c-format 's#zerosim-case/1#zerosim-measured/1#' "$tmp/c-format.json: this file is format zerosim-measured/1, this zerosim reads zerosim-case/4 or zerosim-case/3 or zerosim-case/2 or zerosim-case/1"
bad_case c-noformat 's#"format": "zerosim-case/1", ##' "$tmp/c-noformat.json: this file has no \"format\" string, this zerosim reads zerosim-case/4 or zerosim-case/3 or zerosim-case/2 or zerosim-case/1"
bad_case c-layers-str 's#"layers": \[2, 3, 1\]#"layers": "2,3,1"#' "$tmp/c-layers-str.json: case.layers is not an array"
bad_case c-layers-one 's#"layers": \[2, 3, 1\]#"layers": [2]#' "$tmp/c-layers-one.json: the case's \"layers\" has 1 widths (2..131)"
bad_case c-layers-zero 's#"layers": \[2, 3, 1\]#"layers": [2, 0, 1]#' "$tmp/c-layers-zero.json: the case's layers[1] is not a width (1..1000000)"
bad_case c-layers-frac 's#"layers": \[2, 3, 1\]#"layers": [2, 3.5, 1]#' "$tmp/c-layers-frac.json: the case's layers[1] is not a width (1..1000000)"
bad_case c-layers-huge 's#"layers": \[2, 3, 1\]#"layers": [2, 4294967296, 1]#' "$tmp/c-layers-huge.json: the case's layers[1] is not a width (1..1000000)"
bad_case c-layers-inf 's#"layers": \[2, 3, 1\]#"layers": [2, 1e999, 1]#' "$tmp/c-layers-inf.json: the case's layers[1] is not a width (1..1000000)"
bad_case c-world-str 's#"world": 2#"world": "2"#' "$tmp/c-world-str.json: case.world is not a number"
bad_case c-world-zero 's#"world": 2#"world": 0#' "$tmp/c-world-zero.json: case.world is 0, not a whole number in 1..65536"
bad_case c-world-frac 's#"world": 2#"world": 2.5#' "$tmp/c-world-frac.json: case.world is 2.5, not a whole number in 1..65536"
bad_case c-world-null 's#"world": 2#"world": null#' "$tmp/c-world-null.json: case.world is not a number"
bad_case c-world-inf 's#"world": 2#"world": 1e999#' "$tmp/c-world-inf.json: case.world is not a finite number"
bad_case c-batch-arr 's#"batch": 1#"batch": [1]#' "$tmp/c-batch-arr.json: case.batch is not a number"
bad_case c-batch-neg 's#"batch": 1#"batch": -1#' "$tmp/c-batch-neg.json: case.batch is -1, not a whole number in 1..65536"
bad_case c-steps-obj 's#"steps": 1#"steps": {}#' "$tmp/c-steps-obj.json: case.steps is not a number"
bad_case c-steps-big 's#"steps": 1#"steps": 1e300#' "$tmp/c-steps-big.json: case.steps is 1e+300, not a whole number in 1..1000000"
bad_case c-noweights 's#"weights"#"weightz"#' "$tmp/c-noweights.json: unknown key \"weightz\" in the case"
bad_case c-weights-obj 's#"weights": \[[^]]*\]#"weights": {"a": 1}#' "$tmp/c-weights-obj.json: the case's \"weights\" has the unknown key \"a\" (file, count, digest)"
bad_case c-weights-side 's#"weights": \[[^]]*\]#"weights": {"file": "w.f32", "count": 13}#' "$tmp/c-weights-side.json: the case's weights file $tmp/w.f32: No such file or directory"
bad_case c-weights-str 's#0\.05\]#"0.05"]#' "$tmp/c-weights-str.json: the case's \"weights\"[12] is not a finite fp32 number"
bad_case c-weights-inf 's#0\.05\]#1e999]#' "$tmp/c-weights-inf.json: the case's \"weights\"[12] is not a finite fp32 number"
bad_case c-weights-fp32 's#0\.05\]#1e39]#' "$tmp/c-weights-fp32.json: the case's \"weights\"[12] is not a finite fp32 number"
bad_case c-weights-short 's#, 0\.05\]#]#' "$tmp/c-weights-short.json: the case's \"weights\" has 12 numbers, its layers need 13"
bad_case c-weights-long 's#0\.05\]#0.05, 0.06]#' "$tmp/c-weights-long.json: the case's \"weights\" has 14 numbers, its layers need 13"
bad_case c-weights-nested 's#0\.05\]#[0.05]]#' "$tmp/c-weights-nested.json: the case's \"weights\"[12] is not a finite fp32 number"
bad_case c-batches-num 's#"batches": \[\[.*\]\]}#"batches": 7}#' "$tmp/c-batches-num.json: case.batches is not an array"
bad_case c-batches-steps 's#"steps": 1#"steps": 2#' "$tmp/c-batches-steps.json: the case's \"batches\" has 1 steps, \"steps\" is 2"
bad_case c-ranks 's#, {"x": \[\[0\.0, -1\.0\]\], "y": \[\[1\.0\]\]}##' "$tmp/c-ranks.json: the case's batches[0] is not an array of 2 ranks"
bad_case c-rank-num 's#{"x": \[\[0\.0, -1\.0\]\], "y": \[\[1\.0\]\]}#3#' "$tmp/c-rank-num.json: the case's batches[0][1] is not an object"
bad_case c-x-missing 's#"x": \[\[1\.0, 2\.0\]\], ##' "$tmp/c-x-missing.json: the case's batches[0][0].x is not an array"
bad_case c-x-width 's#\[\[1\.0, 2\.0\]\]#[[1.0]]#' "$tmp/c-x-width.json: the case's batches[0][0].x[0] is not 2 numbers"
bad_case c-x-rows 's#\[\[1\.0, 2\.0\]\]#[[1.0, 2.0], [3.0, 4.0]]#' "$tmp/c-x-rows.json: the case's batches[0][0].x has 2 rows, the batch is 1"
bad_case c-x-str 's#\[\[1\.0, 2\.0\]\]#"1,2"#' "$tmp/c-x-str.json: the case's batches[0][0].x is not an array"
bad_case c-x-inf 's#\[\[1\.0, 2\.0\]\]#[[1.0, -1e999]]#' "$tmp/c-x-inf.json: the case's batches[0][0].x[0][1] is not a finite fp32 number"
bad_case c-y-rows 's#"y": \[\[0\.5\]\]#"y": [[0.5], [0.5]]#' "$tmp/c-y-rows.json: the case's batches[0][0].y has 2 rows, the batch is 1"
bad_case c-y-null 's#"y": \[\[0\.5\]\]#"y": null#' "$tmp/c-y-null.json: the case's batches[0][0].y is not an array"
# Options the case fixes must agree with it.
bad_measure "--world disagrees with the case file's world size 2" --case "$tmp/case.json" --world 3
bad_measure "--world disagrees with the case file's world size 2" --case "$tmp/case.json" --world 1,2
bad_measure "--steps 2 disagrees with the case file's 1 steps" --case "$tmp/case.json" --steps 2
bad_measure "--batch 4 disagrees with the case file's batch 1" --case "$tmp/case.json" --batch 4
bad_measure "--layers disagrees with the case file's layers" --case "$tmp/case.json" --layers 2,4,1
# A small file that states a huge batch must be refused before anything
# that size is allocated: a bad file is bad input (2), not out of memory.
awk 'BEGIN {
	printf "{\"format\": \"zerosim-case/1\", \"layers\": [1000000, 1], \"world\": 1,";
	printf " \"batch\": 65536, \"steps\": 1, \"weights\": [";
	for (i = 0; i < 1000001; i++) printf "%s0", (i ? "," : "");
	printf "], \"batches\": [[{\"x\": [[0]], \"y\": [[0]]}]]}\n";
}' >"$tmp/case-huge-batch.json"
bad_measure "$tmp/case-huge-batch.json: the case's batches[0][0].x has 1 rows, the batch is 65536" --case "$tmp/case-huge-batch.json"

# A transformer's case (zerosim-case/2), written by measure --write-case,
# broken one thing at a time: the JSON, then its weights side file (the
# case's own tc.f32 in the valid case's folder; a copy changed, for the
# side file's breaks). The case and its side file stay as they were.
cat >"$tmp/tiny.json" <<'EOF_'
{"model_type": "gpt2", "n_embd": 16, "n_layer": 1, "n_head": 2, "vocab_size": 32, "n_positions": 8}
EOF_
# QLoRA under DeepSpeed's own ZeRO-3 holds each layer's codes as elements
# of the params' dtype (docs/finetune.md): a gpt2 of n_embd 18, c_attn's
# 18 x 54 = 972 weights, fills no whole fp32 element (fp16's it does)
echo '{"model_type": "gpt2", "n_embd": 18, "n_layer": 1, "n_head": 2, "vocab_size": 32, "n_positions": 8}' \
	>"$tmp/odd.json"
for c in measure theory; do
	"bad_$c" "--quant-base nf4 under --framework deepspeed --schemes zero3: a layer of 972 weights is not a multiple of 8" \
		--model "$tmp/odd.json" --framework deepspeed --schemes zero3 --unit layer --lora-r 4 --quant-base nf4 \
		--precision fp32 --world 2 --seq 4 --batch 2
done
# autocast (--precision amp-bf16, amp-fp16) is the PyTorch step's alone:
# refused elsewhere by name, and amp-fp16 on 1.13's CPU as PyTorch refuses
# it (2.6's is taken: below, with SDPA's rows)
amp_only="PyTorch's autocast is described for the PyTorch step only (--framework torch --wrapper none, ddp or fsdp, over a transformer); zerosim's own schedules take mixed or fp32"
bad_measure "--precision amp-bf16: $amp_only" --precision amp-bf16
bad_theory "--precision amp-fp16: $amp_only" --precision amp-fp16 --model "$tmp/tiny.json"
bad_measure "--precision amp-bf16: $amp_only" --precision amp-bf16 --model "$tmp/tiny.json" --framework torch
bad_theory "--precision amp-fp16: PyTorch 1.13's autocast on the CPU takes bfloat16 only (give --precision amp-bf16)" \
	--precision amp-fp16 --model "$tmp/tiny.json" --framework torch --wrapper none --world 1 --schemes dp \
	--torch-version 1.13 --torch-device cpu
# --freeze with what no reference has checked it with yet: refused by
# name, in the config's checks (autocast); under zero1 taken
# (tests/ft_zero1.sh holds it to PyTorch); the families with
# modules of their own (qwen2, qwen3, phi3) are taken (tests/ft_freeze.sh
# holds them to PyTorch), theory and measure
fz_plain="--model $tmp/tiny.json --framework torch --torch-version 1.13 --torch-device cpu --attn eager --seq 4 --batch 2"
# frozen parameters under autocast are taken (tests/ft_freeze.sh holds
# them to PyTorch); autocast wants a config with dropout 0
sed 's/}$/, "embd_pdrop": 0.0, "attn_pdrop": 0.0, "resid_pdrop": 0.0}/' "$tmp/tiny.json" >"$tmp/tiny-fz0.json"
try 0 "" theory --model "$tmp/tiny-fz0.json" --framework torch --torch-version 1.13 --torch-device cpu --attn eager \
	--seq 4 --batch 2 --wrapper none --world 1 --schemes dp --precision amp-bf16 --freeze embeddings --out "$tmp/fz-amp.json"
try 0 "" measure -q --out "$tmp/fz-zero1.json" $fz_plain --wrapper ddp --world 2 --schemes zero1 --precision fp32 --freeze embeddings
# and together (tests/ft_zero1.sh holds them to PyTorch)
try 0 "" theory --model "$tmp/tiny-fz0.json" --framework torch --torch-version 1.13 --torch-device cpu --attn eager \
	--seq 4 --batch 2 --wrapper ddp --world 2 --schemes zero1 --precision amp-bf16 --freeze embeddings \
	--out "$tmp/fz-zero1-amp.json"
for fam in qwen2 qwen3 phi3; do
	printf '{"model_type": "%s", "hidden_size": 16, "num_hidden_layers": 1, "num_attention_heads": 2,
 "num_key_value_heads": 1, "intermediate_size": 32, "max_position_embeddings": 8, "vocab_size": 32,
 "pad_token_id": null}\n' "$fam" >"$tmp/tiny-$fam.json"
	for cmd in theory measure; do
		try 0 "" $cmd --out "$tmp/fz-$fam.json" --model "$tmp/tiny-$fam.json" --framework torch --torch-version 1.13 \
			--torch-device cpu --attn eager --seq 4 --batch 2 --steps 2 --wrapper none --world 1 --schemes dp \
			--precision fp32 --freeze embeddings
	done
done
# an empty pattern or an empty term is a slip, never "no freeze" (nor a
# pattern that matches nothing): refused by the parser, theory and measure
for cmd in theory measure; do
	for fz_empty in "" " "; do
		bad_$cmd "--freeze: the pattern is empty (give terms such as embeddings or blocks:0-1)" \
			$fz_plain --wrapper none --world 1 --schemes dp --precision fp32 --freeze "$fz_empty"
	done
	for fz_empty in "embeddings," ",embeddings" "embeddings, ,blocks:0-0"; do
		bad_$cmd "--freeze: '$fz_empty' has an empty term" \
			$fz_plain --wrapper none --world 1 --schemes dp --precision fp32 --freeze "$fz_empty"
	done
done
# one term that freezes nothing beside one that freezes something: a typo
# or the wrong model, refused by the term (as a spec that freezes nothing)
for cmd in theory measure; do
	bad_$cmd "--freeze embeddings,blocks:7-9: its term 'blocks:7-9' matches no parameter of tiny" \
		$fz_plain --wrapper none --world 1 --schemes dp --precision fp32 --freeze embeddings,blocks:7-9
	bad_$cmd "--freeze wte*, embeddings: its term 'wte*' matches no parameter of tiny" \
		$fz_plain --wrapper none --world 1 --schemes dp --precision fp32 --freeze "wte*, embeddings"
done
try 0 "" measure -q --model "$tmp/tiny.json" --seq 4 --batch 2 --world 2 --steps 2 --schemes dp --precision fp32 \
	--write-case "$tmp/tc.json" --out "$tmp/tc-seed.json"
[ -f "$tmp/tc.f32" ] || fail "measure --write-case $tmp/tc.json wrote no $tmp/tc.f32"
cp "$tmp/tc.json" "$tmp/tc.json.orig" && cp "$tmp/tc.f32" "$tmp/tc.f32.orig" || exit 99
psi=$(sed -n 's/.*"count":[[:space:]]*\([0-9]*\).*/\1/p' "$tmp/tc.json")
[ -n "$psi" ] || fail "the written case has no weights count"
# bad_tcase NAME SED PATTERN: tc.json changed by SED must be refused.
bad_tcase() {
	sed "$2" "$tmp/tc.json" >"$tmp/$1.json"
	cmp -s "$tmp/tc.json" "$tmp/$1.json" && fail "bad_tcase $1: the sed expression changed nothing"
	bad_measure "$3" --case "$tmp/$1.json"
}
# side NAME PATTERN: the case naming side file NAME (made beforehand) is refused.
side() { bad_tcase "t-$(basename "$1")" "s#\"tc.f32\"#\"$1\"#" "$2"; }
head -c 100 "$tmp/tc.f32" >"$tmp/short.f32"
cat "$tmp/tc.f32" "$tmp/short.f32" >"$tmp/long.f32"
cp "$tmp/tc.f32" "$tmp/tampered.f32" && printf '\001' | dd of="$tmp/tampered.f32" bs=1 seek=64 conv=notrunc 2>/dev/null
cmp -s "$tmp/tc.f32" "$tmp/tampered.f32" && fail "cannot tamper with the side file"
mkfifo "$tmp/fifo.f32" && mkdir "$tmp/dir.f32" || exit 99
side short.f32 "the case's weights file $tmp/short.f32 holds 100 bytes, not 4 x $psi (its count)"
side long.f32 "the case's weights file $tmp/long.f32 holds $((4 * psi + 100)) bytes, not 4 x $psi (its count)"
side tampered.f32 "the case's weights file $tmp/tampered.f32 has the digest xxh3:"
side fifo.f32 "the case's weights file $tmp/fifo.f32: is a FIFO or a pipe, not a regular file"
side dir.f32 "the case's weights file $tmp/dir.f32: is a directory"
side nosuch.f32 "the case's weights file $tmp/nosuch.f32: No such file or directory"
side /etc/passwd "the case's weights.file \"/etc/passwd\" is not a path relative to the case's folder"
bad_tcase t-count 's#"count":[[:space:]]*[0-9]*#"count": 7#' "the case's weights.count is 7, the model has $psi parameters"
bad_tcase t-digest 's#"digest":[[:space:]]*"[^"]*"#"digest": "xxh3:0000000000000000"#' "the case says xxh3:0000000000000000"
bad_tcase t-wkey 's#"count":#"size":#' "the case's \"weights\" has the unknown key \"size\" (file, count, digest)"
bad_tcase t-tok-range 's#"tokens":[[:space:]]*\[\[\[\[[0-9]*#"tokens": [[[[32#' "the case's tokens[0][0][0][0] is not a token id in 0..31 (the vocabulary)"
bad_tcase t-tok-neg 's#"tokens":[[:space:]]*\[\[\[\[[0-9]*#"tokens": [[[[-1#' "the case's tokens[0][0][0][0] is not a token id in 0..31"
bad_tcase t-tok-frac 's#"tokens":[[:space:]]*\[\[\[\[[0-9]*#"tokens": [[[[1.5#' "the case's tokens[0][0][0][0] is not a token id in 0..31"
bad_tcase t-tok-str 's#"tokens":[[:space:]]*\[\[\[\[[0-9]*#"tokens": [[[["a"#' "the case's tokens[0][0][0][0] is not a token id in 0..31"
bad_tcase t-tok-row 's#"tokens":[[:space:]]*\[\[\[\[[0-9]*, #"tokens": [[[[#' "the case's tokens[0][0][0] is not 5 token ids (seq + 1)"
bad_tcase t-tok-obj 's#"tokens":[[:space:]]*\[#"tokens": {"a": 1}, "x": [#' "unknown key \"x\" in the case"
bad_tcase t-steps 's#"steps":[[:space:]]*2#"steps": 3#' "the case's \"tokens\" has 2 steps, \"steps\" is 3"
bad_tcase t-world 's#"world":[[:space:]]*2#"world": 3#' "the case's tokens[0] is not an array of 3 ranks"
bad_tcase t-batch 's#"batch":[[:space:]]*2#"batch": 1#' "the case's tokens[0][0] is not an array of 1 rows (the batch)"
bad_tcase t-seq-long 's#"seq":[[:space:]]*4#"seq": 9#' "case.seq is 9, not a whole number in 1..8"
bad_tcase t-seq 's#"seq":[[:space:]]*4#"seq": 3#' "the case's tokens[0][0][0] is not 4 token ids (seq + 1)"
bad_tcase t-noseq 's#"seq":#"seqq":#' "unknown key \"seqq\" in the case"
bad_tcase t-eps 's#"layer_norm_epsilon":[[:space:]]*[0-9.e-]*#"layer_norm_epsilon": -1#' "the case's model: \"layer_norm_epsilon\" must be a positive number"
bad_tcase t-act 's#"model_type":[[:space:]]*"gpt2"#"model_type": "gpt2", "activation_function": "relu"#' "\"activation_function\" is \"relu\"; the engine's transformer runs \"gelu_new\""
bad_tcase t-type 's#"model_type":[[:space:]]*"gpt2"#"model_type": "bert"#' "the case's model: \"model_type\" 'bert' is not modelled"
bad_tcase t-heads 's#"n_head":[[:space:]]*2#"n_head": 3#' "the case's model: \"n_head\" (3) does not divide \"n_embd\" (16)"
bad_tcase t-model-path '/"model":/,/^[[:space:]]*},/c\
"model": "../tiny.json",' "the case's \"model\" '../tiny.json' is neither a shipped model's name nor a config object"
bad_tcase t-model-num '/"model":/,/^[[:space:]]*},/c\
"model": 3,' "the case's \"model\" is neither a model config object nor a shipped model's name"
# A shipped name: data/models beside the binary, or in the source tree of
# a VPATH build (make distcheck).
[ -d "$top/data/models" ] || { ZEROSIM_DATADIR=$srcdir; export ZEROSIM_DATADIR; }
bad_tcase t-model-name '/"model":/,/^[[:space:]]*},/c\
"model": "gpt2",' "the case's weights.count is $psi, the model has 124439808 parameters"
bad_tcase t-model-none '/"model":/,/^[[:space:]]*},/c\
"model": "gpt3",' "the case's \"model\": no shipped model 'gpt3' (gemma-2-2b, gemma-2-9b, gemma-3-1b, gemma-3-4b, gpt2,"
[ -d "$top/data/models" ] || unset ZEROSIM_DATADIR
bad_tcase t-recompute 's#"recompute":[[:space:]]*"none"#"recompute": "half"#' "the case's \"recompute\" is none of none, selective, full"
bad_tcase t-mixed 's#"precision":[[:space:]]*"fp32"#"precision": "mixed"#' "precision mixed in a transformer's case: a transformer's case is fp32 or amp-fp16 only so far"
bad_tcase t-mlp 's#"seq":#"layers": [2, 3], "seq":#' "the case mixes an MLP's \"layers\" and \"batches\" with a transformer's"
bad_tcase t-v1 's#zerosim-case/2#zerosim-case/1#' "unknown key \"model\" in a zerosim-case/1 file"
bad_tcase t-nomodel 's#"model":#"modle":#' "unknown key \"modle\" in the case"
printf '{"format": "zerosim-case/2", "world": 1, "batch": 1, "steps": 1}\n' >"$tmp/t-neither.json"
bad_measure "the case has neither \"layers\" (an MLP) nor \"model\" (a transformer)" --case "$tmp/t-neither.json"
# Options the transformer's case fixes must agree with it.
bad_measure "--seq 3 disagrees with the case file's seq 4" --case "$tmp/tc.json" --seq 3
bad_measure "--recompute full disagrees with the case file's recompute none" --case "$tmp/tc.json" --recompute full
bad_measure "--model and --case exclude each other: the case file gives the model" --case "$tmp/tc.json" --model gpt2
bad_measure "--layers with a transformer's case: the case file's model gives the shape" --case "$tmp/tc.json" --layers 2,3
bad_measure "--batch 1 disagrees with the case file's batch 2" --case "$tmp/tc.json" --batch 1
bad_measure "--precision mixed disagrees with the case file's precision fp32" --case "$tmp/tc.json" --precision mixed
bad_measure "--seq with an MLP's case file (it has no transformer)" --case "$tmp/case.json" --seq 4
# Numerics the engine's transformer does not run: measure refuses them, the
# theory (which counts bytes only) reads the shape anyway.
sed 's/}$/, "activation_function": "relu"}/' "$tmp/tiny.json" >"$tmp/relu.json"
bad_measure "relu: \"activation_function\" is \"relu\"; the engine's transformer runs \"gelu_new\"" --model "$tmp/relu.json"
try 0 "" theory --model "$tmp/relu.json" --world 2
# a mixture of experts: the engine's step runs it in fp32 or mixed under
# the paper's schemes and DeepSpeed's four (tests/moe_step.sh,
# tests/moe_fw.sh, tests/ds_moe.sh); the rest is refused by name
[ -d "$top/data/models" ] || { ZEROSIM_DATADIR=$srcdir; export ZEROSIM_DATADIR; }
moe_in="fp32 or mixed under --framework paper or deepspeed (its zero3 with the sparse-MoE block a z3 leaf), and fp32 under --framework torch --wrapper none, ddp or fsdp for mixtral, qwen2_moe and qwen3_moe (PyTorch 1.13's or 2.6's step, fsdp's FULL_SHARD under 1.13 with zero_grad zeros alone, under ddp and fsdp each rank its own routing; the theory with --routing FILE; --grad-accum, each micro-step its own routing; bf16 autocast on 1.13's plain loop; --freeze and --lora-r on the plain loop), and fp32 under --framework deepspeed --wrapper deepspeed --schemes zero1 or zero2 (1.13's step, each rank its own routing, every expert given a token)"
moe_no="mixtral-8x7b: a mixture of experts runs in the engine's step in $moe_in, in one process, so far; not with"
bad_measure "$moe_no --framework torch --wrapper auto (give --wrapper none)" --model mixtral-8x7b \
	--seq 8 --framework torch --wrapper auto --world 2 --schemes zero3
# under FSDP: FULL_SHARD under 1.13, one micro-step a step, as
# tests/moe_hf_torch.sh holds it
bad_measure "$moe_no --wrapper fsdp --schemes zero2 (give zero3: FULL_SHARD)" --model mixtral-8x7b --seq 8 \
	--framework torch --torch-version 1.13 --torch-device cpu --wrapper fsdp --world 2 --schemes zero2
bad_measure "$moe_no --wrapper fsdp under PyTorch 2.6 (give --torch-version 1.13)" --model mixtral-8x7b --seq 8 \
	--framework torch --torch-version 2.6 --torch-device cpu --wrapper fsdp --world 2 --schemes zero3
# DeepSpeed's engine over a mixture: 1.13's step alone (tests/ds_moe_torch.sh;
# tests/ds_torch26.sh holds the dense models to 2.6)
bad_measure "$moe_no --wrapper deepspeed under PyTorch 2.6 (give --torch-version 1.13)" --model mixtral-8x7b --seq 8 \
	--framework deepspeed --torch-version 2.6 --torch-device cpu --wrapper deepspeed --world 2 --schemes zero1
bad_measure "$moe_no --wrapper fsdp --grad-accum 2 (give 1)" --model mixtral-8x7b --seq 8 \
	--framework torch --torch-version 1.13 --torch-device cpu --wrapper fsdp --world 2 --schemes zero3 --grad-accum 2
bad_measure "$moe_no --wrapper fsdp --zero-grad none (give zeros)" --model mixtral-8x7b --seq 8 \
	--framework torch --torch-version 1.13 --torch-device cpu --wrapper fsdp --world 2 --schemes zero3 --zero-grad none
# bf16 autocast: the plain loop's alone (under fsdp too)
bad_measure "$moe_no --precision amp-bf16 under --framework torch --wrapper fsdp (give fp32, or --wrapper none)" \
	--model mixtral-8x7b --seq 8 --framework torch --torch-version 1.13 --torch-device cpu --wrapper fsdp --world 2 \
	--schemes zero3 --precision amp-bf16
bad_measure "$moe_no --grad-accum 2 (give 1)" --model mixtral-8x7b --seq 8 --framework deepspeed --grad-accum 2
# --freeze and --lora-r: the PyTorch step's plain loop alone
bad_measure "$moe_no --freeze or --lora-r outside --framework torch --wrapper none" --model mixtral-8x7b --seq 8 \
	--framework deepspeed --freeze embeddings
bad_measure "$moe_no --freeze or --lora-r outside --framework torch --wrapper none" --model mixtral-8x7b --seq 8 \
	--framework torch --torch-version 1.13 --torch-device cpu --wrapper ddp --world 2 --schemes dp --lora-r 4
# the PyTorch step's theory: the plain loop's alone, and in fp32 only (the review of s35-int)
# under --wrapper ddp too: balanced's 32 assignments leave 28 of 60 experts
# idle from the first step, whose .grad and Adam state PyTorch never makes
bad_theory "--routing balanced: block 0's expert 32 gets no token in the run's first step, so its .grad stays None" \
	--model qwen1.5-moe-a2.7b --seq 8 --world 2 --schemes dp --framework torch --torch-version 1.13 --torch-device cpu --wrapper ddp \
	--precision fp32
moe_th="a mixture of experts (8 experts, top 2): the theory follows the engine's step, $moe_in, so far; not with"
bad_theory "mixtral-8x7b: $moe_th --precision amp-bf16 under --framework torch --wrapper ddp (give fp32, or --wrapper none)" \
	--model mixtral-8x7b --seq 8 --world 2 --schemes dp --precision amp-bf16 --framework torch --torch-version 1.13 --torch-device cpu \
	--wrapper ddp
# worst from the shape: its step 1 routes balanced, so one step is refused
bad_theory "--routing worst under --framework torch: --steps 1 is the run's first step" \
	--model mixtral-8x7b --seq 8 --precision fp32 --framework torch --torch-version 1.13 --torch-device cpu \
	--wrapper none --world 1 --schemes dp --grad-accum 2 --steps 1 --routing worst
[ -d "$top/data/models" ] || unset ZEROSIM_DATADIR
# MixtralConfig stores a null as None, on which its block fails: refused,
# not read as the default 2
printf '{"model_type": "mixtral", "hidden_size": 16, "intermediate_size": 40, "num_hidden_layers": 1,
 "num_attention_heads": 2, "num_key_value_heads": 1, "max_position_embeddings": 8, "vocab_size": 32,
 "num_local_experts": 1, "num_experts_per_tok": null}\n' >"$tmp/moe-null.json"
bad_theory "$tmp/moe-null.json: \"num_experts_per_tok\" is null (a whole number is needed: transformers' block fails on None)" \
	--model "$tmp/moe-null.json"
sed 's/"num_experts_per_tok": null/"num_experts_per_tok": 1/' "$tmp/moe-null.json" >"$tmp/moe-one.json"
bad_theory "moe-one: a mixture of experts (1 expert, top 1): the theory follows the engine's step, $moe_in, so far; not with --framework torch --wrapper auto (give --wrapper none)" --model "$tmp/moe-one.json" --framework torch
# the engine runs the block, not the auxiliary loss (the PyTorch step's
# alone) nor the router's noise
sed 's/"num_experts_per_tok": 1/"num_experts_per_tok": 1, "output_router_logits": true/' "$tmp/moe-one.json" >"$tmp/moe-aux.json"
# DDP's find_unused_parameters over a mixture with the auxiliary loss
# (_DDPSink would clone the router logits too): not built (an idle expert
# without it is: tests/moe_hf_torch.sh)
bad_measure "--ddp-find-unused with output_router_logits true (_DDPSink's clones of the router logits and the aux loss)" \
	--model "$tmp/moe-aux.json" --framework torch --wrapper ddp --world 2 --precision fp32 --torch-device cpu \
	--attn eager --torch-version 1.13 --schemes dp --ddp-find-unused on
bad_measure "moe-aux: \"output_router_logits\" is true: the router's auxiliary load-balancing loss is run and predicted in the PyTorch step only (--framework torch; else give false)" \
	--model "$tmp/moe-aux.json"
bad_theory "moe-aux: \"output_router_logits\" is true: the router's auxiliary load-balancing loss is run and predicted in the PyTorch step only (--framework torch; else give false)" \
	--model "$tmp/moe-aux.json" --framework deepspeed
# --experts-impl (transformers 5.x's fused experts): eager is the PyTorch
# step's theory of a mixtral in fp32; the rest refused by name
pt="--framework torch --wrapper none --torch-device cpu --attn eager --precision fp32"
bad_theory "--experts-impl: 'fused' is not one of modulelist, eager, grouped_mm, batched_mm" \
	--model "$tmp/moe-one.json" --experts-impl fused
# shellcheck disable=SC2086
bad_theory "--experts-impl grouped_mm: transformers 5.x's grouped_mm experts forward (integrations/moe.py) is not described yet" \
	--model "$tmp/moe-one.json" $pt --experts-impl grouped_mm
bad_theory "--experts-impl: only under --framework torch or deepspeed" --model "$tmp/moe-one.json" --experts-impl eager
bad_theory "--experts-impl eager with a --wrapper other than none: not described yet" \
	--model "$tmp/moe-one.json" --framework torch --wrapper ddp --experts-impl eager
# shellcheck disable=SC2086
# (a shipped model by name: in a VPATH build its data is the source tree's)
[ -d "$top/data/models" ] || { ZEROSIM_DATADIR=$srcdir; export ZEROSIM_DATADIR; }
bad_theory "--experts-impl eager: gpt2 (gpt2) is no mixture of experts" --model gpt2 $pt --experts-impl eager
# shellcheck disable=SC2086
bad_measure "--experts-impl eager: gpt2 (gpt2) is no mixture of experts" --model gpt2 $pt --experts-impl eager
[ -d "$top/data/models" ] || unset ZEROSIM_DATADIR
# measure runs eager (tests/moe_fused.sh) in the same scope as the theory
bad_measure "--experts-impl eager with a --wrapper other than none: not described yet" \
	--model "$tmp/moe-one.json" --framework torch --wrapper ddp --experts-impl eager
sed 's/"num_experts_per_tok": 1/"num_experts_per_tok": 1, "router_jitter_noise": 0.01/' "$tmp/moe-one.json" >"$tmp/moe-jit.json"
# one check in both commands (util/model.h's zs_model_router_check)
bad_measure "moe-jit: \"router_jitter_noise\" is 0.01: the router's noise is neither run nor predicted yet (give 0)" --model "$tmp/moe-jit.json"
bad_theory "moe-jit: \"router_jitter_noise\" is 0.01: the router's noise is neither run nor predicted yet (give 0)" --model "$tmp/moe-jit.json"
cat >"$tmp/mistral.json" <<'EOF_'
{"model_type": "mistral", "hidden_size": 16, "intermediate_size": 40, "num_hidden_layers": 1,
 "num_attention_heads": 2, "vocab_size": 32, "max_position_embeddings": 16, "sliding_window": 8}
EOF_
bad_measure "mistral: --seq 16 is longer than its sliding_window 8; the engine's attention sees every earlier token" \
	--model "$tmp/mistral.json" --seq 16
sed 's/"sliding_window": 8/"rope_scaling": {"type": "linear", "factor": 2}/' "$tmp/mistral.json" >"$tmp/scaled.json"
bad_measure "scaled: \"rope_scaling\" is {\"type\":\"linear\",\"factor\":2}; the engine's transformer runs null" \
	--model "$tmp/scaled.json" --seq 4
sed 's/"sliding_window": 8/"rope_theta": 0/' "$tmp/mistral.json" >"$tmp/theta0.json"
bad_measure "$tmp/theta0.json: \"rope_theta\" must be a positive number" --model "$tmp/theta0.json"
# --write-case: one world size, and no output over an input or another output.
bad_measure "--write-case: a case holds one world size, and the run has 2 (give one --world)" --model "$tmp/tiny.json" \
	--world 1,2 --write-case "$tmp/w.json"
bad_measure "--write-case $tmp/tiny.json: is the --model file; it would be overwritten" --model "$tmp/tiny.json" \
	--world 1 --write-case "$tmp/tiny.json"
bad_measure "--out $tmp/w.f32 and --write-case's weights $tmp/w.f32 are the same file" --model "$tmp/tiny.json" \
	--world 1 --write-case "$tmp/w.json" --out "$tmp/w.f32"
bad_measure "--out $tmp/tc.f32: is the --case's weights file; it would be overwritten" --case "$tmp/tc.json" \
	--out "$tmp/tc.f32"
bad_measure "--write-case $tmp/tc.json: is the --case file; it would be overwritten" --case "$tmp/tc.json" --write-case "$tmp/tc.json"
bad_measure "--write-case's weights $tmp/tc.f32: is the --case's weights file; it would be overwritten" \
	--case "$tmp/tc.json" --write-case "$tmp/tc"
bad_measure "--write-case: the file name is empty" --write-case ""
cmp -s "$tmp/tc.json" "$tmp/tc.json.orig" && cmp -s "$tmp/tc.f32" "$tmp/tc.f32.orig" ||
	fail "a refused run changed the transformer's case or its side file"

# ---------------------------------------------------------------------------
# theory: the options only it has, and the shared ones.
bad_theory "--params: '-5' is not a number (decimal digits or e-notation such as 7.5e9)" --params -5
bad_theory "--params: '1e400' is not a number (decimal digits or e-notation such as 7.5e9)" --params 1e400
bad_theory "--params: 'abc' is not a number (decimal digits or e-notation such as 7.5e9)" --params abc
bad_theory "--params: '0' is not a positive whole count" --params 0
bad_theory "--params: '2.5' is not a positive whole count" --params 2.5
bad_theory "--params: 'nan' is not a number (decimal digits or e-notation such as 7.5e9)" --params nan
bad_theory "--params: 'inf' is not a number (decimal digits or e-notation such as 7.5e9)" --params inf
bad_theory "--params: '1e15' is more than 1e+14" --params 1e15
bad_theory "--params: '' is not a number (decimal digits or e-notation such as 7.5e9)" --params ""
bad_theory "--params: ' 7' is not a number (decimal digits or e-notation such as 7.5e9)" --params " 7"
bad_theory "--world: '0' is not a world size (1..65536)" --world 0
bad_theory "--world: '1,,2' has an empty item" --world 1,,2
bad_theory "--world: 'abc' is not a world size (1..65536)" --params 7.5e9 --world abc
bad_theory "--layers: '64' needs at least two widths (input and output)" --layers 64
bad_theory "--layers: '4294967296' is not a layer width (1..1000000)" --layers 4294967296,4294967296
bad_theory "--device-mem: '12 parsecs' is not a memory size: unknown unit ' parsecs' (B, KB, MB, GB, TB, KiB, MiB, GiB, TiB)" --device-mem "12 parsecs"
bad_theory "--device-mem: '12parsecs' is not a memory size: unknown unit 'parsecs' (B, KB, MB, GB, TB, KiB, MiB, GiB, TiB)" --device-mem 12parsecs
bad_theory "--device-mem: '0' is not a memory size between 1 byte and 1e18 bytes" --device-mem 0
bad_theory "--device-mem: '-80GB' is not a memory size (such as 80GB or 40GiB)" --device-mem -80GB
bad_theory "--device-mem: '1e999GB' is not a memory size (such as 80GB or 40GiB)" --device-mem 1e999GB
bad_theory "--device-mem: 'nanGB' is not a memory size (such as 80GB or 40GiB)" --device-mem nanGB
bad_theory "--device-mem: '' is not a memory size (such as 80GB or 40GiB)" --device-mem ""
bad_theory "--largest-unit: 101 is more than the 100 parameters" --params 100 --largest-unit 101
bad_theory "--largest-unit: '-1' is not a number (decimal digits or e-notation such as 7.5e9)" --params 100 --largest-unit -1
bad_theory "--format: 'xml' is neither json nor text" --format xml
bad_theory "--schemes: unknown scheme 'zero4' (dp, zero1, zero2, zero3)" --schemes zero4
bad_theory "--unit: unknown unit 'block' (model, layer)" --unit block
bad_theory "--precision: unknown precision 'fp8' (mixed, fp32, amp-bf16, amp-fp16)" --precision fp8
bad_theory "--optimizer: unknown optimizer 'lamb' (adam, sgd)" --optimizer lamb
bad_theory "--batch: '0' is not a batch size (1..65536)" --batch 0
bad_theory "unknown option '--frobnicate'; try 'zerosim theory --help'" --frobnicate
bad_theory "unexpected argument 'stray'; try 'zerosim theory --help'" stray
bad_theory "option '--params' needs a value; try 'zerosim theory --help'" --params
bad_theory "--out: the file name is empty" --params 7.5e9 --out ""
# NCCL's buffers from NCCL's source: a channel count NCCL can have
# (MAXCHANNELS 32), a size its int holds, only where they are counted.
bad_theory "--nccl-channels: '0' is not a number of channels (1..32)" --layers 4,8,4 --allocator cuda --nccl-channels 0
bad_theory "--nccl-channels: '33' is not a number of channels (1..32)" --layers 4,8,4 --allocator cuda --nccl-channels 33
bad_theory "--nccl-channels: 'two' is not a number of channels (1..32)" --layers 4,8,4 --allocator cuda --nccl-channels two
bad_theory "--nccl-channels needs --allocator cuda" --layers 4,8,4 --nccl-channels 8
bad_theory "--nccl-buffsize needs --nccl-channels" --layers 4,8,4 --allocator cuda --nccl-buffsize 8MiB
bad_theory "--nccl-channels and --device-overhead: --device-overhead replaces NCCL's buffers" \
	--layers 4,8,4 --allocator cuda --nccl-channels 8 --device-overhead 1GB
bad_theory "--nccl-buffsize: '0' is not a memory size" --layers 4,8,4 --allocator cuda --nccl-channels 8 --nccl-buffsize 0
bad_theory "--nccl-buffsize: 2142040064 bytes is more than the 2142040063 a receive buffer's size (an int in NCCL) leaves" \
	--layers 4,8,4 --allocator cuda --nccl-channels 8 --nccl-buffsize 2142040064
try 1 "cannot write $tmp/missing-dir/t.json: the folder $tmp/missing-dir is missing" theory --params 7.5e9 --out "$tmp/missing-dir/t.json"
try 1 "cannot write $tmp/keep.json/t.json: Not a directory" theory --params 7.5e9 --out "$keep/t.json"
try 2 "--out $tmp: is a folder, not a file" theory --params 7.5e9 --out "$tmp"

# ---------------------------------------------------------------------------
# report: valid inputs made by this binary, then each broken.
"$zerosim" measure -q --layers 4,8,4 --world 1,2,3 --out "$tmp/m.json" 2>"$tmp/err" ||
	fail "cannot make measured.json: $(cat "$tmp/err")"
"$zerosim" theory --layers 4,8,4 --world 1,2,3 --out "$tmp/t.json" 2>"$tmp/err" ||
	fail "cannot make theory.json: $(cat "$tmp/err")"
m=$tmp/m.json
t=$tmp/t.json
"$zerosim" theory --layers 4,8,5 --world 1,2,3 --out "$tmp/t-layers.json" &&
	"$zerosim" theory --layers 4,8,4 --world 1,2,3 --batch 2 --out "$tmp/t-batch.json" &&
	"$zerosim" theory --layers 4,8,4 --world 1,2,3 --precision fp32 --out "$tmp/t-fp32.json" &&
	"$zerosim" theory --layers 4,8,4 --world 1,2,3 --optimizer sgd --out "$tmp/t-sgd.json" &&
	"$zerosim" theory --layers 4,8,4 --world 1,2 --out "$tmp/t-rows.json" &&
	"$zerosim" theory --params 7.5e9 --world 1,2,3 --out "$tmp/t-params.json" ||
	fail "cannot make the theory files"
head -c 700 "$m" >"$tmp/m-trunc.json"
head -c 700 "$t" >"$tmp/t-trunc.json"
: >"$tmp/empty.json"
# m-inf: a number that overflows to infinity where a byte count belongs.
set_first "$m" peak_bytes 1e999 "$tmp/m-inf.json"
set_first "$m" activations 1e999 "$tmp/m-inf-bd.json"
set_first "$m" scheme '"zero4"' "$tmp/m-scheme.json"
set_first "$m" world '"two"' "$tmp/m-world.json"
set_first "$m" resident_bytes null "$tmp/m-null.json"
set_first "$m" params 33088 "$tmp/m-params.json"
set_first "$t" comm_bytes_per_rank_per_step 1e999 "$tmp/t-inf.json"

try 0 "" report --measured "$m" --theory "$t" --template "$template" --no-render --out "$tmp/rep-ok"
bad_report "$tmp/nothere.json: No such file or directory" --measured "$tmp/nothere.json" --theory "$t"
bad_report "$tmp/nothere.json: No such file or directory" --measured "$m" --theory "$tmp/nothere.json"
bad_report "$tmp/t.json: this file is format zerosim-theory/1, this zerosim reads zerosim-measured/1" --measured "$t" --theory "$t"
bad_report "$tmp/m.json: this file is format zerosim-measured/1, this zerosim reads zerosim-theory/1" --measured "$m" --theory "$m"
bad_report "$srcdir/data/sweep.json: this file is format zerosim-sweep/1, this zerosim reads zerosim-theory/1" --measured "$m" --theory "$srcdir/data/sweep.json"
bad_report "$tmp/m.json and $tmp/t-layers.json describe different models: 76 and 85 params" --measured "$m" --theory "$tmp/t-layers.json"
bad_report "$tmp/m.json and $tmp/t-batch.json differ in batch: 4 and 2" --measured "$m" --theory "$tmp/t-batch.json"
bad_report "$tmp/m.json and $tmp/t-fp32.json differ in precision: mixed and fp32" --measured "$m" --theory "$tmp/t-fp32.json"
bad_report "$tmp/m.json and $tmp/t-sgd.json differ in optimizer: adam and sgd" --measured "$m" --theory "$tmp/t-sgd.json"
bad_report "$tmp/t-rows.json has no row for the measured run dp N=3 unit=model" --measured "$m" --theory "$tmp/t-rows.json"
bad_report "$tmp/t-params.json: config: \"layers\" is null (a model given only as --params); the report needs the layer widths to compare with a measurement" --measured "$m" --theory "$tmp/t-params.json"
bad_report "$tmp/m-trunc.json: not valid JSON (near byte " --measured "$tmp/m-trunc.json" --theory "$t"
bad_report "$tmp/t-trunc.json: not valid JSON (near byte " --measured "$m" --theory "$tmp/t-trunc.json"
bad_report "$tmp/empty.json: not valid JSON (near byte 0)" --measured "$tmp/empty.json" --theory "$t"
bad_report "$tmp/m-inf.json: runs[0].peak_bytes is not a finite number" --measured "$tmp/m-inf.json" --theory "$t"
bad_report "$tmp/m-inf-bd.json: runs[0]: resident_breakdown.activations is not a byte count (a finite number, 0 or more)" --measured "$tmp/m-inf-bd.json" --theory "$t"
bad_report "$tmp/m-scheme.json: runs[0]: unknown scheme 'zero4' (dp, zero1, zero2, zero3)" --measured "$tmp/m-scheme.json" --theory "$t"
bad_report "$tmp/m-world.json: runs[0].world is not a number" --measured "$tmp/m-world.json" --theory "$t"
bad_report "$tmp/m-null.json: runs[0].resident_bytes is not a number" --measured "$tmp/m-null.json" --theory "$t"
bad_report "$tmp/m-params.json and $tmp/t.json describe different models: 33088 and 76 params" --measured "$tmp/m-params.json" --theory "$t"
bad_report "$tmp/t-inf.json: rows[0].floor.comm_bytes_per_rank_per_step is not a finite number" --measured "$m" --theory "$tmp/t-inf.json"
bad_report "$tmp/sp-dir.json: is a directory" --measured "$tmp/sp-dir.json" --theory "$t"
bad_report "$tmp/nothere.tex: No such file or directory" --measured "$m" --theory "$t" --template "$tmp/nothere.tex"
try 2 "--out is required; try 'zerosim report --help'" report --measured "$m" --theory "$t" --template "$template" --no-render
try 2 "--measured is required; try 'zerosim report --help'" report --theory "$t" --template "$template" --no-render --out "$rep"
bad_report "unknown option '--frobnicate'; try 'zerosim report --help'" --measured "$m" --theory "$t" --frobnicate
bad_report "unexpected argument 'stray'; try 'zerosim report --help'" --measured "$m" --theory "$t" stray
bad_report "option '--theory' needs a value; try 'zerosim report --help'" --measured "$m" --theory
# K micro-steps are part of the run under every framework: the paper's and
# DeepSpeed's files record K too, and a K = 2 measurement beside a K = 1
# theory is two runs (it was joined, and DeepSpeed's zero2 comm drawn as
# UNEXPLAINED); a K the files cannot hold is refused.
for fw in paper deepspeed; do
	"$zerosim" measure -q --framework $fw --layers 4,8,4 --world 2 --grad-accum 2 --out "$tmp/m-k2-$fw.json" &&
		"$zerosim" theory --framework $fw --layers 4,8,4 --world 2 --out "$tmp/t-k1-$fw.json" ||
		fail "cannot make the $fw K = 2 and K = 1 files"
	bad_report "$tmp/m-k2-$fw.json and $tmp/t-k1-$fw.json differ in grad_accum: 2 and 1" \
		--measured "$tmp/m-k2-$fw.json" --theory "$tmp/t-k1-$fw.json"
done
set_first "$tmp/m-k2-paper.json" grad_accum 0 "$tmp/m-k0.json"
bad_report "$tmp/m-k0.json: config.grad_accum is 0, not a whole number in 1..1024" --measured "$tmp/m-k0.json" --theory "$t"
set_first "$tmp/m-k2-paper.json" grad_accum '[2]' "$tmp/m-karr.json"
bad_report "$tmp/m-karr.json: config.grad_accum is not a number, a string, true or false" \
	--measured "$tmp/m-karr.json" --theory "$t"
# An empty folder name is bad usage (it once made OUT/figures the root
# folder's /figures): refused before anything is written.
bad_report "--out: the folder name is empty" --measured "$m" --theory "$t" --out ""

# The output folder cannot be made: a run-time failure.
try 1 "cannot create folder $tmp/keep.json/rep: Not a directory" report --measured "$m" --theory "$t" --template "$template" --no-render --out "$keep/rep"

# Interrupted and killed runs, limits and closed pipes are in hostile.sh,
# where no case depends on timing.

# ---------------------------------------------------------------------------
# torch's --bucket-cap and --prefetch: bad values, on the command line, in a
# spec and in a case file, and where the sweep builds nothing they configure.
for cmd in measure theory; do
	for v in -1 1e999 nan inf -inf 0x10 25MB ' 25' 1048577; do
		try 2 "--bucket-cap: '$v' is not a bucket size in MB (a number in [0, 1048576])" \
			$cmd --framework torch --bucket-cap "$v" --out "$keep"
	done
	try 2 "--bucket-cap: an empty value is not a bucket size in MB" $cmd --framework torch --bucket-cap "" --out "$keep"
	for v in "" NONE backward_pre 0 backward-pre,none; do
		try 2 "--prefetch: unknown prefetch '$v' (none, backward-pre)" $cmd --framework torch --prefetch "$v" --out "$keep"
	done
	for fw in paper deepspeed; do
		try 2 "--bucket-cap is DDP's bucket size: it needs --framework torch" \
			$cmd --framework $fw --schemes dp,zero2 --bucket-cap 5 --out "$keep"
		try 2 "--prefetch is FSDP's backward prefetch: it needs --framework torch" \
			$cmd --framework $fw --schemes zero2 --prefetch backward-pre --out "$keep"
	done
	try 2 "--bucket-cap is DDP's bucket size, and --schemes zero3 builds no DDP (torch's dp and zero1 do)" \
		$cmd --framework torch --schemes zero3 --bucket-cap 5 --out "$keep"
	try 2 "--bucket-cap is DDP's bucket size, and --schemes zero2,zero3 builds no DDP" \
		$cmd --framework torch --schemes zero2,zero3 --bucket-cap 25 --out "$keep"
	try 2 "--prefetch is FSDP's backward prefetch, and --schemes dp builds no FSDP (torch's zero2 and zero3 do)" \
		$cmd --framework torch --schemes dp --prefetch backward-pre --out "$keep"
	try 2 "--prefetch is FSDP's backward prefetch, and --schemes dp,zero1 builds no FSDP" \
		$cmd --framework torch --schemes dp,zero1 --prefetch none --out "$keep"
	# The last of a repeated option counts (zerosim.1): the last is checked.
	try 2 "--bucket-cap: 'nan' is not a bucket size in MB" $cmd --framework torch --bucket-cap 5 --bucket-cap nan --out "$keep"
	try 2 "--bucket-cap is DDP's bucket size: it needs --framework torch" $cmd --framework torch --framework paper --bucket-cap 5 --out "$keep"
done
spec sp-bc-inf '{"format": "zerosim-sweep/1", "framework": "torch", "bucket-cap": 1e999}'
spec sp-bc-neg '{"format": "zerosim-sweep/1", "framework": "torch", "bucket-cap": -1}'
spec sp-bc-str '{"format": "zerosim-sweep/1", "framework": "torch", "bucket-cap": "25"}'
spec sp-bc-null '{"format": "zerosim-sweep/1", "framework": "torch", "bucket-cap": null}'
spec sp-bc-big '{"format": "zerosim-sweep/1", "framework": "torch", "bucket-cap": 1e7}'
spec sp-bc-twice '{"format": "zerosim-sweep/1", "framework": "torch", "bucket-cap": 1, "bucket-cap": 2}'
spec sp-bc-paper '{"format": "zerosim-sweep/1", "bucket-cap": 5}'
spec sp-bc-zero3 '{"format": "zerosim-sweep/1", "framework": "torch", "schemes": ["zero3"], "bucket-cap": 5}'
spec sp-bc-key '{"format": "zerosim-sweep/1", "framework": "torch", "bucket_cap": 5}'
spec sp-pf-bad '{"format": "zerosim-sweep/1", "framework": "torch", "prefetch": "sideways"}'
spec sp-pf-num '{"format": "zerosim-sweep/1", "framework": "torch", "prefetch": 1}'
spec sp-pf-dp '{"format": "zerosim-sweep/1", "framework": "torch", "schemes": ["dp"], "prefetch": "none"}'
for cmd in measure theory; do
	sp_try() { f=$1; shift; try 2 "$tmp/$f.json$*" $cmd --spec "$tmp/$f.json" --out "$keep"; }
	sp_try sp-bc-inf ': "bucket-cap" is not a finite number'
	sp_try sp-bc-neg ': "bucket-cap" is -1, a negative number'
	sp_try sp-bc-str ': "bucket-cap" is not a number'
	sp_try sp-bc-null ': "bucket-cap" is not a number'
	sp_try sp-bc-big ": \"bucket-cap\": '10000000' is not a bucket size in MB (a number in [0, 1048576])"
	sp_try sp-bc-twice ': the key "bucket-cap" is given twice'
	sp_try sp-bc-key ': unknown key "bucket_cap"; zerosim-sweep/1 has layers, world, schemes, units, steps, batch, seed, precision, optimizer, lr, beta1, beta2, eps, framework, bucket-cap, prefetch'
	sp_try sp-pf-bad ": \"prefetch\": unknown prefetch 'sideways' (none, backward-pre)"
	sp_try sp-pf-num ': "prefetch" is not a string'
	# a setting the spec gave is named as the spec's key (once "--bucket-cap")
	sp_try sp-bc-paper "'s \"bucket-cap\" is DDP's bucket size: it needs --framework torch"
	sp_try sp-bc-zero3 "'s \"bucket-cap\" is DDP's bucket size, and $tmp/sp-bc-zero3.json's \"schemes\" zero3 builds no DDP"
	sp_try sp-pf-dp "'s \"prefetch\" is FSDP's backward prefetch, and $tmp/sp-pf-dp.json's \"schemes\" dp builds no FSDP"
	# The command line overrides the spec, and is then checked against it.
	try 2 "'s \"bucket-cap\" is DDP's bucket size, and --schemes zero2 builds no DDP" \
		$cmd --spec "$tmp/sp-bc-zero3.json" --schemes zero2 --out "$keep"
done
# A case file fixes the model and the training, not the framework's options.
bad_case case-bc 's/"steps": 1,/"steps": 1, "bucket-cap": 5,/' "$tmp/case-bc.json: unknown key \"bucket-cap\" in the case"
bad_case case-pf 's/"steps": 1,/"steps": 1, "prefetch": "none",/' "$tmp/case-pf.json: unknown key \"prefetch\" in the case"
bad_measure "--bucket-cap: 'nan' is not a bucket size in MB" --case "$tmp/case.json" --framework torch --bucket-cap nan
bad_measure "--bucket-cap is DDP's bucket size: it needs --framework torch" --case "$tmp/case.json" --bucket-cap 3
bad_measure "--prefetch is FSDP's backward prefetch, and --schemes dp builds no FSDP" \
	--case "$tmp/case.json" --framework torch --schemes dp --prefetch backward-pre

# ---------------------------------------------------------------------------
# The PyTorch options (--torch-version ... --wrapper): each bad value names
# the option and its values; each is refused under --framework paper;
# --wrapper none needs N = 1, a transformer and no wrapper's settings;
# --attn needs a transformer; 1.13 has no SDPA and no CPU fused Adam; in a
# spec (zerosim-sweep/2) the same, and a /1 spec has none of the keys.
tiny=$srcdir/report/models/gpt2-tiny.json
printf '{"format": "zerosim-sweep/2", "framework": "torch", "wrapper": "none", "world": [1], "units": ["layer"]}\n' \
	>"$tmp/sp-wr-units.json"
for cmd in measure theory; do
	for v in 2.5 1.13.1 2 '' 2.6,1.13; do
		try 2 "--torch-version: '$v' is not one of 2.6, 1.13" $cmd --framework torch --torch-version "$v" --out "$keep"
	done
	for v in gpu CUDA '' cpu,cuda; do
		try 2 "--torch-device: '$v' is not one of cuda, cpu" $cmd --framework deepspeed --torch-device "$v" --out "$keep"
	done
	# autocast under --torch-device cuda: bf16 over gpt2 and llama alone
	cu="--framework torch --wrapper none --torch-version 2.6 --torch-device cuda --attn eager --seq 8 --batch 1 --world 1"
	cu_no="--torch-device cuda: the PyTorch step with"
	# shellcheck disable=SC2086
	try 2 "$cu_no float16 autocast (GradScaler(\"cuda\")" $cmd $cu --model "$tiny" --precision amp-fp16 --out "$keep"
	# shellcheck disable=SC2086
	try 2 "$cu_no bf16 autocast over a model that is not a gpt2 or a llama" $cmd $cu --model "$srcdir/data/models/qwen2.5-0.5b.json" \
		--precision amp-bf16 --out "$keep"
	# shellcheck disable=SC2086
	try 2 "$cu_no bf16 autocast with --lora-r or --quant-base" $cmd $cu --model "$tiny" --precision amp-bf16 \
		--lora-r 4 --out "$keep"
	# (QLoRA's bf16-loaded recipe under CUDA's autocast is built at K = 1
	# only, and with PEFT's fp32 adapters, not TRL's bf16 ones)
	cu_q="--model $srcdir/report/models/llama-tiny.json --precision amp-bf16 --lora-r 4 --quant-base nf4 --load-dtype bf16"
	# shellcheck disable=SC2086
	try 2 "$cu_no bf16 autocast with --grad-accum (give 1)" $cmd $cu $cu_q --grad-accum 2 --out "$keep"
	# shellcheck disable=SC2086
	try 2 "$cu_no --lora-dtype bf16 (TRL's bf16 adapters" $cmd $cu $cu_q --lora-dtype bf16 --out "$keep"
	# shellcheck disable=SC2086
	try 2 "$cu_no bf16 autocast with --freeze" $cmd $cu --model "$tiny" --precision amp-bf16 --freeze transformer.h.0 \
		--out "$keep"
	for v in default multi_tensor FUSED ''; do
		try 2 "--optimizer-impl: '$v' is not one of single, foreach, fused" $cmd --framework torch --optimizer-impl "$v" --out "$keep"
	done
	for v in default true set_to_none ''; do
		try 2 "--zero-grad: '$v' is not one of none, zeros" $cmd --framework torch --zero-grad "$v" --out "$keep"
	done
	for v in default flash_attention_2 SDPA ''; do
		try 2 "--attn: '$v' is not one of eager, sdpa" $cmd --framework torch --attn "$v" --out "$keep"
	done
	for v in fsdp2 off ''; do
		try 2 "--wrapper: '$v' is not one of auto, none, ddp, fsdp, deepspeed" $cmd --framework torch --wrapper "$v" --out "$keep"
	done
	for o in "torch-version 1.13" "torch-device cpu" "optimizer-impl fused" "zero-grad zeros" "attn eager" "wrapper auto"; do
		try 2 "--${o% *}: only under --framework torch or deepspeed" $cmd --$o --out "$keep"
		try 2 "--${o% *}: only under --framework torch or deepspeed" $cmd --framework torch --framework paper --$o --out "$keep"
	done
	try 2 "--zero-grad: only under --framework torch or deepspeed" $cmd --model "$tiny" --zero-grad none --world 1 --out "$keep"
	for fw in torch deepspeed; do
		try 2 "--wrapper none is one process's plain training loop: every --world must be 1 (it lists 2)" \
			$cmd --framework $fw --model "$tiny" --wrapper none --world 1,2 --out "$keep"
		try 2 "--wrapper none needs a transformer (--model): it is the plain loop over a Hugging Face model" \
			$cmd --framework $fw --wrapper none --world 1 --out "$keep"
		try 2 "--attn needs a transformer (--model): the MLP has no attention" \
			$cmd --framework $fw --attn eager --world 1 --out "$keep"
		try 2 "--attn sdpa: PyTorch 1.13 has no scaled_dot_product_attention (2.0 added it)" \
			$cmd --framework $fw --model "$tiny" --wrapper none --torch-version 1.13 --attn sdpa --world 1 --out "$keep"
		try 2 "--optimizer-impl fused: PyTorch 1.13's fused Adam runs on CUDA only" \
			$cmd --framework $fw --model "$tiny" --wrapper none --torch-version 1.13 --torch-device cpu \
			--optimizer-impl fused --world 1 --out "$keep"
		# The wrapped frameworks' step does not follow them yet: refused.
		for o in "torch-version 1.13" "torch-device cpu" "optimizer-impl fused" "zero-grad zeros"; do
			try 2 "--${o% *}: only with --wrapper none, ddp, fsdp or deepspeed so far" $cmd --framework $fw --$o --out "$keep"
		done
	done
	try 2 "--bucket-cap: --wrapper none builds no DDP to set" \
		$cmd --framework torch --model "$tiny" --wrapper none --world 1 --schemes dp --bucket-cap 5 --out "$keep"
	try 2 "--prefetch: --wrapper none builds no FSDP to set" \
		$cmd --framework torch --model "$tiny" --wrapper none --world 1 --schemes zero3 --prefetch none --out "$keep"
	try 2 "--ds-max-live: --wrapper none builds no DeepSpeed engine to set" \
		$cmd --framework deepspeed --model "$tiny" --wrapper none --world 1 --schemes zero3 --ds-max-live 5 --out "$keep"
	# DDP over the PyTorch step (--wrapper ddp): torch's dp and zero1, one a
	# run, and what it is not described for yet, refused by name.
	ddp="--model $tiny --wrapper ddp --world 1,2 --precision fp32 --torch-device cpu --attn eager"
	try 2 "--wrapper ddp is torch's DistributedDataParallel: give --framework torch" \
		$cmd --framework deepspeed $ddp --schemes dp --torch-version 1.13 --out "$keep"
	try 2 "--wrapper ddp runs one scheme a run, dp or zero1 (it lists dp and zero1): run them apart" \
		$cmd --framework torch $ddp --schemes dp,zero1 --torch-version 1.13 --out "$keep"
	try 2 "--wrapper ddp runs torch's dp (DistributedDataParallel) and zero1 (with ZeroRedundancyOptimizer) only: give --schemes dp or zero1 (it lists zero2)" \
		$cmd --framework torch $ddp --schemes zero2 --torch-version 1.13 --out "$keep"
	try 2 "--wrapper ddp needs a transformer (--model)" \
		$cmd --framework torch --wrapper ddp --schemes dp --torch-version 1.13 --world 2 --out "$keep"
	# The PyTorch step has no units (ZeRO-3's gather units): a --unit given
	# under either wrapper is refused, not ignored (--model's default
	# layer is no unit given).
	try 2 "--unit: --wrapper none runs the PyTorch step over the whole model, which has no units" \
		$cmd --framework torch --model "$tiny" --wrapper none --world 1 --precision fp32 --torch-device cpu \
		--attn eager --unit layer --out "$keep"
	try 2 "--unit: --wrapper ddp runs the PyTorch step over the whole model, which has no units" \
		$cmd --framework torch $ddp --schemes dp --torch-version 1.13 --unit model --out "$keep"
	try 2 "sp-wr-units.json's \"units\": --wrapper none runs the PyTorch step over the whole model, which has no units" \
		$cmd --spec "$tmp/sp-wr-units.json" --model "$tiny" --precision fp32 --torch-device cpu --attn eager \
		--out "$keep"
	# FSDP over the PyTorch step (--wrapper fsdp): 1.13's and 2.6's
	# FULL_SHARD and SHARD_GRAD_OP at N >= 2, one a run, the rest refused
	# by name.
	fsdp="--model $tiny --wrapper fsdp --precision fp32 --torch-device cpu --attn eager"
	try 2 "--wrapper fsdp is torch's FullyShardedDataParallel: give --framework torch" \
		$cmd --framework deepspeed $fsdp --world 2 --schemes zero3 --torch-version 1.13 --out "$keep"
	try 2 "--wrapper fsdp runs one scheme a run, zero2 or zero3 (it lists zero2 and zero3): run them apart" \
		$cmd --framework torch $fsdp --world 2 --schemes zero2,zero3 --torch-version 1.13 --out "$keep"
	try 2 "--wrapper fsdp shards over N ranks: every --world must be at least 2 (it lists 1)" \
		$cmd --framework torch $fsdp --world 1,2 --schemes zero3 --torch-version 1.13 --out "$keep"
	# (QLoRA under FSDP: tests/ft_qlora.sh, its refusal too); BACKWARD_PRE
	# is 2.6's alone, not compared over frozen units, and not across
	# micro-steps
	try 2 "--prefetch backward-pre with --freeze: --wrapper fsdp's prefetch of frozen units is not compared with PyTorch yet (give --prefetch none)" \
		$cmd --framework torch $fsdp --world 2 --schemes zero2 --freeze blocks:0-0 --prefetch backward-pre --out "$keep"
	try 2 "--recompute full with frozen parameters under --wrapper fsdp --torch-version 2.6: not compared with PyTorch yet (give --recompute none or --torch-version 1.13)" \
		$cmd --framework torch $fsdp --world 2 --schemes zero3 --torch-version 2.6 --freeze blocks:0-0 --recompute full \
		--model "$srcdir/report/models/llama-tiny.json" --out "$keep"
	try 2 "--prefetch backward-pre: --wrapper fsdp under PyTorch 1.13 models backward_prefetch None only so far (its default; give --torch-version 2.6)" \
		$cmd --framework torch $fsdp --world 2 --schemes zero3 --torch-version 1.13 --prefetch backward-pre --out "$keep"
	try 2 "--prefetch backward-pre with --grad-accum 2: --wrapper fsdp's prefetch across micro-steps is not described yet (give --prefetch none)" \
		$cmd --framework torch $fsdp --world 2 --schemes zero3 --prefetch backward-pre --grad-accum 2 --out "$keep"
	# FSDP's use_orig_params (--fsdp-orig-params on): 2.6's FULL_SHARD and
	# SHARD_GRAD_OP at any K in fp32, no 4-bit base, no padding inside a
	# flat parameter; the rest by name (docs/finetune.md, "FSDP with
	# use_orig_params=True")
	op="$cmd --framework torch $fsdp --world 2 --schemes zero3 --freeze re:attn"
	try 2 "--fsdp-orig-params on with --torch-version 1.13 (its FSDP has no use_orig_params: flat_param.py 334-340; give --torch-version 2.6): not compared with PyTorch yet" \
		$op --torch-version 1.13 --fsdp-orig-params on --out "$keep"
	try 2 "--fsdp-orig-params on with Adam's foreach or fused (give --optimizer-impl single): not compared with PyTorch yet" \
		$op --optimizer-impl foreach --fsdp-orig-params on --out "$keep"
	try 2 "--fsdp-orig-params on with --quant-base nf4 (give --quant-base none): not compared with PyTorch yet" \
		$cmd --framework torch $fsdp --world 2 --schemes zero3 --lora-r 4 --quant-base nf4 --fsdp-orig-params on \
		--out "$keep"
	try 2 "--fsdp-orig-params on with a --precision other than fp32 (give --precision fp32): not compared with PyTorch yet" \
		$op --precision amp-bf16 --fsdp-orig-params on --out "$keep"
	try 2 "--fsdp-orig-params: 'yes' is not one of on, off" $op --fsdp-orig-params yes --out "$keep"
	try 2 "--fsdp-orig-params is FSDP's use_orig_params, and --schemes dp builds no FSDP (torch's zero2 and zero3 do)" \
		$cmd --framework torch --model "$tiny" --wrapper ddp --world 2 --schemes dp --fsdp-orig-params on --out "$keep"
	try 2 "--fsdp-orig-params on: unit h.0's 49984 elements need padding to a multiple of N = 3 inside its flat parameter (_flat_param.py 742-759): not described yet" \
		$op --world 2,3 --fsdp-orig-params on --out "$keep"
	try 2 "--fsdp-orig-params on with --recompute full: not compared with PyTorch yet (give --recompute none)" \
		$op --recompute full --fsdp-orig-params on --out "$keep"
	try 0 "" $op --fsdp-orig-params on --out "$tmp/fsdp-orig-$cmd.json"
	try 2 "--wrapper fsdp needs a transformer (--model)" \
		$cmd --framework torch --wrapper fsdp --schemes zero3 --torch-version 1.13 --world 2 --out "$keep"
	# torch's dp and zero1 are DDP's, zero3 FSDP's: refused across, by name.
	try 2 "--wrapper fsdp runs torch's zero2 (FSDP SHARD_GRAD_OP) and zero3 (FULL_SHARD) only: give --schemes zero2 or zero3 (it lists zero1; torch's dp and zero1 are --wrapper ddp's)" \
		$cmd --framework torch $fsdp --world 2 --schemes zero1 --torch-version 1.13 --out "$keep"
	try 2 "--wrapper fsdp runs torch's zero2 (FSDP SHARD_GRAD_OP) and zero3 (FULL_SHARD) only: give --schemes zero2 or zero3 (it lists dp; torch's dp and zero1 are --wrapper ddp's)" \
		$cmd --framework torch $fsdp --world 2 --schemes zero3,dp --torch-version 1.13 --out "$keep"
	try 2 "--wrapper ddp runs torch's dp (DistributedDataParallel) and zero1 (with ZeroRedundancyOptimizer) only: give --schemes dp or zero1 (it lists zero3)" \
		$cmd --framework torch $ddp --schemes zero1,zero3 --torch-version 1.13 --out "$keep"
	try 2 "--unit: --wrapper fsdp's units are transformer_auto_wrap_policy's (a unit per block and the root), not --unit's: leave --unit out" \
		$cmd --framework torch $fsdp --world 2 --schemes zero3 --torch-version 1.13 --unit model --out "$keep"
	# autocast under --wrapper fsdp runs (tests/ft_fsdp.sh checks its bytes)
	try 0 "" $cmd --framework torch --model "$tmp/tiny-fz0.json" --wrapper fsdp --precision amp-bf16 --torch-device cpu \
		--attn eager --world 2 --schemes zero3 --torch-version 1.13 --out "$tmp/fsdp-amp-$cmd.json"
	# --grad-accum runs under --wrapper fsdp (tests/ft_fsdp.sh checks its
	# bytes), with --fsdp-no-sync; the engine's own wrappers still refuse it
	try 0 "" $cmd --framework torch $fsdp --world 2 --schemes zero3 --torch-version 1.13 --grad-accum 2 \
		--fsdp-no-sync off --out "$tmp/fsdp-k2.json"
	# --steps 1 where the first step is no list of its own (util/autograd.c
	# ag_step1_lacking: the one step would be the steady step's over the
	# set-up's state, a peak PyTorch never reaches): refused by name
	s1="has no first step of its own yet (its one step would be the steady step's over the set-up's state, which PyTorch never runs); give --steps 2"
	# (DDP's find_unused_parameters has its own: util/ag_ddp.c's step1 on
	# the constructor's buckets)
	try 0 "" $cmd --framework torch $ddp --schemes dp --torch-version 1.13 --ddp-find-unused on --steps 1 \
		--out "$tmp/fu-s1-$cmd.json"
	grep -q '"first_step_peak"' "$tmp/fu-s1-$cmd.json" ||
		fail "$cmd --steps 1 under --ddp-find-unused on: no first_step_peak in $tmp/fu-s1-$cmd.json"
	# (ZeRO-3 at N > 1 over gpt2 and llama, util/ag_ds3.c's step 1; over a
	# model whose leaf marks are not described, the gemmas', refused)
	try 0 "" $cmd --framework deepspeed --model "$tiny" --wrapper deepspeed --world 2 --schemes zero3 --precision fp32 \
		--torch-version 1.13 --torch-device cpu --steps 1 --out "$tmp/ds3-s1-$cmd.json"
	grep -q '"first_step_peak"' "$tmp/ds3-s1-$cmd.json" ||
		fail "$cmd --steps 1 under --wrapper deepspeed --schemes zero3 at N = 2: no first_step_peak"
	try 2 "--steps 1: --wrapper deepspeed --schemes zero3 at N > 1 over the gemmas' extra norms $s1" \
		$cmd --framework deepspeed --model "$srcdir/report/models/gemma2-tiny.json" --wrapper deepspeed --world 2 \
		--schemes zero3 --precision fp32 --torch-version 1.13 --torch-device cpu --steps 1 --out "$keep"
	# (under --grad-accum its micro-step 2 runs on the trace micro-step 1
	# recorded: not built, the run's step 1 the steady step's)
	try 2 "--steps 1: --wrapper deepspeed --schemes zero3 at N > 1 over --grad-accum $s1" \
		$cmd --framework deepspeed --model "$tiny" --wrapper deepspeed --world 2 --schemes zero3 --precision fp32 \
		--torch-version 1.13 --torch-device cpu --grad-accum 2 --steps 1 --out "$keep"
	# (DeepSpeed's ZeRO-1 and 2 have theirs: util/ag_ds.c's step1)
	try 0 "" $cmd --framework deepspeed --model "$tiny" --wrapper deepspeed --world 2 --schemes zero2 --precision fp32 \
		--torch-version 1.13 --torch-device cpu --steps 1 --out "$tmp/ds-s1-$cmd.json"
	grep -q '"first_step_peak"' "$tmp/ds-s1-$cmd.json" ||
		fail "$cmd --steps 1 under --wrapper deepspeed: no first_step_peak in $tmp/ds-s1-$cmd.json"
	# (a mixture's theory takes a run's routing: measure's alone here)
	if [ $cmd = measure ]; then
		try 2 "--steps 1: a mixture of experts $s1" \
			$cmd --framework torch --model "$tmp/moe-one.json" --wrapper none --world 1 --precision fp32 \
			--torch-device cpu --torch-version 1.13 --attn eager --steps 1 --out "$keep"
	fi
	# (and where it is one, --steps 1 runs: FSDP's, 1.13's and 2.6's,
	# under accumulation and with frozen units too)
	try 0 "" $cmd --framework torch $fsdp --world 2 --schemes zero3 --torch-version 1.13 --steps 1 \
		--out "$tmp/fsdp-s1-$cmd.json"
	try 0 "" $cmd --framework torch $fsdp --world 2 --schemes zero2 --torch-version 2.6 --grad-accum 2 \
		--freeze blocks:0-0 --steps 1 --out "$tmp/fsdp-s1-k2-$cmd.json"
	# (with step 1's own figure: 1659c3a ran both without it)
	for f in "$tmp/fsdp-s1-$cmd.json" "$tmp/fsdp-s1-k2-$cmd.json"; do
		grep -q '"first_step_peak"' "$f" || fail "$cmd --steps 1 under --wrapper fsdp: no first_step_peak in $f"
	done
	try 2 "--grad-accum 2: only with --framework paper, --framework torch and --wrapper none, ddp or fsdp, or --framework deepspeed, so far (--wrapper auto, the engine's own DDP and FSDP step, takes no accumulation yet)" \
		$cmd --framework torch --model "$tiny" --wrapper auto --world 2 --schemes zero3 --grad-accum 2 --out "$keep"
	# a message names the option as given (--fsdp-no-sync is --ddp-no-sync's
	# other name), and the two names with different values are refused
	try 2 "--fsdp-no-sync: only with --wrapper ddp or fsdp (DistributedDataParallel's or FullyShardedDataParallel's no_sync())" \
		$cmd --framework torch --model "$tiny" --wrapper none --world 1 --schemes dp --grad-accum 2 --fsdp-no-sync on \
		--out "$keep"
	try 2 "--fsdp-no-sync: only with --grad-accum K > 1 (no_sync() wraps the first K - 1 micro-steps; without accumulation there are none)" \
		$cmd --framework torch $fsdp --world 2 --schemes zero3 --torch-version 1.13 --fsdp-no-sync off --out "$keep"
	try 2 "--fsdp-no-sync: 'of' is not one of on, off" \
		$cmd --framework torch $fsdp --world 2 --schemes zero3 --torch-version 1.13 --grad-accum 2 --fsdp-no-sync of \
		--out "$keep"
	try 2 "--ddp-no-sync on and --fsdp-no-sync off: two names of one setting with different values (give one)" \
		$cmd --framework torch $ddp --schemes dp --torch-version 1.13 --grad-accum 2 --ddp-no-sync on --fsdp-no-sync off \
		--out "$keep"
	try 2 "--scheme zero1 and --schemes dp: two names of one setting with different values (give one)" \
		$cmd --framework torch $ddp --scheme zero1 --schemes dp --torch-version 1.13 --out "$keep"
	try 0 "" $cmd --framework torch $ddp --schemes dp --torch-version 1.13 --grad-accum 2 --ddp-no-sync off \
		--fsdp-no-sync off --out "$tmp/ns-twice-$cmd.json"
	# The paper's accumulation runs (tests/test_paper_accum,
	# tests/paper_accum_tfm.sh, theory_vs_measure hold it).
	try 0 "" $cmd --schemes zero2 --world 1,2 --grad-accum 3 --out "$tmp/paper-k3.json"
	# DeepSpeed's accumulation: the engine's every scheme on the MLP and the
	# transformer, not offloaded (tests/test_ds_accum and theory_vs_measure
	# hold their bytes).
	try 0 "" $cmd --framework deepspeed --schemes dp,zero1,zero2,zero3 --world 2 --grad-accum 2 --out "$tmp/ds-k2.json"
	try 0 "" $cmd --framework deepspeed --model "$tiny" --schemes dp,zero1,zero2,zero3 --world 2 --grad-accum 2 \
		--out "$tmp/ds-tfm-k2.json"
	try 2 "--grad-accum 2 with --offload: DeepSpeed's accumulation through the host (async_accumulate_grad_in_cpu_via_gpu) is not described yet" \
		$cmd --framework deepspeed --schemes zero2 --offload optimizer --grad-accum 2 --out "$keep"
	try 2 "--grad-accum 2 with --offload: DeepSpeed's accumulation through the host (async_accumulate_grad_in_cpu_via_gpu) is not described yet" \
		$cmd --framework deepspeed --model "$tiny" --schemes zero2 --world 2 --offload optimizer --grad-accum 2 --out "$keep"
	[ "$cmd" = measure ] && try 2 "--write-case with --grad-accum 2: an MLP case holds one batch a step, not K micro-batches" \
		$cmd --framework deepspeed --schemes zero2 --world 2 --grad-accum 2 --write-case "$tmp/acc-case.json" --out "$keep"
	# --freeze under FSDP: whole units only (1.13's FlatParameter; tests/ft_fsdp_lora.sh)
	try 2 "--freeze: --wrapper fsdp's unit root (transformer_auto_wrap_policy's) would hold frozen and trainable parameters, and PyTorch 1.13 refuses that: \"\`FlatParameter\` requires uniform \`requires_grad\`\" (flat_param.py 334-340): freeze whole blocks, or the root's parameters all or none" \
		$cmd --framework torch $fsdp --world 2 --schemes zero3 --torch-version 1.13 --freeze embeddings --out "$keep"
	try 2 "--freeze: --wrapper fsdp's unit root (transformer_auto_wrap_policy's) would hold frozen and trainable parameters, and PyTorch 2.6 refuses that: \"Must flatten tensors with uniform \`requires_grad\` when \`use_orig_params=False\`\" (_flat_param.py 800-808): freeze whole blocks, or the root's parameters all or none" \
		$cmd --framework torch $fsdp --world 2 --schemes zero3 --torch-version 2.6 --attn eager --freeze embeddings --out "$keep"
	# accumulation under autocast is taken (tests/ft_accum.sh holds it to
	# PyTorch; autocast wants a config with dropout 0)
	sed 's/}$/, "embd_pdrop": 0.0, "attn_pdrop": 0.0, "resid_pdrop": 0.0}/' "$tmp/tiny.json" >"$tmp/tiny-p0.json"
	try 0 "" $cmd --framework torch --model "$tmp/tiny-p0.json" --wrapper none --world 1 --precision amp-bf16 --torch-device cpu \
		--attn eager --grad-accum 2 --seq 4 --batch 1 --steps 2 --schemes dp --out "$tmp/ga-amp-$cmd.json"
	# accumulation under ZeroRedundancyOptimizer: taken (tests/ft_zero1.sh)
	try 0 "" $cmd --framework torch $ddp --schemes zero1 --torch-version 1.13 --grad-accum 2 --out "$tmp/ga-zero1-$cmd.json"
	# and under autocast (tests/ft_zero1.sh)
	try 0 "" $cmd --framework torch --model "$tmp/tiny-p0.json" --wrapper ddp --world 2 --precision amp-bf16 --torch-device cpu \
		--attn eager --grad-accum 2 --seq 4 --batch 1 --schemes zero1 --torch-version 1.13 --out "$tmp/ga-zero1-amp-$cmd.json"
	try 2 "--ddp-no-sync: only with --grad-accum K > 1 (no_sync() wraps the first K - 1 micro-steps; without accumulation there are none)" \
		$cmd --framework torch $ddp --schemes dp --torch-version 1.13 --ddp-no-sync off --out "$keep"
	# --ddp-find-unused (DDP's find_unused_parameters; tests/hf_torch.sh
	# holds its bytes): taken under --wrapper ddp --schemes dp in 1.13, the
	# rest refused by name
	try 0 "" $cmd --framework torch $ddp --schemes dp --torch-version 1.13 --ddp-find-unused on \
		--out "$tmp/fu-$cmd.json"
	try 2 "--ddp-find-unused: only with --framework torch --wrapper ddp (DistributedDataParallel's find_unused_parameters)" \
		$cmd --framework torch --model "$tiny" --wrapper none --world 1 --precision fp32 --torch-device cpu \
		--attn eager --torch-version 1.13 --ddp-find-unused off --out "$keep"
	try 2 "--ddp-find-unused: PyTorch 1.13 alone so far (give --torch-version 1.13)" \
		$cmd --framework torch $ddp --schemes dp --ddp-find-unused on --out "$keep"
	try 2 "--ddp-find-unused with --schemes zero1: not built yet (give --schemes dp)" \
		$cmd --framework torch $ddp --schemes zero1 --torch-version 1.13 --ddp-find-unused on --out "$keep"
	try 2 "--ddp-find-unused with --grad-accum 2: not built yet (give --grad-accum 1)" \
		$cmd --framework torch $ddp --schemes dp --torch-version 1.13 --grad-accum 2 --ddp-find-unused on --out "$keep"
	try 2 "--ddp-find-unused with --freeze: not built yet" \
		$cmd --framework torch $ddp --schemes dp --torch-version 1.13 --freeze embeddings --ddp-find-unused on \
		--out "$keep"
	try 2 "--ddp-find-unused with --recompute full (Hugging Face's Trainer passes find_unused_parameters False under gradient checkpointing): not built yet" \
		$cmd --framework torch $ddp --schemes dp --torch-version 1.13 --recompute full --ddp-find-unused on \
		--out "$keep"
	try 2 "--ddp-find-unused with --precision amp-bf16: not built yet (give --precision fp32)" \
		$cmd --framework torch --model "$tiny" --wrapper ddp --world 2 --precision amp-bf16 --torch-device cpu \
		--attn eager --schemes dp --torch-version 1.13 --ddp-find-unused on --out "$keep"
	try 2 "--ddp-find-unused: 'yes' is not one of on, off" \
		$cmd --framework torch $ddp --schemes dp --torch-version 1.13 --ddp-find-unused yes --out "$keep"
	# --recompute-impl non-reentrant (checkpoint's use_reentrant=False;
	# tests/hf_torch.sh holds its bytes): the plain loop's, DDP's and
	# FSDP's gpt2 and llama in fp32, the rest refused by name
	try 0 "" $cmd --framework torch --model "$tmp/tiny-p0.json" --wrapper none --world 1 --precision fp32 \
		--torch-device cpu --attn eager --seq 4 --batch 1 --steps 2 --schemes dp --recompute full \
		--recompute-impl non-reentrant --out "$tmp/nr-$cmd.json"
	try 2 "--recompute-impl: 'yes' is not one of reentrant, non-reentrant" \
		$cmd --framework torch $ddp --schemes dp --recompute full --recompute-impl yes --out "$keep"
	try 2 "--recompute-impl non-reentrant: only with --recompute full (Hugging Face's gradient checkpointing; give --recompute full, or leave --recompute-impl out)" \
		$cmd --framework torch --model "$tmp/tiny-p0.json" --wrapper none --world 1 --precision fp32 \
		--torch-device cpu --attn eager --seq 4 --batch 1 --schemes dp --recompute-impl non-reentrant --out "$keep"
	# (DDP and FSDP taken: tests/hf_torch.sh's ddp2-*-nonreentrant-* and
	# fsdp2-*-nonreentrant-* rows; DeepSpeed's hooks around it refused)
	try 0 "" $cmd --framework torch $ddp --schemes dp --seq 4 --batch 1 --steps 2 --recompute full --recompute-impl non-reentrant \
		--out "$tmp/nr-ddp-$cmd.json"
	try 2 "--recompute-impl non-reentrant with --wrapper deepspeed: not described yet (give --wrapper none, ddp or fsdp, or --recompute-impl reentrant)" \
		$cmd --framework deepspeed --model "$tiny" --wrapper deepspeed --world 2 --precision fp32 --torch-device cpu \
		--torch-version 1.13 --attn eager --seq 4 --batch 1 --schemes zero2 --recompute full \
		--recompute-impl non-reentrant --out "$keep"
	# QLoRA's 4-bit base under --wrapper deepspeed: zero1 and zero2 built
	# (tests/ft_qlora.sh, ds_torch26.sh), zero3's partitions of it not
	try 2 "--quant-base nf4 with --wrapper deepspeed --schemes zero3: not built yet (stage 3's partitions of the packed 4-bit weight are not described; give --schemes zero1 or zero2, or --wrapper auto: DeepSpeed's own step)" \
		$cmd --framework deepspeed --model "$tiny" --wrapper deepspeed --world 2 --precision fp32 --torch-device cpu \
		--torch-version 2.6 --attn eager --seq 4 --batch 1 --schemes zero3 --lora-r 4 --quant-base nf4 --out "$keep"
	# (under autocast too: tests/hf_torch.sh's *-amp-bf16-nonreentrant-* rows)
	try 0 "" $cmd --framework torch --model "$tmp/tiny-p0.json" --wrapper none --world 1 --precision amp-bf16 \
		--torch-device cpu --attn eager --seq 4 --batch 1 --steps 2 --schemes dp --recompute full \
		--recompute-impl non-reentrant --out "$tmp/nr-amp-$cmd.json"
	try 2 "--recompute full: Hugging Face's gradient checkpointing with --recompute-impl non-reentrant with --attn sdpa (give --attn eager) is not described yet" \
		$cmd --framework torch --model "$tmp/tiny-p0.json" --wrapper none --world 1 --precision fp32 \
		--torch-device cpu --attn sdpa --seq 4 --batch 1 --schemes dp --recompute full --recompute-impl non-reentrant \
		--out "$keep"
	# --logits dropped (Hugging Face Trainer's loop; tests/hf_torch.sh holds
	# its bytes): the plain loop at --grad-accum 1, the rest refused by name
	try 0 "" $cmd --framework torch --model "$tmp/tiny-p0.json" --wrapper none --world 1 --precision fp32 \
		--torch-device cpu --attn eager --seq 4 --batch 1 --steps 2 --schemes dp --logits dropped \
		--out "$tmp/logits-$cmd.json"
	try 2 "--logits: 'none' is not one of kept, dropped" \
		$cmd --framework torch $ddp --schemes dp --logits none --out "$keep"
	try 2 "--logits dropped with --wrapper ddp: not described yet (give --wrapper none, or --logits kept)" \
		$cmd --framework torch $ddp --schemes dp --logits dropped --out "$keep"
	try 2 "--logits dropped with --grad-accum 2: not described yet (give --grad-accum 1, or --logits kept)" \
		$cmd --framework torch --model "$tmp/tiny-p0.json" --wrapper none --world 1 --precision fp32 \
		--torch-device cpu --attn eager --seq 4 --batch 1 --schemes dp --grad-accum 2 --logits dropped --out "$keep"
	try 2 "--logits: only under --framework torch or deepspeed" \
		$cmd --framework paper --model "$tmp/tiny-p0.json" --world 1 --schemes dp --logits dropped --out "$keep"
	if [ $cmd = measure ]; then
		try 2 "--write-case with --logits dropped: a case has no key for the loop's hold on the logits (its reader would keep them)" \
			measure --framework torch --model "$tmp/tiny-p0.json" --wrapper none --world 1 --precision fp32 \
			--torch-device cpu --attn eager --seq 4 --batch 1 --schemes dp --logits dropped \
			--write-case "$tmp/logits-case.json" --out "$keep"
	fi
	# --recompute full under torch is Hugging Face's gradient checkpointing
	# (tests/hf_torch.sh's *-ckpt cases): taken on the plain loop, DDP and
	# FSDP; selective has no Hugging Face equivalent, and the rest is
	# refused by name.
	try 0 "" $cmd --framework torch --model "$tmp/tiny-p0.json" --wrapper none --world 1 --precision fp32 \
		--torch-device cpu --torch-version 1.13 --attn eager --seq 4 --batch 1 --steps 2 --schemes dp \
		--recompute full --out "$tmp/ckpt-$cmd.json"
	try 2 "--recompute selective: the PyTorch step has no such checkpointing (Hugging Face's gradient checkpointing reruns whole decoder layers: --recompute full); give none or full" \
		$cmd --framework torch --model "$tiny" --wrapper none --world 1 --precision fp32 --torch-device cpu \
		--attn eager --recompute selective --out "$keep"
	# with the config's dropout (GPT2Config's 0.1) too: the rerun draws the
	# forward's masks (tests/hf_torch.sh's *-dropout-ckpt cases)
	try 0 "" $cmd --framework torch --model "$tiny" --wrapper none --world 1 --precision fp32 --torch-device cpu \
		--torch-version 1.13 --attn eager --seq 4 --batch 1 --steps 2 --schemes dp --recompute full \
		--out "$tmp/ckpt-drop-$cmd.json"
	# a gemma's on the plain loop (tests/hf_torch.sh's gemma*-ckpt cases);
	# under --wrapper fsdp its checkpointed call is not described
	printf '%s\n' '{"model_type": "gemma2", "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,' \
		'"num_key_value_heads": 2, "head_dim": 16, "intermediate_size": 160, "max_position_embeddings": 64,' \
		'"vocab_size": 256, "sliding_window": 2, "attention_dropout": 0.0, "pad_token_id": 0}' >"$tmp/tiny-g2.json"
	try 0 "" $cmd --framework torch --model "$tmp/tiny-g2.json" --wrapper none --world 1 --precision fp32 \
		--torch-device cpu --torch-version 1.13 --attn eager --seq 4 --batch 1 --steps 2 --schemes dp \
		--recompute full --out "$tmp/ckpt-g2-$cmd.json"
	try 2 "--recompute full: Hugging Face's gradient checkpointing of a gemma2 under --wrapper fsdp is not described yet (give --wrapper none or ddp)" \
		$cmd --framework torch --model "${srcdir:-.}/data/models/gemma-2-2b.json" --wrapper fsdp --world 2 \
		--schemes zero3 --precision fp32 --torch-device cpu --torch-version 1.13 --attn eager --seq 4 --batch 1 \
		--recompute full --out "$keep"
	# The last of a repeated option counts.
	try 2 "--wrapper none is one process's plain training loop: every --world must be 1 (it lists 4)" \
		$cmd --framework torch --model "$tiny" --wrapper auto --wrapper none --world 4 --out "$keep"
done
# The plain loop's step is written for gpt2, llama/mistral, qwen2, qwen3,
# phi3, gemma2 and gemma3_text: what of the gemmas' is not described is
# refused by name (autocast, sdpa, ...; gemma3_text under SDPA with the
# sequence at its sliding_window, where masking_utils gives SDPA a mask,
# and with attn_logit_softcapping, which its attention does not pass on).
sed 's/"sliding_window": 512/"sliding_window": 16/' "${srcdir:-.}/data/models/gemma-3-1b.json" >"$tmp/g3w16.json"
grep -q '"sliding_window": 16' "$tmp/g3w16.json" || fail "gemma-3-1b.json has no \"sliding_window\": 512 to set"
bad_theory "--attn sdpa: --seq 16 reaches the sliding window (16): SDPA gets a mask, not described yet (give --attn eager)" \
	--framework torch --model "$tmp/g3w16.json" --seq 16 --wrapper none --world 1 --precision fp32 --torch-device cpu \
	--attn sdpa
sed 's/"attn_logit_softcapping": null/"attn_logit_softcapping": 50.0/' "${srcdir:-.}/data/models/gemma-3-1b.json" >"$tmp/g3cap.json"
grep -q '"attn_logit_softcapping": 50.0' "$tmp/g3cap.json" || fail "gemma-3-1b.json has no \"attn_logit_softcapping\": null to set"
bad_theory "--model g3cap: the PyTorch step of a gemma3_text with attn_logit_softcapping (give a config without it) is not described yet" \
	--framework torch --model "$tmp/g3cap.json" --seq 16 --wrapper none --world 1 --precision fp32 --torch-device cpu --attn eager \
	--torch-version 1.13
bad_theory "--model gemma-2-2b: the PyTorch step of a gemma2 with autocast (give --precision fp32) is not described yet" \
	--framework torch --model "${srcdir:-.}/data/models/gemma-2-2b.json" --seq 16 --wrapper none --world 1 --precision amp-bf16 \
	--torch-device cpu --attn eager
# SDPA is transformers' default for a gemma2 too (modeling_gemma2.py at
# 9a80143ca260: no eager override), so 2.6's default is SDPA, refused
# with that reason, given or not
g2sdpa="--model gemma-2-2b: the PyTorch step of a gemma2 with --attn sdpa (transformers' default too: 4.49's gemma2 no longer swaps it for eager, and its SDPA drops the softcap; give --attn eager) is not described yet"
for g2attn in "--attn sdpa" ""; do
	for cmd in theory measure; do
		# shellcheck disable=SC2086
		bad_$cmd "$g2sdpa" --framework torch --model "${srcdir:-.}/data/models/gemma-2-2b.json" --seq 16 --wrapper none \
			--world 1 --precision fp32 --torch-device cpu --torch-version 2.6 $g2attn
	done
done
# autocast is described over every family's step, without dropout: phi3's
# residual dropouts (described in fp32) under autocast are refused by name
cat >"$tmp/tiny-phi3-drop.json" <<'EOF_'
{"model_type": "phi3", "hidden_size": 16, "num_hidden_layers": 1, "num_attention_heads": 2,
 "num_key_value_heads": 1, "intermediate_size": 32, "max_position_embeddings": 8, "vocab_size": 32,
 "resid_pdrop": 0.1, "pad_token_id": null}
EOF_
bad_theory "--precision amp-bf16: autocast with dropout (the model's config) is not described yet" \
	--framework torch --model "$tmp/tiny-phi3-drop.json" --seq 8 --wrapper none --world 1 --precision amp-bf16 \
	--torch-device cpu --attn eager
# (a tiny gpt2 without dropout, for SDPA's refusals below)
cat >"$tmp/tiny-nodrop.json" <<'EOF_'
{"model_type": "gpt2", "n_embd": 16, "n_layer": 1, "n_head": 2, "vocab_size": 32, "n_positions": 8,
 "embd_pdrop": 0.0, "attn_pdrop": 0.0, "resid_pdrop": 0.0}
EOF_
# SDPA's refusals by name: autocast where not described (FSDP; the flash
# kernel on the plain loop and DDP runs, checkpointed too), attention
# dropout (the math path with its dropout noise) where not checked against
# 2.6, a mask past the sliding window, and qwen2's and phi3's flash kernel
# (as many k/v heads as heads)
bad_theory "--precision amp-bf16: autocast with --attn sdpa and --wrapper fsdp is not described yet (give --attn eager)" \
	--framework torch --model "$tmp/tiny-nodrop.json" --seq 8 --wrapper fsdp --world 2 --schemes zero3 \
	--precision amp-bf16 --torch-device cpu --attn sdpa --torch-version 2.6
# (taken since held to 2.6: ZeroRedundancyOptimizer, dropped logits
# (tests/hf_torch.sh torch26), LoRA checkpointed (tests/ft_lora.sh torch26))
try 0 "" theory --out "$tmp/sdpa-amp.json" --framework torch --model "$tmp/tiny-nodrop.json" --seq 8 --wrapper ddp \
	--world 2 --schemes zero1 --precision amp-bf16 --torch-device cpu --attn sdpa --torch-version 2.6
try 0 "" theory --out "$tmp/sdpa-amp.json" --framework torch --model "$tmp/tiny-nodrop.json" --seq 8 --wrapper none \
	--world 1 --logits dropped --precision amp-bf16 --torch-device cpu --attn sdpa --torch-version 2.6
try 0 "" theory --out "$tmp/sdpa-amp.json" --framework torch --model "$tmp/tiny-nodrop.json" --seq 8 --wrapper none \
	--world 1 --lora-r 4 --recompute full --precision amp-bf16 --torch-device cpu --attn sdpa --torch-version 2.6
# float16 autocast (2.6, GradScaler's step): the plain loop and DDP, single
# and foreach Adam (tests/hf_torch.sh torch26), LoRA, --grad-accum,
# ZeroRedundancyOptimizer and FSDP's ShardedGradScaler (ft_lora.sh,
# ft_zero1.sh, ft_fsdp.sh, ft_fsdp_lora.sh torch26); fused Adam by name
try 0 "" theory --out "$tmp/fp16.json" --framework torch --model "$tmp/tiny-nodrop.json" --seq 8 --wrapper ddp --schemes dp \
	--world 2 --precision amp-fp16 --torch-device cpu --attn sdpa --torch-version 2.6
try 0 "" theory --out "$tmp/fp16.json" --framework torch --model "$tmp/tiny-nodrop.json" --seq 8 --wrapper ddp \
	--schemes zero1 --world 2 --grad-accum 2 --lora-r 4 --precision amp-fp16 --torch-device cpu --torch-version 2.6
fp16_2_6="--framework torch --model $tmp/tiny-nodrop.json --seq 8 --precision amp-fp16 --torch-device cpu --torch-version 2.6"
fp16_no="--precision amp-fp16: float16 autocast (GradScaler's step) with"
# shellcheck disable=SC2086
bad_theory "$fp16_no --optimizer-impl fused (fused Adam takes the scaler's grad_scale and found_inf itself" \
	$fp16_2_6 --wrapper none --world 1 --optimizer-impl fused
try 0 "" theory --out "$tmp/fp16.json" --framework torch --model "$tmp/tiny-nodrop.json" --seq 8 --wrapper fsdp \
	--schemes zero3 --world 2 --lora-r 4 --precision amp-fp16 --torch-device cpu --attn eager --torch-version 2.6
sed 's/"attn_pdrop": 0.0/"attn_pdrop": 0.1/' "$tmp/tiny-nodrop.json" >"$tmp/tiny-adrop.json"
# (gpt2's and a llama's with fewer k/v heads run: tests/hf_torch.sh torch26)
try 0 "" theory --out "$tmp/adrop.json" --framework torch --model "$tmp/tiny-adrop.json" --seq 8 --wrapper none --world 1 \
	--precision fp32 --torch-device cpu --attn sdpa --torch-version 2.6
bad_theory "--attn sdpa: attention dropout (attn_pdrop 0.1: SDPA's math path) with --recompute full is not described yet" \
	--framework torch --model "$tmp/tiny-adrop.json" --seq 8 --wrapper none --world 1 --precision fp32 \
	--torch-device cpu --attn sdpa --torch-version 2.6 --recompute full
bad_theory "--attn sdpa: attention dropout (attn_pdrop 0.1: SDPA's math path) with --logits dropped is not described yet" \
	--framework torch --model "$tmp/tiny-adrop.json" --seq 8 --wrapper none --world 1 --precision fp32 \
	--torch-device cpu --attn sdpa --torch-version 2.6 --logits dropped
bad_theory "--attn sdpa: attention dropout (attn_pdrop 0.1: SDPA's math path) under --wrapper fsdp is not described yet" \
	--framework torch --model "$tmp/tiny-adrop.json" --seq 8 --wrapper fsdp --world 2 --schemes zero3 --precision fp32 \
	--torch-device cpu --attn sdpa --torch-version 2.6
cat >"$tmp/tiny-mistral-sw.json" <<'EOF_'
{"model_type": "mistral", "hidden_size": 16, "num_hidden_layers": 1, "num_attention_heads": 2,
 "num_key_value_heads": 1, "intermediate_size": 32, "max_position_embeddings": 8, "vocab_size": 32,
 "sliding_window": 4}
EOF_
bad_theory "--attn sdpa: --seq 8 reaches the sliding window (4): SDPA gets a mask, not described yet" \
	--framework torch --model "$tmp/tiny-mistral-sw.json" --seq 8 --wrapper none --world 1 --precision fp32 \
	--torch-device cpu --attn sdpa --torch-version 2.6
# (a llama with as many k/v heads as heads and attention dropout)
sed 's/"mistral"/"llama"/; s/"num_key_value_heads": 1/"num_key_value_heads": 2/; s/"sliding_window": 4/"attention_dropout": 0.1/' \
	"$tmp/tiny-mistral-sw.json" >"$tmp/tiny-llama-adrop.json"
bad_theory "--attn sdpa: attention dropout (attn_pdrop 0.1: SDPA's math path) with a llama with as many k/v heads as heads" \
	--framework torch --model "$tmp/tiny-llama-adrop.json" --seq 8 --wrapper none --world 1 --precision fp32 \
	--torch-device cpu --attn sdpa --torch-version 2.6
sed 's/"num_key_value_heads": 1/"num_key_value_heads": 2/' "$tmp/tiny-qwen2.json" >"$tmp/tiny-qwen2-mha.json"
bad_theory "--attn sdpa: a qwen2 with as many k/v heads as heads (2) takes the CPU's flash kernel, not described yet" \
	--framework torch --model "$tmp/tiny-qwen2-mha.json" --seq 8 --wrapper none --world 1 --precision fp32 \
	--torch-device cpu --attn sdpa --torch-version 2.6
# freeze's terms are comma-separated in a spec's string as on the command
# line (the file's "freeze" is the run's config.freeze again)
spec sp-freeze-str '{"format": "zerosim-sweep/3", "framework": "torch", "wrapper": "none", "world": [1], "freeze": "embeddings,blocks:0-0"}'
try 0 "" theory --spec "$tmp/sp-freeze-str.json" --model "${srcdir:-.}/report/models/llama-tiny.json" --seq 8 \
	--precision fp32 --torch-device cpu --attn eager --format json --out "$tmp/fz.json"
grep -q '"freeze":[[:space:]]*"embeddings,blocks:0-0"' "$tmp/fz.json" ||
	fail "a spec's \"freeze\": \"embeddings,blocks:0-0\" is not the run's config.freeze"
# "freeze": [] is refused as any empty list of a spec, and one block is
# blocks:N-N, as the message says (the review of s35-int)
spec sp-freeze-none '{"format": "zerosim-sweep/3", "framework": "torch", "wrapper": "none", "world": [1], "freeze": []}'
bad_theory "$tmp/sp-freeze-none.json: \"freeze\": the list is empty (leave the key out to train every parameter)" \
	--spec "$tmp/sp-freeze-none.json" --model "${srcdir:-.}/report/models/llama-tiny.json" --seq 8
bad_theory "--freeze: bad term 'blocks:0' (blocks:A-B, whole numbers, A <= B; one block N is blocks:N-N)" \
	--framework torch --wrapper none --world 1 --model "${srcdir:-.}/report/models/llama-tiny.json" --seq 8 \
	--freeze blocks:0
# measure refuses what the step cannot describe as theory does: bad usage
# (exit 2), before anything runs (it exited 1 once the run had begun);
# and the PyTorch step under --backend mpi, which runs its ranks in one
# process.
bad_measure "--attn sdpa: --seq 16 reaches the sliding window (16): SDPA gets a mask, not described yet (give --attn eager)" \
	--framework torch --model "$tmp/g3w16.json" --seq 16 --wrapper none --world 1 --precision fp32 --torch-device cpu \
	--attn sdpa
bad_measure "--optimizer: the PyTorch step describes Adam only" \
	--framework torch --model "${srcdir:-.}/report/models/llama-tiny.json" --seq 16 --wrapper none --world 1 \
	--torch-device cpu --attn eager --optimizer sgd
# --attn reaches the PyTorch step only: measure refuses sdpa where the
# engine's own step (eager attention) runs, from the options and a spec.
bad_measure "--attn sdpa: --framework deepspeed runs zerosim's own step, whose attention is eager (give --attn eager, or --framework torch --wrapper none, ddp or fsdp)" \
	--framework deepspeed --model "${srcdir:-.}/report/models/llama-tiny.json" --seq 16 --world 1 --attn sdpa
bad_measure "--attn sdpa: --framework torch --wrapper auto runs zerosim's own step" \
	--framework torch --model "${srcdir:-.}/report/models/llama-tiny.json" --seq 16 --world 1 --attn sdpa
printf '{"format": "zerosim-sweep/3", "framework": "deepspeed", "attn": "sdpa", "world": [1]}' >"$tmp/ds-sdpa.json"
bad_measure "ds-sdpa.json's \"attn\" sdpa: --framework deepspeed runs zerosim's own step" \
	--model "${srcdir:-.}/report/models/llama-tiny.json" --seq 16 --spec "$tmp/ds-sdpa.json"
# theory's --flash-attn is --attn sdpa under torch and deepspeed.
bad_theory "--flash-attn is --attn sdpa, and --attn eager says otherwise: give one" \
	--framework torch --model "$tiny" --attn eager --flash-attn --world 1
bad_theory "--flash-attn (--attn sdpa): PyTorch 1.13 has no scaled_dot_product_attention" \
	--framework deepspeed --model "$tiny" --wrapper none --torch-version 1.13 --flash-attn --world 1
spec sp-tv-num '{"format": "zerosim-sweep/2", "framework": "torch", "torch-version": 1.13}'
spec sp-tv-bad '{"format": "zerosim-sweep/2", "framework": "torch", "torch-version": "2.0"}'
spec sp-zg-paper '{"format": "zerosim-sweep/2", "zero-grad": "zeros"}'
spec sp-zg-v1 '{"format": "zerosim-sweep/1", "framework": "torch", "zero-grad": "zeros"}'
spec sp-ga-v2 '{"format": "zerosim-sweep/2", "framework": "torch", "wrapper": "none", "grad-accum": 2}'
spec sp-ns-v2 '{"format": "zerosim-sweep/2", "framework": "torch", "wrapper": "ddp", "ddp-no-sync": "off"}'
spec sp-zg-key '{"format": "zerosim-sweep/2", "framework": "torch", "zero_grad": "zeros"}'
spec sp-wr-world '{"format": "zerosim-sweep/2", "framework": "torch", "wrapper": "none", "world": [1, 8]}'
spec sp-oi-list '{"format": "zerosim-sweep/2", "framework": "torch", "optimizer-impl": ["single"]}'
for cmd in measure theory; do
	sp_try() { f=$1; shift; try 2 "$tmp/$f.json$*" $cmd --spec "$tmp/$f.json" --out "$keep"; }
	sp_try sp-tv-num ': "torch-version" is not a string'
	sp_try sp-tv-bad ": \"torch-version\": '2.0' is not one of 2.6, 1.13"
	sp_try sp-zg-v1 ': "zero-grad" is a key of zerosim-sweep/2, not of this zerosim-sweep/1 file'
	sp_try sp-ga-v2 ': "grad-accum" is a key of zerosim-sweep/3, not of this zerosim-sweep/2 file (give "format": "zerosim-sweep/3")'
	sp_try sp-ns-v2 ': "ddp-no-sync" is a key of zerosim-sweep/3, not of this zerosim-sweep/2 file (give "format": "zerosim-sweep/3")'
	sp_try sp-zg-key ': unknown key "zero_grad"; zerosim-sweep/2 has layers, world, schemes, units, steps, batch, seed, precision, optimizer, lr, beta1, beta2, eps, framework, bucket-cap, prefetch, torch-version, torch-device, optimizer-impl, zero-grad, attn, wrapper'
	sp_try sp-oi-list ': "optimizer-impl" is not a string'
	sp_try sp-zg-paper "'s \"zero-grad\": only under --framework torch or deepspeed"
	try 2 "sp-wr-world.json's \"wrapper\" none is one process's plain training loop: every --world must be 1 (it lists 8)" \
		$cmd --spec "$tmp/sp-wr-world.json" --model "$tiny" --out "$keep"
	# The command line overrides the spec, and is then checked against it.
	try 2 "sp-wr-world.json's \"wrapper\" none is one process's plain training loop: every --world must be 1 (it lists 2)" \
		$cmd --spec "$tmp/sp-wr-world.json" --model "$tiny" --world 2 --out "$keep"
done
# A case file holds none of them: the framework's options are the command line's.
bad_case case-zg 's/"steps": 1,/"steps": 1, "zero-grad": "none",/' "$tmp/case-zg.json: unknown key \"zero-grad\" in the case"
bad_measure "--wrapper none is one process's plain training loop: every --world must be 1 (it lists 2)" \
	--case "$tmp/case.json" --framework torch --wrapper none
bad_measure "--zero-grad: only under --framework torch or deepspeed" --case "$tmp/case.json" --zero-grad zeros

# No run, failed or not, left a temporary file behind.
left=$(find "$tmp" -name '.zerosim.tmp*' | head -n 5)
[ -z "$left" ] || fail "temporary files were left behind: $left"

echo "cli_errors: all $n cases passed"
exit 0

#!/bin/sh
# cli_errors — zerosim meets bad input the way a stranger would give it:
# every bad option and every broken file must be refused with
# exit status 2 (1 for a failure at run time: an unwritable folder, a full
# disk), exactly one line on stderr that starts with "zerosim", nothing on
# stdout, never a signal, and an existing output file left byte for byte as
# it was. Then --help and --version, and an interrupted run that must leave
# its --out file untouched and no temporary file behind.
#
# Runs from the build directory (automake sets $srcdir); ZS_BUILDDIR
# overrides where the binary is. Prints each case; stops at the first
# failure; CLI_ERRORS_VERBOSE=1 prints each message too. Exit 0 pass,
# 1 fail, 99 hard error (automake's convention).
set -u

top=${ZS_BUILDDIR:-.}
zerosim=$top/zerosim
srcdir=${srcdir:-.}
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
# and containing PATTERN (a fixed string; empty: anything), and, for
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
		[ -z "$pat" ] || grep -qF -e "$pat" "$tmp/err" ||
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

try 2 "command" # no command at all
try 2 "frobnicate" frobnicate
try 2 "--bogus" --bogus

# ---------------------------------------------------------------------------
# measure: every option's bad values.
bad_measure "--world" --world 0
bad_measure "--world" --world -1
bad_measure "--world" --world abc
bad_measure "--world" --world 1,,2
bad_measure "--world" --world ""
bad_measure "--world" --world 1,
bad_measure "--world" --world 2,2
bad_measure "--world" --world 65537
bad_measure "--world" --world " 2"
bad_measure "--world" --world 0x10
bad_measure "--layers" --layers 64
bad_measure "--layers" --layers 4294967296,4294967296
bad_measure "--layers" --layers 64,0,64
bad_measure "--layers" --layers 64,-1
bad_measure "--layers" --layers 18446744073709551617,2
bad_measure "--layers" --layers 1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25,26,27,28,29,30,31,32,33,34
bad_measure "--steps" --steps 0
bad_measure "--steps" --steps -3
bad_measure "--steps" --steps 2.5
bad_measure "--steps" --steps 99999999999999999999
bad_measure "--batch" --batch 0
bad_measure "--batch" --batch ""
bad_measure "--seed" --seed -1
bad_measure "--seed" --seed 18446744073709551616
bad_measure "--lr" --lr -1
bad_measure "--lr" --lr 0
bad_measure "--lr" --lr 1e-13
bad_measure "--lr" --lr nan
bad_measure "--lr" --lr inf
bad_measure "--lr" --lr 1e999
bad_measure "--lr" --lr 0.1x
bad_measure "--schemes" --schemes zero4
bad_measure "--schemes" --schemes dp,,zero3
bad_measure "--unit" --unit block
bad_measure "--precision" --precision fp8
bad_measure "--optimizer" --optimizer lamb
bad_measure "--jobs" --jobs 0
bad_measure "--jobs" --jobs 65
bad_measure "--jobs" --jobs two
bad_measure "--jobs" --jobs ""
bad_measure "--jobs" -j 1.5
bad_measure "--jobs" --jobs " 2"
bad_measure "--frobnicate" --frobnicate
bad_measure "stray" stray
bad_measure "--world" --world
bad_measure "--out" --layers 4,8,4 --out
bad_measure "--out" --layers 4,8,4 --out ""
bad_measure "--dump-weights" --layers 4,8,4 --dump-weights ""

# Run-time failures: the output cannot be written (exit 1), found before
# the run where possible; the existing file is kept.
try 1 "missing-dir" measure -q --layers 4,8,4 --world 1 --out "$tmp/missing-dir/m.json"
try 1 "" measure -q --layers 4,8,4 --world 1 --out "$keep/m.json"
try 1 "" measure -q --layers 4,8,4 --world 1 --dump-weights "$tmp/missing-dir/w.json"
try 2 "" measure -q --layers 4,8,4 --world 1 --out "$tmp"
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
	try 1 "$full" measure -q --layers 4,8,4 --world 1 --out "$full"
	[ -c "$full" ] || fail "zerosim measure --out $full replaced the device with a file"
	try 1 "$full" theory --layers 4,8,4 --world 1 --out "$full"
	[ -c "$full" ] || fail "zerosim theory --out $full replaced the device with a file"
	try 1 "$full" theory --params 7.5e9 --format text --out "$full"
	[ -c "$full" ] || fail "zerosim theory --format text --out $full replaced the device with a file"
	try 1 "" measure -q --layers 4,8,4 --world 1 --dump-weights "$full"
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
spec sp-format '{"format": "zerosim-sweep/2"}'
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
bad_measure "sp-missing.json" --spec "$tmp/sp-missing.json"
bad_theory "sp-missing.json" --spec "$tmp/sp-missing.json"
for s in notjson trunc empty array noformat format format-case steps-str world-str steps-inf lr-inf \
	layers-inf seed-big steps-frac nested world-empty world-obj world-bool batch0 layers1 layers-huge \
	scheme unit precision optimizer lr-neg nul dir; do
	bad_measure "sp-$s.json" --spec "$tmp/sp-$s.json"
	bad_theory "sp-$s.json" --spec "$tmp/sp-$s.json"
done
try 2 "zerosim-sweep/2, this zerosim reads zerosim-sweep/1" measure -q --spec "$tmp/sp-format.json"

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
bad_measure "case-missing.json" --case "$tmp/case-missing.json"
bad_measure "is a directory" --case "$tmp/sp-dir.json"
printf 'not JSON at all\n' >"$tmp/case-notjson.json"
bad_measure "not valid JSON" --case "$tmp/case-notjson.json"
printf '%s' "$case_ok" | head -c 150 >"$tmp/case-trunc.json"
bad_measure "not valid JSON" --case "$tmp/case-trunc.json"
: >"$tmp/case-empty.json"
bad_measure "case-empty.json" --case "$tmp/case-empty.json"
bad_case c-format 's#zerosim-case/1#zerosim-measured/1#' "this file is format zerosim-measured/1, this zerosim reads zerosim-case/1"
bad_case c-noformat 's#"format": "zerosim-case/1", ##' "format"
bad_case c-layers-str 's#"layers": \[2, 3, 1\]#"layers": "2,3,1"#' "layers"
bad_case c-layers-one 's#"layers": \[2, 3, 1\]#"layers": [2]#' "layers"
bad_case c-layers-zero 's#"layers": \[2, 3, 1\]#"layers": [2, 0, 1]#' "layers"
bad_case c-layers-frac 's#"layers": \[2, 3, 1\]#"layers": [2, 3.5, 1]#' "layers"
bad_case c-layers-huge 's#"layers": \[2, 3, 1\]#"layers": [2, 4294967296, 1]#' "layers"
bad_case c-layers-inf 's#"layers": \[2, 3, 1\]#"layers": [2, 1e999, 1]#' "layers"
bad_case c-world-str 's#"world": 2#"world": "2"#' "world"
bad_case c-world-zero 's#"world": 2#"world": 0#' "world"
bad_case c-world-frac 's#"world": 2#"world": 2.5#' "world"
bad_case c-world-null 's#"world": 2#"world": null#' "world"
bad_case c-world-inf 's#"world": 2#"world": 1e999#' "world"
bad_case c-batch-arr 's#"batch": 1#"batch": [1]#' "batch"
bad_case c-batch-neg 's#"batch": 1#"batch": -1#' "batch"
bad_case c-steps-obj 's#"steps": 1#"steps": {}#' "steps"
bad_case c-steps-big 's#"steps": 1#"steps": 1e300#' "steps"
bad_case c-noweights 's#"weights"#"weightz"#' "weights"
bad_case c-weights-obj 's#"weights": \[[^]]*\]#"weights": {"a": 1}#' "weights"
bad_case c-weights-str 's#0\.05\]#"0.05"]#' "weights"
bad_case c-weights-inf 's#0\.05\]#1e999]#' "weights"
bad_case c-weights-fp32 's#0\.05\]#1e39]#' "weights"
bad_case c-weights-short 's#, 0\.05\]#]#' "weights"
bad_case c-weights-long 's#0\.05\]#0.05, 0.06]#' "weights"
bad_case c-weights-nested 's#0\.05\]#[0.05]]#' "weights"
bad_case c-batches-num 's#"batches": \[\[.*\]\]}#"batches": 7}#' "batches"
bad_case c-batches-steps 's#"steps": 1#"steps": 2#' "batches"
bad_case c-ranks 's#, {"x": \[\[0\.0, -1\.0\]\], "y": \[\[1\.0\]\]}##' "batches[0]"
bad_case c-rank-num 's#{"x": \[\[0\.0, -1\.0\]\], "y": \[\[1\.0\]\]}#3#' "batches[0][1]"
bad_case c-x-missing 's#"x": \[\[1\.0, 2\.0\]\], ##' "batches[0][0]"
bad_case c-x-width 's#\[\[1\.0, 2\.0\]\]#[[1.0]]#' "batches[0][0]"
bad_case c-x-rows 's#\[\[1\.0, 2\.0\]\]#[[1.0, 2.0], [3.0, 4.0]]#' "batches[0][0]"
bad_case c-x-str 's#\[\[1\.0, 2\.0\]\]#"1,2"#' "batches[0][0]"
bad_case c-x-inf 's#\[\[1\.0, 2\.0\]\]#[[1.0, -1e999]]#' "batches[0][0]"
bad_case c-y-rows 's#"y": \[\[0\.5\]\]#"y": [[0.5], [0.5]]#' "batches[0][0]"
bad_case c-y-null 's#"y": \[\[0\.5\]\]#"y": null#' "batches[0][0]"
# Options the case fixes must agree with it.
bad_measure "--world" --case "$tmp/case.json" --world 3
bad_measure "--world" --case "$tmp/case.json" --world 1,2
bad_measure "--steps" --case "$tmp/case.json" --steps 2
bad_measure "--batch" --case "$tmp/case.json" --batch 4
bad_measure "--layers" --case "$tmp/case.json" --layers 2,4,1
# A small file that states a huge batch must be refused before anything
# that size is allocated: a bad file is bad input (2), not out of memory.
awk 'BEGIN {
	printf "{\"format\": \"zerosim-case/1\", \"layers\": [1000000, 1], \"world\": 1,";
	printf " \"batch\": 65536, \"steps\": 1, \"weights\": [";
	for (i = 0; i < 1000001; i++) printf "%s0", (i ? "," : "");
	printf "], \"batches\": [[{\"x\": [[0]], \"y\": [[0]]}]]}\n";
}' >"$tmp/case-huge-batch.json"
bad_measure "batch" --case "$tmp/case-huge-batch.json"

# ---------------------------------------------------------------------------
# theory: the options only it has, and the shared ones.
bad_theory "--params" --params -5
bad_theory "--params" --params 1e400
bad_theory "--params" --params abc
bad_theory "--params" --params 0
bad_theory "--params" --params 2.5
bad_theory "--params" --params nan
bad_theory "--params" --params inf
bad_theory "--params" --params 1e15
bad_theory "--params" --params ""
bad_theory "--params" --params " 7"
bad_theory "--world" --world 0
bad_theory "--world" --world 1,,2
bad_theory "--world" --params 7.5e9 --world abc
bad_theory "--layers" --layers 64
bad_theory "--layers" --layers 4294967296,4294967296
bad_theory "--device-mem" --device-mem "12 parsecs"
bad_theory "--device-mem" --device-mem 12parsecs
bad_theory "--device-mem" --device-mem 0
bad_theory "--device-mem" --device-mem -80GB
bad_theory "--device-mem" --device-mem 1e999GB
bad_theory "--device-mem" --device-mem nanGB
bad_theory "--device-mem" --device-mem ""
bad_theory "--largest-unit" --params 100 --largest-unit 101
bad_theory "--largest-unit" --params 100 --largest-unit -1
bad_theory "--format" --format xml
bad_theory "--schemes" --schemes zero4
bad_theory "--unit" --unit block
bad_theory "--precision" --precision fp8
bad_theory "--optimizer" --optimizer lamb
bad_theory "--batch" --batch 0
bad_theory "--frobnicate" --frobnicate
bad_theory "stray" stray
bad_theory "--params" --params
bad_theory "--out" --params 7.5e9 --out ""
try 1 "missing-dir" theory --params 7.5e9 --out "$tmp/missing-dir/t.json"
try 1 "" theory --params 7.5e9 --out "$keep/t.json"
try 2 "" theory --params 7.5e9 --out "$tmp"

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
# first FILE KEY VALUE OUT: FILE with the first "KEY": value set to VALUE.
first() {
	awk -v key="\"$2\":" -v value="$3" '
		!done && (i = index($0, key)) {
			rest = substr($0, i + length(key))
			sub(/^[^,}]*/, "", rest)
			$0 = substr($0, 1, i - 1) key " " value rest
			done = 1
		}
		{ print }' "$1" >"$4"
	cmp -s "$1" "$4" && fail "first $2: $4 is unchanged"
}
# m-inf: a number that overflows to infinity where a byte count belongs.
first "$m" peak_bytes 1e999 "$tmp/m-inf.json"
first "$m" activations 1e999 "$tmp/m-inf-bd.json"
first "$m" scheme '"zero4"' "$tmp/m-scheme.json"
first "$m" world '"two"' "$tmp/m-world.json"
first "$m" resident_bytes null "$tmp/m-null.json"
first "$m" params 33088 "$tmp/m-params.json"
first "$t" comm_bytes_per_rank_per_step 1e999 "$tmp/t-inf.json"

try 0 "" report --measured "$m" --theory "$t" --template "$template" --no-render --out "$tmp/rep-ok"
bad_report "nothere.json" --measured "$tmp/nothere.json" --theory "$t"
bad_report "nothere.json" --measured "$m" --theory "$tmp/nothere.json"
bad_report "this file is format zerosim-theory/1, this zerosim reads zerosim-measured/1" --measured "$t" --theory "$t"
bad_report "this file is format zerosim-measured/1, this zerosim reads zerosim-theory/1" --measured "$m" --theory "$m"
bad_report "zerosim-sweep/1" --measured "$m" --theory "$srcdir/data/sweep.json"
bad_report "layer" --measured "$m" --theory "$tmp/t-layers.json"
bad_report "batch" --measured "$m" --theory "$tmp/t-batch.json"
bad_report "precision" --measured "$m" --theory "$tmp/t-fp32.json"
bad_report "optimizer" --measured "$m" --theory "$tmp/t-sgd.json"
bad_report "row" --measured "$m" --theory "$tmp/t-rows.json"
bad_report "t-params.json" --measured "$m" --theory "$tmp/t-params.json"
bad_report "m-trunc.json" --measured "$tmp/m-trunc.json" --theory "$t"
bad_report "t-trunc.json" --measured "$m" --theory "$tmp/t-trunc.json"
bad_report "empty.json" --measured "$tmp/empty.json" --theory "$t"
bad_report "m-inf.json" --measured "$tmp/m-inf.json" --theory "$t"
bad_report "m-inf-bd.json" --measured "$tmp/m-inf-bd.json" --theory "$t"
bad_report "zero4" --measured "$tmp/m-scheme.json" --theory "$t"
bad_report "world" --measured "$tmp/m-world.json" --theory "$t"
bad_report "resident_bytes" --measured "$tmp/m-null.json" --theory "$t"
bad_report "params" --measured "$tmp/m-params.json" --theory "$t"
bad_report "t-inf.json" --measured "$m" --theory "$tmp/t-inf.json"
bad_report "sp-dir.json" --measured "$tmp/sp-dir.json" --theory "$t"
bad_report "nothere.tex" --measured "$m" --theory "$t" --template "$tmp/nothere.tex"
try 2 "--out" report --measured "$m" --theory "$t" --template "$template" --no-render
try 2 "--measured" report --theory "$t" --template "$template" --no-render --out "$rep"
bad_report "--frobnicate" --measured "$m" --theory "$t" --frobnicate
bad_report "stray" --measured "$m" --theory "$t" stray
bad_report "--theory" --measured "$m" --theory
# An empty folder name is bad usage; it once made OUT/figures the root
# folder's /figures. Should it ever write there again, what it wrote is
# removed (only when none of it was there before) and the case fails.
root_files="/diff.json /flags.txt /table.tex /findings.tex /flags.tex /zerosim-report.tex /figures"
clean_root=1
for f in $root_files; do
	[ -e "$f" ] && clean_root=0
done
if [ "$clean_root" -eq 1 ]; then
	"$zerosim" report --measured "$m" --theory "$t" --template "$template" --no-render --out "" \
		>"$tmp/out" 2>"$tmp/err" </dev/null
	st=$?
	wrote=
	for f in $root_files; do
		[ -e "$f" ] && wrote="$wrote $f"
	done
	if [ -n "$wrote" ]; then
		rm -f /diff.json /flags.txt /table.tex /findings.tex /flags.tex /zerosim-report.tex \
			/figures/fig[1-5]-*.gp /figures/fig[1-5]-*.dat /figures/fig[1-5]-*.pdf /figures/fig[1-5]-*.png
		rmdir /figures 2>/dev/null
		n=$((n + 1))
		fail "zerosim report --out '' wrote into the root folder:$wrote (removed)"
	fi
	bad_report "--out" --measured "$m" --theory "$t" --out ""
else
	echo "cli_errors: the root folder already has a report file in it: the --out '' case is skipped"
fi

# The output folder cannot be made: a run-time failure.
try 1 "" report --measured "$m" --theory "$t" --template "$template" --no-render --out "$keep/rep"

# ---------------------------------------------------------------------------
# An interrupted run: SIGINT or SIGTERM in the middle of a sweep leaves the
# existing --out file as it was and no temporary file beside it. timeout(1)
# delivers the signal; env --default-signal undoes an inherited "ignore
# SIGINT" (the lot of background jobs of scripts, and so of some CI runs).
# --steps 30 makes the run last long enough to be interrupted.
dflt=
env --default-signal=INT true 2>/dev/null && dflt="env --default-signal=INT,TERM"
if command -v timeout >/dev/null 2>&1; then
	for sig in INT TERM; do
		n=$((n + 1))
		mkdir "$tmp/int-$sig"
		f=$tmp/int-$sig/m.json
		printf 'previous measurement\n' >"$f"
		cp "$f" "$tmp/int-$sig.orig"
		echo "cli_errors: $n: SIG$sig after 1 s: zerosim measure --layers 256,2048,256 --world 1,2,4,8 --steps 30 --out F"
		# shellcheck disable=SC2086 # $dflt is a command prefix or nothing
		timeout -s "$sig" --preserve-status 1 $dflt "$zerosim" measure -q --layers 256,2048,256 --world 1,2,4,8 \
			--steps 30 --out "$f" 2>"$tmp/err"
		st=$?
		[ "$st" -eq 0 ] && fail "the run finished before SIG$sig came; it cannot test an interruption"
		[ "$st" -gt 128 ] || fail "zerosim measure exited $st instead of dying of SIG$sig: $(cat "$tmp/err")"
		cmp -s "$f" "$tmp/int-$sig.orig" || fail "SIG$sig: the interrupted run changed its --out file"
		left=$(ls -A "$tmp/int-$sig")
		[ "$left" = "m.json" ] || fail "SIG$sig: the interrupted run left files behind: $left"
	done
else
	echo "cli_errors: no timeout(1): the interruption case is skipped"
fi

# No run, failed or not, left a temporary file behind.
left=$(find "$tmp" -name '.zerosim.tmp*' | head -n 5)
[ -z "$left" ] || fail "temporary files were left behind: $left"

echo "cli_errors: all $n cases passed"
exit 0

#!/bin/sh
# hostile — nine classes of hostile input, each tried as a
# class (several cases, not one example), on the MLP's inputs and again on
# the transformer's (--model, report --transformer), and the case file that
# says how it trains. cli_errors.sh tries every option's bad values; this file tries
# what a careless or hostile user does with files, limits, signals, paths
# and the environment.
#
# Every failing case must: exit with the status asked, print exactly one
# line on stderr that starts with "zerosim" and holds the message asked
# (which names the culprit), print nothing on stdout for a usage error, and
# leave every file already in the work folder byte for byte as it was, with
# its mode and its kind (a link stays a link). Nothing is written outside
# this test's own temporary folder. No case depends on timing: a signal is
# sent to a run that cannot finish first, once it is seen to be running;
# limits are CPU time and file size, not wall time.
#
# Runs from the build directory (automake sets $srcdir); ZS_BUILDDIR
# overrides where the binary is. A failure names its case and the command.
# Exit 0 pass, 1 fail, 77 skip, 99 hard error (automake's convention).
set -u

top=${ZS_BUILDDIR:-.}
zerosim=$top/zerosim
srcdir=${srcdir:-.}
. "$srcdir/tests/json_edit.sh"
template=$srcdir/report/zerosim-report.tex
if [ ! -x "$zerosim" ]; then
	echo "hostile: $zerosim is not built" >&2
	exit 99
fi
case $zerosim in /*) ;; *) zerosim=$(pwd)/$zerosim ;; esac
case $template in /*) ;; *) template=$(pwd)/$template ;; esac
# The report's default template, from the source tree (a VPATH build has
# none beside the binary).
ZEROSIM_DATADIR=${template%/report/zerosim-report.tex}
export ZEROSIM_DATADIR
tmp=$(mktemp -d "${TMPDIR:-/tmp}/zs-hostile.XXXXXX") || exit 99
trap 'chmod -R u+w "$tmp" 2>/dev/null; rm -rf "$tmp"' EXIT
trap 'exit 99' HUP INT TERM
w=$tmp/w        # the work folder: every file in it is watched
mkdir "$w" || exit 99
cd "$w" || exit 99

n=0
label=
fail() {
	echo "hostile: FAIL (case $n: $label): $*" >&2
	exit 1
}

# What the work folder holds: each entry's kind, mode, link target and
# content digest, in a stable order.
snapshot() {
	find . -mindepth 1 -exec stat -c '%n %F %a %N' {} + | LC_ALL=C sort
	find . -type f -exec md5sum {} + | LC_ALL=C sort
}

# run STATUS PATTERN ARGS...: run `zerosim ARGS` in the work folder, stdin
# from /dev/null. STATUS 0: it must succeed. Otherwise one line on stderr,
# "zerosim..." holding PATTERN (fixed, never empty), nothing on stdout for
# status 2, and the work folder unchanged. timeout(1) only turns a hang (an
# input that blocks) into a failure; it is no part of a pass.
run() {
	want=$1 pat=$2
	shift 2
	n=$((n + 1))
	label="zerosim $*"
	echo "hostile: $n: zerosim $* => $want"
	snapshot >"$tmp/before"
	timeout 300 "$zerosim" "$@" >"$tmp/out" 2>"$tmp/err" </dev/null
	verdict "$?" "$want" "$pat"
}

# verdict GOT WANT PATTERN: the checks of run, on $tmp/out and $tmp/err.
verdict() {
	st=$1 want=$2 pat=$3
	[ "$st" -gt 128 ] && [ "$want" -le 128 ] && fail "died of signal $((st - 128)); stderr: $(cat "$tmp/err")"
	[ "$st" -eq "$want" ] || fail "exited $st, expected $want; stderr: $(cat "$tmp/err")"
	[ "$want" -eq 0 ] && return 0
	[ -n "$pat" ] || fail "the test gives no message to expect"
	[ "$(wc -l <"$tmp/err")" -eq 1 ] || fail "stderr is not exactly one line: $(cat "$tmp/err")"
	grep -q '^zerosim' "$tmp/err" || fail "the message does not start with 'zerosim': $(cat "$tmp/err")"
	grep -qF -e "$pat" "$tmp/err" || fail "the message does not say '$pat': $(cat "$tmp/err")"
	if [ "$want" -eq 2 ] && [ -s "$tmp/out" ]; then
		fail "a usage error printed on stdout: $(head -c 200 "$tmp/out")"
	fi
	snapshot >"$tmp/after"
	cmp -s "$tmp/before" "$tmp/after" ||
		fail "files in the work folder changed: $(diff "$tmp/before" "$tmp/after" | head -n 6)"
	return 0
}

# Wait until process $1 has used some CPU time (it is past its options and
# running), however slow the machine.
wait_running() {
	while :; do
		[ -r "/proc/$1/stat" ] || return 1
		ticks=$(awk '{print $14 + $15}' "/proc/$1/stat" 2>/dev/null)
		[ "${ticks:-0}" -ge 5 ] && return 0
		sleep 0.1
	done
}

no_temporaries() {
	left=$(find "$tmp" -name '.zerosim.tmp*' | head -n 3)
	[ -z "$left" ] || fail "temporary files were left behind: $left"
}

dflt=
env --default-signal=INT true 2>/dev/null && dflt="env --default-signal"

# ---------------------------------------------------------------------------
# Inputs every case may use, made by this binary.
"$zerosim" measure -q --layers 4,8,4 --world 1,2 --out m.json 2>"$tmp/err" &&
	"$zerosim" theory --layers 4,8,4 --world 1,2 --out t.json 2>>"$tmp/err" ||
	{ echo "hostile: cannot make the inputs: $(cat "$tmp/err")" >&2; exit 99; }
printf '{"format": "zerosim-sweep/1", "layers": [4, 8, 4], "world": [1]}\n' >spec.json
printf '{"keep": 1}\n' >keep.json
chmod 640 keep.json
case1='{"format": "zerosim-case/1", "layers": [2, 3, 1], "world": 2, "batch": 1, "steps": 1,
 "weights": [0.1, -0.2, 0.3, 0.4, 0.5, -0.6, 0.0, 0.1, 0.2, 0.7, -0.8, 0.9, 0.05],
 "batches": [[{"x": [[1.0, 2.0]], "y": [[0.5]]}, {"x": [[0.0, -1.0]], "y": [[1.0]]}]]}'
printf '%s\n' "$case1" >case1.json
case2=$(printf '%s' "$case1" | sed 's#zerosim-case/1#zerosim-case/2#; s#"steps": 1,#"steps": 1, "precision": "fp32", "optimizer": "adam", "lr": 0.001, "beta1": 0.9, "beta2": 0.999, "eps": 1e-8,#')
printf '%s\n' "$case2" >case2.json
grep -q '"precision": "fp32"' case2.json || { echo "hostile: cannot make case2.json" >&2; exit 99; }
mkdir rep
"$zerosim" report --measured m.json --theory t.json --template "$template" --no-render --out rep >/dev/null ||
	{ echo "hostile: cannot make a report" >&2; exit 99; }

# ---------------------------------------------------------------------------
# 1. An input that can block: a FIFO with no writer, a device, a folder.
#    timeout(1) only turns a hang into a failure; it is no part of a pass.
mkfifo fifo
for input in fifo /dev/zero .; do
	case $input in
	fifo) msg="fifo: is a FIFO or a pipe, not a regular file" ;;
	/dev/zero) msg="/dev/zero: is a device, not a regular file" ;;
	*) msg=".: is a directory" ;;
	esac
	for args in "measure -q --spec $input" "theory --spec $input" "measure -q --case $input" \
		"report --measured $input --theory t.json --out r1 --no-render" \
		"report --measured m.json --theory $input --out r1 --no-render" \
		"report --measured m.json --theory t.json --template $input --out r1 --no-render"; do
		n=$((n + 1))
		label="zerosim $args"
		echo "hostile: $n: zerosim $args => 2"
		snapshot >"$tmp/before"
		# shellcheck disable=SC2086 # the words of $args are intended
		timeout 120 "$zerosim" $args >"$tmp/out" 2>"$tmp/err" </dev/null
		verdict "$?" 2 "$msg"
	done
done
[ -e r1 ] && fail "a refused report created its folder"

# ---------------------------------------------------------------------------
# 2. Resource limits: a file larger than ulimit -f is a failed write (exit
#    1, one line, the old file kept, no temporary file); a closed pipe ends
#    the run quietly by SIGPIPE; ulimit -t ends it with one line.
cp keep.json big.json
# over_limit ARGS...: each argument the words of one zerosim command line,
# run under ulimit -f 1.
over_limit() {
	for args in "$@"; do
		n=$((n + 1))
		label="ulimit -f 1; zerosim $args"
		echo "hostile: $n: (ulimit -f 1; zerosim $args) => 1"
		snapshot >"$tmp/before"
		# shellcheck disable=SC2086
		(ulimit -f 1 && exec "$zerosim" $args >"$tmp/out" 2>"$tmp/err" </dev/null)
		verdict "$?" 1 "File too large"
		no_temporaries
	done
}
over_limit "measure -q --out big.json" "theory --out big.json" "theory --format text --out big.json" \
	"report --measured m.json --theory t.json --template $template --no-render --out rep"
# Standard output over the limit: the same, said about standard output.
n=$((n + 1))
label="ulimit -f 1; zerosim theory >file"
echo "hostile: $n: (ulimit -f 1; zerosim theory >FILE) => 1"
(ulimit -f 1 && exec "$zerosim" theory >"$tmp/big-stdout" 2>"$tmp/err")
st=$?
: >"$tmp/out"
snapshot >"$tmp/before"
verdict "$st" 1 "cannot write to standard output: File too large"

# SIGPIPE: standard output is a pipe whose reader is gone (made so before
# zerosim starts, so no race): killed by SIGPIPE, nothing on stderr. The
# same when the parent ignores SIGPIPE.
mkfifo "$tmp/pipe"
for ignore in no yes; do
	for args in "theory" "measure -q --layers 4,8,4 --world 1" "--help" \
		"report --measured m.json --theory t.json --template $template --no-render --out rep"; do
		n=$((n + 1))
		label="zerosim $args >closed-pipe (SIGPIPE ignored: $ignore)"
		echo "hostile: $n: zerosim $args >CLOSED-PIPE (parent ignores SIGPIPE: $ignore) => SIGPIPE"
		(
			exec 5<>"$tmp/pipe" 6>"$tmp/pipe" 5<&-
			[ "$ignore" = yes ] && trap '' PIPE
			# shellcheck disable=SC2086
			exec "$zerosim" $args >&6 2>"$tmp/err" </dev/null
		)
		st=$?
		[ "$st" -eq 141 ] || fail "exited $st, expected death by SIGPIPE (141); stderr: $(cat "$tmp/err")"
		[ -s "$tmp/err" ] && fail "SIGPIPE is to end the run quietly, yet stderr says: $(cat "$tmp/err")"
		no_temporaries
	done
done

# ulimit -t: a run that would take hours stops at the CPU limit with one
# line, exit 1, its old output kept and no temporary file.
if [ "$(ulimit -t)" = unlimited ]; then
	n=$((n + 1))
	label="ulimit -t 2; zerosim measure (a long run)"
	echo "hostile: $n: (ulimit -t 2; zerosim measure --steps 1000000 --out keep.json) => 1"
	snapshot >"$tmp/before"
	(ulimit -t 2 && exec "$zerosim" measure -q --layers 64,256,64 --world 2 --steps 1000000 --out keep.json \
		>"$tmp/out" 2>"$tmp/err" </dev/null)
	verdict "$?" 1 "the CPU time limit (ulimit -t) was reached"
	no_temporaries
else
	echo "hostile: a CPU time limit is already set: the ulimit -t case is skipped"
fi

# SIGKILL, SIGINT and SIGTERM in the middle of a run that cannot finish
# first: its output as it was, no temporary file.
for sig in KILL INT TERM; do
	if [ "$sig" = INT ] && [ -z "$dflt" ]; then
		echo "hostile: no env --default-signal: a background job ignores SIGINT; the SIGINT case is skipped"
		continue
	fi
	n=$((n + 1))
	label="SIG$sig to zerosim measure --out keep.json"
	echo "hostile: $n: SIG$sig to a running zerosim measure --out keep.json => killed"
	snapshot >"$tmp/before"
	# shellcheck disable=SC2086 # $dflt is a command prefix or nothing
	$dflt "$zerosim" measure -q --layers 64,256,64 --world 2 --steps 1000000 --out keep.json 2>"$tmp/err" &
	pid=$!
	wait_running "$pid" || fail "the run ended before it could be interrupted: $(cat "$tmp/err")"
	kill -s "$sig" "$pid"
	wait "$pid"
	st=$?
	[ "$st" -gt 128 ] || fail "exited $st instead of dying of SIG$sig: $(cat "$tmp/err")"
	snapshot >"$tmp/after"
	cmp -s "$tmp/before" "$tmp/after" || fail "SIG$sig: the work folder changed: $(diff "$tmp/before" "$tmp/after" | head -n 4)"
	no_temporaries
done

# ---------------------------------------------------------------------------
# 3. No output may replace an input or another output, existing or not.
ln -s spec.json spec-link.json
ln -s case1.json case-link.json
ln m.json m-hard.json
run 2 "--out X and --dump-weights X are the same file" measure -q --layers 4,8,4 --world 1 --out X --dump-weights X
run 2 "--out X and --dump-weights ./X are the same file" measure -q --layers 4,8,4 --world 1 --out X --dump-weights ./X
run 2 "--out rep/../X and --dump-weights X are the same file" measure -q --layers 4,8,4 --world 1 --out rep/../X --dump-weights X
run 2 "--out keep.json and --dump-weights $w/keep.json are the same file" measure -q --layers 4,8,4 --world 1 --out keep.json --dump-weights "$w/keep.json"
ln -s X x-link
run 2 "--out x-link and --dump-weights X are the same file" measure -q --layers 4,8,4 --world 1 --out x-link --dump-weights X
rm x-link
run 2 "--out - and --dump-weights /dev/stdout are the same file" measure -q --layers 4,8,4 --world 1 --out - --dump-weights /dev/stdout
run 2 "--out spec-link.json: is the --spec file" measure -q --spec spec.json --out spec-link.json
run 2 "--out spec.json: is the --spec file" theory --spec spec-link.json --out spec.json
run 2 "--out case-link.json: is the --case file" measure -q --case case1.json --out case-link.json
run 2 "--dump-weights ./case1.json: is the --case file" measure -q --case case1.json --dump-weights ./case1.json
cp m.json rep/diff.json.in
for name in diff.json flags.txt table.tex causes.tex findings.tex flags.tex zerosim-report.tex zerosim-report.pdf \
	figures/fig1-resident.dat gnuplot.log; do
	[ -e "rep/$name" ] || cp m.json "rep/$name"
	run 2 "--measured rep/$name: is a file the report writes in rep" report --measured "rep/$name" --theory t.json --no-render --out rep
done
run 2 "--theory rep/./table.tex: is a file the report writes in ./rep/" report --measured m.json --theory rep/./table.tex --no-render --out ./rep/
cp "$template" rep/tpl.tex
run 2 "--template rep/zerosim-report.tex: is a file the report writes in rep" report --measured m.json --theory t.json --template rep/zerosim-report.tex --no-render --out rep
ln rep/diff.json rep-diff-hard.json
run 2 "--measured rep-diff-hard.json: is a file the report writes in rep" report --measured rep-diff-hard.json --theory t.json --no-render --out rep
# An input beside the outputs under a name the report does not write is fine.
run 0 "" report --measured rep/diff.json.in --theory t.json --template rep/tpl.tex --no-render --out rep
rm rep/diff.json.in rep/tpl.tex rep-diff-hard.json
"$zerosim" report --measured m.json --theory t.json --template "$template" --no-render --out rep >/dev/null

# --out - and --out /dev/stdout: the standard output as it stands,
# appending where the shell opened it for appending.
for dest in - /dev/stdout /dev/fd/1 /proc/self/fd/1; do
	n=$((n + 1))
	label="zerosim theory --out $dest >>log"
	echo "hostile: $n: zerosim theory --params 7.5e9 --out $dest >>LOG => appended"
	printf 'first line\n' >"$tmp/log"
	"$zerosim" theory --params 7.5e9 --out "$dest" >>"$tmp/log" 2>"$tmp/err" || fail "exited $?: $(cat "$tmp/err")"
	[ "$(head -n 1 "$tmp/log")" = "first line" ] || fail "--out $dest replaced the log instead of appending to it"
	grep -q 'zerosim-theory/1' "$tmp/log" || fail "--out $dest wrote nothing into the log"
done

# ---------------------------------------------------------------------------
# 4. One grammar for counts (decimal digits) and one for quantities
#    (decimal or e-notation), everywhere: no hex, sign or white space.
run 2 "--params: '0x10' is not a number" theory --params 0x10
run 2 "--params: '0x1p40' is not a number" theory --params 0x1p40
run 2 "--params: '+7' is not a number" theory --params +7
run 2 "--params: '7 ' is not a number" theory --params '7 '
run 2 "--params: '7e' is not a number" theory --params 7e
run 2 "--params: 'infinity' is not a number" theory --params infinity
run 2 "--largest-unit: '0x10' is not a number" theory --params 100 --largest-unit 0x10
run 2 "--device-mem: '0x50GB' is not a memory size" theory --device-mem 0x50GB
run 2 "--device-mem: '80 GB' is not a memory size: unknown unit ' GB'" theory --device-mem '80 GB'
run 2 "--device-mem: ' 80GB' is not a memory size" theory --device-mem ' 80GB'
run 2 "--device-mem: '1e-300' is not a memory size between 1 byte and 1e18 bytes" theory --device-mem 1e-300
run 2 "--device-mem: '0.5' is not a memory size between 1 byte and 1e18 bytes" theory --device-mem 0.5
run 2 "--device-mem: '2e18' is not a memory size between 1 byte and 1e18 bytes" theory --device-mem 2e18
run 2 "--device-mem: '1.5B' is not a whole number of bytes" theory --device-mem 1.5B
run 2 "--device-mem: '80gb' is not a memory size: unknown unit 'gb'" theory --device-mem 80gb
run 0 "" theory --device-mem 0.5KB
run 2 "--lr: ' 0.1' is not a learning rate" measure -q --lr ' 0.1'
run 2 "--lr: '0.1 ' is not a learning rate" measure -q --lr '0.1 '
run 2 "--lr: '+0.1' is not a learning rate" measure -q --lr +0.1
run 2 "--lr: '0x1p-4' is not a learning rate" theory --lr 0x1p-4
run 2 "--beta1: '1' is not a decay rate of Adam" measure -q --beta1 1
run 2 "--beta2: '-0.1' is not a decay rate of Adam" measure -q --beta2 -0.1
run 2 "--beta2: '0x0.8' is not a decay rate of Adam" theory --beta2 0x0.8
run 2 "--eps: '0' is not Adam's epsilon" measure -q --eps 0
run 2 "--eps: 'nan' is not Adam's epsilon" measure -q --eps nan
run 2 "--seed: '+3' is not a seed" measure -q --seed +3
run 2 "--seed: '0x3' is not a seed" measure -q --seed 0x3
run 2 "--seed: ' 3' is not a seed" theory --seed ' 3'
run 2 "--world: '+2' is not a world size" measure -q --world +2
run 2 "--steps: '1e2' is not a step count" measure -q --steps 1e2
run 2 "--batch: '0x4' is not a batch size" theory --batch 0x4
run 2 "--jobs: '+2' is not a number of jobs" measure -q --jobs +2
run 2 "--layers: ' 8' is not a layer width" measure -q --layers '4, 8'
# The same rules in files: JSON's grammar, whole counts, the same ranges.
for bad in '"steps": 01' '"steps": 1.' '"lr": .5' '"lr": 1.e-3' '"world": [+1]' '"batch": 0x4'; do
	printf '{"format": "zerosim-sweep/1", %s}\n' "$bad" >num.json
	run 2 "num.json: not valid JSON" theory --spec num.json
done
printf '{"format": "zerosim-sweep/1", "steps": 2.5}\n' >num.json
run 2 "num.json: \"steps\": '2.5' is not a step count" measure -q --spec num.json
printf '{"format": "zerosim-sweep/1", "lr": 1e-300}\n' >num.json
run 2 "num.json: \"lr\": '1e-300' is not a learning rate" measure -q --spec num.json
printf '{"format": "zerosim-sweep/1", "beta1": 1}\n' >num.json
run 2 "num.json: \"beta1\": '1' is not a decay rate of Adam" theory --spec num.json
rm num.json

# ---------------------------------------------------------------------------
# 5. Files that break the contract: byte counts whole and below 2^53, params
#    equal to Ψ of layers, strings that reach LaTeX known values.
i=0
for kv in "peak_bytes 1792.5" "peak_bytes 1e300" "peak_bytes 123456789012345678901234567890" \
	"resident_bytes 9007199254740992" "comm_bytes_per_rank_per_step 0.5" "shard_elements 2.5" \
	"activations 0.5" "padded_elements 1e20"; do
	i=$((i + 1))
	# shellcheck disable=SC2086
	set -- $kv
	set_first m.json "$1" "$2" bad$i.json
	run 2 "bad$i.json: runs[0]" report --measured bad$i.json --theory t.json --no-render --out rep
	grep -qF "$1" "$tmp/err" || fail "the message does not name $1: $(cat "$tmp/err")"
done
"$zerosim" measure -q --layers 4,8,4 --world 1,2 --timeline --out mt.json || fail "cannot make mt.json"
set_first mt.json current_bytes 7.25 bad-tl.json
run 2 "bad-tl.json: runs[0].timeline[0].current_bytes is 7.25, not a byte count" report --measured bad-tl.json --theory t.json --no-render --out rep
set_first m.json params 99 bad-psi.json
set_first t.json params 99 bad-psi-t.json
run 2 "bad-psi.json and t.json describe different models: 99 and 76 params" report --measured bad-psi.json --theory t.json --no-render --out rep
run 2 "bad-psi.json: config.params is 99, but its layers have 76 parameters" report --measured bad-psi.json --theory bad-psi-t.json --no-render --out rep
set_first m.json units '[75]' bad-units.json
run 2 "bad-units.json: runs[0]: \"units\" add up to 75 elements, not the model's 76" report --measured bad-units.json --theory t.json --no-render --out rep
set_first m.json precision '"mixed_%$#"' bad-prec.json
set_first t.json precision '"mixed_%$#"' bad-prec-t.json
run 2 "unknown precision 'mixed_%\$#' (mixed, fp32)" report --measured bad-prec.json --theory bad-prec-t.json --no-render --out rep
set_first m.json optimizer '"adam\\\\\\\\input{/etc/passwd}"' bad-opt.json
run 2 "bad-opt.json: config: unknown optimizer" report --measured bad-opt.json --theory t.json --no-render --out rep
set_first m.json optimizer 12 bad-opt2.json
run 2 "bad-opt2.json: config.optimizer is not a string" report --measured bad-opt2.json --theory t.json --no-render --out rep
set_first m.json param 4 bad-bpp.json
set_first t.json param 4 bad-bpp-t.json
run 2 "bad-bpp.json: bytes_per_param is 4, 2, 12, but mixed adam has 2, 2, 12" report --measured bad-bpp.json --theory bad-bpp-t.json --no-render --out rep
rm bad*.json mt.json

# ---------------------------------------------------------------------------
# 6. Numbers that round-trip: seeds are 0..2^53-1; what is written reads
#    back; a message never quotes a number the file does not hold.
run 2 "--seed: '9007199254740992' is not a seed (a whole number 0..2^53-1" measure -q --seed 9007199254740992
run 2 "--seed: '18446744073709551615' is not a seed" measure -q --seed 18446744073709551615
printf '{"format": "zerosim-sweep/1", "seed": 18446744073709551615}\n' >seed.json
run 2 "seed.json: \"seed\" is a whole number of 2^53 or more" measure -q --spec seed.json
grep -q '1844674407370955' "$tmp/err" && fail "the message quotes a number the file does not hold: $(cat "$tmp/err")"
printf '{"format": "zerosim-sweep/1", "seed": 9007199254740993}\n' >seed.json
run 2 "seed.json: \"seed\" is a whole number of 2^53 or more" theory --spec seed.json
n=$((n + 1))
label="the largest seed round-trips"
echo "hostile: $n: zerosim measure --seed 9007199254740991, then as a spec => the same seed, the same run"
"$zerosim" measure -q --layers 4,8,4 --world 1 --seed 9007199254740991 --out "$tmp/s1.json" || fail "exited $?"
grep -q '"seed":[[:space:]]*9007199254740991,' "$tmp/s1.json" || fail "the seed is not written as its digits: $(grep seed "$tmp/s1.json")"
printf '{"format": "zerosim-sweep/1", "seed": 9007199254740991, "layers": [4, 8, 4], "world": [1]}\n' >seed.json
"$zerosim" measure -q --spec seed.json --out "$tmp/s2.json" || fail "the written seed does not read back"
cmp -s "$tmp/s1.json" "$tmp/s2.json" || fail "the seed read back is another run"
printf '{"format": "zerosim-sweep/1", "lr": 0.0001234567890123456789}\n' >lr.json
"$zerosim" measure -q --spec lr.json --layers 4,8,4 --world 1 --out "$tmp/l1.json" || fail "exited $?"
lr=$(sed -n 's/.*"lr":[[:space:]]*\([^,]*\),.*/\1/p' "$tmp/l1.json")
"$zerosim" measure -q --lr "$lr" --layers 4,8,4 --world 1 --out "$tmp/l2.json" || fail "the written lr $lr is refused"
cmp -s "$tmp/l1.json" "$tmp/l2.json" || fail "the written lr $lr is another learning rate"
rm seed.json lr.json

# ---------------------------------------------------------------------------
# 7. Messages name the argument the user typed.
run 2 "unknown option '-lay' (did you mean --layers?)" measure -lay 4
run 2 "unknown option '-measured' (long options take two dashes" report --out d -measured m.json
run 2 "unknown option '--lay' (did you mean --layers?)" theory --lay 4
run 2 "unknown option '--frob'" theory --frob=1
run 2 "unknown option '-Z' in '-qZ'" measure -qZ
run 2 "unknown option '-x'" theory -x
run 2 "option '--out' needs a value" measure -q --out
run 2 "option '-o' needs a value" report --measured m.json -o
run 2 "option '--quiet' takes no value (given '--quiet=yes')" measure --quiet=yes
run 2 "unexpected argument 'stray'" theory --params 7.5e9 stray
run 2 "unexpected argument '--world'" measure -q -- --world 2
run 2 "unexpected argument 'measure'" measure measure
run 2 "--world: '0' is not a world size (1..65536)" theory --params 7.5e9 --world=0
run 0 "" theory -V
run 0 "" report -h
run 0 "" theory -o "$tmp/t-o.json"
run 0 "" measure -qo "$tmp/m-o.json" -j1 --layers 4,8,4 --world 1
[ -s "$tmp/m-o.json" ] || fail "-qo FILE wrote nothing to FILE"

# ---------------------------------------------------------------------------
# 8. The environment: PATH empty or unset, or holding things that are not
#    the renderers; a renderer that cannot start is named.
mkdir -p "$tmp/bin-dir/gnuplot" "$tmp/bin-bad" "$tmp/bin-fail"
printf 'not a program\n' >"$tmp/bin-bad/gnuplot"
chmod 755 "$tmp/bin-bad/gnuplot"
printf '#!/bin/sh\nexit 3\n' >"$tmp/bin-fail/gnuplot"
chmod 755 "$tmp/bin-fail/gnuplot"
n=$((n + 1))
label="PATH=$tmp/bin-bad report"
echo "hostile: $n: PATH=BIN-WITH-A-BAD-GNUPLOT zerosim report => 1, the program named"
PATH=$tmp/bin-bad "$zerosim" report --measured m.json --theory t.json --template "$template" --out "$tmp/r8" \
	>"$tmp/out" 2>"$tmp/err" </dev/null
st=$?
snapshot >"$tmp/before"
verdict "$st" 1 "cannot run gnuplot ($tmp/bin-bad/gnuplot): Exec format error"
n=$((n + 1))
label="PATH=$tmp/bin-fail report"
echo "hostile: $n: PATH=BIN-WITH-A-FAILING-GNUPLOT zerosim report => 1, the program named"
PATH=$tmp/bin-fail "$zerosim" report --measured m.json --theory t.json --template "$template" --out "$tmp/r8" \
	>"$tmp/out" 2>"$tmp/err" </dev/null
verdict "$?" 1 "gnuplot ($tmp/bin-fail/gnuplot) failed (exit status 3); see $tmp/r8/gnuplot.log"
n=$((n + 1))
label="PATH=$tmp/bin-dir report"
echo "hostile: $n: PATH=BIN-WITH-A-FOLDER-NAMED-GNUPLOT zerosim report => 0, not found"
PATH=$tmp/bin-dir "$zerosim" report --measured m.json --theory t.json --template "$template" --out "$tmp/r8" \
	>"$tmp/out" 2>"$tmp/err" </dev/null || fail "exited $?: $(cat "$tmp/err")"
grep -q 'gnuplot not found in PATH' "$tmp/out" || fail "a folder named gnuplot was taken for the program: $(cat "$tmp/out")"
if [ -x /usr/bin/gnuplot ] && [ -x /usr/bin/pdflatex ]; then
	for p in "" unset "$tmp/bin-dir:/usr/bin:/bin"; do
		n=$((n + 1))
		label="PATH='$p' report, rendered"
		echo "hostile: $n: PATH='$p' zerosim report => 0, figures and PDF"
		rm -rf "$tmp/r8"
		if [ "$p" = unset ]; then
			(unset PATH; exec "$zerosim" report --measured m.json --theory t.json --template "$template" \
				--out "$tmp/r8" >"$tmp/out" 2>"$tmp/err" </dev/null)
		else
			PATH=$p "$zerosim" report --measured m.json --theory t.json --template "$template" --out "$tmp/r8" \
				>"$tmp/out" 2>"$tmp/err" </dev/null
		fi
		st=$?
		[ "$st" -eq 0 ] || fail "exited $st: $(cat "$tmp/err")"
		[ -s "$tmp/r8/zerosim-report.pdf" ] || fail "no PDF: $(cat "$tmp/out")"
		[ -s "$tmp/r8/figures/fig1-resident.png" ] || fail "no figure: $(cat "$tmp/out")"
	done
else
	echo "hostile: no /usr/bin/gnuplot and /usr/bin/pdflatex: the rendering PATH cases are skipped"
fi

# ---------------------------------------------------------------------------
# The same classes on the inputs of the transformer work: --model FILE or
# NAME (measure and theory), report --transformer FILE, and the new
# numbers. A tiny config, so that measure runs in milliseconds.
printf '{"model_type": "gpt2", "n_embd": 8, "n_layer": 2, "n_head": 2, "vocab_size": 50, "n_positions": 8}\n' >tiny.json
"$zerosim" theory --model ./tiny.json --world 1,2 --precision fp32 --out tt.json 2>"$tmp/err" ||
	fail "cannot make tt.json: $(cat "$tmp/err")"
# 1. A config or a transformer file that would block, or is no file at all.
for input in ./fifo /dev/zero ./.; do
	case $input in
	./fifo) msg="fifo: is a FIFO or a pipe, not a regular file" ;;
	/dev/zero) msg="/dev/zero: is a device, not a regular file" ;;
	*) msg=".: is a directory" ;;
	esac
	run 2 "$msg" theory --model "$input"
	run 2 "$msg" measure -q --model "$input" --world 1
	run 2 "$msg" report --measured m.json --theory t.json --transformer "$input" --no-render --out rep
done
# A shipped name whose file is a FIFO (ZEROSIM_DATADIR names the folder).
mkdir -p dd/data/models && mkfifo dd/data/models/blocked.json
cp tiny.json dd/data/models/shipped.json
ZEROSIM_DATADIR=$w/dd
run 2 "dd/data/models/blocked.json: is a FIFO or a pipe, not a regular file" theory --model blocked
# 3. The config a --model reads is an input: no output may replace it,
#    whether it is named as a file, through a link, or as a shipped name.
run 2 "--out dd/data/models/shipped.json: is the --model file" theory --model shipped --out dd/data/models/shipped.json
run 2 "--out ./dd/../dd/data/models/shipped.json: is the --model file" measure -q --model shipped --world 1 --steps 1 --out ./dd/../dd/data/models/shipped.json
ZEROSIM_DATADIR=${template%/report/zerosim-report.tex}
ln -s tiny.json tiny-link.json
run 2 "--out tiny.json: is the --model file" measure -q --model ./tiny-link.json --world 1 --steps 1 --out tiny.json
run 2 "--dump-weights tiny-link.json: is the --model file" measure -q --model ./tiny.json --world 1 --steps 1 --out "$tmp/x.json" --dump-weights tiny-link.json
run 2 "--out ./tiny.json: is the --model file" theory --model tiny.json --out ./tiny.json
cp tt.json rep/flags.txt
run 2 "--transformer rep/flags.txt: is a file the report writes in rep" report --measured m.json --theory t.json --transformer rep/flags.txt --no-render --out rep
cp tt.json rep/transformer.tex
run 2 "--transformer rep/transformer.tex: is a file the report writes in rep" report --measured m.json --theory t.json --transformer rep/transformer.tex --no-render --out rep
rm rep/transformer.tex
"$zerosim" report --measured m.json --theory t.json --template "$template" --no-render --out rep >/dev/null
# 2. Resource limits, on the new outputs.
over_limit "theory --model ./tiny.json --out big.json" "measure -q --model ./tiny.json --world 1 --steps 1 --out big.json" \
	"report --measured m.json --theory t.json --transformer tt.json --template $template --no-render --out rep"
# 4. Counts are digits, quantities decimal, on the new options too.
for v in 0x10 ' 8' '8 ' +8 -8 1e3 1.5; do
	run 2 "--seq: '$v' is not a sequence length" theory --model ./tiny.json --seq "$v"
	run 2 "--batch: '$v' is not a batch size" theory --model ./tiny.json --batch "$v"
	run 2 "--ranks-per-node: '$v' is not a number of ranks a node" theory --framework deepspeed --ranks-per-node "$v"
done
for v in 0x10 ' 1' '1 ' -1 nan; do
	run 2 "--ds-reduce-bucket: '$v' is not a number" theory --framework deepspeed --ds-reduce-bucket "$v"
	run 2 "--reserve: '${v}' is not a memory size" theory --model ./tiny.json --device-mem 80GB --reserve "$v"
done
# 5. A config that is ambiguous or out of bounds is refused by name.
tiny='"model_type": "gpt2", "n_layer": 2, "n_head": 2, "vocab_size": 50, "n_positions": 8'
for kv in '"n_embd": 8, "n_embd": 16|the key "n_embd" is given twice' \
	'"n_embd": 8, "model_type": "llama"|the key "model_type" is given twice' \
	'"n_embd": 8.5|"n_embd" must be a whole number' '"n_embd": "8"|"n_embd" must be a whole number' \
	'"n_embd": 1e999|"n_embd" must be a whole number' '"n_embd": -8|"n_embd" must be a whole number' \
	'"n_embd": 0x8|not valid JSON' '"n_embd": 08|not valid JSON (a number such as '"'"'08'"'"' ' '"n_embd": 8, "num_experts": 4|"num_experts": a mixture of experts'; do
	printf '{%s, %s}\n' "$tiny" "${kv%%|*}" >cfg.json
	run 2 "cfg.json: ${kv#*|}" theory --model ./cfg.json
	run 2 "cfg.json: ${kv#*|}" measure -q --model ./cfg.json
done
awk 'BEGIN { for (i = 0; i < 2000; i++) printf "["; for (i = 0; i < 2000; i++) printf "]"; print "" }' >deep.json
run 2 "deep.json: arrays or objects nested deeper than 1000" theory --model ./deep.json
run 2 "deep.json: arrays or objects nested deeper than 1000" report --measured deep.json --theory t.json --no-render --out rep
rm cfg.json deep.json
# 6. A name taken from a file name reads back: the report takes what the
#    theory and measure wrote for a config called 'a b$%.json'.
cp tiny.json 'a b$%.json'
n=$((n + 1))
label="a model file named 'a b\$%.json' through theory, measure and report"
echo "hostile: $n: $label => 0"
"$zerosim" theory --model './a b$%.json' --world 1 --precision fp32 --out "$tmp/tw.json" 2>"$tmp/err" &&
	"$zerosim" measure -q --model './a b$%.json' --world 1 --steps 1 --out "$tmp/mw.json" 2>>"$tmp/err" &&
	"$zerosim" report --measured m.json --theory t.json --transformer "$tmp/tw.json" --transformer "$tmp/mw.json" \
		--template "$template" --no-render --out "$tmp/rw" >/dev/null 2>>"$tmp/err" ||
	fail "refused: $(cat "$tmp/err")"
grep -q '"a_b__"' "$tmp/tw.json" || fail "the model's name is not a_b__ in theory.json"
rm 'a b$%.json'
# 7. An empty file name is said as the option typed, not as a missing "".
for o in --spec --case; do run 2 "$o: the file name is empty" measure -q "$o" ''; done
run 2 "--spec: the file name is empty" theory --spec=
for o in --measured --theory --transformer --template; do
	run 2 "$o: the file name is empty" report --measured m.json --theory t.json --no-render --out rep "$o" ''
done
run 2 "--model: the name is empty" theory --model ''
rm -r tt.json tiny.json tiny-link.json dd

# ---------------------------------------------------------------------------
# 9. What a write does to the file it replaces: the mode is kept, a link
#    is written through (a dangling one creates its target), a read-only
#    file is replaced as mv would; for every output.
for mode in 600 444 751; do
	for args in "theory --params 7.5e9 --out" "measure -q --layers 4,8,4 --world 1 --out" \
		"measure -q --layers 4,8,4 --world 1 --dump-weights"; do
		n=$((n + 1))
		label="$args FILE of mode $mode"
		echo "hostile: $n: zerosim $args FILE (mode $mode) => replaced, mode $mode"
		rm -f "$tmp/moded"
		printf 'old\n' >"$tmp/moded"
		chmod "$mode" "$tmp/moded"
		# shellcheck disable=SC2086
		"$zerosim" $args "$tmp/moded" >/dev/null 2>"$tmp/err" || fail "exited $?: $(cat "$tmp/err")"
		[ "$(stat -c %a "$tmp/moded")" = "$mode" ] || fail "the mode became $(stat -c %a "$tmp/moded")"
		grep -q zerosim "$tmp/moded" || fail "the file was not replaced"
	done
done
ln -s "$tmp/no-folder/t.json" into-nothing
run 1 "cannot write into-nothing: the folder $tmp/no-folder is missing" theory --params 7.5e9 --out into-nothing
run 1 "cannot write into-nothing: the folder $tmp/no-folder is missing" measure -q --layers 4,8,4 --world 1 --out into-nothing
[ -e "$tmp/no-folder" ] && fail "a refused output created the folder its link points into"
rm into-nothing
chmod 600 rep/flags.txt
"$zerosim" report --measured m.json --theory t.json --template "$template" --no-render --out rep >/dev/null 2>"$tmp/err" ||
	fail "report exited $?: $(cat "$tmp/err")"
[ "$(stat -c %a rep/flags.txt)" = 600 ] || fail "report: flags.txt's mode became $(stat -c %a rep/flags.txt)"
for args in "theory --params 7.5e9 --out" "measure -q --layers 4,8,4 --world 1 --dump-weights"; do
	n=$((n + 1))
	label="$args DANGLING-LINK"
	echo "hostile: $n: zerosim $args DANGLING-LINK => the target created, the link kept"
	rm -rf "$tmp/links" && mkdir -p "$tmp/links/sub"
	ln -s sub/target.json "$tmp/links/dangling"
	ln -s dangling "$tmp/links/chain"
	# shellcheck disable=SC2086
	"$zerosim" $args "$tmp/links/chain" >/dev/null 2>"$tmp/err" || fail "exited $?: $(cat "$tmp/err")"
	[ -L "$tmp/links/chain" ] && [ -L "$tmp/links/dangling" ] || fail "a link was replaced by a file"
	grep -q zerosim "$tmp/links/sub/target.json" || fail "the link's target was not written"
	printf 'old\n' >"$tmp/links/sub/target.json"
	chmod 604 "$tmp/links/sub/target.json"
	# shellcheck disable=SC2086
	"$zerosim" $args "$tmp/links/chain" >/dev/null 2>"$tmp/err" || fail "exited $?: $(cat "$tmp/err")"
	[ -L "$tmp/links/chain" ] || fail "a link to an existing file was replaced by a file"
	[ "$(stat -c %a "$tmp/links/sub/target.json")" = 604 ] || fail "the target's mode was not kept"
	grep -q zerosim "$tmp/links/sub/target.json" || fail "the existing target was not written"
done
no_temporaries

# ---------------------------------------------------------------------------
# A case file that says how it trains (zerosim-case/2), and keys a user
# file does not have.
n=$((n + 1))
label="zerosim measure --case case2.json trains in fp32"
echo "hostile: $n: zerosim measure --case case2.json => fp32, the case's lr, seed null"
"$zerosim" measure -q --case case2.json --out "$tmp/c2.json" 2>"$tmp/err" || fail "exited $?: $(cat "$tmp/err")"
grep -q '"precision":[[:space:]]*"fp32"' "$tmp/c2.json" || fail "the case's precision was not used"
grep -q '"seed":[[:space:]]*null' "$tmp/c2.json" || fail "seed is not null in case mode"
"$zerosim" measure -q --case case1.json --precision fp32 --out "$tmp/c1.json" 2>"$tmp/err" || fail "exited $?"
d1=$(grep weights_digest "$tmp/c1.json" | head -n 1)
d2=$(grep weights_digest "$tmp/c2.json" | head -n 1)
[ "$d1" = "$d2" ] || fail "case/2 in fp32 and case/1 with --precision fp32 trained differently"
"$zerosim" measure -q --case case1.json --out "$tmp/c1m.json" 2>"$tmp/err" || fail "case/1 is no longer read"
grep -q '"precision":[[:space:]]*"mixed"' "$tmp/c1m.json" || fail "case/1 without settings is not trained as before"
run 0 "" measure -q --case case2.json --precision fp32 --lr 0.001 --eps 1e-8
run 2 "--precision mixed disagrees with the case file's precision fp32" measure -q --case case2.json --precision mixed
run 2 "--lr 0.01 disagrees with the case file's lr 0.001" measure -q --case case2.json --lr 0.01
run 2 "--beta2 0.99 disagrees with the case file's beta2 0.999" measure -q --case case2.json --beta2 0.99
run 2 "--optimizer sgd disagrees with the case file's optimizer adam" measure -q --case case2.json --optimizer sgd
printf '{"format": "zerosim-sweep/1", "precision": "mixed"}\n' >prec.json
# (the spec's setting named as the spec's key: it once said --precision)
run 2 "prec.json's \"precision\" mixed disagrees with the case file's precision fp32" measure -q --spec prec.json --case case2.json
rm prec.json
run 2 "--seed is not used with --case" measure -q --case case2.json --seed 3
# bad_case NAME SED PATTERN: case2.json changed by SED must be refused.
bad_case() {
	sed "$2" case2.json >"$1.json"
	cmp -s case2.json "$1.json" && fail "bad_case $1: the sed expression changed nothing"
	run 2 "$3" measure -q --case "$1.json"
	rm "$1.json"
}
bad_case cv-prec 's#"precision": "fp32"#"precision": "fp16"#' "cv-prec.json: the case's \"precision\": unknown precision 'fp16'"
bad_case cv-lr 's#"lr": 0.001#"lr": "0.001"#' "cv-lr.json: the case's \"lr\" is not a number"
bad_case cv-lr0 's#"lr": 0.001#"lr": 0#' "cv-lr0.json: the case's \"lr\": '0' is not a learning rate"
bad_case cv-beta 's#"beta1": 0.9#"beta1": 1.5#' "cv-beta.json: the case's \"beta1\": '1.5' is not a decay rate"
bad_case cv-sgd 's#"optimizer": "adam"#"optimizer": "sgd"#' "cv-sgd.json: the case trains sgd but gives Adam's beta1, beta2 or eps"
bad_case cv-unknown 's#"steps": 1,#"steps": 1, "unit": "layer",#' "cv-unknown.json: unknown key \"unit\" in the case"
bad_case cv-twice 's#"steps": 1,#"steps": 1, "steps": 1,#' "cv-twice.json: the case gives the key \"steps\" twice"
bad_case cv-model 's#"steps": 1,#"steps": 1, "model": "gpt2",#' "cv-model.json: the case mixes an MLP's \"layers\" and \"batches\" with a transformer's"
bad_case cv-tokens 's#"steps": 1,#"steps": 1, "tokens": [],#' "cv-tokens.json: the case mixes an MLP's \"layers\" and \"batches\" with a transformer's"
bad_case cv-side 's#"weights": \[[^]]*\]#"weights": {"file": "w.f32"}#' "cv-side.json: the case's weights has no \"count\""
# A transformer's case (--write-case) trains the run that wrote it, bit
# for bit, in every scheme and unit; its weights side file is an input
# that must not block either (a FIFO, a device, a folder).
printf '{"model_type": "llama", "hidden_size": 16, "intermediate_size": 24, "num_hidden_layers": 2, %s\n' \
	'"num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 32, "max_position_embeddings": 8}' >tiny.json
n=$((n + 1))
label="a transformer's case reproduces its run"
echo "hostile: $n: zerosim measure --model tiny.json --write-case tcase.json, then --case tcase.json => the same digests"
"$zerosim" measure -q --model tiny.json --seq 6 --batch 2 --world 3 --steps 2 --precision fp32 --unit model,layer \
	--recompute selective --write-case tcase.json --out "$tmp/tseed.json" 2>"$tmp/err" || fail "exited $?: $(cat "$tmp/err")"
[ -f tcase.f32 ] || fail "--write-case tcase.json wrote no tcase.f32"
"$zerosim" measure -q --case tcase.json --unit model,layer --out "$tmp/tcased.json" 2>"$tmp/err" ||
	fail "exited $?: $(cat "$tmp/err")"
grep weights_digest "$tmp/tseed.json" >"$tmp/d1"
grep weights_digest "$tmp/tcased.json" >"$tmp/d2"
[ "$(wc -l <"$tmp/d1")" -eq 8 ] && [ "$(sort -u "$tmp/d1" | wc -l)" -eq 1 ] || fail "not one digest over 8 runs"
cmp -s "$tmp/d1" "$tmp/d2" || fail "the case trained other weights than the run that wrote it"
grep -q '"recompute":[[:space:]]*"selective"' "$tmp/tcased.json" || fail "the case's recompute was not used"
ln -s /dev/zero zero.f32 && mkfifo side-fifo.f32 && mkdir side-dir.f32 || exit 99
for side in side-fifo.f32 zero.f32 side-dir.f32; do
	case $side in
	side-fifo.f32) msg="side-fifo.f32: is a FIFO or a pipe, not a regular file" ;;
	zero.f32) msg="zero.f32: is a device, not a regular file" ;;
	*) msg="side-dir.f32: is a directory" ;;
	esac
	sed "s#\"tcase.f32\"#\"$side\"#" tcase.json >tside.json
	cmp -s tcase.json tside.json && fail "cannot point the case at $side"
	n=$((n + 1))
	label="zerosim measure --case tside.json (weights $side)"
	echo "hostile: $n: $label => 2"
	snapshot >"$tmp/before"
	timeout 120 "$zerosim" measure -q --case tside.json >"$tmp/out" 2>"$tmp/err" </dev/null
	verdict "$?" 2 "tside.json: the case's weights file $msg"
done
rm -r tside.json zero.f32 side-fifo.f32 side-dir.f32 tiny.json tcase.json tcase.f32
bad_case cv-xz 's#"y": \[\[0.5\]\]#"y": [[0.5]], "z": 1#' "cv-xz.json: the case's batches[0][0] has the unknown key \"z\" (x, y)"
bad_case cv-v1 's#zerosim-case/2#zerosim-case/1#' "cv-v1.json: unknown key \"precision\" in a zerosim-case/1 file"
bad_case cv-v5 's#zerosim-case/2#zerosim-case/5#' "cv-v5.json: this file is format zerosim-case/5, this zerosim reads zerosim-case/4 or zerosim-case/3 or zerosim-case/2 or zerosim-case/1"
# LoRA's adapters are a transformer's
bad_case cv-lora 's#"steps": 1,#"steps": 1, "lora": {},#' "cv-lora.json: \"lora\" in an MLP's case (LoRA adapts a transformer's linear layers)"
# zerosim-case/3's freeze: not in a /2 file, nor in an MLP's case
bad_case cv-freeze2 's#"steps": 1,#"steps": 1, "freeze": "embeddings",#' "cv-freeze2.json: unknown key \"freeze\" in a zerosim-case/2 file (frozen parameters are zerosim-case/3's)"
bad_case cv-freeze3 's#zerosim-case/2#zerosim-case/3#; s#"steps": 1,#"steps": 1, "freeze": "embeddings",#' "cv-freeze3.json: \"freeze\" in an MLP's case (--freeze names a transformer's parameters)"
for kv in '"unit": ["layer"]|unknown key "unit" (did you mean "units"?)' \
	'"scheme": ["dp"]|unknown key "scheme" (did you mean "schemes"?)' \
	'"layer": [4, 8]|unknown key "layer"' '"Steps": 3|unknown key "Steps"' \
	'"steps": 3, "steps": 4|the key "steps" is given twice' \
	'"world": "1,2"|"world" is not an array of numbers' \
	'"schemes": ["dp,zero1"]|"schemes" is not an array of strings' '"lr": "0.1"|"lr" is not a number'; do
	printf '{"format": "zerosim-sweep/1", %s}\n' "${kv%%|*}" >key.json
	run 2 "key.json: ${kv#*|}" measure -q --spec key.json
	run 2 "key.json: ${kv#*|}" theory --spec key.json
done
rm key.json
# Files zerosim writes keep ignoring keys they do not know.
sed 's#"format":[[:space:]]*"zerosim-measured/1",#"format": "zerosim-measured/1", "from_the_future": {"x": 1},#' m.json >m-future.json
grep -q from_the_future m-future.json || fail "cannot add a key to m.json"
run 0 "" report --measured m-future.json --theory t.json --template "$template" --no-render --out "$tmp/r-future"

no_temporaries
echo "hostile: all $n cases passed"
exit 0

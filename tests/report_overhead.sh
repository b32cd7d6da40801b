#!/bin/sh
# report_overhead — zerosim report on a measurement made under MPI (the
# fuzz corpus's valid-4-8-4-model-mpi.json, mpirun -np 2 --world 2): the
# process overhead, OS peak minus the tracked peaks of the process's ranks
# per rank, worked by hand from that file for dp (process 0: 11448320 -
# 1792 = 11446528 B; process 1: 11304960 - 1792, less) and zero3 (11530240
# - 1488 = 11528752 B); one line per run in flags.txt. Then per_rank
# arrays that do not match N are refused in one line, exit 2. Needs no MPI.
set -u
zerosim=${ZS_BUILDDIR:-.}/zerosim
corpus=${srcdir:-.}/tests/fuzz/corpus
measured=$corpus/measured/valid-4-8-4-model-mpi.json
theory=$corpus/theory/valid-4-8-4-model-layer.json
tmp=$(mktemp -d "${TMPDIR:-/tmp}/zs-overhead.XXXXXX") || exit 99
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
report() { ZEROSIM_DATADIR=${ZEROSIM_DATADIR:-${srcdir:-.}} "$zerosim" report --no-render "$@" 2>"$tmp/err" >/dev/null; }

report --measured "$measured" --theory "$theory" --out "$tmp/r" || fail "zerosim report: $(cat "$tmp/err")"
[ "$(grep -c '^process overhead: ' "$tmp/r/flags.txt")" -eq 4 ] || fail "not one process overhead line per run"
grep -q '^process overhead: dp N=2 unit=model: 11.4 MB per rank (process 0 of 2: ' "$tmp/r/flags.txt" ||
	fail "dp's line: $(grep '^process overhead: dp' "$tmp/r/flags.txt")"
tr -d ' \t\n' <"$tmp/r/diff.json" >"$tmp/flat"
grep -q '"scheme":"dp","world":2,"unit":"model","process":0,"ranks":1,"os_peak_bytes":11448320,"tracked_peak_bytes":1792,"overhead_bytes_per_rank":11446528' "$tmp/flat" ||
	fail "diff.json's dp entry is not the one worked by hand"
grep -q '"scheme":"zero3","world":2,"unit":"model","process":0,.*"overhead_bytes_per_rank":11528752' "$tmp/flat" ||
	fail "diff.json's zero3 entry is not the one worked by hand"
grep -q 'Process overhead (OS' "$tmp/r/flags.tex" || fail "flags.tex has no process overhead paragraph"

# One entry short: refused, one line, exit 2.
sed 's/"os_peak_bytes":\[11448320,11304960\]/"os_peak_bytes":[11448320]/' "$measured" >"$tmp/short.json"
cmp -s "$measured" "$tmp/short.json" && fail "the edit did not apply"
report --measured "$tmp/short.json" --theory "$theory" --out "$tmp/r2"
status=$?
[ "$status" -eq 2 ] || fail "a short os_peak_bytes: exit $status, not 2"
[ "$(wc -l <"$tmp/err")" -eq 1 ] && grep -q 'os_peak_bytes' "$tmp/err" || fail "not one line naming it: $(cat "$tmp/err")"
echo "process overhead: as worked by hand; a bad per_rank refused"

#!/bin/sh
# mpi_measure — `mpirun -np P zerosim measure --backend mpi --world N` for
# (P, N) = (4, 4), (2, 4), (3, 3), (2, 8), both units: every run's resident,
# peak, breakdowns, comm, losses and weights digest equal to the in-process
# run's, and per_rank.os_peak_bytes present for every rank and never below
# its tracked peak (tests/mpi_agree.c). Then a sweep with world sizes the
# processes do not divide (skipped, said so on stderr) and a single such N
# (refused in one line, exit 2).
set -u
. "${srcdir:-.}/tests/mpi_env.sh"
zerosim=$top/zerosim
agree=$top/tests/mpi_agree
tmp=$(mktemp -d "${TMPDIR:-/tmp}/zs-mpi.XXXXXX") || exit 99
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

for pn in "4 4" "2 4" "3 3" "2 8"; do
	set -- $pn
	echo "mpirun -np $1 zerosim measure --backend mpi --world $2 --unit model,layer"
	"$zerosim" measure --world "$2" --unit model,layer --quiet --out "$tmp/ip.json" || fail "in-process N=$2"
	$mpirun -np "$1" "$zerosim" measure --backend mpi --world "$2" --unit model,layer --quiet \
		--out "$tmp/mpi.json" || fail "mpirun -np $1, N=$2"
	"$agree" "$tmp/ip.json" "$tmp/mpi.json" 8 || fail "P=$1 N=$2: the MPI run differs from the in-process one"
done

echo "mpirun -np 2 zerosim measure --backend mpi --world 1,2,3,4: N=1 and N=3 skipped"
"$zerosim" measure --world 2,4 --quiet --out "$tmp/ip.json" || fail "in-process N=2,4"
$mpirun -np 2 "$zerosim" measure --backend mpi --world 1,2,3,4 --quiet --out "$tmp/mpi.json" 2>"$tmp/err" ||
	fail "the sweep with N=1,2,3,4 over 2 processes"
grep -q '^zerosim measure: skipping N=1: ' "$tmp/err" || fail "no line saying N=1 was skipped"
grep -q '^zerosim measure: skipping N=3: ' "$tmp/err" || fail "no line saying N=3 was skipped"
[ "$(grep -c '^zerosim' "$tmp/err")" -eq 2 ] || fail "not exactly two skip lines: $(cat "$tmp/err")"
"$agree" "$tmp/ip.json" "$tmp/mpi.json" 8 || fail "the sweep's runs differ from the in-process ones"

echo "zerosim report on it: the process overhead (OS - tracked) of every run"
"$zerosim" theory --world 2,4 --out "$tmp/theory.json" || fail "zerosim theory"
ZEROSIM_DATADIR=${ZEROSIM_DATADIR:-$srcdir} "$zerosim" report --no-render --measured "$tmp/mpi.json" \
	--theory "$tmp/theory.json" --out "$tmp/report" >/dev/null || fail "zerosim report on the MPI file"
[ "$(grep -c '^process overhead: .* MB per rank (process [01] of 2: peak RSS' "$tmp/report/flags.txt")" -eq 8 ] ||
	fail "flags.txt does not show the process overhead of all 8 runs"
grep -q 'Process overhead (OS' "$tmp/report/flags.tex" || fail "flags.tex has no process overhead paragraph"

echo "mpirun -np 2 zerosim measure --backend mpi --world 3: refused"
echo keep >"$tmp/old.json"
$mpirun -np 2 "$zerosim" measure --backend mpi --world 3 --out "$tmp/old.json" >/dev/null 2>"$tmp/err"
status=$?
[ "$status" -eq 2 ] || fail "--world 3 over 2 processes: exit status $status, not 2"
[ "$(grep -c '^zerosim' "$tmp/err")" -eq 1 ] || fail "not one zerosim line: $(cat "$tmp/err")"
grep -q 'cannot share 3 ranks evenly' "$tmp/err" || fail "the line does not say why: $(cat "$tmp/err")"
[ "$(cat "$tmp/old.json")" = keep ] || fail "the refused run touched its --out file"
echo "all MPI measure checks passed"

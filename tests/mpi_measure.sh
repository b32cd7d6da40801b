#!/bin/sh
# mpi_measure — `mpirun -np P zerosim measure --backend mpi` against the
# in-process run of the same options, field by field (tests/mpi_agree.c:
# every field of the in-process file equal, resident, peak, breakdowns,
# per-rank figures, host bytes, collectives, losses, weights digest,
# timeline and its block ids, the caching allocator's replay; but backend
# and processes; per_rank.os_peak_bytes present for
# every rank and never below its tracked peak): the paper's schedule at
# (P, N) = (4, 4), (2, 4), (3, 3), (2, 8); torch's and DeepSpeed's with
# their options, and the transformers, at N = 2 and 4 over 2 processes, 3
# over 3 and 4 over 4. Then a sweep with world sizes the processes do not
# divide (skipped, said so on stderr) and a single such N (refused in one
# line, exit 2). A transformer's case file, and each process holding its
# own ranks' buffers only (the peak RSS of a process with one rank and with
# two).
set -u
. "${srcdir:-.}/tests/mpi_env.sh"
zerosim=$top/zerosim
agree=$top/tests/mpi_agree
models=${srcdir:-.}/report/models
tmp=$(mktemp -d "${TMPDIR:-/tmp}/zs-mpi.XXXXXX") || exit 99
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

# same P WORLDS RUNS OPTION...: the runs of the options over P processes
# equal to the in-process ones (RUNS of them).
same() {
	p=$1 w=$2 runs=$3
	shift 3
	echo "mpirun -np $p zerosim measure --backend mpi --world $w $*"
	"$zerosim" measure --world "$w" --quiet --out "$tmp/ip.json" "$@" </dev/null || fail "in-process N=$w $*"
	$mpirun -np "$p" "$zerosim" measure --backend mpi --world "$w" --quiet --out "$tmp/mpi.json" "$@" </dev/null ||
		fail "mpirun -np $p, N=$w $*"
	"$agree" "$tmp/ip.json" "$tmp/mpi.json" "$runs" "$p" ||
		fail "P=$p N=$w $*: the MPI run differs from the in-process one"
}

# across P WORLDS_PER_P OPTION...: same at N = 2 and 4 over 2 processes,
# 3 over 3 and 4 over 4, for options giving R runs per world size.
across() {
	r=$1
	shift
	same 2 2,4 $((2 * r)) "$@"
	same 3 3 "$r" "$@"
	same 4 4 "$r" "$@"
}

for pn in "4 4" "2 4" "3 3" "2 8"; do
	set -- $pn
	same "$1" "$2" 8 --unit model,layer
done

# torch: DDP's buckets (several at --bucket-cap 0.25 on a 1.3 MB model),
# ZeroRedundancyOptimizer's broadcasts from each tensor's owner, FSDP's
# kept units, prefetch and mixed precision; each rank's blocks replayed
# through the caching allocator in the process that holds it.
across 8 --framework torch --unit model,layer --prefetch backward-pre --allocator cuda
across 8 --framework torch --unit model,layer --precision fp32 --optimizer sgd
across 2 --framework torch --precision fp32 --layers 64,512,512,64 --bucket-cap 0.25 --schemes dp,zero1
# DeepSpeed: its buckets and fp32 partitions; ZeRO-3 persisting everything
# (its default on this model) and partitioning everything, with small
# buckets; the optimizer offloaded.
across 8 --framework deepspeed --unit model,layer --timeline --allocator cuda --alloc-conf expandable_segments:True
across 8 --framework deepspeed --unit model,layer --precision fp32 --ds-persist 0 --ds-reduce-bucket 20000 \
	--ds-overlap-comm on --ds-prefetch-bucket 1000
across 4 --framework deepspeed --unit model,layer --schemes zero1,zero2 --offload optimizer
# The transformers: tied embeddings (GPT-2) and not (Llama), recomputation.
across 4 --model "$models/gpt2-tiny.json" --seq 16 --batch 2 --steps 2 --precision mixed
across 8 --model "$models/llama-tiny.json" --seq 16 --batch 2 --steps 2 --unit model,layer --recompute selective
# DeepSpeed's ZeRO-3 on a transformer, module by module: partitioned, small
# buckets, the params offloaded.
across 1 --framework deepspeed --schemes zero3 --model "$models/gpt2-tiny.json" --seq 16 --batch 2 --steps 2 \
	--precision mixed --ds-persist 100 --ds-reduce-bucket 3000
across 1 --framework deepspeed --schemes zero3 --model "$models/llama-tiny.json" --seq 16 --batch 1 --steps 2 \
	--precision fp32 --ds-persist 100 --offload params
# A transformer's case, read by every process.
"$zerosim" measure --quiet --model "$models/gpt2-tiny.json" --seq 16 --batch 2 --steps 2 --world 4 \
	--write-case "$tmp/case.json" --out "$tmp/ip.json" </dev/null || fail "--write-case"
$mpirun -np 2 "$zerosim" measure --backend mpi --quiet --case "$tmp/case.json" --out "$tmp/mpi.json" </dev/null ||
	fail "mpirun -np 2 zerosim measure --case (a transformer's)"
"$zerosim" measure --quiet --case "$tmp/case.json" --out "$tmp/ip.json" </dev/null || fail "measure --case"
"$agree" "$tmp/ip.json" "$tmp/mpi.json" 4 2 || fail "the transformer's case: the MPI run differs"

# Each process holds its own ranks' buffers only: on a 4.5M-parameter
# model, a process holding ranks 0-1 peaks above one holding rank 0 alone
# by at least half of what rank 1 holds (tests/mpi_agree.c --alone).
for opts in "--framework torch --schemes dp,zero1,zero3" "--framework deepspeed --schemes zero2 --ds-reduce-bucket 1e6"; do
	for p in 2 4; do
		# shellcheck disable=SC2086
		$mpirun -np $p "$zerosim" measure --backend mpi --quiet --world 4 --layers 64,2048,2048,64 $opts \
			--out "$tmp/alone$p.json" </dev/null || fail "mpirun -np $p, $opts, 4.5M parameters"
	done
	"$agree" --alone "$tmp/alone2.json" "$tmp/alone4.json" || fail "$opts: a process holds more than its ranks"
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

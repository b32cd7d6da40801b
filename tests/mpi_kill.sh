#!/bin/sh
# mpi_kill — a rank killed in the middle of an MPI job: the job ends with a
# non-zero status within seconds, with one line of zerosim's naming the
# ranks the dead process held (mpirun adds its own lines), the previous
# --out file byte for byte as it was, and no temporary file left beside
# it. Once with MPI process 1 killed, once with process 0, the writer.
# Then one process that fails on its own and says why (DeepSpeed's reduce
# buckets do not fit its address space, ulimit -v): that line only, its
# end not reported again as a death.
set -u
. "${srcdir:-.}/tests/mpi_env.sh"
zerosim=$top/zerosim
tmp=$(mktemp -d "${TMPDIR:-/tmp}/zs-kill.XXXXXX") || exit 99
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

# The previous measurement, which the killed job must leave alone.
"$zerosim" measure --world 2 --schemes dp --quiet --out "$tmp/prev.json" || fail "the first measurement"

# The MPI process with rank $1 among mpirun's children, once it runs.
child_of_rank() {
	i=0
	while [ $i -lt 100 ]; do
		for pid in $(ps -o pid= --ppid "$launcher_pid" 2>/dev/null); do
			if tr '\0' '\n' <"/proc/$pid/environ" 2>/dev/null | grep -qx "OMPI_COMM_WORLD_RANK=$1"; then
				echo "$pid"
				return 0
			fi
		done
		sleep 0.1
		i=$((i + 1))
	done
	return 1
}

for victim in 1 0; do
	echo "mpirun -np 2 zerosim measure --backend mpi --world 4 ..., MPI process $victim killed"
	mkdir "$tmp/out"
	cp "$tmp/prev.json" "$tmp/out/measured.json"
	# Long enough to be killed in the middle: many steps of a mid-size model.
	$mpirun -np 2 "$zerosim" measure --backend mpi --layers 256,1024,256 --world 4 --steps 100000 --quiet \
		--out "$tmp/out/measured.json" >/dev/null 2>"$tmp/err" &
	launcher_pid=$!
	pid=$(child_of_rank $victim) || { kill "$launcher_pid"; fail "MPI process $victim never started"; }
	sleep 1
	kill -KILL "$pid"
	# It must end on its own; after 30 s it is a hang.
	i=0
	while kill -0 "$launcher_pid" 2>/dev/null && [ $i -lt 300 ]; do
		sleep 0.1
		i=$((i + 1))
	done
	if kill -0 "$launcher_pid" 2>/dev/null; then
		kill -KILL "$launcher_pid"
		fail "the job was still running 30 s after MPI process $victim was killed"
	fi
	wait "$launcher_pid"
	status=$?
	echo "  ended with status $status after $((i / 10)).$((i % 10)) s"
	[ "$status" -ne 0 ] || fail "the job ended with status 0 after MPI process $victim was killed"
	lines=$(grep -c '^zerosim' "$tmp/err")
	[ "$lines" -eq 1 ] || { cat "$tmp/err" >&2; fail "$lines lines of zerosim's, not one"; }
	want="ranks $((victim * 2))-$((victim * 2 + 1)) (MPI process $victim of 2, pid $pid) ended"
	grep '^zerosim' "$tmp/err" | grep -qF "$want" || { cat "$tmp/err" >&2; fail "the line does not say '$want'"; }
	echo "  $(grep '^zerosim' "$tmp/err")"
	cmp -s "$tmp/prev.json" "$tmp/out/measured.json" || fail "the previous measured.json was changed"
	[ "$(ls -A "$tmp/out")" = measured.json ] || fail "files left beside it: $(ls -A "$tmp/out")"
	rm -rf "$tmp/out"
done

echo "mpirun -np 2 zerosim measure --backend mpi --framework deepspeed --world 8, process 1 under ulimit -v"
cp "$tmp/prev.json" "$tmp/m.json"
set -- measure --backend mpi --framework deepspeed --schemes zero2 --world 8 --quiet --out "$tmp/m.json"
# four ranks' 1 GB buckets, mapped, in 3 GB of address space
$mpirun -np 1 "$zerosim" "$@" : -np 1 sh -c 'ulimit -v 3000000 && exec "$0" "$@"' "$zerosim" "$@" \
	</dev/null >/dev/null 2>"$tmp/err"
status=$?
[ "$status" -ne 0 ] || fail "the job ended with status 0"
lines=$(grep -c '^zerosim' "$tmp/err")
[ "$lines" -eq 1 ] || { cat "$tmp/err" >&2; fail "$lines lines of zerosim's, not one"; }
grep -q "^zerosim: cannot map DeepSpeed's reduce bucket 1 of rank [4-7] of 8" "$tmp/err" ||
	{ cat "$tmp/err" >&2; fail "the line is not process 1's own"; }
echo "  $(grep '^zerosim' "$tmp/err")"
cmp -s "$tmp/prev.json" "$tmp/m.json" || fail "the previous measured.json was changed"
echo "a killed rank ends the job, names its ranks and leaves the output alone; a failing one says why, once"

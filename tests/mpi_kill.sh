#!/bin/sh
# mpi_kill — a rank killed in the middle of an MPI job: the job ends with a
# non-zero status within seconds, with one line of zerosim's naming the
# ranks the dead process held (mpirun adds its own lines), the previous
# --out file byte for byte as it was, and no temporary file left beside
# it. Once with MPI process 1 killed, once with process 0, the writer.
# Then one process that fails on its own and says why (DeepSpeed's reduce
# buckets do not fit its address space, ulimit -v): that line only, its
# end not reported again as a death. Then across two hosts (network
# namespaces, tests/mpi_netns.sh), two processes a host: process 3 killed
# on the far host, then the writer on the near one; and one process a host,
# the far one killed. Every time, every process of the job gone afterwards,
# on both hosts (which process the lines name there: below). Where
# namespaces cannot be made, the part across hosts is skipped, saying so (a
# failure under ZS_REQUIRE_NETNS=1).
set -u
. "${srcdir:-.}/tests/mpi_env.sh"
. "${srcdir:-.}/tests/mpi_netns.sh"
zerosim=$top/zerosim
tmp=$(mktemp -d "${TMPDIR:-/tmp}/zs-kill.XXXXXX") || exit 99
trap 'netns_down; rm -rf "$tmp"' EXIT
netns_traps
fail() { echo "FAIL: $*" >&2; exit 1; }

# The previous measurement, which the killed job must leave alone.
"$zerosim" measure --world 2 --schemes dp --quiet --out "$tmp/prev.json" || fail "the first measurement"

# kill_one HOSTS P WORLD VICTIM: a job of P processes over WORLD ranks
# (HOSTS 1: mpirun here; 2: P/2 processes on each of two hosts), MPI
# process VICTIM killed in the middle. The processes are found by a
# variable of their environment, ZS_MARK, unique to the job (mpirun -x
# passes it to the far host): the far host's are not mpirun's children.
kill_one() {
	hosts=$1 p=$2 world=$3 victim=$4
	export ZS_MARK="zs-kill-$$-$hosts-$p-$victim"
	mkdir "$tmp/out"
	cp "$tmp/prev.json" "$tmp/out/measured.json"
	# Long enough to be killed in the middle: many steps of a mid-size model.
	set -- "$zerosim" measure --backend mpi --layers 256,1024,256 --world "$world" --steps 100000 --quiet \
		--out "$tmp/out/measured.json"
	if [ "$hosts" -eq 1 ]; then
		$mpirun -x ZS_MARK -np "$p" "$@" >/dev/null 2>"$tmp/err" &
		launcher_pid=$!
	else
		netns_start $((p / 2)) -x ZS_MARK "$@" >/dev/null 2>"$tmp/err"
		launcher_pid=$netns_job
	fi
	i=0
	while [ $i -lt 100 ] && [ "$(mpi_marked "ZS_MARK=$ZS_MARK" | wc -l)" -ne "$p" ]; do
		sleep 0.1
		i=$((i + 1))
	done
	pid=$(mpi_marked "ZS_MARK=$ZS_MARK" "$victim")
	q=0
	while [ $q -lt "$p" ]; do
		eval "pid_$q=\$(mpi_marked \"ZS_MARK=\$ZS_MARK\" $q)"
		q=$((q + 1))
	done
	[ -n "$pid" ] || { kill "$launcher_pid"; cat "$tmp/err" >&2; fail "MPI process $victim never started"; }
	if [ "$hosts" -eq 2 ]; then
		on=a
		netns_has "$pid" "$ns_b" && on=b
		[ $on = "$(if [ "$victim" -ge $((p / 2)) ]; then echo b; else echo a; fi)" ] ||
			fail "MPI process $victim runs on host $on"
		echo "  (on host $on)"
	fi
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
	# Every process of the job gone, on every host (a moment for the far
	# host's daemon to reap its own).
	i=0
	while [ -n "$(mpi_marked "ZS_MARK=$ZS_MARK")" ] && [ $i -lt 50 ]; do
		sleep 0.1
		i=$((i + 1))
	done
	left=$(mpi_marked "ZS_MARK=$ZS_MARK")
	[ -z "$left" ] || fail "MPI processes left after the job ended: $left"
	if [ "$hosts" -eq 2 ]; then
		i=0
		while [ -n "$(ip netns pids "$ns_a")$(ip netns pids "$ns_b")" ] && [ $i -lt 50 ]; do
			sleep 0.1
			i=$((i + 1))
		done
		left=$(ip netns pids "$ns_a")$(ip netns pids "$ns_b")
		[ -z "$left" ] || fail "processes left on the hosts after the job ended: $left"
	fi
	per=$((world / p))
	if [ "$per" -eq 1 ]; then
		want="rank $victim (MPI process $victim of $p, pid $pid) ended"
	else
		want="ranks $((victim * per))-$((victim * per + per - 1)) (MPI process $victim of $p, pid $pid) ended"
	fi
	lines=$(grep -c '^zerosim' "$tmp/err")
	if [ "$hosts" -eq 1 ]; then
		[ "$lines" -eq 1 ] || { cat "$tmp/err" >&2; fail "$lines lines of zerosim's, not one"; }
		grep '^zerosim' "$tmp/err" | grep -qF "$want" ||
			{ cat "$tmp/err" >&2; fail "the line does not say '$want'"; }
		echo "  $(grep '^zerosim' "$tmp/err")"
	else
		# Across hosts TCP, unlike shared memory, ends the peers of a dead
		# process at once (Open MPI aborts a process whose connection
		# breaks, or SIGPIPE kills it on a write), before the launcher's
		# signal reaches every survivor. zerosim's lines come from
		# survivors on a dead process's host, one at most a host (none
		# when it had its host to itself), and may name such a peer — a
		# process of the job that did end, not the one killed; the
		# launcher's line, too, names whichever end it heard of first.
		# So: each of zerosim's lines names a process of this job by its
		# own pid, at most one a host, and the launcher names one that
		# ended on a signal.
		grep -q "process rank [0-9]* with PID .* exited on signal" "$tmp/err" ||
			{ cat "$tmp/err" >&2; fail "mpirun does not say which process ended"; }
		echo "  $(grep "process rank [0-9]* with PID .* exited on signal" "$tmp/err")"
		[ "$lines" -le 2 ] || { cat "$tmp/err" >&2; fail "$lines lines of zerosim's, more than one a host"; }
		grep '^zerosim' "$tmp/err" | sed -n 's/.*(MPI process \([0-9]*\) of [0-9]*, pid \([0-9]*\)) ended.*/\1 \2/p' >"$tmp/named"
		[ "$(wc -l <"$tmp/named")" -eq "$lines" ] || { cat "$tmp/err" >&2; fail "a line names no process"; }
		hosts_named=
		while read -r q qpid; do
			[ "$qpid" = "$(eval echo "\$pid_$q")" ] || { cat "$tmp/err" >&2; fail "process $q's pid is not $qpid"; }
			hosts_named="$hosts_named $((q / (p / 2)))"
		done <"$tmp/named"
		[ "$(echo "$hosts_named" | tr ' ' '\n' | sort | uniq -d)" = "" ] ||
			{ cat "$tmp/err" >&2; fail "two lines from one host"; }
		grep '^zerosim' "$tmp/err" | sed 's/^/  /'
	fi
	cmp -s "$tmp/prev.json" "$tmp/out/measured.json" || fail "the previous measured.json was changed"
	[ "$(ls -A "$tmp/out")" = measured.json ] || fail "files left beside it: $(ls -A "$tmp/out")"
	rm -rf "$tmp/out"
}

for victim in 1 0; do
	echo "mpirun -np 2 zerosim measure --backend mpi --world 4 ..., MPI process $victim killed"
	kill_one 1 2 4 "$victim"
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
grep -q "^zerosim measure: ranks 4-7 (MPI process 1 of 2) failed in zero2, N=8, unit=model: cannot map DeepSpeed's reduce bucket 1 of rank [4-7] of 8" "$tmp/err" ||
	{ cat "$tmp/err" >&2; fail "the line is not process 1's own"; }
echo "  $(grep '^zerosim' "$tmp/err")"
cmp -s "$tmp/prev.json" "$tmp/m.json" || fail "the previous measured.json was changed"

if netns_usable; then
	netns_up || fail "making the two hosts"
	for pv in "4 3" "4 0" "2 1"; do
		# shellcheck disable=SC2086 # two words: P and the victim
		set -- $pv
		echo "2 hosts x $(($1 / 2)): zerosim measure --backend mpi --world 8 ..., MPI process $2 killed"
		kill_one 2 "$1" 8 "$2"
	done
	netns_down
elif [ "${ZS_REQUIRE_NETNS:-0}" = 1 ]; then
	fail "the part across hosts cannot run: $netns_why (ZS_REQUIRE_NETNS=1: it must)"
else
	echo "SKIP (the part across hosts): $netns_why"
fi
echo "a killed rank ends the job, names its ranks and leaves the output alone; a failing one says why, once"

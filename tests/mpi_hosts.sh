#!/bin/sh
# mpi_hosts — zerosim measure --backend mpi across two hosts: two network
# namespaces of this machine joined by a veth pair (tests/mpi_netns.sh),
# Open MPI's daemon started in the second by its rsh launcher, the ranks
# talking TCP between the hosts. At one and two processes a host, the run
# equals the in-process one field by field (tests/mpi_agree: digest,
# bytes, collectives, losses), and the veth's counters show the bytes
# cross: each way, at least the gradient a host must learn from the other
# every step (2 bytes an element, half precision) in every run. First, a
# run of this test killed while its job runs (SIGTERM, SIGINT: no
# namespace or process of it left; SIGKILL, which no trap sees: the next
# run removes what it left), so that what follows is a second run after a
# killed one. Skips (77, saying why) where namespaces cannot be made; fails
# instead when ZS_REQUIRE_NETNS=1 (CI, as root).
set -u
. "${srcdir:-.}/tests/mpi_env.sh"
. "${srcdir:-.}/tests/mpi_netns.sh"
netns_usable || netns_skip
zerosim=$top/zerosim
agree=$top/tests/mpi_agree
models=${srcdir:-.}/report/models
# The transformer's digest must not depend on how many threads BLAS starts.
export OPENBLAS_NUM_THREADS=1
tmp=$(mktemp -d "${TMPDIR:-/tmp}/zs-hosts.XXXXXX") || exit 99
trap 'netns_down; rm -rf "$tmp"' EXIT
netns_traps
fail() { echo "FAIL: $*" >&2; exit 1; }

# The job a killed run is running: long enough to be killed in the middle.
if [ -n "${ZS_HOSTS_VICTIM:-}" ]; then
	netns_up || exit 1
	echo "$ns_a $ns_b" >"$ZS_HOSTS_VICTIM"
	netns_mpirun 2 -x ZS_MARK "$zerosim" measure --backend mpi --layers 256,1024,256 --world 4 --steps 100000 \
		--quiet --out "$tmp/long.json"
	exit
fi

for sig in TERM INT KILL; do
	echo "a run killed by SIG$sig while its job runs on both hosts"
	mark=ZS_MARK=zs-hosts-victim-$$-$sig
	rm -f "$tmp/victim"
	# A shell's background job ignores SIGINT unless told otherwise.
	# Its files in ours, so that what SIGKILL leaves goes with ours.
	env --default-signal=INT "$mark" ZS_HOSTS_VICTIM="$tmp/victim" TMPDIR="$tmp" sh "${srcdir:-.}/tests/mpi_hosts.sh" \
		>"$tmp/victim.out" 2>&1 &
	victim=$!
	i=0
	while [ $i -lt 300 ]; do
		pids=$(mpi_marked "$mark")
		[ "$(echo "$pids" | wc -w)" -eq 4 ] && break
		sleep 0.1
		i=$((i + 1))
	done
	[ "$(echo "$pids" | wc -w)" -eq 4 ] || { cat "$tmp/victim.out" >&2; kill -KILL $victim; fail "its 4 processes never ran"; }
	read -r _ vb <"$tmp/victim"
	on_b=0
	for pid in $pids; do netns_has "$pid" "$vb" && on_b=$((on_b + 1)); done
	[ $on_b -eq 2 ] || fail "$on_b of its processes on host b, not 2"
	sleep 0.5
	kill -$sig $victim
	i=0
	while kill -0 $victim 2>/dev/null && [ $i -lt 100 ]; do
		sleep 0.1
		i=$((i + 1))
	done
	kill -0 $victim 2>/dev/null && fail "still running 10 s after SIG$sig"
	wait $victim
	echo "  it ended with status $? after $((i / 10)).$((i % 10)) s"
	# Nothing ran its traps: what it left, the next run removes.
	[ $sig = KILL ] && continue
	left=$(ip netns list | grep "^zs-hosts-$victim-")
	[ -z "$left" ] || fail "namespaces left: $left"
	left=$(mpi_marked "$mark")
	[ -z "$left" ] || fail "processes left: $left"
	echo "  no namespace or process of it left"
done

netns_up || fail "making the two hosts"
ip netns list | grep -q "^zs-hosts-$victim-" && fail "the namespaces of the run killed by SIGKILL are still there"
left=$(mpi_marked "ZS_MARK=zs-hosts-victim-$$-KILL")
[ -z "$left" ] || fail "the processes of the run killed by SIGKILL are still there: $left"
echo "two hosts: $ns_a ($netns_net.1) and $ns_b ($netns_net.2), a veth pair between them"

# across K RUNS FLOOR OPTION...: over 2 hosts x K processes, equal to the
# in-process run (RUNS runs), and at least FLOOR bytes over the veth each way.
across() {
	k=$1 runs=$2 floor=$3
	shift 3
	echo "2 hosts x $k: zerosim measure --backend mpi --world 4 $*"
	"$zerosim" measure --world 4 --quiet --out "$tmp/ip.json" "$@" </dev/null || fail "in-process: $*"
	a0=$(netns_tx "$ns_a") b0=$(netns_tx "$ns_b")
	netns_mpirun "$k" "$zerosim" measure --backend mpi --world 4 --quiet --out "$tmp/mpi.json" "$@" </dev/null ||
		fail "2 hosts x $k: $*"
	a=$(($(netns_tx "$ns_a") - a0)) b=$(($(netns_tx "$ns_b") - b0))
	"$agree" "$tmp/ip.json" "$tmp/mpi.json" "$runs" $((2 * k)) ||
		fail "2 hosts x $k, $*: the run differs from the in-process one"
	echo "  equal to the in-process run; over the veth: $a B a->b, $b B b->a (at least $floor each way)"
	if [ "$a" -lt "$floor" ] || [ "$b" -lt "$floor" ]; then
		fail "fewer bytes crossed than the gradients must"
	fi
}

# 64,256,64: 33,088 parameters; 4 runs (dp, zero1-3) x 3 steps.
mlp=$((4 * 3 * 33088 * 2))
across 1 4 $mlp --layers 64,256,64 --steps 3 --unit layer
across 2 4 $mlp --layers 64,256,64 --steps 3 --unit layer
# DeepSpeed's buckets and a transformer: their bytes as well, not bounded.
across 2 8 1 --framework deepspeed --layers 64,256,64 --steps 3 --unit model,layer
across 2 4 1 --model "$models/gpt2-tiny.json" --seq 16 --batch 2 --steps 2 --precision mixed

netns_down
left=$(ip netns list | grep "^zs-hosts-$$-")
[ -z "$left" ] || fail "namespaces left after the run: $left"
echo "across two hosts, at one and two processes a host: the in-process run's results, over the veth; nothing left"

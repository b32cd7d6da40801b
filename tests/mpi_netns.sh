# mpi_netns.sh — sourced by the MPI tests after mpi_env.sh: two hosts on
# this one machine, for runs of Open MPI across hosts. Each host is a
# network namespace of its own (named zs-hosts-PID-a and -b, PID the test's
# shell, so that runs side by side never share one), the two joined by a
# veth pair with one address each in 10.231.0.0/24 — addresses that exist
# only inside these two namespaces, which have no route anywhere else — and
# `lo` up. Each process started on a host also gets a hostname of its own
# (unshare --uts): with the machine's one hostname, Open MPI takes the two
# hosts for one node, and MPI_Comm_split_type(MPI_COMM_TYPE_SHARED) groups
# two processes a host inconsistently (a crash). Open MPI reaches the
# second host through its rsh launcher, pointed at an agent script
# (written here) that runs the launcher's command in that host's namespace
# instead of over ssh; mpirun itself runs in the first host's.
#
# What it cannot show: the hosts share one kernel, one filesystem, one
# clock and one process table, and the veth moves bytes at memory speed.
#
#   netns_usable      0 if namespaces can be made here; else 1, with the
#                     reason in $netns_why
#   netns_skip        exit 77 saying $netns_why, or exit 1 when
#                     ZS_REQUIRE_NETNS=1 (CI runs as root: a skip is a failure)
#   netns_up          make the two hosts ($ns_a, $ns_b), the hostfile
#                     ($netns_hostfile: 2 slots each) and the agent, in $tmp;
#                     first remove what runs killed by SIGKILL left behind
#   netns_down        kill every process in either namespace (by pid),
#                     delete the namespaces (and with them the veth): call it
#                     from the EXIT trap; netns_traps sets the signal traps
#                     so that every catchable signal goes through EXIT
#   netns_mpirun K ARG...  mpirun, in host a, over both hosts with K
#                     processes each (ranks 0..K-1 on a, K..2K-1 on b), in
#                     the background; waits for it (a signal still reaches
#                     the traps at once) and returns its status
#   netns_start K ARG...   the same, not waited for: its pid in $netns_job
#   netns_tx NS       bytes the namespace's veth end has sent
#   netns_has PID NS  whether process PID is in namespace NS
#   mpi_marked NAME=VALUE [RANK]  the pids of the MPI processes (of rank
#                     RANK) whose environment holds NAME=VALUE: found on
#                     every host, not only among mpirun's children (the far
#                     host's are its Open MPI daemon's); give the job the
#                     variable with mpirun -x NAME

netns_net=10.231.0
netns_why=

netns_usable() {
	if [ "$(id -u)" -ne 0 ]; then
		netns_why="not root: making network namespaces and giving a process its own hostname need CAP_SYS_ADMIN"
		return 1
	fi
	for tool in ip unshare hostname; do
		if ! command -v $tool >/dev/null 2>&1; then
			netns_why="no '$tool' on PATH (iproute2, util-linux, hostname)"
			return 1
		fi
	done
	probe=zs-hosts-$$-probe
	if ! err=$(ip netns add "$probe" 2>&1); then
		netns_why="cannot make a network namespace ($err)"
		return 1
	fi
	ip netns del "$probe"
	if ! err=$(unshare --uts true 2>&1); then
		netns_why="cannot give a process a hostname of its own ($err)"
		return 1
	fi
	return 0
}

netns_skip() {
	if [ "${ZS_REQUIRE_NETNS:-0}" = 1 ]; then
		echo "FAIL: the two-host test cannot run: $netns_why (ZS_REQUIRE_NETNS=1: it must)" >&2
		exit 1
	fi
	echo "SKIP: two hosts on one machine: $netns_why"
	exit 77
}

# Every process in namespace $1, by pid, until none is left.
netns_kill() {
	i=0
	while [ $i -lt 50 ]; do
		pids=$(ip netns pids "$1" 2>/dev/null)
		[ -n "$pids" ] || return 0
		# shellcheck disable=SC2086
		kill -KILL $pids 2>/dev/null
		sleep 0.1
		i=$((i + 1))
	done
	echo "FAIL: processes left in namespace $1: $(ip netns pids "$1" | tr '\n' ' ')" >&2
	return 1
}

# The namespaces of runs whose shell is gone (killed by SIGKILL, which no
# trap sees): their processes killed, the namespaces deleted.
netns_sweep() {
	for ns in $(ip netns list | sed -n 's/^\(zs-hosts-[0-9][0-9]*-\(a\|b\|probe\)\)\( .*\)\{0,1\}$/\1/p'); do
		owner=${ns#zs-hosts-}
		owner=${owner%-*}
		kill -0 "$owner" 2>/dev/null && continue
		echo "removing $ns, left by run $owner (gone)"
		netns_kill "$ns"
		ip netns del "$ns" 2>/dev/null
	done
}

netns_up() {
	netns_sweep
	ns_a=zs-hosts-$$-a ns_b=zs-hosts-$$-b
	ip netns add "$ns_a" && ip netns add "$ns_b" &&
		ip link add veth0 netns "$ns_a" type veth peer name veth0 netns "$ns_b" &&
		ip -n "$ns_a" addr add "$netns_net.1/24" dev veth0 &&
		ip -n "$ns_b" addr add "$netns_net.2/24" dev veth0 &&
		ip -n "$ns_a" link set lo up && ip -n "$ns_b" link set lo up &&
		ip -n "$ns_a" link set veth0 up && ip -n "$ns_b" link set veth0 up || return 1
	netns_hostfile=$tmp/hostfile
	printf '%s slots=2\n%s slots=2\n' "$netns_net.1" "$netns_net.2" >"$netns_hostfile"
	# Open MPI calls its rsh agent as AGENT HOST COMMAND...; ssh would run
	# COMMAND by the far host's shell, and so does this, in the namespace.
	netns_agent=$tmp/agent
	cat >"$netns_agent" <<EOF
#!/bin/sh
case \$1 in
$netns_net.1) ns=$ns_a ;;
$netns_net.2) ns=$ns_b ;;
*) echo "agent: no host \$1 here" >&2; exit 255 ;;
esac
shift
exec ip netns exec "\$ns" unshare --uts sh -c 'hostname "\$0" && exec sh -c "\$*"' "\$ns" "\$@"
EOF
	chmod +x "$netns_agent"
}

netns_down() {
	for ns in ${ns_a:-} ${ns_b:-}; do
		netns_kill "$ns"
		ip netns del "$ns" 2>/dev/null
	done
	ns_a='' ns_b=''
}

netns_traps() {
	trap 'exit 129' HUP
	trap 'exit 130' INT
	trap 'exit 143' TERM
}

netns_start() {
	k=$1
	shift
	# TCP between the hosts, shared memory within one (vader: this
	# machine's settings from mpi_env.sh); each process free to run on
	# any core (bound, every host's first process takes core 0); Open
	# MPI's files under $tmp, which goes with the test.
	TMPDIR=$tmp OMPI_MCA_btl=tcp,vader,self \
		ip netns exec "$ns_a" unshare --uts sh -c 'hostname "$0" && exec "$@"' "$ns_a" \
		$mpirun --hostfile "$netns_hostfile" -np $((2 * k)) --npernode "$k" --bind-to none \
		--mca plm_rsh_agent "$netns_agent" "$@" &
	netns_job=$!
}

netns_mpirun() {
	netns_start "$@"
	wait $netns_job
}

netns_tx() { ip netns exec "$1" cat /sys/class/net/veth0/statistics/tx_bytes; }

netns_has() { [ "$(stat -L -c %i "/proc/$1/ns/net" 2>/dev/null)" = "$(stat -L -c %i "/run/netns/$2")" ]; }

mpi_marked() {
	for f in $(grep -lszx "$1" /proc/[0-9]*/environ); do
		grep -qszx "OMPI_COMM_WORLD_RANK=${2:-[0-9]*}" "$f" && { f=${f#/proc/}; echo "${f%/environ}"; }
	done
}

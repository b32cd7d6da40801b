#!/bin/sh
# bench — wall time of whole `zerosim measure` processes: the default sweep
# and a 8.4M-parameter model at N = 16, four schemes, one step. Medians over
# several runs (hyperfine when present, else the shell's clock). The large
# case is divided by its floors on this machine (tests/bench_floor.c: the
# page faults and the bytes it cannot avoid), measured in the same run: one
# faulting the state in 4 KiB pages, one in 2 MiB pages as zerosim's heap
# does (the ratio to it is what the code costs beyond the memory system).
# On a shared machine the CPU-time ratio (user + system of both) is the
# steadier one. A benchmark, not a test: it prints numbers, never fails on them.
set -eu
# One BLAS thread on both sides of every ratio (runs are single-threaded
# by design; a threaded OpenBLAS would take the other cores).
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
zs=${ZEROSIM:-./zerosim}
floor=${FLOOR:-tests/bench_floor}
runs=${BENCH_RUNS:-10}
big_runs=${BENCH_BIG_RUNS:-3}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

median() { sort -n | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }

bench() { # name runs command...
	name=$1 n=$2
	shift 2
	if command -v hyperfine >/dev/null 2>&1; then
		hyperfine -N -w 1 -r "$n" --export-json "$out/h.json" "$*" >/dev/null 2>&1
		med=$(tr ',' '\n' <"$out/h.json" | sed -n 's/.*"median": *//p' | head -n 1)
		last_ms=$(echo "$med" | awk '{print $1 * 1000}')
		# mean user + system time of a run, for the ratio to the floor's CPU time
		last_cpu_ms=$(tr ',' '\n' <"$out/h.json" | sed -n 's/.*"\(user\|system\)": *//p' | head -n 2 |
			awk '{s += $1} END {print s * 1000}')
		printf '%-48s median %8.1f ms over %d runs (hyperfine)\n' "$name" "$last_ms" "$n"
	else
		i=0
		: >"$out/t"
		while [ "$i" -lt "$n" ]; do
			s=$(date +%s%N)
			"$@" >/dev/null
			e=$(date +%s%N)
			echo $(((e - s) / 1000)) >>"$out/t"
			i=$((i + 1))
		done
		last_ms=$(median <"$out/t" | awk '{print $1 / 1000}')
		last_cpu_ms=
		printf '%-48s median %8.1f ms over %d runs\n' "$name" "$last_ms" "$n"
	fi
}

# the CPUs this process may use (nproc itself would count OMP_NUM_THREADS)
cpus=$(env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc)
# the default sweep's 24 runs go side by side on one worker a CPU (sweep.c)
workers=$cpus
[ "$workers" -le 24 ] || workers=24
echo "zerosim bench on $cpus cores, $(date -u '+%Y-%m-%d %H:%M UTC'), load average $(cut -d ' ' -f 1-3 /proc/loadavg)"
# Instructions (callgrind), which a loaded machine does not move: the
# default sweep and --version. Callgrind counts a rep movsb or rep stosb
# once per byte; glibc uses them for copies of a few KiB and more, so the
# sweep is counted twice, the second time with them turned off
# (GLIBC_TUNABLES), which counts a copy's vector loop instead.
instructions() { # label command...
	label=$1
	shift
	n=$(valgrind --tool=callgrind --callgrind-out-file=/dev/null "$@" 2>&1 >/dev/null |
		sed -n 's/^==[0-9]*== Collected : //p')
	printf '%-48s %14s instructions (callgrind)\n' "$label" "$n"
}
if command -v valgrind >/dev/null 2>&1; then
	instructions "default sweep" "$zs" measure --quiet --out /dev/null
	GLIBC_TUNABLES=glibc.cpu.x86_rep_movsb_threshold=4294967295:glibc.cpu.x86_rep_stosb_threshold=4294967295 \
		instructions "default sweep, no rep movsb/stosb" "$zs" measure --quiet --out /dev/null
	instructions "--version" "$zs" --version
fi
bench "default sweep (64,256,64; N=1..32; 4 schemes)" "$runs" \
	"$zs" measure --quiet --out "$out/m.json"
sweep_ms=$last_ms sweep_cpu_ms=$last_cpu_ms
# The default sweep against its floors. The process's: --version is the
# same binary's exec, dynamic loading and exit, and no work. The work's:
# the sweep's CPU time spread over the cores its runs go side by side on
# (sweep.c: one worker a usable CPU), which no scheduling beats; what is
# left above the two is the serial part (the options, the JSON, its
# writing: fsync, link, rename) and the workers' imbalance.
bench "--version (the process's floor)" "$runs" "$zs" --version
printf '%-48s %8.2f (the default sweep / the process floor)\n' "  default sweep / --version" \
	"$(echo "$sweep_ms $last_ms" | awk '{print $1 / $2}')"
if [ -n "$sweep_cpu_ms" ]; then
	printf '%-48s %8.1f ms CPU / %d cores = %.1f ms; + --version = %.1f ms; the sweep %.2fx that\n' \
		"  default sweep's work over the cores" "$sweep_cpu_ms" "$workers" \
		"$(echo "$sweep_cpu_ms $workers" | awk '{print $1 / $2}')" \
		"$(echo "$sweep_cpu_ms $workers $last_ms" | awk '{print $1 / $2 + $3}')" \
		"$(echo "$sweep_ms $sweep_cpu_ms $workers $last_ms" | awk '{print $1 / ($2 / $3 + $4)}')"
fi
# Side by side with an older zerosim (issue 26: 8f51c01, built beside this
# tree): ZS_BASELINE=/path/to/its/zerosim. Rounds of both, alternated, so
# that a shared machine's load falls on both alike; the ratio is the median
# of the rounds'.
if [ -n "${ZS_BASELINE:-}" ]; then
	: >"$out/rounds"
	i=0
	while [ "$i" -lt 5 ]; do
		bench "  baseline default sweep" "$runs" "$ZS_BASELINE" measure --quiet --out "$out/b.json" >/dev/null
		b=$last_ms
		bench "  default sweep" "$runs" "$zs" measure --quiet --out "$out/m.json" >/dev/null
		echo "$b $last_ms" >>"$out/rounds"
		i=$((i + 1))
	done
	printf '%-48s %8.2f (median of 5 rounds of %d; baseline %.1f ms, this %.1f ms; target >= 1.25)\n' \
		"default sweep: $ZS_BASELINE / this" "$(awk '{print $1 / $2}' "$out/rounds" | median)" "$runs" \
		"$(cut -d' ' -f1 "$out/rounds" | median)" "$(cut -d' ' -f2 "$out/rounds" | median)"
fi
bench "make-report sweep (10 N, 2 units)" "$runs" \
	"$zs" measure --quiet --spec "${srcdir:-.}/data/sweep.json" --timeline --out "$out/m.json"
bench "1024,4096,1024 at N=16, 1 step, 4 schemes" "$big_runs" \
	"$zs" measure --quiet --layers 1024,4096,1024 --world 16 --steps 1 --out "$out/m.json"
big_ms=$last_ms big_cpu_ms=$last_cpu_ms
if [ -x "$floor" ]; then
	i=0
	for f in f fc h hc; do : >"$out/$f"; done
	while [ "$i" -lt "$big_runs" ]; do
		"$floor" >"$out/floor.txt"
		sed -n 's/^floor_seconds //p' "$out/floor.txt" >>"$out/f"
		sed -n 's/^floor_cpu_seconds //p' "$out/floor.txt" >>"$out/fc"
		sed -n 's/^floor2m_seconds //p' "$out/floor.txt" >>"$out/h"
		sed -n 's/^floor2m_cpu_seconds //p' "$out/floor.txt" >>"$out/hc"
		i=$((i + 1))
	done
	sed '/^floor/d; s/^/  floor: /' "$out/floor.txt"
	# ratio NAME FLOOR_S FLOOR_CPU_S TARGET: the large case against one floor
	ratio() {
		printf '%-48s median %8.1f ms over %d runs (CPU %.1f ms)\n' "$1" \
			"$(echo "$2" | awk '{print $1 * 1000}')" "$big_runs" "$(echo "$3" | awk '{print $1 * 1000}')"
		printf '%-48s %8.2f (target <= %s)\n' "  large case / this floor, wall time" \
			"$(echo "$big_ms $2" | awk '{print $1 / ($2 * 1000)}')" "$4"
		if [ -n "$big_cpu_ms" ]; then
			printf '%-48s %8.2f (user + system; %.1f ms against %.1f ms)\n' "  large case / this floor, CPU time" \
				"$(echo "$big_cpu_ms $3" | awk '{print $1 / ($2 * 1000)}')" "$big_cpu_ms" \
				"$(echo "$3" | awk '{print $1 * 1000}')"
		fi
	}
	# The 4 KiB floor is what any process pays that faults its pages one by
	# one; the 2 MiB one is what zerosim's own heap pays (heap.c advises
	# huge pages), so the ratio to it is what the code costs beyond the
	# memory system.
	ratio "its floor, 4 KiB pages (tests/bench_floor)" "$(median <"$out/f")" "$(median <"$out/fc")" 1.0
	ratio "its floor, 2 MiB pages as the heap's" "$(median <"$out/h")" "$(median <"$out/hc")" 1.2
else
	echo "bench: $floor is not built (make bench builds it); no floor" >&2
fi
# One run after the machine's memory has lain free for a while, as a
# user's first run finds it. Back-to-back runs (above) get the pages the
# previous one just freed; in a virtual machine that reports free 2 MiB
# blocks to its host (virtio-balloon's free page reporting), a 2 MiB page
# faulted on a block the host took back costs the host 512 faults of its
# own, and this run's system time can be ten times the others' (heap.h).
if [ -x /usr/bin/time ]; then
	sleep "${BENCH_IDLE:-6}"
	/usr/bin/time -f "1024,4096,1024 at N=16, after ${BENCH_IDLE:-6} s idle: %e s wall, %U s user, %S s sys, %R minor page faults, %M kB peak RSS" \
		"$zs" measure --quiet --layers 1024,4096,1024 --world 16 --steps 1 --out "$out/m.json"
fi

# The MPI backend (./configure --with-mpi) against the in-process one on
# the same runs, measured side by side: the default sweep's runs that P = 2
# divides, and the large case; then each process's overhead (OS - tracked,
# per rank) in the large case, from zerosim report.
if grep -q '^#define HAVE_MPI 1' "${ZS_BUILDDIR:-.}/config.h" 2>/dev/null; then
	# A shared machine: wait for messages without spinning on a core.
	export OMPI_MCA_mpi_yield_when_idle=1
	mpirun="mpirun -np 2 --oversubscribe"
	[ "$(id -u)" -ne 0 ] || mpirun="$mpirun --allow-run-as-root"
	echo "MPI backend, 2 processes, against the in-process backend on the same runs ($(uptime | sed 's/.*load/load/'))"
	# Alternating pairs, in-process then MPI, so that both see the same
	# load on a shared machine; the ratio is the median of the pairs'.
	ms() { s=$(date +%s%N); "$@" >/dev/null || exit 1; e=$(date +%s%N); echo $(((e - s) / 1000000)); }
	pairs() { # name pairs args...
		name=$1 n=$2
		shift 2
		: >"$out/pairs"
		i=0
		while [ "$i" -lt "$n" ]; do
			# shellcheck disable=SC2086
			a=$(ms "$zs" measure --quiet "$@" --out "$out/m.json")
			# shellcheck disable=SC2086
			b=$(ms $mpirun "$zs" measure --backend mpi --quiet "$@" --out "$out/m.json")
			echo "$a $b" >>"$out/pairs"
			i=$((i + 1))
		done
		ip=$(cut -d' ' -f1 "$out/pairs" | median)
		mp=$(cut -d' ' -f2 "$out/pairs" | median)
		r=$(awk '{print $2 / $1}' "$out/pairs" | median)
		printf '%-44s in-process %7.0f ms, MPI %7.0f ms (medians of %d), MPI/in-process %.2f\n' \
			"$name" "$ip" "$mp" "$n" "$r"
	}
	# The floor: launching the job, MPI_Init and MPI_Finalize around one
	# run of a two-parameter model.
	bench "mpi -np 2: launch floor (--layers 1,1 --world 2)" "$runs" \
		$mpirun "$zs" measure --backend mpi --quiet --layers 1,1 --world 2 --schemes dp --steps 1 --out "$out/m.json"
	pairs "default sweep's runs 2 divides (N=2..32)" "$runs" --world 2,4,8,16,32
	pairs "1024,4096,1024 at N=16, 1 step, 4 schemes" "$big_runs" --layers 1024,4096,1024 --world 16 --steps 1
	$mpirun "$zs" measure --backend mpi --quiet --layers 1024,4096,1024 --world 16 --steps 1 --out "$out/m.json"
	"$zs" theory --layers 1024,4096,1024 --world 16 --out "$out/t.json"
	ZEROSIM_DATADIR=${ZEROSIM_DATADIR:-${srcdir:-.}} "$zs" report --no-render --measured "$out/m.json" \
		--theory "$out/t.json" --out "$out/report" >/dev/null
	grep '^process overhead:' "$out/report/flags.txt"
fi

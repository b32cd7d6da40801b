#!/bin/sh
# bench — wall time of whole `zerosim measure` processes: the default sweep
# and a 8.4M-parameter model at N = 16, four schemes, one step. Medians over
# several runs (hyperfine when present, else the shell's clock). The large
# case is divided by its floor on this machine (tests/bench_floor.c: the
# page faults and the bytes it cannot avoid), measured in the same run.
# A benchmark, not a test: it prints numbers and never fails on them.
set -eu
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
		printf '%-48s median %8.1f ms over %d runs\n' "$name" "$last_ms" "$n"
	fi
}

echo "zerosim bench on $(nproc) cores, $(date -u '+%Y-%m-%d %H:%M UTC'), load average $(cut -d ' ' -f 1-3 /proc/loadavg)"
bench "default sweep (64,256,64; N=1..32; 4 schemes)" "$runs" \
	"$zs" measure --quiet --out "$out/m.json"
bench "make-report sweep (10 N, 2 units)" "$runs" \
	"$zs" measure --quiet --spec "${srcdir:-.}/data/sweep.json" --timeline --out "$out/m.json"
bench "1024,4096,1024 at N=16, 1 step, 4 schemes" "$big_runs" \
	"$zs" measure --quiet --layers 1024,4096,1024 --world 16 --steps 1 --out "$out/m.json"
big_ms=$last_ms
if [ -x "$floor" ]; then
	i=0
	: >"$out/f"
	while [ "$i" -lt "$big_runs" ]; do
		"$floor" >"$out/floor.txt"
		sed -n 's/^floor_seconds //p' "$out/floor.txt" >>"$out/f"
		i=$((i + 1))
	done
	sed '/^floor_seconds/d; s/^/  floor: /' "$out/floor.txt"
	floor_s=$(median <"$out/f")
	printf '%-48s median %8.1f ms over %d runs\n' "its floor on this machine (tests/bench_floor)" \
		"$(echo "$floor_s" | awk '{print $1 * 1000}')" "$big_runs"
	printf '%-48s %8.2f (target <= 1.0)\n' "large case / floor" \
		"$(echo "$big_ms $floor_s" | awk '{print $1 / ($2 * 1000)}')"
else
	echo "bench: $floor is not built (make bench builds it); no floor" >&2
fi
if [ -x /usr/bin/time ]; then
	/usr/bin/time -f "1024,4096,1024 at N=16: %e s wall, %M kB peak RSS" \
		"$zs" measure --quiet --layers 1024,4096,1024 --world 16 --steps 1 --out "$out/m.json"
fi

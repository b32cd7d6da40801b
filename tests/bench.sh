#!/bin/sh
# bench — wall time of whole `zerosim measure` processes: the default sweep
# and a 8.4M-parameter model at N = 16, four schemes, one step. Medians over
# several runs (hyperfine when present, else /usr/bin/time or the shell).
# A benchmark, not a test: it prints numbers and never fails on them.
set -eu
zs=${ZEROSIM:-./zerosim}
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
		printf '%-48s median %8.1f ms over %d runs (hyperfine)\n' "$name" "$(echo "$med" | awk '{print $1 * 1000}')" "$n"
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
		printf '%-48s median %8.1f ms over %d runs\n' "$name" "$(median <"$out/t" | awk '{print $1 / 1000}')" "$n"
	fi
}

echo "zerosim bench on $(nproc) cores, $(date -u +%Y-%m-%d)"
bench "default sweep (64,256,64; N=1..32; 4 schemes)" "$runs" \
	"$zs" measure --quiet --out "$out/m.json"
bench "make-report sweep (10 N, 2 units)" "$runs" \
	"$zs" measure --quiet --spec "${srcdir:-.}/data/sweep.json" --timeline --out "$out/m.json"
bench "1024,4096,1024 at N=16, 1 step, 4 schemes" "$big_runs" \
	"$zs" measure --quiet --layers 1024,4096,1024 --world 16 --steps 1 --out "$out/m.json"
if [ -x /usr/bin/time ]; then
	/usr/bin/time -f "1024,4096,1024 at N=16: %e s wall, %M kB peak RSS" \
		"$zs" measure --quiet --layers 1024,4096,1024 --world 16 --steps 1 --out "$out/m.json"
fi

#!/bin/sh
# No result may depend on the thread count: the same sweep, on a model big
# enough that ranks run on several threads, gives the same bytes of JSON
# with one thread and with four.
set -eu
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
args="measure --layers 512,2048,512 --world 1,3,4 --unit model,layer --steps 2 --quiet"
OMP_NUM_THREADS=1 ./zerosim $args --out "$tmp/one.json"
OMP_NUM_THREADS=4 ./zerosim $args --out "$tmp/four.json"
if cmp "$tmp/one.json" "$tmp/four.json"; then
	echo "threads: 1 and 4 threads give identical measurements"
else
	echo "threads: FAIL: the measurement depends on the thread count" >&2
	exit 1
fi

# The default sweep runs several runs at once: the same bytes again.
OMP_NUM_THREADS=1 ./zerosim measure --quiet --timeline --out "$tmp/one.json"
OMP_NUM_THREADS=4 ./zerosim measure --quiet --timeline --out "$tmp/four.json"
if cmp "$tmp/one.json" "$tmp/four.json"; then
	echo "threads: the default sweep is the same run one at a time or four at a time"
else
	echo "threads: FAIL: the default sweep depends on the thread count" >&2
	exit 1
fi

#!/bin/sh
# ds_torch — DeepSpeed's engine over the PyTorch step (`--framework
# deepspeed --wrapper deepspeed`, docs/schedule.md, "DeepSpeed over the
# PyTorch step"): named, and refused with one line until it is built, on
# the command line and in a sweep spec, by measure and theory alike; an
# existing --out is left as it was. Runs from the build directory.
set -u
zerosim=${ZS_BUILDDIR:-.}/zerosim
tiny=${srcdir:-.}/report/models/gpt2-tiny.json
[ -x "$zerosim" ] || { echo "ds_torch: $zerosim is not built" >&2; exit 99; }
[ -f "$tiny" ] || { echo "ds_torch: no model config at $tiny" >&2; exit 99; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/zs-dst.XXXXXX") || exit 99
trap 'rm -rf "$tmp"' EXIT HUP INT TERM
fail() { echo "ds_torch: FAIL: $*" >&2; exit 1; }

keep=$tmp/keep.json
echo 'kept' >"$keep"
# try STATUS MESSAGE ARGS...: exit STATUS, exactly "zerosim CMD: MESSAGE"
# on stderr, nothing on stdout, $keep untouched
n=0
try() {
	want=$1 msg=$2
	shift 2
	"$zerosim" "$@" >"$tmp/out" 2>"$tmp/err"
	rc=$?
	[ "$rc" -eq "$want" ] || fail "exit $rc, not $want: $*"
	[ "$(cat "$tmp/err")" = "zerosim $1: $msg" ] || fail "stderr of $*: $(cat "$tmp/err")"
	[ -s "$tmp/out" ] && fail "stdout of $*: $(cat "$tmp/out")"
	[ "$(cat "$keep")" = kept ] || fail "$* changed $keep"
	n=$((n + 1))
}

built="--wrapper deepspeed: DeepSpeed's engine over the PyTorch step is not built yet (give --wrapper auto, DeepSpeed's buffers over zerosim's own step)"
printf '{"format": "zerosim-sweep/2", "framework": "deepspeed", "wrapper": "deepspeed", "world": [2]}\n' >"$tmp/sp.json"
for cmd in measure theory; do
	for scheme in dp zero1 zero2 zero3; do
		for world in 1 2 3; do
			try 2 "$built" $cmd --framework deepspeed --wrapper deepspeed --model "$tiny" --schemes $scheme \
				--world $world --precision fp32 --out "$keep"
		done
	done
	try 2 "$built" $cmd --spec "$tmp/sp.json" --model "$tiny" --out "$keep"
	try 2 "--wrapper deepspeed is DeepSpeed's engine: give --framework deepspeed" \
		$cmd --framework torch --wrapper deepspeed --model "$tiny" --world 2 --out "$keep"
	try 2 "--wrapper: only under --framework torch or deepspeed" \
		$cmd --framework paper --wrapper deepspeed --model "$tiny" --world 2 --out "$keep"
	try 2 "--wrapper: 'deepspeeed' is not one of auto, none, ddp, fsdp, deepspeed" \
		$cmd --framework deepspeed --wrapper deepspeeed --out "$keep"
done
[ "$n" -eq 32 ] || fail "ran $n refusals, not 32"

# the control: DeepSpeed's buffers over zerosim's own step still run
"$zerosim" measure -q --framework deepspeed --wrapper auto --model "$tiny" --schemes zero2 --world 2 --steps 1 \
	--ds-reduce-bucket 1000 --out "$tmp/auto.json" || fail "--wrapper auto under deepspeed"
grep -q '"framework":	"deepspeed"' "$tmp/auto.json" || fail "--wrapper auto's file names no deepspeed"
exit 0

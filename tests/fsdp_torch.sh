#!/bin/sh
# fsdp_torch — the buffers zerosim's torch zero2 and zero3 allocate around
# FSDP's collectives (each gathered copy, padded: category gathered_params;
# category buckets: each unshard's _mp_shard, each post-backward hook's
# padded grad copy, output shard and, in mixed precision, its fp32 cast)
# are the ones real PyTorch 1.13 allocates, byte for byte and in order.
# tests/fsdp_torch.py runs FSDP on the CPU (gloo, N = 2, where nothing is
# padded and F.pad still copies, and 3; the default MLP; FULL_SHARD and
# SHARD_GRAD_OP, unit=model and layer, fp32 and mixed) and prints the
# allocations of step 3 inside pre_unshard, unshard and the hooks;
# `zerosim measure --timeline` gives rank 0's gathered_params and buckets
# allocations in its last step; the two lists must be equal.
#
# PyTorch is looked for by tests/torch_python.sh; without it the test is
# skipped (exit 77). Exit 0 pass, 1 disagreement, 99 hard error.
set -u

top=${ZS_BUILDDIR:-.}
src=${srcdir:-.}
zerosim=$top/zerosim
if [ ! -x "$zerosim" ]; then
	echo "fsdp_torch: $zerosim is not built" >&2
	exit 99
fi
name=fsdp_torch
. "$src/tests/torch_python.sh"

tmp=$(mktemp -d "${TMPDIR:-/tmp}/zs-fsdp.XXXXXX") || exit 99
trap 'rm -rf "$tmp"' EXIT HUP INT TERM

layers=64,256,64
for world in 2 3; do
	# gloo waits 30 minutes for a peer by default: a hang ends in 5.
	if ! PYTHONDONTWRITEBYTECODE=1 timeout 300 "$py" "$src/tests/fsdp_torch.py" $world $layers >"$tmp/torch.out" 2>"$tmp/err"; then
		echo "fsdp_torch: FAIL: $py tests/fsdp_torch.py $world $layers:" >&2
		cat "$tmp/err" >&2
		exit 99
	fi
	grep -E '^(FULL_SHARD|SHARD_GRAD_OP) ' "$tmp/torch.out" | sed "s/^/N=$world /" >>"$tmp/torch" || exit 99
done

while read -r n strategy unit precision rest; do
	scheme=zero3
	[ "$strategy" = SHARD_GRAD_OP ] && scheme=zero2
	precision=${precision%:}
	if ! "$zerosim" measure -q --framework torch --layers $layers --world "${n#N=}" --schemes $scheme \
		--unit "$unit" --precision "$precision" --steps 3 --timeline --out "$tmp/m.json" 2>"$tmp/err"; then
		cat "$tmp/err" >&2
		exit 99
	fi
	printf '%s %s %s %s: %s\n' "$n" "$strategy" "$unit" "$precision" "$("$py" -c '
import json, sys
run = json.load(open(sys.argv[1]))["runs"][0]
tag = {"buckets": "b", "gathered_params": "g"}
print(" ".join(tag[e["category"]] + str(e["bytes"]) for e in run["timeline"]
               if e["category"] in tag and e["op"] == "alloc"))
' "$tmp/m.json")"
done <"$tmp/torch" >"$tmp/zerosim"

if ! diff -u "$tmp/torch" "$tmp/zerosim" >"$tmp/diff"; then
	echo "fsdp_torch: FAIL: zerosim's allocations are not PyTorch's (- torch, + zerosim):" >&2
	cat "$tmp/diff" >&2
	exit 1
fi
sed 's/^/ok: /' "$tmp/zerosim"

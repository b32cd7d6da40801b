#!/bin/sh
# ds_moe_wrapper — a mixture of experts under DeepSpeed's engine over the
# PyTorch step (--framework deepspeed --wrapper deepspeed, ZeRO-1 and
# ZeRO-2 in fp32: util/ag_ds.c's pass over util/autograd.c's mixture
# block, each rank its own routing; docs/schedule.md, "DeepSpeed over the
# PyTorch step", its mixture part). tests/ds_moe_torch.sh holds the
# theory to PyTorch 1.13's allocator (make check-torch); this holds the
# engine to the theory and the refusals (make check):
#
#  - the tiny mixtral of tests/moe_lib.sh (d 64, F 96, 2 blocks, 4
#    experts, top 2) at B 2 T 32, 3 steps: measure, then theory --routing
#    FILE (that measure's routing) = measure to the byte (resident, peak,
#    every category, comm, every rank's peak and marks; tests/json_agree)
#    under zero1 and zero2 at N = 1, 2 and 3 (one N a sweep: the ranks
#    route apart, each rank its own list); the same for the tiny qwen2_moe
#    (its shared expert) and qwen3_moe at N = 2 under zero2;
#  - the check can fail: 8 tokens moved in zero1 N = 2's file, rank 0's
#    last step, from each block's least used expert to its busiest (the
#    sums kept: the busiest expert's backward scratch then binds the
#    peak), makes the theory disagree with measure;
#  - refused by name, exit 2 and nothing written (exit 1 for measure's
#    idle expert, found by its run): an expert without a token (measure at
#    B 1 T 2; theory --routing worst), --schemes zero3, --precision mixed,
#    --experts-impl eager, --grad-accum 2, --lora-r, --freeze.
#
# About 4 s of CPU (18 s wall on 2 cores at load 15). Exit 0 pass, 1 fail, 77 skip (no python3), 99 error.
name=ds_moe_wrapper
needs=${ZS_BUILDDIR:-.}/tests/json_agree
. "${srcdir:-.}/tests/moe_lib.sh"

run="--framework deepspeed --wrapper deepspeed --ds-reduce-bucket 100000 --seq 32 --batch 2 --steps 3
 --torch-device cpu --attn eager --torch-version 1.13 --optimizer-impl single --precision fp32"
# agree TAG CONFIG SCHEME N: measure, theory --routing (its file), json_agree
agree() {
	# shellcheck disable=SC2086
	OPENBLAS_NUM_THREADS=1 "$zerosim" measure -q $run --model "$2" --schemes "$3" --world "$4" \
		--out "$tmp/m-$1.json" 2>"$tmp/err" || { fail "$1: measure: $(cat "$tmp/err")"; return; }
	# shellcheck disable=SC2086
	"$zerosim" theory $run --model "$2" --schemes "$3" --world "$4" --routing "$tmp/m-$1.json" \
		--out "$tmp/t-$1.json" 2>"$tmp/err" || { fail "$1: theory: $(cat "$tmp/err")"; return; }
	if "$top/tests/json_agree" "$tmp/m-$1.json" "$tmp/t-$1.json" >"$tmp/out" 2>&1; then
		echo "ok: $1: theory --routing FILE = measure: $(head -1 "$tmp/out")"
	else
		fail "$1: $(cat "$tmp/out")"
	fi
}
for s in zero1 zero2; do
	for w in 1 2 3; do
		agree "mixtral-$s-$w" "$tmp/config.json" $s $w
	done
done
# every rank's marks are in measure's and the theory's rows (json_agree
# compares them); at N = 2 zero1's ranks peak apart by their routing
python3 - "$tmp/m-mixtral-zero1-2.json" "$tmp/t-mixtral-zero1-2.json" <<'PY' || fail "zero1 N = 2's rows"
import json, sys
m, t = (json.load(open(f)) for f in sys.argv[1:])
mr, tr = m["runs"][0], t["rows"][0]["schedule"]
bad = []
if len(mr["per_rank"].get("marks") or []) != 2 or len(tr["per_rank"].get("marks") or []) != 2:
    bad.append("every rank's marks are not in both rows")
elif len(mr["per_rank"]["marks"][0]) < 29:
    bad.append("rank 0 has %d marks" % len(mr["per_rank"]["marks"][0]))
rt = mr["routing"]["tokens_per_expert"]
if rt[0] == rt[1]:
    bad.append("the two ranks route alike: the row cannot tell each rank's list")
for b in bad:
    print("ds_moe_wrapper: FAIL: zero1 N = 2: " + b, file=sys.stderr)
sys.exit(1 if bad else 0)
PY

# the qwen mixtures (tests/qwen_moe.sh's and tests/qwen3_moe.sh's tiny configs)
. "${srcdir:-.}/tests/moe_configs.sh"
moe_configs "$tmp"
agree qwen2_moe-zero2-2 "$tmp/qwen2_moe.json" zero2 2
agree qwen3_moe-zero2-2 "$tmp/qwen3_moe.json" zero2 2

# the check can fail: 8 tokens moved in each block of rank 0's last step
python3 - "$tmp/m-mixtral-zero1-2.json" "$tmp/moved.json" <<'PY' || exit 99
import json, sys
d = json.load(open(sys.argv[1]))
for blk in d["runs"][0]["routing"]["tokens_per_expert"][0][-1]:
    lo, hi = blk.index(min(blk)), blk.index(max(blk))
    blk[lo] -= 8
    blk[hi] += 8
json.dump(d, open(sys.argv[2], "w"))
PY
# shellcheck disable=SC2086
"$zerosim" theory $run --model "$tmp/config.json" --schemes zero1 --world 2 --routing "$tmp/moved.json" \
	--out "$tmp/t-moved.json" 2>"$tmp/err" || fail "theory of the moved token: $(cat "$tmp/err")"
if "$top/tests/json_agree" "$tmp/m-mixtral-zero1-2.json" "$tmp/t-moved.json" >"$tmp/out" 2>&1; then
	fail "8 tokens moved in the routing file: the theory still agrees with measure"
else
	echo "ok: 8 tokens moved: $(head -1 "$tmp/out")"
fi

# refuse LABEL PATTERN RC COMMAND...: exit RC, one line naming PATTERN, no file
refuse() {
	label=$1 pattern=$2 want=$3
	shift 3
	rm -f "$tmp/x.json"
	"$@" --out "$tmp/x.json" 2>"$tmp/err"
	rc=$?
	if [ $rc -ne "$want" ] || ! grep -q -- "$pattern" "$tmp/err" || [ "$(wc -l <"$tmp/err")" -ne 1 ] ||
		[ -e "$tmp/x.json" ]; then
		fail "$label: exit $rc, '$(cat "$tmp/err")' (want $want and '$pattern')"
	else
		echo "ok: refused: $label"
	fi
}
cfg=$tmp/config.json
# shellcheck disable=SC2086
{
	refuse "measure, an idle expert" "gets no token: under --wrapper deepspeed its .grad stays None" 1 \
		"$zerosim" measure -q $run --model "$cfg" --schemes zero1 --world 1 --batch 1 --seq 2
	refuse "theory --routing worst" "gets no token: under --wrapper deepspeed its .grad stays None" 2 \
		"$zerosim" theory $run --model "$cfg" --schemes zero2 --world 1 --routing worst
	refuse "zero3" "not with --wrapper deepspeed --schemes zero3" 2 \
		"$zerosim" theory $run --model "$cfg" --schemes zero3 --world 1
	refuse "measure zero3" "not with --wrapper deepspeed --schemes zero3" 2 \
		"$zerosim" measure -q $run --model "$cfg" --schemes zero3 --world 1
	refuse "bf16" "not with --wrapper deepspeed --precision mixed" 2 \
		"$zerosim" theory $run --model "$cfg" --schemes zero1 --world 1 --precision mixed
	refuse "fused experts" "--experts-impl eager with --framework deepspeed: not described yet" 2 \
		"$zerosim" theory $run --model "$cfg" --schemes zero1 --world 1 --experts-impl eager
	refuse "--grad-accum" "not with --grad-accum 2" 2 \
		"$zerosim" theory $run --model "$cfg" --schemes zero1 --world 1 --grad-accum 2
	refuse "LoRA" "not with --freeze or --lora-r" 2 \
		"$zerosim" theory $run --model "$cfg" --schemes zero1 --world 1 --lora-r 4
	refuse "--freeze" "not with --freeze or --lora-r" 2 \
		"$zerosim" measure -q $run --model "$cfg" --schemes zero2 --world 1 --freeze embeddings
}
exit $status

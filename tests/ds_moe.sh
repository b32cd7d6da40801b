#!/bin/sh
# ds_moe — the tiny mixtral of tests/moe_step.sh (d 64, F 96, 2 blocks,
# 8 heads, 4 experts, top 2; B 4, T 16) under --framework deepspeed's dp,
# zero1, zero2 and zero3 (docs/schedule.md, "Mixtures of experts",
# DeepSpeed): the experts are ordinary parameters to DeepSpeed, so its
# step is a dense block's with the routed tensors of the paper's
# (moe_fw.sh); under zero3 the sparse-MoE block is one z3 leaf
# (set_z3_leaf_modules: its router and every expert fetched together,
# its grads reduced together after its backward).
#
#  - theory --routing FILE = measure to the byte (resident, peak, every
#    category, comm, each rank's peak; tests/json_agree) over every
#    precision (fp32, mixed) and recompute (none, selective, full) at
#    N = 1, 2, 3, the four schemes and both units (24 rows a sweep, about
#    0.3 s each); --routing balanced departs from each;
#  - each zero1, zero2 and zero3 row is DeepSpeed's: its peak holds the
#    reduce bucket, reduce_bucket_size (5e8) elements of the grad type, and
#    N = 2's ranks peak apart by their largest experts' scratch (some row);
#  - zero3's leaf, from the config by hand: in step 1 (the trace recorded,
#    each module released after it runs) the most params whole at once in
#    forward are the block's router and experts (and a shared expert), and
#    backward makes their grads as one block of that size;
#  - the check can fail: one token moved, in the measured file's zero2
#    runs, from one expert of rank 0's busiest block to its busiest expert (the sums
#    kept, so the file is still the sweep's) makes the theory disagree;
#  - an expert that gets no token (grad None: DeepSpeed's hook never fires
#    for it and get_flat_partition zero-fills it) is refused by name under
#    dp, and zero1 and zero2 at N > 1 or with --grad-accum: measure at
#    B·T·k < E (exit 1, no file), theory under --routing worst, balanced at
#    B·T·k < E, and a file with a zero count (exit 2, no file); under zero3
#    (the z3 leaf zero-fills its grad in the leaf's block) it is taken:
#    theory --routing FILE = measure with one token a step (fp32, mixed;
#    recompute none, full; N = 1-3; both units); under zero1 and zero2 at
#    N = 1 too (the epilogue's zeros_like, held to step(): the same
#    points, N = 1, with each phase's peak; the zeros counted by hand in
#    fp32 zero1's peak); on the mixtral the starved experts' weights
#    unmoved by Adam's first step at two learning rates under zero3, zero1
#    and zero2, the hit ones moved;
#    the theory's zero3 rows are the exact step ("schedule" not null, no
#    star).
#
# About 4 s. Exit 0 pass, 1 fail, 77 skip (no python3), 99 error.
name=ds_moe
needs=${ZS_BUILDDIR:-.}/tests/json_agree
. "${srcdir:-.}/tests/moe_lib.sh"

base="--model $tmp/config.json --seq 16 --batch 4 --framework deepspeed --schemes dp,zero1,zero2,zero3 --unit model,layer
 --steps 3 --world 1,2,3"
for p in fp32 mixed; do
	for rc in none selective full; do
		sweep_agree "$p-$rc" "$base --precision $p --recompute $rc"
	done
done

# DeepSpeed's rows: the bucket in every peak; N = 2's ranks apart somewhere
python3 - "$tmp/m-fp32-none.json" "$tmp/m-mixed-none.json" <<'PY' || status=1
import json, sys
bad = []
for path, g in zip(sys.argv[1:], (4, 2)):
    runs = json.load(open(path))["runs"]
    for r in (r for r in runs if r["scheme"] != "dp"):  # DeepSpeed's dp is the paper's: no bucket
        b = r["peak_breakdown"].get("buckets")
        if b != 500000000 * g:
            bad.append("%s %s N=%d %s: buckets at the peak %s, not 5e8 x %d" % (path, r["scheme"], r["world"], r["unit"], b, g))
    apart = [r for r in runs if r["world"] == 2 and len(set(r["per_rank"]["peak_bytes"])) == 2]
    if not apart:
        bad.append("%s: no N = 2 row whose ranks peak apart" % path)
for b in bad:
    print("ds_moe: FAIL: " + b)
print("ok: every zero1, zero2 and zero3 peak holds DeepSpeed's reduce bucket; N = 2's ranks peak apart" if not bad else "", end="")
sys.exit(1 if bad else 0)
PY
echo

# the check can fail: one token moved in rank 0's busiest block
python3 - "$tmp/m-fp32-none.json" "$tmp/moved.json" <<'PY' || exit 99
import json, sys
m = json.load(open(sys.argv[1]))
for r in (r for r in m["runs"] if r["scheme"] == "zero2"):  # its rows alone: the mismatch is DeepSpeed's
    c = r["routing"]["tokens_per_expert"][0]  # rank 0: [step][block][expert]
    s, b, e = max(((s, b, e) for s in range(len(c)) for b in range(len(c[s])) for e in range(len(c[s][b]))),
                  key=lambda x: c[x[0]][x[1]][x[2]])
    o = min((x for x in range(len(c[s][b])) if x != e), key=lambda x: -c[s][b][x])
    c[s][b][e] += 1
    c[s][b][o] -= 1
json.dump(m, open(sys.argv[2], "w"))
PY
# shellcheck disable=SC2086
"$zerosim" theory $base --precision fp32 --recompute none --routing "$tmp/moved.json" --out "$tmp/moved-t.json" ||
	{ echo "ds_moe: theory on the moved file failed" >&2; exit 99; }
if "$needs" "$tmp/m-fp32-none.json" "$tmp/moved-t.json" >"$tmp/out" 2>&1; then
	fail "a token moved in the file, the theory still agrees: $(head -1 "$tmp/out")"
else
	echo "ok: a token moved in the file: $(head -1 "$tmp/out")"
fi

# refused by name: one line, exit $1, no file (what the rest of the line names)
refused() {
	want=$1 what=$2
	shift 2
	rm -f "$tmp/r.json"
	"$zerosim" "$@" --out "$tmp/r.json" >"$tmp/out" 2>"$tmp/err"
	rc=$?
	if [ $rc -eq "$want" ] && [ "$(wc -l <"$tmp/err")" -eq 1 ] && grep -q -- "$what" "$tmp/err" &&
		[ ! -e "$tmp/r.json" ]; then
		echo "ok: refused: $(cat "$tmp/err")"
	else
		fail "$*: exit $rc, '$(cat "$tmp/err")', wanted $want and '$what'"
	fi
}
starved="under --framework deepspeed its grad stays None"
one="--model $tmp/config.json --seq 1 --batch 1 --framework deepspeed --schemes zero2 --world 2"
# shellcheck disable=SC2086
refused 1 ": expert [0-9] of block 0 got no token on rank 0 at step 1: under --framework deepspeed" measure -q $one
# shellcheck disable=SC2086
refused 2 "expert 2 of every block under --routing balanced gets no token (--schemes zero2): $starved" theory $one
# zero1 and zero2 are followed at N = 1 alone: a sweep with N = 2 among its worlds is refused
# shellcheck disable=SC2086
refused 2 "expert 2 of every block under --routing balanced gets no token (--schemes zero1, zero2): $starved" \
	theory $one --world 1,2 --schemes zero1,zero2,zero3
# shellcheck disable=SC2086
refused 2 "expert 2 of every block under --routing worst gets no token (--schemes dp, zero1): $starved" \
	theory $base --schemes dp,zero1,zero3 --routing worst
# zero3's z3 leaf gives a starved expert torch.zeros_like before the
# leaf's one reduce (stage3.py 1197-1205), in the leaf's grads block: taken.
# One token (B = T = 1, k < E): every step starves E - k experts a block
# on each rank; theory --routing FILE = measure to the byte, and the file
# must hold a zero count (else the rows test nothing starved).
# starved_agree TAG SCHEMES WORLDS [MEASURE...]: for fp32 and mixed,
# recompute none and full, one token a step, measure into
# $tmp/TAG-PRECISION-RECOMPUTE.json and theory --routing FILE must agree
# with it to the byte, the file holding a zero count.
starved_agree() {
	tag=$1 schemes=$2 worlds=$3
	shift 3
	for p in fp32 mixed; do
		for rc in none full; do
			c="--model $tmp/config.json --seq 1 --batch 1 --framework deepspeed --schemes $schemes --unit model,layer"
			c="$c --steps 2 --world $worlds --precision $p --recompute $rc"
			m=$tmp/$tag-$p-$rc.json
			# shellcheck disable=SC2086
			OPENBLAS_NUM_THREADS=1 "$zerosim" measure -q $c "$@" --out "$m" || { echo "$name: measure $c failed" >&2; exit 99; }
			# shellcheck disable=SC2086
			"$zerosim" theory $c --routing "$m" --out "$tmp/st.json" || { echo "$name: theory $c failed" >&2; exit 99; }
			zeros=$(tr -d ' \n\t' <"$m" | grep -o '"tokens_per_expert":[][0-9,]*' | grep -c '[[,]0[],]')
			if [ "$zeros" -gt 0 ] && "$needs" "$m" "$tmp/st.json" >"$tmp/out" 2>&1; then
				echo "ok: $schemes N = $worlds $p recompute $rc, a starved expert in each of $zeros runs: $(head -1 "$tmp/out")"
			else
				fail "$schemes N = $worlds $p recompute $rc starved: $zeros runs with a zero count; $(cat "$tmp/out")"
			fi
		done
	done
}
starved_agree s3 zero3 1,2,3
# ZeRO-1 and ZeRO-2 at N = 1 (no --grad-accum, no --offload): a starved
# expert's grads stay None, no hook puts them in the bucket, and the
# epilogue's get_flat_partition gives each of its params a zeros_like in
# the params' dtype (stage_1_and_2.py 1723-1729), made after the last
# reduce and held in averaged_gradients to step() (1906): util/ds_coord.h's
# ds_coord_starved. One token a step: theory --routing FILE = measure to
# the byte with a timeline (each phase's peak: mixed's zeros are in the
# reduce's), fp32 and mixed, recompute none and full, both units; the
# file must hold a zero count. Without the zeros every one of these fails.
starved_agree s12 zero1,zero2 1 --timeline
# The zeros by hand (fp32, zero1, unit model): its peak is the epilogue's
# (the buckets, the model's full grads and the zeros beside the grad
# partition), so grad32 there is Ψ·4 + 4·3·d·F for each (block, expert)
# the peak step's routing left at 0 (mixtral: w1, w2, w3 of (F, d)).
python3 - "$tmp/config.json" "$tmp/s12-fp32-none.json" <<'PY' || status=1
import json, sys
c = json.load(open(sys.argv[1]))
d, F = c["hidden_size"], c.get("moe_intermediate_size", c["intermediate_size"])  # the experts' width
r = next(r for r in json.load(open(sys.argv[2]))["runs"] if r["scheme"] == "zero1" and r["unit"] == "model")
psi = r["resident_breakdown"]["grad32"] // 4
steps = r["routing"]["tokens_per_expert"][0]
want = {psi * 4 + 4 * 3 * d * F * sum(n == 0 for blk in s for n in blk) for s in steps}
got = r["peak_breakdown"]["grad32"]
if got not in want or got == psi * 4:
    print("ds_moe: FAIL: zero1's starved zeros: grad32 at the peak %d B, by hand one of %s" % (got, sorted(want)))
    sys.exit(1)
print("ok: zero1 N = 1, one token: grad32 at the peak %d B = the partition %d B + the starved experts' zeros %d B"
      % (got, psi * 4, got - psi * 4))
PY
# shellcheck disable=SC2086
"$zerosim" theory $base --schemes zero3 --routing worst --out "$tmp/w.json" ||
	fail "theory zero3 --routing worst (starved experts) refused"
# Numbers (the tiny mixtral, fp32, N = 1, one step, one token; zero3's
# leaf, zero1's and zero2's epilogue): a starved expert's grads are zeros, so Adam's first step moves none of its weights
# and --lr 1e-3 and 2e-3 leave them bitwise the same, while the hit ones
# differ (each expert's w1, w2, w3 after the block's attention and router
# in the flat vector: util/step.c's order).
if grep -q '"mixtral"' "$tmp/config.json"; then
	for s in zero3 zero1 zero2; do
		for lr in 0.001 0.002; do
			OPENBLAS_NUM_THREADS=1 "$zerosim" measure -q --model "$tmp/config.json" --seq 1 --batch 1 --framework \
				deepspeed --schemes "$s" --world 1 --steps 1 --lr $lr --dump-weights "$tmp/w$lr.json" --out "$tmp/s.json" ||
				exit 99
		done
		python3 - "$tmp/config.json" "$tmp/s.json" "$tmp/w0.001.json" "$tmp/w0.002.json" "$s" <<'PY' || status=1
import json, sys
c = json.load(open(sys.argv[1]))
d, F, E, V = c["hidden_size"], c["intermediate_size"], c["num_local_experts"], c["vocab_size"]
kv = c["num_key_value_heads"] * d // c["num_attention_heads"]
cnt = json.load(open(sys.argv[2]))["runs"][0]["routing"]["tokens_per_expert"][0][0]  # rank 0, step 1
a, b = (json.load(open(f))["weights"] for f in sys.argv[3:5])
head = d + (d + 2 * kv) * d + d * d + d + E * d  # input_layernorm, q/k/v, o_proj, post_attention_layernorm, gate
bad, seen = [], {0: 0, 1: 0}
for bl, row in enumerate(cnt):
    for e, n in enumerate(row):
        lo = V * d + bl * (head + 3 * E * d * F) + head + e * 3 * d * F
        same = a[lo:lo + 3 * d * F] == b[lo:lo + 3 * d * F]
        seen[n > 0] += 1
        if same != (n == 0):
            bad.append("block %d expert %d (%d tokens): %s" % (bl, e, n, "unchanged" if same else "moved"))
if bad or not seen[0] or not seen[1]:
    print("ds_moe: FAIL: %s's starved experts: %s (%s starved, %s hit)" % (sys.argv[5], "; ".join(bad), seen[0], seen[1]))
    sys.exit(1)
print("ok: %s, one token: the %d starved experts' weights the same under --lr 1e-3 and 2e-3 (zero grads), the %d hit moved" % (sys.argv[5], seen[0], seen[1]))
PY
	done
else
	echo "ok: (the starved experts' weights are checked on the tiny mixtral only)"
fi
# a paper run's file with a zero count (its keys the sweep's: the scheme, unit and N are the run's own)
python3 - "$tmp/m-fp32-none.json" "$tmp/zero.json" <<'PY' || exit 99
import json, sys
m = json.load(open(sys.argv[1]))
for r in m["runs"]:
    for rank in r["routing"]["tokens_per_expert"]:
        blk = rank[1][1]  # step 2, block 1: its first expert's tokens to the others, B·T = 64 at most each
        for e in range(1, len(blk)):
            n = min(blk[0], 64 - blk[e])
            blk[e] += n
            blk[0] -= n
json.dump(m, open(sys.argv[2], "w"))
PY
# shellcheck disable=SC2086
refused 2 "expert 0 of block 1 on rank 0 at step 2 of dp N = 1 --unit model gets no token (--schemes [a-z0-9, ]*): $starved" theory $base --precision fp32 \
	--routing "$tmp/zero.json"
# shellcheck disable=SC2086
"$zerosim" theory $base --schemes zero2,zero3 --out "$tmp/z3.json" 2>"$tmp/z3.txt" || fail "theory zero3: $(cat "$tmp/z3.txt")"
# shellcheck disable=SC2086
"$zerosim" theory $base --schemes zero2,zero3 >"$tmp/z3.txt" 2>&1 || fail "theory zero3: $(cat "$tmp/z3.txt")"
if ! grep -q "not available" "$tmp/z3.txt" && grep -q "^ *3  zero3 .*[0-9]$" "$tmp/z3.txt" && python3 - "$tmp/z3.json" <<'PY'; then
import json, sys
rows = json.load(open(sys.argv[1]))["rows"]
sys.exit(0 if rows and all(r["schedule"] is not None for r in rows) else 1)
PY
	echo "ok: theory's zero3: DeepSpeed's exact step, no star"
else
	fail "theory's zero3 rows: $(cat "$tmp/z3.txt")"
fi

# zero3's z3 leaf, its size from the config by hand (fp32, N = 2: at N = 1
# DeepSpeed gathers nothing, a view; every size even, so the leaf's call
# of several params holds n each, docs/schedule.md; step 1)
OPENBLAS_NUM_THREADS=1 "$zerosim" measure -q --model "$tmp/config.json" --seq 16 --batch 4 --framework deepspeed \
	--schemes zero3 --world 2 --steps 1 --timeline --out "$tmp/tl.json" || { echo "ds_moe: measure --timeline failed" >&2; exit 99; }
python3 - "$tmp/config.json" "$tmp/tl.json" <<'PY' || status=1
import json, sys
c = json.load(open(sys.argv[1]))
d = c["hidden_size"]
E = c.get("num_local_experts", c.get("num_experts"))
F = c.get("moe_intermediate_size", c["intermediate_size"])
S = c.get("shared_expert_intermediate_size", 0)
leaf = 4 * (E * d + E * 3 * F * d + (3 * S * d + d if S else 0))  # router, experts, shared expert and its gate
live = most = 0
grads = []
for e in json.load(open(sys.argv[2]))["runs"][0]["timeline"]:
    if e["category"] == "gathered_params" and e["phase"] == "forward":
        live += e["bytes"] if e["op"] == "alloc" else -e["bytes"]
        most = max(most, live)
    if e["category"] == "full_grads" and e["phase"] == "backward" and e["op"] == "alloc":
        grads.append(e["bytes"])
if most == leaf and leaf in grads and max(grads) == leaf:
    print("ok: zero3's leaf: %d B whole at most in step 1's forward and one grads block of it, the router and every expert" % leaf)
else:
    print("ds_moe: FAIL: zero3's leaf is %d B: step 1's forward held at most %d B of params, its grads blocks %s" % (leaf, most, sorted(set(grads))))
    sys.exit(1)
PY
exit $status

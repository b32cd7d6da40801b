#!/bin/sh
# moe_fused — issue #25's transformers 5.x fused experts measured
# (--experts-impl eager; --framework torch --wrapper none, fp32):
# engine/ag_exec.c runs util/autograd.c's eager experts (moe_fused_fwd,
# moe_fused_bwd: integrations/moe.py at 8b584a67 of
# huggingface/transformers, its Experts class, lines 29-65) over the two
# fused parameters a block, gate_up_proj (E, 2F, d) and down_proj (E, d,
# F), each hit expert's SelectBackward0 making zeros of the whole
# parameter with its slice copied in, summed in the parameter's input
# buffer (out of place in 1.13, in place in 2.6), on mixtrals of
# tests/moe_lib.sh's shape (d 64, F 96, 2 blocks) with 4 or 8 experts,
# top 1 or 2:
#
#  - the run records its routing and the theory given it back (--routing
#    FILE) equals the measurement to the byte: bytes between steps, peak,
#    every category, each phase's peak under --timeline (tests/json_agree)
#    and every mark; the same file with the last step's last block on k
#    experts departs, and so does the theory of 4.x's ModuleList under the
#    measured routing (the whole-parameter gradients are what the fused
#    rows hold), and the balanced routing's theory where the run's is
#    uneven;
#  - covering: E 4 top 2 and E 8 top 1 at B 2 T 16, E 8 top 2 at B 2 T 16
#    (its busiest expert 19 of 64 assignments) and B 2 T 8, E 4 top 1 at B
#    2 T 8; zero_grad set_to_none (1.13), PyTorch 2.6 (set_to_none and
#    zeros), foreach Adam; an expert without a token in a step (every
#    block's same number of hit experts in each step: the lists keep one
#    shape) — in the first step too, which 4.x's ModuleList refuses (its
#    .grad would stay None) and the fused layout does not (the block's
#    parameters get their whole gradient from the hit experts);
#  - the same weights and tokens as the ModuleList run (engine/ag_exec.c's
#    fused_rows maps the fused rows onto the flat vector's w1, w3, w2):
#    the same routing, the losses within 1e-5 relative and the final
#    weights within 1e-5 absolute but for at most 1 in 10,000 (Adam
#    moves an element whose gradient is at rounding level by lr either
#    way: up to 2 lr a step apart; 1 of 329,024, by 1.95e-5, on one host);
#    the digests differ (one mm over the [n, 2F] rows where the ModuleList
#    sums two: the input gradient rounds otherwise);
#  - refused by name, exit 2: grouped_mm, batched_mm, the wrappers, bf16
#    autocast, --grad-accum, a qwen2_moe.
#
# About 8 s of CPU. Exit 0 pass, 1 fail, 77 skip (no python3), 99 hard error.
name=moe_fused
needs="${ZS_BUILDDIR:-.}/tests/json_agree"
src=${srcdir:-.}
. "$src/tests/moe_lib.sh"
base="--framework torch --wrapper none --torch-device cpu --precision fp32 --world 1 --schemes dp"
# E K: the tiny mixtral with E experts, top K, into $tmp/cE-K.json
mk() {
	sed "s/\"num_local_experts\": 4, \"num_experts_per_tok\": 2/\"num_local_experts\": $1, \"num_experts_per_tok\": $2/" \
		"$tmp/config.json" >"$tmp/c$1-$2.json"
	grep -q "\"num_local_experts\": $1, \"num_experts_per_tok\": $2" "$tmp/c$1-$2.json" || exit 99
}
mk 4 2
mk 8 1
mk 8 2
mk 4 1

# agree E K B T OPTS [FLAGS]: measure --experts-impl eager (--timeline)
# of cE-K at B T under OPTS, the routing it records, and the theory given
# it (equal; marks equal), of 4.x's ModuleList (departs; refused where an
# expert is idle in the first step) and, where the run's routing is
# uneven, balanced (departs); FLAGS "moved": given the file with the last
# block of the last step on k experts, the theory departs (where that
# block binds the peak); "idle": some block of some step leaves an expert
# without a token
agree() {
	cfg=$tmp/c$1-$2.json tag=$1-$2-$3-$4-$(echo "$5" | tr -cd 'a-z0-9.')
	# shellcheck disable=SC2086
	OPENBLAS_NUM_THREADS=1 "$zerosim" measure -q --model "$cfg" --batch "$3" --seq "$4" $base $5 --experts-impl eager \
		--timeline --out "$tmp/m-$tag.json" 2>"$tmp/err" || { fail "$tag: measure: $(cat "$tmp/err")"; return; }
	python3 - "$tmp/m-$tag.json" "$1" "$2" "$3" "$4" "$tmp/moved-$tag.json" "${6:-}" <<'PY' || { fail "$tag: the routing"; return; }
import json, sys
m = json.load(open(sys.argv[1]))
E, K, B, T = (int(x) for x in sys.argv[2:6])
run = m["runs"][0]
if m["config"].get("experts_impl") != "eager":
    sys.exit("moe_fused: FAIL: the measured file's config names no experts_impl eager")
steps = run["routing"]["tokens_per_expert"][0]
if any(len(c) != E or sum(c) != B * T * K for st in steps for c in st):
    sys.exit("moe_fused: FAIL: the recorded routing is no %d assignments over %d experts: %s" % (B * T * K, E, steps))
if "idle" in sys.argv[7] and not any(0 in c for st in steps for c in st):
    sys.exit("moe_fused: FAIL: no expert is left without a token any more: %s" % steps)
print("   routing (tokens per expert, each step's blocks): %s" % steps)
steps[-1][-1] = [B * T if e < K else 0 for e in range(E)]
json.dump(m, open(sys.argv[6], "w"))
PY
	for r in m $(case "${6:-}" in *moved*) echo moved ;; esac) modulelist balanced; do
		arg=$tmp/$r-$tag.json ex=eager
		case $r in modulelist) arg=$tmp/m-$tag.json ex=modulelist ;; balanced) arg=balanced ;; esac
		# shellcheck disable=SC2086
		if ! "$zerosim" theory --model "$cfg" --batch "$3" --seq "$4" $base $5 --experts-impl $ex --routing "$arg" \
			--out "$tmp/t-$r-$tag.json" 2>"$tmp/err"; then
			# 4.x's ModuleList: an expert idle in the first step keeps no .grad
			if [ $r = modulelist ] && grep -q "gets no token in the run's first step" "$tmp/err"; then
				echo "ok: $tag: 4.x's ModuleList under the run's routing is refused: $(cat "$tmp/err")"
				continue
			fi
			fail "$tag: theory --routing ($r): $(cat "$tmp/err")"
			return
		fi
		"$top/tests/json_agree" "$tmp/m-$tag.json" "$tmp/t-$r-$tag.json" >"$tmp/out" 2>&1
		st=$?
		if [ $r = m ] && [ $st = 0 ]; then
			python3 -c 'import json, sys
m, t = (json.load(open(f)) for f in sys.argv[1:3])
mk, tk = m["runs"][0]["marks"], t["rows"][0]["schedule"]["marks"]
sys.exit(0 if mk == tk and len(mk) > 20 else "moe_fused: FAIL: marks: measured %s, theory %s" % (mk, tk))' \
				"$tmp/m-$tag.json" "$tmp/t-m-$tag.json" || { fail "$tag: the marks"; return; }
			echo "ok: $tag: theory --routing (measure's own) equals measure, every mark too: $(head -1 "$tmp/out")"
		elif [ $r = balanced ] && [ $st = 0 ] && python3 -c 'import json, sys
s = json.load(open(sys.argv[1]))["runs"][0]["routing"]["tokens_per_expert"][0]
sys.exit(0 if all(max(c) - min(c) <= 1 for st in s for c in st) else 1)' "$tmp/m-$tag.json"; then
			echo "ok: $tag: the run's routing is balanced, as the theory's default"
		elif [ $r != m ] && [ $st = 1 ]; then
			echo "ok: $tag: the theory under $r departs: $(head -1 "$tmp/out")"
		else
			fail "$tag: theory --routing ($r) against measure: $(cat "$tmp/out")"
		fi
	done
}

v113="--torch-version 1.13 --steps 3 --optimizer-impl single"
agree 4 2 2 16 "$v113 --zero-grad zeros" moved
agree 8 1 2 16 "$v113 --zero-grad zeros --seed 8" moved
agree 8 2 2 16 "$v113 --zero-grad zeros"
agree 8 2 2 8 "$v113 --zero-grad zeros --seed 5"
agree 4 1 2 8 "$v113 --zero-grad zeros" moved
agree 4 2 2 16 "$v113 --zero-grad none"
agree 4 2 2 16 "--torch-version 1.13 --steps 3 --optimizer-impl foreach --zero-grad zeros" moved
agree 4 2 2 16 "--torch-version 2.6 --attn eager --steps 3 --optimizer-impl single --zero-grad none"
agree 4 2 2 16 "--torch-version 2.6 --attn eager --steps 3 --optimizer-impl single --zero-grad zeros" moved
agree 4 1 1 2 "--torch-version 1.13 --steps 2 --optimizer-impl single --zero-grad zeros --seed 3" "idle moved"
agree 4 1 1 2 "--torch-version 2.6 --attn eager --steps 2 --optimizer-impl single --zero-grad none --seed 3" idle

# the ModuleList run of the same weights and tokens: the same routing,
# losses within 1e-5 relative, final weights within 1e-5 absolute
for ex in modulelist eager; do
	# shellcheck disable=SC2086
	OPENBLAS_NUM_THREADS=1 "$zerosim" measure -q --model "$tmp/c8-2.json" --batch 2 --seq 16 $base $v113 \
		--zero-grad zeros --experts-impl $ex --out "$tmp/same-$ex.json" --dump-weights "$tmp/w-$ex.json" 2>"$tmp/err" ||
		{ fail "the $ex run: $(cat "$tmp/err")"; break; }
done
[ -s "$tmp/w-eager.json" ] && python3 - "$tmp/same-modulelist.json" "$tmp/same-eager.json" "$tmp/w-modulelist.json" \
	"$tmp/w-eager.json" <<'PY' || status=1
import json, sys
a, b = (json.load(open(f))["runs"][0] for f in sys.argv[1:3])
wa, wb = (json.load(open(f))["weights"] for f in sys.argv[3:5])
bad = []
if a["routing"] != b["routing"]:
    bad.append("the routings differ")
if any(abs(x - y) > 1e-5 * abs(x) for x, y in zip(a["losses"], b["losses"])) or len(a["losses"]) != 3:
    bad.append("losses %s against %s" % (b["losses"], a["losses"]))
# Adam moves an element by about lr a step whatever its gradient's size, so
# an element whose gradient is at rounding level in both runs may move
# either way: a few such, never more than 2 lr a step apart, are rounding
# (the BLAS kernels a host picks decide which); more than 1 in 10,000 (a
# row of the fused layout mapped wrong moves 64 or more) is not
diffs = [abs(x - y) for x, y in zip(wa, wb)]
most = max(diffs) if len(wa) == len(wb) and diffs else float("inf")
off = sum(1 for d in diffs if d > 1e-5)
if most > 2 * 1e-3 * 3 or off > len(wa) // 10000 or len(wa) != len(wb):
    bad.append("final weights apart by %g, %d of them by more than 1e-5 (%d and %d values)"
               % (most, off, len(wa), len(wb)))
for x in bad:
    print("moe_fused: FAIL: eager against modulelist: %s" % x, file=sys.stderr)
if not bad:
    print("ok: eager against modulelist (E 8 top 2, B 2 T 16): the same routing, losses %s and %s, final weights "
          "within %.3g, %d of %d by more than 1e-5, digests %s and %s" % (b["losses"], a["losses"], most, off, len(wa),
                                                            b["weights_digest"], a["weights_digest"]))
sys.exit(1 if bad else 0)
PY

# refused by name, exit 2, no file
refuse() {
	want=$1
	shift
	rm -f "$tmp/r.json"
	OPENBLAS_NUM_THREADS=1 "$zerosim" measure -q --batch 2 --seq 16 "$@" --out "$tmp/r.json" 2>"$tmp/err"
	st=$?
	if [ $st = 2 ] && [ ! -e "$tmp/r.json" ] && grep -q -- "$want" "$tmp/err" && [ "$(wc -l <"$tmp/err")" = 1 ]; then
		echo "ok: refused: $(cat "$tmp/err")"
	else
		fail "not refused as '$want' (exit $st): $(cat "$tmp/err")"
	fi
}
. "$src/tests/moe_configs.sh"
moe_configs "$tmp"
# shellcheck disable=SC2086
{
	c="--model $tmp/c4-2.json $v113 --zero-grad zeros"
	refuse "--experts-impl grouped_mm: transformers 5.x's grouped_mm experts forward (integrations/moe.py) is not described yet" \
		$c $base --experts-impl grouped_mm
	refuse "--experts-impl batched_mm: transformers 5.x's batched_mm experts forward" $c $base --experts-impl batched_mm
	refuse "--experts-impl eager with a --wrapper other than none: not described yet" \
		$c $(echo "$base" | sed 's/--wrapper none/--wrapper ddp/') --experts-impl eager
	refuse "--experts-impl eager with a --precision other than fp32: not described yet" \
		$c $(echo "$base" | sed 's/--precision fp32/--precision amp-bf16/') --experts-impl eager
	refuse "--experts-impl eager with --grad-accum: not described yet" $c $base --grad-accum 2 --experts-impl eager
	refuse "--experts-impl eager: .* (qwen2_moe) is not described with fused experts yet" \
		--model "$tmp/qwen2_moe.json" $v113 --zero-grad zeros $base --experts-impl eager
}
exit $status

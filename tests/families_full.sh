#!/bin/sh
# families_full — `make check-families-full` (not make check, not .ci/run:
# minutes on 2 cores; docs/design.md, "Building and testing"). theory =
# measure to the byte (tests/json_agree: resident, peak, every category,
# comm, every rank's bytes) over the full product, for a tiny model of each
# family: gpt2, llama, qwen2, qwen3, gemma2, gemma3_text, phi3 (d 64, 2
# blocks, vocabulary 256; theory_vs_measure.sh's shapes; seq 16, batch 2)
# and mixtral, qwen2_moe, qwen3_moe (moe_lib.sh's, qwen_moe.sh's and
# qwen3_moe.sh's; seq 16, batch 4; the theory given the measured routing,
# --routing FILE), each of
#
#   N 1, 2, 3, 4, 8  x  --unit model, layer
#   x --precision fp32, mixed, amp-bf16, amp-fp16 (measure's four)
#   x --framework paper, torch, deepspeed: dp, zero1, zero2, zero3 each
#     (the framework's defaults; and DeepSpeed's zero3 again with
#     --ds-persist 0, every tensor partitioned: at the default 1e5 every
#     tensor of these models persists, whole)
#   x --recompute none, selective, full
#
# over 2 steps. Each sweep (a family, precision, framework and recompute
# mode: its 40 points, or zero3 persist 0's 10) is measured and predicted
# whole; a sweep measure refuses (exit 2) is split into its points, one
# run each, so that every point is either compared or listed as refused
# with measure's reason (counted; nothing is skipped silently). json_agree
# must count every point the measurement holds. The theory refusing a
# point measure ran, a measure that fails otherwise, or a difference is a
# failure, printed with the commands that reproduce it.
#
# Progress on stderr, the tally on stdout. ZS_FULL_FAMILIES,
# ZS_FULL_PRECISIONS, ZS_FULL_FRAMEWORKS (among paper torch deepspeed
# ds-persist0) and ZS_FULL_RECOMPUTE (space-separated) narrow the product.
# Runs from the build directory; ZS_BUILDDIR overrides. Exit 0 pass, 1
# fail, 99 error.
set -u
name=families_full tag=families-full
. "${srcdir:-.}/tests/agree_lib.sh"
# interrupted (^C under make): stop, not go on sweep after sweep
trap 'rm -rf "$tmp"' EXIT
trap 'exit 130' HUP INT TERM
OPENBLAS_NUM_THREADS=1
export OPENBLAS_NUM_THREADS

families=${ZS_FULL_FAMILIES:-gpt2 llama qwen2 qwen3 gemma2 gemma3_text phi3 mixtral qwen2_moe qwen3_moe}
precisions=${ZS_FULL_PRECISIONS:-fp32 mixed amp-bf16 amp-fp16}
frameworks=${ZS_FULL_FRAMEWORKS:-paper torch deepspeed ds-persist0}
recomputes=${ZS_FULL_RECOMPUTE:-none selective full}
worlds="1 2 3 4 8" units="model layer"

# the tiny configs (dense: d 64, F 172, 2 blocks, 4 heads, 2 k/v heads)
dense='"hidden_size": 64, "intermediate_size": 172, "num_hidden_layers": 2, "num_attention_heads": 4,
 "num_key_value_heads": 2, "vocab_size": 256, "max_position_embeddings": 32'
gemma='"head_dim": 24, "sliding_window": 64, "query_pre_attn_scalar": 24'
# MoE: d 64, 2 blocks, 8 heads, 4 k/v heads, vocabulary 64, 4 experts, top 2
moe='"hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 8, "num_key_value_heads": 4,
 "vocab_size": 64, "max_position_embeddings": 32, "num_experts_per_tok": 2, "rope_theta": 1000000.0'
qmoe='"intermediate_size": 160, "num_experts": 4, "moe_intermediate_size": 48, "rms_norm_eps": 1e-06'
for fam in $families; do
	case $fam in
	gpt2) c='"model_type": "gpt2", "n_embd": 64, "n_layer": 2, "n_head": 4, "vocab_size": 256, "n_positions": 32' ;;
	llama) c="\"model_type\": \"llama\", $dense" ;;
	qwen2) c="\"model_type\": \"qwen2\", $dense, \"tie_word_embeddings\": true" ;;
	qwen3) c="\"model_type\": \"qwen3\", $dense, \"head_dim\": 24" ;;
	gemma2) c="\"model_type\": \"gemma2\", $dense, $gemma" ;;
	gemma3_text) c="\"model_type\": \"gemma3_text\", $dense, $gemma, \"sliding_window_pattern\": 2" ;;
	phi3) c="\"model_type\": \"phi3\", $dense, \"pad_token_id\": 0" ;;
	mixtral) c="\"model_type\": \"mixtral\", $moe, \"intermediate_size\": 96, \"num_local_experts\": 4, \"rms_norm_eps\": 1e-05" ;;
	qwen2_moe) c="\"model_type\": \"qwen2_moe\", $moe, $qmoe, \"shared_expert_intermediate_size\": 80, \"norm_topk_prob\": false" ;;
	qwen3_moe) c="\"model_type\": \"qwen3_moe\", $moe, $qmoe, \"head_dim\": 16, \"norm_topk_prob\": true" ;;
	*) echo "$name: unknown family '$fam'" >&2; exit 99 ;;
	esac
	printf '{%s}\n' "$c" >"$tmp/$fam.json"
done

start=$(date +%s)
nsweeps=0 total=0 points=0
for f in $families; do for p in $precisions; do for w in $frameworks; do for r in $recomputes; do
	total=$((total + 1))
	n=40
	[ "$w" = ds-persist0 ] && n=10
	points=$((points + n))
done; done; done; done
agreed=0 refused=0 failures=0
: >"$tmp/refused" # one line a refused point: the reason
: >"$tmp/failed"

# run_point ARGS...: measure ARGS, then theory (with the measured routing
# for a mixture), then json_agree; sets $st: 0 agreed (its points added
# to agreed), 2 measure refused (the reason in $tmp/err), 1 failed
# (recorded). $moe_routing is set for a mixture.
run_point() {
	rm -f "$tmp/m.json" "$tmp/t.json"
	"$zerosim" measure -q "$@" --out "$tmp/m.json" 2>"$tmp/err"
	st=$?
	[ $st -eq 0 ] || {
		[ $st -eq 2 ] && [ ! -e "$tmp/m.json" ] && return
		failed "measure exit $st: $(head -3 "$tmp/err")" "$@"
		return
	}
	routing=
	[ -n "$moe_routing" ] && routing="--routing $tmp/m.json"
	# shellcheck disable=SC2086
	if ! "$zerosim" theory "$@" $routing --out "$tmp/t.json" 2>"$tmp/err"; then
		failed "theory refuses what measure ran: $(head -3 "$tmp/err")" "$@"
		return
	fi
	if ! "$agree" "$tmp/m.json" "$tmp/t.json" >"$tmp/out" 2>&1; then
		failed "$(head -3 "$tmp/out")" "$@"
		return
	fi
	# every point the measurement holds compared
	n=$(sed -n 's/^json_agree: \([0-9]*\) points agree exactly.*/\1/p' "$tmp/out")
	want=$(tr -d ' \t\n' <"$tmp/m.json" | grep -o '"scheme":"' | wc -l)
	if [ -z "$n" ] || [ "$n" -ne "$want" ] || [ "$n" -ne "$expect" ]; then
		failed "json_agree compared ${n:-no} points; the measurement holds $want, the sweep $expect" "$@"
		return
	fi
	agreed=$((agreed + n))
}
failed() { # WHY ARGS...
	why=$1
	shift
	st=1
	failures=$((failures + 1))
	{
		echo "FAIL: $why"
		echo "  reproduce: zerosim measure $* --out m.json; zerosim theory $* ${moe_routing:+--routing m.json }--out t.json;" \
			"tests/json_agree m.json t.json"
		echo "  with $tmp/$fam.json: $(cat "$tmp/$fam.json")"
	} >>"$tmp/failed"
}

for fam in $families; do
	batch=2 moe_routing=
	case $fam in *moe | mixtral) batch=4 moe_routing=1 ;; esac
	for prec in $precisions; do
		for fw in $frameworks; do
			schemes="dp zero1 zero2 zero3" extra="--framework $fw"
			[ $fw = ds-persist0 ] && schemes=zero3 extra="--framework deepspeed --ds-persist 0"
			for rc in $recomputes; do
				nsweeps=$((nsweeps + 1))
				base="--model $tmp/$fam.json --seq 16 --batch $batch --steps 2 --precision $prec --recompute $rc $extra"
				a0=$agreed r0=$refused f0=$failures
				expect=$(($(echo $schemes | wc -w) * 10))
				# shellcheck disable=SC2086
				run_point $base --schemes "$(echo $schemes | tr ' ' ,)" --world 1,2,3,4,8 --unit model,layer
				if [ $st -eq 2 ]; then
					# refused whole: each point alone
					expect=1
					for s in $schemes; do for u in $units; do for n in $worlds; do
						# shellcheck disable=SC2086
						run_point $base --schemes $s --world $n --unit $u
						if [ $st -eq 2 ]; then
							refused=$((refused + 1))
							echo "$(sed 's/^zerosim measure: //' "$tmp/err")" >>"$tmp/refused"
						fi
					done; done; done
				fi
				printf '%s: [%d/%d %ds] %s %s %s %s: %d agree, %d refused, %d failed\n' "$name" $nsweeps $total \
					$(($(date +%s) - start)) $fam $prec $fw $rc $((agreed - a0)) $((refused - r0)) \
					$((failures - f0)) >&2
			done
		done
	done
done

echo "$name: $nsweeps sweeps, $points points: $agreed theory = measure to the byte, $refused refused by measure," \
	"$((points - agreed - refused)) in failed sweeps ($(($(date +%s) - start)) s)"
if [ $refused -gt 0 ]; then
	echo "$name: refused, by reason (points):"
	sort "$tmp/refused" | uniq -c | sort -rn | sed 's/^/  /'
fi
if [ $failures -gt 0 ]; then
	echo "$name: $failures FAILED:"
	cat "$tmp/failed"
	exit 1
fi
echo "$name: PASS"

#!/bin/sh
# ft_accum — zerosim's --grad-accum K (issue #23) against real PyTorch 1.13
# (tests/ft_torch.py: the tiny gpt2 and llama of hf_torch.sh, dropout 0,
# fp32, Adam single-tensor, K micro-batches of 2 held at once, each loss
# / K, DDP over hf_torch's pinned gloo group), to the byte:
#   - the plain loop (--framework torch --wrapper none): gpt2 and llama,
#     K = 2 and 3, zero_grad zeros and set_to_none; zerosim's theory and the
#     engine's measure against PyTorch's bytes between steps, the steady
#     step's peak and every mark zerosim's step names (a micro-step's as
#     LABEL@k; the reference names its the same);
#   - K = 1 against PyTorch too, and zerosim's files at --grad-accum 1
#     byte-identical to those without the option (today's plain loop);
#   - DDP N = 2, K = 2 (--wrapper ddp): with no_sync() on the first
#     micro-step (gpt2 zeros, llama set_to_none) and without (gpt2);
#     theory and measure (both ranks) as above; PyTorch's all-reduces per
#     micro-step [0, 1] with no_sync and [1, 1] without; zerosim's comm per
#     optimizer step, theory equal to measure, one synchronized
#     micro-step more without no_sync than with it (the buckets' rebuild
#     broadcasts, once in the run, in both); every case's first step's
#     peak too (its own list: PyTorch's step_peaks[0]).
#   - with --freeze (embeddings, all-but-last:1, blocks:A-B): gpt2 and
#     llama, K = 2 and 3, both zero_grad modes, DDP N = 2 with and without
#     no_sync: tests/ft_torch.py --freeze --grad-accum, as above; and
#     qwen2, qwen3 and phi3 (their own modules: hf_torch.py's family
#     attention), K = 2, a prefix frozen;
#   - under bf16 autocast (--precision amp-bf16, ft_torch.py --amp bf16):
#     gpt2 K = 2, llama K = 3, qwen2 K = 2, DDP N = 2 llama K = 2 no_sync,
#     and with --freeze (gpt2's embeddings, llama all-but-last:1), K = 2;
#   - the losses: zerosim's measure writes its run as a case
#     (--write-case: the weights, every micro-step's tokens, grad_accum),
#     which replays to the same weights digest (measure --case), and
#     tests/ft_torch.py --case trains it in PyTorch: each step's loss (the
#     mean of its K micro-steps') within 1e-5 relative (gpt2 K = 2 zeros,
#     llama K = 3 set_to_none).
#
# `tests/ft_accum.sh torch26` (make check-torch26): the same against PyTorch
# 2.6 in its Debian 13 root (tests/torch26_root.sh; hf_torch.sh's way of
# running it): gpt2 and llama, K = 2 and 3, zeros and set_to_none, DDP N = 2
# with and without no_sync, five cases with --freeze (phi3 one), llama K = 2
# under autocast; and under transformers' SDPA on both sides (s49;
# ft_torch.py --attn sdpa): gpt2 K = 3 (the flash kernel), llama K = 2 (the
# math path), llama K = 2 with all but the last layer frozen, gpt2 K = 2
# under bf16 autocast (s50: the bf16 flash kernel). Without a root: skip
# (77), a failure under ZS_REQUIRE_TORCH26=1.
# PyTorch is looked for by tests/torch_python.sh; without it: skip (77).
# Exit 0 pass, 1 a difference, 99 hard error.
set -u
name=ft_accum
# top, src, zerosim, tmp, status, mode; root and in under torch26
. "${srcdir:-.}/tests/ft_lib.sh"
. "$src/tests/torch_python.sh"
export PYTHONDONTWRITEBYTECODE=1 OPENBLAS_NUM_THREADS=1

# the tiny gpt2, llama, qwen2, qwen3 and phi3 at hf_torch.sh's vocab 256
# (tests/ft_lib.sh)
ft_configs 256 160 tiny-

version=1.13
[ "$mode" = torch26 ] && version=2.6

# case LABEL MODEL K ZERO_GRAD WORLD NO_SYNC(on|off) [FREEZE [PRECISION]]
# (PRECISION amp-bf16: each micro-step's forward under bf16 autocast,
# ft_torch.py --amp bf16). Called twice per case (cases, below): in phase
# add its reference joins the batch $tmp/ft (tests/ft_lib.sh's ft_add: one
# python run for them all, under this run's PyTorch), in phase check its
# JSON is compared.
case_() {
	torch_row "$1" || return 0
	label=$(torch_label "$1") m=$2 K=$3 zg=$4 world=$5 ns=$6 fz=${7:-} prec=${8:-fp32}
	cfg=$tmp/tiny-$m.json
	i=$((i + 1))
	set -- --model "tiny-$m.json" --grad-accum "$K" --zero-grad "$zg"
	[ "$prec" = amp-bf16 ] && set -- "$@" --amp bf16
	zw="--wrapper none" zns="" zfz=""
	# ckpt-*: Hugging Face's gradient checkpointing on both sides
	case $label in ckpt-*) set -- "$@" --recompute full; zfz="--recompute full" ;; esac
	# sdpa-*: transformers' SDPA on both sides (2.6)
	zattn=eager
	case $label in sdpa-*) set -- "$@" --attn sdpa; zattn=sdpa ;; esac
	if [ -n "$fz" ]; then # (a term without blanks or glob characters)
		set -- "$@" --freeze "$fz"
		zfz="$zfz --freeze $fz"
	fi
	if [ "$world" -gt 1 ]; then
		set -- "$@" --world "$world" --no-sync "$([ "$ns" = on ] && echo 1 || echo 0)"
		zw="--wrapper ddp" zns="--ddp-no-sync $ns"
	fi
	if [ $phase = add ]; then
		[ -e "$tmp/ft/tiny-$m.json" ] || ft_in ft "$cfg" "tiny-$m.json"
		ft_add ft "$@"
		return
	fi
	out=$tmp/$label.json
	if [ "$(ft_got ft $i)" != 0 ] || ! cp "$tmp/ft/$i.json" "$out"; then
		echo "ft_accum: FAIL: tests/ft_torch.py $*:" >&2
		tail -n 20 "$tmp/ft/$i.err" "$tmp/ft.log" >&2 2>/dev/null
		exit 99
	fi
	for cmd in theory measure; do
		# shellcheck disable=SC2086
		if ! "$zerosim" $cmd --model "$cfg" --seq 32 --batch 2 --precision "$prec" --schemes dp --world "$world" \
			--steps 3 --framework torch $zw --torch-version $version --torch-device cpu --attn $zattn \
			--optimizer-impl single --zero-grad "$zg" --grad-accum "$K" $zns $zfz \
			--out "$tmp/$label.$cmd.json" 2>"$tmp/err"; then
			echo "ft_accum: FAIL: zerosim $cmd, $label: $(cat "$tmp/err")" >&2
			exit 99
		fi
	done
	# (and the first step's peak, its own list: PyTorch's step_peaks[0])
	"$py" "$src/tests/ft_cmp.py" "$tmp/$label.json" "$tmp/$label.theory.json" "$tmp/$label.measure.json" "$label" \
		--comm --first || status=1
}

# (a row whose label starts with "+" runs under make check-torch-full alone:
# tests/torch_python.sh's torch_row)
cases() {
	if [ $version = 2.6 ]; then
		case_ gpt2-k2-none gpt2 2 none 1 -
		case_ +gpt2-k3-zeros gpt2 3 zeros 1 -
		case_ llama-k2-zeros llama 2 zeros 1 -
		case_ +llama-k3-none llama 3 none 1 -
		case_ ddp2-gpt2-k2-none-nosync gpt2 2 none 2 on
		case_ ddp2-llama-k2-zeros-sync llama 2 zeros 2 off
		# with --freeze (frozen parameters: no grad to accumulate into)
		case_ fz-gpt2-k2-zeros-emb gpt2 2 zeros 1 - embeddings
		case_ fz-llama-k3-zeros-abl1 llama 3 zeros 1 - all-but-last:1
		case_ fz-llama-k2-none-b00 llama 2 none 1 - blocks:0-0
		case_ fz-ddp2-llama-k2-none-abl1-sync llama 2 none 2 off all-but-last:1
		case_ +fz-phi3-k2-none-b00 phi3 2 none 1 - blocks:0-0
		case_ amp-llama-k2-none llama 2 none 1 - "" amp-bf16
		# under SDPA (the flash kernel for gpt2, the math path for llama)
		case_ sdpa-gpt2-k3-zeros gpt2 3 zeros 1 -
		case_ sdpa-llama-k2-none llama 2 none 1 -
		case_ +sdpa-fz-llama-k2-zeros-abl1 llama 2 zeros 1 - all-but-last:1
		# SDPA under bf16 autocast (the flash kernel in bf16)
		case_ sdpa-amp-gpt2-k2-none gpt2 2 none 1 - "" amp-bf16
		return
	fi
	case_ gpt2-k1 gpt2 1 zeros 1 -
	for m in gpt2 llama; do
		for K in 2 3; do
			for zg in zeros none; do
				# (K = 3: the full agreement's, tests/torch_python.sh's torch_row)
				case_ "$([ "$K" = 3 ] && echo +)$m-k$K-$zg" "$m" "$K" "$zg" 1 -
			done
		done
	done
	case_ ddp2-gpt2-k2-nosync gpt2 2 zeros 2 on
	case_ ddp2-llama-k2-none-nosync llama 2 none 2 on
	case_ ddp2-gpt2-k2-sync gpt2 2 zeros 2 off
	# with --freeze: the frozen parameters make no grad in any micro-step
	case_ fz-gpt2-k2-zeros-emb gpt2 2 zeros 1 - embeddings
	case_ +fz-gpt2-k2-none-abl1 gpt2 2 none 1 - all-but-last:1
	case_ fz-gpt2-k3-none-b11 gpt2 3 none 1 - blocks:1-1
	case_ +fz-llama-k2-none-emb llama 2 none 1 - embeddings
	case_ fz-llama-k3-zeros-abl1 llama 3 zeros 1 - all-but-last:1
	case_ fz-llama-k2-none-b00 llama 2 none 1 - blocks:0-0
	case_ fz-ddp2-gpt2-k2-zeros-emb-nosync gpt2 2 zeros 2 on embeddings
	case_ fz-ddp2-llama-k2-none-abl1-sync llama 2 none 2 off all-but-last:1
	case_ +fz-qwen2-k2-none-emb qwen2 2 none 1 - embeddings
	case_ +fz-qwen3-k2-zeros-abl1 qwen3 2 zeros 1 - all-but-last:1
	case_ +fz-phi3-k2-none-b00 phi3 2 none 1 - blocks:0-0
	# the families unfrozen (ft_torch.py builds each family's own attention)
	case_ qwen2-k2-zeros qwen2 2 zeros 1 -
	case_ ckpt-gpt2-k2-none gpt2 2 none 1 -
	case_ ckpt-fz-llama-k3-zeros-emb llama 3 zeros 1 - embeddings
	case_ ckpt-ddp2-llama-k2-none-nosync llama 2 none 2 on
	case_ +ckpt-fz-ddp2-gpt2-k2-zeros-emb-sync gpt2 2 zeros 2 off embeddings
	case_ +qwen3-k3-none qwen3 3 none 1 -
	case_ +ddp2-phi3-k2-none-nosync phi3 2 none 2 on
	# under bf16 autocast: each micro-step's region casts the weights anew
	# (its cache cleared at the region's exit), the fp32 grads accumulate
	case_ amp-gpt2-k2-zeros gpt2 2 zeros 1 - "" amp-bf16
	case_ amp-llama-k3-none llama 3 none 1 - "" amp-bf16
	case_ +amp-qwen2-k2-zeros qwen2 2 zeros 1 - "" amp-bf16
	case_ amp-ddp2-llama-k2-zeros-nosync llama 2 zeros 2 on "" amp-bf16
	case_ amp-fz-gpt2-k2-none-emb gpt2 2 none 1 - embeddings amp-bf16
	case_ +amp-fz-llama-k2-zeros-abl1 llama 2 zeros 1 - all-but-last:1 amp-bf16
	# checkpointed under autocast: each rerun is a region of its own (cleared as it ends)
	case_ ckpt-amp-llama-k2-zeros llama 2 zeros 1 - "" amp-bf16
	case_ ckpt-amp-fz-gpt2-k2-none-emb gpt2 2 none 1 - embeddings amp-bf16
}
# The losses' references (below) join the batch too
losses() {
	[ $version = 2.6 ] && return
	for c in "gpt2 2 zeros" "llama 3 none"; do
		# shellcheck disable=SC2086
		set -- $c
		m=$1 K=$2 zg=$3 d=$tmp/loss-$1
		i=$((i + 1))
		if [ $phase = check ]; then
			if [ "$(ft_got ft $i)" != 0 ] || ! cp "$tmp/ft/$i.json" "$d/torch.json"; then
				echo "ft_accum: FAIL: tests/ft_torch.py --case, $m K=$K:" >&2
				tail -n 20 "$tmp/ft/$i.err" "$tmp/ft.log" >&2 2>/dev/null
				exit 99
			fi
			continue
		fi
		mkdir -p "$d" || exit 99
		z="--framework torch --wrapper none --torch-version 1.13 --torch-device cpu --attn eager --zero-grad $zg"
		# shellcheck disable=SC2086
		if ! "$zerosim" measure -q --model "$tmp/tiny-$m.json" --seq 32 --batch 2 --precision fp32 --schemes dp \
			--world 1 --steps 3 $z --grad-accum "$K" --write-case "$d/case.json" --out "$d/seed.json" 2>"$tmp/err" ||
			! "$zerosim" measure -q --case "$d/case.json" --schemes dp $z --out "$d/replay.json" 2>"$tmp/err"; then
			echo "ft_accum: FAIL: zerosim measure --write-case / --case, $m K=$K: $(cat "$tmp/err")" >&2
			exit 99
		fi
		ft_casedir ft "$d"
		[ -e "$tmp/ft/tiny-$m.json" ] || ft_in ft "$tmp/tiny-$m.json" "tiny-$m.json"
		ft_add ft --model "tiny-$m.json" --grad-accum "$K" --zero-grad "$zg" --case "loss-$m/case.json"
	done
}
for phase in add check; do
	i=0
	[ $phase = check ] && ft_run ft ft_torch.py
	cases
	losses
done
[ $version = 2.6 ] && exit $status
# --grad-accum 1 is today's plain loop: the same files, byte for byte
for cmd in theory measure; do
	for k in "" "--grad-accum 1"; do
		# shellcheck disable=SC2086
		"$zerosim" $cmd --model "$tmp/tiny-llama.json" --seq 32 --batch 2 --precision fp32 --schemes dp --world 1 \
			--steps 3 --framework torch --wrapper none --torch-version 1.13 --torch-device cpu --attn eager $k \
			--out "$tmp/k1$k.json" 2>"$tmp/err" || { echo "ft_accum: FAIL: zerosim $cmd $k: $(cat "$tmp/err")" >&2; exit 99; }
	done
	# measure's files carry run times: compare without them
	if "$py" - "$tmp/k1.json" "$tmp/k1--grad-accum 1.json" <<'EOF'; then echo "ok: $cmd --grad-accum 1 writes what it writes without the option"; else echo "FAIL: $cmd --grad-accum 1 differs from the plain loop without it"; status=1; fi
import json, sys
def strip(x):
    if isinstance(x, dict):
        return {k: strip(v) for k, v in x.items() if "time" not in k and k not in ("wall_s", "elapsed_s", "seconds")}
    if isinstance(x, list):
        return [strip(v) for v in x]
    return x
a, b = (strip(json.load(open(p))) for p in sys.argv[1:3])
sys.exit(0 if a == b else 1)
EOF
done

# The losses: zerosim's run as a case, replayed by zerosim and trained by
# PyTorch (losses, above: its reference a case of the batch)
for c in "gpt2 2 zeros" "llama 3 none"; do
	# shellcheck disable=SC2086
	set -- $c
	m=$1 K=$2 zg=$3 d=$tmp/loss-$1
	"$py" - "$d" "$m K=$K $zg" <<'EOF' || status=1
import json, os, sys
d, label = sys.argv[1], sys.argv[2]
seed, replay = (json.load(open(os.path.join(d, f)))["runs"][0] for f in ("seed.json", "replay.json"))
torch_ = json.load(open(os.path.join(d, "torch.json")))
bad = []
if seed["weights_digest"] != replay["weights_digest"] or seed["losses"] != replay["losses"]:
    bad.append(f"the case replays to {replay['weights_digest']}, the run was {seed['weights_digest']}")
rel = [abs(z - t) / abs(t) for z, t in zip(seed["losses"], torch_["losses"])]
if len(rel) != len(torch_["losses"]) or max(rel) > 1e-5:
    bad.append(f"losses {seed['losses']} against PyTorch's {torch_['losses']}")
print(f"{'FAIL' if bad else 'ok'}: {label}: measure's losses {[round(x, 6) for x in seed['losses']]} and PyTorch "
      f"{torch_['torch']}'s on the same case within {max(rel):.1e} relative (bound 1e-5); the case replays to "
      f"{replay['weights_digest']}" + "".join("\n  " + b for b in bad))
sys.exit(1 if bad else 0)
EOF
done

# PyTorch's all-reduces per micro-step, and zerosim's comm per optimizer step
# (a mean over the run's steps: the buckets' rebuild, once in the run, at
# step 1's second forward without no_sync() and at step 2's first with it,
# broadcasts its int32 indices and sizes in both; one step with no_sync()
# rebuilds nothing, so its comm is one synchronized micro-step's, which is
# what the run without no_sync() moves beyond the run with it)
# shellcheck disable=SC2086
if ! "$zerosim" theory --model "$tmp/tiny-gpt2.json" --seq 32 --batch 2 --precision fp32 --schemes dp --world 2 \
	--steps 1 --framework torch --wrapper ddp --torch-version $version --torch-device cpu --attn eager \
	--optimizer-impl single --zero-grad zeros --grad-accum 2 --ddp-no-sync on --out "$tmp/one-step.json" 2>"$tmp/err"; then
	echo "ft_accum: FAIL: zerosim theory --steps 1: $(cat "$tmp/err")" >&2
	exit 99
fi
"$py" - "$tmp" <<'EOF' || status=1
import json, os, sys
tmp = sys.argv[1]
def load(t):
    return json.load(open(os.path.join(tmp, t)))
bad = []
on, off = load("ddp2-gpt2-k2-nosync.json"), load("ddp2-gpt2-k2-sync.json")
if on["allreduce_per_micro"] != [0, 1] or off["allreduce_per_micro"] != [1, 1]:
    bad.append(f"PyTorch's all-reduces per micro-step {on['allreduce_per_micro']} with no_sync, "
               f"{off['allreduce_per_micro']} without (want [0, 1] and [1, 1])")
c_on = load("ddp2-gpt2-k2-nosync.theory.json")["rows"][0]["schedule"]["comm_bytes_per_rank_per_step"]
c_off = load("ddp2-gpt2-k2-sync.theory.json")["rows"][0]["schedule"]["comm_bytes_per_rank_per_step"]
c_one = load("one-step.json")["rows"][0]["schedule"]["comm_bytes_per_rank_per_step"]
if abs(c_off - c_on - c_one) > 1e-6 or c_one <= 0 or c_on <= c_one:
    bad.append(f"zerosim's comm per optimizer step {c_on:,} B with no_sync, {c_off:,} without: not one "
               f"synchronized micro-step ({c_one:,} B, step 1 with no_sync alone) apart")
print(("FAIL: " if bad else "ok: ") + (("; ".join(bad)) if bad else
      f"DDP N=2 K=2: PyTorch all-reduces per micro-step {on['allreduce_per_micro']} with no_sync, "
      f"{off['allreduce_per_micro']} without; zerosim's comm per optimizer step {c_on:,} and {c_off:,} B"))
sys.exit(1 if bad else 0)
EOF
exit $status

#!/bin/sh
# ft_fsdp — zerosim's --grad-accum K under --wrapper fsdp (issue #23: FSDP
# accumulation "with and without no_sync()") against real PyTorch 1.13's
# FullyShardedDataParallel (tests/ft_torch.py --fsdp: hf_torch.py's
# fsdp_wrap, FULL_SHARD, a unit per block and the root, over gloo with
# tests/fsdp_torch.py's shims; N = 2, fp32 (autocast: below), Adam
# single-tensor, each micro-loss / K), to the byte:
#   - gpt2 K = 2 (zero_grad zeros) with no_sync() on the first micro-step
#     (--fsdp-no-sync on: the unsharded flat gradients kept across it, one
#     reduce-scatter per unit in the last) and without (--fsdp-no-sync off:
#     every micro-step reduce-scatters, the sharded gradients add up), and
#     llama K = 3 (set_to_none) with no_sync(): zerosim's theory and
#     measure (both ranks) against PyTorch's bytes between steps, the
#     steady step's peak and every mark zerosim names (tests/ft_cmp.py);
#   - N = 3, gpt2 K = 3 with no_sync(), as above;
#   - SHARD_GRAD_OP (--schemes zero2, ft_torch.py --fsdp-strategy
#     shard_grad_op): gpt2 K = 2 zeros with no_sync() (the gathered flat
#     parameters kept across the micro-steps: no all-gather in the
#     second) and llama K = 2 set_to_none without, as above;
#   - autocast (--precision amp-bf16; ft_torch.py --amp bf16:
#     torch.autocast around each micro-step's forward, FSDP without
#     MixedPrecision): llama K = 2 set_to_none without no_sync() at N = 2,
#     gpt2 K = 2 with no_sync() at N = 3, as above;
#   - the collectives: PyTorch's all-gathers and reduce-scatters in each
#     micro-step (the shims counted on rank 0) against measure's calls per
#     optimizer step, and the theory's comm equal to measure's; both
#     files' config.ddp_no_sync the run's --fsdp-no-sync;
#   - the losses: zerosim's run written as a case (--write-case), trained
#     by tests/ft_torch.py --case under FSDP (ft_lib.sh's ft_losses):
#     each step's loss (the mean over the two ranks of the mean of their
#     K micro-steps', as measure's `losses`) within 1e-5 relative.
#
#
# `tests/ft_fsdp.sh torch26` (make check-torch26): the byte and collective
# checks above against PyTorch 2.6's FSDP (FSDP1, backward_prefetch None)
# in its Debian 13 root (tests/torch26_root.sh, ft_lib.sh's mode): the gpt2
# K = 2 pair with and without no_sync(), SHARD_GRAD_OP's gpt2 K = 2 with
# no_sync() and llama's autocast, bf16 and float16 (ShardedGradScaler), not the
# losses (zerosim's own arithmetic, 1.13's run checks it).
# Without a root: skip (77), a failure under ZS_REQUIRE_TORCH26=1.
#
# PyTorch is looked for by tests/torch_python.sh; without it: skip (77).
# Exit 0 pass, 1 a difference, 99 hard error.
set -u
name=ft_fsdp
# top, src, zerosim, tmp, status
. "${srcdir:-.}/tests/ft_lib.sh"
. "$src/tests/torch_python.sh"
export PYTHONDONTWRITEBYTECODE=1 OPENBLAS_NUM_THREADS=1

ft_configs 256 160 tiny-

version=1.13
[ "$mode" = torch26 ] && version=2.6

# coll.py REF THEORY MEASURE LABEL NO_SYNC: beside tests/ft_cmp.py's
# bytes (and its --comm, the theory's comm against measure's), the
# collectives: PyTorch's all-gathers and reduce-scatters of every
# micro-step against measure's calls a step, and both files'
# config.ddp_no_sync the run's setting (it changes FSDP's peak: a file
# without it could not tell the two runs apart); exit 1 on a difference.
cat >"$tmp/coll.py" <<'EOF'
import json, sys
d, label, ns = json.load(open(sys.argv[1])), sys.argv[4], sys.argv[5] == "on"
files = {"theory": json.load(open(sys.argv[2])), "measure": json.load(open(sys.argv[3]))}
bad = [f"{k}: config.ddp_no_sync {f['config'].get('ddp_no_sync')}, not {ns}" for k, f in files.items()
       if f["config"].get("ddp_no_sync") is not ns]
for r in files["measure"]["runs"]:
    for kind in ("all_gather", "reduce_scatter"):
        if sum(d[kind + "_per_micro"]) != r["collectives"][kind]["calls_per_step"]:
            bad.append(f"{kind}: PyTorch {d[kind + '_per_micro']} per micro-step against measure's "
                       f"{r['collectives'][kind]['calls_per_step']} a step")
print(f"{'FAIL' if bad else 'ok'}: {label}: reduce-scatters per micro-step {d['reduce_scatter_per_micro']}, "
      f"all-gathers {d['all_gather_per_micro']}: PyTorch's and measure's calls, config.ddp_no_sync {ns} "
      f"{'differ' if bad else 'agree'}" + "".join("\n  " + b for b in bad))
sys.exit(1 if bad else 0)
EOF

z="--seq 32 --batch 2 --schemes zero3 --steps 3 --framework torch --wrapper fsdp
--torch-version $version --torch-device cpu --attn eager --optimizer-impl single"

# case LABEL MODEL K ZERO_GRAD NO_SYNC(on|off) [WORLD, 2 when absent [PRECISION, fp32 when absent
#       [SCHEME, zero3 when absent]]]
# (amp-bf16: ft_torch.py --amp bf16, each micro-step's forward in torch.autocast;
# amp-fp16: --amp fp16, the same under ShardedGradScaler, 2.6;
# zero2: ft_torch.py --fsdp-strategy shard_grad_op, zerosim's --schemes zero2)
case_() {
	torch_row "$1" || return 0
	label=$(torch_label "$1") m=$2 K=$3 zg=$4 ns=$5 world=${6:-2} prec=${7:-fp32} scheme=${8:-zero3}
	amp=
	case $prec in amp-bf16) amp="--amp bf16" ;; amp-fp16) amp="--amp fp16" ;; esac
	strategy=full_shard
	[ "$scheme" = zero2 ] && strategy=shard_grad_op
	# gloo waits 30 minutes for a peer by default: a hang ends in 5
	# shellcheck disable=SC2086
	if ! ft_ref --model "$tmp/tiny-$m.json" --grad-accum "$K" --zero-grad "$zg" \
		--world "$world" --fsdp --fsdp-strategy $strategy --no-sync "$([ "$ns" = on ] && echo 1 || echo 0)" $amp \
		--out "$tmp/$label.json" \
		>"$tmp/err" 2>&1; then
		echo "ft_fsdp: FAIL: tests/ft_torch.py --fsdp, $label:" >&2
		tail -20 "$tmp/err" >&2
		exit 99
	fi
	for cmd in theory measure; do
		# shellcheck disable=SC2086
		if ! "$zerosim" $cmd --model "$tmp/tiny-$m.json" $z --schemes "$scheme" --precision "$prec" --world "$world" \
			--zero-grad "$zg" --grad-accum "$K" --fsdp-no-sync "$ns" --out "$tmp/$label.$cmd.json" 2>"$tmp/err"; then
			echo "ft_fsdp: FAIL: zerosim $cmd, $label: $(cat "$tmp/err")" >&2
			exit 99
		fi
	done
	set -- "$tmp/$label.json" "$tmp/$label.theory.json" "$tmp/$label.measure.json" "$label"
	# (and the first step, a list of its own under accumulation too, 1.13's
	# and 2.6's: ft_cmp.py --first against step_peaks[0])
	"$py" "$src/tests/ft_cmp.py" "$@" --comm --first || status=1
	"$py" "$tmp/coll.py" "$@" "$ns" || status=1
}

# (a row whose label starts with "+" runs under make check-torch-full alone:
# tests/torch_python.sh's torch_row)
# (under torch26 the gpt2 pair and llama's autocast alone: check-torch26's
# time; the others ran by hand, docs/finetune.md)
case_ fsdp2-gpt2-k2-zeros-nosync gpt2 2 zeros on
case_ fsdp2-gpt2-k2-zeros-sync gpt2 2 zeros off
if [ "$mode" != torch26 ]; then
	case_ +fsdp2-llama-k3-none-nosync llama 3 none on
	# N = 3, K = 3 (the review's run): three shards, two micro-steps in no_sync()
	case_ fsdp3-gpt2-k3-zeros-nosync gpt2 3 zeros on 3
fi
# SHARD_GRAD_OP (zero2): in no_sync() the gathered flat parameters stay
# (1.13's _should_free_unsharded_flat_param, 2.6's _should_free_in_backward:
# False), so the second micro-step all-gathers nothing (coll.py's counts:
# PyTorch's [3, 0]); without, each micro-step's post-backward hook frees
# them and the next gathers
case_ fsdp2-zero2-gpt2-k2-zeros-nosync gpt2 2 zeros on 2 fp32 zero2
[ "$mode" = torch26 ] || case_ +fsdp2-zero2-llama-k2-none-sync llama 2 none off 2 fp32 zero2
# autocast around the forward (no FSDP MixedPrecision): each unit's
# parameters are views of its gathered flat parameter, no leaves, so
# autocast caches none of their bf16 casts (a copy at every use; a bias's
# goes after its addmm); under set_to_none the first micro-step's weight
# gradient is ToCopyBackward's fp32 copy, held until the unit's cat
case_ fsdp2-amp-llama-k2-none-sync llama 2 none off 2 amp-bf16
# float16 autocast under FSDP's ShardedGradScaler("cpu") (2.6): unscale_
# over the sharded flat gradients, found_inf all-reduced, the CPU's scale
# update in Python (docs/schedule.md, "Float16 autocast")
[ "$mode" = torch26 ] && case_ fsdp2-fp16-llama-k2-none-sync llama 2 none off 2 amp-fp16
[ "$mode" = torch26 ] || case_ fsdp3-amp-gpt2-k2-zeros-nosync gpt2 2 zeros on 3 amp-bf16

# no_sync() against without: the same all-gathers, K - 1 fewer reduce-scatters
# a unit, the comm less by as many (zerosim's theory: K - 1 of its K)
"$py" - "$tmp" <<'EOF' || status=1
import json, os, sys
tmp = sys.argv[1]
def load(t):
    return json.load(open(os.path.join(tmp, t)))
on, off = load("fsdp2-gpt2-k2-zeros-nosync.json"), load("fsdp2-gpt2-k2-zeros-sync.json")
units = on["reduce_scatter_per_micro"][-1]
bad = []
if on["reduce_scatter_per_micro"] != [0, units] or off["reduce_scatter_per_micro"] != [units, units] or units < 2:
    bad.append(f"PyTorch's reduce-scatters per micro-step {on['reduce_scatter_per_micro']} with no_sync, "
               f"{off['reduce_scatter_per_micro']} without")
mon, moff = (load(f"fsdp2-gpt2-k2-zeros-{x}.measure.json")["runs"][0]["collectives"] for x in ("nosync", "sync"))
if mon["all_gather"] != moff["all_gather"] or 2 * mon["reduce_scatter"]["bytes_per_step"] != \
        moff["reduce_scatter"]["bytes_per_step"]:
    bad.append(f"zerosim's collectives {mon} with no_sync, {moff} without")
print(("FAIL: " if bad else "ok: ") + ("; ".join(bad) if bad else
      f"FSDP N=2 K=2: PyTorch reduce-scatters per micro-step {on['reduce_scatter_per_micro']} with no_sync, "
      f"{off['reduce_scatter_per_micro']} without; zerosim's reduce-scatter bytes a step "
      f"{mon['reduce_scatter']['bytes_per_step']:,} and {moff['reduce_scatter']['bytes_per_step']:,}"))
sys.exit(1 if bad else 0)
EOF

# The losses: zerosim's run as a case, trained by PyTorch under FSDP
[ "$mode" = torch26 ] && exit $status
ft_losses "$tmp/loss" "gpt2 FSDP N=2 K=2 no_sync" \
	"--model $tmp/tiny-gpt2.json $z --precision fp32 --world 2 --zero-grad zeros --grad-accum 2 --fsdp-no-sync on" \
	"--model $tmp/tiny-gpt2.json --grad-accum 2 --zero-grad zeros --world 2 --fsdp"
exit $status

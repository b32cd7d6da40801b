#!/bin/sh
# framework_cli — --framework on the command line: DeepSpeed's own estimate
# is shown for the paper's 7.5B model (worked by hand in test_framework.c),
# a scheme a framework does not model is refused with one line and exit 2,
# and the default output names no framework. Runs from the build directory.
set -u
zerosim=${ZS_BUILDDIR:-.}/zerosim
template=${srcdir:-.}/report/zerosim-report.tex # automake sets $srcdir
[ -x "$zerosim" ] || { echo "framework_cli: $zerosim is not built" >&2; exit 99; }
[ -f "$template" ] || { echo "framework_cli: no report template at $template" >&2; exit 99; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/zs-fw.XXXXXX") || exit 99
trap 'rm -rf "$tmp"' EXIT HUP INT TERM
fail() { echo "framework_cli: FAIL: $*" >&2; exit 1; }

"$zerosim" theory --framework deepspeed --params 7.5e9 --world 64 >"$tmp/t2" || fail "deepspeed theory"
grep -q '^ *64  *zero2  *17,109,375,000 ' "$tmp/t2" || fail "no ZeRO-2 estimate 17,109,375,000 in: $(cat "$tmp/t2")"
grep -q '^ *64  *zero3 ' "$tmp/t2" && fail "a ZeRO-3 estimate without --largest-unit"
"$zerosim" theory --framework deepspeed --params 7.5e9 --world 64 --largest-unit 1e8 >"$tmp/t3" || fail "deepspeed --largest-unit"
grep -q '^ *64  *zero3  *2,509,375,000 ' "$tmp/t3" || fail "no ZeRO-3 estimate 2,509,375,000 in: $(cat "$tmp/t3")"
"$zerosim" theory --framework deepspeed --params 7.5e9 --world 64 --largest-unit 1e8 --out "$tmp/t.json" || fail "json"
grep -q '"device_bytes":	17109375000' "$tmp/t.json" || fail "no device_bytes 17109375000 in theory.json"
grep -q '"framework":	"deepspeed"' "$tmp/t.json" || fail "config.framework missing"

# On a transformer L is its largest nn.Module's own params: gpt2's wte,
# 50257 x 768 = 38,597,376 (Hugging Face's gpt2 config); with Ψ =
# 124,439,808 (its published count), 4L + int(18Ψ/8) = 154,389,504 +
# 279,989,568 = 434,379,072 per GPU, and DeepSpeed's cpu_mem with zero_init
# L x 4 x 1 x 1.5 = 231,584,256 a node of one GPU.
ZEROSIM_DATADIR=${ZEROSIM_DATADIR:-${srcdir:-.}} "$zerosim" theory --framework deepspeed --model gpt2 --world 8 \
	--schemes zero3 >"$tmp/g3" || fail "deepspeed gpt2"
grep -q '^ *8  *zero3  *434,379,072 .* 231,584,256$' "$tmp/g3" || fail "no ZeRO-3 estimate 434,379,072 for gpt2 in: $(cat "$tmp/g3")"
grep -q 'L = 38597376' "$tmp/g3" || fail "gpt2's L is not wte's 38597376: $(cat "$tmp/g3")"

# torch models every scheme in both precisions (FSDP's MixedPrecision)
"$zerosim" measure -q --framework torch --schemes zero2,zero3 --world 2 --out "$tmp/mp.json" || fail "torch mixed"
grep -q '"master32":	0' "$tmp/mp.json" || fail "FSDP's MixedPrecision holds a master copy"

# DDP over the PyTorch step (--wrapper ddp) all-reduces its fp32 buckets:
# every one of gpt2-tiny's Psi = 169,728 gradients once a step, counted as
# every collective is, the ring over the buffer padded to N*ceil(n/N):
# 2(N-1)/N of it a rank, 2 * 56,576 * 2 * 4 = 905,216 B at N = 3; the
# theory and measure say the same.
tiny=${srcdir:-.}/report/models/gpt2-tiny.json
for cmd in theory measure; do
	"$zerosim" $cmd --model "$tiny" --framework torch --wrapper ddp --schemes dp --world 3 --precision fp32 \
		--torch-device cpu --attn eager --seq 16 --steps 1 --out "$tmp/ddp-$cmd.json" || fail "ddp $cmd"
done
tr -d ' \t\n' <"$tmp/ddp-measure.json" | grep -q '"all_reduce":{"calls_per_step":1,"bytes_per_step":905216' ||
	fail "measure --wrapper ddp: no all-reduce of 905,216 B a step"
m=$(tr -d ' \t\n' <"$tmp/ddp-measure.json" | sed -n 's/.*"comm_bytes_per_rank_per_step":\([0-9]*\).*/\1/p')
t=$(tr -d ' \t\n' <"$tmp/ddp-theory.json" | sed -n 's/.*"schedule":{.*"comm_bytes_per_rank_per_step":\([0-9]*\).*/\1/p')
[ -n "$m" ] && [ "$m" = "$t" ] && [ "$m" -ge 905216 ] || fail "ddp's comm: measure '$m', theory '$t'"
# --timeline-ranks all logs every rank's last step under --wrapper ddp as
# under the engine's own schemes (it logged rank 0's alone, silently).
"$zerosim" measure --model "$tiny" --framework torch --wrapper ddp --schemes dp --world 3 --precision fp32 \
	--torch-device cpu --attn eager --seq 16 --steps 1 --timeline --timeline-ranks all --out "$tmp/ddp-tl.json" ||
	fail "ddp --timeline-ranks all"
n=$(tr -d ' \t\n' <"$tmp/ddp-tl.json" | grep -o '"rank":[0-9]*,"timeline":\[{' | tr '\n' ' ')
[ "$n" = '"rank":1,"timeline":[{ "rank":2,"timeline":[{ ' ] || fail "ddp --timeline-ranks all: ranks logged: '$n'"

# FSDP over the PyTorch step (--wrapper fsdp) at N = 2: each unit gathered
# before its forward, the blocks again for backward, each unit's gradient
# reduce-scattered, (N-1) shards a rank each (gpt2-tiny's units: the
# root's 69,760 elements, wte with the tied head, wpe and ln_f; the
# blocks' 49,984 each): 4 * (2 * 34,880 + 6 * 24,992) = 878,848 B a step;
# theory and measure say the same.
for cmd in theory measure; do
	"$zerosim" $cmd --model "$tiny" --framework torch --wrapper fsdp --schemes zero3 --world 2 --precision fp32 \
		--torch-version 1.13 --torch-device cpu --attn eager --seq 16 --steps 1 --out "$tmp/fsdp-$cmd.json" ||
		fail "fsdp $cmd"
done
m=$(tr -d ' \t\n' <"$tmp/fsdp-measure.json" | sed -n 's/.*"comm_bytes_per_rank_per_step":\([0-9]*\).*/\1/p')
t=$(tr -d ' \t\n' <"$tmp/fsdp-theory.json" | sed -n 's/.*"schedule":{.*"comm_bytes_per_rank_per_step":\([0-9]*\).*/\1/p')
[ "$m" = 878848 ] && [ "$m" = "$t" ] || fail "fsdp's comm: measure '$m', theory '$t', not 878,848"

# refused: one line on stderr, exit 2, nothing written
refused() {
	"$@" --out "$tmp/no.json" >/dev/null 2>"$tmp/err"
	rc=$?
	[ $rc -eq 2 ] || fail "$* exited $rc, not 2"
	[ "$(wc -l <"$tmp/err")" -eq 1 ] || fail "$*: not one line: $(cat "$tmp/err")"
	[ ! -e "$tmp/no.json" ] || fail "$* wrote its output"
}
refused "$zerosim" measure --framework deepspeed --world 2 --offload params
refused "$zerosim" theory --framework torch --params 7.5e9 --schemes zero1
refused "$zerosim" measure --framework pytorch
refused "$zerosim" measure --bucket-cap 10 --world 2
refused "$zerosim" theory --framework deepspeed --bucket-cap 10 --params 1e9
refused "$zerosim" theory --framework torch --bucket-cap 25MB
refused "$zerosim" measure --prefetch backward-pre --world 2
refused "$zerosim" measure --framework torch --prefetch backward_pre --world 2
printf '{"format": "zerosim-sweep/1", "bucket-cap": 5}\n' >"$tmp/spec.json"
refused "$zerosim" theory --spec "$tmp/spec.json"

# DDP's buckets: listed in torch's breakdowns (2Ψ at mixed precision),
# its cap in the config; a paper file lists no buckets
"$zerosim" measure -q --framework torch --schemes dp --world 2 --bucket-cap 0.5 --out "$tmp/b.json" || fail "bucket"
grep -q '"buckets":	66176' "$tmp/b.json" || fail "no buckets of 66176 B in torch's measured.json"
grep -q '"bucket_cap_mb":	0.5' "$tmp/b.json" || fail "no config.bucket_cap_mb"
grep -q '"prefetch":	"none"' "$tmp/b.json" || fail "no config.prefetch"
printf '{"format": "zerosim-sweep/1", "framework": "torch", "bucket-cap": 0.5, "schemes": ["dp"], "world": [2]}\n' \
	>"$tmp/spec.json"
"$zerosim" theory --spec "$tmp/spec.json" --out "$tmp/bs.json" || fail "bucket-cap in a spec"
grep -q '"bucket_cap_mb":	0.5' "$tmp/bs.json" || fail "the spec's bucket-cap is not the config's"
# A repeated option: the last counts (zerosim.1); on 256,512,512,256 in
# fp32, cap 0 makes PyTorch's three buckets (test_framework.c), and a cap
# far above the model (1 TiB) two: the first still closes at 1 MiB, and
# the buckets hold Ψ·4 bytes (2102272), never the cap.
calls() { tr -d '\n\t' <"$1" | sed 's/.*"all_reduce":{"calls_per_step":\([0-9]*\).*/\1/'; }
"$zerosim" measure -q --framework torch --schemes dp --world 2 --precision fp32 --layers 256,512,512,256 \
	--bucket-cap 1048576 --bucket-cap 0 --out "$tmp/b0.json" || fail "bucket-cap twice"
[ "$(calls "$tmp/b0.json")" = 3 ] || fail "--bucket-cap 0 given last: not three all-reduces"
grep -q '"bucket_cap_mb":	0,' "$tmp/b0.json" || fail "--bucket-cap 0 given last is not the config's"
"$zerosim" measure -q --framework torch --schemes dp --world 2 --precision fp32 --layers 256,512,512,256 \
	--bucket-cap 1048576 --out "$tmp/bh.json" || fail "bucket-cap 1048576"
[ "$(calls "$tmp/bh.json")" = 2 ] || fail "--bucket-cap 1048576: not two all-reduces"
grep -q '"buckets":	2102272' "$tmp/bh.json" || fail "--bucket-cap 1048576: the buckets are not Ψ·4 bytes"
# The theory's text names the options it followed.
"$zerosim" theory --framework torch --world 2 --bucket-cap 0.1 --prefetch backward-pre >"$tmp/tt" || fail "torch text"
grep -q 'bucket_cap_mb 0.1;' "$tmp/tt" || fail "the theory's text does not name bucket_cap_mb 0.1"
grep -q 'backward_prefetch BACKWARD_PRE;' "$tmp/tt" || fail "the theory's text does not name BACKWARD_PRE"
# under SHARD_GRAD_OP the unit is whole from its forward: BACKWARD_PRE's
# prefetch gathers nothing, and the text says so (the review of s35-int)
ZEROSIM_DATADIR=${ZEROSIM_DATADIR:-${srcdir:-.}} "$zerosim" theory --model gpt2 --precision fp32 --framework torch --torch-version 2.6 --torch-device cpu \
	--attn eager --wrapper fsdp --schemes zero2 --world 3 --prefetch backward-pre --seq 16 --batch 1 >"$tmp/tt" ||
	fail "SHARD_GRAD_OP text"
if grep -q 'gathers the next unit too' "$tmp/tt" || ! grep -q 'BACKWARD_PRE, 2.6.s default, which gathers nothing here' "$tmp/tt"; then
	fail "SHARD_GRAD_OP's text has BACKWARD_PRE gather the next unit"
fi

# The PyTorch options: files of a torch or deepspeed run name them as the
# run follows them, each "default" resolved to the release's on the
# device, as PyTorch's own sources set them (zerosim.1; docs/torch_saved.md):
# zero_grad's set_to_none False in 1.13 (optimizer.py 246), True in 2.6
# (optimizer.py 940); Adam foreach on CUDA in 2.x (optimizer.py 184-188),
# single on the CPU and in 1.13 (adam.py 288); eager attention in 1.13,
# which has no SDPA, sdpa in 2.x. A paper file names none of them.
tiny=${srcdir:-.}/report/models/gpt2-tiny.json
torch_cfg() { # FILE: its config's six keys, in order, as "key=value ..."
	tr -d '\n\t ' <"$1" | sed 's/"runs":.*//; s/"results":.*//' | grep -o '"\(torch_version\|torch_device\|optimizer_impl\|zero_grad\|attn\|wrapper\)":"[^"]*"' |
		tr -d '"' | tr ':\n' '= ' | sed 's/ $//'
}
want_cfg() { # WANT OPTIONS...: theory's and measure's config for the options
	want=$1; shift
	"$zerosim" theory "$@" --out "$tmp/tc.json" || fail "theory $*"
	[ "$(torch_cfg "$tmp/tc.json")" = "$want" ] || fail "theory $*: config $(torch_cfg "$tmp/tc.json"), not $want"
}
# The wrapped frameworks' step follows none of them yet: their files name
# none (and giving one is refused: tests/cli_errors.sh).
want_cfg "" --framework torch --model "$tiny" --world 2
want_cfg "" --framework deepspeed --model "$tiny" --world 2
# (the plain loop's step is fp32, eager attention, on the CPU only yet:
# util/autograd refuses the rest by name; the CUDA defaults, foreach and
# sdpa from 2.0, wait for it)
want_cfg "torch_version=2.6 torch_device=cpu optimizer_impl=single zero_grad=none attn=eager wrapper=none" \
	--framework torch --model "$tiny" --world 1 --wrapper none --torch-device cpu --attn eager --precision fp32
want_cfg "torch_version=1.13 torch_device=cpu optimizer_impl=single zero_grad=zeros attn=eager wrapper=none" \
	--framework deepspeed --model "$tiny" --world 1 --wrapper none --torch-version 1.13 --torch-device cpu --precision fp32
want_cfg "torch_version=1.13 torch_device=cpu optimizer_impl=foreach zero_grad=none attn=eager wrapper=none" \
	--framework torch --model "$tiny" --world 1 --torch-version 1.13 --torch-device cpu --optimizer-impl foreach \
	--zero-grad none --attn eager --wrapper none --precision fp32
"$zerosim" measure -q --framework torch --world 2 --steps 1 --out "$tmp/mc.json" || fail "measure torch"
[ -z "$(torch_cfg "$tmp/mc.json")" ] || fail "measure --framework torch (wrapped): config $(torch_cfg "$tmp/mc.json")"
"$zerosim" theory --model "$tiny" --world 2 --out "$tmp/pc.json" || fail "paper gpt2-tiny"
[ -z "$(torch_cfg "$tmp/pc.json")" ] || fail "a paper theory.json names PyTorch's options: $(torch_cfg "$tmp/pc.json")"
# A zerosim-sweep/2 spec gives all six; the command line overrides it.
printf '{"format": "zerosim-sweep/2", "framework": "torch", "world": [1], "torch-version": "1.13", "torch-device": "cpu",
 "optimizer-impl": "foreach", "zero-grad": "none", "attn": "eager", "wrapper": "none", "precision": "fp32"}\n' >"$tmp/s2.json"
want_cfg "torch_version=1.13 torch_device=cpu optimizer_impl=foreach zero_grad=none attn=eager wrapper=none" \
	--spec "$tmp/s2.json" --model "$tiny"
want_cfg "torch_version=2.6 torch_device=cpu optimizer_impl=single zero_grad=none attn=eager wrapper=none" \
	--spec "$tmp/s2.json" --model "$tiny" --torch-version 2.6 --optimizer-impl single
# A zerosim-sweep/1 spec is still read, to the same files as the command
# line and as the same keys under /2.
printf '{"format": "zerosim-sweep/1", "framework": "torch", "bucket-cap": 0.5, "schemes": ["dp", "zero3"], "world": [2], "units": ["model", "layer"]}\n' \
	>"$tmp/s1.json"
sed 's|sweep/1|sweep/2|' "$tmp/s1.json" >"$tmp/s1as2.json"
"$zerosim" theory --spec "$tmp/s1.json" --out "$tmp/s1.out" &&
	"$zerosim" theory --spec "$tmp/s1as2.json" --out "$tmp/s1as2.out" &&
	"$zerosim" theory --framework torch --bucket-cap 0.5 --schemes dp,zero3 --world 2 --unit model,layer \
		--out "$tmp/s1cl.out" || fail "a zerosim-sweep/1 spec"
cmp -s "$tmp/s1.out" "$tmp/s1cl.out" || fail "a zerosim-sweep/1 spec differs from its command line"
cmp -s "$tmp/s1.out" "$tmp/s1as2.out" || fail "a zerosim-sweep/1 spec differs from the same keys under /2"
# theory's --flash-attn is --attn sdpa under torch (the same file), and
# under paper still the no-scores formula.
"$zerosim" theory --framework torch --model "$tiny" --world 2 --flash-attn --out "$tmp/fa.json" &&
	"$zerosim" theory --framework torch --model "$tiny" --world 2 --attn sdpa --out "$tmp/sd.json" &&
	"$zerosim" theory --model "$tiny" --world 2 --flash-attn --out "$tmp/pf.json" || fail "--flash-attn"
cmp -s "$tmp/fa.json" "$tmp/sd.json" || fail "--flash-attn differs from --attn sdpa under torch"
grep -q '"flash_attn":	true' "$tmp/pf.json" || fail "--flash-attn under paper is no longer flash"

# the default names no framework; --framework paper is the default
"$zerosim" theory --out "$tmp/d.json" && "$zerosim" theory --framework paper --out "$tmp/p.json" || fail "paper"
grep -q framework "$tmp/d.json" && fail "the default theory.json names a framework"
grep -q buckets "$tmp/d.json" && fail "the default theory.json lists buckets"
cmp -s "$tmp/d.json" "$tmp/p.json" || fail "--framework paper differs from the default"
# The report names torch's departures (partition imbalance, broadcast) and
# checks its claims: on the default MLP its zero1 is no better from N = 3 on;
# with eight equal layers the worst rank keeps falling, and the claim fails.
verdict() { # FILE KEY: the finding's verdict in diff.json
	tr '\n' ' ' <"$1" | sed 's/},/}\n/g' | grep "\"key\":	\"$2\"" | sed 's/.*"verdict":	"\([^"]*\)".*/\1/'
}
report() { # OUT OPTIONS...
	out=$1; shift
	"$zerosim" measure -q "$@" --out "$tmp/m.json" && "$zerosim" theory "$@" --out "$tmp/t.json" &&
		"$zerosim" report --no-render --template "$template" --measured "$tmp/m.json" --theory "$tmp/t.json" \
			--out "$out" >/dev/null ||
		fail "report $*"
}
report "$tmp/r1" --framework torch --schemes dp,zero1 --world 1,2,3,4,8,16
[ "$(verdict "$tmp/r1/diff.json" torch_zero1_no_better_from_3)" = holds ] || fail "torch_zero1_no_better_from_3 does not hold on the MLP"
[ "$(verdict "$tmp/r1/diff.json" torch_zero1_comm_1_5)" = holds ] || fail "torch_zero1_comm_1_5 does not hold"
grep -q 'partition imbalance' "$tmp/r1/flags.txt" || fail "no partition imbalance in flags.txt"
grep -q '= broadcast ' "$tmp/r1/flags.txt" || fail "no broadcast in flags.txt"
grep -q 'dp N=2 unit=model resident: .* = buckets 66176 B$' "$tmp/r1/flags.txt" || fail "no DDP buckets in flags.txt"
[ -e "$tmp/r1/figures/fig6-ranks.gp" ] || fail "no per-rank figure"
# The bars are model state: DDP's bucket (2 B/param on every rank) is left
# out, so the worst rank at N = 3 shows the greedy partition's 9.942.
grep -q '^0 9.9419729' "$tmp/r1/figures/fig6-ranks.dat" || fail "fig6's worst rank is not 9.942 B/param"
grep -q "DDP's buckets, 2 B/param on every rank, left out" "$tmp/r1/figures/fig6-ranks.gp" ||
	fail "fig6's title does not say the buckets are left out"
report "$tmp/r1" --framework torch --layers 8,8,8,8,8,8,8,8,8 --schemes zero1 --world 3,4,8
[ "$(verdict "$tmp/r1/diff.json" torch_zero1_no_better_from_3)" = "does not hold" ] ||
	fail "torch_zero1_no_better_from_3 holds where the worst rank keeps falling"
report "$tmp/r1" --world 1,2,3
grep -q torch "$tmp/r1/diff.json" && fail "the paper's diff.json names torch"
[ -e "$tmp/r1/figures/fig6-ranks.gp" ] && fail "a stale per-rank figure in a reused folder"
# A measurement and a theory of different torch settings are not one
# experiment: the report refuses them in one line and writes nothing.
"$zerosim" measure -q --framework torch --schemes dp,zero1 --world 1,2 --bucket-cap 1 --out "$tmp/b1.json" &&
	"$zerosim" theory --framework torch --schemes dp,zero1 --world 1,2 --out "$tmp/b25.json" &&
	"$zerosim" measure -q --framework torch --schemes zero3 --unit layer --world 2 --prefetch backward-pre \
		--out "$tmp/pre.json" &&
	"$zerosim" theory --framework torch --schemes zero3 --unit layer --world 2 --out "$tmp/none.json" ||
	fail "the settings' files"
refused "$zerosim" report --no-render --template "$template" --measured "$tmp/b1.json" --theory "$tmp/b25.json"
grep -q "differ in bucket_cap_mb: 1 and 25" "$tmp/err" || fail "not the bucket's line: $(cat "$tmp/err")"
refused "$zerosim" report --no-render --template "$template" --measured "$tmp/pre.json" --theory "$tmp/none.json"
grep -q "differ in prefetch: backward-pre and none" "$tmp/err" || fail "not the prefetch line: $(cat "$tmp/err")"
# ... and so are two of different PyTorch: 1.13's zero_grad keeps zeroed
# grads, 2.6's frees them.
# (Files of the plain loop, the one step that follows them so far: the
# keys are put into a wrapped run's files, as a plain loop's would have
# them; the report reads only the config here.)
"$zerosim" measure -q --framework torch --schemes dp --world 2 --steps 1 --out "$tmp/w.json" &&
	"$zerosim" theory --framework torch --schemes dp --world 2 --out "$tmp/wt.json" ||
	fail "the PyTorch files"
sed 's/"framework":/"torch_version": "1.13", "framework":/' "$tmp/w.json" >"$tmp/v13.json"
sed 's/"framework":/"torch_version": "2.6", "framework":/' "$tmp/wt.json" >"$tmp/v26.json"
grep -q '"torch_version": "1.13"' "$tmp/v13.json" || fail "no config key to set in $tmp/w.json"
refused "$zerosim" report --no-render --template "$template" --measured "$tmp/v13.json" --theory "$tmp/v26.json"
grep -q "differ in torch_version: 1.13 and 2.6" "$tmp/err" || fail "not the torch_version line: $(cat "$tmp/err")"
# Every departure a framework causes is a named cause: over DeepSpeed's
# runs (its 1e9-byte bucket, a bucket small enough that the step's fp32
# grads make the peak, the optimizer offloaded, zero3 with the optimizer or
# the params offloaded; both precisions, N = 1..5,
# both units) and torch's, no point keeps bytes in `other`, and DeepSpeed's
# own causes appear where they should.
others() { tr -d ' \t\n' <"$1" | grep -o '"other":[-0-9.e+]*' | grep -v '"other":0$' | head -n 3; }
for opts in "--framework deepspeed" "--framework deepspeed --ds-reduce-bucket 1000" \
	"--framework deepspeed --ds-persist 0 --ds-reduce-bucket 100000" \
	"--framework deepspeed --offload optimizer --ds-reduce-bucket 1000" "--framework torch" \
	"--framework deepspeed --offload params" "--framework deepspeed --offload optimizer --ds-persist 0"; do
	for prec in mixed fp32; do
		schemes=dp,zero1,zero2
		case "$opts" in
		*params | *offload*persist*) schemes=zero3 ;;
		*offload*) schemes=zero1,zero2 ;;
		*torch | *persist*) schemes=dp,zero1,zero2,zero3 ;;
		esac
		# shellcheck disable=SC2086
		report "$tmp/rc" $opts --precision $prec --schemes $schemes --world 1,2,3,4,5 --unit model,layer
		[ -z "$(others "$tmp/rc/diff.json")" ] || fail "$opts $prec: bytes left in other: $(others "$tmp/rc/diff.json")"
		grep -q 'UNEXPLAINED' "$tmp/rc/flags.txt" && fail "$opts $prec: unexplained points"
		case "$opts" in
		*offload*) want='offloaded to host -[0-9]* B' ;;
		*persist*) want="coordinator's gathers -[0-9.]* B" ;;
		*1000) want='step buffers [0-9]* B' ;;
		*deepspeed) want='buckets [12]000000000 B' ;;
		*) want='buckets [0-9]* B' ;;
		esac
		grep -q "$want" "$tmp/rc/flags.txt" || fail "$opts $prec: no '$want' in flags.txt"
	done
done
grep -q 'step buffers' "$tmp/rc/causes.tex" || fail "causes.tex lacks a framework's cause"
report "$tmp/rc" --world 1,2
grep -q 'step buffers' "$tmp/rc/causes.tex" && fail "the paper's causes.tex names DeepSpeed's causes"
grep -q 'padding' "$tmp/rc/causes.tex" || fail "the paper's causes.tex lacks padding"
echo "framework_cli: ok"

#!/bin/sh
# ds_freeze — --freeze under --framework deepspeed on zerosim's transformer
# (docs/schedule.md, "Frozen parameters under DeepSpeed"): ZeRO-1/2 keep a
# frozen parameter whole in the module's dtype, with no fp32 partition,
# no grad partition, no place in the reduce bucket and none in the
# all-gather after step(); dp is the paper's dp; ZeRO-Offload's host
# partitions and temporary grad buffers are the trainable ones'. ZeRO-3
# partitions every parameter, frozen ones too, and runs no backward for a
# module with nothing trainable before it.
#
# 1. The bytes: theory = measure to the byte (tests/json_agree: resident,
#    peak, every category at the peak, bytes sent) on report/models'
#    gpt2-tiny (tied) and llama-tiny: frozen embeddings, blocks:0-0 and
#    all-but-last:1, K = 1, 2, 3, N = 1, 2, 3, dp, zero1, zero2, both
#    units and precisions, DeepSpeed's default bucket, one reduced
#    mid-backward (100,000 and 60,000 elements: llama-tiny's trainable
#    units are 46,208, 46,208 and 65,600, gpt2-tiny's blocks 49,984) and
#    one smaller than every unit (3000: each reduced from where it is),
#    overlap_comm on: a covering set (110 points, a frozen lm_head's 9 among
#    them); ZeRO-3 (30 points, a frozen lm_head under full recompute and
#    all-but-last:1 too), --offload optimizer (ZeRO-3 7, ZeRO-1/2 17) and
#    ZeRO-3's --offload params (21: both models and precisions, the three
#    patterns, N = 1-3), and ZeRO-3 with the first module that trains
#    inside its layer (layer 0's norm frozen below its q, k, v or c_attn:
#    8); by hand: the resident against the unfrozen run, all-but-last:1's
#    and the frozen norm's gathers and reduce-scatters, the offloaded
#    device and host bytes (--offload params: the frozen fp16 partition on
#    the host).
# 2. Training: DeepSpeed's losses equal the paper's with the same --freeze
#    (the same arithmetic: "The fp32 gradient partition is the reduced
#    grads converted exactly"), bitwise, every scheme (ZeRO-1/2 offloaded
#    too), fp32 and mixed, three steps; ZeRO-3 --offload params's equal
#    ZeRO-3's on the device (12 more), ZeRO-3's with layer 0's norm frozen
#    (12 more), llama-tiny's lm_head frozen (16 more); the control: without --freeze they are other ones.
# 3. A frozen tensor's bytes never change: the frozen range of
#    --dump-weights is bitwise the same after one step and after three,
#    and the initial weights (a run's case file; mixed: rounded to fp16),
#    while the trainable range moved.
# 4. What is not built is refused with one line, exit 2.
# A few seconds.
#
# Exit 0 pass, 1 mismatch, 99 hard error.
set -u
name=ds_freeze
. "${srcdir:-.}/tests/ft_lib.sh"
. "${srcdir:-.}/tests/freeze_lib.sh"
ds="--framework deepspeed"
# A sanitizer build (--enable-sanitizers) runs each sweep at its largest N
# alone (3 mostly: several ranks, uneven, padded; fz_largest), and the
# losses against the paper's at one precision a model (gpt2-tiny fp32,
# llama-tiny mixed: every pattern and scheme still, both precisions); ASan
# and UBSan look for memory errors along the same paths, the agreement at
# every N and precision is the plain build's make check to show.
want_points=207 want_checked=124 san=
if grep -q '^#define ZS_SANITIZERS 1' "$top/config.h" 2>/dev/null; then
	fz_largest=1 want_points=78 want_checked=62 san=1
	echo "$name: a sanitizer build: each sweep at its largest N alone, the losses at one precision a model"
fi
gpt2=$src/report/models/gpt2-tiny.json llama=$src/report/models/llama-tiny.json
for f in "$gpt2" "$llama"; do
	[ -r "$f" ] || { echo "$name: $f is missing" >&2; exit 99; }
done

# 1. theory = measure (tests/freeze_lib.sh's fz_agree)
s="--schemes dp,zero1,zero2"
fz_agree $ds --model "$llama" --freeze embeddings --precision mixed --world 1,2,3 $s --unit layer,model
fz_agree $ds --model "$llama" --freeze embeddings --precision fp32 --grad-accum 2 --world 1,2,3 $s --unit model
fz_agree $ds --model "$llama" --freeze blocks:0-0 --precision fp32 --world 1,2,3 $s --unit layer
fz_agree $ds --model "$llama" --freeze blocks:0-0 --precision mixed --grad-accum 3 --world 1,2,3 $s --unit layer \
	--ds-reduce-bucket 100000
fz_agree $ds --model "$llama" --freeze all-but-last:1 --precision mixed --grad-accum 2 --world 1,2,3 $s \
	--unit model,layer
fz_agree $ds --model "$gpt2" --freeze embeddings --precision fp32 --world 1,2,3 $s --unit model,layer
fz_agree $ds --model "$gpt2" --freeze embeddings --precision mixed --grad-accum 2 --world 2,3 --schemes zero1,zero2 \
	--unit layer,model --ds-reduce-bucket 60000 --ds-overlap-comm on
fz_agree $ds --model "$gpt2" --freeze blocks:0-0 --precision mixed --grad-accum 3 --world 1,2,3 $s --unit layer
fz_agree $ds --model "$llama" --freeze re:lm_head --precision mixed --world 1,2,3 $s --unit layer
# ZeRO-3 (every tensor's fp16 partition; the grad, fp32 and Adam
# partitions of the trainable tensors; a frozen table runs no backward):
# both patterns it takes, N = 1, 2, 3, both units and precisions, K = 1-3,
# recompute none and full, the default bucket, one of 3000 (each table
# reduced alone, held past its module) and overlap_comm.
z="--schemes zero3"
fz_agree $ds --model "$llama" --freeze embeddings --precision mixed --world 1,2,3 $z --unit layer,model
fz_agree $ds --model "$llama" --freeze embeddings --precision fp32 --grad-accum 2 --world 2,3 $z --unit layer \
	--recompute full
fz_agree $ds --model "$llama" --freeze blocks:0-0 --precision fp32 --world 1,2,3 $z --unit layer \
	--ds-reduce-bucket 3000
fz_agree $ds --model "$llama" --freeze blocks:0-0 --precision mixed --grad-accum 3 --world 2,3 $z --unit layer \
	--recompute full --ds-overlap-comm on
fz_agree $ds --model "$gpt2" --freeze embeddings --precision mixed --grad-accum 2 --world 1,2,3 $z --unit layer \
	--recompute full
fz_agree $ds --model "$gpt2" --freeze embeddings --precision fp32 --world 3 $z --unit model --ds-reduce-bucket 3000
fz_agree $ds --model "$gpt2" --freeze blocks:0-0 --precision mixed --world 1,2,3 $z --unit layer
fz_agree $ds --model "$llama" --freeze re:lm_head --precision fp32 --world 1,2,3 $z --unit layer --recompute full
# all-but-last:1: the frozen embedding and blocks below the first that
# trains run no backward (recompute none); under full recompute
# enable_input_require_grads gives them one (util/ds_coord.h)
fz_agree $ds --model "$llama" --freeze all-but-last:1 --precision mixed --world 1,2,3 $z --unit layer
fz_agree $ds --model "$gpt2" --freeze all-but-last:1 --precision fp32 --grad-accum 2 --world 2,3 $z --unit layer \
	--ds-persist 0
fz_agree $ds --model "$llama" --freeze all-but-last:1 --precision fp32 --grad-accum 3 --world 2,3 $z --unit layer \
	--recompute full --ds-persist 0 --ds-reduce-bucket 3000
# What the step saves under --freeze, by module (ZeRO-3) and whole
# (ZeRO-1/2): nothing below the first trainable tensor, no frozen linear's
# input (tests/paper_freeze_tfm.sh, part 5, counts the same by hand)
fz_agree $ds --model "$llama" --freeze blocks:1-1 --precision mixed --world 1,2,3 $s --unit layer \
	--recompute selective
fz_agree $ds --model "$gpt2" --freeze re:mlp.c_proj --precision fp32 --world 1,2,3 $z --unit layer
fz_agree $ds --model "$llama" --freeze re:down_proj --precision mixed --world 2,3 $z --unit layer --recompute selective
row=$((32 * 4)) blk=$((64 + 1 + 128 + 64 + 64 + 64 + 64 + 1 + 352 + 176 + 64)) # llama-tiny's block, per row
# (zero1, zero2: ZeRO-3's N = 1 peak is in step(), where no activation is)
fz_saved $((row * blk)) all-but-last:1 $ds --model "$llama" --schemes zero2
fz_saved $((row * (64 + 64 + 64 + 176))) blocks:1-1 $ds --model "$llama" --schemes zero1
fz_saved 0 all-but-last:1 $ds --model "$llama" --schemes zero2 --recompute full
# a frozen head keeps no input (issue #23): lnf, 64 a row (gpt2-tiny's tied
# head is wte, frozen with the embeddings)
fz_saved $((row * 64)) re:lm_head $ds --model "$llama" --schemes zero1
fz_saved $((row * 64)) re:lm_head $ds --model "$llama" --schemes zero1 --recompute full
fz_saved $((row * 64)) embeddings $ds --model "$gpt2" --schemes zero1
fz_bits all-but-last:1 $ds --model "$llama" --precision mixed --schemes zero2,zero3 --world 2 --unit layer
# the first module that trains inside its layer, nothing trainable before
# it (layer 0's q, k and v with its input_layernorm frozen; gpt2's c_attn
# with ln_1): gathered for backward, never released after it (its input
# needs no grad), the norm not gathered for backward
f0='embeddings,re:layers\.0\.input_layernorm' g0='embeddings,re:h\.0\.ln_1'
fz_agree $ds --model "$llama" --freeze "$f0" --precision mixed --world 1,2,3 $z --unit layer
fz_agree $ds --model "$gpt2" --freeze "$g0" --precision fp32 --world 2,3 $z --unit layer --ds-persist 0
fz_agree $ds --model "$llama" --freeze "$f0" --precision fp32 --grad-accum 2 --world 2 $z --unit layer --recompute full
fz_agree $ds --model "$llama" --freeze "$f0" --precision mixed --world 2,3 --schemes zero3 --offload params --unit layer
# ZeRO-Offload (--offload optimizer): the host fp32, grad and Adam
# partitions over the trainable elements (tensors, ZeRO-3), ZeRO-1/2's
# temporary grad buffers the largest trainable tensor's (gpt2's tied table
# frozen: a c_fc weight)
o="--schemes zero3 --offload optimizer"
fz_agree $ds --model "$llama" --freeze embeddings --precision mixed --world 1,2,3 $o --unit layer
fz_agree $ds --model "$gpt2" --freeze all-but-last:1 --precision fp32 --world 2,3 $o --unit layer --ds-persist 0
fz_agree $ds --model "$llama" --freeze all-but-last:1 --precision mixed --world 2,3 $o --unit layer \
	--recompute full --ds-reduce-bucket 3000
# ZeRO-Infinity's CPU tier (--offload params): every tensor's fp16
# partition on the host, the frozen ones' too (partition_parameters.py's
# remote_device), the trainable ones' grad, fp32 and Adam partitions
# there as --offload optimizer's: both models, both precisions, the three
# patterns, N = 1-3
o="--schemes zero3 --offload params"
fz_agree $ds --model "$llama" --freeze embeddings --precision mixed --world 1,2,3 $o --unit layer,model
fz_agree $ds --model "$gpt2" --freeze embeddings --precision fp32 --world 1,2,3 $o --unit layer --recompute full
fz_agree $ds --model "$gpt2" --freeze blocks:0-0 --precision mixed --world 1,2,3 $o --unit layer
fz_agree $ds --model "$llama" --freeze blocks:0-0 --precision fp32 --world 1,2,3 $o --unit layer --ds-reduce-bucket 3000
fz_agree $ds --model "$llama" --freeze all-but-last:1 --precision mixed --world 1,2,3 $o --unit layer
fz_agree $ds --model "$gpt2" --freeze all-but-last:1 --precision fp32 --world 1,2,3 $o --unit layer --ds-persist 0
o="--schemes zero1,zero2 --offload optimizer"
fz_agree $ds --model "$llama" --freeze embeddings --precision mixed --world 1,2,3 $o --unit layer,model
fz_agree $ds --model "$gpt2" --freeze all-but-last:1 --precision fp32 --world 2,3 $o --unit layer
fz_agree $ds --model "$gpt2" --freeze embeddings --precision mixed --world 2 --schemes zero2 --offload optimizer \
	--unit layer --ds-reduce-bucket 3000
# (last: the files below are its)
fz_agree $ds --model "$gpt2" --freeze all-but-last:1 --precision fp32 --world 2 $s --unit layer \
	--ds-reduce-bucket 3000
[ "$points" -eq "$want_points" ] || { echo "$name: $points points compared, $want_points expected" >&2; exit 1; }
echo "ok: $points points in $configs sweeps"
# The files say what was frozen (docs/formats.md: config.freeze).
for f in "$tmp/m.json" "$tmp/t.json"; do
	tr -d ' \n\t' <"$f" | grep -q '"freeze":"all-but-last:1"' ||
		{ echo "$name: FAIL: $f has no config.freeze" >&2; status=1; }
done
# By hand, from the units alone (theory --unit layer): llama-tiny's units
# are 65,536 (the embedding), 46,208, 46,208, 65,600; with the embedding
# frozen, zero2 at N = 2, mixed, Adam, unit=layer holds every param in
# fp16 (2Ψ) and per trainable slot, S_t = Σ_{u>0} ceil(t_u/2) = 79,008,
# the grad (2), fp32 (4) and Adam (8) partitions: 2·223,552 + 14·79,008
# = 1,553,216 B (docs/schedule.md, "Frozen parameters under DeepSpeed").
fz_units
psi=$(echo "$units" | tr ',' '\n' | awk '{ n += $1 } END { print n }')
# the trainable units (all but the embedding's), each ceil(t_u/2) a rank
st=$(echo "$units" | tr ',' '\n' | awk 'NR > 1 { s += int(($1 + 1) / 2) } END { print s }')
want=$((2 * psi + st * (2 + 4 + 8)))
"$zerosim" measure $ds --model "$llama" --freeze embeddings --seq 16 --batch 2 --steps 1 --world 2 --schemes zero2 \
	--unit layer --precision mixed --out "$tmp/x.json" || exit 99
got=$(tr -d ' \n\t' <"$tmp/x.json" | grep -o '"resident_bytes":[0-9]*' | head -1 | cut -d: -f2)
if [ "$got" = "$want" ]; then
	echo "ok: llama-tiny, frozen embeddings, zero2 N=2 mixed: resident 2·$psi + 14·$st = $want B, measured"
else
	echo "$name: FAIL: resident $got B measured, 2·Ψ + 14·S_t = $want B by hand" >&2
	status=1
fi
# ZeRO-3 by hand against its own unfrozen run: freezing the embedding
# (65,536 elements, one tensor) drops its grad, fp32 and Adam partitions,
# ceil(65,536/N) elements a rank at 2 + 4 + 8 B, and nothing else (its
# fp16 partition stays, gathered in forward as before; the bucket, the
# persistent params whole, the other tensors' partitions the same).
for N in 2 3; do
	for f in "" "--freeze embeddings"; do
		# shellcheck disable=SC2086
		"$zerosim" measure $ds --model "$llama" $f --seq 16 --batch 2 --steps 1 --world $N --schemes zero3 \
			--unit layer --precision mixed --out "$tmp/x.json" || exit 99
		r="${r:-} $(tr -d ' \n\t' <"$tmp/x.json" | grep -o '"resident_bytes":[0-9]*' | head -1 | cut -d: -f2)"
	done
	set -- $r
	want=$(($1 - 14 * ((e + N - 1) / N)))
	if [ "$2" = "$want" ]; then
		echo "ok: llama-tiny zero3 N=$N mixed: frozen embeddings resident $1 - 14·ceil($e/$N) = $want B, measured"
	else
		echo "$name: FAIL: zero3 N=$N frozen resident $2 B measured, $1 - 14·ceil($e/$N) = $want B by hand" >&2
		status=1
	fi
	r=
done
# ZeRO-3 offloaded, N = 2 mixed: the host holds the trainable tensors' grad
# (2), fp32 partition (4), its fp32 grad (4) and Adam (8) partitions, so
# freezing the embedding takes 18·ceil(e/2) B off the host and nothing off
# the device (its fp16 partition stays there).
for f in "" "--freeze embeddings"; do
	# shellcheck disable=SC2086
	"$zerosim" measure $ds --model "$llama" $f --seq 16 --batch 2 --steps 1 --world 2 --schemes zero3 --unit layer \
		--precision mixed --offload optimizer --out "$tmp/x.json" || exit 99
	r="${r:-} $(tr -d ' \n\t' <"$tmp/x.json" | grep -o '"resident_bytes":[0-9]*' | head -1 | cut -d: -f2)"
	r="$r $(tr -d ' \n\t' <"$tmp/x.json" | grep -o '"host_resident_bytes":\[[0-9]*' | head -1 | cut -d[ -f2)"
done
set -- $r
r=
if [ "$1" = "$3" ] && [ $(($2 - $4)) -eq $((18 * ((e + 1) / 2))) ]; then
	echo "ok: zero3 --offload optimizer N=2: frozen embeddings host $2 - 18·ceil($e/2) = $4 B, device $1 B the same"
else
	echo "$name: FAIL: zero3 offloaded N=2: device $1 -> $3 B (want the same), host $2 -> $4 B" \
		"(want 18·ceil($e/2) less)" >&2
	status=1
fi
# --offload params, N = 2 mixed: freezing the embedding takes the same
# 18·ceil(e/2) B off the host (its fp16 partition stays there, made on
# Init's remote_device, partition_parameters.py 1601-1616) and nothing off
# the device; and the fp16 partitions the host holds beyond --offload
# optimizer's are every tensor's, frozen or not: the host's excess over
# --offload optimizer's, and the device's saving, are the same with and
# without --freeze (were the frozen partition left on the device, frozen
# would hold 2·ceil(e/2) B less of it on the host).
for f in "" "--freeze embeddings"; do
	for off in params optimizer; do
		# shellcheck disable=SC2086
		"$zerosim" measure $ds --model "$llama" $f --seq 16 --batch 2 --steps 1 --world 2 --schemes zero3 \
			--unit layer --precision mixed --offload $off --out "$tmp/x.json" || exit 99
		r="${r:-} $(tr -d ' \n\t' <"$tmp/x.json" | grep -o '"resident_bytes":[0-9]*' | head -1 | cut -d: -f2)"
		r="$r $(tr -d ' \n\t' <"$tmp/x.json" | grep -o '"host_resident_bytes":\[[0-9]*' | head -1 | cut -d[ -f2)"
	done
done
# shellcheck disable=SC2086
set -- $r # device, host: params, optimizer unfrozen; params, optimizer frozen
r=
if [ "$1" = "$5" ] && [ $(($2 - $6)) -eq $((18 * ((e + 1) / 2))) ] && [ $(($2 - $4)) -eq $(($6 - $8)) ] &&
	[ $(($3 - $1)) -eq $(($7 - $5)) ] && [ $(($2 - $4)) -eq $(($3 - $1)) ]; then
	echo "ok: zero3 --offload params N=2: frozen embeddings host $2 - 18·ceil($e/2) = $6 B, device $1 B the same;" \
		"the fp16 partitions moved from the device, $(($2 - $4)) B, frozen or not"
else
	echo "$name: FAIL: zero3 --offload params N=2: device $1 -> $5 B (want the same), host $2 -> $6 B" \
		"(want 18·ceil($e/2) less); over --offload optimizer: host $(($2 - $4)) -> $(($6 - $8)) B," \
		"device $(($3 - $1)) -> $(($7 - $5)) B (want all four the same)" >&2
	status=1
fi
# A frozen table runs no backward under ZeRO-3 (no pre-backward hook:
# its output needs no grad), so nothing gathers it there: step 1 (the
# trace recorded, every module released after it runs; --ds-persist 0,
# nothing kept whole) gathers the frozen embedding once, the unfrozen
# one twice, (N-1)·ceil(e/N)·2 B more; the reduce-scatter sends its
# grads unfrozen only, as many bytes.
ag() { tr -d ' \n\t' <"$1" | grep -o "\"$2\":{\"calls_per_step\":[0-9.]*,\"bytes_per_step\":[0-9]*" | head -1 |
	sed 's/.*://'; }
for f in "" "--freeze embeddings"; do
	# shellcheck disable=SC2086
	"$zerosim" measure $ds --model "$llama" $f --seq 16 --batch 2 --steps 1 --world 2 --schemes zero3 --unit layer \
		--precision mixed --ds-persist 0 --out "$tmp/x.json" || exit 99
	r="${r:-} $(ag "$tmp/x.json" all_gather) $(ag "$tmp/x.json" reduce_scatter)"
done
set -- $r
r=
if [ $(($1 - $3)) -eq $((2 * e / 2)) ] && [ $(($2 - $4)) -eq $((2 * e / 2)) ]; then
	echo "ok: zero3 N=2 step 1: the frozen embedding gathered in forward only, its grads not reduced ($1 - $3 = $2 - $4 = 2·$e/2 B)"
else
	echo "$name: FAIL: zero3 N=2 step 1: gathered $1 -> $3 B, reduced $2 -> $4 B, expected 2·$e/2 B less each" >&2
	status=1
fi
# The first module that trains inside its layer: with layer 0's
# input_layernorm frozen too, its q, k and v (one module here, three
# DeepSpeed's, each with a trainable weight and an input needing no grad)
# get their pre-backward hook only, and the norm (its output needing no
# grad) runs no backward: step 1 gathers it once, not twice, and reduces
# none of its grads, (N-1)·ceil(d/N)·2 = d B less each than --freeze
# embeddings (where the norm is the first that trains).
d=$(tr -d ' \n\t' <"$llama" | grep -o '"hidden_size":[0-9]*' | cut -d: -f2)
for f in embeddings "$f0"; do
	# shellcheck disable=SC2086
	"$zerosim" measure $ds --model "$llama" --freeze "$f" --seq 16 --batch 2 --steps 1 --world 2 --schemes zero3 \
		--unit layer --precision mixed --ds-persist 0 --out "$tmp/x.json" || exit 99
	r="${r:-} $(ag "$tmp/x.json" all_gather) $(ag "$tmp/x.json" reduce_scatter)"
done
set -- $r
r=
if [ -n "$d" ] && [ $(($1 - $3)) -eq "$d" ] && [ $(($2 - $4)) -eq "$d" ]; then
	echo "ok: zero3 N=2 step 1, layer 0's norm frozen below its q, k, v: $d B less gathered and reduced"
else
	echo "$name: FAIL: zero3 N=2 $f0: gathered $1 -> $3 B, reduced $2 -> $4 B, expected d = $d B less each" >&2
	status=1
fi
# all-but-last:1 (the embedding, e, and block 0, b0, frozen): nothing
# below block 1 runs a backward (no output there needs grad), so step 1
# gathers and reduce-scatters (N-1)·(e+b0)/N·2 B less than the unfrozen
# run (llama-tiny's tensors all even); under --recompute full
# (enable_input_require_grads) block 0 runs its backward, gathered again
# (and recomputed), and only the table's backward goes: e/2·2 B less
# gathered, still (e+b0)/2·2 B less reduced.
for rc in none full; do
	for f in "" "--freeze all-but-last:1"; do
		# shellcheck disable=SC2086
		"$zerosim" measure $ds --model "$llama" $f --seq 16 --batch 2 --steps 1 --world 2 --schemes zero3 \
			--unit layer --precision mixed --ds-persist 0 --recompute $rc --out "$tmp/x.json" || exit 99
		r="${r:-} $(ag "$tmp/x.json" all_gather) $(ag "$tmp/x.json" reduce_scatter)"
	done
	set -- $r
	r=
	g=$((e + b0))
	[ "$rc" = full ] && g=$e
	if [ $(($1 - $3)) -eq "$g" ] && [ $(($2 - $4)) -eq $((e + b0)) ]; then
		echo "ok: zero3 N=2 recompute $rc all-but-last:1: $g B less gathered, $((e + b0)) B less reduced"
	else
		echo "$name: FAIL: zero3 N=2 recompute $rc all-but-last:1: gathered $1 -> $3 B (want $g less)," \
			"reduced $2 -> $4 B (want $((e + b0)) less)" >&2
		status=1
	fi
done
# ZeRO-Offload by hand: gpt2-tiny (d = 64, vocab 1024, 64 positions),
# the embeddings frozen, zero2 N = 2 mixed, unit=layer: the device holds
# the fp16 params (2Ψ) and the temporary grad buffer of the largest
# trainable tensor, a c_fc weight 64·256 (the tied table, 65,536, frozen);
# the host the fp32 partition, its fp32 grad and Adam's m and v over S_t
# (16 B a slot) and the host's buffer of the same 64·256 grads.
"$zerosim" theory --model "$gpt2" --unit layer --world 1 --schemes dp --out "$tmp/u.json" || exit 99
gunits=$(tr -d ' \n\t' <"$tmp/u.json" | grep -o '"units":\[[0-9,]*\]' | head -1 | sed 's/.*\[//; s/\]//')
gpsi=$(echo "$gunits" | tr ',' '\n' | awk '{ n += $1 } END { print n }')
# unit 0 less the frozen tables (wte 1024·64, wpe 64·64), then the blocks
gst=$(echo "$gunits" | tr ',' '\n' | awk -v e=$((1024 * 64 + 64 * 64)) \
	'{ t = NR == 1 ? $1 - e : $1; s += int((t + 1) / 2) } END { print s }')
"$zerosim" measure $ds --model "$gpt2" --freeze embeddings --seq 16 --batch 2 --steps 1 --world 2 --schemes zero2 \
	--unit layer --precision mixed --offload optimizer --out "$tmp/x.json" || exit 99
got=$(tr -d ' \n\t' <"$tmp/x.json" | grep -o '"resident_bytes":[0-9]*' | head -1 | cut -d: -f2)
goth=$(tr -d ' \n\t' <"$tmp/x.json" | grep -o '"host_resident_bytes":\[[0-9]*' | head -1 | cut -d[ -f2) # rank 0's
want=$((2 * gpsi + 2 * 64 * 256)) wanth=$((16 * gst + 2 * 64 * 256))
if [ "$got" = "$want" ] && [ "$goth" = "$wanth" ]; then
	echo "ok: gpt2-tiny offload, frozen embeddings, zero2 N=2: device 2·$gpsi + 2·64·256 = $want B," \
		"host 16·$gst + 2·64·256 = $wanth B, measured"
else
	echo "$name: FAIL: gpt2-tiny offload zero2 N=2: device $got B (want $want), host $goth B (want $wanth)" >&2
	status=1
fi
# The padding the frozen layout holds (docs/formats.md): at N = 3 the
# trainable units 46,208, 46,208, 65,600 pad with 1 element each, 3 in
# all, 1 per rank, at the grad, fp32 and Adam partitions' 2 + 4 + 8 B
# (the frozen embedding's 2 are not partitioned); dp the paper's, none.
# ZeRO-3 pads each tensor: 26 elements in all (the embedding's 2 among
# them) at the fp16 partitions' 2 B, 24 of the trainable tensors at
# 2 + 4 + 8 B: (26·2 + 24·14)/3 = 129.333 B a rank.
fz_padding deepspeed dp,zero1,zero2,zero3 "0.000 14.000 14.000 129.333"
fz_level deepspeed

# 2. The losses against the paper's, bitwise (three each).
losses() { tr -d ' \n\t' <"$1" | grep -o '"losses":\[[^]]*\]' | head -1; }
checked=0
for model in "$gpt2" "$llama"; do
	for freeze in embeddings blocks:0-0 all-but-last:1 inside re:lm_head; do
		# inside: layer 0's first module that trains is not its first (ZeRO-3 and its offload alone)
		[ "$model$freeze" = "${gpt2}re:lm_head" ] && continue # tied: no lm_head of its own
		[ "$freeze" = inside ] && { freeze=$f0 && [ "$model" = "$gpt2" ] && freeze=$g0; }
		precs="fp32 mixed"
		[ -z "$san" ] || { precs=mixed && [ "$model" = "$gpt2" ] && precs=fp32; }
		for prec in $precs; do
			for scheme in dp zero1 zero2 zero3 zero1+optimizer zero2+optimizer zero3+optimizer zero3+params; do
				case $freeze,$scheme in "$f0",zero[12]* | "$f0",dp | "$g0",zero[12]* | "$g0",dp) continue ;; esac
				common="--model $model --world 2 --precision $prec --seq 16 --batch 2 --steps 3 --freeze $freeze"
				common="$common --unit layer --grad-accum 2"
				off= k=" K=2"
				case $scheme in *+*) # no --grad-accum offloaded (config.c)
					off=" --offload ${scheme#*+}" k= common="${common% --grad-accum 2}" scheme=${scheme%+*} ;;
				esac
				# ZeRO-3 against the paper's zero2 (the paper's zero3 wants
				# whole units frozen; the arithmetic is the same); --offload
				# params against ZeRO-3 on the device (fp32 to fp16 in place
				# on the host)
				paper="--schemes $scheme" refname=paper
				[ "$scheme" = zero3 ] && paper="--schemes zero2"
				[ "$off" = " --offload params" ] && paper="--schemes zero3 $ds" refname="device run"
				# shellcheck disable=SC2086
				"$zerosim" measure $common $paper --out "$tmp/a.json" || exit 99
				# shellcheck disable=SC2086
				"$zerosim" measure $common --schemes $scheme $ds $off --out "$tmp/b.json" || exit 99
				checked=$((checked + 1))
				a=$(losses "$tmp/a.json") b=$(losses "$tmp/b.json")
				what="${model##*/} --freeze $freeze $prec $scheme$off N=2$k"
				[ -n "$a" ] && [ "$a" = "$b" ] && { echo "ok: $what: the $refname's losses"; continue; }
				echo "$name: FAIL: $what: deepspeed's losses $b, the $refname's $a" >&2
				status=1
			done
		done
	done
done
[ "$checked" -eq "$want_checked" ] || { echo "$name: $checked comparisons, $want_checked expected" >&2; exit 1; }
common="--model $llama --world 2 --precision fp32 --seq 16 --batch 2 --steps 3 --schemes zero2 $ds"
# shellcheck disable=SC2086
"$zerosim" measure $common --freeze embeddings --out "$tmp/a.json" || exit 99
# shellcheck disable=SC2086
"$zerosim" measure $common --out "$tmp/b.json" || exit 99
if [ "$(losses "$tmp/a.json")" = "$(losses "$tmp/b.json")" ]; then
	echo "$name: FAIL: the control (no --freeze) has the frozen run's losses: the check cannot fail" >&2
	status=1
else
	echo "ok: the control (no --freeze) differs: $(losses "$tmp/b.json")"
fi

# 3. The frozen bytes (tests/freeze_lib.sh; llama-tiny's units from fz_units above).
frozen_check "embeddings, fp32 zero2 N=2 K=2" 1 "$e" $((e + 1)) "$n" $ds --freeze embeddings --precision fp32 \
	--schemes zero2 --world 2 --grad-accum 2
frozen_check "embeddings, mixed zero1 N=3" 1 "$e" $((e + 1)) "$n" $ds --freeze embeddings --precision mixed \
	--schemes zero1 --world 3
frozen_check "blocks:0-0, mixed zero2 N=3 unit=layer" $((e + 1)) "$n" 1 "$e" $ds --freeze blocks:0-0 \
	--precision mixed --schemes zero2 --world 3 --unit layer
frozen_check "embeddings, mixed zero3 N=3 K=2" 1 "$e" $((e + 1)) "$n" $ds --freeze embeddings --precision mixed \
	--schemes zero3 --world 3 --grad-accum 2
frozen_check "blocks:0-0, fp32 zero3 N=2 unit=layer" $((e + 1)) "$n" 1 "$e" $ds --freeze blocks:0-0 \
	--precision fp32 --schemes zero3 --world 2 --unit layer
frozen_check "embeddings, mixed zero2 N=2 --offload optimizer" 1 "$e" $((e + 1)) "$n" $ds --freeze embeddings \
	--precision mixed --schemes zero2 --world 2 --offload optimizer
frozen_check "blocks:0-0, fp32 dp N=2 unit=layer K=3" $((e + 1)) "$n" 1 "$e" $ds --freeze blocks:0-0 \
	--precision fp32 --schemes dp --world 2 --unit layer --grad-accum 3

# 4. Refused by name: one line on stderr, exit 2 (measure and theory).
refused() { # PATTERN OPTIONS...
	pattern=$1
	shift
	for cmd in measure theory; do
		"$zerosim" $cmd $ds "$@" --out "$tmp/r.json" 2>"$tmp/err"
		rc=$?
		if [ "$rc" -eq 2 ] && [ "$(wc -l <"$tmp/err")" -eq 1 ] && grep -q -- "$pattern" "$tmp/err"; then
			echo "ok: $cmd refused: $(cat "$tmp/err")"
		else
			echo "$name: FAIL: $cmd $* exited $rc, expected 2 and one line with '$pattern':" >&2
			cat "$tmp/err" >&2
			status=1
		fi
	done
}
refused "only with --model" --freeze embeddings --world 2 --schemes zero2
refused "not one run of the flat vector" --model "$gpt2" --freeze blocks:0-0 --unit model --world 2 --schemes zero1
refused "some parts of the fused tensor" --model "$llama" --freeze re:q_proj --world 2 --schemes zero2
refused "freezes every one of" --model "$llama" --freeze 're:.' --world 2 --schemes zero2
# The report takes a frozen DeepSpeed run (its floors the frozen run's).
fz_report_taken deepspeed
exit $status

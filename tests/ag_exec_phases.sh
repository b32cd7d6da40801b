#!/bin/sh
# ag_exec_phases — measure --timeline and the theory agree on every phase
# of the PyTorch step under DDP and FSDP (tests/json_agree holds each
# phase_peak_bytes and binding_phase to the timeline's events), not only on
# the peak. engine/ag_exec.c runs the ranks one after another between two
# collectives; a rank's change of phase once went into every rank's log,
# so that rank 0's timeline showed rank 1's walk from forward into
# backward as a zero-byte "forward" event inside its own backward (at
# DDP's first all-reduce: with --recompute full a forward peak above the
# theory's; an odd-shaped llama's FSDP at N = 3 too). Now each rank logs
# only its own (tracker_set_rank_phase).
#
# Rows: gpt2, llama and llama with an odd ffn (172), DDP (--schemes dp,
# zero1) and FSDP at N = 2 and 3, with and without --recompute full. A
# combination the step refuses ("not described yet", one line) is said,
# not checked. Then the plain loop under --torch-device cuda (below).
# Exit 0 pass, 1 mismatch, 99 hard error.
set -u
name=ag_exec_phases tag=agph
. "${srcdir:-.}/tests/agree_lib.sh"

# tests/hf_torch.sh's tiny gpt2 and llama
cat >"$tmp/gpt2.json" <<'JSON'
{"model_type": "gpt2", "n_embd": 64, "n_head": 4, "n_layer": 2, "n_positions": 64, "vocab_size": 256,
 "activation_function": "gelu_new", "tie_word_embeddings": true, "embd_pdrop": 0.0, "attn_pdrop": 0.0,
 "resid_pdrop": 0.0}
JSON
cat >"$tmp/llama.json" <<'JSON'
{"model_type": "llama", "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
 "num_key_value_heads": 2, "intermediate_size": 160, "max_position_embeddings": 64, "vocab_size": 256,
 "rms_norm_eps": 1e-05, "tie_word_embeddings": false, "hidden_act": "silu", "attention_dropout": 0.0}
JSON
sed 's/"intermediate_size": 160/"intermediate_size": 172/' "$tmp/llama.json" >"$tmp/llama-odd.json"
# (the --torch-device cuda rows below: the same with their configs' dropout)
sed 's/"embd_pdrop": 0.0, "attn_pdrop": 0.0,/"embd_pdrop": 0.1, "attn_pdrop": 0.1,/; s/"resid_pdrop": 0.0/"resid_pdrop": 0.1/' \
	"$tmp/gpt2.json" >"$tmp/gpt2-dropout.json"
sed 's/"attention_dropout": 0.0/"attention_dropout": 0.1/' "$tmp/llama.json" >"$tmp/llama-dropout.json"

fail=0 checked=0
for model in gpt2 llama llama-odd; do
	for wrap in "ddp dp" "ddp zero1" "fsdp zero3"; do
		set -- $wrap
		for n in 2 3; do
			for rc in none full; do
				row="$model --wrapper $1 --schemes $2 --world $n --recompute $rc"
				args="--framework torch --torch-device cpu --seq 32 --batch 2 --steps 2 --attn eager --precision fp32
				      --model $tmp/$model.json --wrapper $1 --schemes $2 --world $n --recompute $rc"
				if ! "$zerosim" measure -q $args --timeline --out "$tmp/m.json" 2>"$tmp/err"; then
					if grep -q 'not described yet' "$tmp/err"; then
						echo "ag_exec_phases: $row: refused ($(head -n 1 "$tmp/err")), not checked"
						continue
					fi
					echo "ag_exec_phases: $row: measure failed: $(head -n 1 "$tmp/err")" >&2
					exit 99
				fi
				if ! "$zerosim" theory $args --out "$tmp/t.json" 2>"$tmp/err"; then
					echo "ag_exec_phases: $row: theory failed: $(head -n 1 "$tmp/err")" >&2
					exit 99
				fi
				checked=$((checked + 1))
				if ! "$agree" "$tmp/m.json" "$tmp/t.json" >"$tmp/out" 2>&1; then
					echo "ag_exec_phases: $row:" >&2
					sed 's/^/  /' "$tmp/out" >&2
					fail=1
				fi
			done
		done
	done
done
# --steps 1: the one step starts from the set-up's end, and the theory's
# phase_peak_bytes.setup (the state each step starts from) is that, as the
# timeline's first event says; it gave the state after step 1, which no
# step starts from at --steps 1 (every step with a step-1 list of its own:
# the plain loop, DDP, FSDP, DeepSpeed's engine; on main gpt2's plain loop
# here said 1,456,248 against the timeline's 491,528, and each row failed).
steps1=0
for row in "gpt2 --framework torch --wrapper none --world 1" "llama --framework torch --wrapper ddp --schemes zero1 --world 2" \
	"gpt2 --framework torch --wrapper fsdp --schemes zero3 --world 2" \
	"llama --framework deepspeed --torch-version 1.13 --wrapper deepspeed --schemes zero1 --world 2"; do
	set -- $row
	m=$1
	shift
	args="--torch-device cpu --seq 32 --batch 2 --steps 1 --attn eager --precision fp32 --model $tmp/$m.json $*"
	# shellcheck disable=SC2086
	if ! "$zerosim" measure -q $args --timeline --out "$tmp/m.json" 2>"$tmp/err" ||
		! "$zerosim" theory $args --out "$tmp/t.json" 2>>"$tmp/err"; then
		echo "ag_exec_phases: --steps 1 $row: failed: $(head -n 1 "$tmp/err")" >&2
		exit 99
	fi
	steps1=$((steps1 + 1))
	if ! "$agree" "$tmp/m.json" "$tmp/t.json" >"$tmp/out" 2>&1; then
		echo "ag_exec_phases: --steps 1 $row:" >&2
		sed 's/^/  /' "$tmp/out" >&2
		fail=1
	fi
done
echo "ag_exec_phases: $steps1 --steps 1 rows checked"
# --torch-device cuda on the plain loop (issue #22; util/autograd.c's CUDA
# rules, predicted from source, not yet measured on a GPU): gpt2 and llama,
# 2.6 and 1.13, zero_grad zeros and set_to_none (seq 32, batch 2, 3 steps),
# and each with its config's dropout 0.1 (2.6 zeros, 1.13 set_to_none):
# the engine's measure equal to the theory to the byte (peak and bytes
# between steps), and each CUDA rule's delta against the same run's
# --torch-device cpu counted here from the shapes: between steps, Adam's
# step counters are host tensors (4 B a parameter tensor less: gpt2 tied
# 2 + 12 a block + 2 = 28, llama untied 1 + 9 a block + 2 = 21); at the
# peak (in backward) also the wrapped numbers autograd keeps, host scalars
# (8 B each: gpt2's gelu_new keeps 0.5, 0.044715 and sqrt(2/pi) a block,
# llama's `* scaling` one a layer), and under dropout native_dropout's
# bool mask kept where the CPU keeps fp32 noise, 3 B an element of every
# dropped tensor (gpt2: the embeddings' and two residual dropouts
# B·T·d = 4,096 each and the attention's B·h·T·T = 8,192 a block, 4,096
# + 2 x 16,384 = 36,864, less under set_to_none the last block's MLP
# dropout, 4,096, whose backward has run when the grads made then reach
# the peak; llama: the attention's, 2 x 8,192 = 16,384).
# LayerNorm's CPU scratch ([2, d] floats, made and freed inside its
# backward) and the transient scalars are not live at the peak: their
# absence shows in no figure here but the measure's agreement. Main refuses
# every row (--torch-device cuda refused whole).
cuda_fail=0 cuda_rows=0
# cu_run LABEL DEVS ARGS...: zerosim theory ARGS under --torch-device cpu
# and cuda ($tmp/t-cpu.json, t-cuda.json), and measure ARGS, 3 steps with
# the timeline, on each device in DEVS ($tmp/m-DEV.json); 99 where one fails
cu_run() {
	label=$1 devs=$2
	shift 2
	for dev in cpu cuda; do
		if ! "$zerosim" theory "$@" --torch-device $dev --out "$tmp/t-$dev.json" 2>"$tmp/err"; then
			echo "ag_exec_phases: $label: theory --torch-device $dev failed: $(head -n 1 "$tmp/err")" >&2
			exit 99
		fi
	done
	for dev in $devs; do
		if ! "$zerosim" measure -q "$@" --torch-device $dev --steps 3 --timeline --out "$tmp/m-$dev.json" \
			2>"$tmp/err"; then
			echo "ag_exec_phases: $label: measure --torch-device $dev failed: $(head -n 1 "$tmp/err")" >&2
			exit 99
		fi
	done
}
# nth FILE KEY N: the Nth number given to "KEY" in FILE (0 where none)
nth() {
	awk -v k="\"$2\":" -v n="$3" '$1 == k && $2 ~ /^[0-9]+,?$/ { if (++i == n) { sub(/,/, "", $2); print $2; f = 1; exit } }
		END { if (!f) print 0 }' "$1"
}
for model in "gpt2 28 3 0 0" "llama 21 1 0 0" "gpt2-dropout 28 3 36864 32768" "llama-dropout 21 1 16384 16384"; do
	set -- $model
	name=$1 ntensors=$2 kept=$3 dropped_zeros=$4 dropped_none=$5
	for v in 2.6 1.13; do
		for zg in zeros none; do
			case $name-$v-$zg in *dropout-2.6-none | *dropout-1.13-zeros) continue ;; esac
			row="cuda $name --torch-version $v --zero-grad $zg"
			base="--framework torch --wrapper none --attn eager --precision fp32 --seq 32 --batch 2 --schemes dp
			      --world 1 --model $tmp/$name.json --torch-version $v --zero-grad $zg"
			# shellcheck disable=SC2086
			cu_run "$row" cuda $base
			cuda_rows=$((cuda_rows + 1))
			# theory: the floor's resident first, then the schedule's; measure: the run's
			set -- "$(nth "$tmp/t-cpu.json" resident_bytes 2)" "$(nth "$tmp/t-cpu.json" peak_bytes 1)" \
				"$(nth "$tmp/t-cuda.json" resident_bytes 2)" "$(nth "$tmp/t-cuda.json" peak_bytes 1)" \
				"$(nth "$tmp/m-cuda.json" resident_bytes 1)" "$(nth "$tmp/m-cuda.json" peak_bytes 1)"
			dropped=$dropped_zeros
			[ $zg = none ] && dropped=$dropped_none
			want_r=$((4 * ntensors)) want_p=$((4 * ntensors + 8 * kept * 2 + 3 * dropped))
			if [ "$3" != "$5" ] || [ "$4" != "$6" ] || [ $(($1 - $3)) -ne $want_r ] ||
				[ $(($2 - $4)) -ne $want_p ]; then
				echo "ag_exec_phases: $row: theory cpu $1/$2, theory cuda $3/$4, measure cuda $5/$6 (resident/peak);" \
					"want cuda = measure, cpu - cuda = $want_r/$want_p" >&2
				cuda_fail=1
			fi
		done
	done
done
if [ "$cuda_rows" -ne 12 ]; then
	echo "ag_exec_phases: only $cuda_rows --torch-device cuda rows checked (12 expected)" >&2
	exit 99
fi
echo "ag_exec_phases: $cuda_rows --torch-device cuda rows, $( [ $cuda_fail = 0 ] && echo agree || echo DISAGREE )"
[ $cuda_fail = 0 ] || fail=1
# bf16 autocast under --torch-device cuda (util/autograd.c: CUDA's lists
# where they differ from the CPU's, and promotes_by_copy): gpt2 and llama,
# 2.6 set_to_none and 1.13 zeros, measure equal to theory, and against
# the same run on the CPU, from the shapes (B 2, T 32, d 64, h 4, hd 16,
# gpt2's MLP 4d = 256, llama's 2 k/v heads, 2 layers):
# - gpt2, at fwd:h.0.attn.attn_dropout:start: softmax in fp32 (CUDA's
#   fp32_set_opt_dtype list) keeps an fp32 B·h·T² result and the bf16
#   `.type(value.dtype)` copy bmm keeps, where the CPU keeps one bf16
#   result: + 4 B x 8,192, less Adam's 28 host step counters (4 B each);
#   at fwd:h.1:end each block adds that and gelu_new's pow in fp32 (CUDA's
#   fp32 list): PowBackward's fp32 copy of c_fc's output, tanh's result and
#   1 + tanh fp32 (the rest of the expression promoted), 2 B an element
#   more each over B·T·4d = 16,384, less the 3 wrapped numbers a block
#   gelu_new keeps (host, 8 B);
# - llama: the forward's allocations of TensorIterator's promotion copies
#   are the CPU's alone: per layer the mask add's fp32 copy of the bf16
#   scores (B·h·T² x 4 = 32,768 B), the rope's of q and rotate_half(q)
#   and the two residual adds' (B·T·d x 4 = 16,384 B: 4) and the rope's
#   of k and rotate_half(k) (B·kv·T·hd x 4 = 8,192 B: 2), counted in the
#   timelines (the last step's); none is live at a mark, so the peak is the CPU's less the
#   21 step counters and the 2 kept `* scaling` numbers (84 + 16 B).
mk() { # FILE MARK: the bytes at MARK in FILE (empty where none)
	awk -v k="\"$2\":" '$1 == k { sub(/,/, "", $2); print $2; exit }' "$1"
}
cnt() { # FILE BYTES: the forward's allocations of BYTES in FILE's timeline
	awk -v b="$2" '/"phase":/ { ph = $2 } /"op":/ { o = $2 }
		/"bytes":/ { if (ph == "\"forward\"," && o == "\"alloc\"," && $2 == b ",") n++ } END { print n + 0 }' "$1"
}
amp_rows=0
for row in "gpt2 2.6 none" "gpt2 1.13 zeros" "llama 2.6 none" "llama 1.13 zeros"; do
	set -- $row
	name=$1 v=$2 zg=$3
	base="--framework torch --wrapper none --attn eager --precision amp-bf16 --seq 32 --batch 2 --schemes dp
	      --world 1 --model $tmp/$name.json --torch-version $v --zero-grad $zg"
	# shellcheck disable=SC2086
	cu_run "cuda amp-bf16 $row" "cpu cuda" $base
	amp_rows=$((amp_rows + 1))
	tr=$(nth "$tmp/t-cuda.json" resident_bytes 2) tp=$(nth "$tmp/t-cuda.json" peak_bytes 1)
	mr=$(nth "$tmp/m-cuda.json" resident_bytes 1) mp=$(nth "$tmp/m-cuda.json" peak_bytes 1)
	if [ "$tr" != "$mr" ] || [ "$tp" != "$mp" ] || [ "$tp" = 0 ]; then
		echo "ag_exec_phases: cuda amp-bf16 $row: theory $tr/$tp, measure $mr/$mp (resident/peak)" >&2
		fail=1
	fi
	if [ "$name" = gpt2 ]; then
		sm=$((2 * 4 * 32 * 32)) fc=$((2 * 32 * 256))
		for m in "fwd:h.0.attn.attn_dropout:start $((4 * sm - 4 * 28))" \
			"fwd:h.1:end $((2 * (4 * sm + 3 * 2 * fc - 3 * 8) - 4 * 28))"; do
			set -- $m
			c=$(mk "$tmp/t-cpu.json" "$1") g=$(mk "$tmp/t-cuda.json" "$1")
			if [ -z "$c" ] || [ -z "$g" ] || [ $((g - c)) -ne "$2" ]; then
				echo "ag_exec_phases: cuda amp-bf16 $row: at $1 cuda $g, cpu $c: want cuda - cpu = $2" >&2
				fail=1
			fi
		done
	else
		d32=$(($(cnt "$tmp/m-cpu.json" 32768) - $(cnt "$tmp/m-cuda.json" 32768)))
		d16=$(($(cnt "$tmp/m-cpu.json" 16384) - $(cnt "$tmp/m-cuda.json" 16384)))
		d8=$(($(cnt "$tmp/m-cpu.json" 8192) - $(cnt "$tmp/m-cuda.json" 8192)))
		cp=$(nth "$tmp/t-cpu.json" peak_bytes 1)
		if [ "$d32/$d16/$d8" != 2/8/4 ] || [ $((cp - tp)) -ne 100 ]; then
			echo "ag_exec_phases: cuda amp-bf16 $row: the CPU's forward allocations of 32,768, 16,384 and 8,192 B" \
				"in the last step less CUDA's $d32/$d16/$d8 (want 2/8/4), peak cpu $cp cuda $tp (want 100 B apart)" >&2
			fail=1
		fi
	fi
done
# --recompute full under --torch-device cuda (util/autograd.c rng_state):
# the CPU generator's state checkpointing takes per layer (and fork_rng in
# the rerun), 5,056 B on the CPU, is a CPU tensor on a GPU: at
# phase:backward, where each layer's ctx holds its own, cuda is the CPU's
# less 2 x 5,056 and the step counters (gpt2 28, llama 21, 4 B each), and
# non-reentrant's wrapped numbers, which its forward keeps (no pack hook
# for a wrapped number: gpt2's 3 a block, llama's 1 a layer, 8 B each);
# measure equal to theory. Both impls, fp32 and bf16 autocast, 2.6 and
# 1.13, Adam single (foreach's optimizer peak would hide the backward's).
rc_rows=0
for row in "gpt2 fp32 reentrant 2.6 28 0" "llama amp-bf16 reentrant 1.13 21 0" "gpt2 amp-bf16 non-reentrant 2.6 28 3" \
	"llama fp32 non-reentrant 2.6 21 1"; do
	set -- $row
	name=$1 prec=$2 impl=$3 v=$4 nt=$5 kept=$(($6 * 2 * 8))
	base="--framework torch --wrapper none --attn eager --precision $prec --seq 32 --batch 2 --schemes dp --world 1
	      --model $tmp/$name.json --torch-version $v --zero-grad none --optimizer-impl single --recompute full
	      --recompute-impl $impl"
	# shellcheck disable=SC2086
	cu_run "cuda recompute $row" cuda $base
	rc_rows=$((rc_rows + 1))
	tr=$(nth "$tmp/t-cuda.json" resident_bytes 2) tp=$(nth "$tmp/t-cuda.json" peak_bytes 1)
	mr=$(nth "$tmp/m-cuda.json" resident_bytes 1) mp=$(nth "$tmp/m-cuda.json" peak_bytes 1)
	c=$(mk "$tmp/t-cpu.json" phase:backward) g=$(mk "$tmp/t-cuda.json" phase:backward)
	if [ "$tr" != "$mr" ] || [ "$tp" != "$mp" ] || [ "$tp" = 0 ] || [ -z "$c" ] || [ -z "$g" ] ||
		[ $((c - g)) -ne $((2 * 5056 + 4 * nt + kept)) ]; then
		echo "ag_exec_phases: cuda recompute $row: theory $tr/$tp, measure $mr/$mp (resident/peak);" \
			"phase:backward cpu $c cuda $g (want $((2 * 5056 + 4 * nt + kept)) apart)" >&2
		fail=1
	fi
done
if [ "$amp_rows/$rc_rows" != 4/4 ]; then
	echo "ag_exec_phases: $amp_rows cuda amp-bf16 and $rc_rows cuda recompute rows (4 and 4 expected)" >&2
	exit 99
fi
echo "ag_exec_phases: 4 --torch-device cuda --precision amp-bf16 and 4 --recompute full rows checked"
# past 3,072 tokens (embedding_dense_backward_cuda's sort path, not
# described) theory refuses too: its check once built the step at batch 1
# and the run's batch then fell back to zerosim's own schedule, unsaid
if "$zerosim" theory --model "$tmp/gpt2.json" --framework torch --wrapper none --torch-device cuda --attn eager \
	--precision fp32 --seq 64 --batch 49 --schemes dp --world 1 --out "$tmp/t.json" 2>"$tmp/err" ||
	! grep -q '3,072 tokens' "$tmp/err"; then
	echo "ag_exec_phases: cuda gpt2 --seq 64 --batch 49 (3,136 tokens): not refused by name" >&2
	fail=1
fi
# a frozen token table runs no embedding_dense_backward, so past 3,072
# tokens the step is described: LoRA's llama (q_proj and v_proj adapted,
# r 4) at 3,136, measure equal to theory and against the CPU's run, from
# the shapes, between steps the 8 adapters' step counters (4 B each) less
# and at the peak also the 6 kept wrapped numbers (8 B each: a layer's
# `* scaling` and each adapter's PEFT `* scaling`, 2 layers)
lo="--framework torch --wrapper none --torch-version 2.6 --attn eager --schemes dp --world 1 --seq 64 --batch 49
    --precision fp32 --model $tmp/llama.json --lora-r 4 --zero-grad none"
# shellcheck disable=SC2086
cu_run "cuda llama LoRA at 3,136 tokens (a frozen embedding)" cuda $lo
set -- "$(nth "$tmp/t-cpu.json" resident_bytes 2)" "$(nth "$tmp/t-cpu.json" peak_bytes 1)" \
	"$(nth "$tmp/t-cuda.json" resident_bytes 2)" "$(nth "$tmp/t-cuda.json" peak_bytes 1)" \
	"$(nth "$tmp/m-cuda.json" resident_bytes 1)" "$(nth "$tmp/m-cuda.json" peak_bytes 1)"
if [ "$3/$4" != "$5/$6" ] || [ "$4" = 0 ] || [ $(($1 - $3)) -ne $((4 * 8)) ] ||
	[ $(($2 - $4)) -ne $((4 * 8 + 8 * 6)) ]; then
	echo "ag_exec_phases: cuda llama LoRA at 3,136 tokens: theory cpu $1/$2, cuda $3/$4, measure cuda $5/$6" \
		"(want cuda = measure, cpu - cuda = 32/80)" >&2
	fail=1
fi
# QLoRA loaded in bf16 under bf16 autocast (--quant-base nf4 --load-dtype
# bf16, LoRA r 4 on q_proj and v_proj): under CUDA's autocast PEFT's
# lora.bnb.Linear4bit converts nothing (torch.is_autocast_enabled() asks
# CUDA's: True), so lora_A keeps the norm's bf16 output itself, once for
# q's and v's adapters, where the CPU's run keeps a bf16 copy of an fp32
# copy per adapter: at phase:backward cuda is the CPU's less 2 layers x
# B·T·d x 2 B (8,192), the 8 adapters' step counters (4 B) and the 6 kept
# wrapped numbers (8 B); measure equal to theory
ql="--framework torch --wrapper none --torch-version 2.6 --attn eager --schemes dp --world 1 --seq 32 --batch 2
    --model $tmp/llama.json --lora-r 4 --quant-base nf4 --load-dtype bf16 --precision amp-bf16 --zero-grad zeros
    --optimizer-impl single"
# shellcheck disable=SC2086
cu_run "cuda QLoRA bf16" cuda $ql
c=$(mk "$tmp/t-cpu.json" phase:backward) g=$(mk "$tmp/t-cuda.json" phase:backward)
set -- "$(nth "$tmp/t-cuda.json" resident_bytes 2)" "$(nth "$tmp/t-cuda.json" peak_bytes 1)" \
	"$(nth "$tmp/m-cuda.json" resident_bytes 1)" "$(nth "$tmp/m-cuda.json" peak_bytes 1)"
if [ "$1/$2" != "$3/$4" ] || [ "$2" = 0 ] || [ -z "$c" ] || [ -z "$g" ] ||
	[ $((c - g)) -ne $((2 * 2 * 32 * 64 * 2 + 4 * 8 + 8 * 6)) ]; then
	echo "ag_exec_phases: cuda QLoRA bf16: theory $1/$2, measure $3/$4; phase:backward cpu $c cuda $g" \
		"(want $((2 * 2 * 32 * 64 * 2 + 4 * 8 + 8 * 6)) apart)" >&2
	fail=1
fi
# tests/gpu_torch.py, the GPU check of these predictions, never runs here:
# its --dry-run does all but the training (zerosim's theory of each case
# with --allocator cuda, its output parsed), so that its code is run
if command -v python3 >/dev/null 2>&1; then
	if ! python3 "${srcdir:-.}/tests/gpu_torch.py" --zerosim "$zerosim" --dry-run >"$tmp/gpu" 2>&1; then
		echo "ag_exec_phases: tests/gpu_torch.py --dry-run failed:" >&2
		tail -n 5 "$tmp/gpu" >&2
		fail=1
	else
		echo "ag_exec_phases: tests/gpu_torch.py --dry-run: $(grep -c '^  zerosim:' "$tmp/gpu") cases predicted"
	fi
else
	echo "ag_exec_phases: no python3: tests/gpu_torch.py --dry-run not run"
fi
# the rows that must run: 3 models x 2 N x (dp with and without recompute, zero1 and fsdp without)
if [ "$checked" -lt 24 ]; then
	echo "ag_exec_phases: only $checked rows checked (24 expected at least)" >&2
	exit 99
fi
echo "ag_exec_phases: $checked rows, phase peaks $( [ $fail = 0 ] && echo agree || echo DISAGREE )"
exit $fail

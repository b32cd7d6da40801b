#!/bin/sh
# deepspeed_cli — DeepSpeed's settings on the command line: each bad value
# is refused in one line with exit 2 and nothing written; the settings are
# recorded in both files' config; the 1 GB reduce bucket every rank counts
# is not resident in this process (its pages are never written). Runs
# from the build directory.
set -u
zerosim=${ZS_BUILDDIR:-.}/zerosim
[ -x "$zerosim" ] || { echo "deepspeed_cli: $zerosim is not built" >&2; exit 99; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/zs-ds.XXXXXX") || exit 99
trap 'rm -rf "$tmp"' EXIT HUP INT TERM
fail() { echo "deepspeed_cli: FAIL: $*" >&2; exit 1; }

# Refused: exit 2, one line, no new file and an existing one untouched.
refused() {
	"$@" --out "$tmp/no.json" >/dev/null 2>"$tmp/err"
	rc=$?
	[ $rc -eq 2 ] || fail "$* exited $rc, not 2"
	[ "$(wc -l <"$tmp/err")" -eq 1 ] || fail "$*: not one line: $(cat "$tmp/err")"
	[ ! -e "$tmp/no.json" ] || fail "$* wrote its output"
	echo keep >"$tmp/old.json"
	"$@" --out "$tmp/old.json" >/dev/null 2>&1
	[ "$(cat "$tmp/old.json")" = keep ] || fail "$* touched an existing output"
}
for cmd in measure theory; do
	for bad in "--ds-reduce-bucket 0" "--ds-reduce-bucket 2.5" "--ds-reduce-bucket 1e10" "--ds-reduce-bucket x" \
		"--ds-reduce-bucket -5" "--ds-allgather-bucket 3" "--ds-allgather-bucket 0" "--ds-overlap-comm yes" \
		"--ds-overlap-comm" "--ds-persist -1" "--ds-persist 1.5" "--ds-persist 1e15" "--ds-reduce-bucket 1e999" \
		"--ds-reduce-bucket nan" "--ds-reduce-bucket inf" "--ds-reduce-bucket 0x10" "--ds-reduce-bucket 1e15" \
		"--ds-allgather-bucket 1e999" "--ds-allgather-bucket -2" "--ds-allgather-bucket 0x10" "--ds-persist 1e-400" \
		"--ds-persist nan" "--ds-persist inf" "--ds-persist 0x10" "--ds-overlap-comm ON" "--ds-overlap-comm 1" \
		"--ranks-per-node 1e1" "--ranks-per-node -2" "--ranks-per-node 0x2" "--ranks-per-node nan" \
		"--offload NONE" "--offload optimizer,params" "--ds-reduce-bucket 100 --ds-reduce-bucket 0"; do
		# shellcheck disable=SC2086 # the option and its value are two words
		refused "$zerosim" $cmd --framework deepspeed --schemes zero1 --world 2 $bad
	done
	for empty in --ds-reduce-bucket --ds-allgather-bucket --ds-persist --ranks-per-node --offload --ds-overlap-comm; do
		refused "$zerosim" $cmd --framework deepspeed --schemes zero1 --world 2 $empty ""
	done
	# settings no scheme of the sweep reads: dp has no bucket, stage 3 no
	# all-gather bucket; a paper or torch run none of them
	refused "$zerosim" $cmd --framework deepspeed --schemes dp --world 2 --ds-reduce-bucket 100
	refused "$zerosim" $cmd --framework deepspeed --schemes dp --world 2 --ds-overlap-comm off
	refused "$zerosim" $cmd --framework deepspeed --schemes zero3 --world 2 --ds-allgather-bucket 100
	refused "$zerosim" $cmd --framework paper --world 2 --ds-persist 5
	refused "$zerosim" $cmd --framework torch --world 2 --offload none
	refused "$zerosim" $cmd --framework deepspeed --ds-persist 5 --framework paper --world 2
	refused "$zerosim" $cmd --framework deepspeed --schemes zero1 --world 2 --offload params
	refused "$zerosim" $cmd --framework deepspeed --schemes zero2 --world 2,4 --ranks-per-node 3
	refused "$zerosim" $cmd --framework deepspeed --schemes zero2 --world 2 --ranks-per-node 0
	refused "$zerosim" $cmd --framework deepspeed --schemes zero2 --world 2 --offload gpu
	refused "$zerosim" $cmd --offload optimizer --world 2
	refused "$zerosim" $cmd --ds-reduce-bucket 100 --world 2
	refused "$zerosim" $cmd --framework torch --ds-overlap-comm on --world 2
done
# The engine runs DeepSpeed's zero3 with either offload and with tensors
# larger than the bucket (the default MLP's largest has 16384 elements);
# params offload stays ZeRO-3's, and dp has nothing to offload.
for args in "--offload optimizer" "--offload params" "--ds-reduce-bucket 16383" "--offload params --ranks-per-node 2"; do
	"$zerosim" measure -q --framework deepspeed --schemes zero3 --world 2 $args --out "$tmp/b.json" ||
		fail "measure zero3 $args"
done
tr -d ' \t\n' <"$tmp/b.json" | grep -q '"host_resident_bytes_per_node":[1-9]' || fail "no host bytes per node"
refused "$zerosim" measure --framework deepspeed --schemes dp,zero2 --world 2 --offload optimizer
refused "$zerosim" measure --framework deepspeed --schemes zero2,zero3 --world 2 --offload params
# measure keeps host bytes only when offloading; the theory's estimate uses
# the ranks of a node without it.
refused "$zerosim" measure --framework deepspeed --schemes zero1 --world 2 --ranks-per-node 2
refused "$zerosim" theory --framework deepspeed --schemes zero1,zero2 --world 2 --ds-persist 5
# ZeRO-3's coordinator settings: bad values, and without zero3.
for opt in --ds-prefetch-bucket --ds-max-live; do
	for bad in -1 1.5 1e15 1e-400 nan inf 0x10 x ""; do
		refused "$zerosim" theory --framework deepspeed --schemes zero3 --world 2 $opt "$bad"
		refused "$zerosim" measure --framework deepspeed --schemes zero3 --world 2 $opt "$bad"
	done
	refused "$zerosim" theory --framework deepspeed --schemes zero1,zero2 --world 2 $opt 5
	refused "$zerosim" theory --framework paper --schemes zero3 --world 2 $opt 5
	refused "$zerosim" measure --framework deepspeed --schemes zero2 --world 2 $opt 5
done
# What the coordinator holds whole (theory.json's live_params, worked in
# test_deepspeed.c): nothing persistent, module 0 fetched; with max live 0
# nothing prefetched, and still the whole model at the start of backward.
live() { # FILE KEY: the zero3 unit=layer row's live_params.KEY
	python3 -c 'import json, sys
r = [r for r in json.load(open(sys.argv[1]))["rows"] if r["scheme"] == "zero3" and r["unit"] == "layer"][0]
print(r["deepspeed_zero3"]["live_params"][sys.argv[2]])' "$@"
}
if command -v python3 >/dev/null 2>&1; then
	for ml in 1e9 0; do
		"$zerosim" theory --framework deepspeed --schemes zero3 --unit layer --world 2 --ds-persist 0 --ds-max-live $ml \
			--out "$tmp/live$ml.json" || fail "theory --ds-max-live $ml"
	done
	[ "$(live "$tmp/live1e9.json" first_fetch)" = 33088 ] || fail "max live 1e9: not all prefetched"
	[ "$(live "$tmp/live0.json" first_fetch)" = 16640 ] || fail "max live 0: prefetched"
	[ "$(live "$tmp/live0.json" at_backward)" = 33088 ] || fail "max live 0: not the model whole at backward"
	[ "$(live "$tmp/live0.json" max_live)" = 0 ] || fail "max live 0: not recorded"
fi
"$zerosim" theory --framework deepspeed --schemes zero1 --world 2 --ranks-per-node 2 --out "$tmp/r.json" ||
	fail "theory refuses --ranks-per-node without --offload"
# DeepSpeed's zero3 on a transformer runs module by module (measure =
# theory, tests/theory_vs_measure.sh).
printf '{"model_type": "gpt2", "n_embd": 64, "n_layer": 2, "n_head": 4, "vocab_size": 256, "n_positions": 32}\n' \
	>"$tmp/gpt2.json"
"$zerosim" measure -q --framework deepspeed --model "$tmp/gpt2.json" --seq 32 --precision fp32 --schemes zero2,zero3 \
	--world 2 --steps 1 --out "$tmp/t3.json" || fail "measure DeepSpeed's zero3 on a transformer"
# With a full recompute (torch.utils.checkpoint per block) each block's
# forward runs again inside its backward, and DeepSpeed's hooks fetch and
# release its modules there too (docs/schedule.md, "deepspeed", ZeRO-3
# with full recompute): theory = measure to the byte, every category and
# rank, gpt2 and llama, both precisions, both units, N = 1..3, over 3
# steps (step 1 records the trace), with --ds-persist 100 (all but the
# norms and small biases partitioned), and with a small prefetch bucket
# and max-live (the prefetch walks the recompute's entries of the trace).
agree=${ZS_BUILDDIR:-.}/tests/json_agree
[ -x "$agree" ] || { echo "deepspeed_cli: $agree is not built" >&2; exit 99; }
printf '{"model_type": "llama", "hidden_size": 64, "intermediate_size": 172, "num_hidden_layers": 2, %s\n' \
	'"num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 256, "max_position_embeddings": 32}' \
	>"$tmp/llama.json"
ds3_agree() { # with --timeline: each phase's peak too
	"$zerosim" measure -q --framework deepspeed --schemes zero3 --timeline "$@" --out "$tmp/m.json" ||
		fail "measure $*"
	"$zerosim" theory --framework deepspeed --schemes zero3 "$@" --out "$tmp/t.json" || fail "theory $*"
	"$agree" "$tmp/m.json" "$tmp/t.json" >/dev/null || fail "theory and measure differ: $*"
}
for model in gpt2 llama; do
	for precision in fp32 mixed; do
		ds3_agree --recompute full --model "$tmp/$model.json" --seq 16 --precision $precision --world 1,2,3 \
			--unit model,layer --ds-persist 100 --steps 3
	done
	ds3_agree --recompute full --model "$tmp/$model.json" --seq 16 --precision mixed --world 2,3 --unit layer \
		--ds-persist 100 --ds-prefetch-bucket 5000 --ds-max-live 20000 --steps 2
	# The tables' release after backward never fires (their inputs need
	# no grad): they stay whole through the epilogue's reduction into
	# step() (the reduce and optimizer phases' peaks; with the optimizer
	# offloaded step() adds nothing on the device), and under
	# --grad-accum into the next micro-step, whose prefetch skips them.
	for extra in "--offload optimizer" "--grad-accum 2" "--grad-accum 2 --recompute full"; do
		# shellcheck disable=SC2086 # $extra is options
		ds3_agree --model "$tmp/$model.json" --seq 16 --precision mixed --world 1,2,3 --unit layer \
			--ds-persist 100 --steps 2 $extra
	done
done
# The gathers, counted by hand from the rule (gpt2 above, fp32, N = 2,
# --ds-persist 100: 28 tensors, 6 of a block's 12 persistent). Without
# recompute step 1 gathers every tensor in forward, again in backward
# (wte once more each way for the tied head) and the 14 persistent after
# step(): 29 + 29 + 14 = 72 all-gathers; the recompute's forward gathers
# each block's 12 again: 96, and (N - 1) · 4 · Σ ceil(n/2) = 99,968 bytes
# more a block (its 49,984 elements): 541,440 + 199,936 = 741,376 B. From
# step 2 the reuse distance (1e9 elements) keeps a module whole from its
# forward through its recompute into its backward: step 2 gathers 28 with
# or without, so two steps average (96 + 28) / 2 = 62.
gathers() {
	"$zerosim" measure -q --framework deepspeed --model "$tmp/gpt2.json" --seq 16 --precision fp32 --schemes zero3 \
		--world 2 --ds-persist 100 "$@" --out "$tmp/g.json" || fail "measure $*"
	tr -d ' \t\n' <"$tmp/g.json" | grep -o '"all_gather":{[^}]*}'
}
[ "$(gathers --recompute none --steps 1)" = '"all_gather":{"calls_per_step":72,"bytes_per_step":541440}' ] ||
	fail "step 1 without recompute: $(gathers --recompute none --steps 1)"
[ "$(gathers --recompute full --steps 1)" = '"all_gather":{"calls_per_step":96,"bytes_per_step":741376}' ] ||
	fail "step 1 with full recompute: $(gathers --recompute full --steps 1)"
[ "$(gathers --recompute full --steps 2)" = '"all_gather":{"calls_per_step":62,"bytes_per_step":489216}' ] ||
	fail "two steps with full recompute: $(gathers --recompute full --steps 2)"
# The default persistence threshold (1e5 elements) is above every tensor
# of this gpt2 (the largest, wte and c_fc, are 16,384): every tensor is
# persistent, whole on every rank for the whole run beside its partition,
# so nothing is released: gathered_params = 4Ψ = 4 · 118,528 in fp32.
tr -d ' \t\n' <"$tmp/t3.json" | grep -q '"gathered_params":474112' ||
	fail "the default threshold partitions part of the tiny gpt2: $(tr -d ' \t\n' <"$tmp/t3.json" | head -c 400)"
# The engine's figure for the point tests/test_theory.c works by hand:
# N = 3, mixed, --ds-persist 100, resident 1,000,634,248 B.
"$zerosim" measure -q --framework deepspeed --model "$tmp/gpt2.json" --seq 32 --batch 2 --precision mixed \
	--schemes zero3 --world 3 --ds-persist 100 --steps 2 --out "$tmp/t4.json" || fail "measure the hand-worked point"
tr -d ' \t\n' <"$tmp/t4.json" | grep -q '"resident_bytes":1000634248' || fail "the hand-worked resident"
# And its held tables (tests/test_theory.c): with the optimizer
# offloaded, the optimizer phase's most is resident + (16386 + 2048)·2 B
# (step 2 fetches wte alone, a padded buffer; wpe comes in the prefetch).
"$zerosim" measure -q --framework deepspeed --model "$tmp/gpt2.json" --seq 32 --batch 2 --precision mixed \
	--schemes zero3 --world 3 --ds-persist 100 --steps 2 --offload optimizer --timeline --out "$tmp/t5.json" ||
	fail "measure the hand-worked point offloaded"
if command -v python3 >/dev/null 2>&1; then
	held=$(python3 -c 'import json, sys
r = json.load(open(sys.argv[1]))["runs"][0]
print(max(e["current_bytes"] for e in r["timeline"] if e["phase"] == "optimizer") - r["resident_bytes"])' "$tmp/t5.json")
	[ "$held" = 36868 ] || fail "the tables held into step(): $held B over resident, not 36,868"
fi
# DeepSpeed's settings are options, not keys of a sweep spec; where they
# are meaningless the spec's framework refuses them as an option's would.
printf '{"format": "zerosim-sweep/1", "framework": "deepspeed", "ds-reduce-bucket": 1000}\n' >"$tmp/s1.json"
printf '{"format": "zerosim-sweep/1", "framework": "torch", "world": [2]}\n' >"$tmp/s2.json"
printf '{"format": "zerosim-sweep/1", "framework": "deepspeed", "schemes": ["dp"], "world": [2]}\n' >"$tmp/s3.json"
for cmd in measure theory; do
	refused "$zerosim" $cmd --spec "$tmp/s1.json"
	grep -q "options only" "$tmp/err" || fail "the spec's DeepSpeed key: $(cat "$tmp/err")"
	refused "$zerosim" $cmd --spec "$tmp/s2.json" --ds-overlap-comm on
	refused "$zerosim" $cmd --spec "$tmp/s3.json" --ds-reduce-bucket 100
done

# Buckets mapped past the address space (5000 ranks with two 16 GB buckets
# each, 1.6e14 bytes, beyond 47 bits): one line, exit 1, the buckets mapped
# so far unmapped and an existing output file kept.
echo keep >"$tmp/keep.json"
"$zerosim" measure -q --framework deepspeed --schemes zero2 --world 5000 --layers 2,2 --steps 1 --precision fp32 \
	--ds-reduce-bucket 4e9 --ds-overlap-comm on --out "$tmp/keep.json" >/dev/null 2>"$tmp/err"
rc=$?
[ $rc -eq 1 ] || fail "unmappable buckets exited $rc, not 1"
[ "$(wc -l <"$tmp/err")" -eq 1 ] && grep -q "^zerosim measure: cannot map DeepSpeed's reduce bucket" "$tmp/err" ||
	fail "unmappable buckets: not one clear line: $(cat "$tmp/err")"
[ "$(cat "$tmp/keep.json")" = keep ] || fail "unmappable buckets: the existing output was touched"
# ZeRO-3 maps its one bucket in its setup hook (20000 ranks' 16 GB, 3.2e14
# bytes): the hook's failure ends the run the same way.
"$zerosim" measure -q --framework deepspeed --schemes zero3 --world 20000 --layers 2,2 --steps 1 --precision fp32 \
	--ds-reduce-bucket 4e9 --out "$tmp/keep.json" >/dev/null 2>"$tmp/err"
rc=$?
[ $rc -eq 1 ] || fail "unmappable ZeRO-3 bucket exited $rc, not 1"
[ "$(wc -l <"$tmp/err")" -eq 1 ] && grep -q "^zerosim measure: cannot map DeepSpeed's reduce bucket 1 of rank" "$tmp/err" ||
	fail "unmappable ZeRO-3 bucket: not one clear line: $(cat "$tmp/err")"
[ "$(cat "$tmp/keep.json")" = keep ] || fail "unmappable ZeRO-3 bucket: the existing output was touched"

# DeepSpeed's estimator with offload, 7.5B on 64 GPUs, 8 a node (worked by
# hand in test_deepspeed.c), and zerosim's device and host bytes.
"$zerosim" theory --framework deepspeed --params 7.5e9 --world 64 --largest-unit 1e8 --ranks-per-node 8 \
	--schemes zero3 --offload params >"$tmp/o.txt" || fail "offload theory"
grep -q '^ *64  *zero3  *400,000,000  *1,875,000,000  *25,312,500,000$' "$tmp/o.txt" ||
	fail "no ZeRO-3 offload row in: $(cat "$tmp/o.txt")"
"$zerosim" theory --framework deepspeed --schemes zero2 --world 2 --offload optimizer --ranks-per-node 2 \
	--out "$tmp/o.json" || fail "offload json"
tr -d ' \t\n' <"$tmp/o.json" | grep -q '"deepspeed_memory":{"offload":"optimizer","device_bytes":98944,"host_bytes":297472,"ranks_per_node":2,"host_bytes_per_node":594944,"startup_host_bytes_per_node":264704}' ||
	fail "no deepspeed_memory in theory.json"

# the settings in both files
for cmd in measure theory; do
	"$zerosim" $cmd --framework deepspeed --schemes zero2 --world 2 --ds-reduce-bucket 1000 --ds-overlap-comm on \
		--out "$tmp/$cmd.json" 2>/dev/null || fail "$cmd"
	tr -d ' \t\n' <"$tmp/$cmd.json" | grep -q '"deepspeed":{"reduce_bucket":1000,"allgather_bucket":500000000,"overlap_comm":true,"persist":100000,"prefetch_bucket":50000000,"max_live":1000000000,"offload":"none","ranks_per_node":1}' ||
		fail "$cmd: no deepspeed settings in config"
done
"$zerosim" theory --out "$tmp/d.json" && ! grep -q '"deepspeed"' "$tmp/d.json" || fail "the default names DeepSpeed's settings"

# DeepSpeed's ZeRO-3 keeps tensors of at most --ds-persist elements whole:
# with the default 1e5 every tensor of the default MLP (the largest has
# 16384), so it partitions nothing, as the theory says and the report finds;
# with 1000 only the two biases.
template=${srcdir:-.}/report/zerosim-report.tex
"$zerosim" theory --framework deepspeed --world 2 --format text >"$tmp/z3.txt" || fail "theory text"
grep -q "4 of the 4 tensors, 33088 of the 33088" "$tmp/z3.txt" || fail "no persistence line in: $(cat "$tmp/z3.txt")"
grep -q "partitions none of this model" "$tmp/z3.txt" || fail "the finding is not stated in the text"
grep -q "1,000,000,000 bytes a rank here" "$tmp/z3.txt" || fail "the text does not say the estimate leaves out the bucket"
verdict() { tr '\n' ' ' <"$1" | sed 's/},/}\n/g' | grep "\"key\":	\"$2\"" | sed 's/.*"verdict":	"\([^"]*\)".*/\1/'; }
for persist in 100000 1000; do
	"$zerosim" measure -q --framework deepspeed --schemes zero1,zero2 --world 1,2 --ds-persist $persist \
		--out "$tmp/pm.json" && "$zerosim" theory --framework deepspeed --schemes zero1,zero2,zero3 --world 1,2 \
		--ds-persist $persist --out "$tmp/pt.json" && "$zerosim" report --no-render --template "$template" \
		--measured "$tmp/pm.json" --theory "$tmp/pt.json" --out "$tmp/r$persist" >/dev/null || fail "report $persist"
done
[ "$(verdict "$tmp/r100000/diff.json" deepspeed_zero3_partitions_nothing)" = holds ] || fail "default: not holds"
[ "$(verdict "$tmp/r1000/diff.json" deepspeed_zero3_partitions_nothing)" = "does not hold" ] || fail "1000: holds"
# A measurement and a theory that name different thresholds are not one
# experiment: refused in one line, nothing written.
"$zerosim" measure -q --framework deepspeed --schemes zero1,zero2 --world 1,2 --out "$tmp/pm0.json" ||
	fail "measure at the default threshold"
if "$zerosim" report --no-render --template "$template" --measured "$tmp/pm0.json" --theory "$tmp/pt.json" \
	--out "$tmp/rmix" 2>"$tmp/err"; then fail "different thresholds were accepted"; fi
grep -q "different DeepSpeed persistence thresholds (100000 and 1000" "$tmp/err" ||
	fail "not the thresholds' line: $(cat "$tmp/err")"
[ ! -e "$tmp/rmix" ] || fail "a refused report wrote $tmp/rmix"
tr -d ' \t\n' <"$tmp/pt.json" | grep -q '"persistent_tensors":2,"persistent_params":320,"partitioned_params":32768' ||
	fail "--ds-persist 1000: not the two biases persistent"

# Offloaded: the report gives the host bytes beside the schedule's (per
# rank, at the peak, per node), counts a host figure off the schedule as
# unexplained, and refuses files that differ in ranks per node or, for
# DeepSpeed, in steps (zero3's comm is a mean over them).
ho="--framework deepspeed --schemes zero1,zero3 --offload optimizer --world 2,4 --ranks-per-node 2"
# shellcheck disable=SC2086
"$zerosim" measure -q $ho --steps 2 --out "$tmp/hm.json" && "$zerosim" theory $ho --steps 2 --out "$tmp/ht.json" ||
	fail "offloaded measure or theory"
"$zerosim" report --no-render --template "$template" --measured "$tmp/hm.json" --theory "$tmp/ht.json" \
	--out "$tmp/rh" >"$tmp/out" 2>"$tmp/err" || fail "report of offloaded runs: $(cat "$tmp/err")"
grep -q '^zerosim report: host bytes of 4 offloaded runs, 0 unexplained$' "$tmp/out" || fail "host summary: $(cat "$tmp/out")"
grep -q '^host: zero3 N=2 unit=model: resident 297792 B (schedule 297792), peak 347424 B (schedule 347424), resident per node 595584 B (schedule 595584); all 2 ranks as the schedule$' \
	"$tmp/rh/flags.txt" || fail "zero3's host line: $(grep '^host:' "$tmp/rh/flags.txt")"
grep -q 'Host memory' "$tmp/rh/flags.tex" || fail "flags.tex has no host paragraph"
tr -d ' \t\n' <"$tmp/rh/diff.json" | grep -q '"host":\[{"scheme":"zero1","world":2,"unit":"model","host_resident_bytes":' ||
	fail "diff.json has no host entries"
# A transformer's offloaded run: its host lines in the transformer section.
tfm="--model ${srcdir:-.}/report/models/gpt2-tiny.json --framework deepspeed --offload optimizer --schemes zero1 \
--world 2 --unit layer --precision fp32 --seq 32 --batch 2"
# shellcheck disable=SC2086
"$zerosim" measure -q $tfm --steps 1 --out "$tmp/tm.json" && "$zerosim" theory $tfm --out "$tmp/tt.json" ||
	fail "the transformer's offloaded measure or theory"
"$zerosim" report --no-render --strict --template "$template" --measured "$tmp/hm.json" --theory "$tmp/ht.json" \
	--transformer "$tmp/tt.json" --transformer "$tmp/tm.json" --out "$tmp/rt" >"$tmp/out" 2>"$tmp/err" ||
	fail "report with the transformer's offloaded run: $(cat "$tmp/err")"
grep -q '^zerosim report: transformer gpt2-tiny (fp32, framework deepspeed): .*, host bytes of 1 offloaded runs, 0 unexplained$' \
	"$tmp/out" || fail "the transformer's host summary: $(cat "$tmp/out")"
# Its line in flags.txt (the MLP's kind); the PDF gives one sentence and a
# table row, not an itemised line.
grep -q '^host: gpt2-tiny zero1 N=2 unit=layer: resident [0-9]* B (schedule [0-9]*), peak .*; all 2 ranks as the schedule$' \
	"$tmp/rt/flags.txt" || fail "flags.txt has no transformer host line: $(grep -n '^host' "$tmp/rt/flags.txt")"
grep -q 'The run equals the schedule model to the byte, on every rank;' "$tmp/rt/transformer.tex" &&
	grep -q '^gpt2-tiny zero1 & 2 & layer & [0-9\,]* & [0-9\,]* & [0-9\,]*\\\\$' "$tmp/rt/transformer.tex" &&
	! grep -q 'item gpt2-tiny' "$tmp/rt/transformer.tex" ||
	fail "transformer.tex has no host table: $(grep -n -A8 'Host' "$tmp/rt/transformer.tex")"
[ -s "$tmp/rt/figures/fig9-host-transformer.dat" ] && [ -s "$tmp/rh/figures/fig8-host.dat" ] || fail "no host figure"
# Tampered: a binding host peak (zero3 N=2), a rank's host figure below its
# run's (rank 1 of zero3 N=2: not the binding one) and the transformer's
# host peak; each is named UNEXPLAINED and --strict fails.
sed -e 's/"host_peak_bytes":[[:space:]]*347424/"host_peak_bytes": 347425/' \
	-e 's/"host_resident_bytes":[[:space:]]*\[297792, 297792\]/"host_resident_bytes": [297792, 297791]/' \
	"$tmp/hm.json" >"$tmp/hbad.json"
[ "$(cmp -l "$tmp/hm.json" "$tmp/hbad.json" | wc -l)" -ge 2 ] || fail "hbad.json is not changed twice"
tpeak=$(tr -d ' \t\n' <"$tmp/tm.json" | sed 's/.*"host_peak_bytes":\([0-9]*\),.*/\1/')
sed "s/\"host_peak_bytes\":[[:space:]]*$tpeak,/\"host_peak_bytes\": $((tpeak + 8)),/" "$tmp/tm.json" >"$tmp/tbad.json"
cmp -s "$tmp/tm.json" "$tmp/tbad.json" && fail "tbad.json is unchanged"
"$zerosim" report --no-render --strict --template "$template" --measured "$tmp/hbad.json" --theory "$tmp/ht.json" \
	--transformer "$tmp/tt.json" --transformer "$tmp/tbad.json" \
	--out "$tmp/rhb" >"$tmp/out" 2>"$tmp/err" && fail "--strict passed a host figure off the schedule"
grep -q 'UNEXPLAINED host bytes zero3 N=2 unit=model:.*peak 347425 B (schedule 347424, UNEXPLAINED)' "$tmp/err" ||
	fail "the host figure off the schedule is not named: $(cat "$tmp/err")"
grep -q 'UNEXPLAINED host bytes zero3 N=2 unit=model:.*; rank 1 resident 297791 B (schedule 297792, UNEXPLAINED)' "$tmp/err" ||
	fail "a rank's host figure off the schedule is not named: $(cat "$tmp/err")"
grep -q "UNEXPLAINED host bytes gpt2-tiny zero1 N=2 unit=layer:.*peak $((tpeak + 8)) B (schedule $tpeak, UNEXPLAINED)" \
	"$tmp/err" || fail "the transformer's host figure off the schedule is not named: $(cat "$tmp/err")"
grep -q '^zerosim report: host bytes of 4 offloaded runs, 1 unexplained$' "$tmp/out" &&
	grep -q 'host bytes of 1 offloaded runs, 1 unexplained$' "$tmp/out" || fail "the summaries: $(cat "$tmp/out")"
# The PDF says so in a sentence and marks the run's row (the MLP's and the
# transformer's, the same table).
grep -q 'textbf{1 of the 4 offloaded runs departs from the schedule model}' "$tmp/rhb/flags.tex" &&
	grep -q '^zero3\\textsuperscript{u} & 2 & model & [0-9\,]* & 347\\,425\\textsuperscript{u} (347\\,424) & ' "$tmp/rhb/flags.tex" &&
	grep -q 'textbf{1 of the 1 offloaded runs departs from the schedule model}' "$tmp/rhb/transformer.tex" ||
	fail "the PDF's host tables do not mark the departures: $(grep -A12 'Host memory' "$tmp/rhb/flags.tex")"
# shellcheck disable=SC2086
"$zerosim" theory $ho --steps 3 --out "$tmp/ht3.json" && "$zerosim" theory ${ho% --ranks-per-node 2} --steps 2 \
	--out "$tmp/ht1.json" || fail "theory for the refusals"
for t in ht3:"differ in steps: 2 and 3" ht1:"differ in ranks per node: 2 and 1"; do
	if "$zerosim" report --no-render --template "$template" --measured "$tmp/hm.json" --theory "$tmp/${t%%:*}.json" \
		--out "$tmp/rr" 2>"$tmp/err"; then fail "${t%%:*} was accepted"; fi
	grep -q "${t#*:}" "$tmp/err" || fail "${t%%:*}: $(cat "$tmp/err")"
	[ ! -e "$tmp/rr" ] || fail "a refused report wrote $tmp/rr"
done
# ... but only where they matter: without offload a theory's --ranks-per-node
# (for DeepSpeed's estimate; measure takes it only offloaded), and without
# zero3 other steps, are the same experiment.
"$zerosim" measure -q --framework deepspeed --world 2 --schemes zero1 --steps 1 --out "$tmp/n1.json" &&
	"$zerosim" theory --framework deepspeed --world 2 --schemes zero1 --ranks-per-node 2 --out "$tmp/n2.json" &&
	"$zerosim" report --no-render --template "$template" --measured "$tmp/n1.json" --theory "$tmp/n2.json" \
		--out "$tmp/rn" >/dev/null 2>"$tmp/err" || fail "ranks per node or steps refused where they do not matter: $(cat "$tmp/err")"

# Eight ranks with two 1e9-byte buckets each count 2e9 bytes apiece at the
# peak; the process holds a few megabytes (GNU time's maximum RSS, where
# installed).
"$zerosim" measure -q --framework deepspeed --schemes zero2 --world 8 --ds-overlap-comm on --out "$tmp/m8.json" ||
	fail "measure N=8"
tr -d ' \t\n' <"$tmp/m8.json" | grep -q '"peak_bytes":\[2000[0-9]\{6\},' || fail "no 2e9-byte peak per rank"
if [ -x /usr/bin/time ]; then
	/usr/bin/time -f %M -o "$tmp/rss" "$zerosim" measure -q --framework deepspeed --schemes zero2 --world 8 \
		--ds-overlap-comm on --out "$tmp/m8.json" || fail "measure under time"
	[ "$(cat "$tmp/rss")" -lt 262144 ] || fail "the buckets were resident: $(cat "$tmp/rss") kB"
fi
echo "deepspeed_cli: ok"

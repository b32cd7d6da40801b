#!/bin/sh
# case_lora — a case with LoRA (issue #23) round trip: `measure
# --write-case` with --lora-r (and the 4-bit base, zerosim-case/4), then
# `measure --case` of that file trains the same run again: the same
# losses bit for bit, the same resident, peak and first-step bytes and
# comm, the same final base digest, and the case it writes back holds the
# same adapters; and those bytes are the theory's for the same options.
# Under the plain loop (dropout 0.1 at --seed 7: the masks come from the
# case's dropout_seed), DDP N = 2 (all-linear, K = 2, dropout 0.2), FSDP
# N = 2 and DeepSpeed's engine (zero2, N = 2; its --write-case wrote
# DeepSpeed's fp32 partition of the adapters into the file before), the
# QLoRA base with and without double quantization (plain loop, DDP N = 2),
# gpt2 with its own dropout 0.1 at --seed 7 (no LoRA: the masks, again).
# A DDP case trained under FSDP gives the DDP run's losses. Controls: a
# case whose adapters are doctored (lora_B 0.01, no digest) starts from
# another loss, and one without its dropout_seed trains otherwise (so
# the file's values and key are what the run reads). Refusals, one line,
# exit 2: a --lora-* or --quant-base that disagrees with the case,
# --lora-r with a case without lora, lora.quant_base in a /2 file, a count
# that is not the side file's, and a mistyped lora key.
#
# Each row fails on 6da2932 (`measure --case` refused every case with
# lora; --write-case refused --quant-base nf4; gpt2's seed-7 case reran
# with the default seed's masks; DeepSpeed's case held 2,688 values).
# Exit 0 pass, 1 mismatch, 99 hard error.
set -u
name=case_lora
. "${srcdir:-.}/tests/ft_lib.sh"
ft_configs 256 160
# gpt2 with GPT2Config's default dropout (ft_configs' has 0)
sed 's/"embd_pdrop": 0.0/"embd_pdrop": 0.1/; s/"attn_pdrop": 0.0/"attn_pdrop": 0.1/; s/"resid_pdrop": 0.0/"resid_pdrop": 0.1/' \
	"$tmp/gpt2.json" >"$tmp/gpt2d.json"
common="--torch-device cpu --attn eager --optimizer-impl single --seq 16 --batch 2 --lr 0.01"

# the numbers of a measured.json's first run, and of a theory.json's first row
nums() {
	python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
if "runs" in d:
    r = d["runs"][0]
    print(r["resident_bytes"], r["peak_bytes"], r.get("first_step_peak"), r["comm_bytes_per_rank_per_step"],
          r["weights_digest"], " ".join(repr(x) for x in r["losses"]))
else:
    s = d["rows"][0]["schedule"]
    print(s["resident_bytes"], s["peak_bytes"], s.get("first_step_peak"), s["comm_bytes_per_rank_per_step"])
' "$1"
}
fail() { echo "FAIL: $*"; status=1; }

# label;model;torch;args (the run's: --case gives the rest)
while IFS=';' read -r label m tv run args; do
	[ -n "$label" ] || continue
	c="$tmp/$label.json"
	# shellcheck disable=SC2086
	if ! "$zerosim" measure -q --model "$tmp/$m.json" --framework $run --torch-version "$tv" $common $args \
		--steps 3 --write-case "$c" --out "$tmp/m1.json" 2>"$tmp/err" ||
		! "$zerosim" measure -q --case "$c" --framework $run --torch-version "$tv" $common \
			--write-case "$tmp/back.json" --out "$tmp/m2.json" 2>>"$tmp/err" ||
		! "$zerosim" theory --model "$tmp/$m.json" --framework $run --torch-version "$tv" $common $args \
			--out "$tmp/t.json" 2>>"$tmp/err"; then
		fail "$label: $(cat "$tmp/err")"
		continue
	fi
	a=$(nums "$tmp/m1.json") b=$(nums "$tmp/m2.json") t=$(nums "$tmp/t.json")
	case "$label" in gpt2*) lora=none ;; *) lora=$(cmp "${c%.json}.lora.f32" "$tmp/back.lora.f32" && echo same) ;; esac
	if [ "$a" != "$b" ] || [ "${b%% xxh3:*}" != "$t" ] || [ -z "$lora" ]; then
		fail "$label: seed run [$a], its case [$b], theory [$t], adapters written back: ${lora:-differ}"
	else
		echo "ok: $label: [$b] = the seed run's; theory $t; adapters written back $lora"
	fi
done <<EOF
plain-q-v-dropout;llama;1.13;torch --wrapper none;--lora-r 4 --lora-dropout 0.1 --seed 7
ddp-all-linear-k2;llama;1.13;torch --wrapper ddp --schemes dp;--world 2 --lora-r 4 --lora-targets all-linear --lora-dropout 0.2 --grad-accum 2 --seed 5
fsdp-q-v;llama;1.13;torch --wrapper fsdp --schemes zero3;--world 2 --lora-r 4 --seed 5
ds-zero2;llama;1.13;deepspeed --wrapper deepspeed --schemes zero2;--world 2 --precision fp32 --lora-r 4 --seed 5
qlora-dq;llama;2.6;torch --wrapper none;--lora-r 4 --quant-base nf4 --double-quant on
qlora-ddp;gpt2;2.6;torch --wrapper ddp --schemes dp;--world 2 --lora-r 4 --lora-targets all-linear --quant-base nf4
gpt2-dropout;gpt2d;1.13;torch --wrapper none;--seed 7
EOF

# the 4-bit case's format and keys
got=$(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(d["format"], d["lora"]["quant_base"], d["lora"]["double_quant"])' "$tmp/qlora-dq.json")
[ "$got" = "zerosim-case/4 nf4 True" ] && echo "ok: qlora case: $got" || fail "qlora case: $got"

# one case, two frameworks: the DDP case under FSDP gives DDP's losses
# shellcheck disable=SC2086
"$zerosim" measure -q --case "$tmp/ddp-all-linear-k2.json" --framework torch --torch-version 1.13 --wrapper ddp \
	--schemes dp $common --out "$tmp/d.json" &&
	"$zerosim" measure -q --case "$tmp/ddp-all-linear-k2.json" --framework torch --torch-version 1.13 --wrapper fsdp \
		--schemes zero2 $common --out "$tmp/f.json" || exit 99
a=$(nums "$tmp/d.json") b=$(nums "$tmp/f.json")
[ "${a#* xxh3:}" = "${b#* xxh3:}" ] && echo "ok: the DDP case under FSDP: losses ${b#* xxh3:* }" ||
	fail "the DDP case under FSDP: [$b], DDP [$a]"

# controls: the adapters and the dropout seed are what the run reads
python3 - "$tmp/plain-q-v-dropout.json" "$tmp" <<'PY' || exit 99
import array, json, os, sys
c, tmp = json.load(open(sys.argv[1])), sys.argv[2]
v = array.array("f")  # little-endian float32, as this machine's
v.frombytes(open(os.path.join(tmp, c["lora"]["file"]), "rb").read())
# llama q_proj then v_proj per block: A [4, 64], B [64, 4] / [32, 4]
for i in range(4 * 64, 4 * 64 + 64 * 4):
    v[i] = 0.01  # block 0's q lora_B
open(os.path.join(tmp, "doctored.lora.f32"), "wb").write(v.tobytes())
c["lora"]["file"] = "doctored.lora.f32"
del c["lora"]["digest"]
json.dump(c, open(os.path.join(tmp, "doctored.json"), "w"))
c = json.load(open(sys.argv[1]))
del c["dropout_seed"]
json.dump(c, open(os.path.join(tmp, "noseed.json"), "w"))
PY
run_plain="--framework torch --torch-version 1.13 --wrapper none"
for ctl in doctored noseed; do
	# shellcheck disable=SC2086
	"$zerosim" measure -q --case "$tmp/$ctl.json" $run_plain $common --out "$tmp/c.json" 2>"$tmp/err" || {
		fail "control $ctl: $(cat "$tmp/err")"
		continue
	}
	"$zerosim" measure -q --case "$tmp/plain-q-v-dropout.json" $run_plain $common --out "$tmp/p.json" || exit 99
	a=$(nums "$tmp/p.json") b=$(nums "$tmp/c.json")
	[ "${a#* xxh3:* }" != "${b#* xxh3:* }" ] && echo "ok: control $ctl trains otherwise: ${b#* xxh3:* }" ||
		fail "control $ctl: the same losses ${b#* xxh3:* }"
done

# refusals: one line, exit 2, nothing written
refuse() {
	want=$1
	shift
	rm -f "$tmp/r.json"
	"$zerosim" measure -q "$@" --out "$tmp/r.json" >/dev/null 2>"$tmp/err"
	rc=$?
	if [ $rc -ne 2 ] || [ "$(wc -l <"$tmp/err")" -ne 1 ] || [ -e "$tmp/r.json" ] || ! grep -q -- "$want" "$tmp/err"; then
		fail "refusal '$want': exit $rc, stderr: $(cat "$tmp/err")"
	else
		echo "ok: refused: $(cat "$tmp/err")"
	fi
}
pc="--case $tmp/plain-q-v-dropout.json $run_plain"
# shellcheck disable=SC2086
refuse "--lora-r 8 disagrees with the case file's lora-r 4" $pc --lora-r 8
# shellcheck disable=SC2086
refuse "--lora-dropout 0 disagrees with the case file's lora-dropout 0.1" $pc --lora-dropout 0
# shellcheck disable=SC2086
refuse "--quant-base nf4 disagrees with the case file's quant-base none" $pc --torch-version 2.6 --quant-base nf4
# shellcheck disable=SC2086
refuse "--lora-r with a case that has no \"lora\"" --case "$tmp/gpt2-dropout.json" $run_plain --lora-r 4
python3 - "$tmp" <<'PY' || exit 99
import json, os, sys
tmp = sys.argv[1]
c = json.load(open(os.path.join(tmp, "qlora-dq.json")))
c["format"] = "zerosim-case/2"
json.dump(c, open(os.path.join(tmp, "q2.json"), "w"))
c = json.load(open(os.path.join(tmp, "plain-q-v-dropout.json")))
c["lora"]["count"] += 1
json.dump(c, open(os.path.join(tmp, "count.json"), "w"))
c = json.load(open(os.path.join(tmp, "plain-q-v-dropout.json")))
c["lora"]["rank"] = c["lora"].pop("r")
json.dump(c, open(os.path.join(tmp, "typo.json"), "w"))
PY
refuse "unknown key \"quant_base\" in a zerosim-case/2 file's lora" --case "$tmp/q2.json" $run_plain --torch-version 2.6
refuse "the case's lora file .* holds 7168 bytes, not 4 x 1793" --case "$tmp/count.json" $run_plain
refuse "the case's \"lora\" has the unknown key \"rank\"" --case "$tmp/typo.json" $run_plain
exit $status

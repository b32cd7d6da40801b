#!/bin/sh
# report_lora — the report of LoRA and QLoRA runs (issue #23, "The theory
# and the report"; docs/finetune.md, "LoRA in the report"):
#  1. zerosim's own step (--framework paper --lora-r): llama-tiny on PEFT's
#     default q_proj,v_proj at r 4 and gpt2-tiny on all-linear at r 4, dp,
#     zero1, zero2 at N = 1, 2, 3 (zero3 at N = 1): the report exits 0
#     under --strict, no point unexplained, none "other"; Ψ_t (PEFT's
#     count) and Ψ worked by hand from report/models/*.json, not from
#     zerosim; each point's floor the frozen floor over Ψ_t by hand
#     (docs/schedule.md, "The floors under --freeze"); the section's "A
#     LoRA run" paragraph with Ψ_t and Ψ, its table's adapters' grads and
#     optimizer state at DP (g Ψ_t, k Ψ_t) and the frozen base p(Ψ − Ψ_t);
#     the LoRA run beside the same model trained whole in one report;
#  2. the PyTorch step (--framework torch --wrapper none): llama-tiny's
#     LoRA (r 4, dropout 0.05) and QLoRA (nf4, double quantization) plain
#     loops beside the paper's: both columns, the 4-bit base named, and at
#     the peak the model's buffers the 4-bit base's storages worked by hand
#     from bitsandbytes' layout (packed n/2, 8-bit absmax n/64, a 4-byte
#     constant per 256 blocks, the mean, the 16-entry code, the 256-entry
#     map copied per layer and once) plus inv_freq; each loop's gradients
#     and Adam state against its own paper level over Ψ_t (4Ψ_t each,
#     Ψ_t = 1,792 by hand), not the whole model's;
#  3. the PyTorch step's LoRA in the transformer section (DDP N = 2 over
#     LoRA and over the 4-bit base with double quantization; DeepSpeed's
#     engine, zero1 N = 2): --strict, no point unexplained, diff.json's Ψ_t
#     and each floor by hand (4Ψ + 12Ψ_t; the 4-bit base's linear weights
#     at n/2 + n/64 + 4·ceil(n/64/256) + 4 + 64 + 1,024 a layer and the map
#     once, not 4n; 4Ψ + 4Ψ_t + 4Ψ_t), a "A LoRA run" paragraph for each;
#  4. mutations: trainable_params or lora_targets edited under the other,
#     or trainable_params absent (an older zerosim's), are refused in one
#     line, exit 2, no diff.json; a measured category 4 bytes off is
#     unexplained (--strict: exit 1).
# Against main (4ac954d) part 1 fails: the report refused config.lora_r
# under zerosim's own step, and part 2 refused the QLoRA loop as the LoRA
# one "given twice". Against 54d319f part 2's Ψ_t line fails (the loops
# were judged by the whole model's paper schedule alone) and part 3 (the
# DeepSpeed run refused for "no trainable_params"; without it, diff.json
# names no lora_r for the PyTorch step's runs: they were judged as the
# whole model trained). About 7 s (5 s before part 3).
set -u
zerosim=${ZS_BUILDDIR:-.}/zerosim
src=${srcdir:-.}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/zs-rlo.XXXXXX") || exit 99
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
command -v python3 >/dev/null || { echo "SKIP: no python3"; exit 77; }
llama=$src/report/models/llama-tiny.json gpt2=$src/report/models/gpt2-tiny.json
common="--seq 16 --batch 2 --unit layer --precision fp32"

# 1. zerosim's own step
lora() { # NAME MODEL OPTIONS...: measure and theory of one LoRA sweep
	n=$1 m=$2
	shift 2
	# shellcheck disable=SC2086
	"$zerosim" measure --quiet --model "$m" --steps 1 $common "$@" --out "$tmp/$n-m.json" 2>"$tmp/err" &&
		"$zerosim" theory --model "$m" $common "$@" --out "$tmp/$n-t.json" 2>>"$tmp/err" ||
		fail "measure/theory $n: $(cat "$tmp/err")"
}
lora llama "$llama" --lora-r 4 --world 1,2,3 --schemes dp,zero1,zero2
lora gpt2 "$gpt2" --lora-r 4 --lora-targets all-linear --world 1,2,3 --schemes dp,zero1,zero2
lora gpt2z3 "$gpt2" --lora-r 4 --lora-targets all-linear --world 1 --schemes zero3
python3 - "$tmp/gpt2z3-m.json" "$tmp/gpt2z3-t.json" "$tmp/gpt2-m.json" "$tmp/gpt2-t.json" <<'PY' || exit 99
import json, sys # zero3's row joins gpt2's files: one model, one sweep
for extra, into in ((sys.argv[1], sys.argv[3]), (sys.argv[2], sys.argv[4])):
    a, b = json.load(open(extra)), json.load(open(into))
    key = "runs" if "runs" in b else "rows"
    b[key] += a[key]
    if "schemes" in b["config"]:
        b["config"]["schemes"] = b["config"]["schemes"] + ["zero3"]
    json.dump(b, open(into, "w"))
PY
"$zerosim" measure --quiet --model "$llama" --steps 1 $common --world 1,2,3 --schemes dp,zero1,zero2 \
	--out "$tmp/full-m.json" && "$zerosim" theory --model "$llama" $common --world 1,2,3 --schemes dp,zero1,zero2 \
	--out "$tmp/full-t.json" || exit 99
"$zerosim" measure --quiet --layers 16,32,16 --world 1,2 --out "$tmp/mlp-m.json" &&
	"$zerosim" theory --layers 16,32,16 --world 1,2 --out "$tmp/mlp-t.json" || exit 99
report() { ZEROSIM_DATADIR=$src "$zerosim" report --no-render --measured "$tmp/mlp-m.json" --theory "$tmp/mlp-t.json" "$@" >"$tmp/out" 2>"$tmp/err"; }
report --transformer "$tmp/full-t.json" --transformer "$tmp/full-m.json" \
	--transformer "$tmp/llama-t.json" --transformer "$tmp/llama-m.json" \
	--transformer "$tmp/gpt2-t.json" --transformer "$tmp/gpt2-m.json" --strict --out "$tmp/rep" ||
	fail "report of LoRA runs (exit $?): $(cat "$tmp/err")"
for want in "transformer llama-tiny (fp32): 9 rows, 9 measured, 0 unexplained" \
	"transformer llama-tiny (fp32, LoRA r = 4 on q_proj,v_proj): 9 rows, 9 measured, 0 unexplained" \
	"transformer gpt2-tiny (fp32, LoRA r = 4 on all-linear): 10 rows, 10 measured, 0 unexplained"; do
	grep -qF "$want" "$tmp/out" || fail "the summary lacks '$want': $(cat "$tmp/out")"
done
python3 - "$tmp/rep/diff.json" "$llama" "$gpt2" "$tmp/rep/transformer.tex" <<'PY' || fail "the LoRA runs' floors, diff.json or the section"
import json, sys
d = json.load(open(sys.argv[1]))
tex = open(sys.argv[4]).read()
def shape(cfg, targets):  # Ψ of the base and PEFT's Σ r(in + out), r = 4, from the config alone
    r, V = 4, cfg["vocab_size"]
    if cfg["model_type"] == "gpt2":  # Conv1D (in, out), biases, LayerNorms, tied head
        h, L, P = cfg["n_embd"], cfg["n_layer"], cfg["n_positions"]
        block = 2 * h + (3 * h * h + 3 * h) + (h * h + h) + 2 * h + (4 * h * h + 4 * h) + (4 * h * h + h)
        base = V * h + P * h + L * block + 2 * h
        pairs = {"all-linear": [(h, 3 * h), (h, h), (h, 4 * h), (4 * h, h)]}[targets]
    else:  # llama: q, o h x h; k, v h x kv; SwiGLU; RMSNorms; untied head
        h, L, I = cfg["hidden_size"], cfg["num_hidden_layers"], cfg["intermediate_size"]
        kv = cfg["num_key_value_heads"] * h // cfg["num_attention_heads"]
        block = 2 * h * h + 2 * h * kv + 3 * h * I + 2 * h
        base = 2 * V * h + L * block + h
        pairs = {"q_proj,v_proj": [(h, h), (h, kv)]}[targets]
    return base, L * sum(r * (i + o) for i, o in pairs)
want = {("llama-tiny", False): None,
        ("llama-tiny", True): shape(json.load(open(sys.argv[2])), "q_proj,v_proj"),
        ("gpt2-tiny", True): shape(json.load(open(sys.argv[3])), "all-linear")}
assert want[("llama-tiny", True)][1] == 1792 and want[("gpt2-tiny", True)][1] == 8192, want  # PEFT's printed counts
p, g, k = 4, 4, 8  # fp32 Adam
seen = set()
for m in d["transformers"]:
    lora = "lora_r" in m
    key = (m["model"], lora)
    seen.add(key)
    if not lora:
        assert "trainable_params" not in m, m
        continue
    base, psi_t = want[key]
    psi = base + psi_t
    assert m["lora_r"] == 4 and m["params"] == psi and m["trainable_params"] == psi_t, (key, m["params"], m["trainable_params"], psi, psi_t)
    for pt in m["points"]:
        N, s = pt["world"], pt["scheme"]
        floor = {"dp": p * psi + (g + k) * psi_t, "zero1": p * psi + g * psi_t + k * psi_t / N,
                 "zero2": p * psi + (g + k) * psi_t / N, "zero3": (p * psi + (g + k) * psi_t) / N}[s]
        assert abs(pt["floor_bytes"] - floor) < 1e-6 * floor, (key, s, N, pt["floor_bytes"], floor)
        assert not pt["unexplained"] and pt["measured_bytes"] == pt["schedule_bytes"], pt
        assert abs(pt["causes"]["other"]) < 1e-6, (key, s, N, pt["causes"])
    def grouped(v):
        return "{:,}".format(int(v)).replace(",", "\\,")
    head = "\\paragraph{A LoRA run.} \\texttt{-{}-lora-r 4 -{}-lora-alpha 8} over \\texttt{%s}" % m["lora_targets"].replace("_", "\\_")
    assert head in tex, head
    assert "$\\Psi_t = %s$ (PEFT's count" % grouped(psi_t) in tex and "of $\\Psi = %s$" % grouped(psi) in tex, (psi_t, psi)
    assert "the frozen base is $p(\\Psi - \\Psi_t) = %s$ B and the adapters $p\\Psi_t = %s$ B" % (grouped(p * base), grouped(p * psi_t)) in tex
    # the table at N = 3: DP's adapters' grads g Ψ_t and optimizer state k Ψ_t, kB, schedule and measured
    sec = tex[tex.index(head):]
    rows = {l.split(" & ")[0]: l.split(" & ")[1:] for l in sec[:sec.index("\\bottomrule")].splitlines() if " & " in l}
    for name, v in (("the adapters' grads", g * psi_t), ("the adapters' optimizer state", k * psi_t)):
        assert rows[name][:2] == ["%.1f" % (v / 1e3)] * 2, (key, name, rows[name], v)
assert seen == set(want), seen
print("ok: Ψ_t and the floors of two LoRA runs by hand, the section's terms, beside the model trained whole")
PY

# 1b. The paper's step with LoRA's dropout and frozen adapters (refused
# there on 1659c3a): the "A LoRA run" paragraph names the dropout's kept
# output and noise, 2·B·T·Σin·4 = 2·32·(4·64)·4 = 65,536 B in fp32 (four
# adapters of llama-tiny's q, v, in 64 each), and the adapters' frozen
# elements beside the base's (block 0's: F = 4·(64 + 64) + 4·(64 + 32) =
# 896; the base 223,552, 894,208 B in fp32; F's 3,584 B)
"$zerosim" theory --model "$llama" $common --lora-r 4 --lora-dropout 0.1 --freeze blocks:0-0 --world 1,2 \
	--schemes dp,zero2 --out "$tmp/fd-t.json" || exit 99
report --transformer "$tmp/full-t.json" --transformer "$tmp/fd-t.json" --out "$tmp/rfd" ||
	fail "report of a paper LoRA run with dropout and frozen adapters (exit $?): $(cat "$tmp/err")"
for want in '$2 B T \sum \mathit{in} \cdot p = 65\,536$ B' \
	"the base's 223\\,552 and \$F = 896\$ of the adapters', those \\texttt{-{}-freeze blocks:0-0} names, frozen" \
	"the frozen base is \$p(\\Psi - \\Psi_t - F) = 894\\,208\$ B, the frozen adapters' \$pF = 3\\,584\$ B"; do
	grep -qF "$want" "$tmp/rfd/transformer.tex" || fail "the paper's LoRA run: the section lacks '$want'"
done
echo "ok: a paper LoRA run with dropout and frozen adapters: 65,536 B of the dropout's, 896 adapters' elements frozen"

# 2. The PyTorch step: LoRA and QLoRA plain loops beside the paper's.
plain="--framework torch --wrapper none --world 1 --schemes dp --precision fp32 --torch-device cpu --attn eager --seq 16 --batch 2 --lora-r 4 --lora-dropout 0.05"
# shellcheck disable=SC2086
"$zerosim" theory --model "$llama" $plain --out "$tmp/pl-lora.json" &&
	"$zerosim" theory --model "$llama" $plain --quant-base nf4 --double-quant on --out "$tmp/pl-qlora.json" || exit 99
report --transformer "$tmp/full-t.json" --transformer "$tmp/pl-lora.json" --transformer "$tmp/pl-qlora.json" \
	--transformer "$tmp/llama-t.json" --out "$tmp/rt" || fail "report of LoRA and QLoRA plain loops (exit $?): $(cat "$tmp/err")"
python3 - "$tmp/rt/torch.tex" "$llama" "$tmp/pl-lora.json" "$tmp/pl-qlora.json" "$tmp/full-t.json" <<'PY' ||
import json, sys
tex, cfg = open(sys.argv[1]).read(), json.load(open(sys.argv[2]))
h, I, L = cfg["hidden_size"], cfg["intermediate_size"], cfg["num_hidden_layers"]
kv = cfg["num_key_value_heads"] * h // cfg["num_attention_heads"]
hd = h // cfg["num_attention_heads"]
# bitsandbytes 0.47.0 (docs/finetune.md, "QLoRA's 4-bit base"), every linear but lm_head,
# double quantization: packed n/2, 8-bit absmax n/64, fp32 per 256 blocks, the mean (4),
# the code (64), state2.code (1024) a layer; the dynamic map once (1024); inv_freq hd/2 fp32
q4 = 1024 + 4 * hd // 2
for n in [h * h, kv * h, kv * h, h * h, I * h, I * h, h * I] * L:
    blocks = -(-n // 64)
    q4 += n // 2 + blocks + 4 * -(-blocks // 256) + 4 + 64 + 1024
assert "PyTorch 2.6\\\\nf4 dq" in tex and "PyTorch 2.6\\\\fp32 base" in tex, "the two columns"
row = [l for l in tex.splitlines() if l.startswith("the model's buffers & ")][0].rstrip(" \\").split(" & ")
assert row[-1] == "{:,}".format(q4).replace(",", "\\,"), (row, q4)
assert "\\item QLoRA's 4-bit base" in tex and "LoRA's dropout on each adapter's input" in tex
# each plain loop's gradients and Adam state against its own paper level, g and k over Ψ_t
# (q_proj, v_proj at r 4: 2 blocks of 4·(h + h) + 4·(h + kv)), not the whole model's
psi_t = L * 4 * (2 * h + h + kv)
assert psi_t == 1792, psi_t
g = lambda v: "{:,}".format(v).replace(",", "\\,")
for lab in ("2.6, fp32 base", "2.6, nf4 dq"):
    want = "%s $\\Psi_t = %s$ of 225\\,344, gradients" % (lab, g(psi_t))
    assert want in tex, want
    at = tex.index(want)
    assert "against %s~B, Adam's" % g(4 * psi_t) in tex[at:at + 200], tex[at:at + 200]
print("ok: the LoRA and QLoRA plain loops, the 4-bit base's %d B of buffers by hand" % q4)
# each plain loop's peak as a multiple of its own paper level (theory.json's
# rows[0].peak: g and k over Ψ_t, the adapters trained), the ratio and the
# table's row, not of the whole model's paper schedule, which that ratio
# stays beside (against 1659c3a: "0.420 times the paper's", no such row)
g = lambda v: "{:,}".format(int(v)).replace(",", "\\,")
whole = [r for r in json.load(open(sys.argv[5]))["rows"] if r["scheme"] == "dp" and r["world"] == 1][0]
whole = whole["schedule"]["peak_bytes"]
levels = []
for path in sys.argv[3:5]:
    row = json.load(open(path))["rows"][0]
    peak, level = row["schedule"]["peak_bytes"], row["peak"]["peak_bytes"]
    want = "is %s~B, %.3f times its own paper level's %s~B (LoRA's: the adapters trained, $\\Psi_t = 1\\,792$; " \
        "%.3f times the whole model's)" % (g(peak), peak / level, g(level), peak / whole)
    assert want in tex, want
    levels.append(level)
row = "its paper level (LoRA: $\\Psi_t$ trained) & -- & %s \\\\" % " & ".join(g(v) for v in levels)
assert row in tex, row
print("ok: each loop's peak against its own paper level (%s B), beside the whole model's (%d B)" %
      (", ".join("%d" % v for v in levels), whole))
PY
	fail "the section zerosim against PyTorch"

# 3. The PyTorch step's LoRA in the transformer section, judged by the
# adapters (Ψ_t) as zerosim's own step is: DDP N = 2 over LoRA and over the
# 4-bit base (double quantization), and DeepSpeed's engine (zero1, N = 2;
# refused before: "no trainable_params"). Each floor worked by hand: DP
# 4Ψ + 12Ψ_t, with the 4-bit base's linear weights at their stored bytes,
# zero1 4Ψ + 4Ψ_t + 8Ψ_t/2.
ddp="--torch-device cpu --attn eager --precision fp32 --seq 16 --batch 2 --lora-r 4 --world 2"
tm() { # NAME OPTIONS...: theory and measure of one run
	n=$1
	shift
	# shellcheck disable=SC2086
	"$zerosim" theory --model "$llama" $ddp "$@" --out "$tmp/$n-t.json" 2>"$tmp/err" &&
		"$zerosim" measure --quiet --model "$llama" $ddp "$@" --out "$tmp/$n-m.json" 2>>"$tmp/err" ||
		fail "theory/measure $n: $(cat "$tmp/err")"
}
tm tddp --framework torch --wrapper ddp --schemes dp
tm tq --framework torch --wrapper ddp --schemes dp --torch-version 2.6 --quant-base nf4 --double-quant on
tm tds --framework deepspeed --wrapper deepspeed --torch-version 1.13 --schemes zero1
report --transformer "$tmp/tddp-t.json" --transformer "$tmp/tddp-m.json" --transformer "$tmp/tq-t.json" \
	--transformer "$tmp/tq-m.json" --transformer "$tmp/tds-t.json" --transformer "$tmp/tds-m.json" --strict \
	--out "$tmp/rs" || fail "report of the PyTorch step's LoRA runs (exit $?): $(cat "$tmp/err")"
python3 - "$tmp/rs/diff.json" "$tmp/rs/transformer.tex" "$llama" <<'PY' || fail "the PyTorch step's LoRA floors"
import json, sys
d, tex, cfg = json.load(open(sys.argv[1])), open(sys.argv[2]).read(), json.load(open(sys.argv[3]))
h, I, L, V = cfg["hidden_size"], cfg["intermediate_size"], cfg["num_hidden_layers"], cfg["vocab_size"]
kv = cfg["num_key_value_heads"] * h // cfg["num_attention_heads"]
lin = [(h, h), (kv, h), (kv, h), (h, h), (I, h), (I, h), (h, I)] * L  # (out, in)
n4 = sum(o * i for o, i in lin)
psi_t = L * 4 * ((h + h) + (h + kv))  # PEFT's q_proj, v_proj at r 4
psi = 2 * V * h + L * 2 * h + h + n4 + psi_t
held = 1024  # bitsandbytes with double quantization: the map once, then a layer each
for o, i in lin:
    n = o * i
    blocks = -(-n // 64)
    held += n // 2 + blocks + 4 * -(-blocks // 256) + 4 + 64 + 1024
floors = {4 * psi + 12 * psi_t: "torch, LoRA", 4 * (psi - n4) + held + 12 * psi_t: "torch, QLoRA",
          4 * psi + 4 * psi_t + 8 * psi_t / 2: "deepspeed zero1, LoRA"}
seen = set()
for m in d["transformers"]:
    assert m["lora_r"] == 4 and m["trainable_params"] == psi_t == 1792 and m["params"] == psi, m
    for pt in m["points"]:
        assert pt["floor_bytes"] in floors, (m["framework"], pt["floor_bytes"], floors)
        assert not pt["unexplained"] and pt["measured_bytes"] == pt["schedule_bytes"], pt
        seen.add(floors[pt["floor_bytes"]])
assert seen == set(floors.values()), seen
assert tex.count("\\paragraph{A LoRA run.}") == 3, tex.count("\\paragraph{A LoRA run.}")
g = lambda v: "{:,}".format(v).replace(",", "\\,")
assert "and %s B for its $n_4 = %s$ 4-bit linear weights" % (g(held), g(n4)) in tex, (held, n4)
print("ok: the PyTorch step's LoRA (DDP, QLoRA under DDP, DeepSpeed zero1): floors over Ψ_t = %d by hand" % psi_t)
PY

# 4. Mutations.
edit() { # IN OUT PYTHON: OUT is IN's JSON t after PYTHON
	python3 -c "import json, sys
t = json.load(open(sys.argv[1]))
$3
json.dump(t, open(sys.argv[2], 'w'))" "$1" "$2" || exit 99
}
refused() { # WHAT WANT: the last report refused in one line naming WANT, nothing written
	rc=$?
	[ $rc -eq 2 ] && [ "$(wc -l <"$tmp/err")" -eq 1 ] && grep -qF "$2" "$tmp/err" || fail "$1 (exit $rc): $(cat "$tmp/err")"
	[ -e "$tmp/bad/diff.json" ] && fail "$1: a refused report wrote diff.json"
}
edit "$tmp/llama-t.json" "$tmp/e1.json" 't["trainable_params"] = 1793'
report --transformer "$tmp/e1.json" --out "$tmp/bad"
refused "trainable_params edited" "$tmp/e1.json: trainable_params 1793 is not the 1792 that config.lora_r leaves trainable of config.model's 225344"
edit "$tmp/llama-t.json" "$tmp/e2.json" 't["config"]["lora_targets"] = "all-linear"'
report --transformer "$tmp/e2.json" --out "$tmp/bad"
refused "lora_targets edited" "$tmp/e2.json: params 225344 is not the 232896 elements of config.model's shape with its adapters"
edit "$tmp/llama-t.json" "$tmp/e3.json" 'del t["trainable_params"]'
report --transformer "$tmp/e3.json" --out "$tmp/bad"
refused "an older theory.json" "config.lora_r without trainable_params"
edit "$tmp/llama-m.json" "$tmp/e4.json" 'r = [r for r in t["runs"] if r["scheme"] == "zero2" and r["world"] == 3][0]
r["peak_bytes"] += 4
r["peak_breakdown"]["grad32"] += 4'
report --transformer "$tmp/llama-t.json" --transformer "$tmp/e4.json" --out "$tmp/bad4"
[ $? -eq 0 ] && grep -q "LoRA r = 4 on q_proj,v_proj): 9 rows, 9 measured, 1 unexplained" "$tmp/out" ||
	fail "a measured grad32 4 B off: $(cat "$tmp/out")"
report --transformer "$tmp/llama-t.json" --transformer "$tmp/e4.json" --strict --out "$tmp/bad5"
[ $? -eq 1 ] || fail "--strict took an unexplained LoRA run"
echo "ok: the report of LoRA and QLoRA runs"

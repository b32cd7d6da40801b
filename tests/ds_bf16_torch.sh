#!/bin/sh
# ds_bf16_torch — DeepSpeed's ZeRO-1/2 over the PyTorch step against real
# PyTorch 1.13's allocator (tests/ds_bf16_torch.py: DeepSpeed 38327e0's
# allocations transcribed over tests/hf_torch.py's models, profiled),
# gpt2-tiny and llama-tiny, stages 1 and 2, seq 32, batch 2,
# reduce_bucket_size 100000, the configs' dropout (docs/schedule.md,
# "DeepSpeed over the PyTorch step", "bf16"):
#  - fp32 at N = 1 and N = 2 (gloo): zerosim's theory of `--wrapper
#    deepspeed` (util/ag_ds.c) equals PyTorch's allocator to the byte on
#    every rank: between steps, the steady step's peak, and the live bytes
#    at every mark zerosim's step names;
#  - bf16 at N = 1 (gloo in 1.13 reduces no bf16) (DeepSpeed's
#    {"bf16": {"enabled": true}}: module.bfloat16(),
#    engine.py 1224-1231), which zerosim does not build: zerosim refuses it
#    by name (measure and theory); PyTorch's bytes between steps are the
#    fp32 run's less 2 bytes a parameter (the 16-bit flat buffer; the fp32
#    partition and Adam's moments stay fp32) and less half the model's fp32
#    buffers (module.bfloat16() casts them: gpt2's masked_bias, a 0-dim
#    fp32 a block; llama's rotary inv_freq, head_dim / 2), counted by hand
#    from the shapes; the 3 losses within 2e-3, relative, of the fp32
#    run's (9.3e-4 the largest here; bf16 keeps 8 bits of mantissa);
#  - the figures are printed (the reference a bf16 pass must meet).
# Not compared with DeepSpeed itself (not installable here).
# PyTorch is looked for by tests/torch_python.sh; without it: skip (77).
# About 40 s on a loaded 2-core machine (8 profiled runs in one python3,
# then 4 in each of 2 gloo ranks; 12 s of CPU).
set -u
top=${ZS_BUILDDIR:-.}
src=${srcdir:-.}
zerosim=$top/zerosim
models=$src/report/models
[ -x "$zerosim" ] || { echo "ds_bf16_torch: $zerosim is not built" >&2; exit 99; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/zs-dsbf.XXXXXX") || exit 99
trap 'rm -rf "$tmp"' EXIT HUP INT TERM
fail() { echo "ds_bf16_torch: FAIL: $*" >&2; exit 1; }

# bf16 refused by name, whatever the stage (no --out written)
keep=$tmp/keep.json
echo kept >"$keep"
want="--precision mixed with --wrapper deepspeed: DeepSpeed's bf16 and fp16 cast the module to 16 bits, whose PyTorch step is not described yet (give --precision fp32)"
for cmd in measure theory; do
	for scheme in zero1 zero2 zero3; do
		"$zerosim" $cmd --framework deepspeed --wrapper deepspeed --model "$models/gpt2-tiny.json" --torch-device cpu \
			--torch-version 1.13 --precision mixed --schemes $scheme --world 1 --out "$keep" >"$tmp/out" 2>"$tmp/err"
		rc=$?
		[ $rc -eq 2 ] && [ "$(cat "$tmp/err")" = "zerosim $cmd: $want" ] && [ ! -s "$tmp/out" ] &&
			[ "$(cat "$keep")" = kept ] || fail "$cmd $scheme --precision mixed: exit $rc, $(cat "$tmp/err")"
	done
done
echo "ok: DeepSpeed's bf16 (--precision mixed) refused by name, zero1, zero2 and zero3, measure and theory"

name=ds_bf16_torch
. "$src/tests/torch_python.sh"
PYTHONDONTWRITEBYTECODE=1 PYTHONPATH="$src/tests" "$py" "$src/tests/ds_bf16_torch.py" "$models/gpt2-tiny.json" \
	"$models/llama-tiny.json" --dtype fp32,bf16 --stage 1,2 --world 1,2 --bucket 100000 --steps 3 --seq 32 \
	--batch 2 >"$tmp/ref" 2>"$tmp/err" || { cat "$tmp/err" >&2; fail "tests/ds_bf16_torch.py"; }
[ "$(wc -l <"$tmp/ref")" -eq 12 ] || fail "tests/ds_bf16_torch.py wrote $(wc -l <"$tmp/ref") runs, not 12"
for model in gpt2-tiny llama-tiny; do
	for stage in 1 2; do
		"$zerosim" theory --framework deepspeed --wrapper deepspeed --ds-reduce-bucket 100000 --precision fp32 \
			--seq 32 --batch 2 --steps 3 --torch-device cpu --attn eager --torch-version 1.13 --optimizer-impl single \
			--model "$models/$model.json" --schemes zero$stage --world 1,2 --out "$tmp/t-$model-$stage.json" ||
			fail "theory $model zero$stage"
	done
done
"$py" - "$tmp" "$models" <<'EOF' || fail "PyTorch's allocator and zerosim (or the hand counts) differ"
import json, sys
tmp, models = sys.argv[1:]
runs = {}
for line in open(f"{tmp}/ref"):
    r = json.loads(line)
    runs[(r["model"].rsplit("/", 1)[-1][:-5], r["dtype"], r["stage"], r["world"])] = r
bad = 0
def agree(tag, got, t):
    """one rank's figures against zerosim's (t: its between, peak, marks)"""
    n = 0
    for what, g, w in (("between steps", got["between"], t[0]), ("peak", got["peak"], t[1])):
        if g != w:
            print(f"{tag} {what}: PyTorch {g}, zerosim {w} ({g - w:+d})")
            n += 1
    tm = t[2] or {}
    missing = [k for k in tm if k not in got["marks"]]
    diff = [(k, got["marks"][k], v) for k, v in tm.items() if k in got["marks"] and got["marks"][k] != v]
    if not tm or missing or diff:
        print(f"{tag} marks: {len(tm)} in zerosim's, missing in PyTorch's {missing[:5]}, differing {diff[:5]}")
        n += 1
    return n, len(tm)
for model in ("gpt2-tiny", "llama-tiny"):
    c = json.load(open(f"{models}/{model}.json"))
    # the trained parameters, by hand from the shape (the tied table once)
    V = c["vocab_size"]
    if c["model_type"] == "gpt2":
        d, f, n = c["n_embd"], c.get("n_inner") or 4 * c["n_embd"], c["n_layer"]
        block = 4 * d + (d * 3 * d + 3 * d) + (d * d + d) + (d * f + f) + (f * d + d)
        L = V * d + c["n_positions"] * d + n * block + 2 * d
        bufs = 4 * n  # masked_bias, 0-dim fp32, a block
    else:
        d, f, n, H = c["hidden_size"], c["intermediate_size"], c["num_hidden_layers"], c["num_attention_heads"]
        hd = d // H
        kv = c.get("num_key_value_heads", H) * hd
        block = 2 * d + d * H * hd + 2 * d * kv + H * hd * d + 3 * d * f
        L = V * d * (1 if c.get("tie_word_embeddings") else 2) + n * block + d
        bufs = 4 * (hd // 2)  # LlamaRotaryEmbedding's inv_freq
    for stage in (1, 2):
        fp, bf, fp2 = (runs[(model, dt, stage, w)] for dt, w in (("fp32", 1), ("bf16", 1), ("fp32", 2)))
        rows = {r["world"]: r["schedule"] for r in json.load(open(f"{tmp}/t-{model}-{stage}.json"))["rows"]}
        tag = f"{model} zero{stage}"
        t = rows[1]
        bad += agree(f"{tag} fp32 N=1", fp, (t["resident_bytes"], t["peak_bytes"], t.get("marks")))[0]
        pr = rows[2]["per_rank"]
        if len(fp2["ranks"]) != 2:
            print(f"{tag} N=2: {len(fp2['ranks'])} ranks' figures")
            bad += 1
        for r, got in enumerate(fp2["ranks"]):
            bad += agree(f"{tag} fp32 N=2 rank {r}", got,
                         (pr["resident_bytes"][r], pr["peak_bytes"][r], pr["marks"][r]))[0]
        tm = t.get("marks") or {}
        if fp["params"] != L or bf["params"] != L:
            print(f"{tag}: the flat buffer holds {fp['params']} (bf16 {bf['params']}) elements, not {L} by hand")
            bad += 1
        want = fp["between"] - 2 * L - bufs // 2
        if bf["between"] != want:
            print(f"{tag} bf16 between steps: {bf['between']}, not fp32's less 2 L and half the buffers, {want}")
            bad += 1
        if not all(abs(x - y) <= 2e-3 * abs(y) for x, y in zip(bf["losses"], fp["losses"])) or len(bf["losses"]) != 3:
            print(f"{tag}: bf16 losses {bf['losses']} not within 2e-3 of fp32's {fp['losses']}")
            bad += 1
        print(f"figures, {tag}: fp32 {len(tm)} marks, between {fp['between']}, peak {fp['peak']} ({fp['peak_phase']}),"
              f" N=2 {' '.join('%d/%d' % (x['between'], x['peak']) for x in fp2['ranks'])};"
              f" bf16 between {bf['between']} (L = {L}), peak {bf['peak']} ({bf['peak_phase']}),"
              f" losses {' '.join('%.5f' % x for x in bf['losses'])} (fp32 {' '.join('%.5f' % x for x in fp['losses'])})")
sys.exit(bad != 0)
EOF
echo "ok: fp32: zerosim's --wrapper deepspeed = PyTorch 1.13's allocator to the byte at N = 1 and 2 (between, peak," \
	"every mark, every rank);" \
	"bf16: between steps fp32's less 2 L and half the buffers, the losses within 2e-3"
exit 0

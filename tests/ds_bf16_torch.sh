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
#    at every mark zerosim's step names; the first step's peak and its
#    marks (util/ag_ds.c's step1: the theory's first_step_peak and
#    --steps 1's peak and marks, against the transcription's step 1, whose
#    client Adam makes its state lazily); and so under LoRA (llama-tiny,
#    q_proj and v_proj r 4, tests/ft_torch.py's PEFT layer) with block 0's
#    adapters frozen (`--lora-r 4 --freeze blocks:0-0`: the flat buffer
#    block 1's adapters alone, 896 elements, counted by hand);
#  - bf16 at N = 1 (gloo in 1.13 reduces no bf16) (DeepSpeed's
#    {"bf16": {"enabled": true}}: module.bfloat16(), engine.py 1224-1231;
#    zerosim's `--wrapper deepspeed --precision mixed`): zerosim's theory
#    equals PyTorch's allocator to the byte, between steps, the peak and
#    every mark, the first step's peak and marks, stages 1 and 2, both
#    models; PyTorch's bytes between steps
#    are also the fp32 run's less 2 bytes a parameter (the 16-bit flat
#    buffer; the fp32 partition and Adam's moments stay fp32) and less half
#    the model's fp32 buffers (module.bfloat16() casts them: gpt2's
#    masked_bias, a 0-dim fp32 a block; llama's rotary inv_freq,
#    head_dim / 2), counted by hand from the shapes; PyTorch's 3 bf16
#    losses within 2e-3, relative, of its fp32 run's;
#  - zerosim's bf16 measure (util/autograd.c's bf16 module, its kernels in
#    bf16, engine/ag_exec.c) equals its theory at N = 1 (both stages, both
#    models) and N = 2 (gpt2-tiny's stage 2, llama-tiny's stage 1: what
#    PyTorch cannot run here) in every field (between, peak, the peak's
#    categories, every mark, every rank's, comm), and its 3 losses are
#    within 2e-3, relative, of zerosim's own fp32 run's (the same weights and
#    batches: zerosim's seed, not PyTorch's);
#  - the figures are printed.
# Not compared with DeepSpeed itself (not installable here).
# PyTorch is looked for by tests/torch_python.sh; without it: skip (77).
# About 67 s on a 2-core machine at load 16 (59 s there without the bf16
# rows: 8 profiled runs in one python3, then 4 in each of 2 gloo ranks;
# the bf16 rows add no python, 6 zerosim measures and 4 theories; the
# LoRA rows 2 runs in each, 2 theories: about 1 s of CPU; the first
# step's rows 10 theories of 0.1 s and no run).
set -u
top=${ZS_BUILDDIR:-.}
src=${srcdir:-.}
zerosim=$top/zerosim
models=$src/report/models
[ -x "$zerosim" ] || { echo "ds_bf16_torch: $zerosim is not built" >&2; exit 99; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/zs-dsbf.XXXXXX") || exit 99
trap 'rm -rf "$tmp"' EXIT HUP INT TERM
fail() { echo "ds_bf16_torch: FAIL: $*" >&2; exit 1; }

name=ds_bf16_torch
. "$src/tests/torch_python.sh"
PYTHONDONTWRITEBYTECODE=1 PYTHONPATH="$src/tests" "$py" "$src/tests/ds_bf16_torch.py" "$models/gpt2-tiny.json" \
	"$models/llama-tiny.json" --dtype fp32,bf16 --stage 1,2 --world 1,2 --bucket 100000 --steps 3 --seq 32 \
	--batch 2 --lora "$models/llama-tiny.json" --lora-r 4 --lora-freeze blocks:0-0 >"$tmp/ref" 2>"$tmp/err" ||
	{ cat "$tmp/err" >&2; fail "tests/ds_bf16_torch.py"; }
[ "$(wc -l <"$tmp/ref")" -eq 16 ] || fail "tests/ds_bf16_torch.py wrote $(wc -l <"$tmp/ref") runs, not 16"
for model in gpt2-tiny llama-tiny; do
	for stage in 1 2; do
		run="--framework deepspeed --wrapper deepspeed --ds-reduce-bucket 100000 --seq 32 --batch 2 --steps 3
			--torch-device cpu --attn eager --torch-version 1.13 --optimizer-impl single --model $models/$model.json
			--schemes zero$stage"
		# shellcheck disable=SC2086
		{
			"$zerosim" theory $run --precision fp32 --world 1,2 --out "$tmp/t-$model-$stage.json" ||
				fail "theory $model zero$stage"
			# the first step (util/ag_ds.c's step1): its marks are --steps 1's
			"$zerosim" theory $run --precision fp32 --world 1,2 --steps 1 --out "$tmp/t1-$model-$stage.json" ||
				fail "theory $model zero$stage --steps 1"
			"$zerosim" theory $run --precision mixed --world 1,2 --out "$tmp/tb-$model-$stage.json" ||
				fail "theory $model zero$stage --precision mixed"
			"$zerosim" theory $run --precision mixed --world 1 --steps 1 --out "$tmp/tb1-$model-$stage.json" ||
				fail "theory $model zero$stage --precision mixed --steps 1"
			# bf16 measured at N = 1, and at N = 2 once a model
			world=1
			[ "$model/$stage" = gpt2-tiny/2 ] || [ "$model/$stage" = llama-tiny/1 ] && world=1,2
			"$zerosim" measure $run --precision mixed --world $world --out "$tmp/mb-$model-$stage.json" ||
				fail "measure $model zero$stage --precision mixed"
			[ $stage = 2 ] || "$zerosim" measure $run --precision fp32 --world 1 --out "$tmp/mf-$model.json" ||
				fail "measure $model zero$stage --precision fp32"
			# LoRA r 4 (q_proj, v_proj) with block 0's adapters frozen
			[ $model = llama-tiny ] && { "$zerosim" theory $run --precision fp32 --world 1,2 --lora-r 4 \
				--freeze blocks:0-0 --out "$tmp/tl-$model-$stage.json" &&
				"$zerosim" theory $run --precision fp32 --world 1,2 --lora-r 4 --freeze blocks:0-0 --steps 1 \
				--out "$tmp/tl1-$model-$stage.json" ||
				fail "theory $model zero$stage --lora-r 4 --freeze blocks:0-0"; }
		}
	done
done
"$py" - "$tmp" "$models" <<'EOF' || fail "PyTorch's allocator and zerosim (or the hand counts) differ"
import json, sys
tmp, models = sys.argv[1:]
runs = {}
for line in open(f"{tmp}/ref"):
    r = json.loads(line)
    runs[(r["model"].rsplit("/", 1)[-1][:-5], r["dtype"] + ("-lora" if r["lora"] else ""), r["stage"], r["world"])] = r
bad = 0
def agree(tag, got, t):
    """one rank's figures against zerosim's (t: its between, peak, marks)"""
    n = 0
    for what, g, w in (("between steps", got["between"], t[0]), ("peak", got["peak"], t[1])):
        if w is None and what == "between steps":  # the first step's: checked with the run's
            continue
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
def first(tag, got, t, t1, rank=None):
    """one rank's first step against zerosim's (util/ag_ds.c's step1): its
    peak, the theory's first_step_peak (t, of 3 steps; rank 0's: the
    ranks' equal where it is given) and --steps 1's peak and marks (t1,
    step 1's list); got: the reference's analyse_step(stream, 1)"""
    n = 0
    if rank is None and got["first_peak"] != t.get("first_step_peak"):
        print(f"{tag} first step's peak: PyTorch {got['first_peak']}, zerosim {t.get('first_step_peak')}")
        n += 1
    pk, mk = (t1["peak_bytes"], t1.get("marks")) if rank is None else \
        (t1["per_rank"]["peak_bytes"][rank], t1["per_rank"]["marks"][rank])
    m, k = agree(f"{tag} first step", {"between": None, "peak": got["first_peak"], "marks": got["first_marks"]},
                 (None, pk, mk))
    return n + m, k
for model in ("gpt2-tiny", "llama-tiny"):
    c = json.load(open(f"{models}/{model}.json"))
    # the trained parameters, by hand from the shape (the tied table once)
    V = c["vocab_size"]
    if c["model_type"] == "gpt2":
        d, f, n = c["n_embd"], c.get("n_inner") or 4 * c["n_embd"], c["n_layer"]
        block = 4 * d + (d * 3 * d + 3 * d) + (d * d + d) + (d * f + f) + (f * d + d)
        L = V * d + c["n_positions"] * d + n * block + 2 * d
        bufs = 4 * n  # masked_bias, 0-dim fp32, a block
        kept = 0
    else:
        d, f, n, H = c["hidden_size"], c["intermediate_size"], c["num_hidden_layers"], c["num_attention_heads"]
        hd = d // H
        kv = c.get("num_key_value_heads", H) * hd
        block = 2 * d + d * H * hd + 2 * d * kv + H * hd * d + 3 * d * f
        L = V * d * (1 if c.get("tie_word_embeddings") else 2) + n * block + d
        bufs = 4 * (hd // 2)  # LlamaRotaryEmbedding's inv_freq
        # and its fp32 tensor, which module.bfloat16() leaves to the
        # attribute original_inv_freq (modeling_llama.py at 5dd4a635)
        kept = bufs
    for stage in (1, 2):
        fp, bf, fp2 = (runs[(model, dt, stage, w)] for dt, w in (("fp32", 1), ("bf16", 1), ("fp32", 2)))
        rows = {r["world"]: r["schedule"] for r in json.load(open(f"{tmp}/t-{model}-{stage}.json"))["rows"]}
        tag = f"{model} zero{stage}"
        t = rows[1]
        bad += agree(f"{tag} fp32 N=1", fp, (t["resident_bytes"], t["peak_bytes"], t.get("marks")))[0]
        rows1 = {r["world"]: r["schedule"] for r in json.load(open(f"{tmp}/t1-{model}-{stage}.json"))["rows"]}
        nf, nfm = first(f"{tag} fp32 N=1", fp, t, rows1[1])
        bad += nf
        pr = rows[2]["per_rank"]
        if len(fp2["ranks"]) != 2:
            print(f"{tag} N=2: {len(fp2['ranks'])} ranks' figures")
            bad += 1
        for r, got in enumerate(fp2["ranks"]):
            bad += agree(f"{tag} fp32 N=2 rank {r}", got,
                         (pr["resident_bytes"][r], pr["peak_bytes"][r], pr["marks"][r]))[0]
            bad += first(f"{tag} fp32 N=2 rank {r}", got, rows[2], rows1[2], r)[0]
        tm = t.get("marks") or {}
        if fp["params"] != L or bf["params"] != L:
            print(f"{tag}: the flat buffer holds {fp['params']} (bf16 {bf['params']}) elements, not {L} by hand")
            bad += 1
        want = fp["between"] - 2 * L - bufs // 2 + kept
        if bf["between"] != want:
            print(f"{tag} bf16 between steps: {bf['between']}, not fp32's less 2 L and half the buffers "
                  f"(+ {kept} kept), {want}")
            bad += 1
        if not all(abs(x - y) <= 2e-3 * abs(y) for x, y in zip(bf["losses"], fp["losses"])) or len(bf["losses"]) != 3:
            print(f"{tag}: bf16 losses {bf['losses']} not within 2e-3 of fp32's {fp['losses']}")
            bad += 1
        # zerosim's bf16 (--precision mixed): its theory against PyTorch's
        # allocator at N = 1, its measure against its theory
        trows = {r["world"]: r["schedule"] for r in json.load(open(f"{tmp}/tb-{model}-{stage}.json"))["rows"]}
        tb = trows[1]
        nb, nmarks = agree(f"{tag} bf16 N=1", bf, (tb["resident_bytes"], tb["peak_bytes"], tb.get("marks")))
        bad += nb
        bad += first(f"{tag} bf16 N=1", bf, tb, json.load(open(f"{tmp}/tb1-{model}-{stage}.json"))["rows"][0]["schedule"])[0]
        runs_b = json.load(open(f"{tmp}/mb-{model}-{stage}.json"))["runs"]
        for mr in runs_b:
            t = trows[mr["world"]]
            mp, tp = mr["per_rank"], t["per_rank"]
            # (per rank: what both write; marks where the theory's ranks differ)
            pairs = [(k, mr.get(k), t.get(k)) for k in ("resident_bytes", "peak_bytes", "peak_breakdown",
                                                        "resident_breakdown", "marks", "comm_bytes_per_rank_per_step")]
            pairs += [(f"per_rank {k}", mp[k], tp[k]) for k in mp if k in tp or k != "marks"]
            for key, m_, t_ in pairs:
                if m_ != t_ or m_ is None:
                    print(f"{tag} bf16 N={mr['world']} {key}: measure {str(m_)[:200]}, theory {str(t_)[:200]}")
                    bad += 1
        if len(runs_b) != (2 if (model, stage) in (("gpt2-tiny", 2), ("llama-tiny", 1)) else 1):
            print(f"{tag} bf16: {len(runs_b)} measured runs")
            bad += 1
        zf = json.load(open(f"{tmp}/mf-{model}.json"))["runs"][0]["losses"]
        zb = runs_b[0]["losses"]
        if len(zb) != 3 or not all(abs(x - y) <= 2e-3 * abs(y) for x, y in zip(zb, zf)) or zb == zf:
            print(f"{tag}: zerosim's bf16 losses {zb} not within 2e-3 of its fp32's {zf} (or equal to them)")
            bad += 1
        print(f"figures, {tag}: fp32 {len(tm)} marks, between {fp['between']}, peak {fp['peak']} ({fp['peak_phase']}),"
              f" N=2 {' '.join('%d/%d' % (x['between'], x['peak']) for x in fp2['ranks'])};"
              f" first step's peak {fp['first_peak']} ({nfm} marks), N=2"
              f" {' '.join('%d' % x['first_peak'] for x in fp2['ranks'])};"
              f" bf16 between {bf['between']} (L = {L}), peak {bf['peak']} ({bf['peak_phase']}),"
              f" first step's {bf['first_peak']},"
              f" losses {' '.join('%.5f' % x for x in bf['losses'])} (fp32 {' '.join('%.5f' % x for x in fp['losses'])});"
              f" zerosim's bf16 = PyTorch's at {nmarks} marks, measure = theory at N ="
              f" {','.join(str(r['world']) for r in runs_b)}, losses {' '.join('%.5f' % x for x in zb)}"
              f" (fp32 {' '.join('%.5f' % x for x in zf)})")
# LoRA r 4 on llama-tiny's q_proj and v_proj, block 0's adapters frozen
# (DeepSpeed's engine over PEFT's model: the trainable parameters, block
# 1's adapters alone, in the flat buffer, stage_1_and_2.py 305-315):
# zerosim's theory against the allocator at N = 1 and 2, every rank, and
# the flat buffer's elements by hand, r (d + q) + r (d + kv)
c = json.load(open(f"{models}/llama-tiny.json"))
d, H = c["hidden_size"], c["num_attention_heads"]
kv, r = c["num_key_value_heads"] * (d // H), 4
L = r * (d + d) + r * (d + kv)
for stage in (1, 2):
    tag = f"llama-tiny zero{stage} LoRA, block 0's adapters frozen"
    rows = {x["world"]: x["schedule"] for x in json.load(open(f"{tmp}/tl-llama-tiny-{stage}.json"))["rows"]}
    one, two = runs[("llama-tiny", "fp32-lora", stage, 1)], runs[("llama-tiny", "fp32-lora", stage, 2)]
    t = rows[1]
    nb, nmarks = agree(f"{tag} N=1", one, (t["resident_bytes"], t["peak_bytes"], t.get("marks")))
    bad += nb
    rows1 = {x["world"]: x["schedule"] for x in json.load(open(f"{tmp}/tl1-llama-tiny-{stage}.json"))["rows"]}
    bad += first(f"{tag} N=1", one, t, rows1[1])[0]
    pr = rows[2]["per_rank"]
    for k, got in enumerate(two["ranks"]):
        bad += agree(f"{tag} N=2 rank {k}", got, (pr["resident_bytes"][k], pr["peak_bytes"][k], pr["marks"][k]))[0]
        bad += first(f"{tag} N=2 rank {k}", got, rows[2], rows1[2], k)[0]
    if len(two["ranks"]) != 2 or one["params"] != L:
        print(f"{tag}: {len(two['ranks'])} ranks' figures, the flat buffer {one['params']} elements, not {L} by hand")
        bad += 1
    print(f"figures, {tag}: between {one['between']}, peak {one['peak']} ({one['peak_phase']}), {nmarks} marks,"
          f" first step's peak {one['first_peak']},"
          f" N=2 {' '.join('%d/%d' % (x['between'], x['peak']) for x in two['ranks'])}; flat buffer {L} elements")
sys.exit(bad != 0)
EOF
echo "ok: fp32: zerosim's --wrapper deepspeed = PyTorch 1.13's allocator to the byte at N = 1 and 2 (between, peak," \
	"every mark, every rank; llama-tiny also under LoRA with block 0's adapters frozen);" \
	"bf16 (--precision mixed): zerosim's theory = PyTorch 1.13's allocator to the byte at N = 1 (between, peak, every mark)," \
	"measure = theory at N = 1 and 2, zerosim's and PyTorch's losses within 2e-3 of their fp32 runs'"
exit 0

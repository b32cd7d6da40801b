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
#  - bf16 with frozen parameters and LoRA (docs/schedule.md, "bf16 with
#    frozen parameters and LoRA": module.bfloat16() after the freezing and
#    PEFT's wrapping makes every parameter bf16, the frozen ones and the
#    adapters too; the flat buffer the trainable ones): gpt2-tiny with
#    --freeze embeddings and llama-tiny under LoRA r 4 with block 0's
#    adapters frozen, stages 1 and 2, and llama-tiny LoRA with
#    --lora-dropout 0.1 (stage 1): zerosim's theory = PyTorch's allocator
#    at N = 1 (between, peak, every mark), the measure = the theory
#    (N = 1, and 2 once a model), the flat buffer's elements and the bytes
#    between steps by hand, the bf16 losses within 2e-3 of the fp32 runs'
#    (PyTorch's and zerosim's), the dropout run's first loss the
#    undropped one's, bitwise (lora_B is zeros);
#  - bf16 under gradient_accumulation_steps 2 (gpt2-tiny, `--grad-accum
#    2`; docs/schedule.md, "bf16 under gradient accumulation": the
#    gradients accumulate in bf16), stages 1 and 2, and its fp32 run at
#    stage 1: zerosim's theory = PyTorch's allocator at N = 1 (between, the
#    peak, every mark of both micro-steps), measure = theory (N = 1, and 2
#    at stage 1), between steps the K = 1 run's + 1,024 B by hand, the
#    bf16 losses within 2e-3 of fp32's;
#  - bf16 under --recompute full (gpt2-tiny, llama-tiny; stages 1 and 2):
#    theory = PyTorch's allocator at N = 1 (every mark, the reruns'
#    too), measure = theory (N = 1, and 2 once a model), the losses the
#    non-recomputed bf16 runs' bitwise (PyTorch's and zerosim's);
#  - the last step's allocations and frees, in order, from the fp32
#    gradient partition to the step's end (the update, the engine's
#    zero_grad: the ZeRO optimizer's own, stage_1_and_2.py 1638-1651, none
#    of torch.optim's 292-byte record_function, and the loop's end),
#    PyTorch's against zerosim's measure's --timeline: gpt2-tiny and
#    llama-tiny, fp32 stage 1, bf16 stages 1 and 2, N = 1 (no mark or peak
#    sees that transient; fails with it on either side alone);
#  - the figures are printed.
# Not compared with DeepSpeed itself (not installable here).
# PyTorch is looked for by tests/torch_python.sh; without it: skip (77).
# About 67 s on a 2-core machine at load 16 (59 s there without the bf16
# rows: 8 profiled runs in one python3, then 4 in each of 2 gloo ranks;
# the bf16 rows add no python, 6 zerosim measures and 4 theories; the
# LoRA rows 2 runs in each, 2 theories: about 1 s of CPU; the first
# step's rows 10 theories of 0.1 s and no run). The frozen,
# LoRA, accumulation and recompute bf16 rows add 13 profiled runs to the
# same python3 (N = 1), 11 theories and 14 measures.
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
	--batch 2 --lora "$models/llama-tiny.json" --lora-r 4 --lora-freeze blocks:0-0 --lora-dtype fp32,bf16 \
	--lora-dropout 0.1 --freeze "$models/gpt2-tiny.json=embeddings" --accum "$models/gpt2-tiny.json=2" \
	--recompute "$models/gpt2-tiny.json" --recompute "$models/llama-tiny.json" >"$tmp/ref" 2>"$tmp/err" ||
	{ cat "$tmp/err" >&2; fail "tests/ds_bf16_torch.py"; }
[ "$(wc -l <"$tmp/ref")" -eq 29 ] || fail "tests/ds_bf16_torch.py wrote $(wc -l <"$tmp/ref") runs, not 29"
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
			"$zerosim" measure $run --precision mixed --world $world --timeline --out "$tmp/mb-$model-$stage.json" ||
				fail "measure $model zero$stage --precision mixed"
			[ $stage = 2 ] || "$zerosim" measure $run --precision fp32 --world 1 --timeline --out "$tmp/mf-$model.json" ||
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
# DeepSpeed's bf16 over frozen parameters and LoRA: gpt2-tiny with its
# embeddings frozen (g); llama-tiny under LoRA r 4 with block 0's adapters
# frozen (l), both stages, measured at N = 1 and 2 once a model, and with
# lora_dropout 0.1, nothing else frozen (d, stage 1); gpt2-tiny under
# --grad-accum 2 (a), measured at N = 1 and 2 at stage 1; gpt2-tiny (r)
# and llama-tiny (q) under --recompute full, each measured at N = 2 once;
# the fp32 measures of g, l and a for the losses, and g's and a's fp32
# theories
for stage in 1 2; do
	for row in g l d a r q; do
		world=1
		case $row/$stage in
		g/*) opts="--model $models/gpt2-tiny.json --freeze embeddings"; [ $stage = 2 ] && world=1,2 ;;
		l/*) opts="--model $models/llama-tiny.json --lora-r 4 --freeze blocks:0-0"; [ $stage = 1 ] && world=1,2 ;;
		d/1) opts="--model $models/llama-tiny.json --lora-r 4 --lora-dropout 0.1" ;;
		a/*) opts="--model $models/gpt2-tiny.json --grad-accum 2"; [ $stage = 1 ] && world=1,2 ;;
		r/*) opts="--model $models/gpt2-tiny.json --recompute full"; [ $stage = 2 ] && world=1,2 ;;
		q/*) opts="--model $models/llama-tiny.json --recompute full"; [ $stage = 1 ] && world=1,2 ;;
		*) continue ;;
		esac
		run="--framework deepspeed --wrapper deepspeed --ds-reduce-bucket 100000 --seq 32 --batch 2 --steps 3
			--torch-device cpu --attn eager --torch-version 1.13 --optimizer-impl single --schemes zero$stage $opts"
		# shellcheck disable=SC2086
		{
			"$zerosim" theory $run --precision mixed --world 1,2 --out "$tmp/tb$row-$stage.json" ||
				fail "theory --precision mixed $opts zero$stage"
			"$zerosim" measure $run --precision mixed --world $world --out "$tmp/mb$row-$stage.json" ||
				fail "measure --precision mixed $opts zero$stage"
			[ $row/$stage = d/1 ] || [ $row = r ] || [ $row = q ] || [ $stage = 2 ] ||
				"$zerosim" measure $run --precision fp32 --world 1 --out "$tmp/mf$row.json" ||
				fail "measure --precision fp32 $opts"
			[ $row/$stage != g/1 ] && [ $row/$stage != a/1 ] || "$zerosim" theory $run --precision fp32 --world 1 --out "$tmp/tf$row.json" ||
				fail "theory --precision fp32 $opts"
		}
	done
done
"$py" - "$tmp" "$models" <<'EOF' || fail "PyTorch's allocator and zerosim (or the hand counts) differ"
import json, sys
tmp, models = sys.argv[1:]
runs = {}
for line in open(f"{tmp}/ref"):
    r = json.loads(line)
    kind = ("-lora" if r["lora"] else "") + ("-drop" if r["lora_dropout"] else "") + \
        ("-freeze" if r["freeze"] and not r["lora"] else "") + ("-accum" if r["accum"] > 1 else "") + \
        ("-recompute" if r["recompute"] != "none" else "")
    runs[(r["model"].rsplit("/", 1)[-1][:-5], r["dtype"] + kind, r["stage"], r["world"])] = r
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
def measured(tag, runs_m, trows):
    """zerosim's measure against its theory, every field, each measured N"""
    n = 0
    for mr in runs_m:
        t = trows[mr["world"]]
        mp, tp = mr["per_rank"], t["per_rank"]
        # (per rank: what both write; marks where the theory's ranks differ)
        pairs = [(k, mr.get(k), t.get(k)) for k in ("resident_bytes", "peak_bytes", "peak_breakdown",
                                                    "resident_breakdown", "marks", "comm_bytes_per_rank_per_step")]
        pairs += [(f"per_rank {k}", mp[k], tp[k]) for k in mp if k in tp or k != "marks"]
        for key, m_, t_ in pairs:
            if m_ != t_ or m_ is None:
                print(f"{tag} N={mr['world']} {key}: measure {str(m_)[:200]}, theory {str(t_)[:200]}")
                n += 1
    return n
def held(tag, got, row, stage):
    """a new bf16 row (tb/mb ROW-STAGE.json): zerosim's theory against
    PyTorch's run `got` at N = 1, its measure against its theory; returns
    (failures, marks compared, the measured runs, the theory's rows)"""
    trows = {x["world"]: x["schedule"] for x in json.load(open(f"{tmp}/tb{row}-{stage}.json"))["rows"]}
    n, nmarks = agree(f"{tag} N=1", got, (trows[1]["resident_bytes"], trows[1]["peak_bytes"], trows[1].get("marks")))
    runs_m = json.load(open(f"{tmp}/mb{row}-{stage}.json"))["runs"]
    return n + measured(tag, runs_m, trows), nmarks, runs_m, trows
def close(a, b):
    """3 losses each, within 2e-3 relative"""
    return len(a) == 3 and len(b) == 3 and all(abs(x - y) <= 2e-3 * abs(y) for x, y in zip(a, b))
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
def optimizer_tail(tag, got, mrun):
    """the last step's allocations and frees (+bytes, -bytes), in order,
    from the fp32 gradient partition's (the first of 4 S bytes) to the
    step's end: the update, the engine's zero_grad (the ZeRO optimizer's
    own: none of torch.optim's record_function handles, 4 + 288 B) and
    the loop's end; PyTorch's (got, N = 1) against zerosim's measure's
    --timeline (mrun: its optimizer phase, rank 0). The norm before it is
    left out: its stand-ins' small allocations come in another order.
    Returns (failures, events compared)."""
    s4 = 4 * got["params"]
    z = [e["bytes"] if e["op"] == "alloc" else -e["bytes"] for e in mrun["timeline"] or []
         if e["phase"] == "optimizer" and e["op"] in ("alloc", "free")]
    a, b = (x[x.index(s4):] if s4 in x else None for x in (got["optimizer_events"], z))
    if a is None or a != b:
        print(f"{tag} the optimizer's allocations and frees from the {s4} B gradient partition on:"
              f" PyTorch {a and a[-12:]}, zerosim {b and b[-12:]} (the last 12 of {a and len(a)}, {b and len(b)})")
        return 1, 0
    return 0, len(a)
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
        bad += measured(f"{tag} bf16", runs_b, trows)
        if len(runs_b) != (2 if (model, stage) in (("gpt2-tiny", 2), ("llama-tiny", 1)) else 1):
            print(f"{tag} bf16: {len(runs_b)} measured runs")
            bad += 1
        mf = json.load(open(f"{tmp}/mf-{model}.json"))["runs"][0]
        no, nev = optimizer_tail(f"{tag} bf16 N=1", bf, next(x for x in runs_b if x["world"] == 1))
        bad += no
        if stage == 1:
            no, nevf = optimizer_tail(f"{tag} fp32 N=1", fp, mf)
            bad += no
            nev = f"{nevf} (fp32), {nev}"
        zf = mf["losses"]
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
              f" (fp32 {' '.join('%.5f' % x for x in zf)}); the optimizer's last {nev} allocations and frees"
              f" PyTorch's, in order")
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
# DeepSpeed's bf16 over frozen parameters and LoRA (--precision mixed):
# module.bfloat16() after the freezing and PEFT's wrapping casts every
# parameter, frozen ones and the adapters too, and the flat buffer holds
# the trainable ones alone. By hand: gpt2-tiny's frozen embeddings (the
# tied wte and wpe, (V + P) d elements) leave the flat buffer and take
# their 12 bytes an element of fp32 partition and Adam's moments with
# them, keeping their 2 bf16 bytes as module tensors; LoRA's flat buffer
# is block 1's adapters as in fp32, and between steps bf16 holds fp32's
# less 2 bytes of every parameter (base, frozen adapters and trainable
# ones: all bf16 now) and half the buffers, less the kept inv_freq.
g = json.load(open(f"{models}/gpt2-tiny.json"))
gd, gfrozen = g["n_embd"], (g["vocab_size"] + g["n_positions"]) * g["n_embd"]
gL = g["vocab_size"] * gd + g["n_positions"] * gd + 2 * gd + g["n_layer"] * (
    4 * gd + (gd * 3 * gd + 3 * gd) + (gd * gd + gd) + 2 * (4 * gd * gd) + 4 * gd + gd)
c = json.load(open(f"{models}/llama-tiny.json"))
d, H, n_l = c["hidden_size"], c["num_attention_heads"], c["num_hidden_layers"]
kv, r = c["num_key_value_heads"] * (d // H), 4
ad = r * (d + d) + r * (d + kv)  # one block's adapters
hd = d // H
# llama-tiny's base parameters (untied), by hand as above
Lb = c["vocab_size"] * d * 2 + d + n_l * (2 * d + d * H * hd + 2 * d * kv + H * hd * d + 3 * d * c["intermediate_size"])
for model, kind, row, Lt in (("gpt2-tiny", "freeze", "g", gL - gfrozen), ("llama-tiny", "lora", "l", ad)):
    for stage in (1, 2):
        tag = f"{model} zero{stage} bf16 {'embeddings frozen' if row == 'g' else 'LoRA, block 0 adapters frozen'}"
        bf, fp = runs[(model, f"bf16-{kind}", stage, 1)], runs[(model, f"fp32-{kind}", 1 if row == "g" else stage, 1)]
        nb, nmarks, runs_m, trows = held(tag, bf, row, stage)
        bad += nb
        if len(runs_m) != (2 if (row, stage) in (("g", 2), ("l", 1)) else 1):
            print(f"{tag}: {len(runs_m)} measured runs")
            bad += 1
        if bf["params"] != Lt:
            print(f"{tag}: the flat buffer holds {bf['params']} elements, not {Lt} by hand")
            bad += 1
        if row == "g":
            unfrozen = runs[(model, "bf16", stage, 1)]
            want = unfrozen["between"] - 12 * gfrozen
            # and PyTorch's fp32 run (stage 1) against zerosim's fp32 theory
            tf = json.load(open(f"{tmp}/tfg.json"))["rows"][0]["schedule"]
            bad += agree(f"{tag} (its fp32 run)", fp, (tf["resident_bytes"], tf["peak_bytes"], tf.get("marks")))[0]
        else:
            # (inv_freq: its bf16 2 bytes an element and the fp32 original kept)
            want = fp["between"] - 2 * (Lb + n_l * ad) + 2 * (hd // 2)
        if bf["between"] != want:
            print(f"{tag} between steps: {bf['between']}, not {want} by hand")
            bad += 1
        if not close(bf["losses"], fp["losses"]):
            print(f"{tag}: PyTorch's bf16 losses {bf['losses']} not within 2e-3 of its fp32's {fp['losses']}")
            bad += 1
        zf = json.load(open(f"{tmp}/mf{row}.json"))["runs"][0]["losses"]
        zb = runs_m[0]["losses"]
        if not close(zb, zf) or zb == zf:
            print(f"{tag}: zerosim's bf16 losses {zb} not within 2e-3 of its fp32's {zf} (or equal to them)")
            bad += 1
        print(f"figures, {tag}: between {bf['between']}, peak {bf['peak']} ({bf['peak_phase']}), {nmarks} marks,"
              f" flat buffer {Lt}; losses {' '.join('%.5f' % x for x in bf['losses'])}"
              f" (fp32 {' '.join('%.5f' % x for x in fp['losses'])}); zerosim's {' '.join('%.5f' % x for x in zb)}"
              f" (fp32 {' '.join('%.5f' % x for x in zf)}), measured at N = {','.join(str(x['world']) for x in runs_m)}")
# gradient_accumulation_steps 2 (gpt2-tiny): with bf16 and ZeRO and no
# grad_accum_dtype the gradients accumulate in bf16 (engine.py 1017-1021:
# grad_accum_dtype the model's; stage_1_and_2.py 284-294: no separate
# accumulation buffer): stage 1 in the parameters' bf16 .grad
# (AccumulateGrad), reduced at the boundary alone (engine.py 2055-2059);
# stage 2 reducing every micro-step and adding each new bf16 partition
# into averaged_gradients in place (792-800); fp32 only at the step's
# .to(fp32) (1888-1897). By hand: between steps the K = 1 run's plus the
# second micro-batch's int64 ids and labels, 2 B T 8 bytes.
for stage in (1, 2):
    tag = f"gpt2-tiny zero{stage} bf16 --grad-accum 2"
    bf, fp, one = (runs[("gpt2-tiny", k, s_, 1)] for k, s_ in (("bf16-accum", stage), ("fp32-accum", 1), ("bf16", stage)))
    nb, nmarks, runs_m, trows = held(tag, bf, "a", stage)
    bad += nb
    if stage == 1:
        tf = json.load(open(f"{tmp}/tfa.json"))["rows"][0]["schedule"]
        bad += agree(f"{tag} (its fp32 run)", fp, (tf["resident_bytes"], tf["peak_bytes"], tf.get("marks")))[0]
    if len(runs_m) != (2 if stage == 1 else 1) or not any(k.endswith("@1") for k in trows[1].get("marks") or {}):
        print(f"{tag}: {len(runs_m)} measured runs, or no micro-step 1 marks")
        bad += 1
    if bf["between"] != one["between"] + 2 * 32 * 8 * 2:
        print(f"{tag} between steps: {bf['between']}, not K = 1's {one['between']} + 1024 by hand")
        bad += 1
    zf = json.load(open(f"{tmp}/mfa.json"))["runs"][0]["losses"]
    zb = runs_m[0]["losses"]
    if not close(bf["losses"], fp["losses"]) or not close(zb, zf) or zb == zf:
        print(f"{tag}: losses, PyTorch's bf16 {bf['losses']} against fp32 {fp['losses']}, zerosim's {zb} against {zf}")
        bad += 1
    print(f"figures, {tag}: between {bf['between']}, peak {bf['peak']} ({bf['peak_phase']}), {nmarks} marks;"
          f" fp32 between {fp['between']}, peak {fp['peak']} ({fp['peak_phase']}); losses"
          f" {' '.join('%.5f' % x for x in bf['losses'])} (fp32 {' '.join('%.5f' % x for x in fp['losses'])});"
          f" zerosim's {' '.join('%.5f' % x for x in zb)} (fp32 {' '.join('%.5f' % x for x in zf)}),"
          f" measured at N = {','.join(str(x['world']) for x in runs_m)}")
# --recompute full (Hugging Face's gradient checkpointing over the bf16
# module; DeepSpeed's hooks fire in each rerun): the bytes against the
# allocator, the measure against the theory, and the losses the
# non-recomputed bf16 runs' bitwise (PyTorch's and zerosim's: the rerun
# replays the forward, its dropout's RNG state restored)
for model, row in (("gpt2-tiny", "r"), ("llama-tiny", "q")):
    for stage in (1, 2):
        tag = f"{model} zero{stage} bf16 --recompute full"
        bf, plain = runs[(model, "bf16-recompute", stage, 1)], runs[(model, "bf16", stage, 1)]
        nb, nmarks, runs_m, trows = held(tag, bf, row, stage)
        bad += nb
        zplain = json.load(open(f"{tmp}/mb-{model}-{stage}.json"))["runs"][0]["losses"]
        if bf["losses"] != plain["losses"] or runs_m[0]["losses"] != zplain or \
                len(runs_m) != (2 if (row, stage) in (("r", 2), ("q", 1)) else 1):
            print(f"{tag}: losses {bf['losses']} (not recomputed {plain['losses']}), zerosim's {runs_m[0]['losses']}"
                  f" (not recomputed {zplain}), {len(runs_m)} measured runs")
            bad += 1
        print(f"figures, {tag}: between {bf['between']}, peak {bf['peak']} ({bf['peak_phase']}), {nmarks} marks;"
              f" losses bitwise the plain bf16 run's (PyTorch's and zerosim's), measured at N ="
              f" {','.join(str(x['world']) for x in runs_m)}")
# lora_dropout 0.1 (stage 1, no adapter frozen): PEFT's nn.Dropout over
# the adapted layers' bf16 input, its mask and output bf16; the first
# loss is the base's (lora_B is zeros), the bf16 LoRA run's, bitwise
tag = "llama-tiny zero1 bf16 LoRA, lora_dropout 0.1"
bf, ref = runs[("llama-tiny", "bf16-lora-drop", 1, 1)], runs[("llama-tiny", "bf16-lora", 1, 1)]
nb, nmarks, runs_m, trows = held(tag, bf, "d", 1)
bad += nb
zl = json.load(open(f"{tmp}/mbl-1.json"))["runs"][0]["losses"]
if bf["params"] != n_l * ad or len(bf["losses"]) != 3 or bf["losses"][0] != ref["losses"][0] or \
        runs_m[0]["losses"][0] != zl[0] or runs_m[0]["losses"] == zl:
    print(f"{tag}: flat buffer {bf['params']} (not {n_l * ad}), losses {bf['losses']} (the first not"
          f" {ref['losses'][0]}?), zerosim's {runs_m[0]['losses']} (the first not {zl[0]}, or all equal?)")
    bad += 1
print(f"figures, {tag}: between {bf['between']}, peak {bf['peak']} ({bf['peak_phase']}), {nmarks} marks;"
      f" losses {' '.join('%.5f' % x for x in bf['losses'])}; zerosim's"
      f" {' '.join('%.5f' % x for x in runs_m[0]['losses'])}")
sys.exit(bad != 0)
EOF
echo "ok: fp32: zerosim's --wrapper deepspeed = PyTorch 1.13's allocator to the byte at N = 1 and 2 (between, peak," \
	"every mark, every rank; llama-tiny also under LoRA with block 0's adapters frozen);" \
	"bf16 with --freeze embeddings (gpt2-tiny), LoRA with block 0's adapters frozen and LoRA with dropout" \
	"(llama-tiny), --grad-accum 2 (gpt2-tiny), --recompute full (both): theory = PyTorch's allocator at N = 1," \
	"measure = theory;" \
	"bf16 (--precision mixed): zerosim's theory = PyTorch 1.13's allocator to the byte at N = 1 (between, peak, every mark)," \
	"measure = theory at N = 1 and 2, zerosim's and PyTorch's losses within 2e-3 of their fp32 runs'"
exit 0

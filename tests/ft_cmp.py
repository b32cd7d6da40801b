"""ft_cmp.py REF THEORY MEASURE LABEL [--lora] [--buckets] [--comm]: zerosim's
theory (its schedule) and measure (every rank of every run) of one case
against the reference's JSON (tests/hf_torch.py or tests/ft_torch.py):
bytes between steps, the steady step's peak and every mark zerosim names,
to the byte, and under accumulation (the reference's grad_accum K > 1)
every micro-step marked (phase:backward@k); exit 1 with the differences,
else 0. Used by tests/hf_torch.sh, tests/ft_accum.sh, tests/ft_freeze.sh,
tests/ft_lora.sh and tests/ft_fsdp.sh.
THEORY "-": the theory hf_torch.py --zerosim wrote into REF ("zerosim":
resident, peak, marks). MEASURE "-": no measure of the case.
--lora: also the reference's trainable set is the adapters'
(tests/ft_torch.py's persistent split: Adam's exp_avg and exp_avg_sq,
2 x 4 B a trainable value, and a 4 B step per trainable adapter tensor,
none for an adapter --freeze froze; no frozen parameter's grad), theory.json's trainable_params is PEFT's count (the
reference's), and measure's params is theory's (the base and the adapters).
--buckets: also DDP's buckets, the reducer's rebuilt ones in REF
(hf_torch.py --ddp's "ddp_buckets", bytes each) against the "buckets"
blocks of each measure's timeline (zerosim measure --timeline).
--comm: also the theory's comm bytes a rank a step equal to each N > 1
measure's.
--first: also the first step's peak (the plain loop's first step, a list
of its own: util/autograd.h's step1), the theory's and each measure's
first_step_peak, equal to the reference's step_peaks[0]."""
import json
import sys

d = json.load(open(sys.argv[1]))
label = sys.argv[4]
lora, buckets, comm = "--lora" in sys.argv[5:], "--buckets" in sys.argv[5:], "--comm" in sys.argv[5:]
first = "--first" in sys.argv[5:]
bad = []
if sys.argv[2] == "-":
    z = d.get("zerosim") or {}
    if "resident" not in z:
        print(f"FAIL: {label}: zerosim theory failed: {z}")
        sys.exit(1)
    t = {"resident_bytes": z["resident"], "peak_bytes": z["peak"], "marks": z.get("marks"),
         "first_step_peak": z.get("first_step_peak")}
else:
    t = json.load(open(sys.argv[2]))["rows"][0]["schedule"]
runs = json.load(open(sys.argv[3]))["runs"] if sys.argv[3] != "-" else []
steady, ref = d["between_steps"], dict(d["boundaries"])
# the run's peak: the steady step's, or the set-up's where that is higher
# (LoRA under DDP at short sequences: DDP's broadcast copy of the frozen
# base; tests/ft_lora.sh's seq 16 row), or the first step's where that is
# (none is so far: where zerosim has no step-1 list, the steady step's
# peak stands for the run's only while PyTorch's step 1 peaks no higher,
# and this holds it; docs/schedule.md "The first step"); a mixture's,
# whose steps each route their own way, the most of its steps' (the theory
# walks each step's list after the first; 1.13's first step holds no Adam
# state yet)
step_peaks = d.get("step_peaks") or []
peak = max([d["peak"], d.get("setup_peak", 0)] + step_peaks[:1] + (step_peaks[1:] if "routing" in d else []))
if len(set(steady)) != 1 or steady[-1] != t["resident_bytes"]:
    bad.append(f"theory between steps {t['resident_bytes']:,} against {steady} "
               f"({steady[-1] - t['resident_bytes']:+,} B)")
if peak != t["peak_bytes"]:
    bad.append(f"theory peak {t['peak_bytes']:,} against {peak:,} ({peak - t['peak_bytes']:+,} B)")
marks = t.get("marks") or {}
for k, v in marks.items():
    if k not in ref:
        bad.append(f"theory mark {k}: not in the reference's step")
    elif ref[k] != v:
        bad.append(f"theory mark {k}: {v:,} against {ref[k]:,} ({ref[k] - v:+,} B)")
if not marks:
    bad.append("theory gave no marks")
first_ref = (d.get("step_peaks") or [None])[0]
if first and not isinstance(first_ref, int):
    # None against None would pass: the reference must have its step 1
    bad.append(f"--first: the reference has no first step's peak (step_peaks {d.get('step_peaks')!r})")
    first_ref = -1
if first and t.get("first_step_peak") != first_ref:
    bad.append(f"theory first step's peak {t.get('first_step_peak')} against {first_ref:,}")
K = d.get("grad_accum", 1)
if K > 1 and not all(f"phase:backward@{k}" in marks for k in range(K)):
    bad.append(f"theory: not every one of the {K} micro-steps is marked")
if buckets and "ddp_buckets" not in d:
    bad.append("--buckets: the reference has no DDP buckets")
if buckets and not runs:
    bad.append("--buckets: no measure to compare them with")
for r in runs:
    pr = r["per_rank"]
    for k, (res, pk) in enumerate(zip(pr["resident_bytes"], pr["peak_bytes"])):
        if res != steady[-1] or pk != peak:
            bad.append(f"measure N={r['world']} rank {k}: between steps {res:,}, peak {pk:,}")
    for k, v in (r.get("marks") or {}).items():
        if ref.get(k) != v:
            bad.append(f"measure N={r['world']} mark {k}: {v:,} against {ref.get(k)}")
    if not r.get("marks"):
        bad.append(f"measure N={r['world']} gave no marks")
    if first and r.get("first_step_peak") != first_ref:
        bad.append(f"measure N={r['world']} first step's peak {r.get('first_step_peak')} against {first_ref:,}")
    if comm and r["world"] > 1 and r["comm_bytes_per_rank_per_step"] != t.get("comm_bytes_per_rank_per_step"):
        bad.append(f"measure N={r['world']} comm {r['comm_bytes_per_rank_per_step']:,} against the theory's "
                   f"{t.get('comm_bytes_per_rank_per_step')}")
    if buckets:
        zb = [e["bytes"] for e in (r.get("timeline_live") or []) if e["category"] == "buckets"]
        if zb != d.get("ddp_buckets"):
            bad.append(f"measure N={r['world']} buckets {zb} against PyTorch's {d.get('ddp_buckets')}")
extra = ""
if lora:
    p, n = d["persistent"], len(d["lora"]["targets"])
    # Adam's state is a step counter (4 B) per trainable adapter tensor
    # beside exp_avg and exp_avg_sq in the adapters' dtype (bf16 under
    # --lora-dtype bf16, TRL's cast; fp32 else):
    # lora_A and lora_B of each of the n adapted layers, less the adapters
    # --freeze froze (the reference's frozen_names: they get no state, no
    # grad); and --freeze over PEFT's model freezes adapters alone, at
    # least one and not all (tests/ft_torch.py freeze_names)
    adapters = {f"{t}.lora_{ab}.default.weight" for t in d["lora"]["targets"] for ab in "AB"}
    frozen_adapters = adapters & set(d.get("frozen_names") or [])
    esz = 2 if d["lora"].get("dtype") == "bf16" else 4
    steps = (p["adam_trainable"] - 2 * esz * d["trainable"]) / 4
    if steps != 2 * n - len(frozen_adapters) or p["grads_frozen"] or \
            bool(d.get("freeze")) != bool(frozen_adapters) or len(frozen_adapters) == 2 * n:
        bad.append(f"the reference's trainable set is not the adapters' less the {len(frozen_adapters)} frozen: "
                   f"{p}, {d['trainable']} trainable, {steps:g} step counters for {2 * n} adapter tensors")
    extra = f", {d['trainable']:,} trainable in {n} layers"
    # theory.json's Ψ_t and measure's Ψ: PEFT's count (print_trainable_parameters'), the base and the adapters
    if sys.argv[2] != "-":
        tj = json.load(open(sys.argv[2]))
        if tj.get("trainable_params") != d["trainable"]:
            bad.append(f"theory's trainable_params {tj.get('trainable_params')}, PEFT's {d['trainable']}")
        if sys.argv[3] != "-" and json.load(open(sys.argv[3]))["config"]["params"] != tj["params"]:
            bad.append(f"measure's params {json.load(open(sys.argv[3]))['config']['params']}, theory's {tj['params']}")
if first:
    extra += f", first step's peak {first_ref:,}"
if buckets:
    extra += f", DDP's {len(d.get('ddp_buckets') or [])} bucket(s) {d.get('ddp_buckets')}"
against = "theory and measure" if runs else "theory"
if runs:
    against += f" (N = {','.join(str(r['world']) for r in runs)})"
phase = f"{d['peak_phase']}, after {d['peak_after']}" if peak == d["peak"] else \
    "setup" if peak == d.get("setup_peak") else "step 1" if step_peaks[:1] == [peak] else "an earlier step"
print(f"{'FAIL' if bad else 'ok'}: {label}: between steps {steady[-1]:,}, peak {peak:,} ({phase}), "
      f"{len(marks)} marks{extra}: PyTorch {d['torch']}, zerosim's {against} "
      f"{'differ' if bad else 'equal to the byte'}" + "".join("\n  " + b for b in bad))
sys.exit(1 if bad else 0)

"""zero1_cmp.py REF THEORY MEASURE LABEL [--first]: torch's zero1
(ZeroRedundancyOptimizer over DDP; tests/hf_torch.py --ddp N --zero1 or
tests/ft_torch.py --world N --zero1: every rank's figures in "ranks"),
or FSDP with use_orig_params (tests/ft_torch.py --fsdp
--fsdp-orig-params: each rank's too; its weights not compared, each
rank's shard its own)
against zerosim's theory and measure of --wrapper ddp --schemes zero1 at
the same N: every rank's bytes between steps, peak and every mark
(per_rank), the binding rank (the highest peak, the first of equals), and
PyTorch's ranks ending with equal weights; exit 1 if not. Used by
tests/hf_torch.sh and tests/ft_zero1.sh.
--first: also the first step's peak (a list of its own under DDP:
util/autograd.h's step1), the theory's and the measure's first_step_peak
(the binding rank's) equal to that rank's step_peaks[0] (tests/hf_torch.py
--ddp N --zero1: each rank's in "ranks")."""
import json
import sys

d, t, m, label = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))["rows"][0]["schedule"], \
    json.load(open(sys.argv[3]))["runs"][0], sys.argv[4]
bad = []
ranks = d["ranks"]
N = len(ranks)
# hf_torch.py: each rank's digest of its weights; ft_torch.py: whether every
# rank's trained parameters hash the same
if "trained_equal_across_ranks" in d:
    equal = d["trained_equal_across_ranks"]
else:
    equal = len({r["zero1"]["weights"] for r in ranks}) == 1
# (ft_torch.py --fsdp: None, each rank's shard its own, not compared)
if equal is None and not d.get("fsdp"):
    bad.append("the reference says nothing of its ranks' weights")
if equal is False:
    bad.append("PyTorch's ranks end with different weights")
for side, per in (("theory", t["per_rank"]), ("measure", m["per_rank"])):
    if len(per.get("marks") or []) != N:
        bad.append(f"{side}: {len(per.get('marks') or [])} ranks' marks for {N}")
        continue
    for k, r in enumerate(ranks):
        st = r["between_steps"]
        if len(set(st)) != 1 or st[-1] != per["resident_bytes"][k]:
            bad.append(f"{side} rank {k}: between steps {st} against {per['resident_bytes'][k]:,}")
        if r["peak"] != per["peak_bytes"][k]:
            bad.append(f"{side} rank {k}: peak {r['peak']:,} against {per['peak_bytes'][k]:,}")
        ref = dict(r["boundaries"])
        for lab, v in per["marks"][k].items():
            if ref.get(lab) != v:
                bad.append(f"{side} rank {k}: mark {lab}: {ref.get(lab)} against {v:,}")
        if not per["marks"][k]:
            bad.append(f"{side} rank {k}: no marks")
b = max(range(N), key=lambda k: (ranks[k]["peak"], -k))
for side, o in (("theory", t), ("measure", m)):
    if o["peak_bytes"] != ranks[b]["peak"] or o.get("peak_rank") != b:
        bad.append(f"{side}: binding rank {o.get('peak_rank')} peak {o['peak_bytes']:,}, PyTorch's rank {b} "
                   f"{ranks[b]['peak']:,}")
first = (ranks[b].get("step_peaks") or [None])[0] if "--first" in sys.argv[5:] else None
if "--first" in sys.argv[5:] and not isinstance(first, int):
    # None against None would pass: the reference must have its step 1
    bad.append(f"--first: PyTorch's rank {b} has no first step's peak")
for side, o in (("theory", t), ("measure", m)):
    if "--first" in sys.argv[5:] and o.get("first_step_peak") != first:
        bad.append(f"{side}: first step's peak {o.get('first_step_peak')} against PyTorch's rank {b} {first}")
n = len(t["per_rank"].get("marks", [{}])[0])
res = ", ".join(f"{r['between_steps'][-1]:,}" for r in ranks)
pks = ", ".join(f"{r['peak']:,}" for r in ranks)
print(f"{'FAIL' if bad else 'ok'}: {label}: N = {N}, every rank's between steps "
      f"({res}), peak ({pks}, binding rank {b}) and {n} marks: PyTorch {d['torch']}'s "
      f"{'FSDP (use_orig_params)' if d.get('fsdp') else 'ZeroRedundancyOptimizer'} and zerosim's theory and measure "
      f"{'differ' if bad else 'equal to the byte'}"
      f"{f' (first step {first:,} on rank {b})' if isinstance(first, int) else ''}; "
      f"PyTorch's ranks' weights {'not compared' if d.get('fsdp') else 'equal' if not any('weights' in x for x in bad) else 'differ'}"
      + "".join("\n  " + x for x in bad))
sys.exit(1 if bad else 0)

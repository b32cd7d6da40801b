#!/bin/sh
# ds_moe_torch — a mixture of experts under DeepSpeed's ZeRO-1/2 over the
# PyTorch step (--framework deepspeed --wrapper deepspeed, fp32) against
# real PyTorch 1.13's allocator: tests/ds_bf16_torch.py's transcription of
# DeepSpeed 38327e0's stage_1_and_2.py (the one tests/ds_bf16_torch.sh
# holds gpt2 and llama to) over tests/hf_torch.py's mixture layers
# (MixtralDecoderLayer over tests/moe_torch.py's SparseMoeBlock,
# modeling_mixtral.py at 00d4b3d2; QwenMoeDecoderLayer for qwen2_moe and
# qwen3_moe), inside torch.profiler with profile_memory=True, every
# allocation replayed; seq 32, reduce_bucket_size 100000, 3 steps. The
# experts are plain parameters to DeepSpeed (no deepspeed.moe layer: no
# expert-parallel group), flattened with the rest in registration order
# (docs/schedule.md, "Mixtures of experts", DeepSpeed; "DeepSpeed over the
# PyTorch step", its mixture part). The reference records each rank's own
# routing (hf_torch.py's ROUTING), which the theory takes as a measured
# run's (--routing FILE, every rank's counts):
#
#  - the tiny mixtral of tests/moe_lib.sh (d 64, F 96, 2 blocks, 4
#    experts, top 2) at B 2, stages 1 and 2, N = 1 and 2 (gloo, each rank
#    its own batch); the tiny qwen3_moe (tests/qwen3_moe.sh's) at B 2 and
#    qwen2_moe (tests/qwen_moe.sh's, its shared expert; at B 4: at B 2
#    PyTorch's weights leave an expert without a token) at N = 1, stage 1:
#    the theory equals each rank's allocator to the byte between steps, at
#    the peak (the most of the steps after the first: each step routes its
#    own way) and at every mark zerosim's step names, and the first
#    step's peak;
#  - at N = 2 under stage 1 the two ranks' peaks differ (their routing:
#    the row tells each rank's list from rank 0's).
# tests/ds_moe_wrapper.sh (make check) holds measure to the same theory.
# Not compared with DeepSpeed itself (not installable here).
# PyTorch is looked for by tests/torch_python.sh; without it: skip (77).
# About 18 s of CPU, 64 s wall on 2 cores at load 15 (three python3
# processes, the N = 2 runs over gloo in two).
set -u
top=${ZS_BUILDDIR:-.}
src=${srcdir:-.}
zerosim=$top/zerosim
[ -x "$zerosim" ] || { echo "ds_moe_torch: $zerosim is not built" >&2; exit 99; }
name=ds_moe_torch
. "$src/tests/torch_python.sh"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/zs-dsmoe.XXXXXX") || exit 99
trap 'rm -rf "$tmp"' EXIT HUP INT TERM
fail() { echo "ds_moe_torch: FAIL: $*" >&2; exit 1; }

. "$src/tests/moe_configs.sh"
moe_configs "$tmp"

# ref TAG BATCH STAGES WORLDS MODEL...: the transcription's runs into $tmp/ref-TAG
ref() {
	tag=$1 batch=$2 stages=$3 worlds=$4
	shift 4
	PYTHONDONTWRITEBYTECODE=1 PYTHONPATH="$src/tests" OPENBLAS_NUM_THREADS=1 "$py" "$src/tests/ds_bf16_torch.py" "$@" \
		--dtype fp32 --stage "$stages" --world "$worlds" --bucket 100000 --steps 3 --seq 32 --batch "$batch" \
		>"$tmp/ref-$tag" 2>"$tmp/err" || { cat "$tmp/err" >&2; fail "tests/ds_bf16_torch.py ($tag)"; }
}
ref mixtral 2 1,2 1,2 "$tmp/mixtral.json"
ref qwen3 2 1 1 "$tmp/qwen3_moe.json"
ref qwen2 4 1 1 "$tmp/qwen2_moe.json"
cat "$tmp/ref-mixtral" "$tmp/ref-qwen3" "$tmp/ref-qwen2" >"$tmp/ref"
[ "$(wc -l <"$tmp/ref")" -eq 6 ] || fail "tests/ds_bf16_torch.py wrote $(wc -l <"$tmp/ref") runs, not 6"

"$py" - "$tmp" "$zerosim" <<'EOF' || fail "PyTorch's allocator and zerosim's theory differ"
import json, subprocess, sys
tmp, zerosim = sys.argv[1:]
bad, done = 0, []
for i, line in enumerate(open(f"{tmp}/ref")):
    r = json.loads(line)
    N, st, model = r["world"], r["stage"], r["model"]
    mt = json.load(open(model))["model_type"]
    tag = f"{mt} zero{st} N={N}"
    ranks = r.get("ranks") or [r]
    if r["routing"] is None or any(len(k["routing"]) != 3 for k in ranks):
        print(f"{tag}: the reference recorded no routing of 3 steps on every rank")
        bad += 1
        continue
    # the reference's routing as a measured run's, every rank's counts
    rt = {"format": "zerosim-measured/1", "config": {"seq": 32, "batch": r["batch"]},
          "runs": [{"scheme": f"zero{st}", "unit": "layer", "world": N,
                    "routing": {"blocks": len(r["routing"][0]), "experts": len(r["routing"][0][0]),
                                "tokens_per_expert": [k["routing"] for k in ranks]}}]}
    json.dump(rt, open(f"{tmp}/rt{i}.json", "w"))
    cmd = [zerosim, "theory", "--framework", "deepspeed", "--wrapper", "deepspeed", "--ds-reduce-bucket", "100000",
           "--seq", "32", "--batch", str(r["batch"]), "--steps", "3", "--torch-device", "cpu", "--attn", "eager",
           "--torch-version", "1.13", "--optimizer-impl", "single", "--precision", "fp32", "--model", model,
           "--schemes", f"zero{st}", "--world", str(N), "--routing", f"{tmp}/rt{i}.json", "--out", f"{tmp}/t{i}.json"]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode:
        print(f"{tag}: theory: {p.stderr.strip()}")
        bad += 1
        continue
    s = json.load(open(f"{tmp}/t{i}.json"))["rows"][0]["schedule"]
    per, peaks = s["per_rank"], []
    for k, x in enumerate(ranks):
        marks = per["marks"][k] if "marks" in per else s["marks"]
        peak = max(x["step_peaks"][1:])  # the run's after its first step
        peaks.append(peak)
        for what, g, w in (("between steps", x["between"], per["resident_bytes"][k]), ("peak", peak, per["peak_bytes"][k])):
            if g != w:
                print(f"{tag} rank {k} {what}: PyTorch {g}, zerosim {w} ({g - w:+d})")
                bad += 1
        diff = [(l, x["marks"].get(l), v) for l, v in marks.items() if x["marks"].get(l) != v]
        if len(marks) < 29 or diff:
            print(f"{tag} rank {k} marks: {len(marks)} in zerosim's, differing {diff[:5]}")
            bad += 1
    if max(k["first_peak"] for k in ranks) != s["first_step_peak"]:
        print(f"{tag} the first step's peak: PyTorch {[k['first_peak'] for k in ranks]}, zerosim {s['first_step_peak']}")
        bad += 1
    if N == 2 and st == 1 and len(set(peaks)) == 1:
        print(f"{tag}: the ranks' peaks are alike ({peaks[0]}): the row cannot tell each rank's list")
        bad += 1
    done.append(f"{tag} B {r['batch']}: between {per['resident_bytes'][0]}, peaks {peaks}, {len(marks)} marks")
print("\n".join("ok: " + d for d in done) if not bad else "", end="\n" if not bad else "")
sys.exit(1 if bad else 0)
EOF
echo "ds_moe_torch: zerosim's theory of --wrapper deepspeed over the mixtures equals PyTorch $("$py" -c 'import torch; print(torch.__version__)' 2>/dev/null)'s allocator (the transcription) to the byte"

#!/bin/sh
# theory_headline — under --framework torch or deepspeed a transformer's
# headline peak, its fit and the largest micro-batch in `zerosim theory`'s
# text are the framework's exact step, and its peak of each phase is the
# step's: both judged against `zerosim measure` of the same run, never
# against the theory itself.
#   - The peak fits a device of exactly the measured peak's bytes and not
#     one byte less (the text's "peak fits" column); the paper's level
#     differs from it, so this fails if the headline is the paper's.
#   - The largest micro-batch at a device of exactly the measured peak at
#     micro-batch b + 1 is at least b + 1, and b one byte below it.
#   - Each phase's peak in --out's schedule (phase_peak_bytes) equals the
#     most rank 0's timeline holds in that phase; a phase the walk does not
#     list is one where the engine allocates nothing, at or below the peak;
#     binding_phase is where the measured peak falls.
# Exit 0 pass, 1 mismatch, 99 hard error.
set -u

top=${ZS_BUILDDIR:-.}
zerosim=$top/zerosim
[ -x "$zerosim" ] || { echo "theory_headline: $zerosim is not built" >&2; exit 99; }
command -v python3 >/dev/null 2>&1 || { echo "theory_headline: SKIP: no python3"; exit 77; }
if [ ! -d "$top/data/models" ]; then
	ZEROSIM_DATADIR=${srcdir:-.}
	export ZEROSIM_DATADIR
fi
models=${srcdir:-.}/report/models
tmp=$(mktemp -d "${TMPDIR:-/tmp}/zs-headline.XXXXXX") || exit 99
trap 'rm -rf "$tmp"' EXIT HUP INT TERM
fails=0
fail() { echo "theory_headline: FAIL: $*" >&2; fails=$((fails + 1)); }

# measured MODEL BATCH SCHEME N OPTIONS...: the measured peak (the binding rank's)
measured() {
	m=$1 b=$2 s=$3 n=$4
	shift 4
	"$zerosim" measure --model "$m" --batch "$b" --schemes "$s" --world "$n" "$@" --out "$tmp/p.json" 2>"$tmp/err" ||
		{ cat "$tmp/err" >&2; exit 99; }
	python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['runs'][0]['peak_bytes'])" "$tmp/p.json"
}

# row MODEL SCHEME N DEVICE-BYTES OPTIONS...: "peak-fits largest" of the text's headline row
row() {
	m=$1 s=$2 n=$3 mem=$4
	shift 4
	"$zerosim" theory --model "$m" --schemes "$s" --world "$n" --device-mem "${mem}B" "$@" >"$tmp/t.txt" 2>"$tmp/err" ||
		{ cat "$tmp/err" >&2; exit 99; }
	grep -q "^(the peak is .*'s exact step" "$tmp/t.txt" || fail "no framework headline: $(cat "$tmp/t.txt")"
	awk -v n="$n" -v s="$s" '$1 == n && $2 == s && NF >= 11 { print $(NF - 1), $NF; exit }' "$tmp/t.txt"
}

for m in "$models/gpt2-tiny.json" "$models/llama-tiny.json"; do
	for fw in "torch --precision fp32" "torch --precision mixed" "deepspeed --precision mixed"; do
		for s in dp zero1 zero2 zero3; do
			[ "$fw" = "deepspeed --precision mixed" ] && [ "$s" = dp ] && continue
			n=2
			set -- --framework $fw --seq 16 --unit layer --steps 2
			p2=$(measured "$m" 2 "$s" "$n" "$@")
			p3=$(measured "$m" 3 "$s" "$n" "$@")
			what="$(basename "$m") --framework $fw $s N = $n"
			got=$(row "$m" "$s" "$n" "$p2" --batch 2 "$@")
			[ "${got%% *}" = yes ] || fail "$what: micro-batch 2 does not fit the measured peak $p2 B: '$got'"
			got=$(row "$m" "$s" "$n" $((p2 - 1)) --batch 2 "$@")
			[ "$got" = "no 1" ] || fail "$what: micro-batch 2 fits one byte under the measured peak $p2 B: '$got'"
			got=$(row "$m" "$s" "$n" $((p3 - 1)) --batch 2 "$@")
			[ "${got#* }" = 2 ] || fail "$what: largest micro-batch at $((p3 - 1)) B (measured b = 3: $p3) is not 2: '$got'"
			got=$(row "$m" "$s" "$n" "$p3" --batch 2 "$@")
			[ "${got#* }" -ge 3 ] 2>/dev/null || fail "$what: largest micro-batch at the measured b = 3 peak $p3 B is under 3: '$got'"
		done
		# Each phase's peak against rank 0's timeline. torch's zero1 at
		# N > 1 is left out: the theory's row is the binding rank's
		# (ZeroRedundancyOptimizer's uneven partition), the timeline rank 0's.
		set -- --model "$m" --framework $fw --seq 16 --batch 2 --steps 2 --world 1,2,3 --unit model,layer
		"$zerosim" measure "$@" --timeline --out "$tmp/m.json" 2>"$tmp/err" || { cat "$tmp/err" >&2; exit 99; }
		"$zerosim" theory "$@" --out "$tmp/t.json" 2>"$tmp/err" || { cat "$tmp/err" >&2; exit 99; }
		python3 - "$tmp/m.json" "$tmp/t.json" "$(basename "$m") $fw" <<'PY' || fails=$((fails + 1))
import json, sys
m, t = (json.load(open(f)) for f in sys.argv[1:3])
fw = t["config"].get("framework")
rows = {(r["scheme"], r["world"], r["unit"]): r["schedule"] for r in t["rows"] if r.get("schedule")}
bad = checked = 0
for run in m["runs"]:
    key = (run["scheme"], run["world"], run["unit"])
    if fw == "torch" and run["scheme"] == "zero1" and run["world"] > 1:
        continue
    measured = {}
    for e in run["timeline"]:
        measured[e["phase"]] = max(measured.get(e["phase"], 0), e["current_bytes"])
    s = rows[key]
    th = s["phase_peak_bytes"]
    why = []
    for p, v in th.items():
        if measured.get(p) != v:
            why.append("%s: theory %s, measured %s" % (p, v, measured.get(p)))
    for p, v in measured.items():
        if p not in th and v > s["peak_bytes"]:
            why.append("%s: measured %s, not in the theory, above its peak" % (p, v))
    if max(th.values()) != s["peak_bytes"] or max(measured.values()) != s["peak_bytes"]:
        why.append("peak: theory %s, its phases' %s, measured %s" % (s["peak_bytes"], max(th.values()), max(measured.values())))
    bind = min((p for p in th if th[p] == s["peak_bytes"]), key=list(th).index)
    if s["binding_phase"] != bind or measured.get(bind) != s["peak_bytes"]:
        why.append("binding phase %s" % s["binding_phase"])
    checked += 1
    if why:
        bad += 1
        print("theory_headline: FAIL: %s %s: %s" % (sys.argv[3], key, "; ".join(why)), file=sys.stderr)
print("phases: %s: %d rows, %d wrong" % (sys.argv[3], checked, bad))
sys.exit(1 if bad or checked == 0 else 0)
PY
	done
done
# The text's phase table: the column its "binds" names holds the row's
# largest figure (the set-up's own peak where it binds: the PyTorch step
# under FSDP on the CPU builds the whole fp32 model on each rank first)
"$zerosim" theory --model llama-3-8b --world 8,64 --framework torch --wrapper fsdp --schemes zero3 --seq 4096 \
	--precision fp32 --torch-device cpu --attn eager --recompute full >"$tmp/phases.txt" 2>&1 || exit 99
if python3 - "$tmp/phases.txt" <<'PY'
import sys
lines = open(sys.argv[1]).read().split("\n")
i = next(k for k, l in enumerate(lines) if l.startswith("Peak of each phase"))
head = lines[i + 1].split()
rows = 0
for l in lines[i + 2:]:
    f = l.split()
    if len(f) != len(head):
        break
    col = dict(zip(head, f))
    vals = [float(v) for k, v in col.items() if k not in ("N", "scheme", "binds") and v != "-"]
    if float(col[col["binds"]]) != max(vals):
        sys.exit("phase table: N = %s binds %s at %s, its largest is %s" % (col["N"], col["binds"], col[col["binds"]], max(vals)))
    rows += 1
sys.exit(0 if rows == 2 else "phase table: %d rows" % rows)
PY
then
	echo "ok: the phase table's binding column holds each row's largest"
else
	fails=$((fails + 1))
fi
[ "$fails" -eq 0 ] || exit 1
echo "theory_headline: all checks passed"

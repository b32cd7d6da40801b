#!/bin/sh
# report_freeze — the floors under --freeze and the report of frozen runs
# (issue #23; docs/schedule.md, "The floors under --freeze"):
#  1. theory.json's floor (resident and bytes sent) of frozen runs, worked
#     by hand from the configs' numbers (Ψ and the frozen elements counted
#     from report/models/*.json, not from zerosim's output) at N = 1, 2, 3
#     for the four schemes: llama-tiny `embeddings` (fp32 and mixed) and
#     gpt2-tiny (tied) `blocks:0-0` (mixed, --grad-accum 2);
#     trainable_params is Ψ_t; the same check on an unfrozen theory fails;
#  2. the report takes a frozen paper run (llama-tiny, the four schemes,
#     N = 1, 2, 3) and a frozen DeepSpeed run (dp, zero1, zero2, N = 2, 3):
#     exit 0, no point unexplained, nothing left as "other", each point's
#     floor the hand-worked frozen floor in diff.json, the section naming
#     the pattern and Ψ_t/Ψ;
#  3. mutations: a measured category off by 4 bytes is unexplained (and
#     --strict exits 1); a frozen theory.json without trainable_params (an
#     older zerosim's), or with a trainable_params (or config.freeze) edited
#     off what the pattern leaves of the shape, is refused in one line, exit 2.
set -u
zerosim=${ZS_BUILDDIR:-.}/zerosim
src=${srcdir:-.}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/zs-rfz.XXXXXX") || exit 99
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
command -v python3 >/dev/null || { echo "SKIP: no python3"; exit 77; }
llama=$src/report/models/llama-tiny.json gpt2=$src/report/models/gpt2-tiny.json
common="--seq 16 --batch 2 --unit layer"

# check_floors CONFIG PATTERN THEORY: every row's floor against the rule,
# Ψ and the frozen elements from CONFIG's numbers. Exit 1 naming the
# first row that differs.
check_floors() {
	python3 - "$@" <<'PY'
import json, sys
cfg, pattern, path = json.load(open(sys.argv[1])), sys.argv[2], sys.argv[3]
t = json.load(open(path))
V = cfg["vocab_size"]
if cfg["model_type"] == "gpt2":  # Conv1D blocks with biases, LayerNorms, tied head
    h, L, P = cfg["n_embd"], cfg["n_layer"], cfg["n_positions"]
    block = 2 * h + (3 * h * h + 3 * h) + (h * h + h) + 2 * h + (4 * h * h + 4 * h) + (4 * h * h + h)
    psi = V * h + P * h + L * block + 2 * h
    frozen = {"blocks:0-0": block, "embeddings": V * h + P * h}[pattern]
else:  # llama: q, o h x h; k, v h x kv.hd; SwiGLU; two RMSNorms; untied head
    h, L, I = cfg["hidden_size"], cfg["num_hidden_layers"], cfg["intermediate_size"]
    kv = cfg["num_key_value_heads"] * h // cfg["num_attention_heads"]
    block = 2 * h * h + 2 * h * kv + 3 * h * I + 2 * h
    psi = 2 * V * h + L * block + h
    frozen = {"embeddings": V * h, "blocks:0-0": block}[pattern]
psi_t = psi - frozen
bpp = t["config"]["bytes_per_param"]
p, g, k = bpp["param"], bpp["grad"], bpp["optimizer"]
K = t["config"].get("grad_accum", 1)
bad = []
if t["params"] != psi or t.get("trainable_params") != psi_t:
    bad.append("params %s, trainable_params %s; by hand %d, %d" % (t["params"], t.get("trainable_params"), psi, psi_t))
for r in t["rows"]:
    N, s = r["world"], r["scheme"]
    f = (N - 1) / N
    res = {"dp": p * psi + (g + k) * psi_t, "zero1": p * psi + g * psi_t + k * psi_t / N,
           "zero2": p * psi + (g + k) * psi_t / N, "zero3": (p * psi + (g + k) * psi_t) / N}[s]
    comm = {"dp": f * 2 * g * psi_t, "zero1": f * (g + p) * psi_t, "zero2": f * (K * g + p) * psi_t,
            "zero3": f * K * (2 * p * psi + g * psi_t)}[s]
    got = r["floor"]
    for what, want, have in (("resident", res, got["resident_bytes"]),
                             ("sent", comm, got["comm_bytes_per_rank_per_step"])):
        if abs(want - have) > 1e-6 * max(1, want):
            bad.append("%s N=%d %s floor %r, by hand %r" % (s, N, what, have, want))
if bad:
    print("%s: %s" % (path, "; ".join(bad[:4])), file=sys.stderr)
    sys.exit(1)
print("ok: %s: %d floors (resident, sent) by hand, psi %d, trained %d" % (path, len(t["rows"]), psi, psi_t))
PY
}

# 1. The floors by hand.
for case in "$llama embeddings fp32" "$llama embeddings mixed" "$gpt2 blocks:0-0 mixed --grad-accum 2"; do
	set -- $case
	m=$1 pat=$2 prec=$3
	shift 3
	# shellcheck disable=SC2086
	"$zerosim" theory --model "$m" --freeze "$pat" --world 1,2,3 --precision "$prec" $common "$@" \
		--out "$tmp/f.json" 2>"$tmp/err" || fail "theory --freeze $pat: $(cat "$tmp/err")"
	check_floors "$m" "$pat" "$tmp/f.json" || fail "the frozen floors of $case"
done
# Can fail: the unfrozen model's floors are not the frozen run's.
# shellcheck disable=SC2086
"$zerosim" theory --model "$llama" --world 1,2,3 --precision mixed $common --out "$tmp/full.json" || exit 99
check_floors "$llama" embeddings "$tmp/full.json" 2>/dev/null && fail "the hand check passed an unfrozen theory"

# 2. The report of a frozen paper run and a frozen DeepSpeed run.
run() { # OUT OPTIONS...: measure and theory of one frozen llama-tiny sweep
	out=$1
	shift
	# shellcheck disable=SC2086
	"$zerosim" measure --quiet --model "$llama" --freeze embeddings --precision mixed --steps 2 $common "$@" \
		--out "$tmp/$out-m.json" 2>"$tmp/err" &&
	# shellcheck disable=SC2086
	"$zerosim" theory --model "$llama" --freeze embeddings --precision mixed $common "$@" \
		--out "$tmp/$out-t.json" 2>>"$tmp/err" || fail "measure/theory $out: $(cat "$tmp/err")"
}
run paper --world 1,2,3
run ds --framework deepspeed --schemes dp,zero1,zero2 --world 2,3
"$zerosim" measure --quiet --layers 16,32,16 --world 1,2 --out "$tmp/mlp-m.json" &&
	"$zerosim" theory --layers 16,32,16 --world 1,2 --out "$tmp/mlp-t.json" || exit 99
report() { ZEROSIM_DATADIR=$src "$zerosim" report --no-render --measured "$tmp/mlp-m.json" --theory "$tmp/mlp-t.json" "$@" >"$tmp/out" 2>"$tmp/err"; }
report --transformer "$tmp/paper-m.json" --transformer "$tmp/paper-t.json" --transformer "$tmp/ds-m.json" \
	--transformer "$tmp/ds-t.json" --strict --out "$tmp/rep" || fail "report of frozen runs (exit $?): $(cat "$tmp/err")"
grep -q "transformer llama-tiny (mixed): 12 rows, 12 measured, 0 unexplained" "$tmp/out" &&
	grep -q "transformer llama-tiny (mixed, framework deepspeed): 6 rows, 6 measured, 0 unexplained" "$tmp/out" ||
	fail "the summary: $(cat "$tmp/out")"
for fw in paper ds; do
	check_floors "$llama" embeddings "$tmp/$fw-t.json" >/dev/null || fail "the $fw theory's floors"
done
python3 - "$tmp/rep/diff.json" "$tmp/paper-t.json" "$tmp/ds-t.json" <<'PY' || fail "diff.json's transformers"
import json, sys
d = json.load(open(sys.argv[1]))
theories = [json.load(open(f)) for f in sys.argv[2:]]
models = d["transformers"]
assert [m["framework"] for m in models] == ["paper", "deepspeed"], [m["framework"] for m in models]
n = 0
for m, t in zip(models, theories):
    assert m["freeze"] == "embeddings" and m["trainable_params"] == t["trainable_params"] == 158016, m
    floors = {(r["scheme"], r["world"]): r["floor"]["resident_bytes"] for r in t["rows"]}
    for p in m["points"]:
        key = (p["scheme"], p["world"])
        assert p["floor_bytes"] == floors[key], (key, p["floor_bytes"], floors[key])
        assert not p["unexplained"] and p["measured_bytes"] == p["schedule_bytes"], p
        assert abs(p["causes"]["other"]) < 1e-6, (m["framework"], key, p["metric"], p["causes"])
        assert abs(sum(p["causes"].values()) - p["departure_bytes"]) < 1e-6, p
        n += 1
    assert len(m["points"]) == 2 * len(t["rows"]), len(m["points"])
# DeepSpeed's zero1 keeps only its grad partition (S_t g against the floor's Ψ_t g), a named cause
z1 = [p for p in models[1]["points"] if p["scheme"] == "zero1" and p["world"] == 2 and p["metric"] == "resident"][0]
assert z1["causes"]["grad_partition"] == 2 * (79008 - 158016), z1["causes"]
print("ok: diff.json: %d points of two frozen runs at their frozen floors, none unexplained, none other" % n)
PY
sec=$tmp/rep/transformer.tex
[ "$(grep -cF 'paragraph{A frozen run.} \texttt{-{}-freeze embeddings}: $\Psi_t = 158\,016$ of $\Psi = 223\,552$' "$sec")" -eq 2 ] ||
	fail "the section's frozen paragraphs: $(grep -c 'A frozen run' "$sec")"
grep -qF 'ZeRO-1 resident $+$12 B (padding 12)' "$sec" || fail "the paper's zero1 N=3 padding: $(grep -o 'ZeRO-1 resident[^;]*' "$sec")"

# 3. Mutations.
python3 - "$tmp/paper-m.json" "$tmp/bad-m.json" <<'PY' || exit 99
import json, sys
m = json.load(open(sys.argv[1]))
r = [r for r in m["runs"] if r["scheme"] == "zero2" and r["world"] == 3][0]
r["resident_bytes"] += 4
r["resident_breakdown"]["grad16"] += 4
json.dump(m, open(sys.argv[2], "w"))
PY
report --transformer "$tmp/bad-m.json" --transformer "$tmp/paper-t.json" --out "$tmp/bad"
[ $? -eq 0 ] && grep -q "1 unexplained" "$tmp/out" || fail "a measured grad16 4 B off: $(cat "$tmp/out")"
report --transformer "$tmp/bad-m.json" --transformer "$tmp/paper-t.json" --strict --out "$tmp/bad2"
[ $? -eq 1 ] || fail "--strict took an unexplained frozen run"
python3 -c 'import json, sys; t = json.load(open(sys.argv[1])); del t["trainable_params"]; json.dump(t, open(sys.argv[2], "w"))' \
	"$tmp/paper-t.json" "$tmp/old-t.json" || exit 99
report --transformer "$tmp/old-t.json" --out "$tmp/old"
rc=$?
[ $rc -eq 2 ] && [ "$(wc -l <"$tmp/err")" -eq 1 ] && grep -q "config.freeze without trainable_params" "$tmp/err" ||
	fail "an older frozen theory.json (exit $rc): $(cat "$tmp/err")"
[ -e "$tmp/old/diff.json" ] && fail "a refused report wrote diff.json"
# the paper level's Ψ_t (peak.trainable_params): a frozen file of a zerosim
# whose paper level counted every parameter as trained has none
python3 -c 'import json, sys
t = json.load(open(sys.argv[1]))
for r in t["rows"]:
    del r["peak"]["trainable_params"]
json.dump(t, open(sys.argv[2], "w"))' "$tmp/paper-t.json" "$tmp/old2-t.json" || exit 99
report --transformer "$tmp/old2-t.json" --out "$tmp/old2"
rc=$?
[ $rc -eq 2 ] && [ "$(wc -l <"$tmp/err")" -eq 1 ] && grep -q "config.freeze without peak.trainable_params" "$tmp/err" ||
	fail "a frozen theory.json with an unfrozen paper level (exit $rc): $(cat "$tmp/err")"
[ -e "$tmp/old2/diff.json" ] && fail "a refused report wrote diff.json"
# trainable_params is Ψ_t of config.freeze over config.model's shape
# (util/step.h's zs_freeze_trained): one edited by hand, or a pattern
# edited under it, is refused in one line naming the file and both counts
for edit in 'trainable_params=158017' 'freeze=blocks:0-0'; do
	python3 - "$tmp/paper-t.json" "$tmp/edit-t.json" "$edit" <<'PY' || exit 99
import json, sys
t = json.load(open(sys.argv[1]))
key, value = sys.argv[3].split("=")
if key == "freeze":
    t["config"]["freeze"] = value
else:
    t[key] = int(value)
json.dump(t, open(sys.argv[2], "w"))
PY
	report --transformer "$tmp/edit-t.json" --out "$tmp/edit"
	rc=$?
	case $edit in
	trainable*) want="$tmp/edit-t.json: trainable_params 158017 is not the 158016 that config.freeze leaves trainable of config.model's 223552" ;;
	*) want="$tmp/edit-t.json: trainable_params 158016 is not the 177344 that config.freeze leaves trainable of config.model's 223552" ;;
	esac
	[ $rc -eq 2 ] && [ "$(wc -l <"$tmp/err")" -eq 1 ] && grep -qF "$want" "$tmp/err" ||
		fail "theory.json with $edit (exit $rc): $(cat "$tmp/err")"
	[ -e "$tmp/edit/diff.json" ] && fail "a refused report wrote diff.json"
done
echo "ok: the report of frozen runs"

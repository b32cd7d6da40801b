#!/bin/sh
# torch_cache_check — tests/torch_cache.py, the PyTorch references' cache
# of a CI run (ZS_TORCH_CACHE, tests/torch_python.sh, .ci/run), with
# stand-in references (no torch needed): each counts its runs in a file
# no argument names, so a hit is seen not to run it. A second run of the
# same script and arguments is a hit that gives the same stdout, stderr,
# exit status and output files (an --out file, the files a folder argument
# gained); a byte changed in an input file, another argument, another
# script text or another OPENBLAS_NUM_THREADS is a miss that runs it; a
# status other than 0 or 1 (a crash, a timeout) is never kept; a fresh
# temporary folder (mktemp) in the arguments still hits (an output path is
# keyed by its name); hf_torch.py --zerosim BINARY is keyed without the
# binary and, on a hit, runs again with --torch-json (zerosim's theory
# afresh, no PyTorch); one --out path reused case after case gets each
# case's own output back on a hit; without ZS_TORCH_CACHE it is the plain
# run.
set -u
src=${srcdir:-.}
py=$(command -v python3) || { echo "torch_cache_check: SKIP: no python3"; exit 77; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/zs-tcache.XXXXXX") || exit 99
trap 'rm -rf "$tmp"' EXIT HUP INT TERM
mkdir "$tmp/ref" "$tmp/cache"
export ZS_TORCH_CACHE="$tmp/cache" PYTHONDONTWRITEBYTECODE=1
unset OPENBLAS_NUM_THREADS
status=0
ok() { echo "ok: $*"; }
bad() { echo "FAIL: $*"; status=1; }

# fake_torch.py [--rc N] [--out FILE] [--dir DIR] INPUT...: counts its runs
# in ref/runs, prints the inputs' bytes, writes them to FILE and DIR/made
cat >"$tmp/ref/fake_torch.py" <<'EOF'
import os, sys
here = os.path.dirname(os.path.abspath(__file__))
with open(os.path.join(here, "runs"), "a") as f:
    f.write("run\n")
a, rc, out, d, text = sys.argv[1:], 0, None, None, ""
while a:
    x = a.pop(0)
    if x == "--rc":
        rc = int(a.pop(0))
    elif x == "--out":
        out = a.pop(0)
    elif x == "--dir":
        d = a.pop(0)
    else:
        text += open(x).read()
print("stdout " + text.strip())
print("stderr " + text.strip(), file=sys.stderr)
if out:
    open(out, "w").write("out " + text)
if d:
    open(os.path.join(d, "made"), "w").write("made " + text)
sys.exit(rc)
EOF
runs() { wc -l <"$tmp/ref/runs" 2>/dev/null | tr -d ' ' || echo 0; }
# run LABEL ARGS...: through the cache; its stdout, stderr and status in $tmp/LABEL.*
run() {
	l=$1
	shift
	"$py" "$src/tests/torch_cache.py" "$tmp/ref/fake_torch.py" "$@" >"$tmp/$l.out" 2>"$tmp/$l.err"
	echo $? >"$tmp/$l.rc"
}
same() { cmp -s "$tmp/$1.out" "$tmp/$2.out" && cmp -s "$tmp/$1.err" "$tmp/$2.err" && cmp -s "$tmp/$1.rc" "$tmp/$2.rc"; }

echo "weights 1" >"$tmp/in.txt"
mkdir "$tmp/w1" "$tmp/w2" "$tmp/d1" "$tmp/d2"
run a --rc 1 --out "$tmp/w1/o.json" --dir "$tmp/d1" "$tmp/in.txt"
n=$(runs)
run b --rc 1 --out "$tmp/w2/o.json" --dir "$tmp/d2" "$tmp/in.txt"
if [ "$(runs)" = "$n" ] && same a b && [ "$(cat "$tmp/b.rc")" = 1 ] && cmp -s "$tmp/w1/o.json" "$tmp/w2/o.json" &&
	cmp -s "$tmp/d1/made" "$tmp/d2/made"; then
	ok "a second run (other temporary folders) is a hit: not run; stdout, stderr, status 1, --out and the folder's new file the first's"
else
	bad "a second run: $(runs) runs after $n; status $(cat "$tmp/b.rc"); $(ls "$tmp/w2" "$tmp/d2" | tr '\n' ' ')"
fi

n=$(runs)
echo "weights 2" >"$tmp/in.txt"
run c --rc 1 --out "$tmp/w2/o.json" --dir "$tmp/d2" "$tmp/in.txt"
if [ "$(runs)" = $((n + 1)) ] && grep -q "weights 2" "$tmp/c.out" && grep -q "weights 2" "$tmp/w2/o.json"; then
	ok "an input file's bytes changed: a miss, run, its new output"
else
	bad "an input file's bytes changed: $(runs) runs after $n, stdout $(cat "$tmp/c.out")"
fi
n=$(runs)
run d --rc 0 --out "$tmp/w2/o.json" --dir "$tmp/d2" "$tmp/in.txt"
OPENBLAS_NUM_THREADS=1 run e --rc 1 --out "$tmp/w2/o.json" --dir "$tmp/d2" "$tmp/in.txt"
echo "# another text" >>"$tmp/ref/fake_torch.py"
run f --rc 1 --out "$tmp/w2/o.json" --dir "$tmp/d2" "$tmp/in.txt"
if [ "$(runs)" = $((n + 3)) ] && [ "$(cat "$tmp/d.rc")" = 0 ]; then
	ok "another argument, another OPENBLAS_NUM_THREADS, another script text: three misses, each run"
else
	bad "another argument, environment or script: $(runs) runs after $n (3 more expected)"
fi

n=$(runs)
run g --rc 3 "$tmp/in.txt"
run h --rc 3 "$tmp/in.txt"
if [ "$(runs)" = $((n + 2)) ] && [ "$(cat "$tmp/h.rc")" = 3 ] && grep -q "^run fake_torch.py" "$tmp/cache/log"; then
	ok "status 3 (not a verdict) is never kept: run twice, logged as run"
else
	bad "status 3: $(runs) runs after $n, status $(cat "$tmp/h.rc")"
fi

n=$(runs)
ZS_TORCH_CACHE= run i --rc 0 --out "$tmp/w2/o.json" --dir "$tmp/d2" "$tmp/in.txt"
if [ "$(runs)" = $((n + 1)) ] && same d i; then
	ok "without ZS_TORCH_CACHE: the plain run, its output the same"
else
	bad "without ZS_TORCH_CACHE: $(runs) runs after $n"
fi

# one --out path for two cases in a row (a test's loop: ref.json), then
# the same two again: each hit writes its own case's output back, never
# leaves the other's there
echo "case A" >"$tmp/ca.txt"
echo "case B" >"$tmp/cb.txt"
for pass in 1 2; do
	rm -f "$tmp/w1/ref.json"
	run "p${pass}a" --rc 0 --out "$tmp/w1/ref.json" "$tmp/ca.txt"
	cp "$tmp/w1/ref.json" "$tmp/p${pass}a.ref"
	run "p${pass}b" --rc 0 --out "$tmp/w1/ref.json" "$tmp/cb.txt"
	cp "$tmp/w1/ref.json" "$tmp/p${pass}b.ref"
done
if grep -q "case A" "$tmp/p2a.ref" && grep -q "case B" "$tmp/p2b.ref" && ! grep -q "case A" "$tmp/p2b.ref" &&
	cmp -s "$tmp/p1b.ref" "$tmp/p2b.ref" && same p1b p2b; then
	ok "one --out path for two cases in a row: on the second pass each hit writes its own case's output back"
else
	bad "one --out path for two cases: the second pass's case B reads '$(cat "$tmp/p2b.ref")'"
fi

# hf_torch.py --zerosim BINARY: a stand-in that writes its JSON, with
# "zerosim" the binary's text, or on --torch-json that JSON's PyTorch part
# and the binary's text afresh
cat >"$tmp/ref/hf_torch.py" <<'EOF'
import json, os, sys
here = os.path.dirname(os.path.abspath(__file__))
a = sys.argv[1:]
z, out = open(a[a.index("--zerosim") + 1]).read().strip(), a[a.index("--out") + 1]
if "--torch-json" in a:
    d = json.load(open(a[a.index("--torch-json") + 1]))
else:
    with open(os.path.join(here, "runs"), "a") as f:
        f.write("run\n")
    d = dict(torch=open(a[a.index("--model") + 1]).read().strip())
d["zerosim"] = z
json.dump(d, open(out, "w"))
EOF
echo "binary 1" >"$tmp/zs1"
echo "binary 2" >"$tmp/zs2"
n=$(runs)
"$py" "$src/tests/torch_cache.py" "$tmp/ref/hf_torch.py" --model "$tmp/in.txt" --zerosim "$tmp/zs1" --out "$tmp/w1/h.json"
"$py" "$src/tests/torch_cache.py" "$tmp/ref/hf_torch.py" --model "$tmp/in.txt" --zerosim "$tmp/zs2" --out "$tmp/w2/h.json"
if [ "$(runs)" = $((n + 1)) ] && grep -q '"torch": "weights 2", "zerosim": "binary 1"' "$tmp/w1/h.json" &&
	grep -q '"torch": "weights 2", "zerosim": "binary 2"' "$tmp/w2/h.json"; then
	ok "hf_torch.py --zerosim: another binary is a hit, PyTorch's part kept and zerosim's computed by the new binary"
else
	bad "hf_torch.py --zerosim: $(runs) runs after $n; $(cat "$tmp/w1/h.json") / $(cat "$tmp/w2/h.json")"
fi
exit $status

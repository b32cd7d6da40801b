#!/bin/sh
# alloc_replay — `zerosim measure --allocator cuda` feeds every rank's
# tracked allocations to the caching allocator's model, and `--timeline`
# writes a trace (block ids, the blocks live at the step's start, every
# rank with --timeline-ranks all) that someone else can replay.
#   - Reserved bytes, segments, cudaMalloc calls, the allocated peak and
#     the fragmentation at the reserved peak of three MLP runs, worked by
#     hand below from PyTorch 2.6.0's rules (CUDACachingAllocator.cpp:
#     requests rounded up to 512 B; at most 1 MiB from the small pool in
#     2 MiB segments; 1-10 MiB from 20 MiB segments; larger ones rounded
#     up to 2 MiB, a segment each; a large block split when over 1 MiB
#     remains) and the block sizes the engine's layout gives (docs/
#     schedule.md: flat param16, grad16, master32, adam_m, adam_v; fp32
#     activations of batch x width), with cuBLAS's workspace asked for
#     once at the first matmul, after its output (docs/schedule.md, "The
#     replay in measure"); never copied from zerosim's output.
#   - The trace: every free names a block that is live (in timeline_live
#     or allocated earlier in the step) with the same bytes and category;
#     current_bytes is the sum of the rank's live blocks after each event;
#     a rank's ids are unique; every rank's log is there with
#     --timeline-ranks all.
#   - The replay's allocated peak is at least the most the trace holds
#     with each block rounded up to 512 B (more only where a block was not
#     split and counts whole).
#   - theory --allocator cuda replays the walk's blocks and agrees with
#     measure's rank (the one holding the most between steps) to the byte
#     (allocated and reserved peaks, fragmentation, segments, cudaMalloc
#     calls) on MLPs and transformers under every framework (fp32 and
#     mixed, unit model and layer, every recompute, FSDP's prefetch,
#     DeepSpeed's overlap_comm and optimizer offload, expandable_segments
#     and max_split_size_mb); DeepSpeed's ZeRO-3 has a null allocator (not
#     covered yet).
#   - theory's replay runs out of --device-mem where the hand-worked
#     reserved bytes say: one byte short of them, in the first forward.
#   - Bad options are refused with one line and exit 2; without the new
#     options no new key appears.
# Exit 0 pass, 1 mismatch, 99 hard error.
set -u

top=${ZS_BUILDDIR:-.}
zerosim=$top/zerosim
[ -x "$zerosim" ] || { echo "alloc_replay: $zerosim is not built" >&2; exit 99; }
command -v python3 >/dev/null 2>&1 || { echo "alloc_replay: SKIP: no python3"; exit 77; }
if [ ! -d "$top/data/models" ]; then
	ZEROSIM_DATADIR=${srcdir:-.}
	export ZEROSIM_DATADIR
fi
models=${srcdir:-.}/report/models
tmp=$(mktemp -d "${TMPDIR:-/tmp}/zs-alloc.XXXXXX") || exit 99
trap 'rm -rf "$tmp"' EXIT HUP INT TERM
fails=0
fail() { echo "alloc_replay: FAIL: $*" >&2; fails=$((fails + 1)); }
# A sanitizer build (--enable-sanitizers) runs the trace and theory =
# measure rows at the worlds up to 3 of each --world list (the smallest
# where none is): one rank, even and uneven ranks, padding, along the same
# paths; the agreement at 4, 5 and 8 is the plain build's make check to
# show (about 170 s of CPU under ASan at the full lists).
san_worlds=
if grep -q '^#define ZS_SANITIZERS 1' "$top/config.h" 2>/dev/null; then
	san_worlds=3
	echo "alloc_replay: a sanitizer build: the trace and theory = measure rows at worlds <= $san_worlds"
fi
# sanw LIST: LIST's worlds up to $san_worlds, else its smallest
sanw() {
	echo "$1" | tr , '\n' | awk -v m="$san_worlds" '$1 <= m { o = o (o ? "," : "") $1 } NR == 1 || $1 < s { s = $1 }
		END { print (o ? o : s) }'
}

# --- worked by hand -------------------------------------------------------
# check NAME 'OPTIONS' 'EXPECTED': EXPECTED is the rank-0 figures
# allocated_peak reserved_peak allocated_at_reserved_peak segments_peak cuda_malloc_calls
check() {
	name=$1 opts=$2 want=$3
	# shellcheck disable=SC2086
	"$zerosim" measure -q $opts --allocator cuda --steps 2 --out "$tmp/h.json" 2>"$tmp/err" ||
		{ cat "$tmp/err" >&2; exit 99; }
	got=$(python3 -c "
import json, sys
a = json.load(open(sys.argv[1]))['runs'][0]['allocator']['per_rank']
print(' '.join(str(int(a[k][0])) for k in ('allocated_peak_bytes', 'reserved_peak_bytes',
      'allocated_at_reserved_peak_bytes', 'segments_peak', 'cuda_malloc_calls')))" "$tmp/h.json")
	[ "$got" = "$want" ] || fail "$name: got $got, by hand $want"
}
MiB=1048576
r512() { echo $(( ($1 + 511) / 512 * 512 )); }
# cuBLAS's workspace (PyTorch 2.6.0's default, CublasHandlePool.cpp
# 133-134): 4096 KiB x 8 on sm_90, the default here; 4096 KiB x 2 +
# 16 KiB x 8 elsewhere. Each run's first matmul asks for it after the
# input, the target and the first layer's output are made, and never
# frees it. 32 MiB is over 10 MiB: rounded up to 2 MiB (32 MiB) and, with
# no cached block that large in any run below, a segment of its own; the
# reserved peak is then first reached at it.
ws=$((4096 * 8 * 1024)) ws8=$((4096 * 1024 * 2 + 16 * 1024 * 8))
# One linear layer 1024 -> 1024, dp, mixed Adam, batch 4: Ψ = 1024·1024 + 1024.
P=$((1024 * 1024 + 1024))
p16=$(r512 $((2 * P))) m32=$(r512 $((4 * P))) act=$(r512 $((4 * 1024 * 4)))
# 2,099,200 and 4,198,400 B are 1-10 MiB: one 20 MiB segment holds all five
# (16.0 MiB); the 16 KiB activations and scratch come from one 2 MiB small
# segment, reserved when the first activation is made. Peak allocated: the
# state, three activations (input, target, output), two scratch blocks and
# the workspace; reserved 22 MiB and the workspace's 32 MiB segment, whose
# cudaMalloc is the reserved peak (the state, three activations and it).
state=$((2 * p16 + 3 * m32))
check dp-1024 "--layers 1024,1024 --world 1 --schemes dp" \
	"$((state + 5 * act + ws)) $((54 * MiB)) $((state + 3 * act + ws)) 3 3"
# The other GPUs' 8,519,680 B is a 1-10 MiB request: the 20 MiB segment's
# free rest (20 MiB - 16,793,600 B = 4,177,920 B) is too small, so it takes
# a 20 MiB segment of its own (reserved 42 MiB).
check dp-1024-ws8 "--layers 1024,1024 --world 1 --schemes dp --cublas-workspace $ws8" \
	"$((state + 5 * act + ws8)) $((42 * MiB)) $((state + 3 * act + ws8)) 3 3"
# Where the first 20 MiB segment has room it shares it: 1024 -> 512 fp32
# SGD (momentum): param32, grad32, momentum of 2,099,200 B each (6,297,600
# B) leave 14,673,920 B free, which the 8,519,680 B workspace is split from:
# reserved stays the 20 MiB segment and the 2 MiB small one taken by the
# input (16 KiB; target and output 8 KiB, two 8 KiB scratch), which is the
# reserved peak (the state and the input). With 32 MiB: its own segment.
Ps=$((1024 * 512 + 512)) sact=$((4 * 512 * 4))
sstate=$((3 * $(r512 $((4 * Ps)))))
check sgd-ws8 "--layers 1024,512 --world 1 --schemes dp --precision fp32 --optimizer sgd --cublas-workspace $ws8" \
	"$((sstate + act + 4 * sact + ws8)) $((22 * MiB)) $((sstate + act)) 2 2"
check sgd-ws "--layers 1024,512 --world 1 --schemes dp --precision fp32 --optimizer sgd" \
	"$((sstate + act + 4 * sact + ws)) $((54 * MiB)) $((sstate + act + 2 * sact + ws)) 3 3"
# With --cublas-workspace 0 (CUBLAS_WORKSPACE_CONFIG=:0:0) no request:
# reserved is the 22 MiB, reached at the first activation.
check dp-1024-ws0 "--layers 1024,1024 --world 1 --schemes dp --cublas-workspace 0" \
	"$((state + 5 * act)) $((22 * MiB)) $((state + act)) 2 2"
# The report's diff.json gives that run's reserved bytes beside its peak
# point, not as a cause (the causes add up to the tracked bytes' departure):
# reserved 22 MiB, per parameter 22 MiB / Ψ; the allocated peak above with
# both segments reserved then, so fragmentation 22 MiB less it; 2 segments;
# and flags.txt's allocator: line the same fragmentation. (The last run
# checked, dp-1024 without the workspace, is h.json.)
"$zerosim" theory --layers 1024,1024 --world 1 --schemes dp --out "$tmp/hth.json" 2>"$tmp/err" &&
	"$zerosim" report --measured "$tmp/h.json" --theory "$tmp/hth.json" --no-render --out "$tmp/hr" >"$tmp/out" 2>&1 ||
	fail "report of dp-1024: $(cat "$tmp/err" "$tmp/out")"
python3 - "$tmp/hr/diff.json" "$tmp/hr/flags.txt" $((22 * MiB)) $((state + 5 * act)) $P <<'EOF' || fail "dp-1024's reserved bytes in diff.json"
import sys, json
d = json.load(open(sys.argv[1]))
reserved, allocated, psi = (int(x) for x in sys.argv[3:6])
peak = [p for p in d["points"] if p["metric"] == "peak"]
assert len(peak) == 1, peak
p = peak[0]
want = dict(reserved_bytes=reserved, allocated_peak_bytes=allocated, reserved_at_allocated_peak_bytes=reserved,
            fragmentation_bytes=reserved - allocated, segments=2, allocator_rank=0)
got = {k: p.get(k) for k in want}
assert got == want, (got, want)
assert abs(p["reserved_bytes_per_param"] - reserved / psi) < 1e-9, p["reserved_bytes_per_param"]
assert not any("reserved" in k or "fragment" in k for k in p["causes"]), p["causes"]
assert sum(p["causes"].values()) == p["departure_bytes"], p
for q in d["points"]:
    assert q["metric"] == "peak" or "reserved_bytes" not in q, q
line = [l for l in open(sys.argv[2]) if l.startswith("allocator: ")]
assert len(line) == 1 and ": fragmentation %d B at the allocated peak" % (reserved - allocated) in line[0], line
EOF
# zero3 over 2 ranks: half of each flat buffer; the gathered params and
# the full grads (2,099,200 B each) fit the same 20 MiB segment's rest.
h16=$(r512 $P) h32=$(r512 $((2 * P)))
hstate=$((2 * h16 + 3 * h32))
# The workspace comes after the gathered params (FSDP-like: the unit is
# gathered before its forward) and the three activations: its own segment.
check zero3-1024-N2 "--layers 1024,1024 --world 2 --schemes zero3" \
	"$((hstate + 5 * act + 2 * p16 + ws)) $((54 * MiB)) $((hstate + 3 * act + p16 + ws)) 3 3"
# 2048 -> 2048: param16 and grad16 (8,392,704 B) share a 20 MiB segment;
# master32, adam_m, adam_v (16,785,408 B, over 10 MiB) each get a segment
# rounded up to 2 MiB (18 MiB; the 1.99 MiB left is split off and free, too
# small for the next one), the activations a 2 MiB small segment, and the
# workspace 32 MiB of its own (no free block of the 20 MiB segment nor the
# 1.99 MiB leftovers holds it).
P=$((2048 * 2048 + 2048))
p16=$(r512 $((2 * P))) m32=$(r512 $((4 * P))) act=$(r512 $((4 * 2048 * 4)))
state=$((2 * p16 + 3 * m32))
check dp-2048 "--layers 2048,2048 --world 1 --schemes dp" \
	"$((state + 5 * act + ws)) $(((20 + 3 * 18 + 2 + 32) * MiB)) $((state + 3 * act + ws)) 6 6"
# expandable_segments:True: one large segment mapped in 20 MiB pages (64.0
# MiB of blocks and the 32 MiB workspace, 96.03 MiB: 5 pages) and one small
# one in 2 MiB pages; no segment is cudaMalloc'd (segment.all counts none)
# but six pages are mapped.
"$zerosim" measure -q --layers 2048,2048 --world 1 --schemes dp --steps 2 --allocator cuda \
	--alloc-conf expandable_segments:True --out "$tmp/x.json" 2>"$tmp/err" || { cat "$tmp/err" >&2; exit 99; }
got=$(python3 -c "
import json, sys
a = json.load(open(sys.argv[1]))['runs'][0]['allocator']
print(a['reserved_peak_bytes'], a['segments_peak'], a['expandable_segments'], a['cuda_malloc_calls'])" "$tmp/x.json")
[ "$got" = "$(((5 * 20 + 2) * MiB)) 0 2 6" ] || fail "dp-2048 expandable: got $got, by hand $(((5 * 20 + 2) * MiB)) 0 2 6"

# --- the trace ------------------------------------------------------------
trace() {
	prev=
	[ -z "$san_worlds" ] || for a do shift; [ "$prev" = --world ] && a=$(sanw "$a"); set -- "$@" "$a"; prev=$a; done
	# shellcheck disable=SC2086
	"$zerosim" measure -q "$@" --allocator cuda --timeline --timeline-ranks all --out "$tmp/t.json" 2>"$tmp/err" ||
		{ cat "$tmp/err" >&2; exit 99; }
	python3 - "$tmp/t.json" "$*" <<'EOF' || fails=$((fails + 1))
import json, sys
doc = json.load(open(sys.argv[1]))
what = sys.argv[2]
bad = []
def r512(b):
    return 0 if b == 0 else (b + 511) // 512 * 512
for run in doc['runs']:
    tag = '%s N=%d unit=%s (%s)' % (run['scheme'], run['world'], run['unit'], what)
    if run.get('cuda_alloc') != 'pytorch-2.6.0':
        bad.append('%s: cuda_alloc is %r' % (tag, run.get('cuda_alloc')))
    logs = [(0, run['timeline'], run['timeline_live'])]
    logs += [(o['rank'], o['timeline'], o['timeline_live']) for o in run.get('timeline_ranks', [])]
    if [k for k, _, _ in logs] != list(range(run['world'])):
        bad.append('%s: the logs are of ranks %s' % (tag, [k for k, _, _ in logs]))
    for k, events, live in logs:
        seen = set()  # ids are the rank's own
        held = {}
        for b in live:
            if b['id'] in seen:
                bad.append('%s rank %d: id %d twice' % (tag, k, b['id']))
            seen.add(b['id'])
            held[b['id']] = (b['category'], b['bytes'])
        cur = sum(b for _, b in held.values())
        if events[0]['current_bytes'] != cur:
            bad.append('%s rank %d: start holds %d, its live blocks %d' % (tag, k, events[0]['current_bytes'], cur))
        most = sum(r512(b) for _, b in held.values())
        for e in events:
            if e['op'] == 'alloc':
                if e['id'] in seen:
                    bad.append('%s rank %d: id %d twice' % (tag, k, e['id']))
                seen.add(e['id'])
                held[e['id']] = (e['category'], e['bytes'])
            elif e['op'] == 'free':
                if held.get(e['id']) != (e['category'], e['bytes']):
                    bad.append('%s rank %d: free of %d (%s, %d) is not a live block: %r' %
                               (tag, k, e['id'], e['category'], e['bytes'], held.get(e['id'])))
                held.pop(e['id'], None)
            else:
                continue
            cur = sum(b for _, b in held.values())
            if e['current_bytes'] != cur:
                bad.append('%s rank %d: id %d: current_bytes %d, live blocks %d' % (tag, k, e['id'], e['current_bytes'], cur))
                break
            most = max(most, sum(r512(b) for _, b in held.values()))
        replay = run['allocator']['per_rank']['allocated_peak_bytes'][k]
        if replay < most or replay < run['per_rank']['peak_bytes'][k]:
            bad.append('%s rank %d: the replay\'s allocated peak %d is below the trace\'s %d (rounded) or the tracker\'s %d' %
                       (tag, k, replay, most, run['per_rank']['peak_bytes'][k]))
for b in bad[:10]:
    print('alloc_replay: FAIL:', b, file=sys.stderr)
sys.exit(1 if bad else 0)
EOF
}
trace --layers 64,256,64 --world 1,2,3,4 --unit model,layer
trace --layers 1024,1024 --world 2 --framework torch --precision fp32
trace --layers 64,256,64 --world 1,2,4 --framework deepspeed --schemes zero1,zero3
trace --model "$models/gpt2-tiny.json" --seq 16 --batch 2 --steps 2 --world 1,2,3
trace --model "$models/llama-tiny.json" --seq 16 --batch 2 --steps 2 --world 2 --framework torch

# --- theory = measure --------------------------------------------------------
agree() {
	prev=
	[ -z "$san_worlds" ] || for a do shift; [ "$prev" = --world ] && a=$(sanw "$a"); set -- "$@" "$a"; prev=$a; done
	# shellcheck disable=SC2086
	"$zerosim" measure -q "$@" --allocator cuda --out "$tmp/am.json" 2>"$tmp/err" || { cat "$tmp/err" >&2; exit 99; }
	"$zerosim" theory "$@" --allocator cuda --out "$tmp/at.json" 2>"$tmp/err" || { cat "$tmp/err" >&2; exit 99; }
	python3 - "$tmp/am.json" "$tmp/at.json" "$*" <<'EOF' || fails=$((fails + 1))
import json, sys
m, t = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
rows = {(r['scheme'], r['world'], r['unit']): r for r in t['rows']}
keys = ['allocated_peak_bytes', 'reserved_at_allocated_peak_bytes', 'reserved_peak_bytes',
        'allocated_at_reserved_peak_bytes', 'fragmentation_bytes', 'segments_peak', 'expandable_segments',
        'cuda_malloc_calls', 'cuda_free_calls']
bad = []
for run in m['runs']:
    k = (run['scheme'], run['world'], run['unit'])
    ta = rows[k]['allocator']
    if ta is None:
        bad.append('%s: theory has no replay' % (k,))
        continue
    if ta['oom'] is not None:
        bad.append('%s: theory runs out of memory with no --device-mem' % (k,))
    # the theory's rank holds the most between steps (torch's zero1 ranks differ)
    res = run['per_rank']['resident_bytes']
    r = res.index(max(res))
    for x in keys:
        if run['allocator']['per_rank'][x][r] != ta[x]:
            bad.append('%s %s: measure rank %d %d, theory %d' % (k, x, r, run['allocator']['per_rank'][x][r], ta[x]))
for b in bad[:10]:
    print('alloc_replay: FAIL: %s: %s' % (sys.argv[3], b), file=sys.stderr)
sys.exit(1 if bad else 0)
EOF
}
agree --layers 1024,2048,1024 --world 1,2,3,4,8 --unit model,layer --steps 2
agree --layers 700,3000,500,900 --world 1,2,3,5 --unit model,layer --steps 3 --precision fp32 --batch 7
agree --layers 1024,2048,1024 --world 1,2,3 --unit model,layer --steps 2 --cublas-workspace 8519680
agree --model "$models/gpt2-tiny.json" --precision mixed --world 1,2 --seq 16 --batch 2 --steps 2 --framework deepspeed \
	--schemes zero3 --cublas-workspace 0
agree --layers 64,256,64 --world 1,2,3,4 --unit model,layer --optimizer sgd
agree --layers 1024,2048,1024 --world 1,2,4 --unit model,layer --alloc-conf expandable_segments:True
agree --layers 4096,4096 --world 1,2,4 --unit model,layer --alloc-conf max_split_size_mb:40
agree --model "$models/gpt2-tiny.json" --precision mixed --world 1,2,3,8 --seq 16 --batch 2 --steps 2 --unit model,layer
agree --model "$models/gpt2-tiny.json" --precision fp32 --world 1,2,3 --seq 16 --batch 2 --steps 2 --unit model,layer --recompute full
agree --model "$models/llama-tiny.json" --precision mixed --world 1,2,3 --seq 16 --batch 2 --steps 2 --unit model,layer --recompute selective
agree --model "$models/llama-tiny.json" --precision fp32 --world 1,2,8 --seq 16 --batch 2 --steps 2 --unit model,layer
agree --layers 1024,2048,1024 --world 1,2,3,4 --unit model,layer --steps 2 --framework torch
agree --layers 1024,2048,1024 --world 1,2,3,4 --unit model,layer --steps 2 --framework torch --precision fp32 \
	--prefetch backward-pre --schemes zero2,zero3
agree --model "$models/gpt2-tiny.json" --precision mixed --world 1,2,3,8 --seq 16 --batch 2 --steps 2 --unit model,layer \
	--framework torch --prefetch backward-pre
agree --model "$models/llama-tiny.json" --precision fp32 --world 1,2,3,8 --seq 16 --batch 2 --steps 2 --unit model,layer \
	--framework torch --recompute selective
agree --layers 1024,2048,1024 --world 1,2,3,4 --unit model,layer --steps 2 --framework deepspeed
# DeepSpeed's ZeRO-2 under --grad-accum: a later micro-step's new grad
# partition, from its first reduction (mid-backward with the small bucket)
agree --layers 1024,2048,1024 --world 1,2,4 --unit model,layer --steps 2 --framework deepspeed --schemes zero2 \
	--grad-accum 2 --ds-reduce-bucket 200000
# The paper's schedule under --grad-accum: a later micro-step's unit grads
# apart (dp, zero1) and its reduce-scatters' transient slots (zero2, zero3)
agree --layers 1024,2048,1024 --world 1,2,3 --unit model,layer --steps 2 --grad-accum 3
agree --layers 1024,2048,1024 --world 1,2,4 --steps 2 --framework deepspeed --schemes zero1,zero2 --ds-overlap-comm on \
	--ds-reduce-bucket 1e6
agree --model "$models/gpt2-tiny.json" --precision mixed --world 1,2,3,8 --seq 16 --batch 2 --steps 3 --unit model,layer \
	--framework deepspeed --schemes zero1,zero2 --offload optimizer
# The plain PyTorch loop (--wrapper none): the theory's trace is the
# step's own list (util/autograd.h), which the engine's executor allocates
# block for block: both releases, Adam single and foreach, zero_grad zeros
# and none, both families (llama's bytes only: its values are not yet
# computed, so gpt2 here), over three steps.
for v in "1.13 single zeros" "2.6 foreach none" "1.13 foreach none" "2.6 single zeros"; do
	set -- $v
	agree --model "$models/gpt2-tiny.json" --framework torch --wrapper none --precision fp32 --torch-device cpu \
		--torch-version "$1" --optimizer-impl "$2" --zero-grad "$3" --attn eager --world 1 --schemes dp \
		--seq 32 --batch 2 --steps 3
done

# DeepSpeed's ZeRO-3: the coordinator's gathers tensor by tensor, each
# module's grads, the reduce bucket's padding and flat copy, a grad larger
# than the bucket held, step()'s buffers, offloaded or not.
agree --layers 1024,2048,1024 --world 1,2,3,4 --unit model,layer --steps 2 --framework deepspeed --schemes zero3
agree --layers 700,3000,500,900 --world 1,2,3,5 --unit model,layer --steps 3 --precision fp32 --batch 7 \
	--framework deepspeed --schemes zero3 --ds-reduce-bucket 1e5 --ds-prefetch-bucket 1e5 --ds-max-live 3e6
agree --layers 1024,2048,1024 --world 1,2,4 --unit model,layer --steps 2 --framework deepspeed --schemes zero3 \
	--offload params
agree --model "$models/gpt2-tiny.json" --precision mixed --world 1,2,3,8 --seq 16 --batch 2 --steps 3 \
	--framework deepspeed --schemes zero3 --alloc-conf expandable_segments:True
agree --model "$models/llama-tiny.json" --precision fp32 --world 1,2,3 --seq 16 --batch 2 --steps 2 \
	--framework deepspeed --schemes zero3 --ds-persist 0 --offload optimizer

# The 2048 -> 2048 dp run reserves 108 MiB (above): with 108 MiB it fits;
# one byte less and the workspace's 32 MiB segment, the last cudaMalloc,
# cannot be had (no segment is free to release). Without the workspace it
# reserves 76 MiB, and one byte less fails at the 2 MiB small segment for
# the first activation (32 KiB) once the 74 MiB of large segments are taken.
# No fixed costs here (--device-overhead 0): the device is the allocator's
# alone.
need=$((108 * MiB))
wsoom='{"bytes": 33554432, "category": "cublas_workspace", "phase": "forward", "step": 1}'
oom() {
	"$zerosim" theory --layers 2048,2048 --world 1 --schemes dp --unit model --allocator cuda --device-mem "$1" \
		--device-overhead "${2:-0}" ${3:+--cublas-workspace "$3"} --out "$tmp/o.json" 2>"$tmp/err" ||
		{ cat "$tmp/err" >&2; exit 99; }
	python3 -c "
import json, sys
print(json.dumps(json.load(open(sys.argv[1]))['rows'][0]['allocator']['oom'], sort_keys=True))" "$tmp/o.json"
}
got=$(oom $need)
[ "$got" = null ] || fail "108 MiB: oom is $got, not null"
got=$(oom $((need - 1)))
[ "$got" = "$wsoom" ] || fail "108 MiB - 1: oom is $got, not the workspace in step 1's forward"
got=$(oom $((76 * MiB)) 0 0)
[ "$got" = null ] || fail "76 MiB, no workspace: oom is $got, not null"
got=$(oom $((76 * MiB - 1)) 0 0)
[ "$got" = '{"bytes": 32768, "category": "activations", "phase": "forward", "step": 1}' ] ||
	fail "76 MiB - 1, no workspace: oom is $got, not the first activation of step 1's forward"
# allocator.max_batch_held is the largest micro-batch whose replay fits:
# at 108 MiB at least the batch of 4 above; its replay runs out of nothing
# and one more runs out. Null without --device-mem.
held_at() {
	"$zerosim" theory --layers 2048,2048 --world 1 --schemes dp --unit model --allocator cuda --device-mem $need \
		--device-overhead 0 --batch "$1" --out "$tmp/o.json" 2>"$tmp/err" || { cat "$tmp/err" >&2; exit 99; }
	python3 -c "
import json, sys
a = json.load(open(sys.argv[1]))['rows'][0]['allocator']
print(a['max_batch_held'], 'fits' if a['oom'] is None else 'oom')" "$tmp/o.json"
}
set -- $(held_at 4)
mb=$1
{ [ "$mb" -ge 4 ] && [ "$2" = fits ] && [ "$(held_at "$mb")" = "$mb fits" ] &&
	[ "$(held_at $((mb + 1)))" = "$mb oom" ]; } ||
	fail "108 MiB: max_batch_held $mb is not the largest batch whose replay fits"
"$zerosim" theory --layers 2048,2048 --world 1 --schemes dp --unit model --allocator cuda --out "$tmp/o.json" &&
	python3 -c "
import json, sys
assert json.load(open(sys.argv[1]))['rows'][0]['allocator']['max_batch_held'] is None" "$tmp/o.json" ||
	fail "max_batch_held without --device-mem is not null"

# allocator.max_batch_allocated ("on allocated", the text's column beside
# "held") is the same replayed step's: the largest micro-batch whose
# allocated peak (each block rounded, no limit) is within --device-mem
# less --reserve, so never below max_batch_held (reserved >= allocated for
# the same step). Each row is held to its own replays at b and b + 1 (run
# without --device-mem, where nothing runs out): b's allocated peak fits,
# b + 1's does not; and held's b + 1 runs out, or holds more than usable.
on_allocated() { # usable-bytes theory-args...
	usable=$1
	shift
	"$zerosim" theory "$@" --allocator cuda --out "$tmp/ma.json" 2>"$tmp/err" || { cat "$tmp/err" >&2; exit 99; }
	set -- $(python3 -c "
import json, sys
a = json.load(open(sys.argv[1]))['rows'][0]['allocator']
print(a['max_batch_allocated'], a['max_batch_held'])" "$tmp/ma.json")
	echo "$1 $2"
}
peak_at() { # b theory-args... (without --device-mem): allocated and held peaks
	b=$1
	shift
	"$zerosim" theory "$@" --batch "$b" --allocator cuda --out "$tmp/mp.json" 2>"$tmp/err" || { cat "$tmp/err" >&2; exit 99; }
	python3 -c "
import json, sys
a = json.load(open(sys.argv[1]))['rows'][0]['allocator']
print(a['allocated_peak_bytes'], a['reserved_peak_bytes'] + a['device_overhead']['total_bytes'])" "$tmp/mp.json"
}
check_rows() { # name usable-bytes device-args -- shape-args...
	name=$1 usable=$2 dev=$3
	shift 3
	set -- $(on_allocated "$usable" $dev "$@") "$@"
	ba=$1 bh=$2
	shift 2
	[ "$bh" -le "$ba" ] || { fail "$name: on held $bh above on allocated $ba"; return; }
	[ "$ba" -ge 1 ] || { fail "$name: nothing fits on allocated (the case is sized so some does)"; return; }
	set -- $(peak_at "$ba" "$@") $(peak_at $((ba + 1)) "$@")
	[ "$1" -le "$usable" ] && [ "$3" -gt "$usable" ] ||
		fail "$name: on allocated $ba: allocated peaks $1 at $ba, $3 at $((ba + 1)), usable $usable"
	echo "$name: on allocated $ba, on held $bh" >>"$tmp/rows"
}
: >"$tmp/rows"
# (the MLP sized without cuBLAS's workspace, as the 76 MiB case above)
check_rows "MLP dp" $((76 * MiB)) "--device-mem $((76 * MiB)) --device-overhead 0" \
	--layers 2048,2048 --world 1 --schemes dp --unit model --cublas-workspace 0
check_rows "torch zero1 N=2" $((300 * MiB - 20 * MiB)) "--device-mem $((300 * MiB)) --reserve $((20 * MiB)) --device-overhead 0" \
	--layers 2048,2048,1400,2048 --framework torch --schemes zero1 --world 2 --unit model
check_rows "gpt2 torch zero3 N=4" 6000000000 "--device-mem 8GB --reserve 2GB" \
	--model gpt2 --framework torch --schemes zero3 --world 4 --unit layer --seq 1024
check_rows "llama-3-8b zero3 N=8" 80000000000 "--device-mem 80GB" \
	--model llama-3-8b --framework torch --schemes zero3 --world 8 --unit layer \
	--seq 4096 --recompute full

# The fixed costs are the device's, outside the allocator: with
# --device-overhead F the same step needs 108 MiB + F (and one byte less
# fails where it failed above); without it, at N = 1, the documented CUDA
# context (500 MB) and no NCCL communicator (docs/schedule.md, "The
# device's fixed costs"); cuBLAS's workspace is not one of them but a
# request of the replay, and config.allocator says its size.
got=$(oom $((need + 1000)) 1000)
[ "$got" = null ] || fail "108 MiB + 1000 with 1000 fixed: oom is $got, not null"
got=$(oom $((need + 999)) 1000)
[ "$got" = "$wsoom" ] || fail "108 MiB + 999 with 1000 fixed: oom is $got, not the workspace"
fixed=500000000
"$zerosim" theory --layers 2048,2048 --world 1 --schemes dp --unit model --allocator cuda \
	--device-mem $((need + fixed)) --out "$tmp/o.json" 2>"$tmp/err" || { cat "$tmp/err" >&2; exit 99; }
python3 -c "
import json, sys
d = json.load(open(sys.argv[1]))
a = d['rows'][0]['allocator']
f = a['device_overhead']
assert a['oom'] is None, a['oom']
assert f == {'cuda_context_bytes': 500000000, 'nccl_bytes': 0, 'nccl_communicators': 0,
             'nccl_bytes_per_communicator': 0, 'nccl_channels': None, 'nccl_buffsize_bytes': None,
             'total_bytes': int(sys.argv[2])}, f
assert d['config']['allocator']['cublas_workspace_bytes'] == 33554432, d['config']['allocator']
" "$tmp/o.json" "$fixed" || fail "the default fixed costs at N = 1 are not the context alone, or no workspace size"
"$zerosim" theory --layers 2048,2048 --world 1 --schemes dp --unit model --allocator cuda \
	--device-mem $((need + fixed - 1)) --out "$tmp/o.json" 2>"$tmp/err" || { cat "$tmp/err" >&2; exit 99; }
python3 -c "
import json, sys
assert json.load(open(sys.argv[1]))['rows'][0]['allocator']['oom'] is not None
" "$tmp/o.json" || fail "one byte below 108 MiB + the default fixed costs fits"
# NCCL's buffers of the one communicator: 544 MB at N = 2, 688 MB above
# (NCCL issue 964's measured figures).
"$zerosim" theory --layers 64,64 --world 1,2,3,8 --schemes dp --unit model --allocator cuda --out "$tmp/o.json" \
	2>"$tmp/err" || { cat "$tmp/err" >&2; exit 99; }
got=$(python3 -c "
import json, sys
print(' '.join(str(r['allocator']['device_overhead']['nccl_bytes']) for r in json.load(open(sys.argv[1]))['rows']))
" "$tmp/o.json")
[ "$got" = "0 544000000 688000000 688000000" ] || fail "NCCL's buffers at N = 1, 2, 3, 8: $got"
# With --nccl-channels 8, NCCL 2.21.5's source (tests/test_nccl.c works it
# by hand): per channel a 2 MiB send and a 10 MiB receive buffer at N = 2,
# two of each above; 25 structures of 2 MiB.
"$zerosim" theory --layers 64,64 --world 1,2,3,8 --schemes dp --unit model --allocator cuda --nccl-channels 8 \
	--out "$tmp/o.json" 2>"$tmp/err" || { cat "$tmp/err" >&2; exit 99; }
got=$(python3 -c "
import json, sys
for r in json.load(open(sys.argv[1]))['rows']:
    f = r['allocator']['device_overhead']
    print(f['nccl_bytes'], f['nccl_communicators'], f['nccl_bytes_per_communicator'], f['nccl_channels'],
          f['nccl_buffsize_bytes'], f['total_bytes'] - f['cuda_context_bytes'], end=';')
" "$tmp/o.json")
want="0 0 0 8 4194304 0;153092096 1 153092096 8 4194304 153092096;253755392 1 253755392 8 4194304 253755392;"
want="${want}253755392 1 253755392 8 4194304 253755392;"
[ "$got" = "$want" ] || fail "NCCL's buffers at 8 channels, N = 1, 2, 3, 8: $got"
"$zerosim" theory --layers 64,64 --world 2 --schemes dp --unit model --allocator cuda --nccl-channels 1 \
	--nccl-buffsize 1MiB --out "$tmp/o.json" 2>"$tmp/err" || { cat "$tmp/err" >&2; exit 99; }
# (2 MiB + 8 MiB) + 4 structures of 2 MiB: 18 MiB.
got=$(python3 -c "
import json, sys
print(json.load(open(sys.argv[1]))['rows'][0]['allocator']['device_overhead']['nccl_bytes'])
" "$tmp/o.json")
[ "$got" = $((18 * MiB)) ] || fail "NCCL's buffers at one channel of NCCL_BUFFSIZE 1 MiB: $got"
"$zerosim" theory --layers 64,64 --world 2,8 --schemes dp --unit model --allocator cuda --nccl-channels 8 \
	>"$tmp/t.txt" 2>"$tmp/err" || fail "text: $(cat "$tmp/err")"
grep -q "^NCCL: 1 communicator per rank (.*), each 253.76 MB: from NCCL 2.21.5's source at 8 channels and NCCL_BUFFSIZE 4194304 bytes.$" \
	"$tmp/t.txt" || fail "the text does not say what NCCL's buffers come from: $(grep NCCL "$tmp/t.txt")"
grep -q "NCCL's buffers 253.76 MB (none at N = 1, 153.09 MB at N = 2)" "$tmp/t.txt" ||
	fail "the text's fixed costs are not the formula's: $(grep NCCL "$tmp/t.txt")"

# The text judges the fit on what the GPU holds: the same two devices.
"$zerosim" theory --layers 2048,2048 --world 1 --schemes dp --unit model --allocator cuda \
	--device-mem $need --device-overhead 0 >"$tmp/t.txt" 2>"$tmp/err" || fail "text: $(cat "$tmp/err")"
grep -q "^    1  dp .*  yes " "$tmp/t.txt" || fail "text: 108 MiB does not fit: $(cat "$tmp/t.txt")"
"$zerosim" theory --layers 2048,2048 --world 1 --schemes dp --unit model --allocator cuda \
	--device-mem $((need - 1)) --device-overhead 0 >"$tmp/t.txt" 2>"$tmp/err" || fail "text: $(cat "$tmp/err")"
grep -q "^    1  dp .*   no " "$tmp/t.txt" && grep -q "out of memory in step 1's forward: a block of cublas_workspace of 33.55 MB (33554432 bytes)" \
	"$tmp/t.txt" || fail "text: 108 MiB - 1 fits or names no block: $(cat "$tmp/t.txt")"
# The largest micro-batch on what the GPU holds is the last one whose
# replay runs out of nothing: the next one runs out.
"$zerosim" theory --layers 2048,2048 --world 1 --schemes dp --unit model --allocator cuda --device-mem 1GB \
	--device-overhead 0 >"$tmp/t.txt" 2>"$tmp/err" || fail "text: $(cat "$tmp/err")"
mb=$(awk '$1 == 1 && $2 == "dp" && $8 == "yes" {print $10}' "$tmp/t.txt")
[ -n "$mb" ] || fail "text: no largest micro-batch on held: $(cat "$tmp/t.txt")"
for b in "$mb" $((mb + 1)); do
	"$zerosim" theory --layers 2048,2048 --world 1 --schemes dp --unit model --allocator cuda --device-mem 1GB \
		--device-overhead 0 --batch "$b" --out "$tmp/b$b.json" 2>"$tmp/err" || { cat "$tmp/err" >&2; exit 99; }
done
python3 -c "
import json, sys
a, b = (json.load(open(f))['rows'][0]['allocator']['oom'] for f in sys.argv[1:3])
assert a is None and b is not None, (a, b)
" "$tmp/b$mb.json" "$tmp/b$((mb + 1)).json" || fail "micro-batch $mb is not the last that fits 1 GB"

# The report's fig10-allocator replays rank 0's step from the file (its
# live blocks, then its events) through the same model: with one step, and
# so the run's whole trace from an empty cache, its highest reserved is the
# run's own replay's (measure's, in the engine); a report of files without
# --allocator draws no such figure.
"$zerosim" measure -q --layers 256,1024,1024,256 --world 1,2 --steps 1 --timeline --allocator cuda \
	--out "$tmp/fm.json" 2>"$tmp/err" || { cat "$tmp/err" >&2; exit 99; }
"$zerosim" theory --layers 256,1024,1024,256 --world 1,2 --steps 1 --out "$tmp/ft.json" 2>"$tmp/err" ||
	{ cat "$tmp/err" >&2; exit 99; }
"$zerosim" report --measured "$tmp/fm.json" --theory "$tmp/ft.json" --no-render --out "$tmp/fr" >"$tmp/out" 2>&1 ||
	fail "report with the allocator: $(cat "$tmp/out")"
python3 -c "
import json, sys
m = json.load(open(sys.argv[1]))
blocks, cur = [], []
for line in open(sys.argv[2]):
    if line.startswith('# ') and 'unit=' in line:
        cur = []
        blocks.append((line.split()[1], cur))
    elif line.strip() and not line.startswith('#'):
        cur.append(float(line.split()[2]))
runs = {r['scheme']: r for r in m['runs'] if r['world'] == 2 and r['unit'] == 'model'}
assert len(blocks) == 4, blocks
for scheme, res in blocks:
    want = runs[scheme]['allocator']['per_rank']['reserved_peak_bytes'][0]
    got = round(max(res) * m['config']['params'])
    assert got == want, (scheme, got, want)
" "$tmp/fm.json" "$tmp/fr/figures/fig10-allocator.dat" || fail "fig10-allocator's reserved is not the run's replay's"
"$zerosim" measure -q --layers 256,1024,256 --world 2 --steps 1 --timeline --out "$tmp/gm.json" 2>"$tmp/err" &&
"$zerosim" theory --layers 256,1024,256 --world 2 --steps 1 --out "$tmp/gt.json" 2>"$tmp/err" &&
"$zerosim" report --measured "$tmp/gm.json" --theory "$tmp/gt.json" --no-render --out "$tmp/gr" >"$tmp/out" 2>&1 ||
	fail "report without the allocator: $(cat "$tmp/out")"
[ ! -e "$tmp/gr/figures/fig10-allocator.dat" ] || fail "a report without --allocator draws fig10-allocator"
[ -z "$(grep '^allocator:' "$tmp/gr/flags.txt")" ] || fail "a report without --allocator has allocator: lines"
# flags.txt names fragmentation as what the GPU reserves above the blocks:
# one line per run, with the file's own replay of its rank.
python3 -c "
import json, re, sys
m = json.load(open(sys.argv[1]))
lines = [l for l in open(sys.argv[2]) if l.startswith('allocator: ')]
assert len(lines) == len(m['runs']), (len(lines), len(m['runs']))
for r in m['runs']:
    a = r['allocator']
    want = ('allocator: %s N=%d unit=%s rank %d: reserved peak %d B (%+d B from the tracked peak) = allocated %d B '
            '+ cached free %d B' % (r['scheme'], r['world'], r['unit'], a['rank'], a['reserved_peak_bytes'],
                                      a['reserved_peak_bytes'] - r['peak_bytes'],
                                      a['allocated_at_reserved_peak_bytes'], a['fragmentation_bytes']))
    assert any(l.startswith(want) for l in lines), want
" "$tmp/fm.json" "$tmp/fr/flags.txt" || fail "flags.txt's allocator: lines are not the runs' replays"

# --- the options ----------------------------------------------------------
refused() {
	want=$1
	shift
	"$zerosim" measure -q --layers 4,8,4 --world 1 "$@" --out "$tmp/no.json" >"$tmp/out" 2>"$tmp/err"
	rc=$?
	[ "$rc" = 2 ] || fail "$*: exit $rc, not 2"
	[ "$(wc -l <"$tmp/err")" = 1 ] || fail "$*: $(wc -l <"$tmp/err") lines on stderr, not 1"
	grep -q -- "$want" "$tmp/err" || fail "$*: '$(cat "$tmp/err")' does not say '$want'"
	[ ! -e "$tmp/no.json" ] || fail "$*: wrote --out"
}
refused "needs --allocator cuda" --alloc-conf expandable_segments:True
refused "max_split_size_mb" --allocator cuda --alloc-conf max_split_size_mb:10
refused "not an allocator" --allocator tlsf
refused "needs --timeline" --timeline-ranks all
refused "give 0" --timeline --timeline-ranks 2
refused "needs --allocator cuda" --cublas-workspace 0
refused "cublas-workspace" --allocator cuda --cublas-workspace lots
"$zerosim" theory --layers 4,8,4 --cublas-workspace 8MiB --out "$tmp/no.json" 2>"$tmp/err"
[ $? = 2 ] && grep -q "needs --allocator cuda" "$tmp/err" && [ ! -e "$tmp/no.json" ] ||
	fail "theory took --cublas-workspace without --allocator: $(cat "$tmp/err")"
"$zerosim" theory --layers 4,8,4 --allocator cuda --alloc-conf expandable_segments:maybe --out "$tmp/no.json" 2>"$tmp/err"
[ $? = 2 ] && [ "$(wc -l <"$tmp/err")" = 1 ] && [ ! -e "$tmp/no.json" ] || fail "theory took a bad --alloc-conf: $(cat "$tmp/err")"
"$zerosim" theory --layers 4,8,4 --device-overhead 1GB --out "$tmp/no.json" 2>"$tmp/err"
[ $? = 2 ] && grep -q "needs --allocator cuda" "$tmp/err" && [ ! -e "$tmp/no.json" ] ||
	fail "theory took --device-overhead without --allocator: $(cat "$tmp/err")"
"$zerosim" theory --layers 4,8,4 --allocator cuda --device-overhead lots --out "$tmp/no.json" 2>"$tmp/err"
[ $? = 2 ] && [ "$(wc -l <"$tmp/err")" = 1 ] && [ ! -e "$tmp/no.json" ] ||
	fail "theory took a bad --device-overhead: $(cat "$tmp/err")"
"$zerosim" measure -q --layers 4,8,4 --world 2 --timeline --out "$tmp/p.json" 2>"$tmp/err" || { cat "$tmp/err" >&2; exit 99; }
python3 -c "
import json, sys
r = json.load(open(sys.argv[1]))
assert 'allocator' not in r['config'] and all('allocator' not in x and 'timeline_ranks' not in x for x in r['runs'])
" "$tmp/p.json" || fail "a run without --allocator or --timeline-ranks has their keys"

[ "$fails" -eq 0 ] || exit 1
cat "$tmp/rows"
echo "alloc_replay: ok"

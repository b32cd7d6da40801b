#!/usr/bin/env python3
"""Replay a measured step's allocations on a real GPU and compare.

    zerosim measure --layers 1024,4096,1024 --world 2 --steps 1 \\
        --timeline --timeline-ranks all --allocator cuda --out m.json
    python3 tests/gpu_replay.py m.json [--rank R] [--dry-run]

For each rank of the first run (or --rank R's) this takes the blocks the
rank held when the step began (timeline_live) and the step's alloc and
free events (timeline, or timeline_ranks[R - 1]), in order and at their
sizes, and makes them on the GPU with
torch.cuda.caching_allocator_alloc / caching_allocator_delete on the
current stream, from an emptied cache, under the PYTORCH_CUDA_ALLOC_CONF
the file's config.allocator.conf names. It then prints PyTorch's own
counters (memory_stats(): allocated_bytes.all.peak,
reserved_bytes.all.peak, segment.all.peak, num_device_alloc, and
memory_reserved() at the end) beside zerosim's replay of the same blocks
(the run's allocator.per_rank) and exits 1 where one differs.

The two replays cover the same blocks from the same empty cache only when
the rank's live blocks are its first allocations (ids 1..n, nothing made
and freed before the step) and the step is the run's only one: measure
with --steps 1. The script checks that and, where it does not hold,
prints the GPU's figures alone. The GPU must run PyTorch 2.6.x (the
release zerosim's model follows, file's cuda_alloc); nothing else may
allocate through the caching allocator meanwhile (the script makes no
tensors of its own). cuBLAS's workspace is in both: the trace's
"workspace" event (id 0, made at the first matmul, never freed) is one
more request; the CUDA context and NCCL's buffers are outside both
(docs/schedule.md, "The device's fixed costs").

--dry-run reads and checks the trace without a GPU (or torch).

Not a CI test: zerosim's checks never need a GPU. docs/schedule.md ("A
replay on a real GPU") says how to run it.
"""
import argparse
import json
import os
import sys

KEYS = [  # zerosim's key, memory_stats()'s
    ("allocated_peak_bytes", "allocated_bytes.all.peak"),
    ("reserved_peak_bytes", "reserved_bytes.all.peak"),
    ("segments_peak", "segment.all.peak"),
    ("cuda_malloc_calls", "num_device_alloc"),
]


def rank_trace(run, rank):
    """(live blocks, events) of one rank."""
    if rank == 0:
        return run.get("timeline_live"), run.get("timeline")
    for r in run.get("timeline_ranks") or []:
        if r["rank"] == rank:
            return r["timeline_live"], r["timeline"]
    return None, None


def comparable(live, events):
    """Whether live + events are the rank's whole run from its first block."""
    ids = [b["id"] for b in live]
    if ids != list(range(1, len(ids) + 1)):
        return False
    allocs = [e["id"] for e in events if e["op"] == "alloc"]
    return allocs == list(range(len(ids) + 1, len(ids) + 1 + len(allocs)))


def check(live, events):
    """The trace is whole: every free names a live block."""
    held = {b["id"]: b["bytes"] for b in live}
    for e in events:
        if e["op"] in ("alloc", "workspace"):
            if e["id"] in held:
                return "block %d allocated twice" % e["id"]
            held[e["id"]] = e["bytes"]
        elif e["op"] == "free":
            if held.pop(e["id"], None) is None:
                return "block %d freed but not live" % e["id"]
    return None


def replay_gpu(torch, live, events):
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats()
    torch.cuda.reset_accumulated_memory_stats()
    base = torch.cuda.memory_stats()
    if base.get("allocated_bytes.all.current", 0) != 0:
        sys.exit("gpu_replay: something else holds %d bytes of the caching allocator"
                 % base["allocated_bytes.all.current"])
    stream = torch.cuda.current_stream()
    ptr = {}
    for b in live:
        if b["bytes"] > 0:
            ptr[b["id"]] = torch.cuda.caching_allocator_alloc(b["bytes"], stream=stream)
    for e in events:
        if e["op"] in ("alloc", "workspace") and e["bytes"] > 0:
            ptr[e["id"]] = torch.cuda.caching_allocator_alloc(e["bytes"], stream=stream)
        elif e["op"] == "free" and e["id"] in ptr:
            torch.cuda.caching_allocator_delete(ptr.pop(e["id"]))
    torch.cuda.synchronize()
    st = torch.cuda.memory_stats()
    out = {k: st.get(k, 0) for _, k in KEYS}
    out["memory_reserved"] = torch.cuda.memory_reserved()
    for p in ptr.values():
        torch.cuda.caching_allocator_delete(p)
    torch.cuda.empty_cache()
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("measured", help="zerosim measure --timeline --timeline-ranks all --allocator cuda JSON")
    ap.add_argument("--rank", type=int, help="one rank (default: every rank in the file)")
    ap.add_argument("--run", type=int, default=0, help="index into runs[] (default 0)")
    ap.add_argument("--dry-run", action="store_true", help="check the trace; no GPU")
    a = ap.parse_args()

    with open(a.measured) as f:
        doc = json.load(f)
    runs = doc.get("runs") or []
    if not 0 <= a.run < len(runs):
        sys.exit("gpu_replay: %s has no run %d" % (a.measured, a.run))
    run = runs[a.run]
    if run.get("timeline") is None or "cuda_alloc" not in run:
        sys.exit("gpu_replay: run %d has no trace (measure with --timeline)" % a.run)
    ranks = [a.rank] if a.rank is not None else list(range(run["world"]))
    conf = ((doc.get("config") or {}).get("allocator") or {}).get("conf", "")
    zs = run.get("allocator")  # zerosim's replay, with --allocator cuda

    torch = None
    if not a.dry_run:
        # The allocator reads its options once, at its first use.
        if conf:
            os.environ["PYTORCH_CUDA_ALLOC_CONF"] = conf
        try:
            import torch  # noqa: E402 (after the environment is set)
        except ImportError:
            sys.exit("gpu_replay: no torch here (--dry-run checks the trace without it)")
        if not torch.cuda.is_available():
            sys.exit("gpu_replay: no CUDA device (--dry-run checks the trace without one)")
        print("torch %s on %s; trace follows %s; PYTORCH_CUDA_ALLOC_CONF=%r"
              % (torch.__version__, torch.cuda.get_device_name(), run["cuda_alloc"], conf))
        if not torch.__version__.startswith("2.6"):
            print("gpu_replay: warning: zerosim follows PyTorch 2.6.0's allocator, this is %s"
                  % torch.__version__)

    bad = 0
    for rank in ranks:
        live, events = rank_trace(run, rank)
        if live is None:
            sys.exit("gpu_replay: no trace of rank %d (measure with --timeline-ranks all)" % rank)
        why = check(live, events)
        if why:
            sys.exit("gpu_replay: rank %d: %s" % (rank, why))
        same = comparable(live, events) and zs is not None
        nalloc = sum(e["op"] == "alloc" for e in events)
        print("rank %d: %d live blocks, %d events (%d allocations)%s"
              % (rank, len(live), len(events), nalloc,
                 "" if same else "; not the run's whole trace (--steps 1 and --allocator cuda "
                 "compare it with zerosim's replay): the GPU's figures alone"))
        if a.dry_run:
            continue
        gpu = replay_gpu(torch, live, events)
        for zkey, tkey in KEYS:
            z = zs["per_rank"][zkey][rank] if same else None
            mark = "" if z is None else ("  ok" if int(z) == gpu[tkey] else "  DIFFERS")
            bad += mark == "  DIFFERS"
            print("  %-26s gpu %14d  zerosim %14s%s" % (tkey, gpu[tkey], "-" if z is None else int(z), mark))
        print("  %-26s gpu %14d" % ("memory_reserved() at end", gpu["memory_reserved"]))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())

"""fsdp_torch — what real PyTorch 1.13's FSDP allocates for its collectives.

Runs FullyShardedDataParallel on the CPU over gloo (world size N, one
process per rank, a file rendezvous), on an MLP of the given widths with
torch.nn.Linear layers: unit "layer" wraps each layer in an FSDP unit of
its own inside the root, unit "model" makes the whole model the root unit;
FULL_SHARD and SHARD_GRAD_OP; "fp32", or "mixed": MixedPrecision with
param_dtype and reduce_dtype bfloat16 (the CPU has no fp16 matmul; the same
2 bytes as zerosim's fp16). Adam, zero_grad() with 1.13's default
set_to_none=False, three steps. In step 3 it records the CPU allocator's
events (torch.profiler, profile_memory=True) inside every unshard's
pre_unshard (where _mp_shard is made: "b", as zerosim's category buckets)
and unshard (the padded gathered copy, _full_param_padded: "g", category
gathered_params) and every post-backward hook ("b"), and prints, for rank
0, one line per configuration:

    STRATEGY UNIT PRECISION: b11094 g33282 ...

the allocations of more than 512 bytes, in order. Smaller ones are the
CPU's boxed Python scalars of the gradient divisions (4 and 8 B; on a GPU
host memory) and the profiler's record_function (288 B).

FSDP 1.13 needs CUDA and gloo lacks two collectives, so, before FSDP runs:
the stream and event calls become no-ops and the compute device the CPU;
_all_gather_base and _reduce_scatter_base become point-to-point exchanges
that allocate nothing while a step runs (the reduce-scatter's receive
buffer is made before); a one-rank all-reduce is skipped (gloo has none
for bfloat16). Python 3.11 also refuses a dataclass default of torch
1.13's (sharded_tensor/metadata.py); it is let through. FSDP's own code,
which makes the buffers counted here, runs unchanged. The ranks talk over
the loopback (GLOO_SOCKET_IFNAME=lo unless set).

Usage: python3 fsdp_torch.py N WIDTHS  (e.g. 3 64,256,64)
"""
import contextlib
import dataclasses
import functools
import sys

_get_field = dataclasses._get_field


def _let_unhashable_default(cls, a_name, a_type, default_kw_only=False):
    d = cls.__dict__.get(a_name, dataclasses.MISSING)
    if isinstance(d, dataclasses.Field):
        d = d.default
    if d is not dataclasses.MISSING and type(d).__hash__ is None:
        type(d).__hash__ = object.__hash__
    return _get_field(cls, a_name, a_type, default_kw_only)


dataclasses._get_field = _let_unhashable_default

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.nn as nn  # noqa: E402
from torch.profiler import ProfilerActivity, profile  # noqa: E402


class _Stream:
    def __init__(self, *a, **k):
        pass

    def wait_stream(self, *a):
        pass

    def synchronize(self):
        pass


class _Event:
    def record(self, *a):
        pass

    def synchronize(self):
        pass

    def query(self):
        return True


TV = tuple(int(x) for x in torch.__version__.split("+")[0].split("a")[0].split(".")[:2])
if TV < (2, 0):
    # 1.13's FSDP runs on CUDA only: its stream and event calls no-ops,
    # its compute device the CPU
    torch.cuda.is_available = lambda: True
    torch.cuda.current_device = lambda: 0
    torch.cuda.device_count = lambda: 1
    torch.cuda.Stream = _Stream
    torch.cuda.Event = lambda *a, **k: _Event()
    torch.cuda.current_stream = lambda *a, **k: _Stream()
    torch.cuda.stream = lambda *a, **k: contextlib.nullcontext()
    torch.cuda.synchronize = lambda *a, **k: None
    torch.Tensor.record_stream = lambda self, s: None
    import torch.distributed.fsdp.fully_sharded_data_parallel as fsdp_mod  # noqa: E402
    from torch.distributed.fsdp.flat_param import FlatParamHandle  # noqa: E402
    fsdp_mod.FullyShardedDataParallel._get_compute_device = lambda self, *a, **k: torch.device("cpu")
    POST_BACKWARD = (fsdp_mod.FullyShardedDataParallel, "_post_backward_hook")
else:
    # 2.x's FSDP (FSDP1) takes device_id=torch.device("cpu") (the caller
    # gives it): its device handle is then torch.cpu
    # (_common_utils.py _FSDPDeviceHandle over torch.cpu, whose Stream,
    # Event and stream() are no-ops, torch/cpu/__init__.py), and
    # _no_dispatch_record_stream skips a CPU tensor (_common_utils.py
    # 537-545): no shim of streams needed
    import torch.distributed.fsdp._runtime_utils as fsdp_mod  # noqa: E402
    from torch.distributed.fsdp._flat_param import FlatParamHandle  # noqa: E402
    POST_BACKWARD = (fsdp_mod, "_post_backward_hook")

from torch.distributed.fsdp import FullyShardedDataParallel as FSDP  # noqa: E402
from torch.distributed.fsdp import MixedPrecision, ShardingStrategy  # noqa: E402

RECV = {}  # dtype -> the reduce-scatter's receive buffer, made before any step


def all_gather_base(out, inp, group=None, async_op=False):
    all_gather(out.chunk(dist.get_world_size(group)), inp, group)


def all_gather(chunks, inp, group=None, async_op=False):
    """dist.all_gather into a list, which 2.x's FSDP calls on the CPU with
    the chunks of its padded unsharded flat parameter (_flat_param.py
    1439-1447: "HACK this should be handled by C10D"; gloo's would flatten
    them into a buffer of its own): the same exchange as above."""
    w, r = dist.get_world_size(group), dist.get_rank(group)
    chunks[r].copy_(inp)
    sends = [dist.isend(inp, q, group) for q in range(w) if q != r]
    for q in range(w):
        if q != r:
            dist.recv(chunks[q], q, group)
    for s in sends:
        s.wait()


def reduce_scatter_base(out, inp, group=None, op=None, async_op=False):
    w, r = dist.get_world_size(group), dist.get_rank(group)
    chunks = inp.chunk(w)
    recv = RECV[out.dtype][: out.numel()]
    sends = [dist.isend(chunks[q], q, group) for q in range(w) if q != r]
    out.copy_(chunks[r])
    for q in range(w):
        if q != r:
            dist.recv(recv, q, group)
            out.add_(recv)
    for s in sends:
        s.wait()


_all_reduce = dist.all_reduce


def all_reduce(t, *a, **k):
    if dist.get_world_size(k.get("group")) == 1:
        return None
    return _all_reduce(t, *a, **k)


# (2.x calls them all_gather_into_tensor and reduce_scatter_tensor,
# _flat_param.py 1449 and _runtime_utils.py 848; gloo's own would make
# buffers of their own)
dist._all_gather_base = dist.all_gather_into_tensor = all_gather_base
dist._reduce_scatter_base = dist.reduce_scatter_tensor = reduce_scatter_base
dist.all_gather = all_gather
dist.all_reduce = all_reduce

EVENTS = []
RECORDING = [False]


def recorded(fn, tag):
    @functools.wraps(fn)
    def run(*a, **k):
        if not RECORDING[0]:
            return fn(*a, **k)
        with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as p:
            ret = fn(*a, **k)
        EVENTS.extend(f"{tag}{e.nbytes()}" for e in p.profiler.kineto_results.events()
                      if e.name() == "[memory]" and e.nbytes() > 512)
        return ret
    return run


setattr(*POST_BACKWARD, recorded(getattr(*POST_BACKWARD), "b"))
FlatParamHandle.pre_unshard = recorded(FlatParamHandle.pre_unshard, "b")
FlatParamHandle.unshard = recorded(FlatParamHandle.unshard, "g")


def one(widths, strategy, unit, precision):
    torch.manual_seed(0)
    st = getattr(ShardingStrategy, strategy)
    dt = torch.bfloat16
    mpc = MixedPrecision(param_dtype=dt, reduce_dtype=dt) if precision == "mixed" else None
    layers = [nn.Linear(widths[i], widths[i + 1]) for i in range(len(widths) - 1)]
    if unit == "layer":
        layers = [FSDP(m, sharding_strategy=st, mixed_precision=mpc) for m in layers]
    model = FSDP(nn.Sequential(*layers), sharding_strategy=st, mixed_precision=mpc)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    x = torch.randn(4, widths[0])
    if precision == "mixed":
        x = x.to(dt)
    del EVENTS[:]
    for step in range(3):
        RECORDING[0] = step == 2
        model(x).float().sum().backward()
        RECORDING[0] = False
        opt.step()
        opt.zero_grad()
    return list(EVENTS)


def worker(rank, world, widths, store):
    dist.init_process_group("gloo", init_method="file://" + store, rank=rank, world_size=world)
    for dt in (torch.bfloat16, torch.float32):
        RECV[dt] = torch.empty(sum(a * b + b for a, b in zip(widths, widths[1:])), dtype=dt)
    for strategy in ("FULL_SHARD", "SHARD_GRAD_OP"):
        for unit in ("model", "layer"):
            for precision in ("fp32", "mixed"):
                got = one(widths, strategy, unit, precision)
                if rank == 0:
                    print(f"{strategy} {unit} {precision}: {' '.join(got)}", flush=True)
    import hf_torch
    hf_torch.finish(rank, store)


def main():
    world, widths = int(sys.argv[1]), [int(w) for w in sys.argv[2].split(",")]
    import hf_torch  # its spawn: the rendezvous, and gloo's teardown told from the work
    hf_torch.spawn(worker, world, lambda store: (world, widths, store))


if __name__ == "__main__":
    main()

"""ds3_saved — which gathered parameters DeepSpeed's ZeRO-3 release cannot free in PyTorch 1.13.

A ZeRO-3 release (DeepSpeed 38327e0, partition_parameters.py free_param,
282-291) swaps a parameter's data for torch.empty(0): the gathered storage
goes unless a node of the graph saved a view of it. This runs the reference
model's forward (tests/hf_torch.py, the Hugging Face model op for op) with
every parameter's data a gathered copy, releases every parameter as
DeepSpeed's post-forward hook does while its trace is recorded
(partitioned_param_coordinator.py release_sub_module, 422-441), and prints
one line per parameter whose gathered storage a saved tensor still holds:
NAME NODE.ATTRIBUTE SHAPE STRIDE. A leaf saved as itself sees the swap (it
holds no storage of its own); a view such as F.linear's weight.t() does not
(docs/schedule.md, "ZeRO-3 over the PyTorch step", N > 1).

Usage: python3 ds3_saved.py MODEL.json  (seq 32, batch 2, fp32, eager)

With --release-order N (a documented command, not run by make check):
when a held copy goes. Every parameter is gathered as DeepSpeed's
_allgather_params_coalesced makes it at N ranks (partition_parameters.py
1817-1822, 1886: a flat of ceil(n/N)*N elements, the data its narrow), the
forward run, every parameter released, gathered again (the pre-backward
fetch), and backward run inside torch.profiler (profile_memory=True, from
before the first gather). For the head's weight (its flat's size,
ceil(V*d/N)*N*4 bytes, is the only one of that size where N does not
divide V*d), it prints the allocator's events before that flat's free
in backward, and fails unless the free comes at the end of the head's
MmBackward0: after mat2's gradient (+V*d*4) and self's (+B*T*d*4) are
made, the incoming gradient (-B*T*V*4) and the saved input (-B*T*d*4)
freed, nothing made between (docs/schedule.md, "ZeRO-3 over the PyTorch
step", N > 1, read again).

With --hooks FILE (tests/ds3_torch.sh; after the list above, in the same
process, on the model with its config's dropout): where DeepSpeed's ZeRO-3 hooks run in
one forward and backward, as DeepSpeedZeRoOffload._register_deepspeed_module
registers them on every module (runtime/zero/parameter_offload.py at
38327e0, 276-454; registered in this order, 445-454): its forward pre-hook (the fetch), its
forward hook (the release), PreBackwardFunctionForModule applied to its
outputs by a forward hook (runs once their gradient is whole: the backward
fetch), PostBackwardFunctionModule applied by a forward pre-hook to its
inputs that require grad (runs when the last of their gradients has been
made: the backward release; PreBackwardFunctionForModule 357-378,
PostBackwardFunctionModule 412-437, both in 1.13's style). Both Functions return x.detach() and hand
the gradient on as it is. One line per hook run of a module that owns
parameters, in the order they run, into FILE: ds3:NAME:fwd, :fwd_end, :bwd,
:bwd_end and the live bytes since the hook before it, over the second of two
steps of the loop (1.13's Adam and zero_grad at their defaults, the loss and
logits held to the step's end), read from the allocator's events as
tests/hf_torch.py reads its boundaries: what zerosim's ds3 marks must say
(util/autograd.c, ds3_mark; tests/ag_events ds3=1).
"""
import argparse
import math
import sys

import torch

import hf_torch


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("model")
    ap.add_argument("--release-order", type=int, default=0, metavar="N")
    ap.add_argument("--hooks", metavar="FILE")
    m = ap.parse_args()
    model, cfg = build(m.model, "0")
    if m.release_order:
        sys.exit(release_order(model, cfg, m.release_order))
    # each parameter's data a copy of its own (the gather's output), by
    # storage: the tied table once (module.parameters() dedups it)
    gathered = {}
    for name, p in model.named_parameters():
        p.data = p.data.clone()
        gathered[p.data.storage().data_ptr()] = name
    ids = torch.randint(0, cfg["vocab_size"], (2, 32))
    loss, logits = model(ids, ids)
    for p in model.parameters():
        p.data = torch.empty(0, dtype=p.dtype)  # free_param
    held, seen, stack = set(), set(), [loss.grad_fn]
    while stack:
        fn = stack.pop()
        if fn is None or fn in seen:
            continue
        seen.add(fn)
        for attr in dir(fn):
            if not attr.startswith("_saved_"):
                continue
            try:
                v = getattr(fn, attr)
            except RuntimeError:
                continue
            for t in v if isinstance(v, (tuple, list)) else (v,):
                if isinstance(t, torch.Tensor) and t.numel() > 0 and t.storage().data_ptr() in gathered:
                    held.add((gathered[t.storage().data_ptr()], type(fn).__name__ + "." + attr, tuple(t.shape),
                              t.stride()))
        stack.extend(f for f, _ in fn.next_functions)
    for name, node, shape, stride in sorted(held):
        print(name, node, "x".join(map(str, shape)), ",".join(map(str, stride)))
    del logits
    if m.hooks:  # in the same process (one python a model in make check-torch)
        with open(m.hooks, "w") as f:
            hooks(*build(m.model, "config"), f)


def build(path, dropout):
    """The reference model (seq 32, batch 2, fp32, eager), dropout "0" or
    the config's (as zerosim reads it: --hooks), and its config"""
    a = argparse.Namespace(model=path, dropout=dropout, tied=None, recompute="none", mask="where")
    _, family, cfg, tied = hf_torch.build(a)
    torch.manual_seed(0)
    if family == "gpt2":
        model = hf_torch.GPT2LMHeadModel(cfg, tied, a.mask, False)
    elif family in hf_torch.FAMILY_ATTENTION:
        model = hf_torch.LlamaForCausalLM(cfg, tied, False, hf_torch.FAMILY_ATTENTION[family])
    else:
        sys.exit(f"ds3_saved: model_type {family!r} is not gpt2 or {', '.join(hf_torch.FAMILY_ATTENTION)}")
    model.train()
    return model, cfg


def hooks(model, cfg, out):
    """DeepSpeed's four hooks on every module, as 38327e0 writes them"""

    def tensors(x, f):
        if torch.is_tensor(x):
            return f(x)
        if isinstance(x, (tuple, list)):
            return type(x)(tensors(y, f) for y in x)
        return x

    for name, mod in model.named_modules():
        own = len(list(mod.parameters(recurse=False))) > 0

        def say(where, name=name, own=own):
            if own:
                hf_torch.mark(f"ds3:{name}:{where}")

        class Pre(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                return x.detach()

            @staticmethod
            def backward(ctx, g, say=say):
                say("bwd")
                return g

        class Post(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x, mod=mod):
                if x.requires_grad:
                    mod.ds_grads_remaining += 1
                return x.detach()

            @staticmethod
            def backward(ctx, g, mod=mod, say=say):
                mod.ds_grads_remaining -= 1
                if mod.ds_grads_remaining == 0:
                    say("bwd_end")
                return g

        def pre_fwd(mod, inputs, say=say):
            say("fwd")

        def post_bwd(mod, inputs, Post=Post):
            if not hasattr(mod, "ds_grads_remaining"):
                mod.ds_grads_remaining = 0
            return tensors(inputs, Post.apply)

        mod.register_forward_pre_hook(pre_fwd)
        mod.register_forward_hook(lambda mod, i, o, say=say: say("fwd_end"))
        mod.register_forward_hook(lambda mod, i, o, Pre=Pre: tensors(o, Pre.apply))
        mod.register_forward_pre_hook(post_bwd)
    # two steps of the loop (1.13's Adam and zero_grad at their defaults),
    # the second's forward and backward inside the profiler: the live
    # bytes at each hook, marks in the allocator's stream as
    # tests/hf_torch.py marks its boundaries
    from torch.profiler import ProfilerActivity, profile
    opt = torch.optim.Adam(model.parameters())
    ids = torch.randint(0, cfg["vocab_size"], (2, 32))
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        for step in range(2):
            opt.zero_grad()
            if step == 1:
                hf_torch.mark("step")
            loss, logits = model(ids, ids)
            loss.backward()
            opt.step()
            del loss, logits  # the loop holds them to the step's end, as zerosim's and hf_torch.py's
    stream = hf_torch.replay(hf_torch.memory_events(prof))
    start = next(i for i, (_, l) in enumerate(stream) if l == "step")
    last = None
    for live, label in stream[start:]:
        if label is not None and label.startswith("ds3:"):
            print(label, "" if last is None else f"{live - last:+d}", file=out)
            last = live


def release_order(model, cfg, world):
    from torch.profiler import ProfilerActivity, profile
    shapes = {id(p): p.shape for p in model.parameters()}

    def gather(p):
        n = int(torch.Size(shapes[id(p)]).numel())
        flat = torch.empty(math.ceil(n / world) * world)  # _allgather_params_coalesced's flat
        p.data = flat.narrow(0, 0, n).view(shapes[id(p)])

    ids = torch.randint(0, cfg["vocab_size"], (2, 32))
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        for p in model.parameters():
            gather(p)
        loss, logits = model(ids, ids)
        del logits
        for p in model.parameters():
            p.data = torch.empty(0, dtype=p.dtype)  # free_param
        for p in model.parameters():
            gather(p)  # the pre-backward fetch
        with torch.autograd.profiler.record_function("ds3_saved:backward"):
            loss.backward()
    events = list(prof.profiler.kineto_results.events())
    b0 = min(e.start_us() for e in events if e.name() == "ds3_saved:backward")
    mem = [e.nbytes() for e in events if e.name() == "[memory]" and e.start_us() >= b0]
    V = cfg["vocab_size"]
    d = cfg.get("n_embd", cfg.get("hidden_size"))
    BT = 2 * 32
    flat = math.ceil(V * d / world) * world * 4
    if flat == V * d * 4:
        return f"ds3_saved: N = {world} divides V*d: the head's flat is not told apart by its size"
    at = [i for i, x in enumerate(mem) if x == -flat]
    if len(at) != 1:
        return f"ds3_saved: {len(at)} frees of {flat} B in backward, not 1"
    got = mem[max(0, at[0] - 4):at[0] + 1]
    want = [V * d * 4, BT * d * 4, -BT * V * 4, -BT * d * 4, -flat]
    print("the head's forward copy (" + str(flat) + " B) freed in backward after:", " ".join(f"{x:+d}" for x in got))
    return 0 if got == want else f"ds3_saved: want {' '.join(f'{x:+d}' for x in want)}"


if __name__ == "__main__":
    main()

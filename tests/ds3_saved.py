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
"""
import argparse
import sys

import torch

import hf_torch


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("model")
    m = ap.parse_args()
    a = argparse.Namespace(model=m.model, dropout="0", tied=None, recompute="none", mask="where")
    _, family, cfg, tied = hf_torch.build(a)
    torch.manual_seed(0)
    if family == "gpt2":
        model = hf_torch.GPT2LMHeadModel(cfg, tied, a.mask, False)
    elif family in hf_torch.FAMILY_ATTENTION:
        model = hf_torch.LlamaForCausalLM(cfg, tied, False, hf_torch.FAMILY_ATTENTION[family])
    else:
        sys.exit(f"ds3_saved: model_type {family!r} is not gpt2 or {', '.join(hf_torch.FAMILY_ATTENTION)}")
    model.train()
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


if __name__ == "__main__":
    main()

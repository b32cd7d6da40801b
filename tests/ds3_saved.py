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

With --z3 N,... --z3-out FILE (tests/ds3_torch.sh; the same process, after
the above): DeepSpeed's ZeRO-3 at each N (class Zero3, z3_replay: its
allocations transcribed at 38327e0, rank 0 of N in one process, the
hooks above calling the coordinator's fetches and releases), two steps
profiled from the model's construction on; one JSON line an N into FILE:
the bytes between steps (after the last), each step's peak, its phase and
the bytes where it starts (docs/schedule.md, "ZeRO-3 over the PyTorch
step", "Held to PyTorch 1.13").

With --z3-accum K,... (tests/ds3_torch.sh; the same process, after the
above, at --z3-case-worlds' N): the same replay under DeepSpeed's
gradient_accumulation_steps K (a step K micro-steps of the batch's 2 rows,
the K micro-batches drawn at once as tests/ds_bf16_torch.py's): each the
engine's backward (engine.py 2085-2152: loss.float() / K, its mean logged
into self.losses, stage 3's backward, the epilogue's reduction at every
micro-step, 2050-2053), partition_grads copying into the gradient
partitions at micro_step_id 0 and adding into them after (stage3.py
1481-1487); each micro-step's marks LABEL@k, as zerosim's. One JSON line
an (N, K), "accum" K. With --z3-accum-case TARGETS[/FREEZE] (repeated):
the same at K = 2 over --z3-case's LoRA and frozen parameters.

With --z3-case TARGETS[/FREEZE] (repeated; tests/ds3_torch.sh; the same
process, after the above, at --z3-case-worlds' N, 1,2 unless given): the
same replay over the model with PEFT's lora.Linear on TARGETS ("default":
c_attn on gpt2, q_proj,v_proj on a llama; "all-linear"; "none": no
LoRA), rank --lora-r, alpha 8, dropout 0 (tests/ft_torch.py's
LoraLinear, peft/tuners/lora/layer.py v0.20.0 252-260 and 1030-1069;
every base parameter frozen, as ft_torch.py marks them), then the
parameters the --freeze pattern FREEZE names frozen (ft_torch.py's
freeze_matches): the frozen parameters partitioned by Init too
(parameter_offload.py 200-211, pp.py 1089-1100), each keeping its own
ds_tensor (defragment takes the trainable groups alone, stage3.py
357-360, 491-495), the gradient hooks on the trainable ones alone
(1161-1166), the persistent list every persistent parameter
(parameter_offload.py 256-268); one JSON line an (N, case) into FILE,
with each phase mark's live bytes in step 2 and each phase's peak there.
--attn sdpa (with --z3 alone, 2.x: PyTorch
2.6's root, tests/ds_torch26.sh): the models' attention through
scaled_dot_product_attention, as hf_torch.py's --attn sdpa.
"""
import argparse
import gc
import json
import math
import sys

import torch

import hf_torch


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("model")
    ap.add_argument("--release-order", type=int, default=0, metavar="N")
    ap.add_argument("--hooks", metavar="FILE")
    ap.add_argument("--z3", metavar="N,...", help="the ZeRO-3 replay at these world sizes (with --z3-out)")
    ap.add_argument("--z3-out", metavar="FILE")
    ap.add_argument("--z3-case", metavar="TARGETS[/FREEZE]", action="append", default=[],
                    help="the ZeRO-3 replay with LoRA on these targets (none: none), FREEZE frozen")
    ap.add_argument("--z3-case-worlds", metavar="N,...", default="1,2")
    ap.add_argument("--z3-accum", metavar="K,...", default="",
                    help="also the ZeRO-3 replay under gradient_accumulation_steps K (--z3-case-worlds' N)")
    ap.add_argument("--z3-accum-case", metavar="TARGETS[/FREEZE]", action="append", default=[],
                    help="also the ZeRO-3 replay under gradient_accumulation_steps 2 with LoRA and FREEZE")
    ap.add_argument("--lora-r", type=int, default=4)
    ap.add_argument("--attn", choices=["eager", "sdpa"], default="eager",
                    help="--z3's models' attention (sdpa: 2.x's, as hf_torch.py's --attn sdpa)")
    m = ap.parse_args()
    if m.attn == "sdpa" and (hf_torch.TV < (2, 0) or not m.z3 or m.hooks or m.release_order):
        ap.error("--attn sdpa: with --z3 alone, under PyTorch 2.x (its scaled_dot_product_attention)")
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
    if m.z3:  # the same process again
        with open(m.z3_out, "w") as f:
            for world in (int(w) for w in m.z3.split(",")):
                print(json.dumps(z3_replay(m.model, world, steps=2, sdpa=m.attn == "sdpa")), file=f)
            for case in m.z3_case:
                targets, _, freeze = case.partition("/")
                for world in (int(w) for w in m.z3_case_worlds.split(",")):
                    r = z3_replay(m.model, world, steps=2, lora=None if targets == "none" else (m.lora_r, targets),
                                  freeze=freeze or None)
                    r["case"] = case
                    print(json.dumps(r), file=f)
            for K in (int(k) for k in m.z3_accum.split(",") if k):
                for world in (int(w) for w in m.z3_case_worlds.split(",")):
                    print(json.dumps(z3_replay(m.model, world, steps=2, accum=K)), file=f)
            for case in m.z3_accum_case:
                targets, _, freeze = case.partition("/")
                for world in (int(w) for w in m.z3_case_worlds.split(",")):
                    r = z3_replay(m.model, world, steps=2, lora=None if targets == "none" else (m.lora_r, targets),
                                  freeze=freeze or None, accum=2)
                    r["case"] = case
                    print(json.dumps(r), file=f)


def build(path, dropout, lora=None, freeze=None, sdpa=False):
    """The reference model (seq 32, batch 2, fp32, eager unless sdpa),
    dropout "0" or the config's (as zerosim reads it: --hooks), and its
    config; lora (r, targets): PEFT's adapters on it, the base frozen
    (tests/ft_torch.py's apply_lora and its _mark_only_adapters_as_trainable);
    freeze: a --freeze pattern, the parameters it names frozen after that
    (ft_torch.py's freeze_matches, over Hugging Face's names)"""
    a = argparse.Namespace(model=path, dropout=dropout, tied=None, recompute="none", mask="where")
    _, family, cfg, tied = hf_torch.build(a)
    torch.manual_seed(0)
    if family == "gpt2":
        model = hf_torch.GPT2LMHeadModel(cfg, tied, a.mask, sdpa)
    elif family in hf_torch.FAMILY_ATTENTION:
        model = hf_torch.LlamaForCausalLM(cfg, tied, sdpa, hf_torch.FAMILY_ATTENTION[family])
    else:
        sys.exit(f"ds3_saved: model_type {family!r} is not gpt2 or {', '.join(hf_torch.FAMILY_ATTENTION)}")
    if lora is not None:
        import ft_torch
        la = argparse.Namespace(lora_r=lora[0], lora_alpha=8.0, lora_dropout=0.0,
                                lora_targets="" if lora[1] == "default" else lora[1])
        ft_torch.apply_lora(la, model, family)
        for n, p in model.named_parameters():
            p.requires_grad_("lora_" in n)
    if freeze is not None:
        import ft_torch
        for n, p in model.named_parameters():
            if ft_torch.freeze_matches(freeze, family, cfg, ft_torch.hf_name(family, n)):
                p.requires_grad_(False)
    model.train()
    return model, cfg


def hooks(model, cfg, out):
    """DeepSpeed's four hooks on every module, as 38327e0 writes them, each
    a mark where it runs"""

    def say(mod, name, where):
        if len(list(mod.parameters(recurse=False))) > 0:
            hf_torch.mark(f"ds3:{name}:{where}")

    install(model, say)
    run_marks(model, cfg, out)


def install(model, say):
    """DeepSpeedZeRoOffload._register_deepspeed_module's four hooks on every
    module (parameter_offload.py 276-454 at 38327e0, in its order,
    445-454), each calling say(module, name, where) where DeepSpeed calls
    the coordinator: "fwd" (the pre-forward fetch, 455-467), "fwd_end"
    (the post-forward release, 469-478), "bwd" (the pre-backward fetch,
    480-491, from PreBackwardFunctionForModule, 357-378) and "bwd_end" (the
    post-backward release, 493-500, from PostBackwardFunctionModule,
    412-437, once each input that requires grad has its gradient)"""

    def tensors(x, f):
        if torch.is_tensor(x):
            return f(x)
        if isinstance(x, (tuple, list)):
            return type(x)(tensors(y, f) for y in x)
        return x

    for name, mod in model.named_modules():

        def at(where, name=name, mod=mod):
            say(mod, name, where)

        class Pre(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                return x.detach()

            @staticmethod
            def backward(ctx, g, at=at):
                at("bwd")
                return g

        class Post(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x, mod=mod):
                if x.requires_grad:
                    mod.ds_grads_remaining += 1
                return x.detach()

            @staticmethod
            def backward(ctx, g, mod=mod, at=at):
                mod.ds_grads_remaining -= 1
                if mod.ds_grads_remaining == 0:
                    at("bwd_end")
                return g

        def pre_fwd(mod, inputs, at=at):
            at("fwd")

        def post_bwd(mod, inputs, Post=Post):
            if not hasattr(mod, "ds_grads_remaining"):
                mod.ds_grads_remaining = 0
            return tensors(inputs, Post.apply)

        mod.register_forward_pre_hook(pre_fwd)
        mod.register_forward_hook(lambda mod, i, o, at=at: at("fwd_end"))
        mod.register_forward_hook(lambda mod, i, o, Pre=Pre: tensors(o, Pre.apply))
        mod.register_forward_pre_hook(post_bwd)


def run_marks(model, cfg, out):
    # two steps of the loop (1.13's Adam and zero_grad at their defaults),
    # the second's forward and backward inside the profiler: the live
    # bytes at each hook, marks in the allocator's stream as
    # tests/hf_torch.py marks its boundaries
    from torch.profiler import ProfilerActivity, profile
    opt = torch.optim.Adam(model.parameters())
    ids = torch.randint(0, cfg["vocab_size"], (2, 32))
    # the runs before this one in the same process (and a model just let go)
    # freed now, not by the collector inside the profile, where their frees
    # would count against this run's live bytes (the replay sums every event)
    gc.collect()
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


class Zero3:
    """DeepSpeed 38327e0's ZeRO-3 over the model (fp32, no offload, one sub
    group, contiguous_gradients and reduce_scatter on, every parameter at
    most stage3_param_persistence_threshold 1e5 elements: persistent), as
    rank 0 of `world` in one process: what DeepSpeed allocates, transcribed
    (docs/schedule.md, "ZeRO-3 over the PyTorch step", has each line:
    stage3.py unless said; pp.py partition_parameters.py, ppc.py
    partitioned_param_coordinator.py, cc.py coalesced_collectives.py). The
    collectives move no byte of DeepSpeed's own: an all-gather into a
    buffer DeepSpeed made is a copy from `src` (every parameter's whole
    value, padded, made before the profiler: never seen by it), the
    reduce-scatter into the rank's chunk of the cat is left out (its value
    is the rank's own), the norm's all-reduce too."""

    def __init__(self, model, world, bucket, src):
        self.W, self.B, self.src = world, bucket, src
        self.params = list(model.parameters())  # module.parameters(): ds_id's order, a tied table once
        self.n = [p.numel() for p in self.params]
        self.c = [math.ceil(n / world) for n in self.n]
        # the trainable ones (stage3.py 491-495): the flat buffers' (po
        # None for a frozen parameter), in that order
        self.train = [k for k, p in enumerate(self.params) if p.requires_grad]
        self.po, at = [None] * len(self.params), 0
        for k in self.train:
            self.po[k] = at
            at += self.c[k]
        self.S3 = at
        self.shape = [p.shape for p in self.params]
        self.avail = [False] * len(self.params)
        self.record = True  # ppc.py 254: step 1 records the trace (every release frees all)
        self.k_of = {id(p): k for k, p in enumerate(self.params)}
        # Init(module=model): each parameter's ds_tensor (pp.py 1609: the
        # rank's chunk, the tail past n left as empty() leaves it), then
        # free_param (282-291)
        parts = []
        for k, p in enumerate(self.params):
            part = torch.empty(self.c[k])
            take = p.data.view(-1)[:self.c[k]]
            part[:take.numel()].copy_(take)
            parts.append(part)
            p.data = torch.empty(0)
        self.inf_or_nan_tracker = torch.zeros(1, dtype=torch.bool)  # 263
        self.flat = torch.empty(self.S3)  # defragment, 574-600: the trainable groups' (357-360)
        for k in self.train:
            self.flat.narrow(0, self.po[k], self.c[k]).copy_(parts[k])
            parts[k] = None
        # a frozen parameter keeps its ds_tensor
        self.part = [parts[k] if self.po[k] is None else self.flat.narrow(0, self.po[k], self.c[k])
                     for k in range(len(self.params))]
        del parts
        self.fp32 = self.flat.clone().float().detach()  # 906
        self.fp32.requires_grad_(True)
        z = torch.zeros(self.S3)  # initialize_optimizer_states, 1030-1032, dropped
        del z
        self.bucket = torch.empty(int(bucket))  # 537-540
        self.gpart = torch.zeros(self.S3)  # 547-549
        self.gpart_of = {k: self.gpart.narrow(0, self.po[k], self.c[k]) for k in self.train}
        # create_reduce_and_remove_grad_hooks, 1161-1245: all_gather ->
        # _allgather_params (pp.py 1895-1970), the hook, partition()
        self.grad_accs = []
        for k in self.train:  # if param.requires_grad (1165)
            p = self.params[k]
            flat = torch.empty(self.c[k] * world)
            flat.copy_(self.src[k])
            rep = torch.empty(self.n[k])
            rep.copy_(flat.narrow(0, 0, self.n[k]))
            del flat
            p.data = rep.view(self.shape[k])
            del rep
            # register_grad_hook (utils/torch.py 25-31): 2.1 and later the
            # parameter's post-accumulate-grad hook, before that a hook
            # on its AccumulateGrad node
            if hf_torch.TV >= (2, 1):
                p.register_post_accumulate_grad_hook(lambda p: self.grad_hook(p))
            else:
                acc = p.expand_as(p).grad_fn.next_functions[0][0]
                acc.register_hook(lambda *_, p=p: self.grad_hook(p))
                self.grad_accs.append(acc)
            p.data = torch.empty(0)
        self.ipg, self.used = [], 0
        self.micro_step_id = 0  # 307
        self.global_grad_norm = 0.  # 191
        self.opt = torch.optim.Adam([self.fp32], lr=1e-3, foreach=False)

    # the coordinator (ppc.py): a module's own parameters fetched at its
    # pre-forward and pre-backward hooks (fetch_sub_module, 285-341, its
    # __all_gather_params of the unavailable ones, 460-504; no prefetch
    # while the trace is recorded, 348-350), released at its post-forward
    # and post-backward (release_sub_module, 418-442: every one of them in
    # step 1, the non-persistent ones later, 524-530: none here)
    def hook(self, mod, name, where):
        own = [self.k_of[id(p)] for p in mod.parameters(recurse=False)]
        if not own:
            return
        if where in ("fwd", "bwd"):
            self.fetch(sorted(k for k in set(own) if not self.avail[k]))
        elif self.record:
            for k in own:
                self.release(k)

    def fetch(self, ks):
        """all_gather_coalesced (pp.py 1200-1345) of the module's unavailable
        parameters sorted by ds_id: one into a torch.empty(ceil(n/N)*N), its
        narrow the data (1246-1266); several into one flat of N*sum(c)
        (_all_gather_dtype, 1164-1197) and each one's data a torch.cat of
        its parts (AllGatherCoalescedHandle.wait, 676-714), the flat freed
        with the handle. At N = 1 a view of the partition
        (_no_gather_coalesced, 1205-1206, 810-820)."""
        if not ks:
            return
        W = self.W
        if W == 1:
            for k in ks:
                self.params[k].data = self.part[k].view(self.shape[k])
                self.avail[k] = True
            return
        if len(ks) == 1:
            k = ks[0]
            buf = torch.empty(self.c[k] * W)
            buf.copy_(self.src[k])
            self.params[k].data = buf.narrow(0, 0, self.n[k]).view(self.shape[k])
            del buf
        else:
            sz = sum(self.c[k] for k in ks)
            flat = torch.empty(sz * W)
            parts = [flat.narrow(0, sz * r, sz) for r in range(W)]
            off = 0
            for k in ks:
                for r in range(W):
                    parts[r].narrow(0, off, self.c[k]).copy_(self.src[k].narrow(0, r * self.c[k], self.c[k]))
                off += self.c[k]
            off = 0
            for k in ks:
                pieces = []
                for r in range(W):
                    if r * self.c[k] < self.n[k]:
                        pieces.append(parts[r].narrow(0, off, min(self.n[k] - r * self.c[k], self.c[k])))
                self.params[k].data = torch.cat(pieces).view(self.shape[k])
                del pieces
                off += self.c[k]
            del parts, flat
        for k in ks:
            self.avail[k] = True

    def release(self, k):
        if self.avail[k]:
            self.params[k].data = torch.empty(0)  # free_param, pp.py 282-291
            self.avail[k] = False

    def post_step_gather(self):
        """_post_step's gather of the persistent parameters (2050-2056 ->
        pp.py _allgather_params_coalesced, 1789-1893): a flat of
        ceil(n/N)*N each, all made first (1817-1822), the data its narrow
        (1886); at N = 1 views of the partitions (1795-1798)"""
        if self.W == 1:
            self.fetch(list(range(len(self.params))))
            return
        flats = [torch.empty(self.c[k] * self.W) for k in range(len(self.params))]
        for k, f in enumerate(flats):
            f.copy_(self.src[k])
        for k, f in enumerate(flats):
            self.params[k].data = f.narrow(0, 0, self.n[k]).view(self.shape[k])
            self.avail[k] = True
        del flats

    def grad_hook(self, p):
        """reduce_independent_p_g_buckets_and_remove_grads (1258-1271) and
        __add_grad_to_ipg_bucket (1275-1290)"""
        k = self.k_of[id(p)]
        if self.used + self.n[k] > self.B and self.used > 0:
            self.reduce()
        new = self.bucket.narrow(0, self.used, self.n[k]).view_as(p.grad)
        new.copy_(p.grad)
        p.grad.data = new
        del new
        self.used += self.n[k]
        self.ipg.append(k)

    def reduce(self):
        """__reduce_and_partition_ipg_grads (1294-1328): sorted by ds_id,
        __avg_scatter_grads (1372-1400) -> reduce_scatter_coalesced (cc.py
        158-218), partition_grads (1466-1527)"""
        if not self.ipg:
            return
        ks = sorted(self.ipg)
        W = self.W
        grads = [self.params[k].grad for k in ks]
        chunks = [[g.view(-1)[r * self.c[k]:r * self.c[k] + self.c[k]] for r in range(W)] for g, k in zip(grads, ks)]
        if len(ks) == 1 and self.n[ks[0]] % W == 0:
            flat = grads[0].view(-1)
        else:
            lst = []
            for r in range(W):
                for i, k in enumerate(ks):
                    lst.append(chunks[i][r])
                    pad = self.c[k] - chunks[i][r].numel()
                    if pad > 0:
                        lst.append(torch.empty(pad))
            flat = torch.cat(lst)
            del lst
        flat.div_(W)
        mine = torch.chunk(flat, W)[0]
        outs, off = [], 0
        for i, k in enumerate(ks):
            outs.append(mine.narrow(0, off, chunks[i][0].numel()))
            off += self.c[k]
        del chunks, mine, grads
        for k, g in zip(ks, outs):
            grad_buffer = self.gpart_of[k].narrow(0, 0, g.numel())
            if self.micro_step_id == 0:  # 1481-1485
                grad_buffer.copy_(g)
            else:  # 1486-1487 (gradient_accumulation_dtype fp32)
                grad_buffer.add_(g.to(torch.float32).view(grad_buffer.shape))
            del grad_buffer
            self.params[k].grad = None
        del outs, flat
        self.ipg, self.used = [], 0

    def epilogue(self):
        """independent_gradient_partition_epilogue (1131-1156): the rest
        reduced, micro_step_id + 1"""
        self.reduce()
        self.micro_step_id += 1

    def step(self):
        """step (2086-2148): _pre_step's micro_step_id 0 (1874)"""
        self.micro_step_id = 0
        for k in range(len(self.params)):  # _partition_all_parameters -> release_and_reset_all
            self.release(k)
        norm_groups = [self.norm()]
        scaled_global_grad_norm = torch.linalg.vector_norm(torch.stack(norm_groups))
        self.global_grad_norm = scaled_global_grad_norm / 1.0
        single = torch._utils._flatten_dense_tensors([self.gpart_of[k] for k in self.train]).to(torch.float32)  # 1895-1915
        self.fp32.grad = single
        del single
        self.fp32.grad.mul_(1. / 1.0)  # 2178-2187
        self.opt.step()  # 972-989
        self.flat.data.copy_(self.fp32.data)  # 2069-2077
        self.fp32.grad = None  # _release_sub_group, 1943-1953
        self.post_step_gather()
        self.record = False  # step 2's reset_step completes the trace (ppc.py 248)

    def norm(self):
        """get_grad_norm_direct (1765-1823), norm_type 2"""
        grad_norms = []
        for g in (self.gpart_of[k] for k in self.train):
            grad_norms.append(g.to("cpu", non_blocking=True).double().norm(2))
        total_norm_cuda = torch.sum(torch.pow(torch.stack(grad_norms), 2))
        total_norm = total_norm_cuda**(1. / 2.)
        norm_is_inf = total_norm.isinf()
        norm_is_nan = total_norm.isnan()
        inf_or_nan = norm_is_nan.logical_or(norm_is_inf)
        err = torch.tensor(-1.0, dtype=torch.float)
        total_norm = inf_or_nan * err + inf_or_nan.logical_not() * total_norm
        return total_norm


def z3_backward(zo, loss, K, at):
    """engine.backward (engine.py 2085-2152) of a micro-step's loss: at K > 1
    _scale_loss_by_gas(loss.float()) (1904-1910), the logged mean_loss into
    self.losses (2105-2106: zo.losses, an attribute: the last one let go as
    it is replaced), stage 3's
    backward (2267-2287: loss.float() * 1.0 and its backward), the
    epilogue (allreduce_gradients, 2050-2053); its locals go as it returns.
    The backward's mark (at: its micro-step's suffix) where zerosim's is,
    before autograd's backward"""
    if K > 1:
        loss = loss.float() / K
    mean_loss = loss.mean().detach()
    zo.losses = mean_loss if zo.losses is None else zo.losses + mean_loss
    scaled = loss.float() * 1.0
    hf_torch.mark("phase:backward" + at)
    scaled.backward()
    del scaled
    zo.epilogue()


def z3_replay(path, world, bucket=100000, steps=3, lora=None, freeze=None, sdpa=False, accum=1):
    """DeepSpeed's ZeRO-3 (Zero3) over the reference model with its
    config's dropout and DeepSpeed's four hooks on every module, `steps`
    steps of the engine (engine.py backward 2085-2152: loss.mean().detach()
    logged as self.losses, stage 3's backward 2267-2287: loss.float() * 1.0
    and its backward, the epilogue's reduction; step; self.losses None at
    2278), everything from the model's construction on inside
    torch.profiler: the live bytes between steps (after the last), each
    step's peak and the phase where it falls."""
    from torch.profiler import ProfilerActivity, profile
    model, cfg = build(path, "config", lora, freeze, sdpa)
    src = []
    for p in model.parameters():
        n = p.numel()
        c = math.ceil(n / world)
        t = torch.zeros(c * world)
        t[:n].copy_(p.data.view(-1))
        src.append(t)
    del model
    K = accum
    ids = torch.randint(0, cfg["vocab_size"], (2 * K, 32))
    # the runs before this one in the same process (and a model just let go)
    # freed now, not by the collector inside the profile, where their frees
    # would count against this run's live bytes (the replay sums every event)
    gc.collect()
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        hf_torch.mark("build")
        model, cfg = build(path, "config", lora, freeze, sdpa)
        labels = ids.clone()
        data = ids.clone()
        zo = Zero3(model, world, bucket, src)
        install(model, zo.hook)
        zo.losses = None
        forwards = 0
        for step in range(1, steps + 1):
            hf_torch.mark(f"step:{step}")
            for k in range(K):
                at = "" if K == 1 else f"@{k}"
                if K > 1:
                    hf_torch.mark(f"micro:{k}")
                hf_torch.mark("phase:forward" + at)
                # reset_step at each forward's start (ppc.py 228-262):
                # the first records the trace, the second completes it
                zo.record = zo.record and forwards == 0
                forwards += 1
                outputs = model(data[2 * k:2 * k + 2], labels[2 * k:2 * k + 2])
                loss = outputs[0]
                z3_backward(zo, loss, K, at)
                if k < K - 1:  # an earlier micro-step's outputs let go
                    del loss
                    outputs = None
            hf_torch.mark("phase:optimizer")
            zo.step()
            zo.losses = None  # 2278
            del loss
            outputs = None
            hf_torch.mark("phase:between")
            hf_torch.mark(f"step:{step + 1}")
    stream = hf_torch.replay(hf_torch.memory_events(prof))
    peaks = [hf_torch.analyse_step(stream, s) for s in range(1, steps + 1)]
    # the last step's peak in each phase (the live bytes after each event)
    phase_peaks, cur = {}, None
    start = next(i for i, (_, l) in enumerate(stream) if l == f"step:{steps}")
    for live, label in stream[start:]:
        if label is not None:
            cur = label[6:] if label.startswith("phase:") else cur
            if label == f"step:{steps + 1}":
                break
        elif cur is not None:
            phase_peaks[cur] = max(phase_peaks.get(cur, live), live)
    return dict(model=path, world=world, torch=torch.__version__, sdpa=sdpa, accum=K, between=stream[-1][0],
                peaks=[x["peak"] for x in peaks], phases=[x["phase"] for x in peaks],
                starts=[x["start_bytes"] for x in peaks], case=None,
                marks1={label: live for label, live in peaks[0]["boundaries"] if not label.startswith("step:")},
                marks={label: live for label, live in peaks[-1]["boundaries"] if label.startswith("phase:")},
                phase_peaks=phase_peaks)


def release_order(model, cfg, world):
    from torch.profiler import ProfilerActivity, profile
    shapes = {id(p): p.shape for p in model.parameters()}

    def gather(p):
        n = int(torch.Size(shapes[id(p)]).numel())
        flat = torch.empty(math.ceil(n / world) * world)  # _allgather_params_coalesced's flat
        p.data = flat.narrow(0, 0, n).view(shapes[id(p)])

    ids = torch.randint(0, cfg["vocab_size"], (2, 32))
    # the runs before this one in the same process (and a model just let go)
    # freed now, not by the collector inside the profile, where their frees
    # would count against this run's live bytes (the replay sums every event)
    gc.collect()
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

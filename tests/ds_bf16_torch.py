"""ds_bf16_torch — DeepSpeed's ZeRO-1/2 step transcribed onto real PyTorch,
its allocator's bytes: fp32 (zerosim's `--wrapper deepspeed`, to hold it
to PyTorch) and bf16 (a reference for issue #22's DeepSpeed bf16, which
zerosim does not build yet).

DeepSpeed is not installable here. This is a transcription of what its
engine and its ZeRO optimizer allocate, read at DeepSpeed 38327e0 (0.16.5;
runtime/zero/stage_1_and_2.py as s12, runtime/engine.py as engine,
runtime/utils.py as utils, runtime/fp16/loss_scaler.py as loss_scaler),
run over tests/hf_torch.py's model (Hugging Face's modeling code op for op)
inside torch.profiler.profile(profile_memory=True), every allocation
replayed (hf_torch.py's marks and replay). With --dtype fp32 it is the run
zerosim's util/ag_ds.c describes (docs/schedule.md, "DeepSpeed over the
PyTorch step"), so the fp32 figures can be held to `zerosim theory
--wrapper deepspeed` (tests/ds_bf16_torch.sh); with --dtype
bf16 it is the bf16 config ({"bf16": {"enabled": true}}, stage 1 or 2, no
grad_accum_dtype) that zerosim refuses so far.

What bf16 changes, with the lines it follows:
  - engine._configure_distributed_model (1219-1231): module.bfloat16()
    before the optimizer: every parameter a new bf16 tensor.
  - engine.get_data_types (1010-1025): with ZeRO on and no
    data_types.grad_accum_dtype, gradients accumulate in the model's dtype,
    bf16; so _do_optimizer_sanity_check (1300-1319) picks the ZeRO
    optimizer (stage_1_and_2.py), not BF16_Optimizer (which stage 1 gets
    only with grad_accum_dtype fp32, 1316-1318), and s12's
    use_separate_grad_accum is False (284-294).
  - s12 396-403: the fp32 partition `.clone().float()`: a bf16 clone of the
    rank's S elements (2S bytes, freed at once) and its fp32 copy (4S).
  - s12 2048-2053, 1352-1354: the reduce bucket and grads_in_partition in
    the model's dtype, bf16 (2 bytes an element).
  - s12 534-542: the loss scaler a static 1.0 for any dtype but fp16
    (loss_scaler 208-215); s12 2067: loss_scaler.backward(loss.float()), a
    no-op cast where Hugging Face's loss is fp32 already (logits.float()).
  - engine.communication_data_type (939-950): bf16, the bucket's own dtype
    (s12 1502: no copy for the all-reduce).
  - s12 1888-1897: the flat gradient partition `.to(fp32)`: a bf16 cat
    (where the partition spans several tensors) and its fp32 copy, 4S.
  - s12 1918-1920: the bf16 partition (a view of the flat buffer) copy_()
    from the updated fp32 partition, in place.
  - frozen parameters and PEFT's adapters (--freeze, --lora): the model
    is wrapped and frozen before deepspeed.initialize, whose
    module.bfloat16() casts every parameter, frozen or not, the adapters
    too (PEFT's autocast_adapter_dtype acted at get_peft_model, over an
    fp32 model: nothing to cast); the optimizer's groups hold the
    requires_grad ones alone (s12 305-315), so a frozen parameter stays a
    bf16 module tensor outside the flat buffer, with no fp32 partition,
    gradient or Adam state.
  - QLoRA (--qlora): the base 4-bit as transformers loads it (tests/
    ft_torch.py's Linear4bit, quantized from the fp32 weights), PEFT's
    adapters over it, then module.bfloat16() in bf16, which casts neither
    the uint8 codes nor the QuantState (not parameters of a float dtype):
    each use dequantizes into fp32 (quant_state.dtype) and copies to bf16,
    the compute dtype bf16 (bnb_4bit_compute_dtype=torch.bfloat16).
  - gradient accumulation (--accum, gradient_accumulation_steps K): each
    micro-step the engine's backward (engine 2085-2152: loss.float() / K,
    self.losses summed, the optimizer's backward, allreduce_gradients);
    stage 1 keeps the bf16 .grad accumulating (AccumulateGrad) and reduces
    at the boundary (engine 2055-2059), stage 2 reduces every micro-step
    and adds the bf16 partition into averaged_gradients (s12 783-800):
    bf16 throughout (grad_accum_dtype the model's, above), fp32 only at the
    step's .to(fp32).
  - --recompute: Hugging Face's gradient checkpointing of each decoder
    layer (hf_torch.py's --recompute full, torch.utils.checkpoint with
    use_reentrant=True) over the bf16 module: DeepSpeed adds nothing of its
    own (the engine's hooks are the ZeRO optimizer's, fired in each rerun).
Everything else is the fp32 run's (the norm in float64, 1663-1721; Adam
over the fp32 partition; self.losses, engine 2105-2106 and 2278).

At N = 1 no collective is called (there is no process group). --world 2
runs N processes over gloo (tests/hf_torch.py's spawn and pinned group):
the bucket's slices all-reduced from their flat cat, the norm's
all-reduce, and the all-gather of the flat buffer (gloo in 1.13 has no
_allgather_base: its allgather into the partitions' views, which makes a
flat output of gloo's own, ProcessGroupGloo's newLikeFlat, not
DeepSpeed's: not looked at apart, it is in the optimizer phase, where
no mark falls and the peak is not on these models). gloo in 1.13
reduces no bf16 tensor ("Invalid scalar type"), so there bf16 runs at
N = 1 alone; under 2.x (PyTorch 2.6's Debian 13 root, tests/ds_torch26.sh)
at every N (the all-gather written as under 1.13).
--attn sdpa (2.x alone): the models' attention through
scaled_dot_product_attention, as hf_torch.py's --attn sdpa.

Prints one JSON object a run: the bytes live between steps (after the
last step), the steady step's peak (the last step) and the phase where it
falls, the losses, "optimizer_events": the last step's allocations and
frees (+bytes, -bytes) in order from its optimizer mark to its end (rank
0's at N > 1; tests/ds_bf16_torch.sh compares N = 1's); for a mixture of experts (tests/ds_moe_torch.sh: the
experts plain parameters to DeepSpeed, flattened with the rest) also
"routing", each step's blocks' tokens per expert (hf_torch.py's ROUTING,
this rank's), and "step_peaks", each step's peak (each step routes its
own way). A parameter left without a grad at the epilogue (an expert that
got no token: get_flat_partition's zeros_like, s12 1727-1730) is not
transcribed: the run exits 1 saying so. Exit 0; 2 bad usage.

Usage: python3 ds_bf16_torch.py MODEL.json... [--dtype bf16,fp32] [--stage 1,2]
       [--world 1,2] [--bucket 100000] [--steps 3] [--seq 32] [--batch 2]
       [--dropout config|0] [--attn eager|sdpa] [--lora MODEL.json [--lora-r 4] [--lora-freeze PATTERN]
       [--lora-dtype fp32,bf16] [--lora-dropout P]] [--freeze MODEL.json=PATTERN]
       [--accum MODEL.json=K] [--recompute MODEL.json] [--qlora MODEL.json=on|off[,K[,full]] [--qlora-targets T]]
(one JSON line per world, model, dtype and stage; at N > 1 rank 0's with
every rank's figures in "ranks")
"""
import argparse
import gc
import json
import sys

import torch
from torch.profiler import ProfilerActivity, profile

import hf_torch

PLAIN_MARK, SUFFIX = hf_torch.mark, [None]


def mark(label):
    """hf_torch's mark; under gradient accumulation micro-step k's marks
    (the modules' hooks, which look `mark` up in hf_torch, and the phases)
    are "LABEL@k", as zerosim's step names them (tests/ft_torch.py's)"""
    PLAIN_MARK(label if SUFFIX[0] is None else f"{label}@{SUFFIX[0]}")


hf_torch.mark = mark


class ZeroBf16:
    """stage_1_and_2.py's DeepSpeedZeroOptimizer on rank `rank` of `world`,
    contiguous_gradients and reduce_scatter on, use_multi_rank_bucket_allreduce
    on, overlap_comm off, one param group, over a client Adam; pg the
    process group (None at N = 1: no collective is called)."""

    def __init__(self, opt, stage, bucket, world=1, rank=0, pg=None):
        self.opt, self.stage, self.bucket = opt, stage, bucket
        self.W, self.r, self.pg = world, rank, pg
        group = opt.param_groups[0]
        # 305-315: the trainable parameters in group order
        self.params = [p for p in group["params"] if p.requires_grad]
        self.dtype = self.params[0].dtype  # 284
        # 348-351: meta tensors of the shapes, for the views
        self.meta = [torch.zeros_like(p, device="meta") for p in self.params]
        # 323-330: each parameter's data kept aside (.cpu(): the same
        # storage on the CPU), replaced by torch.empty(1) (fp32)
        cpu_data = []
        for p in self.params:
            cpu_data.append(p.data.cpu())
            p.data = torch.empty(1).to(p.device)
        # 353-357, utils 940-951: aligned to nccl_start_alignment_factor 2
        # x world, a zeros() of the remainder, then the flat cat
        n = sum(t.numel() for t in cpu_data)
        rem = n % (2 * world)
        lst = cpu_data + ([torch.zeros(2 * world - rem, dtype=self.dtype)] if rem else [])
        flat = torch._utils._flatten_dense_tensors(lst)
        del lst
        del cpu_data  # 360-361: del param.cpu_data
        self.flat = flat  # 364: .to(device), no copy on the CPU
        self._update_views()  # 643-651
        # 1587-1605: equal partitions (the 2N alignment), views
        self.S = self.flat.numel() // world
        # 1607-1636: the whole tensors overlapping this rank's range, the
        # first at first_offset; each parameter's owners and where each
        # owner's part starts in it (initialize_gradient_partitioning_data_structures)
        self.start, self.owners, self.in_part = {}, {}, []
        self.first_offset, off = 0, 0
        lo, hi = self.S * rank, self.S * (rank + 1)
        for p in self.params:
            k = p.numel()
            self.start[p] = off
            self.owners[p] = [(q, max(q * self.S - off, 0)) for q in range(world)
                              if q * self.S < off + k and off < (q + 1) * self.S]
            if lo <= off < hi:
                self.in_part.append(p)
            elif off < lo < off + k:
                self.in_part.append(p)
                self.first_offset = lo - off
            off += k
        self.mine = set(self.in_part)
        # 396-403: .clone().float()
        self.fp32 = self.flat.narrow(0, self.S * rank, self.S).clone().float().detach()
        self.fp32.requires_grad = True
        group["params"] = [self.fp32]  # 416
        # 682-701: initialize_optimizer_states, a zeros(S) grad dropped
        self.fp32.grad = torch.zeros(self.S, dtype=self.fp32.dtype)
        self.fp32.grad = None
        self.ipg = None
        self.in_bucket = []
        self.elements = 0
        self.gip = None  # grads_in_partition
        self.gip_offset = 0
        self.averaged = None
        self.global_grad_norm = None
        if stage == 2:
            # 904-920: a hook on each parameter's AccumulateGrad
            self.grad_accs = []
            for p in self.params:
                acc = p.expand_as(p).grad_fn.next_functions[0][0]
                acc.register_hook(lambda *_, p=p: self.reduce_ready(p))
                self.grad_accs.append(acc)

    def _update_views(self):
        for p, v in zip(self.params, torch._utils._unflatten_dense_tensors(self.flat, self.meta)):
            p.data = v.data

    # --- backward (2038-2060)
    def backward(self, loss):
        # 2048-2053: `self.ipg_buffer = []` (stage 1 past a micro-step's
        # first: the last micro-step's bucket, no epilogue released it,
        # goes), then the new one
        self.ipg = None
        self.ipg = torch.empty(int(self.bucket), dtype=self.dtype)
        # 2067, loss_scaler 61-63: loss.float() (the loss is fp32), * 1.0
        scaled = loss.float() * 1.0
        mark("phase:backward")  # where zerosim's list marks it (util/ag_ds.c: after the scaler's product)
        scaled.backward()
        del scaled

    def reduce_ready(self, p):  # 1424-1426 -> 939-970
        if self.elements + p.numel() > self.bucket:
            self.reduce_ipg()
        g = p.grad
        new = self.ipg.narrow(0, self.elements, p.numel())
        new.copy_(g.view(-1))
        g.data = new.data.view_as(g)
        self.elements += p.numel()
        self.in_bucket.append(p)

    def reduce_ipg(self):  # 1365-1421
        t = self.ipg.narrow(0, 0, self.elements)
        # average_tensor 1051-1150: the bucket cut by owner, neighbours of
        # one owner merged
        slices, cur = [], 0
        for p in self.in_bucket:
            own = self.owners[p]
            for j, (q, o) in enumerate(own):
                k = (own[j + 1][1] if j + 1 < len(own) else p.numel()) - o
                if slices and slices[-1][0] == q:
                    slices[-1][2] += k
                else:
                    slices.append([q, cur, k])
                cur += k
        t.div_(self.W / float(1))  # 1122
        if slices:
            # allreduce_and_scatter 1023-1049 -> 1011-1021 ->
            # allreduce_bucket 1490-1523: the slices' flat cat (a view
            # where there is one), all-reduced, each copied back by its owner
            parts = [t.narrow(0, o, k) for _, o, k in slices]
            flat = torch._utils._flatten_dense_tensors(parts)
            if self.pg is not None:
                self.pg.allreduce([flat]).wait()
            for (q, _, _), buf, synced in zip(slices, parts, torch._utils._unflatten_dense_tensors(flat, parts)):
                if q == self.r:
                    buf.copy_(synced)
            del flat, parts, synced
        for p in self.in_bucket:
            if p in self.mine:
                self.copy_in_partition(p)
            elif self.stage == 2:
                p.grad = None  # clear_grad_attribute: a bucket view, no bytes
        self.in_bucket, self.elements = [], 0

    def copy_in_partition(self, p):  # 1329-1363
        if self.gip is None:
            self.gip_offset = 0
            self.gip = torch.empty(sum(q.numel() for q in self.in_part), dtype=self.dtype)
        g = p.grad
        new = self.gip.view(-1).narrow(0, self.gip_offset, p.numel())
        new.copy_(g.view(-1))
        g.data = new.data.view_as(g)
        self.gip_offset += p.numel()

    def epilogue(self):  # 764-807
        if self.stage == 1:  # reduce_gradients 706-725: every grad, in group order
            for p in self.params:
                if p.grad is not None:
                    self.reduce_ready(p)
        self.reduce_ipg()
        # get_flat_partition 1723-1761 (dtype gradient_accumulation_dtype:
        # the model's, bf16, with no grad_accum_dtype, engine.py 1017-1021):
        # views of the rank's grads, the first from first_offset, the last
        # cut at the partition's end; a zeros() of the last rank's padding
        new, size = [], 0
        for i, p in enumerate(self.in_part):
            g, o = p.grad, (self.first_offset if i == 0 else 0)
            if g is None:  # an expert with no token: get_flat_partition's zeros_like (1727-1730), not transcribed
                sys.exit("ds_bf16_torch: a parameter has no grad at the epilogue (an expert without a token): "
                         "not transcribed")
            k = min(g.numel() - o, self.S - size)
            new.append(g.contiguous().view(-1).narrow(0, o, k) if o > 0 or k < g.numel() else g)
            size += k
        if size < self.S:
            new.append(torch.zeros(self.S - size, dtype=self.dtype))
        if self.averaged is None:  # 783-791
            self.averaged = new
        else:  # a later micro-step's (stage 2): added in place, 792-800
            for acc, g in zip(self.averaged, new):
                acc.add_(g)
        self.ipg = None  # _release_ipg_buffers 676-680
        self.gip = None
        self.zero_grad(set_to_none=True)  # 807

    def zero_grad(self, set_to_none=True):  # 1638-1651
        """The ZeRO optimizer's own zero_grad: a plain method (ZeROOptimizer
        is an object, base_optimizer.py 14-18), so none of torch.optim's
        record_function around it (1.13's optimizer.py 267: the profiler's
        292-byte handle). Every bit16 parameter's .grad set to
        None (grad_accum, its AccumulateGrad node's, holds no bytes here)."""
        assert set_to_none  # the engine's call and the epilogue's both pass it
        for p in self.params:
            p.grad = None

    # --- step (1826-1944)
    def norm(self):  # 1787-1803 -> 1663-1721
        # one norm a view of the rank's grads (the padding's zeros too)
        norms = [torch.linalg.vector_norm(g.data.double().detach(), ord=2.0)
                 for g in self.averaged[:len(self.in_part)]]
        total = torch.stack(norms).square().sum().float()
        del norms
        if self.pg is not None:
            self.pg.allreduce([total]).wait()
        total = total.pow(1. / 2.0)
        inf_or_nan = total.isnan().logical_or(total.isinf())
        err = torch.tensor(-1.0, dtype=torch.float)
        total = inf_or_nan * err + inf_or_nan.logical_not() * total
        return torch.linalg.vector_norm(torch.stack([total]), ord=2.0)

    def step(self):
        scaled_norm = self.norm()
        self.global_grad_norm = scaled_norm / 1.0
        # 1888-1897: the flat gradient partition (the last rank's aligned:
        # nothing to add, its padding is in the list), .to(fp32)
        flat_g = torch._utils._flatten_dense_tensors(self.averaged).to(self.fp32.dtype)
        self.fp32.grad = flat_g
        self.averaged = None  # free_grad_in_param_list, averaged_gradients[i] = None
        flat_g.mul_(1. / 1.0)  # unscale_and_clip_grads 1970-1985
        self.opt.step()  # _optimizer_step 1811-1824
        self.fp32.grad = None
        del flat_g
        mine = self.flat.narrow(0, self.S * self.r, self.S)
        mine.data.copy_(self.fp32.data)  # 1918-1920
        if self.pg is not None:
            # utils 965-968 -> 954-962: all_gather_into_tensor of the flat
            # buffer (gloo in 1.13 has no _allgather_base: its allgather
            # into the partitions' views, its flat output made and freed
            # on gloo's thread, where the profiler records nothing)
            self.pg.allgather([[self.flat.narrow(0, self.S * q, self.S) for q in range(self.W)]], [mine]).wait()
        del mine
        self._update_views()  # 1938-1940


def engine_backward(zo, loss, K):
    """engine.backward (engine.py 2085-2152) over a micro-step's loss: at
    K > 1 _scale_loss_by_gas(loss.float()) (1904-1910: loss / K, the fp32
    loss's .float() itself), the logged mean_loss and self.losses, the
    optimizer's backward, allreduce_gradients (2048-2062: stage 2's epilogue
    every micro-step; stage 1's reduce_gradients and epilogue at the
    boundary, micro-step K - 1); its locals go as it returns. self.losses
    is zo.losses (an attribute: the last one let go as it is replaced)."""
    if K > 1:
        loss = loss.float() / K
    mean_loss = loss.mean().detach()
    zo.losses = mean_loss if zo.losses is None else zo.losses + mean_loss
    zo.backward(loss)
    zo.micro += 1
    if zo.stage == 2 or zo.micro % K == 0:
        zo.epilogue()


def run(a, model_json, dtype, stage, lora=False, freeze="", lora_dropout=0.0, accum=1, recompute="none", qlora=None,
        world=1, rank=0, pg=None):
    """One run: the model from MODEL.json under DeepSpeed's stage `stage`
    in `dtype`, a.steps steps, profiled, as rank `rank` of `world`; its
    figures. lora: PEFT's adapters over it first (tests/ft_torch.py's
    apply_lora, r a.lora_r, alpha 8, dropout lora_dropout, PEFT's default
    targets; every base parameter frozen, then the adapters freeze names).
    accum: DeepSpeed's gradient_accumulation_steps, micro-steps of a.batch
    rows each (the K micro-batches drawn at once, as tests/ft_torch.py's).
    freeze (without lora): the parameters it names (tests/ft_torch.py's
    --freeze pattern) requires_grad False before the engine sees them.
    In bf16 module.bfloat16() comes after both, as deepspeed.initialize
    after get_peft_model: every parameter bf16, frozen ones and the
    adapters too (engine 1228-1231: the module's .bfloat16(), which
    casts every floating parameter whatever its requires_grad).
    qlora (with lora, fp32): the base 4-bit as transformers loads it,
    "off" or "on" its double quantization (tests/ft_torch.py's
    quantize_as_loaded, Linear4bit and LoraLinear4bit; quant_storage
    uint8, compute dtype fp32): each packed weight a frozen uint8
    parameter of its module, which the ZeRO optimizer's groups leave out
    (s12 305-315, requires_grad), as any frozen one."""
    torch.manual_seed(0)
    del hf_torch.ROUTING[:]  # a mixture's: this run's forwards' tokens per expert, each block's
    b = argparse.Namespace(model=model_json, dropout=a.dropout, tied=None, recompute=recompute, mask="where")
    _, family, cfg, tied = hf_torch.build(b)
    losses = []
    if qlora is not None:
        # each run a process of its own as to bitsandbytes' dynamic map
        # (name2qmap, made at a process's first double quantization): an
        # earlier run's let go here, this run's made inside its profile
        import ft_torch
        del ft_torch.QMAP[:]
    # the runs before this one in the same process (and a model just let go)
    # freed now, not by the collector inside the profile, where their frees
    # would count against this run's live bytes (the replay sums every event)
    gc.collect()
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        mark("build")
        q4 = None
        if qlora is not None:
            import ft_torch
            q4 = ft_torch.quantize_as_loaded(argparse.Namespace(amp="bf16" if dtype == "bf16" else "none",
                                                                load_dtype="fp32", quant_storage="uint8",
                                                                double_quant=qlora == "on"))
        if family == "gpt2":
            model = hf_torch.GPT2LMHeadModel(cfg, tied, b.mask, a.attn == "sdpa")
        elif family in hf_torch.FAMILY_ATTENTION:
            model = hf_torch.LlamaForCausalLM(cfg, tied, a.attn == "sdpa", hf_torch.FAMILY_ATTENTION[family])
        else:
            sys.exit(f"ds_bf16_torch: model_type {family!r}: gpt2 and the llama-like families (the mixtures too) only")
        if q4 is not None:
            q4.remove()
        model.train()
        if lora:
            # as tests/ft_torch.py's run(): get_peft_model's wrapping and
            # freezing (PEFT v0.20.0's _mark_only_adapters_as_trainable),
            # then --freeze's adapters by name, before DeepSpeed sees them
            import ft_torch
            la = argparse.Namespace(lora_r=a.lora_r, lora_alpha=8, lora_dropout=lora_dropout,
                                    lora_targets=a.lora_targets if qlora is not None else "")
            ft_torch.apply_lora(la, model, family)
            for n, p in model.named_parameters():
                p.requires_grad_("lora_" in n and not (freeze and ft_torch.freeze_matches(
                    freeze, family, cfg, ft_torch.hf_name(family, n))))
        elif freeze:
            import ft_torch
            for n, p in model.named_parameters():
                p.requires_grad_(not ft_torch.freeze_matches(freeze, family, cfg, ft_torch.hf_name(family, n)))
        hf_torch.input_require_grads(model)  # (--recompute: over frozen embeddings, hf_torch.py's)
        hf_torch.install_hooks(model, set(model.units))
        if dtype == "bf16":
            model.bfloat16()  # engine 1228-1231
        opt = torch.optim.Adam(model.parameters(), lr=1e-3, foreach=False)
        zo = ZeroBf16(opt, stage, a.bucket, world, rank, pg)
        zo.micro, zo.losses = 0, None
        g = torch.Generator().manual_seed(1 + rank)  # each rank its own batch
        K = accum
        data = torch.randint(0, cfg["vocab_size"], (K * a.batch, a.seq), generator=g)
        labels = data.clone()
        for step in range(1, a.steps + 1):
            mark(f"step:{step}")
            total = 0.0
            for k in range(K):
                if K > 1:
                    PLAIN_MARK(f"micro:{k}")
                    SUFFIX[0] = k
                mark("phase:forward")
                # the loop keeps the model's outputs (the loss and the
                # logits) to the step's end, as hf_torch.py's
                # (--keep-logits 1); an earlier micro-step's let go
                outputs = model(data[k * a.batch:(k + 1) * a.batch], labels[k * a.batch:(k + 1) * a.batch])
                loss = outputs[0]
                engine_backward(zo, loss, K)
                SUFFIX[0] = None
                total += float(loss) / K
                if k < K - 1:
                    del loss
                    outputs = None
            mark("phase:optimizer")
            zo.step()
            mark("phase:zero_grad")
            # _take_model_step 2243-2250: with ZeRO on (bf16 or not) the
            # engine calls the ZeRO optimizer's own zero_grad with its
            # default set_to_none=True, not the client Adam's; the .grads
            # are None already (the epilogue's, 807)
            zo.zero_grad()
            zo.losses = None  # 2278
            losses.append(total)
            del loss
            outputs = None
            mark("phase:between")
            mark(f"step:{step + 1}")
    stream = hf_torch.replay(hf_torch.memory_events(prof))
    last = hf_torch.analyse_step(stream, a.steps)
    # the last step's allocations and frees (+bytes, -bytes), in order,
    # from its optimizer mark to its end: step(), the engine's zero_grad
    # (none of torch.optim's record_function handles, 4 + 288 B) and the
    # loop's end
    start = next(i for i, (_, l) in enumerate(stream) if l == f"step:{a.steps}")
    i = next(i for i in range(start, len(stream)) if stream[i][1] == "phase:optimizer")
    optimizer_events, prev = [], stream[i][0]
    for live, label in stream[i + 1:]:
        if label == f"step:{a.steps + 1}":
            break
        if label is None:
            optimizer_events.append(live - prev)
        prev = live
    first = hf_torch.analyse_step(stream, 1)  # the first step: Adam's state and _global_grad_norm made in it
    # a mixture's routing (hf_torch.py's MixtralDecoderLayer and
    # QwenMoeDecoderLayer record it): each step's blocks' tokens per expert
    routing = None
    if hf_torch.ROUTING:
        L = cfg["num_hidden_layers"]
        routing = [hf_torch.ROUTING[t * L:(t + 1) * L] for t in range(a.steps)]
    # (each step's peak: a mixture's steps route apart, so its run's peak
    # is the most of the steps after the first)
    step_peaks = [hf_torch.analyse_step(stream, t)["peak"] for t in range(1, a.steps + 1)] if routing else None
    return dict(routing=routing, step_peaks=step_peaks, model=model_json, dtype=dtype, stage=stage, lora=lora,
                freeze=freeze, lora_dropout=lora_dropout, qlora=qlora,
                accum=accum, recompute=recompute, world=world, rank=rank, bucket=a.bucket, batch=a.batch, seq=a.seq,
                torch=torch.__version__, attn=a.attn,
                params=zo.S, between=stream[-1][0], peak=last["peak"], peak_phase=last["phase"],
                peak_after=last["after"], marks={l: v for l, v in last["boundaries"]}, losses=losses,
                first_peak=first["peak"], first_marks={l: v for l, v in first["boundaries"]},
                optimizer_events=optimizer_events)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("models", nargs="*", metavar="MODEL.json")
    ap.add_argument("--dtype", default="bf16", help="bf16, fp32 or both (comma-separated)")
    ap.add_argument("--stage", default="2", help="1, 2 or both (comma-separated)")
    ap.add_argument("--bucket", type=int, default=100000, help="reduce_bucket_size, elements")
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--seq", type=int, default=32)
    ap.add_argument("--batch", type=int, default=2)
    ap.add_argument("--dropout", choices=["0", "config"], default="config")
    ap.add_argument("--attn", choices=["eager", "sdpa"], default="eager",
                    help="the models' attention: sdpa is 2.x's scaled_dot_product_attention (hf_torch.py's)")
    ap.add_argument("--world", default="1", help="N ranks over gloo (1: no process group), or several, comma-separated")
    ap.add_argument("--lora", action="append", default=[], metavar="MODEL.json",
                    help="also MODEL.json in fp32 under LoRA (each --stage; repeatable)")
    ap.add_argument("--lora-r", type=int, default=4)
    ap.add_argument("--lora-freeze", default="", metavar="PATTERN",
                    help="--freeze's pattern over the adapters (tests/ft_torch.py's), none by default")
    ap.add_argument("--lora-dtype", default="fp32", help="the --lora runs' dtypes: fp32, bf16 or both")
    ap.add_argument("--lora-dropout", default="", metavar="P",
                    help="also each --lora MODEL.json in bf16 at stage 1 with lora_dropout P, no adapter frozen")
    ap.add_argument("--qlora", action="append", default=[], metavar="MODEL.json=DQ[,K[,full]]",
                    help="also MODEL.json under QLoRA (each --lora-dtype and --stage, every --world; repeatable): "
                         "LoRA r --lora-r over --qlora-targets, the base 4-bit (tests/ft_torch.py's), DQ its double "
                         "quantization, on or off; K gradient_accumulation_steps, full: Hugging Face's gradient "
                         "checkpointing (as --recompute)")
    ap.add_argument("--qlora-targets", dest="lora_targets", default="", metavar="T",
                    help="the --qlora runs' LoRA targets (tests/ft_torch.py's --lora-targets; PEFT's default)")
    ap.add_argument("--accum", action="append", default=[], metavar="MODEL.json=K",
                    help="also MODEL.json in bf16 under gradient_accumulation_steps K (each --stage), and in fp32 at "
                         "the first --stage, N = 1 (repeatable)")
    ap.add_argument("--recompute", action="append", default=[], metavar="MODEL.json",
                    help="also MODEL.json in bf16 under Hugging Face's gradient checkpointing (hf_torch.py's "
                         "--recompute full; each --stage, N = 1; repeatable)")
    ap.add_argument("--freeze", action="append", default=[], metavar="MODEL.json=PATTERN",
                    help="also MODEL.json in bf16 with PATTERN frozen (each --stage), and in fp32 at the first "
                         "--stage, N = 1 (repeatable)")
    a = ap.parse_args()
    dtypes, stages = a.dtype.split(","), a.stage.split(",")
    try:
        a.world = [int(w) for w in a.world.split(",")]
    except ValueError:
        ap.error(f"--world {a.world}: sizes, comma-separated")
    if not set(dtypes) <= {"bf16", "fp32"} or not set(stages) <= {"1", "2"}:
        ap.error("--dtype takes bf16 and fp32, --stage 1 and 2")
    if a.attn == "sdpa" and hf_torch.TV < (2, 0):
        ap.error(f"--attn sdpa: PyTorch {torch.__version__} has no scaled_dot_product_attention (2.x's)")
    torch.set_num_threads(1)  # hf_torch.py's run(): LayerNorm's scratch
    cases = [(m, dt, int(st)) for m in a.models for dt in dtypes for st in stages]
    lora = [(m, dt, int(st), True, a.lora_freeze) for m in a.lora for dt in a.lora_dtype.split(",") for st in stages]
    cases += lora
    if a.lora_dropout:
        cases += [(m, "bf16", 1, True, "", float(a.lora_dropout)) for m in a.lora]
    for f in a.accum:  # bf16 each stage; fp32 at the first, for its losses (N = 1)
        m, _, k = f.partition("=")
        cases += [(m, "bf16", int(st), False, "", 0.0, int(k)) for st in stages]
        cases += [(m, "fp32", int(stages[0]), False, "", 0.0, int(k))]
    qlora = []
    for f in a.qlora:  # fp32 each stage, every N
        m, _, spec = f.partition("=")
        dq, k, rc = (spec.split(",") + ["1", "none"])[:3]
        if dq not in ("on", "off") or not k.isdigit() or rc not in ("none", "full"):
            ap.error(f"--qlora {f}: MODEL.json=on or =off (its double quantization), then ,K and ,full")
        qlora += [(m, dt, int(st), True, "", 0.0, int(k), rc, dq) for dt in a.lora_dtype.split(",") for st in stages]
    cases += qlora
    for m in a.recompute:  # bf16 each stage (N = 1)
        cases += [(m, "bf16", int(st), False, "", 0.0, 1, "full") for st in stages]
    for f in a.freeze:  # bf16 each stage; fp32 at the first, for its losses (N = 1)
        m, _, pat = f.partition("=")
        cases += [(m, "bf16", int(st), False, pat) for st in stages] + [(m, "fp32", int(stages[0]), False, pat)]
    for w in a.world:
        if w == 1:
            for c in cases:
                print(json.dumps(run(a, *c), sort_keys=True), flush=True)
            continue
        # gloo over N processes, every case in each (hf_torch.py's spawn and
        # its pinned group, ddp_group: each collective waited and followed
        # by one more, so that every free is the caller's); rank 0 prints
        # each case with every rank's figures. gloo in 1.13 reduces no
        # bf16 ("Invalid scalar type"): there bf16 at N = 1 alone, said on
        # stderr; 2.x's gloo reduces it (the plain dtypes' cases, as fp32's).
        bf16 = hf_torch.TV >= (2, 0)
        if "bf16" in dtypes and not bf16:
            sys.stderr.write(f"ds_bf16_torch: bf16 not run at N = {w}: gloo in PyTorch 1.13 reduces no bf16 tensor\n")
        cw = [c for c in cases if (bf16 or c[1] != "bf16") and (len(c) < 5 or c in lora or c in qlora)]
        # (not --freeze's or --accum's)
        if cw:
            hf_torch.spawn(worker, w, lambda store, w=w, cw=cw: (a, w, cw, store))


def worker(rank, a, world, cases, store):
    import torch.distributed as dist
    hf_torch.RANK[0] = rank
    dist.init_process_group("gloo", init_method="file://" + store, rank=rank, world_size=world)
    torch.set_num_threads(1)
    hf_torch.PIN.append(torch.zeros(1))
    pg = hf_torch.ddp_group()
    for c in cases:
        d = run(a, *c, world=world, rank=rank, pg=pg)
        every = [None] * world
        dist.all_gather_object(every, {k: d[k] for k in ("between", "peak", "peak_phase", "marks", "losses",
                                                                   "first_peak", "first_marks", "routing",
                                                                   "step_peaks")})
        d["ranks"] = every
        if rank == 0:
            print(json.dumps(d, sort_keys=True), flush=True)
    hf_torch.finish(rank, store)


if __name__ == "__main__":
    main()

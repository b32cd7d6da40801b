"""ds_bf16_torch — DeepSpeed's ZeRO-1/2 step in bf16 at N = 1, transcribed
onto real PyTorch, its allocator's bytes (a reference for issue #22's
`--wrapper deepspeed --precision bf16`, which zerosim does not build yet).

DeepSpeed is not installable here. This is a transcription of what its
engine and its ZeRO optimizer allocate, read at DeepSpeed 38327e0 (0.16.5;
runtime/zero/stage_1_and_2.py as s12, runtime/engine.py as engine,
runtime/utils.py as utils, runtime/fp16/loss_scaler.py as loss_scaler),
run over tests/hf_torch.py's model (Hugging Face's modeling code op for op)
inside torch.profiler.profile(profile_memory=True), every allocation
replayed (hf_torch.py's marks and replay). With --dtype fp32 it is the run
zerosim's util/ag_ds.c describes (docs/schedule.md, "DeepSpeed over the
PyTorch step"), so the fp32 figures can be held to `zerosim theory
--wrapper deepspeed --world 1` to check the transcription; with --dtype
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
Everything else is the fp32 run's (the norm in float64, 1663-1721; Adam
over the fp32 partition; self.losses, engine 2105-2106 and 2278).

At N = 1 no collective is called (there is no process group here): at
N = 1 DeepSpeed's all-reduces and all-gather work in place on CPU tensors.

Prints one JSON object a run: the bytes live between steps (after the
last step), the steady step's peak (the last step) and the phase where it
falls, the losses. Exit 0; 2 bad usage.

Usage: python3 ds_bf16_torch.py MODEL.json... [--dtype bf16,fp32] [--stage 1,2]
       [--bucket 100000] [--steps 3] [--seq 32] [--batch 2] [--dropout config|0]
(one JSON line per model, dtype and stage)
"""
import argparse
import json
import sys

import torch
from torch.profiler import ProfilerActivity, profile

import hf_torch
from hf_torch import mark


class ZeroBf16:
    """stage_1_and_2.py's DeepSpeedZeroOptimizer at N = 1, contiguous_gradients
    on, overlap_comm off, one param group, over a client Adam."""

    def __init__(self, opt, stage, bucket):
        self.opt, self.stage, self.bucket = opt, stage, bucket
        group = opt.param_groups[0]
        # 305-315: the trainable parameters in group order
        self.params = [p for p in group["params"] if p.requires_grad]
        self.dtype = self.params[0].dtype  # 284
        # 323-330: each parameter's data kept aside (.cpu(): the same
        # storage on the CPU), replaced by torch.empty(1) (fp32)
        # 348-351: meta tensors of the shapes, for the views
        self.meta = [torch.zeros_like(p, device="meta") for p in self.params]
        cpu_data = []
        for p in self.params:
            cpu_data.append(p.data.cpu())
            p.data = torch.empty(1).to(p.device)
        # 353-357, utils 940-951: aligned to nccl_start_alignment_factor 2
        # x world 1, a zeros() of the remainder, then the flat cat
        n = sum(t.numel() for t in cpu_data)
        rem = n % 2
        lst = cpu_data + ([torch.zeros(2 - rem, dtype=self.dtype)] if rem else [])
        flat = torch._utils._flatten_dense_tensors(lst)
        del lst
        del cpu_data  # 360-361: del param.cpu_data
        self.flat = flat  # 364: .to(device), no copy on the CPU
        self._update_views()  # 643-651
        self.S = self.flat.numel()  # 1587-1605 at N = 1: the whole buffer
        # 396-403: .clone().float()
        self.fp32 = self.flat.narrow(0, 0, self.S).clone().float().detach()
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
        self.ipg = torch.empty(int(self.bucket), dtype=self.dtype)  # 2050-2053
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
        t.div_(1 / float(1))  # average_tensor 1122 (world 1)
        # allreduce_bucket 1490-1523: one slice, its flatten a view; no
        # all_reduce at N = 1; the copy back onto itself
        for p in self.in_bucket:
            self.copy_in_partition(p)  # stage 1 and 2 alike at N = 1
        self.in_bucket, self.elements = [], 0

    def copy_in_partition(self, p):  # 1329-1363
        if self.gip is None:
            self.gip_offset = 0
            self.gip = torch.empty(sum(q.numel() for q in self.params), dtype=self.dtype)
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
        # get_flat_partition 1723-1761: views of the grads (no padding at
        # N = 1 where the parameters' sum is even)
        self.averaged = [p.grad.view(-1) for p in self.params]
        self.ipg = None  # _release_ipg_buffers 676-680
        self.gip = None
        for p in self.params:  # zero_grad(set_to_none=True), 1638-1651
            p.grad = None

    # --- step (1826-1944)
    def norm(self):  # 1787-1803 -> 1663-1721
        norms = [torch.linalg.vector_norm(g.data.double().detach(), ord=2.0) for g in self.averaged]
        total = torch.stack(norms).square().sum().float()
        del norms
        total = total.pow(1. / 2.0)
        inf_or_nan = total.isnan().logical_or(total.isinf())
        err = torch.tensor(-1.0, dtype=torch.float)
        total = inf_or_nan * err + inf_or_nan.logical_not() * total
        return torch.linalg.vector_norm(torch.stack([total]), ord=2.0)

    def step(self):
        scaled_norm = self.norm()
        self.global_grad_norm = scaled_norm / 1.0
        # 1888-1897: the last partition: align (nothing) and cat, .to(fp32)
        flat_g = torch._utils._flatten_dense_tensors(self.averaged).to(self.fp32.dtype)
        self.fp32.grad = flat_g
        self.averaged = None  # free_grad_in_param_list, averaged_gradients[i] = None
        flat_g.mul_(1. / 1.0)  # unscale_and_clip_grads 1970-1985
        self.opt.step()  # _optimizer_step 1811-1824
        self.fp32.grad = None
        del flat_g
        self.flat.narrow(0, 0, self.S).data.copy_(self.fp32.data)  # 1918-1920
        self._update_views()  # 1938-1940


def run(a, model_json, dtype, stage):
    """One run: the model from MODEL.json under DeepSpeed's stage `stage`
    in `dtype`, a.steps steps, profiled; its figures."""
    torch.manual_seed(0)
    b = argparse.Namespace(model=model_json, dropout=a.dropout, tied=None, recompute="none", mask="where")
    _, family, cfg, tied = hf_torch.build(b)
    losses = []
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        mark("build")
        if family == "gpt2":
            model = hf_torch.GPT2LMHeadModel(cfg, tied, b.mask, False)
        elif family in hf_torch.FAMILY_ATTENTION:
            model = hf_torch.LlamaForCausalLM(cfg, tied, False, hf_torch.FAMILY_ATTENTION[family])
        else:
            sys.exit(f"ds_bf16_torch: model_type {family!r}: gpt2 and the llama-like families only")
        model.train()
        hf_torch.install_hooks(model, set(model.units))
        if dtype == "bf16":
            model.bfloat16()  # engine 1228-1231
        opt = torch.optim.Adam(model.parameters(), lr=1e-3, foreach=False)
        zo = ZeroBf16(opt, stage, a.bucket)
        g = torch.Generator().manual_seed(1)
        ids = torch.randint(0, cfg["vocab_size"], (a.batch, a.seq), generator=g)
        labels = ids.clone()
        engine_losses = None
        for step in range(1, a.steps + 1):
            mark(f"step:{step}")
            mark("phase:forward")
            # the loop keeps the model's outputs (the loss and the logits)
            # to the step's end, as hf_torch.py's (--keep-logits 1)
            outputs = model(ids, labels)
            loss = outputs[0]
            # engine.backward 2085-2150: the logged loss, then the optimizer's
            mean_loss = loss.mean().detach()
            engine_losses = mean_loss if engine_losses is None else engine_losses + mean_loss
            zo.backward(loss)
            zo.epilogue()  # engine.allreduce_gradients 2048-2062
            del mean_loss
            mark("phase:optimizer")
            zo.step()
            mark("phase:zero_grad")
            opt.zero_grad(set_to_none=True)  # _take_model_step 2245-2252: nothing left
            engine_losses = None  # 2278
            losses.append(float(loss))
            del loss
            outputs = None
            mark("phase:between")
            mark(f"step:{step + 1}")
    stream = hf_torch.replay(hf_torch.memory_events(prof))
    last = hf_torch.analyse_step(stream, a.steps)
    return dict(model=model_json, dtype=dtype, stage=stage, bucket=a.bucket, torch=torch.__version__,
                params=zo.S, between=stream[-1][0], peak=last["peak"], peak_phase=last["phase"],
                peak_after=last["after"], marks={l: v for l, v in last["boundaries"]}, losses=losses)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("models", nargs="+", metavar="MODEL.json")
    ap.add_argument("--dtype", default="bf16", help="bf16, fp32 or both (comma-separated)")
    ap.add_argument("--stage", default="2", help="1, 2 or both (comma-separated)")
    ap.add_argument("--bucket", type=int, default=100000, help="reduce_bucket_size, elements")
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--seq", type=int, default=32)
    ap.add_argument("--batch", type=int, default=2)
    ap.add_argument("--dropout", choices=["0", "config"], default="config")
    a = ap.parse_args()
    dtypes, stages = a.dtype.split(","), a.stage.split(",")
    if not set(dtypes) <= {"bf16", "fp32"} or not set(stages) <= {"1", "2"}:
        ap.error("--dtype takes bf16 and fp32, --stage 1 and 2")
    torch.set_num_threads(1)  # hf_torch.py's run(): LayerNorm's scratch
    for m in a.models:
        for dt in dtypes:
            for st in stages:
                print(json.dumps(run(a, m, dt, int(st)), sort_keys=True), flush=True)


if __name__ == "__main__":
    main()

"""ft_torch — the outside reference for fine-tuning (issue #23's reference
side): what real PyTorch allocates when the tiny gpt2/llama of
tests/hf_torch.py are trained with gradient accumulation, frozen
parameters and LoRA, on the CPU, one rank (the plain loop) or DDP over
gloo with N ranks.

The models, the boundary marks and the allocator replay are hf_torch.py's
(imported, not copied). What this file adds:

  --grad-accum K   K micro-steps per optimizer step (the micro-batch stays
                   --batch; micro-batch k is rows k*B..(k+1)*B-1 of one
                   K*B batch drawn once, so K=2 B=1 and K=1 B=2 see the same
                   tokens); each micro loss is divided by K before backward,
                   as transformers' Trainer.training_step does.
  --world N        DDP over gloo, N ranks (rank 0 is measured);
  --no-sync 0|1    DDP's no_sync() on the first K-1 micro-steps (default 1);
                   under --fsdp FSDP's no_sync() there.
  --zero1          with --world N: the optimizer is torch's
                   ZeroRedundancyOptimizer(trainable, optimizer_class=Adam)
                   over the DDP model (torch's zero1, at its defaults:
                   parameters_as_bucket_view False, overlap_with_ddp
                   False), given the trainable parameters as
                   Trainer.create_optimizer gives them (see --freeze): it
                   partitions and broadcasts those alone. Every rank's
                   figures (they differ) in "ranks".
  --fsdp           with --world N: FullyShardedDataParallel (1.13) in place
                   of DDP: hf_torch.fsdp_wrap (FULL_SHARD, one unit per
                   block and the root, tests/fsdp_torch.py's gloo shims),
                   the optimizer over its flat parameters.
  --fsdp-strategy full_shard|shard_grad_op  --fsdp's sharding_strategy
                   (hf_torch.fsdp_strategy; PEFT's policy's too).
  --fsdp-orig-params on|off  on: --fsdp's use_orig_params=True (2.x): a unit
                   may mix frozen and trainable parameters (--freeze; under
                   --lora-r hf_torch.fsdp_wrap's block policy, not PEFT's:
                   each block's unit its frozen base and its adapters),
                   the optimizer over the original
                   parameters, each rank's shard's pieces of them; every
                   rank's figures (they differ) in "ranks".
  --bucket-cap-mb MB  DDP's bucket_cap_mb (default: not given, DDP's own);
                   with --world > 1 the output's ddp_buckets are the
                   reducer's rebuilt buckets, bytes each in its order.
  --freeze SPEC    frozen parameters by Hugging Face parameter names (the
                   syntax proposed for zerosim's --freeze; docs/finetune.md):
                   comma-separated terms, each one of
                     embeddings          token (and position) embeddings
                                         (a tied head goes with them)
                     blocks:A-B          blocks A..B (0-based, inclusive, A <= B)
                     all-but-last:N      embeddings and every block but the
                                         last N (final norm and head stay
                                         trainable)
                     re:REGEX            re.search over the HF name
                     GLOB                fnmatch over the HF name
                                         (transformer.h.0.*, *.ln_*)
                   Frozen: requires_grad False and left out of the
                   optimizer, as Trainer.create_optimizer does
                   (p.requires_grad filter). A malformed term (blocks:A-B
                   with A > B, a re: that does not compile), a pattern
                   that freezes every parameter or none, or a term of it
                   that freezes none is one line, exit 2, before any rank
                   starts (freeze_check, freeze_names; zerosim refuses the
                   same: util/freeze.c, util/autograd.c). With --lora-r
                   the base is frozen already: the pattern names adapters
                   (PEFT's names, ....lora_A.default.weight; blocks:0-0
                   block 0's, re:lora_B every lora_B), the same counted
                   over the adapters alone.
  --lora-r R --lora-alpha A --lora-dropout P --lora-targets T
                   PEFT's LoRA for nn.Linear and transformers' Conv1D,
                   written from peft/tuners/lora/layer.py at v0.20.0 (see
                   LoraLinear); the base model frozen; T is a comma list of
                   module-name suffixes (c_attn, q_proj,v_proj) or
                   all-linear (every Linear/Conv1D but the output head:
                   peft/tuners/tuners_utils.py v0.20.0 lines 1983-2035,
                   _maybe_include_all_linear_layers); default PEFT's per
                   model (peft/utils/constants.py v0.20.0: gpt2 c_attn line
                   69, llama q_proj,v_proj line 83).
  --quant-base nf4 [--double-quant on|off] [--quant-storage S]
                   with --lora-r (one rank, DDP or --fsdp, PyTorch >= 2.2,
                   no --case):
                   QLoRA's 4-bit base, bitsandbytes 0.47.0's Linear4bit
                   written op by op (bitsandbytes does not install here;
                   see Linear4bit, MatMul4Bit, dequantize_4bit), every
                   nn.Linear and Conv1D but lm_head quantized as the
                   constructor registers it (quantize_as_loaded), under
                   PEFT's lora.bnb.Linear4bit (LoraLinear4bit); its
                   compute dtype bf16 under --amp bf16 (the QLoRA recipe's
                   bnb_4bit_compute_dtype), else fp32. --quant-storage
                   uint8, float32 or bfloat16: bitsandbytes'
                   quant_storage, the packed codes held as that dtype's
                   elements (default uint8; under --fsdp float32, the
                   model's dtype, as FSDP-QLoRA sets it, so that FSDP
                   flattens them into its units with the rest: uint8 there
                   is FSDP's "Cannot flatten integer dtype tensors").
  --load-dtype bf16
                   with --quant-base nf4: QLoRA's bf16 recipe, the model
                   built under the bf16 default dtype (from_pretrained(
                   torch_dtype=torch.bfloat16)), each 4-bit layer quantized
                   from its bf16 weight, compute dtype bf16, the adapters
                   fp32, oneDNN off (as under --amp); under --fsdp the
                   codes as bfloat16 elements (quant_storage bfloat16).
                   With --amp bf16 the same model under the CPU's bf16
                   autocast: only the fp32 adapters' linears cast (every
                   other op meets bf16 operands)
  --amp bf16       each micro-step's forward under torch.autocast("cpu",
                   bfloat16), as hf_torch.py --amp bf16 (oneDNN off, as
                   there); the loss's division by K and backward outside the
                   region, as Trainer.training_step does (compute_loss in
                   its context manager, the division after).
  --amp fp16       the same in float16 (PyTorch >= 2.3, no --quant-base)
                   under torch.amp.GradScaler("cpu") (--fsdp:
                   ShardedGradScaler("cpu")), as
                   hf_torch.py --amp fp16: each micro-step's
                   scaler.scale(loss).backward() (the loss divided by K
                   first), then one scaler.step(opt) and scaler.update()
                   (torch/amp/grad_scaler.py at v2.6.0); the unscale_ over
                   the optimizer's parameters alone (its param_groups:
                   the trainable ones, under ZeroRedundancyOptimizer every
                   rank's, not its shard's).

Output: one JSON object: the bytes live between optimizer steps, the peak
of the steady (last) step, its phase and the mark after which it falls,
every mark's live bytes, the bytes live at the end of each micro-step's
forward (what autograd saved, less the between-steps bytes), the
persistent set split into params/grads/Adam state for trainable and frozen
parameters, the trainable count, per-micro-step all-reduce counts (DDP:
gloo's all_reduce ops the profiler saw) and the losses.

--table: runs the standard cases (each in its own process) and prints them
side by side with the full-training peak of the same model.

Exit 0; 2 bad usage.
"""
import argparse
import contextlib
import fnmatch
import json
import math
import os
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hf_torch as H  # noqa: E402  (the models, marks and replay)

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
from torch.profiler import ProfilerActivity, profile  # noqa: E402


# ---------------------------------------------------------------------------
# LoRA, as PEFT v0.20.0 writes it for nn.Linear (peft/tuners/lora/layer.py)


def bits(p):
    """p's bytes as a tensor numpy takes (a bf16 one, --lora-dtype bf16, as int16)."""
    return p.detach().view(torch.int16) if p.dtype == torch.bfloat16 else p.detach()


class LoraLinear(nn.Module):
    """peft/tuners/lora/layer.py at v0.20.0 (huggingface/peft tag v0.20.0):
    LoraLayer.update_layer: lora_dropout nn.Dropout(p) when p > 0, else
    nn.Identity (lines 252-254); lora_A = nn.Linear(in_features, r,
    bias=False), lora_B = nn.Linear(r, out_features, bias=False) (lines
    259-260); scaling = lora_alpha / r (line 277; / sqrt(r) with rslora,
    line 275); reset_lora_parameters: kaiming_uniform_(A, a=sqrt(5)), B
    zeros (lines 334, 339). Linear.forward (lines 1030-1069): result =
    base_layer(x); torch_result_dtype = result.dtype; x =
    _cast_input_dtype(x, lora_A.weight.dtype) (a no-op when the dtypes
    agree: tuners_utils.py line 1790); result = result +
    lora_B(lora_A(dropout(x))) * scaling; result.to(torch_result_dtype).
    transformers' Conv1D is dispatched to the same Linear with
    fan_in_fan_out True (dispatch_default, lines 2629-2635): the adapters
    are the same nn.Linear pair, in_features/out_features from the
    transposed weight (nx, nf). ModuleDicts keyed "default" give PEFT's
    parameter names (....lora_A.default.weight)."""

    def __init__(self, base, r, alpha, dropout, conv1d):
        super().__init__()
        self.base_layer = base
        if conv1d:
            in_f, out_f = base.weight.shape  # Conv1D weight is (nx, nf)
        else:
            in_f, out_f = base.in_features, base.out_features
        self.in_features, self.out_features = in_f, out_f
        self.fan_in_fan_out = conv1d
        self.lora_dropout = nn.ModuleDict({"default": nn.Dropout(p=dropout) if dropout > 0.0 else nn.Identity()})
        self.lora_A = nn.ModuleDict({"default": nn.Linear(in_f, r, bias=False)})
        self.lora_B = nn.ModuleDict({"default": nn.Linear(r, out_f, bias=False)})
        self.scaling = {"default": alpha / r}
        nn.init.kaiming_uniform_(self.lora_A["default"].weight, a=math.sqrt(5))
        nn.init.zeros_(self.lora_B["default"].weight)

    def forward(self, x):
        result = self.base_layer(x)
        torch_result_dtype = result.dtype
        lora_A = self.lora_A["default"]
        lora_B = self.lora_B["default"]
        dropout = self.lora_dropout["default"]
        scaling = self.scaling["default"]
        if x.dtype != lora_A.weight.dtype:
            x = x.to(dtype=lora_A.weight.dtype)
        result = result + lora_B(lora_A(dropout(x))) * scaling
        return result.to(torch_result_dtype)


# ---------------------------------------------------------------------------
# QLoRA's 4-bit base, as bitsandbytes 0.47.0 stores and computes it (tag
# 0.47.0 of bitsandbytes-foundation/bitsandbytes; docs/finetune.md, "QLoRA's
# 4-bit base"), op by op: bitsandbytes does not install here. Its CUDA
# kernels each allocate their output and nothing else (backends/cuda/ops.py
# line 360, dequantize_4bit's torch.empty; line 250 dequantize_blockwise's
# empty_like): here each is one torch.empty of that output, its values
# computed in numpy (no byte of the torch allocator: the kernel's registers)
# and copied in.

NF4 = [-1.0, -0.6961928009986877, -0.5250730514526367, -0.39491748809814453, -0.28444138169288635,
       -0.18477343022823334, -0.09105003625154495, 0.0, 0.07958029955625534, 0.16093020141124725,
       0.24611230194568634, 0.33791524171829224, 0.44070982933044434, 0.5626170039176941,
       0.7229568362236023, 1.0]  # functional.py get_4bit_type, lines 732-749 (the QLoRA paper's)
QMAP = []  # name2qmap["dynamic"]: made at the first double quantization (functional.py lines 604-607)


def dynamic_map():
    """create_dynamic_map(signed=True, 7, 8) (functional.py lines 281-333),
    a torch tensor of 256 fp32 (the torch allocator's: 1 KiB)."""
    import numpy as np
    data = []
    for i in range(7):
        bd = np.linspace(0.1, 1, 2 ** i + 1, dtype=np.float32)
        means = (bd[:-1] + bd[1:]) / 2.0
        data += list((10 ** (-6 + i)) * means) + list(-(10 ** (-6 + i)) * means)
    data += [0.0, 1.0]
    return torch.tensor(sorted(float(x) for x in data), dtype=torch.float32)


def np_blockwise(a, code, bs):
    """quantize over `code` per block of bs (backends/default/ops.py lines
    192-232 and 149-170): absmax per block, a * (1 / absmax) clamped to
    [-1, 1], the nearest code's index (the first on a tie: argmin)."""
    import numpy as np
    n = a.size
    blocks = -(-n // bs)
    pad = np.zeros(blocks * bs, np.float32)
    pad[:n] = a
    absmax = np.abs(pad.reshape(blocks, bs)).max(axis=1).astype(np.float32)
    scaled = np.clip(pad.reshape(blocks, bs) * (np.float32(1) / absmax)[:, None], -1, 1).reshape(-1)[:n]
    idx = np.abs(scaled[:, None] - code[None, :]).argmin(axis=1).astype(np.uint8)
    return idx, absmax


def torch_of(np_array, shape=None):
    """A torch allocation of the array's bytes (the kernel's output), filled from it."""
    t = torch.empty(shape or np_array.shape, dtype={"uint8": torch.uint8, "float32": torch.float32}[str(np_array.dtype)])
    t.copy_(torch.from_numpy(np_array.reshape(t.shape)))
    return t


class QuantState:
    """functional.py QuantState (line 392, a plain class: its tensors are
    attributes, neither parameter nor buffer): absmax fp32 [blocks], code
    fp32 [16]; nested (double quantization): absmax uint8 [blocks], offset
    fp32 0-dim, state2's absmax fp32 [ceil(blocks / 256)] and code (a copy
    of the dynamic map); dtype the weight's before quantizing."""


def quantize_4bit(w, double_quant, storage=torch.uint8):
    """Params4bit._quantize (nn/modules.py lines 298-312) of w [out, in]
    (fp32): functional.quantize_4bit (lines 825-905): the packed uint8
    [(n + 1) / 2, 1] (first element in the high nibble, default ops line
    227), the fp32 absmax, get_4bit_type's code; with compress_statistics
    (873-886) offset = absmax.mean(), quantize_blockwise(absmax - offset,
    256) over the dynamic map, state2.code a copy of it (line 628), the fp32
    absmax deleted."""
    import numpy as np
    code = np.array(NF4, np.float32)
    if w.dtype == torch.bfloat16:
        # --load-dtype bf16: the kernel reads the bf16 weight as it is (no
        # fp32 copy in PyTorch's allocator): its bytes widened here
        wd = w.detach()
        if not wd.is_contiguous():
            raise ValueError("--load-dtype bf16: a transposed (Conv1D) weight is not quantized here")
        raw = kernel_bytes(wd).view(np.uint16).astype(np.uint32) << 16
        wf = raw.view(np.float32)
    else:
        wf = w.detach().numpy().reshape(-1)
    idx, am = np_blockwise(wf, code, 64)
    if idx.size % 2:
        idx = np.append(idx, np.uint8(0))
    codes = (idx[0::2] << 4 | idx[1::2]).astype(np.uint8)
    if storage == torch.uint8:
        packed = torch_of(codes, ((w.numel() + 1) // 2, 1))
    else:
        # quant_storage (FSDP-QLoRA): the CUDA kernel's one output,
        # torch.empty(((n + 1) // (quant_storage.itemsize * 2), 1),
        # dtype=quant_storage) (backends/cuda/ops.py line 320), the same
        # codes read as that dtype's elements
        size = storage.itemsize if hasattr(storage, "itemsize") else torch.empty(0, dtype=storage).element_size()
        packed = torch.empty(((w.numel() + 1) // (size * 2), 1), dtype=storage)
        packed.view(torch.uint8).copy_(torch.from_numpy(codes[:packed.numel() * size].reshape(-1, size)))
    absmax = torch_of(am)
    qs = QuantState()
    qs.shape, qs.dtype, qs.nested = tuple(w.shape), w.dtype, double_quant
    qs.code = torch.tensor(NF4, dtype=torch.float32)
    if not double_quant:
        qs.absmax = absmax
        return packed, qs
    qs.offset = absmax.mean()
    d = absmax - qs.offset
    if not QMAP:
        QMAP.append(dynamic_map())
    qi, am2 = np_blockwise(d.numpy(), QMAP[0].numpy(), 256)
    qs.absmax = torch_of(qi)
    qs.absmax2 = torch_of(am2)
    qs.code2 = QMAP[0].clone()  # code.to(A.device, copy=True)
    del d, absmax
    return packed, qs


def kernel_bytes(t):
    """The bytes a kernel reads from contiguous t, as a numpy uint8 array
    over its memory: no allocation, and unlike t.numpy() the storage stays
    resizable (tensor_to_numpy marks it not), which FSDP's
    _free_storage needs of a view of its gathered flat parameter."""
    import ctypes
    import numpy as np
    n = t.numel() * t.element_size()
    return np.ctypeslib.as_array((ctypes.c_uint8 * n).from_address(t.data_ptr())) if n else np.empty(0, np.uint8)


def dequantize_4bit(packed, qs):
    """functional.dequantize_4bit (lines 930-1015): nested, the fp32 absmax
    first (dequantize_blockwise: one empty_like, cuda ops line 250; then
    `absmax += offset`, lines 981-984, in place); then the weight, one
    torch.empty(shape, quant_state.dtype) (cuda ops line 360): code[index]
    * absmax of its block; the absmax goes as it returns."""
    import numpy as np
    if qs.nested:
        am = torch.empty(qs.absmax.shape, dtype=torch.float32)
        qi = qs.absmax.numpy().astype(np.int64)
        blk = np.repeat(qs.absmax2.numpy(), 256)[:qi.size]
        am.copy_(torch.from_numpy(qs.code2.numpy()[qi] * blk))
        am += qs.offset
    else:
        am = qs.absmax
    p = kernel_bytes(packed)
    idx = np.empty(2 * p.size, np.int64)
    idx[0::2], idx[1::2] = p >> 4, p & 15
    n = math.prod(qs.shape)
    vals = qs.code.numpy()[idx[:n]] * np.repeat(am.numpy(), 64)[:n]
    out = torch.empty(qs.shape, dtype=qs.dtype)
    out.copy_(torch.from_numpy(vals.astype(np.float32).reshape(qs.shape)))
    return out


class MatMul4Bit(torch.autograd.Function):
    """autograd/_functions.py MatMul4Bit (lines 359-413): forward
    F.linear(A, dequantize_4bit(B).to(A.dtype).t(), bias) (line 380), saves
    (None, B) (386-389: the packed weight, a parameter: no bytes);
    backward grad_A = matmul(grad_output, dequantize_4bit(B).to(
    grad_output.dtype).t()) (line 411), no weight gradient (409)."""

    @staticmethod
    def forward(ctx, A, B, bias, qs):
        output = torch.nn.functional.linear(A, dequantize_4bit(B, qs).to(A.dtype), bias)
        ctx.state = qs
        ctx.save_for_backward(B)
        return output

    @staticmethod
    def backward(ctx, grad_output):
        (B,) = ctx.saved_tensors
        grad_A = torch.matmul(grad_output, dequantize_4bit(B, ctx.state).to(grad_output.dtype))
        return grad_A, None, None, None


class Linear4bit(nn.Module):
    """bnb.nn.Linear4bit (nn/modules.py lines 417-565) in place of an
    nn.Linear or a Conv1D (transformers' _replace_with_bnb_linear; a
    Conv1D's weight transposed to [out, in] first): `weight` the packed
    Params4bit (a frozen uint8 parameter), the bias kept. forward (lines
    541-565): the bias's data cast to x's dtype for good where they differ
    (line 551), x to compute_dtype (559), the bias to compute_dtype (561),
    matmul_4bit (565: MatMul4Bit.apply for a CPU input, _functions.py lines
    434-452), the result back to x's dtype. compute_dtype: bf16 under
    --amp bf16 (BitsAndBytesConfig(bnb_4bit_compute_dtype=torch.bfloat16),
    the QLoRA recipe), else fp32 (the config's default)."""

    def __init__(self, mod, conv1d, double_quant, compute_dtype, storage=torch.uint8):
        super().__init__()
        w = mod.weight.t() if conv1d else mod.weight
        packed, self.qs = quantize_4bit(w, double_quant, storage)
        self.weight = nn.Parameter(packed, requires_grad=False)
        self.bias = mod.bias
        self.compute_dtype = compute_dtype

    def forward(self, x):
        if self.bias is not None and self.bias.dtype != x.dtype:
            self.bias.data = self.bias.data.to(x.dtype)
        inp_dtype = x.dtype
        x = x.to(self.compute_dtype)
        bias = None if self.bias is None else self.bias.to(self.compute_dtype)
        # (weight.t(): a view of the packed bytes; the kernel reads them as stored)
        return MatMul4Bit.apply(x, self.weight, bias, self.qs).to(inp_dtype)


class LoraLinear4bit(LoraLinear):
    """PEFT v0.20.0's lora.bnb.Linear4bit.forward (tuners/lora/bnb.py lines
    513-553): result = base_layer(x); result = result.clone() (533); where
    torch.is_autocast_enabled() is False (543: under 2.6 that is CUDA's
    autocast, so under the CPU's autocast too) expected_dtype =
    result.dtype and x cast to lora_A's dtype (546); output =
    lora_B(lora_A(dropout(x))) * scaling (549), output.to(expected_dtype)
    (551); result = result + output (552)."""

    def forward(self, x):
        result = self.base_layer(x)
        result = result.clone()
        lora_A = self.lora_A["default"]
        lora_B = self.lora_B["default"]
        dropout = self.lora_dropout["default"]
        scaling = self.scaling["default"]
        requires_conversion = not torch.is_autocast_enabled()
        if requires_conversion:
            expected_dtype = result.dtype
            if x.dtype != lora_A.weight.dtype:
                x = x.to(dtype=lora_A.weight.dtype)
        output = lora_B(lora_A(dropout(x))) * scaling
        if requires_conversion:
            output = output.to(expected_dtype)
        result = result + output
        return result


# --quant-storage: bitsandbytes' quant_storage (Params4bit, nn/modules.py
# line 220; transformers' BitsAndBytesConfig(bnb_4bit_quant_storage=...))
STORAGE = {"uint8": torch.uint8, "float32": torch.float32, "bfloat16": torch.bfloat16}


def quantize_as_loaded(a):
    """transformers' 4-bit load, one weight at a time: _replace_with_bnb_linear
    makes every nn.Linear and Conv1D but lm_head (modules_to_not_convert) a
    Linear4bit, and create_quantized_param quantizes each weight as it moves
    it to the device, the fp32 copy let go (quantizer_bnb_4bit.py lines
    146-233 at commit 009ba7ca; Params4bit.to, nn/modules.py lines 337-341).
    Here each linear layer is replaced as the model's constructor registers
    it (a global module registration hook, PyTorch >= 2.0), so the set-up
    holds one layer's fp32 weight at a time, as the loader does. Returns
    the hook's handle (remove it once the model is built)."""
    cdt = torch.bfloat16 if a.amp == "bf16" or a.load_dtype == "bf16" else torch.float32

    def hook(module, name, sub):
        if name == "lm_head" or not isinstance(sub, (nn.Linear, H.Conv1D)):
            return None
        conv = isinstance(sub, H.Conv1D)
        q = Linear4bit(sub, conv, a.double_quant, cdt, STORAGE[a.quant_storage])
        q.in_features, q.out_features = sub.weight.shape if conv else (sub.in_features, sub.out_features)
        return q
    return torch.nn.modules.module.register_module_module_registration_hook(hook)


def hf_name(family, name):
    """Our module tree's name -> the Hugging Face parameter name
    (GPT2LMHeadModel: transformer.<...> but lm_head; LlamaForCausalLM:
    model.<...> but lm_head)."""
    if name.startswith("lm_head"):
        return name
    return ("transformer." if family == "gpt2" else "model.") + name


def n_blocks(cfg):
    return cfg.get("n_layer") or cfg.get("num_hidden_layers")


def freeze_check(spec):
    """Raises ValueError (one line) for a malformed term of spec: blocks:A-B
    (A <= B), all-but-last:N, a re: that does not compile. zerosim's
    --freeze refuses the same (util/freeze.c)."""
    for term in (t.strip() for t in spec.split(",")):
        if term.startswith("blocks:"):
            m = re.fullmatch(r"blocks:(\d+)-(\d+)", term)
            if not m or int(m.group(1)) > int(m.group(2)):
                raise ValueError(f"--freeze: bad term {term!r} (blocks:A-B, whole numbers, A <= B)")
        elif term.startswith("all-but-last:"):
            if not re.fullmatch(r"all-but-last:(\d+)", term):
                raise ValueError(f"--freeze: bad term {term!r} (all-but-last:N, a whole number)")
        elif term.startswith("re:"):
            try:
                re.compile(term[3:])
            except re.error as e:
                raise ValueError(f"--freeze: bad term {term!r} ({e})") from None


def freeze_names(a):
    """The HF names of the parameters --freeze freezes in a's model, built
    here on its own (before any rank starts: a bad pattern is one line and
    exit 2, not a traceback per rank). Raises ValueError when it freezes
    every parameter or none, or one of its terms freezes nothing (a
    mistake, not the full run). Under --lora-r the model is PEFT's (the
    adapters wrapped in, as run() wraps them) and what --freeze can freeze
    is an adapter (PEFT's _mark_only_adapters_as_trainable has frozen
    every base parameter): a pattern over adapters alone (re:lora_B,
    *.lora_A.*) is taken, one that freezes no adapter, a term that
    freezes none, or one that freezes every adapter is refused, as
    zerosim's util/autograd.c counts them (freeze_unmatched, lora_frozen:
    "no adapter of MODEL matches")."""
    freeze_check(a.freeze)
    torch.manual_seed(0)
    raw, family, cfg, tied = H.build(a)
    # the family's own modules (qwen3's q_norm and k_norm, phi3's fused
    # qkv_proj and gate_up_proj): their names, not llama's
    model = H.GPT2LMHeadModel(cfg, tied, a.mask, False) if family == "gpt2" else \
        H.LlamaForCausalLM(cfg, tied, False, H.FAMILY_ATTENTION.get(family))
    if getattr(a, "lora_r", 0):
        apply_lora(a, model, family)
    names = [hf_name(family, n) for n, _ in model.named_parameters()]
    what, why = "parameter", ""
    if getattr(a, "lora_r", 0):
        names = [n for n in names if ".lora_A." in n or ".lora_B." in n]
        what, why = "adapter", " (LoRA freezes every base parameter already)"
    frozen = [n for n in names if freeze_matches(a.freeze, family, cfg, n)]
    if not frozen:
        raise ValueError(f"--freeze {a.freeze}: no {what} matches{why}")
    if len(frozen) == len(names):
        raise ValueError(f"--freeze {a.freeze}: it freezes every {what}, nothing to train")
    for term in (t.strip() for t in a.freeze.split(",")):
        if term and not any(freeze_matches(term, family, cfg, n) for n in names):
            raise ValueError(f"--freeze {a.freeze}: its term {term!r} matches no {what}{why}")
    return frozen


def freeze_matches(spec, family, cfg, name):
    """True when the HF name `name` is frozen by spec (see --help)."""
    L = n_blocks(cfg)
    block = re.search(r"\.(?:h|layers)\.(\d+)\.", name)
    emb = re.search(r"\.(wte|wpe|embed_tokens)\.", name) is not None
    for term in (t.strip() for t in spec.split(",")):
        if not term:
            continue
        if term == "embeddings":
            if emb:
                return True
        elif term.startswith("blocks:"):
            m = re.fullmatch(r"blocks:(\d+)-(\d+)", term)
            if not m:
                raise ValueError(f"bad term {term!r} (blocks:A-B)")
            if block and int(m.group(1)) <= int(block.group(1)) <= int(m.group(2)):
                return True
        elif term.startswith("all-but-last:"):
            m = re.fullmatch(r"all-but-last:(\d+)", term)
            if not m:
                raise ValueError(f"bad term {term!r} (all-but-last:N)")
            if emb or (block and int(block.group(1)) < L - int(m.group(1))):
                return True
        elif term.startswith("re:"):
            if re.search(term[3:], name):
                return True
        elif fnmatch.fnmatchcase(name, term):
            return True
    return False


def apply_lora(a, model, family):
    """Wraps the target modules; returns the adapted modules' HF names."""
    from_hf = H.Conv1D
    targets = a.lora_targets or ("c_attn" if family == "gpt2" else "q_proj,v_proj")
    adapted = []
    mods = dict(model.named_modules())
    for name, mod in list(mods.items()):
        if name == "lm_head" or not isinstance(mod, (nn.Linear, from_hf, Linear4bit)):
            continue
        if targets != "all-linear":
            # PEFT's check_target_module_exists: the key equals a target or
            # ends with "." + target
            if not any(name == t or name.endswith("." + t) for t in targets.split(",")):
                continue
        parent, _, leaf = name.rpartition(".")
        pm = mods[parent] if parent else model
        if isinstance(mod, Linear4bit):  # PEFT's dispatch_bnb_4bit (tuners/lora/bnb.py): lora.bnb.Linear4bit
            setattr(pm, leaf, LoraLinear4bit(mod, a.lora_r, a.lora_alpha, a.lora_dropout, False))
        else:
            setattr(pm, leaf, LoraLinear(mod, a.lora_r, a.lora_alpha, a.lora_dropout, isinstance(mod, from_hf)))
        adapted.append(hf_name(family, name))
    if not adapted:
        raise ValueError(f"--lora-targets {targets}: no module matches")
    return adapted


def fsdp_wrap_peft(a, model):
    """FSDP (FULL_SHARD, or SHARD_GRAD_OP: hf_torch.fsdp_strategy;
    backward_prefetch None; under 2.x device_id the CPU) with PEFT's wrap policy for LoRA, written
    from peft/utils/other.py at v0.20.0, fsdp_auto_wrap_policy (lines
    1259-1296): _or_policy of lambda_auto_wrap_policy over lambda_policy_fn
    (a leaf module, no children, whose weight requires grad: lora_A's and
    lora_B's nn.Linear, 1282-1287) and transformer_auto_wrap_policy on the
    model's _no_split_modules (the block class; PEFT adds its prompt
    encoders, absent here), lambda first (1289-1295). So each adapter is an
    FSDP unit of its own inside its block's frozen unit. The rest as
    hf_torch.fsdp_wrap (tests/fsdp_torch.py's shims, the marks around it,
    every other argument its default)."""
    import fsdp_torch  # noqa: F401  (its shims, applied on import)
    import functools
    from torch.distributed.fsdp import FullyShardedDataParallel as FSDP, ShardingStrategy
    from torch.distributed.fsdp.wrap import _or_policy, lambda_auto_wrap_policy, transformer_auto_wrap_policy

    def lambda_policy_fn(module):
        return (len(list(module.named_children())) == 0 and getattr(module, "weight", None) is not None
                and module.weight.requires_grad)
    blocks = {type(model.h[0]) if hasattr(model, "h") else type(model.layers[0])}
    lambda_policy = functools.partial(lambda_auto_wrap_policy, lambda_fn=lambda_policy_fn)
    transformer_policy = functools.partial(transformer_auto_wrap_policy, transformer_layer_cls=blocks)
    policy = functools.partial(_or_policy, policies=[lambda_policy, transformer_policy])
    H.mark("fsdp:construct")
    # backward_prefetch None, given (1.13's default; 2.6's is BACKWARD_PRE)
    kw = dict(device_id=torch.device("cpu")) if H.TV >= (2, 0) else {}
    m = FSDP(model, sharding_strategy=getattr(ShardingStrategy, H.fsdp_strategy(a).upper()), auto_wrap_policy=policy,
             backward_prefetch=None, **kw)
    m.units = model.units
    H.mark("fsdp:constructed")
    return m


# ---------------------------------------------------------------------------


def load_case(path, family, cfg):
    """A transformer's zerosim-case/2 or /3 (measure --write-case): its weights,
    from the side file in docs/formats.md's flat order, by hf_torch's
    parameter names (GPT-2's Conv1D weights transposed: the file holds
    (out, in)); its micro-batches' input ids, [step·K + k][rank] rows of
    the file's seq + 1 ids but the last (the plain loop's labels are the
    ids: the model shifts them); and its Adam settings."""
    import numpy as np
    with open(path) as f:
        case = json.load(f)
    m, T = case["model"], case["seq"]
    w = torch.from_numpy(np.fromfile(os.path.join(os.path.dirname(os.path.abspath(path)), case["weights"]["file"]),
                                     dtype="<f4").copy())
    L = n_blocks(m)
    names = []  # (hf_torch name or [(name, rows)], transposed)
    if family == "gpt2":
        d, tied = m["n_embd"], m.get("tie_word_embeddings", True)
        F = m.get("n_inner") or 4 * d
        names += [("wte.weight", [m["vocab_size"], d], 0), ("wpe.weight", [m["n_positions"], d], 0)]
        lnf = [("ln_f.weight", [d], 0), ("ln_f.bias", [d], 0)]
        names += lnf if tied else []
        for l in range(L):
            h = f"h.{l}."
            names += [(h + "ln_1.weight", [d], 0), (h + "ln_1.bias", [d], 0),
                      (h + "attn.c_attn.weight", [3 * d, d], 1), (h + "attn.c_attn.bias", [3 * d], 0),
                      (h + "attn.c_proj.weight", [d, d], 1), (h + "attn.c_proj.bias", [d], 0),
                      (h + "ln_2.weight", [d], 0), (h + "ln_2.bias", [d], 0),
                      (h + "mlp.c_fc.weight", [F, d], 1), (h + "mlp.c_fc.bias", [F], 0),
                      (h + "mlp.c_proj.weight", [d, F], 1), (h + "mlp.c_proj.bias", [d], 0)]
        names += [] if tied else lnf + [("lm_head.weight", [m["vocab_size"], d], 0)]
    else:
        d, F, H = m["hidden_size"], m["intermediate_size"], m["num_attention_heads"]
        KV = m.get("num_key_value_heads") or H
        hd = d // H
        tied = m.get("tie_word_embeddings", False)
        names += [("embed_tokens.weight", [m["vocab_size"], d], 0)] + ([("norm.weight", [d], 0)] if tied else [])
        for l in range(L):
            h = f"layers.{l}."
            names += [(h + "input_layernorm.weight", [d], 0),
                      ([(h + "self_attn.q_proj.weight", H * hd), (h + "self_attn.k_proj.weight", KV * hd),
                        (h + "self_attn.v_proj.weight", KV * hd)], [(H + 2 * KV) * hd, d], 0),
                      (h + "self_attn.o_proj.weight", [d, H * hd], 0),
                      (h + "post_attention_layernorm.weight", [d], 0),
                      ([(h + "mlp.gate_proj.weight", F), (h + "mlp.up_proj.weight", F)], [2 * F, d], 0),
                      (h + "mlp.down_proj.weight", [d, F], 0)]
        names += [] if tied else [("norm.weight", [d], 0), ("lm_head.weight", [m["vocab_size"], d], 0)]
    weights, off = {}, 0
    for name, shape, tr in names:
        n = math.prod(shape)
        x = w[off:off + n].view(shape)
        off += n
        if isinstance(name, list):  # rows of a fused tensor
            r = 0
            for nm, rows in name:
                weights[nm] = x[r:r + rows]
                r += rows
        else:
            weights[name] = x.t() if tr else x
    if off != w.numel():
        raise ValueError(f"{path}: the layout has {off} values, the side file {w.numel()}")
    ids = [[[row[:T] for row in rk] for rk in micro] for micro in case["tokens"]]
    # LoRA (measure --write-case --lora-r): its settings and the adapters'
    # initial values, model.parameters() order (per adapted layer lora_A
    # [r, in], then lora_B [out, r]), a side file of their own
    lora = case.get("lora")
    if lora:
        v = np.fromfile(os.path.join(os.path.dirname(os.path.abspath(path)), lora["file"]), dtype="<f4").copy()
        if v.size != lora["count"]:
            raise ValueError(f"{path}: lora.count {lora['count']}, its side file {v.size} values")
        # its dropout too: without it a case written at 0.1 would train at
        # --lora-dropout's 0 (a lora key from before is refused, not guessed)
        if "dropout" not in lora:
            raise ValueError(f"{path}: lora has no dropout (an older zerosim's case: write it again)")
        lora = dict(r=lora["r"], alpha=lora["alpha"], dropout=lora["dropout"], targets=lora["targets"],
                    values=torch.from_numpy(v))
    # zerosim-case/3's freeze: the run's --freeze (a /2 case has none); an
    # array of terms is the terms joined with commas (docs/formats.md)
    freeze = case.get("freeze")
    if isinstance(freeze, list):
        freeze = ",".join(freeze)
    if case["format"] not in ("zerosim-case/2", "zerosim-case/3"):
        raise ValueError(f"{path}: format {case['format']}, not a transformer's zerosim-case/2 or /3")
    return dict(weights=weights, ids=ids, K=case.get("grad_accum", 1), steps=case["steps"], lr=case["lr"],
                betas=(case["beta1"], case["beta2"]), eps=case["eps"], batch=case["batch"], seq=T, lora=lora,
                freeze=freeze)


def run(a, rank=0, world=1):
    torch.set_num_threads(1)
    # hf_torch.run's reason: PyTorch's own cpublas bf16 kernels, no oneDNN
    # scratchpad (a bf16-loaded model's matmuls are bf16 too)
    if a.amp != "none" or a.load_dtype == "bf16":
        torch.backends.mkldnn.enabled = False
    torch.manual_seed(0)
    raw, family, cfg, tied = H.build(a)
    if world > 1:
        import torch.distributed as dist
        os.environ.setdefault("USE_LIBUV", "0")
        dist.init_process_group("gloo", init_method="file://" + a.store, rank=rank, world_size=world)
        H.RANK[0] = rank
        H.PIN.append(torch.zeros(1))  # hf_torch.ddp_group's pinning collective
        if a.fsdp:
            # the reduce-scatter's receive buffer (tests/fsdp_torch.py's
            # reduce_scatter_base), made before the profiled session as
            # hf_torch.fsdp_worker makes it
            import fsdp_torch
            fsdp_torch.RECV[torch.float32] = torch.empty(1 << 22)
            # every all-gather and reduce-scatter FSDP issues (its shims,
            # looked up in dist at each call), with the marks made before
            # it, as hf_torch.ddp_group records DDP's all-reduces
            # (2.x's on the CPU: all_gather into the chunks and
            # reduce_scatter_tensor, fsdp_torch.py's shims too)
            names = (("all_gather", "_all_gather_base"), ("reduce_scatter", "_reduce_scatter_base")) \
                if H.TV < (2, 0) else (("all_gather", "all_gather"), ("reduce_scatter", "reduce_scatter_tensor"))
            # (1.13's first iteration also all-gathers each unit's
            # handle indices, int32, to check the forward order across
            # ranks: _check_order, fully_sharded_data_parallel.py 575-600;
            # not counted, not a flat parameter's)
            for kind, name in names:
                def counted(*x, _f=getattr(dist, name), _k=kind, **kw):
                    out = x[0][0] if isinstance(x[0], (list, tuple)) else x[0]
                    if out.is_floating_point():
                        H.COLLECTIVES.append((_k, len(H.MARKS)))
                    return _f(*x, **kw)
                setattr(dist, name, counted)
    K = a.grad_accum
    # Under --grad-accum K > 1 every mark of micro-step k (hf_torch's
    # modules' hooks and the phases) is named "LABEL@k", as zerosim's step
    # names them (util/autograd.c); `micro:k` and `fwd_end:S:k` are this
    # loop's own. hf_torch's hooks look `mark` up in their module.
    plain_mark, suffix = H.mark, [None]

    def mark_k(label):
        plain_mark(label if suffix[0] is None else f"{label}@{suffix[0]}")
    H.mark = mark_k
    zero_none = a.zero_grad == "none" if a.zero_grad else H.TV >= (2, 0)
    V = cfg["vocab_size"]
    losses, grad_norms = [], []
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        H.mark("build")
        q4 = quantize_as_loaded(a) if a.quant_base == "nf4" else None
        # --load-dtype bf16: from_pretrained(torch_dtype=torch.bfloat16)
        # builds the model under that default dtype (modeling_utils.py's
        # _set_default_torch_dtype), each weight made bf16 and quantized
        # from it; inv_freq's `.float()` keeps that buffer fp32
        if a.load_dtype == "bf16":
            torch.set_default_dtype(torch.bfloat16)
        if family == "gpt2":
            model = H.GPT2LMHeadModel(cfg, tied, a.mask, a.attn == "sdpa")
        else:  # the family's own attention (hf_torch.py's FAMILY_ATTENTION)
            model = H.LlamaForCausalLM(cfg, tied, a.attn == "sdpa", H.FAMILY_ATTENTION.get(family))
        torch.set_default_dtype(torch.float32)  # restored as from_pretrained returns: PEFT's adapters fp32
        if q4 is not None:
            q4.remove()
        model.train()
        case = None
        if a.case:
            case = load_case(a.case, family, cfg)
            if (case["K"], case["batch"], case["seq"], case["steps"]) != (K, a.batch, a.seq, a.steps):
                raise ValueError(f"--case {a.case}: grad_accum {case['K']}, batch {case['batch']}, seq "
                                 f"{case['seq']}, steps {case['steps']}: give the same options")
            with torch.no_grad():
                for n, p in model.named_parameters():
                    p.copy_(case["weights"][n])
        adapted = []
        if a.lora_r:
            adapted = apply_lora(a, model, family)
            # PEFT's _mark_only_adapters_as_trainable (bias="none"): all but lora_ frozen
            for n, p in model.named_parameters():
                p.requires_grad_("lora_" in n)
        if case and case["freeze"] is not None and case["freeze"] != a.freeze:
            raise ValueError(f"--case {a.case}: freeze {case['freeze']}: give the same --freeze")
        if case and (case["lora"] is not None) != bool(a.lora_r):
            raise ValueError(f"--case {a.case}: {'its LoRA' if case['lora'] else 'no LoRA'}: give the same options")
        if case and case["lora"]:
            cl = case["lora"]
            if (cl["r"], cl["alpha"], cl["dropout"], "" if cl["targets"] == "default" else cl["targets"]) != \
                    (a.lora_r, a.lora_alpha, a.lora_dropout, a.lora_targets):
                raise ValueError(f"--case {a.case}: LoRA r {cl['r']}, alpha {cl['alpha']}, dropout {cl['dropout']}, "
                                 f"targets {cl['targets']}: give the same options")
            # the case's adapters, in model.parameters() order
            off, v = 0, cl["values"]
            with torch.no_grad():
                for n, p in model.named_parameters():
                    if "lora_" in n:
                        p.copy_(v[off:off + p.numel()].view(p.shape))
                        off += p.numel()
            if off != v.numel():
                raise ValueError(f"--case {a.case}: the adapters take {off} values, the case has {v.numel()}")
        if a.freeze:
            for n, p in model.named_parameters():
                if freeze_matches(a.freeze, family, cfg, hf_name(family, n)):
                    p.requires_grad_(False)
        if a.lora_dtype == "bf16":
            # TRL v1.9.0's SFTTrainer over a quantized model (trl/trainer/sft_trainer.py lines 1127-1130,
            # "to follow the recommendations from the original paper"): every trainable parameter's data
            # cast to bf16, after get_peft_model and before the optimizer is made
            for p in model.parameters():
                if p.requires_grad:
                    p.data = p.data.to(torch.bfloat16)
        H.input_require_grads(model)
        H.install_hooks(model, set(model.units))
        # the loops' last parameter (lm_head.weight) would stay referenced
        # here: FSDP frees the originals it flattens, a script's loop
        # variable does not outlive its function
        n = p = None
        net = model
        if world > 1:
            # hf_torch.ddp_wrap: DDP at the release's defaults over the
            # pinned gloo group (hf_torch.ddp_group: every collective
            # waited and its tensors let go on the caller's thread, which
            # pins the 4 B a late gloo worker thread held), GPT-2's bool
            # causal `bias` buffers left out of its broadcasts (gloo takes
            # no bool tensor; DDP._set_params_and_buffers_to_ignore_for_model)
            # (under use_orig_params LoRA keeps the block policy: each
            # block's unit holds its frozen base and its adapters)
            net = (fsdp_wrap_peft(a, model) if a.fsdp and a.lora_r and not a.fsdp_orig_params else
                   H.fsdp_wrap(a, model) if a.fsdp else H.ddp_wrap(a, model))
        # (under FSDP its flat parameters: the root's is the wrapper's own)
        trainable = [p for p in net.parameters() if p.requires_grad]
        if not trainable:
            raise ValueError("--freeze leaves nothing to train")
        kw = dict(lr=case["lr"], betas=case["betas"], eps=case["eps"]) if case else dict(lr=1e-3)
        if a.zero1:
            # torch's zero1 over the trainable parameters alone (1.13
            # zero_redundancy_optimizer.py: _partition_parameters 616-662
            # sorts what it was given, largest first, each to the
            # least-loaded rank; _init_local_optimizer 1390-1448 builds the
            # local Adam over this rank's share; step 1032-1062 runs it, then
            # _sync_params 756-769 broadcasts each rank's share in place)
            from torch.distributed.optim import ZeroRedundancyOptimizer
            opt = ZeroRedundancyOptimizer(trainable, optimizer_class=torch.optim.Adam,
                                          foreach=a.optimizer_impl == "foreach", **kw)
        else:
            opt = torch.optim.Adam(trainable, foreach=a.optimizer_impl == "foreach", **kw)
        # float16 autocast's recipe (hf_torch.py --amp fp16): its first
        # scale() makes _scale and _growth_tracker
        # (under --fsdp FSDP's own, ShardedGradScaler: found_inf all-reduced
        # across the ranks, the CPU's scale update in Python;
        # torch/distributed/fsdp/sharded_grad_scaler.py)
        scaler = None
        if a.amp == "fp16" and a.fsdp:
            from torch.distributed.fsdp.sharded_grad_scaler import ShardedGradScaler
            scaler = ShardedGradScaler("cpu")
        elif a.amp == "fp16":
            scaler = torch.amp.GradScaler("cpu")
        g = torch.Generator().manual_seed(1 + rank)
        # the optimizer step's K micro-batches, drawn at once and held, and
        # the labels a clone (hf_torch.run's input_ids and labels at K = 1)
        data = torch.randint(0, V, (K * a.batch, a.seq), generator=g)
        labels = data.clone()
        if case:  # every step's micro-batches, made before the loop (bytes: not the loop's)
            steps_data = [torch.tensor([row for k in range(K) for row in case["ids"][t * K + k][rank]])
                          for t in range(a.steps)]
        for step in range(1, a.steps + 1):
            if case:
                data = steps_data[step - 1]
                labels = data.clone()
            plain_mark(f"step:{step}")
            total = 0.0
            for k in range(K):
                ids = data[k * a.batch:(k + 1) * a.batch]
                lab = labels[k * a.batch:(k + 1) * a.batch]
                if K > 1:
                    plain_mark(f"micro:{k}")
                    suffix[0] = k
                H.mark("phase:forward")
                H.set_ctx("forward", "-")
                sync = world == 1 or not a.no_sync or k == K - 1
                with (contextlib.nullcontext() if sync else net.no_sync()):
                    with (torch.autocast("cpu", dtype=torch.bfloat16 if a.amp == "bf16" else torch.float16)
                          if a.amp != "none" else contextlib.nullcontext()):
                        outputs = net(ids, lab)
                    loss = outputs[0] / K if K > 1 else outputs[0]
                    plain_mark(f"fwd_end:{step}:{k}")
                    H.mark("phase:backward")
                    H.set_ctx("backward", "loss")
                    H.IN_BACKWARD[0] = True  # (a non-reentrant checkpoint's rerun: its "refwd:" marks)
                    try:
                        # (GradScaler: every micro-step's loss scaled, grad_scaler.py
                        # v2.6.0 174-210; unscale_ once, in step())
                        (scaler.scale(loss) if scaler else loss).backward()
                    finally:
                        H.IN_BACKWARD[0] = False
                suffix[0] = None
                total += float(loss)
                if k < K - 1:
                    # the next micro-step rebinds them: let go first (the
                    # last micro-step's are held to the step's end, as
                    # hf_torch.one_step holds its loop's)
                    del loss
                    outputs = None
            if step == 1:
                # (the first step only: its double copies are not the
                # steady step's bytes; under GradScaler the grads' scaled
                # norm divided back)
                grad_norms.append(math.sqrt(sum(float(p.grad.double().pow(2).sum()) for p in trainable
                                                if p.grad is not None)) / (float(scaler.get_scale()) if scaler else 1.0))
            H.mark("phase:optimizer")
            H.set_ctx("optimizer", "optimizer")
            if scaler:
                # unscale_ (found_inf, inv_scale and their replicas), the
                # step unless an inf was found, then update()
                scaler.step(opt)
                H.scaler_update(scaler, opt)  # (FSDP's found_inf let go on this thread)
            else:
                opt.step()
            H.mark("phase:zero_grad")
            opt.zero_grad(set_to_none=zero_none)
            losses.append(total)
            del loss
            outputs = None
            H.mark("phase:between")
        plain_mark(f"step:{a.steps + 1}")
    events = H.memory_events(prof)
    stream = H.replay(events)
    steps = {s: H.analyse_step(stream, s) for s in range(1, a.steps + 1)}
    between = stream[-1][0]
    # the set-up's peak: building, wrapping (DDP's broadcast copy of every
    # parameter and buffer, frozen ones too) up to step 1
    first = next(i for i, (_, l) in enumerate(stream) if l == "step:1")
    setup_peak = max((live for live, l in stream[:first] if l is None), default=0)
    # DDP's all-reduces in each micro-step of the steady step: the calls it
    # made through hf_torch.ddp_group (the pinning collectives left out),
    # placed by the marks made before each
    per_micro, fsdp_per_micro = [], {"all_gather": [], "reduce_scatter": []}
    S = a.steps
    # the steady (last) step's K micro-steps: the last K+1 of the micro (or,
    # at K = 1, forward) and optimizer marks bound them
    bounds = [i for i, l in enumerate(H.MARKS)
              if (l.startswith("micro:") if K > 1 else l == "phase:forward") or l == "phase:optimizer"][-(K + 1):]
    for i in range(K):
        per_micro.append(sum(1 for kind, n in H.COLLECTIVES if kind == "allreduce" and bounds[i] < n <= bounds[i + 1]))
        for c in fsdp_per_micro:
            fsdp_per_micro[c].append(sum(1 for kind, n in H.COLLECTIVES if kind == c and bounds[i] < n <= bounds[i + 1]))
    st = steps[S]
    marks = dict(st["boundaries"])
    fwd = [marks[f"fwd_end:{S}:{k}"] - st["start_bytes"] for k in range(K)]
    # the persistent set
    names = dict(model.named_parameters())

    def nb(t):
        return t.numel() * t.element_size() if t is not None else 0
    frozen = {n for n, p in names.items() if not p.requires_grad}
    pers = dict(params_trainable=0, params_frozen=0, grads_trainable=0, grads_frozen=0, adam_trainable=0,
                adam_frozen=0)
    seen = set()
    for n, p in names.items():
        if id(p) in seen:
            continue
        seen.add(id(p))
        kind = "frozen" if n in frozen else "trainable"
        pers["params_" + kind] += nb(p)
        pers["grads_" + kind] += nb(p.grad)
        s = getattr(opt, "optim", opt).state.get(p, {})  # ZeroRedundancyOptimizer: this rank's Adam
        pers["adam_" + kind] += sum(nb(v) for v in s.values() if torch.is_tensor(v))
    n_train = sum(p.numel() for p in {id(p): p for p in model.parameters() if p.requires_grad}.values())
    n_all = sum(p.numel() for p in {id(p): p for p in model.parameters()}.values())
    out = dict(torch=torch.__version__, model=a.model, family=family, tied=tied, seq=a.seq, batch=a.batch,
               grad_accum=K, world=world, no_sync=bool(a.no_sync) if world > 1 else None, steps=S,
               optimizer_impl=a.optimizer_impl, zero_grad="none" if zero_none else "zeros", dropout=a.dropout, amp=a.amp, attn=a.attn,
               freeze=a.freeze, quant_base=a.quant_base, double_quant=a.double_quant, quant_storage=a.quant_storage, lora=dict(r=a.lora_r, alpha=a.lora_alpha, dropout=a.lora_dropout,
                                          targets=adapted, dtype=a.lora_dtype) if a.lora_r else None,
               params=n_all, trainable=n_train,
               frozen_names=sorted(hf_name(family, n) for n in frozen),
               between_steps=[steps[s]["start_bytes"] for s in range(2, S + 1)] + [between],
               persistent=pers, peak=st["peak"], peak_phase=st["phase"], peak_after=st["after"],
               step_peaks=[steps[s]["peak"] for s in range(1, S + 1)], setup_peak=setup_peak,
               fwd_end_over_start=fwd, allreduce_per_micro=per_micro,
               boundaries=st["boundaries"], losses=losses, grad_norms=grad_norms)
    if H.ROUTING:
        # a mixture's routing (hf_torch.py's MixtralDecoderLayer and
        # QwenMoeDecoderLayer record it, forward by forward): each step's
        # K micro-steps' blocks, micro-step major ([step][k*L + l][expert]),
        # as measured.json's "routing" with "micro_steps" K; under DDP
        # every rank's, gathered after the profiled loop, in "ranks"
        L = cfg["num_hidden_layers"]
        steps_rt = [H.ROUTING[t * K * L:(t + 1) * K * L] for t in range(S)]
        out["routing"] = dict(blocks=L, experts=len(H.ROUTING[0]), micro_steps=K, steps=steps_rt)
        if world > 1:
            import torch.distributed as dist
            every = [None] * world
            dist.all_gather_object(every, steps_rt)
            out["routing"]["ranks"] = every
    if world > 1 and a.fsdp:
        # FSDP's all-gathers and reduce-scatters in each micro-step of the
        # steady step, and in all the run's steps (a unit SHARD_GRAD_OP
        # keeps gathered is gathered in step 1 alone)
        run = [H.MARKS.index(f"step:{t}") for t in (1, S + 1)]
        out.update(fsdp=True, all_gather_per_micro=fsdp_per_micro["all_gather"],
                   reduce_scatter_per_micro=fsdp_per_micro["reduce_scatter"],
                   **{c + "_run": sum(1 for kind, n in H.COLLECTIVES if kind == c and run[0] < n <= run[1])
                      for c in fsdp_per_micro})
    if world > 1 and not a.fsdp:
        out["ddp_buckets"] = H.ddp_buckets(net)  # as rebuilt at step 2's forward
    if world > 1:
        import torch.distributed as dist
        # every rank's losses (each its own micro-batches) and whether every
        # rank ends with rank 0's trained parameters, gathered after the
        # profiled loop (no byte of it is measured)
        import hashlib
        mine = (losses, hashlib.sha256(b"".join(bits(p).numpy().tobytes() for p in trainable)).hexdigest())
        every = [None] * world
        dist.all_gather_object(every, mine)
        out["rank_losses"] = [e[0] for e in every]
        # (FSDP's flat parameters are each rank's own shard: not compared)
        out["trained_equal_across_ranks"] = None if a.fsdp else len({e[1] for e in every}) == 1
        # every rank's figures (its own optimizer state: ZeroRedundancyOptimizer's
        # share, or under use_orig_params its shard's trained pieces): rank 0's
        # JSON holds them all
        if a.zero1 or a.fsdp_orig_params:
            keys = ("between_steps", "peak", "peak_phase", "peak_after", "boundaries", "persistent", "losses",
                    "step_peaks")
            every = [None] * world
            dist.all_gather_object(every, {k: out[k] for k in keys})
            out["ranks"] = every
    return out


def worker(rank, a, world, outfile):
    r = run(a, rank, world)
    if rank == 0:
        write(outfile, r)
    H.finish(rank, a.store)  # every rank past a barrier, then the group destroyed


def write(path, r):
    text = json.dumps(r, indent=1) + "\n"
    if path:
        tmp = path + ".tmp"
        with open(tmp, "w") as f:
            f.write(text)
        os.replace(tmp, path)
    else:
        sys.stdout.write(text)


# ---------------------------------------------------------------------------
# --table


CASES = [
    ("full training", []),
    ("K=2", ["--grad-accum", "2"]),
    ("K=3", ["--grad-accum", "3"]),
    ("freeze embeddings", ["--freeze", "embeddings"]),
    ("freeze all-but-last:1", ["--freeze", "all-but-last:1"]),
    ("LoRA r=4 default targets", ["--lora-r", "4"]),
    ("LoRA r=4 all-linear", ["--lora-r", "4", "--lora-targets", "all-linear"]),
    ("LoRA r=4 all-linear, dropout 0.1", ["--lora-r", "4", "--lora-targets", "all-linear",
                                          "--lora-dropout", "0.1"]),
    ("LoRA r=4, K=2", ["--lora-r", "4", "--grad-accum", "2"]),
    ("DDP N=2", ["--world", "2"]),
    ("DDP N=2 K=2 no_sync", ["--world", "2", "--grad-accum", "2"]),
    ("DDP N=2 K=2 without no_sync", ["--world", "2", "--grad-accum", "2", "--no-sync", "0"]),
    ("DDP N=2 LoRA r=4 K=2 no_sync", ["--world", "2", "--grad-accum", "2", "--lora-r", "4"]),
]


def table(a, models):
    print("| model | case | trainable | between steps | peak | peak/full | phase (after) | "
          "fwd-end activations | all-reduces per micro-step |")
    print("|---|---|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as d:
        for m in models:
            full = None
            for label, extra in CASES:
                out = os.path.join(d, "o.json")
                cmd = [sys.executable, os.path.abspath(__file__), "--model", m, "--out", out] + extra
                p = subprocess.run(cmd, capture_output=True, text=True)
                if p.returncode:
                    print(f"| {os.path.basename(m)} | {label} | failed: {p.stderr.strip().splitlines()[-1:]} |")
                    continue
                r = json.load(open(out))
                if full is None:
                    full = r["peak"]
                print(f"| {os.path.basename(m)} | {label} | {r['trainable']:,} | {r['between_steps'][-1]:,} | "
                      f"{r['peak']:,} | {r['peak'] / full:.4f} | {r['peak_phase']} ({r['peak_after']}) | "
                      f"{', '.join(f'{x:,}' for x in r['fwd_end_over_start'])} | "
                      f"{r['allreduce_per_micro'] if r['world'] > 1 else '-'} |")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", action="append", help="a Hugging Face config.json (gpt2, llama); "
                    "--table takes several")
    ap.add_argument("--seq", type=int, default=32)
    ap.add_argument("--batch", type=int, default=2)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--grad-accum", type=int, default=1)
    ap.add_argument("--world", type=int, default=1)
    ap.add_argument("--no-sync", type=int, choices=[0, 1], default=1)
    ap.add_argument("--fsdp", action="store_true")
    ap.add_argument("--fsdp-strategy", choices=("full_shard", "shard_grad_op"), default="full_shard")
    ap.add_argument("--fsdp-orig-params", choices=("on", "off"), default="off")
    ap.add_argument("--bucket-cap-mb", type=float, default=None)
    ap.add_argument("--zero1", action="store_true")
    ap.add_argument("--freeze", default="")
    ap.add_argument("--lora-r", type=int, default=0)
    ap.add_argument("--lora-alpha", type=float, default=8.0)
    ap.add_argument("--lora-dropout", type=float, default=0.0)
    ap.add_argument("--lora-targets", default="")
    ap.add_argument("--optimizer-impl", choices=["single", "foreach"], default="single")
    ap.add_argument("--zero-grad", choices=["none", "zeros"], default=None)
    ap.add_argument("--dropout", choices=["0", "config"], default="0")
    ap.add_argument("--mask", choices=["where", "add"], default="where")
    ap.add_argument("--amp", choices=["none", "bf16", "fp16"], default="none")
    ap.add_argument("--attn", choices=["eager", "sdpa"], default="eager",
                    help="sdpa: transformers' sdpa_attention_forward (hf_torch.py's --attn sdpa; PyTorch >= 2.0)")
    ap.add_argument("--quant-base", choices=["none", "nf4"], default="none",
                    help="nf4: QLoRA's 4-bit base (bitsandbytes 0.47.0's Linear4bit written op by op: see "
                         "Linear4bit), compute dtype bf16 under --amp bf16, else fp32; PyTorch >= 2.2")
    ap.add_argument("--quant-storage", choices=sorted(STORAGE), default=None,
                    help="with --quant-base nf4: bitsandbytes' quant_storage, the dtype whose elements hold the "
                         "packed codes (default uint8, bitsandbytes' own; under --fsdp float32, the model's "
                         "dtype, as FSDP-QLoRA sets it, so that FSDP flattens them with the rest)")
    ap.add_argument("--load-dtype", choices=["fp32", "bf16"], default="fp32",
                    help="with --quant-base nf4: bf16 is QLoRA's bf16 recipe, the model built under the bf16 "
                         "default dtype (from_pretrained(torch_dtype=torch.bfloat16)), each 4-bit layer quantized "
                         "from its bf16 weight (dequantized into bf16), compute dtype bf16, the adapters fp32")
    ap.add_argument("--lora-dtype", choices=["fp32", "bf16"], default="fp32",
                    help="with --load-dtype bf16: bf16 is TRL's SFTTrainer's cast of a quantized model's trainable "
                         "parameters (the adapters, so their gradients and Adam state) to bf16")
    ap.add_argument("--double-quant", choices=["on", "off"], default=None,
                    help="with --quant-base nf4: compress_statistics (zerosim's spelling)")
    ap.add_argument("--recompute", choices=["none", "full"], default="none",
                    help="full: Hugging Face's gradient checkpointing (hf_torch.py's --recompute, its "
                         "input_require_grads hook included)")
    ap.add_argument("--recompute-impl", choices=["reentrant", "non-reentrant"], default="reentrant",
                    help="--recompute full's checkpoint: use_reentrant=True (reentrant, transformers' default) "
                         "or False (TRL's SFTTrainer; hf_torch.py's --recompute-impl)")
    ap.add_argument("--case", help="a transformer's zerosim-case/2 (measure --write-case): its weights, "
                    "tokens and Adam settings (the losses compare; the bytes are not the loop's)")
    ap.add_argument("--table", action="store_true")
    ap.add_argument("--out")
    a = ap.parse_args()
    a.tied = None
    if not a.model:
        ap.error("--model is required")
    if a.table:
        table(a, a.model)
        return
    if len(a.model) != 1:
        ap.error("one --model without --table")
    a.model = a.model[0]
    if a.seq < 1 or a.batch < 1 or a.steps < 2 or a.grad_accum < 1 or a.world < 1 or a.lora_r < 0 or \
            not 0.0 <= a.lora_dropout < 1.0:
        ap.error("--seq, --batch, --grad-accum, --world >= 1, --steps >= 2, --lora-r >= 0, 0 <= --lora-dropout < 1")
    if a.zero1 and a.world < 2:
        ap.error("--zero1 needs --world N >= 2 (ZeroRedundancyOptimizer shards over DDP's ranks)")
    if a.fsdp and a.world < 2:
        ap.error("--fsdp shards over --world N >= 2 ranks")
    if a.fsdp and a.zero1:
        ap.error("--fsdp and --zero1: one wrapper a run")
    if a.quant_base == "nf4" and (not a.lora_r or a.case or H.TV < (2, 2)):
        ap.error("--quant-base nf4: with --lora-r, no --case, PyTorch >= 2.2 (bitsandbytes 0.47.0)")
    if a.attn == "sdpa" and H.TV < (2, 0):
        ap.error("--attn sdpa: PyTorch 1.13 has no scaled_dot_product_attention")
    if a.load_dtype == "bf16" and (a.quant_base != "nf4" or a.case):
        ap.error("--load-dtype bf16: only with --quant-base nf4, no --case")
    if a.lora_dtype == "bf16" and a.load_dtype != "bf16":
        ap.error("--lora-dtype bf16: only with --load-dtype bf16 (TRL's cast over a bf16-loaded QLoRA)")
    if a.amp == "fp16" and (H.TV < (2, 3) or a.quant_base != "none"):
        # (the CPU's GradScaler is 2.3's)
        ap.error("--amp fp16: PyTorch >= 2.3, without --quant-base")
    if a.quant_storage and a.quant_base != "nf4":
        ap.error("--quant-storage: only with --quant-base nf4")
    # (under --fsdp the model's dtype, as PEFT's examples/sft/utils.py
    # lines 102-112 tie them: bfloat16 where it is loaded in bf16)
    a.quant_storage = a.quant_storage or (("bfloat16" if a.load_dtype == "bf16" else "float32") if a.fsdp else "uint8")
    if a.double_quant and a.quant_base != "nf4":
        ap.error("--double-quant: only with --quant-base nf4")
    a.double_quant = a.double_quant == "on"
    a.fsdp_orig_params = a.fsdp_orig_params == "on"
    if a.fsdp_orig_params and not a.fsdp:
        ap.error("--fsdp-orig-params: only with --fsdp")
    if a.fsdp_strategy != "full_shard" and not a.fsdp:
        ap.error("--fsdp-strategy: only with --fsdp")
    try:
        if a.freeze:
            freeze_names(a)
        if a.world == 1:
            write(a.out, run(a))
        else:
            def args(store):
                a.store = store
                return (a, a.world, a.out)
            H.spawn(worker, a.world, args)
    except ValueError as e:
        print(f"ft_torch: {e}", file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    main()

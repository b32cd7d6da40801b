"""hf_torch — the outside reference for what eager PyTorch allocates in a
training step of Hugging Face's GPT-2, Llama (and Mistral), Qwen2, Qwen3,
Phi-3, Gemma 2 and Gemma 3's text model (issue #22's truth side; #25's
families).

The models are written op for op from Hugging Face transformers' modeling
files, never from zerosim's engine. The index this was written from holds
these versions (a 5.x snapshot could not be fetched: the repository is over
the size the tool brings in, and PyPI is out of reach here); each module
cites its file, class or function and commit:
  GPT2   modeling_gpt2.py at huggingface/transformers c44b2d9976e8 (4.4x:
         GPT2Attention._attn masks with torch.where over the bool `bias`
         buffer; 5.x's eager_attention_forward adds a float mask from
         masking_utils.create_causal_mask instead: --mask add)
  Llama  modeling_llama.py at 5dd4a63548857797 (4.48: eager_attention_forward,
         repeat_kv, LlamaRMSNorm, rotate_half; 5.x keeps these ops)
  Qwen2  modeling_qwen2.py at 63bb72374703 (Qwen2Attention: q/k/v biased)
  Qwen3  modeling_qwen3.py at 000c33fdfde1 (Qwen3Attention: q_norm, k_norm)
  Phi3   modeling_phi3.py at 00d4b3d2142c (Phi3Attention's fused qkv_proj and
         its slices, the partial-rotary apply_rotary_pos_emb, Phi3MLP's
         gate_up_proj and chunk, Phi3DecoderLayer's residual dropouts)
  Gemma2 modeling_gemma2.py at 9a80143ca260 (4.49: Gemma2RMSNorm,
         Gemma2MLP with ACT2FN gelu_pytorch_tanh (activations.py
         PytorchGELUTanh), eager_attention_forward's softcap,
         Gemma2DecoderLayer's sliding-window where and four norms,
         Gemma2Model's normalizer, Gemma2ForCausalLM's logit softcap;
         eager attention only: its sdpa_attention_forward takes no softcap)
  Gemma3 modeling_gemma3.py at 0018aa64 (5.x; the 4.50 file at 008f5c8c
         is not stored: Gemma3TextScaledWordEmbedding, Gemma3Attention's
         q_norm and k_norm on the transposed heads, Gemma3RotaryEmbedding's
         two inv_freq buffers called once per layer type entry) and
         masking_utils.py at 00c4411c (create_causal_mask,
         create_sliding_window_causal_mask, eager_mask without vmap;
         under SDPA (2.6, the sequence shorter than the window) sdpa_mask's
         skip, sdpa_attention_forward as Llama's with Gemma's scaling)
  loss   loss/loss_utils.py at 0114da07ec0e (ForCausalLMLoss: logits.float(),
         labels padded with -100 and shifted, no shifted copy of the logits)
  Conv1D pytorch_utils.py (Conv1D.forward: torch.addmm(bias, x.view(-1, nx), W))
  gelu_new activations.py (NewGELUActivation.forward)
(the stored files came without line numbers; the citations name the
function, which is how they were looked up.)

It trains --steps steps on the CPU inside torch.profiler.profile(
profile_memory=True), from before the model is built, and replays every
allocation and free of the CPU allocator: live bytes are exact (the
profiler's [memory] events carry sizes but no addresses, so which tensor a
free releases is not in them). Boundaries are marked in the same event
stream: mark() allocates and frees an untouched uint8 tensor of an odd size
of at least 2^30 bytes (no real tensor here has one), which the replay
takes out again. Forward boundaries come from module pre/post hooks,
backward ones from tensor hooks on each unit's output (its backward starts)
and input (it ends); phases (forward, backward, optimizer, zero_grad) from
the loop.

Attribution of the peak: one more step runs under a TorchDispatchMode that
marks every aten op (so the profiler's peak falls inside a known op) and
tracks every op output's storage with a weakref finalizer, named by phase,
module and op; a last step takes the snapshot of the tracked live set just
before that op. What the tracker cannot see (temporaries made inside an op)
is the peak less the tracked bytes, named "inside <op>". The instrumented
steps must allocate what the clean step did (checked and printed).

--trace FILE: one more step, every aten op marked, each allocation and
free written with its op, phase and module (and FILE.clean: the clean
last step's sizes), to diff against zerosim's step list event by event.

--ddp N / --fsdp N: the model in DistributedDataParallel, or in
FullyShardedDataParallel FULL_SHARD (or, --fsdp-strategy shard_grad_op,
SHARD_GRAD_OP) with a unit per block and the root (fsdp_wrap), over gloo in N processes, each its own batch; rank 0's
allocator is the one replayed.

Prints one JSON object (see --help). Exit 0; 2 bad usage.
"""
import argparse
import json
import math
import os
import subprocess
import sys
import weakref

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.profiler import ProfilerActivity, profile

TV = tuple(int(x) for x in torch.__version__.split("+")[0].split("a")[0].split(".")[:2])
MARK_BASE = 1 << 30

def _st(t):
    """The tensor's storage (2.x: untyped_storage; TypedStorage is deprecated)."""
    return t.untyped_storage() if hasattr(t, "untyped_storage") else t.storage()


# ---------------------------------------------------------------------------
# Boundary marks in the allocator's stream

MARKS = []  # label of mark k: its tensor has MARK_BASE + 2k + 1 bytes


def mark(label):
    if RECOMPUTING[0] and label.startswith("fwd:"):
        label = "re" + label  # the checkpointed block's forward again, inside backward
    k = len(MARKS)
    MARKS.append(label)
    t = torch.empty(MARK_BASE + 2 * k + 1, dtype=torch.uint8)
    del t


# ---------------------------------------------------------------------------
# Activation checkpointing (--recompute full): Hugging Face's gradient
# checkpointing. transformers' gradient_checkpointing_enable
# (modeling_utils.py) passes gradient_checkpointing_kwargs
# {"use_reentrant": True} when given none, and the decoder layer, a
# GradientCheckpointingLayer (modeling_layers.py, 5.x), calls
# self._gradient_checkpointing_func(partial(super().__call__, **kwargs), *args):
# torch.utils.checkpoint.checkpoint(..., use_reentrant=True) over the
# positional arguments (the hidden states), the others bound in the partial.
# 1.13's CheckpointFunction (torch/utils/checkpoint.py 74-162): forward
# keeps torch.get_rng_state() (preserve_rng_state) and saves the tensor
# inputs, runs the layer under no_grad; backward forks the RNG
# (fork_rng: one more get_rng_state), detaches the inputs, reruns the
# layer with grad and calls torch.autograd.backward on its outputs.

RECOMPUTE = [False]
RECOMPUTING = [False]
# --recompute-impl non-reentrant: checkpoint(..., use_reentrant=False), what
# transformers' gradient_checkpointing_enable passes from PR #43203 on (see
# docs/torch_saved.md, "Non-reentrant checkpointing"): 1.13's
# _checkpoint_without_reentrant (torch/utils/checkpoint.py 350-429) and 2.6's
# _checkpoint_without_reentrant_generator (1422-1549). Its forward runs with
# grad, so the rerun is told apart by the phase: inside loss.backward().
USE_REENTRANT = [True]
IN_BACKWARD = [False]


def _rerunning():
    """Whether a checkpointed layer's call is its rerun inside backward (the marks' "re")."""
    return torch.is_grad_enabled() and (USE_REENTRANT[0] or IN_BACKWARD[0])


def checkpointed(call, hidden_states, *args):
    """call(hidden_states, *args) through torch.utils.checkpoint(use_reentrant=True)."""
    import torch.utils.checkpoint

    def fn(h):
        RECOMPUTING[0] = _rerunning()  # False: the forward (reentrant: under no_grad); True: the rerun
        try:
            return call(h, *args)
        finally:
            RECOMPUTING[0] = False
    return torch.utils.checkpoint.checkpoint(fn, hidden_states, use_reentrant=USE_REENTRANT[0])


def checkpointing(layer):
    """Whether the model's loop checkpoints the layer (--recompute full, training; under --fsdp the
    checkpoint is inside the FSDP unit: checkpoint_inside)."""
    return RECOMPUTE[0] and layer.training and not hasattr(layer, "_fsdp_wrapped_module")


def run_layer(layer, hidden_states, *args):
    """layer(hidden_states, *args), through checkpoint under --recompute full."""
    if not checkpointing(layer):
        return layer(hidden_states, *args)
    return checkpointed(layer, hidden_states, *args)


def checkpointed_positional(call, *args):
    """transformers 4.4x's model loop, which Gemma 2's follows here (modeling_gemma2.py at
    9a80143ca260, Gemma2Model.forward: self._gradient_checkpointing_func(decoder_layer.__call__,
    hidden_states, position_embeddings, causal_mask, position_ids, past_key_values,
    output_attentions, use_cache, cache_position, last_cache_position)): every argument positional,
    so CheckpointFunction saves the tensors among them (save_for_backward, released as its
    backward returns) and keeps the others in ctx.inputs (the (cos, sin) tuple, until the graph
    goes). call(*args) is the layer's __call__ over them."""
    import torch.utils.checkpoint

    def fn(*a):
        RECOMPUTING[0] = _rerunning()
        try:
            return call(*a)
        finally:
            RECOMPUTING[0] = False
    return torch.utils.checkpoint.checkpoint(fn, *args, use_reentrant=USE_REENTRANT[0])


def checkpointed_layer(call, hidden_states, **kwargs):
    """transformers 5.x's GradientCheckpointingLayer.__call__ (modeling_layers.py), which Gemma 3's
    decoder layer is (modeling_gemma3.py at 0018aa64):
    self._gradient_checkpointing_func(partial(super().__call__, **kwargs), *args) -- the hidden
    states positional, the model loop's keywords bound in the partial, which ctx.run_function holds
    until the graph goes. call(hidden_states, **kwargs) is the layer's __call__."""
    import functools
    import torch.utils.checkpoint

    def fn(h, **kw):
        RECOMPUTING[0] = _rerunning()
        try:
            return call(h, **kw)
        finally:
            RECOMPUTING[0] = False
    return torch.utils.checkpoint.checkpoint(functools.partial(fn, **kwargs), hidden_states,
                                             use_reentrant=USE_REENTRANT[0])


def input_require_grads(model):
    """Under --recompute full, transformers' enable_input_require_grads as
    gradient_checkpointing_enable calls it with use_reentrant (and PEFT's
    _prepare_model_for_gradient_checkpointing, peft/peft_model.py 726-740 at
    5d602fdbf, prepare_model_for_kbit_training, peft/utils/other.py 225-239): a
    forward hook on the input embeddings, output.requires_grad_(True), so a
    checkpointed layer's input requires grad over frozen embeddings (a leaf
    then, whose AccumulateGrad takes its gradient and holds both until the
    graph goes). With trainable embeddings it changes nothing."""
    if RECOMPUTE[0]:
        emb = model.wte if hasattr(model, "wte") else model.embed_tokens
        emb.register_forward_hook(lambda module, args, output: output.requires_grad_(True))


def checkpoint_inside(block):
    """Under FSDP, Hugging Face's GradientCheckpointingLayer (modeling_layers.py, 5.x): the
    checkpoint is in the layer's own __call__, so FSDP(layer).forward gathers the unit, calls
    layer.__call__ -> checkpoint(Module.__call__ of the layer) and reshards; the rerun inside
    backward calls the layer again without FSDP's forward (its pre-backward hook, on the
    checkpoint's output, has gathered the unit)."""
    cls = type(block)

    def call(self, h, *args, **kw):
        if kw:  # a llama-family layer: the model loop's keywords (LlamaForCausalLM.call_layer), in the partial
            return checkpointed_layer(lambda x, **k: cls.__call__(self, x, k["attention_mask"], k["position_embeddings"]),
                                      h, **kw)
        return checkpointed(lambda x, *r: cls.__call__(self, x, *r), h, *args)
    block.__class__ = type(cls.__name__, (cls,), {"__call__": call})


# ---------------------------------------------------------------------------
# The models


class Conv1D(nn.Module):
    """pytorch_utils.py Conv1D (transformers): weight (nx, nf); forward is
    x = torch.addmm(self.bias, x.view(-1, x.size(-1)), self.weight) and a view
    back to size_out."""

    def __init__(self, nf, nx):
        super().__init__()
        self.nf = nf
        self.weight = nn.Parameter(torch.empty(nx, nf).normal_(std=0.02))
        self.bias = nn.Parameter(torch.zeros(nf))

    def forward(self, x):
        size_out = x.size()[:-1] + (self.nf,)
        x = torch.addmm(self.bias, x.view(-1, x.size(-1)), self.weight)
        return x.view(size_out)


class NewGELUActivation(nn.Module):
    """activations.py NewGELUActivation.forward (transformers): op by op,
    0.5 * input * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (input + 0.044715 * torch.pow(input, 3.0))))."""

    def forward(self, input):
        return 0.5 * input * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (input + 0.044715 * torch.pow(input, 3.0))))


class GPT2Attention(nn.Module):
    """modeling_gpt2.py GPT2Attention (c44b2d9976e8): __init__ registers the
    bool causal `bias` buffer (max_positions^2, persistent=False) and
    masked_bias; forward: c_attn(h).split(split_size, dim=2), _split_heads
    (view, permute), _attn, _merge_heads (permute, contiguous, view), c_proj,
    resid_dropout."""

    def __init__(self, cfg, mask):
        super().__init__()
        P = cfg["n_positions"]
        self.register_buffer("bias", torch.tril(torch.ones((P, P), dtype=torch.bool)).view(1, 1, P, P),
                             persistent=False)
        self.register_buffer("masked_bias", torch.tensor(-1e4), persistent=False)
        self.embed_dim = cfg["n_embd"]
        self.num_heads = cfg["n_head"]
        self.head_dim = self.embed_dim // self.num_heads
        self.split_size = self.embed_dim
        self.c_attn = Conv1D(3 * self.embed_dim, self.embed_dim)
        self.c_proj = Conv1D(self.embed_dim, self.embed_dim)
        self.attn_dropout = nn.Dropout(cfg["attn_pdrop"])
        self.resid_dropout = nn.Dropout(cfg["resid_pdrop"])
        self.mask = mask

    def _attn(self, query, key, value, attention_mask):
        """GPT2Attention._attn (c44b2d9976e8); --mask add: 5.x's
        eager_attention_forward, attn_weights + causal_mask."""
        attn_weights = torch.matmul(query, key.transpose(-1, -2))
        attn_weights = attn_weights / torch.full([], value.size(-1) ** 0.5, dtype=attn_weights.dtype,
                                                 device=attn_weights.device)
        if self.mask == "where":
            query_length, key_length = query.size(-2), key.size(-2)
            causal_mask = self.bias[:, :, key_length - query_length: key_length, :key_length]
            mask_value = torch.finfo(attn_weights.dtype).min
            mask_value = torch.full([], mask_value, dtype=attn_weights.dtype, device=attn_weights.device)
            attn_weights = torch.where(causal_mask, attn_weights.to(attn_weights.dtype), mask_value)
        else:
            attn_weights = attn_weights + attention_mask[:, :, :, : key.shape[-2]]
        attn_weights = nn.functional.softmax(attn_weights, dim=-1)
        attn_weights = attn_weights.type(value.dtype)
        attn_weights = self.attn_dropout(attn_weights)
        return torch.matmul(attn_weights, value)

    def _split_heads(self, tensor):
        new_shape = tensor.size()[:-1] + (self.num_heads, self.head_dim)
        return tensor.view(new_shape).permute(0, 2, 1, 3)

    def forward(self, hidden_states, attention_mask):
        query, key, value = self.c_attn(hidden_states).split(self.split_size, dim=2)
        query, key, value = self._split_heads(query), self._split_heads(key), self._split_heads(value)
        if self.sdpa:
            # 5.x's sdpa_attention_forward: is_causal when no mask is given.
            attn_output = F.scaled_dot_product_attention(query, key, value, dropout_p=self.attn_dropout.p
                                                         if self.training else 0.0, is_causal=True)
        else:
            attn_output = self._attn(query, key, value, attention_mask)
        attn_output = attn_output.permute(0, 2, 1, 3).contiguous()
        attn_output = attn_output.view(attn_output.size()[:-2] + (self.num_heads * self.head_dim,))
        attn_output = self.c_proj(attn_output)
        return self.resid_dropout(attn_output)


class GPT2MLP(nn.Module):
    """modeling_gpt2.py GPT2MLP (c44b2d9976e8): c_fc, act (ACT2FN
    gelu_new), c_proj, dropout(resid_pdrop)."""

    def __init__(self, cfg):
        super().__init__()
        d = cfg["n_embd"]
        inner = cfg.get("n_inner") or 4 * d
        self.c_fc = Conv1D(inner, d)
        self.act = NewGELUActivation()
        self.c_proj = Conv1D(d, inner)
        self.dropout = nn.Dropout(cfg["resid_pdrop"])

    def forward(self, h):
        return self.dropout(self.c_proj(self.act(self.c_fc(h))))


class GPT2Block(nn.Module):
    """modeling_gpt2.py GPT2Block.forward (c44b2d9976e8): residual = h;
    h = ln_1(h); h = attn(h) + residual; residual = h; h = ln_2(h);
    h = residual + mlp(h)."""

    def __init__(self, cfg, mask):
        super().__init__()
        d = cfg["n_embd"]
        self.ln_1 = nn.LayerNorm(d, eps=cfg["layer_norm_epsilon"])
        self.attn = GPT2Attention(cfg, mask)
        self.ln_2 = nn.LayerNorm(d, eps=cfg["layer_norm_epsilon"])
        self.mlp = GPT2MLP(cfg)

    def forward(self, hidden_states, attention_mask):
        residual = hidden_states
        hidden_states = self.ln_1(hidden_states)
        hidden_states = self.attn(hidden_states, attention_mask) + residual
        residual = hidden_states
        hidden_states = self.ln_2(hidden_states)
        return residual + self.mlp(hidden_states)


def shifted_loss(logits, labels, vocab_size):
    """modeling_gpt2.py GPT2LMHeadModel.forward before loss_utils (4.4x,
    c44b2d9976e8): shift_logits = lm_logits[..., :-1, :].contiguous() (a
    copy of B*(T-1)*V), shift_labels likewise, CrossEntropyLoss()."""
    shift_logits = logits[..., :-1, :].contiguous()
    shift_labels = labels[..., 1:].contiguous()
    return nn.CrossEntropyLoss()(shift_logits.view(-1, shift_logits.size(-1)), shift_labels.view(-1))


def for_causal_lm_loss(logits, labels, vocab_size, ignore_index=-100):
    """loss/loss_utils.py ForCausalLMLoss (0114da07ec0e) with
    fixed_cross_entropy's reduction "mean" (no num_items_in_batch)."""
    logits = logits.float()
    labels = nn.functional.pad(labels, (0, 1), value=ignore_index)
    shift_labels = labels[..., 1:].contiguous()
    logits = logits.view(-1, vocab_size)
    shift_labels = shift_labels.view(-1)
    shift_labels = shift_labels.to(logits.device)
    return nn.functional.cross_entropy(logits, shift_labels, ignore_index=ignore_index, reduction="mean")


class GPT2LMHeadModel(nn.Module):
    """modeling_gpt2.py GPT2Model.forward (c44b2d9976e8): position_ids =
    torch.arange(T).unsqueeze(0); wte(ids) + wpe(pos); drop(embd_pdrop);
    blocks; ln_f. GPT2LMHeadModel: lm_head Linear(d, V, bias=False), its
    weight wte's when tied; loss by ForCausalLMLoss."""

    def __init__(self, cfg, tied, mask, sdpa):
        super().__init__()
        d, V = cfg["n_embd"], cfg["vocab_size"]
        self.cfg = cfg
        self.wte = nn.Embedding(V, d)
        self.wpe = nn.Embedding(cfg["n_positions"], d)
        nn.init.normal_(self.wte.weight, std=0.02)
        nn.init.normal_(self.wpe.weight, std=0.01)
        self.drop = nn.Dropout(cfg["embd_pdrop"])
        self.h = nn.ModuleList([GPT2Block(cfg, mask) for _ in range(cfg["n_layer"])])
        for b in self.h:
            b.attn.sdpa = sdpa
        self.ln_f = nn.LayerNorm(d, eps=cfg["layer_norm_epsilon"])
        # A tied head's own weight is never allocated (made on the meta
        # device, then replaced by the table): from_pretrained builds every
        # model on the meta device (transformers' integrations/accelerate.py,
        # its docstring: since PR #36963) and loads the checkpoint into it,
        # so the untied Linear's V x d weight that nn.Linear would make here
        # before tie_weights() is never on the device. zerosim's set-up is
        # the parameters alone (docs/schedule.md, "What the list holds").
        self.lm_head = nn.Linear(d, V, bias=False, device="meta" if tied else None)
        if tied:
            self.lm_head.weight = self.wte.weight
        self.mask = mask
        self.units = ["wte", "wpe", "drop"] + [f"h.{i}" for i in range(len(self.h))] + ["ln_f", "lm_head"]

    def forward(self, input_ids, labels):
        B, T = input_ids.shape
        position_ids = torch.arange(0, T, dtype=torch.long).unsqueeze(0)
        attention_mask = None
        if self.mask == "add" and not self.h[0].attn.sdpa:
            # 5.x's create_causal_mask for eager: 0 where attended, finfo.min elsewhere.
            dt = self.wte.weight.dtype if not torch.is_autocast_cpu_enabled() else torch.get_autocast_cpu_dtype()
            allowed = torch.ones(T, T, dtype=torch.bool).tril()[None, None].expand(B, 1, T, T)
            attention_mask = torch.where(allowed, torch.tensor(0.0, dtype=dt), torch.finfo(dt).min)
        hidden_states = self.wte(input_ids) + self.wpe(position_ids)
        hidden_states = self.drop(hidden_states)
        for block in self.h:
            hidden_states = run_layer(block, hidden_states, attention_mask)
        hidden_states = self.ln_f(hidden_states)
        logits = self.lm_head(hidden_states)
        mark("fwd:loss:start")
        set_ctx(unit="loss")
        loss = LOSS[0](logits, labels, self.cfg["vocab_size"])
        mark("fwd:loss:end")
        return loss, logits  # CausalLMOutput(loss=loss, logits=logits)


class LlamaRMSNorm(nn.Module):
    """modeling_llama.py LlamaRMSNorm.forward (5dd4a63548857797): to(float32),
    pow(2).mean(-1, keepdim=True), x * torch.rsqrt(variance + eps),
    weight * x.to(input_dtype)."""

    def __init__(self, d, eps):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d))
        self.variance_epsilon = eps

    def forward(self, hidden_states):
        input_dtype = hidden_states.dtype
        hidden_states = hidden_states.to(torch.float32)
        variance = hidden_states.pow(2).mean(-1, keepdim=True)
        hidden_states = hidden_states * torch.rsqrt(variance + self.variance_epsilon)
        return self.weight * hidden_states.to(input_dtype)


class LlamaRotaryEmbedding(nn.Module):
    """modeling_llama.py LlamaRotaryEmbedding (5dd4a63548857797), default
    rope: inv_freq buffer; forward under no_grad: freqs = (inv_freq @
    position_ids).transpose(1, 2), emb = cat((freqs, freqs), -1), cos, sin,
    each times attention_scaling (1.0: still a new tensor), .to(x.dtype)."""

    def __init__(self, cfg):
        super().__init__()
        hd = cfg.get("head_dim") or cfg["hidden_size"] // cfg["num_attention_heads"]
        base = cfg.get("rope_theta", 10000.0)
        inv_freq = 1.0 / (base ** (torch.arange(0, hd, 2, dtype=torch.int64).float() / hd))
        self.register_buffer("inv_freq", inv_freq, persistent=False)
        # the same tensor, until module.bfloat16() swaps the buffer for a
        # bf16 copy: this attribute keeps the fp32 one (tests/ds_bf16_torch.py)
        self.original_inv_freq = self.inv_freq
        self.attention_scaling = 1.0

    @torch.no_grad()
    def forward(self, x, position_ids):
        inv_freq_expanded = self.inv_freq[None, :, None].float().expand(position_ids.shape[0], -1, 1)
        position_ids_expanded = position_ids[:, None, :].float()
        # (transformers: device_type = x.device.type, "cpu" for mps: on a
        # GPU it is CUDA's autocast the rope turns off; tests/gpu_torch.py)
        with torch.autocast(device_type=x.device.type if x.device.type != "mps" else "cpu", enabled=False):
            freqs = (inv_freq_expanded.float() @ position_ids_expanded.float()).transpose(1, 2)
            emb = torch.cat((freqs, freqs), dim=-1)
            cos = emb.cos()
            sin = emb.sin()
        cos = cos * self.attention_scaling
        sin = sin * self.attention_scaling
        return cos.to(dtype=x.dtype), sin.to(dtype=x.dtype)


def rotate_half(x):
    """modeling_llama.py rotate_half (5dd4a63548857797)."""
    x1 = x[..., : x.shape[-1] // 2]
    x2 = x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


def apply_rotary_pos_emb(q, k, cos, sin, unsqueeze_dim=1):
    """modeling_llama.py apply_rotary_pos_emb (5dd4a63548857797)."""
    cos = cos.unsqueeze(unsqueeze_dim)
    sin = sin.unsqueeze(unsqueeze_dim)
    q_embed = (q * cos) + (rotate_half(q) * sin)
    k_embed = (k * cos) + (rotate_half(k) * sin)
    return q_embed, k_embed


def repeat_kv(hidden_states, n_rep):
    """modeling_llama.py repeat_kv (5dd4a63548857797): expand and reshape
    (a copy) unless n_rep is 1."""
    batch, num_key_value_heads, slen, head_dim = hidden_states.shape
    if n_rep == 1:
        return hidden_states
    hidden_states = hidden_states[:, :, None, :, :].expand(batch, num_key_value_heads, n_rep, slen, head_dim)
    return hidden_states.reshape(batch, num_key_value_heads * n_rep, slen, head_dim)


class LlamaAttention(nn.Module):
    """modeling_llama.py LlamaAttention.forward and eager_attention_forward
    (5dd4a63548857797): q/k/v_proj, view, transpose(1, 2), rope, repeat_kv,
    matmul(q, k^T) * scaling, + causal_mask, softmax(dim=-1,
    dtype=float32).to(q.dtype), dropout, matmul(., v), transpose(1, 2)
    .contiguous(), reshape(...).contiguous(), o_proj."""

    def __init__(self, cfg, sdpa):
        super().__init__()
        d = cfg["hidden_size"]
        self.num_heads = cfg["num_attention_heads"]
        self.num_kv = cfg.get("num_key_value_heads") or self.num_heads
        self.head_dim = cfg.get("head_dim") or d // self.num_heads
        self.num_key_value_groups = self.num_heads // self.num_kv
        self.scaling = self.head_dim ** -0.5
        self.attention_dropout = cfg.get("attention_dropout", 0.0)
        bias = cfg.get("attention_bias", False)
        self.q_proj = nn.Linear(d, self.num_heads * self.head_dim, bias=bias)
        self.k_proj = nn.Linear(d, self.num_kv * self.head_dim, bias=bias)
        self.v_proj = nn.Linear(d, self.num_kv * self.head_dim, bias=bias)
        self.o_proj = nn.Linear(self.num_heads * self.head_dim, d, bias=bias)
        self.sdpa = sdpa

    def states(self, hidden_states, position_embeddings):
        """query, key and value states after the rope (the family's own
        part of the forward: Qwen3Attention and Phi3Attention replace it;
        the names that call it hold them as the inline code's did)."""
        hidden_shape = (*hidden_states.shape[:-1], -1, self.head_dim)
        query_states = self.q_proj(hidden_states).view(hidden_shape).transpose(1, 2)
        key_states = self.k_proj(hidden_states).view(hidden_shape).transpose(1, 2)
        value_states = self.v_proj(hidden_states).view(hidden_shape).transpose(1, 2)
        cos, sin = position_embeddings
        query_states, key_states = apply_rotary_pos_emb(query_states, key_states, cos, sin)
        return query_states, key_states, value_states

    def forward(self, hidden_states, position_embeddings, attention_mask):
        input_shape = hidden_states.shape[:-1]
        query_states, key_states, value_states = self.states(hidden_states, position_embeddings)
        p = self.attention_dropout if self.training else 0.0
        if self.sdpa:
            # integrations/sdpa_attention.py (transformers e2feb59b6212, 5.x):
            # sdpa_attention_forward repeats k and v only when
            # use_gqa_in_sdpa(mask, key) is False; on the CPU that is torch
            # older than 2.5 or a mask given. The causal mask is None here
            # (masking_utils' sdpa_mask skips it for is_causal without
            # padding), so from 2.5 it passes enable_gqa=True and k, v as
            # they are, with is_causal.
            sdpa_kwargs = {}
            if tuple(int(x) for x in torch.__version__.split(".")[:2]) >= (2, 5):
                sdpa_kwargs = {"enable_gqa": True}
            else:
                key_states = repeat_kv(key_states, self.num_key_value_groups)
                value_states = repeat_kv(value_states, self.num_key_value_groups)
            attn_output = F.scaled_dot_product_attention(query_states, key_states, value_states, dropout_p=p,
                                                         scale=self.scaling, is_causal=True, **sdpa_kwargs)
        else:
            key_states = repeat_kv(key_states, self.num_key_value_groups)
            value_states = repeat_kv(value_states, self.num_key_value_groups)
            attn_weights = torch.matmul(query_states, key_states.transpose(2, 3)) * self.scaling
            if attention_mask is not None:
                causal_mask = attention_mask[:, :, :, : key_states.shape[-2]]
                attn_weights = attn_weights + causal_mask
            attn_weights = nn.functional.softmax(attn_weights, dim=-1, dtype=torch.float32).to(query_states.dtype)
            attn_weights = nn.functional.dropout(attn_weights, p=p, training=self.training)
            attn_output = torch.matmul(attn_weights, value_states)
        attn_output = attn_output.transpose(1, 2).contiguous()
        attn_output = attn_output.reshape(*input_shape, -1).contiguous()
        return self.o_proj(attn_output)


class LlamaMLP(nn.Module):
    """modeling_llama.py LlamaMLP.forward (5dd4a63548857797):
    down_proj(act_fn(gate_proj(x)) * up_proj(x)), act_fn silu."""

    def __init__(self, cfg):
        super().__init__()
        d, f = cfg["hidden_size"], cfg["intermediate_size"]
        bias = cfg.get("mlp_bias", False)
        self.gate_proj = nn.Linear(d, f, bias=bias)
        self.up_proj = nn.Linear(d, f, bias=bias)
        self.down_proj = nn.Linear(f, d, bias=bias)
        self.act_fn = nn.SiLU()

    def forward(self, x):
        return self.down_proj(self.act_fn(self.gate_proj(x)) * self.up_proj(x))


class LlamaDecoderLayer(nn.Module):
    """modeling_llama.py LlamaDecoderLayer.forward (5dd4a63548857797)."""

    def __init__(self, cfg, sdpa, attn=None):
        super().__init__()
        eps = cfg.get("rms_norm_eps", 1e-6)
        self.self_attn = (attn or LlamaAttention)(cfg, sdpa)
        self.mlp = LlamaMLP(cfg)
        self.input_layernorm = LlamaRMSNorm(cfg["hidden_size"], eps)
        self.post_attention_layernorm = LlamaRMSNorm(cfg["hidden_size"], eps)

    def forward(self, hidden_states, attention_mask, position_embeddings):
        residual = hidden_states
        hidden_states = self.input_layernorm(hidden_states)
        hidden_states = self.self_attn(hidden_states, position_embeddings, attention_mask)
        hidden_states = residual + hidden_states
        residual = hidden_states
        hidden_states = self.post_attention_layernorm(hidden_states)
        hidden_states = self.mlp(hidden_states)
        return residual + hidden_states


class LlamaForCausalLM(nn.Module):
    """modeling_llama.py LlamaModel.forward and LlamaForCausalLM.forward
    (5dd4a63548857797): embed_tokens; cache_position = arange(T);
    position_ids = cache_position.unsqueeze(0); _update_causal_mask for
    eager (torch.full((T, T), min) -> triu(diagonal=1) -> *= arange(T) >
    cache_position.reshape(-1, 1) -> [None, None].expand(B, 1, -1, -1));
    rotary_emb; layers; norm; lm_head (untied unless the config ties it);
    ForCausalLMLoss."""

    def __init__(self, cfg, tied, sdpa, attn=None):
        super().__init__()
        d, V = cfg["hidden_size"], cfg["vocab_size"]
        self.cfg = cfg
        self.embed_tokens = nn.Embedding(V, d)
        nn.init.normal_(self.embed_tokens.weight, std=0.02)
        layer = FAMILY_LAYER.get(cfg.get("model_type"), Phi3DecoderLayer if attn is Phi3Attention else LlamaDecoderLayer)
        self.layers = nn.ModuleList([layer(cfg, sdpa, attn) for _ in range(cfg["num_hidden_layers"])])
        self.norm = LlamaRMSNorm(d, cfg.get("rms_norm_eps", 1e-6))
        self.rotary_emb = LlamaRotaryEmbedding(cfg)
        self.lm_head = nn.Linear(d, V, bias=False, device="meta" if tied else None)  # as GPT2LMHeadModel's
        if tied:
            self.lm_head.weight = self.embed_tokens.weight
        self.sdpa = sdpa
        self.units = ["embed_tokens", "rotary_emb"] + [f"layers.{i}" for i in range(len(self.layers))] + \
            ["norm", "lm_head"]

    def forward(self, input_ids, labels):
        B, T = input_ids.shape
        inputs_embeds = self.embed_tokens(input_ids)
        cache_position = torch.arange(0, T)
        position_ids = cache_position.unsqueeze(0)
        causal_mask = None
        if not self.sdpa:
            dtype = inputs_embeds.dtype
            min_dtype = torch.finfo(dtype).min
            causal_mask = torch.full((T, T), fill_value=min_dtype, dtype=dtype)
            causal_mask = torch.triu(causal_mask, diagonal=1)
            causal_mask *= torch.arange(T) > cache_position.reshape(-1, 1)
            causal_mask = causal_mask[None, None, :, :].expand(B, 1, -1, -1)
        hidden_states = inputs_embeds
        position_embeddings = self.rotary_emb(hidden_states, position_ids)
        for layer in self.layers:
            hidden_states = self.call_layer(layer, hidden_states, causal_mask, position_ids, cache_position,
                                            position_embeddings)
        hidden_states = self.norm(hidden_states)
        logits = self.lm_head(hidden_states)
        mark("fwd:loss:start")
        set_ctx(unit="loss")
        loss = LOSS[0](logits, labels, self.cfg["vocab_size"])
        mark("fwd:loss:end")
        if self.cfg.get("output_router_logits"):  # a mixture's auxiliary loss (below)
            return moe_aux_outputs(self.cfg, loss, logits)
        return loss, logits  # CausalLMOutput(loss=loss, logits=logits)

    def call_layer(self, layer, hidden_states, causal_mask, position_ids, cache_position, position_embeddings):
        """The model loop's call of a decoder layer. Checkpointed (--recompute full), what the call
        gives the checkpoint differs by release: llama's (and mistral's, taken as llama's) as 4.48's
        LlamaModel.forward makes it (modeling_llama.py at 5dd4a63548857797:
        self._gradient_checkpointing_func(decoder_layer.__call__, hidden_states, causal_mask,
        position_ids, past_key_values, output_attentions, use_cache, cache_position,
        position_embeddings), all positional: checkpointed_positional); qwen2's, qwen3's and phi3's
        as their 5.x loops call a GradientCheckpointingLayer (modeling_qwen2.py at 63bb72374703,
        Qwen2Model.forward: decoder_layer(hidden_states, attention_mask=..., position_ids=...,
        past_key_values=..., use_cache=..., cache_position=..., position_embeddings=...), the
        keywords bound in the partial: checkpointed_layer), and so every family under FSDP, whose
        unit's __call__ is checkpoint_inside's."""
        if not RECOMPUTE[0] or not layer.training:
            return layer(hidden_states, causal_mask, position_embeddings)
        if checkpointing(layer) and self.cfg.get("model_type") in ("llama", "mistral"):
            # past_key_values None, output_attentions and use_cache False
            return checkpointed_positional(
                lambda h, mask, pids, pkv, oa, uc, cp, pe, layer=layer: layer(h, mask, pe), hidden_states,
                causal_mask, position_ids, None, False, False, cache_position, position_embeddings)
        kw = dict(attention_mask=causal_mask, position_ids=position_ids, past_key_values=None, use_cache=False,
                  cache_position=cache_position, position_embeddings=position_embeddings)
        if checkpointing(layer):
            return checkpointed_layer(lambda h, layer=layer, **k: layer(h, k["attention_mask"],
                                                                          k["position_embeddings"]),
                                      hidden_states, **kw)
        return layer(hidden_states, **kw)  # FSDP(layer): checkpoint_inside's __call__ binds them


# Qwen2 and Qwen3 (transformers 5.x; the stored snapshots: modeling_qwen2.py
# at 63bb72374703, modeling_qwen3.py at 000c33fdfde1). Both files are
# generated from llama's modular: Qwen2RMSNorm, Qwen3RMSNorm, Qwen2MLP,
# Qwen3MLP, rotate_half, apply_rotary_pos_emb, repeat_kv,
# eager_attention_forward and the decoder layers are LlamaRMSNorm's,
# LlamaMLP's, ... op for op (the classes above); the attention differs.


class Qwen2Attention(LlamaAttention):
    """modeling_qwen2.py Qwen2Attention (63bb72374703): __init__ makes
    q_proj, k_proj and v_proj with bias=True, o_proj with bias=False;
    forward is llama's (view, transpose(1, 2), apply_rotary_pos_emb,
    eager_attention_forward, reshape(...).contiguous(), o_proj). The
    sliding_window it passes is None unless use_sliding_window (refused
    by the test's configs: none set it)."""

    def __init__(self, cfg, sdpa):
        super().__init__(cfg, sdpa)
        d = cfg["hidden_size"]
        self.q_proj = nn.Linear(d, self.num_heads * self.head_dim, bias=True)
        self.k_proj = nn.Linear(d, self.num_kv * self.head_dim, bias=True)
        self.v_proj = nn.Linear(d, self.num_kv * self.head_dim, bias=True)
        self.o_proj = nn.Linear(self.num_heads * self.head_dim, d, bias=False)


class Qwen3Attention(LlamaAttention):
    """modeling_qwen3.py Qwen3Attention (000c33fdfde1): head_dim from the
    config (Qwen3Config's default 128, not hidden / heads), q/k/v/o_proj
    with bias=attention_bias (False), then q_norm and k_norm, each a
    Qwen3RMSNorm(head_dim, rms_norm_eps) (registered after o_proj); forward:
    query_states = q_norm(q_proj(x).view(hidden_shape)).transpose(1, 2),
    key_states likewise with k_norm, value_states = v_proj(x).view(...)
    .transpose(1, 2); then llama's rope, eager_attention_forward, reshape,
    o_proj."""

    def __init__(self, cfg, sdpa):
        super().__init__(cfg, sdpa)
        eps = cfg.get("rms_norm_eps", 1e-6)
        self.q_norm = LlamaRMSNorm(self.head_dim, eps)
        self.k_norm = LlamaRMSNorm(self.head_dim, eps)

    def states(self, hidden_states, position_embeddings):
        hidden_shape = (*hidden_states.shape[:-1], -1, self.head_dim)
        query_states = self.q_norm(self.q_proj(hidden_states).view(hidden_shape)).transpose(1, 2)
        key_states = self.k_norm(self.k_proj(hidden_states).view(hidden_shape)).transpose(1, 2)
        value_states = self.v_proj(hidden_states).view(hidden_shape).transpose(1, 2)
        cos, sin = position_embeddings
        query_states, key_states = apply_rotary_pos_emb(query_states, key_states, cos, sin)
        return query_states, key_states, value_states


def phi3_apply_rotary_pos_emb(q, k, cos, sin, unsqueeze_dim=1):
    """modeling_phi3.py apply_rotary_pos_emb (00d4b3d2142c; partial rotary):
    rotary_dim = cos.shape[-1]; q_rot, q_pass = q[..., :rotary_dim],
    q[..., rotary_dim:]; q_embed = cat([(q_rot * cos) + (rotate_half(q_rot)
    * sin), q_pass], dim=-1); k likewise."""
    cos = cos.unsqueeze(unsqueeze_dim)
    sin = sin.unsqueeze(unsqueeze_dim)
    rotary_dim = cos.shape[-1]
    q_rot, q_pass = q[..., :rotary_dim], q[..., rotary_dim:]
    k_rot, k_pass = k[..., :rotary_dim], k[..., rotary_dim:]
    q_embed = torch.cat([(q_rot * cos) + (rotate_half(q_rot) * sin), q_pass], dim=-1)
    k_embed = torch.cat([(k_rot * cos) + (rotate_half(k_rot) * sin), k_pass], dim=-1)
    return q_embed, k_embed


class Phi3Attention(LlamaAttention):
    """modeling_phi3.py Phi3Attention (00d4b3d2142c): o_proj registered
    before qkv_proj (one nn.Linear of (h + 2 kv) hd rows, no bias); forward:
    qkv = qkv_proj(x); query_states = qkv[..., :query_pos], key_states =
    qkv[..., query_pos : query_pos + kv hd], value_states = qkv[...,
    query_pos + kv hd:]; each .view(hidden_shape).transpose(1, 2);
    apply_rotary_pos_emb (the partial-rotary one above); then llama's
    eager_attention_forward, reshape, o_proj (LlamaAttention.forward's).
    (That snapshot's attention
    computes cos and sin itself, through a rotary_emb of its own, from a
    deprecated position_embeddings; 43c2b4816a65 and 5.x's other files
    pass the model's position_embeddings, as here.)"""

    def __init__(self, cfg, sdpa):
        super().__init__(cfg, sdpa)
        d = cfg["hidden_size"]
        del self.q_proj, self.k_proj, self.v_proj, self.o_proj
        op_size = self.num_heads * self.head_dim + 2 * (self.num_kv * self.head_dim)
        self.o_proj = nn.Linear(self.num_heads * self.head_dim, d, bias=False)
        self.qkv_proj = nn.Linear(d, op_size, bias=False)

    def states(self, hidden_states, position_embeddings):
        hidden_shape = (*hidden_states.shape[:-1], -1, self.head_dim)
        qkv = self.qkv_proj(hidden_states)
        query_pos = self.num_heads * self.head_dim
        query_states = qkv[..., :query_pos]
        key_states = qkv[..., query_pos: query_pos + self.num_kv * self.head_dim]
        value_states = qkv[..., query_pos + self.num_kv * self.head_dim:]
        query_states = query_states.view(hidden_shape).transpose(1, 2)
        key_states = key_states.view(hidden_shape).transpose(1, 2)
        value_states = value_states.view(hidden_shape).transpose(1, 2)
        cos, sin = position_embeddings
        query_states, key_states = phi3_apply_rotary_pos_emb(query_states, key_states, cos, sin)
        return query_states, key_states, value_states


class Phi3MLP(nn.Module):
    """modeling_phi3.py Phi3MLP (00d4b3d2142c): up_states =
    gate_up_proj(x); gate, up_states = up_states.chunk(2, dim=-1);
    up_states = up_states * activation_fn(gate); down_proj(up_states)."""

    def __init__(self, cfg):
        super().__init__()
        d, f = cfg["hidden_size"], cfg["intermediate_size"]
        self.gate_up_proj = nn.Linear(d, 2 * f, bias=False)
        self.down_proj = nn.Linear(f, d, bias=False)
        self.activation_fn = nn.SiLU()

    def forward(self, hidden_states):
        up_states = self.gate_up_proj(hidden_states)
        gate, up_states = up_states.chunk(2, dim=-1)
        up_states = up_states * self.activation_fn(gate)
        return self.down_proj(up_states)


class Phi3DecoderLayer(LlamaDecoderLayer):
    """modeling_phi3.py Phi3DecoderLayer (00d4b3d2142c): llama's, with
    resid_attn_dropout and resid_mlp_dropout (nn.Dropout(resid_pdrop),
    Phi3Config's default 0.0) on each sublayer's output before its
    residual add."""

    def __init__(self, cfg, sdpa, attn=None):
        super().__init__(cfg, sdpa, Phi3Attention)
        self.mlp = Phi3MLP(cfg)
        p = cfg.get("resid_pdrop", 0.0)
        self.resid_attn_dropout = nn.Dropout(p)
        self.resid_mlp_dropout = nn.Dropout(p)

    def forward(self, hidden_states, attention_mask, position_embeddings):
        residual = hidden_states
        hidden_states = self.input_layernorm(hidden_states)
        hidden_states = self.self_attn(hidden_states, position_embeddings, attention_mask)
        hidden_states = residual + self.resid_attn_dropout(hidden_states)
        residual = hidden_states
        hidden_states = self.post_attention_layernorm(hidden_states)
        hidden_states = self.mlp(hidden_states)
        return residual + self.resid_mlp_dropout(hidden_states)


# Gemma 2, from transformers' modeling_gemma2.py at 9a80143ca260 (4.49; the
# index's other snapshot, 006e86931247, still made a rotary embedding per
# attention). Gemma 3's text model follows them (Gemma3ForCausalLM).


class Gemma2RMSNorm(nn.Module):
    """modeling_gemma2.py Gemma2RMSNorm (9a80143ca260): weight zeros;
    forward: output = self._norm(x.float()) (x itself in fp32), _norm: x *
    torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps); output * (1.0 +
    self.weight.float()); .type_as(x)."""

    def __init__(self, d, eps):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.zeros(d))

    def _norm(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)

    def forward(self, x):
        output = self._norm(x.float())
        output = output * (1.0 + self.weight.float())
        return output.type_as(x)


class PytorchGELUTanh(nn.Module):
    """activations.py PytorchGELUTanh (transformers, ACT2CLS
    "gelu_pytorch_tanh", Gemma2Config's hidden_activation): one op,
    nn.functional.gelu(input, approximate="tanh")."""

    def forward(self, input):
        return nn.functional.gelu(input, approximate="tanh")


class Gemma2MLP(LlamaMLP):
    """modeling_gemma2.py Gemma2MLP (9a80143ca260): llama's with act_fn
    ACT2FN[hidden_activation] (gelu_pytorch_tanh)."""

    def __init__(self, cfg):
        super().__init__(cfg)
        act = cfg.get("hidden_activation") or "gelu_pytorch_tanh"
        if act != "gelu_pytorch_tanh":
            sys.exit(f"hf_torch: gemma hidden_activation {act!r} is not gelu_pytorch_tanh")
        self.act_fn = PytorchGELUTanh()


class Gemma2Attention(LlamaAttention):
    """modeling_gemma2.py Gemma2Attention and eager_attention_forward
    (9a80143ca260): llama's projections (bias attention_bias), scaling
    query_pre_attn_scalar**-0.5; matmul(q, k^T) * scaling, then with a
    softcap: / softcap, tanh, * softcap; + causal_mask; softmax(dim=-1,
    dtype=float32).to(q.dtype); dropout; matmul; transpose(1, 2)
    .contiguous(); reshape(...).contiguous(); o_proj."""

    def __init__(self, cfg, sdpa):
        super().__init__(cfg, sdpa)
        self.scaling = cfg.get("query_pre_attn_scalar", 256) ** -0.5
        self.softcap = cfg.get("attn_logit_softcapping")

    def forward(self, hidden_states, position_embeddings, attention_mask):
        input_shape = hidden_states.shape[:-1]
        query_states, key_states, value_states = self.states(hidden_states, position_embeddings)
        key_states = repeat_kv(key_states, self.num_key_value_groups)
        value_states = repeat_kv(value_states, self.num_key_value_groups)
        attn_weights = torch.matmul(query_states, key_states.transpose(2, 3)) * self.scaling
        if self.softcap is not None:
            attn_weights = attn_weights / self.softcap
            attn_weights = torch.tanh(attn_weights)
            attn_weights = attn_weights * self.softcap
        if attention_mask is not None:
            causal_mask = attention_mask[:, :, :, : key_states.shape[-2]]
            attn_weights = attn_weights + causal_mask
        attn_weights = nn.functional.softmax(attn_weights, dim=-1, dtype=torch.float32).to(query_states.dtype)
        p = self.attention_dropout if self.training else 0.0
        attn_weights = nn.functional.dropout(attn_weights, p=p, training=self.training)
        attn_output = torch.matmul(attn_weights, value_states)
        attn_output = attn_output.transpose(1, 2).contiguous()
        attn_output = attn_output.reshape(*input_shape, -1).contiguous()
        return self.o_proj(attn_output)


class Gemma2DecoderLayer(nn.Module):
    """modeling_gemma2.py Gemma2DecoderLayer (9a80143ca260): on a sliding
    layer (layer_idx even) with a mask: torch.tril(torch.ones_like(mask,
    dtype=bool), diagonal=-sliding_window), torch.where(that, min_dtype,
    mask), the slice [..., offset : offset + max(T, sliding_window)]
    (offset 0 in training: no cache); then input_layernorm, attention,
    post_attention_layernorm, + residual; pre_feedforward_layernorm, mlp,
    post_feedforward_layernorm, + residual."""

    def __init__(self, cfg, sdpa, sliding):
        super().__init__()
        eps = cfg.get("rms_norm_eps", 1e-6)
        d = cfg["hidden_size"]
        self.self_attn = Gemma2Attention(cfg, sdpa)
        self.mlp = Gemma2MLP(cfg)
        self.input_layernorm = Gemma2RMSNorm(d, eps)
        self.post_attention_layernorm = Gemma2RMSNorm(d, eps)
        self.pre_feedforward_layernorm = Gemma2RMSNorm(d, eps)
        self.post_feedforward_layernorm = Gemma2RMSNorm(d, eps)
        self.is_sliding = sliding
        self.sliding_window = cfg.get("sliding_window", 4096)

    def forward(self, hidden_states, attention_mask, position_embeddings):
        if self.is_sliding and attention_mask is not None:
            effective_seq_len = max(hidden_states.shape[1], self.sliding_window)
            min_dtype = torch.finfo(attention_mask.dtype).min
            sliding_window_mask = torch.tril(torch.ones_like(attention_mask, dtype=torch.bool),
                                             diagonal=-self.sliding_window)
            attention_mask = torch.where(sliding_window_mask, min_dtype, attention_mask)
            offset = max(0, 0 - effective_seq_len)  # last_cache_position 0: no cache in training
            attention_mask = attention_mask[:, :, :, offset: offset + effective_seq_len]
        residual = hidden_states
        hidden_states = self.input_layernorm(hidden_states)
        hidden_states = self.self_attn(hidden_states, position_embeddings, attention_mask)
        hidden_states = self.post_attention_layernorm(hidden_states)
        hidden_states = residual + hidden_states
        residual = hidden_states
        hidden_states = self.pre_feedforward_layernorm(hidden_states)
        hidden_states = self.mlp(hidden_states)
        hidden_states = self.post_feedforward_layernorm(hidden_states)
        return residual + hidden_states


class Gemma2ForCausalLM(LlamaForCausalLM):
    """modeling_gemma2.py Gemma2Model.forward and Gemma2ForCausalLM.forward
    (9a80143ca260): embed_tokens (nn.Embedding with padding_idx
    pad_token_id); cache_position, position_ids; _update_causal_mask (no
    cache in training: llama's full, triu, *= arange > cache_position,
    expand); rotary_emb; normalizer = torch.tensor(hidden_size**0.5,
    dtype=hidden_states.dtype), hidden_states * normalizer; layers; norm;
    lm_head; with final_logit_softcapping: logits / cap, tanh, * cap;
    loss_function (ForCausalLMLoss)."""

    def __init__(self, cfg, tied, sdpa):
        nn.Module.__init__(self)
        d, V = cfg["hidden_size"], cfg["vocab_size"]
        L = cfg["num_hidden_layers"]
        self.cfg = cfg
        self.gemma_modules(cfg, tied, sdpa, nn.Embedding(V, d, cfg.get("pad_token_id", 0)),
                           [Gemma2DecoderLayer(cfg, sdpa, not l % 2) for l in range(L)], LlamaRotaryEmbedding(cfg))

    def gemma_modules(self, cfg, tied, sdpa, embed_tokens, layers, rotary_emb):
        """The modules in Gemma2Model's (and Gemma3TextModel's) order: the
        embedding (normal(0.02), its padding_idx row zeroed), the layers,
        norm, rotary_emb; lm_head (tied: the table)."""
        self.embed_tokens = embed_tokens
        nn.init.normal_(self.embed_tokens.weight, std=0.02)
        if self.embed_tokens.padding_idx is not None:
            with torch.no_grad():
                self.embed_tokens.weight[self.embed_tokens.padding_idx].zero_()
        self.layers = nn.ModuleList(layers)
        self.norm = Gemma2RMSNorm(cfg["hidden_size"], cfg.get("rms_norm_eps", 1e-6))
        self.rotary_emb = rotary_emb
        self.lm_head = nn.Linear(cfg["hidden_size"], cfg["vocab_size"], bias=False,
                                 device="meta" if tied else None)  # as GPT2LMHeadModel's
        if tied:
            self.lm_head.weight = self.embed_tokens.weight
        self.sdpa = sdpa
        self.final_softcap = cfg.get("final_logit_softcapping")
        self.units = ["embed_tokens", "rotary_emb"] + [f"layers.{i}" for i in range(len(layers))] + ["norm", "lm_head"]

    def forward(self, input_ids, labels):
        B, T = input_ids.shape
        inputs_embeds = self.embed_tokens(input_ids)
        cache_position = torch.arange(0, T)
        position_ids = cache_position.unsqueeze(0)
        dtype = inputs_embeds.dtype
        min_dtype = torch.finfo(dtype).min
        causal_mask = torch.full((T, T), fill_value=min_dtype, dtype=dtype)
        causal_mask = torch.triu(causal_mask, diagonal=1)
        causal_mask *= torch.arange(T) > cache_position.reshape(-1, 1)
        causal_mask = causal_mask[None, None, :, :].expand(B, 1, -1, -1)
        hidden_states = inputs_embeds
        position_embeddings = self.rotary_emb(hidden_states, position_ids)
        normalizer = torch.tensor(self.cfg["hidden_size"] ** 0.5, dtype=hidden_states.dtype)
        hidden_states = hidden_states * normalizer
        for layer in self.layers:
            if checkpointing(layer):  # past_key_values None, output_attentions and use_cache False, last_cache_position 0
                hidden_states = checkpointed_positional(
                    lambda h, pe, mask, *rest, layer=layer: layer(h, mask, pe), hidden_states, position_embeddings,
                    causal_mask, position_ids, None, False, False, cache_position, 0)
            else:
                hidden_states = layer(hidden_states, causal_mask, position_embeddings)
        return self.head(hidden_states, labels)

    def head(self, hidden_states, labels):
        """The rest of the forward after the layers: norm, lm_head, the
        logits' softcap where set, the loss."""
        hidden_states = self.norm(hidden_states)
        logits = self.lm_head(hidden_states)
        if self.final_softcap is not None:
            logits = logits / self.final_softcap
            logits = torch.tanh(logits)
            logits = logits * self.final_softcap
        mark("fwd:loss:start")
        set_ctx(unit="loss")
        loss = LOSS[0](logits, labels, self.cfg["vocab_size"])
        mark("fwd:loss:end")
        return loss, logits


# Gemma 3's text model, from transformers' modeling_gemma3.py at 0018aa64
# (5.x, the index's huggingface/transformers snapshot; the 4.50 file at
# 008f5c8c is not stored) and masking_utils.py at 00c4411c (the index's
# snapshot of the masks that file builds). What differs from Gemma 2 above:
# Gemma3TextScaledWordEmbedding (the lookup times its embed_scale buffer),
# Gemma3Attention's q_norm and k_norm on the transposed heads, the masks
# built once in Gemma3TextModel.forward (create_causal_mask and
# create_sliding_window_causal_mask: masking_utils' eager_mask, index-based,
# no vmap), and Gemma3RotaryEmbedding called once per entry of layer_types
# with that type's inv_freq buffer. Gemma3Attention passes no softcap to
# eager_attention_forward (attn_logit_softcapping is read and not used).


def find_packed_sequence_indices(position_ids):
    """masking_utils.py find_packed_sequence_indices (00c4411c): the diff of
    the positions with the first minus 1 prepended, != 1, cumsum; None when
    the last column is all 0 (one sequence a row)."""
    first_dummy_value = position_ids[:, :1] - 1
    position_diff = torch.diff(position_ids, prepend=first_dummy_value, dim=-1)
    packed_sequence_mask = (position_diff != 1).cumsum(-1)
    if (packed_sequence_mask[:, -1] == 0).all():
        return None
    return packed_sequence_mask


def causal_mask_function(batch_idx, head_idx, q_idx, kv_idx):
    """masking_utils.py causal_mask_function (00c4411c)."""
    return kv_idx <= q_idx


def sliding_window_causal_mask_function(sliding_window):
    """masking_utils.py sliding_window_causal_mask_function (00c4411c):
    and_masks(sliding_window_overlay(w), causal_mask_function); and_masks
    starts from q_idx.new_ones((), dtype=bool) and & each in turn."""
    def and_mask(batch_idx, head_idx, q_idx, kv_idx):
        result = q_idx.new_ones((), dtype=torch.bool)
        result = result & (kv_idx > q_idx - sliding_window).to(result.device)
        result = result & causal_mask_function(batch_idx, head_idx, q_idx, kv_idx).to(result.device)
        return result
    return and_mask


def eager_mask(B, T, mask_function, dtype):
    """masking_utils.py create_causal_mask / create_sliding_window_causal_mask
    (no cache, no 2D mask: _preprocess_mask_arguments' q_length = kv_length
    = T, offsets 0; position_ids expanded to B rows and
    find_packed_sequence_indices run on them, None here), then eager_mask:
    sdpa_mask (allow_is_causal_skip False, no vmap: the aranges, the index
    broadcast of _non_vmap_expansion_sdpa, expand; torch < 2.5's fix off
    for eager), torch.where(mask, torch.tensor(0.0, dtype), min_dtype)."""
    batch_arange = torch.arange(B)
    head_arange = torch.arange(1)
    q_arange = torch.arange(T) + 0
    kv_arange = torch.arange(T) + 0
    attention_mask = mask_function(batch_arange[:, None, None, None], head_arange[None, :, None, None],
                                   q_arange[None, None, :, None], kv_arange[None, None, None, :])
    attention_mask = attention_mask.expand(B, -1, T, T)
    min_dtype = torch.finfo(dtype).min
    return torch.where(attention_mask, torch.tensor(0.0, dtype=dtype), min_dtype)


def gemma3_masks(cfg, inputs_embeds, position_ids, sdpa):
    """Gemma3TextModel.forward's causal_mask_mapping (0018aa64): the full
    and the sliding masks, each from _preprocess_mask_arguments' packed
    check and eager_mask; under SDPA sdpa_mask (allow_is_causal_skip) returns
    None for both, _ignore_causal_mask_sdpa holding (no padding, kv_length
    == q_length, and for the sliding one kv_length < sliding_window, which
    main() checks)."""
    B, T = inputs_embeds.shape[:2]
    out = {}
    for kind, fn in (("full_attention", causal_mask_function),
                     ("sliding_attention", sliding_window_causal_mask_function(cfg["sliding_window"]))):
        pos = position_ids.expand(B, -1) if B != position_ids.shape[0] else position_ids
        if find_packed_sequence_indices(pos) is not None:
            sys.exit("hf_torch: packed sequences are not compared")
        del pos
        out[kind] = None if sdpa else eager_mask(B, T, fn, inputs_embeds.dtype)
    return out


class Gemma3RotaryEmbedding(nn.Module):
    """modeling_gemma3.py Gemma3RotaryEmbedding (0018aa64), default rope: a
    `{layer_type}_inv_freq` buffer per layer type (sliding_attention at
    rope_local_base_freq, full_attention at rope_theta); forward under
    no_grad: inv_freq[None, :, None].float().expand(...), position_ids[:,
    None, :].float(), bmm, transpose(1, 2), cat, cos() * scaling, sin() *
    scaling (1.0), .to(x.dtype)."""

    def __init__(self, cfg):
        super().__init__()
        hd = cfg["head_dim"]
        for kind, base in (("sliding_attention", cfg["rope_local_base_freq"]), ("full_attention", cfg["rope_theta"])):
            inv_freq = 1.0 / (base ** (torch.arange(0, hd, 2, dtype=torch.int64).float() / hd))
            self.register_buffer(f"{kind}_inv_freq", inv_freq, persistent=False)

    @torch.no_grad()
    def forward(self, x, position_ids, layer_type):
        inv_freq = getattr(self, f"{layer_type}_inv_freq")
        inv_freq_expanded = inv_freq[None, :, None].float().expand(position_ids.shape[0], -1, 1)
        position_ids_expanded = position_ids[:, None, :].float()
        # (transformers: device_type = x.device.type, "cpu" for mps: on a
        # GPU it is CUDA's autocast the rope turns off; tests/gpu_torch.py)
        with torch.autocast(device_type=x.device.type if x.device.type != "mps" else "cpu", enabled=False):
            freqs = (inv_freq_expanded.float() @ position_ids_expanded.float()).transpose(1, 2)
            emb = torch.cat((freqs, freqs), dim=-1)
            cos = emb.cos() * 1.0
            sin = emb.sin() * 1.0
        return cos.to(dtype=x.dtype), sin.to(dtype=x.dtype)


class Gemma3Attention(Gemma2Attention):
    """modeling_gemma3.py Gemma3Attention.forward (0018aa64): q_proj, k_proj,
    v_proj, each .view(hidden_shape).transpose(1, 2); then q_norm and k_norm
    (Gemma3RMSNorm(head_dim), Gemma2RMSNorm's ops) on the transposed q and
    k; apply_rotary_pos_emb; eager_attention_forward with no softcap;
    reshape(...).contiguous(); o_proj."""

    def __init__(self, cfg, sdpa):
        super().__init__(cfg, sdpa)
        eps = cfg.get("rms_norm_eps", 1e-6)
        self.softcap = None
        self.q_norm = Gemma2RMSNorm(self.head_dim, eps)
        self.k_norm = Gemma2RMSNorm(self.head_dim, eps)

    def forward(self, hidden_states, position_embeddings, attention_mask):
        # under SDPA sdpa_attention_forward as Llama's (scale: self.scaling)
        base = LlamaAttention if self.sdpa else Gemma2Attention
        return base.forward(self, hidden_states, position_embeddings, attention_mask)

    def states(self, hidden_states, position_embeddings):
        hidden_shape = (*hidden_states.shape[:-1], -1, self.head_dim)
        query_states = self.q_proj(hidden_states).view(hidden_shape).transpose(1, 2)
        key_states = self.k_proj(hidden_states).view(hidden_shape).transpose(1, 2)
        value_states = self.v_proj(hidden_states).view(hidden_shape).transpose(1, 2)
        query_states = self.q_norm(query_states)
        key_states = self.k_norm(key_states)
        cos, sin = position_embeddings
        query_states, key_states = apply_rotary_pos_emb(query_states, key_states, cos, sin)
        return query_states, key_states, value_states


class Gemma3DecoderLayer(Gemma2DecoderLayer):
    """modeling_gemma3.py Gemma3DecoderLayer.forward (0018aa64): Gemma 2's
    four norms around attention and the MLP, the layer's mask and position
    embeddings given (no mask made here)."""

    def __init__(self, cfg, sdpa, sliding):
        super().__init__(cfg, sdpa, sliding)
        self.self_attn = Gemma3Attention(cfg, sdpa)
        self.is_sliding = False  # Gemma2DecoderLayer's own where: not Gemma 3's


class Gemma3TextScaledWordEmbedding(nn.Embedding):
    """modeling_gemma3.py Gemma3TextScaledWordEmbedding (0018aa64): an
    nn.Embedding with padding_idx and a float32 buffer embed_scale =
    torch.tensor(hidden_size**0.5) (persistent=False); forward:
    super().forward(input_ids) * self.embed_scale.to(self.weight.dtype)."""

    def __init__(self, V, d, pad, embed_scale):
        super().__init__(V, d, pad)
        self.register_buffer("embed_scale", torch.tensor(embed_scale), persistent=False)

    def forward(self, input_ids):
        return super().forward(input_ids) * self.embed_scale.to(self.weight.dtype)


class Gemma3ForCausalLM(Gemma2ForCausalLM):
    """modeling_gemma3.py Gemma3TextModel.forward and Gemma3ForCausalLM.forward
    (0018aa64): embed_tokens (Gemma3TextScaledWordEmbedding: nn.Embedding
    with padding_idx, times embed_scale.to(weight.dtype), a float32 buffer
    torch.tensor(hidden_size**0.5)); cache_position, position_ids; the two
    masks (gemma3_masks); one rotary_emb call per entry of layer_types, each
    replacing that type's (cos, sin); the layers, each with its type's mask
    and position embeddings; norm; lm_head; a final softcap where set;
    loss_function (ForCausalLMLoss)."""

    def __init__(self, cfg, tied, sdpa):
        nn.Module.__init__(self)
        self.cfg, pattern = cfg, cfg["sliding_window_pattern"]
        self.layer_types = ["sliding_attention" if (l + 1) % pattern else "full_attention"
                            for l in range(cfg["num_hidden_layers"])]
        d = cfg["hidden_size"]
        embed = Gemma3TextScaledWordEmbedding(cfg["vocab_size"], d, cfg.get("pad_token_id", 0), d ** 0.5)
        self.gemma_modules(cfg, tied, sdpa, embed, [Gemma3DecoderLayer(cfg, sdpa, False) for _ in self.layer_types],
                           Gemma3RotaryEmbedding(cfg))

    def forward(self, input_ids, labels):
        B, T = input_ids.shape
        inputs_embeds = self.embed_tokens(input_ids)
        cache_position = torch.arange(0, T)
        position_ids = cache_position.unsqueeze(0)
        causal_mask_mapping = gemma3_masks(self.cfg, inputs_embeds, position_ids, self.sdpa)
        hidden_states = inputs_embeds
        position_embeddings = {}
        for layer_type in self.layer_types:
            position_embeddings[layer_type] = self.rotary_emb(hidden_states, position_ids, layer_type)
        for layer, layer_type in zip(self.layers, self.layer_types):
            if checkpointing(layer):  # the keywords in Gemma3TextModel.forward's order
                hidden_states = checkpointed_layer(
                    lambda h, layer=layer, **kw: layer(h, kw["attention_mask"], kw["position_embeddings"]),
                    hidden_states, attention_mask=causal_mask_mapping[layer_type],
                    position_embeddings=position_embeddings[layer_type], position_ids=position_ids,
                    past_key_values=None, output_attentions=False, use_cache=False, cache_position=cache_position)
            else:
                hidden_states = layer(hidden_states, causal_mask_mapping[layer_type], position_embeddings[layer_type])
        return self.head(hidden_states, labels)


FAMILY_ATTENTION = {"llama": LlamaAttention, "mistral": LlamaAttention, "qwen2": Qwen2Attention,
                    "qwen3": Qwen3Attention, "phi3": Phi3Attention}


# Mixtral (issue #25's mixtures under the PyTorch step): modeling_mixtral.py
# at 00d4b3d2 (the 4.x layout). MixtralAttention, MixtralRMSNorm,
# MixtralRotaryEmbedding and the model's mask are Mistral's, which zerosim
# and this file take as Llama's (FAMILY_ATTENTION's "mistral");
# MixtralDecoderLayer.forward is LlamaDecoderLayer's with
# block_sparse_moe (MixtralSparseMoeBlock, lines 78-142: tests/moe_torch.py's
# SparseMoeBlock, op for op) in place of the MLP; its router_logits live
# until the layer returns, or with output_router_logits true until the
# step's end (moe_aux_outputs, below). --experts eager: transformers 5.x's
# layout instead, the block the layer's `mlp` (moe_torch.py's
# FusedSparseMoeBlock over FusedExperts, two fused 3-D parameters).
ROUTING = []  # per forward, per layer: the tokens each expert got (the run's own routing)
ROUTER_LOGITS = []  # output_router_logits true: this forward's every layer's router_logits, in order
EXPERTS = ["modulelist"]  # --experts: 4.x's ModuleList, or 5.x's fused experts under eager (moe_torch.py)


class MixtralDecoderLayer(LlamaDecoderLayer):
    def __init__(self, cfg, sdpa, attn=None):
        # registered as MixtralDecoderLayer.__init__ does (model.parameters()'
        # order): self_attn, block_sparse_moe, input_layernorm,
        # post_attention_layernorm
        nn.Module.__init__(self)
        from moe_torch import FusedSparseMoeBlock, SparseMoeBlock
        eps = cfg.get("rms_norm_eps", 1e-6)
        self.self_attn = (attn or LlamaAttention)(cfg, sdpa)
        # transformers 5.x names the block the layer's `mlp` (its fused experts: --experts eager)
        setattr(self, "mlp" if EXPERTS[0] == "eager" else "block_sparse_moe",
                (FusedSparseMoeBlock if EXPERTS[0] == "eager" else SparseMoeBlock)(
                    cfg["hidden_size"], cfg["intermediate_size"], cfg["num_local_experts"],
                    cfg["num_experts_per_tok"]))
        self.input_layernorm = LlamaRMSNorm(cfg["hidden_size"], eps)
        self.post_attention_layernorm = LlamaRMSNorm(cfg["hidden_size"], eps)
        self.keep_router = bool(cfg.get("output_router_logits", False))

    def forward(self, hidden_states, attention_mask, position_embeddings):
        residual = hidden_states
        hidden_states = self.input_layernorm(hidden_states)
        hidden_states = self.self_attn(hidden_states, position_embeddings, attention_mask)
        hidden_states = residual + hidden_states
        residual = hidden_states
        hidden_states = self.post_attention_layernorm(hidden_states)
        blk = self.mlp if EXPERTS[0] == "eager" else self.block_sparse_moe
        hidden_states, router_logits, selected = blk(hidden_states)
        counts = [0] * blk.num_experts
        for e in selected.view(-1).tolist():  # Python's count: no tensor allocated
            counts[e] += 1
        ROUTING.append(counts)
        if self.keep_router:  # _can_record_outputs' OutputRecorder(MixtralSparseMoeBlock, index=1)
            ROUTER_LOGITS.append(router_logits)
        hidden_states = residual + hidden_states
        return hidden_states


FAMILY_ATTENTION["mixtral"] = LlamaAttention
FAMILY_LAYER = {"mixtral": MixtralDecoderLayer}


# Qwen2-MoE and Qwen3-MoE (4.x layouts: modeling_qwen2_moe.py at 00a3f938,
# modeling_qwen3_moe.py at 00d4b3d2): Qwen2MoeDecoderLayer and
# Qwen3MoeDecoderLayer register self_attn (Qwen2's attention, q, k, v
# biased; Qwen3's, q_norm and k_norm), mlp (tests/moe_torch.py's
# Qwen2MoeSparseMoeBlock, Qwen3MoeSparseMoeBlock), input_layernorm,
# post_attention_layernorm, and run MixtralDecoderLayer's forward with mlp
# in block_sparse_moe's place (every block sparse: decoder_sparse_step 1,
# no mlp_only_layers, as zerosim requires).
class QwenMoeDecoderLayer(MixtralDecoderLayer):
    block_sparse_moe = property(lambda self: self.mlp)  # the forward's name for the block

    def __init__(self, cfg, sdpa, attn=None):
        nn.Module.__init__(self)
        from moe_torch import Qwen2MoeSparseMoeBlock, Qwen3MoeSparseMoeBlock
        eps, d = cfg.get("rms_norm_eps", 1e-6), cfg["hidden_size"]
        self.self_attn = (attn or LlamaAttention)(cfg, sdpa)
        args = (d, cfg["moe_intermediate_size"], cfg["num_experts"], cfg["num_experts_per_tok"])
        norm = bool(cfg.get("norm_topk_prob", False))  # Qwen2MoeConfig's and Qwen3MoeConfig's default
        if cfg["model_type"] == "qwen2_moe":
            self.mlp = Qwen2MoeSparseMoeBlock(*args, cfg["shared_expert_intermediate_size"], norm)
        else:
            self.mlp = Qwen3MoeSparseMoeBlock(*args, norm)
        self.input_layernorm = LlamaRMSNorm(d, eps)
        self.post_attention_layernorm = LlamaRMSNorm(d, eps)
        self.keep_router = bool(cfg.get("output_router_logits", False))


FAMILY_ATTENTION["qwen2_moe"] = Qwen2Attention
FAMILY_ATTENTION["qwen3_moe"] = Qwen3Attention
FAMILY_LAYER["qwen2_moe"] = FAMILY_LAYER["qwen3_moe"] = QwenMoeDecoderLayer


def load_balancing_loss_func(gate_logits, num_experts, top_k):
    """modeling_mixtral.py at 00d4b3d2, load_balancing_loss_func (531-610)
    with attention_mask None (no padding: the branch at 573-578);
    modeling_qwen2_moe.py's and modeling_qwen3_moe.py's are its copies."""
    compute_device = gate_logits[0].device
    concatenated_gate_logits = torch.cat([layer_gate.to(compute_device) for layer_gate in gate_logits], dim=0)
    routing_weights = torch.nn.functional.softmax(concatenated_gate_logits, dim=-1)
    _, selected_experts = torch.topk(routing_weights, top_k, dim=-1)
    expert_mask = torch.nn.functional.one_hot(selected_experts, num_experts)
    tokens_per_expert = torch.mean(expert_mask.float(), dim=0)
    router_prob_per_expert = torch.mean(routing_weights, dim=0)
    overall_loss = torch.sum(tokens_per_expert * router_prob_per_expert.unsqueeze(0))
    return overall_loss * num_experts


def moe_aux_outputs(cfg, loss, logits):
    """MixtralForCausalLM.forward's tail with output_router_logits true
    (modeling_mixtral.py at 00d4b3d2 702-711; Qwen2MoeForCausalLM's and
    Qwen3MoeForCausalLM's the same): the loss of every layer's
    router_logits (the model's output, recorded by the layers), `loss +=
    router_aux_loss_coef * aux_loss`; the output as
    MoeCausalLMOutputWithPast's tuple: loss, aux_loss, logits,
    router_logits, all held by the loop as the logits are."""
    router_logits = tuple(ROUTER_LOGITS)
    ROUTER_LOGITS.clear()
    qwen = cfg["model_type"] != "mixtral"
    aux_loss = load_balancing_loss_func(router_logits, cfg["num_experts" if qwen else "num_local_experts"],
                                        cfg["num_experts_per_tok"])
    loss += cfg.get("router_aux_loss_coef", 0.001) * aux_loss.to(loss.device)
    return loss, aux_loss, logits, router_logits


LOSS = [for_causal_lm_loss]


def gpt2_config(raw, dropout):
    """GPT2Config's defaults (configuration_gpt2.py): n_positions 1024,
    n_embd 768, n_layer 12, n_head 12, dropouts 0.1, eps 1e-5, tied."""
    c = dict(n_positions=1024, n_embd=768, n_layer=12, n_head=12, vocab_size=50257, resid_pdrop=0.1,
             embd_pdrop=0.1, attn_pdrop=0.1, layer_norm_epsilon=1e-5, n_inner=None)
    c.update({k: v for k, v in raw.items() if v is not None})
    if not dropout:
        c.update(resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
    return c


# ---------------------------------------------------------------------------
# The replay


def memory_events(prof):
    return [e.nbytes() for e in prof.profiler.kineto_results.events() if e.name() == "[memory]"]


def replay(sizes):
    """The live bytes after every event, marks taken out: a list of
    (live, label-or-None) where a label stands at the mark's place."""
    out, live, skip = [], 0, 0
    for n in sizes:
        if skip and n == -skip:
            skip = 0
            continue
        if n >= MARK_BASE and n % 2 == 1:
            skip = n
            out.append((live, MARKS[(n - MARK_BASE - 1) // 2]))
            continue
        live += n
        out.append((live, None))
    return out


def analyse_step(stream, step):
    """The step's events: from its 'step:N' mark to the next step's."""
    start = next(i for i, (_, l) in enumerate(stream) if l == f"step:{step}")
    end = next((i for i, (_, l) in enumerate(stream) if l == f"step:{step + 1}"), len(stream))
    seg = stream[start:end]
    peak, where, phase = -1, None, None
    cur_phase, cur_mark = None, None
    boundaries = []
    for live, label in seg:
        if label is not None:
            if label.startswith("phase:"):
                cur_phase = label[6:]
            cur_mark = label
            boundaries.append((label, live))
            continue
        if live > peak:
            peak, phase, where = live, cur_phase, cur_mark
    return dict(start_bytes=seg[0][0], peak=peak, phase=phase, after=where, boundaries=boundaries)


# ---------------------------------------------------------------------------
# The attribution tracker


class Tracker:
    """Names op outputs by (phase, unit, op) and follows their lives."""

    def __init__(self):
        self.live = {}
        self.ctx = ["-", "-"]  # phase, unit
        self.op_index = 0
        self.mark_ops = False
        self.snap_at = None
        self.snapshot = None
        self.seen_op = None
        self.ops = None  # --trace: every op's (name, phase, unit), by index

    def release(self, p):
        e = self.live.get(p)
        if e is not None:
            e[1] -= 1
            if e[1] <= 0:
                del self.live[p]

    def mode(self):
        from torch.utils._python_dispatch import TorchDispatchMode
        from torch.utils._pytree import tree_flatten
        tr = self

        class Mode(TorchDispatchMode):
            def __torch_dispatch__(self, func, types, args=(), kwargs=None):
                k = tr.op_index
                tr.op_index += 1
                if tr.snap_at is not None and k == tr.snap_at:
                    tr.snapshot = {p: e[0] for p, e in tr.live.items()}
                    tr.seen_op = (str(func).replace("aten.", ""), tr.ctx[0], tr.ctx[1])
                    tr.snap_grads = tr.grad_ptrs()
                if tr.ops is not None:
                    tr.ops.append((str(func).replace("aten.", ""), tr.ctx[0], tr.ctx[1]))
                if tr.mark_ops:
                    mark(f"op:{k}")
                out = func(*args, **(kwargs or {}))
                for t in tree_flatten(out)[0]:
                    if isinstance(t, torch.Tensor):
                        s = _st(t)
                        p = s.data_ptr()
                        if not p:
                            continue
                        # a storage lives while any tensor on it does:
                        # every view is an op output too, and counted
                        e = tr.live.get(p)
                        if e is None:
                            tr.live[p] = e = [(tr.ctx[0], tr.ctx[1], str(func).replace("aten.", ""),
                                               s.nbytes(), tuple(t.shape), str(t.dtype).replace("torch.", "")), 0]
                        e[1] += 1
                        weakref.finalize(t, tr.release, p)
                return out
        return Mode()


TRACK = Tracker()


def set_ctx(phase=None, unit=None):
    if phase is not None:
        TRACK.ctx[0] = phase
    if unit is not None:
        TRACK.ctx[1] = unit


STACK = []  # the forward's enclosing units


def install_hooks(model, units):
    """Forward marks on every submodule; backward marks on each unit's
    output (its backward starts) and on its input (it has ended)."""
    named = dict(model.named_modules())

    def pre(name):
        def f(mod, inp):
            mark(f"fwd:{name}:start")
            STACK.append(TRACK.ctx[1])
            set_ctx(unit=name)
            if name in units and not RECOMPUTING[0]:  # the rerun's input: its detached copy
                for t in inp:
                    if isinstance(t, torch.Tensor) and t.requires_grad:
                        t.register_hook(lambda g, n=name: (mark(f"bwd:{n}:end"), None)[1])
        return f

    def post(name):
        def f(mod, inp, out):
            mark(f"fwd:{name}:end")
            set_ctx(unit=STACK.pop() if STACK else "-")
            if name in units:
                outs = out if isinstance(out, tuple) else (out,)
                for t in outs:
                    if isinstance(t, torch.Tensor) and t.requires_grad:
                        t.register_hook(lambda g, n=name: (mark(f"bwd:{n}:start"), set_ctx(unit=n), None)[2])
        return f

    for name, mod in named.items():
        if name == "":
            continue
        mod.register_forward_pre_hook(pre(name))
        mod.register_forward_hook(post(name))


# ---------------------------------------------------------------------------


def build(a):
    # ft_torch.py builds through here too, with no --recompute of its own; a spawned rank imports the
    # module afresh, so the flag is set here as well as in main()
    RECOMPUTE[0] = getattr(a, "recompute", "none") == "full"
    USE_REENTRANT[0] = getattr(a, "recompute_impl", "reentrant") == "reentrant"
    EXPERTS[0] = getattr(a, "experts", "modulelist")
    raw = json.load(open(a.model))
    family = raw.get("model_type")
    dropout = a.dropout == "config"
    if family == "gpt2":
        cfg = gpt2_config(raw, dropout)
        tied = raw.get("tie_word_embeddings", True) if a.tied is None else a.tied
    elif family == "gemma2":
        # Gemma2Config's defaults (configuration_gemma2.py at 008e5743):
        # soft-caps 50 and 30, tied, pad_token_id 0
        cfg = dict(head_dim=256, query_pre_attn_scalar=256, sliding_window=4096, pad_token_id=0,
                   rms_norm_eps=1e-6, rope_theta=10000.0, attention_dropout=0.0,
                   attn_logit_softcapping=50.0, final_logit_softcapping=30.0)
        cfg.update(raw)
        if not dropout:
            cfg["attention_dropout"] = 0.0
        tied = raw.get("tie_word_embeddings", True) if a.tied is None else a.tied
    elif family == "gemma3_text":
        # Gemma3TextConfig's defaults (configuration_gemma3.py at 008f5c8c,
        # as zerosim's util/model.c reads them): no soft-caps, tied,
        # pad_token_id 0, sliding_window_pattern 6, rope_local_base_freq 1e4
        cfg = dict(head_dim=256, query_pre_attn_scalar=256, sliding_window=4096, pad_token_id=0,
                   rms_norm_eps=1e-6, rope_theta=1e6, rope_local_base_freq=10000.0, sliding_window_pattern=6,
                   attention_dropout=0.0, attn_logit_softcapping=None, final_logit_softcapping=None)
        cfg.update(raw)
        if not dropout:
            cfg["attention_dropout"] = 0.0
        tied = raw.get("tie_word_embeddings", True) if a.tied is None else a.tied
    elif family in FAMILY_ATTENTION:
        cfg = dict(raw)
        if not dropout:
            cfg["attention_dropout"] = 0.0
            if family == "phi3":
                cfg["resid_pdrop"] = 0.0
        tied = raw.get("tie_word_embeddings", False) if a.tied is None else a.tied
    else:
        sys.exit(f"hf_torch: model_type {family!r} is not gpt2, {', '.join(FAMILY_ATTENTION)}, gemma2 or gemma3_text")
    return raw, family, cfg, tied


def freeze(a, model, family, cfg):
    """--freeze SPEC: requires_grad False for the parameters whose Hugging
    Face names SPEC matches (tests/ft_torch.py's syntax and matcher, one
    for both references and zerosim's util/freeze.c)."""
    import ft_torch
    for n, p in model.named_parameters():
        if ft_torch.freeze_matches(a.freeze, family, cfg, ft_torch.hf_name(family, n)):
            p.requires_grad_(False)


def scaler_update(scaler, opt):
    """scaler.update(); under FSDP's ShardedGradScaler its found_inf
    tensors are all-reduced (async_op=True, then work.wait():
    sharded_grad_scaler.py v2.6.0 255-276), and gloo's worker thread keeps
    each in its work a moment past wait() (ProcessGroupGloo::runLoop
    resets workInProgress_ after it has signalled the waiter). Where that
    thread drops the last reference, the free happens on a thread the
    profiler does not record, and the replay keeps 4 B for good (seen
    under load: between steps 716,724 B, then 716,728, on a run whose
    memory was 716,724 throughout). So the found_inf tensors are held here
    through update() until gloo's thread has let each go (its TensorImpl
    ours alone), and let go on this thread: the same frees, at update()'s
    end as when the worker is quick, every one recorded."""
    held = []
    if type(scaler).__name__ == "ShardedGradScaler":
        held = list(scaler._per_optimizer_states[id(opt)]["found_inf_per_device"].values())
    scaler.update()
    import time
    end = time.monotonic() + 60
    while any(t._use_count() > 1 for t in held):
        if time.monotonic() > end:
            raise RuntimeError("gloo's worker kept ShardedGradScaler's found_inf past 60 s")
        time.sleep(0.001)
    del held


def one_step(a, model, opt, input_ids, labels, zero_none, step, losses, scaler=None):
    mark(f"step:{step}")
    mark("phase:forward")
    set_ctx("forward", "-")
    if a.amp != "none":
        with torch.autocast("cpu", dtype=torch.bfloat16 if a.amp == "bf16" else torch.float16):
            outputs = model(input_ids, labels)
    else:
        outputs = model(input_ids, labels)
    loss = outputs[0]
    if not a.keep_logits:
        del outputs  # Trainer.compute_loss returns the loss alone
    mark("phase:backward")
    set_ctx("backward", "loss")
    IN_BACKWARD[0] = True
    try:
        if scaler is not None:
            # float16 autocast's recipe (torch/amp/grad_scaler.py, 2.6:
            # GradScaler("cpu"), the CPU's since 2.3): the scaled loss's
            # backward, then step() (unscale_, found_inf's check) and
            # update()
            scaler.scale(loss).backward()
        else:
            loss.backward()
    finally:
        IN_BACKWARD[0] = False
    mark("phase:optimizer")
    set_ctx("optimizer", "optimizer")
    if scaler is not None:
        scaler.step(opt)
        scaler_update(scaler, opt)
    else:
        opt.step()
    mark("phase:zero_grad")
    set_ctx("zero_grad", "zero_grad")
    opt.zero_grad(set_to_none=zero_none)
    losses.append(float(loss))
    del loss
    outputs = None
    mark("phase:between")
    mark(f"step:{step + 1}")


def run(a):
    # One intra-op thread: the CPU's LayerNorm backward sizes its scratch by
    # the thread count (2 x threads x d floats), and Debian 12's 1.13 runs
    # one where 2.6 takes every core; one makes the bytes the machine's
    # core count's no more.
    torch.set_num_threads(1)
    # bf16 autocast on a CPU with AVX-512 (bf16) runs matmuls through
    # oneDNN (1.13 and 2.6: use_mkldnn_bf16_matmul), whose primitives take a
    # scratchpad from PyTorch's allocator for the kernel's duration, sized
    # by the ISA oneDNN picks on that machine; --onednn 0 (the default under
    # --amp) turns it off, so that every machine runs PyTorch's own cpublas
    # kernels, which take none (docs/schedule.md, "Autocast").
    if a.amp != "none" and not a.onednn:
        torch.backends.mkldnn.enabled = False
    torch.manual_seed(0)
    raw, family, cfg, tied = build(a)
    zero_none = a.zero_grad == "none" if a.zero_grad else TV >= (2, 0)
    foreach = a.optimizer_impl == "foreach"
    sdpa = a.attn == "sdpa"
    if sdpa and family == "gemma2":
        # sdpa_attention_forward (integrations/sdpa_attention.py) takes no
        # softcap, and Gemma2ForCausalLM.forward warns to train with eager
        sys.exit(f"hf_torch: --attn sdpa: {family} is compared under eager attention only")
    if sdpa and family == "gemma3_text" and a.seq >= cfg["sliding_window"]:
        # masking_utils' sdpa_mask skips the sliding mask only while
        # kv_length < sliding_window; past it SDPA gets a bool mask
        sys.exit("hf_torch: --attn sdpa: gemma3_text with --seq reaching sliding_window is not compared")
    if a.amp == "fp16" and (TV < (2, 3) or a.optimizer_impl == "fused"):
        # 1.13's CPU autocast takes bfloat16 only; fused Adam takes the
        # scaler's grad_scale and found_inf itself (_step_supports_amp_scaling)
        sys.exit("hf_torch: --amp fp16: compared on torch 2.3 or later, single or foreach Adam")
    if sdpa and not hasattr(F, "scaled_dot_product_attention"):
        sys.exit(f"hf_torch: --attn sdpa: torch {torch.__version__} has no scaled_dot_product_attention")
    V = cfg["vocab_size"]
    losses = []
    # Session 1: the model built and the clean steps, every byte from the start.
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        mark("build")
        if family == "gpt2":
            model = GPT2LMHeadModel(cfg, tied, a.mask, sdpa)
        elif family == "gemma2":
            model = Gemma2ForCausalLM(cfg, tied, sdpa)
        elif family == "gemma3_text":
            model = Gemma3ForCausalLM(cfg, tied, sdpa)
        else:
            model = LlamaForCausalLM(cfg, tied, sdpa, FAMILY_ATTENTION[family])
        model.train()
        if a.freeze:
            freeze(a, model, family, cfg)
        input_require_grads(model)
        install_hooks(model, set(model.units))
        if a.ddp:
            model = ddp_wrap(a, model)
        if a.fsdp:
            model = fsdp_wrap(a, model)
        Opt = torch.optim.AdamW if a.optimizer == "adamw" else torch.optim.Adam
        kw = dict(fused=True) if a.optimizer_impl == "fused" else dict(foreach=foreach)
        # the trainable parameters (all but --freeze's), as transformers'
        # Trainer.create_optimizer filters them (p.requires_grad)
        params = [p for p in model.parameters() if p.requires_grad]
        if a.zero1:
            # torch's zero1: ZeroRedundancyOptimizer over DDP at its defaults
            # (parameters_as_bucket_view False, overlap_with_ddp False), the
            # local optimizer Adam with the same settings, on the default
            # (gloo) group: its broadcasts are in place on param.data
            # (zero_redundancy_optimizer.py _broadcast_params_from_rank) and
            # free nothing, so no gloo timing reaches the bytes (--freeze
            # with --zero1 is refused below: not compared yet)
            from torch.distributed.optim import ZeroRedundancyOptimizer
            opt = ZeroRedundancyOptimizer(model.parameters(), optimizer_class=Opt, lr=1e-3, **kw)
        elif a.optimizer_impl == "fused":
            # torch.optim.Adam(fused=True): CUDA only in 1.13 (adam.py's
            # check), the CPU too from 2.4 (2.6's _fused_adam_ CPU kernel)
            opt = Opt(params, lr=1e-3, **kw)
        else:
            opt = Opt(params, lr=1e-3, **kw)
        g = torch.Generator().manual_seed(1 + RANK[0])  # each rank its own batch
        input_ids = torch.randint(0, V, (a.batch, a.seq), generator=g)
        labels = input_ids.clone()
        scaler = None
        if a.amp == "fp16" and a.fsdp:
            # FSDP's own (torch/distributed/fsdp/sharded_grad_scaler.py):
            # found_inf all-reduced, the CPU's scale update in Python
            from torch.distributed.fsdp.sharded_grad_scaler import ShardedGradScaler
            scaler = ShardedGradScaler("cpu")
        elif a.amp == "fp16":
            scaler = torch.amp.GradScaler("cpu")
        for step in range(1, a.steps + 1):
            one_step(a, model, opt, input_ids, labels, zero_none, step, losses, scaler)
    stream = replay(memory_events(prof))
    steps = {s: analyse_step(stream, s) for s in range(1, a.steps + 1)}
    base = stream[-1][0]
    out = dict(model=model, opt=opt, cfg=cfg, family=family, tied=tied, zero_none=zero_none, foreach=foreach,
               sdpa=sdpa, steps=steps, losses=losses, input_ids=input_ids, labels=labels, base=base)
    if a.trace:
        # One more step, every op marked: each allocation and free of the
        # step with the op it falls in (or after), its phase and unit.
        s2 = a.steps + 1
        TRACK.op_index, TRACK.mark_ops, TRACK.ops = 0, True, []
        with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof3:
            with TRACK.mode():
                one_step(a, model, opt, input_ids, labels, zero_none, s2, losses, scaler)
        TRACK.mark_ops = False
        lines, live, skip, cur = [], base, 0, None
        for n in memory_events(prof3):
            if skip and n == -skip:
                skip = 0
                continue
            if n >= MARK_BASE and n % 2 == 1:
                skip = n
                l = MARKS[(n - MARK_BASE - 1) // 2]
                if l.startswith("op:"):
                    cur = TRACK.ops[int(l[3:])]
                else:
                    lines.append(f"mark {l} {live}")
                continue
            live += n
            o = cur or ("-", "-", "-")
            lines.append(f"{'alloc' if n > 0 else 'free'} {abs(n)} {o[0]} {o[1]} {o[2]} {live}")
        TRACK.ops = None
        # the clean last step's own sizes, to check the traced one against
        st = next(i for i, (_, l) in enumerate(stream) if l == f"step:{a.steps}")
        clean = [stream[i][0] - stream[i - 1][0] for i in range(st + 1, len(stream)) if stream[i][1] is None]
        # under --ddp N > 1 each rank its own file (FILE.rankK)
        trace = a.trace + (f".rank{RANK[0]}" if a.ddp > 1 else "")
        with open(trace + ".clean", "w") as f:
            f.write("\n".join(str(x) for x in clean) + "\n")
        # and the first step's, from its mark to the second's (FILE.step1:
        # zerosim's first step's own list, tests/ag_events step=1)
        s1 = next(i for i, (_, l) in enumerate(stream) if l == "step:1")
        s2 = next((i for i, (_, l) in enumerate(stream) if l == "step:2"), len(stream))
        with open(trace + ".step1", "w") as f:
            f.write("\n".join(str(stream[i][0] - stream[i - 1][0]) for i in range(s1 + 1, s2)
                              if stream[i][1] is None) + "\n")
        # and the second's (FILE.step2: DDP's, whose forward rebuilds the
        # buckets; tests/ag_events step=2)
        s3 = next((i for i, (_, l) in enumerate(stream) if l == "step:3"), len(stream))
        with open(trace + ".step2", "w") as f:
            f.write("\n".join(str(stream[i][0] - stream[i - 1][0]) for i in range(s2 + 1, s3)
                              if stream[i][1] is None) + "\n")
        with open(trace, "w") as f:
            f.write("\n".join(lines) + "\n")
    if a.no_attribution:
        return out
    # Session 2: one more step under the tracker, every op marked: the op
    # inside which the step peaks.
    s2 = a.steps + 1
    TRACK.op_index, TRACK.mark_ops = 0, True
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof2:
        with TRACK.mode():
            one_step(a, model, opt, input_ids, labels, zero_none, s2, losses)
    TRACK.mark_ops = False
    st2 = [(live + base, l) for live, l in replay(memory_events(prof2))]
    peak, op = -1, None
    for live, l in st2:
        if l is not None and l.startswith("op:"):
            cur = int(l[3:])
            continue
        if l is None and live > peak:
            peak, op = live, cur
    marked = analyse_step(st2, s2)
    # Step 3 of the attribution: the tracked live set just before that op.
    TRACK.op_index, TRACK.snap_at = 0, op
    TRACK.grad_ptrs = lambda: {_st(p.grad).data_ptr() for p in model.parameters() if p.grad is not None}
    with TRACK.mode():
        one_step(a, model, opt, input_ids, labels, zero_none, s2 + 1, losses)
    TRACK.snap_at = None
    out.update(marked_peak=peak, marked_step=marked, peak_op=op, snapshot=TRACK.snapshot, seen_op=TRACK.seen_op,
               snap_grads=TRACK.snap_grads)
    return out


# ---------------------------------------------------------------------------
# DDP N >= 1 over gloo (--ddp N): N processes, rank 0's allocator recorded

RANK = [0]


PIN = []  # the pinning collective's tensor (made before the profiled session)
COLLECTIVES = []  # (kind, marks made before it) of every collective DDP issued through ddp_group


def ddp_group():
    """DDP's process group: gloo, pinned. Every collective DDP and its
    reducer issue through it (the construction's and every forward's
    broadcasts, sync_bucket_indices' broadcasts when the buckets are
    rebuilt, the buckets' all-reduces) is run on a gloo group of one worker
    thread (ProcessGroupGloo._Options._threads; the default is 2), waited,
    and followed by one more collective of that group, waited too, before
    the call returns a completed Work (dist._create_work_from_future).

    Why: a tensor a collective takes is freed when its last reference goes,
    and gloo's worker thread holds one (ProcessGroupGloo::runLoop's
    workInProgress_[i], reset after the work has run, after wait() has
    returned on the caller's thread). Where DDP lets go of the tensor right
    after waiting -- comm.cpp's BroadcastWork (the flat copy of the buffers
    broadcast at every forward: 8 bytes for GPT-2's two masked_bias) and
    reducer.cpp's sync_bucket_indices (the int32 bucket sizes and indices
    broadcast at the rebuild, step 2) -- the free happens on the worker
    thread whenever it is late, where the profiler records nothing: the
    replay then keeps the bytes live (seen here: between steps 4 bytes
    over, from step 2 on, once in a few runs on a loaded machine). With
    the pin the worker has let go before DDP does, and every free is the
    caller's, right after the wait, as on a GPU where DDP waits on the
    collective's stream and frees on its own thread. The bytes DDP
    allocates are DDP's: its own code runs unchanged."""
    import datetime
    import torch.distributed as dist
    import torch._C._distributed_c10d as c10d
    o = dist.ProcessGroupGloo._Options()
    o._threads = 1
    o._timeout = datetime.timedelta(seconds=600)
    o._devices = [dist.ProcessGroupGloo.create_device(interface=os.environ.get("GLOO_SOCKET_IFNAME", "lo"))]
    store = dist.PrefixStore("zs-ddp", dist.distributed_c10d._get_default_store())
    inner = dist.ProcessGroupGloo(store, dist.get_rank(), dist.get_world_size(), o)

    def done(result):
        fut = torch.futures.Future()
        fut.set_result(result)
        return c10d._create_work_from_future(fut)

    class Pinned(c10d.ProcessGroup):
        def __init__(self):
            super().__init__(dist.get_rank(), dist.get_world_size())

        def getBackendName(self):
            return "gloo"

        def _pin(self, work, result):
            work.wait()
            inner.allreduce([PIN[0]]).wait()  # one worker: the work above has been let go
            return done(result)

        def broadcast(self, tensors, opts=None):
            return self._pin(inner.broadcast(tensors, opts) if opts is not None else inner.broadcast(tensors),
                             tensors)

        def allreduce(self, tensors, opts=None):
            COLLECTIVES.append(("allreduce", len(MARKS)))  # DDP's own (the pin's are not counted)
            return self._pin(inner.allreduce(tensors, opts) if opts is not None else inner.allreduce(tensors),
                             tensors)

        def allgather(self, outputs, inputs, opts=None):
            return self._pin(inner.allgather(outputs, inputs), outputs)

        def barrier(self, opts=None):
            return self._pin(inner.barrier(), [])

    return Pinned()


def ddp_wrap(a, model):
    """torch.nn.parallel.DistributedDataParallel at the release's defaults
    (bucket_cap_mb 25, broadcast_buffers True, gradient_as_bucket_view
    False, find_unused_parameters False), made inside the profiled session
    as a training script makes it: after the model, before the optimizer,
    over the pinned gloo group (ddp_group)."""
    from torch.nn.parallel import DistributedDataParallel as DDP
    # gloo broadcasts no bool tensor (1.13 and 2.6: "Invalid scalar type"),
    # and GPT-2's causal `bias` buffers are bool: they are left out of
    # DDP's broadcasts by DDP's own switch for that (NCCL, on a GPU, takes
    # them; transformers 5.x has no such buffer).
    skip = [n for n, b in model.named_buffers() if b.dtype == torch.bool]
    if skip:
        DDP._set_params_and_buffers_to_ignore_for_model(model, skip)
    pg = ddp_group()
    # DDP's construction log (Logger.set_construction_data_and_log: strings,
    # no tensor) crashes 1.13 on a process group written in Python (SIGSEGV
    # in 2 of 8 runs here, nearly always in 30 constructions in a row): it
    # is left out, the rest of the Logger (the reducer's) kept.
    import torch.nn.parallel.distributed as tnd

    class QuietLogger(tnd.dist.Logger):
        def set_construction_data_and_log(self, *args, **kwargs):
            pass
    tnd.dist.Logger = QuietLogger
    mark("ddp:construct")
    # bucket_cap_mb given only when asked: 2.x's first bucket is 1 MiB
    # (_DEFAULT_FIRST_BUCKET_BYTES) only while it is left at None (as
    # tests/ft_torch.py leaves it without --bucket-cap-mb)
    cap = getattr(a, "bucket_cap_mb", None)
    kw = {} if cap is None else dict(bucket_cap_mb=cap)
    # find_unused_parameters=True where asked (--ddp-find-unused): what
    # transformers' Trainer passes for a model trained without gradient
    # checkpointing (Trainer._wrap_model); an importer's namespace
    # without the option: the default, False
    if getattr(a, "ddp_find_unused", False):
        kw["find_unused_parameters"] = True
    m = DDP(model, process_group=pg, **kw)
    m.units = model.units
    mark("ddp:constructed")
    return m


def ddp_worker(rank, a, store):
    import torch.distributed as dist
    RANK[0] = rank
    dist.init_process_group("gloo", init_method="file://" + store, rank=rank, world_size=a.ddp)
    PIN.append(torch.zeros(1))
    d = report(a)
    dist.barrier()
    # every rank's figures where they differ (zero1's shards; a mixture's
    # ranks, each routing its own batch): rank 0's JSON holds them all in "ranks"
    if a.zero1 or "routing" in d:
        every = [None] * a.ddp
        keys = ("between_steps", "peak", "peak_phase", "boundaries", "zero1", "losses", "step_peaks")
        if "routing" in d:
            keys = ("between_steps", "peak", "step_peaks", "setup_peak", "boundaries", "losses", "routing")
        dist.all_gather_object(every, {k: d[k] for k in keys if k in d})
        d["ranks"] = every
    if rank == 0:
        emit(a, d)
    finish(rank, store)


def finish(rank, store):
    """The end of a gloo worker: every rank's work is done (rank 0 has
    written its JSON) once all pass the last barrier; each leaves a marker
    beside the store, then destroys the process group and leaves with
    os._exit, skipping the interpreter's teardown. PyTorch 2.6's gloo once
    aborted a rank after its work ("terminate called without an active
    exception", CI of 768ee00, zero1-2-llama-zeros-foreach): spawn() below
    takes an abort of a rank that left its marker as teardown, names it on
    stderr and keeps the result; an abort before the marker fails the run."""
    import torch.distributed as dist
    dist.barrier()
    open("%s.done%d" % (store, rank), "w").close()
    dist.destroy_process_group()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def spawn(worker, n, args):
    """mp.spawn(worker) over n ranks, worker(rank, *args(store)), with a
    file rendezvous at store in a temporary directory (hf_torch.py's DDP
    and FSDP, ft_torch.py's and fsdp_torch.py's workers); a rank killed by
    a signal after finish()'s marker is PyTorch's teardown, not the
    measurement: named on stderr, not fatal."""
    import tempfile
    import torch.multiprocessing as mp
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")  # the loopback: a CI machine may have no other
    os.environ.setdefault("USE_LIBUV", "0")  # 2.6's TCPStore; the file rendezvous needs neither
    with tempfile.TemporaryDirectory() as d:
        store = os.path.join(d, "store")
        try:
            mp.spawn(worker, args=args(store), nprocs=n)
        except mp.ProcessExitedException as e:
            if not all(os.path.exists("%s.done%d" % (store, r)) for r in range(n)):
                raise
            sys.stderr.write("hf_torch: rank %d ended by signal %s after its work was done "
                             "(gloo's teardown); the result stands\n" % (e.error_index, e.signal_name))


# ---------------------------------------------------------------------------
# FSDP N >= 2 over gloo (--fsdp N): FullyShardedDataParallel FULL_SHARD, one
# unit per transformer block and the root, N processes, rank 0 recorded


def ddp_buckets(model):
    """The buckets DDP's reducer holds, bytes each in its order: after step 2's forward those it
    rebuilt (_rebuild_buckets, before that forward, in the order step 1's gradients were ready).
    Read from the reducer itself (_get_zeros_like_grad_buckets: GradBuckets, each a zero buffer the size of its
    bucket, made after the profiled steps), not from the logging data, whose rebuilt_bucket_sizes
    2.6 records at the third forward (Logger::set_runtime_stats_and_log before that forward's
    rebuild), so a run of 2 steps has none there."""
    return [b.buffer().numel() * b.buffer().element_size() for b in model.reducer._get_zeros_like_grad_buckets()]


def fsdp_strategy(a):
    """--fsdp-strategy: full_shard (the default; zerosim's zero3) or
    shard_grad_op (zero2); an importer's namespace without it: full_shard."""
    return getattr(a, "fsdp_strategy", "full_shard")


def fsdp_wrap(a, model):
    """torch.distributed.fsdp.FullyShardedDataParallel as 1.13 runs it on
    the CPU over gloo, with tests/fsdp_torch.py's shims (imported from
    there: the CUDA stream and event calls no-ops, the compute device the
    CPU, _all_gather_base and _reduce_scatter_base as point-to-point
    exchanges that allocate nothing while a step runs: the reduce-scatter
    receives into a buffer made before the profiled session). FULL_SHARD
    or, --fsdp-strategy shard_grad_op, SHARD_GRAD_OP (fsdp_strategy),
    transformer_auto_wrap_policy on the block class (GPT2Block,
    LlamaDecoderLayer): one unit per block, the root holding the rest;
    backward_prefetch None (1.13's default, fully_sharded_data_parallel.py
    980; given here) or, --fsdp-prefetch backward-pre, BACKWARD_PRE (2.6's
    default, 420), every other argument its default (use_orig_params False
    but where a.fsdp_orig_params, tests/ft_torch.py --fsdp-orig-params,
    limit_all_gathers, forward_prefetch False). Under 2.x device_id is the
    CPU (the device handle torch.cpu: its streams and events no-ops).
    Made inside the profiled session after the model, before the
    optimizer, as a training script makes it."""
    import fsdp_torch  # noqa: F401  (its shims, applied on import)
    from torch.distributed.fsdp import FullyShardedDataParallel as FSDP, ShardingStrategy
    from torch.distributed.fsdp.wrap import transformer_auto_wrap_policy
    import functools
    layers = model.h if hasattr(model, "h") else model.layers
    blocks = {type(layers[0])}
    if RECOMPUTE[0]:
        for block in layers:
            checkpoint_inside(block)
    policy = functools.partial(transformer_auto_wrap_policy, transformer_layer_cls=blocks)
    mark("fsdp:construct")
    from torch.distributed.fsdp import BackwardPrefetch
    kw = dict(device_id=torch.device("cpu")) if TV >= (2, 0) else {}
    if getattr(a, "fsdp_orig_params", False):  # ft_torch.py --fsdp-orig-params (2.x: 1.13 has none)
        kw["use_orig_params"] = True
    prefetch = BackwardPrefetch.BACKWARD_PRE if getattr(a, "fsdp_prefetch", "none") == "backward-pre" else None
    strategy = getattr(ShardingStrategy, fsdp_strategy(a).upper())
    m = FSDP(model, sharding_strategy=strategy, auto_wrap_policy=policy, backward_prefetch=prefetch, **kw)
    m.units = model.units
    mark("fsdp:constructed")
    return m


def fsdp_worker(rank, a, store):
    import torch.distributed as dist
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import fsdp_torch
    RANK[0] = rank
    dist.init_process_group("gloo", init_method="file://" + store, rank=rank, world_size=a.fsdp)
    # the reduce-scatter's receive buffer (fsdp_torch.reduce_scatter_base),
    # as large as the largest shard can be: made before the profiled session
    fsdp_torch.RECV[torch.float32] = torch.empty(1 << 22)
    d = report(a)
    dist.barrier()
    # a mixture's ranks, each routing its own batch: every rank's figures
    # in rank 0's "ranks", as ddp_worker's
    if "routing" in d:
        every = [None] * a.fsdp
        keys = ("between_steps", "peak", "step_peaks", "setup_peak", "boundaries", "losses", "routing")
        dist.all_gather_object(every, {k: d[k] for k in keys if k in d})
        d["ranks"] = every
    if rank == 0:
        emit(a, d)
    finish(rank, store)


def storages(tensors):
    seen = {}
    for t in tensors:
        if t is not None and t.numel():
            seen[_st(t).data_ptr()] = _st(t).nbytes()
    return seen


def unit_kind(u):
    """h.3.mlp.act -> h.*.mlp.act: the blocks summed."""
    return ".".join("*" if x.isdigit() else x for x in u.split("."))


def attribute(r, a):
    """The peak's bytes by cause: the persistent tensors, the tracked op
    outputs alive just before the peak's op (grouped by phase, unit, op and
    shape over the blocks), and what the peak's op makes inside itself."""
    model, opt = r["model"], r["opt"]
    opt = getattr(opt, "optim", opt)  # ZeroRedundancyOptimizer: the local Adam's
    params = storages(model.parameters())
    m = storages(opt.state[p].get("exp_avg") for p in model.parameters() if p in opt.state)
    v = storages(opt.state[p].get("exp_avg_sq") for p in model.parameters() if p in opt.state)
    stp = storages(opt.state[p].get("step") for p in model.parameters()
                   if p in opt.state and torch.is_tensor(opt.state[p].get("step")))
    bufs = storages(model.buffers())
    inputs = storages([r["input_ids"], r["labels"]])
    snap, grads = r["snapshot"], r["snap_grads"]
    groups = {}
    tracked = 0
    named = {"tied head's held gradient (autograd's input buffer)": 0, "logits gradient (B*T*V)": 0,
             "gelu_new's outputs kept (op by op; a fused GELU keeps 1 of its 4)": 0, "RMSNorm's saved tensors (op by op)": 0,
             "repeat_kv's copies": 0, "causal mask": 0, "rope cos/sin": 0, "dropout noise": 0,
             "optimizer temporaries": 0}
    cfg = r["cfg"]
    V = cfg["vocab_size"]
    d = cfg.get("n_embd") or cfg.get("hidden_size")
    BTV = a.batch * a.seq * V * 4
    grad_in_snap = 0
    for ptr, (phase, unit, op, nbytes, shape, dtype) in snap.items():
        if ptr in params or ptr in m or ptr in v or ptr in stp or ptr in bufs or ptr in inputs:
            continue
        if ptr in grads:
            grad_in_snap += nbytes
            continue
        tracked += nbytes
        key = f"{phase} {unit_kind(unit)} {op} {list(shape)} {dtype}"
        g = groups.setdefault(key, [0, 0])
        g[0] += 1
        g[1] += nbytes
        u = unit_kind(unit)
        if phase == "backward" and u == "lm_head" and sorted(shape) == sorted([V, d]):
            named["tied head's held gradient (autograd's input buffer)"] += nbytes
        elif phase == "backward" and nbytes == BTV:
            named["logits gradient (B*T*V)"] += nbytes
        elif phase == "forward" and u.endswith("mlp.act"):
            named["gelu_new's outputs kept (op by op; a fused GELU keeps 1 of its 4)"] += nbytes
        elif phase == "forward" and (u.endswith("layernorm") or u == "norm"):
            named["RMSNorm's saved tensors (op by op)"] += nbytes
        elif phase == "forward" and u.endswith("self_attn") and op in ("_unsafe_view.default", "clone.default",
                                                                       "reshape.default") and \
                len(shape) == 4 and shape[1] == cfg.get("num_attention_heads") and \
                (cfg.get("num_key_value_heads") or shape[1]) != shape[1]:
            named["repeat_kv's copies"] += nbytes
        elif phase == "forward" and u in ("-", "") and len(shape) >= 2 and shape[-1] == shape[-2] == a.seq:
            named["causal mask"] += nbytes
        elif phase == "forward" and u == "rotary_emb":
            named["rope cos/sin"] += nbytes
        elif phase == "forward" and (op.startswith("bernoulli") or op.startswith("div_")):
            named["dropout noise"] += nbytes
        elif phase == "optimizer":
            named["optimizer temporaries"] += nbytes
    peak = r["marked_peak"]
    known = dict(params=sum(params.values()), grads=sum(v for p_, v in storages(
        [p.grad for p in model.parameters()]).items()) if not r["zero_none"] else grad_in_snap,
        adam_m=sum(m.values()), adam_v=sum(v.values()), adam_step=sum(stp.values()),
        buffers=sum(bufs.values()), inputs=sum(inputs.values()))
    rest = peak - sum(known.values()) - tracked
    op = r["seen_op"]
    return dict(peak=peak, peak_op=dict(index=r["peak_op"], op=op[0], phase=op[1], unit=op[2]),
                persistent=known, tracked_outputs=tracked,
                inside_peak_op=rest, named={k: v for k, v in named.items() if v},
                groups=sorted(([k, c, n] for k, (c, n) in groups.items()), key=lambda x: -x[2]))


def zerosim_theory(a, r):
    """zerosim's own prediction for the same case (fp32, N = 1, dp)."""
    if not a.zerosim:
        return None
    import tempfile
    cfgfile = a.model
    with tempfile.TemporaryDirectory() as d:
        if a.tied is not None:
            raw = json.load(open(a.model))
            raw["tie_word_embeddings"] = a.tied
            cfgfile = os.path.join(d, os.path.basename(a.model))
            json.dump(raw, open(cfgfile, "w"))
        out = os.path.join(d, "t.json")
        # FSDP's bytes depend on N (each unit's shard): its world and zero3
        cmd = [a.zerosim, "theory", "--model", cfgfile, "--world", str(a.fsdp or 1), "--seq", str(a.seq), "--batch",
               str(a.batch), "--precision", "amp-" + a.amp if a.amp != "none" else "fp32",
               "--schemes", ("zero2" if fsdp_strategy(a) == "shard_grad_op" else "zero3") if a.fsdp else "dp"] + \
            a.zerosim_args.split() + ["--out", out]
        p = subprocess.run(cmd, capture_output=True, text=True)
        if p.returncode:
            return dict(command=" ".join(cmd[:-2]), error=p.stderr.strip())
        row = json.load(open(out))["rows"][0]
    sch = row["schedule"]
    return dict(command=" ".join(cmd[:-2]), resident=sch["resident_bytes"], peak=sch["peak_bytes"],
                marks=sch.get("marks"), binding_phase=sch.get("binding_phase"),
                first_step_peak=sch.get("first_step_peak"),
                peak_breakdown={k: v for k, v in sch["peak_breakdown"].items() if v},
                activations=row["peak"].get("activations_breakdown"))


def report(a):
    r = run(a)
    S = a.steps
    steady = r["steps"][S]
    model, opt = r["model"], r["opt"]
    opt = getattr(opt, "optim", opt)  # ZeroRedundancyOptimizer: the local Adam's state (this rank's)
    params = storages(model.parameters())
    m = storages(opt.state[p].get("exp_avg") for p in model.parameters())
    v = storages(opt.state[p].get("exp_avg_sq") for p in model.parameters())
    stp = storages(opt.state[p].get("step") for p in model.parameters()
                   if p in opt.state and torch.is_tensor(opt.state[p].get("step")))
    grads = storages(p.grad for p in model.parameters())
    between = r["base"]
    persistent = dict(params=sum(params.values()), grads=sum(grads.values()), adam_m=sum(m.values()),
                      adam_v=sum(v.values()), adam_step=sum(stp.values()),
                      buffers=sum(storages(model.buffers()).values()),
                      inputs=sum(storages([r["input_ids"], r["labels"]]).values()))
    persistent["other"] = between - sum(persistent.values())
    out = dict(torch=torch.__version__, model=a.model, family=r["family"], tied=r["tied"], seq=a.seq,
               batch=a.batch, steps=S, optimizer=a.optimizer, optimizer_impl=a.optimizer_impl,
               zero_grad="none" if r["zero_none"] else "zeros", dropout=a.dropout, amp=a.amp,
               attn=a.attn, loss=a.loss, keep_logits=a.keep_logits, mask=a.mask if r["family"] == "gpt2" else "float-triu",
               params=sum(p.numel() for p in model.parameters()),
               between_steps=[r["steps"][s]["start_bytes"] for s in range(2, S + 1)] + [between],
               between_breakdown=persistent,
               peak=steady["peak"], peak_phase=steady["phase"], peak_after=steady["after"],
               step_peaks=[r["steps"][s]["peak"] for s in range(1, S + 1)],
               boundaries=steady["boundaries"], losses=r["losses"])
    if ROUTING:
        # a mixture's routing, one forward after another: the clean steps'
        # (step s's blocks), then --trace's step's, each block's tokens per
        # expert (this rank's)
        L = r["cfg"]["num_hidden_layers"]
        fwd = [ROUTING[i:i + L] for i in range(0, len(ROUTING), L)]
        out["routing"] = dict(blocks=L, experts=len(ROUTING[0]), steps=fwd[:S],
                              traced=fwd[S] if a.trace else None)
    if "marked_peak" in r:
        out["attribution"] = attribute(r, a)
        out["attribution"]["instrumented_step_equal"] = r["marked_peak"] == steady["peak"]
    if a.ddp:
        out["ddp"] = a.ddp
        out["ddp_buckets"] = ddp_buckets(model)
    if a.zero1:
        # this rank's parameters (its partition, as ZeroRedundancyOptimizer
        # made it) and a digest of every rank's final weights, which must
        # be equal
        import hashlib
        out["zero1"] = dict(rank=RANK[0], owned=sum(p.numel() for p, st in opt.state.items() if "exp_avg" in st),
                            weights=hashlib.sha256(b"".join(p.detach().numpy().tobytes()
                                                            for p in model.parameters())).hexdigest())
    if a.fsdp:
        out["fsdp"] = a.fsdp
    if RANK[0] == 0:
        add_zerosim(a, out)
    return out


def add_zerosim(a, out):
    """zerosim's theory (--zerosim) beside PyTorch's figures in OUT, from
    OUT alone: report's, or --torch-json's (tests/torch_cache.py)."""
    between, persistent, peak = out["between_steps"][-1], out["between_breakdown"], out["peak"]
    z = zerosim_theory(a, None)
    if z:
        out["zerosim"] = z
        if "peak" in z:
            out["zerosim"]["ratio"] = round(z["peak"] / peak, 4)
            out["zerosim"]["between_gap"] = between - z["resident"]
            out["zerosim"]["peak_gap"] = peak - z["peak"]
            # the gap by cause: what both count, what only PyTorch has
            states = sum(persistent[k] for k in ("params", "grads", "adam_m", "adam_v"))
            extra = between - states
            gap = {"params, grads, Adam's m and v (PyTorch - zerosim resident)": states - z["resident"],
                   "Adam's step tensors, buffers, token ids (zerosim: none)": extra,
                   "transient at the peak (PyTorch peak - its between-steps bytes) - "
                   "(zerosim peak - resident)": (peak - between) - (z["peak"] - z["resident"])}
            acts = z.get("activations") or {}
            for k, v in out.get("attribution", {}).get("named", {}).items():
                if k.startswith("logits gradient"):
                    gap[k + " - zerosim's logits_grad"] = v - acts.get("logits_grad", 0)
                elif k.startswith("tied head") or k.startswith("optimizer"):
                    gap[k + " (zerosim: none)"] = v
            out["zerosim"]["gap"] = gap


def main():
    # `--ft ARGS...`: tests/ft_torch.py's run of ARGS (its --grad-accum K
    # micro-steps), so that a batch of this file's cases (tests/batch_torch.py:
    # one python process) holds such a case too (tests/moe_hf_torch.sh's
    # mixtures under accumulation); ft_torch imports this module by name
    if sys.argv[1:2] == ["--ft"]:
        import ft_torch
        sys.argv = sys.argv[:1] + sys.argv[2:]
        return ft_torch.main()
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", required=True,
                    help="a Hugging Face config.json (gpt2, llama, mistral, qwen2, qwen3, phi3, gemma2, gemma3_text)")
    ap.add_argument("--seq", type=int, default=32)
    ap.add_argument("--batch", type=int, default=2)
    ap.add_argument("--steps", type=int, default=3, help="clean steps; the last is the steady one measured")
    ap.add_argument("--optimizer", choices=["adam", "adamw"], default="adam")
    ap.add_argument("--optimizer-impl", choices=["single", "foreach", "fused"], default="single")
    ap.add_argument("--zero-grad", choices=["none", "zeros"], default=None,
                    help="set_to_none True (none) or False (zeros); default this torch's")
    ap.add_argument("--dropout", choices=["0", "config"], default="0")
    ap.add_argument("--amp", choices=["none", "bf16", "fp16"], default="none",
                    help="autocast on the CPU: bf16, or fp16 (2.6) with GradScaler(\"cpu\") (--fsdp: ShardedGradScaler)")
    ap.add_argument("--onednn", type=int, choices=[0, 1], default=0,
                    help="under --amp: 1 leaves oneDNN's bf16 matmuls on (their scratchpad is the CPU's ISA's)")
    ap.add_argument("--attn", choices=["eager", "sdpa"], default="eager")
    ap.add_argument("--experts", choices=["modulelist", "eager"], default="modulelist",
                    help="a mixtral's experts: 4.x's ModuleList, or 5.x's two fused 3-D parameters under the eager "
                         "experts implementation (moe_torch.py's FusedSparseMoeBlock)")
    ap.add_argument("--recompute", choices=["none", "full"], default="none",
                    help="full: Hugging Face's gradient checkpointing, each decoder layer through "
                         "torch.utils.checkpoint")
    ap.add_argument("--recompute-impl", choices=["reentrant", "non-reentrant"], default="reentrant",
                    help="--recompute full's checkpoint: use_reentrant=True (reentrant) or False")
    ap.add_argument("--loss", choices=["5.x", "shift"], default="5.x",
                    help="ForCausalLMLoss (5.x), or 4.4x's shifted copy of the logits")
    ap.add_argument("--keep-logits", type=int, choices=[0, 1], default=1,
                    help="1: the loop holds the model's output (its logits) through backward, as "
                         "`outputs = model(**batch); outputs.loss.backward()` does; 0: as Trainer, the loss alone")
    ap.add_argument("--mask", choices=["where", "add"], default="where",
                    help="GPT-2's causal mask: 4.4x's torch.where over the bool buffer, or 5.x's added float mask")
    t = ap.add_mutually_exclusive_group()
    t.add_argument("--tied", dest="tied", action="store_true", default=None)
    t.add_argument("--untied", dest="tied", action="store_false")
    ap.add_argument("--zerosim", help="a zerosim binary: print its theory's prediction beside")
    ap.add_argument("--zerosim-args", default="", help="more options for zerosim theory")
    ap.add_argument("--no-attribution", action="store_true")
    ap.add_argument("--trace", help="write one more step's every allocation and free there, one a line: "
                    "alloc|free BYTES OP PHASE UNIT LIVE, and the marks: mark LABEL LIVE")
    ap.add_argument("--ddp", type=int, default=0, metavar="N",
                    help="N >= 1: the model in DistributedDataParallel over gloo, N processes on the CPU "
                         "(each its own batch), rank 0's allocator recorded")
    ap.add_argument("--bucket-cap-mb", type=float, help="--ddp: DDP's bucket_cap_mb (default: not given)")
    ap.add_argument("--ddp-find-unused", action="store_true",
                    help="--ddp: DDP's find_unused_parameters=True (default False)")
    ap.add_argument("--zero1", action="store_true",
                    help="with --ddp N: the optimizer is ZeroRedundancyOptimizer(optimizer_class=Adam) over the "
                         "DDP model (torch's zero1); every rank's figures in \"ranks\"")
    ap.add_argument("--fsdp-prefetch", choices=("none", "backward-pre"), default="none",
                    help="--fsdp's backward_prefetch: None (1.13's default) or BACKWARD_PRE (2.6's)")
    ap.add_argument("--fsdp-strategy", choices=("full_shard", "shard_grad_op"), default="full_shard",
                    help="--fsdp's sharding_strategy: FULL_SHARD (zerosim's zero3) or SHARD_GRAD_OP (zero2)")
    ap.add_argument("--fsdp", type=int, default=0, metavar="N",
                    help="N >= 2: the model in FullyShardedDataParallel FULL_SHARD, a unit per block and the "
                         "root, over gloo, N processes on the CPU (each its own batch), rank 0's allocator recorded")
    ap.add_argument("--freeze", default="", help="frozen parameters by Hugging Face name (tests/ft_torch.py's "
                    "--freeze syntax; docs/finetune.md)")
    ap.add_argument("--out", help="write the JSON there (some torch builds print to stdout themselves)")
    ap.add_argument("--torch-json", help="PyTorch's figures from this JSON (an earlier run's with the same "
                    "arguments, tests/torch_cache.py): no training, --zerosim's theory computed beside afresh")
    a = ap.parse_args()
    if a.loss == "shift":
        LOSS[0] = shifted_loss
    RECOMPUTE[0] = a.recompute == "full"
    USE_REENTRANT[0] = a.recompute_impl == "reentrant"
    if a.seq < 1 or a.batch < 1 or a.steps < 2 or a.ddp < 0 or a.fsdp < 0 or a.fsdp == 1 or (a.ddp and a.fsdp):
        ap.error("--seq and --batch must be at least 1, --steps at least 2, --fsdp 0 or at least 2, "
                 "not both --ddp and --fsdp")
    if a.ddp_find_unused and not a.ddp:
        ap.error("--ddp-find-unused needs --ddp N")
    if a.zero1 and not a.ddp:
        ap.error("--zero1 needs --ddp N (ZeroRedundancyOptimizer shards over DDP's ranks)")
    if (a.zero1 or a.fsdp) and a.freeze:
        print(f"hf_torch: --freeze with {'--zero1' if a.zero1 else '--fsdp'} is not compared yet", file=sys.stderr)
        sys.exit(2)
    if a.freeze:
        import ft_torch
        a.lora_r = 0
        try:
            ft_torch.freeze_names(a)
        except ValueError as e:
            print(f"hf_torch: {e}", file=sys.stderr)
            sys.exit(2)
    if a.torch_json:
        with open(a.torch_json) as f:
            out = json.load(f)
        out.pop("zerosim", None)
        add_zerosim(a, out)
        emit(a, out)
        return
    if a.ddp:
        spawn(ddp_worker, a.ddp, lambda store: (a, store))
        return
    if a.fsdp:
        spawn(fsdp_worker, a.fsdp, lambda store: (a, store))
        return
    emit(a, report(a))


def emit(a, d):
    text = json.dumps(d, indent=1) + "\n"
    if a.out:
        # beside its final name, then renamed: no half-written file
        tmp = a.out + ".tmp"
        with open(tmp, "w") as f:
            f.write(text)
        os.replace(tmp, a.out)
    else:
        sys.stdout.write(text)


if __name__ == "__main__":
    main()

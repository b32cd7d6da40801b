"""moe_model_torch — zerosim's whole tiny mixtral (tests/moe_model_dump:
embedding, Mixtral blocks of tfm_moe.h, head, Adam) against PyTorch 1.13
training the same model from the same weights on the same batches.

A qwen2_moe config trains Qwen2MoeForCausalLM the same way: its decoder
layer (Qwen2MoeDecoderLayer below) and Qwen2MoeSparseMoeBlock
(tests/moe_torch.py), from modeling_qwen2_moe.py at 00a3f938. A qwen3_moe
config trains Qwen3MoeForCausalLM (modeling_qwen3_moe.py at 00d4b3d2):
Qwen3MoeDecoderLayer, the same layer with Qwen3MoeAttention (tests/
hf_torch.py's Qwen3Attention: q_norm and k_norm over head_dim, no biases;
its rotary embedding made inside the attention from position_ids, the
same cos and sin as the model's) and Qwen3MoeSparseMoeBlock
(tests/moe_torch.py).

The PyTorch model is transformers 4.x's MixtralForCausalLM written op for
op from modeling_mixtral.py at commit 00d4b3d2 of huggingface/transformers
(the 4.x layout, a ModuleList of experts), eager attention, training
mode, router_jitter_noise 0 and output_router_logits false
(MixtralConfig's defaults, so no auxiliary loss):
  - MixtralDecoderLayer.forward: residual + self_attn(input_layernorm(x)),
    then residual + block_sparse_moe(post_attention_layernorm(.))[0]:
    tests/hf_torch.py's LlamaDecoderLayer.forward, the MoE block its mlp;
  - MixtralAttention and eager_attention_forward are llama's ops
    (sliding_window None: the eager path ignores it), MixtralRMSNorm and
    MixtralRotaryEmbedding llama's: tests/hf_torch.py's LlamaAttention,
    LlamaRMSNorm, LlamaRotaryEmbedding and the eager causal mask of its
    LlamaForCausalLM.forward, which cite modeling_llama.py;
  - MixtralSparseMoeBlock (78-142) and MixtralBlockSparseTop2MLP (60-75):
    tests/moe_torch.py's SparseMoeBlock and Top2MLP, which cite them.
The loss is cross_entropy over every position against the synthetic
task's next tokens (the targets zerosim trains on; ForCausalLMLoss with
those as its shift_labels). torch.optim.Adam with zerosim's lr, betas
0.9/0.999, eps 1e-8.

Usage: moe_model_torch.py CONFIG B T STEPS LR SEED WORK. WORK holds what
tests/moe_model_dump CONFIG B T STEPS LR SEED WORK wrote (the shell runs
it: no zerosim binary here, so that tests/torch_cache.py keys a run by
the dump's files, not by the binary's bytes, and a sanitizer build whose
dump writes the same bytes reads PyTorch's verdict kept; a dump that
writes other bytes runs PyTorch again). It
loads the weights into the model by Hugging Face name (a fused tensor of
zerosim's split into its parts), trains, and holds (the bounds
tests/tfm_torch.py holds gpt2 and llama to):
  - the experts chosen, every step, every block: the same. PyTorch's side
    is fed zerosim's choice (moe_torch.topk) where its own differs by a
    near tie, the two choices' probabilities within moe_torch.TIE (1e-5),
    which fp32 rounding can cross (its float64 run too), so that a near
    tie cannot make the test flaky; a choice that differs by more fails.
    It prints how many near ties were followed and the smallest margin by
    which a chosen expert's probability cleared the first one left out;
  - each step's loss within 1e-5 relative;
  - the first step's gradient within 2e-6 in relative L2 norm;
  - the weights after the last step: the worst within 2 x lr, and 99.9 %
    within 1e-5 relative to max(|w|, 1e-3); where that fails, the same
    run in float64 decides as tfm_torch.py's: the bound is not enforced if
    PyTorch's own fp32 run misses it against float64 too, and zerosim must
    then be as close to float64 as PyTorch's fp32 (its L2 and largest
    distance to the float64 weights at most twice PyTorch's).

moe_model_torch.py --aux MEASURED CONFIG B T STEPS LR SEED WORK: the
auxiliary load-balancing loss against zerosim's PyTorch step's
measured.json instead (aux_main).
Exit 0 agree, 1 disagree."""
import json
import os
import re
import sys

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from hf_torch import (LlamaAttention, LlamaDecoderLayer, LlamaRMSNorm, LlamaRotaryEmbedding,  # noqa: E402
                      Qwen2Attention, Qwen3Attention)
from moe_torch import TIE, Qwen2MoeSparseMoeBlock, Qwen3MoeSparseMoeBlock, SparseMoeBlock  # noqa: E402
from moe_torch import topk as moe_topk  # noqa: E402

QWEN_MOE = ("qwen2_moe", "qwen3_moe")  # their experts' keys


class MixtralDecoderLayer(LlamaDecoderLayer):
    """modeling_mixtral.py MixtralDecoderLayer (00d4b3d2). Its forward is
    LlamaDecoderLayer.forward's ops (tests/hf_torch.py, which cites
    modeling_llama.py) with block_sparse_moe where llama's mlp stands: the
    llama layer's forward runs it through mlp below, which keeps the
    router's logits and choice for forward to return beside the output."""

    def __init__(self, cfg):
        nn.Module.__init__(self)  # not llama's: no LlamaMLP (the parameters in HF's order)
        d, eps = cfg["hidden_size"], cfg["rms_norm_eps"]
        self.self_attn = LlamaAttention(cfg, False)
        self.block_sparse_moe = SparseMoeBlock(d, cfg["intermediate_size"], cfg["num_local_experts"],
                                               cfg["num_experts_per_tok"])
        self.input_layernorm = LlamaRMSNorm(d, eps)
        self.post_attention_layernorm = LlamaRMSNorm(d, eps)
        self.routed = None

    def mlp(self, hidden_states):
        hidden_states, *self.routed = self.block_sparse_moe(hidden_states)
        return hidden_states

    def forward(self, hidden_states, attention_mask, position_embeddings):
        out = super().forward(hidden_states, attention_mask, position_embeddings)
        (logits, chosen), self.routed = self.routed, None
        return out, logits, chosen


class Routed:
    """A block of tests/moe_torch.py, its routing kept aside so that it
    returns the output alone, as the decoder layer reads it."""

    def forward(self, hidden_states):
        out, *self.routed = super().forward(hidden_states)
        return out


class Qwen2MoeRoutedBlock(Routed, Qwen2MoeSparseMoeBlock):
    pass


class Qwen3MoeRoutedBlock(Routed, Qwen3MoeSparseMoeBlock):
    pass


class Qwen2MoeDecoderLayer(LlamaDecoderLayer):
    """modeling_qwen2_moe.py Qwen2MoeDecoderLayer (00a3f938, a 4.x layout):
    self_attn (Qwen2MoeAttention: q/k/v_proj biased (qkv_bias), o_proj not;
    its eager forward is tests/hf_torch.py's Qwen2Attention's ops but for
    the scores divided by sqrt(head_dim) where that multiplies by
    head_dim ** -0.5, a rounding apart), mlp the Qwen2MoeSparseMoeBlock
    (every block sparse: decoder_sparse_step 1, mlp_only_layers empty),
    input_layernorm, post_attention_layernorm; its forward is
    LlamaDecoderLayer.forward's ops (residual + self_attn(input_layernorm(x)),
    then residual + mlp(post_attention_layernorm(.))), the router's logits
    and choice kept (output_router_logits false: not in the loss).
    Qwen3MoeDecoderLayer (modeling_qwen3_moe.py at 00d4b3d2) is the same
    with Qwen3MoeAttention and Qwen3MoeSparseMoeBlock, registered in the
    same order (self_attn, mlp, input_layernorm, post_attention_layernorm)."""

    def __init__(self, cfg):
        nn.Module.__init__(self)
        d, eps = cfg["hidden_size"], cfg.get("rms_norm_eps", 1e-6)
        qwen3 = cfg["model_type"] == "qwen3_moe"
        self.self_attn = (Qwen3Attention if qwen3 else Qwen2Attention)(cfg, False)
        routed = (d, cfg["moe_intermediate_size"], cfg["num_experts"], cfg["num_experts_per_tok"])
        norm = cfg.get("norm_topk_prob", False)
        self.mlp = (Qwen3MoeRoutedBlock(*routed, norm) if qwen3 else
                    Qwen2MoeRoutedBlock(*routed, cfg["shared_expert_intermediate_size"], norm))
        self.input_layernorm = LlamaRMSNorm(d, eps)
        self.post_attention_layernorm = LlamaRMSNorm(d, eps)

    def forward(self, hidden_states, attention_mask, position_embeddings):
        out = super().forward(hidden_states, attention_mask, position_embeddings)
        (logits, chosen), self.mlp.routed = self.mlp.routed, None
        return out, logits, chosen


def experts(cfg):
    return cfg["num_experts"] if cfg["model_type"] in QWEN_MOE else cfg["num_local_experts"]


class MixtralModel(nn.Module):
    """MixtralModel, or Qwen2MoeModel (the same embedding, layers, norm and
    rotary embedding; Qwen2MoeModel.forward at 00a3f938 makes the same
    causal mask and position ids)."""

    def __init__(self, cfg):
        super().__init__()
        layer = Qwen2MoeDecoderLayer if cfg["model_type"] in QWEN_MOE else MixtralDecoderLayer
        self.embed_tokens = nn.Embedding(cfg["vocab_size"], cfg["hidden_size"])
        self.layers = nn.ModuleList([layer(cfg) for _ in range(cfg["num_hidden_layers"])])
        self.norm = LlamaRMSNorm(cfg["hidden_size"], cfg["rms_norm_eps"])
        self.rotary_emb = LlamaRotaryEmbedding(cfg)


class MixtralForCausalLM(nn.Module):
    """MixtralModel.forward and MixtralForCausalLM.forward (00d4b3d2):
    embed_tokens, position_ids = arange(T), the eager causal mask, the
    rotary embedding, the layers, norm, lm_head; the routing kept."""

    def __init__(self, cfg):
        super().__init__()
        self.model = MixtralModel(cfg)
        self.lm_head = nn.Linear(cfg["hidden_size"], cfg["vocab_size"], bias=False)

    def forward(self, input_ids, targets):
        B, T = input_ids.shape
        hidden_states = self.model.embed_tokens(input_ids)
        cache_position = torch.arange(0, T)
        position_ids = cache_position.unsqueeze(0)
        min_dtype = torch.finfo(hidden_states.dtype).min
        causal_mask = torch.full((T, T), fill_value=min_dtype, dtype=hidden_states.dtype)
        causal_mask = torch.triu(causal_mask, diagonal=1)
        causal_mask *= torch.arange(T) > cache_position.reshape(-1, 1)
        causal_mask = causal_mask[None, None, :, :].expand(B, 1, -1, -1)
        position_embeddings = self.model.rotary_emb(hidden_states, position_ids)
        routing, self.gate_logits = [], []  # the latter the model's router_logits (--aux)
        for layer in self.model.layers:
            hidden_states, logits, chosen = layer(hidden_states, causal_mask, position_embeddings)
            routing.append((logits.detach(), chosen))
            self.gate_logits.append(logits)
        logits = self.lm_head(self.model.norm(hidden_states))
        if logits.dtype != torch.float64:  # ForCausalLMLoss's logits.float(); the float64 reference stays so
            logits = logits.float()
        loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.reshape(-1))
        return loss, routing


def split_names(name, parts):
    """zerosim's fused 'a.{q,k,v}_proj.weight' into Hugging Face's names."""
    m = re.search(r"\{([^}]*)\}", name)
    if not parts:
        return [name]
    return [name[:m.start()] + alt + name[m.end():] for alt in m.group(1).split(",")]


def load(model, layout, flat):
    params = dict(model.named_parameters())
    seen = set()
    with torch.no_grad():
        for t in layout:
            at, shape = int(t["offset"]), [int(s) for s in t["shape"]]
            rows = [int(r) for r in t["parts"]] or [shape[0]]
            cols = shape[1] if len(shape) == 2 else 1
            for name, r in zip(split_names(t["name"], t["parts"]), rows):
                p = params[name]
                p.copy_(torch.from_numpy(flat[at:at + r * cols].copy()).reshape(p.shape))
                at += r * cols
                seen.add(name)
    missing = set(params) - seen
    if missing:
        raise SystemExit(f"moe_model_torch: no zerosim tensor for {sorted(missing)}")


def flatten(model, layout, grads=False):
    params = dict(model.named_parameters())
    out = []
    for t in layout:
        for name in split_names(t["name"], t["parts"]):
            p = params[name]
            out.append((p.grad if grads else p).detach().reshape(-1))
    return torch.cat(out)


def within(a, b):
    """The fraction of b within 1e-5 of a relative to max(|a|, 1e-3)."""
    return float(((a - b).abs() / torch.maximum(a.abs(), torch.full_like(a, 1e-3)) <= 1e-5).double().mean())


def blocks(model):
    """Each layer's sparse block (moe_torch.py's), in order."""
    return [getattr(layer, "block_sparse_moe", None) or layer.mlp for layer in model.model.layers]


def force(model, choice):
    """The next forward's routing fed zerosim's choice choice[l] [BT, k]
    where a block's own is a near tie (moe_torch.topk): the issue's
    "the same routing on both sides at every step", which rounding near a
    tie cannot flip."""
    for block, chosen in zip(blocks(model), choice):
        block.forced = chosen


def train64(cfg, layout, init, batch, choice, lr, steps):
    """The same training in float64 (its near ties fed zerosim's choice):
    the weights after the last step."""
    model = MixtralForCausalLM(cfg).double()
    model.train()
    load(model, layout, init.astype(np.float64))
    opt = torch.optim.Adam(model.parameters(), lr=lr, betas=(0.9, 0.999), eps=1e-8)
    for s in range(steps):
        opt.zero_grad()
        force(model, choice[s])
        model(batch[s, 0], batch[s, 1])[0].backward()
        opt.step()
    return flatten(model, layout)


def aux_main(measured, config, B, T, steps, lr, seed, work, micro=1):
    """--aux MEASURED: the auxiliary load-balancing loss (output_router_logits
    true) against zerosim's PyTorch step (measure --framework torch, its
    measured.json); --accum MEASURED ... K: that step under --grad-accum K
    (micro-step k of step s the dump's batch s*K + k, its loss / K
    backward, as Trainer.training_step; the step's loss their sum, as
    measure reports it; the routing each micro-step's blocks, micro-step
    major, as measured.json's "micro_steps"), the aux loss where the
    config sets output_router_logits. The model from the dump's initial weights, trained on
    its batches as Hugging Face's loop trains it at --seq T (labels the
    input ids: ForCausalLMLoss's shifted cross_entropy over T - 1 tokens,
    which F.cross_entropy over the ids shifted and padded with -100 is),
    plus router_aux_loss_coef times tests/hf_torch.py's
    load_balancing_loss_func (modeling_mixtral.py at 00d4b3d2 531-610) of
    every layer's router logits (all B·T tokens). Holds each step's loss
    within 1e-5 relative of measure's and each step's tokens per expert
    (every block) equal to measure's routing."""
    from hf_torch import load_balancing_loss_func
    with open(config) as f:
        cfg = json.load(f)
    with open(os.path.join(work, "run.json")) as f:
        layout = json.load(f)["layout"]
    with open(measured) as f:
        run = json.load(f)["runs"][0]
    E, K = experts(cfg), cfg["num_experts_per_tok"]
    batch = torch.from_numpy(np.fromfile(os.path.join(work, "batch.i32"), dtype="<i4").astype(np.int64))
    batch = batch.reshape(steps * micro, 2, B, T)
    model = MixtralForCausalLM(cfg)
    model.train()
    load(model, layout, np.fromfile(os.path.join(work, "init.f32"), dtype="<f4"))
    opt = torch.optim.Adam(model.parameters(), lr=lr, betas=(0.9, 0.999), eps=1e-8)
    bad, losses = 0, []
    for s in range(steps):
        opt.zero_grad()
        total, counts = 0.0, []
        for k in range(micro):
            ids = batch[s * micro + k, 0]
            labels = F.pad(ids, (0, 1), value=-100)[:, 1:]
            loss, routing = model(ids, labels)
            if cfg.get("output_router_logits"):
                aux = load_balancing_loss_func(tuple(model.gate_logits), E, K)
                loss = loss + cfg.get("router_aux_loss_coef", 0.001) * aux
            model.gate_logits = None
            if micro > 1:
                loss = loss / micro
            loss.backward()
            total += loss.item()
            counts += [torch.bincount(chosen.reshape(-1), minlength=E).tolist() for _, chosen in routing]
        opt.step()
        losses.append(total)
        z = run["losses"][s]
        if abs(total - z) > 1e-5 * abs(total):
            print(f"moe_model_torch: --aux step {s + 1}: loss torch {total:.8f} zerosim {z:.8f}")
            bad += 1
        if counts != run["routing"]["tokens_per_expert"][0][s]:
            print(f"moe_model_torch: --aux step {s + 1}: routing torch {counts} zerosim "
                  f"{run['routing']['tokens_per_expert'][0][s]}")
            bad += 1
    what = (f"router_aux_loss_coef {cfg.get('router_aux_loss_coef', 0.001)}" if cfg.get("output_router_logits")
            else "no aux loss") + (f", --grad-accum {micro}" if micro > 1 else "")
    print(f"moe_model_torch: {'--accum' if micro > 1 else '--aux'}: tiny {cfg['model_type']} (top {K} of {E}, "
          f"{what}), B {B} T {T}: PyTorch's losses{' with the aux loss' if cfg.get('output_router_logits') else ''} "
          f"{' '.join('%.6f' % x for x in losses)}, zerosim's PyTorch step "
          f"{' '.join('%.6f' % x for x in run['losses'])}: {'agree' if bad == 0 else 'DISAGREE'}")
    return 1 if bad else 0


def tie_rule():
    """moe_torch.topk's rule on hand-made probabilities: two tokens, top 2
    of 4; zerosim chose (0, 2) for both. The first token's second and third
    are 4e-6 apart (a near tie: zerosim's choice followed), the second's
    0.1 apart (PyTorch's own kept). 0 when it holds."""
    block = nn.Module()
    p = torch.tensor([[0.4, 0.300002, 0.299998, 0.0], [0.4, 0.35, 0.25, 0.0]])
    block.forced = torch.tensor([[0, 2], [0, 2]])
    _, sel = moe_topk(block, p, 2)
    if sel.tolist() != [[0, 2], [0, 1]] or block.ties != 1 or block.forced is not None:
        print(f"moe_model_torch: moe_torch.topk's near-tie rule: chose {sel.tolist()}, {getattr(block, 'ties', 0)} "
              "ties (want [[0, 2], [0, 1]], 1)")
        return 1
    return 0


def main():
    if tie_rule():
        return 1
    if sys.argv[1] in ("--aux", "--accum"):
        B, T, steps = (int(x) for x in sys.argv[4:7])
        micro = int(sys.argv[10]) if sys.argv[1] == "--accum" else 1
        return aux_main(sys.argv[2], sys.argv[3], B, T, steps, float(sys.argv[7]), int(sys.argv[8]), sys.argv[9],
                        micro)
    config = sys.argv[1]
    B, T, steps = (int(x) for x in sys.argv[2:5])
    lr, seed, work = float(sys.argv[5]), int(sys.argv[6]), sys.argv[7]
    with open(config) as f:
        cfg = json.load(f)
    with open(os.path.join(work, "run.json")) as f:
        run = json.load(f)
    layout = run["layout"]

    def raw(name, dt):
        return np.fromfile(os.path.join(work, name), dtype=dt)

    L, K, BT = cfg["num_hidden_layers"], cfg["num_experts_per_tok"], B * T
    batch = torch.from_numpy(raw("batch.i32", "<i4").astype(np.int64)).reshape(steps, 2, B, T)
    choice = torch.from_numpy(raw("choice.i32", "<i4").astype(np.int64)).reshape(steps, L, BT, K)
    init = raw("init.f32", "<f4")
    model = MixtralForCausalLM(cfg)
    model.train()
    load(model, layout, init)
    opt = torch.optim.Adam(model.parameters(), lr=lr, betas=(0.9, 0.999), eps=1e-8)
    bad, margin = 0, float("inf")
    for s in range(steps):
        opt.zero_grad()
        force(model, choice[s])
        loss, routing = model(batch[s, 0], batch[s, 1])
        loss.backward()
        z = run["losses"][s]
        rel = abs(loss.item() - z) / abs(loss.item())
        if rel > 1e-5:
            print(f"moe_model_torch: step {s + 1}: loss torch {loss.item():.8f} zerosim {z:.8f} rel {rel:.2e}")
            bad += 1
        for l, (logits, chosen) in enumerate(routing):
            if not torch.equal(chosen, choice[s, l]):
                n = int((chosen != choice[s, l]).any(dim=1).sum())
                print(f"moe_model_torch: step {s + 1} block {l}: {n} tokens routed otherwise (by more than a "
                      f"near tie, {TIE:.0e})")
                bad += 1
            p = F.softmax(logits, dim=1, dtype=torch.float)
            top = torch.topk(p, min(K + 1, p.shape[1]), dim=-1).values
            if K < p.shape[1]:
                margin = min(margin, float((top[:, K - 1] - top[:, K]).min()))
        if s == 0:
            g, zg = flatten(model, layout, grads=True), torch.from_numpy(raw("grad1.f32", "<f4"))
            rel = float((g - zg).norm() / g.norm())
            if rel > 2e-6:
                print(f"moe_model_torch: the first step's gradient: relative L2 {rel:.2e} (bound 2e-6)")
                bad += 1
        opt.step()
    w, zw = flatten(model, layout), torch.from_numpy(raw("final.f32", "<f4"))
    worst = float((w - zw).abs().max())
    frac = within(w, zw)
    verdict = f"{100 * frac:.3f} % within 1e-5 (need 99.9 %)"
    if worst > 2 * lr:
        bad += 1
    if frac < 0.999:
        # tests/tfm_torch.py's rule: where the bound fails, the same run in
        # float64 decides whether PyTorch's own fp32 run meets it
        # float64 decides whether PyTorch's own fp32 run meets it; where it
        # does not, zerosim's fp32 must be as near float64 as PyTorch's
        # fp32: its L2 and largest distance to the float64 weights at most
        # twice PyTorch's. (The share within 1e-5 compared to PyTorch's
        # share, 0.1 % below at most, was this rule until it failed on an
        # AVX-512 host with both errors 1.2-1.3 times PyTorch's: OpenBLAS
        # picks its kernels by CPU, so the fp32 rounding, amplified over
        # the steps near a routing tie, is the host's; a wrong number is
        # orders of magnitude off, as the first step's gradient and the
        # losses above are held tighter.)
        w64 = train64(cfg, layout, init, batch, choice, lr, steps)
        f_torch, f_zs = within(w64, w.double()), within(w64, zw.double())
        d_torch, d_zs = w.double() - w64, zw.double() - w64
        l2 = (float(d_torch.norm()), float(d_zs.norm()))
        mx = (float(d_torch.abs().max()), float(d_zs.abs().max()))
        verdict += (f"; against float64: torch fp32 {100 * f_torch:.3f} %, zerosim {100 * f_zs:.3f} % within; "
                    f"L2 distance torch {l2[0]:.3e}, zerosim {l2[1]:.3e}; largest torch {mx[0]:.3e}, "
                    f"zerosim {mx[1]:.3e} (at most twice torch's)")
        if f_torch >= 0.999 or l2[1] > 2 * l2[0] or mx[1] > 2 * mx[0]:
            bad += 1
    ties = sum(getattr(b, "ties", 0) for b in blocks(model))
    gap = max([getattr(b, "gap", 0.0) for b in blocks(model)])
    tied = f" ({ties} near ties followed zerosim's choice, largest gap {gap:.1e})" if ties else ""
    print(f"moe_model_torch: tiny {cfg['model_type']} (d {cfg['hidden_size']}, {L} blocks, {experts(cfg)} experts, "
          f"top {K}), B {B} T {T}, {steps} steps of Adam lr {lr}: losses {run['losses'][0]:.6f} .. "
          f"{run['losses'][-1]:.6f}; routing {'the same' if bad == 0 else 'checked'} at every step{tied}, smallest "
          f"top-{K} margin {margin:.2e}; final weights: worst {worst:.2e} (bound {2 * lr:.0e}), {verdict}: "
          f"{'agree' if bad == 0 else 'DISAGREE'}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())

"""moe_torch — the engine's mixture-of-experts kernels (tests/moe_dump)
against PyTorch running transformers' MixtralSparseMoeBlock.

The block is written op for op from modeling_mixtral.py at commit
00d4b3d2 of huggingface/transformers (the 4.x layout, a ModuleList of
experts): MixtralBlockSparseTop2MLP (lines 60-75: w1, w2, w3 registered
at 66-68, w2(act(w1 x) * w3 x), act silu) and MixtralSparseMoeBlock
(78-142: the router gate at 98, the experts at 100; forward 105-142: the router gate,
softmax in float32, torch.topk, the weights renormalised, the experts hit
run on their tokens found by torch.where over the one-hot mask, each
output times its routing weight, index_add_ into the result), in training
mode with router_jitter_noise 0 (MixtralConfig's default). The loss is
sum(out * r); autograd gives the gradients.

Qwen2-MoE's block (with S, the shared expert's width): Qwen2MoeSparseMoeBlock
and Qwen2MoeMLP below, op for op from modeling_qwen2_moe.py at commit
00a3f938 of huggingface/transformers (a 4.x layout, a ModuleList of
experts), norm_topk_prob NORM. Qwen3-MoE's (S 0): Qwen3MoeSparseMoeBlock
below, op for op from modeling_qwen3_moe.py at commit 00d4b3d2 (the
same routed experts, no shared expert).

transformers 5.x's fused experts (FusedExperts, FusedSparseMoeBlock
below: two 3-D parameters, the eager experts forward of
integrations/moe.py at 8b584a67) are tests/hf_torch.py --experts eager's
block (tests/moe_hf_torch.sh); this file's kernel comparison takes 4.x's.

Usage: moe_torch.py BT D E K F SEED WORK [S NORM]. Draws the inputs from
SEED (redrawing until every token's k-th probability clears its
(k+1)-th by 1e-3, so that fp32 rounding cannot change a choice), writes
them for tests/moe_dump (WORK/moe.in) and PyTorch's results
(WORK/moe.want.f32: the output and every gradient, in moe_dump's order;
WORK/moe.want.json: their names and sizes, the experts chosen, the
tokens per expert). It runs no zerosim binary: its results depend on
its arguments alone, so tests/torch_cache.py keeps them for a sanitizer
build's run. tests/moe_torch.sh runs moe_dump, and tests/moe_cmp.py
(no torch) compares: the same experts chosen for every token, the same
counts, and the output and every gradient within 1e-5 + 1e-4 relative
of PyTorch's (fp32 products in another order).
Exit 0 written, 1 no draw without a near-tie."""
import json
import os
import sys

import warnings

import torch
import torch.nn.functional as F
from torch import nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from hf_torch import LlamaMLP  # noqa: E402


class Top2MLP(nn.Module):
    """MixtralBlockSparseTop2MLP (modeling_mixtral.py 60-75; w1, w2, w3 at 66-68)."""

    def __init__(self, d, f):
        super().__init__()
        self.w1 = nn.Linear(d, f, bias=False)
        self.w2 = nn.Linear(f, d, bias=False)
        self.w3 = nn.Linear(d, f, bias=False)
        self.act_fn = nn.SiLU()

    def forward(self, hidden_states):
        current_hidden_states = self.act_fn(self.w1(hidden_states)) * self.w3(hidden_states)
        return self.w2(current_hidden_states)


TIE = 1e-5  # a near tie: the probabilities of two choices this close apart


def topk(block, p, k):
    """torch.topk(p, k, dim=-1), as the modeling files call it. A test that
    trains beside zerosim sets block.forced, zerosim's choice for these
    tokens [tokens, k] (read once, then cleared): where PyTorch chose other
    experts and the k-th probability it chose is within TIE of the least
    one zerosim chose, a near tie that fp32 rounding decides, PyTorch
    follows zerosim's choice (block.ties counts them, block.gap the largest
    such gap); a larger gap is a real disagreement, left as PyTorch chose
    it for the test to report."""
    w, sel = torch.topk(p, k, dim=-1)
    forced, block.forced = getattr(block, "forced", None), None
    if forced is None:
        return w, sel
    differ = (sel.sort(dim=1).values != forced.sort(dim=1).values).any(dim=1)
    gap = (w[:, k - 1] - p.gather(1, forced).min(dim=1).values).clamp(min=0)
    tie = differ & (gap <= TIE)
    if tie.any():
        block.ties = getattr(block, "ties", 0) + int(tie.sum())
        block.gap = max(getattr(block, "gap", 0.0), float(gap[tie].max()))
        sel = torch.where(tie[:, None], forced, sel)
        w = p.gather(1, sel)
    return w, sel


class SparseMoeBlock(nn.Module):
    """MixtralSparseMoeBlock (modeling_mixtral.py 78-142), jitter 0."""

    def __init__(self, d, f, e, k):
        super().__init__()
        self.hidden_dim, self.num_experts, self.top_k = d, e, k
        self.gate = nn.Linear(d, e, bias=False)
        self.experts = nn.ModuleList([Top2MLP(d, f) for _ in range(e)])

    def route(self, hidden_states):
        """The router on the flattened states: its logits, the renormalised
        top-k weights (cast back) and the experts chosen."""
        router_logits = self.gate(hidden_states)
        routing_weights = F.softmax(router_logits, dim=1, dtype=torch.float)
        routing_weights, selected_experts = topk(self, routing_weights, self.top_k)
        routing_weights /= routing_weights.sum(dim=-1, keepdim=True)
        routing_weights = routing_weights.to(hidden_states.dtype)
        return router_logits, routing_weights, selected_experts

    def forward(self, hidden_states):
        batch_size, sequence_length, hidden_dim = hidden_states.shape
        hidden_states = hidden_states.view(-1, hidden_dim)
        router_logits, routing_weights, selected_experts = self.route(hidden_states)
        final_hidden_states = torch.zeros((batch_size * sequence_length, hidden_dim), dtype=hidden_states.dtype)
        expert_mask = torch.nn.functional.one_hot(selected_experts, num_classes=self.num_experts).permute(2, 1, 0)
        expert_hit = torch.greater(expert_mask.sum(dim=(-1, -2)), 0).nonzero()
        for expert_idx in expert_hit:
            expert_layer = self.experts[expert_idx]
            idx, top_x = torch.where(expert_mask[expert_idx].squeeze(0))
            current_state = hidden_states[None, top_x].reshape(-1, hidden_dim)
            current_hidden_states = expert_layer(current_state) * routing_weights[top_x, idx, None]
            final_hidden_states.index_add_(0, top_x, current_hidden_states.to(hidden_states.dtype))
        final_hidden_states = final_hidden_states.reshape(batch_size, sequence_length, hidden_dim)
        return final_hidden_states, router_logits, selected_experts


class FusedExperts(nn.Module):
    """transformers 5.x's MixtralExperts under the eager experts
    implementation (issue #25), op for op from
    src/transformers/integrations/moe.py at 8b584a67 of
    huggingface/transformers, its reference Experts class (lines 29-65, a comment):
    two 3-D parameters registered in that order, gate_up_proj (E, 2F, d)
    and down_proj (E, d, F); forward(hidden_states, top_k_index,
    top_k_weights): zeros_like, one_hot, permute and expert_hit under
    no_grad, the loop `for expert_idx in expert_hit`, `expert_idx =
    expert_idx[0]` (a 0-dim index: `expert_mask[expert_idx]` and
    `self.gate_up_proj[expert_idx]` are selects, views), the
    `== self.num_experts` check, torch.where, `hidden_states[token_idx]`,
    F.linear(., gate_up_proj[e]).chunk(2), act(gate) * up, F.linear(.,
    down_proj[e]), times top_k_weights[token_idx, top_k_pos, None],
    index_add_. Each select's backward (SelectBackward0: zeros of the
    whole parameter, the slice copied in) is a gradient the size of the
    whole fused parameter, summed in its input buffer before
    AccumulateGrad."""

    def __init__(self, d, f, e):
        super().__init__()
        self.num_experts = e
        self.gate_up_proj = nn.Parameter(torch.empty(e, 2 * f, d).normal_(std=0.02))
        self.down_proj = nn.Parameter(torch.empty(e, d, f).normal_(std=0.02))
        self.act_fn = nn.SiLU()

    def forward(self, hidden_states, top_k_index, top_k_weights):
        final_hidden_states = torch.zeros_like(hidden_states)
        with torch.no_grad():
            expert_mask = torch.nn.functional.one_hot(top_k_index, num_classes=self.num_experts)
            expert_mask = expert_mask.permute(2, 1, 0)
            expert_hit = torch.greater(expert_mask.sum(dim=(-1, -2)), 0).nonzero()
        for expert_idx in expert_hit:
            expert_idx = expert_idx[0]
            if expert_idx == self.num_experts:
                continue
            top_k_pos, token_idx = torch.where(expert_mask[expert_idx])
            current_state = hidden_states[token_idx]
            gate, up = F.linear(current_state, self.gate_up_proj[expert_idx]).chunk(2, dim=-1)
            current_hidden_states = self.act_fn(gate) * up
            current_hidden_states = F.linear(current_hidden_states, self.down_proj[expert_idx])
            current_hidden_states = current_hidden_states * top_k_weights[token_idx, top_k_pos, None]
            final_hidden_states.index_add_(0, token_idx, current_hidden_states.to(final_hidden_states.dtype))
        return final_hidden_states


class FusedSparseMoeBlock(nn.Module):
    """transformers 5.x's mixtral block over FusedExperts: the router
    `gate` (one (E, d) weight; its fp32 ops here are SparseMoeBlock's:
    F.linear, softmax in float32, topk, the weights renormalised in place,
    cast back, a no-op in fp32), then `experts` (registered in that order)
    called on the flattened states, the result reshaped."""

    def __init__(self, d, f, e, k):
        super().__init__()
        self.hidden_dim, self.num_experts, self.top_k = d, e, k
        self.gate = nn.Linear(d, e, bias=False)
        self.experts = FusedExperts(d, f, e)

    def forward(self, hidden_states):
        batch_size, sequence_length, hidden_dim = hidden_states.shape
        hidden_states = hidden_states.view(-1, hidden_dim)
        router_logits, top_k_weights, top_k_index = SparseMoeBlock.route(self, hidden_states)
        final_hidden_states = self.experts(hidden_states, top_k_index, top_k_weights)
        final_hidden_states = final_hidden_states.reshape(batch_size, sequence_length, hidden_dim)
        return final_hidden_states, router_logits, top_k_index


def Qwen2MoeMLP(d, f):
    """Qwen2MoeMLP (modeling_qwen2_moe.py at 00a3f938, "Modified from
    MistralMLP"): gate_proj, up_proj, down_proj registered in that order,
    bias-free, down_proj(act_fn(gate_proj(x)) * up_proj(x)), act silu: the
    ops of tests/hf_torch.py's LlamaMLP at width f."""
    return LlamaMLP({"hidden_size": d, "intermediate_size": f})


class Qwen3MoeSparseMoeBlock(nn.Module):
    """Qwen3MoeSparseMoeBlock (modeling_qwen3_moe.py at 00d4b3d2 of
    huggingface/transformers, a 4.x layout, a ModuleList of experts):
    __init__ registers gate (E, d, no bias), then the experts, each a
    Qwen3MoeMLP of moe_intermediate_size (gate_proj, up_proj, down_proj,
    bias-free, down_proj(act_fn(gate_proj(x)) * up_proj(x)), act silu:
    Qwen2MoeMLP's ops); forward: the router's softmax in float32,
    torch.topk, divided by its sum only if norm_topk_prob ("only diff with
    mixtral sparse moe block!"), cast back, one_hot(...).permute(2, 1, 0),
    the experts hit by torch.greater(mask.sum, 0).nonzero(), each on its
    tokens (torch.where over its mask) times its weight, index_add_,
    reshaped; it returns the output and the router logits (and, for the
    tests, the experts chosen)."""

    def __init__(self, d, f, e, k, norm):
        super().__init__()
        self.num_experts, self.top_k, self.norm_topk_prob = e, k, norm
        self.gate = nn.Linear(d, e, bias=False)
        self.experts = nn.ModuleList([Qwen2MoeMLP(d, f) for _ in range(e)])

    def forward(self, hidden_states):
        batch_size, sequence_length, hidden_dim = hidden_states.shape
        hidden_states = hidden_states.view(-1, hidden_dim)
        router_logits = self.gate(hidden_states)
        routing_weights = F.softmax(router_logits, dim=1, dtype=torch.float)
        routing_weights, selected_experts = topk(self, routing_weights, self.top_k)
        if self.norm_topk_prob:
            routing_weights /= routing_weights.sum(dim=-1, keepdim=True)
        routing_weights = routing_weights.to(hidden_states.dtype)
        final_hidden_states = torch.zeros((batch_size * sequence_length, hidden_dim), dtype=hidden_states.dtype)
        expert_mask = torch.nn.functional.one_hot(selected_experts, num_classes=self.num_experts).permute(2, 1, 0)
        expert_hit = torch.greater(expert_mask.sum(dim=(-1, -2)), 0).nonzero()
        for expert_idx in expert_hit:
            expert_layer = self.experts[expert_idx]
            idx, top_x = torch.where(expert_mask[expert_idx].squeeze(0))
            current_state = hidden_states[None, top_x].reshape(-1, hidden_dim)
            current_hidden_states = expert_layer(current_state) * routing_weights[top_x, idx, None]
            final_hidden_states.index_add_(0, top_x, current_hidden_states.to(hidden_states.dtype))
        final_hidden_states = self.shared(hidden_states, final_hidden_states)
        final_hidden_states = final_hidden_states.reshape(batch_size, sequence_length, hidden_dim)
        return final_hidden_states, router_logits, selected_experts

    def shared(self, hidden_states, final_hidden_states):
        """Qwen2-MoE's shared expert, run where its forward runs it (after
        the loop, the routing's locals alive); none here."""
        return final_hidden_states


class Qwen2MoeSparseMoeBlock(Qwen3MoeSparseMoeBlock):
    """Qwen2MoeSparseMoeBlock (modeling_qwen2_moe.py at 00a3f938, 4.x's
    layout): Qwen3-MoE's routed half (__init__ registers gate, the experts
    of Qwen2MoeMLP, then shared_expert (Qwen2MoeMLP of
    shared_expert_intermediate_size) and shared_expert_gate (1, d, no
    bias); forward's routing is the same ops, its loop over the hit
    experts in the same ascending order), then, after the loop and before
    the reshape (the routing's locals still alive), shared_expert(x) times
    F.sigmoid(shared_expert_gate(x)) added to the routed sum (BT, d)."""

    def __init__(self, d, f, e, k, s, norm):
        super().__init__(d, f, e, k, norm)
        self.shared_expert = Qwen2MoeMLP(d, s)
        self.shared_expert_gate = torch.nn.Linear(d, 1, bias=False)

    def shared(self, hidden_states, final_hidden_states):
        shared_expert_output = self.shared_expert(hidden_states)
        shared_expert_output = F.sigmoid(self.shared_expert_gate(hidden_states)) * shared_expert_output
        return final_hidden_states + shared_expert_output

def main():
    warnings.filterwarnings("ignore", "nn.functional.sigmoid is deprecated")  # the modeling file's F.sigmoid
    BT, D, E, K, FF, seed, work = (*map(int, sys.argv[1:7]), sys.argv[7])
    qwen = len(sys.argv) > 8  # S 0: qwen3_moe's block, no shared expert
    S, NORM = (int(sys.argv[8]), int(sys.argv[9])) if qwen else (0, 1)
    torch.manual_seed(seed)
    for _ in range(100):
        x = torch.randn(1, BT, D)
        if qwen:
            block = Qwen2MoeSparseMoeBlock(D, FF, E, K, S, bool(NORM)) if S else Qwen3MoeSparseMoeBlock(D, FF, E, K,
                                                                                                       bool(NORM))
        else:
            block = SparseMoeBlock(D, FF, E, K)
        with torch.no_grad():
            block.gate.weight.mul_(4.0)  # a router that chooses, not a uniform one
            p = F.softmax(block.gate(x.view(-1, D)), dim=1, dtype=torch.float)
            top = torch.topk(p, min(K + 1, E), dim=-1).values
        if K == E or bool((top[:, K - 1] - top[:, K] > 1e-3).all()):
            break
    else:
        print("moe_torch: no draw without a near-tie in 100")
        return 1
    r = torch.randn(1, BT, D)
    x.requires_grad_(True)
    out, _, chosen = block(x)
    (out * r).sum().backward()

    parts = [x.detach(), block.gate.weight.detach()]
    for ex in block.experts:  # parameters() order (w1, w2, w3; gate_proj, up_proj, down_proj): the engine's layout
        parts += [p.detach() for p in ex.parameters()]
    if S:
        parts += [p.detach() for p in block.shared_expert.parameters()] + [block.shared_expert_gate.weight.detach()]
    parts.append(r)
    torch.cat([t.reshape(-1) for t in parts]).numpy().astype("<f4").tofile(os.path.join(work, "moe.in"))

    want = [("out", out.detach()), ("d x", x.grad), ("d gate", block.gate.weight.grad)]
    def grad(p):
        return p.grad if p.grad is not None else torch.zeros_like(p)
    for e, ex in enumerate(block.experts):  # an idle expert's grads are None: zero
        want += [(f"d {n}[{e}]", grad(p)) for n, p in ex.named_parameters()]
    if S:
        want += [(f"d shared_expert.{n}", grad(p)) for n, p in block.shared_expert.named_parameters()]
        want.append(("d shared_expert_gate", grad(block.shared_expert_gate.weight)))
    torch.cat([t.reshape(-1) for _, t in want]).numpy().astype("<f4").tofile(os.path.join(work, "moe.want.f32"))
    kind = (f"qwen2_moe (shared {S}, " if S else "qwen3_moe (") + f"norm_topk_prob {bool(NORM)})" if qwen else "mixtral"
    with open(os.path.join(work, "moe.want.json"), "w") as f:
        json.dump(dict(names=[n for n, _ in want], sizes=[t.numel() for _, t in want], chosen=chosen.tolist(),
                       counts=torch.bincount(chosen.reshape(-1), minlength=E).tolist(),
                       head=f"moe_torch: {kind} BT {BT}, d {D}, {E} experts, top {K}, F {FF}"), f)
    return 0


if __name__ == "__main__":
    sys.exit(main())

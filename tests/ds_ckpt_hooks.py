"""ds_ckpt_hooks: the order in which DeepSpeed ZeRO-3's module hooks fire
under Hugging Face's gradient checkpointing, in real PyTorch, against the
trace zerosim's coordinator walks (util/ds_coord.c, build_trace;
docs/schedule.md, "deepspeed", ZeRO-3 with full recompute), as
tests/ds_trace (argv[1]) writes it for the same model: "STEP fetch|release
NAME" a line, compared entry by entry.

DeepSpeed 0.16.5 (38327e0), runtime/zero/parameter_offload.py, transcribed
for what decides when a fetch and a release happen (no gathering here):
_register_deepspeed_module (276-454) hooks every module recursively; the
pre-forward hook fetches (290-292, 456-467), the post-forward hook
releases (294-335, 471-478); the forward hook wraps the outputs in
PreBackwardFunctionForModule (342-379: applied_pre_backward_ref_cnt, the
fetch in its backward when the count is > 0, 484-491); the forward pre-hook
wraps the inputs in PostBackwardFunctionModule (401-442: ds_grads_remaining
counted up for an input that requires grad, down in backward, the release
at 0, 493-500). Each block runs under torch.utils.checkpoint of its
__call__, reentrant (transformers' gradient_checkpointing_enable default).
A GPT-2-shaped model named as GPT2LMHeadModel's modules (transformer.wte,
.wpe, per block .h.i.ln_1, .attn(c_attn, c_proj), .ln_2, .mlp(c_fc,
c_proj), then transformer.ln_f and lm_head), untied and then tied to wte
(its weight wte's), 3 blocks, both steps. Only modules with parameters of
their own are reported (a container's fetch gathers nothing; zerosim
leaves them out).
The modules whose release after backward never fires are exactly those
no input of which requires grad, the embeddings (token ids, positions):
the tied head's input (ln_f's output) does, so its own fires; zerosim's
step description marks the tables so (util/step.h, no_grad_in), and its
coordinator releases nothing after their backward (util/ds_coord.c,
ds_coord_release). Prints what it found and "ok", or the first
difference; exit 1 on a difference.
Then LoRA (lora_check): a llama whose targets are PEFT's lora.Linear
(LoraLinear below), its hooks against tests/ds_trace lora's answers.
"""
import subprocess
import sys

import torch
from torch.utils.checkpoint import checkpoint

events = []
after_backward = set()  # the modules whose release after backward fired


def own(m):
    return any(True for _ in m.parameters(recurse=False))


def register(m, name):
    for cn, c in m.named_children():
        register(c, name + "." + cn if name else cn)

    def pre_fwd(mod, inp):
        if own(mod):
            events.append(("fetch", name))

    def post_fwd(mod, inp, out):
        if own(mod):
            events.append(("release", name))

    class PreBackward(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            mod = m
            ctx.m = mod
            mod.ref = getattr(mod, "ref", 0) + 1
            return x.detach()

        @staticmethod
        def backward(ctx, g):
            if ctx.m.ref > 0:
                if own(ctx.m):
                    events.append(("fetch", name))
                ctx.m.ref -= 1
            return g

    class PostBackward(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.m = m
            if x.requires_grad:
                m.remaining = getattr(m, "remaining", 0) + 1
            return x.detach()

        @staticmethod
        def backward(ctx, g):
            ctx.m.remaining -= 1
            if ctx.m.remaining == 0 and own(ctx.m):
                events.append(("release", name))
                after_backward.add(name)
            return g

    def pre_bwd(mod, inp, out):
        return PreBackward.apply(out) if torch.is_tensor(out) else out

    def post_bwd(mod, inp):
        if torch.is_grad_enabled():  # the rule's side: does some input require grad?
            mod.grad_in = getattr(mod, "grad_in", False) or any(torch.is_tensor(x) and x.requires_grad for x in inp)
        return tuple(PostBackward.apply(x) if torch.is_tensor(x) else x for x in inp)

    m.register_forward_pre_hook(pre_fwd)
    m.register_forward_hook(post_fwd)
    m.register_forward_hook(pre_bwd)
    m.register_forward_pre_hook(post_bwd)


class Attn(torch.nn.Module):
    def __init__(self, d):
        super().__init__()
        self.c_attn = torch.nn.Linear(d, 3 * d)
        self.c_proj = torch.nn.Linear(d, d)

    def forward(self, x):
        q, k, v = self.c_attn(x).chunk(3, dim=-1)
        a = torch.softmax(q @ k.transpose(-1, -2), dim=-1) @ v
        return self.c_proj(a)


class Mlp(torch.nn.Module):
    def __init__(self, d):
        super().__init__()
        self.c_fc = torch.nn.Linear(d, 4 * d)
        self.c_proj = torch.nn.Linear(4 * d, d)

    def forward(self, x):
        return self.c_proj(torch.nn.functional.gelu(self.c_fc(x)))


class Block(torch.nn.Module):
    def __init__(self, d):
        super().__init__()
        self.ln_1, self.attn = torch.nn.LayerNorm(d), Attn(d)
        self.ln_2, self.mlp = torch.nn.LayerNorm(d), Mlp(d)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class Transformer(torch.nn.Module):  # GPT2Model
    def __init__(self, d, layers, vocab, positions):
        super().__init__()
        self.wte, self.wpe = torch.nn.Embedding(vocab, d), torch.nn.Embedding(positions, d)
        self.h = torch.nn.ModuleList(Block(d) for _ in range(layers))
        self.ln_f = torch.nn.LayerNorm(d)

    def forward(self, ids):
        x = self.wte(ids) + self.wpe(torch.arange(ids.shape[1]))
        for b in self.h:
            x = checkpoint(b.__call__, x, use_reentrant=True) if self.ckpt else b(x)
        return self.ln_f(x)


class Model(torch.nn.Module):  # GPT2LMHeadModel
    def __init__(self, d, layers, vocab, positions, tied):
        super().__init__()
        self.transformer = Transformer(d, layers, vocab, positions)
        self.transformer.ckpt = True
        self.lm_head = torch.nn.Linear(d, vocab, bias=False)
        if tied:  # GPT2LMHeadModel's tie_weights: the head reads the token table
            self.lm_head.weight = self.transformer.wte.weight

    def forward(self, ids):
        return self.lm_head(self.transformer(ids))


def zerosim(tied, targets=None):
    """ds_trace's lines: per step, the (fetch|release, module) in order."""
    args = [sys.argv[1], str(int(tied)), str(L)] + ([targets] if targets else [])
    out = subprocess.run(args, check=True, capture_output=True, text=True).stdout
    steps = {1: [], 2: []}
    for line in out.splitlines():
        step, what, name = line.split()
        steps[int(step)].append((what, name))
    return steps


def check(tied):
    torch.manual_seed(0)
    model = Model(16, L, 32, 8, tied)
    register(model, "")
    ids = torch.randint(0, 32, (2, 8))
    want = zerosim(tied)
    for step in (1, 2):
        events.clear()
        after_backward.clear()
        torch.nn.functional.cross_entropy(model(ids).flatten(0, 1), ids.flatten()).backward()
        compare(tied, step, events, want[step])
    fetched = set(m for e, m in events if e == "fetch")
    never = sorted(fetched - after_backward)
    # Why: no input of it requires grad (seen in a forward with grad on:
    # the first one, or a checkpointed block's rerun); zerosim's
    # no_grad_in marks the tables, wte and wpe.
    noinput = sorted(n for n, m in model.named_modules() if n in fetched and not getattr(m, "grad_in", False))
    print("%s head: release after backward never fires for %s" % ("tied" if tied else "untied", ", ".join(never)))
    if never != noinput or noinput != ["transformer.wpe", "transformer.wte"]:
        print("the rule (no input requires grad) expects %s, zerosim's tables transformer.wpe, .wte"
              % ", ".join(noinput))
        sys.exit(1)


def lora_trace(tied, targets):
    """LoRA r 2 on TARGETS (PEFT's lora.Linear, LoraLinear below; the base
    frozen), no checkpointing: both steps' hooks, in order, against
    ds_trace TIED L TARGETS (the adapters modules of their own after their
    base, backward lora_B, lora_A, then the base; a base whose output
    needs no grad not fetched for backward, a lora_A whose input needs
    none not released after it)."""
    torch.manual_seed(0)
    model = Model(16, L, 32, 8, tied)
    model.transformer.ckpt = False
    for p in model.parameters():
        p.requires_grad_(False)
    for b in model.transformer.h:
        for parent in (b.attn, b.mlp):
            for cn, c in list(parent.named_children()):
                if parent.__class__.__name__.lower() + "." + cn in targets.split(",") or cn in targets.split(","):
                    setattr(parent, cn, LoraLinear(c, 2))
    register(model, "")
    ids = torch.randint(0, 32, (2, 8))
    want = zerosim(tied, targets)
    for step in (1, 2):
        events.clear()
        torch.nn.functional.cross_entropy(model(ids).flatten(0, 1), ids.flatten()).backward()
        compare(tied, step, [(e, n.replace(".base_layer", "")) for e, n in events], want[step])
    print("ok: lora %s, %s head: %d hooks a step in zerosim's trace's order" % (targets, "tied" if tied else "untied",
                                                                              len(events)))


def compare(tied, step, got, want):
    """PyTorch's hooks against zerosim's trace, entry by entry."""
    if got == want:
        return
    for k, (g, w) in enumerate(zip(got + [None] * len(want), want + [None] * len(got))):
        if g != w:
            print("%s head, step %d, event %d: PyTorch %s, zerosim %s" % ("tied" if tied else "untied", step, k, g, w))
            break
    sys.exit(1)


class Norm(torch.nn.Module):  # LlamaRMSNorm
    def __init__(self, d):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.ones(d))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5) * self.weight


class LoraLinear(torch.nn.Module):
    """PEFT v0.20.0's lora.Linear over nn.Linear: update_layer makes
    lora_A[name] = nn.Linear(in, r, bias=False), lora_B[name] =
    nn.Linear(r, out, bias=False) and lora_dropout[name] (nn.Identity at
    p = 0), layer.py 252-254; forward runs result = self.base_layer(x),
    then result + lora_B(lora_A(dropout(x))) * scaling, 1030-1069."""

    def __init__(self, base, r):
        super().__init__()
        self.base_layer = base
        self.lora_dropout = torch.nn.ModuleDict({"default": torch.nn.Identity()})
        self.lora_A = torch.nn.ModuleDict({"default": torch.nn.Linear(base.in_features, r, bias=False)})
        self.lora_B = torch.nn.ModuleDict({"default": torch.nn.Linear(r, base.out_features, bias=False)})

    def forward(self, x):
        result = self.base_layer(x)
        return result + self.lora_B["default"](self.lora_A["default"](self.lora_dropout["default"](x))) * 2.0


class LlamaAttn(torch.nn.Module):
    def __init__(self, d, hd):
        super().__init__()
        self.q_proj, self.k_proj = torch.nn.Linear(d, d, bias=False), torch.nn.Linear(d, hd, bias=False)
        self.v_proj, self.o_proj = torch.nn.Linear(d, hd, bias=False), torch.nn.Linear(d, d, bias=False)

    def forward(self, x):
        q, k, v = self.q_proj(x), self.k_proj(x), self.v_proj(x)
        k, v = k.repeat(1, 1, 2), v.repeat(1, 1, 2)  # one k/v head for two query heads
        return self.o_proj(torch.softmax(q @ k.transpose(-1, -2), dim=-1) @ v)


class LlamaMlp(torch.nn.Module):
    def __init__(self, d, f):
        super().__init__()
        self.gate_proj, self.up_proj = torch.nn.Linear(d, f, bias=False), torch.nn.Linear(d, f, bias=False)
        self.down_proj = torch.nn.Linear(f, d, bias=False)

    def forward(self, x):
        return self.down_proj(torch.nn.functional.silu(self.gate_proj(x)) * self.up_proj(x))


class LlamaLayer(torch.nn.Module):
    def __init__(self, d, hd, f):
        super().__init__()
        self.input_layernorm, self.self_attn = Norm(d), LlamaAttn(d, hd)
        self.post_attention_layernorm, self.mlp = Norm(d), LlamaMlp(d, f)

    def forward(self, x):
        x = x + self.self_attn(self.input_layernorm(x))
        return x + self.mlp(self.post_attention_layernorm(x))


class LlamaModel(torch.nn.Module):
    def __init__(self, d, hd, f, layers, vocab):
        super().__init__()
        self.embed_tokens = torch.nn.Embedding(vocab, d)
        self.layers = torch.nn.ModuleList(LlamaLayer(d, hd, f) for _ in range(layers))
        self.norm = Norm(d)

    def forward(self, ids):
        x = self.embed_tokens(ids)
        for layer in self.layers:
            x = layer(x)
        return self.norm(x)


class Llama(torch.nn.Module):  # LlamaForCausalLM
    def __init__(self, layers, targets):
        super().__init__()
        self.model = LlamaModel(16, 8, 32, layers, 32)
        self.lm_head = torch.nn.Linear(16, 32, bias=False)
        for p in self.parameters():  # get_peft_model: the base frozen
            p.requires_grad_(False)
        for layer in self.model.layers:
            for parent in (layer.self_attn, layer.mlp):
                for cn, c in list(parent.named_children()):
                    if cn in targets:
                        setattr(parent, cn, LoraLinear(c, 2))

    def forward(self, ids):
        return self.lm_head(self.model(ids))


def lora_check(targets):
    """Each module's hooks in one step of a LoRA llama, no checkpointing,
    against ds_trace lora's answers (util/ds_coord.c,
    ds_coord_grad_flow_lora): 2 no backward fetch (its output needs no
    grad), 1 fetched for backward and never released after it (no input
    needs grad), 0 both; zerosim's fused {q,k,v}_proj and {gate,up}_proj
    hold each of their modules' answer (the same for each)."""
    torch.manual_seed(0)
    model = Llama(L, targets.split(","))
    register(model, "")
    ids = torch.randint(0, 32, (2, 8))
    events.clear()
    after_backward.clear()
    logits = model(ids)
    nfwd = len(events)
    torch.nn.functional.cross_entropy(logits.flatten(0, 1), ids.flatten()).backward()
    fetched_bwd = set(m for e, m in events[nfwd:] if e == "fetch")
    got = {}
    for n, m in model.named_modules():
        if not own(m):
            continue
        answer = 2 if n not in fetched_bwd else 0 if n in after_backward else 1
        n = n.replace(".base_layer", "")
        for fused, parts in (("{q,k,v}_proj", ("q_proj", "k_proj", "v_proj")), ("{gate,up}_proj", ("gate_proj", "up_proj"))):
            for part in parts:
                if n.endswith("." + part):
                    n = n[: -len(part)] + fused
        if got.setdefault(n, answer) != answer:
            print("lora %s: the modules of %s differ in PyTorch (%d, %d)" % (targets, n, got[n], answer))
            sys.exit(1)
    out = subprocess.run([sys.argv[1], "lora", str(L), targets], check=True, capture_output=True, text=True).stdout
    want = dict((line.split()[0], int(line.split()[1])) for line in out.splitlines())
    if got != want:
        for n in sorted(set(got) | set(want)):
            if got.get(n) != want.get(n):
                print("lora %s: %s: PyTorch %s, zerosim %s" % (targets, n, got.get(n), want.get(n)))
        sys.exit(1)
    ones = sorted(n for n in got if got[n] == 1)
    print("ok: lora %s: %d modules' backward hooks as zerosim's rule says; fetched, never released: %s"
          % (targets, len(got), ", ".join(ones)))


L = 3
check(False)
check(True)
print("ok: PyTorch's hooks fire in zerosim's trace's order (%d blocks, 2 steps, untied and tied)" % L)
L = 2
lora_trace(False, "c_attn")
lora_trace(True, "c_attn,attn.c_proj,c_fc,mlp.c_proj")
lora_check("q_proj,v_proj")
lora_check("q_proj,k_proj,v_proj,o_proj,gate_proj,up_proj,down_proj")
lora_check("o_proj,down_proj")

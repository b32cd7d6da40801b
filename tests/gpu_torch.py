#!/usr/bin/env python3
"""Train on a GPU and hold zerosim's --torch-device cuda prediction to it.

    python3 tests/gpu_torch.py --zerosim ./zerosim            # on a machine with a GPU
    python3 tests/gpu_torch.py --zerosim ./zerosim --dry-run  # anywhere: no torch, no GPU

Issue #22's GPU check. For each case (the tiny gpt2, tied, and the tiny
llama, untied, of tests/hf_torch.sh, seq 32, batch 2, with zero_grad
zeros and set_to_none, dropout 0, in fp32 and under bf16 autocast
(`torch.autocast("cuda", dtype=torch.bfloat16)` around the forward and
the loss, as hf_torch.py's --amp bf16 on the CPU), and the tiny gpt2 with
dropout 0.1 (native_dropout's bool masks); GPT-2 small,
data/models/gpt2.json, seq 256, batch 1, dropout 0, fp32 and bf16
autocast) it runs

    zerosim theory --model CFG --framework torch --wrapper none
        --torch-version 2.6 --torch-device cuda --attn eager --precision fp32|amp-bf16
        --seq S --batch B --schemes dp --world 1 --zero-grad Z --allocator cuda

and reads the prediction: the step's tensors (rows[0].schedule:
resident_bytes between steps, peak_bytes) and what the caching allocator
counts with the cuBLAS workspace (rows[0].allocator.allocated_peak_bytes,
docs/schedule.md, "The GPU's caching allocator"). Then, unless --dry-run,
it builds the same model with tests/hf_torch.py's op-by-op modules
(written from Hugging Face's modeling files, cited there; the configs
give the shapes, nothing is downloaded), moves it to the GPU, trains
--steps steps with torch.optim.Adam at this torch's defaults on CUDA
(foreach) and zero_grad(set_to_none=Z), and compares
torch.cuda.max_memory_allocated() over the whole run with the allocator's
predicted peak: it exits 1 where one differs. The bytes between steps
(torch.cuda.memory_allocated() after the last step, 512-byte rounded and
with the workspace) are printed beside the prediction's unrounded ones.

What the GPU run must be: PyTorch 2.6.x built with CUDA (another 2.x is
run, said, and compared all the same: zerosim follows 2.6), nothing else
allocating on the device, the process's first CUDA work this script's.
hf_torch.py's factory calls give no device, so the script builds the
model and runs its forward and backward inside `with torch.device("cuda")`
(Hugging Face's files pass the inputs' device to the same calls), Adam's
step outside it (its step counters stay the CPU's, as in a real run), and
turns hf_torch.mark, its allocator marks, into a no-op. Predicted from source, never run on a GPU when this script
was written (no GPU was lent): its first run is the check. Not a CI test:
tests/ag_exec_phases.sh runs --dry-run, which runs zerosim and parses its
output (python3 alone). docs/schedule.md, "The CPU against CUDA".
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))

# tests/hf_torch.sh's tiny shapes (its tiny-gpt2.json and tiny-llama.json)
TINY_GPT2 = {"model_type": "gpt2", "n_embd": 64, "n_head": 4, "n_layer": 2, "n_positions": 64,
             "vocab_size": 256, "activation_function": "gelu_new", "tie_word_embeddings": True,
             "embd_pdrop": 0.0, "attn_pdrop": 0.0, "resid_pdrop": 0.0}
TINY_LLAMA = {"model_type": "llama", "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
              "num_key_value_heads": 2, "intermediate_size": 160, "max_position_embeddings": 64,
              "vocab_size": 256, "rms_norm_eps": 1e-05, "tie_word_embeddings": False, "hidden_act": "silu",
              "attention_dropout": 0.0}


def cases(tmp, small):
    """(label, config path, seq, batch, zero_grad, the config's dropout, bf16 autocast, recompute)"""
    out = []
    for name, cfg in (("gpt2-tiny", TINY_GPT2), ("llama-tiny", TINY_LLAMA)):
        path = os.path.join(tmp, name + ".json")
        with open(path, "w") as f:
            json.dump(cfg, f)
        for amp in (False, True):
            for zg in ("zeros", "none"):
                out.append((f"{name}{' bf16 autocast' if amp else ''} zero_grad {zg}", path, 32, 2, zg, False, amp,
                            "none"))
        # activation checkpointing (--recompute full): both impls, fp32 and bf16 autocast
        for amp, rc in ((False, "reentrant"), (True, "reentrant"), (True, "non-reentrant")):
            out.append((f"{name}{' bf16 autocast' if amp else ''} recompute {rc} zero_grad none", path, 32, 2,
                        "none", False, amp, rc))
    cfg = dict(TINY_GPT2, embd_pdrop=0.1, attn_pdrop=0.1, resid_pdrop=0.1)
    path = os.path.join(tmp, "gpt2-tiny-dropout.json")
    with open(path, "w") as f:
        json.dump(cfg, f)
    out.append(("gpt2-tiny dropout 0.1 zero_grad none", path, 32, 2, "none", True, False, "none"))
    out.append(("gpt2-tiny dropout 0.1 recompute reentrant zero_grad none", path, 32, 2, "none", True, False,
                "reentrant"))
    if small:
        with open(os.path.join(HERE, "..", "data", "models", "gpt2.json")) as f:
            cfg = json.load(f)
        for k in ("embd_pdrop", "attn_pdrop", "resid_pdrop"):
            cfg[k] = 0.0
        path = os.path.join(tmp, "gpt2-small.json")
        with open(path, "w") as f:
            json.dump(cfg, f)
        out.append(("gpt2 small seq 256 batch 1", path, 256, 1, "none", False, False, "none"))
        out.append(("gpt2 small seq 256 batch 1 bf16 autocast", path, 256, 1, "none", False, True, "none"))
    return out


def predict(zerosim, cfg, seq, batch, zg, amp, rc, tmp):
    cmd = [zerosim, "theory", "--model", cfg, "--framework", "torch", "--wrapper", "none",
           "--torch-version", "2.6", "--torch-device", "cuda", "--attn", "eager",
           "--precision", "amp-bf16" if amp else "fp32",
           "--seq", str(seq), "--batch", str(batch), "--schemes", "dp", "--world", "1", "--zero-grad", zg,
           "--allocator", "cuda", "--out", os.path.join(tmp, "t.json")]
    if rc != "none":
        cmd += ["--recompute", "full", "--recompute-impl", rc]
    print("  $ " + " ".join(cmd))
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if r.returncode != 0:
        sys.exit(f"gpu_torch: zerosim theory failed: {r.stderr.strip()}")
    with open(os.path.join(tmp, "t.json")) as f:
        row = json.load(f)["rows"][0]
    p = {"resident": row["schedule"]["resident_bytes"], "peak": row["schedule"]["peak_bytes"],
         "allocated_peak": row["allocator"]["allocated_peak_bytes"]}
    for k, v in p.items():
        if not isinstance(v, int) or v <= 0:
            sys.exit(f"gpu_torch: zerosim's {k} is {v!r}")
    if p["allocated_peak"] < p["peak"]:
        sys.exit("gpu_torch: zerosim's allocated peak is below its tensors' peak")
    return p


def train(cfg_path, seq, batch, zg, dropout, amp, rc, steps):
    """max_memory_allocated over the run and memory_allocated after it."""
    import torch
    sys.path.insert(0, HERE)
    import hf_torch
    hf_torch.mark = lambda label: None  # its marks are CPU-allocator probes
    # hf_torch.py's modules make their masks and positions without a device:
    # "cuda" is their default inside `dev` alone. Not set_default_device: it
    # would move Adam's torch.tensor(0.0) step counters (the CPU's in a
    # real run, adam.py _init_group) onto the GPU too.
    dev = torch.device("cuda")
    torch.cuda.empty_cache()  # the case before's blocks; cuBLAS's workspace stays, as in zerosim's run
    torch.cuda.reset_peak_memory_stats()
    torch.manual_seed(0)
    a = argparse.Namespace(model=cfg_path, dropout="config" if dropout else "0", tied=None,
                           recompute="none" if rc == "none" else "full",
                           recompute_impl="reentrant" if rc == "none" else rc)
    raw, family, cfg, tied = hf_torch.build(a)
    with dev:
        if family == "gpt2":
            model = hf_torch.GPT2LMHeadModel(cfg, tied, "where", False)
        else:
            model = hf_torch.LlamaForCausalLM(cfg, tied, False, hf_torch.FAMILY_ATTENTION[family])
    model.train()
    hf_torch.input_require_grads(model)  # (under --recompute full: transformers' hook, as hf_torch.py's run)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)  # CUDA's default: foreach
    V = cfg["vocab_size"]
    # the batch made once and held, as hf_torch.py's run() does
    g = torch.Generator(device="cpu").manual_seed(1)
    input_ids = torch.randint(0, V, (batch, seq), generator=g, device="cpu").to("cuda")
    labels = input_ids.clone()
    for _ in range(steps):  # hf_torch.py's one_step: the outputs held until zero_grad is done
        with dev:
            if amp:  # hf_torch.py's --amp bf16 on CUDA: the forward and the loss inside the region
                with torch.autocast("cuda", dtype=torch.bfloat16):
                    outputs = model(input_ids, labels)
            else:
                outputs = model(input_ids, labels)
            loss = outputs[0]
            loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=zg == "none")
        del loss
        outputs = None
    torch.cuda.synchronize()
    return torch.cuda.max_memory_allocated(), torch.cuda.memory_allocated()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--zerosim", default=os.path.join(HERE, "..", "zerosim"))
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--dry-run", action="store_true", help="zerosim's predictions alone: no torch, no GPU")
    ap.add_argument("--no-small", action="store_true", help="leave GPT-2 small out")
    a = ap.parse_args()
    if not a.dry_run:
        import torch
        if not torch.cuda.is_available():
            sys.exit("gpu_torch: no CUDA device (give --dry-run)")
        if not torch.__version__.startswith("2.6"):
            print(f"gpu_torch: torch {torch.__version__}: zerosim follows 2.6; compared all the same")
    status = 0
    with tempfile.TemporaryDirectory() as tmp:
        for label, cfg, seq, batch, zg, dropout, amp, rc in cases(tmp, not a.no_small):
            print(f"{label}:")
            p = predict(a.zerosim, cfg, seq, batch, zg, amp, rc, tmp)
            print(f"  zerosim: tensors {p['resident']:,} B between steps, {p['peak']:,} B peak; "
                  f"allocated peak {p['allocated_peak']:,} B (caching allocator, cuBLAS workspace)")
            if a.dry_run:
                continue
            peak, live = train(cfg, seq, batch, zg, dropout, amp, rc, a.steps)
            same = peak == p["allocated_peak"]
            print(f"  GPU:     max_memory_allocated {peak:,} B ({'equal' if same else 'DIFFERS by %+d' % (peak - p['allocated_peak'])}); "
                  f"memory_allocated after step {a.steps} {live:,} B")
            status |= not same
    return status


if __name__ == "__main__":
    sys.exit(main())

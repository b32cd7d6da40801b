"""bench_tfm_torch -- PyTorch's own training step of GPT-2 small (124M,
tied head) at seq 256, micro-batch 1, fp32, torch.set_num_threads(1):
forward, backward and torch.optim.Adam, the peer of tests/bench_tfm in
`make bench`. The model is tests/tfm_torch.py's. Prints the median of
STEPS steps after one warm-up step, and the BLAS torch was built against.

Then the same step under torch.autocast("cpu", dtype=torch.bfloat16), the
mixed precision PyTorch has on a CPU: fp32 params and Adam, the matmuls
in bf16 (PyTorch's CPU autocast takes no fp16). It is the peer of
zerosim's mixed step only in what it keeps in 16 bits; zerosim's stores
fp16 and multiplies in fp32 (OpenBLAS has no 16-bit product), torch's
multiplies in bf16 through its own kernels, so the ratio compares two
ways of paying for 16-bit storage on a CPU, not two fp16 GEMMs.

    python3 tests/bench_tfm_torch.py [STEPS]
"""
import os
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tfm_torch import Model  # noqa: E402


def gpt2_small():
    d, F, L, V, S = 768, 3072, 12, 50257, 1024
    tensors = [{"name": "wte", "shape": [V, d]}, {"name": "wpe", "shape": [S, d]}]
    for l in range(L):
        for n, s in [("ln1_w", [d]), ("ln1_b", [d]), ("qkv_w", [3 * d, d]), ("qkv_b", [3 * d]),
                     ("proj_w", [d, d]), ("proj_b", [d]), ("ln2_w", [d]), ("ln2_b", [d]),
                     ("fc_w", [F, d]), ("fc_b", [F]), ("fcproj_w", [d, F]), ("fcproj_b", [d])]:
            tensors.append({"name": f"h.{l}.{n}", "shape": s})
    tensors += [{"name": "lnf_w", "shape": [d]}, {"name": "lnf_b", "shape": [d]}]
    return {"family": "gpt2", "d": d, "layers": L, "heads": 12, "kv_heads": 12, "head_dim": 64, "ffn": F,
            "vocab": V, "seq": S, "tied": 1, "eps": 1e-5, "rope_theta": 0.0, "tensors": tensors}


def main():
    steps = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    torch.set_num_threads(1)
    torch.manual_seed(1)
    cfg = gpt2_small()
    model = Model(cfg)
    with torch.no_grad():
        for name, p in model.p.items():
            if name.endswith("ln1_w") or name.endswith("ln2_w") or name == "lnf_w":
                p.fill_(1.0)
            elif not name.endswith("_b"):
                p.normal_(0.0, 0.02)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    T, V = 256, cfg["vocab"]
    n = sum(p.numel() for p in model.parameters())
    median = {}
    for mode in ("fp32", "bf16 autocast"):
        times, cpu = [], []
        for s in range(steps + 1):
            idx = torch.randint(0, V, (1, T))
            tgt = torch.randint(0, V, (1, T))
            t0, c0 = time.perf_counter(), time.process_time()
            opt.zero_grad()
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=mode != "fp32"):
                loss = model(idx, tgt)
            loss.float().backward()
            opt.step()
            if s > 0:
                times.append(time.perf_counter() - t0)
                cpu.append(time.process_time() - c0)
        times.sort()
        cpu.sort()
        median[mode] = times[len(times) // 2]
        print(f"torch {torch.__version__} gpt2 ({n} params) {mode} seq {T} batch 1, 1 thread: "
              f"median {median[mode]:.3f} s per step, {cpu[len(cpu) // 2]:.3f} s CPU, over {steps} "
              f"(loss {loss.item():.3f})")
    print(f"torch bf16 autocast / fp32: {median['bf16 autocast'] / median['fp32']:.2f}")
    with open("/proc/self/maps") as f:  # the BLAS the process really loaded
        blas = sorted({l.split()[-1] for l in f if "blas" in l.lower() and "/" in l})
    print("torch's BLAS: " + (", ".join(blas) if blas else "none found in /proc/self/maps"))


if __name__ == "__main__":
    main()

"""moe_cmp.py WORK: tests/moe_dump's results (WORK/moe.out) against
PyTorch's (WORK/moe.want.f32 and moe.want.json, written by
tests/moe_torch.py): the output and every gradient within 1e-5 + 1e-4
relative of PyTorch's (fp32 products in another order), the same experts
chosen for every token, the same tokens per expert. No torch: numpy
alone, so that a sanitizer build compares its moe_dump against the
PyTorch results tests/torch_cache.py kept. Exit 0 agree, 1 disagree."""
import json
import os
import sys

import numpy as np


def main():
    work = sys.argv[1]
    w = json.load(open(os.path.join(work, "moe.want.json")))
    want = np.fromfile(os.path.join(work, "moe.want.f32"), dtype="<f4")
    got = np.fromfile(os.path.join(work, "moe.out"), dtype="<f4")
    chosen = np.array(w["chosen"], dtype=np.int64)
    BT, K = chosen.shape
    E = len(w["counts"])
    n = sum(w["sizes"])
    if want.size != n or got.size != n + BT * K + E:
        print(f"moe_torch: moe_dump wrote {got.size} values, {n + BT * K + E} expected")
        return 1
    bad = 0
    at = 0
    for name, size in zip(w["names"], w["sizes"]):
        g, t = got[at:at + size], want[at:at + size]
        at += size
        err = np.abs(g - t) - (np.float32(1e-5) + np.float32(1e-4) * np.abs(t))
        # a NaN or an infinity is a difference (err <= 0 is False for NaN)
        over = ~(err <= 0)
        if bool(over.any()):
            i = int(np.argmax(over))
            print(f"moe_torch: {name}[{i}]: zerosim {g[i]:.8g}, PyTorch {t[i]:.8g}")
            bad += 1
    idx = got[at:at + BT * K].reshape(BT, K).astype(np.int64)
    counts = got[at + BT * K:at + BT * K + E].astype(np.int64)
    if not np.array_equal(idx, chosen):
        print("moe_torch: the experts chosen differ")
        bad += 1
    if counts.tolist() != w["counts"]:
        print(f"moe_torch: tokens per expert {counts.tolist()}, PyTorch {w['counts']}")
        bad += 1
    print(f"{w['head']}: tokens per expert {counts.tolist()}, "
          f"out and {len(w['names']) - 1} gradients {'agree' if bad == 0 else 'DISAGREE'}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""A network described in a config (model.kind: net) against the same network in PyTorch.

Trains CONFIG with detrain under one policy, exports its step-0 weights as safetensors
(`detrain export`), asks detrain for the examples of every step (`detrain batches`), then
builds the same network in PyTorch from those weights -- NCHW, the convolutions' HWIO
weights turned OIHW, the dense layers' (in, out) turned (out, in), a flatten in detrain's
(h, w, c) order -- and replays exactly those batches in training mode with torch.optim.SGD
(or AdamW) and the same learning-rate schedule, comparing the losses step by step.

Batch normalisation is replayed as detrain defines it: each canonical shard of the batch
(train.shards; shard s holds rows [floor(s B / S), floor((s + 1) B / S))) normalised by its
own statistics, one torch.nn.functional.batch_norm call per shard in shard order (which
also moves the running statistics shard by shard, as detrain does).

    scripts/net_vs_torch.py --detrain build/detrain --config configs/resnet.yaml \\
        --steps 100 --out results/cpu/resnet/vs-torch

The control beside it: detrain itself at --control (default fast) on the same weights and
batches. Two runs that round differently part as training amplifies their differences (a
network with batch normalisation at a learning rate of 0.1 does so within tens of steps);
the PyTorch replay parting no sooner than detrain's own other level is the evidence that
what differs is rounding, not the network.

Writes OUT/losses.csv (step, detrain, torch, relative difference, detrain at the control
level, its relative difference) and OUT/summary.txt, and prints the summary. Exit 0 when
every step's loss agrees to --tol (relative); 1 otherwise; 77 when PyTorch is not
installed (a skip).
"""
import argparse
import os
import statistics
import sys
import time


def die(msg, code=2):
    print(f"net_vs_torch: {msg}", file=sys.stderr)
    sys.exit(code)


try:
    import torch
    import torch.nn.functional as F
except ImportError:
    print("net_vs_torch: SKIPPED: PyTorch is not installed (scripts/setup.sh --bench)",
          file=sys.stderr)
    sys.exit(77)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_torch import find_fashion_mnist, read_idx  # noqa: E402
from detrain_replay import Side, add_arguments  # noqa: E402
from torch_gpt import lr_at, read_safetensors  # noqa: E402
from torch_net import Net  # noqa: E402


def shard_sizes(B, S):
    """The canonical cut (nets/step.h): shard s holds rows [floor(s B / S), floor((s+1) B / S))."""
    return [(s + 1) * B // S - s * B // S for s in range(S)]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_arguments(ap, "a model.kind: net config", 100)
    ap.add_argument("--control", default="fast", help="detrain's own other level beside it")
    ap.add_argument("--tol", type=float, default=1e-5,
                    help="largest relative loss difference at any step (default 1e-5)")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    side = Side("net_vs_torch", a, [a.policy, a.control], "net")
    model, train, dataset = side.cfg["model"], side.cfg["train"], side.cfg["dataset"]
    st_path, rows = side.st_path, side.rows
    det, ctl = side.losses(a.policy), side.losses(a.control)
    folder = find_fashion_mnist(dataset.get("path") or "")
    if not folder:
        die("Fashion-MNIST not found (dataset.path, $DETRAIN_DATA, /usr/share/datasets/fashion-mnist)")
    x_all = read_idx(folder, "train-images-idx3-ubyte").to(torch.float32) / 255.0  # as detrain
    y_all = read_idx(folder, "train-labels-idx1-ubyte").to(torch.int64)
    w, _ = read_safetensors(st_path)
    net = Net(model["network"], w)
    opt = train["optimizer"]
    if opt["kind"] == "adamw":
        optim = torch.optim.AdamW(net.parameters(), lr=opt["lr"], betas=(opt["beta1"], opt["beta2"]),
                                  eps=opt["eps"], weight_decay=opt["weight_decay"])
    else:
        optim = torch.optim.SGD(net.parameters(), lr=opt["lr"], momentum=opt["momentum"],
                                weight_decay=opt["weight_decay"])
    B, S = train["batch"], train["shards"]
    shards = shard_sizes(B, S)
    out_rows, worst, torch_ms = [], 0.0, []
    for s in range(1, a.steps + 1):
        t0 = time.perf_counter()
        idx = torch.tensor([int(r["index"]) for r in rows[(s - 1) * B:s * B]])
        x = x_all[idx].reshape(B, 1, 28, 28)
        loss = F.cross_entropy(net.forward(x, True, shards), y_all[idx])
        for g in optim.param_groups:
            g["lr"] = lr_at(s, opt["lr"], opt["warmup"], train["steps"], opt["schedule"] == "cosine")
        optim.zero_grad()
        loss.backward()
        if opt.get("clip_norm", 0) > 0:
            torch.nn.utils.clip_grad_norm_(net.parameters(), opt["clip_norm"])
        optim.step()
        torch_ms.append((time.perf_counter() - t0) * 1e3)
        tl, dl = float(loss.detach()), det[s]
        rel = abs(tl - dl) / abs(dl)
        worst = max(worst, rel)
        out_rows.append((s, dl, tl, rel, ctl[s], abs(ctl[s] - dl) / abs(dl)))
    with open(os.path.join(a.out, "losses.csv"), "w") as f:
        f.write(f"step,detrain,torch,rel_diff,detrain_{a.control},{a.control}_rel_diff\n")
        for r in out_rows:
            f.write(f"{r[0]},{r[1]:.9g},{r[2]:.9g},{r[3]:.3e},{r[4]:.9g},{r[5]:.3e}\n")
    ok = worst <= a.tol

    def first_beyond(col):
        return next((r[0] for r in out_rows if r[col] > a.tol), None)
    ft, fc = first_beyond(3), first_beyond(5)
    ctl_worst = max(r[5] for r in out_rows)
    det_ms = side.step_ms()
    skip = min(5, a.steps // 4)
    summary = (
        f"config {a.config}, policy {a.policy}, {a.steps} steps of {B} in {S} shards, "
        f"{a.threads} threads; PyTorch {torch.__version__}\n"
        f"first loss (initial weights): detrain {out_rows[0][1]:.9g}, torch {out_rows[0][2]:.9g}, "
        f"relative difference {out_rows[0][3]:.2e}\n"
        f"largest relative difference over {a.steps} steps: {worst:.2e} (tolerance {a.tol:g}); "
        f"first step beyond it: {ft or 'none'}\n"
        f"control, detrain {a.control} against detrain {a.policy}: largest {ctl_worst:.2e}, "
        f"first step beyond the tolerance: {fc or 'none'}\n"
        f"last loss: detrain {out_rows[-1][1]:.6g}, torch {out_rows[-1][2]:.6g}\n"
        f"step time, median after {skip} steps (one run each, not interleaved; the benchmark is "
        f"make bench): detrain {a.policy} {statistics.median(det_ms[skip:]):.3f} ms, torch "
        f"replay {statistics.median(torch_ms[skip:]):.3f} ms (batch norm per shard)\n"
        f"{'agree' if ok else 'DISAGREE'}\n")
    with open(os.path.join(a.out, "summary.txt"), "w") as f:
        f.write(summary)
    print(summary, end="")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()

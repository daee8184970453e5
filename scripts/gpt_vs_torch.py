#!/usr/bin/env python3
"""detrain's GPT against the same model in PyTorch, step by step.

Trains CONFIG (a model.kind: gpt config) with detrain under one policy, exports its
step-0 weights as safetensors (`detrain export`), asks detrain for the windows of every
step (`detrain batches`), then builds the same transformer in PyTorch from those weights,
replays exactly those batches with torch.optim.AdamW and the same learning-rate schedule,
and compares the losses step by step: the first (the initial weights: only the forward
arithmetic differs) and the curve.

    scripts/gpt_vs_torch.py --detrain build/detrain --config configs/gpt.yaml \\
        --steps 200 --out results/cpu/gpt/vs-torch

Writes OUT/losses.csv (step, detrain, torch, relative difference) and OUT/summary.txt,
and prints the summary. Exit 0 when the first loss agrees to --first-tol (relative) and
every step to --curve-tol; 1 otherwise; 77 when PyTorch is not installed (a skip).
"""
import argparse
import os
import statistics
import sys
import time


def die(msg, code=2):
    print(f"gpt_vs_torch: {msg}", file=sys.stderr)
    sys.exit(code)


try:
    import torch
    import torch.nn.functional as F
except ImportError:
    print("gpt_vs_torch: SKIPPED: PyTorch is not installed (Debian: apt-get install "
          "python3-torch)", file=sys.stderr)
    sys.exit(77)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from detrain_replay import Side, add_arguments  # noqa: E402
from torch_gpt import GPT, lr_at, read_corpus, read_safetensors  # noqa: E402  (bench_torch.py's model)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_arguments(ap, "a model.kind: gpt config", 200)
    ap.add_argument("--first-tol", type=float, default=1e-6)
    ap.add_argument("--curve-tol", type=float, default=0.01)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    side = Side("gpt_vs_torch", a, [a.policy], "gpt")
    model, train, dataset = side.cfg["model"], side.cfg["train"], side.cfg["dataset"]
    if model.get("dropout", 0) > 0:
        die(f"{a.config}: model.dropout is {model['dropout']}: PyTorch cannot draw detrain's "
            "masks; compare with --set model.dropout=0")
    st_path, rows, det = side.st_path, side.rows, side.losses(a.policy)
    corpus = dataset["path"] or "/usr/share/games/fortunes"
    data = torch.tensor(list(read_corpus(corpus)), dtype=torch.long)
    w, meta = read_safetensors(st_path)
    T, D, H, L = model["context"], model["d_model"], model["heads"], model["layers"]
    tie = model.get("tie_embeddings", True)
    net = GPT(w, T, D, H, L, tie)
    opt = train["optimizer"]
    if opt["kind"] != "adamw":
        die("this comparison replays AdamW (train.optimizer.kind: adamw)")
    adam = torch.optim.AdamW(net.parameters(), lr=opt["lr"],
                             betas=(opt["beta1"], opt["beta2"]), eps=opt["eps"],
                             weight_decay=opt["weight_decay"])
    B = train["batch"]
    out_rows, worst, torch_ms = [], 0.0, []
    for s in range(1, a.steps + 1):
        t0 = time.perf_counter()
        idx = [int(r["index"]) for r in rows[(s - 1) * B:s * B]]
        win = torch.stack([data[i:i + T + 1] for i in idx])
        logits = net(win[:, :T])
        loss = F.cross_entropy(logits.reshape(-1, 256), win[:, 1:].reshape(-1))
        for g in adam.param_groups:
            g["lr"] = lr_at(s, opt["lr"], opt["warmup"], train["steps"],
                            opt["schedule"] == "cosine")
        adam.zero_grad()
        loss.backward()
        if opt.get("clip_norm", 0) > 0:
            torch.nn.utils.clip_grad_norm_(net.parameters(), opt["clip_norm"])
        adam.step()
        torch_ms.append((time.perf_counter() - t0) * 1e3)
        tl, dl = float(loss), det[s]
        rel = abs(tl - dl) / abs(dl)
        worst = max(worst, rel)
        out_rows.append((s, dl, tl, rel))
    with open(os.path.join(a.out, "losses.csv"), "w") as f:
        f.write("step,detrain,torch,rel_diff\n")
        for r in out_rows:
            f.write(f"{r[0]},{r[1]:.9g},{r[2]:.9g},{r[3]:.3e}\n")
    first = out_rows[0][3]
    ok = first <= a.first_tol and worst <= a.curve_tol
    det_ms = side.step_ms()
    skip = min(5, a.steps // 4)  # warm-up steps left out on both sides
    summary = (
        f"config {a.config}, policy {a.policy}, {a.steps} steps of {B} windows of {T + 1} "
        f"bytes, {a.threads} threads; PyTorch {torch.__version__}\n"
        f"first loss (initial weights): detrain {out_rows[0][1]:.9g}, torch "
        f"{out_rows[0][2]:.9g}, relative difference {first:.2e} (tolerance {a.first_tol:g})\n"
        f"largest relative difference over {a.steps} steps: {worst:.2e} (tolerance "
        f"{a.curve_tol:g})\n"
        f"last loss: detrain {out_rows[-1][1]:.6g}, torch {out_rows[-1][2]:.6g}\n"
        f"step time, median after {skip} steps (one run each, one after the other, not "
        f"interleaved): detrain {a.policy} {statistics.median(det_ms[skip:]):.3f} ms "
        f"(times.csv, hashing apart), torch eager {statistics.median(torch_ms[skip:]):.3f} ms "
        f"(forward, backward, clipping, AdamW)\n"
        f"{'agree' if ok else 'DISAGREE'}\n")
    with open(os.path.join(a.out, "summary.txt"), "w") as f:
        f.write(summary)
    print(summary, end="")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()

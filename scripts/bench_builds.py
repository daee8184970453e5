#!/usr/bin/env python3
"""Step times of two builds of detrain side by side: `detrain bench` of each config with
build A and build B in turn (A B B A, `--rounds` times), and per config and policy the
median step time of each build and the median of the paired ratios B / A.

For a change that must not move step times (a refactor): A the build before it, B after.
Both builds run on this machine in one call, alternated, so drift in the machine's speed
falls on both alike.

Usage: scripts/bench_builds.py A_DETRAIN B_DETRAIN [--rounds 3] [--steps 60] [--warmup 10]
       [--config CONFIG[:POLICIES]]...   (default: quickstart, lenet, bnn, gpt; fast and portable)
Prints a table (markdown) on stdout."""
import argparse
import re
import statistics
import subprocess
import sys

DEFAULT = ["configs/quickstart.yaml", "configs/lenet.yaml", "configs/bnn.yaml",
           "configs/gpt.yaml"]


def bench(exe, config, policies, steps, warmup):
    """{policy: step ms} from one `detrain bench` run: fast's own median, and each other
    policy's pol_ms from the overhead table (its median over the alternated steps)."""
    cmd = [exe, "bench", config, "--steps", str(steps), "--warmup", str(warmup),
           "--set", f"policies=[{policies}]"]
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"bench_builds: {' '.join(cmd)} failed:\n{out.stderr[-2000:]}")
    text = out.stdout
    got = {}
    m = re.search(r"step \(update\) median\s+([0-9.]+) ms", text)
    if m:
        got["fast"] = float(m.group(1))
    for line in text.split("\n"):
        f = line.split()
        if len(f) >= 3 and f[0] in policies.replace(" ", "").split(",") and f[0] != "fast":
            try:
                got[f[0]] = float(f[2])
            except ValueError:
                pass
    return got


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("a")
    ap.add_argument("b")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--config", action="append")
    a = ap.parse_args()
    rows = []
    for spec in a.config or DEFAULT:
        config, _, policies = spec.partition(":")
        policies = policies or "fast, portable"
        runs = {"a": [], "b": []}
        for r in range(a.rounds):
            order = ("a", "b", "b", "a")
            for which in order:
                exe = a.a if which == "a" else a.b
                runs[which].append(bench(exe, config, policies, a.steps, a.warmup))
        for pol in [p.strip() for p in policies.split(",")]:
            ta = [x[pol] for x in runs["a"] if pol in x]
            tb = [x[pol] for x in runs["b"] if pol in x]
            if not ta or not tb:
                continue
            ratios = [y / x for x, y in zip(ta, tb)]
            rows.append((config, pol, statistics.median(ta), statistics.median(tb),
                         statistics.median(ratios), min(ratios), max(ratios)))
    print(f"rounds {a.rounds} x (A B B A), {a.steps} steps after {a.warmup} warm-up each")
    print("| config | policy | A ms | B ms | B/A median | B/A range |")
    print("|---|---|---:|---:|---:|---|")
    for c, p, ta, tb, r, lo, hi in rows:
        print(f"| {c} | {p} | {ta:.3f} | {tb:.3f} | {r:.3f} | {lo:.3f}-{hi:.3f} |")


if __name__ == "__main__":
    main()

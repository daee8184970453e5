#!/usr/bin/env python3
"""The overhead and noise table per architecture (issue 64), from `detrain run
configs/overhead_matrix.yaml` outputs: one folder per device, results/<device>/overhead_matrix.

  python3 scripts/overhead_table.py results/nvidia-h200/overhead_matrix [MORE...] \
      --md OUT.md --csv OUT.csv

Per model (matrix entry) and policy: the median step time, its ratio to `fast` with the
95% bootstrap interval (alternated steps, the entry's overhead.csv), the hashing share of
a hashed step (hash / (step + hash), inline hashing), the host waits per step (a GPU's,
from each replica's run.json, the step's end included: per step after the first where the
run.json has them, the first step's beside), the distinct final digests of the
replicas and the first step where they part. Then the noise cells (entries with several
`vary` settings): accuracy mean and spread, pairwise churn, per-class spread. Each folder
is one architecture, named by its parent folder (results/<device>/...); with several, the
ratio and noise columns stand side by side. Reads only what `detrain report` wrote
(<entry>/summary.csv) and the replicas' run.json; standard library only."""
import argparse
import csv
import glob
import json
import math
import os
import sys


def arch_name(folder):
    """results/nvidia-h200/overhead_matrix -> nvidia-h200."""
    parent = os.path.basename(os.path.dirname(os.path.abspath(folder)))
    return parent or os.path.basename(os.path.abspath(folder))


def num(s):
    try:
        v = float(s)
    except (TypeError, ValueError):
        return math.nan
    return v


WAIT_KEYS = ("host_waits_per_step", "host_waits_first_step", "host_waits_steady")


def waits_of(entry_dir, cell):
    """{key: mean over a cell's replicas} for WAIT_KEYS (every step run; the first step's;
    per step after the first), NaN where no replica recorded it (an older run.json has the
    first alone)."""
    vals = {k: [] for k in WAIT_KEYS}
    for p in sorted(glob.glob(os.path.join(entry_dir, cell, "replica-*", "run.json"))):
        try:
            with open(p) as f:
                j = json.load(f)
        except (OSError, ValueError):
            continue
        for k in WAIT_KEYS:
            if k in j:
                vals[k].append(float(j[k]))
    return {k: sum(v) / len(v) if v else math.nan for k, v in vals.items()}


def waits_text(w):
    """Steady waits a step with the first step's in parentheses; the all-steps mean where
    the split was not recorded."""
    if not math.isnan(w["host_waits_steady"]):
        return f"{w['host_waits_steady']:.2f} ({fmt(w['host_waits_first_step'], '.0f')})"
    return fmt(w["host_waits_per_step"], ".2f")


def read_arch(folder):
    """{entry: [row dict + waits]} for every entry folder with a summary.csv, file order."""
    entries = {}
    order = []
    mj = os.path.join(folder, "matrix.json")
    if os.path.exists(mj):
        try:
            with open(mj) as f:
                order = [e.get("name") for e in json.load(f).get("entries", [])]
        except (OSError, ValueError, AttributeError):
            order = []
    names = [n for n in order if n] or sorted(os.listdir(folder))
    for name in names:
        d = os.path.join(folder, name)
        s = os.path.join(d, "summary.csv")
        if not os.path.isfile(s):
            continue
        with open(s, newline="") as f:
            rows = list(csv.DictReader(f))
        for r in rows:
            r["waits"] = waits_of(d, r["cell"])
        entries[name] = rows
    return entries


def fmt(v, spec, empty="-"):
    return empty if v is None or (isinstance(v, float) and math.isnan(v)) else format(v, spec)


def ratio_text(r):
    v = r.get("overhead_verdict", "")
    if v == "baseline":
        return "1 (baseline)"
    ratio, lo, hi = num(r["overhead_ratio"]), num(r["overhead_ci_lo"]), num(r["overhead_ci_hi"])
    if math.isnan(ratio):
        return "-"
    t = f"{ratio:.2f}x"
    if not math.isnan(lo):
        t += f" [{lo:.2f}, {hi:.2f}]"
    return t


def hash_share(r):
    s, h = num(r["step_ms_median"]), num(r["hash_ms_median"])
    return 100.0 * h / (s + h) if s + h > 0 else math.nan


def divergence(r):
    d = r.get("distinct_final_digests", "")
    first = r.get("first_divergent_step", "")
    t = f"{d}/{r.get('completed', '')}"
    if first not in ("", "-1"):
        t += f", part at {first}"
        if r.get("first_divergent_tensor"):
            t += f" ({r['first_divergent_tensor']})"
    return t


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("folders", nargs="+", help="results/<device>/overhead_matrix folders")
    ap.add_argument("--md", help="write the markdown here (default: stdout)")
    ap.add_argument("--csv", help="write one row per architecture, entry and cell here")
    a = ap.parse_args(argv)
    archs = []
    for fo in a.folders:
        if not os.path.isdir(fo):
            ap.error(f"{fo}: not a folder (a `detrain run configs/overhead_matrix.yaml --out` folder)")
        archs.append((arch_name(fo), read_arch(fo)))
    if not any(e for _, e in archs):
        ap.error("no entry with a summary.csv in " + ", ".join(a.folders))
    out = []
    out.append("# The overhead and noise table, per architecture\n")
    out.append("Made by `scripts/overhead_table.py " + " ".join(a.folders) + "` from `detrain run "
               "configs/overhead_matrix.yaml` (each entry's summary.csv and its replicas' "
               "run.json). Ratio: median step time against `fast`, 95% bootstrap interval "
               "of alternated steps; hash: share of a hashed step spent hashing (inline); "
               "waits: the host's waits for the device per step after the first, the step's "
               "end included, the first step's in parentheses (an older run: the mean over "
               "every step); "
               "digests: distinct final digests of replicas that share every seed / "
               "completed, and the first step where two part.\n")
    rows_csv = []
    entry_names = []
    for _, ent in archs:
        for n in ent:
            if n not in entry_names:
                entry_names.append(n)
    for name in entry_names:
        noise = any(len({r["vary"] for r in ent.get(name, [])}) > 1 for _, ent in archs)
        out.append(f"\n## {name}\n")
        if noise:
            out.append("| architecture | vary | policy | digests | test acc mean | acc std | "
                       "churn mean | per-class std mean | step ms |")
            out.append("|---|---|---|---|--:|--:|--:|--:|--:|")
        else:
            out.append("| architecture | policy | step ms | ratio to fast [95% CI] | hash % | "
                       "waits/step | digests |")
            out.append("|---|---|--:|---|--:|--:|---|")
        for arch, ent in archs:
            for r in ent.get(name, []):
                if noise:
                    out.append(f"| {arch} | {r['vary']} | {r['policy']} | {divergence(r)} | "
                               f"{fmt(num(r['test_acc_mean']), '.4f')} | "
                               f"{fmt(num(r['test_acc_std']), '.4f')} | "
                               f"{fmt(num(r['churn_mean']), '.4f')} | "
                               f"{fmt(num(r['class_acc_std_mean']), '.4f')} | "
                               f"{fmt(num(r['step_ms_median']), '.3f')} |")
                else:
                    out.append(f"| {arch} | {r['policy']} | {fmt(num(r['step_ms_median']), '.3f')} | "
                               f"{ratio_text(r)} | {fmt(hash_share(r), '.1f')} | "
                               f"{waits_text(r['waits'])} | {divergence(r)} |")
                rows_csv.append({"architecture": arch, "entry": name, **{k: r[k] for k in (
                    "cell", "vary", "policy", "completed", "distinct_final_digests",
                    "first_divergent_step", "first_divergent_tensor", "test_acc_mean",
                    "test_acc_std", "churn_mean", "class_acc_std_mean", "step_ms_median",
                    "hash_ms_median", "overhead_ratio", "overhead_ci_lo", "overhead_ci_hi",
                    "overhead_verdict")},
                    "hash_share_pct": fmt(hash_share(r), ".2f", ""),
                    **{k: fmt(r["waits"][k], ".3f", "") for k in WAIT_KEYS}})
    text = "\n".join(out) + "\n"
    if a.md:
        with open(a.md + ".tmp", "w") as f:
            f.write(text)
        os.replace(a.md + ".tmp", a.md)
    else:
        sys.stdout.write(text)
    if a.csv and rows_csv:
        with open(a.csv + ".tmp", "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(rows_csv[0].keys()))
            w.writeheader()
            w.writerows(rows_csv)
        os.replace(a.csv + ".tmp", a.csv)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

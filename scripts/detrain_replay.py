"""The detrain side of a replay in PyTorch (scripts/gpt_vs_torch.py, scripts/net_vs_torch.py):
train a config with detrain for a few steps, export its step-0 weights as safetensors and
list the examples of every step, so a script can rebuild the model elsewhere and replay
exactly those batches. No torch here."""
import csv
import json
import os
import subprocess
import sys


def die(tool, msg, code=2):
    print(f"{tool}: {msg}", file=sys.stderr)
    sys.exit(code)


def run(tool, cmd, **kw):
    """cmd's stdout; its failure ends the script with its output."""
    r = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if r.returncode != 0:
        die(tool, f"{' '.join(cmd)} failed ({r.returncode}):\n{r.stdout}{r.stderr}")
    return r.stdout


def add_arguments(ap, config_help, steps):
    """The options every replay takes."""
    ap.add_argument("--detrain", required=True, help="the detrain binary")
    ap.add_argument("--config", required=True, help=config_help)
    ap.add_argument("--steps", type=int, default=steps)
    ap.add_argument("--policy", default="portable")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--out", required=True, help="a new folder")
    ap.add_argument("--set", action="append", default=[], help="more detrain --set")


class Side:
    """detrain's run of a.config into a.out/detrain under `policies` (the first is the one
    replayed), one replica each, a.steps steps at a.threads threads, then its step-0 weights
    in a.out/step0.safetensors (st_path) and every step's examples (rows: step, row, index).
    cfg is the resolved config.json; losses(policy) a policy's loss by step."""

    def __init__(self, tool, a, policies, kind):
        if os.path.exists(a.out) and os.listdir(a.out):
            die(tool, f"{a.out}: exists and is not empty; choose a new folder")
        os.makedirs(a.out, exist_ok=True)
        sets = [f"train.steps={a.steps}", f"policies=[{', '.join(policies)}]", "replicas=1",
                f"backend.threads={a.threads}", "report.overhead_samples=0"] + a.set
        setargs = [x for s in sets for x in ("--set", s)]
        self.run_dir = os.path.join(a.out, "detrain")
        run(tool, [a.detrain, "run", a.config, "--out", self.run_dir, "--quiet"] + setargs,
            env={**os.environ, "DETRAIN_GNUPLOT": "none"})
        with open(os.path.join(self.run_dir, "config.json")) as f:
            self.cfg = json.load(f)
        if self.cfg["model"]["kind"] != kind:
            die(tool, f"{a.config}: model.kind is {self.cfg['model']['kind']}, not {kind}")
        self.replica = os.path.join(self.run_dir, policies[0], "replica-0")
        self.st_path = os.path.join(a.out, "step0.safetensors")
        run(tool, [a.detrain, "export", self.replica, "--step", "0", "--safetensors", self.st_path])
        batches = run(tool, [a.detrain, "batches", a.config, "--steps", str(a.steps)] + setargs)
        self.rows = list(csv.DictReader(batches.splitlines()))

    def losses(self, policy):
        with open(os.path.join(self.run_dir, policy, "replica-0", "trace.csv")) as f:
            return {int(r["step"]): float(r["loss"]) for r in csv.DictReader(f) if r["loss"]}

    def step_ms(self):
        """The replayed policy's step times (times.csv, hashing apart)."""
        with open(os.path.join(self.replica, "times.csv")) as f:
            return [float(r["step_ms"]) for r in csv.DictReader(f)]

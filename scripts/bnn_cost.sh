#!/usr/bin/env bash
# scripts/bnn_cost.sh [ROUNDS]: the Bayesian MLP's step against a plain MLP of its widths
# (784-400-400-10, batch 128), at fast and portable: the plain MLP (configs/quickstart.yaml
# at those widths), the weights estimator (configs/bnn.yaml, 4 weight samples) and the local
# reparameterisation estimator (configs/bnn-local.yaml), each `detrain bench ... --steps 40`
# in ROUNDS interleaved rounds (default 3), then the medians and their ratios. Issue 69's
# target: the Bayesian MLP at <= 3x a plain MLP's step. `make bench` runs it;
# scripts/results.sh bnn-local keeps its output as results/cpu/bnn-local/steps.txt.
set -euo pipefail
detrain=${DETRAIN:-build/detrain}
rounds=${1:-3}
declare -A args=([mlp]="configs/quickstart.yaml --set model.hidden=[400,400] --set train.batch=128"
                 [bnn]="configs/bnn.yaml" [bnn-local]="configs/bnn-local.yaml")
rows=$(mktemp)
trap 'rm -f "$rows"' EXIT
echo "# detrain bench CONFIG --steps 40 --warmup 5 --set policies=[POLICY]: the step (update) median, ms"
echo "# mlp = configs/quickstart.yaml at the Bayesian MLP's widths (--set model.hidden=[400,400] --set train.batch=128)"
echo "# cpu: $(LC_ALL=C lscpu | sed -n 's/^Model name: *//p'), $(nproc) CPUs; detrain: $("$detrain" --version | head -1)"
for r in $(seq 1 "$rounds"); do
  for pol in fast portable; do
    for c in mlp bnn bnn-local; do
      # shellcheck disable=SC2086 # args holds the config and its --set words
      ms=$("$detrain" bench ${args[$c]} --steps 40 --warmup 5 --set "policies=[$pol]" 2>&1 |
             sed -n 's/.*step (update) median *\([0-9.]*\) ms.*/\1/p')
      [ -n "$ms" ] || { echo "bnn_cost.sh: no step time from $c at $pol" >&2; exit 1; }
      echo "round $r $c $pol $ms" | tee -a "$rows"
    done
  done
done
python3 - "$rows" <<'PY'
import statistics, sys
t = {}
for line in open(sys.argv[1]):
    w = line.split()
    t.setdefault((w[2], w[3]), []).append(float(w[4]))
for pol in ("fast", "portable"):
    m = {c: statistics.median(t[(c, pol)]) for c in ("mlp", "bnn", "bnn-local")}
    print(f"median {pol} mlp {m['mlp']:.3f} bnn {m['bnn']:.3f} bnn-local {m['bnn-local']:.3f} ms; "
          f"bnn/mlp {m['bnn'] / m['mlp']:.2f}x, bnn-local/mlp {m['bnn-local'] / m['mlp']:.2f}x "
          f"(target <= 3x)")
PY

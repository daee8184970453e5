#!/bin/bash
# detrain (fast, portable) against PyTorch on the CPU (default, deterministic), on every
# model: the quickstart MLP at batch 256 and 64, LeNet at 128, the Bayesian MLP's widths
# (configs/bnn.yaml) -- detrain's Bayesian MLP against a plain PyTorch MLP of those widths,
# so that row prices the ensemble too -- the tiny GPT (configs/gpt.yaml, batch 16; the
# same transformer in PyTorch: scripts/torch_gpt.py) and nanoGPT's CPU shape (the GPT
# quickstart, configs/gpt-quickstart.yaml: 4 x 128, context 64, batch 12) and the ResNet
# (configs/resnet.yaml, batch 128; PyTorch's batch normalisation over the whole batch, its
# default). Interleaved in rounds (each round runs every
# workload's four programs one after the other) so that all see the same machine state;
# then the median of each over the rounds and detrain's against PyTorch's: one file.
#   bash scripts/vs_torch.sh [ROUNDS [NAME...]] > vs-torch.txt  (make bench; scripts/results.sh)
# NAME limits the workloads to those configs (quickstart, lenet, bnn, gpt, gpt-quickstart, resnet),
# e.g. `3 gpt`.
# DETRAIN: the detrain binary (default build/detrain). PYTHON: a Python with torch (default:
# scripts/torch_python.sh's pick -- make bench's venv .venv-torch/ with pip's PyTorch, else
# python3, else Debian's /usr/bin/python3). Exit 77 without PyTorch. Same threads on both sides: detrain's config
# (backend.threads), PyTorch's --threads from the same config (scripts/bench_torch.py).
set -euo pipefail
detrain=${DETRAIN:-build/detrain}
rounds=${1:-3}
only=("${@:2}")
py=$(bash "$(dirname "${BASH_SOURCE[0]}")/torch_python.sh") || exit 77
rows=$(mktemp)
trap 'rm -f "$rows"' EXIT
echo "# $("$detrain" --version 2>/dev/null | head -1); $("$py" -c 'import torch; print("torch", torch.__version__)'); $(nproc) CPUs; $rounds rounds"
for round in $(seq 1 "$rounds"); do
  for spec in "configs/quickstart.yaml 256 300" "configs/quickstart.yaml 64 300" \
              "configs/lenet.yaml 128 60" "configs/bnn.yaml 128 40" "configs/bnn-local.yaml 128 60" \
              "configs/gpt.yaml 16 60" \
              "configs/gpt-quickstart.yaml 12 30" "configs/resnet.yaml 128 30"; do
    set -- $spec
    cfg=$1 batch=$2 steps=$3
    name=$(basename "$cfg" .yaml)
    if [ ${#only[@]} -gt 0 ] && [[ " ${only[*]} " != *" $name "* ]]; then continue; fi
    for pol in fast portable; do
      ms=$("$detrain" bench "$cfg" --steps "$steps" --warmup 5 --set train.batch="$batch" \
             --set "policies=[$pol]" 2>&1 | sed -n 's/.*step (update) median *\([0-9.]*\) ms.*/\1/p')
      echo "round $round $name batch $batch detrain-$pol $ms" | tee -a "$rows"
    done
    for mode in default deterministic; do
      ms=$("$py" scripts/bench_torch.py --device cpu --config "$cfg" --batch "$batch" --modes "$mode" \
             --steps "$steps" --warmup 5 2>/dev/null | sed -n 's/.*median \([0-9.]*\) ms.step.*/\1/p' | head -1)
      echo "round $round $name batch $batch torch-$mode $ms" | tee -a "$rows"
    done
  done
done
# Medians over the rounds, and detrain's median against PyTorch's (the ratios README quotes).
awk '
  { key = $3 " batch " $5; col = $6; v[key, col, ++n[key, col]] = $7; keys[key]; cols[col] }
  END {
    for (k in keys) {
      for (c in cols) {
        m = n[k, c]; for (i = 1; i <= m; i++) a[i] = v[k, c, i]
        for (i = 1; i <= m; i++) for (j = i + 1; j <= m; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
        med[k, c] = a[int((m + 1) / 2)]
        printf "median %s %s %.3f\n", k, c, med[k, c]
      }
      printf "ratio %s fast/torch-default %.2f\n", k, med[k, "detrain-fast"] / med[k, "torch-default"]
      printf "ratio %s portable/torch-default %.2f\n", k, med[k, "detrain-portable"] / med[k, "torch-default"]
      printf "ratio %s fast/torch-deterministic %.2f\n", k, med[k, "detrain-fast"] / med[k, "torch-deterministic"]
      printf "ratio %s portable/torch-deterministic %.2f\n", k, med[k, "detrain-portable"] / med[k, "torch-deterministic"]
      printf "ratio %s portable/fast %.2f\n", k, med[k, "detrain-portable"] / med[k, "detrain-fast"]
    }
  }' "$rows" | sort

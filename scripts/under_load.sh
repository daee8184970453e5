#!/bin/bash
# Step times on a shared machine: detrain `fast` and PyTorch's default, each alone and with
# one CPU-bound process beside it (a busy shell loop, as a second user's job would be), on the
# quickstart MLP at batch 64 and 256 and the tiny GPT (configs/gpt.yaml, batch 16). Rounds
# alternate the two conditions and the two programs so that all see the same machine; then
# the median of each over the rounds and each program's slowdown under load (loaded / alone).
# A pool whose workers spin while one is descheduled would show as detrain slowing far more
# than PyTorch; two threads sharing what one core leaves give at most about 2x.
#   bash scripts/under_load.sh [ROUNDS] > under-load.txt   (scripts/results.sh under-load)
# DETRAIN, PYTHON as scripts/vs_torch.sh (exit 77 without PyTorch).
set -euo pipefail
detrain=${DETRAIN:-build/detrain}
rounds=${1:-3}
py=$(bash "$(dirname "${BASH_SOURCE[0]}")/torch_python.sh") || exit 77
rows=$(mktemp)
hog=
stop_hog() { if [ -n "$hog" ]; then kill "$hog" 2>/dev/null || true; wait "$hog" 2>/dev/null || true; hog=; fi; }
trap 'stop_hog; rm -f "$rows"' EXIT
echo "# $("$detrain" --version 2>/dev/null | head -1); $("$py" -c 'import torch; print("torch", torch.__version__)'); $(nproc) CPUs ($(sed -n 's/^model name[[:space:]]*: *//p' /proc/cpuinfo | head -1)); $rounds rounds; load: one busy loop"
for round in $(seq 1 "$rounds"); do
  for load in alone loaded; do
    if [ "$load" = loaded ]; then
      bash -c 'while :; do :; done' &
      hog=$!
      sleep 0.5
    fi
    for spec in "configs/quickstart.yaml 64 300" "configs/quickstart.yaml 256 300" "configs/gpt.yaml 16 40"; do
      set -- $spec
      cfg=$1 batch=$2 steps=$3 name=$(basename "$1" .yaml)
      ms=$("$detrain" bench "$cfg" --steps "$steps" --warmup 5 --set train.batch="$batch" \
             --set "policies=[fast]" 2>&1 | sed -n 's/.*step (update) median *\([0-9.]*\) ms.*/\1/p')
      echo "round $round $name-b$batch $load detrain-fast $ms" | tee -a "$rows"
      ms=$("$py" scripts/bench_torch.py --device cpu --config "$cfg" --batch "$batch" --modes default \
             --steps "$steps" --warmup 5 2>/dev/null | sed -n 's/.*median \([0-9.]*\) ms.step.*/\1/p' | head -1)
      echo "round $round $name-b$batch $load torch-default $ms" | tee -a "$rows"
    done
    stop_hog
  done
done
awk '
  { key = $3 " " $5; v[key, $4, ++n[key, $4]] = $6; keys[key] }
  END {
    for (k in keys) for (c = 0; c < 2; c++) {
      l = c ? "loaded" : "alone"; m = n[k, l]
      for (i = 1; i <= m; i++) a[i] = v[k, l, i]
      for (i = 1; i <= m; i++) for (j = i + 1; j <= m; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
      med[k, l] = a[int((m + 1) / 2)]
      printf "median %s %s %.3f\n", k, l, med[k, l]
    }
    for (k in keys) printf "slowdown %s %.2f\n", k, med[k, "loaded"] / med[k, "alone"]
  }' "$rows" | sort

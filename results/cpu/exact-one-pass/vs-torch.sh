#!/bin/bash
# detrain (fast, portable) against PyTorch CPU (default, deterministic), interleaved in
# rounds so that both see the same machine state. Run from the repository root:
#   bash results/cpu/exact-one-pass/vs-torch.sh > results/cpu/exact-one-pass/vs-torch.txt
# DETRAIN: the detrain binary (default build/detrain); scripts/results.sh sets it.
set -e
detrain=${DETRAIN:-build/detrain}
rows=$(mktemp)
trap 'rm -f "$rows"' EXIT
for round in 1 2 3; do
  for spec in "configs/quickstart.yaml 256 300" "configs/quickstart.yaml 64 300" "configs/lenet.yaml 128 60"; do
    set -- $spec
    cfg=$1 batch=$2 steps=$3
    for pol in fast portable; do
      ms=$("$detrain" bench "$cfg" --steps "$steps" --warmup 10 --set train.batch="$batch" \
             --set "policies=[$pol]" 2>&1 | sed -n 's/.*step (update) median *\([0-9.]*\) ms.*/\1/p')
      echo "round $round $(basename "$cfg" .yaml) batch $batch detrain-$pol $ms" | tee -a "$rows"
    done
    for mode in default deterministic; do
      ms=$(python3 scripts/bench_torch.py --device cpu --config "$cfg" --batch "$batch" --modes "$mode" \
             --steps "$steps" --warmup 10 2>/dev/null | sed -n 's/.*median \([0-9.]*\) ms.step.*/\1/p' | head -1)
      echo "round $round $(basename "$cfg" .yaml) batch $batch torch-$mode $ms" | tee -a "$rows"
    done
  done
done
# Medians over the rounds, and detrain's median against PyTorch default's (the ratios README quotes).
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
    }
  }' "$rows" | sort

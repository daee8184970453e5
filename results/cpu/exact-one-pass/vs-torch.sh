#!/bin/bash
# detrain (fast, portable) against PyTorch CPU (default, deterministic), interleaved in
# rounds so that both see the same machine state. Run from the repository root:
#   bash results/cpu/exact-one-pass/vs-torch.sh > results/cpu/exact-one-pass/vs-torch.txt
set -e
for round in 1 2 3; do
  for spec in "configs/quickstart.yaml 256 300" "configs/quickstart.yaml 64 300" "configs/lenet.yaml 128 60"; do
    set -- $spec
    cfg=$1 batch=$2 steps=$3
    for pol in fast portable; do
      ms=$(build/detrain bench "$cfg" --steps "$steps" --warmup 10 --set train.batch="$batch" \
             --set "policies=[$pol]" 2>&1 | sed -n 's/.*step (update) median *\([0-9.]*\) ms.*/\1/p')
      echo "round $round $(basename "$cfg" .yaml) batch $batch detrain-$pol $ms"
    done
    for mode in default deterministic; do
      ms=$(python3 scripts/bench_torch.py --device cpu --config "$cfg" --batch "$batch" --modes "$mode" \
             --steps "$steps" --warmup 10 2>/dev/null | sed -n 's/.*median \([0-9.]*\) ms.step.*/\1/p' | head -1)
      echo "round $round $(basename "$cfg" .yaml) batch $batch torch-$mode $ms"
    done
  done
done

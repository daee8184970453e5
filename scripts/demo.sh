#!/usr/bin/env bash
# make demo's story (after the build): the quickstart under fast and portable on this
# machine, the same config at 1 thread against 2, then the committed portable references of
# other machines reproduced here. It holds on every machine: portable is identical
# everywhere; fast is whatever it is here, and the report says what it promises.
# Usage: scripts/demo.sh BUILD_DIR
set -euo pipefail
build=${1:-build}
exe=./$build/detrain
refs=(results/cpu/epyc/crossdev-t2/mlp results/nvidia-h100-80gb-hbm3/crossdev/mlp)

$exe run configs/quickstart.yaml --out results/quickstart --overwrite
$exe run configs/quickstart.yaml --out results/quickstart-1thread --overwrite --quiet \
  --set backend.threads=1 --set train.steps=50 --set report.overhead_samples=0 >/dev/null

echo
echo "== 1. This machine: the same run at 2 threads (results/quickstart) and at 1"
echo "      (results/quickstart-1thread), compared over their common steps =="
table=$($exe compare --table results/quickstart results/quickstart-1thread || true)
printf '%s\n' "$table" | sed -n '/^| replica/,/^$/p'
if printf '%s\n' "$table" | grep -q '^| fast/replica-0 | identical'; then
  echo "fast: the same bits at 1 and 2 threads on this CPU -- it promises no order, and here its"
  echo "      fastest paths happened to add in one order (results/quickstart/report.md says why)."
  echo "      The order still matters: detrain explain re-executes step 1 of two fast replicas"
  echo "      under drawn combination orders and names the op whose bits change:"
  $exe explain results/quickstart/fast/replica-0 results/quickstart/fast/replica-1 --step 1 \
    --quiet | grep -E '^(first differing op output|caused by)' | sed 's/^/      /' || true
else
  echo "fast: other bits at 1 thread than at 2 on this CPU -- it promises no order, and its"
  echo "      products split with the thread count here."
fi
echo "portable: the same bits at every thread count, as it promises."

echo
echo "== 2. Other machines: their committed portable runs of this model, reproduced here =="
rc=0
$exe reproduce --quiet "${refs[@]}" | sed -n '/^Reproduced on/,$p' || rc=$?
if [ "$rc" -eq 0 ]; then
  echo "portable: identical at every hashed step, every recorded value, to every machine recorded"
  echo "          (detrain reproduce DIR checks any result the same way)."
elif [ "$rc" -eq 1 ]; then
  echo "portable: a recorded reference PARTS here -- a defect; please report the table above."
  exit 1
else
  echo "portable: a recorded reference could not be compared here (its message above says why)."
  exit "$rc"
fi

#!/bin/bash
# Print the Python that has PyTorch for the comparisons (scripts/vs_torch.sh,
# scripts/under_load.sh, scripts/results.sh), or exit 77 saying how to get one:
# $PYTHON if set, else make bench's venv (.venv-torch/ or $DETRAIN_TORCH_VENV: today's
# PyTorch from pip, scripts/setup.sh --bench), else python3, else /usr/bin/python3 (Debian's
# python3-torch: 1.13, the fallback).
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
for p in ${PYTHON:-} "${DETRAIN_TORCH_VENV:-$repo/.venv-torch}/bin/python" python3 /usr/bin/python3; do
  if "$p" -c 'import torch' 2>/dev/null; then echo "$p"; exit 0; fi
  [ -z "${PYTHON:-}" ] || [ "$p" != "$PYTHON" ] || break # a PYTHON without torch: say so
done
echo "no Python with PyTorch${PYTHON:+ (PYTHON=$PYTHON has none)}: scripts/setup.sh --bench makes .venv-torch/ with pip's" >&2
exit 77

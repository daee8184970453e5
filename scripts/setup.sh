#!/usr/bin/env bash
# Install the Debian packages detrain needs to build, test and run its demo.
# As root: installs what is missing (one `apt-get update`, then `apt-get install`).
# Otherwise: prints the exact command to run and stops with status 1.
# Used by `make demo`, `make check` and `make bench`; safe to run again (it only
# installs what is missing). Optional packages (only some tests need them; those tests
# skip without them) are installed along with the rest as root; otherwise a missing
# optional package is reported and setup carries on.
# `--check` (make check, make fuzz) also needs the checking tools: clang with its runtime
# libraries for libFuzzer, and valgrind. `--bench` (make bench) adds today's PyTorch for
# the comparison on every model: a virtual environment .venv-torch/ in the repository
# (DETRAIN_TORCH_VENV elsewhere) with pip's torch, numpy and pyyaml -- the CPU wheels from
# PyTorch's own index (a few hundred MB), else PyPI's (several GB: GPU libraries too). Only
# where pip cannot (offline) Debian's python3-torch is the fallback, and the output says so:
# it is 1.13, years old and much slower, so ratios against it flatter detrain.
set -euo pipefail

with_check=0
with_bench=0
for arg in "$@"; do
  case "$arg" in
    --check) with_check=1 ;;
    --bench) with_bench=1 ;;
    *) echo "setup: unknown argument '$arg' (usage: setup.sh [--check] [--bench])" >&2; exit 2 ;;
  esac
done

packages=(
  cmake make gcc pkg-config       # build
  libyaml-dev                     # config files (YAML through libyaml)
  libssl-dev                      # SHA-256 through OpenSSL EVP
  zlib1g-dev                      # .gz datasets
  libopenblas-dev                 # sgemm for the `fast` level's matrix products
  libdnnl-dev                     # oneDNN: the `fast` level's CPU convolutions (nets/cpu/conv_dnnl.c)
  libopenmpi-dev openmpi-bin      # mpirun -np N detrain run: data parallelism (harness/run/dist.c)
  dataset-fashion-mnist           # /usr/share/datasets/fashion-mnist
  fortunes                        # /usr/share/games/fortunes: the GPT's default text (dataset.name: text)
)
# Only with --check. libclang-rt-dev (Debian 12: libclang-rt-14-dev, the libclang_rt.fuzzer,
# asan and ubsan archives) is only a Recommends of clang, which --no-install-recommends skips.
check_packages=(
  clang libclang-rt-dev           # make fuzz: libFuzzer targets (-fsanitize=fuzzer)
  valgrind                        # the valgrind.tiny_run test
  clang-format                    # make check: the house style (scripts/format.sh --check)
  python3 git                     # make check: the house rules (scripts/house.py)
)
if [ "$with_check" -eq 1 ]; then
  packages+=("${check_packages[@]}")
fi
if [ "$with_bench" -eq 1 ]; then
  packages+=(python3-venv)        # make bench: the PyTorch venv (bench_venv below)
fi
optional=(
  dieharder                       # make check-slow: statistical tests of the epsilon generators
  gnuplot-nox                     # report plots (SVG, PNG); without it reports are tables only
)

if ! command -v dpkg-query >/dev/null 2>&1; then
  echo "setup: this is not a Debian-like system (no dpkg-query); install the equivalents of:" >&2
  echo "  ${packages[*]} (optional: ${optional[*]})" >&2
  echo "setup: continuing; the build will say what it cannot find" >&2
  exit 0
fi

installed() {
  dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"
}
missing=()
for p in "${packages[@]}"; do
  installed "$p" || missing+=("$p")
done
missing_optional=()
for p in "${optional[@]}"; do
  installed "$p" || missing_optional+=("$p")
done

# make bench's PyTorch: a venv with pip's wheels (see the top); Debian's only as a fallback.
bench_venv() {
  local repo venv
  repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
  venv=${DETRAIN_TORCH_VENV:-$repo/.venv-torch}
  if "$venv/bin/python" -c 'import torch, numpy, yaml' 2>/dev/null; then return 0; fi
  echo "setup: making $venv with today's PyTorch from pip (once: a few hundred MB from PyTorch's CPU index, several GB from PyPI)" >&2
  if python3 -m venv "$venv" &&
     { "$venv/bin/pip" install --quiet --retries 0 --timeout 20 \
         --index-url https://download.pytorch.org/whl/cpu torch 2>/dev/null ||
       "$venv/bin/pip" install --quiet torch; } &&
     "$venv/bin/pip" install --quiet numpy pyyaml &&
     "$venv/bin/python" -c 'import torch, numpy, yaml'; then
    echo "setup: PyTorch $("$venv/bin/python" -c 'import torch; print(torch.__version__)') in $venv" >&2
    return 0
  fi
  rm -rf "$venv"
  echo "setup: pip could not install PyTorch (offline?); falling back to Debian's python3-torch," >&2
  echo "setup: 1.13, years old and much slower than today's: ratios against it flatter detrain" >&2
  if installed python3-torch && installed python3-yaml; then return 0; fi
  if [ "$(id -u)" -ne 0 ]; then
    echo "setup: as root: apt-get install -y --no-install-recommends python3-torch python3-yaml" >&2
    return 0 # make bench goes on; its PyTorch rows say they are missing
  fi
  apt-get install -y --no-install-recommends python3-torch python3-yaml ||
    echo "setup: no PyTorch at all; make bench runs without the comparison" >&2
}

if [ ${#missing[@]} -eq 0 ] && [ ${#missing_optional[@]} -eq 0 ]; then
  if [ "$with_bench" -eq 1 ]; then bench_venv; fi
  exit 0
fi

if [ "$(id -u)" -ne 0 ]; then
  if [ ${#missing[@]} -eq 0 ]; then
    echo "setup: optional Debian packages not installed: ${missing_optional[*]}" >&2
    echo "setup: the tests that need them will be skipped; as root: apt-get install -y ${missing_optional[*]}" >&2
    if [ "$with_bench" -eq 1 ]; then bench_venv; fi
    exit 0
  fi
  echo "setup: missing Debian packages: ${missing[*]}" >&2
  echo "setup: run this as root, then run make again:" >&2
  echo "  apt-get update && apt-get install -y --no-install-recommends ${missing[*]} ${missing_optional[*]}" >&2
  exit 1
fi

export DEBIAN_FRONTEND=noninteractive
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}" >&2
  apt-get update
  apt-get install -y --no-install-recommends "${missing[@]}"
  updated=1
fi
# Optional packages: a failure (offline, no such package) is reported, never fatal.
if [ ${#missing_optional[@]} -gt 0 ]; then
  echo "setup: installing optional ${missing_optional[*]}" >&2
  if ! { [ -n "${updated:-}" ] || apt-get update; } ||
     ! apt-get install -y --no-install-recommends "${missing_optional[@]}"; then
    echo "setup: could not install ${missing_optional[*]}; the tests that need them will be skipped" >&2
  fi
fi
if [ "$with_bench" -eq 1 ]; then bench_venv; fi

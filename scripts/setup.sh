#!/usr/bin/env bash
# Install the Debian packages detrain needs to build, test and run its demo.
# As root: installs what is missing (one `apt-get update`, then `apt-get install`).
# Otherwise: prints the exact command to run and stops with status 1.
# Used by `make demo`, `make check` and `make bench`; safe to run again (it only
# installs what is missing).
set -euo pipefail

packages=(
  cmake make gcc pkg-config       # build
  libyaml-dev                     # config files (YAML through libyaml)
  libssl-dev                      # SHA-256 through OpenSSL EVP
  zlib1g-dev                      # .gz datasets
  libopenblas-dev                 # sgemm for the `fast` level's matrix products
  dataset-fashion-mnist           # /usr/share/datasets/fashion-mnist
)

if ! command -v dpkg-query >/dev/null 2>&1; then
  echo "setup: this is not a Debian-like system (no dpkg-query); install the equivalents of:" >&2
  echo "  ${packages[*]}" >&2
  echo "setup: continuing; the build will say what it cannot find" >&2
  exit 0
fi

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

cmd="apt-get install -y --no-install-recommends ${missing[*]}"
if [ "$(id -u)" -ne 0 ]; then
  echo "setup: missing Debian packages: ${missing[*]}" >&2
  echo "setup: run this as root, then run make again:" >&2
  echo "  apt-get update && $cmd" >&2
  exit 1
fi

echo "setup: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update
$cmd

#!/usr/bin/env bash
# The house style (.clang-format) over every tracked C and CUDA source.
#   scripts/format.sh          rewrite the files in place (make format)
#   scripts/format.sh --check  change nothing; list the files that differ and exit 1 (make check)
# Needs clang-format (scripts/setup.sh --check installs it); the style is pinned to the
# version Debian 12 ships (14): another version may format a few lines differently.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v clang-format >/dev/null || {
    echo "format.sh: clang-format not found (scripts/setup.sh --check installs it)" >&2
    exit 2
}
mapfile -t files < <(git ls-files '*.c' '*.h' '*.cu' '*.cuh' 2>/dev/null ||
                     find core determinism nets harness tests fuzz \
                          \( -name '*.c' -o -name '*.h' -o -name '*.cu' -o -name '*.cuh' \))
if [[ "${1:-}" != "--check" ]]; then
    clang-format -i "${files[@]}"
    exit 0
fi
bad=0
for f in "${files[@]}"; do
    if ! clang-format "$f" | cmp -s - "$f"; then
        echo "format.sh: $f differs from .clang-format's style (make format rewrites it)" >&2
        bad=1
    fi
done
[[ $bad == 0 ]] && echo "format.sh: ${#files[@]} files in the house style"
exit $bad

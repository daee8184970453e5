#!/usr/bin/env bash
# A distributed experiment: one config at several rank counts, then the report that puts
# them side by side (harness/analyze/ranks_report.h).
#   scripts/ranks.sh CONFIG DIR [N ...] [-- detrain-run-options]
# runs `detrain run CONFIG --out DIR/plain` (one process, no mpirun), then for each N
# (default 1 2) `mpirun --oversubscribe -np N detrain run CONFIG --out DIR/npN`, then
# `detrain report DIR`: per policy, digest equality across rank counts and step time vs
# reduction: unordered. DETRAIN (default build/detrain) and MPIRUN (default
# "mpirun --oversubscribe") may be set; as root, Open MPI needs
# OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 (set here when unset).
set -euo pipefail
if [ $# -lt 2 ]; then
  sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//' >&2
  exit 2
fi
config=$1 dir=$2
shift 2
counts=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do
  case "$1" in
    ''|*[!0-9]*) echo "ranks.sh: rank count '$1' is not a positive integer" >&2; exit 2 ;;
  esac
  counts+=("$1")
  shift
done
[ "${1:-}" = "--" ] && shift
[ ${#counts[@]} -eq 0 ] && counts=(1 2)
detrain=${DETRAIN:-build/detrain}
mpirun_cmd=${MPIRUN:-mpirun --oversubscribe}
if [ "$(id -u)" -eq 0 ]; then
  export OMPI_ALLOW_RUN_AS_ROOT=${OMPI_ALLOW_RUN_AS_ROOT:-1}
  export OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=${OMPI_ALLOW_RUN_AS_ROOT_CONFIRM:-1}
fi
mkdir -p "$dir"
echo "ranks.sh: $config, plain run" >&2
"$detrain" run "$config" --out "$dir/plain" --overwrite --quiet "$@" > "$dir/plain.log" 2>&1 ||
  { cat "$dir/plain.log" >&2; exit 1; }
for n in "${counts[@]}"; do
  echo "ranks.sh: $config, $n rank(s)" >&2
  # shellcheck disable=SC2086
  $mpirun_cmd -np "$n" "$detrain" run "$config" --out "$dir/np$n" --overwrite --quiet "$@" \
    > "$dir/np$n.log" 2>&1 || { cat "$dir/np$n.log" >&2; exit 1; }
done
"$detrain" report "$dir"

#!/usr/bin/env bash
# dieharder on the raw 32-bit words of an epsilon generator (CTest rng.dieharder_<gen>,
# label `slow`, run by `make check-slow`).
#   usage: rng_dieharder.sh TEST_RNG_EXE philox|lfsr
# TEST_RNG_EXE dump_<gen> writes the words to stdout without end (tests/test_rng.c:
# dump_philox is one Philox stream in element order; dump_lfsr is 1024 reversible lanes
# drawing 2^20-element tensors, each 64-bit output as its high then its low half), and
# dieharder reads them with -g 200 (raw binary on stdin), so nothing is ever rewound.
#
# Tests (DT_DIEHARDER_TESTS, items "d" or "d:ntuple"): by default every test of
# `dieharder -a` that dieharder rates "Good", with its default sample counts, except the
# Marsaglia-Tsang GCD test (-d 17, about 100 s alone); the tests that take an ntuple get a
# subset of the values -a uses (rgb_bitdist 1-8 of 1-12, rgb_lagged_sum 0-15 of 0-32).
# About 4 minutes per generator. DT_DIEHARDER_TESTS=all runs `dieharder -a` itself (all
# tests, Suspect ones included; most of an hour). Note: -d 200..203 need -n; without it
# dieharder runs them with ntuple 0, and -d 201 then fails for every generator (MT19937
# included).
#
# The input is fixed (the dump entries use fixed seeds; dieharder's -S does not apply to
# stdin), so results are reproducible; each item reads the stream of its own step
# (DT_RNG_DUMP_STEP), so no two tests see the same words. -Y 1 reruns a test that lands
# in the WEAK band with more p-values until it resolves (dieharder's "resolve ambiguity"
# mode); only the final assessment of each statistic counts.
# Exit status: 0 when no test reports FAILED (WEAK results are listed), 1 otherwise, 77
# (skipped) when dieharder is not installed (scripts/setup.sh installs it as root).
set -u
exe=${1:?usage: rng_dieharder.sh TEST_RNG_EXE philox|lfsr}
gen=${2:?usage: rng_dieharder.sh TEST_RNG_EXE philox|lfsr}
case "$gen" in philox|lfsr) ;; *) echo "unknown generator '$gen'" >&2; exit 2 ;; esac

if ! command -v dieharder >/dev/null 2>&1; then
  echo "SKIPPED: dieharder is not installed (Debian package dieharder; make setup as root)" >&2
  exit 77
fi

default_tests="0 1 2 3 4 8 9 10 11 12 13 15 16 100 101 102
  200:1 200:2 200:3 200:4 200:6 200:8 201:2 201:3 201:4 201:5 202:2 202:3 202:4 202:5
  203:0 203:1 203:3 203:7 203:15 204 205 206 207 208 209"
tests=${DT_DIEHARDER_TESTS:-$default_tests}

dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
start=$(date +%s)
i=0
if [ "$tests" = all ]; then
  DT_RNG_DUMP_STEP=1 "$exe" "dump_$gen" | dieharder -g 200 -a -Y 1 >"$dir/all.log" 2>&1
else
  for item in $tests; do
    d=${item%%:*}
    args=(-d "$d")
    [ "$item" != "$d" ] && args+=(-n "${item#*:}")
    i=$((i + 1))
    # the writer stops on EPIPE once dieharder has read what it needs
    DT_RNG_DUMP_STEP=$i "$exe" "dump_$gen" | dieharder -g 200 "${args[@]}" -Y 1 \
      >"$dir/$(printf '%03d' "$i").log" 2>&1
  done
fi
elapsed=$(( $(date +%s) - start ))

# Result lines: "   test_name|ntup| tsamples |psamples|  p-value |Assessment". With -Y 1 a
# WEAK statistic is printed again with more p-values; per log and (test, ntup), only the
# lines with the most p-values are final.
final=$(for f in "$dir"/*.log; do
  awk -F'|' 'NF == 6 && $6 ~ /PASSED|WEAK|FAILED/ {
      key = $1 "|" $2; p = $4 + 0
      if (!(key in best) || p > best[key]) { best[key] = p; n[key] = 0 }
      if (p == best[key]) { line[key, n[key]++] = $0 }
      if (!(key in seen)) { seen[key] = 1; order[++k] = key }
    }
    END { for (i = 1; i <= k; i++) for (j = 0; j < n[order[i]]; j++) print line[order[i], j] }' "$f"
done)
passed=$(grep -c 'PASSED' <<<"$final")
weak=$(grep -c 'WEAK' <<<"$final")
failed=$(grep -c 'FAILED' <<<"$final")
resolved=$(cat "$dir"/*.log | grep -c 'WEAK')
resolved=$((resolved - weak))
echo "dieharder $gen: $passed passed, $weak weak, $failed failed; $resolved WEAK result(s)" \
     "resolved by -Y 1 reruns (${elapsed} s)"
echo "$final"
if [ "$weak" -gt 0 ]; then
  echo "WEAK (final):"
  grep 'WEAK' <<<"$final"
fi
if [ "$failed" -gt 0 ] || [ "$passed" -eq 0 ]; then
  echo "FAILED:"
  grep 'FAILED' <<<"$final"
  echo "--- full dieharder output ---"
  cat "$dir"/*.log
  exit 1
fi
exit 0

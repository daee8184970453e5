#!/usr/bin/env bash
# Run libFuzzer targets for a set time each, side by side, and say what they found.
#   fuzz/run.sh BUILD SECONDS TARGET...   (make fuzz: build-fuzz, FUZZ_SECONDS, config idx)
# Each target BUILD/fuzz/fuzz_<target> starts from a copy of fuzz/corpus/<target>/ and
# fuzz/regressions/<target>/ in BUILD/fuzz-work/<target>/corpus (the repository's folders
# are never written), with fuzz/<target>.dict when there is one. Crashes, leaks, timeouts
# and out-of-memory inputs land in BUILD/fuzz-work/<target>/artifacts/. Exit 0 when no
# target found anything; else 1, after printing each finding's path, how to reproduce it
# and how to keep it as a regression test.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2

if [ $# -lt 3 ]; then
  echo "usage: fuzz/run.sh BUILD SECONDS TARGET..." >&2
  exit 2
fi
build=$1 seconds=$2
shift 2
case "$seconds" in
  ''|*[!0-9]*|0) echo "fuzz: SECONDS must be a positive integer, got '$seconds'" >&2; exit 2 ;;
esac
for t in "$@"; do
  if [ ! -x "$build/fuzz/fuzz_$t" ]; then
    echo "fuzz: $build/fuzz/fuzz_$t is not built (make fuzz builds it)" >&2
    exit 2
  fi
done

# Readable stack traces when an LLVM symbolizer is installed (package llvm); UBSan findings
# stop the run (the build uses -fno-sanitize-recover).
symbolizer=$(command -v llvm-symbolizer ||
             ls /usr/lib/llvm-*/bin/llvm-symbolizer 2>/dev/null | tail -n 1)
if [ -n "$symbolizer" ]; then export ASAN_SYMBOLIZER_PATH=$symbolizer; fi
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1

work=$build/fuzz-work
pids=()
for t in "$@"; do
  dir=$work/$t
  rm -rf "$dir"
  mkdir -p "$dir/corpus" "$dir/artifacts"
  cp fuzz/corpus/"$t"/* "$dir/corpus/"
  cp fuzz/regressions/"$t"/* "$dir/corpus/" 2>/dev/null || true
  dict=()
  if [ -f "fuzz/$t.dict" ]; then dict=(-dict="fuzz/$t.dict"); fi
  echo "fuzz: $t for ${seconds} s ($(ls "$dir/corpus" | wc -l) seed inputs; log $dir/log.txt)"
  "$build/fuzz/fuzz_$t" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
      -print_final_stats=1 -artifact_prefix="$dir/artifacts/" "${dict[@]}" "$dir/corpus" \
      >"$dir/log.txt" 2>&1 &
  pids+=($!)
done

failed=0
i=0
for t in "$@"; do
  dir=$work/$t
  wait "${pids[$i]}"
  rc=$?
  i=$((i + 1))
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$dir/log.txt" | tail -n 1)
  cov=$(grep -o 'cov: [0-9]* ft: [0-9]*' "$dir/log.txt" | tail -n 1)
  found=$(ls "$dir/artifacts")
  if [ "$rc" -eq 0 ] && [ -z "$found" ]; then
    echo "fuzz: $t: nothing found: ${runs:-?} inputs in ${seconds} s, ${cov:-no coverage line}," \
         "corpus $(ls "$dir/corpus" | wc -l) inputs ($dir/corpus)"
    continue
  fi
  failed=1
  echo "fuzz: $t: FAILED (exit status $rc) after ${runs:-?} inputs; the end of $dir/log.txt:"
  grep -v '^#[0-9]' "$dir/log.txt" | tail -n 40 | sed 's/^/    /'
  for a in $found; do
    echo "fuzz: $t: finding $dir/artifacts/$a"
    echo "      reproduce:  $build/fuzz/fuzz_$t $dir/artifacts/$a"
    echo "      regression: cp $dir/artifacts/$a fuzz/regressions/$t/<what-it-is>  (fix the bug;" \
         "the fuzz.${t}_replay test then runs it in every build)"
  done
  if [ -z "$found" ]; then echo "fuzz: $t: no input saved; see $dir/log.txt"; fi
done
exit $failed

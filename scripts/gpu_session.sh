#!/usr/bin/env bash
# The GPU session: build detrain with CUDA on a GPU machine, run its GPU tests, train the
# quickstart, LeNet and the Bayesian MLP on the CPU and the GPU, compare their portable
# traces, build the cross-device digest table, run the overhead matrix, benchmark detrain
# and PyTorch, and record the machine, the versions, every command and its log under
# results/<gpu-name>/. Run in the repo root:
#
#   scripts/gpu_session.sh [OPTIONS] STEP...
#       STEP: info build smoke tests memcheck racecheck sanitize runs bench torch crossdev
#             matrix all, or a call of the plan: call1 call2 call3 call4
#
# A step that fails is marked FAILED and the next step runs anyway; the session ends with a
# summary and exits 1 when anything failed. `info` runs first in every session. Steps are
# separate so that a session can be split over several calls (a call may be limited to 10
# minutes, and each may land on a fresh machine: start each call's list with `build`).
# Dependencies come from a folder made by `scripts/gpu_deps.sh fetch` (see docs/gpu.md).
set -uo pipefail

orig_pwd=$PWD
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo" || exit 2

usage() {
  cat >&2 <<'EOF'
usage: scripts/gpu_session.sh [OPTIONS] STEP...
steps (run in the order given; `info` always first):
  info    nvidia-smi, driver, nvcc, cuBLAS/cuDNN/PyTorch versions, host, git revision
  build   configure BUILD with -DDETRAIN_CUDA=ON (cuDNN from the toolkit, else from the
          Python environment's site-packages/nvidia/cudnn) and build it
  smoke   5 steps of the MLP, LeNet and the BNN at fast, run_to_run and portable on cuda
          with CUDA_LAUNCH_BLOCKING=1 (a failing kernel is named where it fails)
  tests   ctest -L gpu (a skipped test fails the step); CPU-only tests never run here
  memcheck  every gpu-labelled test case under compute-sanitizer --tool memcheck
          (--error-exitcode 1); any error, or a skipped case, fails the step; the log in
          RESULTS/logs/sanitize-memcheck.log
  racecheck  the same under --tool racecheck
  sanitize  memcheck, then racecheck
  runs    on cuda only: the MLP, LeNet and the BNN (100 steps, fast, run_to_run and
          portable, 5 replicas); run_to_run and portable replicas must match replica 0,
          fast's are compared and recorded, and portable replica 0 must match the
          committed CPU reference (results/cpu/crossdev-t2, made beforehand)
  bench   detrain bench on cuda (quickstart at batch 256 and 64, bnn, lenet with and
          without model.overlap_pool) and quickstart on cpu
  torch   scripts/bench_torch.py: the quickstart MLP (default, TF32, deterministic modes)
          and LeNet (default, benchmark, deterministic; 2x2 and overlapping pools)
  crossdev  scripts/cross_device.sh run: the portable runs of the three models on cuda,
          then the table against the committed CPU references results/cpu/crossdev-t2
          and -t1 into RESULTS/cross_device.md: every digest must be equal (no CPU
          training here: without the references the step fails)
  matrix  detrain run configs/overhead_matrix.yaml --out RESULTS/overhead_matrix
  all     every step above
the plan for a lent GPU (each call within 540 s, each leaving --tar; before call 1, on your
own machine: `scripts/gpu_deps.sh fetch`, the CPU references of results/cpu/crossdev-t1|t2
(results/cpu/crossdev-README.md) and a --dry-run of all):
  call1   build smoke tests memcheck      (what only a GPU can tell, first)
  call2   runs crossdev                   (cross-device and replica comparisons)
  call3   bench torch                     (benchmarks against PyTorch)
  call4   matrix racecheck                (if device time is left)
options:
  --deps DIR        .debs from `scripts/gpu_deps.sh fetch` (default .gpu-deps; `none` = the
                    host's own packages); unpacked into --prefix and sourced
  --prefix DIR      where the .debs go (default /tmp/detrain-deps)
  --build DIR       build folder (default build-gpu)
  --results DIR     results folder (default results/<gpu name from nvidia-smi>)
  --tar FILE        at the end, pack the results folder into FILE (.tar.gz)
  --time-limit S    stop starting commands after S seconds and cut a running one short,
                    so that the summary and --tar still happen (e.g. 540 under a 10-minute cap)
  --jobs N          build and test parallelism (default: number of CPUs)
  --dry-run         print the commands; run nothing
environment: DT_CUDA_ARCHS (default: the GPU's compute capability, e.g. 90; `default` =
  the project's fat binary), DT_GIT_REV (recorded when there is no .git), DT_GPU_NAME.
EOF
  exit 2
}

gpu_query() { # FIELD: nvidia-smi's value for the first GPU, empty without one
  command -v nvidia-smi >/dev/null 2>&1 || return 0
  nvidia-smi --query-gpu="$1" --format=csv,noheader 2>/dev/null | head -1
}

say() { echo "gpu_session: $*" >&2; [ $dry -eq 1 ] || echo "# $*" >>"$session"; }

# ---- running commands -------------------------------------------------------------------------
step=""          # the step now running
step_failed=0    # commands of this step that failed
declare -A status_of=() time_of=()

time_left() { # seconds before --time-limit (a large number without one)
  if [ "$time_limit" -eq 0 ]; then echo 999999; else echo $((time_limit - (SECONDS - start_s))); fi
}

# quote_args
. "$repo/scripts/lib.sh"

# run [--ok "CODES"] CMD...: run CMD with its output appended to the step's log, record it
# with its exit status and duration in the session file. A status outside CODES (default
# 0) fails the step. Under --time-limit the command is cut short when time runs out.
run() {
  local ok="0"
  if [ "$1" = --ok ]; then ok=$2; shift 2; fi
  local line
  line=$(quote_args "$@")
  if [ $dry -eq 1 ]; then
    echo "[$step] $line"
    return 0
  fi
  local left log=$logs/$step.log t0=$SECONDS rc
  left=$(time_left)
  if [ "$left" -le 5 ]; then
    echo "[$step] not started (time limit): $line" | tee -a "$log" >&2
    echo "not-started  $line" >>"$session"
    step_failed=$((step_failed + 1))
    return 124
  fi
  { echo; echo "=== $(date -u +%H:%M:%S) \$ $line"; } >>"$log"
  if [ "$time_limit" -gt 0 ]; then
    timeout --kill-after=10 "$left" "$@" >>"$log" 2>&1 </dev/null
  else
    "$@" >>"$log" 2>&1 </dev/null
  fi
  rc=$?
  local secs=$((SECONDS - t0)) verdict=ok
  case " $ok " in *" $rc "*) ;; *) verdict=FAILED; step_failed=$((step_failed + 1)) ;; esac
  echo "=== exit $rc after ${secs}s ($verdict)" >>"$log"
  printf '%-6s rc=%-3s %5ss  %s\n' "$verdict" "$rc" "$secs" "$line" >>"$session"
  echo "[$step] $verdict rc=$rc ${secs}s: $line" >&2
  return $rc
}

# A shell snippet as one command (pipes, redirections into the results folder).
sh_c() { run "${@:1:$#-1}" bash -c "${!#}"; }

begin_step() { step=$1; step_failed=0; step_t0=$SECONDS; [ $dry -eq 1 ] || echo "## step $step" >>"$session"; }
end_step() {
  local s=passed
  [ $step_failed -eq 0 ] || s=FAILED
  [ $dry -eq 0 ] || s=planned
  status_of[$step]=$s
  time_of[$step]=$((SECONDS - step_t0))
}

# ---- environment: dependencies, toolkit, cuDNN ------------------------------------------------
deps_env() {
  if [ "$deps" = none ]; then
    say "deps: none asked for; using the host's packages"
    return 0
  fi
  if [ -d "$deps" ] && ls "$deps"/*.deb >/dev/null 2>&1; then
    run bash scripts/gpu_deps.sh install "$deps" "$prefix" || return 1
  elif [ -f "$prefix/env.sh" ]; then
    say "deps: no .debs in $deps; using the earlier install in $prefix"
  else
    say "deps: no $deps/*.deb and no $prefix/env.sh: using the host's packages (configure says what is missing)"
    return 0
  fi
  [ $dry -eq 1 ] && return 0
  # shellcheck disable=SC1091
  . "$prefix/env.sh" || return 1
  say "deps: sourced $prefix/env.sh (DETRAIN_DATA=${DETRAIN_DATA:-})"
}

nvcc_path() {
  local c
  for c in "$(command -v nvcc 2>/dev/null)" "${CUDA_HOME:-}/bin/nvcc" /usr/local/cuda/bin/nvcc; do
    [ -n "$c" ] && [ -x "$c" ] && { echo "$c"; return 0; }
  done
  return 1
}

# The folder holding include/cudnn.h: none when the toolkit has one (CMake finds it there),
# else the first in the Python environment's site-packages/nvidia (pip's cuDNN).
cudnn_root() {
  local nvcc inc h
  nvcc=$(nvcc_path) || true
  inc=${nvcc:+$(dirname "$(dirname "$nvcc")")/include}
  for h in "$inc/cudnn.h" /usr/include/cudnn.h /usr/include/x86_64-linux-gnu/cudnn.h; do
    [ -f "$h" ] && return 0
  done
  local sp
  for sp in $(python3 -c 'import site, sys; print("\n".join(site.getsitepackages() + [site.getusersitepackages()]))' 2>/dev/null); do
    h=$(find "$sp/nvidia" -maxdepth 4 -name cudnn.h -path '*/include/*' 2>/dev/null | sort | head -1)
    [ -n "$h" ] && { dirname "$(dirname "$h")"; return 0; }
  done
  return 0
}

cuda_archs() {
  case "${DT_CUDA_ARCHS:-}" in
    default) return 0 ;;
    "") local cc; cc=$(gpu_query compute_cap); [ -z "$cc" ] || echo "${cc/./}" ;;
    *) echo "$DT_CUDA_ARCHS" ;;
  esac
}

# ---- steps ------------------------------------------------------------------------------------
step_info() {
  local d=$results/info
  [ $dry -eq 1 ] || mkdir -p "$d"
  sh_c "nvidia-smi >$d/nvidia-smi.txt && nvidia-smi -q >$d/nvidia-smi-q.txt && nvidia-smi \
--query-gpu=name,driver_version,compute_cap,memory.total,clocks.max.sm,clocks.max.memory --format=csv >$d/gpu.csv"
  run bash scripts/gpu_session.sh __versions "$d/versions.txt"
  run bash scripts/gpu_session.sh __host "$d/host.txt"
  run bash scripts/gpu_session.sh __source "$d"
}

# ctest -L gpu, failed when a test skipped: on the GPU machine a skip means the GPU was not
# usable, which must not read as "passed".
ctest_gpu() { # BUILD JOBS
  local text rc skipped
  text=$(ctest --test-dir "$1" -L gpu --no-tests=error --output-on-failure -j "$2" --timeout 600 2>&1)
  rc=$?
  echo "$text"
  skipped=$(grep -cE 'Test +#[0-9]+: .*Skipped' <<<"$text" || true)
  if [ "$skipped" -gt 0 ]; then
    echo "gpu_session: $skipped gpu test(s) skipped: no usable GPU"
    [ $rc -ne 0 ] || rc=1
  fi
  return $rc
}

# sanitize_gpu BUILD TOOL LOG: every `gpu` test case (its command as ctest runs it, from
# `ctest -L gpu -N -V`) under compute-sanitizer --tool TOOL, output into LOG; nonzero when a
# case reports an error, is skipped (77: no usable GPU) or when there is no case at all.
sanitize_gpu() {
  local build=$1 tool=$2 log=$3 san nvcc cmd rc failed=0 n=0
  san=$(command -v compute-sanitizer 2>/dev/null) ||
    { nvcc=$(nvcc_path) && san=$(dirname "$nvcc")/compute-sanitizer; }
  if [ -z "$san" ] || [ ! -x "$san" ]; then
    echo "gpu_session: compute-sanitizer not found (PATH, next to nvcc)" | tee "$log"
    return 1
  fi
  : >"$log"
  while IFS= read -r cmd; do
    n=$((n + 1))
    echo "=== $tool: $cmd" >>"$log"
    # the commands ctest prints quote their arguments: eval gives the same words
    eval "\"\$san\" --tool \"\$tool\" --error-exitcode 1 $cmd" >>"$log" 2>&1 </dev/null
    rc=$?
    echo "=== exit $rc" >>"$log"
    if [ $rc -ne 0 ]; then
      failed=$((failed + 1))
      echo "gpu_session: $tool: exit $rc$([ $rc -ne 77 ] || echo ' (skipped: no usable GPU)'): $cmd"
    fi
  done < <(ctest --test-dir "$build" -L gpu -N -V 2>/dev/null | sed -n 's/^[0-9]*: Test command: //p')
  echo "gpu_session: $tool: $n gpu test case(s), $failed failed; log $log"
  [ $n -gt 0 ] && [ $failed -eq 0 ]
}

# ---- info helpers (internal commands, so that the session file records one line each) ---------
# Toolkit, cuBLAS, cuDNN and PyTorch versions, from the headers the build uses.
info_versions() {
  local nvcc inc cudnn h rc=0
  if nvcc=$(nvcc_path); then
    "$nvcc" --version || rc=1
  else
    echo "nvcc: not found"; rc=1; nvcc=/usr/local/cuda/bin/nvcc
  fi
  inc=$(dirname "$(dirname "$nvcc")")/include
  echo "cuda runtime (CUDART_VERSION): $(awk '/#define CUDART_VERSION/ {print $3}' "$inc/cuda_runtime_api.h" 2>/dev/null)"
  echo "cublas (cublas_api.h): $(awk '/#define CUBLAS_VER_(MAJOR|MINOR|PATCH) / {printf "%s%s", s, $3; s="."}' "$inc/cublas_api.h" 2>/dev/null)"
  echo "cublas libraries: $(find -L "$(dirname "$inc")/" -maxdepth 4 -name 'libcublas.so.*' -printf '%f\n' 2>/dev/null | sort -u | tr '\n' ' ')"
  cudnn=$(cudnn_root)
  echo "DETRAIN_CUDNN_ROOT: ${cudnn:-none (cuDNN from the toolkit, if any)}"
  for h in ${cudnn:+"$cudnn/include/cudnn_version.h"} "$inc/cudnn_version.h" /usr/include/cudnn_version.h \
           /usr/include/x86_64-linux-gnu/cudnn_version.h; do
    if [ -f "$h" ]; then
      echo "cudnn ($h): $(awk '/#define CUDNN_(MAJOR|MINOR|PATCHLEVEL) / {printf "%s%s", s, $3; s="."}' "$h")"
      break
    fi
  done
  python3 -c 'import torch, torch.backends.cudnn as c; print("torch", torch.__version__, "cuda", torch.version.cuda, "cudnn", c.version(), "device", torch.cuda.get_device_name() if torch.cuda.is_available() else "none")' || rc=1
  return $rc
}

info_host() {
  uname -a
  grep -E '^(PRETTY_NAME|VERSION_ID)=' /etc/os-release
  echo "glibc: $(getconf GNU_LIBC_VERSION)"
  echo "cpus: $(nproc), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2)"
  free -g | sed -n 2p
  cmake --version | head -1
  cc --version | head -1
  python3 --version
}

# The code that ran: git when the tree has .git, else DT_GIT_REV; always a digest of the
# sources, since a copy of a working tree may come without .git.
info_source() {
  local d=$1
  echo "git: $(git rev-parse HEAD 2>/dev/null || echo "none here (DT_GIT_REV=${DT_GIT_REV:-unset})")"
  git status --porcelain 2>/dev/null | sed 's/^/  /'
  find CMakeLists.txt Makefile cmake core determinism harness nets configs scripts tests -type f \
       ! -name '*.pyc' -print0 | sort -z | xargs -0 sha256sum >"$d/source.sha256"
  echo "sources: sha256 $(sha256sum <"$d/source.sha256" | cut -c1-16) over info/source.sha256"
}

step_build() {
  local nvcc archs cudnn gen=()
  if ! nvcc=$(nvcc_path); then
    say "build: no nvcc on PATH, in \$CUDA_HOME/bin or /usr/local/cuda/bin"
    step_failed=1
    return
  fi
  archs=$(cuda_archs)
  cudnn=$(cudnn_root)
  if [ -f "$build/CMakeCache.txt" ]; then
    :  # keep the generator the folder was made with
  elif command -v ninja >/dev/null 2>&1; then
    gen=(-G Ninja)
  fi
  run cmake -S . -B "$build" "${gen[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DDETRAIN_CUDA=ON \
      -DCMAKE_CUDA_COMPILER="$nvcc" ${archs:+-DCMAKE_CUDA_ARCHITECTURES="$archs"} \
      ${cudnn:+-DDETRAIN_CUDNN_ROOT="$cudnn"} || return
  run cmake --build "$build" -j "$jobs"
}

need_build() {
  if [ "${status_of[build]:-}" = FAILED ]; then
    say "$step: the build failed; not running an older $detrain"
    step_failed=$((step_failed + 1))
    return 1
  fi
  [ $dry -eq 1 ] || [ -x "$detrain" ] && return 0
  say "$step: no $detrain: put the build step first (scripts/gpu_session.sh build $step)"
  step_failed=$((step_failed + 1))
  return 1
}

step_tests() {
  need_build || return
  run bash scripts/gpu_session.sh __ctest_gpu "$build" "$jobs"
}

# A few steps of every model at every level, each kernel launch synchronous, so that a
# kernel that faults is named by the op that launched it.
step_smoke() {
  need_build || return
  local cfg level out
  for cfg in quickstart lenet bnn; do
    for level in fast run_to_run portable; do
      out=$results/smoke/$cfg-$level
      [ $dry -eq 1 ] || rm -rf "$out"
      run env CUDA_LAUNCH_BLOCKING=1 "$detrain" run "configs/$cfg.yaml" --out "$out" \
          --set backend.device=cuda --set train.steps=5 --set replicas=1 \
          --set "policies=[$level]" --set report.snapshots=0 --set report.overhead_samples=0 \
          --quiet
    done
  done
}

step_memcheck() {
  need_build || return
  run bash scripts/gpu_session.sh __sanitize "$build" memcheck "$logs/sanitize-memcheck.log"
}

step_racecheck() {
  need_build || return
  run bash scripts/gpu_session.sh __sanitize "$build" racecheck "$logs/sanitize-racecheck.log"
}

step_sanitize() {
  step_memcheck
  step_racecheck
}

step_runs() {
  need_build || return
  local cfg model out ref k cell
  for cfg in quickstart bnn lenet; do
    case $cfg in quickstart) model=mlp ;; *) model=$cfg ;; esac
    out=$results/runs/$cfg-cuda
    [ $dry -eq 1 ] || rm -rf "$out"
    # No snapshots: traces and per-tensor digests are what the comparisons need.
    run "$detrain" run "configs/$cfg.yaml" --out "$out" --set backend.device=cuda \
        --set 'policies=[fast, run_to_run, portable]' --set replicas=5 --set train.steps=100 \
        --set hash.per_tensor=true --set report.snapshots=0 --set report.overhead_samples=0 --quiet
    # run_to_run and portable on one GPU: every replica the bits of replica 0 (`compare`
    # exits 1 on any difference, naming the step and tensor).
    for cell in run_to_run portable; do
      for k in 1 2 3 4; do
        run "$detrain" compare "$out/$cell/replica-0" "$out/$cell/replica-$k"
      done
    done
    # fast: its divergence recorded (first step and tensor), not required.
    for k in 1 2 3 4; do
      run --ok "0 1" "$detrain" compare "$out/fast/replica-0" "$out/fast/replica-$k"
    done
    # portable: the CPU's bits, against the committed reference (made beforehand).
    ref=results/cpu/crossdev-t2/$model/portable/replica-0
    if [ -f "$ref/trace.csv" ] || [ $dry -eq 1 ]; then
      run "$detrain" compare "$ref" "$out/portable/replica-0"
    else
      say "runs: no $ref/trace.csv (the committed CPU reference): portable not compared across devices (FAILED)"
      step_failed=$((step_failed + 1))
    fi
  done
}

step_bench() {
  need_build || return
  local d=$results/bench levels='policies=[fast, run_to_run, portable]'
  # One CSV per line (bench appends; its rows do not name the batch).
  [ $dry -eq 1 ] || { mkdir -p "$d"; rm -f "$d"/detrain-*.csv; }
  run "$detrain" bench configs/quickstart.yaml --steps 100 --warmup 10 --set backend.device=cuda \
      --set "$levels" --csv "$d/detrain-cuda-mlp-b256.csv"
  run "$detrain" bench configs/quickstart.yaml --steps 100 --warmup 10 --set backend.device=cuda \
      --set train.batch=64 --set "$levels" --csv "$d/detrain-cuda-mlp-b64.csv"
  run "$detrain" bench configs/bnn.yaml --steps 40 --warmup 4 --baseline first \
      --set backend.device=cuda --csv "$d/detrain-cuda-bnn.csv"
  run "$detrain" bench configs/lenet.yaml --steps 100 --warmup 10 --set backend.device=cuda \
      --set "$levels" --csv "$d/detrain-cuda-lenet.csv"
  run "$detrain" bench configs/lenet.yaml --steps 100 --warmup 10 --set backend.device=cuda \
      --set model.overlap_pool=true --set "$levels" --csv "$d/detrain-cuda-lenet-overlap.csv"
  # The same machine's CPU, for scale.
  run "$detrain" bench configs/quickstart.yaml --steps 100 --warmup 10 --set backend.device=cpu \
      --set "$levels" --csv "$d/detrain-cpu-mlp-b256.csv"
}

step_torch() {
  local d=$results/bench
  [ $dry -eq 1 ] || { mkdir -p "$d"; rm -f "$d/torch.csv" "$d/torch-lenet.csv"; }
  run python3 scripts/bench_torch.py --config configs/quickstart.yaml --device cuda \
      --steps 500 --warmup 50 --csv "$d/torch.csv"
  run python3 scripts/bench_torch.py --config configs/quickstart.yaml --device cuda --batch 64 \
      --steps 500 --warmup 50 --csv "$d/torch.csv"
  run python3 scripts/bench_torch.py --model lenet --config configs/lenet.yaml --device cuda \
      --steps 500 --warmup 50 --csv "$d/torch-lenet.csv"
  run python3 scripts/bench_torch.py --model lenet --config configs/lenet.yaml --device cuda \
      --overlap-pool --steps 500 --warmup 50 --csv "$d/torch-lenet.csv"
}

# The cross-device table: the portable runs of the three models on this GPU
# (scripts/cross_device.sh run), then `detrain compare --table` of the committed CPU
# references (results/cpu/crossdev-t2 and -t1, made beforehand on another machine: no CPU
# training in device time) against it. Any difference, missing run or unreadable trace
# fails the step; so does a missing reference.
step_crossdev() {
  need_build || return
  local ref=results/cpu/crossdev-t2 ref1=results/cpu/crossdev-t1 gpu=$results/crossdev roots
  if [ ! -f "$ref/mlp/config.json" ]; then
    say "crossdev: no $ref/mlp/config.json (the committed CPU reference; make it beforehand: results/cpu/crossdev-README.md) (FAILED)"
    step_failed=$((step_failed + 1))
    [ $dry -eq 1 ] || return
  fi
  run env DETRAIN="$detrain" bash scripts/cross_device.sh run cuda "$gpu"
  roots=("$ref")
  [ ! -f "$ref1/mlp/config.json" ] || roots+=("$ref1")
  roots+=("$gpu")
  run env DETRAIN="$detrain" bash scripts/cross_device.sh table "${roots[@]}" \
      --out "$results/cross_device.md"
}

# The overhead matrix (configs/overhead_matrix.yaml, a matrix config: every entry one
# experiment, a report per device).
step_matrix() {
  need_build || return
  local cfg=configs/overhead_matrix.yaml out=$results/overhead_matrix
  if [ ! -f "$cfg" ]; then
    say "matrix: $cfg does not exist in this tree: nothing to run (FAILED)"
    step_failed=$((step_failed + 1))
    [ $dry -eq 1 ] || return
  fi
  [ $dry -eq 1 ] || rm -rf "$out"
  run "$detrain" run "$cfg" --out "$out"
}

finish() {
  local s failed=0
  local summary
  summary=$(
    echo "summary ($gpu_name, $(date -u +%Y-%m-%dT%H:%M:%SZ), $((SECONDS - start_s))s, results in $results):"
    for s in deps "${ordered[@]}"; do
      printf '  %-8s %-14s %ss\n' "$s" "${status_of[$s]:-not run}" "${time_of[$s]:-0}"
    done)
  for s in deps "${ordered[@]}"; do
    case "${status_of[$s]:-not run}" in passed | planned) ;; *) failed=1 ;; esac
  done
  if [ $dry -eq 0 ]; then
    echo "$summary" | sed 's/^/# /' >>"$session"
    echo "logs: $logs/<step>.log; commands: $session" >&2
    if [ -n "$tarfile" ]; then
      mkdir -p "$(dirname "$tarfile")"
      if tar -czf "$tarfile" -C "$(dirname "$results")" "$(basename "$results")"; then
        echo "packed $results into $tarfile ($(du -h "$tarfile" | cut -f1))" >&2
      else
        echo "could not pack $results into $tarfile" >&2; failed=1
      fi
    fi
  fi
  echo "$summary"
  exit $failed
}
# ---- the session -----------------------------------------------------------------------------
# Internal commands (the info step runs them as commands of their own).
case "${1:-}" in
  __versions) info_versions >"$2" 2>&1; exit ;;
  __host) info_host >"$2" 2>&1; exit ;;
  __source) info_source "$2" >"$2/source.txt" 2>&1; exit ;;
  __ctest_gpu) ctest_gpu "$2" "$3"; exit ;;
  __sanitize) sanitize_gpu "$2" "$3" "$4"; exit ;;
esac

# ---- options ----------------------------------------------------------------------------------
orig_args=("$@")
deps=.gpu-deps
prefix=/tmp/detrain-deps
build="build-gpu"
results=""
tarfile=""
time_limit=0
jobs=$(nproc 2>/dev/null || echo 4)
dry=0
steps=()
# A folder or file named on the command line: relative to where the script was started.
arg_path() { case "$1" in /* | none) echo "$1" ;; *) echo "$orig_pwd/$1" ;; esac; }
while [ $# -gt 0 ]; do
  case "$1" in
    --deps) deps=$(arg_path "${2:?--deps needs a folder}"); shift 2 ;;
    --prefix) prefix=$(arg_path "${2:?--prefix needs a folder}"); shift 2 ;;
    --build) build=$(arg_path "${2:?--build needs a folder}"); shift 2 ;;
    --results) results=$(arg_path "${2:?--results needs a folder}"); shift 2 ;;
    --tar) tarfile=$(arg_path "${2:?--tar needs a file}"); shift 2 ;;
    --time-limit) time_limit=${2:?--time-limit needs seconds}; shift 2 ;;
    --jobs) jobs=${2:?--jobs needs a number}; shift 2 ;;
    --dry-run) dry=1; shift ;;
    -h | --help) usage ;;
    info | build | smoke | tests | memcheck | racecheck | runs | bench | torch | crossdev | matrix)
      steps+=("$1"); shift ;;
    sanitize) steps+=(memcheck racecheck); shift ;;
    call1) steps+=(build smoke tests memcheck); shift ;;
    call2) steps+=(runs crossdev); shift ;;
    call3) steps+=(bench torch); shift ;;
    call4) steps+=(matrix racecheck); shift ;;
    all) steps+=(build smoke tests memcheck runs crossdev bench torch matrix racecheck); shift ;;
    *) echo "gpu_session.sh: unknown step or option '$1'" >&2; usage ;;
  esac
done
[ ${#steps[@]} -gt 0 ] || usage
[[ "$time_limit" =~ ^[0-9]+$ ]] || { echo "gpu_session.sh: --time-limit: seconds, got '$time_limit'" >&2; exit 2; }
[[ "$jobs" =~ ^[1-9][0-9]*$ ]] || { echo "gpu_session.sh: --jobs: a number, got '$jobs'" >&2; exit 2; }
# info first, once; the others in the order given, each once.
ordered=(info)
for s in "${steps[@]}"; do
  case " ${ordered[*]} " in *" $s "*) ;; *) ordered+=("$s") ;; esac
done

start_s=$SECONDS
stamp=$(date -u +%Y%m%dT%H%M%SZ)

# The GPU, the results folder.
gpu_name=${DT_GPU_NAME:-$(gpu_query name)}
[ -n "$gpu_name" ] || gpu_name="no-gpu"
# "NVIDIA H100 80GB HBM3" -> nvidia-h100-80gb-hbm3
gpu_slug=$(printf '%s' "$gpu_name" | tr '[:upper:]' '[:lower:]' | tr ' ' '-' | tr -cd 'a-z0-9._-')
[ -n "$results" ] || results=results/$gpu_slug
detrain=$build/detrain
session=$results/session-$stamp.txt
logs=$results/logs

if [ $dry -eq 0 ]; then
  mkdir -p "$logs" || exit 2
  {
    echo "# scripts/gpu_session.sh session $stamp on $(hostname 2>/dev/null)"
    echo "# command (in $orig_pwd): $(printf '%q ' "$0" "${orig_args[@]+"${orig_args[@]}"}")"
  } >"$session"
fi
trap 'say "interrupted"; finish' INT TERM
step=deps
begin_step deps
deps_env || step_failed=$((step_failed + 1))
end_step
say "gpu: $gpu_name; results: $results; build: $build; CUDA architectures: $(cuda_archs || true)"
if [ $dry -eq 0 ]; then
  for v in PATH LD_LIBRARY_PATH PKG_CONFIG_PATH CMAKE_PREFIX_PATH CPATH DETRAIN_DATA DT_CUDA_ARCHS DT_GIT_REV; do
    echo "# env $v=${!v:-}" >>"$session"
  done
fi
for s in "${ordered[@]}"; do
  if [ "$(time_left)" -le 5 ]; then
    status_of[$s]="not run (time)"
    continue
  fi
  begin_step "$s"
  "step_$s"
  end_step
done
finish

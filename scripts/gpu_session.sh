#!/usr/bin/env bash
# The GPU session in one call: everything a lent GPU must tell, in the order that matters,
# each stage under its own time cap, the whole under --time-limit, results written as each
# stage ends. Run in the repo root of the device machine (docs/gpu.md has the exact call):
#
#   scripts/gpu_session.sh --time-limit 540 --out "$OUT" first-light
#
# first-light = info build matrix smoke tests crossdev replicas bench torch gpt memcheck. A stage that
# fails does not stop the next, except `build`: a configure or build failure prints its error
# tail and ends the call at once (there is then time to fix it and call again). After every
# stage, --out DIR gets summary.txt (one table: stage, verdict, time, key numbers, the first
# failure) and results-<gpu>.tar.gz (results/<gpu>/), so a call cut short still returns
# everything done so far. Other verbs (no GPU needed): `kind` (which device kind the next
# lease should ask for), `payload` (what a GPU call carries, against the 64 MiB limit).
# Dependencies come from a folder made by `scripts/gpu_deps.sh fetch` (docs/gpu.md).
set -uo pipefail

orig_pwd=$PWD
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo" || exit 2

# ---- the plan ---------------------------------------------------------------------------------
# Stages in run order, and each one's cap in seconds (the first light's caps sum to 660, the
# matrix's 240 with the 420 of the other stages; --time-limit cuts the tail: docs/gpu.md gives
# the estimate of what each needs on an H100 and its basis).
first_light=(info build matrix smoke tests crossdev replicas bench torch gpt memcheck)
later=(gptgpu resnet racecheck) # for a later call or lease; not part of the first light
# The caps come from the first H100 call (results/nvidia-h100-80gb-hbm3/session-*.txt): each is
# 2-3x what the stage took there, torch (about 25 s a model: PyTorch's import and CUDA start)
# 2x, and memcheck takes the rest. The GPT's stage (issue 40; never run on a GPU yet) comes
# after every other model's, so that nothing it does can cost their results: its cap is an
# estimate (its gpu tests ~20 s, smoke and the cross-device run ~15 s, replicas and explain
# ~12 s, bench ~10 s, PyTorch's four modes, 60 steps each, ~35 s: about 95 s); build (11 s
# there), torch (MLP 23 s, LeNet 27 s alone there) and memcheck's floor came down to make
# room within the 420 s. Issue 67 gave torch a third mode per model (48 s for two on the
# H200, results/nvidia-h200/summary.txt) from smoke, crossdev and replicas (7, 3 and 6 s of
# their 30 there).
declare -A cap_of=([info]=15 [build]=50 [smoke]=25 [tests]=45 [crossdev]=20 [replicas]=20
                   [bench]=40 [torch]=90 [gpt]=95 [memcheck]=20 [gptgpu]=300 [resnet]=150 [racecheck]=240
                   [matrix]=240)
# The overhead table comes first (issue 64): the matrix right after the build, its cuda
# entries (configs/overhead_matrix.yaml) in about 3 minutes; estimated from the H200's first
# light (results/nvidia-h200/bench: 0.27-1.7 ms a step for the small models at fast, 30 ms
# for the GPU-scale GPT, portable 1.4-23x), its cap 240 s.
matrix_entries=mlp-cuda,lenet-cuda,lenet-conv-cuda,bnn-cuda,bnn-rng-cuda,gpt-cuda,mlp-noise-cuda,lenet-noise-cuda,gptgpu-cuda
# memcheck runs last, on what --time-limit leaves (at least its cap when there is no limit)
# -- unless a later stage follows it in the plan: then its cap. Each sanitized case is cut at
# DT_SANITIZE_CASE_S (150 s).
# The gpu test cases memcheck takes, smallest first (compute-sanitizer is 10-100x slower).
memcheck_cases=(cuda.elementwise_parity cuda_dense.dense_parity cuda_dense.loss_parity
                cuda.resident_gather_parity cuda_bnn.gpu_bnn_elementwise_parity
                cuda_conv.pool_parity cuda_conv.conv_parity exact.cuda_exact_sum_equals_cpu
                hashpipe.cuda_copy_out_exact cuda_dense.deferred_checks
                gpt.gpu_gradients_equal_cpu_and_grid_free)
models=(mlp lenet bnn)
declare -A config_of=([mlp]=configs/quickstart.yaml [lenet]=configs/lenet.yaml [bnn]=configs/bnn.yaml)
# Every Fashion-MNIST run here trains on the part of the data set the call carries, the
# part the committed CPU references trained on: fmnist_cut_sets (scripts/fmnist_cut.sh).
. "$repo/scripts/fmnist_cut.sh"
# The device's 64 MiB less room for many windows' results (issue 48 item 5): tracked +
# untracked + carried.
payload_limit_mib=40

usage() {
  cat >&2 <<'EOF'
usage: scripts/gpu_session.sh [OPTIONS] first-light | STAGE...
       scripts/gpu_session.sh kind | payload [--limit-mib N] [--deps DIR]
stages (run in this order whatever the order given; `info` always first; caps in seconds):
  info      15  nvidia-smi, driver, compute capability, nvcc/cuBLAS/cuDNN/PyTorch versions,
                host, git revision or DT_GIT_REV, a SHA-256 of every source file
  build     50  the .debs of --deps unpacked; configure BUILD for this GPU's architecture only
                (DT_CUDA_ARCHS overrides), cuDNN required (DETRAIN_CUDNN_ROOT, else the
                toolkit's, else the Python environment's nvidia/cudnn); build `detrain` and
                the gpu-labelled test executables only. A failure prints the error tail and
                ends the call.
  matrix   240  the overhead table first (issue 64): configs/overhead_matrix.yaml's cuda entries
                (every model, level, portable+math=exact and single-control ablation; the
                noise-source cells; the GPU-scale GPT last, short), trained into BUILD; the
                reports and replicas' run.json copied to RESULTS/overhead_matrix;
                RESULTS/overhead_table.{md,csv} (scripts/overhead_table.py): step ratios with
                95% intervals, hashing share, host waits per step, digests, noise spreads
  smoke     25  the MLP, LeNet and the BNN at fast, run_to_run and portable, 5 steps each,
                CUDA_LAUNCH_BLOCKING=1 (a faulting kernel is named by the op that launched it)
  tests     45  ctest -L gpu -LE gpt (and mpi without mpirun); a test skipped for want of a
                usable GPU fails the stage, other skips are listed with their reasons
  crossdev  20  the portable runs of the three models on cuda (100 steps, per-tensor digests)
                against the committed CPU references results/cpu/crossdev-t2 (and -t1, and
                every other GPU's committed crossdev): RESULTS/cross_device.md, a column each;
                the local estimator's reference (results/cpu/bnn-local/reference, every rng
                mode) rerun by detrain reproduce (RESULTS/reproduce-bnn-local/)
  replicas  20  each model at run_to_run and fast, 3 replicas, 30 steps, nothing varied:
                run_to_run replicas must be identical; fast's first divergent step and
                distinct digests recorded
  bench     40  detrain bench on cuda, short: every level, portable+math=exact, fast+math=tf32
                and run_to_run as before issue 67 against fast per model, hashing share, host
                waits per step, which form the exact products took; then fast, run_to_run and
                portable again with backend.graphs=true (each step one CUDA graph)
  torch     90  scripts/bench_torch.py: PyTorch FP32 (the MLP's default, LeNet's fp32 mode), tf32
                and deterministic, MLP and LeNet
  gpt       95  the tiny GPT (issue 40), after the other models: its gpu tests (ctest -L gpt);
                smoke at each level; the portable run on cuda against the committed CPU
                reference results/cpu/crossdev-gpt-t2 (RESULTS/cross_device_gpt.md); fast and
                run_to_run replicas and explain of fast's; detrain bench (each level and
                portable+math=exact); PyTorch on the same GPT: default, tf32 (what fast
                allows), deterministic, sdpa (fused attention)
  memcheck  20+ a subset of the gpu test cases under compute-sanitizer memcheck, one by one,
                on whatever time is left
  gptgpu   300 (later call) the GPT at GPU scale (configs/gpt-gpu.yaml, issue 53): portable on
                cuda against results/cpu/crossdev-gpt-gpu-t2 (RESULTS/cross_device_gpt_gpu.md);
                detrain bench at each level, portable+math=exact and fast+rng=philox;
                PyTorch on the same shape: default, tf32, deterministic, sdpa, compile;
                fast's learning run (validation loss, sample text); run_to_run and fast
                replicas, 20 steps at batch 8, and explain
  resnet   150 (later call) the ResNet with batch normalisation (configs/resnet.yaml, issue
                68; its kernels are in the tests stage's net.cuda_equals_cpu): smoke at each
                level; portable on cuda against results/cpu/crossdev-resnet-t2
                (RESULTS/cross_device_resnet.md); fast and run_to_run replicas and explain of
                fast's; detrain bench at each level; PyTorch on the same network: default,
                benchmark, deterministic
  racecheck 240 (later call) every gpu test case under compute-sanitizer racecheck, those of
                the shared-memory kernels first, the end-to-end ones last
  first-light = info build matrix smoke tests crossdev replicas bench torch gpt memcheck (caps sum 660)
verbs:
  kind      the device kind the next lease should ask for: the other one of nvidia-h100-x1
            and nvidia-h200 when results/ holds one GPU kind's first light, so that the
            cross-device table gains a second architecture; once both ran, the kind whose
            last session (results/<gpu>/session-<UTC>.txt) is the older, so that they alternate
  payload   tracked + untracked-not-ignored files + the deps folder (or, where it is absent,
            the size scripts/gpu_deps.manifest records), against --limit-mib (default 56):
            MiB in all and the largest contributors; exit 1 when over
options:
  --out DIR         after every stage: DIR/summary.txt and DIR/results-<gpu>.tar.gz
  --time-limit S    the whole call's wall time: no command starts with under 5 s left, a
                    running one is cut at its stage's cap or the limit, whichever is first
  --cap STAGE=S     another cap for one stage (repeatable)
  --deps DIR        .debs from `scripts/gpu_deps.sh fetch` (default .gpu-deps; `none` = the
                    host's packages); unpacked into --prefix and sourced
  --prefix DIR      where the .debs go (default /tmp/detrain-deps)
  --build DIR       build folder (default build-gpu)
  --results DIR     results folder (default results/<gpu name from nvidia-smi>)
  --jobs N          build and test parallelism (default: number of CPUs)
  --dry-run         print the plan (every command, each stage's cap and their sum); run nothing
  --check-configs DETRAIN   with --dry-run: every `detrain run` and `bench` of the plan checked
                    with `DETRAIN run CONFIG --set ... --dry-run` (a config that does not parse
                    fails the dry run)
environment: DT_CUDA_ARCHS (default: the GPU's compute capability, e.g. 90; `default` = the
  project's fat binary), DETRAIN_CUDNN_ROOT, DT_GIT_REV (recorded when there is no .git),
  DT_GPU_NAME (the GPU's name, for dry runs and tests).
EOF
  exit 2
}

gpu_query() { # FIELD: nvidia-smi's value for the first GPU, empty without one
  command -v nvidia-smi >/dev/null 2>&1 || return 0
  nvidia-smi --query-gpu="$1" --format=csv,noheader 2>/dev/null | head -1
}

say() { echo "gpu_session: $*" >&2; [ $dry -eq 1 ] || echo "# $*" >>"$session"; }

# quote_args
. "$repo/scripts/lib.sh"

# ---- the payload (no GPU needed) --------------------------------------------------------------
# What a device call carries: tracked and untracked-not-ignored files, and the deps folder
# (its real size, or where it is absent -- CI -- the sizes scripts/gpu_deps.manifest records).
payload_report() {
  local limit=$payload_limit_mib deps_dir=.gpu-deps
  while [ $# -gt 0 ]; do
    case "$1" in
      --limit-mib) limit=${2:?--limit-mib needs a number}; shift 2 ;;
      --deps) deps_dir=${2:?--deps needs a folder}; shift 2 ;;
      *) echo "gpu_session.sh payload: unknown option '$1'" >&2; exit 2 ;;
    esac
  done
  [[ "$limit" =~ ^[0-9]+$ ]] || { echo "gpu_session.sh payload: --limit-mib: a number, got '$limit'" >&2; exit 2; }
  git rev-parse --git-dir >/dev/null 2>&1 ||
    { echo "gpu_session.sh payload: not a git checkout: what travels cannot be told" >&2; exit 2; }
  local files sizes tree_bytes deps_bytes deps_how
  # per path: bytes (links count as themselves, as they travel)
  sizes=$(git ls-files -z --cached --others --exclude-standard |
          xargs -0 -r stat -c '%s %n' 2>/dev/null)
  tree_bytes=$(awk '{ s += $1 } END { print s + 0 }' <<<"$sizes")
  if [ -d "$deps_dir" ]; then
    deps_bytes=$(find "$deps_dir" -type f -printf '%s\n' | awk '{ s += $1 } END { print s + 0 }')
    deps_how="$deps_dir, as fetched"
  elif [ -f scripts/gpu_deps.manifest ]; then
    deps_bytes=$(awk '!/^#/ && NF >= 3 { s += $3 } END { print s + 0 }' scripts/gpu_deps.manifest)
    deps_how="no $deps_dir here: the sizes scripts/gpu_deps.manifest records"
  else
    echo "gpu_session.sh payload: neither $deps_dir nor scripts/gpu_deps.manifest: the deps' size is unknown" >&2
    exit 2
  fi
  local total=$((tree_bytes + deps_bytes)) limit_bytes=$((limit * 1048576))
  mib() { awk -v b="$1" 'BEGIN { printf "%.1f", b / 1048576 }'; }
  echo "payload of a GPU call: $(mib $total) MiB of at most $limit MiB (the device's 64 MiB less room for results)"
  echo "  tree (tracked + untracked, not ignored): $(mib "$tree_bytes") MiB in $(wc -l <<<"$sizes") files"
  echo "  deps (carry .gpu-deps): $(mib "$deps_bytes") MiB ($deps_how)"
  echo "largest contributors (folders two deep, and the deps):"
  {
    awk '{ n = split($2, p, "/"); k = (n > 2) ? p[1] "/" p[2] "/" : (n > 1 ? p[1] "/" : $2); s[k] += $1 }
         END { for (k in s) print s[k], k }' <<<"$sizes"
    echo "$deps_bytes $deps_dir/ (deps)"
  } | sort -rn | head -8 | awk '{ printf "  %7.2f MiB  %s\n", $1 / 1048576, substr($0, index($0, " ") + 1) }'
  if [ "$total" -gt "$limit_bytes" ]; then
    echo "OVER: $(mib $total) MiB > $limit MiB: pack or drop committed results (per-step CSVs into a .tar.xz: scripts/results.sh pack_per_step), or carry less"
    return 1
  fi
  return 0
}

# ---- the next lease's kind --------------------------------------------------------------------
# results/<gpu>/info/gpu.csv names the GPU of each committed first light.
next_kind() {
  # Each kind's last session: the newest results/<gpu>/session-<UTC stamp>.txt of a folder
  # whose info/gpu.csv names it (none: no first light yet).
  local last_h100="" last_h200="" f dir t
  for f in results/*/info/gpu.csv; do
    [ -f "$f" ] || continue
    dir=${f%/info/gpu.csv}
    t=$(ls "$dir" 2>/dev/null | sed -n 's/^session-\([0-9TZ]*\)\.txt$/\1/p' | LC_ALL=C sort | tail -n 1)
    [ -n "$t" ] || t=0
    if grep -qi 'H100' "$f"; then [[ "$t" > "$last_h100" ]] && last_h100=$t; fi
    if grep -qi 'H200' "$f"; then [[ "$t" > "$last_h200" ]] && last_h200=$t; fi
  done
  if [ -n "$last_h100" ] && [ -z "$last_h200" ]; then
    echo "nvidia-h200"
    echo "gpu_session: results/ holds an H100's first light and no H200's: ask for kind nvidia-h200" >&2
  elif [ -n "$last_h200" ] && [ -z "$last_h100" ]; then
    echo "nvidia-h100-x1"
    echo "gpu_session: results/ holds an H200's first light and no H100's: ask for kind nvidia-h100-x1" >&2
  elif [ -z "$last_h100" ]; then
    echo "nvidia-h100-x1"
    echo "gpu_session: no GPU first light in results/ yet: the default kind (leave kind out)" >&2
  elif [[ "$last_h200" > "$last_h100" ]]; then
    # both kinds ran: alternate, the kind whose last session is the older one next
    echo "nvidia-h100-x1"
    echo "gpu_session: both kinds ran; the H100's last session ($last_h100) is older than the H200's ($last_h200): ask for kind nvidia-h100-x1" >&2
  else
    echo "nvidia-h200"
    echo "gpu_session: both kinds ran; the H200's last session ($last_h200) is not newer than the H100's ($last_h100): ask for kind nvidia-h200" >&2
  fi
}

# ---- running commands -------------------------------------------------------------------------
stage=""         # the stage now running
stage_failed=0   # commands of this stage that failed
stage_t0=0
last_verdict=""   # the last command's exit status, for last_error when its log says nothing
last_failed=""    # the stage's first failed command, for the table when it says nothing more
declare -A status_of=() time_of=() notes_of=() failure_of=()

overall_left() { # seconds before --time-limit (a large number without one)
  if [ "$time_limit" -eq 0 ]; then echo 999999; else echo $((time_limit - (SECONDS - start_s))); fi
}
stage_left() { # seconds before the stage's cap or the whole limit, whichever comes first
  local a b
  a=$((${cap_of[$stage]:-999999} - (SECONDS - stage_t0)))
  b=$(overall_left)
  [ "$a" -lt "$b" ] && echo "$a" || echo "$b"
}
note() { # key numbers of the stage (empty ones dropped)
  local a
  for a in "$@"; do
    [ -z "${a// /}" ] || notes_of[$stage]+="${notes_of[$stage]:+; }$a"
  done
}
failure() { [ -n "${failure_of[$stage]:-}" ] || failure_of[$stage]="$*"; } # its first failure

# run [--ok "CODES"] CMD...: run CMD with its output appended to the stage's log, record it
# with its exit status and duration in the session file. A status outside CODES (default 0)
# fails the stage. The command is cut at the stage's cap or --time-limit.
run() {
  local ok="0"
  if [ "$1" = --ok ]; then ok=$2; shift 2; fi
  local line
  line=$(quote_args "$@")
  if [ $dry -eq 1 ]; then
    echo "[$stage] $line"
    check_config_of "$@"
    return 0
  fi
  local left log=$logs/$stage.log t0=$SECONDS rc
  left=$(stage_left)
  if [ "$left" -le 5 ]; then
    echo "[$stage] not started (stage cap or time limit): $line" | tee -a "$log" >&2
    echo "not-started  $line" >>"$session"
    stage_failed=$((stage_failed + 1))
    failure "not started (time): $line"
    return 124
  fi
  { echo; echo "=== $(date -u +%H:%M:%S) \$ $line"; } >>"$log"
  timeout --kill-after=5 "$left" "$@" >>"$log" 2>&1 </dev/null
  rc=$?
  local secs=$((SECONDS - t0)) verdict=ok
  case " $ok " in
    *" $rc "*) ;;
    *) verdict=FAILED; stage_failed=$((stage_failed + 1))
       [ -n "$last_failed" ] || last_failed="exit $rc: $(cut -c1-120 <<<"$line")" ;;
  esac
  [ $rc -ne 124 ] && [ $rc -ne 137 ] || verdict="FAILED (cut at ${left}s)"
  echo "=== exit $rc after ${secs}s ($verdict)" >>"$log"
  last_verdict="exit $rc after ${secs}s${verdict#FAILED}"
  printf '%-6s rc=%-3s %5ss  %s\n' "${verdict%% *}" "$rc" "$secs" "$line" >>"$session"
  echo "[$stage] $verdict rc=$rc ${secs}s: $line" >&2
  return $rc
}

# A shell snippet as one command (pipes, redirections into the results folder).
sh_c() { run "${@:1:$#-1}" bash -c "${!#}"; }

# The last meaningful line a failed command left in the stage's log (its error).
last_error() {
  local e
  e=$(grep -v '^===\|^ *$' "$logs/$stage.log" 2>/dev/null |
      grep -iE 'error|fail|detrain:|abort|invalid|refus|cannot' | tail -1 | cut -c1-200)
  echo "${e:-$last_verdict}"
}

# --check-configs: in a dry run, `detrain run|bench CONFIG ... --set K=V ...` of the plan is
# checked by `DETRAIN run CONFIG --set K=V ... --dry-run` (bench's own options left out).
check_config_of() {
  [ -n "$check_detrain" ] || return 0
  local args=("$@") i=0 cfg="" sets=() verb=""
  while [ $i -lt ${#args[@]} ]; do
    case "${args[$i]}" in
      env | CUDA_LAUNCH_BLOCKING=*) ;;
      "$detrain") verb=${args[$((i + 1))]:-}; cfg=${args[$((i + 2))]:-}; i=$((i + 2)) ;;
      --set) sets+=(--set "${args[$((i + 1))]}"); i=$((i + 1)) ;;
    esac
    i=$((i + 1))
  done
  case "$verb" in run | bench) ;; *) return 0 ;; esac
  # the dry run makes the run's checks, the output folder's too: a fresh one, never created
  local msg errs scratch
  scratch=$(mktemp -d "${TMPDIR:-/tmp}/detrain-check.XXXXXX")
  if msg=$("$check_detrain" run "$cfg" "${sets[@]+"${sets[@]}"}" --out "$scratch/out" \
      --dry-run 2>"$scratch/err"); then
    echo "    config ok: $(sed -n 2p <<<"$msg" | sed 's/^ *//' | cut -c1-150)"
  else
    errs=$(cat "$scratch/err")
    echo "    CONFIG FAILS: $errs $msg"
    config_failures=$((config_failures + 1))
  fi
  rm -rf "$scratch"
}

begin_stage() {
  stage=$1; stage_failed=0; stage_t0=$SECONDS; last_failed=""
  [ $dry -eq 1 ] && { echo "## $stage (cap ${cap_of[$stage]} s)"; return; }
  echo "## stage $stage (cap ${cap_of[$stage]} s, $(overall_left) s left in the call)" >>"$session"
  echo "gpu_session: stage $stage (cap ${cap_of[$stage]} s)" >&2
  # the stage's log begins with this session: a committed one of an earlier window (results/
  # <gpu>/logs) would otherwise lend its first failure and counts to this table (the H200's
  # window of 2026-12-04 read 2026-11-28's tests and memcheck results so); git keeps the old
  : >"$logs/$stage.log"
}
end_stage() {
  local s=passed
  [ $stage_failed -eq 0 ] || s=FAILED
  [ $dry -eq 0 ] || s=planned
  # a failed command the stage said nothing more of: the command and its status
  [ $stage_failed -eq 0 ] || [ -n "${failure_of[$stage]:-}" ] || failure "$last_failed"
  status_of[$stage]=$s
  time_of[$stage]=$((SECONDS - stage_t0))
  [ $dry -eq 1 ] || write_outputs
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

# The folder holding include/cudnn.h: DETRAIN_CUDNN_ROOT when set; none when the toolkit has
# one (CMake finds it there); else the first in the Python environment's site-packages/nvidia
# (pip's cuDNN, which PyTorch loads).
cudnn_root() {
  if [ -n "${DETRAIN_CUDNN_ROOT:-}" ]; then echo "$DETRAIN_CUDNN_ROOT"; return 0; fi
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
    "") # the GPU's own; where nvidia-smi cannot say, CMake's `native` (the GPUs it finds)
      local cc; cc=$(gpu_query compute_cap); if [ -n "$cc" ]; then echo "${cc/./}"; else echo native; fi ;;
    *) echo "$DT_CUDA_ARCHS" ;;
  esac
}

# The gpu-labelled test executables, from the test lists (tests/test_<module>.cmake naming
# LABELS gpu): known before configure, so that the dry run shows the real build command.
gpu_test_targets() {
  grep -l 'LABELS gpu' tests/test_*.cmake 2>/dev/null | sed 's|^tests/\(test_[a-z0-9_]*\)\.cmake$|\1|' | sort
}

# ---- info helpers (internal commands, so that the session file records one line each) ---------
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
  cudnn=$(cudnn_root)
  echo "DETRAIN_CUDNN_ROOT: ${cudnn:-none (cuDNN from the toolkit, if any)}"
  for h in ${cudnn:+"$cudnn/include/cudnn_version.h"} "$inc/cudnn_version.h" /usr/include/cudnn_version.h \
           /usr/include/x86_64-linux-gnu/cudnn_version.h; do
    if [ -f "$h" ]; then
      echo "cudnn ($h): $(awk '/#define CUDNN_(MAJOR|MINOR|PATCHLEVEL) / {printf "%s%s", s, $3; s="."}' "$h")"
      break
    fi
  done
  echo "mpirun: $(command -v mpirun || echo none)"
  echo "compute-sanitizer: $(command -v compute-sanitizer || ls "$(dirname "$nvcc")/compute-sanitizer" 2>/dev/null || echo none)"
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

# ctest -L gpu. Afterwards every skipped test is run again alone (a skip exits at once) to
# read its reason: "SKIPPED (no usable GPU): ..." (tests/check.h) fails the stage -- on the
# GPU machine it means the GPU was not usable -- other skips (no MPI, ...) are listed.
ctest_gpu() { # BUILD JOBS TIMEOUT [EXCLUDE_LABEL [LABEL]] (LABEL default gpu)
  local build=$1 jobs=$2 tmo=$3 excl=${4:-} incl=${5:-gpu} text rc
  text=$(ctest --test-dir "$build" -L "$incl" ${excl:+-LE "$excl"} --no-tests=error --output-on-failure \
               -j "$jobs" --timeout "$tmo" 2>&1)
  rc=$?
  echo "$text"
  local n_pass n_fail n_total skipped=() t nogpu=0 other=0 why
  n_total=$(grep -cE '^ *[0-9]+/[0-9]+ Test +#' <<<"$text" || true)
  n_pass=$(grep -cE '^ *[0-9]+/[0-9]+ Test +#.* Passed' <<<"$text" || true)
  n_fail=$(grep -cE '^ *[0-9]+/[0-9]+ Test +#.*\*\*\*(Failed|Timeout|Exception)|Not Run' <<<"$text" || true)
  mapfile -t skipped < <(sed -nE 's/^ *[0-9]+\/[0-9]+ Test +#[0-9]+: ([^ ]+) .*Skipped.*/\1/p' <<<"$text")
  for t in "${skipped[@]+"${skipped[@]}"}"; do
    why=$(ctest --test-dir "$build" -R "^${t//./\\.}\$" -V 2>&1 | grep -m1 -E '^[0-9]+: (SKIPPED|skipped)' | sed 's/^[0-9]*: //')
    case "$why" in
      *"no usable GPU"*) nogpu=$((nogpu + 1)); echo "gpu_session: $t skipped for want of a usable GPU: $why" ;;
      *) other=$((other + 1)); echo "gpu_session: $t skipped (not a GPU matter): ${why:-no reason printed}" ;;
    esac
  done
  echo "gpu_session: tests: $n_total run, $n_pass passed, $n_fail failed, ${#skipped[@]} skipped ($nogpu for want of a usable GPU, $other for other reasons)"
  # The first failing test and the first line of its output that says what failed.
  local first
  first=$(sed -nE 's/^ *[0-9]+\/[0-9]+ Test +#[0-9]+: ([^ ]+) .*\*\*\*(Failed|Timeout|Exception).*/\1/p' <<<"$text" | head -1)
  if [ -n "$first" ]; then
    local msg
    msg=$(awk -v t="$first" '
      index($0, "Test #") && index($0, " " t " ") { on = 1; next }
      on && /Test +#[0-9]+:|^ *Start +[0-9]+:/ { exit }
      on && /CHECK|failed|FAILED|error|Error|differ|abort|Assert/ { print; exit }' <<<"$text" | cut -c1-200)
    echo "gpu_session: first failing test: $first: ${msg:-see its output above}"
  fi
  [ $rc -eq 0 ] || rc=1 # ctest's own codes (8: a test failed) as one
  [ "$nogpu" -eq 0 ] || rc=1
  return $rc
}

# sanitize_gpu TOOL BUILD LOG CASE...: each gpu test case under compute-sanitizer --tool TOOL
# (memcheck, racecheck), one by one, while time is left (the caller's `timeout` ends the last
# one); nonzero when a case reports an error or is skipped.
sanitize_gpu() {
  local tool=$1 build=$2 log=$3 san nvcc c rc n=0 bad=0
  shift 3
  san=$(command -v compute-sanitizer 2>/dev/null) ||
    { nvcc=$(nvcc_path) && san=$(dirname "$nvcc")/compute-sanitizer; }
  if [ -z "$san" ] || [ ! -x "$san" ]; then
    echo "gpu_session: compute-sanitizer not found (PATH, next to nvcc)" | tee "$log"
    return 1
  fi
  : >"$log"
  for c in "$@"; do
    echo "=== $tool: $c" >>"$log"
    # each case its own limit (DT_SANITIZE_CASE_S, default 150 s): a hang in one case ends
    # there, not with the stage's whole time
    timeout --kill-after=5 "${DT_SANITIZE_CASE_S:-150}" \
      "$san" --tool "$tool" --error-exitcode 1 "$build/tests/test_${c%%.*}" "${c#*.}" >>"$log" 2>&1 </dev/null
    rc=$?
    [ $rc -ne 124 ] && [ $rc -ne 137 ] || echo "=== cut at ${DT_SANITIZE_CASE_S:-150} s" >>"$log"
    echo "=== exit $rc" >>"$log"
    n=$((n + 1))
    if [ $rc -ne 0 ]; then
      bad=$((bad + 1))
      echo "gpu_session: $tool: $c: exit $rc$([ $rc -ne 77 ] || echo ' (skipped)')"
    else
      echo "gpu_session: $tool: $c: clean"
    fi
  done
  echo "gpu_session: $tool: $n of $# cases run, $bad with errors; log $log"
  [ $bad -eq 0 ]
}

# ---- stages -----------------------------------------------------------------------------------
stage_info() {
  local d=$results/info
  [ $dry -eq 1 ] || mkdir -p "$d"
  sh_c "nvidia-smi >$d/nvidia-smi.txt && nvidia-smi -q >$d/nvidia-smi-q.txt && nvidia-smi \
--query-gpu=name,driver_version,compute_cap,memory.total,clocks.max.sm,clocks.max.memory --format=csv >$d/gpu.csv"
  run bash scripts/gpu_session.sh __versions "$d/versions.txt"
  run bash scripts/gpu_session.sh __host "$d/host.txt"
  run bash scripts/gpu_session.sh __source "$d"
  [ $dry -eq 0 ] || return 0
  note "$(sed -n 2p "$d/gpu.csv" 2>/dev/null | cut -d, -f1-3 | sed 's/, */, /g')"
  note "$(grep -m1 -o 'release [0-9.]*' "$d/versions.txt" 2>/dev/null | sed 's/release/nvcc/')"
  note "$(grep -m1 '^cudnn (' "$d/versions.txt" 2>/dev/null | sed 's/ (.*)://; s/^cudnn/cuDNN/')"
  note "$(grep -m1 '^torch ' "$d/versions.txt" 2>/dev/null | cut -d' ' -f1-2)"
}

step_failed_abort=0 # set when build fails: the remaining stages are not run
stage_build() {
  local nvcc archs cudnn gen=() targets
  deps_env || { stage_failed=$((stage_failed + 1)); failure "deps: unpacking $deps failed"; }
  if ! nvcc=$(nvcc_path); then
    say "build: no nvcc on PATH, in \$CUDA_HOME/bin or /usr/local/cuda/bin"
    stage_failed=$((stage_failed + 1))
    failure "no nvcc"
    step_failed_abort=1
    return
  fi
  archs=$(cuda_archs)
  cudnn=$(cudnn_root)
  if [ -f "$build/CMakeCache.txt" ]; then
    :  # keep the generator the folder was made with
  elif command -v ninja >/dev/null 2>&1; then
    gen=(-G Ninja)
  fi
  mapfile -t targets < <(gpu_test_targets)
  if run cmake -S . -B "$build" "${gen[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DDETRAIN_CUDA=ON \
       -DCMAKE_CUDA_COMPILER="$nvcc" ${archs:+-DCMAKE_CUDA_ARCHITECTURES="$archs"} \
       -DDETRAIN_REQUIRE_CUDNN=ON ${cudnn:+-DDETRAIN_CUDNN_ROOT="$cudnn"}; then
    run cmake --build "$build" -j "$jobs" --target detrain "${targets[@]}"
  fi
  [ $dry -eq 0 ] || return 0
  if [ $stage_failed -gt 0 ]; then
    step_failed_abort=1
    failure "$(grep -m1 -E 'CMake Error|error:|Error [0-9]|FAILED:' "$logs/build.log" | cut -c1-200)"
    # the error tail now, within the call's first minute: there is time to fix and call again
    echo "gpu_session: BUILD FAILED: the end of $logs/build.log (errors first):"
    grep -E -A3 'CMake Error|error:|FATAL|undefined reference' "$logs/build.log" | head -40
    echo "----"
    tail -25 "$logs/build.log"
    return
  fi
  note "sm_${archs:-fat}, ${#targets[@]} gpu test executables + detrain"
  note "$(grep -m1 -o 'cuDNN [^ ]*libcudnn[^ ]*' "$logs/build.log" | sed 's/.*\///')"
}

need_build() {
  [ $dry -eq 1 ] || [ -x "$detrain" ] && return 0
  say "$stage: no $detrain: put the build stage first (scripts/gpu_session.sh build $stage)"
  stage_failed=$((stage_failed + 1))
  failure "no $detrain (build first)"
  return 1
}

stage_smoke() {
  need_build || return
  local m level out ok=0 n=0
  for m in "${models[@]}"; do
    for level in fast run_to_run portable; do
      out=$results/smoke/$m-$level
      [ $dry -eq 1 ] || rm -rf "$out"
      n=$((n + 1))
      if run env CUDA_LAUNCH_BLOCKING=1 "$detrain" run "${config_of[$m]}" --out "$out" \
          --set backend.device=cuda --set train.steps=5 --set replicas=1 \
          --set "policies=[$level]" --set report.snapshots=0 --set report.overhead_samples=0 \
          "${fmnist_cut_sets[@]}" --quiet; then
        ok=$((ok + 1))
      else
        failure "$m $level: $(last_error)"
      fi
    done
  done
  [ $dry -eq 1 ] || note "$ok/$n runs"
}

stage_tests() {
  need_build || return
  local excl="gpt" # the GPT's gpu tests run in its own stage
  if ! command -v mpirun >/dev/null 2>&1; then
    excl="gpt|mpi"
    say "tests: no mpirun here: the mpi-labelled gpu tests are left out (-LE mpi)"
  fi
  local tmo
  tmo=$(stage_left)
  [ $dry -eq 0 ] || tmo=${cap_of[tests]}
  run bash scripts/gpu_session.sh __ctest_gpu "$build" "$((jobs < 6 ? jobs : 6))" "$tmo" $excl
  [ $dry -eq 0 ] || return 0
  note "$(grep -m1 -o '[0-9]* run, [0-9]* passed, [0-9]* failed, [0-9]* skipped ([^)]*)' "$logs/tests.log")"
  local f
  f=$(grep -m1 'first failing test:' "$logs/tests.log" | sed 's/.*first failing test: //' | cut -c1-200)
  [ -z "$f" ] || failure "$f"
  f=$(grep -m1 'for want of a usable GPU:' "$logs/tests.log" | sed 's/^gpu_session: //' | cut -c1-200)
  [ -z "$f" ] || failure "$f"
}

# The cross-device table: the portable runs of the three models on this GPU, against the
# committed CPU references (made beforehand: no CPU training in device time) and every other
# GPU's committed crossdev, one column each.
stage_crossdev() {
  need_build || return
  local ref=results/cpu/crossdev-t2 ref1=results/cpu/crossdev-t1 gpu=$results/crossdev roots d
  if [ ! -f "$ref/mlp/config.json" ]; then
    say "crossdev: no $ref/mlp/config.json (the committed CPU reference; make it beforehand: results/cpu/crossdev-README.md) (FAILED)"
    stage_failed=$((stage_failed + 1))
    failure "no committed CPU reference $ref"
    [ $dry -eq 1 ] || return
  fi
  run env DETRAIN="$detrain" bash scripts/cross_device.sh run cuda "$gpu"
  roots=("$ref")
  [ ! -f "$ref1/mlp/config.json" ] || roots+=("$ref1")
  for d in results/*/crossdev; do # other GPUs' committed columns
    [ -f "$d/commands.txt" ] && [ "$d" != "$gpu" ] && [ "$d" != "results/$gpu_slug/crossdev" ] &&
      roots+=("$d")
  done
  roots+=("$gpu")
  run env DETRAIN="$detrain" bash scripts/cross_device.sh table "${roots[@]}" \
      --out "$results/cross_device.md"
  # the Bayesian MLP's local estimator (issue 69): its CPU reference under every rng mode,
  # rerun here by detrain reproduce (the rerun's folder kept)
  local bl=ok
  run "$detrain" reproduce results/cpu/bnn-local/reference --set backend.device=cuda \
      --cells portable,portable+rng=philox,portable+rng=stored \
      --out "$results/reproduce-bnn-local" || bl=failed
  [ $dry -eq 0 ] || return 0
  if [ "$bl" = ok ]; then note "bnn-local identical (reproduce)"; else failure "bnn-local: $(last_error)"; fi
  local m v
  for m in "${models[@]}"; do
    v=$(grep -m1 -E "^- $m: " "$results/cross_device.md" 2>/dev/null | sed "s/^- $m: //" | cut -c1-60)
    case "$v" in
      identical) note "$m identical" ;;
      *) note "$m ${v:-no result}"; failure "$m: ${v:-no result} (cross_device.md)" ;;
    esac
  done
}

# On one GPU: run_to_run replicas identical; fast replicas recorded (first divergent step,
# distinct digests). Short: 3 replicas, 30 steps, nothing varied.
stage_replicas() {
  need_build || return
  local m out k summary r2r fast
  for m in "${models[@]}"; do
    out=$results/replicas/$m
    [ $dry -eq 1 ] || rm -rf "$out"
    run "$detrain" run "${config_of[$m]}" --out "$out" --set backend.device=cuda \
        --set 'policies=[fast, run_to_run]' --set replicas=3 --set train.steps=30 --set 'vary=[]' \
        --set hash.per_tensor=true --set report.snapshots=0 --set report.overhead_samples=0 \
        "${fmnist_cut_sets[@]}" --quiet ||
      { failure "$m: $(last_error)"; continue; }
    for k in 1 2; do
      run "$detrain" compare "$out/run_to_run/replica-0" "$out/run_to_run/replica-$k" ||
        failure "$m run_to_run replica $k differs from replica 0"
    done
    [ $dry -eq 0 ] || continue
    summary=$out/summary.csv
    r2r=$(awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) c[$i] = i; next }
                   $c["policy"] == "run_to_run" { print $c["distinct_final_digests"] "/" $c["completed"] }' "$summary" 2>/dev/null)
    fast=$(awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) c[$i] = i; next }
                    $c["policy"] == "fast" { s = $c["first_divergent_step"]; t = $c["first_divergent_tensor"]
                      print $c["distinct_final_digests"] " distinct, " (s == "" ? "never part" : "part at step " s " (" t ")") }' "$summary" 2>/dev/null)
    note "$m r2r ${r2r:-?} distinct; fast ${fast:-?}"
    case "$r2r" in 1/*) ;; *) stage_failed=$((stage_failed + 1)); failure "$m run_to_run: ${r2r:-no} distinct final digests" ;; esac
  done
  # The BNN's fast replicas at batch 128 cannot part (two partials a bias, added in either
  # order give the same bits: cuda_dense.bias_atomic_arrival_orders); at 256, four: they
  # should part at step 1 in a bias (results/nvidia-h100-80gb-hbm3/README.md)
  out=$results/replicas/bnn-b256
  [ $dry -eq 1 ] || rm -rf "$out"
  run "$detrain" run "${config_of[bnn]}" --out "$out" --set backend.device=cuda \
      --set 'policies=[fast]' --set replicas=3 --set train.steps=10 --set train.batch=256 \
      --set 'vary=[]' --set hash.per_tensor=true --set report.snapshots=0 \
      --set report.overhead_samples=0 "${fmnist_cut_sets[@]}" --quiet ||
    failure "bnn b256: $(last_error)"
  if [ $dry -eq 0 ] && [ -s "$out/summary.csv" ]; then
    fast=$(awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) c[$i] = i; next }
                    $c["policy"] == "fast" { s = $c["first_divergent_step"]; t = $c["first_divergent_tensor"]
                      print $c["distinct_final_digests"] " distinct, " (s == "" ? "never part" : "part at step " s " (" t ")") }' "$out/summary.csv" 2>/dev/null)
    note "bnn b256 fast ${fast:-?}"
  fi
}

stage_bench() {
  need_build || return
  # portable+math=exact: every product exact in integers (int8 GEMMs on the tensor cores on a
  # GPU), the CPU's bits by construction -- the route to portable at full speed (issue 53);
  # fast with TF32 (PyTorch's tf32 mode, like for like) and run_to_run as it was before issue
  # 67 (its own chunked sums in pedantic FP32), so the window measures what the redefinition
  # bought
  local d=$results/bench m base csv txt cmd
  local levels='policies=[fast, run_to_run, portable, {base: portable, math: exact}, {base: fast, math: tf32}, {base: run_to_run, reduction: fixed, math: strict, name: run_to_run_before}]'
  [ $dry -eq 1 ] || { mkdir -p "$d"; rm -f "$d"/detrain-cuda-*.csv "$d"/detrain-cuda-*.txt; }
  for m in "${models[@]}"; do
    csv=$d/detrain-cuda-$m.csv txt=$d/detrain-cuda-$m.txt
    if [ "$m" = bnn ]; then # its own three rng policies, against the first
      cmd=("$detrain" bench "${config_of[$m]}" --steps 30 --warmup 5 --baseline first
           --set backend.device=cuda "${fmnist_cut_sets[@]}" --csv "$csv")
    else
      cmd=("$detrain" bench "${config_of[$m]}" --steps 30 --warmup 5 --set backend.device=cuda
           --set "$levels" "${fmnist_cut_sets[@]}" --csv "$csv")
    fi
    sh_c "$(quote_args "${cmd[@]}") >$(quote_args "$txt")" || failure "bench $m: $(last_error)"
    [ $dry -eq 0 ] || check_config_of "${cmd[@]}"
    [ $dry -eq 0 ] || continue
    [ -s "$csv" ] || continue
    # the cost model's prediction beside what was measured (issue 52; counted on the CPU)
    if [ "$m" = bnn ]; then
      cmd=("$detrain" cost "${config_of[$m]}" --set backend.device=cpu "${fmnist_cut_sets[@]}" --measured "$csv")
    else
      cmd=("$detrain" cost "${config_of[$m]}" --set backend.device=cpu --set "$levels"
           "${fmnist_cut_sets[@]}" --measured "$csv")
    fi
    sh_c "$(quote_args "${cmd[@]}") >$(quote_args "$d/cost-$m.txt")" || failure "cost $m: $(last_error)"
    base=$(grep -m1 'step (update) median' "$txt" 2>/dev/null | awk '{ print $4 " ms" }')
    note "$m ${base:-?}/step $(awk -F, '$3 == "step" { printf "%s%s %.2fx", s, $2, $6; s = ", " }' "$csv" 2>/dev/null)" \
         "hash $(grep -m1 'hashing share' "$txt" 2>/dev/null | awk '{ print $3 }')" \
         "waits/step $(grep -m1 'host waits per step' "$txt" 2>/dev/null | awk '{ print $5 }')"
  done
  bench_graphs
}

# The same bench with every step captured and launched as one CUDA graph (backend.graphs,
# issue 67 item 5): fast is its baseline as above, so the ratios compare levels under graphs;
# the step medians beside the uncaptured bench's say what graphs buy. Each bench's "CUDA
# graphs" lines say whether the self-check passed and what broke a capture, if anything did.
bench_graphs() {
  local d=$results/bench m csv txt cmd
  local levels='policies=[fast, run_to_run, portable]'
  for m in "${models[@]}"; do
    [ "$m" != bnn ] || continue
    csv=$d/detrain-cuda-$m-graphs.csv txt=$d/detrain-cuda-$m-graphs.txt
    cmd=("$detrain" bench "${config_of[$m]}" --steps 30 --warmup 5 --set backend.device=cuda
         --set backend.graphs=true --set "$levels" "${fmnist_cut_sets[@]}" --csv "$csv")
    sh_c "$(quote_args "${cmd[@]}") >$(quote_args "$txt")" || failure "bench $m graphs: $(last_error)"
    [ $dry -eq 0 ] || check_config_of "${cmd[@]}"
    [ $dry -eq 0 ] || continue
    [ -s "$csv" ] || continue
    note "$m graphs $(grep -m1 'step (update) median' "$txt" 2>/dev/null | awk '{ print $4 " ms" }')/step $(awk -F, '$3 == "step" { printf "%s%s %.2fx", s, $2, $6; s = ", " }' "$csv" 2>/dev/null)" \
         "$(grep -m1 'CUDA graphs  ' "$txt" 2>/dev/null | sed 's/^ *CUDA graphs *//' | cut -c1-160)"
  done
}

stage_torch() {
  local d=$results/bench m
  [ $dry -eq 1 ] || { mkdir -p "$d"; rm -f "$d"/torch-*.csv; }
  # like for like with detrain (issue 67): fast is FP32 -- PyTorch's default for the MLP, its
  # fp32 mode for LeNet (cuDNN TF32 off) -- and fast+math=tf32 is PyTorch's tf32 mode
  local modes
  for m in mlp lenet; do
    modes=default,tf32,deterministic
    [ "$m" = mlp ] || modes=fp32,tf32,deterministic
    run python3 scripts/bench_torch.py --model "$m" --config "${config_of[$m]}" --device cuda \
        --modes "$modes" --steps 200 --warmup 20 --csv "$d/torch-$m.csv"
    case $? in
      0) ;;
      77) failure "torch $m: no PyTorch here (exit 77)" ;;
      *) failure "torch $m: $(last_error)" ;;
    esac
    [ $dry -eq 0 ] || continue
    [ -s "$d/torch-$m.csv" ] || continue
    note "$m $(awk -F, 'NR > 1 { printf "%s%s %.3f ms", s, $1, $3; s = ", " }' "$d/torch-$m.csv" 2>/dev/null)"
  done
}

# The GPT (issue 40), after every other model's stage so that nothing here can cost their
# results. Its corpus is tests/data/gpt_corpus.txt (committed; the device has no fortunes).
# Model M at each level on cuda, 5 steps, launches synchronous (CONFIG into D/smoke-LEVEL,
# then more --set arguments): a faulting kernel is named by the op that launched it.
smoke_levels() {
  local m=$1 cfg=$2 d=$3 level ok=0 n=0
  shift 3
  for level in fast run_to_run portable; do
    n=$((n + 1))
    if run env CUDA_LAUNCH_BLOCKING=1 "$detrain" run "$cfg" --out "$d/smoke-$level" \
        --set backend.device=cuda --set train.steps=5 --set replicas=1 --set "policies=[$level]" \
        "$@" --quiet; then
      ok=$((ok + 1))
    else
      failure "$m $level: $(last_error)"
    fi
  done
  [ $dry -eq 1 ] || note "smoke $ok/$n"
}

# Model M's portable run on cuda into RESULTS/ROOT (scripts/cross_device.sh --models M)
# against the committed CPU reference results/cpu/ROOT-t2, the table in RESULTS/TABLE.
portable_vs_cpu() {
  local m=$1 root=$2 table=$3 v
  run env DETRAIN="$detrain" bash scripts/cross_device.sh run cuda "$results/$root" --models "$m" ||
    failure "$m portable run on cuda failed: $(last_error)"
  run env DETRAIN="$detrain" bash scripts/cross_device.sh table "results/cpu/$root-t2" \
      "$results/$root" --models "$m" --out "$results/$table" ||
    failure "portable $m on cuda differs from the CPU's ($table)"
  if [ $dry -eq 0 ]; then
    v=$(grep -m1 -E "^- $m: " "$results/$table" 2>/dev/null | sed "s/^- $m: //" | cut -c1-60)
    note "portable vs cpu: ${v:-no result}"
  fi
}

# Model M's replicas on cuda into D/replicas (CONFIG, then more --set arguments): fast and
# run_to_run, 3 each, 30 steps, nothing varied; run_to_run's must be identical, fast's
# explained into D/explain-fast.txt.
replicas_and_explain() {
  local m=$1 cfg=$2 d=$3 out=$3/replicas n
  shift 3
  run "$detrain" run "$cfg" --out "$out" --set backend.device=cuda \
      --set 'policies=[fast, run_to_run]' --set replicas=3 --set train.steps=30 --set 'vary=[]' \
      --set hash.per_tensor=true "$@" --quiet
  if [ $? -ne 0 ] && [ $dry -eq 0 ]; then
    failure "$m replicas: $(last_error)"
  else
    for n in 1 2; do
      run "$detrain" compare "$out/run_to_run/replica-0" "$out/run_to_run/replica-$n" ||
        failure "$m run_to_run replica $n differs from replica 0"
    done
    sh_c --ok "0 1" "$(quote_args "$detrain" explain "$out/fast/replica-0" "$out/fast/replica-1" --quiet) >$(quote_args "$d/explain-fast.txt")"
  fi
}

stage_gpt() {
  need_build || return
  local d=$results/gpt cfg=configs/gpt.yaml out tmo v
  local sets=(--set dataset.path=tests/data/gpt_corpus.txt --set report.snapshots=0
              --set report.overhead_samples=0)
  [ $dry -eq 1 ] || { rm -rf "$d" "$results/crossdev-gpt"; mkdir -p "$d"; }
  # its gpu tests (labels gpu and gpt)
  tmo=30
  run bash scripts/gpu_session.sh __ctest_gpu "$build" "$((jobs < 6 ? jobs : 6))" "$tmo" "" gpt ||
    failure "gpt tests: $(grep -m1 'first failing test:' "$logs/gpt.log" 2>/dev/null | sed 's/.*first failing test: //' | cut -c1-160)"
  # smoke at each level, launches synchronous
  smoke_levels gpt "$cfg" "$d" "${sets[@]}"
  # portable on the GPU against the committed CPU reference (scripts/cross_device.sh --models gpt)
  portable_vs_cpu gpt crossdev-gpt cross_device_gpt.md
  # replicas: run_to_run identical, fast recorded and explained
  out=$d/replicas
  replicas_and_explain gpt "$cfg" "$d" "${sets[@]}"
  if [ $dry -eq 0 ] && [ -s "$out/summary.csv" ]; then
    v=$(awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) c[$i] = i; next }
                 $c["policy"] == "fast" { s = $c["first_divergent_step"]; t = $c["first_divergent_tensor"]
                   print $c["distinct_final_digests"] " distinct, " (s == "" || s == -1 ? "never part" : "part at step " s " (" t ")") }' "$out/summary.csv" 2>/dev/null)
    note "fast ${v:-?}" "explain: $(grep -m1 -o 'caused by [a-z_]*: [a-z_]*' "$d/explain-fast.txt" 2>/dev/null)"
  fi
  # bench: every level and portable+math=exact against fast, hashing share, host waits
  local cmd=("$detrain" bench "$cfg" --steps 30 --warmup 5 --set backend.device=cuda
             --set 'policies=[fast, run_to_run, portable, {base: portable, math: exact}]'
             --set dataset.path=tests/data/gpt_corpus.txt --csv "$d/bench.csv")
  sh_c "$(quote_args "${cmd[@]}") >$(quote_args "$d/bench.txt")" || failure "gpt bench: $(last_error)"
  [ $dry -eq 0 ] || check_config_of "${cmd[@]}"
  if [ $dry -eq 0 ] && [ -s "$d/bench.csv" ]; then
    note "$(grep -m1 'step (update) median' "$d/bench.txt" | awk '{ print $4 " ms" }')/step $(awk -F, '$3 == "step" { printf "%s%s %.2fx", s, $2, $6; s = ", " }' "$d/bench.csv")" \
         "waits/step $(grep -m1 'host waits per step' "$d/bench.txt" | awk '{ print $5 }')"
  fi
  # PyTorch on the same GPT and batch: default, tf32 (what fast allows), deterministic,
  # sdpa (fused attention)
  run python3 scripts/bench_torch.py --config "$cfg" --device cuda --data random \
      --modes default,tf32,deterministic,sdpa --steps 60 --warmup 10 --csv "$d/torch-gpt.csv" ||
    failure "torch gpt: $(last_error)"
  [ $dry -eq 1 ] || [ ! -s "$d/torch-gpt.csv" ] ||
    note "torch $(awk -F, 'NR > 1 { printf "%s%s %.3f ms", s, $1, $3; s = ", " }' "$d/torch-gpt.csv")"
}

stage_memcheck() {
  need_build || return
  run bash scripts/gpu_session.sh __sanitize memcheck "$build" "$logs/sanitize-memcheck.log" \
      "${memcheck_cases[@]}"
  [ $dry -eq 0 ] || return 0
  note "$(grep -m1 -o '[0-9]* of [0-9]* cases run, [0-9]* with errors' "$logs/memcheck.log")"
  local f
  f=$(grep -m1 -E 'memcheck: [a-z_.]+: exit' "$logs/memcheck.log" | sed 's/^gpu_session: //')
  [ -z "$f" ] || failure "$f"
}

# racecheck looks at shared memory only: the cases that run the kernels holding some
# (the wide product tiles, the one-launch shard sums, the block reductions of the exact sum
# and the clipping norm; attention's and dropout's tiles in the GPT's gradient cases, one a
# level) go first, the long end-to-end ones last, so that the cap reaches what racecheck is
# for. The H200's first window ran out of time before gpt.*, hashpipe.*, parity.gpu_table,
# tree_hash and xp; its second (2026-12-04) began with the GPT's gradient case, then one case
# for all three levels, which ran past its 150 s cap: now one case a level, after the short ones.
racecheck_first=(cuda_dense.dense_parity
  cuda_dense.bias_shards_one_launch cuda_dense.wgrad_shards_one_launch
  cuda_conv.wgrad_shards_one_launch exact.cuda_exact_sum_equals_cpu parity.gpu_table
  cuda_dense.grid_independence tree_hash.gpu_equals_cpu xp.gpu_equals_cpu
  gpt.gpu_gradients_equal_cpu_and_grid_free gpt.gpu_gradients_exact_math_equal_cpu
  gpt.gpu_gradients_run_to_run_grid_free)
racecheck_last=(cuda_e2e. gpt.gpu_portable_trace_equals_cpu gpt.gpu_run_to_run_replicas
  explain.cpu_vs_gpu dist.cuda_one_rank_equals_plain)
stage_racecheck() {
  need_build || return
  local all=() cases=() t f late=()
  mapfile -t all < <(ctest --test-dir "$build" -L gpu -N 2>/dev/null | sed -nE 's/^ *Test +#[0-9]+: ([a-z_0-9]+\.[a-z_0-9]+)$/\1/p')
  for f in "${racecheck_first[@]}"; do [[ " ${all[*]} " == *" $f "* ]] && cases+=("$f"); done
  for t in "${all[@]}"; do
    [[ " ${racecheck_first[*]} " == *" $t "* ]] && continue
    for f in "${racecheck_last[@]}"; do [[ "$t" == "$f"* ]] && { late+=("$t"); continue 2; }; done
    cases+=("$t")
  done
  cases+=("${late[@]}")
  [ $dry -eq 0 ] || cases=("<every gpu test case of ctest -L gpu -N: shared-memory kernels' first>")
  run bash scripts/gpu_session.sh __sanitize racecheck "$build" "$logs/sanitize-racecheck.log" \
      "${cases[@]}"
}

# The GPT at GPU scale (issue 53; configs/gpt-gpu.yaml on the committed corpus): what its
# targets need -- portable = the CPU's bits, the levels' step times against fast, PyTorch's
# modes on the same shape, run_to_run replicas identical and fast's parting, and learning.
# The ResNet (issue 68): batch normalisation's kernels at every level, portable against the
# CPU's reference, replicas, bench and PyTorch -- on the cut data set, as the other models.
stage_resnet() {
  need_build || return
  local d=$results/resnet cfg=configs/resnet.yaml
  local sets=(--set report.snapshots=0 --set report.overhead_samples=0 --set train.eval_every=0
              "${fmnist_cut_sets[@]}")
  [ $dry -eq 1 ] || { rm -rf "$d" "$results/crossdev-resnet"; mkdir -p "$d"; }
  smoke_levels resnet "$cfg" "$d" "${sets[@]}"
  portable_vs_cpu resnet crossdev-resnet cross_device_resnet.md
  replicas_and_explain resnet "$cfg" "$d" "${sets[@]}"
  local cmd=("$detrain" bench "$cfg" --steps 30 --warmup 5 --set backend.device=cuda
             --set 'policies=[fast, run_to_run, portable]' "${fmnist_cut_sets[@]}"
             --csv "$d/bench.csv")
  sh_c "$(quote_args "${cmd[@]}") >$(quote_args "$d/bench.txt")" || failure "resnet bench: $(last_error)"
  [ $dry -eq 0 ] || check_config_of "${cmd[@]}"
  if [ $dry -eq 0 ] && [ -s "$d/bench.csv" ]; then
    note "$(grep -m1 'step (update) median' "$d/bench.txt" | awk '{ print $4 " ms" }')/step $(awk -F, '$3 == "step" { printf "%s%s %.2fx", s, $2, $6; s = ", " }' "$d/bench.csv")"
  fi
  run python3 scripts/bench_torch.py --config "$cfg" --device cuda \
      --modes default,benchmark,deterministic --steps 60 --warmup 10 --csv "$d/torch-resnet.csv" ||
    failure "torch resnet: $(last_error)"
}

stage_gptgpu() {
  need_build || return
  local d=$results/gpt-gpu cfg=configs/gpt-gpu.yaml out v k cmd
  local sets=(--set dataset.path=tests/data/gpt_corpus.txt --set report.snapshots=0
              --set report.overhead_samples=0)
  [ $dry -eq 1 ] || { rm -rf "$d" "$results/crossdev-gpt-gpu"; mkdir -p "$d"; }
  run env DETRAIN="$detrain" bash scripts/cross_device.sh run cuda "$results/crossdev-gpt-gpu" \
      --models gpt-gpu || failure "gpt-gpu portable run on cuda failed: $(last_error)"
  run env DETRAIN="$detrain" bash scripts/cross_device.sh table results/cpu/crossdev-gpt-gpu-t2 \
      "$results/crossdev-gpt-gpu" --models gpt-gpu --out "$results/cross_device_gpt_gpu.md" ||
    failure "portable gpt-gpu on cuda differs from the CPU's (cross_device_gpt_gpu.md)"
  if [ $dry -eq 0 ]; then
    v=$(grep -m1 -E '^- gpt-gpu: ' "$results/cross_device_gpt_gpu.md" 2>/dev/null | sed 's/^- gpt-gpu: //' | cut -c1-60)
    note "portable vs cpu: ${v:-no result}"
  fi
  cmd=("$detrain" bench "$cfg" --steps 20 --warmup 3 --set backend.device=cuda
       --set 'policies=[fast, run_to_run, portable, {base: fast, rng: philox}]'
       --set dataset.path=tests/data/gpt_corpus.txt --csv "$d/bench.csv")
  sh_c "$(quote_args "${cmd[@]}") >$(quote_args "$d/bench.txt")" || failure "gpt-gpu bench: $(last_error)"
  [ $dry -eq 0 ] || check_config_of "${cmd[@]}"
  # portable with math: exact on its own, short: never timed on a GPU at this size (its
  # attention is the per-row exact kernel), so that a slow one cannot cost the bench above
  cmd=("$detrain" bench "$cfg" --steps 5 --warmup 1 --set backend.device=cuda
       --set 'policies=[fast, {base: portable, math: exact}]'
       --set dataset.path=tests/data/gpt_corpus.txt --csv "$d/bench-exact.csv")
  sh_c "$(quote_args "${cmd[@]}") >$(quote_args "$d/bench-exact.txt")" ||
    failure "gpt-gpu bench math: exact: $(last_error)"
  [ $dry -eq 0 ] || check_config_of "${cmd[@]}"
  if [ $dry -eq 0 ] && [ -s "$d/bench-exact.csv" ]; then
    note "math exact $(awk -F, '$3 == "step" { printf "%s%s %.2fx", s, $2, $6; s = ", " }' "$d/bench-exact.csv")"
  fi
  if [ $dry -eq 0 ] && [ -s "$d/bench.csv" ]; then
    note "$(grep -m1 'step (update) median' "$d/bench.txt" | awk '{ print $4 " ms" }')/step $(awk -F, '$3 == "step" { printf "%s%s %.2fx", s, $2, $6; s = ", " }' "$d/bench.csv")" \
         "hash $(grep -m1 'hashing share' "$d/bench.txt" 2>/dev/null | awk '{ print $3 }')"
  fi
  run python3 scripts/bench_torch.py --config "$cfg" --device cuda --data tests/data/gpt_corpus.txt \
      --modes default,tf32,deterministic,sdpa,compile --steps 30 --warmup 5 --csv "$d/torch.csv" ||
    failure "torch gpt-gpu: $(last_error)"
  [ $dry -eq 1 ] || [ ! -s "$d/torch.csv" ] ||
    note "torch $(awk -F, 'NR > 1 { printf "%s%s %.3f ms", s, $1, $3; s = ", " }' "$d/torch.csv")"
  # learning: fast for the config's steps, validation loss and sample text in the report
  out=$d/learn
  run "$detrain" run "$cfg" --out "$out" --set backend.device=cuda --set 'policies=[fast]' \
      --set replicas=1 "${sets[@]}" --quiet || failure "gpt-gpu learning run: $(last_error)"
  if [ $dry -eq 0 ]; then
    k=$(tail -n 1 "$out/fast/replica-0/metrics.csv" 2>/dev/null | cut -c1-80)
    note "learn: last metrics ${k:-none}"
  fi
  # replicas at batch 8: explain downloads and hashes every op output of step 1 on the host,
  # for each of its re-executions (five, then more per control): at the config's batch 64
  # that is gigabytes an execution, and it ran past 164 s on the H200 (2026-11-28)
  out=$d/replicas
  run "$detrain" run "$cfg" --out "$out" --set backend.device=cuda \
      --set 'policies=[fast, run_to_run]' --set replicas=2 --set train.steps=20 --set train.batch=8 \
      --set 'vary=[]' --set train.eval_every=0 --set dataset.test_limit=64 "${sets[@]}" --quiet
  if [ $? -ne 0 ] && [ $dry -eq 0 ]; then
    failure "gpt-gpu replicas: $(last_error)"
  else
    run "$detrain" compare "$out/run_to_run/replica-0" "$out/run_to_run/replica-1" ||
      failure "gpt-gpu run_to_run replica 1 differs from replica 0"
    sh_c --ok "0 1" "$(quote_args "$detrain" explain "$out/fast/replica-0" "$out/fast/replica-1" --quiet) >$(quote_args "$d/explain-fast.txt")"
  fi
}

# The overhead and noise table (issue 64, item 1): the matrix's cuda entries trained into
# $build (their traces stay on the machine), then what the table and `detrain report` read
# -- reports, summaries, overhead.csv, config.json and the replicas' run.json -- copied into
# RESULTS/overhead_matrix, and scripts/overhead_table.py's table beside it.
stage_matrix() {
  need_build || return
  local cfg=configs/overhead_matrix.yaml full=$build/overhead_matrix out=$results/overhead_matrix abs
  case "$out" in /*) abs=$out ;; *) abs=$PWD/$out ;; esac
  [ $dry -eq 1 ] || rm -rf "$full" "$out"
  run "$detrain" run "$cfg" --out "$full" --only "$matrix_entries" "${fmnist_cut_sets[@]}" --quiet ||
    failure "matrix: $(last_error)"
  sh_c "mkdir -p $(quote_args "$out") && cd $(quote_args "$full") && find . -maxdepth 5 -type f \( -name '*.md' -o -name '*.csv' -o -name '*.json' \) ! -name 'trace*' ! -name 'tensors.csv' ! -name 'metrics.csv' ! -name 'times.csv' ! -name 'predictions.csv' ! -name 'algos.csv' -exec cp --parents {} $(quote_args "$abs") \;" ||
    failure "matrix: copying the reports"
  run python3 scripts/overhead_table.py "$out" --md "$results/overhead_table.md" \
      --csv "$results/overhead_table.csv" || failure "overhead table: $(last_error)"
  if [ $dry -eq 0 ] && [ -s "$results/overhead_table.csv" ]; then
    note "$(awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) c[$i] = i; next }
      ($c["policy"] == "portable" || $c["policy"] == "portable+math=exact") && $c["overhead_ratio"] != "" {
        printf "%s%s %s %.2fx", s, $c["entry"], $c["policy"], $c["overhead_ratio"]; s = ", " }' "$results/overhead_table.csv")"
  fi
}

# ---- outputs: summary.txt and the tarball, after every stage ----------------------------------
summary_text() {
  local s row
  echo "detrain GPU session $stamp: $gpu_name; $((SECONDS - start_s)) s of ${time_limit:-no} s limit; results in $results"
  echo "command: scripts/gpu_session.sh $(quote_args "${orig_args[@]+"${orig_args[@]}"}")"
  echo "| stage | verdict | s / cap | key numbers | first failure |"
  echo "|---|---|---|---|---|"
  for s in "${ordered[@]}"; do
    row="| $s | ${status_of[$s]:-not run} | ${time_of[$s]:-0} / ${cap_of[$s]} | ${notes_of[$s]:-} | ${failure_of[$s]:-} |"
    echo "$row"
  done
}

write_outputs() {
  local text
  text=$(summary_text)
  echo "$text" >"$results/summary.txt"
  [ -n "$out_dir" ] || return 0
  mkdir -p "$out_dir" || return 0
  echo "$text" >"$out_dir/summary.txt.tmp" && mv "$out_dir/summary.txt.tmp" "$out_dir/summary.txt"
  tar -czf "$out_dir/results-$gpu_slug.tar.gz.tmp" -C "$(dirname "$results")" "$(basename "$results")" 2>/dev/null &&
    mv "$out_dir/results-$gpu_slug.tar.gz.tmp" "$out_dir/results-$gpu_slug.tar.gz"
}

finish() {
  local s failed=0
  for s in "${ordered[@]}"; do
    case "${status_of[$s]:-not run}" in passed | planned) ;; *) failed=1 ;; esac
  done
  if [ $dry -eq 1 ]; then
    local sum=0
    for s in "${ordered[@]}"; do sum=$((sum + ${cap_of[$s]})); done
    echo "plan: ${ordered[*]}"
    echo "caps: $(for s in "${ordered[@]}"; do printf '%s %s, ' "$s" "${cap_of[$s]}"; done | sed 's/, $//'); sum $sum s"
    if [ -n "$check_detrain" ]; then
      echo "configs: $config_failures failing"
      [ "$config_failures" -eq 0 ] || failed=1
    fi
    exit $failed
  fi
  write_outputs
  summary_text | sed 's/^/# /' >>"$session"
  echo "logs: $logs/<stage>.log; commands: $session${out_dir:+; returned: $out_dir/summary.txt, $out_dir/results-$gpu_slug.tar.gz}" >&2
  echo
  summary_text
  exit $failed
}

# ---- the session -----------------------------------------------------------------------------
# Internal commands (stages run them as commands of their own).
case "${1:-}" in
  __versions) info_versions >"$2" 2>&1; exit ;;
  __host) info_host >"$2" 2>&1; exit ;;
  __source) info_source "$2" >"$2/source.txt" 2>&1; exit ;;
  __ctest_gpu) shift; ctest_gpu "$@"; exit ;;
  __sanitize) shift; sanitize_gpu "$@"; exit ;;
  kind) next_kind; exit 0 ;;
  payload) shift; payload_report "$@"; exit ;;
esac

# ---- options ----------------------------------------------------------------------------------
orig_args=("$@")
deps=.gpu-deps
prefix=/tmp/detrain-deps
build="build-gpu"
results=""
out_dir=""
time_limit=0
jobs=$(nproc 2>/dev/null || echo 4)
dry=0
check_detrain=""
config_failures=0
stages=()
# A folder or file named on the command line: relative to where the script was started.
arg_path() { case "$1" in /* | none) echo "$1" ;; *) echo "$orig_pwd/$1" ;; esac; }
while [ $# -gt 0 ]; do
  case "$1" in
    --deps) deps=$(arg_path "${2:?--deps needs a folder}"); shift 2 ;;
    --prefix) prefix=$(arg_path "${2:?--prefix needs a folder}"); shift 2 ;;
    --build) build=$(arg_path "${2:?--build needs a folder}"); shift 2 ;;
    --results) results=$(arg_path "${2:?--results needs a folder}"); shift 2 ;;
    --out) out_dir=$(arg_path "${2:?--out needs a folder}"); shift 2 ;;
    --time-limit) time_limit=${2:?--time-limit needs seconds}; shift 2 ;;
    --cap)
      c=${2:?--cap needs STAGE=SECONDS}
      [[ "$c" =~ ^([a-z]+)=([0-9]+)$ ]] && [ -n "${cap_of[${BASH_REMATCH[1]}]+x}" ] ||
        { echo "gpu_session.sh: --cap: STAGE=SECONDS with a known stage, got '$c'" >&2; exit 2; }
      cap_of[${BASH_REMATCH[1]}]=${BASH_REMATCH[2]}; shift 2 ;;
    --jobs) jobs=${2:?--jobs needs a number}; shift 2 ;;
    --dry-run) dry=1; shift ;;
    --check-configs) check_detrain=$(arg_path "${2:?--check-configs needs a detrain binary}"); shift 2 ;;
    -h | --help) usage ;;
    info | build | smoke | tests | crossdev | replicas | bench | torch | gpt | memcheck | gptgpu | resnet | racecheck | matrix)
      stages+=("$1"); shift ;;
    first-light) stages+=("${first_light[@]}"); shift ;;
    call1 | call2 | call3 | call4 | runs | all)
      echo "gpu_session.sh: '$1' is gone: the plan is one call now (first-light; docs/gpu.md)" >&2; exit 2 ;;
    *) echo "gpu_session.sh: unknown stage or option '$1'" >&2; usage ;;
  esac
done
[ ${#stages[@]} -gt 0 ] || usage
[[ "$time_limit" =~ ^[0-9]+$ ]] || { echo "gpu_session.sh: --time-limit: seconds, got '$time_limit'" >&2; exit 2; }
[[ "$jobs" =~ ^[1-9][0-9]*$ ]] || { echo "gpu_session.sh: --jobs: a number, got '$jobs'" >&2; exit 2; }
[ -z "$check_detrain" ] || [ $dry -eq 1 ] || { echo "gpu_session.sh: --check-configs goes with --dry-run" >&2; exit 2; }
[ -z "$check_detrain" ] || [ -x "$check_detrain" ] ||
  { echo "gpu_session.sh: --check-configs: $check_detrain is not an executable" >&2; exit 2; }
# info first, then the plan's order (whatever the order given), each once.
ordered=()
for s in "${first_light[@]}" "${later[@]}"; do
  if [ "$s" = info ] || [[ " ${stages[*]} " == *" $s "* ]]; then ordered+=("$s"); fi
done
# memcheck takes what is left of the limit, at least its cap.
if [ "$time_limit" -gt 0 ] && [[ " ${ordered[*]} " == *" memcheck "* ]]; then
  memcheck_floor=${cap_of[memcheck]}
fi

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
else
  echo "dry run: the plan on '$gpu_name' (results $results, build $build, deps $deps)"
fi
trap 'say "interrupted"; finish' INT TERM
say "gpu: $gpu_name; results: $results; build: $build; CUDA architectures: $(cuda_archs || true)"
if [ $dry -eq 0 ]; then
  for v in PATH LD_LIBRARY_PATH PKG_CONFIG_PATH CMAKE_PREFIX_PATH CPATH DETRAIN_DATA DT_CUDA_ARCHS DT_GIT_REV DETRAIN_CUDNN_ROOT; do
    echo "# env $v=${!v:-}" >>"$session"
  done
fi
for s in "${ordered[@]}"; do
  if [ $step_failed_abort -eq 1 ]; then
    status_of[$s]="not run (build failed)"
    continue
  fi
  if [ $dry -eq 0 ] && [ "$(overall_left)" -le 5 ]; then
    status_of[$s]="not run (time)"
    continue
  fi
  # memcheck takes what is left only as the plan's last stage: before a later one (gptgpu,
  # racecheck, matrix) its own cap, so that a slow or hung case cannot starve those
  if [ "$s" = memcheck ] && [ -n "${memcheck_floor:-}" ] && [ $dry -eq 0 ] &&
     [ "${ordered[${#ordered[@]}-1]}" = memcheck ]; then
    left=$(overall_left)
    [ "$left" -gt "$memcheck_floor" ] && cap_of[memcheck]=$left
  fi
  begin_stage "$s"
  "stage_$s"
  end_stage
done
finish

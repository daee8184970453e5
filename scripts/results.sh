#!/usr/bin/env bash
# Regenerate the CPU part of results/ (`make results`): run, part by part, the commands
# that each results/cpu/<part>/README.md (crossdev: results/cpu/crossdev-README.md) gives,
# and put the files that README names back into the committed folder.
#
#   scripts/results.sh [PART...]   every part in order, or only the parts named
#   scripts/results.sh --list      the parts, in order, and what each writes
#   scripts/results.sh --pack DIR  only pack DIR's per-step CSVs into DIR/per-step.tar.xz
#                                  (a GPU session's replicas/ and smoke/, once landed here)
#   scripts/results.sh --help      this text
#
# DETRAIN: the detrain binary (default build/detrain; `make results` builds it first).
# The dist part needs mpirun and a detrain built with MPI (`make` configures it so); the
# PyTorch comparison of exact-one-pass needs python3 with torch and is skipped, saying so,
# without it. Each part but crossdev trains into a scratch folder first and replaces the
# committed files only when its commands succeeded (crossdev's script writes its folders
# itself, as its README's commands do). The whole run takes many minutes on 2 cores
# (noise_sources and overhead_matrix are the longest). Then rerun the readme tests
# (`ctest -R readme`): a quoted number that moved fails there until README or docs/
# follow. The GPU part of results/ (results/<gpu>/) is made on a GPU machine by
# scripts/gpu_session.sh, not here. Exit status: 0 every part done; 1 a part failed;
# 2 bad arguments or no detrain binary.
set -euo pipefail

orig_pwd=$PWD
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

# The parts, in the order they run, and what each writes (for --list).
parts=(cost-model ptxas exact-one-pass portable-cost exact-product runs controls dist overhead_matrix bnn-rng bnn-local noise_sources gpt gpt-quickstart resnet under-load crossdev reproduce)
declare -A writes=(
  [ptxas]="results/cpu/ptxas/: sm_90.txt (every CUDA kernel's registers, stack, spills and launch bound for the H100 and H200, scripts/ptxas.sh; the build of DETRAIN's folder)"
  [exact-one-pass]="results/cpu/exact-one-pass/: bench-mlp-b256.txt bench-mlp-b64.txt bench-lenet.txt demo-summary.csv vs-torch.txt (with PyTorch)"
  [cost-model]="results/cpu/cost-model/: first-light-check.txt (the cost model of the code the H100's first light ran, beside its per-op times), current.txt and current.csv (today's code: MLP, LeNet, the BNN, the GPT with the tree digest), gpt-gpu.txt (the GPT at GPU scale: the levels, portable with exact products, fast with TF32, run_to_run as before issue 67; minutes), h200-predictions.txt (the levels of the MLP, LeNet and both GPTs on the H200's constants: docs/gpu.md's predictions); h200-check.txt is made from the H200's revision by hand (its header)"
  [portable-cost]="results/cpu/portable-cost/<cpu>/ (<cpu>: vendor, family, model and widest kernels of this machine): cpu.txt, bench-mlp-b256.txt bench-mlp-b64.txt bench-lenet.txt bench-gpt-quickstart.txt (fast, run_to_run, portable op by op), vs-torch.txt (every workload against PyTorch, 3 rounds; with PyTorch)"
  [exact-product]="results/cpu/exact-product/: errors.txt (the exact product's error against float32 on random and real tensors: tests/test_xp), throughput.txt (this CPU's fp32 and integer instruction throughput), bench.txt (portable and math: exact per op), learning.txt (the models under both)"
  [runs]="results/cpu/runs/: quickstart/ lenet/ bnn/ (summary.csv, run.json), times.txt, threads-table.md (2 threads vs 1), explain-quickstart.txt|csv"
  [controls]="results/cpu/controls/: summary.csv cells.csv report.md config.json run.json"
  [dist]="results/cpu/dist/: plain/ np1/ .. np4/ and their .log, report.md, ranks.csv, per-step.tar.xz (the replicas' per-step CSVs), bench-np2.txt and its CSVs (mpirun)"
  [overhead_matrix]="results/cpu/overhead_matrix/: the matrix folder (cpu entries), without predictions.csv and tensors.csv; the replicas' per-step CSVs in per-step.tar.xz"
  [bnn-rng]="results/cpu/bnn-rng/: bench.txt, bench-fast.txt and .csv (fast and portable op by op)"
  [bnn-local]="results/cpu/bnn-local/: steps.txt (the plain MLP of the same widths, the weights estimator and the local one at fast and portable, interleaved rounds, with their ratios), bench.txt and bench.csv (the local estimator op by op), learning.txt and learning/ (both estimators, 900 steps, 3 initialisations: accuracy, NLL, ECE), reference/ (100 steps under every rng mode, which detrain reproduce checks), vs-torch.txt (both against a plain PyTorch MLP; with PyTorch)"
  [noise_sources]="results/cpu/noise_sources/: mlp/, lenet/ and gpt/ (reports, csv files, config.json, run.json, explain/, plots/)"
  [gpt]="results/cpu/gpt/: run/ (configs/gpt.yaml: report, csv files, manifests, samples), threads-table.md, explain.txt|csv, bench.txt, dropout-bench.txt, vs-torch/ (with PyTorch)"
  [gpt-quickstart]="results/cpu/gpt-quickstart/: run/ (configs/gpt-quickstart.yaml: report, metrics, sample text, manifests), time.txt (wall time, CPU, final validation loss; about 4 minutes), torch-rebuild.txt (the export rebuilt by scripts/torch_gpt.py: validation loss and predictions; with PyTorch)"
  [resnet]="results/cpu/resnet/: run/ (configs/resnet.yaml at fast, timed whole: report, metrics, manifests), time.txt (wall time, CPU, test accuracy), ranks/ and ranks-table.md (portable at 1 and 2 threads and 1, 2, 4 MPI ranks: every step's digest), noise/ (the noise-source matrix with explain/ and plots/), vs-torch/ (the PyTorch replay of 100 steps and the interleaved step times; with PyTorch)"
  [under-load]="results/cpu/under-load/: under-load.txt (detrain fast and PyTorch alone and beside a busy process; with PyTorch, else kept as it was)"
  [reproduce]="results/cpu/reproduce/: widest.txt, narrow.txt (detrain reproduce of every committed portable reference, on this CPU's widest kernels and on the AVX2 path)"
  [crossdev]="results/cpu/crossdev-t2/, results/cpu/crossdev-t1/, results/cross_device.md (every committed results/<gpu>/crossdev a column), results/cpu/crossdev-sha256-t2/ and results/cross_device-sha256.md (the GPU columns recorded with SHA-256 digests), results/cpu/crossdev-gpt-t2/, results/cpu/crossdev-gpt-gpu-t2/, results/cpu/crossdev-resnet-t2/"
)

usage() { sed -n '2,20p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; }
die() { echo "results.sh: $*" >&2; exit 2; }
say() { echo "results: $*" >&2; }

# ---- arguments ------------------------------------------------------------------------------
chosen=()
pack_dirs=()
for a in "$@"; do
  case "$a" in
    -h | --help) usage; exit 0 ;;
    --list)
      for p in "${parts[@]}"; do printf '%-16s %s\n' "$p" "${writes[$p]}"; done
      exit 0 ;;
    --pack) pack_dir=1 ;;
    -*) die "unknown option '$a' (see --help)" ;;
    *) if [ "${pack_dir:-0}" = 1 ]; then pack_dirs+=("$a"); continue; fi
       [ -n "${writes[$a]+x}" ] || die "no part '$a'; the parts: ${parts[*]}"
       chosen+=("$a") ;;
  esac
done
# Run in the list's order whatever the order on the command line.
run=()
for p in "${parts[@]}"; do
  if [ ${#chosen[@]} -eq 0 ] || [[ " ${chosen[*]} " == *" $p "* ]]; then run+=("$p"); fi
done

# pack_per_step DIR: the replicas' per-step files (trace.csv, tensors.csv, predictions.csv,
# times.csv, metrics.csv under replica-*/) into DIR/per-step.tar.xz, then removed: they are
# most of the committed bytes, and committed results travel with every GPU call (64 MiB in
# all, scripts/gpu_session.sh payload). The archive is reproducible (sorted names, fixed
# owner and times); `tar -xJf DIR/per-step.tar.xz -C DIR` puts the files back in place.
pack_per_step() {
  local dir=$1 list
  list=$(cd "$dir" && find . -path '*/replica-*' -type f \( -name trace.csv -o -name tensors.csv \
           -o -name predictions.csv -o -name times.csv -o -name metrics.csv \) | LC_ALL=C sort)
  [ -n "$list" ] || return 0
  (cd "$dir" && printf '%s\n' "$list" |
     tar -cf - --no-recursion --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner -T - |
     xz -9e -T1 >per-step.tar.xz) || die "pack_per_step: packing $dir failed"
  (cd "$dir" && printf '%s\n' "$list" | xargs rm -f)
}

# --pack DIR...: pack and stop (no binary, no part).
if [ "${pack_dir:-0}" = 1 ]; then
  [ ${#pack_dirs[@]} -gt 0 ] && [ ${#chosen[@]} -eq 0 ] || die "--pack takes folders, and no part"
  for d in "${pack_dirs[@]}"; do
    [ -d "$d" ] || die "--pack: no folder '$d'"
    pack_per_step "$d"
    say "packed $d/per-step.tar.xz"
  done
  exit 0
fi

# ---- the binary -----------------------------------------------------------------------------
detrain=${DETRAIN:-build/detrain}
case "$detrain" in
  /*) ;;
  */*) if [ "$orig_pwd" != "$repo" ] && [ -e "$orig_pwd/$detrain" ]; then detrain=$orig_pwd/$detrain
       else detrain=$repo/$detrain; fi ;;
  *) detrain=$(command -v "$detrain" || echo "$detrain") ;;
esac
[ -x "$detrain" ] || die "DETRAIN=$detrain: no such executable (build it: make build, or set DETRAIN)"
# Inside the tree, named from the repo root (where everything runs), as the READMEs do.
case "$detrain" in
  "$repo"/*/*) detrain=${detrain#"$repo"/} ;;
  "$repo"/*) detrain=./${detrain#"$repo"/} ;;
esac
export DETRAIN=$detrain
cd "$repo"

tmp=$(mktemp -d "${TMPDIR:-/tmp}/detrain-results.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

# Replace everything in the committed folder DEST (under results/) but the files named
# after it (its README.md always) with the contents of SRC.
replace_folder() {
  local src=$1 dest=$2
  shift 2
  case "$dest" in results/?*) ;; *) die "replace_folder: $dest is not under results/" ;; esac
  mkdir -p "$dest"
  local keep=(! -name README.md) k
  for k in "$@"; do keep+=(! -name "$k"); done
  find "$dest" -mindepth 1 -maxdepth 1 "${keep[@]}" -exec rm -rf {} +
  cp -r "$src"/. "$dest"/
}


# ---- the parts (commands as in each folder's README.md) ---------------------------------------

# results/cpu/cost-model/README.md: `detrain cost` (no GPU: counted on this CPU) of the three
# models the first light benched, with DETRAIN_CUDA_ONE_PASS=0 (the per-shard bias gradient
# it ran) beside its bench CSVs; then today's code, the GPT included, with the tree digest --
# on the H100's constants, as they were made; the levels again on the H200's
# (h200-predictions.txt). h200-check.txt (the code the H200 ran, beside its times) is made from
# that revision: its header says how.
part_cost_model() {
  local o=$tmp/cost-model m h=results/nvidia-h100-80gb-hbm3/bench L='policies=[fast, run_to_run, portable]'
  # the levels as the first light ran them (before issue 67: fast with TF32, run_to_run its
  # own chunked sums in pedantic FP32), under the names its measured CSVs use
  local T='policies=[{base: fast, math: tf32, name: fast}, {base: run_to_run, reduction: fixed, math: strict, name: run_to_run}, portable]'
  mkdir -p "$o"
  {
    for m in quickstart:mlp lenet:lenet; do
      DETRAIN_CUDA_ONE_PASS=0 "$DETRAIN" cost "configs/${m%%:*}.yaml" --device h100 --set "$T" \
        --set hash.digest=sha256 --measured "$h/detrain-cuda-${m##*:}.csv"
      echo
    done
    DETRAIN_CUDA_ONE_PASS=0 "$DETRAIN" cost configs/bnn.yaml --device h100 --set hash.digest=sha256 \
      --measured "$h/detrain-cuda-bnn.csv"
  } > "$o/first-light-check.txt"
  : > "$o/current.txt"
  for m in quickstart lenet bnn gpt; do
    "$DETRAIN" cost "configs/$m.yaml" --device h100 --set "$L" \
      --csv "$o/$m.csv" >> "$o/current.txt"
    echo >> "$o/current.txt"
  done
  { head -1 "$o/quickstart.csv"; for m in quickstart lenet bnn gpt; do tail -n +2 "$o/$m.csv"; done; } > "$o/current.csv"
  # the GPT at GPU scale (issue 53; one CPU step per policy at batch 64: minutes): the
  # levels, portable with exact products, fast with TF32, and run_to_run as it was before
  # issue 67 (its own chunked sums in pedantic FP32)
  local G='policies=[fast, run_to_run, portable, {base: portable, math: exact}, {base: fast, math: tf32}, {base: run_to_run, reduction: fixed, math: strict, name: run_to_run_before}]'
  "$DETRAIN" cost configs/gpt-gpu.yaml --device h100 --set dataset.path=tests/data/gpt_corpus.txt \
    --set "$G" > "$o/gpt-gpu.txt"
  # the levels of the MLP, LeNet, the tiny GPT and the GPT at GPU scale on the H200's
  # constants: docs/gpu.md's predictions
  {
    for m in quickstart lenet gpt; do
      "$DETRAIN" cost "configs/$m.yaml" --device h200 --set "$L"
      echo
    done
    "$DETRAIN" cost configs/gpt-gpu.yaml --device h200 --set dataset.path=tests/data/gpt_corpus.txt \
      --set "$G"
  } > "$o/h200-predictions.txt"
  mkdir -p results/cpu/cost-model
  mv "$o/first-light-check.txt" "$o/current.txt" "$o/current.csv" "$o/gpt-gpu.txt" \
    "$o/h200-predictions.txt" results/cpu/cost-model/
}

# results/cpu/exact-one-pass/README.md: detrain bench of the MLP (batch 256, 64) and LeNet;
# scripts/vs_torch.sh against PyTorch; demo-summary.csv is the quickstart's summary.csv (make demo).
# The *-before.txt files came from an older commit's binary and are kept as they are.
part_exact_one_pass() {
  local dir=results/cpu/exact-one-pass o=$tmp/exact-one-pass
  local P='policies=[fast, run_to_run, portable, {base: portable, reduction: fixed}, {base: fast, reduction: fixed}, {base: fast, reduction: exact}]'
  mkdir -p "$o"
  "$DETRAIN" bench configs/quickstart.yaml --steps 300 --warmup 20 --set "$P" > "$o/bench-mlp-b256.txt"
  "$DETRAIN" bench configs/quickstart.yaml --steps 300 --warmup 20 --set train.batch=64 --set "$P" > "$o/bench-mlp-b64.txt"
  "$DETRAIN" bench configs/lenet.yaml --steps 60 --warmup 5 \
    --set 'policies=[fast, run_to_run, portable, {base: portable, reduction: fixed}]' > "$o/bench-lenet.txt"
  "$DETRAIN" run configs/quickstart.yaml --out "$o/quickstart" --quiet
  cp "$o/quickstart/summary.csv" "$o/demo-summary.csv"
  local rc=0
  bash scripts/vs_torch.sh > "$o/vs-torch.txt" || rc=$?
  case $rc in
    0) mv "$o/vs-torch.txt" "$dir/" ;;
    77) say "exact-one-pass: PyTorch is not installed: vs-torch.txt kept as it was" ;;
    *) say "exact-one-pass: scripts/vs_torch.sh failed ($rc)"; return 1 ;;
  esac
  mv "$o"/bench-mlp-b256.txt "$o"/bench-mlp-b64.txt "$o"/bench-lenet.txt "$o"/demo-summary.csv "$dir/"
}

# results/cpu/portable-cost/README.md (issue 69): what portable costs on the machine of the
# day, in a folder of its own per CPU kind (AMD and Intel, AVX2 and AVX-512 kernels): detrain
# bench of the MLP (batch 256, 64), LeNet and nanoGPT's CPU shape at the three levels, op by
# op, and scripts/vs_torch.sh (3 rounds) against PyTorch.
part_portable_cost() {
  local tag o=$tmp/portable-cost P='policies=[fast, run_to_run, portable]'
  tag=$(LC_ALL=C lscpu | awk -F': *' '
    /^Vendor ID/ {v = ($2 ~ /AMD/) ? "amd" : ($2 ~ /Intel/) ? "intel" : tolower($2)}
    /^CPU family/ {f = $2} /^Model:/ {m = $2}
    /^Flags/ {w = ($2 ~ /avx512f/ && $2 ~ /avx512dq/) ? "avx512" : ($2 ~ /avx2/) ? "avx2" : "base"}
    END {printf "%s-f%s-m%s-%s", v, f, m, w}')
  mkdir -p "$o"
  { LC_ALL=C lscpu | grep -E '^(Model name|Vendor ID|CPU family|Model|CPU\(s\)|L1d|L2|L3)'
    echo "widest kernels: ${tag##*-} (AVX-512 ones where the CPU has F and DQ)"
    echo "detrain: $("$DETRAIN" --version | head -1)"; } > "$o/cpu.txt"
  "$DETRAIN" bench configs/quickstart.yaml --steps 300 --warmup 20 --set "$P" > "$o/bench-mlp-b256.txt"
  "$DETRAIN" bench configs/quickstart.yaml --steps 300 --warmup 20 --set train.batch=64 --set "$P" > "$o/bench-mlp-b64.txt"
  "$DETRAIN" bench configs/lenet.yaml --steps 60 --warmup 5 --set "$P" > "$o/bench-lenet.txt"
  "$DETRAIN" bench configs/gpt-quickstart.yaml --steps 30 --warmup 3 --set "$P" > "$o/bench-gpt-quickstart.txt"
  local rc=0
  bash scripts/vs_torch.sh 3 > "$o/vs-torch.txt" || rc=$?
  case $rc in
    0) ;;
    77) say "portable-cost: PyTorch is not installed: no vs-torch.txt"; rm -f "$o/vs-torch.txt" ;;
    *) say "portable-cost: scripts/vs_torch.sh failed ($rc)"; return 1 ;;
  esac
  mkdir -p "results/cpu/portable-cost/$tag"
  mv "$o"/* "results/cpu/portable-cost/$tag/"
  say "portable-cost: results/cpu/portable-cost/$tag/"
}

# results/cpu/bnn-local/README.md: the Bayesian MLP's local reparameterisation estimator
# (model.estimator: local, configs/bnn-local.yaml) against the weights estimator
# (configs/bnn.yaml) and a plain MLP of the same widths (784-400-400-10, batch 128).
part_bnn_local() {
  local o=$tmp/bnn-local c r
  mkdir -p "$o"
  DETRAIN=$DETRAIN bash scripts/bnn_cost.sh 5 > "$o/steps.txt"
  "$DETRAIN" bench configs/bnn-local.yaml --steps 40 --warmup 4 --set 'policies=[fast, portable]' \
    --csv "$o/bench.csv" > "$o/bench.txt"
  # learning on the same budget: 900 steps of 128, three initialisations each, portable
  for c in bnn bnn-local; do
    "$DETRAIN" run "configs/$c.yaml" --out "$o/run-$c" --quiet --set 'policies=[portable]' \
      --set replicas=3 --set 'vary=[init]' --set report.overhead_samples=0
  done
  # and the local estimator for as long as the weights one took (the step times' ratio)
  local steps
  steps=$(python3 -c 'import json, sys
w = sorted(json.load(open(f"{sys.argv[1]}/run-bnn/portable/replica-{r}/run.json"))["step_ms_median"] for r in range(3))[1]
l = sorted(json.load(open(f"{sys.argv[1]}/run-bnn-local/portable/replica-{r}/run.json"))["step_ms_median"] for r in range(3))[1]
print(round(900 * w / l))' "$o")
  "$DETRAIN" run configs/bnn-local.yaml --out "$o/run-bnn-local-time" --quiet \
    --set 'policies=[portable]' --set replicas=3 --set 'vary=[init]' \
    --set report.overhead_samples=0 --set train.steps="$steps"
  { echo "# detrain run configs/{bnn,bnn-local}.yaml --set policies=[portable] --set replicas=3 --set vary=[init]:"
    echo "# 900 steps of 128 (local-time: $steps steps, the weights estimator's time), the test set"
    echo "# (10,000) predicted by the mean of 10 sampled models"
    echo "estimator replica steps test_accuracy test_nll test_ece step_ms_median"
    for c in bnn bnn-local bnn-local-time; do
      for r in 0 1 2; do
        python3 -c 'import json, sys
j = json.load(open(sys.argv[1]))
print(sys.argv[2], sys.argv[3], j["steps_completed"], j["test_accuracy"], j["test_loss"], j["test_ece"], j["step_ms_median"])' \
          "$o/run-$c/portable/replica-$r/run.json" "$c" "$r"
      done
    done | sed -e 's/^bnn-local-time /local-time /' -e 's/^bnn-local /local /' -e 's/^bnn /weights /'
  } > "$o/learning.txt"
  mkdir -p "$o/learning"
  for c in bnn bnn-local bnn-local-time; do cp "$o/run-$c/summary.csv" "$o/learning/$c-summary.csv"; done
  # the reference: 100 steps under every rng mode (the crossdev references' limits)
  "$DETRAIN" run configs/bnn-local.yaml --out "$o/reference" --quiet --set train.steps=100 \
    --set hash.per_tensor=true --set report.snapshots=0 --set report.overhead_samples=0 \
    --set dataset.train_limit=10000 --set dataset.test_limit=2000
  rm -rf "$o/reference/plots"
  local rc=0
  bash scripts/vs_torch.sh 3 bnn bnn-local > "$o/vs-torch.txt" || rc=$?
  case $rc in
    0) ;;
    77) say "bnn-local: PyTorch is not installed: no vs-torch.txt"; rm -f "$o/vs-torch.txt" ;;
    *) say "bnn-local: scripts/vs_torch.sh failed ($rc)"; return 1 ;;
  esac
  mkdir -p results/cpu/bnn-local
  rm -rf results/cpu/bnn-local/reference results/cpu/bnn-local/learning
  mv "$o/steps.txt" "$o/bench.txt" "$o/bench.csv" "$o/learning.txt" "$o/learning" \
     "$o/reference" results/cpu/bnn-local/
  [ -f "$o/vs-torch.txt" ] && mv "$o/vs-torch.txt" results/cpu/bnn-local/
  say "bnn-local: results/cpu/bnn-local/"
}

# results/cpu/runs/README.md: the three example configs run whole, each timed (wall clock,
# whole seconds, into times.txt); their summary.csv and run.json kept, not the replicas.
part_runs() {
  local o=$tmp/runs c t0
  mkdir -p "$o/keep"
  for c in quickstart lenet bnn; do
    t0=$SECONDS
    "$DETRAIN" run "configs/$c.yaml" --out "$o/$c" --quiet
    echo "$c: $((SECONDS - t0)) s ($DETRAIN run configs/$c.yaml)" >> "$o/keep/times.txt"
    mkdir -p "$o/keep/$c"
    cp "$o/$c/summary.csv" "$o/$c/run.json" "$o/keep/$c/"
  done
  # make demo's second run: the quickstart at 1 thread, 50 steps; the table of the two
  # (exit 1: a cell differs) and detrain explain on fast's replica 0 of each (exit 1 =
  # explained), paths shown relative to the scratch folder
  local rc=0 exe=$DETRAIN
  case "$exe" in /*) ;; */*) exe=$repo/$exe ;; esac
  "$DETRAIN" run configs/quickstart.yaml --out "$o/quickstart-1thread" --quiet \
    --set backend.threads=1 --set train.steps=50 --set report.overhead_samples=0
  (cd "$o" && "$exe" compare --table quickstart quickstart-1thread \
     > keep/threads-table.md) || rc=$?
  [ $rc -le 1 ] || { say "runs: detrain compare --table failed ($rc)"; return 1; }
  rc=0
  (cd "$o" && "$exe" explain quickstart/fast/replica-0 quickstart-1thread/fast/replica-0 \
     --quiet --csv keep/explain-quickstart.csv > keep/explain-quickstart.txt) || rc=$?
  [ $rc -le 1 ] || { say "runs: detrain explain failed ($rc)"; return 1; }
  replace_folder "$o/keep" results/cpu/runs
}

# results/cpu/controls/README.md: one run, five of its files copied (not the traces).
part_controls() {
  local o=$tmp/ctl f
  "$DETRAIN" run configs/cpu_controls.yaml --out "$o" --quiet
  for f in summary.csv cells.csv report.md config.json run.json; do cp "$o/$f" results/cpu/controls/; done
}

# results/cpu/dist/README.md: scripts/ranks.sh at 1, 2, 3, 4 ranks, the whole folder copied.
part_dist() {
  command -v mpirun >/dev/null || { say "dist: no mpirun (scripts/setup.sh installs openmpi-bin)"; return 1; }
  OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
    bash scripts/ranks.sh configs/dist.yaml "$tmp/dist_new" 1 2 3 4
  pack_per_step "$tmp/dist_new"
  # the cost at 2 ranks by detrain bench (each policy and fast alternated step by step, every
  # rank in lockstep), exact through the shared memory and staged (DETRAIN_DIST_SHARED=0),
  # three rounds alternating the two
  local r shared
  for r in 1 2 3; do
    for shared in 1 0; do
      echo "## round $r, DETRAIN_DIST_SHARED=$shared" >>"$tmp/dist_new/bench-np2.txt"
      OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 DETRAIN_DIST_SHARED=$shared \
        mpirun --oversubscribe -np 2 "$DETRAIN" bench configs/dist.yaml --steps 200 \
        --csv "$tmp/dist_new/bench-np2-shared$shared-r$r.csv" >>"$tmp/dist_new/bench-np2.txt"
    done
  done
  replace_folder "$tmp/dist_new" results/cpu/dist
}

# results/cpu/overhead_matrix/README.md: the matrix run (cuda entries skipped without a GPU),
# then the replicas' predictions.csv and tensors.csv deleted to keep the folder small.
part_overhead_matrix() {
  local o=$tmp/om
  "$DETRAIN" run configs/overhead_matrix.yaml --out "$o" --quiet
  find "$o" -path '*/replica-*' \( -name predictions.csv -o -name tensors.csv \) -delete
  pack_per_step "$o"
  replace_folder "$o" results/cpu/overhead_matrix
}

# results/cpu/bnn-rng/README.md: the last line of make bench.
# results/cpu/exact-product/README.md: the exact product's error distributions (issue 51),
# printed by the test binary beside DETRAIN (its build folder's tests/test_xp); this CPU's
# instruction throughputs (scripts/isa_throughput.c, compiled here); and `detrain bench` of
# portable and math: exact on the three CPU models.
part_exact_product() {
  local xp c
  xp=$(dirname "$DETRAIN")/tests/test_xp
  [ -x "$xp" ] || die "$xp: no such executable (build the tests: make build)"
  { "$xp" error_within_bound_and_below_float32 && "$xp" real_tensors_mlp; } > "$tmp/errors.txt"
  # with oneDNN's int8 GEMM beside, where its header is installed (Debian's libdnnl-dev)
  if [ -f /usr/include/oneapi/dnnl/dnnl.h ]; then
    ${CC:-cc} -O2 -DWITH_DNNL -o "$tmp/isa_throughput" scripts/isa_throughput.c -ldnnl
  else
    ${CC:-cc} -O2 -o "$tmp/isa_throughput" scripts/isa_throughput.c
  fi
  { grep -m1 'model name' /proc/cpuinfo; OMP_NUM_THREADS=2 "$tmp/isa_throughput"; } > "$tmp/throughput.txt"
  : > "$tmp/bench.txt"
  for c in quickstart lenet gpt; do
    "$DETRAIN" bench "configs/$c.yaml" --steps 20 --warmup 4 \
      --set 'policies=[portable, {base: portable, math: exact, name: p_exact}]' >> "$tmp/bench.txt"
  done
  # learning: each model under portable and math: exact, side by side (one replica)
  {
    echo "model steps: test accuracy and last evaluation loss under portable | math: exact"
    for c in quickstart:470 lenet:300 gpt:200 bnn:900; do
      "$DETRAIN" run "configs/${c%%:*}.yaml" --out "$tmp/learn-${c%%:*}" --quiet \
        --set replicas=1 --set "train.steps=${c##*:}" --set report.overhead_samples=0 \
        --set report.snapshots=0 \
        --set 'policies=[portable, {base: portable, math: exact, name: p_exact}]' > /dev/null
      printf '%s %s:' "${c%%:*}" "${c##*:}"
      for p in portable p_exact; do
        printf ' %s acc %s loss %s' "$p" \
          "$(awk -F, -v p="$p" 'NR == 1 { for (i = 1; i <= NF; i++) if ($i == "test_acc_mean") c = i }
                                $1 == p { print $c }' "$tmp/learn-${c%%:*}/summary.csv")" \
          "$(tail -1 "$tmp/learn-${c%%:*}/$p/replica-0/metrics.csv" | cut -d, -f2)"
      done
      echo
    done
  } > "$tmp/learning.txt"
  mv "$tmp/errors.txt" "$tmp/throughput.txt" "$tmp/bench.txt" "$tmp/learning.txt" \
    results/cpu/exact-product/
}

part_bnn_rng() {
  "$DETRAIN" bench configs/bnn.yaml --steps 40 --warmup 4 --baseline first > "$tmp/bench.txt"
  # where fast's step goes, op by op (docs/performance.md: the Bayesian MLP's cost)
  "$DETRAIN" bench configs/bnn.yaml --steps 40 --warmup 4 --set 'policies=[fast, portable]' \
    --csv "$tmp/bench-fast.csv" > "$tmp/bench-fast.txt"
  mv "$tmp/bench.txt" results/cpu/bnn-rng/bench.txt
  mv "$tmp/bench-fast.txt" results/cpu/bnn-rng/bench-fast.txt
  mv "$tmp/bench-fast.csv" results/cpu/bnn-rng/bench-fast.csv
}

# results/cpu/noise_sources/README.md: the two matrices; their reports, csv files,
# manifests and plots copied (not the replica folders: 420 MB for the MLP).
part_noise_sources() {
  local m f
  "$DETRAIN" run configs/noise_sources.yaml --out "$tmp/ns_mlp" --quiet
  "$DETRAIN" run configs/noise_sources_lenet.yaml --out "$tmp/ns_lenet" --quiet
  "$DETRAIN" run configs/noise_sources_gpt.yaml --out "$tmp/ns_gpt" --quiet
  for m in mlp lenet gpt; do
    mkdir -p "$tmp/ns_copy/$m"
    for f in report.md summary.csv cells.csv drift.csv overhead.csv config.json run.json; do
      cp "$tmp/ns_$m/$f" "$tmp/ns_copy/$m/"
    done
    if [ -d "$tmp/ns_$m/explain" ]; then cp -r "$tmp/ns_$m/explain" "$tmp/ns_copy/$m/"
    else say "noise_sources: $m has no explain/ (report.explain off, or no cell diverged)"; fi
    if [ -d "$tmp/ns_$m/plots" ]; then cp -r "$tmp/ns_$m/plots" "$tmp/ns_copy/$m/"
    else say "noise_sources: $m has no plots/ (gnuplot-nox not installed?)"; fi
    rm -rf "results/cpu/noise_sources/$m"
    cp -r "$tmp/ns_copy/$m" "results/cpu/noise_sources/$m"
  done
}

# A config's run timed whole (t0, t1: date +%s.%N around it) as time.txt says it: the
# command and version, the wall time, the CPU, its threads and steps, then NAME VALUE.
time_txt() {
  local cfg=$1 t0=$2 t1=$3 name=$4 value=$5
  echo "# detrain run $cfg, timed whole ($("$DETRAIN" --version | head -1))"
  awk -v a="$t0" -v b="$t1" 'BEGIN { printf "wall_s %.1f\n", b - a }'
  echo "cpu $(sed -n 's/^model name[[:space:]]*: *//p' /proc/cpuinfo | head -1)"
  echo "threads $(sed -n 's/^  threads: *\([0-9]*\).*/\1/p' "$cfg")"
  echo "steps $(sed -n 's/^  steps: *\([0-9]*\).*/\1/p' "$cfg")"
  echo "$name $value"
}

# results/cpu/resnet/README.md (issue 68): configs/resnet.yaml at fast timed whole; portable
# across thread and rank counts (100 steps on the cut data set: the plain run at 1 and 2
# threads, mpirun -np 1, 2, 4, one compare table); the noise-source matrix (fast and
# portable, four vary settings, 3 replicas, one epoch of 30,000 images, report.explain);
# the PyTorch replay of 100 steps from detrain's weights and batches.
part_resnet() {
  . scripts/fmnist_cut.sh
  command -v mpirun >/dev/null || { say "resnet: no mpirun (scripts/setup.sh installs openmpi-bin)"; return 1; }
  local o=$tmp/resnet t0 t1 acc
  mkdir -p "$o/keep/run/fast/replica-0"
  t0=$(date +%s.%N)
  "$DETRAIN" run configs/resnet.yaml --out "$o/run" --quiet
  t1=$(date +%s.%N)
  cp "$o/run/report.md" "$o/run/summary.csv" "$o/run/config.json" "$o/run/run.json" "$o/keep/run/"
  cp "$o/run/fast/replica-0/metrics.csv" "$o/run/fast/replica-0/run.json" \
     "$o/keep/run/fast/replica-0/"
  acc=$(tail -1 "$o/keep/run/fast/replica-0/metrics.csv" | cut -d, -f3)
  time_txt configs/resnet.yaml "$t0" "$t1" test_accuracy "$acc" > "$o/keep/time.txt"
  # portable at 1 and 2 threads and on 1, 2 and 4 ranks: one table of every step's digest
  local short=(--set 'policies=[portable]' --set train.steps=100 --set train.eval_every=0
               --set dataset.train_limit=$fmnist_cut_train --set dataset.test_limit=$fmnist_cut_test
               --set report.overhead_samples=0 --set report.snapshots=0 --set backend.threads=1)
  OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
    bash scripts/ranks.sh configs/resnet.yaml "$o/keep/ranks" 1 2 4 -- "${short[@]}"
  "$DETRAIN" run configs/resnet.yaml --out "$o/keep/ranks/plain-t2" --quiet "${short[@]}" \
    --set backend.threads=2
  {
    echo "# detrain compare --table plain plain-t2 np1 np2 np4 (portable, every step's digest)"
    "$DETRAIN" compare --table "$o/keep/ranks/plain" "$o/keep/ranks/plain-t2" \
      "$o/keep/ranks/np1" "$o/keep/ranks/np2" "$o/keep/ranks/np4" | sed "s#$o/keep/##g"
  } > "$o/keep/ranks-table.md"
  pack_per_step "$o/keep/ranks"
  # the noise-source matrix (configs/noise_sources_lenet.yaml's settings on this network)
  "$DETRAIN" run configs/resnet.yaml --out "$o/noise" --quiet --set name=noise_sources_resnet \
    --set 'policies=[fast, portable]' --set replicas=3 \
    --set 'vary=[[], [init], [data_order], [init, data_order]]' --set train.steps=234 \
    --set dataset.train_limit=30000 --set train.eval_every=0 \
    --set train.checkpoint_at_divergence=true --set report.snapshots=10 --set report.explain=true
  mkdir -p "$o/keep/noise"
  for f in report.md summary.csv cells.csv drift.csv overhead.csv config.json run.json; do
    cp "$o/noise/$f" "$o/keep/noise/"
  done
  for f in explain plots; do [ -d "$o/noise/$f" ] && cp -r "$o/noise/$f" "$o/keep/noise/"; done
  # the PyTorch replay (with PyTorch; else the committed one is kept)
  local py
  if py=$(bash scripts/torch_python.sh 2>/dev/null); then
    "$py" scripts/net_vs_torch.py --detrain "$DETRAIN" --config configs/resnet.yaml --steps 100 \
      --out "$o/vs" --set dataset.train_limit=$fmnist_cut_train \
      --set dataset.test_limit=$fmnist_cut_test || say "resnet: the PyTorch replay disagrees"
    mkdir -p "$o/keep/vs-torch"
    cp "$o/vs/losses.csv" "$o/vs/summary.txt" "$o/keep/vs-torch/"
    # fast and portable against PyTorch's default step, interleaved rounds (make bench's rows)
    bash scripts/vs_torch.sh 3 resnet > "$o/keep/vs-torch/interleaved.txt"
  else
    say "resnet: no PyTorch here: vs-torch/ kept as it was"
  fi
  replace_folder "$o/keep" results/cpu/resnet $([ -d "$o/keep/vs-torch" ] || echo vs-torch)
}

# results/cpu/gpt-quickstart/README.md: the GPT quickstart timed whole, as a new user runs
# it (the run, its evaluations, the sample and the report); its report, metrics, sample and
# manifests kept, and time.txt: the wall time, the CPU and the last validation loss.
part_gpt_quickstart() {
  local o=$tmp/gptq t0 t1 loss
  mkdir -p "$o/keep/run"
  t0=$(date +%s.%N)
  "$DETRAIN" run configs/gpt-quickstart.yaml --out "$o/run" --quiet
  t1=$(date +%s.%N)
  mkdir -p "$o/keep/run/portable/replica-0"
  cp "$o/run/report.md" "$o/run/summary.csv" "$o/run/config.json" "$o/run/run.json" "$o/keep/run/"
  cp "$o/run/portable/replica-0/metrics.csv" "$o/run/portable/replica-0/sample.txt" \
     "$o/run/portable/replica-0/run.json" "$o/keep/run/portable/replica-0/"
  loss=$(tail -1 "$o/keep/run/portable/replica-0/metrics.csv" | cut -d, -f2)
  time_txt configs/gpt-quickstart.yaml "$t0" "$t1" final_loss_nats_per_byte "$loss" \
    > "$o/keep/time.txt"
  # The PyTorch module of docs/cli.md ("Load it in PyTorch") rebuilt from the exported file
  # alone, against the replica's validation loss and predictions (with PyTorch; else kept).
  local py
  if py=$(bash scripts/torch_python.sh 2>/dev/null); then
    "$DETRAIN" export "$o/run/portable/replica-0" --safetensors "$o/gpt.safetensors"
    {
      echo "# then: detrain export RUN/portable/replica-0 --safetensors gpt.safetensors"
      echo "#       $py scripts/torch_gpt.py gpt.safetensors --replica RUN/portable/replica-0 --threads 2"
      echo "# $(sed -n 's/^model name[[:space:]]*: *//p' /proc/cpuinfo | head -1), $(date -u +%Y-%m-%d)"
      "$py" scripts/torch_gpt.py "$o/gpt.safetensors" --replica "$o/run/portable/replica-0" \
        --threads 2 2>&1 | sed "s#$o/##g"
    } > "$o/keep/torch-rebuild.txt" || say "gpt-quickstart: torch_gpt.py disagrees (torch-rebuild.txt)"
    cp "$o/keep/torch-rebuild.txt" results/cpu/gpt-quickstart/torch-rebuild.txt
  else
    say "gpt-quickstart: no PyTorch here: torch-rebuild.txt kept as it was"
  fi
  rm -rf results/cpu/gpt-quickstart/run
  cp -r "$o/keep/run" results/cpu/gpt-quickstart/run
  cp "$o/keep/time.txt" results/cpu/gpt-quickstart/time.txt
}

# results/cpu/ptxas/README.md: ptxas's registers, stack and spills of every kernel for sm_90,
# compiled with the flags of the build DETRAIN lies in (scripts/ptxas.sh).
part_ptxas() {
  mkdir -p results/cpu/ptxas
  bash scripts/ptxas.sh "$(dirname "$DETRAIN")" 90 > "$tmp/sm_90.txt"
  cp "$tmp/sm_90.txt" results/cpu/ptxas/sm_90.txt
}

# results/cpu/under-load/README.md: detrain and PyTorch alone and beside a busy process
# (kept as it was without PyTorch).
part_under_load() {
  local rc=0
  bash scripts/under_load.sh 3 > "$tmp/under-load.txt" || rc=$?
  case $rc in
    0) mv "$tmp/under-load.txt" results/cpu/under-load/under-load.txt ;;
    77) say "under-load: PyTorch is not installed (scripts/setup.sh --bench): kept as it was" ;;
    *) say "under-load: scripts/under_load.sh failed ($rc)"; return 1 ;;
  esac
}

# results/cpu/gpt/README.md: configs/gpt.yaml run whole (its report, csv files, manifests and
# each replica's sample.txt kept, not the per-step files), the same at 1 thread (one
# replica per level) and the table of the two, explain on fast at 2 threads against 1
# (its replicas agree at 2 threads on this CPU: every arrival-order sum has two partials), detrain bench,
# and scripts/gpt_vs_torch.py (PyTorch; kept as it was without it).
part_gpt() {
  local o=$tmp/gpt f d py exe=$DETRAIN rc=0
  case "$exe" in /*) ;; */*) exe=$repo/$exe ;; esac
  mkdir -p "$o/keep/run"
  "$DETRAIN" run configs/gpt.yaml --out "$o/run" --quiet
  for f in report.md summary.csv cells.csv drift.csv overhead.csv config.json run.json; do
    cp "$o/run/$f" "$o/keep/run/"
  done
  for d in "$o"/run/*/replica-*; do
    mkdir -p "$o/keep/run/${d#"$o/run/"}"
    cp "$d/sample.txt" "$d/run.json" "$o/keep/run/${d#"$o/run/"}/"
  done
  "$DETRAIN" run configs/gpt.yaml --out "$o/run-1thread" --quiet --set backend.threads=1 \
    --set replicas=1 --set report.overhead_samples=0
  (cd "$o" && "$exe" compare --table run run-1thread > keep/threads-table.md) || rc=$?
  [ $rc -le 1 ] || { say "gpt: detrain compare --table failed ($rc)"; return 1; }
  rc=0
  (cd "$o" && "$exe" explain run/fast/replica-0 run-1thread/fast/replica-0 --quiet \
     --csv keep/explain.csv > keep/explain.txt) || rc=$?
  [ $rc -le 1 ] || { say "gpt: detrain explain failed ($rc)"; return 1; }
  "$DETRAIN" bench configs/gpt.yaml --steps 60 --warmup 5 > "$o/keep/bench.txt"
  # dropout 0.1 under each rng mode (fast: stored; portable: lfsr), against fast
  "$DETRAIN" bench configs/gpt.yaml --steps 60 --warmup 5 --set model.dropout=0.1 \
    --set 'policies=[fast, portable, {base: portable, rng: philox}, {base: portable, rng: stored}]' \
    > "$o/keep/dropout-bench.txt"
  # detrain fast/portable and PyTorch default/deterministic on the GPT, interleaved
  if bash scripts/vs_torch.sh 3 gpt > "$o/keep/vs-torch-interleaved.txt"; then :; else
    rc=$?
    [ $rc -eq 77 ] || { say "gpt: scripts/vs_torch.sh failed ($rc)"; return 1; }
    say "gpt: PyTorch is not installed: vs-torch-interleaved.txt kept as it was"
    [ ! -f results/cpu/gpt/vs-torch-interleaved.txt ] ||
      cp results/cpu/gpt/vs-torch-interleaved.txt "$o/keep/"
  fi
  rc=0
  # PYTHON (as scripts/vs_torch.sh: scripts/torch_python.sh's pick), else python3 (which
  # then says it has no torch)
  py=$(bash scripts/torch_python.sh 2>/dev/null) || py=python3
  "$py" scripts/gpt_vs_torch.py --detrain "$DETRAIN" --config configs/gpt.yaml --steps 200 \
    --out "$o/vs-torch" > /dev/null || rc=$?
  case $rc in
    0) mkdir -p "$o/keep/vs-torch"
       cp "$o/vs-torch/losses.csv" "$o/vs-torch/summary.txt" "$o/keep/vs-torch/" ;;
    77) say "gpt: PyTorch is not installed: vs-torch/ kept as it was"
        [ -d results/cpu/gpt/vs-torch ] && cp -r results/cpu/gpt/vs-torch "$o/keep/" ;;
    *) say "gpt: scripts/gpt_vs_torch.py failed ($rc)"; return 1 ;;
  esac
  replace_folder "$o/keep" results/cpu/gpt
}

# results/cpu/crossdev-README.md: the portable runs at 2 and 1 threads, then the table.
part_crossdev() {
  bash scripts/cross_device.sh run cpu results/cpu/crossdev-t2 --threads 2
  bash scripts/cross_device.sh run cpu results/cpu/crossdev-t1 --threads 1
  # Every committed GPU first light (results/<gpu>/crossdev) is a column too: the table
  # only reads their files, so it is remade here without a GPU.
  local gpus=() g
  for g in results/*/crossdev; do [ -d "$g" ] && gpus+=("$g"); done
  bash scripts/cross_device.sh table results/cpu/crossdev-t2 results/cpu/crossdev-t1 \
    "${gpus[@]}" --out results/cross_device.md
  # The GPU columns recorded with SHA-256 digests (before issue 67 made the tree digest the
  # default) against the same runs here with hash.digest: sha256 -- until a GPU window
  # remakes them with the tree digest, this table holds their comparison.
  bash scripts/cross_device.sh run cpu results/cpu/crossdev-sha256-t2 --threads 2 \
    --set hash.digest=sha256
  bash scripts/cross_device.sh table results/cpu/crossdev-sha256-t2 results/cpu/epyc/crossdev-t2 \
    "${gpus[@]}" --out results/cross_device-sha256.md
  # the GPT's reference for the first light's gpt stage (its own root: a GPT failure there
  # cannot touch the other models' table)
  bash scripts/cross_device.sh run cpu results/cpu/crossdev-gpt-t2 --threads 2 --models gpt
  # the GPT at GPU scale's, for the gptgpu stage (3 steps at batch 4: cross_device.sh)
  bash scripts/cross_device.sh run cpu results/cpu/crossdev-gpt-gpu-t2 --threads 2 --models gpt-gpu
  # the ResNet's (batch normalisation, issue 68), its own root as the GPT's
  bash scripts/cross_device.sh run cpu results/cpu/crossdev-resnet-t2 --threads 2 --models resnet
}

# results/cpu/reproduce/README.md: every committed portable reference (the CPU's, the GPT's,
# each GPU's) reproduced on this machine, on its widest kernels and on the narrow path.
part_reproduce() {
  # this CPU's references, the AMD EPYC's kept from before the tree default (results/cpu/epyc:
  # SHA-256 digests but the GPU-scale GPT's), and every GPU's
  local refs=(results/cpu/crossdev-t2 results/cpu/crossdev-gpt-t2 results/cpu/crossdev-gpt-gpu-t2
              results/cpu/crossdev-resnet-t2
              results/cpu/epyc/crossdev-t2 results/cpu/epyc/crossdev-gpt-t2
              results/cpu/epyc/crossdev-gpt-gpu-t2) g
  # every GPU's committed references: the three models', and the GPTs' where it ran them
  for g in results/*/crossdev results/*/crossdev-gpt results/*/crossdev-gpt-gpu; do
    [ -d "$g" ] && refs+=("$g")
  done
  mkdir -p results/cpu/reproduce
  "$DETRAIN" reproduce --quiet "${refs[@]}" > "$tmp/widest.txt"
  DETRAIN_CPU_ISA=avx2 OPENBLAS_CORETYPE=Haswell ONEDNN_MAX_CPU_ISA=AVX2 \
    "$DETRAIN" reproduce --quiet "${refs[@]}" > "$tmp/narrow.txt"
  cp "$tmp/widest.txt" "$tmp/narrow.txt" results/cpu/reproduce/
}

# ---- run ------------------------------------------------------------------------------------
say "detrain: $DETRAIN ($("$DETRAIN" --version 2>/dev/null || echo 'version unknown'))"
failed=()
i=0
for p in "${run[@]}"; do
  i=$((i + 1))
  say "[$i/${#run[@]}] $p ..."
  start=$SECONDS
  # A subshell with -e of its own (an `if` around it would switch -e off): a part stops at
  # its first failing command.
  set +e
  ( set -e; "part_${p//-/_}" )
  rc=$?
  set -e
  if [ $rc -eq 0 ]; then
    say "[$i/${#run[@]}] $p done ($((SECONDS - start)) s)"
  else
    say "[$i/${#run[@]}] $p FAILED after $((SECONDS - start)) s (its committed files are left as they were)"
    failed+=("$p")
  fi
done
if [ ${#failed[@]} -gt 0 ]; then
  say "failed: ${failed[*]}"
  exit 1
fi
say "all ${#run[@]} part(s) done; check with: cd build && ctest -R readme --output-on-failure"

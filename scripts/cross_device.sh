#!/usr/bin/env bash
# The cross-device check (issue 8): is the `portable` level the same bits everywhere?
#
#   scripts/cross_device.sh run DEVICE OUTROOT [--threads N] [--steps N] [--models LIST]
#                               [--set KEY=VALUE]...
#       Train the portable runs of the models on DEVICE (cpu or cuda): by default the MLP
#       (configs/quickstart.yaml), LeNet (configs/lenet.yaml) and the Bayesian MLP
#       (configs/bnn.yaml); --models picks from mlp,lenet,bnn,gpt,gpt-gpu,resnet (gpt:
#       configs/gpt.yaml on tests/data/gpt_corpus.txt, a committed corpus every machine has;
#       gpt-gpu: configs/gpt-gpu.yaml on it, batch 4, 3 steps; resnet: configs/resnet.yaml). One replica each,
#       --steps steps (default 100, gpt-gpu 3), hashed every step with per-tensor digests, no weight
#       snapshots, plots, predictions.csv or overhead measurement, into OUTROOT/<model>
#       (each replaced);
#       OUTROOT/commands.txt records the date, host, detrain version and every command with
#       its exit status and time. --threads sets backend.threads; --set passes more
#       overrides to every run.
#   scripts/cross_device.sh table OUTROOT_REF OUTROOT... [--out FILE.md] [--label NAME]...
#                                 [--models LIST]
#       For each model, `detrain compare --table` of OUTROOT_REF/<model> against the others
#       (per-step model digests; first divergent step and tensor), into one Markdown file
#       (stdout without --out): a section per model with the exact command and its output,
#       each root's commands.txt, the detrain version, git revision and date. --label names
#       the roots in order (the reference first), as `compare --table --label` does;
#       --models as for run (default: the three).
#
# DETRAIN: the detrain binary (default ./build/detrain). Paths are taken relative to where
# the script is started. Exit status: 0 every run done / every table identical; 1 a run
# failed, or a table has a divergent or missing replica, or a root lacks a model; 2 bad
# arguments or a table that could not be made (detrain's message is in the file).
set -uo pipefail

orig_pwd=$PWD
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
models=(mlp lenet bnn)
declare -A config_of=([mlp]=configs/quickstart.yaml [lenet]=configs/lenet.yaml
                      [bnn]=configs/bnn.yaml [gpt]=configs/gpt.yaml [gpt-gpu]=configs/gpt-gpu.yaml
                      [resnet]=configs/resnet.yaml)
# steps a model's runs take unless --steps says (the GPT at GPU scale: about a TFLOP a step
# at its batch; here a few steps at batch 4, as short as a CPU reference can be)
declare -A steps_of=([gpt-gpu]=3)
# overrides a model needs wherever it runs, space-separated KEY=VALUE: the GPT a corpus in
# the repo, not fortunes; Fashion-MNIST's models the part of it a GPU call carries
# (scripts/fmnist_cut.sh: the first 10,000 training and 2,000 test examples)
. "$repo/scripts/fmnist_cut.sh"
fmnist_limits="dataset.train_limit=$fmnist_cut_train dataset.test_limit=$fmnist_cut_test"
declare -A sets_of=([gpt]=dataset.path=tests/data/gpt_corpus.txt [mlp]=$fmnist_limits
                    [lenet]=$fmnist_limits [bnn]=$fmnist_limits [resnet]=$fmnist_limits
                    [gpt-gpu]="dataset.path=tests/data/gpt_corpus.txt train.batch=4 dataset.test_limit=8")

usage() {
  echo "usage:" >&2
  sed -n '4,23p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2
  exit 2
}
die() { echo "cross_device.sh: $*" >&2; exit 2; }
# --models LIST: models=(...) from a comma-separated subset of mlp,lenet,bnn,gpt,gpt-gpu,resnet.
set_models() {
  local m list
  IFS=, read -r -a list <<<"$1"
  [ ${#list[@]} -ge 1 ] || die "--models: a comma-separated list of mlp, lenet, bnn, gpt, gpt-gpu, resnet"
  for m in "${list[@]}"; do
    [ -n "${config_of[$m]:-}" ] || die "--models: unknown model '$m' (mlp, lenet, bnn, gpt, gpt-gpu, resnet)"
  done
  models=("${list[@]}")
}
# A path named on the command line, as seen from the repo root (where the script runs).
arg_path() {
  case "$1" in
    /*) echo "$1" ;;
    *) if [ "$orig_pwd" = "$repo" ]; then echo "$1"; else echo "$orig_pwd/$1"; fi ;;
  esac
}

case "${DETRAIN:-}" in
  "") detrain=./build/detrain ;;
  */*) detrain=$(arg_path "$DETRAIN") ;;
  *) detrain=$(command -v "$DETRAIN" || echo "$DETRAIN") ;;
esac
cd "$repo" || exit 2

# quote_args
. "$repo/scripts/lib.sh"

need_detrain() {
  [ -x "$detrain" ] || die "DETRAIN=$detrain: no such executable (build detrain, or set DETRAIN)"
}

# The code: git revision (+dirty), else DT_GIT_REV.
git_revision() {
  local rev
  if rev=$(git rev-parse --short=12 HEAD 2>/dev/null); then
    git diff-index --quiet HEAD -- 2>/dev/null || rev+="+dirty"
    echo "$rev"
  else
    echo "${DT_GIT_REV:-unknown} (no .git here; DT_GIT_REV)"
  fi
}

# The examples an experiment trained on, from its config.json: the data set's name, path's
# base name and limits ("fashion-mnist train_limit 10000 test_limit 2000").
data_of() {
  [ -f "$1/config.json" ] || return 0
  grep -o '"dataset":{[^}]*}' "$1/config.json" | sed 's/^"dataset"://' | tr -d '{}"' | tr ',' '\n' |
    awk -F: '$1 == "name" { n = $2 } $1 == "path" { k = split($2, p, "/"); f = p[k] }
             $1 == "train_limit" { tr = $2 } $1 == "test_limit" { te = $2 }
             END { printf "%s%s train_limit %s test_limit %s\n", n, (f == "" ? "" : " " f), tr, te }'
}

# The digest kind a result recorded (hash.digest): a config.json without the key is from
# before the tree digest became the default, a SHA-256 one (harness/setup/config.c).
digest_of() {
  [ -f "$1/config.json" ] || return 0
  local k
  k=$(grep -o '"digest":"[a-z0-9]*"' "$1/config.json" | head -1 | sed 's/.*:"//; s/"$//')
  echo "${k:-sha256}"
}

# ---- run ------------------------------------------------------------------------------------
mode_run() {
  [ $# -ge 2 ] || usage
  local device=$1 root threads="" steps="" sets=()
  root=$(arg_path "$2")
  shift 2
  case "$device" in cpu | cuda) ;; *) die "run: DEVICE is cpu or cuda, not '$device'" ;; esac
  while [ $# -gt 0 ]; do
    case "$1" in
      --threads) threads=${2:-}; [[ "$threads" =~ ^[0-9]+$ ]] || die "--threads: a number, got '$threads'"; shift 2 ;;
      --steps) steps=${2:-}; [[ "$steps" =~ ^[1-9][0-9]*$ ]] || die "--steps: a positive number, got '$steps'"; shift 2 ;;
      --set) [ $# -ge 2 ] || die "--set needs KEY=VALUE"; sets+=(--set "$2"); shift 2 ;;
      --models) [ $# -ge 2 ] || die "--models needs a list"; set_models "$2"; shift 2 ;;
      *) die "run: unknown option '$1'" ;;
    esac
  done
  need_detrain
  mkdir -p "$root" || die "cannot make $root"
  local log=$root/commands.txt failed=0 m out t0 rc cmd
  {
    echo "# scripts/cross_device.sh run $device $(quote_args "$root" ${threads:+--threads "$threads"} ${steps:+--steps "$steps"} --models "$(IFS=,; echo "${models[*]}")" "${sets[@]+"${sets[@]}"}")"
    echo "# date: $(date -u +%Y-%m-%dT%H:%M:%SZ); host: $(hostname 2>/dev/null); $(uname -srm)"
    echo "# cpu: $(grep -m1 'model name' /proc/cpuinfo 2>/dev/null | cut -d: -f2 | sed 's/^ *//'), $(nproc 2>/dev/null) online"
    echo "# $("$detrain" --version 2>&1); source: git $(git_revision)"
  } >"$log"
  for m in "${models[@]}"; do
    out=$root/$m
    rm -rf "$out"
    local kv model_sets=()
    for kv in ${sets_of[$m]:-}; do model_sets+=(--set "$kv"); done
    cmd=("$detrain" run "${config_of[$m]}" --out "$out" --quiet --set 'policies=[portable]'
         --set replicas=1 --set "train.steps=${steps:-${steps_of[$m]:-100}}" --set hash.per_tensor=true
         --set report.snapshots=0 --set report.overhead_samples=0 --set "backend.device=$device"
         ${threads:+--set "backend.threads=$threads"} "${model_sets[@]+"${model_sets[@]}"}"
         "${sets[@]+"${sets[@]}"}")
    t0=$(date +%s.%N)
    DETRAIN_GNUPLOT=none "${cmd[@]}" >"$root/$m.log" 2>&1
    rc=$?
    local secs
    secs=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
    printf '%s\n# exit %d after %ss\n' "$(quote_args "${cmd[@]}")" "$rc" "$secs" >>"$log"
    if [ $rc -eq 0 ]; then
      echo "cross_device: $m on $device: done in ${secs}s -> $out" >&2
      rm -f "$root/$m.log"
      # the table compares digests: the per-example predictions (89 kB a run) only weigh
      # on every GPU call that carries the references
      rm -f "$out"/portable/replica-*/predictions.csv
    else
      echo "cross_device: FAILED: $m on $device (exit $rc after ${secs}s); its output:" >&2
      sed 's/^/  /' "$root/$m.log" >&2
      failed=1
    fi
  done
  return $failed
}

# ---- table ----------------------------------------------------------------------------------
mode_table() {
  local roots=() labels=() out="" a orig=("$@")
  while [ $# -gt 0 ]; do
    case "$1" in
      --out) [ $# -ge 2 ] || die "--out needs a file"; out=$(arg_path "$2"); shift 2 ;;
      --label) [ $# -ge 2 ] || die "--label needs a name"; labels+=("$2"); shift 2 ;;
      --models) [ $# -ge 2 ] || die "--models needs a list"; set_models "$2"; shift 2 ;;
      -*) die "table: unknown option '$1'" ;;
      *) roots+=("$(arg_path "$1")"); shift ;;
    esac
  done
  [ ${#roots[@]} -ge 2 ] || die "table: needs a reference root and at least one more"
  [ ${#labels[@]} -le ${#roots[@]} ] || die "table: more --label options than roots"
  local r
  for r in "${roots[@]}"; do [ -d "$r" ] || die "table: $r: no such folder"; done
  need_detrain
  local md body worst=0
  md=$(mktemp) && body=$(mktemp) || exit 2
  {
    echo "## How it was made"
    echo
    echo "- made by: \`scripts/cross_device.sh table $(quote_args "${orig[@]}")\`"
    echo "- date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "- detrain: \`$("$detrain" --version 2>&1)\`; source: git $(git_revision)"
    echo
    echo "How each root was trained (its commands.txt):"
    for r in "${roots[@]}"; do
      echo
      echo "\`$r\`:"
      echo '```'
      if [ -f "$r/commands.txt" ]; then cat "$r/commands.txt"; else echo "(no commands.txt)"; fi
      echo '```'
    done
  } >"$body"
  local m dirs used_labels i rc text summary=() skipped=()
  local lack
  for m in "${models[@]}"; do
    dirs=()
    used_labels=()
    lack=""
    {
      echo
      echo "## $m (${config_of[$m]})"
      echo
    } >>"$body"
    local ref_data="" data ref_kind kind
    ref_data=$(data_of "${roots[0]}/$m")
    ref_kind=$(digest_of "${roots[0]}/$m")
    for i in "${!roots[@]}"; do
      data=$(data_of "${roots[$i]}/$m")
      kind=$(digest_of "${roots[$i]}/$m")
      if [ -f "${roots[$i]}/$m/config.json" ] && [ "$i" -gt 0 ] && [ "$data" != "$ref_data" ]; then
        # Other examples give other bits by design: not a divergence, not compared.
        echo "- \`${roots[$i]}/$m\`: not compared, trained on other data ($data; the reference: $ref_data)" >>"$body"
        skipped+=("$m: ${roots[$i]} not compared (other data: $data)")
      elif [ -f "${roots[$i]}/$m/config.json" ] && [ "$i" -gt 0 ] && [ "$kind" != "$ref_kind" ]; then
        # Digests of two kinds share no value: not a divergence, not compared.
        echo "- \`${roots[$i]}/$m\`: not compared, its digests are $kind (hash.digest), the reference's $ref_kind: a run of the reference's kind on that device compares it" >>"$body"
        skipped+=("$m: ${roots[$i]} not compared ($kind digests)")
      elif [ -f "${roots[$i]}/$m/config.json" ]; then
        dirs+=("${roots[$i]}/$m")
        [ "$i" -ge ${#labels[@]} ] || used_labels+=(--label "${labels[$i]}")
      else
        echo "- \`${roots[$i]}/$m\`: no experiment (no config.json): this root has no $m run" >>"$body"
        [ "$worst" -ge 1 ] || worst=1
        lack+=" ${roots[$i]}"
        [ "$i" -ne 0 ] || dirs=("__noref__")
      fi
    done
    if [ "${dirs[0]:-}" = __noref__ ] || [ ${#dirs[@]} -lt 2 ]; then
      if [ "${dirs[0]:-}" != __noref__ ] && [ -z "$lack" ]; then
        echo "- not compared: every other root trained on other data" >>"$body"
        summary+=("$m: not compared (every other root trained on other data)")
        continue
      fi
      echo "- not compared: the reference or every other root lacks it" >>"$body"
      summary+=("$m: NOT COMPARED: no run in$lack")
      continue
    fi
    # --label applies to the roots that have this model, in order.
    local cmd=("$detrain" compare --table "${dirs[@]}" "${used_labels[@]+"${used_labels[@]}"}")
    text=$("${cmd[@]}" 2>&1)
    rc=$?
    {
      [ -z "$lack" ] || echo
      echo "\`$(quote_args "${cmd[@]}")\` (exit $rc)"
      echo
      echo "$text"
    } >>"$body"
    case $rc in
      0) a="$m: identical" ;;
      1) a="$m: DIFFERS (see its table)"; [ "$worst" -ge 1 ] || worst=1 ;;
      *) a="$m: ERROR: table not made (exit $rc)"; worst=2 ;;
    esac
    summary+=("$a${lack:+; MISSING: no run in$lack}")
  done
  {
    echo "# Cross-device digest table"
    echo
    echo "Per-step model digests of the \`portable\` runs of the models (scripts/cross_device.sh run),"
    echo "each root against the reference \`${roots[0]}\`: \`identical (N steps)\` means every hashed step's"
    echo "digest is equal; otherwise the first divergent step and tensor."
    echo
    for a in "${summary[@]}"; do echo "- $a"; done
    for a in "${skipped[@]+"${skipped[@]}"}"; do echo "- $a"; done
    echo
    cat "$body"
  } >"$md"
  rm -f "$body"
  if [ -n "$out" ]; then
    mkdir -p "$(dirname "$out")" && mv "$md" "$out" || die "cannot write $out"
    chmod 644 "$out"
    echo "cross_device: wrote $out" >&2
  else
    cat "$md"
    rm -f "$md"
  fi
  for a in "${summary[@]}"; do echo "cross_device: $a" >&2; done
  return $worst
}

case "${1:-}" in
  run) shift; mode_run "$@"; exit ;;
  table) shift; mode_table "$@"; exit ;;
  -h | --help) usage ;;
  *) [ -z "${1:-}" ] || echo "cross_device.sh: unknown mode '$1'" >&2; usage ;;
esac

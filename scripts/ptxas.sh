#!/usr/bin/env bash
# Every CUDA kernel's registers, stack and spills as ptxas reports them for one architecture
# (default sm_90, the H100's and H200's), and the bound each declares (__launch_bounds__:
# the most threads a block of it may have; a kernel launched with the backend's block-size
# knob declares 1024, CUDA's limit, so that ptxas keeps it within 64 registers a thread).
#   scripts/ptxas.sh BUILD [ARCH]   (BUILD: a configured build with CUDA; make results runs it)
# Prints a table (family, kernel, registers, stack bytes, spill stores, spill loads, bound);
# exit 1 when a kernel spills that did not before (the allowed ones: the forced-order test
# hooks and the per-row attention fallback, named below), 2 on bad input.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
build=${1:-}
arch=${2:-90}
[ -n "$build" ] && [ -f "$build/CMakeFiles/detrain_core.dir/includes_CUDA.rsp" ] ||
  { echo "ptxas.sh: usage: scripts/ptxas.sh BUILD [ARCH]: BUILD must be configured with CUDA" >&2; exit 2; }
nvcc=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
[ -x "$nvcc" ] || { echo "ptxas.sh: no nvcc" >&2; exit 2; }
allowed_spills="attention_forward_kernel col2im_ranked_kernel maxpool_ranked_kernel"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
for cu in nets/cuda/*.cu; do
  fam=$(basename "$cu" .cu)
  (cd "$build" && "$nvcc" -DDETRAIN_HAVE_CUDA_TOOLKIT=1 -D_DEFAULT_SOURCE -D_POSIX_C_SOURCE=200809L \
     --options-file CMakeFiles/detrain_core.dir/includes_CUDA.rsp --fmad=false -O2 \
     --generate-code="arch=compute_$arch,code=[sm_$arch]" -Xptxas -v -x cu -c "$OLDPWD/$cu" \
     -o "$tmp/$fam.o") > "$tmp/$fam.txt" 2>&1 ||
    { echo "ptxas.sh: $cu does not compile" >&2; cat "$tmp/$fam.txt" >&2; exit 2; }
done
python3 - "$tmp" "$allowed_spills" <<'PY'
import glob, os, re, subprocess, sys
tmp, allowed = sys.argv[1], set(sys.argv[2].split())
print(f"{'family':14s} {'kernel':34s} {'regs':>5s} {'stack':>6s} {'spill_st':>8s} {'spill_ld':>8s} bound")
bad = 0
for path in sorted(glob.glob(os.path.join(tmp, "*.txt"))):
    fam = os.path.basename(path)[:-4]
    src = open(f"nets/cuda/{fam}.cu").read()
    name = frame = None
    for line in open(path):
        m = re.search(r"Compiling entry function '(\w+)'", line)
        if m:
            name = m.group(1)
            continue
        m = re.search(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads", line)
        if m:
            frame = tuple(int(x) for x in m.groups())
            continue
        m = re.search(r"Used (\d+) registers", line)
        if m and name:
            kernel = subprocess.run(["c++filt", name], capture_output=True, text=True).stdout
            kernel = re.sub(r"[(<].*", "", kernel.strip())
            b = re.search(r"__launch_bounds__\(([^)]*)\)\s*" + kernel + r"\(", src)
            stack, st, ld = frame or (0, 0, 0)
            print(f"{fam:14s} {kernel:34s} {m.group(1):>5s} {stack:6d} {st:8d} {ld:8d} "
                  f"{b.group(1) if b else '-'}")
            if (st or ld) and kernel not in allowed:
                print(f"ptxas.sh: {kernel} spills ({st} bytes stored, {ld} loaded)", file=sys.stderr)
                bad += 1
            name = frame = None
sys.exit(1 if bad else 0)
PY

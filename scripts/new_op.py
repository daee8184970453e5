#!/usr/bin/env python3
"""Add a dummy op the way docs/DESIGN.md ("Adding an op") says, in a copy of the tree, and
count the files it takes.

The op is `dummy_scale` (y = alpha * x, elementwise) in the activation layer. The script
writes its row (nets/op_list.h), its plan (nets/dispatch.c), its element function
(nets/activation_elem.h), its CPU body (nets/cpu/activation.c), its CUDA body
(nets/cuda/activation.cu: its launch describes its work, which the cost model records --
no cost entry of its own), its parity entry (tests/test_parity.c) and its row of
docs/ops.md -- nothing else -- then shows that this was enough:
  * every C file of nets/, core/ and determinism/ and tests/test_parity.c compiles in the
    copy with the build's own flags (compile_commands.json), and test_parity links (the CPU
    backend, the CUDA stub) with dt_cpu_dummy_scale in it;
  * the copy's test_parity passes cpu_table and controls_not_listed_change_nothing, whose
    tables are generated from the op list, so they ran the new op on 1-3 threads at every
    level;
  * with nvcc, nets/cuda/activation.cu compiles and defines dt_cuda_dummy_scale;
  * the copy's house rules hold (scripts/house.py findable: grep and ctags find the op at its
    row, docs/ops.md's table matches the op list and the files).
Then it prints the files that differ from the tree and fails when they are more than
--max (7).

Usage: scripts/new_op.py BUILD_DIR [--max 7] [--keep]"""
import argparse
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor

SRC = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

ROW = r'''    /* dt_dummy_scale: y = alpha * x, n elements (a test of the house: scripts/new_op.py). */     \
    X(DUMMY_SCALE, dummy_scale, FORWARD, "scaled", "",                                             \
      (float *y, const float *x, int64_t n, float alpha, const struct dt_policy *pol),            \
      (y, x, n, alpha, pol))
'''

PLAN = '''static dt_dummy_scale_fn *plan_dummy_scale(struct dt_backend *be, struct op_tensors *t, float *y,
                                            const float *x, int64_t n, float alpha,
                                            const struct dt_policy *pol)
{
    CHECK_DIMS(n);
    DT_ASSERT(y && x && pol);
    TENSORS(t, OUT(y, n));
    return be->ops->dummy_scale;
}

'''

ELEM = '''/* dummy_scale: one product. */
static inline DT_HD float dt_dummy_scale_elem(float alpha, float x) { return alpha * x; }

'''

CPU = '''
/* portable: elementwise. */
enum dt_status dt_cpu_dummy_scale(struct dt_backend *be, float *y, const float *x, int64_t n,
                                  float alpha, const struct dt_policy *pol)
{
    for (int64_t i = 0; i < n; i++) y[i] = dt_dummy_scale_elem(alpha, x[i]);
    return DT_OK;
}
'''

CUDA = '''
static __global__ void __launch_bounds__(1024)
    dummy_scale_kernel(float *y, const float *x, int64_t n, float alpha)
{
    DT_GRID_STRIDE(i, n)
    y[i] = dt_dummy_scale_elem(alpha, x[i]);
}

extern "C" enum dt_status dt_cuda_dummy_scale(struct dt_backend *be, float *y, const float *x,
                                              int64_t n, float alpha, const struct dt_policy *pol)
{
    const struct dt_cuda_launch *L = &dt_cuda(be)->launch;
    DT_LAUNCH(L, dt_work(8.0 * (double)n, (double)n), dummy_scale_kernel, dt_cuda_grid(L, n),
              L->block_threads, 0, L->stream)(y, x, n, alpha);
    return dt_cuda_launched(be, DT_LAUNCHED(L), "dummy_scale");
}
'''

TEST = '''static void make_dummy_scale(struct io *io)
{
    add_in(io, N, 1.0);
    add_out(io, N, false);
}
static enum dt_status run_dummy_scale(struct dt_backend *be, void *const *in, void *const *out,
                                      const struct dt_policy *pol)
{
    return dt_dummy_scale(be, out[0], in[0], N, 0.75f, pol);
}
static const double tol_dummy_scale = 0;

'''


def edit(root, path, fn):
    p = os.path.join(root, path)
    with open(p) as f:
        s = f.read()
    t = fn(s)
    if t == s:
        sys.exit(f"new_op: {path}: the edit found nothing to change (has the file moved on?)")
    with open(p, "w") as f:
        f.write(t)


def insert_before(marker, text):
    def fn(s):
        i = s.find(marker)
        if i < 0:
            sys.exit(f"new_op: marker {marker!r} not found")
        return s[:i] + text + s[i:]
    return fn


def add_row(s):
    # the list ends at the first line after `#define DT_OP_LIST(X)` without a backslash
    start = s.index("#define DT_OP_LIST(X)")
    lines = s[start:].split("\n")
    for k, line in enumerate(lines):
        if not line.rstrip().endswith("\\"):
            break
    lines[k] = lines[k].rstrip().ljust(99) + " \\"
    lines.insert(k + 1, ROW.rstrip("\n"))
    return s[:start] + "\n".join(lines)


DOC_ROW = ("| `dt_dummy_scale` | forward | — | `nets/cpu/activation.c` | "
           "`nets/cuda/activation.cu` |\n")


def add_doc_row(s):
    # after the table's last row (the op list's order: the new row is its last)
    last = s.rindex("\n| `dt_") + 1
    end = s.index("\n", last) + 1
    return s[:end] + DOC_ROW + s[end:]


def files(root):
    out = subprocess.run(["git", "-C", root, "ls-files", "-co", "--exclude-standard"],
                         capture_output=True, text=True, check=True).stdout.split()
    return [f for f in out if os.path.isfile(os.path.join(root, f))]


def run(cmd, **kw):
    r = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if r.returncode != 0:
        print(" ".join(shlex.quote(c) for c in cmd) if isinstance(cmd, list) else cmd)
        print(r.stdout[-4000:], r.stderr[-4000:])
        sys.exit(f"new_op: a command failed (exit {r.returncode})")
    return r.stdout


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("build")
    ap.add_argument("--max", type=int, default=7)
    ap.add_argument("--keep", action="store_true")
    a = ap.parse_args()
    build = os.path.abspath(a.build)
    tmp = tempfile.mkdtemp(prefix="detrain-new-op-")
    try:
        tracked = files(SRC)
        for f in tracked:
            os.makedirs(os.path.dirname(os.path.join(tmp, f)), exist_ok=True)
            shutil.copy2(os.path.join(SRC, f), os.path.join(tmp, f))
        # ---- the op, in the files DESIGN names ----
        edit(tmp, "nets/op_list.h", add_row)
        edit(tmp, "nets/dispatch.c", insert_before("/* ---- the wrappers:", PLAN))
        edit(tmp, "nets/activation_elem.h", insert_before("#endif", ELEM))
        edit(tmp, "nets/cpu/activation.c", lambda s: s + CPU)
        edit(tmp, "nets/cuda/activation.cu", lambda s: s + CUDA)
        edit(tmp, "tests/test_parity.c", insert_before("/* One row per op of nets/op_list.h", TEST))
        edit(tmp, "docs/ops.md", add_doc_row)
        changed = [f for f in tracked
                   if open(os.path.join(SRC, f), "rb").read() != open(os.path.join(tmp, f), "rb").read()]

        # ---- compile and link the CPU side with the build's flags ----
        with open(os.path.join(build, "compile_commands.json")) as f:
            cc = json.load(f)
        want = re.compile(r"/(nets/[^/]+\.c|nets/cpu/[^/]+\.c|core/[^/]+\.c|"
                          r"determinism/[^/]+\.c|tests/test_parity\.c)$")
        obj = os.path.join(tmp, "obj")
        os.makedirs(obj)
        jobs, template = [], None
        for e in cc:
            m = want.search(e["file"])
            if not m:
                continue
            rel = m.group(1)
            args = e["arguments"] if "arguments" in e else shlex.split(e["command"])
            if rel == "nets/dispatch.c":
                template = args
            jobs.append((rel, args))
        if template is None:
            sys.exit("new_op: nets/dispatch.c is not in compile_commands.json")
        jobs.append(("nets/cuda/backend_cuda_stub.c", template))

        def compile_one(job):
            rel, args = job
            out = os.path.join(obj, rel.replace("/", "_") + ".o")
            cmd = []
            skip = False
            for x in args:
                if skip:
                    skip = False
                    continue
                if x == "-o":
                    skip = True
                    continue
                if x == "-c":
                    continue
                if x.endswith((".c", ".cu")) and os.path.isabs(x):
                    continue
                cmd.append(x.replace(SRC, tmp) if x.startswith(("-I", "-D")) else x)
            cmd = [c for c in cmd if not c.startswith("-DDETRAIN_HAVE_CUDA")]
            cmd[1:1] = ["-O0", "-w"]  # quick: what matters is that it compiles and runs
            run(cmd + ["-c", os.path.join(tmp, rel), "-o", out], cwd=build)
            return out

        with ThreadPoolExecutor(max_workers=max(1, min(4, os.cpu_count() or 1))) as ex:
            objs = list(ex.map(compile_one, jobs))
        link = os.path.join(build, "tests", "CMakeFiles", "test_parity.dir", "linkLibs.rsp")
        with open(link) as f:
            libs = shlex.split(f.read())
        libs = [x for x in libs if not x.endswith("libdetrain_core.a")]
        exe = os.path.join(tmp, "test_parity")
        run(["g++", "-fopenmp"] + objs + ["-o", exe] + libs, cwd=os.path.join(build, "tests"))
        if "dt_cpu_dummy_scale" not in run(["nm", exe]):
            sys.exit("new_op: dt_cpu_dummy_scale is not in the linked test")
        for case in ("cpu_table", "controls_not_listed_change_nothing"):
            run([exe, case], cwd=os.path.join(build, "tests"))
        print("new_op: the copy's test_parity passes cpu_table and "
              "controls_not_listed_change_nothing with dummy_scale in its table")

        # ---- the CUDA body ----
        nvcc = shutil.which("nvcc") or ("/usr/local/cuda/bin/nvcc"
                                        if os.path.exists("/usr/local/cuda/bin/nvcc") else None)
        if nvcc:
            o = os.path.join(obj, "activation.cu.o")
            run([nvcc, "-std=c++17", "--fmad=false", "-arch=sm_90", f"-I{tmp}",
                 f"-I{os.path.join(build, 'generated')}", "-c",
                 os.path.join(tmp, "nets/cuda/activation.cu"), "-o", o])
            if not re.search(r" T dt_cuda_dummy_scale$", run(["nm", o]), re.M):
                sys.exit("new_op: nets/cuda/activation.cu does not define dt_cuda_dummy_scale")
            print("new_op: nets/cuda/activation.cu compiles with nvcc and defines dt_cuda_dummy_scale")
        else:
            print("new_op: no nvcc here: the CUDA body was not compiled")

        # ---- the house rules in the copy: findable, and the ops table true ----
        run([sys.executable, os.path.join(tmp, "scripts", "house.py"), "findable"], cwd=tmp)
        print("new_op: the copy's house.py findable passes (grep, ctags and docs/ops.md)")

        print(f"new_op: a new op touched {len(changed)} files (at most {a.max}):")
        for f in changed:
            print("  " + f)
        if len(changed) > a.max:
            sys.exit(f"new_op: {len(changed)} files, more than {a.max}")
    finally:
        if a.keep:
            print("new_op: kept " + tmp)
        else:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()

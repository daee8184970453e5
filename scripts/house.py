#!/usr/bin/env python3
"""The house rules a reader relies on (docs/DESIGN.md, "House rules"), checked on the tree:

  lengths  no function in harness/ or nets/ longer than 120 lines (definition line to its
           closing brace), so that each reads on one screen or two;
  hooks    no DETRAIN_TEST_ name outside the test seam (harness/main.c reads them,
           harness/setup/test_hooks.h says what they do), tests/ and docs/;
  design   docs/DESIGN.md says what is there: every path it quotes exists (as written,
           or as a module: .c / .h), and its "Folders" block names every C file of the
           folders it describes (nets/, harness/run/, harness/record/, harness/analyze/,
           harness/setup/) by its name or its stem.
  layers   no circle in any folder view (the whole house; harness/, nets/, nets/cpu/,
           nets/cuda/, determinism/, core/): a view's rooms are its files (a source with
           its header and its .cu: one room) and its sub-folders, and room A depends on
           room B when A includes one of B's files or calls a function that B alone
           defines (what `farm-studio look` draws). A view without a circle is layered:
           no edge in it runs back up. A breach names every tie of the circle.

Usage: house.py [lengths|hooks|design|layers|self-test]... (default: lengths, hooks, design
and layers; self-test: each check finds a made-up breach). Exit 1 naming each breach."""
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LIMIT = 120
SEAM = {"harness/main.c", "harness/setup/test_hooks.h"}


def tracked(prefixes, endings):
    """The tracked files under prefixes (every file there when the tree is not a git clone)."""
    try:
        out = subprocess.run(["git", "-C", ROOT, "ls-files", "-co", "--exclude-standard", *prefixes], check=True,
                             capture_output=True, text=True).stdout.split()
    except (OSError, subprocess.CalledProcessError):
        out = []
        for prefix in prefixes:
            for d, dirs, files in os.walk(os.path.join(ROOT, prefix)):
                dirs[:] = [x for x in dirs if not x.startswith((".", "build"))]
                out += [os.path.relpath(os.path.join(d, f), ROOT) for f in files]
    return [p for p in out if p.endswith(endings)]


def functions(text):
    """(name, first line, line count) of each top-level function definition: from the line
    naming it to the '}' that closes the '{' alone on a line at depth 0 (house style)."""
    lines = text.split("\n")
    depth, start, name = 0, None, None
    in_comment = False
    for i, raw in enumerate(lines):
        line = raw
        # strip comments and string/char literals (enough for brace counting)
        out, j = [], 0
        while j < len(line):
            if in_comment:
                k = line.find("*/", j)
                if k < 0:
                    j = len(line)
                    break
                in_comment, j = False, k + 2
                continue
            c = line[j]
            if line.startswith("/*", j):
                in_comment, j = True, j + 2
            elif line.startswith("//", j):
                break
            elif c in "\"'":
                q, j = c, j + 1
                while j < len(line) and line[j] != q:
                    j += 2 if line[j] == "\\" else 1
                j += 1
            else:
                out.append(c)
                j += 1
        code = "".join(out)
        for c in code:
            if c == "{":
                if depth == 0:
                    # house style: a function's body opens with '{' alone at column 0
                    start, name = None, None
                    if raw.rstrip() == "{":
                        k = i - 1
                        while k >= 0 and "(" not in lines[k]:
                            k -= 1
                        m = re.search(r"(\w+)\s*\(", lines[k]) if k >= 0 else None
                        if m:
                            start, name = k, m.group(1)
                depth += 1
            elif c == "}":
                depth -= 1
                if depth == 0 and start is not None:
                    yield name, start + 1, i - start + 1
                    start = None


def check_lengths():
    bad = []
    for path in tracked(["harness", "nets"], (".c", ".cu", ".h", ".cuh")):
        with open(os.path.join(ROOT, path), encoding="utf-8") as f:
            text = f.read()
        for name, line, n in functions(text):
            if n > LIMIT:
                bad.append(f"{path}:{line}: {name} is {n} lines (at most {LIMIT})")
    return bad


def check_hooks():
    bad = []
    for path in tracked(["."], (".c", ".cu", ".h", ".cuh", ".cmake", ".txt", ".sh", ".py")):
        if path in SEAM or path.startswith(("tests/", "docs/", "fuzz/")) or path == "scripts/house.py":
            continue
        with open(os.path.join(ROOT, path), encoding="utf-8", errors="replace") as f:
            for n, line in enumerate(f, 1):
                if "DETRAIN_TEST_" in line:
                    bad.append(f"{path}:{n}: DETRAIN_TEST_ outside the test seam")
    return bad


ROOTS = ("core/", "determinism/", "nets/", "harness/", "scripts/", "tests/", "docs/",
         "results/", "fuzz/", "configs/", ".ci/")
FOLDERS = ("nets/", "harness/run/", "harness/record/", "harness/analyze/", "harness/setup/")


def design_breaches(text, exists, files_of):
    """Paths DESIGN quotes that do not exist, and C files of the described folders that its
    Folders block does not name. exists(path) and files_of(folder) read the tree."""
    bad = []
    for tok in sorted(set(re.findall(r"`([A-Za-z0-9_./+-]+)`", text))):
        path = tok.rstrip("/")
        if not tok.startswith(ROOTS) or "*" in tok:
            continue
        if not (exists(path) or exists(path + ".c") or exists(path + ".h")):
            bad.append(f"docs/DESIGN.md quotes `{tok}`, which is not in the tree")
    blocks = re.findall(r"```\n(core/ .*?)```", text, re.S)
    if not blocks:
        return bad + ["docs/DESIGN.md: no Folders block (a code block starting with core/)"]
    entries, cur = {}, None
    for line in blocks[0].split("\n"):
        m = re.match(r"(\S+/)\s+(.*)", line)
        if m:
            cur = m.group(1)
            entries[cur] = m.group(2)
        elif cur and line.startswith(" "):
            entries[cur] += " " + line.strip()
    for folder in FOLDERS:
        said = entries.get(folder)
        if said is None:
            bad.append(f"docs/DESIGN.md: the Folders block has no entry for {folder}")
            continue
        words = set(re.findall(r"[A-Za-z0-9_]+(?:\.[ch])?", said))
        for f in files_of(folder):
            stem = f[: -2]
            if f not in words and stem not in words:
                bad.append(f"docs/DESIGN.md: the Folders entry for {folder} does not name {f}")
    return bad


def check_design():
    with open(os.path.join(ROOT, "docs", "DESIGN.md"), encoding="utf-8") as f:
        text = f.read()
    listed = set(tracked(["."], ("",)))

    def exists(path):
        return path in listed or any(p.startswith(path + "/") for p in listed)

    def files_of(folder):
        return sorted(p[len(folder):] for p in listed
                      if p.startswith(folder) and "/" not in p[len(folder):] and p.endswith(".c"))

    return design_breaches(text, exists, files_of)

# ---- layers -----------------------------------------------------------------------------

VIEWS = ("", "harness/", "nets/", "nets/cpu/", "nets/cuda/", "determinism/", "core/")
LAYER_ROOTS = ("core/", "determinism/", "nets/", "harness/")
C_WORDS = {"if", "for", "while", "switch", "return", "sizeof", "char", "int", "void", "float",
           "double", "long", "short", "unsigned", "signed", "const", "struct", "enum", "bool"}


def strip_code(text):
    """The text without comments and string or character literals (lines kept)."""
    out, i, n = [], 0, len(text)
    while i < n:
        if text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append("\n" * text.count("\n", i, j))
            i = j
        elif text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif text[i] in "\"'":
            q, j = text[i], i + 1
            while j < n and text[j] != q and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            out.append(q + q)
            i = j + 1
        else:
            out.append(text[i])
            i += 1
    return "".join(out)


def room_of(path):
    """A file's room: its path without the ending (foo.c, foo.h and foo.cu are one)."""
    return re.sub(r"\.(c|h|cu|cuh)$", "", path)


def dependencies(sources):
    """{room: {other room: [why, ...]}} of the files `sources` ({path: text}): includes
    (resolved from the root, else beside the file) and calls of a function that exactly one
    other room defines (a definition: a line at column 0 naming it before '(' and a body
    opening with '{' alone, static ones left out)."""
    definers = {}
    for path, text in sources.items():
        for name, line, _ in functions(text):
            head = text.split("\n")[line - 1]
            if head.startswith("static") or name in C_WORDS or name.isupper():
                continue
            definers.setdefault(name, set()).add(room_of(path))
        # one-line definitions ("bool f(void) { return x; }") and tables of a backend
        for m in re.finditer(r"^(?!static)[A-Za-z][\w ]*?\b(\w+)\s*\([^;{]*\)\s*\{.*\}\s*$", text, re.M):
            if m.group(1) not in C_WORDS:
                definers.setdefault(m.group(1), set()).add(room_of(path))
    deps = {}
    for path, text in sources.items():
        room = room_of(path)
        mine = deps.setdefault(room, {})
        for inc in re.findall(r'^\s*#\s*include\s+"([^"]+)"', text, re.M):
            target = inc if inc in sources else os.path.normpath(os.path.join(os.path.dirname(path), inc))
            if target in sources and room_of(target) != room:
                mine.setdefault(room_of(target), []).append(f"{path} includes {target}")
        lines = strip_code(text).split("\n")
        bodies = "\n".join("\n".join(lines[line - 1:line - 1 + n]) for _, line, n in functions(text))
        for name in set(re.findall(r"\b([A-Za-z_]\w*)\s*\(", bodies)):  # calls: in bodies only
            rooms = definers.get(name, set())
            if len(rooms) == 1 and room not in rooms:
                other = next(iter(rooms))
                mine.setdefault(other, []).append(f"{path} calls {name}")
    return deps


def circles(nodes, edges):
    """The strongly connected components of more than one node (Tarjan, iterative)."""
    index, low, on, stack, out, counter = {}, {}, set(), [], [], [0]
    for root in sorted(nodes):
        if root in index:
            continue
        work = [(root, iter(sorted(edges.get(root, ()))))]
        index[root] = low[root] = counter[0]
        counter[0] += 1
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is None:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    comp = []
                    while True:
                        x = stack.pop()
                        on.discard(x)
                        comp.append(x)
                        if x == v:
                            break
                    if len(comp) > 1:
                        out.append(sorted(comp))
            elif w not in index:
                index[w] = low[w] = counter[0]
                counter[0] += 1
                stack.append(w)
                on.add(w)
                work.append((w, iter(sorted(edges.get(w, ())))))
            elif w in on:
                low[v] = min(low[v], index[w])
    return out


def view_breaches(deps, view):
    """The circles of one folder view: its rooms are the first path part below `view`."""
    def node(room):
        if not room.startswith(view):
            return None
        rest = room[len(view):]
        return view + rest.split("/")[0] + ("/" if "/" in rest else "")

    edges, why, nodes = {}, {}, set()
    for a, targets in deps.items():
        na = node(a)
        if na is None:
            continue
        nodes.add(na)
        for b, reasons in targets.items():
            nb = node(b)
            if nb is None or nb == na:
                continue
            edges.setdefault(na, set()).add(nb)
            why.setdefault((na, nb), []).extend(reasons)
    bad = []
    for comp in circles(nodes, edges):
        ties = []
        for a in comp:
            for b in sorted(edges.get(a, ())):
                if b in comp:
                    reasons = "; ".join(sorted(set(why[(a, b)]))[:3])
                    ties.append(f"{a} -> {b} ({reasons})")
        bad.append(f"layers: a circle in the view {view or '(the whole house)'}: " + ", ".join(ties))
    return bad


def check_layers():
    sources = {}
    for path in tracked(list(LAYER_ROOTS), (".c", ".cu", ".h", ".cuh")):
        with open(os.path.join(ROOT, path), encoding="utf-8", errors="replace") as f:
            sources[path] = f.read()
    deps = dependencies(sources)
    bad = []
    for view in VIEWS:
        bad += view_breaches(deps, view)
    return bad


OP_ROW = re.compile(r"^\s*X\(([A-Z0-9_]+), ([a-z0-9_]+),")


def findable_breaches(op_list, ctags_rules):
    """Each row of the op list (nets/op_list.h) opens its contract comment with the function
    it generates (`/* dt_<name>: ...`, so grep finds the row), and the Universal Ctags rules
    (.ctags.d/ops.ctags) tag dt_<name>, dt_cpu_<name>, dt_cuda_<name> and dt_<name>_fn there."""
    rules = []
    for line in ctags_rules.splitlines():
        m = re.match(r"--regex-C\+\+=/(.*)/(.*)/o/$", line)
        if m:
            rules.append((re.compile(m.group(1).replace("[[:space:]]", "\\s")), m.group(2)))
    bad, lines = [], op_list.splitlines()
    for i, line in enumerate(lines):
        m = OP_ROW.match(line)
        if not m:
            continue
        name = m.group(2)
        j = i - 1
        while j > 0 and "/*" not in lines[j]:
            j -= 1
        if f"/* dt_{name}: " not in lines[j]:
            bad.append(f"nets/op_list.h:{j + 1}: the comment above {name}'s row does not open "
                       f"with 'dt_{name}: ' (grep finds the row by it)")
        tags = set()
        for rx, tmpl in rules:
            mm = rx.match(line)
            if mm:
                tags.add(re.sub(r"\\(\d)", lambda g: mm.group(int(g.group(1))), tmpl))
        want = {f"dt_{name}", f"dt_cpu_{name}", f"dt_cuda_{name}", f"dt_{name}_fn"}
        if not want <= tags:
            bad.append(f"nets/op_list.h:{i + 1}: .ctags.d/ops.ctags does not tag "
                       f"{sorted(want - tags)} at {name}'s row")
    return bad


OPS_DOC_ROW = re.compile(r"^\| `dt_([a-z0-9_]+)` \| (\w+) \| ([^|]*) \| `([^`]+)` \| `([^`]+)` \|$")


def ops_doc_breaches(op_list, doc, read):
    """docs/ops.md: a row per op of the op list, in its order, the phase and controls the
    row's, and the CPU and CUDA files it names defining dt_cpu_<name> and dt_cuda_<name>
    (read(path) gives a file's text, or None)."""
    flat = op_list.replace("\\\n", "\n")
    ops = re.findall(r'^\s*X\(([A-Z0-9_]+),\s*([a-z0-9_]+),\s*(\w+),\s*"[^"]*",\s*"([^"]*)"',
                     flat, re.M)
    rows = [m.groups() for m in map(OPS_DOC_ROW.match, doc.splitlines()) if m]
    bad = []
    if [r[0] for r in rows] != [o[1] for o in ops]:
        missing = sorted({o[1] for o in ops} - {r[0] for r in rows})
        extra = sorted({r[0] for r in rows} - {o[1] for o in ops})
        bad.append(f"docs/ops.md: its rows are not the op list's, in order (missing {missing}, "
                   f"not ops {extra})")
    want = {o[1]: o for o in ops}
    for name, phase, controls, cpu, cuda in rows:
        if name not in want:
            continue
        _, _, ph, ctl = want[name]
        doc_ctl = [c.strip().strip("`") for c in controls.split(",") if c.strip() != "—"]
        if phase != ph.lower() or doc_ctl != [c for c in ctl.split("|") if c]:
            bad.append(f"docs/ops.md: dt_{name}: phase or controls differ from its row "
                       f"({ph.lower()}; {ctl or 'none'})")
        for path, fn in ((cpu, f"dt_cpu_{name}"), (cuda, f"dt_cuda_{name}")):
            if not defines(read(path), fn):
                bad.append(f"docs/ops.md: dt_{name}: {path} does not define {fn}")
    return bad


def defines(text, fn):
    """Whether C text defines fn: a line opening with its declarator, a body (`{`) before any
    `;` after it."""
    for m in re.finditer(r"^(extern \"C\" )?[a-z][^;{(]*\b" + fn + r"\(", text or "", re.M):
        rest = text[m.end():]
        brace, semi = rest.find("{"), rest.find(";")
        if brace >= 0 and (semi < 0 or brace < semi):
            return True
    return False


def read_source(path):
    try:
        with open(os.path.join(ROOT, path), encoding="utf-8") as f:
            return f.read()
    except OSError:
        return None


def check_findable():
    with open(os.path.join(ROOT, "nets/op_list.h"), encoding="utf-8") as f:
        op_list = f.read()
    try:
        with open(os.path.join(ROOT, ".ctags.d/ops.ctags"), encoding="utf-8") as f:
            rules = f.read()
    except OSError:
        return [".ctags.d/ops.ctags is missing (ctags would not find the op functions)"]
    bad = findable_breaches(op_list, rules)
    bad += ops_doc_breaches(op_list, read_source("docs/ops.md") or "", read_source)
    if not any(OP_ROW.match(line) for line in op_list.splitlines()):
        bad.append("nets/op_list.h: no op row found (the row pattern changed?)")
    return bad


def bounds_breaches(path, text):
    """Every CUDA kernel declares the most threads a block of it may have
    (__launch_bounds__), so that ptxas keeps its registers within what such a block can
    have (results/cpu/ptxas: those launched with the block-size knob declare 1024)."""
    bad = []
    for m in re.finditer(r"__global__\s+void\s+(__launch_bounds__\([^)]*\)\s*)?(\w+)\s*\(", text):
        if not m.group(1):
            line = text.count("\n", 0, m.start()) + 1
            bad.append(f"{path}:{line}: kernel {m.group(2)} declares no __launch_bounds__")
    return bad


def check_bounds():
    bad = []
    for path in tracked(["nets/cuda"], (".cu", ".cuh")):
        with open(os.path.join(ROOT, path), encoding="utf-8") as f:
            bad += bounds_breaches(path, f.read())
    return bad


def self_test():
    """Negative controls: each check finds what it is for in a made-up source."""
    body = "\n".join(f"    x += {i};" for i in range(LIMIT))
    text = ("static int ok(void)\n{\n    return 0;\n}\n\n"
            "/* a comment with a { brace */\nstruct s {\n    int a;\n};\n\n"
            f"int too_long(int x)\n{{\n{body}\n    return x;\n}}\n")
    found = {name: n for name, _, n in functions(text)}
    bad = []
    if found.get("ok") != 4:
        bad.append(f"self-test: a 4-line function measured {found.get('ok')}")
    if found.get("too_long", 0) <= LIMIT:
        bad.append(f"self-test: a {LIMIT + 4}-line function measured {found.get('too_long')}")
    if "s" in found:
        bad.append("self-test: a struct was taken for a function")
    design = ("Quotes `nets/gone.c` and `nets/model`.\n```\ncore/   x\nnets/   model.c\n"
              "harness/run/ train\nharness/record/ trace\nharness/analyze/ report\n"
              "harness/setup/ config\n```\n")
    tree = {"nets/model.c", "nets/new.c", "harness/run/train.c", "harness/record/trace.c",
            "harness/analyze/report.c", "harness/setup/config.c"}
    found = design_breaches(design, lambda p: p in tree,
                            lambda d: sorted(p[len(d):] for p in tree if p.startswith(d)
                                             and "/" not in p[len(d):]))
    if len(found) != 2 or "nets/gone.c" not in found[0] or "new.c" not in found[1]:
        bad.append(f"self-test: the design check found {found} (expected nets/gone.c, new.c)")
    # layers: a circle by calls alone (a.c calls b.c's function and back, through one
    # header), one by includes across folders, and a layered tree without one
    fn = "{}(void)\n{{\n    return {};\n}}\n"
    tree = {"nets/x/a.c": '#include "nets/x/both.h"\nint a' + fn.format("", "b()"),
            "nets/x/b.c": '#include "nets/x/both.h"\nint b' + fn.format("", "a()"),
            "nets/x/both.h": "int a(void);\nint b(void);\n",
            "nets/top.c": '#include "core/low.h"\n', "core/low.h": '#include "nets/top.h"\n',
            "nets/top.h": "", "core/ok.c": "int ok" + fn.format("", "0")}
    found = [b for v in VIEWS + ("nets/x/",) for b in view_breaches(dependencies(tree), v)]
    if not any("nets/x/a -> nets/x/b (nets/x/a.c calls b)" in b for b in found):
        bad.append(f"self-test: the layers check missed a circle of calls: {found}")
    if not any("(the whole house)" in b and "core/ -> nets/" in b for b in found):
        bad.append(f"self-test: the layers check missed a circle of folders: {found}")
    layered = {k: v for k, v in tree.items() if k != "core/low.h"}
    layered["nets/x/b.c"] = '#include "nets/x/both.h"\nint b' + fn.format("", "0")
    found = [b for v in VIEWS + ("nets/x/",) for b in view_breaches(dependencies(layered), v)]
    if found:
        bad.append(f"self-test: the layers check found a circle in a layered tree: {found}")
    # findable: a row whose comment does not name its function, and rules that miss one tag
    rows = ("    /* dt_one: y = x. */ \\\n    X(ONE, one, FORWARD, \"y\", \"\", (x), (x)) \\\n"
            "    /* y = 2 x. */ \\\n    X(TWO, two, FORWARD, \"y\", \"\", (x), (x))\n")
    with open(os.path.join(ROOT, ".ctags.d/ops.ctags"), encoding="utf-8") as f:
        rules = f.read()
    found = findable_breaches(rows, rules)
    if len(found) != 1 or "'dt_two: '" not in found[0]:
        bad.append(f"self-test: the findable check found {found} (expected two's comment)")
    found = findable_breaches(rows, "\n".join(l for l in rules.splitlines() if "dt_cuda_" not in l))
    if not any("dt_cuda_one" in b for b in found):
        bad.append(f"self-test: the findable check missed an untagged dt_cuda_one: {found}")
    # the ops table: a row missing, one with the wrong controls, one naming a file without
    # the function
    doc = ("| `dt_one` | forward | — | `a.c` | `a.cu` |\n"
           "| `dt_two` | forward | `math` | `a.c` | `b.cu` |\n")
    files = {"a.c": "enum dt_status dt_cpu_one(int x)\n{\n}\nint dt_cpu_two(void);\n",
             "a.cu": 'extern "C" enum dt_status dt_cuda_one(int x)\n{\n}\n',
             "b.cu": 'extern "C" enum dt_status dt_cuda_two(int x)\n{\n}\n'}
    found = ops_doc_breaches(rows, doc, files.get)
    if not (len(found) == 2 and "phase or controls" in found[0]
            and "a.c does not define dt_cpu_two" in found[1]):
        bad.append(f"self-test: the ops table check found {found} (expected two's controls "
                   "and its CPU function)")
    # bounds: a kernel without __launch_bounds__ found, one with it not
    found = bounds_breaches("k.cu", "static __global__ void __launch_bounds__(1024) a(int x)\n"
                                    "{\n}\nstatic __global__ void b(int x)\n{\n}\n")
    if len(found) != 1 or "kernel b " not in found[0]:
        bad.append(f"self-test: the bounds check found {found} (expected kernel b)")
    found = ops_doc_breaches(rows, doc.splitlines()[0] + "\n", files.get)
    if not any("missing ['two']" in b for b in found):
        bad.append(f"self-test: the ops table check missed a missing row: {found}")
    return bad


def main(argv):
    what = argv[1:] or ["lengths", "hooks", "design", "layers", "findable", "bounds"]
    bad = []
    for w in what:
        if w == "lengths":
            bad += check_lengths()
        elif w == "hooks":
            bad += check_hooks()
        elif w == "design":
            bad += check_design()
        elif w == "layers":
            bad += check_layers()
        elif w == "bounds":
            bad += check_bounds()
        elif w == "findable":
            bad += check_findable()
        elif w == "self-test":
            bad += self_test()
        else:
            print(f"house.py: unknown check '{w}' (lengths, hooks, design, layers, findable, bounds, self-test)",
                  file=sys.stderr)
            return 2
    for b in bad:
        print(b)
    if bad:
        print(f"house.py: {len(bad)} breach(es)", file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

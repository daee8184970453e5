#!/usr/bin/env python3
"""The house rules a reader relies on (docs/DESIGN.md, "House rules"), checked on the tree:

  lengths  no function in harness/ or nets/ longer than 120 lines (definition line to its
           closing brace), so that each reads on one screen or two;
  hooks    no DETRAIN_TEST_ name outside the test seam (harness/main.c reads them,
           harness/setup/test_hooks.h says what they do), tests/ and docs/.

Usage: house.py [lengths|hooks|self-test]... (default: lengths and hooks; self-test: each
check finds a made-up breach). Exit 1 naming each breach."""
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
        out = subprocess.run(["git", "-C", ROOT, "ls-files", *prefixes], check=True,
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
    return bad


def main(argv):
    what = argv[1:] or ["lengths", "hooks"]
    bad = []
    for w in what:
        if w == "lengths":
            bad += check_lengths()
        elif w == "hooks":
            bad += check_hooks()
        elif w == "self-test":
            bad += self_test()
        else:
            print(f"house.py: unknown check '{w}' (lengths, hooks, self-test)", file=sys.stderr)
            return 2
    for b in bad:
        print(b)
    if bad:
        print(f"house.py: {len(bad)} breach(es)", file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

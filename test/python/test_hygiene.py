"""Tracked files name no paths of one machine (home directories, the
workspace, pyenv interpreters): commands and docs work from any checkout."""

import os
import re
import shutil
import subprocess

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# (spelled in pieces so that this file does not match itself)
_ROOTS = [b"root/", rb"home/\w+/", b"work/", rb"Users/\w+/", b"tmp/pytest-"]
MACHINE_PATH = re.compile(rb"(?<![\w.<])/(" + b"|".join(_ROOTS) + rb")")


def tracked_files():
    if shutil.which("git") is None or not os.path.exists(os.path.join(ROOT, ".git")):
        pytest.skip("not a git checkout")
    out = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True)
    return [f for f in out.stdout.decode().split("\0") if f]


def test_no_machine_specific_absolute_paths():
    found = []
    for f in tracked_files():
        path = os.path.join(ROOT, f)
        if f.endswith((".png", ".cubin")) or not os.path.isfile(path):
            continue
        with open(path, "rb") as fh:
            for n, line in enumerate(fh, 1):
                if MACHINE_PATH.search(line):
                    found.append(f"{f}:{n}: {line.decode(errors='replace').strip()[:120]}")
    assert not found, "machine-specific paths in tracked files:\n" + "\n".join(found)


# --- Comments and docs cite only files a reader of this repository can open

# A cited file: a name with a source/doc extension, or a path under a folder
# that lives outside the repository (the project's shared notes, CuTe DSL's
# sources). Not preceded by characters that make it an expansion (%S/, $OUT/)
# or part of a longer name; not followed by `.word` (llvm.mlir.global) or by
# `(` (a call: `k.mlir()`).
_EXT = r"(?:md|py|cpp|h|hpp|td|cu|cuh|mlir|sh)"
_CITED = re.compile(r"(?<![\w./$%@<{-])((?:[\w+-][\w.+-]*/)*[\w+-][\w.+-]*\." + _EXT
                    + r"|(?:shared|reference|cutlass|cute)/[\w./+-]*)(?!\.?\w)(?![/(])")
# Names that stand for the reader's own file in an example command or message.
_ILLUSTRATIVE = {"my_kernel.py", "kernel.mlir", "producer.mlir"}


def _comments(path, text):
    """(line, text) of each comment of a source file: Python comments and
    docstrings, `//` comments of C++/CUDA/MLIR, `#` comments of shell and
    CMake files; every line of TableGen files (their descriptions become
    docs/reference) and of Markdown files."""
    import ast
    import io
    import tokenize

    if path.endswith(".py"):
        try:
            for tok in tokenize.generate_tokens(io.StringIO(text).readline):
                if tok.type == tokenize.COMMENT:
                    yield tok.start[0], tok.string
            tree = ast.parse(text)
        except (SyntaxError, tokenize.TokenError):
            return
        for node in ast.walk(tree):
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef,
                                 ast.AsyncFunctionDef)):
                doc = ast.get_docstring(node, clean=False)
                if doc is not None:
                    first = node.body[0].lineno
                    for i, line in enumerate(doc.splitlines()):
                        yield first + i, line
    elif path.endswith((".td", ".md")):
        # TableGen descriptions become docs/reference; Markdown is all prose
        yield from enumerate(text.splitlines(), 1)
    elif path.endswith((".cpp", ".h", ".cu", ".mlir", ".c", ".inc")):
        for n, line in enumerate(text.splitlines(), 1):
            if "//" in line:
                yield n, line[line.index("//"):]
    elif path.endswith((".sh", ".cmake")) or os.path.basename(path) in ("CMakeLists.txt", "run"):
        for n, line in enumerate(text.splitlines(), 1):
            stripped = line.lstrip()
            if stripped.startswith("#"):
                yield n, stripped
            elif " #" in line:
                yield n, line[line.index(" #"):]


def _upstream_roots():
    """Where a cited upstream file may be found: the MLIR wheel's include
    tree (mlir/Pass/Pass.h, LLVMOpBase.td) and the installed package
    (generated files such as _pipeline_ops_gen.py)."""
    roots = []
    try:
        import mlir
        roots += [os.path.join(p, "include") for p in mlir.__path__]
    except ImportError:
        pass
    import pipeline_mlir
    roots.append(os.path.dirname(pipeline_mlir.__file__))
    return roots


def test_comments_and_docs_cite_only_files_in_the_repository():
    files = tracked_files()
    tracked = set(files)
    folders = {os.path.dirname(f) for f in files}
    for f in list(folders):
        while f:
            folders.add(f)
            f = os.path.dirname(f)
    upstream = {}
    for root in _upstream_roots():
        for d, _, names in os.walk(root):
            for name in names:
                upstream.setdefault(name, []).append(os.path.relpath(os.path.join(d, name), root))

    def exists(cited, where):
        c = cited.rstrip("/")
        if not c or c in _ILLUSTRATIVE:
            return True
        candidates = {c, os.path.normpath(os.path.join(os.path.dirname(where), c))}
        if candidates & (tracked | folders):
            return True
        if any(t.endswith("/" + c) for t in tracked | folders):
            return True
        return any(p == c or p.endswith("/" + c) for p in upstream.get(os.path.basename(c), ()))

    found = []
    for f in files:
        path = os.path.join(ROOT, f)
        if not os.path.isfile(path):
            continue
        try:
            with open(path, encoding="utf-8") as fh:
                text = fh.read()
        except UnicodeDecodeError:
            continue
        for n, comment in _comments(f, text):
            for m in _CITED.finditer(comment):
                if not exists(m.group(1), f):
                    found.append(f"{f}:{n}: {m.group(1)!r} in: {comment.strip()[:100]}")
    assert not found, ("comments or docs cite files that are not in this repository (say "
                       "what they say instead, or cite a file here):\n" + "\n".join(found))


def test_relative_markdown_links_resolve():
    """Every relative link of a tracked Markdown file (README, docs/, the
    benchmarks' READMEs) names a tracked file or folder: moving a result or
    a doc must update its links."""
    files = tracked_files()
    present = set(files)
    for f in files:
        d = os.path.dirname(f)
        while d:
            present.add(d)
            d = os.path.dirname(d)
    link = re.compile(r"\]\(([^)\s]+)\)")
    broken = []
    for f in files:
        if not f.endswith(".md"):
            continue
        with open(os.path.join(ROOT, f), encoding="utf-8") as fh:
            for n, line in enumerate(fh, 1):
                for m in link.finditer(line):
                    target = m.group(1).split("#")[0]
                    if not target or re.match(r"[a-z]+:", target):
                        continue   # an anchor in the same file, or a URL
                    path = os.path.normpath(os.path.join(os.path.dirname(f), target))
                    if path not in present:
                        broken.append(f"{f}:{n}: {m.group(1)}")
    assert not broken, "Markdown links to missing files:\n" + "\n".join(broken)


# --- Docs and scripts speak of the project, not of how its GPU runs were made

# Phrases that describe the machinery once used to reach a GPU (the tool
# that lent it, its arguments and output folder, its machine kinds and
# limits) or notes a reader cannot open (work sessions, issue numbers of a
# private tracker, a notes folder beside the checkout), instead of what a
# user does: cross-compile here, copy a bundle directory to a GPU host with
# cuda-bindings and torch, run it there with a results directory given on
# the command line.
_NOT_THE_PROJECT = [
    (r"\bdevice (tool|call|command)s?\b", "the tool that lent a GPU"),
    (r"\bcarr(y|ies)\s*=?\s*`?\[\s*[\"']\.|\bcarry \.\w", "a transfer argument listing folders"),
    (r"(?-i:\$OUT\b)", "the tool's output folder (take --out DIR)"),
    (r"nvidia-h[12]00", "a machine kind (name the GPU: NVIDIA H100 80GB HBM3)"),
    (r"warm machine|\b30[- ]s(econd)? idle", "the lending tool's machine lifetime"),
    (r"\blease[sd]?\b", "a GPU lease"),
    (r"carr(y|ies)[^.\n]*64 MiB|transfer (budget|limit)", "a transfer limit of the lending tool"),
    (r"\.\./shared\b", "notes outside the repository"),
    (r"\b(this|that|next|previous|last|same|later|earlier|work|one) sessions?\b|\bsession's\b",
     "a work session"),
    (r"(?<!upstream )(?<!CUTLASS )\bissue #?\d+\b(?!-)", "an issue of a tracker the reader cannot open"),
    (r"\bthe GPU machine\b", "a particular machine (say: the GPU host)"),
]
_NOT_THE_PROJECT_RE = [(re.compile(p, re.I), why) for p, why in _NOT_THE_PROJECT]


def test_docs_and_scripts_speak_only_of_the_project():
    found = []
    for f in tracked_files():
        # This file names the phrases it looks for.
        if f.endswith((".png", ".cubin")) or f == "test/python/test_hygiene.py":
            continue
        try:
            with open(os.path.join(ROOT, f), encoding="utf-8") as fh:
                lines = fh.read().splitlines()
        except (UnicodeDecodeError, IsADirectoryError, FileNotFoundError):
            continue
        for n, line in enumerate(lines, 1):
            for rx, why in _NOT_THE_PROJECT_RE:
                m = rx.search(line)
                if m:
                    found.append(f"{f}:{n}: {m.group(0)!r} ({why}): {line.strip()[:100]}")
    assert not found, ("docs, scripts and comments must describe the project as a user runs "
                       "it (build here, copy the bundle to a GPU host, run it there with "
                       "--out DIR):\n" + "\n".join(found))


@pytest.mark.parametrize("line", [
    'On the GPU machine (device tool, `carry=[".gpu-bundle"]`):',
    "cd .bench-bundle && python3 run_bench.py --out $OUT",
    "Measured on `nvidia-h100-x1`, the same lease",
    "two calls on the same warm machine",
    "the final code of the next session (issue 12)",
    "sh install.sh: carry .cute-part1",
])
def test_the_phrase_scan_catches(line):
    assert any(rx.search(line) for rx, _ in _NOT_THE_PROJECT_RE)


@pytest.mark.parametrize("line", [
    "cd .bench-bundle && python3 run_bench.py --out results",
    "for i, (state,) in k.range(n, carry=[state]):",
    "a warp issues 16-byte loads; issue 1-CTA commits; CUTLASS issue #2641",
    'mkdir -p "$out"; the pytest session starts',
    "NVIDIA H100 80GB HBM3, 64 MiB in 0.08 ms",
])
def test_the_phrase_scan_leaves_project_text_alone(line):
    assert not any(rx.search(line) for rx, _ in _NOT_THE_PROJECT_RE), line

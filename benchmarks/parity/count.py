"""PTX / SASS instruction counts per verb: ours vs CuTe DSL.

    python3 benchmarks/parity/count.py OURS_DIR CUTE_DIR [--whole DIR] [--json OUT.json]

Each directory holds <kind>.<verb>.ptx (kinds and verbs: cases.py) from
ours_side.py / cute_side.py; --whole DIR holds the whole programs (WHOLE
below: cute_blackwell_gemm.py's and bw_gemm_compare.py --write's PTX). A
verb's cost is its kernel's instruction count minus the "none" baseline of
the same kind (same pipeline, same roles, no verb). PTX instructions are the
statements of the .entry body (directives, labels, braces and comments do
not count; inline-asm bodies do). SASS: each PTX through ptxas
(-arch from its .target) and nvdisasm (from .bench-venv's
nvidia-cuda-nvdisasm wheel when installed), NOPs not counted.
"""
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
from cases import KINDS  # noqa: E402

SYNC = re.compile(r"^(@!?%?\w+\s+)?(mbarrier|elect|tcgen05|fence|bar\.|barrier|cp\.async|mapa"
                  r"|clusterlaunchcontrol)")
# Whole kernels (--whole DIR): the CuTe DSL programs of this folder and ours.
WHOLE = (("Blackwell GEMM, 1 CTA (static scheduler)", "cute_bw_gemm_cta1.ptx",
          "ours_bw_gemm_cta1_static.ptx"),
         ("Blackwell GEMM, 2-CTA pair (static scheduler)", "cute_bw_gemm_cta2.ptx",
          "ours_bw_gemm_cta2_static.ptx"))


def ptx_instructions(text):
    body = text[text.index(".entry"):]
    body = body[body.index("{", body.index(")")) + 1:]
    out = []
    for line in body.splitlines():
        line = line.split("//")[0].strip()
        if not line or line in ("{", "}") or line.endswith(":") or line.startswith("."):
            continue
        out.append(line.rstrip(";").strip())
    return out


def _portable(path):
    """The tool's path relative to the repository when inside it, so the
    JSON that is checked in names no machine-specific directory."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    if path and os.path.abspath(path).startswith(root + os.sep):
        return os.path.relpath(path, root)
    return path


def nvdisasm():
    exe = shutil.which("nvdisasm")
    if exe:
        return exe
    hits = glob.glob(os.path.join(ROOT, ".bench-venv", "lib", "python3.*", "site-packages",
                                  "nvidia", "**", "nvdisasm"), recursive=True)
    return hits[0] if hits else None


def sass_count(ptx_path, tool):
    if not tool:
        return None
    arch = re.search(r"^\.target\s+(\w+)", open(ptx_path).read(), re.M)[1]
    with tempfile.TemporaryDirectory() as d:
        cubin = os.path.join(d, "k.cubin")
        subprocess.run(["ptxas", f"-arch={arch}", "-O3", ptx_path, "-o", cubin], check=True)
        text = subprocess.run([tool, "-c", cubin], check=True, capture_output=True,
                              text=True).stdout
    n = 0
    for line in text.splitlines():
        m = re.match(r"\s*/\*[0-9a-f]{4,}\*/\s+(.*?);", line)
        if m and not m[1].startswith("NOP"):
            n += 1
    return n


def _fmt(x):
    return "-" if x is None else str(x)


def _ratio(a, b):
    return f"{a / b:.2f}" if a is not None and b else "-"


def kind_rows(ours, cute, tool):
    """One row per (kind, verb) of cases.py whose PTX both sides wrote."""
    table, baselines = [], {}
    for kind, (_, verbs) in KINDS.items():
        base = {}
        for side, d in (("ours", ours), ("cute", cute)):
            p = os.path.join(d, f"{kind}.none.ptx")
            if not os.path.exists(p):
                break
            ins = ptx_instructions(open(p).read())
            base[side] = (ins, sass_count(p, tool))
        if len(base) < 2:
            continue
        baselines[kind] = {sd: (len(b[0]), b[1]) for sd, b in base.items()}
        for verb in verbs:
            row = {"kind": kind, "verb": verb}
            paths = {sd: os.path.join(d, f"{kind}.{verb}.ptx")
                     for sd, d in (("ours", ours), ("cute", cute))}
            if not all(os.path.exists(p) for p in paths.values()):
                row["missing"] = [sd for sd, p in paths.items() if not os.path.exists(p)]
                table.append(row)
                continue
            for side, p in paths.items():
                ins = ptx_instructions(open(p).read())
                b_ins, b_sass = base[side]
                row[f"{side}_ptx"] = len(ins) - len(b_ins)
                row[f"{side}_sync"] = (sum(bool(SYNC.match(i)) for i in ins)
                                       - sum(bool(SYNC.match(i)) for i in b_ins))
                sc = sass_count(p, tool)
                row[f"{side}_sass"] = None if sc is None else sc - b_sass
                row[f"{side}_ptx_total"] = len(ins)
                row[f"{side}_sass_total"] = sc
            table.append(row)
    return table, baselines


def whole_rows(d, tool):
    rows = []
    for name, cute_f, ours_f in WHOLE:
        paths = {"ours": os.path.join(d, ours_f), "cute": os.path.join(d, cute_f)}
        if not all(os.path.exists(p) for p in paths.values()):
            continue
        row = {"kernel": name}
        for side, p in paths.items():
            ins = ptx_instructions(open(p).read())
            row[f"{side}_ptx"] = len(ins)
            row[f"{side}_sync"] = sum(bool(SYNC.match(i)) for i in ins)
            row[f"{side}_sass"] = sass_count(p, tool)
        rows.append(row)
    return rows


def main():
    ours, cute = sys.argv[1], sys.argv[2]
    out_json = sys.argv[sys.argv.index("--json") + 1] if "--json" in sys.argv else None
    whole_dir = sys.argv[sys.argv.index("--whole") + 1] if "--whole" in sys.argv else None
    tool = nvdisasm()
    table, baselines = kind_rows(ours, cute, tool)
    print("| verb | kind | ours PTX | CuTe DSL PTX | ratio | ours sync ops | CuTe sync ops "
          "| ours SASS | CuTe SASS | SASS ratio |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in table:
        if "missing" in r:
            print(f"| {r['verb']} | {r['kind']} | no PTX from {', '.join(r['missing'])} "
                  "| | | | | | | |")
            continue
        print(f"| {r['verb']} | {r['kind']} | {r['ours_ptx']} | {r['cute_ptx']} "
              f"| {_ratio(r['ours_ptx'], r['cute_ptx'])} | {r['ours_sync']} | {r['cute_sync']} "
              f"| {_fmt(r['ours_sass'])} | {_fmt(r['cute_sass'])} "
              f"| {_ratio(r['ours_sass'], r['cute_sass'])} |")
    print("\nbaseline kernels (no verb), PTX/SASS instructions, ours vs CuTe DSL: " + "; ".join(
        f"{k}: {b['ours'][0]}/{_fmt(b['ours'][1])} vs {b['cute'][0]}/{_fmt(b['cute'][1])}"
        for k, b in baselines.items()))
    # Whole minimal kernels: the per-verb difference above subtracts each
    # side's own baseline, and the baselines differ, so the totals are the
    # like-for-like comparison.
    print("\nwhole minimal kernels (create + role branches + one verb), PTX / SASS "
          "instructions:\n")
    print("| verb | kind | ours PTX | CuTe DSL PTX | ours SASS | CuTe SASS |")
    print("|---|---|---:|---:|---:|---:|")
    for r in table:
        if "missing" not in r:
            print(f"| {r['verb']} | {r['kind']} | {r['ours_ptx_total']} | {r['cute_ptx_total']} "
                  f"| {_fmt(r['ours_sass_total'])} | {_fmt(r['cute_sass_total'])} |")
    whole = whole_rows(whole_dir, tool) if whole_dir else []
    if whole:
        print("\nwhole programs (the CuTe DSL programs of benchmarks/parity and ours), "
              "static instruction counts:\n")
        print("| kernel | ours PTX | CuTe DSL PTX | ours sync ops | CuTe sync ops "
              "| ours SASS | CuTe SASS | SASS ratio |")
        print("|---|---:|---:|---:|---:|---:|---:|---:|")
        for r in whole:
            print(f"| {r['kernel']} | {r['ours_ptx']} | {r['cute_ptx']} | {r['ours_sync']} "
                  f"| {r['cute_sync']} | {_fmt(r['ours_sass'])} | {_fmt(r['cute_sass'])} "
                  f"| {_ratio(r['ours_sass'], r['cute_sass'])} |")
    if out_json:
        with open(out_json, "w") as f:
            json.dump({"nvdisasm": _portable(tool), "rows": table, "baselines": baselines,
                       "whole": whole}, f, indent=1)


if __name__ == "__main__":
    main()

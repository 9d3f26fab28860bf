"""PTX / SASS instruction counts per verb: ours vs CuTe DSL.

    python3 benchmarks/parity/count.py OURS_DIR CUTE_DIR [--json OUT.json]

Each directory holds <kind>.<verb>.ptx from ours_side.py / cute_side.py. A
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
VERBS = ("producer_acquire", "producer_commit", "consumer_wait", "consumer_release",
         "producer_tail")
KINDS = ("async", "tma_async", "tma_umma")
SYNC = re.compile(r"^(@!?%?\w+\s+)?(mbarrier|elect|tcgen05|fence|bar\.|barrier|cp\.async|mapa)")


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


def main():
    ours, cute = sys.argv[1], sys.argv[2]
    out_json = sys.argv[sys.argv.index("--json") + 1] if "--json" in sys.argv else None
    tool = nvdisasm()
    table = []
    baselines = {}
    for kind in KINDS:
        base = {}
        for side, d in (("ours", ours), ("cute", cute)):
            p = os.path.join(d, f"{kind}.none.ptx")
            base[side] = (ptx_instructions(open(p).read()), sass_count(p, tool))
        baselines[kind] = {sd: (len(b[0]), b[1]) for sd, b in base.items()}
        for verb in VERBS:
            row = {"kind": kind, "verb": verb}
            for side, d in (("ours", ours), ("cute", cute)):
                p = os.path.join(d, f"{kind}.{verb}.ptx")
                ins = ptx_instructions(open(p).read())
                row[f"{side}_ptx"] = len(ins) - len(base[side][0])
                row[f"{side}_sync"] = (sum(bool(SYNC.match(i)) for i in ins)
                                       - sum(bool(SYNC.match(i)) for i in base[side][0]))
                s = sass_count(p, tool)
                row[f"{side}_sass"] = None if s is None else s - base[side][1]
                row[f"{side}_ptx_total"] = len(ins)
                row[f"{side}_sass_total"] = s
            table.append(row)
    print("| verb | kind | ours PTX | CuTe DSL PTX | ratio | ours sync ops | CuTe sync ops "
          "| ours SASS | CuTe SASS | SASS ratio |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in table:
        ratio = r["ours_ptx"] / r["cute_ptx"] if r["cute_ptx"] else float("nan")
        sr = (r["ours_sass"] / r["cute_sass"]
              if r["ours_sass"] is not None and r["cute_sass"] else float("nan"))
        print(f"| {r['verb']} | {r['kind']} | {r['ours_ptx']} | {r['cute_ptx']} | {ratio:.2f} "
              f"| {r['ours_sync']} | {r['cute_sync']} | {r['ours_sass']} | {r['cute_sass']} "
              f"| {sr:.2f} |")
    print("\nbaseline kernels (no verb), PTX/SASS instructions, ours vs CuTe DSL: " + "; ".join(
        f"{k}: {b['ours'][0]}/{b['ours'][1]} vs {b['cute'][0]}/{b['cute'][1]}"
        for k, b in baselines.items()))
    # Whole minimal kernels: the per-verb difference above subtracts each
    # side's own baseline, and the baselines differ (e.g. CuTe DSL's create
    # keeps the shuffled warp index live, ours drops it when no role
    # branch has code), so the totals are the like-for-like comparison.
    print("\nwhole kernels (create + role branches + one verb), PTX / SASS instructions:\n")
    print("| verb | kind | ours PTX | CuTe DSL PTX | ours SASS | CuTe SASS |")
    print("|---|---|---:|---:|---:|---:|")
    for r in table:
        print(f"| {r['verb']} | {r['kind']} | {r['ours_ptx_total']} | {r['cute_ptx_total']} "
              f"| {r['ours_sass_total']} | {r['cute_sass_total']} |")
    if out_json:
        with open(out_json, "w") as f:
            json.dump({"nvdisasm": _portable(tool), "rows": table, "baselines": baselines}, f, indent=1)


if __name__ == "__main__":
    main()

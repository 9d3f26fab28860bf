"""Blackwell GEMM: our PTX against CuTe DSL 4.8.1's, instruction classes and
synchronization order (the table of docs/gemm.md, "Blackwell").

    # 1. CuTe side (in .bench-venv, no GPU):
    .bench-venv/bin/python benchmarks/parity/cute_blackwell_gemm.py OUT
    # 2. ours + the table (in .venv); --write also saves our PTX as
    #    OUT/ours_bw_gemm_cta{1,2}[_static].ptx for count.py --whole OUT:
    .venv/bin/python benchmarks/parity/bw_gemm_compare.py OUT [--write]

Counts are static: instructions in the PTX text of the kernel (a loop body
counts once; a loop the compiler unrolled counts once per copy). The order
lines list, per role, the synchronizing instructions in program order.
"""
import os
import re
import sys
from collections import Counter
from dataclasses import replace

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
CLASSES = [
    ("tcgen05.mma", r"tcgen05\.mma\b"), ("tcgen05.commit", r"tcgen05\.commit"),
    ("tcgen05.ld", r"tcgen05\.ld\b"), ("tcgen05.wait", r"tcgen05\.wait"),
    ("tcgen05.fence", r"tcgen05\.fence"),
    ("tcgen05.alloc/dealloc/relinquish", r"tcgen05\.(alloc|dealloc|relinquish)"),
    ("mbarrier.init", r"mbarrier\.init"), ("mbarrier.try_wait", r"mbarrier\.try_wait"),
    ("mbarrier.arrive (+expect_tx)", r"mbarrier\.arrive"),
    ("cp.async.bulk.tensor (load)", r"cp\.async\.bulk\.tensor\.\dd\.shared"),
    ("cp.async.bulk.tensor (store)", r"cp\.async\.bulk\.tensor\.\dd\.global"),
    ("cp.async.bulk.commit/wait_group", r"cp\.async\.bulk\.(commit|wait)_group"),
    ("fence.proxy.async", r"fence\.proxy\.async"), ("fence.mbarrier_init", r"fence\.mbarrier_init"),
    ("clusterlaunchcontrol", r"clusterlaunchcontrol\."), ("bar.sync / barrier.cluster",
                                                          r"\b(bar\.sync|barrier\.cluster)"),
    ("elect.sync", r"elect\.sync"), ("mapa", r"\bmapa\b"),
]


def instructions(ptx):
    """Opcode lines of the first kernel in ``ptx``."""
    body = ptx[ptx.index(".entry"):]
    out = []
    for line in body.splitlines():
        s = re.sub(r"^\s*(@!?%p\d+\s+)?", "", line)
        if s and s[0].isalpha():
            out.append(s)
    return out


def count(ptx):
    ins = instructions(ptx)
    return Counter({name: sum(1 for i in ins if re.match(pat, i)) for name, pat in CLASSES})


def ours(cfg):
    sys.path.insert(0, os.path.join(ROOT, "examples"))
    import blackwell_gemm
    return blackwell_gemm.build(cfg).to_ptx()


def table(columns):
    names = list(columns)
    rows = ["| class | " + " | ".join(names) + " |", "|---|" + "---:|" * len(names)]
    counts = {n: count(p) for n, p in columns.items()}
    for cls, _ in CLASSES:
        if any(counts[n][cls] for n in names):
            rows.append(f"| `{cls}` | " + " | ".join(str(counts[n][cls]) for n in names) + " |")
    return "\n".join(rows)


def main(cute_dir, write=False):
    sys.path.insert(0, os.path.join(ROOT, "examples"))
    import blackwell_gemm
    base = blackwell_gemm.GemmConfig()
    cols = {}
    for g in (1, 2):
        with open(os.path.join(cute_dir, f"cute_bw_gemm_cta{g}.ptx")) as f:
            cols[f"CuTe DSL cta{g}"] = f.read()
        cols[f"ours static cta{g}"] = ours(replace(base, cta_group=g, scheduler="static"))
        cols[f"ours CLC cta{g}"] = ours(replace(base, cta_group=g))
        if write:
            for col, suffix in ((f"ours static cta{g}", "_static"), (f"ours CLC cta{g}", "")):
                with open(os.path.join(cute_dir, f"ours_bw_gemm_cta{g}{suffix}.ptx"), "w") as f:
                    f.write(cols[col])
    print(table(cols))


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if a != "--write"]
    main(args[0] if args else "parity-out/bw-gemm", write="--write" in sys.argv)

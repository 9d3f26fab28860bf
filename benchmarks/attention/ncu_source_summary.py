#!/usr/bin/env python3
"""Summarize Nsight Compute's source page (``ncu --import R.ncu-rep --page
source --csv --print-source sass > R.csv``): per kernel in the file, the
warp-stall samples (and every other per-instruction counter) summed by
SASS instruction class, and the instructions with the most samples.

    python3 ncu_source_summary.py R.csv [--top 25]

It reads the columns by name where it can and keeps every numeric column
it finds (the set differs between Nsight Compute versions), so the same
script reads ours and FlashAttention-4's exports.
"""

import argparse
import csv
import re
import sys
from collections import defaultdict

# Mnemonics kept to two parts (MUFU.EX2, SYNCS.PHASECHK, BAR.SYNC, ...); the
# rest to one (FFMA, FADD, HGMMA, QGMMA, ...).
TWO_PART = ("MUFU", "SYNCS", "BAR", "WARPGROUP", "F2FP", "SHFL", "LDS", "STS", "LDG", "STG",
            "UTMALDG", "UBLKCP", "FMNMX", "FSETP", "ISETP")


def number(text):
    t = text.replace(",", "").strip()
    if t.endswith("%"):
        t = t[:-1]
    try:
        return float(t)
    except ValueError:
        return None


def mnemonic(sass):
    """The instruction class of a SASS line ('@!P0 MUFU.EX2 R5, R4 ;' -> 'MUFU.EX2')."""
    words = [w for w in sass.strip().split() if not w.startswith("@")]
    if not words:
        return "?"
    parts = words[0].rstrip(";").split(".")
    return ".".join(parts[:2]) if parts[0] in TWO_PART else parts[0]


def blocks(rows):
    """Split the CSV rows into (title, header, data rows) per kernel: a row
    with the columns' names starts a block, rows of another width before it
    are its title."""
    out, title, header, data = [], [], None, []
    for row in rows:
        if not row:
            continue
        if any(c.strip() in ("Source", "Address") for c in row) and \
                sum(number(c) is None for c in row) == len(row):
            if header is not None:
                out.append((" ".join(title), header, data))
                title = []
            header, data = row, []
        elif header is not None and len(row) == len(header):
            data.append(row)
        else:
            if header is not None and data:
                out.append((" ".join(title), header, data))
                header, data, title = None, [], []
            title.append(" ".join(c for c in row if c))
    if header is not None:
        out.append((" ".join(title), header, data))
    return out


def summarize(title, header, data, top, out):
    src = next((i for i, h in enumerate(header) if h.strip() == "Source"), None)
    addr = next((i for i, h in enumerate(header) if h.strip() == "Address"), None)
    if src is None:
        out.write(f"{title}: no Source column in {header}\n")
        return
    numeric = [i for i, h in enumerate(header)
               if i not in (src, addr) and data
               and sum(number(r[i]) is not None for r in data) >= 0.9 * len(data)]
    samples = [i for i in numeric if "sampl" in header[i].lower()]
    key = next((i for i in samples if "all" in header[i].lower()), samples[0] if samples
               else numeric[0] if numeric else None)
    out.write(f"== {title or 'kernel'}: {len(data)} SASS instructions\n")
    out.write("columns: " + " | ".join(h.strip() for h in header) + "\n")
    totals = {i: sum(number(r[i]) or 0.0 for r in data) for i in numeric}
    by_class = defaultdict(lambda: defaultdict(float))
    for r in data:
        m = mnemonic(r[src])
        for i in numeric:
            by_class[m][i] += number(r[i]) or 0.0
    if key is None:
        return
    shown = [key] + [i for i in numeric if i != key and (totals[i] or 0) > 0][:14]
    out.write(f"\nby instruction class, sorted by {header[key].strip()} "
              f"(share of the kernel's total; executed counts as they are)\n")
    out.write(f"{'class':18s}" + "".join(f"{header[i].strip()[:22]:>24s}" for i in shown) + "\n")
    for m, v in sorted(by_class.items(), key=lambda kv: -kv[1][key])[:40]:
        cells = []
        for i in shown:
            if i in samples and totals[i]:
                cells.append(f"{100 * v[i] / totals[i]:23.1f}%")
            else:
                cells.append(f"{v[i]:24.0f}")
        out.write(f"{m:18s}" + "".join(cells) + "\n")
    out.write(f"\ntop {top} instructions by {header[key].strip()}\n")
    for r in sorted(data, key=lambda r: -(number(r[key]) or 0))[:top]:
        share = 100 * (number(r[key]) or 0) / (totals[key] or 1)
        where = r[addr].strip() if addr is not None else ""
        extra = "  ".join(f"{header[i].strip()[:18]}={r[i].strip()}" for i in samples
                          if i != key and (number(r[i]) or 0) > 0)
        out.write(f"{share:5.1f}%  {where:>8s}  {r[src].strip()[:70]:70s}  {extra}\n")
    out.write("\n")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("csv")
    ap.add_argument("--top", type=int, default=25)
    args = ap.parse_args(argv)
    with open(args.csv, newline="") as f:
        rows = [r for r in csv.reader(f) if not (r and r[0].startswith("==PROF=="))]
    found = blocks(rows)
    if not found:
        sys.stdout.write(f"{args.csv}: no source table found\n")
        return 1
    for title, header, data in found:
        summarize(re.sub(r"\s+", " ", title), header, data, args.top, sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())

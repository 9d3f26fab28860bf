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
    # The stall reasons of every sample (ncu's stall_* columns, not the
    # "(Not Issued)" ones), where the export has them, as shares of all the
    # kernel's samples; else every numeric column.
    reasons = [i for i in numeric if header[i].strip().startswith("stall_")
               and "Not Issued" not in header[i] and totals[i] >= 0.01 * (totals[key] or 1)]
    reasons.sort(key=lambda i: -totals[i])
    executed = next((i for i in numeric if header[i].strip() == "Instructions Executed"),
                    None)
    shown = [key] + (reasons or [i for i in numeric if i != key and totals[i]][:14])
    if executed is not None:
        shown.append(executed)
    out.write(f"\nby instruction class: % of all stall samples ({int(totals[key])}), "
              f"by reason; instructions executed\n")
    label = {key: "samples"}
    out.write(f"{'class':18s}" + "".join(
        f"{label.get(i, header[i].strip().replace('stall_', ''))[:11]:>12s}"
        for i in shown) + "\n")
    out.write(f"{'(kernel)':18s}" + "".join(
        f"{100 * totals[i] / (totals[key] or 1):11.1f}%" if i != executed
        else f"{totals[i]:12.3g}" for i in shown) + "\n")
    for m, v in sorted(by_class.items(), key=lambda kv: -kv[1][key])[:30]:
        out.write(f"{m:18s}" + "".join(
            f"{100 * v[i] / (totals[key] or 1):11.1f}%" if i != executed
            else f"{v[i]:12.3g}" for i in shown) + "\n")
    out.write(f"\ntop {top} instructions by {header[key].strip()}\n")
    for r in sorted(data, key=lambda r: -(number(r[key]) or 0))[:top]:
        share = 100 * (number(r[key]) or 0) / (totals[key] or 1)
        where = r[addr].strip() if addr is not None else ""
        extra = " ".join(f"{header[i].strip().replace('stall_', '')}={r[i].strip()}"
                         for i in reasons if (number(r[i]) or 0) > 0)
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

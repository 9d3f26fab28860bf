#!/usr/bin/env python3
"""Each shape with its own candidates, in one process (random_sweep.py per
shape: the pick and cuBLAS in alternating rounds, every output checked and
repeated bitwise; the candidates timed beside them; the contenders' order
rotated every round unless ``--order fixed``):

    python3 shape_variants.py --out results --rounds 3 \\
        6144x176x7680=128x96c2x2,128x96c2n 1048x6504x11408=192x160c2n

Each shape's log and JSON go to ``<--out>/MxNxK/`` and every line is printed, so
one log holds the whole run."""

import argparse
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="results")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--dtype", nargs="+", default=["bf16", "f16"])
    ap.add_argument("--order", choices=["balanced", "fixed"], default="balanced",
                    help="the contenders' order in each round (random_sweep.py --order)")
    ap.add_argument("specs", nargs="+", help="MxNxK=variant,variant (no '=': the pick only)")
    args = ap.parse_args(argv)
    import random_sweep

    for spec in args.specs:
        shape, _, variants = spec.partition("=")
        random_sweep.main(["--out", os.path.join(args.out, shape), "--rounds", str(args.rounds),
                           "--dtype", *args.dtype, "--shapes", shape, "--order", args.order,
                           *(["--variants", *variants.split(",")] if variants else [])])


if __name__ == "__main__":
    sys.exit(main())

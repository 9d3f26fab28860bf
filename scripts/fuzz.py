#!/usr/bin/env python3
"""Seeded mutation fuzzer of ``pipeline-opt`` over the lit corpus.

    python scripts/fuzz.py --mutants 2000 --seed 1 --jobs 2
    python scripts/fuzz.py --mutants 100000 --seed 7 --jobs 2 --report fuzz-out/run.json

Seeds are the ``.mlir`` files under ``test/`` (split at ``// -----``). Each
mutant is one seed with 1-3 mutations (integer literals swapped for boundary
values, identifiers swapped for others of the corpus, lines deleted,
duplicated, swapped or spliced in from another seed, characters dropped) and
goes through the stages

  parse    ``pipeline-opt F``                      (parse + verify)
  checker  ``pipeline-opt F --pipeline-verify-protocol``
  lower    ``pipeline-opt F --pipeline-to-cubin=chip=C format=isa`` (to PTX)
  cubin    the same with ``format=bin`` (ptxas), for a sample

where checker and lower only see what the verifier accepted, and lower only
mutants of seeds that lower when unmutated. Outcomes per stage:

  ok, error    the stage succeeded / rejected the input with a diagnostic
  crash        a signal, an abort, an assertion or "UNREACHABLE" message
  hang         the time limit ran out
  broken       the verifier accepted, the lowering failed (a lowering error
               that is not one of its documented rejections)

Many mutants run in one process (``--split-input-file`` with a marker of our
own), which makes 100,000 mutants affordable; a batch that crashes or hangs
is re-run one mutant at a time to find the culprit. Every process runs under
a memory limit (RLIMIT_AS) and a time limit. Reproducers of crashes, hangs and
broken lowerings are written to ``--out`` (default ``fuzz-out/``). Exits 1
when any crash, hang or broken lowering was found.
"""

from __future__ import annotations

import argparse
import collections
import concurrent.futures
import json
import os
import random
import re
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SPLIT = "// FUZZ-SPLIT"
OUT_SPLIT = "// FUZZ-OUT"
STAGES = ("parse", "checker", "lower", "cubin")
OUTCOMES = ("ok", "error", "crash", "hang", "broken")

# Integers that sit on the limits of the dialect and of the hardware.
INTERESTING_INTS = [0, 1, -1, 2, 3, 7, 8, 9, 16, 17, 31, 32, 33, 64, 127, 128,
                    255, 256, 1023, 1024, 1025, 14528, 14529, 65535, 65536,
                    (1 << 20) - 1, 1 << 20, (1 << 31) - 1, 1 << 31,
                    -(1 << 31), (1 << 32), (1 << 63) - 1, -(1 << 63),
                    1 << 64, 10 ** 30]
# Rejections the lowering documents (its own checks before rewriting).
LOWERING_REJECTIONS = re.compile(
    r"uses tcgen05 and needs sm_100a|known_block_size|known_cluster_size|"
    r"watchdog|reserved|chip|"
    # upstream NVVM ops check the target (a mutant that drops its tcgen05
    # kind but keeps an sm_100 op such as clusterlaunchcontrol)
    r"op is not supported on sm_|"
    # the address-space guard of convert-pipeline-to-nvvm (docs/fuzzing.md)
    r"address space PTX does not have|is not a PTX address space|"
    # ops outside functions, pipelines passed to declarations (the same pass)
    r"is directly in the body of gpu.module|is a declaration taking|"
    r"does not fit the 29 bits|"
    # a global's alignment LLVM cannot hold (the address-space guard's pass)
    r"is not a power of two of at most 2\^32 bytes|"
    # tx_count left out (0) where no copy tells the bytes: pipeline-derive-tx-count
    r"tx_count cannot be derived|production's copies deliver|"
    # a derived tx_count outside 1..1048575 (the mbarrier's per-phase limit)
    r"the copies of one stage deliver")
CRASH_MARKERS = ("Assertion", "UNREACHABLE", "PLEASE submit a bug report",
                 "Stack dump", "LLVM ERROR", "Segmentation fault")
TCGEN05_WORDS = ("umma", "tcgen05", "sm_100", "clc_fetch", "clusterlaunchcontrol")

# Values of #nvvm.target parameters: upstream MLIR and the NVPTX back end
# abort on some (docs/fuzzing.md, NVVMTargetCheck.h), so the fuzzer sets them
# on purpose instead of waiting for a character drop to make "P4".
TARGET_VALUES = {
    "chip": ['""', '"s"', '"sm"', '"sm_"', '"sm_9"', '"P4"', '"abc"', '"sm_x"',
             '"sm_90"', '"sm_90a"', '"sm_91"', '"sm_100a"', '"sm_100f"', '"sm_120a"',
             '"sm_80"', '"sm_20"', '"sm_10"', '"sm_99999999999"', '"compute_90a"',
             '"sm_90a "'],
    "features": ['""', '"+ptx88"', '"+ptx60"', '"-ptx88"', '"+ptx999"', '"+sm_100a"',
                 '"-sm_90a"', '"garbage"', '"+ptx88,+ptx80"', '","'],
    "triple": ['""', '"x"', '"nvptx64-nvidia-cuda"', '"nvptx-nvidia-cuda"',
               '"x86_64-unknown-linux-gnu"', '"amdgcn-amd-amdhsa"'],
    "O": ["-1", "0", "3", "4", "2147483648"],
    "flags": ["{fast}", "{ftz, fast}", '{"ptxas-cmd-options" = 1}',
              '{"ptxas-cmd-options" = ["-v"]}', '{"ptxas-cmd-options" = [1]}'],
    "verifyTarget": ["false", "true"],
}
TARGET_RE = re.compile(r"#nvvm\.target(<[^>]*>)?")
GPU_MODULE_RE = re.compile(r"gpu\.module @[\w.$-]+(?= *(attributes\b|\{))")
INT_RE = re.compile(r"(?<![\w%#@^.\-])-?\d+(?![\w.])")
WORD_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_.]*")


# -- corpus -------------------------------------------------------------------

def load_seeds(root: Path) -> list[str]:
    seeds = []
    for path in sorted(root.glob("test/**/*.mlir")):
        if "Output" in path.parts:
            continue
        for chunk in path.read_text().split("// -----"):
            lines = [ln for ln in chunk.splitlines()
                     if not ln.lstrip().startswith(("// RUN", "// CHECK", "// expected-",
                                                    "// PTX", "// BIN"))]
            text = "\n".join(lines).strip()
            if "pipeline" in text:
                seeds.append(text + "\n")
    return seeds


class Mutator:
    """Seeded text mutations; vocabulary and splice lines come from the corpus."""

    def __init__(self, seeds: list[str], rng: random.Random):
        self.seeds, self.rng = seeds, rng
        words = collections.Counter(w for s in seeds for w in WORD_RE.findall(s))
        self.words = sorted(words)
        self.pipeline_words = sorted(w for w in words if "pipeline" in w or w in (
            "producer", "consumer", "producer_consumer", "thread", "warp", "threadblock",
            "cluster", "simple", "multicast", "stages", "tx_count", "cta_group", "length"))
        self.lines = [ln for s in seeds for ln in s.splitlines() if ln.strip()]

    def with_rng(self, rng: random.Random) -> "Mutator":
        """A copy that draws from ``rng`` (one per batch: batches run in threads)."""
        m = Mutator.__new__(Mutator)
        m.__dict__.update(self.__dict__)
        m.rng = rng
        return m

    def mutate(self, text: str) -> str:
        # Mostly one mutation, mostly of values and keywords: most mutants
        # should get past the parser to reach the verifiers and lowerings.
        for _ in range(self.rng.choice((1, 1, 1, 2, 3))):
            op = self.rng.choices(
                (self.int_swap, self.word_swap, self.line_delete, self.line_dup,
                 self.line_swap, self.splice, self.char_drop, self.nvvm_target),
                weights=(8, 4, 2, 2, 1, 1, 1, 1))[0]
            text = op(text)
        return text

    def int_swap(self, text):
        ms = list(INT_RE.finditer(text))
        if not ms:
            return self.word_swap(text)
        m = self.rng.choice(ms)
        v = (self.rng.choice(INTERESTING_INTS) if self.rng.random() < 0.8
             else int(m.group()) + self.rng.choice((-1, 1)))
        return text[:m.start()] + str(v) + text[m.end():]

    def word_swap(self, text):
        ms = list(WORD_RE.finditer(text))
        if not ms:
            return text
        m = self.rng.choice(ms)
        pool = self.pipeline_words if self.rng.random() < 0.8 else self.words
        return text[:m.start()] + self.rng.choice(pool) + text[m.end():]

    def nvvm_target(self, text):
        """Give a gpu.module an #nvvm.target (or change one it has) with one or
        two parameters from TARGET_VALUES, mostly the chip."""
        params = {}
        for _ in range(self.rng.choice((1, 1, 2))):
            key = ("chip" if self.rng.random() < 0.6
                   else self.rng.choice(sorted(TARGET_VALUES)))
            params[key] = self.rng.choice(TARGET_VALUES[key])
        order = ("O", "triple", "chip", "features", "flags", "verifyTarget")
        target = "#nvvm.target<" + ", ".join(
            f"{k} = {params[k]}" for k in order if k in params) + ">"
        found = list(TARGET_RE.finditer(text))
        if found:
            m = self.rng.choice(found)
            return text[:m.start()] + target + text[m.end():]
        modules = list(GPU_MODULE_RE.finditer(text))
        if not modules:
            return self.word_swap(text)
        m = self.rng.choice(modules)
        return text[:m.end()] + f" [{target}]" + text[m.end():]

    def line_delete(self, text):
        lines = text.splitlines()
        if len(lines) > 1:
            del lines[self.rng.randrange(len(lines))]
        return "\n".join(lines) + "\n"

    def line_dup(self, text):
        lines = text.splitlines()
        if lines:
            i = self.rng.randrange(len(lines))
            lines.insert(i, lines[i])
        return "\n".join(lines) + "\n"

    def line_swap(self, text):
        lines = text.splitlines()
        if len(lines) > 1:
            i = self.rng.randrange(len(lines) - 1)
            lines[i], lines[i + 1] = lines[i + 1], lines[i]
        return "\n".join(lines) + "\n"

    def splice(self, text):
        lines = text.splitlines()
        lines.insert(self.rng.randrange(len(lines) + 1), self.rng.choice(self.lines))
        return "\n".join(lines) + "\n"

    def char_drop(self, text):
        if len(text) < 2:
            return text
        i = self.rng.randrange(len(text) - 1)
        return text[:i] + text[i + self.rng.randint(1, 3):]


def clean(text: str) -> str:
    """A mutant must not contain our split markers (a spliced line could)."""
    return "\n".join(ln for ln in text.splitlines() if "FUZZ-" not in ln) + "\n"


def chip_for(text: str) -> str:
    return "sm_100a" if any(w in text for w in TCGEN05_WORDS) else "sm_90a"


# -- running pipeline-opt ------------------------------------------------------

class Runner:
    def __init__(self, opt: str, mem_mb: int, timeout: float):
        self.opt, self.mem, self.timeout = opt, mem_mb * 1024 * 1024, timeout

    def _limits(self):
        resource.setrlimit(resource.RLIMIT_AS, (self.mem, self.mem))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))

    def run(self, args: list[str], text: str, timeout: float):
        """(returncode or 'hang', stdout, stderr)."""
        try:
            p = subprocess.run([self.opt, "-", *args], input=text, capture_output=True,
                               text=True, timeout=timeout, preexec_fn=self._limits)
        except subprocess.TimeoutExpired:
            return "hang", "", ""
        return p.returncode, p.stdout, p.stderr


def crashed(rc, err: str) -> bool:
    return rc != "hang" and (rc < 0 or rc > 1 or any(m in err for m in CRASH_MARKERS))


def stage_args(stage: str, chip: str) -> list[str]:
    return {"parse": [],
            "checker": ["--pipeline-verify-protocol"],
            # The checker is its own stage: lower what it rejects too.
            "lower": [f"--pipeline-to-cubin=chip={chip} format=isa verify-protocol=false"],
            "cubin": [f"--pipeline-to-cubin=chip={chip} format=bin verify-protocol=false"]}[stage]


def _head_tail(err: str, head: int = 20, tail: int = 20) -> str:
    """The message (first lines) and the innermost frames (last lines)."""
    lines = err.splitlines()
    if len(lines) <= head + tail:
        return err
    return "\n".join(lines[:head] + ["..."] + lines[-tail:])


def classify_one(runner: Runner, stage: str, text: str, chip: str):
    rc, out, err = runner.run(stage_args(stage, chip), text, runner.timeout)
    if rc == "hang":
        return "hang", ""
    if crashed(rc, err):
        return "crash", _head_tail(err)
    if rc == 0:
        return "ok", ""
    if stage in ("lower", "cubin") and not LOWERING_REJECTIONS.search(err):
        return "broken", _head_tail(err)
    return "error", err[-2000:]


def classify_batch(runner: Runner, stage: str, texts: list[str], chip: str,
                   rerun_lowering_errors: bool = True):
    """Outcome (and stderr for bad ones) of each text, in one process when
    nothing crashes or hangs, else one process per text."""
    if len(texts) == 1:
        return [classify_one(runner, stage, texts[0], chip)]
    joined, starts, line = "", [], 1
    for t in texts:
        starts.append(line)
        joined += t + SPLIT + "\n"
        line += t.count("\n") + 1
    args = stage_args(stage, chip) + [f"--split-input-file={SPLIT}",
                                      f"--output-split-marker={OUT_SPLIT}"]
    rc, out, err = runner.run(args, joined, runner.timeout * len(texts))
    if rc == "hang" or crashed(rc, err):
        return [classify_one(runner, stage, t, chip) for t in texts]
    outs = out.split(OUT_SPLIT)
    if len(outs) < len(texts):
        return [classify_one(runner, stage, t, chip) for t in texts]
    # Errors name the line of the joined input: map them to their chunk.
    errs = collections.defaultdict(str)
    for m in re.finditer(r"^<stdin>:(\d+):\d+: error: .*$", err, re.M):
        ln = int(m.group(1))
        idx = max(i for i, s in enumerate(starts) if s <= ln)
        errs[idx] += m.group() + "\n"
    result = []
    for i, t in enumerate(texts):
        if outs[i].strip():
            result.append(("ok", ""))
        elif stage in ("lower", "cubin") and rerun_lowering_errors:
            # Lowering errors can carry no location of the chunk: re-run alone.
            if errs[i] and LOWERING_REJECTIONS.search(errs[i]):
                result.append(("error", errs[i]))
            else:
                result.append(classify_one(runner, stage, t, chip))
        else:
            result.append(("error", errs[i]))
    return result


# -- campaign ------------------------------------------------------------------

def run_campaign(args) -> dict:
    rng = random.Random(args.seed)
    seeds = load_seeds(ROOT)
    mutator = Mutator(seeds, rng)
    runner = Runner(args.opt, args.mem_mb, args.timeout)
    out_dir = Path(args.out)
    counts = {s: collections.Counter() for s in STAGES}
    found = []
    t0 = time.monotonic()

    # Seeds that lower unmutated (per chip): only their mutants are lowered,
    # so that a lowering failure means the mutation broke it.
    lowerable = set()
    for chip in ("sm_90a", "sm_100a"):
        ids = [i for i, s in enumerate(seeds) if chip_for(s) == chip]
        results = classify_batch(runner, "lower", [seeds[i] for i in ids], chip,
                                 rerun_lowering_errors=False)
        lowerable.update(i for i, (o, _) in zip(ids, results) if o == "ok")

    # Most seeds of invalid.mlir-like files do not parse: draw 80% of the
    # mutants from seeds that do, so that most reach the later stages.
    valid = [i for i, (o, _) in enumerate(
        classify_batch(runner, "parse", seeds, "sm_90a")) if o == "ok"]

    def work(batch_seed: int, n: int):
        brng = random.Random(batch_seed)
        mut = mutator.with_rng(brng)
        mutants = []
        for _ in range(n):
            i = (brng.choice(valid) if valid and brng.random() < 0.8
                 else brng.randrange(len(seeds)))
            mutants.append((i, clean(mut.mutate(seeds[i]))))
        local = {s: collections.Counter() for s in STAGES}
        bad = []

        def record(stage, items, results):
            for (i, text), (outcome, err) in zip(items, results):
                local[stage][outcome] += 1
                if outcome in ("crash", "hang", "broken"):
                    bad.append((stage, outcome, text, err))

        parsed = classify_batch(runner, "parse", [t for _, t in mutants], "sm_90a")
        record("parse", mutants, parsed)
        accepted = [m for m, (o, _) in zip(mutants, parsed) if o == "ok"]
        if accepted:
            record("checker", accepted,
                   classify_batch(runner, "checker", [t for _, t in accepted], "sm_90a"))
        for chip in ("sm_90a", "sm_100a"):
            lower = [m for m in accepted if m[0] in lowerable and chip_for(m[1]) == chip]
            if not lower:
                continue
            results = classify_batch(runner, "lower", [t for _, t in lower], chip)
            record("lower", lower, results)
            sample = [m for m, (o, _) in zip(lower, results)
                      if o == "ok" and brng.random() < args.cubin_rate]
            if sample and args.ptxas:
                record("cubin", sample,
                       classify_batch(runner, "cubin", [t for _, t in sample], chip))
        return local, bad

    batches = []
    left = args.mutants
    while left > 0:
        n = min(args.batch, left)
        batches.append((rng.randrange(1 << 30), n))
        left -= n
    done = 0
    with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
        futures = [pool.submit(work, bs, n) for bs, n in batches]
        for f in concurrent.futures.as_completed(futures):
            local, bad = f.result()
            for s in STAGES:
                counts[s].update(local[s])
            for stage, outcome, text, err in bad:  # written as found
                out_dir.mkdir(parents=True, exist_ok=True)
                (out_dir / f"{outcome}-{stage}-{len(found)}.mlir").write_text(
                    text + "\n// " + "\n// ".join(err.splitlines()) + "\n")
                found.append((stage, outcome))
            done += 1
            if args.progress and done % args.progress == 0:
                print(f"fuzz: {done}/{len(batches)} batches, "
                      f"{time.monotonic() - t0:.0f} s", file=sys.stderr, flush=True)
                if args.report:  # a long run that is cut short still reports
                    partial = {"mutants_done": sum(counts["parse"].values()),
                               "seconds": round(time.monotonic() - t0, 1),
                               "counts": {s: dict(counts[s]) for s in STAGES},
                               "bad": len(found)}
                    Path(args.report).write_text(json.dumps(partial, indent=2) + "\n")

    return {"mutants": args.mutants, "seed": args.seed, "seeds": len(seeds),
            "parsing_seeds": len(valid), "lowerable_seeds": len(lowerable),
            "seconds": round(time.monotonic() - t0, 1),
            "counts": {s: dict(counts[s]) for s in STAGES},
            "bad": len(found)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mutants", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--batch", type=int, default=50, help="mutants per process")
    ap.add_argument("--timeout", type=float, default=10.0, help="seconds per mutant")
    ap.add_argument("--mem-mb", type=int, default=2048, help="address-space limit per process")
    ap.add_argument("--cubin-rate", type=float, default=0.02,
                    help="fraction of lowered mutants also assembled by ptxas")
    ap.add_argument("--opt", default=shutil.which("pipeline-opt") or "pipeline-opt")
    ap.add_argument("--out", default="fuzz-out", help="where reproducers go")
    ap.add_argument("--report", help="write the counts as JSON here")
    ap.add_argument("--progress", type=int, default=0, help="print progress every N batches")
    args = ap.parse_args(argv)
    if args.mutants < 1 or args.jobs < 1 or args.batch < 1 or args.timeout <= 0:
        ap.error("--mutants, --jobs, --batch and --timeout must be positive")
    args.ptxas = shutil.which("ptxas") is not None
    report = run_campaign(args)
    text = json.dumps(report, indent=2)
    print(text)
    if args.report:
        Path(args.report).write_text(text + "\n")
    return 1 if report["bad"] else 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Measure the protocol checker as users meet it: single mutations of the
examples and skeleton kernels, each checked statically and simulated.

    .venv/bin/python scripts/mutation_campaign.py [--kernels SUBSTR ...] [--per-kernel N]
        [--seed S] [--jobs 2] [--schedules 30] [--report REPORT.json] [--table TABLE_MD]

Every kernel of the registry (the examples and their variants, the CuTe and
FlashAttention-3 skeletons: ``kernel_registry()``) is built once; its IR is
mutated one way at a time, as a user's slip would change it:

| mutation | what changes |
|---|---|
| drop | one protocol verb (a ``pipeline.*`` op without results: acquire, commit, wait, release, tail, copies, named barriers, order ops; or an NVVM fence, wgmma/tcgen05 sync, setmaxnreg) removed |
| dup | that verb issued twice |
| move-down / move-up | that verb moved past the next (previous) verb of its block |
| drop-advance / dup-advance | a ``pipeline.state.advance`` skipped (its result replaced by its operand) or made twice |
| flip-phase | a ``pipeline.state.make`` starting at the other parity (a start state made explicit with the wrong phase, or an explicit phase xor 1) |
| count+1 / count-1 | a pipeline's producer or consumer arrival count off by one |
| stages+1 / stages-1 | a pipeline's stage count (and its states') off by one |
| tx-1024 | a declared ``tx_count`` 1 KiB short |
| trip-1 | a loop that runs protocol verbs starting at 1 instead of 0 |

Each mutant is classified by the first stage that rejects it:

- **static**: the verifier (a ``pipeline`` op's rule) or ``--pipeline-verify-protocol``;
- **simulator**: ``pipeline-sim`` with ``--schedules`` random schedules (it
  picks small argument values itself);
- **neither**: both accept it (a survivor; the report names each one);
- **invalid**: not a program at all (a move across the definition of a value
  it uses, say: the MLIR verifier rejects it for SSA, not for protocol
  reasons); left out of the fractions.

The unmutated kernels must pass both (a false positive fails the run).
Survivors (mutants that are neither caught nor invalid) are decided by
the rules of ``scripts/mutant_classifier.py``: ``harmless`` (the change is
idempotent or order-free for every barrier and buffer), ``schedule-only``
(it changes only when a warpgroup waits or takes its turn; its own
column, not protocol-breaking), or a survivor the report names.

The report gives, per kernel and in total, the fraction of
protocol-breaking mutants (all but invalid, harmless and schedule-only)
caught statically and by the checker plus the simulator.
"""

import argparse
import json
import os
import random
import re
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

# The survivor rules live beside this script; put it on the path when it
# is loaded by file name (the smoke test) rather than run.
if HERE not in sys.path:
    sys.path.insert(0, HERE)

from mutant_classifier import VERB, _harmless, _schedule_only  # noqa: E402

ADVANCE = re.compile(r"^(\s*)(%[\w#]+) = pipeline\.state\.advance (%[\w#]+)(.*)$")
STATE_MAKE_LINE = re.compile(r"^(\s*)(%[\w#]+) = pipeline\.state\.make\b(.*?): "
                             r"(!?(?:pipeline\.state)?<\d+, (producer|consumer)>)\s*$")
GROUP = re.compile(r"(producer|consumer) = <(thread|warp|warpgroup), (\d+)>")


def kernel_registry():
    """{name: zero-argument function returning the module text}: the same
    kernels the stage-balance test proves clean."""
    for d in (os.path.join(ROOT, "examples"), os.path.join(ROOT, "test", "gpu"),
              os.path.join(ROOT, "test", "python")):
        if d not in sys.path:
            sys.path.insert(0, d)
    import test_stage_balance

    return test_stage_balance._kernels()


def _block_of(lines, i):
    """Indices of the lines of the block holding line ``i`` at its depth
    (no line of smaller indentation in between)."""
    indent = len(lines[i]) - len(lines[i].lstrip())

    def same_block(j):
        return len(lines[j]) - len(lines[j].lstrip()) == indent

    out = [i]
    for step in (-1, 1):
        j = i + step
        while 0 <= j < len(lines):
            ind = len(lines[j]) - len(lines[j].lstrip())
            if ind < indent or lines[j].strip().startswith("}"):
                break
            if same_block(j):
                out.append(j)
            j += step
    return sorted(out)


def mutants(text):
    """[(kind, description, mutated text)] of one module's text."""
    lines = text.split("\n")
    out = []

    def emit(kind, what, new_lines):
        new = "\n".join(new_lines)
        # a move past an identical line changes nothing
        out.append((kind, what + (" (no change)" if new == text else ""), new))

    verbs = [i for i, line in enumerate(lines)
             if VERB.match(line) and not re.match(r"\s*%[\w#:]+(, %[\w#:]+)* = ", line)]
    for i in verbs:
        op = VERB.match(lines[i]).group(2)
        # the pipeline kind the verb acts on (short or full type syntax)
        kind_of = re.search(r": (?:!pipeline\.pipeline)?<(\w+)", lines[i])
        where = f"line {i + 1}: {op}" + (f" <{kind_of.group(1)}>" if kind_of else "")
        twin = any(0 <= j < len(lines) and lines[j] == lines[i] for j in (i - 1, i + 1))
        emit("drop", where + (" (next to its twin)" if twin else ""), lines[:i] + lines[i + 1:])
        emit("dup", where, lines[:i + 1] + [lines[i]] + lines[i + 1:])
        block = [j for j in _block_of(lines, i) if j in set(verbs)]
        pos = block.index(i)
        if pos + 1 < len(block):
            j = block[pos + 1]
            new = lines[:i] + lines[i + 1:j + 1] + [lines[i]] + lines[j + 1:]
            emit("move-down", f"{where} past line {j + 1}", new)
        if pos > 0:
            j = block[pos - 1]
            new = lines[:j] + [lines[i]] + lines[j:i] + lines[i + 1:]
            emit("move-up", f"{where} before line {j + 1}", new)
    for i, line in enumerate(lines):
        m = ADVANCE.match(line)
        if m:
            indent, res, src, rest = m.groups()
            name = re.escape(res) + r"(?![\w#])"
            after = [re.sub(name, src, x) for x in lines[i + 1:]]
            emit("drop-advance", f"line {i + 1}", lines[:i] + after)
            tmp = f"%mut_adv_{i}"
            emit("dup-advance", f"line {i + 1}",
                 lines[:i] + [f"{indent}{tmp} = pipeline.state.advance {src}{rest}",
                              f"{indent}{res} = pipeline.state.advance {tmp}{rest}"]
                 + lines[i + 1:])
        m = STATE_MAKE_LINE.match(line)
        if m:
            indent, res, operands, ty, role = m.groups()
            one = f"%mut_one_{i}"
            if not operands.strip():
                # the role's start state with the other parity
                phase = "0" if role == "producer" else "1"
                new = [f"{indent}{one} = arith.constant {phase} : i32",
                       f"{indent}%mut_zero_{i} = arith.constant 0 : i32",
                       f"{indent}{res} = pipeline.state.make index %mut_zero_{i} phase {one} "
                       f": {ty}"]
            else:
                mp = re.search(r"phase (%[\w#]+)", operands)
                if not mp:
                    continue
                flipped = f"%mut_flip_{i}"
                new = [f"{indent}{one} = arith.constant 1 : i32",
                       f"{indent}{flipped} = arith.xori {mp.group(1)}, {one} : i32",
                       line.replace(f"phase {mp.group(1)}", f"phase {flipped}")]
            emit("flip-phase", f"line {i + 1}: {res} ({role})", lines[:i] + new + lines[i + 1:])
    # pipeline types: counts, stages, tx_count (every occurrence of the type)
    for ptype in sorted(set(re.findall(r"<(?:async|tma_async|tma_umma|umma_async|async_umma|"
                                      r"cp_async|tma_store|clc_fetch_async|order)[^<>]*"
                                      r"(?:<[^<>]*>[^<>]*)*>", text))):
        for m in GROUP.finditer(ptype):
            role, agent, n = m.group(1), m.group(2), int(m.group(3))
            for d in (1, -1):
                if n + d < 1:
                    continue
                new_type = ptype[:m.start()] + f"{role} = <{agent}, {n + d}>" + ptype[m.end():]
                emit(f"count{d:+d}", f"{ptype[:40]}... {role} {n}->{n + d}",
                     text.replace(ptype, new_type).split("\n"))
        ms = re.search(r"stages = (\d+)", ptype)
        if ms and "order" not in ptype[:8]:
            s = int(ms.group(1))
            for d in (1, -1):
                if s + d < 1:
                    continue
                new_type = ptype.replace(f"stages = {s}", f"stages = {s + d}")
                new = text.replace(ptype, new_type)
                new = re.sub(rf"<{s}, (producer|consumer)>", rf"<{s + d}, \1>", new)
                emit(f"stages{d:+d}", f"{ptype[:40]}... stages {s}->{s + d}", new.split("\n"))
        mt = re.search(r"tx_count = (\d+)", ptype)
        if mt and int(mt.group(1)) > 1024:
            t = int(mt.group(1))
            emit("tx-1024", f"{ptype[:40]}... tx_count {t}->{t - 1024}",
                 text.replace(ptype, ptype.replace(f"tx_count = {t}", f"tx_count = {t - 1024}"))
                 .split("\n"))
    # trip counts: a loop with verbs in its body starting at 1
    consts = {m.group(1): (m.group(2), m.group(3)) for m in
              re.finditer(r"(%[\w]+) = arith\.constant (-?\d+) : (\w+)", text)}
    for i, line in enumerate(lines):
        m = re.match(r"^(\s*)(.*scf\.for %[\w]+ = )(%[\w]+)( to .*: )(\w+)( \{)$", line)
        if not m or consts.get(m.group(3), (None,))[0] != "0":
            continue
        end = i + 1
        indent = len(m.group(1))
        while end < len(lines) and (len(lines[end]) - len(lines[end].lstrip()) > indent
                                    or not lines[end].strip()):
            end += 1
        if not any(i < j < end for j in verbs):
            continue
        one = f"%mut_one_{i}"
        new = (lines[:i] + [f"{m.group(1)}{one} = arith.constant 1 : {m.group(5)}",
                            f"{m.group(1)}{m.group(2)}{one}{m.group(4)}{m.group(5)}{m.group(6)}"]
               + lines[i + 1:])
        emit("trip-1", f"line {i + 1}", new)
    return out


def _static(path, opt):
    """('static', message) / ('invalid', message) / (None, '')."""
    env = dict(os.environ)
    p = subprocess.run([opt, path], capture_output=True, text=True, timeout=60, env=env)
    if p.returncode:
        first = next((ln for ln in p.stderr.splitlines() if "error:" in ln), p.stderr[:200])
        # A pipeline op's own rule is the checker at compile time; anything
        # else (dominance, a type that does not match) is not a program.
        if "'pipeline." in first or "pipeline '" in first:
            return "static", first
        return "invalid", first
    p = subprocess.run([opt, path, "--pipeline-verify-protocol"], capture_output=True,
                       text=True, timeout=60, env=env)
    if p.returncode:
        first = next((ln for ln in p.stderr.splitlines() if "error:" in ln), p.stderr[:200])
        return "static", first
    return None, ""


class _Timeout(Exception):
    pass


def _alarm(signum, frame):
    raise _Timeout


# Kernels whose correctness has a precondition on an argument the
# simulator would otherwise choose against: the named-barrier ring waits
# once per stage at the end, so it needs ntiles >= its 3 stages
# (examples/tile_copies.py says so); with ntiles = 1 it deadlocks as it
# would on a GPU.
#
# The attention forward kernel's main loop runs from the second key block:
# with the small seqlen_k the simulator picks it never runs, and no mutant of
# the loop is simulated at all; 384 keys (three blocks) run it twice.
SIM_ARGS = {"gpu builder named_barrier": ["--arg", "2=8"],
            "examples/attention_fwd": ["--arg", "9=384"]}


def _simulate(path, schedules, limit_s, extra=()):
    """('simulator', first line) or (None, '') or ('sim-error', why)."""
    import contextlib
    import io

    from pipeline_mlir.sim import cli

    out = io.StringIO()
    signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(limit_s)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
            rc = cli.main([path, "--schedules", str(schedules), "--max-steps", "100000",
                           *extra])
    except _Timeout:
        return "sim-timeout", f"over {limit_s} s"
    except SystemExit as e:
        rc = e.code
    except Exception as e:  # noqa: BLE001 - a crash of the simulator is reported, not hidden
        return "sim-error", f"{type(e).__name__}: {e}"
    finally:
        signal.alarm(0)
    text = out.getvalue()
    if rc == 0:
        return None, ""
    first = next((ln for ln in text.splitlines() if "deadlock" in ln or "error" in ln
                  or "FAILED" in ln), text[:200])
    if rc == 1:
        return "simulator", first
    return "sim-error", first


def classify(job):
    """One mutant: (kernel, kind, what) -> outcome record."""
    kernel, kind, what, text, opt, schedules = job
    with tempfile.NamedTemporaryFile("w", suffix=".mlir", delete=False) as f:
        f.write(text)
        path = f.name
    try:
        stage, why = _static(path, opt)
        if stage is None:
            stage, why = _simulate(path, schedules, 120, SIM_ARGS.get(kernel, ()))
            stage = stage or ("harmless" if _harmless(kind, what, text) else
                              "schedule-only" if _schedule_only(kind, what, text) else "neither")
    except subprocess.TimeoutExpired:
        stage, why = "static-timeout", "pipeline-opt over 60 s"
    finally:
        os.unlink(path)
    return {"kernel": kernel, "kind": kind, "what": what, "outcome": stage, "why": why[:300]}


def run(names=None, per_kernel=None, seed=1, jobs=2, schedules=30, log=print):
    import multiprocessing as mp

    opt = os.path.join(os.path.dirname(sys.executable), "pipeline-opt")
    registry = kernel_registry()
    if names:
        registry = {k: v for k, v in registry.items() if any(n in k for n in names)}
    rng = random.Random(seed)
    work, baselines = [], []
    for name, build in registry.items():
        text = build()
        if not re.search(r"pipeline\.(create|named_barrier\.)", text):
            continue   # no pipeline (the row kernels): nothing for the checker to decide
        baselines.append((name, "none", "unmutated", text, opt, schedules))
        ms = mutants(text)
        if per_kernel is not None and len(ms) > per_kernel:
            ms = rng.sample(ms, per_kernel)
        work += [(name, kind, what, t, opt, schedules) for kind, what, t in ms]
    log(f"mutation campaign: {len(baselines)} kernels, {len(work)} mutants, {jobs} jobs")
    t0 = time.time()

    def classify_all(map_fn, imap_fn):
        base = list(map_fn(classify, baselines))
        records = []
        for i, r in enumerate(imap_fn(classify, work)):
            records.append(r)
            if (i + 1) % 100 == 0:
                log(f"  {i + 1}/{len(work)} in {time.time() - t0:.0f} s")
        return base, records

    if jobs <= 1:
        # In this process: no fork. A fork of a process that runs other
        # threads (a pytest run's MLIR context, a thread pool) can copy a
        # lock held by one of them and hang its children forever.
        base, records = classify_all(map, map)
    else:
        with mp.get_context("fork").Pool(jobs, maxtasksperchild=50) as pool:
            base, records = classify_all(
                pool.map, lambda fn, xs: pool.imap_unordered(fn, xs, chunksize=4))
    false_positives = [b for b in base
                       if b["outcome"] not in ("neither", "harmless", "schedule-only")]
    return {"records": records, "baselines": base, "false_positives": false_positives,
            "seconds": time.time() - t0, "summary": summarize(records)}


def summarize(records):
    """Totals and per-kernel fractions over protocol-breaking mutants."""
    def tally(rs):
        c = {}
        for r in rs:
            c[r["outcome"]] = c.get(r["outcome"], 0) + 1
        breaking = sum(v for k, v in c.items()
                       if k not in ("invalid", "harmless", "schedule-only"))
        static = c.get("static", 0)
        caught = static + c.get("simulator", 0)
        return {"counts": c, "breaking": breaking,
                "static_pct": 100.0 * static / breaking if breaking else 100.0,
                "caught_pct": 100.0 * caught / breaking if breaking else 100.0}

    per = {}
    for r in records:
        per.setdefault(r["kernel"], []).append(r)
    return {"total": tally(records), "kernels": {k: tally(v) for k, v in sorted(per.items())}}


def table(result):
    s = result["summary"]
    rows = ["| kernel | mutants | invalid | harmless | schedule-only | breaking | static | simulator |"
            " neither | static % | static + sim % |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    for name, t in list(s["kernels"].items()) + [("**total**", s["total"])]:
        c = t["counts"]
        rows.append(f"| {name} | {sum(c.values())} | {c.get('invalid', 0)} | "
                    f"{c.get('harmless', 0)} | {c.get('schedule-only', 0)} | {t['breaking']} | "
                    f"{c.get('static', 0)} | "
                    f"{c.get('simulator', 0)} | {c.get('neither', 0)} | "
                    f"{t['static_pct']:.1f} | {t['caught_pct']:.1f} |")
    return "\n".join(rows)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kernels", nargs="*", help="only kernels whose name contains one of these")
    ap.add_argument("--per-kernel", type=int, help="at most this many mutants per kernel (sampled)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--schedules", type=int, default=30)
    ap.add_argument("--report", help="write the records and summary here (JSON)")
    ap.add_argument("--table", help="write the markdown table here")
    args = ap.parse_args(argv)
    result = run(args.kernels, args.per_kernel, args.seed, args.jobs, args.schedules)
    if args.report:
        with open(args.report, "w") as f:
            json.dump(result, f, indent=1)
    md = table(result)
    if args.table:
        with open(args.table, "w") as f:
            f.write(md + "\n")
    print(md)
    t = result["summary"]["total"]
    print(f"mutation campaign: {sum(t['counts'].values())} mutants, {t['breaking']} protocol-"
          f"breaking, {t['static_pct']:.1f}% caught statically, {t['caught_pct']:.1f}% by checker "
          f"+ simulator, {len(result['false_positives'])} false positives, "
          f"{result['seconds']:.0f} s")
    for fp in result["false_positives"]:
        print(f"FALSE POSITIVE {fp['kernel']}: {fp['outcome']}: {fp['why']}")
    return 1 if result["false_positives"] else 0


if __name__ == "__main__":
    sys.exit(main())

"""Launch each planted hang of the bundle (manifest entries with check
"forensics", built from test/gpu/planted_hangs.py) with the device watchdog
on, print the forensic report, write it under the results folder (DIR),
and check the wait table
against the expected waits, the ledger of the waited barriers against the
expected counts, and the report against the lines it must contain (the
wrong-tx-bytes hang: the barrier, the bytes announced and issued):

    python3 run_forensics.py [--out DIR]        (default: ./forensics-out)

Per kernel: DIR/<name>.txt (the exception message with the report) and
DIR/<name>.json (the child's result, with the whole host buffer in base64,
which runtime.forensics.decode_dump decodes anywhere); DIR/summary.txt.
Each launch runs in a child process (gpu_child.py): the trap leaves the
CUDA context unusable. Exit status 0 when every report shows the expected
waits.
"""

import base64
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from gpu_child import bundle_dir, load_manifest  # noqa: E402
from pipeline_mlir.runtime import forensics  # noqa: E402


def check(entry, out):
    """Problems (strings) of one child's result against the entry's
    expected waits; [] when it shows them."""
    if not out.get("ok"):
        return [f"no forensic report: {out.get('exc')}: {out.get('message', out.get('error'))}"]
    dump = forensics.decode_dump(base64.b64decode(out["buffer_b64"]))
    problems = []
    # The pending arrivals of the report rest on mbarrier.pending_count of
    # the dump's tokens; the scratch barrier's known counts check it here.
    if dump.pending_count_checked is False:
        problems.append("mbarrier.pending_count disagrees with the calibration samples' "
                        "known counts")
    by_warp = {ws.warp: ws for ws in dump.warps}
    for warp, (role, side, stage, phase) in entry["expect_waits"].items():
        ws = by_warp.get(int(warp))
        if ws is None or not ws.waiting:
            problems.append(f"warp {warp}: expected waiting ({role} on {side}[{stage}] phase "
                            f"{phase}), the wait table says {ws}")
            continue
        got = (ws.role_name, forensics._waited_barrier(ws)[0], ws.stage, ws.phase)
        if got != (role, side, stage, phase):
            problems.append(f"warp {warp}: expected {role} {side}[{stage}] phase {phase}, "
                            f"got {got}")
        b = forensics._find_barrier(dump, ws.pipeline_id, side, stage)
        if b is None or not b.created:
            problems.append(f"warp {warp}: {side}[{stage}] is not in the dump")
        elif b.parity != phase:
            # A wait that hangs waits on the phase in progress.
            problems.append(f"warp {warp}: {side}[{stage}] probes say phase parity {b.parity} "
                            f"in progress, the warp waits on {phase}")
    pid = next((ws.pipeline_id for ws in dump.warps if ws.waiting), 0)
    for name, want in entry.get("expect_ledger", {}).items():
        side, stage = name.rstrip("]").split("[")
        b = forensics._find_barrier(dump, pid, side, int(stage))
        got = None if b is None or b.ledger is None else [
            b.ledger.count, b.ledger.arrivals, b.ledger.announced, b.ledger.issued]
        if got != list(want):
            problems.append(f"{name}: expected ledger (count, arrivals, announced, issued) "
                            f"{tuple(want)}, the dump has {tuple(got) if got else None}")
    for line in entry.get("expect_report", []):
        if line not in out.get("message", ""):
            problems.append(f"the report lacks: {line}")
    return problems


def main(argv):
    import argparse

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default="forensics-out", metavar="DIR",
                    help="where the reports go (default: ./forensics-out)")
    out_dir = ap.parse_args(argv[1:]).out
    os.makedirs(out_dir, exist_ok=True)
    manifest = load_manifest()
    entries = [e for e in manifest["kernels"] if e.get("check") == "forensics"]
    if not entries:
        print("no forensics entries in the manifest (build with scripts/build-forensics-bundle.py)")
        return 1
    summary, failed = [], 0
    for e in entries:
        name = e["name"]
        try:
            proc = subprocess.run([sys.executable, os.path.join(bundle_dir(), "gpu_child.py"),
                                   "forensics", name], capture_output=True, text=True,
                                  timeout=120, cwd=bundle_dir())
            lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
            out = json.loads(lines[-1]) if lines else {
                "ok": False, "exc": "no result", "message": proc.stderr[-3000:]}
        except subprocess.TimeoutExpired:
            out = {"ok": False, "exc": "TimeoutExpired", "message": "the child did not exit in 120 s"}
        problems = check(e, out)
        failed += bool(problems)
        text = f"== {name} ==\n{out.get('message', '')}\n"
        with open(os.path.join(out_dir, f"{name}.txt"), "w") as f:
            f.write(text)
        with open(os.path.join(out_dir, f"{name}.json"), "w") as f:
            json.dump(out, f, indent=1)
        verdict = "ok" if not problems else "FAILED: " + "; ".join(problems)
        summary.append(f"{name}: {verdict} ({out.get('seconds', '?')} s)")
        print(text, flush=True)
        print(f"-> {summary[-1]}\n", flush=True)
    with open(os.path.join(out_dir, "summary.txt"), "w") as f:
        f.write("\n".join(summary) + "\n")
    print("\n".join(summary))
    print(f"{len(entries) - failed} of {len(entries)} planted hangs explained as expected")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

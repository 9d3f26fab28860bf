"""The CI smoke run of the mutation fuzzer (scripts/fuzz.py):
about 2,000 mutants of the lit corpus through parse + verify, the protocol
checker, the lowering to PTX and a sample to cubin. Fails on any crash, hang
or verifier-accepted input whose lowering breaks, and names the reproducers.
"""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
MUTANTS = int(os.environ.get("PIPELINE_FUZZ_SMOKE_MUTANTS", "2000"))


@pytest.mark.skipif(shutil.which("pipeline-opt") is None, reason="pipeline-opt not on PATH")
def test_fuzz_smoke(tmp_path):
    out = tmp_path / "repro"
    report = tmp_path / "report.json"
    p = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "fuzz.py"), "--mutants", str(MUTANTS),
         "--seed", "20261124", "--jobs", "2", "--out", str(out), "--report", str(report)],
        capture_output=True, text=True, timeout=600)
    assert report.exists(), p.stderr[-3000:]
    counts = json.loads(report.read_text())["counts"]
    bad = {stage: {o: n for o, n in c.items() if o in ("crash", "hang", "broken")}
           for stage, c in counts.items()}
    repros = sorted(x.name for x in out.glob("*.mlir")) if out.exists() else []
    assert p.returncode == 0 and not any(bad.values()), (bad, repros, p.stdout[-2000:])
    # The run must have exercised every stage, not just the parser.
    assert sum(counts["parse"].values()) == MUTANTS
    assert counts["parse"].get("ok", 0) > MUTANTS // 10
    assert counts["checker"].get("ok", 0) > 0 and counts["lower"].get("ok", 0) > 0

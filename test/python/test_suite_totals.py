"""scripts/suite_totals.py: the total line that ends scripts/test.sh."""

import json
import os
import subprocess
import sys
import textwrap

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPTS = os.path.join(ROOT, "scripts")


def run_total(*specs):
    proc = subprocess.run([sys.executable, os.path.join(SCRIPTS, "suite_totals.py"), "total",
                           *specs], capture_output=True, text=True, check=True)
    return proc.stdout.splitlines()


def test_plugin_counts_every_outcome_like_pytest(tmp_path):
    (tmp_path / "test_x.py").write_text(textwrap.dedent("""
        import pytest

        def test_ok(): pass
        def test_ok2(): pass
        def test_bad(): assert False
        @pytest.mark.skip(reason="r")
        def test_skip(): pass
        @pytest.mark.xfail(reason="known")
        def test_xfail(): assert False
        @pytest.fixture
        def broken(): raise RuntimeError
        def test_error(broken): pass
    """))
    out = tmp_path / "counts.json"
    env = dict(os.environ, PIPELINE_TEST_COUNTS=str(out),
               PYTHONPATH=SCRIPTS + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "suite_totals",
                           "-p", "no:cacheprovider", str(tmp_path)],
                          env=env, capture_output=True, text=True, cwd=tmp_path)
    assert proc.returncode == 1
    assert "1 failed, 2 passed, 1 skipped, 1 xfailed, 1 error" in proc.stdout
    data = json.loads(out.read_text())
    assert data["raw"] == {"passed": 2, "failed": 1, "skipped": 1, "xfailed": 1, "error": 1}
    lines = run_total(f"pytest x={out}:1")
    assert lines == ["pytest x: 3 passed, 2 failed, 1 skipped (1 xfailed; 1 error)",
                     "3 passed, 2 failed, 1 skipped"]


def test_plugin_is_silent_without_the_variable(tmp_path):
    (tmp_path / "test_y.py").write_text("def test_ok(): pass\n")
    env = {k: v for k, v in os.environ.items() if k != "PIPELINE_TEST_COUNTS"}
    env["PYTHONPATH"] = SCRIPTS
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "suite_totals",
                           "-p", "no:cacheprovider", str(tmp_path)],
                          env=env, capture_output=True, text=True, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout
    assert not [f for f in os.listdir(tmp_path) if f.endswith(".json")]


def test_total_sums_lit_and_pytest_and_ends_with_the_total(tmp_path):
    lit = tmp_path / "lit.json"
    lit.write_text(json.dumps({"tests": [{"code": c} for c in
                                         ["PASS"] * 40 + ["XFAIL", "UNSUPPORTED", "FAIL"]]}))
    py = tmp_path / "py.json"
    py.write_text(json.dumps({"raw": {"passed": 270, "skipped": 5}, "exitstatus": 0}))
    gpu = tmp_path / "gpu.json"
    gpu.write_text(json.dumps({"raw": {"skipped": 11}, "exitstatus": 0}))
    lines = run_total(f"lit={lit}:1", f"pytest test/python={py}:0", f"pytest test/gpu={gpu}:0")
    assert lines == [
        "lit: 41 passed, 1 failed, 1 skipped (1 XFAIL)",
        "pytest test/python: 270 passed, 0 failed, 5 skipped",
        "pytest test/gpu: 0 passed, 0 failed, 11 skipped",
        "311 passed, 1 failed, 17 skipped",
    ]


def test_a_suite_that_failed_without_counts_is_one_failure(tmp_path):
    py = tmp_path / "py.json"
    py.write_text(json.dumps({"raw": {}, "exitstatus": 5}))
    lines = run_total(f"pytest a={py}:5", f"pytest b={tmp_path / 'missing.json'}:2")
    assert lines[0] == ("pytest a: 0 passed, 1 failed, 0 skipped (exit status 5 without a "
                        "failed test: counted as 1 failed)")
    assert lines[1].startswith("pytest b: 0 passed, 1 failed, 0 skipped (no counts")
    assert lines[-1] == "0 passed, 2 failed, 0 skipped"

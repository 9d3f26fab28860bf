"""Test counts for scripts/test.sh: one total over lit and the pytest sessions.

Two roles in one file:

- a pytest plugin (``python -m pytest -p suite_totals``, with this directory
  on PYTHONPATH): at the end of the session it writes the outcome counts
  of pytest's terminal summary to ``$PIPELINE_TEST_COUNTS`` (JSON), or does
  nothing when that variable is unset;
- the summary (``python scripts/suite_totals.py total lit=FILE:RC
  pytest...=FILE:RC ...``): one line per suite, then the total alone on the
  last line, ``N passed, M failed, K skipped``.

How outcomes are counted:
  passed   pytest passed, xfailed (expected failure) and xpassed (non-strict);
           lit PASS, XFAIL, FLAKYPASS
  failed   pytest failed and error; lit FAIL, XPASS, UNRESOLVED, TIMEOUT
  skipped  pytest skipped; lit UNSUPPORTED, SKIPPED
A suite that exited non-zero without a failed test (it crashed, collected
nothing, or wrote no counts) is counted as one failed test, so the total
never reads as clean when the exit status is not.
"""

import json
import os
import sys

ENV = "PIPELINE_TEST_COUNTS"

PYTEST = {"passed": "passed", "xfailed": "passed", "xpassed": "passed",
          "failed": "failed", "error": "failed", "skipped": "skipped"}
LIT = {"PASS": "passed", "XFAIL": "passed", "FLAKYPASS": "passed",
       "FAIL": "failed", "XPASS": "failed", "UNRESOLVED": "failed", "TIMEOUT": "failed",
       "UNSUPPORTED": "skipped", "SKIPPED": "skipped"}


# -- pytest plugin ------------------------------------------------------------

def pytest_terminal_summary(terminalreporter, exitstatus, config):
    path = os.environ.get(ENV)
    if not path:
        return
    # the same count as pytest's own summary line ("270 passed, 5 skipped")
    raw = {key: len([r for r in terminalreporter.stats.get(key, [])
                     if getattr(r, "count_towards_summary", True)])
           for key in PYTEST}
    raw = {k: n for k, n in raw.items() if n}
    with open(path, "w") as f:
        json.dump({"raw": raw, "exitstatus": int(exitstatus)}, f)


# -- summary ------------------------------------------------------------------

def _empty():
    return {"passed": 0, "failed": 0, "skipped": 0}


def from_pytest(path):
    with open(path) as f:
        data = json.load(f)
    counts = _empty()
    for key, n in data["raw"].items():
        counts[PYTEST[key]] += n
    notes = [f"{data['raw'][k]} {k}" for k in ("xfailed", "xpassed", "error")
             if data["raw"].get(k)]
    return counts, notes


def from_lit(path):
    with open(path) as f:
        data = json.load(f)
    counts, seen = _empty(), {}
    for test in data.get("tests", []):
        code = test["code"]
        if code in LIT:
            counts[LIT[code]] += 1
            seen[code] = seen.get(code, 0) + 1
    notes = [f"{seen[k]} {k}" for k in ("XFAIL", "XPASS", "UNRESOLVED", "TIMEOUT", "FLAKYPASS")
             if seen.get(k)]
    return counts, notes


def line(c):
    return f"{c['passed']} passed, {c['failed']} failed, {c['skipped']} skipped"


def total(specs):
    """specs: ['label=FILE:RC', ...] (label 'lit...' reads lit's JSON, any
    other pytest's). Prints the per-suite lines and the total; returns it."""
    grand = _empty()
    for spec in specs:
        label, _, rest = spec.partition("=")
        path, _, rc = rest.rpartition(":")
        rc = int(rc)
        reader = from_lit if label.startswith("lit") else from_pytest
        try:
            counts, notes = reader(path)
        except (OSError, ValueError, KeyError) as err:
            counts, notes = _empty(), [f"no counts ({type(err).__name__})"]
        if rc != 0 and counts["failed"] == 0:
            counts["failed"] = 1
            notes.append(f"exit status {rc} without a failed test: counted as 1 failed")
        for k in grand:
            grand[k] += counts[k]
        extra = f" ({'; '.join(notes)})" if notes else ""
        print(f"{label}: {line(counts)}{extra}")
    print(line(grand))
    return grand


if __name__ == "__main__":
    if len(sys.argv) < 2 or sys.argv[1] != "total":
        sys.exit("usage: suite_totals.py total LABEL=FILE:RC ...")
    total(sys.argv[2:])

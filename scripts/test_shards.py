"""Run one pytest suite as N concurrent shards of whole test files.

scripts/test.sh runs ``test/python`` as one pytest process per core (at
most 4, or ``PIPELINE_TEST_JOBS``), so a 2-core machine runs the suite in a
little over half the time. This pytest
plugin (``python -m pytest -p test_shards``, with this directory on
PYTHONPATH) decides which files a process collects:

- ``PIPELINE_TEST_SHARD=I/N`` (1-based): collect only the test files of
  shard I of N; unset, collect everything (the plugin does nothing).
- Files are dealt longest first to the shard with the least time so far,
  by the seconds each file took in a measured run
  (``test/python/test_durations.json``); a file the table does not know
  counts as the table's median, so a new file lands somewhere and is run.
  Every file goes to exactly one shard whatever the table says: a stale
  table makes the shards uneven, never skips a test.
- ``PIPELINE_TEST_DURATIONS_OUT=FILE``: at the end of the session merge
  the seconds each file took (setup + call + teardown of its tests) into
  FILE, the table's format (the shards of one run each add theirs). Refresh
  the table from a run of scripts/test.sh with the variable set, or:
  ``PYTHONPATH=scripts PIPELINE_TEST_DURATIONS_OUT=test/python/test_durations.json
  python -m pytest -q -p test_shards test/python``.

Whole files, not single tests, so module-scoped fixtures (a kernel built
once per file) are built once.
"""

import json
import os
from pathlib import Path

SHARD_ENV = "PIPELINE_TEST_SHARD"
OUT_ENV = "PIPELINE_TEST_DURATIONS_OUT"
TABLE = Path(__file__).resolve().parent.parent / "test" / "python" / "test_durations.json"


def parse_shard(text):
    """'I/N' -> (I, N), 1 <= I <= N; anything else is a clear error."""
    try:
        index, count = (int(part) for part in text.split("/"))
    except ValueError:
        raise ValueError(f"{SHARD_ENV}={text!r}: expected I/N, e.g. 1/2") from None
    if not 1 <= index <= count:
        raise ValueError(f"{SHARD_ENV}={text!r}: I must be in 1..N")
    return index, count


def assign(files, seconds, count):
    """Deal `files` (names) to `count` shards, longest first to the least
    loaded; returns {name: shard index (1-based)}. Deterministic: ties go
    to the lower shard, equal times in name order."""
    known = sorted(seconds[f] for f in files if f in seconds)
    default = known[len(known) // 2] if known else 1.0
    weight = {f: seconds.get(f, default) for f in files}
    load = [0.0] * count
    shard_of = {}
    for name in sorted(files, key=lambda f: (-weight[f], f)):
        lightest = min(range(count), key=lambda s: (load[s], s))
        shard_of[name] = lightest + 1
        load[lightest] += weight[name]
    return shard_of


def _load_table():
    try:
        with open(TABLE) as f:
            return {k: float(v) for k, v in json.load(f).items()}
    except (OSError, ValueError):
        return {}


def pytest_configure(config):
    text = os.environ.get(SHARD_ENV)
    config._shard = None
    if text:
        index, count = parse_shard(text)
        config._shard = (index, count, {})


def _shard_of(config, path):
    index, count, memo = config._shard
    folder = path.parent
    if folder not in memo:
        files = sorted(p.name for p in folder.glob("test_*.py"))
        memo[folder] = assign(files, _load_table(), count)
    return memo[folder].get(path.name, 1)


def pytest_ignore_collect(collection_path, config):
    if config._shard is None:
        return None
    path = Path(collection_path)
    if path.is_file() and path.name.startswith("test_") and path.suffix == ".py":
        if _shard_of(config, path) != config._shard[0]:
            return True
    return None


_SECONDS = {}  # file name -> seconds of its tests' setup, call and teardown


def pytest_runtest_logreport(report):
    name = report.nodeid.split("::", 1)[0].rsplit("/", 1)[-1]
    _SECONDS[name] = _SECONDS.get(name, 0.0) + report.duration


def pytest_sessionfinish(session, exitstatus):
    out = os.environ.get(OUT_ENV)
    if not (out and _SECONDS):
        return
    # Merged into what FILE holds, under a lock, so the shards of one run
    # (each its own process) together write every file's time.
    import fcntl

    with open(out, "a+") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        f.seek(0)
        try:
            table = json.loads(f.read() or "{}")
        except ValueError:
            table = {}
        table.update({k: round(v, 1) for k, v in _SECONDS.items()})
        f.seek(0)
        f.truncate()
        json.dump(dict(sorted(table.items())), f, indent=0)
        f.write("\n")

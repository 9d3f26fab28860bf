"""scripts/test_shards.py: how scripts/test.sh deals test files to shards."""

import importlib.util
from pathlib import Path

import pytest

_ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("test_shards", _ROOT / "scripts" / "test_shards.py")
shards = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(shards)


def test_every_file_lands_in_exactly_one_shard_even_with_a_stale_table():
    files = [f"test_{i}.py" for i in range(40)]
    seconds = {f"test_{i}.py": float(i) for i in range(0, 40, 3)}  # a third known
    seconds["test_gone.py"] = 500.0  # a file that no longer exists
    for count in (1, 2, 3, 4):
        shard_of = shards.assign(files, seconds, count)
        assert sorted(shard_of) == sorted(files)
        assert set(shard_of.values()) <= set(range(1, count + 1))


def test_longest_first_keeps_shards_within_one_file_of_each_other():
    seconds = {"test_a.py": 300.0, "test_b.py": 200.0, "test_c.py": 120.0,
               "test_d.py": 90.0, "test_e.py": 60.0, "test_f.py": 30.0}
    shard_of = shards.assign(list(seconds), seconds, 2)
    load = {1: 0.0, 2: 0.0}
    for name, shard in shard_of.items():
        load[shard] += seconds[name]
    assert load == {1: 390.0, 2: 410.0}
    # a greedy deal of an unsorted list would put a and b together
    assert shard_of["test_a.py"] != shard_of["test_b.py"]


def test_an_unknown_file_counts_as_the_median():
    seconds = {"test_a.py": 10.0, "test_b.py": 20.0, "test_c.py": 30.0}
    shard_of = shards.assign(["test_a.py", "test_b.py", "test_c.py", "test_new.py"], seconds, 2)
    # c (30) | b (20), then new as the median (20) | a (10): 40 and 40
    load = {1: 0.0, 2: 0.0}
    for name, shard in shard_of.items():
        load[shard] += seconds.get(name, 20.0)
    assert load == {1: 40.0, 2: 40.0}
    assert shard_of["test_new.py"] == 2


@pytest.mark.parametrize("text", ["2", "0/2", "3/2", "a/b", "1/2/3"])
def test_a_malformed_shard_is_a_clear_error(text):
    with pytest.raises(ValueError, match="PIPELINE_TEST_SHARD"):
        shards.parse_shard(text)



def test_the_shards_of_one_run_merge_their_times_into_one_table(tmp_path, monkeypatch):
    out = tmp_path / "durations.json"
    monkeypatch.setenv(shards.OUT_ENV, str(out))
    monkeypatch.setattr(shards, "_SECONDS", {"test_a.py": 3.0, "test_b.py": 1.25})
    shards.pytest_sessionfinish(None, 0)
    monkeypatch.setattr(shards, "_SECONDS", {"test_c.py": 7.0, "test_b.py": 2.0})
    shards.pytest_sessionfinish(None, 0)
    import json
    assert json.loads(out.read_text()) == {"test_a.py": 3.0, "test_b.py": 2.0, "test_c.py": 7.0}

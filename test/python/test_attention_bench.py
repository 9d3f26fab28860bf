"""The attention benchmark's parts that need no GPU: the FLOP count and the
ratios of benchmarks/attention/run_attention.py, and the peers' transport
(scripts/build-attention-transport.py) on stand-in wheels: it ships a
complete set and refuses one whose requirements the GPU host cannot meet.
Timing and checking against fp32 SDPA run on a GPU host
(benchmarks/attention/README.md)."""

import importlib.util
import os
import subprocess
import sys
import zipfile

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def load(path, name):
    spec = importlib.util.spec_from_file_location(name, os.path.join(REPO, path))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


run_attention = load("benchmarks/attention/run_attention.py", "run_attention")
transport = load("scripts/build-attention-transport.py", "build_attention_transport")


def test_flops_count_two_gemms_and_causal_halves():
    assert run_attention.flops(4, 16, 4096, 128, False) == 4 * 4 * 16 * 4096 * 4096 * 128
    assert run_attention.flops(4, 16, 4096, 128, True) * 2 == run_attention.flops(
        4, 16, 4096, 128, False)


def test_summary_gives_tflops_and_ratios_over_rounds():
    # ours 1.0 ms, fa4 1.1 ms, cudnn 0.9 ms in every round but one outlier.
    times = {"ours": [1.0, 1.0, 1.0], "fa4": [1.1, 1.1, 3.0], "cudnn": [0.9, 0.9, 0.9]}
    r = run_attention.summarize((1, 1, 1000, 64), False, times)
    assert r["tflops"]["ours"] == pytest.approx(4 * 1000 * 1000 * 64 / 1e-3 / 1e12)
    assert r["ours_over"]["fa4"] == pytest.approx(1.1)  # the median round, not the outlier
    assert r["ours_over"]["cudnn"] == pytest.approx(0.9)
    line = run_attention.format_row(r, ["ours", "fa4", "cudnn"])
    assert line.startswith("1,1,1000,64 full") and line.endswith("1.100x | 0.900x")


def test_the_rows_are_the_issues():
    assert run_attention.ROWS == [(4, 16, 4096, 128), (2, 16, 8192, 128), (4, 32, 4096, 64),
                                  (4, 8, 4096, 256)]


def test_unknown_contender_is_refused(capsys):
    with pytest.raises(SystemExit):
        run_attention.main(["--out", "/tmp/x", "--only", "ours,triton"])
    assert "unknown contender(s) ['triton']" in capsys.readouterr().err


def wheel(folder, name, version, requires=()):
    dist = f"{name.replace('-', '_')}-{version}"
    path = os.path.join(folder, f"{dist}-py3-none-any.whl")
    meta = "".join([f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n",
                    *(f"Requires-Dist: {r}\n" for r in requires), "\nlong description\n"])
    with zipfile.ZipFile(path, "w") as z:
        z.writestr(f"{dist}.dist-info/METADATA", meta)
    return path


def stand_ins(folder, quack_needs="nvidia-cutlass-dsl>=4.7"):
    wheel(folder, "flash-attn-4", "4.0.0b36", [
        "nvidia-cutlass-dsl>=4.6.2", "torch", "einops", "typing_extensions",
        "apache-tvm-ffi<0.2,>=0.1.11", "torch-c-dlpack-ext", "quack-kernels>=0.5.3",
        'pytest; extra == "dev"'])
    wheel(folder, "quack-kernels", "0.6.5", [quack_needs, "apache-tvm-ffi<0.2"])
    wheel(folder, "apache-tvm-ffi", "0.1.15.post2", ["typing-extensions>=4.13"])
    wheel(folder, "torch-c-dlpack-ext", "0.1.5", ["torch"])
    wheel(folder, "einops", "0.8.2")


def test_transport_ships_a_complete_set(tmp_path):
    whl, out = tmp_path / "whl", tmp_path / "out"
    whl.mkdir()
    out.mkdir()
    stand_ins(str(whl))
    assert transport.main(["--whl", str(whl), "--out", str(out)]) == 0
    folder = out / ".attention-peers"
    shipped = sorted(p.name for p in folder.iterdir())
    assert shipped == sorted([*os.listdir(whl), "SHA256SUMS", "install.sh"])
    sums = (folder / "SHA256SUMS").read_text().splitlines()
    assert len(sums) == 5 and all(len(line.split()[0]) == 64 for line in sums)
    # .attention-peers/install.sh refuses a copy whose checksums do not match.
    victim = next(folder.glob("einops-*.whl"))
    victim.write_bytes(victim.read_bytes() + b"x")
    run = subprocess.run(["sh", str(folder / "install.sh"), str(tmp_path / "site")],
                         capture_output=True, text=True, env={**os.environ, "PYTHON": sys.executable})
    assert run.returncode != 0 and "checksum mismatch" in run.stderr and "einops" in run.stderr


def test_transport_refuses_unmet_requirements(tmp_path, capsys):
    whl = tmp_path / "whl"
    whl.mkdir()
    stand_ins(str(whl), quack_needs="nvidia-cutlass-dsl>=4.9")  # the host has 4.8.1
    assert transport.main(["--whl", str(whl), "--out", str(tmp_path)]) == 1
    assert ("quack-kernels: nvidia-cutlass-dsl>=4.9 (have 4.8.1)"
            in capsys.readouterr().err)
    assert not (tmp_path / ".attention-peers").exists()


def test_transport_refuses_a_missing_pin(tmp_path):
    whl = tmp_path / "whl"
    whl.mkdir()
    stand_ins(str(whl))
    os.remove(next(p for p in whl.iterdir() if p.name.startswith("flash_attn_4")))
    wheel(str(whl), "flash-attn-4", "4.0.0b35")
    with pytest.raises(SystemExit, match=r"no wheel of \['flash-attn-4'\]"):
        transport.main(["--whl", str(whl), "--out", str(tmp_path)])


run_grid = load("benchmarks/attention/run_attention_grid.py", "run_attention_grid")


def test_the_grid_covers_gqa_ratios_lengths_head_dims_and_masks():
    rows = run_grid.ROWS
    assert {h // hk for _, _, _, h, hk, _, _ in rows} >= {1, 4, 8}
    assert {d for *_, d, _ in rows} >= {64, 128, 256}
    lengths = {sq for _, sq, *_ in rows}
    assert min(lengths) == 512 and max(lengths) >= 8192
    assert any(sq != sk for _, sq, sk, *_ in rows)
    assert {m for *_, modes in rows for m in modes} == {"full", "causal"}
    # SDPA's causal mask is top-left aligned: causal rows are square.
    assert all(sq == sk for _, sq, sk, *_, modes in rows if "causal" in modes)


def test_grid_flops_count_the_visible_pairs():
    assert run_grid.flops(1, 4, 4, 1, 64, False) == 4 * 16 * 64
    assert run_grid.flops(1, 4, 4, 1, 64, True) == 4 * (1 + 2 + 3 + 4) * 64
    assert run_grid.flops(1, 2, 4, 1, 64, True) == 4 * (3 + 4) * 64    # bottom-right


def test_grid_candidates_start_with_the_pick_and_run_the_row():
    from pipeline_mlir.ops import attention_configs as configs

    metas = {n: dict(head_dim=o["head_dim"], causal=o["causal"],
                     pack_gqa=o.get("pack_gqa", 0)) for n, o in configs.VARIANTS.items()}
    metas["d128c_short"] = dict(head_dim=128, causal=True)           # an extra candidate
    cands = run_grid.candidates(configs, 128, True, 2, 32, 4, 4096, 4096, 132, metas)
    assert cands[0] == ("ours", "d128c_gqa8")
    assert [n for _, n in cands[1:]] == ["d128c", "d128c_bn64", "d128c_short"]
    # One head per tile: nothing packed; d 256 has one configuration per mask.
    assert [n for _, n in run_grid.candidates(configs, 256, False, 4, 8, 8, 2048, 2048,
                                               132, metas)] == ["d256"]


def test_grid_samples_the_first_middle_and_last_rows():
    assert run_grid.sample_rows(300) == list(range(300))
    rows = run_grid.sample_rows(4096)
    s = run_grid.SAMPLE
    assert rows[:s] == list(range(s)) and rows[-s:] == list(range(4096 - s, 4096))
    assert len(rows) == 3 * s == len(set(rows))

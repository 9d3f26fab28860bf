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

"""Deviceless: what ``pipeline_mlir.gemm`` (ops/gemm.py) decides before a
launch, on a stand-in torch module: the variant and cache entry of each
epilogue (its JSON form in the overrides, compiled on demand through
kernel_cache.get), the extra arguments passed by name, the plain call's
path untouched, every argument check with its message, and the custom
ops' fake implementations. The launches: test/gpu/test_gpu_launch.py
(test_gemm_fused_epilogue_matches_torch and the tests after it)."""

import importlib
import sys
import types

import pytest

import pipeline_mlir.ops as ops_package
from pipeline_mlir.ops import gemm_configs
from pipeline_mlir.ops.epilogues import Epilogue


class Dtype:
    def __init__(self, name):
        self.name = name

    def __repr__(self):
        return f"torch.{self.name}"


BF16, F16, F32 = Dtype("bfloat16"), Dtype("float16"), Dtype("float32")


class Device:
    type = "cuda"

    def __init__(self, index=0):
        self.index = index

    def __eq__(self, other):
        return isinstance(other, Device) and other.index == self.index

    def __hash__(self):
        return hash(self.index)

    def __repr__(self):
        return f"cuda:{self.index}"


class Tensor:
    """The attributes of a CUDA tensor that gemm reads."""

    def __init__(self, shape, dtype=BF16, contiguous=True, index=0):
        self.shape, self.dtype, self.contiguous = tuple(shape), dtype, contiguous
        self.device, self.is_cuda = Device(index), True

    def dim(self):
        return len(self.shape)

    def get_device(self):
        return self.device.index

    def is_contiguous(self):
        return self.contiguous

    def new_empty(self, *shape):
        return Tensor(shape, self.dtype)


class CustomOp:
    def __init__(self, fn):
        self.fn, self.fake = fn, None

    def register_fake(self, fn):
        self.fake = fn
        return fn


def _check(cond, message):
    if not cond:
        raise RuntimeError(message())


class FakeGemm:
    """Stands for a loaded HopperGemm: its extra parameter names from the
    meta, and the launches asked of it."""

    def __init__(self, meta, device):
        self.meta, self.device = meta, device
        self.extra_names = tuple(meta["extra"])
        self.launches = []

    def launch(self, a, b, out, extra, stream, sync):
        self.launches.append((a, b, out, extra))
        return out


@pytest.fixture
def op(monkeypatch):
    """ops.gemm imported on the stand-in torch; (module, cache requests)."""
    torch = types.SimpleNamespace(
        Tensor=Tensor, bfloat16=BF16, float16=F16, float32=F32, _check=_check,
        compiler=types.SimpleNamespace(is_compiling=lambda: False),
        library=types.SimpleNamespace(
            custom_op=lambda name, mutates_args: CustomOp))
    monkeypatch.setitem(sys.modules, "torch", torch)
    monkeypatch.delitem(sys.modules, "pipeline_mlir.ops.gemm", raising=False)
    # the package attribute the import sets: put back afterwards, too
    monkeypatch.setattr(ops_package, "gemm", None, raising=False)
    mod = importlib.import_module("pipeline_mlir.ops.gemm")
    monkeypatch.delitem(sys.modules, "pipeline_mlir.ops.gemm")   # next import: real torch
    device = types.SimpleNamespace(ordinal=0, cc=(9, 0), name="H100", sm="sm_90",
                                   limits=types.SimpleNamespace(multiprocessors=132))
    monkeypatch.setattr(mod.runtime, "default_device", lambda ordinal=0: device)
    requests = []

    def get(name, overrides, dtype, chip):
        requests.append((name, overrides, dtype, chip))
        epi = Epilogue.from_json(overrides.get("epilogue", {}))
        return b"cubin", {"extra": epi.param_names()}

    monkeypatch.setattr(mod.kernel_cache, "get", get)
    monkeypatch.setattr(mod, "HopperGemm", lambda image, meta, device: FakeGemm(meta, device))
    return mod, requests


def operands(m=256, n=256, k=256, dtype=BF16):
    return Tensor((m, k), dtype), Tensor((n, k), dtype)


def test_the_plain_call_takes_its_variant_and_no_extra_arguments(op):
    mod, requests = op
    a, b = operands()
    out = Tensor((256, 256))
    assert mod.gemm(a, b, out=out) is out
    assert requests == [("64x128", gemm_configs.VARIANTS["64x128"], "bf16", "sm_90a")]
    g = mod._picks[(a.shape, b.shape, a.dtype, 0)]
    assert g.launches == [(a, b, out, ())]
    mod.gemm(a, b, alpha=1, out=out)          # alpha 1: the plain path
    assert len(requests) == 1 and g.launches[-1][3] == ()


def test_each_epilogue_is_its_own_variant_with_named_arguments(op):
    mod, requests = op
    a, b = operands(1000, 1032, 520)
    bias, res = Tensor((1032,)), Tensor((1000, 1032))
    out = Tensor((1000, 1032))
    mod.gemm(a, b, bias=bias, activation="gelu_erf", residual=res, alpha=0.5, out=out)
    name, overrides, dtype, chip = requests[-1]
    assert name == "128x128_alpha_bias_res_gelu_erf" and (dtype, chip) == ("bf16", "sm_90a")
    assert overrides == dict(gemm_configs.VARIANTS["128x128"], epilogue_passes=2, epilogue={
        "alpha": "param", "bias": "col", "activation": "gelu_erf", "residual": True})
    g = mod._variants[(name, "bf16", 0)]
    assert g.launches[-1] == (a, b, out, {"alpha": 0.5, "bias": bias, "residual": res})
    # another alpha, the same kernel (alpha is an argument); found once per shape
    mod.gemm(a, b, bias=bias, activation="gelu_erf", residual=res, alpha=-2, out=out)
    assert len(requests) == 1 and g.launches[-1][3]["alpha"] == -2.0
    # an fp32 bias, no residual: another entry, only the arguments it declares
    bias32 = Tensor((1032,), F32)
    mod.gemm(a, b, bias=bias32, activation="relu")
    assert requests[-1][0] == "128x128_biasf32_relu"
    assert requests[-1][1]["epilogue"] == {"bias": "col", "bias_dtype": "f32",
                                           "activation": "relu"}
    assert mod._variants[(requests[-1][0], "bf16", 0)].launches[-1][3] == {"bias": bias32}
    # the plain call still has its own entry, which the fused ones did not load
    mod.gemm(a, b)
    assert requests[-1][0] == "128x128" and mod.chosen(a, b) == "128x128"


BAD = [
    (dict(activation="gelu"), ValueError,
     "activation must be None or one of relu, gelu_tanh, gelu_erf, silu"),
    (dict(alpha="2"), TypeError, "alpha must be a Python number"),
    (dict(bias=[1.0]), TypeError, "bias must be a torch tensor, got list"),
    (dict(bias=Tensor((256,), F16)), TypeError,
     r"bias must be torch.bfloat16 \(the output's dtype\) or torch.float32, got torch.float16"),
    (dict(bias=Tensor((128,))), ValueError,
     r"bias must be a contiguous vector of N = 256 values .*got shape \(128,\)"),
    (dict(bias=Tensor((256,), contiguous=False)), ValueError, "not contiguous"),
    (dict(bias=Tensor((256,), index=1)), ValueError, "bias is on cuda:1, a on cuda:0"),
    (dict(residual=Tensor((256, 128))), ValueError,
     r"residual must be a contiguous M x N = 256 x 256 tensor"),
    (dict(residual=Tensor((256, 256), F16)), TypeError,
     "residual must be torch.bfloat16 .the output's dtype., got torch.float16"),
    (dict(residual=Tensor((256, 256), contiguous=False)), ValueError, "not contiguous"),
    (dict(residual=3), TypeError, "residual must be a torch tensor, got int"),
]


@pytest.mark.parametrize("kwargs, exc, message", BAD)
def test_bad_epilogue_arguments_say_the_rule(op, kwargs, exc, message):
    mod, requests = op
    a, b = operands()
    with pytest.raises(exc, match=message):
        mod.gemm(a, b, **kwargs)
    assert requests == []          # refused before any variant is compiled or loaded


def test_a_shape_checked_once_still_checks_each_calls_tensors(op):
    mod, _ = op
    a, b = operands()
    mod.gemm(a, b, bias=Tensor((256,)))
    with pytest.raises(ValueError, match="bias must be a contiguous vector of N = 256"):
        mod.gemm(a, b, bias=Tensor((255,)))


def test_fake_implementations_give_the_shape_and_check_the_arguments(op):
    mod, _ = op
    a, b = operands(100, 64, 32)
    c = mod._gemm_op.fake(a, b, Tensor((64,)), "silu", Tensor((100, 64)), 0.5)
    assert c.shape == (100, 64)
    assert mod._gemm_out_op.fake(a, b, Tensor((100, 64)), None, "relu", None, 1.0) is None
    with pytest.raises(RuntimeError, match="activation must be None or one of"):
        mod._gemm_op.fake(a, b, None, "tanh", None, 1.0)
    with pytest.raises(RuntimeError, match="bias must have N values"):
        mod._gemm_op.fake(a, b, Tensor((100,)), None, None, 1.0)
    with pytest.raises(RuntimeError, match="residual must be M x N"):
        mod._gemm_out_op.fake(a, b, Tensor((100, 64)), None, None, Tensor((64, 100)), 1.0)

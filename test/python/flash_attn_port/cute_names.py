"""The CuTe DSL names FlashAttention's pipeline.py imports besides
``cutlass.pipeline``, on pipeline_mlir's kernel layer: what a port of it
imports instead of ``cutlass`` / ``cutlass.cute`` / ``cutlass.cutlass_dsl``.

- ``Int32(x)`` / ``Boolean(x)``: an i32 / i1 value (a ``Scalar``) from a
  Python int or an existing value;
- ``const_expr(x)``: a condition decided while building (x itself);
- ``dsl_user_op``: CuTe DSL fills ``loc`` with the caller's line; our ops
  find the user's line themselves (user_location.py), so it changes nothing;
- ``if_generate(cond, then)``: ``then()`` when a Python condition holds, or
  under an ``scf.if`` on an i1 value;
- ``cute.arch.sync_warp()`` (``bar.warp.sync`` of the full warp) and
  ``cute.arch.elect_one()`` (the body runs in one lane).
"""

from types import SimpleNamespace

import mlir.ir as ir
from mlir.dialects import nvvm

from pipeline_mlir.kernel import If, Scalar, elect_one, to_value

FULL_WARP = -1  # all 32 lanes: 0xffffffff as a signed i32


def _scalar(x, width):
    if isinstance(x, Scalar):
        return x
    return Scalar(to_value(x, ir.IntegerType.get_signless(width)))


def Int32(x):  # noqa: N802 -- CuTe DSL's name
    return _scalar(x, 32)


def Boolean(x):  # noqa: N802 -- CuTe DSL's name
    return _scalar(x, 1)


def const_expr(x):
    return x


def dsl_user_op(fn):
    return fn


def if_generate(cond, then, loc=None, ip=None):
    if isinstance(cond, bool):
        if cond:
            then()
        return
    with If(Boolean(cond)):
        then()


def _sync_warp():
    nvvm.bar_warp_sync(to_value(FULL_WARP, ir.IntegerType.get_signless(32)))


cute = SimpleNamespace(arch=SimpleNamespace(sync_warp=_sync_warp, elect_one=elect_one))

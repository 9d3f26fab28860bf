"""A compiled kernel as a torch custom op (``torch.library``).

    add = fn.as_torch_op("mylib::add_one", mutates=("dst",), grid=lambda src, dst, n: (n // 256,))
    add(src, dst, n)                           # eager: launches on torch's current stream
    torch.compile(model, fullgraph=True)       # traced as one node, no graph break

Pointer parameters become ``Tensor`` arguments, integer kinds ``int``, float
kinds ``float``; the parameters named in ``mutates`` are the tensors the
kernel writes (``Tensor(a!)`` in the schema, so torch orders them and
functionalizes them under compilation). The op returns nothing; its fake
implementation (what ``torch.compile`` runs on meta tensors) does nothing
either. ``grid``: a tuple, or a function of the arguments that returns one.
TMA descriptor parameters have no torch type: wrap such a kernel in a
Python function that builds the descriptors and register that
(``pipeline_mlir.ops.gemm`` does so for the GEMM).
"""

from .errors import ArgumentError

_TYPES = {"ptr": "Tensor", "f16": "float", "f32": "float", "f64": "float"}


def _schema(kernel, mutates):
    parts, aliases = [], iter("abcdefghijklmnopqrstuvwxyz")
    for name, kind in kernel.params:
        base = kind.partition(":")[0]
        if base in ("tma", "tma_byval"):
            raise ArgumentError(f"kernel '{kernel.name}': parameter {name!r} is a TMA "
                                "descriptor, which has no torch type; register a Python "
                                "function that builds it instead")
        t = _TYPES.get(base, "int")
        if name in mutates:
            if t != "Tensor":
                raise ArgumentError(f"kernel '{kernel.name}': mutates names {name!r}, a "
                                    f"{kind} parameter; only pointer parameters are written")
            t = f"Tensor({next(aliases)}!)"   # each written tensor its own alias set
        parts.append(f"{t} {name}")
    return "(" + ", ".join(parts) + ") -> ()"


def register_torch_op(kernel, name, *, mutates, grid):
    """Register ``kernel`` (a CompiledKernel) as the torch op ``name``
    ("namespace::op"); returns the op (callable like the kernel, without
    the launch options)."""
    import torch

    mutates = tuple(mutates)
    unknown = [m for m in mutates if m not in kernel.param_names]
    if unknown:
        raise ArgumentError(f"kernel '{kernel.name}' has no parameter(s) {unknown} to mutate; "
                            f"its parameters are {kernel.param_names}")
    schema = _schema(kernel, mutates)
    grid_of = grid if callable(grid) else (lambda *args: grid)

    def impl(*args):
        kernel(*args, grid=grid_of(*args), sync=False)

    def fake(*args):
        return None

    lib = torch.library.Library(name.split("::")[0], "FRAGMENT")
    op_name = name.split("::")[1]
    lib.define(op_name + schema)
    lib.impl(op_name, impl, "CUDA")
    torch.library.register_fake(name, fake, lib=lib)
    op = getattr(getattr(torch.ops, name.split("::")[0]), op_name)
    op._pipeline_mlir_library = lib   # the registration lives as long as the op
    _LIBS.append(lib)
    return op


_LIBS = []

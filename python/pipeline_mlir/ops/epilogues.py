"""What a fused GEMM epilogue does to the fp32 accumulator before it is
converted to the output dtype and stored:

    C = activation(alpha * (A @ B^T) + bias[col] + residual[row, col])

An :class:`Epilogue` is the description that ``pipeline_mlir.gemm``, the
kernel cache (its ``to_json`` form is part of a variant's overrides, so each
epilogue is its own cache entry) and the kernel builders share. It is pure
Python, because a GPU host without MLIR reads it too; what it emits lives
in ``pipeline_mlir.kernel.epilogue`` (``apply``, ``EpilogueContext``), and
``Epilogue.apply`` reaches it there. ``docs/authoring.md`` (section 9)
shows it in a user kernel, ``docs/gemm.md`` in the op.
"""

from dataclasses import dataclass, fields

# Each name's math is in pipeline_mlir/kernel/fragment.py (relu, gelu_tanh,
# gelu_erf, silu); torch's names for them: relu, gelu(approximate='tanh'),
# gelu (the erf form), silu.
ACTIVATIONS = ("relu", "gelu_tanh", "gelu_erf", "silu")
BIAS_KINDS = ("col",)                   # one value per output column (N)
BIAS_DTYPES = ("", "f32", "bf16", "f16")  # "": the output dtype
ALPHA_PARAM = "param"                   # alpha is an f32 kernel parameter
PARAM_NAMES = ("alpha", "bias", "residual")   # the kernel parameters it may add


@dataclass(frozen=True)
class Epilogue:
    """A fused epilogue, applied in registers to the fp32 accumulator.

    - ``alpha``: a number (a constant in the kernel; 1 emits nothing), or
      ``"param"``: an f32 kernel parameter named ``alpha``, so that one
      compiled kernel serves every value (what ``pipeline_mlir.gemm`` uses);
    - ``bias``: None, or ``"col"``: one value per output column, a kernel
      parameter ``bias`` (a global pointer to a vector of ``bias_dtype``,
      "" meaning the output dtype, or "f32");
    - ``activation``: None or one of ``ACTIVATIONS``;
    - ``residual``: add a tile of a kernel parameter ``residual``, a
      row-major matrix of the output's shape and dtype (before the
      activation, as the formula in the module doc says);
    - ``fn``: a user function ``fn(fragment, ctx) -> fragment`` run last,
      for user kernels (``ctx`` is the kernel's
      ``pipeline_mlir.kernel.epilogue.EpilogueContext``). An epilogue with
      ``fn`` has no ``to_json`` form: a Python function cannot be a cache key.

    Loads outside the output (the M and N edges of a ragged tile) read 0.
    """

    alpha: object = 1.0
    bias: object = None
    bias_dtype: str = ""
    activation: object = None
    residual: bool = False
    fn: object = None

    def __post_init__(self):
        a = self.alpha
        if a != ALPHA_PARAM and (isinstance(a, bool) or not isinstance(a, (int, float))):
            raise ValueError(f"Epilogue: alpha must be a number or {ALPHA_PARAM!r} (an f32 "
                             f"kernel parameter), got {a!r}")
        if a != ALPHA_PARAM:
            # 2 and 2.0 are one epilogue: one JSON form, one cache entry.
            object.__setattr__(self, "alpha", float(a))
        if self.bias is not None and self.bias not in BIAS_KINDS:
            raise ValueError(f"Epilogue: bias must be None or 'col' (one value per output "
                             f"column), got {self.bias!r}")
        if self.bias_dtype not in BIAS_DTYPES:
            raise ValueError(f"Epilogue: bias_dtype must be one of {BIAS_DTYPES} ('' = the "
                             f"output dtype), got {self.bias_dtype!r}")
        if self.activation is not None and self.activation not in ACTIVATIONS:
            raise ValueError(f"Epilogue: activation must be None or one of "
                             f"{', '.join(ACTIVATIONS)}, got {self.activation!r}")
        if not isinstance(self.residual, bool):
            raise ValueError(f"Epilogue: residual must be True or False, got "
                             f"{self.residual!r}")
        if self.fn is not None and not callable(self.fn):
            raise ValueError(f"Epilogue: fn must be a function fn(fragment, ctx) -> "
                             f"fragment, got {self.fn!r}")

    @property
    def is_identity(self):
        """Nothing to do: the kernel's IR is that of no epilogue."""
        return (self.alpha == 1 and self.bias is None and self.activation is None
                and not self.residual and self.fn is None)

    def param_names(self):
        """The kernel parameters this epilogue reads, in the order the
        kernel declares them (a launcher binds them by name)."""
        return tuple(name for name, used in (("alpha", self.alpha == ALPHA_PARAM),
                                             ("bias", self.bias is not None),
                                             ("residual", self.residual)) if used)

    @property
    def tag(self):
        """A short name for kernel and cache-entry names ('' for identity):
        parts joined by '_', e.g. ``alpha_bias_res_gelu_erf``."""
        parts = []
        if self.alpha == ALPHA_PARAM:
            parts.append("alpha")
        elif self.alpha != 1:
            parts.append(f"x{float(self.alpha):g}".replace("-", "m").replace(".", "p"))
        if self.bias is not None:
            parts.append("bias" + (self.bias_dtype if self.bias_dtype else ""))
        if self.residual:
            parts.append("res")
        if self.activation is not None:
            parts.append(self.activation)
        if self.fn is not None:
            parts.append("fn_" + getattr(self.fn, "__name__", "fn").strip("<>"))
        return "_".join(parts)

    def to_json(self):
        """The fields that differ from the defaults, as a JSON-able dict
        (what a kernel cache key hashes); ``from_json`` reads it back."""
        if self.fn is not None:
            raise ValueError("Epilogue.to_json: an epilogue with a user fn cannot be "
                             "described by data (a cache key); build its kernel directly")
        return {f.name: getattr(self, f.name) for f in fields(self)
                if f.name != "fn" and getattr(self, f.name) != f.default}

    @classmethod
    def from_json(cls, data):
        if isinstance(data, cls):
            return data
        if not isinstance(data, dict):
            raise TypeError(f"Epilogue.from_json: expected a dict, got {type(data).__name__}")
        unknown = set(data) - {f.name for f in fields(cls)} - {"fn"}
        if unknown or "fn" in data:
            raise ValueError(f"Epilogue.from_json: unknown fields "
                             f"{sorted(unknown | ({'fn'} & set(data)))}")
        return cls(**data)

    def apply(self, acc, ctx):
        """The accumulator Fragment ``acc`` with this epilogue applied
        (MLIR emitted at the insertion point; ``ctx`` an
        ``EpilogueContext``): see ``pipeline_mlir.kernel.epilogue.apply``."""
        from pipeline_mlir.kernel.epilogue import apply

        return apply(self, acc, ctx)

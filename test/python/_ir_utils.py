"""Helpers for the Python-layer tests: walk a module and find ops."""


def all_ops(op):
    """Every op nested in ``op`` (pre-order), as OpViews."""
    out = []
    for region in op.regions:
        for block in region.blocks:
            for inner in block.operations:
                out.append(inner)
                out.extend(all_ops(inner.operation))
    return out


def ops_named(kernel_or_module, name):
    module = getattr(kernel_or_module, "module", kernel_or_module)
    return [o for o in all_ops(module.operation) if o.operation.name == name]


def names(kernel_or_module, prefix="pipeline."):
    module = getattr(kernel_or_module, "module", kernel_or_module)
    return [o.operation.name for o in all_ops(module.operation)
            if o.operation.name.startswith(prefix)]


def attr_names(op):
    return {a if isinstance(a, str) else a.name for a in op.operation.attributes}

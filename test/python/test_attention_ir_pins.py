"""The attention kernels' IR, pinned: a restructuring of the kernel modules
(pipeline_mlir/kernels/attention_fwd/, attention_bwd/) must build the same
modules, byte for byte, for every configuration the library ships or tests.

``configurations()`` lists them: the forward's op table
(``attention_configs.VARIANTS``), the FP8 forward's
(``attention_fp8_configs.VARIANTS``), the benchmarks' candidates
(benchmarks/attention/variants.py), the switches of ``AttentionConfig``
on each head dim, the backward's table and candidates (``BWD_VARIANTS``,
``BWD_CANDIDATES``) and the mistakes the tests plant
(_attention_mistakes.py, _attention_bwd_mistakes.py). ``digest`` hashes a
build's IR without locations (the caller's lines) and its launch facts.

The test pins four of them (``PINNED``). A change to a kernel that is meant
to change its IR changes these too: refresh them with

    .venv/bin/python test/python/test_attention_ir_pins.py --pins

For a restructuring, compare every configuration before and after:

    .venv/bin/python test/python/test_attention_ir_pins.py --all before.json
    ... (restructure, scripts/dev-sync.sh) ...
    .venv/bin/python test/python/test_attention_ir_pins.py --all after.json
    cmp before.json after.json
"""

import hashlib
import importlib.util
import json
import os
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def _bench_variants():
    """benchmarks/attention/variants.py (its ``from attention_fwd import``
    reads examples/attention_fwd.py, the kernel module's alias)."""
    examples = os.path.join(ROOT, "examples")
    if examples not in sys.path:
        sys.path.insert(0, examples)
    spec = importlib.util.spec_from_file_location(
        "attention_bench_variants", os.path.join(ROOT, "benchmarks", "attention", "variants.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# Switches of AttentionConfig built on every head dim, causal and not (on
# top of the head dim's op configuration; those that do not apply to it
# are skipped where AttentionConfig refuses them).
FWD_SWITCHES = {
    "plain": dict(),
    "px4": dict(exp2_poly=4),
    "hw": dict(hold_pv_wait=True),
    "hwdb": dict(hold_pv_wait=True, double_p=True),
    "px3hwdb": dict(exp2_poly=3, hold_pv_wait=True, double_p=True),
    "ts": dict(tma_store=True),
    "q1": dict(q_stages=1),
    "s3": dict(stages=3),
    "l2": dict(l2_sections=True),
    "noov": dict(intra_overlap=False),
    "nopp": dict(pingpong=False),
    "wg1": dict(consumer_warpgroups=1, pingpong=False),
    "wg3": dict(consumer_warpgroups=3, consumer_registers=160),
}


def configurations(benchmarks=True):
    """{name: (kind, config, stages)}: kind 'fwd', 'bwd' or 'bwd_prep'
    (config: the head dim), stages the ``Stages`` to build with (None: the
    production ones); ``benchmarks``: with the benchmarks' candidates."""
    from pipeline_mlir.kernels import attention_bwd, attention_fwd
    from pipeline_mlir.ops import attention_configs, attention_fp8_configs

    fwd = attention_fwd.AttentionConfig
    out = {}

    def add_fwd(name, make):
        try:
            cfg = make()
        except ValueError:                 # a switch this configuration refuses
            return
        out[f"fwd {name}"] = ("fwd", cfg, None)

    for name, over in attention_configs.VARIANTS.items():
        add_fwd(name, lambda: fwd(**over))
    for name, over in attention_fp8_configs.VARIANTS.items():
        add_fwd(name, lambda: fwd(**over, dtype=attention_fp8_configs.DTYPE))
    if benchmarks:
        bench = _bench_variants()
        for tag, cfg, _ in (bench.variants(sweep=True) + bench.grid_variants()
                            + bench.fp8_variants()):
            add_fwd(f"bench {tag}", lambda: cfg)
    for d in attention_configs.HEAD_DIMS:
        for causal in (False, True):
            _, over = attention_configs.variant(d, causal)
            for switch, extra in FWD_SWITCHES.items():
                add_fwd(f"d{d}{'c' if causal else ''} {switch}",
                        lambda: fwd(**{**over, **extra}))
    for name, over in attention_fp8_configs.VARIANTS.items():
        for switch, extra in FWD_SWITCHES.items():
            add_fwd(f"{name} {switch}", lambda: fwd(**{**over, **extra}, dtype="e4m3"))

    for name, over in {**attention_configs.BWD_VARIANTS,
                       **attention_configs.BWD_CANDIDATES}.items():
        if over.get("kernel") == "prep":
            out[f"bwd {name}"] = ("bwd_prep", over["head_dim"], None)
        elif over.get("kernel") == "prep_wide":
            out[f"bwd {name}"] = ("bwd_prep_wide", over, None)
        elif over.get("kernel") == "dq_convert":
            out[f"bwd {name}"] = ("bwd_dq_convert", (over["head_dim"], over.get("block_m", 64)),
                                  None)
        else:
            out[f"bwd {name}"] = ("bwd", attention_bwd.AttentionBwdConfig(**over), None)

    if HERE not in sys.path:
        sys.path.insert(0, HERE)
    import _attention_bwd_mistakes
    import _attention_mistakes
    for mistake, stages in _attention_mistakes.STAGES_WITH.items():
        for d in (64, 128):
            out[f"fwd mistake {mistake} d{d}"] = ("fwd", fwd(head_dim=d), stages)
    for mistake, stages in _attention_bwd_mistakes.STAGES_WITH.items():
        for d in (64, 256):
            out[f"bwd mistake {mistake} d{d}"] = (
                "bwd", attention_bwd.AttentionBwdConfig(head_dim=d, stages=1 if d == 256
                                                        else 2), stages)
    return out


def digest(kind, cfg, stages=None):
    """sha256 of the kernel's IR (no locations) and its launch facts."""
    from pipeline_mlir.kernels import attention_bwd, attention_bwd_prep, attention_fwd

    if kind == "bwd_prep":
        k = attention_bwd_prep.build(cfg)
        meta = attention_bwd_prep.meta(k)
    elif kind == "bwd_prep_wide":
        from pipeline_mlir.kernels.attention_bwd import prep_wide
        k = prep_wide.build(cfg["head_dim"], slots=cfg["slots"], order=cfg["order"])
        meta = prep_wide.meta(k)
    elif kind == "bwd_dq_convert":
        from pipeline_mlir.kernels import attention_bwd_dq_convert
        head_dim, block_m = cfg
        k = attention_bwd_dq_convert.build(head_dim, block_m=block_m)
        meta = attention_bwd_dq_convert.meta(k)
    else:
        module = attention_fwd if kind == "fwd" else attention_bwd
        k = module.build(cfg, stages=stages)
        meta = cfg.meta(k)
    h = hashlib.sha256(k.mlir(locations=False).encode())
    h.update(json.dumps(meta, sort_keys=True).encode())
    return h.hexdigest()


# Four configurations' digests (the module doc says how to refresh them):
# the bf16 forward at d 128, the FP8 one at d 128 causal (exp2_poly_half), the
# backward at d 128 (dq_store_spread) and a planted forward mistake.
PINNED = {
    "fwd d128":
        "f27951a53cbd310184a630f56c1be910c2920abba87bcdf05ecc24e63ec269fb",
    "fwd fp8_d128c":
        "60243face76c1ada2766a04e70d7300368d6c982ab0dad78e75167b190fb5b7b",
    "bwd bwd_d128":
        "e9122f0a48890f74b1f5812ae2e95e8bac735fb311a543aa0b8f7ec2363721d6",
    "fwd mistake pingpong_barriers_crossed d128":
        "5e017de6f9c7f79d775bf5d580e3b71b469fc3e8eda868504be4a8e434164767",
}


@pytest.mark.parametrize("name", sorted(PINNED))
def test_attention_ir_pinned(name):
    kind, cfg, stages = configurations(benchmarks=False)[name]
    assert digest(kind, cfg, stages) == PINNED[name], (
        f"{name}: the kernel's IR changed; if that is meant, refresh PINNED "
        f"(the module doc)")


if __name__ == "__main__":
    if "--pins" in sys.argv:
        configs = configurations(benchmarks=False)
        for name in PINNED:
            print(f'    "{name}":\n        "{digest(*configs[name])}",')
    elif "--all" in sys.argv:
        path = sys.argv[sys.argv.index("--all") + 1]
        result = {}
        for name, c in configurations().items():
            try:
                result[name] = digest(*c)
            except ValueError as e:        # a plan over the chip's limits: refused
                result[name] = f"refused: {e}"
        with open(path, "w") as f:
            json.dump(result, f, indent=1, sort_keys=True)
        print(f"{len(result)} configurations -> {path}")
    else:
        sys.exit(__doc__)

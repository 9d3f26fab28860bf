"""The attention benchmarks' timing: contenders timed in alternating rounds
on the same GPU, so that clock and power drift hit all alike
(run_attention.py, run_attention_bwd.py, run_attention_fp8.py,
run_attention_grid.py, check_attention.py), and the ratio of a peer's time
to ours over those rounds."""

import statistics


def time_interleaved(fns, rounds, iters, warmup):
    """Per-call ms of each fn ({name: fn()}) in alternating rounds: {name:
    [ms per round]}. Each fn first runs ``warmup`` times; then, ``rounds``
    times, each fn in turn runs ``iters`` back-to-back calls between two
    CUDA events on torch's current stream."""
    import torch
    for fn in fns.values():
        for _ in range(warmup):
            fn()
    torch.cuda.synchronize()
    times = {name: [] for name in fns}
    for _ in range(rounds):
        for name, fn in fns.items():
            start = torch.cuda.Event(enable_timing=True)
            end = torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(iters):
                fn()
            end.record()
            end.synchronize()
            times[name].append(start.elapsed_time(end) / iters)
    return times


def ratios_over(times, ours="ours"):
    """{peer: median over rounds of (peer time / ``ours``'s time)} of
    ``time_interleaved``'s rounds: each round's ratio is of two timings
    taken back to back."""
    return {n: statistics.median(p / o for p, o in zip(t, times[ours]))
            for n, t in times.items() if n != ours}

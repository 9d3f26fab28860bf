"""Building and checking a kernel must not import the CUDA runtime
(``pipeline_mlir.runtime``: launchers, descriptor arenas, cuda-bindings):
that import alone costs a cold build tens of milliseconds, which is what a
compile-latency regression looked like when ``Kernel()`` read a device
limit from ``runtime.device``. The limits a build needs live in
``chip_limits``."""

import subprocess
import sys
import textwrap


def test_building_and_lowering_a_kernel_leaves_the_runtime_unimported():
    code = textwrap.dedent("""
        import sys
        from pipeline_mlir import compiler
        from pipeline_mlir.kernel import Int32, Kernel
        from pipeline_mlir.pipeline import (Agent, CooperativeGroup, PipelineAsync,
                                            PipelineUserType, make_pipeline_state)
        k = Kernel("imports", chip="sm_90a", block_dim=64, cluster_dim=(2, 1, 1),
                   params={"n": Int32()})
        with k:
            (n,) = k.args
            pipe = PipelineAsync.create(num_stages=2,
                                        producer_group=CooperativeGroup(Agent.Thread, 32),
                                        consumer_group=CooperativeGroup(Agent.Thread, 32),
                                        barrier_storage=k.alloc_barriers(4))
            warp = k.warp_idx()
            with k.if_(warp == 0):
                st = make_pipeline_state(PipelineUserType.Producer, 2)
                for _, _ in k.range(n, carry=[st]):
                    pipe.producer_acquire(st)
                    pipe.producer_commit(st)
                    st.advance()
                pipe.producer_tail(st)
            with k.if_(warp == 1):
                st = make_pipeline_state(PipelineUserType.Consumer, 2)
                for _, _ in k.range(n, carry=[st]):
                    pipe.consumer_wait(st)
                    pipe.consumer_release(st)
                    st.advance()
        compiler.to_ptx(k.module, use_cache=False, verify_protocol=True)
        print(sorted(m for m in sys.modules if m.startswith("pipeline_mlir.runtime")))
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.strip().splitlines()[-1] == "[]", out.stdout

"""The simulator's cluster barrier (``barrier.cluster.arrive`` / ``.wait``,
``k.cluster_sync()``): a phase completes when every thread of every CTA of
the cluster that has not exited has arrived (no thread mask)."""


from mlir.dialects import nvvm

from pipeline_mlir.kernel import Int32, Kernel

from _held_out_bugs import _async, _consume, _next_line, _produce


def _kernel(form):
    """Two warps per CTA, a cluster of two, a ring from warp 0 to warp 1
    (the simulator runs kernels with pipeline ops); then warp 1 syncs the
    cluster; warp
    0 waits at the CTA barrier ("join": a deadlock), exits ("exit": fine,
    exited threads do not count) or syncs too ("all"). "twice": every warp
    arrives twice without a wait between."""
    k = Kernel(f"cluster_{form}", chip="sm_90a", block_dim=64, cluster_dim=(2, 1, 1),
               params={"n": Int32()})
    line = None
    with k:
        (n,) = k.args
        pipe = _async(k)
        with k.if_(k.warp_idx() == 0):
            _produce(k, pipe, n)
        with k.if_(k.warp_idx() == 1):
            _consume(k, pipe, n)
        if form == "twice":
            nvvm.cluster_arrive()
            nvvm.cluster_arrive()
            nvvm.cluster_wait()
            return k, line
        with k.if_(k.warp_idx() == 1):
            line = _next_line()
            k.cluster_sync()
        if form == "join":
            k.sync_threads()
        elif form == "all":
            with k.if_(k.warp_idx() == 0):
                k.cluster_sync()
    return k, line


def _sim(k):
    return k.simulate({"n": 3}, schedules=4, check=False)


def test_a_cluster_barrier_one_role_reaches_deadlocks_at_the_users_next_line():
    k, line = _kernel("join")
    r = _sim(k)
    assert {f.kind for f in r.findings} == {"deadlock"}, str(r)
    assert f"{__file__}:{line}:" in str(r), str(r)
    assert "waits on the cluster barrier (64 of the 128 threads not exited arrived)" in str(r)


def test_exited_warps_do_not_hold_the_cluster_barrier_and_a_full_sync_passes():
    for form in ("exit", "all"):
        r = _sim(_kernel(form)[0])
        assert r.ok, (form, str(r))


def test_a_second_arrive_before_the_wait_is_an_arrive_count_finding():
    k, line = _kernel("twice")
    r = _sim(k)
    assert "arrive-count" in {f.kind for f in r.findings}, str(r)
    assert "arrives on the cluster barrier twice in one phase" in str(r), str(r)

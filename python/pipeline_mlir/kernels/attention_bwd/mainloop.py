"""Stage: one step (query head, query block) of a consumer warpgroup of the
backward, and every wait and release of its rings (``Mainloop``).
"""


class Mainloop:
    """One step (query head, query block) of a consumer warpgroup, and
    every wait and release of its rings: a 'do' stage goes back after
    ``wait_group`` retired the dP^T GEMM and the dV GEMM that read it, a
    'q' stage after the S^T and dK GEMMs (both at the first dQ part's
    wait); 'lse' and 'dpsum' (``softmax_grad``) once their values are in
    registers."""

    def __init__(self, k, cfg, rings, sched, args, scores, softmax_grad, grads, reduce):
        self.k, self.cfg, self.rings, self.sched, self.args = k, cfg, rings, sched, args
        self.scores, self.softmax_grad = scores, softmax_grad
        self.grads, self.reduce = grads, reduce

    def step(self, it, reads, dv, dk, dq_last=None):
        """Step ``it``; with ``dq_deferred``, ``dq_last`` holds the
        previous step's last dQ part (stored and reduce-added here, while
        this step's S^T and dP^T run) and is set to this step's."""
        h, m_block = self.sched.step(it)
        q_read, lse_read, do_read, dpsum_read = reads
        rings = self.rings
        self.grads.dq_step = it                  # the dQ tile of this step
        rings.q.pipe.consumer_wait(q_read)
        rings.do.pipe.consumer_wait(do_read)
        q_tile = rings.q.buffer(q_read.index)
        do_tile = rings.do.buffer(do_read.index)
        if dq_last is None:
            s, dp = self.issue_scores(reads, q_tile, do_tile)
        else:
            def finish():
                with self.k.if_(it > 0):
                    self.finish_dq(it - 1, dq_last)
            # With 128 or more gradient columns (dK and dV take 128
            # registers) the previous dQ part is stored between S^T's
            # issue and dP^T's: its 32 registers and dP^T's accumulator
            # would not fit next to each other without spills.
            early = self.cfg.part_cols < 128
            s, dp = self.issue_scores(reads, q_tile, do_tile,
                                      between=None if early else finish)
            if early:
                finish()
        p, ds = self.softmax_grad(s, dp, lse_read, dpsum_read, m_block)
        self.grads.issue_dkv(dv, dk, p, ds, q_tile, do_tile)
        # dS^T to shared memory: the previous step's reduce-add must have
        # read the dQ tile -- and its dQ GEMMs this dS tile (retired).
        self.reduce.acquire()
        ds_a = self.grads.store_ds(ds, it)
        retired = lambda: self.release_q_do(q_read, do_read)   # noqa: E731
        if dq_last is None:
            self.grads.dq(ds_a, self.args.scale, retired)
            self.reduce.issue(h, m_block, it)
        else:
            dq_last.set(self.grads.dq_deferred(ds_a, self.args.scale, retired))
        for st in reads:
            st.advance()

    def finish_dq(self, it, dq_last):
        """``dq_deferred``: step ``it``'s last dQ part into the dQ tile and
        the tile's reduce-add (the parts before it are in the tile)."""
        self.grads.store_dq(self.grads.dq_chunks - 1, dq_last, step=it)
        self.reduce.issue(*self.sched.step(it), it)

    def issue_scores(self, reads, q_tile, do_tile, between=None):
        """S^T and dP^T issued, one wgmma group each (``between()``
        between them); dO's stage stays held (``release_q_do``)."""
        return self.scores.issue(q_tile, do_tile, between)

    def release_q_do(self, q_read, do_read):
        """Q and dO are no longer read: the dV and dK GEMMs retired (and
        the S^T and dP^T GEMMs before them)."""
        self.rings.do.pipe.consumer_release(do_read)
        self.rings.q.pipe.consumer_release(q_read)

"""Stage: one step (query head, query block) of a consumer warpgroup of the
backward, and every wait and release of its rings (``Mainloop``).
"""


from pipeline_mlir.kernel import wgmma


class Mainloop:
    """One step (query head, query block) of a consumer warpgroup, and
    every wait and release of its rings: a 'do' stage goes back after
    ``wait_group`` retired the dP^T GEMM and the dV GEMM that read it, a
    'q' stage after the S^T and dK GEMMs (both at the first dQ part's
    wait); 'lse' and 'dpsum' (``softmax_grad``) once their values are in
    registers. With ``stats_with_tiles`` LSE's and dPsum's rows are read
    under the Q and dO waits here and go back with those stages."""

    def __init__(self, k, cfg, rings, sched, args, scores, softmax_grad, grads, reduce,
                 turns=None):
        self.k, self.cfg, self.rings, self.sched, self.args = k, cfg, rings, sched, args
        self.turns = turns
        self.scores, self.softmax_grad = scores, softmax_grad
        self.grads, self.reduce = grads, reduce

    def step(self, it, reads, dv, dk, dq_last=None):
        """Step ``it``; with ``dq_deferred``, ``dq_last`` holds the
        previous step's last dQ part (stored and reduce-added here, while
        this step's S^T and dP^T run) and is set to this step's."""
        h, m_block = self.sched.step(it)
        q_read, lse_read, do_read, dpsum_read = self.rings.step_states(reads)
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
        if self.cfg.dk_last:
            self.grads_dk_last(h, m_block, it, q_read, do_read, dv, dk, p, ds, q_tile,
                               do_tile)
            for st in reads:
                st.advance()
            return
        if self.cfg.split_scores:
            # This warpgroup's halves of P^T and dS^T to the shared tiles,
            # then dV and dK over both halves (the dQ tile's acquire before
            # the barrier over both, as ``store_ds``'s).
            self.reduce.acquire()
            pt, dst, ds_a = self.grads.store_split(p, ds, it)
            self.grads.issue_dkv_smem(dv, dk, pt, dst, q_tile, do_tile)
        else:
            ds_regs = self.grads.issue_dkv(dv, dk, p, ds, q_tile, do_tile)
            # dS^T to shared memory: the previous step's reduce-add must have
            # read the dQ tile -- and its dQ GEMMs this dS tile (retired).
            self.reduce.acquire()
            ds_a = self.grads.store_ds(ds, it, ds_regs)
        if dq_last is None:
            def retired():
                # Q and dO go back; the dQ tile is claimed before its first write.
                self.release_q_do(q_read, do_read)
                self.reduce.claim()
            self.grads.dq(ds_a, self.args.scale, retired)
            self.reduce.issue(h, m_block, it)
        else:
            # The tile's writes come a step later (``finish_dq`` claims it).
            retired = lambda: self.release_q_do(q_read, do_read)   # noqa: E731
            dq_last.set(self.grads.dq_deferred(ds_a, self.args.scale, retired))
        for st in reads:
            st.advance()

    def grads_dk_last(self, h, m_block, it, q_read, do_read, dv, dk, p, ds, q_tile, do_tile):
        """``dk_last`` (one dQ part): dV issued, dS^T handed over, dQ
        issued, then dK, so that dQ's stores and reduce-add run while the
        dK GEMM does (FlashAttention-3's order). Q and dO go back once dK
        retired: the checker ties a GEMM's reads to the same stage of every
        ring of its state's stage count (Q's and dO's), so dO released with
        dK in flight would read as released under dK's reads of Q."""
        grads = self.grads
        grads.issue_dv(dv, p, do_tile)
        ds_regs = ds.to_operand_a("bf16")
        self.reduce.acquire()
        ds_a = grads.store_ds(ds, it, ds_regs)
        dq = grads.issue_dq(ds_a, 0)
        grads.issue_dk(dk, ds_regs, q_tile)
        wgmma.wait_group(1)                      # dV and dQ retired; dK may run
        self.reduce.claim()
        grads.store_dq(0, dq, self.args.scale)
        self.reduce.issue(h, m_block, it)
        wgmma.wait_group(0)                      # dK retired
        self.release_q_do(q_read, do_read)

    def finish_dq(self, it, dq_last):
        """``dq_deferred``: step ``it``'s last dQ part into the dQ tile and
        the tile's reduce-add (the parts before it are in the tile)."""
        self.reduce.claim()                      # one part: the tile's first write
        self.grads.store_dq(self.grads.dq_chunks - 1, dq_last, step=it)
        self.reduce.issue(*self.sched.step(it), it)

    def issue_scores(self, reads, q_tile, do_tile, between=None):
        """S^T and dP^T issued, one wgmma group each (``between()``
        between them), in this warpgroup's turn with ``pingpong``; dO's
        stage stays held (``release_q_do``)."""
        if self.turns is None:
            return self.scores.issue(q_tile, do_tile, between)
        self.turns.begin()
        s, dp = self.scores.issue(q_tile, do_tile, between)
        self.turns.end()
        return s, dp

    def release_q_do(self, q_read, do_read):
        """Q and dO are no longer read: the dV and dK GEMMs retired (and
        the S^T and dP^T GEMMs before them)."""
        self.rings.do.pipe.consumer_release(do_read)
        self.rings.q.pipe.consumer_release(q_read)

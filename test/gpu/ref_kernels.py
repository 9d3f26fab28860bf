"""Hand-lowered reference kernels (upstream NVVM/LLVM ops only).

They implement PipelineAsync as CuTe DSL's PipelineAsync does
(2*S mbarriers, producer starts at phase 1, consumer at phase 0) and the
device half of the watchdog contract (docs/watchdog.md), so the GPU suite has
real kernels and a real watchdog trap before the pipeline lowering lands,
and the lowering has a reference to match. Used by
scripts/build-gpu-bundle.py; needs only the upstream MLIR Python bindings.
"""

TILE_BYTES = 4096          # 32 lanes x 8 x 16-byte vectors
WATCHDOG_MAGIC = 0x57444F47


class _Text:
    """Tiny emitter with fresh SSA names."""

    def __init__(self):
        self.lines, self.n = [], 0

    def fresh(self, stem="v"):
        self.n += 1
        return f"%{stem}{self.n}"

    def __call__(self, line):
        self.lines.append(line)


def _wait(t, bar, phase, watchdog, role, stage, pipeline_id):
    """Blocking wait on `bar` for parity `phase` (i32), with the watchdog."""
    t0 = None
    if watchdog:
        t0 = t.fresh("t0")
        t(f"{t0} = nvvm.read.ptx.sreg.globaltimer : i64")
    t("scf.while : () -> () {")
    done, nd = t.fresh("done"), t.fresh("nd")
    t(f"  {done} = nvvm.mbarrier.try_wait {bar}, {phase}, %hint : !llvm.ptr<3>, i32, i32 -> i1")
    t(f"  {nd} = arith.xori {done}, %true : i1")
    t(f"  scf.condition({nd})")
    t("} do {")
    if watchdog:
        now, el, exp = t.fresh("now"), t.fresh("el"), t.fresh("exp")
        t(f"  {now} = nvvm.read.ptx.sreg.globaltimer : i64")
        t(f"  {el} = arith.subi {now}, {t0} : i64")
        t(f"  {exp} = arith.cmpi ugt, {el}, %wd_limit : i64")
        t(f"  scf.if {exp} {{")
        old, won = t.fresh("old"), t.fresh("won")
        t(f"    {old} = llvm.atomicrmw xchg %wd_claim, %c1 monotonic : !llvm.ptr<1>, i32")
        t(f"    {won} = arith.cmpi eq, {old}, %c0 : i32")
        t(f"    scf.if {won} {{")
        bi, nz = t.fresh("bi"), t.fresh("nz")
        t(f"      {bi} = llvm.load volatile %wd_buf_g : !llvm.ptr<1> -> i64")
        t(f"      {nz} = arith.cmpi ne, {bi}, %c0_64 : i64")
        t(f"      scf.if {nz} {{")
        bp = t.fresh("bp")
        t(f"        {bp} = llvm.inttoptr {bi} : i64 to !llvm.ptr")
        us64, us = t.fresh("us"), t.fresh("us")
        t(f"        {us64} = arith.divui {el}, %c1000_64 : i64")
        t(f"        {us} = arith.trunci {us64} : i64 to i32")
        vals = {1: ("const", pipeline_id), 2: ("const", role), 3: ("ssa", stage),
                4: ("ssa", phase), 5: ("ssa", "%ctaid_x"), 6: ("ssa", "%ctaid_y"),
                7: ("ssa", "%ctaid_z"), 8: ("ssa", "%warp"), 9: ("const", 1), 10: ("ssa", us),
                0: ("const", WATCHDOG_MAGIC)}
        for w in list(range(1, 11)) + [0]:  # the magic last
            kind, v = vals[w]
            if kind == "const":
                c = t.fresh("k")
                t(f"        {c} = arith.constant {v if v < 2**31 else v - 2**32} : i32")
                v = c
            p = t.fresh("wp")
            t(f"        {p} = llvm.getelementptr {bp}[{w}] : (!llvm.ptr) -> !llvm.ptr, i32")
            if w == 0:
                t("        nvvm.memory.barrier #nvvm.mem_scope<sys>")
            t(f"        llvm.store volatile {v}, {p} {{alignment = 4 : i64}} : i32, !llvm.ptr")
        t("        nvvm.memory.barrier #nvvm.mem_scope<sys>")
        t("      }")
        # the record is complete: release the losers
        rel = t.fresh("rel")
        t(f"      {rel} = llvm.atomicrmw xchg %wd_claim, %c2 monotonic : !llvm.ptr<1>, i32")
        t("    } else {")
        # a loser waits (at most 1 ms) for the record: its trap would abort
        # the grid before the winner's stores reached the host
        since = t.fresh("since")
        t(f"      {since} = nvvm.read.ptx.sreg.globaltimer : i64")
        t("      scf.while : () -> () {")
        st, pend, tn, dt, pat, again = (t.fresh(x) for x in ("cl", "pend", "tn", "dt", "pat", "ag"))
        t(f"        {st} = llvm.load volatile %wd_claim {{alignment = 4 : i64}} : !llvm.ptr<1> -> i32")
        t(f"        {pend} = arith.cmpi ne, {st}, %c2 : i32")
        t(f"        {tn} = nvvm.read.ptx.sreg.globaltimer : i64")
        t(f"        {dt} = arith.subi {tn}, {since} : i64")
        t(f"        {pat} = arith.cmpi ult, {dt}, %wd_loser_ns : i64")
        t(f"        {again} = arith.andi {pend}, {pat} : i1")
        t(f"        scf.condition({again})")
        t("      } do {")
        t("        scf.yield")
        t("      }")
        t("    }")
        t("    llvm.intr.trap")
        t("  }")
    t("  scf.yield")
    t("}")


def _copy(t, gbase, sbase, to_shared, src_name, dst_name):
    """The warp copies one 4 KiB tile, lane i moving 16-byte vectors i, i+32, ..."""
    t("scf.for %j = %i0 to %i8 step %i1 {")
    ji, jo, o1, go, so, go64, gp, sp, v = (t.fresh(s) for s in
                                          ("ji", "jo", "o", "go", "so", "g64", "gp", "sp", "vec"))
    t(f"  {ji} = arith.index_cast %j : index to i32")
    t(f"  {jo} = arith.muli {ji}, %c512 : i32")
    t(f"  {o1} = arith.addi {jo}, %lane16 : i32")
    t(f"  {go} = arith.addi {gbase}, {o1} : i32")
    t(f"  {so} = arith.addi {sbase}, {o1} : i32")
    t(f"  {go64} = arith.extui {go} : i32 to i64")
    g = src_name if to_shared else dst_name
    t(f"  {gp} = llvm.getelementptr {g}[{go64}] : (!llvm.ptr<1>, i64) -> !llvm.ptr<1>, i8")
    t(f"  {sp} = llvm.getelementptr %tiles[{so}] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, i8")
    if to_shared:
        t(f"  {v} = llvm.load {gp} {{alignment = 16 : i64}} : !llvm.ptr<1> -> vector<4xi32>")
        t(f"  llvm.store {v}, {sp} {{alignment = 16 : i64}} : vector<4xi32>, !llvm.ptr<3>")
    else:
        t(f"  {v} = llvm.load {sp} {{alignment = 16 : i64}} : !llvm.ptr<3> -> vector<4xi32>")
        t(f"  llvm.store {v}, {gp} {{alignment = 16 : i64}} : vector<4xi32>, !llvm.ptr<1>")
    t("}")


def async_copy_kernel(name="async_ref", stages=4, producer_phase=1, watchdog=False,
                      timeout_ns=1_000_000_000):
    """MLIR text of a PipelineAsync copy kernel: block = 64 threads, warp 0
    produces (global -> shared stage), warp 1 consumes (stage -> global);
    params (src, dst, tiles_per_block); block b copies tiles
    [b*T, (b+1)*T) of 4 KiB. `producer_phase=0` is the deadlock bug."""
    S = stages
    t = _Text()
    t("module attributes {gpu.container_module} {")
    t("gpu.module @kernels {")
    t(f"  llvm.mlir.global internal @bars() {{addr_space = 3 : i32, alignment = 8 : i64}} : !llvm.array<{2 * S} x i64>")
    t(f"  llvm.mlir.global internal @tilebuf() {{addr_space = 3 : i32, alignment = 128 : i64}} : !llvm.array<{S * TILE_BYTES} x i8>")
    if watchdog:
        t("  llvm.mlir.global external @__pipeline_watchdog_buffer(0 : i64) {addr_space = 1 : i32, alignment = 8 : i64} : i64")
        t("  llvm.mlir.global internal @__pipeline_watchdog_claim(0 : i32) {addr_space = 1 : i32, alignment = 4 : i64} : i32")
        names = b"ab\0"
        t(f"  llvm.mlir.global external constant @__pipeline_watchdog_names(dense<[{', '.join(str(c) for c in names)}]> : tensor<{len(names)}xi8>) {{addr_space = 1 : i32}} : !llvm.array<{len(names)} x i8>")
    t(f"  gpu.func @{name}(%src: !llvm.ptr<1>, %dst: !llvm.ptr<1>, %ntiles: i32) kernel {{")
    body = _Text()
    body.n = 1000
    for c, v in (("c0", 0), ("c1", 1), ("c2", 2), ("c32", 32), ("c16", 16), ("c512", 512),
                 ("c4096", TILE_BYTES), ("cS", S), ("cPP", producer_phase)):
        body(f"%{c} = arith.constant {v} : i32")
    body("%c0_64 = arith.constant 0 : i64")
    body("%c1000_64 = arith.constant 1000 : i64")
    body(f"%wd_limit = arith.constant {timeout_ns} : i64")
    body("%wd_loser_ns = arith.constant 1000000 : i64")
    body("%hint = arith.constant 10000000 : i32")
    body("%true = arith.constant true")
    for c, v in (("i0", 0), ("i1", 1), ("i8", 8), ("iS", S)):
        body(f"%{c} = arith.constant {v} : index")
    body("%tidx = gpu.thread_id x")
    body("%tid = arith.index_cast %tidx : index to i32")
    body("%bidx = gpu.block_id x")
    body("%bid = arith.index_cast %bidx : index to i32")
    body("%ctaid_x = nvvm.read.ptx.sreg.ctaid.x : i32")
    body("%ctaid_y = nvvm.read.ptx.sreg.ctaid.y : i32")
    body("%ctaid_z = nvvm.read.ptx.sreg.ctaid.z : i32")
    body("%warp = arith.divui %tid, %c32 : i32")
    body("%lane = arith.remui %tid, %c32 : i32")
    body("%lane16 = arith.muli %lane, %c16 : i32")
    body("%n = arith.index_cast %ntiles : i32 to index")
    body("%first = arith.muli %bid, %ntiles : i32")
    body("%bars = llvm.mlir.addressof @bars : !llvm.ptr<3>")
    body("%tiles = llvm.mlir.addressof @tilebuf : !llvm.ptr<3>")
    if watchdog:
        body("%wd_buf_g = llvm.mlir.addressof @__pipeline_watchdog_buffer : !llvm.ptr<1>")
        body("%wd_claim = llvm.mlir.addressof @__pipeline_watchdog_claim : !llvm.ptr<1>")
    # init: thread 0, full[i] and empty[i] each expect one warp (32 arrivals)
    body("%is_t0 = arith.cmpi eq, %tid, %c0 : i32")
    body("scf.if %is_t0 {")
    for i in range(2 * S):
        body(f"  %b{i} = llvm.getelementptr %bars[{i}] : (!llvm.ptr<3>) -> !llvm.ptr<3>, i64")
        body(f"  nvvm.mbarrier.init %b{i}, %c32 : !llvm.ptr<3>, i32")
    body("}")
    body("nvvm.fence.mbarrier.init")
    body("nvvm.barrier0")

    def bar_at(t, idx, empty):
        k = t.fresh("bi")
        if empty:
            t(f"{k} = arith.addi {idx}, %cS : i32")
            idx = k
        p = t.fresh("bar")
        t(f"{p} = llvm.getelementptr %bars[{idx}] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, i64")
        return p

    def advance(t, idx, ph):
        n1, wrap, n2, ph1, ph2 = (t.fresh(s) for s in ("ni", "wrap", "ni", "pf", "ph"))
        t(f"{n1} = arith.addi {idx}, %c1 : i32")
        t(f"{wrap} = arith.cmpi eq, {n1}, %cS : i32")
        t(f"{n2} = arith.select {wrap}, %c0, {n1} : i32")
        t(f"{ph1} = arith.xori {ph}, %c1 : i32")
        t(f"{ph2} = arith.select {wrap}, {ph1}, {ph} : i32")
        return n2, ph2

    for role in (0, 1):
        body(f"%is_role{role} = arith.cmpi eq, %warp, %c{role} : i32")
        body(f"scf.if %is_role{role} {{")
        start_phase = "%cPP" if role == 0 else "%c0"
        body(f"  %fin{role}:2 = scf.for %k = %i0 to %n step %i1 iter_args(%idx = %c0, %ph = {start_phase}) -> (i32, i32) {{")
        inner = _Text()
        inner.n = body.n
        wait_bar = bar_at(inner, "%idx", empty=(role == 0))
        _wait(inner, wait_bar, "%ph", watchdog, role, "%idx", 0)
        ki, tile, gb, sb = (inner.fresh(s) for s in ("ki", "tile", "gb", "sb"))
        inner(f"{ki} = arith.index_cast %k : index to i32")
        inner(f"{tile} = arith.addi %first, {ki} : i32")
        inner(f"{gb} = arith.muli {tile}, %c4096 : i32")
        inner(f"{sb} = arith.muli %idx, %c4096 : i32")
        _copy(inner, gb, sb, role == 0, "%src", "%dst")
        sig_bar = bar_at(inner, "%idx", empty=(role == 1))
        r = inner.fresh("arr")
        inner(f"{r} = nvvm.mbarrier.arrive {sig_bar} : !llvm.ptr<3> -> i64")
        ni, nph = advance(inner, "%idx", "%ph")
        inner(f"scf.yield {ni}, {nph} : i32, i32")
        body.n = inner.n
        for line in inner.lines:
            body("    " + line)
        body("  }")
        if role == 0:  # producer_tail: acquire every stage once more
            body(f"  %tail:2 = scf.for %q = %i0 to %iS step %i1 iter_args(%tidx2 = %fin0#0, %tph = %fin0#1) -> (i32, i32) {{")
            inner = _Text()
            inner.n = body.n
            wb = bar_at(inner, "%tidx2", empty=True)
            _wait(inner, wb, "%tph", watchdog, 0, "%tidx2", 0)
            ni, nph = advance(inner, "%tidx2", "%tph")
            inner(f"scf.yield {ni}, {nph} : i32, i32")
            body.n = inner.n
            for line in inner.lines:
                body("    " + line)
            body("  }")
        body("}")
    body("gpu.return")
    for line in body.lines:
        t("    " + line)
    t("  }")
    t("}")
    t("}")
    return "\n".join(t.lines) + "\n"

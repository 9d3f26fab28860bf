"""Hand-written PTX kernels for the runtime's own GPU checks: the driver-JIT
path (PTX, scalar parameters) and TMA descriptors passed as a pointer to a
device copy and by value. Built by scripts/build-gpu-bundle.py."""

FILL = r"""
.version 8.0
.target sm_90
.address_size 64
// p[i] = v + i for i < n
.visible .entry fill(.param .u64 p, .param .u32 v, .param .u32 n)
{
  .reg .pred %q;
  .reg .b32 %r<8>;
  .reg .b64 %rd<4>;
  ld.param.u64 %rd1, [p];
  ld.param.u32 %r1, [v];
  ld.param.u32 %r2, [n];
  mov.u32 %r3, %ctaid.x;
  mov.u32 %r4, %ntid.x;
  mov.u32 %r5, %tid.x;
  mad.lo.s32 %r6, %r3, %r4, %r5;
  setp.ge.u32 %q, %r6, %r2;
  @%q bra DONE;
  add.s32 %r7, %r1, %r6;
  mul.wide.u32 %rd2, %r6, 4;
  add.s64 %rd3, %rd1, %rd2;
  st.global.u32 [%rd3], %r7;
DONE:
  ret;
}
"""

# One elected thread per block moves tiles of 16 rows x 64 u32 (4 KiB):
# TMA load (completes on an mbarrier) then TMA store (bulk group).
_TMA_BODY = r"""
  .reg .pred %q<4>;
  .reg .b32 %r<16>;
  .reg .b64 %rd<8>;
  .shared .align 128 .b8 buf[4096];
  .shared .align 8 .b64 bar;
  mov.u32 %r1, %tid.x;
  setp.ne.u32 %q1, %r1, 0;
  @%q1 bra DONE;
  ld.param.u32 %r2, [TILES];
  mov.u32 %r3, %ctaid.x;
  mul.lo.s32 %r4, %r3, %r2;          // first tile
  mov.u32 %r5, 0;                     // k
  mov.u32 %r6, 0;                     // phase
  mov.u32 %r12, 0;
  mbarrier.init.shared.b64 [bar], 1;
  fence.mbarrier_init.release.cluster;
  LOOP:
  setp.ge.u32 %q2, %r5, %r2;
  @%q2 bra END;
  add.s32 %r7, %r4, %r5;
  shl.b32 %r8, %r7, 4;               // row = tile * 16
  mbarrier.arrive.expect_tx.shared.b64 %rd3, [bar], 4096;
  cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [buf], [SRC, {%r12, %r8}], [bar];
  WAIT:
  mbarrier.try_wait.parity.shared.b64 %q3, [bar], %r6;
  @!%q3 bra WAIT;
  xor.b32 %r6, %r6, 1;
  cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [DST, {%r12, %r8}], [buf];
  cp.async.bulk.commit_group;
  cp.async.bulk.wait_group.read 0;
  add.s32 %r5, %r5, 1;
  bra LOOP;
  END:
  cp.async.bulk.wait_group 0;
  DONE:
  ret;
"""

TMA_COPY = (r"""
.version 8.0
.target sm_90a
.address_size 64
// descriptors passed as pointers to 64-byte aligned device copies
.visible .entry tma_copy(.param .u64 src_desc, .param .u64 dst_desc, .param .u32 tiles)
{
  .reg .b64 %dsc<3>;
  ld.param.u64 %dsc1, [src_desc];
  ld.param.u64 %dsc2, [dst_desc];
""" + _TMA_BODY.replace("SRC", "%dsc1").replace("DST", "%dsc2").replace("TILES", "tiles") + r"""
}
""")

TMA_COPY_BYVAL = (r"""
.version 8.0
.target sm_90a
.address_size 64
// descriptors passed by value (__grid_constant__ CUtensorMap)
.visible .entry tma_copy_byval(.param .align 64 .b8 src_desc[128], .param .align 64 .b8 dst_desc[128], .param .u32 tiles)
{
  .reg .b64 %dsc<3>;
  mov.b64 %dsc1, src_desc;
  mov.b64 %dsc2, dst_desc;
  cvta.param.u64 %dsc1, %dsc1;
  cvta.param.u64 %dsc2, %dsc2;
""" + _TMA_BODY.replace("SRC", "%dsc1").replace("DST", "%dsc2").replace("TILES", "tiles") + r"""
}
""")

TINY_SM100 = r"""
.version 8.8
.target sm_100a
.address_size 64
.visible .entry tiny(.param .u64 p) { .reg .b64 %rd<2>; ld.param.u64 %rd1, [p]; st.global.u32 [%rd1], 7; ret; }
"""

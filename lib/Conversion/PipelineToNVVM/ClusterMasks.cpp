//===- ClusterMasks.cpp - CTA coordinates and multicast masks -------------===//
//
// The cluster layout is (V, M, N, L) with ranks laid out V fastest:
//   rank = v + V * (m + M * (n + N * l)).
// A load multicast along M lands in every CTA with the same (v, n, l); along
// N in every CTA with the same (v, m, l). The CTAs whose loads land in a
// CTA's stage are therefore those that differ from it only along a multicast
// mode; every arrive that frees or fills that stage must reach exactly them
// (docs/Rationale.md section 6).
//
//===----------------------------------------------------------------------===//

#include "LoweringUtils.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"

using namespace mlir;
using namespace mlir::pipeline;

static bool alongM(Multicast mode) {
  return mode == Multicast::M || mode == Multicast::MN;
}
static bool alongN(Multicast mode) {
  return mode == Multicast::N || mode == Multicast::MN;
}

CtaCoord mlir::pipeline::ctaCoord(OpBuilder &b, Location loc,
                                  ClusterLayoutAttr layout, Value rank) {
  // (rank / stride) % extent, folded away for modes of extent 1.
  auto mode = [&](int64_t stride, int64_t extent, bool last) -> Value {
    if (extent == 1)
      return constI32(b, loc, 0);
    Value q = stride == 1 ? rank
                          : Value(arith::DivUIOp::create(
                                b, loc, rank, constI32(b, loc, stride)));
    if (last)
      return q;
    return arith::RemUIOp::create(b, loc, q, constI32(b, loc, extent));
  };
  int64_t v = layout.getV(), m = layout.getM(), n = layout.getN();
  return {mode(1, v, false), mode(v, m, false), mode(v * m, n, false),
          mode(v * m * n, layout.getL(), true)};
}

Value mlir::pipeline::sharesMulticastTile(OpBuilder &b, Location loc,
                                          PipelineType type,
                                          const CtaCoord &self,
                                          const CtaCoord &other,
                                          bool ignoreV) {
  // Modes of extent 1 give constant coordinates; fold those comparisons so
  // that a 1-D cluster needs no coordinate arithmetic at all.
  auto eq = [&](Value x, Value y) -> Value {
    std::optional<int64_t> cx = getConstantIntValue(x);
    std::optional<int64_t> cy = getConstantIntValue(y);
    if (cx && cy)
      return constI1(b, loc, *cx == *cy);
    return arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, x, y);
  };
  // (i1 constants read back sign-extended: true is -1.)
  auto isTrue = [](Value v) {
    std::optional<int64_t> c = getConstantIntValue(v);
    return c && *c != 0;
  };
  auto all = [&](ArrayRef<Value> conds) {
    Value acc;
    for (Value c : conds) {
      if (isTrue(c))
        continue;
      acc = acc ? Value(arith::AndIOp::create(b, loc, acc, c)) : c;
    }
    return acc ? acc : constI1(b, loc, true);
  };
  SmallVector<Value> fixed = {eq(self.l, other.l)};
  if (!ignoreV)
    fixed.push_back(eq(self.v, other.v));
  Value sameM = eq(self.m, other.m), sameN = eq(self.n, other.n);
  Multicast mode = type.getMulticast();
  if (alongM(mode) && alongN(mode))
    fixed.push_back(isTrue(sameM) || isTrue(sameN)
                        ? constI1(b, loc, true)
                        : Value(arith::OrIOp::create(b, loc, sameM, sameN)));
  else if (alongM(mode))
    fixed.push_back(sameN);
  else if (alongN(mode))
    fixed.push_back(sameM);
  else
    fixed.append({sameM, sameN});
  return all(fixed);
}

Value mlir::pipeline::leaderCtaRank(OpBuilder &b, Location loc,
                                    PipelineType type) {
  Value rank = clusterCtaRank(b, loc);
  ClusterLayoutAttr layout = type.getCluster();
  if (!layout || layout.getV() == 1)
    return rank;
  Value v = constI32(b, loc, layout.getV());
  return arith::SubIOp::create(b, loc, rank,
                               arith::RemUIOp::create(b, loc, rank, v));
}

Value mlir::pipeline::ummaArrivalMask(OpBuilder &b, Location loc,
                                      PipelineType type) {
  ClusterLayoutAttr layout = type.getCluster();
  Multicast mode = type.getMulticast();
  if (!layout || (layout.getV() == 1 && mode == Multicast::None))
    return Value();
  int64_t V = layout.getV(), M = layout.getM(), N = layout.getN();
  // Each set is a static bit pattern shifted to this CTA's position; with
  // V = 2 every member brings its pair peer (bits 0b11).
  int64_t pairBits = V == 2 ? 0b11 : 0b1;
  CtaCoord me = ctaCoord(b, loc, layout, clusterCtaRank(b, loc));
  // Folded as it is built: most coordinates are static zeros.
  auto term = [&](int64_t stride, int64_t extent, Value shift) -> Value {
    int64_t pattern = 0;
    for (int64_t i = 0; i < extent; ++i)
      pattern |= pairBits << (stride * i);
    if (std::optional<int64_t> s = getConstantIntValue(shift))
      return constI32(b, loc, pattern << *s);
    return arith::ShLIOp::create(b, loc, constI32(b, loc, pattern), shift);
  };
  auto mul = [&](Value x, int64_t c) -> Value {
    std::optional<int64_t> cx = getConstantIntValue(x);
    if (cx)
      return constI32(b, loc, *cx * c);
    if (c == 1)
      return x;
    return arith::MulIOp::create(b, loc, x, constI32(b, loc, c));
  };
  auto add = [&](Value x, Value y) -> Value {
    std::optional<int64_t> cx = getConstantIntValue(x);
    std::optional<int64_t> cy = getConstantIntValue(y);
    if (cx && cy)
      return constI32(b, loc, *cx + *cy);
    if (cx == 0)
      return y;
    if (cy == 0)
      return x;
    return arith::AddIOp::create(b, loc, x, y);
  };
  // Offset of l (all sets keep l).
  Value lOff = mul(me.l, V * M * N);
  Value mask;
  if (alongM(mode)) // CTAs (*, m', n, l)
    mask = term(V, M, add(mul(me.n, V * M), lOff));
  if (alongN(mode)) { // CTAs (*, m, n', l)
    Value t = term(V * M, N, add(mul(me.m, V), lOff));
    mask = mask ? Value(arith::OrIOp::create(b, loc, mask, t)) : t;
  }
  if (!mask) // only the pair: (*, m, n, l)
    mask = term(1, 1, add(add(mul(me.m, V), mul(me.n, V * M)), lOff));
  if (std::optional<int64_t> c = getConstantIntValue(mask))
    return constI16(b, loc, *c);
  return arith::TruncIOp::create(b, loc, b.getI16Type(), mask);
}

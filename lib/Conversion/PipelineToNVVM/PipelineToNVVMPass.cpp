//===- PipelineToNVVMPass.cpp - convert-pipeline-to-nvvm -------*- C++ -*-===//

#include "pipeline-mlir/Conversion/PipelineToNVVM/PipelineToNVVM.h"

#include "ElectOnce.h"
#include "LoweringUtils.h"
#include "pipeline-mlir/Dialect/Pipeline/IR/PipelineDialect.h"

#include "mlir/Conversion/LLVMCommon/ConversionTarget.h"
#include "mlir/Conversion/LLVMCommon/TypeConverter.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/ControlFlow/IR/ControlFlow.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/SCF/Transforms/Patterns.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
#include "mlir/Transforms/DialectConversion.h"
#include "llvm/Support/MathExtras.h"

namespace mlir::pipeline {
#define GEN_PASS_DEF_CONVERTPIPELINETONVVM
#include "pipeline-mlir/Conversion/PipelineToNVVM/Passes.h.inc"
} // namespace mlir::pipeline

using namespace mlir;
using namespace mlir::pipeline;

namespace {

/// tcgen05 (UMMA) exists only on the sm_100 family's arch-specific targets.
bool chipHasTcgen05(StringRef chip) {
  return chip == "sm_100a" || chip == "sm_101a" || chip == "sm_103a";
}

/// Rejects tcgen05 pipelines on chips without tcgen05 before anything is
/// rewritten, with the op that introduces the pipeline as the location.
LogicalResult checkTcgen05Targets(ModuleOp module,
                                  const PipelineLoweringOptions &options) {
  bool ok = true;
  auto check = [&](Operation *op, PipelineType type) {
    if (!type.needsTcgen05())
      return;
    std::string chip = getChipFor(op, options);
    if (chipHasTcgen05(chip))
      return;
    op->emitError() << getCuteClassName(type.getKind())
                    << " uses tcgen05 and needs sm_100a; chip is " << chip;
    ok = false;
  };
  module.walk([&](Operation *op) {
    if (auto create = dyn_cast<CreateOp>(op)) {
      check(op, create.getType());
      return;
    }
    // Pipelines that come in as block arguments have no create.
    if (!isa<PipelineDialect>(op->getDialect()))
      return;
    for (Value operand : op->getOperands())
      if (auto type = dyn_cast<PipelineType>(operand.getType()))
        if (isa<BlockArgument>(operand))
          check(op, type);
  });
  return success(ok);
}

/// A create whose tx_count was left to pipeline-derive-tx-count would arm
/// zero bytes: refuse it rather than lower a kernel whose stages complete
/// before their copies land.
LogicalResult checkTxCountsDerived(ModuleOp module) {
  bool ok = true;
  module.walk([&](CreateOp create) {
    PipelineType type = create.getType();
    if (!type.hasTxCount() || type.getTxCount() != 0)
      return;
    create.emitError() << getCuteClassName(type.getKind())
                       << ": tx_count is 0, to be derived from the stage's "
                          "copies: run pipeline-derive-tx-count before "
                          "convert-pipeline-to-nvvm (pipeline-to-nvvm does)";
    ok = false;
  });
  return success(ok);
}

/// Upstream's gpu.thread_id lowering asserts on a `known_block_size` that
/// does not fit its range attributes (e.g. 2^31): reject launch bounds no
/// GPU accepts before that lowering runs, naming the kernel's attribute.
LogicalResult checkLaunchBounds(ModuleOp module) {
  bool ok = true;
  module.walk([&](gpu::GPUFuncOp fn) {
    auto check = [&](DenseI32ArrayAttr dims, StringRef name, int64_t limit,
                     StringRef what) {
      if (!dims)
        return;
      int64_t product = 1;
      for (int32_t d : dims.asArrayRef()) {
        if (d <= 0) {
          fn.emitOpError() << name << " entries must be positive, got " << d;
          ok = false;
          return;
        }
        product *= d;
        if (product > limit)
          break;
      }
      if (product > limit) {
        fn.emitOpError() << name << " exceeds the " << limit << " " << what;
        ok = false;
      }
    };
    check(fn.getKnownBlockSizeAttr(), "known_block_size", 1024,
          "threads of a CTA");
    check(fn.getKnownClusterSizeAttr(), "known_cluster_size", 16,
          "CTAs of a cluster");
  });
  return success(ok);
}

/// The NVPTX backend aborts the process ("LLVM ERROR: Bad address space
/// found while emitting PTX") on a pointer into an address space PTX lacks.
/// Reject such pointers and globals in gpu.modules before lowering.
bool isPtxAddressSpace(unsigned as) {
  // generic, global, shared, const, local, tensor memory (sm_100: tcgen05
  // ld/st and TMEM alloc take !llvm.ptr<6>), shared::cluster, param.
  return as <= 1 || (as >= 3 && as <= 7) || as == 101;
}

/// A global variable needs a state space PTX can declare one in (generic
/// globals become .global); the backend aborts on tensor memory,
/// shared::cluster and param globals as on unknown spaces.
bool isPtxGlobalVariableSpace(unsigned as) { return as <= 1 || (as >= 3 && as <= 5); }

/// PTX cannot initialize shared (3) or local (5) variables: the backend
/// aborts ("initial value of 'x' is not allowed in addrspace(3)") unless the
/// initial value is zero or undefined, the form it ignores.
bool hasForbiddenInitialValue(LLVM::GlobalOp global) {
  unsigned as = global.getAddrSpace();
  if (as != 3 && as != 5)
    return false;
  if (Attribute value = global.getValueOrNull()) {
    if (auto i = dyn_cast<IntegerAttr>(value))
      return !i.getValue().isZero();
    if (auto f = dyn_cast<FloatAttr>(value))
      return !f.getValue().isZero();
    if (auto dense = dyn_cast<DenseElementsAttr>(value))
      return !(dense.isSplat() && ((isa<IntegerType>(dense.getElementType()) &&
                                    dense.getSplatValue<APInt>().isZero()) ||
                                   (isa<FloatType>(dense.getElementType()) &&
                                    dense.getSplatValue<APFloat>().isZero())));
    return true; // strings and other attributes: not provably zero
  }
  if (Block *init = global.getInitializerBlock()) {
    Operation *ret = init->getTerminator();
    Operation *def = ret && ret->getNumOperands() == 1
                         ? ret->getOperand(0).getDefiningOp()
                         : nullptr;
    return !(def && isa<LLVM::UndefOp, LLVM::PoisonOp, LLVM::ZeroOp>(def));
  }
  return false;
}

LogicalResult checkAddressSpaces(ModuleOp module) {
  bool ok = true;
  // Pointers may also be tensor-memory addresses (6, tcgen05's operands);
  // no global lives there.
  auto bad = [](Type type) {
    auto ptr = dyn_cast<LLVM::LLVMPointerType>(type);
    return ptr && !isPtxAddressSpace(ptr.getAddressSpace()) &&
           ptr.getAddressSpace() != 6;
  };
  module.walk([&](gpu::GPUModuleOp gpuModule) {
    gpuModule.walk([&](Operation *op) {
      if (!ok)
        return WalkResult::interrupt();
      if (auto global = dyn_cast<LLVM::GlobalOp>(op)) {
        if (!isPtxGlobalVariableSpace(global.getAddrSpace())) {
          global.emitOpError() << "addr_space = " << global.getAddrSpace()
                               << " is not a PTX address space a global "
                                  "variable can live in (0, 1, 3, 4 or 5)";
          ok = false;
        } else if (std::optional<uint64_t> align = global.getAlignment();
                   align && (*align == 0 || !llvm::isPowerOf2_64(*align) ||
                             *align > (uint64_t(1) << 32))) {
          // LLVM asserts on such an alignment when it translates the global
          // (found by the fuzzer: alignment = -2^63).
          global.emitOpError()
              << "alignment = " << static_cast<int64_t>(*align)
              << " is not a power of two of at most 2^32 bytes";
          ok = false;
        } else if (hasForbiddenInitialValue(global)) {
          global.emitOpError()
              << "addr_space = " << global.getAddrSpace()
              << ": PTX cannot initialize a "
              << (global.getAddrSpace() == 3 ? "shared" : "local")
              << " variable; leave the initial value out (or make it zero)";
          ok = false;
        }
      }
      auto report = [&](Type type) {
        op->emitOpError() << "uses " << type
                          << ", a pointer into an address space PTX does not "
                             "have (0, 1, 3, 4, 5, 6, 7 or 101)";
        ok = false;
      };
      for (Type t : op->getResultTypes())
        if (ok && bad(t))
          report(t);
      for (Region &region : op->getRegions())
        for (Block &block : region)
          for (BlockArgument arg : block.getArguments())
            if (ok && bad(arg.getType()))
              report(arg.getType());
      return WalkResult::advance();
    });
  });
  return success(ok);
}

/// A gpu.module body holds functions and globals. Upstream verifiers accept
/// an instruction-like op there too (an `nvvm.elect.sync` left between two
/// functions), and LLVM IR translation then crashes inserting it into no
/// basic block (found by the fuzzer). Reject such ops before lowering: they
/// have no regions and are not symbols.
LogicalResult checkModuleBodies(ModuleOp module) {
  bool ok = true;
  module.walk([&](gpu::GPUModuleOp gpuModule) {
    for (Operation &op : gpuModule.getBody()->getOperations()) {
      if (op.getNumRegions() > 0 || isa<SymbolOpInterface>(op) ||
          op.hasTrait<OpTrait::IsTerminator>())
        continue;
      op.emitOpError() << "is directly in the body of gpu.module @"
                       << gpuModule.getName()
                       << ": only functions and globals may be there (move "
                          "it into a function)";
      ok = false;
    }
    // `llvm.getelementptr` keeps constant indices in 29 signed bits
    // (GEPArg); the parser accepts any i32, and the first fold of a larger
    // one asserts (found by the fuzzer: `%p[2147483647]`).
    gpuModule.walk([&](LLVM::GEPOp gep) {
      for (int32_t index : gep.getRawConstantIndices()) {
        if (index == LLVM::GEPOp::kDynamicIndex)
          continue;
        if (index < -(1 << 28) || index >= (1 << 28)) {
          gep.emitOpError() << "constant index " << index
                            << " does not fit the 29 bits the LLVM dialect "
                               "keeps for it; pass it as a value";
          ok = false;
        }
      }
    });
    // A declaration cannot take a pipeline or a state: the barriers and the
    // state arithmetic are inlined into the code that uses them, and there
    // is no body to inline into (the conversion otherwise fails with
    // "failed to legalize operation 'func.func'").
    gpuModule.walk([&](FunctionOpInterface fn) {
      if (!fn.isExternal())
        return;
      for (Type t : fn.getArgumentTypes())
        if (isa<PipelineType, StateType>(t)) {
          fn->emitOpError() << "is a declaration taking " << t
                            << ": pipelines and states can only be passed to "
                               "functions defined in the same gpu.module";
          ok = false;
          return;
        }
    });
  });
  return success(ok);
}

/// Numbers the pipelines for the watchdog report and records their names as
/// the module attribute `pipeline.watchdog_names`.
SmallVector<WatchdogPipeInfo> assignWatchdogIds(ModuleOp module) {
  Builder b(module.getContext());
  SmallVector<Attribute> names;
  SmallVector<WatchdogPipeInfo> infos;
  // Per symbol table: barrier entries given so far (the dump's order).
  llvm::DenseMap<Operation *, int64_t> entries;
  module.walk([&](CreateOp create) {
    PipelineType type = create.getType();
    WatchdogPipeInfo info;
    info.scope = create->getParentWithTrait<OpTrait::SymbolTable>();
    if (type.hasBarriers()) {
      info.numBarriers = type.getNumBarriers();
      info.stages = type.getStages();
      info.order = type.getKind() == PipelineKind::Order;
      info.fullTx = getKindTraits(type.getKind()).txBytes;
      int64_t &used = entries[info.scope];
      // A ledger only for a pipeline whose entries all fit in the dump.
      if (info.scope &&
          used + info.numBarriers <= kWatchdogMaxBarrierEntries) {
        info.firstEntry = used;
        create->setAttr(kLedgerFirstAttr, b.getI64IntegerAttr(used));
      }
      used = std::min<int64_t>(used + info.numBarriers,
                               kWatchdogMaxBarrierEntries);
    }
    infos.push_back(info);
    std::string name;
    if (std::optional<StringRef> given = create.getName()) {
      name = given->str();
    } else {
      llvm::raw_string_ostream os(name);
      os << "pipeline@" << create.getLoc();
    }
    create->setAttr("pipeline.watchdog_id",
                    b.getI32IntegerAttr(static_cast<int32_t>(names.size())));
    names.push_back(b.getStringAttr(name));
  });
  module->setAttr("pipeline.watchdog_names", b.getArrayAttr(names));
  for (auto [scope, used] : entries)
    if (scope && used > 0)
      scope->setAttr(kLedgerEntriesAttr, b.getI64IntegerAttr(used));
  return infos;
}

struct ConvertPipelineToNVVMPass
    : public pipeline::impl::ConvertPipelineToNVVMBase<
          ConvertPipelineToNVVMPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    MLIRContext *ctx = &getContext();

    PipelineLoweringOptions options;
    options.chip = chip;
    options.watchdog = watchdog;
    options.watchdogTimeoutNs = watchdogTimeoutNs;

    if (failed(checkModuleBodies(module)) ||
        failed(checkLaunchBounds(module)) ||
        failed(checkAddressSpaces(module)) ||
        failed(checkTcgen05Targets(module, options)) ||
        failed(checkTxCountsDerived(module)) ||
        failed(checkLoweringTargets(module, /*onlyWithPipelineIR=*/true)))
      return signalPassFailure();
    SmallVector<WatchdogPipeInfo> pipeInfos;
    if (options.watchdog) {
      if (failed(checkWatchdogSymbols(module)))
        return signalPassFailure();
      pipeInfos = assignWatchdogIds(module);
    }

    // Decided on the pipeline IR, before any region is rewritten.
    ElectHoisting hoisting;
    if (electOnce) {
      analyzeElectHoisting(module, hoisting);
      options.electHoisting = &hoisting;
    }

    LowerToLLVMOptions llvmOptions(ctx);
    LLVMTypeConverter converter(ctx, llvmOptions);
    populatePipelineToNVVMTypeConversions(converter);

    RewritePatternSet patterns(ctx);
    populatePipelineToNVVMConversionPatterns(converter, patterns, options);

    ConversionTarget target(*ctx);
    target.addIllegalDialect<PipelineDialect>();
    target.addLegalDialect<LLVM::LLVMDialect, NVVM::NVVMDialect,
                           arith::ArithDialect, cf::ControlFlowDialect,
                           gpu::GPUDialect>();
    target.markUnknownOpDynamicallyLegal([](Operation *) { return true; });
    // Loops and branches that carry states change their types with them.
    scf::populateSCFStructuralTypeConversionsAndLegality(converter, patterns,
                                                         target);
    if (failed(applyPartialConversion(module, target, std::move(patterns))))
      return signalPassFailure();
    // The names go into each gpu.module with a bounded wait, where the
    // runner can read them (the module attribute stays for compile-time
    // tools such as the GPU bundle builder).
    if (options.watchdog) {
      addWatchdogNames(module, module->getAttrOfType<ArrayAttr>(
                                   "pipeline.watchdog_names"));
      finalizeWatchdog(module, pipeInfos);
      // Only the conversion reads it (the ledger's size).
      module.walk([](Operation *op) { op->removeAttr(kLedgerEntriesAttr); });
    }
  }
};
} // namespace

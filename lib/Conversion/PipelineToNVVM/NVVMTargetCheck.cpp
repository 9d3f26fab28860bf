//===- NVVMTargetCheck.cpp - #nvvm.target values that cannot crash -*- C++ -*-===//
//
// What upstream MLIR 22.1.8 does with each parameter of `#nvvm.target`, and
// so why each rule below exists:
//
//   chip      NVVMTargetAttr::verifyTarget (run by gpu.module's verifier, so
//             while parsing) reads it with NVVMCheckSMVersion::
//             getTargetSMVersionFromStr: `drop_front(3)` asserts on fewer
//             than 3 characters, and a chip whose digits do not parse
//             ("abc", "sm_x", "sm_99999999999") leaves the version
//             uninitialized (accepted or not at random). Then
//             gpu-module-to-binary hands the chip to the NVPTX back end,
//             which only warns on an unknown processor and then aborts in
//             instruction selection ("LLVM ERROR: Cannot select"). Rule: a
//             processor of the NVPTX back end (its own table), whatever
//             `verifyTarget` says, since the back end reads it regardless.
//   features  given to the NVPTX back end as they are: "-ptx88" or "-sm_90a"
//             remove what the chip implies and instruction selection aborts;
//             a PTX version below the chip's ("+ptx60" on sm_90a) ends the
//             process with "LLVM ERROR: PTX version 6.0 does not support
//             target" when the TargetMachine is built. Rule: comma-separated
//             "+ptxNN" that the back end knows, the highest at least the
//             chip's minimum (and below 9.0 for sm_101, renamed sm_110).
//   triple    the NVPTX serializer builds a TargetMachine for it: another
//             registered target gets NVVM intrinsics it cannot select. Rule:
//             an NVPTX triple (nvptx64 or nvptx).
//   O         upstream's attribute verifier takes 0-3 (the parser checks it;
//             an out-of-range value given to NVVMTargetAttr::get, as
//             nvvm-attach-target does with its option, asserts). Same rule,
//             checked before any attribute is built.
//   flags     `ptxas-cmd-options` is cast<ArrayAttr> when ptxas runs. Rule:
//             an array when present.
//   link      upstream's verifier requires strings; nothing more to check.
//
//===----------------------------------------------------------------------===//

#include "pipeline-mlir/Conversion/PipelineToNVVM/NVVMTargetCheck.h"

#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Operation.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Config/Targets.h"
#include "llvm/MC/MCSubtargetInfo.h"
#include "llvm/MC/TargetRegistry.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/TargetParser/Triple.h"

using namespace mlir;

namespace {

/// The NVPTX back end's processor and feature tables (what a TargetMachine
/// for the chip would read), built once per process; null when LLVM was
/// built without NVPTX.
const llvm::MCSubtargetInfo *nvptxTables() {
  static const llvm::MCSubtargetInfo *tables =
      []() -> const llvm::MCSubtargetInfo * {
#if LLVM_HAS_NVPTX_TARGET
    LLVMInitializeNVPTXTargetInfo();
    LLVMInitializeNVPTXTargetMC();
    llvm::Triple triple("nvptx64-nvidia-cuda");
    std::string error;
    const llvm::Target *target =
        llvm::TargetRegistry::lookupTarget(triple, error);
    if (!target)
      return nullptr;
    // Lives as long as the process, like the target registry it reads.
    return target->createMCSubtargetInfo(triple, /*CPU=*/"", /*Features=*/"");
#else
    return nullptr;
#endif
  }();
  return tables;
}

/// Without NVPTX tables: the shape upstream's parser of the chip expects,
/// "sm_" then at least two digits that fit an int, then an optional a or f.
bool looksLikeSmChip(StringRef chip) {
  if (!chip.consume_front("sm_"))
    return false;
  if (chip.ends_with("a") || chip.ends_with("f"))
    chip = chip.drop_back();
  unsigned version;
  return chip.size() >= 2 && llvm::all_of(chip, llvm::isDigit) &&
         !chip.getAsInteger(10, version) && version >= 20 && version < 10000;
}

bool isKnownChip(StringRef chip) {
  if (const llvm::MCSubtargetInfo *tables = nvptxTables())
    return tables->isCPUStringValid(chip);
  return looksLikeSmChip(chip);
}

bool isKnownPtxFeature(StringRef name) {
  if (!name.starts_with("ptx") || name.size() < 5 ||
      !llvm::all_of(name.drop_front(3), llvm::isDigit))
    return false;
  const llvm::MCSubtargetInfo *tables = nvptxTables();
  if (!tables)
    return true; // the shape is all that can be checked
  return llvm::any_of(tables->getAllProcessorFeatures(),
                      [&](const llvm::SubtargetFeatureKV &kv) {
                        return name == kv.Key;
                      });
}

/// The version of a "ptxNN" feature name, or 0.
unsigned ptxVersionOf(StringRef name) {
  unsigned version = 0;
  if (!name.consume_front("ptx") || name.getAsInteger(10, version))
    return 0;
  return version;
}

/// The lowest PTX version the NVPTX back end accepts for `chip`: LLVM
/// 22.1.8's getMinPTXVersionForSM (in the back end's subtarget), code and not
/// a table MC exposes; it ends the process (reportFatalUsageError) when the
/// features ask for less. Checked against `llc -mcpu=<chip> -mattr=+ptx32`
/// for every processor of that LLVM. A chip missing here gets 9.0, the
/// newest: that can only reject more.
unsigned minimumPtxVersion(StringRef chip) {
  bool arch = chip.ends_with("a"), family = chip.ends_with("f");
  StringRef digits = chip.drop_front(3);
  if (arch || family)
    digits = digits.drop_back();
  unsigned sm = 0;
  if (!chip.starts_with("sm_") || digits.getAsInteger(10, sm))
    return 90;
  switch (sm) {
  case 20: case 21: case 30: case 35: return 32;
  case 32: case 50: return 40;
  case 37: case 52: return 41;
  case 53: return 42;
  case 60: case 61: case 62: return 50;
  case 70: return 60;
  case 72: return 61;
  case 75: return 63;
  case 80: return 70;
  case 86: return 71;
  case 87: return 74;
  case 89: return 78;
  case 90: return arch ? 80 : 78;
  case 100: case 101: return family ? 88 : 86;
  case 120: return family ? 88 : 87;
  case 103: case 121: return 88;
  default: return 90; // sm_88, sm_110 and chips newer than this table
  }
}

std::string quoted(StringRef s) { return ("\"" + s + "\"").str(); }

} // namespace

std::string pipeline::nvvmTargetProblem(int64_t optLevel, StringRef triple,
                                        StringRef chip, StringRef features,
                                        DictionaryAttr flags, ArrayAttr link) {
  if (!isKnownChip(chip))
    return "chip " + quoted(chip) +
           " is not a processor of LLVM's NVPTX back end (expected "
           "sm_<version>[a|f] such as sm_90a or sm_100a)";
  if (optLevel < 0 || optLevel > 3)
    return "O = " + std::to_string(optLevel) +
           " is not an optimization level (0 to 3)";
  if (!llvm::Triple(triple).isNVPTX())
    return "triple " + quoted(triple) +
           " is not an NVPTX triple (expected nvptx64-nvidia-cuda)";
  SmallVector<StringRef> entries;
  features.split(entries, ',', /*MaxSplit=*/-1, /*KeepEmpty=*/false);
  unsigned ptx = 0;
  for (StringRef entry : entries) {
    StringRef name = entry.trim();
    if (!name.consume_front("+") || !isKnownPtxFeature(name))
      return "features " + quoted(features) + ": " + quoted(entry.trim()) +
             " is not \"+ptx<version>\" for a PTX ISA version LLVM's NVPTX "
             "back end knows (features may only raise the PTX version, "
             "such as \"+ptx88\")";
    ptx = std::max(ptx, ptxVersionOf(name));
  }
  if (unsigned needed = minimumPtxVersion(chip); ptx && ptx < needed)
    return "features " + quoted(features) + " ask for PTX " +
           std::to_string(ptx / 10) + "." + std::to_string(ptx % 10) +
           ", below the PTX " + std::to_string(needed / 10) + "." +
           std::to_string(needed % 10) + " that chip " + quoted(chip) +
           " needs";
  // PTX 9.0 renamed sm_101 to sm_110: the back end then selects none of
  // sm_101's own instructions ("Cannot select" on tcgen05).
  if (chip.starts_with("sm_101") && ptx >= 90)
    return "features " + quoted(features) + " ask for PTX 9.0 or later, "
           "where chip " + quoted(chip) + " is called sm_110";
  if (flags)
    if (Attribute options = flags.get("ptxas-cmd-options"))
      if (!isa<ArrayAttr>(options))
        return "flag ptxas-cmd-options must be an array of strings";
  if (link && !llvm::all_of(link, llvm::IsaPred<StringAttr>))
    return "link must be an array of strings";
  return "";
}

LogicalResult pipeline::checkNVVMTargets(Operation *root) {
  bool ok = true;
  root->walk([&](Operation *op) {
    op->getAttrDictionary().walk([&](NVVM::NVVMTargetAttr target) {
      std::string problem = nvvmTargetProblem(
          target.getO(), target.getTriple(), target.getChip(),
          target.getFeatures(), target.getFlags(), target.getLink());
      if (problem.empty())
        return;
      // At the op's location, without the op: a gpu.module printed as a
      // note would be the whole kernel.
      emitError(op->getLoc()) << "invalid " << target << ": " << problem;
      ok = false;
    });
  });
  return success(ok);
}

//===- CpuSetTarget.cpp - record the CPU a module is compiled for ---------===//
//
// After (cpu=x86-64-v3):
//   module attributes {q3.target = {backend = "cpu", cpu = "x86-64-v3",
//       features = ["sse4.2", "popcnt", "ssse3", "avx", "avx2", "fma", "f16c", "bmi2"],
//       llvm_cpu = "x86-64-v3"}} { ... }
//
//===----------------------------------------------------------------------===//
#include "backends/cpu/CpuTarget.h"
#include "backends/cpu/passes/CpuPasses.h"
#include "backends/cpu/passes/PassErrors.h"
#include "ir/Q3Dialect.h"
#include "mlir/IR/TypeUtilities.h"

#include <algorithm>

namespace q3::cpu {
#define GEN_PASS_DEF_CPUSETTARGET
#include "backends/cpu/passes/CpuPasses.h.inc"
} // namespace q3::cpu

namespace q3::cpu {
namespace {

struct CpuSetTargetPass : impl::CpuSetTargetBase<CpuSetTargetPass> {
  using CpuSetTargetBase::CpuSetTargetBase;
  void runOnOperation() override {
    const mlir::FailureOr<CpuTarget> target =
        valueOrPassError(getOperation(), "cpu-set-target", [&] { return resolveCpuTarget(cpu); });
    if (mlir::failed(target) || mlir::failed(expectCacheTheKernelsStore(*target)))
      return signalPassFailure();
    setTargetAttribute(getOperation(), *target);
  }

  /// The CPU kernels store f32, bf16 and f16 caches; f16 is converted with
  /// F16C (x86-64-v3 and newer). Refuse the rest here, before any kernel is
  /// chosen.
  mlir::LogicalResult expectCacheTheKernelsStore(const CpuTarget &target) {
    const bool hasF16c =
        std::find(target.requiredFeatures.begin(), target.requiredFeatures.end(), "f16c") !=
        target.requiredFeatures.end();
    mlir::WalkResult walk = getOperation().walk([&](mlir::func::FuncOp function) {
      for (mlir::Type type : function.getArgumentTypes()) {
        auto cache = type.dyn_cast<ir::KVCacheType>();
        if (!cache)
          continue;
        mlir::Type element = cache.getElement();
        if (element.isF32() || element.isBF16() || (element.isF16() && hasF16c))
          continue;
        if (element.isF16())
          function.emitError() << "cpu-set-target: an f16 KV cache needs the f16c feature "
                                  "(x86-64-v3 or newer), which --cpu="
                               << target.name << " lacks (--kv-cache)";
        else
          function.emitError() << "cpu-set-target: the CPU backend stores the KV cache as f32, "
                                  "bf16 or f16, not "
                               << element << " (--kv-cache)";
        return mlir::WalkResult::interrupt();
      }
      return mlir::WalkResult::advance();
    });
    return mlir::failure(walk.wasInterrupted());
  }
};

} // namespace

std::unique_ptr<mlir::Pass> createCpuSetTargetPass() {
  return std::make_unique<CpuSetTargetPass>();
}

std::unique_ptr<mlir::Pass> createCpuSetTargetPass(const CpuSetTargetOptions &options) {
  return std::make_unique<CpuSetTargetPass>(options);
}

llvm::SmallVector<mlir::func::FuncOp> kernelsOf(mlir::ModuleOp module) {
  llvm::SmallVector<mlir::func::FuncOp> kernels;
  for (auto function : module.getOps<mlir::func::FuncOp>())
    if (function->hasAttr(ir::kKernelAttrName))
      kernels.push_back(function);
  return kernels;
}

mlir::DictionaryAttr tuningOf(mlir::ModuleOp module) {
  return module->getAttrOfType<mlir::DictionaryAttr>(kTuningAttrName);
}

std::optional<int64_t> measuredInteger(mlir::ModuleOp module, llvm::StringRef key) {
  if (mlir::DictionaryAttr tuning = tuningOf(module))
    if (auto measured = tuning.getAs<mlir::IntegerAttr>(key))
      return measured.getInt();
  return std::nullopt;
}

std::optional<int64_t> measuredPrefetchBytes(mlir::ModuleOp module, llvm::StringRef key) {
  if (mlir::DictionaryAttr tuning = tuningOf(module))
    if (auto none = tuning.getAs<mlir::StringAttr>(key);
        none && none.getValue() == kNoPrefetchSpelling)
      return q3::ir::LoweringConfigAttr::kNoPrefetch;
  return measuredInteger(module, key);
}

mlir::Attribute measuredPrefetchAttr(mlir::Builder &builder, int64_t prefetchBytes) {
  if (prefetchBytes == q3::ir::LoweringConfigAttr::kNoPrefetch)
    return builder.getStringAttr(kNoPrefetchSpelling);
  return builder.getI64IntegerAttr(prefetchBytes);
}

std::optional<int64_t> tiledProductDepth(mlir::func::FuncOp kernel) {
  mlir::Operation *compute = q3::ir::kernelComputeOp(kernel);
  if (!mlir::isa_and_nonnull<q3::ir::FusedLinearOp, q3::ir::LinearOp>(compute))
    return std::nullopt;
  mlir::Type weight = compute->getOperand(1).getType();
  if (!q3::ir::hasColumnBlocks(weight) && !q3::ir::loweringOf(kernel).packsPerCall())
    return std::nullopt;
  return weight.cast<mlir::RankedTensorType>().getDimSize(1);
}

bool tiledProductIsBf16(mlir::func::FuncOp kernel) {
  mlir::Operation *compute = q3::ir::kernelComputeOp(kernel);
  return compute && compute->getNumOperands() > 1 &&
         mlir::getElementTypeOrSelf(compute->getOperand(1).getType()).isBF16();
}

} // namespace q3::cpu

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
#include "ir/Q3Dialect.h"

namespace q3::cpu {
#define GEN_PASS_DEF_CPUSETTARGET
#include "backends/cpu/passes/CpuPasses.h.inc"
} // namespace q3::cpu

namespace q3::cpu {
namespace {

struct CpuSetTargetPass : impl::CpuSetTargetBase<CpuSetTargetPass> {
  using CpuSetTargetBase::CpuSetTargetBase;
  void runOnOperation() override {
    if (failed(expectCacheTheKernelsStore()))
      return signalPassFailure();
    try {
      setTargetAttribute(getOperation(), resolveCpuTarget(cpu));
    } catch (const std::invalid_argument &error) {
      getOperation().emitError() << "cpu-set-target: " << error.what();
      signalPassFailure();
    }
  }

  /// The CPU kernels read and write f32 and bf16 caches only; refuse the rest
  /// here, before any kernel is chosen.
  mlir::LogicalResult expectCacheTheKernelsStore() {
    mlir::WalkResult walk = getOperation().walk([](mlir::func::FuncOp function) {
      for (mlir::Type type : function.getArgumentTypes())
        if (auto cache = type.dyn_cast<ir::KVCacheType>())
          if (!cache.getElement().isF32() && !cache.getElement().isBF16()) {
            function.emitError() << "cpu-set-target: the CPU backend stores the KV cache as f32 "
                                    "or bf16, not "
                                 << cache.getElement() << " (--kv-cache)";
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

} // namespace q3::cpu

//===- CpuSelectAttentionMatmul.cpp - the instructions of attention's prefill ===//
//
// After (the products run vdpbf16ps, head_dim % 32 == 0):
//   func.func private @attention_0(...) attributes {q3.kernel,
//       q3.lowering = #q3.lowering<matmul = avx512bf16>}
//
// A prefill's attention is two products per key block, queries x keys and
// probabilities x values, and on long prompts most of the prefill's time.
// With `auto` they take vdpbf16ps where the products do (the products'
// choice is the tuner's measurement of vdpbf16ps against f32 FMAs on this
// CPU, or the user's: the bf16 rounding is already accepted there), unless
// q3c compile's tuner measured this attention faster with f32 FMAs
// (q3.tuning's attention_matmul, AttentionTuner.h). AMX products leave
// attention at f32: on the Sapphire Rapids we measured, vdpbf16ps was
// slower than f32 FMAs, and attention's blocks are too small for the tile
// unit. Decode's attention streams the cache and stays f32.
//
//===----------------------------------------------------------------------===//
#include "backends/cpu/CpuTarget.h"
#include "backends/cpu/KernelSelection.h"
#include "backends/cpu/passes/CpuPasses.h"
#include "backends/cpu/passes/PassErrors.h"

namespace q3::cpu {
#define GEN_PASS_DEF_CPUSELECTATTENTIONMATMUL
#include "backends/cpu/passes/CpuPasses.h.inc"
} // namespace q3::cpu

using namespace mlir;
using namespace q3::ir;

namespace q3::cpu {
namespace {

/// Whether some product kernel of `module` runs its prefill with vdpbf16ps.
bool productsRunVdpbf16ps(ModuleOp module) {
  for (func::FuncOp kernel : kernelsOf(module))
    if (isa_and_nonnull<FusedLinearOp, LinearOp>(kernelComputeOp(kernel)) &&
        loweringOf(kernel).getMatmul() == "avx512bf16")
      return true;
  return false;
}

struct CpuSelectAttentionMatmulPass
    : impl::CpuSelectAttentionMatmulBase<CpuSelectAttentionMatmulPass> {
  using CpuSelectAttentionMatmulBase::CpuSelectAttentionMatmulBase;

  /// The choice for the module's attention kernels, or an error.
  FailureOr<std::string> resolve(ModuleOp module) {
    if (matmul == "auto") {
      DictionaryAttr tuning = tuningOf(module);
      auto measured = tuning ? tuning.getAs<StringAttr>("attention_matmul") : nullptr;
      const bool measuredF32 = measured && measured.getValue() == "f32";
      return std::string(productsRunVdpbf16ps(module) && !measuredF32 ? "avx512bf16" : "f32");
    }
    if (matmul == "f32")
      return std::string(matmul);
    if (matmul != "avx512bf16") {
      module.emitError() << "cpu-select-attention-matmul: matmul must be "
                         << choicesText(kAttentionMatmulChoices) << ", got '" << matmul << "'";
      return failure();
    }
    CpuTarget target = targetOf(module);
    if (!targetHas(target, "avx512bf16")) {
      module.emitError() << "cpu-select-attention-matmul: matmul=avx512bf16 needs AVX512-BF16, "
                            "which cpu="
                         << target.name << " does not have";
      return failure();
    }
    return std::string(matmul);
  }

  void runOnOperation() override {
    ModuleOp module = getOperation();
    const FailureOr<std::string> choice =
        valueOrPassError(module, "cpu-select-attention-matmul", [&] { return resolve(module); });
    if (failed(choice))
      return signalPassFailure();
    for (func::FuncOp kernel : kernelsOf(module)) {
      auto attention = dyn_cast_or_null<AttentionOp>(kernelComputeOp(kernel));
      if (!attention)
        continue;
      // The bf16 flash kernel reads a key row as 32-feature vectors of pairs.
      const bool flashable = attentionKernelShape(attention).bf16Flashable();
      setLowering(kernel, loweringOf(kernel).withMatmul(flashable ? *choice : "f32"));
    }
  }
};

} // namespace

std::unique_ptr<mlir::Pass> createCpuSelectAttentionMatmulPass() {
  return std::make_unique<CpuSelectAttentionMatmulPass>();
}

std::unique_ptr<mlir::Pass>
createCpuSelectAttentionMatmulPass(const CpuSelectAttentionMatmulOptions &options) {
  return std::make_unique<CpuSelectAttentionMatmulPass>(options);
}

} // namespace q3::cpu

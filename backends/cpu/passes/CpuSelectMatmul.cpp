//===- CpuSelectMatmul.cpp - the instructions of each product's prefill ---===//
//
// After (matmul=amx, K % 32 == 0):
//   func.func private @fused_linear_rms_norm_0(...) attributes
//       {q3.kernel, q3.lowering = #q3.lowering<matmul = amx>}
//
// Only bf16 products that run the column-block tiles (weights packed at load
// or per call) have a choice; f16 ones and the row-major kernels run f32.
// The choice is the target's to make by measurement (q3c compile's tuner
// records it in q3.tuning); without a measurement `auto` takes AMX where the
// target has it (2-4x the f32 rate on the machines we measured) and f32
// elsewhere, never a guess from the CPU's name.
//
//===----------------------------------------------------------------------===//
#include "backends/cpu/CpuTarget.h"
#include "backends/cpu/passes/CpuPasses.h"
#include "backends/cpu/passes/PassErrors.h"

namespace q3::cpu {
#define GEN_PASS_DEF_CPUSELECTMATMUL
#include "backends/cpu/passes/CpuPasses.h.inc"
} // namespace q3::cpu

using namespace mlir;
using namespace q3::ir;

namespace q3::cpu {
namespace {

struct CpuSelectMatmulPass : impl::CpuSelectMatmulBase<CpuSelectMatmulPass> {
  using CpuSelectMatmulBase::CpuSelectMatmulBase;

  /// The choice for the whole module, or an error message.
  FailureOr<std::string> resolve(ModuleOp module) {
    CpuTarget target = targetOf(module);
    const bool amx = targetHas(target, "amx-tile") && targetHas(target, "amx-bf16") &&
                     targetHas(target, "avx512bf16");
    std::string choice = matmul;
    if (choice == "auto") {
      DictionaryAttr tuning = tuningOf(module);
      auto measured = tuning ? tuning.getAs<StringAttr>("matmul") : nullptr;
      choice = measured ? measured.str() : (amx ? "amx" : "f32");
    }
    if (choice == "f32")
      return choice;
    if (choice == "avx512bf16" && targetHas(target, "avx512bf16"))
      return choice;
    if (choice == "amx" && amx)
      return choice;
    if (choice != "avx512bf16" && choice != "amx") {
      module.emitError() << "cpu-select-matmul: matmul must be "
                         << choicesText(kProductMatmulChoices) << ", got '" << choice << "'";
      return failure();
    }
    module.emitError() << "cpu-select-matmul: matmul=" << choice << " needs "
                       << (choice == "amx" ? "AMX-BF16 and AVX512-BF16" : "AVX512-BF16")
                       << ", which cpu=" << target.name
                       << " does not have (use --cpu=host on a CPU that has it)";
    return failure();
  }

  void runOnOperation() override {
    ModuleOp module = getOperation();
    const FailureOr<std::string> choice =
        valueOrPassError(module, "cpu-select-matmul", [&] { return resolve(module); });
    if (failed(choice))
      return signalPassFailure();
    for (func::FuncOp kernel : kernelsOf(module)) {
      std::optional<int64_t> depth = tiledProductDepth(kernel);
      if (!depth)
        continue;
      // vdpbf16ps and the tile unit multiply bf16; an f16 weight widens to f32.
      if (!tiledProductIsBf16(kernel)) {
        setLowering(kernel, loweringOf(kernel).withMatmul("f32"));
        continue;
      }
      // The tile unit takes 32 k per step (16 rows of 64 bytes) and reads
      // weights packed at load. Left to auto, a product packed per call
      // (--weight-packing=per-call) takes the target's other bf16 product.
      if (*choice == "amx" && loweringOf(kernel).packsPerCall() && matmul == "auto") {
        setLowering(kernel, loweringOf(kernel).withMatmul("avx512bf16"));
        continue;
      }
      if (*choice == "amx" && loweringOf(kernel).packsPerCall()) {
        kernel.emitError() << "cpu-select-matmul: matmul=amx reads weights packed at load, and @"
                           << kernel.getSymName()
                           << " packs its weight per call (use --weight-packing=at-load)";
        return signalPassFailure();
      }
      const std::string kernelChoice = *choice == "amx" && *depth % 32 != 0 ? "f32" : *choice;
      setLowering(kernel, loweringOf(kernel).withMatmul(kernelChoice));
    }
  }
};

} // namespace

std::unique_ptr<mlir::Pass> createCpuSelectMatmulPass() {
  return std::make_unique<CpuSelectMatmulPass>();
}

std::unique_ptr<mlir::Pass> createCpuSelectMatmulPass(const CpuSelectMatmulOptions &options) {
  return std::make_unique<CpuSelectMatmulPass>(options);
}

} // namespace q3::cpu

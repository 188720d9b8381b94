//===- PrologueGainPass.cpp - vulkan-prologue-gain ------------------------===//
//
// fuse-rmsnorm-matmul folds an RMSNorm gain into the weights that follow it
// (q3.fold_gain, f32: exact). Streamed as f32, those weights double the bytes
// a bf16 checkpoint reads per decode token. So when every dispatch of a
// fused_linear kernel reads fold_gain(W, g), or concat_rows of such folds
// sharing one g, with checkpoint weights Wi of one dtype, the kernel binds
// the Wi stacked as stored and applies g to its input in the prologue
// (x * g): the same arithmetic to f32 rounding. f32 checkpoints keep the
// fold: it streams no more bytes and saves the prologue's multiplies.
//
//   q3.dispatch @fused_linear_rms_norm_0(%x, %folded)   with %folded =
//       q3.concat_rows(fold_gain(%wq, %g), fold_gain(%wk, %g), fold_gain(%wv, %g))
//   func.func private @fused_linear_rms_norm_0(...) attributes {q3.kernel,
//       q3.lowering_config = {prologue_gain = {gain = bf16, weight = bf16},
//                             target = "vulkan"}}
//
// (the element types the kernel then reads: the weight's and the gain's).
//
//===----------------------------------------------------------------------===//
#include "backends/vulkan/LoweringConfig.h"
#include "backends/vulkan/PrologueGain.h"
#include "backends/vulkan/VulkanPasses.h"
#include "ir/BuildGraph.h"
#include "ir/Q3Ops.h"

#include "mlir/IR/BuiltinOps.h"

#include <map>

using namespace mlir;

namespace q3::vulkan {
namespace {

struct PrologueGainPass : PassWrapper<PrologueGainPass, OperationPass<ModuleOp>> {
  MLIR_DEFINE_EXPLICIT_INTERNAL_INLINE_TYPE_ID(PrologueGainPass)
  StringRef getArgument() const override { return "vulkan-prologue-gain"; }
  StringRef getDescription() const override {
    return "Vulkan: apply folded RMSNorm gains in the matmul prologue, weights as stored";
  }
  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto forward = module.lookupSymbol<func::FuncOp>(ir::kEntryPoint);
    if (!forward)
      return;
    std::map<std::string, std::optional<UnfoldedWeight>> everyDispatch;
    forward.walk([&](ir::DispatchOp dispatch) {
      std::optional<UnfoldedWeight> unfolded;
      if (dispatch.getNumOperands() > 1)
        unfolded = unfoldGain(dispatch.getOperand(1));
      auto [it, inserted] = everyDispatch.try_emplace(dispatch.getKernel().str(), unfolded);
      if (!inserted && !unfolded)
        it->second.reset();
    });
    auto element = [](Value v) {
      return TypeAttr::get(v.getType().cast<RankedTensorType>().getElementType());
    };
    for (auto &[name, unfolded] : everyDispatch) {
      auto kernel = module.lookupSymbol<func::FuncOp>(name);
      if (!unfolded || !kernel || !isa_and_nonnull<ir::FusedLinearOp>(kernelAnchor(kernel)))
        continue;
      // An f32 checkpoint's folded weight streams as many bytes as the
      // weight itself: the fold stays (it costs nothing).
      if (unfolded->parts[0].getType().cast<RankedTensorType>().getElementType().isF32())
        continue;
      Builder b(module.getContext());
      setLoweringConfig(kernel, "prologue_gain",
                        b.getDictionaryAttr({b.getNamedAttr("weight", element(unfolded->parts[0])),
                                             b.getNamedAttr("gain", element(unfolded->gain))}));
    }
  }
};

} // namespace

std::unique_ptr<Pass> createPrologueGainPass() { return std::make_unique<PrologueGainPass>(); }

} // namespace q3::vulkan

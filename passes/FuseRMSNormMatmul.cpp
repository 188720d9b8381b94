//===- FuseRMSNormMatmul.cpp - RMSNorm folded into the following linears --===//
//
// For a bias-free linear, RMSNorm's row scale commutes with the product and
// its gain folds into the weight's columns:
//
//   rms_norm(x, g) W^T = (x * r) diag(g) W^T = (x (W diag(g))^T) * r,
//   r = rsqrt(mean(x^2) + eps) per row.
//
// Before:
//   %h = q3.rms_norm %x, %g {eps = 1.0e-06 : f64} : tensor<?x1024xf32>, tensor<1024xbf16> ->
//   tensor<?x1024xf32> %q = q3.linear %h, %wq : tensor<?x1024xf32>, tensor<2048x1024xbf16> ->
//   tensor<?x2048xf32>
// After:
//   %wq_g = q3.fold_gain %wq, %g : tensor<2048x1024xbf16>, tensor<1024xbf16> ->
//   tensor<2048x1024xf32> %q = q3.fused_linear %x, %wq_g {rms_norm_eps = 1.0e-06 : f64} :
//   tensor<?x1024xf32>, tensor<2048x1024xf32> -> tensor<?x2048xf32>
//
// The fold is a weight transform: q3.fold_gain reads only weights, so the
// binder evaluates it once. The folded weight is f32 so that the rewrite is
// exact to f32 rounding; with keep-weight-dtype it keeps the checkpoint's
// dtype (half the bytes for bf16, rounded, so no longer exact). For tied embeddings the final norm
// folds into a new value computed from the embedding table; the embedding lookup keeps the
// original. Norms with any other kind of user (e.g. q/k-norm feeding RoPE),
// or feeding a linear with a bias, are left alone.
//
//===----------------------------------------------------------------------===//
#include "passes/Passes.h"
#include "passes/WeightValues.h"

#include "mlir/IR/Builders.h"

namespace q3::passes {
#define GEN_PASS_DEF_FUSERMSNORMMATMUL
#include "passes/Passes.h.inc"
} // namespace q3::passes

using namespace mlir;
using namespace q3::ir;

namespace q3::passes {
namespace {

/// A linear that may absorb the norm producing `normResult`: bias-free, and
/// reading it as its input (not as its weight).
bool isFusableConsumer(Operation *user, Value normResult) {
  auto linear = dyn_cast<LinearOp>(user);
  return linear && !linear.getBias() && linear.getInput() == normResult &&
         linear.getWeight() != normResult;
}

bool canFuse(RMSNormOp norm) {
  if (norm.getInput().getType().cast<RankedTensorType>().getRank() != 2 || norm->use_empty())
    return false;
  return llvm::all_of(norm->getUsers(),
                      [&](Operation *user) { return isFusableConsumer(user, norm.getResult()); });
}

void fuseIntoLinear(RMSNormOp norm, LinearOp linear, bool keepWeightDType) {
  OpBuilder builder(linear);
  Location loc = fusedLocation({norm, linear});
  auto weightType = linear.getWeight().getType().cast<RankedTensorType>();
  Type foldedElement = keepWeightDType ? weightType.getElementType() : builder.getF32Type();
  auto foldedType = RankedTensorType::get(weightType.getShape(), foldedElement);
  Value folded = builder.create<FoldGainOp>(loc, foldedType, linear.getWeight(), norm.getGamma());
  auto fused = builder.create<FusedLinearOp>(loc, linear.getType(), norm.getInput(), folded,
                                             /*residual=*/Value(), norm.getEpsAttr(),
                                             /*swiglu=*/nullptr);
  linear.replaceAllUsesWith(fused.getResult());
  linear.erase();
}

struct FuseRMSNormMatmulPass : impl::FuseRMSNormMatmulBase<FuseRMSNormMatmulPass> {
  using FuseRMSNormMatmulBase::FuseRMSNormMatmulBase;
  void runOnOperation() override {
    SmallVector<RMSNormOp> norms;
    getOperation().walk([&](RMSNormOp norm) { norms.push_back(norm); });
    for (RMSNormOp norm : norms) {
      if (!canFuse(norm))
        continue;
      for (Operation *user : llvm::make_early_inc_range(norm->getUsers()))
        fuseIntoLinear(norm, cast<LinearOp>(user), keepWeightDType);
      norm.erase();
    }
  }
};

} // namespace

std::unique_ptr<Pass> createFuseRMSNormMatmulPass() {
  return std::make_unique<FuseRMSNormMatmulPass>();
}

std::unique_ptr<Pass> createFuseRMSNormMatmulPass(bool keepWeightDType) {
  FuseRMSNormMatmulOptions options;
  options.keepWeightDType = keepWeightDType;
  return std::make_unique<FuseRMSNormMatmulPass>(options);
}

} // namespace q3::passes

//===- FuseRMSNormMatmul.cpp - RMSNorm folded into the following linears --===//
//
// For a bias-free linear, RMSNorm's row scale commutes with the product:
//
//   rms_norm(x, g) W^T = ((x * g) W^T) * r = (x (W diag(g))^T) * r,
//   r = rsqrt(mean(x^2) + eps) per row.
//
// The product computes sum(x^2) in its prologue and scales by r in its
// epilogue. The gain g either stays an operand that the prologue applies to
// x (the weight keeps the checkpoint's bytes), or is folded into an f32 copy
// of the weight (q3.fold_gain, a weight transform the binder evaluates once).
// By default no gain is folded: folding a bf16 weight into f32 doubles its
// bytes, and even an f32 weight's fold is a copy at load (2.4 GB for the
// 0.6B shape: a 2-9 s load on the project's VMs, against 0.004 s reading the
// checkpoint in place), for a prologue multiply that costs nothing per call.
//
// Before:
//   %h = q3.rms_norm %x, %g {eps = 1.0e-06 : f64} : tensor<?x1024xf32>, tensor<1024xbf16>
//        -> tensor<?x1024xf32>
//   %q = q3.linear %h, %wq : tensor<?x1024xf32>, tensor<2048x1024xbf16> -> tensor<?x2048xf32>
// After (by default):
//   %q = q3.fused_linear %x, %wq gain %g : tensor<1024xbf16> {rms_norm_eps = 1.0e-06 : f64}
//        : tensor<?x1024xf32>, tensor<2048x1024xbf16> -> tensor<?x2048xf32>
// After (fold-gain=always, or f32-weights with an f32 weight):
//   %wq_g = q3.fold_gain %wq, %g : tensor<2048x1024xf32>, tensor<1024xbf16>
//           -> tensor<2048x1024xf32>
//   %q = q3.fused_linear %x, %wq_g {rms_norm_eps = 1.0e-06 : f64} : ...
//
// For tied embeddings the final norm folds into a new value computed from
// the embedding table; the embedding lookup keeps the original. Norms with
// any other kind of user (e.g. q/k-norm feeding RoPE), or feeding a linear
// with a bias, are left alone.
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

enum class FoldGain { F32Weights, Always, Never };

std::optional<FoldGain> parseFoldGain(StringRef name) {
  if (name == "f32-weights")
    return FoldGain::F32Weights;
  if (name == "always")
    return FoldGain::Always;
  if (name == "never")
    return FoldGain::Never;
  return std::nullopt;
}

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

void fuseIntoLinear(RMSNormOp norm, LinearOp linear, FoldGain policy) {
  OpBuilder builder(linear);
  Location loc = fusedLocation({norm, linear});
  auto weightType = linear.getWeight().getType().cast<RankedTensorType>();
  const bool fold = policy == FoldGain::Always ||
                    (policy == FoldGain::F32Weights && weightType.getElementType().isF32());
  Value weight = linear.getWeight(), gain = norm.getGamma();
  if (fold) {
    auto foldedType = RankedTensorType::get(weightType.getShape(), builder.getF32Type());
    weight = builder.create<FoldGainOp>(loc, foldedType, weight, gain);
    gain = Value();
  }
  auto fused = builder.create<FusedLinearOp>(loc, linear.getType(), norm.getInput(), weight, gain,
                                             /*residual=*/Value(), norm.getEpsAttr(),
                                             /*swiglu=*/nullptr);
  linear.replaceAllUsesWith(fused.getResult());
  linear.erase();
}

struct FuseRMSNormMatmulPass : impl::FuseRMSNormMatmulBase<FuseRMSNormMatmulPass> {
  using FuseRMSNormMatmulBase::FuseRMSNormMatmulBase;
  void runOnOperation() override {
    std::optional<FoldGain> policy = parseFoldGain(foldGain);
    if (!policy) {
      getOperation().emitError() << "fuse-rmsnorm-matmul: fold-gain must be f32-weights, always "
                                    "or never, got '"
                                 << foldGain << "'";
      return signalPassFailure();
    }
    SmallVector<RMSNormOp> norms;
    getOperation().walk([&](RMSNormOp norm) { norms.push_back(norm); });
    for (RMSNormOp norm : norms) {
      if (!canFuse(norm))
        continue;
      for (Operation *user : llvm::make_early_inc_range(norm->getUsers()))
        fuseIntoLinear(norm, cast<LinearOp>(user), *policy);
      norm.erase();
    }
  }
};

} // namespace

std::unique_ptr<Pass> createFuseRMSNormMatmulPass() {
  return std::make_unique<FuseRMSNormMatmulPass>();
}

std::unique_ptr<Pass> createFuseRMSNormMatmulPass(const std::string &foldGain) {
  FuseRMSNormMatmulOptions options;
  options.foldGain = foldGain;
  return std::make_unique<FuseRMSNormMatmulPass>(options);
}

} // namespace q3::passes

//===- FuseEpilogues.cpp - SwiGLU and residual adds into matmul epilogues -===//
//
// SwiGLU, over a merged gate/up product:
//   %gu = q3.fused_linear %x, %w {rms_norm_eps = ...} : ... -> tensor<?x6144xf32>
//   %g, %u = q3.split_columns %gu : tensor<?x6144xf32> -> tensor<?x3072xf32>, tensor<?x3072xf32>
//   %s = q3.silu %g : tensor<?x3072xf32>
//   %h = q3.mul %s, %u : tensor<?x3072xf32>
// becomes
//   %h = q3.fused_linear %x, %w {rms_norm_eps = ..., swiglu} : ... -> tensor<?x3072xf32>
//
// Residual adds:
//   %o = q3.linear %a, %wo : ...        %x1 = q3.add %x0, %o : tensor<?x1024xf32>
// becomes
//   %x1 = q3.fused_linear %a, %wo residual %x0 : ...
//
// Only products whose result has no other user are fused, so no value is
// computed twice; a linear with a bias is left alone.
//
//===----------------------------------------------------------------------===//
#include "passes/Passes.h"
#include "passes/WeightValues.h"

#include "mlir/IR/Builders.h"

namespace q3::passes {
#define GEN_PASS_DEF_FUSEEPILOGUES
#include "passes/Passes.h.inc"
} // namespace q3::passes

using namespace mlir;
using namespace q3::ir;

namespace q3::passes {
namespace {

/// A matrix product without epilogue, seen through either op kind.
struct PlainProduct {
  Operation *op;
  Value input, weight;
  Value gain;        // the prologue's RMSNorm gain, if any
  FloatAttr normEps; // null for q3.linear
};

std::optional<PlainProduct> plainProduct(Value result) {
  if (!result.hasOneUse())
    return std::nullopt;
  if (auto linear = result.getDefiningOp<LinearOp>()) {
    if (linear.getBias())
      return std::nullopt;
    return PlainProduct{linear, linear.getInput(), linear.getWeight(), Value(), nullptr};
  }
  if (auto fused = result.getDefiningOp<FusedLinearOp>()) {
    if (fused.getResidual() || fused.getSwiglu())
      return std::nullopt;
    return PlainProduct{fused, fused.getInput(), fused.getWeight(), fused.getGain(),
                        fused.getRmsNormEpsAttr()};
  }
  return std::nullopt;
}

/// silu(gate) * up where gate and up are the two halves of one product.
void fuseSwiglu(MulOp mul) {
  for (auto [siluSide, upSide] :
       {std::pair{mul.getLhs(), mul.getRhs()}, std::pair{mul.getRhs(), mul.getLhs()}}) {
    auto silu = siluSide.getDefiningOp<SiluOp>();
    if (!silu || !siluSide.hasOneUse())
      continue;
    auto split = silu.getInput().getDefiningOp<SplitColumnsOp>();
    if (!split || split.getNumResults() != 2 || silu.getInput() != split.getResult(0) ||
        upSide != split.getResult(1) || !split.getResult(0).hasOneUse() ||
        !split.getResult(1).hasOneUse() ||
        split.getResult(0).getType() != split.getResult(1).getType())
      continue;
    std::optional<PlainProduct> product = plainProduct(split.getInput());
    if (!product)
      continue;
    OpBuilder builder(mul);
    auto fused = builder.create<FusedLinearOp>(fusedLocation({product->op, split, silu, mul}),
                                               mul.getType(), product->input, product->weight,
                                               product->gain, Value(), product->normEps,
                                               builder.getUnitAttr());
    mul.replaceAllUsesWith(fused.getResult());
    mul.erase();
    silu.erase();
    split.erase();
    product->op->erase();
    return;
  }
}

/// x + product(...) with the product used only here.
void fuseResidual(AddOp add) {
  for (auto [productSide, residual] :
       {std::pair{add.getRhs(), add.getLhs()}, std::pair{add.getLhs(), add.getRhs()}}) {
    std::optional<PlainProduct> product = plainProduct(productSide);
    if (!product || residual == productSide)
      continue;
    OpBuilder builder(add);
    auto fused = builder.create<FusedLinearOp>(fusedLocation({product->op, add}), add.getType(),
                                               product->input, product->weight, product->gain,
                                               residual, product->normEps, nullptr);
    add.replaceAllUsesWith(fused.getResult());
    add.erase();
    product->op->erase();
    return;
  }
}

struct FuseEpiloguesPass : impl::FuseEpiloguesBase<FuseEpiloguesPass> {
  void runOnOperation() override {
    SmallVector<MulOp> muls;
    getOperation().walk([&](MulOp mul) { muls.push_back(mul); });
    for (MulOp mul : muls)
      fuseSwiglu(mul);
    SmallVector<AddOp> adds;
    getOperation().walk([&](AddOp add) { adds.push_back(add); });
    for (AddOp add : adds)
      fuseResidual(add);
  }
};

} // namespace

std::unique_ptr<Pass> createFuseEpiloguesPass() { return std::make_unique<FuseEpiloguesPass>(); }

} // namespace q3::passes

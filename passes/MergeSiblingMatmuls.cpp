//===- MergeSiblingMatmuls.cpp - one wide product instead of siblings -----===//
//
// Matrix products that read the same input with the same prologue become one
// product over the stacked weights, followed by a free column split:
//
// Before:
//   %q = q3.fused_linear %x, %wq {rms_norm_eps = 1.0e-06 : f64} : ... -> tensor<?x2048xf32>
//   %k = q3.fused_linear %x, %wk {rms_norm_eps = 1.0e-06 : f64} : ... -> tensor<?x1024xf32>
//   %v = q3.fused_linear %x, %wv {rms_norm_eps = 1.0e-06 : f64} : ... -> tensor<?x1024xf32>
// After:
//   %w = q3.concat_rows %wq, %wk, %wv : ... -> tensor<4096x1024xf32>
//   %qkv = q3.fused_linear %x, %w {rms_norm_eps = 1.0e-06 : f64} : ... -> tensor<?x4096xf32>
//   %q, %k, %v = q3.split_columns %qkv : tensor<?x4096xf32> -> tensor<?x2048xf32>,
//   tensor<?x1024xf32>, tensor<?x1024xf32>
//
// Siblings keep their order of appearance (gate before up). Products with an
// epilogue (residual, swiglu), a bias, another gain, or weights of another
// element type than the rest of the group are not merged.
//
//===----------------------------------------------------------------------===//
#include "passes/Passes.h"
#include "passes/WeightValues.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/MapVector.h"

namespace q3::passes {
#define GEN_PASS_DEF_MERGESIBLINGMATMULS
#include "passes/Passes.h.inc"
} // namespace q3::passes

using namespace mlir;
using namespace q3::ir;

namespace q3::passes {
namespace {

/// Products that may merge share this key: same input, same kind and
/// prologue (norm and gain), same weight element type.
struct SiblingKey {
  Value input;
  OperationName kind;
  Attribute normEps;
  Value gain;
  Type weightElementType;
  auto tuple() const {
    return std::make_tuple(input.getAsOpaquePointer(), kind.getAsOpaquePointer(),
                           normEps.getAsOpaquePointer(), gain.getAsOpaquePointer(),
                           weightElementType.getAsOpaquePointer());
  }
  bool operator<(const SiblingKey &other) const { return tuple() < other.tuple(); }
};

Type weightElementType(Value weight) {
  return weight.getType().cast<RankedTensorType>().getElementType();
}

/// The key of a mergeable product, or nothing.
std::optional<SiblingKey> siblingKey(Operation *op) {
  if (auto linear = dyn_cast<LinearOp>(op)) {
    if (linear.getBias())
      return std::nullopt;
    return SiblingKey{linear.getInput(), op->getName(), Attribute(), Value(),
                      weightElementType(linear.getWeight())};
  }
  if (auto fused = dyn_cast<FusedLinearOp>(op)) {
    if (fused.getResidual() || fused.getSwiglu())
      return std::nullopt;
    return SiblingKey{fused.getInput(), op->getName(), fused.getRmsNormEpsAttr(), fused.getGain(),
                      weightElementType(fused.getWeight())};
  }
  return std::nullopt;
}

Value weightOf(Operation *op) {
  if (auto linear = dyn_cast<LinearOp>(op))
    return linear.getWeight();
  return cast<FusedLinearOp>(op).getWeight();
}

void mergeSiblings(ArrayRef<Operation *> siblings) {
  Operation *first = siblings.front();
  OpBuilder builder(first);
  Location loc = fusedLocation(siblings);
  SmallVector<Value> weights;
  SmallVector<Type> pieceTypes;
  int64_t rows = 0;
  for (Operation *op : siblings) {
    Value weight = weightOf(op);
    hoistWeightBefore(weight, first);
    weights.push_back(weight);
    pieceTypes.push_back(op->getResult(0).getType());
    rows += weight.getType().cast<RankedTensorType>().getDimSize(0);
  }
  auto firstWeight = weights.front().getType().cast<RankedTensorType>();
  auto stackedType =
      RankedTensorType::get({rows, firstWeight.getDimSize(1)}, firstWeight.getElementType());
  Value stacked = builder.create<ConcatRowsOp>(loc, stackedType, weights);
  auto inputType = first->getOperand(0).getType().cast<RankedTensorType>();
  auto mergedType = RankedTensorType::get({inputType.getDimSize(0), rows}, builder.getF32Type());
  Value merged;
  if (auto fused = dyn_cast<FusedLinearOp>(first))
    merged = builder.create<FusedLinearOp>(loc, mergedType, fused.getInput(), stacked,
                                           fused.getGain(), Value(), fused.getRmsNormEpsAttr(),
                                           nullptr);
  else
    merged = builder.create<LinearOp>(loc, mergedType, first->getOperand(0), stacked, Value());
  auto split = builder.create<SplitColumnsOp>(loc, pieceTypes, merged);
  for (auto [op, piece] : llvm::zip(siblings, split.getResults())) {
    op->getResult(0).replaceAllUsesWith(piece);
    op->erase();
  }
}

struct MergeSiblingMatmulsPass : impl::MergeSiblingMatmulsBase<MergeSiblingMatmulsPass> {
  void runOnOperation() override {
    // Group in program order; only products of one block may merge.
    std::map<std::pair<Block *, SiblingKey>, SmallVector<Operation *>> groups;
    SmallVector<std::pair<Block *, SiblingKey>> order;
    getOperation().walk([&](Operation *op) {
      if (auto key = siblingKey(op)) {
        auto groupKey = std::make_pair(op->getBlock(), *key);
        auto &members = groups[groupKey];
        if (members.empty())
          order.push_back(groupKey);
        members.push_back(op);
      }
    });
    for (const auto &key : order)
      if (groups[key].size() > 1)
        mergeSiblings(groups[key]);
  }
};

} // namespace

std::unique_ptr<Pass> createMergeSiblingMatmulsPass() {
  return std::make_unique<MergeSiblingMatmulsPass>();
}

} // namespace q3::passes

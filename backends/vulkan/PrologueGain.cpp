#include "backends/vulkan/PrologueGain.h"

#include "ir/Q3Ops.h"

#include "mlir/IR/BuiltinTypes.h"

using namespace mlir;

namespace q3::vulkan {

std::optional<UnfoldedWeight> unfoldGain(Value weight) {
  SmallVector<Value> pieces{weight};
  if (auto concat = weight.getDefiningOp<ir::ConcatRowsOp>())
    pieces.assign(concat.getInputs().begin(), concat.getInputs().end());
  UnfoldedWeight unfolded;
  for (Value piece : pieces) {
    auto fold = piece.getDefiningOp<ir::FoldGainOp>();
    if (!fold || !fold.getWeight().getDefiningOp<ir::ParamOp>() ||
        !fold.getGamma().getDefiningOp<ir::ParamOp>())
      return std::nullopt;
    if (unfolded.gain && fold.getGamma() != unfolded.gain)
      return std::nullopt;
    auto element = [](Value v) { return v.getType().cast<RankedTensorType>().getElementType(); };
    if (!unfolded.parts.empty() && element(fold.getWeight()) != element(unfolded.parts[0]))
      return std::nullopt;
    unfolded.parts.push_back(fold.getWeight());
    unfolded.gain = fold.getGamma();
  }
  return unfolded;
}

} // namespace q3::vulkan

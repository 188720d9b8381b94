//===- PrologueGain.h - a folded weight seen through its transforms -------===//
#pragma once

#include "mlir/IR/Value.h"

#include <optional>
#include <vector>

namespace q3::vulkan {

/// fold_gain(W, g), or concat_rows(fold_gain(W1, g), fold_gain(W2, g), ...)
/// with one gain g and checkpoint weights Wi of one element type.
struct UnfoldedWeight {
  std::vector<mlir::Value> parts; // the Wi (q3.param), in row order
  mlir::Value gain;               // g (q3.param)
};

/// `weight` seen through its transforms, when it is of that form.
std::optional<UnfoldedWeight> unfoldGain(mlir::Value weight);

} // namespace q3::vulkan

//===- WeightValues.h - helpers for values computed from weights only -----===//
#pragma once

#include "mlir/IR/Operation.h"
#include "mlir/IR/Value.h"

namespace q3::passes {

/// True for q3.param results and weight transforms of them (fold_gain,
/// concat_rows): values the binder computes once, not per token.
bool isWeightValue(mlir::Value value);

/// Moves the ops that compute `weight` (and, transitively, their weight
/// operands) before `point` if they are not already, so a merged op placed at
/// `point` may use it. Weight ops read nothing but weights, so this is always
/// legal.
void hoistWeightBefore(mlir::Value weight, mlir::Operation *point);

/// A location that records every op a fused op came from.
mlir::Location fusedLocation(llvm::ArrayRef<mlir::Operation *> ops);

} // namespace q3::passes

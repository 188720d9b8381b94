//===- WeightValues.cpp ---------------------------------------------------===//
#include "passes/WeightValues.h"
#include "ir/Q3Ops.h"

#include "mlir/IR/Builders.h"

using namespace mlir;

namespace q3::passes {

bool isWeightValue(Value value) {
  Operation *def = value.getDefiningOp();
  return def && isa<ir::ParamOp, ir::FoldGainOp, ir::ConcatRowsOp>(def);
}

void hoistWeightBefore(Value weight, Operation *point) {
  Operation *def = weight.getDefiningOp();
  if (!def || def->getBlock() != point->getBlock() || def->isBeforeInBlock(point))
    return;
  for (Value operand : def->getOperands())
    hoistWeightBefore(operand, point);
  // Not moveBefore: a splice marks the whole block's op order stale, so the
  // next isBeforeInBlock renumbers every op, and one hoist per layer made the
  // pass quadratic in the number of layers (1000 layers: 67 s). Removing and
  // inserting only leaves the moved op without an index; it gets one lazily
  // from its neighbours.
  def->remove();
  point->getBlock()->getOperations().insert(Block::iterator(point), def);
}

Location fusedLocation(ArrayRef<Operation *> ops) {
  SmallVector<Location> locations;
  for (Operation *op : ops)
    locations.push_back(op->getLoc());
  return FusedLoc::get(ops.front()->getContext(), locations);
}

} // namespace q3::passes

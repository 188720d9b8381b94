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
  def->moveBefore(point);
}

Location fusedLocation(ArrayRef<Operation *> ops) {
  SmallVector<Location> locations;
  for (Operation *op : ops)
    locations.push_back(op->getLoc());
  return FusedLoc::get(ops.front()->getContext(), locations);
}

} // namespace q3::passes

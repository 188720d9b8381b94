//===- Params.cpp - the weights a q3 module needs -------------------------===//
#include "ir/Params.h"
#include "ir/Q3Ops.h"

#include "llvm/ADT/StringMap.h"

#include <stdexcept>

namespace q3::ir {

std::vector<ParamInfo> collectParams(mlir::ModuleOp module) {
  std::vector<ParamInfo> params;
  llvm::StringMap<mlir::Type> seen;
  module.walk([&](ParamOp op) {
    mlir::Type type = op.getResult().getType();
    auto [it, inserted] = seen.try_emplace(op.getName(), type);
    if (!inserted) {
      if (it->second != type)
        throw std::runtime_error("q3.param '" + op.getName().str() +
                                 "' appears twice with different types");
      return;
    }
    auto shape = type.cast<mlir::RankedTensorType>().getShape();
    params.push_back({op.getName().str(), std::vector<int64_t>(shape.begin(), shape.end())});
  });
  return params;
}

} // namespace q3::ir

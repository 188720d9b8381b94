//===- Params.h - the weights a q3 module needs ---------------------------===//
#pragma once

#include "mlir/IR/BuiltinOps.h"

#include <string>
#include <vector>

namespace q3::ir {

struct ParamInfo {
  std::string name;           // Hugging Face tensor name
  std::vector<int64_t> shape; // exact shape the weight must have
};

/// Every distinct q3.param of `module`, in order of first appearance. Two
/// params of one name with different types are reported as an error.
std::vector<ParamInfo> collectParams(mlir::ModuleOp module);

} // namespace q3::ir

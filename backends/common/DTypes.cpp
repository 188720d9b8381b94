//===- DTypes.cpp - the dtype of an MLIR element type --------------------===//
#include "backends/common/DTypes.h"

#include "mlir/IR/BuiltinTypes.h"

#include "llvm/Support/raw_ostream.h"

#include <stdexcept>
#include <string>

namespace q3::backends {

DType dtypeOf(mlir::Type type) {
  if (auto tensor = type.dyn_cast<mlir::RankedTensorType>())
    type = tensor.getElementType();
  if (type.isBF16())
    return DType::BF16;
  if (type.isF16())
    return DType::F16;
  if (type.isF32())
    return DType::F32;
  std::string text;
  llvm::raw_string_ostream os(text);
  os << type;
  throw std::runtime_error("weights and caches are stored as f32, f16 or bf16, not " + os.str());
}

} // namespace q3::backends

//===- Storage.cpp - the element type a weight or the KV cache is stored in ===//
#include "backends/common/Storage.h"

#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Types.h"

#include <stdexcept>

namespace q3::backends {

Storage storageOf(mlir::Type type) {
  if (auto tensor = type.dyn_cast<mlir::RankedTensorType>())
    type = tensor.getElementType();
  if (type.isBF16())
    return Storage::BF16;
  if (type.isF16())
    return Storage::F16;
  if (type.isF32())
    return Storage::F32;
  throw std::runtime_error("weights and caches are stored as f32, f16 or bf16");
}

const char *storageName(Storage storage) {
  switch (storage) {
  case Storage::F32:
    return "f32";
  case Storage::F16:
    return "f16";
  case Storage::BF16:
    return "bf16";
  }
  return "?";
}

int64_t storageBytes(Storage storage) { return storage == Storage::F32 ? 4 : 2; }

} // namespace q3::backends

//===- Storage.h - the element type a weight or the KV cache is stored in -===//
//
// Both backends generate kernels for weights and caches stored as f32, f16
// or bf16 (the checkpoint's dtype, or --kv-cache); this is their one name
// for it.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstdint>

namespace mlir {
class Type;
} // namespace mlir

namespace q3::backends {

enum class Storage { F32, F16, BF16 };

/// The storage of a float element type, or of a ranked tensor's elements.
/// Throws std::runtime_error for other element types.
Storage storageOf(mlir::Type type);
/// "f32", "f16" or "bf16".
const char *storageName(Storage storage);
/// Bytes of one stored element.
int64_t storageBytes(Storage storage);

} // namespace q3::backends

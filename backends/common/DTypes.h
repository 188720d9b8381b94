//===- DTypes.h - the dtype of an MLIR element type ----------------------===//
//
// Weights, gains and KV caches are stored as f32, f16 or bf16: the IR's
// element types, which both backends and the manifest writer record as the
// runtime's DType (runtime/DType.h), the one enum of the contract between
// compiler and runtime.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "runtime/DType.h"

#include <cstdint>

namespace mlir {
class Type;
} // namespace mlir

namespace q3::backends {

using runtime::DType;

/// The dtype of an f32, f16 or bf16 element type, or of a ranked tensor's
/// elements. Throws std::runtime_error naming the type for any other.
DType dtypeOf(mlir::Type type);
/// Bytes of one element, as the int64_t the compiler's shapes use.
inline int64_t dtypeBytes(DType dtype) { return int64_t(runtime::dtypeSize(dtype)); }

} // namespace q3::backends

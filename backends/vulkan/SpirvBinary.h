//===- SpirvBinary.h - edits to a serialized SPIR-V module ----------------===//
//
// MLIR 16's serializer emits no decoration for a spec constant composite, so
// the workgroup size built from specialization constants gets its
// `BuiltIn WorkgroupSize` decoration here, on the binary (the way glslang
// writes `local_size_x_id`).
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace q3::vulkan {

enum class SpirvBuiltIn : uint32_t { WorkgroupSize = 25 };

/// Adds `OpDecorate %id BuiltIn builtin` for the result id that carries the
/// debug name `name` (OpName), among the module's other decorations. Throws
/// std::runtime_error when no id has that name or the binary is malformed.
void decorateBuiltIn(std::vector<uint32_t> &binary, const std::string &name, SpirvBuiltIn builtin);

} // namespace q3::vulkan

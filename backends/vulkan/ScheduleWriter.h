//===- ScheduleWriter.h - the typed manifest of a Vulkan artifact ---------===//
//
// The backend-neutral part of a Vulkan artifact's manifest
// (runtime/Manifest.h, format "q3c-vulkan"): the weight plan, the
// activation buffers, the kernels' signatures and grids, and the dispatches
// of @forward with what the runtime binds to each operand. One Vulkan
// decision from the lowering config shapes the bindings, which is why this
// is not yet backends/common/ManifestWriter: a `cache_binding = "layer"`
// kernel binds one layer's keys and values instead of the whole cache. A
// kernel's signature is therefore the bindings of its first dispatch, not
// its function type.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "runtime/Manifest.h"

#include "mlir/IR/BuiltinOps.h"

namespace q3::vulkan {

/// The typed manifest of a dispatch-stage module after the Vulkan target
/// passes (without the "vulkan" part, which CompileModel adds).
manifest::Manifest writeSchedule(mlir::ModuleOp module);

} // namespace q3::vulkan

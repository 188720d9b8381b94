//===- ScheduleWriter.h - the weight plan and schedule of a Vulkan artifact ===//
//
// The backend-neutral half of the manifest (docs/artifact.md): the weight
// plan (checkpoint tensors and the transforms the runtime evaluates at load),
// the activation buffers, and the dispatches of @forward with what the
// runtime binds to each operand. Two Vulkan decisions from the lowering
// config shape it: a `prologue_gain` kernel binds its checkpoint weights
// stacked as stored plus the gain (after the weight), and a `cache_binding
// = "layer"` kernel binds one layer's keys and values instead of the whole
// cache.
//
// This mirrors the CPU backend's manifest writer and is to be replaced by
// the typed manifest shared by both backends (issue 10) when it lands.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "mlir/IR/BuiltinOps.h"

#include <nlohmann/json.hpp>

namespace q3::vulkan {

struct SchedulePlan {
  nlohmann::json config;   // the model's hyperparameters
  nlohmann::json weights;  // the weight plan
  nlohmann::json buffers;  // {row_bytes: [...]}
  nlohmann::json schedule; // the dispatches
  nlohmann::json output;   // the logits buffer
  int64_t decodeWeightBytes = 0;
};

/// The plan of a dispatch-stage module after the Vulkan target passes.
SchedulePlan writeSchedule(mlir::ModuleOp module);

} // namespace q3::vulkan

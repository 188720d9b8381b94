//===- LoweringConfig.h - the Vulkan target's decisions on a kernel -------===//
//
// Every decision the Vulkan target makes about a kernel lives in the IR, in
// the kernel function's `q3.lowering_config` dictionary, set by one target
// pass per decision (VulkanPasses.h) and read by the kernel generators; so
// `q3c dump --target vulkan` prints what the artifact runs:
//
//   func.func private @fused_linear_rms_norm_1(...) attributes {q3.kernel,
//     q3.lowering_config = {target = "vulkan",
//       decode = "matvec", decode_workgroup = 128 : i64,
//       prefill = "tiled_matmul", prefill_tile = array<i64: 32, 64, 16, 4, 4>,
//       weight_rows_per_part = 65536 : i64}}
//
//===----------------------------------------------------------------------===//
#pragma once

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinAttributes.h"

#include <optional>

namespace q3::vulkan {

inline constexpr const char *kLoweringConfigAttr = "q3.lowering_config";

/// Sets `name` in the kernel's lowering config (creating it, target "vulkan").
void setLoweringConfig(mlir::func::FuncOp kernel, llvm::StringRef name, mlir::Attribute value);
/// The entry `name` of the kernel's lowering config, or null.
mlir::Attribute loweringConfig(mlir::func::FuncOp kernel, llvm::StringRef name);
std::optional<int64_t> loweringConfigInt(mlir::func::FuncOp kernel, llvm::StringRef name);
bool loweringConfigFlag(mlir::func::FuncOp kernel, llvm::StringRef name);

/// The op a kernel computes (the last one that is not a view).
mlir::Operation *kernelAnchor(mlir::func::FuncOp kernel);

} // namespace q3::vulkan

//===- KernelFacts.h - what a dispatch-stage kernel computes, for Vulkan --===//
//
// The shapes and element types a Vulkan kernel generator needs, read from a
// kernel function (its compute op and argument types) and the decisions
// already in its lowering config. The decision passes and the kernel
// selection both use these, so they agree on what a kernel reads.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "backends/vulkan/Kernels.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

#include <optional>

namespace q3::vulkan {

using backends::dtypeOf;

/// A matrix product kernel (q3.fused_linear, or q3.linear without bias) as
/// the Vulkan kernels read it: the weight's element type, the gain operand's
/// (applied in the prologue), K, N.
std::optional<LinearKernel> linearFacts(mlir::func::FuncOp kernel);

/// An embedding kernel's table.
std::optional<EmbeddingKernel> embeddingFacts(mlir::func::FuncOp kernel);

/// An attention kernel's heads, head size, GQA map and scale (the decisions
/// and the cache's element type are not in it).
std::optional<AttentionKernel> attentionFacts(mlir::func::FuncOp kernel);

} // namespace q3::vulkan

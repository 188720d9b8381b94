//===- KernelSelection.h - a dispatch-stage kernel -> its Vulkan kernel ---===//
#pragma once

#include "backends/vulkan/KernelCompiler.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace q3::vulkan {

/// The Vulkan kernel of a q3.kernel function, as its compute op and its
/// lowering config (set by the target passes) describe it. Throws
/// std::runtime_error naming the op when there is no Vulkan version of it.
CompiledKernel compileKernel(KernelCompiler &compiler, mlir::func::FuncOp kernel);

} // namespace q3::vulkan

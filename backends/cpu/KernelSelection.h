//===- KernelSelection.h - the CPU kernel of each q3.kernel function ------===//
#pragma once

#include "backends/cpu/KernelSource.h"
#include "ir/Q3Ops.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"

#include <string>

namespace q3::cpu {

/// The MLIR source of the CPU kernel for `kernel` (a q3.kernel function of a
/// target-stage module): the template of its compute op, specialized to its
/// argument types (weight dtype and layout, the gain, the cache's element
/// type) and its q3.lowering (grid, prefill instructions, tiles, prefetch). Throws
/// std::runtime_error naming the kernel when the IR asks for something the
/// templates cannot do, or when the lowering disagrees with the template.
std::string cpuKernelSource(mlir::ModuleOp module, mlir::func::FuncOp kernel);

/// The shape of `attention` as the CPU attention kernel sees it (heads, head
/// size, the GQA map, the scale; name and cache type left to the caller):
/// what decides its workgroups (cpu-assign-grids) and its template.
AttentionKernel attentionKernelShape(q3::ir::AttentionOp attention);

/// The thread scratch (FusedLinearKernel::threadScratch,
/// AttentionKernel::threadScratch) the CPU kernel for `kernel` takes when
/// built with `lowering` (its own or a variant's); none for kernels other
/// than the products and attention. Throws as cpuKernelSource.
ThreadScratch cpuKernelThreadScratch(mlir::func::FuncOp kernel,
                                     q3::ir::LoweringConfigAttr lowering);

/// Whether `kernel` is a product whose prefill, built with `lowering`, can
/// multiply a few rows against its weight rows in place
/// (FusedLinearKernel::inPlacePrefillFits). Throws as cpuKernelSource.
bool cpuProductCanReadPrefillInPlace(mlir::func::FuncOp kernel,
                                     q3::ir::LoweringConfigAttr lowering);

/// The same kernel built with one of its `q3.variants` lowerings instead,
/// named runtime::variantKernelName(kernel, variantName(kernel, variant)).
std::string cpuKernelVariantSource(mlir::ModuleOp module, mlir::func::FuncOp kernel,
                                   q3::ir::LoweringConfigAttr variant);

} // namespace q3::cpu

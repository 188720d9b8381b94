//===- FusedLinearDots.h - the dot products of the fused_linear kernel ----===//
//
// Private MLIR functions of one fused_linear kernel, each for the kernel's
// shapes: the per-row dot product (decode), the 4-row and 4 x 4 register
// tiles (prefill), and the row's inverse RMS (the norm prologue).
//
//===----------------------------------------------------------------------===//
#pragma once

#include "backends/cpu/KernelSource.h"

#include <string>

namespace q3::cpu::detail {

/// @<name>_dot(x, w, t, n) -> f32
std::string dotFunction(const FusedLinearKernel &kernel, const std::string &xType,
                        const std::string &weightType);
/// @<name>_dot4(x, w, t, n) -> 4 x f32: rows t .. t+3 against weight row n
std::string dot4Function(const FusedLinearKernel &kernel, const std::string &xType,
                         const std::string &weightType);
/// @<name>_dot4x4(x, w, t, n) -> 16 x f32: rows t .. t+3 against weight rows n .. n+3
std::string dot4x4Function(const FusedLinearKernel &kernel, const std::string &xType,
                           const std::string &weightType);
/// @<name>_inverse_rms(x, t) -> f32
std::string inverseRmsFunction(const FusedLinearKernel &kernel, const std::string &xType);

/// With a prologue gain the dot products read %xg = x * gain, computed once
/// per call on the heap (prefill rows can be many); without, they read %x.
struct GainPrologue {
  std::string prologue, epilogue, dotInput = "%x";
};
GainPrologue gainPrologue(const FusedLinearKernel &kernel, const std::string &xType);

/// The whole kernel for a weight in the column-block layout
/// (kernel.columnBlocks); ColumnBlockLinearSource.cpp.
std::string columnBlockLinearSource(const FusedLinearKernel &kernel);

} // namespace q3::cpu::detail

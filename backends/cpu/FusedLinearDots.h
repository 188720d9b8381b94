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

/// @<name>_dot(x, w, n, t) -> f32: row t of x against weight row n. With
/// `splitPairs` (bf16 weights only) x is row t as @<name>_split_pairs
/// leaves it, and the weight is read in (k, k+1) pairs.
std::string dotFunction(const FusedLinearKernel &kernel, const std::string &xType,
                        const std::string &weightType, bool splitPairs = false);
/// @<name>_dot_streams(x, w0, n0, ..., wS, nS, t) -> S x f32, S =
/// decodeRowsSideBySide(): row t of x against weight row n_i of w_i, the S
/// read side by side (S memory streams: one streamed 57-62 GB/s on two
/// threads of an AMD EPYC family 26 VM, four 72-78), each summed in the
/// order of @<name>_dot, so the results are bit for bit the same.
std::string dotStreamsFunction(const FusedLinearKernel &kernel, const std::string &xType,
                               const std::string &weightType, bool splitPairs = false);
/// @<name>_split_pairs(x, xs, t): row t of x into row t of xs with each 32
/// elements of the dots' 64-wide steps split into their 16 even and 16 odd
/// ones (the rest copied as it is), as the split-pairs dots read it.
std::string splitPairsFunction(const FusedLinearKernel &kernel, const std::string &xType);
/// @<name>_dot4(x, w, t, n) -> 4 x f32: rows t .. t+3 against weight row n
std::string dot4Function(const FusedLinearKernel &kernel, const std::string &xType,
                         const std::string &weightType);
/// @<name>_dot4x4(x, w, t, n) -> 16 x f32: rows t .. t+3 against weight rows n .. n+3
std::string dot4x4Function(const FusedLinearKernel &kernel, const std::string &xType,
                           const std::string &weightType);
/// @<name>_finish(d, du, st, t, n, y, res): stores column n of row t from its
/// dot product(s): the norm scale, SwiGLU (with the up half's dot product du),
/// the residual.
std::string finishFunction(const FusedLinearKernel &kernel, const std::string &yType);
/// @<name>_inverse_rms(x, t) -> f32: Sum x^2 here, the scale from the shared
/// RMSNorm function (@<name>_rms_scale, KernelMathFunctions.h)
std::string inverseRmsFunction(const FusedLinearKernel &kernel, const std::string &xType);

/// The epilogue of one output of `type` (f32 or vector<16xf32>) from its
/// product `dot`: %v0 = dot x `scale`; SwiGLU: silu(%v0) x (`up` x `scale`),
/// a call of the shared function kernelFrame adds
/// (backends/common/KernelMathFunctions.h); the residual, which
/// `loadResidual` loads as %rv. `ops` define them; `result` names the last.
struct Epilogue {
  std::string ops, result;
};
Epilogue epilogue(const FusedLinearKernel &kernel, const std::string &type,
                  const std::string &dot, const std::string &up, const std::string &scale,
                  const std::string &loadResidual);

/// The type of the %gain view the kernel frame makes of a prologue gain.
std::string gainViewType(const FusedLinearKernel &kernel);

/// What both fused_linear templates wrap their loops in: the entry's
/// signature (with %scratch, the thread scratch, when the kernel takes one)
/// and %c0/%c1, views %x, %y (and %res), the gain prologue (%gain, and
/// %xg = x * gain in the scratch, computed once per call: every row for an
/// f32 prefill, decode's row only where the prefill rounds its rows to bf16
/// and scales them as it does),
/// %roundedAt (where a bf16 prefill's rounded rows go in the scratch) and
/// %scale[t] (the row's inverse RMS, or 1); after the loops the return. The
/// template adds its own weight view (of %wb).
struct KernelFrame {
  std::string helpers; // private functions the frame calls
  std::string opening, closing;
  std::string dotInput;        // %x or %xg
  std::string residualOperand; // %res, or %y for epilogues that take one anyway
};
KernelFrame kernelFrame(const FusedLinearKernel &kernel, const std::string &xType,
                        const std::string &yType);

/// The whole kernel for a weight in the column-block layout
/// (kernel.columnBlocks); ColumnBlockLinearSource.cpp.
std::string columnBlockLinearSource(const FusedLinearKernel &kernel);

} // namespace q3::cpu::detail

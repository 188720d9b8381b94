//===- KernelSourceUtil.h - pieces shared by the kernel templates ---------===//
#pragma once

#include "backends/cpu/KernelSource.h"

#include <string>

namespace q3::cpu::detail {

/// f32 lanes of one vector register's worth of work (vector<16xf32>).
inline constexpr int64_t kLanes = 16;

/// MLIR element type a weight buffer of `storage` is viewed as (bf16 as i16:
/// LLVM 16 cannot select vector bf16 -> f32 on x86, so it is widened by hand).
const char *storageType(DType storage);

/// `text` with `prefix` before each of its lines (nesting a template's
/// lines in a region).
std::string indented(const std::string &text, const std::string &prefix);

/// `type` `count` times, comma-separated: a result or iter_args type list.
std::string typeList(const std::string &type, int64_t count);

/// Loads `memref[indices]` (stored as `storage`) into an f32 `result`.
std::string widenedLoad(DType storage, const std::string &result, const std::string &memref,
                        const std::string &indices, const std::string &type);

/// Loads `memref[indices]` .. +16 (stored as `storage`) into a vector<16xf32> `result`.
std::string vectorWidenedLoad(DType storage, const std::string &result, const std::string &memref,
                              const std::string &indices, const std::string &type);

/// `result = acc + a . b` (one line, no indent or newline): vdpbf16ps on the
/// bf16 pairs of `a` and `b` (vector<16xi32>) into the f32 `acc`. Inline
/// assembly, not the LLVM intrinsic: LLVM 16's optimizer crashes on the
/// intrinsic's bf16 vector operands (clang-16 -O2 does too).
std::string vdpbf16ps(const std::string &result, const std::string &a, const std::string &b,
                      const std::string &acc);

/// `func.func private @<name>`: f32 (vector<16xf32> with `vector`, else one
/// f32) to bf16 bits (i16), rounded to nearest even; a NaN stays a quiet NaN.
/// The same rounding as runtime::floatToBf16, built by the shared
/// backends/common/KernelMath (as the Vulkan kernels' is).
std::string bf16RoundingFunction(const std::string &name, bool vector);

/// Loads weights [row, column .. column + 16) as vector<16xf32> into %wf<suffix>.
std::string vectorWeightLoad(const FusedLinearKernel &kernel, const std::string &weightType,
                             const std::string &suffix = "", const std::string &column = "%k",
                             const std::string &row = "%n");

/// Loads the weight [row, %k] as f32 into %wfs<suffix>.
std::string scalarWeightLoad(const FusedLinearKernel &kernel, const std::string &weightType,
                             const std::string &suffix = "", const std::string &row = "%n");

} // namespace q3::cpu::detail

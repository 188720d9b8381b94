//===- KernelMathFunctions.h - the shared math as MLIR functions ----------===//
//
// The CPU kernels are MLIR text templates (backends/cpu/*Source.cpp). So that
// they compute the shared arithmetic with the same builders as the Vulkan
// kernels instead of a second copy of it, these build small private
// functions from KernelMath.h with OpBuilder and print them; a template
// splices the text in and calls the function (LLVM inlines it).
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstdint>
#include <string>

namespace q3::kernels {

/// `func.func private @<name>(%v: T) -> Ti16`: f32 to bf16 bits, rounded to
/// nearest even (roundToBf16Bits); T is f32, or vector<lanes x f32> when
/// lanes > 1.
std::string bf16RoundingFunctionText(const std::string &name, int64_t lanes);

/// `func.func private @<name>(%sumSquares: f32) -> f32`: the RMSNorm scale
/// of a row of `count` values (inverseRms).
std::string inverseRmsFunctionText(const std::string &name, int64_t count, double eps);

/// `func.func private @<name>(%gate: T, %up: T) -> T`: silu(gate) * up, T f32
/// or vector<lanes x f32> (silu).
std::string swigluFunctionText(const std::string &name, int64_t lanes);

/// `func.func private @<name>(%maxA: f32, %sumA: f32, %maxB: f32, %sumB: f32)
/// -> (f32, f32, f32, f32)`: two partial softmax states merged, the merged
/// maximum and sum and the factors that rescale each side's sums
/// (mergeSoftmax).
std::string mergeSoftmaxFunctionText(const std::string &name);

/// `func.func private @<name>(%positions: index) -> (index, index)`: the
/// span and active count of a decode attention split into at most `splits`
/// runs of at least `minPositions` positions (decodeSplit).
std::string decodeSplitFunctionText(const std::string &name, int64_t splits, int64_t minPositions);

} // namespace q3::kernels

//===- KernelMath.h - the arithmetic every backend's kernels share --------===//
//
// The numeric pieces of Qwen3 that a kernel computes, written once as MLIR
// builders over arith/math so the CPU and the Vulkan kernels compute them
// the same way: the widening of bf16/f16 weights, the rounding to bf16, the
// RMSNorm scale, SwiGLU and the residual epilogue, the rotate-half RoPE and
// the online softmax. Each helper takes scalars or vectors of f32 (the
// constants it needs are splat to the operand's shape) and emits ops at the
// builder's insertion point; none of them loads or stores, so they fit any
// memory layout or loop structure around them.
//
// The order of operations matches the reference interpreter
// (backends/reference/Kernels.cpp), so f32 results stay within rounding of
// its f64 ones; docs/reference.md states the bounds.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "mlir/IR/Builders.h"
#include "mlir/IR/Value.h"

#include <array>
#include <cstdint>

namespace q3::kernels {

/// A float constant of `type` (f32/f16 or a vector of them: splat).
mlir::Value floatConstant(mlir::OpBuilder &b, mlir::Location loc, mlir::Type type, double value);
/// An integer constant of `type` (an integer or a vector of integers: splat).
mlir::Value intConstant(mlir::OpBuilder &b, mlir::Location loc, mlir::Type type, int64_t value);

//===- Weights and the bf16 cache ----------------------------------------===//

/// The f32 value of the bf16 in the low 16 bits of `word` (i32): the bits
/// shifted into the high half, exactly (a bf16 is an f32 with its low 16
/// mantissa bits dropped).
mlir::Value widenBf16Low(mlir::OpBuilder &b, mlir::Location loc, mlir::Value word);
/// The f32 value of the bf16 in the high 16 bits of `word` (i32): the low
/// half masked off.
mlir::Value widenBf16High(mlir::OpBuilder &b, mlir::Location loc, mlir::Value word);
/// An f16 (or vector of f16) widened to f32, exactly.
mlir::Value widenF16(mlir::OpBuilder &b, mlir::Location loc, mlir::Value half);
/// The bf16 nearest to `value` (f32, ties to even; a NaN stays a quiet NaN)
/// as bits in the low 16 bits of an i32: runtime::floatToBf16's rounding.
mlir::Value roundToBf16Bits(mlir::OpBuilder &b, mlir::Location loc, mlir::Value value);
/// `value` (f32) clamped to f16's finite range, +-runtime::kF16Max (a NaN
/// stays NaN): what an f16 KV cache stores before rounding, so an outlier is
/// cached as the largest f16 rather than as an infinity.
mlir::Value clampToF16Range(mlir::OpBuilder &b, mlir::Location loc, mlir::Value value);

//===- RMSNorm and the epilogues -----------------------------------------===//

/// 1 / sqrt(sumSquares / count + eps): the RMSNorm scale of a row whose
/// squares sum to `sumSquares` (f32).
mlir::Value inverseRms(mlir::OpBuilder &b, mlir::Location loc, mlir::Value sumSquares,
                       int64_t count, double eps);
/// x / (1 + exp(-x)).
mlir::Value silu(mlir::OpBuilder &b, mlir::Location loc, mlir::Value x);

/// What a fused matrix product does with one output's dot products: the
/// norm scale (when the input was RMS-normalized), SwiGLU (gate and up dot
/// products), the residual add, in the order of q3.fused_linear.
struct Epilogue {
  bool normalized = false;
  bool swiglu = false;
  bool residual = false;
};
/// `gateDot` (the only dot product without SwiGLU) and `upDot`, scaled by
/// `rowScale` (ignored unless normalized), combined as SwiGLU, plus
/// `residual` (ignored unless epilogue.residual).
mlir::Value applyEpilogue(mlir::OpBuilder &b, mlir::Location loc, const Epilogue &epilogue,
                          mlir::Value gateDot, mlir::Value upDot, mlir::Value rowScale,
                          mlir::Value residual);

//===- RoPE ---------------------------------------------------------------===//

/// theta^(-2i / headDim) for pair i (computed in f64 by the compiler).
double ropeFrequency(double theta, int64_t headDim, int64_t pair);

/// The frequency as turns (frequency / 2pi) per position, in three f32
/// words: the first two with 12 significant bits each, so that a 12-bit
/// integer times either is exact in f32, and the rest.
std::array<float, 3> ropeTurnWords(double frequency);

/// cos and sin of the angle `position * frequency` for an integer position
/// (i32, below 2^24; `turnsHigh/Mid/Low` are ropeTurnWords of the
/// frequency), within about 1e-6 radians of the exact angle at any position
/// of a Qwen3 context: the position is split into 12-bit halves so every
/// product with a word of the turns is exact and so is its fraction of a
/// turn; only the fractions' sum rounds. The sine and cosine of the angle
/// reduced to [-pi/4, pi/4] are Taylor polynomials (Vulkan's GLSL sin/cos
/// promise only 2^-11 absolute; a raw f32 angle of thousands of radians
/// would lose the angle itself).
struct SinCos {
  mlir::Value cos, sin;
};
SinCos ropeSinCos(mlir::OpBuilder &b, mlir::Location loc, mlir::Value position,
                  mlir::Value turnsHigh, mlir::Value turnsMid, mlir::Value turnsLow);

/// The rotate-half pair (x_i, x_{i+D/2}) rotated by the angle: returns
/// (x_i cos - x_j sin, x_j cos + x_i sin).
std::pair<mlir::Value, mlir::Value> ropeRotate(mlir::OpBuilder &b, mlir::Location loc,
                                               mlir::Value first, mlir::Value second,
                                               const SinCos &angle);

//===- Online softmax -----------------------------------------------------===//

/// The running state of a softmax over scores seen one at a time: the
/// largest score and the sum of exp(score - max). The weighted sum of values
/// the caller keeps is rescaled by `rescale` whenever the max grows.
struct SoftmaxStep {
  mlir::Value max, sum;  // the new state
  mlir::Value rescale;   // exp(oldMax - newMax): multiplies the old sum and accumulators
  mlir::Value weight;    // exp(score - newMax): the new score's weight
};
/// One score into the state (max, sum). Start with max = lowestScore() and
/// sum = 0.
SoftmaxStep onlineSoftmaxStep(mlir::OpBuilder &b, mlir::Location loc, mlir::Value max,
                              mlir::Value sum, mlir::Value score);
/// Two partial states merged: returns the merged (max, sum) and the factors
/// that rescale each side's accumulators.
struct SoftmaxMerge {
  mlir::Value max, sum, scaleA, scaleB;
};
SoftmaxMerge mergeSoftmax(mlir::OpBuilder &b, mlir::Location loc, mlir::Value maxA,
                          mlir::Value sumA, mlir::Value maxB, mlir::Value sumB);
//===- Decode attention split over positions ------------------------------===//

/// How `positions` visible keys split into runs of at most `splits`
/// workgroups: `span` positions each (at least `minPositions`, so a short
/// context is not cut into runs too small to pay for their merge) and the
/// `active` runs that hold any; split s takes [s * span, min((s + 1) *
/// span, positions)). Index values; signed arithmetic (they are
/// non-negative, and MLIR 16 lowers no unsigned index op to SPIR-V).
struct DecodeSplit {
  mlir::Value span, active;
};
DecodeSplit decodeSplit(mlir::OpBuilder &b, mlir::Location loc, mlir::Value positions,
                        int64_t splits, int64_t minPositions);

/// The starting max of a softmax: the lowest finite f32 rather than -inf,
/// so merging two empty partial states gives exp(0) = 1 times sums of 0,
/// not exp(-inf + inf) = NaN.
float lowestScore();

} // namespace q3::kernels

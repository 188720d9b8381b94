//===- Kernels.h - the reference interpreter's arithmetic -----------------===//
//
// Straightforward loops, written for obviousness rather than speed: each one
// is the textbook formula of one q3 op. Sums are accumulated in double so the
// reference itself contributes no rounding worth talking about.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstdint>
#include <vector>

namespace q3::reference {

/// y[r, :] = x[r, :] * rsqrt(mean(x[r, :]^2) + eps) * gamma, for each row r of `features` values.
void rmsNorm(const float *x, const float *gamma, float *y, int64_t rows, int64_t features,
             double eps);

/// y[t, n] = sum_k x[t, k] * w[n, k] (+ bias[n]).
void linear(const float *x, const float *w, const float *bias, float *y, int64_t rows, int64_t in,
            int64_t out);

/// Rotate-half RoPE in place on x[T, heads, headDim]; row t is at position startPos + t.
void ropeRotateHalf(float *x, int64_t rows, int64_t heads, int64_t headDim, int64_t startPos,
                    double theta);

/// Causal attention. q: [T, Hq, D]; keys/values: [S, Hkv, D], the queries being the last
/// T of the S positions; kvHeadOf[h] is the KV head that query head h reads. With
/// `bf16Products` the two products take bf16 inputs, as the CPU's vdpbf16ps prefill does
/// (q3.lowering's matmul = avx512bf16): the query times the scale in f32, the keys, the
/// probabilities exp(score - max) and the values are rounded to bf16 (nearest even); the
/// softmax's sum is of the unrounded probabilities.
void causalAttention(const float *q, const float *keys, const float *values, float *out,
                     int64_t queryRows, int64_t keyRows, int64_t queryHeads, int64_t kvHeads,
                     int64_t headDim, double scale, const std::vector<int64_t> &kvHeadOf,
                     bool bf16Products = false);

float silu(float x);

/// The fused product of q3.fused_linear: y = ((x * gain) W^T) * r (+ swiglu) (+ residual),
/// where r = rsqrt(mean(x^2) + eps) per row when `normEps` is set, else 1. With `swiglu`, W
/// has 2 * outFeatures rows (gate over up) and y = silu(gate) * up.
void fusedLinear(const float *x, const float *w, const float *residual, float *y, int64_t rows,
                 int64_t in, int64_t outFeatures, const double *normEps, bool swiglu);

/// What else a q3.fused_linear can say beyond fusedLinear()'s arguments.
struct ProductExtras {
  const float *gain = nullptr;  // [in], applied to x in the prologue
  bool columnBlocks = false;    // W is in #q3.column_blocks order (columnBlockIndex)
  bool bf16Activations = false; // x * gain rounded to bf16 (nearest even) before the product
};
void fusedLinear(const float *x, const float *w, const float *residual, float *y, int64_t rows,
                 int64_t in, int64_t outFeatures, const double *normEps, bool swiglu,
                 const ProductExtras &extras);

/// Where element (n, k) of an [N, in] weight lies in #q3.column_blocks order:
/// [N/16][in/2][16][2].
inline int64_t columnBlockIndex(int64_t n, int64_t k, int64_t in) {
  return ((n / 16) * (in / 2) + k / 2) * 32 + (n % 16) * 2 + (k % 2);
}

} // namespace q3::reference

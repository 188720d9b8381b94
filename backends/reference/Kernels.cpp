//===- Kernels.cpp - the reference interpreter's arithmetic ---------------===//
#include "backends/reference/Kernels.h"
#include "runtime/DType.h"

#include <algorithm>
#include <cmath>

namespace q3::reference {

void rmsNorm(const float *x, const float *gamma, float *y, int64_t rows, int64_t features,
             double eps) {
  for (int64_t r = 0; r < rows; ++r) {
    const float *row = x + r * features;
    double sumSquares = 0.0;
    for (int64_t i = 0; i < features; ++i)
      sumSquares += double(row[i]) * double(row[i]);
    // Normalize in f32 first, then apply the gain (the order Hugging Face uses).
    float inverseRms = float(1.0 / std::sqrt(sumSquares / double(features) + eps));
    for (int64_t i = 0; i < features; ++i)
      y[r * features + i] = (row[i] * inverseRms) * gamma[i];
  }
}

void linear(const float *x, const float *w, const float *bias, float *y, int64_t rows, int64_t in,
            int64_t out) {
  for (int64_t t = 0; t < rows; ++t) {
    const float *xRow = x + t * in;
    for (int64_t n = 0; n < out; ++n) {
      const float *wRow = w + n * in;
      double sum = bias ? double(bias[n]) : 0.0;
      for (int64_t k = 0; k < in; ++k)
        sum += double(xRow[k]) * double(wRow[k]);
      y[t * out + n] = float(sum);
    }
  }
}

void ropeRotateHalf(float *x, int64_t rows, int64_t heads, int64_t headDim, int64_t startPos,
                    double theta) {
  const int64_t half = headDim / 2;
  for (int64_t t = 0; t < rows; ++t) {
    const double position = double(startPos + t);
    for (int64_t i = 0; i < half; ++i) {
      double angle = position * std::pow(theta, -2.0 * double(i) / double(headDim));
      double c = std::cos(angle), s = std::sin(angle);
      for (int64_t h = 0; h < heads; ++h) {
        float *v = x + (t * heads + h) * headDim;
        double a = v[i], b = v[i + half];
        v[i] = float(a * c - b * s);
        v[i + half] = float(b * c + a * s);
      }
    }
  }
}

namespace {

float roundedToBf16(float v) { return runtime::bf16ToFloat(runtime::floatToBf16(v)); }

/// The key block of the CPU's flash prefill, whose probabilities it rounds together.
constexpr int64_t kFlashKeyBlock = 16;

/// The weight of each value: exp(score - max); or, as the bf16 flash
/// prefill has it, exp(score - m) rounded to bf16, where m is the running
/// maximum at the end of the score's 16-position key block (the online
/// softmax's), times exp(m - max) (the rescale of the f32 sums).
void valueWeights(const std::vector<double> &scores, std::vector<double> &weights, int64_t visible,
                  double maxScore, bool bf16Products) {
  double running = -INFINITY;
  for (int64_t block = 0; block < visible; block += kFlashKeyBlock) {
    const int64_t end = std::min(visible, block + kFlashKeyBlock);
    for (int64_t s = block; s < end; ++s)
      running = std::max(running, scores[s]);
    for (int64_t s = block; s < end; ++s)
      weights[s] = bf16Products ? double(roundedToBf16(float(std::exp(scores[s] - running)))) *
                                      std::exp(running - maxScore)
                                : std::exp(scores[s] - maxScore);
  }
}

} // namespace

void causalAttention(const float *q, const float *keys, const float *values, float *out,
                     int64_t queryRows, int64_t keyRows, int64_t queryHeads, int64_t kvHeads,
                     int64_t headDim, double scale, const std::vector<int64_t> &kvHeadOf,
                     bool bf16Products) {
  const int64_t cached = keyRows - queryRows; // positions before the first query row
  std::vector<double> scores(keyRows), weights(keyRows);
  std::vector<float> query(headDim);
  // A product's input as it enters the multiply: rounded to bf16 or exact.
  auto input = [&](float v) { return double(bf16Products ? roundedToBf16(v) : v); };
  for (int64_t t = 0; t < queryRows; ++t) {
    const int64_t visible = cached + t + 1; // causal: keys 0 .. cached + t
    for (int64_t h = 0; h < queryHeads; ++h) {
      const float *qv = q + (t * queryHeads + h) * headDim;
      // The bf16 products scale the query (in f32) before rounding it.
      for (int64_t d = 0; d < headDim; ++d)
        query[d] = bf16Products ? qv[d] * float(scale) : qv[d];
      const double scoreScale = bf16Products ? 1.0 : scale;
      const int64_t kvh = kvHeadOf[h];
      double maxScore = -INFINITY;
      for (int64_t s = 0; s < visible; ++s) {
        const float *kv = keys + (s * kvHeads + kvh) * headDim;
        double dot = 0.0;
        for (int64_t d = 0; d < headDim; ++d)
          dot += input(query[d]) * input(kv[d]);
        scores[s] = dot * scoreScale;
        maxScore = std::max(maxScore, scores[s]);
      }
      // The softmax's sum is of the unrounded probabilities.
      double total = 0.0;
      for (int64_t s = 0; s < visible; ++s)
        total += std::exp(scores[s] - maxScore);
      valueWeights(scores, weights, visible, maxScore, bf16Products);
      float *o = out + (t * queryHeads + h) * headDim;
      for (int64_t d = 0; d < headDim; ++d) {
        double acc = 0.0;
        for (int64_t s = 0; s < visible; ++s)
          acc += weights[s] * input(values[(s * kvHeads + kvh) * headDim + d]);
        o[d] = float(acc / total);
      }
    }
  }
}

float silu(float x) { return float(double(x) / (1.0 + std::exp(-double(x)))); }

void fusedLinear(const float *x, const float *w, const float *residual, float *y, int64_t rows,
                 int64_t in, int64_t outFeatures, const double *normEps, bool swiglu) {
  fusedLinear(x, w, residual, y, rows, in, outFeatures, normEps, swiglu, ProductExtras{});
}

void fusedLinear(const float *x, const float *w, const float *residual, float *y, int64_t rows,
                 int64_t in, int64_t outFeatures, const double *normEps, bool swiglu,
                 const ProductExtras &extras) {
  const int64_t productWidth = swiglu ? 2 * outFeatures : outFeatures;
  std::vector<float> product(productWidth), input(in);
  std::vector<float> rowMajor;
  if (extras.columnBlocks) {
    rowMajor.resize(size_t(productWidth * in));
    for (int64_t n = 0; n < productWidth; ++n)
      for (int64_t k = 0; k < in; ++k)
        rowMajor[n * in + k] = w[columnBlockIndex(n, k, in)];
    w = rowMajor.data();
  }
  for (int64_t t = 0; t < rows; ++t) {
    const float *xRow = x + t * in;
    double rowScale = 1.0;
    if (normEps) {
      double sumSquares = 0.0;
      for (int64_t k = 0; k < in; ++k)
        sumSquares += double(xRow[k]) * double(xRow[k]);
      rowScale = 1.0 / std::sqrt(sumSquares / double(in) + *normEps);
    }
    for (int64_t k = 0; k < in; ++k) {
      input[k] = extras.gain ? xRow[k] * extras.gain[k] : xRow[k];
      if (extras.bf16Activations)
        input[k] = runtime::bf16ToFloat(runtime::floatToBf16(input[k]));
    }
    linear(input.data(), w, nullptr, product.data(), 1, in, productWidth);
    for (int64_t n = 0; n < outFeatures; ++n) {
      float value = float(double(product[n]) * rowScale);
      if (swiglu)
        value = silu(value) * float(double(product[outFeatures + n]) * rowScale);
      if (residual)
        value += residual[t * outFeatures + n];
      y[t * outFeatures + n] = value;
    }
  }
}

} // namespace q3::reference

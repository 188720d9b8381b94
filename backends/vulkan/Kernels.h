//===- Kernels.h - the Vulkan kernels, one generator per kind ------------===//
//
// Each generator builds one kernel as a gpu.func (GpuKernelBuilder.h)
// specialized to the model's shapes. Tensors are bound in the order of the
// kernel's dispatch (operands, then results); the shared arithmetic comes
// from backends/common/KernelMath.h. docs/vulkan-backend.md describes each
// kernel's work split.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"

#include "backends/common/DTypes.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace q3::vulkan {

using backends::DType;
using backends::dtypeBytes;

/// Shared memory a workgroup may use: what the devices q3c has run on offer
/// (lavapipe 32 KiB, NVIDIA 48 KiB); the driver refuses a device with less
/// by name.
inline constexpr int64_t kSharedMemoryBytes = 32 * 1024;
/// The subgroup width of NVIDIA's GPUs and AMD's wave32, the widest the
/// target passes plan for.
inline constexpr int64_t kWideSubgroupSize = 32;
/// The binding element of a KV cache of `storage`: f32, f16, or i16 holding
/// bf16 bits (each element its own 16-bit store: no two invocations share a
/// 32-bit word).
mlir::Type cacheElementType(mlir::MLIRContext &context, DType storage);

/// q3.embedding: rows of a [vocab, hidden] table, widened to f32. One
/// workgroup per row; a table split into parts runs one dispatch per part,
/// and a row whose token lies in another part is skipped.
struct EmbeddingKernel {
  std::string name;
  int64_t vocab = 0, hidden = 0;
  DType table = DType::F32;
  int64_t workgroup = 64; // invocations
};
mlir::OwningOpRef<mlir::ModuleOp> buildEmbedding(mlir::MLIRContext &context,
                                                 const EmbeddingKernel &kernel);

/// q3.fused_linear (q3.linear without bias is the plain case):
/// y = epilogue(x W^T) with an optional RMSNorm prologue, a prologue gain
/// (x * gain before the product; its own binding after the weight), SwiGLU
/// (W stacks gate over up) and a residual. Bindings: x, W, [W's up half],
/// [gain], [residual], y: with SwiGLU the stacked weight is bound twice, its
/// gate rows and the matching up rows (LinearBindings), so a weight too
/// large for one binding runs in parts of both halves alike.
struct LinearKernel {
  std::string name;
  int64_t inFeatures = 0;  // K
  int64_t outFeatures = 0; // N: columns of y
  DType weight = DType::F32;
  std::optional<double> normEps;
  bool swiglu = false;
  bool residual = false;
  std::optional<DType> gain;
  int64_t weightRows() const { return swiglu ? 2 * outFeatures : outFeatures; }
};

/// Where each tensor of a LinearKernel is bound (-1: absent).
struct LinearBindings {
  int x = 0, weight = 1, up = -1, gain = -1, residual = -1, y = -1;
  explicit LinearBindings(const LinearKernel &kernel) {
    int next = 2;
    if (kernel.swiglu)
      up = next++;
    if (kernel.gain)
      gain = next++;
    if (kernel.residual)
      residual = next++;
    y = next++;
  }
};

/// Whether the products read x as 16-byte vectors (K a multiple of 4 and of
/// the weight's load width in elements): the binding's element then is
/// vector<4xf32> in every variant.
bool linearVectorInput(mlir::MLIRContext &context, const LinearKernel &kernel);

/// Decode and short prompts (up to `maxRows` rows, a compile-time bound): a
/// matrix-vector product, one subgroup per output column, its lanes
/// striding over K in 16-byte loads, each weight unit serving every row;
/// Sum x^2 rides along and both reduce with subgroup sums. A weight in
/// parts runs one dispatch per part (push constants give the part's first
/// row and its rows).
/// With `columnSubgroups` C > 1, C subgroups split each column's K and add
/// their sums through shared memory; the workgroup then has at most
/// `subgroups` subgroups, a multiple of C.
mlir::OwningOpRef<mlir::ModuleOp> buildMatVec(mlir::MLIRContext &context,
                                              const LinearKernel &kernel, int64_t maxRows,
                                              int64_t columnSubgroups = 1, int64_t subgroups = 0);
/// Shared memory bytes of buildMatVec's kernel.
int64_t matVecSharedBytes(int64_t maxRows, int64_t columnSubgroups, int64_t subgroups);

/// The most subgroups that split one column (a workgroup of 8 x 128
/// invocations for the widest subgroups devices have).
inline constexpr int64_t kMaxColumnSubgroups = 8;
/// Whether `c` subgroups per column is one the kernel takes: a power of two
/// up to kMaxColumnSubgroups.
inline bool validColumnSubgroups(int64_t c) {
  return c >= 1 && c <= kMaxColumnSubgroups && (c & (c - 1)) == 0;
}

/// How a product's matrix-vector variants run (vulkan-matvec's decisions).
struct MatVecShape {
  int64_t rows = 8;            // the most rows of the multi-row variant (decode_rows)
  int64_t workgroup = 128;     // invocations per workgroup with one subgroup a column
  int64_t columnSubgroups = 1; // subgroups per column (decode_column_subgroups)
  /// Subgroups per workgroup when columnSubgroups > 1: 4, or C if larger.
  int64_t subgroups() const { return columnSubgroups > 4 ? columnSubgroups : 4; }
};

/// The prefill product's tiling (VulkanTarget decides it; the lowering
/// config records it): a workgroup of `threads` invocations computes a
/// tileRows x tileColumns block of y, each invocation a registerRows x
/// registerColumns block of it, stepping through K by tileK with both
/// operand tiles in shared memory.
struct MatMulTiling {
  int64_t tileRows = 32, tileColumns = 64, tileK = 16;
  int64_t registerRows = 4, registerColumns = 4;
  int64_t threads() const { return (tileRows / registerRows) * (tileColumns / registerColumns); }
};
mlir::OwningOpRef<mlir::ModuleOp> buildMatMul(mlir::MLIRContext &context,
                                              const LinearKernel &kernel,
                                              const MatMulTiling &tiling);
/// Shared memory bytes of buildMatMul's kernel.
int64_t matMulSharedBytes(const LinearKernel &kernel, const MatMulTiling &tiling);

/// q3.qk_norm_rope_cache on one layer's K and V cache slices
/// ([kvHeads][capacity][headDim] of f32). Bindings: qkv, q_gain, k_gain,
/// keys, values, query. One subgroup per head vector (query heads, then key
/// heads, which also copy their value head); a row's RoPE angles are
/// computed once per workgroup into shared memory.
struct QKNormRopeKernel {
  std::string name;
  int64_t queryHeads = 0, kvHeads = 0, headDim = 0;
  DType gains = DType::F32;
  double eps = 1e-6, theta = 10000.0;
  int64_t subgroups = 4; // per workgroup, one head vector each
  DType cache = DType::F32; // f32, or f16 rounded to nearest even (16-bit storage)
};
mlir::OwningOpRef<mlir::ModuleOp> buildQKNormRope(mlir::MLIRContext &context,
                                                  const QKNormRopeKernel &kernel);
int64_t qkNormRopeSharedBytes(const QKNormRopeKernel &kernel);

/// q3.attention over one layer's cached keys and values. Bindings: query,
/// keys, values, out. One workgroup per (row, KV head) serves every query
/// head that reads that KV head, so each key and value is loaded once for
/// all of them, in place (no copies per query head). Its subgroups take
/// interleaved positions with an online softmax each (lanes across
/// head_dim, scores by subgroup sums) and merge at the end.
struct AttentionKernel {
  std::string name;
  int64_t queryHeads = 0, kvHeads = 0, headDim = 0;
  std::vector<int64_t> kvHeadMap; // query head -> KV head
  double scale = 1.0;
  /// Subgroups per workgroup and the smallest subgroup size the kernel
  /// serves (it keeps ceil(headDim / minSubgroupSize) values per lane).
  int64_t subgroups = 4;
  /// Subgroups of the one-row (decode) variant; its own module when it
  /// differs from `subgroups`.
  int64_t decodeSubgroups = 4;
  int64_t minSubgroupSize = 8;
  /// Subgroups at least this wide take a path of their own with
  /// ceil(headDim / wideSubgroupSize) values per lane (NVIDIA's and AMD's
  /// wave32 width; tests take 16 to run that path on lavapipe's 16-wide
  /// subgroups).
  int64_t wideSubgroupSize = kWideSubgroupSize;
  DType cache = DType::F32; // the cached keys' and values' element type
  /// Workgroups per KV head of the one-row variant, each over its own run
  /// of at least `splitPositions` positions (KernelMath's decodeSplit).
  /// Above 1, that variant writes each query head's partial state per run
  /// to a fifth binding, the workspace (attentionWorkspaceBytes), and a
  /// second dispatch (buildAttentionMerge) merges the runs into the output;
  /// every variant then declares the workspace, so that their push
  /// constants (which follow the tensor offsets) agree.
  int64_t decodeSplits = 1;
  int64_t splitPositions = 1;
  /// buildAttention builds the one-row variant (split when decodeSplits >
  /// 1), else the variant for any rows.
  bool oneRowVariant = false;
  /// Rows per workgroup of the variant for any rows: each key and value a
  /// subgroup loads serves this many rows' query heads of the group
  /// (prefill_rows_per_workgroup); the one-row variant has 1.
  int64_t rowsPerWorkgroup = 1;
};
mlir::OwningOpRef<mlir::ModuleOp> buildAttention(mlir::MLIRContext &context,
                                                 const AttentionKernel &kernel);
int64_t attentionSharedBytes(const AttentionKernel &kernel);
/// Query heads of the largest GQA group (those on one KV head).
int64_t attentionGroupSize(const AttentionKernel &kernel);
/// The merge of a split decode step: one workgroup per query head combines
/// the active runs' records (max, sum, head_dim value sums) with the shared
/// mergeSoftmax and writes the normalized output row. Bindings as
/// buildAttention's with splits: query, keys, values, out, workspace.
mlir::OwningOpRef<mlir::ModuleOp> buildAttentionMerge(mlir::MLIRContext &context,
                                                      const AttentionKernel &kernel);
/// The workspace of a split decode step: a record of 2 + head_dim f32 per
/// (query head, run); 0 without splits.
int64_t attentionWorkspaceBytes(const AttentionKernel &kernel);

/// The device's read bandwidth (q3run bench): every invocation reads
/// `vectorsPerInvocation` 16-byte vectors strided over the buffer and
/// XORs them; a store that depends on the result keeps the reads alive.
/// Bindings: data (vector<4xi32>), sink (i32).
mlir::OwningOpRef<mlir::ModuleOp> buildReadBandwidth(mlir::MLIRContext &context,
                                                     const std::string &name,
                                                     int64_t vectorsPerInvocation);

} // namespace q3::vulkan

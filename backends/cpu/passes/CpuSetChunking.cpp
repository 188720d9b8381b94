//===- CpuSetChunking.cpp - how finely the runtime splits each dispatch ---===//
//
// After:
//   @fused_linear_residual_0 ... q3.lowering = #q3.lowering<..., prefill_chunks = 1,
//                                                            decode_chunks = 4>
//   @attention_0 ... q3.lowering = #q3.lowering<..., prefill_chunks = 8, decode_chunks = 1>
//
// Each thread runs its own contiguous range of pieces in order, the pieces
// halving in size, and a thread that runs out takes the last unclaimed
// pieces of the one with the most left (runtime/ThreadPool.h). Products
// split decodes 4 ways: each piece starts a new weight stream whose first
// lines the prefetch has not reached, so 16 even pieces (the idle threads'
// best on the Zen 3 VM) decoded 10% slower than 2, 4 or 8 on AMD family 26
// (0.6B, median of three alternating runs: 47-49 vs 52-54 tok/s); one piece
// left a thread idle at the end. So `q3c compile --tune` measures the split
// (backends/cpu/DecodeTuner.h) and records it as q3.tuning's decode_chunks,
// which this pass takes unless decode-chunks is given; without either, 4.
// Row t of a causal prefill reads t + 1 positions, so attention splits
// prefills 8 ways
// (pp128 on 0.6B: attention 58-62 -> 44-50 ms on two threads).
//
//===----------------------------------------------------------------------===//
#include "backends/cpu/passes/CpuPasses.h"

namespace q3::cpu {
#define GEN_PASS_DEF_CPUSETCHUNKING
#include "backends/cpu/passes/CpuPasses.h.inc"
} // namespace q3::cpu

using namespace mlir;
using namespace q3::ir;

namespace q3::cpu {
namespace {

constexpr int64_t kMaxChunks = 64;

struct CpuSetChunkingPass : impl::CpuSetChunkingBase<CpuSetChunkingPass> {
  using CpuSetChunkingBase::CpuSetChunkingBase;

  /// The option when given, else what `q3c compile --tune` measured
  /// (q3.tuning's decode_chunks), else the default.
  int64_t decodeChunksOf(ModuleOp module) const {
    if (decodeChunks != 0)
      return decodeChunks;
    return measuredInteger(module, "decode_chunks").value_or(kDefaultDecodeChunks);
  }

  /// The bytes of the weight a product kernel streams in decode, or nullopt
  /// for other kernels.
  static std::optional<int64_t> productWeightBytes(func::FuncOp kernel) {
    Operation *compute = kernelComputeOp(kernel);
    Value weight;
    if (auto fused = dyn_cast_or_null<FusedLinearOp>(compute))
      weight = fused.getWeight();
    else if (auto linear = dyn_cast_or_null<LinearOp>(compute))
      weight = linear.getWeight();
    else
      return std::nullopt;
    auto type = cast<RankedTensorType>(weight.getType());
    return type.getNumElements() * type.getElementTypeBitWidth() / 8;
  }

  /// The SwiGLU product's weight bytes: the product the tuner measures the
  /// split on (nullopt without one).
  static std::optional<int64_t> swigluWeightBytes(ModuleOp module) {
    for (func::FuncOp kernel : kernelsOf(module))
      if (auto fused = dyn_cast_or_null<FusedLinearOp>(kernelComputeOp(kernel)))
        if (fused.getSwiglu())
          return productWeightBytes(kernel);
    return std::nullopt;
  }

  /// A product 2^k times the SwiGLU product's bytes gets k more pieces:
  /// pieces halve, so its last ones are as large as the SwiGLU product's.
  static int64_t extraPiecesFor(int64_t bytes, std::optional<int64_t> reference) {
    int64_t extra = 0;
    if (reference && *reference > 0)
      while ((*reference << (extra + 1)) <= bytes)
        ++extra;
    return extra;
  }

  void runOnOperation() override {
    const int64_t productDecode = decodeChunksOf(getOperation());
    for (int64_t chunks : {productDecode, int64_t(attentionChunks)})
      if (chunks < 1 || chunks > kMaxChunks) {
        getOperation().emitError() << "cpu-set-chunking: chunks must be 1 to " << kMaxChunks
                                   << ", got " << chunks;
        return signalPassFailure();
      }
    const std::optional<int64_t> reference = swigluWeightBytes(getOperation());
    for (func::FuncOp kernel : kernelsOf(getOperation())) {
      Operation *compute = kernelComputeOp(kernel);
      int64_t prefill = 1, decode = 1;
      if (std::optional<int64_t> bytes = productWeightBytes(kernel))
        decode = std::min(kMaxChunks, productDecode + extraPiecesFor(*bytes, reference));
      else if (isa_and_nonnull<AttentionOp>(compute))
        prefill = attentionChunks;
      setLowering(kernel, loweringOf(kernel).withChunks(prefill, decode));
    }
  }
};

} // namespace

std::unique_ptr<mlir::Pass> createCpuSetChunkingPass() {
  return std::make_unique<CpuSetChunkingPass>();
}

std::unique_ptr<mlir::Pass> createCpuSetChunkingPass(const CpuSetChunkingOptions &options) {
  return std::make_unique<CpuSetChunkingPass>(options);
}

} // namespace q3::cpu

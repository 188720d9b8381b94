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

  void runOnOperation() override {
    const int64_t productDecode = decodeChunksOf(getOperation());
    for (int64_t chunks : {productDecode, int64_t(attentionChunks)})
      if (chunks < 1 || chunks > kMaxChunks) {
        getOperation().emitError() << "cpu-set-chunking: chunks must be 1 to " << kMaxChunks
                                   << ", got " << chunks;
        return signalPassFailure();
      }
    for (func::FuncOp kernel : kernelsOf(getOperation())) {
      Operation *compute = kernelComputeOp(kernel);
      int64_t prefill = 1, decode = 1;
      if (isa_and_nonnull<FusedLinearOp, LinearOp>(compute))
        decode = productDecode;
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

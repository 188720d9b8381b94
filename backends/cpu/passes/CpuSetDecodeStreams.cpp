//===- CpuSetDecodeStreams.cpp - runs decode loops read side by side ------===//
//
// After:
//   @fused_linear_rms_norm_0 ... q3.lowering = #q3.lowering<..., decode_streams = 4>
//   @attention_0 ... q3.lowering = #q3.lowering<..., decode_streams = 4>
//
// A core's hardware prefetchers follow a few streams at once; a one-row loop
// reading one run of memory at a time leaves some of the bandwidth unused
// (57-62 against 68-78 GB/s for four runs on an AMD EPYC family 26 VM, two
// threads; on another host of that family one run read fastest). How many
// runs pay is the machine's: `q3c compile --tune` measures 1, 2 and 4 on a
// decode product (backends/cpu/DecodeTuner.h) and on decode attention
// (DecodeSplitTuner.h) and records q3.tuning's decode_streams and
// attention_decode_streams, which this pass takes unless `streams` is
// given; without either, kDefaultDecodeStreams.
//
//===----------------------------------------------------------------------===//
#include "backends/cpu/KernelSelection.h"
#include "backends/cpu/passes/CpuPasses.h"

namespace q3::cpu {
#define GEN_PASS_DEF_CPUSETDECODESTREAMS
#include "backends/cpu/passes/CpuPasses.h.inc"
} // namespace q3::cpu

using namespace mlir;
using namespace q3::ir;

namespace q3::cpu {
namespace {

struct CpuSetDecodeStreamsPass : impl::CpuSetDecodeStreamsBase<CpuSetDecodeStreamsPass> {
  using CpuSetDecodeStreamsBase::CpuSetDecodeStreamsBase;

  /// The option when given, else what `q3c compile --tune` measured (for
  /// products and for attention apart), else the default.
  int64_t countOf(ModuleOp module, func::FuncOp kernel) const {
    if (streams != 0)
      return streams;
    const bool attention = isa_and_nonnull<AttentionOp>(kernelComputeOp(kernel));
    return measuredInteger(module, attention ? "attention_decode_streams" : "decode_streams")
        .value_or(kDefaultDecodeStreams);
  }

  void runOnOperation() override {
    for (func::FuncOp kernel : kernelsOf(getOperation())) {
      if (!streamsInDecode(kernel))
        continue;
      const int64_t count = countOf(getOperation(), kernel);
      if (!llvm::is_contained(LoweringConfigAttr::kDecodeStreamCounts, count)) {
        getOperation().emitError()
            << "cpu-set-decode-streams: decode streams must be 1, 2 or 4, got " << count;
        return signalPassFailure();
      }
      setLowering(kernel, loweringOf(kernel).withDecodeStreams(count));
    }
  }
};

} // namespace

std::unique_ptr<mlir::Pass> createCpuSetDecodeStreamsPass() {
  return std::make_unique<CpuSetDecodeStreamsPass>();
}

std::unique_ptr<mlir::Pass>
createCpuSetDecodeStreamsPass(const CpuSetDecodeStreamsOptions &options) {
  return std::make_unique<CpuSetDecodeStreamsPass>(options);
}

} // namespace q3::cpu

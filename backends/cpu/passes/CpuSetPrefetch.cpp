//===- CpuSetPrefetch.cpp - how far ahead decode loops prefetch -----------===//
//
// After:
//   @fused_linear_rms_norm_0 ... q3.lowering = #q3.lowering<..., prefetch_bytes = 8192>
//   @attention_0 ... q3.lowering = #q3.lowering<..., prefetch_bytes = 8192>
//
// A one-row product streams its weights once and decode attention its keys
// and values once: the loops prefetch what they will read prefetch_bytes
// later, which the hardware prefetchers alone do not keep up with (and do
// not do across 4 KiB pages, where the KV cache lives). The distance is the
// machine's: `q3c compile --tune` measures it with the decode split
// (backends/cpu/DecodeTuner.h) and records q3.tuning's
// decode_prefetch_bytes, which this pass takes unless prefetch-bytes is
// given; without either, kDefaultPrefetchBytes.
//
//===----------------------------------------------------------------------===//
#include "backends/cpu/KernelSelection.h"
#include "backends/cpu/KernelSource.h"
#include "backends/cpu/passes/CpuPasses.h"

namespace q3::cpu {
#define GEN_PASS_DEF_CPUSETPREFETCH
#include "backends/cpu/passes/CpuPasses.h.inc"
} // namespace q3::cpu

using namespace mlir;
using namespace q3::ir;

namespace q3::cpu {

bool streamsInDecode(func::FuncOp kernel) {
  Operation *compute = kernelComputeOp(kernel);
  if (isa_and_nonnull<FusedLinearOp, LinearOp>(compute))
    return true;
  if (auto attention = dyn_cast_or_null<AttentionOp>(compute))
    return attentionKernelShape(attention).vectorized();
  return false;
}

namespace {

struct CpuSetPrefetchPass : impl::CpuSetPrefetchBase<CpuSetPrefetchPass> {
  using CpuSetPrefetchBase::CpuSetPrefetchBase;

  /// The option when given, else what `q3c compile --tune` measured, else
  /// the default.
  int64_t distanceOf(ModuleOp module) const {
    if (prefetchBytes != 0)
      return prefetchBytes;
    return measuredInteger(module, "decode_prefetch_bytes").value_or(kDefaultPrefetchBytes);
  }

  void runOnOperation() override {
    const int64_t distance = distanceOf(getOperation());
    if (distance < LoweringConfigAttr::kMinPrefetchBytes ||
        distance > LoweringConfigAttr::kMaxPrefetchBytes) {
      getOperation().emitError() << "cpu-set-prefetch: prefetch bytes must be "
                                 << LoweringConfigAttr::kMinPrefetchBytes << " to "
                                 << LoweringConfigAttr::kMaxPrefetchBytes << ", got " << distance;
      return signalPassFailure();
    }
    for (func::FuncOp kernel : kernelsOf(getOperation()))
      if (streamsInDecode(kernel))
        setLowering(kernel, loweringOf(kernel).withPrefetchBytes(distance));
  }
};

} // namespace

std::unique_ptr<mlir::Pass> createCpuSetPrefetchPass() {
  return std::make_unique<CpuSetPrefetchPass>();
}

std::unique_ptr<mlir::Pass> createCpuSetPrefetchPass(const CpuSetPrefetchOptions &options) {
  return std::make_unique<CpuSetPrefetchPass>(options);
}

} // namespace q3::cpu

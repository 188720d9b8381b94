//===- CpuSetPrefetch.cpp - how far ahead decode loops prefetch -----------===//
//
// After:
//   @fused_linear_rms_norm_0 ... q3.lowering = #q3.lowering<..., prefetch_bytes = 8192>
//   @attention_0 ... q3.lowering = #q3.lowering<..., prefetch_bytes = 8192>
//
// A one-row product streams its weights once and decode attention its keys
// and values once: the loops prefetch what they will read prefetch_bytes
// later, which the hardware prefetchers alone did not keep up with on the
// machines the default was measured on (and do not do across 4 KiB pages).
// On others the prefetches cost more than they bring: on an AMD EPYC family
// 26 VM the products decoded 15% faster with none (`prefetch_bytes = none`,
// tg64 on 0.6B 48-51 -> 56-57 tok/s, weights read in place from the page
// cache). The distance is the machine's: `q3c compile --tune` measures it,
// none included, with the decode split (backends/cpu/DecodeTuner.h) and
// records q3.tuning's decode_prefetch_bytes, which this pass takes unless
// prefetch-bytes is given; without either, kDefaultPrefetchBytes. That
// measurement runs products only; attention's own (attention_decode_-
// prefetch_bytes, backends/cpu/DecodeSplitTuner.h: none or the default)
// decides its loops where present, else it keeps a distance when the
// products are measured best without one.
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

  /// The products' and attention's distances: the option's when given
  /// (both), else what `q3c compile --tune` measured for each (attention
  /// without its own measurement: the products', or the default when that
  /// is none), else the default.
  std::pair<int64_t, int64_t> distancesOf(ModuleOp module) const {
    if (prefetchBytes != 0)
      return {prefetchBytes, prefetchBytes};
    const int64_t products = measuredPrefetchBytes(module).value_or(kDefaultPrefetchBytes);
    if (std::optional<int64_t> attention =
            measuredPrefetchBytes(module, kMeasuredAttentionPrefetchKey))
      return {products, *attention};
    return {products,
            products == LoweringConfigAttr::kNoPrefetch ? kDefaultPrefetchBytes : products};
  }

  /// Whether q3.tuning's `key`, when present, is a byte count or "none"
  /// (else the module was edited by hand: say so).
  bool measuredIsReadable(ModuleOp module, StringRef key) const {
    DictionaryAttr tuning = tuningOf(module);
    Attribute measured = tuning ? tuning.get(key) : Attribute();
    if (!measured || measured.isa<IntegerAttr>() || measuredPrefetchBytes(module, key))
      return true;
    module.emitError() << "cpu-set-prefetch: q3.tuning's " << key << " must be a byte count or \""
                       << kNoPrefetchSpelling << "\", got " << measured;
    return false;
  }

  void runOnOperation() override {
    if (prefetchBytes == 0 && (!measuredIsReadable(getOperation(), kMeasuredPrefetchKey) ||
                               !measuredIsReadable(getOperation(), kMeasuredAttentionPrefetchKey)))
      return signalPassFailure();
    const auto [products, attention] = distancesOf(getOperation());
    for (int64_t distance : {products, attention})
      if (distance != LoweringConfigAttr::kNoPrefetch &&
          (distance < LoweringConfigAttr::kMinPrefetchBytes ||
           distance > LoweringConfigAttr::kMaxPrefetchBytes)) {
        getOperation().emitError() << "cpu-set-prefetch: prefetch bytes must be -1 (none) or "
                                   << LoweringConfigAttr::kMinPrefetchBytes << " to "
                                   << LoweringConfigAttr::kMaxPrefetchBytes << ", got " << distance;
        return signalPassFailure();
      }
    for (func::FuncOp kernel : kernelsOf(getOperation()))
      if (streamsInDecode(kernel)) {
        const bool isAttention = isa_and_nonnull<AttentionOp>(kernelComputeOp(kernel));
        setLowering(kernel,
                    loweringOf(kernel).withPrefetchBytes(isAttention ? attention : products));
      }
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

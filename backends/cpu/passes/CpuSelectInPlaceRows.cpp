//===- CpuSelectInPlaceRows.cpp - short prefills read weights in place ----===//
//
// After (a per-call bf16 product with matmul = avx512bf16, K = 1024):
//   @fused_linear_rms_norm_0 ... q3.lowering = #q3.lowering<...,
//       matmul = avx512bf16, tile = [8, 2, 7], weight_packing = per_call, ...>
//
// A per-call product packs panels for its register tiles, which pays only
// when the panel serves enough rows: a prefill of fewer rows than a tile
// streamed the weight at half decode's rate (AMD family 26, 2 threads). The
// third tile entry is the most prefill rows the kernel multiplies against
// its weight rows in place instead, once for all its rows, the way decode
// reads them (vdpbf16ps on (k, k+1) pairs of the rounded activations, so
// the rounding is the tiles'). Set for the kernel's lowering and for each
// of its q3.variants that can (FusedLinearKernel::inPlacePrefillFits);
// `rows` = 1 leaves every prefill to the panels.
//
//===----------------------------------------------------------------------===//
#include "backends/cpu/KernelSelection.h"
#include "backends/cpu/passes/CpuPasses.h"

namespace q3::cpu {
#define GEN_PASS_DEF_CPUSELECTINPLACEROWS
#include "backends/cpu/passes/CpuPasses.h.inc"
} // namespace q3::cpu

using namespace mlir;
using namespace q3::ir;

namespace q3::cpu {
namespace {

struct CpuSelectInPlaceRowsPass : impl::CpuSelectInPlaceRowsBase<CpuSelectInPlaceRowsPass> {
  using CpuSelectInPlaceRowsBase::CpuSelectInPlaceRowsBase;

  LoweringConfigAttr withRows(func::FuncOp kernel, LoweringConfigAttr lowering, int64_t count) {
    ArrayRef<int64_t> tile = lowering.getTile();
    if (tile.size() != 2 || !cpuProductCanReadPrefillInPlace(kernel, lowering))
      return lowering;
    return lowering.withTile({tile[0], tile[1], count});
  }

  void runOnOperation() override {
    const int64_t count = rows != 0 ? int64_t(rows) : FusedLinearKernel::kMaxInPlacePrefillRows;
    if (count < 1 || count > FusedLinearKernel::kMaxInPlacePrefillRows) {
      getOperation().emitError() << "cpu-select-in-place-rows: rows must be 1 to "
                                 << FusedLinearKernel::kMaxInPlacePrefillRows << ", got " << count;
      return signalPassFailure();
    }
    for (func::FuncOp kernel : kernelsOf(getOperation())) {
      try {
        updateLoweringAndVariants(
            kernel, [&](LoweringConfigAttr lowering) { return withRows(kernel, lowering, count); });
      } catch (const std::exception &e) {
        kernel.emitError() << "cpu-select-in-place-rows: " << e.what();
        return signalPassFailure();
      }
    }
  }
};

} // namespace

std::unique_ptr<mlir::Pass> createCpuSelectInPlaceRowsPass() {
  return std::make_unique<CpuSelectInPlaceRowsPass>();
}

std::unique_ptr<mlir::Pass>
createCpuSelectInPlaceRowsPass(const CpuSelectInPlaceRowsOptions &options) {
  return std::make_unique<CpuSelectInPlaceRowsPass>(options);
}

} // namespace q3::cpu

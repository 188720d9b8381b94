//===- CpuSelectTiles.cpp - the register tile of each product's prefill ---===//
//
// After (prefill-rows=6):
//   func.func private @fused_linear_residual_0(...) attributes
//       {q3.kernel, q3.lowering = #q3.lowering<matmul = f32, tile = [6, 2]>}
//
// A column-block prefill tile is `rows` prompt rows x 2 blocks of 16 outputs:
// 2 x rows accumulators of 16 f32 lanes, plus the widened weights and the
// broadcast activations. With AVX-512's 32 registers 6 rows fit; with AVX2's
// 16 (a 16-lane vector takes two) fewer do, and the fastest count is a
// matter of measurement (q3c compile's tuner records it in q3.tuning).
//
//===----------------------------------------------------------------------===//
#include "backends/cpu/CpuTarget.h"
#include "backends/cpu/passes/CpuPasses.h"
#include "backends/cpu/passes/PassErrors.h"

namespace q3::cpu {
#define GEN_PASS_DEF_CPUSELECTTILES
#include "backends/cpu/passes/CpuPasses.h.inc"
} // namespace q3::cpu

using namespace mlir;
using namespace q3::ir;

namespace q3::cpu {
namespace {

constexpr int64_t kMaxTileRows = 8;

struct CpuSelectTilesPass : impl::CpuSelectTilesBase<CpuSelectTilesPass> {
  using CpuSelectTilesBase::CpuSelectTilesBase;

  int64_t defaultRows(ModuleOp module) {
    if (std::optional<int64_t> measured = measuredInteger(module, "prefill_rows"))
      return *measured;
    return targetHas(targetOf(module), "avx512f") ? 6 : 2;
  }

  void runOnOperation() override {
    ModuleOp module = getOperation();
    const FailureOr<int64_t> chosen = valueOrPassError(module, "cpu-select-tiles", [&] {
      return prefillRows != 0 ? int64_t(prefillRows) : defaultRows(module);
    });
    if (failed(chosen))
      return signalPassFailure();
    const int64_t rows = *chosen;
    if (rows < 1 || rows > kMaxTileRows) {
      module.emitError() << "cpu-select-tiles: prefill-rows must be 1 to " << kMaxTileRows
                         << ", got " << rows;
      return signalPassFailure();
    }
    for (func::FuncOp kernel : kernelsOf(module)) {
      if (tiledProductDepth(kernel))
        setLowering(kernel, loweringOf(kernel).withTile({rows, 2}));
    }
  }
};

} // namespace

std::unique_ptr<mlir::Pass> createCpuSelectTilesPass() {
  return std::make_unique<CpuSelectTilesPass>();
}

std::unique_ptr<mlir::Pass> createCpuSelectTilesPass(const CpuSelectTilesOptions &options) {
  return std::make_unique<CpuSelectTilesPass>(options);
}

} // namespace q3::cpu

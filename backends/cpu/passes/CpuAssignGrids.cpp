//===- CpuAssignGrids.cpp - every kernel's workgroup grid -----------------===//
//
// After:
//   func.func private @fused_linear_rms_norm_0(...) -> tensor<?x4096xf32>
//       attributes {q3.kernel, q3.lowering = #q3.lowering<grid = fixed 64>}
//   func.func private @attention_0(...)
//       attributes {q3.kernel, q3.lowering = #q3.lowering<grid = per_row 8, tile = [2, 8, 1]>}
//
// The grid is what the CPU kernels were written for (backends/cpu/
// KernelSource.h): code generation reads it from here and checks it.
// Attention's tile is [query heads per workgroup, rows per prefill block,
// blocks per workgroup]; the last follows the matmul cpu-select-attention-
// matmul chose (so this pass runs after it) and the tuner's measurement.
//
//===----------------------------------------------------------------------===//
#include "backends/cpu/KernelSelection.h"
#include "backends/cpu/passes/CpuPasses.h"

#include "llvm/ADT/TypeSwitch.h"

namespace q3::cpu {
#define GEN_PASS_DEF_CPUASSIGNGRIDS
#include "backends/cpu/passes/CpuPasses.h.inc"
} // namespace q3::cpu

using namespace mlir;
using namespace q3::ir;

namespace q3::cpu {
namespace {

int64_t dimOf(Value value, unsigned dim) {
  return value.getType().cast<RankedTensorType>().getDimSize(dim);
}

/// Blocks of prefill rows an attention workgroup runs: where the flash
/// kernel rounds its key blocks to bf16 (cpu-select-attention-matmul ran
/// before), several, so each rounded copy serves them all: as many as q3c
/// compile's tuner measured fastest (q3.tuning's attention_row_sets), else
/// kBf16PrefillRowSets; else one.
int64_t prefillRowSets(LoweringConfigAttr lowering, std::optional<int64_t> measured) {
  if (lowering.getMatmul() != "avx512bf16")
    return 1;
  return measured.value_or(AttentionKernel::kBf16PrefillRowSets);
}

LogicalResult assignGrid(func::FuncOp kernel, std::optional<int64_t> measuredRowSets) {
  Operation *compute = kernelComputeOp(kernel);
  LoweringConfigAttr lowering = loweringOf(kernel);
  auto columnTiles = [](int64_t columns) {
    return (columns + FusedLinearKernel::kColumnsPerWorkgroup - 1) /
           FusedLinearKernel::kColumnsPerWorkgroup;
  };
  auto assigned =
      llvm::TypeSwitch<Operation *, std::optional<LoweringConfigAttr>>(compute)
          .Case<FusedLinearOp>([&](FusedLinearOp op) {
            return lowering.withGrid("fixed", columnTiles(dimOf(op.getResult(), 1)));
          })
          .Case<LinearOp>([&](LinearOp op) -> std::optional<LoweringConfigAttr> {
            if (op.getBias())
              return std::nullopt;
            return lowering.withGrid("fixed", columnTiles(dimOf(op.getResult(), 1)));
          })
          .Case<EmbeddingOp>([&](EmbeddingOp) { return lowering.withGrid("per_row", 1); })
          .Case<QKNormRopeCacheOp>([&](QKNormRopeCacheOp op) {
            return lowering.withGrid("per_row", dimOf(op.getQuery(), 1));
          })
          .Case<AttentionOp>([&](AttentionOp op) {
            const AttentionKernel shape = attentionKernelShape(op);
            return lowering.withGrid("per_row", shape.workgroupsPerRow())
                .withTile({shape.headsPerWorkgroup(), shape.prefillBlockRows(),
                           prefillRowSets(lowering, measuredRowSets)});
          })
          .Default([](Operation *) { return std::nullopt; });
  if (!assigned)
    return kernel.emitError() << "cpu-assign-grids: the CPU backend has no kernel for "
                              << (compute ? compute->getName().getStringRef() : "nothing")
                              << " (kernel @" << kernel.getSymName()
                              << "); it needs the default fusion pipeline";
  setLowering(kernel, *assigned);
  return success();
}

struct CpuAssignGridsPass : impl::CpuAssignGridsBase<CpuAssignGridsPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    const std::optional<int64_t> rowSets = measuredInteger(module, "attention_row_sets");
    if (rowSets && (*rowSets < 1 || *rowSets > AttentionKernel::kMaxPrefillRowSets)) {
      module.emitError() << "cpu-assign-grids: q3.tuning's attention_row_sets must be 1 to "
                         << AttentionKernel::kMaxPrefillRowSets << ", not " << *rowSets;
      return signalPassFailure();
    }
    for (func::FuncOp kernel : kernelsOf(module))
      if (failed(assignGrid(kernel, rowSets)))
        return signalPassFailure();
  }
};

} // namespace

std::unique_ptr<mlir::Pass> createCpuAssignGridsPass() {
  return std::make_unique<CpuAssignGridsPass>();
}

} // namespace q3::cpu

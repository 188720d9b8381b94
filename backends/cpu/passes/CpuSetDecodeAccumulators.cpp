//===- CpuSetDecodeAccumulators.cpp - a decode row's accumulators ---------===//
//
// After:
//   @fused_linear_rms_norm_0 ... q3.lowering = #q3.lowering<...,
//       decode_streams = 2, decode_accumulators = 2>
//   @attention_0 ... q3.lowering = #q3.lowering<..., decode_accumulators = 2>
//
// A product's one-row loop sums each weight row it reads into a few vector
// accumulators, four by default so FMA latency stays off a decode step's
// path. Rows read side by side (decode_streams; SwiGLU at least its gate and
// up rows) times accumulators must fit the vector registers with room for
// the loads: on AVX2's 16 ymm registers, where each 16-lane vector takes two,
// two rows of four filled them all and LLVM spilled on every step (decode
// 1.10x with two on an AMD EPYC family 23 VM). This pass sets the most of 4,
// 2 and 1 that fit the module's target (decodeAccumulatorsFor), unless
// `accumulators` is given, for each product whose decode reads weight rows
// (not one packed at load: its column blocks sum without them).
//
// Decode attention sums a block's values into 16-lane output columns of
// each head of its workgroup; the same budget sets how many columns one pass
// over the values keeps (decodeValueAccumulatorsFor: all 8 of head_dim 128
// for two heads on AVX-512, 2 on AVX2, where 8 spilled on every FMA), unless
// `attention-accumulators` is given.
//
//===----------------------------------------------------------------------===//
#include "backends/cpu/CpuTarget.h"
#include "backends/cpu/KernelSelection.h"
#include "backends/cpu/passes/CpuPasses.h"

namespace q3::cpu {
#define GEN_PASS_DEF_CPUSETDECODEACCUMULATORS
#include "backends/cpu/passes/CpuPasses.h.inc"
} // namespace q3::cpu

using namespace mlir;
using namespace q3::ir;

namespace q3::cpu {
namespace {

/// The weight rows `kernel`'s one-row loop reads side by side, or nullopt
/// when it is no product or its decode reads no weight rows.
std::optional<int64_t> rowsReadSideBySide(func::FuncOp kernel) {
  Operation *compute = kernelComputeOp(kernel);
  if (!isa_and_nonnull<FusedLinearOp, LinearOp>(compute))
    return std::nullopt;
  const LoweringConfigAttr lowering = loweringOf(kernel);
  if (lowering.getWeightPacking() == "at_load")
    return std::nullopt;
  auto fused = dyn_cast<FusedLinearOp>(compute);
  return decodeRowsSideBySide(fused && fused.getSwiglu(), lowering.getDecodeStreams());
}

/// The shape of `kernel`'s attention when it takes the vector template, or
/// nullopt (no attention, or the scalar template: no vector accumulators).
std::optional<AttentionKernel> vectorAttentionOf(func::FuncOp kernel) {
  auto attention = dyn_cast_or_null<AttentionOp>(kernelComputeOp(kernel));
  if (!attention)
    return std::nullopt;
  AttentionKernel shape = attentionKernelShape(attention);
  if (!shape.vectorized())
    return std::nullopt;
  return shape;
}

struct CpuSetDecodeAccumulatorsPass
    : impl::CpuSetDecodeAccumulatorsBase<CpuSetDecodeAccumulatorsPass> {
  using CpuSetDecodeAccumulatorsBase::CpuSetDecodeAccumulatorsBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    const CpuTarget target = targetOf(module);
    for (func::FuncOp kernel : kernelsOf(module)) {
      if (std::optional<AttentionKernel> attention = vectorAttentionOf(kernel)) {
        if (!setAttentionAccumulators(kernel, target, *attention))
          return signalPassFailure();
        continue;
      }
      std::optional<int64_t> rows = rowsReadSideBySide(kernel);
      if (!rows)
        continue;
      if (*rows <= 0) {
        kernel.emitError() << "cpu-set-decode-accumulators: " << kernel.getSymName()
                           << " has no decode_streams: run cpu-set-decode-streams first";
        return signalPassFailure();
      }
      const int64_t count = accumulators != 0 ? accumulators : decodeAccumulatorsFor(target, *rows);
      if (!llvm::is_contained(LoweringConfigAttr::kDecodeAccumulatorCounts, count)) {
        module.emitError() << "cpu-set-decode-accumulators: accumulators must be 1, 2 or 4, got "
                           << count;
        return signalPassFailure();
      }
      setLowering(kernel, loweringOf(kernel).withDecodeAccumulators(count));
    }
  }

  bool setAttentionAccumulators(func::FuncOp kernel, const CpuTarget &target,
                                const AttentionKernel &shape) {
    const int64_t columns = shape.valueColumns();
    const int64_t count =
        attentionAccumulators != 0
            ? attentionAccumulators
            : decodeValueAccumulatorsFor(target, shape.headsPerWorkgroup(), columns);
    if (count < 1 || count > columns) {
      kernel.emitError() << "cpu-set-decode-accumulators: " << kernel.getSymName() << " has "
                         << columns << " value columns of 16 per head; "
                         << "attention-accumulators must be 1 to " << columns << ", got " << count;
      return false;
    }
    setLowering(kernel, loweringOf(kernel).withDecodeAccumulators(count));
    return true;
  }
};

} // namespace

std::unique_ptr<mlir::Pass> createCpuSetDecodeAccumulatorsPass() {
  return std::make_unique<CpuSetDecodeAccumulatorsPass>();
}

std::unique_ptr<mlir::Pass>
createCpuSetDecodeAccumulatorsPass(const CpuSetDecodeAccumulatorsOptions &options) {
  return std::make_unique<CpuSetDecodeAccumulatorsPass>(options);
}

} // namespace q3::cpu

//===- CpuSplitDecodeAttention.cpp - decode attention on every thread -----===//
//
// After (tiny: 2 head groups, threads = 16):
//   func.func private @attention_0(...) attributes {q3.kernel, q3.lowering =
//       #q3.lowering<grid = per_row 16, tile = [2, 8, 1, 8], workspace_bytes = 6272>}
//
// Decode attention's workgroups are its head groups (8 for every Qwen3), so
// on a machine with more threads the others wait while the cache streams,
// and at long contexts attention is most of a decode step's bytes. The
// fourth tile entry splits each head group's positions over that many
// workgroups (backends/cpu/KernelSource.h: AttentionKernel::decodeSplits);
// their partial results and arrival counters take workspace_bytes. The
// count: the option, else what `q3c compile --tune` measured
// (DecodeSplitTuner.h), else enough splits to cover the threads.
//
//===----------------------------------------------------------------------===//
#include "backends/cpu/CpuTarget.h"
#include "backends/cpu/KernelSelection.h"
#include "backends/cpu/passes/CpuPasses.h"
#include "backends/cpu/passes/PassErrors.h"
#include "runtime/ResourceLimits.h"

namespace q3::cpu {
#define GEN_PASS_DEF_CPUSPLITDECODEATTENTION
#include "backends/cpu/passes/CpuPasses.h.inc"
} // namespace q3::cpu

using namespace mlir;
using namespace q3::ir;

namespace q3::cpu {
namespace {

/// The threads a portable artifact's decode is split for: the machine it
/// runs on is unknown, and a split left idle costs one short pass (a split
/// takes at least 512 positions).
constexpr int64_t kPortableThreads = 16;

struct CpuSplitDecodeAttentionPass
    : impl::CpuSplitDecodeAttentionBase<CpuSplitDecodeAttentionPass> {
  using CpuSplitDecodeAttentionBase::CpuSplitDecodeAttentionBase;

  int64_t threadsFor(ModuleOp module) const {
    if (threads > 0)
      return threads;
    return targetOf(module).name == "host" ? runtime::availableCpus() : kPortableThreads;
  }

  /// The option when given, else what `q3c compile --tune` measured, else
  /// enough splits that the head groups cover the threads.
  int64_t splitsFor(const AttentionKernel &shape, std::optional<int64_t> measured,
                    int64_t threadCount) const {
    if (splits > 0)
      return splits;
    if (measured)
      return *measured;
    return shape.coveringDecodeSplits(threadCount);
  }

  LogicalResult split(func::FuncOp kernel, std::optional<int64_t> measured, int64_t threadCount) {
    LoweringConfigAttr lowering = loweringOf(kernel);
    if (lowering.getTile().size() != 3 || !lowering.hasGrid())
      return kernel.emitError() << "cpu-split-decode-attention: @" << kernel.getSymName()
                                << " needs its grid and [heads, rows, sets] tile: run "
                                   "cpu-assign-grids first";
    AttentionKernel shape = attentionKernelShape(cast<AttentionOp>(kernelComputeOp(kernel)));
    // The scalar template (head sizes not a multiple of 16) has one.
    shape.decodeSplits = shape.vectorized() ? splitsFor(shape, measured, threadCount) : 1;
    SmallVector<int64_t> tile(lowering.getTile().begin(), lowering.getTile().end());
    tile.push_back(shape.decodeSplits);
    setLowering(kernel, lowering.withGrid("per_row", shape.workgroupsPerRow())
                            .withTile(tile)
                            .withWorkspaceBytes(shape.workspaceBytes()));
    return success();
  }

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (splits < 0 || splits > AttentionKernel::kMaxDecodeSplits || threads < 0) {
      module.emitError() << "cpu-split-decode-attention: splits must be 0 (from the threads) "
                            "to "
                         << AttentionKernel::kMaxDecodeSplits << " and threads at least 0, got "
                         << int64_t(splits) << " and " << int64_t(threads);
      return signalPassFailure();
    }
    const std::optional<int64_t> measured = measuredInteger(module, "attention_decode_splits");
    if (measured && (*measured < 1 || *measured > AttentionKernel::kMaxDecodeSplits)) {
      module.emitError() << "cpu-split-decode-attention: q3.tuning's attention_decode_splits "
                            "must be 1 to "
                         << AttentionKernel::kMaxDecodeSplits << ", not " << *measured;
      return signalPassFailure();
    }
    const FailureOr<int64_t> threadCount =
        valueOrPassError(module, "cpu-split-decode-attention", [&] {
          return splits == 0 && !measured ? threadsFor(module) : int64_t(0);
        });
    if (failed(threadCount))
      return signalPassFailure();
    for (func::FuncOp kernel : kernelsOf(module))
      if (isa_and_nonnull<AttentionOp>(kernelComputeOp(kernel)) &&
          failed(split(kernel, measured, *threadCount)))
        return signalPassFailure();
  }
};

} // namespace

std::unique_ptr<mlir::Pass> createCpuSplitDecodeAttentionPass() {
  return std::make_unique<CpuSplitDecodeAttentionPass>();
}

std::unique_ptr<mlir::Pass>
createCpuSplitDecodeAttentionPass(const CpuSplitDecodeAttentionOptions &options) {
  return std::make_unique<CpuSplitDecodeAttentionPass>(options);
}

} // namespace q3::cpu

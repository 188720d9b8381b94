//===- SplitDecodeAttentionPass.cpp - vulkan-split-decode-attention -------===//
//
// A decode step's attention has one row, so one workgroup per KV head: 8
// workgroups for every Qwen3 size, on a GPU with a hundred or more
// multiprocessors. On the H200 that left decode after a 2048-token prompt at
// half of llama.cpp's speed (docs/vulkan-backend.md). This pass splits each
// KV head's positions into up to `decode_splits` runs of at least
// `decode_split_positions` positions (KernelMath's decodeSplit, the rule the
// CPU's split decode uses), one workgroup each; each run writes its query
// heads' partial softmax states to the kernel's workspace (`workspace_bytes`
// of its `#q3.lowering`: 4 x (head_dim + 2) bytes per query head and run),
// and a second dispatch merges them:
//
//   q3.lowering = #q3.lowering<grid = per_row 1, workspace_bytes = 266240>,
//   q3.lowering_config = {..., decode_split_positions = 64 : i64,
//                         decode_splits = 32 : i64, ...}      (0.6B)
//
// The default aims at 256 workgroups over the KV heads (32 runs each for 8
// KV heads): enough for a GPU of ~130 multiprocessors at 2048 positions,
// while a run of 64 positions still gives each of a workgroup's up to 32
// subgroups two. Chosen by reasoning, not yet measured on a GPU; `splits`
// (q3c's --decode-splits) overrides it, 1 turns the split off.
//
//===----------------------------------------------------------------------===//
#include "backends/vulkan/KernelFacts.h"
#include "backends/vulkan/Kernels.h"
#include "backends/vulkan/LoweringConfig.h"
#include "backends/vulkan/VulkanPasses.h"
#include "ir/Q3Ops.h"

#include "mlir/IR/BuiltinOps.h"

#include <algorithm>

using namespace mlir;

namespace q3::vulkan {
namespace {

constexpr int64_t kTargetWorkgroups = 256;
constexpr int64_t kSplitPositions = 64;

struct SplitDecodeAttentionPass : PassWrapper<SplitDecodeAttentionPass, OperationPass<ModuleOp>> {
  MLIR_DEFINE_EXPLICIT_INTERNAL_INLINE_TYPE_ID(SplitDecodeAttentionPass)
  SplitDecodeAttentionPass() = default;
  SplitDecodeAttentionPass(const SplitDecodeAttentionPass &other) : PassWrapper(other) {}
  explicit SplitDecodeAttentionPass(int64_t decodeSplits) { splits = decodeSplits; }

  StringRef getArgument() const override { return "vulkan-split-decode-attention"; }
  StringRef getDescription() const override {
    return "Vulkan: split a decode step's attention over several workgroups per KV head, "
           "merged by a second dispatch";
  }

  Option<int64_t> splits{*this, "splits",
                         llvm::cl::desc("Runs per KV head, 1 (no split) to " +
                                        std::to_string(kMaxDecodeAttentionSplits) +
                                        " (0: ceil(256 / KV heads))"),
                         llvm::cl::init(0)};

  void runOnOperation() override {
    if (splits < 0 || splits > kMaxDecodeAttentionSplits) {
      getOperation().emitError() << "vulkan-split-decode-attention: splits must be 0 (the "
                                    "default) to "
                                 << kMaxDecodeAttentionSplits << ", got " << int64_t(splits);
      return signalPassFailure();
    }
    Builder b(&getContext());
    getOperation().walk([&](func::FuncOp kernel) {
      if (!kernel->hasAttr(ir::kKernelAttrName))
        return;
      std::optional<AttentionKernel> attention = attentionFacts(kernel);
      if (!attention)
        return;
      attention->decodeSplits =
          splits > 0 ? int64_t(splits)
                     : std::clamp<int64_t>((kTargetWorkgroups + attention->kvHeads - 1) /
                                               attention->kvHeads,
                                           1, kMaxDecodeAttentionSplits);
      attention->splitPositions = kSplitPositions;
      if (attention->decodeSplits == 1)
        return;
      setLoweringConfig(kernel, "decode_splits", b.getI64IntegerAttr(attention->decodeSplits));
      setLoweringConfig(kernel, "decode_split_positions",
                        b.getI64IntegerAttr(attention->splitPositions));
      ir::setLowering(
          kernel, ir::loweringOf(kernel).withWorkspaceBytes(attentionWorkspaceBytes(*attention)));
    });
  }
};

} // namespace

std::unique_ptr<Pass> createSplitDecodeAttentionPass(int64_t splits) {
  return std::make_unique<SplitDecodeAttentionPass>(splits);
}

} // namespace q3::vulkan

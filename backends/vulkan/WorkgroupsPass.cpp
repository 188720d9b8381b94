//===- WorkgroupsPass.cpp - vulkan-workgroups -----------------------------===//
//
// The workgroups of the kernels that are not matrix products:
//  - q/k-norm + RoPE: 4 subgroups, one head vector each; the row's RoPE
//    angles are computed once per workgroup;
//  - attention: 4 subgroups splitting the positions of one (row, KV head);
//    lanes hold ceil(head_dim / 8) elements, so devices need subgroups of
//    at least 8 (`min_subgroup_size`). A decode step has one row, so only
//    one workgroup per KV head: its variant for one row takes as many
//    subgroups as 32 KiB of shared memory holds partial states for, up to
//    32 (`decode_subgroups`; 8 workgroups of 4 subgroups were 40% of a
//    0.6B decode step on an H200);
//  - attention's variant for several rows takes `prefill_rows_per_workgroup`
//    rows of a KV head per workgroup, so each key and value its subgroups
//    load serves every row's query heads (a prompt of 2048 rows read the
//    layer's cache once per row and head group before): the largest power
//    of two that keeps rows x group heads at most 8 (their running states
//    live in registers) and its shared memory within 32 KiB: 4 for 0.6B
//    (2 heads a group), 2 for 8B (4);
//  - both bind one layer's K and V cache at a time (`cache_binding =
//    "layer"`): the whole cache of 0.6B at 4096 positions is 470 MB, more
//    than a binding may span;
//  - embedding: 64 invocations striding over the row (`workgroup_size` of
//    its `#q3.lowering`).
// It also records every kernel's grid in its `#q3.lowering`, the scheduler's
// view that the manifest carries: products are column-parallel (`fixed 1`:
// rows independent, so the logits product may run on the last rows only),
// the rest run per row (`per_row 1`). The Vulkan driver sizes the real
// workgroup counts from each variant's grid (VulkanManifest.h).
//
//===----------------------------------------------------------------------===//
#include "backends/vulkan/KernelFacts.h"
#include "backends/vulkan/LoweringConfig.h"
#include "backends/vulkan/VulkanPasses.h"
#include "ir/Q3Ops.h"

#include "mlir/IR/BuiltinOps.h"

#include <algorithm>

using namespace mlir;

namespace q3::vulkan {
namespace {

constexpr int64_t kMaxDecodeAttentionSubgroups = 32;

/// Subgroups of the one-row attention variant: each keeps one partial state
/// (max, sum and head_dim accumulators per query head of the largest group)
/// in shared memory, as attentionSharedBytes counts it.
int64_t decodeAttentionSubgroups(AttentionKernel facts, int64_t subgroups) {
  facts.subgroups = 1;
  return std::clamp(kSharedMemoryBytes / attentionSharedBytes(facts), subgroups,
                    kMaxDecodeAttentionSubgroups);
}

constexpr int64_t kMaxAttentionMembers = 8;

/// Rows per workgroup of the multi-row attention variant (see above).
int64_t attentionRowsPerWorkgroup(AttentionKernel facts, int64_t subgroups) {
  const int64_t group = attentionGroupSize(facts);
  facts.subgroups = subgroups;
  int64_t rows = 1;
  while (true) {
    facts.rowsPerWorkgroup = 2 * rows;
    if (2 * rows * group > kMaxAttentionMembers || attentionSharedBytes(facts) > kSharedMemoryBytes)
      return rows;
    rows *= 2;
  }
}

struct WorkgroupsPass : PassWrapper<WorkgroupsPass, OperationPass<ModuleOp>> {
  MLIR_DEFINE_EXPLICIT_INTERNAL_INLINE_TYPE_ID(WorkgroupsPass)
  StringRef getArgument() const override { return "vulkan-workgroups"; }
  StringRef getDescription() const override {
    return "Vulkan: workgroups of the embedding, q/k-norm + RoPE and attention kernels; "
           "every kernel's grid";
  }
  void runOnOperation() override {
    Builder b(&getContext());
    getOperation().walk([&](func::FuncOp kernel) {
      if (!kernel->hasAttr(ir::kKernelAttrName))
        return;
      Operation *anchor = kernelAnchor(kernel);
      ir::LoweringConfigAttr lowering = ir::loweringOf(kernel);
      lowering = linearFacts(kernel) ? lowering.withGrid("fixed", 1)
                                     : lowering.withGrid("per_row", 1);
      if (isa_and_nonnull<ir::EmbeddingOp>(anchor))
        lowering = lowering.withWorkgroupSize({64});
      ir::setLowering(kernel, lowering);
      if (isa_and_nonnull<ir::QKNormRopeCacheOp>(anchor)) {
        setLoweringConfig(kernel, "subgroups", b.getI64IntegerAttr(4));
        setLoweringConfig(kernel, "cache_binding", b.getStringAttr("layer"));
      } else if (std::optional<AttentionKernel> attention = attentionFacts(kernel)) {
        setLoweringConfig(kernel, "subgroups", b.getI64IntegerAttr(4));
        setLoweringConfig(kernel, "decode_subgroups",
                          b.getI64IntegerAttr(decodeAttentionSubgroups(*attention, 4)));
        setLoweringConfig(kernel, "min_subgroup_size", b.getI64IntegerAttr(8));
        setLoweringConfig(kernel, "prefill_rows_per_workgroup",
                          b.getI64IntegerAttr(attentionRowsPerWorkgroup(*attention, 4)));
        setLoweringConfig(kernel, "cache_binding", b.getStringAttr("layer"));
      }
    });
  }
};

} // namespace

std::unique_ptr<Pass> createWorkgroupsPass() { return std::make_unique<WorkgroupsPass>(); }

} // namespace q3::vulkan

//===- VulkanPasses.h - the Vulkan target's decision passes ---------------===//
//
// Each pass makes one decision about every kernel of a dispatch-stage module
// and records it in the kernel's lowering config (LoweringConfig.h), the way
// IREE's KernelDispatch attaches a lowering_config that code generation then
// reads. Run in this order by addVulkanTargetPasses; `q3-opt` runs any of
// them alone (lit tests in tests/vulkan/lit).
//
//===----------------------------------------------------------------------===//
#pragma once

#include "mlir/Pass/Pass.h"
#include "mlir/Pass/PassManager.h"

#include <memory>
#include <vector>

namespace q3::vulkan {

/// vulkan-matvec: decode products (one row) as matrix-vector products, one
/// subgroup per output column or, with few columns, several
/// (`decode`, `decode_workgroup`, `decode_column_subgroups`; `columnSubgroups`
/// > 0 sets the last for every product).
std::unique_ptr<mlir::Pass> createMatVecPass(int64_t columnSubgroups = 0);
/// vulkan-tile-matmul: prefill products as a shared-memory tiled GEMM
/// (`prefill`, `prefill_tile` = rows, columns, k, register rows, register
/// columns; `tile`, when given, for every product).
std::unique_ptr<mlir::Pass> createTileMatMulPass(llvm::ArrayRef<int64_t> tile = {});
/// vulkan-split-weights: a weight (or embedding table) larger than the
/// binding size every Vulkan device allows (2^27 bytes) runs in parts
/// (`weight_rows_per_part`).
std::unique_ptr<mlir::Pass> createSplitWeightsPass();
/// vulkan-workgroups: the workgroups of the other kernels: subgroups for
/// q/k-norm + RoPE and attention (which also binds one layer's cache at a
/// time, `cache_binding = "layer"`), invocations for the embedding.
std::unique_ptr<mlir::Pass> createWorkgroupsPass();
/// vulkan-split-decode-attention: a decode step's attention in up to
/// `splits` workgroups per KV head (0: the default, 1: none), their partial
/// states in the kernel's workspace, merged by a second dispatch
/// (`decode_splits`, `decode_split_positions`, `workspace_bytes`).
std::unique_ptr<mlir::Pass> createSplitDecodeAttentionPass(int64_t splits = 0);
/// The most runs per KV head vulkan-split-decode-attention takes.
inline constexpr int64_t kMaxDecodeAttentionSplits = 256;

/// What q3c's flags decide among the Vulkan target's choices.
struct VulkanTargetOptions {
  int64_t decodeSplits = 0;          // --decode-splits (0: the pass's default)
  int64_t decodeColumnSubgroups = 0; // --decode-column-subgroups (0: vulkan-matvec's rule)
  std::vector<int64_t> prefillTile;  // --prefill-tile (empty: vulkan-tile-matmul's)
};

/// The passes above, in order.
void addVulkanTargetPasses(mlir::OpPassManager &pm, const VulkanTargetOptions &options = {});
/// Registers them with the pass registry (for q3-opt).
void registerVulkanPasses();

} // namespace q3::vulkan

//===- TileMatMulPass.cpp - vulkan-tile-matmul ----------------------------===//
//
// Prefill products (more than one row) run as a shared-memory tiled GEMM
// (MatMulKernel.cpp): 32 rows x 64 columns per workgroup, K in steps of 16,
// and 4 x 4 outputs per invocation, so 128 invocations (every Vulkan device
// has at least 128): each value loaded from memory serves 4 products from
// registers, and the two tiles take 10.6 KB of shared memory with SwiGLU
// (Vulkan promises 16 KB).
//
//   {prefill = "tiled_matmul", prefill_tile = array<i64: 32, 64, 16, 4, 4>}
//
//===----------------------------------------------------------------------===//
#include "backends/vulkan/KernelFacts.h"
#include "backends/vulkan/LoweringConfig.h"
#include "backends/vulkan/VulkanPasses.h"
#include "ir/Q3Ops.h"

#include "mlir/IR/BuiltinOps.h"

using namespace mlir;

namespace q3::vulkan {
namespace {

struct TileMatMulPass : PassWrapper<TileMatMulPass, OperationPass<ModuleOp>> {
  MLIR_DEFINE_EXPLICIT_INTERNAL_INLINE_TYPE_ID(TileMatMulPass)
  StringRef getArgument() const override { return "vulkan-tile-matmul"; }
  StringRef getDescription() const override {
    return "Vulkan: prefill products as a shared-memory tiled GEMM with register blocking";
  }
  void runOnOperation() override {
    Builder b(&getContext());
    const MatMulTiling tiling;
    getOperation().walk([&](func::FuncOp kernel) {
      if (!kernel->hasAttr(ir::kKernelAttrName) || !linearFacts(kernel))
        return;
      setLoweringConfig(kernel, "prefill", b.getStringAttr("tiled_matmul"));
      setLoweringConfig(kernel, "prefill_tile",
                        b.getDenseI64ArrayAttr({tiling.tileRows, tiling.tileColumns, tiling.tileK,
                                                tiling.registerRows, tiling.registerColumns}));
    });
  }
};

} // namespace

std::unique_ptr<Pass> createTileMatMulPass() { return std::make_unique<TileMatMulPass>(); }

} // namespace q3::vulkan

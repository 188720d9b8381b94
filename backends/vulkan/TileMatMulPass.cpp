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
// Not tuned on a GPU. `tile` (q3c's --prefill-tile) sets another for every
// product, so a device session can compare shapes: it must divide into its
// register block, step K by a multiple of 8 (a 16-byte weight unit), have
// at most 1024 invocations and fit 32 KiB of shared memory with SwiGLU's
// two weight tiles (what the devices q3c has run on offer).
//
//===----------------------------------------------------------------------===//
#include "backends/vulkan/KernelFacts.h"
#include "backends/vulkan/Kernels.h"
#include "backends/vulkan/LoweringConfig.h"
#include "backends/vulkan/VulkanPasses.h"
#include "ir/Q3Ops.h"

#include "mlir/IR/BuiltinOps.h"

using namespace mlir;

namespace q3::vulkan {
namespace {

/// Why `t` cannot be a prefill tile, or "".
std::string tileProblem(const MatMulTiling &t) {
  if (t.tileRows < 1 || t.tileColumns < 1 || t.tileK < 1 || t.registerRows < 1 ||
      t.registerColumns < 1)
    return "every entry must be positive";
  if (t.tileRows % t.registerRows != 0 || t.tileColumns % t.registerColumns != 0)
    return "the register block must divide the tile";
  if (t.tileK % 8 != 0)
    return "the K step must be a multiple of 8";
  if (t.threads() > 1024)
    return "more than 1024 invocations";
  LinearKernel swiglu;
  swiglu.swiglu = true;
  if (matMulSharedBytes(swiglu, t) > kSharedMemoryBytes)
    return "more than 32 KiB of shared memory with SwiGLU";
  return "";
}

struct TileMatMulPass : PassWrapper<TileMatMulPass, OperationPass<ModuleOp>> {
  MLIR_DEFINE_EXPLICIT_INTERNAL_INLINE_TYPE_ID(TileMatMulPass)
  TileMatMulPass() = default;
  TileMatMulPass(const TileMatMulPass &other) : PassWrapper(other) {}
  explicit TileMatMulPass(llvm::ArrayRef<int64_t> prefillTile) { tile = prefillTile; }

  ListOption<int64_t> tile{*this, "tile",
                           llvm::cl::desc("rows, columns, K step, register rows, register "
                                          "columns (default 32,64,16,4,4)")};

  StringRef getArgument() const override { return "vulkan-tile-matmul"; }
  StringRef getDescription() const override {
    return "Vulkan: prefill products as a shared-memory tiled GEMM with register blocking";
  }
  void runOnOperation() override {
    Builder b(&getContext());
    MatMulTiling tiling;
    if (!tile.empty()) {
      if (tile.size() != 5) {
        getOperation().emitError() << "vulkan-tile-matmul: tile takes 5 numbers (rows, columns, "
                                      "K step, register rows, register columns), got "
                                   << tile.size();
        return signalPassFailure();
      }
      tiling = {tile[0], tile[1], tile[2], tile[3], tile[4]};
      if (std::string problem = tileProblem(tiling); !problem.empty()) {
        getOperation().emitError()
            << "vulkan-tile-matmul: tile " << tile[0] << "," << tile[1] << "," << tile[2] << ","
            << tile[3] << "," << tile[4] << ": " << problem;
        return signalPassFailure();
      }
    }
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

std::unique_ptr<Pass> createTileMatMulPass(llvm::ArrayRef<int64_t> tile) {
  return std::make_unique<TileMatMulPass>(tile);
}

} // namespace q3::vulkan

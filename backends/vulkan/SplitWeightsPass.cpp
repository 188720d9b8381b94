//===- SplitWeightsPass.cpp - vulkan-split-weights ------------------------===//
//
// A storage-buffer binding may span maxStorageBufferRange bytes, which
// Vulkan guarantees only to be 2^27 (lavapipe has exactly that). Qwen3's
// embedding table (and tied lm_head) is larger: 151936 x 1024 bf16 is
// 311 MB. Such a weight runs in parts of `weight_rows_per_part` rows, one
// dispatch per part (the driver binds each part's rows, the kernel learns
// the part's first row and row count from push constants). Parts hold a
// multiple of the prefill tile's columns and start 256-byte aligned. A
// SwiGLU weight is bound as its gate and up halves (each of the output's
// rows), so the halves are what must fit: Qwen3-8B's gate/up is 201 MB,
// each half 100 MB.
//
//   {weight_rows_per_part = 65536 : i64}   (0.6B's lm_head: 3 parts)
//
//===----------------------------------------------------------------------===//
#include "backends/vulkan/KernelCompiler.h"
#include "backends/vulkan/KernelFacts.h"
#include "backends/vulkan/LoweringConfig.h"
#include "backends/vulkan/VulkanPasses.h"
#include "ir/Q3Ops.h"
#include "runtime/vulkan/VulkanKernelABI.h"

#include "mlir/IR/BuiltinOps.h"

using namespace mlir;

namespace q3::vulkan {
namespace {

struct SplitWeightsPass : PassWrapper<SplitWeightsPass, OperationPass<ModuleOp>> {
  MLIR_DEFINE_EXPLICIT_INTERNAL_INLINE_TYPE_ID(SplitWeightsPass)
  StringRef getArgument() const override { return "vulkan-split-weights"; }
  StringRef getDescription() const override {
    return "Vulkan: run weights larger than one storage-buffer binding in parts";
  }
  void runOnOperation() override {
    Builder b(&getContext());
    const int64_t limit = runtime::vulkan::kPortableBindingBytes;
    getOperation().walk([&](func::FuncOp kernel) {
      if (!kernel->hasAttr(ir::kKernelAttrName))
        return;
      int64_t perPart = 0;
      if (std::optional<LinearKernel> linear = linearFacts(kernel)) {
        auto tile = loweringConfig(kernel, "prefill_tile").dyn_cast_or_null<DenseI64ArrayAttr>();
        // SwiGLU binds its gate and up halves separately: a half must fit.
        perPart = KernelCompiler::rowsPerPart(
            linear->swiglu ? linear->outFeatures : linear->weightRows(),
            linear->inFeatures * dtypeBytes(linear->weight), limit, tile ? tile[1] : 1);
      } else if (std::optional<EmbeddingKernel> table = embeddingFacts(kernel)) {
        perPart = KernelCompiler::rowsPerPart(table->vocab,
                                              table->hidden * dtypeBytes(table->table), limit, 1);
      }
      if (perPart)
        setLoweringConfig(kernel, "weight_rows_per_part", b.getI64IntegerAttr(perPart));
    });
  }
};

} // namespace

std::unique_ptr<Pass> createSplitWeightsPass() { return std::make_unique<SplitWeightsPass>(); }

} // namespace q3::vulkan

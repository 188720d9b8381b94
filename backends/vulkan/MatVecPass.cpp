//===- MatVecPass.cpp - vulkan-matvec -------------------------------------===//
//
// A decode step multiplies one row by every weight: bandwidth-bound, so the
// weight stream decides the kernel. Each matrix product gets matrix-vector
// variants: one subgroup per output column, its lanes reading the weight row
// in 16-byte units (MatVecKernel.cpp), in workgroups of 128 invocations (the
// driver may use fewer on a device that allows fewer); one for a single row
// and one for up to `decode_rows` rows, where each weight load serves every
// row (short prompts: a tiled GEMM would compute a whole 32-row tile).
//
//   {decode = "matvec", decode_rows = 8 : i64, decode_workgroup = 128 : i64,
//    target = "vulkan"}
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

constexpr int64_t kDecodeWorkgroup = 128;
constexpr int64_t kMatVecRows = 8;

struct MatVecPass : PassWrapper<MatVecPass, OperationPass<ModuleOp>> {
  MLIR_DEFINE_EXPLICIT_INTERNAL_INLINE_TYPE_ID(MatVecPass)
  StringRef getArgument() const override { return "vulkan-matvec"; }
  StringRef getDescription() const override {
    return "Vulkan: decode products as matrix-vector products, a subgroup per column";
  }
  void runOnOperation() override {
    Builder b(&getContext());
    getOperation().walk([&](func::FuncOp kernel) {
      if (!kernel->hasAttr(ir::kKernelAttrName) || !linearFacts(kernel))
        return;
      setLoweringConfig(kernel, "decode", b.getStringAttr("matvec"));
      setLoweringConfig(kernel, "decode_rows", b.getI64IntegerAttr(kMatVecRows));
      setLoweringConfig(kernel, "decode_workgroup", b.getI64IntegerAttr(kDecodeWorkgroup));
    });
  }
};

} // namespace

std::unique_ptr<Pass> createMatVecPass() { return std::make_unique<MatVecPass>(); }

} // namespace q3::vulkan

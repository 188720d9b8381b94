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
// A product with few columns gets `decode_column_subgroups` = C subgroups
// per column, splitting its K: on the H200 one subgroup per column left o
// and down (1024 columns) at 450-550 GB/s while the 152k-column lm_head
// streamed 2750. C is the power of two that brings the product to 8192
// subgroups (a GPU of ~130 multiprocessors holds ~8400 resident 32-wide
// ones), at most 8, and no more than keep one 16-byte unit per lane of a
// 32-wide subgroup: 0.6B's o and down 8, q/k/v 2, gate/up 4, lm_head 1.
// Chosen from that profile, not yet measured with the split.
//
//   {decode = "matvec", decode_column_subgroups = 8 : i64, decode_rows = 8 : i64,
//    decode_workgroup = 128 : i64, target = "vulkan"}
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

constexpr int64_t kDecodeWorkgroup = 128;
constexpr int64_t kMatVecRows = 8;
constexpr int64_t kTargetSubgroups = 8192;

/// Subgroups per column of a product with `columns` outputs and
/// `unitsPerRow` 16-byte weight units per column (see above).
int64_t columnSubgroups(int64_t columns, int64_t unitsPerRow) {
  int64_t c = 1;
  while (c < kMaxColumnSubgroups && columns * c < kTargetSubgroups &&
         unitsPerRow >= 2 * c * kWideSubgroupSize)
    c *= 2;
  return c;
}

struct MatVecPass : PassWrapper<MatVecPass, OperationPass<ModuleOp>> {
  MLIR_DEFINE_EXPLICIT_INTERNAL_INLINE_TYPE_ID(MatVecPass)
  MatVecPass() = default;
  MatVecPass(const MatVecPass &other) : PassWrapper(other) {}
  explicit MatVecPass(int64_t subgroupsPerColumn) { columnSubgroupsOption = subgroupsPerColumn; }

  Option<int64_t> columnSubgroupsOption{
      *this, "column-subgroups",
      llvm::cl::desc("Subgroups per output column of every product: 0 (the rule above), or a "
                     "power of two from 1 to 8"),
      llvm::cl::init(0)};

  StringRef getArgument() const override { return "vulkan-matvec"; }
  StringRef getDescription() const override {
    return "Vulkan: decode products as matrix-vector products, a subgroup per column";
  }
  void runOnOperation() override {
    const int64_t forced = columnSubgroupsOption;
    if (forced != 0 && !validColumnSubgroups(forced)) {
      getOperation().emitError() << "vulkan-matvec: column-subgroups must be 0 (the default) or "
                                    "a power of two up to "
                                 << kMaxColumnSubgroups << ", got " << forced;
      return signalPassFailure();
    }
    Builder b(&getContext());
    getOperation().walk([&](func::FuncOp kernel) {
      if (!kernel->hasAttr(ir::kKernelAttrName) || !linearFacts(kernel))
        return;
      setLoweringConfig(kernel, "decode", b.getStringAttr("matvec"));
      setLoweringConfig(kernel, "decode_rows", b.getI64IntegerAttr(kMatVecRows));
      setLoweringConfig(kernel, "decode_workgroup", b.getI64IntegerAttr(kDecodeWorkgroup));
      const LinearKernel linear = *linearFacts(kernel);
      const int64_t units = linear.inFeatures * dtypeBytes(linear.weight) / 16;
      if (int64_t c = forced > 0 ? forced : columnSubgroups(linear.outFeatures, units); c > 1)
        setLoweringConfig(kernel, "decode_column_subgroups", b.getI64IntegerAttr(c));
    });
  }
};

} // namespace

std::unique_ptr<Pass> createMatVecPass(int64_t columnSubgroups) {
  return std::make_unique<MatVecPass>(columnSubgroups);
}

} // namespace q3::vulkan

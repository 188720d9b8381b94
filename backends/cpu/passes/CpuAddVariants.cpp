//===- CpuAddVariants.cpp - the products' alternatives for a portable CPU -===//
//
// After (cpu = x86-64-v4, a bf16 product with K % 32 == 0; x86-64-v3 gets the
// f32 tiles of 1, 3 and 4 rows beside its default 2 instead):
//   func.func private @fused_linear_rms_norm_0(...) attributes {q3.kernel,
//       q3.lowering = #q3.lowering<grid = fixed 64, matmul = f32, tile = [6, 2], ...>,
//       q3.variants = [#q3.lowering<grid = fixed 64, matmul = avx512bf16, tile = [6, 2], ...>,
//                      #q3.lowering<..., matmul = avx512bf16, tile = [8, 2], ...>,
//                      #q3.lowering<..., matmul = amx, tile = [6, 2], ...>]}
//   func.func private @attention_0(...) attributes {q3.kernel,
//       q3.lowering = #q3.lowering<grid = per_row 4, matmul = f32, tile = [2, 16, 1], ...>,
//       q3.variant_choice = "like_products",
//       q3.variants = [#q3.lowering<..., matmul = avx512bf16, tile = [2, 16, 2], ...>]}
//
// A portable artifact cannot know whether the CPU it meets has AVX512-BF16
// or AMX, nor which tile is fastest there (vdpbf16ps won by 40% on an AMD
// family 26 and lost on a Sapphire Rapids; among AVX2's 16 registers the
// best f32 tile height is a matter of measurement too): it carries them all,
// and the runtime picks by CPUID and a timed dispatch at load. Attention's
// prefill cost grows with the prompt, so a 32-row timing cannot pick its
// instructions: it follows the products' pick instead (the rule
// cpu-select-attention-matmul applies at compile time, where the products'
// choice is the measurement of vdpbf16ps on the CPU).
//
//===----------------------------------------------------------------------===//
#include "backends/cpu/CpuTarget.h"
#include "backends/cpu/KernelSelection.h"
#include "backends/cpu/passes/CpuPasses.h"
#include "backends/cpu/passes/PassErrors.h"

#include <vector>

namespace q3::cpu {
#define GEN_PASS_DEF_CPUADDVARIANTS
#include "backends/cpu/passes/CpuPasses.h.inc"
} // namespace q3::cpu

using namespace mlir;
using namespace q3::ir;

namespace q3::cpu {
namespace {

/// The portable levels: AVX-512 CPUs differ in the prefill instructions,
/// AVX2 ones only in the tile height that runs best.
constexpr const char *kPortableAvx512 = "x86-64-v4";
constexpr const char *kPortableAvx2 = "x86-64-v3";

/// The alternatives to `lowering` (an f32 column-block product's) that a
/// `level` artifact carries; K is the product's depth.
SmallVector<Attribute> variantsFor(StringRef level, LoweringConfigAttr lowering, int64_t depth,
                                   bool bf16) {
  SmallVector<Attribute> variants;
  if (level == kPortableAvx2 || !bf16) {
    // Only the tile height to choose: AVX2, or an f16 weight (f32 FMAs only).
    const std::vector<int64_t> heights =
        level == kPortableAvx2 ? std::vector<int64_t>{1, 2, 3, 4} : std::vector<int64_t>{4, 6, 8};
    for (int64_t rows : heights)
      if (lowering.getTile().empty() || lowering.getTile()[0] != rows)
        variants.push_back(lowering.withTile({rows, 2}));
    return variants;
  }
  for (int64_t rows : {6, 8})
    variants.push_back(lowering.withMatmul("avx512bf16").withTile({rows, 2}));
  // The tile unit takes 32 k per step and reads weights packed at load.
  if (depth % 32 == 0 && !lowering.packsPerCall())
    variants.push_back(lowering.withMatmul("amx").withTile({6, 2}));
  return variants;
}

/// Gives an f32 attention prefill the bf16 flash kernel can run that kernel
/// as its one variant (with its default row sets), chosen like the products.
void addAttentionVariant(func::FuncOp kernel, AttentionOp attention) {
  LoweringConfigAttr lowering = loweringOf(kernel);
  const bool f32 = lowering.getMatmul().empty() || lowering.getMatmul() == "f32";
  SmallVector<int64_t> tile(lowering.getTile().begin(), lowering.getTile().end());
  if (!f32 || tile.size() < 3 || !attentionKernelShape(attention).bf16Flashable())
    return;
  tile[2] = AttentionKernel::kBf16PrefillRowSets;
  MLIRContext *context = kernel.getContext();
  kernel->setAttr(kVariantsAttrName,
                  ArrayAttr::get(context, {lowering.withMatmul("avx512bf16").withTile(tile)}));
  kernel->setAttr(kVariantChoiceAttrName, StringAttr::get(context, kVariantChoiceLikeProducts));
}

struct CpuAddVariantsPass : impl::CpuAddVariantsBase<CpuAddVariantsPass> {
  using CpuAddVariantsBase::CpuAddVariantsBase;
  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (!enabled)
      return;
    const FailureOr<CpuTarget> found =
        valueOrPassError(module, "cpu-add-variants", [&] { return targetOf(module); });
    if (failed(found))
      return signalPassFailure();
    const CpuTarget &target = *found;
    if (target.name != kPortableAvx512 && target.name != kPortableAvx2)
      return;
    for (func::FuncOp kernel : kernelsOf(module)) {
      if (auto op = dyn_cast_or_null<AttentionOp>(kernelComputeOp(kernel))) {
        if (attention && target.name == kPortableAvx512) // AVX2 has no vdpbf16ps
          addAttentionVariant(kernel, op);
        continue;
      }
      LoweringConfigAttr lowering = loweringOf(kernel);
      std::optional<int64_t> depth = tiledProductDepth(kernel);
      if (!depth || lowering.getMatmul() != "f32")
        continue;
      kernel->setAttr(kVariantsAttrName,
                      ArrayAttr::get(&getContext(), variantsFor(target.name, lowering, *depth,
                                                                tiledProductIsBf16(kernel))));
    }
  }
};

} // namespace

std::unique_ptr<mlir::Pass> createCpuAddVariantsPass() {
  return std::make_unique<CpuAddVariantsPass>();
}

std::unique_ptr<mlir::Pass> createCpuAddVariantsPass(const CpuAddVariantsOptions &options) {
  return std::make_unique<CpuAddVariantsPass>(options);
}

} // namespace q3::cpu

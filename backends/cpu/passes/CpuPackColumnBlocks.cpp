//===- CpuPackColumnBlocks.cpp - where 16-bit product weights go ----------===//
//
// With packing at-load:
// Before:
//   %w = q3.concat_rows %wq, %wk, %wv : ... -> tensor<4096x1024xbf16>
//   %qkv = q3.dispatch @fused_linear_rms_norm_0(%x, %w, %g) : (..., tensor<4096x1024xbf16>, ...)
//   func.func private @fused_linear_rms_norm_0(%arg0: ..., %arg1: tensor<4096x1024xbf16>, ...)
// After:
//   %w = q3.concat_rows %wq, %wk, %wv : ... -> tensor<4096x1024xbf16>
//   %wp = q3.pack_column_blocks %w : tensor<4096x1024xbf16>
//         -> tensor<4096x1024xbf16, #q3.column_blocks>
//   %qkv = q3.dispatch @fused_linear_rms_norm_0(%x, %wp, %g) : (...)
//   func.func private @fused_linear_rms_norm_0(%arg0: ...,
//       %arg1: tensor<4096x1024xbf16, #q3.column_blocks>, ...)
//
// A weight that several dispatches read is packed once.
//
// With packing per-call the IR keeps the row-major weight and only the
// lowering changes:
//   func.func private @fused_linear_rms_norm_0(..., %arg1: tensor<4096x1024xbf16>, ...)
//       attributes {q3.lowering = #q3.lowering<weight_packing = per_call>}
//
// Packing at load copies every weight into fresh memory, and on the VMs this
// project measures a fresh page can cost far more than the copy (the
// hypervisor backs it on first touch): 0.6B loaded in 2.2-3.5 s packed at
// load on one, 0.2 s on another, 0.004 s bound in place. Per call, each
// prefill packs its 32-row panels (0-5% of a 128-row prefill on an AMD
// family 26), and decode reads the row-major weights, as fast on one
// machine and up to 20% slower on another
// (backends/cpu/WeightPackingTuner.h). `auto` packs bf16 weights at load
// where the target may run AMX, whose tile unit reads the packed weight;
// elsewhere it takes q3.tuning's weight_packing, which the tuner sets from
// what packing costs the load and gains decode on the host; with nothing
// measured, per call. bf16 and
// f16 weights are packed (the layout moves 16-bit pairs); those that do not
// fit (f32, rows not a multiple of 16, an odd K) stay row-major and take the
// row-major kernels.
//
//===----------------------------------------------------------------------===//
#include "backends/cpu/CpuPipeline.h"
#include "backends/cpu/passes/CpuPasses.h"
#include "backends/cpu/passes/PassErrors.h"
#include "ir/BuildGraph.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/StringMap.h"

namespace q3::cpu {
#define GEN_PASS_DEF_CPUPACKCOLUMNBLOCKS
#include "backends/cpu/passes/CpuPasses.h.inc"
} // namespace q3::cpu

using namespace mlir;
using namespace q3::ir;

namespace q3::cpu {
namespace {

/// The weight of a product `op` computes (no bias: the column-block kernels
/// add none), or null.
Value productWeight(Operation *op) {
  if (auto fused = dyn_cast_or_null<FusedLinearOp>(op))
    return fused.getWeight();
  if (auto linear = dyn_cast_or_null<LinearOp>(op); linear && !linear.getBias())
    return linear.getWeight();
  return nullptr;
}

/// Whether a weight of `type` can be stored as column blocks: bf16 or f16,
/// row-major, rows a multiple of 16, an even K.
bool packableType(RankedTensorType type) {
  const Type element = type.getElementType();
  return (element.isBF16() || element.isF16()) && !type.getEncoding() && type.getRank() == 2 &&
         type.getDimSize(0) % 16 == 0 && type.getDimSize(1) % 2 == 0;
}

/// The weight argument of a product kernel, when its weight can be packed.
std::optional<unsigned> packableWeightArgument(func::FuncOp kernel) {
  Value weight = productWeight(kernelComputeOp(kernel));
  auto argument = weight.dyn_cast_or_null<BlockArgument>();
  if (!argument || argument.getOwner() != &kernel.getBody().front() ||
      !packableType(weight.getType().cast<RankedTensorType>()))
    return std::nullopt;
  return argument.getArgNumber();
}

void retypeArgument(func::FuncOp kernel, unsigned index, Type type) {
  kernel.getArgument(index).setType(type);
  kernel.setType(FunctionType::get(kernel.getContext(),
                                   kernel.getBody().front().getArgumentTypes(),
                                   kernel.getFunctionType().getResults()));
}

struct CpuPackColumnBlocksPass : impl::CpuPackColumnBlocksBase<CpuPackColumnBlocksPass> {
  using CpuPackColumnBlocksBase::CpuPackColumnBlocksBase;

  /// Where bf16 and where f16 weights go (at_load or per_call), or an error
  /// message.
  struct Placement {
    std::string bf16, f16;
  };
  FailureOr<Placement> resolve(ModuleOp module) {
    return valueOrPassError(module, "cpu-pack-column-blocks", [&] {
      // Only auto asks the target and the tuner's measurement.
      if (packing != "auto")
        return Placement{resolveWeightPacking(packing, {}, DType::BF16),
                         resolveWeightPacking(packing, {}, DType::F16)};
      const CpuTarget target = targetOf(module);
      const std::string measured = measuredPacking(module);
      return Placement{resolveWeightPacking(packing, target, DType::BF16, measured),
                       resolveWeightPacking(packing, target, DType::F16, measured)};
    });
  }

  /// q3.tuning's weight_packing, or "" (throws when it is not a string).
  static std::string measuredPacking(ModuleOp module) {
    DictionaryAttr tuning = tuningOf(module);
    Attribute value = tuning ? tuning.get(kMeasuredWeightPackingKey) : nullptr;
    if (!value)
      return "";
    auto text = value.dyn_cast<StringAttr>();
    if (!text)
      throw std::invalid_argument("q3.tuning's " + kMeasuredWeightPackingKey.str() +
                                  " must be \"at_load\" or \"per_call\"");
    return text.str();
  }

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto forward = module.lookupSymbol<func::FuncOp>(kEntryPoint);
    if (!forward) {
      module.emitError() << "cpu-pack-column-blocks: no func.func @" << kEntryPoint;
      return signalPassFailure();
    }
    FailureOr<Placement> placement = resolve(module);
    if (failed(placement))
      return signalPassFailure();
    llvm::StringMap<unsigned> weightArgument; // kernel -> its packed argument
    for (func::FuncOp kernel : kernelsOf(module))
      if (std::optional<unsigned> index = packableWeightArgument(kernel)) {
        auto type = kernel.getArgument(*index).getType().cast<RankedTensorType>();
        const std::string &where =
            type.getElementType().isBF16() ? placement->bf16 : placement->f16;
        setLowering(kernel, loweringOf(kernel).withWeightPacking(where));
        if (where != "at_load")
          continue;
        retypeArgument(kernel, *index,
                       RankedTensorType::get(type.getShape(), type.getElementType(),
                                             ColumnBlocksAttr::get(&getContext())));
        weightArgument[kernel.getSymName()] = *index;
      }
    llvm::DenseMap<Value, Value> packed; // weight -> its packed copy
    forward.walk([&](DispatchOp dispatch) {
      auto it = weightArgument.find(dispatch.getKernel());
      if (it == weightArgument.end())
        return;
      Value weight = dispatch.getOperand(it->second);
      Value &copy = packed[weight];
      if (!copy) {
        OpBuilder builder(dispatch);
        auto type = weight.getType().cast<RankedTensorType>();
        copy = builder.create<PackColumnBlocksOp>(
            weight.getLoc(),
            RankedTensorType::get(type.getShape(), type.getElementType(),
                                  ColumnBlocksAttr::get(&getContext())),
            weight);
      }
      dispatch.setOperand(it->second, copy);
    });
  }
};

} // namespace

int64_t packableWeightBytes(ModuleOp module) {
  llvm::DenseSet<Value> counted;
  int64_t bytes = 0;
  module.walk([&](Operation *op) {
    Value weight = productWeight(op);
    if (!weight || !counted.insert(weight).second)
      return;
    auto type = weight.getType().cast<RankedTensorType>();
    if (packableType(type) && type.hasStaticShape())
      bytes += type.getNumElements() * 2;
  });
  return bytes;
}

std::string resolveWeightPacking(const std::string &option, const CpuTarget &target, DType element,
                                 const std::string &measured) {
  if (option == "at-load")
    return "at_load";
  if (option == "per-call")
    return "per_call";
  if (option != "auto")
    throw std::invalid_argument("packing must be auto, at-load or per-call, got '" + option + "'");
  // The tile unit reads packed bf16 weights: a host with AMX, or a portable
  // AVX-512 artifact, which carries an AMX variant. An f16 weight never
  // takes it: like a bf16 one elsewhere, it goes where the tuner measured
  // packing at load pays for its cost.
  const bool mayRunAmx = target.name == "x86-64-v4" ||
                         (targetHas(target, "amx-tile") && targetHas(target, "amx-bf16"));
  if (mayRunAmx && element == DType::BF16)
    return "at_load";
  if (measured.empty())
    return "per_call";
  if (measured != "at_load" && measured != "per_call")
    throw std::invalid_argument("the measured weight packing must be at_load or per_call, got '" +
                                measured + "'");
  return measured;
}

std::unique_ptr<mlir::Pass> createCpuPackColumnBlocksPass() {
  return std::make_unique<CpuPackColumnBlocksPass>();
}

std::unique_ptr<mlir::Pass>
createCpuPackColumnBlocksPass(const CpuPackColumnBlocksOptions &options) {
  return std::make_unique<CpuPackColumnBlocksPass>(options);
}

} // namespace q3::cpu

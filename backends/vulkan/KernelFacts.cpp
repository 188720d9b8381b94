#include "backends/vulkan/KernelFacts.h"
#include "backends/vulkan/LoweringConfig.h"

#include "ir/Q3Ops.h"

#include "mlir/IR/BuiltinTypes.h"

#include <stdexcept>

using namespace mlir;

namespace q3::vulkan {
namespace {

llvm::ArrayRef<int64_t> shapeOf(Value v) { return v.getType().cast<RankedTensorType>().getShape(); }

} // namespace

std::optional<LinearKernel> linearFacts(func::FuncOp kernel) {
  Operation *anchor = kernelAnchor(kernel);
  LinearKernel facts;
  facts.name = kernel.getSymName().str();
  Value weight, result;
  if (auto fused = dyn_cast_or_null<ir::FusedLinearOp>(anchor)) {
    weight = fused.getWeight();
    result = fused.getResult();
    if (auto eps = fused.getRmsNormEps())
      facts.normEps = eps->convertToDouble();
    facts.swiglu = fused.getSwiglu();
    facts.residual = bool(fused.getResidual());
    if (Value gain = fused.getGain())
      facts.gain = dtypeOf(gain.getType());
  } else if (auto linear = dyn_cast_or_null<ir::LinearOp>(anchor); linear && !linear.getBias()) {
    weight = linear.getWeight();
    result = linear.getResult();
  } else {
    return std::nullopt;
  }
  facts.inFeatures = shapeOf(weight)[1];
  facts.outFeatures = shapeOf(result)[1];
  facts.weight = dtypeOf(weight.getType());
  return facts;
}

std::optional<EmbeddingKernel> embeddingFacts(func::FuncOp kernel) {
  auto embedding = dyn_cast_or_null<ir::EmbeddingOp>(kernelAnchor(kernel));
  if (!embedding)
    return std::nullopt;
  auto table = embedding.getTable().getType().cast<RankedTensorType>();
  return EmbeddingKernel{kernel.getSymName().str(), table.getShape()[0], table.getShape()[1],
                         dtypeOf(table)};
}

std::optional<AttentionKernel> attentionFacts(func::FuncOp kernel) {
  auto attention = dyn_cast_or_null<ir::AttentionOp>(kernelAnchor(kernel));
  if (!attention)
    return std::nullopt;
  auto query = shapeOf(attention.getQuery());
  AttentionKernel facts{kernel.getSymName().str(),
                        query[1],
                        shapeOf(attention.getKeys())[1],
                        query[2],
                        {},
                        attention.getScale().convertToDouble()};
  for (int64_t h = 0; h < facts.queryHeads; ++h)
    facts.kvHeadMap.push_back(attention.kvHeadFor(h));
  return facts;
}

} // namespace q3::vulkan

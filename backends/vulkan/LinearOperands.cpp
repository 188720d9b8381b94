#include "backends/vulkan/LinearOperands.h"

#include "mlir/IR/BuiltinTypes.h"

using namespace mlir;

namespace q3::vulkan {

bool linearVectorInput(MLIRContext &context, const LinearKernel &kernel) {
  return kernel.inFeatures % 4 == 0 &&
         WeightAccess(context, kernel.weight, kernel.inFeatures).elementsPerUnit() % 4 == 0;
}

LinearOperands::LinearOperands(MLIRContext &context, const LinearKernel &kernel)
    : weight(context, kernel.weight, kernel.inFeatures),
      vectorX(linearVectorInput(context, kernel)), slots(kernel) {
  Type f32 = FloatType::getF32(&context);
  bindings = {{"x", vectorX ? Type(VectorType::get({4}, f32)) : f32},
              {"weight", weight.element()}};
  if (kernel.swiglu)
    bindings.push_back({"weight_up", weight.element()});
  if (kernel.gain) {
    gain.emplace(context, *kernel.gain, kernel.inFeatures, /*maxElementsPerUnit=*/2);
    bindings.push_back({"gain", gain->element()});
  }
  if (kernel.residual)
    bindings.push_back({"residual", f32});
  bindings.push_back({"y", f32});
}

} // namespace q3::vulkan

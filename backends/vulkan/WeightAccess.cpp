//===- WeightAccess.cpp - how a kernel reads rows of a stored matrix ------===//
#include "backends/vulkan/WeightAccess.h"
#include "backends/common/KernelMath.h"
#include "backends/vulkan/GpuKernelBuilder.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/BuiltinTypes.h"

#include <stdexcept>

using namespace mlir;

namespace q3::vulkan {

Type cacheElementType(MLIRContext &context, DType storage) {
  if (storage == DType::F16)
    return FloatType::getF16(&context);
  if (storage == DType::BF16)
    return IntegerType::get(&context, 16); // the bits, one element per 16-bit store
  return FloatType::getF32(&context);
}

WeightAccess::WeightAccess(MLIRContext &context, DType storage, int64_t columns,
                           int64_t maxElementsPerUnit)
    : storage_(storage), columns_(columns) {
  // Widest first; each must divide a row so rows start on unit boundaries.
  std::vector<int64_t> widths;
  switch (storage) {
  case DType::F32:
    widths = {4, 1};
    break;
  case DType::F16:
    widths = {4, 2, 1};
    break;
  case DType::BF16:
    widths = {8, 2};
    break;
  }
  elementsPerUnit_ = 0;
  for (int64_t w : widths)
    if (w <= maxElementsPerUnit && columns % w == 0) {
      elementsPerUnit_ = w;
      break;
    }
  if (elementsPerUnit_ == 0)
    throw std::runtime_error("the Vulkan kernels read bf16 rows as 32-bit words and need an even "
                             "row length, found " + std::to_string(columns));
  Type f32 = FloatType::getF32(&context), f16 = FloatType::getF16(&context),
       i32 = IntegerType::get(&context, 32);
  switch (storage) {
  case DType::F32:
    element_ = elementsPerUnit_ == 1 ? f32 : VectorType::get({elementsPerUnit_}, f32);
    break;
  case DType::F16:
    element_ = elementsPerUnit_ == 1 ? f16 : VectorType::get({elementsPerUnit_}, f16);
    break;
  case DType::BF16:
    element_ = elementsPerUnit_ == 2 ? i32 : VectorType::get({elementsPerUnit_ / 2}, i32);
    break;
  }
}

int64_t WeightAccess::unitBytes() const { return elementsPerUnit_ * dtypeBytes(storage_); }

Value WeightAccess::unitsBefore(GpuKernelBuilder &k, Value row) const {
  return k.mul(row, k.index(unitsPerRow()));
}

std::vector<Value> WeightAccess::loadUnit(GpuKernelBuilder &k, Value memref,
                                          Value unitIndex) const {
  Value unit = k.load(memref, unitIndex);
  std::vector<Value> values;
  auto widenScalar = [&](Value v) {
    return storage_ == DType::F16 ? kernels::widenF16(k.b, k.loc, v) : v;
  };
  if (storage_ == DType::BF16) {
    // Each 32-bit word holds two bf16: the even column low, the odd high.
    int64_t words = elementsPerUnit_ / 2;
    for (int64_t w = 0; w < words; ++w) {
      Value word = words == 1 ? unit : k.extract(unit, w);
      values.push_back(kernels::widenBf16Low(k.b, k.loc, word));
      values.push_back(kernels::widenBf16High(k.b, k.loc, word));
    }
    return values;
  }
  if (elementsPerUnit_ == 1)
    return {widenScalar(unit)};
  for (int64_t e = 0; e < elementsPerUnit_; ++e)
    values.push_back(widenScalar(k.extract(unit, e)));
  return values;
}

Value WeightAccess::loadElement(GpuKernelBuilder &k, Value memref, Value rowUnit,
                                Value column) const {
  Value perUnit = k.index(elementsPerUnit_);
  std::vector<Value> values = loadUnit(k, memref, k.add(rowUnit, k.div(column, perUnit)));
  if (values.size() == 1)
    return values[0];
  Value within = k.rem(column, perUnit);
  Value chosen = values.back();
  for (size_t e = values.size() - 1; e-- > 0;)
    chosen = k.b.create<arith::SelectOp>(k.loc, k.eq(within, k.index(int64_t(e))), values[e],
                                         chosen);
  return chosen;
}

std::vector<Value> WeightAccess::loadColumns(GpuKernelBuilder &k, Value memref, Value rowUnit,
                                             Value first, int64_t firstMultiple,
                                             int64_t count) const {
  std::vector<Value> values;
  if (firstMultiple % elementsPerUnit_ == 0 && count % elementsPerUnit_ == 0) {
    Value unit = k.add(rowUnit, k.div(first, k.index(elementsPerUnit_)));
    for (int64_t u = 0; u < count / elementsPerUnit_; ++u)
      for (Value v : loadUnit(k, memref, k.add(unit, k.index(u))))
        values.push_back(v);
    return values;
  }
  for (int64_t e = 0; e < count; ++e)
    values.push_back(loadElement(k, memref, rowUnit, k.add(first, k.index(e))));
  return values;
}

} // namespace q3::vulkan
